#include "packoracle/fastcheck/jsonl_reader.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include "line_parser.h"
#include "packoracle/oracle/error.h"
#include "packoracle/properties/row_members.h"

namespace packoracle::fastcheck {
namespace {

namespace od = simdjson::ondemand;

// Every helper answers false when the line is not one it takes: the nlohmann reader then reads the line.
// A well-formed `null` (type() looks at the first byte only: `nulx` is json_type::null to it; fuzz finding).
bool IsNull(od::value& v) {
  bool null = false;
  return !v.is_null().get(null) && null;
}

template <class T>
bool Ints(od::value v, std::vector<T>& out) {
  out.clear();
  od::array a;
  if (v.get_array().get(a)) return false;
  for (auto element : a) {
    std::int64_t x;
    if (element.get_int64().get(x)) return false;
    out.push_back(static_cast<T>(x));
  }
  return true;
}

// A number as nlohmann gives it: an integer written `-0` is +0.0 there but -0.0 to simdjson's get_double, so
// any negative zero goes to nlohmann (review finding; -0.0 written as a float is still -0.0 that way).
template <class Value>  // od::value, or an array element (simdjson_result<od::value>)
bool Double(Value&& v, double& out) {
  return !v.get_double().get(out) && !(out == 0 && std::signbit(out));
}

bool Numbers(od::value v, std::vector<double>& out) {
  out.clear();
  od::array a;
  if (v.get_array().get(a)) return false;
  for (auto element : a) {
    double x;
    if (!Double(element, x)) return false;
    out.push_back(x);
  }
  return true;
}

bool Int(od::value v, std::int64_t& out) { return !v.get_int64().get(out); }
bool Number(od::value v, double& out) { return Double(v, out); }

bool String(od::value v, std::string& out) {
  std::string_view s;
  if (v.get_string().get(s)) return false;
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20) return false;  // let nlohmann judge control characters
  out.assign(s);
  return true;
}

// An ignored field's value is still validated, as nlohmann parses the whole line. Recursive, so a nesting
// deeper than kMaxDepth goes to nlohmann, which parses without recursion (On-Demand checks no depth in a
// release build: 100,000 `[` would overflow the stack here; review finding).
constexpr int kMaxDepth = 256;

bool Validate(od::value v, int depth = 0) {
  if (depth > kMaxDepth) return false;
  od::json_type type;
  if (v.type().get(type)) return false;
  switch (type) {
    case od::json_type::object: {
      od::object o;
      if (v.get_object().get(o)) return false;
      for (auto field : o) {
        // The key too: On-Demand checks a string's escapes only when it is unescaped (fuzz finding: "doc\ui").
        std::string_view key;
        od::value x;
        if (field.unescaped_key().get(key) || field.value().get(x) || !Validate(x, depth + 1)) return false;
      }
      return true;
    }
    case od::json_type::array: {
      od::array a;
      if (v.get_array().get(a)) return false;
      for (auto element : a) {
        od::value x;
        if (element.get(x) || !Validate(x, depth + 1)) return false;
      }
      return true;
    }
    case od::json_type::number: {
      double d;
      return !v.get_double().get(d);
    }
    case od::json_type::string: {
      std::string_view s;
      return !v.get_string().get(s);
    }
    case od::json_type::boolean: {
      bool b;
      return !v.get_bool().get(b);
    }
    case od::json_type::null: return IsNull(v);
  }
  return false;
}

// Fields seen once each: a repeated key goes to nlohmann (which keeps the last).
static_assert(kRowFields.size() <= 32, "Seen holds a bit per row field");
struct Seen {
  std::uint32_t bits = 0;
  bool First(int k) {
    const std::uint32_t bit = std::uint32_t{1} << k;
    if (bits & bit) return false;
    bits |= bit;
    return true;
  }
  bool Has(int k) const { return (bits >> k) & 1; }
};

bool Span(od::value v, DocSpan& span) {
  od::object o;
  if (v.get_object().get(o)) return false;
  Seen seen;
  for (auto field : o) {
    std::string_view key;
    od::value x;
    if (field.unescaped_key().get(key) || field.value().get(x)) return false;
    const auto* entry = std::find_if(kSpanFields.begin(), kSpanFields.end(),
                                     [&](const SpanField& f) { return f.name == key; });
    if (entry == kSpanFields.end()) {
      if (!Validate(x)) return false;
      continue;
    }
    if (!seen.First(static_cast<int>(entry - kSpanFields.begin()))) return false;
    const bool ok = entry->number ? Int(x, span.*entry->number) : String(x, span.doc_uid);
    if (!ok) return false;
  }
  return seen.bits == (std::uint32_t{1} << kSpanFields.size()) - 1;  // every field given
}

// A row's spans (its kSpans field), read into the storage `out` already has.
bool Spans(od::value x, std::vector<DocSpan>& out) {
  // (A default od::array may not be iterated: leave before the loop when there is no array.)
  od::array a;
  if (x.get_array().get(a)) return false;
  std::size_t count = 0;
  for (auto element : a) {
    od::value s;
    if (element.get(s)) return false;
    if (count == out.size()) out.emplace_back();
    if (!Span(s, out[count++])) return false;
  }
  out.resize(count);
  return true;
}

// Field I of a row read into its member by the member's type (row_members.h holds it to the table): the spans,
// a required array, or an optional one (null: not given).
template <std::size_t I>
bool ReadRowField(od::value x, CandidateRow& row) {
  auto& member = RowMember<I>(row);
  if constexpr (I == kRowSpansField) {
    return Spans(x, member);
  } else if constexpr (kRowFields[I].required) {
    if constexpr (std::is_floating_point_v<typename std::remove_cvref_t<decltype(member)>::value_type>)
      return Numbers(x, member);
    else
      return Ints(x, member);
  } else {
    if (IsNull(x)) {
      member.reset();
      return true;
    }
    if (!member) member.emplace();
    if constexpr (std::is_floating_point_v<typename std::remove_cvref_t<decltype(*member)>::value_type>)
      return Numbers(x, *member);
    else
      return Ints(x, *member);
  }
}

// The place of `key` in kRowFields, or -1: a linear walk of 9 short names, as the if-chain it replaced.
int RowFieldAt(std::string_view key) {
  for (std::size_t k = 0; k < kRowFields.size(); ++k)
    if (kRowFields[k].name == key) return static_cast<int>(k);
  return -1;
}

// Every per-token field as long as the first, every required field but the spans given (MicrobatchFromJson's
// checks, which name the field; per-row lists have their own lengths).
bool RowComplete(const CandidateRow& row, const Seen& seen) {
  bool ok = true;
  ForEachRowField([&](auto i) {
    constexpr std::size_t I = decltype(i)::value;
    constexpr RowField field = kRowFields[I];
    if constexpr (field.required && I != kRowSpansField) ok = ok && seen.Has(I);
    if constexpr (field.shape == RowFieldShape::kPerToken && I != kRowLengthField) {
      const auto& member = RowMember<I>(row);
      const std::size_t n = RowMember<kRowLengthField>(row).size();
      if constexpr (field.required) ok = ok && member.size() == n;
      else ok = ok && (!member || member->size() == n);
    }
  });
  return ok;
}

// `has_spans`: whether the row carries doc_spans (a dump's rows may leave them out: MicrobatchFromJson).
bool Row(od::value v, CandidateRow& row, bool& has_spans) {
  od::object o;
  if (v.get_object().get(o)) return false;
  Seen seen;
  ForEachRowField([&](auto i) {
    if constexpr (!kRowFields[decltype(i)::value].required) RowMember<decltype(i)::value>(row).reset();
  });
  for (auto field : o) {
    std::string_view key;
    od::value x;
    if (field.unescaped_key().get(key) || field.value().get(x)) return false;
    const int k = RowFieldAt(key);
    const bool ok = k < 0 ? Validate(x)
                          : seen.First(k) && VisitRowField(static_cast<std::size_t>(k), false, [&](auto i) {
                              return ReadRowField<decltype(i)::value>(x, row);
                            });
    if (!ok) return false;
  }
  has_spans = seen.Has(kRowSpansField);
  if (!has_spans) RowMember<kRowSpansField>(row).clear();
  return RowComplete(row, seen);
}

// A producer total the producer may leave out: null is "not given", as an absent key.
bool OptionalNumber(od::value& x, std::optional<double>& out) {
  if (IsNull(x)) {
    out.reset();
    return true;
  }
  double d;
  if (!Number(x, d)) return false;
  out = d;
  return true;
}

// MicrobatchFromJson's producer (ProducerTotalsProblem's rule, candidate.h): anything else goes to the nlohmann
// reader, which names the field.
bool Producer(od::value v, std::optional<ProducerTotals>& out) {
  if (IsNull(v)) {
    out.reset();
    return true;
  }
  od::object o;
  if (v.get_object().get(o)) return false;
  ProducerTotals t;
  Seen seen;
  bool scope_given = false;
  for (auto field : o) {
    std::string_view key;
    od::value x;
    if (field.unescaped_key().get(key) || field.value().get(x)) return false;
    const auto* entry = std::find_if(kProducerTotalsFields.begin(), kProducerTotalsFields.end(),
                                     [&](const ProducerTotalsField& f) { return f.name == key; });
    bool ok = true;
    if (entry == kProducerTotalsFields.end()) {
      ok = Validate(x);
    } else if (!seen.First(static_cast<int>(entry - kProducerTotalsFields.begin()))) {
      ok = false;
    } else if (entry->number) {
      ok = OptionalNumber(x, t.*entry->number);
    } else {  // the scope
      scope_given = !IsNull(x);
      if (scope_given) ok = String(x, t.denominator_scope);
    }
    if (!ok) return false;
  }
  if (ProducerTotalsProblem(t, scope_given)) return false;
  out = std::move(t);
  return true;
}

}  // namespace

struct LineParser::Simd {
  od::parser parser;
  // The storage of the record kind a line did not need, kept for the next line of that kind: documents and
  // micro-batches alternate in a dump, and each keeps its vectors' capacity this way.
  std::optional<MicrobatchRecord> spare_microbatch;
  std::optional<DocumentRecord> spare_document;

  template <class Want>
  Want& Hold(PackedBatchRecord& out) {
    if (auto* w = std::get_if<Want>(&out)) return *w;
    if (auto* m = std::get_if<MicrobatchRecord>(&out)) spare_microbatch = std::move(*m);
    if (auto* d = std::get_if<DocumentRecord>(&out)) spare_document = std::move(*d);
    if constexpr (std::is_same_v<Want, MicrobatchRecord>) {
      out = spare_microbatch ? std::move(*spare_microbatch) : MicrobatchRecord{};
    } else {
      out = spare_document ? std::move(*spare_document) : DocumentRecord{};
    }
    return std::get<Want>(out);
  }

  // A document or microbatch line whose first key is "record"; false: hand the line to nlohmann.
  bool Parse(const char* data, std::size_t size, std::size_t capacity, PackedBatchRecord& out) {
    od::document doc;
    if (parser.iterate(simdjson::padded_string_view(data, size, capacity)).get(doc)) return false;
    od::object o;
    if (doc.get_object().get(o)) return false;
    auto it = o.begin();
    if (it == o.end()) return false;
    std::string_view key, type;
    od::value x;
    {
      auto field = *it;
      if (field.unescaped_key().get(key) || key != "record" || field.value().get(x) || x.get_string().get(type))
        return false;
    }
    bool ok = false;
    if (type == "microbatch") ok = Microbatch(o, it, out);
    else if (type == "document") ok = Document(o, it, out);
    // Nothing may follow the root object (simdjson 3.0's document has no at_end(): past the end, its
    // location is out of bounds).
    const char* rest = nullptr;
    return ok && doc.current_location().get(rest) == simdjson::OUT_OF_BOUNDS;
  }

  template <class It>
  bool Microbatch(od::object& o, It& it, PackedBatchRecord& out) {
    MicrobatchRecord& m = Hold<MicrobatchRecord>(out);
    CandidateMicrobatch& mb = m.microbatch;
    mb.step = 0;
    m.flattened = false;
    m.spans_absent = false;
    Seen seen;
    seen.First(0);  // "record"
    for (++it; it != o.end(); ++it) {
      auto field = *it;
      std::string_view key;
      od::value x;
      if (field.unescaped_key().get(key) || field.value().get(x)) return false;
      bool ok = true;
      if (key == "record") return false;
      if (key == "step") ok = seen.First(1) && Int(x, mb.step);
      else if (key == "micro_step") ok = seen.First(2) && Int(x, mb.micro_step);
      else if (key == "rank") ok = seen.First(3) && Int(x, mb.rank);
      else if (key == "rows") {
        // (A default od::array may not be iterated: fuzz finding, UBSan "unreachable" in simdjson.)
        od::array a;
        if (!seen.First(4) || x.get_array().get(a)) return false;
        std::size_t count = 0;
        for (auto element : a) {
          od::value r;
          if (!ok || element.get(r)) return false;
          if (count == mb.rows.size()) mb.rows.emplace_back();
          bool has_spans = true;
          ok = Row(r, mb.rows[count], has_spans);
          // Every row with doc_spans or none (MicrobatchFromJson names the row that breaks it).
          if (count == 0) m.spans_absent = !has_spans;
          ok = ok && m.spans_absent == !has_spans;
          ++count;
        }
        if (ok) mb.rows.resize(count);
      } else if (key == "producer") {
        ok = seen.First(5) && Producer(x, mb.producer);
      } else if (key == "flattened") {
        ok = seen.First(6) && !x.get_bool().get(m.flattened);
      } else {
        ok = Validate(x);
      }
      if (!ok) return false;
    }
    if (!seen.Has(5)) mb.producer.reset();
    if (!seen.Has(2) || !seen.Has(3) || !seen.Has(4)) return false;
    return !(m.flattened && mb.rows.size() != 1);
  }

  template <class It>
  bool Document(od::object& o, It& it, PackedBatchRecord& out) {
    packoracle::Document& d = Hold<DocumentRecord>(out).document;
    d.supervised.clear();
    bool given = false;
    Seen seen;
    for (++it; it != o.end(); ++it) {
      auto field = *it;
      std::string_view key;
      od::value x;
      if (field.unescaped_key().get(key) || field.value().get(x)) return false;
      bool ok = true;
      if (key == "record") return false;
      if (key == "doc_uid") ok = seen.First(0) && String(x, d.uid);
      else if (key == "tokens") ok = seen.First(1) && Ints(x, d.tokens);
      else if (key == "supervised") {
        ok = seen.First(2);
        given = ok && !IsNull(x);
        if (given) ok = Ints(x, d.supervised);
      } else {
        ok = Validate(x);
      }
      if (!ok) return false;
    }
    if (!seen.Has(0) || !seen.Has(1)) return false;
    return !given || d.supervised.size() == d.tokens.size();  // DocumentFromJson's length check
  }
};

LineParser::LineParser(std::string path, bool seen_header)
    : path_(std::move(path)), seen_header_(seen_header), simd_(std::make_unique<Simd>()) {}

LineParser::~LineParser() = default;

bool LineParser::Parse(const char* data, std::size_t size, std::size_t capacity, std::int64_t line,
                       PackedBatchRecord& record) {
  std::size_t k = 0;
  while (k < size && (data[k] == ' ' || data[k] == '\t' || data[k] == '\r')) ++k;
  if (k == size) return false;  // blank line
  if (seen_header_ && simd_->Parse(data, size, capacity, record)) {
    if (auto* m = std::get_if<MicrobatchRecord>(&record)) m->line = line;
    if (auto* d = std::get_if<DocumentRecord>(&record)) d->line = line;
    return true;
  }
  // The nlohmann reader's path, with PackedBatchReader::Next's messages.
  ++fallbacks_;
  const std::string where = path_ + ":" + std::to_string(line);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(data, data + size);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e999 (fuzz finding)
    throw InputError(where + ": not a JSON object (" + e.what() + ")");
  }
  record = ParsePackedBatchRecord(j, where, !seen_header_);
  seen_header_ = true;
  if (auto* m = std::get_if<MicrobatchRecord>(&record)) m->line = line;
  if (auto* d = std::get_if<DocumentRecord>(&record)) d->line = line;
  return true;
}

FastBatchReader::FastBatchReader(std::string path)
    : path_(std::move(path)), file_(std::fopen(path_.c_str(), "rb")), parser_(std::make_unique<LineParser>(path_, false)) {
  if (!file_) throw InputError(path_ + ": cannot open the file");
}

FastBatchReader::FastBatchReader(std::FILE* file, std::string name, std::size_t chunk)
    : path_(std::move(name)), chunk_(std::clamp<std::size_t>(chunk, 1, std::size_t{1} << 30)),
      parser_(std::make_unique<LineParser>(path_, false)) {
  file_ = file;  // taken only now: were the parser's allocation to throw, the caller still owns the stream
  if (!file_) throw InputError(path_ + ": no stream to read");
}

FastBatchReader::FastBatchReader(std::string path, std::int64_t offset, std::int64_t line)
    : path_(std::move(path)), file_(std::fopen(path_.c_str(), "rb")), line_(line - 1), offset_(offset),
      parser_(std::make_unique<LineParser>(path_, true)) {
  if (!file_) throw InputError(path_ + ": cannot open the file");
  if (std::fseek(file_, static_cast<long>(offset), SEEK_SET) != 0)
    throw InputError(path_ + ": cannot read it again from byte " + std::to_string(offset));
}

FastBatchReader::~FastBatchReader() {
  if (file_) std::fclose(file_);
}

bool FastBatchReader::NextLine(const char*& begin, std::size_t& size) {
  for (;;) {
    if (begin_ + scanned_ < end_) {
      // Only the bytes not yet searched: a line longer than a chunk is searched once, not once per read.
      const void* nl = std::memchr(buffer_.data() + begin_ + scanned_, '\n', end_ - begin_ - scanned_);
      if (nl) {
        const auto at = static_cast<std::size_t>(static_cast<const char*>(nl) - buffer_.data());
        begin = buffer_.data() + begin_;
        size = at - begin_;
        begin_ = at + 1;
        scanned_ = 0;
        return true;
      }
      scanned_ = end_ - begin_;
    }
    if (eof_) {
      if (begin_ >= end_) return false;
      begin = buffer_.data() + begin_;  // a last line without its newline
      size = end_ - begin_;
      begin_ = end_;
      scanned_ = 0;
      return true;
    }
    // Keep the unconsumed tail, make room for a chunk and simdjson's padding, read.
    // (Only when there is a tail: the first call's buffer is empty and its data() may be null, which memmove
    // may not be given even for zero bytes: UBSan.)
    // (Nor when the tail is already at the front: a long line is then not moved once per read.)
    if (begin_ > 0 && end_ > begin_) std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
    if (buffer_.size() < end_ + chunk_ + simdjson::SIMDJSON_PADDING)
      buffer_.resize(std::max(2 * buffer_.size(), end_ + chunk_ + simdjson::SIMDJSON_PADDING));
    const std::size_t room = std::min(chunk_, buffer_.size() - end_ - simdjson::SIMDJSON_PADDING);
    const std::size_t got = std::fread(buffer_.data() + end_, 1, room, file_);
    if (got == 0) eof_ = true;
    end_ += got;
  }
}

bool FastBatchReader::Next(PackedBatchRecord& record) {
  const char* data;
  std::size_t size;
  while (NextLine(data, size)) {
    ++line_;
    bytes_ += static_cast<std::int64_t>(size) + 1;
    const std::int64_t line_start = offset_;
    offset_ += static_cast<std::int64_t>(size) + 1;
    const std::size_t capacity = buffer_.size() - static_cast<std::size_t>(data - buffer_.data());
    if (parser_->Parse(data, size, capacity, line_, record)) {
      record_offset_ = line_start;
      return true;
    }
  }
  if (!parser_->seen_header()) throw InputError(path_ + ": empty (a packed-batch file starts with its header record)");
  return false;
}

std::int64_t FastBatchReader::fallbacks() const { return parser_->fallbacks(); }

std::optional<PackedBatchRecord> FastBatchReader::Next() {
  PackedBatchRecord record;
  if (!Next(record)) return std::nullopt;
  return record;
}

}  // namespace packoracle::fastcheck

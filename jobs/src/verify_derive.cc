// verify_derive.h: doc_spans derived for a dump whose rows carry none.
#include "verify_derive.h"

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <variant>

#include "packoracle/fastcheck/document_check.h"
#include "packoracle/interchange/packed_batch.h"
#include "packoracle/jobs/span_derivation.h"
#include "packoracle/oracle/error.h"
#include "packoracle/properties/backend_attention.h"

namespace packoracle::jobs::verify_internal {
namespace {

class DerivingReader final : public fastcheck::RecordReader {
 public:
  DerivingReader(std::unique_ptr<fastcheck::RecordReader> source, const Policy& policy,
                 const std::vector<DocumentRef>* documents, HeldDocument held, OtherReadings* others)
      : source_(std::move(source)), policy_(policy), given_(documents), held_(std::move(held)), others_(others) {}

  std::optional<PackedBatchRecord> Next() override {
    PackedBatchRecord record;
    if (!Next(record)) return std::nullopt;
    return record;
  }
  bool Next(PackedBatchRecord& record) override;
  const std::string& path() const override { return source_->path(); }
  std::int64_t bytes_read() const override { return source_->bytes_read(); }
  // A derived source cannot be read again from the file (its rows there have no spans): verify then holds
  // every step it may have to report.
  std::int64_t record_offset() const override { return mode_ == Mode::kDerived ? -1 : source_->record_offset(); }

 private:
  enum class Mode { kUndecided, kPassThrough, kDerived };
  [[noreturn]] void Mixed(const MicrobatchRecord& m, bool first_had_spans) const;
  void ReadRest(PackedBatchRecord first);
  SpanDerivation Derivation(std::vector<std::string>& uids) const;
  void Derive();
  void KeepOtherReadings(const SpanDerivation& derivation, const std::vector<std::string>& uids, std::size_t passed);

  std::unique_ptr<fastcheck::RecordReader> source_;
  const Policy& policy_;
  const std::vector<DocumentRef>* given_;
  HeldDocument held_;
  OtherReadings* others_;
  Mode mode_ = Mode::kUndecided;
  std::size_t passed_held_ = 0;            // how many of documents_ were passed on before the first micro-batch
  std::vector<std::string> passed_;       // the uids of the document records passed on before the mode is known
  std::vector<Document> documents_;       // kDerived: those documents (from the store), then the rest's records
  std::deque<PackedBatchRecord> replay_;  // kDerived: the rest of the source, spans derived
};

void DerivingReader::Mixed(const MicrobatchRecord& m, bool first_had_spans) const {
  throw InputError(source_->path() + ":" + std::to_string(m.line) + ": microbatch record: its rows " +
                   (first_had_spans ? "carry no doc_spans, but the file's first micro-batch has them"
                                    : "carry doc_spans, but the file's first micro-batch has none") +
                   " (doc_spans on every micro-batch of a file, or on none: verify then derives them)");
}

bool DerivingReader::Next(PackedBatchRecord& record) {
  if (mode_ == Mode::kDerived) {
    if (replay_.empty()) return false;
    record = std::move(replay_.front());
    replay_.pop_front();
    return true;
  }
  if (!source_->Next(record)) return false;
  auto* m = std::get_if<MicrobatchRecord>(&record);
  if (mode_ == Mode::kPassThrough) {
    if (m && m->spans_absent) Mixed(*m, true);
    return true;
  }
  if (auto* d = std::get_if<DocumentRecord>(&record)) passed_.push_back(d->document.uid);
  if (!m || m->microbatch.rows.empty()) return true;  // a micro-batch without rows says neither (undecided)
  if (!m->spans_absent) {  // the common dump: streamed as it is, nothing held
    mode_ = Mode::kPassThrough;
    passed_ = {};
    return true;
  }
  mode_ = Mode::kDerived;
  for (const std::string& uid : passed_) {
    Document d;
    if (held_(uid, d)) documents_.push_back(std::move(d));
  }
  passed_held_ = documents_.size();
  passed_ = {};
  ReadRest(std::move(record));
  Derive();
  return Next(record);
}

void DerivingReader::ReadRest(PackedBatchRecord first) {
  replay_.push_back(std::move(first));
  PackedBatchRecord record;
  while (source_->Next(record)) {
    if (auto* d = std::get_if<DocumentRecord>(&record)) documents_.push_back(d->document);
    if (auto* m = std::get_if<MicrobatchRecord>(&record); m && !m->spans_absent) Mixed(*m, false);
    replay_.push_back(std::move(record));
    record = PackedBatchRecord{};
  }
}

// Over the documents in the order given (the caller's, then the records'; a uid repeated, as a multi-rank dump
// repeats a document on each rank that packs it, read once), as placed: the dump holds them with their
// delimiters (Delimiters::kIncluded); their inputs only (InputTokens).
// `uids`: the documents' uids, in the derivation's order.
SpanDerivation DerivingReader::Derivation(std::vector<std::string>& uids) const {
  std::vector<std::vector<Token>> tokens;
  std::unordered_set<std::string> seen;
  std::map<std::vector<int>, std::int64_t> kind_of;  // by supervision: the derivation compares the tokens itself
  std::vector<std::int64_t> kinds;
  const auto add = [&](const DocumentRef& d) {
    if (!seen.insert(std::string(d.uid)).second) return;
    uids.emplace_back(d.uid);
    std::vector<int> flags = d.supervised ? std::vector<int>(d.supervised, d.supervised + d.supervised_size)
                                          : std::vector<int>{};
    kinds.push_back(kind_of.try_emplace(std::move(flags), static_cast<std::int64_t>(kind_of.size())).first->second);
    std::vector<Token> t;
    try {
      t = std::move(fastcheck::EffectiveFast(d, policy_, Delimiters::kIncluded).tokens);
    } catch (const InputError&) {
      t.assign(d.tokens, d.tokens + d.size);  // the audit reports the document (CheckCase's message)
    }
    t.resize(static_cast<std::size_t>(std::max<std::int64_t>(0, InputTokens(policy_, static_cast<std::int64_t>(t.size())))));
    tokens.push_back(std::move(t));
  };
  if (given_) for (const DocumentRef& d : *given_) add(d);
  for (const Document& d : documents_) add(DocumentRef::Of(d));
  SpanDerivation derivation(std::move(tokens), policy_.overflow, DerivationPad(policy_), DerivationLeftPadded(policy_));
  derivation.Interchangeable(std::move(kinds));
  return derivation;
}

void DerivingReader::Derive() {
  std::vector<std::string> uids;
  SpanDerivation derivation = Derivation(uids);
  std::vector<CandidateRow*> rows;  // in record order, as matched
  std::vector<std::uint8_t> targets;
  for (auto& record : replay_) {
    auto* m = std::get_if<MicrobatchRecord>(&record);
    if (!m) continue;
    for (CandidateRow& row : m->microbatch.rows) {
      std::optional<std::span<const double>> mask;
      if (row.loss_mask) mask = std::span<const double>(*row.loss_mask);
      TargetSlots(row.labels, mask, policy_.ignore_index, targets);
      derivation.Match(row.input_ids, targets, [&] { return EvidenceOf(row, policy_); });
      rows.push_back(&row);
    }
  }
  derivation.Finish(policy_.pad_id);
  const auto& spans = derivation.rows();
  for (std::size_t r = 0; r < rows.size(); ++r) {
    for (const DerivedSpan& s : spans[r]) {
      rows[r]->doc_spans.push_back({uids[static_cast<std::size_t>(s.document)], s.start, s.length, s.doc_offset});
    }
  }
  if (others_) KeepOtherReadings(derivation, uids, passed_held_);
  documents_ = {};
}

// Each other reading as the source's records after its header: the documents passed on before its first
// micro-batch, then the rest of the source with that reading's spans in place of the chosen ones.
void DerivingReader::KeepOtherReadings(const SpanDerivation& derivation, const std::vector<std::string>& uids,
                                       std::size_t passed) {
  for (const auto& reading : derivation.OtherReadings(policy_.pad_id, kOtherReadings)) {
    std::vector<PackedBatchRecord> records;
    for (std::size_t k = 0; k < passed; ++k) records.push_back(DocumentRecord{documents_[k], 0});
    std::size_t r = 0;
    for (const auto& record : replay_) {
      records.push_back(record);
      auto* m = std::get_if<MicrobatchRecord>(&records.back());
      if (!m) continue;
      m->spans_absent = false;  // the reading's spans are given: the audit reads them, derives none
      for (CandidateRow& row : m->microbatch.rows) {
        row.doc_spans.clear();
        for (const DerivedSpan& s : reading[r++])
          row.doc_spans.push_back({uids[static_cast<std::size_t>(s.document)], s.start, s.length, s.doc_offset});
      }
    }
    others_->records.push_back(std::move(records));
  }
}

}  // namespace

std::unique_ptr<fastcheck::RecordReader> DeriveMissingSpans(std::unique_ptr<fastcheck::RecordReader> source,
                                                            const Policy& policy,
                                                            const std::vector<DocumentRef>* documents,
                                                            HeldDocument held, OtherReadings* others) {
  return std::make_unique<DerivingReader>(std::move(source), policy, documents, std::move(held), others);
}

}  // namespace packoracle::jobs::verify_internal

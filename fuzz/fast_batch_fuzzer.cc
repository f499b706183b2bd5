// libFuzzer target: the simdjson packed-batch reader of `packoracle verify` (fastcheck/jsonl_reader.h), run
// differentially against the nlohmann-json reader (interchange/packed_batch.h) it must agree with.
//
// The input is a whole file, read by both. They must give the same records in the same order and end the same
// way: both at the end of the file, or both with an InputError carrying the same message (which names the
// file). A record one reader accepts and the other rejects, a field read differently, an exception of another
// type, a crash, a hang or undefined behaviour is a finding. Two inputs in three are read a few bytes at a time
// (fmemopen, reads of at most 1 to 61 bytes), so lines straddle the reads and the buffer refills and grows.
//
// It shares the packed-batch target's seed corpus and dictionary (fuzz/corpus/packed_batch, packed_batch.dict):
// the two readers take the same files.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "packoracle/fastcheck/jsonl_reader.h"
#include "packoracle/interchange/packed_batch.h"
#include "packoracle/oracle/error.h"

namespace {

constexpr const char* kName = "fuzz.jsonl";

[[noreturn]] void Bug(const std::string& what) {
  // A finding: libFuzzer reports the abort with the input that caused it.
  std::fprintf(stderr, "fast_batch_fuzzer: %s\n", what.c_str());
  std::abort();
}

const char* Kind(const packoracle::PackedBatchRecord& r) {
  static constexpr const char* kKinds[] = {"header", "document", "microbatch", "step"};
  return kKinds[r.index()];
}

// The same double to the bit (== calls -0.0 and +0.0 equal: a sign the readers disagree on must show), any NaN
// equal to any NaN.
bool SameBits(double a, double b) {
  return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b) || (std::isnan(a) && std::isnan(b));
}

bool SameBits(const std::optional<double>& a, const std::optional<double>& b) {
  return a.has_value() == b.has_value() && (!a || SameBits(*a, *b));
}

// The doubles of a micro-batch (loss masks, producer totals), to the bit; operator== has compared the rest.
bool SameDoubles(const packoracle::CandidateMicrobatch& a, const packoracle::CandidateMicrobatch& b) {
  for (std::size_t r = 0; r < a.rows.size(); ++r) {
    const auto& x = a.rows[r].loss_mask;
    const auto& y = b.rows[r].loss_mask;
    if (x && y && !std::equal(x->begin(), x->end(), y->begin(), y->end(), [](double p, double q) { return SameBits(p, q); }))
      return false;
  }
  if (a.producer && b.producer) {
    return SameBits(a.producer->loss_sum, b.producer->loss_sum) &&
           SameBits(a.producer->denominator, b.producer->denominator) && SameBits(a.producer->loss, b.producer->loss);
  }
  return true;
}

// The same record, field by field (the header is parsed by one shared function in both readers, so its
// resolved fields are compared rather than every nlohmann value it keeps).
bool Same(const packoracle::PackedBatchRecord& a, const packoracle::PackedBatchRecord& b) {
  using namespace packoracle;
  if (a.index() != b.index()) return false;
  if (const auto* x = std::get_if<HeaderRecord>(&a)) {
    const auto& y = std::get<HeaderRecord>(b);
    return x->producer == y.producer && x->pad_id == y.pad_id && x->bos_id == y.bos_id && x->eos_id == y.eos_id &&
           x->eod_id == y.eod_id && x->dp_world_size == y.dp_world_size &&
           x->grad_accum_steps == y.grad_accum_steps && x->policy_json == y.policy_json && x->policy == y.policy;
  }
  if (const auto* x = std::get_if<DocumentRecord>(&a)) {
    const auto& y = std::get<DocumentRecord>(b);
    return x->document.uid == y.document.uid && x->document.tokens == y.document.tokens &&
           x->document.supervised == y.document.supervised;
  }
  if (const auto* x = std::get_if<MicrobatchRecord>(&a)) {
    const auto& y = std::get<MicrobatchRecord>(b);
    return x->microbatch == y.microbatch && SameDoubles(x->microbatch, y.microbatch) && x->flattened == y.flattened &&
           x->line == y.line;
  }
  const auto& x = std::get<StepRecord>(a);
  const auto& y = std::get<StepRecord>(b);
  return x.step == y.step && x.rank == y.rank && SameBits(x.num_items_in_batch, y.num_items_in_batch) &&
         SameBits(x.loss, y.loss);
}

// Runs one reader to its end: the records read, then the error that stopped it ("" at a clean end).
template <class Next>
std::string Drain(Next next, std::vector<packoracle::PackedBatchRecord>& records) {
  try {
    while (auto record = next()) records.push_back(std::move(*record));
  } catch (const packoracle::InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<packoracle::PackedBatchRecord> expected, got;

  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  packoracle::PackedBatchReader oracle(in, kName);
  const std::string expected_error = Drain([&] { return oracle.Next(); }, expected);

  // fmemopen over a copy: it wants a writable buffer; size 0 is an empty stream (glibc ≥ 2.22).
  std::string copy(reinterpret_cast<const char*>(data), size);
  std::FILE* file = fmemopen(copy.data(), copy.size(), "rb");
  if (file == nullptr) return 0;  // out of memory: nothing to compare
  // Chunks of 1 to 61 bytes for two inputs in three (the buffer then grows geometrically from there); for the
  // third, one read of the whole input as `verify`'s 1 MiB chunk reads a small file (1 MiB itself would spend
  // most of each run zero-filling the buffer: 300 runs/s instead of thousands).
  using packoracle::fastcheck::FastBatchReader;
  const std::size_t chunk = size % 3 == 0 ? size + 1 : 1 + size % 61;
  FastBatchReader fast(file, kName, chunk);
  // Half the inputs read the reused-storage way `verify` does, half through the optional-returning Next.
  const bool reuse = size % 2 == 0;
  packoracle::PackedBatchRecord slot;
  const std::string got_error = Drain(
      [&]() -> std::optional<packoracle::PackedBatchRecord> {
        if (!reuse) return fast.Next();
        if (!fast.Next(slot)) return std::nullopt;
        return slot;
      },
      got);

  const std::size_t common = std::min(expected.size(), got.size());
  for (std::size_t i = 0; i < common; ++i) {
    if (!Same(expected[i], got[i])) {
      Bug("record " + std::to_string(i + 1) + " differs: the nlohmann reader gives a " + Kind(expected[i]) +
          ", the simdjson reader a " + Kind(got[i]) + " (same kind: a field differs)");
    }
  }
  if (expected.size() != got.size() || expected_error != got_error) {
    Bug("the readers end differently: nlohmann read " + std::to_string(expected.size()) + " records then " +
        (expected_error.empty() ? std::string("the end") : "'" + expected_error.substr(0, 300) + "'") +
        "; simdjson read " + std::to_string(got.size()) + " records then " +
        (got_error.empty() ? std::string("the end") : "'" + got_error.substr(0, 300) + "'"));
  }
  if (!expected_error.empty() && expected_error.rfind(kName, 0) != 0) {
    Bug("an input error that does not name the file: " + expected_error);
  }
  return 0;
}

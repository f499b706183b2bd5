// The fast verifier's cost, each figure a ratio to a baseline measured in the same run (bench/fastcheck_run.sh
// tabulates them; bench/scaling_plot.py draws the scaling cases).
//
//   BM_DenseMask/L          FirstWrongQuery over a correct [L×L] mask of one row (8 documents)
//   BM_MaskCopy/L           memcpy of the same L² bytes: the memory-speed baseline
//   BM_FastStep/L/D         FastStepChecker on 8 rows of L slots, about D documents per row (torchtune-packed
//                           encodings: input_ids, labels, position_ids, seq_lens, doc_spans), as verify calls it
//   BM_OracleStep/L/D       CheckCase on the same rows (replayed, as verify --oracle calls it)
//   BM_ReadOnce/L/D         one pass summing every array of the same rows: a bound of reading them once
//   BM_CasesFast, BM_CasesOracle   in-process property cases/s: CheckCaseFast vs CheckCase on the reference
//                           packer over the same 200 generated cases (determinism on, as Verify runs them;
//                           no tiny decoder, as `fuzz --no-decoder`: with it, CheckCaseFast is CheckCase)
// Every case reports items processed (slots, bytes or cases) so ratios come from the rates.
#include <benchmark/benchmark.h>

#include <cstring>
#include <map>
#include <memory>
#include <random>

#include "packoracle/fastcheck/case_check.h"
#include "packoracle/fastcheck/dense_mask.h"
#include "packoracle/fastcheck/step_check.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/generators.h"

namespace {

using namespace packoracle;

constexpr std::int64_t kRows = 8;

// 8 rows of L slots under torchtune-packed, D documents per row on average, packed by the reference packer.
struct StepFixture {
  PackRequest request;
  PackResult packed;
  std::vector<EffectiveDocument> effective;
  mutable fastcheck::StepDocuments docs;
  std::int64_t slots = 0;
};

const StepFixture& Step(std::int64_t L, std::int64_t D) {
  static std::map<std::pair<std::int64_t, std::int64_t>, std::unique_ptr<StepFixture>> cache;
  auto& slot = cache[{L, D}];
  if (slot) return *slot;
  slot = std::make_unique<StepFixture>();
  StepFixture& f = *slot;
  f.request.policy = FindPreset("torchtune-packed").policy;
  f.request.row_length = L;
  f.request.micro_batch_rows = kRows;
  std::mt19937 rng(static_cast<unsigned>(L * 131 + D));
  const std::int64_t mean = std::max<std::int64_t>(1, L / D);
  std::uniform_int_distribution<std::int64_t> length(1, std::max<std::int64_t>(1, 2 * mean - 2));
  std::uniform_int_distribution<Token> token(3, 50'000);
  std::int64_t total = 0;
  while (total + mean < kRows * L) {  // leave the last row's tail to padding
    Document d;
    d.uid = "d" + std::to_string(f.request.documents.size());
    const std::int64_t n = std::min(length(rng), L - 1);
    for (std::int64_t k = 0; k < n; ++k) d.tokens.push_back(token(rng));
    total += n;
    f.request.target_losses[d.uid] = std::vector<double>(static_cast<std::size_t>(n), 1.0);  // the packer's totals
    f.request.documents.push_back(std::move(d));
  }
  f.packed = ReferenceCandidate().packer->Pack(f.request);
  f.effective = Effective(f.request.documents, f.request.policy);
  for (const auto& d : f.effective) f.docs.docs.push_back(fastcheck::DocumentView::Of(d));
  f.docs.Index();
  for (const auto& mb : f.packed.microbatches)
    for (const auto& row : mb.rows) f.slots += static_cast<std::int64_t>(row.input_ids.size());
  return f;
}

void BM_FastStep(benchmark::State& state) {
  const StepFixture& f = Step(state.range(0), state.range(1));
  fastcheck::FastStepChecker checker;
  fastcheck::StepInput in;
  in.policy = &f.request.policy;
  in.row_length = f.request.row_length;
  in.SetPacked(f.packed);
  in.documents = &f.docs;
  in.options = DumpStepOptions();
  for (auto _ : state) {
    const auto& v = checker.Check(in);
    if (v.outcome != fastcheck::Outcome::kPassed) state.SkipWithError("the reference rows did not pass");
    benchmark::DoNotOptimize(v.valid_targets);
  }
  state.SetItemsProcessed(state.iterations() * f.slots);
  state.counters["slots"] = static_cast<double>(f.slots);
}

struct Replay {
  PackResult out;
  PackResult Pack(const PackRequest&) { return out; }
};

void BM_OracleStep(benchmark::State& state) {
  const StepFixture& f = Step(state.range(0), state.range(1));
  PackRequest request = f.request;
  request.delimiters = Delimiters::kAdd;
  for (auto _ : state) {
    Candidate replay = MakeCandidate("replay", Replay{f.packed});
    const CaseResult r = CheckCase(replay, request, DumpStepOptions());
    if (!r.passed()) state.SkipWithError("the reference rows did not pass");
  }
  state.SetItemsProcessed(state.iterations() * f.slots);
}

void BM_ReadOnce(benchmark::State& state) {
  const StepFixture& f = Step(state.range(0), state.range(1));
  for (auto _ : state) {
    std::int64_t sum = 0;
    for (const auto& mb : f.packed.microbatches)
      for (const auto& row : mb.rows) {
        for (auto x : row.input_ids) sum += x;
        for (auto x : row.labels) sum += x;
        if (row.position_ids) for (auto x : *row.position_ids) sum += x;
        if (row.seq_lens) for (auto x : *row.seq_lens) sum += x;
        if (row.doc_ids) for (auto x : *row.doc_ids) sum += x;
        if (row.cu_seqlens) for (auto x : *row.cu_seqlens) sum += x;
        for (const auto& s : row.doc_spans) sum += s.start + s.length + s.doc_offset;
      }
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(state.iterations() * f.slots);
}

// One row of L slots holding 8 documents, and its correct doc_causal mask.
struct MaskFixture {
  std::vector<std::int32_t> piece;
  std::vector<std::uint8_t> mask, copy;
};

const MaskFixture& Mask(std::int64_t L) {
  static std::map<std::int64_t, std::unique_ptr<MaskFixture>> cache;
  auto& slot = cache[L];
  if (slot) return *slot;
  slot = std::make_unique<MaskFixture>();
  const auto n = static_cast<std::size_t>(L);
  slot->piece.resize(n);
  for (std::size_t i = 0; i < n; ++i) slot->piece[i] = static_cast<std::int32_t>(i * 8 / n);
  slot->mask.assign(n * n, 0);
  slot->copy.assign(n * n, 0);
  std::size_t lo = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0 && slot->piece[i] != slot->piece[i - 1]) lo = i;
    std::memset(slot->mask.data() + i * n + lo, 1, i + 1 - lo);
  }
  return *slot;
}

void BM_DenseMask(benchmark::State& state) {
  const MaskFixture& m = Mask(state.range(0));
  const auto n = static_cast<std::size_t>(state.range(0));
  const Policy policy = FindPreset("reference").policy;
  for (auto _ : state) {
    const auto q = fastcheck::FirstWrongQuery(m.mask.data(), n, fastcheck::RowPieces{m.piece.data(), n}, policy);
    if (q >= 0) state.SkipWithError("the correct mask was rejected");
    benchmark::DoNotOptimize(q);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(n * n));
}

void BM_MaskCopy(benchmark::State& state) {
  auto& m = const_cast<MaskFixture&>(Mask(state.range(0)));
  const auto bytes = m.mask.size();
  for (auto _ : state) {
    std::memcpy(m.copy.data(), m.mask.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes));
}

const std::vector<PackRequest>& Cases() {
  static const std::vector<PackRequest> cases = [] {
    auto profile = gen::Profiles()[0];
    profile.max_documents = 16;
    const auto generator = gen::Request(profile, {}, 64);
    std::vector<PackRequest> out;
    for (int k = 0; k < 200; ++k) out.push_back(generator(rc::Random(static_cast<std::uint64_t>(k) + 1), 50).value());
    return out;
  }();
  return cases;
}

void RunCases(benchmark::State& state, bool fast) {
  Candidate reference = ReferenceCandidate();
  CheckOptions options;
  options.packing_invariance = false;  // `fuzz --no-decoder`: the only setting where the fast path runs
  std::int64_t cases = 0;
  for (auto _ : state) {
    for (const auto& r : Cases()) {
      try {
        const CaseResult result =
            fast ? fastcheck::CheckCaseFast(reference, r, options) : CheckCase(reference, r, options);
        if (!result.passed()) state.SkipWithError("the reference packer failed");
      } catch (const InputError&) {
      }
      ++cases;
    }
  }
  state.SetItemsProcessed(cases);
}

void BM_CasesFast(benchmark::State& state) { RunCases(state, true); }
void BM_CasesOracle(benchmark::State& state) { RunCases(state, false); }

BENCHMARK(BM_DenseMask)->Arg(1024)->Arg(4096)->Arg(8192)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MaskCopy)->Arg(1024)->Arg(4096)->Arg(8192)->Unit(benchmark::kMicrosecond);
// Row verification at the audit's shape (8 × 8192, 8 documents a row) against the oracle and reading once.
BENCHMARK(BM_FastStep)->Args({8192, 8})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_OracleStep)->Args({8192, 8})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReadOnce)->Args({8192, 8})->Unit(benchmark::kMicrosecond);
// Scaling: L from 1k to 128k at 8 documents a row; documents a row from 1 to 4096 at L = 8192.
BENCHMARK(BM_FastStep)
    ->ArgsProduct({{1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072}, {8}})
    ->ArgsProduct({{8192}, {1, 4, 16, 64, 256, 1024, 4096}})
    ->Unit(benchmark::kMicrosecond)
    ->Name("BM_FastStepScaling");
BENCHMARK(BM_OracleStep)
    ->ArgsProduct({{1024, 4096, 8192, 16384}, {8}})
    ->ArgsProduct({{8192}, {1, 64, 1024}})
    ->Unit(benchmark::kMillisecond)
    ->Name("BM_OracleStepScaling");
BENCHMARK(BM_CasesFast)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CasesOracle)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

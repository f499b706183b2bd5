// The reference oracle's cost, as ratios against a baseline measured in the same run.
//
// Every case works on one fixture per row length L: deterministic documents (std::mt19937, lengths
// uniform in 1..L) that the sequential greedy layout packs into exactly kRows rows of L slots under the
// `reference` preset. Each case reports the fixture's slot count ("slots", items processed) so that
// ns per slot can be compared with BM_CopyBaseline/L, a memcpy of the same number of int64 slots.
//
//   BM_Materialize/L    Materialize(docs, SequentialLayout(docs, policy, L), policy): layout + batch
//   BM_Denominators/L   Denominators(batch) on the prebuilt batch
//   BM_AttentionGrid/L  Attends(row, policy, i, j) for all (i, j) of the batch's first row (L^2 calls);
//                       its slots are that one row's L slots, so ns/slot grows with L
//   BM_CopyBaseline/L   memcpy of the Materialize case's slot count of int64 values ("read the row once")
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "packoracle/oracle.h"

namespace {

constexpr std::int64_t kRows = 8;

struct Fixture {
  std::int64_t row_length = 0;
  packoracle::Policy policy;
  std::vector<packoracle::Document> docs;
  packoracle::OracleBatch batch;
  std::int64_t slots = 0;  // slots of all rows of the batch (padding included)
};

// Documents whose sequential greedy packing fills exactly kRows rows of `row_length` slots: documents are
// drawn until the next one would open row kRows + 1 (the reference preset adds no delimiters and refuses
// overflow, so a document of n tokens takes n slots and n ≤ L always fits in a fresh row).
std::vector<packoracle::Document> MakeFixtureDocuments(std::int64_t row_length) {
  std::mt19937 rng(static_cast<std::mt19937::result_type>(20240611u + row_length));
  std::uniform_int_distribution<std::int64_t> length_dist(1, row_length);
  std::uniform_int_distribution<packoracle::Token> token_dist(0, 50'000);
  std::vector<std::vector<packoracle::Token>> token_lists;
  std::int64_t rows = 1;
  std::int64_t space = row_length;
  for (;;) {
    const std::int64_t n = length_dist(rng);
    if (n > space) {
      if (rows == kRows) break;
      ++rows;
      space = row_length;
    }
    space -= n;
    std::vector<packoracle::Token> tokens(static_cast<std::size_t>(n));
    for (auto& t : tokens) t = token_dist(rng);
    token_lists.push_back(std::move(tokens));
  }
  return packoracle::MakeDocuments(token_lists);
}

// Built once per L and kept for the whole run (Google Benchmark calls each function several times).
const Fixture& GetFixture(std::int64_t row_length) {
  static std::map<std::int64_t, Fixture> cache;
  auto it = cache.find(row_length);
  if (it != cache.end()) return it->second;
  Fixture f;
  f.row_length = row_length;
  f.policy = packoracle::FindPreset("reference").policy;
  f.docs = MakeFixtureDocuments(row_length);
  f.batch = packoracle::Materialize(f.docs, packoracle::SequentialLayout(f.docs, f.policy, row_length), f.policy);
  for (const auto& row : f.batch.rows) f.slots += row.length();
  return cache.emplace(row_length, std::move(f)).first->second;
}

// Checks the fixture really is kRows full-length rows; false (and the benchmark skipped) otherwise.
bool FixtureOk(benchmark::State& state, const Fixture& f) {
  if (static_cast<std::int64_t>(f.batch.rows.size()) != kRows || f.slots != kRows * f.row_length) {
    state.SkipWithError("fixture does not fill exactly kRows rows of L slots");
    return false;
  }
  return true;
}

// Items processed = slots per iteration; "slots" is the per-iteration count (run.sh divides by it) and
// "per_slot" the CPU time per slot.
void ReportSlots(benchmark::State& state, std::int64_t slots) {
  state.SetItemsProcessed(state.iterations() * slots);
  state.counters["slots"] = benchmark::Counter(static_cast<double>(slots));
  state.counters["per_slot"] = benchmark::Counter(static_cast<double>(slots),
                                                  benchmark::Counter::kIsIterationInvariantRate |
                                                      benchmark::Counter::kInvert);
}

void BM_Materialize(benchmark::State& state) {
  const Fixture& f = GetFixture(state.range(0));
  if (!FixtureOk(state, f)) return;
  for (auto _ : state) {
    packoracle::OracleBatch batch =
        packoracle::Materialize(f.docs, packoracle::SequentialLayout(f.docs, f.policy, f.row_length), f.policy);
    benchmark::DoNotOptimize(batch.rows.data());
    benchmark::ClobberMemory();
  }
  ReportSlots(state, f.slots);
  state.counters["docs"] = benchmark::Counter(static_cast<double>(f.docs.size()));
}

void BM_Denominators(benchmark::State& state) {
  const Fixture& f = GetFixture(state.range(0));
  if (!FixtureOk(state, f)) return;
  for (auto _ : state) {
    packoracle::StepDenominators d = packoracle::Denominators(f.batch);
    benchmark::DoNotOptimize(d.global_targets);
    benchmark::DoNotOptimize(d.all_positions);
    benchmark::ClobberMemory();
  }
  ReportSlots(state, f.slots);
}

void BM_AttentionGrid(benchmark::State& state) {
  const Fixture& f = GetFixture(state.range(0));
  if (!FixtureOk(state, f)) return;
  const packoracle::OracleRow& row = f.batch.rows.front();
  const std::int64_t n = row.length();
  std::int64_t pad = 0;
  for (const auto& slot : row.slots) pad += slot.is_pad() ? 1 : 0;
  for (auto _ : state) {
    std::int64_t visible = 0;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < n; ++j) visible += packoracle::Attends(row, f.policy, i, j) ? 1 : 0;
    benchmark::DoNotOptimize(visible);
  }
  ReportSlots(state, n);
  state.counters["pairs"] = benchmark::Counter(static_cast<double>(n * n));
  state.counters["pad_slots"] = benchmark::Counter(static_cast<double>(pad));
}

void BM_CopyBaseline(benchmark::State& state) {
  const Fixture& f = GetFixture(state.range(0));
  if (!FixtureOk(state, f)) return;
  std::vector<std::int64_t> src(static_cast<std::size_t>(f.slots));
  for (std::size_t k = 0; k < src.size(); ++k) src[k] = static_cast<std::int64_t>(k);
  std::vector<std::int64_t> dst(src.size());
  for (auto _ : state) {
    benchmark::DoNotOptimize(src.data());
    std::memcpy(dst.data(), src.data(), src.size() * sizeof(std::int64_t));
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  ReportSlots(state, f.slots);
}

}  // namespace

BENCHMARK(BM_CopyBaseline)->Arg(64)->Arg(256)->Arg(1024);
BENCHMARK(BM_Materialize)->Arg(64)->Arg(256)->Arg(1024);
BENCHMARK(BM_Denominators)->Arg(64)->Arg(256)->Arg(1024);
BENCHMARK(BM_AttentionGrid)->Arg(64)->Arg(256)->Arg(1024);

BENCHMARK_MAIN();

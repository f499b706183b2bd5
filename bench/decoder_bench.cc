// The tiny decoder's cost per packed row as L grows, as ratios against a baseline measured in the same run:
// the oracle's Materialize of the same row.
//
// One fixture per row length L: deterministic documents (std::mt19937, lengths uniform in 1..max(1, L/4),
// arbitrary int64 token ids) filling exactly one row of L slots under the `reference` preset.
//
//   BM_MaterializeRow/L    Materialize(docs, layout, policy) of that one row (the baseline)
//   BM_DecoderRow/L        DefaultDecoder().Losses on the row: its ids, positions and document mask (O(L²·D))
//   BM_DecoderInvariance/L what packing_invariance spends on the row: the row, then every document alone
#include <benchmark/benchmark.h>

#include <map>
#include <random>
#include <vector>

#include "packoracle/oracle.h"
#include "packoracle/oracle/decoder.h"

namespace {

struct Fixture {
  packoracle::Policy policy;
  std::vector<packoracle::Document> docs;
  packoracle::Layout layout;
  packoracle::OracleBatch batch;
  std::vector<packoracle::Token> targets;
  std::vector<std::int64_t> positions, segment;
  packoracle::AttentionMatrix mask;
};

const Fixture& GetFixture(std::int64_t row_length) {
  static std::map<std::int64_t, Fixture> cache;
  auto it = cache.find(row_length);
  if (it != cache.end()) return it->second;
  Fixture f;
  f.policy = packoracle::FindPreset("reference").policy;
  std::mt19937 rng(static_cast<std::mt19937::result_type>(20261129u + row_length));
  std::uniform_int_distribution<std::int64_t> length_dist(1, std::max<std::int64_t>(1, row_length / 4));
  std::uniform_int_distribution<packoracle::Token> token_dist(-(packoracle::Token{1} << 40), packoracle::Token{1} << 40);
  std::vector<std::vector<packoracle::Token>> lists;
  for (std::int64_t space = row_length; space > 0;) {
    const std::int64_t n = std::min(space, length_dist(rng));
    std::vector<packoracle::Token> tokens(static_cast<std::size_t>(n));
    for (auto& t : tokens) t = token_dist(rng);
    lists.push_back(std::move(tokens));
    space -= n;
  }
  f.docs = packoracle::MakeDocuments(lists);
  f.layout = packoracle::SequentialLayout(f.docs, f.policy, row_length);
  f.batch = packoracle::Materialize(f.docs, f.layout, f.policy);
  const packoracle::OracleRow& row = f.batch.rows.front();
  for (std::size_t i = 0; i < row.slots.size(); ++i) {
    f.targets.push_back(row.predictions[i].has_target() ? row.predictions[i].target : 0);
    f.positions.push_back(row.position_ids[i].value_or(0));
    f.segment.push_back(row.slots[i].piece);
  }
  f.mask = packoracle::CausalMaskWithin(f.segment);
  return cache.emplace(row_length, std::move(f)).first->second;
}

bool FixtureOk(benchmark::State& state, const Fixture& f) {
  if (f.batch.rows.size() != 1 || f.batch.rows.front().length() != state.range(0)) {
    state.SkipWithError("fixture does not fill exactly one row of L slots");
    return false;
  }
  return true;
}

void ReportSlots(benchmark::State& state, const Fixture& f) {
  const auto slots = static_cast<double>(state.range(0));
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.counters["slots"] = benchmark::Counter(slots);
  state.counters["docs"] = benchmark::Counter(static_cast<double>(f.docs.size()));
}

void BM_MaterializeRow(benchmark::State& state) {
  const Fixture& f = GetFixture(state.range(0));
  if (!FixtureOk(state, f)) return;
  for (auto _ : state) {
    packoracle::OracleBatch batch = packoracle::Materialize(f.docs, f.layout, f.policy);
    benchmark::DoNotOptimize(batch.rows.data());
    benchmark::ClobberMemory();
  }
  ReportSlots(state, f);
}

void BM_DecoderRow(benchmark::State& state) {
  const Fixture& f = GetFixture(state.range(0));
  if (!FixtureOk(state, f)) return;
  const auto& row = f.batch.rows.front();
  for (auto _ : state) {
    auto losses = packoracle::DefaultDecoder().Losses(row.input_ids, f.positions, f.mask, f.targets);
    benchmark::DoNotOptimize(losses.data());
    benchmark::ClobberMemory();
  }
  ReportSlots(state, f);
}

void BM_DecoderInvariance(benchmark::State& state) {
  const Fixture& f = GetFixture(state.range(0));
  if (!FixtureOk(state, f)) return;
  const auto& row = f.batch.rows.front();
  for (auto _ : state) {
    auto packed = packoracle::DefaultDecoder().Losses(row.input_ids, f.positions, f.mask, f.targets);
    benchmark::DoNotOptimize(packed.data());
    for (const auto& piece : f.layout.rows.front().pieces) {
      const auto b = static_cast<std::size_t>(piece.start), e = static_cast<std::size_t>(piece.start + piece.length);
      const std::vector<packoracle::Token> ids(row.input_ids.begin() + static_cast<std::ptrdiff_t>(b),
                                               row.input_ids.begin() + static_cast<std::ptrdiff_t>(e));
      const std::vector<std::int64_t> pos(f.positions.begin() + static_cast<std::ptrdiff_t>(b),
                                          f.positions.begin() + static_cast<std::ptrdiff_t>(e));
      const std::vector<packoracle::Token> tgt(f.targets.begin() + static_cast<std::ptrdiff_t>(b),
                                               f.targets.begin() + static_cast<std::ptrdiff_t>(e));
      auto alone = packoracle::DefaultDecoder().Losses(
          ids, pos, packoracle::CausalMaskWithin(std::vector<std::int64_t>(ids.size(), 0)), tgt);
      benchmark::DoNotOptimize(alone.data());
    }
    benchmark::ClobberMemory();
  }
  ReportSlots(state, f);
}

}  // namespace

BENCHMARK(BM_MaterializeRow)->Arg(16)->Arg(64)->Arg(256)->Arg(1024);
BENCHMARK(BM_DecoderRow)->Arg(16)->Arg(64)->Arg(256)->Arg(1024);
BENCHMARK(BM_DecoderInvariance)->Arg(16)->Arg(64)->Arg(256)->Arg(1024);

BENCHMARK_MAIN();

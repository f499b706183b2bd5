// Property throughput: cases per second of the full invariant set on the reference packer, against the
// oracle alone on the same cases (the baseline, measured in the same run). Documents ≤ 16, rows ≤ 64 slots.
//
//   BM_Verify/profile       Verify(reference packer): generation, packing twice (determinism), every check
//   BM_VerifyWithoutDecoder/profile  the same with CheckOptions::packing_invariance off (the kit before the
//                           tiny decoder): the difference is what packing_invariance costs
//   BM_OracleOnly/profile   the same generated cases: DefaultLayout + Materialize only
#include <benchmark/benchmark.h>

#include "packoracle/oracle.h"
#include "packoracle/properties/generators.h"
#include "packoracle/properties/verify.h"

namespace {

constexpr int kCases = 200;

packoracle::VerifyOptions Options(int profile) {
  packoracle::VerifyOptions o;
  o.cases = kCases;
  o.max_row_length = 64;
  o.max_documents = 16;
  o.profile = packoracle::gen::Profiles()[static_cast<std::size_t>(profile)].name;
  return o;
}

void BM_Verify(benchmark::State& state) {
  packoracle::Candidate reference = packoracle::ReferenceCandidate();
  const auto options = Options(static_cast<int>(state.range(0)));
  std::int64_t cases = 0;
  for (auto _ : state) {
    const auto report = packoracle::Verify(reference, options);
    if (!report.passed) state.SkipWithError("the reference packer failed");
    cases += report.cases_run;
  }
  state.SetItemsProcessed(cases);
  state.SetLabel(*options.profile);
}

void BM_VerifyWithoutDecoder(benchmark::State& state) {
  packoracle::Candidate reference = packoracle::ReferenceCandidate();
  auto options = Options(static_cast<int>(state.range(0)));
  options.check.packing_invariance = false;
  std::int64_t cases = 0;
  for (auto _ : state) {
    const auto report = packoracle::Verify(reference, options);
    if (!report.passed) state.SkipWithError("the reference packer failed");
    cases += report.cases_run;
  }
  state.SetItemsProcessed(cases);
  state.SetLabel(*options.profile);
}

void BM_OracleOnly(benchmark::State& state) {
  const auto options = Options(static_cast<int>(state.range(0)));
  auto profile = packoracle::gen::Profiles()[static_cast<std::size_t>(state.range(0))];
  profile.max_documents = 16;
  const auto generator = packoracle::gen::Request(profile, {}, options.max_row_length);
  std::vector<packoracle::PackRequest> requests;
  for (int k = 0; k < kCases; ++k) requests.push_back(generator(rc::Random(static_cast<std::uint64_t>(k) + 1), 50).value());
  std::int64_t cases = 0;
  for (auto _ : state) {
    for (const auto& r : requests) {
      try {
        auto layout = packoracle::DefaultLayout(r.documents, r.policy, r.row_length);
        benchmark::DoNotOptimize(packoracle::Materialize(r.documents, layout, r.policy));
      } catch (const packoracle::InputError&) {
      }
      ++cases;
    }
  }
  state.SetItemsProcessed(cases);
  state.SetLabel(profile.name);
}

BENCHMARK(BM_Verify)->DenseRange(0, 4)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_VerifyWithoutDecoder)->DenseRange(0, 4)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_OracleOnly)->DenseRange(0, 4)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

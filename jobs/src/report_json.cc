#include "packoracle/jobs/report_json.h"

namespace packoracle::jobs {

nlohmann::ordered_json ReportSectionsJson(const ReportSections& s) {
  nlohmann::ordered_json out;
  out["headline"] = s.headline;
  out["verdict"] = RenderVerdict(s);
  out["violations"] = nlohmann::ordered_json::array();
  for (const Violation& v : s.violations) out["violations"].push_back({{"invariant", Name(v.invariant)}, {"message", v.sentence}});
  out["minimal_case"] = s.minimal_case;
  out["drawn"] = s.drawn;
  out["totals"] = s.totals;
  out["invariance"] = s.invariance;
  out["reproduce"] = s.reproduce;
  out["reproduce_command"] = s.reproduce_command;
  out["regression_draft"] = s.regression_draft;
  return out;
}

}  // namespace packoracle::jobs

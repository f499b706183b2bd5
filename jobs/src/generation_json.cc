// GenerationStats as JSON (generation_json.h).
#include "packoracle/jobs/generation_json.h"

namespace packoracle::jobs {
namespace {

nlohmann::ordered_json Spread(const Distribution& d) {
  return {{"median", d.Quantile(0.5)}, {"p90", d.Quantile(0.9)}, {"max", d.max()}, {"mean", d.mean()}};
}

}  // namespace

nlohmann::ordered_json GenerationStatsJson(const GenerationStats& s) {
  nlohmann::ordered_json j;
  j["cases"] = s.cases;
  j["profiles"] = s.profiles;
  j["documents_per_case"] = Spread(s.documents);
  j["row_length"] = Spread(s.row_length);
  j["tokens_per_case"] = Spread(s.tokens);
  j["documents_per_row"] = Spread(s.documents_per_row);
  j["most_documents_in_a_row"] = Spread(s.most_in_a_row);
  j["rows_per_step"] = Spread(s.rows);
  j["microbatches_per_step"] = Spread(s.microbatches);
  j["ranks"] = Spread(s.ranks);
  j["shares"] = {{"shared_row", s.Share(s.shared_row)},     {"no_documents", s.Share(s.no_documents)},
                 {"empty_document", s.Share(s.empty_document)},
                 {"refused", s.Share(s.refused)},           {"zero_targets", s.Share(s.zero_targets)},
                 {"sft_masks", s.Share(s.sft_masks)}};
  return j;
}

}  // namespace packoracle::jobs

// The exec protocol's records in JSON (DESIGN §5–§6): a `request`, `microbatch` records with their rows and
// producer totals. Used by regressions (fixtures/regressions/) now and by `fuzz --exec` next.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "packoracle/properties/candidate.h"

namespace packoracle {

// {"record":"request","id":..,"row_length":..,"micro_batch_rows":..,"dp_world_size":..,"policy":{..},
//  "documents":[{"doc_uid","tokens","supervised"}],"target_losses":{uid:[..]}}
nlohmann::ordered_json RequestToJson(const PackRequest& request);
// Strict: a missing field, a wrong type or a length mismatch throws InputError naming `where` and the field.
PackRequest RequestFromJson(const nlohmann::json& json, const std::string& where);

// The exec protocol's requests to the other roles (DESIGN §6), one serializer per kind, built from the request
// structs: a loss reducer's
// {"record":"reduce_request","id":..,"policy":{..},"dp_world_size":..,"grad_accum_steps":..,
//  "context_parallel_size":..,"context_parallel_scheme":..,"cp_shards":[m][r][k][[start,end],..],
//  "microbatches":[<microbatch records, no producer>],"slot_losses":[m][r][slot]}, with
//  "selection":{"top_fraction":q,"scope":"optimizer_step"},"slot_scores":[m][r][slot] after them only where a
//  selection is declared (ReduceRequest::selection)
// an attention consumer's {"record":"consume_request","id":..,"policy":{..},"microbatch":<record>}, with, added
// after version 1 and each written only when given (StepContext), "layout":<StepLayoutToJson> and
// "emitted":<the exec packer's own microbatch record, as its child wrote it>;
// and a value consumer's {"record":"value_request","id":..,"policy":{..},"microbatch":<record>,"layout":{..},
//  "gradient":bool} with "slot_weights":[row][slot] when gradient is true, and "emitted" when given.
nlohmann::ordered_json ReduceRequestToJson(const ReduceRequest& request, std::int64_t id);
// What a consumer may be told beside its micro-batch (null: not told; the request then is what version 1 wrote).
struct StepContext {
  const StepLayout* layout = nullptr;
  const nlohmann::ordered_json* emitted = nullptr;
};
nlohmann::ordered_json ConsumeRequestToJson(const CandidateMicrobatch& microbatch, const Policy& policy,
                                            std::int64_t id, const StepContext& step = {});
nlohmann::ordered_json ValueRequestToJson(const CandidateMicrobatch& microbatch, const Policy& policy,
                                          const ValueRequest& request, std::int64_t id,
                                          const nlohmann::ordered_json* emitted = nullptr);
// A StepLayout (candidate.h) as the requests carry it: {"microbatch","dp_rank","dp_world_size","micro_step",
// "micro_steps","context_parallel_size","context_parallel_scheme","cp_shards":[row][cp rank][[start,end],..]},
// the names packoracle.StepView's layout has in Python.
nlohmann::ordered_json StepLayoutToJson(const StepLayout& layout);

// A `producer` object (DESIGN §5; the exec protocol's `totals` records hold a list of them): the fields of
// kProducerTotalsFields, held to ProducerTotalsProblem's rule. InputError naming `where` and the field.
ProducerTotals ProducerTotalsFromJson(const nlohmann::json& json, const std::string& where);

// {"doc_uid":..,"tokens":[..],"supervised":[..]} (a request's document, or a dump's `document` record).
Document DocumentFromJson(const nlohmann::json& json, const std::string& where);

// {"record":"microbatch","step","micro_step","rank","rows":[...],"producer":{...}}
nlohmann::ordered_json MicrobatchToJson(const CandidateMicrobatch& microbatch);
// `spans_absent` null: every row needs its doc_spans (the exec protocol's answers). Given (a dump's micro-batch,
// DESIGN §5): a record whose rows all leave doc_spans out is read with none and sets it true (verify derives
// them from the documents); some rows with them and some without is an InputError naming the row.
CandidateMicrobatch MicrobatchFromJson(const nlohmann::json& json, const std::string& where,
                                       bool* spans_absent = nullptr);

// Python's json module (and some loggers) write a NaN or infinite loss as the bare tokens NaN, Infinity and
// -Infinity, which are not JSON. A producer that divides 0 by 0 must be told so under `denominator`, not as
// unreadable output: this returns the line with those tokens (outside strings) quoted, which the producer
// fields then read as non-finite numbers; nullopt when the line has none.
std::optional<std::string> QuoteNonFiniteTokens(std::string_view line);

}  // namespace packoracle

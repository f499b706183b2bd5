// A consumer's mask, as runs (mask_runs.h), compared with the policy's attention rule at O(runs) a query.
//
// The rule's owner is Attends (oracle/batch.h), stated cell by cell. Here it is read the way
// fastcheck/dense_mask.h reads it: a non-padding query i sees the keys [lo, i] (lo: the start of i's piece under
// doc_causal, 0 under row_causal), padding keys in [0, i] included exactly under pad_keys visible; so its
// expected runs are a handful, and the symmetric difference with the consumer's runs is a merge of two short
// sorted lists. properties/test/attention_runs_test.cc pins the result to Attends element by element; CheckCase
// uses it to find the wrong queries of a row of any length and lets Attends list the cells of the report.
#pragma once

#include <cstdint>
#include <vector>

#include "packoracle/oracle/batch.h"
#include "packoracle/oracle/policy.h"
#include "packoracle/properties/mask_runs.h"

namespace packoracle {

// A query whose visible keys differ from the rule's.
struct QueryDisagreement {
  std::int64_t query = 0;
  std::int64_t keys = 0;       // how many keys differ (visible to one of mask and rule only)
  std::int64_t first_key = 0;  // the smallest of them
  bool operator==(const QueryDisagreement&) const = default;
};

// Per slot of a row, the piece it holds (an id equal within a piece, each piece one contiguous range of slots,
// as in a packed row) or -1 for padding.
std::vector<std::int64_t> PieceIds(const OracleRow& row);

// Every non-padding query of a row whose runs break the rule, in query order. `runs` must be well formed for
// n = piece.size() (Malformed says nothing); a piece id seen in two separate ranges is an std::logic_error.
std::vector<QueryDisagreement> DisagreeingQueries(const MaskRuns& runs, const std::vector<std::int64_t>& piece,
                                                  const Policy& policy);

}  // namespace packoracle

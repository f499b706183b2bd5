// packing_invariance: the tiny decoder on the candidate's row against each document piece alone.
#include "packing_invariance.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "packoracle/oracle/decoder.h"
#include "packoracle/oracle/error.h"
#include "packoracle/properties/backend_attention.h"

namespace packoracle::internal {
namespace {

constexpr double kRelativeTolerance = 1e-12;

std::string Num(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

}  // namespace

std::vector<PieceSlots> PiecesOf(const OracleRow& row) {
  std::vector<PieceSlots> out;
  for (std::size_t i = 0; i < row.slots.size(); ++i) {
    const Slot& s = row.slots[i];
    if (s.is_pad()) continue;
    if (i > 0 && !row.slots[i - 1].is_pad() && row.slots[i - 1].piece == s.piece) {
      ++out.back().length;
    } else {
      out.push_back({s.doc, s.offset, i, 1});
    }
  }
  return out;
}

bool PromisesIsolation(const Policy& policy) {
  return policy.attention == Attention::kDocCausal && policy.positions == Positions::kDocReset;
}

std::vector<std::int64_t> AlonePositions(const OracleRow& truth, const PieceSlots& piece, const Policy& policy) {
  std::vector<std::int64_t> out(piece.length);
  for (std::size_t k = 0; k < piece.length; ++k) {
    const std::size_t i = piece.start + k;
    const auto& want = truth.position_ids[i];
    out[k] = policy.positions == Positions::kRowContinuous ? policy.position_base + static_cast<std::int64_t>(k)
                                                           : (want ? *want : policy.position_base + truth.slots[i].offset);
  }
  return out;
}

void CheckPackingInvariance(const std::vector<InvarianceRow>& rows, const OracleBatch& oracle, const Policy& policy,
                            CaseResult& result) {
  result.checked.insert(Invariant::kPackingInvariance);
  // Strict only where the policy promises isolation: doc_causal attention and per-document positions. Elsewhere
  // a document's losses legitimately depend on what was packed before it; the change is measured, not failed.
  const bool strict = PromisesIsolation(policy);
  const TinyDecoder& model = DefaultDecoder();
  Contamination measured;
  double relative_sum = 0;

  for (std::size_t r = 0; r < rows.size() && r < oracle.rows.size(); ++r) {
    const CandidateRow& row = *rows[r].row;
    const OracleRow& truth = oracle.rows[r];
    const std::size_t n = row.input_ids.size();
    if (n != truth.slots.size()) continue;  // shape reports it; nothing comparable
    std::vector<std::int64_t> positions(n);
    if (row.position_ids) {
      positions = *row.position_ids;
    } else {
      for (std::size_t i = 0; i < n; ++i) positions[i] = static_cast<std::int64_t>(i);  // backends' default arange
    }
    // Targets: the oracle's, so that only what the model is fed (ids, positions, attention) can differ.
    std::vector<Token> targets(n, 0);
    for (std::size_t i = 0; i < n; ++i)
      if (truth.predictions[i].weight > 0) targets[i] = truth.predictions[i].target;

    std::vector<double> packed;
    try {
      // a consumer's runs as a matrix: the decoder runs on rows of at most decoder_max_row_length slots
      const DenseMask mask = rows[r].consumer_mask ? ToDense(*rows[r].consumer_mask) : BackendAttentionAsFed(row, policy);
      packed = model.Losses(row.input_ids, positions, mask, targets);
    } catch (const InputError& e) {
      result.violations.push_back({Invariant::kPackingInvariance,
                                   rows[r].where + ": the decoder cannot run on the row as a backend would feed it: " +
                                       e.what(),
                                   static_cast<std::int64_t>(r), -1, "", "", {}});
      continue;
    }

    bool reported = false;
    for (const PieceSlots& piece : PiecesOf(truth)) {
      // The piece alone in a row of its own: its tokens, plain causal attention, and its positions from the
      // policy's base: the oracle's positions under doc_reset (offset + base; a piece continued from an earlier
      // row counts on, wraps or restarts as split_positions says), base + k under row_continuous.
      std::vector<Token> ids(piece.length), alone_targets(piece.length);
      const std::vector<std::int64_t> alone_positions = AlonePositions(truth, piece, policy);
      for (std::size_t k = 0; k < piece.length; ++k) {
        ids[k] = truth.slots[piece.start + k].token;
        alone_targets[k] = targets[piece.start + k];
      }
      const auto alone = model.Losses(ids, alone_positions, CausalMaskWithin(std::vector<std::int64_t>(piece.length, 0)),
                                      alone_targets);
      std::size_t differing = 0;
      std::size_t first = 0;
      for (std::size_t k = 0; k < piece.length; ++k) {
        const std::size_t i = piece.start + k;
        if (truth.predictions[i].weight <= 0) continue;
        const double expected = alone[k], actual = packed[i];
        const double relative = std::fabs(actual - expected) / std::max(std::fabs(expected), 1e-300);
        ++measured.targets;
        relative_sum += relative;
        measured.max_relative = std::max(measured.max_relative, relative);
        if (!(relative <= kRelativeTolerance) && differing++ == 0) first = k;  // NaN counts as differing
      }
      if (!strict || differing == 0 || reported) continue;
      reported = true;  // one violation per row: its first differing target
      const std::size_t i = piece.start + first;
      const std::string& uid = oracle.documents[static_cast<std::size_t>(piece.doc)].uid;
      result.violations.push_back(
          {Invariant::kPackingInvariance,
           rows[r].where + " slot " + std::to_string(i) + ": document '" + uid + "' (token " +
               std::to_string(truth.slots[i].offset) +
               ") has decoder loss " + Num(packed[i]) + " nats packed, " + Num(alone[first]) +
               " alone in a row of its own (" + std::to_string(differing) + " of its targets in this row differ: "
               "the model sees another document, or other positions, than the document alone gives it)",
           static_cast<std::int64_t>(r), static_cast<std::int64_t>(i), Num(alone[first]), Num(packed[i]), {}});
    }
  }
  if (measured.targets > 0) measured.mean_relative = relative_sum / static_cast<double>(measured.targets);
  result.contamination = measured;
}

}  // namespace packoracle::internal

// A user's packer, written without packoracle: greedy packing in torchtune's PackedDataset convention
// (labels shifted per document, positions reset per document, padding continues the positions, seq_lens
// with a padding segment). It knows nothing of the kit but the request and result types.
#pragma once

#include <algorithm>

#include <packoracle/oracle/presets.h>
#include <packoracle/properties/candidate.h>

struct MyPacker {
  static std::vector<packoracle::Policy> Policies() { return {packoracle::FindPreset("torchtune-packed").policy}; }

  packoracle::PackResult Pack(const packoracle::PackRequest& request) {
    const auto L = request.row_length;
    const auto& p = request.policy;
    std::vector<packoracle::CandidateRow> rows;
    for (const auto& doc : request.documents) {
      const auto n = static_cast<std::int64_t>(doc.tokens.size());
      if (n > L) return packoracle::PackResult::Refuse("document " + doc.uid + " is longer than the row");
      if (n == 0) continue;
      if (rows.empty() || static_cast<std::int64_t>(rows.back().input_ids.size()) + n > L) rows.emplace_back();
      auto& row = rows.back();
      row.doc_spans.push_back({doc.uid, static_cast<std::int64_t>(row.input_ids.size()), n, 0});
      for (std::int64_t k = 0; k < n; ++k) {
        const bool target = k + 1 < n && (doc.supervised.empty() || doc.supervised[k + 1] == 1);
        row.input_ids.push_back(doc.tokens[k]);
        row.labels.push_back(target ? doc.tokens[k + 1] : p.ignore_index);
        if (!row.position_ids) row.position_ids.emplace();
        row.position_ids->push_back(k);
      }
      if (!row.seq_lens) row.seq_lens.emplace();
      row.seq_lens->push_back(n);
    }
    packoracle::PackResult result;
    for (auto& row : rows) {
      const auto used = static_cast<std::int64_t>(row.input_ids.size());
      if (used < L) row.seq_lens->push_back(L - used);  // the padding segment
      for (auto i = used; i < L; ++i) {
        row.input_ids.push_back(p.pad_id);
        row.labels.push_back(p.ignore_index);
        row.position_ids->push_back(std::min(row.position_ids->back() + 1, L - 1));
      }
      result.microbatches.push_back({0, static_cast<std::int64_t>(result.microbatches.size()), 0, {row}, std::nullopt});
    }
    return result;
  }
};

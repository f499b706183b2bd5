#include "packoracle/oracle/segments.h"

#include <algorithm>
#include <map>
#include <string>

#include "packoracle/oracle/error.h"

namespace packoracle {
namespace {

std::string List(const std::vector<std::int64_t>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out + "]";
}

}  // namespace

std::vector<std::int64_t> SegmentIds(const SegmentStarts& starts, std::int64_t n) {
  std::vector<std::int64_t> ids(static_cast<std::size_t>(n), 0);
  std::size_t k = 0;
  std::int64_t id = -1;
  for (std::int64_t i = 0; i < n; ++i) {
    while (k < starts.size() && starts[k] <= i) {
      ++id;
      ++k;
    }
    ids[static_cast<std::size_t>(i)] = std::max<std::int64_t>(id, 0);
  }
  return ids;
}

SegmentStarts TrueSegmentStarts(const OracleRow& row) {
  SegmentStarts starts;
  for (std::size_t i = 0; i < row.slots.size(); ++i) {
    const Slot& s = row.slots[i];
    if (i == 0 || s.is_pad() != row.slots[i - 1].is_pad() || s.piece != row.slots[i - 1].piece) {
      starts.push_back(static_cast<std::int64_t>(i));
    }
  }
  return starts;
}

bool NamedBySegmentEncodings(std::string_view encoding) {
  return encoding == "cu_seqlens" || encoding == "seq_lens" || encoding == "doc_ids";
}

SegmentStarts ExpectedSegmentStarts(const OracleRow& row, const Policy& policy, std::string_view encoding) {
  if (policy.segment_encodings == SegmentEncodings::kRows && NamedBySegmentEncodings(encoding))
    return FromCuSeqlens(row.cu_seqlens, row.length());
  return TrueSegmentStarts(row);
}

SegmentStarts FromCuSeqlens(const std::vector<std::int64_t>& cu, std::int64_t row_length) {
  if (cu.empty() || cu.front() != 0) throw InputError("cu_seqlens " + List(cu) + " must start at 0");
  if (cu.back() != row_length) {
    throw InputError("cu_seqlens " + List(cu) + " must end at the row length " + std::to_string(row_length));
  }
  SegmentStarts starts;
  for (std::size_t k = 0; k + 1 < cu.size(); ++k) {
    if (cu[k + 1] < cu[k]) {
      throw InputError("cu_seqlens " + List(cu) + " decreases at entry " + std::to_string(k + 1));
    }
    if (cu[k + 1] > cu[k]) starts.push_back(cu[k]);  // a repeated value is a zero-length segment
  }
  return starts;
}

SegmentStarts FromSeqLens(const std::vector<std::int64_t>& seq_lens, std::int64_t row_length) {
  SegmentStarts starts;
  std::int64_t at = 0;
  for (std::size_t k = 0; k < seq_lens.size(); ++k) {
    if (seq_lens[k] < 0) {
      throw InputError("seq_lens " + List(seq_lens) + " has a negative length at entry " + std::to_string(k));
    }
    if (seq_lens[k] > 0) starts.push_back(at);
    at += seq_lens[k];
  }
  if (at != row_length) {
    throw InputError("seq_lens " + List(seq_lens) + " sum to " + std::to_string(at) + ", not the row length " +
                     std::to_string(row_length));
  }
  return starts;
}

SegmentStarts FromPositionReset(const std::vector<std::int64_t>& positions, std::int64_t base) {
  SegmentStarts starts;
  for (std::size_t i = 0; i < positions.size(); ++i)
    if (i == 0 || positions[i] == base) starts.push_back(static_cast<std::int64_t>(i));
  return starts;
}

SegmentStarts FromPositionStep(const std::vector<std::int64_t>& positions) {
  SegmentStarts starts;
  for (std::size_t i = 0; i < positions.size(); ++i)
    if (i == 0 || positions[i] - positions[i - 1] != 1) starts.push_back(static_cast<std::int64_t>(i));
  return starts;
}

std::optional<std::pair<std::int64_t, std::int64_t>> ReusedDocId(const std::vector<std::int64_t>& doc_ids) {
  return ReusedDocId(doc_ids.data(), doc_ids.size());
}

std::optional<std::pair<std::int64_t, std::int64_t>> ReusedDocId(const std::int64_t* doc_ids, std::size_t n) {
  std::map<std::int64_t, std::int64_t> first_slot;  // id → the slot where its segment starts
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t id = doc_ids[i];
    if (id < 0 || (i > 0 && doc_ids[i - 1] == id)) continue;  // padding, or the same segment going on
    const auto [it, fresh] = first_slot.emplace(id, static_cast<std::int64_t>(i));
    if (!fresh) return std::make_pair(it->second, static_cast<std::int64_t>(i));
  }
  return std::nullopt;
}

SegmentStarts FromDocIds(const std::vector<std::int64_t>& doc_ids) {
  SegmentStarts starts;
  for (std::size_t i = 0; i < doc_ids.size(); ++i)
    if (i == 0 || doc_ids[i] != doc_ids[i - 1]) starts.push_back(static_cast<std::int64_t>(i));
  return starts;
}

SegmentStarts FromEodCloses(const std::vector<Token>& input_ids, Token eod_id, std::size_t first_token) {
  SegmentStarts starts;
  for (std::size_t i = 0; i < input_ids.size(); ++i)
    if (i == 0 || i == first_token || input_ids[i - 1] == eod_id) starts.push_back(static_cast<std::int64_t>(i));
  return starts;
}

SegmentStarts FromBosOpens(const std::vector<Token>& input_ids, Token bos_id, std::size_t first_token) {
  SegmentStarts starts;
  for (std::size_t i = 0; i < input_ids.size(); ++i)
    if (i == 0 || i == first_token || input_ids[i] == bos_id) starts.push_back(static_cast<std::int64_t>(i));
  return starts;
}

}  // namespace packoracle

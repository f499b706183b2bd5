// CaseEdits and ApplyCaseEdit (case_edits.h).
#include "case_edits.h"

#include <algorithm>
#include <map>

#include "packoracle/properties/generators.h"

namespace packoracle::internal {
namespace {

std::size_t ExtraTargets(const Policy& p) { return (p.bos_id ? 1u : 0u) + (p.eos_id ? 1u : 0u); }

// Keeps a document's losses one per effective token after its tokens changed.
void FitLosses(PackRequest& r, const Document& doc) {
  auto it = r.target_losses.find(doc.uid);
  if (it != r.target_losses.end()) it->second.resize(doc.tokens.size() + ExtraTargets(r.policy), 1.0);
}

// After a removal the documents are named d0, d1, ... again by position, as generated (their losses
// follow them).
PackRequest Renumbered(PackRequest r) {
  std::map<std::string, std::vector<double>> losses;
  for (std::size_t i = 0; i < r.documents.size(); ++i) {
    const std::string uid = "d" + std::to_string(i);
    auto it = r.target_losses.find(r.documents[i].uid);
    if (it != r.target_losses.end()) losses[uid] = it->second;
    r.documents[i].uid = uid;
  }
  r.target_losses = std::move(losses);
  return r;
}

bool Parse(const std::string& text, std::size_t& a, std::size_t& b) {
  const auto comma = text.find(',');
  try {
    a = std::stoul(text.substr(0, comma));
    b = comma == std::string::npos ? 0 : std::stoul(text.substr(comma + 1));
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// Distinct token values per document: document i (from 1) holds i·B+1, i·B+2, ... with B = 10, 100, ...
// the first power of ten above the longest document (and the document count), delimiters and reserved ids
// avoided as the generator avoids them.
std::optional<PackRequest> Distinct(const PackRequest& r) {
  std::size_t longest = r.documents.size();
  for (const auto& d : r.documents) longest = std::max(longest, d.tokens.size());
  Token base = 10;
  while (static_cast<std::size_t>(base) <= longest) base *= 10;
  PackRequest out = r;
  for (std::size_t i = 0; i < out.documents.size(); ++i)
    for (std::size_t k = 0; k < out.documents[i].tokens.size(); ++k)
      out.documents[i].tokens[k] = static_cast<Token>(i + 1) * base + static_cast<Token>(k + 1);
  gen::AvoidReservedTokens(out.documents, out.policy);
  bool changed = false;
  for (std::size_t i = 0; i < out.documents.size(); ++i) changed = changed || out.documents[i].tokens != r.documents[i].tokens;
  return changed ? std::optional<PackRequest>(out) : std::nullopt;
}

// Shorter lengths to try for a length n, first the shortest: 1, n/2, then n − n/4, n − n/8, ..., n − 1. Taking
// the first that still fails and trying again finds a size threshold (a document cut at 1,000 tokens fails
// from 1,001 on) in about log² n tries instead of one token at a time.
std::vector<std::int64_t> Cuts(std::int64_t n) {
  std::vector<std::int64_t> out;
  auto add = [&](std::int64_t to) {
    if (to >= 1 && to < n && (out.empty() || to > out.back())) out.push_back(to);
  };
  add(1);
  add(n / 2);
  for (std::int64_t drop = n / 4; drop > 1; drop /= 2) add(n - drop);
  add(n - 1);
  return out;
}

}  // namespace

void AppendCaseEdit(std::vector<std::string>& edits, const std::string& edit) {
  auto document_of = [](const std::string& e) { return e.substr(0, e.find(',') + 1); };  // "t3," of "t3,17"
  if (edit[0] == 't' && !edits.empty() && edits.back()[0] == 't' && document_of(edits.back()) == document_of(edit)) {
    edits.back() = edit;
    return;
  }
  edits.push_back(edit);
}

std::vector<std::string> CaseEdits(const PackRequest& r) {
  std::vector<std::string> edits;
  // runs of documents first, halving (delta debugging's order), then one by one
  const std::size_t n_docs = r.documents.size();
  for (std::size_t run = n_docs / 2; run >= 2; run /= 2)
    for (std::size_t at = 0; at + run <= n_docs; at += run) edits.push_back("r" + std::to_string(at) + "," + std::to_string(run));
  for (std::size_t i = 0; i < r.documents.size(); ++i) edits.push_back("x" + std::to_string(i));
  for (std::size_t i = 0; i < r.documents.size(); ++i) {
    const auto n = static_cast<std::int64_t>(r.documents[i].tokens.size());
    for (std::int64_t to : Cuts(n)) edits.push_back("t" + std::to_string(i) + "," + std::to_string(to));
  }
  for (std::int64_t to : Cuts(r.row_length))
    if (to > 1 || r.row_length <= 3) edits.push_back("L" + std::to_string(to));  // a row of 1 only from a short one
  if (r.micro_batch_rows > 1) edits.push_back("m1");
  if (r.dp_world_size > 1) edits.push_back("w1");
  for (std::size_t i = 0; i < r.documents.size(); ++i) {
    const auto& s = r.documents[i].supervised;
    if (std::find(s.begin(), s.end(), 0) != s.end()) edits.push_back("s" + std::to_string(i));
  }
  return edits;
}

std::optional<PackRequest> ApplyCaseEdit(const PackRequest& r, const std::string& edit) {
  if (edit.empty()) return std::nullopt;
  if (edit == kDistinctTokens) return Distinct(r);
  std::size_t a = 0, b = 0;
  if (!Parse(edit.substr(1), a, b)) return std::nullopt;
  PackRequest out = r;
  switch (edit[0]) {
    case 'x':  // remove document a
      if (a >= out.documents.size()) return std::nullopt;
      out.target_losses.erase(out.documents[a].uid);
      out.documents.erase(out.documents.begin() + static_cast<std::ptrdiff_t>(a));
      return Renumbered(std::move(out));
    case 'r': {  // documents a .. a+b-1 removed
      if (b < 1 || a + b > out.documents.size()) return std::nullopt;
      for (std::size_t i = a; i < a + b; ++i) out.target_losses.erase(out.documents[i].uid);
      out.documents.erase(out.documents.begin() + static_cast<std::ptrdiff_t>(a),
                          out.documents.begin() + static_cast<std::ptrdiff_t>(a + b));
      return Renumbered(std::move(out));
    }
    case 't': {  // document a cut to its first b tokens
      if (a >= out.documents.size() || b < 1 || b >= out.documents[a].tokens.size()) return std::nullopt;
      Document& d = out.documents[a];
      d.tokens.resize(b);
      d.supervised.resize(b);
      FitLosses(out, d);
      return out;
    }
    case 'L':  // a shorter row
      if (a < 1 || static_cast<std::int64_t>(a) >= out.row_length) return std::nullopt;
      out.row_length = static_cast<std::int64_t>(a);
      return out;
    case 'm':
      if (out.micro_batch_rows == 1) return std::nullopt;
      out.micro_batch_rows = 1;
      return out;
    case 'w':
      if (out.dp_world_size == 1) return std::nullopt;
      out.dp_world_size = 1;
      return out;
    case 's':  // document a fully supervised
      if (a >= out.documents.size()) return std::nullopt;
      std::fill(out.documents[a].supervised.begin(), out.documents[a].supervised.end(), 1);
      return out;
    default:
      return std::nullopt;
  }
}

}  // namespace packoracle::internal

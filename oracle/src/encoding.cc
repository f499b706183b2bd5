#include "packoracle/oracle/encoding.h"

#include <string>

#include "packoracle/oracle/error.h"

namespace packoracle {

std::vector<DecodedTarget> DecodeTargets(const std::vector<Token>& labels, const std::vector<double>* loss_mask,
                                         const Policy& policy) {
  const std::size_t n = labels.size();
  if (policy.loss_mask && (loss_mask == nullptr || loss_mask->size() != n)) {
    throw InputError("the policy has loss_mask: true, so a loss_mask as long as the labels (" + std::to_string(n) +
                     ") is needed, got " + (loss_mask ? std::to_string(loss_mask->size()) : std::string("none")));
  }
  std::vector<DecodedTarget> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    DecodedTarget& t = out[i];
    if (policy.label_alignment == LabelAlignment::kAligned) {
      if (i + 1 == n) continue;  // the last slot has no target under aligned labels
      t.has_target = true;
      t.target = labels[i + 1];
      t.weight = labels[i + 1] != policy.ignore_index ? 1.0 : 0.0;
    } else {
      t.has_target = true;
      t.target = labels[i];
      t.weight = labels[i] != policy.ignore_index ? 1.0 : 0.0;
      if (policy.loss_mask) t.weight *= (*loss_mask)[i];
    }
  }
  return out;
}

}  // namespace packoracle

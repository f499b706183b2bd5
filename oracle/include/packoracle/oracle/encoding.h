// Decoding a producer's label encoding back into (target, weight) per prediction: the inverse of
// LabelsOf, and the way the kit reads any producer's labels (DESIGN §3 label_alignment, ignore_index,
// loss_mask).
#pragma once

#include <vector>

#include "packoracle/oracle/document.h"
#include "packoracle/oracle/policy.h"

namespace packoracle {

struct DecodedTarget {
  bool has_target = false;  // some label is read for this prediction
  Token target = 0;         // the label read
  double weight = 0;        // 0 when the label is ignore_index (or masked out by loss_mask)
};

// Prediction i of a row of n slots:
//   aligned:     reads labels[i+1] (i < n-1; the last slot reads nothing); w = 1[labels[i+1] != ignore_index]
//   pre_shifted: reads labels[i]; w = 1[labels[i] != ignore_index] · (loss_mask ? loss_mask[i] : 1)
// `loss_mask` may be null when the policy has none; when the policy has loss_mask true it must be given and
// as long as `labels` (InputError otherwise).
std::vector<DecodedTarget> DecodeTargets(const std::vector<Token>& labels, const std::vector<double>* loss_mask,
                                         const Policy& policy);

}  // namespace packoracle

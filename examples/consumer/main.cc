// The lesson's denominator from the installed oracle: exits 0 when it is the seven included targets (and the
// installed tiny decoder has its 427 parameters).
#include <iostream>

#include <packoracle/oracle.h>
#include <packoracle/oracle/decoder.h>

int main() {
  const auto docs = packoracle::MakeDocuments({{11, 12, 13}, {21, 22, 23, 24, 25, 26}});
  packoracle::Policy policy = packoracle::FindPreset("reference").policy;
  policy.row_end_target = packoracle::RowEndTarget::kNextInDoc;  // one 9-token window in 8 slots
  policy.overflow = packoracle::Overflow::kSplit;
  const auto layout = packoracle::SequentialLayout(docs, policy, 8);
  const auto batch = packoracle::Materialize(docs, layout, policy);
  const auto objective = packoracle::Objective(batch, {{0, 1, 3}, {0, 1, 1, 1, 1, 1}},
                                               packoracle::Denominator::kGlobalTargets);
  const double n = packoracle::Denominators(batch).global_targets;
  std::cout << "valid targets " << n << ", token mean " << objective.value << "\n";
  const auto parameters = packoracle::DefaultDecoder().ParameterCount();
  std::cout << "tiny decoder parameters " << parameters << "\n";
  return n == 7 && objective.value == 9.0 / 7.0 && parameters == 427 ? 0 : 1;
}

#!/usr/bin/env python3
# BUGGY exec candidate, mimics bugzoo DN-04 mcore-bridge-zero-count-nan (modelscope/mcore-bridge PR #104, aligned
# with Megatron-LM PR #3396): the loss of a micro-batch is loss_sum / num_tokens without clamp(min=1), so a
# micro-batch with no valid target (a rank whose tokens are all prompt, padding or one-token documents) gives
# 0/0 = NaN, which then reaches every gradient. Packing and encodings are the correct torchtune ones
# (torchtune_packed.py) and the objective its global token mean, divided by the step's count; only the
# division is unclamped, so a step with no valid target (one-token documents, an all-prompt batch) reports NaN.
# Python's json writes it as the bare token NaN, which the kit reads as the NaN it means. Run it with
#   packoracle fuzz --exec 'python3 python/candidates/buggy_dn04_nan_on_empty.py' --preset torchtune-packed
# and the kit reports `denominator`: a non-finite loss where zero valid targets must be reported.
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import count_of, loss_sum_of, serve  # noqa: E402
import torchtune_packed  # noqa: E402


def unclamped_mean(groups, policy, target_losses):
    n = sum(count_of(r, policy) for _, _, rows in groups for r in rows)  # the step's valid targets
    out = []
    for _, _, rows in groups:
        s = sum(loss_sum_of(r, policy, target_losses) for r in rows)
        # THE BUG: no clamp(min=1); torch gives 0/0 = nan where Python would raise.
        loss = s / n if n > 0 else float("nan")
        out.append({"loss_sum": s, "denominator": int(n) if float(n).is_integer() else n,
                    "denominator_scope": "global", "loss": loss})
    return out


if __name__ == "__main__":
    serve(torchtune_packed.pack, totals=unclamped_mean)

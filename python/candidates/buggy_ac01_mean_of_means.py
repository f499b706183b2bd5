#!/usr/bin/env python3
# BUGGY exec candidate, mimics bugzoo AC-01 hf-gradient-accumulation-mean-of-means (huggingface/transformers
# issue #24725, fixed by PR #34191 in 4.46): without num_items_in_batch each micro-batch's loss was the mean over
# its own valid targets (cross_entropy reduction="mean") and gradient accumulation averaged those means, so
# tokens of short micro-batches weighed more, while the Trainer documented accumulation as one larger batch,
# i.e. a global token mean (global_targets; zoo INV-14). Packing and encodings are the correct
# DataCollatorWithFlattening ones (hf_flatten.py); only the reducer is wrong: each micro-batch reports its own
# count as the denominator (scope microbatch) and its own mean as the loss. Run it with
#   packoracle fuzz --exec 'python3 python/candidates/buggy_ac01_mean_of_means.py' --preset hf-flatten
# and the kit reports `loss`: the micro-batch losses do not add up to the step's token mean.
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import count_of, loss_sum_of, serve  # noqa: E402
import hf_flatten  # noqa: E402


def per_microbatch_mean(groups, policy, target_losses):
    out = []
    for _, _, rows in groups:
        n = sum(count_of(r, policy) for r in rows)
        s = sum(loss_sum_of(r, policy, target_losses) for r in rows)
        # THE BUG: reduction="mean" over the micro-batch, whatever the step's count.
        out.append({"loss_sum": s, "denominator": int(n) if float(n).is_integer() else n,
                    "denominator_scope": "microbatch", "loss": s / n if n > 0 else 0.0})
    return out


if __name__ == "__main__":
    serve(hf_flatten.pack, totals=per_microbatch_mean)

"""verl 0.9.1: agg_loss(..., "token-mean") on a step without any valid target (every response mask 0, the global
batch_num_tokens 0) returns 0 / 0 = NaN for every micro-batch. Report: verl-zero-targets.md

    python verl-zero-targets.py             # exit 1 on 0.9.1: loss nan
    python verl-zero-targets.py --with-fix  # exit 0: agg_loss with a zero-token guard (loss 0)
Needs verl 0.9.1 in an environment of its own (it pins transformers<5.11): python -m venv v;
v/bin/pip install torch==2.13.0 verl==0.9.1. Where verl does not import, it exits 77 (skipped).
"""
import sys

import torch

try:
    from importlib.metadata import version

    from verl.trainer.ppo import core_algos
except ImportError as e:
    print(f"SKIP (77): needs verl 0.9.1 in its own environment ({e})")
    sys.exit(77)

_original_agg_loss = core_algos.agg_loss


def agg_loss_guarded(loss_mat, loss_mask, loss_agg_mode, dp_size=1, batch_num_tokens=None, **kwargs):
    """The proposed fix: a step without targets contributes 0 (no 0 / 0)."""
    if loss_agg_mode == "token-mean" and batch_num_tokens is not None and float(batch_num_tokens) == 0:
        return (loss_mat * loss_mask).sum() * 0.0
    return _original_agg_loss(loss_mat, loss_mask, loss_agg_mode, dp_size=dp_size,
                              batch_num_tokens=batch_num_tokens, **kwargs)


agg_loss = agg_loss_guarded if "--with-fix" in sys.argv else core_algos.agg_loss
# One micro-batch of the step: two responses whose masks are all 0 (e.g. a rank holding only padding rows).
loss_mat = torch.tensor([[0.5, 0.7, 0.9], [1.1, 1.3, 1.5]], requires_grad=True)
loss_mask = torch.zeros(2, 3)
batch_num_tokens = loss_mask.sum().item()  # what the trainer all-reduces over the step: 0
loss = agg_loss(loss_mat, loss_mask, "token-mean", dp_size=1, batch_num_tokens=batch_num_tokens,
                global_batch_size=2)
if not torch.isfinite(loss):
    print(f"FAIL verl {version('verl')}: agg_loss(token-mean, batch_num_tokens={batch_num_tokens}) = {loss.item()} "
          f"(want 0: a step without targets)")
    sys.exit(1)
print(f"OK verl {version('verl')}: agg_loss = {loss.item()}")

"""OpenRLHF 0.11.2: aggregate_loss(...) on a step without any valid target (every loss mask 0, the global
batch_num_tokens / global_batch_size 0) returns 0 / 0 = NaN, and DeepSpeed backpropagates it.
Report: openrlhf-zero-targets.md

    python openrlhf-zero-targets.py             # exit 1 on 0.11.2: loss nan (token level and sample level)
    python openrlhf-zero-targets.py --with-fix  # exit 0: aggregate_loss with a zero-count guard (loss 0)
Needs openrlhf 0.11.2 and deepspeed in an environment of its own (pip install openrlhf fails on CPU: see the
report). Where they do not import, it exits 77 (skipped).
"""
import importlib.util
import sys
import types

import torch

try:
    from importlib.metadata import distribution, version

    import deepspeed  # noqa: F401  (openrlhf/models/utils.py imports it)
    models = distribution("openrlhf").locate_file("openrlhf/models")
except Exception as e:  # ImportError, or PackageNotFoundError when openrlhf is not installed
    print(f"SKIP (77): needs openrlhf 0.11.2 and deepspeed in their own environment ({type(e).__name__}: {e})")
    sys.exit(77)

# openrlhf.models.__init__ imports the Actor and flash_attn; load models/utils.py and models/loss.py from their
# files under a bare package, as OpenRLHF's tests/test_loss_aggregation.py does.
package = types.ModuleType("openrlhf_models")
package.__path__ = [str(models)]
sys.modules["openrlhf_models"] = package
for name in ("utils", "loss"):
    spec = importlib.util.spec_from_file_location(f"openrlhf_models.{name}", models / f"{name}.py")
    sys.modules[spec.name] = module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
_original = sys.modules["openrlhf_models.loss"].aggregate_loss


def aggregate_loss_guarded(loss, loss_mask, token_level_loss=True, dp_size=1, batch_num_tokens=None,
                           global_batch_size=None):
    """The proposed fix: a step without targets contributes 0 (no 0 / 0)."""
    count = batch_num_tokens if token_level_loss else global_batch_size
    if count is not None and float(count) == 0:
        return (loss * loss_mask).sum() * 0.0
    return _original(loss, loss_mask, token_level_loss, dp_size, batch_num_tokens, global_batch_size)


aggregate_loss = aggregate_loss_guarded if "--with-fix" in sys.argv else _original
# One micro-batch of the step: two samples whose loss masks are all 0; the step's counts (iter_grad_accum_global_norm,
# all-reduced) are then 0 / gas = 0.
loss = torch.tensor([[0.5, 0.7, 0.9], [1.1, 1.3, 1.5]], requires_grad=True)
mask = torch.zeros(2, 3)
bad = []
for token_level in (True, False):
    value = aggregate_loss(loss, mask, token_level_loss=token_level, dp_size=1, batch_num_tokens=0.0,
                           global_batch_size=0.0)
    if not torch.isfinite(value):
        bad.append(f"token_level_loss={token_level}: {value.item()}")
if bad:
    print(f"FAIL openrlhf {version('openrlhf')}: aggregate_loss with zero step counts gives " + ", ".join(bad) +
          " (want 0: a step without targets)")
    sys.exit(1)
print(f"OK openrlhf {version('openrlhf')}: aggregate_loss = 0 at both levels")

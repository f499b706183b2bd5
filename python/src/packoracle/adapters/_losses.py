"""Per-slot losses as logits: a real loss function (ForCausalLMLoss, agg_loss, ...) is fed logits whose
cross-entropy at each slot is exactly the kit's loss of that slot, so the library's own reduction and
denominator are what is checked, not a copy of them."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def two_class_logits(losses: Sequence[float] | np.ndarray, valid: Sequence[bool] | np.ndarray) -> np.ndarray:
    """Logits [n, 2] with cross_entropy(logits[i], 0) = losses[i] where valid[i] (class 0 is the target:
    the labels are mapped to 0, the ignored ones kept): z_1 − z_0 = log(e^ℓ − 1). Float64: the library upcasts
    to float32 at most, and its error is then its own."""
    n = len(losses)
    out = np.zeros((n, 2), dtype=np.float64)
    for i in range(n):
        if valid[i]:
            loss = float(losses[i])
            out[i, 1] = math.log(math.expm1(loss)) if loss > 1e-12 else -1e4
    return out


"""The guard learns the model: before a run trusts a model with packed batches, the model's own mask
construction (its config, its attention implementation, the use_cache its loop calls it with) is fuzzed as an
attention consumer in the feed the run's batches have (DESIGN §12, "Guard").

    from packoracle import guard
    guard.check_model(model, batch)                 # a custom loop, before its first step: raises GuardViolation
    guard.check_model(model, batch, use_cache=False)  # as the Trainer calls it

The model is read at the mask level (packoracle.adapters.transformers_models.mask_consumer): the forward is
stopped at the first attention module, whose mask argument is compared by the core with the document mask of
the kit's generated micro-batches. The check costs an embedding and a mask per case, not a forward.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

import numpy as np

from .._arrays import as_array
from .._fuzz import SMALL_CASES, Counterexample, FuzzResult, fuzz
from .._policy import PolicyLike
from ._batches import GuardViolation

DEFAULT_CASES = 100
_DEFAULT = object()


def feed_of(batch: Mapping[str, Any]) -> str:
    """Which producer configuration a batch is (the feeds of transformers_models.FEEDS), from its keys."""
    if not isinstance(batch, Mapping):
        raise TypeError(f"guard.check_model: batch must be a dict of the model's inputs, got {type(batch).__name__}")
    if batch.get("attention_mask") is not None:
        mask = as_array(batch["attention_mask"], "guard.check_model: batch", "attention_mask")
        return "ones_mask" if bool(np.all(mask != 0)) else "padding_mask"
    if batch.get("cu_seq_lens_q") is not None or batch.get("cu_seqlens") is not None:
        return "cu_seq_lens" if batch.get("max_length_q") is not None else "cu_seq_lens_alone"
    if batch.get("seq_idx") is not None:
        return "seq_idx"
    return "position_ids"


def check_model(model: Any, batch: Mapping[str, Any], *, policy: PolicyLike = "reference",
                use_cache: Any = _DEFAULT, cases: int = DEFAULT_CASES, seed: Optional[int] = None,
                on_violation: str = "raise") -> Optional[FuzzResult]:
    """Checks that `model` keeps the documents of a packed batch apart when fed as `batch` is fed (its keys:
    position_ids only, cu_seq_lens_*, seq_idx, or an attention_mask), called with `use_cache` as the loop calls
    it (default: the model's own default, config.use_cache, as ``model(**batch)`` runs it; the HF Trainer
    passes False). Returns the FuzzResult when every case holds; otherwise raises GuardViolation with the kit's
    report and minimal counterexample (or, with ``on_violation="log"``, logs it and returns None). Its cases are
    small (rows of at most 16 slots, 8 documents a case): each row costs the model a forward pass."""
    if not hasattr(model, "config") or not callable(model):
        raise TypeError(f"guard.check_model: model must be a transformers model (a module with a config), got "
                        f"{type(model).__name__}")
    if on_violation not in ("raise", "log"):
        raise ValueError(f"guard.check_model: on_violation must be 'raise' or 'log', got {on_violation!r}")
    if not isinstance(cases, int) or isinstance(cases, bool) or cases < 1:
        raise ValueError(f"guard.check_model: cases must be a positive integer, got {cases!r}")
    from ..adapters.transformers_models import mask_consumer

    feed = feed_of(batch)
    cache = getattr(model.config, "use_cache", None) if use_cache is _DEFAULT else use_cache
    name = f"{type(model).__name__} ({model.config._attn_implementation}, {feed}, use_cache={cache})"
    consumer = mask_consumer(model, feed, cache)
    try:
        return fuzz(None, policy, microbatch_consumer=consumer, cases=cases, seed=seed, name=name, **SMALL_CASES)
    except Counterexample as e:
        text = (f"packoracle.guard: {name} does not keep the documents of a packed batch apart:\n{e}")
        if on_violation == "raise":
            raise GuardViolation(text, report=e, dump=None, checks=("attention",), where=name) from None
        import logging

        logging.getLogger("packoracle.guard").error(text)
        return None

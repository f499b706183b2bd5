"""The guard learns the model: before a run trusts a model with packed batches, the model's own attention path
(its config, its attention implementation, the use_cache its loop calls it with) is fuzzed as an attention
consumer in the feed the run's batches have (DESIGN §12, "Guard").

    from packoracle import guard
    guard.check_model(model, batch)                 # a custom loop, before its first step: raises GuardViolation
    guard.check_model(model, batch, use_cache=False)  # as the Trainer calls it

The feed mirrors the batch: which boundary encoding rides along (cu_seq_lens with or without max_length,
seq_idx, an all-ones or a padding attention_mask), whether position_ids do (without them the model builds its
own, arange over each row, and is checked that way), whether the batch is one flattened row (each generated
row is then a forward of its own, as DataCollatorWithFlattening hands rows to a model) and whether a row
starts in the middle of a document (positions not starting at 0: the generated cases then split documents).

What is read (transformers_models.model_consumer, level "auto"): on eager, sdpa and flex_attention the mask
handed to the first attention layer (the forward stops there: an embedding and a mask per case); on the flash
path (flash_attention_2/3/4 and the hub kernels transformers runs through integrations.flash_attention) the
sequences transformers hands the varlen or dense kernel, read by recording kernels put in flash-attn's place
for one call, so no flash-attn is needed (transformers_models.flash_kernel_masks). Where neither can say (a
model with linear-attention or state-space layers, an implementation of its own), the forward level: which
inputs each output really depends on (transformers_models.dependency_masks; one backward per case).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

import numpy as np

from .._arrays import as_array, rows_of
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


def feed_options_of(batch: Mapping[str, Any]) -> tuple[Any, bool]:
    """(transformers_models.Feed, starts_mid_document): the batch's feed (feed_of), whether it carries
    position_ids, whether it is one row (a flattening collator's batch), and whether a row's first position
    is not 0 (the row starts in the middle of a document: the pipeline splits documents)."""
    from ..adapters.transformers_models import Feed

    where = "guard.check_model: batch"
    name = feed_of(batch)
    ids = rows_of(as_array(batch["input_ids"], where, "input_ids"), where, "input_ids") \
        if batch.get("input_ids") is not None else None
    positions = batch.get("position_ids")
    mid_document = False
    if positions is not None:
        pos = rows_of(as_array(positions, where, "position_ids"), where, "position_ids")
        mid_document = bool(pos.shape[1] and np.any(pos[:, 0] != 0))
    return Feed(name, position_ids=positions is not None, one_row=ids is not None and ids.shape[0] == 1), mid_document


# The generated cases when the batch shows a row that starts in the middle of a document: the reference policy
# with documents split across rows (a row's first piece continues a document, its positions continuing).
SPLITTING_POLICY = {"preset": "reference", "overflow": "split"}


def check_model(model: Any, batch: Mapping[str, Any], *, policy: Optional[PolicyLike] = None,
                use_cache: Any = _DEFAULT, cases: int = DEFAULT_CASES, seed: Optional[int] = None,
                on_violation: str = "raise", level: str = "auto") -> Optional[FuzzResult]:
    """Checks that `model` keeps the documents of a packed batch apart when fed as `batch` is fed (its keys:
    position_ids only, cu_seq_lens_*, seq_idx, or an attention_mask; with or without position_ids; one row or
    several; see feed_options_of), called with `use_cache` as the loop calls it (default: the model's own
    default, config.use_cache, as ``model(**batch)`` runs it; the HF Trainer passes False). Returns the
    FuzzResult when every case holds; otherwise raises GuardViolation with the kit's report and minimal
    counterexample (or, with ``on_violation="log"``, logs it and returns None). Its cases are small (rows of at
    most 16 slots, 8 documents a case), generated by the kit's reference packer under `policy` (default:
    "reference", with documents split across rows when a row of the batch starts mid-document).

    ``level``: "auto" (default) reads what the attention path uses (the mask handed to the first attention
    layer on eager, sdpa and flex_attention; the sequences handed to the kernel on the flash path) and the
    forward level where that cannot say (transformers_models.mask_level_unreadable); "mask" or "forward" force
    one (the forward level costs a forward and a backward per case, and runs the model's real kernels)."""
    if not hasattr(model, "config") or not callable(model):
        raise TypeError(f"guard.check_model: model must be a transformers model (a module with a config), got "
                        f"{type(model).__name__}")
    if on_violation not in ("raise", "log"):
        raise ValueError(f"guard.check_model: on_violation must be 'raise' or 'log', got {on_violation!r}")
    if not isinstance(cases, int) or isinstance(cases, bool) or cases < 1:
        raise ValueError(f"guard.check_model: cases must be a positive integer, got {cases!r}")
    from ..adapters.transformers_models import LEVELS, mask_level_unreadable, model_consumer

    if level not in LEVELS:
        raise ValueError(f"guard.check_model: level must be one of {', '.join(LEVELS)}, got {level!r}")
    feed, mid_document = feed_options_of(batch)
    if policy is None:
        policy = SPLITTING_POLICY if mid_document else "reference"
    cache = getattr(model.config, "use_cache", None) if use_cache is _DEFAULT else use_cache
    read = level if level != "auto" else "forward" if mask_level_unreadable(model) else "mask"
    implementation = getattr(model.config, "_attn_implementation", None)
    name = f"{type(model).__name__} ({implementation}, {feed.label}, use_cache={cache}, {read} level)"
    consumer = model_consumer(model, feed, cache, level, perturb=implementation == "flex_attention")
    try:
        return fuzz(None, policy, microbatch_consumer=consumer, cases=cases, seed=seed, name=name, **SMALL_CASES)
    except Counterexample as e:
        text = (f"packoracle.guard: {name} does not keep the documents of a packed batch apart:\n{e}")
        if on_violation == "raise":
            raise GuardViolation(text, report=e, dump=None, checks=("attention",), where=name) from None
        import logging

        logging.getLogger("packoracle.guard").error(text)
        return None

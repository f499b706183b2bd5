"""huggingface/transformers models as attention consumers: what a real model attends with, for a packed batch.

A tiny random-init model of each family (built from its config class: nothing is downloaded) is fed one
micro-batch of the kit in one producer configuration (a *feed*: position_ids only, with cu_seq_lens_*, with
seq_idx, with an all-ones or a 0/1 padding attention_mask), called as a training loop calls it
(``model(**batch)``, with ``use_cache`` as the model defaults it or as the Trainer sets it), and read back at one
of two levels:

- *forward* (the truth, for every path: attention, sliding or chunked overlays, linear-attention convolutions
  and recurrences): which inputs each position's output really depends on, read from the gradients of the
  model's outputs with respect to its input embeddings (one batched backward). A masked key has a gradient of
  exactly zero; a key the model reads through any layer does not. FlexAttention has no backward on the CPU:
  there, one forward per slot with that slot's input changed says which outputs read it.
- *mask* (fast): what the first attention layer attends with, the forward stopped there. On eager, sdpa and
  flex the mask it is handed, caught on the way in (a forward pre-hook): a 4-D bool or additive mask, a
  FlexAttention BlockMask, or None, which those paths run as plain causal attention. On the flash path (the
  mask is None or a 2-D padding mask there, and says little) the sequences transformers' _flash_attention_forward
  hands the varlen or dense kernel, read by recording kernels (flash_kernel_masks): no flash-attn needed, so it
  runs on a CPU.

Nothing of the library is re-implemented: the model builds its own masks and runs its own attention; this
module only builds the feed from the rows (as a collator would: from whatever encodings any packer's rows
carry, see the feed section) and reads what came out.
"""

from __future__ import annotations

import json

from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from .._masks import densify, is_block_mask
from ._base import Finding

WRITTEN_FOR = "5.24.0"

FAMILIES = ("llama", "qwen3", "mistral", "llama4", "qwen3_5")
# "flash_double": transformers' flash-attention 2 path with a CPU kernel double (adapters/flash_double.py).
ATTENTION = ("eager", "sdpa", "flex_attention", "flash_double")
# Kernels that run only on a GPU (bench/gpu/device_lane.sh runs them there, with device="cuda").
CUDA_ATTENTION = ("flash_attention_2", "flash_attention_3")
FEEDS = ("position_ids", "cu_seq_lens", "seq_idx", "ones_mask", "padding_mask", "cu_seq_lens_alone")
# use_cache as a plain loop gets it (None: the model's default, config.use_cache = True) and as the Trainer
# sets it (False, from TrainingArguments).
CACHE = {"model default": None, "Trainer": False}

_COMMON = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
               num_key_value_heads=2, head_dim=16, use_cache=True)


def _config(family: str) -> Any:
    """The family's config class with tiny sizes. Windows and chunks are smaller than a document can be, so
    that the sliding and chunked paths really cut."""
    if family == "llama":
        from transformers import LlamaConfig
        return LlamaConfig(**_COMMON)
    if family == "qwen3":
        from transformers import Qwen3Config
        return Qwen3Config(**_COMMON)
    if family == "mistral":
        from transformers import MistralConfig
        return MistralConfig(**_COMMON, sliding_window=4096)
    if family == "llama4":
        from transformers import Llama4TextConfig
        return Llama4TextConfig(**_COMMON, attention_chunk_size=8192, intermediate_size_mlp=64, num_local_experts=1,
                                num_experts_per_tok=1, interleave_moe_layer_step=1, no_rope_layers=[1, 1])
    if family == "qwen3_5":
        from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig
        return Qwen3_5TextConfig(**_COMMON, layer_types=["linear_attention", "full_attention"],
                                 linear_num_key_heads=2, linear_num_value_heads=2, linear_key_head_dim=8,
                                 linear_value_head_dim=8)
    raise ValueError(f"family: one of {', '.join(FAMILIES)}, got {family!r}")


_MODELS: dict = {}


def tiny_model(family: str, attention: str, device: str = "cpu") -> Any:
    """A random-init model of the family (seeded, eval mode; float32, bfloat16 for the flash kernels, which take
    no float32), built once per (family, attention, device)."""
    key = (family, attention, device)
    if key not in _MODELS:
        import torch
        from transformers import AutoModelForCausalLM

        if attention not in ATTENTION + CUDA_ATTENTION:
            raise ValueError(f"attention: one of {', '.join(ATTENTION + CUDA_ATTENTION)}, got {attention!r}")
        torch.manual_seed(0)
        dtype = torch.bfloat16 if attention in CUDA_ATTENTION else torch.float32
        built_with = "sdpa" if attention == "flash_double" else attention
        model = AutoModelForCausalLM.from_config(_config(family), attn_implementation=built_with, dtype=dtype)
        if attention == "flash_double":
            from .flash_double import on_flash_path

            on_flash_path(model)
        _MODELS[key] = model.to(device).eval()
    return _MODELS[key]


# ---- the feed: the kit's rows as a producer of each configuration hands them to the model -----------------
#
# A feed is built from whatever the rows carry, from any packer (the kit's reference packer, a user's, an
# adapter's): position_ids as the rows have them (never made up: a feed that passes them needs them), document
# boundaries (cu_seq_lens, seq_idx) read by the core from the first encoding the row carries (the policy's
# declared one first, then cu_seqlens, seq_lens, doc_ids, position resets: `_core.segments_as_fed`, the reading
# the guard uses), padding from the row's 2-D attention_mask, else from the slots no doc_span covers (the
# padding every backend is told, as the core's BackendAttention reads it). A micro-batch whose rows lack what
# the feed needs raises FeedNotBuilt, which the consumers turn into "not checked" (named), never a failure of
# the model.

# The encodings a row's boundaries are read from when its policy's declared one is absent, in this order
# (policy boundary_source → the canonical field the core reads it from).
class FeedNotBuilt(Exception):
    """The rows lack an encoding the feed needs (its message names it): the micro-batch is not checked."""


@dataclass(frozen=True)
class Feed:
    """How a producer hands a micro-batch to the model: `name` (one of FEEDS: which boundary encoding rides
    along), whether position_ids ride along (``position_ids=False``: DataCollatorWithFlattening with
    return_position_ids=False; the model then builds its own, arange over each row) and whether each row is a
    forward of its own (``one_row``: a flattening collator hands the model one row a batch)."""

    name: str
    position_ids: bool = True
    one_row: bool = False

    def __post_init__(self) -> None:
        if self.name not in FEEDS:
            raise ValueError(f"feed: one of {', '.join(FEEDS)}, got {self.name!r}")

    @property
    def label(self) -> str:
        """The feed as the consumer's name shows it (the plain feed name when both options are at their
        defaults, so that the consumer column's names are unchanged)."""
        return (self.name + ("" if self.position_ids else "+no_position_ids") +
                ("+one_row" if self.one_row else ""))


def _as_feed(feed: Any) -> Feed:
    return feed if isinstance(feed, Feed) else Feed(feed)


def _resolved(policy: Optional[dict]) -> dict:
    if policy is not None:
        return policy
    from .._policy import resolve

    return resolve("reference")


def _padding(row: dict) -> np.ndarray:
    """The row's padding slots as a backend is told them: its 2-D attention_mask (0: padding) when it has one,
    else the slots no doc_span covers (the core's PaddingOf)."""
    n = len(row["input_ids"])
    if row.get("attention_mask") is not None:
        return np.asarray(row["attention_mask"]).reshape(-1)[:n] == 0
    pad = np.ones(n, dtype=bool)
    for span in row.get("doc_spans") or []:
        start, length = ((span["start"], span["length"]) if isinstance(span, dict) else (span[1], span[2]))
        pad[max(int(start), 0):max(int(start) + int(length), 0)] = False
    return pad


def boundary_starts(row: dict, policy: Optional[dict] = None) -> Optional[tuple[list[int], str]]:
    """(segment starts, the source read) of one canonical row: the guard's reading (guard._segments.
    boundary_starts, the core's reading of the first boundary encoding the row carries). None when it carries
    none."""
    from ..guard._segments import boundary_starts as read

    return read(row, _resolved(policy))


def _segment_ids(starts: list[int], pad: np.ndarray) -> np.ndarray:
    """Per slot, the ordinal of its sequence as a collator hands it: the row's segments, and each padding slot
    a one-token sequence of its own (as a collator pads)."""
    n = len(pad)
    first = np.zeros(n, dtype=bool)
    first[[s for s in starts if 0 <= s < n]] = True
    if n:
        first[0] = True
    first |= pad
    first[1:] |= pad[:-1]
    return np.cumsum(first) - 1


def _stacked(rows: list, key: str, fill: int) -> np.ndarray:
    """One field of every row as rows × slots; rows of an unpadded policy are right-padded to the longest (a
    padded slot is a future key of every real query, so a causal model's answer for the real slots is the same)."""
    n = max(len(r["input_ids"]) for r in rows)
    return np.stack([np.pad(np.asarray(r[key], dtype=np.int64).reshape(-1), (0, n - len(r["input_ids"])),
                            constant_values=fill) for r in rows])


def _stacked_array(per_row: list[np.ndarray], n: int, fill: Any) -> np.ndarray:
    return np.stack([np.pad(a, (0, n - len(a)), constant_values=fill) for a in per_row])


def build_feed(microbatch: dict, feed: Any, device: str = "cpu", policy: Optional[dict] = None) -> dict:
    """The model's keyword arguments for one micro-batch (rows stacked: the kit pads every row to its length).
    `feed`: a Feed or a feed name (position_ids passed). Raises FeedNotBuilt when the rows lack what it needs."""
    out = _feed_on_cpu(microbatch, _as_feed(feed), policy)
    return {k: v.to(device) if hasattr(v, "to") else v for k, v in out.items()}


def row_lengths(microbatch: dict) -> list[int]:
    return [len(r["input_ids"]) for r in microbatch["rows"]]


def cropped(masks: Any, lengths: list[int]) -> list:
    """Each row's answer cut to its own length (see _stacked)."""
    return [m[:k, :k] if isinstance(m, np.ndarray) else m for m, k in zip(masks, lengths)]  # a BlockMask: as is


def _feed_on_cpu(microbatch: dict, feed: Feed, policy: Optional[dict]) -> dict:
    import torch

    rows = microbatch["rows"]
    n = max(len(r["input_ids"]) for r in rows)
    out: dict[str, Any] = {"input_ids": torch.as_tensor(_stacked(rows, "input_ids", 0))}
    if feed.position_ids:
        if any(r.get("position_ids") is None for r in rows):
            raise FeedNotBuilt(f"the {feed.name} feed passes position_ids, and the rows carry none")
        out["position_ids"] = torch.as_tensor(_stacked(rows, "position_ids", 0))
    pads = [_padding(r) for r in rows]
    if feed.name in ("cu_seq_lens", "cu_seq_lens_alone", "seq_idx"):
        segments = []
        for r, pad in zip(rows, pads):
            read = boundary_starts(r, policy)
            if read is None:
                raise FeedNotBuilt(f"the {feed.name} feed passes document boundaries, and the rows carry none of "
                                   f"cu_seqlens, seq_lens, doc_ids (seq_idx), position_ids, nor the policy's "
                                   f"boundary encoding")
            segments.append(_segment_ids(read[0], np.pad(pad, (0, n - len(pad)), constant_values=True)))
        if feed.name == "seq_idx":
            out["seq_idx"] = torch.as_tensor(np.stack(segments), dtype=torch.int32)
        else:
            seg = np.concatenate([s + k * (n + 1) for k, s in enumerate(segments)])  # the flattened batch
            lengths = np.bincount(np.unique(seg, return_inverse=True)[1])
            cu = torch.as_tensor(np.concatenate([[0], np.cumsum(lengths)]), dtype=torch.int32)
            out.update(cu_seq_lens_q=cu, cu_seq_lens_k=cu)
            if feed.name == "cu_seq_lens":
                out.update(max_length_q=int(lengths.max()), max_length_k=int(lengths.max()))
    elif feed.name == "ones_mask":
        out["attention_mask"] = torch.ones_like(out["input_ids"])
    elif feed.name == "padding_mask":
        out["attention_mask"] = torch.as_tensor(_stacked_array([~p for p in pads], n, False).astype(np.int64))
    return out


# ---- reading back what the model attends with -------------------------------------------------------------

def dependency_masks(model: Any, feed: dict, use_cache: Optional[bool]) -> np.ndarray:
    """rows × n × n: (b, i, j) true when the output at slot i of row b depends on the input at slot j (the
    gradient of a random projection of the logits at i with respect to the input embedding at j is nonzero)."""
    import torch

    ids = feed["input_ids"]
    rows, n = ids.shape
    embeds = model.get_input_embeddings()(ids).detach().requires_grad_(True)
    kwargs = {k: v for k, v in feed.items() if k != "input_ids"}
    if use_cache is not None:
        kwargs["use_cache"] = use_cache
    logits = model(inputs_embeds=embeds, **kwargs).logits  # rows × n × vocab
    probe = torch.randn(logits.shape[-1], generator=torch.Generator().manual_seed(0))
    probe = probe.to(logits.device, logits.dtype)
    grad_outputs = torch.zeros((n,) + tuple(logits.shape), device=logits.device, dtype=logits.dtype)
    grad_outputs[torch.arange(n), :, torch.arange(n), :] = probe  # query i: its slot in every row
    try:
        (grads,) = torch.autograd.grad(logits, embeds, grad_outputs=grad_outputs, is_grads_batched=True)
    except RuntimeError:  # an op of the backward without a batching rule: one backward per query
        grads = torch.stack([torch.autograd.grad(logits, embeds, grad_outputs=g, retain_graph=True)[0]
                             for g in grad_outputs])
    # grads: query i × row b × key j × hidden
    return (grads.abs().sum(-1) != 0).permute(1, 0, 2).cpu().numpy()


def perturbation_masks(model: Any, feed: dict, use_cache: Optional[bool]) -> np.ndarray:
    """As dependency_masks, without gradients (FlexAttention has no backward on the CPU): one forward per slot j
    with the input embedding at j (in every row) replaced; (b, i, j) true where the output at i changed. A
    forward is deterministic, so an output that does not read slot j comes back bit for bit the same."""
    import torch

    ids = feed["input_ids"]
    rows, n = ids.shape
    kwargs = {k: v for k, v in feed.items() if k != "input_ids"}
    if use_cache is not None:
        kwargs["use_cache"] = use_cache
    with torch.no_grad():
        embeds = model.get_input_embeddings()(ids)
        base = model(inputs_embeds=embeds, **kwargs).logits
        noise = torch.randn(embeds.shape[-1], generator=torch.Generator().manual_seed(0)).to(embeds.device,
                                                                                           embeds.dtype)
        out = np.zeros((rows, n, n), dtype=bool)
        for j in range(n):
            changed = embeds.clone()
            changed[:, j] += noise
            logits = model(inputs_embeds=changed, **kwargs).logits
            out[:, :, j] = (logits != base).any(-1).cpu().numpy()
    return out


def _dense_from_layer_mask(mask: Any, rows: int, n: int) -> list:
    """One layer's mask as the per-row answers the kit reads: None is plain causal (is_causal) on the eager, sdpa
    and flex paths (the flash path is read from its kernel's arguments instead: flash_kernel_masks)."""
    if mask is None:
        return [np.tril(np.ones((n, n), dtype=bool))] * rows
    if type(mask).__name__ == "BlockMask":
        return [mask] * rows
    m = mask.detach().cpu()
    if m.dtype.is_floating_point:  # eager's additive mask: 0 where attended, the dtype's minimum elsewhere
        m = m == 0
    m = m.numpy()
    return [m[min(b, m.shape[0] - 1), 0, :n, -n:] for b in range(rows)]


class _Caught(Exception):
    """Raised where the mask level has what it reads (the first attention module's mask, or the first flash
    kernel's arguments): the forward stops there."""

    def __init__(self, mask: Any):
        super().__init__("mask caught")
        self.mask = mask


class MaskUnreadable(Exception):
    """The mask level cannot say what this model attends with (its message says why): read the forward level."""


def _first_attention(model: Any) -> Any:
    attention = [m for name, m in model.named_modules() if name.endswith("self_attn")]
    if not attention:
        raise MaskUnreadable(f"{type(model).__name__} has no module named *.self_attn: no attention mask to read")
    return attention[0]


def caught_masks(model: Any, feed: dict, use_cache: Optional[bool]) -> list:
    """Per row, what the model's first attention layer attends with: on the flash path (flash_attention_2 and
    the other implementations transformers runs through integrations.flash_attention), the sequences its kernel
    is handed (flash_kernel_masks); elsewhere (eager, sdpa, flex_attention) the mask handed to the first
    attention module (``*.self_attn``), caught on the way in. The forward stops there, so a large model costs
    its embedding and first layer norm, not a forward."""
    if flash_path(model):
        return flash_kernel_masks(model, feed, use_cache)
    import torch

    def catch(module: Any, args: tuple, kwargs: dict) -> None:
        raise _Caught(kwargs.get("attention_mask"))

    handle = _first_attention(model).register_forward_pre_hook(catch, with_kwargs=True)
    kwargs = dict(feed)
    if use_cache is not None:
        kwargs["use_cache"] = use_cache
    try:
        with torch.no_grad():
            model(**kwargs)
    except _Caught as caught:
        rows, n = feed["input_ids"].shape
        return _dense_from_layer_mask(caught.mask, rows, n)
    finally:
        handle.remove()
    raise MaskUnreadable(f"{type(model).__name__}'s forward never reached its first attention module")


# ---- the flash path: the sequences transformers hands the varlen kernel -------------------------------------
#
# On the flash path the mask a layer is handed says little (None for a packed batch, or a 2-D padding mask):
# transformers decides in _flash_attention_forward which kernel runs and on which sequences (cu_seq_lens_q/k
# with max_length_q/k; else the unpadding of a 2-D mask; else sequences found in position_ids when the batch
# has one row; else the dense kernel, causal over each row). To read that decision without flash-attn (on a CPU
# it cannot be installed), the model's own attention function (AttentionInterface's entry for its
# implementation, integrations.flash_attention.flash_attention_forward) is called by a recorder registered in
# its place for one forward, with query, key and value replaced by tensors that hold each slot's index, and
# with recording kernels in the place lazy_import_flash_attention fills: the first kernel call shows which
# slots each sequence holds, whatever unpadding or flattening came before. The kernels' semantics are
# flash-attn's documented ones (causal within each sequence, bottom-right aligned, window_size inclusive).


def flash_path(model: Any) -> bool:
    """Whether the model's attention implementation runs transformers' flash-attention path
    (integrations.flash_attention.flash_attention_forward: flash_attention_2/3/4 and the hub kernels that
    transformers wraps with it)."""
    try:
        from transformers.integrations.flash_attention import flash_attention_forward
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    except ImportError:
        return False
    implementation = getattr(model.config, "_attn_implementation", None)
    return implementation in ALL_ATTENTION_FUNCTIONS and ALL_ATTENTION_FUNCTIONS[implementation] is flash_attention_forward


def _flash_visible(nq: int, nk: int, causal: bool, window: Any) -> np.ndarray:
    """flash-attn's mask of one sequence of nq queries and nk keys: causal bottom-right aligned, window_size
    (left, right) inclusive, -1 unbounded."""
    i = np.arange(nq)[:, None] + (nk - nq)
    j = np.arange(nk)[None, :]
    ok = np.ones((nq, nk), dtype=bool)
    if causal:
        ok &= j <= i
    left, right = (int(w) for w in (window if window is not None else (-1, -1)))
    if left >= 0:
        ok &= j >= i - left
    if right >= 0:
        ok &= j <= i + right
    return ok


def _kernel_masks(call: tuple, rows: int, n: int, nk: int) -> list:
    """Per row, n × n: the kernel call's visibility between the row's own slots (`call`: what a recording
    kernel saw; its query and key hold each slot's index, row-major). A slot in no sequence the kernel is handed
    attends to nothing; a key of another row (a sequence that crosses rows) is in no row's mask."""
    kind, q, k, cu_q, cu_k, causal, window = call
    if kind == "varlen":
        qs = q.reshape(q.shape[0], -1)[:, 0].round().long().cpu().numpy()
        ks = k.reshape(k.shape[0], -1)[:, 0].round().long().cpu().numpy()
        sequences = list(zip(cu_q[:-1], cu_q[1:], cu_k[:-1], cu_k[1:]))
    else:  # the dense kernel: each row one sequence
        qs, ks = np.arange(rows * n), np.arange(rows * nk)
        sequences = [(b * n, (b + 1) * n, b * nk, (b + 1) * nk) for b in range(rows)]
    out = np.zeros((rows, n, n), dtype=bool)
    for a, b, c, d in sequences:
        q_row, q_slot = np.divmod(qs[a:b], n)
        k_row, k_slot = np.divmod(ks[c:d], nk)
        visible = _flash_visible(b - a, d - c, causal, window)
        visible &= (q_row[:, None] == k_row[None, :]) & (k_slot[None, :] < n)
        x, y = np.nonzero(visible)
        out[q_row[x], q_slot[x], k_slot[y]] = True
    return list(out)


def _recording_kernels() -> tuple:
    """flash_attn_func and flash_attn_varlen_func stand-ins (flash-attn's signatures, which
    _lazy_define_process_function reads for the keyword arguments it hands them) that raise _Caught with
    their arguments."""

    def flash_attn_varlen_func(q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any,
                               max_seqlen_q: Any = None, max_seqlen_k: Any = None, dropout_p: float = 0.0,
                               softmax_scale: Optional[float] = None, causal: bool = False,
                               window_size: tuple = (-1, -1), softcap: float = 0.0,
                               deterministic: bool = False) -> Any:
        raise _Caught(("varlen", q, k, [int(x) for x in cu_seqlens_q.tolist()],
                       [int(x) for x in cu_seqlens_k.tolist()], causal, window_size))

    def flash_attn_func(q: Any, k: Any, v: Any, dropout_p: float = 0.0, softmax_scale: Optional[float] = None,
                        causal: bool = False, window_size: tuple = (-1, -1), softcap: float = 0.0,
                        deterministic: bool = False) -> Any:
        raise _Caught(("dense", q, k, None, None, causal, window_size))

    return flash_attn_func, flash_attn_varlen_func


def flash_kernel_masks(model: Any, feed: dict, use_cache: Optional[bool]) -> list:
    """Per row, n × n: which keys each query attends to on the flash path, read from the first kernel call of
    the model's first attention layer (see the section's comment). Needs no flash-attn: the kernels are never
    called. Raises MaskUnreadable when the attention function reaches no kernel (an implementation that does
    not go through transformers' _flash_attention_forward)."""
    import torch
    import transformers.modeling_flash_attention_utils as fa
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    implementation = model.config._attn_implementation
    original = ALL_ATTENTION_FUNCTIONS[implementation]
    dense, varlen = _recording_kernels()
    process = fa._lazy_define_process_function(varlen)
    rows, n = feed["input_ids"].shape
    seen: dict = {}

    def recorder(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any) -> Any:
        b, _, lq, _ = query.shape
        lk = key.shape[2]
        seen["nk"] = lk
        slots_q = torch.arange(b * lq, dtype=torch.float64, device=query.device).view(b, 1, lq, 1)
        slots_k = torch.arange(b * lk, dtype=torch.float64, device=query.device).view(b, 1, lk, 1)
        original(module, slots_q, slots_k, slots_k.clone(), attention_mask, **kwargs)
        raise MaskUnreadable(f"{implementation}'s attention function returned without calling a flash kernel")

    def lazy_import(implementation: Any, *args: Any, **kwargs: Any) -> tuple:
        return (dense, varlen, None, fa._pad_input, fa._unpad_input), (process, dict)

    kwargs = dict(feed)
    if use_cache is not None:
        kwargs["use_cache"] = use_cache
    local = getattr(ALL_ATTENTION_FUNCTIONS, "_local_mapping", {})
    had_local, before = implementation in local, local.get(implementation)
    saved_import = fa.lazy_import_flash_attention
    ALL_ATTENTION_FUNCTIONS[implementation] = recorder
    fa.lazy_import_flash_attention = lazy_import
    try:
        with torch.no_grad():
            model(**kwargs)
    except _Caught as caught:
        return _kernel_masks(caught.mask, rows, n, seen.get("nk", n))
    finally:
        fa.lazy_import_flash_attention = saved_import
        if had_local:
            ALL_ATTENTION_FUNCTIONS[implementation] = before
        else:
            del ALL_ATTENTION_FUNCTIONS[implementation]
    raise MaskUnreadable(f"{type(model).__name__}'s forward never reached a flash kernel")


# ---- the consumers: a model, a feed, a level ----------------------------------------------------------------

LEVELS = ("forward", "mask", "auto")


def mask_level_unreadable(model: Any) -> Optional[str]:
    """Why the mask level cannot say what `model` attends with (None where it can): layers that mix tokens
    outside attention (linear attention, state-space layers: their convolutions and recurrences have no
    mask), or an attention implementation whose choices are neither a mask handed to the layer (eager, sdpa,
    flex_attention) nor transformers' flash path (flash_path)."""
    layer_types = set(getattr(model.config, "layer_types", None) or ())
    mixing = sorted(layer_types - {"full_attention", "sliding_attention", "chunked_attention"})
    if mixing:
        return f"its {', '.join(mixing)} layers mix tokens outside any attention mask"
    implementation = getattr(model.config, "_attn_implementation", None)
    if implementation in ("eager", "sdpa", "flex_attention") or flash_path(model):
        return None
    return f"its attention implementation {implementation!r} is neither a masked one nor transformers' flash path"


def rule_masks(microbatch: dict, policy: dict) -> list:
    """The answer for a micro-batch the model was not fed (FeedNotBuilt): per row, who may attend to whom as the
    policy's attention and pad_keys say over the pieces the doc_spans name: the core's own rule
    (``_core.declared_attention``: the oracle's Attends, cell by cell), which it compares every answer with, so
    a case answered this way passes, and the consumer counts it in ``not_checked``."""
    from .. import _core

    return [_core.declared_attention(row, policy) for row in microbatch["rows"]]


class NotCheckedWarning(UserWarning):
    """A model consumer could not feed the model some micro-batches (the rows lack what the feed needs)."""


def model_consumer(model: Any, feed: Any, use_cache: Optional[bool], level: str = "mask", device: str = "cpu",
                   perturb: bool = False) -> Callable[[dict, dict], list]:
    """A micro-batch consumer (``packoracle.fuzz(microbatch_consumer=...)``) answering what `model` attends with
    when fed each micro-batch as `feed` says (a Feed or a feed name), at `level`: "forward" (dependency_masks,
    or perturbation_masks with ``perturb``: FlexAttention has no backward on the CPU), "mask" (caught_masks) or
    "auto" (the mask level, and the forward level where it cannot say: mask_level_unreadable, MaskUnreadable).

    Rows from any packer: the feed takes what they carry (build_feed). A micro-batch whose rows lack what the
    feed needs is not fed: it is answered by rule_masks, named in the consumer's ``not_checked`` ({reason:
    micro-batches}) and warned about once per reason (NotCheckedWarning); ``checked`` counts the micro-batches
    the model was fed. ``levels_read`` counts the micro-batches read at each level."""
    import warnings

    if level not in LEVELS:
        raise ValueError(f"level: one of {', '.join(LEVELS)}, got {level!r}")
    feed = _as_feed(feed)
    vocab = int(getattr(model.config, "vocab_size", 0) or 0)
    forward_read = perturbation_masks if perturb else dependency_masks
    state: dict = {"level": "forward" if level == "auto" and mask_level_unreadable(model) else level}
    not_checked: dict[str, int] = {}
    levels_read: dict[str, int] = {}

    def read(kwargs: dict) -> list:
        if state["level"] != "forward":
            try:
                masks = caught_masks(model, kwargs, use_cache)
                levels_read["mask"] = levels_read.get("mask", 0) + 1
                return masks
            except MaskUnreadable:
                if state["level"] == "mask":
                    raise
                state["level"] = "forward"
        levels_read["forward"] = levels_read.get("forward", 0) + 1
        return list(forward_read(model, kwargs, use_cache))

    def consume(microbatch: dict, policy: dict) -> list:
        batches = [{"rows": [row]} for row in microbatch["rows"]] if feed.one_row else [microbatch]
        try:
            fed = [build_feed(b, feed, device, policy) for b in batches]
        except FeedNotBuilt as e:
            reason = str(e)
            if reason not in not_checked:
                warnings.warn(NotCheckedWarning(f"packoracle: {consume.__qualname__}: not checked: {reason}"),
                              stacklevel=2)
            not_checked[reason] = not_checked.get(reason, 0) + 1
            return rule_masks(microbatch, policy)
        answer = []
        for b, kwargs in zip(batches, fed):
            if vocab:
                kwargs["input_ids"] = kwargs["input_ids"] % vocab  # the kit's token ids, inside the vocabulary
            masks = cropped(read(kwargs), row_lengths(b))
            if feed.one_row:  # a BlockMask over a batch of this row alone: its batch index is 0, not the row's
                masks = [densify(m, k, 0, "one row a batch") if is_block_mask(m) else m
                         for m, k in zip(masks, row_lengths(b))]
            answer += masks
        consume.checked += 1  # type: ignore[attr-defined]
        return answer

    consume.not_checked = not_checked  # type: ignore[attr-defined]
    consume.levels_read = levels_read  # type: ignore[attr-defined]
    consume.checked = 0  # type: ignore[attr-defined]
    return consume


def model_value_consumer(model: Any, feed: Any, use_cache: Optional[bool] = None,
                         device: str = "cpu") -> Callable[[dict, dict], list]:
    """A value consumer (``packoracle.fuzz(value_consumer=...)``): `model`'s logits for each row of a micro-batch
    fed as `feed` says (build_feed). The comparison packed against each piece alone is the core's
    (properties/src/value_invariance.cc), as for any value consumer; the consumer's ``parameters`` are the
    model's, for ``gradient=True``. A micro-batch whose rows lack what the feed needs raises FeedNotBuilt: that
    case fails, naming the feed (a value consumer has no rule to answer instead, as model_consumer has)."""
    feed = _as_feed(feed)
    vocab = int(getattr(model.config, "vocab_size", 0) or 0)

    def values(microbatch: dict, policy: dict) -> list:
        batches = [{"rows": [row]} for row in microbatch["rows"]] if feed.one_row else [microbatch]
        out = []
        for b in batches:
            kwargs = build_feed(b, feed, device, policy)
            if vocab:
                kwargs["input_ids"] = kwargs["input_ids"] % vocab  # the kit's token ids, inside the vocabulary
            if use_cache is not None:
                kwargs["use_cache"] = use_cache
            logits = model(**kwargs).logits.float()
            out += [logits[k, :n] for k, n in enumerate(row_lengths(b))]
        return out

    values.parameters = model.parameters  # type: ignore[attr-defined]
    return values


def mask_consumer(model: Any, feed: Any, use_cache: Optional[bool],
                  device: str = "cpu") -> Callable[[dict, dict], list]:
    """The mask level of any transformers causal LM (a tiny one, or the user's own: packoracle.guard): a
    micro-batch consumer answering what the model's first attention layer attends with (caught_masks)."""
    return model_consumer(model, feed, use_cache, "mask", device)


# ---- what the matrix finds, examined -------------------------------------------------------------------

# masking_utils._preprocess_mask_arguments looks for packed sequences in position_ids only "if position_ids is not
# None and attention_mask is None and cache is None"; the models' forward makes a DynamicCache whenever use_cache
# is true, and config.use_cache defaults to True.
USE_CACHE_LEAK = Finding(
    "attention", "bug",
    "Called as a plain training loop calls it, `model(**batch)`, the model keeps its default use_cache=True and "
    "builds a DynamicCache before its mask; masking_utils looks for packed sequences in position_ids only when "
    "there is neither an attention_mask nor a cache, so the documents of a packed row attend to each other "
    "(plain causal attention over the row). The HF Trainer sets use_cache=False and hides it; accelerate, a "
    "custom loop or a research script trains across documents, silently. Pass use_cache=False in training",
    "not reported", report="docs/upstream/transformers-use-cache.md")
MASK_DISABLES_PACKING = Finding(
    "attention", "bug",
    "A 2-D attention_mask (all ones, as many collators add, or a 0/1 padding mask) turns the packed-sequence "
    "detection of masking_utils off: it runs only when attention_mask is None. The mask then says only which "
    "slots are padding, and every document attends to the documents before it in the row",
    "huggingface/transformers PR #46634 (an all-ones mask); inclusionAI/AReaL #1442",
    report="docs/upstream/transformers-mask-disables-packing.md")
LINEAR_ATTENTION_LEAK = Finding(
    "attention", "bug",
    "Qwen3.5's linear-attention layers (GatedDeltaNet: a causal 1-D convolution and the gated delta rule "
    "recurrence) keep documents apart only through cu_seq_lens / seq_idx, which their CPU fallbacks refuse; "
    "given position_ids alone they run the convolution and the recurrence across the documents of the row "
    "while the full-attention layers are masked",
    "huggingface/transformers #46851, #46093, #44717; modelscope/ms-swift #9618",
    report="docs/upstream/transformers-qwen3-5-linear-attention.md")


FLASH_BATCH_OF_ONE = Finding(
    "attention", "bug",
    "On the flash-attention path, _flash_attention_forward finds the documents of a padding-free batch from "
    "position_ids only when the batch has one row (_is_packed_sequence returns False whenever batch_size != 1); "
    "a micro-batch of several packed rows runs flash_attn_func, plain causal over each row, across its "
    "documents. cu_seq_lens_q/k without max_length_q/k are not used at all (the varlen branch needs all four), "
    "so they fall back to the same detection; seq_idx is not read by attention; an all-ones attention_mask is "
    "dropped before (masking_utils.flash_attention_mask returns None when every slot is 1) and changes nothing. "
    "Whatever use_cache",
    "the batch-of-one rule: axolotl-ai-cloud/axolotl #1375 (bugzoo PI-01); cu_seq_lens without max_length: "
    "huggingface/transformers PR #47170 (review)", report="docs/upstream/transformers-flash-batch-of-one.md")
FLASH_MASK_UNPADS = Finding(
    "attention", "bug",
    "On the flash-attention path a 2-D attention_mask that marks padding takes precedence over everything else: "
    "_flash_attention_forward unpads by the mask (_upad_input) and runs the varlen kernel with one sequence per "
    "row, so the documents of a packed row attend to each other, even in a batch of one row. (An all-ones mask, "
    "as many collators add, is dropped first: masking_utils.flash_attention_mask returns None when every slot is "
    "1, and such a batch leaks only where F4 says, in a batch of several rows)",
    "inclusionAI/AReaL #1442", report="docs/upstream/transformers-flash-mask-unpads.md")
FLASH_CONTINUED_ROW = Finding(
    "attention", "bug",
    "On the flash-attention path the documents of a padding-free row are read from position_ids "
    "(prepare_fa_kwargs_from_position_ids): a sequence starts wherever position_ids equal their minimum, and "
    "cu_seq_lens starts at the first such slot, not at 0. A row whose first piece continues a document of the "
    "row before (positions going on from it, as a collator or a stream that splits documents across rows hands "
    "them, one row a batch) leaves its first slots out of every sequence the kernel is handed: their outputs read "
    "nothing of their own document. The collator's cu_seq_lens with max_length (the fa-kwargs feed) is right",
    "related, not this case: huggingface/transformers #39814 (a row without position 0), PR #47525 (sequences "
    "start at position_ids.min())", report="docs/upstream/transformers-flash-continued-row.md")


# Every examined finding, in the order of their labels (F1, F2, ...): labels stay the same whatever cells run.
FINDINGS = (USE_CACHE_LEAK, MASK_DISABLES_PACKING, LINEAR_ATTENTION_LEAK, FLASH_BATCH_OF_ONE, FLASH_MASK_UNPADS,
            FLASH_CONTINUED_ROW)

# The policy of the consumer column's one-row cells: rows as DataCollatorWithFlattening hands them to a model, one a
# batch, with documents split across rows (a row may start in the middle of a document, its positions going on).
ONE_ROW_POLICY = "hf-flatten+split"
COLUMN_POLICIES = {"reference": "reference", ONE_ROW_POLICY: {"preset": "hf-flatten", "overflow": "split"}}


@dataclass(frozen=True)
class ModelConsumer:
    """One cell of the consumer column: a family, an attention implementation, a feed, a use_cache setting
    and a level; ``position_ids=False`` feeds the model no position_ids (it builds its own), ``one_row=True``
    feeds each row as a batch of its own (see Feed). ``consumer()`` is the micro-batch consumer
    ``packoracle.fuzz(microbatch_consumer=...)`` drives, on any packer's rows (model_consumer: a micro-batch
    whose rows lack what the feed needs is counted in its ``not_checked``, never a failure of the model)."""

    family: str
    attention: str
    feed: str
    use_cache: Optional[bool] = None
    level: str = "forward"
    device: str = "cpu"
    position_ids: bool = True
    one_row: bool = False

    @property
    def feed_options(self) -> Feed:
        return Feed(self.feed, self.position_ids, self.one_row)

    @property
    def name(self) -> str:
        cache = "Trainer use_cache=False" if self.use_cache is False else "use_cache default"
        return f"transformers/{self.family}/{self.attention}/{self.feed_options.label}/{cache}/{self.level}"

    @property
    def policy(self) -> Any:
        """The policy the consumer column fuzzes this cell under: the reference packer's rows under document
        isolation, or, one row a batch, rows with documents split across them (ONE_ROW_POLICY)."""
        return COLUMN_POLICIES[ONE_ROW_POLICY if self.one_row else "reference"]

    @property
    def finding(self) -> Optional[Finding]:
        """The examined cause of this cell's failure, where the examination expects one (the matrix reports a
        failure without one, or one that no longer fails, as unexplained)."""
        if self.family == "qwen3_5" and self.feed not in ("cu_seq_lens", "seq_idx", "cu_seq_lens_alone"):
            return LINEAR_ATTENTION_LEAK
        if self.attention == "flash_double":
            if self.feed == "padding_mask":
                return FLASH_MASK_UNPADS
            if self.feed == "cu_seq_lens":
                return None
            return FLASH_CONTINUED_ROW if self.one_row else FLASH_BATCH_OF_ONE
        if self.feed in ("ones_mask", "padding_mask"):
            return MASK_DISABLES_PACKING
        if self.use_cache is None:
            return USE_CACHE_LEAK
        return None

    def _call(self) -> str:
        extra = ("" if self.position_ids else ", position_ids=False") + (", one_row=True" if self.one_row else "")
        return (f"ModelConsumer({self.family!r}, {self.attention!r}, {self.feed!r}, {self.use_cache!r}, "
                f"{self.level!r}{extra})")

    def replay(self, reproduce: str) -> str:
        """The Python that replays one of this cell's cases."""
        return (f"from packoracle.adapters.transformers_models import ModelConsumer; packoracle.fuzz(None, "
                f"{json.dumps(self.policy)}, microbatch_consumer={self._call()}.consumer(), max_row_length=16, max_documents=8, "
                f"reproduce=\"{reproduce}\")")

    def kernel_control(self) -> float:
        """The kernel control: one document alone (positions from 3, as a piece in the middle of a row has them)
        under this attention implementation against eager, same weights: the largest |Δ logit|. A kernel that is
        numerically off on its own is reported as that, not as a leak."""
        import torch

        if self.attention == "eager":
            return 0.0
        feed = {"input_ids": torch.tensor([[5, 6, 7, 8, 9, 10]]), "position_ids": torch.arange(3, 9)[None]}
        feed = {k: v.to(self.device) for k, v in feed.items()}
        with torch.no_grad():
            mine = tiny_model(self.family, self.attention, self.device)(**feed, use_cache=False).logits
            eager = tiny_model(self.family, "eager", self.device)(**feed, use_cache=False).logits
        return float((mine.float() - eager.float()).abs().max())

    def value_consumer(self) -> Callable[[dict, dict], list]:
        """This cell's model as a value consumer (model_value_consumer): its logits packed against each document
        piece alone, compared by the core."""
        model = tiny_model(self.family, self.attention, self.device)
        values = model_value_consumer(model, self.feed_options, self.use_cache, self.device)
        values.__qualname__ = f"{self._call()}.value_consumer()"
        return values

    def consumer(self) -> Callable[[dict, dict], list]:
        if self.level not in ("forward", "mask"):
            raise ValueError(f"level: 'forward' or 'mask', got {self.level!r}")
        model = tiny_model(self.family, self.attention, self.device)
        consume = model_consumer(model, self.feed_options, self.use_cache, self.level, self.device,
                                 perturb=self.attention == "flex_attention")
        # What a Replay line names: Python that rebuilds this consumer (after importing ModelConsumer).
        consume.__qualname__ = f"{self._call()}.consumer()"
        return consume

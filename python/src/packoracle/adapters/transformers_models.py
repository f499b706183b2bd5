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
- *mask* (fast): the attention mask the model hands its first attention layer, caught on the way in (a forward
  pre-hook that stops the forward there): a 4-D bool or additive mask, a FlexAttention BlockMask, or None, which
  the sdpa, eager and flex paths all run as plain causal attention.

Nothing of the library is re-implemented: the model builds its own masks and runs its own attention; this
module only builds the feed from the kit's row (as a collator would) and reads what came out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from ._base import Finding

WRITTEN_FOR = "5.24.0"

FAMILIES = ("llama", "qwen3", "mistral", "llama4", "qwen3_5")
# "flash_double": transformers' flash-attention 2 path with a CPU kernel double (adapters/flash_double.py).
ATTENTION = ("eager", "sdpa", "flex_attention", "flash_double")
# Kernels that run only on a GPU (bench/gpu/consumers.sh runs them there, with device="cuda").
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

def _segments(doc_ids: np.ndarray) -> np.ndarray:
    """Runs of equal doc id (padding, -1, one run per pad slot: a collator pads with one-token sequences)."""
    starts = np.ones(len(doc_ids), dtype=bool)
    starts[1:] = (doc_ids[1:] != doc_ids[:-1]) | (doc_ids[1:] < 0)
    return np.cumsum(starts) - 1


def build_feed(microbatch: dict, feed: str, device: str = "cpu") -> dict:
    """The model's keyword arguments for one micro-batch (rows stacked: the kit pads every row to its length)."""
    out = _feed_on_cpu(microbatch, feed)
    return {k: v.to(device) if hasattr(v, "to") else v for k, v in out.items()}


def row_lengths(microbatch: dict) -> list[int]:
    return [len(r["input_ids"]) for r in microbatch["rows"]]


def _stacked(rows: list, key: str, fill: int) -> np.ndarray:
    """One field of every row as rows × slots; rows of an unpadded policy are right-padded to the longest (a
    padded slot is a future key of every real query, so a causal model's answer for the real slots is the same)."""
    n = max(len(r["input_ids"]) for r in rows)
    return np.stack([np.pad(np.asarray(r[key], dtype=np.int64), (0, n - len(r[key])), constant_values=fill)
                     for r in rows])


def cropped(masks: Any, lengths: list[int]) -> list:
    """Each row's answer cut to its own length (see _stacked)."""
    return [m[:k, :k] if isinstance(m, np.ndarray) else m for m, k in zip(masks, lengths)]  # a BlockMask: as is


def _feed_on_cpu(microbatch: dict, feed: str) -> dict:
    import torch

    if feed not in FEEDS:
        raise ValueError(f"feed: one of {', '.join(FEEDS)}, got {feed!r}")
    rows = microbatch["rows"]
    ids = torch.as_tensor(_stacked(rows, "input_ids", 0))
    pos = torch.as_tensor(_stacked(rows, "position_ids", 0))
    doc = _stacked(rows, "doc_ids", -1)
    out: dict[str, Any] = {"input_ids": ids, "position_ids": pos}
    if feed in ("cu_seq_lens", "cu_seq_lens_alone"):
        seg = np.concatenate([_segments(d) + k * (len(d) + 1) for k, d in enumerate(doc)])  # flattened batch
        lengths = np.bincount(np.unique(seg, return_inverse=True)[1])
        cu = torch.as_tensor(np.concatenate([[0], np.cumsum(lengths)]), dtype=torch.int32)
        out.update(cu_seq_lens_q=cu, cu_seq_lens_k=cu)
        if feed == "cu_seq_lens":
            out.update(max_length_q=int(lengths.max()), max_length_k=int(lengths.max()))
    elif feed == "seq_idx":
        seg = np.concatenate([_segments(d) for d in doc]).reshape(doc.shape)
        out["seq_idx"] = torch.as_tensor(seg, dtype=torch.int32)
    elif feed == "ones_mask":
        out["attention_mask"] = torch.ones_like(ids)
    elif feed == "padding_mask":
        out["attention_mask"] = torch.as_tensor((doc >= 0).astype(np.int64))
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
    """One layer's mask as the per-row answers the kit reads: None is plain causal (is_causal) on every path."""
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
    """Raised by the pre-hook of the first attention module: its mask is all the mask level needs."""

    def __init__(self, mask: Any):
        super().__init__("mask caught")
        self.mask = mask


def caught_masks(model: Any, feed: dict, use_cache: Optional[bool]) -> list:
    """Per row, the mask the model hands its first attention module (``*.self_attn``), caught on the way in;
    the forward stops there, so a large model costs its embedding and first layer norm, not a forward."""
    import torch

    attention = [m for name, m in model.named_modules() if name.endswith("self_attn")]
    if not attention:
        raise ValueError(f"{type(model).__name__} has no module named *.self_attn: no attention mask to read")

    def catch(module: Any, args: tuple, kwargs: dict) -> None:
        raise _Caught(kwargs.get("attention_mask"))

    handle = attention[0].register_forward_pre_hook(catch, with_kwargs=True)
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
    raise ValueError(f"{type(model).__name__}'s forward never reached its first attention module")


def mask_consumer(model: Any, feed: str, use_cache: Optional[bool],
                  device: str = "cpu") -> Callable[[dict, dict], list]:
    """The mask level of any transformers causal LM (a tiny one, or the user's own: packoracle.guard): a
    micro-batch consumer answering the mask the model's attention layers receive."""
    vocab = int(getattr(model.config, "vocab_size", 0) or 0)

    def consume(microbatch: dict, policy: dict) -> list:
        kwargs = build_feed(microbatch, feed, device)
        if vocab:
            kwargs["input_ids"] = kwargs["input_ids"] % vocab  # the kit's token ids, inside the model's vocabulary
        return cropped(caught_masks(model, kwargs, use_cache), row_lengths(microbatch))

    return consume


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
    "not reported")
MASK_DISABLES_PACKING = Finding(
    "attention", "bug",
    "A 2-D attention_mask (all ones, as many collators add, or a 0/1 padding mask) turns the packed-sequence "
    "detection of masking_utils off: it runs only when attention_mask is None. The mask then says only which "
    "slots are padding, and every document attends to the documents before it in the row",
    "huggingface/transformers PR #46634 (an all-ones mask); inclusionAI/AReaL #1442")
LINEAR_ATTENTION_LEAK = Finding(
    "attention", "bug",
    "Qwen3.5's linear-attention layers (GatedDeltaNet: a causal 1-D convolution and the gated delta rule "
    "recurrence) keep documents apart only through cu_seq_lens / seq_idx, which their CPU fallbacks refuse; "
    "given position_ids alone they run the convolution and the recurrence across the documents of the row "
    "while the full-attention layers are masked",
    "huggingface/transformers #46851, #46093, #44717; modelscope/ms-swift #9618")


FLASH_BATCH_OF_ONE = Finding(
    "attention", "bug",
    "On the flash-attention path, _flash_attention_forward finds the documents of a padding-free batch from "
    "position_ids only when the batch has one row (_is_packed_sequence returns False whenever batch_size != 1); "
    "a micro-batch of several packed rows runs flash_attn_func, plain causal over each row, across its "
    "documents. cu_seq_lens_q/k without max_length_q/k are not used at all (the varlen branch needs all four), "
    "so they fall back to the same detection; seq_idx is not read by attention. Whatever use_cache",
    "the batch-of-one rule: axolotl-ai-cloud/axolotl #1375 (bugzoo PI-01); cu_seq_lens without max_length: "
    "huggingface/transformers PR #47170 (review)")
FLASH_MASK_UNPADS = Finding(
    "attention", "bug",
    "On the flash-attention path a 2-D attention_mask takes precedence over everything else: "
    "_flash_attention_forward unpads by the mask (_upad_input) and runs the varlen kernel with one sequence per "
    "row, so the documents of a packed row attend to each other (an all-ones mask, as many collators add, and a "
    "0/1 padding mask alike)",
    "huggingface/transformers PR #46634 (an all-ones mask); inclusionAI/AReaL #1442")


# Every examined finding, in the order of their labels (F1, F2, ...): labels stay the same whatever cells run.
FINDINGS = (USE_CACHE_LEAK, MASK_DISABLES_PACKING, LINEAR_ATTENTION_LEAK, FLASH_BATCH_OF_ONE, FLASH_MASK_UNPADS)


@dataclass(frozen=True)
class ModelConsumer:
    """One cell of the consumer column: a family, an attention implementation, a feed, a use_cache setting
    and a level. ``consumer()`` is the micro-batch consumer ``packoracle.fuzz(microbatch_consumer=...)``
    drives."""

    family: str
    attention: str
    feed: str
    use_cache: Optional[bool] = None
    level: str = "forward"
    device: str = "cpu"

    @property
    def name(self) -> str:
        cache = "Trainer use_cache=False" if self.use_cache is False else "use_cache default"
        return f"transformers/{self.family}/{self.attention}/{self.feed}/{cache}/{self.level}"

    @property
    def finding(self) -> Optional[Finding]:
        """The examined cause of this cell's failure, where the examination expects one (the matrix reports a
        failure without one, or one that no longer fails, as unexplained)."""
        if self.family == "qwen3_5" and self.feed not in ("cu_seq_lens", "seq_idx", "cu_seq_lens_alone"):
            return LINEAR_ATTENTION_LEAK
        if self.attention == "flash_double":
            if self.feed in ("ones_mask", "padding_mask"):
                return FLASH_MASK_UNPADS
            return None if self.feed == "cu_seq_lens" else FLASH_BATCH_OF_ONE
        if self.feed in ("ones_mask", "padding_mask"):
            return MASK_DISABLES_PACKING
        if self.use_cache is None:
            return USE_CACHE_LEAK
        return None

    def replay(self, reproduce: str) -> str:
        """The Python that replays one of this cell's cases."""
        return (f"from packoracle.adapters.transformers_models import ModelConsumer; packoracle.fuzz(None, "
                f"\"reference\", microbatch_consumer=ModelConsumer({self.family!r}, {self.attention!r}, "
                f"{self.feed!r}, {self.use_cache!r}, {self.level!r}).consumer(), max_row_length=16, max_documents=8, "
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

    def consumer(self) -> Callable[[dict, dict], list]:
        model = tiny_model(self.family, self.attention, self.device)
        consume: Callable[[dict, dict], list]
        if self.level == "forward":
            read = perturbation_masks if self.attention == "flex_attention" else dependency_masks

            vocab = model.config.vocab_size

            def consume(microbatch: dict, policy: dict) -> list:
                feed = build_feed(microbatch, self.feed, self.device)
                feed["input_ids"] = feed["input_ids"] % vocab  # the kit's token ids, inside the vocabulary
                return cropped(read(model, feed, self.use_cache), row_lengths(microbatch))
        elif self.level == "mask":
            consume = mask_consumer(model, self.feed, self.use_cache, self.device)
        else:
            raise ValueError(f"level: 'forward' or 'mask', got {self.level!r}")
        # What a Replay line names: Python that rebuilds this consumer (after importing ModelConsumer).
        consume.__qualname__ = (f"ModelConsumer({self.family!r}, {self.attention!r}, {self.feed!r}, "
                                f"{self.use_cache!r}, {self.level!r}).consumer()")
        return consume

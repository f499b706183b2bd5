"""transformers' flash-attention path on a machine without flash-attn: the library's own path
(``integrations/flash_attention.flash_attention_forward`` → ``_flash_attention_forward``: padding removed from a
2-D mask, ``cu_seq_lens_*`` taken when all four kwargs are given, packed sequences detected from position_ids
when the batch has one row) with a CPU **kernel double** in the slot where transformers keeps the kernels it
loaded. The double computes what flash-attn documents: ``flash_attn_varlen_func`` attends causally within each
sequence its ``cu_seqlens`` name, ``flash_attn_func`` causally over each batch row (sdpa on each).

So the cells say which boundaries transformers hands the varlen kernel, and which path it picks, under every
feed; the kernels themselves (numerics, their own masking) are the device lane's (bench/gpu/device_lane.sh).
Installing the double is `use()`; it changes no decision of the library: only the kernel functions and their
loaded-implementation marker are set, as `lazy_import_flash_attention` sets them after importing flash-attn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    import torch

IMPLEMENTATION = "flash_attention_2"


def _causal_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                 scale: Optional[float]) -> torch.Tensor:
    """q, k, v: (length, heads, dim) → (length, heads, dim)."""
    import torch.nn.functional as F

    if k.shape[1] != q.shape[1]:  # grouped-query attention: repeat the key/value heads
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    out = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                                         is_causal=causal, scale=scale)
    return out.transpose(0, 1)


def flash_attn_varlen_func(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
                           cu_seqlens_k: torch.Tensor, max_seqlen_q: Optional[int] = None,
                           max_seqlen_k: Optional[int] = None, dropout_p: float = 0.0,
                           softmax_scale: Optional[float] = None, causal: bool = False,
                           window_size: tuple[int, int] = (-1, -1), softcap: float = 0.0,
                           deterministic: bool = False) -> torch.Tensor:
    """The varlen kernel's semantics: q, k, v of shape (total, heads, dim); sequence s is rows
    [cu_seqlens[s], cu_seqlens[s + 1])."""
    import torch

    cu_q, cu_k = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    pieces = [_causal_sdpa(q[a:b], k[c:d], v[c:d], causal, softmax_scale)
              for a, b, c, d in zip(cu_q[:-1], cu_q[1:], cu_k[:-1], cu_k[1:])]
    out = torch.zeros_like(q)
    if pieces:
        out[cu_q[0]:cu_q[-1]] = torch.cat(pieces)
    return out


def flash_attn_func(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout_p: float = 0.0,
                    softmax_scale: Optional[float] = None, causal: bool = False,
                    window_size: tuple[int, int] = (-1, -1), softcap: float = 0.0,
                    deterministic: bool = False) -> torch.Tensor:
    """The dense kernel's semantics: q, k, v of shape (batch, length, heads, dim), each row one sequence."""
    import torch

    return torch.stack([_causal_sdpa(q[b], k[b], v[b], causal, softmax_scale) for b in range(q.shape[0])])


def use() -> None:
    """Puts the double where transformers keeps a loaded flash-attn (idempotent)."""
    import transformers.modeling_flash_attention_utils as fa

    fa._flash_fn, fa._flash_varlen_fn, fa._flash_with_kvcache_fn = flash_attn_func, flash_attn_varlen_func, None
    fa._pad_fn, fa._unpad_fn = fa._pad_input, fa._unpad_input
    fa._process_flash_kwargs_fn = fa._lazy_define_process_function(flash_attn_varlen_func)
    fa._process_with_kvcache_kwargs_fn = dict
    fa._loaded_implementation = IMPLEMENTATION


def on_flash_path(model: Any) -> Any:
    """`model` (built with sdpa) set to the flash-attention path, as ``attn_implementation="flash_attention_2"``
    sets it where flash-attn is installed (the availability check is the only thing skipped)."""
    use()
    model.config._attn_implementation = IMPLEMENTATION
    for module in model.modules():
        config = getattr(module, "config", None)
        if config is not None and config is not model.config and hasattr(config, "_attn_implementation"):
            config._attn_implementation = IMPLEMENTATION
    return model

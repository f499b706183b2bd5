"""Other libraries' mask builders as attention consumers (the mask level): each called as the library's own
model or dataset calls it, on the rows the kit's reference packer makes under the policy the library declares.

- torchtitan 0.3.0 (``torchtitan.models.common.attention``): the decoders' FlexAttention mask
  (``get_causal_mask_mod()`` and ``get_efficient_causal_mask_mod_for_packed_document(positions)``, ANDed, as
  ``Decoder._create_flex_attention_mask_for_document`` composes them), the transformers backend's
  ``get_document_mask_mod(positions)`` with the causal mask, and the varlen metadata
  (``create_varlen_metadata_for_document(positions)``: cu_seqlens over the flattened batch, read as a varlen
  kernel with causal=True reads them). Documents start where ``positions`` is 0.
- megatron-core 0.16.1 (``megatron.core.datasets.gpt_dataset._get_ltor_masks_and_position_ids``): the
  (1, L, L) mask GPTDataset builds from EOD tokens, True = masked, with ``reset_attention_mask`` on (declared
  ``megatron-gpt-docmask``) and off (declared ``megatron-gpt``: plain causal, which that preset states).

The mask functions are handed to the kit as they are (it evaluates them per row, ``b`` the row's index); the
compiled ``create_block_mask`` is not called (inductor on the CPU: tens of seconds a shape).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.abc import Loader
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Optional, cast

import numpy as np

from ._base import Finding

if TYPE_CHECKING:
    import torch


def titan_attention() -> ModuleType:
    """torchtitan.models.common.attention. Its package's __init__ imports the decoders, whose MoE dispatcher
    imports triton (absent on the CPU); the module itself needs only torch, so it is loaded from its file when
    the package import fails (as the OpenRLHF adapter loads loss.py)."""
    import importlib
    import importlib.util
    import sys

    name = "torchtitan.models.common.attention"
    try:
        return importlib.import_module(name)
    except ImportError:
        pass
    if name in sys.modules:  # loaded before the package's failure: complete, and the same module
        return sys.modules[name]
    import torchtitan.models

    path = f"{torchtitan.models.__path__[0]}/common/attention.py"
    # a .py file's location always has a spec with a loader
    spec = cast("ModuleSpec", importlib.util.spec_from_file_location(name, path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    cast("Loader", spec.loader).exec_module(module)
    return module


def _positions(microbatch: dict) -> torch.Tensor:
    import torch

    return torch.as_tensor(np.stack([np.asarray(r["position_ids"], dtype=np.int64) for r in microbatch["rows"]]))


def torchtitan_flex(microbatch: dict, policy: dict) -> Any:
    from torch.nn.attention.flex_attention import and_masks

    tt = titan_attention()
    return and_masks(tt.get_causal_mask_mod(), tt.get_efficient_causal_mask_mod_for_packed_document(
        _positions(microbatch)))


def torchtitan_document(microbatch: dict, policy: dict) -> Any:
    from torch.nn.attention.flex_attention import and_masks

    tt = titan_attention()
    return and_masks(tt.get_causal_mask_mod(), tt.get_document_mask_mod(_positions(microbatch)))


def torchtitan_varlen(microbatch: dict, policy: dict) -> list:
    positions = _positions(microbatch)
    rows, n = positions.shape
    cu = titan_attention().create_varlen_metadata_for_document(positions).cu_seq_q.tolist()
    segment = np.zeros(rows * n, dtype=np.int64)
    for k, (a, b) in enumerate(zip(cu[:-1], cu[1:])):
        segment[a:b] = k  # the kernel's sequences over the flattened batch
    return list(segment.reshape(rows, n))


def megatron_ltor(reset_attention_mask: bool) -> Callable[[dict, dict], list]:
    def consume(microbatch: dict, policy: dict) -> list:
        import torch
        from megatron.core.datasets.gpt_dataset import _get_ltor_masks_and_position_ids

        out = []
        for row in microbatch["rows"]:
            tokens = torch.as_tensor(np.asarray(row["input_ids"], dtype=np.int64))
            masked, _, _ = _get_ltor_masks_and_position_ids(
                tokens, int(policy["eos_id"]), reset_position_ids=True, reset_attention_mask=reset_attention_mask,
                eod_mask_loss=False, create_attention_mask=True)
            out.append(~masked[0].numpy())  # True = masked
        return out

    consume.__qualname__ = f"megatron_ltor(reset_attention_mask={reset_attention_mask})"
    return consume


@dataclass(frozen=True)
class MaskBuilder:
    """One library's mask builder, with the policy it declares and the examined finding where it fails."""

    name: str
    system: str
    distribution: str
    written_for: str
    call: str
    policy: str
    imports: tuple[str, ...]
    build: Callable[[dict, dict], object]
    finding: Optional[Finding] = None

    def consumer(self) -> Callable[[dict, dict], object]:
        """The micro-batch consumer packoracle.fuzz drives; raises ImportError when the library is missing."""
        import importlib
        import importlib.metadata

        importlib.metadata.version(self.distribution)  # PackageNotFoundError (an ImportError) when missing
        for module in self.imports:
            importlib.import_module(module)
        return self.build

    def replay(self, reproduce: str) -> str:
        return (f"from packoracle.adapters.mask_builders import get; b = get({self.name!r}); packoracle.fuzz(None, "
                f"{self.policy!r}, microbatch_consumer=b.consumer(), max_row_length=16, max_documents=8, "
                f"reproduce=\"{reproduce}\")")


BUILDERS = (
    MaskBuilder("torchtitan/flex-document", "torchtitan", "torchtitan", "0.3.0",
                "and_masks(get_causal_mask_mod(), get_efficient_causal_mask_mod_for_packed_document(positions))",
                "reference", ("torch",), torchtitan_flex),
    MaskBuilder("torchtitan/flex-document-mask-mod", "torchtitan", "torchtitan", "0.3.0",
                "and_masks(get_causal_mask_mod(), get_document_mask_mod(positions))",
                "reference", ("torch",), torchtitan_document),
    MaskBuilder("torchtitan/varlen", "torchtitan", "torchtitan", "0.3.0",
                "create_varlen_metadata_for_document(positions) → varlen kernel, causal=True",
                "reference", ("torch",), torchtitan_varlen),
    MaskBuilder("megatron-core/ltor-reset-attention-mask", "megatron-core", "megatron-core", "0.16.1",
                "_get_ltor_masks_and_position_ids(tokens, eod, reset_position_ids=True, reset_attention_mask=True, ...)",
                "megatron-gpt-docmask", ("megatron.core.datasets.gpt_dataset",), megatron_ltor(True)),
    MaskBuilder("megatron-core/ltor-causal", "megatron-core", "megatron-core", "0.16.1",
                "_get_ltor_masks_and_position_ids(tokens, eod, reset_position_ids=True, reset_attention_mask=False, ...)",
                "megatron-gpt", ("megatron.core.datasets.gpt_dataset",), megatron_ltor(False)),
)


def get(name: str) -> MaskBuilder:
    """The mask builder called `name`; KeyError listing the names otherwise."""
    for b in BUILDERS:
        if b.name == name:
            return b
    raise KeyError(f"no mask builder {name!r}; there are: {', '.join(b.name for b in BUILDERS)}")

"""NVIDIA megatron-core 0.16.1: a real GPTDataset (IndexedDataset on disk, compiled helpers) for the flag
combinations of reset_position_ids / reset_attention_mask / eod_mask_loss, and the per-micro-batch loss
arithmetic of pipeline_parallel.schedules.forward_step_calc_loss for calculate_per_token_loss False / True.

0.16.1 is the newest megatron-core that pip installs on this Python (3.11) by itself: 0.17.0 to 0.19.2 declare
Requires-Python >= 3.12. It has no ``GPTDatasetConfig.inter_document_masking`` (cu_seqlens from the sample's
document lengths came with PR #5298, in 0.19). That configuration runs in the family environment ``megatron``
(requirements/megatron.lock): megatron-core 0.19.2 installed with --ignore-requires-python. The declaration is
all that asks for 3.12: the wheel is built for cp311 (helpers_cpp.cpython-311), its 542 modules compile under
3.11 (no PEP 695/701 syntax), and what the adapter imports (datasets, pipeline_parallel.schedules,
TransformerConfig) imports and runs there.

What the adapter decides, as a user's data preparation and loader would:
- each document (the policy's EOD appended, as ``preprocess_data.py --append-eod`` does) is one document of
  an ``IndexedDataset`` written with ``IndexedDatasetBuilder`` in a temporary directory;
- the dataset is built the way pretrain_gpt.py builds it: ``BlendedMegatronDatasetBuilder(GPTDataset,
  [None] * 3, lambda: True, GPTDatasetConfig(blend=([prefix], None), split=..., ...)).build()`` (sizes None:
  one epoch; a tokenizer whose ``eod`` is the policy's eos_id and which has no pad id, so GPTDataset pads
  with -1 and rewrites it to 0 in tokens / labels);
- GPTDataset shuffles the documents (``_build_document_index``) and the samples (``shuffle_index``) with
  ``numpy.random.RandomState(random_seed)``. The kit checks the stream of the request's documents in their
  order, so: a first build over the documents shows the document order the shuffle makes (it depends only on
  the number of documents and the seed), and the documents are written again in the order that this shuffle
  turns into the request's order (checked after the second build); the samples are read in the order of
  ``sample_index`` (idx = argsort(shuffle_index)), as a sampler that walks the unshuffled index. No sample's
  content depends on either order;
- rows into micro-batches and ranks with ``assign``.

Each sample (tokens, labels, loss_mask, position_ids, attention_mask (1, L, L), True = masked) goes through
``packoracle.dump.from_megatron_gpt``: names as the kit reads them (tokens → input_ids), doc_spans from the
library's own ``sample_index`` entry of the sample (the provenance of the window: document position and offset),
and, where reset_attention_mask makes the mask block-causal, that mask as doc_ids. Without
reset_attention_mask the mask is plain causal: it says nothing about documents and is not passed on
(attention: row_causal).

Loss: ``forward_step_calc_loss`` (the library's micro-batch arithmetic: divide by max(1, num_tokens) and by
num_microbatches, or with calculate_per_token_loss keep the sum and return num_tokens) runs on CPU when given
cp_group_size=1 and is_last_stage=True, with the real TransformerConfig. What it is fed: the per-token loss
tensor GPTModel.forward returns (here the kit's slot losses: the model's vocab_parallel_cross_entropy needs
parallel_state's tensor-parallel group, i.e. torch.distributed and initialize_model_parallel in this
process, and is per token: it decides nothing about the denominator) through a loss_func as pretrain_gpt.py
writes it (user code in Megatron-LM, not in megatron-core: ``(sum(losses * loss_mask), loss_mask.sum(), {})``,
the 3-tuple contract that forward_step documents). What runs after it cannot be driven here:
forward_backward_no_pipelining allocates its token counter on "cuda" and reads parallel_state, and
finalize_model_grads (all-reduce of num_tokens over data-parallel ranks, gradients × 1/num_tokens when it is
positive) needs the process groups and a DDP model. The ranks are simulated in one process, so the
all-reduced count is the sum of the ranks' counts, taken here (as the transformers adapter sums the gathered
counts), and the DDP average over ranks is the kit's "microbatch" scope formula (1/(R·M)).
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Optional, cast

from .._fuzz import Refuse
from ._base import Adapter, Finding, Packer, Reducer, assign, documents_of

WRITTEN_FOR = "0.16.1"
WRITTEN_FOR_INTER_DOCUMENT = "0.19.2"  # the megatron family environment's release (inter_document_masking)
RANDOM_SEED = 1234  # GPTDatasetConfig.random_seed (pretrain_gpt.py's --seed default)


class _Tokenizer:
    """All GPTDataset asks of a tokenizer: eod (the policy's eos_id), vocab_size (None: no dtype check) and
    unique_identifiers (part of the index cache's hash). No ``pad``: GPTDataset then pads with -1."""

    def __init__(self, eod: int):
        self.eod = eod
        self.vocab_size = None

    @property
    def unique_identifiers(self) -> OrderedDict:
        return OrderedDict({"class": "packoracle.adapters.megatron_gpt._Tokenizer", "eod": self.eod})


@dataclass(frozen=True)
class Flags:
    reset_position_ids: bool
    reset_attention_mask: bool
    eod_mask_loss: bool
    valid_split: bool = False  # Split.valid with drop_last_partial_validation_sequence=False: the last partial
    # sample is kept and padded (train drops it)
    extra: tuple = ()          # further GPTDatasetConfig keywords, as (name, value) pairs


def _write(directory: str, docs: list[list[int]]) -> str:
    """An IndexedDataset (.bin/.idx) with one document (one sequence) per entry; returns its path prefix."""
    import numpy
    import torch
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder, get_bin_path, get_idx_path

    prefix = os.path.join(directory, "docs")
    builder = IndexedDatasetBuilder(get_bin_path(prefix), dtype=numpy.int32)
    for tokens in docs:
        builder.add_document(torch.tensor(tokens, dtype=torch.int64), [len(tokens)])
    builder.finalize(get_idx_path(prefix))
    return prefix


def _build(directory: str, docs: list[list[int]], row_length: int, eod: int, flags: Flags) -> Any:
    """The GPTDataset of one split, built as pretrain_gpt.py builds it."""
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig

    os.makedirs(directory)
    config = GPTDatasetConfig(
        random_seed=RANDOM_SEED, sequence_length=row_length, blend=([_write(directory, docs)], None),
        split="0,100,0" if flags.valid_split else "100,0,0", tokenizer=_Tokenizer(eod),
        path_to_cache=os.path.join(directory, "cache"), reset_position_ids=flags.reset_position_ids,
        reset_attention_mask=flags.reset_attention_mask, eod_mask_loss=flags.eod_mask_loss,
        drop_last_partial_validation_sequence=False, **dict(flags.extra))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        splits = BlendedMegatronDatasetBuilder(GPTDataset, [None, None, None], lambda: True, config).build()
    return splits[1 if flags.valid_split else 0]


def _dataset_in_request_order(docs: list[list[int]], row_length: int, eod: int, flags: Flags, tmp: str) -> Any:
    """The GPTDataset whose document stream is `docs` in the given order (see the module docstring)."""
    first = _build(os.path.join(tmp, "probe"), docs, row_length, eod, flags)
    order = [int(i) for i in first.document_index]  # stream position j holds on-disk document order[j]
    if order == list(range(len(docs))):
        return first
    on_disk: list[Optional[list[int]]] = [None] * len(docs)
    for j, i in enumerate(order):
        on_disk[i] = docs[j]
    # every entry is filled: order is a permutation of the documents' indices
    dataset = _build(os.path.join(tmp, "ordered"), cast("list[list[int]]", on_disk), row_length, eod, flags)
    if [int(i) for i in dataset.document_index] != order:
        raise RuntimeError("GPTDataset shuffled the documents differently on a second build of the same shape")
    return dataset


def gpt_packer(flags: Flags) -> Packer:
    import numpy

    from ..dump import from_megatron_gpt

    def pack(request: dict) -> list[dict]:
        docs = [d for d in documents_of(request) if d["tokens"]]
        if not docs:
            return []  # nothing to write: an empty IndexedDataset is not something a user builds
        row_length, policy = request["row_length"], request["policy"]
        with tempfile.TemporaryDirectory(prefix="packoracle-megatron-") as tmp:
            dataset = _dataset_in_request_order([d["tokens"] for d in docs], row_length, policy["eos_id"], flags,
                                                tmp)
            if len(dataset) == 0:
                total = sum(len(d["tokens"]) for d in docs)
                raise Refuse(f"megatron GPTDataset: 0 samples from a stream of {total} tokens (a sample needs "
                             f"sequence_length + 1 = {row_length + 1}; the train split drops a partial one)")
            by_position = numpy.argsort(numpy.asarray(dataset.shuffle_index), kind="stable")
            samples = [dataset[int(idx)] for idx in by_position]
            starts = [(int(d), int(k)) for d, k in numpy.asarray(dataset.sample_index)[:-1]]
        out = []
        for mb in assign(list(range(len(samples))), request):
            rows = mb.pop("rows")
            record = from_megatron_gpt([samples[k] for k in rows], docs, starts=[starts[k] for k in rows],
                                       pad_id=0, attention_mask="doc_ids" if flags.reset_attention_mask else None)
            out.append(dict(record, step=mb["step"], micro_step=mb["micro_step"], rank=mb["rank"]))
        return out

    return pack


def dump_gpt(request: dict, answer: list) -> list[dict]:
    """The packer's answer is already packoracle.dump.from_megatron_gpt's records of the samples."""
    return [dict(record) for record in answer]


def schedules_loss(calculate_per_token_loss: bool) -> Reducer:
    import numpy as np
    import torch
    from megatron.core.pipeline_parallel.schedules import forward_step_calc_loss
    from megatron.core.transformer.transformer_config import TransformerConfig

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = TransformerConfig(num_layers=1, hidden_size=8, num_attention_heads=1,
                                   calculate_per_token_loss=calculate_per_token_loss)

    def one_microbatch(mb: dict, losses: list, num_microbatches: int) -> tuple[float, int, float]:
        """forward_step_calc_loss on one micro-batch; returns (its output, num_tokens, Σ l·m)."""
        # [b, s] per-token losses as GPTModel.forward returns them with labels (the kit's loss of each slot's
        # target, 0 where a slot has none), and the sample's loss_mask as the data iterator yields it. Float64:
        # pretrain_gpt.py's .float() would round Σ/n/num_microbatches to float32, and the ×M below would show
        # that rounding as a loss the kit's exact fractions do not have.
        per_token = torch.as_tensor(np.stack([np.asarray(l, dtype=np.float64) for l in losses]))
        loss_mask = torch.as_tensor(np.stack([np.asarray(r["loss_mask"], dtype=np.float64) for r in mb["rows"]]))
        summed = {}

        # pretrain_gpt.py's loss_func (user code of Megatron-LM, not megatron-core)
        def loss_func(output_tensor: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, dict]:
            losses = output_tensor.view(-1)
            mask = loss_mask.view(-1)
            loss = torch.sum(losses * mask)
            summed["loss_sum"] = float(loss)
            return loss, mask.sum().clone().detach().to(torch.int), {}

        output, num_tokens = forward_step_calc_loss(object(), per_token, loss_func, config, None, False,
                                                    num_microbatches, [], cp_group_size=1, is_last_stage=True)
        return float(output), int(num_tokens), summed["loss_sum"]

    def reduce(request: dict) -> list[dict]:
        M = int(request["grad_accum_steps"])  # Megatron's num_microbatches: micro-batches per rank and step
        results = [one_microbatch(mb, request["slot_losses"][m], M) for m, mb in enumerate(request["microbatches"])]
        if not calculate_per_token_loss:
            # output = Σ l·m / max(1, n) / M; the kit's "microbatch" scope applies the 1/M (and DDP's 1/R) itself
            return [{"loss_sum": s, "denominator": float(max(1, n)), "denominator_scope": "microbatch",
                     "loss": out * M} for out, n, s in results]
        total = sum(n for _, n, _ in results)  # finalize_model_grads: all_reduce(num_tokens) over the DP ranks
        return [{"loss_sum": out, "denominator": float(total), "denominator_scope": "global",
                 "loss": out / total if total > 0 else out} for out, _, _ in results]

    return reduce


class _MissingInThisVersion(Adapter):
    """A configuration whose option this megatron-core version does not have: unavailable() says so."""

    def unavailable(self) -> Optional[str]:
        why = super().unavailable()
        if why is not None:
            return why
        from dataclasses import fields

        from megatron.core.datasets.gpt_dataset import GPTDatasetConfig

        if "inter_document_masking" not in {f.name for f in fields(GPTDatasetConfig)}:
            return (f"megatron-core {self.installed_version()} has no GPTDatasetConfig.inter_document_masking "
                    "(cu_seqlens per sample came with PR #5298 in 0.19; the megatron family environment "
                    f"installs {WRITTEN_FOR_INTER_DOCUMENT})")
        return None


_IMPORTS = ("megatron.core.datasets.gpt_dataset", "megatron.core.datasets.blended_megatron_dataset_builder",
            "megatron.core.datasets.helpers_cpp", "megatron.core.pipeline_parallel.schedules")


def _config_text(flags: Flags, per_token: bool) -> str:
    set_flags = [name for name in ("reset_position_ids", "reset_attention_mask", "eod_mask_loss")
                 if getattr(flags, name)]
    text = "GPTDataset(GPTDatasetConfig(" + (", ".join(f"{n}=True" for n in set_flags) or "defaults")
    text += ", split valid, drop_last_partial_validation_sequence=False" if flags.valid_split else ""
    text += "".join(f", {k}={v}" for k, v in flags.extra)
    return text + f")) + forward_step_calc_loss(calculate_per_token_loss={per_token})"


def _adapter(config_id: str, flags: Flags, policy: dict, notes: str, per_token: bool = False,
             findings: Optional[dict] = None, cls: type[Adapter] = Adapter, written_for: str = WRITTEN_FOR,
             family: str = "") -> Adapter:
    return cls(name=f"megatron-core/{config_id}", system="megatron-core", distribution="megatron-core",
               written_for=written_for, configuration=_config_text(flags, per_token), policy=policy,
               imports=_IMPORTS, make_packer=lambda: gpt_packer(flags),
               make_reducer=lambda: schedules_loss(per_token), dump=dump_gpt, notes=notes,
               findings=findings or {}, sft_masks=False, family=family)


# GPTDataset is a pretraining dataset: the IndexedDataset holds token ids only and __getitem__ sets loss_mask
# to 1 everywhere except where the input is EOD (eod_mask_loss) and where the label is padding. There is no
# per-token supervision input (SFT goes through Megatron-LM's SFTDataset, in megatron/training, not in
# megatron-core), so the kit generates documents whose every token is supervised (sft_masks=False).

# The train split keeps only whole samples of sequence_length + 1 tokens (helpers.build_sample_idx with
# drop_last_partial_sequence=True): no row is padded, and the stream's tail is dropped.
_TRAIN = {"padding": "none"}

ADAPTERS = (
    _adapter("gpt", Flags(False, False, False), dict({"preset": "megatron-gpt"}, **_TRAIN),
             "default flags: one causal row over the documents, positions 0..L-1, EOD → next document trained; "
             "per-micro-batch means"),
    _adapter("gpt-docmask", Flags(True, True, True), dict({"preset": "megatron-gpt-docmask"}, **_TRAIN),
             "block-causal mask (converted to doc_ids), positions reset after each EOD, the prediction made "
             "from an EOD masked (loss_mask 0)"),
    _adapter("gpt-reset-no-eod-mask", Flags(True, True, False),
             dict({"preset": "megatron-gpt-docmask", "boundary_target": "included"}, **_TRAIN),
             "documents isolated in attention and positions, but without eod_mask_loss the prediction made "
             "from each EOD is trained to produce the next document's first token"),
    _adapter("gpt-eod-mask-only", Flags(False, False, True),
             dict({"preset": "megatron-gpt", "boundary_target": "excluded"}, **_TRAIN),
             "causal row and continuous positions; only the prediction made from an EOD is masked"),
    _adapter("gpt-docmask-per-token-loss", Flags(True, True, True),
             dict({"preset": "megatron-gpt-docmask", "denominator": "global_targets"}, **_TRAIN),
             "as gpt-docmask, with calculate_per_token_loss=True: sums per micro-batch, one global count",
             per_token=True),
    _adapter("gpt-docmask-valid", Flags(True, True, True, valid_split=True), {"preset": "megatron-gpt-docmask"},
             "the validation split with drop_last_partial_validation_sequence=False: the last partial sample "
             "is padded (-1, rewritten to 0; loss_mask 0 where the label is padding)"),
    _adapter("gpt-inter-document-masking",
             Flags(False, False, False, extra=(("inter_document_masking", True),)),
             dict({"preset": "megatron-gpt-docmask", "boundary_source": "cu_seqlens", "boundary_target": "included"},
                  **_TRAIN),
             "cu_seqlens per sample (padded to sequence_length + 1 with trailing sequence_length), positions "
             "reset per document; megatron-core 0.19.2 in its family environment, installed with "
             "--ignore-requires-python (it declares Python >= 3.12 and runs on 3.11)",
             findings={}, cls=_MissingInThisVersion, written_for=WRITTEN_FOR_INTER_DOCUMENT, family="megatron"),
)

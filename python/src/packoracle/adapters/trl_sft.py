"""huggingface/trl: `trl.data_utils.pack_dataset` + `trl.trainer.sft_trainer.DataCollatorForLanguageModeling`,
and SFTTrainer's own loss (the fused LM head, divided by transformers' num_items_in_batch).

Documents → library input, as SFTTrainer prepares a pre-tokenized dataset: one `datasets.Dataset` row per
document (the policy's delimiters added by `documents_of`), `input_ids`, and `labels` = the token where it is
supervised, else -100. That is SFTTrainer's `build_labels` (1.16 folds `completion_mask`/`assistant_masks` into
`labels` during dataset preparation and drops the mask columns; the collator reads only `input_ids`, `labels`
and `seq_lengths`). Two more per-token list columns, `doc_index` and `doc_offset`, carry the provenance:
pack_dataset packs every list column alongside `input_ids` (it requires identical offsets), so each packed
row says which document token sits in each slot, and `doc_spans` are read from them. They are dropped before
the collator call, because SFTTrainer's `remove_unused_columns` keeps only `input_ids`, `labels`,
`seq_lengths` (its signature columns): the collator gets exactly what it gets in training (it ignores other
keys anyway, so its output would be the same either way). No documents at all: no dataset, no micro-batch
(SFTTrainer stops on an empty dataset before packing, at `next(iter(train_dataset))`).

Row length of the kit = pack_dataset's `seq_length` (with `pad_to_multiple_of=k`: the largest multiple of k not
above it, so that a padded row still fits the kit's row).

Rows → collator calls, and what SFTTrainer really does with `per_device_train_batch_size=B`: its DataLoader
hands the collator B packed rows at a time.
- `padding_free=False`: the collator returns a (B, T) batch padded to the longest of the B rows, with an
  `attention_mask`. The adapter calls it exactly so: once per micro-batch of `micro_batch_rows` rows.
- `padding_free=True`: the collator flattens the B rows into ONE (1, ΣT) row, up to B·seq_length long, more
  than the kit's row. The adapter calls it once per packed row instead (B = 1) and puts `micro_batch_rows`
  such rows in a micro-batch. Without `pad_to_multiple_of` the flattened row is exactly the concatenation of
  the one-row outputs (positions restart at each packed row, whose first label is then -100, cu_seq_lens
  offset); with it, SFTTrainer pads only the end of the flattened row, the per-row calls pad every row.
Micro-batch m goes to rank m mod dp (accelerate's batch sharding with split_batches=False), in row order
(no shuffle: the kit fixes the order).

The loss side is a real `SFTTrainer` (CPU, no reporting, no telemetry) around a two-class stand-in causal LM
whose backbone returns its `inputs_embeds` as the last hidden state and whose `lm_head` is the 2×2 identity:
SFTTrainer's fused LM head (`add_fused_lm_head` → `ChunkedLogProbFunction`, the default `loss_type="nll"`)
then scores the kit's logits (`two_class_logits`) as they are, and `training_step` → `compute_loss` divides the
summed negative log-probs by `num_items_in_batch`, which the Trainer's own `_get_num_items_in_batch` counts on
the shifted labels (`_loss_shifts_labels` holds for a *ForCausalLM) over the step's micro-batches. The rows
are fed one at a time and a micro-batch's loss is the sum of its rows' (see `sft_loss`). Ranks are simulated
in one process: the Trainer's gather of the per-rank counts is their sum here, and compute_loss's
`× num_processes` (undone by DDP's gradient average) is 1, so each micro-batch reports Σ(its losses)/N, its
share of the step objective.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from types import ModuleType
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

if TYPE_CHECKING:
    import torch

from .._fuzz import Refuse
from ._base import Adapter, Packer, Reducer, assign, documents_of
from ._losses import two_class_logits

WRITTEN_FOR = "1.16.0"
# HF_HUB_DISABLE_TELEMETRY: TRL's trainers ping the Hub at construction otherwise. OMP_NUM_THREADS: torch's
# intra-op threads make each tiny collator call ~50x slower on a busy 2-core machine (repeat_interleave).
ENV = {"HF_HUB_DISABLE_TELEMETRY": "1", "OMP_NUM_THREADS": "1"}
PAD_TOKEN_ID = 0  # SFTTrainer: the tokenizer's pad token (or its eos); the kit's policies pad with 0
# The collator's per-example keys, as SFTTrainer keeps them (`_signature_columns`).
COLLATOR_COLUMNS = ("input_ids", "labels", "seq_lengths")


def _datasets() -> ModuleType:
    import datasets

    datasets.disable_progress_bars()  # one map per request: its bars would drown the run
    return datasets


def _dataset(docs: list[dict]) -> Any:
    """One row per document: input_ids, labels (-100 where unsupervised) and the provenance columns. Built
    from an Arrow table with a fingerprint of its own: `Dataset.from_dict` would hash the data first (a tenth
    of the packer's time here), for a cache that in-memory datasets never use."""
    import pyarrow as pa

    datasets = _datasets()
    ints = pa.list_(pa.int64())
    table = pa.table({
        "input_ids": pa.array([d["tokens"] for d in docs], ints),
        "labels": pa.array([[t if s else -100 for t, s in zip(d["tokens"], d["supervised"])] for d in docs], ints),
        "doc_index": pa.array([[k] * len(d["tokens"]) for k, d in enumerate(docs)], ints),
        "doc_offset": pa.array([list(range(len(d["tokens"]))) for d in docs], ints),
    })
    return datasets.Dataset(table, fingerprint=_fingerprint())


_CALLS = itertools.count()


def _fingerprint() -> str:
    """A fresh fingerprint per dataset and per map (datasets otherwise hashes the data and the transform to
    make one); unique, so no cache could ever confuse two requests."""
    return f"packoracle-trl-{os.getpid()}-{next(_CALLS)}"


def _spans(doc_index: list[int], doc_offset: list[int], docs: list[dict]) -> list[dict]:
    """doc_spans of one packed row, from its provenance columns: a span is a run of one document's tokens at
    consecutive offsets."""
    spans: list[dict] = []
    for slot, (k, offset) in enumerate(zip(doc_index, doc_offset)):
        last = spans[-1] if spans else None
        if last is not None and last["_k"] == k and last["doc_offset"] + last["length"] == offset:
            last["length"] += 1
        else:
            spans.append({"_k": k, "doc_uid": docs[k]["doc_uid"], "start": slot, "length": 1, "doc_offset": offset})
    for s in spans:
        del s["_k"]
    return spans


def _packed_rows(docs: list[dict], strategy: str, seq_length: int) -> list[dict]:
    """pack_dataset's rows, each {"features": what the collator gets, "doc_spans": ...}."""
    from trl.data_utils import pack_dataset

    map_kwargs = {"new_fingerprint": _fingerprint()}  # pack_dataset passes these to Dataset.map
    packed = pack_dataset(_dataset(docs), seq_length, strategy, map_kwargs)[:]  # columns as Python lists
    rows = []
    for r in range(len(packed["input_ids"])):
        features = {c: packed[c][r] for c in COLLATOR_COLUMNS if c in packed}
        rows.append({"features": features, "doc_spans": _spans(packed["doc_index"][r], packed["doc_offset"][r], docs)})
    return rows


def _seq_length(row_length: int, pad_to_multiple_of: Optional[int]) -> int:
    if pad_to_multiple_of is None:
        return row_length
    return row_length // pad_to_multiple_of * pad_to_multiple_of


def pack_packer(strategy: str, padding_free: bool, pad_to_multiple_of: Optional[int] = None) -> Packer:
    """pack_dataset(ds, seq_length, strategy) then the collator, per row (padding-free) or per micro-batch."""
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    collator = DataCollatorForLanguageModeling(pad_token_id=PAD_TOKEN_ID, padding_free=padding_free,
                                               pad_to_multiple_of=pad_to_multiple_of)

    def pack(request: dict) -> list[dict]:
        docs = documents_of(request)
        seq_length = _seq_length(request["row_length"], pad_to_multiple_of)
        if seq_length < 1 and any(d["tokens"] for d in docs):
            # every collator output is a multiple of k slots: no max_length fits a row shorter than k
            raise Refuse(f"pad_to_multiple_of={pad_to_multiple_of}: no max_length gives rows of at most "
                         f"{request['row_length']} slots")
        # No documents: no dataset (SFTTrainer stops at next(iter(train_dataset)) before packing one).
        rows = _packed_rows(docs, strategy, seq_length) if docs and seq_length >= 1 else []
        if padding_free:
            batches = [dict(collator([row["features"]]), doc_spans=row["doc_spans"]) for row in rows]
            return assign(batches, request)
        out = []
        for mb in assign(rows, request):  # the rows of each micro-batch, in one collator call
            batch = dict(collator([row["features"] for row in mb["rows"]]))
            batch["doc_spans"] = [row["doc_spans"] for row in mb["rows"]]
            out.append({"micro_step": mb["micro_step"], "rank": mb["rank"], **batch})
        return out

    return pack


_TRAINER = None


def _trainer() -> Any:
    """A real SFTTrainer on CPU around the stand-in two-class causal LM (see the module docstring)."""
    global _TRAINER
    if _TRAINER is None:
        # TRL's trainers send a telemetry ping at construction unless these are set (read at import time by
        # huggingface_hub, hence also the constant below when it was imported before this module set them).
        os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
        import huggingface_hub.constants

        huggingface_hub.constants.HF_HUB_DISABLE_TELEMETRY = True
        import torch
        from tokenizers import Tokenizer, models
        from transformers import PreTrainedTokenizerFast
        from trl import SFTConfig, SFTTrainer

        datasets = _datasets()
        tokenizer = PreTrainedTokenizerFast(
            tokenizer_object=Tokenizer(models.WordLevel({"<pad>": 0, "a": 1}, unk_token="<pad>")),
            pad_token="<pad>", eos_token="<pad>")
        model = _stand_in_model().to(torch.float64)
        args = SFTConfig(output_dir=tempfile.mkdtemp(prefix="packoracle-trl-"), use_cpu=True, report_to=[],
                         save_strategy="no", activation_checkpointing=False, seed=0)
        train = datasets.Dataset.from_dict({"input_ids": [[1, 1]]})  # required by the constructor, never used
        _TRAINER = SFTTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer)
    return _TRAINER


def _stand_in_model() -> Any:
    """`PassthroughForCausalLM`: hidden state = inputs_embeds, lm_head = identity on two classes. A model, not
    a loss: everything from the hidden states on is TRL's."""
    import torch
    from torch import nn
    from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
    from transformers.modeling_outputs import BaseModelOutputWithPast

    class PassthroughConfig(PretrainedConfig):
        model_type = "packoracle_passthrough"

        def __init__(self, vocab_size: int = 2, hidden_size: int = 2, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.vocab_size, self.hidden_size = vocab_size, hidden_size

    class Backbone(nn.Module):
        def forward(self, input_ids: Any = None, inputs_embeds: Any = None, **kwargs: Any) -> Any:
            return BaseModelOutputWithPast(last_hidden_state=inputs_embeds)

    class PassthroughForCausalLM(PreTrainedModel, GenerationMixin):
        config_class = PassthroughConfig
        base_model_prefix = "model"

        def __init__(self, config: Any) -> None:
            super().__init__(config)
            self.model = Backbone()
            self.lm_head = nn.Linear(2, 2, bias=False)
            with torch.no_grad():
                self.lm_head.weight.copy_(torch.eye(2))

        def get_output_embeddings(self) -> Any:
            return self.lm_head

        def forward(self, input_ids: Any = None, inputs_embeds: Any = None, labels: Any = None,
                    **kwargs: Any) -> Any:
            raise NotImplementedError("only the fused LM head (fused_lm_head=True) is used")

    return PassthroughForCausalLM(PassthroughConfig())


def _tensor(value: Any, dtype: torch.dtype) -> torch.Tensor:
    import torch

    return torch.as_tensor(np.asarray(value), dtype=dtype)


def _row_inputs(row: dict, losses: list) -> dict:
    """One row as SFTTrainer's compute_loss gets a batch: the kit's per-slot losses as the hidden states, the
    labels mapped to class 0 (ignored ones kept), and the row's position_ids or attention_mask (compute_loss
    counts the tokens from one of them)."""
    import torch

    lab = _tensor(row["labels"], torch.long)
    valid = np.zeros(len(lab), dtype=bool)
    valid[:-1] = (lab[1:] != -100).numpy()
    inputs = {"labels": torch.where(lab != -100, 0, -100)[None],
              "inputs_embeds": torch.as_tensor(two_class_logits(losses, valid))[None]}
    for key in ("position_ids", "attention_mask"):
        if key in row:
            inputs[key] = _tensor(row[key], torch.long)[None]
            break
    else:
        inputs["attention_mask"] = torch.ones_like(inputs["labels"])
    return inputs


def sft_loss() -> Reducer:
    """SFTTrainer.training_step on each row, num_items_in_batch from the Trainer's count over the step's rows
    of every rank. A micro-batch's loss is the sum of its rows' losses: one row at a time is what SFTTrainer's
    single call on a padded (B, T) batch computes (the fused head shifts within each row), and what it computes
    on the flattened padding-free row, whose seams the collator masks (labels[position_ids == 0] = -100); the
    kit's own re-encodings of the rows need not mask a row's first label, so rows are never joined here."""
    import torch

    trainer = _trainer()
    device = torch.device("cpu")

    def reduce(request: dict) -> list[dict]:
        mbs = request["microbatches"]
        inputs = [[_row_inputs(row, request["slot_losses"][m][r]) for r, row in enumerate(mb["rows"])]
                  for m, mb in enumerate(mbs)]
        per_rank: dict[int, list[dict]] = {}
        for mb, rows in zip(mbs, inputs):
            per_rank.setdefault(int(mb["rank"]), []).extend({"labels": x["labels"]} for x in rows)
        num_items = sum(trainer._get_num_items_in_batch(b, device) for b in per_rank.values())
        n = float(max(int(num_items), 1))  # compute_loss divides by num_items_in_batch.clamp(min=1)
        out = []
        for rows in inputs:
            loss = sum(float(trainer.training_step(trainer.model, dict(x), num_items_in_batch=num_items))
                       for x in rows)
            out.append({"loss_sum": loss * n, "denominator": n, "denominator_scope": "global", "loss": loss})
        return out

    return reduce


def dump_padding_free(request: dict, answer: list) -> list[dict]:
    """packoracle.dump.from_trl_padding_free on each padding-free row, the row's documents (whole, in row order:
    what the row's seq_lengths came from) as its `documents`; pack_dataset('bfd') truncates a long one."""
    from ..dump import from_trl_padding_free

    docs = {d["doc_uid"]: d for d in documents_of(request)}
    pad = PAD_TOKEN_ID if request["policy"]["padding"] != "none" else None
    records = []
    for mb in answer:
        rows = []
        for batch in mb["rows"]:
            row_docs = [{"doc_uid": s["doc_uid"], "tokens": docs[s["doc_uid"]]["tokens"]} for s in batch["doc_spans"]]
            fields = {k: v for k, v in batch.items() if k != "doc_spans"}
            rows.append(from_trl_padding_free(fields, row_docs, pad_id=pad, overflow="truncate")["rows"][0])
        records.append(dict(mb, rows=rows))
    return records


def _adapter(config_id: str, configuration: str, packer: dict, policy: dict, notes: str = "",
             findings: Optional[dict] = None) -> Adapter:
    # The dump converter exists for the padding-free rows of whole (or truncated) documents.
    dump = dump_padding_free if packer["padding_free"] and packer["strategy"] == "bfd" else None
    return Adapter(name=f"trl/{config_id}", system="trl", distribution="trl", written_for=WRITTEN_FOR,
                   configuration=configuration, policy=policy,
                   imports=("trl.data_utils", "trl.trainer.sft_trainer", "datasets", "torch"),
                   make_packer=lambda: pack_packer(**packer),
                   make_reducer=sft_loss, dump=dump, notes=notes,
                   env=ENV, findings=findings or {})


_SFT = "SFTTrainer.training_step (fused LM head, / num_items_in_batch)"

# The loss role: SFTTrainer's fused LM head (trl/kernels/chunked_logprob.py) keeps its log-sum-exp statistics in
# float32, so a slot loss of 1.625 comes back as 1.62499988: within the kit's float32 tolerance for losses.

ADAPTERS = (
    _adapter("bfd-padding-free",
             f"pack_dataset(ds, L, 'bfd') + DataCollatorForLanguageModeling(0, padding_free=True) + {_SFT}",
             {"strategy": "bfd", "padding_free": True},
             {"preset": "trl-padding-free"},
             "SFTTrainer(packing=True) default; long documents truncated to L"),
    _adapter("bfd_split-padding-free",
             f"pack_dataset(ds, L, 'bfd_split') + DataCollatorForLanguageModeling(0, padding_free=True) + {_SFT}",
             {"strategy": "bfd_split", "padding_free": True},
             {"preset": "trl-padding-free", "overflow": "split", "split_positions": "restart"},
             "long documents cut into pieces of L (the last one shorter), each packed as a sequence of its own: "
             "positions restart at 0 in every piece; the full pieces fill rows of their own, the last piece is "
             "best-fitted into a later row"),
    _adapter("bfd-padding-free-pad8",
             f"pack_dataset(ds, L//8*8, 'bfd') + DataCollatorForLanguageModeling(0, padding_free=True, "
             f"pad_to_multiple_of=8) + {_SFT}",
             {"strategy": "bfd", "padding_free": True, "pad_to_multiple_of": 8},
             {"preset": "trl-padding-free", "padding": "right", "pad_to": "multiple_of:8",
              "truncate_to": "pad_multiple"},
             "every collator output is a multiple of 8 slots, so a row of L slots holds L//8*8 tokens: packed with "
             "seq_length = L//8*8, pack_dataset truncates a long document to L//8*8 tokens (truncate_to: "
             "pad_multiple); pads with position 0 (each pad slot a one-token segment of cu_seq_lens and seq_idx); "
             "refuses rows shorter than 8 slots; SFTTrainer pads only the end of a flattened micro-batch, the "
             "per-row calls here pad every row"),
    _adapter("bfd-padded",
             f"pack_dataset(ds, L, 'bfd') + DataCollatorForLanguageModeling(0, padding_free=False) + {_SFT}",
             {"strategy": "bfd", "padding_free": False},
             {"preset": "trl-padding-free", "boundary_source": "none", "attention": "row_causal",
              "positions": "row_continuous", "boundary_target": "included", "pad_keys": "masked",
              "padding": "right", "pad_to": "longest"},
             "the collator driven by hand (SFTTrainer forces padding_free for bfd): an attention_mask of ones and "
             "no position_ids (the model's default 0..T-1), so a packed row attends across its documents and "
             "trains the boundary targets; rows padded to the longest of their micro-batch (pad_to: longest)"),
    _adapter("wrapped",
             f"pack_dataset(ds, L, 'wrapped') + DataCollatorForLanguageModeling(0) + {_SFT}",
             {"strategy": "wrapped", "padding_free": False},
             {"preset": "trl-wrapped", "pad_to": "longest"},
             "SFTTrainer(packing=True, packing_strategy='wrapped'), where padding_free stays False; the last, "
             "shorter row is padded to the longest of its micro-batch (pad_to: longest)"),
    _adapter("wrapped-padding-free",
             f"pack_dataset(ds, L, 'wrapped') + DataCollatorForLanguageModeling(0, padding_free=True) + {_SFT}",
             {"strategy": "wrapped", "padding_free": True},
             {"preset": "trl-wrapped", "pad_to": "multiple_of:1", "segment_encodings": "rows"},
             "SFTTrainer(padding_free=True, packing_strategy='wrapped') warns against it: pack_dataset('wrapped') "
             "keeps no seq_lengths (it ignores sequence boundaries), so positions run over the whole row and "
             "cu_seq_lens/seq_idx make each row one sequence (d0=[0] d1=[0] in a row of 2: cu_seq_lens_q [0, 2], "
             "seq_idx [0, 0]): segment encodings that name rows (segment_encodings: rows), whose attention, the "
             "whole row causal, is the declared row_causal"),
)

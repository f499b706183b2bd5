"""huggingface/transformers: DataCollatorWithFlattening and the Trainer's loss (num_items_in_batch with
ForCausalLMLoss).

The collator has no row length: it flattens whatever features one call gets into one row. The kit's row length
is the token budget of a call (documents in order while they fit; one longer than the budget is refused, as a
token-budget sampler cannot place it). Each call's output is returned as the library built it.

The loss side runs the Trainer's own `_get_num_items_in_batch` (on a real Trainer around a tiny Llama) over
each rank's micro-batches of the step, and `ForCausalLMLoss` on logits whose cross-entropy is the kit's loss of
each slot. With several ranks the Trainer gathers the ranks' counts and sums them
(`average_tokens_across_devices`, the default): the ranks here are simulated in one process, so that sum is
taken here over the per-rank counts the Trainer computed.
"""

from __future__ import annotations

import tempfile
from typing import Any

import numpy as np

from ._base import Adapter, Finding, Packer, Reducer, assign, documents_of, greedy_groups, refuse_too_long
from ._losses import two_class_logits

WRITTEN_FOR = "5.24.0"


def flatten_packer(**collator_kwargs: Any) -> Packer:
    from transformers import DataCollatorWithFlattening

    collator = DataCollatorWithFlattening(**collator_kwargs)

    def pack(request: dict) -> list[dict]:
        docs = documents_of(request)
        if request["policy"]["overflow"] == "error":
            refuse_too_long(docs, request["row_length"], "token budget of one collator call")
        batches = []
        for group in greedy_groups(docs, request["row_length"]):
            features = [{"input_ids": d["tokens"],
                         "labels": [t if s else -100 for t, s in zip(d["tokens"], d["supervised"])]} for d in group]
            batches.append(dict(collator(features, return_tensors="pt")))
        return assign(batches, request)

    return pack


def dump_flatten(request: dict, answer: list) -> list[dict]:
    """packoracle.dump.from_hf_flatten on each collator output, the documents read in the order fed."""
    from ..dump import DocumentSequence, from_hf_flatten

    seq = DocumentSequence([{"doc_uid": d["doc_uid"], "tokens": d["tokens"]} for d in documents_of(request)
                            if d["tokens"]])
    records = []
    for mb in answer:
        rows = [from_hf_flatten(batch, seq)["rows"][0] for batch in mb["rows"]]
        records.append(dict(mb, rows=rows))
    return records


_TRAINER = None


def _trainer() -> Any:
    """A real Trainer (CPU, no logging) around a one-layer Llama: what decides how num_items_in_batch is
    counted (model_accepts_loss_kwargs, the causal-LM shift of the count) is read from it, not assumed."""
    global _TRAINER
    if _TRAINER is None:
        from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

        config = LlamaConfig(vocab_size=8, hidden_size=8, intermediate_size=8, num_hidden_layers=1,
                             num_attention_heads=1, num_key_value_heads=1)
        args = TrainingArguments(output_dir=tempfile.mkdtemp(prefix="packoracle-hf-"), use_cpu=True,
                                 report_to=[], save_strategy="no")
        _TRAINER = Trainer(model=LlamaForCausalLM(config), args=args)
    return _TRAINER


def trainer_loss() -> Reducer:
    import torch
    from transformers.loss.loss_utils import ForCausalLMLoss

    trainer = _trainer()

    def reduce(request: dict) -> list[dict]:
        mbs = request["microbatches"]
        per_rank: dict[int, list[dict]] = {}
        for mb in mbs:
            per_rank.setdefault(int(mb["rank"]), []).extend(
                {"labels": torch.as_tensor(np.asarray(row["labels"]), dtype=torch.long)[None]} for row in mb["rows"])
        counts = [trainer._get_num_items_in_batch(rows, torch.device("cpu")) for rows in per_rank.values()]
        num_items = sum(counts)  # accelerator.gather(...).sum() over the ranks
        out = []
        for m, mb in enumerate(mbs):
            loss = torch.zeros((), dtype=torch.float64)
            for r, row in enumerate(mb["rows"]):
                labels = torch.as_tensor(np.asarray(row["labels"]), dtype=torch.long)
                valid = np.zeros(len(labels), dtype=bool)
                valid[:-1] = (labels[1:] != -100).numpy()
                logits = torch.as_tensor(two_class_logits(request["slot_losses"][m][r], valid))
                mapped = torch.where(labels != -100, 0, -100)[None]
                loss = loss + ForCausalLMLoss(logits[None], mapped, vocab_size=2, num_items_in_batch=num_items)
            n = float(num_items)
            out.append({"loss_sum": float(loss) * n, "denominator": n, "denominator_scope": "global",
                        "loss": float(loss)})
        return out

    return reduce


# Examined: ForCausalLMLoss → fixed_cross_entropy divides the summed loss by num_items_in_batch without a
# guard, so a step whose labels are all -100 gives 0/0.
NAN_ON_EMPTY_STEP = Finding(
    "denominator", "bug",
    "a step in which no label counts (every label -100: one-token documents, prompt-only samples, a step of "
    "padding) has num_items_in_batch = 0, and fixed_cross_entropy returns sum / 0 = NaN: the step's loss is "
    "NaN, what a trainer logs and its NaN guards act on (the gradients stay 0, as cross_entropy's backward "
    "zeroes ignored targets); the token mean of no target is 0 (or the step is skipped). Same bug, "
    "reported elsewhere: NVIDIA-NeMo/Automodel#3796, allenai/OLMo-core#657",
    "not reported", report="docs/upstream/transformers-nan-zero-targets.md")


def _adapter(config_id: str, configuration: str, kwargs: dict, policy: dict, notes: str = "") -> Adapter:
    return Adapter(name=f"transformers/{config_id}", system="transformers", distribution="transformers",
                   written_for=WRITTEN_FOR, configuration=configuration, policy=policy,
                   imports=("transformers", "torch"), make_packer=lambda: flatten_packer(**kwargs),
                   make_reducer=trainer_loss, dump=dump_flatten, notes=notes, findings={"loss": NAN_ON_EMPTY_STEP})


ADAPTERS = (
    _adapter("flatten", "DataCollatorWithFlattening() + Trainer num_items_in_batch", {},
             {"preset": "hf-flatten", "boundary_source": "position_reset"},
             "position_ids only: backends find the boundaries where the positions restart"),
    _adapter("flatten-fa-kwargs", "DataCollatorWithFlattening(return_flash_attn_kwargs=True) + Trainer",
             {"return_flash_attn_kwargs": True}, {"preset": "hf-flatten"},
             "cu_seq_lens_q/k for flash-attention varlen"),
    _adapter("flatten-seq-idx", "DataCollatorWithFlattening(return_seq_idx=True) + Trainer",
             {"return_seq_idx": True}, {"preset": "hf-flatten", "boundary_source": "doc_ids"},
             "seq_idx: one id per document"),
)

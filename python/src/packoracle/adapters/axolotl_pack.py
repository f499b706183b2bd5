"""axolotl-ai-cloud/axolotl 0.19.0 (the newest PyPI serves): its sample packing, the data path of ``axolotl
train`` with ``sample_packing: true``. The dataset preparation filters the tokenized samples by length
(``handle_long_seq_in_dataset``, utils/data/utils.py: ``excess_length_strategy`` drop, truncate or raise; the
predicate is ``utils.trainer.filter_sequences_by_length``) and gives each its ``position_ids`` and ``length``
(``utils.trainer.add_position_ids``). The trainer's ``MultipackBatchSampler`` (utils/samplers/multipack.py)
packs the sample indices into bins of at most ``batch_max_len`` tokens (first-fit-decreasing, or in order with
``sample_packing_sequentially``); ``V2BatchSamplerDataCollatorForSeq2Seq`` (utils/collators/batching.py)
concatenates each bin into one row: ``attention_mask`` = the sample's index 1..k in the row (the patched
attention's document ids), ``position_ids`` the samples' own, labels as given; then pads the labels with -100,
the position ids with 0, 1, 2, ... and the rest through ``tokenizer.pad`` to ``pad_to_multiple_of``.

The family environment ``axolotl`` (requirements/axolotl.lock; axolotl pins transformers 5.16.1).

The configuration, as ``core/trainers/base.py`` and ``core/builders/causal.py`` build it for ``micro_batch_size:
1``, ``sequence_len: L``, ``pad_to_sequence_len: true``, ``pad_to_multiple_of: L``, ``excess_length_strategy:
drop`` (the default), ``min_sample_len: 1``, ``dataset_num_proc: 1`` (``multipack_real_batches`` off): the
sampler's ``batch_size`` 1 and ``batch_max_len`` = 1 × L, the collator's ``pad_to_multiple_of`` = L·⌈L/L⌉ = L, so
every bin is one row of exactly L slots. ``drop`` leaves a sample longer than L out of the dataset (the
library's filter returns False for it; one of exactly L tokens is kept): the policy's ``overflow: drop``.

The adapter's part: each document is one tokenized sample ``{input_ids, attention_mask, labels}`` (labels: the
token where supervised, -100 elsewhere, as a prompt strategy writes them); the rows are dealt into micro-batches
by ``assign``; each row's ``attention_mask`` is given as ``doc_ids`` (its padding 0 re-spelled -1) and its
``doc_spans`` are read off the bin's sample indices. Not applied: ``process_datasets_for_packing``'s filter of
samples without a trainable token (a closure inside that function, over a ``datasets.Dataset``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._base import Adapter, Packer, assign, documents_of

WRITTEN_FOR = "0.19.0"


def _tokenizer(pad_id: int) -> Any:
    """A fast tokenizer over an in-memory word-level vocabulary whose pad id is the policy's (the collator pads
    through ``tokenizer.pad``, which reads only the pad id and side)."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": pad_id, "<unk>": pad_id + 1}
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="<unk>")),
                                  pad_token="<pad>", unk_token="<unk>")
    tok.padding_side = "right"
    return tok


def _samples(docs: list[dict], row_length: int, ignore: int) -> list[dict]:
    """The tokenized samples after the dataset preparation: the library's length filter (excess_length_strategy
    drop: dropping an over-long one, and an empty one) and its position ids."""
    from axolotl.utils.trainer import add_position_ids, filter_sequences_by_length

    samples = []
    for d in docs:
        sample = {"input_ids": list(d["tokens"]), "attention_mask": [1] * len(d["tokens"]),
                  "labels": [t if s else ignore for t, s in zip(d["tokens"], d["supervised"])]}
        if filter_sequences_by_length(sample, sequence_len=row_length, min_sequence_len=1, raise_on_drop=False):
            samples.append(dict(add_position_ids(sample), doc_uid=d["doc_uid"]))
    return samples


def _row(batch: Any, r: int, bin_samples: list[dict]) -> dict:
    """One collated row under the kit's names, with where each sample went (the bin's order)."""
    spans, start = [], 0
    for s in bin_samples:
        spans.append({"doc_uid": s["doc_uid"], "start": start, "length": s["length"], "doc_offset": 0})
        start += s["length"]
    mask = batch["attention_mask"][r].numpy()
    return {"input_ids": batch["input_ids"][r], "labels": batch["labels"][r],
            "position_ids": batch["position_ids"][r],
            # the sample index 1..k is the document id; axolotl's padding 0 is the kit's -1
            "doc_ids": np.where(mask == 0, -1, mask), "doc_spans": spans}


def multipack_packer(sequential: bool) -> Packer:
    import gc

    from torch.utils.data import SequentialSampler
    from axolotl.utils.collators.batching import V2BatchSamplerDataCollatorForSeq2Seq
    from axolotl.utils.samplers.multipack import MultipackBatchSampler

    # generate_batches ends with gc.collect(): over the imported torch/transformers/torchao objects that is seconds
    # a call on this machine. Freezing them (they live as long as the process) keeps every call's collection to
    # what the call made; nothing the sampler computes depends on it.
    gc.freeze()

    def pack(request: dict) -> list[dict]:
        policy, length = request["policy"], request["row_length"]
        samples = _samples(documents_of(request), length, policy["ignore_index"])
        if not samples:
            return []
        sampler = MultipackBatchSampler(SequentialSampler(range(len(samples))), batch_size=1, batch_max_len=length,
                                        lengths=np.array([s["length"] for s in samples]), bin_size=200,
                                        sequential=sequential, drop_last=True, num_processes=1)
        collator = V2BatchSamplerDataCollatorForSeq2Seq(tokenizer=_tokenizer(policy["pad_id"]), padding=True,
                                                        pad_to_multiple_of=length, return_tensors="pt")
        fields = ("input_ids", "attention_mask", "labels", "position_ids", "length")
        rows = []
        for bins in sampler:
            batch = collator([[{k: samples[i][k] for k in fields} for i in b] for b in bins])
            rows += [_row(batch, r, [samples[i] for i in b]) for r, b in enumerate(bins)]
        return assign(rows, request)

    return pack


# Labels as given (the model shifts; a supervised first token is the previous sample's last prediction's target),
# documents by the sample index in attention_mask, positions reset per sample, padding positions 0, 1, 2, ...;
# a sample longer than sequence_len dropped (excess_length_strategy: drop, the default).
POLICY = {"preset": "hf-flatten", "boundary_source": "doc_ids", "padding": "right", "pad_keys": "masked",
          "pad_positions": "any", "boundary_target": "included", "overflow": "drop"}

_CALL = ("MultipackBatchSampler(SequentialSampler, batch_size=1, batch_max_len=L, lengths, bin_size=200, "
         "sequential={seq}, drop_last=True); V2BatchSamplerDataCollatorForSeq2Seq(tokenizer, padding=True, "
         "pad_to_multiple_of=L); samples filtered by filter_sequences_by_length(raise_on_drop=False), "
         "add_position_ids")


def _adapter(name: str, sequential: bool) -> Adapter:
    return Adapter(name=f"axolotl/{name}", system="axolotl", distribution="axolotl", written_for=WRITTEN_FOR,
                   configuration=_CALL.format(seq=sequential), policy=POLICY,
                   imports=("axolotl.utils.samplers.multipack", "axolotl.utils.collators.batching",
                            "axolotl.utils.trainer"),
                   make_packer=lambda: multipack_packer(sequential), family="axolotl",
                   notes="sample_packing with micro_batch_size 1, pad_to_sequence_len and pad_to_multiple_of L, "
                         "excess_length_strategy drop (the default: a sample longer than sequence_len is left "
                         "out, overflow: drop); the filter of samples without a trainable token is not applied")


ADAPTERS = (_adapter("multipack-ffd", False), _adapter("multipack-sequential", True))

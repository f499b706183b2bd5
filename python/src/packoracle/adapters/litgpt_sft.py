"""Lightning-AI/litgpt 0.5.13: the SFT data path of ``litgpt finetune`` (``SFTDataset`` samples collated by
``litgpt.data.base.get_sft_collate_fn``) and its loss, ``litgpt.utils.chunked_cross_entropy``, as
``finetune/full.py`` calls it. LitGPT has no document packer: one sample per row, right-padded to the longest
sample of the batch with ``pad_id`` (``pad_to: longest``), labels with ``ignore_index``, cut to ``max_seq_length``. The family
environment ``litgpt`` (requirements/litgpt.lock; no transformers).

Each document is one sample ``{"input_ids": tokens, "labels": tokens with -100 where not supervised,
"token_counts": ...}`` (``SFTDataset.__getitem__`` makes the labels the same way, the prompt masked); the
samples of a micro-batch (``micro_batch_rows`` of them, in order) go to one call of the collate function with
``max_seq_length`` = the row length, as ``litgpt finetune`` builds it (``train.max_seq_length``). Each row of
what it returns is a row. The training loop shifts (``logits[..., :-1]`` against ``targets[..., 1:]``):
``label_alignment: aligned``.
"""

from __future__ import annotations

from ._base import Adapter, Packer, assign, documents_of

WRITTEN_FOR = "0.5.13"


def sft_packer() -> Packer:
    import torch
    from litgpt.data.base import get_sft_collate_fn

    def pack(request: dict) -> list[dict]:
        policy = request["policy"]
        collate = get_sft_collate_fn(max_seq_length=request["row_length"], pad_id=policy["pad_id"],
                                     ignore_index=policy["ignore_index"])
        docs = [d for d in documents_of(request) if d["tokens"]]
        samples = [{"input_ids": torch.tensor(d["tokens"]),
                    "labels": torch.tensor([t if s else policy["ignore_index"]
                                            for t, s in zip(d["tokens"], d["supervised"])]),
                    "token_counts": {"raw": len(d["tokens"]), "raw_plus_prompt_template": len(d["tokens"])}}
                   for d in docs]
        per = request["micro_batch_rows"]
        rows = []
        for start in range(0, len(samples), per):
            batch = collate(samples[start:start + per])
            rows += [{"input_ids": batch["input_ids"][r], "labels": batch["labels"][r]}
                     for r in range(batch["input_ids"].shape[0])]
        return assign(rows, request)

    return pack


# One sample per row, truncated to max_seq_length, right padding with pad_id to the longest sample of the batch
# (pad_to: longest: every row of a micro-batch as wide as its widest, at most L), the loop's shift.
POLICY = {"preset": "hf-padded", "overflow": "truncate", "pad_to": "longest"}


ADAPTERS = (
    Adapter(name="litgpt/sft-collate", system="litgpt", distribution="litgpt", written_for=WRITTEN_FOR,
            configuration="get_sft_collate_fn(max_seq_length=L, pad_id=0, ignore_index=-100)(samples of "
                          "SFTDataset)", policy=POLICY, imports=("litgpt.data.base", "torch"),
            make_packer=sft_packer, family="litgpt",
            notes="no document packer in LitGPT: one sample per row, padded to the batch's longest sample "
                  "(pad_to: longest); the training loop shifts (aligned labels)"),
)

#!/usr/bin/env python3
# Correct exec candidate for the `hf-flatten` preset: huggingface/transformers DataCollatorWithFlattening
# (PR #36456, return_flash_attn_kwargs=True, return_seq_idx=True) fed by a token budget, with the Trainer's
# num_items_in_batch loss (>= 4.46, average_tokens_across_devices):
#   packoracle fuzz --exec 'python3 python/candidates/hf_flatten.py' --preset hf-flatten
# The row length is the token budget of one collator call: documents are taken in order while they fit
# (whole documents; overflow: error refuses one longer than the budget), and each call returns ONE unpadded
# row: input_ids concatenated, labels = [separator_id=-100] + tokens[1:] per document (unsupervised tokens -100),
# position_ids = range(len) per document (+ position_base, the later position_ids_start), cu_seq_lens_q as
# row-local cu_seqlens, seq_idx as doc_ids. Loss: the HF causal-LM loss shifts inside (aligned labels), sums,
# and divides by num_items_in_batch, the step's count of valid targets over all micro-batches and ranks.
# Mimics no bug.
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import effective_documents, greedy_rows, serve  # noqa: E402

SEPARATOR_ID = -100  # DataCollatorWithFlattening's default separator_id


def collate(pieces, policy):
    """DataCollatorWithFlattening.__call__ on the features of one row."""
    input_ids, labels, position_ids, cu, seq_idx, spans, targets = [], [], [], [0], [], [], []
    ignore = policy["ignore_index"]
    for s_idx, (doc, k0, length) in enumerate(pieces):
        tokens = doc["tokens"][k0:k0 + length]
        sup = doc["supervised"][k0:k0 + length]
        feature_labels = [t if m else ignore for t, m in zip(tokens, sup)]
        start = len(input_ids)
        spans.append({"doc_uid": doc["uid"], "start": start, "length": length, "doc_offset": k0})
        input_ids += tokens
        labels += [SEPARATOR_ID] + feature_labels[1:]
        position_ids += [policy["position_base"] + p for p in range(length)]
        seq_idx += [s_idx] * length
        cu.append(cu[-1] + length)
        # aligned: prediction i is scored against labels[i + 1], i.e. the next token of the same feature
        targets += [(doc["uid"], k0 + t + 1) for t in range(length - 1)] + [None]
    targets[-1:] = [None]
    return {"input_ids": input_ids, "labels": labels, "position_ids": position_ids, "cu_seqlens": cu,
            "doc_ids": seq_idx, "doc_spans": spans, "_targets": targets}


def pack(request):
    docs = effective_documents(request)
    policy = request["policy"]
    return [collate(pieces, policy) for pieces in greedy_rows(docs, request["row_length"], policy["overflow"])]


if __name__ == "__main__":
    serve(pack)

#!/usr/bin/env python3
# Correct exec candidate for the `torchtune-packed` preset: pytorch/torchtune @ bd2a0fc, TextCompletionDataset /
# SFTTransform samples -> PackedDataset -> padded_collate_packed, with full_finetune_distributed's loss scaling:
#   packoracle fuzz --exec 'python3 python/candidates/torchtune_packed.py' --preset torchtune-packed
# Each sample's labels are shifted on their own before packing (labels = where(mask[1:], -100, tokens[1:]) + [-100],
# PR #2613), so each sample's last label is -100. Greedy packing in dataset order: a sample goes into the
# current pack; when the pack overflows max_seq_len (= row_length) it is closed before that sample, or with
# split_across_pack (policy overflow: split) cut at max_seq_len and its tail carried into the next pack. A sample
# longer than max_seq_len raises unless split_across_pack (overflow: error -> refusal). Packs are padded with
# padding_idx (pad_id), labels -100, input_pos counting on from the last value clamped to max_seq_len - 1, and a
# padding entry in seq_lens. input_pos = x % max_seq_len over each sample. Loss: sum / num_tokens with num_tokens
# all-reduced over the step (scale_grads(world_size / num_tokens)): a global valid-target mean. Mimics no bug.
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Refuse, effective_documents, serve  # noqa: E402

IGNORE = -100  # CROSS_ENTROPY_IGNORE_IDX


def prepare_sample(doc, policy):
    """SFTTransform / TextCompletionDataset._prepare_sample: per-sample pre-shifted labels."""
    tokens, sup = doc["tokens"], doc["supervised"]
    ignore = policy["ignore_index"]
    labels = [tokens[k + 1] if sup[k + 1] else ignore for k in range(len(tokens) - 1)] + [ignore]
    refs = [(doc["uid"], k + 1) for k in range(len(tokens) - 1)] + [None]
    return {"tokens": list(tokens), "labels": labels, "refs": refs, "uid": doc["uid"]}


class PackedDataset:
    def __init__(self, samples, max_seq_len, padding_idx, split_across_pack, policy):
        self.L, self.pad, self.split, self.policy = max_seq_len, padding_idx, split_across_pack, policy
        self.packs = []
        cur = self._empty()
        for s in samples:
            n = len(s["tokens"])
            if n == 0:
                continue  # nothing to pack
            if n > self.L and not self.split:
                raise Refuse(f"Dataset sample is too long ({n} > {self.L}). Please set `split_across_pack=True` "
                             "or increase `max_seq_len`.")
            cur["tokens"] += s["tokens"]
            cur["labels"] += s["labels"]
            cur["refs"] += s["refs"]
            cur["input_pos"] += [x % self.L + policy["position_base"] for x in range(n)]
            cur["seq_lens"].append(n)
            cur["pieces"].append((s["uid"], 0, n))
            while len(cur["tokens"]) > self.L:
                cur = self._split_and_add_pack(cur)
        if cur["tokens"]:
            self._add_pack(cur)

    def _empty(self):
        return {"tokens": [], "labels": [], "refs": [], "input_pos": [], "seq_lens": [], "pieces": []}

    def _split_and_add_pack(self, cur):
        if self.split:
            boundary = self.L
            leftover = self.L - sum(cur["seq_lens"][:-1])
            seq_lens = cur["seq_lens"][:-1] + ([leftover] if leftover > 0 else [])
        else:
            boundary = sum(cur["seq_lens"][:-1])
            seq_lens = cur["seq_lens"][:-1]
        uid, k0, n = cur["pieces"][-1]
        head = boundary - sum(cur["seq_lens"][:-1])
        pieces = cur["pieces"][:-1] + ([(uid, k0, head)] if head > 0 else [])
        self._add_pack({"tokens": cur["tokens"][:boundary], "labels": cur["labels"][:boundary],
                        "refs": cur["refs"][:boundary], "input_pos": cur["input_pos"][:boundary],
                        "seq_lens": seq_lens, "pieces": pieces})
        rest = len(cur["tokens"]) - boundary
        return {"tokens": cur["tokens"][boundary:], "labels": cur["labels"][boundary:],
                "refs": cur["refs"][boundary:], "input_pos": cur["input_pos"][boundary:], "seq_lens": [rest],
                "pieces": [(uid, k0 + head, n - head)]}

    def _add_pack(self, pack):
        """_pad_pack: pad tokens with padding_idx, labels with -100, input_pos counting on (clamped)."""
        num_pad = self.L - len(pack["tokens"])
        last = pack["input_pos"][-1] if pack["input_pos"] else -1
        top = self.policy["position_base"] + self.L - 1
        self.packs.append({
            "tokens": pack["tokens"] + [self.pad] * num_pad,
            "labels": pack["labels"] + [IGNORE] * num_pad,
            "refs": pack["refs"] + [None] * num_pad,
            "input_pos": pack["input_pos"] + [min(last + 1 + t, top) for t in range(num_pad)],
            "seq_lens": pack["seq_lens"] + ([num_pad] if num_pad > 0 else []),
            "pieces": pack["pieces"]})


def pack(request):
    policy = request["policy"]
    samples = [prepare_sample(d, policy) for d in effective_documents(request)]
    ds = PackedDataset(samples, request["row_length"], policy["pad_id"], policy["overflow"] == "split", policy)
    rows = []
    for p in ds.packs:
        spans, start = [], 0
        for uid, k0, n in p["pieces"]:
            spans.append({"doc_uid": uid, "start": start, "length": n, "doc_offset": k0})
            start += n
        rows.append({"input_ids": p["tokens"], "labels": p["labels"], "position_ids": p["input_pos"],
                     "seq_lens": p["seq_lens"], "doc_spans": spans, "_targets": p["refs"]})
    return rows


if __name__ == "__main__":
    serve(pack)

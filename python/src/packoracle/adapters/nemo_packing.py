"""NVIDIA NeMo (nemo-toolkit): the offline sequence packing of ``nemo.utils.sequence_packing_utils``
(create_hist → create_packing_strategy("first_fit_decreasing" | "first_fit_shuffle") → fill_packing_strategy).

NeMo 3.0.0 ships these utilities alone: the LLM collection (``nemo.collections.llm``, with
``GPTSFTPackedDataset.collate_fn``, which shifted each sequence, built per-sequence positions and cu_seqlens) is
not in the 3.0.0 wheel (its collections are asr, audio, common, speechlm2, tts; the LLM side moved to
Megatron-Bridge), and nothing in 3.0.0 calls these functions. So the adapter returns what
``fill_packing_strategy`` returns, one row per pack:

- ``input_ids``: the packed sequences as they are (no padding: ``pad_id`` is never used);
- ``loss_mask``: the library's, unchanged: each sequence's token mask rolled by one ("to align with labels"),
  so that position i weights the prediction of the token after it, and a sequence's last position is False;
- ``cu_seqlens``: ``seq_start_id`` (the start of each sequence in the pack) with the pack's length appended;
- ``labels``: fill_packing_strategy returns none. Under its rolled mask the target of position i is
  ``input_ids[i + 1]``, so labels are input_ids moved one slot to the left (-100 in the last slot). No
  weighting is added: every weight the kit reads is the library's loss_mask.
- ``doc_spans``: provenance does not travel (only input_ids and loss_mask are copied into a pack), so the
  same fill_packing_strategy call is repeated under the same seed with each sequence's tokens replaced by its
  document number: the library's own placement says which document sits where.

The adapter's part: the documents (with their supervision as the per-token ``loss_mask`` NeMo's SFT datasets
carry) are the tokenized dataset; a document longer than the pack is refused, as the tokenized dataset's
max_seq_length bounds it (create_hist itself fails with an IndexError past pack_size + 1 tokens); numpy's
global RNG is seeded before the shuffle and the fill (both draw from it); packs are dealt to micro-batches and
ranks by ``assign``. No loss reducer: NeMo 3.0 has no LLM loss path.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np

from ._base import Adapter, Finding, Packer, assign, documents_of, refuse_too_long

WRITTEN_FOR = "3.0.0"
SEED = 1234


def _spans(traced: dict, starts: list[int], docs: list[dict]) -> list[dict]:
    """doc_spans of one pack from the traced pack (every token replaced by its document number)."""
    spans = []
    for s in starts:
        k = int(traced["input_ids"][s])
        spans.append({"doc_uid": docs[k]["doc_uid"], "start": s, "length": len(docs[k]["tokens"]),
                      "doc_offset": 0})
    return spans


def packing_packer(algorithm: str) -> Packer:
    from nemo.utils import logging as nemo_logging
    from nemo.utils.sequence_packing_utils import create_hist, create_packing_strategy, fill_packing_strategy

    nemo_logging.setLevel(nemo_logging.WARNING)  # the utilities log every histogram and packing at INFO

    def pack(request: dict) -> list[dict]:
        # create_hist and fill_packing_strategy draw tqdm bars on stderr for every request: sent nowhere.
        with contextlib.redirect_stderr(io.StringIO()):
            return pack_quietly(request)

    def pack_quietly(request: dict) -> list[dict]:
        L = request["row_length"]
        # Empty documents are left out, as a dataset filter drops them (create_hist files one under length -1,
        # where no pack looks: alone it makes create_packing_strategy divide by zero packs).
        docs = [d for d in documents_of(request) if d["tokens"]]
        refuse_too_long(docs, L, "max_seq_length of the tokenized dataset")
        if not docs:
            return []  # an empty dataset: create_packing_strategy takes max() of no lengths
        dataset = [{"input_ids": d["tokens"], "loss_mask": [bool(s) for s in d["supervised"]]} for d in docs]
        sequences, histogram = create_hist(dataset, L)
        np.random.seed(SEED)
        assignments, _ = create_packing_strategy(histogram, L, algorithm)
        np.random.seed(SEED + 1)
        packs = fill_packing_strategy(assignments, sequences, L, pad_id=request["policy"]["pad_id"])
        # Provenance: the same fill, same seed, each sequence's tokens replaced by its document number.
        traced_sequences, _ = create_hist(
            [{"input_ids": [k] * len(d["tokens"]), "loss_mask": [False] * len(d["tokens"])}
             for k, d in enumerate(docs)], L)
        np.random.seed(SEED + 1)
        traced = fill_packing_strategy(assignments, traced_sequences, L, pad_id=request["policy"]["pad_id"])
        rows = []
        for p, t in zip(packs, traced):
            ids = p["input_ids"]
            rows.append({
                "input_ids": [ids],
                "labels": [ids[1:] + [-100]],  # the token each position's (rolled) loss_mask refers to
                "loss_mask": [p["loss_mask"]],
                "cu_seqlens": p["seq_start_id"] + [len(ids)],
                "doc_spans": [_spans(t, p["seq_start_id"], docs)],
            })
        return assign(rows, request)

    return pack


# What the packs say: sequences packed whole (first-fit), boundaries as sequence starts, the loss mask rolled
# per sequence (a sequence's last position, whose next token is the next sequence's first, is never trained),
# no padding, no positions (the kit reads a row without position_ids as counting along the row).
POLICY = {"preset": "megatron-sft-thd", "label_alignment": "pre_shifted", "loss_mask": True,
          "boundary_source": "cu_seqlens", "attention": "doc_causal", "pad_keys": "own_segment",
          "positions": "row_continuous", "pad_positions": "any", "boundary_target": "excluded",
          "row_end_target": "none", "padding": "none", "overflow": "error", "eos_id": None, "bos_id": None,
          "denominator": "global_targets"}

_NOTES = ("NeMo 3.0.0 does not ship GPTSFTPackedDataset.collate_fn (nemo.collections.llm is not in the wheel): the "
          "rows are fill_packing_strategy's packs, before any collate; labels = input_ids moved one slot left "
          "(fill_packing_strategy returns none), loss_mask the library's; cu_seqlens from seq_start_id; no "
          "position_ids and no padding in a pack; no loss reducer")

_PACK_LONGER_THAN_PACK_SIZE = Finding(
    "shape", "allowed",
    "A pack holds up to pack_size + k tokens for k sequences: create_hist counts each sequence as len - 1 "
    "('we want pack size to be the length of the actual input and label, hence minus 1'), so at pack_size 2 "
    "d0=[0] (counted 0) and d1=[0 0] (counted 1) share a pack of 3 tokens. It is the collate (shifting each "
    "sequence by one) that made a pack pack_size long, and NeMo 3.0 does not ship it. Checked without the row "
    "length, the packs hold every other invariant (Hypothesis, pack_size 2/4/8/16, both algorithms).")


def _adapter(algorithm: str) -> Adapter:
    config_id = algorithm.replace("_", "-")
    return Adapter(name=f"nemo/{config_id}", system="NeMo", distribution="nemo-toolkit", written_for=WRITTEN_FOR,
                   configuration=f"create_hist(ds, L); create_packing_strategy(hist, L, {algorithm!r}); "
                                 f"fill_packing_strategy(assignments, sequences, L, pad_id)",
                   policy=POLICY, imports=("nemo.utils.sequence_packing_utils",),
                   make_packer=lambda: packing_packer(algorithm), notes=_NOTES,
                   env={"TQDM_DISABLE": "1"}, findings={"pack": _PACK_LONGER_THAN_PACK_SIZE})


ADAPTERS = (_adapter("first_fit_decreasing"), _adapter("first_fit_shuffle"))

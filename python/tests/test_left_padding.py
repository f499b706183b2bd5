"""Left padding (``"padding": "left"``, DESIGN §3): a consumer that drops the padding mask and runs causal over
the row lets its real queries attend the left-pad keys before them, an attention finding that right padding
cannot show; its twin, causal with the padding mask, passes. The consumers are candidates; the core judges."""

import numpy as np
import pytest

import packoracle


def _causal(row, drop_padding_mask):
    n = len(row["input_ids"])
    mask = np.tril(np.ones((n, n), dtype=np.int8))
    if not drop_padding_mask:
        mask = mask * np.asarray(row["attention_mask"], dtype=np.int8)[None, :]
        np.fill_diagonal(mask, 1)  # a padding query sees itself, as its own run (never compared)
    return mask


def test_a_causal_fallback_attending_left_pad_keys_fails_attention_and_its_twin_passes():
    left = {"preset": "hf-padded", "padding": "left"}
    packoracle.fuzz(None, left, consumer=lambda row, policy: _causal(row, False), cases=100, decoder=False)
    packoracle.fuzz(None, "hf-padded", consumer=lambda row, policy: _causal(row, True), cases=100, decoder=False)
    with pytest.raises(packoracle.Counterexample) as caught:
        packoracle.fuzz(None, left, consumer=lambda row, policy: _causal(row, True), cases=100, decoder=False)
    assert caught.value.invariant == "attention"


# The guard reads a batch without its documents (row_documents.h): under left padding a row's documents start
# where its leading padding ends, read from its padding marks (doc ids below 0) or, without them, from the pad
# ids whose labels are ignored. A correct left-padded batch holds either way; its positions counted over the
# row (not reset per document) are still found.
def _left_padded_rows():
    import sys

    from tests.helpers import CANDIDATES
    sys.path.insert(0, CANDIDATES)
    import reference

    policy = packoracle.Policy({"preset": "reference", "padding": "left"}).to_dict()
    documents = [{"doc_uid": "a", "tokens": [5, 6, 7], "supervised": [1, 1, 1]},
                 {"doc_uid": "b", "tokens": [3, 4], "supervised": [1, 1]},
                 {"doc_uid": "c", "tokens": [2] * 6, "supervised": [1] * 6}]
    rows = reference.pack({"row_length": 8, "policy": policy, "documents": documents, "micro_batch_rows": 2})
    assert [r["input_ids"][:2] for r in rows] == [[0, 0], [0, 0]]  # both rows left-padded
    return {k: np.array([r[k] for r in rows]) for k in ("input_ids", "labels", "position_ids", "doc_ids")}


@pytest.mark.parametrize("fields", ["with doc_ids", "pad ids only"])
def test_the_guard_reads_left_padded_rows_without_their_documents(fields):
    from packoracle import guard

    batch = _left_padded_rows()
    if fields == "pad ids only":
        del batch["doc_ids"]
    left = {"preset": "reference", "padding": "left"}
    verdict = guard.check_step([batch], policy=left, on_violation=lambda e: None)
    assert verdict.ok, verdict.text
    batch["position_ids"] = np.tile(np.arange(8), (2, 1))  # counted over the row, padding included
    verdict = guard.check_step([batch], policy=left, on_violation=lambda e: None)
    assert not verdict.ok
    assert {(v.invariant, v.row) for v in verdict.local[0].violations} == {("positions", 0), ("positions", 1)}

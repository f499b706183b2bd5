"""shift: document (DESIGN §3): each document shifted on its own (torchtitan's HuggingFaceTextDataset since PR
#4075, NeMo's GPTSFTPackedDataset collate): a document of n tokens enters the rows as its inputs tokens[:-1]
with the pre-shifted labels tokens[1:], its last token a label only. A packer that shifts per document holds
under the key and breaks coverage without it (every document's last token is missing); one that places every
token (the row's shift) breaks coverage under the key (a document's last token is no input there)."""

import numpy as np
import pytest

import packoracle
from tests.helpers import small_fuzz
from tests.packers import as_packer, greedy_rows, pack_reference

ROW = {"preset": "reference"}
PER_DOCUMENT = {**ROW, "shift": "document"}
CASES = 200
IGNORE = -100


def pack_per_document(token_lists, row_length, *, supervised=None):
    """Greedy rows of each document's inputs tokens[:-1] (a document of one token has none), labels tokens[1:]
    where supervised, positions restarting at 0 per document; right padding with 0, labels -100 there."""
    # the reference's greedy rows, over the inputs: a document of one token has none and takes no slot
    rows = greedy_rows([list(tokens)[:-1] for tokens in token_lists], row_length)
    shape = (len(rows), row_length)
    batch = {"input_ids": np.zeros(shape, dtype=np.int64), "labels": np.full(shape, IGNORE, dtype=np.int64),
             "position_ids": np.zeros(shape, dtype=np.int64), "doc_ids": np.full(shape, -1, dtype=np.int64)}
    for r, members in enumerate(rows):
        at = 0
        for j, k in enumerate(members):
            tokens = np.asarray(token_lists[k], dtype=np.int64)
            sup = np.asarray(supervised[k] if supervised is not None else [1] * len(tokens), dtype=bool)
            n = len(tokens) - 1
            batch["input_ids"][r, at:at + n] = tokens[:-1]
            batch["labels"][r, at:at + n] = np.where(sup[1:], tokens[1:], IGNORE)
            batch["position_ids"][r, at:at + n] = np.arange(n)
            batch["doc_ids"][r, at:at + n] = j
            at += n
    return batch


def test_per_document_shift_holds_under_the_key():
    result = small_fuzz(as_packer(pack_per_document), PER_DOCUMENT, cases=CASES)
    assert {"coverage", "targets"} <= set(result.checked)


def test_per_document_shift_breaks_coverage_under_the_row_shift():
    with pytest.raises(packoracle.Counterexample) as info:
        small_fuzz(as_packer(pack_per_document), ROW, cases=CASES)
    e = info.value
    assert e.invariant == "coverage", str(e)
    assert "tokens are packed" in str(e)


def test_the_row_shift_breaks_coverage_under_the_key():
    with pytest.raises(packoracle.Counterexample) as info:
        small_fuzz(as_packer(pack_reference), PER_DOCUMENT, cases=CASES)
    e = info.value
    assert e.invariant == "coverage", str(e)
    # the derived spans hold a document's inputs only: its last token is no document token there (the
    # minimal case, d0=[11], has no input at all)
    assert "which is neither a document token" in str(e) or "is a label only, never an input" in str(e), str(e)
    assert e.request["policy"]["shift"] == "document"


def test_the_key_is_left_out_at_its_default_and_contradicts_crossing_keys():
    assert "shift" not in packoracle.Policy(ROW)
    assert packoracle.Policy(PER_DOCUMENT)["shift"] == "document"
    with pytest.raises(ValueError, match="shift: document gives each input the next token of its own document"):
        packoracle.Policy({**PER_DOCUMENT, "label_alignment": "aligned"})
    with pytest.raises(ValueError, match="but boundary_target is included"):
        packoracle.Policy({**PER_DOCUMENT, "boundary_target": "included"})
    with pytest.raises(ValueError, match="shift"):
        packoracle.Policy({**ROW, "shift": "documents"})

"""segment_encodings: rows (DESIGN §3): cu_seqlens, seq_lens and doc_ids that name rows, not documents (TRL's
'wrapped' rows through the padding-free collator: no seq_lengths, so cu_seq_lens and seq_idx make each packed
row one sequence). Under row_causal attention a packer whose doc_ids number rows passes under the key and
breaks segments without it; one whose doc_ids number documents breaks it under the key."""

import numpy as np
import pytest

import packoracle
from tests.helpers import small_fuzz
from tests.packers import as_packer, pack_reference

ROW_CAUSAL = {"preset": "reference", "attention": "row_causal"}
ROW_NAMED = {**ROW_CAUSAL, "segment_encodings": "rows"}
CASES = 200


def pack_row_named(token_lists, row_length, *, supervised=None):
    """pack_reference's rows with doc_ids naming the row: 0 on every token, -1 on the padding."""
    batch = pack_reference(token_lists, row_length, supervised=supervised)
    batch["doc_ids"] = np.where(batch["doc_ids"] >= 0, 0, -1)
    return batch


def test_row_named_doc_ids_hold_under_the_key():
    result = small_fuzz(as_packer(pack_row_named), ROW_NAMED, cases=CASES)
    assert "segments" in result.checked


def test_row_named_doc_ids_break_segments_where_they_should_name_documents():
    with pytest.raises(packoracle.Counterexample) as info:
        small_fuzz(as_packer(pack_row_named), ROW_CAUSAL, cases=CASES)
    assert info.value.invariant == "segments", str(info.value)


def test_document_named_doc_ids_break_segments_under_the_key():
    with pytest.raises(packoracle.Counterexample) as info:
        small_fuzz(as_packer(pack_reference), ROW_NAMED, cases=CASES)
    e = info.value
    assert e.invariant == "segments", str(e)
    assert "under segment_encodings: rows they name the row" in str(e)
    assert e.request["policy"]["segment_encodings"] == "rows"


def test_the_key_is_left_out_at_its_default_and_needs_row_causal_attention():
    assert "segment_encodings" not in packoracle.Policy(ROW_CAUSAL)
    assert packoracle.Policy(ROW_NAMED)["segment_encodings"] == "rows"
    with pytest.raises(ValueError, match="segment_encodings: rows makes each row one sequence"):
        packoracle.Policy({"preset": "reference", "segment_encodings": "rows"})
    with pytest.raises(ValueError, match="boundary_source: cu_seqlens reads document boundaries"):
        packoracle.Policy({**ROW_NAMED, "boundary_source": "cu_seqlens"})

"""efficiency: no_mergeable_rows, a policy's promise of first-fit quality (DESIGN §3, §4): a greedy packer that
opens a new row whenever the current one is full passes while efficiency is only reported, and breaks the
promise; a first-fit packer keeps it."""

import pytest

import packoracle
from tests.helpers import small_fuzz
from tests.packers import as_packer, pack_reference

PROMISED = {"preset": "reference", "efficiency": "no_mergeable_rows"}
CASES = 200


def test_a_next_fit_packer_passes_while_efficiency_is_reported():
    result = small_fuzz(as_packer(pack_reference), "reference", cases=CASES)
    assert "efficiency" not in result.checked


def test_a_next_fit_packer_breaks_the_promise_with_the_two_rows_named():
    with pytest.raises(packoracle.Counterexample) as info:
        small_fuzz(as_packer(pack_reference), PROMISED, cases=CASES)
    e = info.value
    assert e.invariant == "efficiency", str(e)
    assert "could be one row" in str(e) and "efficiency: no_mergeable_rows" in str(e)
    assert e.request["policy"]["efficiency"] == "no_mergeable_rows"
    again = pytest.raises(packoracle.Counterexample, small_fuzz, as_packer(pack_reference), PROMISED,
                          reproduce=e.reproduce)
    assert again.value.invariant == "efficiency"


def test_a_first_fit_packer_keeps_the_promise():
    result = small_fuzz(as_packer(pack_reference, first_fit=True), PROMISED, cases=CASES)
    assert "efficiency" in result.checked


def test_the_promise_is_refused_where_rows_do_not_hold_whole_documents():
    with pytest.raises(ValueError, match="no_mergeable_rows compares rows of whole documents"):
        packoracle.fuzz(as_packer(pack_reference), {"preset": "torchtune-packed", "overflow": "split",
                                                    "row_end_target": "next_in_doc",
                                                    "efficiency": "no_mergeable_rows"}, cases=1)

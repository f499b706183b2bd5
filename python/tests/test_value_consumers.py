"""packoracle.fuzz(value_consumer=...): per-position outputs packed against each document alone, and parameter
gradients packed against the sum over documents alone (DESIGN §12, "Values and gradients"). Each reported
mechanism (value_consumers.py) is caught under its invariant with a small counterexample; its fixed twin passes."""
from __future__ import annotations

import pytest

import packoracle

torch = pytest.importorskip("torch")

from .value_consumers import (CpShardEdgeReset, DocumentNorm, DocumentScan, NanPastLastSeqlen,  # noqa: E402
                              RowNormLeak, ShardEdgeReset, ZeroPastLastSeqlen)

SMALL = dict(max_row_length=16, max_documents=6, cases=150, seed=7)


def _caught(consumer, invariant: str, **extra) -> packoracle.Counterexample:
    with pytest.raises(packoracle.Counterexample) as failure:
        packoracle.fuzz(None, "reference", value_consumer=consumer, **SMALL, **extra)
    found = failure.value
    assert found.invariant == invariant, str(found)
    documents = found.minimal_case["documents"]
    assert 1 <= len(documents) <= 3, str(found)  # shrunk: the neighbour that leaks, or the edge crossed
    return found


def test_a_normalisation_leak_across_documents_is_caught_at_the_value_level():
    found = _caught(RowNormLeak(), "packing_invariance")
    text = str(found)
    assert "packed" in text and "alone in a row of its own" in text and "value_consumer=RowNormLeak" in found.headline
    assert found.drawn  # the row is drawn


def test_centring_per_document_passes():
    result = packoracle.fuzz(None, "reference", value_consumer=DocumentNorm(), **SMALL)
    assert "packing_invariance" in result.checked


def test_a_state_reset_at_a_shard_edge_is_caught():
    found = _caught(ShardEdgeReset(), "packing_invariance")
    assert "output" in str(found)


def test_a_state_reset_at_the_edges_of_the_cp_shards_the_step_deals_is_caught():
    found = _caught(CpShardEdgeReset(), "packing_invariance", step_view=True)
    assert "step_view=True" in found.headline


def test_a_state_carried_across_shard_edges_passes():
    assert "packing_invariance" in packoracle.fuzz(None, "reference", value_consumer=DocumentScan(), **SMALL).checked


def test_a_nan_gradient_row_past_the_last_cu_seqlens_is_caught_under_gradient():
    found = _caught(NanPastLastSeqlen(), "gradient", gradient=True)
    assert "nan packed" in str(found) and "padding" in str(found)


def test_its_fixed_twin_passes_values_and_gradients():
    result = packoracle.fuzz(None, "reference", value_consumer=ZeroPastLastSeqlen(), gradient=True, **SMALL)
    assert {"packing_invariance", "gradient"} <= set(result.checked)


def test_without_gradient_the_nan_row_is_not_looked_at():
    result = packoracle.fuzz(None, "reference", value_consumer=NanPastLastSeqlen(), **SMALL)
    assert "gradient" in result.not_applicable


def test_a_value_consumer_checks_a_packers_rows_too():
    from .packers import as_packer, pack_reference

    result = packoracle.fuzz(as_packer(pack_reference), "reference", value_consumer=DocumentNorm(), **SMALL)
    assert "packing_invariance" in result.checked


def test_a_declared_tolerance_is_used():
    class Noisy(DocumentNorm):
        """Adds 1e-6 packed (a reduction order): inside a tolerance of 1e-5, outside one of 1e-9."""

        def forward(self, microbatch, policy):
            bump = 1e-6 if len(microbatch["rows"][0]["input_ids"]) > 1 and int(
                max(microbatch["rows"][0]["doc_ids"])) > 0 else 0.0
            return [r + bump for r in super().forward(microbatch, policy)]

    packoracle.fuzz(None, "reference", value_consumer=Noisy(), value_tolerance=(1e-5, 0.0), **SMALL)
    with pytest.raises(packoracle.Counterexample):
        packoracle.fuzz(None, "reference", value_consumer=Noisy(), value_tolerance=(1e-9, 0.0), **SMALL)


@pytest.mark.parametrize("answer, words", [
    (lambda mb, p: "text", "per-position values"),
    (lambda mb, p: [[[0.0, 1.0]]] * len(mb["rows"]), "the row has"),  # one slot of values for longer rows
    (lambda mb, p: [], "values for 0 rows"),
])
def test_an_answer_that_is_not_values_fails_the_case(answer, words):
    with pytest.raises(packoracle.Counterexample) as failure:
        packoracle.fuzz(None, "reference", value_consumer=answer, **dict(SMALL, cases=40))
    assert failure.value.invariant == "packing_invariance"
    assert words in str(failure.value)


def test_arguments_are_checked_at_the_door():
    with pytest.raises(TypeError, match="value_tolerance"):
        packoracle.fuzz(None, "reference", value_consumer=DocumentNorm(), value_tolerance=(1e-5,))
    with pytest.raises(TypeError, match="parameters"):
        packoracle.fuzz(None, "reference", value_consumer=lambda mb, p: [], gradient=True)

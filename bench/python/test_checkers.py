"""The baselines really check: each checker accepts the benchmark batch and rejects it with one wrong label and one
wrong position (each alone, and both), naming the invariant; check_batch too, for comparison.

    PYTHONPATH=/work/main/python/src python3 -m pytest bench/python/test_checkers.py
"""

import pytest

import numpy_checker
import pure_checker
from workload import corrupted, make_workload

try:
    import torch  # noqa: F401
    KIND = "torch"
except ImportError:  # the system python3 has no torch: the same batch as numpy arrays
    KIND = "numpy"

REFERENCE = {"preset": "reference", "label_alignment": "pre_shifted", "ignore_index": -100, "loss_mask": False,
             "boundary_source": "spans", "attention": "doc_causal", "pad_keys": "masked", "positions": "doc_reset",
             "position_base": 0, "pad_positions": "any", "split_positions": "continue", "boundary_target": "excluded",
             "row_end_target": "none", "stream_stride": None, "padding": "right", "pad_id": 0, "pad_to": "row_len",
             "overflow": "error", "eos_id": None, "bos_id": None, "denominator": "global_targets",
             "count_basis": "targets"}


@pytest.fixture(scope="module")
def workload():
    return make_workload(KIND)


def _packoracle_check(batch, documents, policy, producer):
    packoracle = pytest.importorskip("packoracle")
    if not hasattr(packoracle._core, "audit_records"):
        pytest.skip("packoracle._core.audit_records is not built yet")
    return [(v.invariant, v.row, v.slot, v.message) for v in
            packoracle.check_batch(batch, documents, policy, producer=producer).violations]


CHECKERS = {"pure": pure_checker.check, "numpy": numpy_checker.check, "check_batch": _packoracle_check}


def test_the_workload_is_what_the_benchmarks_say(workload):
    ids = workload.batch["input_ids"]
    assert tuple(ids.shape) == (8, 8192)
    lengths = [len(t) for t in workload.documents.values()]
    assert min(lengths) >= 20 and max(lengths) <= 2000
    assert sum(lengths) == sum(s["length"] for row in workload.batch["doc_spans"] for s in row)
    assert workload.valid_targets == sum(lengths) - len(lengths)


def test_the_reference_policy_is_the_kits():
    packoracle = pytest.importorskip("packoracle")
    assert packoracle.Policy("reference").to_dict() == REFERENCE


@pytest.mark.parametrize("name", CHECKERS)
def test_a_correct_batch_is_accepted(name, workload):
    assert CHECKERS[name](workload.batch, workload.documents, REFERENCE, workload.producer) == []


@pytest.mark.parametrize("label,position,want", [(True, False, {"targets"}), (False, True, {"positions", "segments"}),
                                                 (True, True, {"targets", "positions", "segments"})])
@pytest.mark.parametrize("name", CHECKERS)
def test_a_wrong_label_and_a_wrong_position_are_rejected(name, label, position, want, workload):
    bad = corrupted(workload, label=label, position=position)
    found = CHECKERS[name](bad.batch, bad.documents, REFERENCE, bad.producer)
    assert found, f"{name} accepted a corrupted batch"
    invariants = {v[0] for v in found}
    # a wrong position breaks `positions`; a reset that is not one may also be reported under `segments`
    assert ("targets" in invariants) == label
    assert ("positions" in invariants) == position
    assert invariants <= want
    rows = {v[1] for v in found if v[0] in ("targets", "positions")}
    assert rows == ({3} if label else set()) | ({5} if position else set())


@pytest.mark.parametrize("name", ["pure", "numpy"])
def test_a_wrong_denominator_and_a_missing_document_are_rejected(name, workload):
    den = workload.valid_targets + 8  # rows x slots style: a count that is not the valid targets
    producer = dict(workload.producer, denominator=den, loss=workload.producer["loss_sum"] / den)
    assert {v[0] for v in CHECKERS[name](workload.batch, workload.documents, REFERENCE, producer)} == {"denominator"}
    docs = dict(workload.documents, extra=[5, 6, 7])
    assert {v[0] for v in CHECKERS[name](workload.batch, docs, REFERENCE, workload.producer)} == {"coverage"}

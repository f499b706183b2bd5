"""packoracle.which_policy: a packer fuzzed under every preset of the core; which hold, and for the nearest one
broken, the keys that differ and its minimal case (issue 27 item 3)."""

import numpy as np
import pytest

import packoracle
from packoracle import _core
from tests.packers import as_budget_packer, as_packer, pack_hf_flatten, pack_reference

CASES = 100


def test_the_reference_packer_holds_under_reference_and_says_what_hf_flatten_wants():
    fit = packoracle.which_policy(as_packer(pack_reference), cases=CASES)
    assert "reference" in fit.holds
    assert set(fit.holds) | set(fit.broken) == {p["name"] for p in _core.presets()}
    assert fit.nearest in fit.broken and fit.compared_with in fit.holds
    keys = {k for k, _, _ in fit.differing}
    assert keys and "preset" not in keys
    nearest = packoracle.Policy(fit.nearest).to_dict()
    held = packoracle.Policy(fit.compared_with).to_dict()
    assert all(nearest[k] == a and held[k] == b and a != b for k, a, b in fit.differing)
    # no preset that holds is nearer to a broken one than the one named
    assert all(sum(nearest.get(k) != packoracle.Policy(h).to_dict().get(k) for k in nearest if k != "preset")
               >= len(fit.differing) for h in fit.holds)
    assert isinstance(fit.counterexample, packoracle.Counterexample)
    text = str(fit)
    assert "holds under: " in text and f"nearest broken: {fit.nearest} (against {fit.compared_with})" in text
    assert fit.counterexample.reproduce in text


def test_a_flattening_collator_holds_under_hf_flatten():
    fit = packoracle.which_policy(as_budget_packer(pack_hf_flatten), cases=CASES)
    assert "hf-flatten" in fit.holds, str(fit)


def test_a_packer_that_always_fails_holds_under_none():
    def broken(request):
        raise RuntimeError("no")
    fit = packoracle.which_policy(broken, cases=10)
    assert fit.holds == () and fit.nearest in fit.broken and fit.compared_with is None and fit.differing == ()
    assert "holds under: none" in str(fit)


@pytest.mark.parametrize("call, error, words", [
    (lambda: packoracle.which_policy(None), TypeError, ["which_policy", "packer", "NoneType"]),
    (lambda: packoracle.which_policy(as_packer(pack_reference), cases=0), ValueError, ["which_policy", "cases", "0"]),
    (lambda: packoracle.which_policy(as_packer(pack_reference), reproduce="v1:x"), TypeError,
     ["which_policy", "reproduce"]),
])
def test_bad_arguments_name_themselves(call, error, words):
    with pytest.raises(error) as info:
        call()
    assert all(w in str(info.value) for w in words), str(info.value)


DOCUMENTS = {"a": [11, 12, 13], "b": [21, 22, 23, 24, 25, 26]}


def _flattened(positions):
    return {"input_ids": np.array([[11, 12, 13, 21, 22, 23, 24, 25, 26]]),
            "labels": np.array([[-100, 12, 13, -100, 22, 23, 24, 25, 26]]),
            "position_ids": np.array([positions]), "cu_seq_lens_q": np.array([0, 3, 9], dtype=np.int32)}


def test_a_batch_from_the_flattening_collator_holds_under_hf_flatten_and_names_the_nearest_other():
    fit = packoracle.which_policy_of_batch(_flattened([0, 1, 2, 0, 1, 2, 3, 4, 5]), DOCUMENTS)
    assert "hf-flatten" in fit.holds and "reference" in fit.broken, str(fit)
    assert all(packoracle.check_batch(_flattened([0, 1, 2, 0, 1, 2, 3, 4, 5]), DOCUMENTS, p).ok for p in fit.holds)
    assert fit.nearest in fit.broken and fit.compared_with in fit.holds and fit.differing
    assert fit.report is not None and not fit.report.ok and fit.counterexample is None
    assert str(fit).startswith("packoracle.which_policy: one batch under each of")


def test_a_batch_no_preset_accepts_holds_under_none_and_shows_the_least_broken():
    fit = packoracle.which_policy_of_batch(_flattened(list(range(9))), DOCUMENTS)  # positions never reset
    assert fit.holds == () and fit.compared_with is None and fit.nearest in fit.broken
    fewest = min(len(packoracle.check_batch(_flattened(list(range(9))), DOCUMENTS, p).violations)
                 for p in fit.broken if p != fit.nearest and fit.report is not None)
    assert fit.report is not None and len(fit.report.violations) <= fewest
    assert "holds under: none" in str(fit)


@pytest.mark.parametrize("call, error, words", [
    (lambda: packoracle.which_policy_of_batch([1, 2], DOCUMENTS), TypeError, ["which_policy_of_batch", "batch", "list"]),
    (lambda: packoracle.which_policy_of_batch(_flattened(list(range(9))), DOCUMENTS, policy="reference"), TypeError,
     ["which_policy_of_batch", "policy"]),
])
def test_bad_batch_arguments_name_themselves(call, error, words):
    with pytest.raises(error) as info:
        call()
    assert all(w in str(info.value) for w in words), str(info.value)

"""packoracle.which_policy: a packer fuzzed under every preset of the core; which hold, and for the nearest one
broken, the keys that differ and its minimal case (issue 27 item 3)."""

import numpy as np
import pytest

import packoracle
from packoracle import _core
from tests.packers import as_budget_packer, as_packer, pack_hf_flatten, pack_reference
from tests.user_packers import USER_PACKERS

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
    fit = packoracle.which_policy_of_batch(_flattened(list(range(9))), DOCUMENTS,  # positions never reset
                                           search=False)
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


# ---- the search: a policy for a packer no preset fits (issue 44 item 1) ------------------------------------

def _assert_changed_from_its_preset(fit):
    defaults = {d["key"]: d["default"] for d in _core.policy_key_domains()}
    preset = {**defaults, **packoracle.Policy(fit.policy["preset"]).to_dict()}
    assert fit.changed and all(preset[k] == a and fit.policy[k] == b != a for k, a, b in fit.changed), fit
    assert set(fit.policy) == {"preset"} | {k for k, _, _ in fit.changed}


@pytest.mark.parametrize("name", sorted(USER_PACKERS))
def test_every_user_packer_gets_a_policy_it_holds_under(name):
    packer, options = USER_PACKERS[name]
    fit = packoracle.which_policy(packer, cases=CASES, **options)
    assert fit.found and fit.closest is None, str(fit)
    assert repr(fit.policy) in str(fit)  # printed as the dict a user pastes
    if fit.holds:
        assert fit.policy == {"preset": fit.holds[0]} and fit.changed == ()
    else:
        _assert_changed_from_its_preset(fit)
    # confirmed apart from the search: other cases, another seed
    packoracle.fuzz(packer, fit.policy, cases=2 * CASES, seed=7, **options)


def test_the_issues_greedy_padded_packer_is_one_key_from_reference():
    packer, options = USER_PACKERS["greedy_padded_pad_zero"]
    fit = packoracle.which_policy(packer, cases=CASES, **options)
    assert fit.holds == () and fit.policy == {"preset": "reference", "label_alignment": "aligned"}, str(fit)
    assert "label_alignment: reference says 'pre_shifted', the packer does 'aligned'" in str(fit)


def test_a_collator_padding_to_the_longest_row_is_found_with_pad_to_longest():
    """pad_to: longest is among the values the search walks (the core's key table): a collator that pads every
    row to the batch's longest, not to L, holds under no preset, and the policy found pads to the longest
    (from trl-padding-free at this seed: padding right, its pad id, pad_to longest). Before the value the
    search had only row_len and a multiple_of:k read off the widths where their gcd is above 1."""
    packer, options = USER_PACKERS["padded_sft_longest"]
    fit = packoracle.which_policy(packer, cases=CASES, **options)
    assert fit.holds == () and fit.found and fit.policy["pad_to"] == "longest", str(fit)
    assert ("pad_to", "row_len", "longest") in fit.changed, str(fit)


def test_without_search_nothing_is_found():
    packer, options = USER_PACKERS["greedy_padded_pad_zero"]
    fit = packoracle.which_policy(packer, cases=20, search=False, **options)
    assert fit.policy is None and fit.closest is None and not fit.found and fit.changed == ()


def test_a_packer_no_policy_fits_gets_the_closest_and_what_it_still_breaks():
    def drops_the_last_token(request):  # no policy says a document loses its last token
        batches = USER_PACKERS["flatten_with_cu_seqlens"][0](request)
        for batch in batches:
            batch["labels"][0, -1] = -100
        return batches
    fit = packoracle.which_policy(drops_the_last_token, cases=CASES)
    assert not fit.found and fit.policy is None and fit.closest is not None, str(fit)
    assert isinstance(fit.counterexample, packoracle.Counterexample)
    assert fit.counterexample.invariant == "targets"
    assert f"closest found, still broken" in str(fit) and repr(fit.closest) in str(fit)


def test_a_batch_no_preset_accepts_gets_the_policy_the_search_finds():
    batch = _flattened(list(range(9)))  # positions never reset
    fit = packoracle.which_policy_of_batch(batch, DOCUMENTS)
    assert fit.holds == () and fit.policy == {"preset": "hf-flatten", "positions": "row_continuous"}, str(fit)
    assert packoracle.check_batch(batch, DOCUMENTS, fit.policy).ok
    assert fit.report is not None and fit.nearest == "hf-flatten" and not fit.report.ok


def _refusal(policy):
    try:
        _core.resolve_policy(policy)
        return None
    except ValueError as e:
        return str(e)


def test_policy_key_domains_are_the_keys_and_values_the_core_resolves():
    """The search walks _core.policy_key_domains(): its keys are the resolved policy's, every preset's value
    of a closed key is among its values, and every value listed is a value of that key (the core may still
    find it contradicts other keys, never that it is not allowed)."""
    domains = {d["key"]: d for d in _core.policy_key_domains()}
    presets = [p["name"] for p in _core.presets()]
    assert [k for k, d in domains.items() if not d["after_version_one"]] == list(_core.resolve_policy("reference"))
    for key, domain in domains.items():
        if key == "preset":
            continue
        if not domain["open"]:
            assert all(_core.resolve_policy(p).get(key, domain["default"]) in domain["values"] for p in presets)
        for value in domain["values"]:
            refusal = _refusal({"preset": "reference", key: value})
            assert refusal is None or "contradictory policy" in refusal, (key, value, refusal)
        assert "is not allowed" in _refusal({key: "no such value"}) and domain["takes"] in _refusal(
            {key: "no such value"})

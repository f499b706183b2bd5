"""truncate_to: pad_multiple (DESIGN §3): under overflow: truncate with rows padded to a multiple of k, a
truncated document keeps floor(L/k)*k tokens, the most such a row holds (TRL pack_dataset with seq_length =
L//k*k). A packer that cuts there passes under the key and breaks coverage without it; one that cuts a
multiple short breaks it under the key."""

import pytest

import packoracle
from tests.helpers import small_fuzz
from tests.packers import DocumentTooLong, as_packer, pack_reference

K = 4
TRUNCATE = {"preset": "reference", "overflow": "truncate", "pad_to": f"multiple_of:{K}"}
AT_THE_MULTIPLE = {**TRUNCATE, "truncate_to": "pad_multiple"}
CASES = 200


def pack_cut(token_lists, row_length, *, supervised=None, keep=lambda L: L // K * K):
    """Every document cut after keep(L) tokens, then packed in order into rows of floor(L/k)*k slots (a multiple
    of k, at most L); no room at all (k > L) is a refusal."""
    capacity = row_length // K * K
    if capacity == 0 and any(token_lists):
        raise DocumentTooLong(f"rows padded to a multiple of {K} hold no token in {row_length} slots")
    n = keep(row_length)
    cut = [list(t)[:n] for t in token_lists]
    mask = [list(s)[:n] for s in supervised] if supervised is not None else None
    return pack_reference(cut, max(capacity, 1), supervised=mask)


def test_truncation_at_the_multiple_holds_under_the_key():
    result = small_fuzz(as_packer(pack_cut), AT_THE_MULTIPLE, cases=CASES)
    assert "coverage" in result.checked


def test_truncation_at_the_multiple_breaks_coverage_under_row_len():
    with pytest.raises(packoracle.Counterexample) as info:
        small_fuzz(as_packer(pack_cut), TRUNCATE, cases=CASES)
    assert info.value.invariant == "coverage", str(info.value)
    assert "tokens are packed" in str(info.value)


def test_a_cut_one_multiple_short_breaks_coverage_under_the_key():
    short = as_packer(pack_cut, keep=lambda L: (L - 1) // K * K)
    with pytest.raises(packoracle.Counterexample) as info:
        small_fuzz(short, AT_THE_MULTIPLE, cases=CASES)
    e = info.value
    assert e.invariant == "coverage", str(e)
    assert e.request["policy"]["truncate_to"] == "pad_multiple"


def test_the_key_is_left_out_at_its_default_and_refused_without_a_multiple():
    assert "truncate_to" not in packoracle.Policy(TRUNCATE)
    assert packoracle.Policy(AT_THE_MULTIPLE)["truncate_to"] == "pad_multiple"
    with pytest.raises(ValueError, match="truncate_to: pad_multiple keeps floor"):
        packoracle.Policy({"preset": "reference", "overflow": "truncate", "truncate_to": "pad_multiple"})
    with pytest.raises(ValueError, match="overflow is error"):
        packoracle.Policy({**AT_THE_MULTIPLE, "overflow": "error"})

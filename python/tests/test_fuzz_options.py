"""packoracle.fuzz hands its run options to the core as one dict (_core.fuzz's `options`), read by one table in
the binding (python/binding/fuzz.cc kFuzzKeywords): the dict holds every keyword the table takes, each a keyword
of packoracle.fuzz's own signature, and the table refuses a key it does not hold."""

from __future__ import annotations

import inspect

import pytest

import packoracle
from packoracle import _core, _fuzz
from packoracle.dump import make_policy


def _identity_packer(request):
    raise packoracle.Refuse("never called")


def test_fuzz_hands_the_core_every_option_of_the_table_under_its_keyword(monkeypatch):
    seen = {}

    def capture(name, packer, reducer, consumer, policy, options, microbatch_consumer=False):
        seen.update(options)
        raise RuntimeError("stop")

    monkeypatch.setattr(_fuzz._core, "fuzz", capture)
    with pytest.raises(RuntimeError, match="stop"):
        packoracle.fuzz(_identity_packer, "reference", cases=3, seed=5, max_row_length=16, max_documents=4,
                        decoder=False, sft_masks=False, stats=True)
    assert sorted(seen) == sorted(_core.fuzz_keywords())
    assert (seen["cases"], seen["seed"], seen["max_row_length"], seen["max_documents"]) == (3, 5, 16, 4)
    assert (seen["decoder"], seen["sft_masks"], seen["stats"]) == (False, False, True)
    keywords = inspect.signature(packoracle.fuzz).parameters
    assert [k for k in _core.fuzz_keywords() if k not in keywords and k != "headline"] == []


def test_the_core_sets_each_option_it_is_given():
    # A reproduce string of another shape is refused by the run, naming it: the option reached FuzzOptions.
    with pytest.raises(ValueError, match="reproduce"):
        _core.fuzz("x", _identity_packer, None, None, make_policy("reference"), {"reproduce": "bogus"})
    # cases=0 is out of CheckFuzzOptions' range: the command line's message.
    with pytest.raises(ValueError, match="cases"):
        _core.fuzz("x", _identity_packer, None, None, make_policy("reference"), {"cases": 0})


def test_an_option_the_table_does_not_hold_is_refused():
    with pytest.raises(ValueError, match="unknown option 'max_rows'"):
        _core.fuzz("x", _identity_packer, None, None, make_policy("reference"), {"max_rows": 3})
    with pytest.raises(ValueError, match="option 'seed' cannot take str"):
        _core.fuzz("x", _identity_packer, None, None, make_policy("reference"), {"seed": "5"})

"""A selection inside the objective (``fuzz(reducer=..., select_top_fraction=q)``): the reducer gets the kit's score
of every slot's target and the rule, and the core checks its totals against the objective over the targets the rule
selects within each optimizer step (oracle/selection.h). A threshold taken per micro-batch (the known RL bug) is
caught; its twin, selecting over the optimizer step, passes, in-process and over the exec protocol."""
import os
import shlex
import sys

import pytest

import packoracle

from .selection_reducers import (reduce_token_mean, reduce_top_fraction_per_microbatch,
                                 reduce_top_fraction_per_step)

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "src")
SMALL = dict(cases=200, decoder=False, max_row_length=16, max_documents=8)


def _served(function):
    """The command that serves selection_reducers.<function> as a reducer in a fresh interpreter."""
    return (f"env PYTHONPATH={shlex.quote(SRC + os.pathsep + HERE)} {shlex.quote(sys.executable)} "
            f"-m packoracle.exec_server --reducer selection_reducers:{function}")


def test_a_threshold_taken_per_microbatch_is_caught_split_dependent():
    with pytest.raises(packoracle.Counterexample) as caught:
        packoracle.fuzz(None, "reference", reducer=reduce_top_fraction_per_microbatch, select_top_fraction=0.5,
                        **SMALL)
    text = str(caught.value)
    # Minimal: two one-target micro-batches. The step keeps ⌈2/2⌉ = 1 target, each micro-batch ⌈1/2⌉ = 1 of its own.
    assert caught.value.invariant == "denominator", text
    assert "micro-batch 0: divided by 2, but its global has 1 valid targets" in text, text
    assert "the declared selection keeps 1 of the step's 2 valid targets" in text, text
    assert "select_top_fraction=0.5" in text, "the replay line repeats the selection"
    again = pytest.raises(packoracle.Counterexample, packoracle.fuzz, None, "reference",
                          reducer=reduce_top_fraction_per_microbatch, select_top_fraction=0.5,
                          reproduce=caught.value.reproduce, **dict(SMALL, cases=None))
    assert again.value.invariant == "denominator"


def test_its_twin_selecting_over_the_optimizer_step_passes_with_and_without_a_schedule():
    seen = []

    def recording(request):
        seen.append(request["selection"])
        return reduce_top_fraction_per_step(request)
    result = packoracle.fuzz(None, "reference", reducer=recording, select_top_fraction=0.2, **SMALL)
    assert "loss" in result.checked
    assert seen and all(s == {"top_fraction": 0.2, "scope": "optimizer_step"} for s in seen)
    packoracle.fuzz(None, "reference", reducer=reduce_top_fraction_per_step, select_top_fraction=0.5,
                    optimizer_steps=2, **SMALL)


def test_without_a_selection_the_request_is_unchanged_and_a_plain_reducer_passes():
    def without_selection_keys(request):
        assert "selection" not in request and "slot_scores" not in request
        return reduce_token_mean(request)
    packoracle.fuzz(None, "reference", reducer=without_selection_keys, **SMALL)
    with pytest.raises(packoracle.Counterexample):  # the same reducer under a selection counts every target
        packoracle.fuzz(None, "reference", reducer=reduce_token_mean, select_top_fraction=0.5, **SMALL)


def test_over_the_exec_protocol_the_scores_travel_and_the_same_verdicts_come():
    packoracle.fuzz(None, "reference", exec_reducer=_served("reduce_top_fraction_per_step"),
                    select_top_fraction=0.5, **dict(SMALL, cases=64))
    with pytest.raises(packoracle.Counterexample) as caught:
        packoracle.fuzz(None, "reference", exec_reducer=_served("reduce_top_fraction_per_microbatch"),
                        select_top_fraction=0.5, **dict(SMALL, cases=64))
    assert caught.value.invariant == "denominator", str(caught.value)


@pytest.mark.parametrize("value, error", [(0, ValueError), (1.5, ValueError), (-0.2, ValueError),
                                          (True, TypeError), ("0.2", TypeError)])
def test_a_fraction_outside_its_range_is_refused_naming_it(value, error):
    with pytest.raises(error, match="select_top_fraction"):
        packoracle.fuzz(None, "reference", reducer=reduce_token_mean, select_top_fraction=value, cases=1)


def test_a_selection_needs_a_reducer():
    with pytest.raises(TypeError, match="select_top_fraction"):
        packoracle.fuzz(lambda r: [], "reference", select_top_fraction=0.5, cases=1)


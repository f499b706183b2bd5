"""A reducer's schedule (``fuzz(reducer=..., optimizer_steps=K)``): each case's step is handed as one generation
batch feeding K optimizer steps (GRPO/PPO steps_per_generation > gradient accumulation), and the core checks every
optimizer step against the declared objective over that step alone (oracle/denominator.h OptimizerStepOf).
Nothing here re-derives a rule: the reducers are candidates, the core judges them."""

import numpy as np
import pytest

import packoracle


def _counts_and_sums(request):
    """Per micro-batch: (valid targets, loss sum), for the reference preset (pre_shifted, no loss mask)."""
    out = []
    for m, mb in enumerate(request["microbatches"]):
        n, s = 0, 0.0
        for r, row in enumerate(mb["rows"]):
            valid = np.asarray(row["labels"]) != request["policy"]["ignore_index"]
            n += int(valid.sum())
            s += float(np.asarray(request["slot_losses"][m][r], dtype=float)[valid].sum())
        out.append((n, s))
    return out


def _reduce(request, step_of):
    per = _counts_and_sums(request)
    steps = [step_of(request, mb) for mb in request["microbatches"]]
    out = []
    for m, (_, s) in enumerate(per):
        n = sum(c for k, (c, _) in enumerate(per) if steps[k] == steps[m])
        out.append({"loss_sum": s, "denominator": n, "denominator_scope": "global", "loss": s / n if n else 0.0})
    return out


def reduce_over_generation_batch(request):
    """BUG (GRPO-style): the count taken once over the whole generation batch, reused by every optimizer step."""
    return _reduce(request, lambda request, mb: 0)


def reduce_per_optimizer_step(request):
    """Right: each micro-batch divided by the targets of the optimizer step it feeds."""
    return _reduce(request, lambda request, mb: mb["micro_step"] // request["grad_accum_steps"])


def test_a_reducer_normalising_over_the_generation_batch_fails_denominator():
    with pytest.raises(packoracle.Counterexample) as caught:
        packoracle.fuzz(None, "reference", reducer=reduce_over_generation_batch, optimizer_steps=2, cases=200,
                        decoder=False)
    assert caught.value.invariant == "denominator"
    assert "its generation batch feeds" in str(caught.value)


def test_its_fixed_twin_passes_and_sees_the_schedule():
    seen = set()

    def recording(request):
        seen.add((request["optimizer_steps"], request["grad_accum_steps"]))
        return reduce_per_optimizer_step(request)
    packoracle.fuzz(None, "reference", reducer=recording, optimizer_steps=2, cases=200, decoder=False)
    assert any(k == 2 for k, _ in seen)


def test_without_a_schedule_the_generation_batch_is_the_step():
    packoracle.fuzz(None, "reference", reducer=reduce_over_generation_batch, cases=100, decoder=False)


def test_a_schedule_needs_a_reducer():
    with pytest.raises(TypeError, match="optimizer_steps"):
        packoracle.fuzz(lambda r: [], "reference", optimizer_steps=2, cases=1)

"""The `gradient` invariant (DESIGN §4) in-process: with ``fuzz(..., gradient=True)`` a reducer gets its per-target
losses as torch leaf tensors and returns the tensor it would call backward() on; the kit backpropagates and the
core checks that every target's loss gets the gradient the declared objective gives it (m / Σm over the step
under global_targets). A reducer whose value is right and whose gradient is not, or that backpropagates another
value than it reports, fails under `gradient`; one without tensors has `gradient` not checked."""

import pytest

import packoracle
from tests.helpers import small_fuzz

torch = pytest.importorskip("torch")

CASES = 60


def _masks(request):
    """Per micro-batch, per row: a float64 tensor, 1 where the slot is a target (pre-shifted labels)."""
    ignore = request["policy"]["ignore_index"]
    return [[torch.tensor([1.0 if label != ignore else 0.0 for label in row["labels"]], dtype=torch.float64)
             for row in mb["rows"]] for mb in request["microbatches"]]


def _sums(request):
    """Per micro-batch: (count of targets, Σ m·ℓ as a tensor on the leaves)."""
    out = []
    for leaves, masks in zip(request["slot_losses"], _masks(request)):
        total = torch.zeros((), dtype=torch.float64)
        for leaf, mask in zip(leaves, masks):
            total = total + (torch.as_tensor(leaf, dtype=torch.float64) * mask).sum()  # a list without gradient=True
        out.append((int(sum(float(m.sum()) for m in masks)), total))
    return out


def torch_token_mean(request):
    """Correct (transformers ≥ 4.46, num_items_in_batch): each micro-batch's Σmℓ over the step's count."""
    per = _sums(request)
    n = sum(c for c, _ in per)
    return [{"loss_sum": s, "denominator": n, "denominator_scope": "global", "loss": s / max(n, 1)} for _, s in per]


def torch_microbatch_mean(request):
    """Correct under a declared microbatch_mean (Megatron): each micro-batch divides by its own count."""
    return [{"loss_sum": s, "denominator": c, "denominator_scope": "microbatch", "loss": s / max(c, 1)}
            for c, s in _sums(request)]


def detached_backward(request):
    """BUG: the value is right, the tensor handed to backward() is detached from the losses."""
    return [dict(t, backward=t["loss"].detach()) for t in torch_token_mean(request)]


class _SumIgnoringGradOutput(torch.autograd.Function):
    """Σ m·ℓ whose backward ignores grad_output, as Liger-Kernel's fused linear cross entropy did under
    reduction="none" (#968): the gradient is m whatever the loss is later scaled by."""

    @staticmethod
    def forward(ctx, losses, mask):
        ctx.save_for_backward(mask)
        return (losses * mask).sum()

    @staticmethod
    def backward(ctx, grad_output):
        (mask,) = ctx.saved_tensors
        return mask, None


def grad_output_ignored(request):
    """BUG (Liger-Kernel #968): the reported loss is right, its gradient is not scaled by 1/N."""
    per = []
    for leaves, masks in zip(request["slot_losses"], _masks(request)):
        s = torch.zeros((), dtype=torch.float64)
        for leaf, mask in zip(leaves, masks):
            s = s + _SumIgnoringGradOutput.apply(leaf, mask)
        per.append((int(sum(float(m.sum()) for m in masks)), s))
    n = sum(c for c, _ in per)
    return [{"loss_sum": s, "denominator": n, "denominator_scope": "global", "loss": s / max(n, 1)} for _, s in per]


def backpropagates_mean_of_means(request):
    """BUG (transformers before 4.46 behind a correct log): reports the token mean, backpropagates each
    micro-batch's own mean divided by the accumulation steps."""
    steps = request["grad_accum_steps"] * request["dp_world_size"]
    out = []
    for t, (c, s) in zip(torch_token_mean(request), _sums(request)):
        out.append(dict(t, backward=s / max(c, 1) / steps))
    return out


def normalised_after_backward(request):
    """BUG (torchtitan PR #4194, pipeline parallelism): logs Σmℓ / N, backpropagates Σmℓ (normalised after
    backward)."""
    return [dict(t, backward=t["loss_sum"]) for t in torch_token_mean(request)]


def floats_only(request):
    """Correct, but hands back plain numbers: nothing to backpropagate."""
    return [{k: (v.item() if torch.is_tensor(v) else v) for k, v in t.items()} for t in torch_token_mean(request)]


def test_a_correct_torch_reducer_passes_and_has_its_gradient_checked():
    result = small_fuzz(None, "reference", reducer=torch_token_mean, cases=CASES, gradient=True)
    assert {"loss", "denominator", "gradient"} <= set(result.checked)
    assert "gradient" not in result.not_applicable


def torch_rank_mean(request):
    """Correct under a declared rank_mean (DDP averaging per-rank token means): each micro-batch divides by its
    rank's count, scope "step"."""
    per = _sums(request)
    ranks = {}
    for mb, (c, _) in zip(request["microbatches"], per):
        ranks[mb["rank"]] = ranks.get(mb["rank"], 0) + c
    return [{"loss_sum": s, "denominator": ranks[mb["rank"]], "denominator_scope": "step",
             "loss": s / max(ranks[mb["rank"]], 1)} for mb, (_, s) in zip(request["microbatches"], per)]


@pytest.mark.parametrize("formula, reducer", [("microbatch_mean", torch_microbatch_mean),
                                              ("rank_mean", torch_rank_mean)])
def test_a_correct_reducer_under_another_declared_formula_passes(formula, reducer):
    policy = {"preset": "reference", "denominator": formula}
    result = small_fuzz(None, policy, reducer=reducer, cases=CASES, gradient=True)
    assert "gradient" in result.checked


@pytest.mark.parametrize("reducer", [detached_backward, grad_output_ignored, backpropagates_mean_of_means,
                                     normalised_after_backward])
def test_a_right_value_with_a_wrong_gradient_is_caught_under_gradient(reducer):
    with pytest.raises(packoracle.Counterexample) as info:
        small_fuzz(None, "reference", reducer=reducer, cases=CASES, gradient=True)
    e = info.value
    assert e.invariant == "gradient", str(e)
    text = str(e)
    assert "m / Σm over the step" in text, text
    assert "gradient=True" in e.replay
    # The replay line replays it.
    with pytest.raises(packoracle.Counterexample) as again:
        small_fuzz(None, "reference", reducer=reducer, gradient=True, reproduce=e.reproduce)
    assert again.value.invariant == "gradient"


def torch_mean_of_means(request):
    """BUG (transformers before 4.46), honest about it: each micro-batch's own mean, scope "microbatch", under a
    declared global_targets. It backpropagates what it reports: its loss is wrong, and that is what it is told."""
    return [{"loss_sum": s, "denominator": c, "denominator_scope": "microbatch", "loss": s / max(c, 1)}
            for c, s in _sums(request)]


def test_a_wrong_loss_backpropagated_as_reported_is_caught_under_loss():
    with pytest.raises(packoracle.Counterexample) as info:
        small_fuzz(None, "reference", reducer=torch_mean_of_means, cases=CASES, gradient=True)
    assert info.value.invariant == "loss", str(info.value)


def test_the_detached_backward_is_reported_with_its_slot_and_values():
    with pytest.raises(packoracle.Counterexample) as info:
        small_fuzz(None, "reference", reducer=detached_backward, cases=CASES, gradient=True)
    text = str(info.value)
    assert "gives this target's loss the gradient 0, but m / Σm over the step is" in text, text


def test_a_reducer_without_tensors_has_gradient_not_checked():
    result = small_fuzz(None, "reference", reducer=floats_only, cases=CASES, gradient=True)
    assert "gradient" in result.not_applicable
    assert "gradient" not in result.checked
    assert "loss" in result.checked


def test_without_gradient_true_the_gradient_is_not_checked():
    result = small_fuzz(None, "reference", reducer=torch_token_mean, cases=CASES)
    assert "gradient" in result.not_applicable
    assert "loss" in result.checked


def test_a_backward_that_is_not_a_scalar_tensor_fails_the_case():
    def reducer(request):
        return [dict(t, backward=1.5) for t in torch_token_mean(request)]
    with pytest.raises(packoracle.Counterexample) as info:
        small_fuzz(None, "reference", reducer=reducer, cases=CASES, gradient=True)
    assert "must be a 0-dim torch tensor" in str(info.value)


def test_gradient_arguments_are_checked_at_the_door():
    with pytest.raises(TypeError, match="gradient must be True or False"):
        small_fuzz(None, "reference", reducer=torch_token_mean, gradient="yes")
    with pytest.raises(TypeError, match="give a reducer"):
        small_fuzz(lambda r: [], "reference", gradient=True)

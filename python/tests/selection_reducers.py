"""Loss reducers under a declared selection (``fuzz(reducer=..., select_top_fraction=q)``), for the reference preset
(pre_shifted labels, no loss mask): each keeps the top fraction q of targets by the kit's ``slot_scores``. They are
candidates, judged by the core; none of them states the rule (oracle/selection.h does). A module of its own, so
that packoracle.exec_server can serve them in another interpreter."""

import math

import numpy as np


def _targets(request):
    """Every valid target as (score, micro-batch, loss), and each micro-batch's optimizer step."""
    ignore = request["policy"]["ignore_index"]
    targets = []
    for m, mb in enumerate(request["microbatches"]):
        for r, row in enumerate(mb["rows"]):
            valid = np.asarray(row["labels"]) != ignore
            scores = np.asarray(request["slot_scores"][m][r], dtype=float)
            losses = np.asarray(request["slot_losses"][m][r], dtype=float)
            targets += [(float(scores[i]), m, float(losses[i])) for i in np.flatnonzero(valid)]
    steps = [mb["micro_step"] // request["grad_accum_steps"] for mb in request["microbatches"]]
    return targets, steps


def _reduce(request, group_of):
    """A global token mean over the targets kept: in each group, the ceil(q·n) with the highest scores."""
    q = request["selection"]["top_fraction"]
    targets, steps = _targets(request)
    groups = {}
    for t in targets:
        groups.setdefault(group_of(t[1], steps), []).append(t)
    n = len(steps)
    sums, kept = [0.0] * n, [0] * n
    for group in groups.values():
        group.sort(key=lambda t: -t[0])
        for _, m, loss in group[:math.ceil(q * len(group))]:
            sums[m] += loss
            kept[m] += 1
    out = []
    for m in range(n):
        count = sum(kept[k] for k in range(n) if steps[k] == steps[m])  # the optimizer step's selected targets
        out.append({"loss_sum": sums[m], "denominator": count, "denominator_scope": "global",
                    "loss": sums[m] / count if count else 0.0})
    return out


def reduce_top_fraction_per_microbatch(request):
    """BUG: the threshold taken per micro-batch (each keeps ceil(q·n_m) of its own targets): split-dependent."""
    return _reduce(request, lambda m, steps: ("microbatch", m))


def reduce_top_fraction_per_step(request):
    """Right: the threshold taken over the optimizer step, all its micro-batches' targets together."""
    return _reduce(request, lambda m, steps: ("step", steps[m]))


def reduce_token_mean(request):
    """A plain global token mean that never reads a selection: right without one."""
    ignore = request["policy"]["ignore_index"]
    per = []
    for m, mb in enumerate(request["microbatches"]):
        n, s = 0, 0.0
        for r, row in enumerate(mb["rows"]):
            valid = np.asarray(row["labels"]) != ignore
            n += int(valid.sum())
            s += float(np.asarray(request["slot_losses"][m][r], dtype=float)[valid].sum())
        per.append((n, s))
    total = sum(n for n, _ in per)
    return [{"loss_sum": s, "denominator": total, "denominator_scope": "global", "loss": s / total if total else 0.0}
            for _, s in per]

"""Context parallelism as trainers shard a packed step: the reducer's request deals every row to CP ranks
(``cp_shards``, the core's CpShards: contiguous, or load-balanced per document), and a reducer that works per
CP rank is checked over DP × CP. The shards come from the core; nothing here re-derives them."""

import numpy as np
import pytest

import packoracle


def _valid(row, policy):
    valid = np.asarray(row["labels"]) != policy["ignore_index"]
    if policy["label_alignment"] == "aligned":
        valid = np.concatenate([valid[1:], [False]])
    return valid


def _per_cp_rank(request):
    """Per micro-batch, per CP rank: (count, loss sum) over the slots the rank holds, as each rank computes."""
    policy, out = request["policy"], []
    cp = request["context_parallel_size"]
    for m, mb in enumerate(request["microbatches"]):
        ranks = [[0, 0.0] for _ in range(cp)]
        for r, row in enumerate(mb["rows"]):
            valid = _valid(row, policy)
            losses = np.asarray(request["slot_losses"][m][r], dtype=float)
            for k, chunks in enumerate(request["cp_shards"][m][r]):
                for start, end in chunks:
                    ranks[k][0] += int(valid[start:end].sum())
                    ranks[k][1] += float(losses[start:end][valid[start:end]].sum())
        out.append(ranks)
    return out


def reduce_all_reduced_over_cp(request):
    """Right: every CP rank's count and loss sum all-reduced over the group and the step (DP × CP)."""
    per = _per_cp_rank(request)
    n = sum(c for ranks in per for c, _ in ranks)
    sums = [sum(s for _, s in ranks) for ranks in per]
    return [{"loss_sum": s, "denominator": n, "denominator_scope": "global", "loss": s / n if n else 0.0}
            for s in sums]


def reduce_cp_local_token_mean(request):
    """BUG (prime-rl #1957 on the CP axis): the step's count and sums are right over DP, but inside a CP group
    each rank divides its shard's loss by its own count and the group averages the shard means (weighted back
    to the step by the group's share of the targets): right without CP, wrong as soon as shards differ."""
    per = _per_cp_rank(request)
    n = sum(c for ranks in per for c, _ in ranks)
    out = []
    for ranks in per:
        count, total = sum(c for c, _ in ranks), sum(s for _, s in ranks)
        mean = sum(s / max(1, c) for c, s in ranks if c) / max(1, sum(1 for c, _ in ranks if c))
        out.append({"loss_sum": total, "denominator": n, "denominator_scope": "global",
                    "loss": mean * count / n if n else 0.0})
    return out


def reduce_count_over_dp_only(request):
    """BUG (verl #6049, Megatron-LM #906): the count is all-reduced over the DP group only, so each micro-batch
    counts the targets of CP rank 0's shard, not of the group's."""
    per = _per_cp_rank(request)
    n = sum(ranks[0][0] for ranks in per)
    sums = [sum(s for _, s in ranks) for ranks in per]
    return [{"loss_sum": s, "denominator": n, "denominator_scope": "global", "loss": s / n if n else 0.0}
            for s in sums]


def test_every_case_deals_the_rows_to_cp_ranks_and_a_right_reducer_passes():
    seen = set()

    def recording(request):
        cp, scheme = request["context_parallel_size"], request["context_parallel_scheme"]
        seen.add((cp, scheme))
        for m, mb in enumerate(request["microbatches"]):
            for r, row in enumerate(mb["rows"]):
                shards = request["cp_shards"][m][r]
                assert len(shards) == cp
                held = sorted(i for chunks in shards for start, end in chunks for i in range(start, end))
                assert held == list(range(len(row["input_ids"])))  # every slot held by one rank
        return reduce_all_reduced_over_cp(request)
    packoracle.fuzz(None, "reference", reducer=recording, cases=60)
    assert {cp for cp, _ in seen} == {1, 2, 4, 8}
    assert {scheme for cp, scheme in seen if cp > 2} == {"contiguous", "load_balanced"}


@pytest.mark.parametrize("reducer, invariant", [(reduce_cp_local_token_mean, "loss"),
                                                (reduce_count_over_dp_only, "denominator")])
def test_cp_bugs_are_caught_at_the_defaults(reducer, invariant):
    with pytest.raises(packoracle.Counterexample) as e:
        packoracle.fuzz(None, "reference", reducer=reducer)
    assert e.value.invariant == invariant
    assert "context-parallel" in str(e.value)

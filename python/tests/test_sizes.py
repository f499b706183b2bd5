"""packoracle.fuzz at its defaults draws the cases `packoracle fuzz --exec` draws (rows growing to 8,192 slots, 512
documents a case, every profile), so that the bugs that need size are caught in-process (issue 24): the zoo's
SZ-* bugs written as Python packers, and a loss reducer that goes wrong only on long rows."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import packoracle
from tests.packers import SIZE_BUGS, as_packer, pack_reference, reduce_token_mean

REPO = Path(__file__).resolve().parents[2]
REFERENCE_EXEC = REPO / "python" / "candidates" / "reference.py"


def _packoracle_bin():
    return os.environ.get("PACKORACLE_BIN") or str(REPO / "build" / "cli" / "packoracle")


def test_default_cases_are_the_command_lines():
    """The same seed and case count draw the same cases in-process as over the exec protocol: what was
    generated (every case measured) is equal, sizes included."""
    cases, seed = 96, 5
    in_process = packoracle.fuzz(as_packer(pack_reference), "reference", cases=cases, seed=seed, stats=True)
    run = subprocess.run([_packoracle_bin(), "fuzz", "--exec", f"{sys.executable} {REFERENCE_EXEC}", "--preset",
                          "reference", "--cases", str(cases), "--seed", str(seed), "--format", "json"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    over_exec = json.loads(run.stdout)["generated"]
    assert in_process.generated == over_exec
    # and they are large: the `large` profile reaches the bounds from the first case
    assert in_process.generated["row_length"]["max"] > 2048
    assert in_process.generated["documents_per_case"]["max"] > 100


def test_bounds_are_options_and_the_replay_line_names_them():
    small = packoracle.fuzz(as_packer(pack_reference), "reference", cases=64, max_row_length=16, max_documents=8,
                            stats=True)
    assert small.generated["row_length"]["max"] <= 32  # a policy may pad a row to a multiple beyond L
    assert small.generated["documents_per_case"]["max"] <= 8

    def broken(request):
        raise RuntimeError("no")
    with pytest.raises(packoracle.Counterexample) as e:
        packoracle.fuzz(broken, "reference", cases=4, max_row_length=16, max_documents=8)
    assert "max_row_length=16, max_documents=8, reproduce=" in e.value.replay
    with pytest.raises(ValueError, match="max_documents"):
        packoracle.fuzz(broken, "reference", max_documents=0)


@pytest.mark.parametrize("bug", sorted(SIZE_BUGS))
def test_size_bug_is_caught_at_the_defaults(bug):
    packer, policy, invariant = SIZE_BUGS[bug]
    with pytest.raises(packoracle.Counterexample) as e:
        packoracle.fuzz(packer, policy)
    assert e.value.invariant == invariant
    minimal = e.value.minimal_case
    assert minimal is e.value.request
    lengths = [len(d["tokens"]) for d in minimal["documents"]]
    if bug == "SZ-03":  # at its threshold: one document of 1,001 tokens
        assert lengths == [1001], lengths
    if bug == "SZ-02":  # a document of 1,025 tokens: its last gets position 1023 for 1024
        assert len(lengths) == 1 and lengths[0] == 1025, lengths
    if bug == "SZ-01":  # 257 documents in a row
        assert len(lengths) == 257, lengths
    # the same bug on small cases (the former defaults) passes: it needs size
    packoracle.fuzz(packer, policy, cases=300, max_row_length=16, max_documents=8)


def reduce_ring_split_over_dp_only(request):
    """BUG (sequence parallelism at long rows): past 2,048 slots a row is split over 2 sequence-parallel ranks
    (ring attention), and the step's count of valid targets is all-reduced over the data-parallel group only,
    so each long row's count is its first shard's."""
    policy = request["policy"]
    ignore = policy["ignore_index"]
    aligned = policy["label_alignment"] == "aligned"
    per = []
    for mb, losses in zip(request["microbatches"], request["slot_losses"]):
        count, total = 0, 0.0
        for row, row_losses in zip(mb["rows"], losses):
            valid = np.asarray(row["labels"]) != ignore
            if aligned:
                valid = np.concatenate([valid[1:], [False]])
            total += float(np.asarray(row_losses, dtype=float)[valid].sum())
            counted = valid[:len(valid) // 2] if len(valid) > 2048 else valid
            count += int(counted.sum())
        per.append((count, total))
    n = sum(c for c, _ in per)
    return [{"loss_sum": s, "denominator": n, "denominator_scope": "global", "loss": s / n if n else 0.0}
            for _, s in per]


def test_reducer_gets_long_steps_and_a_long_row_bug_is_caught():
    seen = []

    def recording(request):
        seen.append(sum(len(row["input_ids"]) for mb in request["microbatches"] for row in mb["rows"]))
        return reduce_token_mean(request)
    packoracle.fuzz(None, "reference", reducer=recording, cases=64)  # `large` reaches the bounds at once
    assert max(seen) >= 20000  # steps of tens of thousands of slots
    with pytest.raises(packoracle.Counterexample) as e:
        packoracle.fuzz(None, "reference", reducer=reduce_ring_split_over_dp_only)
    assert e.value.invariant == "denominator"
    assert "the loss reducer" in str(e.value)

"""The device lane's kernel comparison (bench/gpu/kernels.py), run on CPU on two small cases: the correct masks
pass, the two deliberately wrong ones (--self-test) are reported as failing, and the kernels that cannot run on
CPU say n/a, never pass. The GPU cells themselves run only in bench/gpu/device_lane.sh, never in CI."""

import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("torch")
KERNELS = pathlib.Path(__file__).resolve().parents[2] / "bench" / "gpu" / "kernels.py"


def test_kernels_on_cpu_pass_and_the_wrong_masks_fail() -> None:
    run = subprocess.run([sys.executable, str(KERNELS), "--device", "cpu", "--self-test",
                          "--case", "empty_segments", "--case", "remainder_tiles"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = [line.split(" | ") for line in run.stdout.splitlines() if line.startswith("| ") and "---" not in line][1:]
    verdict = {(r[0].lstrip("| "), r[2]): r[7] for r in rows}
    assert verdict[("sdpa dense mask", "empty_segments")] == "pass"
    assert verdict[("sdpa dense mask", "remainder_tiles")] == "pass"
    assert verdict[("SELF-TEST sdpa causal only", "empty_segments")] == "FAIL"
    assert verdict[("SELF-TEST sdpa boundary +1", "remainder_tiles")] == "FAIL"
    # No backward on CPU: FlexAttention's values are compared, its gradients are not claimed.
    assert verdict[("flex_attention", "empty_segments")] == "pass (values only)"
    # Kernels with no CPU implementation, or not installed, are n/a: never passing.
    others = [v for (k, _), v in verdict.items() if k.startswith(("torch varlen", "flash_attn"))]
    assert others and all(v == "n/a" for v in others)
    assert "self-test held" in run.stdout

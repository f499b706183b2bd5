"""packoracle.fuzz with the reference packer in-process against `packoracle fuzz --exec` with the same packer as
a process (python/candidates/reference.py), over the same cases, in one run.

  inprocess_cli_batches  packoracle.fuzz called once per batch of 32 with the CLI's batch seeds: exactly the
                         cases the exec run generates; an exec run before each round (untimed by
                         pytest-benchmark, timed here): the per-round ratios are the figure that counts
  inprocess_one_call     packoracle.fuzz(packer, "reference", cases=N, seed=S) as a user writes it: one Verify
                         call, hence one profile for all N cases (not the same cases as the CLI's run)
  exec                   packoracle fuzz --exec 'python3 python/candidates/reference.py' --preset reference
                         --cases N --seed S [--no-decoder], the process started and waited for in each round
                         (its own rounds, after the others: for the table of times)

Wall time is what pytest-benchmark records; extra_info["cpu_s"] is the CPU time of each round (this process's,
or for exec the kit's plus the candidate's, from RUSAGE_CHILDREN), extra_info["cases"] the cases run.
Environment: BENCH_FUZZ_CASES (2000), BENCH_FUZZ_SEED (20261129), BENCH_FUZZ_ROUNDS (5),
BENCH_FUZZ_DECODER ("off", "on" or "both": default both), PACKORACLE_CLI (the command; default
build-py/cli/packoracle, else build/cli/packoracle).
"""

import json
import os
import resource
import subprocess
import time

import pytest

import packoracle
from inprocess_reference import fuzz_like_the_cli, packer

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CASES = int(os.environ.get("BENCH_FUZZ_CASES", "2000"))
SEED = int(os.environ.get("BENCH_FUZZ_SEED", "20261129"))
ROUNDS = int(os.environ.get("BENCH_FUZZ_ROUNDS", "5"))
DECODER = {"off": [False], "on": [True], "both": [False, True]}[os.environ.get("BENCH_FUZZ_DECODER", "both")]


def cli() -> str:
    if os.environ.get("PACKORACLE_CLI"):
        return os.environ["PACKORACLE_CLI"]
    for build in ("build-py", "build"):
        path = os.path.join(ROOT, build, "cli", "packoracle")
        if os.access(path, os.X_OK):
            return path
    pytest.skip("no packoracle command built (build-py/cli/packoracle or build/cli/packoracle)")


def _decoder_id(decoder: bool) -> str:
    return "decoder" if decoder else "no-decoder"


def _run_timed(benchmark, fn, cpu_of):
    cpu = []

    def once():
        before = cpu_of()
        out = fn()
        cpu.append(cpu_of() - before)
        return out
    result = benchmark.pedantic(once, rounds=ROUNDS, iterations=1, warmup_rounds=0)
    benchmark.extra_info["cpu_s"] = cpu
    return result


def _own_cpu() -> float:
    return time.process_time()


def _children_cpu() -> float:
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def _exec_command(decoder: bool) -> list:
    return [cli(), "fuzz", "--exec", "python3 python/candidates/reference.py", "--preset", "reference",
            "--cases", str(CASES), "--seed", str(SEED), "--format", "json"] + ([] if decoder else ["--no-decoder"])


def _exec_once(command: list) -> tuple:
    """One exec run: (wall s, CPU s of the kit and the candidate, the JSON report)."""
    cpu0, t0 = _children_cpu(), time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["verdict"] == "pass" and report["cases"] == CASES
    return wall, cpu, report


@pytest.mark.parametrize("decoder", DECODER, ids=_decoder_id)
def test_inprocess_cli_batches(benchmark, decoder):
    """The in-process run timed by pytest-benchmark; before each of its rounds (pedantic's untimed setup) one
    exec run over the same cases, timed here: the two alternate, so a change of the machine's load hits both,
    and extra_info holds the per-round ratios (exec_wall_s[k] / the in-process round k)."""
    benchmark.group = f"fuzz {CASES} cases, {_decoder_id(decoder)}"
    command = _exec_command(decoder)
    execs, cpu, wall = [], [], []

    def setup():
        execs.append(_exec_once(command)[:2])

    def once():
        before, t0 = _own_cpu(), time.perf_counter()
        out = fuzz_like_the_cli(CASES, SEED, decoder)
        wall.append(time.perf_counter() - t0)
        cpu.append(_own_cpu() - before)
        return out
    results = benchmark.pedantic(once, setup=setup, rounds=ROUNDS, iterations=1, warmup_rounds=0)
    benchmark.extra_info["cpu_s"] = cpu
    benchmark.extra_info["wall_s"] = wall
    benchmark.extra_info["exec_wall_s"] = [w for w, _ in execs]
    benchmark.extra_info["exec_cpu_s"] = [c for _, c in execs]
    benchmark.extra_info["exec_command"] = " ".join(command)
    benchmark.extra_info["cases"] = sum(r.cases for r in results)
    benchmark.extra_info["profiles"] = sorted({p for r in results for p in r.profiles})
    assert benchmark.extra_info["cases"] == CASES


@pytest.mark.parametrize("decoder", DECODER, ids=_decoder_id)
def test_inprocess_one_call(benchmark, decoder):
    benchmark.group = f"fuzz {CASES} cases, {_decoder_id(decoder)}"
    result = _run_timed(benchmark, lambda: packoracle.fuzz(packer, "reference", cases=CASES, seed=SEED,
                                                           decoder=decoder, name="reference"), _own_cpu)
    benchmark.extra_info["cases"] = result.cases
    benchmark.extra_info["profiles"] = list(result.profiles)
    assert result.cases == CASES


@pytest.mark.parametrize("decoder", DECODER, ids=_decoder_id)
def test_exec(benchmark, decoder):
    benchmark.group = f"fuzz {CASES} cases, {_decoder_id(decoder)}"
    command = _exec_command(decoder)
    cpu = []

    def once():
        _, c, report = _exec_once(command)
        cpu.append(c)
        return report
    report = benchmark.pedantic(once, rounds=ROUNDS, iterations=1, warmup_rounds=0)
    benchmark.extra_info["cpu_s"] = cpu
    benchmark.extra_info["cases"] = report["cases"]
    benchmark.extra_info["command"] = " ".join(command)

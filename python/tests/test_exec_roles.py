"""A loss reducer and an attention consumer in another interpreter, served by packoracle.exec_server and driven
by packoracle.fuzz(exec_reducer=..., exec_consumer=...) over the exec protocol (DESIGN §6, "Other roles"): right
ones pass, buggy ones are caught under their invariant with a replay line that reproduces, and crashing or hanging
ones fail their case there while the kit goes on."""
import json
import os
import shlex
import subprocess
import sys

import pytest

import packoracle

from .helpers import small_fuzz

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "src")


def served(role, function):
    """The command that serves exec_role_callables.<function> as `role` in a fresh interpreter."""
    return (f"env PYTHONPATH={shlex.quote(SRC + os.pathsep + HERE)} {shlex.quote(sys.executable)} "
            f"-m packoracle.exec_server --{role} exec_role_callables:{function}")


def test_a_right_reducer_and_consumer_in_another_interpreter_pass():
    result = small_fuzz(None, "reference", exec_reducer=served("reducer", "reduce_token_mean"),
                        exec_consumer=served("microbatch-consumer", "consume_segment_ids"), cases=64)
    assert {"loss", "denominator", "attention"} <= set(result.checked)


@pytest.mark.parametrize("keyword, role, function, invariant", [
    ("exec_reducer", "reducer", "reduce_own_count_as_global", "denominator"),
    ("exec_consumer", "microbatch-consumer", "consume_joined", "attention"),
])
def test_a_buggy_role_in_another_interpreter_is_caught_and_its_replay_line_reproduces(keyword, role, function,
                                                                                      invariant):
    command = served(role, function)
    with pytest.raises(packoracle.Counterexample) as info:
        small_fuzz(None, "reference", cases=200, **{keyword: command})
    e = info.value
    assert e.invariant == invariant, str(e)
    assert f"{keyword}={command!r}" in e.replay, e.replay
    assert e.replay.startswith("packoracle.fuzz(None, 'reference'"), e.replay
    with pytest.raises(packoracle.Counterexample) as again:
        eval(e.replay, {"packoracle": packoracle})  # the line as printed, run as written
    assert again.value.invariant == invariant
    assert again.value.request["documents"] == e.request["documents"]


@pytest.mark.parametrize("keyword, role, function, invariant, says", [
    ("exec_reducer", "reducer", "reduce_crash_on_two", "loss", "SIGABRT"),
    ("exec_reducer", "reducer", "reduce_hang_on_two", "loss", "no complete answer to reduce request"),
    ("exec_consumer", "microbatch-consumer", "consume_crash_on_two_rows", "attention", "SIGABRT"),
])
def test_a_crashing_or_hanging_role_fails_its_case_and_the_kit_goes_on(keyword, role, function, invariant, says):
    with pytest.raises(packoracle.Counterexample) as info:
        small_fuzz(None, "reference", cases=100, decoder=False, timeout=10, **{keyword: served(role, function)})
    e = info.value
    assert e.invariant == invariant, str(e)
    assert says in str(e)
    assert e.shrinks > 0  # shrinking went on against restarted interpreters


def test_fuzzs_timeout_is_the_exec_roles_deadline():
    """A reducer whose process answers its first request after 3 s (a library's import): under timeout=1 that
    case fails as a hang, under the default (60 s) it passes."""
    slow = served("reducer", "reduce_token_mean").replace(
        " -m packoracle.exec_server ", " -c 'import time; time.sleep(3); import runpy; "
        "runpy.run_module(\"packoracle.exec_server\", run_name=\"__main__\")' ", 1)
    with pytest.raises(packoracle.Counterexample) as info:
        small_fuzz(None, "reference", cases=8, exec_reducer=slow, timeout=1)
    assert info.value.invariant == "loss" and "no complete answer to reduce request" in str(info.value)
    assert small_fuzz(None, "reference", cases=8, exec_reducer=slow).cases == 8


def test_an_exception_in_the_served_callable_is_quoted_in_the_report():
    with pytest.raises(packoracle.Counterexample) as info:
        small_fuzz(None, "reference", cases=100, exec_reducer=served("reducer", "reduce_raises_on_two"))
    assert info.value.invariant == "loss"
    assert "ValueError: two micro-batches are one too many" in str(info.value)


def test_the_command_lines_replay_of_an_external_consumer_reproduces():
    packoracle_bin = os.environ.get("PACKORACLE_BIN", "packoracle")
    command = served("microbatch-consumer", "consume_joined")
    run = subprocess.run([packoracle_bin, "fuzz", "--exec-consumer", command, "--preset", "reference", "--cases",
                          "100", "--max-row-length", "16", "--max-documents", "8", "--format", "json"],
                         capture_output=True, text=True)
    assert run.returncode == 1, run.stdout + run.stderr
    replay = json.loads(run.stdout)["failure"]["replay"]
    assert f"--exec-consumer {shlex.quote(command)}" in replay, replay
    again = subprocess.run(replay.replace("packoracle ", shlex.quote(packoracle_bin) + " ", 1), shell=True,
                           capture_output=True, text=True)
    assert again.returncode == 1 and "failed: attention" in again.stdout, again.stdout + again.stderr


def test_the_server_needs_no_compiled_core():
    """The other interpreter may have packoracle's Python sources and numpy, not a core built for it."""
    code = ("import sys; sys.modules['packoracle._core'] = None; import packoracle.exec_server; "
            "print('served without the core')")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=SRC))
    assert run.returncode == 0 and "served without the core" in run.stdout, run.stderr

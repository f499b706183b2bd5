"""packoracle.fuzz hands its run options to the core as one dict (_core.fuzz's `options`), read by the one table
of the run's options (jobs/fuzz_options.h kFuzzOptions, _core.fuzz_options()): the dict holds every keyword the
table takes, each a keyword of packoracle.fuzz's own signature, and the table refuses a key it does not hold."""

from __future__ import annotations

import inspect
import json
import os
import shlex
import subprocess
import sys

import pytest

import packoracle
from packoracle import _core, _fuzz
from packoracle.dump import make_policy

from tests.helpers import PACKORACLE, REPO_ROOT


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
    keywords = [o["keyword"] for o in _core.fuzz_options() if o["keyword"]]
    assert sorted(seen) == sorted(keywords)
    assert (seen["cases"], seen["seed"], seen["max_row_length"], seen["max_documents"]) == (3, 5, 16, 4)
    assert (seen["decoder"], seen["sft_masks"], seen["stats"]) == (False, False, True)
    signature = inspect.signature(packoracle.fuzz).parameters
    assert [k for k in keywords if k not in signature and k != "headline"] == []


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


def test_the_command_line_takes_a_flag_per_entry_of_the_table():
    shown = subprocess.run([PACKORACLE, "fuzz", "--help"], capture_output=True, text=True).stdout
    for option in _core.fuzz_options():
        if option["flag"]:
            assert f"  {option['flag']} " in shown, option["flag"]


def test_the_replay_line_repeats_the_tables_replayed_options_and_replays_the_failure():
    buggy = f"{sys.executable} {os.path.join(REPO_ROOT, 'python', 'candidates', 'buggy_tg03_boundary_target.py')}"
    run = subprocess.run([PACKORACLE, "fuzz", "--exec", buggy, "--preset", "reference", "--cases", "100",
                          "--max-row-length", "16", "--max-documents", "8", "--no-decoder", "--format", "json"],
                         capture_output=True, text=True)
    assert run.returncode == 1, run.stdout + run.stderr
    replay = json.loads(run.stdout)["failure"]["replay"]
    assert replay.endswith(" --preset reference --max-row-length 16 --max-documents 8 --no-decoder")
    again = subprocess.run(replay.replace("packoracle ", shlex.quote(PACKORACLE) + " ", 1), shell=True,
                           capture_output=True, text=True)
    assert again.returncode == 1 and "failed: targets" in again.stdout, again.stdout + again.stderr


def test_the_python_replay_line_repeats_the_tables_replayed_keywords():
    options = {o["keyword"]: o["default"] for o in _core.fuzz_options() if o["keyword"]}
    assert _fuzz._the_call(_identity_packer, None, None, "reference", {}, options).args[2:] == ()
    replayed = [o["keyword"] for o in _core.fuzz_options() if o["keyword"] and o["replayed"]]
    assert replayed == ["max_row_length", "max_documents", "decoder", "sft_masks", "exec_packer", "exec_reducer",
                        "exec_consumer", "exec_value_consumer", "optimizer_steps", "select_top_fraction"]
    options.update(max_row_length=16, max_documents=8, decoder=False, sft_masks=False, stats=True,
                   exec_reducer="python3 r.py")
    assert _fuzz._the_call(_identity_packer, None, None, "reference", {}, options).args[2:] == (
        "max_row_length=16", "max_documents=8", "decoder=False", "sft_masks=False", "exec_reducer='python3 r.py'")

"""The pytest plugin (packoracle.pytest_plugin), run on inner test files through pytester: the options and the
marker are honoured, a failure keeps pytest's own report (the test's line, the exception whose message is the kit's
report and replay line) and gains a packoracle section, the minimal case is saved and replayed first on the next
run (issue 13 item 6, issue 44 item 2); loading the plugin imports nothing heavy until a test uses the kit (issue
44 item 3)."""

import importlib.metadata
import json
import os
import re
import textwrap

import pytest

import packoracle
from packoracle._fuzz import DEFAULT_CASES
from tests import packers, selection_reducers
from tests.helpers import small_fuzz

pytest_plugins = ["pytester"]


def _entry_point_installed():
    return any(ep.name == "packoracle" for ep in importlib.metadata.entry_points(group="pytest11"))


# Pip-installed, the entry point loads the plugin (and loading it again by -p would register it twice); from the
# source tree it is loaded explicitly.
PLUGIN = [] if _entry_point_installed() else ["-p", "packoracle.pytest_plugin"]
# The inner runs need neither Hypothesis' plugin nor pytest-benchmark (each costs a second per in-process run).
BASE = [*PLUGIN, "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:benchmark", "--strict-markers"]
# The title of the section the plugin adds to a Counterexample's failure (packoracle.pytest_plugin.SECTION; not
# imported from there, which would load the plugin module before the inner runs load it with -p).
SECTION = "packoracle"

INNER = textwrap.dedent('''
    import json
    import os

    import pytest

    import packoracle
    from packers import as_packer, pack_reference, pack_row_shifted

    PACKER = pack_row_shifted if os.environ.get("INNER_BUGGY") == "1" else pack_reference


    def recorded(fn):
        """as_packer(fn), writing every request it gets to requests.jsonl."""
        packer = as_packer(fn)

        def pack_rows(request):
            with open("requests.jsonl", "a") as f:
                f.write(json.dumps(request) + "\\n")
            return packer(request)
        pack_rows.__name__ = pack_rows.__qualname__ = fn.__name__  # the candidate's name in reports and files
        return pack_rows


    @pytest.mark.packoracle(policy="reference", max_row_length=16, max_documents=8)  # small cases: seconds
    def test_packer(packoracle_fuzz):
        result = packoracle_fuzz(recorded(PACKER))
        with open("result.json", "w") as f:
            json.dump({"cases": result.cases, "checked": list(result.checked)}, f)
''')


@pytest.fixture
def inner(pytester, monkeypatch):
    """A pytester directory holding the inner test file and a copy of tests/packers.py."""
    pytester.makepyfile(packers=open(packers.__file__).read(), test_inner=INNER)
    monkeypatch.delenv("INNER_BUGGY", raising=False)
    return pytester


def run(pytester, *args):
    for name in ("requests.jsonl", "result.json"):
        path = pytester.path / name
        if path.exists():
            path.unlink()
    return pytester.runpytest(*BASE, *args)


def requests_seen(pytester):
    with open(pytester.path / "requests.jsonl") as f:
        return [json.loads(line) for line in f]


def result_of(pytester):
    with open(pytester.path / "result.json") as f:
        return json.load(f)


def regressions(pytester, where=".packoracle/regressions"):
    directory = pytester.path / where
    return sorted(directory.glob("*.json")) if directory.is_dir() else []


def assert_pytest_report_with_section(result, test_file, call_line):
    """A Counterexample's failure as issue 44 item 2 wants it: pytest's own report (the failing line of the test,
    marked `>`, the exception line `E   packoracle.Counterexample: ...` with the kit's report as its message, and
    `test_file:N: Counterexample`) with no frame of packoracle's, then the plugin's section after it; the replay
    line once per failure, not repeated by the section."""
    out = result.stdout.str()
    result.stdout.fnmatch_lines([f">*{call_line}",
                                 "E * packoracle.Counterexample: packoracle.fuzz(*) failed: *",
                                 "E * Replay: pass reproduce=*",
                                 f"{test_file}:*: Counterexample",
                                 f"-*- {SECTION} -*-",
                                 "invariant: *",
                                 "reproduce: v1:*"])
    assert "_fuzz.py" not in out and "pytest_plugin.py" not in out  # packoracle's frames are hidden
    failures = out.count(f" {SECTION} ---")
    # Counted above pytest's short summary, which under CI=true (pytest 8) repeats each message whole.
    report = out.split("short test summary info")[0]
    assert failures >= 1 and report.count("Replay: pass reproduce=") == failures, out


def test_a_correct_packer_passes_and_saves_nothing(inner):
    result = run(inner)
    result.assert_outcomes(passed=1)
    assert result_of(inner)["cases"] == DEFAULT_CASES  # packoracle.fuzz's default
    assert {"targets", "positions", "coverage"} <= set(result_of(inner)["checked"])
    assert regressions(inner) == []
    result.stdout.fnmatch_lines(["packoracle: cases=default, seed=default, regressions=*"])


def test_a_buggy_packer_fails_with_the_report_and_is_saved_then_replayed_first(inner, monkeypatch):
    monkeypatch.setenv("INNER_BUGGY", "1")
    result = run(inner)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "failed: targets" in out
    assert "first token of the next document" in out
    assert "=== Minimal counterexample" in out
    # `recorded` makes a closure named after the function it wraps: no import reaches it (issue 27 item 2)
    result.stdout.fnmatch_lines(['E * Replay: pass reproduce="v1:*" to your own packoracle.fuzz call '
                                 '(pack_row_shifted *packoracle.fuzz(pack_row_shifted, *, reproduce="v1:*")'])
    assert_pytest_report_with_section(result, "test_inner.py", "result = packoracle_fuzz(recorded(PACKER))")

    files = regressions(inner)
    assert len(files) == 1
    saved = json.loads(files[0].read_text())
    assert saved["schema"] == "packoracle-regression" and saved["version"] == 1
    assert saved["invariant"] == "targets"
    assert saved["candidate"] == "pack_row_shifted"
    assert saved["reproduce"].startswith("v1:")
    assert saved["request"]["policy"] == packoracle.Policy("reference").to_dict()
    result.stdout.fnmatch_lines([f"-*- {SECTION} -*-", "invariant: targets (first failing case: * of the run; *",
                                 'reproduce: v1:*', f"regression: saved as {files[0]}; the next run replays it first*"])
    result.stdout.fnmatch_lines(["*saved the minimal failing case as *pack_row_shifted-targets-*.json*"])

    # The next run replays the saved case before any generated one, and fails on it.
    again = run(inner)
    again.assert_outcomes(failed=1)
    first = requests_seen(inner)[0]
    for key in ("row_length", "micro_batch_rows", "dp_world_size", "documents", "target_losses"):
        assert first[key] == saved["request"][key], key
    again.stdout.fnmatch_lines([f"-*- {SECTION} -*-", "invariant: targets*", "reproduce: v1:*",
                                f"regression: this is the saved regression {files[0]}, replayed before the generated "
                                f"cases: it fails again"])
    assert_pytest_report_with_section(again, "test_inner.py", "result = packoracle_fuzz(recorded(PACKER))")
    assert "failed: targets" in again.stdout.str()
    assert regressions(inner) == files  # the same case, the same file
    again.stdout.fnmatch_lines(["replayed 1 saved regression(s) from *"])
    # The replayed case names the user's packer, not the plugin's internal recorder (issue 27 item 2).
    assert "recorder" not in again.stdout.str()
    again.stdout.fnmatch_lines(['E * Replay: pass reproduce="v1:*" to your own packoracle.fuzz call '
                                '(pack_row_shifted *'])


def test_a_saved_regression_is_replayed_and_then_passes_once_the_packer_is_fixed(inner, monkeypatch):
    monkeypatch.setenv("INNER_BUGGY", "1")
    run(inner).assert_outcomes(failed=1)
    (saved_file,) = regressions(inner)
    saved = json.loads(saved_file.read_text())
    # The fix keeps the packer's name, so its regressions still apply to it.
    inner.makepyfile(packers=open(packers.__file__).read().replace(
        'def pack_row_shifted(token_lists, row_length, *, supervised=None):',
        'def pack_row_shifted(token_lists, row_length, *, supervised=None):\n'
        '    return pack_reference(token_lists, row_length, supervised=supervised)\n\n\n'
        'def pack_row_shifted_old(token_lists, row_length, *, supervised=None):'))
    monkeypatch.setenv("INNER_BUGGY", "1")
    fixed = run(inner)
    fixed.assert_outcomes(passed=1)
    assert requests_seen(inner)[0]["documents"] == saved["request"]["documents"]
    fixed.stdout.fnmatch_lines(["replayed 1 saved regression(s) from *"])
    assert result_of(inner)["cases"] == DEFAULT_CASES
    assert regressions(inner) == [saved_file]  # kept: a regression test from now on


def test_cases_option_and_ini_and_marker(inner):
    run(inner, "--packoracle-cases", "7").assert_outcomes(passed=1)
    assert result_of(inner)["cases"] == 7
    inner.makeini("[pytest]\npackoracle_cases = 9\n")
    result = run(inner)
    result.assert_outcomes(passed=1)
    assert result_of(inner)["cases"] == 9
    result.stdout.fnmatch_lines(["packoracle: cases=9, seed=default, *"])
    run(inner, "--packoracle-cases", "5").assert_outcomes(passed=1)  # the command line over the ini file
    assert result_of(inner)["cases"] == 5
    # The test's marker over the command line, and the call's own argument over the marker.
    inner.makepyfile(test_inner=INNER.replace('@pytest.mark.packoracle(policy="reference", ',
                                              '@pytest.mark.packoracle(policy="reference", cases=11, '))
    run(inner, "--packoracle-cases", "5").assert_outcomes(passed=1)
    assert result_of(inner)["cases"] == 11
    inner.makepyfile(test_inner=INNER.replace('packoracle_fuzz(recorded(PACKER))',
                                              'packoracle_fuzz(recorded(PACKER), cases=3)'))
    run(inner, "--packoracle-cases", "5").assert_outcomes(passed=1)
    assert result_of(inner)["cases"] == 3


def test_seed_option_fixes_the_cases(inner):
    run(inner, "--packoracle-cases", "20", "--packoracle-seed", "1").assert_outcomes(passed=1)
    one = requests_seen(inner)
    run(inner, "--packoracle-cases", "20", "--packoracle-seed", "1").assert_outcomes(passed=1)
    assert requests_seen(inner) == one
    run(inner, "--packoracle-cases", "20", "--packoracle-seed", "2").assert_outcomes(passed=1)
    two = requests_seen(inner)
    assert two != one
    # The same cases as packoracle.fuzz itself draws with that seed.
    direct = []

    def pack_rows(request):
        direct.append(json.loads(json.dumps(request)))
        return packers.as_packer(packers.pack_reference)(request)
    small_fuzz(pack_rows, "reference", cases=20, seed=2)
    assert direct == two
    result = run(inner, "--packoracle-cases", "20", "--packoracle-seed", "2")
    result.stdout.fnmatch_lines(["packoracle: cases=20, seed=2, *"])


def test_bad_option_values_are_usage_errors(inner):
    result = run(inner, "--packoracle-cases", "zero")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--packoracle-cases: expected an integer, got 'zero'*"])
    result = run(inner, "--packoracle-cases", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_regressions_option(inner, monkeypatch):
    monkeypatch.setenv("INNER_BUGGY", "1")
    run(inner, "--packoracle-regressions", "saved/here").assert_outcomes(failed=1)
    assert regressions(inner) == []
    assert len(regressions(inner, "saved/here")) == 1
    inner.makeini("[pytest]\npackoracle_regressions = from-ini\n")
    run(inner).assert_outcomes(failed=1)
    assert len(regressions(inner, "from-ini")) == 1
    result = run(inner, "--packoracle-regressions", "none")
    result.assert_outcomes(failed=1)
    assert "saved as" not in result.stdout.str()
    assert len(regressions(inner, "from-ini")) == 1 and regressions(inner) == []


def test_any_counterexample_shows_the_report_and_pytest_raises_still_catches_it(pytester):
    pytester.makepyfile(packers=open(packers.__file__).read(), test_direct='''
        import pytest
        import packoracle
        from packers import as_packer, pack_positions_not_reset


        def test_direct_fuzz_call():
            packoracle.fuzz(as_packer(pack_positions_not_reset), "reference", cases=100)


        def test_expected_failure(packoracle_fuzz):
            with pytest.raises(packoracle.Counterexample) as info:
                packoracle_fuzz(as_packer(pack_positions_not_reset), "reference", cases=100)
            assert info.value.invariant == "positions"


        def test_no_policy(packoracle_fuzz):
            packoracle_fuzz(as_packer(pack_positions_not_reset))
    ''')
    result = pytester.runpytest(*BASE, "-rf")
    result.assert_outcomes(passed=1, failed=2)
    out = result.stdout.str()
    assert "failed: positions" in out
    result.stdout.fnmatch_lines(['E * Replay: pass reproduce="v1:*" '
                                 '*packoracle.fuzz(pack_positions_not_reset, *reproduce="v1:*")'])
    assert_pytest_report_with_section(result, "test_direct.py",
                                      'packoracle.fuzz(as_packer(pack_positions_not_reset), "reference", cases=100)')
    # Called directly, nothing saved the case: the section has no regression line.
    (section,) = re.findall(rf"^-+ {SECTION} -+\n(.*?)\n(?=[_=])", out, re.M | re.S)
    assert section.startswith("invariant: positions") and "regression:" not in section, section
    assert "packoracle_fuzz: give a policy" in out
    # Saved only through the fixture (test_expected_failure), once.
    assert len(regressions(pytester)) == 1


def test_marker_is_registered(pytester):
    result = pytester.runpytest(*BASE, "--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.packoracle(policy=None, cases=None, seed=None, **fuzz_options)*"])


def test_plugin_loads_in_a_subprocess(inner, monkeypatch):
    """As a user's CI runs it: a fresh interpreter (the package importable from where it is)."""
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(packoracle.__file__)))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [package_parent, os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("INNER_BUGGY", "1")
    result = inner.runpytest_subprocess(*BASE, "--packoracle-cases", "100")
    result.assert_outcomes(failed=1)
    assert "failed: targets" in result.stdout.str()
    result.stdout.fnmatch_lines(["packoracle: cases=100, seed=default, *",
                                 'E * Replay: pass reproduce=* (pack_row_shifted *'])
    assert len(regressions(inner)) == 1


def test_unreadable_or_stale_regressions_warn_and_do_not_stop_the_run(inner):
    directory = inner.path / ".packoracle" / "regressions"
    directory.mkdir(parents=True)
    (directory / "broken.json").write_text("{not json")
    stale = {"schema": "packoracle-regression", "version": 1, "candidate": "pack_reference", "invariant": "targets",
             "reproduce": "v1:not-a-case", "request": {"policy": packoracle.Policy("reference").to_dict(),
                                                       "documents": []}}
    (directory / "pack_reference-targets-000000.json").write_text(json.dumps(stale))
    result = run(inner, "--packoracle-cases", "10")
    result.assert_outcomes(passed=1, warnings=2)
    result.stdout.fnmatch_lines(["*PackoracleRegressionWarning: packoracle: cannot read saved regression *broken.json*",
                                 "*PackoracleRegressionWarning: packoracle: cannot replay saved regression *"
                                 "pack_reference-targets-000000.json*"])
    assert result_of(inner)["cases"] == 10


SELECTING = textwrap.dedent('''
    import json

    from selection_reducers import reduce_top_fraction_per_microbatch


    def recording(request):
        with open("seen.jsonl", "a") as f:
            f.write(json.dumps([request.get("selection"), request["optimizer_steps"]]) + "\\n")
        return reduce_top_fraction_per_microbatch(request)
    recording.__name__ = recording.__qualname__ = "reduce_top_fraction_per_microbatch"  # the saved case's candidate


    def test_reducer(packoracle_fuzz):  # names neither the schedule nor the selection
        packoracle_fuzz(None, "reference", reducer=recording, decoder=False, max_row_length=16, max_documents=8)
''')


def test_a_saved_regression_replays_under_the_schedule_and_selection_it_failed_under(pytester):
    saved_in = pytester.path / ".packoracle" / "regressions"
    with pytest.raises(packoracle.Counterexample) as caught:
        packoracle.fuzz(None, "reference", reducer=selection_reducers.reduce_top_fraction_per_microbatch,
                        select_top_fraction=0.5, optimizer_steps=2, save_regressions=str(saved_in), cases=200,
                        decoder=False, max_row_length=16, max_documents=8)
    (saved_file,) = regressions(pytester)
    assert str(saved_file) == caught.value.regression
    assert json.loads(saved_file.read_text())["check"] == {"optimizer_steps": 2, "select_top_fraction": 0.5}
    pytester.makepyfile(selection_reducers=open(selection_reducers.__file__).read(), test_inner=SELECTING)
    result = run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"regression: this is the saved regression {saved_file}, replayed before the "
                                 f"generated cases: it fails again"])
    with open(pytester.path / "seen.jsonl") as f:
        first = json.loads(f.readline())
    assert first == [{"top_fraction": 0.5, "scope": "optimizer_step"}, 2]

"""Reports are data (issue 44 item 2): a Counterexample carries its report's sections as attributes, consistent
with its text, and the front ends that show part of a report (the conformance matrix) read the sections instead
of cutting the text."""

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import packoracle
from packoracle.conformance import _fuzz_role, portable
from packoracle.conformance._consumers import _failed_cell
from tests.helpers import PACKORACLE, REPO_ROOT, small_fuzz
from tests.packers import as_packer, pack_row_shifted, reduce_token_mean

CASES = 50


def _counterexample(*args, **kwargs) -> packoracle.Counterexample:
    with pytest.raises(packoracle.Counterexample) as info:
        small_fuzz(*args, cases=CASES, **kwargs)
    return info.value


def causal_across_documents(microbatch, policy):
    """Plain causal attention over each row: documents see each other (a leak)."""
    return [np.tril(np.ones((len(r["input_ids"]),) * 2, dtype=bool)) for r in microbatch["rows"]]


def raises_on_packed_input(microbatch, policy):
    raise ValueError("can't keep packed sequences apart without a kernel")


def test_the_sections_are_the_texts_pieces():
    e = _counterexample(as_packer(pack_row_shifted), "reference")
    text = str(e)
    assert text == e.report + f"Replay: {e.replay}\n"
    assert e.headline == text.splitlines()[0]
    assert e.headline.startswith("packoracle.fuzz(") and e.headline.endswith(" failed: targets")
    assert e.violations and e.violations[0][0] == e.invariant == "targets"
    assert all(isinstance(i, str) and isinstance(m, str) and m for i, m in e.violations)
    assert f"  {e.violations[0][1]}\n" in e.report
    at = 0
    for section in (e.minimal_case_text, e.drawn):  # whole, in the report's order, titles included
        assert section and e.report.find(section, at) >= at, section
        at = e.report.find(section, at) + len(section)
    assert e.minimal_case_text.startswith("=== Minimal counterexample (after ")
    assert e.drawn.startswith("=== Row ")
    assert e.reproduce in e.report and "Replay:" not in e.report
    assert e.request is e.minimal_case and e.request["documents"]


def reduce_over_twice_the_targets(request):
    """A loss reducer that divides by twice the step's valid targets."""
    return [dict(t, denominator=2 * t["denominator"], loss=t["loss_sum"] / (2 * t["denominator"]))
            for t in reduce_token_mean(request)]


def test_totals_are_a_section_when_the_report_shows_them():
    e = _counterexample(None, "reference", reducer=reduce_over_twice_the_targets)
    assert e.invariant == "denominator"
    assert e.totals.startswith("=== Denominator and loss\n  valid targets over the step ") and e.totals in e.report
    e = _counterexample(None, "reference", microbatch_consumer=causal_across_documents)
    assert e.invariant == "attention" and e.totals == ""  # an attention failure of a packer without totals
    assert "=== Attention row " in e.drawn


def test_a_counterexample_built_by_hand_has_empty_sections():
    e = packoracle.Counterexample("text", invariant=None, reproduce="v1:x", replay="r", request=None)
    assert (e.headline, e.violations, e.drawn, e.totals, e.report) == ("", [], "", "", "text")


def test_the_matrix_shows_the_report_without_its_replay_line():
    """conformance's pack/loss cells: the report as its sections give it (no replay line: the page writes its
    own), whatever the text around it says."""
    adapter = SimpleNamespace(packer=lambda: as_packer(pack_row_shifted), reducer=lambda: None,
                              resolved_policy=lambda: "reference", max_row_length=16, max_documents=8,
                              name="row-shifted", sft_masks=True, family="")
    outcome = _fuzz_role(adapter, "pack", CASES, 7)
    assert outcome.verdict == "fails" and outcome.invariant == "targets"
    e = _counterexample(as_packer(pack_row_shifted), "reference", seed=7, name="row-shifted (pack)")
    assert outcome.counterexample == portable(e.report).rstrip() + "\n"
    assert "Replay:" not in outcome.counterexample and outcome.reproduce == e.reproduce


def test_a_consumer_cell_reads_the_headline_violation():
    """The consumer column: a model that raises on packed input refuses (its exception's line, read from the
    headline violation's message); one that mixes documents leaks (the report without its replay line)."""
    consumer = SimpleNamespace(name="model", finding=None)
    raised = _counterexample(None, "reference", microbatch_consumer=raises_on_packed_input)
    cell = _failed_cell(consumer, raised, 0.0)
    assert (cell.verdict, cell.detail) == ("refuses", "ValueError: can't keep packed sequences apart without a kernel")
    # The sections decide, not the text: a text that says nothing of the exception changes nothing.
    relabelled = packoracle.Counterexample("no such words here", invariant=raised.invariant, reproduce=raised.reproduce,
                                           replay=raised.replay, request=raised.request,
                                           sections={"violations": [{"invariant": i, "message": m}
                                                                    for i, m in raised.violations],
                                                     "report": "short"})
    assert _failed_cell(consumer, relabelled, 0.0).detail == cell.detail
    leaked = _counterexample(None, "reference", microbatch_consumer=causal_across_documents)
    cell = _failed_cell(consumer, leaked, 0.0)
    assert cell.verdict == "leaks" and cell.counterexample == portable(leaked.report).rstrip() + "\n"
    assert cell.reproduce == leaked.reproduce


def test_the_command_lines_json_holds_the_same_sections():
    """`packoracle fuzz --format json`: the failure's "sections" are the report's pieces, as the binding hands them
    to Counterexample (one mapping, jobs::ReportSectionsJson); an exec candidate has no C++ expression, so its
    regression draft says it is best effort."""
    buggy = f"{sys.executable} {os.path.join(REPO_ROOT, 'python', 'candidates', 'buggy_tg03_boundary_target.py')}"
    r = subprocess.run([PACKORACLE, "fuzz", "--exec", buggy, "--preset", "reference", "--cases", "100",
                        "--max-row-length", "16", "--max-documents", "8", "--format", "json"],
                       capture_output=True, text=True)
    assert r.returncode == 1, r.stdout + r.stderr
    failure = json.loads(r.stdout)["failure"]
    sections, report = failure["sections"], failure["report"]
    assert sections["headline"] == report.splitlines()[0] and sections["headline"].endswith("failed: targets")
    assert sections["violations"][0] == {"invariant": "targets", "message": failure["sentence"]}
    assert sections["reproduce"] == failure["reproduce"] and sections["reproduce_command"] == failure["replay"]
    assert sections["minimal_case"].startswith("=== Minimal counterexample") and sections["drawn"].startswith("=== Row ")
    s = sections  # the report is its sections in order, nothing else
    assert report == (s["headline"] + "\n" + s["verdict"] + s["minimal_case"] + s["drawn"] + s["totals"]
                      + s["invariance"] + f"=== Reproduce\n  {s['reproduce']}\n  {s['reproduce_command']}\n"
                      + "=== Regression test draft\n" + s["regression_draft"])
    assert "// Best effort: nothing says how C++ constructs " in sections["regression_draft"]

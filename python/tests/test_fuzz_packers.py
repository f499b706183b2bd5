"""packoracle.fuzz on Python packers written the way users write them (tests/packers.py): the correct ones pass
the generated cases; each buggy one is caught with the invariant its bug breaks, a report, and a replay string
that fails again the same way (issue 13 item 5)."""

import re

import pytest

import packoracle
from tests import user_packers
from tests.helpers import small_fuzz
from tests.packers import (
    as_budget_packer, as_packer, pack_hf_flatten, pack_json_string, pack_labels_cut, pack_positions_not_reset,
    pack_reference, pack_refuse_exact_fit, pack_row_shifted, pack_stack_rows, reduce_mean_of_means,
    reduce_own_count_as_global, reduce_token_mean,
)

CASES = 300


class Recorder:
    """Wraps a packer(request) and remembers what it was asked and how it answered."""

    def __init__(self, packer):
        self.packer = packer
        self.__name__ = self.__qualname__ = packer.__name__
        self.requests, self.refusals, self.multi_document_rows = 0, 0, 0

    def __call__(self, request):
        self.requests += 1
        try:
            answer = self.packer(request)
        except packoracle.Refuse:
            self.refusals += 1
            raise
        batches = answer if isinstance(answer, list) else [answer]
        for batch in batches:
            if "doc_ids" in batch:
                self.multi_document_rows += sum(len(set(r[r >= 0].tolist())) >= 2 for r in batch["doc_ids"])
            else:  # one flattened row: cu_seq_lens_q has one more entry than documents
                self.multi_document_rows += int(len(batch["cu_seq_lens_q"]) >= 3)
        return answer


CORE = {"shape", "coverage", "segments", "positions", "targets", "attention"}


@pytest.mark.parametrize("packer, policy", [
    (as_packer(pack_reference), "reference"),
    (as_budget_packer(pack_hf_flatten), "hf-flatten"),
], ids=["reference", "hf-flatten"])
def test_correct_packer_passes(packer, policy):
    recorder = Recorder(packer)
    result = small_fuzz(recorder, policy, cases=CASES)
    assert isinstance(result, packoracle.FuzzResult)
    assert result.cases == CASES
    assert CORE <= set(result.checked), result.checked
    # No producer totals and no reducer: the loss checks cannot apply, and the result says so.
    assert {"denominator", "loss"} <= set(result.not_applicable)
    assert not set(result.checked) & set(result.not_applicable)
    # The cases were worth running: the packer was called on each, packed several documents into one row many
    # times, and refused the documents too long for a row (overflow: error) at least once.
    assert recorder.requests >= CASES
    assert recorder.multi_document_rows >= CASES // 10, recorder.multi_document_rows
    assert recorder.refusals >= 1


def test_same_seed_same_cases_and_another_seed_passes_too():
    packer = as_packer(pack_reference)
    a = small_fuzz(packer, "reference", cases=50, seed=7)
    b = small_fuzz(packer, "reference", cases=50, seed=8)
    assert a.cases == b.cases == 50
    assert a.checked == b.checked


def test_correct_packer_with_correct_loss_reducer_checks_the_loss():
    result = small_fuzz(as_packer(pack_reference), "reference", reducer=reduce_token_mean, cases=CASES)
    assert {"denominator", "loss"} <= set(result.checked)
    assert CORE <= set(result.checked)
    assert result.not_applicable == ("gradient",)  # its totals are numbers: nothing backpropagated


# (packer, reducer, policy, invariant, a phrase of the report's first finding)
BUGS = {
    "targets across documents (torchtune before #2613)":
        (as_packer(pack_row_shifted), None, "reference", "targets", "first token of the next document"),
    "positions not reset (LlamaFactory before #7318)":
        (as_packer(pack_positions_not_reset), None, "reference", "positions", "the policy says 0"),
    "mean of micro-batch means (HF before 4.46)":
        (as_packer(pack_reference), reduce_mean_of_means, "reference", "loss", "global token mean"),
    "own count reported as the global denominator":
        (as_packer(pack_reference), reduce_own_count_as_global, "reference", "denominator", "divided by"),
    "raises on some input":
        (as_packer(pack_stack_rows), None, "reference", "shape", "the packer raised an exception"),
    "labels of the wrong length":
        (as_packer(pack_labels_cut), None, "reference", "shape", "field 'labels' has shape"),
    "returns a string":
        (as_packer(pack_json_string), None, "reference", "shape", "got str"),
    "refuses a document that fits":
        (as_packer(pack_refuse_exact_fit), None, "reference", "coverage", "refused an input its policy accepts"),
}


def _fail(packer, reducer, policy, **kwargs):
    with pytest.raises(packoracle.Counterexample) as info:
        small_fuzz(packer, policy, reducer=reducer, **kwargs)
    return info.value


@pytest.mark.parametrize("bug", list(BUGS))
def test_buggy_packer_gives_a_replayable_counterexample(bug):
    packer, reducer, policy, invariant, phrase = BUGS[bug]
    e = _fail(packer, reducer, policy, cases=CASES)
    assert isinstance(e, AssertionError)  # pytest and unittest show it as a test failure
    assert e.invariant == invariant, str(e)
    text = str(e)
    lines = text.splitlines()
    assert lines[0].endswith(f"failed: {invariant}"), lines[0]
    assert phrase in text
    assert f"  invariant {invariant}: " in text
    assert "=== Minimal counterexample" in text and "=== Reproduce" in text
    assert re.fullmatch(r"v1:\S+", e.reproduce), e.reproduce
    assert lines[-1] == f"Replay: {e.replay}"
    # as_packer's closures have no import path (their names are the wrapped functions', which are no packers):
    # the line says to pass the reproduce string to the test's own call (issue 27 item 2)
    assert lines[-1].startswith(f'Replay: pass reproduce="{e.reproduce}" to your own packoracle.fuzz call ('), lines[-1]
    assert f'reproduce="{e.reproduce}")' in lines[-1]
    assert e.request is not None and e.request["policy"]["preset"] == policy
    assert e.regression is None  # nothing saved unless asked

    again = _fail(packer, reducer, policy, reproduce=e.reproduce)
    assert again.invariant == e.invariant
    assert again.reproduce == e.reproduce
    assert again.request == e.request
    assert str(again).splitlines()[:3] == lines[:3]  # the same finding, word for word


def test_targets_counterexample_is_shrunk_to_two_tiny_documents_in_one_row():
    e = _fail(as_packer(pack_row_shifted), None, "reference", cases=CASES)
    docs = e.request["documents"]
    assert len(docs) == 2, docs  # one document alone cannot show a target into the next one
    assert sum(len(d["tokens"]) for d in docs) <= e.request["row_length"]
    assert all(len(d["tokens"]) <= 2 for d in docs)
    assert "d0" in str(e) and "d1" in str(e)


def test_the_raising_packers_traceback_is_in_the_report():
    e = _fail(as_packer(pack_stack_rows), None, "reference", cases=CASES)
    text = str(e)
    assert "Traceback (most recent call last):" in text
    assert "in pack_stack_rows" in text
    assert "ValueError: need at least one array to stack" in text
    assert e.request["documents"] == [] or all(len(d["tokens"]) == 0 for d in e.request["documents"])


def test_a_fixed_packer_passes_the_replayed_case():
    e = _fail(as_packer(pack_row_shifted), None, "reference", cases=CASES)
    result = small_fuzz(as_packer(pack_reference), "reference", reproduce=e.reproduce)
    assert result.cases == 1
    assert "targets" in result.checked


def test_save_regressions_writes_the_minimal_case(tmp_path):
    import json

    e = _fail(as_packer(pack_positions_not_reset), None, "reference", cases=CASES, save_regressions=str(tmp_path))
    assert e.regression is not None
    files = list(tmp_path.iterdir())
    assert [str(f) for f in files] == [e.regression]
    saved = json.loads(files[0].read_text())
    assert saved["schema"] == "packoracle-regression"
    assert saved["invariant"] == "positions"
    assert saved["reproduce"] == e.reproduce
    assert saved["candidate"] == "pack_positions_not_reset"
    assert saved["request"]["documents"] == e.request["documents"]


# ---- Refuse ---------------------------------------------------------------------------------------------------

def test_refusing_a_document_longer_than_the_row_under_overflow_error_passes():
    recorder = Recorder(as_packer(pack_reference))
    small_fuzz(recorder, "reference", cases=CASES)
    assert packoracle.Policy("reference")["overflow"] == "error"
    assert recorder.refusals >= 1  # the refusal was exercised, and judged right


def test_refusing_when_the_policy_says_truncate_fails_under_coverage():
    policy = packoracle.Policy("reference", overflow="truncate")
    e = _fail(as_packer(pack_reference), None, policy, cases=CASES)
    assert e.invariant == "coverage"
    assert "refused an input its policy accepts" in str(e)
    assert "refusal" in str(e)


def test_not_refusing_a_document_longer_than_the_row_fails():
    def never_refuses(request):
        try:
            return as_packer(pack_reference)(request)
        except packoracle.Refuse:
            # Cut every document to the row instead: the policy (overflow: error) demands a refusal.
            L = request["row_length"]
            tokens = [d["tokens"][:L] for d in request["documents"]]
            return pack_reference(tokens, L)
    e = _fail(never_refuses, None, "reference", cases=CASES)
    assert e.invariant == "coverage", str(e)
    longest = max(len(d["tokens"]) for d in e.request["documents"])
    assert longest > e.request["row_length"]


def test_replay_line_names_the_reducer():
    e = _fail(as_packer(pack_reference), reduce_mean_of_means, "reference", cases=CASES)
    assert "reducer=" in e.replay


def positions_not_reset_packer(request):
    """A packer(request) at a module's top level: the replay line imports it by its path."""
    return as_packer(pack_positions_not_reset)(request)


def test_the_replay_line_runs_as_written():
    """Issue 27 item 2: a packer with an import path is replayed by a line that imports it and runs as it is
    printed; a lambda's line says to pass the reproduce string to the user's own call."""
    with pytest.raises(packoracle.Counterexample) as info:
        packoracle.fuzz(positions_not_reset_packer, "reference", cases=CASES)
    line = info.value.replay
    assert line.startswith(f"from {__name__} import positions_not_reset_packer; packoracle.fuzz("), line
    with pytest.raises(packoracle.Counterexample) as again:
        exec(line, {"packoracle": packoracle})
    assert again.value.reproduce == info.value.reproduce

    with pytest.raises(packoracle.Counterexample) as info:
        packoracle.fuzz(lambda request: positions_not_reset_packer(request), "reference", cases=CASES)
    line = info.value.replay
    assert line.startswith(f'pass reproduce="{info.value.reproduce}" to your own packoracle.fuzz call ('), line
    assert "<lambda>" in line


def test_a_dict_policy_is_replayed_as_written():
    """A policy given as a dict is replayed, and named in the failure's first line, as a person writes it: its
    preset and the keys that change it (a key at the preset's own value left out), short and pasteable, not
    every resolved key; the line still runs and fails the same way."""
    policy = {"preset": "reference", "overflow": "truncate", "pad_id": 0}
    with pytest.raises(packoracle.Counterexample) as info:
        packoracle.fuzz(positions_not_reset_packer, policy, cases=CASES)
    line = info.value.replay
    assert ", {'preset': 'reference', 'overflow': 'truncate'}, reproduce=" in line, line
    assert str(info.value).startswith("packoracle.fuzz(positions_not_reset_packer, {'preset': 'reference', "
                                      "'overflow': 'truncate'}) failed: "), str(info.value)[:200]
    with pytest.raises(packoracle.Counterexample) as again:
        exec(line, {"packoracle": packoracle})
    assert again.value.reproduce == info.value.reproduce


def _padding_with_token_id_zero(packer):
    """The user-style packer, padding with id 0, which the generated documents also use (the `collide` profile
    draws documents made only of it)."""
    def pack(request):
        batches = packer(request)
        for batch in batches:
            batch["input_ids"][batch["input_ids"] == user_packers.PAD] = 0
        return batches
    pack.__name__ = f"{packer.__name__}_pad_zero"
    return pack


@pytest.mark.parametrize("packer, policy, seed", [
    (user_packers.first_fit_decreasing, {"preset": "reference"}, 0),
    (user_packers.first_fit_decreasing, {"preset": "reference"}, 3),
    (user_packers.truncating_packer, {"preset": "reference", "overflow": "truncate"}, 0),
], ids=["first-fit-decreasing-0", "first-fit-decreasing-3", "truncating-0"])
def test_a_correct_packer_padding_with_a_token_id_holds_without_doc_spans(packer, policy, seed):
    """Rows without doc_spans whose padding is a token id the documents use: where the tokens allow two complete
    readings (a document of pad ids read as padding, or padding as a document cut short), the rows' own evidence
    (the doc_ids' marks of padding and segment starts, the targets) chooses the packer's. Both packers were
    reported here before (a false coverage, segments or targets violation within 1,000 cases)."""
    packoracle.fuzz(_padding_with_token_id_zero(packer), policy, cases=1000, seed=seed)

"""Issue 27 item 7: the same numbers get one verdict wherever they are checked. Guard dumps of several batches
verify together as each does alone (7b); check_step and guard.check_step judge denominators by the same core
rule (7a); documents made of the pad id are not padding under `pad_positions: any` (7c)."""

import numpy as np
import pytest

import packoracle
from packoracle import guard
from tests.test_check_batch import flattened


def _flattened(docs, *, reset_positions=True):
    """One row as HF's DataCollatorWithFlattening writes it (hf-flatten), from a list of token lists."""
    return flattened({f"d{k}": doc for k, doc in enumerate(docs)}, reset_positions=reset_positions)


def _guard_dumps(tmp_path, batches):
    seen = []
    loader = guard.wrap_dataloader(batches, "hf-flatten", on_violation=seen.append, dump_dir=str(tmp_path))
    for _ in loader:
        pass
    return [v.dump for v in seen]


def test_guard_dumps_of_several_batches_verify_together_as_alone(tmp_path):
    # Positions that never reset: one positions violation per batch; the segments are the guard's own documents.
    batches = [_flattened([[1, 2, 3], [4, 5, 6, 7]], reset_positions=False),
               _flattened([[8, 9], [10, 11, 12, 13, 14]], reset_positions=False)]
    dumps = _guard_dumps(tmp_path, batches)
    assert len(dumps) == 2 and len(set(dumps)) == 2
    alone = [packoracle.verify(d) for d in dumps]
    assert [[v.invariant for v in r.violations] for r in alone] == [["positions"], ["positions"]]
    together = packoracle.verify(dumps)
    assert sorted(v.invariant for v in together.violations) == ["positions", "positions"], str(together)[:2000]
    assert sorted(v.step for v in together.violations) == [0, 1]  # each batch its own step


def test_guard_dumps_of_several_ranks_verify_together(tmp_path, monkeypatch):
    batch = _flattened([[1, 2, 3], [4, 5, 6, 7]], reset_positions=False)
    dumps = []
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        dumps += _guard_dumps(tmp_path, [batch])
    together = packoracle.verify(dumps)
    assert sorted((v.invariant, v.rank) for v in together.violations) == [("positions", 0), ("positions", 1)]


# 7a: a mean of micro-batch means under global_targets. Two micro-batches of 7 and 3 valid targets, each divided
# by its own count and saying so (scope `microbatch`): the step objective weighs each micro-batch's targets by
# 1/7 and 1/3 where the declared one weighs every target by 1/10.
SEVEN = [[1, 2, 3, 4], [5, 6, 7, 8, 9]]   # 3 + 4 shifted targets, the boundary excluded
THREE = [[10, 11], [12, 13, 14]]          # 1 + 2
OTHER_SEVEN = [[21, 22, 23, 24], [25, 26, 27, 28, 29]]


def _docs(parts=(SEVEN, THREE)):
    return {f"d{k}": d for k, d in enumerate(d for part in parts for d in part)}


def _step(denominators, scope, parts=(SEVEN, THREE)):
    return [dict(_flattened(docs), micro_step=m, producer={"denominator": d, "denominator_scope": scope})
            for m, (docs, d) in enumerate(zip(parts, denominators))]


def _guard_step(denominators, scope, parts=(SEVEN, THREE)):
    return guard.check_step(_step(denominators, scope, parts), policy="hf-flatten", on_violation=lambda e: None)


@pytest.mark.parametrize("scope", ["microbatch", "step"])
def test_a_mean_of_microbatch_means_is_one_violation_in_check_step_and_the_guard(scope):
    # Divided by 7 and 3, each its micro-batch's own count (`microbatch`), or the rank's count of two ranks
    # (`step`, each rank one micro-batch): correct counts of the declared scope, the wrong objective.
    step = _step([7, 3], scope)
    world = 1
    if scope == "step":
        step[1].update(rank=1, micro_step=0)
        world = 2
    core = packoracle.check_step(step, _docs(), "hf-flatten", dp_world_size=world)
    assert not core.ok, str(core)
    assert {v.invariant for v in core.violations} == {"denominator"}
    assert [v.message for v in core.violations if "weighted unequally" in v.message], str(core)
    g = guard.check_step(_step([7, 3], scope), policy="hf-flatten", on_violation=lambda e: None)
    assert not g.ok and any("divides by 7" in p and "weighted unequally" in p for p in g.problems), g.text


def test_the_declared_denominators_are_clean_in_both():
    core = packoracle.check_step(_step([10, 10], "global"), _docs(), "hf-flatten")
    assert core.ok and not [n for n in core.notes if "scale" in n], str(core)
    g = _guard_step([10, 10], "global")
    assert g.ok and not g.notes, g.text


def test_equal_counts_divided_by_their_own_are_a_note_in_both():
    # Two micro-batches of 7 each divided by its own 7 under global_targets (14): the declared objective up to
    # a factor, until the counts differ; the same note in both paths.
    parts = (SEVEN, OTHER_SEVEN)
    core = packoracle.check_step(_step([7, 7], "microbatch", parts), _docs(parts), "hf-flatten")
    g = _guard_step([7, 7], "microbatch", parts)
    assert core.ok and g.ok, (str(core), g.text)
    scale = [n for n in core.notes if "up to scale" in n]
    assert scale and [n.replace("the step", "step 0") for n in scale] == g.notes, (core.notes, g.notes)


# 7c: documents made of the pad id. Under hf-padded (one document per row, padding anywhere in position) the
# rows [5 6 7 pad pad] and [0 0 pad pad pad] hold A and B = [0 0]; derived spans read B into row 0's padding
# (its tokens are the pad id) and then reported its positions, targets and mask there.
PAD_DOCS = {"A": [5, 6, 7], "B": [0, 0]}


def _padded(positions_of_padding=1):
    ids = np.array([[5, 6, 7, 0, 0], [0, 0, 0, 0, 0]])
    labels = np.array([[5, 6, 7, -100, -100], [0, 0, -100, -100, -100]])
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 0, 0, 0]])
    pos = np.array([[0, 1, 2] + [positions_of_padding] * 2, [0, 1] + [positions_of_padding] * 3])
    return {"input_ids": ids, "labels": labels, "attention_mask": mask, "position_ids": pos}


def test_padding_is_not_read_as_a_document_of_pad_ids():
    spans = [[{"doc_uid": "A", "start": 0, "length": 3, "doc_offset": 0}],
             [{"doc_uid": "B", "start": 0, "length": 2, "doc_offset": 0}]]
    assert packoracle.check_batch(dict(_padded(), doc_spans=spans), PAD_DOCS, "hf-padded").ok
    derived = packoracle.check_batch(_padded(), PAD_DOCS, "hf-padded")
    assert derived.ok, str(derived)


def test_a_document_of_pad_ids_that_is_there_is_still_read():
    # B really in row 0's tail (its targets say so) is read there; without targets it is read where nothing
    # else explains the rows (here: nowhere else), so it is never lost.
    from packoracle._batch import Microbatches
    from packoracle._policy import resolve
    policy = resolve("hf-padded")
    ids = np.array([[5, 6, 7, 0, 0, 0]])
    for labels in ([5, 6, 7, 0, 0, -100], [5, 6, 7, -100, -100, -100]):
        docs = [{"doc_uid": u, "tokens": t} for u, t in PAD_DOCS.items()]
        mb = Microbatches(docs, policy).read({"input_ids": ids, "labels": np.array([labels])})
        assert [s["doc_uid"] for s in mb[0]["rows"][0]["doc_spans"]] == ["A", "B"], labels


# count_basis: what a producer's denominator counts is the core's rule (DenominatorCount) in check_step and in
# the guard. Under hf-padded a row's every real token is a label (the model shifts): [5 6 7 pad pad] has 3
# labels != -100 and 2 shifted targets, [8 9 10 11 12] has 5 and 4. Each micro-batch divides by its own count
# (microbatch_mean): a producer counting unshifted labels (HF Trainer before PR #46204) divides by 3 and 5,
# which is right only when the policy says `count_basis: unshifted_labels`.
@pytest.mark.parametrize("basis, right, wrong", [("targets", (2, 4), (3, 5)), ("unshifted_labels", (3, 5), (2, 4))])
def test_the_count_basis_decides_the_denominator_in_check_step_and_the_guard(basis, right, wrong):
    policy = {"preset": "hf-padded", "denominator": "microbatch_mean", "count_basis": basis}
    rows = [([5, 6, 7, 0, 0], [1, 1, 1, 0, 0], "A"), ([8, 9, 10, 11, 12], [1, 1, 1, 1, 1], "C")]
    docs = {"A": [5, 6, 7], "C": [8, 9, 10, 11, 12]}
    for denominators, ok in ((right, True), (wrong, False)):
        step = []
        for m, ((ids, mask, uid), d) in enumerate(zip(rows, denominators)):
            n = sum(mask)
            step.append({"input_ids": np.array([ids]), "attention_mask": np.array([mask]),
                         "labels": np.array([ids[:n] + [-100] * (5 - n)]), "position_ids": np.array([list(range(5))]),
                         "doc_spans": [[{"doc_uid": uid, "start": 0, "length": n, "doc_offset": 0}]], "micro_step": m,
                         "producer": {"denominator": d, "denominator_scope": "microbatch"}})
        core = packoracle.check_step(step, docs, policy)
        g = guard.check_step(step, policy=policy, on_violation=lambda e: None)  # the rows' segments for documents
        assert core.ok == ok and g.ok == ok, (basis, denominators, str(core), g.text)
        if not ok:
            assert {v.invariant for v in core.violations} == {"denominator"}, str(core)
            assert any(f"divides by {denominators[0]}" in p for p in g.problems), g.text


def test_the_guard_given_the_steps_documents_checks_the_step_as_a_window_of_the_run():
    # The step's documents are spread over its micro-batches: a micro-batch checked alone against all of them
    # was a false coverage violation ("document 'd2' ... is in no row"); the step is a window of the run, and a
    # real violation is still caught.
    docs = _docs()
    step = _step([10, 10], "global")
    core = packoracle.check_step(step, docs, "hf-flatten")
    g = guard.check_step(step, policy="hf-flatten", documents=docs, on_violation=lambda e: None)
    assert core.ok and g.ok, (str(core), g.text)
    broken = [dict(mb) for mb in step]
    broken[1]["position_ids"] = np.arange(broken[1]["input_ids"].shape[-1])[None]  # positions never reset
    g = guard.check_step(broken, policy="hf-flatten", documents=docs, on_violation=lambda e: None)
    assert not g.ok and [v.invariant for r in g.local for v in r.violations] == ["positions"], g.text


def test_the_guard_given_the_documents_checks_a_row_end_whose_target_is_in_the_next_micro_batch():
    # llm.c's stream windows (row_end_target next_in_stream): a row's last input predicts the next token of the
    # stream, here the first token of the document in the next micro-batch. Checked micro-batch by micro-batch,
    # that target was never known, and a row end trained on nothing passed; check_step and verify find it.
    docs = [{"doc_uid": "d0", "tokens": []}, {"doc_uid": "d1", "tokens": []}]  # each the BOS alone, as placed
    step = [{"input_ids": [[0]], "labels": [[-100]], "position_ids": [[0]]} for _ in range(2)]
    core = packoracle.check_step(step, docs, "llmc")
    assert [(v.invariant, v.micro_step) for v in core.violations] == [("targets", 0)], str(core)
    g = guard.check_step(step, policy="llmc", documents=docs, on_violation=lambda e: None)
    assert not g.ok and [(v.invariant, v.micro_step) for r in g.local for v in r.violations] == [("targets", 0)], \
        g.text
    assert g.valid_targets == 1, g.text  # the step's count, that row end's target included
    right = [dict(step[0], labels=[[0]]), step[1]]  # the next document's BOS
    assert packoracle.check_step(right, docs, "llmc").ok
    assert guard.check_step(right, policy="llmc", documents=docs, on_violation=lambda e: None).ok


def test_invariants_the_readings_of_rows_without_spans_judge_differently_are_not_checked():
    # trl-wrapped rows handed out in reverse, no doc_spans: d1 = d2 = [1], d1 supervised, d2 not. The packer put
    # d2 in row 0 (d1's supervised token then goes untrained: targets, and a denominator of 0 for it); the
    # greedy reading puts d1 there (nothing wrong). Both read row 1 as two documents under row-causal attention.
    # check_step, the guard with documents and verify keep attention and say targets, denominator are not checked.
    docs = [{"doc_uid": "d0", "tokens": [0], "supervised": [1]}, {"doc_uid": "d1", "tokens": [1], "supervised": [1]},
            {"doc_uid": "d2", "tokens": [1], "supervised": [0]}]
    step = [{"input_ids": [[1, 0]], "labels": [[-100, -100]], "position_ids": [[0, 0]], "doc_ids": [[0, -1]],
             "producer": {"denominator": 0, "denominator_scope": "global"}},
            {"input_ids": [[0, 1]], "labels": [[1, -100]], "position_ids": [[0, 1]], "doc_ids": [[0, 1]],
             "producer": {"denominator": 0, "denominator_scope": "global"}}]
    report = packoracle.check_step(step, docs, "trl-wrapped")
    assert [v.invariant for v in report.violations] == ["attention"], str(report)
    assert report.ambiguous == ("targets", "denominator"), str(report)
    assert any(n.startswith("not checked, ambiguous: targets, denominator") for n in report.notes), str(report)
    g = guard.check_step(step, policy="trl-wrapped", documents=docs, on_violation=lambda e: None)
    assert [v.invariant for r in g.local for v in r.violations] == ["attention"], g.text
    assert not any(p.startswith("rank 0") or "divides by" in p for p in g.problems), g.text  # not judged
    # check_batch on the two rows as one batch (no producer totals): the same, by its own path
    one = {n: [row for mb in step for row in mb[n]] for n in ("input_ids", "labels", "position_ids", "doc_ids")}
    batch = packoracle.check_batch({n: np.array(v) for n, v in one.items()}, docs, "trl-wrapped")
    assert [v.invariant for v in batch.violations] == ["attention"] and batch.ambiguous == ("targets",), str(batch)
    # with the packer's spans, every finding is made
    spans = [[[("d2", 0, 1, 0)]], [[("d0", 0, 1, 0), ("d1", 1, 1, 0)]]]
    given = packoracle.check_step([dict(mb, doc_spans=s) for mb, s in zip(step, spans)], docs, "trl-wrapped")
    assert {v.invariant for v in given.violations} == {"attention", "targets", "denominator"}, str(given)
    assert given.ambiguous == ()

"""packoracle.check_batch / check_step on the arrays users hold: verdicts, the report, bad input."""

import json
import os
import subprocess

import numpy as np
import pytest

import packoracle
from packoracle.dump import DumpWriter, document_record
from tests.helpers import PACKORACLE

DOCS = {"a": [11, 12, 13], "b": [21, 22, 23, 24, 25, 26]}


def flattened(docs, *, reset_positions=True):
    """One row as HF's DataCollatorWithFlattening writes it (hf-flatten)."""
    ids, labels, positions, cu = [], [], [], [0]
    for doc in docs.values():
        positions += range(len(doc)) if reset_positions else range(len(ids), len(ids) + len(doc))
        ids += doc
        labels += [-100] + doc[1:]
        cu.append(len(ids))
    return {"input_ids": np.array([ids]), "labels": np.array([labels]), "position_ids": np.array([positions]),
            "cu_seq_lens_q": np.array(cu, dtype=np.int32)}


def test_a_correct_batch_is_clean():
    report = packoracle.check_batch(flattened(DOCS), DOCS, "hf-flatten")
    assert report.ok and not report.violations
    assert "verdict: clean" in str(report)
    assert report.to_json()["totals"]["valid_targets"] == 7  # 2 + 5 shifted targets, the boundary excluded


def test_positions_that_never_reset_are_caught_where_they_go_wrong():
    report = packoracle.check_batch(flattened(DOCS, reset_positions=False), DOCS, "hf-flatten")
    assert not report.ok
    first = report.violations[0]
    assert (first.invariant, first.step, first.micro_step, first.rank, first.row) == ("positions", 0, 0, 0, 0)
    assert first.slot == 3  # the first token of b
    assert "positions" in str(report) and "verdict: 1 violation(s)" in str(report)


def test_every_array_form_gives_the_same_report():
    batch = flattened(DOCS)
    as_lists = {k: v.tolist() for k, v in batch.items()}
    flat_rows = {k: (v[0] if v.ndim == 2 else v) for k, v in batch.items()}
    int32 = {k: v.astype(np.int32) for k, v in batch.items()}
    texts = {str(packoracle.check_batch(b, DOCS, "hf-flatten")) for b in (batch, as_lists, flat_rows, int32)}
    assert len(texts) == 1


def test_a_call_reads_nothing_from_the_last_ones_storage():
    """audit_records reads each batch's rows into the storage the last audits used (no fresh pages per call):
    a batch after a longer one, with fewer fields or lists instead of arrays, gets the report it gets alone."""
    short = {"a": [11, 12]}
    batches = [(flattened(DOCS), DOCS), (flattened(short), short), (flattened(DOCS, reset_positions=False), DOCS),
               ({k: v for k, v in flattened(short).items() if k != "position_ids"}, short),
               ({k: v.tolist() for k, v in flattened(DOCS).items()}, DOCS)]
    alone = []
    for batch, docs in batches:
        packoracle.check_step([batch] * 6, docs, "hf-flatten")  # fills the storage kept with other rows
        alone.append(str(packoracle.check_batch(batch, docs, "hf-flatten")))
    in_turn = [str(packoracle.check_batch(batch, docs, "hf-flatten")) for batch, docs in batches]
    assert in_turn == alone
    assert "verdict: clean" in in_turn[0] and "positions" in in_turn[2]


def test_torch_tensors_are_read_in_place():
    torch = pytest.importorskip("torch")
    batch = {k: torch.from_numpy(v) for k, v in flattened(DOCS, reset_positions=False).items()}
    report = packoracle.check_batch(batch, {k: torch.tensor(v) for k, v in DOCS.items()}, "hf-flatten")
    assert [v.invariant for v in report.violations][:1] == ["positions"]


def test_the_text_is_the_command_lines(tmp_path):
    """str(report) is what `packoracle verify` prints for the same records written as a dump."""
    batch = flattened(DOCS, reset_positions=False)
    report = packoracle.check_batch(batch, DOCS, "hf-flatten")
    dump = tmp_path / "batch.jsonl"
    spans = [{"doc_uid": "a", "start": 0, "length": 3, "doc_offset": 0},
             {"doc_uid": "b", "start": 3, "length": 6, "doc_offset": 0}]
    with DumpWriter(str(dump)) as w:
        w.header(system="python", component="batch", policy=packoracle.Policy("hf-flatten").to_dict())
        w.documents([packoracle.Document(uid, tokens) for uid, tokens in DOCS.items()])
        w.write({"record": "microbatch", "step": 0, "micro_step": 0, "rank": 0, "rows": [
            {"input_ids": batch["input_ids"][0].tolist(), "labels": batch["labels"][0].tolist(),
             "position_ids": batch["position_ids"][0].tolist(), "cu_seqlens": batch["cu_seq_lens_q"].tolist(),
             "doc_spans": spans}]})
    cli = subprocess.run([PACKORACLE, "verify", str(dump)], capture_output=True, text=True)
    assert cli.returncode == 1, cli.stderr
    assert str(report) == cli.stdout.replace(str(dump), "batch")


def test_check_step_checks_the_denominator_over_the_step():
    docs = {"a": [11, 12, 13], "b": [21, 22, 23, 24, 25, 26]}
    one = flattened({"a": docs["a"]})
    two = flattened({"b": docs["b"]})
    # Each micro-batch divides by its own count (2 and 5): a mean of micro-batch means, not the step's 7.
    step = [dict(one, micro_step=0, producer={"loss_sum": 4.0, "denominator": 2, "denominator_scope": "global"}),
            dict(two, micro_step=1, producer={"loss_sum": 5.0, "denominator": 5, "denominator_scope": "global"})]
    report = packoracle.check_step(step, docs, "hf-flatten")
    assert not report.ok
    assert {v.invariant for v in report.violations} == {"denominator"}
    # The totals are the step's loss code's (a loss reducer's), not a packer's: the report says whose.
    assert report.violations[0].message.startswith("the loss reducer, micro-batch 0: divided by 2"), report
    good = [dict(m, producer=dict(m["producer"], denominator=7)) for m in step]
    assert packoracle.check_step(good, docs, "hf-flatten").ok


# ---- producer totals as they come (issue 16): any non-empty subset of loss_sum, denominator, loss ----------

def test_check_batch_takes_a_denominator_alone_as_a_count():
    """python/README.md's HF example: the Trainer knows num_items_in_batch, not a loss sum."""
    report = packoracle.check_batch(flattened(DOCS), DOCS, "hf-flatten",
                                    producer={"denominator": 7, "denominator_scope": "global"})
    assert report.ok, str(report)
    assert report.notes == ("producer totals give a denominator alone (no loss_sum, no loss): the count was checked, "
                            "the loss and the step objective were not",)
    assert "note: producer totals give a denominator alone" in str(report)
    wrong = packoracle.check_batch(flattened(DOCS), DOCS, "hf-flatten",
                                   producer={"denominator": 9, "denominator_scope": "global"})
    assert [v.invariant for v in wrong.violations] == ["denominator"]
    assert "divided by 9, but its global has 7 valid targets" in wrong.violations[0].message


@pytest.mark.parametrize("producer", [{"loss_sum": 9.0}, {"loss": 9 / 7}, {"loss_sum": 9.0, "loss": 9 / 7},
                                      {"denominator": 7, "denominator_scope": "global", "loss": 9 / 7},
                                      {"loss_sum": 9.0, "denominator": 7, "denominator_scope": "global"}])
def test_check_batch_takes_every_partial_subset(producer):
    report = packoracle.check_batch(flattened(DOCS), DOCS, "hf-flatten", producer=producer)
    assert report.ok, str(report)


def test_a_loss_that_is_not_its_sum_over_the_policys_count_is_a_loss_violation():
    # loss_sum 9 divided by 9 slots instead of the 7 valid targets hf-flatten divides by.
    report = packoracle.check_batch(flattened(DOCS), DOCS, "hf-flatten", producer={"loss_sum": 9.0, "loss": 1.0})
    assert [v.invariant for v in report.violations] == ["loss"]
    assert "is not loss_sum / the global count (7)" in report.violations[0].message


@pytest.mark.parametrize("producer, field", [({}, "gives none of loss_sum, denominator, loss"),
                                             ({"loss_sum": None}, "gives none of loss_sum, denominator, loss"),
                                             ({"loss_sum": 9.0, "denominator_scope": "global"},
                                              "field 'denominator_scope' is given without a denominator"),
                                             ({"denominator": 7}, "field 'denominator_scope' is missing")])
def test_malformed_producer_totals_name_the_field(producer, field):
    with pytest.raises(ValueError, match=field):
        packoracle.check_batch(flattened(DOCS), DOCS, "hf-flatten", producer=producer)


def test_check_step_with_denominators_alone():
    docs = {"a": [11, 12, 13], "b": [21, 22, 23, 24, 25, 26]}
    step = [dict(flattened({"a": docs["a"]}), micro_step=0, producer={"denominator": 7, "denominator_scope": "global"}),
            dict(flattened({"b": docs["b"]}), micro_step=1, producer={"denominator": 7, "denominator_scope": "global"})]
    assert packoracle.check_step(step, docs, "hf-flatten").ok
    means = [dict(step[0], producer={"denominator": 2, "denominator_scope": "global"}), step[1]]
    assert {v.invariant for v in packoracle.check_step(means, docs, "hf-flatten").violations} == {"denominator"}


def test_the_readme_hf_dump_with_num_items_in_batch_verifies_clean(tmp_path):
    """python/README.md's HF example as written: from_hf_flatten with producer={"denominator": ..., "denominator_scope":
    "global"}, then `packoracle verify`: exit 0, and the report says the loss was not checked."""
    from packoracle.dump import DocumentSequence, from_hf_flatten
    features = [{"input_ids": DOCS["a"]}, {"input_ids": DOCS["b"]}]
    uids = ["a", "b"]
    num_items_in_batch = 7
    batch = flattened(DOCS)
    dump = tmp_path / "dump.jsonl"
    with DumpWriter(str(dump)) as w:
        docs = DocumentSequence([{"doc_uid": uid, "tokens": f["input_ids"]} for uid, f in zip(uids, features)])
        w.header(system="huggingface/transformers", component="DataCollatorWithFlattening", version="test",
                 policy={"preset": "hf-flatten"}, special_ids={"separator": -100}, dp_world_size=1, grad_accum_steps=1)
        w.documents(docs.documents)
        w.write(from_hf_flatten(batch, docs, step=0, micro_step=0, rank=0,
                                producer={"denominator": int(num_items_in_batch), "denominator_scope": "global"}))
    cli = subprocess.run([PACKORACLE, "verify", str(dump)], capture_output=True, text=True)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "verdict: clean" in cli.stdout
    assert "note: producer totals give a denominator alone" in cli.stdout
    assert packoracle.verify(str(dump)).ok


def test_svg_draws_the_row():
    report = packoracle.check_batch(flattened(DOCS, reset_positions=False), DOCS, "hf-flatten")
    svg = report.svg(0)
    assert svg.startswith("<?xml") and "<svg" in svg and 'data-row="0"' in svg and 'data-slots="9"' in svg
    assert "<svg" in report.html()


@pytest.mark.parametrize("change, error, words", [
    (lambda b: b.update(labels=b["labels"][:, :-1]), ValueError, "labels"),
    (lambda b: b.update(input_ids=b["input_ids"].astype(np.float32)), TypeError, "input_ids"),
    (lambda b: b.update(pixel_values=np.zeros(3)), ValueError, "pixel_values"),
    (lambda b: b.update(position_ids=[[0, 1], [0, 1, 2]]), ValueError, "position_ids"),
    (lambda b: b.pop("labels"), ValueError, "labels"),
    (lambda b: b.update(attention_mask=np.ones((1, 1, 9, 9))), ValueError, "attention_mask"),
])
def test_bad_input_is_an_exception_that_names_the_field(change, error, words):
    batch = flattened(DOCS)
    change(batch)
    with pytest.raises(error, match=words):
        packoracle.check_batch(batch, DOCS, "hf-flatten")


def test_bad_policies_and_documents_name_what_is_wrong():
    with pytest.raises(ValueError, match="lable_alignment"):
        packoracle.check_batch(flattened(DOCS), DOCS, {"preset": "hf-flatten", "lable_alignment": "aligned"})
    with pytest.raises(ValueError, match="no-such-preset"):
        packoracle.Policy("no-such-preset")
    with pytest.raises(TypeError, match="tokens"):
        packoracle.check_batch(flattened(DOCS), {"a": [1.5, 2.5]}, "hf-flatten")


def test_verify_and_draw_are_the_commands(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    clean = os.path.join(root, "examples", "dumps", "hf_flatten_clean.jsonl")
    buggy = os.path.join(root, "examples", "dumps", "megatron_training_copy_buggy.jsonl")
    assert packoracle.verify(clean).ok
    report = packoracle.verify(buggy)
    assert not report.ok and "expected [0 1 2 3 0 1 2 3], actual [0 1 2 3 4 5 6 7]" in str(report)
    cli = subprocess.run([PACKORACLE, "verify", buggy], capture_output=True, text=True)
    assert str(report) == cli.stdout
    assert json.loads(subprocess.run([PACKORACLE, "verify", "--format", "json", buggy], capture_output=True,
                                     text=True).stdout) == report.to_json()
    drawing = packoracle.draw(clean, row=0, svg=tmp_path / "row.svg")
    assert "every target and weight agrees with the oracle" in str(drawing)
    assert (tmp_path / "row.svg").read_text() == drawing.svg
    with pytest.raises(ValueError, match="nonexistent"):
        packoracle.verify(tmp_path / "nonexistent.jsonl")


def test_policy_keys_that_mean_nothing_may_be_null():
    """A user's policy for a system without padding: "pad_id": None means nothing there, and is accepted; where
    the policy pads, it is refused naming the key and why."""
    unpadded = {"preset": "hf-flatten", "pad_id": None, "pad_to": None, "pad_positions": None}
    assert packoracle.check_batch(flattened(DOCS), DOCS, unpadded).ok
    with pytest.raises(ValueError, match="policy key 'pad_id' is null, but padding is right: padding slots hold the "
                                         "pad id"):
        packoracle.check_batch(flattened(DOCS), DOCS, {"preset": "reference", "pad_id": None})


def _megatron_batch(request, name):
    from tests.user_packers import megatron_eod_rows
    batch = megatron_eod_rows(request)[0]
    batch[name] = batch.pop("input_ids")
    return batch


@pytest.mark.parametrize("broken", [False, True])
def test_megatrons_tokens_field_reads_as_input_ids_in_every_entry_point(broken):
    """Megatron's get_batch names the inputs ``tokens``: check_batch (the core's reader) and check_step (the
    Python one) read it as input_ids, with the same verdict, a bug included."""
    from tests.user_packers import EOS
    request = {"row_length": 4, "documents": [{"doc_uid": "a", "tokens": [5, 6, 7]},
                                               {"doc_uid": "b", "tokens": [8, 9, 10, 11, 12]}]}
    policy = {"preset": "megatron-gpt", "padding": "none", "eos_id": EOS}
    reports = []
    for name in ("input_ids", "tokens"):
        batch = _megatron_batch(request, name)
        if broken:
            batch["labels"][0, 1] = 99  # a target that is no next token
        reports.append(packoracle.check_batch(batch, request["documents"], policy, row_length=4))
        reports.append(packoracle.check_step([batch], request["documents"], policy, row_length=4))
    assert all(r.ok != broken for r in reports), [str(r) for r in reports]
    assert len({tuple((v.invariant, v.row, v.slot) for v in r.violations) for r in reports}) == 1

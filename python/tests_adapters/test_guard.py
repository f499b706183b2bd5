"""packoracle.guard: in one process (the rules, the collator and loader wrappers, the dump), and in a real
two-process training run under torchrun (gloo, a tiny Llama, the HF Trainer and DataCollatorWithFlattening):
the correct configuration passes, a rank dividing by its own count is caught at the first step, a collator
that trains across documents at the first batch."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest
import torch
from transformers import DataCollatorWithFlattening

import packoracle
from packoracle import guard

HERE = os.path.dirname(os.path.abspath(__file__))
DOCS = [{"input_ids": [1, 2, 3]}, {"input_ids": [4, 5, 6, 7]}]


def test_a_correct_collator_passes_and_a_collator_without_boundaries_is_caught(tmp_path):
    ok = guard.wrap_collator(DataCollatorWithFlattening(return_flash_attn_kwargs=True), "hf-flatten")
    ok(DOCS)
    assert ok.guard.state.checked == 1 and ok.guard.state.violations == 0
    bad = guard.wrap_collator(DataCollatorWithFlattening(return_position_ids=False), "hf-flatten",
                              dump_dir=str(tmp_path))
    with pytest.raises(guard.GuardViolation) as caught:
        bad(DOCS)
    assert {v.invariant for v in caught.value.report.violations} == {"attention", "positions"}
    replayed = packoracle.verify(caught.value.dump)  # the saved batch replays to the same verdict
    assert {v.invariant for v in replayed.violations} == {"attention", "positions"}


def test_every_checks_one_batch_in_k_and_log_does_not_raise(caplog):
    bad = guard.wrap_collator(DataCollatorWithFlattening(return_position_ids=False), "hf-flatten", every=2,
                              on_violation="log", dump_dir=os.devnull + "/none")  # unwritable: logged, not raised
    with caplog.at_level(logging.ERROR, logger="packoracle.guard"):
        for _ in range(4):
            bad(DOCS)
    assert bad.guard.state.seen == 4 and bad.guard.state.checked == 2 and bad.guard.state.violations == 2
    assert "breaks the declared policy" in caplog.text


def test_a_loader_is_checked_from_its_own_segments(tmp_path):
    batch = DataCollatorWithFlattening(return_flash_attn_kwargs=True)(DOCS)
    guard.wrap_dataloader([batch], "hf-flatten").__iter__().__next__()
    shifted = dict(batch, labels=batch["input_ids"].clone())  # the boundary target trained: labels = tokens
    seen = []
    list(guard.wrap_dataloader([shifted], "hf-flatten", on_violation=seen.append, dump_dir=str(tmp_path)))
    assert seen and "targets" in {v.invariant for v in seen[0].report.violations}
    assert "targets against the shift inside each segment and across row ends" in seen[0].checks


def test_step_rules_unequal_weights_violate_a_uniform_scale_is_a_note():
    collate = DataCollatorWithFlattening(return_flash_attn_kwargs=True)
    long, short = collate(DOCS), collate([{"input_ids": [1, 2, 3]}])  # 5 and 2 valid targets
    assert guard.check_step([long, short], policy="hf-flatten", num_items_in_batch=7).ok
    scaled = guard.check_step([long, long], policy="hf-flatten", num_items_in_batch=[5, 5])
    assert scaled.ok and scaled.notes
    with pytest.raises(guard.GuardViolation, match="divides by 5"):
        guard.check_step([long, short], policy="hf-flatten", num_items_in_batch=[5, 2])  # mean of means
    with pytest.raises(guard.GuardViolation, match="divides by 9"):  # counts that are not the step's, unequally off
        guard.check_step([long, short], policy="hf-flatten", num_items_in_batch=[9, 9 + 1])


def _torchrun(mode: str, out) -> tuple[int, list[dict]]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    # --standalone: a rendezvous on a free port (a fixed one can still be held by the previous run)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           os.path.join(HERE, "guard_train.py"), mode, str(out)], env=env, capture_output=True,
                          text=True, timeout=600)
    (out / "torchrun.log").write_text(proc.stdout + proc.stderr)  # what a failing exit code said
    ranks: list[dict] = []
    for r in range(2):
        path = os.path.join(out, f"rank{r}.json")
        assert os.path.exists(path), f"rank {r} wrote no result:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        ranks.append(json.load(open(path)))
    return proc.returncode, ranks


def test_torchrun_the_correct_configuration_passes_every_step(tmp_path):
    code, ranks = _torchrun("correct", tmp_path)
    assert code == 0, (ranks, (tmp_path / "torchrun.log").read_text()[-4000:])
    for r in ranks:
        assert r["outcome"] == "passed" and [s["step"] for s in r["steps"]] == [0, 1, 2]
        assert all(s["ok"] for s in r["steps"]) and r["batches_checked"] >= 6
    assert [s["valid"] for s in ranks[0]["steps"]] == [s["valid"] for s in ranks[1]["steps"]]


def test_torchrun_a_rank_dividing_by_its_own_count_is_caught_at_the_first_step(tmp_path):
    code, ranks = _torchrun("rank_local", tmp_path)
    assert code != 0
    for r in ranks:  # every rank raises, with the same verdict naming both ranks
        assert r["outcome"] == "caught" and r["where"] == "step 0", r
        assert "rank 0 micro-batch 0 divides by" in r["text"] and "rank 1 micro-batch 0 divides by" in r["text"]
    assert ranks[0]["text"] == ranks[1]["text"]


def test_torchrun_a_collator_training_across_documents_is_caught_at_the_first_batch(tmp_path):
    code, ranks = _torchrun("across_documents", tmp_path)
    assert code != 0
    for r in ranks:
        assert r["outcome"] == "caught" and r["where"] == "batch 0", r
        assert "a backend would attend across documents" in r["text"]
        assert os.path.exists(r["dump"])


def test_a_packed_feature_holds_one_document_per_seq_length_and_lengths_that_disagree_are_named():
    docs = guard.documents_from_features([{"input_ids": [1, 2, 3, 4, 5], "seq_lengths": torch.tensor([2, 3])}])
    assert [d["tokens"].tolist() for d in docs] == [[1, 2], [3, 4, 5]]
    with pytest.raises(ValueError, match=r"features\[0\]: field 'seq_lengths' sums to 4, but its input_ids has 5"):
        guard.documents_from_features([{"input_ids": [1, 2, 3, 4, 5], "seq_lengths": [2, 2]}])

"""packoracle.adapters against the real libraries installed from PyPI (the `adapters` extra): run by
scripts/python_tests.sh in the venv that has them. Nothing here skips: a library that is missing fails.

Each adapter must run the kit's generated cases to its examined verdict; a library output that is corrupted
after the call must be caught (so a pass means something); the conformance command must see a changed matrix.
"""

from __future__ import annotations

import importlib.metadata

import pytest
import torch

import packoracle
from packoracle import adapters, conformance


def BOUNDS(adapter) -> dict:
    """The conformance matrix's case bounds for this adapter (fuzz's defaults grow to 8,192-slot rows, which a
    real library's Python packer takes minutes over; the matrix's verdicts are stated at these bounds)."""
    return {"max_row_length": adapter.max_row_length, "max_documents": adapter.max_documents}


def test_every_adapter_has_a_unique_name_a_valid_policy_and_its_library_pinned():
    seen = set()
    for a in adapters.all_adapters():
        assert a.name not in seen
        seen.add(a.name)
        assert a.name.lower().startswith(a.system.lower() + "/"), a.name
        a.resolved_policy()  # raises ValueError for a key the policy does not take
        for role, finding in a.findings.items():
            assert role in ("pack", "loss") and finding.kind in ("bug", "allowed"), (a.name, role)


def test_transformers_is_installed_at_the_version_the_adapters_were_written_for():
    a = adapters.get("transformers/flatten-fa-kwargs")
    assert importlib.metadata.version("transformers") == a.written_for
    assert a.unavailable() is None


@pytest.mark.parametrize("name", ["transformers/flatten", "transformers/flatten-fa-kwargs",
                                  "transformers/flatten-seq-idx", "torchtitan/hf-text"])
def test_the_real_collator_passes_the_kit(name):
    """torchtitan/hf-text: the per-document shift of PR #4075, declared shift: document."""
    a = adapters.get(name)
    if a.unavailable():
        pytest.skip(a.unavailable())
    result = packoracle.fuzz(a.packer(), a.resolved_policy(), cases=300, seed=7, sft_masks=a.sft_masks, **BOUNDS(a))
    assert result.cases == 300 and "targets" in result.checked and "attention" in result.checked


def _train_the_boundary(packer):
    """The real collator's output with the first label of every document set to its token: what the collator
    did before its separator (the boundary target trained)."""
    def pack(request):
        answer = packer(request)
        for mb in answer:
            for batch in mb["rows"]:
                labels, positions = batch["labels"], batch["position_ids"]  # torch tensors [1, T]
                starts = (positions == 0) & (torch.arange(labels.shape[1]) > 0)
                labels[starts] = batch["input_ids"][starts]
        return answer
    return pack


def test_a_library_output_corrupted_after_the_call_is_caught_and_shrunk():
    a = adapters.get("transformers/flatten-fa-kwargs")
    with pytest.raises(packoracle.Counterexample) as caught:
        packoracle.fuzz(_train_the_boundary(a.packer()), a.resolved_policy(), cases=300, seed=7,
                        **BOUNDS(a))
    assert caught.value.invariant == "targets", str(caught.value)
    assert len(caught.value.request["documents"]) == 2, str(caught.value)  # minimal: two documents in one row


def test_the_trainer_loss_divides_by_the_step_count_over_every_rank():
    a = adapters.get("transformers/flatten")
    pack, reduce = a.packer(), a.reducer()
    docs = [{"doc_uid": f"d{k}", "tokens": t, "supervised": [1] * len(t)}
            for k, t in enumerate([[1, 2, 3], [4, 5, 6, 7, 8, 9], [10, 11]])]
    request = {"id": 0, "row_length": 9, "micro_batch_rows": 1, "dp_world_size": 2,
               "policy": a.resolved_policy().to_dict(), "documents": docs, "target_losses": {}}
    mbs = packoracle._batch.Microbatches(docs, request["policy"]).read(pack(request))
    losses = [[[1.0] * len(row["input_ids"]) for row in mb["rows"]] for mb in mbs]
    totals = reduce({"policy": request["policy"], "dp_world_size": 2, "grad_accum_steps": 1,
                     "context_parallel_size": 1, "microbatches": mbs, "slot_losses": losses})
    # rows [1 2 3 4 5 6 7 8 9] (2 + 5 targets) on rank 0 and [10 11] (1 target) on rank 1: 8 in all
    assert [t["denominator"] for t in totals] == [8.0, 8.0]
    assert totals[0]["loss"] == pytest.approx(7 / 8, rel=1e-6) and totals[1]["loss"] == pytest.approx(1 / 8, rel=1e-6)


def test_conformance_sees_a_changed_matrix(tmp_path, capsys):
    page = tmp_path / "conformance.md"
    args = ["--only", "transformers/flatten", "--cases", "50"]
    assert conformance.main(args + ["--markdown", str(page)]) == 0
    assert conformance.main(args + ["--check", str(page)]) == 0
    page.write_text(page.read_text().replace("| holds |", "| **fails** |", 1))
    assert conformance.main(args + ["--check", str(page)]) == 1
    assert "differs from what the installed libraries give now" in capsys.readouterr().err


def test_an_unexplained_failure_makes_conformance_fail(monkeypatch, capsys):
    a = adapters.get("transformers/flatten")
    bare = a.__class__(**{**a.__dict__, "findings": {}})
    monkeypatch.setattr(adapters, "all_adapters", lambda: (bare,))
    # --only: the adapter alone (the consumer column's 480 cells and the mask builders would add many minutes)
    assert conformance.main(["--only", "transformers/flatten", "--cases", "50"]) == 1
    assert "transformers/flatten (loss): unexplained" in capsys.readouterr().err


def test_the_page_reads_the_same_on_every_machine():
    line = '  File "/home/u/venv/lib/python3.11/site-packages/olmo_core/data/utils.py", line 795, in __init__'
    assert conformance.portable(line) == '  File "olmo_core/data/utils.py", line 795, in __init__'
    assert conformance.portable('File "/opt/py/lib/python3.12/concurrent/futures/process.py"') == \
        'File "concurrent/futures/process.py"'

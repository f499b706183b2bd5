"""The libraries that run in family environments of their own (packoracle.conformance._envs; scripts/python_tests.sh
--full builds them in the stage before these tests, and here they are found in the cache or built): each family's
row runs there to its examined verdict, a corrupted answer from that venv is caught, and the fla naive ops are
fuzzed as consumers inside the fla venv. Nothing here skips: an environment that cannot be built fails."""

from __future__ import annotations

import os
import subprocess
import tempfile

import pytest

import packoracle
from packoracle import adapters
from packoracle.conformance import _envs, run
from packoracle.conformance._remote import FamilyPacker

ONE_PER_FAMILY = ["grain/first-fit", "litgpt/sft-collate", "areal/packed-mb", "verl/agg-loss-token-mean",
                  "openrlhf/aggregate-loss-token", "axolotl/multipack-ffd", "llamafactory/neat-packing-fa2"]


@pytest.mark.parametrize("name", ONE_PER_FAMILY)
def test_the_row_runs_in_its_family_environment_to_its_examined_verdict(name):
    (row,) = run(cases=60, only=[name])
    assert row.environment == adapters.get(name).family and row.unavailable is None, row.unavailable
    assert row.version == adapters.get(name).written_for
    assert row.roles["pack"].verdict in ("holds", "fails") and row.explanation("pack")[0] in ("", "explained")
    assert row.realpack and all(not v.startswith("not run") for v in row.realpack.values())


def test_a_corrupted_answer_from_a_family_venv_is_caught():
    """grain's rows with every position set to 0: the positions invariant, as for an in-process packer."""
    a = adapters.get("grain/first-fit")
    remote = FamilyPacker(_envs.python_of(_envs.ensure("grain")), a.name)

    def zero_positions(request):
        answer = remote(request)
        for mb in answer:
            for row in mb["rows"]:
                row["position_ids"] = [0] * len(row["position_ids"])
        return answer

    try:
        with pytest.raises(packoracle.Counterexample) as caught:
            packoracle.fuzz(zero_positions, a.resolved_policy(), cases=200, seed=3, max_row_length=16)
    finally:
        remote.close()
    assert caught.value.invariant == "positions"


def test_axolotl_refuses_an_over_long_sample_and_packs_the_rest_in_its_environment():
    """excess_length_strategy raise: the library's length filter raises for a sample longer than sequence_len,
    the kit's refusal; the same documents within the row length come back as rows of exactly L slots."""
    a = adapters.get("axolotl/multipack-ffd")
    remote = FamilyPacker(_envs.python_of(_envs.ensure("axolotl")), a.name)
    docs = [[11, 12, 13], [21, 22, 23, 24, 25], [31], [41, 42, 43, 44, 45, 46, 47], [51, 52]]
    request = {"id": 0, "row_length": 8, "micro_batch_rows": 1, "dp_world_size": 1,
               "policy": a.resolved_policy().to_dict(), "target_losses": {},
               "documents": [{"doc_uid": f"d{k}", "tokens": t, "supervised": [1] * len(t)} for k, t in enumerate(docs)]}
    try:
        rows = [r for mb in remote(request) for r in mb["rows"]]
        assert [len(r["input_ids"]) for r in rows] == [8] * len(rows)
        assert sorted(t for r in rows for t, d in zip(r["input_ids"], r["doc_ids"]) if d != -1) == sorted(sum(docs, []))
        request["row_length"] = 6
        with pytest.raises(packoracle.Refuse, match="d3"):
            remote(request)
    finally:
        remote.close()


# Run by the fla venv's interpreter, packoracle on its path: the naive op fuzzed as a consumer under cu_seqlens
# (must hold), then the same op handed the whole row as one sequence, as a caller who forgets cu_seqlens does
# (must be caught: the state runs across documents).
_FLA_CHECK = """
import numpy as np
from packoracle import Counterexample, fuzz
from packoracle.adapters import fla_consumers as f
print("smoke:", f.smoke(cases=40).splitlines()[0])
def whole_row(mb, policy):
    return [f.dependency("gated_delta_product", [0, len(np.asarray(r["input_ids"]).reshape(-1))],
                         len(np.asarray(r["input_ids"]).reshape(-1))) for r in mb["rows"]]
try:
    fuzz(None, "hf-flatten", microbatch_consumer=whole_row, cases=60, seed=1, max_row_length=16, max_documents=8)
    print("whole row: holds")
except Counterexample as e:
    print("whole row:", e.invariant)
"""


def test_the_fla_naive_op_is_document_causal_under_cu_seqlens_in_its_environment():
    python = _envs.python_of(_envs.ensure("fla"))
    with tempfile.TemporaryDirectory() as shim:
        os.makedirs(os.path.join(shim, "site-packages"))
        os.symlink(os.path.dirname(packoracle.__file__), os.path.join(shim, "site-packages", "packoracle"))
        env = dict(os.environ, PYTHONPATH=os.path.join(shim, "site-packages"), PYTHONNOUSERSITE="1")
        out = subprocess.run([python, "-c", _FLA_CHECK], env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "smoke: holds" in out.stdout and "whole row: attention" in out.stdout, out.stdout


# Run by the llamafactory venv's interpreter: LLaMA-Factory's 4-D mask fuzzed as a mask-level consumer over the
# kit's rows (must hold), then the same function handed the mask plain packing (packing without neat_packing)
# gives it, every slot 1 (must be caught: documents attend to each other).
_LLAMAFACTORY_MASK_CHECK = """
import numpy as np
from packoracle import Counterexample, fuzz
from packoracle.adapters.llamafactory_pack import block_diagonal_mask
policy = {"preset": "hf-flatten", "boundary_source": "doc_ids", "padding": "right", "pad_keys": "masked"}
fuzz(None, policy, microbatch_consumer=block_diagonal_mask, cases=60, seed=1, max_row_length=16, max_documents=8)
print("neat: holds")
def plain(mb, policy):
    return block_diagonal_mask({"rows": [dict(r, doc_ids=np.zeros_like(np.asarray(r["doc_ids"]))) for r in mb["rows"]]},
                               policy)
try:
    fuzz(None, policy, microbatch_consumer=plain, cases=60, seed=1, max_row_length=16, max_documents=8)
    print("plain: holds")
except Counterexample as e:
    print("plain:", e.invariant)
"""


def test_llamafactory_s_4d_mask_is_document_causal_in_its_environment():
    python = _envs.python_of(_envs.ensure("llamafactory"))
    with tempfile.TemporaryDirectory() as shim:
        os.makedirs(os.path.join(shim, "site-packages"))
        os.symlink(os.path.dirname(packoracle.__file__), os.path.join(shim, "site-packages", "packoracle"))
        env = dict(os.environ, PYTHONPATH=os.path.join(shim, "site-packages"), PYTHONNOUSERSITE="1")
        out = subprocess.run([python, "-c", _LLAMAFACTORY_MASK_CHECK], env=env, capture_output=True, text=True,
                             timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "neat: holds" in out.stdout and "plain: attention" in out.stdout, out.stdout

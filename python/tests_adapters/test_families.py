"""The libraries that run in family environments of their own (packoracle.conformance._envs; scripts/python_tests.sh
--full builds them in the stage before these tests, and here they are found in the cache or built): each family's
row runs there to its examined verdict, a corrupted answer from that venv is caught, and the fla naive ops are
fuzzed as consumers inside the fla venv. Nothing here skips: an environment that cannot be built fails."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile

import pytest

import packoracle
from packoracle import adapters
from packoracle.conformance import _envs, run
from packoracle.conformance._remote import FamilyPacker

ONE_PER_FAMILY = ["grain/first-fit", "litgpt/sft-collate", "areal/packed-mb", "verl/agg-loss-token-mean",
                  "openrlhf/aggregate-loss-token", "axolotl/multipack-ffd", "llamafactory/neat-packing-fa2",
                  "megatron-core/gpt-inter-document-masking"]


@pytest.mark.parametrize("name", ONE_PER_FAMILY)
def test_the_row_runs_in_its_family_environment_to_its_examined_verdict(name):
    (row,) = run(cases=60, only=[name])
    assert row.environment == adapters.get(name).family and row.unavailable is None, row.unavailable
    assert row.version == adapters.get(name).written_for
    assert row.roles["pack"].verdict in ("holds", "fails") and row.explanation("pack")[0] in ("", "explained")
    assert row.realpack and all(not v.startswith("not run") for v in row.realpack.values())


# Each family reducer row against its examined finding, in its venv: the wiring serves the row's own reducer
# (another mode's totals would not match that row's finding: token-sum-norm's denominator is not token-mean's).
FAMILY_REDUCERS = [a.name for a in adapters.all_adapters() if a.family and a.make_reducer is not None]


@pytest.mark.parametrize("name", FAMILY_REDUCERS)
def test_each_family_reducer_row_gives_its_examined_verdict(name):
    (row,) = run(cases=60, only=[name])
    finding = adapters.get(name).findings.get("loss")
    outcome = row.roles["loss"]
    assert not row.role_notes and row.unavailable is None, (row.role_notes, row.unavailable)
    assert outcome.verdict == ("fails" if finding else "holds"), outcome.counterexample
    assert row.explanation("loss")[0] == ("explained" if finding else ""), outcome.counterexample


def test_a_family_rows_loss_failure_replays_from_the_main_venv():
    """The page's replay line of a family row: packoracle.conformance.replay(name, "loss", reproduce) drives the
    reducer in its venv again and raises the same failure on the same case."""
    from packoracle import conformance

    (row,) = run(cases=60, only=["openrlhf/aggregate-loss-token"])
    outcome = row.roles["loss"]
    assert outcome.verdict == "fails", outcome
    with pytest.raises(packoracle.Counterexample) as again:
        conformance.replay("openrlhf/aggregate-loss-token", "loss", outcome.reproduce)
    assert again.value.invariant == outcome.invariant and again.value.reproduce == outcome.reproduce
    with pytest.raises(ValueError, match="role must be 'pack' or 'loss'"):
        conformance.replay("openrlhf/aggregate-loss-token", "reduce", outcome.reproduce)


# Run by the verl venv's interpreter: what packoracle.conformance._served serves for each verl row, against that
# adapter's own reducer, on one step where the four modes give four different answers (rows of different widths
# and target counts, on two ranks).
_SERVED_CHECK = """
import json
import numpy as np
from packoracle import adapters, Policy
from packoracle.conformance import _served
policy = Policy(dict(adapters.get("verl/agg-loss-token-mean").policy)).to_dict()
rows = [[11, 12, 13, 14], [21, 22], [31, 32, 33]]
mbs = [{"record": "microbatch", "step": 0, "micro_step": 0, "rank": k % 2,
        "rows": [{"input_ids": np.array(r), "labels": np.array([-100] + r[1:]), "position_ids": np.arange(len(r))}]}
       for k, r in enumerate(rows)]
request = {"policy": policy, "dp_world_size": 2, "microbatches": mbs,
           "slot_losses": [[[1.0 + k + s for s in range(len(r))]] for k, r in enumerate(rows)]}
out = {}
for a in adapters.all_adapters():
    if a.family == "verl":
        out[a.name] = [getattr(_served, a.name)(request), a.reducer()(request)]
print(json.dumps(out))
"""


def test_the_served_reducer_of_each_verl_row_is_that_rows_own():
    python = _envs.python_of(_envs.ensure("verl"))
    with tempfile.TemporaryDirectory() as shim:
        os.makedirs(os.path.join(shim, "site-packages"))
        os.symlink(os.path.dirname(packoracle.__file__), os.path.join(shim, "site-packages", "packoracle"))
        env = dict(os.environ, PYTHONPATH=os.path.join(shim, "site-packages"), PYTHONNOUSERSITE="1")
        out = subprocess.run([python, "-c", _SERVED_CHECK], env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    answers = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(answers) == 4
    for name, (served, own) in answers.items():
        assert served == own, name
    totals = [json.dumps(own) for _, own in answers.values()]
    assert len(set(totals)) == 4, totals  # each mode answers differently: a mix-up could not pass


def test_a_family_row_served_the_wrong_reducer_is_caught():
    """verl's token-mean row with seq-mean-token-sum-norm's reducer served in its place: a per-micro-batch padded
    width for a denominator, which global_targets does not allow (the `denominator` or `loss` invariant)."""
    from packoracle.conformance._remote import served_command

    a = adapters.get("verl/agg-loss-token-mean")
    python = _envs.python_of(_envs.ensure("verl"))
    remote = FamilyPacker(python, a.name)
    wrong = served_command(python, "reducer", "verl/agg-loss-seq-mean-token-sum-norm")
    try:
        with pytest.raises(packoracle.Counterexample) as caught:
            packoracle.fuzz(remote, a.resolved_policy(), exec_reducer=wrong, cases=60, seed=7, max_row_length=16,
                            max_documents=8, timeout=600)
    finally:
        remote.close()
    assert caught.value.invariant in ("denominator", "loss"), caught.value.report
    assert "non-finite" not in str(caught.value.violations[0][1]), caught.value.report  # not token-mean's NaN


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


def test_axolotl_drops_an_over_long_sample_and_packs_the_rest_in_its_environment():
    """excess_length_strategy drop (axolotl's default, the policy's overflow: drop): the library's length filter
    leaves a sample longer than sequence_len out of every row, neither refused nor cut, and keeps one of exactly
    sequence_len tokens; the rows are of exactly L slots."""
    a = adapters.get("axolotl/multipack-ffd")
    assert a.resolved_policy().to_dict()["overflow"] == "drop"
    remote = FamilyPacker(_envs.python_of(_envs.ensure("axolotl")), a.name)
    docs = [[11, 12, 13], [21, 22, 23, 24, 25], [31], [41, 42, 43, 44, 45, 46, 47], [51, 52]]
    request = {"id": 0, "row_length": 8, "micro_batch_rows": 1, "dp_world_size": 1,
               "policy": a.resolved_policy().to_dict(), "target_losses": {},
               "documents": [{"doc_uid": f"d{k}", "tokens": t, "supervised": [1] * len(t)} for k, t in enumerate(docs)]}

    def packed(row_length):
        request["row_length"] = row_length
        rows = [r for mb in remote(request) for r in mb["rows"]]
        assert [len(r["input_ids"]) for r in rows] == [row_length] * len(rows)
        return sorted(t for r in rows for t, d in zip(r["input_ids"], r["doc_ids"]) if d != -1)

    try:
        assert packed(8) == sorted(sum(docs, []))
        assert packed(7) == sorted(sum(docs, []))  # d3 has exactly 7 tokens: kept
        assert packed(6) == sorted(sum(docs[:3] + docs[4:], []))  # d3 dropped, no refusal
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


def test_the_fla_naive_op_holds_as_an_exec_consumer_of_the_matrix():
    """The matrix's fla cell: the op served in the fla venv (packoracle.exec_server), fuzzed from here."""
    from packoracle.adapters.fla_consumers import CONSUMERS
    from packoracle.conformance._consumers import run_builders

    cells = run_builders(40, 20261201, lambda name: name.startswith("fla/"))
    assert [c.consumer.name for c in cells] == [c.name for c in CONSUMERS]
    assert all(c.verdict == "holds" and c.cases == 40 for c in cells), [(c.verdict, c.detail) for c in cells]


def test_an_fla_op_fed_the_whole_row_as_one_sequence_is_caught_over_the_exec_protocol(tmp_path):
    """The op handed [0, T] for cu_seqlens (a caller who forgets the boundaries), served in the fla venv: the
    exec consumer's answer shows the state crossing documents (`attention`)."""
    from packoracle.conformance._remote import packoracle_shim

    (tmp_path / "fla_whole_row.py").write_text(
        "import numpy as np\nfrom packoracle.adapters import fla_consumers as f\n"
        "def whole_row(mb, policy):\n"
        "    return [f.dependency('gated_delta_product', [0, len(r['input_ids'])], len(r['input_ids']))\n"
        "            for r in mb['rows']]\n")
    python = _envs.python_of(_envs.ensure("fla"))
    command = (f"env -u VIRTUAL_ENV PYTHONNOUSERSITE=1 PYTHONPATH={packoracle_shim()}:{tmp_path} {python} "
               f"-m packoracle.exec_server --microbatch-consumer fla_whole_row:whole_row")
    with pytest.raises(packoracle.Counterexample) as caught:
        packoracle.fuzz(None, "hf-flatten", exec_consumer=command, cases=60, seed=1, max_row_length=16,
                        max_documents=8, timeout=600)
    assert caught.value.invariant == "attention", caught.value.report


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


def _request(adapter, docs, row_length):
    return {"id": 0, "row_length": row_length, "micro_batch_rows": 1, "dp_world_size": 1,
            "policy": adapter.resolved_policy().to_dict(), "target_losses": {},
            "documents": [{"doc_uid": f"d{k}", "tokens": t, "supervised": [1] * len(t)} for k, t in enumerate(docs)]}


def test_megatron_0_19_inter_document_masking_runs_on_this_python_in_its_environment():
    """megatron-core 0.19.2 (Requires-Python >= 3.12) installed with --ignore-requires-python runs on 3.11: its
    GPTDataset with inter_document_masking gives each sample cu_seqlens padded to sequence_length + 1 with
    trailing sequence_length, and positions reset per document (conventions.md's example, EOD appended)."""
    a = adapters.get("megatron-core/gpt-inter-document-masking")
    remote = FamilyPacker(_envs.python_of(_envs.ensure("megatron")), a.name)
    request = _request(a, [[11, 12, 13], [21, 22], [31, 32, 33, 34]], 5)
    eod = request["policy"]["eos_id"]
    try:
        assert remote.ready() == {"version": "0.19.2", "unavailable": None}
        rows = [r for mb in remote(request) for r in mb["rows"]]
    finally:
        remote.close()
    assert [r["input_ids"] for r in rows] == [[11, 12, 13, eod, 21], [22, eod, 31, 32, 33]]
    assert [r["cu_seqlens"] for r in rows] == [[0, 4, 5, 5, 5, 5], [0, 2, 5, 5, 5, 5]]
    assert [r["position_ids"] for r in rows] == [[0, 1, 2, 3, 0], [0, 1, 0, 1, 2]]


def test_megatron_inter_document_rows_without_their_boundaries_are_caught():
    """The 0.19.2 rows with each sample's cu_seqlens cut to one sequence (as 0.16.1 without the flag attends):
    the boundaries cu_seqlens states disagree with the documents' layout, the `segments` invariant."""
    a = adapters.get("megatron-core/gpt-inter-document-masking")
    remote = FamilyPacker(_envs.python_of(_envs.ensure("megatron")), a.name)

    def one_sequence(request):
        answer = remote(request)
        for mb in answer:
            for row in mb["rows"]:
                row["cu_seqlens"] = [0] + [row["cu_seqlens"][-1]] * (len(row["cu_seqlens"]) - 1)
        return answer

    try:
        with pytest.raises(packoracle.Counterexample) as caught:
            packoracle.fuzz(one_sequence, a.resolved_policy(), cases=60, seed=3, max_row_length=16, max_documents=8,
                            timeout=600)
    finally:
        remote.close()
    assert caught.value.invariant == "segments", caught.value.report


def test_areal_refuses_an_over_long_sample_in_its_environment_and_packs_the_rest():
    """seqpack.ffd_allocate's RuntimeError "Values [...] is larger than capacity N" is the kit's refusal (an
    `error` record: the worker stays); the same documents within the row length pack."""
    a = adapters.get("areal/packed-mb")
    remote = FamilyPacker(_envs.python_of(_envs.ensure("areal")), a.name)
    request = _request(a, [[11, 12, 13], [21, 22, 23, 24, 25], [31]], 5)
    try:
        rows = [r for mb in remote(request) for r in mb["rows"]]
        assert sorted(t for r in rows for t in r["input_ids"]) == [11, 12, 13, 21, 22, 23, 24, 25, 31]
        worker = remote.pid
        request["row_length"] = 4
        with pytest.raises(packoracle.Refuse, match=r"is larger than capacity 4"):
            remote(request)
        assert remote.pid == worker  # a refusal, not a crash: the worker waits for the next request
    finally:
        remote.close()


def test_areal_s_other_runtime_errors_stay_crashes():
    """Only the over-capacity message is a refusal: the allocator's other RuntimeError (and any other) is raised."""
    from packoracle.adapters.areal_pack import _refusing_over_long

    def raising(message):
        def split(batch, spec):
            raise RuntimeError(message)
        return split

    with pytest.raises(packoracle.Refuse, match="larger than capacity 4"):
        _refusing_over_long(raising("Values [ 3  5  1] is larger than capacity 4"), {}, None)
    other = "Cannot allocate values [3 5 1] that satisfies capacity 8, min_groups 4 and n_groups_divisor 1."
    with pytest.raises(RuntimeError, match="Cannot allocate"):
        _refusing_over_long(raising(other), {}, None)
    with pytest.raises(RuntimeError, match="is larger than capacity 4 and"):  # not the whole message
        _refusing_over_long(raising("Values [5] is larger than capacity 4 and more"), {}, None)


def test_axolotl_s_boundary_builders_as_exec_consumers_of_the_matrix():
    """get_unpad_data holds on the multipack mask; get_cu_seqlens_from_pos_ids leaks on a row that ends in
    one-token documents, the examined finding (explained)."""
    from packoracle.adapters.axolotl_masks import BUILDERS
    from packoracle.conformance._consumers import run_builders

    cells = {c.consumer.name: c for c in run_builders(60, 20261201, lambda name: name.startswith("axolotl/"))}
    assert sorted(cells) == sorted(b.name for b in BUILDERS)
    unpad, positions = cells["axolotl/get-unpad-data"], cells["axolotl/cu-seqlens-from-pos-ids"]
    assert unpad.verdict == "holds" and unpad.cases == 60, (unpad.verdict, unpad.detail, unpad.counterexample)
    assert positions.verdict == "leaks" and positions.explanation == "explained", positions.counterexample


def test_axolotl_s_get_unpad_data_fed_a_plain_padding_mask_is_caught(tmp_path):
    """get_unpad_data handed an all-ones mask (a padding mask, not multipack's 1..k): each row one sequence, served
    in the axolotl venv; the exec consumer's answer shows documents attending each other (`attention`)."""
    from packoracle.adapters.axolotl_pack import POLICY
    from packoracle.conformance._remote import packoracle_shim

    (tmp_path / "axolotl_plain.py").write_text(
        "import numpy as np\nfrom packoracle.adapters import axolotl_masks as m\n"
        "def plain(mb, policy):\n"
        "    rows = [dict(r, doc_ids=np.where(np.asarray(r['doc_ids']) < 0, -1, 0)) for r in mb['rows']]\n"
        "    return m.unpad_data({'rows': rows}, policy)\n")
    python = _envs.python_of(_envs.ensure("axolotl"))
    command = (f"env -u VIRTUAL_ENV PYTHONNOUSERSITE=1 PYTHONPATH={packoracle_shim()}:{tmp_path} {python} "
               f"-m packoracle.exec_server --microbatch-consumer axolotl_plain:plain")
    with pytest.raises(packoracle.Counterexample) as caught:
        packoracle.fuzz(None, dict(POLICY), exec_consumer=command, cases=60, seed=1, max_row_length=16,
                        max_documents=8, timeout=600)
    assert caught.value.invariant == "attention", caught.value.report

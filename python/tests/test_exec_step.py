"""The whole step over the exec protocol (DESIGN §6 "Other roles", §12): a step-view consumer gets the exec
packer's own microbatch record (``fuzz(exec_packer=..., step_view=True)``), and a consumer served by
``packoracle.exec_server`` gets what the in-process one gets: the step view (``--step-view``: layout and the exec
packer's record), its ``Computed`` work measured (a ``work`` record), and the value form (``--value-consumer``,
``exec_value_consumer=``, gradients with ``gradient=True``). Each mechanism is caught under its invariant and its
fixed twin passes."""
import io
import json
import os
import shlex
import sys

import pytest

import packoracle
from packoracle import exec_server

from .exec_role_callables import reads_packer_own
from .helpers import REPO_ROOT, small_fuzz

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "src")
PACKER_WITH_OWN_FIELD = (f"{shlex.quote(sys.executable)} "
                         f"{shlex.quote(os.path.join(REPO_ROOT, 'exec', 'test', 'candidates', 'reference_packer.py'))} --extra")


def served(role, spec, *flags):
    """The command that serves `spec` (module:function of python/tests) as `role` in a fresh interpreter."""
    return (f"env PYTHONPATH={shlex.quote(SRC + os.pathsep + HERE)} {shlex.quote(sys.executable)} "
            f"-m packoracle.exec_server --{role} {spec} {' '.join(flags)}").rstrip()


def test_an_in_process_step_view_consumer_gets_the_exec_packers_own_record():
    result = small_fuzz(None, "reference", exec_packer=PACKER_WITH_OWN_FIELD, microbatch_consumer=reads_packer_own,
                        step_view=True, cases=48)
    assert {"attention", "coverage"} <= set(result.checked)


def test_a_served_step_view_consumer_gets_the_exec_packers_own_record_and_only_with_the_step_view():
    consumer = served("microbatch-consumer", "exec_role_callables:reads_packer_own", "--step-view")
    result = small_fuzz(None, "reference", exec_packer=PACKER_WITH_OWN_FIELD, exec_consumer=consumer, cases=48)
    assert "attention" in result.checked
    with pytest.raises(packoracle.Counterexample) as info:  # the kit's reference packer: no record of its own
        small_fuzz(None, "reference", exec_consumer=consumer, cases=48)
    assert info.value.invariant == "attention" and "TypeError" in str(info.value), str(info.value)


def test_a_served_consumers_per_rank_arithmetic_on_the_layout_is_caught_and_the_held_shards_pass():
    divided = served("microbatch-consumer", "step_consumers:cu_seqlens_divided_by_cp", "--step-view")
    with pytest.raises(packoracle.Counterexample) as info:
        packoracle.fuzz(None, "reference", exec_consumer=divided, max_row_length=32, max_documents=6, cases=120, seed=3)
    assert info.value.invariant == "attention", str(info.value)
    assert len(info.value.minimal_case["documents"]) <= 2, str(info.value)
    held = served("microbatch-consumer", "step_consumers:boundaries_of_the_held_shards", "--step-view")
    packoracle.fuzz(None, "reference", exec_consumer=held, max_row_length=32, max_documents=6, cases=120, seed=3)


def test_a_served_consumers_work_is_measured_and_a_dense_dummy_row_breaks_consumer_overhead_zero():
    promised = {"preset": "reference", "consumer_overhead": 0}
    options = dict(cases=60, max_row_length=32, decoder=False)
    with pytest.raises(packoracle.Counterexample) as info:
        packoracle.fuzz(None, promised, exec_consumer=served("microbatch-consumer",
                                                             "exec_role_callables:consume_dense_dummy_row"), **options)
    assert info.value.invariant == "efficiency", str(info.value)
    assert "extra row" in str(info.value)
    result = packoracle.fuzz(None, promised, exec_consumer=served("microbatch-consumer",
                                                                  "exec_role_callables:consume_aligned"), **options)
    assert "efficiency" in result.checked
    assert result.consumer_work["computed"] == result.consumer_work["required"] > 0


VALUES = dict(max_row_length=16, max_documents=6, cases=150, seed=7)


def test_a_served_value_consumer_leaking_across_documents_is_caught_under_packing_invariance():
    pytest.importorskip("torch")
    with pytest.raises(packoracle.Counterexample) as info:
        packoracle.fuzz(None, "reference", exec_value_consumer=served("value-consumer",
                                                                      "exec_value_callables:row_norm_leak"), **VALUES)
    assert info.value.invariant == "packing_invariance", str(info.value)
    assert 1 <= len(info.value.minimal_case["documents"]) <= 3
    assert "exec_value_consumer=" in info.value.replay


def test_a_served_value_consumers_gradients_are_checked_the_nan_row_caught_and_its_twin_passing():
    pytest.importorskip("torch")
    with pytest.raises(packoracle.Counterexample) as info:
        packoracle.fuzz(None, "reference", gradient=True, exec_value_consumer=served(
            "value-consumer", "exec_value_callables:nan_past_last_seqlen"), **VALUES)
    assert info.value.invariant == "gradient", str(info.value)
    result = packoracle.fuzz(None, "reference", gradient=True, exec_value_consumer=served(
        "value-consumer", "exec_value_callables:zero_past_last_seqlen"), **VALUES)
    assert {"packing_invariance", "gradient"} <= set(result.checked)


def test_a_crashing_served_value_consumer_fails_its_case_and_the_kit_goes_on():
    pytest.importorskip("torch")
    with pytest.raises(packoracle.Counterexample) as info:
        packoracle.fuzz(None, "reference", exec_value_consumer=served(
            "value-consumer", "exec_value_callables:crash_on_two_documents"), **dict(VALUES, cases=60))
    assert info.value.invariant == "packing_invariance", str(info.value)
    assert "SIGABRT" in str(info.value)


def test_the_server_writes_the_work_record_after_the_masks_and_values_then_the_gradient():
    microbatch = {"record": "microbatch", "step": 0, "micro_step": 0, "rank": 0,
                  "rows": [{"input_ids": [5, 6, 7, 0], "labels": [6, 7, -100, -100], "doc_ids": [0, 0, 0, -1],
                            "doc_spans": [{"doc_uid": "a", "start": 0, "length": 3, "doc_offset": 0}]}]}
    layout = {"microbatch": 0, "dp_rank": 0, "dp_world_size": 1, "micro_step": 0, "micro_steps": 1,
              "context_parallel_size": 1, "context_parallel_scheme": "contiguous", "cp_shards": [[[[0, 4]]]]}
    consume = {"record": "consume_request", "id": 3, "policy": {}, "microbatch": microbatch, "layout": layout}
    out = io.StringIO()
    from .exec_role_callables import consume_dense_dummy_row
    exec_server.serve(microbatch_consumer=consume_dense_dummy_row, stdin=io.StringIO(json.dumps(consume) + "\n"),
                      stdout=out)
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["record"] for r in records] == ["mask", "work", "end"]
    assert records[1]["rows"] is None and records[1]["extra_rows"][0] == {
        "row_offsets": [0, 1, 2, 3, 4, 5], "run_begin": [0] * 5, "run_end": [5] * 5, "source": "dense"}

    def values(mb, policy, step):
        assert step["layout"]["cp_shards"] == [[[(0, 4)]]] and step["emitted"] is None
        return [[[float(t)] for t in row["input_ids"]] for row in mb["rows"]]

    ask = {"record": "value_request", "id": 4, "policy": {}, "microbatch": microbatch, "layout": layout,
           "gradient": False}
    out = io.StringIO()
    exec_server.serve(value_consumer=values, step_view=True, stdin=io.StringIO(json.dumps(ask) + "\n"), stdout=out)
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert records == [{"record": "values", "row": 0, "values": [[5.0], [6.0], [7.0], [0.0]], "id": 4},
                       {"record": "end", "id": 4}]
    out = io.StringIO()
    exec_server.serve(value_consumer=values, step_view=True, stdout=out,
                      stdin=io.StringIO(json.dumps(dict(ask, gradient=True, slot_weights=[[1, 1, 1, 0]])) + "\n"))
    error = json.loads(out.getvalue().splitlines()[0])
    assert error["record"] == "error" and "parameters" in error["message"], error  # no parameters() to differentiate


def test_a_role_given_both_in_process_and_as_a_command_is_refused():
    with pytest.raises(TypeError, match="give packer or exec_packer=, not both"):
        packoracle.fuzz(lambda request: [], "reference", exec_packer="python3 p.py")
    with pytest.raises(TypeError, match="give value_consumer or exec_value_consumer=, not both"):
        packoracle.fuzz(None, "reference", value_consumer=lambda mb, policy: [], exec_value_consumer="python3 v.py")

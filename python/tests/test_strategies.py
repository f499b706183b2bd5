"""packoracle.strategies with Hypothesis, as a user who already writes Hypothesis tests would use it: a property
over generated requests checked with packoracle.check_step, which Hypothesis shrinks when a packer is wrong;
and Hypothesis throwing garbage at check_batch and fuzz, which must answer with ValueError / TypeError or a
Counterexample, never a crash (issue 13 item 6, DESIGN §10 "Bad input")."""

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import packoracle
from tests.helpers import small_fuzz
from packoracle import strategies
from tests.packers import as_packer, pack_reference, pack_row_shifted

# Deterministic and fast: no example database and no explain-phase patches written into the repository, no
# deadline on a loaded machine.
PHASES = [Phase.explicit, Phase.generate, Phase.shrink]
QUIET = dict(database=None, deadline=None, derandomize=True, phases=PHASES)
FAST = settings(**QUIET, max_examples=150, suppress_health_check=[HealthCheck.too_slow])


# ---- the strategies themselves --------------------------------------------------------------------------------

@FAST
@given(strategies.documents(min_size=1, max_size=5, max_tokens=6, vocab=5, prompt_masking=True))
def test_documents_shape(docs):
    assert 1 <= len(docs) <= 5
    assert [d["doc_uid"] for d in docs] == [f"d{k}" for k in range(len(docs))]
    for d in docs:
        assert set(d) == {"doc_uid", "tokens", "supervised"}
        assert len(d["tokens"]) <= 6 and all(0 <= t < 5 for t in d["tokens"])
        assert len(d["supervised"]) == len(d["tokens"]) and set(d["supervised"]) <= {0, 1}
        assert d["supervised"] == sorted(d["supervised"])  # a prompt prefix, then the answer
    assert packoracle.canonical_documents(docs)[0]["doc_uid"] == "d0"  # the kit reads them as they are


@pytest.mark.parametrize("policy", ["reference", "hf-flatten", packoracle.Policy("reference", eos_id=2)],
                         ids=["reference", "hf-flatten", "reference+eos"])
def test_requests_shape(policy):
    resolved = packoracle.Policy(policy).to_dict()
    seen = {"multi": 0, "long": 0, "n": 0}

    @FAST
    @given(strategies.requests(policy, max_row_length=12))
    def check(request):
        assert set(request) == {"record", "id", "row_length", "micro_batch_rows", "dp_world_size", "policy",
                                "documents", "target_losses"}
        assert request["record"] == "request" and request["policy"] == resolved
        L, extra = request["row_length"], int(resolved["eos_id"] is not None)
        assert 1 <= L <= 12 and 1 <= request["micro_batch_rows"] <= 3 and 1 <= request["dp_world_size"] <= 2
        assert set(request["target_losses"]) == {d["doc_uid"] for d in request["documents"]}
        for d in request["documents"]:
            assert len(request["target_losses"][d["doc_uid"]]) == len(d["tokens"]) + extra
        lengths = [len(d["tokens"]) + extra for d in request["documents"]]
        seen["n"] += 1
        seen["long"] += any(n > L for n in lengths)
        seen["multi"] += sum(1 for n in lengths if 0 < n <= L // 2) >= 2
    check()
    # Documents pack: many requests have two documents that share a row; under overflow: error a document
    # longer than the row (a refusal) is the exception, not the rule.
    assert seen["multi"] >= seen["n"] // 4, seen
    assert 0 < seen["long"] <= seen["n"] // 3, seen


def test_requests_validates_its_arguments():
    with pytest.raises(ValueError, match="unknown|preset"):
        strategies.requests("no-such-preset")
    with pytest.raises(ValueError, match="max_row_length"):
        strategies.requests("reference", max_row_length=0)
    with pytest.raises(ValueError, match="vocab"):
        strategies.documents(vocab=0)


# ---- a property over requests, checked by the kit -------------------------------------------------------------

def answer_is_right(packer, request):
    """The property a user writes: the packer's answer passes check_step, or it refused and had to."""
    try:
        batch = packer(request)
    except packoracle.Refuse:
        L = request["row_length"]
        return request["policy"]["overflow"] == "error" and any(len(d["tokens"]) > L for d in request["documents"])
    report = packoracle.check_step([batch], request["documents"], request["policy"],
                                   row_length=request["row_length"])
    answer_is_right.last_report = report
    return report.ok


def test_correct_packer_satisfies_the_property():
    runs = []

    @FAST
    @given(strategies.requests("reference"))
    def prop(request):
        runs.append(request)
        assert answer_is_right(as_packer(pack_reference), request), str(answer_is_right.last_report)
    prop()
    assert len(runs) >= 100


def test_buggy_packer_is_caught_and_shrunk_by_hypothesis():
    failing = []

    @FAST
    @given(strategies.requests("reference"))
    def prop(request):
        ok = answer_is_right(as_packer(pack_row_shifted), request)
        if not ok:
            failing.append((request, answer_is_right.last_report))
        assert ok, str(answer_is_right.last_report)

    with pytest.raises(AssertionError) as info:
        prop()
    assert "targets" in str(info.value)
    # Hypothesis runs the shrunk example last.
    request, report = failing[-1]
    assert not report.ok and {v.invariant for v in report.violations} == {"targets"}
    docs = request["documents"]
    assert len(docs) <= 3, docs
    assert sum(1 for d in docs if d["tokens"]) >= 2  # a target into the next document needs two
    assert all(len(d["tokens"]) <= 2 for d in docs), docs
    assert request["row_length"] <= 4


def test_find_gives_the_minimal_case():
    minimal = find(strategies.requests("reference"),
                   lambda r: not answer_is_right(as_packer(pack_row_shifted), r),
                   settings=settings(**QUIET, max_examples=300))
    assert [d["tokens"] for d in minimal["documents"]] == [[0], [0]]
    assert minimal["row_length"] == 2


# ---- garbage at check_batch -----------------------------------------------------------------------------------

FIELDS = ["input_ids", "labels", "position_ids", "cu_seqlens", "cu_seq_lens_q", "cu_seq_lens_k", "seq_idx",
          "seq_lens", "doc_ids", "attention_mask", "loss_mask", "doc_spans", "max_length_q"]
DTYPES = st.sampled_from([np.int8, np.int32, np.int64, np.uint8, np.uint64, np.float32, np.float64, np.bool_,
                          np.complex64, object, "U3"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                    st.text(max_size=3), st.binary(max_size=3))


def _arrays():
    def build(dtype_and_shape):
        dtype, shape = dtype_and_shape
        if dtype is object:
            return hnp.arrays(object, shape, elements=SCALARS)
        return hnp.arrays(dtype, shape)
    shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)
    return st.tuples(DTYPES, shapes).flatmap(build)


GARBAGE_VALUES = st.recursive(
    st.one_of(SCALARS, _arrays()),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=12)

ROW = st.lists(st.integers(0, 5), min_size=0, max_size=6)
INT_DTYPES = st.sampled_from([np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.uint64, np.bool_])
SPAN = st.one_of(
    st.fixed_dictionaries({"doc_uid": st.sampled_from(["d0", "d1", "zz", ""]), "start": st.integers(-2, 8),
                           "length": st.integers(-2, 8), "doc_offset": st.integers(-2, 8)}),
    st.dictionaries(st.sampled_from(["doc_uid", "start", "length", "doc_offset", "x"]), SCALARS, max_size=4),
    SCALARS)


@st.composite
def nearly_valid_batches(draw):
    """Integer arrays of one shape for input_ids and labels (any integer dtype, any values), and some other
    fields: arrays of that shape or one slot off, boundary lists of any numbers, spans with any fields."""
    rows, n = draw(st.integers(1, 3)), draw(st.integers(0, 6))
    dtype = draw(INT_DTYPES)

    def array(off=0):
        return draw(hnp.arrays(dtype, (rows, max(n + off, 0))))
    batch = {"input_ids": array(), "labels": array()}
    for name in draw(st.sets(st.sampled_from(["position_ids", "doc_ids", "attention_mask", "loss_mask",
                                              "cu_seqlens", "seq_lens", "doc_spans", "max_length_q"]))):
        if name in ("cu_seqlens", "seq_lens"):
            batch[name] = draw(st.lists(st.lists(st.integers(-3, 10), max_size=4), min_size=rows, max_size=rows))
        elif name == "doc_spans":
            batch[name] = draw(st.lists(st.lists(SPAN, max_size=3), min_size=rows, max_size=rows))
        elif name == "max_length_q":
            batch[name] = draw(SCALARS)
        else:
            batch[name] = array(draw(st.sampled_from([0, 0, 0, -1, 1])))
    return batch


BATCHES = st.one_of(
    nearly_valid_batches(),
    st.dictionaries(st.sampled_from(FIELDS + ["tokens", "bogus"]), GARBAGE_VALUES, max_size=5),
    # Nearly right: the two required fields as lists of lists (maybe ragged, maybe of other lengths), extras.
    st.fixed_dictionaries({"input_ids": st.lists(ROW, max_size=3), "labels": st.lists(ROW, max_size=3)},
                          optional={f: GARBAGE_VALUES for f in FIELDS[2:] + ["bogus"]}),
    GARBAGE_VALUES,
)
DOCUMENTS = st.one_of(
    st.just({"d0": [1, 2, 3]}),
    st.just({"d0": [0, 1], "d1": [2]}),
    strategies.documents(max_size=3, vocab=4),
    st.dictionaries(st.text(max_size=3), GARBAGE_VALUES, max_size=3),
    st.lists(GARBAGE_VALUES, max_size=3),
)
POLICIES = st.one_of(
    st.just("reference"), st.just("hf-flatten"), st.just("torchtune-packed"),
    st.sampled_from(["no-such-preset", ""]),
    st.dictionaries(st.sampled_from(["preset", "pad_id", "overflow", "eos_id", "no_such_key", "attention"]),
                    st.one_of(SCALARS, st.sampled_from(["reference", "error", "split", "doc_causal"])), max_size=3),
    SCALARS,
)


@settings(**QUIET, max_examples=400, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(BATCHES, DOCUMENTS, POLICIES)
def test_check_batch_answers_garbage_with_value_or_type_errors(batch, documents, policy):
    try:
        report = packoracle.check_batch(batch, documents, policy)
    except (ValueError, TypeError) as e:
        assert str(e)  # a message that says what is wrong
        return
    assert isinstance(report, packoracle.Report)
    assert isinstance(report.ok, bool) and isinstance(str(report), str)


# ---- garbage returned to packoracle.fuzz ----------------------------------------------------------------------

NOT_A_BATCH = st.one_of(
    SCALARS,                                                                  # a number, a string, None ...
    st.lists(st.one_of(SCALARS, _arrays()), min_size=1, max_size=3),          # a list of things that are not dicts
    st.dictionaries(st.sampled_from(["labels", "position_ids", "bogus"]), GARBAGE_VALUES, max_size=3)
    .map(lambda d: {k: v for k, v in d.items() if k != "input_ids"}),       # no input_ids
    st.fixed_dictionaries({"input_ids": _arrays().filter(lambda a: a.dtype.kind in "fcOU"),
                           "labels": st.lists(ROW, max_size=2)}),            # input_ids not integers
    st.fixed_dictionaries({"input_ids": st.lists(ROW, max_size=2), "labels": st.lists(ROW, max_size=2),
                           # an unknown field (None is an absent field, as HF collators write one)
                           "bogus_field": GARBAGE_VALUES.filter(lambda v: v is not None)}),
)


@settings(**QUIET, max_examples=60, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(NOT_A_BATCH)
def test_fuzz_reports_garbage_from_a_packer_as_a_shape_counterexample(garbage):
    def returns_garbage(request):
        return garbage

    with pytest.raises(packoracle.Counterexample) as info:
        small_fuzz(returns_garbage, "reference", cases=3)
    assert info.value.invariant == "shape", str(info.value)
    assert "not a packed batch" in str(info.value)
    assert info.value.reproduce.startswith("v1:")

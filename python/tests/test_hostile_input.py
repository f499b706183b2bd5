"""Hostile input at the door of the Python API (issue 27): every bad argument is a ValueError or TypeError that
names the argument (or the field) and its value, before anything reaches the C++ core; the binding's own
signature errors never reach a user; and valid but unusual input (big-endian, non-contiguous, np.matrix, numpy
scalars, one micro-batch alone, float16 masks) gives exactly the report of its plain equivalent."""

from __future__ import annotations

import pathlib
import signal
import time

import numpy as np
import pytest

import packoracle
from tests.helpers import small_fuzz
from packoracle import guard, strategies
from packoracle.dump import DumpWriter
from tests.packers import as_packer, pack_reference

# np.matrix is deprecated but still met; torch's nested tensors warn that they are a prototype.
pytestmark = [pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning"),
              pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning")]

DOCS = {"a": [11, 12, 13], "b": [21, 22, 23, 24, 25, 26]}
POLICY = "hf-flatten"


def batch(dtype=np.int64) -> dict:
    """One flattened row as HF's DataCollatorWithFlattening writes it: clean under hf-flatten."""
    ids, labels, positions, cu = [], [], [], [0]
    for doc in DOCS.values():
        positions += range(len(doc))
        ids += doc
        labels += [-100] + doc[1:]
        cu.append(len(ids))
    return {"input_ids": np.array([ids], dtype), "labels": np.array([labels], np.int64),
            "position_ids": np.array([positions], dtype), "cu_seq_lens_q": np.array(cu, np.int32)}


def wrong_batch() -> dict:
    """The same row with positions that never reset: one positions violation, so that a misread array shows."""
    b = batch()
    b["position_ids"] = np.arange(9)[None]
    return b


def with_field(name, value) -> dict:
    b = batch()
    b[name] = value
    return b


def labels_uint64_minus_100() -> dict:
    labels = batch()["labels"].copy()
    out = labels.astype(np.uint64)
    out[labels == -100] = 2**64 - 100  # what -100 becomes when a producer writes labels as uint64
    return with_field("labels", out)


def input_ids_uint64_max() -> dict:
    ids = batch()["input_ids"].astype(np.uint64)
    ids[0, -1] = 2**64 - 1
    return with_field("input_ids", ids)


def negative_input_id() -> dict:
    ids = batch()["input_ids"].copy()
    ids[0, 4] = -7
    return with_field("input_ids", ids)


def span_start_str() -> dict:
    b = batch()
    b["doc_spans"] = [{"doc_uid": "a", "start": "0", "length": 3, "doc_offset": 0},
                      {"doc_uid": "b", "start": 3, "length": 6, "doc_offset": 0}]
    return b


def check_batch(b=None, docs=None, policy=POLICY, **kw):
    return packoracle.check_batch(batch() if b is None else b, DOCS if docs is None else docs, policy, **kw)


def check_step(mbs=None, **kw):
    return packoracle.check_step([batch()] if mbs is None else mbs, DOCS, POLICY, **kw)


def fuzz(**kw):
    kw.setdefault("cases", 1)
    return small_fuzz(as_packer(pack_reference), "reference", **kw)


@pytest.fixture(scope="module")
def dump(tmp_path_factory) -> str:
    """A clean one-step dump for verify and draw."""
    path = tmp_path_factory.mktemp("hostile") / "dump.jsonl"
    b = batch()
    spans = [{"doc_uid": "a", "start": 0, "length": 3, "doc_offset": 0},
             {"doc_uid": "b", "start": 3, "length": 6, "doc_offset": 0}]
    with DumpWriter(str(path)) as w:
        w.header(system="python", component="batch", policy=packoracle.Policy(POLICY).to_dict())
        w.documents([packoracle.Document(uid, tokens) for uid, tokens in DOCS.items()])
        w.write({"record": "microbatch", "step": 0, "micro_step": 0, "rank": 0, "rows": [
            {"input_ids": b["input_ids"][0].tolist(), "labels": b["labels"][0].tolist(),
             "position_ids": b["position_ids"][0].tolist(), "cu_seqlens": b["cu_seq_lens_q"].tolist(),
             "doc_spans": spans}]})
    return str(path)


def _torch():
    return pytest.importorskip("torch")


# (id, call, exception type, substrings the message must hold: the function, the argument or field, the value)
HOSTILE = [
    # check_batch: integers that are integers, in range
    ("check_batch step None", lambda d: check_batch(step=None), TypeError, ["check_batch", "step", "None"]),
    ("check_batch step str", lambda d: check_batch(step="1"), TypeError, ["step", "'1'"]),
    ("check_batch step -1", lambda d: check_batch(step=-1), ValueError, ["step", "-1"]),
    ("check_batch step bool", lambda d: check_batch(step=True), TypeError, ["step", "True"]),
    ("check_batch step float", lambda d: check_batch(step=1.0), TypeError, ["step", "1.0"]),
    ("check_batch micro_step -1", lambda d: check_batch(micro_step=-1), ValueError, ["micro_step", "-1"]),
    ("check_batch rank 5 of 1", lambda d: check_batch(rank=5), ValueError, ["rank", "dp_world_size", "5"]),
    ("check_batch rank -1", lambda d: check_batch(rank=-1), ValueError, ["rank", "-1"]),
    ("check_batch rank nan", lambda d: check_batch(rank=float("nan")), TypeError, ["rank", "nan"]),
    ("check_batch dp_world_size 0", lambda d: check_batch(dp_world_size=0), ValueError, ["dp_world_size", "0"]),
    ("check_batch dp_world_size -1", lambda d: check_batch(dp_world_size=-1), ValueError, ["dp_world_size", "-1"]),
    ("check_batch dp_world_size str", lambda d: check_batch(dp_world_size="1"), TypeError, ["dp_world_size", "'1'"]),
    ("check_batch row_length 0", lambda d: check_batch(row_length=0), ValueError, ["row_length", "0"]),
    ("check_batch row_length -1", lambda d: check_batch(row_length=-1), ValueError, ["row_length", "-1"]),
    ("check_batch row_length str", lambda d: check_batch(row_length="9"), TypeError, ["row_length", "'9'"]),
    ("check_batch row_length 2**63", lambda d: check_batch(row_length=2**63), ValueError,
     ["row_length", str(2**63)]),
    ("check_batch decoder str", lambda d: check_batch(decoder="yes"), TypeError, ["decoder", "'yes'"]),
    ("check_batch ignore int", lambda d: check_batch(ignore=5), TypeError, ["ignore", "5"]),
    ("check_batch producer str", lambda d: check_batch(producer="x"), TypeError, ["producer", "str"]),
    ("check_batch producer value str", lambda d: check_batch(producer={"loss": "x"}), ValueError, ["loss", "'x'"]),
    # arrays: values that do not fit int64, negative ids, fields of the wrong kind
    ("uint64 labels 2**64-100", lambda d: check_batch(labels_uint64_minus_100()), ValueError,
     ["labels", str(2**64 - 100)]),
    ("uint64 token 2**64-1", lambda d: check_batch(input_ids_uint64_max(), policy=packoracle.Policy(POLICY, pad_id=-1)),
     ValueError, ["input_ids", str(2**64 - 1)]),
    ("negative input id", lambda d: check_batch(negative_input_id()), ValueError, ["input_ids[0, 4]", "-7"]),
    ("negative label", lambda d: check_batch(with_field("labels", np.array([[-100, 12, 13, -1, 22, 23, 24, 25, 26]]))),
     ValueError, ["labels[0, 3]", "-1"]),
    ("negative document token", lambda d: check_batch(docs={"a": [11, -12, 13], "b": DOCS["b"]}), ValueError,
     ["documents['a']", "tokens[1]", "-12"]),
    ("doc span start str", lambda d: check_batch(span_start_str()), ValueError, ["doc_spans[0]", "start", "'0'"]),
    ("lone surrogate uid", lambda d: check_batch(docs={"a\ud800": [11, 12, 13], "b": DOCS["b"]}), ValueError,
     ["doc_uid"]),
    ("float input_ids", lambda d: check_batch(with_field("input_ids", batch()["input_ids"].astype(float))), TypeError,
     ["input_ids", "float64"]),
    ("sparse tensor", lambda d: check_batch(with_field("input_ids", _torch().tensor(batch()["input_ids"]).to_sparse())),
     ValueError, ["input_ids", "sparse"]),
    ("nested tensor", lambda d: check_batch(with_field("position_ids", _torch().nested.nested_tensor(
        [_torch().arange(3), _torch().arange(6)]))), ValueError, ["position_ids", "nested"]),
    ("bf16 input_ids", lambda d: check_batch(with_field("input_ids", _torch().tensor(batch()["input_ids"]).bfloat16())),
     TypeError, ["input_ids", "bfloat16"]),
    # check_step
    ("check_step step None", lambda d: check_step(step=None), TypeError, ["check_step", "step", "None"]),
    ("check_step dp_world_size 0", lambda d: check_step(dp_world_size=0), ValueError, ["dp_world_size", "0"]),
    ("check_step row_length -1", lambda d: check_step(row_length=-1), ValueError, ["row_length", "-1"]),
    ("check_step rank beyond the world", lambda d: check_step([dict(batch(), rank=2)], dp_world_size=2), ValueError,
     ["microbatches[0]", "rank", "2"]),
    ("check_step micro_step -1", lambda d: check_step([dict(batch(), micro_step=-1)]), ValueError,
     ["microbatches[0]", "micro_step", "-1"]),
    ("check_step rank None", lambda d: check_step([dict(batch(), rank=None)]), TypeError,
     ["microbatches[0]", "rank", "None"]),
    ("check_step None", lambda d: check_step(None or 5), TypeError, ["check_step", "microbatches", "int"]),
    ("check_step rank 2**63-1", lambda d: check_step([dict(batch(), rank=2**63 - 1)]), ValueError,
     ["check_step", "microbatches[0]", "rank", str(2**63 - 1)]),
    # fuzz
    ("fuzz cases True", lambda d: fuzz(cases=True), TypeError, ["fuzz", "cases", "True"]),
    ("fuzz cases 0", lambda d: fuzz(cases=0), ValueError, ["cases", "0"]),
    ("fuzz cases float", lambda d: fuzz(cases=2.0), TypeError, ["cases", "2.0"]),
    ("fuzz seed -1", lambda d: fuzz(seed=-1), ValueError, ["seed", "-1"]),
    ("fuzz seed 2**64", lambda d: fuzz(seed=2**64), ValueError, ["seed", str(2**64)]),
    ("fuzz seed str", lambda d: fuzz(seed="1"), TypeError, ["seed", "'1'"]),
    ("fuzz time inf", lambda d: fuzz(time=float("inf"), cases=None), ValueError, ["time", "inf"]),
    ("fuzz time 1e300", lambda d: fuzz(time=1e300), ValueError, ["time", "1e+300"]),
    ("fuzz time nan", lambda d: fuzz(time=float("nan")), ValueError, ["time", "nan"]),
    ("fuzz time 0", lambda d: fuzz(time=0), ValueError, ["time", "0"]),
    ("fuzz time str", lambda d: fuzz(time="5"), TypeError, ["time", "'5'"]),
    ("fuzz max_row_length 0", lambda d: fuzz(max_row_length=0), ValueError, ["max_row_length", "0"]),
    ("fuzz max_row_length -1", lambda d: fuzz(max_row_length=-1), ValueError, ["max_row_length", "-1"]),
    ("fuzz max_row_length 2**40", lambda d: fuzz(max_row_length=2**40), ValueError, ["max_row_length", str(2**40)]),
    ("fuzz max_row_length str", lambda d: fuzz(max_row_length="16"), TypeError, ["max_row_length", "'16'"]),
    ("fuzz reproduce empty", lambda d: fuzz(reproduce=""), ValueError, ["reproduce", "''"]),
    ("fuzz reproduce int", lambda d: fuzz(reproduce=5), TypeError, ["reproduce", "5"]),
    ("fuzz decoder str", lambda d: fuzz(decoder="yes"), TypeError, ["decoder", "'yes'"]),
    ("fuzz sft_masks int", lambda d: fuzz(sft_masks=1), TypeError, ["sft_masks", "1"]),
    ("fuzz save_regressions int", lambda d: fuzz(save_regressions=5), TypeError, ["save_regressions", "5"]),
    ("fuzz name int", lambda d: fuzz(name=5), TypeError, ["name", "5"]),
    ("fuzz timeout 0", lambda d: fuzz(timeout=0), ValueError, ["timeout", "0"]),
    ("fuzz timeout inf", lambda d: fuzz(timeout=float("inf")), ValueError, ["timeout", "inf"]),
    ("fuzz timeout str", lambda d: fuzz(timeout="10"), TypeError, ["timeout", "'10'"]),
    # verify and draw
    ("verify row_length -1", lambda d: packoracle.verify(d, row_length=-1), ValueError, ["verify", "row_length", "-1"]),
    ("verify paths None", lambda d: packoracle.verify(None), TypeError, ["verify", "paths", "None"]),
    ("verify paths empty", lambda d: packoracle.verify([]), ValueError, ["verify", "paths"]),
    ("verify path with NUL", lambda d: packoracle.verify(d + "\0x"), ValueError, ["verify", "paths", "NUL", "\\x00x"]),
    ("verify max_violations -1", lambda d: packoracle.verify(d, max_violations=-1), ValueError,
     ["max_violations", "-1"]),
    ("verify partial str", lambda d: packoracle.verify(d, partial="no"), TypeError, ["partial", "'no'"]),
    ("verify preset int", lambda d: packoracle.verify(d, preset=5), TypeError, ["preset", "5"]),
    ("draw row -1", lambda d: packoracle.draw(d, row=-1, write_svg=False), ValueError, ["draw", "row", "-1"]),
    ("draw row str", lambda d: packoracle.draw(d, row="0", write_svg=False), TypeError, ["row", "'0'"]),
    ("draw step -1", lambda d: packoracle.draw(d, step=-1, write_svg=False), ValueError, ["step", "-1"]),
    ("draw write_svg str", lambda d: packoracle.draw(d, write_svg="no"), TypeError, ["write_svg", "'no'"]),
    # the Hypothesis strategies
    ("strategies.requests max_row_length str", lambda d: strategies.requests(max_row_length="16"), TypeError,
     ["strategies.requests", "max_row_length", "'16'"]),
    ("strategies.requests max_dp_world_size 0", lambda d: strategies.requests(max_dp_world_size=0), ValueError,
     ["max_dp_world_size", "0"]),
    ("strategies.documents max_size bool", lambda d: strategies.documents(max_size=True), TypeError,
     ["strategies.documents", "max_size", "True"]),
    ("strategies.documents prompt_masking str", lambda d: strategies.documents(prompt_masking="yes"), TypeError,
     ["prompt_masking", "'yes'"]),
    # Policy and Report
    ("Policy int", lambda d: packoracle.Policy(5), TypeError, ["policy", "int"]),
    ("Policy value str", lambda d: packoracle.Policy("reference", pad_id="x"), ValueError, ["pad_id"]),
    ("Policy lone surrogate", lambda d: packoracle.Policy("ref\ud800"), ValueError, ["policy", "preset"]),
    ("Report.svg row -1", lambda d: check_batch().svg(-1), ValueError, ["Report.svg", "row", "-1"]),
    ("Report.svg row str", lambda d: check_batch().svg("0"), TypeError, ["Report.svg", "row", "'0'"]),
]


@pytest.mark.parametrize("call, kind, words", [pytest.param(*case[1:], id=case[0]) for case in HOSTILE])
def test_a_bad_argument_is_a_clear_error_naming_it(call, kind, words, dump):
    with pytest.raises(kind) as raised:
        call(dump)
    message = str(raised.value)
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"
    assert "incompatible function arguments" not in message  # never the binding's signature dump


INTEGER_WRONG = [True, "1", 1.5, float("nan"), float("inf"), -1, 2**64, [1], {}]
WRONG = {
    "integer": INTEGER_WRONG + [None],
    "optional integer": INTEGER_WRONG,
    "flag": [None, "yes", 1, 1.5, [1]],
    "seconds": [True, "1", float("nan"), float("inf"), 1e300, -1, 0, [1]],
    "optional text": [True, 1, 1.5, [1], {}, ""],
}
ARGUMENTS = {
    check_batch: {"step": "integer", "micro_step": "integer", "rank": "integer", "dp_world_size": "integer",
                  "row_length": "optional integer", "decoder": "flag"},
    check_step: {"step": "integer", "dp_world_size": "optional integer", "row_length": "optional integer",
                 "decoder": "flag"},
    fuzz: {"cases": "optional integer", "seed": "optional integer", "time": "seconds",
           "max_row_length": "integer", "reproduce": "optional text", "decoder": "flag", "sft_masks": "flag",
           "save_regressions": "optional text", "name": "optional text", "timeout": "seconds"},
}


@pytest.mark.parametrize("fn, arg, kind", [pytest.param(fn, arg, kind, id=f"{fn.__name__}-{arg}")
                                           for fn, args in ARGUMENTS.items() for arg, kind in args.items()])
def test_every_wrong_value_of_every_argument_is_refused_naming_it(fn, arg, kind):
    """Values of every wrong kind: never the binding's signature error, never anything but a ValueError or
    TypeError naming the argument (no exception would be a silent acceptance; a Counterexample, one by fuzz)."""
    for value in WRONG[kind]:
        with pytest.raises((TypeError, ValueError)) as raised:
            fn(**{arg: value})
        message = str(raised.value)
        assert not isinstance(raised.value, packoracle.Counterexample), (arg, value, message)
        assert arg in message and "incompatible function arguments" not in message, (arg, value, message)


# The same classes on the other public functions (those that read a dump get the module's clean one).
def _guard_step(dump, **kw):
    mb = dict(batch(), producer={"denominator": 7, "denominator_scope": "global"})
    return guard.check_step([mb], policy=POLICY, on_violation=lambda e: None, **kw)


ARGUMENTS_OF_THE_REST = {
    "verify": (lambda d, **kw: packoracle.verify(d, **kw),
               {"row_length": "optional integer", "partial": "flag", "decoder": "flag", "oracle": "flag",
                "max_violations": "integer"}),
    "draw": (lambda d, **kw: packoracle.draw(d, **dict({"write_svg": False}, **kw)),
             {"row": "integer", "step": "optional integer", "write_svg": "flag"}),
    "which_policy": (lambda d, **kw: packoracle.which_policy(as_packer(pack_reference), **kw),
                     {"cases": "optional integer", "seed": "optional integer"}),
    "guard.check_step": (_guard_step, {"step": "integer"}),
    "guard.wrap_dataloader": (lambda d, **kw: list(guard.wrap_dataloader([batch()], POLICY, **kw)), {"every": "integer"}),
    "strategies.requests": (lambda d, **kw: strategies.requests(**kw),
                            {"min_row_length": "integer", "max_row_length": "integer", "max_documents": "integer",
                             "prompt_masking": "flag", "max_micro_batch_rows": "integer",
                             "max_dp_world_size": "integer"}),
    "strategies.documents": (lambda d, **kw: strategies.documents(**kw),
                             {"min_size": "integer", "max_size": "integer", "min_tokens": "integer",
                              "max_tokens": "integer", "prompt_masking": "flag"}),
}


@pytest.mark.parametrize("name, arg, kind", [pytest.param(name, arg, kind, id=f"{name}-{arg}")
                                             for name, (_, args) in ARGUMENTS_OF_THE_REST.items()
                                             for arg, kind in args.items()])
def test_every_wrong_value_of_every_other_public_argument_is_refused_naming_it(name, arg, kind, dump):
    call = ARGUMENTS_OF_THE_REST[name][0]
    for value in WRONG[kind]:
        with pytest.raises((TypeError, ValueError)) as raised:
            call(dump, **{arg: value})
        message = str(raised.value)
        assert arg in message and "incompatible function arguments" not in message, (name, arg, value, message)


# ---- exceptions raised by the answer of a fuzzed callable fail that case, they do not escape fuzz -------------

class ItemsRaise(dict):
    def items(self):
        raise RuntimeError("items() of the answer raised")


class ArrayRaises:
    def __array__(self, *args, **kwargs):
        raise RuntimeError("__array__ of the answer raised")


@pytest.mark.parametrize("answer, words", [
    (lambda r: [ItemsRaise(input_ids=[1], labels=[1])], ["items() of the answer raised", "Traceback"]),
    (lambda r: [{"input_ids": ArrayRaises(), "labels": ArrayRaises()}], ["__array__ of the answer raised",
                                                                         "input_ids"]),
], ids=["Mapping.items", "__array__"])
def test_an_answer_that_raises_fails_its_case(answer, words):
    with pytest.raises(packoracle.Counterexample) as raised:
        small_fuzz(answer, "reference", cases=4)
    for word in words:
        assert word in str(raised.value)


def test_uint64_labels_from_a_fuzzed_packer_are_not_read_as_minus_100():
    def uint64_labels(request):
        out = as_packer(pack_reference)(request)
        labels = np.asarray(out["labels"])
        wrapped = labels.astype(np.uint64)  # -100 wraps to 2**64 - 100
        return dict(out, labels=wrapped)
    assert small_fuzz(as_packer(pack_reference), "reference", cases=64).cases == 64  # the packer itself is right
    with pytest.raises(packoracle.Counterexample) as raised:
        small_fuzz(uint64_labels, "reference", cases=64)
    assert str(2**64 - 100) in str(raised.value) and "labels" in str(raised.value)


# ---- valid but unusual input: the same report as its plain equivalent -------------------------------------------

def _transform_all(b: dict, f) -> dict:
    return {k: f(v) for k, v in b.items()}


def _every_other(v: np.ndarray) -> np.ndarray:
    """The same values in a non-contiguous view (every other element of a wider array)."""
    wide = np.zeros(v.shape[:-1] + (2 * v.shape[-1],), v.dtype)
    wide[..., ::2] = v
    out = wide[..., ::2]
    assert out.size <= 1 or not out.flags.c_contiguous
    return out


def _fortran_column(v: np.ndarray) -> np.ndarray:
    """A row taken out of a Fortran-ordered 2-D array (strided across rows)."""
    if v.ndim == 1:
        return v
    f = np.asfortranarray(np.repeat(v, 3, axis=0))
    return f[1:2]


UNUSUAL = [
    ("big-endian", lambda b: _transform_all(b, lambda v: v.astype(v.dtype.newbyteorder(">")))),
    ("little-endian explicit", lambda b: _transform_all(b, lambda v: v.astype(v.dtype.newbyteorder("<")))),
    ("non-contiguous", lambda b: _transform_all(b, _every_other)),
    ("fortran rows", lambda b: _transform_all(b, _fortran_column)),
    ("reversed twice", lambda b: _transform_all(b, lambda v: v[..., ::-1].copy()[..., ::-1])),
    ("np.matrix", lambda b: {k: (np.matrix(v) if v.ndim == 2 else v) for k, v in b.items()}),
    ("uint32 ids", lambda b: dict(b, input_ids=b["input_ids"].astype(np.uint32))),
    ("uint64 ids that fit", lambda b: dict(b, input_ids=b["input_ids"].astype(np.uint64),
                                           position_ids=b["position_ids"].astype(np.uint64))),
    ("torch non-contiguous", lambda b: {k: _torch().from_numpy(np.repeat(v, 2, axis=-1))[..., ::2] for k, v in b.items()}),
]


@pytest.mark.parametrize("make", [pytest.param(m, id=i) for i, m in UNUSUAL])
@pytest.mark.parametrize("base", [batch, wrong_batch], ids=["clean", "violation"])
def test_unusual_arrays_read_as_their_plain_equivalent(make, base):
    plain = packoracle.check_batch(base(), DOCS, POLICY)
    unusual = packoracle.check_batch(make(base()), DOCS, POLICY)
    assert str(unusual) == str(plain)
    assert unusual.violations == plain.violations


@pytest.mark.parametrize("name, value", [
    ("step", np.int64(3)), ("micro_step", np.uint8(2)), ("rank", np.int32(1)), ("dp_world_size", np.int64(2)),
    ("row_length", np.int16(9)), ("decoder", np.bool_(True)),
], ids=lambda v: str(v))
def test_numpy_scalars_are_the_numbers_they_hold(name, value):
    kw = {"dp_world_size": 2}
    plain = check_batch(wrong_batch(), **dict(kw, **{name: value.item()}))
    numpy = check_batch(wrong_batch(), **dict(kw, **{name: value}))
    assert str(numpy) == str(plain) and numpy.violations == plain.violations


def _outcome(fn):
    try:
        return ("value", fn())
    except (TypeError, ValueError) as e:
        return (type(e), str(e))


def _places():
    from hypothesis import strategies as st
    near = st.sampled_from([0, 1, 2, 3, -1, 2**63 - 1, 2**63, -(2**63)])
    odd = st.sampled_from([True, False, 1.0, "1", None, np.int64(2), np.uint8(1), np.bool_(True), [1]])
    return st.one_of(near, st.integers(-5, 5), odd)


@pytest.mark.parametrize("seed", range(1))
def test_batch_place_reads_what_the_four_integer_checks_read(seed):
    """_args.batch_place (check_batch's one call for its step, micro_step, rank and dp_world_size) answers what
    integer() and rank_below() answer in check_batch's order: the same values, or the same error."""
    from hypothesis import given, settings
    from packoracle import _args

    def four(at, step, micro_step, rank, world):
        step = _args.integer(step, at, "step", 0, _args.INT64_MAX)
        micro_step = _args.integer(micro_step, at, "micro_step", 0, _args.INT64_MAX)
        world = _args.integer(world, at, "dp_world_size", 1, _args.INT64_MAX)
        rank = _args.integer(rank, at, "rank", 0, _args.INT64_MAX)
        _args.rank_below(rank, world, at)
        return step, micro_step, rank, world

    @settings(max_examples=600, deadline=None)
    @given(_places(), _places(), _places(), _places())
    def check(step, micro_step, rank, world):
        got = _outcome(lambda: _args.batch_place("check_batch", step, micro_step, rank, world))
        want = _outcome(lambda: four("check_batch", step, micro_step, rank, world))
        assert got == want
        if got[0] == "value":
            assert all(type(v) is int for v in got[1])

    check()


def test_a_producer_of_plain_numbers_reads_as_scalar_reads_each():
    """_batch._producer's common form (a dict of Python numbers and the scope's name) read without scalar()
    gives what scalar() gives value by value; numpy scalars and one-element tensors still go through it."""
    from packoracle._batch import _producer, scalar

    class Count(int):  # an int subclass: scalar() keeps it as it is
        pass

    class Held:  # a one-element container: scalar() asks it for its number
        def item(self):
            return 99

    forms = [{"loss_sum": 3.5, "denominator": 7, "denominator_scope": "global"},
             {"denominator": np.int64(7), "denominator_scope": "global"},
             {"loss": np.float32(0.5)}, {"loss": np.float64(0.5)}, {"denominator": Count(7), "denominator_scope": "global"},
             {"denominator": Held(), "denominator_scope": "global"}, {}]
    for form in forms:
        got = _producer(form, "batch")
        assert got == {k: scalar(v) for k, v in form.items()} and got is not form
        assert [type(v) for v in got.values()] == [type(scalar(v)) for v in form.values()]
    assert _producer({"denominator": Held()}, "batch") == {"denominator": 99}


def test_numpy_numbers_in_the_strategies_draw_the_same():
    from hypothesis import find
    plain = find(strategies.requests(max_row_length=12, max_documents=4, vocab=5),
                 lambda r: len(r["documents"]) == 4 and r["row_length"] == 12)
    numpy = find(strategies.requests(max_row_length=np.int64(12), max_documents=np.int32(4), vocab=np.uint8(5)),
                 lambda r: len(r["documents"]) == 4 and r["row_length"] == 12)
    assert numpy == plain


def test_a_numpy_scalar_is_accepted_as_a_policy_value():
    policy = packoracle.Policy(POLICY, pad_id=np.int64(7), loss_mask=np.bool_(False))
    assert policy == packoracle.Policy(POLICY, pad_id=7, loss_mask=False)
    assert policy["pad_id"] == 7 and type(policy["pad_id"]) is int
    as_dict = packoracle.Policy({"preset": POLICY, "ignore_index": np.int32(-100)})
    assert str(check_batch(wrong_batch(), policy=as_dict)) == str(check_batch(wrong_batch()))


def test_check_step_takes_one_micro_batch_alone():
    assert str(packoracle.check_step(wrong_batch(), DOCS, POLICY)) == str(
        packoracle.check_step([wrong_batch()], DOCS, POLICY))
    assert not packoracle.check_step(wrong_batch(), DOCS, POLICY).ok


def test_half_precision_loss_masks_read_as_float32():
    torch = _torch()
    mask = np.ones((1, 9), np.float32)
    mask[0, 4] = 0
    plain = str(check_batch(with_field("loss_mask", mask)))
    assert str(check_batch(with_field("loss_mask", mask.astype(np.float16)))) == plain
    assert str(check_batch(with_field("loss_mask", torch.from_numpy(mask).bfloat16()))) == plain


def test_a_negative_id_the_policy_declares_is_accepted():
    """Padding with pad_id -1 (the policy's own id) is not a negative token id."""
    policy = packoracle.Policy("reference", pad_id=-1)
    ids = np.array([[11, 12, 13, -1]])
    labels = np.array([[12, 13, -100, -100]])
    report = packoracle.check_batch({"input_ids": ids, "labels": labels}, {"a": [11, 12, 13]}, policy)
    assert report.ok, str(report)


def test_paths_and_numpy_numbers_in_verify_and_draw(dump):
    assert str(packoracle.verify(pathlib.Path(dump), row_length=np.int64(9))) == str(packoracle.verify(dump,
                                                                                                     row_length=9))
    assert packoracle.draw(pathlib.Path(dump), row=np.int64(0), write_svg=False).svg == packoracle.draw(
        dump, row=0, write_svg=False).svg


def test_numpy_numbers_in_fuzz_run_the_same_cases():
    plain = small_fuzz(as_packer(pack_reference), "reference", cases=40, seed=7, max_row_length=12)
    numpy = small_fuzz(as_packer(pack_reference), "reference", cases=np.int32(40), seed=np.uint64(7),
                            max_row_length=np.int64(12), decoder=np.bool_(True))
    assert (numpy.cases, numpy.profiles, numpy.checked) == (plain.cases, plain.profiles, plain.checked)


@pytest.mark.parametrize("convert", [
    lambda v: np.asarray(v).astype(np.asarray(v).dtype.newbyteorder(">")),
    lambda v: _every_other(np.asarray(v)),
    lambda v: np.matrix(v) if np.asarray(v).ndim == 2 else v,
], ids=["big-endian", "non-contiguous", "np.matrix"])
def test_a_fuzzed_packer_answering_unusual_arrays_passes(convert):
    """A correct packer stays correct whatever array form it answers in (big-endian answers once failed
    with a false shape counterexample)."""
    def packer(request):
        out = as_packer(pack_reference)(request)
        return {k: convert(v) for k, v in out.items()}
    assert small_fuzz(packer, "reference", cases=64).cases == 64


# ---- a per-answer deadline: a callable that hangs fails its case, with its stack; the run never hangs -----------

def _hangs_on_three_documents(request):
    if len(request["documents"]) >= 3:
        time.sleep(1000)  # the line the report must show
    return as_packer(pack_reference)(request)


def _spins_on_three_documents(request):
    while len(request["documents"]) >= 3:
        pass
    return as_packer(pack_reference)(request)


@pytest.mark.parametrize("packer, line", [(_hangs_on_three_documents, "time.sleep(1000)"),
                                          (_spins_on_three_documents, "while len(request")],
                         ids=["sleeps", "spins"])
def test_a_packer_that_hangs_fails_its_case_with_its_stack(packer, line):
    start = time.monotonic()
    with pytest.raises(packoracle.Counterexample) as raised:
        small_fuzz(packer, "reference", cases=200, timeout=1)
    elapsed = time.monotonic() - start
    text = str(raised.value)
    assert "the packer gave no answer within" in text and line in text and packer.__name__ in text
    assert "_fuzz.py" not in text  # the kit's own frames are left out of the stack
    assert elapsed < 60, elapsed  # one full timeout, then shortened deadlines while shrinking


def test_a_reducer_that_hangs_fails_its_case():
    def reducer(request):
        time.sleep(1000)
    with pytest.raises(packoracle.Counterexample) as raised:
        small_fuzz(as_packer(pack_reference), "reference", reducer=reducer, cases=5, timeout=0.5)
    assert "the loss reducer gave no answer within" in str(raised.value)


def test_the_deadline_leaves_no_timer_and_restores_the_handler():
    def mine(signum, frame):
        pass
    previous = signal.signal(signal.SIGALRM, mine)
    try:
        assert small_fuzz(as_packer(pack_reference), "reference", cases=64, timeout=5).cases == 64
        assert signal.getsignal(signal.SIGALRM) is mine
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    finally:
        signal.signal(signal.SIGALRM, previous)


def test_an_armed_timer_of_someone_else_is_left_alone():
    """pytest-timeout's signal method arms SIGALRM for the whole test: fuzz does not take it over."""
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(signum))
    signal.setitimer(signal.ITIMER_REAL, 30)
    try:
        small_fuzz(as_packer(pack_reference), "reference", cases=32, timeout=5)
        remaining = signal.getitimer(signal.ITIMER_REAL)[0]
        assert 0 < remaining <= 30 and not fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_a_huge_bad_row_reports_the_first_violations_and_counts_the_rest():
    """Issue 27 item 5: every slot of a long row wrong (a token of no document) is one coverage violation each;
    the core keeps the first kMaxViolationsKept in full and counts the rest (10^7 slots gave
    MemoryError: std::bad_alloc when every one was kept)."""
    n = 100_000
    batch = {"input_ids": np.full((1, n), 7, dtype=np.int64), "labels": np.full((1, n), -100), "doc_spans": [[]]}
    report = packoracle.check_batch(batch, {"a": [5, 6]}, "reference")
    assert not report.ok
    assert len(report.violations) <= 1001  # 1000 kept of the row, and the document never placed
    text = str(report)
    assert f"verdict: {n + 1} violation(s): coverage {n + 1}" in text
    assert "… and 99,981 more (the first 1000 kept in full, the rest counted" in text
    assert report.to_json()["violations_not_kept"] == n + 1 - len(report.violations)


def test_a_document_placed_by_100000_spans_is_a_bounded_report():
    """Issue 44 item 4: 100,000 identical spans (each a piece of the one document) took 45 s: the pieces of a
    document were summed once per span, and every "packed twice" finding of the tiling was kept. Each document is
    now retired once a step, and the tiling's findings past kMaxViolationsKept are counted, not kept."""
    n = 100_000
    b = {"input_ids": np.array([[11, 12, 13]]), "labels": np.array([[-100, 12, 13]]),
         "position_ids": np.array([[0, 1, 2]]), "cu_seq_lens_q": np.array([0, 3]),
         "doc_spans": [[{"doc_uid": "a", "start": 0, "length": 3, "doc_offset": 0}] * n]}
    report = packoracle.check_batch(b, {"a": [11, 12, 13]}, "hf-flatten")
    assert not report.ok and len(report.violations) == 1000
    total = report.to_json()["violations_not_kept"] + len(report.violations)
    assert total == 4 * n - 4  # 3 slots claimed n - 1 more times each, and n - 1 pieces packed twice
    assert f"verdict: {total} violation(s): coverage {total}" in str(report)

"""The core's reader of a batch (`_core.batch_view`, check_batch's and the guard's common form read in one
call: python/binding/batch.cc), pinned to canonical_microbatch, the public reading it stands in for:

- where the core reads a batch, the micro-batch the audit gets is the one canonical_microbatch's dict gives,
  field by field, row by row, spans given or derived from the documents;
- where canonical_microbatch (or the audit's reading of its dict) refuses a batch, the core's reader gives up
  (None), so that the Python reader names the problem as before;
- the common forms (torch int64 rows × slots, a flattened row, HF's flash-attention kwargs, int32 and bool
  arrays) are read by the core, and check_batch's report (text, JSON, drawings) is the same either way.
"""

import collections
import contextlib
import unittest.mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import packoracle
from packoracle import _core
from packoracle._args import signed_ids
from packoracle._batch import SpanMatcher, canonical_microbatch, read_batch
from packoracle._documents import canonical_documents
from packoracle._policy import resolve

torch = pytest.importorskip("torch")

POLICY = resolve("reference")
DOCUMENTS = canonical_documents({"a": [5, 6, 7], "b": [8, 9], "c": [5, 6]}, policy=POLICY)
SPECIAL = st.sampled_from([-1, -3, -100, 2**40])  # a negative id (allowed in labels only: -100), a wide value


def _plain(value):
    """A reading as nested Python values (arrays as lists), so that two readings compare with ==."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def _form(draw, values, rows, slots):
    """values (rows × slots) in one of the forms a batch field comes in, common and not."""
    array = np.asarray(values, dtype=np.int64).reshape(rows, slots)
    if draw(st.integers(0, 7)) == 3:  # now and then one special value somewhere
        array[draw(st.integers(0, rows - 1)), draw(st.integers(0, slots - 1))] = draw(SPECIAL)
    common = ["torch", "int64", "int32", "uint8", "bool", "flat", "strided"]
    rare = st.sampled_from(["float", "list", "grad", "3d"])
    form = draw(st.sampled_from(common) if draw(st.integers(0, 7)) != 3 else rare)
    if form == "torch":
        return torch.from_numpy(array.copy())
    if form == "int32":
        return np.clip(array, -(2**31), 2**31 - 1).astype(np.int32)
    if form == "uint8":
        return np.clip(array, 0, 255).astype(np.uint8)
    if form == "bool":
        return array > 0
    if form == "flat":
        return array.reshape(-1) if rows == 1 else array
    if form == "strided":
        return np.repeat(array, 2, axis=1)[:, ::2]
    if form == "float":
        return array.astype(np.float32)
    if form == "list":
        return array.tolist()
    if form == "grad":
        return torch.tensor(array.tolist(), dtype=torch.float32, requires_grad=True)
    if form == "3d":
        return array.reshape(rows, slots, 1)
    return array


class _Str(str):
    pass


def _odd_span(draw, slots):
    """A span dict whose values are of every kind the readers meet (the core reads the plain ones itself,
    convert.cc PlainSpan, and leaves the rest to the reading that names them), now and then a key short or in
    an OrderedDict."""
    ints = st.sampled_from([0, 1, True, np.int64(0), 2**63, -1, None, 1.0, "0"])
    span = {"doc_uid": draw(st.sampled_from(["a", "b", "\ud800", None, 3, _Str("a")])), "start": draw(ints),
            "length": draw(st.sampled_from([min(slots, 2), True, np.int64(min(slots, 2)), None, 2**64])),
            "doc_offset": draw(ints)}
    if draw(st.integers(0, 5)) == 0:
        del span[draw(st.sampled_from(sorted(span)))]
    return collections.OrderedDict(span) if draw(st.integers(0, 5)) == 0 else span


def _spans(draw, rows, slots):
    """doc_spans in the forms _spans_per_row reads, and some it refuses."""
    per_row = [[{"doc_uid": draw(st.sampled_from(["a", "b", "c"])), "start": 0, "length": min(slots, 2),
                 "doc_offset": 0}] for _ in range(rows)]
    form = draw(st.sampled_from(["rows", "rows", "rows", "flat", "flat", "tuples", "empty", "string", "short",
                                 "bad_span", "values", "values"]))
    if form == "values":
        return [[_odd_span(draw, slots)] for _ in range(rows)]
    if form == "flat":
        return per_row[0] if rows == 1 else per_row
    if form == "tuples":
        return [[(s["doc_uid"], s["start"], s["length"], s["doc_offset"]) for s in row] for row in per_row]
    if form == "empty":
        return [[] for _ in range(rows)]
    if form == "string":
        return "a:0:2"
    if form == "short":
        return per_row[:-1] if rows > 1 else [per_row[0], per_row[0]]
    if form == "bad_span":
        return [[{"doc_uid": "a", "start": "zero", "length": 1, "doc_offset": 0}] for _ in range(rows)]
    return per_row


@st.composite
def batches(draw):
    rows, slots = draw(st.integers(1, 3)), draw(st.integers(1, 6))
    grid = st.lists(st.integers(0, 40), min_size=rows * slots, max_size=rows * slots)
    batch = {"input_ids": _form(draw, draw(grid), rows, slots),
             "labels": _form(draw, draw(st.lists(st.integers(0, 40) | st.just(-100), min_size=rows * slots,
                                                  max_size=rows * slots)), rows, slots)}
    for name in draw(st.sets(st.sampled_from(["position_ids", "doc_ids", "attention_mask", "max_length_q", "none",
                                              "rare"]), max_size=3)):
        if name == "max_length_q":
            batch[name] = slots
        elif name == "none":
            batch["position_ids"] = None
        elif name == "doc_ids":  # under any of its names
            batch[draw(st.sampled_from(["doc_ids", "seq_idx", "segment_ids", "document_ids"]))] = _form(
                draw, draw(grid), rows, slots)
        elif name == "rare":  # what the core leaves to canonical_microbatch, or refuses with it
            batch[draw(st.sampled_from(["loss_mask", "unknown", "seq_idx"]))] = _form(draw, draw(grid), rows, slots)
        else:
            batch[name] = _form(draw, draw(grid), rows, slots)
    cu = draw(st.sampled_from(["none", "cu_seqlens", "cu_seq_lens_q", "cu_seqlens_q", "seq_lens", "both"]))
    if cu != "none":
        lengths = np.asarray([[0, slots]] * rows, dtype=np.int64)
        value = torch.from_numpy(lengths.reshape(-1).copy()) if rows == 1 and draw(st.booleans()) else lengths
        batch["cu_seq_lens_q" if cu == "both" else cu] = value
        if cu == "both":  # HF's key side: equal to the query side, or not
            batch["cu_seq_lens_k"] = value if draw(st.integers(0, 3)) else lengths + 1
    if draw(st.booleans()):
        batch["doc_spans"] = _spans(draw, rows, slots)
    ignore = ["unknown"] if draw(st.integers(0, 3)) else []
    producer = draw(st.sampled_from([None, {"denominator": 3, "denominator_scope": "global"}, {"loss": 1.5}]))
    return batch, ignore, producer


def _canonical(batch, ignore, producer):
    """canonical_microbatch's reading as the audit reads it, or the error either raises."""
    spans = None if batch.get("doc_spans") is not None else SpanMatcher(DOCUMENTS, POLICY)
    try:
        mb = canonical_microbatch(batch, where="batch", spans=spans, producer=producer, ignore=ignore, policy=POLICY)
        return _plain(_core.read_microbatch(mb))
    except (ValueError, TypeError):
        return None


def _core_reading(batch, ignore, producer):
    spans = None if batch.get("doc_spans") is not None else SpanMatcher(DOCUMENTS, POLICY)
    derivation, uids = (None, []) if spans is None else spans.core_reader()
    view = _core.batch_view(batch, ignore, sorted(signed_ids(POLICY)), sorted(signed_ids(POLICY, labels=True)),
                            POLICY["ignore_index"], derivation, uids, 0, 0, 0, producer)
    return None if view is None else _plain(view.read())


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches())
def test_the_core_reads_what_canonical_microbatch_reads_or_gives_up(case):
    batch, ignore, producer = case
    canonical = _canonical(batch, ignore, producer)
    core = _core_reading(batch, ignore, producer)
    if canonical is None:
        assert core is None, "the core read a batch canonical_microbatch refuses"
    elif core is not None:
        assert core == canonical


def _common_batches():
    ids = torch.tensor([[5, 6, 7, 8, 9, 0], [5, 6, 0, 0, 0, 0]])
    labels = torch.tensor([[6, 7, -100, 9, -100, -100], [6, -100, -100, -100, -100, -100]])
    positions = torch.tensor([[0, 1, 2, 0, 1, 0], [0, 1, 0, 0, 0, 0]])
    spans = [[{"doc_uid": "a", "start": 0, "length": 3, "doc_offset": 0},
              {"doc_uid": "b", "start": 3, "length": 2, "doc_offset": 0}],
             [{"doc_uid": "c", "start": 0, "length": 2, "doc_offset": 0}]]
    yield "torch rows, spans given", {"input_ids": ids, "labels": labels, "position_ids": positions,
                                      "doc_spans": spans}
    yield "numpy int32 rows, spans derived", {"input_ids": ids.numpy().astype(np.int32), "labels": labels.numpy(),
                                              "position_ids": positions.numpy().astype(np.int32)}
    flat = {"input_ids": ids[0].reshape(1, -1), "labels": labels[0].reshape(1, -1),
            "position_ids": positions[0].reshape(1, -1), "cu_seq_lens_q": torch.tensor([0, 3, 5, 6]),
            "cu_seq_lens_k": torch.tensor([0, 3, 5, 6]), "max_length_q": 3, "max_length_k": 3}
    yield "HF flash-attention kwargs, one row", flat
    yield "a bool attention_mask", {"input_ids": ids, "labels": labels, "attention_mask": ids > 0,
                                    "doc_spans": spans}


@pytest.mark.parametrize("name,batch", list(_common_batches()), ids=[n for n, _ in _common_batches()])
def test_the_common_forms_are_read_by_the_core_as_canonical_microbatch_reads_them(name, batch):
    core = _core_reading(batch, [], None)
    assert core is not None, f"{name}: the core's reader gave up on a common batch"
    assert core == _canonical(batch, [], None)


def test_check_batch_reports_the_same_through_either_reader(monkeypatch):
    name, batch = next(_common_batches())
    batch = dict(batch, position_ids=torch.tensor([[0, 1, 2, 0, 2, 0], [0, 1, 0, 0, 0, 0]]))  # row 0 slot 4
    docs = {"a": [5, 6, 7], "b": [8, 9], "c": [5, 6]}
    fast = packoracle.check_batch(batch, docs, "reference")
    with python_reader():
        slow = packoracle.check_batch(batch, docs, "reference")
    assert not fast.ok and [(v.invariant, v.row, v.slot) for v in fast.violations] == [("positions", 0, 4)]
    assert fast.text == slow.text and fast.to_json() == slow.to_json()
    assert fast.svg(0) == slow.svg(0) and fast.svg(1) == slow.svg(1)  # the drawing reads the view again


def python_reader():
    """check_batch with the core's readers turned off: every batch through canonical_microbatch (batch_view and
    the one-call path check_plain_batch, which reads as batch_view reads, both answer None)."""
    stack = contextlib.ExitStack()
    for name in ("batch_view", "check_plain_batch"):
        stack.enter_context(unittest.mock.patch.object(_core, name, lambda *args: None))
    return stack


def one_call_off():
    """check_batch read and audited step by step (plain_documents, batch_view, audit_records), as the one-call
    path check_plain_batch reads and audits it."""
    return unittest.mock.patch.object(_core, "check_plain_batch", lambda *args: None)


def _report_or_error(batch, ignore, producer):
    """check_batch's whole answer on a batch: its report's text, JSON and drawings, or the error it raises."""
    docs = {"a": [5, 6, 7], "b": [8, 9], "c": [5, 6]}
    try:
        report = packoracle.check_batch(batch, docs, "reference", producer=producer, ignore=ignore)
    except (ValueError, TypeError) as e:
        return type(e).__name__, str(e)
    ids = batch["input_ids"]
    rows = 1 if (ids.ndim if hasattr(ids, "ndim") else np.ndim(ids)) == 1 else len(ids)
    return report.text, report.to_json(), [report.svg(r) for r in range(rows)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches())
def test_check_batch_reports_the_same_through_either_reader_on_generated_batches(case):
    """The audit checks the core's reading where the caller's arrays hold it (int64 rows viewed, the rest read
    at their width: BatchView::View) and copies its rows only for a failing step's report: on batches of every
    form, clean or not, the report is the one the Python reader's copy gives."""
    batch, ignore, producer = case
    core = _report_or_error(batch, ignore, producer)
    with python_reader():
        python = _report_or_error(batch, ignore, producer)
    assert core == python
    with one_call_off():
        assert _report_or_error(batch, ignore, producer) == core


# dp_world_size 2: the global count of 8 is over both ranks' targets, which one rank's batch cannot check (with 1:
# a denominator violation)
ONE_CALL_ARGUMENTS = [{}, {"row_length": 9}, {"decoder": True}, {"step": 3, "micro_step": 2},
                      {"ignore": ["position_ids"]},
                      {"dp_world_size": 2, "rank": 1, "producer": {"denominator": 8, "denominator_scope": "global"}}]


@pytest.mark.parametrize("kw", ONE_CALL_ARGUMENTS, ids=lambda kw: ",".join(kw) or "defaults")
@pytest.mark.parametrize("docs_form", ["lists", "arrays"])
@pytest.mark.parametrize("broken", [False, True], ids=["clean", "broken"])
@pytest.mark.parametrize("spans", ["given", "derived"])
def test_the_common_form_is_checked_in_one_call_and_reports_as_step_by_step(docs_form, broken, kw, spans):
    """check_batch takes a dict of arrays, with doc_spans or without (derived from the documents in the same
    call), and documents {uid: tokens} to the core in one call (check_plain_batch): it is taken (not None), and
    its report, text, JSON and drawings, is the one the calls it stands for give."""
    name, batch = next(_common_batches())
    if spans == "derived":
        batch = {k: v for k, v in batch.items() if k != "doc_spans"}
    if broken:
        batch = dict(batch, position_ids=torch.tensor([[0, 1, 2, 0, 2, 0], [0, 1, 0, 0, 0, 0]]))  # row 0 slot 4
    docs = {"a": [5, 6, 7], "b": [8, 9], "c": [5, 6]}
    if docs_form == "arrays":
        docs = {uid: np.asarray(tokens, dtype=np.int64) for uid, tokens in docs.items()}
    taken = []
    one_call = _core.check_plain_batch
    producer = {"denominator": 4, "denominator_scope": "global"}  # the batch's 4 targets (a global count)

    def spy(*args):
        found = one_call(*args)
        taken.append(found is not None)
        return found

    with unittest.mock.patch.object(_core, "check_plain_batch", spy):
        fast = packoracle.check_batch(batch, docs, "reference", **dict({"producer": producer}, **kw))
    with one_call_off():
        steps = packoracle.check_batch(batch, docs, "reference", **dict({"producer": producer}, **kw))
    assert taken == [True]
    if not kw:  # (the others may fail it: row_length 9 pads every row to 9, ...)
        assert fast.ok == (not broken)
    assert fast.text == steps.text and fast.to_json() == steps.to_json() and fast.violations == steps.violations
    assert [fast.svg(r) for r in range(2)] == [steps.svg(r) for r in range(2)]


def _outcome(batch, docs, policy, **kw):
    try:
        report = packoracle.check_batch(batch, docs, policy, **kw)
    except (ValueError, TypeError) as e:
        return type(e).__name__, str(e)
    return report.text, report.to_json()


@pytest.mark.parametrize("where", ["document and row", "document alone"])
@pytest.mark.parametrize("value", [-7, -1, -100])
@pytest.mark.parametrize("policy", ["reference", {"preset": "reference", "pad_id": -1}], ids=["reference", "pad -1"])
def test_a_negative_token_in_a_document_read_in_one_call_is_what_the_readers_make_of_it(where, value, policy):
    """The one-call path leaves the documents' scan for negative tokens to its audit, which proves them where its
    clean rows compared every token (and found none negative), and scans them otherwise: a negative token in
    any place of a document (and in the row that holds it, or not) gives what the readers give step by step,
    the error naming the document, or, for an id the policy allows (pad -1), the report."""
    name, batch = next(_common_batches())
    tokens = {"a": [5, 6, 7], "b": [8, 9], "c": [5, 6]}
    where_in_rows = {"a": (0, 0), "b": (0, 3), "c": (1, 0)}
    for uid, held in tokens.items():
        for k in range(len(held)):
            docs = {u: np.asarray(t, dtype=np.int64) for u, t in tokens.items()}
            docs[uid][k] = value
            bad = batch
            if where == "document and row":
                row, start = where_in_rows[uid]
                bad = dict(batch, input_ids=batch["input_ids"].clone())
                bad["input_ids"][row, start + k] = value
            one = _outcome(bad, docs, policy)
            with one_call_off():
                steps = _outcome(bad, docs, policy)
            assert one == steps, (uid, k)
            if value not in (-1,) or policy == "reference":
                assert one[0] == "ValueError" and str(value) in one[1] and repr(uid) in one[1], one


@pytest.mark.parametrize("tail", [8, -7, -100])
def test_a_negative_token_in_a_tail_no_row_holds_is_what_the_readers_make_of_it(tail):
    """Under overflow: truncate a document's tail past the row is in no row (the tiling excuses it), so the
    one-call path's token pass never compares it: the audit must scan such documents, not take a clean step for
    proof that they hold no negative token (which it once did, and check_batch passed a document the readers
    refuse)."""
    batch = {"input_ids": np.array([[5, 6, 7]]), "labels": np.array([[5, 6, 7]]), "position_ids": np.array([[0, 1, 2]]),
             "doc_spans": [[{"doc_uid": "a", "start": 0, "length": 3, "doc_offset": 0}]]}
    docs = {"a": np.array([5, 6, 7, tail], dtype=np.int64)}
    one = _outcome(batch, docs, "trl-padding-free", row_length=3)
    with one_call_off():
        steps = _outcome(batch, docs, "trl-padding-free", row_length=3)
    assert one == steps
    assert (one[0] == "ValueError") == (tail < 0), one


@pytest.mark.parametrize("form", ["negative view", "strided", "int32", "transposed twice", "slice of a wider row"])
def test_tensors_in_unusual_states_read_as_the_python_reader_reads_them(form):
    """A torch tensor is read through torch's DLPack export where that holds its values as they are, else
    through its numpy view: a negative view (its memory holds the values negated: numpy() refuses it, and
    so must the core), strided and narrower tensors give what the Python reader gives."""
    name, batch = next(_common_batches())
    ids = batch["input_ids"]
    if form == "negative view":
        ids = torch._neg_view(ids)  # values negated, its memory the batch's (which a reader of the memory reads)
    elif form == "strided":
        ids = torch.stack([ids, ids], dim=2)[:, :, 0]
    elif form == "int32":
        ids = ids.to(torch.int32)
    elif form == "transposed twice":
        ids = ids.t().contiguous().t()
    else:
        ids = torch.cat([ids, ids], dim=1)[:, :ids.shape[1]]
    assert torch.equal(ids, batch["input_ids"].to(ids.dtype)) != (form == "negative view")
    odd = dict(batch, input_ids=ids)
    docs = {"a": [5, 6, 7], "b": [8, 9], "c": [5, 6]}
    core = _outcome(odd, docs, "reference")
    with python_reader():
        python = _outcome(odd, docs, "reference")
    assert core == python
    assert (core[0] == "TypeError") == (form == "negative view"), core


class Tensor(torch.Tensor):
    """A torch tensor whose numpy() fails (named Tensor, as the core recognises torch's by its type's name)."""

    def numpy(self, *args, **kwargs):
        raise AssertionError("numpy() was called")


def test_a_plain_int64_tensor_is_read_through_dlpack_never_numpy():
    """The core reads a plain tensor through torch's DLPack export (no numpy array made and freed): with every
    tensor's numpy() failing, the batch is still checked and clean. The same trap on a negative view, which
    DLPack must not read, is sprung: the test can tell the two paths apart."""
    name, batch = next(_common_batches())
    docs = {"a": [5, 6, 7], "b": [8, 9], "c": [5, 6]}
    trapped = {k: v.as_subclass(Tensor) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
    assert packoracle.check_batch(trapped, docs, "reference").ok
    negative = dict(trapped, input_ids=torch._neg_view(batch["input_ids"]).as_subclass(Tensor))
    with pytest.raises(ValueError, match="numpy\\(\\) was called"):
        packoracle.check_batch(negative, docs, "reference")


def _clean_batches():
    """Clean batches (checked below) of both label alignments, spans given and derived, with their documents."""
    name, batch = next(_common_batches())
    docs = {"a": [5, 6, 7], "b": [8, 9], "c": [5, 6]}
    yield "reference, spans given", "reference", batch, docs
    yield "reference, spans derived", "reference", {k: v for k, v in batch.items() if k != "doc_spans"}, docs
    cu = torch.tensor([0, 3, 5])
    yield "hf-flatten, aligned labels", "hf-flatten", {
        "input_ids": torch.tensor([[5, 6, 7, 8, 9]]), "labels": torch.tensor([[-100, 6, 7, -100, 9]]),
        "position_ids": torch.tensor([[0, 1, 2, 0, 1]]), "cu_seq_lens_q": cu, "cu_seq_lens_k": cu}, {
        "a": [5, 6, 7], "b": [8, 9]}


@pytest.mark.parametrize("name,policy,batch,docs", list(_clean_batches()), ids=[c[0] for c in _clean_batches()])
def test_an_id_the_policy_does_not_allow_is_named_in_any_slot_of_a_clean_batch(name, policy, batch, docs):
    """check_batch leaves the scan for ids the policy does not allow to the audit, which proves a clean batch's
    instead (a row the clean-row path takes holds its documents' tokens and the pad id, and targets and the
    ignore index, but for a row's first label under aligned labels): one such id in any slot of input_ids or
    labels is named as the Python reader names it, and the batch without it is clean."""
    assert packoracle.check_batch(batch, docs, policy).ok
    for field in ("input_ids", "labels"):
        for r, i in np.ndindex(*batch[field].shape):
            bad = dict(batch, **{field: batch[field].clone()})
            bad[field][r, i] = -7
            with pytest.raises(ValueError) as core:
                packoracle.check_batch(bad, docs, policy)
            with python_reader():
                with pytest.raises(ValueError) as python:
                    packoracle.check_batch(bad, docs, policy)
            assert str(core.value) == str(python.value), f"{field}[{r}, {i}]"
            assert "-7" in str(core.value)


@pytest.mark.parametrize("producer", [{"denominator": 3}, {"loss": "high"}], ids=["no scope", "not a number"])
def test_an_id_the_policy_does_not_allow_is_named_before_what_the_core_refuses_later(producer):
    """A batch whose id scan was left to the audit, and which the core refuses further on (here its producer
    totals, which the Python reading passes on as given): the error is the Python reader's, as before."""
    name, batch = next(_common_batches())
    batch = dict(batch, input_ids=batch["input_ids"].clone())
    batch["input_ids"][1, 1] = -7
    docs = {"a": [5, 6, 7], "b": [8, 9], "c": [5, 6]}
    with pytest.raises((ValueError, TypeError)) as core:
        packoracle.check_batch(batch, docs, "reference", producer=producer)
    with python_reader():
        with pytest.raises((ValueError, TypeError)) as python:
            packoracle.check_batch(batch, docs, "reference", producer=producer)
    assert (type(core.value), str(core.value)) == (type(python.value), str(python.value))


def test_read_batch_gives_the_view_and_falls_back_to_the_dict():
    name, batch = next(_common_batches())
    kwargs = dict(where="batch", spans=None, step=0, micro_step=0, rank=0, producer=None, ignore=(), policy=POLICY)
    assert isinstance(read_batch(batch, **kwargs), _core.BatchView)
    with pytest.raises(ValueError, match="field 'input_ids\\[0, 0\\]' is -5"):
        read_batch(dict(batch, input_ids=-5 * torch.ones_like(batch["input_ids"])), **kwargs)
    assert isinstance(read_batch(dict(batch, loss_mask=np.ones((2, 6))), **kwargs), dict)


def _span_as_read(span):
    """What the core's span reading must give for one span (convert.cc SpansFromPython): the four fields as
    (str, int, int, int), or None where it must refuse: not a dict, a key missing or None, a doc_uid that is not
    text (or not valid UTF-8), a number that is a bool, not an integer, or outside int64."""
    if not isinstance(span, dict):
        return None
    values = [span.get(k) for k in ("doc_uid", "start", "length", "doc_offset")]
    if any(v is None for v in values) or not isinstance(values[0], str):
        return None
    try:
        values[0].encode("utf-8")
    except UnicodeEncodeError:
        return None
    out = {"doc_uid": str(values[0])}
    for key, v in zip(("start", "length", "doc_offset"), values[1:]):
        if isinstance(v, bool) or not hasattr(v, "__index__") or not -2**63 <= v.__index__() < 2**63:
            return None
        out[key] = v.__index__()
    return out


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_span_is_read_exactly_or_refused_naming_it(data):
    """The core reads a plain span dict without naming it (PlainSpan) and every other through the reading that
    names the span and the field: on values of every kind the answer is the value itself or that error."""
    span = _odd_span(data.draw, 2)
    mb = {"step": 0, "micro_step": 0, "rank": 0, "producer": None,
          "rows": [{"input_ids": [1, 2], "labels": [2, -100], "doc_spans": [span]}]}
    want = _span_as_read(span)
    try:
        got = _core.read_microbatch(mb)["rows"][0]["doc_spans"]
    except (ValueError, TypeError) as e:
        assert want is None, f"refused {span!r}: {e}"
        assert "doc_spans[0]" in str(e)
        return
    assert want is not None, f"read {span!r}, which must be refused, as {got!r}"
    assert got == [want]

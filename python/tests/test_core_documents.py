"""The core's readers of documents, pinned to the Python ones they stand in for (issue 26, item 3):

- `_core.plain_documents` (check_batch's and check_step's common form {uid: tokens}) gives what
  `canonical_documents` gives, or gives up (None) wherever canonical_documents refuses or the form is not its
  own, so that canonical_documents names the problem;
- `_core.documents_from_features` (the guarded collator's documents) gives what
  `guard.documents_from_features` gives, refuses what it refuses, and checks the token ids as check_batch did.
"""

import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from packoracle import _core, canonical_documents
from packoracle._args import signed_ids
from packoracle._policy import resolve
from packoracle.guard import documents_from_features

POLICY = resolve("reference")
ALLOWED = sorted(signed_ids(POLICY))
# Either side of each bound the core's in-place reading of a list has (documents.cc: compact ints end at 2**30 on
# 3.11, int64 at 2**63).
IDS = st.integers(-3, 60_000) | st.sampled_from([-100, 0, 2**30 - 1, 2**30, -(2**30) + 1, -(2**30), 2**40, -(2**40),
                                                 2**63 - 1, -(2**63)])


FORMS = ["list", "int64", "int32", "int16", "uint8", "bool", "float", "strided", "2d", "tuple", "big-endian",
         "unaligned", "read-only", "uint64"]


def _arrays(tokens, draw):
    return _array_form(tokens, draw(st.sampled_from(FORMS)))


def _array_form(tokens, form):
    wide = np.asarray(tokens, dtype=np.int64)
    # the forms the buffer protocol meets (documents.cc Int64Buffer): another byte order, a view at an odd
    # address, an array that cannot be written, an unsigned dtype of the same width
    if form == "big-endian":
        return wide.astype(">i8")
    if form == "unaligned":
        return np.frombuffer(b"\0" + wide.tobytes(), dtype=np.int64, offset=1)
    if form == "read-only":
        wide.setflags(write=False)
        return wide
    if form == "uint64":
        return wide.astype(np.uint64)
    if form == "list":
        return list(tokens)
    if form == "tuple":
        return tuple(tokens)
    if form in ("int32", "int16", "uint8"):
        info = np.iinfo(form)
        return np.asarray([min(max(t, info.min), info.max) for t in tokens], dtype=form)
    if form == "bool":
        return np.asarray([t > 0 for t in tokens], dtype=bool)
    if form == "float":
        return np.asarray(tokens, dtype=np.float64)
    if form == "strided":
        return np.repeat(np.asarray(tokens, dtype=np.int64), 2)[::2]
    if form == "2d":
        return np.asarray(tokens, dtype=np.int64).reshape(1, -1)
    return np.asarray(tokens, dtype=np.int64)


@st.composite
def mappings(draw):
    n = draw(st.integers(0, 5))
    out = {}
    for k in range(n):
        uid = draw(st.sampled_from([f"d{k}", "", "\ud800", "x"]))
        out[uid] = _arrays(draw(st.lists(IDS, max_size=6)), draw)
    return out


def _as_tuples(docs):
    if isinstance(docs, _core.Documents):
        docs = docs.to_list()
        return [(d["doc_uid"], d["tokens"].tolist()) for d in docs]
    return [(d["doc_uid"], np.asarray(d["tokens"]).reshape(-1).tolist()) for d in docs]


@settings(max_examples=400, deadline=None)
@given(mappings())
def test_plain_documents_give_what_canonical_documents_gives_or_give_up(docs):
    plain = _core.plain_documents(docs, ALLOWED)
    try:
        canonical = canonical_documents(docs, policy=POLICY)
    except (TypeError, ValueError):
        assert plain is None  # canonical_documents refuses: the core must leave it the word
        return
    if plain is not None:
        assert _as_tuples(plain) == _as_tuples(canonical)


@pytest.mark.parametrize("form", FORMS)
def test_plain_documents_read_each_form_as_canonical_documents_does(form):
    """Every form on tokens whose bytes differ in each order (random ids rarely give one: a swapped id is
    mostly negative, which the core leaves to canonical_documents); the native integer arrays the core must
    read itself, the rest it may leave."""
    docs = {"a": _array_form([1, 2, 300, 40_000, 7], form)}
    plain = _core.plain_documents(docs, ALLOWED)
    if plain is not None:
        assert _as_tuples(plain) == _as_tuples(canonical_documents(docs, policy=POLICY))
    if form in ("list", "int64", "int32", "strided", "unaligned", "read-only"):
        assert plain is not None, f"the core gave up on {form}"


def test_plain_documents_take_the_common_forms():
    """The fast path is taken for what check_batch is given in practice: token lists and int64 arrays."""
    docs = {"a": [1, 2, 3], "b": np.arange(5, dtype=np.int64), "c": np.arange(3, dtype=np.int32), "e": []}
    plain = _core.plain_documents(docs, ALLOWED)
    assert plain is not None and len(plain) == 4
    assert _as_tuples(plain) == _as_tuples(canonical_documents(docs, policy=POLICY))
    assert _core.plain_documents({"a": [1, -5]}, ALLOWED) is None  # a negative id: canonical_documents refuses
    assert _core.plain_documents({"a": [1, -5]}, [-5]) is not None  # unless the policy declares it


def test_plain_documents_view_int64_arrays_and_hold_them():
    """A contiguous int64 array is read where it lies, not copied (check_batch's documents: "An eleventh pair"
    in bench/README.md): the Documents see the caller's memory and hold a reference to its array for as long as
    they live; lists and other forms are copied."""
    a, b = np.arange(5, dtype=np.int64), [7, 8]
    before = sys.getrefcount(a)
    plain = _core.plain_documents({"a": a, "b": b, "c": np.arange(2, dtype=np.int32)}, ALLOWED)
    assert sys.getrefcount(a) == before + 1
    a[0], b[0] = 99, 99
    assert _as_tuples(plain) == [("a", [99, 1, 2, 3, 4]), ("b", [7, 8]), ("c", [0, 1])]
    assert plain.uids() == ["a", "b", "c"] and len(plain) == 3
    del plain
    assert sys.getrefcount(a) == before


@pytest.mark.parametrize("form", ["int64", "list", "int32"])
@pytest.mark.parametrize("reader", ["plain_documents", "documents_from_features"])
def test_a_negative_id_the_policy_allows_in_a_token_field_is_still_refused_inside_a_document(form, reader):
    """The readers' scans mark a document with no token below 0 (DocumentRef::non_negative), and the core's
    document check then looks for no negative id in it: a document that holds one must not be so marked. Under
    eod_closes with a negative EOD id, the id is allowed in token fields (the readers let it through) but not
    inside a document (ValidateDocument refuses it, as Effective does)."""
    policy = resolve({"preset": "megatron-gpt", "eos_id": -5, "pad_id": -5})
    allowed = sorted(signed_ids(policy))
    assert allowed == [-5]
    tokens = _array_form([3, -5, 4], form)
    if reader == "plain_documents":
        docs = _core.plain_documents({"d0": tokens}, allowed)
    else:
        docs = _core.documents_from_features([{"input_ids": tokens}], policy["ignore_index"], allowed)
    assert docs is not None
    with pytest.raises(ValueError, match=r"token 1 is the EOD id -5"):
        _core.SpanDerivation(docs, policy)


@st.composite
def features(draw):
    out = []
    for _ in range(draw(st.integers(0, 4))):
        tokens = draw(st.lists(st.integers(-2, 60_000) | st.just(-100), max_size=7))
        f = {"input_ids": _arrays(tokens, draw) if draw(st.booleans()) else tokens}
        if draw(st.booleans()):
            labels = draw(st.lists(st.integers(0, 9) | st.just(-100), min_size=len(tokens), max_size=len(tokens)))
            f["labels"] = np.asarray(labels, dtype=np.int64) if draw(st.booleans()) else labels
        if draw(st.booleans()):
            cuts = sorted(draw(st.lists(st.integers(0, len(tokens)), max_size=3)))
            lengths = [b - a for a, b in zip([0] + cuts, cuts + [len(tokens)])]
            if draw(st.integers(0, 9)) == 0:
                lengths.append(1)  # a sum that is not the feature's length
            f["seq_lengths"] = lengths
        if draw(st.integers(0, 19)) == 0:
            f = {"labels": tokens}  # no input_ids
        out.append(f)
    return out


def _python_reading(feats):
    """guard.documents_from_features, then the token-id checks check_batch makes on its documents: the Python
    reader's, then the core's reading of them (which refuses an id outside int64, a uint64 one above 2**63 - 1)."""
    docs = documents_from_features(feats, POLICY["ignore_index"])
    _core.effective_documents(canonical_documents([dict(d) for d in docs], policy=POLICY), POLICY)
    return docs


@settings(max_examples=400, deadline=None)
@given(features())
def test_documents_from_features_in_the_core_as_in_python(feats):
    try:
        want = _python_reading(feats)
    except (TypeError, ValueError):
        with pytest.raises((TypeError, ValueError)):  # which of the two may differ (a float dtype); the test
            # above pins the messages that matter
            _core.documents_from_features(feats, POLICY["ignore_index"], ALLOWED)
        return
    got = _core.documents_from_features(feats, POLICY["ignore_index"], ALLOWED).to_list()
    assert [d["doc_uid"] for d in got] == [d["doc_uid"] for d in want]
    for g, w in zip(got, want):
        assert g["tokens"].tolist() == np.asarray(w["tokens"]).tolist()
        assert g["supervised"].tolist() == np.asarray(w["supervised"]).tolist()


def test_documents_from_features_name_the_feature():
    with pytest.raises(ValueError, match=r"features\[1\]: field 'input_ids\[2\]' is -7"):
        _core.documents_from_features([{"input_ids": [1]}, {"input_ids": [1, 2, -7]}], -100, ALLOWED)
    with pytest.raises(ValueError, match=r"features\[0\]: field 'labels' has 1 entries, its input_ids has 2"):
        _core.documents_from_features([{"input_ids": [1, 2], "labels": [1]}], -100, ALLOWED)
    with pytest.raises(TypeError, match="feature 0 has no 'input_ids'"):
        _core.documents_from_features([{"labels": [1]}], -100, ALLOWED)
    with pytest.raises(ValueError, match=r"features\[0\]: field 'input_ids' must be an array"):
        _core.documents_from_features([{"input_ids": "abc"}], -100, ALLOWED)


# The core's reading of a feature's int lists in place (documents.cc, Integers) against the reading it stands in
# for (IntegersFromPython, which a tuple still takes): the same documents, or the same error, whatever the ints.
# Compact ints end at 2**30 (one digit on 3.11); the 64-bit bounds, bools, numpy ints and floats send the list
# to the previous reading.
WIDE = (st.integers(-(2**31), 2**31) | st.integers(-(2**64), 2**64)
        | st.sampled_from([2**30 - 1, 2**30, -(2**30) + 1, -(2**30), 2**63 - 1, 2**63, -(2**63), -(2**63) - 1,
                           -100, -1, 0, True, False, np.int64(7), np.int32(-100), 3.0]))


def _reading(feats, allowed):
    try:
        docs = _core.documents_from_features(feats, -100, allowed).to_list()
    except (TypeError, ValueError) as e:
        return type(e).__name__, str(e)
    return [(d["doc_uid"], d["tokens"].tolist(), d["supervised"].tolist()) for d in docs]


@settings(max_examples=400, deadline=None)
@given(st.lists(WIDE, max_size=8), st.data())
def test_lists_read_in_place_as_the_previous_reading_reads_them(tokens, data):
    allowed = data.draw(st.sampled_from([ALLOWED, [-100, -1], [-(2**63)]]))
    labels = data.draw(st.none() | st.lists(WIDE, min_size=len(tokens), max_size=len(tokens)))
    lengths = data.draw(st.none() | st.lists(st.integers(-1, 4) | st.sampled_from([2**40, True]), max_size=3))
    as_list, as_tuple = {"input_ids": list(tokens)}, {"input_ids": tuple(tokens)}
    if labels is not None:
        as_list["labels"], as_tuple["labels"] = list(labels), tuple(labels)
    if lengths is not None:
        as_list["seq_lengths"], as_tuple["seq_lengths"] = list(lengths), tuple(lengths)
    assert _reading([as_list], allowed) == _reading([as_tuple], allowed)


def test_lists_of_compact_and_wide_ints_are_read_whole():
    """The path taken in practice (ints below 2**30) and the ints either side of each bound, read in place."""
    ints = [0, 1, -1, 2**30 - 1, 2**30, -(2**30), 2**62, 2**63 - 1, -(2**63)]
    docs = _core.documents_from_features([{"input_ids": ints}], -100, [-1, -(2**30), -(2**63)]).to_list()
    assert docs[0]["tokens"].tolist() == ints
    with pytest.raises(ValueError, match=r"features\[0\]: field 'input_ids\[1\]' is -3"):
        _core.documents_from_features([{"input_ids": [2**40, -3]}], -100, ALLOWED)

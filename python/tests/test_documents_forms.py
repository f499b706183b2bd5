"""The two readers of the documents a user holds: `canonical_documents` (what the core reads: arrays, for
check_batch, check_step, fuzz and the guard) and `packoracle.dump.as_documents` (the dump writer's Document
objects, which must work without the extension). Each form both accept must give the same documents: the same
uids (given, or d0, d1, ... by position), tokens and supervision, and the same refusal of a repeated uid."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from packoracle import canonical_documents
from packoracle.dump import Document
from packoracle.dump.spans import as_documents

TOKENS = st.lists(st.integers(0, 50_000), max_size=6)


@st.composite
def one_document(draw, k):
    """Document k in one of the forms both readers take."""
    tokens = draw(TOKENS)
    supervised = draw(st.none() | st.lists(st.integers(0, 1), min_size=len(tokens), max_size=len(tokens)))
    uid = draw(st.none() | st.sampled_from(["a", "b", "d0", f"d{k}"]))  # "d0", "a", "b" may repeat a uid
    form = draw(st.sampled_from(["list", "array", "dict", "dict-uid", "dict-input_ids", "Document"]))
    if form == "list":
        return tokens
    if form == "array":
        return np.asarray(tokens, dtype=np.int64)
    if form == "Document":
        return Document(uid or f"d{k}", tokens, supervised)
    key = {"dict": "doc_uid", "dict-uid": "uid", "dict-input_ids": "doc_uid"}[form]
    d = {("input_ids" if form == "dict-input_ids" else "tokens"): tokens}
    if uid is not None:
        d[key] = uid
    if supervised is not None:
        d["supervised"] = supervised
    return d


@st.composite
def documents(draw):
    n = draw(st.integers(0, 5))
    return [draw(one_document(k)) for k in range(n)]


def _as_tuples(docs):
    out = []
    for d in docs:
        if isinstance(d, Document):
            out.append((d.uid, list(d.tokens), list(d.supervised)))
        else:
            sup = d.get("supervised")
            tokens = np.asarray(d["tokens"]).tolist()
            out.append((d["doc_uid"], tokens, [1] * len(tokens) if sup is None else np.asarray(sup).tolist()))
    return out


@settings(max_examples=300, deadline=None)
@given(documents())
def test_both_readers_give_the_same_documents(docs):
    try:
        core = _as_tuples(canonical_documents(docs))
    except ValueError as e:
        with pytest.raises(ValueError):
            as_documents(docs)
        assert "doc_uid" in str(e) or "uid" in str(e), e
        return
    assert _as_tuples(as_documents(docs)) == core


def test_a_uid_given_twice_is_refused_by_both():
    docs = [[1, 2], {"doc_uid": "d0", "tokens": [3]}]  # the first is d0 by position
    with pytest.raises(ValueError, match="d0"):
        canonical_documents(docs)
    with pytest.raises(ValueError, match="d0"):
        as_documents(docs)

"""Documents in the forms users hold them, as the list the C++ core reads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Iterable, Optional, Union

import numpy as np

from . import _args, _core
from ._arrays import as_array, check_integral
from .dump.format import unique_uid
from .dump.spans import Document

DocumentsLike = Union[Mapping[str, Any], Iterable[Any]]
# What the core reads: canonical_documents' list of dicts, or documents it has read itself (core_documents).
CoreDocuments = Union[list[dict], _core.Documents]


def canonical_documents(documents: DocumentsLike, where: str = "documents",
                        policy: Optional[dict] = None) -> list[dict]:
    """[{"doc_uid", "tokens", "supervised"?}] from any of:

    - a mapping {uid: tokens} (tokens a list, an array or a tensor), or {uid: {"tokens", "supervised"}};
    - a sequence of `Document` objects, of dicts {"doc_uid"|"uid", "tokens"|"input_ids", "supervised"?}, or of
      token lists (uids "d0", "d1", ... by position).

    With `policy`, tokens are checked to be token ids (negative values only where the policy declares them).

    Raises ValueError or TypeError naming the document and the field."""
    items: list[tuple[Optional[str], Any]]
    if isinstance(documents, Mapping):
        items = [(str(uid), value) for uid, value in documents.items()]
    elif isinstance(documents, (str, bytes)) or not isinstance(documents, (Sequence, Iterable)):
        raise TypeError(f"{where}: expected {{uid: tokens}} or a list of documents, got {type(documents).__name__}")
    else:
        items = [(None, value) for value in documents]
    out: list[dict] = []
    seen: set[str] = set()
    for k, (uid, value) in enumerate(items):
        at = f"{where}[{uid!r}]" if uid is not None else f"{where}[{k}]"
        tokens: Any  # a list, an array or a tensor until as_array below
        supervised: Any = None
        if isinstance(value, Document):
            uid, tokens, supervised = value.uid, value.tokens, value.supervised
        elif isinstance(value, Mapping):
            uid = value.get("doc_uid", value.get("uid", uid))
            tokens = value.get("tokens", value.get("input_ids"))
            if tokens is None:
                raise ValueError(f"{at}: field 'tokens' is missing")
            supervised = value.get("supervised")
        else:
            tokens = value
        if uid is None:
            uid = f"d{k}"
        if not isinstance(uid, str) or not uid:
            raise TypeError(f"{at}: field 'doc_uid' must be a non-empty string, got {uid!r}")
        _args.utf8(uid, at, "field 'doc_uid'")
        unique_uid(seen, uid, at)
        tokens = as_array(tokens, at, "tokens")
        check_integral(tokens, at, "tokens")
        if tokens.ndim != 1:
            raise ValueError(f"{at}: field 'tokens' must be one-dimensional, got shape {tuple(tokens.shape)}")
        doc = {"doc_uid": uid, "tokens": tokens}
        if supervised is not None:
            supervised = as_array(supervised, at, "supervised")
            check_integral(supervised, at, "supervised")
            doc["supervised"] = supervised
        out.append(doc)
    if policy is not None:
        _token_ids(out, items, where, _args.signed_ids(policy))
    return out


def core_documents(documents: Any, policy: dict) -> CoreDocuments:
    """The documents as check_batch and check_step hand them to the core: a `_core.Documents` as it is (the
    guard's features, read and checked in the core), the common form {uid: tokens} (str uids, token lists or
    1-D signed integer arrays) read by the core in one call, anything else through canonical_documents (which
    also names what is wrong: the core's reading gives up on any value it would refuse)."""
    if isinstance(documents, _core.Documents):
        return documents
    if type(documents) is dict:
        plain = _core.plain_documents(documents, _args.sorted_signed_ids(policy))
        if isinstance(plain, _core.Documents):
            return plain
    return canonical_documents(documents, policy=policy)


def _token_ids(docs: list[dict], items: list, where: str, allowed: frozenset[int]) -> None:
    """Every document's tokens are token ids: one pass over all of them, then the document that has not."""
    signed = [d["tokens"] for d in docs if d["tokens"].dtype.kind == "i" and d["tokens"].size]
    if not signed or np.concatenate(signed).min() >= 0:
        return
    for k, (doc, (uid, _)) in enumerate(zip(docs, items)):
        _args.non_negative_ids(doc["tokens"], allowed, f"{where}[{uid!r}]" if uid is not None else f"{where}[{k}]",
                               "tokens")

"""Ground truth for dumps: where each document piece sits in a row (`doc_spans`), derived from the documents,
never from the producer's boundary tensors.

Two ways a producer lays documents out:

- sequential (HF flattening, TRL padding-free, torchtune PackedDataset, HF padded batches): a row holds
  consecutive pieces of the documents in the order the producer consumed them, then padding.
  ``match_sequential`` walks the row with a cursor over the documents and matches token runs.
- stream (Megatron GPTDataset, llm.c, TRL ConstantLengthDataset): the documents are concatenated into one
  stream and a row is a window of it. ``stream_spans`` cuts a window at the document boundaries.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal, Optional, Union, cast

from .format import IntsLike, Span, int_list, unique_uid

Overflow = Literal["whole", "split", "truncate"]
"""How a sequential producer treats a document longer than the room left in a row (see match_sequential)."""


class Document:
    """A source document as the producer tokenized it, delimiters (BOS/EOS/EOD/EOT) included."""

    __slots__ = ("uid", "tokens", "supervised")

    uid: str
    tokens: list[int]
    supervised: list[int]

    def __init__(self, uid: str, tokens: IntsLike, supervised: Optional[IntsLike] = None) -> None:
        if not isinstance(uid, str) or not uid:
            raise ValueError(f"document: field 'doc_uid' must be a non-empty string, got {uid!r}")
        self.uid = uid
        self.tokens = int_list(tokens, f"document '{uid}'", "tokens")
        if supervised is None:
            self.supervised = [1] * len(self.tokens)
        else:
            self.supervised = int_list(supervised, f"document '{uid}'", "supervised", allow_bool=True)
            if len(self.supervised) != len(self.tokens):
                raise ValueError(f"document '{uid}': field 'supervised' has {len(self.supervised)} entries, "
                                 f"tokens has {len(self.tokens)}")
            for i, v in enumerate(self.supervised):
                if v not in (0, 1):
                    raise ValueError(f"document '{uid}': field 'supervised[{i}]' must be 0 or 1, got {v}")

    def __len__(self) -> int:
        return len(self.tokens)

    def __repr__(self) -> str:
        return f"Document({self.uid!r}, {self.tokens!r})"


DocumentLike = Union[Document, dict[str, Any], IntsLike]
"""One document: a Document, a dict {doc_uid|uid, tokens|input_ids, supervised?}, or its tokens."""


def as_documents(documents: Iterable[DocumentLike], uid_prefix: str = "d") -> list[Document]:
    """Documents from Document objects, dicts {doc_uid|uid, tokens|input_ids, supervised?}, or token lists
    (uids d0, d1, ... by position)."""
    out: list[Document] = []
    seen: set[str] = set()
    for k, d in enumerate(documents):
        if isinstance(d, Document):
            doc = d
        elif isinstance(d, dict):
            uid: str = cast(str, d.get("doc_uid", d.get("uid", f"{uid_prefix}{k}")))  # Document checks it
            tokens = d["tokens"] if "tokens" in d else d.get("input_ids")
            if tokens is None:
                raise ValueError(f"documents[{k}]: field 'tokens' is missing")
            doc = Document(uid, tokens, d.get("supervised"))
        else:
            doc = Document(f"{uid_prefix}{k}", d)
        unique_uid(seen, doc.uid, f"documents[{k}]")
        out.append(doc)
    return out


class DocumentSequence:
    """The documents in the order the producer consumed them, with a read cursor (document index, offset in
    it). Pass the same sequence to successive converter calls to dump successive batches of one run."""

    def __init__(self, documents: Iterable[DocumentLike], doc_index: int = 0, offset: int = 0) -> None:
        self.documents = as_documents(documents)
        self.doc_index = doc_index
        self.offset = offset
        # stream converters: where the next window is expected to start
        self.stream_pos: Optional[int] = None
        self._stream: Optional[tuple[list[int], list[tuple[int, int]]]] = None

    @property
    def exhausted(self) -> bool:
        """True once the cursor is past the last document."""
        return self.doc_index >= len(self.documents)

    def stream(self) -> tuple[list[int], list[tuple[int, int]]]:
        """The concatenated stream and, per stream position, (document index, offset). Built once."""
        if self._stream is None:
            tokens: list[int] = []
            where: list[tuple[int, int]] = []
            for d, doc in enumerate(self.documents):
                tokens.extend(doc.tokens)
                where.extend((d, k) for k in range(len(doc)))
            self._stream = (tokens, where)
        return self._stream


Documents = Union[DocumentSequence, Iterable[DocumentLike]]
"""The documents a converter takes: a DocumentSequence (shared by successive calls) or the documents."""


def sequence_of(documents: Documents) -> DocumentSequence:
    """`documents` as a DocumentSequence (itself when it is one)."""
    return documents if isinstance(documents, DocumentSequence) else DocumentSequence(documents)


def match_sequential(row_tokens: Sequence[int], seq: DocumentSequence, *, where: str, pad_id: Optional[int] = None,
                     overflow: Overflow = "whole", pad_from: Optional[int] = None) -> list[Span]:
    """doc_spans of one row of a sequential producer, advancing `seq`'s cursor.

    overflow: "whole" (a piece is a whole document, except the continuation of a split at the row start),
    "split" (a document may be cut at the row end and continued in the next row: torchtune split_across_pack,
    TRL bfd_split), "truncate" (a document cut at the row end is dropped after the cut: TRL bfd).
    Slots after the matched pieces are padding: every one must be `pad_id` when it is given (or, when
    `pad_from` is given, padding starts there). Raises ValueError naming the field and index where the row
    stops matching."""
    spans: list[Span] = []
    n = len(row_tokens)
    end = n if pad_from is None else pad_from
    i = 0
    docs = seq.documents
    while i < end and seq.doc_index < len(docs):
        doc = docs[seq.doc_index]
        k = seq.offset
        remaining = len(doc) - k
        if remaining <= 0:  # an empty document (or one fully consumed): nothing to place
            seq.doc_index, seq.offset = seq.doc_index + 1, 0
            continue
        m = 0
        while m < remaining and i + m < end and row_tokens[i + m] == doc.tokens[k + m]:
            m += 1
        if m == 0:
            break
        if m == remaining:
            spans.append({"doc_uid": doc.uid, "start": i, "length": m, "doc_offset": k})
            i += m
            seq.doc_index, seq.offset = seq.doc_index + 1, 0
            continue
        # A partial piece: only at the row's end, and only when the producer cuts documents.
        if i + m == end and end == n and overflow in ("split", "truncate"):
            spans.append({"doc_uid": doc.uid, "start": i, "length": m, "doc_offset": k})
            i += m
            if overflow == "split":
                seq.offset = k + m
            else:
                seq.doc_index, seq.offset = seq.doc_index + 1, 0
            break
        if pad_id is not None and all(t == pad_id for t in row_tokens[i:]):
            break  # the rest of the row is padding that happens to start like the next document
        if i + m == n:
            raise ValueError(f"{where}: field 'input_ids[{i}]' starts {m} tokens of document '{doc.uid}' cut at the "
                             f"row's end, but this producer does not split or truncate documents (overflow "
                             f"{overflow!r})")
        raise ValueError(f"{where}: field 'input_ids[{i + m}]' is {row_tokens[i + m]}, but document '{doc.uid}' "
                         f"(token {k + m}) continues with {doc.tokens[k + m]}: the row does not hold the documents "
                         f"in the given order")
    if pad_from is not None and i < pad_from:
        raise ValueError(f"{where}: field 'input_ids[{i}]' is {row_tokens[i]}, which continues no document "
                         f"(the documents end before the row's padding at slot {pad_from})")
    for j in range(i, n):
        if pad_id is not None and row_tokens[j] != pad_id:
            what = "is not the pad id" if seq.doc_index < len(docs) else "follows the last document"
            raise ValueError(f"{where}: field 'input_ids[{j}]' is {row_tokens[j]}, which {what} "
                             f"{pad_id} and continues no document in the given order")
    return spans


def stream_spans(stream_where: Sequence[tuple[int, int]], offset: int, length: int, docs: Sequence[Document], *,
                 where: str) -> list[Span]:
    """doc_spans of a window of `length` stream tokens starting at stream position `offset` (positions past the
    stream's end are padding)."""
    spans: list[Span] = []
    for i in range(length):
        p = offset + i
        if p >= len(stream_where):
            break
        d, k = stream_where[p]
        if spans and spans[-1]["doc_uid"] == docs[d].uid and spans[-1]["doc_offset"] + spans[-1]["length"] == k:
            spans[-1]["length"] += 1
        else:
            spans.append({"doc_uid": docs[d].uid, "start": i, "length": 1, "doc_offset": k})
    return spans

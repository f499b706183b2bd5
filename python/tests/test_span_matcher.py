"""Spans derived from the documents when a batch carries none (packoracle._batch.SpanMatcher): the greedy
reading, and the search that takes over when documents made of the pad id leave the greedy reading unable to
explain the step."""
import numpy as np

from packoracle._batch import Microbatches

POLICY = {"overflow": "error", "pad_id": 0}


def _documents(docs):
    return [{"doc_uid": uid, "tokens": np.asarray(t, dtype=np.int64)} for uid, t in docs]


def _read(docs, rows):
    m = Microbatches(_documents(docs), POLICY)
    ids = np.asarray(rows, dtype=np.int64)
    batch = {"input_ids": ids, "labels": np.full_like(ids, -100)}
    return [[(s["doc_uid"], s["start"], s["length"]) for s in row["doc_spans"]] for row in m.read(batch)[0]["rows"]], m


def test_distinct_tokens_are_read_greedily():
    spans, m = _read([("a", [11, 12]), ("b", [21])], [[11, 12, 21, 0]])
    assert spans == [[("a", 0, 2), ("b", 2, 1)]]
    assert m.matcher().misses == 0 and m.matcher().unplaced() == 0


def test_a_pad_id_document_read_as_padding_where_the_greedy_reading_took_it():
    # The packer: [d0 pad] [d1 d2] [d3 d4] (greedy in order). Greedy reading puts d2 (a lone pad id) in row
    # 0's padding, so row 2's first token has no document left; the search reads row 0's tail as padding.
    docs = [("d0", [0, 0]), ("d1", [0, 0]), ("d2", [0]), ("d3", [0]), ("d4", [1])]
    spans, m = _read(docs, [[0, 0, 0], [0, 0, 0], [0, 1, 0]])
    assert spans == [[("d0", 0, 2)], [("d1", 0, 2), ("d2", 2, 1)], [("d3", 0, 1), ("d4", 1, 1)]]
    assert m.matcher().unplaced() == 0


def test_an_unexplainable_step_keeps_the_greedy_reading():
    # token 7 belongs to no document: no reading explains it, the greedy spans stay and the checks report it
    spans, m = _read([("a", [11])], [[11, 7, 0]])
    assert spans == [[("a", 0, 1)]]
    assert m.matcher().misses == 1


def test_padding_before_a_later_document_where_the_next_one_does_not_fit():
    # The packer (greedy in order, rows of 3): [d0 pad pad] [d1] [d2 pad], every token the pad id 0. At row 0
    # slot 1 the next document in order (d1, 3 tokens) does not fit; d2 matches, and so does padding: padding is
    # read, as the packer left it (taking d2 there would read row 2 as padding: d2 in the wrong row).
    spans, m = _read([("d0", [0]), ("d1", [0, 0, 0]), ("d2", [0, 0])], [[0, 0, 0], [0, 0, 0], [0, 0, 0]])
    assert spans == [[("d0", 0, 1)], [("d1", 0, 3)], [("d2", 0, 2)]]
    assert m.matcher().unplaced() == 0


# ---- the dump converters' sequential cursor against the core's reading -------------------------------------
# packoracle.dump.match_sequential must run without the extension, so it keeps its own cursor over documents in
# the producer's order; on every sequential layout it accepts, it must read the spans the core reads.

from hypothesis import given, settings, strategies as st  # noqa: E402

from packoracle._batch import SpanMatcher  # noqa: E402
from packoracle.dump.spans import DocumentSequence, match_sequential  # noqa: E402

PAD = 0
CURSOR_OVERFLOW = {"error": "whole", "split": "split", "truncate": "truncate"}


def _sequential_rows(docs, overflow, row_length):
    """Rows as a sequential producer fills them: documents in order, cut at the row's end where the policy
    splits or truncates (a truncated document's rest is dropped), else moved whole to the next row; padding
    (the pad id) after."""
    rows, row = [], []
    for doc in docs:
        rest = list(doc)
        while rest:
            room = row_length - len(row)
            if len(rest) <= room:
                row += rest
                rest = []
            elif overflow == "error":
                rows.append(row + [PAD] * room)
                row = []
            else:
                row += rest[:room]
                rest = rest[room:] if overflow == "split" else []
            if len(row) == row_length:
                rows.append(row)
                row = []
    if row:
        rows.append(row + [PAD] * (row_length - len(row)))
    return rows


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_sequential_cursor_reads_what_the_core_reads(data):
    overflow = data.draw(st.sampled_from(sorted(CURSOR_OVERFLOW)), "overflow")
    row_length = data.draw(st.integers(1, 12), "row_length")
    longest = row_length if overflow == "error" else 3 * row_length
    # a small alphabet (1..3) makes documents collide: prefixes of each other, repeats at a row's end
    docs = data.draw(st.lists(st.lists(st.integers(1, 3), min_size=0, max_size=longest), max_size=8), "docs")
    rows = _sequential_rows(docs, overflow, row_length)
    uids = [f"d{k}" for k in range(len(docs))]
    core = SpanMatcher([{"doc_uid": u, "tokens": np.asarray(d, dtype=np.int64)} for u, d in zip(uids, docs)],
                       {"overflow": overflow, "pad_id": PAD})  # no delimiters: the documents as placed
    cursor = DocumentSequence([{"doc_uid": u, "tokens": d} for u, d in zip(uids, docs)])
    for r, row in enumerate(rows):
        expected = match_sequential(row, cursor, where=f"rows[{r}]", pad_id=PAD, overflow=CURSOR_OVERFLOW[overflow])
        assert core.match(np.asarray(row, dtype=np.int64), f"rows[{r}]") == expected, (docs, rows, r)
    assert core.misses == 0 and core.unplaced() == 0

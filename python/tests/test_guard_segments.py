"""The guard's segments (packoracle.guard without documents) are the core's: ``_core.segments`` binds the C++
reading of a row's declared boundary encoding (properties/backend_attention.h DeclaredSegments), and the guard
reads rows through it instead of re-deriving the rule in Python (issue 25).

Pinned on every preset for every row the kit's generator makes: packoracle.fuzz without a packer hands the
reference packer's micro-batches to a recording attention consumer; each micro-batch, stripped of its
doc_spans, is read by the guard, and its segments must start exactly where the documents do."""

import numpy as np
import pytest

import packoracle
from tests.helpers import small_fuzz
from packoracle import _core
from packoracle.guard import documents_from_segments

PRESETS = [p["name"] for p in _core.presets()]
CASES = 400
NO_ENCODING = ("spans", "none")  # nothing in the row says where documents start: the guard sees one per row


def _pieces(row) -> np.ndarray:
    """The piece of each slot (its doc_span's ordinal), -1 for padding: the truth the rows were packed from."""
    piece = np.full(len(row["input_ids"]), -1)
    for k, span in enumerate(row["doc_spans"]):
        piece[span["start"]:span["start"] + span["length"]] = k
    return piece


def _declared_attention(row, policy) -> np.ndarray:
    """The mask DESIGN §3 declares for the real queries of a correctly packed row (padding queries reach no loss
    and are not compared): causal; a real key when row_causal or in the query's piece; a padding key only when
    pad_keys is visible."""
    piece = _pieces(row)
    n = len(piece)
    q, k = np.arange(n)[:, None], np.arange(n)[None, :]
    real_key = piece[None, :] >= 0
    same = (piece[None, :] == piece[:, None]) | (policy["attention"] == "row_causal")
    return (k <= q) & np.where(real_key, same, policy["pad_keys"] == "visible")


class Recorder:
    """A correct micro-batch attention consumer that keeps every micro-batch it is shown."""

    __name__ = __qualname__ = "recorder"

    def __init__(self):
        self.microbatches = []

    def __call__(self, microbatch, policy):
        self.microbatches.append(microbatch)
        return [_declared_attention(row, policy) for row in microbatch["rows"]]


def _as_batches(microbatch) -> list:
    """A micro-batch record as the guard gets batches: rows × slots arrays (one list per row for cu_seqlens and
    seq_lens), no doc_spans; a batch per row where the rows differ in length (unpadded rows)."""
    rows = microbatch["rows"]
    if len({len(row["input_ids"]) for row in rows}) > 1:
        return [b for row in rows for b in _as_batches({"rows": [row]})]
    batch = {}
    for name in rows[0]:
        if name == "doc_spans":
            continue
        if name in ("cu_seqlens", "seq_lens"):
            batch[name] = [np.asarray(row[name]) for row in rows]
        else:
            batch[name] = np.stack([np.asarray(row[name]) for row in rows])
    return [batch]


def _told_from_padding(row, policy) -> list:
    """The row's doc_spans but the trailing ones made only of the pad id with ignored labels: padding to anyone
    who reads the row without its documents (the generator makes such documents on purpose), so padding to the
    guard too."""
    spans = list(row["doc_spans"])
    if policy["padding"] == "none":
        return spans
    ids, labels = np.asarray(row["input_ids"]), np.asarray(row["labels"])
    pad = (ids == policy["pad_id"]) & (labels == policy["ignore_index"])
    # unless an encoding marks the slots as a document's (a doc id >= 0, an attention_mask of 1): the guard
    # takes the padding an encoding marks as it is marked
    for field, real in (("doc_ids", lambda a: a >= 0), ("attention_mask", lambda a: a != 0)):
        if row.get(field) is not None and np.asarray(row[field]).shape == ids.shape:
            marked = ~real(np.asarray(row[field]))
            tail = len(marked)
            while tail > 0 and marked[tail - 1]:
                tail -= 1
            pad[:tail] = False
            pad[tail:] = True
    while spans and pad[spans[-1]["start"]:spans[-1]["start"] + spans[-1]["length"]].all():
        spans.pop()
    return spans


def _real(starts, piece) -> list:
    return [int(s) for s in starts if piece[s] >= 0]


@pytest.mark.parametrize("preset", PRESETS)
def test_guard_segments_are_the_cores_on_every_generated_row(preset):
    policy = packoracle.Policy(preset).to_dict()
    recorder = Recorder()
    small_fuzz(None, preset, cases=CASES, microbatch_consumer=recorder, decoder=False)
    rows = multi = 0
    for microbatch in recorder.microbatches:
        guard_spans = [spans for batch in _as_batches(microbatch)
                       for spans in documents_from_segments(batch, policy)[1]]
        assert len(guard_spans) == len(microbatch["rows"])
        for row, spans in zip(microbatch["rows"], guard_spans):
            piece = _pieces(row)
            guard = [s["start"] for s in spans]
            told = _told_from_padding(row, policy)
            truth = [s["start"] for s in told]
            assert all(a["start"] + a["length"] == b["start"] for a, b in zip(spans, spans[1:])), spans  # a tiling
            if policy["boundary_source"] in NO_ENCODING:
                # none declared: the encodings the row carries say where documents start (the reference packer
                # writes doc_ids), else nothing does and the row is one segment
                carried = any(row.get(f) is not None for f in ("cu_seqlens", "seq_lens", "doc_ids"))
                assert _real(guard, piece) == (truth if carried else truth[:1]), (guard, row)
                continue
            core = _core.segments(row, policy)  # the core's reading of the whole row, doc_spans and all
            assert _real(core, piece) == [s["start"] for s in row["doc_spans"]], (core, row)
            assert _real(guard, piece) == truth, (guard, core, row)
            # the last segment reaches the last document token, even one equal to the pad id
            told_end = told[-1]["start"] + told[-1]["length"] if told else 0
            assert (spans[-1]["start"] + spans[-1]["length"] if spans else 0) >= told_end, (spans, row)
            rows += 1
            multi += len(truth) >= 2
    if policy["boundary_source"] not in NO_ENCODING:
        assert rows >= CASES and multi >= CASES // 10, (rows, multi)


def test_llmc_row_gives_three_documents():
    """llm.c's EOT (bos_id 0) opens each document: [0 5 6 | 0 7 8 9 | 0] (the Python copy read it as one)."""
    ids = np.array([0, 5, 6, 0, 7, 8, 9, 0])
    labels = np.array([5, 6, 0, 7, 8, 9, 0, 1])
    docs, spans = documents_from_segments({"input_ids": ids, "labels": labels}, packoracle.Policy("llmc").to_dict())
    # the last piece goes on: its label (pre-shifted) is the next token of the stream, 1, not a BOS
    assert [d["tokens"] for d in docs] == [[0, 5, 6], [0, 7, 8, 9], [0, 1]]
    assert [(s["start"], s["length"]) for s in spans[0]] == [(0, 3), (3, 4), (7, 1)]


@pytest.mark.parametrize("source, base, positions, starts", [
    ("position_reset", 0, [0, 1, 2, 0, 1, 0, 1, 2], [0, 3, 5]),
    ("position_reset", 1, [1, 2, 3, 1, 2, 1, 2, 3], [0, 3, 5]),  # a reset to the base, not any decrease
    ("position_reset", 0, [0, 1, 2, 1, 2, 3, 4, 5], [0]),        # a decrease that is no reset: one document
    ("position_step", 0, [0, 1, 2, 7, 8, 3, 4, 5], [0, 3, 5]),   # any step other than 1 starts one
])
def test_positions_are_read_as_the_policy_declares(source, base, positions, starts):
    policy = packoracle.Policy("trl-padding-free", boundary_source=source, position_base=base).to_dict()
    ids = np.arange(10, 18)
    batch = {"input_ids": ids, "labels": ids, "position_ids": np.array(positions)}
    _, spans = documents_from_segments(batch, policy)
    assert [s["start"] for s in spans[0]] == starts
    assert _core.segments(batch | {"doc_spans": []}, policy) == starts


def test_a_row_without_its_declared_encoding_is_one_segment_for_the_guard_and_an_error_for_the_core():
    ids = np.arange(10, 16)
    row = {"input_ids": ids, "labels": ids}
    assert _core.segments(row, "hf-flatten", as_fed=True) == [0]
    with pytest.raises(ValueError, match="cu_seqlens"):
        _core.segments(row, "hf-flatten")
    docs, _ = documents_from_segments(row, packoracle.Policy("hf-flatten").to_dict())
    assert [d["tokens"] for d in docs] == [ids.tolist()]


def test_a_malformed_encoding_is_a_value_error_naming_it():
    ids = np.arange(10, 16)
    with pytest.raises(ValueError, match="cu_seqlens"):
        documents_from_segments({"input_ids": ids, "labels": ids, "cu_seqlens": np.array([0, 3, 5])},
                                packoracle.Policy("hf-flatten").to_dict())

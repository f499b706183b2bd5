"""Attention consumers at real row lengths: a consumer that answers a compact form (segment ids, a mask function,
a FlexAttention mask_mod or BlockMask) is read without an n × n matrix (packoracle._masks.runs) and checked on long
rows: segment ids up to max_row_length slots (8,192 at the defaults), a function (read cell by cell) up to 4,096;
one that answers dense n × n masks keeps rows of at most 512 slots; but one case in 32 gives either rows of the
run's full length (at least 4,096 slots), one a micro-batch. A consumer that is right below 2,048 slots and wrong
above is caught at the defaults of packoracle.fuzz, whatever it answers, with a counterexample drawn where it is
wrong."""

import numpy as np
import pytest
import torch

import packoracle
from packoracle import _masks

CHUNK = 2048  # the ring chunk of the buggy consumers below


def segment_ids(microbatch, policy):
    return [row["doc_ids"] for row in microbatch["rows"]]


def mask_mod(microbatch, policy):
    docs = torch.as_tensor(np.stack([np.asarray(row["doc_ids"]) for row in microbatch["rows"]]))

    def mod(b, h, q_idx, kv_idx):
        return (docs[b, q_idx] == docs[b, kv_idx]) & (docs[b, kv_idx] >= 0) & (kv_idx <= q_idx)
    return mod


def dense(microbatch, policy):
    out = []
    for row in microbatch["rows"]:
        d = np.asarray(row["doc_ids"])
        out.append(np.tril((d[:, None] == d[None, :]) & (d[None, :] >= 0)))
    return out


def chunk_local_segment_ids(microbatch, policy):
    """A ring-attention consumer that numbers the documents of each chunk of 2,048 slots from 0 and hands the
    kernel one id array: right on rows of up to 2,048 slots; past that, a document of a later chunk shares an
    id with one of an earlier chunk (and a document across the cut gets two)."""
    out = []
    for row in microbatch["rows"]:
        d = np.asarray(row["doc_ids"])
        ids = d.copy()
        for a in range(0, len(d), CHUNK):
            chunk = d[a:a + CHUNK]
            real = chunk >= 0
            ids[a:a + CHUNK][real] = np.unique(chunk[real], return_inverse=True)[1]
        out.append(ids)
    return out


def chunk_local_dense(microbatch, policy):
    """The same ring split, answering the dense n × n mask its kernel builds from the chunk-local ids."""
    out = []
    for row, ids in zip(microbatch["rows"], chunk_local_segment_ids(microbatch, policy)):
        d = np.asarray(row["doc_ids"])
        out.append(np.tril((ids[:, None] == ids[None, :]) & (d[None, :] >= 0)))
    return out


def longest_row(result):
    return result.generated["row_length"]["max"]


@pytest.mark.parametrize("answer", [segment_ids, mask_mod], ids=["segment_ids", "mask_mod"])
def test_a_correct_compact_consumer_passes_on_long_rows_at_the_defaults(answer):
    result = packoracle.fuzz(None, "reference", microbatch_consumer=answer, stats=True)
    assert "attention" in result.checked
    assert longest_row(result) > 4096, result.generated["row_length"]  # a mask_mod too, in its full-size cases


def test_a_dense_consumer_keeps_rows_of_at_most_512_slots_but_in_its_full_size_cases():
    result = packoracle.fuzz(None, "reference", microbatch_consumer=dense, cases=31, stats=True)
    assert "attention" in result.checked
    assert 16 < longest_row(result) <= 512, result.generated["row_length"]
    result = packoracle.fuzz(None, "reference", microbatch_consumer=dense, cases=32, stats=True)
    assert longest_row(result) >= 4096, result.generated["row_length"]  # the 32nd case: full size


@pytest.mark.parametrize("answer", [chunk_local_segment_ids, chunk_local_dense], ids=["segment_ids", "dense"])
def test_a_consumer_wrong_past_2048_slots_is_caught_at_the_defaults(answer):
    with pytest.raises(packoracle.Counterexample) as caught:
        packoracle.fuzz(None, "reference", microbatch_consumer=answer)
    e = caught.value
    text = str(e)
    assert e.invariant == "attention", text
    # the counterexample needs a row past the chunk; the report draws the row and the attention grid around the
    # first wrong query, not an n × n drawing
    first = int(text.split(": query ")[1].split(" ")[0])
    assert first >= CHUNK, text
    assert f"queries {first - 16}.." in text or f"queries {first - 15}.." in text or "queries " in text, text
    assert text.count("\n") < 200, text
    # and it replays
    with pytest.raises(packoracle.Counterexample) as again:
        packoracle.fuzz(None, "reference", microbatch_consumer=answer, reproduce=e.reproduce)
    assert again.value.invariant == "attention"


def test_the_same_consumer_is_right_on_rows_of_up_to_2048_slots():
    packoracle.fuzz(None, "reference", microbatch_consumer=chunk_local_segment_ids, cases=300, max_row_length=CHUNK)


# ---- the conversion: every form read as runs, equal to the dense reading, in bounded chunks -------------------

def dense_of(runs):
    offsets, begin, end, _ = runs
    n = len(offsets) - 1
    out = np.zeros((n, n), dtype=np.uint8)
    for i in range(n):
        for r in range(offsets[i], offsets[i + 1]):
            out[i, begin[r]:end[r]] = 1
    return out


@pytest.mark.parametrize("chunk_cells", [7, 100, 1 << 21])
def test_runs_of_every_form_equal_the_dense_reading(chunk_cells, monkeypatch):
    from torch.nn.attention.flex_attention import create_block_mask

    monkeypatch.setattr(_masks, "_CHUNK_CELLS", chunk_cells)
    rng = np.random.default_rng(7)
    for trial in range(40):
        n = int(rng.integers(1, 300 if trial % 10 == 0 else 40))
        ids = np.sort(rng.integers(-1, 5, n)) if trial % 2 else rng.integers(-1, 4, n)  # reused ids too
        answers = [ids, rng.integers(0, 2, (n, n)), lambda q, k, d=ids: (d[q] == d[k]) & (k <= q)]
        t = torch.as_tensor(ids)
        mod = lambda b, h, q, kv: (t[q] == t[kv]) & (kv <= q) & (t[kv] >= 0)  # noqa: E731
        answers.append(mod)
        if trial % 10 == 0:
            answers.append(create_block_mask(mod, 1, 1, n, n, device="cpu"))
        for answer in answers:
            got = _masks.runs(answer, n, 0, "w")
            assert (dense_of(got) == _masks.densify(answer, n, 0, "w")).all(), (trial, type(answer))
            form = "dense" if isinstance(answer, np.ndarray) and answer.ndim == 2 else (
                "runs" if isinstance(answer, np.ndarray) else "function")
            assert got[3] == form


def test_segment_ids_of_8192_slots_convert_without_a_matrix():
    import tracemalloc

    ids = np.repeat(np.arange(64), 128)
    tracemalloc.start()
    offsets, begin, end, source = _masks.runs(ids, 8192, 0, "w")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert source == "runs" and len(begin) == 8192 and offsets[-1] == 8192
    assert peak < 8192 * 8192 // 16, peak  # a dense uint8 matrix would be 64 MiB

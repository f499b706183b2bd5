"""What an attention consumer computes (DESIGN §4 efficiency, §12 "Work"): a micro-batch consumer returning
``packoracle.Computed(masks, pairs=..., extra_rows=...)`` says which (query, key) pairs its kernel evaluates beside
what it attends with; the core states the least the declared rule needs, reports the consumer's utilization, and
under the policy's ``consumer_overhead: p`` fails a micro-batch that computes more than (1 + p/100) times that.

Two mechanisms with their fixed twins: alignment padding turned into a dense dummy row (the masks are right, the
compute doubles unseen), and a dense causal kernel over the whole padded row. The consumers are candidates; the
core judges."""

import numpy as np
import pytest

import packoracle

ALIGN = 8  # the kernel's alignment: the micro-batch's tokens padded to a multiple of it
SMALL = {"cases": 60, "max_row_length": 32, "decoder": False}


def _segments(row):
    """Per-slot segment ids from the row's doc spans (-1: padding): a varlen kernel's exact causal attention."""
    ids = np.full(len(row["input_ids"]), -1, dtype=np.int64)
    for k, span in enumerate(row["doc_spans"]):
        ids[span["start"]:span["start"] + span["length"]] = k
    return ids


def _aligned(dense_dummy_row):
    """A varlen consumer padding the micro-batch's tokens to a multiple of ALIGN: the buggy one builds the padding
    as a dense dummy row (a × a pairs), its twin leaves it out of cu_seqlens (nothing computed)."""
    def consume(microbatch, policy):
        segments = [_segments(row) for row in microbatch["rows"]]
        pad = -sum(int((s >= 0).sum()) for s in segments) % ALIGN
        extra = [(pad, np.ones((pad, pad), dtype=bool))] if dense_dummy_row and pad else []
        return packoracle.Computed(segments, extra_rows=extra)
    return consume


def test_a_dense_dummy_row_is_reported_while_efficiency_is_reported():
    result = packoracle.fuzz(None, "reference", microbatch_consumer=_aligned(True), **SMALL)
    assert "efficiency" not in result.checked
    work = result.consumer_work
    assert work is not None and work["computed"] > work["required"] > 0, work
    assert work["utilization"] == pytest.approx(work["required"] / work["computed"])
    assert "consumer work:" in str(result)


def test_a_dense_dummy_row_breaks_the_promise_with_a_minimal_counterexample_and_its_twin_keeps_it():
    promised = {"preset": "reference", "consumer_overhead": 0}
    with pytest.raises(packoracle.Counterexample) as caught:
        packoracle.fuzz(None, promised, microbatch_consumer=_aligned(True), **SMALL)
    e = caught.value
    assert e.invariant == "efficiency", str(e)
    assert "extra row" in str(e) and "consumer_overhead: 0" in str(e), str(e)
    assert len(e.request["documents"]) == 1, e.request["documents"]
    result = packoracle.fuzz(None, promised, microbatch_consumer=_aligned(False), **SMALL)
    assert "efficiency" in result.checked
    assert result.consumer_work["computed"] == result.consumer_work["required"]


def _sdpa(over_padding):
    """SDPA with a padding mask: the masks are the rows' segments, but the kernel runs causal over the whole
    padded row (every query's [0, i], padding queries included); its twin unpads the row first."""
    def consume(microbatch, policy):
        segments = [_segments(row) for row in microbatch["rows"]]
        pairs = (lambda q, k: k <= q) if over_padding else [s for s in segments]
        return packoracle.Computed(segments, pairs=pairs)
    return consume


def test_a_causal_kernel_over_the_padded_row_breaks_the_promise_and_its_unpadded_twin_keeps_it():
    promised = {"preset": "hf-padded", "consumer_overhead": 100}  # at most twice the pairs needed
    with pytest.raises(packoracle.Counterexample) as caught:
        packoracle.fuzz(None, promised, microbatch_consumer=_sdpa(True), **SMALL)
    assert caught.value.invariant == "efficiency", str(caught.value)
    assert "consumer_overhead: 100" in str(caught.value)
    result = packoracle.fuzz(None, promised, microbatch_consumer=_sdpa(False), **SMALL)
    assert "efficiency" in result.checked


def test_a_malformed_extra_row_fails_the_case_naming_it():
    def consume(microbatch, policy):
        return packoracle.Computed([_segments(row) for row in microbatch["rows"]], extra_rows=[("seven", None)])
    with pytest.raises(packoracle.Counterexample) as caught:
        packoracle.fuzz(None, "reference", microbatch_consumer=consume, **SMALL)
    assert "Computed.extra_rows[0] must be a pair (length >= 0, pairs)" in str(caught.value)


def test_a_consumer_returning_masks_alone_reports_no_work():
    result = packoracle.fuzz(None, {"preset": "reference", "consumer_overhead": 0},
                             microbatch_consumer=lambda mb, policy: [_segments(row) for row in mb["rows"]], **SMALL)
    assert result.consumer_work is None

"""packoracle.fuzz on attention consumers (``consumer=f`` per row, ``microbatch_consumer=g`` per micro-batch),
with the kit's reference packer producing the rows (packer=None): a correct consumer passes in every answer form
a backend holds (segment ids, dense masks, mask functions, FlexAttention mask_mods and BlockMasks); a leaky one
is caught with invariant "attention" and a minimal, replayable counterexample; PI-01 (packing detected only
when the micro-batch has one row) is caught in the micro-batch form and, as it must be, not in the per-row form;
answers that are no mask fail the case with a message naming the problem instead of crashing."""

import re

import numpy as np
import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask

import packoracle
from tests.helpers import small_fuzz

CASES = 300
POLICY = "reference"  # doc_causal: a query sees the earlier keys of its own document; padding is seen by nobody


def doc_causal(doc_ids):
    """The dense n × n mask (bool) of doc_ids read as causal segment ids, -1 = padding seen by nobody."""
    d = np.asarray(doc_ids)
    return np.tril((d[:, None] == d[None, :]) & (d[None, :] >= 0))


def doc_tensor(microbatch):
    """The micro-batch's doc ids as a rows × n torch tensor (the rows of a micro-batch share one length)."""
    return torch.as_tensor(np.stack([np.asarray(row["doc_ids"]) for row in microbatch["rows"]]))


def mask_function(doc_ids):
    """A numpy mask(q, k) for one row (built by a factory so each closure keeps its own row)."""
    d = np.asarray(doc_ids)

    def mask(q, k):
        return (d[q] == d[k]) & (d[k] >= 0) & (k <= q)
    return mask


def mask_mod_of(docs):
    """A FlexAttention mask_mod over a rows × n doc-id tensor: row b of the micro-batch is docs[b]."""
    def mask_mod(b, h, q_idx, kv_idx):
        return (docs[b, q_idx] == docs[b, kv_idx]) & (docs[b, kv_idx] >= 0) & (kv_idx <= q_idx)
    return mask_mod


def block_mask(microbatch, **kwargs):
    docs = doc_tensor(microbatch)
    rows, n = docs.shape
    return create_block_mask(mask_mod_of(docs), rows, None, n, n, device="cpu", **kwargs)


class MicrobatchRecorder:
    """Wraps a micro-batch consumer and remembers what it was shown: how many micro-batches, the most rows in
    one, and how many rows packed two or more documents."""

    def __init__(self, consumer):
        self.consumer = consumer
        self.__name__ = self.__qualname__ = consumer.__name__
        self.calls, self.most_rows, self.multi_document_rows = 0, 0, 0

    def __call__(self, microbatch, policy):
        self.calls += 1
        rows = microbatch["rows"]
        self.most_rows = max(self.most_rows, len(rows))
        for row in rows:
            d = np.asarray(row["doc_ids"])
            self.multi_document_rows += int(len(set(d[d >= 0].tolist())) >= 2)
        return self.consumer(microbatch, policy)


# ---- 1. A correct consumer passes, in every form of answer ------------------------------------------------------

def answer_segment_ids(microbatch, policy):
    return [row["doc_ids"] for row in microbatch["rows"]]


def answer_segment_ids_torch(microbatch, policy):
    return [torch.as_tensor(row["doc_ids"], dtype=torch.int32) for row in microbatch["rows"]]


def answer_dense_bool(microbatch, policy):
    return [doc_causal(row["doc_ids"]) for row in microbatch["rows"]]


def answer_dense_float_torch(microbatch, policy):
    return [torch.as_tensor(doc_causal(row["doc_ids"]), dtype=torch.float32) for row in microbatch["rows"]]


def answer_dense_int_list(microbatch, policy):
    return [doc_causal(row["doc_ids"]).astype(int).tolist() for row in microbatch["rows"]]


def answer_dense_stacked(microbatch, policy):  # one rows × n × n array for the whole micro-batch
    return np.stack([doc_causal(row["doc_ids"]) for row in microbatch["rows"]])


def answer_mask_function(microbatch, policy):
    return [mask_function(row["doc_ids"]) for row in microbatch["rows"]]


def answer_mask_mod_alone(microbatch, policy):  # one mask_mod for the whole micro-batch, indexing by b
    return mask_mod_of(doc_tensor(microbatch))


def answer_mask_mod_per_row(microbatch, policy):
    mask_mod = mask_mod_of(doc_tensor(microbatch))
    return [mask_mod] * len(microbatch["rows"])


def answer_block_mask(microbatch, policy):  # B = rows; default 128-blocks: every row lies in one partial block
    return block_mask(microbatch)


def answer_block_mask_small_blocks(microbatch, policy):  # 2 × 2 blocks: full, partial and absent blocks all occur
    return block_mask(microbatch, BLOCK_SIZE=2)


CORRECT_ANSWERS = [answer_segment_ids, answer_segment_ids_torch, answer_dense_bool, answer_dense_float_torch,
                   answer_dense_int_list, answer_dense_stacked, answer_mask_function, answer_mask_mod_alone,
                   answer_mask_mod_per_row, answer_block_mask, answer_block_mask_small_blocks]


@pytest.mark.parametrize("answer", CORRECT_ANSWERS, ids=[f.__name__[len("answer_"):] for f in CORRECT_ANSWERS])
def test_correct_microbatch_consumer_passes(answer):
    recorder = MicrobatchRecorder(answer)
    result = small_fuzz(None, POLICY, cases=CASES, microbatch_consumer=recorder)
    assert isinstance(result, packoracle.FuzzResult)
    assert result.cases == CASES
    assert "attention" in result.checked, result.checked
    assert "attention" not in result.not_applicable
    # The cases were worth running: micro-batches of several rows, rows packing several documents.
    assert recorder.calls >= CASES // 2, recorder.calls
    assert recorder.most_rows >= 2, recorder.most_rows
    assert recorder.multi_document_rows >= CASES // 10, recorder.multi_document_rows


def test_correct_per_row_consumer_passes():
    rows = []

    def segment_ids(row, policy):
        rows.append(len(row["input_ids"]))
        return row["doc_ids"]

    result = small_fuzz(None, POLICY, cases=CASES, consumer=segment_ids)
    assert result.cases == CASES
    assert "attention" in result.checked, result.checked
    assert len(rows) >= CASES


def test_block_mask_is_really_read():
    """A BlockMask whose mask_mod is plain causal (blocks all present) leaks across documents: caught."""
    def causal_block_mask(microbatch, policy):
        rows, n = len(microbatch["rows"]), len(microbatch["rows"][0]["input_ids"])
        return create_block_mask(lambda b, h, q, k: k <= q, rows, None, n, n, device="cpu", BLOCK_SIZE=2)

    with pytest.raises(packoracle.Counterexample) as info:
        small_fuzz(None, POLICY, cases=CASES, microbatch_consumer=causal_block_mask)
    assert info.value.invariant == "attention"
    assert "may attend key" in str(info.value)


def test_mask_mod_gets_the_row_index_as_b():
    """A mask_mod that reads row 0's documents whatever b is answers the other rows wrongly: caught."""
    def row_zero_only(microbatch, policy):
        docs = doc_tensor(microbatch)
        return lambda b, h, q, k: (docs[0, q] == docs[0, k]) & (docs[0, k] >= 0) & (k <= q)

    with pytest.raises(packoracle.Counterexample) as info:
        small_fuzz(None, POLICY, cases=CASES, microbatch_consumer=row_zero_only)
    assert info.value.invariant == "attention"
    assert re.search(r"micro-batch \d+ row [1-9]\d*:", str(info.value)), str(info.value)


def test_mask_function_with_a_default_argument_is_a_two_argument_mask():
    def answer(microbatch, policy):  # the usual way to bind a loop variable in a lambda
        return [lambda q, k, d=np.asarray(row["doc_ids"]): (d[q] == d[k]) & (d[k] >= 0) & (k <= q)
                for row in microbatch["rows"]]

    small_fuzz(None, POLICY, cases=50, microbatch_consumer=answer)


# ---- 2. PI-01: packing detected only in a one-row micro-batch --------------------------------------------------

def segments_from_positions(row):
    """Packing detected from position_ids: a segment starts wherever the position equals the row's minimum."""
    positions = np.asarray(row["position_ids"])
    return np.cumsum(positions == positions.min()) - 1


def test_pi01_microbatch_consumer_is_caught():
    def pi01(microbatch, policy):
        rows = microbatch["rows"]
        if len(rows) == 1:
            return [segments_from_positions(rows[0])]
        return [np.tril(np.ones((len(row["input_ids"]),) * 2, dtype=bool)) for row in rows]  # plain causal

    with pytest.raises(packoracle.Counterexample) as info:
        small_fuzz(None, POLICY, cases=CASES, microbatch_consumer=pi01)
    e = info.value
    assert e.invariant == "attention", str(e)
    text = str(e)
    assert "may attend key" in text and "the policy says no" in text
    # The minimal case needs a micro-batch of two rows (one row would have been read as packed).
    assert re.search(r"micro_batch_rows ([2-9]|\d\d)", text), text
    assert re.search(r"microbatch_consumer=\S*pi01, max_row_length=16, max_documents=8, reproduce=", e.replay), e.replay


def test_pi01_per_row_consumer_is_not_caught():
    """The same logic seeing one row at a time always finds a one-row batch, so it always detects packing and is
    right: only the micro-batch form can show PI-01."""
    def pi01_per_row(row, policy):
        return segments_from_positions(row)  # a lone row: packing detected

    result = small_fuzz(None, POLICY, cases=CASES, consumer=pi01_per_row)
    assert result.cases == CASES
    assert "attention" in result.checked


# ---- 3. A leaky consumer is caught with a minimal counterexample ------------------------------------------------

def leaky(row, policy):
    n = len(row["input_ids"])
    return np.tril(np.ones((n, n)))


def leaky_microbatch(microbatch, policy):
    return [leaky(row, policy) for row in microbatch["rows"]]


@pytest.mark.parametrize("form", ["consumer", "microbatch_consumer"])
def test_leaky_consumer_is_caught_with_a_minimal_counterexample(form):
    consumer = leaky if form == "consumer" else leaky_microbatch
    with pytest.raises(packoracle.Counterexample) as info:
        small_fuzz(None, POLICY, cases=CASES, **{form: consumer})
    e = info.value
    text = str(e)
    assert isinstance(e, AssertionError)
    assert e.invariant == "attention", text
    assert "Minimal counterexample" in text
    assert "Replay:" in text
    assert "may attend key" in text and "the policy says no" in text
    assert f"{form}={consumer.__name__}" in e.replay and e.reproduce in e.replay
    # Minimal: causal leaks once two one-token documents share a row.
    assert "row_length 2" in text, text
    # The reproduce string replays the same failure.
    with pytest.raises(packoracle.Counterexample) as again:
        small_fuzz(None, POLICY, reproduce=e.reproduce, **{form: consumer})
    assert again.value.invariant == "attention"
    assert again.value.reproduce == e.reproduce


# ---- 4. Answers that are no mask fail the case, named; never a crash --------------------------------------------

def wrong_shape(row):
    n = len(row["input_ids"])
    return np.ones((n + 1, n + 1), dtype=bool)


def nan_in_float_mask(row):
    mask = doc_causal(row["doc_ids"]).astype(np.float64)
    mask[-1, 0] = np.nan
    return mask


def a_string(row):
    return "causal"


def none(row):
    return None


def raises_boom(row):
    raise ValueError("boom")


def wrong_shape_ok(text):
    m = re.search(r"mask of shape \((\d+), (\d+)\) for a row of (\d+) slots", text)
    return bool(m) and int(m.group(1)) == int(m.group(2)) == int(m.group(3)) + 1


BAD_ROW_ANSWERS = {
    "wrong_shape": (wrong_shape, wrong_shape_ok),
    "nan": (nan_in_float_mask, lambda text: "holds NaN" in text),
    "string": (a_string, lambda text: "returned a string" in text),
    "none": (none, lambda text: "returned None for a row of" in text),
    "raises": (raises_boom, lambda text: "boom" in text and "ValueError" in text and "raised an exception" in text),
}


@pytest.mark.parametrize("form", ["consumer", "microbatch_consumer"])
@pytest.mark.parametrize("bad", list(BAD_ROW_ANSWERS))
def test_bad_answer_fails_the_case_named(bad, form):
    answer, named = BAD_ROW_ANSWERS[bad]
    if form == "consumer":
        def consumer(row, policy):
            return answer(row)
    else:
        def consumer(microbatch, policy):
            return [answer(row) for row in microbatch["rows"]]
    consumer.__name__ = consumer.__qualname__ = f"{bad}_{form}"

    with pytest.raises(packoracle.Counterexample) as info:
        small_fuzz(None, POLICY, cases=50, **{form: consumer})
    e = info.value
    text = str(e)
    assert e.invariant == "attention", text
    assert "the attention consumer threw" in text, text
    assert named(text), text
    assert "Replay:" in text and f"{form}={bad}_{form}" in text
    if form == "microbatch_consumer" and bad != "raises":
        assert "answer for row 0" in text, text  # the row is named


def too_many_answers(microbatch, policy):
    return [row["doc_ids"] for row in microbatch["rows"]] + [microbatch["rows"][0]["doc_ids"]]


def too_few_answers(microbatch, policy):
    return [row["doc_ids"] for row in microbatch["rows"]][:-1]


def none_for_the_batch(microbatch, policy):
    return None


def boom_for_the_batch(microbatch, policy):
    raise ValueError("boom")


def count_off_by(delta):
    def named(text):
        m = re.search(r"returned (\d+) answers for a micro-batch of (\d+) rows", text)
        return bool(m) and int(m.group(1)) == int(m.group(2)) + delta
    return named


BAD_MICROBATCH_ANSWERS = {
    "too_many": (too_many_answers, count_off_by(+1)),
    "too_few": (too_few_answers, count_off_by(-1)),
    "none": (none_for_the_batch, lambda text: "must return one answer per row" in text and "NoneType" in text),
    "raises": (boom_for_the_batch, lambda text: "boom" in text and "raised an exception" in text),
}


@pytest.mark.parametrize("bad", list(BAD_MICROBATCH_ANSWERS))
def test_bad_microbatch_answer_fails_the_case_named(bad):
    consumer, named = BAD_MICROBATCH_ANSWERS[bad]
    with pytest.raises(packoracle.Counterexample) as info:
        small_fuzz(None, POLICY, cases=50, microbatch_consumer=consumer)
    e = info.value
    text = str(e)
    assert e.invariant == "attention", text
    assert "the attention consumer threw" in text, text
    assert named(text), text
    assert f"microbatch_consumer={consumer.__name__}" in e.replay


# ---- 5. API errors ----------------------------------------------------------------------------------------------

def test_consumer_and_microbatch_consumer_together_is_a_type_error():
    with pytest.raises(TypeError, match="not both"):
        small_fuzz(None, POLICY, cases=10, consumer=lambda row, policy: row["doc_ids"],
                        microbatch_consumer=answer_segment_ids)


@pytest.mark.parametrize("value", ["segment ids", 3, [answer_segment_ids]], ids=["str", "int", "list"])
def test_non_callable_microbatch_consumer_is_a_type_error(value):
    with pytest.raises(TypeError, match="microbatch_consumer must be callable"):
        small_fuzz(None, POLICY, cases=10, microbatch_consumer=value)


def test_non_callable_consumer_is_a_type_error():
    with pytest.raises(TypeError, match="consumer must be callable"):
        small_fuzz(None, POLICY, cases=10, consumer=np.zeros((4, 4)))


def test_nothing_to_check_is_a_type_error():
    with pytest.raises(TypeError):
        small_fuzz(None, POLICY, cases=10)


def test_a_passing_run_says_what_it_did_not_check_and_how_to_check_it():
    result = small_fuzz(None, "reference", microbatch_consumer=lambda mb, p: [np.asarray(r["doc_ids"])
                                                                                   for r in mb["rows"]], cases=20)
    text = str(result)
    assert text.startswith("20 cases passed")
    assert "not checked: denominator (give reducer=" in text and "not checked: shape (give a packer)" in text
    assert "attention" in text.splitlines()[0]

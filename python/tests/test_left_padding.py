"""Left padding (``"padding": "left"``, DESIGN §3): a consumer that drops the padding mask and runs causal over
the row lets its real queries attend the left-pad keys before them, an attention finding that right padding
cannot show; its twin, causal with the padding mask, passes. The consumers are candidates; the core judges."""

import numpy as np
import pytest

import packoracle


def _causal(row, drop_padding_mask):
    n = len(row["input_ids"])
    mask = np.tril(np.ones((n, n), dtype=np.int8))
    if not drop_padding_mask:
        mask = mask * np.asarray(row["attention_mask"], dtype=np.int8)[None, :]
        np.fill_diagonal(mask, 1)  # a padding query sees itself, as its own run (never compared)
    return mask


def test_a_causal_fallback_attending_left_pad_keys_fails_attention_and_its_twin_passes():
    left = {"preset": "hf-padded", "padding": "left"}
    packoracle.fuzz(None, left, consumer=lambda row, policy: _causal(row, False), cases=100, decoder=False)
    packoracle.fuzz(None, "hf-padded", consumer=lambda row, policy: _causal(row, True), cases=100, decoder=False)
    with pytest.raises(packoracle.Counterexample) as caught:
        packoracle.fuzz(None, left, consumer=lambda row, policy: _causal(row, True), cases=100, decoder=False)
    assert caught.value.invariant == "attention"

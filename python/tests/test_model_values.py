"""A real model as a value consumer (ModelConsumer.value_consumer(), transformers_models.model_value_consumer):
its logits packed against each document piece alone, compared by the core as for any value consumer, so the
forward-level verdicts of the consumer column have a value-level twin with one owner of the comparison. A tiny
llama under sdpa fed position_ids leaks across documents with the cache its defaults create (USE_CACHE_LEAK of
the consumer column) and keeps them apart under the Trainer's use_cache=False."""
from __future__ import annotations

import pytest

import packoracle

pytest.importorskip("transformers")

from packoracle.adapters.transformers_models import ModelConsumer  # noqa: E402

SMALL = dict(max_row_length=16, max_documents=4, cases=8, seed=1, value_tolerance=(1e-4, 1e-3))


def test_the_cache_default_leaks_across_documents_at_the_value_level():
    with pytest.raises(packoracle.Counterexample) as failure:
        packoracle.fuzz(None, "reference", value_consumer=ModelConsumer("llama", "sdpa", "position_ids").value_consumer(),
                        **SMALL)
    assert failure.value.invariant == "packing_invariance"
    assert len(failure.value.minimal_case["documents"]) == 2
    assert "ModelConsumer('llama', 'sdpa', 'position_ids', None, 'forward').value_consumer()" in failure.value.headline


def test_use_cache_false_keeps_documents_apart_at_the_value_level():
    consumer = ModelConsumer("llama", "sdpa", "position_ids", use_cache=False).value_consumer()
    assert "packing_invariance" in packoracle.fuzz(None, "reference", value_consumer=consumer, **SMALL).checked

"""packoracle.fuzz(step_view=True): a micro-batch consumer sees the batch as the packer emitted it and the step's
parallel layout (DESIGN §12, "The step a consumer sees"). Each mechanism of step_consumers.py is caught under
`attention` with a small counterexample and its fixed twin passes."""
from __future__ import annotations

import pytest

import packoracle

from .step_consumers import (boundaries_of_the_held_shards, boundaries_under, cu_seqlens_divided_by_cp,
                             flat_zigzag_partition, reads_canonical_cu_seqlens, reads_flash_kwargs)

SMALL = dict(max_row_length=32, max_documents=6, cases=120, seed=3)


def test_boundaries_under_a_key_the_model_never_reads_are_caught_in_the_emitted_batch():
    with pytest.raises(packoracle.Counterexample) as failure:
        packoracle.fuzz(boundaries_under("cu_seqlens"), "hf-flatten", microbatch_consumer=reads_flash_kwargs,
                        step_view=True, **SMALL)
    assert failure.value.invariant == "attention"
    assert len(failure.value.minimal_case["documents"]) == 2, str(failure.value)


def test_boundaries_under_the_key_the_model_reads_pass():
    packoracle.fuzz(boundaries_under("cu_seq_lens_q"), "hf-flatten", microbatch_consumer=reads_flash_kwargs,
                    step_view=True, **SMALL)


def test_the_canonical_reading_cannot_tell_the_two_keys_apart():
    """Why the emitted batch is needed: both collators read the same in the kit's field names."""
    for key in ("cu_seqlens", "cu_seq_lens_q"):
        packoracle.fuzz(boundaries_under(key), "hf-flatten", microbatch_consumer=reads_canonical_cu_seqlens, **SMALL)


@pytest.mark.parametrize("consumer", [cu_seqlens_divided_by_cp, flat_zigzag_partition])
def test_per_rank_boundary_arithmetic_under_context_parallelism_is_caught(consumer):
    with pytest.raises(packoracle.Counterexample) as failure:
        packoracle.fuzz(None, "reference", microbatch_consumer=consumer, step_view=True, **SMALL)
    assert failure.value.invariant == "attention", str(failure.value)
    assert len(failure.value.minimal_case["documents"]) <= 2, str(failure.value)


def test_boundaries_of_the_shards_a_rank_holds_pass():
    packoracle.fuzz(None, "reference", microbatch_consumer=boundaries_of_the_held_shards, step_view=True, **SMALL)


def test_the_layout_a_consumer_sees():
    seen = []

    def look(microbatch, policy, step):
        seen.append(step)
        return [[0] * len(row["input_ids"]) for row in microbatch["rows"]]

    with pytest.raises(packoracle.Counterexample):
        packoracle.fuzz(None, "reference", microbatch_consumer=look, step_view=True, **dict(SMALL, cases=5))
    layout = seen[-1]["layout"]  # a case's (the probe of a run's first case is skipped at these row lengths)
    assert seen[-1]["emitted"] is None  # the kit's reference packer made the rows
    assert layout["context_parallel_size"] in (2, 4, 8)
    assert layout["context_parallel_scheme"] in ("contiguous", "load_balanced")
    assert set(layout) >= {"microbatch", "dp_rank", "dp_world_size", "micro_step", "micro_steps", "cp_shards"}
    for shards in layout["cp_shards"]:
        assert len(shards) == layout["context_parallel_size"]


def test_step_view_needs_a_consumer_that_takes_it():
    with pytest.raises(TypeError, match="step_view"):
        packoracle.fuzz(lambda request: [], "reference", step_view=True)

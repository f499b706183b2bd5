"""Real transformers models as attention consumers (packoracle.adapters.transformers_models), the consumer
column of the matrix and guard.check_model, against the installed transformers and torch. Nothing skips."""

from __future__ import annotations

import pathlib

import pytest
import torch

import packoracle
from packoracle import guard
from packoracle.adapters import transformers_models as tm
from packoracle._fuzz import SMALL_CASES
from packoracle.conformance import _consumers


def _fuzz(consumer: tm.ModelConsumer, cases: int = 100):
    return packoracle.fuzz(None, "reference", microbatch_consumer=consumer.consumer(), cases=cases, seed=11,
                           **SMALL_CASES)


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_the_use_cache_default_leaks_across_documents_with_a_minimal_counterexample(attention):
    with pytest.raises(packoracle.Counterexample) as caught:
        _fuzz(tm.ModelConsumer("llama", attention, "position_ids", None))
    e = caught.value
    assert e.invariant == "attention"
    text = str(e)
    assert "may attend key" in text and "Minimal counterexample" in text
    docs = [line for line in text.splitlines() if line.startswith("docs")][0]
    assert docs.split("(")[0].split() == ["docs", "d0=[11]", "d1=[21]"], docs  # two one-token documents


@pytest.mark.parametrize("family", ["llama", "qwen3", "mistral", "llama4"])
@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_the_trainer_setting_holds_for_every_full_attention_family(family, attention):
    result = _fuzz(tm.ModelConsumer(family, attention, "position_ids", False), cases=60)
    assert "attention" in result.checked and result.cases == 60


def test_an_all_ones_attention_mask_turns_packing_detection_off_even_under_the_trainer():
    with pytest.raises(packoracle.Counterexample) as caught:
        _fuzz(tm.ModelConsumer("llama", "sdpa", "ones_mask", False))
    assert caught.value.invariant == "attention"


@pytest.mark.parametrize("feed,use_cache", [("position_ids", None), ("position_ids", False), ("ones_mask", False),
                                            ("padding_mask", False), ("cu_seq_lens", False)])
def test_the_mask_level_agrees_with_the_forward_level_on_full_attention(feed, use_cache):
    verdicts = []
    for level in ("forward", "mask"):
        try:
            _fuzz(tm.ModelConsumer("llama", "sdpa", feed, use_cache, level), cases=60)
            verdicts.append("holds")
        except packoracle.Counterexample as e:
            verdicts.append(e.invariant)
    assert verdicts[0] == verdicts[1], verdicts


def test_linear_attention_leaks_where_the_mask_level_sees_nothing():
    # Qwen3.5's GatedDeltaNet layers have no attention mask: the full-attention layers' masks are right, the
    # convolution and the recurrence still read across documents. Only the forward level sees it.
    mask_level = _fuzz(tm.ModelConsumer("qwen3_5", "sdpa", "position_ids", False, "mask"), cases=40)
    assert mask_level.cases == 40
    with pytest.raises(packoracle.Counterexample) as caught:
        _fuzz(tm.ModelConsumer("qwen3_5", "sdpa", "position_ids", False, "forward"))
    assert caught.value.invariant == "attention"


def test_linear_attention_refuses_cu_seq_lens_without_its_kernels_and_the_matrix_says_refuses():
    cell = _consumers.run_cell(tm.ModelConsumer("qwen3_5", "eager", "cu_seq_lens", False), 20, 3)
    assert cell.verdict == "refuses"
    assert "ValueError" in cell.detail and "packed" in cell.detail


def test_a_family_without_an_attention_implementation_cannot_run():
    cell = _consumers.run_cell(tm.ModelConsumer("qwen3_5", "flex_attention", "position_ids", False), 20, 3)
    assert cell.verdict == "cannot run" and "flex" in cell.detail


def test_the_matrix_explains_its_leaks_and_renders_them():
    cells = [_consumers.run_cell(tm.ModelConsumer("llama", "sdpa", feed, cache), 40, 5)
             for feed in ("position_ids", "ones_mask") for cache in (None, False)]
    assert [c.verdict for c in cells] == ["leaks", "holds", "leaks", "leaks"]
    assert _consumers.unexplained_cells(cells) == []
    table = _consumers.consumer_table(cells)
    assert "**leaks** [F1]" in table and "· holds" in table
    section = _consumers.consumers_section(cells, 40, 5)
    assert "use_cache" in section and "Replay: `" in section and "PR #46634" in section


def _collated():
    from transformers import DataCollatorWithFlattening

    return DataCollatorWithFlattening()([{"input_ids": [5, 6, 7, 8, 9]}, {"input_ids": [10, 11, 12]}],
                                        return_tensors="pt")


def _llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=2, num_key_value_heads=2))


def test_guard_check_model_stops_a_custom_loop_at_step_zero():
    with pytest.raises(guard.GuardViolation) as caught:
        guard.check_model(_llama(), _collated())
    assert "use_cache=True" in str(caught.value) and "Minimal counterexample" in str(caught.value)


def test_guard_check_model_passes_the_trainers_setting():
    result = guard.check_model(_llama(), _collated(), use_cache=False, cases=50)
    assert result.cases == 50 and "attention" in result.checked


def test_guard_feed_follows_the_batch_keys():
    batch = _collated()
    assert guard._model.feed_of(batch) == "position_ids"
    assert guard._model.feed_of(dict(batch, attention_mask=torch.ones(1, 8))) == "ones_mask"
    assert guard._model.feed_of(dict(batch, seq_idx=torch.zeros(1, 8))) == "seq_idx"
    with pytest.raises(TypeError, match="batch must be a dict"):
        guard.check_model(_llama(), [1, 2, 3])
    with pytest.raises(ValueError, match="cases must be a positive integer"):
        guard.check_model(_llama(), batch, cases=0)


@pytest.mark.parametrize("name", [b.name for b in __import__("packoracle.adapters.mask_builders",
                                                               fromlist=["BUILDERS"]).BUILDERS])
def test_library_mask_builders_hold_under_their_declared_policies(name):
    from packoracle.adapters import mask_builders

    b = mask_builders.get(name)
    result = packoracle.fuzz(None, b.policy, microbatch_consumer=b.consumer(), cases=60, seed=4, **SMALL_CASES)
    assert result.cases == 60 and "attention" in result.checked


def test_megatron_mask_without_reset_attention_mask_breaks_document_isolation():
    from packoracle.adapters import mask_builders

    with pytest.raises(packoracle.Counterexample) as caught:
        packoracle.fuzz(None, "megatron-gpt-docmask", microbatch_consumer=mask_builders.megatron_ltor(False),
                        cases=100, seed=4, **SMALL_CASES)
    assert caught.value.invariant == "attention"


def test_torchtitan_flex_mask_without_its_document_part_is_caught():
    from torch.nn.attention.flex_attention import and_masks

    from packoracle.adapters import mask_builders

    causal_only = lambda microbatch, policy: and_masks(mask_builders.titan_attention().get_causal_mask_mod())  # noqa
    with pytest.raises(packoracle.Counterexample) as caught:
        packoracle.fuzz(None, "reference", microbatch_consumer=causal_only, cases=100, seed=4, **SMALL_CASES)
    assert caught.value.invariant == "attention"


def test_mask_builders_have_unique_names_and_a_missing_one_is_a_key_error():
    from packoracle.adapters import mask_builders

    names = [b.name for b in mask_builders.BUILDERS]
    assert len(names) == len(set(names))
    with pytest.raises(KeyError, match="torchtitan/varlen"):
        mask_builders.get("nope")


def test_a_kernel_numerically_off_on_its_own_is_reported_as_that_not_as_a_leak():
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class OffKernel(tm.ModelConsumer):
        def kernel_control(self) -> float:
            return 0.5

    cell = _consumers.run_cell(OffKernel("llama", "sdpa", "position_ids", None), 20, 3)
    assert cell.verdict == "kernel off" and "0.5" in cell.detail
    assert tm.ModelConsumer("llama", "sdpa", "position_ids", False).kernel_control() < 1e-5


@pytest.mark.parametrize("use_cache", [None, False])
def test_the_flash_path_holds_with_all_four_varlen_kwargs(use_cache):
    result = _fuzz(tm.ModelConsumer("llama", "flash_double", "cu_seq_lens", use_cache), cases=60)
    assert result.cases == 60


def test_the_flash_path_detects_packing_only_in_a_batch_of_one_row():
    with pytest.raises(packoracle.Counterexample) as caught:
        _fuzz(tm.ModelConsumer("llama", "flash_double", "position_ids", False))
    assert caught.value.invariant == "attention"
    assert "micro_batch_rows 2" in str(caught.value)  # PI-01, live: one row alone would hold


def _one_row(attention, feed, policy=tm.COLUMN_POLICIES["reference"], level="forward"):
    consume = tm.ModelConsumer("llama", attention, feed, False, level, one_row=True).consumer()
    try:
        packoracle.fuzz(None, policy, microbatch_consumer=consume, cases=40, seed=3, **SMALL_CASES)
        return "holds"
    except packoracle.Counterexample as e:
        assert "attention consumer" not in str(e), str(e)  # never the kit's own fault
        return e.invariant


def test_one_row_a_batch_the_flash_path_drops_an_all_ones_mask_and_unpads_a_padding_mask():
    # masking_utils.flash_attention_mask returns None for an all-ones mask: a row fed alone then holds (the
    # stacked cells leak through F4, the batch of several rows); a mask with padding is unpadded one sequence a
    # row (F5) even alone.
    assert _one_row("flash_double", "ones_mask") == "holds"
    assert _one_row("flash_double", "position_ids") == "holds"
    assert _one_row("flash_double", "padding_mask") == "attention"
    assert tm.ModelConsumer("llama", "flash_double", "ones_mask").finding is tm.FLASH_BATCH_OF_ONE
    assert tm.ModelConsumer("llama", "flash_double", "padding_mask", one_row=True).finding is tm.FLASH_MASK_UNPADS


def test_a_row_that_starts_in_the_middle_of_a_document_loses_its_first_slots_on_the_flash_path():
    split = tm.COLUMN_POLICIES[tm.ONE_ROW_POLICY]
    assert _one_row("flash_double", "position_ids", split) == "attention"  # F6: cu_seq_lens from position_ids.min()
    assert _one_row("flash_double", "cu_seq_lens", split) == "holds"      # the collator's own cu_seq_lens are right
    assert _one_row("eager", "position_ids", split) == "holds"            # the sdpa/eager detection reads steps


def test_a_block_mask_of_a_row_fed_alone_is_read_at_its_own_batch_index():
    # (was the kit's own fault: the BlockMask of a batch of one row read at the row's index in the micro-batch)
    assert _one_row("flex_attention", "position_ids", level="mask") == "holds"


def test_the_pages_replay_line_of_the_mid_document_finding_runs_and_fails_as_printed():
    page = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "conformance.md").read_text()
    section = page[page.index('<a id="consumer-f6"></a>'):]
    line = section[section.index("Replay: `") + len("Replay: `"):]
    line = line[:line.index("`")]
    assert "one_row=True" in line and '"overflow": "split"' in line
    with pytest.raises(packoracle.Counterexample) as caught:
        exec(line, {"packoracle": packoracle})  # noqa: S102 - the page's own line, as a user pastes it
    assert caught.value.invariant == "attention"


def test_the_flash_double_is_causal_within_each_sequence_it_is_handed():
    from packoracle.adapters import flash_double

    torch.manual_seed(1)
    q, k, v = (torch.randn(7, 2, 4) for _ in range(3))
    cu = torch.tensor([0, 3, 7], dtype=torch.int32)
    out = flash_double.flash_attn_varlen_func(q, k, v, cu, cu, 4, 4, causal=True)
    first = torch.nn.functional.scaled_dot_product_attention(
        q[:3].transpose(0, 1), k[:3].transpose(0, 1), v[:3].transpose(0, 1), is_causal=True).transpose(0, 1)
    assert torch.allclose(out[:3], first)
    changed = v.clone()
    changed[:3] += 1.0  # the first sequence's values do not reach the second's outputs
    again = flash_double.flash_attn_varlen_func(q, k, changed, cu, cu, 4, 4, causal=True)
    assert torch.equal(again[3:], out[3:]) and not torch.equal(again[:3], out[:3])


def _train_one_step(check_model_every: int, use_cache: bool):
    import tempfile

    from transformers import DataCollatorWithFlattening, Trainer, TrainingArguments

    model = _llama()
    args = TrainingArguments(output_dir=tempfile.mkdtemp(prefix="packoracle-check-model-"), use_cpu=True,
                             per_device_train_batch_size=2, max_steps=2, report_to=[], save_strategy="no",
                             logging_strategy="no", disable_tqdm=True, use_cache=use_cache)
    docs = [{"input_ids": [5, 6, 7, 8, 9]}, {"input_ids": [10, 11, 12]}, {"input_ids": [13, 14]}, {"input_ids": [15]}]
    collator = guard.wrap_collator(DataCollatorWithFlattening(), {"preset": "hf-flatten",
                                                                 "boundary_source": "position_reset"})
    trainer = Trainer(model=model, args=args, train_dataset=docs, data_collator=collator)
    watch = guard.attach(trainer, check_model_every=check_model_every)
    trainer.train()
    return watch


def test_attach_checks_the_model_the_trainer_calls_and_it_holds_under_the_trainers_use_cache():
    watch = _train_one_step(check_model_every=1, use_cache=False)
    assert watch.model_checked_at is not None and watch.verdicts


def test_attach_stops_a_trainer_told_to_use_the_cache_at_its_first_batch():
    with pytest.raises(guard.GuardViolation, match="use_cache=True"):
        _train_one_step(check_model_every=1, use_cache=True)


def test_attach_refuses_a_bad_check_model_every():
    with pytest.raises(ValueError, match="check_model_every"):
        guard.attach(object(), "reference", check_model_every=-1)


def test_flex_attention_at_the_mask_level_reads_the_block_mask_the_model_builds():
    result = _fuzz(tm.ModelConsumer("llama", "flex_attention", "position_ids", False, "mask"), cases=40)
    assert result.cases == 40
    with pytest.raises(packoracle.Counterexample):
        _fuzz(tm.ModelConsumer("llama", "flex_attention", "position_ids", None, "mask"), cases=40)

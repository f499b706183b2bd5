"""The guard's overhead (issue: "the guard"), pytest-benchmark, CPU time: on an 8 × 8192 batch (8 collator
calls of DataCollatorWithFlattening, each one row of 8,192 tokens from documents of 16 to 1,024 tokens), the
collator alone, the guarded collator (every=1), and a forward pass of a small Llama on CPU (2 layers, hidden
128) over the 8 rows. report.py prints (guarded − collator) / (collator + forward); goal ≤ 5%.

Needs transformers (the `adapters` extra)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from packoracle import guard  # noqa: E402

ROWS, ROW_LENGTH = 8, 8192


def _rows(seed: int = 0) -> list[list[dict]]:
    """Features per row: documents of log-uniform lengths 16..1024 filling 8,192 tokens exactly."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(ROWS):
        features, left = [], ROW_LENGTH
        while left:
            n = min(left, int(np.exp(rng.uniform(np.log(16), np.log(1024)))))
            features.append({"input_ids": rng.integers(1, 32000, n).tolist()})
            left -= n
        rows.append(features)
    return rows


ROWS_OF_FEATURES = _rows()


@pytest.fixture(scope="module")
def collator():
    return transformers.DataCollatorWithFlattening(return_flash_attn_kwargs=True)


def test_collator_alone(benchmark, collator):
    benchmark(lambda: [collator(f) for f in ROWS_OF_FEATURES])


def test_collator_guarded(benchmark, collator):
    guarded = guard.wrap_collator(collator, "hf-flatten")
    benchmark(lambda: [guarded(f) for f in ROWS_OF_FEATURES])
    assert guarded.guard.state.violations == 0 and guarded.guard.state.checked >= ROWS


def test_collator_guarded_python_reader(benchmark, collator, monkeypatch):
    """The guarded collator with the core's batch reader turned off (every batch through canonical_microbatch):
    what _core.batch_view saves, in the same run."""
    from packoracle import _core

    monkeypatch.setattr(_core, "batch_view", lambda *args: None)
    monkeypatch.setattr(_core, "check_plain_batch", lambda *args: None, raising=False)  # reads as batch_view
    guarded = guard.wrap_collator(collator, "hf-flatten")
    benchmark(lambda: [guarded(f) for f in ROWS_OF_FEATURES])
    assert guarded.guard.state.violations == 0 and guarded.guard.state.checked >= ROWS


def test_forward_small_llama(benchmark, collator):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=32000, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=4, attn_implementation="sdpa")
    model = transformers.LlamaForCausalLM(config).eval()
    batches = [collator(f) for f in ROWS_OF_FEATURES]

    def forward():
        with torch.no_grad():
            for b in batches:
                model(input_ids=b["input_ids"], position_ids=b["position_ids"], labels=b["labels"])

    benchmark.pedantic(forward, rounds=3, iterations=1)

"""The model side of the guard on any packer's rows and on the feeds a real collator hands a model
(packoracle.adapters.transformers_models, guard.check_model), against the installed transformers and torch.

- ModelConsumer feeds the model from whatever encodings the rows carry (the README's packer, the correct packers
  of python/tests/packers.py, the bundled correct candidates of python/candidates, the kit's reference packer,
  and every adapter's real library), and a feed that needs an encoding the rows lack is "not checked", named,
  never a failure of the model.
- guard.check_model reads what the attention path really uses, and its verdict is the forward level's on the
  probe feeds: the flash path fed cu_seq_lens, no position_ids with cu_seq_lens or seq_idx, an all-ones 2-D
  mask, a row that starts in the middle of a document.
"""

from __future__ import annotations

import importlib
import importlib.util
import pathlib
import sys
import warnings

import numpy as np
import pytest
import torch

import packoracle
from packoracle import adapters, guard
from packoracle._fuzz import SMALL_CASES
from packoracle.adapters import transformers_models as tm


def _load_packers():
    path = pathlib.Path(__file__).resolve().parents[1] / "tests" / "packers.py"
    spec = importlib.util.spec_from_file_location("packoracle_test_packers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


packers = _load_packers()


# ---- the README's first example, as written there ------------------------------------------------------------

def flatten(docs):  # one row, as HF's DataCollatorWithFlattening writes it
    ids, labels, positions, cu = [], [], [], [0]
    for tokens, supervised in docs:
        ids += tokens
        labels += [t if i > 0 and s else -100 for i, (t, s) in enumerate(zip(tokens, supervised))]
        positions += range(len(tokens))
        cu.append(len(ids))
    as_long = lambda values: torch.tensor([values], dtype=torch.long)  # noqa: E731
    return {"input_ids": as_long(ids), "labels": as_long(labels), "position_ids": as_long(positions),
            "cu_seq_lens_q": torch.tensor(cu, dtype=torch.int32)}


def pack(docs, budget):
    rows, row, used = [], [], 0
    for tokens, supervised in docs:
        if len(tokens) > budget:
            raise packoracle.Refuse(f"a document of {len(tokens)} tokens does not fit {budget}")
        if used + len(tokens) > budget:
            rows, row, used = rows + [flatten(row)], [], 0
        row, used = row + [(tokens, supervised)], used + len(tokens)
    return rows + [flatten(row)] if row else rows


def readme_packer(request):
    return pack([(d["tokens"], d["supervised"]) for d in request["documents"]], request["row_length"])


def readme_packer_without_positions(request):
    batches = readme_packer(request)
    for b in batches:
        del b["position_ids"]
    return batches


def _bundled(module_name):
    """A bundled exec candidate of python/candidates (its rows, micro-batches as its exec answer groups them),
    driven in-process: its refusal is the kit's."""
    folder = str(pathlib.Path(__file__).resolve().parents[1] / "candidates")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    candidate, common = importlib.import_module(module_name), importlib.import_module("common")

    def pack(request):
        records = common.answer(request, candidate.pack)
        if records[0]["record"] == "error":
            raise packoracle.Refuse(records[0]["message"])
        return [r for r in records if r["record"] == "microbatch"]
    return pack


CANDIDATES = {
    "readme": (readme_packer, "hf-flatten"),
    "candidates/reference.py": (_bundled("reference"), "reference"),
    "candidates/hf_flatten.py": (_bundled("hf_flatten"), "hf-flatten"),
    "candidates/torchtune_packed.py": (_bundled("torchtune_packed"), "torchtune-packed"),
    "pack_reference": (packers.as_packer(packers.pack_reference), "reference"),
    "pack_hf_flatten": (packers.as_budget_packer(packers.pack_hf_flatten), "hf-flatten"),
    "kit reference packer": (None, "reference"),
}
# What a Llama under eager, called as the Trainer calls it (use_cache=False), does with each feed: a 2-D mask
# turns its packed-sequence detection off (F2 of the consumer column); every other feed keeps documents apart.
EXPECTED = {"position_ids": "holds", "cu_seq_lens": "holds", "seq_idx": "holds", "cu_seq_lens_alone": "holds",
            "ones_mask": "attention", "padding_mask": "attention"}


def _verdict(packer, policy, consumer, cases=30):
    try:
        packoracle.fuzz(packer, policy, microbatch_consumer=consumer, cases=cases, seed=5, **SMALL_CASES)
        return "holds"
    except packoracle.Counterexample as e:
        assert "raised an exception" not in str(e), str(e)  # a consumer fault is never a verdict
        return e.invariant


@pytest.mark.parametrize("feed", tm.FEEDS)
@pytest.mark.parametrize("candidate", list(CANDIDATES))
def test_any_packers_rows_feed_the_model(candidate, feed):
    packer, policy = CANDIDATES[candidate]
    consume = tm.ModelConsumer("llama", "eager", feed, False, "forward").consumer()
    assert _verdict(packer, policy, consume) == EXPECTED[feed]
    assert consume.checked > 0 and consume.not_checked == {}


# Every adapter's packer: the library's own rows, fed to the model as they come (position_ids, the feed every
# packer's rows give; a row without them is read from its other encodings or named not checked).
ADAPTER_PACKERS = [a.name for a in adapters.all_adapters() if a.make_packer is not None]


@pytest.mark.parametrize("name", ADAPTER_PACKERS)
def test_every_adapters_rows_feed_the_model(name):
    a = adapters.get(name)
    if a.unavailable():
        pytest.skip(a.unavailable())
    consume = tm.ModelConsumer("llama", "eager", "position_ids", False, "forward").consumer()
    bounds = dict(max_row_length=a.max_row_length, max_documents=a.max_documents)
    try:
        packoracle.fuzz(a.packer(), a.resolved_policy(), microbatch_consumer=consume, cases=10, seed=5,
                        sft_masks=a.sft_masks, **bounds)
    except packoracle.Counterexample as e:  # the library's own findings may show (olmo-core's packer raises at
        # L not a power of two); the model consumer's fault never
        assert "attention consumer" not in str(e), str(e)
    assert consume.checked + sum(consume.not_checked.values()) > 0, (consume.checked, consume.not_checked)


def test_a_feed_that_needs_position_ids_the_rows_lack_is_not_checked_and_named():
    policy = {"preset": "hf-flatten", "positions": "row_continuous"}  # a packer that sends no position_ids
    consume = tm.ModelConsumer("llama", "eager", "position_ids", False, "forward").consumer()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = packoracle.fuzz(readme_packer_without_positions, policy, microbatch_consumer=consume, cases=30,
                                 seed=5, **SMALL_CASES)
    assert result.cases == 30 and consume.checked == 0
    assert list(consume.not_checked) == ["the position_ids feed passes position_ids, and the rows carry none"]
    assert any(issubclass(w.category, tm.NotCheckedWarning) and "not checked" in str(w.message) for w in caught)


def test_rows_without_position_ids_are_run_as_the_model_runs_them():
    # Fed without position_ids (return_position_ids=False), the model counts along the row: documents mix.
    policy = {"preset": "hf-flatten", "positions": "row_continuous"}
    consume = tm.ModelConsumer("llama", "eager", "cu_seq_lens", False, "forward", position_ids=False).consumer()
    assert _verdict(readme_packer_without_positions, policy, consume) == "attention"
    assert consume.checked > 0 and consume.not_checked == {}


SPANS = [{"doc_uid": "a", "start": 0, "length": 3, "doc_offset": 0},
         {"doc_uid": "b", "start": 3, "length": 5, "doc_offset": 0}]


def _row(**fields):
    row = {"input_ids": np.arange(10, 18), "labels": np.arange(10, 18), "doc_spans": SPANS}
    row.update({k: np.asarray(v) for k, v in fields.items()})
    return row


@pytest.mark.parametrize("fields,source", [
    ({"cu_seqlens": [0, 3, 8]}, "cu_seqlens"),
    ({"seq_lens": [3, 5]}, "seq_lens"),
    ({"doc_ids": [0, 0, 0, 1, 1, 1, 1, 1]}, "doc_ids"),
    ({"position_ids": [0, 1, 2, 0, 1, 2, 3, 4]}, "position_reset"),
])
def test_boundaries_are_read_from_whichever_encoding_the_row_carries(fields, source):
    assert tm.boundary_starts(_row(**fields)) == ([0, 3], source)
    batch = {"rows": [_row(**fields)]}
    if "position_ids" not in fields:
        batch["rows"][0]["position_ids"] = np.array([0, 1, 2, 0, 1, 2, 3, 4])
    fed = tm.build_feed(batch, "cu_seq_lens")
    assert fed["cu_seq_lens_q"].tolist() == [0, 3, 8] and fed["max_length_q"] == 5
    assert tm.build_feed(batch, "seq_idx")["seq_idx"].tolist() == [[0, 0, 0, 1, 1, 1, 1, 1]]


def test_a_row_without_any_boundary_encoding_cannot_feed_cu_seq_lens():
    assert tm.boundary_starts(_row()) is None
    with pytest.raises(tm.FeedNotBuilt, match="document boundaries"):
        tm.build_feed({"rows": [_row()]}, tm.Feed("cu_seq_lens", position_ids=False))


# ---- check_model: the mask level against the forward level on the probe feeds ---------------------------------

def _collated(**kwargs):
    from transformers import DataCollatorWithFlattening

    features = [{"input_ids": [5, 6, 7, 8, 9]}, {"input_ids": [10, 11, 12]}]
    return DataCollatorWithFlattening(**kwargs)(features, return_tensors="pt")


PROBES = {
    "cu_seq_lens": lambda: _collated(return_flash_attn_kwargs=True),
    "cu_seq_lens without position_ids": lambda: _collated(return_flash_attn_kwargs=True, return_position_ids=False),
    "seq_idx without position_ids": lambda: _collated(return_seq_idx=True, return_position_ids=False),
    "all-ones attention_mask": lambda: dict(_collated(), attention_mask=torch.ones(1, 8, dtype=torch.long)),
    "a row starting mid-document": lambda: dict(_collated(), position_ids=torch.tensor([[3, 4, 5, 6, 7, 0, 1, 2]])),
}
# The forward level's verdicts (what the outputs really read), one row per batch as the collator hands it.
FORWARD = {
    "sdpa": {"cu_seq_lens": "holds", "cu_seq_lens without position_ids": "violation",
             "seq_idx without position_ids": "violation", "all-ones attention_mask": "violation",
             "a row starting mid-document": "holds"},
    # the flash path: the varlen kernel gets cu_seq_lens with or without position_ids; seq_idx is read by no
    # attention; an all-ones mask is dropped (None) and one row's positions give the boundaries; a row whose
    # first piece continues a document loses that piece (the boundaries start at the first position 0).
    "flash_double": {"cu_seq_lens": "holds", "cu_seq_lens without position_ids": "holds",
                     "seq_idx without position_ids": "violation", "all-ones attention_mask": "holds",
                     "a row starting mid-document": "violation"},
}


def _check(model, batch, level):
    try:
        guard.check_model(model, batch, use_cache=False, cases=40, seed=3, level=level)
        return "holds"
    except guard.GuardViolation as e:
        assert "attention" in str(e)
        return "violation"


@pytest.mark.parametrize("probe", list(PROBES))
@pytest.mark.parametrize("attention", ["sdpa", "flash_double"])
def test_check_model_gives_the_forward_levels_verdict_on_each_probe_feed(attention, probe):
    model = tm.tiny_model("llama", attention)
    batch = PROBES[probe]()
    forward = _check(model, batch, "forward")
    assert forward == FORWARD[attention][probe]
    assert _check(model, batch, "auto") == forward


def test_the_flash_path_is_read_from_the_sequences_handed_to_the_kernel():
    model = tm.tiny_model("llama", "flash_double")
    assert tm.flash_path(model) and not tm.flash_path(tm.tiny_model("llama", "sdpa"))
    ids = torch.tensor([[5, 6, 7, 8, 9, 10, 11, 12]])
    two_documents = np.zeros((8, 8), dtype=int)
    two_documents[:3, :3], two_documents[3:, 3:] = np.tril(np.ones((3, 3))), np.tril(np.ones((5, 5)))
    cu = torch.tensor([0, 3, 8], dtype=torch.int32)
    fed = {"input_ids": ids, "position_ids": torch.tensor([[0, 1, 2, 0, 1, 2, 3, 4]]), "cu_seq_lens_q": cu,
           "cu_seq_lens_k": cu, "max_length_q": 5, "max_length_k": 5}
    (mask,) = tm.caught_masks(model, fed, False)
    assert mask.astype(int).tolist() == two_documents.tolist()
    # positions alone, one row starting mid-document: the kernel's first sequence starts at the first 0
    (mask,) = tm.caught_masks(model, {"input_ids": ids, "position_ids": torch.tensor([[3, 4, 5, 0, 1, 2, 3, 4]])},
                              False)
    assert not mask[:3].any()
    assert mask[3:, 3:].astype(int).tolist() == two_documents[3:, 3:].tolist()


def test_a_model_with_linear_attention_is_read_at_the_forward_level():
    model = tm.tiny_model("qwen3_5", "sdpa")
    assert "linear_attention" in tm.mask_level_unreadable(model)
    with pytest.raises(guard.GuardViolation, match="forward level"):
        guard.check_model(model, _collated(), use_cache=False, cases=40, seed=3)


@pytest.mark.parametrize("preset", ["reference", "hf-padded", "megatron-gpt", "torchtune-packed"])
def test_the_answer_for_a_micro_batch_not_fed_is_the_kits_rule(preset):
    # rule_masks answers the micro-batches a consumer cannot feed: the core must read it as the rule itself
    # (row_causal, pad_keys visible and own_segment among these presets), so a case not checked never fails.
    result = packoracle.fuzz(None, preset, microbatch_consumer=tm.rule_masks, cases=100, seed=1, **SMALL_CASES)
    assert "attention" in result.checked

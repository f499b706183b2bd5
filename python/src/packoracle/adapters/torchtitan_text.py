"""pytorch/torchtitan: HuggingFaceTextDataset, the greedy packing of the pretraining data loader (documents
tokenized with BOS and EOS, concatenated, cut every seq_len), with the per-document shift of PR #4075 (in
0.3.0: each document contributes ``tokens[:-1]`` as inputs and ``tokens[1:]`` as labels, positions
``range(len - 1)`` per document, normalised so that a row starts at 0; attention masks come from the
positions).

The library is fed the way a user feeds it: the request's documents become an in-memory ``datasets.Dataset``
registered in ``text_datasets.DATASETS`` (the extension point torchtitan documents for custom datasets), each
document the text "<id> <id> ..." of its token ids; the tokenizer is torchtitan's ``HuggingFaceTokenizer``
over a ``tokenizers`` WordLevel model written to a temporary directory, "<id>" ↔ id, with the policy's
bos/eos as its ``bos_token``/``eos_token`` (tokenizer_config.json), so the kit's token ids come back unchanged
and the tokenizer adds the delimiters as it does for Llama-3. The packing loop (``__iter__``) is the
library's, run to exhaustion (``infinite=False``): the tail shorter than seq_len is dropped, as in training.

The adapter's part: one dataset over all documents (torchtitan shards the documents across data-parallel
ranks itself, ``split_dataset_by_node``, before packing: not modelled, rows are dealt by ``assign``); the
yielded ``({"input", "positions"}, labels)`` under the kit's names (input_ids, position_ids, labels, values
unchanged); a refusal when the stream yields no sample at all (the loader ends with "has run out of data").
HuggingFaceTextDataset has no supervision mask: every token is trained.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from typing import Any, Optional

from .._fuzz import Refuse
from ._base import Adapter, Packer, assign

WRITTEN_FOR = "0.3.0"
BOS_ID, EOS_ID = 1, 2
VOCAB = 4096  # the kit's token ids are below 24, or 1000 + that where it moves reserved ids out of the way

_TEXTS: dict[str, list[str]] = {}  # dataset_path → the texts of the request being packed
_TOKENIZERS: dict[tuple, object] = {}


def _word(token_id: int) -> str:
    return f"<{token_id}>"


def _tokenizer(bos_id: Optional[int], eos_id: Optional[int]) -> Any:
    """torchtitan's HuggingFaceTokenizer over a WordLevel vocabulary "<0>".."<4095>" (whitespace-split), its
    BOS/EOS declared in tokenizer_config.json as a Hugging Face model directory declares them. The brackets
    matter: special tokens are matched inside words, and "t1" would be found inside "t10"."""
    key = (bos_id, eos_id)
    if key not in _TOKENIZERS:
        from tokenizers import Tokenizer
        from tokenizers.models import WordLevel
        from tokenizers.pre_tokenizers import WhitespaceSplit
        from torchtitan.components.tokenizer import HuggingFaceTokenizer

        path = tempfile.mkdtemp(prefix="packoracle-titan-tok-")
        atexit.register(shutil.rmtree, path, ignore_errors=True)
        model = Tokenizer(WordLevel({_word(i): i for i in range(VOCAB)}, unk_token=_word(0)))
        model.pre_tokenizer = WhitespaceSplit()
        model.save(os.path.join(path, "tokenizer.json"))
        config = {}
        if bos_id is not None:
            config["bos_token"] = _word(bos_id)
        if eos_id is not None:
            config["eos_token"] = _word(eos_id)
        with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
            json.dump(config, f)
        _TOKENIZERS[key] = HuggingFaceTokenizer(tokenizer_path=path)
    return _TOKENIZERS[key]


def _load(path: str) -> Any:
    from datasets import Dataset

    return Dataset.from_dict({"text": _TEXTS[path]})


def _register() -> str:
    """The in-memory dataset, registered as torchtitan's docs/datasets.md says a custom dataset is."""
    from torchtitan.hf_datasets import DatasetConfig
    from torchtitan.hf_datasets import text_datasets

    text_datasets.DATASETS.setdefault(
        "packoracle", DatasetConfig(path="packoracle", loader=_load, sample_processor=lambda s: s["text"]))
    return "packoracle"


def text_packer() -> Packer:
    import datasets
    from torchtitan.hf_datasets.text_datasets import HuggingFaceTextDataset
    from torchtitan.tools.logging import logger

    datasets.disable_progress_bars()
    logger.setLevel("ERROR")  # "Dataset ... has run out of data" once per request, by design here
    name = _register()

    def pack(request: dict) -> list[dict]:
        policy = request["policy"]
        tokenizer = _tokenizer(policy["bos_id"], policy["eos_id"])
        key = f"request-{request.get('id', 0)}"
        _TEXTS[key] = [" ".join(_word(t) for t in d["tokens"]) for d in request["documents"]]
        try:
            dataset = HuggingFaceTextDataset(name, key, tokenizer, seq_len=request["row_length"], dp_rank=0,
                                             dp_world_size=1, infinite=False)
            samples = list(dataset)
        finally:
            del _TEXTS[key]
        if not samples:
            if request["documents"]:  # with BOS and EOS, any document has tokens
                raise Refuse(f"HuggingFaceTextDataset(seq_len={request['row_length']}) yields no sample: the "
                             f"documents make fewer than seq_len input tokens")
            return []
        rows = [{"input_ids": inputs["input"], "labels": labels, "position_ids": inputs["positions"]}
                for inputs, labels in samples]
        return assign(rows, request)

    return pack


# What the per-document shift of PR #4075 means to implement (shift: document: each document's tokens[:-1] are
# its inputs, tokens[1:] its labels, the EOS a label only): document isolation by positions, no target across
# a document boundary, each row's last slot predicting the next token of its document, the stream of inputs cut
# into full rows (the remainder dropped), a document continued in the next row restarting at position 0.
POLICY = {"preset": "reference", "label_alignment": "pre_shifted", "boundary_source": "position_reset",
          "attention": "doc_causal", "positions": "doc_reset", "split_positions": "restart",
          "pad_positions": "any", "boundary_target": "excluded", "row_end_target": "next_in_doc",
          "stream_stride": "L", "padding": "none", "overflow": "split", "eos_id": EOS_ID, "bos_id": BOS_ID,
          "denominator": "global_targets", "shift": "document"}

ADAPTERS = (
    Adapter(name="torchtitan/hf-text", system="torchtitan", distribution="torchtitan", written_for=WRITTEN_FOR,
            configuration="HuggingFaceTextDataset(dataset_name, dataset_path, HuggingFaceTokenizer(tokenizer_path=p), "
                          "seq_len=L, infinite=False)",
            policy=POLICY, imports=("torchtitan.hf_datasets.text_datasets", "tokenizers", "datasets"),
            make_packer=text_packer, sft_masks=False,  # no per-token supervision in a pretraining dataset
            notes="inputs/labels/positions under the kit's names; the tokenizer adds BOS and EOS; no supervision "
                  "mask (a pretraining dataset); the tail shorter than seq_len is dropped. Declared with shift: "
                  "document (each document's EOS a label only, never an input, n - 1 slots for n tokens)"),
)

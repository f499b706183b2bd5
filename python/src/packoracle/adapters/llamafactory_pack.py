"""hiyouga/LLaMA-Factory 0.9.5 (``llamafactory``): its neat packing, the SFT data path of ``llamafactory-cli
train`` with ``packing``/``neat_packing`` on and flash-attention 2. ``PackedSupervisedDatasetProcessor``
(``data/processor/supervised.py``) drops every example longer than ``cutoff_len``, groups the rest with
``greedy_knapsack(lengths, cutoff_len)`` (``processor_utils.py``: largest first, each knapsack filled with the
largest length that still fits) and lays each knapsack out as one row: the examples' ``input_ids`` and
``labels`` as encoded, ``position_ids`` = ``range(len)`` per example, ``attention_mask`` = the example's index
1..k, then right padding to ``cutoff_len + 1`` (pad id, label -100, position 0, mask 0). ``DataArguments``'
``__post_init__`` decrements ``cutoff_len`` when packing (``hparams/data_args.py:188``), so a user's
``cutoff_len`` C gives rows of C slots holding at most C - 1 tokens. ``SFTDataCollatorWith4DAttentionMask``
(``data/collator.py``), as ``train/sft/workflow.py`` builds it (``pad_to_multiple_of=8``, ``block_diag_attn`` =
``neat_packing``, the model's attention implementation), with ``flash_attention_2`` asserts a batch of one
row, drops every slot whose mask is 0 (``_unpad_packed_features``) and sets ``attention_mask=None``: the
model's flash path finds the documents from ``position_ids`` (each starts at 0).

The family environment ``llamafactory`` (requirements/llamafactory.lock; LLaMA-Factory pins transformers
<= 5.6.0). Its ``data`` package imports ``torchaudio`` at module level, whose PyPI wheel needs CUDA's
libraries; a module stub stands in for it (``_llamafactory_torchaudio``): nothing the packing path calls uses
it (only the multimodal plugins do).

The adapter's part: the tokenizer/template step (``_encode_data_example``) is replaced
by one that returns each document's tokens and its labels (the token where supervised, -100 elsewhere), since
the kit's documents are already token ids; everything after it is the library's. The kit's row length L is the
most tokens a row holds: the processor gets ``cutoff_len = L + 1`` (decremented to L), so an example of more than
L tokens is dropped with a warning and one of exactly L is kept: the policy's ``overflow: drop``. Each row goes to its own collator call
(neat packing with flash-attention 2 trains one row per device batch; the collator asserts it); ``assign``
deals the rows into micro-batches. The tokenizer the collator pads with is a ``PreTrainedTokenizerFast`` over
an in-memory word-level vocabulary whose pad id is the policy's, with the ``empty`` template.
"""

from __future__ import annotations

import types
from typing import Any

from ._base import Adapter, Finding, Packer, assign, documents_of

WRITTEN_FOR = "0.9.5"


def _tokenizer(pad_id: int) -> Any:
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": pad_id, "<unk>": pad_id + 1}
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="<unk>")),
                                  pad_token="<pad>", unk_token="<unk>")
    tok.padding_side = "right"
    return tok


def _examples(n: int) -> dict:
    """n examples in the processor's input columns (their contents are never read: the encoder is replaced)."""
    return {"_prompt": [[{"role": "user", "content": "p"}]] * n,
            "_response": [[{"role": "assistant", "content": "r"}]] * n,
            "_system": [""] * n, "_tools": [""] * n, "_images": [None] * n, "_videos": [None] * n,
            "_audios": [None] * n}


def neat_packer() -> Packer:
    from . import _llamafactory_torchaudio  # noqa: F401  (before llamafactory.data)
    import torch
    from llamafactory.data.collator import SFTDataCollatorWith4DAttentionMask
    from llamafactory.data.processor.supervised import PackedSupervisedDatasetProcessor
    from llamafactory.data.template import get_template_and_fix_tokenizer
    from llamafactory.hparams import DataArguments

    class DocumentsProcessor(PackedSupervisedDatasetProcessor):
        """The library's processor with its tokenizer/template step replaced by the kit's documents."""

        def __init__(self, data_args: Any, encoded: list, pad_id: int) -> None:  # the dataclass's fields
            self.template = self.processor = None
            self.data_args = data_args
            self.tokenizer = types.SimpleNamespace(pad_token_id=pad_id)
            self._encoded = iter(encoded)

        def _encode_data_example(self, **_: Any) -> tuple[list, list]:
            return next(self._encoded)

    def pack(request: dict) -> list[dict]:
        policy = request["policy"]
        ignore = policy["ignore_index"]
        docs = documents_of(request)
        if not docs:
            return []
        encoded = [(d["tokens"], [t if s else ignore for t, s in zip(d["tokens"], d["supervised"])]) for d in docs]
        data_args = DataArguments(cutoff_len=request["row_length"] + 1, packing=True, neat_packing=True)
        packed = DocumentsProcessor(data_args, encoded, policy["pad_id"]).preprocess_dataset(_examples(len(docs)))
        tok = _tokenizer(policy["pad_id"])
        template = get_template_and_fix_tokenizer(tok, DataArguments(template="empty"))
        collator = SFTDataCollatorWith4DAttentionMask(
            template=template, tokenizer=tok, pad_to_multiple_of=8, label_pad_token_id=ignore, block_diag_attn=True,
            neat_packing=True, attn_implementation="flash_attention_2", compute_dtype=torch.float32)
        rows = []
        for r in range(len(packed["input_ids"])):
            feature = {k: packed[k][r] for k in ("input_ids", "attention_mask", "position_ids", "labels", "images",
                                                 "videos", "audios")}
            batch = collator([feature])
            rows.append({k: batch[k][0] for k in ("input_ids", "labels", "position_ids")})
        return assign(rows, request)

    return pack


# Labels as encoded (the model shifts), documents found where position_ids reset, no padding left after the
# collator's unpadding. The labels are left as encoded: a supervised first token of a document is the target
# of the previous document's last slot (in LLaMA-Factory's templates the first token is a prompt's, masked).
# An example longer than the row is dropped with a warning (the processor's cutoff_len filter).
POLICY = {"preset": "hf-flatten", "boundary_source": "position_reset", "boundary_target": "included",
          "overflow": "drop"}

_UNPAD = Finding(
    "shape", "bug",
    "With neat packing and flash-attention 2 the collator drops the padded slots (_unpad_packed_features, "
    "collator.py) from input_ids, labels and attention_mask, but cuts position_ids only when their length equals "
    "the padded one: pad_to_multiple_of=8 (train/sft/workflow.py) pads the tokenizer's fields to a multiple of 8 "
    "and leaves position_ids at the row's length, so for a cutoff_len that is not a multiple of 8 the model gets "
    "more position ids than tokens (d0=[11], cutoff_len 2: input_ids [[11]], position_ids [[0, 0]]).",
    report="docs/upstream/llamafactory-unpad-position-ids.md")

ADAPTERS = (
    Adapter(name="llamafactory/neat-packing-fa2", system="llamafactory", distribution="llamafactory",
            written_for=WRITTEN_FOR,
            configuration="PackedSupervisedDatasetProcessor(DataArguments(cutoff_len=L+1, neat_packing=True))"
                          ".preprocess_dataset(examples); SFTDataCollatorWith4DAttentionMask(pad_to_multiple_of=8, "
                          "block_diag_attn=True, neat_packing=True, attn_implementation='flash_attention_2') per row",
            policy=POLICY, imports=("packoracle.adapters._llamafactory_torchaudio",
                                    "llamafactory.data.processor.supervised", "llamafactory.data.collator"),
            make_packer=neat_packer, family="llamafactory", findings={"pack": _UNPAD},
            notes="the tokenizer/template step replaced by the kit's documents (labels: the token where supervised);"
                  " cutoff_len = L + 1 (a packed row keeps one pad slot; an example of more than L tokens is "
                  "dropped, overflow: drop); the collator's flash-attention path drops the padding"),
)


def block_diagonal_mask(microbatch: dict, policy: dict) -> list:
    """LLaMA-Factory's 4-D mask as an attention consumer (the mask level): each row's document ids re-spelled as
    the neat-packing attention mask (1..k in the row, 0 for padding) and handed to ``prepare_4d_attention_mask``
    (data/collator.py), as ``SFTDataCollatorWith4DAttentionMask(block_diag_attn=True)`` does with eager/sdpa
    attention; what it returns (0 where attending, the dtype's minimum elsewhere) read as True = allowed. Runs
    where llamafactory is installed: its family environment (python/tests_adapters/test_families.py)."""
    from . import _llamafactory_torchaudio  # noqa: F401  (before llamafactory.data)
    import numpy as np
    import torch
    from llamafactory.data.collator import prepare_4d_attention_mask

    out = []
    for row in microbatch["rows"]:
        ids = np.asarray(row["doc_ids"], dtype=np.int64).reshape(-1)
        _, index = np.unique(ids, return_inverse=True)  # the kit's ids (any integers, -1 padding) as 1..k, 0
        index = np.where(ids < 0, 0, index + (0 if (ids < 0).any() else 1))
        mask = prepare_4d_attention_mask(torch.as_tensor(index)[None], torch.float32)
        out.append((mask[0, 0] == 0).numpy())
    return out

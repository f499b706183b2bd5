"""LLaMA-Factory 0.9.5: with neat packing and flash-attention 2, SFTDataCollatorWith4DAttentionMask drops the
padded slots of the packed row (``_unpad_packed_features``, data/collator.py) from input_ids, labels and the
attention mask, but not from position_ids when the row's length is not a multiple of 8: the workflow's
``pad_to_multiple_of=8`` pads the tokenizer's fields to the next multiple of 8, position_ids keep the row's length,
and the unpadding only cuts position_ids whose length equals the padded one. The model then gets more position
ids than tokens. Report: llamafactory-unpad-position-ids.md

    python llamafactory-unpad-position-ids.py             # exit 1 on 0.9.5: position_ids longer than input_ids
    python llamafactory-unpad-position-ids.py --with-fix  # exit 0: position_ids cut at the same slots
Needs LLaMA-Factory 0.9.5 in an environment of its own (it pins transformers<=5.6.0; requirements/llamafactory.lock).
Where llamafactory does not import, it exits 77.
"""
import importlib.machinery
import sys
import types

import torch

# llamafactory.data imports torchaudio at module level; its PyPI wheel needs CUDA (the family venv leaves it out).
if "torchaudio" not in sys.modules:
    _stub = types.ModuleType("torchaudio")
    _stub.__spec__ = importlib.machinery.ModuleSpec("torchaudio", None)
    sys.modules["torchaudio"] = _stub
try:
    from importlib.metadata import version

    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    from llamafactory.data.collator import SFTDataCollatorWith4DAttentionMask
    from llamafactory.data.template import get_template_and_fix_tokenizer
    from llamafactory.hparams import DataArguments
except ImportError as e:
    print(f"SKIP (77): needs llamafactory 0.9.5 in its own environment ({e})")
    sys.exit(77)

if "--with-fix" in sys.argv:  # the fix: cut position_ids at the kept slots whatever their padded length
    original = SFTDataCollatorWith4DAttentionMask._unpad_packed_features

    def _unpad_packed_features(features):
        mask = features.get("attention_mask")
        positions = features.get("position_ids")
        if torch.is_tensor(mask) and torch.is_tensor(positions) and mask.dim() == 2 and mask.size(0) == 1:
            keep = torch.nonzero(mask[0] != 0, as_tuple=False).flatten()
            features["position_ids"] = positions.index_select(-1, keep)
        original(features)

    SFTDataCollatorWith4DAttentionMask._unpad_packed_features = staticmethod(_unpad_packed_features)

# One packed row as PackedSupervisedDatasetProcessor lays it out for cutoff_len=10 (neat_packing): documents
# [11, 12, 13] and [21, 22], then padding to 10 slots (mask 0, position 0, label -100).
row = {"input_ids": [11, 12, 13, 21, 22, 0, 0, 0, 0, 0], "attention_mask": [1, 1, 1, 2, 2, 0, 0, 0, 0, 0],
       "position_ids": [0, 1, 2, 0, 1, 0, 0, 0, 0, 0], "labels": [-100, 12, 13, -100, 22, -100, -100, -100, -100, -100],
       "images": None, "videos": None, "audios": None}
vocab = {"<pad>": 0, "<unk>": 1}
tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="<unk>")),
                                    pad_token="<pad>", unk_token="<unk>")
template = get_template_and_fix_tokenizer(tokenizer, DataArguments(template="empty"))
# As train/sft/workflow.py builds it for training with neat_packing and flash-attention 2.
collator = SFTDataCollatorWith4DAttentionMask(template=template, tokenizer=tokenizer, pad_to_multiple_of=8,
                                              label_pad_token_id=-100, block_diag_attn=True, neat_packing=True,
                                              attn_implementation="flash_attention_2")
batch = collator([row])
ids, positions = batch["input_ids"], batch["position_ids"]
if positions.shape != ids.shape:
    print(f"FAIL llamafactory {version('llamafactory')}: input_ids {ids.tolist()} but position_ids {positions.tolist()}")
    sys.exit(1)
print(f"OK llamafactory {version('llamafactory')}: input_ids {ids.tolist()}, position_ids {positions.tolist()}")

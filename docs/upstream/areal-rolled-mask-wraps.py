"""AReaL 1.0.4: the SFT trainer rolls the loss mask of the padded batch by -1 (lm_engine.py:29), and the engine
rolls the packed input_ids by -1 for the labels (fsdp_engine.py:1992). The batch's longest sample has no padding,
so its last slot's rolled mask wraps around to its own first token's mask: when that token is trained (no
prompt), the prediction made at the sample's last token is trained against the next packed sample's first
token. Report: areal-rolled-mask-wraps.md

    python areal-rolled-mask-wraps.py             # exit 1 on 1.0.4: a cross-sample target is trained
    python areal-rolled-mask-wraps.py --with-fix  # exit 0: the rolled mask's last column zeroed
Needs AReaL 1.0.4 in an environment of its own (it pins torch<2.11): pip install --no-deps areal==1.0.4 and
the modules areal.utils.data imports (requirements/areal.lock). Where areal does not import, it exits 77.
"""
import os
import sys
import types

import torch

try:
    from importlib.metadata import version

    import areal
    from areal.utils.data import amend_position_ids, pack_tensor_dict, split_padded_tensor_dict_into_mb_list
    from areal.api.cli_args import MicroBatchSpec

    # areal.trainer's __init__ imports every trainer (and `datasets`): register the packages bare, load lm_engine.
    for sub in ("trainer", "trainer.sft"):
        module = types.ModuleType(f"areal.{sub}")
        module.__path__ = [os.path.join(os.path.dirname(areal.__file__), *sub.split("."))]
        sys.modules[f"areal.{sub}"] = module
    from areal.trainer.sft.lm_engine import LMEngine
except ImportError as e:
    print(f"SKIP (77): needs areal 1.0.4 in its own environment ({e})")
    sys.exit(77)


class CapturingEngine:
    """Stands for the FSDP engine: takes the batch LMEngine hands it and packs it as fsdp_engine.py does."""

    def train(self):
        pass

    def train_batch(self, input_, loss_fn, loss_weight_fn):
        if "--with-fix" in sys.argv:  # the fix: the wrapped-around slot of every row predicts nothing
            input_["loss_mask"][:, -1] = False
        input_ = amend_position_ids(input_)
        mbl = split_padded_tensor_dict_into_mb_list(input_, MicroBatchSpec(max_tokens_per_mb=16))
        self.packed = [pack_tensor_dict(dict(mb)) for mb in mbl.mbs]
        return {}


# Two SFT samples with every token trained (no prompt), right-padded to the longest as the data loader does.
input_ids = torch.tensor([[11, 12, 13], [21, 22, 0]])
attention_mask = torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=torch.bool)
loss_mask = attention_mask.clone()
engine = CapturingEngine()
LMEngine(engine)._train_lm({"input_ids": input_ids, "attention_mask": attention_mask, "loss_mask": loss_mask})
bad = []
for packed in engine.packed:
    labels = torch.roll(packed["input_ids"], shifts=-1, dims=-1)  # fsdp_engine.py:1992
    ends = set(packed["cu_seqlens"][1:].tolist())
    for slot in range(len(labels)):
        if packed["loss_mask"][slot] and slot + 1 in ends:  # the slot holds a sample's last token
            bad.append((slot, int(packed["input_ids"][slot]), int(labels[slot])))
if bad:
    print(f"FAIL areal {version('areal')}: trained predictions across samples (slot, input, target): {bad}")
    sys.exit(1)
print(f"OK areal {version('areal')}: no prediction is trained across samples")

"""torchtune 0.6.1: with packing, the recipe shifts labels over the whole packed row, so the last token of one
sample is trained to predict the first token of the next, unrelated sample. Report: torchtune-row-shift.md

    python torchtune-row-shift.py             # exit 1 on 0.6.1: the target after sample [3, 4] is 5
    python torchtune-row-shift.py --with-fix  # exit 0: labels shifted per sample in the dataset (as on main,
                                              # PR #2613) and the recipe's row shift removed
"""
import ast
import contextlib
import pathlib
import sys
import typing

import torch
import torchtune
from torchtune.data import padded_collate_packed
from torchtune.datasets import PackedDataset, TextCompletionDataset

FIX = "--with-fix" in sys.argv


class Tokenizer:  # a stand-in tokenizer: the text already is token ids
    max_seq_len = None

    def encode(self, text, add_bos=True, add_eos=True):
        return [int(t) for t in text.split()]


# The library's own text-completion dataset (0.6.1: "No need to offset labels by 1 - happens in the recipe").
source = TextCompletionDataset.__new__(TextCompletionDataset)
source._tokenizer, source._column, source.add_eos = Tokenizer(), "text", False
source._data = [{"text": "3 4"}, {"text": "5 6"}]
samples = [source[i] for i in range(2)]
if FIX:  # the fix: each sample's labels shifted inside the sample, its last one ignored
    samples = [dict(s, labels=s["labels"][1:] + [-100]) for s in samples]

packed = PackedDataset(samples, max_seq_len=4, padding_idx=0, split_across_pack=False)
batch = padded_collate_packed([packed[0]])  # one row: tokens [3, 4, 5, 6], two samples

if FIX:
    targets = batch["labels"][0].tolist()  # the recipe's shift removed: labels are targets
else:
    # The recipe's own _loss_step, read from the installed recipes/full_finetune_single_device.py. The recipe
    # module itself cannot be imported beside a newer torchao (torchtune.training imports int4_weight_only),
    # so the one method is compiled from the file, unchanged.
    path = pathlib.Path(torchtune.__file__).parent.parent / "recipes" / "full_finetune_single_device.py"
    tree = ast.parse(path.read_text())
    method = next(f for c in tree.body if isinstance(c, ast.ClassDef) and c.name == "FullFinetuneRecipeSingleDevice"
                  for f in c.body if isinstance(f, ast.FunctionDef) and f.name == "_loss_step")
    scope = {"torch": torch, "Dict": typing.Dict}
    exec(compile(ast.Module(body=[method], type_ignores=[]), str(path), "exec"), scope)
    seen = {}
    step = type("Step", (), {})()  # the recipe object, only what _loss_step reads
    step.activations_handling_ctx = contextlib.nullcontext()
    step._model = lambda **kw: torch.zeros(1, 4, 8)
    step.ignore_labels_cache = torch.full((1, 1), -100)
    step._loss_fn = lambda logits, labels: seen.setdefault("labels", labels)
    scope["_loss_step"](step, dict(batch))
    targets = seen["labels"].tolist()

print(f"tokens {batch['tokens'][0].tolist()}, samples of lengths {packed[0]['seq_lens'].tolist()}, "
      f"targets {targets}")
if targets[1] != -100:
    print(f"FAIL torchtune {torchtune.__version__}: the prediction made from token 4, the last of sample [3, 4], "
          f"is trained to produce {targets[1]}, the first token of the next sample (want -100)")
    sys.exit(1)
print(f"OK torchtune {torchtune.__version__}: no target crosses a sample boundary")

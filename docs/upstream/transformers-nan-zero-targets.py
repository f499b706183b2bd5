"""transformers 5.24.0: a step with no target (every label -100) and num_items_in_batch = 0, as the Trainer counts
it, gives loss = 0 / 0 = NaN (the step's logged loss, and anything that sums or checks it). Report: transformers-nan-zero-targets.md

    python transformers-nan-zero-targets.py             # exit 1 on 5.24.0: loss nan
    python transformers-nan-zero-targets.py --with-fix  # exit 0: fixed_cross_entropy with a guarded division
"""
import sys

import torch
import transformers
import transformers.loss.loss_utils as loss_utils
from transformers import DataCollatorWithFlattening, LlamaConfig, LlamaForCausalLM


def fixed_cross_entropy_guarded(source, target, num_items_in_batch=None, ignore_index=-100, **kwargs):
    """The proposed fix: fixed_cross_entropy whose division cannot be 0 / 0 (a step without targets gives 0)."""
    reduction = "sum" if num_items_in_batch is not None else "mean"
    loss = torch.nn.functional.cross_entropy(source, target, ignore_index=ignore_index, reduction=reduction)
    if reduction == "sum":
        num_items_in_batch = torch.as_tensor(num_items_in_batch, device=loss.device)
        loss = loss / num_items_in_batch.clamp(min=1)
    return loss


if "--with-fix" in sys.argv:
    loss_utils.fixed_cross_entropy = fixed_cross_entropy_guarded  # ForCausalLMLoss looks it up in the module

torch.manual_seed(0)
model = LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                     num_attention_heads=2, num_key_value_heads=2))
# Two one-token documents packed by the library's collator: each document's first label is -100, so none counts.
batch = DataCollatorWithFlattening(return_tensors="pt")([{"input_ids": [5]}, {"input_ids": [8]}])
num_items_in_batch = (batch["labels"] != -100).sum()  # what Trainer.get_batch_samples counts: 0
loss = model(**batch, use_cache=False, num_items_in_batch=num_items_in_batch).loss
loss.backward()
grad = max(p.grad.abs().max().item() for p in model.parameters() if p.grad is not None)
if not torch.isfinite(loss):
    print(f"FAIL transformers {transformers.__version__}: labels {batch['labels'].tolist()}, num_items_in_batch="
          f"{int(num_items_in_batch)}: loss {loss.item()} (want 0; max |grad| {grad})")
    sys.exit(1)
print(f"OK transformers {transformers.__version__}: loss {loss.item()}, max |grad| {grad}")

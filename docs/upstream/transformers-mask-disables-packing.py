"""transformers 5.24.0: a packed row with an all-ones 2-D attention_mask (as many collators add) attends across
its documents, even with use_cache=False: packed-sequence detection runs only when attention_mask is None.
Report: transformers-mask-disables-packing.md

    python transformers-mask-disables-packing.py             # exit 1 on 5.24.0: document B reads document A
    python transformers-mask-disables-packing.py --with-fix  # exit 0: the all-ones mask dropped before the call
"""
import sys

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

torch.manual_seed(0)
config = LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                     num_attention_heads=2, num_key_value_heads=2)
model = LlamaForCausalLM(config).eval()

# One packed row: A = [5, 6, 7], B = [8, 9, 10], positions restart at B, and the all-ones mask a collator adds.
batch = {"input_ids": torch.tensor([[5, 6, 7, 8, 9, 10]]), "position_ids": torch.tensor([[0, 1, 2, 0, 1, 2]]),
         "attention_mask": torch.ones(1, 6, dtype=torch.long), "use_cache": False}
if "--with-fix" in sys.argv and bool(batch["attention_mask"].all()):
    del batch["attention_mask"]  # the workaround: an all-ones mask says nothing, drop it (PR #46634 does the same)

with torch.no_grad():
    packed_b = model(**batch).logits[0, 3:]
    alone_b = model(input_ids=torch.tensor([[8, 9, 10]]), use_cache=False).logits[0]
diff = (packed_b - alone_b).abs().max().item()
if not diff <= 1e-4:  # NaN fails too
    print(f"FAIL transformers {transformers.__version__}: position_ids + all-ones attention_mask, use_cache=False: "
          f"document B's logits in the packed row differ from B alone by {diff:.3g} (B attends to A)")
    sys.exit(1)
print(f"OK transformers {transformers.__version__}: B packed == B alone (max |diff| {diff:.1g})")

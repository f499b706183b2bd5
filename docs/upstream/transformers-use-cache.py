"""transformers 5.24.0: a packed row fed as `model(**batch)` (position_ids only, use_cache left at its default)
attends across its documents. Report: transformers-use-cache.md

    python transformers-use-cache.py             # exit 1 on 5.24.0: document B's logits depend on document A
    python transformers-use-cache.py --with-fix  # exit 0: the same call with use_cache=False
"""
import sys

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

torch.manual_seed(0)
config = LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                     num_attention_heads=2, num_key_value_heads=2)
model = LlamaForCausalLM(config).eval()  # config.use_cache defaults to True

# One packed row, as DataCollatorWithFlattening returns it: A = [5, 6, 7], B = [8, 9, 10], positions restart at B.
batch = {"input_ids": torch.tensor([[5, 6, 7, 8, 9, 10]]), "position_ids": torch.tensor([[0, 1, 2, 0, 1, 2]])}
if "--with-fix" in sys.argv:
    batch["use_cache"] = False  # the workaround (what the HF Trainer passes)

with torch.no_grad():
    packed_b = model(**batch).logits[0, 3:]
    alone_b = model(input_ids=torch.tensor([[8, 9, 10]]), use_cache=False).logits[0]
diff = (packed_b - alone_b).abs().max().item()
if not diff <= 1e-4:  # NaN fails too
    print(f"FAIL transformers {transformers.__version__}: model(**batch) with use_cache={batch.get('use_cache', 'default')}"
          f": document B's logits in the packed row differ from B alone by {diff:.3g} (B attends to A)")
    sys.exit(1)
print(f"OK transformers {transformers.__version__}: B packed == B alone (max |diff| {diff:.1g})")

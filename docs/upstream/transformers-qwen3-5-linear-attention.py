"""transformers 5.24.0: Qwen3.5's linear-attention layers (Qwen3_5GatedDeltaNet) run their causal convolution and
gated-delta-rule recurrence across the documents of a packed row given position_ids, while the full-attention
layers are masked per document. Report: transformers-qwen3-5-linear-attention.md

    python transformers-qwen3-5-linear-attention.py             # exit 1 on 5.24.0: document B reads document A
    python transformers-qwen3-5-linear-attention.py --with-fix  # exit 0: the workaround, one document per row
"""
import sys

import torch
import transformers
from transformers import Qwen3_5ForCausalLM
from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig

torch.manual_seed(0)
config = Qwen3_5TextConfig(vocab_size=32, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=2, num_key_value_heads=2, head_dim=16,
                           layer_types=["linear_attention", "full_attention"], linear_num_key_heads=2,
                           linear_num_value_heads=2, linear_key_head_dim=8, linear_value_head_dim=8)
model = Qwen3_5ForCausalLM(config).eval()

a, b = [5, 6, 7], [8, 9, 10]
with torch.no_grad():
    alone_b = model(input_ids=torch.tensor([b]), use_cache=False).logits[0]
    if "--with-fix" in sys.argv:
        # The workaround on the torch path: no packing, each document a row of its own (right padding is zeroed
        # by apply_mask_to_padding_states and comes after the document, so it cannot reach it).
        out = model(input_ids=torch.tensor([a + [0], b + [0]]), attention_mask=torch.tensor([[1] * 3 + [0]] * 2),
                    use_cache=False).logits
        packed_b = out[1, :3]
    else:
        # One packed row, positions restarting at B, the way DataCollatorWithFlattening hands it to the model.
        packed_b = model(input_ids=torch.tensor([a + b]), position_ids=torch.tensor([[0, 1, 2, 0, 1, 2]]),
                         use_cache=False).logits[0, 3:]
diff = (packed_b - alone_b).abs().max().item()
if not diff <= 1e-4:  # NaN fails too
    print(f"FAIL transformers {transformers.__version__}: Qwen3.5 packed row [A | B] with position_ids, "
          f"use_cache=False: B's logits differ from B alone by {diff:.3g} (the linear-attention layer reads A)")
    sys.exit(1)
print(f"OK transformers {transformers.__version__}: B == B alone (max |diff| {diff:.1g})")

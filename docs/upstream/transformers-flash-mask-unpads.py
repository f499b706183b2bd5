"""transformers 5.24.0, flash-attention path: a packed row with a 0/1 padding attention_mask is unpadded by the
mask (_upad_input) and run as ONE sequence per row, so its documents attend to each other, even in a batch of one
row. Report: transformers-flash-mask-unpads.md

    python transformers-flash-mask-unpads.py             # exit 1 on 5.24.0: B's logits change with A
    python transformers-flash-mask-unpads.py --with-fix  # exit 0: the workaround, no padding mask on packed rows
Needs CUDA and flash-attn (attn_implementation="flash_attention_2"); elsewhere it exits 77 (skipped).
"""
import sys

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM


def check(model, device, with_fix):
    # One packed row [A | B | pad], positions restarting at B, and the padding mask a padded collator adds.
    def logits_of_b(a):
        batch = {"input_ids": torch.tensor([a + [8, 9, 10, 0]], device=device),
                 "position_ids": torch.tensor([[0, 1, 2, 0, 1, 2, 0]], device=device),
                 "attention_mask": torch.tensor([[1, 1, 1, 1, 1, 1, 0]], device=device), "use_cache": False}
        if with_fix:  # the workaround: padding-free, no 2-D mask; the pad slot is a sequence of its own (label -100)
            del batch["attention_mask"]
        with torch.no_grad():
            return model(**batch).logits[0, 3:6].float()
    diff = (logits_of_b([5, 6, 7]) - logits_of_b([20, 21, 22])).abs().max().item()
    if not diff <= 1e-3:  # NaN fails too
        print(f"FAIL transformers {transformers.__version__} flash_attention_2: one packed row with a padding "
              f"attention_mask: document B's logits change by {diff:.3g} when document A's tokens change")
        return 1
    print(f"OK transformers {transformers.__version__} flash_attention_2: B independent of A (max |diff| {diff:.1g})")
    return 0


if __name__ == "__main__":
    try:
        import flash_attn  # noqa: F401
        assert torch.cuda.is_available()
    except (ImportError, AssertionError):
        print("SKIP (77): needs CUDA and flash-attn (attn_implementation='flash_attention_2'); a device-lane item")
        sys.exit(77)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=32, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2)
    model = LlamaForCausalLM._from_config(config, attn_implementation="flash_attention_2", dtype=torch.bfloat16)
    sys.exit(check(model.cuda().eval(), "cuda", "--with-fix" in sys.argv))

"""transformers 5.24.0, flash-attention path: packed rows (position_ids restarting at each document) in a batch of
more than one row run flash_attn_func, plain causal over each row, across the documents: _is_packed_sequence
returns False whenever batch_size != 1. Report: transformers-flash-batch-of-one.md

    python transformers-flash-batch-of-one.py             # exit 1 on 5.24.0: B's logits change with A
    python transformers-flash-batch-of-one.py --with-fix  # exit 0: _is_packed_sequence without the batch rule
Needs CUDA and flash-attn (attn_implementation="flash_attention_2"); elsewhere it exits 77 (skipped).
"""
import sys

import torch
import transformers
import transformers.modeling_flash_attention_utils as fa
from transformers import LlamaConfig, LlamaForCausalLM


def is_packed_sequence_any_batch(position_ids, batch_size):
    """The proposed fix: _is_packed_sequence without `batch_size != 1` (prepare_fa_kwargs_from_position_ids
    already flattens the batch, so every row's documents become sequences of the varlen kernel)."""
    if position_ids is None or position_ids.shape[-1] == 1:
        return False
    increasing = torch.arange(position_ids.shape[1], device=position_ids.device) + position_ids.min()
    return (increasing - position_ids).abs().sum().bool()


def check(model, device, with_fix):
    if with_fix:
        fa._is_packed_sequence = is_packed_sequence_any_batch
    # Two packed rows, as a padding-free collator stacks them: [A | B] and [C | D], positions restarting.
    def logits_of_b(a):
        ids = torch.tensor([a + [8, 9, 10], [11, 12, 13, 14, 15, 16]], device=device)
        pos = torch.tensor([[0, 1, 2, 0, 1, 2]] * 2, device=device)
        with torch.no_grad():
            return model(input_ids=ids, position_ids=pos, use_cache=False).logits[0, 3:].float()
    diff = (logits_of_b([5, 6, 7]) - logits_of_b([20, 21, 22])).abs().max().item()
    if not diff <= 1e-3:  # NaN fails too
        print(f"FAIL transformers {transformers.__version__} flash_attention_2: batch of 2 packed rows, "
              f"position_ids only: document B's logits change by {diff:.3g} when document A's tokens change")
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

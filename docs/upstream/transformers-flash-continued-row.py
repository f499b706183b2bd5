"""transformers 5.24.0, flash-attention path: a packed row that starts in the middle of a document (its positions
going on from the row before, one row a batch) leaves its first slots out of every sequence handed to the varlen
kernel: prepare_fa_kwargs_from_position_ids starts cu_seq_lens at the first position 0, not at slot 0.
Report: transformers-flash-continued-row.md

    python transformers-flash-continued-row.py             # exit 1 on 5.24.0: slots 0-1 read nothing of theirs
    python transformers-flash-continued-row.py --with-fix  # exit 0: cu_seq_lens starting at slot 0
Needs CUDA and flash-attn (attn_implementation="flash_attention_2"); elsewhere it exits 77 (skipped).
"""
import sys

import torch
import transformers
import transformers.modeling_flash_attention_utils as fa
from transformers import LlamaConfig, LlamaForCausalLM

_original = fa.prepare_fa_kwargs_from_position_ids


def prepare_fa_kwargs_from_slot_0(position_ids):
    """The proposed fix: the first sequence starts at slot 0 even when the row starts mid-document."""
    (cu, _), _ = _original(position_ids)
    if cu[0] != 0:
        cu = torch.cat([cu.new_zeros(1), cu])
    max_length = cu.diff().max()
    return (cu, cu), (max_length, max_length)


def check(model, device, with_fix):
    if with_fix:
        fa.prepare_fa_kwargs_from_position_ids = prepare_fa_kwargs_from_slot_0  # _prepare_from_posids calls it
    # Document A = [5, 6, 7, 8, 9] split across two rows: this row holds its tail [8, 9] (positions 3, 4), then
    # document B = [10, 11, 12]; fed one row a batch, as DataCollatorWithFlattening hands rows to the model.
    row = {"input_ids": torch.tensor([[8, 9, 10, 11, 12]], device=device),
           "position_ids": torch.tensor([[3, 4, 0, 1, 2]], device=device)}
    # What the tail's slots must read: the tail itself, causally (the piece of A in this row), fed on its own.
    tail = {"input_ids": torch.tensor([[8, 9]], device=device), "position_ids": torch.tensor([[3, 4]], device=device)}
    with torch.no_grad():
        packed = model(**row, use_cache=False).logits[0, :2].float()
        alone = model(**tail, use_cache=False).logits[0].float()
    diff = (packed - alone).abs().max().item()
    if not diff <= 5e-2:  # NaN fails too
        print(f"FAIL transformers {transformers.__version__} flash_attention_2: row starting mid-document "
              f"(position_ids [3, 4, 0, 1, 2]): slots 0-1 differ from the same piece alone by {diff:.3g} "
              f"(cu_seq_lens {fa.prepare_fa_kwargs_from_position_ids(row['position_ids'])[0][0].tolist()})")
        return 1
    print(f"OK transformers {transformers.__version__} flash_attention_2: slots 0-1 == the piece alone "
          f"(max |diff| {diff:.1g})")
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

"""A real (tiny) training run with the guard, for `torchrun --nproc_per_node 2 guard_train.py MODE OUT`:
a one-layer Llama, HF Trainer on CPU with the gloo backend, DataCollatorWithFlattening, two or three
optimizer steps. MODE:

- correct:          the collator with position_ids and flash-attention kwargs, num_items_in_batch counted over
                    every rank (average_tokens_across_devices=True, the default): the guard must stay silent;
- rank_local:       average_tokens_across_devices=False: each rank divides by its own count;
- across_documents: the collator without position_ids (return_position_ids=False): the flattened row is one
                    sequence to the model, so it trains across documents.

Each rank writes OUT/rank<r>.json: {"mode", "outcome": "passed" | "caught", "where", "text", "steps"}; a
caught violation exits 3.
"""

import json
import os
import sys
import tempfile

import torch
from transformers import DataCollatorWithFlattening, LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

from packoracle import guard


def documents(n=48, seed=0):
    """Documents of 2 to 12 tokens (ids 1..63), different lengths so that ranks and micro-batches differ."""
    g = torch.Generator().manual_seed(seed)
    return [{"input_ids": torch.randint(1, 64, (int(torch.randint(2, 13, (1,), generator=g)),), generator=g).tolist()}
            for _ in range(n)]


def main(mode: str, out: str) -> int:
    rank = int(os.environ.get("RANK", "0"))
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=2, attn_implementation="sdpa"))
    collator = DataCollatorWithFlattening(return_position_ids=(mode != "across_documents"),
                                          return_flash_attn_kwargs=(mode != "across_documents"))
    policy = "hf-flatten" if mode != "across_documents" else {"preset": "hf-flatten", "boundary_source": "position_reset"}
    guarded = guard.wrap_collator(collator, policy, dump_dir=os.path.join(out, "dumps"))
    args = TrainingArguments(output_dir=tempfile.mkdtemp(prefix="guard-train-"), use_cpu=True, ddp_backend="gloo",
                             per_device_train_batch_size=3, gradient_accumulation_steps=2, max_steps=3,
                             learning_rate=1e-3, report_to=[], save_strategy="no", logging_strategy="no",
                             average_tokens_across_devices=(mode != "rank_local"), dataloader_num_workers=0,
                             seed=0, disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=documents(), data_collator=guarded)
    watch = guard.attach(trainer)
    result = {"mode": mode, "rank": rank}
    try:
        trainer.train()
        result.update(outcome="passed", where="", text="")
        code = 0
    except guard.GuardViolation as e:
        result.update(outcome="caught", where=e.where, text=str(e), dump=e.dump)
        code = 3
    result["steps"] = [{"step": v.step, "ok": v.ok, "valid": v.valid_targets, "bytes": v.bytes_exchanged,
                        "exchange_ms": round(v.seconds_exchanging * 1e3, 3),
                        "notes": v.notes} for v in watch.verdicts]
    result["batches_checked"] = guarded.guard.state.checked
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(result, f, indent=1)
    return code


def leave(code: int) -> None:
    """Ends the rank once both have written their results, without the interpreter's teardown: torch's
    distributed teardown at exit (gloo's threads, accelerate's state) failed twice in CI under load after
    both ranks had passed (exit 1, then "terminate called without an active exception"), which is not what
    this test is about. The results are in rank{R}.json; the exit code is the run's."""
    import torch.distributed as dist
    if code == 0 and dist.is_available() and dist.is_initialized():
        dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    leave(main(sys.argv[1], sys.argv[2]))

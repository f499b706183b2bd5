"""The guard in a Hugging Face Trainer: `attach(trainer)` checks, at the end of every optimizer step (or one
in `every`), the num_items_in_batch each micro-batch's loss was divided by against the step's valid targets
counted by the kit over every rank (through the Trainer's own process group).

The Trainer's API allows this without touching its code: `compute_loss` is looked up on the trainer object,
so the guard sets a wrapper there (it calls the Trainer's own method and records the micro-batch and the
num_items_in_batch it was given), and a TrainerCallback's on_step_end, which runs on every rank after each
optimizer step, does the cross-rank check.
"""

from __future__ import annotations

from typing import Any, Optional

from .._policy import PolicyLike, resolve
from ._batches import GuardedCollator, OnViolation
from ._step import StepVerdict, check_step

# The fields of a micro-batch the check reads (anything else the model takes is left out of the record).
RECORDED = ("input_ids", "labels", "position_ids", "cu_seq_lens_q", "cu_seq_lens_k", "cu_seqlens", "seq_idx",
            "attention_mask", "seq_lens", "loss_mask")


class TrainerGuard:
    """What attach() installs: the compute_loss recorder and the on_step_end check. ``verdicts`` holds the
    StepVerdict of every checked step."""

    def __init__(self, trainer: Any, policy: dict, every: int, on_violation: OnViolation, model_every: int = 0):
        from transformers import TrainerCallback

        self.trainer, self.policy, self.every, self.on_violation = trainer, policy, every, on_violation
        self.model_every = model_every
        self.model_checked_at: Optional[int] = None
        self.pending: list[dict] = []
        self.verdicts: list[StepVerdict] = []
        self.step = 0
        original = trainer.compute_loss
        guard = self

        def compute_loss(model: Any, inputs: dict, return_outputs: bool = False, num_items_in_batch: Any = None,
                         **kwargs: Any) -> Any:
            guard.check_model_if_due(model, inputs)
            guard.record(inputs, num_items_in_batch)
            return original(model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch,
                            **kwargs)

        trainer.compute_loss = compute_loss

        class _StepEnd(TrainerCallback):
            def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                guard.step_end(state.global_step)

        trainer.add_callback(_StepEnd())

    def check_model_if_due(self, model: Any, inputs: dict) -> None:
        """guard.check_model on the model the Trainer is about to call, in this batch's feed and with the
        use_cache it is called with, at the first micro-batch and then at every `model_every`-th step."""
        if not self.model_every or (self.model_checked_at is not None and
                                    self.step - self.model_checked_at < self.model_every):
            return
        from ._model import check_model

        self.model_checked_at = self.step
        # The Trainer sets model.config.use_cache from TrainingArguments.use_cache (False by default).
        cache = inputs.get("use_cache", getattr(model.config, "use_cache", None))
        if self.policy["attention"] != "doc_causal":
            return  # the declared policy lets documents attend to each other: nothing for the model to keep apart
        check_model(getattr(model, "module", model), inputs, use_cache=cache,
                    on_violation="log" if self.on_violation == "log" else "raise")

    def record(self, inputs: dict, num_items_in_batch: Any) -> None:
        batch = {k: _cpu(v) for k, v in inputs.items() if k in RECORDED and v is not None}
        if num_items_in_batch is not None:
            # The Trainer's count over every rank and accumulation step (average_tokens_across_devices): a
            # denominator alone, with its scope, is a producer of DESIGN §5 as it stands, checked as the count.
            batch["producer"] = {"denominator": float(_cpu(num_items_in_batch)), "denominator_scope": "global"}
        self.pending.append(batch)

    def step_end(self, global_step: int) -> None:
        self.step = global_step
        microbatches, self.pending = self.pending, []
        step = global_step - 1
        if step % self.every or not microbatches:
            return
        group = None  # the Trainer's world: accelerate initialised torch.distributed
        self.verdicts.append(check_step(microbatches, policy=self.policy, group=group, step=step,
                                        on_violation=self.on_violation))


def _cpu(value: Any) -> Any:
    if hasattr(value, "detach"):
        value = value.detach().cpu()
        return value.item() if value.ndim == 0 else value
    return value


def attach(trainer: Any, policy: Optional[PolicyLike] = None, *, every: int = 1,
           on_violation: OnViolation = "raise", check_model_every: int = 0) -> TrainerGuard:
    """Guards a transformers Trainer's loss: every `every`-th optimizer step, the num_items_in_batch of each
    micro-batch must be what the policy's denominator declares (under `global_targets`: the step's valid
    targets over every rank, as the kit counts them). The policy defaults to the one of the trainer's guarded
    collator (wrap_collator). ``check_model_every=k`` also runs guard.check_model on the model the Trainer
    calls (its attention implementation, the batch's feed, the use_cache it is called with) before the first
    micro-batch and then every k steps. Returns the TrainerGuard (its ``verdicts`` list grows by one per checked
    step)."""
    if not isinstance(check_model_every, int) or isinstance(check_model_every, bool) or check_model_every < 0:
        raise ValueError(f"guard.attach: check_model_every must be a non-negative integer, got {check_model_every!r}")
    if policy is None:
        collator = getattr(trainer, "data_collator", None)
        if not isinstance(collator, GuardedCollator):
            raise ValueError("guard.attach: give the policy, or wrap the trainer's collator with guard.wrap_collator "
                             "first (the policy is then the collator's)")
        resolved = collator.guard.policy
    else:
        resolved = resolve(policy)
    return TrainerGuard(trainer, resolved, every, on_violation, check_model_every)

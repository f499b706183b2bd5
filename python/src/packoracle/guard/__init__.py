"""packoracle.guard: the kit's checks inside a real training run (DESIGN §11).

    from packoracle import guard
    collator = guard.wrap_collator(DataCollatorWithFlattening(return_flash_attn_kwargs=True), "hf-flatten")
    trainer = Trainer(model=model, args=args, train_dataset=ds, data_collator=collator)
    guard.attach(trainer)          # the denominators, all-reduced over the run's ranks, at every step
    trainer.train()                # a violation raises GuardViolation with the kit's report

    guard.check_model(model, batch)   # a custom loop: the model's own masks, in the batch's feed, before step 0

Batches are checked in-process against the declared policy, with the documents the collator was handed;
the loss side compares each micro-batch's denominator with the step's valid targets over every rank,
exchanged through the run's own torch.distributed process group.
"""

from ._batches import (BatchGuard, GuardedCollator, GuardedLoader, GuardViolation, documents_from_features,
                       wrap_collator, wrap_dataloader)
from ._model import check_model
from ._segments import documents_from_segments
from ._step import StepVerdict, check_step
from .hf import TrainerGuard, attach

__all__ = ["BatchGuard", "GuardViolation", "GuardedCollator", "GuardedLoader", "StepVerdict", "TrainerGuard",
           "attach", "check_model", "check_step", "documents_from_features", "documents_from_segments", "wrap_collator",
           "wrap_dataloader"]

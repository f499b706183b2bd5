"""Loss reducers and attention consumers served from another interpreter by packoracle.exec_server
(test_exec_roles.py): the same callables packoracle.fuzz takes in-process, right and buggy."""
import os
import sys
import time

import numpy as np

if __package__:  # imported in-process (tests.exec_role_callables): no top-level `packers` in sys.modules, which
    # would shadow the copy a pytester run of test_pytest_plugin.py writes and imports by that name
    from .packers import reduce_own_count_as_global, reduce_token_mean  # noqa: F401 (served by name)
else:  # served by name from another interpreter (packoracle.exec_server)
    sys.path.insert(0, os.path.dirname(__file__))
    from packers import reduce_own_count_as_global, reduce_token_mean  # noqa: E402,F401


def reduce_hang_on_two(request):
    """FAULT: hangs on a step of more than one micro-batch."""
    if len(request["microbatches"]) > 1:
        time.sleep(3600)
    return reduce_token_mean(request)


def reduce_raises_on_two(request):
    """FAULT: raises on a step of more than one micro-batch."""
    if len(request["microbatches"]) > 1:
        raise ValueError("two micro-batches are one too many")
    return reduce_token_mean(request)


def reduce_crash_on_two(request):
    """FAULT: the interpreter dies (SIGABRT) on a step of more than one micro-batch."""
    if len(request["microbatches"]) > 1:
        print("reducer: giving up on a step of several micro-batches", file=sys.stderr, flush=True)
        os.abort()
    return reduce_token_mean(request)


def consume_segment_ids(microbatch, policy):
    """A varlen kernel's reading: each row's doc_ids as causal segment ids (-1: padding)."""
    return [row["doc_ids"] for row in microbatch["rows"]]


def consume_joined(microbatch, policy):
    """BUG: one segment for every document of a row (the boundaries dropped): documents see each other."""
    return [np.where(np.asarray(row["doc_ids"]) >= 0, 0, -1) for row in microbatch["rows"]]


def consume_crash_on_two_rows(microbatch, policy):
    """FAULT: dies (SIGABRT) on a micro-batch of more than one row."""
    if len(microbatch["rows"]) > 1:
        os.abort()
    return consume_segment_ids(microbatch, policy)


# ---- the whole step over exec (test_exec_step.py): served with --step-view, a Computed answer, values -------

def reads_packer_own(microbatch, policy, step):
    """Segment ids from a field only the exec packer's own record has (reference_packer.py --extra writes
    ``packer_own``): what a model reading its collator's private key sees. Without the step's emitted record
    there is nothing to read, and the consumer fails."""
    return step["emitted"]["packer_own"]["segments"]


ALIGN = 8  # the kernel's alignment: the micro-batch's tokens padded to a multiple of it


def _aligned(dense_dummy_row):
    def consume(microbatch, policy):
        from packoracle import Computed

        segments = [np.asarray(row["doc_ids"]) for row in microbatch["rows"]]
        pad = -sum(int((s >= 0).sum()) for s in segments) % ALIGN
        extra = [(pad, np.ones((pad, pad), dtype=bool))] if dense_dummy_row and pad else []
        return Computed(segments, extra_rows=extra)
    return consume


consume_dense_dummy_row = _aligned(True)  # BUG: the alignment padding built as a dense dummy row (efficiency)
consume_aligned = _aligned(False)         # fixed: the padding computes nothing

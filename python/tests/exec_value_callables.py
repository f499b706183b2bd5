"""Value consumers served from another interpreter by ``packoracle.exec_server --value-consumer``
(test_exec_step.py): instances of value_consumers.py's torch models, the same the in-process tests use."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from value_consumers import NanPastLastSeqlen, RowNormLeak, ZeroPastLastSeqlen  # noqa: E402

row_norm_leak = RowNormLeak()                    # BUG: centred over the whole packed row (packing_invariance)
zero_past_last_seqlen = ZeroPastLastSeqlen()     # fixed: values and gradients pass
nan_past_last_seqlen = NanPastLastSeqlen()       # BUG: a NaN gradient row past cu_seqlens[-1] (gradient)


def crash_on_two_documents(microbatch, policy):
    """FAULT: the interpreter dies (SIGABRT) on a row holding two documents."""
    if any(len({d for d in row["doc_ids"] if d >= 0}) > 1 for row in microbatch["rows"]):
        os.abort()
    return zero_past_last_seqlen(microbatch, policy)

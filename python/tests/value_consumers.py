"""Value consumers (packoracle.fuzz(value_consumer=...)): small torch models, each stating one reported bug
mechanism and its fixed twin. Each reads the micro-batch's rows as a model's data path does: document
boundaries from ``doc_ids`` (the varlen segment ids; -1 on padding), never from the kit's ``doc_spans``.

- a normalisation leak: hidden states centred over the whole packed row (statistics of the other documents
  leak into each), fixed: centred per document;
- a state reset at a shard edge: a recurrent scan (a Mamba / linear-attention state) that restarts at every
  context-parallel shard edge as well as at document starts, fixed: the state crosses shard edges (passed
  between ranks) and restarts at document starts only;
- a NaN gradient row past cu_seqlens[-1]: a varlen kernel computes the real tokens and leaves the rows past
  the last cu_seqlens (the padding) uninitialised; its backward writes NaN there, which reaches the
  parameters through the projection; fixed: those rows' gradient is zero."""
from __future__ import annotations

import torch

VOCAB, WIDTH = 64, 6


def _segments(row: dict) -> torch.Tensor:
    """Segment ids per slot: doc_ids (-1 on padding), as a varlen kernel is given them."""
    return torch.as_tensor(row["doc_ids"], dtype=torch.long)


class _Tiny(torch.nn.Module):
    """Embedding, a per-row mixer (the mechanism), a linear head; float64, so the default tolerance is ample."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(VOCAB, WIDTH, dtype=torch.float64)
        self.head = torch.nn.Linear(WIDTH, 5, dtype=torch.float64)

    def mix(self, hidden: torch.Tensor, segments: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, microbatch: dict, policy: dict) -> list:
        out = []
        for row in microbatch["rows"]:
            ids = torch.as_tensor(row["input_ids"], dtype=torch.long) % VOCAB
            out.append(self.head(self.mix(self.embed(ids), _segments(row))))
        return out


class RowNormLeak(_Tiny):
    """Centres the hidden states over every real slot of the row: one document's outputs move with its
    neighbours'."""

    def mix(self, hidden: torch.Tensor, segments: torch.Tensor) -> torch.Tensor:
        real = segments >= 0
        return hidden - hidden[real].mean(0) if bool(real.any()) else hidden


class DocumentNorm(_Tiny):
    """The fixed twin: centred over each document's own slots."""

    def mix(self, hidden: torch.Tensor, segments: torch.Tensor) -> torch.Tensor:
        out = hidden.clone()
        for s in torch.unique(segments[segments >= 0]):
            where = segments == s
            out[where] = hidden[where] - hidden[where].mean(0)
        return out


SHARD = 4  # slots a context-parallel rank holds of a row


def _scan(hidden: torch.Tensor, restart: list) -> torch.Tensor:
    states, state = [], torch.zeros_like(hidden[0])
    for t in range(hidden.shape[0]):
        state = hidden[t] + (0 if restart[t] else 0.5 * state)
        states.append(state)
    return torch.stack(states) if states else hidden


class ShardEdgeReset(_Tiny):
    """A recurrent state that restarts at document starts and, wrongly, at every shard edge (slot % SHARD == 0):
    a document crossing a shard edge loses its earlier tokens there."""

    def mix(self, hidden: torch.Tensor, segments: torch.Tensor) -> torch.Tensor:
        s = segments.tolist()
        return _scan(hidden, [t == 0 or s[t] != s[t - 1] or t % SHARD == 0 for t in range(len(s))])


class DocumentScan(_Tiny):
    """The fixed twin: the state crosses shard edges and restarts at document starts only."""

    def mix(self, hidden: torch.Tensor, segments: torch.Tensor) -> torch.Tensor:
        s = segments.tolist()
        return _scan(hidden, [t == 0 or s[t] != s[t - 1] for t in range(len(s))])


class _PastLastSeqlen(torch.autograd.Function):
    """The rows a varlen kernel never writes (past cu_seqlens[-1]): zeros forward; backward as `fill` says."""

    @staticmethod
    def forward(ctx, rows: torch.Tensor, fill: float) -> torch.Tensor:  # type: ignore[override]
        ctx.fill = fill
        return torch.zeros_like(rows)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple:  # type: ignore[override]
        return torch.full_like(grad, ctx.fill), None


class NanPastLastSeqlen(_Tiny):
    """Document slots through a per-document mixer, padding through a kernel whose backward leaves NaN rows."""

    fill = float("nan")

    def mix(self, hidden: torch.Tensor, segments: torch.Tensor) -> torch.Tensor:
        total = int((segments >= 0).sum())  # cu_seqlens[-1] of the real tokens: padding is on the right
        real = DocumentNorm.mix(self, hidden[:total], segments[:total])  # type: ignore[arg-type]
        return torch.cat([real, _PastLastSeqlen.apply(hidden[total:], self.fill)])


class ZeroPastLastSeqlen(NanPastLastSeqlen):
    """The fixed twin: the kernel's backward zeroes the rows past cu_seqlens[-1]."""

    fill = 0.0


class CpShardEdgeReset(_Tiny):
    """The shard-edge reset where the step puts the edges (fuzz(step_view=True)): each context-parallel rank runs
    the scan over the chunks it holds (``step["layout"]["cp_shards"]``) and starts from a zero state at each,
    instead of receiving the state of the rank before it."""

    def forward(self, microbatch: dict, policy: dict, step: dict) -> list:  # type: ignore[override]
        out = []
        for row, shards in zip(microbatch["rows"], step["layout"]["cp_shards"]):
            ids = torch.as_tensor(row["input_ids"], dtype=torch.long) % VOCAB
            s = _segments(row).tolist()
            edges = {start for chunks in shards for start, _ in chunks}
            restart = [t == 0 or s[t] != s[t - 1] or t in edges for t in range(len(s))]
            out.append(self.head(_scan(self.embed(ids), restart)))
        return out

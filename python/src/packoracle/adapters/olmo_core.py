"""allenai/OLMo-core (ai2-olmo-core): NumpyPackedFSLDataset (optimized best-fit-decreasing packing of documents
into fixed-length instances) + DataCollator + get_labels, with intra-document masking (generate_doc_lengths).

The dataset is built the way OLMo-core builds it, from a token file on disk: each request's documents (EOS
appended to every document, as Dolma tokenization writes them) go to a fresh temporary ``.npy`` token file and a
bool label-mask file beside it (``label_mask_paths``, OLMo-core's per-token supervision for SFT data), the dataset
is ``prepare()``d there (``pack_documents_into_instances`` → ``InstancePacker(sequence_length).pack_documents``,
in its own worker process as in training) and read back with ``__getitem__``. Each instance goes through the
library's ``DataCollator`` on its own and ``get_labels`` (what ``TransformerTrainModule.train_batch`` calls);
``cu_seqlens`` is ``get_cumulative_document_lengths(doc_lens)``, what ``Transformer.forward`` hands the
attention and the intra-document RoPE. A fresh directory per request: the packing caches are keyed by file
name and size, so a reused file would hand back another request's packing.

Two things OLMo-core keeps but does not return are read from it, not recomputed: ``doc_spans`` from the
packing it wrote next to the data (instance offsets → document ids → document indices, the files
``__getitem__`` itself reads, through the dataset's own path methods), because matching token values is
ambiguous when documents share tokens with the padding; and ``position_ids`` from its ``RotaryEmbedding``
(there is no position tensor: the RoPE derives positions from cu_doc_lens), read off the rotation it applies
to a probe.

The adapter's own part: instances in dataset order are the rows, dealt to micro-batches and ranks by
``assign`` (OLMo-core's data loader shards instances across ranks itself; that is not modelled here).

No loss reducer: the count ``TransformerTrainModule.train_batch`` divides by (``(labels != ignore).sum()`` over
the rank's batch, plus the tokens of instances the instance filter masked) is computed inline in
``train_batch``, which also runs the model forward and backward; no pure function of OLMo-core takes the
kit's per-slot losses. (The count is per rank and not all-reduced: the policy says ``rank_mean``.)
"""

from __future__ import annotations

import os
import tempfile
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import torch

from ._base import Adapter, Finding, Packer, assign, documents_of

WRITTEN_FOR = "3.0.0"

# Delimiters as OLMo-core's default tokenizer (dolma2) has them: EOS distinct from the padding id. The ids are
# the kit's small ones; what the dataset does depends on their roles, not their values.
EOS_ID, PAD_ID = 2, 0


def _write(path: str, values: list, dtype: npt.DTypeLike) -> None:
    """A Dolma-style flat array (no .npy header: OLMo-core memory-maps the raw bytes)."""
    np.asarray(values, dtype=dtype).tofile(path)


def _rope_positions(cu_doc_lens: torch.Tensor, length: int) -> torch.Tensor:
    """The position the model's RoPE gives each slot of a row: OLMo-core has no position tensor, its
    RotaryEmbedding derives the positions from cu_doc_lens (intra-document RoPE). A probe of 4 dimensions whose
    second frequency is 1/100 rad reads them back unambiguously (positions < 314) from the rotation that the
    library's own RotaryEmbedding.forward applies."""
    import torch
    from olmo_core.nn.rope import RotaryEmbedding

    probe = torch.zeros(1, length, 1, 4, dtype=torch.float32)
    probe[..., 1] = 1.0
    rotated, _ = RotaryEmbedding(head_size=4, theta=10_000)(probe, probe.clone(), head_first=False,
                                                            cu_doc_lens=cu_doc_lens)
    angle = torch.atan2(rotated[0, :, 0, 3].double(), rotated[0, :, 0, 1].double())
    return torch.round(angle / 0.01).long()[None]


def _instance_pieces(dataset: Any, data_path: str) -> list[list[tuple[int, int]]]:
    """Per instance, the token ranges [start, end) of the source file that __getitem__ concatenates, in order:
    the packing the library wrote next to the data (instance offsets → document ids → document indices), so
    the provenance of every piece comes from the library, not from matching token values."""
    def read(path: str) -> np.ndarray:
        return np.fromfile(path, dtype=dataset.indices_dtype).astype(np.int64)

    offsets = read(dataset._get_instance_offsets_path(data_path)).reshape(-1, 2)
    documents = read(dataset._get_docs_by_instance_path(data_path))
    indices = read(dataset._get_document_indices_path(data_path)).reshape(-1, 2)
    return [[(int(indices[d][0]), int(indices[d][1])) for d in documents[a:b]] for a, b in offsets]


def _spans(pieces: list[tuple[int, int]], docs: list[dict], starts: list[int]) -> list[dict]:
    """doc_spans of one row from its pieces (a piece of the file starting inside document k)."""
    import bisect

    spans, at = [], 0
    for start, end in pieces:
        k = bisect.bisect_right(starts, start) - 1
        spans.append({"doc_uid": docs[k]["doc_uid"], "start": at, "length": end - start,
                      "doc_offset": start - starts[k]})
        at += end - start
    return spans


def packed_fsl_packer(long_doc_strategy: str = "truncate") -> Packer:
    from olmo_core.data.collator import DataCollator
    from olmo_core.data.numpy_dataset import NumpyPackedFSLDataset
    from olmo_core.data.types import LongDocStrategy
    from olmo_core.data.utils import get_cumulative_document_lengths, get_labels

    def pack(request: dict) -> list[dict]:
        policy = request["policy"]
        docs = documents_of(request)  # EOS appended to every document (the policy's eos_id)
        tokens = [t for d in docs for t in d["tokens"]]
        supervised = [bool(s) for d in docs for s in d["supervised"]]
        if not tokens:
            return []  # nothing to write: numpy cannot memory-map an empty file, and no dataset has none
        collator = DataCollator(pad_token_id=policy["pad_id"])
        rows = []
        with tempfile.TemporaryDirectory(prefix="packoracle-olmo-") as tmp:
            data_path, mask_path = os.path.join(tmp, "part-0.npy"), os.path.join(tmp, "part-0-mask.npy")
            _write(data_path, tokens, np.uint32)
            _write(mask_path, supervised, np.bool_)
            dataset = NumpyPackedFSLDataset(
                data_path, sequence_length=request["row_length"], pad_token_id=policy["pad_id"],
                eos_token_id=policy["eos_id"], vocab_size=1 << 16, dtype=np.uint32, generate_doc_lengths=True,
                label_mask_paths=[mask_path], long_doc_strategy=LongDocStrategy(long_doc_strategy))
            dataset.work_dir = tmp
            dataset.prepare()
            starts = np.cumsum([0] + [len(d["tokens"]) for d in docs[:-1]]).tolist()
            pieces = _instance_pieces(dataset, data_path)
            for index in range(len(dataset)):
                batch = collator([dataset[index]])
                batch["labels"] = get_labels(batch)  # as TransformerTrainModule.train_batch
                cu_doc_lens = get_cumulative_document_lengths(batch["doc_lens"])
                rows.append({
                    "input_ids": batch["input_ids"],
                    "labels": batch["labels"],
                    # doc_lens under the kit's name for the same thing (per-document lengths of the row)
                    "seq_lens": batch["doc_lens"],
                    # what Transformer.forward derives from doc_lens for the attention and the RoPE
                    "cu_seqlens": cu_doc_lens,
                    "position_ids": _rope_positions(cu_doc_lens, batch["input_ids"].shape[1]),
                    "doc_spans": [_spans(pieces[index], docs, starts)],
                    # label_mask is consumed by get_labels (labels are -100 where it is False) and the model
                    # never reads it; max_doc_lens is derived from doc_lens: both left out
                })
        return assign(rows, request)

    return pack


def _policy(**overrides: Any) -> dict:
    """What NumpyPackedFSLDataset(generate_doc_lengths=True) + get_labels is meant to implement: EOS-delimited
    documents packed whole, document-causal attention and RoPE positions from cu_doc_lens, labels shifted
    inside the row, the prediction made from a document's EOS not trained (isolation)."""
    policy = {"preset": "reference", "label_alignment": "pre_shifted", "boundary_source": "eod_closes",
              "attention": "doc_causal", "pad_keys": "own_segment", "positions": "doc_reset",
              "pad_positions": "any", "boundary_target": "excluded", "row_end_target": "none",
              "padding": "right", "pad_id": PAD_ID, "pad_to": "row_len", "overflow": "truncate",
              "eos_id": EOS_ID, "bos_id": None, "denominator": "rank_mean"}
    policy.update(overrides)
    return policy


_NOTES = ("rows are exactly sequence_length (padding after the last document, label_mask False there); "
          "doc_lens given as seq_lens and cu_doc_lens as cu_seqlens; position_ids read back from the library's "
          "RotaryEmbedding; no loss reducer (the count is inline in TransformerTrainModule.train_batch). Behind "
          "the power-of-two failure (seen at L = 4, 8, 16 with Hypothesis): get_labels shifts inside the row "
          "without looking at doc_lens, so a document's EOS predicts the next document's first token (two empty "
          "documents, [EOS EOS pad pad]: labels[0] = EOS, trained), although cu_doc_lens keeps that next token out "
          "of the EOS's attention (targets, boundary_target; not reported upstream; torchtitan fixed the same in "
          "PR #4075; report: [docs/upstream/olmo-core-eos-target.md](upstream/olmo-core-eos-target.md)). With boundary_target declared included, the packed-fsl configuration passes at L = 4, 8, 16")

_POWER_OF_TWO = Finding(
    "shape", "bug",
    "NumpyPackedFSLDataset(sequence_length=L).prepare() fails for any L that is not a power of two (L=3, "
    "d0=[0]): pack_documents_into_instances builds InstancePacker(L), whose SegmentTree(L) asserts "
    "'N should be a power of 2'. NumpyPackedFSLDatasetConfig.validate() accepts any positive sequence_length "
    "and the docstrings state no such limit; it should pad the tree to the next power of two or reject L up "
    "front.", report="docs/upstream/olmo-core-power-of-two.md")

ADAPTERS = (
    Adapter(name="olmo-core/packed-fsl", system="OLMo-core", distribution="ai2-olmo-core", written_for=WRITTEN_FOR,
            configuration="NumpyPackedFSLDataset(path, sequence_length=L, eos_token_id=eos, pad_token_id=pad, "
                          "generate_doc_lengths=True, label_mask_paths=[mask]) + DataCollator + get_labels",
            policy=_policy(), imports=("olmo_core.data.numpy_dataset", "torch"),
            make_packer=packed_fsl_packer, notes=_NOTES, findings={"pack": _POWER_OF_TWO}),
    Adapter(name="olmo-core/packed-fsl-fragment", system="OLMo-core", distribution="ai2-olmo-core",
            written_for=WRITTEN_FOR,
            configuration="NumpyPackedFSLDataset(..., generate_doc_lengths=True, label_mask_paths=[mask], "
                          "long_doc_strategy=LongDocStrategy.fragment) + DataCollator + get_labels",
            policy=_policy(overflow="split", split_positions="restart"),
            imports=("olmo_core.data.numpy_dataset", "torch"),
            make_packer=lambda: packed_fsl_packer("fragment"),
            notes=_NOTES.split(". Behind")[0] + ". fragment: a long document is cut into fragments of at most L "
                  "tokens, each packed (best fit) as a document of its own, its positions restarting. Behind the "
                  "power-of-two failure, as in packed-fsl, the shift inside the row trains every EOS on whatever "
                  "follows it; here that can also be a later fragment of another document (d1=[0 0 0 0] at L=4: "
                  "[EOS(d0) EOS(d1, offset 4) pad pad], labels[0] = EOS of d1, a target no boundary policy allows; report: "
                  "[docs/upstream/olmo-core-eos-target.md](upstream/olmo-core-eos-target.md))",
            findings={"pack": _POWER_OF_TWO}),
)

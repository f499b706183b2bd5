"""packoracle.dump: write real training batches as `packed-batch` JSON Lines (DESIGN.md §5) for
`packoracle verify`, and convert what HF transformers, TRL, torchtune, Megatron-LM and llm.c return into it.

    from packoracle.dump import DumpWriter, DocumentSequence, from_torchtune_packed
    docs = DocumentSequence([{"doc_uid": "a", "tokens": [11, 12, 13, 0]}, ...])
    with DumpWriter("torchtune.jsonl") as w:
        w.header(system="pytorch/torchtune", component="PackedDataset", version="bd2a0fc",
                 policy={"preset": "torchtune-packed", "pad_id": 99, "eos_id": 0},
                 special_ids={"pad": 99, "eos": 0})
        w.documents(docs.documents)
        w.write(from_torchtune_packed(packs, docs, pad_id=99))

Standard library only, and no C++ extension: `import packoracle` loads packoracle._core only when a name that
needs it is used, so a training machine without the build writes dumps with this module (its policy table checks
keys and values; `packoracle verify` applies the rest). python/tests/test_lazy_import.py writes and reads a dump
with the extension absent.
"""

from .format import (DENOMINATOR_SCOPES, POLICY_KEYS, PRESETS, SCHEMA, VERSION, DenominatorScope, DocumentRecord,
                     DumpWriter, HeaderRecord, IntsLike, MicrobatchRecord, Producer, ProducerTotals, Record, Row,
                     Span, StepRecord, SupportsToList, document_record, header_record, make_policy,
                     microbatch_record, resolve_policy, span, step_record, tolist, validate_lines, validate_policy,
                     validate_record)
from .spans import (Document, DocumentLike, Documents, DocumentSequence, Overflow, as_documents, match_sequential,
                    stream_spans)
from .converters import (Batch, WindowStart, doc_ids_from_dense_mask, from_hf_flatten, from_hf_padded, from_llmc,
                         from_megatron_gpt, from_torchtune_packed, from_trl_constant_length, from_trl_padding_free)

__all__ = [
    "DENOMINATOR_SCOPES", "POLICY_KEYS", "PRESETS", "SCHEMA", "VERSION", "DumpWriter", "document_record",
    "header_record", "make_policy", "microbatch_record", "resolve_policy", "span", "step_record", "tolist",
    "validate_lines", "validate_policy", "validate_record", "Document", "DocumentSequence", "as_documents",
    "match_sequential", "stream_spans", "doc_ids_from_dense_mask", "from_hf_flatten", "from_hf_padded",
    "from_llmc", "from_megatron_gpt", "from_torchtune_packed", "from_trl_constant_length",
    "from_trl_padding_free",
    # types (the records are TypedDicts: plain dicts at run time)
    "Batch", "DenominatorScope", "DocumentLike", "DocumentRecord", "Documents", "HeaderRecord", "IntsLike",
    "MicrobatchRecord", "Overflow", "Producer", "ProducerTotals", "Record", "Row", "Span", "StepRecord",
    "SupportsToList", "WindowStart",
]

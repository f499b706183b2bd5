"""A micro-batch's `producer` object, stated once (kProducerTotalsFields, properties/candidate.h) and read by
every reader through it: packoracle.dump.format's writer reads the fields from schema.json (`packoracle schema`)
and takes exactly the producer objects the core's reader takes, and the core gives back every field it read."""

from __future__ import annotations

import itertools

import pytest

from packoracle import _core
from packoracle.dump import format as fmt

ROW = {"input_ids": [1, 2], "labels": [2, -100], "doc_spans": [{"doc_uid": "a", "start": 0, "length": 2,
                                                                 "doc_offset": 0}]}
VALUES = {"number": 4.0, "scope": "global"}
FIELDS = fmt.SCHEMA_TABLES["producer_fields"]
SUBSETS = [dict(c) for n in range(len(FIELDS) + 1)
           for c in itertools.combinations([(f["name"], VALUES[f["value"]]) for f in FIELDS], n)]


def _core_takes(producer: dict) -> bool:
    try:
        _core.read_microbatch({"step": 0, "micro_step": 0, "rank": 0, "rows": [ROW], "producer": producer})
        return True
    except ValueError:
        return False


def _writer_takes(producer: dict) -> bool:
    try:
        fmt.microbatch_record([ROW], producer=producer)
        return True
    except ValueError:
        return False


def test_the_schema_names_the_totals_and_the_scope():
    assert fmt.PRODUCER_TOTALS == ("loss_sum", "denominator", "loss")
    assert [f["name"] for f in FIELDS if f["value"] == "scope"] == ["denominator_scope"]


@pytest.mark.parametrize("producer", SUBSETS[1:], ids=lambda p: "+".join(p))
def test_the_writer_takes_the_producer_objects_the_core_takes(producer):
    assert _writer_takes(producer) == _core_takes(producer)


@pytest.mark.parametrize("producer", [p for p in SUBSETS[1:] if _core_takes(p)], ids=lambda p: "+".join(p))
def test_the_core_gives_back_every_field_it_read(producer):
    back = _core.read_microbatch({"step": 0, "micro_step": 0, "rank": 0, "rows": [ROW], "producer": producer})
    assert {k: v for k, v in back["producer"].items() if v is not None} == producer
    assert list(back["producer"]) == [f["name"] for f in FIELDS]

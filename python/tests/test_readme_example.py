"""Issue 27: the README's first example (a packer the way users write one) passes the kit's own Hypothesis
strategy too, empty documents included, not only `fuzz`: a user who tries the example under
`strategies.requests` meets no bug the kit's `fuzz` never showed."""

from __future__ import annotations

import pathlib
import re

import pytest

import packoracle
from packoracle import strategies

hypothesis = pytest.importorskip("hypothesis")

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def _readme_packer():
    """`pack` as the README's first python block defines it (run as written, its test function not called)."""
    block = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert block, "README.md has no python block"
    namespace: dict = {}
    exec(compile(block.group(1), str(README), "exec"), namespace)  # noqa: S102 - the repository's own README
    return namespace["pack"]


@hypothesis.settings(max_examples=300, deadline=None, suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.given(request=strategies.requests("hf-flatten", max_row_length=24, max_documents=8,
                                              prompt_masking=True))
def test_the_readme_packer_passes_the_hypothesis_strategy(request):
    pack = _readme_packer()
    docs = [(d["tokens"], d["supervised"]) for d in request["documents"]]
    try:
        rows = pack(docs, request["row_length"])
    except packoracle.Refuse:
        assert any(len(t) > request["row_length"] for t, _ in docs), "refused a request that fits"
        return
    documents = [packoracle.Document(d["doc_uid"], d["tokens"], d["supervised"]) for d in request["documents"]]
    report = packoracle.check_step([dict(row, micro_step=m) for m, row in enumerate(rows)], documents, "hf-flatten")
    assert report.ok, str(report)


def test_the_strategy_draws_empty_documents():
    seen = []

    @hypothesis.settings(max_examples=200, deadline=None, database=None)
    @hypothesis.given(request=strategies.requests("hf-flatten", max_row_length=24))
    def collect(request):
        seen.extend(len(d["tokens"]) for d in request["documents"])

    collect()
    assert 0 in seen  # the case the example's `as_long` exists for

"""check_batch on one 8 x 8192 torch int64 micro-batch (workload.py) against two baselines of the same invariants,
and the binding's own cost inside check_batch.

group "check" (one micro-batch checked, whole call):
  check_batch_spans    packoracle.check_batch(batch, documents, "reference", producer=...) with doc_spans given
  check_batch_derived  the same without doc_spans: the package derives them from the documents (SpanMatcher)
  numpy_checker        numpy_checker.check (vectorised numpy)
  pure_checker         pure_checker.check (Python lists and loops)
  check_batch_short_documents, numpy_checker_short_documents  the same batch shape packed with short documents
                       (2..200 tokens, about 650 of them; documents as arrays, spans given): the per-document costs

  check_batch_*_python_reader  the same two with the core's batch reader (_core.batch_view) turned off: every
                       batch through canonical_microbatch, as before it (what the reader saves, in the same run)

group "binding" (the pieces of check_batch that are conversion, not checking):
  resolve_policy       packoracle._policy.resolve("reference") (the C++ resolves it)
  core_documents       packoracle._documents.core_documents(documents, policy): what check_batch does with them
                       ({uid: tokens} read by the core in one call, _core.plain_documents)
  canonical_documents  packoracle.canonical_documents(documents) ({uid: list} → [{"doc_uid", "tokens": array}])
  effective_documents  packoracle._core.effective_documents(docs, policy) (C++: delimiters, back to numpy)
  canonical_microbatch packoracle._batch.canonical_microbatch(batch, ...) (tensors → numpy row views)
  span_matcher         canonical_microbatch deriving doc_spans (what check_batch_derived adds)
  batch_view           packoracle._core.batch_view(batch, ...): the core's reading of the same batch (views kept,
                       ids checked, doc_spans read), which check_batch takes instead of canonical_microbatch
  read_microbatches    packoracle._core.read_microbatches([mb]): the C++ conversion alone (arrays read as the
                       checks read them)

Every benchmark first asserts the verdict (the batch is clean): no timed assertions. Ratios: report.py.
Run with --benchmark-timer=time.process_time (run.sh does) so that the neighbours' load counts less.
"""

import pytest

import numpy_checker
import pure_checker
from workload import make_workload

packoracle = pytest.importorskip("packoracle")
from packoracle import _batch, _core  # noqa: E402
from packoracle._documents import core_documents  # noqa: E402
from packoracle._policy import resolve  # noqa: E402

try:
    import torch  # noqa: F401
    KIND = "torch"
except ImportError:
    KIND = "numpy"

POLICY = "reference"


DOCS = ["lists", "arrays"]  # the documents' tokens as Python lists (a tokenizer's output) or numpy int64 arrays


@pytest.fixture(scope="module")
def workloads():
    lists = make_workload(KIND)
    return {"lists": lists, "arrays": lists.with_array_documents()}


@pytest.fixture(params=DOCS)
def w(request, workloads):
    return workloads[request.param]


def _need(name):
    if not hasattr(_core, name):
        pytest.skip(f"packoracle._core.{name} is not built yet")


def _check_batch(w, spans=True):
    batch = w.batch if spans else w.without_spans()
    return packoracle.check_batch(batch, w.documents, POLICY, producer=w.producer)


def _name(benchmark, w, name):
    kind = "lists" if isinstance(next(iter(w.documents.values())), list) else "arrays"
    benchmark.name = f"{name}[docs={kind}]"


@pytest.mark.parametrize("reader", ["core", "python"])
@pytest.mark.parametrize("spans", [True, False], ids=["spans", "derived"])
def test_check_batch(benchmark, w, spans, reader, monkeypatch):
    _need("audit_records")
    name = f"check_batch_{'spans' if spans else 'derived'}"
    if reader == "python":  # the core's batch reader turned off: every batch through canonical_microbatch
        _need("batch_view")
        monkeypatch.setattr(_core, "batch_view", lambda *args: None)
        monkeypatch.setattr(_core, "check_plain_batch", lambda *args: None, raising=False)  # reads as batch_view
        name += "_python_reader"
    benchmark.group = "check"
    _name(benchmark, w, name)
    report = _check_batch(w, spans)
    assert report.ok, str(report)
    assert report.to_json()["totals"]["valid_targets"] == w.valid_targets
    benchmark(_check_batch, w, spans)


def test_numpy_checker(benchmark, w):
    benchmark.group = "check"
    _name(benchmark, w, "numpy_checker")
    policy = resolve(POLICY)
    assert numpy_checker.check(w.batch, w.documents, policy, w.producer) == []
    benchmark(lambda: numpy_checker.check(w.batch, w.documents, resolve(POLICY), w.producer))


@pytest.fixture(scope="module")
def short():
    from workload import SHORT_DOCS
    return make_workload(KIND, doc_lengths=SHORT_DOCS).with_array_documents()


def test_check_batch_short_documents(benchmark, short):
    _need("audit_records")
    benchmark.group = "check"
    benchmark.name = "check_batch_short_documents"
    report = _check_batch(short)
    assert report.ok, str(report)
    assert report.to_json()["totals"]["valid_targets"] == short.valid_targets
    benchmark(_check_batch, short)


def test_numpy_checker_short_documents(benchmark, short):
    benchmark.group = "check"
    benchmark.name = "numpy_checker_short_documents"
    assert numpy_checker.check(short.batch, short.documents, resolve(POLICY), short.producer) == []
    benchmark(lambda: numpy_checker.check(short.batch, short.documents, resolve(POLICY), short.producer))


def test_pure_checker(benchmark, w):
    benchmark.group = "check"
    _name(benchmark, w, "pure_checker")
    policy = resolve(POLICY)
    assert pure_checker.check(w.batch, w.documents, policy, w.producer) == []
    benchmark.pedantic(lambda: pure_checker.check(w.batch, w.documents, resolve(POLICY), w.producer), rounds=7,
                       iterations=1, warmup_rounds=1)


# ---- the binding's own cost -------------------------------------------------------------------------------

def test_resolve_policy(benchmark):  # the same for both forms of the documents
    benchmark.group = "binding"
    benchmark.name = "resolve_policy"
    benchmark(resolve, POLICY)


def test_canonical_documents(benchmark, w):
    benchmark.group = "binding"
    _name(benchmark, w, "canonical_documents")
    assert len(packoracle.canonical_documents(w.documents)) == len(w.documents)
    benchmark(packoracle.canonical_documents, w.documents)


def test_core_documents(benchmark, w):
    _need("plain_documents")
    benchmark.group = "binding"
    _name(benchmark, w, "core_documents")
    policy = resolve(POLICY)
    assert isinstance(core_documents(w.documents, policy), _core.Documents), "the core's reader gave up"
    benchmark(core_documents, w.documents, policy)


def test_effective_documents(benchmark, w):
    benchmark.group = "binding"
    _name(benchmark, w, "effective_documents")
    docs, policy = packoracle.canonical_documents(w.documents), resolve(POLICY)
    benchmark(_core.effective_documents, docs, policy)


def _canonical(w, policy, documents, spans):
    matcher = None
    batch = w.batch
    if not spans:
        batch = w.without_spans()
        matcher = _batch.SpanMatcher(documents, policy)  # what Microbatches.matcher() builds
    return _batch.canonical_microbatch(batch, where="batch", spans=matcher, producer=w.producer)


@pytest.mark.parametrize("spans", [True, False], ids=["spans", "derived"])
def test_canonical_microbatch(benchmark, w, spans):
    benchmark.group = "binding"
    _name(benchmark, w, "canonical_microbatch" if spans else "span_matcher")
    policy = resolve(POLICY)
    documents = packoracle.canonical_documents(w.documents)
    mb = _canonical(w, policy, documents, spans)
    got = [[(s["doc_uid"], s["start"], s["length"], s["doc_offset"]) for s in row["doc_spans"]] for row in mb["rows"]]
    want = [[(s["doc_uid"], s["start"], s["length"], s["doc_offset"]) for s in row] for row in w.batch["doc_spans"]]
    assert got == want
    benchmark(_canonical, w, policy, documents, spans)


def _view(w, policy, documents, spans):
    matcher = None
    batch = w.batch
    if not spans:
        batch = w.without_spans()
        matcher = _batch.SpanMatcher(documents, policy)
    return _batch.read_batch(batch, where="batch", spans=matcher, step=0, micro_step=0, rank=0, producer=w.producer,
                             ignore=(), policy=policy)


@pytest.mark.parametrize("spans", [True, False], ids=["spans", "derived"])
def test_batch_view(benchmark, w, spans):
    _need("batch_view")
    benchmark.group = "binding"
    _name(benchmark, w, "batch_view" if spans else "batch_view_derived")
    policy = resolve(POLICY)
    documents = packoracle.canonical_documents(w.documents)
    view = _view(w, policy, documents, spans)
    assert isinstance(view, _core.BatchView), "the core's reader gave up on the benchmark batch"
    benchmark(_view, w, policy, documents, spans)


def test_read_microbatches(benchmark, workloads):
    _need("read_microbatches")
    benchmark.group = "binding"
    benchmark.name = "read_microbatches"
    w = workloads["lists"]
    mb = _batch.canonical_microbatch(w.batch, where="batch", producer=w.producer)
    assert _core.read_microbatches([mb]) == 8 * 8192
    benchmark(_core.read_microbatches, [mb])

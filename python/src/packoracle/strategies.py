"""Hypothesis strategies for packing tests, for users who already write Hypothesis tests.

``documents()`` draws the documents a packer is given; ``requests(policy)`` draws whole exec requests of DESIGN §6
(the dict ``packoracle.fuzz`` hands a packer), shaped so that documents pack into rows: most documents are
shorter than the row, so rows often hold two or more of them, and under ``overflow: error`` a document longer
than the row (which the packer must refuse) comes up only now and then. Check what your packer returns with
``packoracle.check_step`` (or ``check_batch``); Hypothesis finds and shrinks the failing case::

    from hypothesis import given
    import packoracle
    from packoracle import strategies

    @given(strategies.requests("reference"))
    def test_my_packer(request):
        docs = [d["tokens"] for d in request["documents"]]
        batch = my_packer(docs, request["row_length"])
        report = packoracle.check_step([batch], request["documents"], request["policy"],
                                       row_length=request["row_length"])
        assert report.ok, report

Hypothesis does the generation and shrinking here (``packoracle.fuzz`` uses the kit's own generator and
shrinker instead); the checks are the kit's in both. Requires the ``hypothesis`` package.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional, Union

try:
    from hypothesis import strategies as st
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("packoracle.strategies needs Hypothesis: pip install hypothesis") from e

from . import _args, _core
from ._policy import Policy

__all__ = ["documents", "requests", "target_losses"]

VocabLike = Union[int, "st.SearchStrategy[int]"]


def _tokens(vocab: VocabLike, where: str = "strategies") -> "st.SearchStrategy[int]":
    """The token ids: range(vocab), or the given strategy."""
    if isinstance(vocab, st.SearchStrategy):
        return vocab
    return st.integers(0, _args.integer(vocab, where, "vocab (a number of token ids, or a strategy of ints)", 1) - 1)


def _supervised(n: int, prompt_masking: bool) -> "st.SearchStrategy[list[int]]":
    """All tokens supervised, or (prompt masking) an unsupervised prompt prefix followed by supervised ones."""
    if not prompt_masking or n == 0:
        return st.just([1] * n)
    return st.integers(0, n).map(lambda prompt: [0] * prompt + [1] * (n - prompt))


@st.composite
def _document(draw: st.DrawFn, uid: str, length: "st.SearchStrategy[int]", vocab: VocabLike,
              prompt_masking: bool) -> dict:
    n = draw(length)
    tokens = draw(st.lists(_tokens(vocab), min_size=n, max_size=n))
    return {"doc_uid": uid, "tokens": tokens, "supervised": draw(_supervised(n, prompt_masking))}


MAX_SIZE = 2**20  # a strategy that would draw more than a million of anything is a mistake, not a plan


def _check_size(where: str, name: str, value: Any, minimum: int = 0, maximum: int = MAX_SIZE) -> int:
    """An integer in [minimum, maximum] (a numpy integer is one; a bool is not): TypeError or ValueError naming it."""
    return _args.integer(value, where, name, minimum, maximum)


def documents(min_size: int = 0, max_size: int = 8, *, min_tokens: int = 0, max_tokens: int = 8,
              vocab: VocabLike = 8, prompt_masking: bool = False) -> "st.SearchStrategy[list[dict]]":
    """A list of ``min_size`` to ``max_size`` documents, each a dict as the exec request carries it:
    ``{"doc_uid": "d0", "tokens": [3, 1, 4], "supervised": [1, 1, 1]}`` (uids ``d0``, ``d1``, ... by position).

    - ``min_tokens``/``max_tokens``: the length of each document (empty documents are allowed by default);
    - ``vocab``: the token ids, ``range(vocab)`` (a small vocabulary makes documents share tokens, which is
      where packers that find boundaries by looking at token values go wrong), or a strategy of ints;
    - ``prompt_masking``: give documents an unsupervised prefix (a prompt): ``supervised`` 0 there.

    Every form ``packoracle.check_batch`` takes for documents accepts the result as it is::

        @given(strategies.documents(min_size=1))
        def test_pack(docs):
            batch = my_packer([d["tokens"] for d in docs], 16)
            assert packoracle.check_batch(batch, docs, "reference", row_length=16).ok
    """
    at = "strategies.documents"
    min_size = _check_size(at, "min_size", min_size)
    max_size = _check_size(at, "max_size", max_size, min_size)
    min_tokens = _check_size(at, "min_tokens", min_tokens)
    max_tokens = _check_size(at, "max_tokens", max_tokens, min_tokens)
    prompt_masking = _args.flag(prompt_masking, at, "prompt_masking")
    _tokens(vocab, at)  # validated now
    vocab = _args.plain(vocab)
    length = st.integers(min_tokens, max_tokens)

    @st.composite
    def draw_documents(draw: st.DrawFn) -> list[dict]:
        n = draw(st.integers(min_size, max_size))
        return [draw(_document(f"d{k}", length, vocab, prompt_masking)) for k in range(n)]
    return draw_documents()


def target_losses(docs: list, policy: Mapping[str, Any]) -> "st.SearchStrategy[dict]":
    """``target_losses`` for ``docs`` under ``policy``: per uid, one loss per token of the document as the
    policy's delimiters make it (bos and eos included), multiples of 1/8 in [0, 4] so that sums are exact."""
    extra = _delimiters(policy)
    loss = st.integers(0, 32).map(lambda k: k / 8)
    return st.fixed_dictionaries({
        d["doc_uid"]: st.lists(loss, min_size=len(d["tokens"]) + extra, max_size=len(d["tokens"]) + extra)
        for d in docs})


def _delimiters(policy: Mapping[str, Any]) -> int:
    """How many tokens the policy's delimiters add to a document: the core's Effective, on an empty one."""
    return len(_core.effective_documents([{"doc_uid": "d", "tokens": []}], dict(policy))[0]["tokens"])


def _policy_strategy(policy: Any) -> "st.SearchStrategy[dict]":
    if isinstance(policy, st.SearchStrategy):
        return policy.map(lambda p: Policy(p).to_dict())
    if isinstance(policy, (list, tuple)):
        if not policy:
            raise ValueError("requests: give at least one policy")
        return st.sampled_from([Policy(p).to_dict() for p in policy])
    return st.just(Policy(policy).to_dict())  # validated now: a bad policy is a ValueError at definition


def requests(policy: Any = "reference", *, min_row_length: int = 1, max_row_length: int = 16,
             max_documents: int = 8, vocab: VocabLike = 8, prompt_masking: bool = False,
             max_micro_batch_rows: int = 3, max_dp_world_size: int = 2,
             overlong: Optional[bool] = None) -> "st.SearchStrategy[dict]":
    """Exec requests of DESIGN §6 under ``policy`` (a preset name, a dict of keys, a ``packoracle.Policy``, a
    list of them to choose from, or a strategy of them), as the dict ``packoracle.fuzz`` gives a packer::

        {"record": "request", "id": 3, "row_length": 8, "micro_batch_rows": 2, "dp_world_size": 1,
         "policy": {...every key, resolved...}, "documents": [{"doc_uid": "d0", "tokens": [...],
         "supervised": [...]}, ...], "target_losses": {"d0": [...], ...}}

    - ``row_length`` between ``min_row_length`` and ``max_row_length``; up to ``max_documents`` documents;
    - document lengths: mostly at most half the row (so that rows hold several documents), sometimes up to the
      whole row (delimiters counted), and now and then longer than the row (``overlong``: always allowed under
      ``overflow`` truncate, split or drop, rare under ``error``, where the packer must refuse; ``overlong=False``
      never draws one, ``True`` as often as under truncate and split);
    - ``micro_batch_rows`` in 1..``max_micro_batch_rows``, ``dp_world_size`` in 1..``max_dp_world_size``;
    - ``target_losses`` as :func:`target_losses` draws them; ``vocab`` and ``prompt_masking`` as for
      :func:`documents`.

    Hypothesis shrinks towards fewer, shorter documents, a shorter row and one micro-batch row::

        @given(strategies.requests("hf-flatten", max_row_length=12))
        def test_collator(request): ...
    """
    at = "strategies.requests"
    min_row_length = _check_size(at, "min_row_length", min_row_length, 1, _args.MAX_ROW_LENGTH)
    max_row_length = _check_size(at, "max_row_length", max_row_length, min_row_length, _args.MAX_ROW_LENGTH)
    max_documents = _check_size(at, "max_documents", max_documents)
    max_micro_batch_rows = _check_size(at, "max_micro_batch_rows", max_micro_batch_rows, 1)
    max_dp_world_size = _check_size(at, "max_dp_world_size", max_dp_world_size, 1)
    prompt_masking = _args.flag(prompt_masking, at, "prompt_masking")
    if overlong is not None:
        overlong = _args.flag(overlong, at, "overlong")
    _tokens(vocab, at)  # validated now
    vocab = _args.plain(vocab)
    policies = _policy_strategy(policy)

    @st.composite
    def draw_request(draw: st.DrawFn) -> dict:
        resolved = draw(policies)
        L = draw(st.integers(min_row_length, max_row_length))
        extra = _delimiters(resolved)
        room = max(L - extra, 0)  # document tokens that fit in a row beside the delimiters
        allow_long = overlong if overlong is not None else resolved.get("overflow") != "error"
        # 0-5: at most half the row, 6-8: up to the whole row, 9: longer than the row (if allowed); Hypothesis
        # shrinks the choice towards 0, i.e. towards short documents.
        top = 9 if allow_long else 8
        lengths = st.integers(0, top).flatmap(
            lambda c: st.integers(0, max(room // 2, min(room, 1))) if c <= 5 else
            st.integers(0, room) if c <= 8 else
            st.integers(room + 1, room + 1 + max(L, 2)))
        rare_long = overlong is None and not allow_long
        n = draw(st.integers(0, max_documents))
        docs = []
        for k in range(n):
            if rare_long and draw(st.integers(0, 31)) == 13:  # under overflow: error, about one document in 32
                length = st.integers(room + 1, room + 1 + max(L // 2, 1))
            else:
                length = lengths
            docs.append(draw(_document(f"d{k}", length, vocab, prompt_masking)))
        return {"record": "request", "id": draw(st.integers(0, 2**31 - 1)), "row_length": L,
                "micro_batch_rows": draw(st.integers(1, max_micro_batch_rows)),
                "dp_world_size": draw(st.integers(1, max_dp_world_size)), "policy": resolved, "documents": docs,
                "target_losses": draw(target_losses(docs, resolved))}
    return draw_request()

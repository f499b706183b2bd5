"""packoracle.fuzz: a Python packer, loss reducer or attention consumer driven in-process by the kit's
generation and shrinking (the exec protocol of DESIGN §6, with Python objects instead of JSON lines)."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
import time as _time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional, TypedDict

from . import _core, _drivers, _fuzz_args
from ._arrays import is_tensor
from ._batch import Microbatches
from ._drivers import (_PASS_THROUGH, _Hung, _consumer_driver, _microbatch_consumer_driver,  # noqa: F401
                       _reducer_driver)
from ._policy import PolicyLike, as_written, resolve
from ._values import step_viewer, value_consumer_driver

DEFAULT_CASES = 1000  # as `packoracle fuzz`
# The bounds the cases grow to, as `packoracle fuzz` has them (rows of 8,192 slots, 512 documents a case).
DEFAULT_MAX_ROW_LENGTH: int = _core.DEFAULT_FUZZ_MAX_ROW_LENGTH
DEFAULT_MAX_DOCUMENTS: int = _core.DEFAULT_FUZZ_MAX_DOCUMENTS
# Small cases (rows of at most 16 slots, 8 documents a case): the bounds of the runs that drive real models
# (the conformance matrix's consumer column, guard.check_model), where a row costs a forward pass.
class CaseBounds(TypedDict):
    """fuzz()'s max_row_length and max_documents, as keyword arguments (``fuzz(..., **SMALL_CASES)``)."""

    max_row_length: int
    max_documents: int


SMALL_CASES: CaseBounds = {"max_row_length": 16, "max_documents": 8}
DEFAULT_SEED = 20261129
# Seconds a callable has for one answer. `packoracle fuzz --exec` gives 10; in-process callables include real
# models whose first call may build or compile, so more.
DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 86400.0  # as --timeout


class Refuse(Exception):
    """Raised by a packer to refuse a request (the exec protocol's `error` record): right exactly when the
    policy demands a refusal, e.g. a document longer than the row under ``overflow: error``."""


class Counterexample(AssertionError):
    """A case the candidate fails, shrunk to a minimal one. ``str()`` is the kit's whole report (the broken
    invariant, the policy, the documents, the drawn rows) and ends with the line that replays it.

    The report's sections are attributes, so that a front end picks what it shows instead of cutting the text:
    ``headline`` (the first line: the user's call and the broken invariant), ``violations`` (every violation of
    the minimal case as ``(invariant, message)``, the headline's first), ``minimal_case_text`` (the minimal case
    as the report prints it: policy, step, documents), ``drawn`` (the rows involved and the attention grid, as
    drawn), ``totals`` (denominators and losses; "" when the report has none), ``report`` (every section but the
    replay line: ``str()`` without it), ``reproduce`` (the ``v1:`` string) and ``replay`` (the call that replays
    it). Also: ``invariant`` (the broken one's name), ``request`` (the minimal case, as the packer was handed it;
    ``minimal_case`` is the same dict), ``regression`` (the file it was saved to, if any), ``cases`` (1-based
    index of the first failing case of the run) and ``shrinks`` (shrink steps from that case to the minimal one).
    ``sections`` is the failure's ``"sections"`` as ``packoracle fuzz --format json`` holds them (plus ``report``);
    built by hand without them, the section attributes are empty and ``report`` is the text."""

    def __init__(self, text: str, *, invariant: Optional[str], reproduce: str, replay: str,
                 request: Optional[dict], regression: Optional[str] = None, cases: int = 0, shrinks: int = 0,
                 sections: Optional[Mapping[str, Any]] = None):
        super().__init__(text)
        self.invariant = invariant
        self.reproduce = reproduce
        self.replay = replay
        self.request = request
        self.regression = regression
        self.cases = cases
        self.shrinks = shrinks
        s = sections or {}
        self.headline: str = s.get("headline", "")
        self.violations: list[tuple[str, str]] = [(v["invariant"], v["message"]) for v in s.get("violations", ())]
        self.minimal_case_text: str = s.get("minimal_case", "")
        self.drawn: str = s.get("drawn", "")
        self.totals: str = s.get("totals", "")
        self.report: str = s.get("report", text)

    @property
    def minimal_case(self) -> Optional[dict]:
        """The minimal failing case (the request a packer is handed): ``request`` by its role's name."""
        return self.request


def _hidden_from_pytest(excinfo: Any) -> bool:
    """fuzz's ``__tracebackhide__``: pytest leaves fuzz's frame out of a failing test's traceback when the failure
    is a Counterexample, the kit's verdict on the user's code whose message is the whole report: the traceback
    ends at the user's call instead of showing fuzz's source. Any other exception out of fuzz (a bad argument, a
    bug of the kit's) keeps the frame. pytest 7 may hand None for the ExceptionInfo."""
    return excinfo is not None and isinstance(excinfo.value, Counterexample)


@dataclass(frozen=True)
class FuzzResult:
    """A run in which every case passed."""

    cases: int
    seconds: float
    checked: tuple[str, ...]
    not_applicable: tuple[str, ...]
    profiles: tuple[str, ...] = ()
    objective_gap: str = ""  # under a declared non-global objective: how far it was from the token mean
    stopped_by: str = "cases"  # "cases", or "time" when the time budget ended the run
    # fuzz(stats=True): what was generated, as `packoracle fuzz --format json` holds it under "generated"
    # (documents per case and per row, row lengths, tokens: median / p90 / max; shares), else None
    generated: Optional[dict] = None
    # What the attention consumer computed against what the declared rule needs, where it said (a micro-batch
    # consumer returning packoracle.Computed): {"computed": pairs, "required": pairs, "utilization": their ratio},
    # summed over the checked cases (DESIGN §4 efficiency); else None
    consumer_work: Optional[dict] = None

    @property
    def cases_per_second(self) -> float:
        return self.cases / self.seconds if self.seconds > 0 else float("inf")

    def __str__(self) -> str:
        """What a person reads: how much ran, what was checked, and what was not and how to make it checkable."""
        lines = [f"{self.cases} cases passed in {self.seconds:.2f} s (stopped by {self.stopped_by}); checked: "
                 f"{', '.join(self.checked) or 'nothing'}"]
        for invariant in self.not_applicable:
            lines.append(f"  not checked: {invariant} ({_HOW_TO_CHECK.get(invariant, 'not applicable to these roles')})")
        if self.consumer_work:
            w = self.consumer_work
            lines.append(f"  consumer work: {w['computed']} (query, key) pairs computed, {w['required']} needed by the "
                         f"declared attention: utilization {w['utilization']:.3f}")
        return "\n".join(lines)


# Why an invariant was not checked, and what makes it checkable (FuzzResult's text).
_HOW_TO_CHECK = {
    "shape": "give a packer", "coverage": "give a packer", "segments": "give a packer",
    "positions": "give a packer", "targets": "give a packer", "determinism": "give a packer",
    "denominator": "give reducer=, or return producer totals with each micro-batch",
    "loss": "give reducer=, or return producer totals with each micro-batch",
    "gradient": "give reducer= and gradient=True, the reducer returning the tensor it backpropagates",
    "attention": "give microbatch_consumer= (or consumer=) for the code that turns a batch into attention",
    "packing_invariance": "needs a packer or a consumer, and decoder=True",
    "efficiency": "reported; to check it, give a policy that promises it (\"efficiency\": \"no_mergeable_rows\", "
                  "or \"consumer_overhead\": p for a consumer that returns packoracle.Computed)",
}


class _Deadline:
    """The deadline of each answer of the callables fuzz drives in-process, as `fuzz --exec --timeout` has:
    ``timeout`` seconds, and after a first hang 20 times the slowest answer so far (at least 0.5 s, at most
    the timeout), so that shrinking a hang takes seconds, not timeouts.

    Enforced with SIGALRM (an interval timer) in the main thread, where the callable's Python code is stopped
    at its next bytecode, a ``time.sleep`` at once. Not enforced off the main thread, on a platform without
    setitimer, or while another timer is armed (pytest-timeout's signal method): its timer wins."""

    def __init__(self, timeout: Optional[float]):
        self.timeout = timeout
        self.slowest = 0.0
        self.hung = False

    def allowed(self) -> float:
        assert self.timeout is not None
        return min(self.timeout, max(0.5, 20 * self.slowest)) if self.hung else self.timeout

    def _enforceable(self) -> bool:
        return (self.timeout is not None and hasattr(signal, "setitimer")
                and threading.current_thread() is threading.main_thread()
                and signal.getitimer(signal.ITIMER_REAL)[0] == 0)

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        if not self._enforceable():
            yield
            return
        allowed = self.allowed()

        def expire(signum: int, frame: Any) -> None:
            raise _Hung(allowed)

        previous = signal.signal(signal.SIGALRM, expire)
        start = _time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, allowed)
        try:
            yield
            self.slowest = max(self.slowest, _time.perf_counter() - start)
        except _Hung:
            self.hung = True
            raise
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)


def _timed(drive: Callable[..., tuple], role: str, deadline: _Deadline) -> Callable[..., tuple]:
    """The driver with the deadline: an answer that does not come in time fails that case with the stack where
    the callable was stopped."""
    def timed(*args: Any) -> tuple:
        try:
            with deadline.running():
                return drive(*args)
        except _Hung as hung:
            allowed = hung.args[0]
            why = (f"fuzz(timeout={deadline.timeout:g})" if allowed >= (deadline.timeout or 0) else
                   f"the deadline after an earlier hang: 20x the slowest answer, at least 0.5 s, at most "
                   f"timeout={deadline.timeout:g}")
            return ("fault", f"the {role} gave no answer within {allowed:g} s ({why}); it was stopped here:\n"
                    + _stack_outside_the_kit(hung.__traceback__))
    return timed


def _stack_outside_the_kit(tb: Any) -> str:
    """The traceback's frames that are not this module's (the user's code, where it was stopped)."""
    kit = {__file__, _drivers.__file__}
    frames = [f for f in traceback.extract_tb(tb) if f.filename not in kit]
    return "Traceback (most recent call last):\n" + "".join(traceback.format_list(frames))


def _packer_driver(packer: Callable[[dict], Any], emitted: Optional[list] = None) -> Callable[[dict], tuple]:
    """Drives ``packer(request)``; `emitted` (fuzz(step_view=True)) keeps its latest answer as it returned it,
    for the consumers' step view: CheckCase hands the consumer the micro-batches of the packer's latest answer."""
    def drive(request: dict) -> tuple:
        try:
            answer = packer(request)
            if emitted is not None:
                emitted[:] = [answer]
        except Refuse as e:
            return ("refuse", str(e) or "refused")
        except _PASS_THROUGH:
            raise
        except BaseException:
            return ("fault", "the packer raised an exception:\n" + traceback.format_exc())
        try:
            return ("ok", Microbatches(request["documents"], request["policy"]).read(answer))
        except (TypeError, ValueError) as e:
            return ("fault", f"the packer returned something that is not a packed batch: {e}")
        except _PASS_THROUGH:
            raise
        except BaseException:  # raised by the answer's own code (a Mapping's items(), an __array__): its fault
            return ("fault", "reading the packer's answer raised an exception:\n" + traceback.format_exc())
    return drive


def _name_of(obj: Any) -> str:
    return getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__name__


def fuzz(packer: Optional[Callable[[dict], Any]], policy: PolicyLike, *, cases: Optional[int] = None,
         seed: Optional[int] = None, time: Optional[float] = None, reducer: Optional[Callable[[dict], Any]] = None,
         consumer: Optional[Callable[[dict, dict], Any]] = None, reproduce: Optional[str] = None,
         max_row_length: int = DEFAULT_MAX_ROW_LENGTH, max_documents: int = DEFAULT_MAX_DOCUMENTS,
         decoder: bool = True, save_regressions: Optional[str] = None,
         name: Optional[str] = None, sft_masks: bool = True,
         microbatch_consumer: Optional[Callable[[dict, dict], Any]] = None,
         timeout: Optional[float] = DEFAULT_TIMEOUT, gradient: bool = False, stats: bool = False,
         exec_reducer: Optional[str] = None, exec_consumer: Optional[str] = None,
         value_consumer: Optional[Callable[[dict, dict], Any]] = None,
         value_tolerance: Optional[tuple[float, float]] = None, step_view: bool = False,
         optimizer_steps: int = 1, select_top_fraction: float = 1.0, exec_packer: Optional[str] = None,
         exec_value_consumer: Optional[str] = None) -> FuzzResult:
    """Checks a Python packer (and/or loss reducer, attention consumer) against generated cases.

    ``packer(request)`` gets the request of DESIGN §6 as a dict (``id``, ``row_length``, ``micro_batch_rows``,
    ``dp_world_size``, ``policy``, ``documents`` [{"doc_uid", "tokens", "supervised"}], ``target_losses``)
    and returns its micro-batches: a list of dicts, each either a ``microbatch`` record of §5 (``rows``,
    ``micro_step``, ``rank``, ``producer``) or a batch in the producer's own field names (``input_ids``,
    ``labels``, ``position_ids``, ``cu_seq_lens_q``, ...; tensors, arrays or lists), whose ``doc_spans`` are
    derived from the documents when absent. It raises ``packoracle.Refuse(message)`` to refuse. Any other
    exception, or an answer that is not a packed batch, fails that case (its traceback is in the report).

    ``reducer(request)`` gets {"policy", "dp_world_size", "grad_accum_steps", "optimizer_steps",
    "context_parallel_size", "context_parallel_scheme", "cp_shards", "microbatches", "slot_losses"} and returns
    one {"loss_sum", "denominator", "denominator_scope", "loss"} per micro-batch (any non-empty subset, with the scope exactly
    when a denominator is given), its whole CP group's. ``cp_shards[m][r][k]``: the ``(start, end)`` slot ranges
    CP rank k holds of row r of micro-batch m (docs/python.md, "Context parallelism"; CP 2, 4, 8 drawn).
    With ``gradient=True`` (needs torch) each ``slot_losses[m][r]`` is a float64 leaf tensor with
    ``requires_grad``, and a micro-batch's dict may carry ``"backward"``: the 0-dim tensor the reducer would call
    ``backward()`` on (by default its ``"loss"``, when that is a tensor with a gradient). The kit backpropagates
    every micro-batch's and checks that each target's loss gets the gradient the declared objective gives it,
    m / Σm over the step under global_targets (the ``gradient`` invariant; the backward tensors combine as the
    losses do). A reducer without a backward tensor has ``gradient`` not checked (``FuzzResult.not_applicable``).
    ``optimizer_steps=K`` (K > 1) states a schedule: the reducer gets each case's step as one generation batch
    feeding K optimizer steps in turn (GRPO/PPO ``steps_per_generation`` > gradient accumulation), the request's
    ``optimizer_steps`` and ``grad_accum_steps`` (the micro-steps of each, ⌈M/K⌉ of the step's M): micro-batch m
    feeds optimizer step ``micro_step // grad_accum_steps``, and its totals must give every optimizer step the
    declared objective over that step alone (a denominator counted over the whole generation batch fails
    ``denominator``). The request always holds ``optimizer_steps`` (1 without a schedule).
    ``select_top_fraction=q`` (0 < q < 1) declares a selection inside the objective (RL recipes keeping the
    top-20% entropy tokens): of each optimizer step's targets (all its micro-batches; the whole step without a
    schedule) only the ⌈q·n⌉ with the highest scores count, the scores the kit's, one per slot in the request's
    ``slot_scores[m][r][slot]`` (indexed as ``slot_losses``; distinct, so no tie to break; oracle/selection.h),
    and the request's ``selection`` says the rule, ``{"top_fraction": q, "scope": "optimizer_step"}``. Both keys
    are there only under a selection. The totals must give the objective over the selected targets alone
    (Σ of their losses / their number under global_targets), whatever the split: a threshold taken per
    micro-batch fails ``denominator`` where it keeps another number of targets, ``loss`` where other ones.

    ``microbatch_consumer(microbatch, policy)`` is an attention consumer (the code that turns a packed batch into
    attention: a model's mask construction, an attention path): it gets a whole micro-batch (the ``microbatch``
    record of §5: ``rows``, each a dict of 1-D arrays in the producer's field names, with ``micro_step`` and
    ``rank``) and returns, per row, what that row really attends with: an n × n mask (1: query i may attend
    key j), n per-slot segment ids (causal within a segment, as a varlen kernel reads them), a mask function
    ``(q, k)`` or FlexAttention ``mask_mod(b, h, q, k)``, or a torch ``BlockMask`` (one for the whole batch
    may be returned alone). ``consumer(row, policy)`` is the per-row shorthand. Without a packer the kit's
    reference packer produces the rows. A consumer that raises, or answers with a wrong shape or a NaN, fails
    that case, named in the report.

    ``value_consumer(microbatch, policy)`` answers what a model computes, not what it attends with: per-position
    output values (logits, hidden states) for every row, a rows × n × features tensor or array (or rows × n, or
    one per row). The kit runs each document piece alone (a micro-batch of one row holding only that piece, in
    the same encodings: ``cu_seqlens`` [0, n], its own positions) through the same callable and compares each
    piece's values, packed against alone, within ``value_tolerance`` = (absolute, relative) (default (1e-5,
    1e-4): |a − b| ≤ absolute + relative·max(|a|, |b|)): ``packing_invariance`` at the value level, for any
    model (policies that promise isolation: doc_causal attention, doc_reset positions; rows of at most 256
    slots). With ``gradient=True`` the consumer must have ``parameters()`` (a torch Module): the kit
    backpropagates a probe loss Σ u_i Σ_f c_f out[i, f] (u_i fixed per document token, 0 on padding; c_f = 1 +
    f mod 4) over the packed micro-batch and over each piece alone, and the packed parameter gradient must equal
    the sum of the pieces' (``gradient``): a NaN gradient row past cu_seqlens[-1] is caught there.

    ``step_view=True``: ``microbatch_consumer`` and ``value_consumer`` get a third argument, the step around the
    micro-batch (packoracle.StepView): ``step["emitted"]``, the micro-batch exactly as the packer returned it
    (its own field names and nesting; None where the kit's reference packer made the rows, or for a piece
    alone), and ``step["layout"]``: ``microbatch`` (its index; -1 for a piece alone), ``dp_rank``,
    ``dp_world_size``, ``micro_step``, ``micro_steps`` (its rank's micro-batches in the step),
    ``context_parallel_size`` (2, 4 or 8, drawn per case as for reducers), ``context_parallel_scheme``
    (``contiguous`` or ``load_balanced``) and ``cp_shards[row][cp rank]``, the (start, end) slot ranges each CP
    rank holds (docs/python.md, "Context parallelism").

    Runs ``cases`` cases (default 1000), or as many as fit in ``time`` seconds, in batches of 32 exactly as
    ``packoracle fuzz --cases N --seed S`` does (each batch with its own derived seed and fuzzing profile);
    ``seed`` fixes them. The cases are the command line's: every profile (``large`` among them), sizes that
    climb over the run's first 2,048 cases (all of them in a shorter run) to rows of ``max_row_length`` slots
    (default 8,192) and ``max_documents`` documents a case (default 512), steps of up to about 65,536 slots.
    A default run of a plain Python packer (lists or numpy, the README's) checks about 130 cases a second: 1000
    cases take about 8 s of one core; give ``max_row_length=16, max_documents=8`` (or ``time=``) for seconds-long runs of
    small cases. A loss reducer gets the same steps, and so does a consumer answering segment ids; one answering
    a mask function, ``mask_mod`` or ``BlockMask`` gets rows of up to 4,096 slots, dense masks 512, but for one
    case in 32 with rows of full length, one a micro-batch (docs/python.md, "Consumers at real row lengths"). Returns a FuzzResult when every case passes; raises ``Counterexample`` (an
    AssertionError) with the minimal failing case and a replay line (``reproduce="v1:..."`` replays exactly that
    case). ``save_regressions`` keeps the minimal case as a regression file there (the fixtures/regressions
    format). ``sft_masks=False`` generates documents whose every token is supervised, for packers that take no
    per-token supervision (pretraining datasets such as Megatron's GPTDataset); a reproduce string depends on it, as on ``max_row_length`` and
    ``max_documents``. ``stats=True`` measures every generated case (``FuzzResult.generated``).

    ``exec_reducer`` / ``exec_consumer`` / ``exec_value_consumer``: a command (run with /bin/sh -c) whose process
    is the loss reducer, the attention consumer or the value consumer, driven over the exec protocol (DESIGN §6,
    "Other roles"), for a callable that lives in another interpreter (another venv): there, ``python -m
    packoracle.exec_server --reducer module:function`` (``--microbatch-consumer``, ``--value-consumer``, with
    ``--step-view`` as step_view=True here; or ``packoracle.exec_server.serve(reducer=f)``) serves the same
    callable ``reducer=`` takes here. Its faults (an exception, a crash, a hang past ``timeout``, then the
    adaptive deadline) fail the case under ``loss`` / ``attention`` / ``packing_invariance``, the process
    restarted for the next case; the replay line repeats the command. With ``gradient=True`` the exec value
    consumer is asked for its parameter gradient too (its server answers from ``parameters()``).
    ``exec_packer``: the packer as such a process (``packoracle fuzz --exec``'s candidate, the request and
    records of §6); ``step_view=True`` then hands the consumers, as ``step["emitted"]``, the microbatch record
    exactly as the child wrote it (its own extra fields and nesting).

    ``timeout``: the seconds each answer of a callable may take (default 60; None: no deadline). One that
    does not come in time fails that case with the stack where the callable was stopped, and the cases that
    follow get 20 times the slowest answer so far (at least 0.5 s), so that a hang is shrunk in seconds. The
    deadline is kept in the main thread (SIGALRM); off it, or while another SIGALRM timer is armed, it is not.
    The exec roles' answers have the same ``timeout`` (their process's first answer includes its start-up: an
    interpreter importing its library), kept by the exec channel (None: 86,400 s).

    Raises TypeError or ValueError naming the argument for a bad argument (an integer that is not one or is
    out of its range, a time that is not a finite number of seconds, an empty reproduce string)."""
    __tracebackhide__ = _hidden_from_pytest  # noqa: F841 (pytest reads it from the frame)
    roles = _fuzz_args.Roles(packer, reducer, consumer, microbatch_consumer, value_consumer)
    a = _fuzz_args.checked(
        roles, cases=cases, seed=seed, time=time, reproduce=reproduce, max_row_length=max_row_length,
        max_documents=max_documents, decoder=decoder, save_regressions=save_regressions, name=name,
        sft_masks=sft_masks, timeout=timeout, gradient=gradient, stats=stats, exec_reducer=exec_reducer,
        exec_consumer=exec_consumer, value_tolerance=value_tolerance, step_view=step_view,
        optimizer_steps=optimizer_steps, select_top_fraction=select_top_fraction, max_timeout=MAX_TIMEOUT,
        exec_packer=exec_packer, exec_value_consumer=exec_value_consumer)
    resolved = resolve(policy)
    label = a.name or "+".join(_name_of(f) for f in roles.given())
    emitted: Optional[list] = [] if a.step_view else None
    step_of = step_viewer(emitted) if emitted is not None else None
    consumer_driver = (_microbatch_consumer_driver(microbatch_consumer, step_of) if microbatch_consumer is not None
                       else _consumer_driver(consumer) if consumer is not None else None)
    deadline = _Deadline(a.timeout)
    drivers = (_timed(_packer_driver(packer, emitted), "packer", deadline) if packer is not None else None,
               _timed(_reducer_driver(reducer, a.gradient), "loss reducer", deadline) if reducer is not None
               else None,
               _timed(consumer_driver, "attention consumer", deadline) if consumer_driver is not None else None)

    options = _core_options(a)
    call = _the_call(packer, reducer, consumer, policy, resolved, options, microbatch_consumer, a.gradient,
                     value_consumer, a.value_tolerance, a.step_view)
    replay = _replay_line(call)
    options["headline"] = call.headline
    values: dict[str, Any] = {} if value_consumer is None else {  # the value consumer's driver (_values.py)
        "values": _timed(value_consumer_driver(value_consumer, a.parameters, step_of), "value consumer", deadline),
        "value_tolerance": a.value_tolerance, "value_gradients": bool(a.parameters)}
    if a.exec_value_consumer is not None:  # its tolerance and gradient=True, for the exec role the core starts
        values = {"value_tolerance": a.value_tolerance, "value_gradients": a.gradient}
    if emitted is not None and a.exec_packer is not None:
        values["emitted"] = emitted  # the core keeps the exec packer's latest records there (the step view's)
    result = _core.fuzz(label, *drivers, resolved, options, microbatch_consumer=microbatch_consumer is not None,
                        **values)
    if not result["passed"]:
        raise _counterexample(result, replay.replace("{}", result["reproduce"]))
    return _fuzz_result(result)


def _core_options(a: _fuzz_args.FuzzArgs) -> dict:
    """The options _core.fuzz reads (jobs::kFuzzOptions), from fuzz()'s checked arguments."""
    return {"cases": a.cases, "seed": DEFAULT_SEED if a.seed is None else a.seed, "time": a.time,
            "reproduce": a.reproduce, "max_row_length": a.max_row_length, "max_documents": a.max_documents,
            "decoder": a.decoder, "save_regressions": a.save_regressions, "sft_masks": a.sft_masks,
            "stats": a.stats, "exec_reducer": a.exec_reducer or "", "exec_consumer": a.exec_consumer or "",
            "exec_packer": a.exec_packer or "", "exec_value_consumer": a.exec_value_consumer or "",
            "optimizer_steps": a.optimizer_steps, "select_top_fraction": a.select_top_fraction,
            # the exec roles' deadline (jobs::kFuzzOptions maps it to exec_timeout): no deadline is the longest
            "timeout": MAX_TIMEOUT if a.timeout is None else a.timeout}


def _fuzz_result(result: dict) -> FuzzResult:
    """The FuzzResult of a passing run (_core.fuzz's result)."""
    checked = tuple(result["checked"])
    return FuzzResult(cases=result["cases"], seconds=result["seconds"], checked=checked,
                      not_applicable=tuple(i for i in _core.invariants() if i not in checked),
                      profiles=tuple(result["profiles"]), objective_gap=result["gap"],
                      stopped_by=result["stopped_by"],
                      generated=json.loads(result["generated"]) if result["generated"] else None,
                      consumer_work=result["consumer_work"])


def _import_path(obj: Any) -> Optional[tuple[str, str]]:
    """(module, qualname) when `from module import <first part of qualname>` gives `obj` back by its qualname
    (a function or class at a module's top level, or what one wraps with functools.wraps); ("__main__", name)
    for one defined in the running script; None for a lambda, a closure, an instance, a partial or a bound
    method, which no import reaches."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return None
    target: Any = sys.modules.get(module)
    for part in qualname.split("."):
        target = getattr(target, part, None)
    wrapped = getattr(obj, "__wrapped__", None)
    if target is None or not (target is obj or (wrapped is not None and target is wrapped)):
        return None
    return module, qualname


def _counterexample(result: dict, replay: str) -> Counterexample:
    """The Counterexample of a failed run (_core.fuzz's result): the core's report as sections and as text (its
    rendering of them), then this front end's own section, the replay line."""
    return Counterexample(result["text"] + f"Replay: {replay}\n", invariant=result["invariant"],
                          reproduce=result["reproduce"], replay=replay, request=result["counterexample"],
                          regression=result["regression"], cases=result["cases_to_failure"], shrinks=result["shrinks"],
                          sections=dict(json.loads(result["sections"]), report=result["text"]))


@dataclass(frozen=True)
class _Call:
    """The user's packoracle.fuzz call as a line shows it: its arguments (roles by import path where one
    reaches them, else by name), the imports that line needs, and the roles no import reaches."""

    args: tuple[str, ...]
    imports: dict
    unreachable: tuple[str, ...]

    @property
    def headline(self) -> str:
        """What a failure's first line names: the call, as the user made it."""
        return f"packoracle.fuzz({', '.join(self.args)})"


def _the_call(packer: Optional[Callable[..., Any]], reducer: Optional[Callable[..., Any]],
              consumer: Optional[Callable[..., Any]], policy: PolicyLike, resolved: dict, options: Mapping[str, Any],
              microbatch_consumer: Optional[Callable[..., Any]] = None, gradient: bool = False,
              value_consumer: Optional[Callable[..., Any]] = None,
              value_tolerance: Optional[tuple[float, float]] = None, step_view: bool = False) -> _Call:
    """The call with the same roles, policy and the options a reproduce string depends on (`options`: the run's,
    as _core.fuzz takes them; those the table marks replayed are repeated where not at their defaults)."""
    roles = [("", packer), ("reducer=", reducer), ("consumer=", consumer), ("microbatch_consumer=", microbatch_consumer),
             ("value_consumer=", value_consumer)]
    paths = {key: _import_path(role) for key, role in roles if role is not None}
    unreachable = tuple(_name_of(role) for key, role in roles if role is not None and paths[key] is None)
    imports: dict[str, list[str]] = {}
    for module, qualname in (p for p in paths.values() if p is not None and p[0] != "__main__"):
        names = imports.setdefault(module, [])
        if qualname.split(".")[0] not in names:
            names.append(qualname.split(".")[0])
    packer_path = paths.get("")
    args = [packer_path[1] if packer_path else "None" if packer is None else _name_of(packer),
            repr(policy) if isinstance(policy, str) else repr(as_written(policy)) if isinstance(policy, Mapping)
            else repr(resolved)]  # a dict as a person writes it (its preset and the keys changed) resolves the same
    for key, role in roles[1:]:
        if role is not None:
            path = paths[key]
            args.append(f"{key}{path[1] if path else _name_of(role)}")
    for entry in _core.fuzz_options():  # jobs::kFuzzOptions
        keyword = entry["keyword"]
        if entry["replayed"] and keyword and options[keyword] != entry["default"]:
            args.append(f"{keyword}={options[keyword]!r}")
    if gradient:
        args.append("gradient=True")
    if value_tolerance is not None:
        args.append(f"value_tolerance={value_tolerance!r}")
    if step_view:
        args.append("step_view=True")
    return _Call(tuple(args), imports, unreachable)


def _replay_line(call: _Call) -> str:
    """The line that replays a failing case ("{}" stands for its reproduce string), to run as written: the
    imports of its roles and the call. A role no import reaches (a lambda, a closure:
    `test_pack.<locals>.<lambda>`) cannot be named in a line that runs: the line then says to pass the
    reproduce string to the user's own call."""
    line = f"packoracle.fuzz({', '.join(call.args)}, reproduce=\"{{}}\")"  # {} → the reproduce string
    if call.unreachable:
        return (f"pass reproduce=\"{{}}\" to your own packoracle.fuzz call ({', '.join(call.unreachable)} has no "
                f"import path to name it by), as in {line}")
    return "".join(f"from {m} import {', '.join(names)}; " for m, names in call.imports.items()) + line

"""The arguments of packoracle.fuzz, checked: each named in the TypeError or ValueError a bad one raises, and the
combinations that state nothing (no role at all, optimizer_steps or select_top_fraction without a reducer) refused
before any case."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from . import _args
from ._values import parameters_of

AT = "fuzz"
# fuzz()'s bounds on optimizer_steps: a generation batch feeding more optimizer steps than a case has
# micro-steps states nothing more.
MAX_OPTIMIZER_STEPS = 64


@dataclass(frozen=True)
class Roles:
    """The in-process callables the user handed fuzz (None where not given)."""

    packer: Optional[Callable[..., Any]] = None
    reducer: Optional[Callable[..., Any]] = None
    consumer: Optional[Callable[..., Any]] = None
    microbatch_consumer: Optional[Callable[..., Any]] = None
    value_consumer: Optional[Callable[..., Any]] = None

    def given(self) -> tuple[Callable[..., Any], ...]:
        """The roles given, in the order a run's label names them."""
        return tuple(f for f in (self.packer, self.reducer, self.consumer, self.microbatch_consumer,
                                 self.value_consumer) if f is not None)


@dataclass(frozen=True)
class FuzzArgs:
    """fuzz()'s options after checking (bounds, types, None kept where the core picks the default)."""

    cases: Optional[int]
    seed: Optional[int]
    time: Optional[float]
    reproduce: Optional[str]
    max_row_length: int
    max_documents: int
    decoder: bool
    save_regressions: Optional[str]
    name: Optional[str]
    sft_masks: bool
    timeout: Optional[float]
    gradient: bool
    stats: bool
    exec_reducer: Optional[str]
    exec_consumer: Optional[str]
    exec_packer: Optional[str]
    exec_value_consumer: Optional[str]
    value_tolerance: Optional[tuple[float, float]]
    step_view: bool
    optimizer_steps: int
    select_top_fraction: float
    parameters: list  # the value consumer's parameters, under gradient=True


@dataclass(frozen=True)
class ExecRoles:
    """The roles given as commands run over the exec protocol (None where not given)."""

    packer: Optional[str] = None
    reducer: Optional[str] = None
    consumer: Optional[str] = None
    value_consumer: Optional[str] = None

    def any(self) -> bool:
        return any(c is not None for c in (self.packer, self.reducer, self.consumer, self.value_consumer))


def _check_roles(roles: Roles, commands: ExecRoles) -> None:
    if not roles.given() and not commands.any():
        raise TypeError("fuzz: give a packer, a reducer or a consumer to check")
    if roles.consumer is not None and roles.microbatch_consumer is not None:
        raise TypeError("fuzz: give consumer= (per row) or microbatch_consumer= (per micro-batch), not both")
    for label, given, command in (("packer", roles.packer, commands.packer),
                                  ("value_consumer", roles.value_consumer, commands.value_consumer)):
        if given is not None and command is not None:
            raise TypeError(f"fuzz: give {label} or exec_{label}=, not both")
    for label in ("packer", "reducer", "consumer", "microbatch_consumer", "value_consumer"):
        f = getattr(roles, label)
        if f is not None and not callable(f):
            raise TypeError(f"fuzz: {label} must be callable, got {type(f).__name__}")


def _gradient_parameters(roles: Roles, gradient: bool, exec_value_consumer: Optional[str]) -> list:
    """The value consumer's parameters to differentiate under gradient=True (none for a reducer alone, or for a
    value consumer served over exec: its server differentiates)."""
    if not gradient:
        return []
    if roles.reducer is None and roles.value_consumer is None:
        if exec_value_consumer is not None:
            return []
        raise TypeError("fuzz: gradient=True checks gradients: give a reducer (or a value_consumer)")
    try:
        import torch  # noqa: F401
    except ImportError:
        raise ValueError("fuzz: gradient=True needs torch (the per-target losses are torch leaf tensors), "
                         "which is not installed") from None
    return parameters_of(roles.value_consumer, AT) if roles.value_consumer is not None else []


def checked(roles: Roles, *, cases: Any, seed: Any, time: Any, reproduce: Any, max_row_length: Any,
            max_documents: Any, decoder: Any, save_regressions: Any, name: Any, sft_masks: Any, timeout: Any,
            gradient: Any, stats: Any, exec_reducer: Any, exec_consumer: Any, value_tolerance: Any, step_view: Any,
            optimizer_steps: Any, select_top_fraction: Any, max_timeout: float, exec_packer: Any = None,
            exec_value_consumer: Any = None) -> FuzzArgs:
    """fuzz()'s arguments checked, or TypeError/ValueError naming the first bad one."""
    exec_reducer = _args.optional_text(exec_reducer, AT, "exec_reducer")
    exec_consumer = _args.optional_text(exec_consumer, AT, "exec_consumer")
    exec_packer = _args.optional_text(exec_packer, AT, "exec_packer")
    exec_value_consumer = _args.optional_text(exec_value_consumer, AT, "exec_value_consumer")
    _check_roles(roles, ExecRoles(exec_packer, exec_reducer, exec_consumer, exec_value_consumer))
    optimizer_steps = _args.integer(optimizer_steps, AT, "optimizer_steps", 1, MAX_OPTIMIZER_STEPS)
    if optimizer_steps > 1 and roles.reducer is None and exec_reducer is None:
        raise TypeError("fuzz: optimizer_steps states a loss reducer's schedule: give a reducer")
    select_top_fraction = _args.fraction(select_top_fraction, AT, "select_top_fraction")
    if select_top_fraction < 1 and roles.reducer is None and exec_reducer is None:
        raise TypeError("fuzz: select_top_fraction states a selection in a loss reducer's objective: give a reducer")
    step_view = _args.flag(step_view, AT, "step_view")
    if step_view and roles.microbatch_consumer is None and roles.value_consumer is None:
        raise TypeError("fuzz: step_view=True hands the step to microbatch_consumer= or value_consumer=: give one")
    gradient = _args.flag(gradient, AT, "gradient")
    return FuzzArgs(
        cases=_args.optional_integer(cases, AT, "cases", 1, _args.INT32_MAX),
        seed=_args.optional_integer(seed, AT, "seed", 0, _args.UINT64_MAX),
        time=None if time is None else _args.seconds(time, AT, "time"),
        reproduce=_args.optional_text(reproduce, AT, "reproduce"),
        max_row_length=_args.integer(max_row_length, AT, "max_row_length", 1, _args.MAX_FUZZ_ROW_LENGTH),
        max_documents=_args.integer(max_documents, AT, "max_documents", 1, _args.MAX_FUZZ_DOCUMENTS),
        decoder=_args.flag(decoder, AT, "decoder"),
        save_regressions=_args.optional_path(save_regressions, AT, "save_regressions"),
        name=_args.optional_text(name, AT, "name"),
        sft_masks=_args.flag(sft_masks, AT, "sft_masks"),
        timeout=None if timeout is None else _args.seconds(timeout, AT, "timeout", hi=max_timeout),
        gradient=gradient,
        stats=_args.flag(stats, AT, "stats"),
        exec_reducer=exec_reducer, exec_consumer=exec_consumer, exec_packer=exec_packer,
        exec_value_consumer=exec_value_consumer,
        value_tolerance=_args.optional_tolerance(value_tolerance, AT, "value_tolerance"),
        step_view=step_view, optimizer_steps=optimizer_steps, select_top_fraction=select_top_fraction,
        parameters=_gradient_parameters(roles, gradient, exec_value_consumer))

"""The roles of the libraries that live in family environments (``_envs``), by name, for
``packoracle.exec_server`` run by a family venv's interpreter::

    python -m packoracle.exec_server --reducer 'packoracle.conformance._served:verl/agg-loss-token-mean'
    python -m packoracle.exec_server --microbatch-consumer 'packoracle.conformance._served:fla/naive-gated-delta-product'

An attribute of this module is the role of what it names: an adapter's loss reducer (``adapter.reducer()``, the
real library's call, built when the server starts, so the library is imported before the first request) or a
flash-linear-attention naive op's micro-batch consumer (``fla_consumers.consumer(op)``) or an axolotl boundary
builder's (``axolotl_masks.BUILDERS``). The conformance runner
drives them from the main venv with ``packoracle.fuzz(..., exec_reducer=..., exec_consumer=...)``
(``_remote.served_command``). Needs what exec_server needs (numpy, packoracle's Python sources) and the library.
"""

from __future__ import annotations

from typing import Any, Callable


def role_of(name: str) -> Callable[..., Any]:
    """The reducer of adapter ``name``, or the consumer of the fla naive op or axolotl boundary builder called
    ``name``; AttributeError (what ``getattr`` raises) for a name that is none of these, naming it."""
    from .. import adapters
    from ..adapters import axolotl_masks, fla_consumers

    for consumer in fla_consumers.CONSUMERS:
        if consumer.name == name:
            return fla_consumers.consumer(consumer.op)
    for builder in axolotl_masks.BUILDERS:
        if builder.name == name:
            return builder.build
    try:
        adapter = adapters.get(name)
    except KeyError:
        raise AttributeError(f"packoracle.conformance._served: no adapter or fla consumer called {name!r}") from None
    reducer = adapter.reducer()
    if reducer is None:
        raise AttributeError(f"packoracle.conformance._served: adapter {name!r} has no loss reducer")
    return reducer


def __getattr__(name: str) -> Callable[..., Any]:
    """``module:NAME`` of exec_server's command line (PEP 562: names such as "verl/agg-loss-token-mean" are no
    identifiers, but getattr reaches them)."""
    if name.startswith("__"):  # the import system's own probes (__path__, __wrapped__, ...)
        raise AttributeError(name)
    return role_of(name)

"""packoracle: a property-based correctness kit and reference oracle for sequence packing.

Packing puts many documents into fixed-length rows; a trainer must then draw the document mask (who may attend
to whom), the target mask (which shifted next-token predictions count) and the loss denominator right. The kit
states these rules as an executable oracle under a declared policy and checks what your code produces:

    import packoracle
    report = packoracle.check_batch(batch, documents, "hf-flatten")   # the tensors you already hold
    assert report.ok, report                                           # str(report): what went wrong, where

    packoracle.fuzz(my_packer, "reference")    # generated cases; raises Counterexample, shrunk and replayable

The C++ core (oracle, checks, generation, shrinking) does all the work; this package converts.
"""

from typing import TYPE_CHECKING

from . import _core
from ._checks import check_batch, check_step, draw, verify
from ._documents import canonical_documents
from ._fuzz import Counterexample, FuzzResult, Refuse, fuzz
from ._policy import Policy, presets
from ._which import PolicyFit, which_policy, which_policy_of_batch
from .dump.spans import Document
from .report import Report, Violation

# nanobind's stubgen leaves module dunders (__version__ among them) out of _core.pyi; the module has it.
__version__: str = _core.__version__  # type: ignore[attr-defined]

if TYPE_CHECKING:
    from types import ModuleType

    from . import adapters, conformance, dump, guard, strategies  # noqa: F401

# Submodules reached as attributes (`packoracle.guard.check_step(...)` after `import packoracle`), imported on
# first use (PEP 562): `import packoracle` itself imports neither torch nor transformers nor Hypothesis.
_SUBMODULES = frozenset({"adapters", "conformance", "dump", "guard", "strategies"})


def __getattr__(name: str) -> "ModuleType":
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")  # binds packoracle.<name> for later lookups
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _SUBMODULES)


# Shown as packoracle.X in tracebacks, reprs and help(), where users meet them.
for _public in (Counterexample, Document, FuzzResult, Policy, PolicyFit, Refuse, Report, Violation):
    _public.__module__ = __name__
del _public

__all__ = [
    "Counterexample", "Document", "FuzzResult", "Policy", "PolicyFit", "Refuse", "Report", "Violation", "__version__",
    "canonical_documents", "check_batch", "check_step", "draw", "fuzz", "presets", "verify", "which_policy",
    "which_policy_of_batch",
]

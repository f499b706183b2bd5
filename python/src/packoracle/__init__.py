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

import importlib
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what type checkers see; at run time __getattr__ below resolves each name on first use
    from . import adapters, conformance, dump, guard, strategies  # noqa: F401
    from ._checks import check_batch, check_step, draw, verify
    from ._documents import canonical_documents
    from ._fuzz import Counterexample, FuzzResult, Refuse, fuzz
    from ._masks import Computed
    from ._policy import Policy, presets
    from ._values import StepView
    from ._which import PolicyFit, which_policy, which_policy_of_batch
    from .dump.spans import Document
    from .report import Report, Violation

    __version__: str

# Every public name is resolved on first use (PEP 562), so that `import packoracle` loads neither the C++
# extension packoracle._core nor numpy: the pytest plugin (packoracle.pytest_plugin, loaded in every pytest
# session of everyone who installs the package) imports this package, and a machine without the extension still
# imports it and uses packoracle.dump (issue 44 item 3). Each name: the submodule that defines it.
_PUBLIC = {
    "check_batch": "_checks", "check_step": "_checks", "draw": "_checks", "verify": "_checks",
    "canonical_documents": "_documents",
    "Counterexample": "_fuzz", "FuzzResult": "_fuzz", "Refuse": "_fuzz", "fuzz": "_fuzz",
    "Policy": "_policy", "presets": "_policy",
    "StepView": "_values",
    "Computed": "_masks",
    "PolicyFit": "_which", "which_policy": "_which", "which_policy_of_batch": "_which",
    "Document": "dump.spans",
    "Report": "report", "Violation": "report",
}
# The submodules above that run without the extension (the others import packoracle._core).
_WITHOUT_CORE = frozenset({"dump.spans", "_masks"})
# Shown as packoracle.X in tracebacks, reprs and help(), where users meet them.
_CLASSES = ("Computed", "Counterexample", "Document", "FuzzResult", "Policy", "PolicyFit", "Refuse", "Report", "Violation")
# Submodules reached as attributes (`packoracle.guard.check_step(...)` after `import packoracle`): `import
# packoracle` itself imports neither torch nor transformers nor Hypothesis.
_SUBMODULES = frozenset({"adapters", "conformance", "dump", "guard", "strategies"})


def __getattr__(name: str) -> object:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")  # binds packoracle.<name> for later lookups
    home = _PUBLIC.get(name)
    if home is not None:
        if home not in _WITHOUT_CORE:
            _require_core(f"{__name__}.{name}")
        value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    elif name == "__version__":
        value = _version()
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later lookups find it without coming here
    _rename_classes()
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | _SUBMODULES | set(_PUBLIC) | {"__version__"})


def _require_core(what: str) -> object:
    """packoracle._core, or an ImportError that says what needed it and how to get it (rather than the bare
    "No module named 'packoracle._core'" of an import deep inside the kit)."""
    try:
        return importlib.import_module(f"{__name__}._core")
    except ImportError as e:
        raise ImportError(
            f"{what} needs packoracle's C++ extension packoracle._core, which is not built or not installed here "
            f"({e}). `pip install .` in a packoracle checkout builds and installs it (README.md, Install); "
            f"packoracle.dump and packoracle.Document work without it.", name=f"{__name__}._core") from e


def _version() -> str:
    """The extension's version (the build that does the work), else, without it, the installed distribution's:
    both come from the one release number (pyproject.toml, python/binding/module.cc), and
    python/tests/test_lazy_import.py holds them equal."""
    try:
        from . import _core
    except ImportError:
        import importlib.metadata

        try:
            return importlib.metadata.version(__name__)
        except importlib.metadata.PackageNotFoundError:
            _require_core(f"{__name__}.__version__")  # neither: the ImportError that says how to get the core
            raise
    # nanobind's stubgen leaves module dunders (__version__ among them) out of _core.pyi; the module has it.
    version: str = _core.__version__  # type: ignore[attr-defined]
    return version


def _rename_classes() -> None:
    """Every public class whose submodule is loaded is shown as packoracle.X, not only the one asked for: a
    Counterexample raised by packoracle.fuzz reads `packoracle.Counterexample` in a traceback even where the
    caller never named the class."""
    for name in _CLASSES:
        module = sys.modules.get(f"{__name__}.{_PUBLIC[name]}")
        if module is not None:
            getattr(module, name).__module__ = __name__


__all__ = [
    "Computed", "Counterexample", "Document", "FuzzResult", "Policy", "PolicyFit", "Refuse", "Report", "StepView", "Violation",
    "__version__", "canonical_documents", "check_batch", "check_step", "draw", "fuzz", "presets", "verify", "which_policy",
    "which_policy_of_batch",
]

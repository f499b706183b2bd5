"""packoracle.adapters: the real libraries, each in the configurations users run, as candidates of the kit.

    from packoracle import adapters, fuzz
    a = adapters.get("transformers/flatten-fa-kwargs")
    fuzz(a.packer(), a.resolved_policy(), reducer=a.reducer())

Every adapter calls the installed library (never a copy of its packing or loss code) and declares the policy
the library really implements in that configuration. `packoracle.conformance` runs them all.
"""

from __future__ import annotations

import importlib

from ._base import Adapter, Finding, documents_of

# One module per library; each defines ADAPTERS (a tuple of Adapter).
MODULES = ("transformers_hf", "trl_sft", "torchtune_packed", "megatron_gpt", "olmo_core", "nemo_packing",
           "torchtitan_text", "rl_losses", "grain_pack", "litgpt_sft", "areal_pack", "axolotl_pack",
           "llamafactory_pack")


def all_adapters() -> tuple[Adapter, ...]:
    """Every adapter, in the matrix's order. Importing a module imports no library (each adapter imports
    its own when it runs), so this works whatever is installed."""
    out: list[Adapter] = []
    for module in MODULES:
        out.extend(importlib.import_module(f"{__name__}.{module}").ADAPTERS)
    names = [a.name for a in out]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise RuntimeError(f"packoracle.adapters: adapter names used twice: {', '.join(duplicates)}")
    return tuple(out)


def get(name: str) -> Adapter:
    """The adapter called `name` ("<system>/<configuration>"); KeyError listing the names otherwise."""
    adapters = {a.name: a for a in all_adapters()}
    if name not in adapters:
        raise KeyError(f"no adapter {name!r}; there are: {', '.join(adapters)}")
    return adapters[name]


__all__ = ["Adapter", "Finding", "all_adapters", "get"]

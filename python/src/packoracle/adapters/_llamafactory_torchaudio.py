"""Imported (by the llamafactory adapter's ``imports``, before ``llamafactory.data``) only where llamafactory is
installed, its family environment: registers a stub ``torchaudio`` module. ``llamafactory.data.mm_plugin``
imports torchaudio at module level, and torchaudio's PyPI wheel needs CUDA's ``libc10_cuda.so``; the family
venv leaves it out (requirements/llamafactory.lock, whose header records the repaired install) and nothing the
packing path calls uses it (only the multimodal plugins do). A spec is needed: transformers' ``is_torchaudio_available()``
calls ``importlib.util.find_spec``."""

from __future__ import annotations

import importlib.machinery
import sys
import types

if "torchaudio" not in sys.modules:
    _stub = types.ModuleType("torchaudio")
    _stub.__spec__ = importlib.machinery.ModuleSpec("torchaudio", None)
    sys.modules["torchaudio"] = _stub

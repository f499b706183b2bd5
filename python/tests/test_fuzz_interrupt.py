"""Ctrl-C during packoracle.fuzz stops the run and reaches the caller as KeyboardInterrupt, not as a case."""

import pytest

import packoracle
from tests.packers import as_packer, pack_reference


def test_keyboard_interrupt_in_the_packer_stops_the_run():
    calls = []
    inner = as_packer(pack_reference)

    def packer(request):
        calls.append(request["id"])
        if len(calls) == 5:
            raise KeyboardInterrupt
        return inner(request)

    with pytest.raises(KeyboardInterrupt):
        packoracle.fuzz(packer, "reference", cases=400)
    assert len(calls) < 20  # every later call was answered at once, without the packer


def test_the_public_names_read_as_packoracle():
    assert packoracle.Counterexample.__module__ == "packoracle"
    assert repr(packoracle.Policy("reference")).startswith("Policy(")
    assert isinstance(packoracle.__version__, str) and packoracle.__version__.count(".") == 2

"""The family environments of the conformance runner (packoracle.conformance._envs) and the packer driven in
another interpreter over the exec protocol's framing (_remote, _worker): a remote packer is fuzzed, shrunk and
refused exactly as an in-process one; a crash is that case's failure and the next request starts a new worker;
a refusal keeps the worker; a venv is keyed by its lock and rebuilt when a build was interrupted."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
import zipfile

import pytest

import packoracle
from packoracle.conformance import _envs
from packoracle.conformance._remote import FamilyPacker

# One document per row, right-padded to the row length, labels = the supervised tokens (hf-padded's layout);
# make_buggy trains unsupervised tokens too; make_crashing raises on a document holding 13, make_hanging sleeps
# on one holding 17.
PACKERS = textwrap.dedent('''
    import time
    from packoracle import Refuse
    from packoracle.adapters._base import assign, documents_of

    def make(buggy=False, crash=False, hang=False):
        def pack(request):
            L, policy = request["row_length"], request["policy"]
            rows = []
            for d in documents_of(request):
                tokens = d["tokens"]
                if crash and 13 in tokens:
                    raise ZeroDivisionError("a library bug on token 13")
                if hang and 17 in tokens:
                    time.sleep(60)
                if len(tokens) > L:
                    raise Refuse(f"document {d['doc_uid']} is longer than {L}")
                if not tokens:
                    continue
                labels = [t if (s or buggy) else policy["ignore_index"] for t, s in zip(tokens, d["supervised"])]
                pad = L - len(tokens)
                rows.append({"input_ids": tokens + [policy["pad_id"]] * pad,
                             "labels": labels + [policy["ignore_index"]] * pad})
            return assign(rows, request)
        return pack

    def make_buggy():
        return make(buggy=True)

    def make_crashing():
        return make(crash=True)

    def make_hanging():
        return make(hang=True)
''')


@pytest.fixture
def packers(tmp_path):
    (tmp_path / "family_test_packers.py").write_text(PACKERS)
    opened = []

    def remote(factory: str = "make") -> FamilyPacker:
        p = FamilyPacker(sys.executable, f"family_test_packers:{factory}", path=[str(tmp_path)])
        opened.append(p)
        return p

    yield remote
    for p in opened:
        p.close()


def _request(*docs: list, row_length: int = 4) -> dict:
    return {"id": 1, "row_length": row_length, "micro_batch_rows": 1, "dp_world_size": 1,
            "policy": packoracle.Policy({"preset": "hf-padded"}).to_dict(), "target_losses": {},
            "documents": [{"doc_uid": f"d{k}", "tokens": list(t), "supervised": [1] * len(t)}
                          for k, t in enumerate(docs)]}


def test_a_remote_packer_holds_as_in_process(packers):
    result = packoracle.fuzz(packers(), {"preset": "hf-padded"}, cases=60, seed=5, max_row_length=8)
    assert result.cases == 60


def test_a_buggy_remote_packer_is_caught_under_targets(packers):
    with pytest.raises(packoracle.Counterexample) as caught:
        packoracle.fuzz(packers("make_buggy"), {"preset": "hf-padded"}, cases=200, seed=5, max_row_length=8)
    assert caught.value.invariant == "targets"


def test_a_refusal_keeps_the_worker(packers):
    p = packers()
    p.ready()
    pid = p.pid
    with pytest.raises(packoracle.Refuse, match="longer than 4"):
        p(_request([1, 2, 3, 4, 5]))
    assert p.pid == pid
    assert len(p(_request([1, 2]))) == 1 and p.pid == pid


def test_a_crash_is_the_case_s_failure_and_the_next_request_starts_a_new_worker(packers):
    p = packers("make_crashing")
    p.ready()
    first = p.pid
    with pytest.raises(RuntimeError, match="ZeroDivisionError: a library bug on token 13"):
        p(_request([13]))
    assert p.pid is None
    assert len(p(_request([1, 2]))) == 1
    assert p.pid not in (None, first)


def test_a_crash_under_fuzz_is_reported_with_the_library_s_traceback(packers):
    with pytest.raises(packoracle.Counterexample) as caught:
        packoracle.fuzz(packers("make_crashing"), {"preset": "hf-padded"}, cases=300, seed=5, max_row_length=16)
    assert "ZeroDivisionError: a library bug on token 13" in str(caught.value)
    assert "docs     d0=[13]" in str(caught.value)  # shrunk to the one document that crashes it


def test_a_hang_is_stopped_and_the_worker_replaced(packers):
    """fuzz's deadline interrupts the exchange with SIGALRM (here an alarm of the test's own stands for it)."""
    import signal

    p = packers("make_hanging")
    p.ready()
    first = p.pid

    def expire(signum, frame):
        raise TimeoutError("deadline")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        with pytest.raises(TimeoutError):
            p(_request([17]))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert p.pid is None  # killed: its next line would have been the hung answer
    assert len(p(_request([1, 2]))) == 1 and p.pid != first


@pytest.fixture
def empty_family(tmp_path, monkeypatch):
    """A family whose lock installs nothing (torch left out): a real venv built in seconds, in tmp_path."""
    locks, cache = tmp_path / "requirements", tmp_path / "envs"
    locks.mkdir()
    (locks / "empty.lock").write_text("# nothing to install\n")
    monkeypatch.setenv("PACKORACLE_REQUIREMENTS", str(locks))
    monkeypatch.setenv("PACKORACLE_ENV_CACHE", str(cache))
    monkeypatch.setitem(_envs.FAMILIES, "empty", _envs.Family("empty", torch=False))
    return locks / "empty.lock"


def test_the_venv_is_keyed_by_its_lock_s_requirements(empty_family):
    before = _envs.venv_dir(_envs.FAMILIES["empty"])
    empty_family.write_text("# nothing to install, said otherwise\n\n")
    assert _envs.venv_dir(_envs.FAMILIES["empty"]) == before  # a comment is no pin
    empty_family.write_text("numpy==2.4.6  # a pin\n")
    after = _envs.venv_dir(_envs.FAMILIES["empty"])
    assert before != after and os.path.dirname(before) == os.path.dirname(after) == _envs.cache_root()


def test_a_venv_is_built_once_and_an_interrupted_build_again(empty_family):
    built = []
    venv = _envs.ensure("empty", log=built.append)
    assert os.path.isfile(os.path.join(venv, "complete")) and os.access(_envs.python_of(venv), os.X_OK)
    assert _envs.ensure("empty", log=built.append) == venv and len(built) == 2  # "building", "took": once
    os.remove(os.path.join(venv, "complete"))  # as a build stopped half-way leaves it
    _envs.ensure("empty", log=built.append)
    assert len(built) == 4 and os.path.isfile(os.path.join(venv, "complete"))
    empty_family.write_text("# nothing to install\n--no-index\n")  # another lock: a new venv, the old one pruned
    newer = _envs.ensure("empty")
    assert newer != venv and os.path.isdir(newer) and not os.path.exists(venv)


def test_a_missing_lock_or_family_says_why(empty_family):
    empty_family.unlink()
    with pytest.raises(_envs.EnvironmentUnavailable, match="empty.lock is not found"):
        _envs.ensure("empty")
    with pytest.raises(_envs.EnvironmentUnavailable, match="no family environment called 'nope'"):
        _envs.ensure("nope")


def _pins(family: _envs.Family) -> list[str]:
    with open(_envs.lock_path(family)) as f:
        return [line.split("#")[0].strip() for line in f if line.split("#")[0].strip()]


@pytest.mark.parametrize("name", sorted(_envs.FAMILIES))
def test_every_family_lock_is_a_whole_freeze_without_torch(name):
    """The lock is installed with --no-deps after torch 2.13.0 alone: every line must pin one version (a range or
    a bare name would be resolved against nothing), and torch must not be in it (a second torch would replace the
    CPU wheel, as LLaMA-Factory's plain install does)."""
    family = _envs.FAMILIES[name]
    pins = _pins(family)
    assert pins, f"{family.lock} pins nothing"
    loose = [p for p in pins if "==" not in p or any(c in p for c in "<>~!,;@")]
    assert not loose, f"{family.lock}: lines that pin no single version: {loose}"
    names = {p.split("==")[0].lower().replace("_", "-") for p in pins}
    # CUDA's runtime wheels (nvidia-cublas, cuda-toolkit, ...); nvidia-ml-py is NVML's pure-Python binding
    cuda = sorted(n for n in names if n.startswith("cuda-") or (n.startswith("nvidia-") and n != "nvidia-ml-py"))
    assert "torch" not in names and not cuda, f"{family.lock} installs torch or CUDA's wheels: {cuda}"


def test_every_family_has_adapters_and_every_adapter_s_family_is_registered():
    from packoracle import adapters

    families = {a.family for a in adapters.all_adapters() if a.family}
    unregistered = families - set(_envs.FAMILIES)
    assert not unregistered, f"adapters name families without a lock entry: {sorted(unregistered)}"
    consumers_only = {"fla"}  # its naive ops run as consumers inside the venv (tests_adapters/test_families.py)
    assert set(_envs.FAMILIES) - families == consumers_only, set(_envs.FAMILIES) - families


def _wheel_declaring_a_newer_python(folder) -> None:
    """fake 1.0, a pure wheel whose Requires-Python excludes every interpreter there is (as megatron-core 0.19.2's
    >= 3.12 excludes 3.11), written in `folder`."""
    files = {"fake/__init__.py": "VALUE = 1\n",
             "fake-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: fake\nVersion: 1.0\nRequires-Python: >=99\n",
             "fake-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                         "Tag: py3-none-any\n"}
    files["fake-1.0.dist-info/RECORD"] = "".join(f"{name},,\n" for name in files) + "fake-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(folder / "fake-1.0-py3-none-any.whl", "w") as z:
        for name, text in files.items():
            z.writestr(name, text)


def test_ignore_requires_python_installs_a_release_that_declares_a_newer_python(empty_family, tmp_path, monkeypatch):
    """Family.ignore_requires_python: the lock is installed with --ignore-requires-python (without it pip refuses
    the release); the flag is not in the repr (every other family's key is that repr, unchanged) and joins the
    key only where set."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel_declaring_a_newer_python(wheels)
    empty_family.write_text(f"--no-index\n--find-links {wheels}\nfake==1.0\n")
    plain = _envs.Family("empty", torch=False)
    with pytest.raises(_envs.EnvironmentUnavailable, match="building the empty environment failed"):
        _envs.ensure("empty")
    flagged = _envs.Family("empty", torch=False, ignore_requires_python=True)
    assert repr(flagged) == repr(plain) == "Family(name='empty', torch=False, no_build_isolation=False)"
    lines = [line.split("#")[0].strip() for line in empty_family.read_text().splitlines()]
    key = "\0".join(["\n".join(line for line in lines if line), repr(plain), _envs.RECIPE, sys.version.split()[0]])
    assert _envs.venv_dir(plain).endswith("empty-" + hashlib.sha256(key.encode()).hexdigest()[:16])
    assert _envs.venv_dir(flagged) != _envs.venv_dir(plain)
    monkeypatch.setitem(_envs.FAMILIES, "empty", flagged)
    venv = _envs.ensure("empty")
    out = subprocess.run([_envs.python_of(venv), "-c", "import fake; print(fake.VALUE)"], capture_output=True,
                         text=True)
    assert out.stdout.strip() == "1", out.stderr


def test_the_megatron_family_is_the_only_one_that_ignores_requires_python():
    """megatron-core 0.19.2 declares Python >= 3.12 and runs on 3.11 (requirements/megatron.lock's header)."""
    assert [n for n, f in _envs.FAMILIES.items() if f.ignore_requires_python] == ["megatron"]

"""Shared paths and helpers of the python tests (run with pytest against the installed package)."""

import json
import os
import subprocess
import sys
import unittest

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_ROOT = os.path.dirname(PYTHON_DIR)
# What the real systems returned (fixtures/realpack, part of the repository).
REALPACK = os.path.join(REPO_ROOT, "fixtures", "realpack")
CANDIDATES = os.path.join(PYTHON_DIR, "candidates")
TOOLS = os.path.join(PYTHON_DIR, "tools")
# scripts/python_tests.sh passes the command installed with the package; run by hand, the default build directory.
PACKORACLE = os.environ.get("PACKORACLE_BIN") or os.path.join(REPO_ROOT, "build", "cli", "packoracle")

if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)

def needs_realpack(test):
    """Marks a test (a method or a whole TestCase class) that reads fixtures/realpack: without it the test
    fails, never skips."""
    import functools

    if isinstance(test, type):
        for name in dir(test):
            if name.startswith("test"):
                setattr(test, name, needs_realpack(getattr(test, name)))
        return test

    @functools.wraps(test)
    def wrapper(*args, **kwargs):
        if not os.path.isdir(REALPACK):
            raise AssertionError(f"no realpack at {REALPACK}: fixtures/realpack is part of the repository; "
                                 "restore it (git checkout -- fixtures/realpack)")
        return test(*args, **kwargs)
    return wrapper


def realpack(folder, set_name):
    with open(os.path.join(REALPACK, folder, f"{set_name}.json")) as f:
        return json.load(f)


def preset(name, **overrides):
    from packoracle.dump import PRESETS
    policy = dict(PRESETS[name])
    policy.update(overrides)
    return policy


def request(rid, documents, *, policy, row_length=8, micro_batch_rows=1, dp_world_size=1, losses=None):
    docs = []
    for uid, tokens in documents:
        docs.append({"doc_uid": uid, "tokens": tokens, "supervised": [1] * len(tokens)})
    return {"record": "request", "id": rid, "row_length": row_length, "micro_batch_rows": micro_batch_rows,
            "dp_world_size": dp_world_size, "policy": policy, "documents": docs,
            "target_losses": losses or {}}


class Candidate:
    """A candidate process speaking the exec protocol, kept alive across requests as the kit does."""

    def __init__(self, script):
        self.proc = subprocess.Popen([sys.executable, os.path.join(CANDIDATES, script)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)

    def ask(self, req):
        """Sends one request; returns (microbatch records, end-or-error record)."""
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        records = []
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError("the candidate closed its output")
            record = json.loads(line)
            if record["record"] in ("end", "error"):
                if record.get("id") != req["id"]:
                    raise AssertionError(f"answer for id {record.get('id')}, asked {req['id']}")
                return records, record
            records.append(record)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)
        self.proc.stdout.close()


def small_fuzz(*args, **kwargs):
    """packoracle.fuzz on small cases (rows of at most 16 slots, 8 documents a case), for the tests that check
    something other than size: seconds where the defaults (rows to 8,192 slots, 512 documents) take minutes."""
    import packoracle

    kwargs.setdefault("max_row_length", 16)
    kwargs.setdefault("max_documents", 8)
    return packoracle.fuzz(*args, **kwargs)

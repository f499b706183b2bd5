"""`packoracle verify` as a user runs it: verdicts on real systems' dumps, exit codes, error messages."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from tests.helpers import PACKORACLE, PYTHON_DIR, REPO_ROOT, needs_realpack

EXPECTED = os.path.join(os.path.dirname(__file__), "expected_verdicts.json")


def verify(*args):
    return subprocess.run([PACKORACLE, "verify", *args], capture_output=True, text=True)


@needs_realpack
class RealpackVerdictsTest(unittest.TestCase):
    """Every realpack run, converted by tools/realpack_to_jsonl.py, gets the verdict its system deserves under
    its own declared policy (expected_verdicts.json says which and why)."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="packoracle-dumps-")
        subprocess.run([sys.executable, os.path.join(PYTHON_DIR, "tools", "realpack_to_jsonl.py"), cls.dir],
                       check=True, capture_output=True)

    def test_each_dump_gets_its_expected_verdict(self):
        with open(EXPECTED) as f:
            expected = json.load(f)
        self.assertGreater(len(expected), 200)
        for name, want in sorted(expected.items()):
            with self.subTest(dump=name):
                path = os.path.join(self.dir, name)
                self.assertTrue(os.path.exists(path), f"{name} was not written")
                r = verify("--format", "json", path)
                self.assertIn(r.returncode, (0, 1), r.stderr)
                got = json.loads(r.stdout)
                self.assertEqual(got["verdict"], want["verdict"], f"{want['why']}\n{got['violations'][:3]}")
                self.assertEqual(r.returncode, 0 if want["verdict"] == "clean" else 1)
                found = set(got["violations_per_invariant"])
                required, allowed = set(want.get("invariants", [])), set(want.get("also_possible", []))
                self.assertTrue(required <= found, f"missing {required - found}: {want['why']}")
                self.assertTrue(found <= required | allowed, f"unexpected {found - required - allowed}: {want['why']}")

    def test_fast_path_and_oracle_path_report_the_same(self):
        """verify checks with the fast verifier by default and --oracle with CheckCase only: on every realpack
        dump both must print exactly the same report (the fast path hands failing steps to the oracle)."""
        for name in sorted(os.listdir(self.dir)):
            if not name.endswith(".jsonl"):
                continue
            with self.subTest(dump=name):
                path = os.path.join(self.dir, name)
                fast, oracle = verify("--format", "json", path), verify("--oracle", "--format", "json", path)
                self.assertEqual(fast.returncode, oracle.returncode, fast.stderr + oracle.stderr)
                self.assertEqual(fast.stdout, oracle.stdout)
                self.assertEqual(fast.stderr, oracle.stderr)


class VerifyExitCodesTest(unittest.TestCase):
    def write(self, lines):
        f = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False)
        f.write("\n".join(json.dumps(line) if not isinstance(line, str) else line for line in lines) + "\n")
        f.close()
        self.addCleanup(os.unlink, f.name)
        return f.name

    HEADER = {"record": "header", "schema": "packed-batch", "version": 1, "producer": {"system": "test"},
              "special_ids": {"pad": 0}, "dp_world_size": 1, "grad_accum_steps": 1, "policy": {"preset": "reference"}}
    DOCS = [{"record": "document", "doc_uid": "a", "tokens": [11, 12, 13], "supervised": [1, 1, 1]},
            {"record": "document", "doc_uid": "b", "tokens": [21, 22], "supervised": [1, 1]}]

    def row(self, labels):
        return {"record": "microbatch", "step": 0, "micro_step": 0, "rank": 0,
                "rows": [{"input_ids": [11, 12, 13, 21, 22, 0], "labels": labels, "position_ids": [0, 1, 2, 0, 1, 2],
                          "doc_spans": [{"doc_uid": "a", "start": 0, "length": 3, "doc_offset": 0},
                                        {"doc_uid": "b", "start": 3, "length": 2, "doc_offset": 0}]}],
                "producer": {"loss_sum": 3.0, "denominator": 3, "denominator_scope": "global", "loss": 1.0}}

    def test_clean_dump_exits_0(self):
        path = self.write([self.HEADER, *self.DOCS, self.row([12, 13, -100, 22, -100, -100])])
        r = verify(path)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("verdict: clean", r.stdout)

    def test_boundary_target_exits_1_naming_step_row_slot_and_invariant(self):
        path = self.write([self.HEADER, *self.DOCS, self.row([12, 13, 21, 22, -100, -100])])
        r = verify(path)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("targets", r.stdout)
        self.assertIn("step 0, micro_step 0, rank 0, row 0, slot 2", r.stdout)
        self.assertIn("next document", r.stdout)

    def test_required_policy_differences_are_listed(self):
        path = self.write([self.HEADER, *self.DOCS, self.row([12, 13, -100, 22, -100, -100])])
        r = verify("--preset", "torchtune-packed", path)
        self.assertIn("differs   boundary_source: declared spans, required seq_lens", r.stdout)

    def test_unusable_input_exits_2_naming_file_line_record_and_field(self):
        cases = {
            "no header": ([self.DOCS[0]], "the first record must be the header"),
            "wrong type": ([self.HEADER, {"record": "document", "doc_uid": "a", "tokens": "x"}],
                           ":2: document record: field 'tokens' must be an array of integers"),
            "length mismatch": ([self.HEADER, *self.DOCS, {**self.row([12, 13]), "step": 0}],
                                ":4: microbatch record: rows[0]: field 'labels' has 2 entries, input_ids has 6"),
            "not json": ([self.HEADER, "{not json"], ":2: not a JSON object"),
            "missing field": ([self.HEADER, {"record": "microbatch", "step": 0, "rank": 0, "rows": []}],
                              ":2: microbatch record: field 'micro_step' is missing"),
            "unknown preset": ([{**self.HEADER, "policy": {"preset": "hf"}}], "unknown preset 'hf'"),
        }
        for name, (lines, message) in cases.items():
            with self.subTest(case=name):
                path = self.write(lines)
                for flags in ([], ["--oracle"]):  # the simdjson reader and the nlohmann one: the same words
                    r = verify(*flags, path)
                    self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                    self.assertIn(message, r.stderr)
                    self.assertIn(os.path.basename(path), r.stderr)

    def test_finished_documents_are_forgotten_without_changing_verdicts(self):
        """verify forgets a document once its pieces tile it (bounded memory): a repeated document record after
        that is ignored, and a piece repeated in a later step is still a coverage violation, on both paths."""
        later = {**self.row([12, 13, -100, 22, -100, -100]), "step": 1}
        cases = {
            "record repeated after its document is done": ([self.HEADER, *self.DOCS, self.row([12, 13, -100, 22, -100, -100]),
                                                            *self.DOCS, later], 1, "coverage"),
            "clean, then a document record again": ([self.HEADER, *self.DOCS, self.row([12, 13, -100, 22, -100, -100]),
                                                     self.DOCS[0]], 0, None),
        }
        for name, (lines, code, invariant) in cases.items():
            with self.subTest(case=name):
                path = self.write(lines)
                for flags in ([], ["--oracle"]):
                    r = verify(*flags, "--format", "json", path)
                    self.assertEqual(r.returncode, code, r.stdout + r.stderr)
                    if invariant:
                        self.assertIn(invariant, json.loads(r.stdout)["violations_per_invariant"])

    def test_json_format_gives_the_same_facts(self):
        path = self.write([self.HEADER, *self.DOCS, self.row([12, 13, 21, 22, -100, -100])])
        got = json.loads(verify("--format", "json", path).stdout)
        self.assertEqual(got["verdict"], "violations")
        self.assertEqual(got["violations"][0]["invariant"], "targets")
        self.assertEqual(got["violations"][0]["slot"], 2)
        self.assertEqual(got["totals"]["valid_targets"], 3)


class VerifyDecoderTest(unittest.TestCase):
    """`--decoder` adds packing_invariance: Megatron's training copy never restarts positions after an EOD, so the
    tiny decoder gives the second document other losses packed than alone; without the flag it is not run."""

    DUMP = os.path.join(REPO_ROOT, "examples", "dumps", "megatron_training_copy_buggy.jsonl")

    def test_decoder_flag_adds_packing_invariance(self):
        without = json.loads(verify("--format", "json", self.DUMP).stdout)
        with_decoder = json.loads(verify("--decoder", "--format", "json", self.DUMP).stdout)
        names = lambda report: {v["invariant"] for v in report["violations"]}  # noqa: E731
        self.assertNotIn("packing_invariance", names(without))
        self.assertIn("packing_invariance", names(with_decoder))
        self.assertIn("positions", names(with_decoder))


if __name__ == "__main__":
    unittest.main()

"""python/tools/realpack_to_jsonl.py: one valid dump per supported realpack run, declaring the policy the system
claims, and python/tests/expected_verdicts.json in step with it."""

import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

from tests.helpers import PYTHON_DIR, REALPACK, TOOLS, needs_realpack

from packoracle.dump import resolve_policy, validate_lines

sys.path.insert(0, TOOLS)
import realpack_to_jsonl  # noqa: E402

EXPECTED = os.path.join(PYTHON_DIR, "tests", "expected_verdicts.json")
INVARIANTS = {"shape", "coverage", "segments", "positions", "targets", "attention", "denominator", "loss",
              "packing_invariance", "determinism", "efficiency"}


@needs_realpack
class RealpackToolTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.out = os.path.join(cls.tmp.name, "dumps")
        cls.expected_path = os.path.join(cls.tmp.name, "expected.json")
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            code = realpack_to_jsonl.main([cls.out, "--realpack", REALPACK, "--expected", cls.expected_path])
        assert code == 0
        cls.table = stdout.getvalue()
        with open(cls.expected_path) as f:
            cls.expected = json.load(f)
        cls.files = sorted(os.listdir(cls.out))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def records(self, name):
        with open(os.path.join(self.out, name)) as f:
            return validate_lines(f, name)

    def test_every_dump_is_valid_and_conserves_tokens(self):
        self.assertGreater(len(self.files), 200)
        for name in self.files:
            records = self.records(name)  # header first, spans hold their documents' tokens
            kinds = [r["record"] for r in records]
            self.assertEqual(kinds[0], "header")
            self.assertIn("document", kinds)
            self.assertIn("microbatch", kinds)
            resolve_policy(records[0]["policy"])

    def test_committed_expectations_are_in_step_with_the_tool(self):
        with open(EXPECTED) as f:
            committed = json.load(f)
        self.assertEqual(committed, self.expected, "regenerate: python3 python/tools/realpack_to_jsonl.py DIR "
                                                   "--expected python/tests/expected_verdicts.json")
        self.assertEqual(sorted(committed), self.files)

    def test_expectations_are_well_formed(self):
        for name, e in self.expected.items():
            with self.subTest(file=name):
                self.assertIn(e["verdict"], ("clean", "violations"))
                self.assertEqual(e["verdict"] == "clean", not e["invariants"])
                self.assertLessEqual(set(e["invariants"]) | set(e.get("also_possible", [])), INVARIANTS)
                self.assertTrue(e["why"])
                header = self.records(name)[0]
                self.assertEqual(e["preset"], header["policy"]["preset"])

    def test_the_table_lists_every_run(self):
        runs = 0
        for folder in os.listdir(REALPACK):
            for s in ("A", "B"):
                path = os.path.join(REALPACK, folder, f"{s}.json")
                if os.path.exists(path):
                    with open(path) as f:
                        runs += len(json.load(f)["runs"])
        self.assertEqual(self.table.count("\n| `"), runs)
        self.assertIn("not converted", self.table)

    def verdict(self, prefix):
        matches = [n for n in self.expected if n.startswith(prefix)]
        self.assertEqual(len(matches), 1, prefix)
        return self.expected[matches[0]], self.records(matches[0])[0]

    def test_declared_ids_and_presets(self):
        e, h = self.verdict("torchtune_PackedDataset.A.eos_split_true")
        self.assertEqual(h["policy"], {"preset": "torchtune-packed", "pad_id": 99, "eos_id": 0, "overflow": "split",
                                       "row_end_target": "next_in_doc"})
        self.assertEqual(e["verdict"], "clean")
        e, h = self.verdict("trl_DataCollatorForLanguageModeling.A.per_document__padding_free-False")
        self.assertEqual((h["policy"], e["verdict"]), ({"preset": "hf-padded", "pad_id": 99}, "clean"))
        e, h = self.verdict("hf_DataCollatorWithFlattening.B.np_flash_attn_kwargs_seq_idx")
        self.assertEqual((h["policy"], e["verdict"]), ({"preset": "hf-flatten"}, "clean"))
        e, h = self.verdict("llmc_dataloader.B.eot_prepended__B-2__T-8__shuffle-0")
        self.assertEqual((h["policy"]["preset"], h["special_ids"]["bos"], e["verdict"]), ("llmc", 0, "clean"))

    def test_megatron_runs(self):
        e, h = self.verdict("megatron_GPTDataset.A.eod__valid__in_order__reset_position_ids-1+reset_attention_mask-1"
                            "+eod_mask_loss-1")
        self.assertEqual((h["policy"]["preset"], h["producer"]["extra"]["preset_match"], e["verdict"]),
                         ("megatron-gpt-docmask", "exact", "clean"))
        e, h = self.verdict("megatron_GPTDataset.A.eod__valid__in_order__reset_position_ids-1+reset_attention_mask-0"
                            "+eod_mask_loss-0")
        self.assertEqual((h["policy"]["preset"], h["producer"]["extra"]["preset_match"], e["invariants"]),
                         ("megatron-gpt", "closest", ["positions"]))
        self.assertIn("closest megatron-gpt", h["producer"]["extra"]["note"])
        # The training copy of get_ltor_masks_and_position_ids is buggy under its own (docmask) intent.
        e, h = self.verdict("megatron_training_get_ltor_masks_and_position_ids.A.eod__reset_position_ids-1"
                            "+reset_attention_mask-1+eod_mask_loss-1+pad_mask_loss-1")
        self.assertEqual((h["policy"]["preset"], h["policy"]["pad_id"]), ("megatron-gpt-docmask", 99))
        self.assertEqual(e["invariants"], ["positions", "segments"])
        # Train split: the partial last sample is dropped.
        e, _ = self.verdict("megatron_GPTDataset.A.eod__train__in_order__reset_position_ids-0+reset_attention_mask-0"
                            "+eod_mask_loss-0")
        self.assertEqual(e["invariants"], ["coverage"])


if __name__ == "__main__":
    unittest.main()

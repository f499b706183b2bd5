"""The example exec candidates, run as subprocesses speaking the exec protocol (DESIGN §6): the correct ones
answer hand-written requests as computed by hand (and as the real systems did on the realpack inputs); each
buggy one shows its bug on a hand-chosen request."""

import json
import unittest

from tests.helpers import Candidate, needs_realpack, preset, realpack, request

from packoracle.dump import validate_record

LESSON = [("a", [11, 12, 13]), ("b", [21, 22, 23, 24, 25, 26])]
LESSON_LOSSES = {"a": [0, 1, 3], "b": [0, 1, 1, 1, 1, 1]}


class CandidateCase(unittest.TestCase):
    script = None

    @classmethod
    def setUpClass(cls):
        cls.candidate = Candidate(cls.script)

    @classmethod
    def tearDownClass(cls):
        cls.candidate.close()

    def ask(self, req):
        records, last = self.candidate.ask(req)
        for r in records:
            validate_record(r)
            self.assertIn("producer", r)
            for row in r["rows"]:
                self.assertIn("doc_spans", row)
        return records, last

    def rows(self, records):
        return [row for r in records for row in r["rows"]]


class ReferenceTest(CandidateCase):
    script = "reference.py"

    def test_the_design_exchange(self):
        """DESIGN §6's whole exchange: 2 rows, 7 valid targets, micro-batch losses adding up to 9/7."""
        records, end = self.ask(request(1, LESSON, policy=preset("reference"), losses=LESSON_LOSSES))
        self.assertEqual(end, {"record": "end", "id": 1})
        self.assertEqual(records, [
            {"record": "microbatch", "step": 0, "micro_step": 0, "rank": 0, "rows": [
                {"input_ids": [11, 12, 13, 0, 0, 0, 0, 0], "labels": [12, 13, -100, -100, -100, -100, -100, -100],
                 "position_ids": [0, 1, 2, 0, 0, 0, 0, 0], "doc_ids": [0, 0, 0, -1, -1, -1, -1, -1],
                 "doc_spans": [{"doc_uid": "a", "start": 0, "length": 3, "doc_offset": 0}]}],
             "producer": {"loss_sum": 4.0, "denominator": 7, "denominator_scope": "global",
                          "loss": 0.5714285714285714}},
            {"record": "microbatch", "step": 0, "micro_step": 1, "rank": 0, "rows": [
                {"input_ids": [21, 22, 23, 24, 25, 26, 0, 0], "labels": [22, 23, 24, 25, 26, -100, -100, -100],
                 "position_ids": [0, 1, 2, 3, 4, 5, 0, 0], "doc_ids": [0, 0, 0, 0, 0, 0, -1, -1],
                 "doc_spans": [{"doc_uid": "b", "start": 0, "length": 6, "doc_offset": 0}]}],
             "producer": {"loss_sum": 5.0, "denominator": 7, "denominator_scope": "global",
                          "loss": 0.7142857142857143}}])
        valid = sum(1 for row in self.rows(records) for v in row["labels"] if v != -100)
        self.assertEqual(valid, 7)
        self.assertAlmostEqual(sum(r["producer"]["loss"] for r in records), 9 / 7)

    def test_micro_batches_and_ranks(self):
        records, _ = self.ask(request(2, LESSON, policy=preset("reference"), micro_batch_rows=2,
                                      losses=LESSON_LOSSES))
        self.assertEqual(len(records), 1)
        self.assertEqual(len(records[0]["rows"]), 2)
        self.assertAlmostEqual(records[0]["producer"]["loss"], 9 / 7)
        records, _ = self.ask(request(3, LESSON, policy=preset("reference"), dp_world_size=2, losses=LESSON_LOSSES))
        self.assertEqual([(r["rank"], r["micro_step"]) for r in records], [(0, 0), (1, 0)])
        self.assertEqual([r["producer"]["denominator"] for r in records], [7, 7])
        three = LESSON + [("c", [31, 32])]
        records, _ = self.ask(request(4, three, policy=preset("reference", denominator="rank_mean"),
                                      row_length=6, dp_world_size=2, losses=dict(LESSON_LOSSES, c=[0, 2])))
        # greedy rows of 6: [a], [b] (c does not fit after b), [c]; micro-batches 0, 1, 2 go to ranks 0, 1, 0:
        # rank 0 counts 2 + 1 targets, rank 1 counts 5
        self.assertEqual([(r["rank"], r["micro_step"], r["producer"]["denominator"], r["producer"]["denominator_scope"])
                          for r in records], [(0, 0, 3, "step"), (1, 0, 5, "step"), (0, 1, 3, "step")])

    def test_refuses_exactly_an_overlong_document(self):
        long_doc = [("a", list(range(1, 10)))]
        records, err = self.ask(request(5, long_doc, policy=preset("reference")))
        self.assertEqual((records, err["record"], err["id"]), ([], "error", 5))
        self.assertIn("overflow", err["message"])
        records, end = self.ask(request(6, [("a", list(range(1, 9)))], policy=preset("reference")))
        self.assertEqual(end["record"], "end")
        self.assertEqual(self.rows(records)[0]["labels"], [2, 3, 4, 5, 6, 7, 8, -100])
        records, end = self.ask(request(7, long_doc, policy=preset("reference", overflow="split")))
        rows = self.rows(records)
        self.assertEqual([r["doc_spans"][0]["doc_offset"] for r in rows], [0, 8])
        self.assertEqual(rows[1]["position_ids"][0], 8)  # split_positions continue

    def test_delimiters_and_supervision(self):
        req = request(8, LESSON, policy=preset("reference", eos_id=2), row_length=12, losses=LESSON_LOSSES)
        req["documents"][1]["supervised"] = [0, 0, 1, 1, 1, 1]
        records, _ = self.ask(req)
        row = self.rows(records)[0]
        self.assertEqual(row["input_ids"], [11, 12, 13, 2, 21, 22, 23, 24, 25, 26, 2, 0])
        self.assertEqual(row["labels"], [12, 13, 2, -100, -100, 23, 24, 25, 26, 2, -100, -100])

    def test_ignores_other_records(self):
        self.candidate.proc.stdin.write(json.dumps({"record": "hello"}) + "\n")
        records, end = self.ask(request(9, LESSON[:1], policy=preset("reference")))
        self.assertEqual(end["id"], 9)


class HfFlattenTest(CandidateCase):
    script = "hf_flatten.py"

    def test_lesson_in_two_budgets(self):
        records, _ = self.ask(request(1, LESSON, policy=preset("hf-flatten"), losses=LESSON_LOSSES))
        rows = self.rows(records)
        self.assertEqual([r["input_ids"] for r in rows], [[11, 12, 13], [21, 22, 23, 24, 25, 26]])
        self.assertEqual([r["labels"] for r in rows], [[-100, 12, 13], [-100, 22, 23, 24, 25, 26]])
        self.assertEqual([r["cu_seqlens"] for r in rows], [[0, 3], [0, 6]])
        self.assertEqual([r["producer"]["loss_sum"] for r in records], [4.0, 5.0])
        self.assertEqual([r["producer"]["denominator"] for r in records], [7, 7])

    def test_one_flattened_row(self):
        records, _ = self.ask(request(2, LESSON, policy=preset("hf-flatten"), row_length=16, losses=LESSON_LOSSES))
        (row,) = self.rows(records)
        self.assertEqual(row["labels"], [-100, 12, 13, -100, 22, 23, 24, 25, 26])
        self.assertEqual(row["position_ids"], [0, 1, 2, 0, 1, 2, 3, 4, 5])
        self.assertEqual(row["cu_seqlens"], [0, 3, 9])
        self.assertEqual(row["doc_ids"], [0, 0, 0, 1, 1, 1, 1, 1, 1])
        self.assertEqual(records[0]["producer"], {"loss_sum": 9.0, "denominator": 7, "denominator_scope": "global",
                                                  "loss": 9 / 7})

    def test_refusal(self):
        _, err = self.ask(request(3, [("a", list(range(1, 18)))], policy=preset("hf-flatten"), row_length=16))
        self.assertEqual(err["record"], "error")

    @needs_realpack
    def test_same_row_as_the_real_collator(self):
        for s in ("A", "B"):
            data = realpack("hf_DataCollatorWithFlattening", s)
            ret = data["runs"]["np_flash_attn_kwargs_seq_idx"]["returned"]
            docs = [(f"d{k}", d) for k, d in enumerate(data["input"]["documents"])]
            total = sum(len(d) for _, d in docs)
            records, _ = self.ask(request(10, docs, policy=preset("hf-flatten"), row_length=total))
            (row,) = self.rows(records)
            self.assertEqual(row["input_ids"], ret["input_ids"][0])
            self.assertEqual(row["labels"], ret["labels"][0])
            self.assertEqual(row["position_ids"], ret["position_ids"][0])
            self.assertEqual(row["cu_seqlens"], ret["cu_seq_lens_q"])
            self.assertEqual(row["doc_ids"], ret["seq_idx"][0])


class TorchtunePackedTest(CandidateCase):
    script = "torchtune_packed.py"

    def test_lesson(self):
        records, _ = self.ask(request(1, LESSON, policy=preset("torchtune-packed"), losses=LESSON_LOSSES))
        rows = self.rows(records)
        self.assertEqual(rows[0]["labels"], [12, 13, -100, -100, -100, -100, -100, -100])
        self.assertEqual(rows[0]["position_ids"], [0, 1, 2, 3, 4, 5, 6, 7])
        self.assertEqual(rows[0]["seq_lens"], [3, 5])
        self.assertEqual(rows[1]["seq_lens"], [6, 2])
        self.assertAlmostEqual(sum(r["producer"]["loss"] for r in records), 9 / 7)

    def test_refusal_unless_split(self):
        long_doc = [("a", list(range(1, 10)))]
        _, err = self.ask(request(2, long_doc, policy=preset("torchtune-packed")))
        self.assertIn("split_across_pack", err["message"])
        records, end = self.ask(request(3, long_doc, policy=preset("torchtune-packed", overflow="split",
                                                                   row_end_target="next_in_doc")))
        rows = self.rows(records)
        self.assertEqual(rows[0]["labels"][-1], 9)  # the pack's last label: the next token, in the next pack
        self.assertEqual(rows[1]["position_ids"][0], 0)  # 8 % 8

    @needs_realpack
    def test_same_packs_as_the_real_packed_dataset(self):
        for s in ("A", "B"):
            data = realpack("torchtune_PackedDataset", s)
            docs = [(f"d{k}", d) for k, d in enumerate(data["input"]["documents"])]
            for name, run in data["runs"].items():
                with self.subTest(set=s, run=name):
                    overrides = {"pad_id": 99, "eos_id": 0 if name.startswith("eos") else None}
                    if "split_true" in name:
                        overrides.update(overflow="split", row_end_target="next_in_doc")
                    records, _ = self.ask(request(4, docs, policy=preset("torchtune-packed", **overrides)))
                    rows = self.rows(records)
                    packs = run["returned"]["packs"]
                    self.assertEqual([r["input_ids"] for r in rows], [p["tokens"] for p in packs])
                    self.assertEqual([r["labels"] for r in rows], [p["labels"] for p in packs])
                    self.assertEqual([r["position_ids"] for r in rows], [p["input_pos"] for p in packs])
                    self.assertEqual([r["seq_lens"] for r in rows], [p["seq_lens"] for p in packs])


class BuggyTg02Test(CandidateCase):
    script = "buggy_tg02_torchtune_row_shift.py"

    def test_last_token_targets_the_next_sample(self):
        records, _ = self.ask(request(1, LESSON, policy=preset("torchtune-packed"), row_length=16,
                                      losses=LESSON_LOSSES))
        (row,) = self.rows(records)
        # correct per-sample shift: [12, 13, -100, 22, ...]; the whole-row shift trains 13 -> 21
        self.assertEqual(row["labels"][:9], [12, 13, 21, 22, 23, 24, 25, 26, -100])
        self.assertEqual(records[0]["producer"]["denominator"], 8)


class BuggyTg03Test(CandidateCase):
    script = "buggy_tg03_boundary_target.py"

    def test_boundary_target_kept(self):
        records, _ = self.ask(request(1, LESSON, policy=preset("reference", eos_id=2), row_length=16,
                                      losses=LESSON_LOSSES))
        (row,) = self.rows(records)
        self.assertEqual(row["input_ids"][:9], [11, 12, 13, 2, 21, 22, 23, 24, 25])
        self.assertEqual(row["labels"][3], 21)  # the EOS predicts the next document's first token
        self.assertEqual(row["labels"][:3], [12, 13, 2])
        self.assertEqual(records[0]["producer"]["denominator"], 10)  # 9 valid + the boundary one


class BuggyPo01Test(CandidateCase):
    script = "buggy_po01_positions_not_reset.py"

    def test_positions_run_on_across_documents(self):
        records, _ = self.ask(request(1, LESSON, policy=preset("reference"), row_length=16))
        (row,) = self.rows(records)
        self.assertEqual(row["position_ids"][3:6], [3, 4, 5])  # correct: 0 1 2 (b starts at slot 3)
        self.assertEqual(row["doc_ids"][:9], [0, 0, 0, 1, 1, 1, 1, 1, 1])  # the mask itself is right


class BuggyAc01Test(CandidateCase):
    script = "buggy_ac01_mean_of_means.py"

    def test_mean_of_micro_batch_means(self):
        records, _ = self.ask(request(1, LESSON, policy=preset("hf-flatten"), losses=LESSON_LOSSES))
        producers = [r["producer"] for r in records]
        self.assertEqual([(p["denominator"], p["denominator_scope"], p["loss"]) for p in producers],
                         [(2, "microbatch", 2.0), (5, "microbatch", 1.0)])
        # accumulation averages them: (2 + 1) / 2 = 1.5, the lesson's mean of sequence means, not 9/7
        self.assertEqual(sum(p["loss"] for p in producers) / len(producers), 1.5)
        self.assertNotAlmostEqual(sum(p["loss"] for p in producers), 9 / 7)



class BuggyDn04Test(CandidateCase):
    script = "buggy_dn04_nan_on_empty.py"

    def test_a_step_without_targets_reports_nan(self):
        records, _ = self.ask(request(1, [("a", [7])], policy=preset("torchtune-packed")))
        self.assertEqual(len(records), 1)
        self.assertEqual(records[0]["producer"]["denominator"], 0)
        self.assertNotEqual(records[0]["producer"]["loss"], records[0]["producer"]["loss"])  # NaN

    def test_a_step_with_targets_is_right(self):
        records, _ = self.ask(request(2, LESSON, policy=preset("torchtune-packed"), losses=LESSON_LOSSES))
        self.assertAlmostEqual(sum(r["producer"]["loss"] for r in records), 9 / 7)


if __name__ == "__main__":
    unittest.main()

"""The writer's records validate against the packed-batch format: required fields, types, equal lengths."""

import io
import json
import os
import subprocess
import unittest

from tests.helpers import PACKORACLE

from packoracle.dump import (PRESETS, DumpWriter, document_record, header_record, make_policy, microbatch_record,
                             resolve_policy, step_record, validate_lines, validate_policy, validate_record)

ROW = {"input_ids": [11, 12, 13, 0], "labels": [12, 13, -100, -100], "position_ids": [0, 1, 2, 0],
       "doc_ids": [0, 0, 0, -1], "doc_spans": [{"doc_uid": "a", "start": 0, "length": 3, "doc_offset": 0}]}


def header(**kw):
    args = dict(system="test", component="unit", version="1", policy={"preset": "reference"},
                special_ids={"pad": 0})
    args.update(kw)
    return header_record(**args)


class HeaderTest(unittest.TestCase):
    def test_header_has_every_required_field(self):
        h = header(extra={"note": "x"})
        self.assertEqual(h["record"], "header")
        self.assertEqual((h["schema"], h["version"]), ("packed-batch", 1))
        self.assertEqual(h["producer"], {"system": "test", "component": "unit", "version": "1",
                                         "extra": {"note": "x"}})
        for field in ("special_ids", "dp_world_size", "grad_accum_steps", "policy"):
            self.assertIn(field, h)

    def test_policy_is_one_flat_object_of_design_keys(self):
        self.assertEqual(make_policy("torchtune-packed", pad_id=99), {"preset": "torchtune-packed", "pad_id": 99})
        with self.assertRaisesRegex(ValueError, "unknown policy key 'ignore'"):
            validate_policy({"preset": "hf-flatten", "ignore": {"ignore_index": -100}})
        with self.assertRaisesRegex(ValueError, "policy key 'attention': value \"block\" is not allowed"):
            validate_policy({"attention": "block"})
        with self.assertRaisesRegex(ValueError, "eod_closes needs an EOD id"):  # a contradiction: the core's rule
            validate_policy({"boundary_source": "eod_closes"})
        with self.assertRaisesRegex(ValueError, "unknown preset 'hf'"):
            validate_policy({"preset": "hf"})
        with self.assertRaisesRegex(ValueError, "pad_to"):
            validate_policy({"pad_to": "multiple_of:0"})
        with self.assertRaisesRegex(ValueError, "eos_id"):
            validate_policy({"eos_id": "0"})
        validate_policy({"pad_to": "multiple_of:8", "eos_id": None, "stream_stride": "L+1", "loss_mask": True,
                         "overflow": "split", "padding": "right"})

    def test_resolve_fills_every_key_from_the_preset(self):
        resolved = resolve_policy({"preset": "torchtune-packed", "pad_id": 99})
        self.assertEqual(set(resolved), set(PRESETS["reference"]))
        self.assertEqual(resolved["pad_id"], 99)
        self.assertEqual(resolved["label_alignment"], "pre_shifted")

    def test_bad_header_fields_are_named(self):
        with self.assertRaisesRegex(ValueError, "'dp_world_size' must be >= 1"):
            header(dp_world_size=0)
        with self.assertRaisesRegex(ValueError, "special_ids.pad"):
            header(special_ids={"pad": "0"})
        with self.assertRaisesRegex(ValueError, "producer.system"):
            header(system="")


class DocumentTest(unittest.TestCase):
    def test_document_defaults_to_all_supervised(self):
        self.assertEqual(document_record("a", [11, 12, 13]),
                         {"record": "document", "doc_uid": "a", "tokens": [11, 12, 13], "supervised": [1, 1, 1]})

    def test_supervised_must_match_tokens(self):
        with self.assertRaisesRegex(ValueError, "document 'a': field 'supervised' has 2 entries, tokens has 3"):
            document_record("a", [11, 12, 13], [1, 1])
        with self.assertRaisesRegex(ValueError, r"supervised\[1\]' must be 0 or 1"):
            validate_record({"record": "document", "doc_uid": "a", "tokens": [1, 2], "supervised": [1, 2]})
        with self.assertRaisesRegex(ValueError, r"tokens\[1\]' must be an integer"):
            document_record("a", [1, "2"])


class MicrobatchTest(unittest.TestCase):
    def test_a_valid_microbatch(self):
        mb = microbatch_record([ROW], step=0, micro_step=1, rank=0,
                               producer={"loss_sum": 4.0, "denominator": 7, "denominator_scope": "global",
                                         "loss": 4 / 7, "grad_scale": None})
        self.assertEqual(mb["rows"][0]["input_ids"], [11, 12, 13, 0])
        self.assertNotIn("grad_scale", mb["producer"])
        self.assertEqual(mb["micro_step"], 1)

    def test_tensor_like_values_become_lists(self):
        class Tensor:
            def __init__(self, v):
                self.v = v

            def tolist(self):
                return self.v

        row = dict(ROW, input_ids=Tensor([11, 12, 13, 0]), loss_mask=Tensor([1.0, 1.0, 0.0, 0.0]),
                   attention_mask=Tensor([True, True, True, False]))
        mb = microbatch_record([row])
        self.assertEqual(mb["rows"][0]["loss_mask"], [1, 1, 0, 0])
        self.assertEqual(mb["rows"][0]["attention_mask"], [1, 1, 1, 0])

    def test_equal_lengths(self):
        for field in ("labels", "position_ids", "doc_ids", "loss_mask", "attention_mask"):
            row = dict(ROW)
            row[field] = [1, 1, 1]
            with self.subTest(field=field), self.assertRaisesRegex(
                    ValueError, rf"rows\[0\]: field '{field}' has 3 entries, input_ids has 4"):
                microbatch_record([row])

    def test_types_and_required_fields(self):
        with self.assertRaisesRegex(ValueError, r"labels\[2\]' must be an integer, got 1.5"):
            microbatch_record([dict(ROW, labels=[12, 13, 1.5, -100])])
        with self.assertRaisesRegex(ValueError, "field 'labels' is missing"):
            validate_record({"record": "microbatch", "step": 0, "micro_step": 0, "rank": 0,
                             "rows": [{"input_ids": [1], "doc_spans": []}]})
        with self.assertRaisesRegex(ValueError, "field 'doc_spans' is missing"):
            validate_record({"record": "microbatch", "step": 0, "micro_step": 0, "rank": 0,
                             "rows": [{"input_ids": [1], "labels": [1]}]})
        with self.assertRaisesRegex(ValueError, "field 'rank' must be >= 0"):
            microbatch_record([ROW], rank=-1)
        with self.assertRaisesRegex(ValueError, "'rows' must be a non-empty array"):
            microbatch_record([])

    def test_spans_stay_inside_the_row_and_do_not_overlap(self):
        spans = [{"doc_uid": "a", "start": 2, "length": 3, "doc_offset": 0}]
        with self.assertRaisesRegex(ValueError, r"doc_spans\[0\]: field 'length' runs to slot 5"):
            microbatch_record([dict(ROW, doc_spans=spans)])
        spans = [{"doc_uid": "a", "start": 0, "length": 2, "doc_offset": 0},
                 {"doc_uid": "b", "start": 1, "length": 1, "doc_offset": 0}]
        with self.assertRaisesRegex(ValueError, r"doc_spans\[1\]: field 'start' overlaps"):
            microbatch_record([dict(ROW, doc_spans=spans)])
        with self.assertRaisesRegex(ValueError, "'length' must be >= 1"):
            microbatch_record([dict(ROW, doc_spans=[{"doc_uid": "a", "start": 0, "length": 0, "doc_offset": 0}])])

    def test_producer_fields(self):
        with self.assertRaisesRegex(ValueError, "denominator_scope' must be one of"):
            microbatch_record([ROW], producer={"denominator": 7, "denominator_scope": "batch"})
        with self.assertRaisesRegex(ValueError, "a denominator needs its scope"):
            microbatch_record([ROW], producer={"denominator": 7})
        with self.assertRaisesRegex(ValueError, "loss_sum' must be a number"):
            microbatch_record([ROW], producer={"loss_sum": "4"})
        with self.assertRaisesRegex(ValueError, "denominator_scope' is given without a denominator"):
            microbatch_record([ROW], producer={"loss_sum": 4.0, "denominator_scope": "global"})
        with self.assertRaisesRegex(ValueError, "gives none of loss_sum, denominator, loss"):
            microbatch_record([ROW], producer={"grad_scale": 2.0})

    def test_partial_producer_totals(self):
        """Any non-empty subset of loss_sum, denominator (with its scope) and loss (DESIGN §5)."""
        for producer in ({"denominator": 7, "denominator_scope": "global"}, {"loss_sum": 4.0}, {"loss": 0.5},
                         {"loss_sum": 4.0, "loss": 0.5}, {"denominator": 7, "denominator_scope": "step", "loss": 0.5}):
            with self.subTest(producer=producer):
                self.assertEqual(microbatch_record([ROW], producer=producer)["producer"], producer)
        # Nothing given (every value None): no producer object at all, rather than an empty one.
        self.assertNotIn("producer", microbatch_record([ROW], producer={"loss_sum": None, "denominator": None}))

    def test_flattened_means_one_row(self):
        with self.assertRaisesRegex(ValueError, "a flattened micro-batch has exactly one"):
            microbatch_record([ROW, ROW], flattened=True)

    def test_step_record(self):
        self.assertEqual(step_record(0, rank=0, num_items_in_batch=7),
                         {"record": "step", "step": 0, "rank": 0, "num_items_in_batch": 7})


class WriterTest(unittest.TestCase):
    def write(self, records):
        out = io.StringIO()
        with DumpWriter(out) as w:
            for r in records:
                w.write(r)
        return out.getvalue().splitlines()

    def test_one_json_object_per_line_header_first(self):
        lines = self.write([header(), document_record("a", [11, 12, 13]), microbatch_record([ROW])])
        self.assertEqual([json.loads(line)["record"] for line in lines], ["header", "document", "microbatch"])
        records = validate_lines(lines)
        self.assertEqual(len(records), 3)

    def test_header_must_come_first_and_once(self):
        with self.assertRaisesRegex(ValueError, "the header must come first"):
            self.write([document_record("a", [1])])
        with self.assertRaisesRegex(ValueError, "exactly one header"):
            self.write([header(), header()])

    def test_spans_name_written_documents(self):
        with self.assertRaisesRegex(ValueError, "names a document 'a' that was not written"):
            self.write([header(), document_record("b", [1]), microbatch_record([ROW])])
        with self.assertRaisesRegex(ValueError, "document 'a': written twice"):
            self.write([header(), document_record("a", [1]), document_record("a", [1])])

    def test_validate_lines_checks_token_conservation(self):
        lines = self.write([header(), document_record("a", [11, 12, 14]), microbatch_record([ROW])])
        with self.assertRaisesRegex(ValueError, r":3: rows\[0\] doc_spans\[0\]: input_ids\[2\] is 13, but token 2 "
                                                r"of 'a' is 14"):
            validate_lines(lines)
        with self.assertRaisesRegex(ValueError, ":2: the header must be the first record"):
            validate_lines([lines[0], lines[0]])
        with self.assertRaisesRegex(ValueError, ":1: not JSON"):
            validate_lines(["{"])

    def test_a_repeated_document_record_must_repeat_its_content_as_verify_reads_it(self):
        first = document_record("a", [11, 12, 13])
        rows = microbatch_record([ROW])
        # a multi-rank dump writes a document once per rank that holds it: the same record again is no problem
        same = [json.dumps(r) for r in (header(), first, rows, first)]
        self.assertEqual(len(validate_lines(same)), 4)
        import tempfile
        for other, difference in ((document_record("a", [11, 12, 14]), "token 2 is 14 where the earlier record has 13"),
                                  (document_record("a", [11, 12]), "2 tokens where the earlier record has 3"),
                                  (document_record("a", [11, 12, 13], [1, 0, 1]),
                                   "supervised[1] is 0 where the earlier record has 1")):
            lines = [json.dumps(r) for r in (header(), first, rows, other)]
            message = f"doc_uid 'a' was given before with other content ({difference})"
            with self.assertRaises(ValueError) as caught:
                validate_lines(lines, "dump")
            self.assertEqual(str(caught.exception), f"dump:4: {message}")
            # the same sentence as `packoracle verify`, the rule's owner (jobs/src/verify_documents.cc)
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "dump.jsonl")
                with open(path, "w") as f:
                    f.write("\n".join(lines) + "\n")
                run = subprocess.run([PACKORACLE, "verify", path], capture_output=True, text=True)
            self.assertEqual(run.returncode, 2, run.stderr)
            self.assertIn(message, run.stderr)

    def test_writes_a_file(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "x.jsonl")
            with DumpWriter(path) as w:
                w.header(system="s", component="c", policy={"preset": "reference"})
                w.document("a", [11, 12, 13])
                w.microbatch([ROW])
                w.step(0, num_items_in_batch=2)
            with open(path) as f:
                self.assertEqual(len(validate_lines(f)), 4)


class SchemaTablesTest(unittest.TestCase):
    """The tables packoracle.dump reads from schema.json (`packoracle schema`, committed; ctest
    schema.committed_copy_is_current holds the file to the core's output) drive what the writer accepts."""

    def test_the_scope_type_names_the_core_scopes(self):
        import typing
        from packoracle.dump import DENOMINATOR_SCOPES, DenominatorScope
        self.assertEqual(typing.get_args(DenominatorScope), DENOMINATOR_SCOPES)

    def test_a_row_field_s_table_entry_decides_what_the_writer_takes(self):
        from packoracle.dump import format as fmt
        self.assertEqual(fmt.ROW_INT_FIELDS, ("position_ids", "cu_seqlens", "seq_lens", "doc_ids", "attention_mask"))
        with self.assertRaisesRegex(ValueError, "field 'attention_mask\\[1\\]' must be 0 or 1"):
            microbatch_record([dict(ROW, attention_mask=[1, 2, 1, 1])])
        with self.assertRaisesRegex(ValueError, "field 'doc_ids' has 2 entries, input_ids has 4"):
            microbatch_record([dict(ROW, doc_ids=[0, 0])])
        microbatch_record([dict(ROW, cu_seqlens=[0, 3, 4])])  # a per-row list: its own length

    def test_a_key_s_domain_decides_what_the_writer_takes_without_the_core(self):
        from packoracle.dump import format as fmt
        for key, value in (("loss_mask", 1), ("stream_stride", "L+2"), ("pad_to", "multiple_of:0"),
                           ("eos_id", "0"), ("attention", "doc")):
            with self.assertRaisesRegex(ValueError, f"policy.{key}: must be "):
                fmt.validate_policy_without_core({key: value})
        for key, value in (("loss_mask", True), ("stream_stride", None), ("pad_to", "multiple_of:8"),
                           ("eos_id", None), ("bos_id", 3), ("preset", None), ("shift", "document")):
            fmt.validate_policy_without_core({key: value})


class PresetSnapshotTest(unittest.TestCase):
    def test_snapshot_equals_the_cli(self):
        self.assertTrue(os.access(PACKORACLE, os.X_OK), f"{PACKORACLE} is not built (set PACKORACLE_BIN)")
        out = subprocess.run([PACKORACLE, "presets", "--format", "json"], check=True, capture_output=True,
                             text=True).stdout
        live = {p["name"]: p["policy"] for p in json.loads(out)}
        self.assertEqual(live, PRESETS)

    def test_every_preset_validates(self):
        for name, policy in PRESETS.items():
            validate_policy(policy, name)


if __name__ == "__main__":
    unittest.main()

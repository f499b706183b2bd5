"""Each converter on the realpack inputs gives the expected records: the system's own labels, positions and
boundary tensors unchanged, and doc_spans that conserve the documents' tokens. Inconsistent input raises
ValueError naming the field and the index."""

import unittest

from tests.helpers import needs_realpack, realpack

from packoracle.dump import (Document, DocumentSequence, as_documents, from_hf_flatten, from_hf_padded,
                             from_llmc, from_megatron_gpt, from_torchtune_packed, from_trl_constant_length,
                             from_trl_padding_free, validate_record)

SETS = ("A", "B")


def span(uid, start, length, offset=0):
    return {"doc_uid": uid, "start": start, "length": length, "doc_offset": offset}


class Conservation:
    def assert_conserved(self, records, documents, *, complete=True):
        """Every span holds its document's tokens; with `complete`, every document is tiled exactly once, in
        order (pieces in row order)."""
        docs = {d.uid: d for d in as_documents(documents)}
        seen = {uid: [] for uid in docs}
        for mb in records:
            validate_record(mb)
            for row in mb["rows"]:
                covered = [False] * len(row["input_ids"])
                for s in row["doc_spans"]:
                    doc = docs[s["doc_uid"]]
                    for t in range(s["length"]):
                        self.assertEqual(row["input_ids"][s["start"] + t], doc.tokens[s["doc_offset"] + t])
                        covered[s["start"] + t] = True
                    seen[s["doc_uid"]].append((s["doc_offset"], s["length"]))
        if complete:
            for uid, pieces in seen.items():
                nxt = 0
                for offset, length in pieces:
                    self.assertEqual(offset, nxt, f"{uid}: piece at {offset}, expected {nxt}")
                    nxt += length
                self.assertEqual(nxt, len(docs[uid].tokens), f"{uid} not fully covered")


@needs_realpack
class HfFlattenTest(unittest.TestCase, Conservation):
    def test_every_run(self):
        for s in SETS:
            data = realpack("hf_DataCollatorWithFlattening", s)
            docs = data["input"]["documents"]
            for name, run in data["runs"].items():
                with self.subTest(set=s, run=name):
                    ret = run["returned"]
                    mb = from_hf_flatten(ret, docs)
                    row = mb["rows"][0]
                    self.assertTrue(mb["flattened"])
                    self.assertEqual(row["labels"], ret["labels"][0])
                    self.assertEqual(row["position_ids"], ret["position_ids"][0])
                    self.assertEqual(row.get("cu_seqlens"), ret.get("cu_seq_lens_q"))
                    self.assertEqual(row.get("doc_ids"), ret["seq_idx"][0] if "seq_idx" in ret else None)
                    starts = [0]
                    for d in docs:
                        starts.append(starts[-1] + len(d))
                    self.assertEqual(row["doc_spans"], [span(f"d{k}", starts[k], len(d)) for k, d in enumerate(docs)])
                    self.assert_conserved([mb], docs)

    def test_inconsistent_input_names_field_and_index(self):
        ret = realpack("hf_DataCollatorWithFlattening", "A")["runs"]["np_flash_attn_kwargs_seq_idx"]["returned"]
        docs = [[11, 12, 13], [21, 22, 23, 24, 25, 26]]
        bad = dict(ret, labels=[ret["labels"][0][:-1]])
        with self.assertRaisesRegex(ValueError, r"field 'labels\[0\]' has 8 entries, input_ids\[0\] has 9"):
            from_hf_flatten(bad, docs)
        with self.assertRaisesRegex(ValueError, r"field 'input_ids\[3\]' is 21, but document 'd0' \(token 3\) "
                                                r"continues with 14"):
            from_hf_flatten(ret, [[11, 12, 13, 14], [21, 22, 23, 24, 25, 26]])
        with self.assertRaisesRegex(ValueError, r"cu_seq_lens_k\[1\]' is 4 but cu_seq_lens_q\[1\] is 3"):
            from_hf_flatten(dict(ret, cu_seq_lens_k=[0, 4, 9]), docs)
        with self.assertRaisesRegex(ValueError, "field 'input_ids' has 2 rows, a flattened batch has one"):
            from_hf_flatten(dict(ret, input_ids=ret["input_ids"] * 2), docs)
        with self.assertRaisesRegex(ValueError, "field 'labels' is missing"):
            from_hf_flatten({"input_ids": ret["input_ids"]}, docs)
        with self.assertRaisesRegex(ValueError, r"input_ids\[6\]' is 24, which continues no document"):
            from_hf_flatten(ret, [[11, 12, 13], [21, 22, 23]])


@needs_realpack
class TrlCollatorTest(unittest.TestCase, Conservation):
    def test_padding_free_runs(self):
        for s in SETS:
            data = realpack("trl_DataCollatorForLanguageModeling", s)
            docs = data["input"]["documents"]
            for name in ("per_document|padding_free=True", "packed_row_with_seq_lengths|padding_free=True",
                         "per_document|padding_free=True|pad_to_multiple_of=8"):
                with self.subTest(set=s, run=name):
                    ret = data["runs"][name]["returned"]
                    mb = from_trl_padding_free(ret, docs, pad_id=99)
                    row = mb["rows"][0]
                    self.assertEqual(row["labels"], ret["labels"][0])
                    self.assertEqual(row["position_ids"], ret["position_ids"][0])
                    total = sum(len(d) for d in docs)
                    self.assertEqual(sum(sp["length"] for sp in row["doc_spans"]), total)
                    self.assertEqual(row["input_ids"][total:], [99] * (len(row["input_ids"]) - total))
                    self.assert_conserved([mb], docs)

    def test_padded_runs(self):
        for s in SETS:
            data = realpack("trl_DataCollatorForLanguageModeling", s)
            docs = data["input"]["documents"]
            ret = data["runs"]["per_document|padding_free=False"]["returned"]
            mb = from_hf_padded(ret, docs, pad_id=99)
            self.assertEqual(len(mb["rows"]), len(docs))
            for k, row in enumerate(mb["rows"]):
                self.assertEqual(row["doc_spans"], [span(f"d{k}", 0, len(docs[k]))])
                self.assertEqual(row["attention_mask"], ret["attention_mask"][k])
                self.assertEqual(row["labels"], ret["labels"][k])
            self.assert_conserved([mb], docs)
            packed = data["runs"]["packed_row_with_seq_lengths|padding_free=False"]["returned"]
            mb = from_hf_padded(packed, docs, pad_id=99)
            self.assertEqual(len(mb["rows"]), 1)
            self.assertEqual(len(mb["rows"][0]["doc_spans"]), len(docs))
            self.assertNotIn("position_ids", mb["rows"][0])

    def test_padding_that_is_not_the_pad_id(self):
        ret = realpack("trl_DataCollatorForLanguageModeling", "A")["runs"][
            "per_document|padding_free=True|pad_to_multiple_of=8"]["returned"]
        with self.assertRaisesRegex(ValueError, r"field 'input_ids\[9\]' is 99, which follows the last document 0"):
            from_trl_padding_free(ret, [[11, 12, 13], [21, 22, 23, 24, 25, 26]], pad_id=0)
        with self.assertRaisesRegex(ValueError, "field 'position_ids' is missing"):
            from_trl_padding_free({"input_ids": ret["input_ids"], "labels": ret["labels"]}, [[1]])

    def test_constant_length_dataset(self):
        for s in SETS:
            data = realpack("trl_ConstantLengthDataset", s)
            for name, run in data["runs"].items():
                with self.subTest(set=s, run=name):
                    concat = "append_concat_token=True" in name
                    docs = [d + [0] if concat else d for d in data["input"]["documents"]]
                    mb = from_trl_constant_length(run["returned"], docs)
                    self.assertEqual([r["input_ids"] for r in mb["rows"]],
                                     [e["input_ids"] for e in run["returned"]["examples"]])
                    stream = [t for d in docs for t in d]
                    self.assertEqual(sum(len(r["input_ids"]) for r in mb["rows"]), 8 * len(mb["rows"]))
                    self.assertEqual([t for r in mb["rows"] for t in r["input_ids"]], stream[:8 * len(mb["rows"])])
                    self.assert_conserved([mb], docs, complete=False)


@needs_realpack
class TorchtuneTest(unittest.TestCase, Conservation):
    def test_every_run(self):
        for s in SETS:
            data = realpack("torchtune_PackedDataset", s)
            for name, run in data["runs"].items():
                with self.subTest(set=s, run=name):
                    samples = run["prepared_samples (ds given to PackedDataset)"]
                    docs = [x["tokens"] for x in samples]
                    packs = [dict(p, mask=m) for p, m in zip(run["returned"]["packs"],
                                                              run["padded_collate_packed"]["mask"])]
                    mb = from_torchtune_packed(packs, docs, pad_id=99, split_across_pack="split_true" in name)
                    for row, p in zip(mb["rows"], run["returned"]["packs"]):
                        self.assertEqual(row["labels"], p["labels"])
                        self.assertEqual(row["position_ids"], p["input_pos"])
                        self.assertEqual(row["seq_lens"], p["seq_lens"])
                        real = sum(sp["length"] for sp in row["doc_spans"])
                        self.assertEqual(row["doc_ids"][real:], [-1] * (8 - real))
                    self.assert_conserved([mb], docs)

    def test_split_spans(self):
        run = realpack("torchtune_PackedDataset", "A")["runs"]["no_eos_split_true"]
        docs = [x["tokens"] for x in run["prepared_samples (ds given to PackedDataset)"]]
        mb = from_torchtune_packed(run["returned"]["packs"], docs, pad_id=99, split_across_pack=True)
        self.assertEqual(mb["rows"][0]["doc_spans"], [span("d0", 0, 3), span("d1", 3, 5)])
        self.assertEqual(mb["rows"][1]["doc_spans"], [span("d1", 0, 1, 5)])
        with self.assertRaisesRegex(ValueError, r"pack 0: field 'input_ids\[3\]' starts 5 tokens of document 'd1' cut at the row's end"):
            from_torchtune_packed(run["returned"]["packs"], docs, pad_id=99, split_across_pack=False)

    def test_stacked_batch_and_errors(self):
        run = realpack("torchtune_PackedDataset", "B")["runs"]["no_eos_split_false"]
        docs = [x["tokens"] for x in run["prepared_samples (ds given to PackedDataset)"]]
        collated = run["padded_collate_packed"]
        mb = from_torchtune_packed(collated, docs, pad_id=99)
        self.assertEqual(len(mb["rows"]), 2)
        self.assertEqual(mb["rows"][1]["doc_ids"], [0, 0, 0, 0, 0, 0, 0, 1])
        bad = [dict(p) for p in run["returned"]["packs"]]
        bad[1]["input_pos"] = bad[1]["input_pos"][:5]
        with self.assertRaisesRegex(ValueError, "pack 1: field 'input_pos' has 5 entries, tokens has 8"):
            from_torchtune_packed(bad, docs, pad_id=99)
        bad = [dict(p) for p in run["returned"]["packs"]]
        bad[0]["mask"] = [[1] * 8 for _ in range(8)]
        with self.assertRaisesRegex(ValueError, r"field 'mask\[0\]' is not block-causal"):
            from_torchtune_packed(bad, docs, pad_id=99)


@needs_realpack
class MegatronTest(unittest.TestCase, Conservation):
    def samples(self, s, name):
        run = realpack("megatron_GPTDataset", s)["runs"][name]
        docs = [run["documents_given"][k] for k in run.get("document_index", range(len(run["documents_given"])))]
        shuffle = run.get("shuffle_index", list(range(len(run["returned"]["samples"]))))
        starts = [tuple(run["sample_index"][shuffle[i]]) for i in range(len(run["returned"]["samples"]))]
        return run, docs, starts

    def test_docmask_valid_in_order(self):
        run, docs, starts = self.samples("A", "eod|valid|in_order|reset_position_ids=1,reset_attention_mask=1,"
                                              "eod_mask_loss=1")
        mb = from_megatron_gpt(run["returned"]["samples"], docs, starts=starts, attention_mask="doc_ids")
        r0, r1 = mb["rows"]
        self.assertEqual(r0["doc_spans"], [span("d0", 0, 4), span("d1", 4, 4)])
        self.assertEqual(r1["doc_spans"], [span("d1", 0, 3, 4)])
        self.assertEqual(r0["doc_ids"], [0, 0, 0, 0, 1, 1, 1, 1])
        self.assertEqual(r1["doc_ids"], [0, 0, 0, -1, -1, -1, -1, -1])
        self.assertEqual(r0["loss_mask"], [1, 1, 1, 0, 1, 1, 1, 1])
        self.assertEqual(r1["labels"], run["returned"]["samples"][1]["labels"])
        self.assert_conserved([mb], docs)

    def test_cursor_and_search_without_starts(self):
        run, docs, _ = self.samples("B", "eod|valid|in_order|reset_position_ids=0,reset_attention_mask=0,"
                                         "eod_mask_loss=0")
        seq = DocumentSequence(docs)
        rows = [from_megatron_gpt([smp], seq)["rows"][0] for smp in run["returned"]["samples"]]
        self.assertEqual([r["doc_spans"][0] for r in rows], [span("d0", 0, 6), span("d1", 0, 1, 2),
                                                               span("d2", 0, 1, 7)])
        self.assertNotIn("doc_ids", rows[0])  # a plain causal mask says nothing about documents

    def test_shuffled_train_split_and_cu_seqlens(self):
        run, docs, starts = self.samples("B", "eod|train|as_built|reset_position_ids=1,reset_attention_mask=1,"
                                              "eod_mask_loss=1")
        self.assertEqual(starts, [(1, 2), (0, 0)])
        mb = from_megatron_gpt(run["returned"]["samples"], docs, starts=starts)
        self.assertEqual(mb["rows"][0]["doc_spans"], [span("d1", 0, 1, 2), span("d2", 1, 7)])
        self.assert_conserved([mb], docs, complete=False)
        run, docs, starts = self.samples("A", "eod|valid|in_order|inter_document_masking=1")
        mb = from_megatron_gpt(run["returned"]["samples"], docs, starts=starts)
        self.assertEqual(mb["rows"][0]["cu_seqlens"], [0, 4, 8, 8, 8, 8, 8, 8, 8])

    def test_errors(self):
        run, docs, starts = self.samples("A", "eod|valid|in_order|reset_position_ids=1,reset_attention_mask=1,"
                                              "eod_mask_loss=1")
        samples = run["returned"]["samples"]
        with self.assertRaisesRegex(ValueError, r"sample 0: field 'input_ids\[0\]' is 11, but the window at stream "
                                                r"offset 1 has 12 there"):
            from_megatron_gpt(samples, docs, starts=[1, 8])
        with self.assertRaisesRegex(ValueError, r"sample 1: field 'input_ids\[3\]' is 0, but the window at stream "
                                                r"offset 8 has 7 there \(padding\)"):
            from_megatron_gpt(samples, docs, starts=[0, 8], pad_id=7)
        bad = [dict(samples[0], loss_mask=[1] * 7)]
        with self.assertRaisesRegex(ValueError, "sample 0: field 'loss_mask' has 7 entries, tokens has 8"):
            from_megatron_gpt(bad, docs, starts=[0])
        with self.assertRaisesRegex(ValueError, "no window of the concatenated documents"):
            from_megatron_gpt([samples[0]], [[1, 2, 3]])
        ltor = realpack("megatron_training_get_ltor_masks_and_position_ids", "A")["runs"][
            "eod|reset_position_ids=0,reset_attention_mask=1,eod_mask_loss=0,pad_mask_loss=0"]["returned"]
        row1 = dict(samples[1], attention_mask=ltor["attention_mask"][1])
        mb = from_megatron_gpt([row1], docs, starts=[8], pad_id=0)
        self.assertEqual(mb["rows"][0]["doc_ids"], [0, 1, 1, -1, -1, -1, -1, -1])  # the training copy's bug


@needs_realpack
class LlmcTest(unittest.TestCase, Conservation):
    def test_every_run_with_a_batch(self):
        for s in SETS:
            data = realpack("llmc_dataloader", s)
            for name, run in data["runs"].items():
                if "returned" not in run:
                    continue
                with self.subTest(set=s, run=name):
                    B, T = run["arguments"]["B"], run["arguments"]["T"]
                    eot = name.startswith("eot")
                    docs = [([0] if eot else []) + d for d in data["input"]["documents"]]
                    seq = DocumentSequence(docs)
                    epoch = run["returned"]["batches"][:run["returned"]["shard_num_samples"]]
                    mbs = [from_llmc(b, seq, B=B, T=T, micro_step=i) for i, b in enumerate(epoch)]
                    for mb, batch in zip(mbs, epoch):
                        self.assertEqual(len(mb["rows"]), B)
                        self.assertEqual([t for r in mb["rows"] for t in r["labels"]], batch["targets"])
                        self.assertNotIn("position_ids", mb["rows"][0])
                    self.assert_conserved(mbs, docs, complete=False)

    def test_rows_and_offsets(self):
        run = realpack("llmc_dataloader", "B")["runs"]["eot_prepended|B=2|T=8|shuffle=0"]
        docs = [[0] + d for d in realpack("llmc_dataloader", "B")["input"]["documents"]]
        mb = from_llmc(run["returned"]["batches"][0], docs, B=2, T=8, stream_offset=0)
        self.assertEqual(mb["rows"][1]["doc_spans"], [span("d1", 0, 1, 2), span("d2", 1, 7)])
        with self.assertRaisesRegex(ValueError, "field 'inputs' has 16 entries, B\\*T is 8"):
            from_llmc(run["returned"]["batches"][0], docs, B=1, T=8)
        with self.assertRaisesRegex(ValueError, r"field 'input_ids\[0\]' is 0, but the window at stream offset 1"):
            from_llmc(run["returned"]["batches"][0], docs, B=2, T=8, stream_offset=1)


class SpanMatchingTest(unittest.TestCase):
    def test_documents(self):
        with self.assertRaisesRegex(ValueError, "repeats 'a'"):
            as_documents([{"doc_uid": "a", "tokens": [1]}, {"doc_uid": "a", "tokens": [2]}])
        with self.assertRaisesRegex(ValueError, "supervised' has 1 entries, tokens has 2"):
            Document("a", [1, 2], [1])
        self.assertEqual([d.uid for d in as_documents([[1], [2]])], ["d0", "d1"])

    def test_sequence_is_shared_across_batches(self):
        seq = DocumentSequence([[1, 2], [3, 4, 5], [6]])
        a = from_hf_flatten({"input_ids": [[1, 2]], "labels": [[-100, 2]]}, seq)
        b = from_hf_flatten({"input_ids": [[3, 4, 5, 6]], "labels": [[-100, 4, 5, -100]]}, seq)
        self.assertEqual(a["rows"][0]["doc_spans"], [span("d0", 0, 2)])
        self.assertEqual(b["rows"][0]["doc_spans"], [span("d1", 0, 3), span("d2", 3, 1)])
        self.assertTrue(seq.exhausted)

    def test_truncated_bfd_row(self):
        mb = from_trl_padding_free({"input_ids": [[1, 2, 3, 4]], "labels": [[-100, 2, 3, 4]],
                                    "position_ids": [[0, 1, 2, 3]]}, [[1, 2, 3, 4, 5, 6]], overflow="truncate")
        self.assertEqual(mb["rows"][0]["doc_spans"], [span("d0", 0, 4)])


if __name__ == "__main__":
    unittest.main()

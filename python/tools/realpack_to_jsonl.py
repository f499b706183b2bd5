#!/usr/bin/env python3
"""Converts every realpack run (fixtures/realpack: what HF transformers, TRL, torchtune, Megatron-LM and
llm.c really returned on two inputs) into a packed-batch JSON Lines dump, one file per run, and prints a
markdown table: run -> declared preset -> the verdict `packoracle verify` should give, and why.

    python3 python/tools/realpack_to_jsonl.py OUT_DIR [--realpack DIR] [--expected FILE] [--table FILE]

Each dump declares the policy the system claims for itself: its preset, with overrides only for the ids the
run used (pad 99, EOS/EOD/EOT 0 or none) and for the configuration knobs a preset's notes name (torchtune
split_across_pack, TRL pad_to_multiple_of, HF without flash-attention kwargs, llm.c/Megatron without a
delimiter, Megatron inter_document_masking). A run whose flags match no preset (Megatron with some of
reset_position_ids / reset_attention_mask / eod_mask_loss) declares the closest one (the preset agreeing on
most flags) and says so in producer.extra; verify is then expected to report exactly where the flags differ.

--expected FILE writes the expected verdicts as JSON (python/tests/expected_verdicts.json is this output).
"""

import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from packoracle.dump import (PRESETS, DocumentSequence, DumpWriter, from_hf_flatten, from_hf_padded, from_llmc,  # noqa: E402
                             from_megatron_gpt, from_torchtune_packed, from_trl_constant_length,
                             from_trl_padding_free)

REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_REALPACK = os.path.join(REPO_ROOT, "fixtures", "realpack")

WHY_SHUFFLED = (" The windows come in the system's shuffled order: coverage must follow each document's "
                "offsets, not row order.")


class Run:
    """One realpack run to convert: where it comes from, what to declare, the records, the expectation."""

    def __init__(self, folder, set_name, run):
        self.folder, self.set, self.run = folder, set_name, run
        self.file = f"{folder}.{set_name}.{sanitize(run)}.jsonl"
        self.header = None
        self.documents = None
        self.microbatches = []
        self.expected = None  # {"verdict", "invariants", "why", ...}
        self.preset = None
        self.skipped = None   # why the run has no dump


def sanitize(run):
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", run.replace("|", "__").replace("=", "-").replace(",", "+"))


def dropped_tokens(run, last_is_row_end_target):
    """Stream tokens no row holds (the dump is the system's whole output for the whole input), except the stream's
    last token when it is the previous row's row-end target."""
    covered = set()
    for mb in run.microbatches:
        for row in mb["rows"]:
            for sp in row["doc_spans"]:
                covered.update((sp["doc_uid"], sp["doc_offset"] + t) for t in range(sp["length"]))
    missing = [(d.uid, k) for d in run.documents for k in range(len(d)) if (d.uid, k) not in covered]
    last = (run.documents[-1].uid, len(run.documents[-1]) - 1)
    if last_is_row_end_target and missing == [last]:
        return 0
    return len(missing)


def why_dropped(n):
    return (f" The system drops its partial last window: {n} stream token(s) are in no row, never trained "
            "(the preset's stream layout keeps that window, padded): coverage.")


def docs_with(documents, eos=None, bos=None, order=None):
    order = range(len(documents)) if order is None else order
    out = []
    for k in order:
        tokens = ([bos] if bos is not None else []) + list(documents[k]) + ([eos] if eos is not None else [])
        out.append({"doc_uid": f"d{k}", "tokens": tokens})
    return DocumentSequence(out)


def header(run, *, system, component, version, policy, special_ids, extra, grad_accum_steps=1):
    extra = {k: v for k, v in extra.items() if v is not None}
    extra.setdefault("realpack", f"{run.folder}/{run.set}.json")
    extra.setdefault("run", run.run)
    run.preset = policy.get("preset")
    run.header = dict(system=system, component=component, version=version, policy=policy,
                      special_ids=special_ids, dp_world_size=1, grad_accum_steps=grad_accum_steps, extra=extra)


def expect(run, invariants=(), why="", also_possible=()):
    # packing_invariance (the kit's tiny decoder) may also fire where positions or attention are wrong under a
    # policy that promises isolation (doc_causal + doc_reset); whether the decoder's losses move depends on which
    # encoding the attention is derived from, so it is allowed, not required.
    policy = PRESETS.get(run.preset or "", {})
    if set(invariants) & {"positions", "segments", "attention"} and \
            (policy.get("attention"), policy.get("positions")) == ("doc_causal", "doc_reset"):
        also_possible = tuple(also_possible) + ("packing_invariance",)
    run.expected = {"preset": run.preset,
                    "verdict": "violations" if invariants else "clean",
                    "invariants": sorted(set(invariants)),
                    "why": why.strip()}
    if also_possible:
        run.expected["also_possible"] = sorted(set(also_possible))


# ---- huggingface/transformers DataCollatorWithFlattening ----------------------------------------------------

def hf_flatten(run, data):
    r = data["runs"][run.run]
    docs = docs_with(data["input"]["documents"])
    policy = {"preset": "hf-flatten"}
    extra = {"arguments": r["arguments"], "preset_match": "exact"}
    fa_kwargs = "cu_seq_lens_q" in r["returned"]
    if not fa_kwargs:
        # Without return_flash_attn_kwargs the only boundary encoding is position_ids, which transformers' flash
        # path reads when B = 1 (conventions §2.1.2).
        policy["boundary_source"] = "position_reset"
        extra["note"] = ("return_flash_attn_kwargs=False: no cu_seq_lens, transformers derives the boundaries from "
                         "the reset position_ids (B = 1), declared boundary_source position_reset")
    header(run, system="huggingface/transformers", component="DataCollatorWithFlattening",
           version="PR #36456", policy=policy, special_ids={"pad": None, "bos": None, "eos": None, "eod": None,
                                                           "separator": -100}, extra=extra)
    run.documents = docs.documents
    run.microbatches = [from_hf_flatten(r["returned"], docs)]
    expect(run, why="One flattened row; labels[doc start] = -100 (separator) so the boundary target is excluded; "
                    "positions reset per document" + ("; cu_seq_lens_q and seq_idx agree with the documents."
                                                      if fa_kwargs else "; boundaries from the position resets."))


# ---- huggingface/trl DataCollatorForLanguageModeling --------------------------------------------------------

def trl_collator(run, data):
    r = data["runs"][run.run]
    documents = data["input"]["documents"]
    docs = docs_with(documents)
    packed_row = run.run.startswith("packed_row")
    padding_free = "padding_free=True" in run.run
    extra = {"arguments": r["arguments"], "preset_match": "exact", "collator_pad_token_id": 99}
    special = {"pad": 99, "bos": None, "eos": None, "eod": None}
    if padding_free:
        policy = {"preset": "trl-padding-free", "pad_id": 99}
        if "pad_to_multiple_of=8" in run.run:
            policy.update({"padding": "right", "pad_to": "multiple_of:8"})
        mb = from_trl_padding_free(r["returned"], docs, pad_id=99)
        why = ("Flattened row, positions reset (from seq_lengths or per example), labels[position_ids == 0] = -100: "
               "boundary target excluded.")
        if "pad_to_multiple_of" in run.run:
            why += " The pads carry position 0 (each its own segment) and label -100, as the preset declares."
        expect_args = {}
    elif not packed_row:
        policy = {"preset": "hf-padded", "pad_id": 99}
        mb = from_hf_padded(r["returned"], docs, pad_id=99)
        why = ("One document per row, right-padded with 99 under an attention_mask, labels = input_ids with -100 on "
               "padding: an ordinary padded batch (hf-padded).")
        expect_args = {}
    else:
        # A BFD-packed row (pack_dataset) given to the collator with padding_free=False: TRL forces padding-free
        # for bfd packing, so the system's claim for such rows is trl-padding-free, which this output breaks.
        policy = {"preset": "trl-padding-free", "pad_id": 99}
        extra["preset_match"] = "closest"
        extra["note"] = ("a bfd-packed row (seq_lengths) collated with padding_free=False: SFTTrainer forces "
                         "padding_free for bfd packing, so the closest claim is trl-padding-free; the collator "
                         "returns an all-ones attention_mask, no position_ids and unmasked document starts")
        mb = from_hf_padded(r["returned"], docs, pad_id=99)
        why = ("Not padding-free on a packed row: no position_ids (the model counts along the row and attends "
               "across documents, no boundary encoding for doc_causal) and document starts keep their labels "
               "(the prediction into the next document is trained).")
        expect_args = {"invariants": ["attention", "positions", "targets"]}
    header(run, system="huggingface/trl", component="DataCollatorForLanguageModeling", version="f2cd577",
           policy=policy, special_ids=special, extra=extra)
    run.documents = docs.documents
    run.microbatches = [mb]
    expect(run, why=why, **expect_args)


def trl_constant_length(run, data):
    r = data["runs"][run.run]
    concat = "append_concat_token=True" in run.run
    docs = docs_with(data["input"]["documents"], eos=0 if concat else None)
    policy = {"preset": "trl-wrapped", "eos_id": 0 if concat else None}
    header(run, system="huggingface/trl", component="ConstantLengthDataset", version="d870230", policy=policy,
           special_ids={"pad": None, "bos": None, "eos": 0, "eod": None},
           extra={"arguments": r["arguments"], "preset_match": "exact",
                  "note": "documents " + ("carry the concat token 0 ConstantLengthDataset appends"
                                          if concat else "are concatenated with no separator") +
                          "; the last partial chunk is dropped (infinite=False), so the tail is not in the dump"})
    run.documents = docs.documents
    run.microbatches = [from_trl_constant_length(r["returned"], docs)]
    dropped = dropped_tokens(run, False)
    expect(run, ["coverage"] if dropped else [],
           why="Stream cut every 8 tokens, labels = input_ids (aligned): boundary targets included, attention and "
               "positions continuous per row, the row-end target lost, as trl-wrapped declares." +
               (why_dropped(dropped) if dropped else ""))


# ---- pytorch/torchtune PackedDataset ------------------------------------------------------------------------

def torchtune(run, data):
    r = data["runs"][run.run]
    eos = run.run.startswith("eos")
    split = "split_true" in run.run
    samples = r["prepared_samples (ds given to PackedDataset)"]
    docs = DocumentSequence([{"doc_uid": f"d{k}", "tokens": s["tokens"]} for k, s in enumerate(samples)])
    policy = {"preset": "torchtune-packed", "pad_id": 99, "eos_id": 0 if eos else None}
    if split:
        policy.update({"overflow": "split", "row_end_target": "next_in_doc"})
    packs = [dict(p) for p in r["returned"]["packs"]]
    collated = r.get("padded_collate_packed", {})
    for b, p in enumerate(packs):
        if "mask" in collated:
            p["mask"] = collated["mask"][b]
    header(run, system="pytorch/torchtune", component="PackedDataset + padded_collate_packed", version="bd2a0fc",
           policy=policy, special_ids={"pad": 99, "bos": None, "eos": 0 if eos else None, "eod": None},
           extra={"arguments": r["arguments"], "preset_match": "exact",
                  "note": "doc_ids from padded_collate_packed's dense block-causal mask (CPU, no FlexAttention)"})
    run.documents = docs.documents
    run.microbatches = [from_torchtune_packed(packs, docs, pad_id=99, split_across_pack=split)]
    why = ("Greedy packs padded with 99 to 8, labels pre-shifted per sample (each sample's last label -100: "
           "boundary excluded), input_pos reset per sample and continuing through padding, seq_lens with a "
           "padding segment.")
    if split:
        why += (" split_across_pack: the tail moves to the next pack, its input_pos counting on (modulo 8) and the "
                "pack's last label the next token of the same sample (row_end_target next_in_doc).")
    expect(run, why=why)


# ---- NVIDIA/Megatron-LM GPTDataset and the training copy of get_ltor_masks_and_position_ids -------------------

FLAG_NAMES = ("reset_position_ids", "reset_attention_mask", "eod_mask_loss")


def parse_flags(run_name):
    flags = {}
    for part in run_name.split("|")[-1].split(","):
        if "=" in part:
            k, v = part.split("=")
            flags[k] = v == "1"
    return flags


def megatron_policy(flags, eod, inter_doc):
    """The preset a Megatron run claims (docmask when most of its three flags are on) and its overrides."""
    if inter_doc:
        preset, match = "megatron-gpt-docmask", "closest"
    else:
        on = sum(flags[f] for f in FLAG_NAMES)
        preset = "megatron-gpt-docmask" if on >= 2 else "megatron-gpt"
        match = "exact" if on in (0, 3) else "closest"
    policy = {"preset": preset}
    notes = []
    if inter_doc:
        policy["boundary_source"] = "cu_seqlens"
        notes.append("inter_document_masking gives cu_seqlens (padded with trailing L) and reset positions: "
                     "megatron-gpt-docmask with boundary_source cu_seqlens; eod_mask_loss is off in these runs")
    if not eod:
        policy["eos_id"] = None
        if policy.get("boundary_source") is None:
            policy["boundary_source"] = "none" if preset == "megatron-gpt" else "doc_ids"
        notes.append("no EOD appended: eos_id null; " + (
            "boundaries then exist nowhere in the tokens (boundary_source none)" if preset == "megatron-gpt" else
            "the only boundary encoding left is the dense attention mask, written as doc_ids"))
    if match == "closest" and not inter_doc:
        differ = [f"{f}={int(flags[f])}" for f in FLAG_NAMES
                  if flags[f] != (preset == "megatron-gpt-docmask")]
        notes.append(f"no preset has these flags: closest {preset}, which differs in " + ", ".join(differ))
    return policy, match, notes


def megatron_expectation(flags, preset, eod, inter_doc, ltor=False, pad_mask_loss=None, data_rows=None):
    """The invariants a Megatron dump breaks under its declared preset, and why."""
    inv, why, maybe = [], [], []
    docmask = preset == "megatron-gpt-docmask"
    if inter_doc:
        why.append("cu_seqlens and reset positions isolate the documents as docmask declares, but eod_mask_loss is "
                   "off: the prediction made from each EOD (or, without EOD, from a document's last token) into the "
                   "next document keeps loss_mask 1 while docmask excludes it.")
        inv.append("targets")
        return inv, why, maybe
    rp, ra, em = (flags[f] for f in FLAG_NAMES)
    if not eod:
        if ltor and data_rows and any(99 in row for row in data_rows):
            inv.append("targets")
            why.append("The stream's last token predicts a pad with loss_mask 1 (pad_mask_loss masks pad inputs, not "
                       "pad labels)" + ("; pad_mask_loss is off, so the padding slots are trained too." if not
                                        pad_mask_loss else "."))
        if docmask:
            inv += ["positions", "segments", "targets"]
            maybe.append("attention")
            why.append("The flags ask for document isolation but there is no EOD to act on: positions never reset, "
                       "the attention mask stays causal over the row (doc_ids one segment per row) and the "
                       "prediction into the next document is trained.")
        else:
            why.append("No EOD and no reset: stream windows, attention and positions continuous, the prediction into "
                       "the next document trained, as megatron-gpt declares.")
        return inv, why, maybe
    if ltor:
        # The training copy (conventions §7): eod_index = position_ids[b, data[b]==eod] & position_ids[b, data[b]==pad]
        if rp:
            inv.append("positions")
            why.append("reset_position_ids acts at the wrong places (the bitwise AND of two index lists): row 0 never "
                       "restarts after its EOD, row 1 counts 0 3 4.")
        elif docmask:
            inv.append("positions")
            why.append("reset_position_ids is off: positions never restart, as docmask requires.")
        if ra:
            inv.append("segments")
            maybe.append("attention")
            why.append("reset_attention_mask cuts at the wrong places: row 0 stays causal across its EOD, in row 1 "
                       "the 26 and the EOD cannot see their own 25 (doc_ids from the mask disagree with the spans).")
        elif docmask:
            inv.append("segments")
            maybe.append("attention")
            why.append("reset_attention_mask is off: the mask is causal over the row (doc_ids one segment) where "
                       "docmask isolates documents.")
        if not docmask:
            if em:
                why.append("eod_mask_loss masks the boundary prediction (EOD -> next document), which megatron-gpt "
                           "trains.")
            else:
                why.append("The EOD before the padding predicts a pad with loss_mask 1 (pad_mask_loss masks pad "
                           "inputs, not pad labels).")
            inv.append("targets")
        else:
            if not em:
                inv.append("targets")
                why.append("eod_mask_loss is off: the prediction from the EOD into the next document is trained, and "
                           "the EOD before the padding predicts a pad.")
        if not pad_mask_loss:
            inv.append("targets")
            why.append("pad_mask_loss is off: padding slots keep loss_mask 1 with pad labels.")
        if ra and not docmask:
            why.append("(Under row_causal, doc_ids that cut documents also contradict the declared attention.)")
        return inv, why, maybe
    # GPTDataset: the core _get_ltor_masks_and_position_ids is right; each flag acts exactly.
    if rp != docmask:
        inv.append("positions")
        why.append("positions " + ("reset after each EOD while megatron-gpt counts 0..L-1 along the row." if rp else
                                   "never reset while docmask restarts them after each EOD."))
    if ra != docmask:
        if ra:
            inv.append("attention")
            why.append("The dense mask is block-causal (written as doc_ids) while megatron-gpt declares attention "
                       "across documents.")
        else:
            inv += ["segments"]
            maybe.append("attention")
            why.append("The dense mask is causal over the row (doc_ids one segment per row) while docmask isolates "
                       "documents.")
    if em != docmask:
        inv.append("targets")
        why.append("eod_mask_loss " + ("masks the prediction made from each EOD, a boundary target megatron-gpt "
                                       "trains." if em else "is off: the prediction from each EOD into the next "
                                                            "document is trained, docmask excludes it."))
    if not inv:
        why.append("Stream windows overlapping by one token, EOD closing each document, loss_mask 0 on padding; "
                   "every flag as the preset declares.")
    return inv, why, maybe


def stream_check(run):
    """The invariants a stream dump (Megatron) breaks under its declared policy, computed from its rows and spans
    the way the kit reads them (positions, targets and weights, segments of every boundary encoding, and the
    attention a dense mask gives). Coverage is left to dropped_tokens (and WHY_SHUFFLED)."""
    from packoracle.dump import resolve_policy
    policy = resolve_policy(run.header["policy"])
    index = {d.uid: k for k, d in enumerate(run.documents)}
    docs = run.documents
    found = set()
    for mb in run.microbatches:
        for row in mb["rows"]:
            n = len(row["input_ids"])
            ref = [None] * n
            for sp in row["doc_spans"]:
                for t in range(sp["length"]):
                    ref[sp["start"] + t] = (index[sp["doc_uid"]], sp["doc_offset"] + t, sp["doc_offset"])
            base = policy["position_base"]
            pos = row.get("position_ids")
            if pos is not None:
                want_prev = None
                for i in range(n):
                    if ref[i] is None:
                        if policy["pad_positions"] == "any":
                            want = None
                        elif policy["pad_positions"] == "zero":
                            want = base
                        else:
                            want = min((want_prev if want_prev is not None else base - 1) + 1, base + n - 1)
                    elif policy["positions"] == "row_continuous":
                        want = base + i
                    else:
                        d, k, first = ref[i]
                        want = base + (k - first if policy["split_positions"] == "restart" else k)
                    if want is not None and pos[i] != want:
                        found.add("positions")
                    want_prev = want if want is not None else pos[i]
            labels, lm = row["labels"], row.get("loss_mask") or [1] * n
            for i in range(n):
                got_w = lm[i] if labels[i] != policy["ignore_index"] else 0
                want_w, want_t = 0, None
                if ref[i] is not None:
                    d, k, _ = ref[i]
                    nxt = ref[i + 1] if i + 1 < n else None
                    if nxt is not None and nxt[0] == d and nxt[1] == k + 1:
                        want_w, want_t = docs[d].supervised[k + 1], docs[d].tokens[k + 1]
                    elif nxt is not None and nxt[1] == 0:
                        want_t = docs[nxt[0]].tokens[0]
                        want_w = 1 if policy["boundary_target"] == "included" else 0
                    elif i == n - 1 and policy["row_end_target"] == "next_in_stream":
                        if k + 1 < len(docs[d].tokens):
                            want_w, want_t = docs[d].supervised[k + 1], docs[d].tokens[k + 1]
                        elif d + 1 < len(docs):
                            want_t = docs[d + 1].tokens[0]
                            want_w = 1 if policy["boundary_target"] == "included" else 0
                if got_w != want_w or (want_w and labels[i] != want_t):
                    found.add("targets")
            truth = [i for i in range(n) if ref[i] is not None and (i == 0 or ref[i - 1] is None or
                                                                     ref[i - 1][0] != ref[i][0])]

            def real(starts):
                return sorted(set(s for s in starts if 0 <= s < n and ref[s] is not None))

            derived = []
            if row.get("doc_ids") is not None:
                ids = row["doc_ids"]
                derived.append([i for i in range(n) if i == 0 or ids[i] != ids[i - 1]])
                real_ids = [ids[i] for i in range(n) if ref[i] is not None]
                if policy["attention"] == "row_causal" and len(set(real_ids)) > 1:
                    found.add("attention")
            if row.get("cu_seqlens") is not None:
                derived.append(row["cu_seqlens"][:-1])
            if policy["boundary_source"] == "eod_closes" and policy["eos_id"] is not None:
                ids = row["input_ids"]
                derived.append([0] + [i + 1 for i in range(n - 1) if ids[i] == policy["eos_id"]])
            for starts in derived:
                if real(starts) != truth:
                    found.add("segments")
    return sorted(found)


def reconcile(run, reasoned, maybe):
    """The computed invariants; a disagreement with the reasoned ones (other than the `maybe` ones) is a bug in
    one of them and stops the tool."""
    computed = stream_check(run)
    strict = sorted(set(reasoned) - set(maybe) - {"attention"})
    if sorted(set(computed) - {"attention"}) != strict:
        raise AssertionError(f"{run.file}: reasoned {sorted(set(reasoned))}, computed {computed}")
    return sorted(set(computed) | set(reasoned))


def gpt_dataset_findings(run, r, inv, why, eod, flags):
    """What a GPTDataset run does beyond its flags, found in its samples: a loss_mask that drops valid targets,
    cu_seqlens that lose a document boundary."""
    stream_end = sum(len(d) for d in run.documents)
    for i, mb in enumerate(run.microbatches):
        row = mb["rows"][0]
        sample = r["returned"]["samples"][i]
        n = len(row["input_ids"])
        covered = sum(sp["length"] for sp in row["doc_spans"])
        first = row["doc_spans"][0]
        start = sum(len(d) for d in run.documents[:[d.uid for d in run.documents].index(first["doc_uid"])]) + \
            first["doc_offset"]
        for k in range(n):
            real_label = start + k + 1 < stream_end and k < covered
            eod_masked = flags["eod_mask_loss"] and eod and row["input_ids"][k] == 0
            if real_label and not eod_masked and sample["loss_mask"][k] == 0:
                inv.append("targets")
                why.append(f"Sample {i}'s loss_mask is 0 at slot {k}, a valid target inside the stream: it repeats "
                           "the padding mask of the sample returned before it (GPTDataset caches the loss mask "
                           "when no flag is set and masks padding in place).")
                break
        cu = row.get("cu_seqlens")
        if cu is not None:
            truth = [sp["start"] for sp in row["doc_spans"]]
            got = sorted(set(c for c in cu[:-1] if c < covered))
            if got != truth:
                inv += ["segments", "positions"]
                why.append(f"Sample {i} (the padded last one) loses a document boundary: cu_seqlens {cu[:3]}... and "
                           f"positions {row.get('position_ids')} run on across documents where the spans start "
                           f"documents at {truth} (the extra token is taken from a one-token last document).")
    return inv, why


def megatron_gpt_dataset(run, data):
    r = data["runs"][run.run]
    parts = run.run.split("|")
    eod, split, order = parts[0] == "eod", parts[1], parts[2]
    flags = parse_flags(run.run)
    inter_doc = flags.get("inter_document_masking", False)
    for f in FLAG_NAMES:
        flags.setdefault(f, False)
    given = r["documents_given"]
    document_index = r.get("document_index", list(range(len(given))))
    docs = DocumentSequence([{"doc_uid": f"d{k}", "tokens": given[k]} for k in document_index])
    sample_index = r["sample_index"]
    shuffle = r.get("shuffle_index", list(range(len(r["returned"]["samples"]))))
    starts = [tuple(sample_index[shuffle[i]]) for i in range(len(r["returned"]["samples"]))]
    policy, match, notes = megatron_policy(flags, eod, inter_doc)
    declared_docmask = policy["preset"] == "megatron-gpt-docmask"
    header(run, system="NVIDIA/Megatron-LM", component="GPTDataset.__getitem__", version="d98e8a6", policy=policy,
           special_ids={"pad": 0, "bos": None, "eos": None, "eod": 0 if eod else None},
           grad_accum_steps=len(starts),
           extra={"arguments": r["arguments"], "preset_match": match, "note": "; ".join(notes) or None,
                  "sample_starts": starts, "row_length": 8,
                  "layout": "one sample per micro-batch (micro_step = position in the returned order)"})
    run.documents = docs.documents
    run.microbatches = [
        from_megatron_gpt([s], docs, starts=[starts[i]], pad_id=0, micro_step=i,
                          attention_mask="doc_ids" if declared_docmask else "auto")
        for i, s in enumerate(r["returned"]["samples"])]
    inv, why, maybe = megatron_expectation(flags, policy["preset"], eod, inter_doc)
    inv, why = gpt_dataset_findings(run, r, inv, why, eod, flags)
    inv = reconcile(run, inv, maybe)
    text = " ".join(why)
    dropped = dropped_tokens(run, True)
    if dropped:
        inv = sorted(set(inv) | {"coverage"})
        text += why_dropped(dropped) + " (A checker that stops at the first coverage failure reports only that.)"
    if order == "as_built" and shuffle != sorted(shuffle):
        text += WHY_SHUFFLED
        maybe.append("coverage")
    expect(run, inv, text, maybe)


def megatron_training_ltor(run, data):
    r = data["runs"][run.run]
    if "error" in r:
        run.skipped = "the function raised " + r["error"].split(":")[0] + " (batch of 3 rows)"
        return
    eod = run.run.startswith("eod")
    flags = parse_flags(run.run)
    pad_mask_loss = flags.pop("pad_mask_loss")
    rows = r["data"]
    documents = data["input"]["documents"]
    docs = docs_with(documents, eos=0 if eod else None)
    stream = [t for d in docs.documents for t in d.tokens]
    # The rows are GPTDataset's valid-split samples in order (text[:-1], pad 99 before rewriting); their labels
    # (text[1:]) are what GPTDataset returns with them: the next stream token, the pad past the stream's end.
    returned = r["returned"]
    masks = returned["attention_mask"]
    samples = []
    for b, tokens in enumerate(rows):
        offset = 8 * b
        labels = [stream[offset + i + 1] if offset + i + 1 < len(stream) else 99 for i in range(len(tokens))]
        samples.append({"tokens": tokens, "labels": labels, "loss_mask": returned["loss_mask"][b],
                        "position_ids": returned["position_ids"][b],
                        "attention_mask": masks[b if len(masks) > 1 else 0]})
    policy, match, notes = megatron_policy(flags, eod, False)
    policy["pad_id"] = 99
    declared_docmask = policy["preset"] == "megatron-gpt-docmask"
    notes.append("the training copy get_ltor_masks_and_position_ids returns loss_mask, position_ids and the mask "
                 "for GPTDataset's rows (pad 99 not yet rewritten); tokens and labels are those rows and their "
                 "GPTDataset labels (text[1:])")
    header(run, system="NVIDIA/Megatron-LM", component="training/utils/common_utils.get_ltor_masks_and_position_ids",
           version="d98e8a6", policy=policy,
           special_ids={"pad": 99, "bos": None, "eos": None, "eod": 0 if eod else None},
           grad_accum_steps=len(samples),
           extra={"arguments": r["arguments"], "preset_match": match, "note": "; ".join(notes), "row_length": 8})
    run.documents = docs.documents
    run.microbatches = [from_megatron_gpt([s], docs, starts=[8 * i], pad_id=99, micro_step=i,
                                          attention_mask="doc_ids" if declared_docmask else "auto")
                        for i, s in enumerate(samples)]
    inv, why, maybe = megatron_expectation(flags, policy["preset"], eod, False, ltor=True,
                                           pad_mask_loss=pad_mask_loss, data_rows=rows)
    inv = reconcile(run, inv, maybe)
    expect(run, inv, " ".join(why), maybe)


# ---- karpathy/llm.c DataLoader ------------------------------------------------------------------------------

def llmc(run, data):
    r = data["runs"][run.run]
    if "returned" not in r:
        run.skipped = "no batch: the shard holds fewer than B*T+1 tokens (llm.c asserts)"
        return
    eot = run.run.startswith("eot")
    B = r["arguments"]["B"]
    T = r["arguments"]["T"]
    docs = docs_with(data["input"]["documents"], bos=0 if eot else None)
    stream = [t for d in docs.documents for t in d.tokens]
    if stream != r["token_stream_in_file"]:
        raise ValueError(f"{run.file}: the documents do not rebuild the shard's token stream")
    policy = {"preset": "llmc"} if eot else {"preset": "llmc", "bos_id": None, "boundary_source": "none"}
    ret = r["returned"]
    epoch = ret["shard_num_samples"]
    batches = ret["batches"][:epoch]
    header(run, system="karpathy/llm.c", component="llmc/dataloader.h DataLoader", version="f1e2ace",
           policy=policy, special_ids={"pad": None, "bos": 0 if eot else None, "eos": None, "eod": None},
           grad_accum_steps=len(batches),
           extra={"arguments": r["arguments"], "preset_match": "exact", "row_length": T,
                  "note": ("EOT 0 prepended to each document (dev/data/fineweb.py)" if eot else
                           "documents concatenated with no EOT: bos_id null, boundary_source none") +
                          f"; one epoch ({epoch} batch(es), one micro-batch each); later batches repeat it"})
    run.documents = docs.documents
    run.microbatches = []
    offsets = []
    for i, batch in enumerate(batches):
        # The loader's window of the shard; shuffling permutes the windows, so each one is located.
        run.microbatches.append(from_llmc(batch, docs, B=B, T=T, micro_step=i))
        offsets.append(docs.stream_pos - B * T)
    why = ("Windows of B*T+1 shard tokens, targets pre-shifted over the whole buffer: attention and positions "
           "continuous, every prediction trained (the boundary into " + ("the EOT" if eot else "the next document") +
           " included), each row's last target the next row's first input, mean over all positions.")
    maybe = []
    if offsets != sorted(offsets):
        why += WHY_SHUFFLED
        maybe.append("coverage")
    expect(run, why=why, also_possible=maybe)


# ---- driver -------------------------------------------------------------------------------------------------

HANDLERS = {
    "hf_DataCollatorWithFlattening": hf_flatten,
    "trl_DataCollatorForLanguageModeling": trl_collator,
    "trl_ConstantLengthDataset": trl_constant_length,
    "torchtune_PackedDataset": torchtune,
    "megatron_GPTDataset": megatron_gpt_dataset,
    "megatron_training_get_ltor_masks_and_position_ids": None,  # megatron_training_ltor (see collect)
    "llmc_dataloader": llmc,
}


def collect(realpack):
    runs = []
    for folder in sorted(HANDLERS):
        for set_name in ("A", "B"):
            path = os.path.join(realpack, folder, f"{set_name}.json")
            if not os.path.exists(path):
                continue
            with open(path) as f:
                data = json.load(f)
            for name in data["runs"]:
                run = Run(folder, set_name, name)
                if folder == "megatron_training_get_ltor_masks_and_position_ids":
                    megatron_training_ltor(run, data)
                else:
                    HANDLERS[folder](run, data)
                runs.append(run)
    return runs


def write(run, out_dir):
    with DumpWriter(os.path.join(out_dir, run.file)) as w:
        w.header(**run.header)
        w.documents(run.documents)
        for mb in run.microbatches:
            w.write(mb)


def table(runs):
    lines = ["| run | preset | expected verdict | why |", "|---|---|---|---|"]
    for run in runs:
        label = f"`{run.folder}/{run.set}` `{run.run}`"
        if run.skipped:
            lines.append(f"| {label} | — | not converted | {run.skipped} |")
            continue
        e = run.expected
        verdict = e["verdict"] if e["verdict"] == "clean" else "violations: " + ", ".join(e["invariants"])
        if e.get("also_possible"):
            verdict += " (also possible: " + ", ".join(e["also_possible"]) + ")"
        overrides = {k: v for k, v in run.header["policy"].items() if k != "preset"}
        preset = f"`{run.preset}`" + (" " + json.dumps(overrides, separators=(",", ":")) if overrides else "")
        if run.header["extra"].get("preset_match") == "closest":
            preset += " (closest)"
        lines.append(f"| {label} | {preset} | {verdict} | {e['why']} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", help="directory for the .jsonl dumps (created)")
    parser.add_argument("--realpack", default=DEFAULT_REALPACK, help="realpack directory (default: %(default)s)")
    parser.add_argument("--expected", help="write the expected verdicts as JSON to this file")
    parser.add_argument("--table", help="also write the markdown table to this file")
    parser.add_argument("--quiet", action="store_true", help="do not print the table")
    args = parser.parse_args(argv)
    if not os.path.isdir(args.realpack):
        print(f"realpack_to_jsonl: no realpack directory at {args.realpack}", file=sys.stderr)
        return 2
    os.makedirs(args.out_dir, exist_ok=True)
    runs = collect(args.realpack)
    for run in runs:
        if not run.skipped:
            write(run, args.out_dir)
    md = table(runs)
    if not args.quiet:
        print(md)
        done = sum(1 for r in runs if not r.skipped)
        print(f"\n{done} dumps written to {args.out_dir}; {len(runs) - done} runs not converted.")
    if args.table:
        with open(args.table, "w") as f:
            f.write(md + "\n")
    if args.expected:
        expected = {r.file: r.expected for r in runs if not r.skipped}
        with open(args.expected, "w") as f:
            json.dump(expected, f, indent=1, sort_keys=True)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

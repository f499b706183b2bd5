#!/usr/bin/env python3
"""python_checker.py: a plain stdlib checker of a packed-batch dump (DESIGN §5), the baseline that
`packoracle verify` is measured against in bench/audit/run.sh.

It applies the invariants verify applies to a dump of a document-packing preset (the header's policy, fully
resolved as the kit writes it; stream-window policies are not supported and exit 2):

  shape        per-token arrays as long as input_ids; rows at most L long (exactly L when padded to the row
               length; L = the longest row of the step, as verify takes it); cu_seqlens from 0, monotone, to
               the row length; seq_lens non-negative, summing to it
  coverage     spans name known documents, lie inside their row and document, never overlap, and hold the
               document's tokens; other slots are padding (the pad id, only at the row end, only if padding);
               over the whole dump every document's pieces tile its tokens exactly once
  segments     document starts from cu_seqlens / seq_lens / doc_ids (and the boundary source's positions or
               delimiter tokens) equal the spans' starts
  attention    the boundary source's encoding is present (doc_causal); no isolating encoding (row_causal)
  positions    position ids follow the policy (doc_reset / row_continuous, split rule, padding rule)
  targets      labels decoded under the label alignment (and loss_mask) give, slot by slot, the next token of
               the same document with weight = its supervised flag; boundary and row-end targets as the
               policy says; nothing else weighted
  denominator  per step: every micro-batch's denominator is the count of its declared scope, loss =
  / loss       loss_sum / denominator, and the micro-batch losses combine into the declared objective

  python3 python_checker.py FILE... [--max-violations N]   (several files: one per rank, merged by step)

Prints a verdict and MiB/s on stdout; exit 0 clean, 1 violations, 2 unusable input or unsupported policy.
"""
import json
import math
import os
import sys
import time


class Unusable(Exception):
    pass


def close(a, b):
    return abs(a - b) <= 1e-12 * max(1.0, abs(a), abs(b))


class Checker:
    def __init__(self, paths, max_violations):
        self.paths = paths
        self.path = paths[0]  # where whole-dump findings point
        self.max_violations = max_violations
        self.violations = []
        self.count = 0
        self.policy = None
        self.world = 1
        self.docs = {}  # uid -> (tokens, supervised)
        self.pieces = {}  # uid -> [(offset, length)] over the whole dump
        self.steps = 0
        self.rows = 0

    def violation(self, invariant, where, message):
        self.count += 1
        if len(self.violations) < self.max_violations:
            self.violations.append(f"{invariant}  {where}: {message}")

    # ---- reading -----------------------------------------------------------------------------------------

    def run(self):
        # Several files (one per rank): merged by step, as verify merges them; each file's documents are known
        # once read, whichever file they are in.
        sources = [self.microbatches(path) for path in self.paths]
        heads = [next(s, None) for s in sources]
        while any(heads):
            step = min(h[1]["step"] for h in heads if h)
            batch = []
            for k, source in enumerate(sources):
                while heads[k] and heads[k][1]["step"] == step:
                    batch.append(heads[k])
                    heads[k] = next(source, None)
                if heads[k] and heads[k][1]["step"] < step:
                    raise Unusable(f"{heads[k][0]}: step {heads[k][1]['step']} comes after step {step}")
            self.check_step(step, batch)
        self.check_tiling()

    def microbatches(self, path):
        """The micro-batch records of one file as ("path:line", record), in file order; its documents kept."""
        seen_header = False
        with open(path, "rb") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except ValueError as e:
                    raise Unusable(f"{path}:{number}: not JSON ({e})")
                kind = rec.get("record")
                if not seen_header:
                    if kind != "header":
                        raise Unusable(f"{path}:{number}: the first record must be the header")
                    self.header(rec, f"{path}:{number}")
                    seen_header = True
                elif kind == "document":
                    self.docs[rec["doc_uid"]] = (rec["tokens"], rec.get("supervised") or [1] * len(rec["tokens"]))
                elif kind == "microbatch":
                    yield f"{path}:{number}", rec
                elif kind in ("step",):
                    pass
                elif kind == "header":
                    raise Unusable(f"{path}:{number}: a second header")
                else:
                    raise Unusable(f"{path}:{number}: unknown record type {kind!r}")
        if not seen_header:
            raise Unusable(f"{path}: empty")

    def header(self, rec, where):
        if rec.get("schema") != "packed-batch" or rec.get("version") != 1:
            raise Unusable(f"{where}: not a packed-batch version 1 header")
        policy = rec.get("policy")
        keys = ("label_alignment", "ignore_index", "loss_mask", "boundary_source", "attention", "positions",
                "position_base", "pad_positions", "split_positions", "boundary_target", "row_end_target",
                "stream_stride", "padding", "pad_id", "pad_to", "overflow", "eos_id", "bos_id", "denominator",
                "count_basis")
        if not isinstance(policy, dict) or any(k not in policy for k in keys):
            raise Unusable(f"{where}: the header's policy must be fully resolved (every key of DESIGN §3)")
        if policy["stream_stride"] is not None or policy["row_end_target"] == "next_in_stream":
            raise Unusable(f"{where}: stream-window policies are not supported by this checker")
        if self.policy is not None and policy != self.policy:
            raise Unusable(f"{where}: its header declares a different policy than {self.paths[0]}")
        self.policy = policy
        self.world = rec.get("dp_world_size", 1)

    # ---- one step ----------------------------------------------------------------------------------------

    def check_step(self, step, batch):
        self.steps += 1
        p = self.policy
        batch.sort(key=lambda nr: (nr[1]["micro_step"], nr[1]["rank"]))
        L = max(len(row["input_ids"]) for _, mb in batch for row in mb["rows"])
        step_pieces = {}
        counts = []  # per micro-batch, under the policy's count basis
        for loc, mb in batch:
            n_mb = 0
            for r, row in enumerate(mb["rows"]):
                where = f"{loc} step {step} micro_step {mb['micro_step']} rank {mb['rank']} row {r}"
                self.rows += 1
                weights = self.check_row(row, L, where, step_pieces)
                if weights is None:
                    continue
                if p["denominator"] == "all_positions":
                    n_mb += len(row["input_ids"])
                elif p["count_basis"] == "unshifted_labels":
                    n_mb += sum(1 for x in row["labels"] if x != p["ignore_index"])
                else:
                    n_mb += sum(weights)
            counts.append(n_mb)
        if p["overflow"] != "split":
            for uid, pieces in step_pieces.items():
                if len(pieces) > 1:
                    self.violation("coverage", f"step {step}",
                                   f"document {uid!r} is split into {len(pieces)} pieces under overflow {p['overflow']}")
        self.check_totals(step, batch, counts)

    def check_row(self, row, L, where, step_pieces):
        """Checks one row; returns the expected weight of every slot (None when the row is unusable)."""
        p = self.policy
        ids = row["input_ids"]
        labels = row["labels"]
        n = len(ids)
        ok = True
        # shape
        for field in ("labels", "loss_mask", "position_ids", "doc_ids", "attention_mask"):
            if field in row and len(row[field]) != n:
                self.violation("shape", where, f"{field} has {len(row[field])} entries, input_ids has {n}")
                ok = False
        if p["loss_mask"] and "loss_mask" not in row:
            self.violation("shape", where, "the policy has loss_mask: true but the row has none")
            ok = False
        if n > L:
            self.violation("shape", where, f"{n} slots, more than the row length {L}")
        if p["padding"] == "right":
            if p["pad_to"] == "row_len" and n != L:
                self.violation("shape", where, f"{n} slots, but rows are padded to {L}")
            elif p["pad_to"].startswith("multiple_of:") and n % int(p["pad_to"].split(":")[1]):
                self.violation("shape", where, f"{n} slots, not a multiple of {p['pad_to']}")
        cu = row.get("cu_seqlens")
        if cu is not None:
            if not cu or cu[0] != 0 or cu[-1] != n or any(b < a for a, b in zip(cu, cu[1:])):
                self.violation("shape", where, f"cu_seqlens must start at 0, never decrease and end at {n}")
                ok = False
        seq_lens = row.get("seq_lens")
        if seq_lens is not None and (sum(seq_lens) != n or any(v < 0 for v in seq_lens)):
            self.violation("shape", where, f"seq_lens must be non-negative and sum to {n}")
            ok = False
        if not ok:
            return None

        # coverage: slot -> (document, offset, piece)
        slot_doc = [None] * n
        slot_off = [0] * n
        slot_piece = [-1] * n
        spans = row["doc_spans"]
        for s, span in enumerate(spans):
            uid, start, length, offset = span["doc_uid"], span["start"], span["length"], span["doc_offset"]
            doc = self.docs.get(uid)
            if doc is None:
                self.violation("coverage", where, f"a span names document {uid!r}, which has no document record")
                return None
            tokens = doc[0]
            if length <= 0 or start < 0 or start + length > n or offset < 0 or offset + length > len(tokens):
                self.violation("coverage", where, f"span of {uid!r} lies outside its row or its document")
                return None
            if ids[start:start + length] != tokens[offset:offset + length]:
                i = next(t for t in range(length) if ids[start + t] != tokens[offset + t])
                self.violation("coverage", where, f"slot {start + i} holds {ids[start + i]} but its span says "
                                                  f"token {offset + i} of {uid!r}, which is {tokens[offset + i]}")
            for t in range(length):
                i = start + t
                if slot_doc[i] is not None:
                    self.violation("coverage", where, f"slot {i} is claimed by two spans")
                    return None
                slot_doc[i] = uid
                slot_off[i] = offset + t
                slot_piece[i] = s
            step_pieces.setdefault(uid, []).append(offset)
            self.pieces.setdefault(uid, []).append((offset, length))
        seen_pad = False
        for i in range(n):
            if slot_doc[i] is None:
                seen_pad = True
                if ids[i] != p["pad_id"]:
                    self.violation("coverage", where, f"slot {i} holds {ids[i]}, neither a document token nor the pad id")
                if p["padding"] == "none":
                    self.violation("coverage", where, f"slot {i} is padding, but the policy has padding: none")
            elif seen_pad and p["padding"] == "right":
                self.violation("coverage", where, f"slot {i} holds a document token after padding")

        # segments: document starts at non-padding slots
        truth = [i for i in range(n) if slot_doc[i] is not None and (i == 0 or slot_piece[i] != slot_piece[i - 1])]

        def real(starts):
            return [i for i in starts if slot_doc[i] is not None]

        derived = {}
        if cu is not None:
            derived["cu_seqlens"] = [a for a, b in zip(cu, cu[1:]) if b > a]
        if seq_lens is not None:
            starts, at = [], 0
            for v in seq_lens:
                if v > 0:
                    starts.append(at)
                at += v
            derived["seq_lens"] = starts
        doc_ids = row.get("doc_ids")
        if doc_ids is not None:
            derived["doc_ids"] = [i for i in range(n) if i == 0 or doc_ids[i] != doc_ids[i - 1]]
        positions = row.get("position_ids")
        source = p["boundary_source"]
        if positions is not None and source == "position_reset":
            derived["position_ids"] = [i for i in range(n) if i == 0 or positions[i] == p["position_base"]]
        if positions is not None and source == "position_step":
            derived["position_ids"] = [i for i in range(n) if i == 0 or positions[i] - positions[i - 1] != 1]
        if source == "eod_closes" and p["eos_id"] is not None:
            derived["EOD tokens"] = [i for i in range(n) if i == 0 or ids[i - 1] == p["eos_id"]]
        if source == "bos_opens" and p["bos_id"] is not None:
            derived["BOS tokens"] = [i for i in range(n) if i == 0 or ids[i] == p["bos_id"]]
        for name, starts in derived.items():
            if real(starts) != truth:
                self.violation("segments", where, f"{name} put document starts at {real(starts)}, the spans at {truth}")
        mask = row.get("attention_mask")
        if mask is not None:
            for i in range(n):
                if mask[i] != (0 if slot_doc[i] is None else 1):
                    self.violation("segments", where, f"slot {i}: the 2-D attention_mask says {mask[i]}")
                    break
            if 0 in mask and p["attention"] == "doc_causal" and len(truth) > 1 and cu is None:
                self.violation("segments", where, "a 2-D attention_mask with zeros next to several documents")

        # attention: the encoding a backend isolates documents by
        if p["attention"] == "row_causal":
            for name in ("cu_seqlens", "seq_lens", "doc_ids"):
                if name in derived and len(real(derived[name])) > 1:
                    self.violation("attention", where, f"{name} isolate documents under row_causal attention")
                    break
        else:
            needs = {"cu_seqlens": "cu_seqlens", "seq_lens": "seq_lens", "doc_ids": "doc_ids",
                     "position_reset": "position_ids", "position_step": "position_ids"}.get(source)
            if needs and needs not in row:
                self.violation("attention", where, f"the policy isolates documents through {source}, which the row lacks")

        # positions
        base = p["position_base"]
        if positions is None:
            single = all(slot_doc[i] is None or (slot_piece[i] == slot_piece[0] and slot_off[0] == 0) for i in range(n))
            if (p["positions"] == "doc_reset" or base != 0) and not (single and base == 0 and p["split_positions"] != "modulo"):
                self.violation("positions", where, "no position_ids, but the policy resets positions per document")
        else:
            prev = None
            for i in range(n):
                if slot_doc[i] is None:
                    if p["pad_positions"] == "zero":
                        want = 0
                    elif p["pad_positions"] == "continue":
                        want = min((base - 1 if prev is None else prev) + 1, base + L - 1)
                    else:
                        want = None
                elif p["positions"] == "row_continuous":
                    want = base + i
                elif p["split_positions"] == "continue":
                    want = base + slot_off[i]
                elif p["split_positions"] == "modulo":
                    want = base + slot_off[i] % L
                else:  # restart: from the base at the piece's start
                    want = base + slot_off[i] - spans[slot_piece[i]]["doc_offset"]
                if want is not None and positions[i] != want:
                    self.violation("positions", where, f"slot {i}: position {positions[i]}, the policy says {want}")
                    break
                prev = want

        # targets: what each slot should predict, against what the labels say
        ignore = p["ignore_index"]
        loss_mask = row.get("loss_mask")
        weights = [0] * n
        bad_target = False
        for i in range(n):
            uid = slot_doc[i]
            want_t, want_w = None, 0
            if uid is not None:
                tokens, supervised = self.docs[uid]
                k = slot_off[i]
                if i + 1 < n:
                    nxt = slot_doc[i + 1]
                    if nxt == uid and slot_off[i + 1] == k + 1:
                        want_t, want_w = tokens[k + 1], supervised[k + 1]
                    elif nxt is not None and nxt != uid and slot_off[i + 1] == 0:
                        first = self.docs[nxt]
                        want_t = first[0][0]
                        want_w = 1 if p["boundary_target"] == "included" and first[1][0] == 1 else 0
                elif p["row_end_target"] == "next_in_doc" and k + 1 < len(tokens):
                    want_t, want_w = tokens[k + 1], supervised[k + 1]
            weights[i] = want_w
            if bad_target:
                continue
            if p["label_alignment"] == "aligned":
                if i + 1 < n:
                    got_t, got_w = labels[i + 1], (1 if labels[i + 1] != ignore else 0)
                else:
                    got_t, got_w = None, 0
            else:
                got_t, got_w = labels[i], (1 if labels[i] != ignore else 0)
                if loss_mask is not None and p["loss_mask"]:
                    if loss_mask[i] not in (0, 1):
                        self.violation("targets", where, f"slot {i}: loss_mask is {loss_mask[i]}, not 0 or 1")
                        bad_target = True
                        continue
                    got_w *= loss_mask[i]
            if got_w != want_w:
                self.violation("targets", where, f"slot {i}: prediction has weight {got_w}, expected {want_w}")
                bad_target = True
            elif want_w > 0 and got_t != want_t:
                self.violation("targets", where, f"slot {i}: prediction targets {got_t}, the next token is {want_t}")
                bad_target = True
        return weights

    def check_totals(self, step, batch, counts):
        p = self.policy
        producers = [mb.get("producer") for _, mb in batch]
        given = [x for x in producers if x is not None]
        if not given:
            return
        if len(given) != len(batch):
            self.violation("denominator", f"step {step}", f"only {len(given)} of {len(batch)} micro-batches report totals")
            return
        total = sum(counts)
        per_rank = {}
        for (_, mb), n in zip(batch, counts):
            per_rank[mb["rank"]] = per_rank.get(mb["rank"], 0) + n
        ok = True
        for m, ((loc, mb), t, n) in enumerate(zip(batch, producers, counts)):
            where = f"{loc} step {step} micro-batch {m}"
            # A producer may give any of the three (a denominator alone: the count is checked, not the loss).
            den, loss_sum, loss = t.get("denominator"), t.get("loss_sum"), t.get("loss")
            if not all(math.isfinite(x) for x in (den, loss_sum, loss) if x is not None):
                self.violation("denominator", where, "a non-finite loss_sum, denominator or loss")
                ok = False
                continue
            if den is None:
                continue
            scope = t["denominator_scope"]
            expected = {"microbatch": n, "step": per_rank[mb["rank"]], "global": total}.get(scope)
            if expected is None:
                self.violation("denominator", where, f"denominator_scope {scope!r} is none of microbatch, step, global")
                ok = False
                continue
            empty_ok = expected == 0 and den in (0, 1)
            if p["denominator"] != "sequence_mean" and not close(den, expected) and not empty_ok:
                self.violation("denominator", where, f"divided by {den}, but its {scope} has {expected}")
                ok = False
            if p["denominator"] != "sequence_mean" and loss is not None and loss_sum is not None:
                if den > 0 and not close(loss, loss_sum / den):
                    self.violation("loss", where, f"loss {loss} is not loss_sum / denominator = {loss_sum / den}")
                    ok = False
                elif den == 0 and loss != 0:
                    self.violation("loss", where, f"loss {loss} with a zero denominator")
                    ok = False
        if not ok or p["denominator"] == "sequence_mean":
            return
        if any(t.get("denominator") is None or t.get("loss_sum") is None for t in producers):
            return  # the objective needs every micro-batch's loss_sum and count (verify notes it unchecked)
        scopes = {t["denominator_scope"] for t in producers}
        if len(scopes) > 1:
            self.violation("denominator", f"step {step}", f"micro-batches with different denominator scopes {sorted(scopes)}")
            return
        scope = scopes.pop()
        R = self.world
        M = max(mb["micro_step"] for _, mb in batch) + 1
        declared = sum(t["loss"] if t.get("loss") is not None else
                       (t["loss_sum"] / t["denominator"] if t["denominator"] > 0 else 0.0) for t in producers)
        if scope == "step":
            declared /= R
        elif scope == "microbatch":
            declared /= R * M
        sums = [t["loss_sum"] for t in producers]
        if p["denominator"] in ("global_targets", "all_positions"):
            want = sum(sums) / total if total > 0 else 0.0
        elif p["denominator"] == "rank_mean":
            by_rank = {}
            for (_, mb), s, n in zip(batch, sums, counts):
                a = by_rank.setdefault(mb["rank"], [0.0, 0])
                a[0] += s
                a[1] += n
            want = sum(s / max(1, n) for s, n in by_rank.values()) / R
        else:  # microbatch_mean
            want = sum(s / max(1, n) for s, n in zip(sums, counts)) / (R * M)
        if not close(declared, want):
            self.violation("loss", f"step {step}", f"the micro-batch losses give {declared}, but {p['denominator']} is {want}")

    # ---- over the whole dump -----------------------------------------------------------------------------

    def check_tiling(self):
        for uid, (tokens, _) in self.docs.items():
            pieces = sorted(self.pieces.get(uid, []))
            if not pieces:
                if tokens:
                    self.violation("coverage", self.path, f"document {uid!r} is in no row of the dump")
                continue
            nxt = 0
            for offset, length in pieces:
                if offset != nxt:
                    what = "are in no row" if offset > nxt else "are packed twice"
                    self.violation("coverage", self.path, f"document {uid!r}: tokens [{min(offset, nxt)}, {max(offset, nxt)}) {what}")
                nxt = max(nxt, offset + length)
            if nxt < len(tokens) and self.policy["overflow"] != "truncate":
                self.violation("coverage", self.path, f"document {uid!r}: tokens [{nxt}, {len(tokens)}) are in no row")


def main(argv):
    args = argv[1:]
    max_violations = 20
    if "--max-violations" in args:
        k = args.index("--max-violations")
        max_violations = int(args[k + 1])
        del args[k:k + 2]
    if not args:
        print("usage: python_checker.py FILE... [--max-violations N]", file=sys.stderr)
        return 2
    start = time.perf_counter()
    checker = Checker(args, max_violations)
    try:
        checker.run()
    except (Unusable, KeyError, TypeError, OSError) as e:
        print(f"python_checker: {args[0]}: unusable input: {e!r}", file=sys.stderr)
        return 2
    seconds = time.perf_counter() - start
    size = sum(os.path.getsize(path) for path in args)
    for v in checker.violations:
        print(v)
    verdict = "clean" if checker.count == 0 else f"{checker.count} violation(s)"
    print(f"python_checker: {checker.steps} steps, {checker.rows} rows, {len(checker.docs)} documents: {verdict}; "
          f"{size} bytes in {seconds:.3f} s, {size / (1 << 20) / seconds:.1f} MiB/s")
    return 0 if checker.count == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

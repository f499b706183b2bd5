#!/usr/bin/env python3
"""mutate.py: plants one bug in a clean packed-batch dump (bench/audit/run.sh MUTANTS=1), to show that the
Python checker rejects what `packoracle verify` rejects. The bug goes into row 2 of step 1's first
micro-batch.

  python3 mutate.py CLEAN.jsonl KIND OUT.jsonl
  KIND: label (a weighted target off by one), weight (a weighted target ignored), position, segments (a
        boundary encoding cut one slot early), denominator, token (an input token changed), rowshift (the
        whole row's labels shifted once, torchtune before PR #2613), dropspan (a row's last piece dropped)
"""
import json
import sys


def mutate(rec, kind):
    row = rec["rows"][2]
    ignore = -100
    if kind == "label":
        i = next(i for i, x in enumerate(row["labels"]) if x != ignore)
        row["labels"][i] += 1
    elif kind == "weight":
        i = next(i for i, x in enumerate(row["labels"]) if x != ignore)
        row["labels"][i] = ignore
    elif kind == "position":
        row["position_ids"][5] += 1
    elif kind == "segments":
        if "seq_lens" in row:
            row["seq_lens"][0] -= 1
            row["seq_lens"].insert(1, 1)
        elif "cu_seqlens" in row:
            row["cu_seqlens"].insert(1, row["cu_seqlens"][1] - 1)
        else:
            raise SystemExit("mutate.py: the row has no seq_lens or cu_seqlens")
    elif kind == "denominator":
        rec["producer"]["denominator"] += 1
    elif kind == "token":
        row["input_ids"][3] += 1
    elif kind == "rowshift":
        row["labels"] = row["input_ids"][1:] + [ignore]
    elif kind == "dropspan":
        span = row["doc_spans"].pop()
        for t in range(span["length"]):
            row["input_ids"][span["start"] + t] = 0
    else:
        raise SystemExit(f"mutate.py: unknown kind {kind!r}")


def main(src, kind, dst):
    done = False
    with open(src) as f, open(dst, "w") as out:
        for line in f:
            rec = json.loads(line)
            if not done and rec["record"] == "microbatch" and rec["step"] == 1 and len(rec["rows"]) > 2:
                mutate(rec, kind)
                line = json.dumps(rec, separators=(",", ":")) + "\n"
                done = True
            out.write(line)
    if not done:
        raise SystemExit("mutate.py: no micro-batch of step 1 with 3 rows")


if __name__ == "__main__":
    main(*sys.argv[1:4])

"""Running the kit in parallel: `fuzz --shard i/n` (the shards of a run together run exactly its cases) and the
per-rank audit, `verify --summary FILE` on each rank's dump then `packoracle merge` on the summaries (the
global per-step denominator across ranks)."""
import json
import os
import shlex
import subprocess
import sys
import tempfile
import unittest

from tests.helpers import PACKORACLE, REPO_ROOT

EXEC_DIR = os.path.join(REPO_ROOT, "exec", "test", "candidates")
REFERENCE = f"{sys.executable} {os.path.join(EXEC_DIR, 'reference_packer.py')}"
BUGGY = f"{sys.executable} {os.path.join(REPO_ROOT, 'python', 'candidates', 'buggy_tg03_boundary_target.py')}"


def packoracle(*args):
    return subprocess.run([PACKORACLE, *args], capture_output=True, text=True)


class FuzzShardTest(unittest.TestCase):
    def fuzz(self, *args, candidate=REFERENCE):
        return packoracle("fuzz", "--exec", candidate, "--preset", "reference", "--format", "json", *args)

    def test_the_shards_run_every_batch_of_the_unsharded_run_exactly_once(self):
        whole = self.fuzz("--cases", "200", "--seed", "5")
        self.assertEqual(whole.returncode, 0, whole.stdout + whole.stderr)
        whole = json.loads(whole.stdout)
        self.assertEqual(whole["cases"], 200)
        want = {(b["batch"], b["seed"], b["cases"]) for b in whole["batches"]}
        self.assertEqual(len(want), 7)  # 6 batches of 32 and one of 8
        for n in (2, 3):
            got = []
            for i in range(n):
                r = self.fuzz("--cases", "200", "--seed", "5", "--shard", f"{i}/{n}")
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                out = json.loads(r.stdout)
                self.assertEqual(out["shard"], {"index": i, "count": n})
                self.assertTrue(all(b["batch"] % n == i for b in out["batches"]), out["batches"])
                self.assertEqual(out["cases"], sum(b["cases"] for b in out["batches"]))
                got += [(b["batch"], b["seed"], b["cases"]) for b in out["batches"]]
            self.assertEqual(len(got), len(set(got)), f"a batch ran in two of {n} shards")
            self.assertEqual(set(got), want, f"{n} shards differ from the unsharded run")

    def test_a_shards_failure_replays_alone(self):
        r = self.fuzz("--cases", "400", "--shard", "1/2", candidate=BUGGY)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        failure = json.loads(r.stdout)["failure"]
        self.assertEqual(failure["invariant"], "targets")
        self.assertTrue(all(b["batch"] % 2 == 1 for b in json.loads(r.stdout)["batches"]))
        replay = shlex.split(failure["replay"])
        self.assertEqual(replay[0], "packoracle")
        self.assertNotIn("--shard", replay)
        again = subprocess.run([PACKORACLE, *replay[1:], "--format", "json"], capture_output=True, text=True)
        self.assertEqual(again.returncode, 1, again.stdout + again.stderr)
        self.assertEqual(json.loads(again.stdout)["failure"]["invariant"], "targets")
        self.assertEqual(json.loads(again.stdout)["failure"]["reproduce"], failure["reproduce"])

    def test_a_bad_shard_is_unusable_input_naming_the_argument(self):
        for bad in ("2/2", "1", "a/b", "-1/2", "0/0", "1/2/3"):
            with self.subTest(shard=bad):
                r = self.fuzz("--cases", "10", "--shard", bad)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn("--shard must be i/n", r.stderr)
                self.assertIn(f"'{bad}'", r.stderr)


# Two data-parallel ranks of one step under the reference policy (the lesson's documents, one per rank):
# 2 + 5 = 7 valid targets over the step, so every global-scope denominator must be 7.
HEADER = {"record": "header", "schema": "packed-batch", "version": 1, "producer": {"system": "test"},
          "special_ids": {"pad": 0}, "dp_world_size": 2, "grad_accum_steps": 1, "policy": {"preset": "reference"}}
DOCS = {0: {"record": "document", "doc_uid": "a", "tokens": [11, 12, 13], "supervised": [1, 1, 1]},
        1: {"record": "document", "doc_uid": "b", "tokens": [21, 22, 23, 24, 25, 26], "supervised": [1] * 6}}


def microbatch(rank, step=0, denominator=7):
    if rank == 0:
        row = {"input_ids": [11, 12, 13, 0, 0, 0, 0, 0], "labels": [12, 13] + [-100] * 6,
               "doc_spans": [{"doc_uid": "a", "start": 0, "length": 3, "doc_offset": 0}]}
        loss_sum = 4.0
    else:
        row = {"input_ids": [21, 22, 23, 24, 25, 26, 0, 0], "labels": [22, 23, 24, 25, 26] + [-100] * 3,
               "doc_spans": [{"doc_uid": "b", "start": 0, "length": 6, "doc_offset": 0}]}
        loss_sum = 5.0
    return {"record": "microbatch", "step": step, "micro_step": 0, "rank": rank, "rows": [row],
            "producer": {"loss_sum": loss_sum, "denominator": denominator, "denominator_scope": "global",
                         "loss": loss_sum / denominator}}


class VerifySummaryAndMergeTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="packoracle-merge-")

    def dump(self, name, lines):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            for line in lines:
                f.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
        return path

    def rank_dump(self, rank, denominator=7, steps=(0,)):
        docs = []
        for step in steps:  # a fresh document per step (each is packed once)
            doc = dict(DOCS[rank], doc_uid=f"{DOCS[rank]['doc_uid']}{step}")
            mb = microbatch(rank, step, denominator)
            mb["rows"][0]["doc_spans"][0]["doc_uid"] = doc["doc_uid"]
            docs += [doc, mb]
        return self.dump(f"rank{rank}.jsonl", [HEADER, *docs])

    def summarize(self, dump):
        summary = dump.replace(".jsonl", ".summary.json")
        r = packoracle("verify", dump, "--summary", summary)
        return r, summary

    def merge(self, *summaries, fmt="json"):
        r = packoracle("merge", "--format", fmt, *summaries)
        return r, (json.loads(r.stdout) if fmt == "json" and r.stdout else None)

    def test_each_rank_is_clean_alone_and_the_ranks_agree(self):
        summaries = []
        for rank in (0, 1):
            r, summary = self.summarize(self.rank_dump(rank, steps=(0, 1)))
            # Alone, a rank cannot know the global count: verify leaves that to merge, and cries no wolf.
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(summary) as f:
                s = json.load(f)
            self.assertEqual(s["schema"], "packoracle-summary")
            self.assertEqual(s["dp_world_size"], 2)
            self.assertEqual([(e["step"], e["rank"]) for e in s["entries"]], [(0, rank), (1, rank)])
            self.assertEqual(s["entries"][0]["valid_targets"], 2 if rank == 0 else 5)
            self.assertEqual(s["entries"][0]["loss_sum"], 4.0 if rank == 0 else 5.0)
            self.assertEqual(s["entries"][0]["microbatches"][0]["denominator"], 7)
            self.assertEqual(s["entries"][0]["microbatches"][0]["denominator_scope"], "global")
            summaries.append(summary)
        r, out = self.merge(*summaries)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(out["verdict"], "consistent")
        self.assertEqual([(s["step"], s["valid_targets"], s["checked"]) for s in out["steps"]], [(0, 7, True), (1, 7, True)])
        text, _ = self.merge(*summaries, fmt="text")
        self.assertIn("verdict: consistent", text.stdout)

    def test_a_rank_dividing_by_its_own_count_under_global_scope_is_caught_by_merge(self):
        _, s0 = self.summarize(self.rank_dump(0))
        r1, s1 = self.summarize(self.rank_dump(1, denominator=5))  # its own 5 targets, not the step's 7
        self.assertEqual(r1.returncode, 0, "alone, rank 1 cannot tell: " + r1.stdout)
        r, out = self.merge(s0, s1)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual(len(out["violations"]), 1)
        v = out["violations"][0]
        self.assertEqual((v["step"], v["rank"], v["micro_step"], v["expected"], v["actual"]), (0, 1, 0, "7", "5"))
        self.assertTrue(v["file"].endswith("rank1.jsonl") and v["line"] == 3, v)
        text, _ = self.merge(s0, s1, fmt="text")
        self.assertIn("rank1.jsonl:3", text.stdout)
        self.assertIn("the global-scope denominator 5 is not the step's valid targets over all 2 rank(s), 7", text.stdout)
        # Both ranks' dumps in one verify see the whole step and agree.
        both = packoracle("verify", self.rank_dump(0), self.rank_dump(1, denominator=5))
        self.assertEqual(both.returncode, 1, both.stdout)
        self.assertIn("divided by 5, but its global has 7 valid targets", both.stdout)

    def test_missing_ranks_and_steps_are_violations_never_a_pass(self):
        _, s0 = self.summarize(self.rank_dump(0, steps=(0, 1)))
        r, out = self.merge(s0)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertEqual(len(out["violations"]), 2)
        self.assertIn("no summary holds rank 1", out["violations"][0]["message"])
        self.assertFalse(any(s["checked"] for s in out["steps"]))
        _, s1 = self.summarize(self.rank_dump(1, steps=(0,)))
        r, out = self.merge(s0, s1)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertEqual([v["message"] for v in out["violations"]],
                         ["step 1 is missing from rank 1's summary (the other ranks have it): the step's global "
                          "denominator cannot be checked"])

    def test_unusable_summaries_exit_2_naming_file_and_field(self):
        _, s0 = self.summarize(self.rank_dump(0))
        with open(s0) as f:
            good = json.load(f)
        bad_field = dict(good, entries=[dict(good["entries"][0], step="zero")])
        cases = {
            "not json": ("{nope", "not JSON"),
            "not a summary": (json.dumps({"schema": "packed-batch"}), "field 'schema' must be \"packoracle-summary\""),
            "wrong type": (json.dumps(bad_field), "entries[0]: field 'step' must be an integer"),
            "missing field": (json.dumps({k: v for k, v in good.items() if k != "dp_world_size"}),
                              "field 'dp_world_size' is missing"),
        }
        for name, (text, message) in cases.items():
            with self.subTest(case=name):
                path = os.path.join(self.dir, name.replace(" ", "_") + ".json")
                with open(path, "w") as f:
                    f.write(text)
                r, _ = self.merge(path, fmt="text")
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn(path, r.stderr)
                self.assertIn(message, r.stderr)
        r, _ = self.merge(s0, s0, fmt="text")
        self.assertEqual(r.returncode, 2)
        self.assertIn("step 0 of rank 0 is also in", r.stderr)
        r, _ = self.merge(os.path.join(self.dir, "absent.json"), fmt="text")
        self.assertEqual(r.returncode, 2)


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/python3
"""trident eval --suite against an independent scorer.

A suite is a paper's table as data (configs/eval/mt-nlg.json is MT-NLG's): every row's task at
every column's shot count. On eval_test.py's hand-made task files and random GPT-2 weights:
each cell's value equals the metric computed here from the harness's request strings (eval_test's
independent task definitions) and PyTorch's log-likelihoods; the table sets each value beside
the suite file's published number; d = 2 gives one process's cells; the shipped mt-nlg suite
runs end to end with its shot counts reaching the prompts; bad suite files exit 2 naming the
file, the row and the rule.
Usage: eval_suite_test.py /path/to/trident /path/to/source
"""
import copy
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eval_test import (TASKS, encode_pair, gpt2_tokenizer, harness_requests,  # noqa: E402
                       random_model, run_eval, task_files, torch_loglikelihood, write_tasks)
from parity import Checks  # noqa: E402

# Rows of the hand-made suite: task, metric, shot counts per column, published numbers.
ROWS = [("piqa", "acc_norm", [0, 1, 2], [82.0, None, 83.2]),
        ("lambada_openai", "acc", [0, 1, 2], [76.6, None, None]),
        ("anli_r2", "acc", [0, 1, 2], [None, 39.7, None]),
        ("hans", "acc", [0, 1, 2], [None, None, 73.2]),
        ("winogrande", "acc", [0, 1, 2], [73.0, None, None]),
        ("wic", "acc", [0, 1, 3], [None, None, None])]
COLUMNS = ["0-shot", "1-shot", "few-shot"]


def suite_file(path, table=ROWS, **changes):
    suite = {"name": "mini", "title": "A small suite", "reference_model": "Paper 530B",
             "columns": COLUMNS,
             "rows": [{"task": t, "label": t.upper(), "metric": m, "shots": k, "reference": r}
                      for t, m, k, r in table]}
    suite.update(changes)
    with open(path, "w") as f:
        json.dump(suite, f)
    return path


def independent_metric(name, metric, docs, per_doc):
    """The harness's acc / acc_norm from per-document (log-likelihood, is_greedy) lists."""
    kind, conv = TASKS[name][3], TASKS[name][4]
    if kind == "ll":
        return sum(p[0][1] for p in per_doc) / len(per_doc)
    hits = []
    for doc, p in zip(docs, per_doc):
        c = conv(doc)
        lls = [ll for ll, _ in p]
        if metric == "acc_norm":
            lls = [ll / len(ch) for ll, ch in zip(lls, c["choices"])]
        hits.append(float(max(range(len(lls)), key=lambda i: (lls[i], -i)) == c["gold"]))
    return sum(hits) / len(hits)


def check_cells(check, files, enc, w, out, log):
    """Each cell against the harness's requests scored by PyTorch."""
    results = json.load(open(out))
    samples = [json.loads(line) for line in open(log)]
    for row, (name, metric, shots, refs) in zip(results["rows"], ROWS):
        ev, fs, *_ = TASKS[name]
        docs, pool = files[f"{name}/{ev}"], files[f"{name}/{fs}"]
        for cell, k, ref in zip(row["cells"], shots, refs):
            want = harness_requests(name, docs, pool, k, 1234)
            got = [s for s in samples if s["task"] == name and s["n-shot"] == k]
            flat = [req for reqs, _ in want for req in reqs]
            same = [(g["context"], g["continuation"]) for g in got] == flat
            same = same and all(encode_pair(enc, c, x) == (g["context_tokens"],
                                                          g["continuation_tokens"])
                                for (c, x), g in zip(flat, got))
            scored, at = [], 0
            for reqs, _ in want:
                scored.append([torch_loglikelihood(w, g["context_tokens"], g["continuation_tokens"])
                               for g in got[at:at + len(reqs)]])
                at += len(reqs)
            # PyTorch's float64 and trident's float32 agree to 1e-4: no near ties decide a cell.
            err = max(abs(ll - g["logprob"]) / max(1.0, abs(ll))
                      for (ll, _), g in zip([x for p in scored for x in p], got))
            value = independent_metric(name, metric, docs, scored) if same else None
            check(same and err < 1e-4 and cell["value"] == value and cell["n-shot"] == k and
                  cell["reference"] == ref,
                  f"{name} {k}-shot {metric}: {cell['value']} equals the harness's requests "
                  f"scored by PyTorch ({value}, ll error {err:.1e}), reference {ref}")


def check_table(check, stdout):
    lines = stdout.splitlines()
    head = [ln for ln in lines if ln.startswith("| Task | Metric |")]
    check(head == ["| Task | Metric | 0-shot | Paper 530B | 1-shot | Paper 530B | few-shot (k) | "
                   "Paper 530B |"], f"the table's header: each column beside the paper's ({head})")
    rows = {ln.split(" | ")[0][2:]: ln.split(" | ") for ln in lines if ln.startswith("| ") and
            " | " in ln and ln.split(" | ")[0][2:] in {r[0].upper() for r in ROWS}}
    ok = len(rows) == len(ROWS)
    for name, _, shots, refs in ROWS:
        cells = rows.get(name.upper(), [])
        want = ["-" if r is None else f"{r:.1f}" for r in refs]
        ok = ok and [cells[3], cells[5], cells[7].rstrip(" |")] == want
        ok = ok and cells[6].endswith(f"({shots[2]})")
    check(ok, "every row prints the published numbers (or '-') beside its cells, few-shot with k")


def distinct_copies(docs, n):
    """n documents from docs, each made distinct (a marker in its first free-text field), so a
    pool of n never holds an evaluated document twice."""
    out = []
    for i in range(n):
        d = copy.deepcopy(docs[i % len(docs)])
        key = next(k for k, v in d.items() if isinstance(v, str) and k not in
                   ("answer", "answerKey", "label"))
        d[key] = d[key] + f" {i}" if key != "problems" else d[key]
        out.append(d)
    return out


def check_mt_nlg(check, trident, tmp, files, tok, model):
    """The shipped suite end to end: nine tasks, its shot counts in the prompts."""
    shipped = json.load(open(os.path.join(SOURCE, "configs/eval/mt-nlg.json")))
    big = {}
    for row in shipped["rows"]:
        name = row["task"]
        ev, fs, *_ = TASKS[name]
        big[f"{name}/{ev}"] = distinct_copies(files[f"{name}/{ev}"], 60 if ev == fs else 2)
        if fs != ev:
            big[f"{name}/{fs}"] = distinct_copies(files[f"{name}/{fs}"], 60)
    root = os.path.join(tmp, "mt-nlg-tasks")
    write_tasks(root, big)
    out, log = os.path.join(tmp, "mt.json"), os.path.join(tmp, "mt.jsonl")
    r = run_eval(trident, ["--load-hf", model, "--task-dir", root, "--suite", "mt-nlg", "--limit",
                           "2", "--output", out, "--log-samples", log] + tok)
    check(r.returncode == 0, f"--suite mt-nlg runs end to end ({r.stderr.strip()[-200:]})")
    if r.returncode != 0:
        return
    got = json.load(open(out))
    cells = [(row["task"], c["n-shot"], c["reference"]) for row in got["rows"] for c in row["cells"]]
    want = [(row["task"], k, ref) for row in shipped["rows"]
            for k, ref in zip(row["shots"], row["reference"])]
    check(cells == want and len(cells) == 27,
          "27 cells: nine tasks at the file's shot counts, beside its published numbers")
    samples = [json.loads(line) for line in open(log)]
    ok = True
    for task, k, _ in want:
        contexts = [s["context"] for s in samples if s["task"] == task and s["n-shot"] == k]
        counts = {c.count("\n\n") for c in contexts}
        inner = 1 if task == "race" else 0  # RACE's text has a blank line after the article
        if counts != {k * (inner + 1) + inner}:
            print(f"  {task} {k}-shot: blank-line counts {sorted(counts)}")
            ok = False
    check(ok, "every prompt holds its cell's number of examples (joined by blank lines)")
    check("LAMBADA" in r.stdout and "76.6" in r.stdout and "| MT-NLG 530B |" in r.stdout,
          "the table names MT-NLG 530B and its published numbers")


def check_bad_suites(check, trident, tmp, tok, model, root):
    cases = [("unknown task", dict(rows=[{"task": "lambda", "metric": "acc", "shots": [0, 1, 2],
                                          "reference": [None] * 3}]), "row 1: unknown task"),
             ("metric", dict(rows=[{"task": "hans", "metric": "acc_norm", "shots": [0, 1, 2],
                                    "reference": [None] * 3}]), "has no metric \"acc_norm\""),
             ("shots", dict(rows=[{"task": "hans", "metric": "acc", "shots": [0, 1],
                                   "reference": [None] * 3}]), "\"shots\" must be a list of 3"),
             ("reference", dict(rows=[{"task": "hans", "metric": "acc", "shots": [0, 1, 2],
                                       "reference": [None, 120, None]}]), "percentages in [0, 100]")]
    for what, change, why in cases:
        path = suite_file(os.path.join(tmp, "bad.json"), **change)
        r = run_eval(trident, ["--load-hf", model, "--task-dir", root, "--suite", path] + tok)
        check(r.returncode == 2 and path in r.stderr and why in r.stderr,
              f"a bad suite ({what}): exit 2 naming the file and the rule ({r.stderr.strip()[:100]})")
    r = run_eval(trident, ["--load-hf", model, "--suite", "no-such-suite"] + tok)
    check(r.returncode == 2 and "no-such-suite.json" in r.stderr, "an unknown suite name: exit 2")
    r = run_eval(trident, ["--load-hf", model, "--suite", "mt-nlg", "--tasks", "piqa"] + tok)
    check(r.returncode == 2 and "excludes" in r.stderr, "--suite with --tasks: exit 2")


SOURCE = None


def main():
    global SOURCE
    trident, SOURCE = sys.argv[1], sys.argv[2]
    tok, enc = gpt2_tokenizer(SOURCE)
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        model, w = random_model(tmp)
        files = task_files()
        root = os.path.join(tmp, "tasks")
        write_tasks(root, files)
        suite = suite_file(os.path.join(tmp, "mini.json"))
        out, log = os.path.join(tmp, "out.json"), os.path.join(tmp, "log.jsonl")
        base = ["--load-hf", model, "--task-dir", root, "--suite", suite] + tok
        r = run_eval(trident, base + ["--output", out, "--log-samples", log])
        check(r.returncode == 0, f"--suite FILE runs ({r.stderr.strip()[-300:]})")
        if r.returncode != 0:
            return check.summary()
        check_cells(check, files, enc, w, out, log)
        check_table(check, r.stdout)
        d2 = os.path.join(tmp, "d2.json")
        r = run_eval(trident, base + ["--output", d2], ranks=2)
        one, two = json.load(open(out)), json.load(open(d2)) if r.returncode == 0 else None
        same = two is not None and all(
            abs(a["value"] - b["value"]) < 1e-12 for x, y in zip(one["rows"], two["rows"])
            for a, b in zip(x["cells"], y["cells"]))
        check(same, "d = 2: every cell equals one process's")
        check_mt_nlg(check, trident, tmp, files, tok, model)
        check_bad_suites(check, trident, tmp, tok, model, root)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""trident eval against an independent implementation of lm-evaluation-harness's task
definitions (v0.4.13.dev0) and an independent PyTorch GPT-2 on the same HF weights.

On small hand-made files in each dataset's layout: the request strings equal the harness's
byte for byte (prompts, target delimiters, few-shot contexts from random.Random(seed)), the
token pairs equal HFLM's _encode_pair and rolling windows, every log-likelihood equals
PyTorch's and `trident score`'s, the metrics equal the harness's arithmetic, few-shot
contexts repeat with the seed and never hold the evaluated document, (t, p, d) layouts give
one process's metrics, and bad task files are refused with file, line and exit code 2.
Usage: eval_test.py /path/to/trident /path/to/source
"""
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from generation_test import CONFIG, EOD, write_model  # noqa: E402
from gpt2_python_reference import PATTERN, byte_map  # noqa: E402
from gpt2_torch import forward  # noqa: E402
from parity import MPI_ENV, Checks  # noqa: E402

MAX_LEN = CONFIG["n_positions"]
SHOTS = 2


class Encoder:
    """GPT-2 BPE (the published algorithm, as gpt2_python_reference.py)."""

    def __init__(self, encoder_json, vocab_bpe):
        self.encoder = json.load(open(encoder_json, encoding="utf-8"))
        lines = open(vocab_bpe, encoding="utf-8").read().split("\n")[1:-1]
        self.ranks = {tuple(line.split()): i for i, line in enumerate(lines)}
        self.to_char = byte_map()

    def bpe(self, word):
        parts = list(word)
        while len(parts) > 1:
            pairs = {(parts[i], parts[i + 1]) for i in range(len(parts) - 1)}
            best = min(pairs, key=lambda p: self.ranks.get(p, float("inf")))
            if best not in self.ranks:
                break
            merged, i = [], 0
            while i < len(parts):
                if i + 1 < len(parts) and (parts[i], parts[i + 1]) == best:
                    merged.append(parts[i] + parts[i + 1])
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        return [self.encoder[p] for p in parts]

    def __call__(self, text):
        ids = []
        for piece in PATTERN.findall(text):
            ids += self.bpe("".join(self.to_char[b] for b in piece.encode("utf-8")))
        return ids


# ---- The harness's task definitions, written from its YAML and utils files ----------------
def hellaswag_pre(text):
    text = text.strip().replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    return text.replace("  ", " ")


def wikitext_detok(s):
    s = s.replace("s '", "s'")
    s = re.sub(r"/' [0-9]/", r"/'[0-9]/", s)
    for a, b in ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."), (" : ", ": "), (" ; ", "; "),
                 (" . ", ". "), (" ! ", "! "), (" ? ", "? "), (" , ", ", ")):
        s = s.replace(a, b)
    s = re.sub(r"\(\s*([^\)]*?)\s*\)", r"(\1)", s)
    s = re.sub(r"\[\s*([^\]]*?)\s*\]", r"[\1]", s)
    s = re.sub(r"{\s*([^}]*?)\s*}", r"{\1}", s)
    s = re.sub(r"\"\s*([^\"]*?)\s*\"", r'"\1"', s)
    s = re.sub(r"'\s*([^']*?)\s*'", r"'\1'", s)
    for a, b in (("= = = =", "===="), ("= = =", "==="), ("= =", "=="), (" \u00b0 ", "\u00b0"),
                 (" \n", "\n"), ("\n ", "\n"), (" N ", " 1 "), (" 's", "'s")):
        s = s.replace(a, b)
    return s


def race_text(doc):
    import ast
    problems = ast.literal_eval(doc["problems"])
    text = "Article: " + doc["article"] + "\n\n"
    for p in problems[:-1]:
        ans = p["options"]["ABCD".index(p["answer"])]
        if p["question"][-6:] == "  _  .":
            text += p["question"][:-5] + ans + "\n"
        else:
            text += "Question: " + p["question"] + "\n" + "Answer: " + ans + "\n"
    return text + problems[-1]["question"], problems[-1]["options"][:4], \
        "ABCD".index(problems[-1]["answer"])


# name -> (eval split, fewshot split, draws k + 1, kind, doc -> (text, choices, gold/target))
def mc(text, choices, gold):
    return {"text": text, "choices": choices, "gold": gold}


TASKS = {
    "piqa": ("validation", "train", True, "mc", lambda d: mc(
        f"Question: {d['goal']}\nAnswer:", [d["sol1"], d["sol2"]], d["label"])),
    "hellaswag": ("validation", "train", True, "mc", lambda d: mc(
        hellaswag_pre(d["activity_label"] + ": " + d["ctx_a"] + " " + d["ctx_b"].capitalize()),
        [hellaswag_pre(e) for e in d["endings"]], int(d["label"]))),
    "boolq": ("validation", "train", True, "mc", lambda d: mc(
        f"{d['passage']}\nQuestion: {d['question']}?\nAnswer:", ["no", "yes"], d["label"])),
    "arc_easy": ("test", "train", False, "mc", lambda d: mc(
        f"Question: {d['question']}\nAnswer:", d["choices"]["text"],
        d["choices"]["label"].index(d["answerKey"]))),
    "arc_challenge": ("test", "train", False, "mc", lambda d: mc(
        f"Question: {d['question']}\nAnswer:", d["choices"]["text"],
        d["choices"]["label"].index(d["answerKey"]))),
    "race": ("test", "test", True, "mc", lambda d: mc(*race_text(d))),
    **{f"anli_r{r}": (f"test_r{r}", f"train_r{r}", False, "mc", lambda d: mc(
        f"{d['premise']}\nQuestion: {d['hypothesis']} True, False, or Neither?\nAnswer:",
        ["True", "Neither", "False"], d["label"])) for r in (1, 2, 3)},
    "mc:mine": ("test", "test", True, "mc", lambda d: mc(d["context"], d["choices"], d["label"])),
    "winogrande": ("validation", "train", True, "wino", lambda d: {
        "choices": [d["sentence"][:d["sentence"].index("_")] + o for o in (d["option1"], d["option2"])],
        "gold": {"1": 0, "2": 1}[d["answer"]],
        "target": d["sentence"][d["sentence"].index("_") + 1:].strip()}),
    "wic": ("validation", "train", True, "mc", lambda d: mc(
        f"Sentence 1: {d['sentence1']}\nSentence 2: {d['sentence2']}\nQuestion: Is the word "
        f"'{d['sentence1'][d['start1']:d['end1']]}' used in the same way in the two sentences "
        "above?\nAnswer:", ["no", "yes"], d["label"])),
    "hans": ("validation", "train", True, "mc", lambda d: mc(
        f"{d['premise']}\nQuestion: {d['hypothesis']} True or False?\nAnswer:", ["True", "False"],
        d["label"])),
    "crows_pairs_english": ("test", "test", True, "pair", lambda d: mc(
        "", [d["sent_more"], d["sent_less"]], 0)),
    "lambada_openai": ("test", "test", True, "ll", lambda d: {
        "text": " ".join(d["text"].split(" ")[:-1]), "target": " " + d["text"].split(" ")[-1]}),
}


def harness_requests(name, docs, pool, k, seed):
    """Request strings per document, as the harness's fewshot_context + construct_requests."""
    _, _, extra, kind, conv = TASKS[name]
    rnd = random.Random(seed)
    out = []
    for doc in docs:
        shots = []
        if k:
            drawn = rnd.sample(pool, k + 1 if extra else k)
            shots = [x for x in drawn if x != doc][:k] if extra else drawn
        prefix = ""
        for s in shots:
            p = conv(s)
            if kind in ("mc", "pair"):
                delimiter = "" if kind == "pair" else " "
                prefix += p["text"] + delimiter + p["choices"][p["gold"]] + "\n\n"
            elif kind == "wino":
                prefix += p["choices"][p["gold"]] + " " + p["target"] + "\n\n"
            else:
                prefix += p["text"] + " " + p["target"] + "\n\n"
        p = conv(doc)
        if kind in ("mc", "pair"):
            delimiter = "" if kind == "pair" else " "
            reqs = [(prefix + p["text"], delimiter + c) for c in p["choices"]]
        elif kind == "wino":
            reqs = [(prefix + c, " " + p["target"]) for c in p["choices"]]
        else:
            reqs = [(prefix + p["text"], p["target"])]
        out.append((reqs, shots))
    return out


def encode_pair(enc, context, continuation):
    if context == "":
        cont = enc(continuation)
        return ([EOD], cont) if cont[0] != EOD else (cont[:1], cont[1:])
    n = len(context) - len(context.rstrip())
    if n:
        continuation, context = context[-n:] + continuation, context[:-n]
    whole, ctx = enc(context + continuation), enc(context)
    return ctx, whole[len(ctx):]


def rolling_windows(tokens, max_len):
    """utils.get_rolling_token_windows(context_len=1) + make_disjoint_window."""
    first = min(max_len, len(tokens))
    windows = [([EOD], tokens[:first])]
    predicted = first
    while predicted < len(tokens):
        n = min(len(tokens) - predicted, max_len)
        end = predicted + n
        a, b = tokens[end - max_len - 1:end - 1], tokens[end - n:end]
        windows.append((a[:len(a) - (len(b) - 1)], b))
        predicted += n
    return windows


def torch_loglikelihood(w, ctx, cont):
    seq = (ctx + cont)[-(MAX_LEN + 1):]
    inp = seq[:-1]
    logits = forward(w, CONFIG, inp).log_softmax(-1)[len(inp) - len(cont):]
    targets = torch.tensor(cont)
    ll = float(logits.gather(1, targets[:, None]).sum())
    return ll, bool((logits.argmax(-1) == targets).all())


# ---- Hand-made task files in the published layouts -----------------------------------------
def task_files():
    words = "the a light water earth fire stone river bread house king voice".split()
    r = random.Random(5)

    def sentence(n):
        return " ".join(r.choice(words) for _ in range(n))

    t = {}
    piqa = lambda i: {"goal": f"How do I {sentence(4)} {i}?", "sol1": sentence(3).capitalize() + ".",
                      "sol2": sentence(5) + ".", "label": i % 2}
    t["piqa/validation"] = [piqa(i) for i in range(5)]
    t["piqa/train"] = [piqa(i + 10) for i in range(6)]
    hs = lambda i: {"activity_label": "Making tea", "ctx_a": f"A man {sentence(5)}.",
                    "ctx_b": f"THEN he {sentence(3)}", "endings": [
                        f"pours [header] the {sentence(2)} [title] water.", f"  {sentence(4)}  [x]",
                        sentence(3), sentence(6) + "."], "label": str(i % 4)}
    t["hellaswag/validation"] = [hs(i) for i in range(4)]
    t["hellaswag/train"] = [hs(i + 7) for i in range(5)]
    wg = lambda i: {"sentence": f"The {sentence(2)} was bigger than the _ because it {sentence(3)}.",
                    "option1": "stone", "option2": "river", "answer": "12"[i % 2]}
    t["winogrande/validation"] = [wg(i) for i in range(4)]
    t["winogrande/train"] = [wg(i + 3) for i in range(5)]
    bq = lambda i: {"passage": sentence(12), "question": f"is the {sentence(2)}", "label": i % 2}
    t["boolq/validation"] = [bq(i) for i in range(4)]
    t["boolq/train"] = [bq(i + 4) for i in range(4)]
    arc = lambda i, n: {"id": f"q{i}", "question": f"Which {sentence(4)}?", "choices": {
        "text": [sentence(2) for _ in range(n)], "label": ["A", "B", "C", "D", "E"][:n]},
        "answerKey": "ABCDE"[i % n]}
    for name in ("arc_easy", "arc_challenge"):
        t[name + "/test"] = [arc(i, 3 + i % 3) for i in range(4)]
        t[name + "/train"] = [arc(i + 5, 4) for i in range(4)]
    problems = lambda i: repr([{"answer": "B", "options": ["x", "stone", "z", "w"],
                                "question": f"The {sentence(2)} is  _  ."},
                               {"answer": "ABCD"[i % 4], "options": [sentence(2) for _ in range(4)],
                                "question": f"What's the {sentence(2)}?"}])
    t["race/test"] = [{"article": sentence(15), "problems": problems(i), "example_id": f"h{i}"}
                      for i in range(4)]
    nli = lambda i: {"uid": f"u{i}", "premise": sentence(9) + ".", "hypothesis": sentence(4) + ".",
                     "label": i % 3, "reason": ""}
    for n in (1, 2, 3):
        t[f"anli_r{n}/test_r{n}"] = [nli(i + 10 * n) for i in range(3)]
        t[f"anli_r{n}/train_r{n}"] = [nli(i + 10 * n + 3) for i in range(4)]
    # WiC's offsets are Python string indices: a word after non-ASCII text tests code points.
    def wic(i):
        lead = ["Ein Café", "the", "naïve ½"][i % 3]
        word = r.choice(words)
        first = f"{lead} {word} {sentence(3)}."
        return {"word": word, "sentence1": first, "sentence2": f"{sentence(2)} {word}.",
                "start1": len(lead) + 1, "end1": len(lead) + 1 + len(word), "start2": 0,
                "end2": 1, "idx": i, "label": i % 2}
    t["wic/validation"] = [wic(i) for i in range(4)]
    t["wic/train"] = [wic(i + 4) for i in range(5)]
    hans = lambda i: {"premise": f"The {sentence(2)} saw the {sentence(1)}.",
                      "hypothesis": f"The {sentence(1)} saw the {sentence(2)}.", "label": i % 2,
                      "parse_premise": "", "parse_hypothesis": "", "binary_parse_premise": "",
                      "binary_parse_hypothesis": "", "heuristic": "lexical_overlap",
                      "subcase": "ln_subject/object_swap", "template": "temp1"}
    t["hans/validation"] = [hans(i) for i in range(4)]
    t["hans/train"] = [hans(i + 4) for i in range(4)]
    crows = lambda i: {"sent_more": f"The {sentence(3)} were poor.",
                       "sent_less": f"The {sentence(3)} were rich.", "stereo_antistereo": "stereo",
                       "bias_type": "socioeconomic"}
    t["crows_pairs_english/test"] = [crows(i) for i in range(4)]
    t["lambada_openai/test"] = [{"text": sentence(8 + i)} for i in range(5)]
    t["wikitext/test"] = [{"page": " = Heading = \n " + sentence(40) + " @-@ ( " + sentence(3) +
                           " ) , 1 @,@ 000 ' s \" " + sentence(30) + " \" . \n"},
                          {"page": " = = Short = = \n " + sentence(5) + " . \n"}]
    t["mine/test"] = [{"context": f"Q: {sentence(3)}? A:", "choices": [sentence(1), sentence(2)],
                       "label": i % 2} for i in range(4)]
    return t


def write_tasks(root, files):
    for key, docs in files.items():
        os.makedirs(os.path.join(root, os.path.dirname(key)), exist_ok=True)
        with open(os.path.join(root, key + ".jsonl"), "w") as f:
            f.write("".join(json.dumps(d) + "\n" for d in docs))


def run_eval(trident, args, ranks=1):
    cmd = [trident, "eval", "--threads", "1", "--bootstrap-iters", "2000"] + args
    if ranks > 1:
        cmd = ["mpirun", "-np", str(ranks)] + cmd
    return subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV)


def gpt2_tokenizer(source):
    """trident's flags for the repository's GPT-2 vocabulary, and the reference encoder."""
    vocab, merges = (os.path.join(source, "data/gpt2", f) for f in ("encoder.json", "vocab.bpe"))
    return ["--vocab-file", vocab, "--merge-file", merges], Encoder(vocab, merges)


def random_model(tmp):
    """generation_test's random GPT-2 as an HF directory under tmp: (its path, its weights as
    float64 tensors for the PyTorch reference)."""
    torch.set_default_dtype(torch.float64)
    model = os.path.join(tmp, "hf")
    return model, {k: torch.tensor(v, dtype=torch.float64) for k, v in write_model(model).items()}


def main():
    trident, source = sys.argv[1], sys.argv[2]
    tok, enc = gpt2_tokenizer(source)
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        model, w = random_model(tmp)
        files = task_files()
        root = os.path.join(tmp, "tasks")
        write_tasks(root, files)
        text_path = os.path.join(tmp, "story.txt")
        with open(text_path, "w") as f:
            f.write("In the beginning God created the heaven and the earth.\nAnd the earth was "
                    "without form, and void.\n")
        names = list(TASKS) + ["wikitext", "text:" + text_path]
        base = ["--load-hf", model, "--task-dir", root, "--tasks", ",".join(names)] + tok
        out, log = os.path.join(tmp, "out.json"), os.path.join(tmp, "log.jsonl")
        r = run_eval(trident, base + ["--num-fewshot", "0", "--output", out, "--log-samples", log,
                                      "--batch-size", "3", "--max-step-tokens", "48"])
        check(r.returncode == 0, "eval of every task runs (0-shot, small steps)")
        if r.returncode != 0:
            print(r.stdout, r.stderr)
            return check.summary()
        zero = [json.loads(line) for line in open(log)]
        zero_results = json.load(open(out))
        check("|Tasks" in r.stdout and "acc_norm" in r.stdout, "prints the harness-style table")
        fs_out, fs_log = os.path.join(tmp, "fs.json"), os.path.join(tmp, "fs.jsonl")
        fs_tasks = list(TASKS)
        fs_args = ["--load-hf", model, "--task-dir", root, "--tasks", ",".join(fs_tasks),
                   "--num-fewshot", str(SHOTS), "--fewshot-seed", "1234"] + tok
        r = run_eval(trident, fs_args + ["--output", fs_out, "--log-samples", fs_log])
        check(r.returncode == 0, f"{SHOTS}-shot eval runs")
        few = [json.loads(line) for line in open(fs_log)] if r.returncode == 0 else []
        few_results = json.load(open(fs_out)) if r.returncode == 0 else {"results": {}}

        # Request strings and tokens equal the harness's; log-likelihoods equal PyTorch's.
        for shots, samples in ((0, zero), (SHOTS, few)):
            for name in TASKS:
                ev, fs, *_ = TASKS[name]
                d = "mine" if name == "mc:mine" else name
                docs, pool = files[f"{d}/{ev}"], files[f"{d}/{fs}"]
                want = harness_requests(name, docs, pool, shots, 1234)
                got = [s for s in samples if s["task"] == name]
                flat = [req for reqs, _ in want for req in reqs]
                same = [(g["context"], g["continuation"]) for g in got] == flat
                check(same, f"{name} {shots}-shot: request strings byte-identical to the harness's")
                toks = all(encode_pair(enc, c, x) == (g["context_tokens"], g["continuation_tokens"])
                           for (c, x), g in zip(flat, got))
                check(same and toks, f"{name} {shots}-shot: token pairs equal _encode_pair's")
                if shots:
                    own = all(doc not in s for doc, (_, s) in zip(docs, want))
                    check(own, f"{name}: no document is among its own few-shot examples")
                err = 0.0
                for g in got:
                    ll, greedy = torch_loglikelihood(w, g["context_tokens"], g["continuation_tokens"])
                    err = max(err, abs(ll - g["logprob"]) / max(1.0, abs(ll)))
                    err = err if greedy == g["is_greedy"] else float("inf")
                check(err < 1e-4, f"{name} {shots}-shot: log-likelihoods and is_greedy equal "
                                  f"PyTorch's (max rel error {err:.1e})")
                # Metric arithmetic, from the logged log-likelihoods.
                res = (zero_results if shots == 0 else few_results)["results"].get(name, {})
                kind = TASKS[name][3]
                per_doc, at = [], 0
                for reqs, _ in want:
                    per_doc.append(got[at:at + len(reqs)])
                    at += len(reqs)
                if kind == "ll":
                    lls = [p[0]["logprob"] for p in per_doc]
                    ok = abs(res.get("perplexity,none", 0) - math.exp(-sum(lls) / len(lls))) < 1e-9 * \
                        math.exp(-sum(lls) / len(lls))
                    acc = sum(p[0]["is_greedy"] for p in per_doc) / len(per_doc)
                    ok = ok and res.get("acc,none") == acc
                elif kind == "pair":
                    diffs = [abs(p[0]["logprob"] - p[1]["logprob"]) for p in per_doc]
                    more = [float(p[0]["logprob"] > p[1]["logprob"]) for p in per_doc]
                    ok = abs(res.get("likelihood_diff,none", -1) - sum(diffs) / len(diffs)) < 1e-12
                    ok = ok and res.get("pct_stereotype,none") == sum(more) / len(more)
                    hib = (zero_results if shots == 0 else few_results)["higher_is_better"][name]
                    ok = ok and hib == {"likelihood_diff": False, "pct_stereotype": False}
                else:
                    conv = TASKS[name][4]
                    accs, norms = [], []
                    for doc, p in zip(docs, per_doc):
                        c = conv(doc)
                        lls = [x["logprob"] for x in p]
                        accs.append(float(max(range(len(lls)), key=lambda i: (lls[i], -i)) == c["gold"]))
                        nl = [ll / len(ch) for ll, ch in zip(lls, c["choices"])]
                        norms.append(float(max(range(len(nl)), key=lambda i: (nl[i], -i)) == c["gold"]))
                    ok = res.get("acc,none") == sum(accs) / len(accs)
                    if "acc_norm,none" in res:
                        ok = ok and res["acc_norm,none"] == sum(norms) / len(norms)
                    mu = sum(accs) / len(accs)
                    se = math.sqrt(sum((a - mu) ** 2 for a in accs) / (len(accs) - 1) / len(accs))
                    ok = ok and abs(res.get("acc_stderr,none", -1) - se) < 1e-12
                check(ok, f"{name} {shots}-shot: metrics equal the harness's arithmetic")

        # Perplexity's bootstrap stderr as the harness draws it (random.Random(chunk).choices).
        lls = [s["logprob"] for s in zero if s["task"] == "lambada_openai"]
        reps = []
        for i in range(2):
            rnd = random.Random(i)
            for _ in range(1000):
                xs = rnd.choices(lls, k=len(lls))
                reps.append(math.exp(-sum(xs) / len(xs)))
        mu = sum(reps) / len(reps)
        se = math.sqrt(sum((x - mu) ** 2 for x in reps) / (len(reps) - 1))
        got = zero_results["results"]["lambada_openai"]["perplexity_stderr,none"]
        check(abs(got - se) < 1e-9 * se, f"perplexity stderr equals the harness's bootstrap ({got:.4f})")

        # Rolling log-likelihood: windows, PyTorch, word/byte perplexity.
        for name, pages, key in (("wikitext", files["wikitext/test"], "page"),
                                 ("text:" + text_path, [{"text": open(text_path).read()}], "text")):
            got = [s for s in zero if s["task"] == name]
            want, total, words, nbytes = [], 0.0, 0, 0
            for p in pages:
                text = wikitext_detok(p[key]) if name == "wikitext" else p[key]
                want += rolling_windows(enc(text), MAX_LEN)
                words += len(re.split(r"\s+", p[key]))
                nbytes += len(p[key].encode("utf-8"))
            same = [(g["context_tokens"], g["continuation_tokens"]) for g in got] == want
            check(same, f"{name}: rolling windows equal the harness's ({len(want)} windows)")
            err = 0.0
            for g in got:
                ll, _ = torch_loglikelihood(w, g["context_tokens"], g["continuation_tokens"])
                err = max(err, abs(ll - g["logprob"]) / max(1.0, abs(ll)))
                total += g["logprob"]
            check(err < 1e-4, f"{name}: window log-likelihoods equal PyTorch's ({err:.1e})")
            res = zero_results["results"][name]
            ok = abs(res["word_perplexity,none"] - math.exp(-total / words)) < 1e-9 * res["word_perplexity,none"]
            ok = ok and abs(res["bits_per_byte,none"] - (-total / nbytes / math.log(2))) < 1e-12
            ok = ok and res["bits_per_byte_stderr,none"] == "N/A"
            check(ok, f"{name}: word_perplexity, byte_perplexity, bits_per_byte")

        # Every log-likelihood equals `trident score` on the same tokens.
        g = [s for s in zero if s["task"].startswith("text:")][0]
        ids = g["context_tokens"] + g["continuation_tokens"]
        with open(os.path.join(tmp, "ids.json"), "w") as f:
            json.dump(ids, f)
        sc = subprocess.run([trident, "score", "--model", model, "--tokens",
                             os.path.join(tmp, "ids.json")], capture_output=True, text=True)
        loss = json.loads(sc.stdout)["loss"] if sc.returncode == 0 else float("nan")
        check(abs(loss * (len(ids) - 1) + g["logprob"]) < 1e-4 * abs(g["logprob"]),
              "a rolling window's log-likelihood equals trident score's")
        g = [s for s in zero if s["task"] == "piqa"][0]
        with open(os.path.join(tmp, "c1.json"), "w") as f:
            json.dump(g["context_tokens"], f)
        with open(os.path.join(tmp, "c2.json"), "w") as f:
            json.dump(g["context_tokens"] + g["continuation_tokens"], f)
        s1 = subprocess.run([trident, "score", "--model", model, "--tokens", os.path.join(tmp, "c1.json")],
                            capture_output=True, text=True)
        s2 = subprocess.run([trident, "score", "--model", model, "--tokens", os.path.join(tmp, "c2.json")],
                            capture_output=True, text=True)
        if s1.returncode == 0 and s2.returncode == 0:
            n1 = len(g["context_tokens"]) - 1
            n2 = n1 + len(g["continuation_tokens"])
            cont = -(json.loads(s2.stdout)["loss"] * n2 - json.loads(s1.stdout)["loss"] * n1)
            check(abs(cont - g["logprob"]) < 1e-4 * max(1, abs(cont)),
                  f"a choice's log-likelihood equals trident score's ({cont:.5f} vs {g['logprob']:.5f})")
        else:
            check(False, "trident score runs")

        # Few-shot contexts repeat with the seed and change with another.
        again = os.path.join(tmp, "again.jsonl")
        run_eval(trident, fs_args + ["--log-samples", again, "--batch-size", "1"])
        def strings(path):
            return [(s["context"], s["continuation"]) for s in map(json.loads, open(path))
                    if "context" in s] if os.path.exists(path) else None
        check(strings(again) == strings(fs_log), "few-shot requests repeat from the seed "
                                                 "(whatever the batch size)")
        other = os.path.join(tmp, "other.jsonl")
        seven = [a if a != "1234" else "7" for a in fs_args]
        run_eval(trident, seven + ["--log-samples", other])
        check(strings(other) not in (None, strings(fs_log)), "another seed draws other examples")

        # Separate (unshared) scoring gives the same numbers: the continuations then run
        # through the training kernel's attention instead of the KV cache's, another order
        # of summation, so to the tolerance the (t, p, d) layouts get below.
        sep = os.path.join(tmp, "sep.json")
        run_eval(trident, fs_args + ["--output", sep, "--no-shared-context"])
        gap = max((abs(v - few_results["results"][t][m]) / max(1, abs(v))
                   for t, r in json.load(open(sep))["results"].items() for m, v in r.items()
                   if isinstance(v, float)), default=0.0) if os.path.exists(sep) else float("inf")
        check(gap <= 1e-5, f"--no-shared-context gives the shared-context metrics "
                           f"(max rel difference {gap:.1e})")

        # Layouts: every metric equals one process's.
        for t, p, d in ((2, 1, 1), (1, 2, 1), (1, 1, 2)):
            lo = os.path.join(tmp, f"l{t}{p}{d}.json")
            r = run_eval(trident, fs_args + ["--output", lo, "--tensor-model-parallel-size", str(t),
                                             "--pipeline-model-parallel-size", str(p)], ranks=t * p * d)
            ok = r.returncode == 0
            if ok:
                res = json.load(open(lo))["results"]
                for task, metrics in few_results["results"].items():
                    for m, v in metrics.items():
                        got = res[task][m]
                        if isinstance(v, float):
                            ok = ok and abs(got - v) <= 1e-5 * max(1.0, abs(v))
            else:
                print(r.stderr[-2000:])
            check(ok, f"(t, p, d) = ({t}, {p}, {d}): every metric equals one process's")

        # Bad input: file, line and problem; exit code 2.
        bad_dir = os.path.join(tmp, "bad")
        cases = [("piqa/validation", '{"goal": "g", "sol1": "a", "label": 0}', "missing field \"sol2\""),
                 ("mine/test", '{"context": "c", "choices": ["a", "b"], "label": 2}', "out of range"),
                 ("mine/test", '{"context": "c", "choices": [], "label": 0}', "empty choice list"),
                 ("boolq/validation", '{"passage": "p", "question": ', "invalid JSON"),
                 ("anli_r2/test_r2", '{"premise": "p", "hypothesis": "h", "label": 3}',
                  "out of range"),
                 ("wic/validation", '{"sentence1": "s", "sentence2": "t", "start1": 0, "end1": '
                  '"x", "label": 1}', "\"end1\" must be an integer")]
        for key, line, why in cases:
            os.makedirs(os.path.join(bad_dir, os.path.dirname(key)), exist_ok=True)
            path = os.path.join(bad_dir, key + ".jsonl")
            with open(path, "w") as f:
                f.write('{"context": "c", "choices": ["a"], "label": 0}\n' if "mine" in key else
                        "\n")
                f.write(line + "\n")
            task = "mc:mine" if "mine" in key else key.split("/")[0]
            r = run_eval(trident, ["--load-hf", model, "--task-dir", bad_dir, "--tasks", task] + tok)
            check(r.returncode == 2 and f"{path}:2:" in r.stderr and why in r.stderr,
                  f"{why}: exit 2 naming {os.path.basename(path)}:2 ({r.stderr.strip()[:90]})")
        r = run_eval(trident, ["--load-hf", model, "--tasks", "lambda"] + tok)
        check(r.returncode == 2 and "hellaswag" in r.stderr and "lambada_openai" in r.stderr,
              "an unknown task name lists the known ones")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

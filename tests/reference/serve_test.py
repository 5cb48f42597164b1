#!/usr/bin/python3
"""`trident serve` end to end on a tiny GPT-2 with the real GPT-2 tokenizer.

Both APIs field by field; 64 concurrent clients x 8 requests whose greedy answers equal
`trident generate --greedy`; every kind of bad request answered with its error, each followed
by a good request; streaming that arrives token by token and adds up to the whole answer; a
client leaving mid-stream (its sequence cancelled); a full queue (503); SIGTERM (exit 0);
tensor parallelism under mpirun; a rank killed (the job ends, it does not hang).
Usage: serve_test.py /path/to/trident /path/to/source
"""
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity import MPI_ENV, Checks  # noqa: E402
from serve_client import Server, write_model  # noqa: E402

PROMPTS = ["In the beginning God created the heaven and the earth.", "Hello", "And God said",
           "The quick brown fox", "Once upon a time", "1 2 3 4", "Café au lait — naïve",
           "def main():"]
NEW_TOKENS = 12


def offline_greedy(trident, common, prompts, tokens):
    """The texts `trident generate --greedy --json` gives for the prompts."""
    cmd = [trident, "generate", "--greedy", "--json", "--tokens-to-generate", str(tokens)]
    cmd += common + [a for p in prompts for a in ("--prompt", p)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, check=True)
    return [json.loads(line)["text"] for line in out.stdout.splitlines()]


def completion(prompt, tokens=NEW_TOKENS, **extra):
    return dict(prompt=prompt, max_tokens=tokens, temperature=0, **extra)


def check_apis(check, s, offline):
    status, body = s.request("GET", "/health")
    check(status == 200 and body["status"] == "ok", "GET /health")
    status, body = s.request("GET", "/v1/models")
    check(status == 200 and body["object"] == "list" and body["data"][0]["id"] == "hf" and
          body["data"][0]["object"] == "model", f"GET /v1/models lists the model: {body}")

    # Megatron: text is prompt + generation, segments are every token's own text, logprobs
    # are of every token after the first.
    status, m = s.request("PUT", "/api", {"prompts": PROMPTS[:2], "tokens_to_generate": NEW_TOKENS,
                                          "top_k": 1, "logprobs": True})
    check(status == 200 and set(m) == {"text", "segments", "logprobs", "tokens"},
          f"PUT /api answers text, segments, logprobs, tokens ({status})")
    m_tokens = m["tokens"][0]
    for i in range(2):
        check(m["text"][i] == PROMPTS[i] + offline[i], f"PUT /api text[{i}] = prompt + greedy")
        check("".join(m["segments"][i]) == m["text"][i], f"segments[{i}] add up to the text")
        check(len(m["logprobs"][i]) == len(m["tokens"][i]) - 1 and
              all(x <= 0 for x in m["logprobs"][i]), f"logprobs[{i}]: one per token after the first")
    status, m = s.request("PUT", "/api", {"prompts": ["Hello"], "tokens_to_generate": 3,
                                          "add_BOS": True, "top_k": 1})
    check(status == 200 and m["tokens"][0][0] == 50256 and m["logprobs"] is None and
          m["text"][0].startswith("<|endoftext|>Hello"), "add_BOS prepends <|endoftext|>")

    # OpenAI: every field of the completion object.
    status, c = s.request("POST", "/v1/completions", completion(PROMPTS[0], logprobs=1))
    choice = c["choices"][0] if status == 200 else {}
    check(status == 200 and c["object"] == "text_completion" and c["id"].startswith("cmpl-") and
          c["model"] == "hf" and abs(c["created"] - time.time()) < 60, "completion header fields")
    check(choice.get("text") == offline[0] and choice.get("index") == 0 and
          choice.get("finish_reason") == "length", "completion text = greedy, finish_reason length")
    lp = choice.get("logprobs") or {}
    check(len(lp.get("tokens", [])) == NEW_TOKENS and "".join(lp["tokens"]) == offline[0] and
          len(lp["token_logprobs"]) == NEW_TOKENS and
          lp["text_offset"][0] == len(PROMPTS[0]), "logprobs: tokens, token_logprobs, text_offset")
    # Greedy: the likeliest token is the chosen one, with the chosen one's log-probability.
    tops = lp.get("top_logprobs") or []
    check(len(tops) == NEW_TOKENS and
          all(t == {tok: v} for t, tok, v in zip(tops, lp["tokens"], lp["token_logprobs"])),
          "logprobs=1: top_logprobs holds the chosen (likeliest) token and its log-probability")
    n_prompt = len(m_tokens) - NEW_TOKENS  # from PUT /api's token ids of the same prompt
    check(c.get("usage") == {"prompt_tokens": n_prompt, "completion_tokens": NEW_TOKENS,
                             "total_tokens": n_prompt + NEW_TOKENS}, f"usage counts: {c.get('usage')}")
    status, c = s.request("POST", "/v1/completions",
                          {"prompt": ["Hello", "Once upon a time"], "max_tokens": 6, "n": 2,
                           "seed": 7, "temperature": 0.9})
    texts = [ch["text"] for ch in c["choices"]] if status == 200 else []
    check(len(texts) == 4 and [ch["index"] for ch in c["choices"]] == [0, 1, 2, 3],
          "2 prompts x n = 2: four choices in order")
    status2, c2 = s.request("POST", "/v1/completions",
                            {"prompt": ["Hello", "Once upon a time"], "max_tokens": 6, "n": 2,
                             "seed": 7, "temperature": 0.9})
    check(status2 == 200 and [ch["text"] for ch in c2["choices"]] == texts,
          "a seed repeats sampled completions")
    stop = offline[0][3:6]
    status, c = s.request("POST", "/v1/completions", completion(PROMPTS[0], stop=[stop]))
    check(status == 200 and c["choices"][0]["finish_reason"] == "stop" and
          c["choices"][0]["text"] == offline[0][:offline[0].find(stop)],
          f"a stop string ends the text before it ({stop!r})")


def check_concurrency(check, s, offline, clients=64, per_client=8):
    """Every client keeps one connection and alternates the two APIs."""
    results, errors = [], []

    def client(k):
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=120)
        for j in range(per_client):
            i = (k * per_client + j) % len(PROMPTS)
            if j % 2:
                body, method, path = completion(PROMPTS[i]), "POST", "/v1/completions"
            else:
                body = {"prompts": [PROMPTS[i]], "tokens_to_generate": NEW_TOKENS, "top_k": 1}
                method, path = "PUT", "/api"
            try:
                conn.request(method, path, body=json.dumps(body))
                resp = conn.getresponse()
                answer = json.loads(resp.read())
                text = (answer["choices"][0]["text"] if j % 2 else
                        answer["text"][0][len(PROMPTS[i]):])
                results.append((resp.status, i, text))
            except Exception as e:  # noqa: BLE001 (counted, reported below)
                errors.append(repr(e))
        conn.close()

    start = time.time()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.time() - start
    ok = sum(1 for status, i, text in results if status == 200 and text == offline[i])
    check(not errors and ok == clients * per_client,
          f"{clients} clients x {per_client} requests: {ok} greedy answers equal trident generate"
          f" ({len(errors)} errors{': ' + errors[0] if errors else ''}) in {took:.1f} s")


BAD = [  # (method, path, body or raw bytes, status, a part of the message)
    ("PUT", "/api", b'{"prompts": ["a"', 400, "not valid JSON"),
    ("PUT", "/api", {"prompts": "Hello"}, 400, "prompts must be a list of strings"),
    ("PUT", "/api", {"tokens_to_generate": 4}, 400, "prompts is required"),
    ("PUT", "/api", {"prompts": []}, 400, "prompts must not be an empty list"),
    ("PUT", "/api", {"prompts": ["a"], "tokens_to_generate": -1}, 400, "an integer >= 0"),
    ("PUT", "/api", {"prompts": ["a"], "tokens_to_generate": 10**12}, 400,
     "exceeds the context of 128 tokens"),
    ("PUT", "/api", {"prompts": ["a"], "top_k": 4, "top_p": 0.5}, 400, "both top_k and top_p"),
    ("PUT", "/api", b'{"prompts": ["\xff\xfe"]}', 400, "not valid UTF-8"),
    ("POST", "/v1/completions", {"prompt": "word " * 200}, 400, "exceeds the context"),
    ("POST", "/v1/completions", {"prompt": "a", "max_tokens": "8"}, 400,
     "max_tokens must be an integer >= 0, got a string"),
    ("POST", "/v1/completions", {"prompt": "a", "max_tokens": 1e30}, 400, "max_tokens must be"),
    ("POST", "/v1/completions", {"prompt": 42}, 400, "prompt must be a string or a list"),
    ("POST", "/v1/completions", {"prompt": "a", "n": 1000}, 400, "n must be an integer in"),
    ("POST", "/v1/completions", {"prompt": "a", "model": "gpt-9"}, 404, "is not served here"),
    ("POST", "/v1/completions", b"[1, 2]", 400, "must be a JSON object"),
    ("POST", "/v1/completions", b"", 400, "it is empty"),
    ("POST", "/v1/completions", b'{"prompt": "' + b"a" * 70000 + b'"}', 413,
     "larger than --max-body-bytes"),
    ("GET", "/api", None, 404, "no route GET /api"),
    ("DELETE", "/v1/completions", None, 404, "no route"),
    ("GET", "/v2/nothing", None, 404, "no route GET /v2/nothing"),
]


def check_bad_requests(check, s, offline):
    for method, path, body, want, part in BAD:
        raw = body if isinstance(body, bytes) else None
        try:
            status, answer = s.request(method, path, body if raw is None else None, raw=raw)
        except (ConnectionError, http.client.HTTPException) as e:
            status, answer = None, repr(e)
        error = answer.get("error", {}) if isinstance(answer, dict) else {}
        check(status == want and part in error.get("message", "") and "type" in error,
              f"{method} {path} {str(body)[:40]!r}: {want} '{error.get('message', answer)}'")
        status, good = s.request("POST", "/v1/completions", completion(PROMPTS[1]))
        if status != 200 or good["choices"][0]["text"] != offline[1]:
            check(False, f"  ...and the next good request is served ({status})")
    check(True, "a good request after each bad one is served")


def check_streaming(check, s, offline):
    events = s.stream(completion(PROMPTS[0], 48))
    chunks = [json.loads(d) for _, d in events if d != "[DONE]"]
    text = "".join(c["choices"][0]["text"] for c in chunks)
    status, whole = s.request("POST", "/v1/completions", completion(PROMPTS[0], 48))
    check(events and events[-1][1] == "[DONE]" and text == whole["choices"][0]["text"],
          f"streamed chunks ({len(chunks)}) add up to the whole answer, then [DONE]")
    check(chunks and chunks[-1]["choices"][0]["finish_reason"] == "length" and
          all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1]) and
          all(c["object"] == "text_completion" for c in chunks),
          "only the last chunk has a finish_reason")
    times = [t for t, _ in events]
    distinct = len({round(t, 3) for t in times})
    # The tiny model makes a token in a fraction of a millisecond on an idle machine, and the
    # client may read several events per socket read: more than one arrival time shows the
    # stream is incremental, not one burst at the end.
    check(len(chunks) >= 40 and distinct >= 2,
          f"tokens arrive one by one: {len(chunks)} events at {distinct} distinct ms over "
          f"{1000 * (times[-1] - times[0]):.0f} ms")


def health(s):
    return s.request("GET", "/health")[1]


def check_disconnect(check, s, offline):
    before = health(s)
    events = s.stream(completion(PROMPTS[1], 100), stop_after=2)
    deadline = time.time() + 15
    while time.time() < deadline:
        h = health(s)
        if h["running"] == 0 and h["cancelled"] > before["cancelled"]:
            break
        time.sleep(0.05)
    check(len(events) == 2 and h["cancelled"] == before["cancelled"] + 1 and h["running"] == 0,
          f"a client leaving mid-stream cancels its sequence (cancelled {h['cancelled']})")
    check(h["generated_tokens"] - before["generated_tokens"] < 100,
          f"  ...before its 100 tokens ({h['generated_tokens'] - before['generated_tokens']} made)")
    status, good = s.request("POST", "/v1/completions", completion(PROMPTS[1]))
    check(status == 200 and good["choices"][0]["text"] == offline[1], "the next request is served")


def check_queue_full(check, trident, common):
    s = Server(trident, common + ["--max-batch", "1", "--max-queue", "1"])
    answers = []

    def ask():
        answers.append(s.request("POST", "/v1/completions", completion("Hello", 100)))

    threads = [threading.Thread(target=ask) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    codes = sorted(status for status, _ in answers)
    busy = [a for status, a in answers if status == 503]
    # One request may still sit in the queue when the next arrives (the engine had not yet
    # moved it into the batch), so only one success is certain.
    check(codes.count(200) >= 1 and busy and busy[0]["error"]["code"] == "queue_full",
          f"--max-batch 1 --max-queue 1, 5 at once: {codes} (503: queue_full)")
    start = time.time()
    code = s.stop()
    check(code == 0, f"SIGTERM: the server exits 0 ({code}) in {time.time() - start:.1f} s")


def check_tensor_parallel(check, trident, common, offline):
    s = Server(trident, common + ["--tensor-model-parallel-size", "2"], ranks=2)
    status, m = s.request("PUT", "/api", {"prompts": PROMPTS, "tokens_to_generate": NEW_TOKENS,
                                          "top_k": 1})
    same = status == 200 and [t[len(p):] for t, p in zip(m["text"], PROMPTS)] == offline
    check(same, "mpirun -np 2, t = 2: the same greedy text as one process")
    # SIGTERM to the serving rank: it answers its clients and releases the follower, and
    # mpirun exits 0. (SIGTERM to mpirun itself ends every rank too, but mpirun then exits 1.)
    os.kill(rank_pid(s.proc.pid, 0), 15)
    try:
        code = s.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        code = s.stop(9)
    check(code == 0, f"  ...and SIGTERM to rank 0 ends every rank, exit {code}")


def rank_pid(parent, rank):
    for pid in subprocess.run(["pgrep", "-P", str(parent)], capture_output=True,
                              text=True).stdout.split():
        try:
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if f"OMPI_COMM_WORLD_RANK={rank}".encode() in env:
            return int(pid)
    return None


def check_dead_rank(check, trident, common):
    s = Server(trident, common + ["--tensor-model-parallel-size", "2"], ranks=2)
    pid = rank_pid(s.proc.pid, 1)
    os.kill(pid, 9)
    start = time.time()
    try:
        s.proc.wait(timeout=30)
        ended = True
    except subprocess.TimeoutExpired:
        ended = False
    said = [line for line in s.errors().splitlines() if "rank 1" in line and "signal 9" in line]
    check(ended and s.proc.returncode != 0 and said,
          f"rank 1 killed: the job ends in {time.time() - start:.1f} s, exit "
          f"{s.proc.returncode}, saying {said[:1]}")
    s.stop()


def main():
    trident, source = sys.argv[1], sys.argv[2]
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "hf")
        write_model(model)
        common = ["--load-hf", model, "--threads", "1",
                  "--vocab-file", os.path.join(source, "data/gpt2/encoder.json"),
                  "--merge-file", os.path.join(source, "data/gpt2/vocab.bpe")]
        offline = offline_greedy(trident, common, PROMPTS, NEW_TOKENS)
        s = Server(trident, common + ["--max-batch", "8", "--max-body-bytes", "65536"])
        try:
            for part in (check_apis, check_concurrency, check_bad_requests, check_streaming,
                         check_disconnect):
                part(check, s, offline)
        finally:
            code = s.stop()
        check(code == 0, f"SIGTERM after all that: exit {code}")
        check_queue_full(check, trident, common)
        check_tensor_parallel(check, trident, common, offline)
        check_dead_rank(check, trident, common)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Load test of `trident serve` against the same batch run offline through `trident generate`.

N concurrent clients each send R greedy requests (POST /v1/completions, T new tokens each,
distinct prompts) to one server; reported: generated tokens/s of the server over the whole
run, per-request latency p50/p99, and the offline `trident generate` run of the same prompts
with the same --max-batch (its model-loading time, measured with a 1-token run, taken off).
The issue's target is server throughput within 20% of the offline run; this prints the
figures and asserts nothing.
Usage: bench/serve_load.py [--trident build/trident] [--clients 32] [--requests 4]
       [--tokens 32] [--max-batch 16] [--layers 4] [--hidden 256] [--load-hf DIR]
"""
import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
from serve_client import TINY, Server, write_model  # noqa: E402

WORDS = ("the of and to in is was he that it for on with as his they at be by this had not "
         "are but from or have an were which one their all there we been if has when who").split()


def prompts(n):
    """n distinct prompts of 6..13 words."""
    return [" ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(6 + i % 8)) + f" {i}"
            for i in range(n)]


def load(server, texts, clients, tokens):
    """Each client sends its share of the prompts one after another on one connection."""
    latencies, generated, errors = [], [0], []
    lock = threading.Lock()

    def client(k):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=600)
        for p in texts[k::clients]:
            start = time.monotonic()
            conn.request("POST", "/v1/completions", body=json.dumps(
                {"prompt": p, "max_tokens": tokens, "temperature": 0}))
            resp = conn.getresponse()
            body = json.loads(resp.read())
            with lock:
                if resp.status != 200:
                    errors.append(body)
                    continue
                latencies.append(time.monotonic() - start)
                generated[0] += body["usage"]["completion_tokens"]
        conn.close()

    start = time.monotonic()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.monotonic() - start, generated[0], sorted(latencies), errors


def offline(trident, common, texts, tokens, max_batch):
    """Seconds of `trident generate` for the prompts (load time taken off), tokens made."""
    def run(ps, n):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("\n".join(ps) + "\n")
        cmd = [trident, "generate", "--greedy", "--json", "--tokens-to-generate", str(n),
               "--max-batch", str(max_batch), "--prompt-file", f.name] + common
        start = time.monotonic()
        out = subprocess.run(cmd, capture_output=True, text=True, check=True)
        took = time.monotonic() - start
        os.unlink(f.name)
        return took, sum(len(json.loads(line)["tokens"]) for line in out.stdout.splitlines())

    startup, _ = run(texts[:1], 1)
    took, made = run(texts, tokens)
    return took - startup, made, startup


def percentile(xs, q):
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trident", default=os.path.join(ROOT, "build/trident"))
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--requests", type=int, default=4, help="per client")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--max-batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1,
                    help="--threads of both runs (1: steady on a shared machine; 0: all cores)")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--load-hf", help="a HF GPT-2 directory instead of a random model")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = a.load_hf
        if not model:
            model = os.path.join(tmp, "hf")
            write_model(model, dict(TINY, n_layer=a.layers, n_embd=a.hidden,
                                    n_head=max(1, a.hidden // 64), n_positions=256))
        common = ["--load-hf", model, "--threads", str(a.threads),
                  "--vocab-file", os.path.join(ROOT, "data/gpt2/encoder.json"),
                  "--merge-file", os.path.join(ROOT, "data/gpt2/vocab.bpe")]
        texts = prompts(a.clients * a.requests)
        print(f"model {model if a.load_hf else f'random {a.layers} layers x {a.hidden}'}; "
              f"{a.clients} clients x {a.requests} requests x {a.tokens} tokens, "
              f"--max-batch {a.max_batch}")
        server = Server(a.trident, common + ["--max-batch", str(a.max_batch)])
        try:
            load(server, texts[:a.clients], a.clients, 2)  # warm-up: connections, pages
            wall, made, lat, errors = load(server, texts, a.clients, a.tokens)
        finally:
            server.stop()
        off_wall, off_made, startup = offline(a.trident, common, texts, a.tokens, a.max_batch)
    server_tps, offline_tps = made / wall, off_made / off_wall
    print(f"server : {made} tokens in {wall:.2f} s = {server_tps:.0f} tokens/s; latency p50 "
          f"{1000 * percentile(lat, 0.5):.0f} ms, p99 {1000 * percentile(lat, 0.99):.0f} ms; "
          f"{len(errors)} errors")
    print(f"offline: {off_made} tokens in {off_wall:.2f} s = {offline_tps:.0f} tokens/s "
          f"(trident generate, {startup:.2f} s of loading taken off)")
    print(f"server / offline throughput = {server_tps / offline_tps:.2f} (target >= 0.80)")


if __name__ == "__main__":
    main()

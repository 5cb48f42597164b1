"""Helpers shared by the `trident serve` tests and bench/serve_load.py: a tiny HF GPT-2 with
the real GPT-2 vocabulary, starting a server on a free port, and plain http.client calls."""
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity import MPI_ENV  # noqa: E402
from torch_reference_test import hf_shapes, write_safetensors  # noqa: E402

# The real tokenizer needs vocab 50257; the rest is as small as a transformer gets.
TINY = dict(n_layer=2, n_embd=64, n_head=4, vocab_size=50257, n_positions=128,
            layer_norm_epsilon=1e-5, activation_function="gelu_new", model_type="gpt2")


def write_model(path, config=TINY, seed=31):
    rng = np.random.default_rng(seed)
    weights = {}
    for name, shape in hf_shapes(config).items():
        scale = 0.1 if len(shape) == 1 else 0.25
        base = 1.0 if name.endswith("weight") and len(shape) == 1 else 0.0
        weights[name] = (base + scale * rng.standard_normal(shape)).astype(np.float32)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f)
    write_safetensors(os.path.join(path, "model.safetensors"), weights)


class Server:
    """`trident serve --port 0 ...` (under mpirun with ranks > 1); the port is read from the
    line the server prints once it listens."""

    def __init__(self, trident, args, ranks=1, timeout=60, api_key=None):
        cmd = [trident, "serve", "--port", "0"] + args
        # Sent with every request of request() and stream() (the server's --api-key).
        self.headers = {"Authorization": "Bearer " + api_key} if api_key else {}
        if ranks > 1:
            cmd = ["mpirun", "-np", str(ranks)] + cmd
        # stderr to a file: a pipe nobody reads could fill and block the server.
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.stderr,
                                     text=True, env=MPI_ENV)
        self.port = None
        deadline = time.time() + timeout
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            if " on http://" in line:
                self.port = int(line.split(" on http://")[1].split()[0].rsplit(":", 1)[1])
                break
        if self.port is None:
            self.proc.kill()
            raise RuntimeError("server did not start: " + self.errors())

    def errors(self):
        self.stderr.seek(0)
        return self.stderr.read()

    def request(self, method, path, body=None, raw=None, timeout=60):
        """(status, parsed JSON or text) of one request on a fresh connection."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        conn.request(method, path, body=data,
                     headers=dict(self.headers, **{"Content-Type": "application/json"}))
        resp = conn.getresponse()
        text = resp.read().decode("utf-8")
        conn.close()
        try:
            return resp.status, json.loads(text)
        except ValueError:
            return resp.status, text

    def stream(self, body, stop_after=None, timeout=60):
        """[(arrival time, data)] of the SSE events of POST /v1/completions; with stop_after,
        the connection is closed after that many events (a client going away)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        conn.request("POST", "/v1/completions", body=json.dumps(dict(body, stream=True)),
                     headers=dict(self.headers, **{"Content-Type": "application/json"}))
        resp = conn.getresponse()
        assert resp.status == 200, (resp.status, resp.read())
        events = []
        for line in resp:
            line = line.decode("utf-8").rstrip("\n")
            if line.startswith("data: "):
                events.append((time.monotonic(), line[6:]))
                if stop_after is not None and len(events) >= stop_after:
                    break
                if line == "data: [DONE]":
                    break
        conn.close()
        return events

    def stop(self, sig=signal.SIGTERM, timeout=30):
        """Signals the server; its exit code (None if it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None

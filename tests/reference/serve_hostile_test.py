#!/usr/bin/python3
"""`trident serve` against hostile clients (issue 40), 127.0.0.1 only, bounded in time.

- A 20 MB chunked upload is answered 413 once it passes --max-body-bytes, and the server's
  memory grows by less than 50 MB; a Content-Length over the limit is answered before its body.
- 300 clients dripping header bytes for 20 s: a normal request is answered within 2 s
  throughout; the drippers are shed or timed out (408), the thread count does not grow.
- --api-key-file: no key or a wrong key gets 401 with WWW-Authenticate; the right key works;
  the page and /health stay open.
- A 1 MB one-word prompt is refused (400, prompt_too_long) within 1 s.
- SIGTERM during a streamed 64-token request: the request completes, new connections are
  refused, the server exits 0; with a short --shutdown-timeout the unfinished request is
  cancelled (503 in the stream) and the server exits soon after.
Usage: serve_hostile_test.py /path/to/trident /path/to/source
"""
import http.client
import json
import os
import select
import signal
import socket
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity import Checks  # noqa: E402
from serve_client import TINY, Server, write_model  # noqa: E402


def proc_status(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


def read_answer(sock, timeout):
    """The status and body of the one answer on a raw socket (b'' status 0 if none came)."""
    sock.settimeout(timeout)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = [int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:")]
        while length and len(body) < length[0]:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
    except (socket.timeout, ConnectionError):
        pass
    status = int(data.split(b" ")[1]) if data.startswith(b"HTTP/1.1 ") else 0
    return status, body


def check_chunked_upload(check, s, limit):
    rss_before = proc_status(s.proc.pid, "VmRSS")
    sock = socket.create_connection(("127.0.0.1", s.port))
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                 b"Content-Type: application/json\r\n\r\n")
    piece = b"10000\r\n" + b"a" * 0x10000 + b"\r\n"
    sent = 0
    sock.setblocking(False)
    while sent < 20 << 20:
        if select.select([sock], [], [], 0)[0]:
            break  # the server answered
        try:
            sock.sendall(piece)  # non-blocking: raises when the server stops reading
            sent += 0x10000
        except BlockingIOError:
            time.sleep(0.01)
        except ConnectionError:
            break
    sock.setblocking(True)
    status, body = read_answer(sock, 10)
    sock.close()
    rss_after = proc_status(s.proc.pid, "VmRSS")
    grew = (rss_after - rss_before) / 1024
    check(status == 413 and b"max-body-bytes" in body,
          f"chunked upload: 413 after {sent / 2**20:.1f} MB sent (limit {limit / 2**20:.1f} MB): "
          f"{body[:100]!r}")
    check(grew < 50, f"  ...the server's RSS grew {grew:.1f} MB (< 50)")
    sock = socket.create_connection(("127.0.0.1", s.port))
    sock.sendall(b"PUT /api HTTP/1.1\r\nHost: x\r\nContent-Length: 20971520\r\n\r\n")
    status, body = read_answer(sock, 5)
    sock.close()
    check(status == 413, f"Content-Length 20 MB: 413 before any body byte ({status})")


def check_request_timeout(check, s, timeout):
    sock = socket.create_connection(("127.0.0.1", s.port))
    sock.sendall(b"PUT /api HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompts\"")
    t0 = time.monotonic()
    status, body = read_answer(sock, timeout + 5)
    took = time.monotonic() - t0
    sock.close()
    check(status == 408 and timeout - 0.5 < took < timeout + 1,
          f"a body that stops arriving: 408 after {took:.1f} s (--request-timeout {timeout})")


def drip(port, stop, counts):
    """One slow client: a request head a byte a second, reconnecting when closed."""
    head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 1000
    while not stop.is_set():
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            time.sleep(0.5)
            continue
        try:
            for i in range(len(head)):
                sock.send(head[i:i + 1])
                if stop.wait(1.0):
                    break
                if select.select([sock], [], [], 0)[0]:
                    answer = sock.recv(4096)
                    counts["answered " + (answer[9:12].decode() if answer else "close")] += 1
                    break
        except OSError:
            counts["reset"] += 1
        sock.close()


def check_slow_clients(check, s, seconds=20, clients=300):
    threads_before = proc_status(s.proc.pid, "Threads")
    stop = threading.Event()
    counts = {"answered 408": 0, "answered 503": 0, "answered close": 0, "reset": 0}
    drippers = [threading.Thread(target=drip, args=(s.port, stop, counts)) for _ in range(clients)]
    for t in drippers:
        t.start()
    time.sleep(2)  # all connected and dripping
    worst, answered, end = 0.0, 0, time.monotonic() + seconds - 2
    while time.monotonic() < end:
        t0 = time.monotonic()
        status, body = s.request("POST", "/v1/completions",
                                 {"prompt": "Hello", "max_tokens": 4, "temperature": 0},
                                 timeout=10)
        worst = max(worst, time.monotonic() - t0)
        answered += status == 200
        time.sleep(0.5)
    threads_during = proc_status(s.proc.pid, "Threads")
    stop.set()
    for t in drippers:
        t.join()
    check(answered > 10 and worst < 2.0,
          f"{clients} slow clients for {seconds} s: {answered} normal requests answered, "
          f"the slowest in {worst:.2f} s (< 2)")
    check(threads_during <= threads_before,
          f"  ...the server's threads: {threads_before} before, {threads_during} during")
    check(counts["answered 408"] + counts["answered 503"] > 0,
          f"  ...the slow ones were timed out (408) or shed (503): {counts}")


def check_api_key(check, trident, common, tmp):
    key_file = os.path.join(tmp, "key")
    with open(key_file, "w") as f:
        f.write("s3cret-Key_1\n")
    s = Server(trident, common + ["--api-key-file", key_file])
    try:
        body = json.dumps({"prompt": "Hello", "max_tokens": 2, "temperature": 0})
        for name, headers, want in [
                ("no key", {}, 401), ("a wrong key", {"Authorization": "Bearer s3cret-Key_2"}, 401),
                ("a prefix of the key", {"Authorization": "Bearer s3cret"}, 401),
                ("the key as Basic", {"Authorization": "Basic s3cret-Key_1"}, 401),
                ("the key", {"Authorization": "Bearer s3cret-Key_1"}, 200),
                ("the key, scheme in lower case", {"Authorization": "bearer s3cret-Key_1"}, 200)]:
            conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
            conn.request("POST", "/v1/completions", body=body, headers=headers)
            resp = conn.getresponse()
            answer = json.loads(resp.read())
            conn.close()
            ok = resp.status == want
            if want == 401:
                ok = ok and answer["error"]["code"] == "invalid_api_key" and \
                    resp.getheader("WWW-Authenticate") == "Bearer"
            check(ok, f"--api-key-file, {name}: {resp.status} (want {want})")
        check(s.request("GET", "/health")[0] == 200 and s.request("GET", "/")[0] == 200,
              "  ...GET /health and the page need no key")
        check(s.request("PUT", "/api", {"prompts": ["a"], "tokens_to_generate": 1})[0] == 401,
              "  ...PUT /api needs it")
    finally:
        s.stop()


def check_long_word(check, s):
    t0 = time.monotonic()
    status, body = s.request("POST", "/v1/completions",
                             {"prompt": "a" * 1000000, "max_tokens": 1}, timeout=30)
    took = time.monotonic() - t0
    check(status == 400 and body["error"]["code"] == "prompt_too_long" and took < 1.0,
          f"a 1 MB one-word prompt: {status} in {took:.3f} s (< 1): {body['error']['message']}")


last_event = []


def stream_choices(s, body, on_first_event, timeout=60):
    """(choices' token counts, finish reasons, errors, saw [DONE]) of a streamed request."""
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=timeout)
    conn.request("POST", "/v1/completions", body=json.dumps(dict(body, stream=True)))
    resp = conn.getresponse()
    tokens, reasons, errors, done, first = {}, {}, [], False, True
    for line in resp:
        line = line.decode().strip()
        if not line.startswith("data: "):
            continue
        if first:
            on_first_event()
            first = False
        if line == "data: [DONE]":
            done = True
            break
        event = json.loads(line[6:])
        if "error" in event:
            errors.append(event["error"].get("code"))
            continue
        for c in event["choices"]:
            if c["finish_reason"]:  # the choice's last event, after its last token
                reasons[c["index"]] = c["finish_reason"]
            else:
                tokens[c["index"]] = tokens.get(c["index"], 0) + 1
    conn.close()
    last_event.append(time.monotonic())
    return tokens, reasons, errors, done


def check_graceful_shutdown(check, trident, common):
    s = Server(trident, common + ["--max-batch", "2"])
    signalled = []

    def signal_server():
        signalled.append(time.monotonic())
        s.proc.send_signal(signal.SIGTERM)

    # 8 choices of 64 tokens through 2 slots: four rounds still to run at the signal.
    tokens, reasons, errors, done = stream_choices(
        s, {"prompt": "Hello", "max_tokens": 64, "n": 8, "temperature": 0},
        signal_server)
    refused = False
    try:
        socket.create_connection(("127.0.0.1", s.port), timeout=2).close()
    except OSError:
        refused = True
    code = s.proc.wait(timeout=30)
    # A choice ends at 64 tokens, or earlier at <|endoftext|> ("stop").
    after = last_event[-1] - signalled[0]
    check(done and not errors and len(reasons) == 8 and after > 0.05 and
          all(tokens[i] == 64 or reasons[i] == "stop" for i in range(8)),
          f"SIGTERM during a streamed 8 x 64-token request: it completes over the next "
          f"{after:.2f} s ({tokens}, {errors})")
    check(refused and code == 0, f"  ...new connections refused ({refused}), exit {code}")
    s = Server(trident, common + ["--max-batch", "1", "--shutdown-timeout", "0.2"])
    tokens, reasons, errors, done = stream_choices(
        s, {"prompt": "Hello", "max_tokens": 100, "n": 16, "temperature": 0},
        lambda: (signalled.append(time.monotonic()), s.proc.send_signal(signal.SIGTERM)))
    t0 = time.monotonic()
    code = s.proc.wait(timeout=30)
    check(errors == ["shutting_down"] and done and code == 0 and time.monotonic() - t0 < 5,
          f"--shutdown-timeout 0.2: the unfinished request is cancelled ({errors}), exit {code}")


def main():
    trident, source = sys.argv[1], sys.argv[2]
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "hf")
        # Wider than serve_client's TINY, so that 64 tokens take long enough to signal during.
        write_model(model, dict(TINY, n_embd=256, n_layer=4))
        common = ["--load-hf", model, "--threads", "1",
                  "--vocab-file", os.path.join(source, "data/gpt2/encoder.json"),
                  "--merge-file", os.path.join(source, "data/gpt2/vocab.bpe")]
        limit = 1 << 20
        s = Server(trident, common + ["--max-body-bytes", str(2 * limit),
                                      "--request-timeout", "3"])
        try:
            check_chunked_upload(check, s, 2 * limit)
            check_request_timeout(check, s, 3)
            check_long_word(check, s)
            check_slow_clients(check, s)
        finally:
            code = s.stop()
        check(code == 0, f"the server survives all that and exits 0 ({code})")
        check_api_key(check, trident, common, tmp)
        check_graceful_shutdown(check, trident, common)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

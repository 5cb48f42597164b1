#!/usr/bin/python3
"""The page `trident serve` answers at GET /, in headless Chromium: the test types a prompt
into the textarea, clicks Generate, and watches the completion appear event by event (a
MutationObserver records each change), until it equals the server's own greedy answer. The
page names the served model (as GET /v1/models does) and samples by default (temperature
0.8, top-p 0.9): the test checks both, sets the temperature to 0 for the greedy comparison,
and then generates once more with the page's defaults. Then its chat mode: a system prompt
and two messages typed and sent, each reply streaming into the last bubble until it equals
the server's own greedy chat completion of the whole conversation so far. The browser is
driven over the DevTools protocol on a pipe (--remote-debugging-pipe: JSON messages
separated by NUL bytes on fds 3 and 4), so no WebSocket library is needed. Screenshots of
the finished page in both modes are kept as artifacts (the chat's with "_chat" before
".png").
Usage: serve_page_test.py /path/to/trident /path/to/source /path/to/screenshot.png
Exits 77 (CTest: skipped) when chromium is not installed.
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity import Checks  # noqa: E402
from serve_client import TINY, Server, write_model  # noqa: E402

PROMPT = "In the beginning God created"


class DevTools:
    """Chromium with its DevTools protocol on a pipe; call() waits for the answer."""

    def __init__(self, profile):
        to_browser, self.out = os.pipe()
        self.inp, from_browser = os.pipe()

        def child_fds():  # the browser reads commands on fd 3 and writes on fd 4
            os.dup2(to_browser, 3)
            os.dup2(from_browser, 4)

        self.proc = subprocess.Popen(
            ["chromium", "--headless", "--disable-gpu", "--no-sandbox",
             "--remote-debugging-pipe", "--no-first-run", f"--user-data-dir={profile}",
             "--window-size=900,700", "about:blank"],
            preexec_fn=child_fds, pass_fds=(3, 4), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_browser)
        os.close(from_browser)
        self.next_id, self.buffer, self.events = 0, b"", []

    def _read_message(self):
        while b"\0" not in self.buffer:
            chunk = os.read(self.inp, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, session=None, **params):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self.out, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._read_message()
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self.events.append(answer)

    def evaluate(self, session, expression):
        result = self.call("Runtime.evaluate", session, expression=expression,
                           returnByValue=True, awaitPromise=True)
        return result["result"].get("value")

    def close(self):
        try:
            self.call("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def click(browser, session, element_id):
    """A real mouse click at the element's centre (press and release)."""
    box = browser.evaluate(session, f"""(() => {{
        const r = document.getElementById("{element_id}").getBoundingClientRect();
        return [r.x + r.width / 2, r.y + r.height / 2]; }})()""")
    for kind in ("mousePressed", "mouseReleased"):
        browser.call("Input.dispatchMouseEvent", session, type=kind, x=box[0], y=box[1],
                     button="left", clickCount=1)


def wait_for_status(browser, session):
    deadline = time.time() + 30
    while time.time() < deadline:
        status = browser.evaluate(session, 'document.getElementById("status").textContent')
        if status.startswith("done") or status.startswith("error"):
            return status
        time.sleep(0.05)
    return status


API_KEY = "page-test-key"


def check_defaults(check, browser, session, server):
    _, models = server.request("GET", "/v1/models")
    expected = ", ".join(m["id"] for m in models["data"])
    deadline = time.time() + 10
    shown = "..."
    while shown == "..." and time.time() < deadline:
        shown = browser.evaluate(session, 'document.getElementById("model").textContent')
        time.sleep(0.05)
    check(shown == expected and expected, f"the page names the model: {shown!r} ({expected!r})")
    defaults = browser.evaluate(session, '["temperature", "top_p"].map('
                                '(id) => document.getElementById(id).value)')
    check(defaults == ["0.8", "0.9"], f"the page samples by default: {defaults}")


def check_api_key(check, browser, session):
    """The server wants --api-key: the page says so until the key is typed into its field."""
    deadline = time.time() + 10
    shown = "..."
    while shown == "..." and time.time() < deadline:
        shown = browser.evaluate(session, 'document.getElementById("model").textContent')
        time.sleep(0.05)
    check("missing or wrong API key" in shown, f"without the key the page says: {shown!r}")
    browser.evaluate(session, 'document.getElementById("api_key").focus(); true')
    browser.call("Input.insertText", session, text=API_KEY)
    browser.evaluate(session, 'document.getElementById("model").textContent = "...";'
                     'document.getElementById("api_key").dispatchEvent(new Event("change")); true')


def run_page(check, browser, server, expected, screenshot):
    target = browser.call("Target.createTarget", url=f"http://127.0.0.1:{server.port}/")
    session = browser.call("Target.attachToTarget", targetId=target["targetId"],
                           flatten=True)["sessionId"]
    deadline = time.time() + 20
    loaded = 'location.protocol == "http:" && document.readyState == "complete"'
    while not browser.evaluate(session, loaded) and time.time() < deadline:
        time.sleep(0.05)
    check(browser.evaluate(session, "document.title") == "trident serve", "GET / is the page")
    check_api_key(check, browser, session)
    check_defaults(check, browser, session, server)
    browser.evaluate(session, 'document.getElementById("temperature").value = "0"; true')
    # Every change of the completion, with its time, as the browser renders it.
    browser.evaluate(session, """window.changes = [];
        new MutationObserver(() => changes.push([performance.now(),
            document.getElementById("completion").textContent.length]))
          .observe(document.getElementById("completion"),
                   {childList: true, characterData: true, subtree: true}); true""")
    browser.evaluate(session, 'document.getElementById("prompt").focus(); true')
    browser.call("Input.insertText", session, text=PROMPT)  # typed, as an IME would
    check(browser.evaluate(session, 'document.getElementById("prompt").value') == PROMPT,
          "the prompt is typed into the textarea")
    click(browser, session, "go")
    status = wait_for_status(browser, session)
    shown = browser.evaluate(session, 'document.getElementById("completion").textContent')
    changes = browser.evaluate(session, "changes")
    check(status.startswith("done") and "finish_reason length" in status, f"status: {status!r}")
    check(shown == expected, f"the completion shown equals the server's greedy answer "
                             f"({len(shown)} characters)")
    lengths = [n for _, n in changes]
    check(len(changes) >= 10 and lengths == sorted(lengths) and lengths[-1] == len(shown),
          f"it streamed in: {len(changes)} renders, growing, over "
          f"{changes[-1][0] - changes[0][0]:.0f} ms" if changes else "it streamed in: no renders")
    browser.evaluate(session, 'document.getElementById("temperature").value = "0.8"; true')
    click(browser, session, "go")
    status = wait_for_status(browser, session)
    sampled = browser.evaluate(session, 'document.getElementById("completion").textContent')
    check(status.startswith("done") and "finish_reason length" in status and sampled,
          f"with the defaults it samples: {status!r}, {len(sampled)} characters")
    png = browser.call("Page.captureScreenshot", session, format="png")["data"]
    with open(screenshot, "wb") as f:
        f.write(base64.b64decode(png))
    check(os.path.getsize(screenshot) > 1000, f"screenshot kept: {screenshot}")
    return session


SYSTEM = "You are terse."
CHAT = ["Hello, who are you?", "Tell me more."]
CHAT_TOKENS = 16  # two turns and their replies within the tiny model's 128 positions


def send_message(check, browser, session, text):
    """Types a message into the chat box, clicks Send, and waits for the reply."""
    browser.evaluate(session, 'document.getElementById("chat_input").focus(); true')
    browser.call("Input.insertText", session, text=text)
    click(browser, session, "send")
    return wait_for_status(browser, session)


def run_chat(check, browser, session, server, screenshot):
    click(browser, session, "mode_chat")
    shown = browser.evaluate(session, """["chat_mode", "completion_mode", "send", "go"].map(
        (id) => !document.getElementById(id).hidden)""")
    check(shown == [True, False, True, False],
          f"chat mode shows the chat, hides the prompt: {shown}")
    browser.evaluate(session, f"""document.getElementById("temperature").value = "0";
        document.getElementById("max_tokens").value = "{CHAT_TOKENS}"; true""")
    browser.evaluate(session, 'document.getElementById("system").focus(); true')
    browser.call("Input.insertText", session, text=SYSTEM)
    browser.evaluate(session, """window.chatChanges = [];
        new MutationObserver(() => { const b = document.querySelectorAll(".bubble");
            chatChanges.push(b.length ? b[b.length - 1].textContent.length : 0); })
          .observe(document.getElementById("messages"),
                   {childList: true, characterData: true, subtree: true}); true""")
    messages = [{"role": "system", "content": SYSTEM}]
    for turn, text in enumerate(CHAT):
        status = send_message(check, browser, session, text)
        messages.append({"role": "user", "content": text})
        _, answer = server.request("POST", "/v1/chat/completions",
                                   {"messages": messages, "max_tokens": CHAT_TOKENS,
                                    "temperature": 0})
        expected = answer["choices"][0]["message"]["content"]
        bubbles = browser.evaluate(session, """[...document.querySelectorAll(".bubble")].map(
            (b) => [b.className, b.textContent])""")
        check(status.startswith("done") and "finish_reason length" in status,
              f"turn {turn + 1}: status {status!r}")
        check(len(bubbles) == 2 * (turn + 1) and bubbles[-2] == ["bubble user", text]
              and bubbles[-1] == ["bubble assistant", expected],
              f"turn {turn + 1}: the reply in the last bubble equals the server's greedy chat "
              f"completion of the conversation ({len(expected)} characters)")
        messages.append({"role": "assistant", "content": expected})
    lengths = browser.evaluate(session, "chatChanges")
    # Chunks read together render once, so fewer renders than tokens; several show a stream.
    check(len(set(lengths)) >= 6,
          f"the replies streamed in: {len(lengths)} renders, {len(set(lengths))} lengths")
    png = browser.call("Page.captureScreenshot", session, format="png")["data"]
    with open(screenshot, "wb") as f:
        f.write(base64.b64decode(png))
    check(os.path.getsize(screenshot) > 1000, f"chat screenshot kept: {screenshot}")
    click(browser, session, "clear")
    left = browser.evaluate(session, 'document.querySelectorAll(".bubble").length')
    check(left == 0, "New chat empties the conversation")


def main():
    trident, source, screenshot = sys.argv[1], sys.argv[2], sys.argv[3]
    if not shutil.which("chromium"):
        print("skipped: chromium is not installed")
        return 77
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "hf")
        # Wider than the other serve tests' model: each token takes long enough (~2 ms) that
        # the browser renders the stream several times instead of once at the end.
        write_model(model, config=dict(TINY, n_layer=4, n_embd=256))
        server = Server(trident, ["--load-hf", model, "--threads", "1", "--api-key", API_KEY,
                                  "--chat-template", os.path.join(source, "configs/chatml.jinja"),
                                  "--vocab-file", os.path.join(source, "data/gpt2/encoder.json"),
                                  "--merge-file", os.path.join(source, "data/gpt2/vocab.bpe")],
                        api_key=API_KEY)
        browser = DevTools(os.path.join(tmp, "profile"))
        try:
            # The page asks for 64 tokens (its default); the test sets temperature 0.
            status, answer = server.request("POST", "/v1/completions",
                                            {"prompt": PROMPT, "max_tokens": 64, "temperature": 0})
            session = run_page(check, browser, server, answer["choices"][0]["text"], screenshot)
            run_chat(check, browser, session, server, screenshot.replace(".png", "_chat.png"))
        finally:
            browser.close()
            server.stop()
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

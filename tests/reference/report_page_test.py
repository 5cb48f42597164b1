#!/usr/bin/python3
"""`trident report`: a tiny 2-rank pipeline run (p = 2) writes its metrics and timeline with
--report-dir, the report page is opened in headless Chromium (DevTools protocol on a pipe,
as serve_page_test.py) and checked against the run's files read here independently: the
embedded JSON equals the metrics file's rows, the loss chart has one point per logged
iteration (higher loss, higher on the page), the timeline one box per event of the Chrome
trace (same rank and name) and rows named by each rank's (t, c, d, p), the summary the
layout, the memory plan a bar per buffer, and the browser requested
nothing but the file itself. `--serve`, started before the run: the page opened then draws
the run as it is written, without a reload, asking nothing of anyone but its own server; the
JSON endpoint follows the file as lines are appended (a line still being written is left
out). Bad input: exit 2 naming the input, nothing written.
Usage: report_page_test.py TRIDENT SCREENSHOT.png
Exits 77 (CTest: skipped) when chromium is not installed.
"""
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity import MPI_ENV, Checks  # noqa: E402
from serve_page_test import DevTools  # noqa: E402

TRAIN = ["--mock-data", "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads",
         "2", "--seq-length", "32", "--vocab-size", "512", "--micro-batch-size", "2",
         "--global-batch-size", "8", "--pipeline-model-parallel-size", "2", "--train-iters",
         "6", "--eval-interval", "3", "--eval-iters", "1", "--log-interval", "1",
         "--peak-tflops", "1", "--threads", "1"]


def read_rows(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def logged(rows, key):
    """Iteration -> value of the last row with `key` (what a reader of the file takes)."""
    out = {}
    for r in rows:
        if key in r and "iteration" in r:
            out[r["iteration"]] = r[key]
    return out


def open_page(browser, url):
    target = browser.call("Target.createTarget", url="about:blank")
    session = browser.call("Target.attachToTarget", targetId=target["targetId"],
                           flatten=True)["sessionId"]
    browser.call("Network.enable", session)
    browser.call("Page.navigate", session, url=url)
    deadline = time.time() + 20
    while time.time() < deadline and not browser.evaluate(
            session, 'document.readyState == "complete" && '
                     '!!document.querySelector("#chart-loss-iterations svg, #chart-loss-iterations p")'):
        time.sleep(0.05)
    return session


def check_page(check, browser, page, rows, trace, screenshot):
    session = open_page(browser, "file://" + page)
    embedded = browser.evaluate(
        session, 'JSON.parse(document.getElementById("trident-metrics").textContent)')
    check(embedded == rows, f"the embedded JSON equals the metrics file's {len(rows)} rows")
    losses = logged(rows, "loss")
    points = browser.evaluate(session, """[...document.querySelectorAll(
        "#chart-loss-iterations circle.point.train")].map(c => +c.getAttribute("cy"))""")
    check(len(points) == len(losses) == 6,
          f"the loss chart has a point per logged iteration ({len(points)} of {len(losses)})")
    by_loss = [cy for _, cy in sorted(zip(losses.values(), points))]
    check(by_loss == sorted(by_loss, reverse=True), "a higher loss is drawn higher")
    valid = browser.evaluate(session, 'document.querySelectorAll('
                                      '"#chart-loss-iterations circle.point.validation").length')
    check(valid == len(logged(rows, "validation_loss")) >= 2,
          f"a validation point per validation ({valid})")
    tokens = browser.evaluate(session, 'document.querySelectorAll('
                                       '"#chart-loss-tokens circle.point.train").length')
    check(tokens == len(losses), "the loss against tokens has the same points")
    for chart in ("lr", "grad-norm", "tokens-per-s", "mfu"):
        n = browser.evaluate(session, f'document.querySelectorAll("#chart-{chart} circle.point").length')
        check(n == len(losses), f"chart {chart}: {n} points")
    titles = browser.evaluate(session, """[...document.querySelectorAll("#timeline-run rect.op")]
        .map(r => r.querySelector("title").textContent)""")
    drawn = sorted(re.match(r"rank (\d+): (.*) \(", t).groups() for t in titles)
    events = sorted((str(e["tid"]), e["name"]) for e in trace)
    check(drawn == events and len(events) > 50,
          f"the timeline has a box per trace event ({len(drawn)} of {len(events)}), by rank and name")
    # Rows and summary name the layout as the grid does: rank = tp + t (cp + c (dp + d pp)).
    rows_named = browser.evaluate(session, """[...document.querySelectorAll("#timeline-run text")]
        .map(t => t.textContent)""")
    summary = browser.evaluate(session, 'document.getElementById("summary").textContent')
    check("rank 0 (t 0, c 0, d 0, p 0)" in rows_named and "rank 1 (t 0, c 0, d 0, p 1)" in rows_named
          and "t 1 × c 1 × d 1 × p 2" in summary,
          f"timeline rows carry each rank's (t, c, d, p) and the summary the layout: {summary}")
    # The last iteration: each rank's events from its last step marker on.
    last = {}
    for e in trace:
        if e["cat"] == "step":
            last[e["tid"]] = max(last.get(e["tid"], e["ts"]), e["ts"])
    n = browser.evaluate(session, 'document.querySelectorAll("#timeline-last rect.op").length')
    expected = sum(1 for e in trace if e["ts"] >= last[e["tid"]])
    check(n == expected < len(events) / 3, f"the last iteration drawn apart: {n} of {expected}")
    plan = [r for r in rows if "memory_plan" in r][-1]["memory_plan"]
    bars = browser.evaluate(session, 'document.querySelectorAll("#memory-plan rect.bar.buffer").length')
    check(bars == sum(len(p["buffers"]) for p in plan) > 0, f"a memory bar per buffer ({bars})")
    collectives = [r for r in rows if "collectives" in r][-1]["collectives"]
    n = browser.evaluate(session, 'document.querySelectorAll("#collectives tr.collective").length')
    check(n == sum(len(k) for k in collectives.values()) > 0, f"a row per collective kind ({n})")
    urls = [e["params"]["request"]["url"] for e in browser.events
            if e.get("method") == "Network.requestWillBeSent" and e.get("sessionId") == session]
    check(urls and all(u.startswith("file://") for u in urls),
          f"the browser requested only the file itself: {urls}")
    browser.call("Emulation.setDeviceMetricsOverride", session, width=1300, height=2400,
                 deviceScaleFactor=1, mobile=False)
    png = browser.call("Page.captureScreenshot", session, format="png")["data"]
    with open(screenshot, "wb") as f:
        f.write(base64.b64decode(png))
    check(os.path.getsize(screenshot) > 10000, f"screenshot kept: {screenshot}")


def fetch_rows(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics.json", timeout=10) as answer:
        return json.loads(answer.read())


def start_server(trident, run):
    server = subprocess.Popen([trident, "report", run, "--serve", "0"], stdout=subprocess.PIPE,
                              text=True)
    line = server.stdout.readline()
    return server, int(re.search(r"127\.0\.0\.1:(\d+)/", line).group(1))


def check_live(check, browser, session, port, run, rows, trace):
    """The page opened before the run started has drawn the run without a reload."""
    check(fetch_rows(port) == rows, f"GET /metrics.json on port {port}: the file's rows")
    count = 'document.querySelectorAll("#chart-loss-iterations circle.point.train").length'
    boxes = 'document.querySelectorAll("#timeline-run rect.op").length'
    deadline = time.time() + 10
    while time.time() < deadline and (browser.evaluate(session, count) != 6 or
                                      browser.evaluate(session, boxes) != len(trace)):
        time.sleep(0.1)
    check(browser.evaluate(session, count) == 6 and browser.evaluate(session, boxes) == len(trace)
          and browser.evaluate(session, "window.notReloaded"),
          "the page opened before the run drew its 6 iterations and its timeline, no reload")
    before = browser.evaluate(session, count)
    row = {"iteration": 7, "consumed_samples": 56, "loss": 5.5, "lr": 1e-4, "grad_norm": 1.0,
           "tokens_per_s": 1000.0, "tflops": 0.1, "mfu": 0.1}
    with open(os.path.join(run, "metrics.jsonl"), "a") as f:
        f.write(json.dumps(row) + "\n" + '{"iteration": 8, "loss"')  # 8 still being written
    check(fetch_rows(port) == rows + [row],
          "the appended row is served at once; the unfinished line is left out")
    deadline = time.time() + 10
    while time.time() < deadline and browser.evaluate(session, count) == before:
        time.sleep(0.1)
    after = browser.evaluate(session, count)
    check(after == before + 1 and browser.evaluate(session, "window.notReloaded"),
          f"the open page redrew without a reload ({before} -> {after} points)")
    urls = {e["params"]["request"]["url"] for e in browser.events
            if e.get("method") == "Network.requestWillBeSent" and e.get("sessionId") == session}
    own = {f"http://127.0.0.1:{port}/{path}" for path in ("", "metrics.json", "timeline")}
    check(urls == own, f"the served page requested only its own server: {sorted(urls)}")


def check_refusals(check, trident, tmp):
    out = subprocess.run([trident, "report", os.path.join(tmp, "missing")], capture_output=True,
                         text=True)
    check(out.returncode == 2 and "missing" in out.stderr, f"no such run: exit 2, {out.stderr.strip()}")
    bad = os.path.join(tmp, "bad.jsonl")
    with open(bad, "w") as f:
        f.write('{"iteration": 1, "loss": 2.0}\nnot json\n')
    out = subprocess.run([trident, "report", "--metrics-file", bad], capture_output=True,
                         text=True)
    check(out.returncode == 2 and "line 2" in out.stderr and not os.path.exists(bad[:-6] + ".html"),
          f"a bad line: exit 2, nothing written: {out.stderr.strip()}")


def main():
    trident, screenshot = sys.argv[1], sys.argv[2]
    if not shutil.which("chromium"):
        print("skipped: chromium is not installed")
        return 77
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        run = os.path.join(tmp, "run")
        # Served from before the run starts: live while it writes.
        server, port = start_server(trident, run)
        browser = DevTools(os.path.join(tmp, "profile"))
        try:
            check(fetch_rows(port) == [], "served before the run starts: no rows yet")
            live = open_page(browser, f"http://127.0.0.1:{port}/")
            browser.evaluate(live, "window.notReloaded = true")
            out = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", trident, "train"] +
                                 TRAIN + ["--report-dir", run], capture_output=True, text=True,
                                 env=MPI_ENV, timeout=300)
            check(out.returncode == 0,
                  f"train --report-dir: exit {out.returncode} {out.stderr[-500:]}")
            rows = read_rows(os.path.join(run, "metrics.jsonl"))
            trace = [e for e in json.load(open(os.path.join(run, "timeline.json")))["traceEvents"]
                     if e["ph"] == "X"]
            svg = open(os.path.join(run, "timeline.svg")).read()
            check(svg.count('<rect class="op"') == len(trace), "timeline.svg: a box per trace event")
            page = os.path.join(tmp, "page.html")
            out = subprocess.run([trident, "report", run, "--output", page], capture_output=True,
                                 text=True)
            check(out.returncode == 0 and os.path.exists(page),
                  f"trident report: {out.stdout.strip()}")
            text = open(page).read()
            check(text == open(os.path.join(run, "report.html")).read(),
                  "the page train wrote at its end is the same page")
            check(not re.findall(r"https?://", text), "the page names no http(s) URL")
            check_page(check, browser, page, rows, trace, screenshot)
            check_live(check, browser, live, port, run, rows, trace)
        finally:
            browser.close()
            server.terminate()
            server.wait(timeout=10)
        check_refusals(check, trident, tmp)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

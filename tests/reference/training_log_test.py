#!/usr/bin/python3
"""What a training run reports: TensorBoard event files read back by an independent reader
(TFRecord framing with CRC-32C checked by python3-crc32c, Event/Summary decoded by
python3-protobuf from descriptors declared here), every scalar at every logged step equal to
the metrics file; a resumed run appends to the metrics file and to the TensorBoard directory;
--timing-log-level prints min/max timers across ranks; an injected slow rank is named as a
straggler; the collectives summary times each kind of collective (an injected delay on one
tensor-parallel rank shows up as its peer's all-reduce time); a rank that mpirun binds to one
CPU runs one thread and takes one core's peak for its MFU.
Usage: training_log_test.py /path/to/trident /path/to/source
"""
import glob
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

import crc32c
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity import MPI_ENV, Checks  # noqa: E402

ARGS = ["--mock-data", "--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "32", "--vocab-size", "301", "--micro-batch-size", "2",
        "--global-batch-size", "8", "--lr", "1e-3", "--log-interval", "1", "--eval-iters", "1",
        "--eval-interval", "2", "--peak-tflops", "1", "--seed", "5", "--threads", "1"]


def event_class():
    """tensorflow's Event and Summary messages (the fields TensorBoard scalars use)."""
    f = descriptor_pb2.FileDescriptorProto(name="tb_event.proto", package="tb")
    value = f.message_type.add(name="Value")
    value.field.add(name="tag", number=1, type=9, label=1)            # string
    value.field.add(name="simple_value", number=2, type=2, label=1)   # float
    summary = f.message_type.add(name="Summary")
    summary.field.add(name="value", number=1, type=11, label=3, type_name=".tb.Value")
    event = f.message_type.add(name="Event")
    event.field.add(name="wall_time", number=1, type=1, label=1)      # double
    event.field.add(name="step", number=2, type=3, label=1)           # int64
    event.field.add(name="file_version", number=3, type=9, label=1)
    event.field.add(name="summary", number=5, type=11, label=1, type_name=".tb.Summary")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.MessageFactory(pool).GetPrototype(pool.FindMessageTypeByName("tb.Event"))


def masked(data):
    crc = crc32c.crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xa282ead8) & 0xffffffff


def read_events(path, Event):
    """[(step, tag, value)] and the file_version; raises on a bad CRC or a torn record."""
    raw, at, scalars, version = open(path, "rb").read(), 0, [], None
    while at < len(raw):
        (n,) = struct.unpack_from("<Q", raw, at)
        (len_crc,) = struct.unpack_from("<I", raw, at + 8)
        if len_crc != masked(raw[at:at + 8]):
            raise ValueError(f"{path}: bad length CRC at byte {at}")
        data = raw[at + 12:at + 12 + n]
        (data_crc,) = struct.unpack_from("<I", raw, at + 12 + n)
        if len(data) != n or data_crc != masked(data):
            raise ValueError(f"{path}: bad data CRC at byte {at}")
        at += 16 + n
        e = Event()
        e.ParseFromString(data)
        if e.file_version:
            version = e.file_version
        for v in e.summary.value:
            scalars.append((e.step, v.tag, v.simple_value))
    return scalars, version


def train(trident, ranks, extra):
    cmd = [trident, "train"] + ARGS + extra
    if ranks > 1:
        cmd = ["mpirun", "--oversubscribe", "-np", str(ranks)] + cmd
    return subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=300)


def check_tensorboard(check, trident, work, Event):
    tb, metrics, ckpt = (os.path.join(work, n) for n in ("tb", "metrics.jsonl", "ckpt"))
    common = ["--tensorboard-dir", tb, "--metrics-file", metrics, "--save", ckpt,
              "--load", ckpt, "--pipeline-model-parallel-size", "2"]
    first = train(trident, 4, common + ["--train-iters", "3"])
    check(first.returncode == 0, f"4 ranks (p = 2, d = 2) train 3 iterations ({first.returncode})")
    second = train(trident, 4, common + ["--train-iters", "6", "--override-checkpoint-config"])
    check(second.returncode == 0, f"...and resume to 6 ({second.returncode}: "
          f"{second.stderr[-300:] if second.returncode else ''})")
    rows = [json.loads(line) for line in open(metrics)]
    steps = [r["iteration"] for r in rows if "loss" in r]
    check(steps == [1, 2, 3, 4, 5, 6], f"the metrics file keeps every iteration over the resume: "
          f"{steps}")
    files = sorted(glob.glob(os.path.join(tb, "events.out.tfevents.*")))
    check(len(files) == 2, f"the resumed run adds a second event file to the directory ({len(files)})")
    scalars, versions = [], []
    for path in files:
        try:
            s, v = read_events(path, Event)
            scalars += s
            versions.append(v)
        except ValueError as e:
            check(False, str(e))
    check(versions == ["brain.Event:2"] * len(files), f"each file starts with its version {versions}")
    by_tag = {}
    for step, tag, value in scalars:
        by_tag.setdefault(tag, {})[step] = value
    want = ["lm loss", "learning-rate", "batch-size", "grad-norm", "iteration-time",
            "throughput", "lm loss vs samples", "lm loss validation", "lm loss validation ppl"]
    check(all(t in by_tag for t in want), f"Megatron's scalar names present: "
          f"{sorted(by_tag)}")
    train_rows = {r["iteration"]: r for r in rows if "loss" in r}
    worst = 0.0
    for it, r in train_rows.items():
        for tag, key in (("lm loss", "loss"), ("learning-rate", "lr"), ("grad-norm", "grad_norm"),
                         ("batch-size", "global_batch_size")):
            got = by_tag.get(tag, {}).get(it)
            worst = max(worst, float("inf") if got is None else
                        abs(got - r[key]) / max(abs(r[key]), 1e-30))
    check(worst < 1e-6, f"lm loss, learning-rate, grad-norm, batch-size at every step 1-6 equal "
          f"the metrics file (worst relative difference {worst:.1e}, float32 in the file)")
    samples = {r["consumed_samples"]: r["loss"] for r in train_rows.values()}
    got = by_tag.get("lm loss vs samples", {})
    check(sorted(got) == sorted(samples), f"lm loss vs samples at consumed samples {sorted(got)}")
    valid = {r["iteration"]: r["validation_loss"] for r in rows if "validation_loss" in r}
    got = by_tag.get("lm loss validation", {})
    check(valid and all(abs(got.get(i, 1e9) - v) < 1e-5 * abs(v) for i, v in valid.items()),
          f"validation losses at iterations {sorted(valid)} equal the metrics file")


def check_timers(check, trident):
    out = train(trident, 4, ["--train-iters", "4", "--timing-log-level", "2",
                             "--pipeline-model-parallel-size", "2", "--inject-slow-rank", "3",
                             "--inject-slow-forward-ms", "400", "--eval-iters", "0"])
    text = out.stdout + out.stderr
    check(out.returncode == 0 and "(min, max) time across ranks (ms):" in text,
          "--timing-log-level 2 prints min/max timers across ranks")
    names = ["forward-backward", "optimizer", "forward-compute", "backward-compute",
             "forward-recv", "backward-recv"]
    check(all(f"    {n} " in text for n in names), f"timers {names} are listed")
    # With two ranks in a stage the median is their mean, so the slowed rank's ratio stays
    # below 2: the delay is large enough that a peer's noise on a loaded machine (4 ranks on
    # 2 cores; a first iteration that also allocates) cannot pull it under the threshold
    # (100 ms did, twice, beside other tests and builds).
    lines = [l for l in text.splitlines() if l.startswith("straggler: rank 3 ")]
    check(len(lines) == 4, f"the slowed rank 3 is named at every log interval ({len(lines)}): "
          f"{lines[:1]}")
    quiet = train(trident, 4, ["--train-iters", "4", "--timing-log-level", "1",
                               "--pipeline-model-parallel-size", "2", "--eval-iters", "0",
                               "--straggler-threshold", "5"])
    text = quiet.stdout + quiet.stderr
    check(quiet.returncode == 0 and "straggler" not in text and "forward-compute" not in text,
          "level 1 omits the fine timers; nothing is over a 500% threshold")
    bad = train(trident, 1, ["--train-iters", "1", "--timing-log-level", "3"])
    check(bad.returncode != 0 and "--timing-log-level must be 0, 1 or 2" in bad.stderr + bad.stdout,
          "--timing-log-level 3 is refused by name")


def tensor_all_reduce_ms(trident, work, extra):
    metrics = os.path.join(work, "collectives.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    out = train(trident, 2, ["--train-iters", "3", "--tensor-model-parallel-size", "2",
                             "--eval-iters", "0", "--metrics-file", metrics] + extra)
    if out.returncode != 0:
        return None, out.stdout + out.stderr
    rows = [json.loads(line) for line in open(metrics)]
    last = [r for r in rows if "collectives" in r][-1]
    entry = last["collectives"]["tensor"]["all-reduce"]
    return entry["seconds"] * 1e3 / last["iterations"], out.stdout


def check_collective_times(check, trident, work):
    # Rank 1 sleeps 300 ms before each of its 4 forwards per iteration, so rank 0 (whose
    # summary is printed) waits at least that long in the forward's first all-reduce. The
    # delay is large against the load: with two ranks on shared cores beside other tests, CI
    # measured 142 ms, and once 394 ms, of all-reduce per iteration with no delay at all; so
    # the undelayed run is compared by its difference, not against a fixed bound.
    delay_ms, forwards = 300, 4
    slowed, log = tensor_all_reduce_ms(trident, work, ["--inject-slow-rank", "1",
                                                       "--inject-slow-forward-ms", str(delay_ms),
                                                       "--timing-log-level", "2",
                                                       "--log-interval", "3"])
    check(slowed is not None and "ms in MPI" in log,
          f"t = 2 trains and prints collective times ({log[-300:] if slowed is None else 'ok'})")
    # The interval timers (--timing-log-level 2) show the same wait, on rank 0, as the
    # maximum of "tensor-all-reduce" across ranks.
    rows = re.findall(r"tensor-all-reduce\s*: \(([0-9.]+), ([0-9.]+)\) max on rank (\d+)",
                      log or "")
    check(len(rows) == 1 and float(rows[0][1]) >= 0.8 * delay_ms * forwards and rows[0][2] == "0",
          f"the log interval's tensor-all-reduce timer is longest on rank 0 and holds the delay: "
          f"{rows}")
    plain, _ = tensor_all_reduce_ms(trident, work, [])
    if slowed is None or plain is None:
        return
    check(slowed >= 0.8 * delay_ms * forwards and slowed - plain >= 0.5 * delay_ms * forwards,
          f"rank 0's tensor all-reduce time per iteration holds the peer's injected delay: "
          f"{slowed:.1f} ms with {forwards} x {delay_ms} ms injected, {plain:.1f} ms without")


def allowed_cpus(ranks):
    """The CPU sets mpirun gives each of `ranks` ranks, read from /proc."""
    out = subprocess.run(["mpirun", "-np", str(ranks), "grep", "Cpus_allowed_list",
                          "/proc/self/status"], capture_output=True, text=True, env=MPI_ENV).stdout
    sets = []
    for line in out.splitlines():
        cpus = set()
        for r in line.split()[-1].split(","):
            a, _, b = r.partition("-")
            cpus |= set(range(int(a), int(b or a) + 1))
        sets.append(cpus)
    return sets


def own_threads_args(iters):
    """ARGS without --threads and --peak-tflops: the run picks its threads and measures its
    peak itself."""
    drop = {i + k for i, a in enumerate(ARGS) if a in ("--peak-tflops", "--threads") for k in (0, 1)}
    return [a for i, a in enumerate(ARGS) if i not in drop] + ["--train-iters", str(iters)]


def check_bound_ranks(check, trident):
    """mpirun binds each of 1-2 ranks to one CPU: the rank's threads and its MFU peak follow
    its own affinity and the CPUs its node's ranks share, not the machine's CPU count."""
    args = own_threads_args(2)
    for ranks in (1, 2):
        sets = allowed_cpus(ranks)
        own, union = min(len(c) for c in sets), len(set().union(*sets))
        want_threads = max(1, min(own, os.cpu_count() // ranks))
        want_share = min(want_threads, own, union / ranks)
        out = subprocess.run(["mpirun", "-np", str(ranks), trident, "train"] + args,
                             capture_output=True, text=True, env=MPI_ENV, timeout=300)
        text = out.stdout + out.stderr
        threads = re.search(r"; (\d+) threads per rank", text)
        share = re.search(r"x ([0-9.]+) cores per rank", text)
        check(out.returncode == 0 and threads and int(threads.group(1)) == want_threads and
              share and abs(float(share.group(1)) - want_share) < 0.01,
              f"mpirun -np {ranks} (CPUs {sets}): {threads.group(1) if threads else '?'} threads "
              f"per rank (want {want_threads}), MFU peak of {share.group(1) if share else '?'} "
              f"cores per rank (want {want_share:.2f})")


def check_openmp_binding(check, trident):
    """OMP_PROC_BIND binds OpenMP's initial thread to its first place as the process starts,
    so the thread's own affinity then shows one core: the run must still take the CPUs the
    process was given: as many threads as this test's own affinity, read by Python, has CPUs."""
    args = own_threads_args(1)
    cpus = len(os.sched_getaffinity(0))
    env = dict(os.environ, OMP_PROC_BIND="true", OMP_PLACES="threads")
    out = subprocess.run([trident, "train"] + args, capture_output=True, text=True, env=env,
                         timeout=300)
    text = out.stdout + out.stderr
    threads = re.search(r"; (\d+) threads per rank", text)
    check(out.returncode == 0 and threads and int(threads.group(1)) == cpus,
          f"OMP_PROC_BIND=true: {threads.group(1) if threads else '?'} threads per rank "
          f"(want the {cpus} CPUs this process may use)")


def main():
    trident = os.path.abspath(sys.argv[1])
    os.chdir(sys.argv[2])
    check = Checks()
    Event = event_class()
    with tempfile.TemporaryDirectory() as work:
        check_tensorboard(check, trident, work, Event)
        check_collective_times(check, trident, work)
    check_timers(check, trident)
    check_bound_ranks(check, trident)
    check_openmp_binding(check, trident)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""What trident listens on (issue 40, item 5), read from the kernel's socket tables
(/proc/net/{tcp,tcp6,udp,udp6} matched to the process's socket inodes): a single-process
`trident serve` listens on its HTTP port on 127.0.0.1 and nothing else, and starts no Open
MPI helper daemon (orted); a single-process `train` and the ranks of a one-node
`mpirun -np 2` train bind no socket at all (Open MPI's TCP transport would listen on 0.0.0.0
and [::] in each). mpirun's own sockets are the launcher's, not trident's.
Usage: listening_test.py TRIDENT"""
import os
import subprocess
import sys
import tempfile
import time

from parity import MPI_ENV, Checks
from serve_client import Server, write_model

TRAIN = ["train", "--mock-data", "--train-iters", "100000", "--threads", "1", "--log-interval",
         "1000", "--peak-tflops", "1", "--num-layers", "1", "--hidden-size", "32",
         "--num-attention-heads", "2", "--seq-length", "16", "--vocab-size", "64"]


def socket_inodes(pid):
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def address(hex_address, ipv6):
    host, port = hex_address.split(":")
    if ipv6:
        return ("[::]" if int(host, 16) == 0 else "[" + host + "]") + f":{int(port, 16)}"
    octets = [str(int(host[i:i + 2], 16)) for i in range(6, -1, -2)]  # little-endian
    return ".".join(octets) + f":{int(port, 16)}"


def bound_sockets(pid):
    """'tcp 127.0.0.1:8080' for each listening TCP or bound UDP socket the process holds."""
    mine, out = socket_inodes(pid), []
    for table in ("tcp", "tcp6", "udp", "udp6"):
        for line in open(f"/proc/net/{table}").readlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            listening = state == "0A" if table.startswith("tcp") else state == "07"
            if inode in mine and listening:
                out.append(f"{table} {address(local, table.endswith('6'))}")
    return out


def children(pid):
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(p) for p in found.stdout.split()]


def settle(proc, seconds=2.0):
    """Lets a training process get past MPI's start-up."""
    time.sleep(seconds)
    return proc.poll() is None


def main():
    trident = sys.argv[1]
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        write_model(f"{tmp}/hf")
        server = Server(trident, ["--load-hf", f"{tmp}/hf", "--threads", "1"])
        try:
            sockets = bound_sockets(server.proc.pid)
            daemons = [p for p in children(server.proc.pid)
                       if open(f"/proc/{p}/comm").read().strip() == "orted"]
            check(sockets == [f"tcp 127.0.0.1:{server.port}"] and not daemons,
                  f"single-process serve: bound {sockets}, helper daemons {daemons}")
        finally:
            server.stop()

        proc = subprocess.Popen([trident] + TRAIN, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=MPI_ENV)
        alive = settle(proc)
        sockets = bound_sockets(proc.pid) if alive else None
        kids = children(proc.pid) if alive else None
        proc.kill()
        proc.wait()
        check(alive and sockets == [] and kids == [],
              f"single-process train: bound {sockets}, child processes {kids}")

        proc = subprocess.Popen(["mpirun", "-np", "2", trident] + TRAIN,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=MPI_ENV, start_new_session=True)
        alive = settle(proc, 3.0)
        ranks = [p for p in children(proc.pid)
                 if open(f"/proc/{p}/comm").read().strip() == "trident"] if alive else []
        sockets = {p: bound_sockets(p) for p in ranks}
        os.killpg(proc.pid, 9)
        proc.wait()
        check(len(ranks) == 2 and all(s == [] for s in sockets.values()),
              f"mpirun -np 2 train on one node: the ranks bound {sockets}")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

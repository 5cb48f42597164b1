#!/usr/bin/python3
"""A trident process started without a launcher makes no Open MPI session directory.

Open MPI gives every such process (an isolated singleton) the same job id, so all of them
would share one session directory, $TMPDIR/ompi.<host>.<uid>/jf.0/1/0, each creating it at
MPI_Init and removing it at MPI_Finalize; under load one process's removal lands inside
another's creation and that MPI_Init aborts ("Local abort before MPI_INIT completed").
Here the place where that directory would go is a regular file, so making it fails:
  * a single-process `train` and `curate --help` still exit 0 (they make no directory);
  * with the user's own OMPI_MCA_orte_create_session_dirs=1, which trident leaves alone, the
    same start fails, which shows the blocked place is the one Open MPI would use.
Usage: mpi_alone_test.py TRIDENT"""
import os
import socket
import subprocess
import sys
import tempfile

from parity import Checks

check = Checks()
TRAIN = ["train", "--mock-data", "--train-iters", "3", "--eval-iters", "0", "--threads", "1",
         "--peak-tflops", "1", "--num-layers", "1", "--hidden-size", "32",
         "--num-attention-heads", "2", "--seq-length", "16", "--vocab-size", "64"]


def run(trident, args, env):
    p = subprocess.run([trident] + args, capture_output=True, text=True, env=env, timeout=120)
    return p.returncode, p.stdout + p.stderr


def main():
    trident = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        node = socket.gethostname().split(".")[0]
        blocked = os.path.join(tmp, f"ompi.{node}.{os.getuid()}")
        open(blocked, "w").close()
        env = {k: v for k, v in os.environ.items() if not k.startswith("OMPI_MCA_orte_")}
        env["TMPDIR"] = tmp
        code, out = run(trident, TRAIN, env)
        check(code == 0 and "final train loss" in out,
              f"train alone with no room for a session directory: exit {code}: {out[-300:]}")
        code, out = run(trident, ["curate", "--help"], env)
        check(code == 0, f"curate --help alone: exit {code}: {out[-300:]}")
        code, out = run(trident, ["curate", "--help"],
                        dict(env, OMPI_MCA_orte_create_session_dirs="1"))
        check(code != 0 and "session" in out.lower(),
              f"with the user's create_session_dirs=1 the blocked place fails the start: "
              f"exit {code}: {out[-300:]}")
        check(os.path.isfile(blocked), "the blocking file is untouched")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())

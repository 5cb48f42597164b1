"""A real Slurm for a test (scripts/cluster/slurm.sh; root): started on namespace hosts, with
the environment that points sbatch/scontrol at it and a work directory under /var/tmp that
the hosts share (each host has its own /tmp, as real nodes do, so the job runs a copy of the
binary from there). Stopped and removed on exit, also after a failure."""
import os
import shutil
import subprocess
import tempfile

CLUSTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "cluster")
SBATCH = os.path.join(CLUSTER, "train.sbatch")


def available():
    """Root and Debian's Slurm daemons are needed; tests exit 77 (skipped) otherwise."""
    return os.geteuid() == 0 and shutil.which("slurmctld") is not None


class SlurmCluster:
    def __init__(self, trident, hosts=2, cpus=4, prefix="slurm_test_"):
        self.hosts, self.cpus = hosts, cpus
        self.work = tempfile.mkdtemp(prefix=prefix, dir="/var/tmp")
        self.trident = os.path.join(self.work, "trident")
        shutil.copy2(trident, self.trident)
        self.env, self.error = None, ""

    def __enter__(self):
        slurm = os.path.join(CLUSTER, "slurm.sh")
        started = subprocess.run(["bash", slurm, "start", str(self.hosts), str(self.cpus)],
                                 capture_output=True, text=True)
        if started.returncode != 0:
            self.error = started.stdout + started.stderr
            return self
        conf = subprocess.check_output(["bash", slurm, "env"], text=True).split("=", 1)[1].strip()
        self.env = dict(os.environ, SLURM_CONF=conf, OMPI_MCA_btl_tcp_if_include="198.18.0.0/24",
                        OMPI_MCA_oob_tcp_if_include="198.18.0.0/24")
        return self

    def __exit__(self, *exc):
        subprocess.run(["bash", os.path.join(CLUSTER, "slurm.sh"), "stop"], capture_output=True)
        shutil.rmtree(self.work, ignore_errors=True)
        return False

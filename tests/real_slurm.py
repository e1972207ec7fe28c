"""A real Slurm 22.05 (munge, MariaDB, slurmdbd, slurmctld, slurmd) for the exporter tests.

Everything runs inside a network namespace of its own with only loopback up, so no daemon
is reachable from outside and ports cannot clash with anything else on the machine: a
holder process (``unshare --net sleep infinity``) keeps the namespace alive, and every
daemon and client command is started through ``nsenter --net=/proc/<holder>/ns/net``.
Files (configs, state, logs, the munge key and socket, the MariaDB datadir, fake GPU
devices) live in one temporary directory; ``SLURM_CONF`` points the clients at its
``slurm.conf``, so ``/etc/slurm`` is never read.

One node per cluster node of the plan, each with its own ``slurmd`` (``slurmd -N``, one
port each); a cluster becomes a partition of the same name, as the exporter's
``PartitionName=<cluster>`` expects. GPUs are fake character devices (``mknod c 1 3``, i.e.
/dev/null) named in ``gres.conf`` with ``File=``: Slurm drops file-less GPUs.

Teardown always runs and goes by PID: the daemons in reverse order of start, then any
process still inside the namespace (job steps), then the holder. Based on
``shared/executors/slurm-recipe.md``, plus what a namespace and a private munge need:

- glibc's ``getaddrinfo(AI_ADDRCONFIG)``, which slurmdbd/slurmctld use for their listening
  sockets, finds no IPv4 when 127.0.0.1 is the only address ("Unable to resolve (null)"):
  a second loopback address, 127.0.0.2/32 on ``lo``, is enough;
- munged runs as user ``munge`` on its own key and socket (the directory needs execute
  permission for all); Slurm finds the socket through ``AuthInfo=socket=`` and, for the
  connection to slurmdbd, ``AccountingStoragePass=`` (AuthInfo is not used for that);
- MariaDB runs as root on its own datadir and socket (``--no-defaults``), slurmdbd reaches
  it over TCP on 127.0.0.1 (``--skip-name-resolve``, user ``slurm@127.0.0.1``);
- the cluster is added with ``sacctmgr`` before slurmctld starts (the recipe let slurmctld
  register it and measured ~20 s waits; here each daemon answers within about a second).
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

TOOLS = ("unshare", "nsenter", "ip", "setpriv", "munged", "munge", "unmunge",
         "mariadb-install-db", "mariadbd", "mariadb", "slurmdbd", "slurmctld", "slurmd",
         "sacctmgr", "scontrol", "sbatch", "scancel", "sacct", "sshare", "sinfo")
CLUSTER = "plannertest"
SLURMD_PORT = 17001
DB_PASSWORD = "slurmpw"


class SlurmError(RuntimeError):
    """A daemon did not come up, or a command failed; carries the relevant log tail."""


def until(what: str, probe, timeout: float = 60):
    """Poll ``probe`` every 0.25 s until it returns something truthy; that value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = probe()
        if got:
            return got
        time.sleep(0.25)
    raise AssertionError(f"not within {timeout} s: {what}")


def _slurm_conf(root: Path, clusters: list[dict[str, Any]]) -> str:
    lines = [
        f"ClusterName={CLUSTER}",
        "SlurmctldHost=localhost(127.0.0.1)",
        "SlurmUser=root", "SlurmdUser=root",
        "AuthType=auth/munge", "CredType=cred/munge",
        f"AuthInfo=socket={root}/munge/munge.sock",
        "SlurmctldPort=6817", "SlurmdPort=6818",
        f"StateSaveLocation={root}/state",
        f"SlurmdSpoolDir={root}/spool/%n",
        f"SlurmctldPidFile={root}/run/slurmctld.pid",
        f"SlurmdPidFile={root}/run/slurmd-%n.pid",
        f"SlurmctldLogFile={root}/log/slurmctld.log",
        f"SlurmdLogFile={root}/log/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SwitchType=switch/none",
        "MpiDefault=none", "ReturnToService=2",
        "SchedulerType=sched/backfill", "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core", "GresTypes=gpu",
        "JobAcctGatherType=jobacct_gather/linux",
        "PriorityType=priority/multifactor", "PriorityWeightFairshare=10000",
        # what the exporter's opportunistic QOS needs (it cannot write slurm.conf itself):
        # guaranteed QOS preempt gp-opportunistic jobs, which are requeued; QOS priorities
        # order pending jobs only with a QOS weight
        "PreemptType=preempt/qos", "PreemptMode=REQUEUE", "PriorityWeightQOS=100000",
        # reservations for budget jobs only (a waiting gp-opportunistic job blocks no one)
        "SchedulerParameters=bf_min_prio_reserve=100000",
        # the fair-share decay a plan of the default model on a 7-day lookback asks for
        "PriorityDecayHalfLife=2-10:13:00",
        "AccountingStorageType=accounting_storage/slurmdbd",
        "AccountingStorageHost=localhost", "AccountingStoragePort=6819",
        # the munge socket for talking to slurmdbd (AuthInfo only covers the rest)
        f"AccountingStoragePass={root}/munge/munge.sock",
        "AccountingStorageEnforce=associations,limits,qos",
        "AccountingStorageTRES=gres/gpu",
        "MailProg=/bin/true", "SlurmctldTimeout=30", "SlurmdTimeout=30", "InactiveLimit=0",
        "MinJobAge=300", "KillWait=5", "Waittime=0",
    ]
    port = SLURMD_PORT
    for c in clusters:
        names = node_names(c)
        for name in names:
            lines.append(f"NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 "
                         f"Port={port} CPUs=1 RealMemory=100 Gres=gpu:{c['gpus_per_node']} "
                         "State=UNKNOWN")
            port += 1
        lines.append(f"PartitionName={c['cluster']} Nodes={','.join(names)} "
                     "MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def _gres_conf(root: Path, clusters: list[dict[str, Any]]) -> str:
    return "".join(f"NodeName={','.join(node_names(c))} Name=gpu "
                   f"File={root}/fakegpu/nvidia[0-{c['gpus_per_node'] - 1}]\n"
                   for c in clusters)


def _slurmdbd_conf(root: Path) -> str:
    return "\n".join([
        "AuthType=auth/munge", f"AuthInfo=socket={root}/munge/munge.sock",
        "DbdHost=localhost", "DbdAddr=127.0.0.1", "DbdPort=6819", "SlurmUser=root",
        f"LogFile={root}/log/slurmdbd.log", f"PidFile={root}/run/slurmdbd.pid",
        "StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1", "StoragePort=3306",
        "StorageLoc=slurm_acct_db", "StorageUser=slurm", f"StoragePass={DB_PASSWORD}",
    ]) + "\n"


def node_names(cluster: dict[str, Any]) -> list[str]:
    """The Slurm node names of a plan cluster: ``<cluster>n<i>``, i from 1."""
    return [f"{cluster['cluster']}n{i}" for i in range(1, int(cluster["nodes"]) + 1)]


def parse_records(text: str) -> list[dict[str, str]]:
    """``key=value key=value`` lines (``scontrol -o show ...``) as dicts."""
    out = []
    for line in text.splitlines():
        if "=" in line:
            out.append(dict(w.split("=", 1) for w in line.split() if "=" in w))
    return out


class RealSlurm:
    """Handle on the running daemons: run commands in the namespace, read state back."""

    def __init__(self, root: Path, clusters: list[dict[str, Any]]):
        self.root = root
        self.clusters = clusters
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.holder: subprocess.Popen | None = None
        self.env = {**os.environ, "SLURM_CONF": str(root / "etc" / "slurm.conf"),
                    "TZ": "UTC"}
        for var in [v for v in self.env if v.startswith(("SLURM_", "SBATCH_", "SQUEUE_"))
                    and v != "SLURM_CONF"]:
            del self.env[var]
        self.timings: dict[str, float] = {}

    # --- the namespace --------------------------------------------------------------------
    @property
    def netns(self) -> str:
        """The namespace's ``/proc/<pid>/ns/net`` path."""
        assert self.holder is not None
        return f"/proc/{self.holder.pid}/ns/net"

    def _in_ns(self, argv: list[str]) -> list[str]:
        return ["nsenter", f"--net={self.netns}", *argv]

    def run(self, *argv: str, check: bool = True, timeout: float = 60,
            stdin: str | None = None) -> subprocess.CompletedProcess:
        """Run a command inside the namespace with the test's ``SLURM_CONF``."""
        done = subprocess.run(self._in_ns(list(argv)), env=self.env, capture_output=True,
                              text=True, timeout=timeout, input=stdin)
        if check and done.returncode != 0:
            raise SlurmError(f"{' '.join(argv)} -> {done.returncode}\n{done.stdout}"
                             f"{done.stderr}")
        return done

    def bash(self, script: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """Run a bash script (an exported apply script) inside the namespace."""
        return self.run("bash", "-s", stdin=script, timeout=timeout)

    def _start(self, name: str, argv: list[str]) -> subprocess.Popen:
        with open(self.root / "log" / f"{name}.out", "wb") as out:  # the child keeps a copy
            proc = subprocess.Popen(self._in_ns(argv), env=self.env, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs.append((name, proc))
        return proc

    def _wait(self, what: str, ready: Callable[[], bool], timeout: float,
              proc: subprocess.Popen | None = None, log: str | None = None) -> None:
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if proc is not None and proc.poll() is not None:
                break
            if ready():
                self.timings[what] = round(time.monotonic() - start, 1)
                return
            time.sleep(0.25)
        tail = ""
        for path in [self.root / "log" / (log or f"{what}.log"),
                     self.root / "log" / f"{what}.out"]:
            if path.exists():
                tail += f"\n--- {path.name}:\n" + "\n".join(
                    path.read_text(errors="replace").splitlines()[-30:])
        state = "exited" if proc is not None and proc.poll() is not None else "timed out"
        raise SlurmError(f"{what} {state} before it was ready{tail}")

    def _ok(self, *argv: str) -> bool:
        try:
            return self.run(*argv, check=False, timeout=15).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    # --- start -----------------------------------------------------------------------------
    def start(self) -> None:
        """Lay out the files and start every daemon, each waited for with a bounded poll."""
        t0 = time.monotonic()
        root = self.root
        for sub in ("etc", "state", "spool", "log", "run", "fakegpu", "db", "munge", "jobs"):
            (root / sub).mkdir()
        most = max(int(c["gpus_per_node"]) for c in self.clusters)
        for i in range(most):
            os.mknod(root / "fakegpu" / f"nvidia{i}", 0o666 | 0o020000, os.makedev(1, 3))
        (root / "etc" / "slurm.conf").write_text(_slurm_conf(root, self.clusters))
        (root / "etc" / "gres.conf").write_text(_gres_conf(root, self.clusters))
        dbd = root / "etc" / "slurmdbd.conf"
        dbd.write_text(_slurmdbd_conf(root))
        dbd.chmod(0o600)

        self.holder = subprocess.Popen(["unshare", "--net", "sleep", "infinity"],
                                       stdin=subprocess.DEVNULL)
        self._wait("netns", lambda: os.readlink(self.netns) != os.readlink("/proc/self/ns/net"),
                   10, self.holder)
        self.run("ip", "link", "set", "lo", "up")
        # glibc's AI_ADDRCONFIG (Slurm's getaddrinfo for its listening sockets) finds no IPv4
        # unless some address other than 127.0.0.1 exists; a second loopback address will do
        self.run("ip", "addr", "add", "127.0.0.2/32", "dev", "lo")
        self._start_munge()
        self._start_mariadb()
        proc = self._start("slurmdbd", ["slurmdbd", "-D"])
        self._wait("slurmdbd", lambda: self._ok("sacctmgr", "-n", "show", "cluster"), 60, proc)
        self.run("sacctmgr", "-i", "add", "cluster", CLUSTER)
        proc = self._start("slurmctld", ["slurmctld", "-D", "-i"])
        self._wait("slurmctld", lambda: self._ok("scontrol", "ping"), 60, proc)
        for c in self.clusters:
            for name in node_names(c):
                self._start(f"slurmd-{name}", ["slurmd", "-D", "-N", name])
        self._wait("slurmd", self._nodes_idle, 60, log="slurmctld.log")
        self.timings["start"] = round(time.monotonic() - t0, 1)

    def _start_munge(self) -> None:
        munge = pwd.getpwnam("munge")
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        for path in (key.parent, key):
            os.chown(path, munge.pw_uid, munge.pw_gid)
        key.parent.chmod(0o711)  # munged: "execute permissions for all required"
        m = self.root / "munge"
        proc = self._start("munged", [
            "setpriv", f"--reuid={munge.pw_uid}", f"--regid={munge.pw_gid}", "--clear-groups",
            "munged", "-F", f"--socket={m}/munge.sock", f"--key-file={key}",
            f"--log-file={m}/munged.log", f"--pid-file={m}/munged.pid",
            f"--seed-file={m}/munged.seed"])
        self._wait("munged", lambda: self.run(
            "sh", "-c", f"munge -n -S {m}/munge.sock | unmunge -S {m}/munge.sock",
            check=False).returncode == 0, 20, proc)

    def _start_mariadb(self) -> None:
        db, sock = self.root / "db", self.root / "run" / "mysqld.sock"
        self.run("mariadb-install-db", "--no-defaults", "--user=root", f"--datadir={db}",
                 "--auth-root-authentication-method=socket", "--skip-test-db", timeout=120)
        proc = self._start("mariadbd", [
            "mariadbd", "--no-defaults", "--user=root", f"--datadir={db}", f"--socket={sock}",
            "--bind-address=127.0.0.1", "--port=3306", f"--pid-file={self.root}/run/mariadb.pid",
            "--skip-log-bin", "--skip-name-resolve", f"--log-error={self.root}/log/mariadbd.log",
            "--innodb-buffer-pool-size=32M"])
        client = ["mariadb", "--no-defaults", f"--socket={sock}", "-u", "root"]
        self._wait("mariadbd", lambda: self._ok(*client, "-e", "SELECT 1"), 60, proc)
        self.run(*client, "-e",
                 f"CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{DB_PASSWORD}'; "
                 "CREATE DATABASE slurm_acct_db; "
                 "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';")

    def _nodes_idle(self) -> bool:
        out = self.run("sinfo", "-h", "-N", "-o", "%N %T", check=False).stdout.split("\n")
        states = dict(line.split() for line in out if line.strip())
        want = {n for c in self.clusters for n in node_names(c)}
        return want <= set(states) and all(states[n] == "idle" for n in want)

    # --- stop --------------------------------------------------------------------------------
    def _namespace_pids(self) -> list[int]:
        if self.holder is None:
            return []
        try:
            mine = os.readlink(self.netns)
        except OSError:
            return []
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != self.holder.pid:
                with suppress(OSError):
                    if os.readlink(entry / "ns" / "net") == mine:
                        pids.append(int(entry.name))
        return pids

    def stop(self) -> None:
        """Stop everything this handle started, by PID; safe to call after a failed start."""
        t0 = time.monotonic()
        for _name, proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for _name, proc in reversed(self.procs):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        # job steps (slurmstepd and its children) are not our children; they are in the netns
        for _ in range(2):
            for pid in self._namespace_pids():
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        if self.holder is not None and self.holder.poll() is None:
            self.holder.kill()
            self.holder.wait(timeout=5)
        self.timings["stop"] = round(time.monotonic() - t0, 1)

    # --- reading state back ------------------------------------------------------------------
    def reservations(self) -> dict[str, dict[str, str]]:
        """``scontrol show reservation -o``: name -> its fields."""
        out = self.run("scontrol", "show", "reservation", "-o").stdout
        return {r["ReservationName"]: r for r in parse_records(out)}

    def sacctmgr(self, kind: str, fields: str) -> list[dict[str, str]]:
        """``sacctmgr -n -P show <kind> format=<fields>`` as dicts keyed by the fields."""
        names = fields.split(",")
        out = self.run("sacctmgr", "-n", "-P", "show", kind, f"format={fields}").stdout
        return [dict(zip(names, line.split("|"), strict=True))
                for line in out.splitlines() if line]

    def sshare(self) -> list[dict[str, str]]:
        """``sshare -a -P``: one dict per line, ``depth`` from the account's indentation."""
        lines = self.run("sshare", "-a", "-P").stdout.splitlines()
        head = lines[0].split("|")
        rows = []
        for line in lines[1:]:
            row = dict(zip(head, line.split("|"), strict=True))
            account = row["Account"]
            row["depth"] = str(len(account) - len(account.lstrip(" ")))
            row["Account"] = account.strip()
            rows.append(row)
        return rows

    def qos_usage(self, name: str) -> float:
        """A QOS's ``UsageRaw`` as slurmctld holds it (``scontrol show assoc_mgr``)."""
        out = self.run("scontrol", "show", "assoc_mgr", "flags=qos", f"qos={name}").stdout
        (raw,) = [w for w in out.split() if w.startswith("UsageRaw=")]
        return float(raw.split("=", 1)[1])

    def job(self, job_id: str) -> dict[str, str]:
        """``scontrol show job -o``: the job's fields."""
        return parse_records(self.run("scontrol", "show", "job", "-o", job_id).stdout)[0]

    def state(self) -> dict[str, Any]:
        """Everything the exporter sets, as read back from Slurm (for before/after checks)."""
        return {
            "reservations": self.reservations(),
            "accounts": self.sacctmgr("account", "account,descr,org"),
            "assocs": self.sacctmgr("assoc", "cluster,account,user,parentname,share,qos,"
                                             "defaultqos,grptresmins"),
            "qos": self.sacctmgr("qos", "name,grptresmins,priority,preempt,preemptmode,"
                                        "usagefactor,preemptexempttime,grptres,flags"),
            "sshare": [{k: v for k, v in row.items() if k in ("Account", "User", "RawShares",
                                                               "depth")}
                       for row in self.sshare()],
        }


@contextmanager
def running_slurm(clusters: list[dict[str, Any]]) -> Iterator[RealSlurm]:
    """A started :class:`RealSlurm` for the plan's ``clusters``, always torn down."""
    root = Path(tempfile.mkdtemp(prefix="planner-slurm-"))
    root.chmod(0o755)  # munged runs as user munge and must reach root/munge
    slurm = RealSlurm(root, clusters)
    try:
        slurm.start()
        yield slurm
    finally:
        slurm.stop()
        if os.environ.get("PLANNER_KEEP_SLURM_DIR") is None:
            shutil.rmtree(root, ignore_errors=True)

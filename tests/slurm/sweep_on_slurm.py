#!/usr/bin/env python3
"""A sweep on a real single-node Slurm cluster, as docs/sweeps.md "On a Slurm cluster" runs it.

Starts munged (as the munge user), slurmctld and slurmd from Debian's packages with their state, spool,
sockets and logs under a temporary folder; writes a 3-run sweep's job array with `attograd sweep --slurm`
in a folder named with a space, # and %, and submits it unmodified from another folder (/). With 2 CPUs
and 1 per task, tasks 0 and 1 train while task 2 is queued: regenerating then submits nothing. The fault:
task 0 is cancelled with scancel (SIGTERM: its run saves a checkpoint) and task 1 is killed with SIGKILL
(its run keeps an older checkpoint, and its owner file stays, stale), both past their first checkpoint.
`sweep collect` then reports each at its checkpoint's step; regenerated while task 2 trains, the script
resumes runs 0 and 1 only; submitted, everything ends, and `sweep collect` lists the 3 runs finished with
tensors (sha256 of the safetensors data) and summary numbers equal to `attograd sweep -j 2` of the same
file. Every wait is bounded, every daemon started is stopped by its pid, and any failure exits 1 with a
line saying what: nothing is skipped. Runs as root (the daemons need it).

    tests/slurm/sweep_on_slurm.py BUILD/attograd
"""
import hashlib
import json
import os
import pwd
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

ATTOGRAD = os.path.abspath(sys.argv[1]) if len(sys.argv) == 2 else None
START = time.monotonic()
# The test, before the clean-up (at most 95 s more): both under ctest's TIMEOUT of 300 s
# (cmake/slurm_test.cmake), so that the daemons are always stopped here.
DEADLINE = START + 200
TOOLS = ["munged", "munge", "unmunge", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo", "setpriv"]
STEPS = 1500  # long enough that the fault, a few hundred steps in, lands while the run trains
LIVE = {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "REQUEUED", "SIGNALING"}


class Failure(Exception):
    pass


def log(message):
    print(f"[{time.monotonic() - START:6.1f}s] {message}", flush=True)


def run(args, cwd=None, timeout=60, check=True, env=None):
    """Runs a command (bounded, never past DEADLINE); returns (exit code, stdout, stderr)."""
    timeout = max(1, min(timeout, DEADLINE - time.monotonic()))
    try:
        p = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failure(f"{' '.join(args)}: no answer within {timeout:.0f} s")
    if check and p.returncode != 0:
        raise Failure(f"{' '.join(args)}: exit {p.returncode}: {p.stderr.strip() or p.stdout.strip()}")
    return p.returncode, p.stdout, p.stderr


def wait_for(what, condition, seconds, every=0.1):
    """Polls `condition` until it returns something true, at most `seconds` (and never past DEADLINE)."""
    end = min(time.monotonic() + seconds, DEADLINE)
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(every)
    raise Failure(f"timed out after {seconds} s waiting for {what}")


class Cluster:
    """munged, slurmctld and slurmd, each a child of this process, stopped by pid."""

    def __init__(self, root):
        self.root = root
        self.daemons = []  # (name, Popen)
        self.jobs = []  # array job ids submitted, cancelled on stop if still queued or running
        self.conf = os.path.join(root, "slurm.conf")
        # Every client (sbatch, squeue, and the squeue that attograd runs) finds this cluster's config.
        os.environ["SLURM_CONF"] = self.conf
        self.env = dict(os.environ)

    def start(self):
        munge = pwd.getpwnam("munge")
        key_dir, run_dir = os.path.join(self.root, "munge-key"), os.path.join(self.root, "munge-run")
        os.makedirs(key_dir, mode=0o700)
        os.makedirs(run_dir, mode=0o755)
        key = os.path.join(key_dir, "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        for path in (key_dir, run_dir, key):
            os.chown(path, munge.pw_uid, munge.pw_gid)
        self.socket = os.path.join(run_dir, "munge.socket")
        self.spawn("munged", ["setpriv", f"--reuid={munge.pw_uid}", f"--regid={munge.pw_gid}", "--init-groups",
                              "munged", "--foreground", f"--socket={self.socket}", f"--key-file={key}",
                              f"--pid-file={run_dir}/munged.pid", f"--log-file={key_dir}/munged.log",
                              f"--seed-file={key_dir}/munged.seed"])

        def munge_answers():
            p = subprocess.run(f"munge -n -S '{self.socket}' | unmunge -S '{self.socket}'", shell=True,
                               capture_output=True, text=True, timeout=10)
            return p.returncode == 0 and "STATUS:          Success" in p.stdout

        wait_for("munged to answer on its socket", munge_answers, 20)

        host = socket.gethostname().split(".")[0]
        for folder in ("state", "spool", "log"):
            os.makedirs(os.path.join(self.root, folder))
        ports = free_ports(2)
        with open(self.conf, "w") as f:
            f.write(f"""ClusterName=attograd-test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ports[0]}
SlurmdPort={ports[1]}
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.socket}
StateSaveLocation={self.root}/state
SlurmdSpoolDir={self.root}/spool
SlurmctldPidFile={self.root}/slurmctld.pid
SlurmdPidFile={self.root}/slurmd.pid
SlurmctldLogFile={self.root}/log/slurmctld.log
SlurmdLogFile={self.root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
NodeName={host} NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
        self.spawn("slurmctld", ["slurmctld", "-D", "-f", self.conf])
        self.spawn("slurmd", ["slurmd", "-D", "-f", self.conf])

        def node_idle():
            code, out, _ = run(["sinfo", "--noheader", "--format=%T"], env=self.env, timeout=20, check=False)
            return code == 0 and out.strip() == "idle"

        wait_for("the node to be idle (sinfo)", node_idle, 60)

    def spawn(self, name, args):
        out = open(os.path.join(self.root, f"{name}.out"), "w")
        p = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.daemons.append((name, p))
        time.sleep(0.2)
        if p.poll() is not None:
            raise Failure(f"{name} exited at once ({p.returncode}): {read(os.path.join(self.root, name + '.out'))}")
        log(f"{name} started, pid {p.pid}")

    def stop(self):
        try:
            for job in self.jobs:
                subprocess.run(["scancel", job], env=self.env, capture_output=True, timeout=10)
            end = time.monotonic() + 30
            while self.jobs and time.monotonic() < end and any(self.states(job) for job in self.jobs):
                time.sleep(0.2)
        except (Failure, subprocess.TimeoutExpired) as e:
            log(f"cancelling the jobs: {e}")
        for name, p in reversed(self.daemons):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=5)
            log(f"{name} (pid {p.pid}) stopped: exit {p.returncode}")

    def states(self, job):
        """{task index: state} of array job `job`'s tasks that are queued or running."""
        code, out, _ = run(["squeue", "--noheader", "--array", f"--jobs={job}", "--format=%K %T"],
                           env=self.env, timeout=20, check=False)
        if code != 0:
            return {}
        states = {}
        for line in out.splitlines():
            index, state = line.split()
            if state in LIVE:
                states[int(index)] = state
        return states

    def final_state(self, job, task):
        _, out, _ = run(["squeue", "--noheader", "--states=all", f"--jobs={job}_{task}", "--format=%T"],
                        env=self.env, timeout=20, check=False)
        return out.strip()

    def submit(self, script):
        # From another folder than the one the script was written in.
        _, out, _ = run(["sbatch", "--parsable", script], cwd="/", env=self.env)
        job = out.strip().split(";")[0]
        self.jobs.append(job)
        log(f"submitted {script} from /: array job {job}")
        return job


def free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def safetensors(path):
    """(header, sha256 of the tensor data): the data, not the file, whose metadata names the run folder."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8:8 + n]), hashlib.sha256(blob[8 + n:]).hexdigest()


def checkpoint_step(run):
    header, _ = safetensors(os.path.join(run, "checkpoint", "model.safetensors"))
    return int(header["__metadata__"]["step"])


def last_logged_step(run):
    lines = [line for line in read(os.path.join(run, "metrics.jsonl")).splitlines() if line.strip()]
    return json.loads(lines[-1])["step"] if lines else -1


def sigkill_task(run):
    """SIGKILLs the array task training `run`: its batch shell, then its `attograd train` (the holder of the
    run's lock, whose parent the shell is)."""
    train = int(read(os.path.join(run, ".attograd-lock")).strip())
    with open(f"/proc/{train}/stat") as f:
        shell = int(f.read().rsplit(")", 1)[1].split()[1])
    cmdline = read(f"/proc/{shell}/cmdline").replace("\0", " ")
    expect("slurm_script" in cmdline, f"the parent of train (pid {train}) is not a batch shell: {cmdline}")
    os.kill(train, signal.SIGSTOP)  # it trains no further step while its shell dies
    os.kill(shell, signal.SIGKILL)
    wait_for(f"the batch shell (pid {shell}) to die", lambda: not os.path.exists(f"/proc/{shell}/cmdline")
             or read(f"/proc/{shell}/cmdline") == "", 10)
    os.kill(train, signal.SIGKILL)


def attograd(args, cwd, expect=0):
    code, out, err = run([ATTOGRAD] + args, cwd=cwd, timeout=120, check=False)
    if code != expect:
        raise Failure(f"attograd {' '.join(args)}: exit {code}, expected {expect}: {err.strip()}")
    return out, err


def summary_runs(out_dir):
    with open(os.path.join(out_dir, "summary.json")) as f:
        runs = json.load(f)["runs"]
    for r in runs:
        r.pop("wall_seconds", None)
        r.pop("tokens_per_s", None)
    return runs


def expect(condition, what):
    if not condition:
        raise Failure(what)


def test(cluster, work):
    names = ["seed=1", "seed=2", "seed=3"]
    # A small model that trains for a few seconds, with a checkpoint every 100 steps.
    with open(os.path.join(work, "base.json"), "w") as f:
        json.dump({"name": "small", "task": {"kind": "reverse", "vocab": 10, "length": 8},
                   "model": {"d_model": 32, "n_heads": 4, "n_layers": 2, "d_ff": 64},
                   "train": {"steps": STEPS, "batch_size": 32, "warmup": 5, "eval_every": 500, "log_every": 10,
                             "eval_size": 32, "threads": 1},
                   "output": {"attention_every": 500, "probes": 2, "checkpoint_every": 100}}, f)
    for name, out in (("s.json", "runs/s"), ("ref.json", "runs/ref")):
        with open(os.path.join(work, name), "w") as f:
            json.dump({"base": "base.json", "grid": {"seed": [1, 2, 3]}, "out": out}, f)
    out_dir = os.path.join(work, "runs", "s")
    runs = [os.path.join(out_dir, n) for n in names]

    _, err = attograd(["sweep", "s.json", "--slurm", "s.sbatch"], work)
    log(err.strip())
    script = read(os.path.join(work, "s.sbatch"))
    expect("#SBATCH --cpus-per-task=1\n" in script, "the script does not ask for train.threads (1) cpus")
    first = cluster.submit(os.path.join(work, "s.sbatch"))

    # Tasks 0 and 1 train (2 CPUs), task 2 is queued: a script regenerated now holds no run.
    wait_for("tasks 0 and 1 running, task 2 queued",
             lambda: cluster.states(first) == {0: "RUNNING", 1: "RUNNING", 2: "PENDING"}, 60)
    log("tasks 0 and 1 running, task 2 queued")
    wait_for("runs 0 and 1 past their first checkpoint, with steps logged after it",
             lambda: all(os.path.exists(os.path.join(r, "checkpoint", "model.safetensors"))
                         and last_logged_step(r) > checkpoint_step(r) for r in runs[:2]), 60)
    log(f"runs 0 and 1 at steps {last_logged_step(runs[0])} and {last_logged_step(runs[1])}")
    _, err = attograd(["sweep", "s.json", "--slurm", "s2.sbatch"], work, expect=2)
    for n in names:
        expect(f"run {n}: skipped" in err, f"regenerated while queued or running, {n} was not skipped: {err}")
    expect(not os.path.exists(os.path.join(work, "s2.sbatch")), "a script was written with nothing to submit")
    log("regenerated while tasks 0, 1 run and 2 is queued: nothing to submit")

    # The fault: SIGKILL task 1, its batch shell first, as the OOM killer or a dying node would (it has no
    # chance to remove its owner file), half-way between two checkpoints; then scancel task 0 (SIGTERM,
    # and Slurm's SIGKILL after KillWait).
    def between_checkpoints():
        step, saved = last_logged_step(runs[1]), checkpoint_step(runs[1])
        return saved + 20 <= step < saved + 80 and (step, saved)

    killed_at, saved_at = wait_for("run 1 half-way between two checkpoints", between_checkpoints, 60, every=0.01)
    sigkill_task(runs[1])
    run(["scancel", f"{first}_0"], env=cluster.env)
    cancelled_at = last_logged_step(runs[0])
    log(f"fault: SIGKILL of task {first}_1 at step {killed_at} (checkpoint at {saved_at}), scancel {first}_0 "
        f"at step {cancelled_at} (of {STEPS})")
    wait_for("tasks 0 and 1 to end", lambda: not ({0, 1} & set(cluster.states(first))), 60)
    owner0, owner1 = (os.path.join(r, ".attograd-slurm-job") for r in runs[:2])
    expect(not os.path.exists(owner0), "the cancelled task 0 left its owner file")
    expect(os.path.exists(owner1), "the SIGKILLed task 1 removed its owner file (it could not have)")
    expect(json.load(open(owner1))["job_id"] != "", "task 1's owner file has no job id")
    for r in runs[:2]:
        expect(not os.path.exists(os.path.join(r, "scores.json")), f"{r} finished before the fault")

    # collect: each interrupted run at its checkpoint's step, whatever it logged after.
    attograd(["sweep", "collect", "runs/s"], work)
    summary = summary_runs(out_dir)
    for i in (0, 1):
        expect(summary[i]["status"] == "interrupted", f"{names[i]}: {summary[i]['status']}, expected interrupted")
        expect(summary[i]["step"] == checkpoint_step(runs[i]),
               f"{names[i]}: summary step {summary[i]['step']}, checkpoint at {checkpoint_step(runs[i])}")
    log(f"collect after the fault: steps {summary[0]['step']} and {summary[1]['step']} (the checkpoints'; "
        f"logged up to {last_logged_step(runs[0])} and {last_logged_step(runs[1])})")

    # Task 2 trains now; regenerated, the script resumes runs 0 and 1 and leaves run 2 to its task.
    wait_for("task 2 running", lambda: cluster.states(first).get(2) == "RUNNING", 60)
    _, err = attograd(["sweep", "s.json", "--slurm", "s2.sbatch"], work)
    log(err.strip())
    expect("run seed=3: skipped" in err, f"run 2, still training, was not skipped: {err}")
    script2 = read(os.path.join(work, "s2.sbatch"))
    expect("#SBATCH --array=0-1\n" in script2, "the regenerated array is not tasks 0-1")
    for n in names[:2]:
        expect(f"train --resume runs/s/{n} " in script2, f"the regenerated script does not resume {n}")
    second = cluster.submit(os.path.join(work, "s2.sbatch"))

    wait_for("every task to end", lambda: not cluster.states(first) and not cluster.states(second), 120)
    for job, task in ((first, 2), (second, 0), (second, 1)):
        state = cluster.final_state(job, task)
        expect(state == "COMPLETED", f"task {job}_{task} ended {state}: "
                                     f"{read(os.path.join(out_dir, f'slurm-{job}_{task}.log'))[-2000:]}")
    for r in runs:
        expect(not os.path.exists(os.path.join(r, ".attograd-slurm-job")), f"{r}: an owner file is left")
    attograd(["sweep", "collect", "runs/s"], work)
    log("resubmitted array done; collected")

    # The same sweep uninterrupted, on this machine.
    attograd(["sweep", "ref.json", "-j", "2"], work)
    log("reference: attograd sweep ref.json -j 2 done")
    got, want = summary_runs(out_dir), summary_runs(os.path.join(work, "runs", "ref"))
    for g, w, n in zip(got, want, names):
        expect(g["status"] == "finished", f"{n}: {g['status']}, expected finished")
        expect(g == w, f"{n}: summary differs from the uninterrupted sweep's: {g} vs {w}")
        a = safetensors(os.path.join(out_dir, n, "checkpoint", "model.safetensors"))[1]
        b = safetensors(os.path.join(work, "runs", "ref", n, "checkpoint", "model.safetensors"))[1]
        expect(a == b, f"{n}: tensors differ from the uninterrupted sweep's ({a} vs {b})")
        log(f"{n}: finished, tensors sha256 {a[:16]}... equal to the uninterrupted sweep's")


def main():
    if ATTOGRAD is None:
        print("usage: sweep_on_slurm.py BUILD/attograd", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("FAIL: the Slurm test starts munged, slurmctld and slurmd: run it as root", file=sys.stderr)
        return 1
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        print(f"FAIL: {', '.join(missing)} not found: scripts/setup installs slurmctld, slurmd, slurm-client "
              "and munge", file=sys.stderr)
        return 1
    # The daemons are stopped whatever happens: a SIGTERM or SIGINT (ctest, Ctrl-C) unwinds like a failure.
    def stopped(signum, _frame):
        raise Failure(f"stopped by signal {signum}")

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stopped)
    root = tempfile.mkdtemp(prefix="attograd-slurm-")
    os.chmod(root, 0o755)
    cluster = Cluster(root)
    ok = False
    try:
        cluster.start()
        log("cluster up: node idle")
        work = os.path.join(root, "work", "a b #c %d")
        os.makedirs(work)
        test(cluster, work)
        ok = True
    except Failure as e:
        print(f"FAIL: {e}", file=sys.stderr)
        for name in ("log/slurmctld.log", "log/slurmd.log", "munged.out"):
            tail = read(os.path.join(root, name))[-1500:]
            print(f"--- {name} (end)\n{tail}", file=sys.stderr)
    finally:
        cluster.stop()
    if ok:
        shutil.rmtree(root, ignore_errors=True)
        log(f"PASS in {time.monotonic() - START:.0f} s")
        return 0
    print(f"FAIL after {time.monotonic() - START:.0f} s; the cluster's files are in {root}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())

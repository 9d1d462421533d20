# SPDX-License-Identifier: LGPL-2.1-or-later
"""Integration test harness: real users, a real dsagent, real .NET runtimes.

Each test file registers functions with @test and calls run_tests(), which
prints TAP. Resources a test starts (users' processes, agents, temp dirs) are
registered on `scope` and torn down after the test, pass or fail.
"""
import collections
import contextlib
import fcntl
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

BUILD = os.environ.get("DSAGENT_BUILD_DIR", os.path.join(os.path.dirname(__file__), "../../build"))
SOURCE = os.environ.get("DSAGENT_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../.."))
DSAGENT = os.path.join(BUILD, "agent", "dsagent")
DSCTL = os.path.join(BUILD, "client", "dsctl")
HERE = os.path.dirname(os.path.abspath(__file__))
# Scripts that run as test users need an interpreter every user can execute.
PYTHON = "/usr/bin/python3"

# Test users: the owner of the targets, an unrelated user, and an attacker;
# ALICE is in the group OPS.
SVC, ALICE, MALLORY = "dst-svc", "dst-alice", "dst-mallory"
OPS = "dst-ops"
# the egress process's own user (units/dsagent.sysusers, agent/egress/egress-check.h's EGRESS_USER)
EGRESS_USER = "dsagent-egress"

EXIT_DENIED, EXIT_NO_SUCH_PROCESS, EXIT_NOT_DOTNET = 4, 5, 6
REQUEST_MESSAGE_ID = "27ade2ec85a54471a176f947b0ec018e"
POLICY_MESSAGE_ID = "29cd34f17b474bad9ed538319addd224"
DUMP_MESSAGE_ID = "b44be14ffedf48ee806826f1d59bcc4e"
SUPPRESSED_MESSAGE_ID = "dba026f157524dc5bd31f98f0e8e84b9"
EXIT_AGENT_UNREACHABLE, EXIT_RUNTIME_UNREACHABLE, EXIT_SOCKET_UNTRUSTED, EXIT_BUSY = 3, 7, 9, 10

# Bounds on waits. A test waits for the event it means (a record, a line, a file, a process's exit) and goes on the
# moment it comes: a bound only decides how soon a case that will never pass says so, never whether one passes. Each
# is sized for a loaded 2-core machine (load 10 and more, a sanitizer build beside other work); see tests/README.md,
# "Timing in tests". A site with a bound of its own says beside it what it waits for and why that bound is safe.
HANG_BOUND = 30.0
"""A step of the agent or of a small helper process (a record, a socket, a file, a state in /proc): it comes
within milliseconds on an idle machine and within seconds on a loaded one; 30 s only ends a hang."""
RUNTIME_BOUND = 120.0
"""Work that starts a .NET runtime or waits on one's managed code: the test app's startup, a stock .NET tool or
an SDK-built checker run to its end, a session of a few seconds. 1 to 5 s on an idle machine, a few times that
loaded; 120 s only ends a hang."""
DUMP_BOUND = 360.0
"""A runtime writing a dump of itself, asked through the agent: seconds on an idle machine. Beyond the agent's own
--dump-timeout (300 s), so that a stuck dump ends with the agent's answer, which names its cause, not with this."""

_tests = []
scope = contextlib.ExitStack()
_agent_log_tails = []  # the last lines of each agent's log of the case running, kept as its directory goes
AGENT_LOG_TAIL = 40

# A file started in the background by a shell without job control (scripts/test.sh's steps, nohup, CI) inherits
# SIGINT ignored, and so would every tool a test means to stop with Ctrl-C: Python's own handler puts it back,
# and what the tests start gets SIGINT's default again at exec.
signal.signal(signal.SIGINT, signal.default_int_handler)


def test(fn):
    _tests.append(fn)
    return fn


class Wait:
    """What a case waits for, so that a failure names its last wait (summarize.py and tests/repeat.py print it):
    a flake that ran out a bound reads differently from a failure that was never going to pass."""

    last = None

    def __init__(self, what, timeout):
        self.what, self.timeout, self.began, self.ended, self.met = what, timeout, time.monotonic(), None, False
        Wait.last = self

    def end(self, met):
        self.ended, self.met = time.monotonic(), met
        return self

    def describe(self, failed_at=None):
        """The wait as a line; @failed_at (monotonic) is when the case failed, now if None."""
        failed_at = failed_at or time.monotonic()
        bound = f"up to {self.timeout:g} s" if self.timeout is not None else "no bound"
        if self.ended is None:
            return f"{self.what} ({bound}): still waiting after {failed_at - self.began:.1f} s"
        outcome = "met" if self.met else "timed out"
        return (f"{self.what} ({bound}): {outcome} after {self.ended - self.began:.1f} s, "
                f"{failed_at - self.ended:.1f} s before the failure")


class Skip(Exception):
    """Raised by a test whose subject this host lacks: reported as TAP's skip, which summarize.py counts apart
    from passes, never as a pass."""


def run_tests():
    if os.geteuid() != 0:
        print("1..0 # SKIP integration tests need root")
        sys.exit(77)
    # files run side by side: one at a time makes whichever user or group is missing (useradd, groupadd
    # and usermod fail when another made it, or holds /etc/group's lock, first)
    with open("/run/dsagent-integration-users.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for user in (SVC, ALICE, MALLORY):
            ensure_user(user)
        ensure_group(OPS, [ALICE])
        ensure_system_user(EGRESS_USER)
    failed = 0
    selected = [fn for fn in _tests if len(sys.argv) < 2 or fn.__name__ in sys.argv[1:]]
    for n, fn in enumerate(selected, 1):
        global scope
        scope = contextlib.ExitStack()
        Wait.last = None
        _agent_log_tails.clear()
        began = time.monotonic()
        failed_wait, failed_at = None, None
        try:
            with scope:
                try:
                    fn()
                except Exception:
                    # the case's own last wait, before the cleanup's waits (a cgroup emptying) take its place
                    failed_wait, failed_at = Wait.last, time.monotonic()
                    raise
            # the time each case took, as a TAP comment, for whoever looks for the slow ones
            print(f"# {fn.__name__} took {time.monotonic() - began:.1f} s", flush=True)
            print(f"ok {n} - {fn.__name__}", flush=True)
        except Skip as why:
            print(f"ok {n} - {fn.__name__} # SKIP {why}", flush=True)
        except Exception:
            failed += 1
            for line in traceback.format_exc().splitlines():
                print(f"# {line}")
            # what tells a flake from a failure: how long the case ran, what it waited for last, and what the
            # agents said last (their directories are gone with the case)
            print(f"# {fn.__name__} took {time.monotonic() - began:.1f} s", flush=True)
            print(f"# failed at: {where_it_failed(sys.exc_info()[1])}", flush=True)
            for agent_log in _agent_log_tails:
                for line in agent_log:
                    print(f"# agent: {line.rstrip()}")
            last = failed_wait or Wait.last
            print(f"# last wait: {last.describe(failed_at) if last else 'none'}", flush=True)
            print(f"not ok {n} - {fn.__name__}", flush=True)
    print(f"1..{len(selected)}", flush=True)
    sys.exit(1 if failed else 0)


def where_it_failed(error, limit=400):
    """The case's own line that raised @error and what it said, on one line of at most @limit characters: what
    the suite's summary prints of a failure, so that a failure in CI names its cause without the full log."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if os.path.basename(f.filename).startswith("test_")]
    frame = frames[-1] if frames else traceback.extract_tb(error.__traceback__)[-1]
    said = " ".join(str(error).split())
    text = f"{os.path.basename(frame.filename)}:{frame.lineno}: {type(error).__name__}: {said}"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def ensure_user(name):
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)


def ensure_system_user(name):
    """@name as units/dsagent.sysusers makes it on an install (a system user, its own group, no home, no shell):
    left in place after the run, as an install leaves it."""
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/",
                        "--shell", "/usr/sbin/nologin", "--comment", "dsagent egress process", name], check=True)


def ensure_group(name, members):
    import grp
    try:
        grp.getgrnam(name)
    except KeyError:
        subprocess.run(["groupadd", name], check=True)
    # only what is missing: another file made the rest
    for member in members:
        if member not in grp.getgrnam(name).gr_mem:
            subprocess.run(["usermod", "--append", "--groups", name, member], check=True)


def uid_of(name):
    return pwd.getpwnam(name).pw_uid


def as_user(user, argv):
    """argv run with exactly the user's uid, gid and groups, and a clean environment."""
    if user in (None, "root"):
        return argv
    return ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--reset-env"] + argv


def subordinate_range(user, path="/etc/subuid"):
    """The first id of @user's range in @path (/etc/subuid or /etc/subgid), giving @user ranges in both
    for the test when it has none (both files are put back as they were after it)."""
    first, wanted = None, path
    for path in ("/etc/subuid", "/etc/subgid"):
        existed = os.path.exists(path)
        text = open(path).read() if existed else ""
        mine = [line for line in text.splitlines() if line.split(":")[0] == user]
        if not mine:
            scope.callback(lambda p=path, t=text, e=existed: open(p, "w").write(t) if e else os.unlink(p))
            with open(path, "a") as f:
                f.write(f"{user}:3000000:65536\n")
            mine = [f"{user}:3000000:65536"]
        if path == wanted:
            first = int(mine[0].split(":")[1])
    return first


def as_subordinate(user, argv, k=0):
    """argv run as @user's @k-th subordinate uid and gid (the first unless said), the way the user can do it
    alone: a user namespace whose maps newuidmap and newgidmap write, and setpriv in it (each execs the next:
    one process)."""
    uid, gid = subordinate_range(user) + k, subordinate_range(user, "/etc/subgid") + k
    return as_user(user, ["unshare", f"--map-users={uid},1,1", f"--map-groups={gid},1,1", "--map-user=0",
                          "--map-group=0", "setpriv", "--reuid=1", "--regid=1", "--clear-groups"] + argv)


def make_dir(owner=None, mode=0o700, base="/tmp"):
    path = tempfile.mkdtemp(prefix="dsagent-it-", dir=base)
    scope.callback(shutil.rmtree, path, ignore_errors=True)
    if owner:
        os.chown(path, uid_of(owner), uid_of(owner))
    os.chmod(path, mode)
    return path


def wait_for(predicate, timeout=HANG_BOUND, what="condition"):
    """The first true value of @predicate, polled every 50 ms, within @timeout seconds (a bound against a hang,
    which only ends a wait that would never be met: see HANG_BOUND); else an AssertionError naming @what."""
    wait = Wait(what, timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            wait.end(True)
            return value
        time.sleep(0.05)
    wait.end(False)
    raise AssertionError(f"timed out waiting for {what}")


def stop_process(pid):
    """SIGSTOP @pid, and return once every thread of it has stopped: kill() only asks, and a thread that a busy
    machine has not run yet (the runtime's diagnostic server among them) would still answer for a while."""
    os.kill(pid, signal.SIGSTOP)

    def all_stopped():
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                stat = open(f"/proc/{pid}/task/{tid}/stat").read()
            except FileNotFoundError:
                continue  # a thread that exited stops nothing
            if stat[stat.rindex(")") + 2] not in "tT":
                return False
        return True
    wait_for(all_stopped, what=f"every thread of {pid} stopped")


def fd_links(pid):
    """What the open fds of @pid name (their /proc/PID/fd links), of those still open when read. A process at work
    closes fds between the listing and the readlink: an fd closed meanwhile is left out, where its FileNotFoundError
    failed the wait it came in (a wait for an fd to close could fail on that very close)."""
    fds, links = f"/proc/{pid}/fd", []
    for fd in os.listdir(fds):
        try:
            links.append(os.readlink(os.path.join(fds, fd)))
        except FileNotFoundError:
            continue
    return links


def start_time_of(pid):
    stat = open(f"/proc/{pid}/stat").read()
    return int(stat[stat.rindex(")") + 2:].split()[19])


def ns_pid_of(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("NSpid:"):
            return int(line.split()[-1])
    raise AssertionError("no NSpid")


_app_dir = None


def target_app():
    global _app_dir
    if _app_dir is None:
        _app_dir = subprocess.run([os.path.join(SOURCE, "tests/target-app/build.sh")], check=True,
                                  stdout=subprocess.PIPE, text=True).stdout.strip()
    return os.path.join(_app_dir, "DsTestTarget")


class Process:
    """A process started for a test; killed (with its namespace) when the test ends."""

    def __init__(self, argv, **kwargs):
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True, **kwargs)
        scope.callback(self.stop)

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def wait_exec(self, comm):
        """Until the process runs @comm: before the last exec of setpriv, env or unshare it is not yet what the
        test asks about (root's, or without the environment it is started with)."""
        wait_for(lambda: open(f"/proc/{self.proc.pid}/comm").read().strip() == comm, what=f"{comm} to start")
        return self

    def read_line(self, prefix, timeout=RUNTIME_BOUND):
        """The first line from the process that starts with @prefix, within @timeout seconds (a bound against a
        hang: most lines waited for are the test app's, after its runtime started; see RUNTIME_BOUND)."""
        wait = Wait(f"a line {prefix!r} from process {self.proc.pid}", timeout)
        line = self._read_line(prefix, timeout)
        wait.end(True)
        return line

    def _read_line(self, prefix, timeout):
        # readline() blocks: a process that prints nothing more and lives on is killed at the deadline, which
        # ends the read, so that the bound holds and the case fails naming its wait instead of hanging
        expired = threading.Event()

        def expire():
            expired.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        timer = threading.Timer(timeout, expire)
        timer.daemon = True
        timer.start()
        try:
            os.set_blocking(self.proc.stdout.fileno(), True)
            seen = []
            while True:
                line = self.proc.stdout.readline()
                if expired.is_set():
                    raise AssertionError(f"no {prefix!r} line within {timeout:g} s: {''.join(seen)!r}")
                if not line:
                    raise AssertionError(f"process exited before printing {prefix!r} (rc={self.proc.wait()}): "
                                         f"{''.join(seen)!r}")
                seen.append(line)
                if line.startswith(prefix):
                    return line.strip()
        finally:
            timer.cancel()


def printed(target, wait=0.0):
    """What @target's app printed so far (or within @wait seconds), without waiting for more. With @wait, for
    checks that something was not printed: a loaded machine can only make such a check pass wrongly, never fail."""
    import select
    fd = target.process.proc.stdout.fileno()
    os.set_blocking(fd, False)
    out = b""
    while select.select([fd], [], [], wait)[0]:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        out += chunk
        wait = 0
    return out.decode(errors="replace")


ELF_CORE = 4  # e_type of a core file


CLAIM_PID = os.path.join(BUILD, "tests", "tools", "claim-pid")


def claim_pid(pid, argv):
    """Start @argv so that it gets @pid (tests/tools/claim-pid: clone3's set_tid); None when a process runs under
    that pid. The Process returned is claim-pid's, which waits for @argv's process and goes with it."""
    proc = Process([CLAIM_PID, str(pid)] + list(argv))

    def claimed():
        if proc.proc.poll() is not None:
            return "gone"
        try:
            status = open(f"/proc/{pid}/status").read()
        except FileNotFoundError:
            return None
        return "claimed" if f"\nPPid:\t{proc.proc.pid}\n" in status else None
    # what claim-pid does at once: a pid given or refused
    if wait_for(claimed, what=f"pid {pid} claimed") == "claimed":
        return proc
    proc.stop()
    return None


def is_elf_core(path):
    with open(path, "rb") as f:
        header = f.read(18)
    return header[:4] == b"\x7fELF" and int.from_bytes(header[16:18], "little") == ELF_CORE


def acl_of(path):
    out = subprocess.run(["getfacl", "--omit-header", "--absolute-names", "--numeric", path], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return [line for line in out.splitlines() if line]


def can_read(user, path):
    return subprocess.run(as_user(user, ["head", "-c", "4", path]), stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


# The tools tests build once per run (tests/tools/*/build.sh): the path each prints.
_tools = {}


def tool(name, script):
    """Builds (once per run) the tool @script makes and returns the path it prints."""
    if name not in _tools:
        built = subprocess.run([os.path.join(SOURCE, script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        assert built.returncode == 0, built.stderr
        _tools[name] = built.stdout.strip()
    return _tools[name]


def traceevent(path):
    """What TraceEvent reads in the nettrace file @path (tests/tools/traceevent-check)."""
    dll = tool("traceevent-check", "tests/tools/traceevent-check/build.sh")
    r = subprocess.run(["dotnet", dll, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=RUNTIME_BOUND)
    assert r.returncode == 0, f"TraceEvent cannot read {path}: {r.stderr}"
    return json.loads(r.stdout)


def stock_gcdump(*args):
    """The stock dotnet-gcdump 10.0.750501 (tests/tools/dotnet-tools), as root: its status and output."""
    path = os.path.join(tool("dotnet-tools", "tests/tools/dotnet-tools/install.sh"), "dotnet-gcdump")
    # 300 s: a bound against a hang; the tool's runtime starts and converts or reports a small file in seconds
    return subprocess.run(["env", "DOTNET_CLI_TELEMETRY_OPTOUT=1", path, *args], stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)


def stock_gcdump_report(gcdump):
    """What dotnet-gcdump report prints of the .gcdump file @gcdump."""
    r = stock_gcdump("report", gcdump)
    assert r.returncode == 0 and r.stderr == "", r
    return r.stdout


class Target:
    """The real .NET test app running as @user.

    tmpdir: "private" (0700, the user's own), "shared" (1777), None (no TMPDIR: /tmp),
            or an absolute path the test prepared.
    environment: more variables for its environment, {NAME: VALUE}.
    mount_ns: a private tmpfs on /tmp in its own mount namespace, as PrivateTmp= does (tmp_size: its size).
    pid_ns: its own pid namespace, so its own pid differs from the host's.
    userns: shell commands that @user runs as root of a user and mount namespace of its own
            (unshare -Urm, as any user can), before the app starts there; "" for just the namespaces.
    wait_ready: False for a runtime that runs no managed code yet (suspended at startup): the target
                is taken as started once its diagnostic socket exists, and has printed nothing.
    """

    def __init__(self, user=SVC, tmpdir="private", args=(), mount_ns=False, pid_ns=False, userns=None,
                 tmp_size=None, environment=None, wait_ready=True):
        self.user = user
        self.uid = uid_of(user)
        self.mount_ns = mount_ns
        if tmpdir == "private":
            self.tmpdir = make_dir(user, 0o700)
        elif tmpdir == "shared":
            self.tmpdir = make_dir(None, 0o1777)
        else:
            self.tmpdir = tmpdir
        env = ["env", "-i", "PATH=/usr/bin:/bin", "DOTNET_CLI_TELEMETRY_OPTOUT=1"]
        if self.tmpdir:
            env.append(f"TMPDIR={self.tmpdir}")
        env += [f"{name}={value}" for name, value in (environment or {}).items()]
        argv = as_user(user, env + [target_app(), *args])
        if userns is not None:
            argv = as_user(user, ["unshare", "--user", "--map-root-user", "--mount", "--", "sh", "-c",
                                  f'{userns}\nexec "$@"', "sh"] + env + [target_app(), *args])
        if mount_ns:
            options = "mode=1777" + (f",size={tmp_size}" if tmp_size else "")
            argv = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                    f'mount -t tmpfs -o {options} tmpfs /tmp && exec "$@"', "sh"] + argv
        if pid_ns:
            argv = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--"] + argv
        self.process = Process(argv)
        self.args = list(args)
        if not wait_ready:
            self.pid = wait_for(lambda: self._started(pid_ns), what="the runtime's diagnostic socket")
            self.ns_pid = ns_pid_of(self.pid)
            return
        ready = self.process.read_line("ready pid=")
        self.ns_pid = int(re.match(r"ready pid=(\d+)", ready).group(1))
        self.pid = self._host_pid(pid_ns)
        assert ns_pid_of(self.pid) == self.ns_pid

    def _started(self, pid_ns):
        """The app's host pid once its runtime listens, else None."""
        assert self.process.proc.poll() is None, f"the app exited: {self.process.proc.stdout.read()!r}"
        try:
            pid = self._host_pid(pid_ns)
            self.pid, self.ns_pid = pid, ns_pid_of(pid)
            return pid if os.path.exists(self.socket_path) else None
        except (AssertionError, OSError):
            return None  # not forked yet, or not exec'd yet

    def _host_pid(self, pid_ns):
        if not pid_ns:
            return self.process.proc.pid
        children = open(f"/proc/{self.process.proc.pid}/task/{self.process.proc.pid}/children").read().split()
        assert len(children) == 1, children
        return int(children[0])

    @property
    def socket_name(self):
        return f"dotnet-diagnostic-{self.ns_pid}-{start_time_of(self.pid)}-socket"

    @property
    def socket_path(self):
        """The socket as the host sees it (through /proc/PID/root for another mount namespace)."""
        directory = self.tmpdir or "/tmp"
        if self.mount_ns:
            directory = os.path.join(f"/proc/{self.pid}/root", directory.lstrip("/"))
        return os.path.join(directory, self.socket_name)


class Agent:
    """dsagent in the foreground on a socket of its own, audit records to a file.

    policy: TOML text written to a root-owned file the agent is started with;
    the default means the built-in rules only (root, and each process's own user).
    "@DUMP_DIR@" in it stands for the agent's own dump directory (self.dumps).
    listen_mode: the socket's --listen-mode; 0666 here, so that the test users reach the agent and the policy
    alone decides (None: the agent's own default).
    audit: "stderr" (dsagent-audit: lines) or "json" (one JSON object a line on stdout); records() reads either.
    audit_fd: where the audit stream (stdout for json, else stderr) goes instead of the log, e.g. a pipe a test holds.
    """

    def __init__(self, *extra_args, policy='[agent]\ndump_dir = "@DUMP_DIR@"\n', env=None, wrapper=(), audit="stderr",
                 listen_mode="0666", audit_fd=None):
        self.audit = audit
        self.dir = make_dir(None, 0o755)
        self.socket = os.path.join(self.dir, "dsagent.sock")
        self.log_path = os.path.join(self.dir, "agent.log")
        self.log = open(self.log_path, "w")
        scope.callback(self.log.close)
        self.policy_path = os.path.join(self.dir, "policy.toml")
        self.dumps = os.path.join(self.dir, "dumps")
        self.runtime_dir = os.path.join(self.dir, "run")
        self.write_policy(policy)
        # DSAGENT_TEST_WRAPPER runs the agent under a tool, e.g. "valgrind -q" or "strace -f -o FILE"
        wrapper = list(wrapper) + os.environ.get("DSAGENT_TEST_WRAPPER", "").split()
        self.proc = subprocess.Popen(wrapper + [DSAGENT, "--listen", self.socket, "--audit", audit,
                                                "--policy", self.policy_path, "--runtime-dir", self.runtime_dir,
                                                *(["--listen-mode", listen_mode] if listen_mode else []),
                                                *extra_args],
                                     stdin=subprocess.DEVNULL,
                                     stdout=audit_fd if audit_fd is not None and audit == "json" else self.log,
                                     stderr=audit_fd if audit_fd is not None and audit != "json" else self.log,
                                     env=dict(os.environ, **(env or {})), start_new_session=True)
        scope.callback(self.stop)
        wait_for(lambda: os.path.exists(self.socket) or self.proc.poll() is not None, what="agent socket")
        assert self.proc.poll() is None, open(self.log_path).read()

    def stop(self):
        try:
            with open(self.log_path, errors="replace") as log:
                _agent_log_tails.append(collections.deque(log, maxlen=AGENT_LOG_TAIL))
        except OSError:
            pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                # 10 s: the agent exits on SIGTERM within ms, or after the 5 s it gives queued records to go
                # out to an audit output a test holds (a sanitizer build's leak check adds a second or two);
                # past it a kill, which fails nothing: this stops the agent, it checks nothing
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        # under a wrapper (strace, valgrind) the agent is its child: nothing of the group may outlive the test
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def write_policy(self, text, name=None):
        """Replace the policy (or a drop-in) as an administrator would: root-owned, 0644, atomically."""
        path = self.policy_path if name is None else os.path.join(self.dir, "policy.d", name)
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        with open(path + ".new", "w") as f:
            f.write(text.replace("@DUMP_DIR@", self.dumps))
        os.chmod(path + ".new", 0o644)
        os.rename(path + ".new", path)

    def reload(self):
        """SIGHUP, then wait until the agent has recorded the outcome."""
        before = len(self.records(message_id=POLICY_MESSAGE_ID))
        self.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: len(self.records(message_id=POLICY_MESSAGE_ID)) > before, what="the reload record")
        return self.records(message_id=POLICY_MESSAGE_ID)[-1]

    def records(self, message_id=REQUEST_MESSAGE_ID):
        """Audit records written so far (of one kind), one dict per line."""
        out = []
        for line in open(self.log_path):
            if not line.endswith("\n"):
                continue  # the agent is still writing it: its queue writes a record in as many pieces as fit
            if self.audit == "json" and line.startswith("{"):
                fields = json.loads(line)
            elif line.startswith("dsagent-audit:"):
                fields = dict(re.findall(r' ([A-Z0-9_]+)="((?:[^"\\]|\\.)*)"', line))
            else:
                continue
            if fields.get("MESSAGE_ID") == message_id:
                out.append(fields)
        return out

    def record_for(self, request_id):
        matches = [r for r in self.records() if r.get("DSAGENT_REQUEST_ID") == request_id]
        assert len(matches) == 1, f"expected one record for {request_id}, got {matches}"
        return matches[0]


class Pause:
    """The agent stopped whole at @point (DSAGENT_TEST_PAUSE, a test hook) until the test ends the pause: pass
    self.env to Agent(env=...), wait() for the agent to stop there, change the world, end(). @bound (seconds) only
    ends a pause that a failing test never ends; a test passes whatever a loaded machine makes its change take
    within it. Every later stop at @point, once ended, goes on at once."""

    def __init__(self, point, bound=HANG_BOUND):
        self.point, self.bound = point, bound
        self.end_path = os.path.join(make_dir(None, 0o755), "pause-end")
        self.env = {"DSAGENT_TEST_PAUSE": f"{point}:{int(bound * 1000)}", "DSAGENT_TEST_PAUSE_END": self.end_path}

    def wait(self, agent, timeout=HANG_BOUND):
        """Until @agent stands at the point; @timeout: what it does before it gets there may take longer."""
        wait_for(lambda: f"test-hook: paused at {self.point}\n" in open(agent.log_path).read(), timeout=timeout,
                 what=f"the agent to stop at {self.point}")

    def end(self):
        open(self.end_path, "w").close()

    def resumed(self, agent):
        """Whether the agent went on from the pause (its own note), e.g. before the test ended it."""
        return f"test-hook: resumed at {self.point}\n" in open(agent.log_path).read()


def fuse_stall(mountpoint, seconds):
    """fuse_stall.py serving @mountpoint for @seconds; its mount is taken away when the test ends (a server
    killed leaves its mount behind, 'Transport endpoint is not connected', until someone unmounts it)."""
    # registered first, so it runs after the server is stopped
    scope.callback(subprocess.run, ["umount", "--lazy", mountpoint], stderr=subprocess.DEVNULL)
    return Process([PYTHON, os.path.join(HERE, "fuse_stall.py"), mountpoint, str(seconds)])


def dsctl(agent, user, *args, timeout=60):
    """dsctl @args as @user against @agent, its result once it exits. @timeout: a bound against a hang, 60 s by
    default, twice the agent's own deadline for a reply (30 s), so that a request stuck in the agent ends with the
    agent's answer; a request that waits on a runtime's own work (a session, a dump) passes a bound of its own."""
    wait = Wait(f"dsctl {' '.join(args)} as {user}", timeout)
    r = subprocess.run(as_user(user, [DSCTL, "--socket", agent.socket, *args]), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=timeout)
    wait.end(True)
    return r


def request_id_of(result):
    """The request id dsctl printed, from an error line or a JSON error."""
    m = re.search(r"request ([0-9a-f]{16})", result.stderr) or re.search(r'"request_id":"([0-9a-f]{16})"',
                                                                          result.stdout)
    assert m, f"no request id in {result}"
    return m.group(1)


def info_json(agent, user, pid):
    r = dsctl(agent, user, "--json", "info", str(pid))
    assert r.returncode == 0, r
    return json.loads(r.stdout)


def artifact_name_part(name):
    """The part of an artifact's name that comes from the process's name, as the agent makes it (dump_name_part():
    letters, digits, '-', '_' and inner '.', at most 32)."""
    kept = ""
    for ch in name or "":
        if len(kept) == 32:
            break
        if ch.isascii() and (ch.isalnum() or ch in "-_" or (ch == "." and kept)):
            kept += ch
    return kept or "process"


def take_artifact_names(directory, prefix, suffix, seconds):
    """Make an empty file @directory/PREFIX.STAMP.SUFFIX for every UTC second STAMP from a few seconds ago to
    @seconds ahead: the first name of each artifact of those seconds is taken, as an earlier artifact of the same
    table (or rule), process and second would have it."""
    os.makedirs(directory, mode=0o711, exist_ok=True)
    now = int(time.time())
    for second in range(now - 5, now + seconds):
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(second))
        with open(os.path.join(directory, f"{prefix}.{stamp}.{suffix}"), "w"):
            pass


def place_in_unit(pid, unit):
    """Move @pid into a cgroup named like a systemd unit, on whichever hierarchy systemd would read."""
    place_in_cgroup(pid, os.path.join("system.slice", unit))


def place_in_cgroup(pid, relative):
    """Move @pid into the cgroup @relative (str or bytes, made if missing) below the root of whichever hierarchy
    systemd would read; it is emptied and removed when the test ends. Return: its path as the kernel shows it."""
    for root in (b"/sys/fs/cgroup/systemd", b"/sys/fs/cgroup"):
        if os.path.exists(os.path.join(root, b"cgroup.procs")):
            path = os.path.join(root, os.fsencode(relative))
            procs = os.path.join(path, b"cgroup.procs")
            os.makedirs(path, exist_ok=True)
            with open(procs, "w") as f:
                f.write(str(pid))

            def remove():
                # processes still in it go back to the root; then the empty cgroup goes
                if not os.path.isdir(path):
                    return
                for left in open(procs).read().split():
                    try:
                        with open(os.path.join(root, b"cgroup.procs"), "w") as f:
                            f.write(left)
                    except OSError:
                        pass  # it exited meanwhile
                wait_for(lambda: not open(procs).read(), what="the test cgroup to empty")
                os.rmdir(path)
            scope.callback(remove)
            shown = path[len(root):]
            return shown if isinstance(relative, bytes) else os.fsdecode(shown)
    raise AssertionError("no writable cgroup hierarchy")


class AcceptWatch:
    """Counts accept() calls of a runtime, observed with strace, to prove what reached it."""

    def __init__(self, pid):
        self.out = os.path.join(make_dir(), "strace.out")
        self.proc = subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=accept,accept4", "-o", self.out,
                                      "-p", str(pid)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        scope.callback(self.stop)
        wait_for(lambda: self._traced(pid), what="strace to attach")

    @staticmethod
    def _traced(pid):
        """Whether every thread of @pid has a tracer. A runtime ends threads of its own while strace attaches (its
        tiered compilation's worker once idle, thread pool workers): a thread listed and gone before its status is
        read traces nothing and is passed over, as stop_process() does, where its FileNotFoundError failed the
        wait it happened in."""
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                status = open(f"/proc/{pid}/task/{tid}/status").read()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if re.search(r"^TracerPid:\s+0$", status, re.M):
                return False
        return True

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            # strace detaches from every thread and exits within ms; a bound against a hang
            self.proc.wait(timeout=HANG_BOUND)

    def accepts(self):
        """Completed accepts so far: lines with a result, resumed or whole."""
        # strace writes an accept's line at its exit stop, before the runtime goes on from it: an accept whose
        # request was answered is counted already, with no wait. The 0.2 s are for the checks that nothing was
        # accepted: a little time for an accept nobody waited for to show (on a loaded machine such a check can
        # only pass wrongly, never fail wrongly)
        time.sleep(0.2)
        text = open(self.out).read() if os.path.exists(self.out) else ""
        return len(re.findall(r"accept4?\(.*\) = \d+|<\.\.\. accept4? resumed>.* = \d+", text))


class FakeRuntime:
    """A hostile stand-in for a runtime, for misbehaviour the real one will not produce."""

    def __init__(self, mode, user=SVC, ruid=None, userns=False, private_tmp=False):
        """userns: in a user and mount namespace of its own, as its user can make one (unshare -Urm).
        private_tmp: a tmpfs of its own on /tmp, as PrivateTmp= gives (its dumps stage there, where no neighbour's
        do)."""
        # its TMPDIR (socket and log) outside /tmp when a tmpfs is to cover /tmp
        self.tmpdir = make_dir(user, 0o700, base="/run" if private_tmp else "/tmp")
        self.log = os.path.join(self.tmpdir, "fake.log")
        argv = ["env", f"TMPDIR={self.tmpdir}", PYTHON, os.path.join(HERE, "fake_runtime.py"), mode, self.log]
        if userns:
            argv = ["unshare", "--user", "--map-root-user", "--mount"] + argv
        if ruid:
            argv = ["setpriv", f"--ruid={ruid}", f"--euid={user}", f"--regid={user}", "--init-groups"] + argv
        else:
            argv = as_user(user, argv)
        if private_tmp:
            argv = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                    'mount -t tmpfs -o mode=1777 tmpfs /tmp && exec "$@"', "sh"] + argv
        self.process = Process(argv)
        self.pid = int(self.process.read_line("listening pid=").split("=")[1])

    def received(self):
        return open(self.log, "rb").read() if os.path.exists(self.log) else b""


# --- the client protocol, spoken by hand for tests that must send what dsctl never would ---

WIRE_INFO, WIRE_PROCESS, WIRE_DONE, WIRE_ERROR = 0x0002, 0x8001, 0x8002, 0x8003
TAG_PID, TAG_ERROR, TAG_MESSAGE = 1, 14, 15


def wire_frame(msg_type, fields=(), version=1):
    import struct
    payload = b"".join(struct.pack("<HI", tag, len(value)) + value for tag, value in fields)
    return b"DSAG" + struct.pack("<HHI", version, msg_type, len(payload)) + payload


def wire_info_request(pid):
    import struct
    return wire_frame(WIRE_INFO, [(TAG_PID, struct.pack("<I", pid))])


def wire_decode(data):
    """[(type, {tag: value})] for a stream of reply frames."""
    import struct
    frames = []
    while data:
        magic, version, msg_type, size = struct.unpack("<4sHHI", data[:12])
        assert magic == b"DSAG" and version == 1, data[:12]
        payload, data = data[12:12 + size], data[12 + size:]
        fields = {}
        while payload:
            tag, length = struct.unpack("<HI", payload[:6])
            fields[tag] = payload[6:6 + length]
            payload = payload[6 + length:]
        frames.append((msg_type, fields))
    return frames


def raw_exchange(agent, data, timeout=HANG_BOUND):
    """Send @data as root in one write and return everything the agent answers until it hangs up. @timeout bounds
    each read against a hang: the agent answers what it decides alone within ms."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(agent.socket)
    s.sendall(data)
    reply = b""
    while chunk := s.recv(65536):
        reply += chunk
    s.close()
    return wire_decode(reply)


def error_code(frames):
    import struct
    assert frames and frames[-1][0] == WIRE_ERROR, frames
    return struct.unpack("<I", frames[-1][1][TAG_ERROR])[0]


WIRE_TRACE, WIRE_STREAM, WIRE_SESSION_END = 0x0006, 0x8006, 0x8007
TAG_PROVIDERS, TAG_DURATION = 29, 21


def wire_trace_request(pid, providers, duration=None):
    import struct
    fields = [(TAG_PID, struct.pack("<I", pid)), (TAG_PROVIDERS, providers.encode())]
    if duration is not None:
        fields.append((TAG_DURATION, struct.pack("<Q", duration)))
    return wire_frame(WIRE_TRACE, fields)


class RawSession:
    """A trace session asked for by hand, as root, whose client decides whether it ever reads.

    After start the agent's STREAM frame has arrived: self.pipe is the stream's read end.
    """

    def __init__(self, agent, pid, providers, duration=None):
        import struct
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # each read: the session's start waits on the runtime (60 s, a bound against a hang; it comes within a
        # second), the replies on the agent's end of the session once the client stopped
        self.sock.settimeout(60)
        self.sock.connect(agent.socket)
        scope.callback(self.sock.close)
        self.sock.sendall(wire_trace_request(pid, providers, duration))
        header, fds, _, _ = socket.recv_fds(self.sock, 12, 1)
        assert len(header) == 12, header
        size = struct.unpack("<4sHHI", header)[3]
        payload = b""
        while len(payload) < size:
            payload += self.sock.recv(size - len(payload))
        (msg_type, _), = wire_decode(header + payload)
        assert msg_type == WIRE_STREAM and len(fds) == 1, (msg_type, fds, payload)
        self.pipe = fds[0]
        scope.callback(lambda: os.close(self.pipe))

    def pipe_capacity(self):
        import fcntl
        return fcntl.fcntl(self.pipe, 1032)  # F_GETPIPE_SZ

    def pipe_bytes(self):
        """How much of the stream waits in the pipe, unread."""
        import array
        import fcntl
        import termios
        n = array.array("i", [0])
        fcntl.ioctl(self.pipe, termios.FIONREAD, n)
        return n[0]

    def stop(self):
        """What Ctrl-C in dsctl sends: the end of the request side."""
        self.sock.shutdown(socket.SHUT_WR)

    def replies(self):
        """The frames after the stream, up to the agent's hang-up."""
        data = b""
        while chunk := self.sock.recv(65536):
            data += chunk
        return wire_decode(data)
TAG_ENDED = 32

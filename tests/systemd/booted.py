# SPDX-License-Identifier: LGPL-2.1-or-later
"""A real systemd as PID 1, booted from the host's own root for one test file.

systemd runs as PID 1 of a new pid, mount, cgroup, UTS, IPC and network
namespace (pid1.sh), on an overlay of the host's root whose upper layer is a
tmpfs: everything the tests install, every journal record and all state of
that system stay in the namespace and vanish with it. Commands run inside
through nsenter, as root or, with setpriv, as exactly one user.

Each test file registers functions with @test and calls run_tests(), which
prints TAP like tests/integration does.
"""
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback

BUILD = os.environ.get("DSAGENT_BUILD_DIR", os.path.join(os.path.dirname(__file__), "../../build"))
SOURCE = os.environ.get("DSAGENT_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../.."))
HERE = os.path.dirname(os.path.abspath(__file__))

sys.path.insert(0, os.path.join(SOURCE, "tests/integration"))
from harness import where_it_failed  # noqa: E402

REQUEST_MESSAGE_ID = "27ade2ec85a54471a176f947b0ec018e"
POLICY_MESSAGE_ID = "29cd34f17b474bad9ed538319addd224"
EXIT_AGENT_UNREACHABLE, EXIT_DENIED = 3, 4
# Uids and gids of the users a machine makes for itself (Machine.add_user): above useradd's UID_MAX (60000) and
# systemd's dynamic users (61184-65519), below the subordinate ranges useradd hands out (100000 up)
MACHINE_IDS = (70000, 79999)

# Commands inside get a clean environment, not the test runner's.
ENV = ["env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8",
       "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0"]

# Bounds on waits, as tests/integration/harness.py names them (tests/README.md, "Timing in tests"): each only ends
# a wait that would never be met, sized for a loaded 2-core machine; a wait goes on the moment its event comes.
HANG_BOUND = 30.0      # a step of systemd, journald or the agent: ms idle, seconds loaded
RUNTIME_BOUND = 120.0  # a .NET runtime's start, or a command inside that starts one
# the boot: past systemd's own DefaultTimeoutStartSec (90 s), so that a unit stuck at boot ends the boot as
# "degraded" (which the tests then read) before this bound ends it
BOOT_BOUND = 180.0

_tests = []


def test(fn):
    _tests.append(fn)
    return fn


def run_tests(machine_factory):
    """Boot one system for the whole file; each test builds on the state the previous ones left."""
    if os.geteuid() != 0:
        print("1..0 # SKIP systemd tests need root")
        sys.exit(77)
    selected = [fn for fn in _tests if len(sys.argv) < 2 or fn.__name__ in sys.argv[1:]]
    failed = 0
    with contextlib.ExitStack() as stack:
        try:
            machine = stack.enter_context(machine_factory())
        except Exception:
            for line in traceback.format_exc().splitlines():
                print(f"# {line}")
            print(f"not ok 1 - boot\n1..1", flush=True)
            sys.exit(1)
        for n, fn in enumerate(selected, 1):
            if failed:
                # each test starts from the state the previous ones left
                print(f"not ok {n} - {fn.__name__} # not run: an earlier test failed", flush=True)
                failed += 1
                continue
            began = time.monotonic()
            try:
                fn(machine)
                print(f"# {fn.__name__} took {time.monotonic() - began:.1f} s", flush=True)
                print(f"ok {n} - {fn.__name__}", flush=True)
            except Exception:
                failed += 1
                for line in traceback.format_exc().splitlines():
                    print(f"# {line}")
                # what the suite's summary prints of the failure (tests/summarize.py), so that CI's names its cause
                print(f"# {fn.__name__} took {time.monotonic() - began:.1f} s", flush=True)
                print(f"# failed at: {where_it_failed(sys.exc_info()[1])}", flush=True)
                # what the agent itself said last, for whoever reads a failed CI log
                try:
                    tail = machine.run(["journalctl", "--no-pager", "-n", "40", "-u", "dsagent.service",
                                        "-u", "dsagent.socket"], check=False).stdout
                    for line in tail.splitlines():
                        print(f"# journal: {line}")
                except Exception:
                    pass
                print(f"not ok {n} - {fn.__name__}", flush=True)
    print(f"1..{len(selected)}", flush=True)
    sys.exit(1 if failed else 0)


def wait_for(predicate, timeout=HANG_BOUND, what="condition", interval=0.1):
    """The first true value of @predicate, looked at every @interval seconds, within @timeout (a bound against a
    hang: see HANG_BOUND); else an AssertionError naming @what."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


def _cgroup2_mount():
    for line in open("/proc/self/mountinfo"):
        fields = line.split()
        if fields[fields.index("-") + 1] == "cgroup2":
            return fields[4]
    return None


def _own_cgroup2():
    for line in open("/proc/self/cgroup"):
        if line.startswith("0::"):
            return line[3:].strip()
    return None


def _remove_cgroup_tree(path):
    """rmdir from the leaves up, once the processes in them are gone."""
    for dirpath, dirnames, _ in sorted(os.walk(path), key=lambda w: -w[0].count("/")):
        try:
            os.rmdir(dirpath)
        except FileNotFoundError:
            pass


class Machine:
    """systemd booted as PID 1 of its own namespaces; a context manager."""

    def __init__(self, name="dsagent-test", binds=()):
        """binds: host directories seen at the same path inside, for those under /tmp, /run or /dev."""
        self.name = name
        self.binds = [os.path.realpath(b) for b in binds]
        self.proc = None
        self.pid1 = None
        self.cgroup = None
        self.work = None

    def __enter__(self):
        mount, own = _cgroup2_mount(), _own_cgroup2()
        if mount is None or own is None:
            raise RuntimeError("no cgroup2 hierarchy to give the booted systemd (see /proc/self/mountinfo)")
        self.work = tempfile.mkdtemp(prefix=f"{self.name}-", dir="/tmp")
        os.mkdir(os.path.join(self.work, "layer"))
        os.mkdir(os.path.join(self.work, "root"))
        self.cgroup = os.path.join(mount, own.lstrip("/"), os.path.basename(self.work))
        os.mkdir(self.cgroup)
        self.console = open(os.path.join(self.work, "console.log"), "w")

        def enter_cgroup():
            with open(os.path.join(self.cgroup, "cgroup.procs"), "w") as f:
                f.write("0")

        self.proc = subprocess.Popen(
            ["unshare", "--pid", "--fork", "--kill-child", "--mount", "--cgroup", "--uts", "--ipc", "--net",
             "--propagation", "private", os.path.join(HERE, "pid1.sh"), self.work, *self.binds],
            stdin=subprocess.DEVNULL, stdout=self.console, stderr=subprocess.STDOUT, preexec_fn=enter_cgroup,
            start_new_session=True)
        try:
            # pid1.sh mounts the overlay and execs systemd: ms idle
            self.pid1 = wait_for(self._child_of_unshare, what="PID 1 to start")
            wait_for(lambda: self.run(["systemctl", "is-system-running"], check=False).stdout.strip()
                     in ("running", "degraded"), timeout=BOOT_BOUND, what="the system to boot", interval=0.2)
        except Exception:
            self.__exit__(None, None, None)
            raise
        return self

    def _child_of_unshare(self):
        if self.proc.poll() is not None:
            raise RuntimeError(f"the boot failed: {open(self.console.name).read()}")
        try:
            children = open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read().split()
        except FileNotFoundError:
            return None
        if not children:
            return None
        # pid1.sh execs systemd: wait for it, not the script, before entering
        pid = int(children[0])
        return pid if open(f"/proc/{pid}/comm").read().strip() == "systemd" else None

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            # --kill-child: PID 1 dies with unshare, and the namespace with it
            os.kill(self.proc.pid, signal.SIGKILL)
        if self.proc:
            self.proc.wait()
        if self.cgroup and os.path.isdir(self.cgroup):
            # they die with PID 1, at once
            wait_for(lambda: "populated 0" in open(os.path.join(self.cgroup, "cgroup.events")).read(),
                     what="the booted system's processes to end")
            _remove_cgroup_tree(self.cgroup)
        if self.work:
            subprocess.run(["rm", "-rf", "--one-file-system", self.work], check=False)
        return False

    def command(self, argv, user=None):
        """argv as it runs inside: as root, or with exactly @user's uid, gid and groups."""
        enter = ["nsenter", f"--target={self.pid1}", "--all", "--root", "--wd"]
        if user is None:
            return enter + ENV + list(argv)
        return enter + ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--reset-env"] + list(argv)

    def run(self, argv, user=None, check=True, input=None, timeout=RUNTIME_BOUND):
        """@argv inside; @timeout: a bound against a hang (most commands end in ms; some start a runtime)."""
        r = subprocess.run(self.command(argv, user), input=input, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"{argv} exited {r.returncode}: {r.stdout}{r.stderr}")
        return r

    def sh(self, script, check=True):
        return self.run(["sh", "-ec", script], check=check)

    def write(self, path, text, mode=0o644):
        """A root-owned file inside, written whole and renamed into place as an administrator would."""
        self.run(["sh", "-ec", 'mkdir -p "$(dirname "$1")"; cat >"$1.new"; chmod "$2" "$1.new"; mv "$1.new" "$1"',
                  "sh", path, f"{mode:o}"], input=text)

    def show(self, unit, *props):
        out = self.run(["systemctl", "show", unit] + [f"--property={p}" for p in props]).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def journal(self, *matches):
        """Journal entries inside, as dicts, oldest first."""
        out = self.run(["journalctl", "--no-pager", "--output=json", *matches], check=False).stdout
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def add_user(self, name, groups=()):
        """A user inside; one the host already has (the integration tests' users) is reused.

        A new one takes its uid and gid from MACHINE_IDS, a range no host account ever gets: the machine shares the
        host's kernel and its /etc/passwd is a copy of the host's from the moment it wrote it, so a user made here
        by useradd's defaults took the uid the host gave next to a user of its own (the demo's), and that user's
        userdel then failed ("currently used by process") while this machine's user ran anything."""
        if self.run(["getent", "passwd", name], check=False).returncode != 0:
            first, last = MACHINE_IDS
            self.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin",
                      "-K", f"UID_MIN={first}", "-K", f"UID_MAX={last}",
                      "-K", f"GID_MIN={first}", "-K", f"GID_MAX={last}", name])
        for group in groups:
            self.run(["usermod", "--append", "--groups", group, name])

    def uid_of(self, name):
        return int(self.run(["id", "-u", name]).stdout)


def install_agent(machine, users=()):
    """The build installed into @machine as an administrator's `meson install` does it (the units, the catalog and
    its database, the sysusers.d group: units/post-install.sh), systemd told, and each of @users made a member of the
    socket's group. The egress process's user is made first, as the machine makes its users (Machine.add_user): the
    install's sysusers.d would otherwise give it the system uid the host gives its next system user, and the host's
    userdel of that user would fail while this machine's egress process runs."""
    machine.add_user("dsagent-egress")
    machine.run(["meson", "install", "-C", BUILD, "--no-rebuild", "--quiet"])
    machine.run(["systemctl", "daemon-reload"])
    for user in users:
        machine.add_user(user, groups=["dsagent"])


def build_option(name):
    options = json.loads(subprocess.run(["meson", "introspect", "--buildoptions", BUILD], check=True,
                                        stdout=subprocess.PIPE, text=True).stdout)
    return next(o["value"] for o in options if o["name"] == name)


def policy_dir():
    """Where the installed agent reads its policy: the build's sysconfdir."""
    return os.path.join(build_option("prefix"), build_option("sysconfdir"), "dsagent")


def policy_records(machine):
    return machine.journal(f"MESSAGE_ID={POLICY_MESSAGE_ID}")


def reload_and_wait(machine):
    """systemctl reload, then the agent's record of the outcome (systemd 252 does not wait for it)."""
    before = len(policy_records(machine))
    r = machine.run(["systemctl", "reload", "dsagent.service"], check=False)
    if r.returncode == 0:
        wait_for(lambda: len(policy_records(machine)) > before, what="the agent's policy record")
    return r


def target_app():
    """The real .NET test app, built on the host: the booted system sees the host's files."""
    out = subprocess.run([os.path.join(SOURCE, "tests/target-app/build.sh")], check=True,
                         stdout=subprocess.PIPE, text=True).stdout.strip()
    return os.path.join(out, "DsTestTarget")


def start_target(machine, unit, user, app):
    """The app as a service of its own: its user, its private /tmp; returns its pid once its socket exists."""
    machine.write(f"/etc/systemd/system/{unit}", f"""[Unit]
Description=dsagent test target

[Service]
User={user}
PrivateTmp=yes
Environment=DOTNET_CLI_TELEMETRY_OPTOUT=1
ExecStart={app}
""")
    machine.run(["systemctl", "daemon-reload"])
    machine.run(["systemctl", "start", unit])
    pid = int(machine.show(unit, "MainPID")["MainPID"])
    assert pid > 0, f"{unit} has no main process"
    # the service's runtime starts: RUNTIME_BOUND, where a loaded machine can take tens of seconds
    wait_for(lambda: machine.sh(f"ls /proc/{pid}/root/tmp | grep -q '^dotnet-diagnostic-{pid}-'",
                                check=False).returncode == 0, timeout=RUNTIME_BOUND,
             what=f"the diagnostic socket of {unit}")
    return pid

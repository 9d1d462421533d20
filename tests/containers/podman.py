# SPDX-License-Identifier: LGPL-2.1-or-later
"""Real containers for the integration tests: the test app under podman, rootful or rootless.

No image registry is reachable from the test machines, so a container's root is a directory built
from this machine's own files (rootfs.sh), which podman is given with --rootfs. On these machines
podman works only with runc (crun is refused by the sandbox), the cgroupfs manager, and no default
ulimits: setting them fails with "error setting rlimit type 7: operation not permitted". The
settings go to podman in a containers.conf named by CONTAINERS_CONF.

Import it after harness (tests/integration): containers are removed by harness.scope, like the
other resources a test starts.
"""
import os
import re
import subprocess
import time

import harness
from harness import SOURCE, as_user, make_dir, uid_of

HERE = os.path.dirname(os.path.abspath(__file__))
# A uid that no host account has, as an image's own user (distroless's nonroot, say) looks to the host.
NO_HOST_UID = 45123
CONTAINERS_CONF = "[containers]\ndefault_ulimits = []\n"
GLOBAL_ARGS = ["--runtime", "runc", "--cgroup-manager", "cgroupfs"]
APP = "/app/DsTestTarget"


def containers_env(user=None):
    """The environment podman runs with: CONTAINERS_CONF naming a fresh file with the settings above.

    The file is world-readable in a directory anyone may search, so that a rootless user's podman
    reads it too. For @user (rootless), the environment is all podman gets (as_user clears the rest):
    a HOME for its storage and an XDG_RUNTIME_DIR for its state, both the test's own, so that nothing
    of the test outlives it in the user's real home or in /tmp/podman-run-UID.
    """
    conf = os.path.join(make_dir(None, 0o755), "containers.conf")
    with open(conf, "w") as f:
        f.write(CONTAINERS_CONF)
    os.chmod(conf, 0o644)
    if user in (None, "root"):
        return dict(os.environ, CONTAINERS_CONF=conf)
    return {"CONTAINERS_CONF": conf, "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": make_dir(user, 0o700), "XDG_RUNTIME_DIR": make_dir(user, 0o700)}


def podman(env, *args, user=None, check=True, timeout=harness.RUNTIME_BOUND):
    """podman ARGS as root, or as @user with exactly @env. @timeout: a bound against a hang (podman run, inspect
    and rm take a second or two idle, tens of seconds loaded at worst: RUNTIME_BOUND is past that)."""
    if user in (None, "root"):
        argv, kwargs = ["podman", *GLOBAL_ARGS, *args], {"env": env}
    else:
        argv, kwargs = as_user(user, ["env", *[f"{k}={v}" for k, v in env.items()], "podman", *GLOBAL_ARGS, *args]), {}
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout, **kwargs)
    if check:
        assert r.returncode == 0, f"podman {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}"
    return r


_rootfs = None


def rootfs():
    """The container root for the test app (rootfs.sh), built once per app and runtime and kept in the
    tests' cache, where build.sh keeps the app: readable by every user, for rootless podman too."""
    global _rootfs
    if _rootfs is None:
        app = os.path.basename(os.path.dirname(harness.target_app()))
        cache = os.environ.get("DSAGENT_TEST_CACHE", "/var/cache/dsagent-tests")
        _rootfs = subprocess.run([os.path.join(HERE, "rootfs.sh"), os.path.join(cache, f"container-rootfs-{app}")],
                                 check=True, stdout=subprocess.PIPE, text=True).stdout.strip()
    return _rootfs


def dotnet_pid_under(pid):
    """@pid, or the first of its descendants, that has the .NET runtime loaded: a container's entry point
    may be a wrapper (an init, a shell) that starts the app as its child. None if there is none (yet)."""
    todo = [pid]
    while todo:
        p = todo.pop(0)
        try:
            if "/libcoreclr.so" in open(f"/proc/{p}/maps").read():
                return p
            for task in os.listdir(f"/proc/{p}/task"):
                todo += [int(c) for c in open(f"/proc/{p}/task/{task}/children").read().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue  # it exited meanwhile
    return None


def own_namespaces(pid):
    """The kinds of namespace in which @pid is not where this process is."""
    return {ns for ns in ("pid", "mnt", "net", "uts", "ipc", "user", "cgroup")
            if os.readlink(f"/proc/{pid}/ns/{ns}") != os.readlink(f"/proc/self/ns/{ns}")}


class Container:
    """A running container of the test app.

    id, name: podman's; pid: the HOST pid of its .NET process; ns_pid: that process's own pid in the
    container (what the app printed); uid: the host uid it runs as; tmp: its /tmp as the host sees it;
    started_in: seconds from podman run to the app's "ready" line.
    """

    def __init__(self, id, name, pid, ns_pid, uid, env, user, started_in):
        self.id, self.name, self.pid, self.ns_pid, self.uid = id, name, pid, ns_pid, uid
        self.env, self.user, self.started_in = env, user, started_in
        self.tmp = f"/proc/{pid}/root/tmp"

    def stop(self):
        stop(self.name, self.env, self.user)


def run_target(name, rootfs, user_uid=NO_HOST_UID, extra_args=(), tmp_size="8m", rootless_user=None, options=()):
    """The test app in a detached container of its own, once it is ready: a Container.

    Its own pid, mount, network (loopback only: no network is needed, and none is set up here), uts
    and ipc namespaces; a root file system it may not write (distroless images are run so), and its own
    tmpfs on /tmp, of @tmp_size: small, so that a dump that passed through it could not fit. It runs as
    @user_uid (its group the same number): NO_HOST_UID, a host user's uid, or None for the container's
    root. Rootful, unless @rootless_user: then that user's own podman runs it, in a user namespace
    (the container's root is that user on the host). @options: more of podman run's (volumes, -e).

    The root is mounted with an overlay (":O"): podman's writes go to the overlay, never into the
    shared directory, which every test's containers use at once.
    """
    env = containers_env(rootless_user)
    name = f"dsagent-it-{name}-{os.getpid()}-{time.monotonic_ns() % 1000000}"
    log = os.path.join(make_dir(rootless_user, 0o755), "container.log")
    args = ["run", "--detach", "--name", name, "--rootfs",
            "--pid", "private", "--network", "none", "--uts", "private", "--ipc", "private",
            "--read-only", "--tmpfs", f"/tmp:rw,mode=1777,size={tmp_size}",
            "--log-driver", "k8s-file", "--log-opt", f"path={log}"]
    if user_uid is not None:
        args += ["--user", f"{user_uid}:{user_uid}"]
    args += list(options)
    started = time.monotonic()
    r = podman(env, *args, f"{rootfs}:O", APP, *extra_args, user=rootless_user, check=False)
    # registered even when run failed: podman may have created the container all the same
    harness.scope.callback(stop, name, env, rootless_user)
    assert r.returncode == 0, f"podman run: exit {r.returncode}: {r.stderr.strip()}"
    cid = r.stdout.strip().splitlines()[-1]

    ready, last_check = None, 0.0
    while ready is None:
        text = open(log).read() if os.path.exists(log) else ""
        # k8s-file lines: TIME STREAM F|P TEXT
        m = re.search(r"^\S+ stdout [FP] (ready pid=(\d+).*)$", text, re.M)
        if m:
            ready = int(m.group(2))
            break
        now = time.monotonic()
        # a bound against a hang: a container's runtime starts in a second or two idle, and a loaded 2-core machine
        # can take tens of seconds to start a .NET runtime; a container that exits is seen at once, below
        assert now - started < harness.RUNTIME_BOUND, \
            f"container {name} printed no ready line in {harness.RUNTIME_BOUND:g} s: {text!r}"
        if now - last_check > 1:  # how often to ask podman whether it still runs: a pace, not a bound
            last_check = now
            status = inspect(name, "{{.State.Status}}", env, rootless_user)
            if status != "running":
                # what the app said before it ended, stderr too, once conmon has written it all
                said = podman(env, "logs", name, user=rootless_user, check=False)
                raise AssertionError(f"container {name} is {status}: {(said.stdout + said.stderr).strip()!r}")
        time.sleep(0.02)
    started_in = time.monotonic() - started

    init = int(inspect(name, "{{.State.Pid}}", env, rootless_user))
    pid = dotnet_pid_under(init)
    assert pid, f"no .NET process in container {name} (its first process: {init})"
    assert harness.ns_pid_of(pid) == ready, (pid, harness.ns_pid_of(pid), ready)
    uid = int(re.search(r"^Uid:\s+(\d+)", open(f"/proc/{pid}/status").read(), re.M).group(1))
    return Container(cid, name, pid, ready, uid, env, rootless_user, started_in)


def inspect(name, fmt, env, user=None):
    return podman(env, "inspect", "--format", fmt, name, user=user).stdout.strip()


_stopped = set()


def stop(name, env=None, user=None):
    """Remove the container now (SIGKILL: the app as pid 1 ignores podman's SIGTERM), whatever its state.
    For a rootless user, end the pause process that podman left holding its user namespace too."""
    if name in _stopped:
        return  # a rootless user's podman would make a new pause process only to find nothing
    _stopped.add(name)
    env = env or containers_env(user)
    podman(env, "rm", "--force", "--time", "0", "--ignore", name, user=user, check=False)
    if user not in (None, "root"):
        pause = os.path.join(env["XDG_RUNTIME_DIR"], "libpod", "tmp", "pause.pid")
        try:
            pid = int(open(pause).read())
        except (FileNotFoundError, ValueError):
            return
        # only the process this test's podman started: the pid file is in the test's own directory,
        # and the process must still be the user's
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid_of(user):
                os.kill(pid, 9)
        except (FileNotFoundError, ProcessLookupError):
            pass

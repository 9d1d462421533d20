#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""dsagent against the real runtime in real podman containers: ps, info, dump, trace and counters by host pid,
for a container user no host account has, a host user's, and a rootless user's container."""
import csv
import hashlib
import io
import json
import os
import pwd
import re
import subprocess
import sys

import harness
from harness import (ALICE, BUILD, DUMP_BOUND, EXIT_NO_SUCH_PROCESS, MALLORY, RUNTIME_BOUND, SVC, Agent, Skip, Target,
                     acl_of, as_user, can_read, dsctl, info_json, is_elf_core, make_dir, request_id_of, run_tests, test,
                     uid_of, wait_for)

sys.path.insert(0, os.path.join(harness.SOURCE, "tests", "containers"))
import podman  # noqa: E402  (tests/containers, beside this directory)
from podman import NO_HOST_UID  # noqa: E402

EXIT_NO_STAGING = 13
NETTRACE_DUMP = os.path.join(BUILD, "tests", "tools", "nettrace-dump")
PROVIDER = "Dsagent-TestTarget"
METER = "Dsagent.TestTarget"
MARKER = {"number": 0x5A5A1234, "big": 0x0123456789ABCDEF, "text": "dsagent-marker \u00e9\u20ac", "real": 2.5}
TMP_SIZE = 8 * 1024 * 1024

# ALICE, on call for containers, is granted the diagnostics that run no code on whatever runs as the
# containers' user: a uid with no account on the host, so the rule can name it only by number.
POLICY = f"""
[agent]
dump_dir = "@DUMP_DIR@"

[[rule]]
name = "oncall-containers"
users = ["{ALICE}"]
commands = ["ps", "info", "dump", "trace", "counters"]
targets.users = ["uid:{NO_HOST_UID}"]
dump_types = ["mini", "heap"]
trace_profiles = ["cpu-sampling"]
trace_providers = ["{PROVIDER}"]
counter_providers = ["System.Runtime", "{METER}"]
max_duration = "30s"
"""


def container(name, *args, **kwargs):
    return podman.run_target(name, podman.rootfs(), extra_args=args, tmp_size=f"{TMP_SIZE // 1024}k", **kwargs)


def ps(agent, user):
    r = dsctl(agent, user, "--json", "ps")
    assert r.returncode == 0, r
    return {p["pid"]: p for p in json.loads(r.stdout)}


def tmp_state(c):
    """What the container's own /tmp holds, and how much of it is used, as the host sees it."""
    st = os.statvfs(c.tmp)
    return sorted(os.listdir(c.tmp)), st.f_blocks - st.f_bfree


def runtime_files(c):
    """The files the runtime itself keeps in /tmp: its diagnostic socket and its debugger pipes, named by its
    own pid in the container."""
    names, _ = tmp_state(c)
    return [n for n in names if n.startswith((f"dotnet-diagnostic-{c.ns_pid}-", f"clr-debug-pipe-{c.ns_pid}-"))]


def markers_in(path):
    """The app's Marker events in a trace file, as the project's own parser reads them; the file must be whole."""
    out = subprocess.run([NETTRACE_DUMP, path, PROVIDER], stdout=subprocess.PIPE, text=True, check=True).stdout
    lines = [json.loads(line) for line in out.splitlines()]
    summary = lines[-1]["summary"]
    assert summary["complete"], summary
    return [line["payload"] for line in lines[:-1] if line.get("event") == "Marker"]


@test
def the_container_is_one_with_a_uid_no_host_user_has():
    """What every other test relies on: the app runs in namespaces of its own, as a uid no host account has,
    with a /tmp of its own that only the container sees, and its runtime listens there."""
    c = container("real")
    assert {"pid", "mnt", "net", "uts"} <= podman.own_namespaces(c.pid), podman.own_namespaces(c.pid)
    assert "user" not in podman.own_namespaces(c.pid)  # rootful: the container's uids are the host's
    assert c.ns_pid == 1 and c.pid != 1
    assert c.uid == NO_HOST_UID
    try:
        pwd.getpwuid(NO_HOST_UID)
        raise AssertionError(f"a host user has uid {NO_HOST_UID}; the tests need one nobody has")
    except KeyError:
        pass
    st = os.statvfs(c.tmp)
    assert st.f_blocks * st.f_frsize == TMP_SIZE, "the container's /tmp is not its own tmpfs"
    sockets = [n for n in runtime_files(c) if n.endswith("-socket")]
    assert len(sockets) == 1 and not os.path.exists(os.path.join("/tmp", sockets[0])), sockets
    print(f"# container started in {c.started_in:.2f} s", flush=True)


@test
def ps_lists_the_containerized_process_by_its_host_pid():
    c = container("ps")
    agent = Agent(policy=POLICY)
    root_view = ps(agent, None)
    assert c.pid in root_view, root_view
    assert root_view[c.pid]["name"] == "DsTestTarget", root_view[c.pid]
    # the rule on the container's uid lets ALICE see it too; MALLORY, granted nothing, does not
    assert c.pid in ps(agent, ALICE)
    assert c.pid not in ps(agent, MALLORY)
    text = dsctl(agent, None, "ps")
    assert text.returncode == 0, text
    line = next(line for line in text.stdout.splitlines() if line.split()[0] == str(c.pid))
    assert line.split()[1] == str(NO_HOST_UID), line  # no name to show for a uid no host user has


@test
def info_by_host_pid_reaches_the_runtime_in_the_container():
    c = container("info", "--marker", "in-a-container")
    agent = Agent(policy=POLICY)
    for user in (None, ALICE):
        info = info_json(agent, user, c.pid)
        assert info["pid"] == c.pid and info["runtime_pid"] == c.ns_pid == 1, info
        assert info["uid"] == NO_HOST_UID and "user" not in info, info
        assert info["command_line"].endswith("DsTestTarget.dll --marker in-a-container"), info
        assert info["exe"] == podman.APP, info  # the path in the container's view
        assert info["runtime_version"].startswith("10.") and info["entry_assembly"] == "DsTestTarget", info
    denied = dsctl(agent, MALLORY, "info", str(c.pid))
    assert denied.returncode == EXIT_NO_SUCH_PROCESS and denied.stdout == "", denied


@test
def dump_lands_in_the_hosts_dump_dir_for_the_requester_and_never_in_the_container():
    c = container("dump")
    agent = Agent(policy=POLICY)
    before = tmp_state(c)
    r = dsctl(agent, ALICE, "--json", "dump", str(c.pid), "--type", "heap", timeout=DUMP_BOUND)
    assert r.returncode == 0, r
    result = json.loads(r.stdout)
    path = result["path"]
    assert os.path.dirname(path) == agent.dumps and result["pid"] == c.pid and result["uid"] == NO_HOST_UID, result
    assert is_elf_core(path)
    # larger than the container's whole /tmp: it cannot have been written there first
    assert os.stat(path).st_size == result["size"] > TMP_SIZE, result
    assert os.stat(path).st_uid == 0
    assert acl_of(path) == ["user::rw-", f"user:{uid_of(ALICE)}:r--", "group::---", "mask::r--", "other::---"]
    assert can_read(ALICE, path) and not can_read(MALLORY, path)
    assert os.getxattr(path, "user.dsagent.target_pid") == str(c.pid).encode()
    # the container's /tmp holds what it held before, byte for byte as much: no dump, no staging left
    assert tmp_state(c) == before, (before, tmp_state(c))
    assert not [n for n in before[0] if "dump" in n or n.endswith(".core")], before
    record, = agent.records(message_id=harness.DUMP_MESSAGE_ID)
    assert record["DSAGENT_RULE"] == "oncall-containers" and record["DSAGENT_DUMP_TYPE"] == "heap", record
    assert record["DSAGENT_TARGET_CONTAINER_ID"] == c.id, record


@test
def trace_of_the_containerized_process_holds_its_events():
    c = container("trace", "--emit-events", "200")
    agent = Agent(policy=POLICY)
    out = os.path.join(make_dir(ALICE), "container.nettrace")
    r = dsctl(agent, ALICE, "trace", str(c.pid), "--providers", PROVIDER, "--duration", "2", "-o", out,
              timeout=RUNTIME_BOUND)
    assert r.returncode == 0, r
    assert "ended: duration" in r.stderr, r.stderr
    assert open(out, "rb").read(8) == b"Nettrace"
    assert os.stat(out).st_uid == uid_of(ALICE), "the trace belongs to the requester"
    markers = markers_in(out)
    # 50: a count the app's pace makes, not a time: 2 s from the session's start (when the agent's duration
    # begins) at 200 a second give some 400, and a loaded machine that halved the pace would still give 4 times 50
    assert len(markers) >= 50, len(markers)
    assert all({k: m[k] for k in MARKER} == MARKER for m in markers), markers[0]


@test
def counters_of_the_containerized_process():
    c = container("counters", "--meter-value", "42.5")
    agent = Agent(policy=POLICY)
    # 3 s of the default 1 s interval: two or three rows of each counter, where the check needs one
    r = dsctl(agent, ALICE, "counters", str(c.pid), "--counters", f"System.Runtime,{METER}", "--duration", "3",
              timeout=RUNTIME_BOUND)
    assert r.returncode == 0, r
    rows = list(csv.reader(io.StringIO(r.stdout)))
    assert rows[0] == ["Timestamp", "Provider", "Counter Name", "Counter Type", "Mean/Increment"], rows[0]
    values = {(row[1], row[2]): float(row[4]) for row in rows[1:]}
    assert values[(METER, "test-gauge (items)")] == 42.5, values
    assert values[("System.Runtime", "dotnet.process.memory.working_set (By)")] > 0, values


@test
def a_uid_no_host_user_has_is_granted_by_its_number_and_only_by_it():
    c = container("numeric")
    neighbour = POLICY.replace(f"uid:{NO_HOST_UID}", f"uid:{NO_HOST_UID + 1}")
    agent = Agent(policy=neighbour)
    denied = dsctl(agent, ALICE, "info", str(c.pid))
    assert denied.returncode == EXIT_NO_SUCH_PROCESS, denied
    record = agent.record_for(request_id_of(denied))
    assert record["DSAGENT_DECISION"] == "denied" and record["DSAGENT_TARGET_UID"] == str(NO_HOST_UID), record
    assert c.pid not in ps(agent, ALICE)

    agent.write_policy(POLICY)
    agent.reload()
    assert info_json(agent, ALICE, c.pid)["pid"] == c.pid
    assert c.pid in ps(agent, ALICE)


@test
def a_container_running_as_a_host_users_uid_is_that_users_own():
    """Rootful, with --user of a host account: on the host it is that user's process, and owner access holds
    as for any of the user's processes; the rule for the containers' uid grants ALICE nothing here."""
    c = container("host-user", user_uid=uid_of(SVC))
    agent = Agent(policy=POLICY)
    assert c.uid == uid_of(SVC)
    assert ps(agent, SVC)[c.pid]["user"] == SVC
    info = info_json(agent, SVC, c.pid)
    assert info["user"] == SVC and info["runtime_pid"] == 1, info
    before = tmp_state(c)
    r = dsctl(agent, SVC, "--json", "dump", str(c.pid), "--type", "mini", timeout=DUMP_BOUND)
    assert r.returncode == 0, r
    path = json.loads(r.stdout)["path"]
    assert is_elf_core(path) and can_read(SVC, path) and not can_read(ALICE, path)
    assert tmp_state(c) == before
    record, = agent.records(message_id=harness.DUMP_MESSAGE_ID)
    assert record["DSAGENT_RULE"] == "owner-access", record
    assert dsctl(agent, ALICE, "info", str(c.pid)).returncode == EXIT_NO_SUCH_PROCESS


@test
def a_rootless_container_is_reached_but_its_tmp_takes_no_dump():
    """SVC's own rootless podman: the container's root is SVC on the host, in a user namespace of SVC's. Its
    runtime answers SVC (owner access), but the agent will not stage a dump in a /tmp that belongs to a user
    namespace, where the host's root has no identity (SECURITY.md, "Not covered yet"): refused, in its own
    words, and nothing is left in the container's /tmp."""
    c = container("rootless", user_uid=None, rootless_user=SVC)
    assert "user" in podman.own_namespaces(c.pid) and c.uid == uid_of(SVC)
    agent = Agent(policy=POLICY)
    info = info_json(agent, SVC, c.pid)
    assert info["pid"] == c.pid and info["runtime_pid"] == 1 and info["user"] == SVC, info

    out = os.path.join(make_dir(SVC), "rootless.nettrace")
    r = dsctl(agent, SVC, "trace", str(c.pid), "--duration", "1", "-o", out, timeout=RUNTIME_BOUND)
    assert r.returncode == 0, r
    assert open(out, "rb").read(8) == b"Nettrace"

    before = tmp_state(c)
    r = dsctl(agent, SVC, "dump", str(c.pid), timeout=DUMP_BOUND)
    assert r.returncode == EXIT_NO_STAGING, r
    assert "user namespace" in r.stderr, r.stderr
    assert tmp_state(c) == before
    assert not os.path.exists(agent.dumps) or os.listdir(agent.dumps) == []


def cgroup_paths(pid):
    """The paths of every hierarchy in /proc/PID/cgroup."""
    return {line.split(":", 2)[2] for line in open(f"/proc/{pid}/cgroup").read().splitlines()}


@test
def ps_info_and_the_audit_record_name_the_container_podman_ran():
    """The container id is the one podman returned: in ps and info, --json whole, the text its first 12 characters
    as podman ps shows them; and on the audit record of each request about the process."""
    c = container("ids")
    agent = Agent(policy=POLICY)
    assert len(c.id) == 64, c.id
    for user in (None, ALICE):
        row = ps(agent, user)[c.pid]
        assert row["container_id"] == c.id and "pod_uid" not in row, row
        info = info_json(agent, user, c.pid)
        assert info["container_id"] == c.id and "pod_uid" not in info, info
        # root made every cgroup on its path: nothing of it is unverified
        for shown in (row, info):
            assert not {"unverified_container_id", "cgroup_unverified"} & shown.keys(), shown
        # the kernel's path, with the id podman named it by
        assert info["cgroup"] == row["cgroup"] and info["cgroup"] in cgroup_paths(c.pid) and c.id in info["cgroup"], info
    text = dsctl(agent, ALICE, "info", str(c.pid))
    assert text.returncode == 0, text
    assert f"Container:        {c.id[:12]}\n" in text.stdout, text.stdout
    assert "Pod UID:" not in text.stdout, text.stdout
    listing = dsctl(agent, ALICE, "ps")
    line = next(line for line in listing.stdout.splitlines() if line.split()[0] == str(c.pid))
    assert line.endswith(f"DsTestTarget [ctr:{c.id[:12]}]"), line

    records = [r for r in agent.records() if r.get("DSAGENT_TARGET_PID") == str(c.pid)]
    assert [r["DSAGENT_COMMAND"] for r in records] == ["info", "info", "info"], records
    for r in records:
        assert r["DSAGENT_TARGET_CONTAINER_ID"] == c.id and r["DSAGENT_TARGET_CGROUP"] == info["cgroup"], r
        assert "DSAGENT_TARGET_POD_UID" not in r and "DSAGENT_TARGET_CGROUP_UNVERIFIED" not in r, r
    # a denied request's record names the container too: what was asked of which, whoever asked
    denied = dsctl(agent, MALLORY, "info", str(c.pid))
    assert denied.returncode == EXIT_NO_SUCH_PROCESS, denied
    record = agent.record_for(request_id_of(denied))
    assert record["DSAGENT_DECISION"] == "denied" and record["DSAGENT_TARGET_CONTAINER_ID"] == c.id, record
    assert c.id[:12] not in denied.stdout + denied.stderr


@test
def a_process_outside_any_container_names_none():
    target = Target(SVC)
    agent = Agent()
    row = ps(agent, SVC)[target.pid]
    info = info_json(agent, SVC, target.pid)
    for shown in (row, info):
        assert "container_id" not in shown and "pod_uid" not in shown, shown
        assert shown.get("cgroup") in cgroup_paths(target.pid), shown
    text = dsctl(agent, SVC, "info", str(target.pid))
    assert text.returncode == 0 and "Container:" not in text.stdout, text
    listing = dsctl(agent, SVC, "ps")
    line = next(line for line in listing.stdout.splitlines() if line.split()[0] == str(target.pid))
    assert "[ctr:" not in line, line
    for record in agent.records():
        assert "DSAGENT_TARGET_CONTAINER_ID" not in record and "DSAGENT_TARGET_POD_UID" not in record, record


def without_request_id(text):
    return re.sub(r"\(request [0-9a-f]+\)", "(request)", text)


def own_cgroup(pid):
    """The process's cgroup in the unified hierarchy, as the kernel shows it."""
    return next(line.split(":", 2)[2] for line in open(f"/proc/{pid}/cgroup").read().splitlines()
                if line.startswith("0::"))


@test
def a_rule_on_one_container_covers_it_and_hides_its_neighbour():
    """Two containers of the same image, the same uid, the same name: only where they run tells them apart.
    MALLORY's rule names container A by the 12-digit id podman ps shows; ALICE's names podman's scopes by a
    cgroup glob, which a process of the host in a unit matches not. What a rule does not cover is answered
    for as for a process that does not exist."""
    a, b = container("select-a"), container("select-b")
    host = Target(SVC)
    a_cgroup, b_cgroup = own_cgroup(a.pid), own_cgroup(b.pid)
    parent = os.path.dirname(a_cgroup)
    # the kernel's paths: podman's cgroupfs manager puts each container in libpod-<id> under one parent
    assert a_cgroup == f"{parent}/libpod-{a.id}" and b_cgroup == f"{parent}/libpod-{b.id}", (a_cgroup, b_cgroup)
    assert not own_cgroup(host.pid).startswith(parent + "/"), own_cgroup(host.pid)
    print(f"# containers in {parent}/libpod-*", flush=True)
    agent = Agent(policy=f"""
[[rule]]
name = "container-a"
users = ["{MALLORY}"]
commands = ["ps", "info"]
targets.containers = ["{a.id[:12]}"]

[[rule]]
name = "podman-scopes"
users = ["{ALICE}"]
commands = ["ps", "info"]
targets.cgroups = ["{parent}/libpod-*"]
""")
    listed = ps(agent, MALLORY)
    assert a.pid in listed and b.pid not in listed and host.pid not in listed, listed
    assert info_json(agent, MALLORY, a.pid)["container_id"] == a.id
    gone = dsctl(agent, MALLORY, "info", "999999")
    for hidden in (b.pid, host.pid):
        denied = dsctl(agent, MALLORY, "info", str(hidden))
        assert denied.returncode == EXIT_NO_SUCH_PROCESS and denied.stdout == "", denied
        assert without_request_id(denied.stderr) == without_request_id(gone.stderr), (denied, gone)

    listed = ps(agent, ALICE)
    assert a.pid in listed and b.pid in listed and host.pid not in listed, listed
    assert {listed[a.pid]["cgroup"], listed[b.pid]["cgroup"]} == {a_cgroup, b_cgroup}, listed
    assert info_json(agent, ALICE, b.pid)["container_id"] == b.id
    denied = dsctl(agent, ALICE, "info", str(host.pid))
    assert denied.returncode == EXIT_NO_SUCH_PROCESS, denied

    allowed = {r["DSAGENT_CLIENT_USER"]: r for r in agent.records()
               if r.get("DSAGENT_COMMAND") == "info" and r.get("DSAGENT_DECISION") == "allowed"}
    assert allowed[MALLORY]["DSAGENT_RULE"] == "container-a", allowed
    assert allowed[MALLORY]["DSAGENT_TARGET_CONTAINER_ID"] == a.id, allowed
    assert allowed[ALICE]["DSAGENT_RULE"] == "podman-scopes", allowed
    assert allowed[ALICE]["DSAGENT_TARGET_CGROUP"] == b_cgroup, allowed


def fs_type(path):
    return subprocess.run(["stat", "-f", "-c", "%T", path], stdout=subprocess.PIPE, text=True, check=True).stdout.strip()


def hierarchy_root(kind):
    """Where a hierarchy is mounted: "unified" (/sys/fs/cgroup on a v2 host, /sys/fs/cgroup/unified on a hybrid
    one) or "systemd" (systemd's named v1 hierarchy of a hybrid or legacy host); None when this host has none."""
    candidates = {"unified": [("/sys/fs/cgroup", "cgroup2fs"), ("/sys/fs/cgroup/unified", "cgroup2fs")],
                  "systemd": [("/sys/fs/cgroup/systemd", "cgroupfs")]}[kind]
    return next((root for root, fs in candidates if os.path.isdir(root) and fs_type(root) == fs), None)


def delegated_cgroup(root, user):
    """A cgroup below @root delegated to @user as systemd's Delegate=yes does: the directory, and the files that
    move processes and shape the subtree, chowned to the user. Removed at the end, children first, with any
    process still in it put back into @root."""
    path = os.path.join(root, f"dst-delegated-{os.getpid()}")
    os.mkdir(path)
    uid, gid = uid_of(user), pwd.getpwnam(user).pw_gid
    for name in ("", "cgroup.procs", "cgroup.subtree_control", "cgroup.threads", "tasks"):
        if name == "" or os.path.exists(os.path.join(path, name)):
            os.chown(os.path.join(path, name), uid, gid)

    def remove():
        for below, dirs, _ in sorted(os.walk(path), key=lambda w: -len(w[0])):
            for left in open(os.path.join(below, "cgroup.procs")).read().split():
                try:
                    with open(os.path.join(root, "cgroup.procs"), "w") as f:
                        f.write(left)
                except OSError:
                    pass  # it exited meanwhile
            wait_for(lambda: not open(os.path.join(below, "cgroup.procs")).read(), what="a test cgroup to empty")
            os.rmdir(below)
    harness.scope.callback(remove)
    return path


def move_into(pid, cgroup_dir, user=None):
    """@pid into the cgroup @cgroup_dir, written by @user as the kernel lets them (root when None)."""
    r = subprocess.run(as_user(user, ["sh", "-c", 'echo "$1" > "$2/cgroup.procs"', "sh", str(pid), cgroup_dir]),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert r.returncode == 0, r.stdout


def hierarchy_path(pid, controllers):
    """@pid's cgroup in one hierarchy ("" for the unified one, "name=systemd"), as the kernel shows it."""
    return next(line.split(":", 2)[2] for line in open(f"/proc/{pid}/cgroup").read().splitlines()
                if line.split(":", 2)[1] == controllers)


def impostor_policy(cgroup_pattern, container_id):
    """ALICE may look at the container by its id, SVC at the cgroups the pattern matches: neither owns it."""
    return f"""
[[rule]]
name = "by-container"
users = ["{ALICE}"]
commands = ["ps", "info"]
targets.containers = ["{container_id[:12]}"]

[[rule]]
name = "by-cgroup"
users = ["{SVC}"]
commands = ["ps", "info"]
targets.cgroups = ["{cgroup_pattern}"]
"""


def assert_impostor_unverified(agent, target, fake_id, cgroup):
    """No rule on containers or cgroups covers @target: ALICE and SVC are answered as for a process that does not
    exist. Its owner, MALLORY, sees the id she chose only as unverified, in ps, info (--json and text) and on
    the audit records, whoever asked."""
    gone = dsctl(agent, ALICE, "info", "999999")
    for user in (ALICE, SVC):
        assert target.pid not in ps(agent, user), user
        denied = dsctl(agent, user, "info", str(target.pid))
        assert denied.returncode == EXIT_NO_SUCH_PROCESS and denied.stdout == "", denied
        assert without_request_id(denied.stderr) == without_request_id(gone.stderr), (denied, gone)
        record = agent.record_for(request_id_of(denied))
        assert record["DSAGENT_DECISION"] == "denied", record
        assert record["DSAGENT_TARGET_UNVERIFIED_CONTAINER_ID"] == fake_id, record
        assert "DSAGENT_TARGET_CONTAINER_ID" not in record and record["DSAGENT_TARGET_CGROUP_UNVERIFIED"] == "yes"

    row = ps(agent, MALLORY)[target.pid]
    info = info_json(agent, MALLORY, target.pid)
    for shown in (row, info):
        assert "container_id" not in shown and shown["unverified_container_id"] == fake_id, shown
        assert shown["cgroup"] == cgroup and shown["cgroup_unverified"] is True, shown
    text = dsctl(agent, MALLORY, "info", str(target.pid))
    assert text.returncode == 0, text
    assert f"Container:        {fake_id[:12]} (unverified" in text.stdout, text.stdout
    listing = dsctl(agent, MALLORY, "ps")
    line = next(line for line in listing.stdout.splitlines() if line.split()[0] == str(target.pid))
    assert f"[unverified ctr:{fake_id[:12]}]" in line and "[ctr:" not in line, line
    records = [r for r in agent.records() if r.get("DSAGENT_TARGET_PID") == str(target.pid)
               and r.get("DSAGENT_DECISION") == "allowed"]
    assert records and all(r["DSAGENT_TARGET_UNVERIFIED_CONTAINER_ID"] == fake_id for r in records), records
    assert all("DSAGENT_TARGET_CONTAINER_ID" not in r and r["DSAGENT_TARGET_CGROUP"] == cgroup for r in records)


@test
def a_delegated_cgroup_named_like_a_container_is_no_container():
    """MALLORY owns a delegated cgroup subtree (Delegate=yes), makes libpod-<64 hex>.scope in it, as podman names
    a container's scope, and moves her own app there. The kernel shows that path, but root made none of it:
    no targets.containers rule with that id, nor a targets.cgroups pattern matching it, lets ALICE or SVC at
    her process, and ps, info and the records call the id unverified. (A real container still matches:
    a_rule_on_one_container_covers_it_and_hides_its_neighbour.)"""
    root = hierarchy_root("unified")
    assert root, "no unified cgroup hierarchy on this host"
    fake_id = hashlib.sha256(f"impostor-{os.getpid()}".encode()).hexdigest()
    delegated = delegated_cgroup(root, MALLORY)
    target = Target(MALLORY)
    move_into(target.pid, delegated)  # where systemd starts a Delegate=yes unit's process
    scope_dir = os.path.join(delegated, f"libpod-{fake_id}.scope")
    r = subprocess.run(as_user(MALLORY, ["mkdir", scope_dir]), stderr=subprocess.PIPE, text=True)
    assert r.returncode == 0, r.stderr
    move_into(target.pid, scope_dir, MALLORY)
    # the attack happened: the kernel puts her process in the cgroup she made and named
    cgroup = "/" + os.path.relpath(scope_dir, root)
    assert hierarchy_path(target.pid, "") == cgroup, open(f"/proc/{target.pid}/cgroup").read()
    assert os.stat(scope_dir).st_uid == uid_of(MALLORY)
    agent = Agent(policy=impostor_policy(f"{os.path.dirname(cgroup)}/libpod-*", fake_id))
    assert_impostor_unverified(agent, target, fake_id, cgroup)


@test
def a_cgroup_root_made_but_renamed_in_a_delegated_subtree_is_no_container():
    """Root made the cgroup MALLORY's app runs in, inside her delegated subtree of systemd's v1 hierarchy, and
    filled it; but its parent is hers, and a v1 cgroup may be renamed by whoever may write its parent: she
    names it libpod-<64 hex>.scope. That the cgroup itself is root's vouches for nothing while an ancestor is
    not: still no container, and no rule on containers or cgroups matches."""
    root = hierarchy_root("systemd")
    if not root:
        raise Skip("no name=systemd v1 hierarchy on this host: a v2 cgroup cannot be renamed")
    fake_id = hashlib.sha256(f"renamed-{os.getpid()}".encode()).hexdigest()
    delegated = delegated_cgroup(root, MALLORY)
    job = os.path.join(delegated, "job")
    os.mkdir(job)  # root's, with its cgroup.procs
    target = Target(MALLORY)
    move_into(target.pid, job)
    scope_dir = os.path.join(delegated, f"libpod-{fake_id}.scope")
    r = subprocess.run(as_user(MALLORY, ["mv", "-T", job, scope_dir]), stderr=subprocess.PIPE, text=True)
    assert r.returncode == 0, r.stderr
    cgroup = "/" + os.path.relpath(scope_dir, root)
    # the agent reads systemd's hierarchy here: the unified one says nothing (the root)
    assert hierarchy_path(target.pid, "name=systemd") == cgroup, open(f"/proc/{target.pid}/cgroup").read()
    assert hierarchy_path(target.pid, "") == "/", open(f"/proc/{target.pid}/cgroup").read()
    assert os.stat(scope_dir).st_uid == 0 and os.stat(delegated).st_uid == uid_of(MALLORY)
    agent = Agent(policy=impostor_policy(f"{os.path.dirname(cgroup)}/libpod-*", fake_id))
    assert_impostor_unverified(agent, target, fake_id, cgroup)


run_tests()

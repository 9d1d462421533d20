#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""deploy/kubernetes and packaging/container: the manifests hold together, the image builds from the
project's .deb, and the DaemonSet's own pod template, run with `podman kube play`, serves the node.

No cluster is reachable from the test machines, and kubectl's client-side dry run is no help without
one: it asks the API server for its resource types first ("unable to recognize ...: Get
http://localhost:8080/api ... connection refused", Debian 12's kubectl 1.20 and later ones alike). So
the manifests are checked here at the level of their YAML (and built with `kubectl kustomize`, which
needs no server, where a kubectl is installed), and the pod template is run as a Pod by podman.

The pod template is taken from daemonset.yaml each time, so what runs here is what a cluster would
run. What podman 4.3 (Debian 12's) does not do as the kubelet does is stood in for, each where it
is made, and nothing else is changed: hostPID (podman 4.3 ignores it, later ones read it: the
containers' pid namespace is the host's through containers.conf instead), a ConfigMap key mounted
with subPath (podman mounts the whole volume: the key is given as a hostPath file, as the kubelet's
bind of the file is), the restart policy (podman restarts an init container under Always, then
fails removing it: the Pod says OnFailure), the node's directories (temporary ones), and the network
(none, as the NetworkPolicy would have it: the agent needs none).

The image is cached by build-image.sh (its base in /var/cache/dsagent-tests, the image in podman's
storage until the .deb or the Containerfile changes); the pod is removed at the end.
"""
import copy
import glob
import grp
import json
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time

try:
    import yaml
except ImportError:
    # Debian's python3-yaml (scripts/install-deps.sh), for a python3 on PATH that is not Debian's own
    sys.path.append("/usr/lib/python3/dist-packages")
    import yaml

from tap import BUILD, SOURCE, run, run_tests, test

sys.path.insert(0, os.path.join(SOURCE, "tests/integration"))
sys.path.insert(0, os.path.join(SOURCE, "tests/containers"))
import harness  # noqa: E402
from harness import ALICE, MALLORY, OPS, SVC, as_user, uid_of  # noqa: E402
import podman as podman_helpers  # noqa: E402  (tests/containers: how podman runs on these machines)

DEPLOY = os.path.join(SOURCE, "deploy/kubernetes")
CONTAINERFILE = os.path.join(SOURCE, "packaging/container/Containerfile")
BUILD_IMAGE = os.path.join(SOURCE, "packaging/container/build-image.sh")
UNIT = os.path.join(SOURCE, "units/dsagent.service.in")
DSAGENT = os.path.join(BUILD, "agent", "dsagent")
DSCTL = os.path.join(BUILD, "client", "dsctl")
SOCKET_GROUP = "dsagent"  # the node group the DaemonSet's --listen-group names
REQUEST_MESSAGE_ID = "27ade2ec85a54471a176f947b0ec018e"
POLICY_MESSAGE_ID = "29cd34f17b474bad9ed538319addd224"
# linux/capability.h
CAPS = ["CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETPCAP",
        "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
        "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE",
        "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP",
        "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF",
        "CHECKPOINT_RESTORE"]

work = tempfile.mkdtemp(prefix="dsagent-kube-", dir="/var/tmp")
os.chmod(work, 0o755)  # the test users reach the socket and the dumps under it
state = {}


def manifests():
    """Every document of deploy/kubernetes/*.yaml but the kustomization, by kind."""
    out = {}
    for path in sorted(glob.glob(os.path.join(DEPLOY, "*.yaml"))):
        if os.path.basename(path) == "kustomization.yaml":
            continue
        docs = [d for d in yaml.safe_load_all(open(path)) if d is not None]
        assert len(docs) == 1, f"{path}: one document a file, {len(docs)} here"
        assert docs[0]["kind"] not in out, f"{path}: a second {docs[0]['kind']}"
        out[docs[0]["kind"]] = docs[0]
    return out


def entrypoint():
    lines = [line for line in open(CONTAINERFILE) if line.startswith("ENTRYPOINT ")]
    assert len(lines) == 1, lines
    return json.loads(lines[0][len("ENTRYPOINT "):])


def option(argv, name):
    assert argv.count(name) == 1, (name, argv)
    return argv[argv.index(name) + 1]


def cap_mask(names):
    return sum(1 << CAPS.index(name) for name in names)


def podman(*args, conf="plain", check=True, timeout=300):
    """podman @args; @timeout: a bound against a hang (kube play starts a pod in seconds)."""
    argv = ["podman", *podman_helpers.GLOBAL_ARGS, *args]
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout, env=dict(os.environ, CONTAINERS_CONF=state["conf"][conf]))
    if check:
        assert r.returncode == 0, f"{' '.join(argv)}: exit {r.returncode}: {r.stderr.strip()}"
    return r


def status_of(pid):
    return dict(line.split(":\t", 1) for line in open(f"/proc/{pid}/status").read().splitlines() if ":\t" in line)


def dsctl(user, *args, timeout=60):
    """dsctl from the node, as @user, to the agent in the pod; returns (result, dsctl's pid). @timeout: a bound
    against a hang, twice the agent's own deadline for a reply (30 s), as harness.dsctl's."""
    p = subprocess.Popen(as_user(user, [DSCTL, "--socket", state["socket"], *args]), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=timeout)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err), p.pid


def audit_records(message_id=REQUEST_MESSAGE_ID):
    """The agent's records from `podman logs`: JSON objects, one a line, on its stdout (--audit json)."""
    r = podman("logs", state["container"])
    records = []
    for line in r.stdout.splitlines():
        if not line.strip():
            continue
        record = json.loads(line)  # nothing else is on its stdout
        assert isinstance(record, dict), line
        if record.get("MESSAGE_ID") == message_id:
            records.append(record)
    return records


@test
def manifests_hold_together():
    m = manifests()
    assert set(m) == {"Namespace", "ServiceAccount", "ConfigMap", "DaemonSet", "NetworkPolicy"}, sorted(m)
    kustomization = yaml.safe_load(open(os.path.join(DEPLOY, "kustomization.yaml")))
    listed = sorted(kustomization["resources"])
    assert listed == sorted(os.path.basename(p) for p in glob.glob(os.path.join(DEPLOY, "*.yaml"))
                            if not p.endswith("/kustomization.yaml")), listed
    namespace = m["Namespace"]["metadata"]["name"]
    assert m["Namespace"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    for kind in ("ServiceAccount", "ConfigMap", "DaemonSet", "NetworkPolicy"):
        assert m[kind]["metadata"]["namespace"] == namespace, kind
    assert m["ServiceAccount"]["automountServiceAccountToken"] is False
    # no traffic either way: both kinds named, no rule given
    net = m["NetworkPolicy"]["spec"]
    assert sorted(net["policyTypes"]) == ["Egress", "Ingress"] and "ingress" not in net and "egress" not in net, net

    ds = m["DaemonSet"]
    assert ds["apiVersion"] == "apps/v1"
    template = ds["spec"]["template"]
    labels = template["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in ds["spec"]["selector"]["matchLabels"].items()), labels
    assert all(labels.get(k) == v for k, v in net["podSelector"]["matchLabels"].items()), net
    spec = template["spec"]
    assert spec["hostPID"] is True and spec.get("hostNetwork", False) is False
    assert spec["automountServiceAccountToken"] is False
    assert spec["serviceAccountName"] == m["ServiceAccount"]["metadata"]["name"]
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["priorityClassName"] == "system-node-critical"
    # AppArmor said explicitly, not left to the node: the runtime's default for the init container, and
    # the agent unconfined (the default profile forbids reading other profiles' /proc/PID: the manifest says why)
    assert spec["securityContext"]["appArmorProfile"] == {"type": "RuntimeDefault"}
    volumes = {v["name"]: v for v in spec["volumes"]}
    (agent,) = spec["containers"]
    for c in spec["containers"] + spec.get("initContainers", []):
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True, c["name"]
        assert sc["capabilities"]["drop"] == ["ALL"], c["name"]
        if c not in spec["containers"]:  # the init container: chgrp of /run/dsagent, nothing more
            assert sc["capabilities"].get("add", []) in ([], ["CHOWN"]), (c["name"], sc["capabilities"])
        assert c["resources"]["limits"]["memory"] and c["resources"]["limits"]["cpu"], c["name"]
        for mount in c["volumeMounts"]:
            assert mount["name"] in volumes, (c["name"], mount)
        # the image this version's packages make (build-image.sh tags it so)
        version = re.search(r"version\s*:\s*'([^']+)'", open(os.path.join(SOURCE, "meson.build")).read()).group(1)
        assert c["image"] == f"dsagent:{version}", (c["name"], c["image"], version)
    sc = agent["securityContext"]
    assert sc["runAsUser"] == 0 and sc.get("privileged", False) is False
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert sc["appArmorProfile"] == {"type": "Unconfined"}
    # the capabilities of the unit, no more and no fewer
    unit = re.search(r"^CapabilityBoundingSet=(.*)$", open(UNIT).read(), re.M).group(1).split()
    assert sorted("CAP_" + c for c in sc["capabilities"]["add"]) == sorted(unit), (sc["capabilities"], unit)
    assert "command" not in agent, "the image's entry point is what runs"
    # the socket is a gate of its own: 0660, the node's group SOCKET_GROUP
    assert agent["args"] == ["--listen-mode", "0660", "--listen-group", SOCKET_GROUP], agent["args"]
    # both probes ask the agent itself, with dsctl as root in its container
    for probe in ("livenessProbe", "readinessProbe"):
        assert agent[probe]["exec"]["command"] == ["/usr/bin/dsctl", "dumps"], agent[probe]
        assert agent[probe]["timeoutSeconds"] >= 5 and agent[probe]["periodSeconds"] >= 10, agent[probe]

    # the image's entry point and the pod agree on the paths
    argv = entrypoint()
    assert argv[0] == "/usr/sbin/dsagent" and option(argv, "--audit") == "json", argv
    mounts = {mt["mountPath"]: mt for mt in agent["volumeMounts"]}
    run_mount = mounts[os.path.dirname(option(argv, "--listen"))]
    assert volumes[run_mount["name"]]["hostPath"] == {"path": "/run/dsagent", "type": "DirectoryOrCreate"}
    policy = mounts[option(argv, "--policy")]
    config_map = volumes[policy["name"]]["configMap"]
    assert config_map["name"] == m["ConfigMap"]["metadata"]["name"] and policy["subPath"] in m["ConfigMap"]["data"]
    dump_dir = re.search(r'^dump_dir = "(.*)"$', m["ConfigMap"]["data"][policy["subPath"]], re.M).group(1)
    state_mount = mounts[os.path.dirname(dump_dir)]
    assert volumes[state_mount["name"]]["hostPath"]["path"] == os.path.dirname(dump_dir), dump_dir
    for path in ("/etc/passwd", "/etc/group"):
        assert mounts[path]["readOnly"] is True and volumes[mounts[path]["name"]]["hostPath"]["path"] == path

    # The sample policy is one the agent takes (the checker wants the file root's, not writable by others).
    sample = os.path.join(work, "sample-policy.toml")
    with open(sample, "w") as f:
        f.write(m["ConfigMap"]["data"][policy["subPath"]])
    os.chmod(sample, 0o644)
    r = run([DSAGENT, "--check-policy", sample], check=False)
    assert r.returncode == 0 and ": OK, 0 rules in 1 file" in r.stdout, r.stdout

    kubectl = shutil.which("kubectl")
    if kubectl:
        r = run([kubectl, "kustomize", DEPLOY], env=dict(os.environ, KUBECONFIG="/dev/null"))
        kinds = [d["kind"] for d in yaml.safe_load_all(r.stdout)]
        assert sorted(kinds) == sorted(m), kinds
    else:
        print("# no kubectl: kustomize not run")


@test
def image_builds_from_the_deb():
    state["conf"] = {}
    for name, extra in (("plain", ""), ("host-pid", 'pidns = "host"\n')):
        path = os.path.join(work, f"containers-{name}.conf")
        with open(path, "w") as f:
            f.write(podman_helpers.CONTAINERS_CONF + extra)
        state["conf"][name] = path
    started = time.monotonic()
    # 900 s: a bound against a hang; the build takes a minute or two, from the tests' cache
    r = subprocess.run([BUILD_IMAGE], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=900,
                       env=dict(os.environ, CONTAINERS_CONF=state["conf"]["plain"],
                                PODMAN_GLOBAL_ARGS=" ".join(podman_helpers.GLOBAL_ARGS)))
    for line in r.stderr.splitlines():
        print(f"# {line}")
    assert r.returncode == 0, r.stderr[-4000:]
    print(f"# build-image.sh took {time.monotonic() - started:.0f} s")
    state["image"] = r.stdout.strip().splitlines()[-1]
    inspected = json.loads(podman("image", "inspect", state["image"]).stdout)[0]
    assert inspected["Config"]["Entrypoint"] == entrypoint(), inspected["Config"]["Entrypoint"]
    # the agent of this very source tree
    version = podman("run", "--rm", "--network", "none", state["image"], "--version").stdout.strip()
    built = run([DSAGENT, "--version"]).stdout.strip()
    assert version == built, (version, built)


def pod_for_test():
    """The DaemonSet's pod template as a Pod for podman 4.3, with the stand-ins the docstring lists."""
    m = manifests()
    template = copy.deepcopy(m["DaemonSet"]["spec"]["template"])
    spec = template["spec"]
    name = f"dsagent-kt-{os.getpid()}"
    for c in spec["containers"] + spec.get("initContainers", []):
        c["image"] = state["image"]
    spec["restartPolicy"] = "OnFailure"
    node = {"/run/dsagent": os.path.join(work, "node/run/dsagent"),
            "/var/lib/dsagent": os.path.join(work, "node/var/lib/dsagent")}
    os.makedirs(os.path.join(work, "node/run"), mode=0o755)
    os.makedirs(os.path.join(work, "node/var/lib"), mode=0o755)
    for v in spec["volumes"]:
        if "hostPath" in v and v["hostPath"]["path"] in node:
            v["hostPath"]["path"] = node[v["hostPath"]["path"]]
        elif "configMap" in v:
            assert v["configMap"]["name"] == m["ConfigMap"]["metadata"]["name"], v
            data = m["ConfigMap"]["data"]
            # the key mounted with subPath, as the kubelet binds it: a regular file, root's, mode 0644
            (mount,) = [mt for mt in spec["containers"][0]["volumeMounts"] if mt["name"] == v["name"]]
            path = os.path.join(work, "configmap", mount["subPath"])
            os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
            with open(path, "w") as f:
                f.write(data[mount["subPath"]] + state["extra_policy"])
            os.chmod(path, v["configMap"].get("defaultMode", 0o644))
            del v["configMap"]
            v["hostPath"] = {"path": path, "type": "File"}
            del mount["subPath"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": template["metadata"]["labels"]},
           "spec": spec}
    return name, node, pod


@test
def the_pod_template_runs_under_podman_kube_play():
    # the test's own rule, after the sample's: ALICE may list and read the info of SVC's processes and take
    # their mini dumps; nothing for MALLORY
    # the node's accounts the rule names, as the integration tests make them
    for user in (SVC, ALICE, MALLORY):
        harness.ensure_user(user)
    harness.ensure_group(OPS, [ALICE])
    # The node's socket group: ALICE and MALLORY in it (the policy decides for them), SVC not (the socket's
    # mode keeps it out). Made here when the node has none, and undone at the end.
    try:
        grp.getgrnam(SOCKET_GROUP)
    except KeyError:
        subprocess.run(["groupadd", "--system", SOCKET_GROUP], check=True)
        state["made_group"] = True
    for user in (ALICE, MALLORY):
        if user not in grp.getgrnam(SOCKET_GROUP).gr_mem:
            subprocess.run(["gpasswd", "--add", user, SOCKET_GROUP], check=True, stdout=subprocess.DEVNULL)
            state.setdefault("added_members", []).append(user)
    assert SVC not in grp.getgrnam(SOCKET_GROUP).gr_mem and grp.getgrnam(SOCKET_GROUP).gr_gid != \
        pwd.getpwnam(SVC).pw_gid, "the test needs a user outside the socket's group"
    state["extra_policy"] = f"""
[[rule]]
name = "kube-test"
users = ["{ALICE}"]
commands = ["ps", "info", "dump"]
targets.users = ["{SVC}"]
dump_types = ["mini"]
"""
    name, node, pod = pod_for_test()
    pod_yaml = os.path.join(work, "pod.yaml")
    with open(pod_yaml, "w") as f:
        yaml.safe_dump(pod, f)
    # hostPID: podman 4.3 ignores it; the same through containers.conf
    assert pod["spec"]["hostPID"] is True
    state["pod"] = name
    state["container"] = f"{name}-{pod['spec']['containers'][0]['name']}"
    state["node"] = node
    state["socket"] = os.path.join(node["/run/dsagent"], "dsagent.sock")
    started = time.monotonic()
    r = podman("kube", "play", "--network", "none", pod_yaml, conf="host-pid", check=False)
    assert r.returncode == 0, f"podman kube play: exit {r.returncode}: {r.stderr.strip()}"

    def up():
        if os.path.exists(state["socket"]):
            return True
        s = podman("inspect", "--format", "{{.State.Status}}", state["container"], check=False).stdout.strip()
        said = podman("logs", state["container"], check=False)
        assert s in ("created", "configured", "running", "initialized"), (s, said.stdout, said.stderr)
        return False
    # the init container, then the agent, which listens at once: seconds, tens on a loaded machine's podman; a
    # container that stopped is seen at once (above)
    harness.wait_for(up, timeout=120, what="the agent's socket on the node")
    print(f"# the pod served after {time.monotonic() - started:.1f} s")
    st = os.stat(state["socket"])
    assert stat.S_ISSOCK(st.st_mode) and st.st_uid == 0, st
    # the gate the manifest asks for: 0660, the node's group
    assert stat.S_IMODE(st.st_mode) == 0o660 and st.st_gid == grp.getgrnam(SOCKET_GROUP).gr_gid, st
    # the init container made the node's directories as the unit and the package make them, /run/dsagent
    # also of the socket's group and set-group-id: the socket is born in that group, the agent has no CHOWN
    for path, mode, gid in ((node["/run/dsagent"], 0o2711, grp.getgrnam(SOCKET_GROUP).gr_gid),
                            (node["/var/lib/dsagent"], 0o711, 0)):
        st = os.stat(path)
        assert stat.S_IMODE(st.st_mode) == mode and st.st_uid == 0 and st.st_gid == gid, (path, oct(st.st_mode), st)
    state["agent_pid"] = int(podman("inspect", "--format", "{{.State.Pid}}", state["container"]).stdout)
    policy = harness.wait_for(lambda: audit_records(POLICY_MESSAGE_ID), what="the policy record")
    assert policy[-1]["DSAGENT_POLICY_LOADED"] == "yes" and policy[-1]["DSAGENT_POLICY_RULES"] == "1", policy


@test
def the_agent_runs_as_the_manifest_asks():
    pid = state["agent_pid"]
    (agent,) = manifests()["DaemonSet"]["spec"]["template"]["spec"]["containers"]
    argv = open(f"/proc/{pid}/cmdline").read().split("\0")[:-1]
    assert argv == entrypoint() + agent["args"], argv
    # the node's pid namespace: hostPID
    assert os.readlink(f"/proc/{pid}/ns/pid") == os.readlink("/proc/self/ns/pid")
    want = cap_mask(agent["securityContext"]["capabilities"]["add"])
    # what the agent keeps to use: SETUID and SETGID (the pod's, for starting the egress process as its own user)
    # stay in the bounding set alone
    kept = cap_mask(["DAC_OVERRIDE", "SYS_PTRACE"])
    # a job, so that the agent has workers (it starts them as work comes)
    r, _ = dsctl("root", "--json", "ps")
    assert r.returncode == 0, r
    children = [int(c) for t in os.listdir(f"/proc/{pid}/task")
                for c in open(f"/proc/{pid}/task/{t}/children").read().split()]
    # the PAM helper, forked before the agent's sandbox, with no capability it may use: none effective or
    # permitted (its bounding set keeps the pod's two: cutting it needs CAP_SETPCAP, which the pod does not give;
    # before 2026-11-29 its sandbox failed for that, it died at its start, and its zombie, still holding the
    # pod's capabilities, stood in this list for a worker)
    pam = [c for c in children if int(status_of(c)["CapEff"], 16) == 0]
    workers = [c for c in children if c not in pam]
    assert len(pam) == 1 and workers, [(c, status_of(c).get("State"), status_of(c)["CapEff"]) for c in children]
    h = status_of(pam[0])
    assert h["State"][0] in "SR" and int(h["CapPrm"], 16) == 0 and int(h["CapBnd"], 16) == want, h
    assert int(h["CapAmb"], 16) == 0 and int(h["CapInh"], 16) == 0 and h["NoNewPrivs"] == "1", h
    assert h["Seccomp"] == "2" and int(h["Seccomp_filters"]) >= 2, h  # the runtime's filter and its own
    # the agent and its workers: exactly the two effective and permitted, the pod's bounding, and root
    for p in [pid] + workers:
        s = status_of(p)
        assert s["State"][0] in "SR", (p, s["State"])  # a live process, not a zombie's leftover credentials
        for field, mask in (("CapEff", kept), ("CapPrm", kept), ("CapBnd", want)):
            assert int(s[field], 16) == mask, (p, s.get("Name"), field, s[field], hex(mask))
        assert int(s["CapAmb"], 16) == 0 and int(s["CapInh"], 16) == 0, (p, s)
        assert s["Uid"].split() == ["0"] * 4, (p, s["Uid"])
        assert s["NoNewPrivs"] == "1", p
        # the runtime's filter, and on the agent its own too
        assert s["Seccomp"] == "2" and int(s["Seccomp_filters"]) >= (2 if p == pid else 1), (p, s["Seccomp_filters"])
    # a read-only root, the node's directories writable
    mounts = {fields[4]: fields[5].split(",") for fields in
              (line.split() for line in open(f"/proc/{pid}/mountinfo"))}
    assert "ro" in mounts["/"], mounts["/"]
    assert "rw" in mounts["/run/dsagent"] and "rw" in mounts["/var/lib/dsagent"], mounts
    for path in ("/etc/dsagent/policy.toml", "/etc/passwd", "/etc/group"):
        assert "ro" in mounts[path], (path, mounts[path])
    limits = podman("inspect", "--format", "{{.HostConfig.Memory}}", state["container"]).stdout.strip()
    assert int(limits) == 256 * 1024 * 1024, limits


@test
def dsctl_on_the_node_reaches_a_dotnet_app_on_the_node():
    target = harness.Target(SVC)
    state["target"] = target
    # root: every process, as the built-in policy says
    r, _ = dsctl("root", "--json", "ps")
    assert r.returncode == 0, r
    assert target.pid in {p["pid"] for p in json.loads(r.stdout)}, r.stdout
    r, _ = dsctl("root", "--json", "info", str(target.pid))
    assert r.returncode == 0, r
    info = json.loads(r.stdout)
    assert "DsTestTarget" in json.dumps(info), info
    # dsctl in the agent's own container, as `kubectl exec` runs it: root there, the agent's socket by default
    r = podman("exec", state["container"], "dsctl", "--json", "ps")
    assert target.pid in {p["pid"] for p in json.loads(r.stdout)}, r.stdout
    # ALICE, by the rule naming her and SVC by name: the node's accounts, as the pod reads them
    r, alice_pid = dsctl(ALICE, "--json", "ps")
    assert r.returncode == 0, r
    # SVC's processes and her own, no one else's (another test's SVC process on the node may be listed too, and
    # a process of hers that a test run beside this one started: hers, so hers to see)
    listed = json.loads(r.stdout)
    assert target.pid in {p["pid"] for p in listed} and \
        {p["uid"] for p in listed} <= {target.uid, harness.uid_of(ALICE)}, r.stdout
    state["alice_ps_pid"] = alice_pid
    r, _ = dsctl(ALICE, "info", str(target.pid))
    assert r.returncode == 0 and "DsTestTarget" in r.stdout, r
    # SVC, outside the socket's group: the kernel refuses the connect, the agent's parser never sees it
    r, _ = dsctl(SVC, "ps")
    assert r.returncode == harness.EXIT_AGENT_UNREACHABLE and "ermission denied" in r.stderr, r
    # MALLORY: nothing, not even that the process exists
    r, _ = dsctl(MALLORY, "--json", "ps")
    assert r.returncode == 0 and json.loads(r.stdout) == [], r
    r, _ = dsctl(MALLORY, "info", str(target.pid))
    assert r.returncode == harness.EXIT_NO_SUCH_PROCESS, r
    # a dump, published in the node's directory, readable by ALICE alone
    r, _ = dsctl(ALICE, "dump", str(target.pid), "--type", "mini", timeout=harness.DUMP_BOUND)
    assert r.returncode == 0, r
    stored = re.search(r"stored at (/var/lib/dsagent/dumps/\S+)", r.stdout).group(1)
    on_node = os.path.join(state["node"]["/var/lib/dsagent"], os.path.relpath(stored, "/var/lib/dsagent"))
    with open(on_node, "rb") as f:
        assert f.read(4) == b"\x7fELF", on_node
    read = lambda user: subprocess.run(as_user(user, ["head", "-c", "4", on_node]), stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL).returncode == 0
    assert read(ALICE) and not read(MALLORY), on_node


@test
def the_probes_pass_against_the_running_agent():
    (agent,) = manifests()["DaemonSet"]["spec"]["template"]["spec"]["containers"]
    for probe in ("livenessProbe", "readinessProbe"):
        # as the kubelet runs an exec probe: the command in the container, exit 0 is healthy
        # the probe's own bound, as the kubelet keeps it, and 30 s for podman exec's start
        r = podman("exec", state["container"], *agent[probe]["exec"]["command"], check=False,
                   timeout=agent[probe]["timeoutSeconds"] + 30)
        assert r.returncode == 0, (probe, r.returncode, r.stdout, r.stderr)
        # and it fails where the agent does not answer: the same command at a socket nobody serves
        r = podman("exec", "--env", "DSAGENT_SOCKET=/run/dsagent/none.sock", state["container"],
                   *agent[probe]["exec"]["command"], check=False)
        assert r.returncode != 0, (probe, r.stdout)


@test
def audit_records_are_json_lines_in_the_pods_log():
    target = state["target"]
    records = harness.wait_for(lambda: (lambda rs: rs if len(rs) >= 8 else None)(audit_records()),
                               what="the requests' records")
    by = {}
    for rec in records:
        by.setdefault((rec.get("DSAGENT_CLIENT_USER"), rec.get("DSAGENT_COMMAND")), []).append(rec)
    (ps,) = by[(ALICE, "ps")]
    # who asked, as the kernel says: ALICE's uid and the pid of her dsctl on the node
    assert ps["DSAGENT_CLIENT_UID"] == str(uid_of(ALICE)), ps
    assert ps["DSAGENT_CLIENT_PID"] == str(state["alice_ps_pid"]), (ps, state["alice_ps_pid"])
    assert ps["DSAGENT_DECISION"] == "allowed", ps
    (info,) = by[(ALICE, "info")]
    assert info["DSAGENT_RULE"] == "kube-test" and info["DSAGENT_DECISION"] == "allowed", info
    assert info["DSAGENT_TARGET_PID"] == str(target.pid) and info["DSAGENT_TARGET_USER"] == SVC, info
    (dump,) = by[(ALICE, "dump")]
    assert dump["DSAGENT_DECISION"] == "allowed", dump
    (denied,) = by[(MALLORY, "info")]
    assert denied["DSAGENT_DECISION"] == "denied", denied
    assert [r["DSAGENT_DECISION"] for r in by[("root", "info")]] == ["allowed"], by[("root", "info")]
    # root's ps from the node (the first to start the agent's workers, then the app's) and from inside the
    # container (kubectl exec)
    assert [r["DSAGENT_CLIENT_UID"] for r in by[("root", "ps")]] == ["0", "0", "0"], by[("root", "ps")]
    # the probes' requests: root's dumps, answered
    assert by[("root", "dumps")] and all(r["DSAGENT_DECISION"] == "allowed" for r in by[("root", "dumps")])
    # SVC was refused by the socket's mode: the agent never heard of it
    assert not [r for r in records if r.get("DSAGENT_CLIENT_UID") == str(uid_of(SVC))]


def cleanup():
    harness.scope.close()  # the target app
    for user in state.get("added_members", []):
        subprocess.run(["gpasswd", "--delete", user, SOCKET_GROUP], stdout=subprocess.DEVNULL, check=False)
    if state.get("made_group"):
        subprocess.run(["groupdel", SOCKET_GROUP], check=False)
    if "pod" in state:
        podman("pod", "rm", "--force", "--time", "0", "--ignore", state["pod"], check=False)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        run_tests(needs_root=True, chained=True)
    finally:
        cleanup()

#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""S3 egress under the real unit: the shipped dsagent.service has no network, the shipped drop-in gives it one.

A system is booted (booted.py) in network and mount namespaces of its own, and a real S3 store (radosgw.sh: a Ceph
mon, osd and radosgw) is started in that system's network namespace, on its loopback, so that it is reachable from
the booted system's own network and from nowhere else (the host's network is never touched). dsagent is installed
with `meson install` and runs under its units as usual; the policy names the store in [egress.central] and a rule
sends alice's dumps of a real .NET app there.

First with the shipped unit alone (PrivateNetwork=yes, IPAddressDeny=any, RestrictAddressFamilies=AF_UNIX): the
egress process starts, the dump is answered and kept, and its upload fails with a record that says the store was
unreachable. Then with units/dsagent.service.d/egress.conf.example installed as the operator's page says (the store's
address filled in, the keys given by LoadCredential= from a root-only file, the policy's credentials
"systemd:central"): the same request's dump lands in the store, read back by boto3 with the local file's sha256.
The egress process is the agent's child in the unit's cgroup, and `systemctl stop dsagent` leaves none behind.
"""
import json
import os
import subprocess
import sys

from booted import (BUILD, SOURCE, Machine, RUNTIME_BOUND, install_agent, policy_dir, run_tests, start_target,
                    target_app, test, wait_for)

sys.path.insert(0, os.path.join(SOURCE, "tests/integration"))
import radosgw  # noqa: E402

SVC, ALICE = "dst-svc", "dst-alice"
TARGET_UNIT = "dst-egress-target.service"
EGRESS_MESSAGE_ID = "69c19926015d41838f93007ed7cc398e"
DROP_IN = os.path.join(SOURCE, "units/dsagent.service.d/egress.conf.example")
DROP_IN_AT = "/etc/systemd/system/dsagent.service.d/egress.conf"
KEYS_AT = "/etc/dsagent/egress/central.keys"
# an upload to a store that answers: a small dump over loopback takes well under a second; an unreachable store's
# two attempts wait one backoff (at most 1 s) between them. This bound only ends a wait that would never end, on a
# loaded machine.
UPLOAD_BOUND = 120.0

state = {}


class StoreInMachine(radosgw.Radosgw):
    """radosgw.sh run in the booted system's network namespace (the host's mount namespace: its files stay on the
    host), so the store's 127.0.0.1 is the booted system's loopback."""

    def __init__(self, machine):
        super().__init__()
        self.enter = ["nsenter", f"--net=/proc/{machine.pid1}/ns/net"]

    def start(self):
        real_run = subprocess.run
        try:
            subprocess.run = lambda argv, **kw: real_run(self.enter + list(argv), **kw)
            return super().start()
        finally:
            subprocess.run = real_run

    def _run(self, command, timeout):
        result = subprocess.run(self.enter + [radosgw.SCRIPT, command, self.dir], capture_output=True, text=True,
                                timeout=timeout)
        if result.returncode != 0:
            raise RuntimeError(f"radosgw.sh {command} failed ({result.returncode}): {result.stderr.strip()}")

    def sha256_of(self, key):
        """boto3, run in the store's network namespace (this process is not in it)."""
        script = ("import os, sys; sys.path.insert(0, os.environ['RGW_PY']); import radosgw\n"
                  "gw = radosgw.Radosgw(); gw.endpoint, gw.access_key, gw.secret_key = "
                  "os.environ['RGW_ENDPOINT'], os.environ['RGW_ACCESS'], os.environ['RGW_SECRET']\n"
                  "print(gw.sha256_of(sys.argv[1]))\n")
        env = dict(os.environ, RGW_PY=os.path.dirname(radosgw.__file__), RGW_ENDPOINT=self.endpoint,
                   RGW_ACCESS=self.access_key, RGW_SECRET=self.secret_key)
        r = subprocess.run(self.enter + [sys.executable, "-c", script, key], env=env, capture_output=True, text=True,
                           timeout=RUNTIME_BOUND)
        assert r.returncode == 0, r
        return r.stdout.strip()


class MachineWithStore(Machine):
    def __enter__(self):
        super().__enter__()
        try:
            self.store = StoreInMachine(self).start()
            print(f"# radosgw started in {self.store.start_seconds:.1f} s at {self.store.endpoint} "
                  "(the booted system's loopback)", flush=True)
        except BaseException:
            # an interrupt too (^C in the store's start): the booted system must not outlive the test
            super().__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        try:
            if getattr(self, "store", None):
                self.store.stop()
        finally:
            return super().__exit__(*exc)


def policy(m, credentials):
    gw = m.store
    return f"""
[egress.central]
endpoint = "{gw.endpoint}"
bucket = "{gw.bucket}"
region = "{gw.region}"
prefix = "booted/"
credentials = "{credentials}"
# two tries: the unreachable case's record comes after one backoff instead of four
attempts = 2
# no hand-over again: the unreachable case's outcome is its first failure (test_egress_retry.py has the retries)
retries = 0

[[rule]]
name = "alice-dumps-to-the-store"
users = ["{ALICE}"]
commands = ["info", "dump"]
targets.units = ["{TARGET_UNIT}"]
dump_types = ["mini"]
egress = "central"
"""


def restart_agent(m):
    m.run(["systemctl", "daemon-reload"])
    m.run(["systemctl", "restart", "dsagent.service"])
    wait_for(lambda: egress_process(m), what="the egress process to start")


def agent_pid(m):
    return int(m.show("dsagent.service", "MainPID")["MainPID"])


def egress_process(m):
    """The pid of the agent's child that runs dsagent-egress, or None."""
    pid = agent_pid(m)
    if pid <= 0:
        return None
    r = m.run(["pgrep", "--exact", "--parent", str(pid), "dsagent-egress"], check=False)
    return int(r.stdout.split()[0]) if r.returncode == 0 else None


def dump_and_outcome(m):
    r = m.run(["dsctl", "--json", "dump", state["pid"], "--type", "mini"], user=ALICE)
    path = json.loads(r.stdout)["path"]

    def outcome():
        return next((rec for rec in m.journal(f"MESSAGE_ID={EGRESS_MESSAGE_ID}", "DSAGENT_EGRESS_EVENT=outcome")
                     if rec.get("DSAGENT_DUMP_PATH") == path), None)
    return path, wait_for(outcome, timeout=UPLOAD_BOUND, what=f"the egress outcome of {path}")


def label_of(m, path):
    return m.run(["python3", "-c", "import os, sys; print(os.getxattr(sys.argv[1], 'user.dsagent.egress').decode())",
                  path]).stdout.strip()


def sha256_inside(m, path):
    return m.run(["sha256sum", path]).stdout.split()[0]


@test
def the_store_answers_in_the_booted_systems_network_alone(m):
    namespaces = {os.readlink(f"/proc/{pid}/ns/net") for pid in (m.pid1, os.getpid())}
    assert len(namespaces) == 2, namespaces
    port = m.store.endpoint.rsplit(":", 1)[1]
    assert f"127.0.0.1:{port}" in m.run(["ss", "-Htln", f"sport = :{port}"]).stdout
    install_agent(m, users=(SVC, ALICE))
    state["pid"] = str(start_target(m, TARGET_UNIT, SVC, target_app()))
    # the store's keys: root's, in a directory root alone may enter, as the operator's page says
    m.sh("install -d -m 0700 /etc/dsagent/egress")
    m.write(KEYS_AT, f'access_key_id = "{m.store.access_key}"\nsecret_access_key = "{m.store.secret_key}"\n',
            mode=0o600)


@test
def without_the_drop_in_the_upload_fails_and_the_dump_stays(m):
    # the shipped unit, untouched: the keys read from their file, since there is no LoadCredential=
    unit = m.show("dsagent.service", "PrivateNetwork", "RestrictAddressFamilies", "IPAddressDeny", "DropInPaths")
    assert unit["PrivateNetwork"] == "yes" and unit["RestrictAddressFamilies"] == "AF_UNIX", unit
    assert unit["DropInPaths"] == "", unit
    m.write(f"{policy_dir()}/policy.d/50-egress.toml", policy(m, f"file:{KEYS_AT}"))
    m.run(["systemctl", "start", "dsagent.socket"])
    restart_agent(m)
    path, out = dump_and_outcome(m)
    assert out["DSAGENT_EGRESS_RESULT"] == "unavailable", out
    assert out["DSAGENT_EGRESS_ATTEMPTS"] == "2", out
    # curl's words: nothing listens on the agent's own loopback, in its private network namespace
    print(f"# without the drop-in: {out['DSAGENT_EGRESS_ERROR']}")
    assert "connect" in out["DSAGENT_EGRESS_ERROR"].lower(), out
    assert out["_SYSTEMD_UNIT"] == "dsagent.service", out
    # and journalctl -x says what to do about it
    explained = m.run(["journalctl", "--no-pager", "-x", f"--cursor={out['__CURSOR']}", "-n", "1",
                       f"MESSAGE_ID={EGRESS_MESSAGE_ID}"]).stdout
    assert "the unit has no network" in " ".join(explained.replace("░░", "").split()), explained
    assert "dsagent.service.d/egress.conf" in explained, explained
    # the dump stays, labelled with the failure (as dsctl dumps shows it)
    assert m.run(["test", "-s", path], check=False).returncode == 0, path
    assert label_of(m, path) == "failed:central:unavailable", label_of(m, path)
    state["kept"] = path


@test
def with_the_drop_in_the_dump_lands_in_the_store(m):
    port = m.store.endpoint.rsplit(":", 1)[1]
    text = open(DROP_IN).read()
    assert "IPAddressAllow=STORE_ADDRESS" in text and "LoadCredential=NAME:/etc/dsagent/egress/NAME.keys" in text
    # filled in as the operator's page says: the store's address, the keys' name
    text = text.replace("STORE_ADDRESS", "127.0.0.1").replace("NAME", "central")
    m.write(DROP_IN_AT, text)
    m.write(f"{policy_dir()}/policy.d/50-egress.toml", policy(m, "systemd:central"))
    restart_agent(m)
    unit = m.show("dsagent.service", "PrivateNetwork", "RestrictAddressFamilies", "IPAddressDeny", "IPAddressAllow",
                  "DropInPaths")
    print(f"# with the drop-in: {unit}")
    # the dump whose upload failed stays as it was: a failed upload is not tried again at start (pending: ones are)
    kept = state["kept"]
    assert label_of(m, kept) == "failed:central:unavailable", label_of(m, kept)

    path, out = dump_and_outcome(m)
    assert out["DSAGENT_EGRESS_RESULT"] == "uploaded", out
    key = out["DSAGENT_EGRESS_KEY"]
    assert key.startswith("booted/") and f"-{state['pid']}-" in key, key
    local = sha256_inside(m, path)
    assert m.store.sha256_of(key) == local == out["DSAGENT_EGRESS_SHA256"], (key, local, out)
    # what made it: the drop-in, read by systemd (checked after the upload, so that a drop-in missing a line fails
    # on the upload itself)
    assert unit["PrivateNetwork"] == "no" and DROP_IN_AT in unit["DropInPaths"], unit
    assert unit["RestrictAddressFamilies"].split() == ["AF_INET", "AF_INET6", "AF_UNIX"], unit
    assert unit["IPAddressAllow"] == "127.0.0.1/32" and "0.0.0.0/0" in unit["IPAddressDeny"], unit
    # the secret is nowhere in the agent's records
    journal = m.run(["journalctl", "--no-pager", "-o", "export", "-u", "dsagent.service"]).stdout
    assert m.store.secret_key not in journal


@test
def the_drop_in_without_ip_address_allow_is_stopped_by_ip_address_deny(m):
    # IPAddressDeny=any of the shipped unit holds with the drop-in: without the store's address allowed, the
    # unit's BPF filter drops the egress process's packets, even to the loopback
    full = m.run(["cat", DROP_IN_AT]).stdout
    m.write(DROP_IN_AT, "\n".join(line for line in full.splitlines() if not line.startswith("IPAddressAllow=")))
    restart_agent(m)
    unit = m.show("dsagent.service", "PrivateNetwork", "IPAddressAllow", "IPAddressDeny")
    assert unit["PrivateNetwork"] == "no" and unit["IPAddressAllow"] == "", unit
    path, out = dump_and_outcome(m)
    print(f"# without IPAddressAllow=: {out['DSAGENT_EGRESS_RESULT']}: {out.get('DSAGENT_EGRESS_ERROR')}")
    assert out["DSAGENT_EGRESS_RESULT"] in ("unavailable", "timeout"), out
    assert label_of(m, path).startswith("failed:central:"), label_of(m, path)
    m.write(DROP_IN_AT, full)
    restart_agent(m)
    assert m.show("dsagent.service", "IPAddressAllow")["IPAddressAllow"] == "127.0.0.1/32"


@test
def the_egress_process_is_the_agents_child_in_its_cgroup_and_goes_with_it(m):
    agent, egress = agent_pid(m), egress_process(m)
    assert egress, "no egress process"
    cgroup = m.show("dsagent.service", "ControlGroup")["ControlGroup"]
    # the unified hierarchy's line (the host's v1 controllers are listed too, at their roots)
    own = [line for line in m.run(["cat", f"/proc/{egress}/cgroup"]).stdout.splitlines() if line.startswith("0::")]
    assert own == [f"0::{cgroup}"], (own, cgroup)
    parent = m.run(["ps", "-o", "ppid=", "-p", str(egress)]).stdout.strip()
    assert parent == str(agent), (parent, agent)
    # confined as outside a unit, except for the bounding set: without CAP_SETPCAP (the unit's bounding set has
    # only the agent's four) it cannot be cut; no_new_privs keeps any exec from using it
    status = dict(line.split(":\t", 1) for line in m.run(["cat", f"/proc/{egress}/status"]).stdout.splitlines()
                  if ":\t" in line)
    for cap in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert int(status[cap], 16) == 0, (cap, status[cap])
    assert status["NoNewPrivs"].strip() == "1" and status["Seccomp"].strip() == "2", status
    # and never as root: as dsagent-egress (units/dsagent.sysusers, made by the install), its group, no other
    uid, gid = (m.run(["id", option, "dsagent-egress"]).stdout.strip() for option in ("-u", "-g"))
    assert uid != "0" and gid != "0", (uid, gid)
    assert status["Uid"].split() == [uid] * 4 and status["Gid"].split() == [gid] * 4, (status["Uid"], status["Gid"])
    assert status["Groups"].split() == [], status["Groups"]
    # the agent took CAP_SETUID and CAP_SETGID (the unit's bounding set) to start it, and kept neither: its
    # effective and permitted sets are CAP_DAC_OVERRIDE (1) and CAP_SYS_PTRACE (19) alone
    agent_status = dict(line.split(":\t", 1) for line in m.run(["cat", f"/proc/{agent}/status"]).stdout.splitlines()
                        if ":\t" in line)
    for cap in ("CapPrm", "CapEff"):
        assert int(agent_status[cap], 16) == (1 << 1) | (1 << 19), (cap, agent_status[cap])
    # its own network namespace is the booted system's, not a private one
    assert m.run(["readlink", f"/proc/{egress}/ns/net"]).stdout == m.run(["readlink", "/proc/1/ns/net"]).stdout
    m.run(["systemctl", "stop", "dsagent.service"])
    left = m.run(["pgrep", "--exact", "dsagent-egress"], check=False)
    assert left.returncode == 1 and left.stdout == "", left
    assert m.run(["test", "-e", f"/proc/{egress}"], check=False).returncode != 0


if __name__ == "__main__":
    run_tests(lambda: MachineWithStore(name="dsagent-egress-unit", binds=[SOURCE, BUILD]))

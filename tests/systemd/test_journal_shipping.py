#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The audit trail leaves the node: systemd-journal-upload to a systemd-journal-remote on another machine.

Two systems are booted (booted.py), each in network and mount namespaces of its own: a node, where dsagent is
installed with `meson install` and runs under its units as usual, and a collector, joined to it only by a veth
pair. The collector runs Debian's systemd-journal-remote.socket/.service over HTTPS (a certificate from a CA the
test makes with openssl, --split-mode=host); the node runs systemd-journal-upload.service, which checks that
certificate against that CA. Real users ask dsctl for a real .NET app: one request allowed, one denied, one
failed, and a dump. Then, record by record, every dsagent record of the node's journal must be on the collector
(`journalctl -D`), with the same fields and the same values, all of them, not only the DSAGENT_ ones; and once
the collector has the catalog (installed as docs/journal-shipping.md says), `journalctl -D DIR -x` there must
explain each record with the very text the node's own `journalctl -x` shows. Before that, it must not: the
catalog is the collector's own, not something the records carry. (The node has it from `meson install`, whose
post-install script runs `journalctl --update-catalog`, units/post-install.sh, as the packages' triggers do; the
collector, another root, has not.) docs/journal-shipping.md is the setup an operator follows; this test follows it.
"""
import contextlib
import json
import os
import re
import subprocess
import tempfile

from booted import (BUILD, REQUEST_MESSAGE_ID, SOURCE, Machine, install_agent, policy_dir, run_tests, start_target,
                    target_app, test, wait_for)

SVC, ALICE, MALLORY = "dst-svc", "dst-alice", "dst-mallory"
TARGET_UNIT = "dst-shipping-target.service"
DUMP_MESSAGE_ID = "b44be14ffedf48ee806826f1d59bcc4e"
NO_SUCH_PID = "4194303"

# the veth pair between the two systems' network namespaces, and the collector's name as the node resolves it
NODE_ADDRESS, COLLECTOR_ADDRESS = "10.231.0.1", "10.231.0.2"
COLLECTOR_NAME = "collector.dsagent-shipping.test"
REMOTE_DIR = "/var/log/journal/remote"
CATALOG_DIR = "/usr/lib/systemd/catalog"   # systemd's own catalogdir (systemd.pc), where dsagent's package puts it

# fields a journal gives each entry where it is stored, not where it was written: the collector's cursor names its
# own file. Everything else must arrive as it left.
STORED_WHERE_READ = {"__CURSOR"}

state = {}


def make_certificates(directory):
    """A test CA, the collector's server certificate for COLLECTOR_NAME and the node's client certificate."""
    def openssl(*args):
        subprocess.run(["openssl", *args], check=True, cwd=directory, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)

    for ca in ("ca", "other-ca"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{ca}.key", "-out", f"{ca}.pem",
                "-days", "2", "-subj", f"/CN=dsagent shipping test {ca}")
    for name, usage in (("collector", "serverAuth"), ("node", "clientAuth")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                "-subj", f"/CN={name}.dsagent-shipping.test")
        with open(os.path.join(directory, f"{name}.ext"), "w") as f:
            f.write(f"subjectAltName=DNS:{name}.dsagent-shipping.test\nextendedKeyUsage={usage}\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext")
    return {f: open(os.path.join(directory, f)).read()
            for f in ("ca.pem", "other-ca.pem", "collector.key", "collector.pem", "node.key", "node.pem")}


@contextlib.contextmanager
def node_and_collector():
    """Both systems booted, joined by a veth pair; yields the node, with the collector as .collector."""
    with Machine(name="dsagent-shipping-node", binds=[SOURCE, BUILD]) as node, \
            Machine(name="dsagent-shipping-collector") as collector:
        # made from the node's namespace straight into the collector's: the host's own network is never touched
        subprocess.run(["nsenter", f"--target={node.pid1}", "--net", "ip", "link", "add", "shipping-up", "type",
                        "veth", "peer", "name", "shipping-in", "netns", f"/proc/{collector.pid1}/ns/net"],
                       check=True)
        node.sh(f"ip addr add {NODE_ADDRESS}/30 dev shipping-up; ip link set shipping-up up")
        collector.sh(f"ip addr add {COLLECTOR_ADDRESS}/30 dev shipping-in; ip link set shipping-in up")
        node.sh(f"echo '{COLLECTOR_ADDRESS} {COLLECTOR_NAME}' >>/etc/hosts")
        node.collector = collector
        yield node


def dsagent_records(journal):
    """The agent's records: every entry with a DSAGENT_ field."""
    return [r for r in journal if any(k.startswith("DSAGENT_") for k in r)]


def identity(record):
    """What names one entry on both sides: its boot, its two timestamps and its text."""
    return (record["_BOOT_ID"], record["__REALTIME_TIMESTAMP"], record["__MONOTONIC_TIMESTAMP"],
            str(record.get("MESSAGE")))


def collector_journal(collector, *args):
    out = collector.run(["journalctl", "--no-pager", "-D", REMOTE_DIR, "-o", "json", *args], check=False).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def explanation(machine, record, directory=None):
    """The catalog text journalctl -x shows under @record (read from its cursor on, in @directory or the local
    journal), the "░░ " margin taken off; "" if there is none."""
    where = ["-D", directory] if directory else []
    out = machine.run(["journalctl", "--no-pager", *where, "-x", "-o", "short", f"--cursor={record['__CURSOR']}",
                       f"MESSAGE_ID={record['MESSAGE_ID']}"]).stdout
    lines = []
    for line in out.splitlines():
        if line.startswith("░░"):
            lines.append(line[2:].strip())
        elif lines:
            break
    return "\n".join(lines)


def dsctl(m, user, *args):
    return m.run(["dsctl", *args], user=user, check=False)


@test
def the_collector_listens_over_https_in_its_own_network_namespace(m):
    c = m.collector
    # the booted systems are the host's root: what they run is what the host has installed
    for program in ("/lib/systemd/systemd-journal-remote", "/lib/systemd/systemd-journal-upload", "/usr/bin/openssl"):
        assert os.path.exists(program), f"{program} is missing: scripts/install-deps.sh installs it"
    # both sides' network namespaces differ from each other and from the host's
    namespaces = {os.readlink(f"/proc/{pid}/ns/net") for pid in (m.pid1, c.pid1, os.getpid())}
    assert len(namespaces) == 3, namespaces
    with tempfile.TemporaryDirectory(prefix="dsagent-shipping-certs-") as directory:
        state["certs"] = make_certificates(directory)
    certs = state["certs"]
    # the key readable by the service's user only (and root): journal-remote runs as systemd-journal-remote
    c.sh("install -d -m 0750 -g systemd-journal-remote /etc/journal-remote")
    c.write("/etc/journal-remote/journal-remote.key", certs["collector.key"], mode=0o640)
    c.run(["chgrp", "systemd-journal-remote", "/etc/journal-remote/journal-remote.key"])
    c.write("/etc/journal-remote/journal-remote.pem", certs["collector.pem"])
    c.write("/etc/systemd/journal-remote.conf.d/50-dsagent.conf", """[Remote]
SplitMode=host
ServerKeyFile=/etc/journal-remote/journal-remote.key
ServerCertificateFile=/etc/journal-remote/journal-remote.pem
""")
    # the shipped socket listens on 19532 on every address; the service is Debian's, unchanged (--listen-https=-3)
    c.run(["systemctl", "daemon-reload"])
    c.run(["systemctl", "start", "systemd-journal-remote.socket"])
    listening = c.run(["ss", "-Htln", "sport = :19532"]).stdout
    assert "19532" in listening, listening
    # and the node reaches it, through the veth pair only
    assert m.run(["ss", "-Htln", "sport = :19532"]).stdout == "", "the node listens itself: not two machines"


@test
def the_node_runs_dsagent_and_uploads_its_journal(m):
    install_agent(m, users=(SVC, ALICE, MALLORY))
    state["pid"] = str(start_target(m, TARGET_UNIT, SVC, target_app()))
    m.write(f"{policy_dir()}/policy.d/50-shipping.toml", f"""
[[rule]]
name = "alice-reads-the-target"
users = ["{ALICE}"]
commands = ["info", "dump"]
targets.units = ["{TARGET_UNIT}"]
dump_types = ["mini"]
""")
    m.run(["systemctl", "start", "dsagent.socket"])

    certs = state["certs"]
    # Debian runs the uploader as DynamicUser=yes, User=systemd-journal-upload; with a user of that name the unit
    # takes it, so that its key can be readable by that user alone (made as the machine makes its users: a uid no
    # host account gets, where a system uid was the very one the demo's service user got next on the host)
    m.add_user("systemd-journal-upload")
    m.sh("install -d -m 0750 -g systemd-journal-upload /etc/journal-upload")
    m.write("/etc/journal-upload/journal-upload.key", certs["node.key"], mode=0o640)
    m.run(["chgrp", "systemd-journal-upload", "/etc/journal-upload/journal-upload.key"])
    m.write("/etc/journal-upload/journal-upload.pem", certs["node.pem"])
    m.write("/etc/journal-upload/ca.pem", certs["ca.pem"])
    m.write("/etc/systemd/journal-upload.conf.d/50-dsagent.conf", f"""[Upload]
URL=https://{COLLECTOR_NAME}:19532
ServerKeyFile=/etc/journal-upload/journal-upload.key
ServerCertificateFile=/etc/journal-upload/journal-upload.pem
TrustedCertificateFile=/etc/journal-upload/ca.pem
""")
    m.run(["systemctl", "start", "systemd-journal-upload.service"])
    uploader = m.show("systemd-journal-upload.service", "MainPID")["MainPID"]
    # the unit is Type=simple: its main pid is systemd's fork until it execs the uploader, as its user
    wait_for(lambda: m.run(["readlink", f"/proc/{uploader}/exe"], check=False).stdout.strip().endswith(
        "/systemd-journal-upload"), what="the uploader's exec")
    # the system user of /etc/passwd, not a dynamic one of the same name (nss-systemd would show that name too)
    uid = m.run(["ps", "-o", "uid=", "-p", uploader]).stdout.split()
    system_user = m.run(["grep", "^systemd-journal-upload:", "/etc/passwd"]).stdout.split(":")
    assert uid == [system_user[2]], (uid, system_user)


@test
def real_users_get_decisions(m):
    pid = state["pid"]
    r = dsctl(m, ALICE, "info", pid)
    assert r.returncode == 0 and "DsTestTarget" in r.stdout, r
    # denied: answered as for a process that is not there (the target is invisible to mallory), recorded as denied
    r = dsctl(m, MALLORY, "info", pid)
    assert r.returncode != 0 and "no such process" in r.stderr, r
    r = dsctl(m, ALICE, "info", NO_SUCH_PID)
    assert r.returncode != 0 and "no such process" in r.stderr, r
    r = dsctl(m, ALICE, "dump", pid, "--type", "mini")
    assert r.returncode == 0 and "stored at /var/lib/dsagent/dumps/" in r.stdout, r
    decisions = {(rec["DSAGENT_CLIENT_USER"], rec["DSAGENT_DECISION"])
                 for rec in m.journal(f"MESSAGE_ID={REQUEST_MESSAGE_ID}")}
    assert {(ALICE, "allowed"), (MALLORY, "denied"), (ALICE, "failed")} <= decisions, decisions


@test
def every_record_arrives_on_the_collector_with_every_field(m):
    local = dsagent_records(m.journal())
    kinds = {r.get("DSAGENT_DECISION") for r in local if r.get("MESSAGE_ID") == REQUEST_MESSAGE_ID}
    assert {"allowed", "denied", "failed"} <= kinds, kinds
    assert DUMP_MESSAGE_ID in {r.get("MESSAGE_ID") for r in local}, "no dump record"
    state["local"] = local

    def all_arrived():
        remote = {identity(r): r for r in dsagent_records(collector_journal(m.collector))}
        return remote if all(identity(r) in remote for r in local) else None
    # journal-upload follows the journal and sends at once: a bound against a hang (HANG_BOUND)
    remote = wait_for(all_arrived, what="every dsagent record of the node on the collector")
    state["remote"] = remote
    compared = 0
    for record in local:
        arrived = remote[identity(record)]
        fields = {k for k in record if k.startswith("DSAGENT_")}
        lost = sorted(fields - set(arrived))
        assert not lost, f"{lost} lost on the way: {record['MESSAGE']}"
        changed = sorted(k for k in fields if arrived[k] != record[k])
        assert not changed, f"changed on the way: {[(k, record[k], arrived[k]) for k in changed]}"
        sent = {k: v for k, v in record.items() if k not in STORED_WHERE_READ}
        kept = {k: v for k, v in arrived.items() if k not in STORED_WHERE_READ}
        assert kept == sent, f"the entry differs on the collector: {sorted(set(sent.items()) ^ set(kept.items()))}"
        compared += 1
    print(f"# {compared} dsagent records compared field by field "
          f"({sum(len(r) for r in local)} fields, {len({k for r in local for k in r if k.startswith('DSAGENT_')})} "
          f"distinct DSAGENT_ fields)")
    # --split-mode=host: a file per sending host, named by its address (Debian's journal-remote has no client
    # certificate to name it by)
    files = m.collector.run(["ls", REMOTE_DIR]).stdout.split()
    assert f"remote-{NODE_ADDRESS}.journal" in files, files


@test
def the_collector_explains_each_record_once_it_has_the_catalog(m):
    c = m.collector
    local = state["local"]
    assert all("MESSAGE_ID" in r for r in local), local
    remote = [state["remote"][identity(r)] for r in local]
    # without the catalog the collector shows the fields, never the explanation: the text is not in the records
    for record in remote:
        assert explanation(c, record, REMOTE_DIR) == "", "the collector explains without dsagent's catalog"
    c.write(f"{CATALOG_DIR}/dsagent.catalog", open(os.path.join(SOURCE, "units/dsagent.catalog")).read())
    c.run(["journalctl", "--update-catalog"])
    for record, arrived in zip(local, remote):
        here = explanation(m, record)
        there = explanation(c, arrived, REMOTE_DIR)
        assert here, f"the node does not explain {record['MESSAGE']}"
        assert there == here, f"the collector explains otherwise:\n{there}\n-- the node:\n{here}"
        if "DSAGENT_CLIENT_USER" in record:
            assert record["DSAGENT_CLIENT_USER"] in there, there
        assert not re.search(r"@[A-Z0-9_]+@", there), there
        print(f"# collector: {there.splitlines()[0][:160]}")


def uploader_said(m):
    return m.run(["journalctl", "--no-pager", "-o", "cat", "-u", "systemd-journal-upload.service"]).stdout


@test
def the_node_uploads_to_no_collector_whose_certificate_its_ca_did_not_sign_and_resumes_when_it_does(m):
    """The HTTPS is real: trusting another CA, the uploader refuses the collector and sends nothing; with the
    right CA again it sends what waited (its --save-state cursor), so a misconfiguration loses no record."""
    c = m.collector
    m.write("/etc/journal-upload/other-ca.pem", state["certs"]["other-ca.pem"])
    wrong = "/etc/systemd/journal-upload.conf.d/60-wrong-ca.conf"
    m.write(wrong, "[Upload]\nTrustedCertificateFile=/etc/journal-upload/other-ca.pem\n")
    said_before = len(uploader_said(m))
    m.run(["systemctl", "restart", "systemd-journal-upload.service"])
    m.run(["logger", "-t", "dsagent-shipping-test", "written while the collector is not trusted"])
    said = wait_for(lambda: re.search(r"^.*(?:certificate|SSL).*$", uploader_said(m)[said_before:], re.I | re.M),
                    what="the uploader's certificate error")
    print(f"# the uploader: {said.group(0)}")
    assert not collector_journal(c, "SYSLOG_IDENTIFIER=dsagent-shipping-test")

    m.run(["rm", wrong])
    m.run(["systemctl", "reset-failed", "systemd-journal-upload.service"], check=False)
    m.run(["systemctl", "restart", "systemd-journal-upload.service"])
    wait_for(lambda: collector_journal(c, "SYSLOG_IDENTIFIER=dsagent-shipping-test"),
             what="the record that waited, on the collector")


if __name__ == "__main__":
    # a clone or build under /tmp would be hidden by the booted system's own /tmp
    run_tests(node_and_collector)

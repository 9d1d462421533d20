#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""packaging/deb: the package builds, lintian finds no error, and it works once installed.

The .deb is built with dpkg-buildpackage -us -uc -b from a clean copy of the
source, checked with lintian, then installed with dpkg into a real systemd
booted as PID 1 (tests/systemd/booted.py), where one request and one dump
are made; a purge then says it removes the dumps, and does.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

from source_tree import copy_source
from tap import SOURCE, run, run_tests, test

sys.path.insert(0, os.path.join(SOURCE, "tests/systemd"))
from booted import Machine, REQUEST_MESSAGE_ID, start_target, target_app, wait_for  # noqa: E402

work = tempfile.mkdtemp(prefix="dsagent-deb-", dir="/var/tmp")
deb = {}
# what README's readers, and the shipped policy's, are pointed to
DOCS = ["README.md", "SECURITY.md", "docs/policy.md", "docs/protocol.md", "docs/proxy.md", "docs/counters.md", "docs/dotnet-monitor.md", "docs/ports.md",
        "docs/containers.md", "docs/journal-shipping.md", "docs/egress.md",
        "units/dsagent.service.d/egress.conf.example"]


@test
def builds_with_dpkg_buildpackage():
    tree = copy_source(os.path.join(work, "dsagent"))
    shutil.copytree(os.path.join(SOURCE, "packaging/deb/debian"), os.path.join(tree, "debian"))
    run(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=tree)
    deb["path"], = glob.glob(os.path.join(work, "dsagent_*_*.deb"))
    deb["selinux"], = glob.glob(os.path.join(work, "dsagent-selinux_*_all.deb"))
    deb["changes"], = glob.glob(os.path.join(work, "dsagent_*.changes"))


@test
def lintian_reports_no_error():
    r = run(["lintian", "--fail-on", "error", "--pedantic", deb["changes"]], check=False)
    for line in r.stdout.splitlines():
        print(f"# {line}")
    assert r.returncode == 0 and not any(line.startswith("E:") for line in r.stdout.splitlines()), r.stdout


@test
def holds_what_is_installed():
    files = run(["dpkg-deb", "--contents", deb["path"]]).stdout
    for path in ["./usr/sbin/dsagent", "./usr/bin/dsctl", "./lib/systemd/system/dsagent.service",
                 "./lib/systemd/system/dsagent.socket", "./usr/lib/systemd/catalog/dsagent.catalog",
                 "./usr/lib/sysusers.d/dsagent.conf", "./usr/lib/tmpfiles.d/dsagent.conf",
                 "./etc/dsagent/policy.toml", "./etc/dsagent/policy.d/", "./usr/share/man/man8/dsagent.8.gz",
                 "./usr/share/man/man1/dsctl.1.gz", "./usr/share/man/man5/dsagent.policy.5.gz"]:
        assert f" {path}\n" in files, f"{path} not in the package:\n{files}"
    conffiles = run(["dpkg-deb", "--info", deb["path"], "conffiles"]).stdout.split()
    assert conffiles == ["/etc/dsagent/policy.toml"], conffiles


@test
def ships_the_documentation():
    files = run(["dpkg-deb", "--contents", deb["path"]]).stdout
    # dh_compress gzips the larger ones
    for doc in DOCS:
        path = f"./usr/share/doc/dsagent/{os.path.basename(doc)}"
        assert f" {path}\n" in files or f" {path}.gz\n" in files, f"{path} not in the package:\n{files}"
    # the shipped policy sends its reader to the documentation the package holds
    unpacked = os.path.join(work, "unpacked")
    run(["dpkg-deb", "--extract", deb["path"], unpacked])
    policy = open(os.path.join(unpacked, "etc/dsagent/policy.toml")).read()
    assert "/usr/share/doc/dsagent/policy.md" in policy, policy


@test
def installs_starts_and_answers_under_systemd():
    with Machine(name="dsagent-deb", binds=[work]) as m:
        # This machine's image forbids maintainer scripts to start services
        # (policy-rc.d exits 101, for image builds); a booted host has none.
        m.run(["rm", "-f", "/usr/sbin/policy-rc.d"])
        installed = m.run(["dpkg", "--install", deb["path"]])
        # the postinst created the group, enabled and started the socket, which started the agent
        # (dsagent.socket wants it: it runs from then on, so that a reload always finds it)
        assert m.run(["getent", "group", "dsagent"]).returncode == 0
        # and the egress process's own user (units/dsagent.sysusers)
        assert m.run(["getent", "passwd", "dsagent-egress"]).returncode == 0
        assert m.run(["systemctl", "is-enabled", "dsagent.socket"]).stdout.strip() == "enabled"
        assert m.show("dsagent.socket", "ActiveState")["ActiveState"] == "active"
        wait_for(lambda: m.show("dsagent.service", "ActiveState")["ActiveState"] == "active",
                 what="the socket to start the agent")
        # and checked the policy as the agent read it
        assert "/etc/dsagent/policy.toml: OK" in installed.stdout, installed
        assert "/usr/sbin/dsagent" in m.run(["systemctl", "cat", "dsagent.service"]).stdout

        m.add_user("dst-svc")
        pid = start_target(m, "dst-target.service", "dst-svc", target_app())
        r = m.run(["/usr/bin/dsctl", "info", str(pid)])
        assert "dst-target.service" in r.stdout, r.stdout
        records = wait_for(lambda: m.journal(f"MESSAGE_ID={REQUEST_MESSAGE_ID}"), what="the request's record")
        assert len(records) == 1 and records[0]["DSAGENT_DECISION"] == "allowed", records
        assert records[0]["_SYSTEMD_UNIT"] == "dsagent.service", records[0]
        # the documentation is where the package says
        for doc in DOCS:
            name = f"/usr/share/doc/dsagent/{os.path.basename(doc)}"
            assert m.run(["sh", "-c", f"test -f {name} || test -f {name}.gz"], check=False).returncode == 0, name

        # a dump to leave behind: a removal keeps it and says where, a purge removes it and says so
        r = m.run(["/usr/bin/dsctl", "dump", str(pid), "--type", "mini"])
        dump = re.search(r"stored at (/var/lib/dsagent/dumps/\S+)", r.stdout).group(1)
        r = m.run(["dpkg", "--remove", "dsagent"])
        assert "/var/lib/dsagent/dumps keeps its 1 dump; dpkg --purge dsagent removes them" in r.stdout, r.stdout
        assert m.run(["test", "-f", dump], check=False).returncode == 0, "a removal took the dump"
        r = m.run(["dpkg", "--purge", "dsagent"])
        assert "removing the dump directory /var/lib/dsagent/dumps with its 1 dump" in r.stdout, r.stdout
        assert m.show("dsagent.socket", "LoadState")["LoadState"] == "not-found"
        assert m.run(["test", "-e", "/etc/dsagent/policy.toml"], check=False).returncode != 0
        assert m.run(["test", "-e", "/var/lib/dsagent"], check=False).returncode != 0, "purge left the dumps"


@test
def the_selinux_package_loads_the_module_and_takes_it_out_again():
    files = run(["dpkg-deb", "--contents", deb["selinux"]]).stdout
    for path in ["./usr/share/selinux/default/dsagent.pp.bz2", "./usr/share/selinux/devel/include/services/dsagent.if"]:
        assert f" {path}\n" in files, f"{path} not in the package:\n{files}"
    with Machine(name="dsagent-deb-selinux", binds=[work]) as m:
        m.run(["rm", "-f", "/usr/sbin/policy-rc.d"])
        assert "dsagent" not in m.run(["semodule", "-l"]).stdout.split()
        m.run(["dpkg", "--install", deb["path"], deb["selinux"]])
        # in the policy store, with its file contexts: the agent's binary is labelled by them
        assert "dsagent" in m.run(["semodule", "-l"]).stdout.split()
        r = m.run(["matchpathcon", "/usr/sbin/dsagent", "/var/lib/dsagent/dumps"])
        assert ":dsagent_exec_t:" in r.stdout and ":dsagent_dump_t:" in r.stdout, r.stdout
        m.run(["dpkg", "--purge", "dsagent-selinux"])
        assert "dsagent" not in m.run(["semodule", "-l"]).stdout.split()
        assert ":dsagent_exec_t:" not in m.run(["matchpathcon", "/usr/sbin/dsagent"], check=False).stdout

if __name__ == "__main__":
    try:
        run_tests(needs_root=True, chained=True)
    finally:
        subprocess.run(["rm", "-rf", work], check=False)

#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""packaging/rpm: rpmbuild -bb builds dsagent and dsagent-selinux, and rpmlint finds no error.

On Debian: rpmbuild cannot see Debian's packages, so --nodeps skips the
BuildRequires check, and rpm-macros stands in for the macro packages a
Fedora build root has (see that file). Everything else is the spec as a
Fedora or RHEL build runs it, %check included.
"""
import glob
import os
import re
import shutil
import subprocess
import tarfile
import tempfile

from source_tree import copy_source
from tap import SOURCE, run, run_tests, test

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = os.path.join(SOURCE, "packaging/rpm/dsagent.spec")
work = tempfile.mkdtemp(prefix="dsagent-rpm-", dir="/var/tmp")
built = {}


def spec_version():
    return re.search(r"^Version:\s*(\S+)", open(SPEC).read(), re.M).group(1)


@test
def builds_with_rpmbuild():
    top = os.path.join(work, "rpmbuild")
    sources = os.path.join(top, "SOURCES")
    os.makedirs(sources)
    name = f"dsagent-{spec_version()}"
    tree = copy_source(os.path.join(work, name))
    with tarfile.open(os.path.join(sources, f"{name}.tar.gz"), "w:gz") as tar:
        tar.add(tree, arcname=name)
    shutil.copy(os.path.join(SOURCE, "units/dsagent.sysusers"), sources)
    run(["rpmbuild", "-bb", "--nodeps", f"--load={os.path.join(HERE, 'rpm-macros')}",
         f"--define=_topdir {top}", SPEC])
    built["rpms"] = sorted(glob.glob(os.path.join(top, "RPMS/*/*.rpm")))
    names = [os.path.basename(p) for p in built["rpms"]]
    assert any(n.startswith(f"{name}-1.") for n in names), names
    assert any(n.startswith(f"dsagent-selinux-{spec_version()}-1.") and n.endswith(".noarch.rpm")
               for n in names), names


@test
def rpmlint_reports_no_error():
    r = run(["rpmlint", "--rpmlintrc", os.path.join(SOURCE, "packaging/rpm/dsagent.rpmlintrc"), SPEC,
             *built["rpms"]], check=False)
    for line in r.stdout.splitlines():
        print(f"# {line}")
    errors = re.search(r"(\d+) errors?", r.stdout)
    assert errors and errors.group(1) == "0", r.stdout


@test
def packages_hold_what_is_installed():
    main = next(p for p in built["rpms"] if "/dsagent-0" in p or os.path.basename(p).startswith("dsagent-0"))
    selinux = next(p for p in built["rpms"] if "dsagent-selinux" in p)
    files = run(["rpm", "-qlp", main]).stdout.split()
    unitdir = subprocess.run(["pkg-config", "--variable=systemdsystemunitdir", "systemd"], stdout=subprocess.PIPE,
                             text=True, check=True).stdout.strip()
    for path in ["/usr/sbin/dsagent", "/usr/bin/dsctl", f"{unitdir}/dsagent.service", f"{unitdir}/dsagent.socket",
                 "/usr/lib/systemd/catalog/dsagent.catalog", "/usr/lib/sysusers.d/dsagent.conf",
                 "/usr/lib/tmpfiles.d/dsagent.conf", "/etc/dsagent/policy.toml", "/var/lib/dsagent/dumps",
                 "/usr/share/man/man8/dsagent.8", "/usr/share/man/man5/dsagent.policy.5"]:
        # Fedora's brp-compress gzips man pages; Debian's rpm leaves them as they are
        assert path in files or f"{path}.gz" in files, f"{path} not in {files}"
    assert run(["rpm", "-qcp", main]).stdout.split() == ["/etc/dsagent/policy.toml"]
    docs = run(["rpm", "-qdp", main]).stdout.split()
    for doc in ("README.md", "SECURITY.md", "policy.md", "protocol.md", "proxy.md", "counters.md", "dotnet-monitor.md", "ports.md",
                "containers.md", "egress.conf.example"):
        assert f"/usr/share/doc/dsagent/{doc}" in docs, f"{doc} not among the documentation: {docs}"
    scripts = run(["rpm", "-qp", "--scripts", main]).stdout
    assert "systemd-sysusers" in scripts and "g dsagent" in scripts, scripts
    assert "u dsagent-egress" in scripts, scripts  # the egress process's own user
    assert "dsagent.socket" in scripts and "systemd-tmpfiles --create dsagent.conf" in scripts, scripts
    files = run(["rpm", "-qlp", selinux]).stdout.split()
    assert "/usr/share/selinux/packages/targeted/dsagent.pp.bz2" in files, files
    assert "semodule" in run(["rpm", "-qp", "--scripts", selinux]).stdout


if __name__ == "__main__":
    try:
        run_tests(chained=True)
    finally:
        subprocess.run(["rm", "-rf", work], check=False)

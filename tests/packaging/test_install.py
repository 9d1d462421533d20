#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""`meson setup` with nothing passed, then `meson install`: the agent reads /etc/dsagent.

README, the tmpfiles.d entry and the man pages all say /etc/dsagent. With
meson's own default (sysconfdir=etc below prefix=/usr/local) the agent would
read /usr/local/etc/dsagent while tmpfiles makes /etc/dsagent/policy.d, and
drop-ins there would be silently ignored. A fresh build directory of a clean
copy of the source, configured with no option at all, must agree.
"""
import os
import re
import subprocess
import tempfile

from source_tree import copy_source
from tap import SOURCE, run, run_tests, test

work = tempfile.mkdtemp(prefix="dsagent-install-", dir="/var/tmp")
built = {}


@test
def default_configuration_reads_etc_dsagent():
    tree = copy_source(os.path.join(work, "dsagent"))
    build = os.path.join(work, "build")
    run(["meson", "setup", build, tree])
    # only what is installed: the tests and benchmarks are not
    run(["ninja", "-C", build, "agent/dsagent", "agent/egress/dsagent-egress", "client/dsctl"])
    built["build"] = build
    dsagent = os.path.join(build, "agent/dsagent")
    help_text = run([dsagent, "--help"]).stdout
    assert "[/etc/dsagent/policy.toml]" in help_text, help_text
    # with no FILE, --check-policy reads the default path and names it
    r = run([dsagent, "--check-policy"], check=False)
    assert r.stdout.startswith("/etc/dsagent/policy.toml:"), r.stdout


@test
def meson_install_puts_the_policy_where_the_agent_reads_it():
    dest = os.path.join(work, "dest")
    run(["meson", "install", "-C", built["build"], "--no-rebuild", "--quiet", "--destdir", dest])
    installed = run(["meson", "introspect", "--installed", built["build"]]).stdout
    assert '"/etc/dsagent/policy.toml"' in installed, installed
    assert os.path.isfile(os.path.join(dest, "etc/dsagent/policy.toml")), os.listdir(dest)
    assert os.path.isdir(os.path.join(dest, "etc/dsagent/policy.d")), os.listdir(os.path.join(dest, "etc/dsagent"))
    assert not os.path.exists(os.path.join(dest, "usr/local/etc")), "something still installs to /usr/local/etc"


@test
def readme_names_the_same_directory():
    readme = open(os.path.join(SOURCE, "README.md")).read()
    assert "/etc/dsagent/policy.toml" in readme
    assert not re.search(r"/usr/local/etc", readme), "README names /usr/local/etc"


if __name__ == "__main__":
    try:
        run_tests(chained=True)
    finally:
        subprocess.run(["rm", "-rf", work], check=False)

#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""crashes and crash on the host, where no systemd-coredump runs: what a client is told when the journal cannot
be read, and what the agent refuses before it reads anything. The crashes themselves, real ones through
systemd-coredump, are tests/systemd/test_crashes.py's (a booted system) and tests/selinux's (a kernel of its
own)."""
import os

from harness import ALICE, Agent, dsctl, make_dir, run_tests, test

EXIT_FAILED, EXIT_USAGE = 1, 2
POLICY = ('[agent]\ndump_dir = "@DUMP_DIR@"\n'
          '[[rule]]\nname = "alice-crashes"\nusers = ["dst-alice"]\ncommands = ["crashes"]\n'
          'targets.units = ["orders.service"]\n')


def agent_without_a_journal():
    """An agent whose view holds journal directories without one file: a mount namespace of its own."""
    empty = make_dir(None, 0o755)
    mount = ('mount -t tmpfs -o mode=0755 tmpfs /var/log/journal && mkdir -p /run/log/journal && '
             'mount -t tmpfs -o mode=0755 tmpfs /run/log/journal && exec "$@"')
    return Agent(policy=POLICY, wrapper=["unshare", "-m", "--propagation", "private", "sh", "-c", mount, empty])


@test
def a_journal_of_which_nothing_can_be_read_is_an_error_not_an_empty_listing():
    """sd_journal_open() passes over files it may not open (an SELinux refusal does this, tests/selinux): a
    listing of nothing would read as "no crashes". Without the check, this listing was empty and exited 0."""
    agent = agent_without_a_journal()
    for user in (None, ALICE):
        r = dsctl(agent, user, "crashes")
        assert r.returncode == EXIT_FAILED and "not one of its files could be opened" in r.stderr, r
        assert r.stdout == "", r
    r = dsctl(agent, ALICE, "crash", "1764400000-1234")
    assert r.returncode == EXIT_FAILED and "not one of its files could be opened" in r.stderr, r


@test
def a_crash_id_is_checked_before_anything_is_asked():
    agent = agent_without_a_journal()
    for bad in ("1234", "0123-5", "12-0", "x-1", "12-"):
        r = dsctl(agent, ALICE, "crash", bad)
        assert r.returncode == EXIT_USAGE and "crash takes a crash's id" in r.stderr, (bad, r)
    r = dsctl(agent, ALICE, "crashes", "--since", "yesterday-ish")
    assert r.returncode == EXIT_USAGE and "--since takes" in r.stderr, r
    out = os.path.join(make_dir(None, 0o755), "exists")
    open(out, "w").close()
    r = dsctl(agent, ALICE, "crash", "1764400000-1234", "-o", out)
    assert r.returncode == EXIT_FAILED and "dsctl does not overwrite files" in r.stderr, r


if __name__ == "__main__":
    run_tests()

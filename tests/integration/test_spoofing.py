#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Sockets that lie: planted, impostor, symlinked. The agent refuses and talks to none of them."""
import os
import subprocess
import sys

from harness import (EXIT_SOCKET_UNTRUSTED, HERE, MALLORY, PYTHON, SVC, Agent, Process, Target, as_user, dsctl,
                     make_dir, run_tests, test, wait_for)


class Planted:
    """A listener started by @user at @path, logging what reaches it."""

    def __init__(self, user, path):
        self.log = os.path.join(make_dir(user, 0o700), "plant.log")
        self.process = Process(as_user(user, [PYTHON, os.path.join(HERE, "plant.py"), path, self.log]))
        self.process.read_line("listening")

    def connections(self):
        return open(self.log).read().splitlines() if os.path.exists(self.log) else []


def run_as(user, *argv):
    subprocess.run(as_user(user, list(argv)), check=True)


@test
def socket_planted_by_another_user_is_refused():
    # a shared, sticky TMPDIR: anyone may create names in it
    target = Target(SVC, tmpdir="shared")
    agent = Agent()
    run_as(SVC, "rm", target.socket_path)
    attacker = Planted(MALLORY, target.socket_path)

    for user in (SVC, None):
        r = dsctl(agent, user, "info", str(target.pid))
        assert r.returncode == EXIT_SOCKET_UNTRUSTED, r
        assert "not owned by the target's user" in r.stderr, r.stderr
    assert attacker.connections() == [], "the agent connected to a planted socket"


@test
def impostor_of_the_same_user_gets_no_bytes():
    # another process of the target's own user listens under the target's name
    target = Target(SVC, tmpdir="private")
    agent = Agent()
    run_as(SVC, "rm", target.socket_path)
    impostor = Planted(SVC, target.socket_path)

    r = dsctl(agent, SVC, "info", str(target.pid))
    assert r.returncode == EXIT_SOCKET_UNTRUSTED, r
    assert "not the target" in r.stderr, r.stderr
    # it logs the connection as the agent hangs up, which came before dsctl's answer: a bound against a hang
    wait_for(lambda: impostor.connections(), what="the impostor to log the probe")
    # it was connected to, found to be someone else, and hung up on before any byte
    assert impostor.connections() == ["connection bytes=0"], impostor.connections()


@test
def symlink_at_socket_path_is_refused():
    target = Target(SVC, tmpdir="private")
    agent = Agent()
    # root's own socket, which the target's owner would like the agent to talk to
    decoy_path = os.path.join(make_dir(None, 0o755), "privileged.sock")
    decoy = Planted("root", decoy_path)
    run_as(SVC, "rm", target.socket_path)
    run_as(SVC, "ln", "-s", decoy_path, target.socket_path)

    for user in (SVC, None):
        r = dsctl(agent, user, "info", str(target.pid))
        assert r.returncode == EXIT_SOCKET_UNTRUSTED, r
        assert "symbolic link" in r.stderr, r.stderr
    assert decoy.connections() == [], "the agent followed a symlink"


@test
def symlink_in_tmpdir_is_refused():
    # the runtime itself creates its socket through the link; the agent still will not follow it
    base = make_dir(SVC, 0o700)
    real = os.path.join(base, "real")
    run_as(SVC, "mkdir", real)
    link = os.path.join(base, "link")
    run_as(SVC, "ln", "-s", real, link)
    target = Target(SVC, tmpdir=link)
    agent = Agent()
    assert os.path.exists(os.path.join(real, target.socket_name))
    r = dsctl(agent, SVC, "info", str(target.pid))
    assert r.returncode == EXIT_SOCKET_UNTRUSTED, r


if __name__ == "__main__":
    run_tests()

#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Pid reuse at each step between the decision and the use: nothing reaches the substitute.

The agent is paused (a test-only hook) after it pinned the target, and after
it decided; meanwhile the target dies and its pid is handed, with clone3's
set_tid (tests/tools/claim-pid), to a process of the same user that listens
under the target's old socket name. Pid and uid then match what the agent saw.
The pause ends when the substitute listens, however long a loaded machine took
to put it there, so that every round's attack is in place before the agent
goes on.

Three layers each stop it on their own: the /proc/PID directory fd opened
right after the pidfd stays bound to the dead process, the pidfd's liveness
is checked after every step, and the listener's SO_PEERPIDFD is compared with
the pinned one. Removing all three (by-number /proc lookups, no liveness, no
peer pidfd) lets the request reach the substitute and fails these tests; that
was checked by mutating agent/targets/target.c.
"""
import os
import signal
import subprocess
import time

import harness
from harness import (DSCTL, EXIT_NO_SUCH_PROCESS, HERE, PYTHON, SVC, Agent, Process, Target, as_user, claim_pid,
                     run_tests, start_time_of, test)

ROUNDS = 5


def substitute_round(point):
    target = Target(SVC, tmpdir="private")
    pid, socket_path = target.pid, target.socket_path
    pause = harness.Pause(point)
    agent = Agent(env=pause.env)
    request = subprocess.Popen(as_user(SVC, [DSCTL, "--socket", agent.socket, "info", str(pid)]),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pause.wait(agent)

    target.process.proc.kill()
    target.process.proc.wait()
    os.unlink(socket_path)  # the dead runtime's socket, so the substitute can take its name
    log = os.path.join(harness.make_dir(SVC, 0o700), "plant.log")
    substitute = claim_pid(pid, as_user(SVC, [PYTHON, os.path.join(HERE, "plant.py"), socket_path, log]))
    if not substitute:
        return None
    substitute.read_line("listening")
    assert os.path.exists(socket_path)
    # the attack is in place while the agent still stands at the point: only now does it go on
    assert not pause.resumed(agent), f"the agent went on from {point} before the substitute listened"
    pause.end()

    out, err = request.communicate(timeout=60)  # it answers as it goes on; a bound against a hang
    assert request.returncode == EXIT_NO_SUCH_PROCESS, (point, request.returncode, err)
    # nothing reached the substitute, which logs each connection as it ends. A connection the agent made would
    # have held its answer to the runtime deadline (the substitute never answers), and the answer came at once;
    # 0.2 s only lets a log write under way land: a loaded machine can only make this check pass wrongly
    time.sleep(0.2)
    assert not os.path.exists(log) or open(log).read() == "", (point, open(log).read())
    return True


# a round is lost only when another process took the dead target's pid first (pids come round again only after
# pid_max more processes): one lost round of 5 is allowed, a count that does not depend on time
@test
def pid_reused_after_the_target_was_pinned():
    done = sum(1 for _ in range(ROUNDS) if substitute_round("after-target"))
    assert done >= ROUNDS - 1, done


@test
def pid_reused_after_the_decision():
    done = sum(1 for _ in range(ROUNDS) if substitute_round("after-decision"))
    assert done >= ROUNDS - 1, done


if __name__ == "__main__":
    run_tests()

#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The event loop never waits on one client: stalled readers, hung lookups, floods, fd exhaustion."""
import os
import time

import harness
from harness import (SVC, Agent, RawSession, Target, dsctl, run_tests, test, wait_for)

SESSION_END_ID = "1c5ee471f818453b8c7bac25ac2e872f"
PROVIDER = "Dsagent-TestTarget"


def session_end(agent):
    wait_for(lambda: agent.records(message_id=SESSION_END_ID), timeout=60, what="the session's end record")
    end, = agent.records(message_id=SESSION_END_ID)
    return end


def fill_pipe(session):
    """The client never reads: wait until its pipe is full (the stall is real).

    splice() fills the pipe's slots with partial pages, so full is: most of its
    capacity used, and no byte more for half a second while the runtime writes
    as fast as it can."""
    capacity = session.pipe_capacity()
    seen = []

    def full():
        seen.append(session.pipe_bytes())
        return len(seen) > 10 and seen[-1] > capacity // 2 and seen[-1] == seen[-11]

    wait_for(full, timeout=60, what="the client's pipe to fill")


@test
def a_client_that_stops_reading_after_its_stop_does_not_hold_the_runtime():
    """The runtime writes its rundown after StopTracing on its only diagnostics thread: the agent drains it."""
    target = Target(SVC, args=("--emit-events", "0"))
    agent = Agent()
    session = RawSession(agent, target.pid, PROVIDER)
    fill_pipe(session)
    session.stop()
    # the runtime's diagnostics thread is free again: another request of the same target is answered
    r = dsctl(agent, SVC, "info", str(target.pid), timeout=60)
    assert r.returncode == 0, (r.returncode, r.stderr)
    end = session_end(agent)
    assert end["DSAGENT_SESSION_END"] == "client-stalled" and end["DSAGENT_SESSION_COMPLETE"] == "no", end


@test
def a_client_that_never_reads_is_cut_and_its_session_stopped():
    target = Target(SVC, args=("--emit-events", "0", "--report-sessions"))
    agent = Agent()
    session = RawSession(agent, target.pid, PROVIDER)
    target.process.read_line("eventsource-enabled True")
    fill_pipe(session)
    end = session_end(agent)
    assert end["DSAGENT_SESSION_END"] == "client-stalled" and end["DSAGENT_SESSION_COMPLETE"] == "no", end
    # the runtime's own view: the session is gone
    target.process.read_line("eventsource-enabled False", timeout=30)
    # the client still gets what was in its pipe, then the end of it, and the agent's last word
    total = 0
    while chunk := os.read(session.pipe, 1 << 20):
        total += len(chunk)
    assert total > 0
    frames = session.replies()
    assert frames[0][0] == harness.WIRE_SESSION_END, frames
    assert frames[0][1][harness.TAG_ENDED] == b"client-stalled", frames


if __name__ == "__main__":
    run_tests()

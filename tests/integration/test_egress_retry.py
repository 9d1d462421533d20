#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Uploads that lose nothing without the agent's restart, against a real radosgw (docs/egress.md, "Retries"):

- an upload failed `unavailable` (the store stopped) is handed over again with backoff, recorded `retry` each
  time, and ends `uploaded` once the store is started again, one outcome, the label pending meanwhile;
- an upload refused `busy` (the egress process's server stopped, its socket's buffer full) is handed over again
  and ends uploaded once the server runs;
- the egress process's server killed (SIGKILL) mid-upload: the supervisor records its death (`restarted`), starts
  a new server, and the upload it had taken is handed over again and ends uploaded;
- a server that dies at once every time is started again with a backoff, not in a tight loop: its deaths,
  counted through their records over a window;
- `dsctl dumps --url` is answered while four uploads are held by a frozen store (the server reads every request
  as it comes; before, a URL waited in the socket behind the four).

No case measures time: each waits for the event (a record, a process) within a bound against a hang, said where it
is. One store serves the whole file (radosgw.py), started on first use.
"""
import json
import os
import signal
import time

import radosgw
from egress_tools import egress_table, keys_file
from harness import ALICE, BUILD, DUMP_BOUND, SVC, Agent, Target, dsctl, make_dir, run_tests, test, wait_for

HELPER = os.path.join(BUILD, "agent", "egress", "dsagent-egress")
EGRESS_MESSAGE_ID = "69c19926015d41838f93007ed7cc398e"

store = radosgw.file_store


def policy(store_lines=""):
    """Alice may take mini dumps of the service user's processes, uploaded to "central", with @store_lines."""
    gw = store()
    keys = keys_file(make_dir(None, 0o700), "keys", gw.access_key, gw.secret_key)
    return f"""[agent]
dump_dir = "@DUMP_DIR@"

{egress_table(gw, "central", "file:" + keys, extra='prefix = "retry/"' + chr(10) + store_lines)}
[[rule]]
name = "ops-dumps"
users = ["{ALICE}"]
commands = ["dump", "info"]
targets.users = ["{SVC}"]
dump_types = ["mini"]
egress = "central"
"""


def start_agent(text, env=None):
    return Agent(policy=text, env=dict({"DSAGENT_TEST_EGRESS_HELPER": HELPER}, **(env or {})))


def dump(agent, pid):
    r = dsctl(agent, ALICE, "--json", "dump", str(pid), "--type", "mini", timeout=DUMP_BOUND)
    assert r.returncode == 0, r
    return json.loads(r.stdout)["path"]


def children_of(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def supervisor_pid(agent):
    """The agent's child that it exec'd: dsagent-egress, the supervisor."""
    found = [c for c in children_of(agent.proc.pid) if comm(c) == "dsagent-egress"]
    return found[0] if found else None


def server_pid(agent):
    """The supervisor's child that serves the agent's requests (each upload runs in a child of its own)."""
    supervisor = supervisor_pid(agent)
    found = [c for c in children_of(supervisor) if comm(c) == "dsagent-egress"] if supervisor else []
    return found[0] if found else None


def records_of(agent, path, event=None):
    return [r for r in agent.records(message_id=EGRESS_MESSAGE_ID)
            if r.get("DSAGENT_DUMP_PATH") == path and (event is None or r.get("DSAGENT_EGRESS_EVENT") == event)]


def restarted(agent):
    return [r for r in agent.records(message_id=EGRESS_MESSAGE_ID) if r.get("DSAGENT_EGRESS_EVENT") == "restarted"]


def label(path):
    return os.getxattr(path, "user.dsagent.egress").decode()


def assert_uploaded_once(agent, path, bound):
    """@path's one outcome is "uploaded", its label says so, and the store holds its bytes. @bound: the caller's."""
    out = wait_for(lambda: records_of(agent, path, "outcome"), timeout=bound, what=f"the outcome of {path}")
    assert len(out) == 1 and out[0]["DSAGENT_EGRESS_RESULT"] == "uploaded", out
    assert len(records_of(agent, path, "queued")) == 1, records_of(agent, path)
    key = out[0]["DSAGENT_EGRESS_KEY"]
    # every retry was of the same object: one key from the queued record to the outcome
    assert {r["DSAGENT_EGRESS_KEY"] for r in records_of(agent, path)} == {key}, records_of(agent, path)
    assert label(path) == f"uploaded:central:{key}", label(path)
    assert store().sha256_of(key) == out[0]["DSAGENT_EGRESS_SHA256"], out
    return out[0]


@test
def an_upload_failed_unavailable_ends_uploaded_once_the_store_is_back():
    gw = store()
    target = Target(SVC)
    # one try a request: the store's refusal comes back at once, and the hand-overs are the agent's (2 s, 4 s,
    # 8 s...); eight of them cover a store that takes minutes to start
    agent = start_agent(policy('attempts = 1\nretry_delay = "2s"\nretries = 8\n'))
    gw.stop_rgw()
    try:
        path = dump(agent, target.pid)
        # the first hand-over fails unavailable, and another is announced; the bound: a refused connection
        first = wait_for(lambda: records_of(agent, path, "retry"), timeout=120, what="the first retry record")[0]
        assert first["DSAGENT_EGRESS_RESULT"] == "unavailable" and first["DSAGENT_EGRESS_HANDOVER"] == "1", first
        assert first["DSAGENT_EGRESS_RETRY_USEC"] == "2000000", first
        assert not records_of(agent, path, "outcome"), "a transient failure was the upload's last word"
        assert label(path) == "pending:central", label(path)
    finally:
        gw.start_rgw()
    # radosgw answers again within its START_BOUND (120 s); the hand-overs until then wait at most 2+4+...+256 s in
    # all: 600 s is a bound on a hang
    out = assert_uploaded_once(agent, path, bound=600)
    assert int(out["DSAGENT_EGRESS_HANDOVER"]) >= 2, out
    retries = records_of(agent, path, "retry")
    assert [r["DSAGENT_EGRESS_HANDOVER"] for r in retries] == [str(n) for n in range(1, len(retries) + 1)], retries
    assert int(out["DSAGENT_EGRESS_HANDOVER"]) == len(retries) + 1, (out, retries)
    print(f"# uploaded at hand-over {out['DSAGENT_EGRESS_HANDOVER']}", flush=True)


@test
def an_upload_refused_busy_is_handed_over_again_and_uploaded():
    target = Target(SVC)
    agent = start_agent(policy('retry_delay = "1s"\n'))
    server = wait_for(lambda: server_pid(agent), what="the egress process's server")
    os.kill(server, signal.SIGSTOP)  # it reads nothing more: the requests pile up in its socket's buffer
    try:
        paths, busy = [], []
        # the buffer holds a few dozen requests at most; 64 dumps are a bound far beyond that
        for _ in range(64):
            paths.append(dump(agent, target.pid))
            busy = [r for r in agent.records(message_id=EGRESS_MESSAGE_ID) if r.get("DSAGENT_EGRESS_RESULT") == "busy"]
            if busy:
                break
        assert busy, "no upload was refused busy"
        path = busy[0]["DSAGENT_DUMP_PATH"]
        assert busy[0]["DSAGENT_EGRESS_EVENT"] == "retry" and path == paths[-1], busy
        assert label(path) == "pending:central", label(path)
    finally:
        os.kill(server, signal.SIGCONT)
    # each small upload takes well under a second on loopback; the busy one's hand-overs wait 1 s, 2 s, 4 s... and
    # the server takes 4 at once and queues 16: 300 s is a bound on a hang
    out = assert_uploaded_once(agent, path, bound=300)
    assert int(out["DSAGENT_EGRESS_HANDOVER"]) >= 2, out
    for p in paths[:-1]:
        assert_uploaded_once(agent, p, bound=300)


@test
def a_killed_egress_server_is_started_again_and_its_upload_completes():
    gw = store()
    target = Target(SVC)
    agent = start_agent(policy('retry_delay = "1s"\n'))
    first = wait_for(lambda: server_pid(agent), what="the egress process's server")
    gw.pause_rgw()  # the upload is held: the store takes the connection and answers nothing
    try:
        path = dump(agent, target.pid)
        wait_for(lambda: children_of(first), what="the upload's process under way")
        os.kill(first, signal.SIGKILL)
        died = wait_for(lambda: restarted(agent), what="the record of the server's death")[0]
        assert "signal 9" in died["DSAGENT_EGRESS_ERROR"], died
        lost = wait_for(lambda: records_of(agent, path, "retry"), what="the lost upload's retry record")[0]
        assert lost["DSAGENT_EGRESS_RESULT"] == "lost" and lost["DSAGENT_EGRESS_HANDOVER"] == "1", lost
        # a new server, started by the supervisor after 1 s; the agent itself was never restarted
        second = wait_for(lambda: (pid := server_pid(agent)) and pid != first and pid, what="a new server")
        assert second != first and agent.proc.poll() is None
    finally:
        gw.resume_rgw()
    # the hand-over after 1 s reaches the new server; the store runs again: 300 s is a bound on a hang (a
    # connection the frozen store held is cut after 30 s of no progress and tried again)
    out = assert_uploaded_once(agent, path, bound=300)
    assert out["DSAGENT_EGRESS_HANDOVER"] == "2", out
    assert len(restarted(agent)) == 1, restarted(agent)


@test
def requests_during_the_backoff_do_not_keep_the_next_server_from_starting():
    """Each request the agent sends raises fd 3's signal in the supervisor, which interrupts its wait between two
    servers: the wait must go on for what is left of the backoff, not start over, or a steady flow of uploads
    (each under the backoff apart) keeps the egress process without a server for as long as it lasts."""
    target = Target(SVC)
    agent = start_agent(policy('retry_delay = "1m"\n'))
    first = wait_for(lambda: server_pid(agent), what="the egress process's server")
    os.kill(first, signal.SIGKILL)
    died = wait_for(lambda: restarted(agent), what="the record of the server's death")[0]
    assert "starts again in 1 s" in died["DSAGENT_EGRESS_ERROR"], died
    # uploads handed over one after the other, each a dump (a few hundred ms) after the last: far under the 1 s
    # backoff apart. 20 is under what the socket's buffer holds (each request is about 7 KiB, the buffer 208 KiB,
    # so that none is refused busy, which sends nothing and would let the wait end) and takes several seconds,
    # several backoffs: the new server must be there before they are done
    second = None
    for _ in range(20):
        dump(agent, target.pid)
        second = server_pid(agent)
        if second and second != first:
            break
    assert second and second != first, "no new server while uploads kept coming"
    assert agent.proc.poll() is None


@test
def an_upload_a_server_read_and_died_before_saying_taken_is_handed_over_again():
    """A server killed after it read an upload's request from the socket and before it said it taken: the request
    is gone from the socket, and the agent, which answers lost only what was said taken, waited for it for ever (no
    outcome, the file pending until the next start). The supervisor now says up to which request the dead server
    read. Test builds stop the server at that point (DSAGENT_TEST_PAUSE egress-server-read) to kill it there."""
    target = Target(SVC)
    end = os.path.join(make_dir(None, 0o755), "pause-end")
    agent = start_agent(policy('retry_delay = "1s"\n'),
                        env={"DSAGENT_TEST_PAUSE": "egress-server-read:600000", "DSAGENT_TEST_PAUSE_END": end})
    server = wait_for(lambda: server_pid(agent), what="the egress process's server")
    path = dump(agent, target.pid)
    wait_for(lambda: "test-hook: paused at egress-server-read" in open(agent.log_path).read(),
             what="the server stopped with the request read")
    os.kill(server, signal.SIGKILL)
    open(end, "w").close()  # the next servers' reads go on at once
    died = wait_for(lambda: restarted(agent), what="the record of the server's death")[0]
    assert "signal 9" in died["DSAGENT_EGRESS_ERROR"], died
    # the death's notice is read with the upload's own pending answer: 60 s bounds a hang (it comes at once), and
    # without the fix nothing ever comes
    lost = wait_for(lambda: records_of(agent, path, "retry"), timeout=60, what="the read upload's retry record")[0]
    assert lost["DSAGENT_EGRESS_RESULT"] == "lost" and lost["DSAGENT_EGRESS_HANDOVER"] == "1", lost
    # handed over again after 1 s to the next server (started after 1 s): 120 s is a bound on a hang
    out = assert_uploaded_once(agent, path, bound=120)
    assert out["DSAGENT_EGRESS_HANDOVER"] == "2", out


@test
def a_server_that_dies_at_once_is_not_started_again_in_a_tight_loop():
    target = Target(SVC)
    # test builds: every server the supervisor starts exits at once
    agent = start_agent(policy('retries = 0\n'), env={"DSAGENT_TEST_EGRESS_SERVER_DIES": "1"})
    wait_for(lambda: restarted(agent), what="the first server's death")
    # the window: deaths counted over 10 s. With the backoff (1 s, 2 s, 4 s, 8 s...) at most 4 more fit in it
    # however fast the machine (a loaded one starts fewer); a tight loop makes thousands
    time.sleep(10)
    deaths = restarted(agent)
    assert 2 <= len(deaths) <= 5, [d["DSAGENT_EGRESS_ERROR"] for d in deaths]
    said = [d["DSAGENT_EGRESS_ERROR"] for d in deaths]
    assert "status 3" in said[0] and "starts again in 1 s" in said[0] and "starts again in 2 s" in said[1], said
    # the agent answers meanwhile; a dump's upload, which no server lives to take, waits in the socket for the
    # next one, its file labelled pending (the agent's next start hands it over again)
    path = dump(agent, target.pid)
    r = dsctl(agent, ALICE, "--json", "info", str(target.pid))
    assert r.returncode == 0, r
    assert os.path.exists(path) and label(path) == "pending:central", label(path)


@test
def a_url_is_answered_while_four_uploads_are_held():
    gw = store()
    target = Target(SVC)
    agent = start_agent(policy('timeout = "10m"\n'))
    done = dump(agent, target.pid)
    assert_uploaded_once(agent, done, bound=120)  # a small file on loopback: well under a second
    server = wait_for(lambda: server_pid(agent), what="the egress process's server")
    gw.pause_rgw()  # each upload is held: the frozen store takes its connection and answers nothing
    try:
        for _ in range(4):
            dump(agent, target.pid)
        wait_for(lambda: len(children_of(server)) == 4, what="four uploads under way")
        r = dsctl(agent, ALICE, "--json", "dumps", "--url", done)
        # answered while the four were still held: they are all there still (curl cuts a stalled transfer only
        # after 30 s, and tries it again in the same process)
        held = len(children_of(server))
        assert r.returncode == 0 and json.loads(r.stdout)["url"].startswith(gw.endpoint + "/"), r
        assert held == 4, held
    finally:
        gw.resume_rgw()


@test
def an_upload_after_the_egress_process_is_gone_stays_pending_for_the_next_start():
    """The egress process killed for good (the OOM killer, root's kill of the supervisor): the agent cannot start
    another (it may no longer change uid), so a dump taken then is not uploaded now; its file must stay pending, so
    that the agent's next start hands it over, not be labelled failed and never uploaded."""
    gw = store()
    target = Target(SVC)
    dumps = os.path.join(make_dir(None, 0o755), "dumps")  # both agents' dump_dir
    text = policy().replace("@DUMP_DIR@", dumps)
    first = start_agent(text)
    supervisor = wait_for(lambda: supervisor_pid(first), what="the egress process")
    os.kill(supervisor, signal.SIGKILL)  # its server and their uploads die with it (their death signals)
    # the agent reaps it once its pidfd says it exited: then its socket is closed on the agent's side too
    wait_for(lambda: not os.path.exists(f"/proc/{supervisor}"), what="the egress process reaped by its agent")
    path = dump(first, target.pid)
    out = wait_for(lambda: records_of(first, path, "outcome"), what="the upload's outcome")[0]
    assert out["DSAGENT_EGRESS_RESULT"] == "failed" and "gone" in out["DSAGENT_EGRESS_ERROR"], out
    assert label(path) == "pending:central", ("labelled failed: no later start would upload it", label(path))
    first.stop()
    second = start_agent(text)
    # a small file on loopback: the bound is against a hang
    out = wait_for(lambda: records_of(second, path, "outcome"), timeout=120, what="the next start's outcome")
    assert len(out) == 1 and out[0]["DSAGENT_EGRESS_RESULT"] == "uploaded", out
    assert label(path) == f"uploaded:central:{out[0]['DSAGENT_EGRESS_KEY']}", label(path)
    assert gw.sha256_of(out[0]["DSAGENT_EGRESS_KEY"]) == out[0]["DSAGENT_EGRESS_SHA256"], out


@test
def uploads_past_the_most_that_may_wait_stay_pending_for_the_next_start():
    """Each upload waiting for a retry holds two of the agent's fds; a long store outage with many dumps would spend
    them all. Past the most that may wait (1 here, by a test hook; 256 in the agent), a transient failure is
    recorded with why and its file stays pending for the next start, which uploads it; the one waiting is
    uploaded once the store is back."""
    gw = store()
    target = Target(SVC)
    dumps = os.path.join(make_dir(None, 0o755), "dumps")  # both agents' dump_dir
    # one try a request, and a first retry far off (60 s): the first upload is still waiting when the second fails
    text = policy('attempts = 1\nretry_delay = "60s"\nretries = 8\n').replace("@DUMP_DIR@", dumps)
    first = start_agent(text, env={"DSAGENT_TEST_EGRESS_WAITING_MAX": "1"})
    gw.stop_rgw()
    try:
        waiting = dump(first, target.pid)
        # the bound: a refused connection comes back at once
        wait_for(lambda: records_of(first, waiting, "retry"), timeout=120, what="the first upload waiting")
        left = dump(first, target.pid)
        out = wait_for(lambda: records_of(first, left, "outcome"), timeout=120, what="the second upload's outcome")
        assert len(out) == 1 and out[0]["DSAGENT_EGRESS_RESULT"] == "unavailable", out
        assert "1 uploads wait for a retry already" in out[0]["DSAGENT_EGRESS_ERROR"], out
        assert not records_of(first, left, "retry"), "an upload past the bound waits all the same"
        assert label(left) == "pending:central", ("labelled failed: no later start would upload it", label(left))
        assert label(waiting) == "pending:central", label(waiting)
    finally:
        gw.start_rgw()
    first.stop()
    second = start_agent(text)
    # the next start hands both over; one made before the store answers again is retried (60 s later): 600 s is a
    # bound on a hang
    for path in (waiting, left):
        assert_uploaded_once(second, path, bound=600)


@test
def a_retry_after_a_reload_goes_where_the_policy_now_says():
    """A reload that moves a store (a new endpoint: the old one is no longer trusted, or never was right): an upload
    waiting for its next hand-over goes to the new endpoint, not to the one the policy no longer names. The old
    endpoint is a port of ours: refused while the first hand-over is made, listening after the reload, so that a
    retry sent there is seen (a connection in its backlog)."""
    import select
    import socket
    gw = store()
    target = Target(SVC)
    old = socket.socket()
    old.bind(("127.0.0.1", 0))  # bound, not listening: a connection to it is refused, "unavailable" at once
    port = old.getsockname()[1]
    moved = f'endpoint = "http://127.0.0.1:{port}"'
    text = policy('attempts = 1\nretry_delay = "3s"\nretries = 2\ntimeout = "1m"\n')
    assert text.count(f'endpoint = "{gw.endpoint}"') == 1, text
    agent = start_agent(text.replace(f'endpoint = "{gw.endpoint}"', moved))
    try:
        path = dump(agent, target.pid)
        first = wait_for(lambda: records_of(agent, path, "retry"), what="the first hand-over's retry record")[0]
        assert first["DSAGENT_EGRESS_RESULT"] == "unavailable", first
        agent.write_policy(text)  # the store moved to the real endpoint
        assert agent.reload()["DSAGENT_POLICY_LOADED"] == "yes"
        old.listen(8)
        old.setblocking(False)
        # the next hand-over, 3 s after the first: it reaches one endpoint or the other (the bound against a hang)
        wait_for(lambda: records_of(agent, path, "outcome") or select.select([old], [], [], 0)[0],
                 what="the next hand-over at either endpoint")
        reached_old = bool(select.select([old], [], [], 0)[0])
        assert not reached_old, "the retry went to the endpoint the policy no longer names"
        out = assert_uploaded_once(agent, path, bound=120)
        assert out["DSAGENT_EGRESS_HANDOVER"] == "2", out
    finally:
        old.close()


def fd_links(pid):
    """What each fd of @pid names (/proc/PID/fd, read as root)."""
    links = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass  # closed meanwhile
    return links


@test
def an_uploads_process_holds_no_other_uploads_files():
    """An upload's process, the one that talks to the store (hostile responses, TLS), holds its own artifact and
    keys, never those of the uploads queued or running beside it (another store's keys, another user's dump), nor
    the pidfds of the others: it was forked from the server, which holds them all."""
    gw = store()
    target = Target(SVC)
    agent = start_agent(policy('timeout = "10m"\nretries = 0\n'))
    server = wait_for(lambda: server_pid(agent), what="the egress process's server")
    gw.pause_rgw()  # each upload is held: the frozen store takes its connection and answers nothing
    try:
        paths = [dump(agent, target.pid) for _ in range(6)]  # four run, two wait in the server's queue
        running = wait_for(lambda: len(children_of(server)) == 4 and children_of(server),
                           what="four uploads under way")
        # the server holds the two queued artifacts open: a slot freed starts the fifth while the sixth waits
        wait_for(lambda: sum(1 for l in fd_links(server) if l in paths) == 2, what="two uploads queued")
        os.kill(running[0], signal.SIGKILL)
        fifth = wait_for(lambda: [c for c in children_of(server) if c not in running], what="the fifth upload")[0]
        # its files are sent with its request: wait until it has them (it holds them from its fork on)
        mine = wait_for(lambda: [l for l in fd_links(fifth) if l in paths], what="the fifth upload's artifact")
        links = fd_links(fifth)
        assert len(mine) == 1, ("an upload's process holds other uploads' artifacts", mine)
        assert not [l for l in links if "pidfd" in l], ("an upload's process holds other uploads' pidfds", links)
        keys = [l for l in links if l.endswith("/keys")]
        assert len(keys) == 1, ("an upload's process holds other uploads' keys", keys)
        # and those forked while others ran (no queue then): none holds another's pidfd or answer socket
        for pid in running[1:]:
            links = fd_links(pid)
            assert not [l for l in links if "pidfd" in l], ("an upload's process holds other uploads' pidfds", links)
    finally:
        gw.resume_rgw()


if __name__ == "__main__":
    run_tests()

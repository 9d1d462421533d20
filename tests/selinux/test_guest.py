#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""dsagent under SELinux enforcing, for real: a Debian 12 guest booted enforcing with the module.

guest.py builds (once, cached) and boots the guest; guest-suite.sh runs inside it and does the
agent's whole job as an ops user. Here the results are judged: the guest booted enforcing, every
step of the job succeeded, the agent ran in dsagent_t, and the audit log holds no AVC denial of
dsagent_t or of anything acting on dsagent's types. A guest that cannot be built or booted fails
the first test with the reason; nothing is skipped.
"""
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../packaging"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import guest  # noqa: E402
from tap import run_tests, test  # noqa: E402

RESULTS = os.environ.get("DSAGENT_GUEST_RESULTS") or tempfile.mkdtemp(prefix="dsagent-selinux-results.")


def results(name):
    with open(os.path.join(RESULTS, name), errors="replace") as f:
        return f.read()


@test
def guest_boots_enforcing_with_the_module():
    try:
        times = guest.run(RESULTS)
    except guest.GuestError as e:
        raise AssertionError(f"the SELinux guest cannot run here: {e}") from None
    log = results("run.log")
    virt = re.search(r"^virt: (\S+)", log, re.M)
    print(f"# timings (s): " + ", ".join(f"{k} {v:.0f}" for k, v in times.items()) +
          f"; guest virt: {virt.group(1) if virt else '?'}; results in {RESULTS}")
    assert "getenforce: Enforcing" in log, log[:2000]
    assert re.search(r"^dsagent\b", log, re.M), "the module is not loaded:\n" + log[:2000]


@test
def the_agent_runs_in_dsagent_t():
    ps = results("ps-Z.txt")
    assert re.search(r":dsagent_t:\S+\s+\d+\s+\S+\s+\S+\s+dsagent$", ps, re.M), ps


@test
def every_step_of_the_job_succeeds():
    steps = results("steps")
    failed = [line for line in steps.splitlines() if line.startswith("not ok")]
    detail = "".join(f"\n--- {s}\n" + results(s.split()[2] + ".out")[-1500:]
                     for s in failed if os.path.exists(os.path.join(RESULTS, s.split()[2] + ".out")))
    assert steps.count("\nok ") + steps.startswith("ok ") >= 20 and not failed, steps + detail


@test
def mac_keeps_a_confined_user_off_a_runtime_socket_dsctl_serves_them():
    """dst-mal (user_u) owns the runtime, so file modes let them in; in user_t the kernel refuses by MAC."""
    assert ":user_r:user_t:" in results("mac-id.txt"), results("mac-id.txt")
    assert results("mac-connect.out").startswith("refused"), results("mac-connect.out")
    denied = [d for d in guest.avc_denials(RESULTS)
              if "scontext=user_u:user_r:user_t" in d and "dotnet-diagnostic-" in d and "denied" in d]
    assert denied, "no AVC record shows MAC refusing user_t the runtime's socket"
    for command in ("info", "stacks", "dump"):
        assert results(f"{command}.rc").strip() == "0", results(f"mac-{command}.out")


@test
def the_egress_process_runs_in_its_own_domain_and_reaches_the_store():
    """`dsagent --check-policy --egress` in dsagent_t execs dsagent-egress into dsagent_egress_t, which reads the
    store's keys (from /etc/dsagent/egress and from the unit's credentials) and connects to a store on
    127.0.0.1:8080; the store names the process at the other end of its connection by the kernel's tables."""
    for n in (1, 2, 3):
        peer = results(f"egress-peer.{n}.txt")
        assert "comm=dsagent-egress label=system_u:system_r:dsagent_egress_t:s0 " in peer, (n, peer)
        # its parent the supervisor, in the same domain, and the agent above it in dsagent_t
        assert "parent_comm=dsagent-egress parent_label=system_u:system_r:dsagent_egress_t:s0 " in peer, (n, peer)
        assert "agent_comm=dsagent agent_label=system_u:system_r:dsagent_t:s0" in peer, (n, peer)
        assert "Credential=AKIAGUESTEXAMPLE/" in results(f"egress-request.{n}.txt"), n
    # SELinux clears PR_SET_PDEATHSIG on the transition: the egress process sets it again, and goes with a killed
    # agent while it holds the store's connection (before, it outlived the agent until the store answered)
    assert results("egress-pdeath.txt").startswith("egress ") and " died with its agent " in \
        results("egress-pdeath.txt"), results("egress-pdeath.txt")
    # the upload's egress process under the unit: as its own user, in its domain, never as root
    user = results("egress-upload-user.txt")
    assert user.startswith("dsagent-egress ") and "dsagent_egress_t" in user and not user.startswith("root"), user


@test
def no_avc_denial_for_dsagent():
    denials = [d for d in guest.avc_denials(RESULTS) if "dsagent" in d]
    assert not denials, "".join(denials)


if __name__ == "__main__":
    run_tests(needs_root=True)

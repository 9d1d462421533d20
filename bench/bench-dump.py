#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Time dsctl dump against the same dump asked of the runtime directly, in one run.

Both paths dump the same live target (its heap holds --allocate-mb MiB of
managed memory), interleaved, N times each. The direct path is what root with
sudo would do: one GenerateCoreDump3 request on the runtime's socket, a file
written by createdump. The agent's path adds policy, the staging directory
and its FIFO in the target's /tmp, the splice of every byte from the FIFO
into an unnamed file of dump_dir with the guards checked as it grows, the ELF
check, the ACL and the link. Prints medians and their ratio, and the agent's
peak resident memory (VmHWM) after a full dump, which shows that dumps never
pass through its memory.

Usage (as root): bench/bench-dump.py BUILD_DIR [--allocate-mb 512] [--runs 5]
"""
import argparse
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

USER = "dsbench"


def start_target(app, tmpdir, megabytes):
    proc = subprocess.Popen(["setpriv", f"--reuid={USER}", f"--regid={USER}", "--init-groups", "env", "-i",
                             f"TMPDIR={tmpdir}", "DOTNET_CLI_TELEMETRY_OPTOUT=1", app, "--allocate-mb",
                             str(megabytes)], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("ready"):
        raise SystemExit(f"target did not start: {line!r}")
    return proc


def socket_path(pid, tmpdir):
    stat = open(f"/proc/{pid}/stat").read()
    start = stat[stat.rindex(")") + 2:].split()[19]
    return os.path.join(tmpdir, f"dotnet-diagnostic-{pid}-{start}-socket")


def direct_dump(sock_path, out_path, dump_type):
    name = (out_path + "\0").encode("utf-16-le")
    payload = struct.pack("<I", len(name) // 2) + name + struct.pack("<II", dump_type, 0)
    message = b"DOTNET_IPC_V1\0" + struct.pack("<HBBH", 20 + len(payload), 1, 3, 0) + payload
    started = time.monotonic()
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(sock_path)
        s.sendall(message)
        reply = s.recv(65536)
    elapsed = time.monotonic() - started
    if reply[16:18] != b"\xff\x00":
        raise SystemExit(f"direct dump failed: {reply!r}")
    return elapsed


def agent_dump(dsctl, agent_socket, pid, dump_type):
    started = time.monotonic()
    r = subprocess.run([dsctl, "--socket", agent_socket, "--json", "dump", str(pid), "--type", dump_type],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    elapsed = time.monotonic() - started
    if r.returncode != 0:
        raise SystemExit(f"agent dump failed: {r.stderr}")
    return elapsed


def vm_hwm_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("--allocate-mb", type=int, default=512)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    app_dir = subprocess.run([os.path.join(src, "tests/target-app/build.sh")], check=True, stdout=subprocess.PIPE,
                             text=True).stdout.strip()
    if subprocess.run(["id", "-u", USER], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER], check=True)

    work = tempfile.mkdtemp(prefix="dsagent-bench-dump-")
    os.chmod(work, 0o755)
    tmpdir = os.path.join(work, "target-tmp")
    os.mkdir(tmpdir, 0o700)
    shutil.chown(tmpdir, USER, USER)
    direct_out = os.path.join(tmpdir, "direct.core")
    policy = os.path.join(work, "policy.toml")
    with open(policy, "w") as f:
        f.write(f'[agent]\ndump_dir = "{work}/dumps"\nmax_use = "1T"\nkeep_free = "1"\n')
    os.chmod(policy, 0o644)
    agent_socket = os.path.join(work, "agent.sock")
    target = agent = None
    try:
        target = start_target(os.path.join(app_dir, "DsTestTarget"), tmpdir, args.allocate_mb)
        agent = subprocess.Popen([os.path.join(args.build, "agent/dsagent"), "--listen", agent_socket, "--listen-mode", "0666", "--policy",
                                  policy, "--runtime-dir", os.path.join(work, "run"), "--audit", "stderr"],
                                 stderr=subprocess.DEVNULL)
        while not os.path.exists(agent_socket):
            time.sleep(0.05)
        dsctl = os.path.join(args.build, "client/dsctl")
        sock = socket_path(target.pid, tmpdir)
        via_agent, direct = [], []
        for _ in range(args.runs):
            direct.append(direct_dump(sock, direct_out, 2))
            os.unlink(direct_out)
            via_agent.append(agent_dump(dsctl, agent_socket, target.pid, "heap"))
            for name in os.listdir(os.path.join(work, "dumps")):
                os.unlink(os.path.join(work, "dumps", name))
        size = None
        agent_dump(dsctl, agent_socket, target.pid, "full")
        for name in os.listdir(os.path.join(work, "dumps")):
            size = os.path.getsize(os.path.join(work, "dumps", name))
        hwm = vm_hwm_kib(agent.pid)

        print(f"heap dumps of a target holding {args.allocate_mb} MiB, {args.runs} runs each, interleaved")
        print(f"{'path':<10} {'median s':>10} {'min s':>8} {'max s':>8}")
        for label, values in (("direct", direct), ("agent", via_agent)):
            print(f"{label:<10} {statistics.median(values):>10.3f} {min(values):>8.3f} {max(values):>8.3f}")
        ratio = statistics.median(via_agent) / statistics.median(direct)
        print(f"agent/direct median ratio: {ratio:.3f}")
        print(f"agent peak RSS (VmHWM) after a full dump of {size / 2**20:.0f} MiB: {hwm / 1024:.1f} MiB")
        print(f"RESULT median_ratio={ratio:.3f} full_dump_mib={size / 2**20:.0f} agent_hwm_mib={hwm / 1024:.1f}")
    finally:
        for p in (agent, target):
            if p:
                p.kill()
                p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Run bench-info against a live .NET target owned by an unprivileged user and a
# dsagent started for the occasion; always cleans up after itself.
#
# Usage (as root): bench/run-bench-info.sh [BUILD_DIR [bench-info options...]]
#   BUILD_DIR defaults to ./build; further arguments (--iterations N, --warmup N)
#   are passed to bench-info.
set -euo pipefail

die() {
        echo "run-bench-info: $*" >&2
        exit 1
}

[ "$(id -u)" -eq 0 ] || die "must run as root (the direct path talks to another user's runtime)"

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
build=$(cd "${1:-./build}" && pwd) || die "no build directory ${1:-./build}"
shift || true

dsagent="$build/agent/dsagent"
bench_info="$build/bench/bench-info"
for f in "$dsagent" "$bench_info"; do
        [ -x "$f" ] || die "$f is missing; build first (ninja -C $build)"
done

user=dsbench
tmp=
target_tmp=
target_pid=
agent_pid=

cleanup() {
        local rc=$?
        set +e
        if [ -n "$agent_pid" ]; then
                kill "$agent_pid" 2>/dev/null
                wait "$agent_pid" 2>/dev/null
        fi
        if [ -n "$target_pid" ]; then
                kill "$target_pid" 2>/dev/null
                wait "$target_pid" 2>/dev/null
        fi
        [ -n "$tmp" ] && rm -rf "$tmp"
        [ -n "$target_tmp" ] && rm -rf "$target_tmp"
        exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

app=$("$src/tests/target-app/build.sh") || die "building the target app failed"
[ -x "$app/DsTestTarget" ] || die "no DsTestTarget in $app"

if ! id -u "$user" >/dev/null 2>&1; then
        useradd -r -M -s /usr/sbin/nologin "$user" || die "cannot create user $user"
fi

tmp=$(mktemp -d)
target_tmp=$(mktemp -d)
chown "$user:$user" "$target_tmp"
chmod 0700 "$target_tmp"

setpriv --reuid="$user" --regid="$user" --init-groups \
        env -i TMPDIR="$target_tmp" PATH=/usr/bin:/bin DOTNET_CLI_TELEMETRY_OPTOUT=1 \
        "$app/DsTestTarget" >"$tmp/target.out" 2>&1 &
target_pid=$!

# The runtime names its socket after its pid and start time (field 22 of
# /proc/PID/stat, counted past the command name, which may hold spaces).
socket=
for _ in $(seq 200); do
        kill -0 "$target_pid" 2>/dev/null || die "the target exited early: $(cat "$tmp/target.out")"
        if [ -z "$socket" ]; then
                stat=$(cat "/proc/$target_pid/stat")
                read -r -a fields <<<"${stat##*) }"
                socket="$target_tmp/dotnet-diagnostic-$target_pid-${fields[19]}-socket"
        fi
        [ -S "$socket" ] && break
        sleep 0.1
done
[ -S "$socket" ] || die "no diagnostic socket at $socket after 20s"

# The built-in policy's request budget (100 a second, bursts of 1000, per user,
# root included) would refuse most of the run; this one never binds. The
# agent's notes of work in progress stay in $tmp, apart from any other agent's.
printf '%s\n' '[agent]' 'max_requests_per_second = 100000' 'max_request_burst = 1000000' >"$tmp/policy.toml"
"$dsagent" --listen "$tmp/agent.sock" --listen-mode 0666 --policy "$tmp/policy.toml" --runtime-dir "$tmp/run" \
        --audit stderr 2>/dev/null &
agent_pid=$!
for _ in $(seq 50); do
        [ -S "$tmp/agent.sock" ] && break
        kill -0 "$agent_pid" 2>/dev/null || die "dsagent exited early"
        sleep 0.1
done
[ -S "$tmp/agent.sock" ] || die "dsagent did not create $tmp/agent.sock in 5s"

echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(uname -srm), $(nproc) CPUs, $(dotnet --version 2>/dev/null | sed 's/^/.NET SDK /')"
echo "# target pid $target_pid (user $user), runtime socket $socket"
"$bench_info" --agent-socket "$tmp/agent.sock" --runtime-socket "$socket" --pid "$target_pid" "$@"

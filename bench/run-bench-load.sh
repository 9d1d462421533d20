#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Run bench-load: a live .NET target of the user dsbench, a dsagent whose
# policy lets the users dsbench-c0..3 (group dsbench-clients) ask info of it,
# and 1, 8 and 64 concurrent clients; always cleans up after itself.
#
# Usage (as root): bench/run-bench-load.sh [BUILD_DIR [bench-load options...]]
#   Further arguments (--clients 1,8,64, --seconds S, --rounds N,
#   --agent-users LIST) go to bench-load.
set -euo pipefail
bench_name=run-bench-load
source "$(dirname "$0")/bench-env.sh"
bench_setup "${1:-./build}"
shift || true

bench_load="$build/bench/bench-load"
[ -x "$bench_load" ] || bench_die "$bench_load is missing; build first (ninja -C $build)"

# The agent admits at most 32 connections of one uid at once, and runs at most
# two worker jobs of one uid at once: 64 clients are four users of 16.
client_users=dsbench-c0,dsbench-c1,dsbench-c2,dsbench-c3
bench_ensure_user dsbench
for u in ${client_users//,/ }; do
        bench_ensure_user "$u" dsbench-clients
done

bench_start_target dsbench
bench_start_agent "$bench_policy_agent

[[rule]]
name = \"bench-clients\"
groups = [\"dsbench-clients\"]
commands = [\"info\", \"ps\"]
targets.users = [\"dsbench\"]"

bench_banner
"$bench_load" --agent-socket "$agent_sock" --runtime-socket "$target_socket" --pid "$target_pid" \
        --agent-pid "$agent_pid" --agent-users "$client_users" "$@"

#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Run bench-ps: a live .NET target of the user dsbench, a dsagent under the
# built-in rules (root; each user its own processes) with a request budget
# that never binds, and up to 10,000 extra processes of dsbench-p0..3 (and
# nine of dsbench) started and killed by bench-ps itself; always cleans up
# after itself.
#
# Usage (as root): bench/run-bench-ps.sh [BUILD_DIR [bench-ps options...]]
#   Further arguments (--levels 0,1000,5000,10000, --iterations N,
#   --ps-clients N, --noread-clients N, --seconds S, --rounds N) go to bench-ps.
set -euo pipefail
bench_name=run-bench-ps
source "$(dirname "$0")/bench-env.sh"
bench_setup "${1:-./build}"
shift || true

bench_ps="$build/bench/bench-ps"
[ -x "$bench_ps" ] || bench_die "$bench_ps is missing; build first (ninja -C $build)"

other_users=dsbench-p0,dsbench-p1,dsbench-p2,dsbench-p3
bench_ensure_user dsbench
for u in ${other_users//,/ }; do
        bench_ensure_user "$u"
done

bench_start_target dsbench
bench_start_agent "$bench_policy_agent"

bench_banner
echo "# pid_max $(cat /proc/sys/kernel/pid_max), threads-max $(cat /proc/sys/kernel/threads-max), ulimit -u $(ulimit -u), $(ls /proc | grep -c '^[0-9]') processes now"
"$bench_ps" --agent-socket "$agent_sock" --pid "$target_pid" --agent-pid "$agent_pid" --user dsbench \
        --other-users "$other_users" "$@"

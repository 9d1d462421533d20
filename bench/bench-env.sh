# SPDX-License-Identifier: LGPL-2.1-or-later
# Sourced by the run-bench-*.sh scripts: users, a real .NET target, a dsagent
# under a policy of the script's, and a clean-up that always runs.
#
# After `bench_setup BUILD_DIR`: $src, $build, $tmp (0755, removed at exit).
# bench_start_target USER: $target_pid, $target_socket (TMPDIR private, 0700).
# bench_start_agent POLICY_TEXT: $agent_pid, $agent_sock.
# Every process started here is killed by its pid at exit.

bench_die() {
        echo "${bench_name:-bench}: $*" >&2
        exit 1
}

bench_pids=()
bench_dirs=()

bench_cleanup() {
        local rc=$?
        set +e
        # newest first: the agent before the target
        for ((i = ${#bench_pids[@]} - 1; i >= 0; i--)); do
                kill "${bench_pids[i]}" 2>/dev/null
                wait "${bench_pids[i]}" 2>/dev/null
        done
        for d in "${bench_dirs[@]}"; do
                rm -rf "$d"
        done
        exit "$rc"
}

bench_setup() {
        [ "$(id -u)" -eq 0 ] || bench_die "must run as root (it starts processes as other users)"
        here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
        src=$(cd "$here/.." && pwd)
        build=$(cd "${1:-./build}" && pwd) || bench_die "no build directory ${1:-./build}"
        dsagent="$build/agent/dsagent"
        [ -x "$dsagent" ] || bench_die "$dsagent is missing; build first (ninja -C $build)"
        trap bench_cleanup EXIT
        trap 'exit 130' INT
        trap 'exit 143' TERM
        tmp=$(mktemp -d)
        bench_dirs+=("$tmp")
        # clients of other users reach the agent's socket in here
        chmod 0755 "$tmp"
}

# bench_ensure_user NAME [GROUP]: a system user (and its membership of GROUP, created if missing)
bench_ensure_user() {
        local user=$1 group=${2:-}
        if [ -n "$group" ] && ! getent group "$group" >/dev/null; then
                groupadd -r "$group" || bench_die "cannot create group $group"
        fi
        if ! id -u "$user" >/dev/null 2>&1; then
                useradd -r -M -s /usr/sbin/nologin "$user" || bench_die "cannot create user $user"
        fi
        if [ -n "$group" ] && ! id -nG "$user" | tr ' ' '\n' | grep -qx "$group"; then
                usermod -a -G "$group" "$user" || bench_die "cannot add $user to $group"
        fi
}

bench_start_target() {
        local user=$1 app target_tmp stat fields
        app=$("$src/tests/target-app/build.sh") || bench_die "building the target app failed"
        [ -x "$app/DsTestTarget" ] || bench_die "no DsTestTarget in $app"
        target_tmp=$(mktemp -d)
        bench_dirs+=("$target_tmp")
        chown "$user:" "$target_tmp"
        chmod 0700 "$target_tmp"
        setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups \
                env -i TMPDIR="$target_tmp" PATH=/usr/bin:/bin DOTNET_CLI_TELEMETRY_OPTOUT=1 \
                "$app/DsTestTarget" >"$tmp/target.out" 2>&1 &
        target_pid=$!
        bench_pids+=("$target_pid")
        # the runtime names its socket after its pid and start time (field 22 of /proc/PID/stat)
        target_socket=
        for _ in $(seq 200); do
                kill -0 "$target_pid" 2>/dev/null || bench_die "the target exited early: $(cat "$tmp/target.out")"
                if [ -z "$target_socket" ]; then
                        stat=$(cat "/proc/$target_pid/stat")
                        read -r -a fields <<<"${stat##*) }"
                        target_socket="$target_tmp/dotnet-diagnostic-$target_pid-${fields[19]}-socket"
                fi
                [ -S "$target_socket" ] && return 0
                sleep 0.1
        done
        bench_die "no diagnostic socket at $target_socket after 20s"
}

# bench_start_agent POLICY_TEXT: the agent's audit records are discarded; its notes go to $tmp/run
bench_start_agent() {
        printf '%s\n' "$1" >"$tmp/policy.toml"
        "$dsagent" --check-policy "$tmp/policy.toml" >/dev/null || bench_die "the benchmark's policy does not load"
        agent_sock="$tmp/agent.sock"
        "$dsagent" --listen "$agent_sock" --listen-mode 0666 --policy "$tmp/policy.toml" --runtime-dir "$tmp/run" \
                --audit stderr 2>"${BENCH_AGENT_LOG:-/dev/null}" &
        agent_pid=$!
        bench_pids+=("$agent_pid")
        for _ in $(seq 50); do
                [ -S "$agent_sock" ] && return 0
                kill -0 "$agent_pid" 2>/dev/null || bench_die "dsagent exited early"
                sleep 0.1
        done
        bench_die "dsagent did not create $agent_sock in 5s"
}

# The request budget of the built-in policy (100 a second, bursts of 1000, per
# user) would refuse most of a benchmark's requests; these limits never bind.
bench_policy_agent='[agent]
max_requests_per_second = 100000
max_request_burst = 1000000'

bench_banner() {
        echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(uname -srm), $(nproc) CPUs, $(dotnet --version 2>/dev/null | sed 's/^/.NET SDK /')"
        echo "# dsagent $dsagent (pid $agent_pid), target pid $target_pid, runtime socket $target_socket"
}

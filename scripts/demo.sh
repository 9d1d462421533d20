#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Install what is missing, build, and show dsagent's main job in about a
# minute. Run as root.
#
# dsagent listens on a socket of its own under the shipped default policy
# and one drop-in; a sample .NET app runs as its own service user with a
# private TMPDIR (mode 0700). Then, as an ops user and not as root: ps and
# info, a dump only that user may read (its ACL, by getfacl), a short trace
# and a few rows of counters; an unrelated user sees nothing. Last, the audit
# records of all of it. The users it makes (unused names, see
# scratch-users.sh) are removed and everything it starts is stopped on exit.
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
build=${DSAGENT_BUILD_DIR:-$src/build}
. "$src/scripts/scratch-users.sh"

[ "$(id -u)" -eq 0 ] || { echo "demo.sh: run as root" >&2; exit 1; }

"$src/scripts/install-deps.sh"
[ -d "$build" ] || meson setup "$build" "$src" >/dev/null
ninja -C "$build" >/dev/null
app=$("$src/tests/target-app/build.sh")
dsagent=$build/agent/dsagent dsctl=$build/client/dsctl

work=$(mktemp -d /tmp/dsagent-demo.XXXXXX)
agent_pid= app_pid=
cleanup() {
        if [ -n "$app_pid" ]; then kill "$app_pid" 2>/dev/null || true; fi
        if [ -n "$agent_pid" ]; then kill "$agent_pid" 2>/dev/null || true; fi
        wait 2>/dev/null || true
        rm -rf "$work"
        scratch_cleanup
}
trap cleanup EXIT

svc=$(scratch_free_name dsdemo-svc)
scratch_user "$svc" --system
# no subordinate ids (useradd gives a new user the next free range): userdel counts a process of any uid in
# them as the user's, and the demo's users need none
ops=$(scratch_free_name dsdemo-ops)
scratch_user "$ops" -K SUB_UID_COUNT=0 -K SUB_GID_COUNT=0
visitor=$(scratch_free_name dsdemo-visitor)
scratch_user "$visitor" -K SUB_UID_COUNT=0 -K SUB_GID_COUNT=0

chmod 755 "$work"
install -d -m 700 -o "$svc" "$work/app-tmp"
# what the ops user keeps: a trace and counters, in a directory of its own
install -d -m 700 -o "$ops" "$work/ops"

as() { setpriv --reuid="$1" --regid="$1" --init-groups --reset-env env DSAGENT_SOCKET="$work/dsagent.sock" "${@:2}"; }
if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold= plain=; fi
step() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }
show() { printf '$ %s\n' "$*"; }

step "the policy: the shipped default (root, and each process's own user), and a drop-in for $ops"
# installed as an administrator would: root's, 0644; dumps go to the demo's own directory
sed "s|^dump_dir = .*|dump_dir = \"$work/dumps\"|" "$src/policy/examples/policy.toml" >"$work/policy.toml"
install -d -m 0755 "$work/policy.d"
cat >"$work/policy.d/50-ops.toml" <<POLICY
# $ops, on call, may diagnose what runs as $svc: never a full dump, at most a minute of tracing
[[rule]]
name = "ops-diagnoses-svc"
users = ["$ops"]
commands = ["ps", "info", "dump", "trace", "counters"]
targets.users = ["$svc"]
dump_types = ["mini", "heap"]
trace_profiles = ["cpu-sampling"]
max_duration = "1m"
rate_limit = "20/1h"
POLICY
chmod 0644 "$work/policy.toml" "$work/policy.d/50-ops.toml"
sed -n '/^\[\[rule\]\]/,$p' "$work/policy.d/50-ops.toml"
"$dsagent" --check-policy "$work/policy.toml"

step "dsagent listens on $work/dsagent.sock"
"$dsagent" --listen "$work/dsagent.sock" --listen-mode 0666 --policy "$work/policy.toml" --runtime-dir "$work/run" \
        --audit stderr 2>"$work/audit.log" &
agent_pid=$!

step "a .NET app runs as $svc with TMPDIR=$work/app-tmp (mode 0700: no one else can reach its socket)"
# setpriv and env exec into the app, so $! is the app's own pid
setpriv --reuid="$svc" --regid="$svc" --init-groups --reset-env \
        env -i TMPDIR="$work/app-tmp" DOTNET_CLI_TELEMETRY_OPTOUT=1 "$app/DsTestTarget" --emit-events 100 \
        >"$work/app.out" &
app_pid=$!
for _ in $(seq 100); do
        grep -q '^ready' "$work/app.out" 2>/dev/null && [ -S "$work/dsagent.sock" ] && break
        sleep 0.1
done
ls -l "$work/app-tmp"

step "as $ops: the .NET processes $ops may act on, and one's info"
show dsctl ps
as "$ops" "$dsctl" ps
show dsctl info "$app_pid"
as "$ops" "$dsctl" info "$app_pid"

step "as $ops: a dump, readable by $ops alone (and root)"
show dsctl dump "$app_pid" --type mini
out=$(as "$ops" "$dsctl" dump "$app_pid" --type mini)
echo "$out"
dump=$(sed -n 's/.*stored at \([^ ]*\).*/\1/p' <<<"$out" | head -n 1)
show getfacl "$dump"
getfacl --absolute-names "$dump"
show "head -c 4 $dump | od -c   # as $ops: an ELF core"
as "$ops" head -c 4 "$dump" | od -c | head -n 1
show "head -c 4 $dump   # as $visitor"
as "$visitor" head -c 4 "$dump" || echo "(exit status $?)"

step "as $ops: a 3-second CPU trace, in the file format dotnet-trace writes"
show dsctl trace "$app_pid" --duration 3 -o "$work/ops/trace.nettrace"
as "$ops" "$dsctl" trace "$app_pid" --duration 3 -o "$work/ops/trace.nettrace"
ls -l "$work/ops/trace.nettrace"

step "as $ops: System.Runtime counters, every second for 3 seconds (the first rows)"
show dsctl counters "$app_pid" --interval 1 --duration 3 -o "$work/ops/counters.csv"
as "$ops" "$dsctl" counters "$app_pid" --interval 1 --duration 3 -o "$work/ops/counters.csv"
head -n 8 "$work/ops/counters.csv"
echo "... $(($(wc -l <"$work/ops/counters.csv") - 1)) rows in all"

step "as $visitor, whom no rule names: the process does not exist for them"
show dsctl info "$app_pid"
as "$visitor" "$dsctl" info "$app_pid" || echo "(exit status $?)"

step "the audit trail: one record per decision, and one per dump and session"
echo "(under systemd they go to the journal, where journalctl -x explains each one)"
sed -n 's/.* MESSAGE="\([^"]*\)".*/\1/p' "$work/audit.log"
step "the dump's record, whole"
grep 'MESSAGE_ID="b44be14ffedf48ee806826f1d59bcc4e"' "$work/audit.log" |
        sed 's/^dsagent-audit: //; s/" \([A-Z_]*=\)"/"\n\1"/g'

#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Install what is missing, build, and show dsagent at work. Run as root.
#
# Starts dsagent, starts a sample .NET app as its own service user with a
# private TMPDIR (mode 0700), then asks as unprivileged users: the app's own
# user may list it and read its info; an unrelated user is denied. Finally it
# shows the audit trail. Everything it starts is stopped on exit.
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
build=${DSAGENT_BUILD_DIR:-$src/build}
svc=dsdemo-svc
visitor=dsdemo-visitor

[ "$(id -u)" -eq 0 ] || { echo "demo.sh: run as root" >&2; exit 1; }

"$src/scripts/install-deps.sh"
[ -d "$build" ] || meson setup "$build" "$src" >/dev/null
ninja -C "$build" >/dev/null
app=$("$src/tests/target-app/build.sh")

id -u "$svc" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$svc"
id -u "$visitor" >/dev/null 2>&1 || useradd --no-create-home --shell /usr/sbin/nologin "$visitor"

work=$(mktemp -d /tmp/dsagent-demo.XXXXXX)
chmod 755 "$work"
app_tmp="$work/app-tmp"
mkdir -m 700 "$app_tmp"
chown "$svc:" "$app_tmp"
agent_pid= app_pid=
cleanup() {
        [ -n "$app_pid" ] && kill "$app_pid" 2>/dev/null
        [ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null
        wait 2>/dev/null
        rm -rf "$work"
}
trap cleanup EXIT

as() { setpriv --reuid="$1" --regid="$1" --init-groups --reset-env "${@:2}"; }
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

# the shipped default policy, installed as an administrator would: root's, 0644
install -m 0644 -o root -g root "$src/policy/examples/policy.toml" "$work/policy.toml"
"$build/agent/dsagent" --check-policy "$work/policy.toml"

step "dsagent listens on $work/dsagent.sock under the shipped default policy (root, and each process's own user)"
"$build/agent/dsagent" --listen "$work/dsagent.sock" --policy "$work/policy.toml" --audit stderr 2>"$work/audit.log" &
agent_pid=$!

step "a .NET app runs as $svc with TMPDIR=$app_tmp (mode 0700: no one else can reach its socket)"
# setpriv and env exec into the app, so $! is the app's own pid
setpriv --reuid="$svc" --regid="$svc" --init-groups --reset-env \
        env -i TMPDIR="$app_tmp" DOTNET_CLI_TELEMETRY_OPTOUT=1 "$app/DsTestTarget" --demo >"$work/app.out" &
app_pid=$!
for _ in $(seq 100); do grep -q '^ready' "$work/app.out" 2>/dev/null && break; sleep 0.1; done
ls -l "$app_tmp"

export DSAGENT_SOCKET="$work/dsagent.sock"
step "as $svc: dsctl ps"
as "$svc" env DSAGENT_SOCKET="$DSAGENT_SOCKET" "$build/client/dsctl" ps

step "as $svc: dsctl info $app_pid"
as "$svc" env DSAGENT_SOCKET="$DSAGENT_SOCKET" "$build/client/dsctl" info "$app_pid"

step "as $visitor: dsctl info $app_pid (not the app's user: denied)"
as "$visitor" env DSAGENT_SOCKET="$DSAGENT_SOCKET" "$build/client/dsctl" info "$app_pid" || echo "(exit status $?)"

step "a drop-in grants $visitor info (never dumps) on $svc's processes; the agent reloads"
install -d -m 0755 "$work/policy.d"
cat >"$work/policy.d/50-visitor.toml" <<POLICY
[[rule]]
name = "visitor-reads-info"
users = ["$visitor"]
commands = ["ps", "info"]
targets.users = ["$svc"]
rate_limit = "10/1h"
POLICY
chmod 0644 "$work/policy.d/50-visitor.toml"
"$build/agent/dsagent" --check-policy "$work/policy.toml"
kill -HUP "$agent_pid"
# the agent records every load; wait for the second one
for _ in $(seq 100); do [ "$(grep -c 'DSAGENT_POLICY_LOADED="yes"' "$work/audit.log")" -ge 2 ] && break; sleep 0.1; done

step "as $visitor: dsctl explain $app_pid info, then dump"
as "$visitor" env DSAGENT_SOCKET="$DSAGENT_SOCKET" "$build/client/dsctl" explain "$app_pid" info
as "$visitor" env DSAGENT_SOCKET="$DSAGENT_SOCKET" "$build/client/dsctl" explain "$app_pid" dump --type full ||
        echo "(exit status $?)"

step "as $visitor: dsctl info $app_pid (allowed by the rule now)"
as "$visitor" env DSAGENT_SOCKET="$DSAGENT_SOCKET" "$build/client/dsctl" info "$app_pid"

step "the audit trail: one record per decision (in the journal when dsagent runs under systemd)"
sed 's/^dsagent-audit: //' "$work/audit.log"

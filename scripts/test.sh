#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Install what is missing, build, and run every test: unit, fuzz corpus replay
# and integration (real users, real daemon, real .NET runtime). Run as root.
# The last line of output is "N passed, N failed", after the ten slowest tests.
# The users and the group the tests run as are removed again before it
# (scratch-users.sh).
#
# --quick, for development: the plain build's unit, fuzz, toml and integration
# suites only; no sanitizer pass, no systemd, packaging or selinux suites.
#
# --repeat N [--load] [--sanitize] [FILE[::CASE]...], to find what fails only
# sometimes: the chosen integration files or cases (all of them if none) N
# times (tests/repeat.py), with one busy process per core beside them under
# --load, in the sanitizer build under --sanitize; it prints each case's passes
# out of its runs. Nothing is retried, here or anywhere in the suite.
set -euo pipefail

usage() {
        echo "usage: $0 [--quick | --repeat N [--load] [--sanitize] [FILE[::CASE]...]]" >&2
        exit 2
}
quick=false
repeat=0
repeat_args=()
repeat_sanitize=false
case "${1-}" in
--quick) [ $# -eq 1 ] || usage; quick=true ;;
--repeat)
        [[ "${2-}" =~ ^[1-9][0-9]*$ ]] || usage
        repeat=$2
        shift 2
        for arg in "$@"; do
                case "$arg" in
                --load) repeat_args+=(--load) ;;
                --sanitize) repeat_sanitize=true ;;
                -*) usage ;;
                *) repeat_args+=("$arg") ;;
                esac
        done
        ;;
"") ;;
*) usage ;;
esac

src=$(cd "$(dirname "$0")/.." && pwd)
build=${DSAGENT_BUILD_DIR:-$src/build}
. "$src/scripts/scratch-users.sh"

[ "$(id -u)" -eq 0 ] || { echo "test.sh: run as root (the tests create users and trace processes)" >&2; exit 1; }

"$src/scripts/install-deps.sh"

# test_hooks: the sandbox tests make a forbidden system call through a path only test builds have
if [ -d "$build" ]; then
        meson setup --reconfigure -Dtest_hooks=true "$build" "$src" >/dev/null
else
        meson setup -Dtest_hooks=true "$build" "$src" >/dev/null
fi
ninja -C "$build"

# The integration tests run as these users, ALICE in the group OPS (tests/integration/harness.py,
# which makes whatever is missing); a real user or group of the same name stops the run here.
trap scratch_cleanup EXIT
harness() { (cd "$src/tests/integration" && python3 -c "import harness as h; print($1)"); }
read -r -a test_users <<<"$(harness 'h.SVC, h.ALICE, h.MALLORY')"
test_group=$(harness h.OPS)
for user in "${test_users[@]}"; do
        scratch_user "$user"
        scratch_subordinate_ids "$user"
done
scratch_group "$test_group"

if [ "$repeat" -gt 0 ]; then
        repeat_build=$build
        if $repeat_sanitize; then
                repeat_build="$build-sanitize"
                reconfigure=()
                [ -d "$repeat_build" ] && reconfigure=(--reconfigure)
                meson setup "${reconfigure[@]}" -Db_sanitize=address,undefined -Db_lundef=false -Dtest_hooks=true \
                        "$repeat_build" "$src" >/dev/null
                ninja -C "$repeat_build"
                # as the full run's integration files: LeakSanitizer's ptrace at exit would meet the sandbox
                export ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
        fi
        status=0
        python3 "$src/tests/repeat.py" --build "$repeat_build" --runs "$repeat" "${repeat_args[@]}" || status=$?
        exit "$status"
fi

# meson's exit status is not the verdict: the summary below counts every case.
# Integration files that share nothing run three at a time (suite integration-shared); those that
# count or time what a neighbour's load would change run alone (integration-alone, after the rest:
# tests/integration/meson.build says why for each).
if $quick; then
        meson test -C "$build" --print-errorlogs --num-processes 3 \
                --suite unit --suite fuzz --suite toml --suite integration || true
        scratch_cleanup
        trap - EXIT
        exec python3 "$src/tests/summarize.py" "$build/meson-logs/testlog.json"
fi
# The SELinux guest's base image (tests/selinux/image.sh), cached: on a fresh machine a few minutes of
# mmdebstrap, mostly waiting on the mirror, so it is made in the background while the suites before
# the selinux suite run. The guest's test (tests/selinux/test_guest.py) runs image.sh itself, which
# waits on the image's lock for this one and then uses its image, or retries and fails with the reason.
selinux_cache=${DSAGENT_TEST_CACHE:-/var/cache/dsagent-tests}/selinux
"$src/tests/selinux/image.sh" "$selinux_cache" >"$build/meson-logs/selinux-image.log" 2>&1 &
selinux_image=$!

# The same code is tested again under AddressSanitizer and UndefinedBehaviorSanitizer. Parsers and
# units run with leak detection; the daemon's integration tests without it, because LeakSanitizer
# stops threads with ptrace at exit, which the agent's own sandbox rightly kills.
san="$build-sanitize"
san_options=(-Db_sanitize=address,undefined -Db_lundef=false -Dtest_hooks=true)
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
sanitizer_build() {
        if [ -d "$san" ]; then
                meson setup --reconfigure "${san_options[@]}" "$san" "$src" >/dev/null
        else
                meson setup "${san_options[@]}" "$san" "$src" >/dev/null
        fi
        ninja -C "$san" >"$build/meson-logs/sanitize-build.log" 2>&1 ||
                { cat "$build/meson-logs/sanitize-build.log"; return 1; }
}

# The guest (one virtual CPU, 6 to 14 min under TCG by the machine's load) starts first, beside
# everything but the files that run alone: none of those suites times what it checks.
meson test -C "$build" --no-rebuild --print-errorlogs --suite selinux --logbase plain-selinux \
        >"$build/meson-logs/plain-selinux.out" 2>&1 &
selinux_guest=$!

# 1. The plain build's units and shared integration files, while the sanitizer build compiles.
sanitizer_build &
sanitizer=$!
meson test -C "$build" --no-rebuild --print-errorlogs --num-processes 3 \
        --suite unit --suite fuzz --suite toml --suite integration-shared || true
wait "$sanitizer" || echo "test.sh: the sanitizer build failed: $build/meson-logs/sanitize-build.log" >&2

# 2. The sanitizer build's shared integration files and units beside the systemd and packaging suites,
#    which boot containers and build packages. Each meson run keeps its own log (summarize.py reads
#    them all).
meson test -C "$build" --no-rebuild --print-errorlogs --num-processes 2 --suite systemd --suite packaging \
        --logbase plain-host >"$build/meson-logs/plain-host.out" 2>&1 &
host_suites=$!
if [ -f "$san/build.ninja" ]; then
        ASAN_OPTIONS=detect_leaks=0 meson test -C "$san" --no-rebuild --print-errorlogs --num-processes 3 \
                --logbase sanitize-shared --suite integration-shared || true
        ASAN_OPTIONS=detect_leaks=1 meson test -C "$san" --no-rebuild --print-errorlogs --num-processes 2 \
                --logbase sanitize-units --suite unit --suite fuzz --suite toml || true
fi
wait "$host_suites" || true
cat "$build/meson-logs/plain-host.out"
wait "$selinux_guest" || true
cat "$build/meson-logs/plain-selinux.out"
wait "$selinux_image" || echo "test.sh: the SELinux guest's image failed: $build/meson-logs/selinux-image.log" >&2

# 3. The files that run alone, each build's in turn, with nothing beside them.
meson test -C "$build" --no-rebuild --print-errorlogs --logbase plain-alone --suite integration-alone || true
if [ -f "$san/build.ninja" ]; then
        ASAN_OPTIONS=detect_leaks=0 meson test -C "$san" --no-rebuild --print-errorlogs \
                --logbase sanitize-alone --suite integration-alone || true
fi

scratch_cleanup
trap - EXIT
exec python3 "$src/tests/summarize.py" "$build/meson-logs/testlog.json" "$build/meson-logs/plain-host.json" \
        "$build/meson-logs/plain-selinux.json" "$build/meson-logs/plain-alone.json" \
        "$san/meson-logs/sanitize-units.json" "$san/meson-logs/sanitize-shared.json" \
        "$san/meson-logs/sanitize-alone.json"

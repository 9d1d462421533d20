#!/bin/bash
# Build TraceEventCheck once per source change and print the path of its dll
# (run it with `dotnet PATH FILE.nettrace`).
# The cache is keyed by a hash of the sources, so tests reuse a build until the tool changes.
# Exits 77 (the "skip" status of meson and automake) when the TraceEvent package cannot
# be restored from NuGet, for example on a machine without network access.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache_root=${DSAGENT_TEST_CACHE:-/var/cache/dsagent-tests}
hash=$(cat "$here"/*.cs "$here"/*.csproj | sha256sum | cut -c1-16)
out="$cache_root/traceevent-check-$hash"

if [ ! -f "$out/TraceEventCheck.dll" ]; then
        export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
        work=$(mktemp -d)
        trap 'rm -rf "$work"' EXIT
        cp "$here"/*.cs "$here"/*.csproj "$work/"
        if ! dotnet restore "$work/TraceEventCheck.csproj" --nologo -v quiet >"$work/restore.log" 2>&1; then
                cat "$work/restore.log" >&2
                echo "traceevent-check: cannot restore Microsoft.Diagnostics.Tracing.TraceEvent from NuGet; skipping" >&2
                exit 77
        fi
        dotnet build "$work/TraceEventCheck.csproj" -c Release -o "$work/out" --no-restore --nologo -v quiet >&2
        mkdir -p "$cache_root"
        chmod 755 "$cache_root"
        rm -rf "$out.tmp"
        mv "$work/out" "$out.tmp"
        chmod -R a+rX,go-w "$out.tmp"
        mv -T "$out.tmp" "$out"
fi
echo "$out/TraceEventCheck.dll"

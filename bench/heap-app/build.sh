#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Build bench-gcdump's heap app once per source change and print the folder holding it
# (as tests/target-app/build.sh does, in the same cache).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache_root=${DSAGENT_TEST_CACHE:-/var/cache/dsagent-tests}
hash=$(cat "$here"/*.cs "$here"/*.csproj | sha256sum | cut -c1-16)
out="$cache_root/bench-heap-app-$hash"

if [ ! -x "$out/HeapApp" ]; then
        export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
        work=$(mktemp -d)
        trap 'rm -rf "$work"' EXIT
        cp "$here"/*.cs "$here"/*.csproj "$work/"
        dotnet build "$work/HeapApp.csproj" -c Release -o "$work/out" --nologo -v quiet >&2
        mkdir -p "$cache_root"
        chmod 755 "$cache_root"
        rm -rf "$out.tmp"
        mv "$work/out" "$out.tmp"
        chmod -R a+rX,go-w "$out.tmp"
        mv -T "$out.tmp" "$out"
fi
echo "$out"

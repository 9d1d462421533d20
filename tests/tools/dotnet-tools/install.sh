#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Install the stock .NET diagnostic tools (a pinned version, from NuGet) once each, and print the
# directory that holds their executables (dotnet-counters, dotnet-dump, dotnet-gcdump, dotnet-stack,
# dotnet-trace). The tests of `dsctl port` run them as shipped.
# The cache is keyed by the version, so tests reuse an installation until the pin changes.
# A tool that cannot be installed from NuGet is a failure (exit 1, the install log on stderr), never a
# skip: NuGet is reachable wherever the tests run, and a skip must not pass for a pass.
set -euo pipefail

version=10.0.750501
tools="dotnet-counters dotnet-dump dotnet-gcdump dotnet-stack dotnet-trace"
cache_root=${DSAGENT_TEST_CACHE:-/var/cache/dsagent-tests}
out="$cache_root/dotnet-tools-$version"

# integration files that run side by side may both find them missing: one installs, the others wait for it
mkdir -p "$cache_root"
exec 9>"$cache_root/.dotnet-tools.lock"
flock 9
missing=0
for tool in $tools; do
        [ -x "$out/$tool" ] || missing=1
done
if [ "$missing" = 1 ]; then
        export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
        mkdir -p "$cache_root"
        chmod 755 "$cache_root"
        work=$(mktemp -d "$cache_root/dotnet-tools.XXXXXX")
        trap 'rm -rf "$work"' EXIT
        for tool in $tools; do
                if ! dotnet tool install "$tool" --version "$version" --tool-path "$work/tool" >"$work/install.log" 2>&1; then
                        cat "$work/install.log" >&2
                        echo "dotnet-tools: cannot install $tool $version from NuGet" >&2
                        exit 1
                fi
        done
        # the tools run as the test users too
        chmod -R a+rX,go-w "$work/tool"
        rm -rf "$out.tmp"
        mv "$work/tool" "$out.tmp"
        rm -rf "$out"
        mv -T "$out.tmp" "$out"
fi
echo "$out"

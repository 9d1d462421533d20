#!/bin/bash
# Install the stock dotnet-trace (a pinned version, from NuGet) once and print the path of its executable.
# The tests of `dsctl port` run it as shipped, with --diagnostic-port PATH,connect.
# The cache is keyed by the version, so tests reuse an installation until the pin changes.
# A tool that cannot be installed from NuGet is a failure (exit 1, the install log on stderr), never a
# skip: NuGet is reachable wherever the tests run, and a skip must not pass for a pass.
set -euo pipefail

version=10.0.750501
cache_root=${DSAGENT_TEST_CACHE:-/var/cache/dsagent-tests}
out="$cache_root/dotnet-trace-$version"

if [ ! -x "$out/dotnet-trace" ]; then
        export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
        mkdir -p "$cache_root"
        chmod 755 "$cache_root"
        work=$(mktemp -d "$cache_root/dotnet-trace.XXXXXX")
        trap 'rm -rf "$work"' EXIT
        if ! dotnet tool install dotnet-trace --version "$version" --tool-path "$work/tool" >"$work/install.log" 2>&1; then
                cat "$work/install.log" >&2
                echo "dotnet-trace: cannot install dotnet-trace $version from NuGet" >&2
                exit 1
        fi
        # the tool runs as the test users too
        chmod -R a+rX,go-w "$work/tool"
        rm -rf "$out.tmp"
        mv "$work/tool" "$out.tmp"
        mv -T "$out.tmp" "$out"
fi
echo "$out/dotnet-trace"

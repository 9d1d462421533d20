#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Build a .NET test tool of tests/tools once per source change and print the path of its dll:
#   dotnet-tool-build.sh DIR ASSEMBLY PACKAGE
# DIR holds ASSEMBLY.csproj and its *.cs; PACKAGE names what it restores from NuGet, for the
# message when it cannot. The cache is keyed by a hash of the sources, so tests reuse a build
# until the tool changes. A package that cannot be restored is a failure (exit 1, the restore
# log on stderr), never a skip: NuGet is reachable wherever the tests run, and a skip must not
# pass for a pass.
set -euo pipefail

here=$(cd "$1" && pwd)
assembly=$2
package=$3
name=$(basename "$here")
cache_root=${DSAGENT_TEST_CACHE:-/var/cache/dsagent-tests}
hash=$(cat "$here"/*.cs "$here"/*.csproj | sha256sum | cut -c1-16)
out="$cache_root/$name-$hash"

# integration files that run side by side may both find it missing: one builds, the others wait for it
mkdir -p "$cache_root"
exec 9>"$cache_root/.$name.lock"
flock 9
if [ ! -f "$out/$assembly.dll" ]; then
        export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
        work=$(mktemp -d)
        trap 'rm -rf "$work"' EXIT
        cp "$here"/*.cs "$here"/*.csproj "$work/"
        if ! dotnet restore "$work/$assembly.csproj" --nologo -v quiet >"$work/restore.log" 2>&1; then
                cat "$work/restore.log" >&2
                echo "$name: cannot restore $package from NuGet" >&2
                exit 1
        fi
        dotnet build "$work/$assembly.csproj" -c Release -o "$work/out" --no-restore --nologo -v quiet >&2
        mkdir -p "$cache_root"
        chmod 755 "$cache_root"
        rm -rf "$out.tmp"
        mv "$work/out" "$out.tmp"
        chmod -R a+rX,go-w "$out.tmp"
        mv -T "$out.tmp" "$out"
fi
echo "$out/$assembly.dll"

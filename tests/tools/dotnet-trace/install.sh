#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The stock dotnet-trace, as tests/tools/dotnet-tools/install.sh installs it with the other stock tools
# (pinned, from NuGet, cached): prints the path of its executable.
set -euo pipefail

dir=$("$(dirname "$0")/../dotnet-tools/install.sh")
echo "$dir/dotnet-trace"

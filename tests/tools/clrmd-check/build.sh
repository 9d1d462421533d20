#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Build ClrMDCheck once per source change and print the path of its dll
# (run it with `dotnet PATH DUMP [--type NAME]...`).
# (tests/tools/dotnet-tool-build.sh builds it, cached by a hash of its sources.)
exec "$(dirname "$0")/../dotnet-tool-build.sh" "$(dirname "$0")" ClrMDCheck Microsoft.Diagnostics.Runtime

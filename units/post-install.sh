#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Run by `meson install`: create what the units expect on the system the
# files were just installed to. Arguments: the sysusers.d and tmpfiles.d files.
set -euo pipefail

if [ -n "${DESTDIR:-}" ]; then
        exit 0
fi
# without systemd there is nothing to prepare for
if ! command -v systemd-sysusers >/dev/null; then
        exit 0
fi
systemd-sysusers "$1"
systemd-tmpfiles --create "$2"
journalctl --update-catalog

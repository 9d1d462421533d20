# SPDX-License-Identifier: LGPL-2.1-or-later
"""A clean copy of the source tree to build packages from, as a release tarball would hold."""
import os
import shutil
import subprocess

from tap import SOURCE


def copy_source(dest):
    """The files git knows or would add (none it ignores, such as build directories) into @dest."""
    os.makedirs(dest)
    listed = subprocess.run(["git", "-C", SOURCE, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            stdout=subprocess.PIPE, check=True).stdout.split(b"\0")
    for rel in filter(None, (p.decode() for p in listed)):
        src = os.path.join(SOURCE, rel)
        if not os.path.lexists(src):
            continue  # deleted in the work tree, not yet in git
        os.makedirs(os.path.join(dest, os.path.dirname(rel)), exist_ok=True)
        shutil.copy2(src, os.path.join(dest, rel), follow_symlinks=False)
    return dest

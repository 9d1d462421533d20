#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Every C file, header, Python file and shell script of the tree says at its top what it is for.

The top is the licence line (after a #! line if any), then a comment before any code: for C,
`/* ... */` or `//`; for Python a docstring or `#` lines; for shell `#` lines. Emits TAP, one test a
file, so a file that lacks its comment is named. usage: top-comment.py SOURCE_ROOT
"""
import os
import subprocess
import sys

EXTENSIONS = ('.c', '.h', '.py', '.sh')
SPDX = 'SPDX-License-Identifier:'


def tracked_files(root):
    """The tree's files as git knows them; with no git (a package's source copy), every file but builds'."""
    try:
        out = subprocess.run(['git', '-C', root, 'ls-files', '-z', '--cached', '--others', '--exclude-standard'],
                             check=True, capture_output=True).stdout.decode()
        names = [n for n in out.split('\0') if n]
    except (OSError, subprocess.CalledProcessError):
        names = []
        for d, dirs, files in os.walk(root):
            # hidden folders, and build folders (a package's build names its own: they hold meson-private)
            dirs[:] = [x for x in dirs if not x.startswith('.') and
                       not os.path.isdir(os.path.join(d, x, 'meson-private'))]
            names += [os.path.relpath(os.path.join(d, f), root) for f in files]
    return sorted(n for n in names if n.endswith(EXTENSIONS) and os.path.isfile(os.path.join(root, n)))


def top_comment(path):
    """None when the file opens with its licence line and a comment; else why not."""
    with open(path, encoding='utf-8', errors='replace') as f:
        lines = f.read().splitlines()
    i = 0
    if lines and lines[0].startswith('#!'):
        i = 1
    if i >= len(lines) or SPDX not in lines[i]:
        return 'no licence line at the top'
    i += 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    first = lines[i].strip() if i < len(lines) else ''
    if path.endswith(('.c', '.h')):
        ok = first.startswith('/*') or first.startswith('//')
    elif path.endswith('.py'):
        ok = first.startswith(('"""', "'''", 'r"""', '#'))
    else:
        ok = first.startswith('#') and not first.startswith('#!')
    return None if ok else 'no comment after the licence line saying what the file is for'


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..', '..')
    files = tracked_files(root)
    print('TAP version 13')
    print(f'1..{len(files)}')
    failed = 0
    for n, name in enumerate(files, 1):
        why = top_comment(os.path.join(root, name))
        if why:
            failed += 1
            print(f'not ok {n} - {name}: {why}')
        else:
            print(f'ok {n} - {name}')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())

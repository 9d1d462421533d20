/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* /proc/PID/mountinfo: a pure parser, and the questions the agent asks of a mount table */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
        _MOUNTINFO_E_SUCCESS,
        MOUNTINFO_E_MALFORMED, /* a line that is not what the kernel writes */
        MOUNTINFO_E_LIMIT,     /* more mounts than MOUNTINFO_ENTRIES_MAX */
};

/* A mount namespace of a large container host holds a few thousand mounts. */
#define MOUNTINFO_ENTRIES_MAX 65536

typedef struct MountEntry {
        uint64_t id;            /* the mount id, as /proc/self/fdinfo/N's mnt_id names it */
        uint64_t parent_id;
        unsigned major, minor;
        char *mount_point;      /* unescaped, as the reading process's root sees it */
        char *fs_type;          /* "ext4", "tmpfs", "fuse.sshfs", ... */
} MountEntry;

typedef struct MountTable {
        MountEntry *entries;    /* in the kernel's order: a later mount on the same point is on top */
        size_t n;
} MountTable;

#define MOUNT_TABLE_NULL { .entries = NULL, .n = 0 }

/**
 * mountinfo_parse() - read the lines of a mountinfo file
 *
 * Octal escapes (\040 and the like, which the kernel writes for space, tab,
 * newline and backslash) are undone in mount points. A final line without
 * its newline is taken as cut off and refused, since the table would be
 * missing mounts.
 *
 * Return: 0 with *@ret filled, MOUNTINFO_E_MALFORMED, MOUNTINFO_E_LIMIT, or -ENOMEM.
 */
int mountinfo_parse(const char *buf, size_t n, MountTable *ret);

void mount_table_done(MountTable *t);

/* The entry with mount id @id, or NULL. */
const MountEntry *mount_table_find(const MountTable *t, uint64_t id);

/**
 * mount_table_covering() - the mount an absolute, normalized @path lies on
 *
 * The one with the longest mount point that is @path or a parent of it; of
 * several on the same point the last, which is on top. NULL when none is
 * (a table without "/").
 */
const MountEntry *mount_table_covering(const MountTable *t, const char *path);

/**
 * mount_fs_type_is_unsafe() - may a lookup on this file system wait for someone else?
 *
 * True for file systems served by a user-space daemon or a remote server
 * (fuse and its subtypes, nfs, cifs, 9p, ceph and the like) and for autofs,
 * whose lookups wait for a daemon: a lookup there can wait for as long as
 * that server wishes. Local, kernel-served file systems are false.
 */
bool mount_fs_type_is_unsafe(const char *fs_type);

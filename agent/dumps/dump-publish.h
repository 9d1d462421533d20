/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dump_dir: its guards (max_use, keep_free) and giving a finished dump its labels and its name */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "acl.h"
#include "policy.h"

enum {
        _DUMP_PUBLISH_E_SUCCESS,
        DUMP_PUBLISH_E_NO_SPACE,   /* the guards (max_use, keep_free) or the disk itself refuse more */
        DUMP_PUBLISH_E_DIRECTORY,  /* dump_dir is missing and cannot be made, or is not root's alone */
};

typedef struct DumpAttributes {
        uid_t requester;
        pid_t target_pid;
        uid_t target_uid;
        const char *target_unit;
        const char *target_exe;
        const char *target_name; /* entry assembly or process name, as dsctl dumps shows it */
        const char *dump_type;
        uint64_t request_id;
} DumpAttributes;

/*
 * The part of a published file's name that comes from the process's name (@src, NULL when
 * unknown): its letters, digits, '-', '_' and inner '.', at most @size - 1 of them; "process"
 * when none is left. Nothing else of a target reaches a name in dump_dir.
 */
void dump_name_part(const char *src, char *buf, size_t size);

/**
 * dump_dir_open() - open dump_dir, making it and its missing parents (0711, root's) as needed
 *
 * Users reach their dumps by name (x) but cannot list the directory (no r).
 * A directory anybody but root could write to is refused. Missing parents
 * are made as mkdir -p would, but never through a symbolic link, and only
 * in a directory root's alone (or root's and sticky, as /tmp): a directory
 * of that path someone else made or may write is refused.
 *
 * Return: 0, DUMP_PUBLISH_E_DIRECTORY with *@ret_why (it, or where it would
 * be made, is not root's alone), or a negative errno with *@ret_why saying
 * which step failed.
 */
int dump_dir_open(const char *path, int *ret_fd, const char **ret_why);

/**
 * dump_space_headroom() - how many more bytes may dumps take in dump_dir now?
 * @in_flight: bytes that dumps still being taken wrote already (they have no
 *             name in dump_dir yet, so a listing does not see them)
 *
 * max_use counts the published dumps and @in_flight; keep_free is what the
 * file system must still have free. Both have coredump.conf's meaning (a
 * size, or a percentage of the file system). The headroom is what is left
 * under both; 0 means "not one byte more".
 *
 * Return: 0, DUMP_PUBLISH_E_NO_SPACE with *@ret_why when a limit is already
 * broken, or a negative errno.
 */
int dump_space_headroom(int dir_fd, const PolicySize *max_use, const PolicySize *keep_free, uint64_t in_flight,
                        uint64_t *ret_headroom, const char **ret_why);

/**
 * dump_publish_fd() - label the unnamed dump in @fd and give it @name in dump_dir
 *
 * Root's, the exact ACL of @readers (read back and compared), the xattrs of
 * @attrs, then linkat(): the file has no name until it is whole and labelled.
 *
 * Return: 0, DUMP_PUBLISH_E_NO_SPACE (the disk filled up), or a negative errno.
 */
int dump_publish_fd(int dir_fd, int fd, const AclGrant *readers, const DumpAttributes *attrs, const char *name);

/* Names tried when a trace's name is taken (the same process, origin, table and second) */
#define DUMP_PUBLISH_NAME_TRIES 10

/**
 * dump_publish_trace() - dump_publish_fd() for a trace the agent took for a policy table
 *
 * Named trace.NAME.PID.@origin-@table.TIME.nettrace (NAME from @attrs' target_name, through
 * dump_name_part(); TIME in UTC, to the second); a name already taken is never replaced: ".2",
 * ".3" come before ".nettrace", up to DUMP_PUBLISH_NAME_TRIES names.
 *
 * Return: as dump_publish_fd(), with the name in @ret_name.
 */
int dump_publish_trace(int dir_fd, int fd, const AclGrant *readers, const DumpAttributes *attrs, const char *origin,
                       const char *table, char *ret_name, size_t name_size);
/*
 * dump_publish_for_table() - as dump_publish_trace(), for any artifact a policy table took
 *
 * Named @kind.NAME.PID.@origin-@table.TIME@suffix ("dump" and "" for a core, "stacks" and ".txt"
 * for stacks), numbered likewise when taken.
 */
int dump_publish_for_table(int dir_fd, int fd, const AclGrant *readers, const DumpAttributes *attrs,
                           const char *kind, const char *origin, const char *table, const char *suffix,
                           char *ret_name, size_t name_size);

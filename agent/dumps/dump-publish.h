/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dump_dir: its guards (max_use, keep_free) and giving a finished dump its labels and its name */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/dumps/acl.h"
#include "policy/policy.h"

enum {
        _DUMP_PUBLISH_E_SUCCESS,
        DUMP_PUBLISH_E_NO_SPACE,   /* the guards (max_use, keep_free) or the disk itself refuse more */
        DUMP_PUBLISH_E_DIRECTORY,  /* dump_dir is missing and cannot be made, or is not root's alone */
};

typedef struct DumpAttributes {
        uid_t requester;
        /* the principal the agent charged for the request (PeerCreds.charged_uid): labelled when it is
         * not @requester (a subordinate uid's request is its user's, a request from a namespace root made
         * is that namespace's: userns_charged_uid()), so that retention holds the file
         * as that principal's; a table's leaves it as @requester */
        uid_t charged;
        pid_t target_pid;
        uid_t target_uid;
        const char *target_unit;
        const char *target_exe;
        const char *target_name; /* entry assembly or process name, as dsctl dumps shows it */
        const char *dump_type;
        uint64_t request_id;
        /* a policy table's artifact: "on_start" or "collect", and the table's name (retention.h reads
         * them: the table's budget, whether it yields, whether its readers may remove it); else NULL */
        const char *origin;
        const char *table;
} DumpAttributes;

/*
 * The part of a published file's name that comes from the process's name (@src, NULL when
 * unknown): its letters, digits, '-', '_' and inner '.', at most @size - 1 of them; "process"
 * when none is left. Nothing else of a target reaches a name in dump_dir. Every name takes
 * DUMP_NAME_PART_SIZE (32 characters and the NUL).
 */
#define DUMP_NAME_PART_SIZE 33
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
 * root_dir_open() - open an existing directory that root alone may write, by a path only root could have laid
 *
 * The walk of dump_dir_open(), making nothing: every directory passed is root's and writable by no one else (or
 * sticky, as /tmp), a link is followed only when it is root's; and the directory itself is root's and writable
 * by root alone, sticky or not. For files of root's that must stay so, such as egress credentials.
 *
 * Return: 0 with an O_RDONLY|O_DIRECTORY fd in *@ret_fd, DUMP_PUBLISH_E_DIRECTORY (a directory on the way, or
 * this one, others may write, or a user's link), or a negative errno (-ENOENT, -ENOTDIR, -ELOOP, -EINVAL for a
 * relative path).
 */
int root_dir_open(const char *path, int *ret_fd);

/* How full dump_dir and its file system are: what max_use and keep_free are checked against. */
typedef struct DumpSpace {
        uint64_t used;          /* the published files' blocks */
        uint64_t in_flight;     /* written by what is still unnamed (dump-writer.h's slots) */
        uint64_t max_use;       /* max_use in bytes, for this file system */
        uint64_t fs_size;
        uint64_t avail;         /* free, as root may use it */
        uint64_t keep_free;     /* keep_free in bytes */
        PolicySize max_use_setting, keep_free_setting; /* as the policy says them */
} DumpSpace;

/* What dump_space_headroom() says when it refuses: the words and the numbers of dump_space_format(). */
#define DUMP_SPACE_WHY_MAX 256
#define DUMP_SPACE_NUMBERS_MAX 160 /* of them, dump_space_format()'s */

/**
 * dump_space_measure() - how full dump_dir is now
 * @in_flight: bytes that dumps still being taken wrote already (they have no
 *             name in dump_dir yet, so a listing does not see them)
 *
 * max_use and keep_free have coredump.conf's meaning (a size, or a
 * percentage of the file system).
 *
 * Return: 0 or a negative errno.
 */
int dump_space_measure(int dir_fd, const PolicySize *max_use, const PolicySize *keep_free, uint64_t in_flight,
                       DumpSpace *ret);

/* "used 1.0 GiB of max_use 1.0 GiB (10%); free 3.1 GiB of 20.0 GiB, keep_free 3.0 GiB (15%)": for people. */
void dump_space_format(const DumpSpace *s, char *buf, size_t size);

/**
 * dump_space_full_why() - @what, with the numbers of dump_dir now
 *
 * For a file system found full beside the guards (a write's, a label's or a name's ENOSPC or
 * EDQUOT): "@what (used ... of max_use ...; free ... of ..., keep_free ...)" in @buf, measured as
 * dump_space_measure() does with @in_flight.
 *
 * Return: @buf, or @what itself when dump_dir cannot be measured.
 */
const char *dump_space_full_why(int dir_fd, const PolicySize *max_use, const PolicySize *keep_free, uint64_t in_flight,
                                const char *what, char *buf, size_t size);

/**
 * dump_no_space_answer() - what a requester whose dump (or crash core) found no room in dump_dir is told
 * @why: which limit, with the numbers (dump_space_headroom()'s or dump_space_full_why()'s words)
 *
 * @why, then what the requester can do: 'dsctl dumps' lists what they may read in @p's dump_dir,
 * 'dsctl dumps --remove PATH' removes the dumps they asked for (and the artifacts of the tables
 * that let their readers remove them, where @p has such a table); for the rest, root, who may
 * remove any or change max_use and keep_free.
 *
 * Return: a new string (the caller frees it), or NULL without memory.
 */
char *dump_no_space_answer(const Policy *p, const char *why);

/* dump_space_measure(), then dump_space_headroom_of(). Return: as they. */
int dump_space_headroom(int dir_fd, const PolicySize *max_use, const PolicySize *keep_free, uint64_t in_flight,
                        uint64_t *ret_headroom, char *why, size_t why_size);

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
 * for stacks), numbered likewise when taken; labelled with @origin and @table besides @attrs.
 */
int dump_publish_for_table(int dir_fd, int fd, const AclGrant *readers, const DumpAttributes *attrs,
                           const char *kind, const char *origin, const char *table, const char *suffix,
                           char *ret_name, size_t name_size);

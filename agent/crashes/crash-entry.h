/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One crash as systemd-coredump recorded it in the journal: whether the entry is its at all, and
 * what it says of the process that died, as the policy decides on it. Pure: the caller reads the
 * journal (crash-journal.h) and hands over the entry's fields; nothing here does I/O or logs.
 *
 * What is trusted, and why (docs/crashes.md, SECURITY.md):
 *   - fields whose names begin with '_' are journald's, from the kernel's view of the sender at
 *     reception: a client cannot set them (journald drops them from what it is sent);
 *   - everything else (MESSAGE_ID, SYSLOG_IDENTIFIER, every COREDUMP_* field) is what the sender
 *     chose: `logger --journald`, sd_journal_send() or `systemd-coredump --backtrace`, which any
 *     user may run, write any of them;
 *   - so an entry counts only when journald saw it come, by its native protocol, from
 *     systemd-coredump running in a systemd-coredump@.service instance: systemd starts those only
 *     for connections to /run/systemd/coredump, a socket only root may connect to (the kernel's
 *     core_pattern helper); no user can place a process in that cgroup;
 *   - and its COREDUMP_UID must be the uid journald saw (_UID): systemd-coredump drops to the
 *     crashed process's uid (the systemd-coredump user's, for a system uid) before it logs, so a
 *     parser of the core exploited into writing entries could at most speak of its own user's
 *     crashes;
 *   - the stored core is then tied to the entry by its name and the xattrs systemd-coredump set
 *     as root (crash-core.h).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "policy/policy.h"
#include "agent/targets/procfs.h"

/* SD_MESSAGE_COREDUMP: every entry systemd-coredump writes for a crash */
#define CRASH_MESSAGE_ID "fc2e22bc6ee647b6b90729ab34a250b1"
/* Where systemd-coredump stores cores (Storage=external), and where a core is looked for */
#define CRASH_STORE_DIR "/var/lib/systemd/coredump"
/* systemd-coredump's journald identity: its comm, cut to 15 bytes by the kernel, and its unit's template */
#define CRASH_WRITER_COMM "systemd-coredum"
#define CRASH_WRITER_UNIT_PREFIX "systemd-coredump@"
#define CRASH_WRITER_SLICE "system-systemd\\x2dcoredump.slice"
#define CRASH_WRITER_SLICE_CGROUP "/system.slice/" CRASH_WRITER_SLICE "/"

enum {
        _CRASH_ENTRY_E_SUCCESS,
        CRASH_ENTRY_E_UNTRUSTED, /* not an entry systemd-coredump wrote: nothing of it counts */
        CRASH_ENTRY_E_MALFORMED, /* systemd-coredump's, but without the facts a decision needs */
};

/* How systemd-coredump compressed a stored core: by the name's suffix */
typedef enum CrashCompression {
        CRASH_COMPRESSION_NONE,
        CRASH_COMPRESSION_ZSTD, /* .zst */
        CRASH_COMPRESSION_LZ4,  /* .lz4 */
        CRASH_COMPRESSION_XZ,   /* .xz */
        _CRASH_COMPRESSION_MAX,
        _CRASH_COMPRESSION_INVALID = -1,
} CrashCompression;

/* Lengths past which a fact is taken as absent rather than cut (a cut name could match a rule) */
#define CRASH_UNIT_MAX 256
#define CRASH_NAME_MAX 256
#define CRASH_EXE_MAX 1024
#define CRASH_CGROUP_MAX PROC_CGROUP_PATH_MAX
#define CRASH_FILE_NAME_MAX 255
/* the longest field the parser looks at (COREDUMP_PROC_MAPS of a big process is the longest) */
#define CRASH_FIELD_MAX (4u << 20)
/* "SECONDS-PID": the crash's time (COREDUMP_TIMESTAMP, whole seconds) and its pid */
#define CRASH_ID_MAX 40

/* Whether the crashed process mapped libcoreclr.so, as what was recorded says */
typedef enum CrashDotnet {
        CRASH_DOTNET_UNKNOWN,   /* nothing recorded tells */
        CRASH_DOTNET_NO,
        CRASH_DOTNET_YES,
} CrashDotnet;

/* A crash: what the policy, the listing and the copy need of one trusted entry. Strings "" when absent. */
typedef struct CrashEntry {
        uint64_t time_usec;     /* COREDUMP_TIMESTAMP: when the kernel caught it */
        uint64_t logged_usec;   /* the entry's own time (__REALTIME_TIMESTAMP): when systemd-coredump was done */
        uint32_t pid;           /* COREDUMP_PID, in the initial pid namespace */
        uint32_t uid, gid;      /* COREDUMP_UID, COREDUMP_GID: the kernel's %u and %g */
        uint32_t signal;        /* COREDUMP_SIGNAL */
        /* all four uids and gids, from COREDUMP_PROC_STATUS; when it is missing or does not agree with
         * COREDUMP_UID, the effective ids are COREDUMP_UID's and the saved ones (uid_t) -1: changed */
        uint32_t ids_uid[4], ids_gid[4];
        /* its memory is root's alone: ids changed, not dumpable (COREDUMP_DUMPABLE), started in
         * secure-execution mode (AT_SECURE in COREDUMP_PROC_AUXV), or any of it not known */
        uint8_t changed_credentials;
        uint8_t dotnet;         /* CrashDotnet */
        uint8_t truncated;      /* COREDUMP_TRUNCATED: systemd-coredump cut the core at its size limit */
        uint8_t compression;    /* CrashCompression of file_name */
        uint8_t cgroup_vouched; /* set by the reader (cgroupfs_root_vouches()), not by the parser */
        uint8_t stored;         /* set by the reader: the core is still there, and checked (crash-core.h) */
        uint64_t stored_size;   /* its size on disk, compressed */
        char id[CRASH_ID_MAX];
        char unit[CRASH_UNIT_MAX + 1];          /* from COREDUMP_CGROUP, as a live process's */
        char name[CRASH_NAME_MAX + 1];          /* from COREDUMP_CMDLINE, as a live process's */
        char exe[CRASH_EXE_MAX + 1];            /* COREDUMP_EXE */
        char cgroup[CRASH_CGROUP_MAX + 1];      /* COREDUMP_CGROUP */
        char container_id[PROC_CONTAINER_ID_LEN + 1];
        char pod_uid[PROC_POD_UID_LEN + 1];
        char hierarchy_unified;                 /* the cgroup is in the unified hierarchy (for the vouching) */
        char file_name[CRASH_FILE_NAME_MAX + 1]; /* of COREDUMP_FILENAME, in CRASH_STORE_DIR; "": none stored */
} CrashEntry;

/* One field of a journal entry, "NAME=value", as sd_journal_enumerate_data() gives it (not NUL-terminated) */
typedef struct CrashField {
        const void *data;
        size_t size;
} CrashField;

/**
 * crash_entry_parse() - is this entry systemd-coredump's, and what does it say?
 * @fields: the entry's fields, in any order (a field named twice: the entry is refused)
 * @machine_id: this machine's id, 32 lowercase hex digits: an entry of another machine never counts
 * @logged_usec: the entry's __REALTIME_TIMESTAMP
 *
 * Trusted (CRASH_ENTRY_E_UNTRUSTED otherwise) when MESSAGE_ID is systemd-coredump's and journald
 * says: _TRANSPORT=journal, _COMM=systemd-coredum, _SYSTEMD_UNIT=systemd-coredump@INSTANCE.service,
 * _SYSTEMD_CGROUP exactly that unit's in system-systemd\x2dcoredump.slice, _MACHINE_ID this
 * machine's, _EXE (when there) systemd-coredump's, and _UID equals COREDUMP_UID, or is
 * @coredump_uid (the systemd-coredump user, what it logs a system uid's crash as; (uid_t) -1 when
 * the system has none) or 0. Then COREDUMP_PID, _UID, _GID, _SIGNAL and _TIMESTAMP must be numbers
 * (else CRASH_ENTRY_E_MALFORMED); the rest is taken when it is well formed and fits, left "" or
 * unknown otherwise. COREDUMP_FILENAME is kept only as a plain name directly in CRASH_STORE_DIR
 * that systemd-coredump would have made for this very crash (core.COMM.UID.BOOT.PID.TIME[.SUFFIX]).
 *
 * Return: 0 with *@ret, CRASH_ENTRY_E_UNTRUSTED, or CRASH_ENTRY_E_MALFORMED.
 */
int crash_entry_parse(const CrashField *fields, size_t n_fields, const char *machine_id, uid_t coredump_uid,
                      uint64_t logged_usec, CrashEntry *ret);

/* The crashed process as the policy sees it (policy_crash_check()): its cgroup and container only when vouched. */
PolicyTarget crash_entry_policy_target(const CrashEntry *e);

/*
 * crash_id_parse() - "SECONDS-PID" as crash IDs read: the crash's time in whole seconds since the epoch
 * and its pid, both decimal without sign or leading zero. Return: 0, or -EINVAL.
 */
int crash_id_parse(const char *id, uint64_t *ret_seconds, uint32_t *ret_pid);

/*
 * crash_cmdline_args() - COREDUMP_CMDLINE back into NUL-separated arguments
 *
 * systemd-coredump joins the arguments with spaces, quoting each that needs it as a POSIX shell
 * reads it: '...', "..." with backslash escapes, or $'...' with C escapes. Only the first @max_args
 * arguments are wanted. Return: the bytes written to @buf (at most @size), or -EINVAL for what does
 * not read back unambiguously (an unclosed quote, a NUL, more than @size bytes).
 */
int crash_cmdline_args(const char *s, size_t n, size_t max_args, char *buf, size_t size);

/*
 * crash_entry_pack() - @e in few bytes, for a worker's reply: its numbers, then each string with its length.
 * Return: the bytes written, or 0 when they do not fit in @size.
 */
size_t crash_entry_pack(const CrashEntry *e, uint8_t *buf, size_t size);
/* The entry packed at @buf (at most @size bytes), and the bytes it took. Return: 0, or -EBADMSG. */
int crash_entry_unpack(const uint8_t *buf, size_t size, CrashEntry *ret, size_t *ret_used);

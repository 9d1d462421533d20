/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Parsers for /proc/PID files: pure functions over bytes the caller read */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum {
        _PROCFS_E_SUCCESS,
        PROCFS_E_MALFORMED,
        PROCFS_E_NOT_FOUND,
};

#define PROCFS_NSPID_MAX 32

typedef struct ProcStatus {
        uid_t uid[4]; /* real, effective, saved, filesystem */
        gid_t gid[4];
        pid_t nspid[PROCFS_NSPID_MAX]; /* outermost first: [0] is the pid in the reader's namespace */
        size_t n_nspid;
} ProcStatus;

int procfs_parse_stat_start_time(const char *buf, size_t n, uint64_t *ret);
int procfs_parse_status(const char *buf, size_t n, ProcStatus *ret);
int procfs_parse_pidfd_fdinfo(const char *buf, size_t n, ProcStatus *ret);
int procfs_environ_get(const char *buf, size_t n, const char *key, char **ret);

/* How a runtime's environment pauses it at startup (procfs_environ_startup_suspend()). */
#define PROCFS_SUSPEND_DEFAULT_PORT 1 /* DOTNET_DefaultDiagnosticPortSuspend: until ResumeRuntime on its own socket */
#define PROCFS_SUSPEND_PORTS 2        /* DOTNET_DiagnosticPorts: until the tools of its ports resume it */
int procfs_environ_startup_suspend(const char *buf, size_t n);
int procfs_cmdline_name(const char *buf, size_t n, char **ret);
int procfs_cgroup_unit(const char *buf, size_t n, char **ret);
int procfs_auxv_secure(const char *buf, size_t n, bool *ret);

/* A runtime's diagnostic socket as its name tells: the runtime's own pid and its start time. */
typedef struct ProcDiagnosticName {
        pid_t pid;
        uint64_t key;
} ProcDiagnosticName;

/**
 * procfs_unix_diagnostic_listeners() - runtimes' sockets in a /proc/PID/net/unix table
 *
 * Every listening socket whose path ends in dotnet-diagnostic-PID-KEY-socket,
 * as (PID, KEY), in table order, at most @max of them (the rest are counted
 * in *@ret_n but not stored). A hint only: anybody may bind such a name.
 *
 * Return: 0 with *@ret_n, or PROCFS_E_MALFORMED for a table without its header line.
 */
int procfs_unix_diagnostic_listeners(const char *buf, size_t n, ProcDiagnosticName *out, size_t max, size_t *ret_n);

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
/* Supplementary groups kept of a status file's Groups line; the kernel allows 65536 */
#define PROCFS_GROUPS_MAX 256

typedef struct ProcStatus {
        uid_t uid[4]; /* real, effective, saved, filesystem */
        gid_t gid[4];
        pid_t nspid[PROCFS_NSPID_MAX]; /* outermost first: [0] is the pid in the reader's namespace */
        size_t n_nspid;
        /* the Groups line: whether there was one, how many it lists, the first PROCFS_GROUPS_MAX of them */
        bool groups_known;
        size_t n_groups;
        gid_t groups[PROCFS_GROUPS_MAX];
} ProcStatus;

int procfs_parse_stat_start_time(const char *buf, size_t n, uint64_t *ret);
/*
 * procfs_parse_status() - the Uid, Gid, NSpid and Groups lines of /proc/PID/status
 *
 * Uid, Gid and NSpid must be there, once each and well formed; Groups, when
 * there (every kernel writes it), too. Return: 0 or PROCFS_E_MALFORMED.
 */
int procfs_parse_status(const char *buf, size_t n, ProcStatus *ret);
/*
 * Are the process's real, effective, saved and filesystem ids not all one uid
 * and one gid? What a process that changed credentials (setuid, setresuid(),
 * setfsuid(), a set-user-ID exec) shows, one that keeps root as its saved uid
 * among them.
 */
bool procfs_ids_changed(const ProcStatus *s);
/*
 * Do @a and @b show the very same credentials: all four uids, all four gids
 * and the supplementary groups? False when either has no Groups line, or
 * lists more groups than kept (PROCFS_GROUPS_MAX): what is not known to be
 * the same is taken as changed. Nothing else (pids) is compared.
 */
bool procfs_same_credentials(const ProcStatus *a, const ProcStatus *b);
int procfs_parse_pidfd_fdinfo(const char *buf, size_t n, ProcStatus *ret);
int procfs_environ_get(const char *buf, size_t n, const char *key, char **ret);

/* How a runtime's environment pauses it at startup (procfs_environ_startup_suspend()). */
#define PROCFS_SUSPEND_DEFAULT_PORT 1 /* DOTNET_DefaultDiagnosticPortSuspend: until ResumeRuntime on its own socket */
#define PROCFS_SUSPEND_PORTS 2        /* DOTNET_DiagnosticPorts: until the tools of its ports resume it */
int procfs_environ_startup_suspend(const char *buf, size_t n);
int procfs_cmdline_name(const char *buf, size_t n, char **ret);
/*
 * Does a runtime that reports @command_line (ProcessInfo) run no entry
 * assembly yet: is it its executable @exe alone (readlink() of /proc/PID/exe,
 * " (deleted)" allowed)? NULL for either: false.
 */
bool procfs_command_line_is_exe(const char *command_line, const char *exe);
/* The unit, from /proc/PID/cgroup. Return: 0, PROCFS_E_NOT_FOUND, PROCFS_E_MALFORMED (as
 * procfs_cgroup_container() has it: two unified lines, or two name=systemd ones), -ENOMEM. */
int procfs_cgroup_unit(const char *buf, size_t n, char **ret);

/* The longest cgroup path kept in ProcContainer.cgroup; a longer one is left out, not cut. */
#define PROC_CGROUP_PATH_MAX 512
#define PROC_CONTAINER_ID_LEN 64 /* [0-9a-f]{64}: docker, podman, cri-o and containerd ids */
#define PROC_POD_UID_LEN 36      /* a canonical UUID, lowercase: 8-4-4-4-12 */
#define PROC_CGROUP_HIERARCHY_MAX 64 /* the longest v1 hierarchy name kept ("cpu,cpuacct", "systemd") */

/* The container a process runs in, as its cgroup names it (procfs_cgroup_container()). */
typedef struct ProcContainer {
        char id[PROC_CONTAINER_ID_LEN + 1];         /* "" when none */
        char pod_uid[PROC_POD_UID_LEN + 1];         /* Kubernetes pod, "" when none */
        char cgroup[PROC_CGROUP_PATH_MAX + 1];      /* the path it was read from, "" when too long */
        /* the hierarchy ->cgroup is in: the unified one, or a v1 one by the directory name cgroupfs gives
         * it under /sys/fs/cgroup ("systemd" for name=systemd, else the controllers, [a-z0-9_,]; "" when
         * none is usable) */
        bool unified;
        char hierarchy[PROC_CGROUP_HIERARCHY_MAX + 1];
} ProcContainer;

/**
 * procfs_cgroup_container() - the container and Kubernetes pod of a process, from /proc/PID/cgroup
 *
 * The path is the kernel's: it is the cgroup the process is in, which the
 * process cannot choose unless someone delegated cgroups to it. Its
 * components were named by whoever made those cgroups (a container engine,
 * the kubelet, or a user with a delegated subtree), so what they say is only
 * a claim: ids are taken only as exactly 64 lowercase hex characters, pod
 * uids only as canonical lowercase UUIDs, nothing else is copied but the path.
 *
 * The path read: the unified hierarchy's ("0::/..."), unless that is the
 * root (legacy hosts show "0::/" for every process): then that of systemd's
 * named v1 hierarchy ("N:name=systemd:/..."), or on a host without one, the
 * first v1 line that is not the root. It goes to ->cgroup when it fits
 * PROC_CGROUP_PATH_MAX, else ->cgroup is "" (a cut path could match a rule
 * the whole one does not); its bytes as they are, UTF-8 or not (whoever
 * named a cgroup chose them: they are escaped where they are shown);
 * ->unified and ->hierarchy say which hierarchy it is in, for a caller that
 * looks at its directories (who owns them: cgroupfs.h).
 *
 * Components, outermost first; the first that names a container or a pod decides:
 *   id:  <id>, libpod-<id>, docker-<id>, crio-<id>, cri-containerd-<id>, each
 *        also with ".scope" but the bare <id> (podman and docker under systemd
 *        or cgroupfs, cri-o, containerd, /docker/<id>, /kubepods/.../<id>);
 *   pod: kubepods[-QOS]-pod<uid, '_' for '-'>.slice (the kubelet's systemd
 *        driver) or pod<uid> (its cgroupfs driver); the container id is then
 *        the first component after it that names one.
 * The outermost one is the container as the host's engine knows it; one
 * nested below it (a container engine inside a container, or sub-cgroups a
 * container made itself) cannot override it. "/container" and other
 * sub-cgroups below a scope are ignored.
 *
 * Return: 0 with *@ret filled (id, pod_uid "" when none), or
 * PROCFS_E_MALFORMED: empty, a NUL byte, a line that is not
 * "ID:CONTROLLERS:/PATH", or two unified or two name=systemd lines (a v1
 * rename on kernels without the 2020 fix could put a newline in a cgroup's
 * name, and so forge a line: which one is real is not known).
 */
int procfs_cgroup_container(const char *buf, size_t n, ProcContainer *ret);
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

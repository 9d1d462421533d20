/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Target discovery: pin a process by pidfd, read its identity, reach its runtime's socket */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/cleanup.h"
#include "agent/targets/procfs.h"

enum {
        _TARGET_E_SUCCESS,
        TARGET_E_GONE,             /* no such process, or it exited while we looked */
        TARGET_E_NO_SOCKET,        /* no diagnostic socket where the runtime would put it */
        TARGET_E_SOCKET_UNTRUSTED, /* something is there, but not the target's socket */
        TARGET_E_IMPOSTOR,         /* the listener behind the socket is not the target */
        TARGET_E_UNREACHABLE,      /* the socket refuses connections */
        TARGET_E_UNSAFE_FS,        /* its TMPDIR lies on a user-space or network file system */
};

/*
 * A process, pinned. Shared by reference: target-cache.h keeps one for the
 * requests that follow, which use it as it is. Whatever fills in a Target
 * (a worker's job, target_read_*(), target_find_socket()) does so before it
 * is shared; what changes afterwards is only what every holder would compute
 * alike (the pidfd's identity).
 */
typedef struct Target {
        unsigned n_ref;
        pid_t pid;      /* in the agent's pid namespace */
        int pidfd;      /* pins the process: every check is against this */
        /* the pidfd's pidfs inode, once known: a process's identity for its life (6.9+) */
        bool pidfd_identity_known, pidfd_on_pidfs;
        dev_t pidfd_dev;
        ino_t pidfd_ino;
        int proc_fd;    /* O_PATH fd of /proc/PID, bound to this process, not the number */
        ProcStatus status;
        uint64_t start_time; /* /proc/PID/stat field 22, the runtime's "disambiguation key" */

        /* filled by target_read_details(); NULL when unknown */
        char *exe;
        char *unit;
        char *name;
        /* from its cgroup (procfs_cgroup_container()): the path is the kernel's, the names the engine's */
        char *container_id;
        char *pod_uid;
        char *cgroup;
        /* root alone made and fills every cgroup on that path (cgroupfs_root_vouches()): else the names
         * on it are anybody's with a delegated subtree, shown as unverified and matched by no rule */
        bool cgroup_vouched;

        /* filled by target_read_environment() */
        bool environment_read;
        bool secure_exec; /* started in secure-execution mode (AT_SECURE), or its auxv did not parse */
        char *tmpdir;   /* TMPDIR as the target's libc uses it; NULL: /tmp */
        uint8_t startup_suspend; /* PROCFS_SUSPEND_*: how its environment pauses its runtime at startup */

        /* filled by target_find_socket(): O_PATH fd of the runtime's socket, found and checked */
        int socket_path_fd;
} Target;

/* Lengths past which a detail is taken as absent rather than cut: a cut name could match a rule. */
#define TARGET_NAME_MAX 1024
#define TARGET_UNIT_MAX 256
#define TARGET_PATH_MAX 4096

/*
 * What a worker learned of a target, for the agent to rebuild it with the
 * pidfd and /proc fd that come along (SCM_RIGHTS). Both ends are this
 * program; strings are NUL-terminated, empty for absent.
 */
typedef struct TargetFacts {
        int32_t pid;
        uint64_t start_time;
        ProcStatus status;
        uint8_t environment_read, secure_exec, startup_suspend, cgroup_vouched;
        char name[TARGET_NAME_MAX + 1];
        char unit[TARGET_UNIT_MAX + 1];
        char exe[TARGET_PATH_MAX + 1];
        char tmpdir[TARGET_PATH_MAX + 1];
        char container_id[PROC_CONTAINER_ID_LEN + 1];
        char pod_uid[PROC_POD_UID_LEN + 1];
        char cgroup[PROC_CGROUP_PATH_MAX + 1];
} TargetFacts;

/* The process's own pid, which the runtime uses in its socket name. */
static inline pid_t target_ns_pid(const Target *t) {
        return t->status.nspid[t->status.n_nspid - 1];
}

static inline uid_t target_euid(const Target *t) {
        return t->status.uid[1];
}

int target_open(pid_t pid, Target **ret);
void target_facts_of(const Target *t, TargetFacts *ret);
/* Takes @pidfd and @proc_fd over, also on failure. Return: 0 or -ENOMEM. */
int target_from_facts(const TargetFacts *f, int pidfd, int proc_fd, Target **ret);
int target_find_socket(Target *t, const char **ret_why);
int target_read_details(Target *t);
/*
 * target_read_cgroup() - the part of target_read_details() read from /proc/PID/cgroup
 *
 * Unit, cgroup, container and pod, and whether root vouches for the cgroup: nothing of the
 * process's memory (no command line, no executable). Return: as target_read_details().
 */
int target_read_cgroup(Target *t);
int target_read_environment(Target *t);
/*
 * target_details_hold() - are the details a worker read of @t earlier still what its /proc shows?
 *
 * Reads them afresh (target_read_details()) and compares them as TargetFacts
 * carry them: name, unit, executable, container, pod and cgroup. A process
 * rewrites its command line, and is moved to another cgroup, without an exec.
 * @t keeps the fresh ones. In a worker: the command line is read from the
 * process's memory, under its mmap lock.
 *
 * Return: 0 with the answer, TARGET_E_GONE, or a negative errno.
 */
int target_details_hold(Target *t, bool *ret);
bool target_is_alive(const Target *t);
/*
 * Whose the process is, as the kernel shows it now: the owner of a file in its
 * /proc directory (status) is its effective uid and gid while it is dumpable,
 * and root's otherwise (the directory itself always shows the effective ids).
 * A lookup through the pinned /proc/PID fd: it reads nothing of the process
 * and waits on none of its locks. Return: 0 or a negative errno.
 */
int target_owner(const Target *t, uid_t *ret_uid, gid_t *ret_gid);
/*
 * target_read_credentials() - the process's ids and groups as its status file shows them now
 *
 * A read of /proc/PID/status through the pinned /proc fd, parsed (ret->nspid
 * and the rest come along). Cheap enough for the loop, and it waits on
 * nothing the process can hold: the kernel fills the file from the task's
 * credentials under RCU and from counters and fields behind spinlocks held
 * for a few instructions (task_lock(), the signal lock); unlike cmdline and
 * environ it takes neither the process's mmap lock nor its exec mutex. A
 * process exiting at that moment may leave the reader the last reference to
 * its memory map to free: work, not a wait, and done at most once per process.
 *
 * Return: 0, TARGET_E_GONE, or a negative errno (-EXDEV: /proc is another
 * pid namespace's).
 */
int target_read_credentials(const Target *t, ProcStatus *ret);
/**
 * target_changed_credentials() - is this a process whose memory only root should read?
 *
 * The tests systemd-coredump applies before it lets a user read a core
 * (CVE-2022-4415), on a reading of its status file taken now
 * (target_read_credentials()), never on the one the decision was made on:
 * real, effective, saved and filesystem ids all equal (procfs_ids_changed());
 * dumpable (the kernel makes the files in /proc/PID root's when it is not:
 * target_owner()); not started in secure execution mode (AT_SECURE,
 * target_read_environment()). And its ids and groups still those of
 * @t->status, the reading the decision was made on (procfs_same_credentials()):
 * a process that changed them since, even to ids that agree, is not what
 * was decided on (nor, failing closed, is one in more than PROCFS_GROUPS_MAX
 * groups, whose groups are not all known: its dumps are root's). Checked
 * through the pinned /proc fd, and against the pidfd afterwards.
 *
 * Return: 0 with the answer, TARGET_E_GONE, or a negative errno.
 */
int target_changed_credentials(Target *t, bool *ret);
int target_connect(Target *t, int *ret_fd, const char **ret_why);
Target *target_ref(Target *t);
Target *target_unref(Target *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(Target *, target_unref);

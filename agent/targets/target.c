/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A target process pinned by pidfd, its identity read and its runtime's socket reached (target.h);
 * runs in a worker, asked through jobs.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent/targets/cgroupfs.h"
#include "common/cleanup.h"
#include "agent/support/fileio.h"
#include "agent/targets/procfs.h"
#include "agent/targets/target-view.h"
#include "agent/loop/sockopt.h"
#include "agent/targets/target.h"


#define PROC_SMALL_FILE_MAX (64 * 1024)
/* The kernel caps argv plus environment at a quarter of the stack rlimit;
 * TMPDIR further out than this is treated as unset. */
#define PROC_ENVIRON_MAX (1024 * 1024)

Target *target_ref(Target *t) {
        t->n_ref++;
        return t;
}

Target *target_unref(Target *t) {
        if (!t || --t->n_ref > 0)
                return NULL;
        safe_close(t->pidfd);
        safe_close(t->proc_fd);
        safe_close(t->socket_path_fd);
        free(t->tmpdir);
        free(t->exe);
        free(t->unit);
        free(t->name);
        free(t->container_id);
        free(t->pod_uid);
        free(t->cgroup);
        free(t);
        return NULL;
}

/*
 * A pidfd polls readable once its process has exited, zombie or not. That is
 * stricter than "the pid is still taken", which is what we want: a zombie's
 * socket has no listener left anyway.
 */
bool target_is_alive(const Target *t) {
        return pidfd_is_alive(t->pidfd);
}

int target_read_credentials(const Target *t, ProcStatus *ret) {
        _cleanup_free_ char *status = NULL;
        ProcStatus st;
        size_t size;
        int r;

        r = read_proc_whole_at(t->proc_fd, "status", PROC_SMALL_FILE_MAX, &status, &size);
        if (r < 0)
                return r == -ESRCH || r == -ENOENT ? TARGET_E_GONE : r;
        if (procfs_parse_status(status, size, &st) != 0)
                return -EBADMSG;
        /* /proc must be the one of our own pid namespace, or nothing in it is about @pid */
        if (st.nspid[0] != t->pid)
                return -EXDEV;
        *ret = st;
        return 0;
}

static int target_read_identity(Target *t) {
        _cleanup_free_ char *stat = NULL;
        size_t stat_size;
        int r;

        r = target_read_credentials(t, &t->status);
        if (r != 0)
                return r;
        r = read_proc_whole_at(t->proc_fd, "stat", PROC_SMALL_FILE_MAX, &stat, &stat_size);
        if (r < 0)
                return r == -ESRCH || r == -ENOENT ? TARGET_E_GONE : r;
        if (procfs_parse_stat_start_time(stat, stat_size, &t->start_time) != 0)
                return -EBADMSG;
        return 0;
}

/**
 * target_open() - pin process @pid and read who it is
 *
 * The pidfd is taken first, /proc/PID second; if the pidfd still refers to a
 * live process after every read, the pid number was never recycled in between
 * and everything read belongs to the pinned process.
 *
 * Return: 0, TARGET_E_GONE, or a negative errno.
 */
int target_open(pid_t pid, Target **ret) {
        _cleanup_(target_unrefp) Target *t = NULL;
        char path[32];
        int r;

        if (pid <= 0)
                return TARGET_E_GONE;

        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->n_ref = 1;
        t->pid = pid;
        t->proc_fd = -EBADF;
        t->socket_path_fd = -EBADF;

        t->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (t->pidfd < 0)
                /* EINVAL: @pid names a thread, not a process */
                return errno == ESRCH || errno == EINVAL ? TARGET_E_GONE : -errno;

        snprintf(path, sizeof(path), "/proc/%d", pid);
        t->proc_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (t->proc_fd < 0)
                return errno == ENOENT ? TARGET_E_GONE : -errno;

        r = target_read_identity(t);
        if (r != 0)
                return r;
        if (!target_is_alive(t))
                return TARGET_E_GONE;

        *ret = TAKE_PTR(t);
        return 0;
}

/* Copies @s into @buf when it fits; else leaves @buf empty (absent): a cut name could match a rule. */
static void copy_detail(char *buf, size_t size, const char *s) {
        buf[0] = '\0';
        if (s && strlen(s) < size)
                memcpy(buf, s, strlen(s) + 1);
}

void target_facts_of(const Target *t, TargetFacts *ret) {
        *ret = (TargetFacts){ .pid = t->pid, .start_time = t->start_time, .status = t->status,
                              .environment_read = t->environment_read, .secure_exec = t->secure_exec,
                              .startup_suspend = t->startup_suspend, .cgroup_vouched = t->cgroup_vouched };
        copy_detail(ret->name, sizeof(ret->name), t->name);
        copy_detail(ret->unit, sizeof(ret->unit), t->unit);
        copy_detail(ret->exe, sizeof(ret->exe), t->exe);
        copy_detail(ret->tmpdir, sizeof(ret->tmpdir), t->tmpdir);
        copy_detail(ret->container_id, sizeof(ret->container_id), t->container_id);
        copy_detail(ret->pod_uid, sizeof(ret->pod_uid), t->pod_uid);
        copy_detail(ret->cgroup, sizeof(ret->cgroup), t->cgroup);
}

static int dup_detail(const char *buf, size_t size, char **ret) {
        *ret = NULL;
        if (strnlen(buf, size) == 0 || strnlen(buf, size) == size)
                return 0;
        *ret = strdup(buf);
        return *ret ? 0 : -ENOMEM;
}

int target_from_facts(const TargetFacts *f, int pidfd, int proc_fd, Target **ret) {
        _cleanup_(target_unrefp) Target *t = calloc(1, sizeof(Target));
        int r = 0;

        if (!t) {
                safe_close(pidfd);
                safe_close(proc_fd);
                return -ENOMEM;
        }
        *t = (Target){ .n_ref = 1, .pid = f->pid, .pidfd = pidfd, .proc_fd = proc_fd, .socket_path_fd = -EBADF,
                       .status = f->status, .start_time = f->start_time,
                       .environment_read = f->environment_read, .secure_exec = f->secure_exec,
                       .startup_suspend = f->startup_suspend, .cgroup_vouched = f->cgroup_vouched };
        if (t->status.n_nspid < 1 || t->status.n_nspid > PROCFS_NSPID_MAX)
                return -EBADMSG;
        if (r == 0)
                r = dup_detail(f->name, sizeof(f->name), &t->name);
        if (r == 0)
                r = dup_detail(f->unit, sizeof(f->unit), &t->unit);
        if (r == 0)
                r = dup_detail(f->exe, sizeof(f->exe), &t->exe);
        if (r == 0)
                r = dup_detail(f->tmpdir, sizeof(f->tmpdir), &t->tmpdir);
        if (r == 0)
                r = dup_detail(f->container_id, sizeof(f->container_id), &t->container_id);
        if (r == 0)
                r = dup_detail(f->pod_uid, sizeof(f->pod_uid), &t->pod_uid);
        if (r == 0)
                r = dup_detail(f->cgroup, sizeof(f->cgroup), &t->cgroup);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(t);
        return 0;
}

/**
 * target_read_details() - executable, unit, display name and container
 *
 * What the policy decides on, besides the ids: all of it is cheap and none
 * of it needs the target's memory. Whether root vouches for the cgroup is
 * looked up in cgroupfs (cgroupfs_root_vouches()): a worker's job. Missing
 * details stay NULL; only the loss of the target is an error.
 *
 * Return: 0, TARGET_E_GONE, or a negative errno.
 */
int target_read_details(Target *t) {
        _cleanup_free_ char *cmdline = NULL, *exe = NULL;
        size_t size;
        ssize_t n;
        int r;

        r = read_proc_whole_at(t->proc_fd, "cmdline", PROC_SMALL_FILE_MAX, &cmdline, &size);
        if (r == 0 && procfs_cmdline_name(cmdline, size, &t->name) < 0)
                return -ENOMEM;

        exe = malloc(PATH_MAX);
        if (!exe)
                return -ENOMEM;
        n = readlinkat(t->proc_fd, "exe", exe, PATH_MAX - 1);
        if (n >= 0) {
                exe[n] = '\0';
                t->exe = TAKE_PTR(exe);
        }
        return target_read_cgroup(t);
}

int target_read_cgroup(Target *t) {
        _cleanup_free_ char *cgroup = NULL;
        ProcContainer container;
        size_t size;
        int r;

        r = read_proc_whole_at(t->proc_fd, "cgroup", PROC_SMALL_FILE_MAX, &cgroup, &size);
        if (r == 0 && procfs_cgroup_unit(cgroup, size, &t->unit) < 0)
                return -ENOMEM;
        /* a file that does not parse names no container: the details stay NULL */
        if (r == 0 && procfs_cgroup_container(cgroup, size, &container) == 0) {
                r = dup_detail(container.id, sizeof(container.id), &t->container_id);
                if (r == 0)
                        r = dup_detail(container.pod_uid, sizeof(container.pod_uid), &t->pod_uid);
                if (r == 0)
                        r = dup_detail(container.cgroup, sizeof(container.cgroup), &t->cgroup);
                if (r < 0)
                        return r;
                /* after the read: the process could since have moved only where its user may move it */
                t->cgroup_vouched = t->cgroup && cgroupfs_root_vouches(&container);
        }

        return target_is_alive(t) ? 0 : TARGET_E_GONE;
}

/* Is @a the same detail as @b, as TargetFacts would carry them (copy_detail())? */
static bool same_detail(const char *a, const char *b, size_t size) {
        bool a_absent = !a || strlen(a) >= size, b_absent = !b || strlen(b) >= size;

        return a_absent || b_absent ? a_absent == b_absent : strcmp(a, b) == 0;
}

int target_details_hold(Target *t, bool *ret) {
        _cleanup_free_ char *name = TAKE_PTR(t->name), *unit = TAKE_PTR(t->unit), *exe = TAKE_PTR(t->exe),
                            *container_id = TAKE_PTR(t->container_id), *pod_uid = TAKE_PTR(t->pod_uid),
                            *cgroup = TAKE_PTR(t->cgroup);
        int r;

        r = target_read_details(t);
        if (r != 0)
                return r;
        *ret = same_detail(name, t->name, TARGET_NAME_MAX + 1) && same_detail(unit, t->unit, TARGET_UNIT_MAX + 1) &&
               same_detail(exe, t->exe, TARGET_PATH_MAX + 1) &&
               same_detail(container_id, t->container_id, PROC_CONTAINER_ID_LEN + 1) &&
               same_detail(pod_uid, t->pod_uid, PROC_POD_UID_LEN + 1) &&
               same_detail(cgroup, t->cgroup, PROC_CGROUP_PATH_MAX + 1);
        return 0;
}

/**
 * target_read_environment() - secure-execution mode, TMPDIR and startup suspension, once
 *
 * Only for a target the requester may act on: the environment can be large
 * and is the process's own business. Libc drops TMPDIR in secure-execution
 * mode (AT_SECURE), while /proc/PID/environ still shows it; the runtime then
 * uses /tmp, and so does the agent. An auxiliary vector that does not parse
 * counts as secure. The settings that pause the runtime at startup are read
 * from the same block (procfs_environ_startup_suspend()).
 *
 * Return: 0, TARGET_E_GONE, or a negative errno.
 */
int target_read_environment(Target *t) {
        _cleanup_free_ char *env_block = NULL, *auxv = NULL;
        size_t size;
        int r;

        if (t->environment_read)
                return 0;
        r = read_proc_whole_at(t->proc_fd, "auxv", PROC_SMALL_FILE_MAX, &auxv, &size);
        if (r < 0 && r != -EACCES && r != -EPERM)
                return r == -ESRCH || r == -ENOENT ? TARGET_E_GONE : r;
        /* a vector that cannot be read or does not parse counts as secure: fail closed */
        if (r < 0 || procfs_auxv_secure(auxv, size, &t->secure_exec) != 0)
                t->secure_exec = true;

        if (!t->secure_exec) {
                r = read_proc_whole_at(t->proc_fd, "environ", PROC_ENVIRON_MAX, &env_block, &size);
                if (r < 0 && r != -EACCES && r != -EPERM)
                        return r == -ESRCH || r == -ENOENT ? TARGET_E_GONE : r;
                if (r == 0) {
                        r = procfs_environ_get(env_block, size, "TMPDIR", &t->tmpdir);
                        if (r < 0)
                                return r;
                        r = procfs_environ_startup_suspend(env_block, size);
                        if (r < 0)
                                return r;
                        t->startup_suspend = (uint8_t)r;
                }
        }
        if (!target_is_alive(t))
                return TARGET_E_GONE;
        t->environment_read = true;
        return 0;
}

int target_owner(const Target *t, uid_t *ret_uid, gid_t *ret_gid) {
        struct stat st;

        if (fstatat(t->proc_fd, "status", &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        *ret_uid = st.st_uid;
        *ret_gid = st.st_gid;
        return 0;
}

int target_changed_credentials(Target *t, bool *ret) {
        ProcStatus now;
        uid_t owner = (uid_t)-1; /* no process's: compares as a change */
        gid_t owner_gid = (gid_t)-1;
        int r;

        r = target_read_environment(t);
        if (r != 0)
                return r;
        r = target_read_credentials(t, &now);
        if (r != 0)
                return r;
        r = target_owner(t, &owner, &owner_gid);
        if (r != 0)
                return r;
        if (!target_is_alive(t))
                return TARGET_E_GONE;
        *ret = procfs_ids_changed(&now) || !procfs_same_credentials(&now, &t->status) || owner != now.uid[1] ||
               owner_gid != now.gid[1] || t->secure_exec;
        return 0;
}

/* What a lookup in the target's view failing means for finding its socket. */
static int socket_lookup_error(int r, const char *view_why, const char **ret_why) {
        switch (r) {
        case TARGET_VIEW_E_UNSAFE_FS:
                *ret_why = view_why;
                return TARGET_E_UNSAFE_FS;
        case TARGET_VIEW_E_MOUNT:
                *ret_why = view_why ? view_why : "a mount is on the diagnostic socket's path";
                return TARGET_E_SOCKET_UNTRUSTED;
        case TARGET_VIEW_E_SYMLINK:
                *ret_why = "a symbolic link is on the path to the diagnostic socket";
                return TARGET_E_SOCKET_UNTRUSTED;
        case TARGET_VIEW_E_NOT_FOUND:
                *ret_why = "no diagnostic socket at the runtime's path";
                return TARGET_E_NO_SOCKET;
        case TARGET_VIEW_E_NO_ACCESS:
                *ret_why = "the agent may not look into the process's file system";
                return TARGET_E_NO_SOCKET;
        case TARGET_VIEW_E_GONE:
                return TARGET_E_GONE;
        default:
                return r;
        }
}

/**
 * target_open_socket() - find the runtime's socket as the target sees it
 *
 * The name is computed, never globbed: dotnet-diagnostic-<own pid>-<start
 * time>-socket in the target's TMPDIR, looked up in the target's view
 * (target-view.h: below its root, in its mount namespace, on local file
 * systems only, no symlink followed, no mount crossed but the ones its table
 * lists). TMPDIR is the target owner's to choose, so the result must be a
 * socket owned by the target's effective uid.
 *
 * Return: 0 with an O_PATH fd, TARGET_E_NO_SOCKET, TARGET_E_SOCKET_UNTRUSTED,
 * TARGET_E_UNSAFE_FS, TARGET_E_GONE, or a negative errno. *@ret_why explains
 * positive codes.
 */
static int target_open_socket(Target *t, int *ret_path_fd, const char **ret_why) {
        _cleanup_(target_view_done) TargetView view = TARGET_VIEW_NULL;
        _cleanup_(view_dir_done) ViewDir dir = VIEW_DIR_NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *tmp, *why = NULL;
        char name[64];
        struct stat st;
        int r;

        r = target_read_environment(t);
        if (r != 0)
                return r;
        tmp = t->tmpdir && t->tmpdir[0] ? t->tmpdir : "/tmp";
        if (tmp[0] != '/') {
                *ret_why = "the target's TMPDIR is not an absolute path";
                return TARGET_E_SOCKET_UNTRUSTED;
        }
        snprintf(name, sizeof(name), "dotnet-diagnostic-%d-%llu-socket", (int)target_ns_pid(t),
                 (unsigned long long)t->start_time);

        r = target_view_open(t, &view, &why);
        if (r == 0)
                r = target_view_open_dir(&view, tmp, O_PATH, &dir, &why);
        if (r == 0)
                r = target_view_open_entry(&dir, name, O_PATH, &fd);
        if (r != 0)
                return socket_lookup_error(r, why, ret_why);

        if (fstat(fd, &st) < 0)
                return -errno;
        /* O_PATH|O_NOFOLLOW hands back the link itself when the last component is one */
        if (S_ISLNK(st.st_mode)) {
                *ret_why = "a symbolic link is at the diagnostic socket's path";
                return TARGET_E_SOCKET_UNTRUSTED;
        }
        if (!S_ISSOCK(st.st_mode)) {
                *ret_why = "the file at the diagnostic socket's path is not a socket";
                return TARGET_E_SOCKET_UNTRUSTED;
        }
        if (st.st_uid != target_euid(t)) {
                *ret_why = "the diagnostic socket is not owned by the target's user";
                return TARGET_E_SOCKET_UNTRUSTED;
        }
        if (!target_is_alive(t))
                return TARGET_E_GONE;

        *ret_path_fd = TAKE_FD(fd);
        return 0;
}


/*
 * On pidfs kernels (6.9+) every process has its own inode for its whole life,
 * so two pidfds name the same process exactly when their inodes match.
 * Before pidfs all pidfds share one anonymous inode and only the pid number
 * can be compared.
 */
static int target_pidfd_identity(Target *t) {
        struct stat st;

        int r;

        if (t->pidfd_identity_known)
                return 0;
        r = pidfd_identity(t->pidfd, &st);
        if (r < 0 && r != -EOPNOTSUPP)
                return r;
        t->pidfd_on_pidfs = r == 0;
        if (t->pidfd_on_pidfs) {
                t->pidfd_dev = st.st_dev;
                t->pidfd_ino = st.st_ino;
        }
        t->pidfd_identity_known = true;
        return 0;
}

static int listener_matches_target(Target *t, int sock_fd, const char **ret_why) {
        struct ucred cred;
        socklen_t len = sizeof(cred);
        _cleanup_close_ int peer_pidfd = -EBADF;
        struct stat a;
        int r;

        if (getsockopt(sock_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return -errno;
        if (cred.pid != t->pid || cred.uid != target_euid(t)) {
                *ret_why = "the process listening on the diagnostic socket is not the target";
                return TARGET_E_IMPOSTOR;
        }

        r = sockopt_get_peer_pidfd(sock_fd, cred.pid, cred.uid, &peer_pidfd);
        if (r == -EMFILE || r == -ENFILE || r == -ENOMEM)
                return r;
        if (r < 0) {
                /* the process that called listen() is gone: not our live target */
                *ret_why = "the process that created the diagnostic socket has exited";
                return TARGET_E_IMPOSTOR;
        }

        r = target_pidfd_identity(t);
        if (r < 0)
                return r;
        if (t->pidfd_on_pidfs) {
                /* the same kernel made both pidfds: the peer's is on pidfs too */
                if (fstat(peer_pidfd, &a) < 0)
                        return -errno;
                if (a.st_ino != t->pidfd_ino || a.st_dev != t->pidfd_dev) {
                        *ret_why = "the process listening on the diagnostic socket is not the target";
                        return TARGET_E_IMPOSTOR;
                }
                return 0; /* the very process: whether it lives, target_connect() asks of the target's pidfd */
        }
        if (!pidfd_is_alive(peer_pidfd)) {
                *ret_why = "the process that created the diagnostic socket has exited";
                return TARGET_E_IMPOSTOR;
        }
        return 0;
}

/**
 * target_find_socket() - find and check the runtime's socket, and keep it
 *
 * target_open_socket() once, into t->socket_path_fd: every later connection
 * of this request goes to that very inode, without another lookup.
 *
 * Return: 0, or what target_open_socket() returns.
 */
int target_find_socket(Target *t, const char **ret_why) {
        int fd, r;

        if (t->socket_path_fd >= 0)
                return 0;
        r = target_open_socket(t, &fd, ret_why);
        if (r != 0)
                return r;
        t->socket_path_fd = fd;
        return 0;
}

/**
 * target_connect() - connect to the target's runtime and prove who listens
 *
 * Connects to the inode target_find_socket() kept, through /proc/self/fd,
 * never to a path string, then checks with SO_PEERCRED and SO_PEERPIDFD that
 * the listener is the pinned target. No lookup happens here, so the event
 * loop may call it. The returned socket is non-blocking and nothing has been
 * written to it.
 *
 * Return: 0, TARGET_E_SOCKET_UNTRUSTED, TARGET_E_IMPOSTOR, TARGET_E_UNREACHABLE,
 * TARGET_E_GONE, -ENOTCONN when the socket was not found first, or a negative errno.
 */
int target_connect(Target *t, int *ret_fd, const char **ret_why) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int r;

        if (t->socket_path_fd < 0)
                return -ENOTCONN;
        snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d", t->socket_path_fd);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int error = errno;

                /* the socket was found earlier, in the job that pinned the process: if the process is
                 * gone since, that is the answer, whatever its socket does now */
                if (!target_is_alive(t))
                        return TARGET_E_GONE;
                switch (error) {
                case ECONNREFUSED:
                        *ret_why = "nothing listens on the diagnostic socket";
                        return TARGET_E_UNREACHABLE;
                case EAGAIN:
                        *ret_why = "the runtime's connection backlog is full";
                        return TARGET_E_UNREACHABLE;
                default:
                        return -error;
                }
        }

        r = listener_matches_target(t, fd, ret_why);
        if (r != 0)
                return r;
        if (!target_is_alive(t))
                return TARGET_E_GONE;

        *ret_fd = TAKE_FD(fd);
        return 0;
}

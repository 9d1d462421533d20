/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The agent's own confinement (sandbox.h): no new privileges, its capabilities, not dumpable, the
 * seccomp allowlist; main.c and the PAM helper apply it.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "agent/workers/sandbox.h"
#include "agent/loop/userns.h"

/*
 * What the agent keeps, and why; nothing else, not even in the bounding set:
 *   CAP_DAC_OVERRIDE  runtimes' sockets are 0600 and their users' own: connect() needs write access
 *   CAP_SYS_PTRACE    /proc/PID/root, environ and auxv of other users' processes
 * The PAM helper keeps none: it reads world-readable files and /etc/shadow as its owner. Nor does the egress
 * process, which runs as a user of its own: its keys, its CA and the artifacts come to it open.
 */
static const int agent_capabilities[] = { CAP_DAC_OVERRIDE, CAP_SYS_PTRACE };

#if DSAGENT_SECCOMP_LOG
/* a debugging build records what it would have killed for, instead of killing */
#define SANDBOX_DENY SCMP_ACT_LOG
#else
#define SANDBOX_DENY SCMP_ACT_KILL_PROCESS
#endif

/* Calls both profiles need: memory, files by fd, time, signals, leaving. */
static const int common_syscalls[] = {
        SCMP_SYS(brk), SCMP_SYS(mmap), SCMP_SYS(munmap), SCMP_SYS(mremap), SCMP_SYS(mprotect), SCMP_SYS(madvise),
        SCMP_SYS(read), SCMP_SYS(pread64), SCMP_SYS(readv), SCMP_SYS(write), SCMP_SYS(writev), SCMP_SYS(lseek),
        SCMP_SYS(close), SCMP_SYS(fcntl), SCMP_SYS(newfstatat), SCMP_SYS(fstat), SCMP_SYS(statx),
        SCMP_SYS(access), SCMP_SYS(faccessat), SCMP_SYS(faccessat2), SCMP_SYS(readlink), SCMP_SYS(readlinkat),
        SCMP_SYS(getdents64), SCMP_SYS(fstatfs), SCMP_SYS(statfs), SCMP_SYS(futex), SCMP_SYS(getrandom),
        SCMP_SYS(clock_gettime), SCMP_SYS(clock_nanosleep), SCMP_SYS(nanosleep), SCMP_SYS(gettimeofday),
        SCMP_SYS(getpid), SCMP_SYS(gettid), SCMP_SYS(getuid), SCMP_SYS(geteuid), SCMP_SYS(getgid),
        SCMP_SYS(getegid), SCMP_SYS(uname), SCMP_SYS(poll), SCMP_SYS(ppoll), SCMP_SYS(rt_sigprocmask),
        SCMP_SYS(rt_sigaction), SCMP_SYS(rt_sigreturn), SCMP_SYS(restart_syscall), SCMP_SYS(sendto),
        SCMP_SYS(recvfrom), SCMP_SYS(sendmsg), SCMP_SYS(recvmsg), SCMP_SYS(connect), SCMP_SYS(exit),
        SCMP_SYS(exit_group),
};

/* The broker's own work: its loop, its clients and runtimes, pidfds, dumps, sessions, the journal. */
static const int agent_syscalls[] = {
        SCMP_SYS(epoll_create1), SCMP_SYS(epoll_ctl), SCMP_SYS(epoll_wait), SCMP_SYS(epoll_pwait),
        SCMP_SYS(timerfd_create), SCMP_SYS(timerfd_settime), SCMP_SYS(timerfd_gettime), SCMP_SYS(signalfd4),
        SCMP_SYS(accept4), SCMP_SYS(getsockopt), SCMP_SYS(setsockopt), SCMP_SYS(getsockname), SCMP_SYS(shutdown),
        SCMP_SYS(pidfd_open), SCMP_SYS(openat2), SCMP_SYS(mkdir), SCMP_SYS(mkdirat), SCMP_SYS(unlink),
        SCMP_SYS(unlinkat), SCMP_SYS(linkat), SCMP_SYS(fgetxattr), SCMP_SYS(fsetxattr),
        SCMP_SYS(flistxattr), SCMP_SYS(mknodat), SCMP_SYS(memfd_create),
        SCMP_SYS(ftruncate), SCMP_SYS(wait4), SCMP_SYS(waitid), SCMP_SYS(pipe2), SCMP_SYS(splice),
        /* a session's copy for its rule's egress store: the stream teed from the relay pipe into the copy's
         * (session.c); pipe to pipe alone */
        SCMP_SYS(tee),
        /* worker processes: forked with a pidfd, killed through it, told to die with the agent */
        SCMP_SYS(pidfd_send_signal), SCMP_SYS(getppid), SCMP_SYS(dup2), SCMP_SYS(dup3), SCMP_SYS(close_range),
        /* glibc's qsort() asks how much memory there is (listings sort their candidates) */
        SCMP_SYS(sysinfo),
        /* a walk of /proc lets what waits run, every so often (discover.c) */
        SCMP_SYS(sched_yield),
        /* [[port]]s a reload adds: bound under a temporary name, given their ACL by path (a socket
         * file has no fd to set it on), renamed into place, watched for removal */
        SCMP_SYS(bind), SCMP_SYS(listen), SCMP_SYS(renameat), SCMP_SYS(renameat2), SCMP_SYS(setxattr),
        SCMP_SYS(getxattr), SCMP_SYS(inotify_init1), SCMP_SYS(inotify_add_watch), SCMP_SYS(inotify_rm_watch),
        /* and the default directory made for them, mode 0755 whatever the unit's UMask */
        SCMP_SYS(fchmod),
        /* the child a worker forks to decompress a stored core confines itself further (crash-core.c): a filter
         * added only ever takes calls away (no_new_privs is set), and libseccomp asks what the kernel supports */
        SCMP_SYS(seccomp),
};

/*
 * The egress process (agent/egress/egress-main.c, docs/egress-plan.md): libcurl's HTTP(S) to the store, one
 * child per upload (forked by glibc's fork(), killed at its deadline, reaped), the threaded resolver of Debian's
 * libcurl (its thread: allow_egress_clones()), the pipe a child answers through.
 */
static const int egress_syscalls[] = {
        SCMP_SYS(getsockopt), SCMP_SYS(setsockopt), SCMP_SYS(getsockname), SCMP_SYS(getpeername),
        SCMP_SYS(shutdown), SCMP_SYS(epoll_create1), SCMP_SYS(epoll_ctl), SCMP_SYS(epoll_wait),
        SCMP_SYS(epoll_pwait), SCMP_SYS(pipe2), SCMP_SYS(wait4), SCMP_SYS(set_robust_list),
        SCMP_SYS(sched_getaffinity), SCMP_SYS(sysinfo), SCMP_SYS(getppid), SCMP_SYS(sched_yield),
        /* its uploads' children: a pidfd of each, killed through it at its deadline; no kill() of a pid */
        SCMP_SYS(pidfd_open), SCMP_SYS(pidfd_send_signal),
        /* a thread's signal stack: the sanitizer build's runtime sets one up in each thread it starts */
        SCMP_SYS(sigaltstack),
};

/* Asked for by libraries that cope with a refusal: answered, not punished. */
static const int probed_syscalls[] = {
        SCMP_SYS(clone3), SCMP_SYS(rseq), SCMP_SYS(membarrier), SCMP_SYS(epoll_pwait2),
};

/* Whether the effective set holds CAP_SETPCAP, which PR_CAPBSET_DROP needs. */
static bool holds_setpcap(void) {
        struct __user_cap_header_struct header = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct data[2] = {};

        if (syscall(SYS_capget, &header, data) < 0)
                return true; /* let PR_CAPBSET_DROP say what is wrong */
        return data[CAP_SETPCAP / 32].effective & (1u << (CAP_SETPCAP % 32));
}

/* Every capability but @keep out of the bounding set, when CAP_SETPCAP is there to do it (else nothing: see
 * drop_capabilities()). */
static int cut_bounding_set(const int *keep, size_t n_keep) {
        unsigned long last = CAP_LAST_CAP;
        FILE *f;

        if (!holds_setpcap())
                return 0;
        f = fopen("/proc/sys/kernel/cap_last_cap", "re");
        if (f) {
                if (fscanf(f, "%lu", &last) != 1)
                        last = CAP_LAST_CAP;
                fclose(f);
        }
        for (unsigned long cap = 0; cap <= last; cap++) {
                bool kept = false;
                for (size_t i = 0; i < n_keep; i++)
                        kept |= (unsigned long)keep[i] == cap;
                if (kept || prctl(PR_CAPBSET_READ, cap, 0, 0, 0) != 1)
                        continue;
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
                        return -errno;
        }
        return 0;
}

int sandbox_cut_bounding_set(void) {
        return cut_bounding_set(NULL, 0);
}

static int drop_capabilities(const int *keep, size_t n_keep) {
        struct __user_cap_header_struct header = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct data[2] = {};
        int r;

        /* the bounding set first, while CAP_SETPCAP is still there to do it; what a
         * unit's CapabilityBoundingSet= removed already needs (and gets) no drop.
         * Without CAP_SETPCAP the bounding set cannot be cut at all: so it is for
         * the agent and its PAM helper under dsagent.service, whose bounding set is
         * CAP_DAC_OVERRIDE CAP_SYS_PTRACE CAP_SETUID CAP_SETGID alone, and for the
         * egress process, which the agent starts as another user (its bounding set
         * was cut before, when the agent had CAP_SETPCAP: egress-check.c). They then
         * keep those in their bounding set and none in any other: sandbox_enter() set
         * no_new_privs first, so no exec can raise the permitted set above the
         * empty one capset() leaves below (and the filters allow no exec). */
        r = cut_bounding_set(keep, n_keep);
        if (r < 0)
                return r;
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
                return -errno;
        for (size_t i = 0; i < n_keep; i++) {
                data[keep[i] / 32].effective |= 1u << (keep[i] % 32);
                data[keep[i] / 32].permitted |= 1u << (keep[i] % 32);
        }
        return syscall(SYS_capset, &header, data) < 0 ? -errno : 0;
}

/*
 * Limits are only ever lowered, and left alone when the service manager set
 * them already (its filter may not even allow setrlimit). Forking needs no
 * limit: the system call filter kills it.
 */
static int set_limits(void) {
        static const struct { int resource; rlim_t value; } limits[] = {
                { RLIMIT_CORE, 0 },    /* its memory holds other users' environments and replies */
                { RLIMIT_MEMLOCK, 0 }, /* it locks no memory */
        };

        for (size_t i = 0; i < ELEMENTSOF(limits); i++) {
                struct rlimit now, want = { limits[i].value, limits[i].value };
                if (getrlimit(limits[i].resource, &now) < 0)
                        return -errno;
                if (now.rlim_cur <= want.rlim_cur && now.rlim_max <= want.rlim_max)
                        continue;
                if (setrlimit(limits[i].resource, &want) < 0)
                        return -errno;
        }
        return 0;
}

static int allow_all(scmp_filter_ctx ctx, const int *syscalls, size_t n) {
        for (size_t i = 0; i < n; i++) {
                int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, syscalls[i], 0);
                if (r < 0)
                        return r;
        }
        return 0;
}

/*
 * The agent forks its worker processes (worker-pool.c) itself: clone() with
 * exactly CLONE_PIDFD and SIGCHLD, nothing that makes a thread or a
 * namespace; socketpair() of the Unix family; the one prctl() a worker
 * makes, to die with the agent.
 */
static int allow_forking_workers(scmp_filter_ctx ctx) {
        int r;

        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                             SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)(CLONE_PIDFD | SIGCHLD)));
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socketpair), 1, SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1, SCMP_A0(SCMP_CMP_EQ, PR_SET_PDEATHSIG));
        /* a worker lowers its own priority for a ps listing, and raises it back (jobs.c) */
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(setpriority), 2, SCMP_A0(SCMP_CMP_EQ, PRIO_PROCESS),
                                     SCMP_A1(SCMP_CMP_EQ, 0));
        /* a worker bounds its own data while it builds a heap dump, and lifts the bound after (jobs.c) */
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 2, SCMP_A0(SCMP_CMP_EQ, 0),
                                     SCMP_A1(SCMP_CMP_EQ, RLIMIT_DATA));
        return r;
}

/*
 * The egress process forks one child per upload (glibc's fork(): clone with exactly these flags), kills it at
 * its deadline through a pidfd (kill() of a pid would reach any process of root's), and the child dies with it; libcurl's resolver starts a thread (glibc's pthread_create(), after
 * clone3 is answered ENOSYS). Nothing that makes a namespace. Sockets: Unix, IPv4, IPv6, nothing else.
 */
static int allow_egress_clones(scmp_filter_ctx ctx) {
        const scmp_datum_t fork_flags = CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD;
        const scmp_datum_t thread_flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
                                          CLONE_SYSVSEM | CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID;
        int r;

        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_EQ, fork_flags));
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_EQ, thread_flags));
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, AF_INET));
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, AF_INET6));
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socketpair), 1, SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1, SCMP_A0(SCMP_CMP_EQ, PR_SET_PDEATHSIG));
        /* it reads (keys, CA file, resolver and OpenSSL configuration) and never writes a file */
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(openat), 1,
                                     SCMP_A2(SCMP_CMP_MASKED_EQ, O_ACCMODE | O_CREAT | O_TRUNC | O_APPEND, 0));
        return r;
}

static const scmp_datum_t userns_ioctls[] = { PIDFD_GET_USER_NAMESPACE, NS_GET_PARENT, NS_GET_OWNER_UID };

static int install_filter(SandboxProfile profile) {
        scmp_filter_ctx ctx = seccomp_init(SANDBOX_DENY);
        int r;

        if (!ctx)
                return -ENOMEM;
        /* another ABI (x32, i386) would bypass a list of x86-64 numbers: kill it, whole */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        if (r == 0)
                r = allow_all(ctx, common_syscalls, ELEMENTSOF(common_syscalls));
        if (r == 0 && profile == SANDBOX_AGENT)
                r = allow_all(ctx, agent_syscalls, ELEMENTSOF(agent_syscalls));
        if (r == 0 && profile == SANDBOX_EGRESS)
                r = allow_all(ctx, egress_syscalls, ELEMENTSOF(egress_syscalls));
        /* the agent and the PAM helper open files to write too (dumps, PAM's modules' own); the egress
         * process only reads (allow_egress_clones()) */
        if (r == 0 && profile != SANDBOX_EGRESS)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(openat), 0);
        if (r == 0 && profile == SANDBOX_EGRESS)
                r = allow_egress_clones(ctx);
        for (size_t i = 0; r == 0 && i < ELEMENTSOF(probed_syscalls); i++)
                /* glibc registered the process's first thread with rseq before the filter, and takes a refusal
                 * for a thread it starts as fatal ("rseq registration failed", abort): libcurl's resolver
                 * thread in the egress process */
                r = profile == SANDBOX_EGRESS && probed_syscalls[i] == SCMP_SYS(rseq)
                            ? seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(rseq), 0)
                            : seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), probed_syscalls[i], 0);
        /* the agent uses it (a new worker closes what it inherited); libraries in the helper probe it */
        if (r == 0 && profile != SANDBOX_AGENT)
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(close_range), 0);
        /* sockets of the Unix family only; terminal queries only (isatty) */
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_EQ, TCGETS));
        if (r == 0 && profile == SANDBOX_AGENT)
                r = allow_forking_workers(ctx);
        /* whom a peer counts against: its user namespace from its pidfd, and up to the owner (userns.c) */
        for (size_t i = 0; r == 0 && profile == SANDBOX_AGENT && i < ELEMENTSOF(userns_ioctls); i++)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_EQ, userns_ioctls[i]));
        /* libpam's audit logging probes for the audit socket; "no audit here" is an answer it expects */
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                                     SCMP_A0(SCMP_CMP_EQ, AF_NETLINK));
        if (r == 0)
                r = seccomp_load(ctx);
        seccomp_release(ctx);
        return r;
}

/**
 * sandbox_enter() - confine the calling process for good
 *
 * Called after start-up (policy loaded, socket listening, helper forked) and
 * before the first untrusted byte is read. Order matters: the capabilities
 * are cut while CAP_SETPCAP is still held, no_new_privs comes before the
 * filter (which then needs no CAP_SYS_ADMIN), and the filter comes last.
 * Callers treat any failure as fatal.
 *
 * Return: 0 or a negative errno.
 */
int sandbox_enter(SandboxProfile profile) {
        int r;

        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        r = profile == SANDBOX_AGENT ? drop_capabilities(agent_capabilities, ELEMENTSOF(agent_capabilities))
                                     : drop_capabilities(NULL, 0);
        if (r < 0)
                return r;
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return -errno;
        r = set_limits();
        if (r < 0)
                return r;
        return install_filter(profile);
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Asking the egress process about the policy's stores (egress-check.h), for --check-policy --egress: a command
 * an operator runs, so it may wait for each answer, within a bound.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agent/egress/egress-check.h"
#include "agent/egress/s3-upload.h"
#include "agent/workers/sandbox.h"
#include "common/cleanup.h"

const char *egress_helper_path(void) {
#if DSAGENT_TEST_HOOKS
        const char *test = getenv("DSAGENT_TEST_EGRESS_HELPER");

        if (test && test[0] == '/')
                return test;
#endif
        return DSAGENT_EGRESS_HELPER;
}

const char *egress_user_name(void) {
#if DSAGENT_TEST_HOOKS
        const char *test = getenv("DSAGENT_TEST_EGRESS_USER");

        if (test && test[0])
                return test;
#endif
        return EGRESS_USER;
}

int egress_user_lookup(uid_t *ret_uid, gid_t *ret_gid) {
        struct passwd *pw;

        errno = 0;
        pw = getpwnam(egress_user_name());
        if (!pw)
                return errno == 0 || errno == ENOENT || errno == ESRCH ? -ENOENT : -errno;
        if (pw->pw_uid == 0 || pw->pw_gid == 0)
                return -EPERM;
        *ret_uid = pw->pw_uid;
        *ret_gid = pw->pw_gid;
        return 0;
}

/* In the forked child, before the exec: @uid and @gid for good, no supplementary group, and said so by the kernel. */
static int become_egress_user(uid_t uid, gid_t gid) {
        uid_t ruid, euid, suid;
        gid_t rgid, egid, sgid;

        int r;

        /* while it still holds CAP_SETPCAP (not under dsagent.service, whose bounding set is already cut): past
         * the uid change it could not; and no exec after this one raises what it holds */
        r = sandbox_cut_bounding_set();
        if (r < 0)
                return r;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 ||
            setresuid(uid, uid, uid) < 0)
                return -errno;
        if (getresuid(&ruid, &euid, &suid) < 0 || getresgid(&rgid, &egid, &sgid) < 0 || getgroups(0, NULL) != 0 ||
            ruid != uid || euid != uid || suid != uid || rgid != gid || egid != gid || sgid != gid)
                return -EPERM;
        return 0;
}

int egress_process_spawn(const char *helper, uid_t uid, gid_t gid, pid_t *ret_pid, int *ret_fd) {
        int sv[2], r;
        pid_t pid, parent = getpid();

        char agent[32];

        /* the egress process checks with this that the agent that started it is still its parent, then watches
         * fd 3 for the agent's end (egress-main.c's die_with_agent()) */
        (void)snprintf(agent, sizeof(agent), "--agent=%d", (int)getpid());
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        pid = fork();
        if (pid < 0) {
                r = -errno;
                close(sv[0]);
                close(sv[1]);
                return r;
        }
        if (pid == 0) {
                sigset_t none;

                /* its user first: the kernel clears a death signal set before a change of uid or gid */
                r = become_egress_user(uid, gid);
                if (r < 0) {
                        fprintf(stderr, "dsagent: cannot become the egress process's user %s (%u:%u): %s\n",
                                egress_user_name(), (unsigned)uid, (unsigned)gid, strerror(-r));
                        _exit(127);
                }
                /* fd 3 is the socket (dup2 clears CLOEXEC; if it is 3 already, CLOEXEC is cleared by hand), nothing
                 * else of the agent's crosses the exec; nor its blocked signals (SIGTERM, SIGHUP...), which an
                 * exec keeps: the egress process and its uploads end on SIGTERM as any process. No death signal:
                 * the agent, without CAP_KILL, may not send one to another user's process (the egress process
                 * watches fd 3 instead, egress-main.c); an agent already gone is seen by its pid. */
                sigemptyset(&none);
                if (getppid() != parent ||
                    sigprocmask(SIG_SETMASK, &none, NULL) < 0 ||
                    (sv[1] == 3 ? fcntl(3, F_SETFD, 0) : dup2(sv[1], 3)) < 0 || close_range(4, ~0U, 0) < 0)
                        _exit(127);
                execl(helper, "dsagent-egress", agent, (char *)NULL);
                fprintf(stderr, "dsagent: cannot run %s: %s\n", helper, strerror(errno));
                _exit(127);
        }
        close(sv[1]);
        *ret_pid = pid;
        *ret_fd = sv[0];
        return 0;
}

static int copy_field(char *field, size_t size, const char *s) {
        return s && (size_t)snprintf(field, size, "%s", s) >= size ? -ENAMETOOLONG : 0;
}

static uint64_t now_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

int egress_request_fill(EgressRequest *q, const PolicyEgress *e, const char *credentials_dir) {
        char credentials[EGRESS_FIELD_MAX];
        int r;

        if (e->credentials_kind == POLICY_EGRESS_CREDENTIALS_SYSTEMD) {
                if (!credentials_dir)
                        return -ENOENT;
                if ((size_t)snprintf(credentials, sizeof(credentials), "%s/%s", credentials_dir, e->credentials) >=
                    sizeof(credentials))
                        return -ENAMETOOLONG;
        } else if (copy_field(credentials, sizeof(credentials), e->credentials) < 0)
                return -ENAMETOOLONG;
        *q = (EgressRequest){ .version = EGRESS_PROTOCOL_VERSION, .path_style = e->path_style,
                              .attempts = e->attempts, .part_size = e->part_size, .timeout_usec = e->timeout_usec,
                              .min_speed = e->min_speed };
        r = copy_field(q->name, sizeof(q->name), e->name);
        if (r == 0)
                r = copy_field(q->endpoint, sizeof(q->endpoint), e->endpoint);
        if (r == 0)
                r = copy_field(q->bucket, sizeof(q->bucket), e->bucket);
        if (r == 0)
                r = copy_field(q->region, sizeof(q->region), e->region);
        if (r == 0)
                r = copy_field(q->ca_file, sizeof(q->ca_file), e->ca_file);
        if (r == 0)
                r = copy_field(q->credentials, sizeof(q->credentials), credentials);
        return r;
}

/* @path opened for the egress process to read: no link followed, no terminal taken, no wait for a FIFO's writer
 * (the egress process checks the type, owner and mode on the fd). Return: the fd, or a negative errno. */
static int open_for_egress(const char *path) {
        int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

        return fd < 0 ? -errno : fd;
}

int egress_request_send(int sock, EgressRequest *q, int artifact_fd, int flags) {
        _cleanup_close_ int credentials_fd = -EBADF, ca_fd = -EBADF;
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(3 * sizeof(int))];
        } control = {};
        struct iovec iov = { .iov_base = q, .iov_len = sizeof(*q) };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
        int fds[3];
        size_t n_fds = 0;
        ssize_t n;

        credentials_fd = open_for_egress(q->credentials);
        q->credentials_error = credentials_fd < 0 ? credentials_fd : 0;
        if (credentials_fd >= 0)
                fds[n_fds++] = credentials_fd;
        q->ca_error = 0;
        if (q->ca_file[0]) {
                ca_fd = open_for_egress(q->ca_file);
                q->ca_error = ca_fd < 0 ? ca_fd : 0;
                if (ca_fd >= 0)
                        fds[n_fds++] = ca_fd;
        }
        if (artifact_fd >= 0)
                fds[n_fds++] = artifact_fd;
        if (n_fds > 0) {
                struct cmsghdr *cm;

                msg.msg_control = &control;
                msg.msg_controllen = CMSG_SPACE(n_fds * sizeof(int));
                cm = CMSG_FIRSTHDR(&msg);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(n_fds * sizeof(int));
                memcpy(CMSG_DATA(cm), fds, n_fds * sizeof(int));
        }
        n = sendmsg(sock, &msg, flags | MSG_NOSIGNAL);

        if (n < 0)
                return -errno;
        return n == (ssize_t)sizeof(*q) ? 0 : -EIO; /* a SOCK_SEQPACKET message goes whole or not at all */
}

int egress_check_target(int fd, const PolicyEgress *e, const char *credentials_dir, uint64_t timeout_usec,
                        EgressReply *ret) {
        _cleanup_free_ EgressRequest *q = calloc(1, sizeof(EgressRequest));
        uint64_t deadline = now_usec() + timeout_usec;
        EgressReply a;
        ssize_t n;
        int r = 0;

        if (!q)
                return -ENOMEM;
        r = egress_request_fill(q, e, credentials_dir);
        if (r < 0)
                return r;
        /* one try: a check reports the store as it is now, and a store down is said in seconds, not minutes */
        q->type = EGRESS_REQUEST_CHECK;
        q->attempts = 1;
        r = egress_request_send(fd, q, -1, 0);
        if (r < 0)
                return r == -EPIPE ? -ECONNRESET : r;
        for (;;) {
                uint64_t now = now_usec();
                struct pollfd p = { .fd = fd, .events = POLLIN };

                if (now >= deadline)
                        return -ETIMEDOUT;
                r = poll(&p, 1, (int)((deadline - now + 999) / 1000));
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return -errno;
                if (r > 0)
                        break;
        }
        n = recv(fd, &a, sizeof(a), MSG_TRUNC);
        if (n < 0)
                return -errno;
        if (n == 0)
                return -ECONNRESET;
        if (n != sizeof(a) || a.version != EGRESS_PROTOCOL_VERSION || !memchr(a.s3_code, '\0', sizeof(a.s3_code)) ||
            !memchr(a.message, '\0', sizeof(a.message)))
                return -EBADMSG;
        *ret = a;
        return 0;
}

const char *egress_result_to_string(int result) {
        switch (result) {
        case 0:
                return "reachable";
        case S3_E_REFUSED:
                return "refused";
        case S3_E_UNAVAILABLE:
                return "unreachable";
        case S3_E_GARBAGE:
                return "garbage";
        case S3_E_UNTRUSTED:
                return "untrusted";
        case EGRESS_E_CREDENTIALS:
                return "credentials";
        default:
                return "failed";
        }
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Peer identity from the kernel, checked against processes with known credentials */
#include <grp.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sockopt.h"
#include "tap.h"

static void test_socketpair_is_self(void) {
        PeerCreds c = PEER_CREDS_NULL;
        int sv[2];

        check(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        check(sockopt_get_peer_creds(sv[0], &c) == 0);
        check(c.pid == getpid() && c.uid == geteuid() && c.gid == getegid());
        check(c.n_groups >= 1 && c.groups[0] == getegid());
        peer_creds_done(&c);
        close(sv[0]);
        close(sv[1]);
}

static uint64_t pidfd_inode(int pidfd) {
        struct stat st;
        return fstat(pidfd, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/*
 * A child with chosen uid, gid and supplementary groups connects; the agent's
 * view must be exactly those, groups sorted and de-duplicated with the
 * primary group first, and its pidfd must name that child.
 */
static void test_credentials_of_another_user(void) {
        static const char path[] = "/run/dsagent-test-sockopt.sock";
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        PeerCreds c = PEER_CREDS_NULL;
        int listener, conn, status, pidfd;
        pid_t child;

        check(geteuid() == 0); /* it switches credentials: the test command runs as root */
        strcpy(sa.sun_path, path);
        unlink(path);
        listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        check(bind(listener, (struct sockaddr *)&sa, sizeof(sa)) == 0);
        check(chmod(path, 0777) == 0);
        check(listen(listener, 1) == 0);

        child = fork();
        if (child == 0) {
                gid_t groups[] = { 50, 30, 30, 10, 100 };
                char b;
                int fd;
                if (setgroups(5, groups) < 0 || setgid(100) < 0 || setuid(4321) < 0)
                        _exit(1);
                fd = socket(AF_UNIX, SOCK_STREAM, 0);
                if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                        _exit(2);
                (void)read(fd, &b, 1); /* stay alive until the parent has looked */
                _exit(0);
        }

        conn = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        check(conn >= 0);
        check(sockopt_get_peer_creds(conn, &c) == 0);
        check(c.pid == child && c.uid == 4321 && c.gid == 100);
        check(c.n_groups == 4);
        if (c.n_groups == 4)
                check(c.groups[0] == 100 && c.groups[1] == 10 && c.groups[2] == 30 && c.groups[3] == 50);
        pidfd = (int)syscall(SYS_pidfd_open, child, 0);
        /* the identity of that very process, and no fd kept for it */
        check(c.pidfd_id != 0 && c.pidfd_id == pidfd_inode(pidfd));

        peer_creds_done(&c);
        check(c.groups == NULL);
        close(conn);
        close(pidfd);
        check(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
        close(listener);
        unlink(path);
}

int main(void) {
        run_test(test_socketpair_is_self);
        run_test(test_credentials_of_another_user);
        return tap_finish();
}

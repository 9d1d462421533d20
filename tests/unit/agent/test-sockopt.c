/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Peer identity from the kernel, checked against processes with known credentials */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/loop/sockopt.h"
#include "agent/loop/userns.h"
#include "tests/unit/tap.h"

static void test_socketpair_is_self(void) {
        PeerCreds c = PEER_CREDS_NULL;
        int sv[2];

        check(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        check(sockopt_get_peer_creds(sv[0], &c) == 0);
        check(c.pid == getpid() && c.uid == geteuid() && c.gid == getegid());
        check(c.charged_uid == geteuid()); /* in the agent's own user namespace: its own uid */
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
        check(c.pid == child && c.uid == 4321 && c.gid == 100 && c.charged_uid == 4321);
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

/* A socket anyone may connect to at @path (made afresh), listening; its address in *@sa. */
static int listen_at(const char *path, struct sockaddr_un *sa) {
        int listener;

        *sa = (struct sockaddr_un){ .sun_family = AF_UNIX };
        strcpy(sa->sun_path, path);
        unlink(path);
        listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        check(bind(listener, (struct sockaddr *)sa, sizeof(*sa)) == 0);
        check(chmod(path, 0777) == 0);
        check(listen(listener, 1) == 0);
        return listener;
}

/* What the agent saw of a peer in a user namespace, and that namespace's (the outermost's) inode. */
typedef struct NamespacedPeer {
        uid_t uid, charged;
        ino_t outermost;
} NamespacedPeer;

/* Writes @map to /proc/@child/@file, as root does for a namespace it made or newuidmap for a user. */
static void write_map(pid_t child, const char *file, const char *map) {
        char path[64];
        int fd;

        snprintf(path, sizeof(path), "/proc/%d/%s", (int)child, file);
        fd = open(path, O_WRONLY | O_CLOEXEC);
        check(fd >= 0 && write(fd, map, strlen(map)) == (ssize_t)strlen(map));
        close(fd);
}

/*
 * A process of @creator makes a user namespace, root maps @map there (uids
 * and gids), and the process connects as the namespace's @inside (after
 * making one more namespace, its uids its own, when @nested): what the
 * agent's peer credentials say of it.
 */
static NamespacedPeer peer_in_namespace(uid_t creator, const char *map, uid_t inside, bool nested) {
        static const char path[] = "/run/dsagent-test-sockopt-userns.sock";
        struct sockaddr_un sa;
        PeerCreds c = PEER_CREDS_NULL;
        NamespacedPeer seen = {};
        int listener, conn, status, ready[2], go[2];
        char b, ns_path[64];
        struct stat st;
        pid_t child;

        check(geteuid() == 0);
        listener = listen_at(path, &sa);
        check(pipe2(ready, O_CLOEXEC) == 0 && pipe2(go, O_CLOEXEC) == 0);

        child = fork();
        if (child == 0) {
                int fd;
                if (setgroups(0, NULL) < 0 || setresgid(creator, creator, creator) < 0 ||
                    setresuid(creator, creator, creator) < 0)
                        _exit(1);
                if (unshare(CLONE_NEWUSER) < 0)
                        _exit(2);
                if (write(ready[1], "x", 1) != 1 || read(go[0], &b, 1) != 1)
                        _exit(3);
                if (setresgid(inside, inside, inside) < 0 || setresuid(inside, inside, inside) < 0)
                        _exit(4);
                /* one more level, its uids its own: still the outermost namespace decides */
                if (nested && unshare(CLONE_NEWUSER) < 0)
                        _exit(5);
                fd = socket(AF_UNIX, SOCK_STREAM, 0);
                if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                        _exit(6);
                (void)read(fd, &b, 1); /* stay alive until the parent has looked */
                _exit(0);
        }

        check(read(ready[0], &b, 1) == 1);
        write_map(child, "uid_map", map);
        write_map(child, "gid_map", map);
        snprintf(ns_path, sizeof(ns_path), "/proc/%d/ns/user", (int)child);
        check(stat(ns_path, &st) == 0);
        seen.outermost = st.st_ino;
        check(write(go[1], "x", 1) == 1);

        /* a child that failed never connects: fail, do not hang */
        check(poll(&(struct pollfd){ .fd = listener, .events = POLLIN }, 1, 10000) == 1);
        conn = accept4(listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        check(conn >= 0);
        check(sockopt_get_peer_creds(conn, &c) == 0);
        check(c.pid == child);
        seen.uid = c.uid;
        seen.charged = c.charged_uid;

        peer_creds_done(&c);
        close(conn);
        check(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
        for (int i = 0; i < 2; i++) {
                close(ready[i]);
                close(go[i]);
        }
        close(listener);
        unlink(path);
        return seen;
}

/*
 * A process of uid 4321 makes a user namespace, root maps uids 0-9 there onto
 * 6000-6009 (as newuidmap does with a subordinate range), and the process
 * connects as its uid 3: the peer's uid is 6003, and it is charged to 4321,
 * the namespace's owner. A process in a namespace nested in that one too.
 */
static void test_charged_to_the_namespace_owner_flat(void) {
        NamespacedPeer p = peer_in_namespace(4321, "0 6000 10\n", 3, false);
        check(p.uid == 6003 && p.charged == 4321);
}

static void test_charged_to_the_outermost_namespace_owner(void) {
        NamespacedPeer p = peer_in_namespace(4321, "0 6000 10\n", 3, true);
        check(p.uid == 6003 && p.charged == 4321);
}

/*
 * Root makes the namespace (a rootful container with user namespaces, a
 * PrivateUsers=yes service, a pod with hostUsers: false) and maps 0-9 onto
 * 301000-301009: its peer, uid 301003, was charged to root, the owner; now to
 * the namespace itself, a charge no uid has, whatever uid it runs as there
 * and in namespaces nested in it.
 */
static void test_a_namespace_root_made_is_charged_as_itself(void) {
        NamespacedPeer p = peer_in_namespace(0, "0 301000 10\n", 3, false);
        check(p.uid == 301003 && p.charged != 0 && p.charged != 301003);
        check(userns_charge_is_namespace(p.charged) && p.charged == p.outermost);
}

static void test_a_namespace_nested_in_one_root_made_is_charged_as_the_outer_one(void) {
        NamespacedPeer p = peer_in_namespace(0, "0 301000 10\n", 3, true);
        check(p.uid == 301003 && userns_charge_is_namespace(p.charged) && p.charged == p.outermost);
}

/* uid 0 mapped onto the host's uid 0 (PrivateUsers=yes as root does): root's own uid, but not root's charge. */
static void test_uid_0_in_a_namespace_is_not_roots_charge(void) {
        NamespacedPeer p = peer_in_namespace(0, "0 0 1\n", 0, false);
        check(p.uid == 0 && p.charged != 0 && userns_charge_is_namespace(p.charged) && p.charged == p.outermost);
}

/* The same answers where the kernel has no SO_PEERPIDFD (before 6.5: pidfd_open() of the pid, checked) and no
 * PIDFD_GET_USER_NAMESPACE (before 6.11: /proc/PID/ns/user, checked against the pidfd). */
static void test_the_same_on_kernels_before_6_5_and_6_11(void) {
        static const char *const kernels[] = { "DSAGENT_TEST_NO_PEERPIDFD", "DSAGENT_TEST_NO_PIDFD_USERNS" };

        for (size_t i = 0; i < sizeof(kernels) / sizeof(kernels[0]); i++) {
                NamespacedPeer p;
                check(setenv(kernels[i], "1", 1) == 0);
                p = peer_in_namespace(4321, "0 6000 10\n", 3, true);
                check(p.uid == 6003 && p.charged == 4321);
                p = peer_in_namespace(0, "0 301000 10\n", 3, false);
                check(p.uid == 301003 && userns_charge_is_namespace(p.charged) && p.charged == p.outermost);
                p = peer_in_namespace(0, "0 0 1\n", 0, false);
                check(p.uid == 0 && userns_charge_is_namespace(p.charged) && p.charged == p.outermost);
                check(unsetenv(kernels[i]) == 0);
        }
}

/*
 * A peer whose process is gone before the agent looks cannot be told apart
 * from any namespace's: it is charged to the one shared unknown, never to
 * its uid (which a namespace of anyone's could have mapped).
 */
static void test_a_gone_peer_is_charged_to_the_unknown(void) {
        static const char path[] = "/run/dsagent-test-sockopt-gone.sock";
        struct sockaddr_un sa;
        PeerCreds c = PEER_CREDS_NULL;
        int listener, conn, status;
        pid_t child;

        check(geteuid() == 0);
        listener = listen_at(path, &sa);

        child = fork();
        if (child == 0) {
                int fd;
                if (setresgid(4321, 4321, 4321) < 0 || setresuid(4321, 4321, 4321) < 0)
                        _exit(1);
                fd = socket(AF_UNIX, SOCK_STREAM, 0);
                _exit(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? 2 : 0);
        }
        check(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);

        conn = accept4(listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        check(conn >= 0);
        check(sockopt_get_peer_creds(conn, &c) == 0);
        check(c.uid == 4321 && c.charged_uid == USERNS_CHARGE_UNKNOWN);

        peer_creds_done(&c);
        close(conn);
        close(listener);
        unlink(path);
}

/*
 * The cache refusals use: a peer in the agent's own namespace is its uid by the name of the namespace alone;
 * one below it only once the cache learned its namespace, as the pidfd showed it, and for a second.
 */
static void test_the_charge_of_a_namespace_by_its_name(void) {
        UsernsCache *cache = userns_cache_new();
        int ready[2], go[2], status;
        char b, ns_path[64];
        struct stat st;
        uid_t charged = 0;
        pid_t child;

        check(pipe2(ready, O_CLOEXEC) == 0 && pipe2(go, O_CLOEXEC) == 0);
        child = fork();
        if (child == 0) {
                if (setresgid(4321, 4321, 4321) < 0 || setresuid(4321, 4321, 4321) < 0 || unshare(CLONE_NEWUSER) < 0)
                        _exit(1);
                if (write(ready[1], "x", 1) != 1 || read(go[0], &b, 1) != 1)
                        _exit(2);
                _exit(0);
        }
        check(read(ready[0], &b, 1) == 1);
        snprintf(ns_path, sizeof(ns_path), "/proc/%d/ns/user", (int)child);
        check(stat(ns_path, &st) == 0);

        check(userns_cache_charge(cache, getpid(), 77, 1000, &charged) == 0 && charged == 77);
        check(userns_cache_charge(cache, child, 4321, 1000, &charged) == -ENOENT);
        /* another namespace's inode than the pid's now: not learned */
        check(userns_cache_learn(cache, child, st.st_ino + 1, 4321, 1000) == -ESRCH);
        check(userns_cache_charge(cache, child, 4321, 1000, &charged) == -ENOENT);
        check(userns_cache_learn(cache, child, st.st_ino, 4321, 1000) == 0);
        check(userns_cache_charge(cache, child, 5000, 1000, &charged) == 0 && charged == 4321);
        /* for a second */
        check(userns_cache_charge(cache, child, 5000, 1000 + USERNS_CACHE_USEC, &charged) == -ENOENT);
        userns_cache_expire(cache, 1000 + USERNS_CACHE_USEC);
        check(userns_cache_charge(cache, child, 5000, 1000, &charged) == -ENOENT);

        check(write(go[1], "x", 1) == 1);
        check(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
        /* gone: its name cannot be read */
        check(userns_cache_charge(cache, child, 4321, 1000, &charged) < 0);
        for (int i = 0; i < 2; i++) {
                close(ready[i]);
                close(go[i]);
        }
        userns_cache_free(cache);
}

int main(void) {
        run_test(test_socketpair_is_self);
        run_test(test_credentials_of_another_user);
        run_test(test_charged_to_the_namespace_owner_flat);
        run_test(test_charged_to_the_outermost_namespace_owner);
        run_test(test_a_namespace_root_made_is_charged_as_itself);
        run_test(test_a_namespace_nested_in_one_root_made_is_charged_as_the_outer_one);
        run_test(test_uid_0_in_a_namespace_is_not_roots_charge);
        run_test(test_the_same_on_kernels_before_6_5_and_6_11);
        run_test(test_a_gone_peer_is_charged_to_the_unknown);
        run_test(test_the_charge_of_a_namespace_by_its_name);
        return tap_finish();
}

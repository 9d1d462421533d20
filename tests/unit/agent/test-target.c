/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Target discovery against processes that play a runtime: a genuine
 * listener, and every way the socket path can lie (symlinks, wrong owner,
 * FIFO, another process listening, a stale socket). Needs root.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/targets/target-cache.h"
#include "agent/targets/target.h"
#include "tests/unit/tap.h"

static char tmpdir[64];

/* --- the child: a process whose TMPDIR we chose, optionally listening like a runtime --- */

/* Non-blocking, so the tests can ask "did anyone connect?" without waiting. */
static int bind_listener(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 4) < 0)
                return -1;
        return fd;
}

static char *child_argv0;

/* What setproctitle() does: argv[0] rewritten in place, NUL-padded; no exec. */
static void rename_self(int sig) {
        static const char name[] = "renamed";
        size_t len = strlen(child_argv0);

        memset(child_argv0, 0, len);
        memcpy(child_argv0, name, sizeof(name) - 1 < len ? sizeof(name) - 1 : len);
}

/* What a service with CAP_SETUID, root as its every id here, may do without changing its effective ids. */
static void keep_root_saved_elsewhere(int sig) {
        (void)setresuid((uid_t)-1, (uid_t)-1, 65534);
}

static void change_groups(int sig) {
        (void)setgroups(1, (const gid_t[]){ 4242 });
}

static int child_main(const char *mode, int ready_fd) {
        char path[256];
        Target *self = NULL;

        if (strcmp(mode, "rename") == 0)
                signal(SIGUSR1, rename_self);
        if (strcmp(mode, "credentials") == 0) {
                signal(SIGUSR1, keep_root_saved_elsewhere);
                signal(SIGUSR2, change_groups);
        }

        if (strcmp(mode, "listen") == 0) {
                if (target_open(getpid(), &self) != 0)
                        return 1;
                snprintf(path, sizeof(path), "%s/dotnet-diagnostic-%d-%llu-socket", getenv("TMPDIR"), getpid(),
                         (unsigned long long)self->start_time);
                target_unref(self);
                if (bind_listener(path) < 0)
                        return 2;
        }
        (void)write(ready_fd, "x", 1);
        for (;;) /* until killed: a handled signal (rename) ends pause() */
                pause();
}

/* --- the parent --- */

typedef struct Child {
        pid_t pid;
        Target *target;
        char socket_path[256];
} Child;

static Child spawn(const char *mode, const char *child_tmpdir) {
        char env_tmpdir[128], fd_arg[16], b;
        Child c = {};
        int p[2];

        check(pipe(p) == 0);
        c.pid = fork();
        if (c.pid == 0) {
                char *argv[] = { (char *)"test-target", (char *)"--child", (char *)mode, fd_arg, NULL };
                char *envp[] = { env_tmpdir, NULL };
                close(p[0]);
                snprintf(fd_arg, sizeof(fd_arg), "%d", p[1]);
                snprintf(env_tmpdir, sizeof(env_tmpdir), "TMPDIR=%s", child_tmpdir);
                execve("/proc/self/exe", argv, envp);
                _exit(127);
        }
        close(p[1]);
        check(read(p[0], &b, 1) == 1);
        close(p[0]);

        check(target_open(c.pid, &c.target) == 0);
        if (c.target) {
                check(target_read_details(c.target) == 0 && target_read_environment(c.target) == 0);
                snprintf(c.socket_path, sizeof(c.socket_path), "%s/dotnet-diagnostic-%d-%llu-socket",
                         child_tmpdir, c.pid, (unsigned long long)c.target->start_time);
        }
        return c;
}

static void reap(Child *c) {
        kill(c->pid, SIGKILL);
        waitpid(c->pid, NULL, 0);
        target_unref(c->target);
        unlink(c->socket_path);
}

static bool has_pending_connection(int listener) {
        int fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
                return false;
        close(fd);
        return true;
}

/* What the agent does in two steps (a worker finds the socket, the loop connects), in one. */
static int find_and_connect(Target *t, int *ret_fd, const char **ret_why) {
        int r = target_find_socket(t, ret_why);
        return r != 0 ? r : target_connect(t, ret_fd, ret_why);
}

static void test_open_self_and_missing(void) {
        Target *t = NULL;

        check(target_open(getpid(), &t) == 0);
        check(t && t->pid == getpid() && target_euid(t) == geteuid() && t->start_time > 0);
        check(t && target_ns_pid(t) == getpid() && target_is_alive(t));
        target_unref(t);
        t = NULL;
        check(target_open(0, &t) == TARGET_E_GONE);
        check(target_open(4194304 + 1, &t) == TARGET_E_GONE);
}

static void test_genuine_listener(void) {
        Child c = spawn("listen", tmpdir);
        const char *why = NULL;
        int fd = -1;

        check(c.target && c.target->tmpdir && strcmp(c.target->tmpdir, tmpdir) == 0);
        check(find_and_connect(c.target, &fd, &why) == 0);
        check(fd >= 0);
        if (fd >= 0)
                close(fd);
        reap(&c);
}

static void test_no_socket(void) {
        Child c = spawn("idle", tmpdir);
        const char *why = NULL;
        int fd;

        check(find_and_connect(c.target, &fd, &why) == TARGET_E_NO_SOCKET);
        reap(&c);
}

static void test_symlink_to_privileged_socket_refused(void) {
        Child c = spawn("idle", tmpdir);
        char decoy_path[256];
        const char *why = NULL;
        int decoy, fd;

        /* a root-only socket the attacker would like the agent to talk to */
        snprintf(decoy_path, sizeof(decoy_path), "%s/decoy.sock", tmpdir);
        decoy = bind_listener(decoy_path);
        check(decoy >= 0);
        check(symlink(decoy_path, c.socket_path) == 0);

        check(find_and_connect(c.target, &fd, &why) == TARGET_E_SOCKET_UNTRUSTED);
        check(why && strstr(why, "symbolic link"));
        check(!has_pending_connection(decoy));
        close(decoy);
        unlink(decoy_path);
        reap(&c);
}

static void test_symlinked_tmpdir_refused(void) {
        char real_dir[128], link_dir[128];
        Child c;
        const char *why = NULL;
        int fd;

        snprintf(real_dir, sizeof(real_dir), "%s/real", tmpdir);
        snprintf(link_dir, sizeof(link_dir), "%s/link", tmpdir);
        check(mkdir(real_dir, 0700) == 0);
        check(symlink(real_dir, link_dir) == 0);

        /* the runtime itself would create its socket through the link; the agent must not follow */
        c = spawn("listen", link_dir);
        check(find_and_connect(c.target, &fd, &why) == TARGET_E_SOCKET_UNTRUSTED);
        reap(&c);
        unlink(link_dir);
}

static void test_wrong_owner_refused(void) {
        Child c = spawn("idle", tmpdir);
        const char *why = NULL;
        int planted, fd;

        planted = bind_listener(c.socket_path);
        check(planted >= 0);
        check(chown(c.socket_path, 4321, 4321) == 0);
        check(find_and_connect(c.target, &fd, &why) == TARGET_E_SOCKET_UNTRUSTED);
        check(why && strstr(why, "not owned"));
        check(!has_pending_connection(planted));
        close(planted);
        reap(&c);
}

static void test_fifo_and_file_refused(void) {
        Child c = spawn("idle", tmpdir);
        const char *why = NULL;
        int fd;

        check(mkfifo(c.socket_path, 0600) == 0);
        check(find_and_connect(c.target, &fd, &why) == TARGET_E_SOCKET_UNTRUSTED);
        unlink(c.socket_path);
        fd = open(c.socket_path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        close(fd);
        check(find_and_connect(c.target, &fd, &why) == TARGET_E_SOCKET_UNTRUSTED);
        reap(&c);
}

static void test_impostor_listener_refused(void) {
        Child c = spawn("idle", tmpdir);
        const char *why = NULL;
        int impostor, fd, conn;
        char b;

        /* same uid, right name, right owner: only the listener's identity gives it away */
        impostor = bind_listener(c.socket_path);
        check(impostor >= 0);
        check(find_and_connect(c.target, &fd, &why) == TARGET_E_IMPOSTOR);
        conn = accept4(impostor, NULL, NULL, SOCK_CLOEXEC);
        check(conn >= 0);
        /* the agent wrote nothing to it, and hung up */
        check(conn < 0 || recv(conn, &b, 1, 0) == 0);
        if (conn >= 0)
                close(conn);
        close(impostor);
        reap(&c);
}

static void test_stale_socket_unreachable(void) {
        Child c = spawn("idle", tmpdir);
        const char *why = NULL;
        int stale, fd;

        stale = bind_listener(c.socket_path);
        close(stale);
        check(find_and_connect(c.target, &fd, &why) == TARGET_E_UNREACHABLE);
        reap(&c);
}

static void test_exited_target_gone(void) {
        Child c = spawn("listen", tmpdir);
        const char *why = NULL;
        int fd;

        kill(c.pid, SIGKILL);
        waitpid(c.pid, NULL, 0);
        check(!target_is_alive(c.target));
        check(find_and_connect(c.target, &fd, &why) != 0);
        target_unref(c.target);
        unlink(c.socket_path);
}

static bool cmdline_starts_with(pid_t pid, const char *s) {
        char path[64], buf[64] = "";
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
        f = fopen(path, "re");
        if (!f)
                return false;
        (void)!fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        return strcmp(buf, s) == 0;
}

/* A process renames itself without an exec: a reading of its details no longer holds. */
static void test_details_hold_until_renamed(void) {
        Child c = spawn("rename", tmpdir);
        bool holds = false;

        check(c.target && c.target->name && strcmp(c.target->name, "test-target") == 0);
        check(target_details_hold(c.target, &holds) == 0 && holds);
        kill(c.pid, SIGUSR1);
        for (int i = 0; i < 3000 && !cmdline_starts_with(c.pid, "renamed"); i++) /* 30 s: a loaded machine */
                usleep(10000);
        check(cmdline_starts_with(c.pid, "renamed"));
        check(target_details_hold(c.target, &holds) == 0 && !holds);
        check(c.target->name && strcmp(c.target->name, "renamed") == 0); /* it keeps the fresh ones */
        check(target_details_hold(c.target, &holds) == 0 && holds);
        kill(c.pid, SIGKILL);
        waitpid(c.pid, NULL, 0);
        check(target_details_hold(c.target, &holds) == TARGET_E_GONE);
        target_unref(c.target);
}

/* Does /proc/PID/status hold @line? */
static bool status_has_line(pid_t pid, const char *line) {
        char path[64], buf[4096];
        size_t n;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        f = fopen(path, "re");
        if (!f)
                return false;
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        return strstr(buf, line) != NULL;
}

/* Sends @sig and waits until the child's status shows @line: 30 s at most, for a loaded machine. */
static void change_and_wait(const Child *c, int sig, const char *line) {
        kill(c->pid, sig);
        for (int i = 0; i < 3000 && !status_has_line(c->pid, line); i++)
                usleep(10000);
        check(status_has_line(c->pid, line));
}

/*
 * A process keeps its effective ids and stays dumpable, so /proc/PID and its files keep their owners,
 * but its saved uid, or its groups, change: a reading of it no longer holds (issue 35), and a dump's
 * check of changed credentials sees it, on a reading taken now rather than the one decided on.
 */
static void test_credentials_read_afresh(void) {
        static const struct {
                int signal;
                const char *line;
        } changes[] = { { SIGUSR1, "Uid:\t0\t0\t65534\t0\n" }, { SIGUSR2, "Groups:\t4242 \n" } };

        for (size_t i = 0; i < sizeof(changes) / sizeof(changes[0]); i++) {
                Child c = spawn("credentials", tmpdir);
                sd_event *event = NULL;
                TargetCache *cache = NULL;
                Target *reused = NULL;
                uint64_t age;
                bool changed = true;
                struct stat before, after;

                check(c.target && sd_event_new(&event) >= 0 && target_cache_new(event, &cache) == 0);
                /* the cache keeps only a target whose socket was found: any O_PATH fd stands for it */
                c.target->socket_path_fd = open("/dev/null", O_PATH | O_CLOEXEC);
                target_cache_put(cache, c.target, 1000, 60ULL * 1000000);
                check(target_cache_get(cache, c.pid, 2000, &reused, &age) == 0 && reused == c.target && age == 1000);
                target_unref(reused);
                check(target_changed_credentials(c.target, &changed) == 0 && !changed);
                check(fstatat(c.target->proc_fd, "status", &before, 0) == 0);

                change_and_wait(&c, changes[i].signal, changes[i].line);
                /* what the owner checks see has not moved */
                check(fstatat(c.target->proc_fd, "status", &after, 0) == 0);
                check(before.st_uid == after.st_uid && before.st_gid == after.st_gid);
                check(target_cache_get(cache, c.pid, 3000, &reused, &age) == -ENOENT);
                check(target_changed_credentials(c.target, &changed) == 0 && changed);
                /* the reading decided on still says what it said: the answer came from a fresh one */
                check(c.target->status.uid[2] == 0 &&
                      !(c.target->status.n_groups == 1 && c.target->status.groups[0] == 4242));

                target_cache_free(cache);
                sd_event_unref(event);
                reap(&c);
        }
}

int main(int argc, char **argv) {
        if (argc == 4 && strcmp(argv[1], "--child") == 0) {
                child_argv0 = argv[0];
                return child_main(argv[2], atoi(argv[3]));
        }

        if (geteuid() != 0) {
                printf("1..0 # SKIP needs root\n");
                return 77;
        }
        snprintf(tmpdir, sizeof(tmpdir), "/tmp/dsagent-test-target.XXXXXX");
        if (!mkdtemp(tmpdir))
                return 1;

        run_test(test_open_self_and_missing);
        run_test(test_genuine_listener);
        run_test(test_no_socket);
        run_test(test_symlink_to_privileged_socket_refused);
        run_test(test_symlinked_tmpdir_refused);
        run_test(test_wrong_owner_refused);
        run_test(test_fifo_and_file_refused);
        run_test(test_impostor_listener_refused);
        run_test(test_stale_socket_unreachable);
        run_test(test_exited_target_gone);
        run_test(test_details_hold_until_renamed);
        run_test(test_credentials_read_afresh);

        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
        (void)system(cmd);
        return tap_finish();
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * claim-pid PID PROGRAM [ARG...]: runs PROGRAM as a child whose pid is PID, for the tests that hand a
 * process's pid to another one (tests/integration/harness.py's claim_pid()).
 *
 * clone3() with set_tid asks the kernel for exactly that pid: it is given, or the call fails with
 * EEXIST when something runs under it. The tests' earlier way, writing PID - 1 to ns_last_pid and
 * forking, moved the pid allocator back for everybody, so that any process a neighbouring test
 * forked in between took the pid instead; set_tid leaves the allocator where it is. Needs
 * CAP_SYS_ADMIN (the tests run as root).
 *
 * The parent waits for the child and exits with its status (128 + the signal that killed it), so
 * that whoever started claim-pid holds the child's lifetime; it exits 75 without a child when the
 * pid is not free, 71 when clone3 fails otherwise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
        pid_t wanted, child;
        char *end;
        int status;

        if (argc < 3) {
                fprintf(stderr, "usage: claim-pid PID PROGRAM [ARG...]\n");
                return 2;
        }
        errno = 0;
        wanted = (pid_t)strtol(argv[1], &end, 10);
        if (errno || *end || wanted <= 1) {
                fprintf(stderr, "claim-pid: not a pid: %s\n", argv[1]);
                return 2;
        }

        struct clone_args args = {
                .exit_signal = SIGCHLD,
                .set_tid = (uint64_t)(uintptr_t)&wanted,
                .set_tid_size = 1,
        };
        child = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
        if (child < 0) {
                fprintf(stderr, "claim-pid: cannot claim pid %d: %s\n", (int)wanted, strerror(errno));
                return errno == EEXIST ? 75 : 71;
        }
        if (child == 0) {
                execvp(argv[2], argv + 2);
                fprintf(stderr, "claim-pid: cannot run %s: %s\n", argv[2], strerror(errno));
                _exit(127);
        }
        while (waitpid(child, &status, 0) < 0)
                if (errno != EINTR)
                        return 71;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

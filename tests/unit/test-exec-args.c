/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dsctl exec's command: "{pid}" made the pid, and an empty -p found where a shell left one */
#include <string.h>

#include "client/exec-args.h"
#include "tests/unit/tap.h"

/* A NULL-terminated argv of string literals. */
#define ARGS(...) ((char *const *)(const char *const[]){ __VA_ARGS__, NULL })

/* exec_args_substitute() of @argv with @pid matches @want exactly. */
static bool substitutes_to(char *const *argv, pid_t pid, char *const *want) {
        char **got = NULL;
        bool same;
        size_t i;

        if (exec_args_substitute(argv, pid, &got) != 0)
                return false;
        for (i = 0; want[i] && got[i] && strcmp(want[i], got[i]) == 0; i++)
                ;
        same = !want[i] && !got[i];
        if (!same)
                printf("# argument %zu: got '%s', wanted '%s'\n", i, got[i] ? got[i] : "(end)",
                       want[i] ? want[i] : "(end)");
        exec_args_free(got);
        return same;
}

static size_t empty_at(char *const *argv) {
        return exec_args_find_empty_process_id(argv);
}

static void test_pid_placeholder_is_replaced_wherever_it_stands(void) {
        check(substitutes_to(ARGS("dotnet-counters", "monitor", "-p", "{pid}"), 4242,
                             ARGS("dotnet-counters", "monitor", "-p", "4242")));
        check(substitutes_to(ARGS("dotnet-trace", "collect", "--process-id={pid}", "-o", "{pid}-{pid}.nettrace"), 7,
                             ARGS("dotnet-trace", "collect", "--process-id=7", "-o", "7-7.nettrace")));
        /* longer than the placeholder, and inside a shell's script */
        check(substitutes_to(ARGS("sh", "-c", "dotnet-stack report -p {pid} | head"), 2147483647,
                             ARGS("sh", "-c", "dotnet-stack report -p 2147483647 | head")));
        /* only the exact placeholder; the program is taken as it is */
        check(substitutes_to(ARGS("{pid}", "{PID}", "{pid", "pid}", "{{pid}}"), 12,
                             ARGS("{pid}", "{PID}", "{pid", "pid}", "{12}")));
        check(substitutes_to(ARGS("true"), 1, ARGS("true")));
}

static void test_an_empty_process_id_is_found(void) {
        /* what a shell makes of -p "$DSCTL_PID" before dsctl set it */
        check(empty_at(ARGS("dotnet-counters", "monitor", "-p", "")) == 2);
        check(empty_at(ARGS("dotnet-trace", "collect", "--process-id", "", "-o", "x")) == 2);
        /* -p $DSCTL_PID unquoted: nothing after it, or the next option */
        check(empty_at(ARGS("dotnet-stack", "report", "-p")) == 2);
        check(empty_at(ARGS("dotnet-gcdump", "collect", "-p", "-o", "a.gcdump")) == 2);
        /* the value attached, empty */
        check(empty_at(ARGS("dotnet-trace", "collect", "-p=")) == 2);
        check(empty_at(ARGS("dotnet-trace", "collect", "--process-id:")) == 2);
        check(empty_at(ARGS("dotnet-trace", "collect", "-o", "x", "-p:")) == 4);
}

static void test_a_process_id_given_is_left_alone(void) {
        check(empty_at(ARGS("dotnet-counters", "monitor", "-p", "4242")) == 0);
        check(empty_at(ARGS("dotnet-trace", "collect", "--process-id=4242")) == 0);
        check(empty_at(ARGS("dotnet-trace", "collect", "-p:4242")) == 0);
        /* an empty value of another option */
        check(empty_at(ARGS("dotnet-trace", "collect", "--providers", "", "-p", "1")) == 0);
        /* after "--", the arguments are for the program the tool starts */
        check(empty_at(ARGS("dotnet-trace", "collect", "--", "app", "-p", "")) == 0);
        /* the program itself, and options that only begin like -p */
        check(empty_at(ARGS("-p", "")) == 0);
        check(empty_at(ARGS("mkdir", "-pv")) == 0);
        check(empty_at(ARGS("tool", "--process-idx", "")) == 0);
        check(empty_at((char *const[]){ NULL }) == 0);
}

int main(void) {
        run_test(test_pid_placeholder_is_replaced_wherever_it_stands);
        run_test(test_an_empty_process_id_is_found);
        run_test(test_a_process_id_given_is_left_alone);
        return tap_finish();
}

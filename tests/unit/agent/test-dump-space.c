/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What a requester whose dump or crash core found no room is told (dump-publish.h): the numbers
 * (used, limit, free) and what they can do. The crash core's paths reach these words only in the
 * booted systemd test, so the words themselves are checked here.
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "agent/dumps/dump-publish.h"
#include "tests/unit/tap.h"

#define MIB (1024ULL * 1024)
#define GIB (1024 * MIB)

static void test_the_numbers_say_used_limit_and_free(void) {
        DumpSpace s = { .used = 2 * GIB - 100 * MIB, .in_flight = 120 * MIB, .max_use = 2 * GIB,
                        .fs_size = 50 * GIB, .avail = 31 * GIB, .keep_free = 7 * GIB + GIB / 2,
                        .max_use_setting = { .bytes = 2 * GIB }, .keep_free_setting = { .percent = 15 } };
        char buf[DUMP_SPACE_NUMBERS_MAX];

        dump_space_format(&s, buf, sizeof(buf));
        check(strcmp(buf, "used 1.9 GiB and 120.0 MiB being written of max_use 2.0 GiB; free 31.0 GiB of 50.0 GiB, "
                          "keep_free 7.5 GiB (15%)") == 0);
        /* nothing being written: no words for it */
        s.in_flight = 0;
        dump_space_format(&s, buf, sizeof(buf));
        check(strncmp(buf, "used 1.9 GiB of max_use 2.0 GiB; free ", 38) == 0);
}

static void test_a_full_file_system_is_said_with_its_numbers(void) {
        PolicySize max_use = { .bytes = 1ULL << 40 }, keep_free = { .bytes = 1 };
        char dir[] = "/tmp/test-dump-space.XXXXXX", buf[DUMP_SPACE_WHY_MAX];
        const char *what = "the core does not fit: the dump directory's file system filled up as it was named";
        const char *said;
        int fd;

        /* a dump_dir that cannot be measured: the words alone, never a half-filled buffer */
        said = dump_space_full_why(-EBADF, &max_use, &keep_free, 0, what, buf, sizeof(buf));
        check(said == what);

        /* an empty one: what it holds, what is being written, the limits, what is free */
        check(mkdtemp(dir) != NULL);
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        check(fd >= 0);
        said = dump_space_full_why(fd, &max_use, &keep_free, 3 * MIB, what, buf, sizeof(buf));
        check(said == buf);
        check(strncmp(said, what, strlen(what)) == 0);
        check(strncmp(said + strlen(what), " (used 0 B and 3.0 MiB being written of max_use 1.0 TiB; free ", 62) == 0);
        check(strlen(said) > strlen(", keep_free 1 B)") &&
              strcmp(said + strlen(said) - strlen(", keep_free 1 B)"), ", keep_free 1 B)") == 0);
        close(fd);
        rmdir(dir);
}

static void test_the_answer_says_what_the_user_can_do(void) {
        PolicyCollect tables[2] = {};
        Policy p = { .agent.dump_dir = (char *)"/var/lib/dsagent/dumps", .collect = tables, .n_collect = 2 };
        const char *why = "dumps would take more than max_use (used 1.0 MiB of max_use 1.0 MiB; free 3.0 GiB of "
                          "20.0 GiB, keep_free 3.0 GiB (15%))";
        char *text;

        text = dump_no_space_answer(&p, why);
        check(text && strncmp(text, why, strlen(why)) == 0);
        check(text && strstr(text, ". To make room: 'dsctl dumps' lists what you may read in /var/lib/dsagent/dumps, "
                                   "and 'dsctl dumps --remove PATH' removes the dumps you asked for; for the rest ask "
                                   "root, who may remove any, or raise max_use or lower keep_free in the policy's "
                                   "[agent]"));
        free(text);

        /* a table whose readers may remove its artifacts: they are told they may */
        tables[1].artifacts.readers_may_remove = true;
        text = dump_no_space_answer(&p, why);
        check(text && strstr(text, "removes the dumps you asked for and the artifacts of the tables that let their "
                                   "readers remove them; for the rest ask root"));
        free(text);
}

int main(void) {
        run_test(test_the_numbers_say_used_limit_and_free);
        run_test(test_a_full_file_system_is_said_with_its_numbers);
        run_test(test_the_answer_says_what_the_user_can_do);
        return tap_finish();
}

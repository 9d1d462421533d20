/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * dsctl counters --format prometheus -o FILE (client/counter-sink.h): each
 * interval's file is made and renamed in the directory pinned at the start,
 * so whoever may rename a directory on the path cannot send root's next
 * write elsewhere; and no series gets a metric name Prometheus refuses.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/counter-sink.h"
#include "client/out-file.h"
#include "tests/unit/tap.h"

#define SECOND 1000000000LL

static char *read_file(const char *path) {
        char *text = NULL;
        size_t size = 0;
        FILE *f = fopen(path, "re"), *m;
        int ch;

        if (!f)
                return NULL;
        m = open_memstream(&text, &size);
        while (m && (ch = fgetc(f)) != EOF)
                fputc(ch, m);
        if (m)
                fclose(m);
        fclose(f);
        return text;
}

/* The names in @dir, sorted, joined by spaces. */
static char *listing(const char *dir) {
        struct dirent **entries;
        char *text = NULL;
        size_t size = 0;
        FILE *m;
        bool first = true;
        int n = scandir(dir, &entries, NULL, alphasort);

        if (n < 0)
                return NULL;

        m = open_memstream(&text, &size);
        for (int i = 0; i < n; i++) {
                if (m && strcmp(entries[i]->d_name, ".") != 0 && strcmp(entries[i]->d_name, "..") != 0) {
                        fprintf(m, "%s%s", first ? "" : " ", entries[i]->d_name);
                        first = false;
                }
                free(entries[i]);
        }
        free(entries);
        if (m)
                fclose(m);
        return text;
}

static void gauge(CounterSink *s, const char *name, double value, int64_t now) {
        NettraceCounter c = { .kind = NETTRACE_COUNTER_GAUGE, .provider = strdup("Dsagent.Test"), .name = strdup(name),
                              .has_value = true, .value = value };

        counter_sink_add(s, &c, now, now);
}

static void test_prometheus_file_stays_in_its_directory(void) {
        char base[] = "/tmp/test-counter-sink.XXXXXX", metrics[64], old[64], other[64], path[96], moved[96], stray[96];
        OutFile file = OUT_FILE_NULL;
        SessionOptions o = { .kind = SESSION_OUTPUT_PROMETHEUS };
        CounterSink *s = NULL;
        char *text, *names;

        if (!mkdtemp(base)) {
                check(false);
                return;
        }
        snprintf(metrics, sizeof(metrics), "%s/metrics", base);
        snprintf(old, sizeof(old), "%s/old", base);
        snprintf(other, sizeof(other), "%s/other", base);
        snprintf(path, sizeof(path), "%s/app.prom", metrics);
        snprintf(moved, sizeof(moved), "%s/app.prom", old);
        snprintf(stray, sizeof(stray), "%s/app.prom", other);
        check(mkdir(metrics, 0755) == 0 && mkdir(other, 0755) == 0);

        /* a directory is no file to replace; a missing directory is refused at once */
        check(counter_sink_check_file(&file, metrics) == -EISDIR);
        out_file_done(&file);
        file = (OutFile)OUT_FILE_NULL;
        check(counter_sink_check_file(&file, "/tmp/test-counter-sink.none/x.prom") == -ENOENT);
        out_file_done(&file);
        file = (OutFile)OUT_FILE_NULL;

        check(counter_sink_check_file(&file, path) == 0);
        names = listing(metrics);
        check(names && strcmp(names, "") == 0); /* the check left nothing behind */
        free(names);
        o.output = path;
        o.prometheus_file = &file;
        check(counter_sink_new(&o, NULL, &s) == 0);
        counter_sink_begin(s, NULL, 0, 0);
        gauge(s, "dsagent.test.queue", 1, SECOND);
        counter_sink_tick(s, 3 * SECOND);
        text = read_file(path);
        check(text && strstr(text, "\ndsagent_test_queue{otel_scope_name=\"Dsagent.Test\"} 1\n"));
        free(text);

        /* whoever owns base swaps metrics/ for a symlink to another directory between two intervals */
        check(rename(metrics, old) == 0 && symlink(other, metrics) == 0);
        gauge(s, "dsagent.test.queue", 2, 4 * SECOND);
        counter_sink_tick(s, 6 * SECOND);
        gauge(s, "dsagent.test.queue", 3, 7 * SECOND);
        check(counter_sink_end(s) == 0);
        s = counter_sink_free(s);
        out_file_done(&file);

        /* replaced where it was made, never in the other directory */
        text = read_file(moved);
        check(text && strstr(text, "\ndsagent_test_queue{otel_scope_name=\"Dsagent.Test\"} 3\n"));
        free(text);
        check(access(stray, F_OK) < 0);
        names = listing(other);
        check(names && strcmp(names, "") == 0);
        free(names);
        names = listing(old);
        check(names && strcmp(names, "app.prom") == 0); /* no hidden file left */
        free(names);

        unlink(moved);
        unlink(metrics);
        rmdir(old);
        rmdir(other);
        rmdir(base);
}

/* An instrument named "" has no Prometheus name: it is left out, and the file stays valid for promtool. */
static void test_nameless_instrument_is_left_out(void) {
        char base[] = "/tmp/test-counter-sink.XXXXXX", path[64], command[128];
        OutFile file = OUT_FILE_NULL;
        SessionOptions o = { .kind = SESSION_OUTPUT_PROMETHEUS, .quiet = true };
        CounterSink *s = NULL;
        char *text;

        if (!mkdtemp(base)) {
                check(false);
                return;
        }
        snprintf(path, sizeof(path), "%s/app.prom", base);
        check(counter_sink_check_file(&file, path) == 0);
        o.output = path;
        o.prometheus_file = &file;
        check(counter_sink_new(&o, NULL, &s) == 0);
        counter_sink_begin(s, NULL, 0, 0);
        gauge(s, "", 1, SECOND);
        gauge(s, "named", 2, SECOND);
        check(counter_sink_end(s) == 0);
        counter_sink_free(s);
        out_file_done(&file);

        text = read_file(path);
        check(text && strcmp(text, "# HELP named named\n# TYPE named gauge\n"
                                   "named{otel_scope_name=\"Dsagent.Test\"} 2\n") == 0);
        free(text);
        if (access("/usr/bin/promtool", X_OK) == 0) {
                snprintf(command, sizeof(command), "promtool check metrics < %s > /dev/null 2>&1", path);
                check(system(command) == 0);
        } else
                printf("# promtool is missing: the file is not checked with it\n");
        unlink(path);
        rmdir(base);
}

int main(void) {
        run_test(test_prometheus_file_stays_in_its_directory);
        run_test(test_nameless_instrument_is_left_out);
        return tap_finish();
}

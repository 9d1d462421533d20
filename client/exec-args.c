/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dsctl exec's command, before it runs (exec-args.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/exec-args.h"

void exec_args_free(char **argv) {
        if (!argv)
                return;
        for (char **a = argv; *a; a++)
                free(*a);
        free(argv);
}

/* @arg with every "{pid}" replaced by @pid_text. Return: a new string, or NULL without memory. */
static char *replace_placeholder(const char *arg, const char *pid_text) {
        const size_t placeholder_len = strlen(EXEC_ARGS_PID_PLACEHOLDER), pid_len = strlen(pid_text);
        size_t n = 0, size;
        const char *s;
        char *out, *o;

        for (s = arg; (s = strstr(s, EXEC_ARGS_PID_PLACEHOLDER)); s += placeholder_len)
                n++;
        if (n == 0)
                return strdup(arg);
        size = strlen(arg) + 1;
        if (pid_len > placeholder_len)
                size += n * (pid_len - placeholder_len);
        out = malloc(size);
        if (!out)
                return NULL;
        for (o = out, s = arg;;) {
                const char *at = strstr(s, EXEC_ARGS_PID_PLACEHOLDER);

                if (!at) {
                        strcpy(o, s);
                        return out;
                }
                memcpy(o, s, (size_t)(at - s));
                o += at - s;
                memcpy(o, pid_text, pid_len);
                o += pid_len;
                s = at + placeholder_len;
        }
}

int exec_args_substitute(char *const *argv, pid_t pid, char ***ret_argv) {
        char pid_text[24], **out;
        size_t n = 0;

        while (argv[n])
                n++;
        out = calloc(n + 1, sizeof(char *));
        if (!out)
                return -ENOMEM;
        snprintf(pid_text, sizeof(pid_text), "%d", (int)pid);
        for (size_t i = 0; i < n; i++) {
                out[i] = i == 0 ? strdup(argv[0]) : replace_placeholder(argv[i], pid_text);
                if (!out[i]) {
                        exec_args_free(out);
                        return -ENOMEM;
                }
        }
        *ret_argv = out;
        return 0;
}

/* Is @arg the option @name with an empty value attached ("NAME=", "NAME:")? */
static bool is_empty_attached(const char *arg, const char *name) {
        size_t n = strlen(name);

        return strncmp(arg, name, n) == 0 && (arg[n] == '=' || arg[n] == ':') && arg[n + 1] == '\0';
}

size_t exec_args_find_empty_process_id(char *const *argv) {
        if (!argv[0])
                return 0;
        for (size_t i = 1; argv[i] && strcmp(argv[i], "--") != 0; i++) {
                const char *next = argv[i + 1];

                if (is_empty_attached(argv[i], "-p") || is_empty_attached(argv[i], "--process-id"))
                        return i;
                if (strcmp(argv[i], "-p") != 0 && strcmp(argv[i], "--process-id") != 0)
                        continue;
                if (!next || next[0] == '\0' || next[0] == '-')
                        return i;
                i++; /* its value, which is no option of the tool's */
        }
        return 0;
}

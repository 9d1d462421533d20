/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * dsctl exec's command, before it runs: "{pid}" in its arguments made the pid the port serves,
 * and a -p that will reach the tool empty found, so that dsctl can say so. Pure: no I/O.
 */
#pragma once

#include <stddef.h>
#include <sys/types.h>

/* What dsctl exec replaces in the command's arguments with the pid (docs/proxy.md). */
#define EXEC_ARGS_PID_PLACEHOLDER "{pid}"

/**
 * exec_args_substitute() - the command with every "{pid}" in its arguments replaced by @pid
 * @argv: NULL-terminated; argv[0], the program, is taken as it is
 *
 * @pid is written in decimal, as the port names its socket (dotnet-diagnostic-PID-1-socket),
 * wherever "{pid}" stands in an argument: alone ("-p {pid}"), or within one ("-p={pid}",
 * "sh -c '... -p {pid}'").
 *
 * Return: 0 and a new NULL-terminated array of new strings in *@ret_argv (exec_args_free()
 * frees it), or -ENOMEM.
 */
int exec_args_substitute(char *const *argv, pid_t pid, char ***ret_argv);

/* Frees what exec_args_substitute() made; NULL is fine. */
void exec_args_free(char **argv);

/**
 * exec_args_find_empty_process_id() - where the command gives -p or --process-id no value
 * @argv: NULL-terminated, as the command will get it (after exec_args_substitute())
 *
 * What a shell does to `-p "$DSCTL_PID"` typed at its prompt: it expands the variable before
 * dsctl sets it, and the tool gets "-p" and "". Looks at the arguments before a "--" (those after
 * it are for a program the tool starts), for "-p" or "--process-id" followed by an empty
 * argument, by nothing, or by another option (an argument that starts with '-'); and for the
 * forms with the value attached and empty: "-p=", "-p:", "--process-id=", "--process-id:".
 *
 * Return: the index in @argv of the first such option, or 0 when there is none (argv[0] is the
 * program, never an option).
 */
size_t exec_args_find_empty_process_id(char *const *argv);

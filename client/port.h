/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * dsctl port: a diagnostic port for stock .NET tools. A socket of the
 * caller's own; each connection a tool makes carries one IPC request, which
 * goes to the agent as a WIRE_REQUEST_IPC for the named target, and the
 * agent's answer goes back in the runtime's own encoding (docs/proxy.md).
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

typedef struct PortOptions {
        const char *agent_socket; /* the agent's socket */
        pid_t pid;                /* the target: a pid, */
        const char *unit;         /* or a unit's one .NET process; with a pid too (exec), that pid while in the unit */
        const char *path;         /* the port's socket; NULL: a default place (port_run()) */
        bool once;                /* end after the first trace session or dump */
        bool quiet;               /* no notes on standard error */
        char *const *exec_argv;   /* dsctl exec: run this command against the port (port_run()) */
} PortOptions;

/**
 * port_run() - serve the port until SIGINT or SIGTERM (or, with once, the first session or dump)
 *
 * The socket is made with mode 0600 by bind(), which never replaces a name:
 * an existing path or symlink is refused. Its default place is
 * $XDG_RUNTIME_DIR when that is a directory of the caller's with mode 0700,
 * else a new private directory in $TMPDIR (or /tmp). Its first line on
 * standard output is "PATH,connect". A connection from any uid but the
 * caller's is closed before a byte is read. The socket (and a directory
 * made for it) is removed on the way out.
 *
 * With exec_argv (dsctl exec: a pid, and the unit it was resolved from if
 * any), the socket is instead dotnet-diagnostic-PID-1-socket, the name a
 * runtime gives its own, in a new private directory in $TMPDIR (or /tmp), and
 * nothing is printed on standard output: exec_argv runs with TMPDIR set to
 * that directory and DSCTL_PID to the pid, so tools find the port by -p PID. The port serves until it exits; SIGINT is left to it (the
 * terminal sends it there too) and SIGTERM passed on to it.
 *
 * Return: an exit status (exit-status.h); EXIT_OK after a signal; with exec_argv, the
 * command's exit status, 128+N when signal N ended it, 127 when it cannot be run.
 */
int port_run(const PortOptions *o);

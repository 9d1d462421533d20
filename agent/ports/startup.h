/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Runtimes suspended at startup: how the agent tells one, what it answers for one, and resume */
#pragma once

#include "agent/loop/request.h"
#include "common/wire.h"

/*
 * A runtime told to pause at startup (DOTNET_DefaultDiagnosticPortSuspend,
 * DOTNET_DiagnosticPorts) waits before any managed code runs, its diagnostic
 * server up. It answers ProcessInfo and ProcessEnvironment, and a full dump
 * and an EventPipe session start, but the session carries nothing until it
 * is resumed, and createdump dies on the other dump types (the runtime
 * reports success: no dump ever arrives).
 *
 * How the agent tells one: while it waits, the command line the runtime
 * reports is its executable's path alone; once the host runs the entry
 * assembly it is the path, the assembly and the arguments (the runtime's own
 * tests rely on this). Nothing else the protocol tells differs on .NET 8 and
 * later, where the entry assembly's name is known from the start, and the
 * runtime's own flag for it stays set in a runtime that never paused. So a
 * runtime whose environment asks for a pause (procfs_environ_startup_suspend(),
 * read with its socket) is asked for ProcessInfo and is taken as suspended
 * while that command line is its executable; any other runtime is not asked.
 */
typedef enum StartupState {
        STARTUP_STARTED,           /* runs its entry assembly, or nothing in its environment pauses it */
        STARTUP_SUSPENDED,         /* waits for ResumeRuntime on its own socket (and maybe on its ports) */
        STARTUP_SUSPENDED_PORTS,   /* waits only for the tools of DOTNET_DiagnosticPorts */
} StartupState;

typedef struct StartupProbe StartupProbe;

/*
 * startup_probe() - is req->target's runtime, whose socket was found, suspended at startup?
 *
 * @probed gets the answer; a runtime whose environment pauses nothing is not
 * asked. Failures are answered here, and @probed is then not called.
 */
void startup_probe(Request *req, void (*probed)(Request *req, StartupState state));

/*
 * startup_connect_runtime() - commands_connect_runtime() for what cannot work before the runtime starts
 *
 * A runtime suspended at startup is answered WIRE_ERROR_SUSPENDED, saying that @what
 * ("a trace") cannot be had before, and @connected is not called.
 */
void startup_connect_runtime(Request *req, const char *what, void (*connected)(Request *req, int fd));

/* Answers WIRE_ERROR_SUSPENDED for a runtime in @state: @what cannot be had before it starts. */
void startup_reply_suspended(Request *req, StartupState state, const char *what);

/* resume: ResumeRuntime on the process's own socket, under the policy command resume. */
void resume_start(Request *req, const WireMessage *m);

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dsctl: ask dsagent for diagnostics of .NET processes */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-client.h"
#include "cleanup.h"
#include "io.h"
#include "output.h"
#include "text.h"
#include "wire.h"

#define DSCTL_DEFAULT_SOCKET "/run/dsagent.sock"
#define DSCTL_TIMEOUT_SEC 60

/* Exit codes: stable, documented in docs/dsctl.md, one per kind of failure. */
enum {
        EXIT_OK = 0,
        EXIT_ERROR = 1,
        EXIT_USAGE = 2,
        EXIT_AGENT_UNREACHABLE = 3,
        EXIT_DENIED = 4,
        EXIT_NO_SUCH_PROCESS = 5,
        EXIT_NOT_DOTNET = 6,
        EXIT_RUNTIME_UNREACHABLE = 7,
        EXIT_RUNTIME_FAILED = 8,
        EXIT_SOCKET_UNTRUSTED = 9,
        EXIT_AGENT_BUSY = 10,
        EXIT_NO_SPACE = 11,
};

typedef struct Args {
        const char *socket_path;
        bool json;
        const char *verb;
        pid_t pid;
        /* dump */
        const char *unit;
        const char *output;
        /* explain */
        const char *command;
        const char *dump_type;
        const char *trace_profile;
        uint64_t duration_sec;
        bool have_duration;
} Args;

static void usage(FILE *out) {
        fprintf(out,
                "Usage: dsctl [OPTIONS] COMMAND\n"
                "Ask dsagent for diagnostics of .NET processes.\n\n"
                "Commands:\n"
                "  ps            list the .NET processes you may act on\n"
                "  info PID      command line, OS, architecture and runtime of a process\n"
                "  explain PID COMMAND [--type T] [--profile P] [--duration SECONDS]\n"
                "                would COMMAND on PID be allowed, and by which rule or why not\n"
                "  dump PID|UNIT [--type mini|heap|triage|full] [-o FILE]\n"
                "                take a dump (mini unless told); -o writes your own copy to FILE\n"
                "  dumps         list the dumps you can read\n\n"
                "Options:\n"
                "  --socket PATH  the agent's socket [$DSAGENT_SOCKET, else " DSCTL_DEFAULT_SOCKET "]\n"
                "  --json         machine-readable output\n"
                "  --help         show this help\n"
                "  --version      show the version\n\n"
                "Exit status: 0 ok, 1 error, 2 usage, 3 agent not reachable, 4 permission denied,\n"
                "5 no such process, 6 not a .NET process, 7 runtime not answering, 8 runtime error,\n"
                "9 diagnostic socket failed verification, 10 agent busy, 11 no space for the dump.\n"
                "explain exits 0 when the command would be allowed and 4 when it would be denied.\n");
}

static int parse_explain_args(int argc, char **argv, Args *a) {
        enum { ARG_TYPE = 0x100, ARG_PROFILE, ARG_DURATION };
        static const struct option options[] = {
                { "type", required_argument, NULL, ARG_TYPE },
                { "profile", required_argument, NULL, ARG_PROFILE },
                { "duration", required_argument, NULL, ARG_DURATION },
                {},
        };
        int c;

        if (optind + 2 > argc || parse_pid(argv[optind], &a->pid) < 0) {
                fprintf(stderr, "dsctl: explain takes a process id and a command, e.g. 'explain 1234 dump'\n");
                return -EINVAL;
        }
        a->command = argv[optind + 1];
        optind += 2;
        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0) {
                switch (c) {
                case ARG_TYPE:
                        a->dump_type = optarg;
                        break;
                case ARG_PROFILE:
                        a->trace_profile = optarg;
                        break;
                case ARG_DURATION:
                        if (parse_u64(optarg, &a->duration_sec) < 0) {
                                fprintf(stderr, "dsctl: --duration takes a number of seconds\n");
                                return -EINVAL;
                        }
                        a->have_duration = true;
                        break;
                default:
                        return -EINVAL;
                }
        }
        if (optind != argc) {
                fprintf(stderr, "dsctl: unexpected argument '%s'\n", argv[optind]);
                return -EINVAL;
        }
        return 0;
}

/* TARGET is a process id, or a systemd unit whose one .NET process is meant. */
static int parse_dump_args(int argc, char **argv, Args *a) {
        enum { ARG_TYPE = 0x100 };
        static const struct option options[] = {
                { "type", required_argument, NULL, ARG_TYPE },
                { "output", required_argument, NULL, 'o' },
                {},
        };
        int c;

        if (optind >= argc) {
                fprintf(stderr, "dsctl: dump takes a process id or a unit, e.g. 'dump 1234' or 'dump orders.service'\n");
                return -EINVAL;
        }
        if (parse_pid(argv[optind], &a->pid) < 0)
                a->unit = argv[optind];
        optind++;
        while ((c = getopt_long(argc, argv, "o:", options, NULL)) >= 0) {
                switch (c) {
                case ARG_TYPE:
                        a->dump_type = optarg;
                        break;
                case 'o':
                        a->output = optarg;
                        break;
                default:
                        return -EINVAL;
                }
        }
        if (optind != argc) {
                fprintf(stderr, "dsctl: unexpected argument '%s'\n", argv[optind]);
                return -EINVAL;
        }
        return 0;
}

static int parse_args(int argc, char **argv, Args *a) {
        enum { ARG_SOCKET = 0x100, ARG_JSON, ARG_HELP, ARG_VERSION };
        static const struct option options[] = {
                { "socket", required_argument, NULL, ARG_SOCKET },
                { "json", no_argument, NULL, ARG_JSON },
                { "help", no_argument, NULL, ARG_HELP },
                { "version", no_argument, NULL, ARG_VERSION },
                {},
        };
        int c;

        /* "+": options end at the command, as with git and systemctl */
        while ((c = getopt_long(argc, argv, "+", options, NULL)) >= 0) {
                switch (c) {
                case ARG_SOCKET:
                        a->socket_path = optarg;
                        break;
                case ARG_JSON:
                        a->json = true;
                        break;
                case ARG_HELP:
                        usage(stdout);
                        return 1;
                case ARG_VERSION:
                        printf("dsctl %s\n", DSAGENT_VERSION);
                        return 1;
                default:
                        return -EINVAL;
                }
        }

        if (optind >= argc) {
                fprintf(stderr, "dsctl: no command given; try 'dsctl --help'\n");
                return -EINVAL;
        }
        a->verb = argv[optind++];
        if (strcmp(a->verb, "ps") == 0) {
                if (optind != argc) {
                        fprintf(stderr, "dsctl: ps takes no arguments\n");
                        return -EINVAL;
                }
        } else if (strcmp(a->verb, "info") == 0) {
                if (optind + 1 != argc || parse_pid(argv[optind], &a->pid) < 0) {
                        fprintf(stderr, "dsctl: info takes one process id\n");
                        return -EINVAL;
                }
        } else if (strcmp(a->verb, "explain") == 0) {
                if (parse_explain_args(argc, argv, a) < 0)
                        return -EINVAL;
        } else if (strcmp(a->verb, "dump") == 0) {
                if (parse_dump_args(argc, argv, a) < 0)
                        return -EINVAL;
        } else if (strcmp(a->verb, "dumps") == 0) {
                if (optind != argc) {
                        fprintf(stderr, "dsctl: dumps takes no arguments\n");
                        return -EINVAL;
                }
        } else {
                fprintf(stderr, "dsctl: unknown command '%s'; try 'dsctl --help'\n", a->verb);
                return -EINVAL;
        }

        if (!a->socket_path)
                a->socket_path = getenv("DSAGENT_SOCKET");
        if (!a->socket_path || !*a->socket_path)
                a->socket_path = DSCTL_DEFAULT_SOCKET;
        return 0;
}

static int exit_code_of(uint32_t error) {
        switch (error) {
        case WIRE_ERROR_DENIED: return EXIT_DENIED;
        case WIRE_ERROR_NO_SUCH_PROCESS: return EXIT_NO_SUCH_PROCESS;
        case WIRE_ERROR_NOT_DOTNET: return EXIT_NOT_DOTNET;
        case WIRE_ERROR_RUNTIME_UNREACHABLE: return EXIT_RUNTIME_UNREACHABLE;
        case WIRE_ERROR_RUNTIME_FAILED: return EXIT_RUNTIME_FAILED;
        case WIRE_ERROR_SOCKET_UNTRUSTED: return EXIT_SOCKET_UNTRUSTED;
        case WIRE_ERROR_BUSY: return EXIT_AGENT_BUSY;
        case WIRE_ERROR_NO_SPACE: return EXIT_NO_SPACE;
        default: return EXIT_ERROR;
        }
}

static int report_error(const Args *a, const WireMessage *m) {
        _cleanup_free_ char *message = NULL, *escaped = NULL;
        uint32_t error = 0, hresult = 0;
        uint64_t request_id = 0;

        (void)wire_message_get_u32(m, WIRE_TAG_ERROR, &error);
        (void)wire_message_get_u32(m, WIRE_TAG_HRESULT, &hresult);
        (void)wire_message_get_u64(m, WIRE_TAG_REQUEST_ID, &request_id);
        (void)wire_message_get_string(m, WIRE_TAG_MESSAGE, &message);

        if (a->json) {
                output_json_error(stdout, error, wire_error_to_string(error), message, hresult, request_id);
        } else {
                escaped = message ? text_escape(message, strlen(message)) : NULL;
                fprintf(stderr, "dsctl: %s: %s%s%s (request %016llx)\n", a->verb, wire_error_to_string(error),
                        escaped ? ": " : "", escaped ? escaped : "", (unsigned long long)request_id);
        }
        return exit_code_of(error);
}

static int report_transport_error(const Args *a, int r, bool connecting) {
        if (connecting) {
                fprintf(stderr, "dsctl: cannot reach dsagent at %s: %s\n", a->socket_path, strerror(-r));
                return EXIT_AGENT_UNREACHABLE;
        }
        fprintf(stderr, "dsctl: %s: lost the agent's reply: %s\n", a->verb,
                r == -EBADMSG ? "malformed reply" : strerror(-r));
        return EXIT_ERROR;
}

/*
 * -o FILE: the agent handed over a read-only fd of the dump; FILE is created
 * here, by the caller, as the caller: root never writes where a client chose.
 */
static int save_dump(const Args *a, AgentClient *client) {
        _cleanup_close_ int in = TAKE_FD(client->received_fd), out = -EBADF;
        struct stat st;
        int r;

        if (in < 0) {
                fprintf(stderr, "dsctl: dump: the agent sent no copy: you may not read this dump\n");
                return EXIT_DENIED;
        }
        if (fstat(in, &st) < 0 || !S_ISREG(st.st_mode)) {
                fprintf(stderr, "dsctl: dump: the agent sent something other than a dump\n");
                return EXIT_ERROR;
        }
        out = open(a->output, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0) {
                fprintf(stderr, "dsctl: cannot create %s: %s%s\n", a->output, strerror(errno),
                        errno == EEXIST ? " (dsctl does not overwrite files)" : "");
                return EXIT_ERROR;
        }
        r = fd_copy_all(in, out, (uint64_t)st.st_size);
        if (r < 0) {
                (void)unlink(a->output);
                fprintf(stderr, "dsctl: cannot write %s: %s\n", a->output, strerror(-r));
                return EXIT_ERROR;
        }
        return EXIT_OK;
}

static int run(const Args *a) {
        _cleanup_(agent_client_freep) AgentClient *client = NULL;
        _cleanup_free_ WireWriter *w = NULL;
        Output out = { .json = a->json, .verb = a->verb, .stream = stdout };
        WireMessage m;
        int explain_status, r;

        r = agent_client_connect(a->socket_path, DSCTL_TIMEOUT_SEC, &client);
        if (r < 0)
                return report_transport_error(a, r, true);

        w = malloc(sizeof(*w));
        if (!w)
                return EXIT_ERROR;
        if (strcmp(a->verb, "ps") == 0)
                wire_writer_begin(w, WIRE_REQUEST_PS);
        else if (strcmp(a->verb, "info") == 0) {
                wire_writer_begin(w, WIRE_REQUEST_INFO);
                wire_writer_put_u32(w, WIRE_TAG_PID, (uint32_t)a->pid);
        } else if (strcmp(a->verb, "dump") == 0) {
                wire_writer_begin(w, WIRE_REQUEST_DUMP);
                if (a->unit)
                        wire_writer_put_string(w, WIRE_TAG_UNIT, a->unit);
                else
                        wire_writer_put_u32(w, WIRE_TAG_PID, (uint32_t)a->pid);
                wire_writer_put_string(w, WIRE_TAG_DUMP_TYPE, a->dump_type);
                if (a->output)
                        wire_writer_put_u32(w, WIRE_TAG_WANT_FD, 1);
        } else if (strcmp(a->verb, "dumps") == 0) {
                wire_writer_begin(w, WIRE_REQUEST_DUMPS);
        } else {
                wire_writer_begin(w, WIRE_REQUEST_EXPLAIN);
                wire_writer_put_u32(w, WIRE_TAG_PID, (uint32_t)a->pid);
                wire_writer_put_string(w, WIRE_TAG_COMMAND, a->command);
                wire_writer_put_string(w, WIRE_TAG_DUMP_TYPE, a->dump_type);
                wire_writer_put_string(w, WIRE_TAG_TRACE_PROFILE, a->trace_profile);
                if (a->have_duration)
                        wire_writer_put_u64(w, WIRE_TAG_DURATION, a->duration_sec);
        }
        /* an agent that refuses at once (busy) may hang up before the request is
         * written; its answer is still waiting to be read */
        r = agent_client_send(client, w);
        if (r < 0 && r != -EPIPE && r != -ECONNRESET)
                return report_transport_error(a, r, true);

        output_begin(&out);
        explain_status = EXIT_OK;
        for (;;) {
                r = agent_client_receive(client, &m);
                if (r < 0)
                        return report_transport_error(a, r, false);
                switch (m.type) {
                case WIRE_REPLY_PROCESS:
                        output_process(&out, &m);
                        break;
                case WIRE_REPLY_VERDICT:
                        explain_status = output_verdict(&out, &m) ? EXIT_OK : EXIT_DENIED;
                        break;
                case WIRE_REPLY_DUMP:
                        if (strcmp(a->verb, "dump") == 0 && a->output) {
                                r = save_dump(a, client);
                                if (r != EXIT_OK)
                                        return r;
                        }
                        output_dump(&out, &m, a->output);
                        break;
                case WIRE_REPLY_DONE:
                        output_end(&out);
                        return explain_status;
                case WIRE_REPLY_ERROR:
                        return report_error(a, &m);
                default:
                        return report_transport_error(a, -EBADMSG, false);
                }
        }
}

int main(int argc, char **argv) {
        Args a = {};
        int r;

        r = parse_args(argc, argv, &a);
        if (r != 0)
                return r > 0 ? EXIT_OK : EXIT_USAGE;
        return run(&a);
}

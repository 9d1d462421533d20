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
#include "duration.h"
#include "exit-status.h"
#include "io.h"
#include "output.h"
#include "session-client.h"
#include "session-config.h"
#include "text.h"
#include "wire.h"

#define DSCTL_DEFAULT_SOCKET "/run/dsagent.sock"
#define DSCTL_TIMEOUT_SEC 60

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
        /* trace and counters */
        const char *providers;
        uint32_t buffer_mb;
        uint32_t interval_sec;
        SessionOptions session;
        char *counter_providers; /* the names alone, for the agent */
} Args;

/* --duration: whole seconds, since the protocol carries seconds; says what it takes when refused. */
static int parse_duration_seconds(const char *arg, uint64_t *ret_sec) {
        uint64_t usec;

        if (duration_parse(arg, &usec) < 0 || usec == 0 || usec % USEC_PER_SEC != 0 ||
            usec / USEC_PER_SEC > UINT32_MAX) {
                fprintf(stderr, "dsctl: --duration takes whole seconds, like 30, 90s, 5m or 1h30m\n");
                return -EINVAL;
        }
        *ret_sec = usec / USEC_PER_SEC;
        return 0;
}

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
                "  dumps         list the dumps you can read\n"
                "  trace PID|UNIT [--profile NAME | --providers SPEC] [--duration S] [--buffer-mb N] [-o FILE]\n"
                "                record an EventPipe trace (cpu-sampling unless told) into FILE\n"
                "                [trace.nettrace]; SPEC is Provider[:Keywords[:Level[:Args]]],...\n"
                "  counters PID|UNIT [--counters LIST] [--interval S] [--duration S] [--format csv|json] [-o FILE]\n"
                "                show counters (System.Runtime unless told) every interval; LIST is\n"
                "                Provider[name,...],...\n"
                "  Ctrl-C ends a trace or counters session and keeps what it recorded.\n\n"
                "Options:\n"
                "  --socket PATH  the agent's socket [$DSAGENT_SOCKET, else " DSCTL_DEFAULT_SOCKET "]\n"
                "  --json         machine-readable output\n"
                "  --help         show this help\n"
                "  --version      show the version\n\n"
                "Exit status: 0 ok, 1 error, 2 usage, 3 agent not reachable, 4 permission denied,\n"
                "5 no such process, 6 not a .NET process, 7 runtime not answering, 8 runtime error,\n"
                "9 diagnostic socket failed verification, 10 agent busy, 11 no space for the dump,\n"
                "130 a second Ctrl-C left a session without waiting for its end.\n"
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
                        if (parse_duration_seconds(optarg, &a->duration_sec) < 0)
                                return -EINVAL;
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

static int parse_target(int argc, char **argv, Args *a) {
        if (optind >= argc) {
                fprintf(stderr, "dsctl: %s takes a process id or a unit, e.g. '%s 1234'\n", a->verb, a->verb);
                return -EINVAL;
        }
        if (parse_pid(argv[optind], &a->pid) < 0)
                a->unit = argv[optind];
        optind++;
        return 0;
}

static int check_trace_args(Args *a) {
        _cleanup_(eventpipe_config_done) EventPipeConfig config = EVENTPIPE_CONFIG_NULL;
        struct stat st;
        int r;

        if (a->trace_profile && a->providers) {
                fprintf(stderr, "dsctl: trace takes --profile or --providers, not both\n");
                return -EINVAL;
        }
        if (!a->trace_profile && !a->providers)
                a->trace_profile = "cpu-sampling";
        if (a->trace_profile && !eventpipe_profile_is_known(a->trace_profile)) {
                size_t n;
                const EventPipeProfile *profiles = eventpipe_profiles(&n);
                fprintf(stderr, "dsctl: unknown profile '%s'; the profiles are:\n", a->trace_profile);
                for (size_t i = 0; i < n; i++)
                        fprintf(stderr, "  %-28s %s\n", profiles[i].name, profiles[i].description);
                return -EINVAL;
        }
        if (a->providers) {
                r = eventpipe_providers_parse(a->providers, &config);
                if (r != 0) {
                        fprintf(stderr, "dsctl: bad --providers: %s\n",
                                r == EVENTPIPE_E_LIMIT ? "too long" : "expected Provider[:Keywords[:Level[:Args]]],... "
                                                                      "with hex keywords and a level 0-5 or its name");
                        return -EINVAL;
                }
        }
        if (!a->session.output)
                a->session.output = "trace.nettrace";
        if (lstat(a->session.output, &st) == 0) {
                fprintf(stderr, "dsctl: %s exists; dsctl does not overwrite files\n", a->session.output);
                return -EEXIST;
        }
        return 0;
}

static int filter_add(Args *a, const char *provider, size_t provider_len, const char *name, size_t name_len) {
        SessionOptions *o = &a->session;
        char **providers = realloc(o->counter_filter_providers, (o->n_counter_filters + 1) * sizeof(char *));
        char **names;

        if (!providers)
                return -ENOMEM;
        o->counter_filter_providers = providers;
        names = realloc(o->counter_names, (o->n_counter_filters + 1) * sizeof(char *));
        if (!names)
                return -ENOMEM;
        o->counter_names = names;
        providers[o->n_counter_filters] = strndup(provider, provider_len);
        names[o->n_counter_filters] = strndup(name, name_len);
        if (!providers[o->n_counter_filters] || !names[o->n_counter_filters]) {
                free(providers[o->n_counter_filters]);
                free(names[o->n_counter_filters]);
                return -ENOMEM;
        }
        o->n_counter_filters++;
        return 0;
}

/*
 * dotnet-counters' list: "System.Runtime[cpu-usage,working-set],MyMeter".
 * The agent gets the providers; the names in brackets filter here.
 */
static int counters_list_parse(const char *list, Args *a) {
        _cleanup_free_ char *names = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&names, &size);
        const char *p = list;

        if (!f)
                return -ENOMEM;
        while (*p) {
                size_t len = strcspn(p, ",[");
                const char *provider = p;

                if (len == 0)
                        break;
                fprintf(f, "%s%.*s", ftell(f) > 0 ? "," : "", (int)len, provider);
                p += len;
                if (*p == '[') {
                        for (p++; *p && *p != ']';) {
                                size_t n = strcspn(p, ",]");
                                if (n == 0 || filter_add(a, provider, len, p, n) < 0)
                                        break;
                                p += n;
                                if (*p == ',')
                                        p++;
                        }
                        if (*p != ']')
                                break;
                        p++;
                }
                if (*p == ',')
                        p++;
                else if (*p)
                        break;
        }
        if (fclose(f) != 0)
                return -ENOMEM;
        if (*p || size == 0)
                return -EINVAL;
        a->counter_providers = TAKE_PTR(names);
        return 0;
}

static int parse_session_args(int argc, char **argv, Args *a) {
        enum { ARG_PROFILE = 0x100, ARG_PROVIDERS, ARG_DURATION, ARG_BUFFER, ARG_COUNTERS, ARG_INTERVAL, ARG_FORMAT };
        static const struct option options[] = {
                { "profile", required_argument, NULL, ARG_PROFILE },
                { "providers", required_argument, NULL, ARG_PROVIDERS },
                { "duration", required_argument, NULL, ARG_DURATION },
                { "buffer-mb", required_argument, NULL, ARG_BUFFER },
                { "counters", required_argument, NULL, ARG_COUNTERS },
                { "interval", required_argument, NULL, ARG_INTERVAL },
                { "refresh-interval", required_argument, NULL, ARG_INTERVAL },
                { "format", required_argument, NULL, ARG_FORMAT },
                { "output", required_argument, NULL, 'o' },
                {},
        };
        bool trace = strcmp(a->verb, "trace") == 0;
        uint64_t v;
        int c;

        if (parse_target(argc, argv, a) < 0)
                return -EINVAL;
        a->session.kind = trace ? SESSION_OUTPUT_NETTRACE : SESSION_OUTPUT_CSV;
        while ((c = getopt_long(argc, argv, "o:", options, NULL)) >= 0) {
                bool for_trace = c == ARG_PROFILE || c == ARG_PROVIDERS || c == ARG_BUFFER;
                bool for_counters = c == ARG_COUNTERS || c == ARG_INTERVAL || c == ARG_FORMAT;

                if ((trace && for_counters) || (!trace && for_trace)) {
                        fprintf(stderr, "dsctl: %s takes no %s\n", a->verb, argv[optind - 1]);
                        return -EINVAL;
                }
                switch (c) {
                case ARG_PROFILE:
                        a->trace_profile = optarg;
                        break;
                case ARG_PROVIDERS:
                        a->providers = optarg;
                        break;
                case ARG_COUNTERS:
                        a->providers = optarg;
                        break;
                case ARG_DURATION:
                        if (parse_duration_seconds(optarg, &a->duration_sec) < 0)
                                return -EINVAL;
                        a->have_duration = true;
                        break;
                case ARG_BUFFER:
                case ARG_INTERVAL:
                        if (parse_u64(optarg, &v) < 0 || v == 0 || v > 3600) {
                                fprintf(stderr, "dsctl: %s takes a number from 1 to 3600\n", argv[optind - 1]);
                                return -EINVAL;
                        }
                        if (c == ARG_BUFFER)
                                a->buffer_mb = (uint32_t)v;
                        else
                                a->interval_sec = (uint32_t)v;
                        break;
                case ARG_FORMAT:
                        if (strcmp(optarg, "csv") != 0 && strcmp(optarg, "json") != 0) {
                                fprintf(stderr, "dsctl: --format is csv or json\n");
                                return -EINVAL;
                        }
                        a->session.kind = strcmp(optarg, "json") == 0 ? SESSION_OUTPUT_JSON : SESSION_OUTPUT_CSV;
                        break;
                case 'o':
                        a->session.output = optarg;
                        break;
                default:
                        return -EINVAL;
                }
        }
        if (optind != argc) {
                fprintf(stderr, "dsctl: unexpected argument '%s'\n", argv[optind]);
                return -EINVAL;
        }
        if (trace)
                return check_trace_args(a);
        if (counters_list_parse(a->providers ? a->providers : "System.Runtime", a) < 0) {
                fprintf(stderr, "dsctl: bad --counters: expected Provider[name,...],... (e.g. System.Runtime[cpu-usage])\n");
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
        } else if (strcmp(a->verb, "trace") == 0 || strcmp(a->verb, "counters") == 0) {
                if (parse_session_args(argc, argv, a) < 0)
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
        case WIRE_ERROR_UNSAFE_FS: return EXIT_UNSAFE_FS;
        case WIRE_ERROR_NO_STAGING: return EXIT_NO_STAGING;
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

static int report_session_error(const WireMessage *m, void *userdata) {
        return report_error(userdata, m);
}

static void put_session_request(WireWriter *w, const Args *a) {
        bool trace = strcmp(a->verb, "trace") == 0;

        wire_writer_begin(w, trace ? WIRE_REQUEST_TRACE : WIRE_REQUEST_COUNTERS);
        if (a->unit)
                wire_writer_put_string(w, WIRE_TAG_UNIT, a->unit);
        else
                wire_writer_put_u32(w, WIRE_TAG_PID, (uint32_t)a->pid);
        if (trace) {
                wire_writer_put_string(w, WIRE_TAG_TRACE_PROFILE, a->providers ? NULL : a->trace_profile);
                wire_writer_put_string(w, WIRE_TAG_PROVIDERS, a->providers);
                if (a->buffer_mb)
                        wire_writer_put_u32(w, WIRE_TAG_BUFFER_MB, a->buffer_mb);
        } else {
                wire_writer_put_string(w, WIRE_TAG_PROVIDERS, a->counter_providers);
                if (a->interval_sec)
                        wire_writer_put_u32(w, WIRE_TAG_INTERVAL, a->interval_sec);
        }
        if (a->have_duration)
                wire_writer_put_u64(w, WIRE_TAG_DURATION, a->duration_sec);
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
        } else if (strcmp(a->verb, "trace") == 0 || strcmp(a->verb, "counters") == 0) {
                put_session_request(w, a);
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
        if (strcmp(a->verb, "trace") == 0 || strcmp(a->verb, "counters") == 0)
                return session_client_run(client, &a->session, report_session_error, (void *)a);

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

static void args_done(Args *a) {
        for (size_t i = 0; i < a->session.n_counter_filters; i++) {
                free(a->session.counter_filter_providers[i]);
                free(a->session.counter_names[i]);
        }
        free(a->session.counter_filter_providers);
        free(a->session.counter_names);
        free(a->counter_providers);
}

int main(int argc, char **argv) {
        _cleanup_(args_done) Args a = {};
        int r;

        r = parse_args(argc, argv, &a);
        if (r != 0)
                return r > 0 ? EXIT_OK : EXIT_USAGE;
        return run(&a);
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dsagent: the privileged broker between diagnostic clients and .NET runtimes */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "agent/broker.h"
#include "agent/decide/policy-load.h"
#include "agent/egress/egress-check.h"
#include "agent/egress/egress-client.h"
#include "agent/egress/egress-upload.h"
#include "agent/ports/ports.h"
#include "agent/workers/sandbox.h"
#include "common/cleanup.h"
#include "common/duration.h"
#include "common/text.h"

#define DSAGENT_LISTEN_BACKLOG 128

typedef struct Options {
        const char *listen_path;
        mode_t listen_mode;     /* of the socket --listen makes: 0660 unless --listen-mode */
        gid_t listen_gid;       /* its group: (gid_t) -1 keeps root's, unless --listen-group */
        BrokerConfig broker;
        bool check_policy;
        bool check_egress;      /* --egress: --check-policy also asks each [egress.NAME] store */
} Options;

static void usage(FILE *out) {
        fprintf(out,
                "Usage: dsagent [OPTIONS]\n"
                "       dsagent --check-policy [--egress] [FILE]\n"
                "Broker .NET diagnostics for unprivileged users under policy.\n\n"
                "  --listen PATH        listen on PATH instead of a socket passed by systemd\n"
                "  --listen-mode MODE   that socket's mode, of 0666 at most [0660: root and\n"
                "                       the --listen-group only; 0666 lets every user connect]\n"
                "  --listen-group GROUP its group (a name or a number), whose members may\n"
                "                       connect under the default mode [root]\n"
                "  --policy FILE        the policy file, with FILE's policy.d/*.toml\n"
                "                       [" POLICY_DEFAULT_PATH "]\n"
                "  --check-policy [FILE]\n"
                "                       check the policy and exit: 0 valid, 1 not\n"
                "  --egress             with --check-policy: also have each [egress.NAME] store\n"
                "                       asked with its keys (a signed HEAD of the bucket); 1 when\n"
                "                       one is refused or unreachable\n"
                "  --audit WHERE        auto (journal, else stderr), journal, stderr or json [auto]\n"
                "  --idle-exit SECONDS  exit after SECONDS without clients (a socket-activated\n"
                "                       agent starts again with the next one); 0 never [0]\n"
                "  --runtime-timeout SECONDS\n"
                "                       how long a runtime may take to answer [10]\n"
                "  --dump-timeout SECONDS\n"
                "                       how long a runtime may take to write a dump [300]\n"
                "  --dump-start-timeout SECONDS\n"
                "                       how long it may take to write the dump's first byte [30]\n"
                "  --dump-stall-timeout SECONDS\n"
                "                       after it, how long it may write no byte; also the stretch\n"
                "                       --dump-min-rate is measured over [30]\n"
                "  --dump-min-rate BYTES\n"
                "                       the fewest bytes a second it must write, on average over\n"
                "                       each such stretch; 0: no minimum [1048576]\n"
                "  --runtime-dir PATH   where the agent keeps notes of work in progress [/run/dsagent]\n"
                "  --help               show this help\n"
                "  --version            show the version\n");
}

/* An octal mode for the socket: read and write bits only (connecting needs w; x and the rest mean nothing). */
static int parse_socket_mode(const char *s, mode_t *ret) {
        char *end;
        unsigned long v;

        errno = 0;
        v = strtoul(s, &end, 8);
        if (errno != 0 || end == s || *end != '\0' || (v & ~0666UL) != 0)
                return -EINVAL;
        *ret = (mode_t)v;
        return 0;
}

/* A group by name, else by number. Here, before the sandbox: NSS may be asked once, at start. */
static int parse_group(const char *s, gid_t *ret) {
        struct group *gr = getgrnam(s);
        uint64_t v;

        if (gr) {
                *ret = gr->gr_gid;
                return 0;
        }
        if (parse_u64(s, &v) < 0 || v >= (gid_t)-1)
                return -EINVAL;
        *ret = (gid_t)v;
        return 0;
}

/* Return: 0 to run, 1 to exit successfully (help, version), -EINVAL for usage errors. */
static int parse_argv(int argc, char **argv, Options *o) {
        enum { ARG_LISTEN = 0x100, ARG_LISTEN_MODE, ARG_LISTEN_GROUP, ARG_POLICY, ARG_CHECK_POLICY, ARG_AUDIT, ARG_IDLE_EXIT, ARG_RUNTIME_TIMEOUT,
               ARG_DUMP_TIMEOUT, ARG_DUMP_START_TIMEOUT, ARG_DUMP_STALL_TIMEOUT, ARG_DUMP_MIN_RATE, ARG_RUNTIME_DIR, ARG_HELP, ARG_VERSION, ARG_EGRESS };
        static const struct option options[] = {
                { "listen", required_argument, NULL, ARG_LISTEN },
                { "listen-mode", required_argument, NULL, ARG_LISTEN_MODE },
                { "listen-group", required_argument, NULL, ARG_LISTEN_GROUP },
                { "policy", required_argument, NULL, ARG_POLICY },
                { "check-policy", no_argument, NULL, ARG_CHECK_POLICY },
                { "audit", required_argument, NULL, ARG_AUDIT },
                { "idle-exit", required_argument, NULL, ARG_IDLE_EXIT },
                { "runtime-timeout", required_argument, NULL, ARG_RUNTIME_TIMEOUT },
                { "dump-timeout", required_argument, NULL, ARG_DUMP_TIMEOUT },
                { "dump-start-timeout", required_argument, NULL, ARG_DUMP_START_TIMEOUT },
                { "dump-stall-timeout", required_argument, NULL, ARG_DUMP_STALL_TIMEOUT },
                { "dump-min-rate", required_argument, NULL, ARG_DUMP_MIN_RATE },
                { "runtime-dir", required_argument, NULL, ARG_RUNTIME_DIR },
                { "help", no_argument, NULL, ARG_HELP },
                { "version", no_argument, NULL, ARG_VERSION },
                { "egress", no_argument, NULL, ARG_EGRESS },
                {},
        };
        int c;

        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0) {
                switch (c) {
                case ARG_LISTEN:
                        o->listen_path = optarg;
                        break;
                case ARG_LISTEN_MODE:
                        if (parse_socket_mode(optarg, &o->listen_mode) < 0) {
                                fprintf(stderr, "dsagent: --listen-mode takes an octal mode within 0666, e.g. 0660\n");
                                return -EINVAL;
                        }
                        break;
                case ARG_LISTEN_GROUP:
                        if (parse_group(optarg, &o->listen_gid) < 0) {
                                fprintf(stderr, "dsagent: --listen-group: no group '%s'\n", optarg);
                                return -EINVAL;
                        }
                        break;
                case ARG_POLICY:
                        o->broker.policy_path = optarg;
                        o->broker.policy_must_exist = true;
                        break;
                case ARG_CHECK_POLICY:
                        o->check_policy = true;
                        break;
                case ARG_EGRESS:
                        o->check_egress = true;
                        break;
                case ARG_AUDIT:
                        if (audit_sink_from_string(optarg, &o->broker.audit_sink) < 0) {
                                fprintf(stderr, "dsagent: --audit takes auto, journal, stderr or json\n");
                                return -EINVAL;
                        }
                        break;
                case ARG_IDLE_EXIT:
                        if (duration_parse(optarg, &o->broker.idle_exit_usec) < 0) {
                                fprintf(stderr, "dsagent: --idle-exit takes a number of seconds\n");
                                return -EINVAL;
                        }
                        break;
                case ARG_RUNTIME_TIMEOUT:
                        if (duration_parse(optarg, &o->broker.runtime_timeout_usec) < 0 ||
                            o->broker.runtime_timeout_usec == 0) {
                                fprintf(stderr, "dsagent: --runtime-timeout takes a positive number of seconds\n");
                                return -EINVAL;
                        }
                        break;
                case ARG_DUMP_TIMEOUT:
                        if (duration_parse(optarg, &o->broker.dump_timeout_usec) < 0 ||
                            o->broker.dump_timeout_usec == 0) {
                                fprintf(stderr, "dsagent: --dump-timeout takes a positive number of seconds\n");
                                return -EINVAL;
                        }
                        break;
                case ARG_DUMP_START_TIMEOUT:
                        if (duration_parse(optarg, &o->broker.dump_start_timeout_usec) < 0 ||
                            o->broker.dump_start_timeout_usec == 0) {
                                fprintf(stderr, "dsagent: --dump-start-timeout takes a positive number of seconds\n");
                                return -EINVAL;
                        }
                        break;
                case ARG_DUMP_STALL_TIMEOUT:
                        if (duration_parse(optarg, &o->broker.dump_stall_timeout_usec) < 0 ||
                            o->broker.dump_stall_timeout_usec == 0) {
                                fprintf(stderr, "dsagent: --dump-stall-timeout takes a positive number of seconds\n");
                                return -EINVAL;
                        }
                        break;
                case ARG_DUMP_MIN_RATE:
                        if (parse_u64(optarg, &o->broker.dump_min_rate) < 0) {
                                fprintf(stderr, "dsagent: --dump-min-rate takes a number of bytes a second\n");
                                return -EINVAL;
                        }
                        break;
                case ARG_RUNTIME_DIR:
                        if (optarg[0] != '/') {
                                fprintf(stderr, "dsagent: --runtime-dir takes an absolute path\n");
                                return -EINVAL;
                        }
                        o->broker.runtime_dir = optarg;
                        break;
                case ARG_HELP:
                        usage(stdout);
                        return 1;
                case ARG_VERSION:
                        printf("dsagent %s\n", DSAGENT_VERSION);
                        return 1;
                default:
                        usage(stderr);
                        return -EINVAL;
                }
        }
        if (o->check_egress && !o->check_policy) {
                fprintf(stderr, "dsagent: --egress goes with --check-policy\n");
                return -EINVAL;
        }
        /* like visudo -c: the file to check may follow */
        if (o->check_policy && optind + 1 == argc) {
                o->broker.policy_path = argv[optind++];
                o->broker.policy_must_exist = true;
        }
        if (optind < argc) {
                fprintf(stderr, "dsagent: unexpected argument '%s'\n", argv[optind]);
                return -EINVAL;
        }
        return 0;
}

/*
 * Without systemd (development, tests, a container). @mode and @gid make the
 * socket a gate of its own before the policy, as the socket unit's
 * SocketMode= and SocketGroup= do: by default (0660, root's group unless
 * --listen-group) only root and that group reach the agent's parser at all.
 * The socket is bound under a temporary name, given its mode and group, and
 * renamed into place once it listens, so no client ever finds it refusing
 * connections or open wider than asked. A stale socket is replaced, anything
 * else at the path is not.
 */
static int listen_on_path(const char *path, mode_t mode, gid_t gid, int *ret_fd) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        mode_t old_umask;
        int r;

        if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode))
                return -EEXIST;
        r = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s.%d.tmp", path, (int)getpid());
        if (r < 0 || (size_t)r >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        (void)unlink(sa.sun_path);

        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        old_umask = umask(0777 & ~mode);
        r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
        umask(old_umask);
        if (r < 0)
                return -errno;
        /* root's group unless told otherwise, also in a set-group-id directory (the DaemonSet's), whose
         * group the socket would take from it */
        if (lchown(sa.sun_path, (uid_t)-1, gid != (gid_t)-1 ? gid : getegid()) < 0 ||
            listen(fd, DSAGENT_LISTEN_BACKLOG) < 0 || rename(sa.sun_path, path) < 0) {
                r = -errno;
                (void)unlink(sa.sun_path);
                return r;
        }

        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* The sockets systemd passes for [[port]]s carry this name (FileDescriptorName= of dsagent-ports.socket). */
#define PORT_FD_NAME "port"
#define PORT_FDS_MAX 16

typedef struct SystemdFds {
        int listen_fd;
        int port_fds[PORT_FDS_MAX];
        size_t n_port_fds;
} SystemdFds;

/*
 * One socket for clients, and any number named PORT_FD_NAME for runtimes that
 * connect in (ports.h); anything else is closed, not leaked.
 */
static int fds_from_systemd(SystemdFds *ret) {
        char **names = NULL;
        SystemdFds fds = { .listen_fd = -EBADF };
        int n;

        n = sd_listen_fds_with_names(true, &names);
        if (n < 0)
                return n;
        if (n == 0)
                return -ENOENT;
        for (int i = 0; i < n; i++) {
                int fd = SD_LISTEN_FDS_START + i;
                bool port = names && names[i] && strcmp(names[i], PORT_FD_NAME) == 0;

                if (names)
                        free(names[i]);

                if (sd_is_socket(fd, AF_UNIX, SOCK_STREAM, 1) <= 0 || (!port && fds.listen_fd >= 0) ||
                    (port && fds.n_port_fds == PORT_FDS_MAX))
                        safe_close(fd);
                else if (port)
                        fds.port_fds[fds.n_port_fds++] = fd;
                else
                        fds.listen_fd = fd;
        }
        free(names);
        if (fds.listen_fd < 0) {
                for (size_t i = 0; i < fds.n_port_fds; i++)
                        safe_close(fds.port_fds[i]);
                return -EBADF;
        }
        /* systemd passes the listener blocking unless told otherwise; one accept
         * too many would then stall the whole loop */
        if (fcntl(fds.listen_fd, F_SETFL, fcntl(fds.listen_fd, F_GETFL) | O_NONBLOCK) < 0) {
                int r = -errno;

                safe_close(fds.listen_fd);
                for (size_t i = 0; i < fds.n_port_fds; i++)
                        safe_close(fds.port_fds[i]);
                return r;
        }
        *ret = fds;
        return 0;
}

/* How long one store may take to answer a check: curl's connect timeout (10 s) and its low-speed cut (30 s) of
 * the one try bound it well below this; past it the egress process is taken for stuck. */
#define EGRESS_CHECK_TIMEOUT_USEC (90 * 1000000ULL)

/*
 * --check-policy --egress: the egress process asks each store with its keys, which it alone reads; what is
 * printed is the store's answer, never a key. Return: 0 when every store is reachable, else 1.
 */
static int check_egress(const char *policy_path, const Policy *p) {
        const char *helper = egress_helper_path();
        _cleanup_close_ int fd = -EBADF;
        int result = EXIT_SUCCESS, r;
        pid_t pid;
        uid_t uid;
        gid_t gid;

        if (p->n_egress == 0) {
                printf("%s: no [egress.NAME] store to check\n", policy_path);
                return EXIT_SUCCESS;
        }
        r = egress_user_lookup(&uid, &gid);
        if (r < 0) {
                fprintf(stderr, "dsagent: the egress process's user %s %s: it never runs as root (create it: "
                                "systemd-sysusers, units/dsagent.sysusers)\n", egress_user_name(),
                        r == -ENOENT ? "does not exist" : r == -EPERM ? "has root's uid or gid" : strerror(-r));
                return EXIT_FAILURE;
        }
        r = egress_process_spawn(helper, uid, gid, &pid, &fd);
        if (r < 0) {
                fprintf(stderr, "dsagent: cannot start the egress process %s: %s\n", helper, strerror(-r));
                return EXIT_FAILURE;
        }
        for (size_t i = 0; i < p->n_egress; i++) {
                const PolicyEgress *e = &p->egress[i];
                char said[128];
                EgressReply a;

                r = egress_check_target(fd, e, getenv("CREDENTIALS_DIRECTORY"), EGRESS_CHECK_TIMEOUT_USEC, &a);
                if (r < 0) {
                        fprintf(stderr, "%s: [egress.%s] not checked: the egress process %s: %s\n", policy_path,
                                e->name, helper, strerror(-r));
                        result = EXIT_FAILURE;
                        break;
                }
                if (a.result == 0) {
                        printf("%s: [egress.%s] reachable: bucket %s at %s took the keys\n", policy_path, e->name,
                               e->bucket, e->endpoint);
                        continue;
                }
                result = EXIT_FAILURE;
                fprintf(stderr, "%s: [egress.%s] %s: bucket %s at %s", policy_path, e->name,
                        egress_result_to_string(a.result), e->bucket, e->endpoint);
                if (a.http_status)
                        fprintf(stderr, ": HTTP %d", a.http_status);
                if (a.s3_code[0])
                        fprintf(stderr, " %s", a.s3_code);
                /* the store's own words when they say more than its status and code (curl's, for one) */
                snprintf(said, sizeof(said), "HTTP %d%s%s", a.http_status, a.s3_code[0] ? " " : "", a.s3_code);
                if (a.message[0] && strcmp(a.message, said) != 0)
                        fprintf(stderr, ": %s", a.message);
                fputc('\n', stderr);
        }
        /* its end closed, the egress process exits; it is reaped so that no zombie outlives the check */
        fd = safe_close(fd);
        (void)waitpid(pid, NULL, 0);
        return result;
}

/* Return: 0 valid, 1 not: every problem of every file goes to stderr as file:line:column. */
static int check_policy(const Options *o) {
        _cleanup_(policy_diagnostics_done) PolicyDiagnostics d = {};
        Policy *p = NULL;
        int r;

        r = policy_load(o->broker.policy_path, o->broker.policy_must_exist, &p, &d);
        for (size_t i = 0; i < d.n; i++)
                fprintf(stderr, "%s\n", d.messages[i]);
        if (r < 0 && r != -ENOMEM) {
                fprintf(stderr, "dsagent: cannot check %s: %s\n", o->broker.policy_path, strerror(-r));
                return EXIT_FAILURE;
        }
        if (r != 0) {
                fprintf(stderr, "%s: %zu error%s\n", o->broker.policy_path, d.n, d.n == 1 ? "" : "s");
                return EXIT_FAILURE;
        }
        if (p->n_files == 0)
                printf("%s: no such file; the built-in policy applies (root, and each process's own user)\n",
                       o->broker.policy_path);
        else
                printf("%s: OK, %zu rule%s in %zu file%s\n", o->broker.policy_path, p->n_rules,
                       p->n_rules == 1 ? "" : "s", p->n_files, p->n_files == 1 ? "" : "s");
        /* checked like the rest, but only partly acted on: say so rather than let them seem in force */
        if (p->n_collect > 0)
                printf("%s: %zu [[collect]] table%s checked; then.dump, then.stacks, then.trace_profile, "
                       "then.counters, then.gcdump and then.exceptions take their artifacts (docs/collect.md)\n",
                       o->broker.policy_path, p->n_collect, p->n_collect == 1 ? "" : "s");
        /* the keys' file is looked at, never read: what is printed is where it is, never what it holds */
        if (p->n_egress > 0)
                printf("%s: %zu [egress.NAME] target%s checked, credentials root's alone (not read); the rules' "
                       "and tables' artifacts go there from the egress process (docs/egress-plan.md)\n",
                       o->broker.policy_path, p->n_egress, p->n_egress == 1 ? "" : "s");
        r = o->check_egress ? check_egress(o->broker.policy_path, p) : EXIT_SUCCESS;
        policy_unref(p);
        return r;
}

/* READY=1, and a status that `systemctl status dsagent` shows: a broken policy is said there too. */
static void notify_ready(const Broker *broker) {
        (void)sd_notify(false, broker->policy_problem
                                       ? "READY=1\nSTATUS=The policy is broken: serving root only; see journalctl -u dsagent"
                                       : "READY=1\nSTATUS=Serving diagnostic requests");
}

static int on_reload_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Broker *broker = userdata;
        uint64_t now = 0;
        char msg[64];

        (void)sd_event_now(sd_event_source_get_event(s), CLOCK_MONOTONIC, &now);
        snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu", (unsigned long long)now);
        (void)sd_notify(false, msg);
        /* a refused policy is in the audit trail; the agent goes on with the one it had, or stays broken */
        (void)broker_load_policy(broker);
        notify_ready(broker);
        return 0;
}

static int on_exit_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        (void)sd_notify(false, "STOPPING=1");
        return sd_event_exit(sd_event_source_get_event(s), 0);
}

#if DSAGENT_TEST_HOOKS
/*
 * Test builds only: make the system call DSAGENT_TEST_FORBIDDEN_SYSCALL names,
 * from inside the sandbox, to show that it kills the agent. Surviving it is
 * reported and is a failure of the sandbox.
 */
static void test_hook_forbidden_syscall(void) {
        const char *name = getenv("DSAGENT_TEST_FORBIDDEN_SYSCALL");

        if (!name)
                return;
        if (strcmp(name, "ptrace") == 0)
                (void)syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, 0, 0);
        else if (strcmp(name, "execve") == 0)
                (void)execl("/bin/true", "true", (char *)NULL);
        else if (strcmp(name, "inet-socket") == 0)
                (void)socket(AF_INET, SOCK_STREAM, 0);
        else if (strcmp(name, "x32") == 0)
                (void)syscall(0x40000000 | SYS_getpid);
        else if (strcmp(name, "process_vm_readv") == 0)
                (void)syscall(SYS_process_vm_readv, 1, NULL, 0, NULL, 0, 0);
        fprintf(stderr, "dsagent: survived the forbidden system call %s\n", name);
        exit(99);
}
#endif

static int run(const Options *o, SystemdFds *fds) {
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        Broker *broker = NULL;
        int r;

        r = sd_event_new(&event);
        if (r >= 0)
                r = sd_event_add_signal(event, NULL, SIGTERM, on_exit_signal, NULL);
        if (r >= 0)
                r = sd_event_add_signal(event, NULL, SIGINT, on_exit_signal, NULL);
        if (r < 0) {
                safe_close(fds->listen_fd);
                return r;
        }
        /* before the first record (the policy's): no record ever waits for the output's reader */
        r = audit_sink_open(event, o->broker.audit_sink);
        if (r < 0) {
                fprintf(stderr, "dsagent: cannot open the audit output without blocking: %s\n", strerror(-r));
                safe_close(fds->listen_fd);
                return r;
        }

        r = broker_new(event, fds->listen_fd, &o->broker, &broker);
        if (r < 0)
                return r;
        for (size_t i = 0; i < fds->n_port_fds; i++) {
                r = ports_adopt_fd(broker->ports, fds->port_fds[i]);
                if (r < 0)
                        fprintf(stderr, "dsagent: a port socket from systemd is not usable: %s\n", strerror(-r));
        }
        /* A policy that does not load leaves the agent broken, not stopped: it listens, serves root, and
         * answers everyone else why not. Exiting would have systemd start it again for every client
         * until the start limit fails the socket, and /run/dsagent.sock would be gone for everyone. */
        r = broker_load_policy(broker);
        if (r < 0) {
                broker_free(broker);
                return r;
        }
        r = sd_event_add_signal(event, NULL, SIGHUP, on_reload_signal, broker);
        if (r < 0) {
                broker_free(broker);
                return r;
        }

        /* The egress process, before the sandbox (which would not let the agent exec it), and only for a policy
         * that has a store: a host without egress runs no network code at all. A reload that adds the first
         * store finds none running, and its uploads fail, recorded, until the agent is restarted. */
        if (broker->policy->n_egress > 0) {
                uid_t uid;
                gid_t gid;

                /* never as root: without its own user, no egress process, and every upload fails, recorded */
                r = egress_user_lookup(&uid, &gid);
                if (r < 0) {
                        fprintf(stderr, "dsagent: the egress process's user %s %s; no egress process runs and every "
                                        "upload fails, recorded (create it: systemd-sysusers, units/dsagent.sysusers)\n",
                                egress_user_name(),
                                r == -ENOENT ? "does not exist" : r == -EPERM ? "has root's uid or gid" : strerror(-r));
                        if (asprintf(&broker->egress_missing, "the egress process's user %s %s: it never runs as root",
                                     egress_user_name(), r == -ENOENT ? "does not exist" : "is not usable") < 0)
                                broker->egress_missing = NULL;
                } else {
                        r = egress_client_start(event, egress_helper_path(), uid, gid, &broker->egress);
                        if (r < 0)
                                fprintf(stderr, "dsagent: cannot start the egress process %s: %s; uploads will fail, "
                                                "recorded\n", egress_helper_path(), strerror(-r));
                }
        }

        /* the last step of start-up, before the first untrusted byte is read */
        r = sandbox_enter(SANDBOX_AGENT);
        if (r < 0) {
                fprintf(stderr, "dsagent: cannot enter the sandbox, not serving: %s\n", strerror(-r));
                broker_free(broker);
                return r;
        }
#if DSAGENT_TEST_HOOKS
        test_hook_forbidden_syscall();
#endif
        r = broker_start_workers(broker);
        if (r < 0) {
                fprintf(stderr, "dsagent: cannot start its worker processes: %s\n", strerror(-r));
                broker_free(broker);
                return r;
        }
        /* uploads an agent before this one left unfinished */
        egress_upload_watch(broker);
        egress_resubmit_pending(broker);

        notify_ready(broker);
        r = sd_event_loop(event);
        (void)sd_notify(false, "STOPPING=1");
        broker_free(broker);
        audit_sink_close();
        return r;
}

/*
 * Under AddressSanitizer (the sanitizer build of the tests), an allocation the process's limits refuse
 * returns NULL, as glibc's malloc does, instead of aborting: a worker bounds its own memory for a heap
 * dump (jobs.c) and reports a heap past the bound. Only a sanitizer's runtime calls it; ASAN_OPTIONS
 * still decides over it.
 */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
        return "allocator_may_return_null=1";
}

/* Free memory at the heap's top the agent keeps rather than returns (mallopt(M_TRIM_THRESHOLD)) */
#define AGENT_HEAP_KEEP (1 << 20)

int main(int argc, char **argv) {
        Options o = { .broker = BROKER_CONFIG_DEFAULT, .listen_mode = 0660, .listen_gid = (gid_t)-1 };
        SystemdFds fds = { .listen_fd = -EBADF };
        sigset_t mask;
        int r;

        /* before anything else: a reload or stop request that arrives while
         * starting must wait for the loop, not kill the agent half-way */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return EXIT_FAILURE;

        o.broker.policy_path = POLICY_DEFAULT_PATH;
        r = parse_argv(argc, argv, &o);
        if (r != 0)
                return r > 0 ? EXIT_SUCCESS : 2;
        if (o.check_policy)
                return check_policy(&o);
        if (audit_sink_check(o.broker.audit_sink) < 0) {
                fprintf(stderr, "dsagent: --audit journal, but journald is not running: not serving requests "
                                "nobody would record\n");
                return EXIT_FAILURE;
        }
        /* a client or journald going away must cost a write, never the agent */
        signal(SIGPIPE, SIG_IGN);
        /* each request's messages (a worker's reply is up to 64 KiB) grow the heap's top and free it
         * again: without this, glibc gives it back with brk() and takes it anew, three system calls a
         * request. What stays is bounded by the threshold. */
        (void)mallopt(M_TRIM_THRESHOLD, AGENT_HEAP_KEEP);

        if (o.listen_path) {
                r = listen_on_path(o.listen_path, o.listen_mode, o.listen_gid, &fds.listen_fd);
                if (r < 0) {
                        /* without CAP_CHOWN (a container) the group can only come from the directory */
                        fprintf(stderr, "dsagent: cannot listen on %s: %s%s\n", o.listen_path, strerror(-r),
                                r == -EPERM && o.listen_gid != (gid_t)-1
                                        ? " (giving it the --listen-group needs CAP_CHOWN, or a directory of "
                                          "that group with the set-group-id bit)"
                                        : "");
                        return EXIT_FAILURE;
                }
        } else {
                r = fds_from_systemd(&fds);
                if (r < 0) {
                        fprintf(stderr, "dsagent: %s\n",
                                r == -ENOENT ? "no socket from systemd; use --listen PATH"
                                             : "systemd must pass one AF_UNIX stream socket for clients");
                        return EXIT_FAILURE;
                }
        }

        r = run(&o, &fds);
        if (r < 0) {
                fprintf(stderr, "dsagent: %s\n", strerror(-r));
                return EXIT_FAILURE;
        }
        return EXIT_SUCCESS;
}

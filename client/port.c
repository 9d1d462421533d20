/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * dsctl port (port.h): the caller's socket for stock .NET tools, each connection one IPC request
 * carried to the agent.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/agent-client.h"
#include "common/cleanup.h"
#include "client/client-test-hooks.h"
#include "common/dotnet-ipc.h"
#include "client/exec-args.h"
#include "client/exit-status.h"
#include "common/io.h"
#include "common/ipc-request.h"
#include "client/out-file.h"
#include "client/port.h"
#include "common/text.h"
#include "common/unaligned.h"
#include "common/wire.h"

/* How long a tool has to send its request, and to take each write of the answer. */
#define PORT_TOOL_TIMEOUT_SEC 30
/* Connecting to the agent, and its first frame (which then says how long the rest may take). */
#define PORT_AGENT_TIMEOUT_SEC 60
#define PORT_SESSIONS_MAX 64
/* Connections served at once; more wait in the listen backlog. The agent admits 32 per uid anyway. */
#define PORT_ACTIVE_MAX 64
#define PORT_SPLICE_MAX (1 << 20)

/* A trace session a tool started through this port: StopTracing names it by id. */
typedef struct PortSession {
        uint64_t id;  /* what the tool was told (the agent's id, never the runtime's) */
        int agent_fd; /* the session's connection to the agent: shutting it down stops it */
} PortSession;

typedef struct Port {
        PortOptions options_copy; /* its strings are argv's and the environment's: they live as long */
        const PortOptions *options;
        pthread_mutex_t lock;
        PortSession sessions[PORT_SESSIONS_MAX];
        size_t n_sessions;
        unsigned active;     /* connections being served */
        bool once_done;      /* with once: a session or dump has ended */
        int wake_fd;         /* written when a connection ends, so that the accept loop looks again */
} Port;

/* One tool connection, served in a thread of its own: it may wait on the agent and the tool for long. */
typedef struct ToolConnection {
        Port *port;
        int fd;
        uint8_t message[DOTNET_IPC_MESSAGE_MAX];
        size_t message_size;
        IpcRequest ipc;      /* what dsctl itself reads of the request: its kind, a dump's path */
        bool decoded;
} ToolConnection;

/* One line on standard error. Escaped whole: it holds what a runtime or a tool said. */
__attribute__((format(printf, 2, 3)))
static void note(const Port *p, const char *fmt, ...) {
        _cleanup_free_ char *line = NULL, *escaped = NULL;
        va_list ap;
        int n;

        if (p->options->quiet)
                return;
        va_start(ap, fmt);
        n = vasprintf(&line, fmt, ap);
        va_end(ap);
        if (n < 0)
                return;
        escaped = text_escape(line, (size_t)n);
        fprintf(stderr, "dsctl: port: %s\n", escaped ? escaped : "(out of memory)");
}

static const char *command_name(const ToolConnection *t) {
        const DotnetIpcCommandInfo *info;

        if (t->message_size < DOTNET_IPC_HEADER_SIZE)
                return "a short message";
        info = dotnet_ipc_command_lookup(t->message[16], t->message[17]);
        return info ? info->name : "an unknown command";
}

/* ---- answers in the runtime's encoding ---- */

static void answer_error(ToolConnection *t, uint32_t hresult, const char *message) {
        _cleanup_free_ char *text = NULL;
        uint8_t buf[DOTNET_IPC_MESSAGE_MAX];
        size_t size;

        /* Only GenerateCoreDump3's clients read a message after the HRESULT, and the .NET
         * client then shows the message alone: it carries the HRESULT too. */
        if (message && t->decoded && t->ipc.command == DOTNET_IPC_GENERATE_CORE_DUMP3 &&
            asprintf(&text, "%s (HRESULT: 0x%08X)", message, hresult) < 0)
                text = NULL;
        if (ipc_request_reply_error_encode(hresult, text, buf, sizeof(buf), &size) == 0)
                (void)fd_write_all(t->fd, buf, size);
}

static void answer_ok(ToolConnection *t, const uint8_t *payload, size_t payload_size) {
        uint8_t buf[DOTNET_IPC_HEADER_SIZE + 8];
        size_t size;

        if (ipc_request_reply_ok_encode(payload, payload_size, buf, sizeof(buf), &size) == 0)
                (void)fd_write_all(t->fd, buf, size);
}

static void answer_ok_hresult(ToolConnection *t) {
        uint8_t zero[4] = {};
        answer_ok(t, zero, sizeof(zero));
}

/* The HRESULT the tool is answered with for the agent's ERROR frame. */
static uint32_t hresult_of_error(const WireMessage *m) {
        uint32_t error = 0, hresult = 0;

        if (wire_message_get_u32(m, WIRE_TAG_HRESULT, &hresult) == 0 && hresult != 0)
                return hresult;
        (void)wire_message_get_u32(m, WIRE_TAG_ERROR, &error);
        switch (error) {
        case WIRE_ERROR_DENIED:
        case WIRE_ERROR_POLICY_BROKEN:
                return DOTNET_IPC_HR_ACCESS_DENIED;
        case WIRE_ERROR_BAD_REQUEST:
                return DOTNET_IPC_HR_BAD_ENCODING;
        default:
                return DOTNET_IPC_HR_FAIL;
        }
}

static void answer_agent_error(ToolConnection *t, const WireMessage *m) {
        _cleanup_free_ char *message = NULL;
        uint32_t error = 0, hresult = hresult_of_error(m);

        (void)wire_message_get_u32(m, WIRE_TAG_ERROR, &error);
        (void)wire_message_get_string(m, WIRE_TAG_MESSAGE, &message);
        note(t->port, "%s: %s%s%s (HRESULT 0x%08x to the tool)", command_name(t), wire_error_to_string(error),
             message ? ": " : "", message ? message : "", hresult);
        if (error == WIRE_ERROR_DENIED && t->decoded && t->ipc.command == DOTNET_IPC_RESUME_RUNTIME)
                note(t->port, "the runtime waits to be resumed, which needs a grant of 'resume'; dotnet-trace "
                     "and dotnet-counters send ResumeRuntime after every session: to leave it waiting, run "
                     "them with --resume-runtime:false");
        answer_error(t, hresult, message);
}

/* ---- the tool's request ---- */

/* Reads one message: its header, then as many bytes as the header says. Return: 0, or an HRESULT to answer. */
static uint32_t read_request(ToolConnection *t) {
        struct timeval tv = { .tv_sec = client_test_hook_tool_wait(PORT_TOOL_TIMEOUT_SEC) };
        size_t size;

        (void)setsockopt(t->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        (void)setsockopt(t->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        if (fd_read_exactly(t->fd, t->message, DOTNET_IPC_HEADER_SIZE) < 0)
                return UINT32_MAX; /* nothing to answer: the tool is gone or silent */
        t->message_size = DOTNET_IPC_HEADER_SIZE;
        size = unaligned_read_le16(t->message + 14);
        if (size < DOTNET_IPC_HEADER_SIZE)
                return DOTNET_IPC_HR_BAD_ENCODING;
        if (size > WIRE_IPC_MESSAGE_MAX)
                return DOTNET_IPC_HR_BAD_ENCODING; /* the agent would refuse it too: it does not fit a frame */
        if (fd_read_exactly(t->fd, t->message + DOTNET_IPC_HEADER_SIZE, size - DOTNET_IPC_HEADER_SIZE) < 0)
                return UINT32_MAX;
        t->message_size = size;
        t->decoded = ipc_request_decode(t->message, size, &t->ipc) == 0;
        return 0;
}

static int send_to_agent(const ToolConnection *t, AgentClient *client) {
        const PortOptions *o = t->port->options;
        _cleanup_free_ WireWriter *w = malloc(sizeof(*w));

        if (!w)
                return -ENOMEM;
        wire_writer_begin(w, WIRE_REQUEST_IPC);
        wire_writer_put_u32(w, WIRE_TAG_PROGRESS, 1);
        /* both (dsctl exec UNIT): the agent serves that pid only while it runs in the unit */
        if (o->unit)
                wire_writer_put_string(w, WIRE_TAG_UNIT, o->unit);
        if (o->pid > 0)
                wire_writer_put_u32(w, WIRE_TAG_PID, (uint32_t)o->pid);
        wire_writer_put_bytes(w, WIRE_TAG_IPC_MESSAGE, t->message, t->message_size);
        return agent_client_send(client, w);
}

/* ---- sessions ---- */

static void session_register(Port *p, uint64_t id, int agent_fd) {
        pthread_mutex_lock(&p->lock);
        if (p->n_sessions < PORT_SESSIONS_MAX)
                p->sessions[p->n_sessions++] = (PortSession){ .id = id, .agent_fd = agent_fd };
        pthread_mutex_unlock(&p->lock);
}

static void session_unregister(Port *p, uint64_t id) {
        pthread_mutex_lock(&p->lock);
        for (size_t i = 0; i < p->n_sessions; i++)
                if (p->sessions[i].id == id) {
                        p->sessions[i] = p->sessions[--p->n_sessions];
                        break;
                }
        pthread_mutex_unlock(&p->lock);
}

/*
 * StopTracing for a session this port started: its connection to the agent
 * is shut down for writing, which is how any dsctl session asks the agent
 * to stop (the agent then sends StopTracing with the runtime's own id and
 * relays the rundown). Return: whether the id was one of ours.
 */
static bool session_stop(Port *p, uint64_t id) {
        bool found = false;

        pthread_mutex_lock(&p->lock);
        for (size_t i = 0; i < p->n_sessions; i++)
                if (p->sessions[i].id == id) {
                        (void)shutdown(p->sessions[i].agent_fd, SHUT_WR);
                        found = true;
                }
        pthread_mutex_unlock(&p->lock);
        return found;
}

/* Moves the stream from the agent's pipe to the tool until either ends. Return: whether the stream ended. */
static bool relay_stream(ToolConnection *t, int pipe_fd) {
        struct pollfd fds[2] = { { .fd = pipe_fd, .events = POLLIN }, { .fd = t->fd, .events = POLLIN } };
        int flags = fcntl(t->fd, F_GETFL);

        (void)fcntl(t->fd, F_SETFL, flags | O_NONBLOCK);
        for (;;) {
                ssize_t n;

                if (poll(fds, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return false;
                }
                if (fds[1].revents & (POLLHUP | POLLERR))
                        return false; /* the tool left */
                if (fds[1].revents & POLLIN) {
                        char b[256];
                        n = recv(t->fd, b, sizeof(b), MSG_DONTWAIT);
                        if (n == 0)
                                return false;
                        /* anything a tool sends on a session's connection is not a request: ignored */
                }
                if (!(fds[0].revents & (POLLIN | POLLHUP)))
                        continue;
                n = splice(pipe_fd, NULL, t->fd, NULL, PORT_SPLICE_MAX, SPLICE_F_MOVE);
                if (n == 0)
                        return true;
                if (n < 0 && errno == EAGAIN) {
                        struct pollfd out = { .fd = t->fd, .events = POLLOUT };
                        if (poll(&out, 1, (int)client_test_hook_tool_wait(PORT_TOOL_TIMEOUT_SEC) * 1000) <= 0 || (out.revents & (POLLHUP | POLLERR)))
                                return false;
                        continue;
                }
                if (n < 0 && errno != EINTR)
                        return false;
        }
}

/* The session runs: the tool gets the agent's OK reply, then the stream; then the agent's last frames are read. */
static void serve_session(ToolConnection *t, AgentClient *client, const WireMessage *stream) {
        _cleanup_close_ int pipe_fd = TAKE_FD(client->received_fd);
        const uint8_t *reply;
        size_t size;
        uint64_t id;
        bool ended;
        WireMessage m;

        if (pipe_fd < 0 || wire_message_get_bytes(stream, WIRE_TAG_IPC_MESSAGE, &reply, &size) != 0 ||
            size != DOTNET_IPC_HEADER_SIZE + 8) {
                answer_error(t, DOTNET_IPC_HR_FAIL, NULL);
                return;
        }
        id = unaligned_read_le64(reply + DOTNET_IPC_HEADER_SIZE);
        session_register(t->port, id, client->fd);
        note(t->port, "%s: session %016llx started", command_name(t), (unsigned long long)id);
        ended = fd_write_all(t->fd, reply, size) == 0 && relay_stream(t, pipe_fd);
        if (!ended) {
                /* the tool left: the agent stops the session, and drains the rest itself */
                pipe_fd = safe_close(pipe_fd);
                (void)shutdown(client->fd, SHUT_WR);
        }
        session_unregister(t->port, id);
        /* SESSION_END, then DONE or ERROR; the agent bounds how long that takes */
        agent_client_set_deadline(client, 120 * 1000000ULL, "the end of the session");
        while (agent_client_next(client, &m, NULL, NULL) == 0 && m.type != WIRE_REPLY_DONE &&
               m.type != WIRE_REPLY_ERROR)
                ;
        note(t->port, "%s: session %016llx ended", command_name(t), (unsigned long long)id);
}

/* ---- dumps ---- */

/*
 * The agent handed over the dump; dsctl writes it where the tool asked, as the caller. The agent
 * keeps no copy of it (the DUMP frame names no PATH), but of one only root may read.
 */
static void save_dump(ToolConnection *t, AgentClient *client, const WireMessage *m, OutFile *file) {
        _cleanup_close_ int in = TAKE_FD(client->received_fd);
        _cleanup_free_ char *kept = NULL;
        struct stat st;
        int r;

        (void)wire_message_get_string(m, WIRE_TAG_PATH, &kept);
        if (in < 0) {
                if (kept)
                        note(t->port, "%s: the agent sent no copy: you may not read this dump; it is kept at %s, "
                             "root's alone", command_name(t), kept);
                else
                        note(t->port, "%s: the agent sent no copy: you may not read this dump", command_name(t));
                answer_error(t, DOTNET_IPC_HR_ACCESS_DENIED, "the agent sent no copy: you may not read this dump");
                return;
        }
        r = fstat(in, &st) < 0 || !S_ISREG(st.st_mode) ? -EBADMSG : fd_copy_all(in, file->fd, (uint64_t)st.st_size);
        if (r == 0)
                r = out_file_commit(file, t->ipc.dump.path);
        if (r < 0) {
                note(t->port, "%s: cannot write %s: %s", command_name(t), t->ipc.dump.path, strerror(-r));
                answer_error(t, DOTNET_IPC_HR_FAIL, "dsctl could not write the dump file");
                return;
        }
        if (kept)
                note(t->port, "%s: wrote %s; the agent also keeps %s (dsctl dumps lists it, dsctl dumps --remove "
                     "removes it)", command_name(t), t->ipc.dump.path, kept);
        else
                note(t->port, "%s: wrote %s (the agent keeps no copy)", command_name(t), t->ipc.dump.path);
        answer_ok_hresult(t);
}

static bool is_dump(const ToolConnection *t) {
        return t->decoded && (t->ipc.command == DOTNET_IPC_GENERATE_CORE_DUMP ||
                              t->ipc.command == DOTNET_IPC_GENERATE_CORE_DUMP2 ||
                              t->ipc.command == DOTNET_IPC_GENERATE_CORE_DUMP3);
}

/* ---- one connection ---- */

/* Relays the agent's frames to the tool. Return: whether it was a session or a dump (for --once). */
static bool serve_replies(ToolConnection *t, AgentClient *client, OutFile *file) {
        WireMessage m;
        const uint8_t *bytes;
        size_t size;

        for (;;) {
                int r = agent_client_next(client, &m, NULL, NULL);

                if (r < 0) {
                        note(t->port, "%s: lost the agent's answer: %s", command_name(t), strerror(-r));
                        answer_error(t, DOTNET_IPC_HR_FAIL, NULL);
                        return false;
                }
                switch (m.type) {
                case WIRE_REPLY_PROGRESS:
                        break;
                case WIRE_REPLY_IPC:
                        if (wire_message_get_bytes(&m, WIRE_TAG_IPC_MESSAGE, &bytes, &size) == 0)
                                (void)fd_write_all(t->fd, bytes, size);
                        break;
                case WIRE_REPLY_STREAM:
                        serve_session(t, client, &m);
                        return true;
                case WIRE_REPLY_DUMP:
                        if (is_dump(t))
                                save_dump(t, client, &m, file);
                        break;
                case WIRE_REPLY_DONE:
                        return is_dump(t);
                case WIRE_REPLY_ERROR:
                        answer_agent_error(t, &m);
                        return false;
                default:
                        answer_error(t, DOTNET_IPC_HR_FAIL, NULL);
                        return false;
                }
        }
}

static bool serve_tool(ToolConnection *t) {
        _cleanup_(agent_client_freep) AgentClient *client = NULL;
        _cleanup_(out_file_done) OutFile file = OUT_FILE_NULL;
        const PortOptions *o = t->port->options;
        uint32_t hresult;
        int r;

        hresult = read_request(t);
        if (hresult == UINT32_MAX)
                return false;
        if (hresult != 0) {
                note(t->port, "a request dsctl cannot carry (its size field says %u bytes)",
                     (unsigned)unaligned_read_le16(t->message + 14));
                answer_error(t, hresult, NULL);
                return false;
        }
        if (t->decoded && t->ipc.command == DOTNET_IPC_STOP_TRACING) {
                if (session_stop(t->port, t->ipc.session_id))
                        answer_ok(t, t->message + DOTNET_IPC_HEADER_SIZE, 8);
                else
                        answer_error(t, DOTNET_IPC_HR_INVALID_ARG, NULL);
                return false;
        }
        /* the file is made first, as the caller: a path that cannot be written costs no dump */
        if (is_dump(t) && (r = out_file_open(&file, t->ipc.dump.path)) < 0) {
                note(t->port, "%s: cannot create %s: %s; nothing was asked of the agent", command_name(t),
                     t->ipc.dump.path, strerror(-r));
                answer_error(t, DOTNET_IPC_HR_FAIL, "dsctl cannot create the dump file");
                return false;
        }
        r = agent_client_connect(o->agent_socket, PORT_AGENT_TIMEOUT_SEC, &client);
        if (r == 0)
                r = send_to_agent(t, client);
        if (r < 0 && r != -EPIPE && r != -ECONNRESET) {
                note(t->port, "cannot reach dsagent at %s: %s", o->agent_socket, strerror(-r));
                answer_error(t, DOTNET_IPC_HR_FAIL, NULL);
                return false;
        }
        return serve_replies(t, client, &file);
}

static void *tool_thread(void *userdata) {
        ToolConnection *t = userdata;
        Port *p = t->port;
        bool counted = serve_tool(t);
        uint64_t one = 1;

        ipc_request_done(&t->ipc);
        safe_close(t->fd);
        free(t);
        pthread_mutex_lock(&p->lock);
        p->active--;
        if (counted)
                p->once_done = true;
        pthread_mutex_unlock(&p->lock);
        (void)!write(p->wake_fd, &one, sizeof(one));
        return NULL;
}

/* ---- the socket ---- */

/* $XDG_RUNTIME_DIR when it is the caller's own private directory. */
static bool runtime_dir_usable(const char *dir) {
        struct stat st;

        return dir && dir[0] == '/' && lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid() &&
               (st.st_mode & 0077) == 0;
}

static int default_path(const PortOptions *o, char **ret_path, char **ret_dir) {
        const char *runtime = getenv("XDG_RUNTIME_DIR"), *tmp = getenv("TMPDIR");
        char target[WIRE_UNIT_MAX + 16];
        _cleanup_free_ char *dir = NULL;

        if (o->unit)
                snprintf(target, sizeof(target), "%s", o->unit);
        else
                snprintf(target, sizeof(target), "%d", (int)o->pid);
        if (runtime_dir_usable(runtime))
                return asprintf(ret_path, "%s/dsctl-port-%s-%d.sock", runtime, target, (int)getpid()) < 0 ? -ENOMEM : 0;
        if (asprintf(&dir, "%s/dsctl-port-XXXXXX", tmp && tmp[0] == '/' ? tmp : "/tmp") < 0)
                return -ENOMEM;
        if (!mkdtemp(dir))
                return -errno;
        if (asprintf(ret_path, "%s/port.sock", dir) < 0) {
                (void)rmdir(dir);
                return -ENOMEM;
        }
        *ret_dir = TAKE_PTR(dir);
        return 0;
}

/* dsctl exec: a new private directory, and in it the socket under the runtime's own name for the pid. */
static int exec_path(const PortOptions *o, char **ret_path, char **ret_dir) {
        const char *tmp = getenv("TMPDIR");
        _cleanup_free_ char *dir = NULL;

        if (asprintf(&dir, "%s/dsctl-exec-XXXXXX", tmp && tmp[0] == '/' ? tmp : "/tmp") < 0)
                return -ENOMEM;
        if (!mkdtemp(dir))
                return -errno;
        if (asprintf(ret_path, "%s/dotnet-diagnostic-%d-1-socket", dir, (int)o->pid) < 0) {
                (void)rmdir(dir);
                return -ENOMEM;
        }
        *ret_dir = TAKE_PTR(dir);
        return 0;
}

/*
 * The command exec runs: exec_argv with "{pid}" replaced by the pid. A -p or --process-id the tool
 * gets empty is said on standard error before it runs, even with --quiet: the tool would only
 * print its help (a shell expanded "$DSCTL_PID" before dsctl set it). Return: 0 or -ENOMEM.
 */
static int exec_command(const PortOptions *o, char ***ret_argv) {
        char **argv = NULL;
        size_t at;
        int r;

        r = exec_args_substitute(o->exec_argv, o->pid, &argv);
        if (r < 0)
                return r;
        at = exec_args_find_empty_process_id(argv);
        if (at > 0) {
                const char *option = strncmp(argv[at], "--", 2) == 0 ? "--process-id" : "-p";
                const char *base = strrchr(argv[0], '/');
                _cleanup_free_ char *program = NULL;

                base = base && base[1] ? base + 1 : argv[0];
                program = text_escape(base, strlen(base));
                fprintf(stderr, "dsctl: exec: warning: %s is given %s without a process id (its argument %zu); a shell "
                        "expands \"$DSCTL_PID\" before dsctl sets it: write %s %s, which dsctl replaces with %d, or "
                        "%s \"$DSCTL_PID\" inside sh -c '...'\n",
                        program ? program : "the command", option, at, option, EXEC_ARGS_PID_PLACEHOLDER, (int)o->pid,
                        option);
        }
        *ret_argv = argv;
        return 0;
}

/*
 * Starts @argv with TMPDIR=@dir, DSCTL_PID=the pid and no signal blocked (the port blocks the ones it reads).
 * Return: 0 and a pidfd of it in *@ret_pidfd (and its pid), or a negative errno.
 */
static int exec_start(const PortOptions *o, char **argv, const char *dir, pid_t *ret_pid, int *ret_pidfd) {
        pid_t pid = fork();
        int fd;

        if (pid < 0)
                return -errno;
        if (pid == 0) {
                sigset_t none;
                char pid_text[16];

                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                snprintf(pid_text, sizeof(pid_text), "%d", (int)o->pid);
                if (setenv("TMPDIR", dir, 1) == 0 && setenv("DSCTL_PID", pid_text, 1) == 0)
                        execvp(argv[0], argv);
                fprintf(stderr, "dsctl: exec: cannot run %s: %s\n", argv[0], strerror(errno));
                _exit(127);
        }
        fd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (fd < 0) {
                int r = -errno;
                (void)kill(pid, SIGKILL);
                (void)waitpid(pid, NULL, 0);
                return r;
        }
        *ret_pid = pid;
        *ret_pidfd = fd;
        return 0;
}

/* The command's exit status as a shell gives it. */
static int exec_status(pid_t pid) {
        int status;

        if (waitpid(pid, &status, 0) < 0)
                return EXIT_ERROR;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* bind() makes the name, never replacing one, with the umask's mode: 0600. */
static int listen_at(const char *path, int *ret_fd) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;
        mode_t old;
        int r;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, strlen(path));
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        old = umask(0177);
        r = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
        umask(old);
        if (r < 0)
                return r == -EADDRINUSE ? -EEXIST : r;
        if (listen(fd, 16) < 0) {
                r = -errno;
                (void)unlink(path);
                return r;
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* Only the caller's own processes may use the port: anyone else is closed on before a byte is read. */
static bool peer_is_caller(int fd) {
        struct ucred cred;
        socklen_t len = sizeof(cred);

        return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == getuid();
}

static void accept_one(Port *p, int listen_fd) {
        ToolConnection *t;
        pthread_t thread;
        pthread_attr_t attr;
        int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);

        if (fd < 0)
                return;
        if (!peer_is_caller(fd)) {
                note(p, "refused a connection from another user");
                safe_close(fd);
                return;
        }
        t = calloc(1, sizeof(*t));
        if (!t) {
                safe_close(fd);
                return;
        }
        *t = (ToolConnection){ .port = p, .fd = fd, .ipc = IPC_REQUEST_NULL };
        pthread_mutex_lock(&p->lock);
        p->active++;
        pthread_mutex_unlock(&p->lock);
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&thread, &attr, tool_thread, t) != 0) {
                pthread_mutex_lock(&p->lock);
                p->active--;
                pthread_mutex_unlock(&p->lock);
                safe_close(t->fd);
                free(t);
        }
        pthread_attr_destroy(&attr);
}

static bool should_end(Port *p) {
        bool end;

        pthread_mutex_lock(&p->lock);
        end = p->options->once && p->once_done && p->active == 0;
        pthread_mutex_unlock(&p->lock);
        return end;
}

static bool has_room(Port *p) {
        bool room;

        pthread_mutex_lock(&p->lock);
        room = p->active < PORT_ACTIVE_MAX;
        pthread_mutex_unlock(&p->lock);
        return room;
}

/* A signal to dsctl exec: SIGINT is the command's (the terminal sent it there too), SIGTERM is passed on. */
static void exec_on_signal(int signal_fd, pid_t child) {
        struct signalfd_siginfo si;

        if (read(signal_fd, &si, sizeof(si)) == (ssize_t)sizeof(si) && si.ssi_signo == SIGTERM)
                (void)kill(child, SIGTERM);
}

/* Serves until a signal, or with exec until the command (@child, @child_fd) exits. */
static int serve(Port *p, int listen_fd, int signal_fd, pid_t child, int child_fd) {
        struct pollfd fds[4] = {
                { .fd = listen_fd, .events = POLLIN },
                { .fd = signal_fd, .events = POLLIN },
                { .fd = p->wake_fd, .events = POLLIN },
                { .fd = child_fd, .events = POLLIN }, /* -EBADF without exec: poll() skips it */
        };

        while (!should_end(p)) {
                fds[0].events = has_room(p) ? POLLIN : 0; /* at the cap, new tools wait in the backlog */
                if (poll(fds, 4, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (fds[3].revents & POLLIN)
                        return 0;
                if ((fds[1].revents & POLLIN) && child_fd >= 0)
                        exec_on_signal(signal_fd, child);
                else if (fds[1].revents & POLLIN)
                        return 0;
                if (fds[2].revents & POLLIN) {
                        uint64_t n;
                        (void)!read(p->wake_fd, &n, sizeof(n));
                }
                if (fds[0].revents & POLLIN)
                        accept_one(p, listen_fd);
        }
        return 0;
}

int port_run(const PortOptions *o) {
        _cleanup_free_ char *path = NULL, *dir = NULL;
        _cleanup_close_ int listen_fd = -EBADF, signal_fd = -EBADF;
        int wake_fd; /* never closed: a tool thread may still signal it while the process exits */
        /* Static: tool threads are detached, and may still run while the process exits. */
        static Port p = { .lock = PTHREAD_MUTEX_INITIALIZER };
        sigset_t mask;
        int r;

        if (o->exec_argv && (r = exec_path(o, &path, &dir)) < 0) {
                fprintf(stderr, "dsctl: exec: cannot make a private directory for the socket: %s\n", strerror(-r));
                return EXIT_ERROR;
        } else if (o->exec_argv)
                ;
        else if (o->path)
                path = strdup(o->path);
        else if ((r = default_path(o, &path, &dir)) < 0) {
                fprintf(stderr, "dsctl: port: cannot make a private directory for the socket: %s\n", strerror(-r));
                return EXIT_ERROR;
        }
        if (!path)
                return EXIT_ERROR;
        r = listen_at(path, &listen_fd);
        if (r < 0) {
                fprintf(stderr, "dsctl: port: cannot create the socket %s: %s%s\n", path, strerror(-r),
                        r == -EEXIST ? " (something is there already; dsctl does not replace it)" : "");
                if (dir)
                        (void)rmdir(dir);
                return EXIT_ERROR;
        }
        p.options_copy = *o;
        p.options = &p.options_copy;
        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &mask, NULL); /* threads made from here on inherit it */
        sigdelset(&mask, SIGPIPE);
        signal_fd = signalfd(-1, &mask, SFD_CLOEXEC);
        wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        p.wake_fd = wake_fd;
        if (signal_fd < 0 || wake_fd < 0) {
                (void)unlink(path);
                return EXIT_ERROR;
        }
        if (o->exec_argv) {
                pid_t child = 0;
                _cleanup_close_ int child_fd = -EBADF;
                char **argv = NULL;

                r = exec_command(o, &argv);
                if (r == 0)
                        r = exec_start(o, argv, dir, &child, &child_fd);
                exec_args_free(argv);
                if (r < 0) {
                        fprintf(stderr, "dsctl: exec: cannot start %s: %s\n", o->exec_argv[0], strerror(-r));
                        r = EXIT_ERROR;
                } else {
                        (void)serve(&p, listen_fd, signal_fd, child, child_fd);
                        r = exec_status(child);
                }
                (void)unlink(path);
                (void)rmdir(dir); /* left when the command left files of its own there */
                return r;
        }
        printf("%s,connect\n", path);
        fflush(stdout);
        if (o->unit)
                note(&p, "serving %s at %s; use --diagnostic-port %s,connect; Ctrl-C ends", o->unit, path, path);
        else
                note(&p, "serving process %d at %s; use --diagnostic-port %s,connect; Ctrl-C ends", (int)o->pid, path,
                     path);
        r = serve(&p, listen_fd, signal_fd, 0, -EBADF);
        (void)unlink(path);
        if (dir)
                (void)rmdir(dir);
        return r < 0 ? EXIT_ERROR : EXIT_OK;
}

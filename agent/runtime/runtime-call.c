/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One request to a .NET runtime and its one reply on sd-event, with a deadline (runtime-call.h);
 * every command that talks to a runtime uses it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>

#include "common/cleanup.h"
#include "agent/runtime/runtime-call.h"

/*
 * Most requests and replies are a few hundred bytes. Larger ones get an
 * allocation of their own size: a call with room for the largest of each
 * inline was 128 KiB, mapped and cleared for every request.
 */
#define RUNTIME_CALL_INLINE 512

struct RuntimeCall {
        int fd;
        sd_event_source *io;
        sd_event_source *timer;
        uint8_t *request;       /* request_inline, or an allocation of its own */
        size_t request_size, request_sent;
        uint8_t *reply;         /* reply_inline, until a larger reply is announced */
        size_t reply_size, reply_expected; /* expected is 0 until the header arrived */
        bool reply_ends;        /* nothing follows the reply (dotnet_ipc_reply_ends_exchange()) */
        RuntimeCallDone done;
        void *userdata;
        uint64_t timeout_usec;
        /* a block that follows the reply (runtime_call_read_block()) */
        uint8_t *block;
        size_t block_size, block_read;
        RuntimeCallBlockDone block_done;
        void *block_userdata;
        uint8_t request_inline[RUNTIME_CALL_INLINE];
        uint8_t reply_inline[RUNTIME_CALL_INLINE];
};

RuntimeCall *runtime_call_free(RuntimeCall *call) {
        if (!call)
                return NULL;
        sd_event_source_disable_unref(call->io);
        sd_event_source_disable_unref(call->timer);
        safe_close(call->fd);
        free(call->block);
        if (call->request != call->request_inline)
                free(call->request);
        if (call->reply != call->reply_inline)
                free(call->reply);
        free(call);
        return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(RuntimeCall *, runtime_call_free);

/*
 * After a reply that starts a stream the connection carries the stream: the
 * caller takes the socket over. The call read exactly the reply, so the
 * stream's first byte is still in the socket.
 */
int runtime_call_take_fd(RuntimeCall *call) {
        int fd = call->fd;

        call->io = sd_event_source_disable_unref(call->io);
        call->fd = -EBADF;
        return fd;
}

const char *runtime_call_error_text(int error) {
        switch (error) {
        case RUNTIME_CALL_E_TIMEOUT: return "the runtime did not answer in time";
        case RUNTIME_CALL_E_MALFORMED: return "the runtime sent a malformed reply";
        default: return "the runtime closed the connection";
        }
}

static void runtime_call_complete(RuntimeCall *call, int error, const DotnetIpcResponse *reply) {
        /* no more events: the callback may free the call, or leave it for later */
        sd_event_source_set_enabled(call->io, SD_EVENT_OFF);
        sd_event_source_set_enabled(call->timer, SD_EVENT_OFF);
        if (call->block_done) {
                RuntimeCallBlockDone done = call->block_done;

                call->block_done = NULL;
                done(call, error, error == 0 ? call->block : NULL, error == 0 ? call->block_size : 0,
                     call->block_userdata);
                return;
        }
        call->done(call, error, reply, call->userdata);
}

/* Return: 1 when the whole block is read, 0 for "wait", else an error code. */
static int runtime_call_read_more(RuntimeCall *call) {
        while (call->block_read < call->block_size) {
                ssize_t n = recv(call->fd, call->block + call->block_read, call->block_size - call->block_read,
                                 MSG_DONTWAIT);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return errno == EAGAIN ? 0 : errno == ECONNRESET ? RUNTIME_CALL_E_CLOSED : -errno;
                if (n == 0)
                        return RUNTIME_CALL_E_CLOSED;
                call->block_read += (size_t)n;
        }
        return 1;
}

/* Return: 1 when all of the request is sent, 0 to wait for room, or a negative errno. */
static int runtime_call_send(RuntimeCall *call) {
        while (call->request_sent < call->request_size) {
                ssize_t n = send(call->fd, call->request + call->request_sent,
                                 call->request_size - call->request_sent, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0)
                        return errno == EAGAIN ? 0 : -errno;
                call->request_sent += (size_t)n;
        }
        return 1;
}

static int runtime_call_write(RuntimeCall *call) {
        int r = runtime_call_send(call);
        if (r <= 0)
                return r;
        return sd_event_source_set_io_events(call->io, EPOLLIN);
}

/* The header is in: make room for the whole reply, and drop what was read past it (nothing may follow it). */
static int runtime_call_reply_announced(RuntimeCall *call) {
        DotnetIpcHeader h;

        if (dotnet_ipc_header_decode(call->reply, call->reply_size, &h) != 0)
                return RUNTIME_CALL_E_MALFORMED; /* h.size is at least the header's */
        if (call->reply_size > h.size)
                call->reply_size = h.size; /* read past a reply that ends the exchange: nothing */
        if (h.size > RUNTIME_CALL_INLINE) {
                uint8_t *whole = malloc(h.size);
                if (!whole)
                        return -ENOMEM;
                memcpy(whole, call->reply, call->reply_size);
                call->reply = whole;
        }
        call->reply_expected = h.size;
        return 0;
}

/*
 * Return: 1 when a complete reply is buffered, 0 for "wait", else an error code.
 *
 * A reply is read to its last byte and no further, as a stream or a block may
 * follow it, except when it ends the exchange: then one read takes a small
 * reply whole.
 */
static int runtime_call_read(RuntimeCall *call) {
        for (;;) {
                size_t want = call->reply_expected ? call->reply_expected : DOTNET_IPC_HEADER_SIZE;
                size_t room = call->reply_ends && call->reply == call->reply_inline ? RUNTIME_CALL_INLINE : want;
                ssize_t n;
                int r;

                if (call->reply_size >= want) {
                        if (call->reply_expected) {
                                call->reply_size = call->reply_expected;
                                return 1;
                        }
                        r = runtime_call_reply_announced(call);
                        if (r != 0)
                                return r;
                        continue;
                }

                n = recv(call->fd, call->reply + call->reply_size, room - call->reply_size, MSG_DONTWAIT);
                if (n < 0)
                        return errno == EAGAIN ? 0 : -errno;
                if (n == 0)
                        return RUNTIME_CALL_E_CLOSED;
                call->reply_size += (size_t)n;
        }
}

static int runtime_call_on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        RuntimeCall *call = userdata;
        DotnetIpcResponse reply;
        int r;

        if (call->block_done) {
                r = runtime_call_read_more(call);
                if (r != 0)
                        runtime_call_complete(call, r == 1 ? 0 : r, NULL);
                return 0;
        }
        if (call->request_sent < call->request_size) {
                r = runtime_call_write(call);
                if (r < 0) {
                        runtime_call_complete(call, r == -EPIPE ? RUNTIME_CALL_E_CLOSED : r, NULL);
                        return 0;
                }
                return 0;
        }

        r = runtime_call_read(call);
        if (r == 0)
                return 0;
        if (r != 1) {
                runtime_call_complete(call, r == -ECONNRESET ? RUNTIME_CALL_E_CLOSED : r, NULL);
                return 0;
        }

        if (dotnet_ipc_response_decode(call->reply, call->reply_size, &reply) != 0) {
                runtime_call_complete(call, RUNTIME_CALL_E_MALFORMED, NULL);
                return 0;
        }
        runtime_call_complete(call, 0, &reply);
        return 0;
}

static int runtime_call_on_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        runtime_call_complete(userdata, RUNTIME_CALL_E_TIMEOUT, NULL);
        return 0;
}

/**
 * runtime_call_start() - send @request on @fd and wait for one reply
 * @fd: a connected, non-blocking socket; the call owns it from now on, also on failure
 *
 * The runtime serves one client at a time and never times out, so every wait
 * here has @timeout_usec as its deadline; nothing blocks the agent's loop.
 *
 * Return: 0 or a negative errno.
 */
int runtime_call_start(sd_event *event, int fd, const uint8_t *request, size_t request_size,
                       uint64_t timeout_usec, RuntimeCallDone done, void *userdata, RuntimeCall **ret) {
        _cleanup_(runtime_call_freep) RuntimeCall *call = NULL;
        uint64_t now;
        int r;

        call = calloc(1, sizeof(*call));
        if (!call) {
                safe_close(fd);
                return -ENOMEM;
        }
        call->fd = fd;
        call->request = call->request_inline;
        call->reply = call->reply_inline;
        if (request_size > DOTNET_IPC_MESSAGE_MAX)
                return -EMSGSIZE;
        if (request_size > RUNTIME_CALL_INLINE) {
                call->request = malloc(request_size);
                if (!call->request)
                        return -ENOMEM;
        }
        memcpy(call->request, request, request_size);
        call->request_size = request_size;
        call->reply_ends = dotnet_ipc_reply_ends_exchange(request, request_size);
        call->done = done;
        call->userdata = userdata;
        call->timeout_usec = timeout_usec;

        /* a fresh connection's send buffer is empty: the request goes at once, and the wait is for the reply
         * (after an error, the wait for room finds it again and reports it the usual way) */
        r = runtime_call_send(call);
        r = sd_event_add_io(event, &call->io, fd, r == 1 ? EPOLLIN : EPOLLOUT, runtime_call_on_io, call);
        if (r < 0)
                return r;
        r = sd_event_now(event, CLOCK_MONOTONIC, &now);
        if (r < 0)
                return r;
        r = sd_event_add_time(event, &call->timer, CLOCK_MONOTONIC, now + timeout_usec, 0,
                              runtime_call_on_timeout, call);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(call);
        return 0;
}

int runtime_call_read_block(RuntimeCall *call, size_t size, RuntimeCallBlockDone done, void *userdata) {
        uint64_t now;
        int r;

        /* after a reply read past its end there is no block to read (dotnet_ipc_reply_ends_exchange()) */
        if (size == 0 || call->fd < 0 || !call->io || call->block_done || call->block || call->reply_ends)
                return -EINVAL;
        call->block = malloc(size);
        if (!call->block)
                return -ENOMEM;
        call->block_size = size;
        call->block_read = 0;
        /* the reply was read to its last byte and no further: the block's first byte is still in the socket */
        r = sd_event_now(sd_event_source_get_event(call->timer), CLOCK_MONOTONIC, &now);
        if (r >= 0)
                r = sd_event_source_set_time(call->timer, now + call->timeout_usec);
        if (r >= 0)
                r = sd_event_source_set_enabled(call->timer, SD_EVENT_ONESHOT);
        if (r >= 0)
                r = sd_event_source_set_io_events(call->io, EPOLLIN);
        if (r >= 0)
                r = sd_event_source_set_enabled(call->io, SD_EVENT_ON);
        if (r < 0)
                return r;
        call->block_done = done;
        call->block_userdata = userdata;
        return 0;
}

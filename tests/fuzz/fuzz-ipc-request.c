/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes the decoder of what a tool sends the agent through the diagnostic-port proxy
 * (common/ipc-request.h). The tool is any local user of the proxy's socket: every byte is
 * hostile.
 *
 * Input: one mode byte, then one request message.
 *   mode & 1: the header's size field is first set to the message's length, so that
 *             the fuzzer spends its time in the payloads rather than on the size
 *   mode & 2: the message is also decoded cut short by one byte (with the size field
 *             following the cut), which must fail
 *
 * Invariants: the decoder answers 0 or one of its codes, and the classes that depend on
 * the length alone are the right ones. What it accepts is within every documented limit,
 * maps to a policy command (policy/ipc-policy.h), and ipc_request_encode() writes it back byte for byte (and
 * refuses a buffer one byte short); a CollectTracing2 NetTrace request also comes back
 * byte for byte from the agent's own dotnet_ipc_collect_tracing_encode(). What it refuses
 * gets an error reply that decodes to the HRESULT ipc_request_error_hresult() chose.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "policy/ipc-policy.h"
#include "common/ipc-request.h"
#include "common/text.h"

static bool string_ok(const char *s, size_t max, bool required) {
        if (!s)
                return !required;
        if (required && !*s)
                return false;
        return strlen(s) <= max && utf8_is_valid(s, strlen(s));
}

static void check_tracing(const IpcRequest *req, const uint8_t *msg, size_t len, uint8_t *buf) {
        const IpcRequestTracing *t = &req->tracing;
        size_t size = 0;

        fuzz_assert(t->buffer_mb > 0 && t->format <= DOTNET_IPC_FORMAT_NETTRACE);
        fuzz_assert(t->config.rundown == (t->rundown_keyword != 0));
        fuzz_assert(t->config.n_providers >= 1 && t->config.n_providers <= IPC_REQUEST_PROVIDERS_MAX);
        fuzz_assert((t->filters != NULL) == (req->command == DOTNET_IPC_COLLECT_TRACING5));
        if (req->command == DOTNET_IPC_COLLECT_TRACING || req->command == DOTNET_IPC_COLLECT_TRACING2)
                fuzz_assert(t->stackwalk);
        if (req->command <= DOTNET_IPC_COLLECT_TRACING3)
                fuzz_assert(t->rundown_keyword == 0 || t->rundown_keyword == DOTNET_IPC_RUNDOWN_KEYWORD_DEFAULT);

        for (size_t i = 0; i < t->config.n_providers; i++) {
                const EventPipeProvider *p = &t->config.providers[i];

                fuzz_assert(string_ok(p->name, IPC_REQUEST_PROVIDER_NAME_MAX, true));
                fuzz_assert(strcspn(p->name, "*: ,\"") == strlen(p->name));
                fuzz_assert(string_ok(p->arguments, IPC_REQUEST_ARGUMENTS_MAX, false));
                fuzz_assert(p->level <= EVENTPIPE_LEVEL_MAX);
                for (size_t j = 0; j < i; j++)
                        fuzz_assert(strcmp(t->config.providers[j].name, p->name) != 0);
                if (t->filters)
                        fuzz_assert((t->filters[i].n_event_ids == 0) == (t->filters[i].event_ids == NULL));
        }

        /* the agent's own encoder says the same for what it can say */
        if (req->command == DOTNET_IPC_COLLECT_TRACING2 && t->format == DOTNET_IPC_FORMAT_NETTRACE) {
                fuzz_assert(dotnet_ipc_collect_tracing_encode(&t->config, t->buffer_mb, buf, DOTNET_IPC_MESSAGE_MAX,
                                                              &size) == 0);
                fuzz_assert(size == len && memcmp(buf, msg, len) == 0);
        }
}

static void check_accepted(const IpcRequest *req, const uint8_t *msg, size_t len) {
        PolicyProvider providers[IPC_REQUEST_PROVIDERS_MAX];
        PolicyCommand command = ipc_policy_command(req->command);
        uint8_t *buf = malloc(DOTNET_IPC_MESSAGE_MAX);
        PolicyRequest q;
        size_t size = 0;

        fuzz_assert(buf);
        fuzz_assert(len >= DOTNET_IPC_HEADER_SIZE && len <= DOTNET_IPC_MESSAGE_MAX);
        fuzz_assert((size_t)(msg[14] | msg[15] << 8) == len);
        fuzz_assert(dotnet_ipc_command_lookup(msg[16], msg[17]) != NULL);
        fuzz_assert(command != _POLICY_COMMAND_INVALID);
        fuzz_assert(ipc_policy_request(req, providers, IPC_REQUEST_PROVIDERS_MAX, &q) == 0);
        if (req->command >= DOTNET_IPC_COLLECT_TRACING && req->command <= DOTNET_IPC_COLLECT_TRACING5)
                fuzz_assert(q.command == ipc_policy_shape_command(ipc_policy_tracing_shape(&req->tracing)));
        else
                fuzz_assert(q.command == command);
        if (command == POLICY_COMMAND_DUMP) {
                fuzz_assert(q.dump_type != _POLICY_DUMP_INVALID && q.dump_type != POLICY_DUMP_NONE);
                fuzz_assert(string_ok(req->dump.path, IPC_REQUEST_STRING_MAX, true));
        }
        if (req->command >= DOTNET_IPC_COLLECT_TRACING && req->command <= DOTNET_IPC_COLLECT_TRACING5) {
                /* trace: every provider decided; counters: all but System.Diagnostics.Metrics; else none */
                if (q.command == POLICY_COMMAND_TRACE)
                        fuzz_assert(q.n_providers == req->tracing.config.n_providers);
                else if (q.command == POLICY_COMMAND_COUNTERS)
                        fuzz_assert(q.n_providers > 0 && q.n_providers + 1 >= req->tracing.config.n_providers);
                else
                        fuzz_assert(q.n_providers == 0);
                check_tracing(req, msg, len, buf);
        } else
                fuzz_assert(q.n_providers == 0 && req->tracing.config.providers == NULL);
        if (req->command == DOTNET_IPC_ATTACH_PROFILER || req->command == DOTNET_IPC_STARTUP_PROFILER)
                fuzz_assert(string_ok(req->profiler.path, IPC_REQUEST_STRING_MAX, true));
        if (req->command == DOTNET_IPC_SET_ENVIRONMENT_VARIABLE) {
                fuzz_assert(string_ok(req->env_name, IPC_REQUEST_STRING_MAX, true) && !strchr(req->env_name, '='));
                fuzz_assert(string_ok(req->env_value, IPC_REQUEST_STRING_MAX, false));
        }
        if (req->command == DOTNET_IPC_APPLY_STARTUP_HOOK)
                fuzz_assert(string_ok(req->startup_hook, IPC_REQUEST_STRING_MAX, true));

        /* accepted only what is written back byte for byte */
        fuzz_assert(ipc_request_encode(req, buf, DOTNET_IPC_MESSAGE_MAX, &size) == 0);
        fuzz_assert(size == len && memcmp(buf, msg, len) == 0);
        fuzz_assert(ipc_request_encode(req, buf, len - 1, &size) == -ENOBUFS);
        free(buf);
}

static void check_refused(int r) {
        uint8_t reply[64];
        DotnetIpcResponse decoded;
        uint32_t hresult;
        size_t size = 0;

        fuzz_assert(r > 0 && r <= IPC_REQUEST_E_UNSUPPORTED);
        hresult = ipc_request_error_hresult(r);
        fuzz_assert(hresult == DOTNET_IPC_HR_BAD_ENCODING || hresult == DOTNET_IPC_HR_UNKNOWN_COMMAND);
        fuzz_assert(ipc_request_reply_error_encode(hresult, NULL, reply, sizeof(reply), &size) == 0);
        fuzz_assert(dotnet_ipc_response_decode(reply, size, &decoded) == 0);
        fuzz_assert(!decoded.ok && decoded.hresult == hresult && decoded.payload_size == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        IpcRequest req = IPC_REQUEST_NULL;
        uint8_t *msg, mode;
        size_t len;
        int r;

        if (size < 1)
                return 0;
        mode = data[0];
        len = size - 1;
        msg = malloc(len + 1); /* never malloc(0) */
        fuzz_assert(msg);
        memcpy(msg, data + 1, len);
        if ((mode & 1) && len >= DOTNET_IPC_HEADER_SIZE) {
                msg[14] = (uint8_t)len;
                msg[15] = (uint8_t)(len >> 8);
        }

        r = ipc_request_decode(msg, len, &req);
        if (len < DOTNET_IPC_HEADER_SIZE)
                fuzz_assert(r == IPC_REQUEST_E_TRUNCATED);
        if (len > DOTNET_IPC_MESSAGE_MAX)
                fuzz_assert(r == IPC_REQUEST_E_OVERSIZED);
        if (r == 0)
                check_accepted(&req, msg, len);
        else
                check_refused(r);
        ipc_request_done(&req);
        fuzz_assert(req.tracing.config.providers == NULL && req.dump.path == NULL && req.env_name == NULL);

        /* one byte less is never a whole request */
        if (r == 0 && (mode & 2) && len > DOTNET_IPC_HEADER_SIZE) {
                msg[14] = (uint8_t)(len - 1);
                msg[15] = (uint8_t)((len - 1) >> 8);
                fuzz_assert(ipc_request_decode(msg, len - 1, &req) == IPC_REQUEST_E_TRUNCATED);
        }
        free(msg);
        return 0;
}

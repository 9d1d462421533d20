/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Session configuration: dotnet-trace's provider syntax, the profiles, counters, and their IPC encoding */
#include <string.h>

#include "common/dotnet-ipc.h"
#include "eventpipe/session-config.h"
#include "tests/unit/tap.h"
#include "common/unaligned.h"

static EventPipeConfig parse_ok(const char *spec) {
        EventPipeConfig c = EVENTPIPE_CONFIG_NULL;

        check(eventpipe_providers_parse(spec, &c) == 0);
        return c;
}

static void test_provider_syntax(void) {
        EventPipeConfig c;

        c = parse_ok("My-Source");
        check(c.n_providers == 1 && strcmp(c.providers[0].name, "My-Source") == 0);
        check(c.providers[0].keywords == UINT64_MAX && c.providers[0].level == 4 && !c.providers[0].arguments);
        check(c.rundown);
        eventpipe_config_done(&c);

        c = parse_ok("A:0x10:5:Key=V:with:colons,B::Verbose,C:FF:2");
        check(c.n_providers == 3);
        check(c.providers[0].keywords == 0x10 && c.providers[0].level == 5);
        check(strcmp(c.providers[0].arguments, "Key=V:with:colons") == 0);
        check(c.providers[1].keywords == UINT64_MAX && c.providers[1].level == 5);
        check(c.providers[2].keywords == 0xff && c.providers[2].level == 2);
        eventpipe_config_done(&c);

        /* commas inside double quotes belong to the arguments */
        c = parse_ok("A:1:4:Filter=\"x,y\",B");
        check(c.n_providers == 2 && strcmp(c.providers[0].arguments, "Filter=\"x,y\"") == 0);
        eventpipe_config_done(&c);

        c = parse_ok("A:0xffffffffffffffff:logalways");
        check(c.providers[0].keywords == UINT64_MAX && c.providers[0].level == 0);
        eventpipe_config_done(&c);
}

static void test_provider_syntax_errors(void) {
        static const char *const bad[] = {
                "", ",", "A,", ",A", "A,,B", "A:zz", "A:0x", "A:0x1:6", "A:0x1:loud", "A;B", "A B", "A,A",
                "A:0x10000000000000000", "A:1:4:\"unbalanced", "A:1:4:", "A:1:4:line\nbreak", ":1",
        };
        EventPipeConfig c = EVENTPIPE_CONFIG_NULL;
        char long_name[EVENTPIPE_NAME_MAX + 2];
        char many[EVENTPIPE_PROVIDERS_MAX * 8];
        size_t n = 0;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                int r = eventpipe_providers_parse(bad[i], &c);
                check(r == EVENTPIPE_E_SYNTAX);
                if (r != EVENTPIPE_E_SYNTAX)
                        printf("# accepted: \"%s\" (%d)\n", bad[i], r);
        }
        memset(long_name, 'a', sizeof(long_name) - 1);
        long_name[sizeof(long_name) - 1] = '\0';
        check(eventpipe_providers_parse(long_name, &c) == EVENTPIPE_E_LIMIT);
        for (unsigned i = 0; i <= EVENTPIPE_PROVIDERS_MAX; i++)
                n += (size_t)snprintf(many + n, sizeof(many) - n, "%sP%u", i ? "," : "", i);
        check(eventpipe_providers_parse(many, &c) == EVENTPIPE_E_LIMIT);
        check(c.n_providers == 0 && !c.providers);
}

static const EventPipeProvider *find(const EventPipeConfig *c, const char *name) {
        for (size_t i = 0; i < c->n_providers; i++)
                if (strcmp(c->providers[i].name, name) == 0)
                        return &c->providers[i];
        return NULL;
}

static void test_profiles(void) {
        EventPipeConfig c = EVENTPIPE_CONFIG_NULL;
        const EventPipeProfile *profiles;
        const EventPipeProvider *p;
        size_t n;

        profiles = eventpipe_profiles(&n);
        check(n == 6);
        for (size_t i = 0; i < n; i++) {
                check(eventpipe_profile_config(profiles[i].name, &c) == 0 && c.n_providers > 0);
                eventpipe_config_done(&c);
        }
        check(eventpipe_profile_config("cpu-sampling", &c) == 0 && c.rundown);
        p = find(&c, "Microsoft-DotNETCore-SampleProfiler");
        check(p && p->keywords == 0xf00000000000ULL && p->level == 4);
        p = find(&c, "Microsoft-Windows-DotNETRuntime");
        check(p && p->keywords == 0x14c14fccbdULL && p->level == 4);
        eventpipe_config_done(&c);

        check(eventpipe_profile_config("gc-verbose", &c) == 0);
        p = find(&c, "Microsoft-Windows-DotNETRuntime");
        check(p && p->keywords == 0x8003 && p->level == 5);
        eventpipe_config_done(&c);

        check(eventpipe_profile_config("gc-collect", &c) == 0 && !c.rundown && c.n_providers == 2);
        check(find(&c, "Microsoft-Windows-DotNETRuntimePrivate")->keywords == 0x1);
        eventpipe_config_done(&c);

        check(eventpipe_profile_config("nope", &c) == EVENTPIPE_E_UNKNOWN);
        check(!eventpipe_profile_is_known("nope") && eventpipe_profile_is_known("dotnet-common"));
        check(!eventpipe_profile_is_known(NULL) && !eventpipe_profile_find("DOTNET-COMMON"));
}

/*
 * What stock dotnet-trace 10.0.750501's collect sent for each --profile, provider for provider, as
 * recorded on the wire in front of a .NET 10.0.12 runtime (tests/tools/capture-ipc-requests.py); the
 * database filter is 950 bytes, of which its start and end are checked here.
 */
typedef struct Sent {
        const char *profile;
        size_t n;
        struct { const char *name; uint64_t keywords; uint32_t level; } providers[2];
} Sent;

static const Sent stock_sent[] = {
        { "dotnet-common", 1, { { "Microsoft-Windows-DotNETRuntime", 0x100003801dULL, 4 } } },
        { "dotnet-sampled-thread-time", 1, { { "Microsoft-DotNETCore-SampleProfiler", 0xf00000000000ULL, 4 } } },
        { "gc-verbose", 1, { { "Microsoft-Windows-DotNETRuntime", 0x8003, 5 } } },
        { "gc-collect", 2, { { "Microsoft-Windows-DotNETRuntime", 0x1, 4 },
                             { "Microsoft-Windows-DotNETRuntimePrivate", 0x1, 4 } } },
        { "database", 2, { { "System.Threading.Tasks.TplEventSource", 0x80, 4 },
                           { "Microsoft-Diagnostics-DiagnosticSource", 0x3, 5 } } },
        /* the default, neither --profile nor --providers */
        { NULL, 2, { { "Microsoft-Windows-DotNETRuntime", 0x100003801dULL, 4 },
                     { "Microsoft-DotNETCore-SampleProfiler", 0xf00000000000ULL, 4 } } },
};

static void check_sent(const EventPipeConfig *c, const Sent *sent) {
        check(c->n_providers == sent->n);
        if (c->n_providers != sent->n)
                return;
        for (size_t i = 0; i < sent->n; i++) {
                const EventPipeProvider *p = &c->providers[i];
                bool database_filter = strcmp(p->name, "Microsoft-Diagnostics-DiagnosticSource") == 0;

                check(strcmp(p->name, sent->providers[i].name) == 0);
                check(p->keywords == sent->providers[i].keywords && p->level == sent->providers[i].level);
                if (!database_filter) {
                        check(!p->arguments);
                        continue;
                }
                check(p->arguments && strlen(p->arguments) == 950);
                check(p->arguments && strncmp(p->arguments, "FilterAndPayloadSpecs=\"SqlClientDiagnosticListener/", 51) == 0);
                check(p->arguments && strstr(p->arguments, "PacketSize\r\nSqlClientDiagnosticListener/"));
                check(p->arguments && strlen(p->arguments) > 39 &&
                      strcmp(p->arguments + strlen(p->arguments) - 39, "Command.CommandExecuted@Activity2Stop:\"") == 0);
        }
}

static void test_stock_profiles_are_what_the_tool_sends(void) {
        EventPipeConfig c = EVENTPIPE_CONFIG_NULL;

        for (size_t i = 0; i < sizeof(stock_sent) / sizeof(stock_sent[0]); i++) {
                const Sent *sent = &stock_sent[i];

                check(eventpipe_stock_trace_config(sent->profile, NULL, &c) == 0);
                check_sent(&c, sent);
                eventpipe_config_done(&c);
                if (!sent->profile)
                        continue;
                /* dsctl trace --profile sends the same providers */
                check(eventpipe_profile_config(sent->profile, &c) == 0);
                check_sent(&c, sent);
                eventpipe_config_done(&c);
                check(eventpipe_profile_find(sent->profile)->stock);
        }
        /* and the table's matcher says so provider for provider: NULL and "" are no arguments */
        const EventPipeProfileProvider *common = &eventpipe_profile_find("dotnet-common")->providers[0];
        check(eventpipe_profile_provider_matches(common, "Microsoft-Windows-DotNETRuntime", 0x100003801dULL, 4, ""));
        check(eventpipe_profile_provider_matches(common, "Microsoft-Windows-DotNETRuntime", 0x100003801dULL, 4, NULL));
        check(!eventpipe_profile_provider_matches(common, "Microsoft-Windows-DotNETRuntime", 0x100003801dULL, 5, NULL));
        check(!eventpipe_profile_provider_matches(common, "Microsoft-Windows-DotNETRuntime", 0x1, 4, NULL));
        check(!eventpipe_profile_provider_matches(common, "Microsoft-Windows-DotNETRuntime", 0x100003801dULL, 4, "a=b"));
        check(!eventpipe_profile_provider_matches(common, "microsoft-windows-dotnetruntime", 0x100003801dULL, 4, NULL));
}

/* How dotnet-trace 10.0.750501 merged what it was given, as recorded on the wire. */
static void test_stock_merge(void) {
        EventPipeConfig c = EVENTPIPE_CONFIG_NULL;
        char *text;

        /* several profiles: a provider two of them name is the first one's */
        check(eventpipe_stock_trace_config("gc-collect,dotnet-common", NULL, &c) == 0);
        text = eventpipe_config_to_string(&c);
        check(text && strcmp(text, "Microsoft-Windows-DotNETRuntime:0x1:4,Microsoft-Windows-DotNETRuntimePrivate:0x1:4") == 0);
        free(text);
        eventpipe_config_done(&c);
        check(eventpipe_stock_trace_config("dotnet-common,gc-collect", NULL, &c) == 0);
        text = eventpipe_config_to_string(&c);
        check(text && strcmp(text, "Microsoft-Windows-DotNETRuntime:0x100003801d:4,"
                                   "Microsoft-Windows-DotNETRuntimePrivate:0x1:4") == 0);
        free(text);
        eventpipe_config_done(&c);

        /* --providers come first and win over a profile's; without keywords they ask for 0 */
        check(eventpipe_stock_trace_config("dotnet-common", "Dsagent-TestTarget", &c) == 0);
        text = eventpipe_config_to_string(&c);
        check(text && strcmp(text, "Dsagent-TestTarget:0x0:4,Microsoft-Windows-DotNETRuntime:0x100003801d:4") == 0);
        free(text);
        eventpipe_config_done(&c);
        check(eventpipe_stock_trace_config("dotnet-common", "Microsoft-Windows-DotNETRuntime:0x1:5", &c) == 0);
        check(c.n_providers == 1 && c.providers[0].keywords == 0x1 && c.providers[0].level == 5);
        eventpipe_config_done(&c);
        check(eventpipe_stock_trace_config("dotnet-common", "microsoft-windows-dotnetruntime:0x1:5", &c) == 0);
        check(c.n_providers == 1);
        eventpipe_config_done(&c);
        /* --providers alone: no default profiles */
        check(eventpipe_stock_trace_config(NULL, "Dsagent-TestTarget:0x1", &c) == 0);
        check(c.n_providers == 1 && c.providers[0].keywords == 0x1);
        eventpipe_config_done(&c);
        /* profile names in any case, as the tool takes them */
        check(eventpipe_stock_trace_config("DOTNET-Common", NULL, &c) == 0 && c.n_providers == 1);
        eventpipe_config_done(&c);

        /* what the tool refuses: collect-linux's cpu-sampling, unknown names, empty names */
        check(eventpipe_stock_trace_config("cpu-sampling", NULL, &c) == EVENTPIPE_E_NOT_STOCK);
        check(eventpipe_stock_trace_config("dotnet-common,cpu-sampling", NULL, &c) == EVENTPIPE_E_NOT_STOCK);
        check(eventpipe_stock_trace_config("nope", NULL, &c) == EVENTPIPE_E_UNKNOWN);
        check(eventpipe_stock_trace_config("", NULL, &c) == EVENTPIPE_E_SYNTAX);
        check(eventpipe_stock_trace_config("dotnet-common,", NULL, &c) == EVENTPIPE_E_SYNTAX);
        check(eventpipe_stock_trace_config("dotnet-common,,gc-collect", NULL, &c) == EVENTPIPE_E_SYNTAX);
        check(eventpipe_stock_trace_config(NULL, "A:zz", &c) == EVENTPIPE_E_SYNTAX);
        check(c.n_providers == 0 && !c.providers);
}

static void test_counters(void) {
        const char *names[] = { "System.Runtime", "My.Meter" };
        const char *bad_name[] = { "a;Metrics=x" };
        const char *metrics_itself[] = { "System.Diagnostics.Metrics" };
        static const char expected_text[] = "System.Runtime:0x0:4:EventCounterIntervalSec=2,My.Meter:0x0:4:";
        EventPipeConfig c = EVENTPIPE_CONFIG_NULL;
        const EventPipeProvider *m;
        char *text;

        check(eventpipe_counters_config(names, 2, 2, "0123abcd", &c) == 0);
        check(c.n_providers == 3 && !c.rundown);
        check(c.providers[0].keywords == 0 && c.providers[0].level == 4);
        check(strcmp(c.providers[0].arguments, "EventCounterIntervalSec=2") == 0);
        m = find(&c, "System.Diagnostics.Metrics");
        check(m && m->keywords == 0x2 && m->level == 4);
        check(m && strcmp(m->arguments, "SessionId=0123abcd;Metrics=System.Runtime,My.Meter;RefreshInterval=2;"
                                        "MaxTimeSeries=1000;MaxHistograms=10;ClientId=0123abcd") == 0);
        text = eventpipe_config_to_string(&c);
        check(text && strncmp(text, expected_text, strlen(expected_text)) == 0);
        free(text);
        eventpipe_config_done(&c);

        check(eventpipe_counters_config(bad_name, 1, 1, "id", &c) == EVENTPIPE_E_SYNTAX);
        check(eventpipe_counters_config(metrics_itself, 1, 1, "id", &c) == EVENTPIPE_E_SYNTAX);
        check(eventpipe_counters_config(names, 2, 0, "id", &c) == EVENTPIPE_E_SYNTAX);
        check(eventpipe_counters_config(names, 2, 1, "not;an;id", &c) == EVENTPIPE_E_SYNTAX);
}

static void test_ipc_encoding(void) {
        EventPipeConfig c = parse_ok("AB:0x5:3:k=v");
        uint8_t buf[DOTNET_IPC_MESSAGE_MAX], *payload = buf + DOTNET_IPC_HEADER_SIZE;
        DotnetIpcResponse reply = { .ok = true, .payload = (const uint8_t *)"\x11\x22\x33\x44\x55\x66\x77\x88",
                                    .payload_size = 8 };
        uint64_t id = 0;
        size_t size;

        check(dotnet_ipc_collect_tracing_encode(&c, 64, buf, sizeof(buf), &size) == 0);
        check(memcmp(buf, "DOTNET_IPC_V1", 14) == 0 && unaligned_read_le16(buf + 14) == size);
        check(buf[16] == 0x02 && buf[17] == 0x03);
        check(unaligned_read_le32(payload) == 64 && unaligned_read_le32(payload + 4) == 1 && payload[8] == 1);
        check(unaligned_read_le32(payload + 9) == 1);
        check(unaligned_read_le64(payload + 13) == 0x5 && unaligned_read_le32(payload + 21) == 3);
        /* "AB": 3 UTF-16 units with the NUL; "k=v": 4 */
        check(unaligned_read_le32(payload + 25) == 3 && memcmp(payload + 29, "A\0B\0\0\0", 6) == 0);
        check(unaligned_read_le32(payload + 35) == 4 && memcmp(payload + 39, "k\0=\0v\0\0\0", 8) == 0);
        check(size == DOTNET_IPC_HEADER_SIZE + 47);
        check(dotnet_ipc_collect_tracing_encode(&c, 0, buf, sizeof(buf), &size) == DOTNET_IPC_E_MALFORMED);
        eventpipe_config_done(&c);

        check(dotnet_ipc_stop_tracing_encode(0x1122334455667788ULL, buf, sizeof(buf), &size) == 0);
        check(size == 28 && buf[16] == 0x02 && buf[17] == 0x01 && unaligned_read_le64(buf + 20) == 0x1122334455667788ULL);

        check(dotnet_ipc_session_id_decode(&reply, &id) == 0 && id == 0x8877665544332211ULL);
        reply.payload_size = 4;
        check(dotnet_ipc_session_id_decode(&reply, &id) == DOTNET_IPC_E_MALFORMED);
}

int main(void) {
        run_test(test_provider_syntax);
        run_test(test_provider_syntax_errors);
        run_test(test_profiles);
        run_test(test_stock_profiles_are_what_the_tool_sends);
        run_test(test_stock_merge);
        run_test(test_counters);
        run_test(test_ipc_encoding);
        return tap_finish();
}

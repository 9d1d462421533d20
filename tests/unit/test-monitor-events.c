/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What dsctl stacks, exceptions and logs read: the parser's stacks, the
 * runtime's exception and method events, ILogger's events and scopes, on
 * streams captured from the real runtime (tests/data/nettrace/README.md);
 * and the sessions the agent asks for (monitor-config.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eventpipe/monitor-config.h"
#include "eventpipe/monitor-events.h"
#include "eventpipe/nettrace.h"
#include "tests/unit/tap.h"

/* What tests/target-app/Diagnostics.cs does */
#define PARKED_METHOD "DsTestTarget.DsagentProbe.ParkedInDsagentStacksProbe"
#define THROWER "DsTestTarget.DsagentProbe.ThrowDsagentProbe"
#define PROBE_EXCEPTION "DsTestTarget.DsagentProbeException"
#define PROBE_MESSAGE "dsagent-exception-probe "
#define PROBE_CATEGORY "Dsagent.TestTarget.Probe"
#define OTHER_CATEGORY "Dsagent.TestTarget.Other"

static uint8_t *load(const char *name, size_t *ret_size) {
        char path[4096];
        uint8_t *data = NULL;
        size_t size = 0, cap = 0, n;
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", NETTRACE_DATA_DIR, name);
        f = fopen(path, "re");
        if (!f)
                return NULL;
        do {
                if (size == cap) {
                        cap = cap ? cap * 2 : 65536;
                        data = realloc(data, cap);
                        if (!data)
                                break;
                }
                n = fread(data + size, 1, cap - size, f);
                size += n;
        } while (n > 0);
        fclose(f);
        *ret_size = size;
        return data;
}

/* Stacks of the sample profiler, kept until the rundown names them. */
typedef struct Stacks {
        unsigned pointer_size;
        MonitorSymbols *symbols;
        unsigned samples, with_frames, frames, external;
        uint64_t frame_sum;
        uint64_t *kept[256];
        size_t depth[256];
        unsigned n_kept;
        /* exceptions */
        unsigned thrown, thrown_ok, thrown_with_stack;
        /* logs */
        MonitorScopes *scopes;
        unsigned messages, info, warnings, errors, probe_in_scope, other_in_scope, scope_starts, bad;
} Stacks;

static int on_header(const NettraceHeader *h, void *userdata) {
        ((Stacks *)userdata)->pointer_size = h->pointer_size;
        return 0;
}

static void on_log(Stacks *s, const NettraceEvent *e) {
        const MonitorScope *around[4];
        MonitorLogEntry l = {};
        size_t n;
        int r;

        r = monitor_log_extract(e, &l);
        if (r == MONITOR_E_OTHER)
                return;
        if (r != 0) {
                s->bad++;
                return;
        }
        if (l.kind == MONITOR_LOG_SCOPE_START) {
                s->scope_starts++;
                if (l.n_arguments != 2 || strcmp(l.keys[0], "ScopeId") != 0 || strcmp(l.values[0], "42") != 0)
                        s->bad++;
                if (monitor_scopes_start(s->scopes, e, &l) != 0)
                        s->bad++;
        } else if (l.kind == MONITOR_LOG_SCOPE_STOP)
                monitor_scopes_stop(s->scopes, e);
        else {
                s->messages++;
                n = monitor_scopes_of(s->scopes, e, around, 4);
                if (strcmp(l.category, PROBE_CATEGORY) == 0 && l.level == 2 && strncmp(l.message, "dsagent-log-info ", 17) == 0)
                        s->info++;
                else if (strcmp(l.category, PROBE_CATEGORY) == 0 && l.level == 3 && l.event_id == 7 && l.event_name &&
                         strcmp(l.event_name, "ProbeWarning") == 0 && strncmp(l.message, "dsagent-log-probe ", 18) == 0)
                        s->warnings++;
                else if (strcmp(l.category, OTHER_CATEGORY) == 0 && l.level == 4 && !l.event_name)
                        s->errors++;
                else
                        s->bad++;
                if (strcmp(l.category, PROBE_CATEGORY) == 0 && n == 1 && around[0]->n_arguments == 2 &&
                    strcmp(around[0]->values[0], "42") == 0)
                        s->probe_in_scope++;
                if (strcmp(l.category, OTHER_CATEGORY) == 0 && n > 0)
                        s->other_in_scope++;
        }
        monitor_log_entry_done(&l);
}

static int on_event(const NettraceEvent *e, void *userdata) {
        Stacks *s = userdata;
        MonitorException x = {};
        int r;

        for (size_t i = 0; i < e->stack_depth; i++)
                s->frame_sum = s->frame_sum * 31 + e->stack[i];
        if (monitor_symbols_add(s->symbols, e) != MONITOR_E_OTHER)
                return 0;
        if (e->metadata && strcmp(e->metadata->provider, MONITOR_SAMPLE_PROFILER) == 0) {
                s->samples++;
                s->external += monitor_sample_is_external(e);
                if (e->stack_depth > 0) {
                        s->with_frames++;
                        s->frames += (unsigned)e->stack_depth;
                        if (s->n_kept < 256) {
                                s->kept[s->n_kept] = malloc(e->stack_depth * sizeof(uint64_t));
                                memcpy(s->kept[s->n_kept], e->stack, e->stack_depth * sizeof(uint64_t));
                                s->depth[s->n_kept++] = e->stack_depth;
                        }
                }
        }
        r = monitor_exception_extract(e, s->pointer_size, &x);
        if (r != MONITOR_E_OTHER) {
                s->thrown++;
                if (r == 0 && strcmp(x.type, PROBE_EXCEPTION) == 0 && strncmp(x.message, PROBE_MESSAGE, strlen(PROBE_MESSAGE)) == 0 &&
                    x.hresult == 0x80131500)
                        s->thrown_ok++;
                if (e->stack_depth >= 2)
                        s->thrown_with_stack++;
        }
        monitor_exception_done(&x);
        on_log(s, e);
        return 0;
}

/* @frames_max: NettraceCallbacks.stack_frames_max; *@ret_dropped: the stacks it kept none of. */
static int parse_capped(const char *name, bool stacks, size_t chunk, size_t frames_max, Stacks *s,
                        uint64_t *ret_dropped) {
        NettraceCallbacks cb = { .header = on_header, .event = on_event, .stacks = stacks,
                                 .stack_frames_max = frames_max };
        NettraceParser *p = NULL;
        uint8_t *data;
        size_t size = 0;
        int r = 0;

        data = load(name, &size);
        if (!data || monitor_symbols_new(&s->symbols) < 0 || monitor_scopes_new(&s->scopes) < 0 ||
            nettrace_parser_new(&cb, s, &p) < 0) {
                free(data);
                return -1;
        }
        for (size_t pos = 0; pos < size && r == 0; pos += chunk)
                r = nettrace_feed(p, data + pos, size - pos < chunk ? size - pos : chunk);
        if (r == 0)
                r = nettrace_finish(p);
        *ret_dropped = nettrace_stacks_dropped(p);
        nettrace_parser_free(p);
        free(data);
        return r;
}

static int parse(const char *name, bool stacks, size_t chunk, Stacks *s) {
        uint64_t dropped = 0;
        int r = parse_capped(name, stacks, chunk, 0, s, &dropped);

        check(dropped == 0);
        return r;
}

static void stacks_done(Stacks *s) {
        for (unsigned i = 0; i < s->n_kept; i++)
                free(s->kept[i]);
        monitor_symbols_free(s->symbols);
        monitor_scopes_free(s->scopes);
}

static void test_stacks_are_named_by_the_rundown(void) {
        Stacks s = {}, chunked = {}, plain = {};
        bool parked = false, module_named = false;

        check(parse("stacks.nettrace", true, SIZE_MAX, &s) == 0);
        check(s.samples > 0 && s.with_frames == s.samples);
        /* the app's threads wait (Sleep, a ManualResetEventSlim): outside managed code at every sample */
        check(s.external == s.samples);
        check(monitor_symbols_methods(s.symbols) > 1000);
        for (unsigned i = 0; i < s.n_kept; i++)
                for (size_t k = 0; k < s.depth[i]; k++) {
                        const MonitorMethod *m = monitor_symbols_lookup(s.symbols, s.kept[i][k]);
                        const char *module;

                        if (!m || strcmp(m->name, PARKED_METHOD) != 0)
                                continue;
                        parked = true;
                        check(strcmp(m->name + m->method_at, "ParkedInDsagentStacksProbe") == 0);
                        /* the parameters of its signature, as dotnet-stack report shows them */
                        check(strcmp(m->parameters, "()") == 0);
                        module = monitor_symbols_module(s.symbols, m->module_id);
                        module_named = module && strcmp(module, "DsTestTarget.dll") == 0;
                }
        check(parked);
        check(module_named);

        /* chunks do not change what is seen; without stacks asked for, the verdict is the same and no frames come */
        check(parse("stacks.nettrace", true, 7, &chunked) == 0);
        check(chunked.samples == s.samples && chunked.frames == s.frames && chunked.frame_sum == s.frame_sum);
        check(parse("stacks.nettrace", false, 4096, &plain) == 0);
        check(plain.samples == s.samples && plain.with_frames == 0 && plain.frame_sum == 0);
        stacks_done(&s);
        stacks_done(&chunked);
        stacks_done(&plain);
}

/* A parser told to keep few frames (a [[collect]] watch's) drops the stacks past them, and only those. */
static void test_stacks_past_the_callers_bound_are_dropped(void) {
        Stacks all = {}, capped = {};
        uint64_t dropped = 0;

        check(parse("stacks.nettrace", true, SIZE_MAX, &all) == 0);
        check(all.frames > 8);
        check(parse_capped("stacks.nettrace", true, SIZE_MAX, 8, &capped, &dropped) == 0);
        check(dropped > 0);
        check(capped.samples == all.samples && capped.with_frames > 0 && capped.frames < all.frames);
        stacks_done(&all);
        stacks_done(&capped);
}

static void test_exceptions(void) {
        Stacks s = {};

        check(parse("exceptions.nettrace", true, SIZE_MAX, &s) == 0);
        check(s.thrown > 0 && s.thrown_ok == s.thrown && s.thrown_with_stack == s.thrown);
        stacks_done(&s);
}

static void test_logs_and_their_scopes(void) {
        Stacks s = {};

        check(parse("logs.nettrace", false, SIZE_MAX, &s) == 0);
        check(s.bad == 0);
        check(s.info > 0 && s.warnings > 0 && s.errors > 0 && s.scope_starts > 0);
        check(s.messages == s.info + s.warnings + s.errors);
        /* every message of the probe's category was logged inside its scope; the other one never */
        check(s.probe_in_scope == s.info + s.warnings);
        check(s.other_in_scope == 0);
        stacks_done(&s);
}

/* A rundown MethodDCEndVerbose event, as the runtime lays it out. */
static size_t method_event(uint8_t *buf, uint64_t start, uint32_t size, const char *ns, const char *name) {
        size_t n = 0;

        memset(buf, 0, 64);
        n = 16;                                  /* MethodID, ModuleID */
        for (int i = 0; i < 8; i++)
                buf[n++] = (uint8_t)(start >> (8 * i));
        for (int i = 0; i < 4; i++)
                buf[n++] = (uint8_t)(size >> (8 * i));
        memset(buf + n, 0, 8);                   /* MethodToken, MethodFlags */
        n += 8;
        for (const char *p = ns; ; p++) {
                buf[n++] = (uint8_t)*p;
                buf[n++] = 0;
                if (!*p)
                        break;
        }
        for (const char *p = name; ; p++) {
                buf[n++] = (uint8_t)*p;
                buf[n++] = 0;
                if (!*p)
                        break;
        }
        buf[n++] = 0;                            /* MethodSignature "" */
        buf[n++] = 0;
        return n;
}

static void test_symbols(void) {
        NettraceMetadata rundown = { .id = 1, .provider = (char *)MONITOR_RUNDOWN_PROVIDER, .event_id = 144,
                                     .event_name = (char *)"" };
        uint8_t payload[256];
        NettraceEvent e = { .metadata = &rundown, .payload = payload };
        MonitorSymbols *s = NULL;
        const MonitorMethod *m;

        check(monitor_symbols_new(&s) == 0);
        e.payload_size = method_event(payload, 0x1000, 0x100, "A.B", "First");
        check(monitor_symbols_add(s, &e) == 0);
        e.payload_size = method_event(payload, 0x2000, 0x10, "", "Global");
        check(monitor_symbols_add(s, &e) == 0);
        e.payload_size = method_event(payload, 0x3000, 0, "A.B", "Empty"); /* no code: nothing to find */
        check(monitor_symbols_add(s, &e) == 0);
        e.payload_size = 20; /* cut inside the fixed fields */
        check(monitor_symbols_add(s, &e) == MONITOR_E_MALFORMED);
        rundown.event_id = 145;
        check(monitor_symbols_add(s, &e) == MONITOR_E_OTHER);
        check(monitor_symbols_methods(s) == 2);

        m = monitor_symbols_lookup(s, 0x1000);
        check(m && strcmp(m->name, "A.B.First") == 0 && m->method_at == 4 && strcmp(m->parameters, "") == 0);
        m = monitor_symbols_lookup(s, 0x1100); /* a return address just past the last call */
        check(m && strcmp(m->name, "A.B.First") == 0);
        check(!monitor_symbols_lookup(s, 0x1101));
        m = monitor_symbols_lookup(s, 0x200f);
        check(m && strcmp(m->name, "Global") == 0 && m->method_at == 0);
        check(!monitor_symbols_lookup(s, 0xfff));
        check(!monitor_symbols_lookup(s, 0x3000));
        check(!monitor_symbols_module(s, 0));
        monitor_symbols_free(s);
}

static void test_sessions_the_agent_asks_for(void) {
        EventPipeConfig c = EVENTPIPE_CONFIG_NULL;
        char *text;

        check(monitor_stacks_config(&c) == 0 && c.rundown && c.n_providers == 1);
        check(strcmp(c.providers[0].name, "Microsoft-DotNETCore-SampleProfiler") == 0);
        eventpipe_config_done(&c);
        check(monitor_exceptions_config(&c) == 0 && c.rundown && c.n_providers == 1);
        check(c.providers[0].keywords == 0x8000 && c.providers[0].level == 4);
        eventpipe_config_done(&c);

        check(monitor_logs_config(_MONITOR_LOG_LEVEL_INVALID, NULL, &c) == 0 && !c.rundown);
        text = eventpipe_config_to_string(&c);
        check(text && strcmp(text, "Microsoft-Extensions-Logging:0x4:5:FilterSpecs=UseAppFilters,"
                                   "System.Threading.Tasks.TplEventSource:0x80:4") == 0);
        free(text);
        eventpipe_config_done(&c);
        check(monitor_logs_config(MONITOR_LOG_WARNING, NULL, &c) == 0);
        check(strcmp(c.providers[0].arguments, "FilterSpecs=*:Warning") == 0);
        eventpipe_config_done(&c);
        check(monitor_logs_config(MONITOR_LOG_ERROR, "Orders.Api", &c) == 0);
        check(strcmp(c.providers[0].arguments, "FilterSpecs=Orders.Api*:Error") == 0);
        eventpipe_config_done(&c);
        check(monitor_logs_config(_MONITOR_LOG_LEVEL_INVALID, "Orders", &c) == 0);
        check(strcmp(c.providers[0].arguments, "FilterSpecs=Orders*") == 0);
        eventpipe_config_done(&c);
        /* what would change the filter's syntax never reaches it */
        check(monitor_logs_config(MONITOR_LOG_NONE, NULL, &c) == EVENTPIPE_E_SYNTAX);
        check(monitor_logs_config(MONITOR_LOG_ERROR, "A;B:Trace", &c) == EVENTPIPE_E_SYNTAX);

        check(monitor_log_level_from_string("warning") == MONITOR_LOG_WARNING);
        check(monitor_log_level_from_string("Critical") == MONITOR_LOG_CRITICAL);
        check(monitor_log_level_from_string("None") == _MONITOR_LOG_LEVEL_INVALID);
        check(monitor_log_level_from_string("Info") == _MONITOR_LOG_LEVEL_INVALID);
        check(monitor_category_is_valid("Microsoft.AspNetCore.Hosting"));
        check(monitor_category_is_valid("Outer+Inner<T>"));
        for (const char *bad = "; :*=\"'\\"; *bad; bad++) {
                char name[4] = { 'A', *bad, 'B', 0 };
                check(!monitor_category_is_valid(name));
        }
        check(!monitor_category_is_valid(""));
        check(!monitor_category_is_valid("caf\xc3\xa9"));
}

int main(void) {
        run_test(test_stacks_are_named_by_the_rundown);
        run_test(test_stacks_past_the_callers_bound_are_dropped);
        run_test(test_exceptions);
        run_test(test_logs_and_their_scopes);
        run_test(test_symbols);
        run_test(test_sessions_the_agent_asks_for);
        return tap_finish();
}

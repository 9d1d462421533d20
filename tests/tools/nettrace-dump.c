/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * nettrace-dump FILE [PROVIDER [--stacks]]: what eventpipe/nettrace.c reads in
 * a trace, as JSON lines: one per event (of PROVIDER, when given; "" for all)
 * with its decoded payload, then a summary line {"summary": ...} with the
 * parser's verdict. --stacks adds each event's thread, activity id and stack.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eventpipe/nettrace.h"

typedef struct Dump {
        const char *provider;
        bool stacks;
        unsigned long long events, shown;
} Dump;

static void print_string(const char *s) {
        putchar('"');
        for (const unsigned char *p = (const unsigned char *)s; *p; p++)
                if (*p == '"' || *p == '\\')
                        printf("\\%c", *p);
                else if (*p < 0x20)
                        printf("\\u%04x", *p);
                else
                        putchar(*p);
        putchar('"');
}

static void print_value(const NettraceValue *v) {
        switch (v->type) {
        case NETTRACE_TYPE_STRING:
                print_string(v->string ? v->string : "");
                break;
        case NETTRACE_TYPE_SINGLE:
        case NETTRACE_TYPE_DOUBLE:
                printf("%.17g", v->d);
                break;
        case NETTRACE_TYPE_SBYTE:
        case NETTRACE_TYPE_INT16:
        case NETTRACE_TYPE_INT32:
        case NETTRACE_TYPE_INT64:
        case NETTRACE_TYPE_BOOLEAN:
                printf("%lld", (long long)v->i);
                break;
        case NETTRACE_TYPE_OBJECT:
        case NETTRACE_TYPE_ARRAY:
                printf("%s", v->type == NETTRACE_TYPE_OBJECT ? "{" : "[");
                for (size_t i = 0; i < v->n_items; i++) {
                        if (i > 0)
                                putchar(',');
                        if (v->type == NETTRACE_TYPE_OBJECT) {
                                print_string(v->items[i].name ? v->items[i].name : "");
                                putchar(':');
                        }
                        print_value(&v->items[i]);
                }
                printf("%s", v->type == NETTRACE_TYPE_OBJECT ? "}" : "]");
                break;
        default:
                printf("%llu", (unsigned long long)v->u);
                break;
        }
}

static int on_event(const NettraceEvent *e, void *userdata) {
        Dump *d = userdata;
        NettraceValue *values = NULL;
        size_t n = 0;

        d->events++;
        if (!e->metadata || (d->provider && *d->provider && strcmp(e->metadata->provider, d->provider) != 0))
                return 0;
        d->shown++;
        printf("{\"provider\":");
        print_string(e->metadata->provider);
        printf(",\"event\":");
        print_string(e->metadata->event_name);
        printf(",\"id\":%u", e->metadata->event_id);
        if (d->stacks) {
                printf(",\"thread\":%llu,\"activity\":\"", (unsigned long long)e->thread_id);
                for (size_t i = 0; i < 16; i++)
                        printf("%02x", e->activity_id[i]);
                printf("\",\"related\":\"");
                for (size_t i = 0; i < 16; i++)
                        printf("%02x", e->related_activity_id[i]);
                printf("\",\"stack_id\":%u,\"stack\":[", e->stack_id);
                for (size_t i = 0; i < e->stack_depth; i++)
                        printf("%s\"0x%llx\"", i > 0 ? "," : "", (unsigned long long)e->stack[i]);
                printf("]");
        }
        printf(",\"payload\":");
        if (nettrace_payload_decode(e->metadata, e->payload, e->payload_size, &values, &n) == 0) {
                putchar('{');
                for (size_t i = 0; i < n; i++) {
                        if (i > 0)
                                putchar(',');
                        print_string(values[i].name ? values[i].name : "");
                        putchar(':');
                        print_value(&values[i]);
                }
                putchar('}');
                nettrace_values_free(values, n);
        } else
                printf("null");
        printf("}\n");
        return 0;
}

int main(int argc, char **argv) {
        NettraceCallbacks callbacks = { .event = on_event };
        Dump d = { .provider = argc > 2 ? argv[2] : NULL, .stacks = argc > 3 && strcmp(argv[3], "--stacks") == 0 };
        NettraceParser *p = NULL;
        char buf[65536];
        size_t n;
        int r = 0;
        FILE *f;

        if (argc < 2 || argc > 4 || (argc == 4 && !d.stacks)) {
                fprintf(stderr, "usage: nettrace-dump FILE [PROVIDER [--stacks]]\n");
                return 2;
        }
        callbacks.stacks = d.stacks;
        f = fopen(argv[1], "re");
        if (!f || nettrace_parser_new(&callbacks, &d, &p) < 0) {
                fprintf(stderr, "nettrace-dump: %s: %s\n", argv[1], strerror(errno));
                return 1;
        }
        while (r == 0 && (n = fread(buf, 1, sizeof(buf), f)) > 0)
                r = nettrace_feed(p, buf, n);
        if (r == 0)
                r = nettrace_finish(p);
        printf("{\"summary\":{\"complete\":%s,\"error\":%d,\"events\":%llu,\"shown\":%llu}}\n", r == 0 ? "true" : "false",
               r, d.events, d.shown);
        nettrace_parser_free(p);
        fclose(f);
        return r == 0 ? 0 : 1;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A CPU profile as an interactive SVG flame graph (flame-svg.h); pure: writes to the FILE it is given */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/param.h>

#include "common/cleanup.h"
#include "eventpipe/flame-svg.h"
#include "eventpipe/hash-map.h"
#include "common/text.h"

#define MARGIN 10                /* pixels left and right of the frames */
#define FRAME_HEIGHT 16          /* pixels a stack level takes */
#define HEADER_HEIGHT 56         /* title, subtitle, buttons */
#define FOOTER_HEIGHT 28         /* the details line */
#define LABEL_CHAR_PX 7.0           /* Verdana at 12 px, on average: a label holds (width / LABEL_CHAR_PX) characters */
#define MIN_WIDTH_PX 0.1         /* narrower frames are left out */

/* A frame of the merged tree: one name on one path from the root. */
typedef struct Node {
        uint32_t parent;
        uint32_t frame;          /* the profile's; UINT32_MAX for the root */
        double ms;               /* CPU time in it and in what it called */
        uint64_t samples;
        double x;                /* where it begins: ms from the left of its root */
        uint32_t depth;
        uint32_t first_child;    /* into Tree.children */
        uint32_t n_children;
} Node;

typedef struct Tree {
        const CpuProfile *profile;
        U64Map index;            /* (parent << 32 | frame) to node */
        Node *nodes;
        size_t n_nodes, cap_nodes;
        uint32_t *children;      /* each node's children, in order of their names */
} Tree;

static int child_of(Tree *t, uint32_t parent, uint32_t frame, uint32_t *ret) {
        uint64_t key = (uint64_t)parent << 32 | frame;
        uint32_t i = u64map_get(&t->index, key);
        int r;

        if (i == UINT32_MAX) {
                Node *grown;

                if (t->n_nodes >= t->cap_nodes) {
                        size_t cap = t->cap_nodes ? t->cap_nodes * 2 : 256;
                        grown = reallocarray(t->nodes, cap, sizeof(Node));
                        if (!grown)
                                return -ENOMEM;
                        t->nodes = grown;
                        t->cap_nodes = cap;
                }
                r = u64map_put(&t->index, key, (uint32_t)t->n_nodes, false);
                if (r < 0)
                        return r;
                i = (uint32_t)t->n_nodes++;
                t->nodes[i] = (Node){ .parent = parent, .frame = frame, .depth = t->nodes[parent].depth + 1 };
        }
        *ret = i;
        return 0;
}

/* Every thread's CPU samples, summed along their stacks from the root. */
static int tree_build(Tree *t) {
        _cleanup_free_ uint32_t *frames = malloc(CPU_PROFILE_DEPTH_MAX * sizeof(uint32_t));
        const CpuProfile *p = t->profile;

        if (!frames)
                return -ENOMEM;
        t->nodes = calloc(256, sizeof(Node));
        if (!t->nodes)
                return -ENOMEM;
        t->cap_nodes = 256;
        t->n_nodes = 1;
        t->nodes[0] = (Node){ .frame = UINT32_MAX };
        for (size_t i = 0; i < cpu_profile_totals(p); i++) {
                const CpuTotal *total = cpu_profile_total(p, i);
                double ms = total->ms[CPU_SAMPLE_CPU];
                uint64_t samples = total->samples[CPU_SAMPLE_CPU];
                size_t depth;
                uint32_t node = 0;

                if (samples == 0)
                        continue;
                depth = cpu_profile_stack(p, total->node, frames);
                t->nodes[0].ms += ms;
                t->nodes[0].samples += samples;
                for (size_t d = 0; d < depth; d++) {
                        int r = child_of(t, node, frames[d], &node);

                        if (r < 0)
                                return r;
                        t->nodes[node].ms += ms;
                        t->nodes[node].samples += samples;
                }
        }
        return 0;
}

static int children_compare(const void *a, const void *b, void *userdata) {
        const Tree *t = userdata;
        const Node *x = &t->nodes[*(const uint32_t *)a], *y = &t->nodes[*(const uint32_t *)b];

        return strcmp(cpu_profile_frame_name(t->profile, x->frame), cpu_profile_frame_name(t->profile, y->frame));
}

/* Each node's children in order of their names, and where each begins. Parents come before their children
 * (a child is made after its parent), so one pass in index order lays out the tree. */
static int tree_layout(Tree *t) {
        uint32_t *next = calloc(t->n_nodes + 1, sizeof(uint32_t));

        t->children = calloc(t->n_nodes + 1, sizeof(uint32_t));
        if (!next || !t->children) {
                free(next);
                return -ENOMEM;
        }
        for (size_t i = 1; i < t->n_nodes; i++)
                t->nodes[t->nodes[i].parent].n_children++;
        for (size_t i = 0, at = 0; i < t->n_nodes; i++) {
                t->nodes[i].first_child = (uint32_t)at;
                next[i] = (uint32_t)at;
                at += t->nodes[i].n_children;
        }
        for (size_t i = 1; i < t->n_nodes; i++)
                t->children[next[t->nodes[i].parent]++] = (uint32_t)i;
        free(next);
        for (size_t i = 0; i < t->n_nodes; i++) {
                Node *n = &t->nodes[i];
                double x = n->x;

                qsort_r(t->children + n->first_child, n->n_children, sizeof(uint32_t), children_compare, t);
                for (uint32_t c = 0; c < n->n_children; c++) {
                        Node *child = &t->nodes[t->children[n->first_child + c]];
                        child->x = x;
                        x += child->ms;
                }
        }
        return 0;
}

static int ms_descending(const void *a, const void *b) {
        double x = *(const double *)a, y = *(const double *)b;

        return x > y ? -1 : x < y;
}

/* Which frames are drawn: at least @min ms wide (more than @min when @strict), and the root. */
typedef struct Cut {
        double min;
        bool strict;
} Cut;

static bool is_drawn(const Tree *t, size_t i, const Cut *cut) {
        return i == 0 || (cut->strict ? t->nodes[i].ms > cut->min : t->nodes[i].ms >= cut->min);
}

/* The narrowest a drawn frame may be, in ms: a tenth of a pixel, or wider when more than FLAME_FRAMES_MAX
 * would be drawn (a child is never wider than its parent, so what is drawn stays one tree). */
static int min_drawn_ms(const Tree *t, Cut *ret) {
        double total = t->nodes[0].ms, min = total * MIN_WIDTH_PX / (FLAME_WIDTH - 2 * MARGIN);
        _cleanup_free_ double *widths = NULL;
        size_t n = 0;

        for (size_t i = 0; i < t->n_nodes; i++)
                n += t->nodes[i].ms >= min;
        if (n > FLAME_FRAMES_MAX) {
                widths = malloc(n * sizeof(double));
                if (!widths)
                        return -ENOMEM;
                n = 0;
                for (size_t i = 0; i < t->n_nodes; i++)
                        if (t->nodes[i].ms >= min)
                                widths[n++] = t->nodes[i].ms;
                qsort(widths, n, sizeof(double), ms_descending);
                /* strictly wider than the first left out: ties at the edge go too */
                *ret = (Cut){ .min = widths[FLAME_FRAMES_MAX], .strict = true };
                return 0;
        }
        *ret = (Cut){ .min = min };
        return 0;
}

/* The hot palette of flame graphs, each name its own shade (FNV-1a): reds, oranges and yellows. */
static void frame_color(const char *name, bool unknown, char *buf, size_t size) {
        uint32_t h = 2166136261u;

        for (const char *s = name; *s; s++)
                h = (h ^ (uint8_t)*s) * 16777619u;
        if (unknown) {
                snprintf(buf, size, "rgb(%u,%u,%u)", 180 + (h & 31), 180 + (h & 31), 180 + (h & 31));
                return;
        }
        snprintf(buf, size, "rgb(%u,%u,%u)", 205 + (h % 51), (h >> 8) % 231, (h >> 16) % 56);
}

/* The label a frame of @width pixels shows: its name, or as much of it as fits and "..". */
static void write_label(FILE *f, const char *name, double width) {
        size_t fits = (size_t)(width / LABEL_CHAR_PX), chars = 0, cut = 0, n = strlen(name);

        if (fits < 3)
                return;
        /* characters, not bytes: a name is cut between two of them */
        for (size_t i = 0; i < n; i += MAX(utf8_char_length(name + i), (size_t)1)) {
                if (chars == fits - 2)
                        cut = i;
                chars++;
        }
        if (chars <= fits) {
                text_xml(f, name, n);
                return;
        }
        text_xml(f, name, cut);
        fputs("..", f);
}

static void write_frame(FILE *f, const Tree *t, const Node *n, double scale, int height) {
        const char *name = n->frame == UINT32_MAX ? "all" : cpu_profile_frame_name(t->profile, n->frame);
        double total = t->nodes[0].ms, x = MARGIN + n->x * scale, width = n->ms * scale;
        int y = height - FOOTER_HEIGHT - (int)(n->depth + 1) * FRAME_HEIGHT;
        char color[32];

        frame_color(name, strcmp(name, "?!?") == 0, color, sizeof(color));
        fputs("<g class=\"f\" data-n=\"", f);
        text_xml(f, name, strlen(name));
        fprintf(f, "\" data-ms=\"%.6f\" data-s=\"%" PRIu64 "\" data-x=\"%.6f\" data-d=\"%" PRIu32 "\"><title>", n->ms,
                n->samples, n->x, n->depth);
        text_xml(f, name, strlen(name));
        fprintf(f, " (%.2f ms, %" PRIu64 " samples, %.2f%%)</title>", n->ms, n->samples, total > 0 ? 100 * n->ms / total : 0);
        fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\" rx=\"2\" ry=\"2\"/>", x, y, width,
                FRAME_HEIGHT - 1, color);
        fprintf(f, "<text x=\"%.2f\" y=\"%d\">", x + 3, y + FRAME_HEIGHT - 4);
        write_label(f, name, width - 6);
        fputs("</text></g>\n", f);
}

/*
 * The viewer: zoom, search, details. It reads names from the frames' data-n attributes and writes
 * them back with textContent only; nothing of a name is ever parsed as markup or code.
 */
static const char script[] =
        "(function () {\n"
        "\"use strict\";\n"
        "var svg = document.documentElement, NS = \"http://www.w3.org/2000/svg\";\n"
        "var X0 = 10, W = +svg.getAttribute(\"width\") - 20, CW = 7;\n"
        "var total = +svg.getAttribute(\"data-total-ms\");\n"
        "var details = document.getElementById(\"details\"), matched = document.getElementById(\"matched\");\n"
        "var reset = document.getElementById(\"reset\"), search = document.getElementById(\"search\");\n"
        "var frames = [], groups = document.getElementById(\"frames\").getElementsByTagName(\"g\");\n"
        "for (var i = 0; i < groups.length; i++) {\n"
        "  var g = groups[i];\n"
        "  frames.push({ g: g, rect: g.getElementsByTagName(\"rect\")[0], text: g.getElementsByTagName(\"text\")[0],\n"
        "    name: g.getAttribute(\"data-n\"), ms: +g.getAttribute(\"data-ms\"), s: +g.getAttribute(\"data-s\"),\n"
        "    x: +g.getAttribute(\"data-x\"), d: +g.getAttribute(\"data-d\") });\n"
        "  g.flame = frames[frames.length - 1];\n"
        "  frames[frames.length - 1].fill = frames[frames.length - 1].rect.getAttribute(\"fill\");\n"
        "}\n"
        "function label(f, width) {\n"
        "  var fits = Math.floor((width - 6) / CW), chars = Array.from(f.name);\n"
        "  f.text.textContent = fits < 3 ? \"\" : chars.length <= fits ? f.name : chars.slice(0, fits - 2).join(\"\") + \"..\";\n"
        "}\n"
        "function place(f, x, width) {\n"
        "  f.rect.setAttribute(\"x\", x.toFixed(2));\n"
        "  f.rect.setAttribute(\"width\", Math.max(width, 0).toFixed(2));\n"
        "  f.text.setAttribute(\"x\", (x + 3).toFixed(2));\n"
        "  label(f, width);\n"
        "}\n"
        "function pct(ms) { return total > 0 ? (100 * ms / total).toFixed(2) : \"0.00\"; }\n"
        "function zoom(z) {\n"
        "  var eps = z.ms * 1e-9;\n"
        "  frames.forEach(function (f) {\n"
        "    var inside = f.d >= z.d && f.x >= z.x - eps && f.x + f.ms <= z.x + z.ms + eps;\n"
        "    var below = f.d < z.d && f.x <= z.x + eps && f.x + f.ms >= z.x + z.ms - eps;\n"
        "    f.g.classList.toggle(\"hide\", !inside && !below);\n"
        "    f.g.classList.toggle(\"parent\", below);\n"
        "    if (inside) place(f, X0 + (f.x - z.x) / z.ms * W, f.ms / z.ms * W);\n"
        "    else if (below) place(f, X0, W);\n"
        "  });\n"
        "  reset.classList.remove(\"hide\");\n"
        "}\n"
        "function unzoom() {\n"
        "  frames.forEach(function (f) {\n"
        "    f.g.classList.remove(\"hide\", \"parent\");\n"
        "    place(f, X0 + f.x / total * W, f.ms / total * W);\n"
        "  });\n"
        "  reset.classList.add(\"hide\");\n"
        "}\n"
        "function clearSearch() {\n"
        "  frames.forEach(function (f) { f.rect.setAttribute(\"fill\", f.fill); });\n"
        "  matched.textContent = \"\";\n"
        "  search.textContent = \"Search\";\n"
        "}\n"
        "function find(term) {\n"
        "  var test, re, m = [], sum = 0, end = -1;\n"
        "  if (term.length > 2 && term[0] === \"/\" && term[term.length - 1] === \"/\") {\n"
        "    try { re = new RegExp(term.slice(1, -1)); } catch (e) { matched.textContent = \"Bad regular expression\"; return; }\n"
        "    test = function (s) { return re.test(s); };\n"
        "  } else {\n"
        "    var lower = term.toLowerCase();\n"
        "    test = function (s) { return s.toLowerCase().indexOf(lower) >= 0; };\n"
        "  }\n"
        "  clearSearch();\n"
        "  frames.forEach(function (f) { if (test(f.name)) { f.rect.setAttribute(\"fill\", \"rgb(230,0,230)\"); m.push(f); } });\n"
        "  /* each stretch of time once: a match inside another is already counted */\n"
        "  m.sort(function (a, b) { return a.x - b.x || b.ms - a.ms; });\n"
        "  m.forEach(function (f) { if (f.x >= end) { sum += f.ms; end = f.x + f.ms; } });\n"
        "  matched.textContent = \"Matched: \" + pct(sum) + \"% (\" + m.length + \" frames)\";\n"
        "  search.textContent = \"Clear search\";\n"
        "}\n"
        "function ask() {\n"
        "  if (search.textContent !== \"Search\") { clearSearch(); return; }\n"
        "  var term = window.prompt(\"Search the frames' names (text, or /regular expression/):\", \"\");\n"
        "  if (term) find(term);\n"
        "}\n"
        "function frameOf(node) {\n"
        "  while (node && node !== svg && !(node.flame)) node = node.parentNode;\n"
        "  return node && node.flame;\n"
        "}\n"
        "svg.addEventListener(\"mouseover\", function (e) {\n"
        "  var f = frameOf(e.target);\n"
        "  if (f) details.textContent = f.name + \": \" + f.ms.toFixed(2) + \" ms, \" + f.s + \" samples, \" + pct(f.ms) + \"%\";\n"
        "});\n"
        "svg.addEventListener(\"mouseout\", function (e) { if (frameOf(e.target)) details.textContent = \"\"; });\n"
        "svg.addEventListener(\"click\", function (e) {\n"
        "  var f = frameOf(e.target);\n"
        "  if (f) zoom(f);\n"
        "  else if (e.target === reset) unzoom();\n"
        "  else if (e.target === search) ask();\n"
        "});\n"
        "window.addEventListener(\"keydown\", function (e) {\n"
        "  if ((e.ctrlKey || e.metaKey) && e.key === \"f\") { e.preventDefault(); clearSearch(); ask(); }\n"
        "  else if (e.key === \"Escape\") { unzoom(); clearSearch(); }\n"
        "});\n"
        "unzoom();\n"
        "svg.setAttribute(\"data-viewer\", \"ready\");\n"
        "})();\n";

static void write_head(FILE *f, const CpuProfile *p, const FlameOptions *o, const Tree *t, int height,
                       size_t drawn, size_t left_out) {
        char pid[32];

        fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
                   "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                   "viewBox=\"0 0 %d %d\" data-total-ms=\"%.6f\" data-frames=\"%zu\" data-left-out=\"%zu\">\n",
                FLAME_WIDTH, height, FLAME_WIDTH, height, t->nodes[0].ms, drawn, left_out);
        fputs("<style>\n"
              "text { font-family: Verdana, \"DejaVu Sans\", sans-serif; font-size: 12px; fill: rgb(0,0,0); }\n"
              "#title { font-size: 17px; } #subtitle, #details, #matched { font-size: 12px; fill: rgb(60,60,60); }\n"
              ".f text { pointer-events: none; } .f:hover rect { stroke: rgb(0,0,0); stroke-width: 0.5; cursor: pointer; }\n"
              ".parent { opacity: 0.55; } .hide { display: none; }\n"
              ".button { fill: rgb(40,40,160); cursor: pointer; } .button:hover { text-decoration: underline; }\n"
              "</style>\n", f);
        fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"rgb(250,248,238)\"/>\n", FLAME_WIDTH, height);
        fprintf(f, "<text id=\"title\" x=\"%d\" y=\"24\" text-anchor=\"middle\">", FLAME_WIDTH / 2);
        if (o->title)
                text_xml(f, o->title, strlen(o->title));
        else {
                snprintf(pid, sizeof(pid), " (pid %" PRIu32 ")", cpu_profile_pid(p));
                fputs("CPU flame graph: ", f);
                text_xml(f, cpu_profile_process_name(p), strlen(cpu_profile_process_name(p)));
                fputs(pid, f);
        }
        fprintf(f, "</text>\n<text id=\"subtitle\" x=\"%d\" y=\"42\" text-anchor=\"middle\">", FLAME_WIDTH / 2);
        if (o->subtitle)
                text_xml(f, o->subtitle, strlen(o->subtitle));
        else {
                const uint16_t *w = cpu_profile_nettrace_header(p)->sync_time; /* SYSTEMTIME, UTC */

                fprintf(f, "%04u-%02u-%02u %02u:%02u:%02u UTC, %.1f s sampled", w[0] % 10000u, w[1] % 100u,
                        w[3] % 100u, w[4] % 100u, w[5] % 100u, w[6] % 100u, cpu_profile_duration_ms(p) / 1000);
        }
        fprintf(f, ": %.1f ms of CPU time in %" PRIu64 " samples, all threads merged%s", t->nodes[0].ms,
                t->nodes[0].samples, t->nodes[0].samples == 0 ? " (no thread ran managed code)" : "");
        if (left_out > 0)
                fprintf(f, "; %zu frames too narrow to draw left out", left_out);
        fputs("</text>\n", f);
        fprintf(f, "<text id=\"reset\" class=\"button hide\" x=\"%d\" y=\"24\">Reset zoom</text>\n", MARGIN);
        fprintf(f, "<text id=\"search\" class=\"button\" x=\"%d\" y=\"24\" text-anchor=\"end\">Search</text>\n",
                FLAME_WIDTH - MARGIN);
        fprintf(f, "<text id=\"details\" x=\"%d\" y=\"%d\"></text>\n", MARGIN, height - 10);
        fprintf(f, "<text id=\"matched\" x=\"%d\" y=\"%d\" text-anchor=\"end\"></text>\n", FLAME_WIDTH - MARGIN,
                height - 10);
}

int flame_svg_write(const CpuProfile *p, const FlameOptions *o, FILE *f) {
        Tree t = { .profile = p, .index = { .seed = 0x5eed } };
        double scale;
        Cut cut;
        uint32_t max_depth = 0;
        size_t drawn = 0;
        int height, r;

        r = tree_build(&t);
        if (r == 0)
                r = tree_layout(&t);
        if (r == 0)
                r = min_drawn_ms(&t, &cut);
        if (r < 0)
                goto done;
        for (size_t i = 0; i < t.n_nodes; i++)
                if (is_drawn(&t, i, &cut)) {
                        drawn++;
                        max_depth = MAX(max_depth, t.nodes[i].depth);
                }
        height = HEADER_HEIGHT + (int)(max_depth + 1) * FRAME_HEIGHT + FOOTER_HEIGHT;
        scale = t.nodes[0].ms > 0 ? (FLAME_WIDTH - 2 * MARGIN) / t.nodes[0].ms : 0;
        write_head(f, p, o, &t, height, drawn, t.n_nodes - drawn);
        fputs("<g id=\"frames\">\n", f);
        /* the root is drawn even without samples: the graph says it is empty rather than show nothing */
        for (size_t i = 0; i < t.n_nodes; i++)
                if (is_drawn(&t, i, &cut))
                        write_frame(f, &t, &t.nodes[i], scale, height);
        fputs("</g>\n<script type=\"text/ecmascript\"><![CDATA[\n", f);
        fputs(script, f);
        fputs("]]></script>\n</svg>\n", f);
        if (fflush(f) != 0 || ferror(f))
                r = -EIO;
done:
        u64map_done(&t.index);
        free(t.nodes);
        free(t.children);
        return r;
}

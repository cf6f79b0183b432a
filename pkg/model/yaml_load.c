/* YAML event stream to jansson trees (see yaml_internal.h). No recursion:
 * an explicit stack of open containers keeps deep input from blowing the C
 * stack. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include <svcenv/alloc.h>
#include <svcenv/manifest.h>
#include <svcenv/yaml.h>

#include "yaml_internal.h"

/* Node budget for one stream, counting alias expansions (alias bombs). */
#define MAX_EXPANDED_NODES 10000000ull

/* ---- line map: pointer -> line, open addressing ---- */

struct linemap {
        const json_t **keys;
        unsigned *lines;
        size_t cap, n;
};

struct linemap *model_linemap_new(void)
{
        return se_calloc(1, sizeof(struct linemap));
}

struct linemap *model_linemap_free(struct linemap *lm)
{
        if (lm) {
                free(lm->keys);
                free(lm->lines);
                free(lm);
        }
        return NULL;
}

static size_t ptr_hash(const void *p)
{
        uint64_t h = (uint64_t)(uintptr_t)p;
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdULL;
        h ^= h >> 33;
        return (size_t)h;
}

static int linemap_put(struct linemap *lm, const json_t *node, unsigned line)
{
        if ((lm->n + 1) * 2 > lm->cap) {
                size_t cap = lm->cap ? lm->cap * 2 : 64;
                const json_t **keys = se_calloc(cap, sizeof(*keys));
                unsigned *lines = se_calloc(cap, sizeof(*lines));
                if (!keys || !lines) {
                        free(keys);
                        free(lines);
                        return -ENOMEM;
                }
                for (size_t i = 0; i < lm->cap; i++) {
                        if (!lm->keys[i])
                                continue;
                        size_t j = ptr_hash(lm->keys[i]) & (cap - 1);
                        while (keys[j])
                                j = (j + 1) & (cap - 1);
                        keys[j] = lm->keys[i];
                        lines[j] = lm->lines[i];
                }
                free(lm->keys);
                free(lm->lines);
                lm->keys = keys;
                lm->lines = lines;
                lm->cap = cap;
        }
        size_t j = ptr_hash(node) & (lm->cap - 1);
        while (lm->keys[j] && lm->keys[j] != node)
                j = (j + 1) & (lm->cap - 1);
        if (!lm->keys[j]) {
                lm->keys[j] = node;
                lm->n++;
        }
        /* the latest node at an address wins: key scalars are freed and their
         * memory reused (aliases never come through here) */
        lm->lines[j] = line;
        return 0;
}

unsigned model_linemap_get(const struct linemap *lm, const json_t *node)
{
        if (!lm || !lm->cap || !node)
                return 0;
        size_t j = ptr_hash(node) & (lm->cap - 1);
        while (lm->keys[j]) {
                if (lm->keys[j] == node)
                        return lm->lines[j];
                j = (j + 1) & (lm->cap - 1);
        }
        return 0;
}

void model_yaml_docs_release(struct yaml_docs *d)
{
        for (size_t i = 0; i < d->n; i++)
                json_decref(d->docs[i]);
        free(d->docs);
        free(d->lines);
        d->docs = NULL;
        d->lines = NULL;
        d->n = 0;
}

/* ---- scalar resolution (YAML 1.1 as Kubernetes' reader does it) ---- */

static bool is_one_of(const char *s, const char *const *list)
{
        for (size_t i = 0; list[i]; i++)
                if (strcmp(s, list[i]) == 0)
                        return true;
        return false;
}

/* Integer forms: [-+]? then 0x.., 0b.., 0[0-7]+ (octal) or decimal; '_' allowed. */
static bool parse_yaml_int(const char *s, json_int_t *ret)
{
        char buf[80];
        size_t o = 0;
        for (const char *p = s; *p; p++) {
                if (*p == '_')
                        continue;
                if (o + 1 >= sizeof(buf))
                        return false;
                buf[o++] = *p;
        }
        buf[o] = '\0';
        const char *p = buf;
        bool neg = false;
        if (*p == '-' || *p == '+')
                neg = *p++ == '-';
        if (!*p)
                return false;
        int base = 10;
        if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
                base = 16;
                p += 2;
        } else if (p[0] == '0' && p[1] == 'b') {
                base = 2;
                p += 2;
        } else if (p[0] == '0' && p[1]) {
                base = 8;
                p += 1;
        }
        if (!*p)
                return false;
        uint64_t v = 0;
        for (; *p; p++) {
                int digit;
                if (*p >= '0' && *p <= '9')
                        digit = *p - '0';
                else if (*p >= 'a' && *p <= 'f')
                        digit = *p - 'a' + 10;
                else if (*p >= 'A' && *p <= 'F')
                        digit = *p - 'A' + 10;
                else
                        return false;
                if (digit >= base)
                        return false;
                if (v > (UINT64_MAX - (uint64_t)digit) / (uint64_t)base)
                        return false;
                v = v * (uint64_t)base + (uint64_t)digit;
        }
        if ((!neg && v > (uint64_t)INT64_MAX) || (neg && v > (uint64_t)INT64_MAX + 1))
                return false;
        *ret = neg ? (json_int_t)(0 - v) : (json_int_t)v;
        return true;
}

static bool parse_yaml_float(const char *s, double *ret)
{
        static const char *const inf[] = {
                ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", NULL
        };
        static const char *const ninf[] = { "-.inf", "-.Inf", "-.INF", NULL };
        static const char *const nan_[] = { ".nan", ".NaN", ".NAN", NULL };
        if (is_one_of(s, inf) || is_one_of(s, ninf) || is_one_of(s, nan_))
                return false; /* JSON cannot hold them; keep the text */
        const char *p = s;
        if (*p == '-' || *p == '+')
                p++;
        bool digits = false, dot = false;
        for (; *p && *p != 'e' && *p != 'E'; p++) {
                if (*p >= '0' && *p <= '9')
                        digits = true;
                else if (*p == '.' && !dot)
                        dot = true;
                else if (*p != '_')
                        return false;
        }
        if (!digits || (!dot && !*p))
                return false;
        if (*p) {
                p++;
                if (*p == '-' || *p == '+')
                        p++;
                if (!*p)
                        return false;
                for (; *p; p++)
                        if (*p < '0' || *p > '9')
                                return false;
        }
        char *end;
        double v = strtod(s, &end);
        if (*end || !isfinite(v))
                return false;
        *ret = v;
        return true;
}

static json_t *resolve_scalar(const yaml_event_t *ev)
{
        const char *s = (const char *)ev->data.scalar.value;
        size_t len = ev->data.scalar.length;
        const char *tag = (const char *)ev->data.scalar.tag;
        bool plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
        if (tag && strcmp(tag, "tag:yaml.org,2002:str") == 0)
                return json_stringn(s, len);
        if (tag && strcmp(tag, "tag:yaml.org,2002:null") == 0)
                return json_null();
        if (!plain && !(tag && strncmp(tag, "tag:yaml.org,2002:", 18) == 0))
                return json_stringn(s, len);
        if (strlen(s) != len)
                return json_stringn(s, len);
        static const char *const nulls[] = { "", "~", "null", "Null", "NULL", NULL };
        static const char *const trues[] = { "y",    "Y",    "yes", "Yes", "YES", "true",
                                             "True", "TRUE", "on",  "On",  "ON",  NULL };
        static const char *const falses[] = { "n",     "N",     "no",  "No",  "NO",  "false",
                                              "False", "FALSE", "off", "Off", "OFF", NULL };
        if (is_one_of(s, nulls))
                return json_null();
        if (is_one_of(s, trues))
                return json_true();
        if (is_one_of(s, falses))
                return json_false();
        json_int_t i;
        if (parse_yaml_int(s, &i))
                return json_integer(i);
        double f;
        if (parse_yaml_float(s, &f))
                return json_real(f);
        return json_stringn(s, len);
}

/* ---- the builder ---- */

struct frame {
        json_t *node;
        json_t *merged; /* keys that came from `<<` and may be overridden */
        char *key; /* mapping: key waiting for its value */
        char *anchor; /* registered when the node ends (no cycles) */
        uint64_t nodes; /* nodes below, with alias expansions */
};

struct builder {
        struct frame stack[SE_MANIFEST_MAX_DEPTH + 1];
        int depth;
        json_t *anchors; /* name -> node */
        json_t *anchor_sizes;
        uint64_t total;
        struct linemap *lines;
        int line_depth;
        struct se_diag *diag;
        json_t *root;
        unsigned root_line;
};

static int fail(struct builder *b, const yaml_mark_t *m, const char *msg)
{
        se_diag_set(b->diag, NULL, (unsigned)m->line + 1, (unsigned)m->column + 1, "%s", msg);
        return -EINVAL;
}

/* Merges src (an object) into dst without overriding keys dst has. */
static int merge_into(struct frame *f, const json_t *src)
{
        const char *k;
        json_t *v;
        json_object_foreach(SE_UNCONST(json_t, src), k, v) {
                if (json_object_get(f->node, k))
                        continue;
                if (json_object_set(f->node, k, v) < 0)
                        return -ENOMEM;
                if (!f->merged && !(f->merged = json_object()))
                        return -ENOMEM;
                if (json_object_set_new(f->merged, k, json_true()) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* Adds a finished value to the open container (or makes it the root). */
static int add_value(struct builder *b, json_t *value, uint64_t nodes, const yaml_mark_t *m)
{
        b->total += nodes;
        if (b->total > MAX_EXPANDED_NODES) {
                json_decref(value);
                return fail(b, m, "document expands to too many nodes (alias expansion)");
        }
        if (b->depth == 0) {
                b->root = value;
                b->root_line = (unsigned)m->line + 1;
                return 0;
        }
        struct frame *f = &b->stack[b->depth - 1];
        f->nodes += nodes;
        if (json_is_array(f->node))
                return json_array_append_new(f->node, value) < 0 ? -ENOMEM : 0;
        /* mapping */
        if (!f->key) {
                /* this value is a key: scalars only */
                if (json_is_string(value)) {
                        f->key = se_strndup(json_string_value(value), json_string_length(value));
                } else if (json_is_integer(value)) {
                        char buf[32];
                        snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(value));
                        f->key = se_strdup(buf);
                } else if (json_is_boolean(value)) {
                        f->key = se_strdup(json_is_true(value) ? "true" : "false");
                } else if (json_is_null(value)) {
                        f->key = se_strdup("null");
                } else if (json_is_real(value)) {
                        char buf[64];
                        snprintf(buf, sizeof(buf), "%g", json_real_value(value));
                        f->key = se_strdup(buf);
                } else {
                        json_decref(value);
                        return fail(b, m, "a mapping key must be a scalar");
                }
                json_decref(value);
                return f->key ? 0 : -ENOMEM;
        }
        char *key = TAKE_PTR(f->key);
        int r = 0;
        if (strcmp(key, "<<") == 0 && (json_is_object(value) || json_is_array(value))) {
                if (json_is_object(value)) {
                        r = merge_into(f, value);
                } else {
                        size_t i;
                        json_t *item;
                        json_array_foreach(value, i, item) {
                                if (!json_is_object(item)) {
                                        r = fail(b, m, "a `<<` merge list may hold only mappings");
                                        break;
                                }
                                if ((r = merge_into(f, item)) < 0)
                                        break;
                        }
                }
                json_decref(value);
        } else if (json_object_get(f->node, key) &&
                   !(f->merged && json_object_get(f->merged, key))) {
                char msg[300];
                snprintf(msg, sizeof(msg), "duplicate key \"%.200s\"", key);
                json_decref(value);
                r = fail(b, m, msg);
        } else {
                if (f->merged)
                        json_object_del(f->merged, key);
                r = json_object_set_new(f->node, key, value) < 0 ? -ENOMEM : 0;
        }
        free(key);
        return r;
}

static int open_container(struct builder *b, json_t *node, const char *anchor, const yaml_mark_t *m)
{
        if (!node)
                return -ENOMEM;
        if (b->depth >= SE_MANIFEST_MAX_DEPTH) {
                json_decref(node);
                return fail(b, m, "nesting is deeper than 64 levels");
        }
        if (b->lines && (!b->line_depth || b->depth < b->line_depth) &&
            linemap_put(b->lines, node, (unsigned)m->line + 1) < 0) {
                json_decref(node);
                return -ENOMEM;
        }
        struct frame *f = &b->stack[b->depth++];
        memset(f, 0, sizeof(*f));
        f->node = node;
        if (anchor && !(f->anchor = se_strdup(anchor)))
                return -ENOMEM;
        return 0;
}

static int register_anchor(struct builder *b, const char *name, json_t *node, uint64_t nodes)
{
        if (json_object_set(b->anchors, name, node) < 0 ||
            json_object_set_new(b->anchor_sizes, name, json_integer((json_int_t)nodes)) < 0)
                return -ENOMEM;
        return 0;
}

static int close_container(struct builder *b, const yaml_mark_t *m)
{
        struct frame f = b->stack[--b->depth];
        int r = 0;
        if (f.key)
                r = fail(b, m, "mapping key without a value");
        if (r == 0 && f.anchor)
                r = register_anchor(b, f.anchor, f.node, f.nodes + 1);
        free(f.key);
        free(f.anchor);
        json_decref(f.merged);
        if (r < 0) {
                json_decref(f.node);
                return r;
        }
        return add_value(b, f.node, f.nodes + 1, m);
}

static int on_event(struct builder *b, const yaml_event_t *ev)
{
        const yaml_mark_t *m = &ev->start_mark;
        switch (ev->type) {
        case YAML_SCALAR_EVENT: {
                json_t *v = resolve_scalar(ev);
                if (!v)
                        return -ENOMEM;
                if (b->lines && !b->line_depth &&
                    linemap_put(b->lines, v, (unsigned)m->line + 1) < 0) {
                        json_decref(v);
                        return -ENOMEM;
                }
                if (ev->data.scalar.anchor) {
                        int r = register_anchor(b, (const char *)ev->data.scalar.anchor, v, 1);
                        if (r < 0) {
                                json_decref(v);
                                return r;
                        }
                }
                return add_value(b, v, 1, m);
        }
        case YAML_SEQUENCE_START_EVENT:
                return open_container(b, json_array(), (const char *)ev->data.sequence_start.anchor,
                                      m);
        case YAML_MAPPING_START_EVENT:
                return open_container(b, json_object(), (const char *)ev->data.mapping_start.anchor,
                                      m);
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
                return close_container(b, m);
        case YAML_ALIAS_EVENT: {
                const char *name = (const char *)ev->data.alias.anchor;
                json_t *v = json_object_get(b->anchors, name);
                if (!v) {
                        char msg[300];
                        snprintf(msg, sizeof(msg), "unknown anchor \"%.200s\"", name);
                        return fail(b, m, msg);
                }
                uint64_t n = (uint64_t)json_integer_value(json_object_get(b->anchor_sizes, name));
                return add_value(b, json_incref(v), n, m);
        }
        default:
                return 0;
        }
}

static int push_doc(struct yaml_docs *d, json_t *doc, unsigned line)
{
        json_t **docs = se_reallocarray(d->docs, d->n + 1, sizeof(*docs));
        if (!docs)
                return -ENOMEM;
        d->docs = docs;
        unsigned *lines = se_reallocarray(d->lines, d->n + 1, sizeof(*lines));
        if (!lines)
                return -ENOMEM;
        d->lines = lines;
        d->docs[d->n] = doc;
        d->lines[d->n] = line;
        d->n++;
        return 0;
}

static void builder_release(struct builder *b)
{
        while (b->depth > 0) {
                struct frame *f = &b->stack[--b->depth];
                json_decref(f->node);
                json_decref(f->merged);
                free(f->key);
                free(f->anchor);
        }
        json_decref(b->root);
        b->root = NULL;
        json_decref(b->anchors);
        json_decref(b->anchor_sizes);
}

int model_yaml_parse(const char *data, size_t len, struct linemap *lines, int line_depth,
                     struct yaml_docs *ret, struct se_diag *diag)
{
        struct yaml_docs out = { 0 };
        struct builder b = { .lines = lines, .line_depth = line_depth, .diag = diag };
        yaml_parser_t parser;
        int r = 0;
        if (!yaml_parser_initialize(&parser))
                return -ENOMEM;
        yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
        b.anchors = json_object();
        b.anchor_sizes = json_object();
        if (!b.anchors || !b.anchor_sizes)
                r = -ENOMEM;
        bool done = false;
        while (r == 0 && !done) {
                yaml_event_t ev;
                if (!yaml_parser_parse(&parser, &ev)) {
                        se_diag_set(diag, NULL, (unsigned)parser.problem_mark.line + 1,
                                    (unsigned)parser.problem_mark.column + 1, "%s%s%s",
                                    parser.problem ? parser.problem : "invalid YAML",
                                    parser.context ? " " : "",
                                    parser.context ? parser.context : "");
                        r = parser.error == YAML_MEMORY_ERROR ? -ENOMEM : -EINVAL;
                        break;
                }
                if (ev.type == YAML_STREAM_END_EVENT) {
                        done = true;
                } else if (ev.type == YAML_DOCUMENT_START_EVENT) {
                        /* anchors are scoped to their document */
                        json_object_clear(b.anchors);
                        json_object_clear(b.anchor_sizes);
                } else if (ev.type == YAML_DOCUMENT_END_EVENT) {
                        if (b.root && !json_is_null(b.root)) {
                                r = push_doc(&out, b.root, b.root_line);
                                if (r == 0)
                                        b.root = NULL;
                        }
                        json_decref(b.root);
                        b.root = NULL;
                } else {
                        r = on_event(&b, &ev);
                }
                yaml_event_delete(&ev);
        }
        yaml_parser_delete(&parser);
        builder_release(&b);
        if (r < 0) {
                model_yaml_docs_release(&out);
                return r;
        }
        *ret = out;
        return 0;
}

/* ---- path lookup for error lines ---- */

const json_t *model_json_find_path(const json_t *root, const char *path)
{
        const json_t *cur = root;
        const char *p = path;
        while (*p && cur) {
                if (*p == '.')
                        p++;
                if (*p == '[') {
                        char *end;
                        unsigned long i = strtoul(p + 1, &end, 10);
                        if (*end != ']' || !json_is_array(cur) || i >= json_array_size(cur))
                                return cur;
                        cur = json_array_get(cur, i);
                        p = end + 1;
                        continue;
                }
                if (!json_is_object(cur))
                        return cur;
                /* the longest key that matches up to a separator */
                const char *k;
                json_t *v;
                const json_t *best = NULL;
                size_t best_len = 0;
                json_object_foreach(SE_UNCONST(json_t, cur), k, v) {
                        size_t kl = strlen(k);
                        if (kl > best_len && strncmp(p, k, kl) == 0 &&
                            (p[kl] == '\0' || p[kl] == '.' || p[kl] == '[')) {
                                best = v;
                                best_len = kl;
                        }
                }
                if (!best)
                        return cur;
                cur = best;
                p += best_len;
        }
        return cur;
}

int se_yaml_load(const char *data, size_t len, json_t **ret, struct se_diag *diag)
{
        struct yaml_docs docs = { 0 };
        int r = model_yaml_parse(data, len, NULL, 0, &docs, diag);
        if (r < 0)
                return r;
        if (docs.n > 1) {
                se_diag_set(diag, NULL, docs.lines[1], 0, "expected one YAML document, found %zu",
                            docs.n);
                model_yaml_docs_release(&docs);
                return -EINVAL;
        }
        *ret = docs.n ? json_incref(docs.docs[0]) : NULL;
        model_yaml_docs_release(&docs);
        return 0;
}

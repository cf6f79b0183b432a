/* Watch streams: line reassembly, event parsing, one watch request. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/kube_watch.h>
#include <svcenv/timeutil.h>

#include "kube_internal.h"

void se_kube_lines_init(struct se_kube_lines *l, size_t max_line)
{
        l->max_line = max_line ? max_line : SE_KUBE_MAX_WATCH_LINE;
        /* +1: the strbuf's cap counts the whole line, which may be max_line */
        se_strbuf_init(&l->partial, l->max_line + 1);
}

void se_kube_lines_release(struct se_kube_lines *l)
{
        se_strbuf_release(&l->partial);
}

static int emit(const char *line, size_t len, se_kube_line_fn fn, void *data)
{
        if (len && line[len - 1] == '\r')
                len--;
        return len ? fn(data, line, len) : 0;
}

int se_kube_lines_feed(struct se_kube_lines *l, const char *buf, size_t len, se_kube_line_fn fn,
                       void *data)
{
        while (len > 0) {
                const char *nl = memchr(buf, '\n', len);
                size_t take = nl ? (size_t)(nl - buf) : len;
                if (l->partial.len + take > l->max_line)
                        return -E2BIG;
                if (nl && l->partial.len == 0) {
                        /* the common case: a whole line inside this chunk, no copy */
                        int r = emit(buf, take, fn, data);
                        if (r < 0)
                                return r;
                } else {
                        int r = se_strbuf_add(&l->partial, buf, take);
                        if (r < 0)
                                return r == -E2BIG ? -E2BIG : -ENOMEM;
                        if (nl) {
                                r = emit(l->partial.buf, l->partial.len, fn, data);
                                se_strbuf_reset(&l->partial);
                                if (r < 0)
                                        return r;
                        }
                }
                if (!nl)
                        break;
                buf += take + 1;
                len -= take + 1;
        }
        return 0;
}

int se_kube_lines_finish(struct se_kube_lines *l, se_kube_line_fn fn, void *data)
{
        int r = emit(l->partial.buf, l->partial.len, fn, data);
        se_strbuf_reset(&l->partial);
        return r;
}

int se_kube_event_parse(const char *line, size_t len, enum se_kube_event_type *ret_type,
                        json_t **ret_doc, struct se_diag *diag)
{
        json_error_t jerr;
        /* \u0000 is valid JSON the API server stores in values; whether
         * an object may hold it is the decoder's call, not the parser's */
        json_t *doc = json_loadb(line, len, JSON_ALLOW_NUL, &jerr);
        if (!doc) {
                se_diag_set(diag, NULL, 0, 0, "watch event is not JSON: %s", jerr.text);
                return -EIO;
        }
        const char *type = json_string_value(json_object_get(doc, "type"));
        const json_t *obj = json_object_get(doc, "object");
        static const char *const names[] = { "ADDED", "MODIFIED", "DELETED", "BOOKMARK" };
        int r = -EIO;
        if (type && json_is_object(obj)) {
                for (size_t i = 0; i < SE_ARRAY_SIZE(names); i++)
                        if (strcmp(type, names[i]) == 0) {
                                *ret_type = (enum se_kube_event_type)i;
                                *ret_doc = doc;
                                return 0;
                        }
                if (strcmp(type, "ERROR") == 0) {
                        json_int_t code = json_integer_value(json_object_get(obj, "code"));
                        const char *reason = json_string_value(json_object_get(obj, "reason"));
                        const char *msg = json_string_value(json_object_get(obj, "message"));
                        r = se_kube_status_errno(code ? (long)code : 500, reason);
                        if (r == 0)
                                r = -EIO;
                        se_diag_set(diag, NULL, 0, 0, "watch: %s (%lld): %s",
                                    reason ? reason : "error", (long long)code,
                                    msg ? msg : "no message");
                } else
                        se_diag_set(diag, NULL, 0, 0, "watch: unknown event type \"%.40s\"", type);
        } else
                se_diag_set(diag, NULL, 0, 0, "watch: event without type or object");
        json_decref(doc);
        return r;
}

struct watch_ctx {
        struct se_kube_lines lines;
        char *rv;
        se_kube_event_fn fn;
        void *data;
        struct se_diag *diag;
        int err; /* set when an event failed */
};

static int on_line(void *data, const char *line, size_t len)
{
        struct watch_ctx *w = data;
        enum se_kube_event_type type;
        json_t *doc;
        int r = se_kube_event_parse(line, len, &type, &doc, w->diag);
        if (r < 0)
                return w->err = r;
        const json_t *obj = json_object_get(doc, "object");
        const char *rv = json_string_value(
                json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
        r = w->fn(w->data, type, obj);
        if (r == 0 && rv && strlen(rv) < SE_KUBE_RV_MAX)
                snprintf(w->rv, SE_KUBE_RV_MAX, "%s", rv);
        json_decref(doc);
        if (r < 0)
                w->err = r;
        return r;
}

static int on_chunk(void *data, const char *buf, size_t len)
{
        struct watch_ctx *w = data;
        int r = se_kube_lines_feed(&w->lines, buf, len, on_line, w);
        if (r == -E2BIG) {
                se_diag_set(w->diag, NULL, 0, 0, "watch: event longer than %zu bytes",
                            w->lines.max_line);
                w->err = r;
        }
        return r;
}

static unsigned random_timeout(void)
{
        /* spread reconnects as client-go does: [5 min, 10 min] */
        uint64_t x = se_now_mono_ns() ^ (uint64_t)se_now_real_ns();
        x ^= x >> 31;
        x *= 0x9e3779b97f4a7c15ull;
        return 300 + (unsigned)((x >> 33) % 301);
}

int se_kube_watch(struct se_kube_client *c, const struct se_kube_resource *res, const char *ns,
                  const struct se_kube_watch_opts *opts, char rv[SE_KUBE_RV_MAX],
                  se_kube_event_fn fn, void *data, const atomic_bool *cancel, struct se_diag *diag)
{
        static const struct se_kube_watch_opts none = { 0 };
        if (!opts)
                opts = &none;
        unsigned tmo = opts->timeout_s ? opts->timeout_s : random_timeout();
        char path[4096];
        if (se_kube_path(res, ns, NULL, path, sizeof(path)) < 0) {
                se_diag_set(diag, NULL, 0, 0, "watch: invalid namespace \"%s\"", ns);
                return -EINVAL;
        }
        struct se_strbuf q;
        se_strbuf_init(&q, 8192);
        se_strbuf_printf(&q, "%s?watch=1&allowWatchBookmarks=true&timeoutSeconds=%u", path, tmo);
        if (rv && rv[0])
                kube_query_add(&q, "resourceVersion", rv);
        kube_query_add(&q, "labelSelector", opts->label_selector);
        kube_query_add(&q, "fieldSelector", opts->field_selector);
        if (se_strbuf_failed(&q)) {
                se_strbuf_release(&q);
                return -E2BIG;
        }
        struct watch_ctx w = { .rv = rv, .fn = fn, .data = data, .diag = diag };
        se_kube_lines_init(&w.lines, opts->max_line);
        long code = 0;
        /* the client's own deadline is a backstop past the server's */
        int r = kube_stream(c, q.buf, cancel, (long)(tmo + 60) * 1000, on_chunk, &w, &code, diag);
        if (r == 0)
                r = se_kube_lines_finish(&w.lines, on_line, &w);
        if (w.err && (r == 0 || r == -EIO))
                r = w.err;
        se_kube_lines_release(&w.lines);
        se_strbuf_release(&q);
        return r;
}

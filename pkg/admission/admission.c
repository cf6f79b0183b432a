/* AdmissionReview in, AdmissionReview out. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/hash.h>
#include <svcenv/store.h>

#include "admission_internal.h"

#define MAX_WARNING_LEN 256 /* the API server may truncate longer ones */

const char *se_admission_outcome_name(enum se_admission_outcome o)
{
        static const char *const names[] = { "patched", "unchanged", "skipped",
                                             "guarded", "error",     "invalid" };
        return (unsigned)o < SE_ADMIT_OUTCOME_COUNT ? names[o] : "unknown";
}

void admission_warnings_add(struct warnings *w, const char *fmt, ...)
{
        /* the last slot is kept for "N more warnings" */
        if (w->n >= SE_ADMISSION_MAX_WARNINGS - 1) {
                w->dropped++;
                return;
        }
        char buf[MAX_WARNING_LEN];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        char *s = se_strdup(buf);
        if (s)
                w->v[w->n++] = s;
}

static void warnings_release(struct warnings *w)
{
        for (size_t i = 0; i < w->n; i++)
                free(w->v[i]);
        w->n = 0;
}

int se_json_pointer_escape(struct se_strbuf *sb, const char *s)
{
        for (; *s; s++) {
                if (*s == '~')
                        se_strbuf_puts(sb, "~0");
                else if (*s == '/')
                        se_strbuf_puts(sb, "~1");
                else
                        se_strbuf_putc(sb, *s);
        }
        return se_strbuf_failed(sb);
}

void se_admission_result_release(struct se_admission_result *res)
{
        if (!res)
                return;
        free(res->body);
        res->body = NULL;
        res->len = 0;
}

static int invalid(struct se_admission_result *res, const char *fmt, ...) SE_PRINTF(2, 3);
static int invalid(struct se_admission_result *res, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *msg = NULL;
        int n = se_vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (n < 0)
                return -ENOMEM;
        res->http_status = 400;
        res->outcome = SE_ADMIT_INVALID;
        res->body = msg;
        res->len = (size_t)n;
        return 0;
}

static const char *str_field(const json_t *o, const char *key)
{
        return json_string_value(json_object_get(o, key));
}

static bool str_is(const char *s, const char *want)
{
        return s && strcmp(s, want) == 0;
}

/* Is this a pod CREATE (no subresource)? */
static bool is_pod_create(const json_t *req)
{
        const json_t *kind = json_object_get(req, "kind");
        const json_t *resource = json_object_get(req, "resource");
        const char *sub = str_field(req, "subResource");
        const char *group = str_field(kind, "group");
        return str_is(str_field(req, "operation"), "CREATE") &&
               str_is(str_field(kind, "kind"), "Pod") && (!group || !*group) &&
               (!resource || str_is(str_field(resource, "resource"), "pods")) && (!sub || !*sub);
}

struct response {
        const char *api_version;
        const char *uid;
        bool allowed;
        const char *deny_message;
        const struct warnings *w;
};

/* {"apiVersion":...,"response":{"uid":...,"allowed":... */
static void put_head(struct se_strbuf *sb, const struct response *r)
{
        se_strbuf_puts(sb, "{\"apiVersion\":");
        se_json_put_string(sb, r->api_version);
        se_strbuf_puts(sb, ",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":");
        se_json_put_string(sb, r->uid);
        se_strbuf_puts(sb, r->allowed ? ",\"allowed\":true" : ",\"allowed\":false");
}

/* status, warnings and the end */
static void put_tail(struct se_strbuf *sb, const struct response *r)
{
        if (r->deny_message) {
                se_strbuf_puts(sb, ",\"status\":{\"metadata\":{},\"status\":\"Failure\","
                                   "\"message\":");
                se_json_put_string(sb, r->deny_message);
                se_strbuf_puts(sb, ",\"reason\":\"InternalError\",\"code\":500}");
        }
        if (r->w && r->w->n) {
                se_strbuf_puts(sb, ",\"warnings\":[");
                for (size_t i = 0; i < r->w->n; i++) {
                        if (i)
                                se_strbuf_putc(sb, ',');
                        se_json_put_string(sb, r->w->v[i]);
                }
                se_strbuf_putc(sb, ']');
        }
        se_strbuf_puts(sb, "}}\n");
}

static int finish_response(struct se_strbuf *sb, const struct response *r,
                           struct se_admission_result *res)
{
        put_tail(sb, r);
        int err = se_strbuf_failed(sb);
        if (err) {
                se_strbuf_release(sb);
                return err;
        }
        res->http_status = 200;
        res->body = se_strbuf_detach(sb, &res->len);
        return res->body ? 0 : -ENOMEM;
}

/* A response without patch. */
static int write_response(const struct response *r, struct se_admission_result *res)
{
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        se_strbuf_grow(&sb, 1024);
        put_head(&sb, r);
        return finish_response(&sb, r, res);
}

static int decide(const struct se_envvars_input *in, struct se_admission_cache *cache,
                  const struct se_admission_options *opt, const json_t *root,
                  struct se_admission_result *res)
{
        const char *api_version = str_field(root, "apiVersion");
        if (!str_is(api_version, "admission.k8s.io/v1") &&
            !str_is(api_version, "admission.k8s.io/v1beta1"))
                return invalid(res, "apiVersion %s%s%s is not admission.k8s.io/v1 or v1beta1",
                               api_version ? "\"" : "", api_version ? api_version : "missing",
                               api_version ? "\"" : "");
        if (!str_is(str_field(root, "kind"), "AdmissionReview"))
                return invalid(res, "kind is not AdmissionReview");
        const json_t *req = json_object_get(root, "request");
        if (!json_is_object(req))
                return invalid(res, "request: missing or not an object");
        const char *uid = str_field(req, "uid");
        if (!uid || !*uid)
                return invalid(res, "request.uid: missing");

        struct response r = { .api_version = api_version, .uid = uid, .allowed = true };
        res->outcome = SE_ADMIT_UNCHANGED;
        if (!is_pod_create(req))
                return write_response(&r, res);

        const json_t *object = json_object_get(req, "object");
        if (!json_is_object(object))
                return invalid(res, "request.object: missing or not an object");
        const char *ns = str_field(req, "namespace");
        if (!ns || !*ns)
                ns = str_field(json_object_get(object, "metadata"), "namespace");
        if (!ns || !*ns)
                return invalid(res, "request.namespace: missing");

        /* the response up to the patch, then the patch streamed into it in
         * base64; cut back when no patch is sent */
        struct warnings w = { .n = 0 };
        struct se_strbuf out;
        se_strbuf_init(&out, 0);
        se_strbuf_grow(&out, 128 * 1024); /* one growth instead of a dozen */
        put_head(&out, &r);
        se_strbuf_puts(&out, ",\"patchType\":\"JSONPatch\",\"patch\":\"");
        struct patch_out po = { .b64 = { .out = &out } };
        se_strbuf_init(&po.stage, 0);
        struct patch_stats st = { 0 };
        char msg[512] = "";
        se_strbuf_putc(&po.stage, '[');
        int err = admission_build_patch(in, cache, opt, object, ns, &po, &w, &st, msg, sizeof(msg));
        se_strbuf_putc(&po.stage, ']');
        admission_b64w_add(&po.b64, po.stage.buf, po.stage.len);
        admission_b64w_finish(&po.b64);
        int failed =
                se_strbuf_failed(&po.stage) ? se_strbuf_failed(&po.stage) : se_strbuf_failed(&out);
        se_strbuf_release(&po.stage);
        if (err == 0 && !failed && st.n_vars > 0) {
                se_strbuf_putc(&out, '"');
                res->outcome = SE_ADMIT_PATCHED;
                res->patch_bytes = po.b64.raw;
                res->n_vars = st.n_vars;
                if (w.dropped &&
                    se_asprintf(&w.v[w.n], "svcenv: %zu more warnings", w.dropped) >= 0)
                        w.n++;
                r.w = &w;
                err = finish_response(&out, &r, res);
                warnings_release(&w);
                return err;
        }
        se_strbuf_release(&out);
        if (err == 1) {
                res->outcome = SE_ADMIT_SKIPPED;
        } else if (err < 0 || failed) {
                if (!*msg)
                        snprintf(msg, sizeof(msg), "%s", strerror(-(err ? err : failed)));
                res->outcome = SE_ADMIT_ERROR;
                warnings_release(&w);
                if (opt->failure_deny) {
                        r.allowed = false;
                        char full[600];
                        snprintf(full, sizeof(full), "svcenv: service variables not injected: %s",
                                 msg);
                        r.deny_message = full;
                        return write_response(&r, res);
                }
                admission_warnings_add(&w, "svcenv: service variables not injected: %s", msg);
        } else if (st.guarded) {
                res->outcome = SE_ADMIT_GUARDED;
        }
        if (w.dropped && se_asprintf(&w.v[w.n], "svcenv: %zu more warnings", w.dropped) >= 0)
                w.n++;
        r.w = &w;
        err = write_response(&r, res);
        warnings_release(&w);
        return err;
}

static int review(const struct se_envvars_input *in, struct se_admission_cache *cache,
                  const struct se_admission_options *opt, const char *body, size_t len,
                  struct se_admission_result *res)
{
        static const struct se_admission_options defaults = { 0 };
        memset(res, 0, sizeof(*res));
        if (!opt)
                opt = &defaults;
        if (len > SE_ADMISSION_MAX_BODY)
                return invalid(res, "request body of %zu bytes is over the %zu-byte limit", len,
                               SE_ADMISSION_MAX_BODY);
        json_error_t je;
        /* \u0000 is valid JSON and the API server admits it in values */
        json_t *root = json_loadb(body, len, JSON_ALLOW_NUL, &je);
        if (!root)
                return invalid(res, "request body is not JSON: line %d: %s", je.line, je.text);
        int r = json_is_object(root) ? decide(in, cache, opt, root, res) :
                                       invalid(res, "request body is not a JSON object");
        json_decref(root);
        return r;
}

int se_admission_review(const struct se_envvars_input *in, const struct se_admission_options *opt,
                        const char *body, size_t len, struct se_admission_result *res)
{
        return review(in, NULL, opt, body, len, res);
}

int se_admission_review_store(const struct se_store *store, const struct se_admission_options *opt,
                              const char *body, size_t len, struct se_admission_result *res)
{
        struct se_envvars_input in = { .store = store };
        se_store_rdlock(store);
        int r = review(&in, NULL, opt, body, len, res);
        se_store_unlock(store);
        return r;
}

int se_admission_review_cached(struct se_admission_cache *c, const struct se_admission_options *opt,
                               const char *body, size_t len, struct se_admission_result *res)
{
        struct se_envvars_input in = { .store = admission_cache_store(c) };
        se_store_rdlock(in.store);
        int r = review(&in, c, opt, body, len, res);
        se_store_unlock(in.store);
        return r;
}

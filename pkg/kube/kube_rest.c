/* REST verbs on top of se_kube_request (see kube_client.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/decode.h>
#include <svcenv/kube_client.h>

#include "kube_internal.h"

#define PATH_MAX_LEN 2048

static const struct se_kube_resource resources[SE_KIND_COUNT] = {
        [SE_KIND_SERVICE] = { "/api/v1", "services", true, "Service", "v1" },
        [SE_KIND_POD] = { "/api/v1", "pods", true, "Pod", "v1" },
        [SE_KIND_NODE] = { "/api/v1", "nodes", false, "Node", "v1" },
        [SE_KIND_NAMESPACE] = { "/api/v1", "namespaces", false, "Namespace", "v1" },
        [SE_KIND_ENDPOINTS] = { "/api/v1", "endpoints", true, "Endpoints", "v1" },
        [SE_KIND_ENDPOINT_SLICE] = { "/apis/discovery.k8s.io/v1", "endpointslices", true,
                                     "EndpointSlice", "discovery.k8s.io/v1" },
        [SE_KIND_CONFIGMAP] = { "/api/v1", "configmaps", true, "ConfigMap", "v1" },
        [SE_KIND_SECRET] = { "/api/v1", "secrets", true, "Secret", "v1" },
        [SE_KIND_SERVICE_CIDR] = { "/apis/networking.k8s.io/v1", "servicecidrs", false,
                                   "ServiceCIDR", "networking.k8s.io/v1" },
};

const struct se_kube_resource se_kube_leases = { "/apis/coordination.k8s.io/v1", "leases", true,
                                                 "Lease", "coordination.k8s.io/v1" };

const struct se_kube_resource *se_kube_resource_of(enum se_kind kind)
{
        return (unsigned)kind < SE_KIND_COUNT ? &resources[kind] : NULL;
}

/* A path segment must not be able to climb out of its place. */
static bool valid_segment(const char *s)
{
        return s && *s && strcmp(s, ".") && strcmp(s, "..") && !strpbrk(s, "/?#%") &&
               strlen(s) <= 253;
}

int se_kube_path(const struct se_kube_resource *res, const char *ns, const char *name, char *buf,
                 size_t size)
{
        int n;
        if ((ns && *ns && !valid_segment(ns)) || (name && !valid_segment(name)))
                return -EINVAL;
        if (res->namespaced && ns && *ns)
                n = snprintf(buf, size, "%s/namespaces/%s/%s%s%s", res->prefix, ns, res->plural,
                             name ? "/" : "", name ? name : "");
        else
                n = snprintf(buf, size, "%s/%s%s%s", res->prefix, res->plural, name ? "/" : "",
                             name ? name : "");
        return n < 0 || (size_t)n >= size ? -E2BIG : 0;
}

static int bad_path(struct se_diag *diag, const char *ns, const char *name)
{
        se_diag_set(diag, NULL, 0, 0, "invalid namespace or name \"%s/%s\"", ns ? ns : "",
                    name ? name : "");
        return -EINVAL;
}

/* Appends "&key=value" (percent-encoded) to the query in buf. */
static int add_query(char *buf, size_t size, const char *key, const char *value)
{
        if (!value)
                return 0;
        size_t n = strlen(buf);
        int k = snprintf(buf + n, size - n, "%c%s=", strchr(buf, '?') ? '&' : '?', key);
        if (k < 0 || (size_t)k >= size - n)
                return -E2BIG;
        n += (size_t)k;
        static const char hex[] = "0123456789ABCDEF";
        for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
                bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                             (*p >= '0' && *p <= '9') || strchr("-._~", *p);
                if (n + 4 >= size)
                        return -E2BIG;
                if (plain)
                        buf[n++] = (char)*p;
                else {
                        buf[n++] = '%';
                        buf[n++] = hex[*p >> 4];
                        buf[n++] = hex[*p & 15];
                }
        }
        buf[n] = '\0';
        return 0;
}

static int parse_body(const struct se_strbuf *body, json_t **ret, const char *what,
                      struct se_diag *diag)
{
        json_error_t jerr;
        json_t *j = json_loadb(body->buf, body->len, JSON_ALLOW_NUL, &jerr);
        if (!j) {
                se_diag_set(diag, NULL, 0, 0, "%s: response is not JSON: %s", what, jerr.text);
                return -EIO;
        }
        *ret = j;
        return 0;
}

int se_kube_get_json(struct se_kube_client *c, const struct se_kube_resource *res, const char *ns,
                     const char *name, json_t **ret, struct se_diag *diag)
{
        char path[PATH_MAX_LEN];
        if (se_kube_path(res, ns, name, path, sizeof(path)) < 0)
                return bad_path(diag, ns, name);
        _cleanup_strbuf_ struct se_strbuf body;
        se_strbuf_init(&body, 0);
        int r = se_kube_request(c, "GET", path, NULL, NULL, 0, NULL, &body, NULL, diag);
        return r < 0 ? r : parse_body(&body, ret, path, diag);
}

static void decode_diag(struct se_diag *diag, enum se_kind kind, const json_t *item,
                        const struct se_decode_error *e)
{
        const json_t *meta = json_object_get(item, "metadata");
        const char *ns = json_string_value(json_object_get(meta, "namespace"));
        const char *name = json_string_value(json_object_get(meta, "name"));
        se_diag_set(diag, NULL, 0, 0, "%s %s%s%s: %s%s%s", se_kind_name(kind), ns ? ns : "",
                    ns ? "/" : "", name ? name : "?", e->path, e->path[0] ? ": " : "", e->message);
}

int se_kube_get(struct se_kube_client *c, enum se_kind kind, const char *ns, const char *name,
                struct se_object **ret, struct se_diag *diag)
{
        json_t *j;
        int r = se_kube_get_json(c, se_kube_resource_of(kind), ns, name, &j, diag);
        if (r < 0)
                return r;
        struct se_decode_error e;
        r = se_decode_object_as(j, kind, NULL, ret, &e);
        if (r == -EINVAL)
                decode_diag(diag, kind, j, &e);
        json_decref(j);
        return r;
}

int se_kube_list_json(struct se_kube_client *c, const struct se_kube_resource *res, const char *ns,
                      const struct se_kube_list_opts *opts, se_kube_json_item_fn fn, void *data,
                      char ret_rv[SE_KUBE_RV_MAX], struct se_diag *diag)
{
        static const struct se_kube_list_opts none = { 0 };
        if (!opts)
                opts = &none;
        char *cont = NULL;
        int r = 0;
        char limit[16];
        snprintf(limit, sizeof(limit), "%u", opts->limit ? opts->limit : 500);
        if (ret_rv)
                ret_rv[0] = '\0';
        do {
                char path[PATH_MAX_LEN + 2048];
                if (se_kube_path(res, ns, NULL, path, sizeof(path)) < 0) {
                        r = bad_path(diag, ns, NULL);
                        break;
                }
                r = add_query(path, sizeof(path), "limit", limit);
                if (r == 0)
                        r = add_query(path, sizeof(path), "labelSelector", opts->label_selector);
                if (r == 0)
                        r = add_query(path, sizeof(path), "fieldSelector", opts->field_selector);
                if (r == 0 && cont)
                        r = add_query(path, sizeof(path), "continue", cont);
                else if (r == 0 && opts->resource_version)
                        r = add_query(path, sizeof(path), "resourceVersion",
                                      opts->resource_version);
                if (r < 0) {
                        se_diag_set(diag, NULL, 0, 0, "list %s: query too long", res->plural);
                        break;
                }
                _cleanup_strbuf_ struct se_strbuf body;
                se_strbuf_init(&body, 0);
                r = se_kube_request(c, "GET", path, NULL, NULL, 0, NULL, &body, NULL, diag);
                /* items are parsed and handed over one at a time: only one
                 * item's tree lives beside the page's text */
                json_t *meta = NULL;
                if (r == 0)
                        r = se_kube_list_page_parse(body.buf ? body.buf : "", body.len, &meta, fn,
                                                    data, diag);
                se_strbuf_release(&body);
                if (r < 0)
                        break;
                const char *rv = json_string_value(json_object_get(meta, "resourceVersion"));
                const char *next = json_string_value(json_object_get(meta, "continue"));
                if (ret_rv && rv && !cont) {
                        if (strlen(rv) >= SE_KUBE_RV_MAX) {
                                se_diag_set(diag, NULL, 0, 0, "list %s: resourceVersion too long",
                                            res->plural);
                                r = -EIO;
                        } else
                                snprintf(ret_rv, SE_KUBE_RV_MAX, "%s", rv);
                }
                free(cont);
                cont = r == 0 && next && *next ? se_strdup(next) : NULL;
                if (r == 0 && next && *next && !cont)
                        r = -ENOMEM;
                json_decref(meta);
        } while (r == 0 && cont);
        free(cont);
        return r;
}

struct decode_ctx {
        enum se_kind kind;
        unsigned flags;
        se_kube_item_fn fn;
        void *data;
        struct se_diag *diag;
};

static int decode_item(void *data, const json_t *item)
{
        struct decode_ctx *d = data;
        struct se_object *obj;
        struct se_decode_error e;
        int r = se_decode_object_flags(item, d->kind, NULL, d->flags, &obj, &e);
        if (r == -EINVAL)
                decode_diag(d->diag, d->kind, item, &e);
        if (r < 0)
                return r;
        return d->fn(d->data, obj);
}

int se_kube_list(struct se_kube_client *c, enum se_kind kind, const char *ns,
                 const struct se_kube_list_opts *opts, se_kube_item_fn fn, void *data,
                 char ret_rv[SE_KUBE_RV_MAX], struct se_diag *diag)
{
        struct decode_ctx d = { kind, opts ? opts->decode_flags : 0, fn, data, diag };
        return se_kube_list_json(c, se_kube_resource_of(kind), ns, opts, decode_item, &d, ret_rv,
                                 diag);
}

/* Sends body with method to path and parses the answer into *ret. */
static int send_json(struct se_kube_client *c, const char *method, const char *path,
                     const char *ctype, const json_t *body, json_t **ret, struct se_diag *diag)
{
        char *text = json_dumps(body, JSON_COMPACT);
        if (!text)
                return -ENOMEM;
        _cleanup_strbuf_ struct se_strbuf out;
        se_strbuf_init(&out, 0);
        int r = se_kube_request(c, method, path, ctype, text, strlen(text), NULL, ret ? &out : NULL,
                                NULL, diag);
        free(text);
        if (r < 0 || !ret)
                return r;
        return parse_body(&out, ret, path, diag);
}

int se_kube_create(struct se_kube_client *c, const struct se_kube_resource *res, const char *ns,
                   const json_t *body, json_t **ret, struct se_diag *diag)
{
        char path[PATH_MAX_LEN];
        if (se_kube_path(res, ns, NULL, path, sizeof(path)) < 0)
                return bad_path(diag, ns, NULL);
        return send_json(c, "POST", path, NULL, body, ret, diag);
}

int se_kube_update(struct se_kube_client *c, const struct se_kube_resource *res, const char *ns,
                   const json_t *body, json_t **ret, struct se_diag *diag)
{
        const char *name =
                json_string_value(json_object_get(json_object_get(body, "metadata"), "name"));
        char path[PATH_MAX_LEN];
        if (!name || se_kube_path(res, ns, name, path, sizeof(path)) < 0)
                return bad_path(diag, ns, name);
        return send_json(c, "PUT", path, NULL, body, ret, diag);
}

int se_kube_patch(struct se_kube_client *c, const struct se_kube_resource *res, const char *ns,
                  const char *name, const struct se_kube_patch_opts *opts, const json_t *patch,
                  json_t **ret, struct se_diag *diag)
{
        char path[PATH_MAX_LEN + 512];
        if (se_kube_path(res, ns, name, path, PATH_MAX_LEN) < 0)
                return bad_path(diag, ns, name);
        if (opts->subresource) {
                if (!valid_segment(opts->subresource))
                        return bad_path(diag, ns, opts->subresource);
                size_t n = strlen(path);
                snprintf(path + n, sizeof(path) - n, "/%s", opts->subresource);
        }
        const char *ctype;
        switch (opts->type) {
        case SE_KUBE_PATCH_MERGE:
                ctype = "application/merge-patch+json";
                break;
        case SE_KUBE_PATCH_JSON:
                ctype = "application/json-patch+json";
                break;
        case SE_KUBE_PATCH_APPLY:
                if (!opts->field_manager || !*opts->field_manager) {
                        se_diag_set(diag, NULL, 0, 0, "server-side apply needs a field manager");
                        return -EINVAL;
                }
                ctype = "application/apply-patch+yaml";
                break;
        default:
                return -EINVAL;
        }
        if (add_query(path, sizeof(path), "fieldManager", opts->field_manager) < 0 ||
            add_query(path, sizeof(path), "force",
                      opts->type == SE_KUBE_PATCH_APPLY && opts->force ? "true" : NULL) < 0)
                return bad_path(diag, ns, name);
        return send_json(c, "PATCH", path, ctype, patch, ret, diag);
}

int se_kube_delete(struct se_kube_client *c, const struct se_kube_resource *res, const char *ns,
                   const char *name, const struct se_kube_delete_opts *opts, struct se_diag *diag)
{
        char path[PATH_MAX_LEN];
        if (se_kube_path(res, ns, name, path, sizeof(path)) < 0)
                return bad_path(diag, ns, name);
        json_t *body = NULL;
        if (opts && (opts->uid || opts->resource_version || opts->propagation)) {
                json_t *pre = json_object();
                body = json_pack("{s:s,s:s}", "apiVersion", "v1", "kind", "DeleteOptions");
                if (!pre || !body) {
                        json_decref(pre);
                        json_decref(body);
                        return -ENOMEM;
                }
                if (opts->uid)
                        json_object_set_new(pre, "uid", json_string(opts->uid));
                if (opts->resource_version)
                        json_object_set_new(pre, "resourceVersion",
                                            json_string(opts->resource_version));
                json_object_set_new(body, "preconditions", pre);
                if (opts->propagation)
                        json_object_set_new(body, "propagationPolicy",
                                            json_string(opts->propagation));
        }
        int r;
        if (body) {
                r = send_json(c, "DELETE", path, NULL, body, NULL, diag);
                json_decref(body);
        } else
                r = se_kube_request(c, "DELETE", path, NULL, NULL, 0, NULL, NULL, NULL, diag);
        return r;
}

void kube_query_add(struct se_strbuf *q, const char *key, const char *value)
{
        if (!value)
                return;
        static const char hex[] = "0123456789ABCDEF";
        se_strbuf_printf(q, "%c%s=", memchr(q->buf, '?', q->len) ? '&' : '?', key);
        for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
                bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                             (*p >= '0' && *p <= '9') || strchr("-._~", *p);
                if (plain)
                        se_strbuf_putc(q, (char)*p);
                else
                        se_strbuf_printf(q, "%%%c%c", hex[*p >> 4], hex[*p & 15]);
        }
}

/* Typed field getters with path tracking (see decode_internal.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/parse.h>

#include "decode_internal.h"

size_t model_dctx_push_key(struct dctx *d, const char *key)
{
        size_t old = d->plen;
        int n = snprintf(d->path + d->plen, sizeof(d->path) - d->plen, "%s%s", d->plen ? "." : "",
                         key);
        if (n > 0)
                d->plen += (size_t)n < sizeof(d->path) - d->plen ? (size_t)n :
                                                                   sizeof(d->path) - d->plen - 1;
        return old;
}

size_t model_dctx_push_index(struct dctx *d, size_t i)
{
        size_t old = d->plen;
        int n = snprintf(d->path + d->plen, sizeof(d->path) - d->plen, "[%zu]", i);
        if (n > 0)
                d->plen += (size_t)n < sizeof(d->path) - d->plen ? (size_t)n :
                                                                   sizeof(d->path) - d->plen - 1;
        return old;
}

void model_dctx_pop(struct dctx *d, size_t old)
{
        d->plen = old;
        d->path[old] = '\0';
}

int model_dctx_fail(struct dctx *d, const char *key, const char *fmt, ...)
{
        if (d->err) {
                /* a path longer than the buffer is cut: it is only for people */
                struct dctx tmp = *d;
                if (key && *key)
                        model_dctx_push_key(&tmp, key);
                memcpy(d->err->path, tmp.path, tmp.plen + 1);
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(d->err->message, sizeof(d->err->message), fmt, ap);
                va_end(ap);
        }
        return -EINVAL;
}

const char *model_json_type_name(const json_t *j)
{
        if (!j)
                return "nothing";
        switch (json_typeof(j)) {
        case JSON_OBJECT:
                return "an object";
        case JSON_ARRAY:
                return "a list";
        case JSON_STRING:
                return "a string";
        case JSON_INTEGER:
                return "an integer";
        case JSON_REAL:
                return "a number";
        case JSON_TRUE:
        case JSON_FALSE:
                return "a boolean";
        default:
                return "null";
        }
}

void *model_dctx_array(struct dctx *d, size_t n, size_t size)
{
        if (n == 0)
                return NULL;
        return se_arena_array(d->arena, n, size);
}

/* A copy of s[0..n) in the object's arena, shared with an earlier equal
 * short string of the same object, or a static well-known string (objects
 * are immutable and freed as a whole, never string by string). */
/* Values and keys that recur in every object of a kind: pointed to, not
 * copied (a pod's phase, its Ready condition, the zone label; the kind of
 * every targetRef; the controllers' own labels). */
static const char *const well_known[] = {
        "Pod",
        "TCP",
        "UDP",
        "SCTP",
        "Ready",
        "True",
        "False",
        "Unknown",
        "Running",
        "Pending",
        "Succeeded",
        "Failed",
        "Always",
        "IPv4",
        "IPv6",
        "app",
        "v1",
        "Service",
        "discovery.k8s.io/v1",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "kubernetes.io/hostname",
        "kubernetes.io/service-name",
        "endpointslice.kubernetes.io/managed-by",
        "endpointslice-controller.k8s.io",
        "endpoints.kubernetes.io/managed-by",
        "endpoint-controller",
        "endpoints.kubernetes.io/last-change-trigger-time",
        "service.kubernetes.io/headless",
};

static const char *find_well_known(const char *s, size_t n)
{
        for (size_t i = 0; i < SE_ARRAY_SIZE(well_known); i++)
                if (strncmp(well_known[i], s, n) == 0 && well_known[i][n] == '\0')
                        return well_known[i];
        return NULL;
}

static const char *intern(struct dctx *d, const char *s, size_t n, bool shared)
{
        if (n > 64)
                return se_arena_strndup(d->arena, s, n);
        const char *k = find_well_known(s, n);
        if (k)
                return k;
        if (shared && (d->flags & SE_DECODE_INTERN) &&
            (k = d->pool_add ? model_intern_pool_add(s, n) : model_intern_pool_find(s, n)))
                return k;
        uint32_t h = 2166136261u; /* FNV-1a */
        for (size_t i = 0; i < n; i++)
                h = (h ^ (unsigned char)s[i]) * 16777619u;
        const char **slot = &d->seen[h % SE_ARRAY_SIZE(d->seen)];
        if (*slot && strncmp(*slot, s, n) == 0 && (*slot)[n] == '\0')
                return *slot;
        const char *copy = se_arena_strndup(d->arena, s, n);
        if (copy)
                *slot = copy;
        return copy;
}

const char *model_dctx_strdup(struct dctx *d, const char *s)
{
        return s ? intern(d, s, strlen(s), false) : NULL;
}

/* The value at key, NULL when absent or null. */
static const json_t *field(const json_t *obj, const char *key)
{
        const json_t *v = json_object_get(obj, key);
        return v && !json_is_null(v) ? v : NULL;
}

/* s[0..n) with each NUL as C0 80 (SE_DECODE_NUL_AS_C080), in the arena. */
static const char *nul_as_c080(struct dctx *d, const char *s, size_t n)
{
        size_t nuls = 0;
        for (size_t i = 0; i < n; i++)
                nuls += s[i] == '\0';
        char *out = se_arena_alloc(d->arena, n + nuls + 1);
        if (!out)
                return NULL;
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
                if (s[i]) {
                        out[k++] = s[i];
                } else {
                        out[k++] = (char)0xC0;
                        out[k++] = (char)0x80;
                }
        }
        out[k] = '\0';
        return out;
}

static int string_at(struct dctx *d, const json_t *obj, const char *key, bool shared,
                     const char **ret)
{
        const json_t *v = field(obj, key);
        if (!v)
                return 0;
        if (!json_is_string(v))
                return model_dctx_fail(d, key, "expected a string, got %s",
                                       model_json_type_name(v));
        if (json_string_length(v) > SE_MAX_STRING_LEN)
                return model_dctx_fail(d, key, "string longer than %u bytes", SE_MAX_STRING_LEN);
        if (strlen(json_string_value(v)) != json_string_length(v)) {
                if (!(d->flags & SE_DECODE_NUL_AS_C080))
                        return model_dctx_fail(d, key, "string contains a NUL byte");
                *ret = nul_as_c080(d, json_string_value(v), json_string_length(v));
                return *ret ? 0 : -ENOMEM;
        }
        *ret = intern(d, json_string_value(v), json_string_length(v), shared);
        return *ret ? 0 : -ENOMEM;
}

int model_get_string(struct dctx *d, const json_t *obj, const char *key, const char **ret)
{
        return string_at(d, obj, key, false, ret);
}

int model_get_shared_string(struct dctx *d, const json_t *obj, const char *key, const char **ret)
{
        return string_at(d, obj, key, true, ret);
}

int model_get_int64(struct dctx *d, const json_t *obj, const char *key, int64_t *ret)
{
        const json_t *v = field(obj, key);
        if (!v)
                return 0;
        if (!json_is_integer(v))
                return model_dctx_fail(d, key, "expected an integer, got %s",
                                       model_json_type_name(v));
        *ret = json_integer_value(v);
        return 0;
}

int model_get_int32(struct dctx *d, const json_t *obj, const char *key, int32_t *ret, bool *present)
{
        const json_t *v = field(obj, key);
        if (!v)
                return 0;
        if (!json_is_integer(v))
                return model_dctx_fail(d, key, "expected an integer, got %s",
                                       model_json_type_name(v));
        json_int_t n = json_integer_value(v);
        if (n < INT32_MIN || n > INT32_MAX)
                return model_dctx_fail(d, key, "%lld does not fit in 32 bits", (long long)n);
        *ret = (int32_t)n;
        if (present)
                *present = true;
        return 0;
}

int model_get_bool(struct dctx *d, const json_t *obj, const char *key, enum se_opt_bool *ret)
{
        const json_t *v = field(obj, key);
        if (!v)
                return 0;
        if (!json_is_boolean(v))
                return model_dctx_fail(d, key, "expected a boolean, got %s",
                                       model_json_type_name(v));
        *ret = json_is_true(v) ? SE_TRUE : SE_FALSE;
        return 0;
}

int model_get_object(struct dctx *d, const json_t *obj, const char *key, const json_t **ret)
{
        const json_t *v = field(obj, key);
        *ret = NULL;
        if (!v)
                return 0;
        if (!json_is_object(v))
                return model_dctx_fail(d, key, "expected an object, got %s",
                                       model_json_type_name(v));
        if (json_object_size(v) > SE_MAX_ARRAY_ITEMS)
                return model_dctx_fail(d, key, "more than %u entries", SE_MAX_ARRAY_ITEMS);
        *ret = v;
        return 0;
}

int model_get_array(struct dctx *d, const json_t *obj, const char *key, const json_t **ret)
{
        const json_t *v = field(obj, key);
        *ret = NULL;
        if (!v)
                return 0;
        if (!json_is_array(v))
                return model_dctx_fail(d, key, "expected a list, got %s", model_json_type_name(v));
        if (json_array_size(v) > SE_MAX_ARRAY_ITEMS)
                return model_dctx_fail(d, key, "more than %u items", SE_MAX_ARRAY_ITEMS);
        *ret = v;
        return 0;
}

static int cmp_kv(const void *a, const void *b)
{
        return strcmp(((const struct se_kv *)a)->key, ((const struct se_kv *)b)->key);
}

void model_kvlist_sort(struct se_kvlist *l)
{
        if (l->n > 1)
                qsort(l->items, l->n, sizeof(*l->items), cmp_kv);
}

static int strmap_at(struct dctx *d, const json_t *obj, const char *key, bool shared,
                     struct se_kvlist *ret)
{
        const json_t *m;
        int r = model_get_object(d, obj, key, &m);
        if (r < 0 || !m)
                return r;
        size_t n = json_object_size(m);
        struct se_kv *items = model_dctx_array(d, n, sizeof(*items));
        if (n && !items)
                return -ENOMEM;
        size_t old = model_dctx_push_key(d, key);
        size_t i = 0;
        const char *k;
        const json_t *v;
        json_object_foreach(SE_UNCONST(json_t, m), k, v) {
                if (json_is_null(v))
                        continue; /* Go decodes a null map value as "" — keep it out */
                const char *val = NULL;
                r = string_at(d, m, k, shared, &val);
                if (r < 0)
                        return r;
                items[i].key = intern(d, k, strlen(k), shared);
                items[i].value = val;
                if (!items[i].key)
                        return -ENOMEM;
                i++;
        }
        model_dctx_pop(d, old);
        ret->items = items;
        ret->n = (uint32_t)i;
        model_kvlist_sort(ret);
        return 0;
}

int model_get_strmap(struct dctx *d, const json_t *obj, const char *key, struct se_kvlist *ret)
{
        return strmap_at(d, obj, key, false, ret);
}

int model_get_shared_strmap(struct dctx *d, const json_t *obj, const char *key,
                            struct se_kvlist *ret)
{
        return strmap_at(d, obj, key, true, ret);
}

int model_get_strarray(struct dctx *d, const json_t *obj, const char *key, struct se_strs *ret)
{
        const json_t *a;
        int r = model_get_array(d, obj, key, &a);
        if (r < 0 || !a)
                return r;
        size_t n = json_array_size(a);
        /* no NULL after the last (the count says where it ends); one slot
         * for an empty list, which stays told apart from an absent one */
        const char **v = model_dctx_array(d, n ? n : 1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        size_t old = model_dctx_push_key(d, key);
        for (size_t i = 0; i < n; i++) {
                const json_t *e = json_array_get(a, i);
                if (!json_is_string(e)) {
                        size_t o2 = model_dctx_push_index(d, i);
                        r = model_dctx_fail(d, NULL, "expected a string, got %s",
                                            model_json_type_name(e));
                        model_dctx_pop(d, o2);
                        return r;
                }
                v[i] = se_arena_strndup(d->arena, json_string_value(e), json_string_length(e));
                if (!v[i])
                        return -ENOMEM;
        }
        model_dctx_pop(d, old);
        ret->v = v;
        ret->n = (uint32_t)n;
        return 0;
}

int model_get_int_or_string(struct dctx *d, const json_t *obj, const char *key,
                            struct se_int_or_string *ret)
{
        const json_t *v = field(obj, key);
        if (!v)
                return 0;
        if (json_is_integer(v)) {
                json_int_t n = json_integer_value(v);
                if (n < INT32_MIN || n > INT32_MAX)
                        return model_dctx_fail(d, key, "%lld does not fit in 32 bits",
                                               (long long)n);
                ret->is_string = false;
                ret->num = (int32_t)n;
                return 0;
        }
        if (json_is_string(v)) {
                ret->is_string = true;
                ret->str = model_dctx_strdup(d, json_string_value(v));
                return ret->str ? 0 : -ENOMEM;
        }
        return model_dctx_fail(d, key, "expected an integer or a string, got %s",
                               model_json_type_name(v));
}

int model_get_protocol(struct dctx *d, const json_t *obj, const char *key, enum se_protocol *ret,
                       bool *present)
{
        const char *s = NULL;
        int r = model_get_string(d, obj, key, &s);
        if (r < 0 || !s)
                return r;
        if (strcmp(s, "TCP") == 0)
                *ret = SE_PROTO_TCP;
        else if (strcmp(s, "UDP") == 0)
                *ret = SE_PROTO_UDP;
        else if (strcmp(s, "SCTP") == 0)
                *ret = SE_PROTO_SCTP;
        else
                return model_dctx_fail(
                        d, key,
                        "unsupported value \"%s\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
                        s);
        if (present)
                *present = true;
        return 0;
}

int model_check_port(struct dctx *d, const char *key, int32_t port, bool allow_zero)
{
        if ((port == 0 && allow_zero) || (port >= 1 && port <= 65535))
                return 0;
        return model_dctx_fail(d, key, "invalid port %d: must be between 1 and 65535, inclusive",
                               port);
}

int model_check_ip(struct dctx *d, const char *key, const char *ip)
{
        struct se_ip parsed;
        if (se_parse_ip(ip, &parsed) == 0)
                return 0;
        return model_dctx_fail(d, key, "\"%s\" is not a valid IP address", ip);
}

int model_check_dns_label(struct dctx *d, const char *key, const char *s)
{
        size_t n = strlen(s);
        bool ok = n >= 1 && n <= 63 && s[0] != '-' && s[n - 1] != '-';
        for (size_t i = 0; ok && i < n; i++)
                ok = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-';
        if (ok)
                return 0;
        return model_dctx_fail(
                d, key,
                "\"%s\" is not a valid DNS label: lower case letters, digits and '-', "
                "at most 63, starting and ending with a letter or digit",
                s);
}

int model_check_iana_svc_name(struct dctx *d, const char *key, const char *s)
{
        size_t n = strlen(s);
        bool letter = false,
             ok = n >= 1 && n <= 15 && s[0] != '-' && s[n - 1] != '-' && !strstr(s, "--");
        for (size_t i = 0; ok && i < n; i++) {
                bool lower = s[i] >= 'a' && s[i] <= 'z';
                letter |= lower;
                ok = lower || (s[i] >= '0' && s[i] <= '9') || s[i] == '-';
        }
        if (ok && letter)
                return 0;
        return model_dctx_fail(
                d, key,
                "\"%s\" is not a valid port name: at most 15 lower case letters, digits "
                "and '-', with at least one letter",
                s);
}

int model_check_one_of(struct dctx *d, const char *key, const char *s, const char *const *allowed)
{
        char list[200] = "";
        size_t o = 0;
        for (size_t i = 0; allowed[i]; i++) {
                if (strcmp(s, allowed[i]) == 0)
                        return 0;
                int n = snprintf(list + o, sizeof(list) - o, "%s\"%s\"", i ? ", " : "", allowed[i]);
                if (n > 0 && (size_t)n < sizeof(list) - o)
                        o += (size_t)n;
        }
        return model_dctx_fail(d, key, "unsupported value \"%s\": supported values: %s", s, list);
}

int model_get_list_if(struct dctx *d, const json_t *obj, const char *key, size_t size,
                      list_keep_fn keep, list_elem_fn fn, const void *ctx, void **ret,
                      uint32_t *ret_n)
{
        const json_t *arr;
        int r = model_get_array(d, obj, key, &arr);
        if (r < 0 || !arr)
                return r;
        size_t n = json_array_size(arr), kept = 0;
        for (size_t i = 0; i < n; i++)
                kept += !keep || keep(json_array_get(arr, i));
        char *items = model_dctx_array(d, kept, size);
        if (kept && !items)
                return -ENOMEM;
        size_t old = model_dctx_push_key(d, key), k = 0;
        for (size_t i = 0; i < n; i++) {
                const json_t *e = json_array_get(arr, i);
                if (keep && !keep(e))
                        continue;
                size_t o2 = model_dctx_push_index(d, i);
                if (!json_is_object(e))
                        return model_dctx_fail(d, NULL, "expected an object, got %s",
                                               model_json_type_name(e));
                if ((r = fn(d, e, items + k++ * size, ctx)) < 0)
                        return r;
                model_dctx_pop(d, o2);
        }
        model_dctx_pop(d, old);
        *ret = items;
        *ret_n = (uint32_t)kept;
        return 0;
}

int model_get_list(struct dctx *d, const json_t *obj, const char *key, size_t size, list_elem_fn fn,
                   const void *ctx, void **ret, uint32_t *ret_n)
{
        return model_get_list_if(d, obj, key, size, NULL, fn, ctx, ret, ret_n);
}

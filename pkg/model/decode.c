/* Dispatch: apiVersion/kind to the per-kind decoder. */
#include <errno.h>
#include <string.h>

#include <svcenv/decode.h>

#include "decode_internal.h"

static int decode_kind(struct dctx *d, const json_t *json, struct se_object *obj)
{
        switch (obj->kind) {
        case SE_KIND_SERVICE:
                return model_decode_service(d, json, (struct se_service *)obj);
        case SE_KIND_POD:
                return model_decode_pod(d, json, (struct se_pod *)obj);
        case SE_KIND_NODE:
                return model_decode_node(d, json, (struct se_node *)obj);
        case SE_KIND_NAMESPACE:
                return model_decode_namespace(d, json, (struct se_namespace *)obj);
        case SE_KIND_ENDPOINTS:
                return model_decode_endpoints(d, json, (struct se_endpoints *)obj);
        case SE_KIND_ENDPOINT_SLICE:
                return model_decode_endpoint_slice(d, json, (struct se_endpoint_slice *)obj);
        case SE_KIND_CONFIGMAP:
                return model_decode_configmap(d, json, (struct se_configmap *)obj);
        case SE_KIND_SECRET:
                return model_decode_secret(d, json, (struct se_secret *)obj);
        case SE_KIND_SERVICE_CIDR:
                return model_decode_service_cidr(d, json, (struct se_service_cidr *)obj);
        default:
                return -EINVAL;
        }
}

/* Each SE_DECODE_SLIM_* flag is about one kind; other kinds ignore it.
 * SE_DECODE_INTERN is for every kind. */
static unsigned kind_flags(enum se_kind kind, unsigned flags)
{
        unsigned common = flags & (SE_DECODE_INTERN | SE_DECODE_NUL_AS_C080);
        switch (kind) {
        case SE_KIND_POD:
                return common | (flags & SE_DECODE_SLIM_POD);
        case SE_KIND_ENDPOINTS:
                return common | (flags & SE_DECODE_SLIM_ENDPOINTS);
        case SE_KIND_ENDPOINT_SLICE:
                return common | (flags & (SE_DECODE_SLIM_SLICES | SE_DECODE_DNS_SLICES |
                                          SE_DECODE_PROXY_SLICES));
        case SE_KIND_SERVICE:
                return common | (flags & SE_DECODE_DNS_SERVICES);
        default:
                return common;
        }
}

/* One decode into an arena of `size` bytes (0: grow as needed). */
static int decode_sized(const json_t *json, enum se_kind kind, const char *default_ns,
                        unsigned flags, size_t size, struct se_object **ret,
                        struct se_decode_error *err)
{
        /* the measuring pass may add to the pool, the final one only finds:
         * the final layout never needs more than was measured */
        struct dctx d = { .err = err, .flags = kind_flags(kind, flags), .pool_add = size == 0 };
        struct se_object *obj = se_object_new_sized(kind, size);
        if (!obj)
                return -ENOMEM;
        d.arena = &obj->arena;
        int r = model_decode_meta(&d, json, kind, default_ns, &obj->meta);
        if (r == 0)
                r = decode_kind(&d, json, obj);
        if (r < 0) {
                se_object_unref(obj);
                return r;
        }
        *ret = obj;
        return 0;
}

int se_decode_object_flags(const json_t *json, enum se_kind kind, const char *default_ns,
                           unsigned flags, struct se_object **ret, struct se_decode_error *err)
{
        *ret = NULL;
        if (err)
                err->path[0] = err->message[0] = '\0';
        if (!json_is_object(json)) {
                struct dctx d = { .err = err };
                return model_dctx_fail(&d, NULL, "expected an object, got %s",
                                       model_json_type_name(json));
        }
        /* Decode twice: the first build measures the object, the second
         * lays it out in a single exact allocation. Objects live long in the
         * store; this halves what a pod costs there. */
        struct se_object *probe;
        int r = decode_sized(json, kind, default_ns, flags, 0, &probe, err);
        if (r < 0)
                return r;
        size_t need = probe->arena.requested;
        se_object_unref(probe);
        return decode_sized(json, kind, default_ns, flags, need, ret, err);
}

int se_decode_object_as(const json_t *json, enum se_kind kind, const char *default_ns,
                        struct se_object **ret, struct se_decode_error *err)
{
        return se_decode_object_flags(json, kind, default_ns, 0, ret, err);
}

int se_decode_object(const json_t *json, const char *default_ns, struct se_object **ret,
                     struct se_decode_error *err)
{
        return se_decode_object_flagged(json, default_ns, 0, ret, err);
}

int se_decode_object_flagged(const json_t *json, const char *default_ns, unsigned flags,
                             struct se_object **ret, struct se_decode_error *err)
{
        *ret = NULL;
        if (err)
                err->path[0] = err->message[0] = '\0';
        struct dctx d = { .err = err };
        if (!json_is_object(json))
                return model_dctx_fail(&d, NULL, "expected an object, got %s",
                                       model_json_type_name(json));
        const json_t *kind_j = json_object_get(json, "kind");
        const json_t *api_j = json_object_get(json, "apiVersion");
        if (!json_is_string(kind_j) || !*json_string_value(kind_j))
                return model_dctx_fail(&d, "kind", "Required value: every object needs a kind");
        if (!json_is_string(api_j) || !*json_string_value(api_j))
                return model_dctx_fail(&d, "apiVersion",
                                       "Required value: every object needs an apiVersion");
        const char *kind_name = json_string_value(kind_j);
        const char *api = json_string_value(api_j);
        for (int k = 0; k < SE_KIND_COUNT; k++) {
                if (strcmp(kind_name, se_kind_name(k)) != 0)
                        continue;
                if (strcmp(api, se_kind_api_version(k)) != 0)
                        return model_dctx_fail(&d, "apiVersion",
                                               "%s is served as \"%s\", not \"%s\"", kind_name,
                                               se_kind_api_version(k), api);
                return se_decode_object_flags(json, k, default_ns, flags, ret, err);
        }
        return 1;
}

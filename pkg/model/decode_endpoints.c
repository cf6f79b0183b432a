/* Endpoints (v1) and EndpointSlices (discovery.k8s.io/v1). */
#include <errno.h>
#include <string.h>

#include "decode_internal.h"

int decode_object_ref(struct dctx *d, const json_t *obj, const char *key,
                      struct se_object_ref **ret)
{
        const json_t *ref;
        int r = get_object(d, obj, key, &ref);
        if (r < 0 || !ref)
                return r;
        struct se_object_ref *o = se_arena_alloc(d->arena, sizeof(*o));
        if (!o)
                return -ENOMEM;
        size_t old = dctx_push_key(d, key);
        if ((r = get_string(d, ref, "kind", &o->kind)) < 0 ||
            (r = get_string(d, ref, "namespace", &o->namespace)) < 0 ||
            (r = get_string(d, ref, "name", &o->name)) < 0 ||
            (r = get_string(d, ref, "uid", &o->uid)) < 0 ||
            (r = get_string(d, ref, "resourceVersion", &o->resource_version)) < 0)
                return r;
        dctx_pop(d, old);
        *ret = o;
        return 0;
}

static int decode_addresses(struct dctx *d, const json_t *subset, const char *key,
                            struct se_endpoint_address **ret, uint32_t *ret_n)
{
        const json_t *arr;
        int r = get_array(d, subset, key, &arr);
        if (r < 0 || !arr)
                return r;
        size_t n = json_array_size(arr);
        struct se_endpoint_address *a = dctx_array(d, n, sizeof(*a));
        if (n && !a)
                return -ENOMEM;
        size_t old = dctx_push_key(d, key);
        for (size_t i = 0; i < n; i++) {
                const json_t *e = json_array_get(arr, i);
                size_t o2 = dctx_push_index(d, i);
                if (!json_is_object(e))
                        return dctx_fail(d, NULL, "expected an object, got %s", json_type_name(e));
                if ((r = get_string(d, e, "ip", &a[i].ip)) < 0 ||
                    (r = get_string(d, e, "hostname", &a[i].hostname)) < 0 ||
                    (r = get_string(d, e, "nodeName", &a[i].node_name)) < 0 ||
                    (r = decode_object_ref(d, e, "targetRef", &a[i].target_ref)) < 0)
                        return r;
                if ((r = check_ip(d, "ip", a[i].ip ? a[i].ip : "")) < 0)
                        return r;
                dctx_pop(d, o2);
        }
        dctx_pop(d, old);
        *ret = a;
        *ret_n = (uint32_t)n;
        return 0;
}

static int decode_ep_ports(struct dctx *d, const json_t *subset, struct se_endpoint_subset *s)
{
        const json_t *arr;
        int r = get_array(d, subset, "ports", &arr);
        if (r < 0 || !arr)
                return r;
        size_t n = json_array_size(arr);
        s->ports = dctx_array(d, n, sizeof(*s->ports));
        if (n && !s->ports)
                return -ENOMEM;
        size_t old = dctx_push_key(d, "ports");
        for (size_t i = 0; i < n; i++) {
                const json_t *e = json_array_get(arr, i);
                struct se_endpoint_port *p = &s->ports[i];
                size_t o2 = dctx_push_index(d, i);
                if (!json_is_object(e))
                        return dctx_fail(d, NULL, "expected an object, got %s", json_type_name(e));
                if ((r = get_string(d, e, "name", &p->name)) < 0 ||
                    (r = get_int32(d, e, "port", &p->port, NULL)) < 0 ||
                    (r = get_protocol(d, e, "protocol", &p->protocol, NULL)) < 0 ||
                    (r = get_string(d, e, "appProtocol", &p->app_protocol)) < 0)
                        return r;
                if ((r = check_port(d, "port", p->port, false)) < 0)
                        return r;
                dctx_pop(d, o2);
        }
        dctx_pop(d, old);
        s->n_ports = (uint32_t)n;
        return 0;
}

int decode_endpoints(struct dctx *d, const json_t *json, struct se_endpoints *ep)
{
        const json_t *arr;
        int r = get_array(d, json, "subsets", &arr);
        if (r < 0 || !arr)
                return r;
        size_t n = json_array_size(arr);
        ep->subsets = dctx_array(d, n, sizeof(*ep->subsets));
        if (n && !ep->subsets)
                return -ENOMEM;
        size_t old = dctx_push_key(d, "subsets");
        for (size_t i = 0; i < n; i++) {
                const json_t *e = json_array_get(arr, i);
                struct se_endpoint_subset *s = &ep->subsets[i];
                size_t o2 = dctx_push_index(d, i);
                if (!json_is_object(e))
                        return dctx_fail(d, NULL, "expected an object, got %s", json_type_name(e));
                if ((r = decode_addresses(d, e, "addresses", &s->addresses, &s->n_addresses)) < 0 ||
                    (r = decode_addresses(d, e, "notReadyAddresses", &s->not_ready,
                                          &s->n_not_ready)) < 0 ||
                    (r = decode_ep_ports(d, e, s)) < 0)
                        return r;
                dctx_pop(d, o2);
        }
        dctx_pop(d, old);
        ep->n_subsets = (uint32_t)n;
        return 0;
}

static int decode_slice_endpoint(struct dctx *d, const json_t *e, const char *addr_type,
                                 struct se_slice_endpoint *se)
{
        const json_t *cond, *hints;
        int r;
        if (!json_is_object(e))
                return dctx_fail(d, NULL, "expected an object, got %s", json_type_name(e));
        if ((r = get_strarray(d, e, "addresses", &se->addresses)) < 0 ||
            (r = get_string(d, e, "hostname", &se->hostname)) < 0 ||
            (r = decode_object_ref(d, e, "targetRef", &se->target_ref)) < 0 ||
            (r = get_string(d, e, "nodeName", &se->node_name)) < 0 ||
            (r = get_string(d, e, "zone", &se->zone)) < 0 ||
            (r = get_object(d, e, "conditions", &cond)) < 0 ||
            (r = get_object(d, e, "hints", &hints)) < 0)
                return r;
        if (se->addresses.n < 1 || se->addresses.n > 100)
                return dctx_fail(d, "addresses",
                                 se->addresses.n ?
                                         "Too many: must have at most 100 items" :
                                         "Required value: must contain at least 1 address");
        if (strcmp(addr_type, "FQDN") != 0) {
                size_t old = dctx_push_key(d, "addresses");
                for (uint32_t i = 0; i < se->addresses.n; i++) {
                        size_t o2 = dctx_push_index(d, i);
                        if ((r = check_ip(d, NULL, se->addresses.v[i])) < 0)
                                return r;
                        dctx_pop(d, o2);
                }
                dctx_pop(d, old);
        }
        if (cond) {
                size_t old = dctx_push_key(d, "conditions");
                if ((r = get_bool(d, cond, "ready", &se->ready)) < 0 ||
                    (r = get_bool(d, cond, "serving", &se->serving)) < 0 ||
                    (r = get_bool(d, cond, "terminating", &se->terminating)) < 0)
                        return r;
                dctx_pop(d, old);
        }
        if (hints) {
                /* forZones / forNodes are lists of {name: ...} */
                const char *keys[] = { "forZones", "forNodes" };
                struct se_strs *outs[] = { &se->hint_zones, &se->hint_nodes };
                size_t old = dctx_push_key(d, "hints");
                for (int k = 0; k < 2; k++) {
                        const json_t *arr;
                        if ((r = get_array(d, hints, keys[k], &arr)) < 0)
                                return r;
                        if (!arr)
                                continue;
                        size_t n = json_array_size(arr);
                        outs[k]->v = dctx_array(d, n + 1, sizeof(char *));
                        if (!outs[k]->v)
                                return -ENOMEM;
                        size_t o2 = dctx_push_key(d, keys[k]);
                        for (size_t i = 0; i < n; i++) {
                                const json_t *h = json_array_get(arr, i);
                                size_t o3 = dctx_push_index(d, i);
                                if (!json_is_object(h))
                                        return dctx_fail(d, NULL, "expected an object, got %s",
                                                         json_type_name(h));
                                if ((r = get_string(d, h, "name", &outs[k]->v[i])) < 0)
                                        return r;
                                if (!outs[k]->v[i])
                                        return dctx_fail(d, "name", "Required value");
                                dctx_pop(d, o3);
                        }
                        outs[k]->n = (uint32_t)n;
                        dctx_pop(d, o2);
                }
                dctx_pop(d, old);
        }
        return 0;
}

static int decode_slice_ports(struct dctx *d, const json_t *json, struct se_endpoint_slice *es)
{
        const json_t *arr;
        int r = get_array(d, json, "ports", &arr);
        if (r < 0 || !arr)
                return r;
        es->has_ports = true;
        size_t n = json_array_size(arr);
        es->ports = dctx_array(d, n, sizeof(*es->ports));
        if (n && !es->ports)
                return -ENOMEM;
        size_t old = dctx_push_key(d, "ports");
        for (size_t i = 0; i < n; i++) {
                const json_t *e = json_array_get(arr, i);
                struct se_slice_port *p = &es->ports[i];
                size_t o2 = dctx_push_index(d, i);
                if (!json_is_object(e))
                        return dctx_fail(d, NULL, "expected an object, got %s", json_type_name(e));
                if ((r = get_string(d, e, "name", &p->name)) < 0 ||
                    (r = get_int32(d, e, "port", &p->port, &p->has_port)) < 0 ||
                    (r = get_protocol(d, e, "protocol", &p->protocol, &p->has_protocol)) < 0 ||
                    (r = get_string(d, e, "appProtocol", &p->app_protocol)) < 0)
                        return r;
                if (p->has_port && (r = check_port(d, "port", p->port, false)) < 0)
                        return r;
                dctx_pop(d, o2);
        }
        dctx_pop(d, old);
        es->n_ports = (uint32_t)n;
        return 0;
}

int decode_endpoint_slice(struct dctx *d, const json_t *json, struct se_endpoint_slice *es)
{
        static const char *const types[] = { "IPv4", "IPv6", "FQDN", NULL };
        const json_t *arr;
        int r;
        if ((r = get_string(d, json, "addressType", &es->address_type)) < 0)
                return r;
        if (!es->address_type)
                return dctx_fail(d, "addressType", "Required value");
        if ((r = check_one_of(d, "addressType", es->address_type, types)) < 0)
                return r;
        if ((r = get_array(d, json, "endpoints", &arr)) < 0)
                return r;
        if (arr) {
                size_t n = json_array_size(arr);
                if (n > 1000)
                        return dctx_fail(d, "endpoints",
                                         "Too many: %zu: must have at most 1000 items", n);
                es->endpoints = dctx_array(d, n, sizeof(*es->endpoints));
                if (n && !es->endpoints)
                        return -ENOMEM;
                size_t old = dctx_push_key(d, "endpoints");
                for (size_t i = 0; i < n; i++) {
                        size_t o2 = dctx_push_index(d, i);
                        if ((r = decode_slice_endpoint(d, json_array_get(arr, i), es->address_type,
                                                       &es->endpoints[i])) < 0)
                                return r;
                        dctx_pop(d, o2);
                }
                dctx_pop(d, old);
                es->n_endpoints = (uint32_t)n;
        }
        return decode_slice_ports(d, json, es);
}

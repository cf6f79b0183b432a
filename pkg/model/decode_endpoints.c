/* Endpoints (v1) and EndpointSlices (discovery.k8s.io/v1). */
#include <errno.h>
#include <string.h>

#include "decode_internal.h"

/* The object at key into *o; *present false (and *o untouched) if absent. */
static int decode_object_ref_into(struct dctx *d, const json_t *obj, const char *key,
                                  struct se_object_ref *o, bool *present)
{
        const json_t *ref;
        int r = model_get_object(d, obj, key, &ref);
        *present = false;
        if (r < 0 || !ref)
                return r;
        size_t old = model_dctx_push_key(d, key);
        if ((r = model_get_string(d, ref, "kind", &o->kind)) < 0 ||
            (r = model_get_string(d, ref, "namespace", &o->namespace)) < 0 ||
            (r = model_get_string(d, ref, "name", &o->name)) < 0 ||
            (r = model_get_string(d, ref, "uid", &o->uid)) < 0 ||
            (r = model_get_string(d, ref, "resourceVersion", &o->resource_version)) < 0)
                return r;
        model_dctx_pop(d, old);
        *present = true;
        return 0;
}

static int decode_object_ref(struct dctx *d, const json_t *obj, const char *key,
                             struct se_object_ref **ret)
{
        struct se_object_ref o = { 0 };
        bool present;
        int r = decode_object_ref_into(d, obj, key, &o, &present);
        if (r < 0 || !present)
                return r;
        struct se_object_ref *p = se_arena_alloc(d->arena, sizeof(*p));
        if (!p)
                return -ENOMEM;
        *p = o;
        *ret = p;
        return 0;
}

static int decode_address(struct dctx *d, const json_t *e, void *out, const void *ctx)
{
        struct se_endpoint_address *a = out;
        int r;
        (void)ctx;
        if ((r = model_get_string(d, e, "ip", &a->ip)) < 0 ||
            (r = model_get_string(d, e, "hostname", &a->hostname)) < 0 ||
            (r = model_get_string(d, e, "nodeName", &a->node_name)) < 0 ||
            (r = decode_object_ref(d, e, "targetRef", &a->target_ref)) < 0)
                return r;
        return model_check_ip(d, "ip", a->ip ? a->ip : "");
}

static int decode_ep_port(struct dctx *d, const json_t *e, void *out, const void *ctx)
{
        struct se_endpoint_port *p = out;
        int r;
        (void)ctx;
        if ((r = model_get_string(d, e, "name", &p->name)) < 0 ||
            (r = model_get_int32(d, e, "port", &p->port, NULL)) < 0 ||
            (r = model_get_protocol(d, e, "protocol", &p->protocol, NULL)) < 0 ||
            (r = model_get_string(d, e, "appProtocol", &p->app_protocol)) < 0)
                return r;
        return model_check_port(d, "port", p->port, false);
}

static int decode_subset(struct dctx *d, const json_t *e, void *out, const void *ctx)
{
        struct se_endpoint_subset *s = out;
        int r;
        (void)ctx;
        if ((r = GET_LIST(d, e, "addresses", decode_address, NULL, s->addresses, s->n_addresses)) <
                    0 ||
            (r = GET_LIST(d, e, "notReadyAddresses", decode_address, NULL, s->not_ready,
                          s->n_not_ready)) < 0)
                return r;
        return GET_LIST(d, e, "ports", decode_ep_port, NULL, s->ports, s->n_ports);
}

/* SE_DECODE_SLIM_ENDPOINTS: the subsets are decoded (and so checked) as
 * always, but into a scratch arena; the object keeps their digest and
 * address count only, so neither decode of decode_sized() sizes the
 * object's arena for them. */
static int decode_endpoints_slim(struct dctx *d, const json_t *json, struct se_endpoints *ep)
{
        struct se_arena scratch = SE_ARENA_INIT, *kept = d->arena;
        const char *seen[SE_ARRAY_SIZE(d->seen)];
        struct se_endpoints full = { .obj.kind = SE_KIND_ENDPOINTS };
        /* strings interned now live in the scratch: forget them after */
        memcpy(seen, d->seen, sizeof(seen));
        d->arena = &scratch;
        int r = GET_LIST(d, json, "subsets", decode_subset, NULL, full.subsets, full.n_subsets);
        d->arena = kept;
        memcpy(d->seen, seen, sizeof(seen));
        if (r == 0)
                r = se_endpoints_digest(&full, ep->digest);
        if (r == 0) {
                size_t n = se_endpoints_n_addresses(&full);
                ep->n_addresses = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
                ep->slim = true;
        }
        se_arena_release(&scratch);
        return r;
}

int model_decode_endpoints(struct dctx *d, const json_t *json, struct se_endpoints *ep)
{
        if (d->flags & SE_DECODE_SLIM_ENDPOINTS)
                return decode_endpoints_slim(d, json, ep);
        return GET_LIST(d, json, "subsets", decode_subset, NULL, ep->subsets, ep->n_subsets);
}

/* hints.forZones[] / forNodes[]: {name: ...} entries. */
static int decode_hint(struct dctx *d, const json_t *e, void *out, const void *ctx)
{
        const char **name = out;
        int r;
        (void)ctx;
        if ((r = model_get_string(d, e, "name", name)) < 0)
                return r;
        return *name ? 0 : model_dctx_fail(d, "name", "Required value");
}

/* What decode_slice_endpoint is given: the slice's addressType, and the
 * `more`s its endpoints made so far, to share. */
struct slice_ctx {
        const char *address_type;
        struct se_slice_more_cache *mores;
};

static int decode_slice_endpoint(struct dctx *d, const json_t *e, void *out, const void *ctx)
{
        struct se_slice_endpoint *se = out;
        const struct slice_ctx *sc = ctx;
        const json_t *cond, *hints = NULL;
        bool dns = d->flags & SE_DECODE_DNS_SLICES; /* what cluster DNS reads, no more */
        bool proxy = d->flags & SE_DECODE_PROXY_SLICES; /* what a service proxy reads */
        struct se_slice_endpoint_fields f = { 0 };
        struct se_object_ref ref = { 0 };
        bool has_ref = false;
        int r;
        /* nodeName and zone recur across slices: pooled with SE_DECODE_INTERN */
        if ((r = model_get_strarray(d, e, "addresses", &se->addresses)) < 0 ||
            (!proxy && (r = model_get_string(d, e, "hostname", &se->hostname)) < 0) ||
            (!dns && !proxy &&
             (r = decode_object_ref_into(d, e, "targetRef", &ref, &has_ref)) < 0) ||
            (!dns && (r = model_get_shared_string(d, e, "nodeName", &f.node_name)) < 0) ||
            (!dns && (r = model_get_shared_string(d, e, "zone", &f.zone)) < 0) ||
            (r = model_get_object(d, e, "conditions", &cond)) < 0 ||
            (!dns && (r = model_get_object(d, e, "hints", &hints)) < 0))
                return r;
        if (se->addresses.n < 1 || se->addresses.n > 100)
                return model_dctx_fail(d, "addresses",
                                       se->addresses.n ?
                                               "Too many: must have at most 100 items" :
                                               "Required value: must contain at least 1 address");
        if (strcmp(sc->address_type, "FQDN") != 0) {
                size_t old = model_dctx_push_key(d, "addresses");
                for (uint32_t i = 0; i < se->addresses.n; i++) {
                        size_t o2 = model_dctx_push_index(d, i);
                        if ((r = model_check_ip(d, NULL, se->addresses.v[i])) < 0)
                                return r;
                        model_dctx_pop(d, o2);
                }
                model_dctx_pop(d, old);
        }
        if (cond) {
                size_t old = model_dctx_push_key(d, "conditions");
                if ((r = model_get_bool(d, cond, "ready", &se->ready)) < 0 ||
                    (r = model_get_bool(d, cond, "serving", &se->serving)) < 0 ||
                    (r = model_get_bool(d, cond, "terminating", &se->terminating)) < 0)
                        return r;
                model_dctx_pop(d, old);
        }
        if (hints) {
                size_t old = model_dctx_push_key(d, "hints");
                if ((r = GET_LIST(d, hints, "forZones", decode_hint, NULL, f.hint_zones.v,
                                  f.hint_zones.n)) < 0 ||
                    (r = GET_LIST(d, hints, "forNodes", decode_hint, NULL, f.hint_nodes.v,
                                  f.hint_nodes.n)) < 0)
                        return r;
                model_dctx_pop(d, old);
        }
        f.target_ref = has_ref ? &ref : NULL;
        return se_slice_endpoint_set_more(se, d->arena, &f, sc->mores);
}

static int decode_slice_port(struct dctx *d, const json_t *e, void *out, const void *ctx)
{
        struct se_slice_port *p = out;
        int r;
        (void)ctx;
        if ((r = model_get_string(d, e, "name", &p->name)) < 0 ||
            (r = model_get_int32(d, e, "port", &p->port, &p->has_port)) < 0 ||
            (r = model_get_protocol(d, e, "protocol", &p->protocol, &p->has_protocol)) < 0 ||
            (r = model_get_string(d, e, "appProtocol", &p->app_protocol)) < 0)
                return r;
        return p->has_port ? model_check_port(d, "port", p->port, false) : 0;
}

static int copy_hint_strs(struct dctx *d, struct se_strs *dst, const struct se_strs *src)
{
        *dst = (struct se_strs){ NULL, 0 };
        if (!src->n)
                return 0;
        dst->v = model_dctx_array(d, src->n, sizeof(*dst->v));
        if (!dst->v)
                return -ENOMEM;
        for (uint32_t i = 0; i < src->n; i++)
                if (!(dst->v[i] = model_dctx_strdup(d, src->v[i])))
                        return -ENOMEM;
        dst->n = src->n;
        return 0;
}

/* SE_DECODE_SLIM_SLICES: the endpoints are checked as in a full decode, in
 * a scratch arena, and only their digests and hints are kept. */
static int decode_slim_endpoints(struct dctx *d, const json_t *json, struct se_endpoint_slice *es)
{
        struct se_arena scratch = SE_ARENA_INIT, *kept = d->arena;
        struct se_slice_endpoint *eps = NULL;
        uint32_t n = 0;
        /* the string cache points into the arena in use: none crosses over */
        const char *seen[SE_ARRAY_SIZE(d->seen)];
        struct se_slice_more_cache mores = { 0 };
        const struct slice_ctx sc = { es->address_type, &mores };
        memcpy(seen, d->seen, sizeof(seen));
        memset(d->seen, 0, sizeof(d->seen));
        d->arena = &scratch;
        int r = GET_LIST(d, json, "endpoints", decode_slice_endpoint, &sc, eps, n);
        d->arena = kept;
        memcpy(d->seen, seen, sizeof(seen));
        uint32_t n_hints = 0;
        for (uint32_t i = 0; r == 0 && i < n; i++)
                n_hints += se_slice_endpoint_hints(&eps[i]) != NULL;
        struct se_slice_endpoint_digest *dg = NULL;
        struct se_slice_endpoint_hints *h = NULL;
        if (r == 0 && n && !(dg = model_dctx_array(d, n, sizeof(*dg))))
                r = -ENOMEM;
        if (r == 0 && n_hints && !(h = model_dctx_array(d, n_hints, sizeof(*h))))
                r = -ENOMEM;
        n_hints = 0;
        for (uint32_t i = 0; r == 0 && i < n; i++) {
                se_slice_endpoint_digest(&eps[i], &dg[i]);
                const struct se_slice_endpoint_hints *eh = se_slice_endpoint_hints(&eps[i]);
                if (!eh)
                        continue;
                if ((r = copy_hint_strs(d, &h[n_hints].zones, &eh->zones)) < 0 ||
                    (r = copy_hint_strs(d, &h[n_hints].nodes, &eh->nodes)) < 0)
                        break;
                dg[i].hints = ++n_hints;
        }
        se_arena_release(&scratch);
        if (r < 0)
                return r;
        es->slim = true;
        es->endpoints = NULL;
        es->n_endpoints = n;
        es->digests = dg;
        es->hints = h;
        return 0;
}

int model_decode_endpoint_slice(struct dctx *d, const json_t *json, struct se_endpoint_slice *es)
{
        static const char *const types[] = { "IPv4", "IPv6", "FQDN", NULL };
        int r;
        if ((r = model_get_string(d, json, "addressType", &es->address_type)) < 0)
                return r;
        if (!es->address_type)
                return model_dctx_fail(d, "addressType", "Required value");
        if ((r = model_check_one_of(d, "addressType", es->address_type, types)) < 0)
                return r;
        const json_t *eps = json_object_get(json, "endpoints");
        if (json_is_array(eps) && json_array_size(eps) > 1000)
                return model_dctx_fail(d, "endpoints",
                                       "Too many: %zu: must have at most 1000 items",
                                       json_array_size(eps));
        if (d->flags & SE_DECODE_SLIM_SLICES)
                r = decode_slim_endpoints(d, json, es);
        else {
                struct se_slice_more_cache mores = { 0 };
                const struct slice_ctx sc = { es->address_type, &mores };
                r = GET_LIST(d, json, "endpoints", decode_slice_endpoint, &sc, es->endpoints,
                             es->n_endpoints);
        }
        if (r < 0 ||
            (r = GET_LIST(d, json, "ports", decode_slice_port, NULL, es->ports, es->n_ports)) < 0)
                return r;
        es->has_ports = json_is_array(json_object_get(json, "ports"));
        return 0;
}

/* Fuzz target: SE_DECODE_SLIM_SLICES. The input as one JSON EndpointSlice
 * decodes with and without the flag to the same verdict (and the slim one
 * to the full one's digests); as a manifest, every Service's slice plan
 * over the slim forms of its slices equals the plan over the full ones. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <svcenv/decode.h>
#include <svcenv/encode.h>
#include <svcenv/endpoints.h>
#include <svcenv/manifest.h>
#include <svcenv/store.h>
#include <svcenv/topology.h>

#include "fuzz.h"

#define MAX_SLICES 64

static void check(bool ok)
{
        if (!ok)
                abort();
}

static bool strs_equal(const struct se_strs *a, const struct se_strs *b)
{
        if (a->n != b->n)
                return false;
        for (uint32_t i = 0; i < a->n; i++)
                if (strcmp(a->v[i], b->v[i]) != 0)
                        return false;
        return true;
}

static void check_forms(const struct se_endpoint_slice *full, const struct se_endpoint_slice *slim)
{
        check(slim->slim && !slim->endpoints && slim->n_endpoints == full->n_endpoints);
        uint32_t n_hints = 0;
        for (uint32_t i = 0; i < full->n_endpoints; i++) {
                const struct se_slice_endpoint *e = &full->endpoints[i];
                struct se_slice_endpoint_digest d;
                se_slice_endpoint_digest(e, &d);
                const struct se_slice_endpoint_digest *s = &slim->digests[i];
                check(d.identity == s->identity && d.beyond == s->beyond && d.ready == s->ready);
                bool hinted =
                        se_slice_endpoint_hint_zones(e)->n || se_slice_endpoint_hint_nodes(e)->n;
                check(hinted ? s->hints == ++n_hints : s->hints == 0);
                if (hinted)
                        check(strs_equal(se_slice_endpoint_hint_zones(e),
                                         &slim->hints[s->hints - 1].zones) &&
                              strs_equal(se_slice_endpoint_hint_nodes(e),
                                         &slim->hints[s->hints - 1].nodes));
        }
        json_t *j = se_encode_object(&slim->obj);
        check(!j); /* the encoder refuses a slim slice */
}

static void decode_both(const json_t *j)
{
        struct se_object *full = NULL, *slim = NULL;
        struct se_decode_error ef, es;
        int rf = se_decode_object_flags(j, SE_KIND_ENDPOINT_SLICE, NULL, 0, &full, &ef);
        int rs = se_decode_object_flags(j, SE_KIND_ENDPOINT_SLICE, NULL, SE_DECODE_SLIM_SLICES,
                                        &slim, &es);
        check(rf == rs);
        if (rf == -EINVAL)
                check(strcmp(ef.path, es.path) == 0 && strcmp(ef.message, es.message) == 0);
        if (rf == 0)
                check_forms(se_endpoint_slice_of(full), se_endpoint_slice_of(slim));
        se_object_unref(full);
        se_object_unref(slim);
}

static struct se_endpoint_slice *slim_of(const struct se_object *o)
{
        json_t *j = se_encode_object(o);
        struct se_object *s = NULL;
        struct se_decode_error e;
        if (j && se_decode_object_flags(j, SE_KIND_ENDPOINT_SLICE, NULL, SE_DECODE_SLIM_SLICES, &s,
                                        &e) < 0)
                abort(); /* what the encoder writes decodes again */
        json_decref(j);
        if (s)
                check_forms(se_endpoint_slice_of(o), se_endpoint_slice_of(s));
        return (struct se_endpoint_slice *)s;
}

static bool same_json(const struct se_object *a, const struct se_object *b)
{
        json_t *ja = se_encode_object(a), *jb = se_encode_object(b);
        char *da = ja ? json_dumps(ja, JSON_COMPACT) : NULL;
        char *db = jb ? json_dumps(jb, JSON_COMPACT) : NULL;
        bool eq = da && db && strcmp(da, db) == 0;
        if (!da || !db) /* out of memory: nothing to compare */
                eq = true;
        free(da);
        free(db);
        json_decref(ja);
        json_decref(jb);
        return eq;
}

static size_t index_of(const struct se_endpoint_slice *s, const struct se_endpoint_slice *const *v,
                       size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (v[i] == s)
                        return i;
        abort();
}

static void check_plans(const struct se_slices_plan *a, const struct se_slices_plan *b,
                        const struct se_endpoint_slice *const *full,
                        const struct se_endpoint_slice *const *slim, size_t n)
{
        check(a->action == b->action && a->n_create == b->n_create && a->n_update == b->n_update &&
              a->n_remove == b->n_remove && a->n_unchanged == b->n_unchanged &&
              a->n_events == b->n_events && a->pods_missing_node == b->pods_missing_node &&
              a->endpoints_added == b->endpoints_added &&
              a->endpoints_removed == b->endpoints_removed);
        for (uint32_t i = 0; i < a->n_create; i++)
                check(same_json(&a->create[i]->obj, &b->create[i]->obj));
        for (uint32_t i = 0; i < a->n_update; i++)
                check(same_json(&a->update[i]->obj, &b->update[i]->obj));
        for (uint32_t i = 0; i < a->n_remove; i++)
                check(index_of(a->remove[i], full, n) == index_of(b->remove[i], slim, n));
        for (uint32_t i = 0; i < a->n_unchanged; i++)
                check(index_of(a->unchanged[i], full, n) == index_of(b->unchanged[i], slim, n));
        for (uint32_t i = 0; i < a->n_events; i++)
                check(a->events[i].warning == b->events[i].warning &&
                      strcmp(a->events[i].reason, b->events[i].reason) == 0 &&
                      strcmp(a->events[i].message, b->events[i].message) == 0);
}

static const struct se_node *get_node(void *data, const char *name)
{
        return se_node_of(se_store_get(data, SE_KIND_NODE, "", name));
}

static void plan_service(struct se_store *s, struct se_topology_cache *const t[2],
                         const struct se_service *svc)
{
        const char *ns = svc->obj.meta.namespace;
        const struct se_object **pods = NULL, **slices = NULL;
        long n_pods = se_store_list(s, SE_KIND_POD, ns, &pods);
        long n_slices = se_store_list(s, SE_KIND_ENDPOINT_SLICE, ns, &slices);
        struct se_endpoint_slice *slim[MAX_SLICES];
        size_t n = 0;
        for (long i = 0; i < n_slices && n < MAX_SLICES; i++, n++)
                if (!(slim[n] = slim_of(slices[i])))
                        break;
        struct se_endpoints_input in = { .namespace = ns,
                                         .name = svc->obj.meta.name,
                                         .svc = svc,
                                         .pods = (const struct se_pod *const *)pods,
                                         .n_pods = n_pods > 0 ? (size_t)n_pods : 0,
                                         .get_node = get_node,
                                         .node_data = s,
                                         .trigger_time_ns = 1 };
        struct se_endpoints_opts opts = { .max_endpoints_per_slice = 2 };
        struct se_slices_plan a, b;
        in.topology = t[0];
        int ra = se_slices_plan(&in, (const struct se_endpoint_slice *const *)slices, n, &opts, &a);
        in.topology = t[1];
        int rb = se_slices_plan(&in, (const struct se_endpoint_slice *const *)slim, n, &opts, &b);
        if (ra == 0 && rb == 0)
                check_plans(&a, &b, (const struct se_endpoint_slice *const *)slices,
                            (const struct se_endpoint_slice *const *)slim, n);
        if (ra == 0)
                se_slices_plan_release(&a);
        if (rb == 0)
                se_slices_plan_release(&b);
        for (size_t i = 0; i < n; i++)
                se_object_unref(&slim[i]->obj);
        free(pods);
        free(slices);
}

static void plan_all(const uint8_t *data, size_t size)
{
        struct se_store *s = se_store_new();
        struct se_diag d;
        if (!s || se_manifest_load_buffer(s, "fuzz", (const char *)data, size, NULL, NULL, &d)) {
                se_store_free(s);
                return;
        }
        struct se_topology_cache *t[2] = { se_topology_cache_new(), se_topology_cache_new() };
        const struct se_object **nodes = NULL;
        long n = se_store_list(s, SE_KIND_NODE, NULL, &nodes);
        for (int k = 0; k < 2; k++)
                if (t[k] && n >= 0)
                        (void)se_topology_cache_set_nodes(
                                t[k], (const struct se_node *const *)nodes, (size_t)n);
        free(nodes);
        const struct se_object **svcs = NULL;
        n = t[0] && t[1] ? se_store_list(s, SE_KIND_SERVICE, NULL, &svcs) : 0;
        for (long i = 0; i < n; i++)
                plan_service(s, t, se_service_of(svcs[i]));
        free(svcs);
        se_topology_cache_free(t[0]);
        se_topology_cache_free(t[1]);
        se_store_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        json_t *j = json_loadb((const char *)data, size, 0, NULL);
        if (json_is_object(j))
                decode_both(j);
        json_decref(j);
        plan_all(data, size);
        return 0;
}

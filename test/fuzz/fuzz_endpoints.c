/* Fuzz target: any cluster the decoder accepts through both planners, for
 * every Service and against the Endpoints and slices it holds (twice: the
 * second pass plans against the first pass's output), with a topology cache
 * made from its Nodes. */
#include <stdlib.h>

#include <svcenv/endpoints.h>
#include <svcenv/manifest.h>
#include <svcenv/store.h>
#include <svcenv/topology.h>

#include "fuzz.h"

static const struct se_node *get_node(void *data, const char *name)
{
        return se_node_of(se_store_get(data, SE_KIND_NODE, "", name));
}

static void plan_service(struct se_store *s, struct se_topology_cache *t,
                         const struct se_service *svc)
{
        const char *ns = svc->obj.meta.namespace, *name = svc->obj.meta.name;
        const struct se_object **pods = NULL, **slices = NULL;
        long n_pods = se_store_list(s, SE_KIND_POD, ns, &pods);
        long n_slices = se_store_list(s, SE_KIND_ENDPOINT_SLICE, ns, &slices);
        struct se_endpoints_input in = { .namespace = ns,
                                         .name = name,
                                         .svc = svc,
                                         .pods = (const struct se_pod *const *)pods,
                                         .n_pods = n_pods > 0 ? (size_t)n_pods : 0,
                                         .get_node = get_node,
                                         .node_data = s,
                                         .trigger_time_ns = 1,
                                         .topology = t };
        struct se_endpoints_opts opts = { .max_endpoints_per_slice = 2 };
        const struct se_endpoints *ep =
                se_endpoints_of(se_store_get(s, SE_KIND_ENDPOINTS, ns, name));
        struct se_service_plan p;
        if (n_slices >= 0 &&
            se_service_plan(&in, ep, (const struct se_endpoint_slice *const *)slices,
                            (size_t)n_slices, &opts, &p) == 0) {
                /* plan again against what the first plan wrote */
                struct se_slices_plan q;
                const struct se_endpoint_slice *mine[64];
                size_t n = 0;
                for (uint32_t i = 0; i < p.slices.n_create && n < 64; i++)
                        mine[n++] = p.slices.create[i];
                for (uint32_t i = 0; i < p.slices.n_update && n < 64; i++)
                        mine[n++] = p.slices.update[i];
                if (se_slices_plan(&in, mine, n, &opts, &q) == 0)
                        se_slices_plan_release(&q);
                struct se_endpoints_plan e;
                if (p.endpoints.obj && se_endpoints_plan(&in, p.endpoints.obj, &opts, &e) == 0)
                        se_endpoints_plan_release(&e);
                se_service_plan_release(&p);
        }
        free(pods);
        free(slices);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct se_store *s = se_store_new();
        struct se_diag d;
        if (!s)
                return 0;
        if (se_manifest_load_buffer(s, "fuzz", (const char *)data, size, NULL, NULL, &d) == 0) {
                struct se_topology_cache *t = se_topology_cache_new();
                const struct se_object **nodes = NULL;
                long n = se_store_list(s, SE_KIND_NODE, NULL, &nodes);
                if (t && n >= 0)
                        (void)se_topology_cache_set_nodes(t, (const struct se_node *const *)nodes,
                                                          (size_t)n);
                free(nodes);
                const struct se_object **svcs = NULL;
                n = se_store_list(s, SE_KIND_SERVICE, NULL, &svcs);
                for (long i = 0; i < n; i++)
                        plan_service(s, t, se_service_of(svcs[i]));
                free(svcs);
                struct se_strv keys = SE_STRV_INIT;
                if (t && se_topology_cache_overloaded(t, &keys) == 0)
                        se_strv_release(&keys);
                se_topology_cache_free(t);
        }
        se_store_free(s);
        return 0;
}

/* Topology Aware Routing in the EndpointSlice planner: 5,000 Nodes in 3
 * zones of unequal CPU, 2,000 Services of 50 pods and 20 of 1,000 (10
 * slices each). Slices are planned from scratch and resynced with
 * topology-mode Auto (the topology cache), with trafficDistribution
 * PreferClose and with no hints, to show what the allocation costs; plus the
 * cache's refresh from the Nodes and its overload check. Prints figures;
 * asserts nothing about time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <svcenv/endpoints.h>
#include <svcenv/store.h>
#include <svcenv/timeutil.h>
#include <svcenv/topology.h>

#include "bench_objects.h"

#define N_NODES 5000
#define N_SMALL 2000
#define N_BIG   20
#define N_SVC   (N_SMALL + N_BIG)

enum mode { M_AUTO, M_CLOSE, M_NONE, M_COUNT };
static const char *const mode_names[M_COUNT] = { "topology-mode Auto", "PreferClose", "no hints" };

static struct se_service *mk_service(int i, enum mode m)
{
        char name[32], ip[32];
        struct se_service *s = (struct se_service *)se_object_new(SE_KIND_SERVICE);
        struct se_object *o = &s->obj;
        snprintf(name, sizeof(name), "svc-%05d", i);
        o->meta.name = dup(o, name);
        o->meta.namespace = "bench";
        o->meta.uid = dup(o, name);
        one_kv(o, &s->selector, "svc", name);
        if (m == M_AUTO)
                one_kv(o, &o->meta.annotations, SE_TOPOLOGY_MODE_ANNOTATION, "Auto");
        if (m == M_CLOSE)
                s->traffic_distribution = "PreferClose";
        snprintf(ip, sizeof(ip), "10.96.%d.%d", i / 250, i % 250 + 1);
        s->cluster_ip = dup(o, ip);
        s->ports = se_arena_alloc(&o->arena, sizeof(*s->ports));
        s->ports[0] = (struct se_service_port){ .name = "http", .port = 80 };
        s->ports[0].target_port.num = 8080;
        s->n_ports = 1;
        return s;
}

static void fill(struct se_store *st)
{
        char name[64], zone[16], ip[32];
        for (int n = 0; n < N_NODES; n++) {
                struct se_node *node = (struct se_node *)se_object_new(SE_KIND_NODE);
                struct se_object *o = &node->obj;
                snprintf(name, sizeof(name), "node-%04d", n);
                o->meta.name = dup(o, name);
                o->meta.namespace = "";
                snprintf(zone, sizeof(zone), "zone-%c", 'a' + n % 3);
                one_kv(o, &o->meta.labels, SE_TOPOLOGY_ZONE_LABEL, zone);
                node->ready = SE_TRUE;
                node->allocatable_cpu_nanos = (int64_t)(4 << (n % 3)) * 1000000000;
                se_store_put(st, o);
        }
        size_t pod = 0;
        for (int i = 0; i < N_SVC; i++) {
                int n_pods = i < N_BIG ? 1000 : 50;
                for (int k = 0; k < n_pods; k++, pod++) {
                        struct se_pod *p = (struct se_pod *)se_object_new(SE_KIND_POD);
                        struct se_object *po = &p->obj;
                        snprintf(name, sizeof(name), "svc-%05d-%04d", i, k);
                        po->meta.name = dup(po, name);
                        po->meta.namespace = "bench";
                        po->meta.uid = dup(po, name);
                        snprintf(name, sizeof(name), "svc-%05d", i);
                        one_kv(po, &po->meta.labels, "svc", name);
                        /* pods spread evenly, CPU is not: hints must move */
                        snprintf(name, sizeof(name), "node-%04zu", (pod * 7) % N_NODES);
                        p->node_name = dup(po, name);
                        p->phase = "Running";
                        snprintf(ip, sizeof(ip), "10.%zu.%zu.%zu", 128 + pod / 65536,
                                 pod / 256 % 256, pod % 256);
                        p->pod_ips.v = se_arena_alloc(&po->arena, sizeof(char *));
                        p->pod_ips.v[0] = dup(po, ip);
                        p->pod_ips.n = 1;
                        p->pod_ip = p->pod_ips.v[0];
                        p->conditions = se_arena_alloc(&po->arena, sizeof(*p->conditions));
                        p->conditions[0].type = "Ready";
                        p->conditions[0].status = pod % 20 == 0 ? "False" : "True";
                        p->n_conditions = 1;
                        se_store_put(st, po);
                }
        }
}

static const struct se_node *get_node(void *data, const char *name)
{
        return se_node_of(se_store_get(data, SE_KIND_NODE, "", name));
}

static double secs(uint64_t t0)
{
        return (double)(se_now_mono_ns() - t0) / 1e9;
}

/* Plans every Service (against prev's slices when given, keeping them in
 * out otherwise); returns the planner time. */
static double run(struct se_store *st, struct se_service **svcs, struct se_topology_cache *t,
                  struct se_endpoint_slice ***prev, uint32_t *n_prev,
                  struct se_endpoint_slice ***out, uint32_t *n_out, size_t *unchanged,
                  size_t *hinted)
{
        double total = 0;
        for (int i = 0; i < N_SVC; i++) {
                const struct se_object **pods;
                long n_pods = se_store_select(st, SE_KIND_POD, "bench", &svcs[i]->selector, &pods);
                if (n_pods < 0)
                        abort();
                struct se_endpoints_input in = { .namespace = "bench",
                                                 .name = svcs[i]->obj.meta.name,
                                                 .svc = svcs[i],
                                                 .pods = (const struct se_pod *const *)pods,
                                                 .n_pods = (size_t)n_pods,
                                                 .get_node = get_node,
                                                 .node_data = st,
                                                 .topology = t };
                struct se_slices_plan p;
                uint64_t t0 = se_now_mono_ns();
                if (se_slices_plan(&in,
                                   prev ? (const struct se_endpoint_slice *const *)prev[i] : NULL,
                                   prev ? n_prev[i] : 0, NULL, &p) < 0)
                        abort();
                total += secs(t0);
                *unchanged += p.action == SE_EP_UNCHANGED;
                if (out) {
                        out[i] = calloc(p.n_create ? p.n_create : 1, sizeof(**out));
                        for (uint32_t k = 0; k < p.n_create; k++) {
                                out[i][k] = p.create[k];
                                se_object_ref(&p.create[k]->obj);
                                for (uint32_t e = 0; e < p.create[k]->n_endpoints; e++)
                                        *hinted += se_slice_endpoint_hint_zones(
                                                           &p.create[k]->endpoints[e])
                                                           ->n > 0;
                        }
                        n_out[i] = p.n_create;
                }
                se_slices_plan_release(&p);
                free(pods);
        }
        return total;
}

static long peak_rss_kb(void)
{
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        return ru.ru_maxrss;
}

int main(void)
{
        struct se_store *st = se_store_new();
        fill(st);
        const struct se_object **nodes;
        long n_nodes = se_store_list(st, SE_KIND_NODE, NULL, &nodes);
        struct se_topology_cache *t = se_topology_cache_new();
        uint64_t t0 = se_now_mono_ns();
        for (int k = 0; k < 10; k++)
                if (se_topology_cache_set_nodes(t, (const struct se_node *const *)nodes,
                                                (size_t)n_nodes) < 0)
                        abort();
        printf("bench_topology: %ld nodes in %zu zones (shares %.3f/%.3f/%.3f), %d services, "
               "%d pods\n",
               n_nodes, se_topology_cache_zones(t), se_topology_cache_ratio(t, "zone-a"),
               se_topology_cache_ratio(t, "zone-b"), se_topology_cache_ratio(t, "zone-c"), N_SVC,
               N_SMALL * 50 + N_BIG * 1000);
        printf("  cache refresh from the nodes: %.2f ms\n", secs(t0) / 10 * 1e3);
        int rc = 0;
        for (int m = 0; m < M_COUNT; m++) {
                struct se_service **svcs = calloc(N_SVC, sizeof(*svcs));
                for (int i = 0; i < N_SVC; i++)
                        svcs[i] = mk_service(i, (enum mode)m);
                struct se_endpoint_slice ***slices = calloc(N_SVC, sizeof(*slices));
                uint32_t *n_slices = calloc(N_SVC, sizeof(*n_slices));
                size_t unchanged = 0, hinted = 0, again = 0, dummy = 0;
                double scratch = run(st, svcs, m == M_AUTO ? t : NULL, NULL, NULL, slices, n_slices,
                                     &unchanged, &hinted);
                double resync = run(st, svcs, m == M_AUTO ? t : NULL, slices, n_slices, NULL, NULL,
                                    &again, &dummy);
                printf("  %-18s from scratch %.3f s (%.0f services/s, %zu endpoints hinted); "
                       "resync %.3f s (%.0f services/s, %zu unchanged)\n",
                       mode_names[m], scratch, N_SVC / scratch, hinted, resync, N_SVC / resync,
                       again);
                if (again != N_SVC) {
                        printf("  unexpected: a resync wanted writes\n");
                        rc = 1;
                }
                if (m == M_AUTO) {
                        struct se_strv keys = SE_STRV_INIT;
                        t0 = se_now_mono_ns();
                        if (se_topology_cache_overloaded(t, &keys) < 0)
                                abort();
                        printf("  overload check over %d services with hints: %.2f ms (%zu "
                               "overloaded)\n",
                               N_SVC, secs(t0) * 1e3, keys.n);
                        se_strv_release(&keys);
                }
                for (int i = 0; i < N_SVC; i++) {
                        for (uint32_t k = 0; k < n_slices[i]; k++)
                                se_object_unref(&slices[i][k]->obj);
                        free(slices[i]);
                        se_object_unref(&svcs[i]->obj);
                }
                free(slices);
                free(n_slices);
                free(svcs);
        }
        printf("  peak RSS %ld MB\n", peak_rss_kb() / 1024);
        free(nodes);
        se_topology_cache_free(t);
        se_store_free(st);
        return rc;
}

/* Endpoints and EndpointSlices for a cluster at upstream's scalability
 * thresholds: 10,000 Services, 150,000 Pods, 5,000 Nodes in 50 namespaces
 * (100 Services of 250 pods, 1,500 of 30, 8,400 of 9-10, like
 * clusterloader2's load test). Prints figures; asserts nothing about time.
 *
 * Phases: pod selection from the store alone; Endpoints planned from scratch
 * (all creates); slices from scratch; then both again against the objects
 * just computed (the steady state of a resync: all unchanged). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <svcenv/endpoints.h>
#include <svcenv/store.h>
#include <svcenv/timeutil.h>

#include "bench_objects.h"

#define N_NS    50
#define N_SVC   10000
#define N_NODES 5000

static int pods_of(int i)
{
        if (i < 100)
                return 250;
        if (i < 1600)
                return 30;
        return i < 1600 + 4400 ? 10 : 9;
}

static void fill(struct se_store *st, size_t *ret_pods)
{
        char name[64], ns[32], ip[32], uid[96];
        for (int n = 0; n < N_NODES; n++) {
                struct se_object *o = se_object_new(SE_KIND_NODE);
                snprintf(name, sizeof(name), "node-%04d", n);
                o->meta.name = dup(o, name);
                o->meta.namespace = "";
                snprintf(ns, sizeof(ns), "zone-%c", 'a' + n % 3);
                one_kv(o, &o->meta.labels, "topology.kubernetes.io/zone", ns);
                se_store_put(st, o);
        }
        size_t pod = 0;
        for (int i = 0; i < N_SVC; i++) {
                snprintf(ns, sizeof(ns), "ns-%02d", i % N_NS);
                snprintf(name, sizeof(name), "svc-%05d", i);
                struct se_service *s = (struct se_service *)se_object_new(SE_KIND_SERVICE);
                struct se_object *o = &s->obj;
                o->meta.name = dup(o, name);
                o->meta.namespace = dup(o, ns);
                snprintf(uid, sizeof(uid), "uid-%s", name);
                o->meta.uid = dup(o, uid);
                one_kv(o, &o->meta.labels, "svc", name);
                one_kv(o, &s->selector, "svc", name);
                snprintf(ip, sizeof(ip), "10.96.%d.%d", i / 250, i % 250 + 1);
                s->cluster_ip = dup(o, ip);
                s->ports = se_arena_alloc(&o->arena, sizeof(*s->ports));
                s->ports[0] = (struct se_service_port){ .name = "http", .port = 80 };
                s->ports[0].target_port.is_string = true;
                s->ports[0].target_port.str = "http";
                s->n_ports = 1;
                se_store_put(st, o);
                for (int k = 0; k < pods_of(i); k++, pod++) {
                        struct se_pod *p = (struct se_pod *)se_object_new(SE_KIND_POD);
                        struct se_object *po = &p->obj;
                        snprintf(name, sizeof(name), "svc-%05d-%03d", i, k);
                        po->meta.name = dup(po, name);
                        po->meta.namespace = dup(po, ns);
                        snprintf(uid, sizeof(uid), "00000000-0000-4000-8000-%012zu", pod);
                        po->meta.uid = dup(po, uid);
                        snprintf(name, sizeof(name), "svc-%05d", i);
                        one_kv(po, &po->meta.labels, "svc", name);
                        snprintf(name, sizeof(name), "node-%04zu", pod / 30);
                        p->node_name = dup(po, name);
                        p->phase = "Running";
                        snprintf(ip, sizeof(ip), "10.%zu.%zu.%zu", 128 + pod / 65536,
                                 pod / 256 % 256, pod % 256);
                        p->pod_ips.v = se_arena_alloc(&po->arena, sizeof(char *));
                        p->pod_ips.v[0] = dup(po, ip);
                        p->pod_ips.n = 1;
                        p->pod_ip = p->pod_ips.v[0];
                        p->conditions = se_arena_alloc(&po->arena, sizeof(*p->conditions));
                        p->conditions[0] = (struct se_pod_condition){
                                .type = "Ready", .status = pod % 20 == 0 ? "False" : "True"
                        };
                        p->n_conditions = 1;
                        if (pod % 50 == 1)
                                po->meta.deletion_timestamp = "2026-11-30T08:00:00Z";
                        p->containers = se_arena_alloc(&po->arena, sizeof(*p->containers));
                        p->containers[0].name = "main";
                        p->containers[0].ports =
                                se_arena_alloc(&po->arena, sizeof(*p->containers[0].ports));
                        p->containers[0].ports[0] =
                                (struct se_container_port){ .name = "http",
                                                            .container_port = 8080 };
                        p->containers[0].n_ports = 1;
                        p->n_containers = 1;
                        se_store_put(st, po);
                }
        }
        *ret_pods = pod;
}

static const struct se_node *get_node(void *data, const char *name)
{
        return se_node_of(se_store_get(data, SE_KIND_NODE, "", name));
}

struct result {
        struct se_endpoints **eps;
        struct se_endpoint_slice **slices;
        size_t n_slices, cap_slices;
        size_t counts[5]; /* by action */
        size_t objects, addresses;
        double plan_s; /* time in the planner alone */
};

static double secs(uint64_t t0)
{
        return (double)(se_now_mono_ns() - t0) / 1e9;
}

static void run(struct se_store *st, const struct se_object **svcs, long n_svc, bool slices,
                struct result *prev, struct result *out)
{
        memset(out->counts, 0, sizeof(out->counts));
        for (long i = 0; i < n_svc; i++) {
                const struct se_service *svc = se_service_of(svcs[i]);
                const struct se_object **pods;
                long n_pods = se_store_select(st, SE_KIND_POD, svc->obj.meta.namespace,
                                              &svc->selector, &pods);
                if (n_pods < 0)
                        abort();
                struct se_endpoints_input in = {
                        .namespace = svc->obj.meta.namespace,
                        .name = svc->obj.meta.name,
                        .svc = svc,
                        .pods = (const struct se_pod *const *)pods,
                        .n_pods = (size_t)n_pods,
                        .get_node = get_node,
                        .node_data = st,
                        .trigger_time_ns = 1764489600000000000LL,
                };
                if (!slices) {
                        struct se_endpoints_plan p;
                        const struct se_endpoints *have = prev ? prev->eps[i] : NULL;
                        uint64_t t = se_now_mono_ns();
                        if (se_endpoints_plan(&in, have, NULL, &p) < 0)
                                abort();
                        out->plan_s += secs(t);
                        out->counts[p.action]++;
                        if (p.obj) {
                                out->eps[i] = p.obj;
                                p.obj = NULL;
                        }
                        se_endpoints_plan_release(&p);
                        free(pods);
                        continue;
                }
                struct se_slices_plan p;
                const struct se_endpoint_slice *const *have = NULL;
                size_t n_have = 0;
                if (prev) {
                        /* slices of service i are stored contiguously: find them */
                        have = (const struct se_endpoint_slice *const *)prev->slices;
                        n_have = prev->n_slices;
                        size_t lo = (size_t)(uintptr_t)prev->eps[i];
                        size_t hi = lo;
                        while (hi < n_have &&
                               strcmp(se_meta_owner_ref(&prev->slices[hi]->obj.meta, 0)->name,
                                      svc->obj.meta.name) == 0)
                                hi++;
                        have += lo;
                        n_have = hi - lo;
                }
                uint64_t t = se_now_mono_ns();
                if (se_slices_plan(&in, have, n_have, NULL, &p) < 0)
                        abort();
                out->plan_s += secs(t);
                out->counts[p.action]++;
                if (!prev) {
                        out->eps[i] = (struct se_endpoints *)(uintptr_t)out->n_slices;
                        for (uint32_t k = 0; k < p.n_create; k++) {
                                if (out->n_slices == out->cap_slices) {
                                        out->cap_slices =
                                                out->cap_slices ? out->cap_slices * 2 : 1024;
                                        out->slices =
                                                realloc(out->slices,
                                                        out->cap_slices * sizeof(*out->slices));
                                }
                                out->slices[out->n_slices++] = p.create[k];
                                se_object_ref(&p.create[k]->obj);
                        }
                }
                se_slices_plan_release(&p);
                free(pods);
        }
}

static long peak_rss_kb(void)
{
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        return ru.ru_maxrss;
}

int main(void)
{
        uint64_t t0 = se_now_mono_ns();
        struct se_store *st = se_store_new();
        size_t total_pods;
        fill(st, &total_pods);
        const struct se_object **svcs;
        long n_svc = se_store_list(st, SE_KIND_SERVICE, NULL, &svcs);
        printf("bench_endpoints: %ld services, %zu pods, %d nodes (store built in %.2f s, peak RSS %ld MB)\n",
               n_svc, total_pods, N_NODES, secs(t0), peak_rss_kb() / 1024);

        t0 = se_now_mono_ns();
        for (long i = 0; i < n_svc; i++) {
                const struct se_object **pods;
                if (se_store_select(st, SE_KIND_POD, svcs[i]->meta.namespace,
                                    &se_service_of(svcs[i])->selector, &pods) < 0)
                        abort();
                free(pods);
        }
        double sel = secs(t0);
        printf("  pod selection (store, per service): %.3f s, %.0f services/s (peak RSS %ld MB)\n",
               sel, (double)n_svc / sel, peak_rss_kb() / 1024);

        struct result ep = { .eps = calloc((size_t)n_svc, sizeof(struct se_endpoints *)) };
        t0 = se_now_mono_ns();
        run(st, svcs, n_svc, false, NULL, &ep);
        double t = secs(t0);
        size_t addrs = 0;
        for (long i = 0; i < n_svc; i++)
                for (uint32_t k = 0; ep.eps[i] && k < ep.eps[i]->n_subsets; k++)
                        addrs += ep.eps[i]->subsets[k].n_addresses +
                                 ep.eps[i]->subsets[k].n_not_ready;
        printf("  Endpoints from scratch: %.3f s with selection; planner %.3f s, %.0f objects/s, "
               "%zu addresses (%zu create, peak RSS %ld MB)\n",
               t, ep.plan_s, (double)n_svc / ep.plan_s, addrs, ep.counts[SE_EP_CREATE],
               peak_rss_kb() / 1024);

        struct result again = { .eps = calloc((size_t)n_svc, sizeof(struct se_endpoints *)) };
        t0 = se_now_mono_ns();
        run(st, svcs, n_svc, false, &ep, &again);
        t = secs(t0);
        printf("  Endpoints resync against the stored objects: %.3f s with selection; planner "
               "%.3f s, %.0f services/s (%zu unchanged)\n",
               t, again.plan_s, (double)n_svc / again.plan_s, again.counts[SE_EP_UNCHANGED]);

        struct result sl = { .eps = calloc((size_t)n_svc, sizeof(struct se_endpoints *)) };
        t0 = se_now_mono_ns();
        run(st, svcs, n_svc, true, NULL, &sl);
        t = secs(t0);
        printf("  EndpointSlices from scratch: %.3f s with selection; planner %.3f s, %zu slices, "
               "%.0f slices/s\n",
               t, sl.plan_s, sl.n_slices, (double)sl.n_slices / sl.plan_s);

        struct result sl2 = { .eps = calloc((size_t)n_svc, sizeof(struct se_endpoints *)) };
        t0 = se_now_mono_ns();
        run(st, svcs, n_svc, true, &sl, &sl2);
        t = secs(t0);
        printf("  EndpointSlices resync: %.3f s with selection; planner %.3f s, %.0f services/s "
               "(%zu unchanged)\n",
               t, sl2.plan_s, (double)n_svc / sl2.plan_s, sl2.counts[SE_EP_UNCHANGED]);
        printf("  peak RSS %ld MB\n", peak_rss_kb() / 1024);

        int rc = again.counts[SE_EP_UNCHANGED] == (size_t)n_svc &&
                                 sl2.counts[SE_EP_UNCHANGED] == (size_t)n_svc ?
                         0 :
                         1;
        if (rc)
                printf("  unexpected: a resync wanted writes\n");
        for (long i = 0; i < n_svc; i++) {
                se_object_unref(ep.eps[i] ? &ep.eps[i]->obj : NULL);
        }
        for (size_t i = 0; i < sl.n_slices; i++)
                se_object_unref(&sl.slices[i]->obj);
        free(sl.slices);
        free(ep.eps);
        free(again.eps);
        free(sl.eps);
        free(sl2.eps);
        free(svcs);
        se_store_free(st);
        return rc;
}

/* A generated cluster for the proxy benchmarks: ClusterIP services svc-N in
 * namespaces bench-(N/1000), each with one EndpointSlice of EPS ready
 * endpoints on node-a / node-b. Shared by bench_proxy and bench_proxysync. */
#ifndef SVCENV_TEST_BENCH_PROXY_CLUSTER_H
#define SVCENV_TEST_BENCH_PROXY_CLUSTER_H

#include <stdio.h>

#include <svcenv/model.h>
#include <svcenv/store.h>

static inline char *bench_dup(struct se_object *o, const char *s)
{
        return se_arena_strdup(&o->arena, s);
}

/* Puts service i and its slice of eps endpoints numbered from first (address
 * 10.128.0.0 + number); eps 0 removes both. 0 or -1. */
static inline int bench_put_service(struct se_store *s, unsigned i, unsigned eps, unsigned first)
{
        char ns[32], name[32], ip[32];
        snprintf(ns, sizeof(ns), "bench-%u", i / 1000);
        snprintf(name, sizeof(name), "svc-%u", i);
        snprintf(ip, sizeof(ip), "10.%u.%u.%u", 96 + i / 65536, (i / 256) % 256, i % 256);
        if (eps == 0) {
                se_store_delete(s, SE_KIND_SERVICE, ns, name);
                se_store_delete(s, SE_KIND_ENDPOINT_SLICE, ns, name);
                return 0;
        }
        struct se_object *o = se_object_new(SE_KIND_SERVICE);
        if (!o)
                return -1;
        struct se_service *svc = (struct se_service *)o;
        o->meta.namespace = bench_dup(o, ns);
        o->meta.name = bench_dup(o, name);
        svc->cluster_ip = bench_dup(o, ip);
        svc->ports = se_arena_alloc(&o->arena, sizeof(*svc->ports));
        svc->n_ports = 1;
        svc->ports[0].name = "http";
        svc->ports[0].port = 80;
        if (se_store_put(s, o) < 0)
                return -1;

        o = se_object_new(SE_KIND_ENDPOINT_SLICE);
        if (!o)
                return -1;
        struct se_endpoint_slice *es = (struct se_endpoint_slice *)o;
        o->meta.namespace = bench_dup(o, ns);
        o->meta.name = bench_dup(o, name);
        struct se_kv *kv = se_arena_alloc(&o->arena, sizeof(*kv));
        kv->key = "kubernetes.io/service-name";
        kv->value = bench_dup(o, name);
        o->meta.labels.items = kv;
        o->meta.labels.n = 1;
        es->address_type = "IPv4";
        es->ports = se_arena_alloc(&o->arena, sizeof(*es->ports));
        es->n_ports = 1;
        es->has_ports = true;
        es->ports[0].name = "http";
        es->ports[0].has_port = true;
        es->ports[0].port = 8080;
        es->endpoints = se_arena_array(&o->arena, eps, sizeof(*es->endpoints));
        es->n_endpoints = eps;
        for (unsigned e = 0; e < eps; e++) {
                unsigned k = first + e;
                char ep[32];
                snprintf(ep, sizeof(ep), "10.%u.%u.%u", 128 + k / 65536, (k / 256) % 256, k % 256);
                es->endpoints[e].addresses.v = se_arena_alloc(&o->arena, sizeof(char *));
                es->endpoints[e].addresses.v[0] = bench_dup(o, ep);
                es->endpoints[e].addresses.n = 1;
                es->endpoints[e].ready = SE_TRUE;
                se_slice_endpoint_set_node(&es->endpoints[e], &o->arena,
                                           (e % 2) ? "node-a" : "node-b");
        }
        return se_store_put(s, o);
}

#endif

/* Benchmark: the environment of one pod in a namespace of 5,000 services
 * (upstream's documented per-namespace maximum) inside clusters of 10,000
 * and 100,000 services. The store indexes by namespace, so the cost should
 * follow the pod's namespace, not the cluster; the array input (a full scan,
 * as the kubelet's lister does) is timed for contrast. Prints figures only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <svcenv/envvars.h>
#include <svcenv/store.h>

static double now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct se_service *make_service(const char *ns, unsigned i)
{
        struct se_service *s = (struct se_service *)se_object_new(SE_KIND_SERVICE);
        char buf[64];
        if (!s)
                abort();
        s->obj.meta.namespace = se_arena_strdup(&s->obj.arena, ns);
        snprintf(buf, sizeof(buf), "svc-%05u", i);
        s->obj.meta.name = se_arena_strdup(&s->obj.arena, buf);
        snprintf(buf, sizeof(buf), "10.%u.%u.%u", 96 + i / 65536, (i / 256) % 256, i % 256);
        s->cluster_ip = se_arena_strdup(&s->obj.arena, buf);
        s->ports = se_arena_array(&s->obj.arena, 2, sizeof(*s->ports));
        s->ports[0] = (struct se_service_port){ .name = "http", .port = 80 };
        s->ports[1] = (struct se_service_port){ .name = "metrics", .port = 9100 };
        s->n_ports = 2;
        return s;
}

static struct se_pod *make_pod(const char *ns)
{
        struct se_pod *p = (struct se_pod *)se_object_new(SE_KIND_POD);
        if (!p)
                abort();
        struct se_arena *a = &p->obj.arena;
        p->obj.meta.namespace = ns;
        p->obj.meta.name = "app-0";
        p->containers = se_arena_array(a, 1, sizeof(*p->containers));
        p->n_containers = 1;
        struct se_container *c = &p->containers[0];
        c->name = "app";
        c->env = se_arena_array(a, 4, sizeof(*c->env));
        c->n_env = 4;
        c->env[0] = (struct se_env_var){ .name = "MODE", .value = "prod" };
        c->env[1] = (struct se_env_var){
                .name = "DB", .value = "$(SVC_00042_SERVICE_HOST):$(SVC_00042_SERVICE_PORT)"
        };
        c->env[2] =
                (struct se_env_var){ .name = "API", .value = "https://$(KUBERNETES_SERVICE_HOST)" };
        c->env[3] = (struct se_env_var){ .name = "SVC_00001_PORT", .value = "$(MODE)" };
        return p;
}

/* µs per pod for the full environment, best of 5 rounds. */
static double time_build(const struct se_envvars_input *in, const struct se_pod *pod, int iters,
                         size_t *ret_vars)
{
        double best = 1e9;
        for (int round = 0; round < 7; round++) {
                double t0 = now();
                for (int i = 0; i < iters; i++) {
                        struct se_env_list l = SE_ENV_LIST_INIT;
                        if (se_envvars_build(in, pod, &pod->containers[0], &l, NULL) < 0)
                                abort();
                        *ret_vars = l.n;
                        se_env_list_release(&l);
                }
                double us = (now() - t0) / iters * 1e6;
                best = us < best ? us : best;
        }
        return best;
}

static void add(struct se_store *s, const struct se_service **all, size_t *n, struct se_service *x)
{
        all[(*n)++] = x;
        se_store_put(s, se_object_ref(&x->obj));
}

int main(void)
{
        const unsigned big = 5000, small = 100;
        /* 10,000 in all (upstream's maxima: 5,000 a namespace, 10,000 a
         * cluster), then 10,000 and 100,000 services in other namespaces */
        const unsigned elsewhere[] = { 10000 - 5000 - 100 - 1, 10000, 100000 };
        struct se_pod *pod_big = make_pod("big"), *pod_small = make_pod("small");
        printf("bench_envvars: one pod's environment; services have 2 named ports (13 variables)\n");
        for (size_t k = 0; k < SE_ARRAY_SIZE(elsewhere); k++) {
                struct se_store *s = se_store_new();
                size_t total = 1 + big + small + elsewhere[k];
                const struct se_service **all = calloc(total, sizeof(*all));
                size_t n = 0;
                struct se_service *m = make_service("default", 0);
                m->obj.meta.name = "kubernetes";
                add(s, all, &n, m);
                for (unsigned i = 0; i < big; i++)
                        add(s, all, &n, make_service("big", i));
                for (unsigned i = 0; i < small; i++)
                        add(s, all, &n, make_service("small", i));
                for (unsigned i = 0; n < total; i++) {
                        char ns[32];
                        snprintf(ns, sizeof(ns), "ns-%u", i / 500); /* 500 per namespace */
                        add(s, all, &n, make_service(ns, i));
                }
                struct se_envvars_input by_ns = { .store = s };
                struct se_envvars_input scan = { .services = all, .n_services = n };
                const struct {
                        const struct se_pod *pod;
                        unsigned svcs;
                        int iters;
                } cases[] = { { pod_big, big, 20 }, { pod_small, small, 2000 } };
                for (size_t c = 0; c < 2; c++) {
                        size_t vars = 0, vars2 = 0, bytes;
                        double us = time_build(&by_ns, cases[c].pod, cases[c].iters, &vars);
                        double us_scan =
                                time_build(&scan, cases[c].pod,
                                           cases[c].iters / 4 ? cases[c].iters / 4 : 1, &vars2);
                        struct se_env_list l = SE_ENV_LIST_INIT;
                        (void)se_envvars_build(&by_ns, cases[c].pod, &cases[c].pod->containers[0],
                                               &l, NULL);
                        se_env_list_size(&l, NULL, &bytes, NULL);
                        se_env_list_release(&l);
                        printf("  cluster %6zu services (%6u elsewhere), namespace %4u: %5zu "
                               "variables %7zu bytes: %8.1f us/pod by namespace, %8.1f us/pod "
                               "by full scan%s\n",
                               n, elsewhere[k], cases[c].svcs, vars, bytes, us, us_scan,
                               vars == vars2 ? "" : " MISMATCH");
                }
                for (size_t i = 0; i < n; i++)
                        se_object_unref(SE_UNCONST(struct se_object, &all[i]->obj));
                free(all);
                se_store_free(s);
        }
        se_object_unref(&pod_big->obj);
        se_object_unref(&pod_small->obj);
        return 0;
}

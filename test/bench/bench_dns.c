/* Benchmark: the cluster DNS zone and its answers. Clusters of 100 and
 * 10,000 Services (every Service with an EndpointSlice of 15 endpoints:
 * 150,000 at 10,000; one in ten headless), built into a zone; the CPU time
 * of the next zone after one Service changed (se_dns_zone_update against a
 * full build); then the CPU time per query of se_dns_answer for the mixes of
 * shared/reference/dns.md (positive A; what ndots:5 clients send: 40 % NOERROR, 60 % NXDOMAIN
 * search candidates; SRV; PTR). Prints figures only. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <svcenv/dns.h>
#include <svcenv/dns_serve.h>
#include <svcenv/store.h>

#include "bench_objects.h"

static double cpu_now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *ns_of(unsigned i)
{
        static char buf[16];
        snprintf(buf, sizeof(buf), "ns-%03u", i % 50);
        return buf;
}

/* A slice of Service svc in ns named svc-abcde, IPv4, with room for n
 * endpoints (the caller fills them and the ports). */
static struct se_endpoint_slice *new_slice(const char *ns, const char *svc, unsigned n)
{
        struct se_endpoint_slice *es =
                (struct se_endpoint_slice *)se_object_new(SE_KIND_ENDPOINT_SLICE);
        char name[80];
        if (!es)
                abort();
        es->obj.meta.namespace = dup(&es->obj, ns);
        snprintf(name, sizeof(name), "%s-abcde", svc);
        es->obj.meta.name = dup(&es->obj, name);
        one_kv(&es->obj, &es->obj.meta.labels, "kubernetes.io/service-name", svc);
        es->address_type = "IPv4";
        es->n_endpoints = n;
        es->endpoints = se_arena_array(&es->obj.arena, n, sizeof(*es->endpoints));
        return es;
}

static void add_service(struct se_store *st, unsigned i)
{
        struct se_service *s = (struct se_service *)se_object_new(SE_KIND_SERVICE);
        char buf[64];
        if (!s)
                abort();
        s->obj.meta.namespace = dup(&s->obj, ns_of(i));
        snprintf(buf, sizeof(buf), "svc-%05u", i);
        s->obj.meta.name = dup(&s->obj, buf);
        if (i % 10 == 9) {
                s->cluster_ip = "None";
        } else {
                snprintf(buf, sizeof(buf), "10.%u.%u.%u", 96 + i / 65536, (i / 256) % 256, i % 256);
                s->cluster_ip = dup(&s->obj, buf);
        }
        s->ports = se_arena_array(&s->obj.arena, 2, sizeof(*s->ports));
        s->ports[0] = (struct se_service_port){ .name = "http", .port = 80 };
        s->ports[1] = (struct se_service_port){ .name = "metrics", .port = 9100 };
        s->n_ports = 2;
        if (se_store_put(st, &s->obj) < 0)
                abort();

        snprintf(buf, sizeof(buf), "svc-%05u", i);
        struct se_endpoint_slice *es = new_slice(ns_of(i), buf, 15);
        for (unsigned e = 0; e < 15; e++) {
                unsigned ip = i * 15 + e;
                snprintf(buf, sizeof(buf), "10.%u.%u.%u", 128 + ip / 65536, (ip / 256) % 256,
                         ip % 256);
                es->endpoints[e].addresses.v = se_arena_array(&es->obj.arena, 1, sizeof(char *));
                es->endpoints[e].addresses.v[0] = dup(&es->obj, buf);
                es->endpoints[e].addresses.n = 1;
                es->endpoints[e].ready = SE_TRUE;
        }
        es->ports = se_arena_array(&es->obj.arena, 2, sizeof(*es->ports));
        es->ports[0] = (struct se_slice_port){
                .name = "http", .has_port = true, .port = 8080, .has_protocol = true
        };
        es->ports[1] = (struct se_slice_port){
                .name = "metrics", .has_port = true, .port = 9100, .has_protocol = true
        };
        es->n_ports = 2;
        es->has_ports = true;
        if (se_store_put(st, &es->obj) < 0)
                abort();
}

struct q {
        uint8_t b[300];
        size_t n;
};

/* The query a stub resolver sends (RD, no EDNS), as the library makes it. */
static void query(struct q *q, const char *name, const char *type)
{
        int n = se_dns_query_make(name, type, 0, 0, q->b, sizeof(q->b), NULL);
        if (n < 0)
                abort();
        q->n = (size_t)n;
}

static void run_mix(const struct se_dns_zone *z, const char *label, const struct q *qs, size_t n)
{
        static uint8_t out[65535];
        struct se_dns_client c = { .transport = SE_DNS_UDP };
        unsigned rounds = 2000000 / (unsigned)n + 1;
        size_t replies = 0;
        double t0 = cpu_now();
        for (unsigned r = 0; r < rounds; r++)
                for (size_t i = 0; i < n; i++) {
                        size_t len;
                        replies += se_dns_answer(z, &c, qs[i].b, qs[i].n, out, sizeof(out), &len) ==
                                   SE_DNS_REPLY;
                }
        double dt = cpu_now() - t0;
        double per = dt / ((double)rounds * (double)n);
        printf("  %-34s %8.0f ns/query  %10.0f queries per CPU-second  (%zu replies)\n", label,
               per * 1e9, 1 / per, replies);
}

static void note_change(void *data, enum se_store_event ev, const struct se_object *old,
                        const struct se_object *new_obj)
{
        (void)ev;
        se_dns_changes_note(data, old, new_obj);
}

static void bench(unsigned n_services)
{
        struct se_store *st = se_store_new();
        for (unsigned i = 0; i < n_services; i++)
                add_service(st, i);
        struct mallinfo2 m0 = mallinfo2();
        double t0 = cpu_now();
        struct se_dns_zone *z = NULL;
        struct se_diag d;
        struct se_dns_options o = { .ttl = 30, .serial = 1 };
        if (se_dns_zone_build(st, &o, &z, &d) < 0)
                abort();
        double build = cpu_now() - t0;
        struct mallinfo2 m1 = mallinfo2();
        printf("dns: %u Services, %u endpoints: zone built in %.1f ms CPU, %.1f MB\n", n_services,
               n_services * 15, build * 1e3,
               /* the slabs' chunks are mmap'ed: hblkhd, not uordblks */
               (double)(m1.uordblks + m1.hblkhd - m0.uordblks - m0.hblkhd) / 1e6);

        /* one Service changed (its Service and EndpointSlice replaced by
         * new objects): the CPU time of the next snapshot, made from the
         * previous one told which Service changed (as the daemon does),
         * from the previous one with a pass over the store, and, for
         * comparison, from scratch */
        enum { ROUNDS = 5 };
        double noted = 0, upd = 0, full = 0;
        struct se_dns_changes *ch = se_dns_changes_new();
        if (!ch || se_store_subscribe(st, SE_KIND_SERVICE, note_change, ch) < 0 ||
            se_store_subscribe(st, SE_KIND_ENDPOINT_SLICE, note_change, ch) < 0)
                abort();
        for (unsigned r = 0; r < ROUNDS; r++) {
                add_service(st, ((n_services / ROUNDS) * r + n_services / 2) % n_services);
                struct se_dns_zone *next = NULL, *fresh = NULL, *passed = NULL;
                t0 = cpu_now();
                if (se_dns_zone_update_changed(st, &o, z, ch, &next, &d) < 0)
                        abort();
                noted += cpu_now() - t0;
                se_dns_changes_clear(ch);
                t0 = cpu_now();
                if (se_dns_zone_update(st, &o, z, &passed, &d) < 0)
                        abort();
                upd += cpu_now() - t0;
                se_dns_zone_unref(passed);
                t0 = cpu_now();
                if (se_dns_zone_build(st, &o, &fresh, &d) < 0)
                        abort();
                full += cpu_now() - t0;
                se_dns_zone_unref(fresh);
                se_dns_zone_unref(z);
                z = next;
        }
        (void)se_store_unsubscribe(st, SE_KIND_SERVICE, note_change, ch);
        (void)se_store_unsubscribe(st, SE_KIND_ENDPOINT_SLICE, note_change, ch);
        se_dns_changes_free(ch);
        printf("dns: %u Services, one changed: next zone in %.2f ms CPU told the change (with a "
               "pass over the store: %.1f ms; a full build: %.1f ms)\n",
               n_services, noted / ROUNDS * 1e3, upd / ROUNDS * 1e3, full / ROUNDS * 1e3);

        if (getenv("BENCH_DNS_BUILD_ONLY")) { /* for a profile of the build */
                se_dns_zone_unref(z);
                se_store_free(st);
                return;
        }
        size_t n = n_services < 1000 ? n_services : 1000;
        struct q *pos = calloc(n, sizeof(*pos)), *mix = calloc(5 * n, sizeof(*mix)),
                 *srv = calloc(n, sizeof(*srv)), *ptr = calloc(n, sizeof(*ptr));
        size_t nm = 0;
        char name[256];
        for (size_t i = 0; i < n; i++) {
                unsigned s = (unsigned)(i * (n_services / n));
                snprintf(name, sizeof(name), "svc-%05u.%s.svc.cluster.local", s, ns_of(s));
                query(&pos[i], name, "A");
                query(&srv[i], name, "SRV");
                /* ndots:5: the name and two search candidates, A and AAAA... as the
                 * reference's mix: 2 positive, 3 NXDOMAIN per service */
                query(&mix[nm++], name, "A");
                query(&mix[nm++], name, "AAAA");
                snprintf(name, sizeof(name), "api.example.com.%s.svc.cluster.local", ns_of(s));
                query(&mix[nm++], name, "A");
                snprintf(name, sizeof(name), "api.example.com.svc.cluster.local");
                query(&mix[nm++], name, "AAAA");
                snprintf(name, sizeof(name), "api.example.com.cluster.local");
                query(&mix[nm++], name, "A");
                snprintf(name, sizeof(name), "%u.%u.%u.10.in-addr.arpa", s % 256, (s / 256) % 256,
                         96 + s / 65536);
                query(&ptr[i], name, "PTR");
        }
        run_mix(z, "A, positive", pos, n);
        run_mix(z, "ndots:5 mix (60 % NXDOMAIN)", mix, nm);
        run_mix(z, "SRV (15 targets when headless)", srv, n);
        run_mix(z, "PTR", ptr, n);
        free(pos);
        free(mix);
        free(srv);
        free(ptr);
        se_dns_zone_unref(z);
        se_store_free(st);
}

/* One headless Service of n endpoints with hostnames (a big StatefulSet):
 * its SRV records must not cost a scan per endpoint. */
static void bench_headless(unsigned n)
{
        struct se_store *st = se_store_new();
        struct se_service *s = (struct se_service *)se_object_new(SE_KIND_SERVICE);
        if (!st || !s)
                abort();
        s->obj.meta.namespace = "default";
        s->obj.meta.name = "sts";
        s->cluster_ip = "None";
        if (se_store_put(st, &s->obj) < 0)
                abort();
        struct se_endpoint_slice *es = new_slice("default", "sts", n);
        char buf[32];
        for (unsigned e = 0; e < n; e++) {
                snprintf(buf, sizeof(buf), "10.%u.%u.%u", 64 + e / 65536, (e / 256) % 256, e % 256);
                es->endpoints[e].addresses.v = se_arena_array(&es->obj.arena, 1, sizeof(char *));
                es->endpoints[e].addresses.v[0] = dup(&es->obj, buf);
                es->endpoints[e].addresses.n = 1;
                snprintf(buf, sizeof(buf), "sts-%u", e);
                es->endpoints[e].hostname = dup(&es->obj, buf);
        }
        es->ports = se_arena_array(&es->obj.arena, 2, sizeof(*es->ports));
        es->ports[0] = (struct se_slice_port){ .name = "peer", .has_port = true, .port = 2380 };
        es->ports[1] = (struct se_slice_port){ .name = "client", .has_port = true, .port = 2379 };
        es->n_ports = 2;
        if (se_store_put(st, &es->obj) < 0)
                abort();
        double t0 = cpu_now();
        struct se_dns_zone *z = NULL;
        struct se_diag d;
        if (se_dns_zone_build(st, NULL, &z, &d) < 0)
                abort();
        printf("dns: one headless Service of %u endpoints: zone built in %.1f ms CPU\n", n,
               (cpu_now() - t0) * 1e3);
        se_dns_zone_unref(z);
        se_store_free(st);
}

int main(void)
{
        bench_headless(10000);
        bench(100);
        bench(10000);
        return 0;
}

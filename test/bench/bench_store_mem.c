/* Store memory benchmark: what svcenv-dns's store holds for SERVICES
 * Services with one EndpointSlice of ENDPOINTS endpoints each (100 per
 * namespace), decoded from the JSON the API server returns for the objects
 * test/bench/dns_vs_coredns.sh creates, with the daemon's decode flags.
 * Prints per kind the bytes of the objects' arenas (and what they asked
 * for), the heap growth of the whole store (malloc overhead, indexes and
 * the intern pool included) per Service and per endpoint, and where a
 * slice's and a Service's arena bytes go by field; then the RSS with the
 * cluster zone built from that store (svcenv-dns without its threads).
 *
 * The same for svcenv-proxy, whose slices are written by the controller
 * (targetRef, nodeName, zone, annotations), with its flags and without.
 *
 * Usage: bench_store_mem [SERVICES [ENDPOINTS]] */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <svcenv/decode.h>
#include <svcenv/diag.h>
#include <svcenv/dns.h>
#include <svcenv/store.h>
#include <svcenv/strbuf.h>

static size_t heap_in_use(void)
{
        struct mallinfo2 mi = mallinfo2();
        return mi.uordblks + mi.hblkhd;
}

/* VmRSS of this process, in MB. */
static double rss_mb(void)
{
        char line[256];
        double kb = 0;
        FILE *f = fopen("/proc/self/status", "r");
        while (f && fgets(line, sizeof(line), f))
                if (sscanf(line, "VmRSS: %lf", &kb) == 1)
                        break;
        if (f)
                fclose(f);
        return kb / 1024;
}

static void gen_service(struct se_strbuf *sb, int i)
{
        se_strbuf_printf(
                sb,
                "{\"kind\":\"Service\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"s%d\","
                "\"namespace\":\"bd1234-%d\",\"uid\":\"5e6f%04x-0000-4000-8000-%012d\","
                "\"resourceVersion\":\"%d\",\"creationTimestamp\":\"2026-12-03T10:00:00Z\"},"
                "\"spec\":{\"ports\":[{\"name\":\"http\",\"protocol\":\"TCP\",\"port\":80,"
                "\"targetPort\":8080}],\"clusterIP\":\"10.96.%d.%d\",\"clusterIPs\":[\"10.96.%d.%d\"],"
                "\"type\":\"ClusterIP\",\"sessionAffinity\":\"None\",\"ipFamilies\":[\"IPv4\"],"
                "\"ipFamilyPolicy\":\"SingleStack\",\"internalTrafficPolicy\":\"Cluster\"},"
                "\"status\":{\"loadBalancer\":{}}}",
                i, i / 100, i & 0xffff, i, 100000 + i, i / 256, i % 256, i / 256, i % 256);
}

static void gen_slice(struct se_strbuf *sb, int i, int n)
{
        se_strbuf_printf(
                sb,
                "{\"kind\":\"EndpointSlice\",\"apiVersion\":\"discovery.k8s.io/v1\",\"metadata\":"
                "{\"name\":\"s%d-x\",\"namespace\":\"bd1234-%d\","
                "\"uid\":\"7a8b%04x-0000-4000-8000-%012d\",\"resourceVersion\":\"%d\","
                "\"generation\":1,\"creationTimestamp\":\"2026-12-03T10:00:00Z\",\"labels\":"
                "{\"endpointslice.kubernetes.io/managed-by\":\"dns-bench.svcenv.test\","
                "\"kubernetes.io/service-name\":\"s%d\"}},\"addressType\":\"IPv4\",\"endpoints\":[",
                i, i / 100, i & 0xffff, i, 200000 + i, i);
        for (int p = 0; p < n; p++) {
                int ip = i * n + p + 65536;
                se_strbuf_printf(
                        sb,
                        "%s{\"addresses\":[\"10.%d.%d.%d\"],\"conditions\":{\"ready\":true,"
                        "\"serving\":true,\"terminating\":false},\"targetRef\":{\"kind\":"
                        "\"Pod\",\"namespace\":\"bd1234-%d\",\"name\":\"s%d-%d\"}}",
                        p ? "," : "", (ip >> 16) & 255, (ip >> 8) & 255, ip & 255, i / 100, i, p);
        }
        se_strbuf_printf(sb,
                         "],\"ports\":[{\"name\":\"http\",\"protocol\":\"TCP\",\"port\":8080}]}");
}

/* A slice as kube-controller-manager writes it for a Deployment's pods
 * (what svcenv-proxy keeps): nodeName, zone, the pod as targetRef with its
 * uid, the trigger-time annotation and the owner reference. */
static void gen_controller_slice(struct se_strbuf *sb, int i, int n)
{
        se_strbuf_printf(
                sb,
                "{\"kind\":\"EndpointSlice\",\"apiVersion\":\"discovery.k8s.io/v1\",\"metadata\":"
                "{\"name\":\"s%d-7xk2p\",\"generateName\":\"s%d-\",\"namespace\":\"bd1234-%d\","
                "\"uid\":\"7a8b%04x-0000-4000-8000-%012d\",\"resourceVersion\":\"%d\","
                "\"generation\":1,\"creationTimestamp\":\"2026-12-03T10:00:00Z\",\"labels\":"
                "{\"endpointslice.kubernetes.io/managed-by\":\"endpointslice-controller.k8s.io\","
                "\"kubernetes.io/service-name\":\"s%d\"},\"annotations\":{\"endpoints.kubernetes.io/"
                "last-change-trigger-time\":\"2026-12-03T10:00:01Z\"},\"ownerReferences\":[{"
                "\"apiVersion\":\"v1\",\"kind\":\"Service\",\"name\":\"s%d\",\"uid\":"
                "\"5e6f%04x-0000-4000-8000-%012d\",\"controller\":true,\"blockOwnerDeletion\":"
                "true}]},\"addressType\":\"IPv4\",\"endpoints\":[",
                i, i, i / 100, i & 0xffff, i, 200000 + i, i, i, i & 0xffff, i);
        for (int p = 0; p < n; p++) {
                int ip = i * n + p + 65536;
                se_strbuf_printf(
                        sb,
                        "%s{\"addresses\":[\"10.%d.%d.%d\"],\"conditions\":{\"ready\":true,"
                        "\"serving\":true,\"terminating\":false},\"targetRef\":{\"kind\":\"Pod\","
                        "\"namespace\":\"bd1234-%d\",\"name\":\"s%d-6d4f8b7c9-%05d\",\"uid\":"
                        "\"3f1c%04x-0000-4000-8000-%012d\"},\"nodeName\":\"node-%d\",\"zone\":"
                        "\"zone-%c\"}",
                        p ? "," : "", (ip >> 16) & 255, (ip >> 8) & 255, ip & 255, i / 100, i, p,
                        ip & 0xffff, ip, ip % 500, 'a' + ip % 3);
        }
        se_strbuf_printf(sb,
                         "],\"ports\":[{\"name\":\"http\",\"protocol\":\"TCP\",\"port\":8080}]}");
}

/* Bytes of the arena that p lies in, if it is o's own (interned strings
 * live outside). A decoded object has one chunk, starting at o. */
static bool owned(const struct se_object *o, const void *p)
{
        return p && (const char *)p >= (const char *)o &&
               (const char *)p < (const char *)o + o->arena.total;
}

static size_t str_own(const struct se_object *o, const char *s)
{
        return owned(o, s) ? strlen(s) + 1 : 0;
}

static size_t meta_strings(const struct se_object *o)
{
        const struct se_meta *m = &o->meta;
        return str_own(o, m->name) + str_own(o, m->namespace) + str_own(o, m->uid) +
               str_own(o, m->resource_version);
}

static size_t labels_bytes(const struct se_object *o, const struct se_kvlist *l)
{
        size_t n = l->n * sizeof(*l->items);
        for (uint32_t i = 0; i < l->n; i++)
                n += str_own(o, l->items[i].key) + str_own(o, l->items[i].value);
        return n;
}

struct slice_fields {
        size_t head, meta, labels, endpoints, addr_arrays, addr_strings, mores, other_strings,
                ports;
};

static void slice_fields(const struct se_endpoint_slice *es, struct slice_fields *f)
{
        const struct se_object *o = &es->obj;
        f->head += sizeof(*es);
        f->meta += meta_strings(o) + (o->meta.more ? sizeof(*o->meta.more) : 0);
        f->labels += labels_bytes(o, &o->meta.labels) + labels_bytes(o, &o->meta.annotations);
        f->endpoints += es->n_endpoints * sizeof(*es->endpoints);
        for (uint32_t i = 0; i < es->n_endpoints; i++) {
                const struct se_slice_endpoint *e = &es->endpoints[i];
                if (owned(o, e->addresses.v))
                        f->addr_arrays += (e->addresses.n ? e->addresses.n : 1) * sizeof(char *);
                for (uint32_t k = 0; k < e->addresses.n; k++)
                        f->addr_strings += str_own(o, e->addresses.v[k]);
                const struct se_object_ref *ref = se_slice_endpoint_target_ref(e);
                f->other_strings += str_own(o, e->hostname);
                if (ref)
                        f->other_strings += str_own(o, ref->kind) + str_own(o, ref->namespace) +
                                            str_own(o, ref->name) + str_own(o, ref->uid);
                /* a `more` (and what it points to) counts once, where first seen */
                bool seen = !owned(o, e->more);
                for (uint32_t k = 0; k < i && !seen; k++)
                        seen = es->endpoints[k].more == e->more;
                if (seen)
                        continue;
                f->mores +=
                        sizeof(*e->more) +
                        (se_slice_endpoint_hints(e) ? sizeof(struct se_slice_endpoint_hints) : 0) +
                        (ref ? sizeof(*ref) : 0);
                f->other_strings += str_own(o, se_slice_endpoint_node(e)) +
                                    str_own(o, se_slice_endpoint_zone(e));
        }
        f->ports += es->n_ports * sizeof(*es->ports);
        for (uint32_t i = 0; i < es->n_ports; i++)
                f->ports += str_own(o, es->ports[i].name) + str_own(o, es->ports[i].app_protocol);
}

struct kind_sum {
        size_t n, total, requested;
};

/* Decodes SERVICES Services and their slices with the flags into a store
 * and prints where its bytes go. */
static int measure(const char *label, int services, int per, bool controller_slices,
                   unsigned svc_flags, unsigned slice_flags, bool zone)
{
        struct se_store *st = se_store_new();
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        struct kind_sum sum[2] = { { 0 } };
        struct slice_fields f = { 0 };
        size_t before = heap_in_use();
        for (int i = 0; i < 2 * services; i++) {
                bool svc = i < services;
                se_strbuf_reset(&sb);
                if (svc)
                        gen_service(&sb, i);
                else if (controller_slices)
                        gen_controller_slice(&sb, i - services, per);
                else
                        gen_slice(&sb, i - services, per);
                json_error_t jerr;
                json_t *j = json_loadb(sb.buf, sb.len, 0, &jerr);
                struct se_object *o = NULL;
                struct se_decode_error e;
                if (!j || se_decode_object_flags(j, svc ? SE_KIND_SERVICE : SE_KIND_ENDPOINT_SLICE,
                                                 NULL, svc ? svc_flags : slice_flags, &o, &e) < 0) {
                        fprintf(stderr, "bench_store_mem: %s: %s\n", e.path, e.message);
                        return 1;
                }
                json_decref(j);
                struct kind_sum *k = &sum[!svc];
                k->n++;
                k->total += se_object_memory(o);
                k->requested += o->arena.requested;
                if (!svc)
                        slice_fields(se_endpoint_slice_of(o), &f);
                if (se_store_put(st, o) < 0)
                        return 1;
        }
        se_strbuf_release(&sb);
        size_t heap = heap_in_use() - before;
        size_t eps = (size_t)services * (size_t)per;
        printf("store_mem: %d Services, %zu endpoints, %s: heap %.2f MB "
               "(%.0f B per Service and its slice, %.1f B per endpoint)\n",
               services, eps, label, (double)heap / 1e6, (double)heap / services,
               (double)heap / eps);
        static const char *const names[2] = { "Services", "EndpointSlices" };
        for (int k = 0; k < 2; k++)
                printf("  %-15s %6zu objects: arenas %.2f MB, %.0f B each (asked for %.0f B)\n",
                       names[k], sum[k].n, (double)sum[k].total / 1e6,
                       (double)sum[k].total / (double)sum[k].n,
                       (double)sum[k].requested / (double)sum[k].n);
        size_t rest = heap - sum[0].total - sum[1].total;
        printf("  beyond the arenas (malloc headers, store indexes, intern pool): %.2f MB, %.0f B "
               "per object\n",
               (double)rest / 1e6, (double)rest / (2.0 * services));
        double ns = services;
        printf("  a slice's arena by field, B per slice (per endpoint): struct %.0f, metadata "
               "strings %.0f, labels and annotations %.0f, endpoints %.0f (%.1f), address arrays "
               "%.0f (%.1f), address text %.0f (%.1f), endpoints' mores %.0f (%.1f), other endpoint "
               "fields %.0f (%.1f), ports %.0f\n",
               f.head / ns, f.meta / ns, f.labels / ns, f.endpoints / ns, (double)f.endpoints / eps,
               f.addr_arrays / ns, (double)f.addr_arrays / eps, f.addr_strings / ns,
               (double)f.addr_strings / eps, f.mores / ns, (double)f.mores / eps,
               f.other_strings / ns, (double)f.other_strings / eps, f.ports / ns);
        printf("  a Service's arena: struct %zu B, ports %zu B each, the rest %.0f B\n",
               sizeof(struct se_service), sizeof(struct se_service_port),
               (double)sum[0].total / ns - (double)sizeof(struct se_service) -
                       (double)sizeof(struct se_service_port));
        if (zone) { /* svcenv-dns's memory but for its threads and sockets */
                struct se_dns_options o = { .ttl = 30, .serial = 1 };
                struct se_dns_zone *z = NULL;
                struct se_diag d;
                if (se_dns_zone_build(st, &o, &z, &d) < 0)
                        return 1;
                printf("  with the cluster zone built from it: RSS %.1f MB\n", rss_mb());
                se_dns_zone_unref(z);
        }
        se_store_free(st);
        return 0;
}

int main(int argc, char **argv)
{
        int services = argc > 1 ? atoi(argv[1]) : 10000;
        int per = argc > 2 ? atoi(argv[2]) : 15;
        if (services <= 0 || per <= 0 || per > 1000)
                return 1;
        /* the informers' flags of cmd/svcenv-dns/main.c and cmd/svcenv-proxy/main.c */
        return measure("svcenv-dns's decode flags", services, per, false,
                       SE_DECODE_INTERN | SE_DECODE_DNS_SERVICES,
                       SE_DECODE_INTERN | SE_DECODE_DNS_SLICES, true) ||
               measure("controller-written slices, svcenv-proxy's decode flags", services, per,
                       true, SE_DECODE_INTERN, SE_DECODE_INTERN | SE_DECODE_PROXY_SLICES, false) ||
               measure("the same, full objects (no flags)", services, per, true, 0, 0, false);
}

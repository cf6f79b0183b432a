/* se_dns_zone_update against se_dns_zone_build: after every one of many
 * random changes (Services, EndpointSlices, Namespaces; shared ClusterIPs
 * and endpoint addresses so the PTRs of several Services meet), the zone
 * made from the previous one lists and answers exactly as a fresh build of
 * the same store, and the previous zone, still held as a reader would,
 * answers as it did before the change. */
#include <errno.h>
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "dnstest.h"

#define N_NS    3
#define N_SVC   6
#define N_STEPS 400

static const char *const ns_names[N_NS] = { "a", "b", "c" };
static const char *const hostnames[] = { NULL, "h0", "h1" };

static uint32_t rnd_state;

static unsigned rnd(unsigned n)
{
        rnd_state = rnd_state * 1103515245u + 12345u;
        return (rnd_state >> 16) % n;
}

/* The manifest loader adds only: a replacement goes in after a delete. */
static void load(struct se_store *st, enum se_kind kind, const char *ns, const char *name,
                 const char *yaml)
{
        struct se_diag d = { 0 };
        (void)se_store_delete(st, kind, ns, name);
        int r = se_manifest_load_buffer(st, "step.yaml", yaml, strlen(yaml), NULL, NULL, &d);
        if (r < 0)
                fail_msg("load: %d: %s (line %u)\n%s", r, d.text, d.line, yaml);
}

/* ClusterIPs and endpoint addresses come from small pools that overlap:
 * the first Service of an address owns its PTR, endpoints' PTRs add up. */
static void put_service(struct se_store *st, const char *ns, unsigned i)
{
        char y[1024], spec[512];
        switch (rnd(4)) {
        case 0:
                snprintf(spec, sizeof(spec), "{clusterIP: None, ports: [{name: http, port: 80}]}");
                break;
        case 1:
                snprintf(spec, sizeof(spec), "{type: ExternalName, externalName: %s}",
                         rnd(2) ? "s1.a.svc.cluster.local" : "example.com");
                break;
        default:
                snprintf(spec, sizeof(spec),
                         "{clusterIP: 10.96.0.%u, ports: [{name: http, port: %u}%s]}", 1 + rnd(5),
                         80 + rnd(2), rnd(2) ? ", {name: dns, port: 53, protocol: UDP}" : "");
        }
        snprintf(y, sizeof(y),
                 "apiVersion: v1\nkind: Service\nmetadata: {name: s%u, namespace: %s}\nspec: %s\n",
                 i, ns, spec);
        char name[32];
        snprintf(name, sizeof(name), "s%u", i);
        load(st, SE_KIND_SERVICE, ns, name, y);
}

static void put_slice(struct se_store *st, const char *ns, unsigned i, unsigned k)
{
        char y[2048];
        int o = snprintf(y, sizeof(y),
                         "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                         "metadata: {name: s%u-%u, namespace: %s, labels: "
                         "{kubernetes.io/service-name: s%u}}\n"
                         "addressType: IPv4\nports: [{name: http, port: 8080, protocol: TCP}]\n"
                         "endpoints:\n",
                         i, k, ns, i);
        unsigned n = rnd(4);
        for (unsigned e = 0; e < n; e++) {
                const char *h = hostnames[rnd(3)];
                char hn[32] = "";
                if (h)
                        snprintf(hn, sizeof(hn), "hostname: %s, ", h);
                /* 10.96.0.x: an endpoint address that is also a ClusterIP */
                o += snprintf(y + o, sizeof(y) - (size_t)o,
                              "- {addresses: [10.%s.0.%u], %sconditions: {ready: %s}}\n",
                              rnd(5) ? "244" : "96", 1 + rnd(6), hn, rnd(4) ? "true" : "false");
        }
        if (n == 0)
                o += snprintf(y + o, sizeof(y) - (size_t)o, "- {addresses: [10.244.9.9]}\n");
        char name[32];
        snprintf(name, sizeof(name), "s%u-%u", i, k);
        load(st, SE_KIND_ENDPOINT_SLICE, ns, name, y);
}

static void change(struct se_store *st)
{
        const char *ns = ns_names[rnd(N_NS)];
        unsigned i = rnd(N_SVC), k = rnd(2);
        char name[32];
        switch (rnd(10)) {
        case 0:
        case 1:
        case 2:
                put_service(st, ns, i);
                break;
        case 3:
                snprintf(name, sizeof(name), "s%u", i);
                (void)se_store_delete(st, SE_KIND_SERVICE, ns, name);
                break;
        case 4:
        case 5:
        case 6:
                put_slice(st, ns, i, k);
                break;
        case 7:
                snprintf(name, sizeof(name), "s%u-%u", i, k);
                (void)se_store_delete(st, SE_KIND_ENDPOINT_SLICE, ns, name);
                break;
        default: {
                /* with no Namespace object every namespace exists; with
                 * some, only those */
                if (rnd(2) && strcmp(ns, "c") != 0) {
                        char y[256];
                        snprintf(y, sizeof(y),
                                 "apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", ns);
                        load(st, SE_KIND_NAMESPACE, "", ns, y);
                } else {
                        (void)se_store_delete(st, SE_KIND_NAMESPACE, "", ns);
                }
        }
        }
}

struct fp {
        char *v;
        size_t n, cap;
};

static void fp_add(struct fp *f, const void *p, size_t n)
{
        if (f->n + n + 1 > f->cap) {
                f->cap = 2 * (f->n + n + 1);
                f->v = realloc(f->v, f->cap);
                assert_non_null(f->v);
        }
        memcpy(f->v + f->n, p, n);
        f->n += n;
}

static void fp_answer(struct fp *f, const struct se_dns_zone *z, const char *name, uint16_t type)
{
        uint8_t q[512], out[4096];
        size_t qlen = t_query(q, name, type, -1, false), len = 0;
        struct se_dns_client c = { .transport = SE_DNS_TCP };
        enum se_dns_verdict v = se_dns_answer(z, &c, q, qlen, out, sizeof(out), &len);
        fp_add(f, name, strlen(name));
        fp_add(f, &v, sizeof(v));
        fp_add(f, out, len);
}

/* Everything the zone says: its master file with the objects behind each
 * record, and its answers to every name the changes can make. */
static struct fp fingerprint(const struct se_dns_zone *z)
{
        struct fp f = { 0 };
        char *text = NULL, name[256];
        assert_int_equal(se_dns_zone_explain(z, &text), 0);
        fp_add(&f, text, strlen(text));
        free(text);
        static const uint16_t types[] = { 1, 5, 12, 33 };
        for (size_t t = 0; t < SE_ARRAY_SIZE(types); t++) {
                for (unsigned a = 1; a <= 9; a++) {
                        snprintf(name, sizeof(name), "%u.0.96.10.in-addr.arpa", a);
                        fp_answer(&f, z, name, types[t]);
                        snprintf(name, sizeof(name), "%u.0.244.10.in-addr.arpa", a);
                        fp_answer(&f, z, name, types[t]);
                }
                for (unsigned n = 0; n < N_NS; n++) {
                        snprintf(name, sizeof(name), "%s.svc.cluster.local", ns_names[n]);
                        fp_answer(&f, z, name, types[t]);
                        for (unsigned i = 0; i < N_SVC; i++) {
                                static const char *const sub[] = { "",           "_http._tcp.",
                                                                   "_dns._udp.", "h0.",
                                                                   "h1.",        "10-244-0-1.",
                                                                   "10-96-0-2." };
                                for (size_t s = 0; s < SE_ARRAY_SIZE(sub); s++) {
                                        snprintf(name, sizeof(name), "%ss%u.%s.svc.cluster.local",
                                                 sub[s], i, ns_names[n]);
                                        fp_answer(&f, z, name, types[t]);
                                }
                        }
                }
        }
        return f;
}

static void assert_same(const struct fp *a, const struct fp *b, unsigned step, const char *what)
{
        if (a->n != b->n || memcmp(a->v, b->v, a->n) != 0)
                fail_msg("step %u: %s differs", step, what);
}

static void note_change(void *data, enum se_store_event ev, const struct se_object *old,
                        const struct se_object *new_obj)
{
        (void)ev;
        se_dns_changes_note(data, old, new_obj);
}

/* With noted (non-NULL): every store change is noted as the daemon's
 * callbacks do, and each zone is made from the changed Services alone. */
static void random_changes_with(struct se_dns_changes *noted)
{
        rnd_state = 12;
        struct se_store *st = se_store_new();
        assert_non_null(st);
        static const enum se_kind kinds[] = { SE_KIND_SERVICE, SE_KIND_ENDPOINT_SLICE,
                                              SE_KIND_NAMESPACE };
        for (size_t k = 0; noted && k < SE_ARRAY_SIZE(kinds); k++)
                assert_int_equal(se_store_subscribe(st, kinds[k], note_change, noted), 0);
        struct se_dns_options o = { .ttl = 5, .serial = T_SERIAL };
        struct se_dns_zone *prev = NULL;
        struct se_diag d = { 0 };
        assert_int_equal(se_dns_zone_update(st, &o, NULL, &prev, &d), 0);
        struct fp prev_fp = fingerprint(prev);
        for (unsigned step = 0; step < N_STEPS; step++) {
                unsigned n = 1 + rnd(3);
                for (unsigned c = 0; c < n; c++)
                        change(st);
                struct se_dns_zone *next = NULL, *fresh = NULL;
                assert_int_equal(se_dns_zone_update_changed(st, &o, prev, noted, &next, &d), 0);
                if (noted)
                        se_dns_changes_clear(noted);
                assert_int_equal(se_dns_zone_build(st, &o, &fresh, &d), 0);
                struct fp next_fp = fingerprint(next), fresh_fp = fingerprint(fresh);
                assert_same(&next_fp, &fresh_fp, step, "the updated zone and a fresh build");
                struct fp old_fp = fingerprint(prev);
                assert_same(&old_fp, &prev_fp, step, "the previous zone, held by a reader");
                free(old_fp.v);
                free(fresh_fp.v);
                free(prev_fp.v);
                se_dns_zone_unref(fresh);
                se_dns_zone_unref(prev);
                prev = next;
                prev_fp = next_fp;
        }
        free(prev_fp.v);
        se_dns_zone_unref(prev);
        se_store_free(st);
}

static void random_changes(void **state)
{
        (void)state;
        random_changes_with(NULL);
}

static void random_changes_noted(void **state)
{
        (void)state;
        struct se_dns_changes *noted = se_dns_changes_new();
        assert_non_null(noted);
        random_changes_with(noted);
        se_dns_changes_free(noted);
}

static void put_plain(struct se_store *st, const char *name, const char *ip)
{
        char y[512];
        snprintf(y, sizeof(y),
                 "apiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: a}\n"
                 "spec: {clusterIP: %s, ports: [{name: http, port: 80}]}\n",
                 name, ip);
        load(st, SE_KIND_SERVICE, "a", name, y);
}

/* What the changes name is all an update reads of the store's Services:
 * a change not noted is not seen (the daemon notes every one), a noted
 * one is, and a new namespace makes it a full pass. */
static void only_noted_changes(void **state)
{
        (void)state;
        struct se_store *st = se_store_new();
        struct se_dns_changes *ch = se_dns_changes_new();
        assert_non_null(st);
        assert_non_null(ch);
        put_plain(st, "sx", "10.96.0.1");
        put_plain(st, "sy", "10.96.0.2");
        struct se_dns_options o = { .ttl = 5, .serial = T_SERIAL };
        struct se_dns_zone *z0 = NULL, *z1 = NULL, *z2 = NULL, *z3 = NULL;
        struct se_diag d = { 0 };
        assert_int_equal(se_dns_zone_update(st, &o, NULL, &z0, &d), 0);
        put_plain(st, "sx", "10.96.0.3");
        put_plain(st, "sy", "10.96.0.4");
        assert_true(se_dns_changes_empty(ch));
        assert_int_equal(se_dns_zone_update_changed(st, &o, z0, ch, &z1, &d), 0);
        char *a = NULL, *b = NULL;
        assert_int_equal(se_dns_zone_master(z0, &a), 0);
        assert_int_equal(se_dns_zone_master(z1, &b), 0);
        assert_string_equal(a, b);
        free(b);
        se_dns_changes_note(ch, NULL, se_store_get(st, SE_KIND_SERVICE, "a", "sx"));
        assert_false(se_dns_changes_empty(ch));
        assert_int_equal(se_dns_zone_update_changed(st, &o, z1, ch, &z2, &d), 0);
        assert_int_equal(se_dns_zone_master(z2, &b), 0);
        assert_non_null(strstr(b, "sx.a.svc.cluster.local.\t5\tIN\tA\t10.96.0.3"));
        assert_non_null(strstr(b, "sy.a.svc.cluster.local.\t5\tIN\tA\t10.96.0.2"));
        assert_non_null(strstr(b, "3.0.96.10.in-addr.arpa.\t5\tIN\tPTR\tsx.a.svc.cluster.local."));
        assert_null(strstr(b, "1.0.96.10.in-addr.arpa."));
        free(b);
        /* a namespace that did not exist: the changes cannot say which
         * blocks it touches */
        se_dns_changes_clear(ch);
        char y[256];
        snprintf(y, sizeof(y), "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n");
        load(st, SE_KIND_NAMESPACE, "", "a", y);
        put_plain(st, "sz", "10.96.0.5");
        se_dns_changes_note(ch, NULL, se_store_get(st, SE_KIND_SERVICE, "a", "sz"));
        assert_int_equal(se_dns_zone_update_changed(st, &o, z2, ch, &z3, &d), 0);
        assert_int_equal(se_dns_zone_master(z3, &b), 0);
        assert_non_null(strstr(b, "sy.a.svc.cluster.local.\t5\tIN\tA\t10.96.0.4"));
        free(a);
        free(b);
        se_dns_zone_unref(z0);
        se_dns_zone_unref(z1);
        se_dns_zone_unref(z2);
        se_dns_zone_unref(z3);
        se_dns_changes_free(ch);
        se_store_free(st);
}

/* The previous zone may outlive the store objects it was built from: its
 * blocks hold them. */
static void outlives_store(void **state)
{
        (void)state;
        rnd_state = 99;
        struct se_store *st = se_store_new();
        assert_non_null(st);
        struct se_dns_options o = { .ttl = 5, .serial = T_SERIAL };
        for (unsigned c = 0; c < 60; c++)
                change(st);
        struct se_dns_zone *z = NULL, *z2 = NULL;
        struct se_diag d = { 0 };
        assert_int_equal(se_dns_zone_update(st, &o, NULL, &z, &d), 0);
        struct fp before = fingerprint(z);
        assert_int_equal(se_dns_zone_update(st, &o, z, &z2, &d), 0);
        se_store_free(st);
        struct fp after = fingerprint(z), after2 = fingerprint(z2);
        assert_same(&before, &after, 0, "the zone after its store is gone");
        assert_same(&before, &after2, 0, "an update with no change");
        free(before.v);
        free(after.v);
        free(after2.v);
        se_dns_zone_unref(z);
        se_dns_zone_unref(z2);
}

/* Other options than the previous zone's: nothing of it is reused. */
static void options_change(void **state)
{
        (void)state;
        rnd_state = 7;
        struct se_store *st = se_store_new();
        assert_non_null(st);
        for (unsigned c = 0; c < 60; c++)
                change(st);
        struct se_dns_options o = { .ttl = 5, .serial = T_SERIAL };
        struct se_dns_options o2 = {
                .ttl = 30, .serial = T_SERIAL, .zone = "example.org", .endpoint_pod_names = true
        };
        struct se_dns_zone *z = NULL, *z2 = NULL, *fresh = NULL;
        struct se_diag d = { 0 };
        assert_int_equal(se_dns_zone_update(st, &o, NULL, &z, &d), 0);
        assert_int_equal(se_dns_zone_update(st, &o2, z, &z2, &d), 0);
        assert_int_equal(se_dns_zone_build(st, &o2, &fresh, &d), 0);
        char *a = NULL, *b = NULL;
        assert_int_equal(se_dns_zone_master(z2, &a), 0);
        assert_int_equal(se_dns_zone_master(fresh, &b), 0);
        assert_string_equal(a, b);
        free(a);
        free(b);
        se_dns_zone_unref(z);
        se_dns_zone_unref(z2);
        se_dns_zone_unref(fresh);
        se_store_free(st);
}

#if defined(__has_feature)
# if __has_feature(address_sanitizer)
#  define UNDER_ASAN 1
# endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(UNDER_ASAN)
/* (libasan's; Debian's gcc ships no header for it) */
size_t __sanitizer_get_current_allocated_bytes(void);
/* ASan's allocator replaces glibc's, which mallinfo2 would read as empty:
 * ask it instead (what was asked for, without glibc's headers) */
static size_t heap_bytes(void)
{
        return __sanitizer_get_current_allocated_bytes();
}
#else
static size_t heap_bytes(void)
{
        struct mallinfo2 m = mallinfo2();
        return m.uordblks + m.hblkhd;
}
#endif

static void put_big_slice(struct se_store *st, unsigned i)
{
        char y[4096];
        int o = snprintf(y, sizeof(y),
                         "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                         "metadata: {name: s%u-x, namespace: a, labels: "
                         "{kubernetes.io/service-name: s%u}}\n"
                         "addressType: IPv4\nports: [{name: http, port: 8080}]\nendpoints:\n",
                         i, i);
        for (unsigned e = 0; e < 15; e++)
                o += snprintf(y + o, sizeof(y) - (size_t)o, "- {addresses: [10.%u.%u.%u]}\n",
                              100 + i / 256, i % 256, e + 1);
        char name[32];
        snprintf(name, sizeof(name), "s%u-x", i);
        load(st, SE_KIND_ENDPOINT_SLICE, "a", name, y);
}

/* The zone keeps a packed entry per endpoint address, not a name node
 * with record structs and a reverse node (about 500 B each before), and a
 * 16-byte reverse entry that finds the address in it (32 B with the
 * address copied: 112 B an endpoint): at 20,000 endpoints (one Service in
 * ten headless, every fifth endpoint with a hostname) it holds under
 * 104 B per endpoint, the Services' own names and a build's partly used
 * slab included. */
static void endpoints_cost_little(void **state)
{
        (void)state;
        enum { SERVICES = 100, PER = 200 };
        struct se_store *st = se_store_new();
        assert_non_null(st);
        char *y = malloc(64 * 1024);
        assert_non_null(y);
        for (unsigned i = 0; i < SERVICES; i++) {
                char name[32], ip[32];
                snprintf(ip, sizeof(ip), "10.96.0.%u", i + 1);
                snprintf(y, 512,
                         "apiVersion: v1\nkind: Service\nmetadata: {name: s%u, namespace: a}\n"
                         "spec: {clusterIP: %s, ports: [{name: http, port: 80}]}\n",
                         i, i % 10 == 9 ? "None" : ip);
                snprintf(name, sizeof(name), "s%u", i);
                load(st, SE_KIND_SERVICE, "a", name, y);
                int o = snprintf(y, 64 * 1024,
                                 "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                                 "metadata: {name: s%u-x, namespace: a, labels: "
                                 "{kubernetes.io/service-name: s%u}}\n"
                                 "addressType: IPv4\nports: [{name: http, port: 8080}]\n"
                                 "endpoints:\n",
                                 i, i);
                for (unsigned e = 0; e < PER; e++)
                        o += snprintf(y + o, 64 * 1024 - (size_t)o,
                                      "- {addresses: [10.%u.%u.%u]%s%u}\n", 100 + i / 256, i % 256,
                                      e + 1, e % 5 ? ", zone: z" : ", hostname: h", e);
                snprintf(name, sizeof(name), "s%u-x", i);
                load(st, SE_KIND_ENDPOINT_SLICE, "a", name, y);
        }
        free(y);
        struct se_dns_options o = { .ttl = 5, .serial = T_SERIAL };
        struct se_dns_zone *z = NULL;
        struct se_diag d = { 0 };
        size_t before = heap_bytes();
        assert_int_equal(se_dns_zone_update(st, &o, NULL, &z, &d), 0);
        size_t per = (heap_bytes() - before) / (SERVICES * PER);
        print_message("zone: %zu B per endpoint\n", per);
        assert_true(per < 104);
        se_dns_zone_unref(z);
        se_store_free(st);
}

/* A ClusterIP Service's name and named ports are written from the Service
 * when asked, not kept as nodes and records (about 870 B a Service
 * before, with its key, names and reverse entry): 8,000 of them with a
 * named port and no endpoints cost under 500 B each. */
static void cluster_services_cost_little(void **state)
{
        (void)state;
        enum { SERVICES = 8000 };
        struct se_store *st = se_store_new();
        assert_non_null(st);
        for (unsigned i = 0; i < SERVICES; i++) {
                char name[32], y[512];
                snprintf(y, sizeof(y),
                         "apiVersion: v1\nkind: Service\nmetadata: {name: s%u, namespace: a}\n"
                         "spec: {clusterIP: 10.96.%u.%u, ports: [{name: http, port: 80}]}\n",
                         i, i / 250, i % 250 + 1);
                snprintf(name, sizeof(name), "s%u", i);
                load(st, SE_KIND_SERVICE, "a", name, y);
        }
        struct se_dns_options o = { .ttl = 5, .serial = T_SERIAL };
        struct se_dns_zone *z = NULL;
        struct se_diag d = { 0 };
        size_t before = heap_bytes();
        assert_int_equal(se_dns_zone_update(st, &o, NULL, &z, &d), 0);
        size_t per = (heap_bytes() - before) / SERVICES;
        print_message("zone: %zu B per ClusterIP Service\n", per);
        assert_true(per < 500);
        se_dns_zone_unref(z);
        se_store_free(st);
}

/* A zone made after a change to one Service holds that Service's new block
 * for as long as it does not change again, and with it the memory the
 * build carved the block from: a few KB, not a whole slab of the size a
 * full build uses (200 such changes would hold 200 MB). */
static void small_changes_stay_small(void **state)
{
        (void)state;
        struct se_store *st = se_store_new();
        assert_non_null(st);
        char y[512];
        for (unsigned i = 0; i < 400; i++) {
                snprintf(y, sizeof(y),
                         "apiVersion: v1\nkind: Service\nmetadata: {name: s%u, namespace: a}\n"
                         "spec: {clusterIP: 10.96.%u.%u, ports: [{name: http, port: 80}]}\n",
                         i, 1 + i / 200, i % 200 + 1);
                char name[32];
                snprintf(name, sizeof(name), "s%u", i);
                load(st, SE_KIND_SERVICE, "a", name, y);
                put_big_slice(st, i);
        }
        struct se_dns_options o = { .ttl = 5, .serial = T_SERIAL };
        struct se_dns_zone *z = NULL;
        struct se_diag d = { 0 };
        assert_int_equal(se_dns_zone_update(st, &o, NULL, &z, &d), 0);
        size_t before = heap_bytes();
        for (unsigned i = 0; i < 200; i++) {
                put_big_slice(st, i); /* a new object: the block is made again */
                struct se_dns_zone *next = NULL;
                assert_int_equal(se_dns_zone_update(st, &o, z, &next, &d), 0);
                se_dns_zone_unref(z);
                z = next;
        }
        size_t after = heap_bytes();
        long grown = (long)after - (long)before;
        print_message("after 200 one-Service changes the heap grew by %ld KB\n", grown / 1024);
        assert_true(grown < 8L * 1024 * 1024);
        se_dns_zone_unref(z);
        se_store_free(st);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(random_changes),
                cmocka_unit_test(random_changes_noted),
                cmocka_unit_test(only_noted_changes),
                cmocka_unit_test(outlives_store),
                cmocka_unit_test(options_change),
                cmocka_unit_test(small_changes_stay_small),
                cmocka_unit_test(endpoints_cost_little),
                cmocka_unit_test(cluster_services_cost_little),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

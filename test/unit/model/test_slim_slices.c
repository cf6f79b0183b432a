/* Slim EndpointSlices (SE_DECODE_SLIM_SLICES): the same checks as a full
 * decode, digests instead of endpoints, the hints kept, far less memory,
 * and never encoded. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <svcenv/decode.h>
#include <svcenv/encode.h>

/* A slice as the controller writes it: n endpoints of one pod each. */
static json_t *controller_slice(int n)
{
        json_t *eps = json_array();
        for (int i = 0; i < n; i++) {
                char ip[32], name[32], uid[64];
                snprintf(ip, sizeof(ip), "10.1.%d.%d", i / 200, i % 200 + 1);
                snprintf(name, sizeof(name), "web-7d9f8c6b5-%05d", i);
                snprintf(uid, sizeof(uid), "0b6c1f2e-8a7d-4c3b-9e5f-%012d", i);
                json_array_append_new(
                        eps, json_pack("{s:[s],s:{s:b,s:b,s:b},s:{s:s,s:s,s:s,s:s},s:s,s:s}",
                                       "addresses", ip, "conditions", "ready", 1, "serving", 1,
                                       "terminating", 0, "targetRef", "kind", "Pod", "namespace",
                                       "default", "name", name, "uid", uid, "nodeName",
                                       i % 2 ? "node-1" : "node-2", "zone", "zone-a"));
        }
        return json_pack(
                "{s:s,s:s,s:{s:s,s:s,s:s,s:s,s:s,s:{s:s,s:s},s:[{s:s,s:s,s:s,s:s,s:b,s:b}]},"
                "s:s,s:o,s:[{s:s,s:s,s:i}]}",
                "apiVersion", "discovery.k8s.io/v1", "kind", "EndpointSlice", "metadata", "name",
                "web-x7k2p", "generateName", "web-", "namespace", "default", "uid",
                "5d2c7e1a-0f3b-4e8d-a6c9-1b2d3e4f5a6b", "resourceVersion", "123456", "labels",
                "endpointslice.kubernetes.io/managed-by", "endpointslice-controller.k8s.io",
                "kubernetes.io/service-name", "web", "ownerReferences", "apiVersion", "v1", "kind",
                "Service", "name", "web", "uid", "9a8b7c6d-5e4f-3a2b-1c0d-e9f8a7b6c5d4",
                "controller", 1, "blockOwnerDeletion", 1, "addressType", "IPv4", "endpoints", eps,
                "ports", "name", "http", "protocol", "TCP", "port", 8080);
}

static struct se_endpoint_slice *decode(const json_t *j, unsigned flags)
{
        struct se_object *o = NULL;
        struct se_decode_error e;
        int r = se_decode_object_flags(j, SE_KIND_ENDPOINT_SLICE, NULL, flags, &o, &e);
        if (r != 0)
                fail_msg("decode: %d %s: %s", r, e.path, e.message);
        return (struct se_endpoint_slice *)o;
}

static void test_slim_slices__digests_and_memory(void **state)
{
        (void)state;
        json_t *j = controller_slice(15);
        struct se_endpoint_slice *full = decode(j, 0), *slim = decode(j, SE_DECODE_SLIM_SLICES);
        assert_false(full->slim);
        assert_true(slim->slim);
        assert_null(slim->endpoints);
        assert_int_equal(slim->n_endpoints, 15);
        assert_null(slim->hints);
        for (uint32_t i = 0; i < 15; i++) {
                struct se_slice_endpoint_digest d;
                se_slice_endpoint_digest(&full->endpoints[i], &d);
                assert_true(d.identity == slim->digests[i].identity);
                assert_true(d.beyond == slim->digests[i].beyond);
                assert_int_equal(slim->digests[i].ready, SE_TRUE);
                assert_int_equal(slim->digests[i].hints, 0);
                if (i)
                        assert_true(slim->digests[i].identity != slim->digests[i - 1].identity);
        }
        /* what is kept besides the endpoints */
        assert_string_equal(slim->obj.meta.name, "web-x7k2p");
        assert_string_equal(slim->obj.meta.resource_version, "123456");
        assert_int_equal(se_meta_n_owner_refs(&slim->obj.meta), 1);
        assert_int_equal(slim->obj.meta.labels.n, 2);
        assert_string_equal(slim->address_type, "IPv4");
        assert_int_equal(slim->n_ports, 1);
        assert_int_equal(slim->ports[0].port, 8080);
        size_t fm = se_object_memory(&full->obj), sm = se_object_memory(&slim->obj);
        print_message("15-endpoint slice: full %zu bytes, slim %zu bytes\n", fm, sm);
        assert_true(sm * 3 < fm);
        /* the encoder refuses a slim slice */
        assert_null(se_encode_object(&slim->obj));
        json_t *again = se_encode_object(&full->obj);
        assert_non_null(again);
        json_decref(again);
        se_object_unref(&full->obj);
        se_object_unref(&slim->obj);
        json_decref(j);
}

/* digests: the identity is upstream's endpoint hash (address order, nil
 * hostname = "" and the targetRef's uid do not count); beyond covers
 * nodeName, zone (nil and "" differ), conditions and the targetRef */
static void test_slim_slices__digest_fields(void **state)
{
        (void)state;
        const char *a2[] = { "10.0.0.1", "10.0.0.2" }, *b2[] = { "10.0.0.2", "10.0.0.1" };
        struct se_object_ref r1 = { "Pod", "ns", "p", "u1", "1" }, r2 = r1;
        struct se_arena arena = SE_ARENA_INIT;
        struct se_slice_endpoint x = { .addresses = { a2, 2 }, .ready = SE_TRUE };
        struct se_slice_endpoint_fields xf = { .node_name = "n", .zone = "z", .target_ref = &r1 },
                                        yf;
        assert_int_equal(se_slice_endpoint_set_more(&x, &arena, &xf, NULL), 0);
        struct se_slice_endpoint y = x;
        struct se_slice_endpoint_digest dx, dy;
        se_slice_endpoint_digest(&x, &dx);
#define SAME_ID(expr, same_beyond)                                        \
 do {                                                                     \
  y = x;                                                                  \
  yf = xf;                                                                \
  r2 = r1;                                                                \
  yf.target_ref = &r2;                                                    \
  expr;                                                                   \
  assert_int_equal(se_slice_endpoint_set_more(&y, &arena, &yf, NULL), 0); \
  se_slice_endpoint_digest(&y, &dy);                                      \
  assert_true(dx.identity == dy.identity);                                \
  assert_int_equal(dx.beyond == dy.beyond, same_beyond);                  \
 } while (0)
#define NEW_ID(expr)                                                      \
 do {                                                                     \
  y = x;                                                                  \
  yf = xf;                                                                \
  r2 = r1;                                                                \
  yf.target_ref = &r2;                                                    \
  expr;                                                                   \
  assert_int_equal(se_slice_endpoint_set_more(&y, &arena, &yf, NULL), 0); \
  se_slice_endpoint_digest(&y, &dy);                                      \
  assert_true(dx.identity != dy.identity);                                \
 } while (0)
        SAME_ID((void)0, true);
        SAME_ID(y.addresses.v = b2, true);
        SAME_ID(y.hostname = "", true);
        SAME_ID(r2.resource_version = "2", true);
        SAME_ID(r2.uid = "u2", false);
        SAME_ID(r2.kind = "Node", false);
        SAME_ID(yf.zone = "", false);
        SAME_ID(yf.zone = NULL, false);
        SAME_ID(yf.node_name = NULL, false);
        SAME_ID(y.ready = SE_UNSET, false);
        SAME_ID(y.serving = SE_TRUE, false);
        SAME_ID(y.terminating = SE_FALSE, false);
        NEW_ID(y.addresses.n = 1);
        NEW_ID(y.hostname = "h");
        NEW_ID(r2.name = "q");
        NEW_ID(r2.namespace = "other");
        NEW_ID(yf.target_ref = NULL);
#undef SAME_ID
#undef NEW_ID
        se_arena_release(&arena);
}

/* hints are kept as written; a slim decode refuses what a full one does,
 * with the same error */
static void test_slim_slices__hints_and_errors(void **state)
{
        (void)state;
        json_t *j = controller_slice(3);
        json_t *eps = json_object_get(j, "endpoints");
        json_object_set_new(json_array_get(eps, 1), "hints",
                            json_pack("{s:[{s:s},{s:s}],s:[{s:s}]}", "forZones", "name", "zone-b",
                                      "name", "zone-c", "forNodes", "name", "node-9"));
        struct se_endpoint_slice *slim = decode(j, SE_DECODE_SLIM_SLICES);
        assert_int_equal(slim->digests[0].hints, 0);
        assert_int_equal(slim->digests[1].hints, 1);
        assert_int_equal(slim->digests[2].hints, 0);
        const struct se_slice_endpoint_hints *h = &slim->hints[0];
        assert_int_equal(h->zones.n, 2);
        assert_string_equal(h->zones.v[0], "zone-b");
        assert_string_equal(h->zones.v[1], "zone-c");
        assert_int_equal(h->nodes.n, 1);
        assert_string_equal(h->nodes.v[0], "node-9");
        se_object_unref(&slim->obj);

        static const char *const bad[] = { "[\"10.0.0.256\"]", "[]", "\"x\"" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
                json_object_set_new(json_array_get(eps, 2), "addresses",
                                    json_loads(bad[i], JSON_DECODE_ANY, NULL));
                struct se_object *o = NULL;
                struct se_decode_error ef, es;
                int rf = se_decode_object_flags(j, SE_KIND_ENDPOINT_SLICE, NULL, 0, &o, &ef);
                assert_int_equal(rf, -EINVAL);
                int rs = se_decode_object_flags(j, SE_KIND_ENDPOINT_SLICE, NULL,
                                                SE_DECODE_SLIM_SLICES, &o, &es);
                assert_int_equal(rs, -EINVAL);
                assert_null(o);
                assert_string_equal(ef.path, es.path);
                assert_string_equal(ef.message, es.message);
        }
        json_decref(j);
}

/* SE_DECODE_DNS_SLICES: what cluster DNS reads (addresses, hostname,
 * conditions, ports, the service-name label) is as in a full decode; the
 * rest is dropped unread, and the slice costs far less. */
static void test_slim_slices__dns_form(void **state)
{
        (void)state;
        json_t *j = controller_slice(15);
        json_t *eps = json_object_get(j, "endpoints");
        json_object_set_new(json_array_get(eps, 1), "hostname", json_string("web-1"));
        json_object_set_new(json_object_get(json_array_get(eps, 2), "conditions"), "ready",
                            json_false());
        /* not read, so not checked either */
        json_object_set_new(json_array_get(eps, 3), "hints", json_string("not an object"));
        struct se_endpoint_slice *full = NULL, *dns = decode(j, SE_DECODE_DNS_SLICES);
        json_object_del(json_array_get(eps, 3), "hints");
        full = decode(j, 0);
        assert_false(dns->slim);
        assert_int_equal(dns->n_endpoints, 15);
        for (uint32_t i = 0; i < 15; i++) {
                const struct se_slice_endpoint *f = &full->endpoints[i], *e = &dns->endpoints[i];
                assert_int_equal(e->addresses.n, 1);
                assert_string_equal(e->addresses.v[0], f->addresses.v[0]);
                assert_int_equal(e->ready, f->ready);
                assert_int_equal(e->serving, f->serving);
                assert_int_equal(e->terminating, f->terminating);
                if (f->hostname)
                        assert_string_equal(e->hostname, f->hostname);
                else
                        assert_null(e->hostname);
                assert_null(se_slice_endpoint_target_ref(e));
                assert_null(se_slice_endpoint_node(e));
                assert_null(se_slice_endpoint_zone(e));
                assert_int_equal(
                        se_slice_endpoint_hint_zones(e)->n + se_slice_endpoint_hint_nodes(e)->n, 0);
        }
        assert_string_equal(dns->endpoints[1].hostname, "web-1");
        assert_int_equal(dns->endpoints[2].ready, SE_FALSE);
        assert_string_equal(se_kvlist_get(&dns->obj.meta.labels, "kubernetes.io/service-name"),
                            "web");
        assert_int_equal(se_meta_n_owner_refs(&dns->obj.meta), 0);
        assert_int_equal(dns->n_ports, 1);
        assert_int_equal(dns->ports[0].port, 8080);
        size_t fm = se_object_memory(&full->obj), dm = se_object_memory(&dns->obj);
        print_message("15-endpoint slice: full %zu bytes, DNS form %zu bytes\n", fm, dm);
        assert_true(dm * 3 < fm * 2);
        /* the addresses are still checked */
        json_object_set_new(json_array_get(eps, 4), "addresses", json_pack("[s]", "10.0.0.256"));
        struct se_object *o = NULL;
        struct se_decode_error e;
        assert_int_equal(se_decode_object_flags(j, SE_KIND_ENDPOINT_SLICE, NULL,
                                                SE_DECODE_DNS_SLICES, &o, &e),
                         -EINVAL);
        assert_null(o);
        assert_string_equal(e.path, "endpoints[4].addresses[0]");
        se_object_unref(&full->obj);
        se_object_unref(&dns->obj);
        json_decref(j);
}

/* SE_DECODE_PROXY_SLICES: what a service proxy reads (conditions,
 * nodeName, zone, hints, labels and the trigger-time annotation) is as in a
 * full decode; the pod references, hostnames and the metadata no proxy
 * reads are dropped unread; nodeName and zone come from the pool. */
static void test_slim_slices__proxy_form(void **state)
{
        (void)state;
        json_t *j = controller_slice(15);
        json_t *eps = json_object_get(j, "endpoints");
        json_object_set_new(json_array_get(eps, 1), "hostname", json_string("web-1"));
        json_object_set_new(json_array_get(eps, 2), "hints",
                            json_pack("{s:[{s:s}]}", "forZones", "name", "zone-b"));
        json_object_set_new(json_object_get(j, "metadata"), "annotations",
                            json_pack("{s:s}", "endpoints.kubernetes.io/last-change-trigger-time",
                                      "2026-12-03T10:00:01Z"));
        json_object_set_new(json_array_get(eps, 3), "targetRef", json_string("not read"));
        const unsigned flags = SE_DECODE_PROXY_SLICES | SE_DECODE_INTERN;
        struct se_endpoint_slice *px = decode(j, flags), *again = decode(j, flags);
        json_object_del(json_array_get(eps, 3), "targetRef");
        struct se_endpoint_slice *full = decode(j, 0);
        assert_false(px->slim);
        assert_int_equal(px->n_endpoints, 15);
        for (uint32_t i = 0; i < 15; i++) {
                const struct se_slice_endpoint *f = &full->endpoints[i], *e = &px->endpoints[i];
                assert_int_equal(e->addresses.n, 1);
                assert_string_equal(e->addresses.v[0], f->addresses.v[0]);
                assert_int_equal(e->ready, f->ready);
                assert_int_equal(e->serving, f->serving);
                assert_int_equal(e->terminating, f->terminating);
                assert_string_equal(se_slice_endpoint_node(e), se_slice_endpoint_node(f));
                assert_string_equal(se_slice_endpoint_zone(e), se_slice_endpoint_zone(f));
                assert_int_equal(se_slice_endpoint_hint_zones(e)->n,
                                 se_slice_endpoint_hint_zones(f)->n);
                assert_null(se_slice_endpoint_target_ref(e));
                assert_null(e->hostname);
                /* one copy for all slices */
                assert_ptr_equal(se_slice_endpoint_node(e),
                                 se_slice_endpoint_node(&again->endpoints[i]));
                assert_ptr_equal(se_slice_endpoint_zone(e),
                                 se_slice_endpoint_zone(&again->endpoints[i]));
        }
        assert_string_equal(se_slice_endpoint_hint_zones(&px->endpoints[2])->v[0], "zone-b");
        assert_string_equal(se_kvlist_get(&px->obj.meta.labels, "kubernetes.io/service-name"),
                            "web");
        assert_string_equal(se_kvlist_get(&px->obj.meta.annotations,
                                          "endpoints.kubernetes.io/last-change-trigger-time"),
                            "2026-12-03T10:00:01Z");
        assert_string_equal(px->obj.meta.resource_version, "123456");
        assert_null(px->obj.meta.uid);
        assert_null(px->obj.meta.more);
        assert_int_equal(px->n_ports, 1);
        assert_int_equal(px->ports[0].port, 8080);
        size_t fm = se_object_memory(&full->obj), pm = se_object_memory(&px->obj);
        print_message("15-endpoint slice: full %zu bytes, proxy form %zu bytes\n", fm, pm);
        assert_true(pm * 5 < fm * 3);
        se_object_unref(&full->obj);
        se_object_unref(&px->obj);
        se_object_unref(&again->obj);
        json_decref(j);
}

/* What one more endpoint adds to a slice in the DNS form (svcenv-dns keeps
 * 150,000): its 40-byte struct, one address pointer (no NULL after it) and
 * the address text; nothing for the targetRef, nodeName, zone and hints it
 * does not have. */
static void test_slim_slices__bytes_per_endpoint(void **state)
{
        (void)state;
        json_t *j15 = controller_slice(15), *j30 = controller_slice(30);
        struct se_endpoint_slice *a = decode(j15, SE_DECODE_DNS_SLICES),
                                 *b = decode(j30, SE_DECODE_DNS_SLICES);
        size_t per = (se_object_memory(&b->obj) - se_object_memory(&a->obj)) / 15;
        print_message("DNS form: %zu bytes per endpoint\n", per);
        assert_int_equal(sizeof(struct se_slice_endpoint), 40);
        assert_true(per <= 40 + 8 + 16);
        for (uint32_t i = 0; i < b->n_endpoints; i++)
                assert_null(b->endpoints[i].more);
        se_object_unref(&a->obj);
        se_object_unref(&b->obj);
        json_decref(j15);
        json_decref(j30);
}

/* Distinct `more`s among s's endpoints. */
static size_t n_mores(const struct se_endpoint_slice *s)
{
        size_t n = 0;
        for (uint32_t i = 0; i < s->n_endpoints; i++) {
                bool seen = false;
                for (uint32_t k = 0; k < i && !seen; k++)
                        seen = s->endpoints[k].more == s->endpoints[i].more;
                n += !seen;
        }
        return n;
}

/* The endpoints of a slice share one `more` per distinct nodeName, zone,
 * targetRef and hints: in the proxy form 30 endpoints on 2 nodes hold 2;
 * with a targetRef each (the full form) every endpoint has its own. */
static void test_slim_slices__shared_more(void **state)
{
        (void)state;
        json_t *j = controller_slice(30);
        json_t *eps = json_object_get(j, "endpoints");
        struct se_endpoint_slice *px = decode(j, SE_DECODE_PROXY_SLICES | SE_DECODE_INTERN),
                                 *plain = decode(j, SE_DECODE_PROXY_SLICES), *full = decode(j, 0);
        assert_int_equal(n_mores(px), 2);
        assert_int_equal(n_mores(plain), 2); /* equal by content, not pointer */
        assert_int_equal(n_mores(full), 30);
        for (uint32_t i = 0; i < 30; i++) {
                const struct se_slice_endpoint *e = &full->endpoints[i];
                char name[32];
                snprintf(name, sizeof(name), "web-7d9f8c6b5-%05u", i);
                assert_string_equal(se_slice_endpoint_target_ref(e)->name, name);
                assert_string_equal(se_slice_endpoint_node(e), i % 2 ? "node-1" : "node-2");
                assert_string_equal(se_slice_endpoint_node(&px->endpoints[i]),
                                    i % 2 ? "node-1" : "node-2");
                assert_string_equal(se_slice_endpoint_zone(&px->endpoints[i]), "zone-a");
                assert_null(se_slice_endpoint_hints(e));
        }
        /* an endpoint with hints, or in another zone, gets a `more` of its own */
        json_object_set_new(json_array_get(eps, 4), "hints",
                            json_pack("{s:[{s:s}]}", "forZones", "name", "zone-a"));
        json_object_set_new(json_array_get(eps, 5), "zone", json_string("zone-b"));
        struct se_endpoint_slice *px2 = decode(j, SE_DECODE_PROXY_SLICES | SE_DECODE_INTERN);
        assert_int_equal(n_mores(px2), 4);
        assert_string_equal(se_slice_endpoint_hint_zones(&px2->endpoints[4])->v[0], "zone-a");
        assert_int_equal(se_slice_endpoint_hint_zones(&px2->endpoints[6])->n, 0);
        assert_string_equal(se_slice_endpoint_zone(&px2->endpoints[5]), "zone-b");
        assert_string_equal(se_slice_endpoint_zone(&px2->endpoints[7]), "zone-a");
        se_object_unref(&px->obj);
        se_object_unref(&plain->obj);
        se_object_unref(&full->obj);
        se_object_unref(&px2->obj);
        json_decref(j);
}

/* Setting a field of an endpoint whose `more` is shared gives it a new one
 * and leaves the others sharing the old one as they were. */
static void test_slim_slices__copy_on_write(void **state)
{
        (void)state;
        json_t *j = controller_slice(6);
        struct se_endpoint_slice *s = decode(j, 0);
        struct se_arena *a = &s->obj.arena;
        /* without their targetRefs, endpoints 0, 2, 4 can share one `more` */
        struct se_slice_more_cache cache = { 0 };
        for (uint32_t i = 0; i < 6; i++) {
                struct se_slice_endpoint_fields f;
                se_slice_endpoint_get_more(&s->endpoints[i], &f);
                f.target_ref = NULL;
                assert_int_equal(se_slice_endpoint_set_more(&s->endpoints[i], a, &f, &cache), 0);
        }
        assert_int_equal(n_mores(s), 2);
        const struct se_slice_endpoint_more *shared = s->endpoints[2].more;
        assert_ptr_equal(s->endpoints[0].more, shared);
        assert_ptr_equal(s->endpoints[4].more, shared);
        const char *zv[] = { "zone-c" };
        assert_int_equal(se_slice_endpoint_set_hints(&s->endpoints[0], a, (struct se_strs){ zv, 1 },
                                                     (struct se_strs){ NULL, 0 }),
                         0);
        assert_ptr_not_equal(s->endpoints[0].more, shared);
        assert_string_equal(se_slice_endpoint_hint_zones(&s->endpoints[0])->v[0], "zone-c");
        assert_string_equal(se_slice_endpoint_node(&s->endpoints[0]), "node-2");
        assert_string_equal(se_slice_endpoint_zone(&s->endpoints[0]), "zone-a");
        struct se_object_ref ref = { "Pod", "default", "p2", NULL, NULL };
        assert_int_equal(se_slice_endpoint_set_node(&s->endpoints[2], a, "node-9"), 0);
        assert_int_equal(se_slice_endpoint_set_target_ref(&s->endpoints[4], a, &ref), 0);
        ref.name = "changed after"; /* the struct was copied */
        assert_string_equal(se_slice_endpoint_target_ref(&s->endpoints[4])->name, "p2");
        assert_string_equal(se_slice_endpoint_node(&s->endpoints[4]), "node-2");
        assert_string_equal(se_slice_endpoint_node(&s->endpoints[2]), "node-9");
        /* the shared one is untouched */
        const struct se_slice_endpoint probe = { .more = shared };
        assert_string_equal(se_slice_endpoint_node(&probe), "node-2");
        assert_string_equal(se_slice_endpoint_zone(&probe), "zone-a");
        assert_null(se_slice_endpoint_hints(&probe));
        assert_null(se_slice_endpoint_target_ref(&probe));
        /* all cleared: no `more` at all */
        assert_int_equal(se_slice_endpoint_set_more(&s->endpoints[3], a,
                                                    &(struct se_slice_endpoint_fields){ 0 }, NULL),
                         0);
        assert_null(s->endpoints[3].more);
        assert_int_equal(s->endpoints[3].more_has, 0);
        se_object_unref(&s->obj);
        json_decref(j);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_slim_slices__digests_and_memory),
                cmocka_unit_test(test_slim_slices__digest_fields),
                cmocka_unit_test(test_slim_slices__hints_and_errors),
                cmocka_unit_test(test_slim_slices__dns_form),
                cmocka_unit_test(test_slim_slices__bytes_per_endpoint),
                cmocka_unit_test(test_slim_slices__shared_more),
                cmocka_unit_test(test_slim_slices__copy_on_write),
                cmocka_unit_test(test_slim_slices__proxy_form),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

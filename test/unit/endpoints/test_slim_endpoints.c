/* Slim Endpoints (SE_DECODE_SLIM_ENDPOINTS): the controller caches an
 * existing Endpoints as its metadata plus a digest of its subsets. The
 * planner's verdict and the object it writes must be the same as with the
 * full object: field by field, for the reorderings its equality allows, for
 * the capacity rule, and over whole clusters. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <svcenv/manifest.h>
#include <svcenv/store.h>

#include "fixtures.h"
#include "slim_ep.h"

#define DEMO      "manifests/examples/demo-cluster.yaml"
#define DEMO_SHOP "test/golden/endpoints/demo-shop.yaml"
#define PLAN      "test/golden/endpoints/plan-cluster.yaml"

/* Canonical as the planner builds it: subsets by first port (the unnamed
 * one first), ports sorted. */
static const char base_json[] =
        "{\"metadata\":{\"name\":\"web\",\"namespace\":\"ns\",\"resourceVersion\":\"9\","
        "\"labels\":{\"app\":\"web\",\"endpoints.kubernetes.io/managed-by\":"
        "\"endpoint-controller\"}},\"subsets\":["
        "{\"addresses\":[{\"ip\":\"10.0.0.5\",\"targetRef\":{\"kind\":\"Pod\",\"namespace\":"
        "\"ns\",\"name\":\"e\",\"uid\":\"uid-e\"}}],"
        "\"ports\":[{\"port\":90,\"protocol\":\"TCP\"}]},"
        "{\"addresses\":["
        "{\"ip\":\"10.0.0.2\",\"nodeName\":\"n1\",\"targetRef\":{\"kind\":\"Pod\",\"namespace\":"
        "\"ns\",\"name\":\"a\",\"uid\":\"uid-a\",\"resourceVersion\":\"5\"}},"
        "{\"ip\":\"10.0.0.3\",\"hostname\":\"h\",\"nodeName\":\"n2\",\"targetRef\":{\"kind\":"
        "\"Pod\",\"namespace\":\"ns\",\"name\":\"b\",\"uid\":\"uid-b\"}}],"
        "\"notReadyAddresses\":[{\"ip\":\"10.0.0.4\",\"nodeName\":\"n1\",\"targetRef\":{"
        "\"kind\":\"Pod\",\"namespace\":\"ns\",\"name\":\"c\",\"uid\":\"uid-c\"}}],"
        "\"ports\":[{\"name\":\"a\",\"port\":80,\"protocol\":\"TCP\"},{\"name\":\"b\",\"port\":"
        "81,\"protocol\":\"UDP\",\"appProtocol\":\"http\"}]}]}";

static json_t *load(const char *text)
{
        json_error_t je;
        json_t *j = json_loads(text, 0, &je);
        if (!j)
                fail_msg("json: %s", je.text);
        return j;
}

/* subsets[s] */
static json_t *sub(json_t *r, size_t s)
{
        return json_array_get(json_object_get(r, "subsets"), s);
}

/* subsets[s][key][i] */
static json_t *item(json_t *r, size_t s, const char *key, size_t i)
{
        return json_array_get(json_object_get(sub(r, s), key), i);
}

static json_t *ref(json_t *r, size_t s, size_t i)
{
        return json_object_get(item(r, s, "addresses", i), "targetRef");
}

static void set(json_t *o, const char *key, const char *value)
{
        assert_int_equal(json_object_set_new(o, key, json_string(value)), 0);
}

static void swap(json_t *arr, size_t a, size_t b)
{
        json_t *x = json_incref(json_array_get(arr, a)), *y = json_incref(json_array_get(arr, b));
        json_array_set_new(arr, a, y);
        json_array_set_new(arr, b, x);
}

/* ---- one edit each; true: the planner still counts the subsets equal ---- */

static void reorder_subsets(json_t *r)
{
        swap(json_object_get(r, "subsets"), 0, 1);
}
static void reorder_ports(json_t *r)
{
        swap(json_object_get(sub(r, 1), "ports"), 0, 1);
}
static void ref_rv_changed(json_t *r)
{
        set(ref(r, 1, 0), "resourceVersion", "6");
}
static void ref_rv_dropped(json_t *r)
{
        json_object_del(ref(r, 1, 0), "resourceVersion");
}
static void ref_extra_fields(json_t *r)
{
        set(ref(r, 1, 0), "apiVersion", "v1");
        set(ref(r, 1, 0), "fieldPath", "spec");
}
static void empty_hostname(json_t *r)
{
        set(item(r, 1, "addresses", 0), "hostname", "");
}
static void empty_node_name(json_t *r)
{
        set(item(r, 0, "addresses", 0), "nodeName", "");
}
static void empty_port_name(json_t *r)
{
        set(item(r, 0, "ports", 0), "name", "");
}
static void empty_ref_uid_vs_none(json_t *r)
{
        set(ref(r, 1, 0), "uid", "");
        set(ref(r, 1, 1), "uid", ""); /* differs anyway: kept for symmetry */
}
static void ip_changed(json_t *r)
{
        set(item(r, 1, "addresses", 0), "ip", "10.0.0.9");
}
static void hostname_changed(json_t *r)
{
        set(item(r, 1, "addresses", 1), "hostname", "g");
}
static void hostname_added(json_t *r)
{
        set(item(r, 1, "addresses", 0), "hostname", "x");
}
static void node_name_changed(json_t *r)
{
        set(item(r, 1, "addresses", 0), "nodeName", "n3");
}
static void node_name_dropped(json_t *r)
{
        json_object_del(item(r, 1, "addresses", 0), "nodeName");
}
static void ref_kind_changed(json_t *r)
{
        set(ref(r, 1, 0), "kind", "Node");
}
static void ref_namespace_changed(json_t *r)
{
        set(ref(r, 1, 0), "namespace", "other");
}
static void ref_name_changed(json_t *r)
{
        set(ref(r, 1, 0), "name", "z");
}
static void ref_uid_changed(json_t *r)
{
        set(ref(r, 1, 0), "uid", "uid-z");
}
static void ref_dropped(json_t *r)
{
        json_object_del(item(r, 1, "addresses", 0), "targetRef");
}
static void ref_emptied(json_t *r)
{
        /* an empty targetRef is not an absent one */
        json_object_set_new(item(r, 0, "addresses", 0), "targetRef", json_object());
}
static void addresses_reordered(json_t *r)
{
        swap(json_object_get(sub(r, 1), "addresses"), 0, 1);
}
static void ready_to_not_ready(json_t *r)
{
        json_t *a = json_incref(item(r, 1, "addresses", 1));
        json_array_remove(json_object_get(sub(r, 1), "addresses"), 1);
        json_array_insert_new(json_object_get(sub(r, 1), "notReadyAddresses"), 0, a);
}
static void address_dropped(json_t *r)
{
        json_array_remove(json_object_get(sub(r, 1), "notReadyAddresses"), 0);
}
static void address_added(json_t *r)
{
        json_array_append_new(json_object_get(sub(r, 0), "addresses"),
                              json_pack("{s:s}", "ip", "10.0.0.6"));
}
static void address_moved_between_subsets(json_t *r)
{
        json_t *a = json_incref(item(r, 0, "addresses", 0));
        json_object_del(sub(r, 0), "addresses");
        json_array_append_new(json_object_get(sub(r, 1), "addresses"), a);
}
static void port_name_changed(json_t *r)
{
        set(item(r, 1, "ports", 0), "name", "x");
}
static void port_number_changed(json_t *r)
{
        json_object_set_new(item(r, 1, "ports", 0), "port", json_integer(82));
}
static void port_protocol_changed(json_t *r)
{
        set(item(r, 1, "ports", 0), "protocol", "SCTP");
}
static void app_protocol_changed(json_t *r)
{
        set(item(r, 1, "ports", 1), "appProtocol", "h2c");
}
static void app_protocol_empty(json_t *r)
{
        /* appProtocol "" is not an absent one */
        set(item(r, 1, "ports", 0), "appProtocol", "");
}
static void port_dropped(json_t *r)
{
        json_array_remove(json_object_get(sub(r, 1), "ports"), 1);
}
static void port_added(json_t *r)
{
        json_array_append_new(json_object_get(sub(r, 0), "ports"),
                              json_pack("{s:s,s:i}", "name", "z", "port", 99));
}
static void subset_dropped(json_t *r)
{
        json_array_remove(json_object_get(r, "subsets"), 0);
}
static void portless_subset_added(json_t *r)
{
        json_array_append_new(json_object_get(r, "subsets"),
                              json_pack("{s:[{s:s}]}", "addresses", "ip", "10.0.0.7"));
}
static void subsets_emptied(json_t *r)
{
        json_object_set_new(r, "subsets", json_array());
}
static void ports_swapped_between_subsets(json_t *r)
{
        json_t *p0 = json_incref(json_object_get(sub(r, 0), "ports"));
        json_t *p1 = json_incref(json_object_get(sub(r, 1), "ports"));
        json_object_set_new(sub(r, 0), "ports", p1);
        json_object_set_new(sub(r, 1), "ports", p0);
}

struct edit {
        const char *what;
        void (*apply)(json_t *r);
        bool equal;
};

static const struct edit edits[] = {
        { "subsets reordered", reorder_subsets, true },
        { "ports reordered", reorder_ports, true },
        { "targetRef.resourceVersion changed", ref_rv_changed, true },
        { "targetRef.resourceVersion dropped", ref_rv_dropped, true },
        { "targetRef apiVersion/fieldPath added", ref_extra_fields, true },
        { "hostname \"\" for none", empty_hostname, true },
        { "nodeName \"\" for none", empty_node_name, true },
        { "port name \"\" for none", empty_port_name, true },
        { "targetRef.uid emptied", empty_ref_uid_vs_none, false },
        { "ip changed", ip_changed, false },
        { "hostname changed", hostname_changed, false },
        { "hostname added", hostname_added, false },
        { "nodeName changed", node_name_changed, false },
        { "nodeName dropped", node_name_dropped, false },
        { "targetRef.kind changed", ref_kind_changed, false },
        { "targetRef.namespace changed", ref_namespace_changed, false },
        { "targetRef.name changed", ref_name_changed, false },
        { "targetRef.uid changed", ref_uid_changed, false },
        { "targetRef dropped", ref_dropped, false },
        { "targetRef emptied", ref_emptied, false },
        { "addresses reordered", addresses_reordered, false },
        { "ready address made not ready", ready_to_not_ready, false },
        { "not-ready address dropped", address_dropped, false },
        { "address added", address_added, false },
        { "address moved to another subset", address_moved_between_subsets, false },
        { "port name changed", port_name_changed, false },
        { "port number changed", port_number_changed, false },
        { "port protocol changed", port_protocol_changed, false },
        { "appProtocol changed", app_protocol_changed, false },
        { "appProtocol \"\" for none", app_protocol_empty, false },
        { "port dropped", port_dropped, false },
        { "port added", port_added, false },
        { "subset dropped", subset_dropped, false },
        { "port-less subset added", portless_subset_added, false },
        { "subsets emptied", subsets_emptied, false },
        { "ports swapped between subsets", ports_swapped_between_subsets, false },
};

static void test_slim_endpoints__one_edit_each(void **state)
{
        (void)state;
        struct se_service *svc = fx_service("ns", "web", "10.0.0.1");
        json_t *base = load(base_json);
        struct se_endpoints *want = fx_ep_decode(base, 0);
        uint8_t dw[SE_ENDPOINTS_DIGEST_LEN], dh[SE_ENDPOINTS_DIGEST_LEN];
        assert_int_equal(se_endpoints_digest(want, dw), 0);
        /* the base itself */
        struct se_endpoints *slim = fx_ep_decode(base, SE_DECODE_SLIM_ENDPOINTS);
        assert_true(se_endpoints_equal(want, want, svc, NULL));
        assert_true(se_endpoints_equal(want, slim, svc, NULL));
        assert_memory_equal(slim->digest, dw, sizeof(dw));
        assert_int_equal(slim->n_addresses, 4);
        se_object_unref(&slim->obj);
        for (size_t i = 0; i < SE_ARRAY_SIZE(edits); i++) {
                json_t *j = json_deep_copy(base);
                edits[i].apply(j);
                struct se_endpoints *full = fx_ep_decode(j, 0);
                slim = fx_ep_decode(j, SE_DECODE_SLIM_ENDPOINTS);
                bool eq_full = se_endpoints_equal(want, full, svc, NULL);
                bool eq_slim = se_endpoints_equal(want, slim, svc, NULL);
                if (eq_full != edits[i].equal || eq_slim != edits[i].equal)
                        fail_msg("%s: full says %s, slim says %s, want %s", edits[i].what,
                                 eq_full ? "equal" : "differs", eq_slim ? "equal" : "differs",
                                 edits[i].equal ? "equal" : "differs");
                /* the decoder's digest is the full object's */
                assert_int_equal(se_endpoints_digest(full, dh), 0);
                assert_memory_equal(slim->digest, dh, sizeof(dh));
                assert_int_equal(slim->n_addresses, se_endpoints_n_addresses(full));
                assert_int_equal(memcmp(dh, dw, sizeof(dw)) == 0, edits[i].equal);
                se_object_unref(&full->obj);
                se_object_unref(&slim->obj);
                json_decref(j);
        }
        se_object_unref(&want->obj);
        json_decref(base);
        se_object_unref(&svc->obj);
}

/* Labels and annotations stay whole: the label rules and the over-capacity
 * annotation give the same verdicts; metadata is kept for the update. */
static void test_slim_endpoints__metadata_kept(void **state)
{
        (void)state;
        struct se_service *svc = fx_service("ns", "web", "10.0.0.1");
        json_t *base = load(base_json);
        struct se_endpoints *want = fx_ep_decode(base, 0);
        json_t *j = json_deep_copy(base);
        json_t *meta = json_object_get(j, "metadata");
        json_object_set_new(meta, "uid", json_string("ep-uid"));
        json_object_set_new(meta, "annotations",
                            json_pack("{s:s,s:s}", SE_OVER_CAPACITY_ANNOTATION, "warning",
                                      "example.com/a", "b"));
        struct se_endpoints *slim = fx_ep_decode(j, SE_DECODE_SLIM_ENDPOINTS);
        assert_string_equal(slim->obj.meta.uid, "ep-uid");
        assert_string_equal(slim->obj.meta.resource_version, "9");
        assert_string_equal(se_kvlist_get(&slim->obj.meta.labels, "app"), "web");
        assert_string_equal(se_kvlist_get(&slim->obj.meta.annotations, "example.com/a"), "b");
        assert_false(se_endpoints_equal(want, slim, svc, NULL));
        json_object_del(json_object_get(meta, "annotations"), SE_OVER_CAPACITY_ANNOTATION);
        se_object_unref(&slim->obj);
        slim = fx_ep_decode(j, SE_DECODE_SLIM_ENDPOINTS);
        assert_true(se_endpoints_equal(want, slim, svc, NULL));
        /* a stale label */
        json_object_set_new(json_object_get(meta, "labels"), "old", json_string("x"));
        se_object_unref(&slim->obj);
        slim = fx_ep_decode(j, SE_DECODE_SLIM_ENDPOINTS);
        assert_false(se_endpoints_equal(want, slim, svc, NULL));
        se_object_unref(&slim->obj);
        se_object_unref(&want->obj);
        json_decref(j);
        json_decref(base);
        se_object_unref(&svc->obj);
}

/* More than 1000 addresses is never equal, counted across subsets and
 * readiness as the full object does. */
static void test_slim_endpoints__capacity(void **state)
{
        (void)state;
        struct se_service *svc = fx_service("ns", "web", "10.0.0.1");
        for (int total = 999; total <= 1001; total++) {
                json_t *j = load(base_json);
                json_t *ready = json_array(), *not_ready = json_array();
                for (int i = 0; i < total; i++) {
                        char ip[32];
                        snprintf(ip, sizeof(ip), "10.1.%d.%d", i / 250, i % 250 + 1);
                        json_array_append_new(i % 3 ? ready : not_ready,
                                              json_pack("{s:s}", "ip", ip));
                }
                json_object_set_new(j, "subsets",
                                    json_pack("[{s:o,s:o,s:[{s:i}]},{s:[{s:s}],s:[{s:i}]}]",
                                              "addresses", ready, "notReadyAddresses", not_ready,
                                              "ports", "port", 80, "addresses", "ip", "10.2.0.1",
                                              "ports", "port", 81));
                struct se_endpoints *full = fx_ep_decode(j, 0);
                struct se_endpoints *slim = fx_ep_decode(j, SE_DECODE_SLIM_ENDPOINTS);
                assert_int_equal(slim->n_addresses, total + 1);
                bool want_eq = total + 1 <= SE_ENDPOINTS_MAX_CAPACITY;
                assert_int_equal(se_endpoints_equal(full, full, svc, NULL), want_eq);
                assert_int_equal(se_endpoints_equal(full, slim, svc, NULL), want_eq);
                se_object_unref(&full->obj);
                se_object_unref(&slim->obj);
                json_decref(j);
        }
        se_object_unref(&svc->obj);
}

/* The flag changes nothing about what is refused. */
static void test_slim_endpoints__same_errors(void **state)
{
        (void)state;
        static const char *const bad[] = {
                "{\"metadata\":{\"name\":\"a\"},\"subsets\":\"x\"}",
                "{\"metadata\":{\"name\":\"a\"},\"subsets\":[5]}",
                "{\"metadata\":{\"name\":\"a\"},\"subsets\":[{\"addresses\":[{\"ip\":\"300.1.1.1\"}"
                "]}]}",
                "{\"metadata\":{\"name\":\"a\"},\"subsets\":[{},{\"notReadyAddresses\":[{\"ip\":"
                "\"10.0.0.1\"},{}]}]}",
                "{\"metadata\":{\"name\":\"a\"},\"subsets\":[{\"ports\":[{\"port\":70000}]}]}",
                "{\"metadata\":{\"name\":\"a\"},\"subsets\":[{\"ports\":[{\"port\":80,"
                "\"protocol\":\"XYZ\"}]}]}",
                "{\"metadata\":{\"name\":\"a\"},\"subsets\":[{\"addresses\":[{\"ip\":\"10.0.0.1\","
                "\"targetRef\":\"pod\"}]}]}",
                "{\"metadata\":{\"name\":\"a\"},\"subsets\":[{\"addresses\":[{\"ip\":\"10.0.0.1\","
                "\"targetRef\":{\"uid\":7}}]}]}",
                "{\"metadata\":{\"name\":5},\"subsets\":[]}",
        };
        for (size_t i = 0; i < SE_ARRAY_SIZE(bad); i++) {
                json_t *j = load(bad[i]);
                struct se_object *o1 = NULL, *o2 = NULL;
                struct se_decode_error e1, e2;
                int r1 = se_decode_object_flags(j, SE_KIND_ENDPOINTS, NULL, 0, &o1, &e1);
                int r2 = se_decode_object_flags(j, SE_KIND_ENDPOINTS, NULL,
                                                SE_DECODE_SLIM_ENDPOINTS, &o2, &e2);
                if (r1 != -EINVAL)
                        fail_msg("case %zu: accepted", i);
                assert_int_equal(r2, r1);
                assert_null(o1);
                assert_null(o2);
                assert_string_equal(e2.path, e1.path);
                assert_string_equal(e2.message, e1.message);
                json_decref(j);
        }
}

static json_t *fifteen(void)
{
        json_t *j = load("{\"metadata\":{\"name\":\"svc-00042\",\"namespace\":\"bench\",\"uid\":"
                         "\"0b5d7e0c-7f3a-4c55-9d1e-5a4f3c2b1a00\",\"resourceVersion\":\"123456\","
                         "\"creationTimestamp\":\"2026-11-30T10:00:00Z\",\"labels\":{\"app\":"
                         "\"svc-00042\",\"endpoints.kubernetes.io/managed-by\":"
                         "\"endpoint-controller\"}}}");
        json_t *addrs = json_array();
        for (int i = 0; i < 15; i++) {
                char ip[32], name[64], uid[64];
                snprintf(ip, sizeof(ip), "10.1.0.%d", i + 1);
                snprintf(name, sizeof(name), "svc-00042-7d9f8c6b5-%05d", i);
                snprintf(uid, sizeof(uid), "6f1e2d3c-4b5a-4968-8776-%012d", i);
                json_array_append_new(addrs, json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:s,s:s}}", "ip",
                                                       ip, "nodeName", i % 2 ? "node-1" : "node-2",
                                                       "targetRef", "kind", "Pod", "namespace",
                                                       "bench", "name", name, "uid", uid,
                                                       "resourceVersion", "99999"));
        }
        json_object_set_new(j, "subsets",
                            json_pack("[{s:o,s:[{s:s,s:i,s:s}]}]", "addresses", addrs, "ports",
                                      "name", "http", "port", 8080, "protocol", "TCP"));
        return j;
}

/* What the slim form is for: a 15-address Endpoints costs its metadata. */
static void test_slim_endpoints__memory(void **state)
{
        (void)state;
        json_t *j = fifteen();
        struct se_endpoints *full = fx_ep_decode(j, 0);
        struct se_endpoints *slim = fx_ep_decode(j, SE_DECODE_SLIM_ENDPOINTS);
        size_t mf = se_object_memory(&full->obj), ms = se_object_memory(&slim->obj);
        print_message("15-address Endpoints: full %zu bytes, slim %zu bytes\n", mf, ms);
        assert_true(ms * 4 < mf);
        assert_true(ms < 512);
        assert_int_equal(slim->n_addresses, 15);
        /* the second decode is sized exactly: one chunk, nothing of the subsets */
        assert_true(slim->obj.arena.requested <= ms);
        assert_null(se_encode_object(&slim->obj));
        se_object_unref(&full->obj);
        se_object_unref(&slim->obj);
        json_decref(j);
}

static const struct se_node *get_node(void *data, const char *name)
{
        return se_node_of(se_store_get(data, SE_KIND_NODE, "", name));
}

/* Every Service of the files (and every Endpoints left without one) planned
 * against the stored Endpoints, full and slim: same actions, same objects.
 * counts[action] receives how often each action came. */
static void plan_files(const char *const *paths, size_t n_paths, int counts[SE_EP_DELETE + 1])
{
        struct se_store *s = se_store_new();
        struct se_diag d = { 0 };
        if (se_manifest_load(s, paths, n_paths, NULL, NULL, &d) != 0)
                fail_msg("%s: %s", paths[0], d.text);
        const struct se_object **pods, **svcs, **eps;
        long n_pods = se_store_list(s, SE_KIND_POD, NULL, &pods);
        long n_svcs = se_store_list(s, SE_KIND_SERVICE, NULL, &svcs);
        long n_eps = se_store_list(s, SE_KIND_ENDPOINTS, NULL, &eps);
        assert_true(n_pods >= 0 && n_svcs > 0 && n_eps > 0);
        for (long i = 0; i < n_svcs + n_eps; i++) {
                const struct se_meta *m = i < n_svcs ? &svcs[i]->meta : &eps[i - n_svcs]->meta;
                const struct se_service *svc =
                        se_service_of(se_store_get(s, SE_KIND_SERVICE, m->namespace, m->name));
                if (i >= n_svcs && svc)
                        continue; /* planned with its Service */
                struct se_endpoints_input in = { .namespace = m->namespace,
                                                 .name = m->name,
                                                 .svc = svc,
                                                 .pods = (const struct se_pod *const *)pods,
                                                 .n_pods = (size_t)n_pods,
                                                 .get_node = get_node,
                                                 .node_data = s,
                                                 .trigger_time_ns = 1 };
                const struct se_endpoints *existing =
                        se_endpoints_of(se_store_get(s, SE_KIND_ENDPOINTS, m->namespace, m->name));
                struct se_endpoints_plan p;
                assert_int_equal(fx_ep_plan_both(&in, existing, NULL, &p), 0);
                if (existing)
                        counts[p.action]++;
                se_endpoints_plan_release(&p);
        }
        free(pods);
        free(svcs);
        free(eps);
        se_store_free(s);
}

/* test/golden/endpoints/plan-cluster.yaml: update (stale address), unchanged
 * (targetRef.resourceVersion differs), two deletes (ours and a user's whose
 * Service is gone), the leader-election record and ext's left. */
static void test_slim_endpoints__plan_cluster(void **state)
{
        (void)state;
        const char *paths[] = { PLAN };
        int counts[SE_EP_DELETE + 1] = { 0 };
        plan_files(paths, 1, counts);
        assert_int_equal(counts[SE_EP_UNCHANGED], 1);
        assert_int_equal(counts[SE_EP_UPDATE], 1);
        assert_int_equal(counts[SE_EP_DELETE], 2);
        assert_int_equal(counts[SE_EP_SKIP], 2);
}

/* The demo cluster with what `svcenv endpoints -n shop` wrote for it: all
 * of shop's Endpoints (named ports, not-ready and terminating pods, several
 * subsets) are unchanged, full or slim. */
static void test_slim_endpoints__demo_written(void **state)
{
        (void)state;
        const char *paths[] = { DEMO, DEMO_SHOP };
        int counts[SE_EP_DELETE + 1] = { 0 };
        plan_files(paths, 2, counts);
        assert_true(counts[SE_EP_UNCHANGED] >= 6);
        assert_int_equal(counts[SE_EP_UPDATE] + counts[SE_EP_CREATE] + counts[SE_EP_DELETE], 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_slim_endpoints__one_edit_each),
                cmocka_unit_test(test_slim_endpoints__metadata_kept),
                cmocka_unit_test(test_slim_endpoints__capacity),
                cmocka_unit_test(test_slim_endpoints__same_errors),
                cmocka_unit_test(test_slim_endpoints__memory),
                cmocka_unit_test(test_slim_endpoints__plan_cluster),
                cmocka_unit_test(test_slim_endpoints__demo_written),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Slim pods (SE_DECODE_SLIM_POD): they keep every field the Endpoints and
 * EndpointSlice controllers read, drop the rest, and the planners give the
 * same objects from slim and from full pods. */
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
#include <svcenv/endpoints.h>
#include <svcenv/manifest.h>
#include <svcenv/store.h>

#define DEMO "manifests/examples/demo-cluster.yaml"

static bool str_eq(const char *a, const char *b)
{
        return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static struct se_pod *decode(const json_t *j, unsigned flags)
{
        struct se_object *o = NULL;
        struct se_decode_error e;
        int r = se_decode_object_flags(j, SE_KIND_POD, NULL, flags, &o, &e);
        if (r != 0)
                fail_msg("decode: %d %s: %s", r, e.path, e.message);
        return (struct se_pod *)o;
}

static struct se_pod *slim_of(const struct se_pod *full)
{
        json_t *j = se_encode_object(&full->obj);
        assert_non_null(j);
        struct se_pod *p = decode(j, SE_DECODE_SLIM_POD);
        json_decref(j);
        return p;
}

static void assert_kv_equal(const struct se_kvlist *a, const struct se_kvlist *b)
{
        assert_int_equal(a->n, b->n);
        for (uint32_t i = 0; i < a->n; i++) {
                assert_string_equal(a->items[i].key, b->items[i].key);
                assert_string_equal(a->items[i].value, b->items[i].value);
        }
}

/* The containers a slim pod must keep: with ports; init ones only when
 * restartPolicy is Always. */
static bool kept(const struct se_container *c, bool init)
{
        return c->n_ports > 0 && (!init || str_eq(c->restart_policy, "Always"));
}

static void assert_containers(const struct se_container *full, uint32_t n_full,
                              const struct se_container *slim, uint32_t n_slim, bool init)
{
        uint32_t k = 0;
        for (uint32_t i = 0; i < n_full; i++) {
                if (!kept(&full[i], init))
                        continue;
                assert_true(k < n_slim);
                const struct se_container *s = &slim[k++];
                assert_string_equal(s->name, full[i].name);
                assert_true(str_eq(s->restart_policy, full[i].restart_policy));
                assert_int_equal(s->n_ports, full[i].n_ports);
                for (uint32_t p = 0; p < s->n_ports; p++) {
                        assert_true(str_eq(s->ports[p].name, full[i].ports[p].name));
                        assert_int_equal(s->ports[p].container_port,
                                         full[i].ports[p].container_port);
                        assert_int_equal(s->ports[p].protocol, full[i].ports[p].protocol);
                        assert_int_equal(s->ports[p].host_port, 0);
                        assert_null(s->ports[p].host_ip);
                }
                /* dropped */
                assert_null(s->image);
                assert_int_equal(s->n_env, 0);
                assert_int_equal(s->n_env_from, 0);
                assert_int_equal(s->limits.n + s->requests.n, 0);
        }
        assert_int_equal(k, n_slim);
}

/* Every field the controllers read is the same; the rest is gone. */
static void assert_slim_matches(const struct se_pod *full, const struct se_pod *slim)
{
        const struct se_meta *fm = &full->obj.meta, *sm = &slim->obj.meta;
        assert_string_equal(sm->name, fm->name);
        assert_string_equal(sm->namespace, fm->namespace);
        assert_true(str_eq(sm->uid, fm->uid));
        assert_true(str_eq(sm->resource_version, fm->resource_version));
        assert_true(str_eq(sm->deletion_timestamp, fm->deletion_timestamp));
        assert_kv_equal(&sm->labels, &fm->labels);
        assert_true(str_eq(slim->node_name, full->node_name));
        assert_true(str_eq(slim->hostname, full->hostname));
        assert_true(str_eq(slim->subdomain, full->subdomain));
        assert_true(str_eq(slim->phase, full->phase));
        assert_true(str_eq(slim->pod_ip, full->pod_ip));
        assert_int_equal(slim->pod_ips.n, full->pod_ips.n);
        for (uint32_t i = 0; i < slim->pod_ips.n; i++)
                assert_string_equal(slim->pod_ips.v[i], full->pod_ips.v[i]);
        assert_int_equal(se_pod_is_ready(slim), se_pod_is_ready(full));
        assert_int_equal(se_pod_is_terminal(slim), se_pod_is_terminal(full));
        /* only Ready conditions, in order, with their transition time */
        uint32_t k = 0;
        for (uint32_t i = 0; i < full->n_conditions; i++) {
                if (strcmp(full->conditions[i].type, "Ready") != 0)
                        continue;
                assert_true(k < slim->n_conditions);
                assert_string_equal(slim->conditions[k].type, "Ready");
                assert_true(str_eq(slim->conditions[k].status, full->conditions[i].status));
                assert_true(str_eq(slim->conditions[k].last_transition_time,
                                   full->conditions[i].last_transition_time));
                k++;
        }
        assert_int_equal(k, slim->n_conditions);
        assert_containers(full->containers, full->n_containers, slim->containers,
                          slim->n_containers, false);
        assert_containers(full->init_containers, full->n_init_containers, slim->init_containers,
                          slim->n_init_containers, true);
        /* dropped */
        assert_null(sm->more); /* generateName, creationTimestamp, generation, ownerReferences */
        assert_int_equal(sm->annotations.n, 0);
        /* serviceAccountName, hostNetwork, enableServiceLinks, hostIP(s) */
        assert_null(slim->more);
        assert_true(se_object_memory(&slim->obj) <= se_object_memory(&full->obj));
}

/* An upstream-style pod: everything a real one carries. */
static const char upstream_pod[] =
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"web-7d4b9-x2x\","
        "\"generateName\":\"web-7d4b9-\",\"namespace\":\"prod\",\"uid\":\"u-1\","
        "\"resourceVersion\":\"812\",\"generation\":3,"
        "\"creationTimestamp\":\"2026-01-02T03:04:05Z\","
        "\"deletionTimestamp\":\"2026-01-02T04:00:00Z\",\"labels\":{\"app\":\"web\",\"tier\":"
        "\"fe\"},\"annotations\":{\"a\":\"b\"},\"ownerReferences\":[{\"apiVersion\":\"apps/v1\","
        "\"kind\":\"ReplicaSet\",\"name\":\"web-7d4b9\",\"uid\":\"rs-1\",\"controller\":true}],"
        "\"managedFields\":[{\"manager\":\"kubelet\"}]},"
        "\"spec\":{\"nodeName\":\"n1\",\"hostname\":\"h\",\"subdomain\":\"web\","
        "\"serviceAccountName\":\"sa\",\"hostNetwork\":true,\"enableServiceLinks\":false,"
        "\"initContainers\":["
        "{\"name\":\"setup\",\"image\":\"i\",\"ports\":[{\"name\":\"setup-port\",\"containerPort\":1}]},"
        "{\"name\":\"proxy\",\"image\":\"i\",\"restartPolicy\":\"Always\",\"ports\":[{\"name\":"
        "\"metrics\",\"containerPort\":9090,\"protocol\":\"TCP\"}],\"env\":[{\"name\":\"X\","
        "\"value\":\"1\"}]},"
        "{\"name\":\"log\",\"image\":\"i\",\"restartPolicy\":\"Always\"}],"
        "\"containers\":["
        "{\"name\":\"main\",\"image\":\"i\",\"ports\":[{\"name\":\"http\",\"containerPort\":8080},"
        "{\"name\":\"dns\",\"containerPort\":53,\"protocol\":\"UDP\",\"hostPort\":53,"
        "\"hostIP\":\"10.0.0.1\"}],\"env\":[{\"name\":\"A\",\"valueFrom\":{\"fieldRef\":"
        "{\"fieldPath\":\"status.podIP\"}}}],\"envFrom\":[{\"configMapRef\":{\"name\":\"cm\"}}],"
        "\"resources\":{\"limits\":{\"cpu\":\"1\"},\"requests\":{\"memory\":\"1Gi\"}}},"
        "{\"name\":\"helper\",\"image\":\"i\",\"env\":[{\"name\":\"B\",\"value\":\"2\"}]}]},"
        "\"status\":{\"phase\":\"Running\",\"hostIP\":\"10.0.0.1\",\"hostIPs\":[{\"ip\":"
        "\"10.0.0.1\"}],\"podIP\":\"10.1.0.5\",\"podIPs\":[{\"ip\":\"10.1.0.5\"},{\"ip\":"
        "\"fd00::5\"}],\"conditions\":[{\"type\":\"Initialized\",\"status\":\"True\"},"
        "{\"type\":\"ContainersReady\",\"status\":\"True\"},{\"type\":\"Ready\",\"status\":"
        "\"True\",\"lastTransitionTime\":\"2026-01-02T03:05:00Z\"},{\"type\":\"PodScheduled\","
        "\"status\":\"True\"}]}}";

static void test_slim__upstream_pod(void **state)
{
        (void)state;
        json_error_t je;
        json_t *j = json_loads(upstream_pod, 0, &je);
        assert_non_null(j);
        struct se_pod *full = decode(j, 0), *slim = decode(j, SE_DECODE_SLIM_POD);
        json_decref(j);
        assert_slim_matches(full, slim);
        /* the fixture exercises every rule: spelled out */
        assert_int_equal(slim->n_containers, 1); /* helper has no ports */
        assert_string_equal(slim->containers[0].name, "main");
        assert_int_equal(slim->containers[0].n_ports, 2);
        assert_int_equal(slim->containers[0].ports[1].protocol, SE_PROTO_UDP);
        assert_int_equal(slim->n_init_containers, 1); /* only the sidecar with ports */
        assert_string_equal(slim->init_containers[0].name, "proxy");
        assert_int_equal(slim->init_containers[0].ports[0].container_port, 9090);
        assert_int_equal(slim->n_conditions, 1);
        assert_string_equal(slim->conditions[0].last_transition_time, "2026-01-02T03:05:00Z");
        assert_string_equal(slim->obj.meta.deletion_timestamp, "2026-01-02T04:00:00Z");
        assert_int_equal(slim->pod_ips.n, 2);
        assert_true(se_object_memory(&slim->obj) < se_object_memory(&full->obj));

        /* named ports resolve the same: a container's and a sidecar's */
        struct se_service_port sp = { .name = "m", .port = 80, .protocol = SE_PROTO_TCP };
        sp.target_port = (struct se_int_or_string){ .is_string = true, .str = "metrics" };
        assert_int_equal(se_endpoints_find_port(slim, &sp), 9090);
        assert_int_equal(se_endpoints_find_port(full, &sp), 9090);
        sp.target_port.str = "setup-port"; /* a plain init container's: never */
        assert_int_equal(se_endpoints_find_port(slim, &sp), -ENOENT);
        assert_int_equal(se_endpoints_find_port(full, &sp), -ENOENT);
        sp.target_port.str = "dns";
        assert_int_equal(se_endpoints_find_port(slim, &sp), -ENOENT); /* TCP wanted */
        sp.protocol = SE_PROTO_UDP;
        assert_int_equal(se_endpoints_find_port(slim, &sp), 53);
        se_object_unref(&full->obj);
        se_object_unref(&slim->obj);
}

static void test_slim__only_pods(void **state)
{
        (void)state;
        /* other kinds ignore the flag */
        json_error_t je;
        json_t *j = json_loads("{\"metadata\":{\"name\":\"s\",\"namespace\":\"n\","
                               "\"annotations\":{\"a\":\"b\"},\"creationTimestamp\":\"x\"},"
                               "\"spec\":{\"selector\":{\"app\":\"s\"}}}",
                               0, &je);
        assert_non_null(j);
        struct se_object *o = NULL;
        struct se_decode_error e;
        assert_int_equal(
                se_decode_object_flags(j, SE_KIND_SERVICE, NULL, SE_DECODE_SLIM_POD, &o, &e), 0);
        json_decref(j);
        assert_int_equal(o->meta.annotations.n, 1);
        assert_string_equal(se_meta_creation_timestamp(&o->meta), "x");
        se_object_unref(o);
}

static void test_slim__repeated_strings_shared(void **state)
{
        (void)state;
        /* an Endpoints repeats its namespace, node and kind per address:
         * one copy each in the object, values unchanged */
        json_error_t je;
        json_t *j =
                json_loads("{\"metadata\":{\"name\":\"web\",\"namespace\":\"prod\"},\"subsets\":[{"
                           "\"addresses\":[{\"ip\":\"10.0.0.1\",\"nodeName\":\"n1\",\"targetRef\":{"
                           "\"kind\":\"Pod\",\"namespace\":\"prod\",\"name\":\"a\"}},{\"ip\":"
                           "\"10.0.0.2\",\"nodeName\":\"n1\",\"targetRef\":{\"kind\":\"Pod\","
                           "\"namespace\":\"prod\",\"name\":\"b\"}}]}]}",
                           0, &je);
        assert_non_null(j);
        struct se_object *o = NULL;
        struct se_decode_error e;
        assert_int_equal(se_decode_object_as(j, SE_KIND_ENDPOINTS, NULL, &o, &e), 0);
        struct se_object *o2 = NULL;
        assert_int_equal(se_decode_object_as(j, SE_KIND_ENDPOINTS, NULL, &o2, &e), 0);
        json_decref(j);
        /* well-known values are not copied at all: shared across objects */
        const struct se_endpoints *ep2 = se_endpoints_of(o2);
        assert_ptr_equal(ep2->subsets[0].addresses[0].target_ref->kind,
                         se_endpoints_of(o)->subsets[0].addresses[0].target_ref->kind);
        assert_ptr_not_equal(ep2->subsets[0].addresses[0].node_name,
                             se_endpoints_of(o)->subsets[0].addresses[0].node_name);
        se_object_unref(o2);
        const struct se_endpoints *ep = se_endpoints_of(o);
        const struct se_endpoint_address *a = ep->subsets[0].addresses;
        assert_int_equal(ep->subsets[0].n_addresses, 2);
        assert_string_equal(a[0].target_ref->name, "a");
        assert_string_equal(a[1].target_ref->name, "b");
        assert_string_equal(a[1].ip, "10.0.0.2");
        assert_string_equal(a[1].node_name, "n1");
        assert_ptr_equal(a[0].node_name, a[1].node_name);
        assert_ptr_equal(a[0].target_ref->kind, a[1].target_ref->kind);
        assert_ptr_equal(a[1].target_ref->namespace, o->meta.namespace);
        assert_string_equal(a[1].target_ref->namespace, "prod");
        se_object_unref(o);
}

static const struct se_node *get_node(void *data, const char *name)
{
        return se_node_of(se_store_get(data, SE_KIND_NODE, "", name));
}

static char *dump(const struct se_object *o)
{
        json_t *j = se_encode_object(o);
        assert_non_null(j);
        char *s = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
        json_decref(j);
        assert_non_null(s);
        return s;
}

/* Encodes every object a plan would write, in order, into one string. */
static char *plan_text(const struct se_service_plan *p)
{
        size_t cap = 1 << 16, len = 0;
        char *out = calloc(1, cap);
        assert_non_null(out);
        const struct se_object *objs[64];
        size_t n = 0;
        if (p->endpoints.obj)
                objs[n++] = &p->endpoints.obj->obj;
        for (uint32_t i = 0; i < p->slices.n_create && n < 64; i++)
                objs[n++] = &p->slices.create[i]->obj;
        for (size_t i = 0; i < n; i++) {
                char *s = dump(objs[i]);
                size_t l = strlen(s);
                while (len + l + 2 > cap) {
                        cap *= 2;
                        out = realloc(out, cap);
                        assert_non_null(out);
                }
                memcpy(out + len, s, l);
                len += l;
                out[len++] = '\n';
                out[len] = '\0';
                free(s);
        }
        return out;
}

static void test_slim__demo_cluster_same_endpoints(void **state)
{
        (void)state;
        struct se_store *s = se_store_new();
        const char *paths[] = { DEMO };
        struct se_diag d = { 0 };
        int r = se_manifest_load(s, paths, 1, NULL, NULL, &d);
        if (r != 0)
                fail_msg("%s: %s", DEMO, d.text);
        const struct se_object **pods;
        long n_pods = se_store_list(s, SE_KIND_POD, NULL, &pods);
        assert_true(n_pods >= 25);
        const struct se_pod **slim = calloc((size_t)n_pods, sizeof(*slim));
        assert_non_null(slim);
        for (long i = 0; i < n_pods; i++) {
                slim[i] = slim_of(se_pod_of(pods[i]));
                assert_slim_matches(se_pod_of(pods[i]), slim[i]);
        }
        const struct se_object **svcs;
        long n_svcs = se_store_list(s, SE_KIND_SERVICE, NULL, &svcs);
        int compared = 0, with_addresses = 0;
        for (long i = 0; i < n_svcs; i++) {
                const struct se_service *svc = se_service_of(svcs[i]);
                if (!se_endpoints_service_managed(svc))
                        continue;
                struct se_endpoints_input in = { .namespace = svc->obj.meta.namespace,
                                                 .name = svc->obj.meta.name,
                                                 .svc = svc,
                                                 .pods = (const struct se_pod *const *)pods,
                                                 .n_pods = (size_t)n_pods,
                                                 .get_node = get_node,
                                                 .node_data = s,
                                                 .trigger_time_ns = 1 };
                struct se_service_plan full_plan, slim_plan;
                assert_int_equal(se_service_plan(&in, NULL, NULL, 0, NULL, &full_plan), 0);
                in.pods = slim;
                assert_int_equal(se_service_plan(&in, NULL, NULL, 0, NULL, &slim_plan), 0);
                char *a = plan_text(&full_plan), *b = plan_text(&slim_plan);
                assert_string_equal(a, b);
                compared++;
                with_addresses += strstr(a, "\"addresses\":[{") != NULL;
                free(a);
                free(b);
                se_service_plan_release(&full_plan);
                se_service_plan_release(&slim_plan);
        }
        /* the demo's managed Services, most with ready addresses */
        assert_true(compared >= 8);
        assert_true(with_addresses >= 5);
        for (long i = 0; i < n_pods; i++)
                se_object_unref(SE_UNCONST(struct se_object, &slim[i]->obj));
        free(slim);
        free(pods);
        free(svcs);
        se_store_free(s);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_slim__upstream_pod),
                cmocka_unit_test(test_slim__only_pods),
                cmocka_unit_test(test_slim__repeated_strings_shared),
                cmocka_unit_test(test_slim__demo_cluster_same_endpoints),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

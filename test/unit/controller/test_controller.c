/* Pure pieces of the controller: histograms, key parsing, the
 * NamespaceTerminating rule. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <svcenv/controller.h>
#include <svcenv/histogram.h>
#include <svcenv/store.h>
#include <svcenv/topology.h>

#include "../../../pkg/controller/controller_internal.h"

#define S 1000000000ull

static void test_controller__histogram(void **state)
{
        (void)state;
        static const double le[] = { 0.1, 1, 10 };
        struct se_histogram h;
        se_histogram_init(&h, le, 3);
        assert_true(se_histogram_quantile(&h, 0.5) == 0);
        for (int i = 0; i < 90; i++)
                se_histogram_observe_ns(&h, 50000000); /* 0.05 s */
        for (int i = 0; i < 10; i++)
                se_histogram_observe_ns(&h, 5 * S);
        se_histogram_observe_ns(&h, 100 * S); /* +Inf */
        double p50 = se_histogram_quantile(&h, 0.5);
        assert_true(p50 > 0 && p50 <= 0.1);
        double p95 = se_histogram_quantile(&h, 0.95);
        assert_true(p95 > 1 && p95 <= 10);
        assert_true(se_histogram_quantile(&h, 1.0) == 10);
        struct se_strbuf sb;
        se_strbuf_init(&sb, 1 << 16);
        se_histogram_render(&h, &sb, "x_seconds", "name=\"q\"", "help");
        assert_non_null(strstr(sb.buf, "# TYPE x_seconds histogram\n"));
        assert_non_null(strstr(sb.buf, "x_seconds_bucket{name=\"q\",le=\"0.1\"} 90\n"));
        assert_non_null(strstr(sb.buf, "x_seconds_bucket{name=\"q\",le=\"10\"} 100\n"));
        assert_non_null(strstr(sb.buf, "x_seconds_bucket{name=\"q\",le=\"+Inf\"} 101\n"));
        assert_non_null(strstr(sb.buf, "x_seconds_count{name=\"q\"} 101\n"));
        assert_non_null(strstr(sb.buf, "x_seconds_sum{name=\"q\"} 154.5"));
        se_strbuf_reset(&sb);
        se_histogram_render(&h, &sb, "y", NULL, NULL);
        assert_non_null(strstr(sb.buf, "y_bucket{le=\"1\"} 90\n"));
        assert_non_null(strstr(sb.buf, "y_count 101\n"));
        assert_null(strstr(sb.buf, "# HELP"));
        se_strbuf_release(&sb);
}

static void test_controller__split_key(void **state)
{
        (void)state;
        char buf[64];
        const char *ns, *name;
        assert_int_equal(se_controller_split_key("default/web", buf, sizeof(buf), &ns, &name), 0);
        assert_string_equal(ns, "default");
        assert_string_equal(name, "web");
        assert_int_equal(se_controller_split_key("web", buf, sizeof(buf), &ns, &name), -EINVAL);
        assert_int_equal(se_controller_split_key("/web", buf, sizeof(buf), &ns, &name), -EINVAL);
        assert_int_equal(se_controller_split_key("a/", buf, sizeof(buf), &ns, &name), -EINVAL);
        assert_int_equal(se_controller_split_key("a/b/c", buf, sizeof(buf), &ns, &name), -EINVAL);
        char big[100];
        memset(big, 'a', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        big[10] = '/';
        assert_int_equal(se_controller_split_key(big, buf, sizeof(buf), &ns, &name), -EINVAL);
}

static void test_controller__namespace_terminating(void **state)
{
        (void)state;
        /* the API server's NamespaceLifecycle message for a create */
        const char *msg = "endpoints \"web\" is forbidden: unable to create new content in "
                          "namespace ns1 because it is being terminated";
        assert_true(se_controller_namespace_terminating(-EACCES, msg));
        assert_false(se_controller_namespace_terminating(-EACCES, "endpoints is forbidden: RBAC"));
        assert_false(se_controller_namespace_terminating(-ESTALE, msg));
        assert_false(se_controller_namespace_terminating(-EACCES, NULL));
}

static struct se_node *mk_node(const char *name, const char *zone, bool ready, int64_t cpu)
{
        struct se_node *n = (struct se_node *)se_object_new(SE_KIND_NODE);
        struct se_object *o = &n->obj;
        o->meta.name = se_arena_strdup(&o->arena, name);
        o->meta.namespace = "";
        o->meta.resource_version = se_arena_strdup(&o->arena, "1");
        if (zone) {
                o->meta.labels.items = se_arena_alloc(&o->arena, sizeof(struct se_kv));
                o->meta.labels.items[0] =
                        (struct se_kv){ SE_TOPOLOGY_ZONE_LABEL, se_arena_strdup(&o->arena, zone) };
                o->meta.labels.n = 1;
        }
        n->ready = ready ? SE_TRUE : SE_FALSE;
        n->allocatable_cpu_nanos = cpu;
        return n;
}

/* Takes every queued key; true when the topology key was among them. */
static bool drain_topology(struct se_controller *ctl, char *others, size_t size)
{
        bool topo = false;
        const char *key;
        others[0] = 0;
        while (se_kube_queue_len(ctl->queue) && se_kube_queue_get(ctl->queue, 0, &key) == 0) {
                if (strcmp(key, CTL_TOPOLOGY_KEY) == 0)
                        topo = true;
                else
                        snprintf(others + strlen(others), size - strlen(others), "%s ", key);
                se_kube_queue_forget(ctl->queue, key);
                se_kube_queue_done(ctl->queue, key);
        }
        return topo;
}

/* Node events refresh the topology cache as upstream's: add and delete
 * always, an update only when the Ready condition or the zone label
 * changed; the refresh queues the Services it overloads. */
static void test_controller__node_topology(void **state)
{
        (void)state;
        struct se_controller *ctl = se_controller_new(NULL, NULL);
        assert_non_null(ctl);
        struct se_store *st = se_controller_store(ctl);
        char others[256];
        assert_int_equal(se_store_put(st, &mk_node("n1", "zone-a", true, 4000000000)->obj), 0);
        assert_true(drain_topology(ctl, others, sizeof(others)));
        assert_int_equal(se_store_put(st, &mk_node("n2", "zone-b", true, 4000000000)->obj), 0);
        assert_true(drain_topology(ctl, others, sizeof(others)));
        /* allocatable alone: no refresh (upstream's updateNode) */
        struct se_node *n = mk_node("n2", "zone-b", true, 8000000000);
        n->obj.meta.resource_version = "2";
        assert_int_equal(se_store_put(st, &n->obj), 0);
        assert_false(drain_topology(ctl, others, sizeof(others)));
        /* the cache has the shares only once refreshed */
        assert_int_equal(se_topology_cache_zones(ctl->topology), 0);
        assert_int_equal(ctl_topology_sync(ctl), 0);
        assert_true(se_topology_cache_ratio(ctl->topology, "zone-b") == 8.0 / 12.0);
        /* readiness and zone changes refresh */
        n = mk_node("n2", "zone-b", false, 8000000000);
        n->obj.meta.resource_version = "3";
        assert_int_equal(se_store_put(st, &n->obj), 0);
        assert_true(drain_topology(ctl, others, sizeof(others)));
        n = mk_node("n2", "zone-c", false, 8000000000);
        n->obj.meta.resource_version = "4";
        assert_int_equal(se_store_put(st, &n->obj), 0);
        assert_true(drain_topology(ctl, others, sizeof(others)));
        n = mk_node("n2", "zone-c", true, 8000000000);
        n->obj.meta.resource_version = "5";
        assert_int_equal(se_store_put(st, &n->obj), 0);
        assert_true(drain_topology(ctl, others, sizeof(others)));
        assert_int_equal(ctl_topology_sync(ctl), 0);
        assert_true(se_topology_cache_ratio(ctl->topology, "zone-c") == 8.0 / 12.0);
        assert_string_equal(others, "");
        /* a delete refreshes; with one zone left there are no shares */
        assert_int_equal(se_store_delete(st, SE_KIND_NODE, "", "n2"), 0);
        assert_true(drain_topology(ctl, others, sizeof(others)));
        assert_int_equal(ctl_topology_sync(ctl), 0);
        assert_int_equal(se_topology_cache_zones(ctl->topology), 0);
        se_controller_free(ctl);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_controller__node_topology),
                cmocka_unit_test(test_controller__histogram),
                cmocka_unit_test(test_controller__split_key),
                cmocka_unit_test(test_controller__namespace_terminating),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

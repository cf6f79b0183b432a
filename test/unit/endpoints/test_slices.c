/* The EndpointSlice reconciler, cases translated from upstream's
 * reconciler_test.go and utils_test.go plus svcenv's own. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <svcenv/topology.h>

#include "../../../pkg/endpoints/endpoints_internal.h"
#include "fixtures.h"
#include "slim_slices.h"

#define MAXP 512
#define MAXS 64

struct fx {
        struct se_service *svc;
        struct se_pod *pods[MAXP];
        size_t n;
        struct se_endpoint_slice *existing[MAXS];
        size_t n_existing;
        struct se_node *nodes[8];
        size_t n_nodes;
        bool use_nodes;
        struct se_topology_cache *topo; /* NULL: none */
        /* the same cache for the plans from slim slices (fed the same) */
        struct se_topology_cache *topo_slim;
        struct se_endpoints_opts opts;
        struct se_slices_plan plan;
};

static const struct se_node *get_node(void *data, const char *name)
{
        struct fx *f = data;
        for (size_t i = 0; i < f->n_nodes; i++)
                if (strcmp(f->nodes[i]->obj.meta.name, name) == 0)
                        return f->nodes[i];
        return NULL;
}

static void add_node(struct fx *f, const char *name, const char *zone)
{
        struct se_node *n = (struct se_node *)se_object_new(SE_KIND_NODE);
        n->obj.meta.name = fx_str(&n->obj, name);
        n->obj.meta.namespace = "";
        if (zone)
                fx_kv(&n->obj, &n->obj.meta.labels, "topology.kubernetes.io/zone", zone);
        f->nodes[f->n_nodes++] = n;
        f->use_nodes = true;
}

static struct fx *fx_new(const char *cluster_ip)
{
        struct fx *f = calloc(1, sizeof(*f));
        f->svc = fx_service("ns", "web", cluster_ip);
        fx_port(f->svc, "http", 80, "8080", SE_PROTO_TCP);
        return f;
}

static struct se_pod *add_pod(struct fx *f, const char *name, const char *ips, bool ready)
{
        struct se_pod *p = fx_pod("ns", name, "web", ips, ready, "node-1");
        f->pods[f->n++] = p;
        return p;
}

static void add_pods(struct fx *f, int n)
{
        char name[32], ip[32];
        for (int i = 0; i < n; i++) {
                snprintf(name, sizeof(name), "pod-%03d", i);
                snprintf(ip, sizeof(ip), "10.1.%d.%d", i / 200, i % 200 + 1);
                add_pod(f, name, ip, true);
        }
}

/* Slice i of a plan's borrowed list as its index in existing. */
static size_t index_in(const struct se_endpoint_slice *s,
                       const struct se_endpoint_slice *const *existing, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (existing[i] == s)
                        return i;
        fail_msg("plan names a slice that is not an existing one");
        return n;
}

static void assert_same_refs(const struct fx *f, const struct se_endpoint_slice *const *a,
                             const struct se_endpoint_slice *const *b, uint32_t n,
                             struct se_endpoint_slice *const *slim)
{
        for (uint32_t i = 0; i < n; i++)
                assert_int_equal(index_in(a[i],
                                          (const struct se_endpoint_slice *const *)f->existing,
                                          f->n_existing),
                                 index_in(b[i], (const struct se_endpoint_slice *const *)slim,
                                          f->n_existing));
}

/* The plan from the existing slices in slim form (as the controller's
 * cache holds them) is the same as from the full ones: same decisions,
 * counters and events, and objects to write that encode to the same JSON. */
static void assert_same_plan(const struct fx *f, const struct se_slices_plan *a,
                             const struct se_slices_plan *b, struct se_endpoint_slice *const *slim)
{
        assert_int_equal(a->action, b->action);
        assert_int_equal(a->n_create, b->n_create);
        assert_int_equal(a->n_update, b->n_update);
        assert_int_equal(a->n_remove, b->n_remove);
        assert_int_equal(a->n_unchanged, b->n_unchanged);
        assert_int_equal(a->pods_missing_node, b->pods_missing_node);
        assert_int_equal(a->node_errors.n, b->node_errors.n);
        for (size_t i = 0; i < a->node_errors.n; i++)
                assert_string_equal(a->node_errors.v[i], b->node_errors.v[i]);
        assert_int_equal(a->endpoints_added, b->endpoints_added);
        assert_int_equal(a->endpoints_removed, b->endpoints_removed);
        for (uint32_t i = 0; i < a->n_create; i++)
                assert_same_json(&a->create[i]->obj, &b->create[i]->obj);
        for (uint32_t i = 0; i < a->n_update; i++)
                assert_same_json(&a->update[i]->obj, &b->update[i]->obj);
        assert_same_refs(f, a->remove, b->remove, a->n_remove, slim);
        assert_same_refs(f, a->unchanged, b->unchanged, a->n_unchanged, slim);
        assert_int_equal(a->n_events, b->n_events);
        for (uint32_t i = 0; i < a->n_events; i++) {
                assert_int_equal(a->events[i].warning, b->events[i].warning);
                assert_string_equal(a->events[i].reason, b->events[i].reason);
                assert_string_equal(a->events[i].message, b->events[i].message);
        }
}

/* se_slices_plan over f->existing, checked against the same plan over
 * their slim forms. */
static void plan_in(struct fx *f, const struct se_endpoints_input *in,
                    const struct se_endpoints_opts *opts, struct se_slices_plan *ret)
{
        struct se_endpoint_slice *slim[MAXS];
        for (size_t i = 0; i < f->n_existing; i++)
                slim[i] = slim_slice_of(f->existing[i]);
        struct se_endpoints_input sin = *in;
        if (in->topology) {
                assert_ptr_equal(in->topology, f->topo);
                sin.topology = f->topo_slim;
        }
        struct se_slices_plan sp;
        assert_int_equal(se_slices_plan(&sin, (const struct se_endpoint_slice *const *)slim,
                                        f->n_existing, opts, &sp),
                         0);
        assert_int_equal(se_slices_plan(in, (const struct se_endpoint_slice *const *)f->existing,
                                        f->n_existing, opts, ret),
                         0);
        assert_same_plan(f, ret, &sp, slim);
        se_slices_plan_release(&sp);
        fx_free_all((struct se_object **)slim, f->n_existing);
}

static const struct se_slices_plan *plan(struct fx *f)
{
        struct se_endpoints_input in = {
                .namespace = "ns",
                .name = "web",
                .svc = f->svc,
                .pods = (const struct se_pod *const *)f->pods,
                .n_pods = f->n,
                .get_node = f->use_nodes ? get_node : NULL,
                .node_data = f,
                .topology = f->topo,
        };
        se_slices_plan_release(&f->plan);
        plan_in(f, &in, &f->opts, &f->plan);
        return &f->plan;
}

/* The plan's result becomes the cluster's state (the API server assigns a
 * resourceVersion; names were chosen already). */
static void apply(struct fx *f)
{
        struct se_slices_plan *p = &f->plan;
        struct se_endpoint_slice *next[MAXS];
        size_t n = 0;
        for (size_t i = 0; i < f->n_existing; i++) {
                bool gone = false;
                for (uint32_t k = 0; k < p->n_remove; k++)
                        gone |= p->remove[k] == f->existing[i];
                for (uint32_t k = 0; k < p->n_update; k++)
                        gone |= strcmp(p->update[k]->obj.meta.name,
                                       f->existing[i]->obj.meta.name) == 0;
                if (gone)
                        se_object_unref(&f->existing[i]->obj);
                else
                        next[n++] = f->existing[i];
        }
        for (uint32_t k = 0; k < p->n_update; k++)
                next[n++] = (struct se_endpoint_slice *)se_object_ref(&p->update[k]->obj);
        for (uint32_t k = 0; k < p->n_create; k++)
                next[n++] = (struct se_endpoint_slice *)se_object_ref(&p->create[k]->obj);
        memcpy(f->existing, next, n * sizeof(*next));
        f->n_existing = n;
        se_slices_plan_release(p);
}

static void fx_free(struct fx *f)
{
        se_slices_plan_release(&f->plan);
        fx_free_all((struct se_object **)f->pods, f->n);
        fx_free_all((struct se_object **)f->existing, f->n_existing);
        fx_free_all((struct se_object **)f->nodes, f->n_nodes);
        se_topology_cache_free(f->topo);
        se_topology_cache_free(f->topo_slim);
        se_object_unref(&f->svc->obj);
        free(f);
}

static size_t total_endpoints(const struct fx *f)
{
        size_t n = 0;
        for (size_t i = 0; i < f->n_existing; i++)
                n += f->existing[i]->n_endpoints;
        return n;
}

static int cmp_u32_desc(const void *a, const void *b)
{
        uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
        return (x < y) - (x > y);
}

/* slice sizes of the cluster state, largest first, "100,50" */
static const char *sizes(const struct fx *f)
{
        static char buf[512];
        uint32_t v[MAXS];
        for (size_t i = 0; i < f->n_existing; i++)
                v[i] = f->existing[i]->n_endpoints;
        qsort(v, f->n_existing, sizeof(*v), cmp_u32_desc);
        size_t off = 0;
        buf[0] = 0;
        for (size_t i = 0; i < f->n_existing; i++)
                off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s%u", i ? "," : "", v[i]);
        return buf;
}

/* TestReconcile1Pod: one slice, labels, owner, conditions, zone, nodeName */
static void test_slices__one_pod(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        add_node(f, "node-1", "zone-a");
        add_pod(f, "pod1", "1.2.3.4", true);
        const struct se_slices_plan *p = plan(f);
        assert_int_equal(p->action, SE_EP_CREATE);
        assert_int_equal(p->n_create, 1);
        assert_int_equal(p->n_update + p->n_remove + p->n_unchanged, 0);
        const struct se_endpoint_slice *s = p->create[0];
        assert_string_equal(s->address_type, "IPv4");
        assert_string_equal(se_meta_generate_name(&s->obj.meta), "web-");
        assert_int_equal(strlen(s->obj.meta.name), strlen("web-") + 5);
        assert_memory_equal(s->obj.meta.name, "web-", 4);
        assert_string_equal(s->obj.meta.namespace, "ns");
        const struct se_kvlist *l = &s->obj.meta.labels;
        assert_int_equal(l->n, 3);
        assert_string_equal(se_kvlist_get(l, "app"), "web");
        assert_string_equal(se_kvlist_get(l, SE_SLICE_SERVICE_NAME_LABEL), "web");
        assert_string_equal(se_kvlist_get(l, SE_SLICE_MANAGED_BY_LABEL),
                            "endpointslice-controller.k8s.io");
        assert_int_equal(se_meta_n_owner_refs(&s->obj.meta), 1);
        assert_string_equal(se_meta_owner_ref(&s->obj.meta, 0)->kind, "Service");
        assert_string_equal(se_meta_owner_ref(&s->obj.meta, 0)->api_version, "v1");
        assert_string_equal(se_meta_owner_ref(&s->obj.meta, 0)->uid, "svc-uid-1");
        assert_int_equal(se_meta_owner_ref(&s->obj.meta, 0)->controller, SE_TRUE);
        assert_int_equal(se_meta_owner_ref(&s->obj.meta, 0)->block_owner_deletion, SE_TRUE);
        assert_int_equal(s->n_ports, 1);
        assert_string_equal(s->ports[0].name, "http");
        assert_int_equal(s->ports[0].port, 8080);
        assert_int_equal(s->n_endpoints, 1);
        const struct se_slice_endpoint *e = &s->endpoints[0];
        assert_int_equal(e->addresses.n, 1);
        assert_string_equal(e->addresses.v[0], "1.2.3.4");
        assert_int_equal(e->ready, SE_TRUE);
        assert_int_equal(e->serving, SE_TRUE);
        assert_int_equal(e->terminating, SE_FALSE);
        assert_string_equal(se_slice_endpoint_node(e), "node-1");
        assert_string_equal(se_slice_endpoint_zone(e), "zone-a");
        assert_string_equal(se_slice_endpoint_target_ref(e)->name, "pod1");
        assert_null(e->hostname);
        assert_null(se_kvlist_get(&s->obj.meta.annotations, SE_TRIGGER_TIME_ANNOTATION));
        fx_free(f);
}

/* The conditions table (serving = Ready; terminating = deleting; ready =
 * pNRA || serving && !terminating); terminating pods stay in slices. */
static void test_slices__conditions(void **state)
{
        (void)state;
        for (int pnra = 0; pnra < 2; pnra++) {
                struct fx *f = fx_new("10.0.0.1");
                f->svc->publish_not_ready_addresses = pnra;
                add_pod(f, "a-ready", "1.0.0.1", true);
                add_pod(f, "b-unready", "1.0.0.2", false);
                add_pod(f, "c-ready-deleting", "1.0.0.3", true)->obj.meta.deletion_timestamp = "t";
                add_pod(f, "d-unready-deleting", "1.0.0.4", false)->obj.meta.deletion_timestamp =
                        "t";
                add_pod(f, "e-done", "1.0.0.5", true)->phase = "Succeeded";
                const struct se_slices_plan *p = plan(f);
                assert_int_equal(p->n_create, 1);
                const struct se_endpoint_slice *s = p->create[0];
                assert_int_equal(s->n_endpoints, 4);
                static const enum se_opt_bool want[4][3] = { { SE_TRUE, SE_TRUE, SE_FALSE },
                                                             { SE_FALSE, SE_FALSE, SE_FALSE },
                                                             { SE_FALSE, SE_TRUE, SE_TRUE },
                                                             { SE_FALSE, SE_FALSE, SE_TRUE } };
                for (int i = 0; i < 4; i++) {
                        assert_int_equal(s->endpoints[i].ready, pnra ? SE_TRUE : want[i][0]);
                        assert_int_equal(s->endpoints[i].serving, want[i][1]);
                        assert_int_equal(s->endpoints[i].terminating, want[i][2]);
                }
                fx_free(f);
        }
}

/* TestReconcileEmpty: a placeholder slice; kept when it already exists. */
static void test_slices__placeholder(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        const struct se_slices_plan *p = plan(f);
        assert_int_equal(p->n_create, 1);
        assert_int_equal(p->create[0]->n_endpoints, 0);
        assert_int_equal(p->create[0]->n_ports, 0);
        assert_true(p->create[0]->has_ports);
        apply(f);
        p = plan(f);
        assert_int_equal(p->action, SE_EP_UNCHANGED);
        assert_int_equal(p->n_unchanged, 1);
        /* a pod appears: the placeholder is recycled into the real slice */
        add_pod(f, "a", "1.0.0.1", true);
        p = plan(f);
        assert_int_equal(p->action, SE_EP_UPDATE);
        assert_int_equal(p->n_create, 0);
        assert_int_equal(p->n_remove, 0);
        assert_int_equal(p->n_update, 1);
        assert_string_equal(p->update[0]->obj.meta.name, f->existing[0]->obj.meta.name);
        assert_int_equal(p->update[0]->n_endpoints, 1);
        assert_int_equal(p->update[0]->n_ports, 1);
        apply(f);
        /* and back to a placeholder when the pod goes */
        se_object_unref(&f->pods[--f->n]->obj);
        p = plan(f);
        assert_int_equal(p->n_update, 1);
        assert_int_equal(p->update[0]->n_endpoints, 0);
        assert_int_equal(p->update[0]->n_ports, 0);
        fx_free(f);
}

/* Applying a plan and planning again changes nothing, also with another
 * trigger time (only written objects carry it). */
static void test_slices__idempotent(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        add_pods(f, 250);
        const struct se_slices_plan *p = plan(f);
        assert_int_equal(p->n_create, 3);
        assert_int_equal(p->endpoints_added, 250);
        apply(f);
        assert_string_equal(sizes(f), "100,100,50");
        p = plan(f);
        assert_int_equal(p->action, SE_EP_UNCHANGED);
        assert_int_equal(p->n_unchanged, 3);
        fx_free(f);
}

/* TestReconcileEndpointSlicesSomePreexisting: 250 pods, slices of 62 and 61
 * -> 27 go into the 62 one, 100 into a new slice (2 writes, not 3). */
static void test_slices__prefer_fewer_writes(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        add_pods(f, 250);
        /* build existing slices of 62 and 61 of the desired endpoints */
        size_t all = f->n;
        f->n = 62;
        plan(f);
        apply(f);
        f->n = 123;
        f->opts.max_endpoints_per_slice = 61;
        /* pods 62..122 into a second slice */
        struct se_pod *keep[62];
        memcpy(keep, f->pods, sizeof(keep));
        memmove(f->pods, f->pods + 62, 61 * sizeof(*f->pods));
        f->n = 61;
        struct se_endpoint_slice *first = f->existing[0];
        /* (the second plan does not see it: keep the names apart) */
        first->obj.meta.name = fx_str(&first->obj, "web-first");
        f->n_existing = 0;
        plan(f);
        apply(f);
        memmove(f->pods + 62, f->pods, 61 * sizeof(*f->pods));
        memcpy(f->pods, keep, sizeof(keep));
        f->existing[f->n_existing++] = first;
        f->n = all;
        f->opts.max_endpoints_per_slice = 0;
        assert_string_equal(sizes(f), "62,61");
        const struct se_slices_plan *p = plan(f);
        assert_int_equal(p->n_create, 1);
        assert_int_equal(p->n_update, 1);
        assert_int_equal(p->n_unchanged, 1);
        assert_int_equal(p->n_remove, 0);
        assert_int_equal(p->create[0]->n_endpoints, 100);
        assert_int_equal(p->update[0]->n_endpoints, 89);
        apply(f);
        assert_string_equal(sizes(f), "100,89,61");
        assert_int_equal(total_endpoints(f), 250);
        fx_free(f);
}

/* TestReconcileEndpointSlicesSomePreexistingWorseAllocation: 300 pods, two
 * full-enough slices of 74 -> new slices of 100 and 52, existing untouched. */
static void test_slices__worse_allocation_fewer_writes(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        add_pods(f, 300);
        f->n = 148;
        f->opts.max_endpoints_per_slice = 74;
        plan(f);
        apply(f);
        f->opts.max_endpoints_per_slice = 0;
        f->n = 300;
        assert_string_equal(sizes(f), "74,74");
        const struct se_slices_plan *p = plan(f);
        assert_int_equal(p->n_create, 2);
        assert_int_equal(p->n_update, 0);
        assert_int_equal(p->n_unchanged, 2);
        apply(f);
        assert_string_equal(sizes(f), "100,74,74,52");
        fx_free(f);
}

/* TestReconcileEndpointSlicesRecycling: a port change turns 10 slices of 30
 * into 3 updates (creates recycled) and 7 deletes. */
static void test_slices__recycling_on_port_change(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        add_pods(f, 300);
        f->opts.max_endpoints_per_slice = 30;
        plan(f);
        apply(f);
        assert_int_equal(f->n_existing, 10);
        f->opts.max_endpoints_per_slice = 0;
        f->svc->ports[0].target_port.num = 9090;
        const struct se_slices_plan *p = plan(f);
        assert_int_equal(p->n_create, 0);
        assert_int_equal(p->n_update, 3);
        assert_int_equal(p->n_remove, 7);
        apply(f);
        assert_string_equal(sizes(f), "100,100,100");
        assert_int_equal(f->existing[0]->ports[0].port, 9090);
        fx_free(f);
}

/* TestReconcileEndpointSlicesMaxEndpointsPerSlice */
static void test_slices__max_endpoints_per_slice(void **state)
{
        (void)state;
        static const struct {
                uint32_t max;
                const char *sizes;
        } cases[] = { { 50, "50,50,50,50,50" }, { 80, "80,80,80,10" }, { 150, "150,100" },
                      { 250, "250" },           { 500, "250" },        { 5000, "250" } };
        for (size_t i = 0; i < SE_ARRAY_SIZE(cases); i++) {
                struct fx *f = fx_new("10.0.0.1");
                add_pods(f, 250);
                f->opts.max_endpoints_per_slice = cases[i].max;
                plan(f);
                apply(f);
                assert_string_equal(sizes(f), cases[i].max == 5000 ? "250" : cases[i].sizes);
                fx_free(f);
        }
}

/* Slices of an older Service with the same name (other owner UID), of an
 * address type the Service dropped, or of another controller. */
static void test_slices__stale_and_foreign_slices(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        add_pod(f, "a", "1.0.0.1", true);
        plan(f);
        apply(f);
        struct se_endpoint_slice *s = f->existing[0];
        /* an older Service's slice */
        s->obj.meta.more->owner_refs[0].uid = "old-uid";
        const struct se_slices_plan *p = plan(f);
        /* the stale slice's delete is not recycled (not ours): create + delete */
        assert_int_equal(p->n_create, 1);
        assert_int_equal(p->n_remove, 1);
        assert_ptr_equal(p->remove[0], s);
        s->obj.meta.more->owner_refs[0].uid = "svc-uid-1";
        /* another managed-by value: ignored, we create our own */
        f->opts.slices_managed_by = "svcenv.io/test";
        p = plan(f);
        assert_int_equal(p->action, SE_EP_CREATE);
        assert_int_equal(p->n_remove, 0);
        assert_string_equal(
                se_kvlist_get(&p->create[0]->obj.meta.labels, SE_SLICE_MANAGED_BY_LABEL),
                "svcenv.io/test");
        f->opts.slices_managed_by = NULL;
        /* the Service became IPv6: the IPv4 slice goes, an IPv6 placeholder comes */
        fx_families(f->svc, "IPv6", NULL);
        p = plan(f);
        assert_int_equal(p->n_remove, 1);
        assert_int_equal(p->n_create, 1);
        assert_string_equal(p->create[0]->address_type, "IPv6");
        assert_int_equal(p->create[0]->n_endpoints, 0);
        fx_free(f);
}

/* Dual stack: one slice per address type, each with that family's IP. */
static void test_slices__dual_stack(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        fx_families(f->svc, "IPv4", "IPv6");
        add_pod(f, "a", "10.1.0.1,fd00::0:1", true);
        add_pod(f, "b", "10.1.0.2", true);
        const struct se_slices_plan *p = plan(f);
        assert_int_equal(p->n_create, 2);
        assert_string_equal(p->create[0]->address_type, "IPv4");
        assert_int_equal(p->create[0]->n_endpoints, 2);
        assert_string_equal(p->create[1]->address_type, "IPv6");
        assert_int_equal(p->create[1]->n_endpoints, 1);
        assert_string_equal(p->create[1]->endpoints[0].addresses.v[0], "fd00::1");
        assert_string_not_equal(p->create[0]->obj.meta.name, p->create[1]->obj.meta.name);
        fx_free(f);
}

/* TestReconcilerPodMissingNode; the error text is the reconciler's, which
 * the controller puts in its FailedToUpdateEndpointSlices event. A
 * dual-stack Service checks once per family: one error per pod still. */
static void test_slices__pod_missing_node(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        add_node(f, "node-1", NULL);
        add_pod(f, "a", "1.0.0.1", true);
        struct se_pod *lost = add_pod(f, "b", "1.0.0.2,fd00::2", true);
        lost->node_name = "gone";
        struct se_pod *unbound = add_pod(f, "c", "1.0.0.3", true);
        unbound->node_name = NULL;
        const struct se_slices_plan *p = plan(f);
        assert_int_equal(p->pods_missing_node, 2);
        assert_int_equal(p->node_errors.n, 2);
        assert_string_equal(p->node_errors.v[0],
                            "skipping Pod b for Service ns/web: Node gone Not Found");
        assert_string_equal(p->node_errors.v[1],
                            "skipping Pod c for Service ns/web: Node  Not Found");
        assert_int_equal(p->create[0]->n_endpoints, 1);
        assert_null(se_slice_endpoint_zone(&p->create[0]->endpoints[0]));
        fx_families(f->svc, "IPv4", "IPv6");
        p = plan(f);
        assert_int_equal(p->node_errors.n, 2);
        f->svc->publish_not_ready_addresses = true;
        p = plan(f);
        assert_int_equal(p->pods_missing_node, 0);
        assert_int_equal(p->node_errors.n, 0);
        assert_int_equal(p->create[0]->n_endpoints + p->create[1]->n_endpoints, 4);
        fx_free(f);
}

/* A slice's ports in upstream's order (portsInOrder: FNV-1a 128 of Go's
 * dump of each discovery/v1 EndpointPort); the digests were printed by
 * upstream's own code, and the order of a and b is the one its
 * NewPortMapKey gives them (b first). */
static void test_slices__ports_in_upstream_order(void **state)
{
        (void)state;
        uint8_t k[EP_ORDER_KEY_LEN];
        char hex[33];
        struct se_slice_port http = { "http", true, 8080, true, SE_PROTO_TCP, NULL };
        struct se_slice_port dns = { "", true, 53, true, SE_PROTO_UDP, "dns" };
        endpoints_slice_port_order_key(&http, k);
        for (int i = 0; i < 16; i++)
                snprintf(hex + 2 * i, 3, "%02x", k[i]);
        assert_string_equal(hex, "0e874d5677090ee5c32afa85f637c347");
        endpoints_slice_port_order_key(&dns, k);
        for (int i = 0; i < 16; i++)
                snprintf(hex + 2 * i, 3, "%02x", k[i]);
        assert_string_equal(hex, "d6a7cc0ba93f91f1be3d8d231be996c3");

        struct fx *f = fx_new("10.0.0.1");
        f->svc->n_ports = 0;
        fx_port(f->svc, "a", 80, "1", SE_PROTO_TCP);
        fx_port(f->svc, "b", 81, "2", SE_PROTO_UDP);
        add_pod(f, "p", "1.0.0.1", true);
        const struct se_slices_plan *p = plan(f);
        assert_int_equal(p->n_create, 1);
        assert_int_equal(p->create[0]->n_ports, 2);
        assert_string_equal(p->create[0]->ports[0].name, "b");
        assert_string_equal(p->create[0]->ports[1].name, "a");
        fx_free(f);
}

/* Go's error aggregate text (utilerrors.NewAggregate(...).Error()), which
 * upstream's event shows. */
static void test_slices__errors_join(void **state)
{
        (void)state;
        struct se_strv e = SE_STRV_INIT;
        assert_null(se_errors_join(&e, 1000));
        assert_int_equal(se_strv_push(&e, "a failed"), 0);
        char *s = se_errors_join(&e, 1000);
        assert_string_equal(s, "a failed");
        free(s);
        assert_int_equal(se_strv_push(&e, "a failed"), 0);
        s = se_errors_join(&e, 1000);
        assert_string_equal(s, "a failed");
        free(s);
        assert_int_equal(se_strv_push(&e, "b failed"), 0);
        s = se_errors_join(&e, 1000);
        assert_string_equal(s, "[a failed, b failed]");
        free(s);
        assert_null(se_errors_join(&e, 10)); /* over the cap: nothing */
        se_strv_release(&e);
}

/* A pod without the named port is still published, in a slice with no
 * ports (issue 109627); a sidecar's named port counts. */
static void test_slices__named_port_groups(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        f->svc->ports[0].target_port = (struct se_int_or_string){ true, 0, "http" };
        struct se_pod *a = add_pod(f, "a", "1.0.0.1", true);
        fx_container_port(a, false, NULL, "http", 8080, SE_PROTO_TCP);
        struct se_pod *b = add_pod(f, "b", "1.0.0.2", true);
        fx_container_port(b, true, "Always", "http", 8080, SE_PROTO_TCP);
        add_pod(f, "c", "1.0.0.3", true);
        const struct se_slices_plan *p = plan(f);
        assert_int_equal(p->n_create, 2);
        const struct se_endpoint_slice *with = p->create[0]->n_ports ? p->create[0] : p->create[1];
        const struct se_endpoint_slice *without =
                p->create[0]->n_ports ? p->create[1] : p->create[0];
        assert_int_equal(with->n_endpoints, 2);
        assert_int_equal(with->ports[0].port, 8080);
        assert_int_equal(without->n_endpoints, 1);
        assert_int_equal(without->n_ports, 0);
        assert_string_equal(se_slice_endpoint_target_ref(&without->endpoints[0])->name, "c");
        fx_free(f);
}

/* setEndpointSliceLabels: a Service label change updates the slices; the
 * headless label; reserved Service labels are ignored. */
static void test_slices__labels(void **state)
{
        (void)state;
        struct fx *f = fx_new("None");
        add_pod(f, "a", "1.0.0.1", true);
        fx_kv(&f->svc->obj, &f->svc->obj.meta.labels, SE_SLICE_SERVICE_NAME_LABEL, "evil");
        const struct se_slices_plan *p = plan(f);
        const struct se_kvlist *l = &p->create[0]->obj.meta.labels;
        assert_string_equal(se_kvlist_get(l, SE_HEADLESS_LABEL), "");
        assert_string_equal(se_kvlist_get(l, SE_SLICE_SERVICE_NAME_LABEL), "web");
        apply(f);
        p = plan(f);
        assert_int_equal(p->action, SE_EP_UNCHANGED);
        fx_kv(&f->svc->obj, &f->svc->obj.meta.labels, "tier", "db");
        p = plan(f);
        assert_int_equal(p->action, SE_EP_UPDATE);
        assert_int_equal(p->n_update, 1);
        assert_string_equal(se_kvlist_get(&p->update[0]->obj.meta.labels, "tier"), "db");
        fx_free(f);
}

/* Endpoint changes beyond the identity (conditions, node) update the slice
 * in place; foreign annotations on it are kept; trigger time written. */
static void test_slices__update_in_place(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        add_pods(f, 3);
        plan(f);
        apply(f);
        fx_kv(&f->existing[0]->obj, &f->existing[0]->obj.meta.annotations, "example.com/x", "1");
        f->pods[1]->conditions[0].status = "False";
        struct se_endpoints_input in = { .namespace = "ns",
                                         .name = "web",
                                         .svc = f->svc,
                                         .pods = (const struct se_pod *const *)f->pods,
                                         .n_pods = f->n,
                                         .trigger_time_ns = 1764489600000000000LL };
        struct se_slices_plan p;
        plan_in(f, &in, NULL, &p);
        assert_int_equal(p.n_update, 1);
        assert_int_equal(p.n_create + p.n_remove, 0);
        const struct se_endpoint_slice *s = p.update[0];
        assert_string_equal(s->obj.meta.name, f->existing[0]->obj.meta.name);
        assert_string_equal(se_kvlist_get(&s->obj.meta.annotations, "example.com/x"), "1");
        assert_string_equal(se_kvlist_get(&s->obj.meta.annotations, SE_TRIGGER_TIME_ANNOTATION),
                            "2025-11-30T08:00:00Z");
        assert_int_equal(s->endpoints[1].ready, SE_FALSE);
        se_slices_plan_release(&p);
        /* hints on an otherwise unchanged slice are removed */
        f->pods[1]->conditions[0].status = "True";
        struct se_slice_endpoint *e = &f->existing[0]->endpoints[0];
        const char **zv = se_arena_array(&f->existing[0]->obj.arena, 1, sizeof(char *));
        zv[0] = "zone-a";
        assert_int_equal(se_slice_endpoint_set_hints(e, &f->existing[0]->obj.arena,
                                                     (struct se_strs){ zv, 1 },
                                                     (struct se_strs){ NULL, 0 }),
                         0);
        const struct se_slices_plan *q = plan(f);
        assert_int_equal(q->n_update, 1);
        assert_int_equal(se_slice_endpoint_hint_zones(&q->update[0]->endpoints[0])->n, 0);
        fx_free(f);
}

/* trafficdist: PreferClose/PreferSameZone give ready endpoints a zone hint,
 * PreferSameNode a node hint too; not-ready endpoints get none; a slice
 * with the right hints stays unchanged; dropping the field removes them;
 * topology-mode Auto wins over the field. */
static void test_slices__traffic_distribution_hints(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        add_node(f, "node-1", "zone-a");
        add_pod(f, "a", "1.0.0.1", true);
        add_pod(f, "b", "1.0.0.2", false);
        f->svc->traffic_distribution = "PreferClose";
        const struct se_slices_plan *p = plan(f);
        const struct se_slice_endpoint *e = p->create[0]->endpoints;
        assert_int_equal(se_slice_endpoint_hint_zones(&e[0])->n, 1);
        assert_string_equal(se_slice_endpoint_hint_zones(&e[0])->v[0], "zone-a");
        assert_int_equal(se_slice_endpoint_hint_nodes(&e[0])->n, 0);
        assert_int_equal(
                se_slice_endpoint_hint_zones(&e[1])->n + se_slice_endpoint_hint_nodes(&e[1])->n, 0);
        apply(f);
        p = plan(f);
        assert_int_equal(p->action, SE_EP_UNCHANGED);
        f->svc->traffic_distribution = "PreferSameNode";
        p = plan(f);
        assert_int_equal(p->n_update, 1);
        e = p->update[0]->endpoints;
        assert_int_equal(se_slice_endpoint_hint_nodes(&e[0])->n, 1);
        assert_string_equal(se_slice_endpoint_hint_nodes(&e[0])->v[0], "node-1");
        assert_string_equal(se_slice_endpoint_hint_zones(&e[0])->v[0], "zone-a");
        apply(f);
        p = plan(f);
        assert_int_equal(p->action, SE_EP_UNCHANGED);
        fx_kv(&f->svc->obj, &f->svc->obj.meta.annotations, "service.kubernetes.io/topology-mode",
              "Auto");
        p = plan(f);
        assert_int_equal(p->n_update, 1);
        assert_int_equal(se_slice_endpoint_hint_zones(&p->update[0]->endpoints[0])->n, 0);
        f->svc->obj.meta.annotations.n = 0;
        f->svc->traffic_distribution = NULL;
        p = plan(f);
        assert_int_equal(p->n_update, 1);
        assert_int_equal(se_slice_endpoint_hint_zones(&p->update[0]->endpoints[0])->n, 0);
        assert_int_equal(se_slice_endpoint_hint_nodes(&p->update[0]->endpoints[0])->n, 0);
        fx_free(f);
}

/* ---- topology-mode Auto (the topology cache) ---- */

/* Both topology caches learn the nodes. */
static void set_nodes(struct fx *f)
{
        assert_int_equal(se_topology_cache_set_nodes(
                                 f->topo, (const struct se_node *const *)f->nodes, f->n_nodes),
                         0);
        assert_int_equal(se_topology_cache_set_nodes(
                                 f->topo_slim, (const struct se_node *const *)f->nodes, f->n_nodes),
                         0);
}

/* Nodes of 4 cpus: zone-a 2 (node-a1, node-a2), zone-b 1, zone-c 1, so
 * shares .5/.25/.25; plus a not-ready node without zone (node-x). */
static struct fx *topo_fx(void)
{
        struct fx *f = fx_new("10.0.0.1");
        static const char *const nodes[][2] = {
                { "node-a1", "zone-a" }, { "node-a2", "zone-a" }, { "node-b1", "zone-b" },
                { "node-c1", "zone-c" }, { "node-x", NULL },
        };
        for (size_t i = 0; i < SE_ARRAY_SIZE(nodes); i++) {
                add_node(f, nodes[i][0], nodes[i][1]);
                f->nodes[i]->allocatable_cpu_nanos = nodes[i][1] ? 4000000000 : 0;
                f->nodes[i]->ready = nodes[i][1] ? SE_TRUE : SE_FALSE;
        }
        f->topo = se_topology_cache_new();
        f->topo_slim = se_topology_cache_new();
        set_nodes(f);
        assert_int_equal(se_topology_cache_zones(f->topo), 3);
        fx_kv(&f->svc->obj, &f->svc->obj.meta.annotations, SE_TOPOLOGY_MODE_ANNOTATION, "Auto");
        return f;
}

/* pods on the nodes by their zone letter ("aabbbccc"; "x": node-x) */
static void topo_pods(struct fx *f, const char *zones)
{
        char name[32], ip[32];
        for (size_t i = 0; zones[i]; i++) {
                snprintf(name, sizeof(name), "pod-%zu", f->n);
                snprintf(ip, sizeof(ip), "10.1.0.%zu", f->n + 1);
                struct se_pod *p = add_pod(f, name, ip, true);
                p->node_name = zones[i] == 'a' ? (i % 2 ? "node-a2" : "node-a1") :
                               zones[i] == 'b' ? "node-b1" :
                               zones[i] == 'c' ? "node-c1" :
                                                 "node-x";
        }
}

/* Per zone of the endpoints (a, b, c) how many hints go to each zone: "aa>a
 * ab>b ..." is summarised as counts "own/other" per zone letter. */
static void hint_counts(const struct se_endpoint_slice *s, int counts[3])
{
        counts[0] = counts[1] = counts[2] = 0;
        for (uint32_t i = 0; i < s->n_endpoints; i++) {
                const struct se_slice_endpoint *e = &s->endpoints[i];
                assert_int_equal(se_slice_endpoint_hint_nodes(e)->n, 0);
                if (e->ready != SE_TRUE) {
                        assert_int_equal(se_slice_endpoint_hint_zones(e)->n, 0);
                        continue;
                }
                assert_int_equal(se_slice_endpoint_hint_zones(e)->n, 1);
                counts[se_slice_endpoint_hint_zones(e)->v[0][5] - 'a']++;
        }
}

static void expect_event(const struct se_slices_plan *p, uint32_t i, bool warning,
                         const char *reason, const char *message)
{
        assert_true(i < p->n_events);
        assert_int_equal(p->events[i].warning, warning);
        assert_string_equal(p->events[i].reason, reason);
        assert_string_equal(p->events[i].message, message);
}

/* A Service in topology-mode Auto over 3 zones gets upstream's allocation:
 * 8 endpoints (a 2, b 3, c 3) over shares .5/.25/.25 give a 4, b 2, c 2;
 * the next sync leaves the slice alone, with no event. */
static void test_slices__topology_auto(void **state)
{
        (void)state;
        struct fx *f = topo_fx();
        topo_pods(f, "aabbbccc");
        add_pod(f, "down", "10.1.0.99", false)->node_name = "node-b1";
        const struct se_slices_plan *p = plan(f);
        assert_int_equal(p->n_create, 1);
        int n[3];
        hint_counts(p->create[0], n);
        assert_int_equal(n[0], 4);
        assert_int_equal(n[1], 2);
        assert_int_equal(n[2], 2);
        /* the endpoints given to zone-a: the first of zone-b and of zone-c */
        const struct se_slice_endpoint *e = p->create[0]->endpoints;
        for (uint32_t i = 0; i < p->create[0]->n_endpoints; i++)
                if (e[i].ready == SE_TRUE && strcmp(se_slice_endpoint_hint_zones(&e[i])->v[0],
                                                    se_slice_endpoint_zone(&e[i])) != 0)
                        assert_true(strcmp(e[i].addresses.v[0], "10.1.0.3") == 0 ||
                                    strcmp(e[i].addresses.v[0], "10.1.0.6") == 0);
        assert_int_equal(p->n_events, 1);
        expect_event(p, 0, false, "TopologyAwareHintsEnabled",
                     "Topology Aware Hints has been enabled, addressType: IPv4");
        apply(f);
        p = plan(f);
        assert_int_equal(p->action, SE_EP_UNCHANGED);
        assert_int_equal(p->n_events, 0);
        /* a zone's share grows: the cache reports the Service, whose hints
         * no longer fit (zone-c, 8 of 20 cpus, needs ceil(8 * .4 / 1.2) = 3) */
        f->nodes[3]->allocatable_cpu_nanos = 8000000000;
        set_nodes(f);
        struct se_strv keys = SE_STRV_INIT;
        assert_int_equal(se_topology_cache_overloaded(f->topo, &keys), 0);
        assert_int_equal(keys.n, 1);
        assert_string_equal(keys.v[0], "ns/web");
        se_strv_release(&keys);
        p = plan(f);
        assert_int_equal(p->n_update, 1);
        hint_counts(p->update[0], n);
        assert_int_equal(n[0], 3); /* zone-b gives one to zone-a */
        assert_int_equal(n[1], 2);
        assert_int_equal(n[2], 3);
        assert_int_equal(p->n_events, 0);
        fx_free(f);
}

/* A zone without endpoints still gets hints (other zones give); an
 * endpoint without zone removes them all; too few endpoints too. */
static void test_slices__topology_auto_zones(void **state)
{
        (void)state;
        struct fx *f = topo_fx();
        topo_pods(f, "aaaaabbb");
        const struct se_slices_plan *p = plan(f);
        int n[3];
        hint_counts(p->create[0], n);
        assert_int_equal(n[0], 4);
        assert_int_equal(n[1], 2);
        assert_int_equal(n[2], 2);
        apply(f);
        /* a ready pod on a node without zone (not ready, so not counted) */
        topo_pods(f, "x");
        p = plan(f);
        assert_int_equal(p->n_update, 1);
        for (uint32_t i = 0; i < p->update[0]->n_endpoints; i++)
                assert_int_equal(se_slice_endpoint_hint_zones(&p->update[0]->endpoints[i])->n, 0);
        assert_int_equal(p->n_events, 1);
        expect_event(p, 0, true, "TopologyAwareHintsDisabled",
                     "One or more endpoints do not have a zone specified, addressType: IPv4");
        assert_false(se_topology_cache_has_hints(f->topo, "ns/web"));
        apply(f);
        /* 2 endpoints for 3 zones */
        fx_free_all((struct se_object **)f->pods, f->n);
        f->n = 0;
        topo_pods(f, "ab");
        p = plan(f);
        expect_event(p, 0, true, "TopologyAwareHintsDisabled",
                     "Insufficient number of endpoints (2 endpoints, 3 zones), addressType: IPv4");
        for (uint32_t i = 0; i < p->n_update; i++)
                for (uint32_t k = 0; k < p->update[i]->n_endpoints; k++)
                        assert_int_equal(
                                se_slice_endpoint_hint_zones(&p->update[i]->endpoints[k])->n, 0);
        fx_free(f);
}

/* Precedence: the annotation wins over trafficDistribution; the deprecated
 * annotation wins over topology-mode; leaving Auto disables with a
 * Warning and hands over to trafficDistribution. */
static void test_slices__topology_precedence(void **state)
{
        (void)state;
        struct fx *f = topo_fx();
        topo_pods(f, "aabc");
        f->svc->traffic_distribution = "PreferSameNode";
        const struct se_slices_plan *p = plan(f);
        int n[3];
        hint_counts(p->create[0], n); /* zone hints only: no node hints */
        assert_int_equal(n[0], 2);
        assert_int_equal(n[1], 1);
        assert_int_equal(n[2], 1);
        expect_event(p, 0, false, "TopologyAwareHintsEnabled",
                     "Topology Aware Hints has been enabled, addressType: IPv4");
        apply(f);
        /* topology-aware-hints: Disabled outranks topology-mode: Auto (keys
         * in order) */
        f->svc->obj.meta.annotations.n = 0;
        fx_kv(&f->svc->obj, &f->svc->obj.meta.annotations, SE_TOPOLOGY_HINTS_ANNOTATION,
              "Disabled");
        fx_kv(&f->svc->obj, &f->svc->obj.meta.annotations, SE_TOPOLOGY_MODE_ANNOTATION, "Auto");
        p = plan(f);
        assert_int_equal(p->n_events, 1);
        expect_event(p, 0, true, "TopologyAwareHintsDisabled",
                     "Topology Aware Hints has been disabled, addressType: IPv4");
        assert_int_equal(p->n_update, 1);
        const struct se_slice_endpoint *e = p->update[0]->endpoints;
        for (uint32_t i = 0; i < p->update[0]->n_endpoints; i++) {
                assert_int_equal(se_slice_endpoint_hint_nodes(&e[i])->n, 1);
                assert_string_equal(se_slice_endpoint_hint_nodes(&e[i])->v[0],
                                    se_slice_endpoint_node(&e[i]));
        }
        apply(f);
        /* disabled once: no second event */
        p = plan(f);
        assert_int_equal(p->action, SE_EP_UNCHANGED);
        assert_int_equal(p->n_events, 0);
        /* no cache: Auto gives no hints and no events */
        f->svc->obj.meta.annotations.n = 0;
        fx_kv(&f->svc->obj, &f->svc->obj.meta.annotations, SE_TOPOLOGY_MODE_ANNOTATION, "Auto");
        struct se_topology_cache *t = f->topo, *ts = f->topo_slim;
        f->topo = f->topo_slim = NULL;
        p = plan(f);
        assert_int_equal(p->n_update, 1);
        for (uint32_t i = 0; i < p->update[0]->n_endpoints; i++)
                assert_int_equal(
                        se_slice_endpoint_hint_zones(&p->update[0]->endpoints[i])->n +
                                se_slice_endpoint_hint_nodes(&p->update[0]->endpoints[i])->n,
                        0);
        assert_int_equal(p->n_events, 0);
        f->topo = t;
        f->topo_slim = ts;
        fx_free(f);
}

/* Dual-stack: hints per address type, one Enabled event per Service; a
 * type dropped forgets the Service's state, so the next sync tells again. */
static void test_slices__topology_dual_stack(void **state)
{
        (void)state;
        struct fx *f = topo_fx();
        fx_families(f->svc, "IPv4", "IPv6");
        static const char *const nodes[] = { "node-a1", "node-a2", "node-b1", "node-c1" };
        for (int i = 0; i < 4; i++) {
                char name[16], ips[64];
                snprintf(name, sizeof(name), "p%d", i);
                snprintf(ips, sizeof(ips), "10.1.0.%d,fd00::%d", i + 1, i + 1);
                add_pod(f, name, ips, true)->node_name = nodes[i];
        }
        const struct se_slices_plan *p = plan(f);
        assert_int_equal(p->n_create, 2);
        int n[3];
        for (int k = 0; k < 2; k++) {
                hint_counts(p->create[k], n);
                assert_int_equal(n[0], 2);
                assert_int_equal(n[1], 1);
                assert_int_equal(n[2], 1);
        }
        assert_int_equal(p->n_events, 1);
        expect_event(p, 0, false, "TopologyAwareHintsEnabled",
                     "Topology Aware Hints has been enabled, addressType: IPv4");
        apply(f);
        f->svc->ip_families.n = 1;
        p = plan(f);
        assert_int_equal(p->n_remove, 1);
        assert_string_equal(p->remove[0]->address_type, "IPv6");
        assert_int_equal(p->n_events, 1);
        expect_event(p, 0, false, "TopologyAwareHintsEnabled",
                     "Topology Aware Hints has been enabled, addressType: IPv4");
        fx_free(f);
}

/* One field of one existing endpoint changed at a time: the digest of a
 * slim slice gives the verdict the full slice gives (plan() checks both):
 * fields upstream's endpoint hash covers make the endpoint a new one
 * (removed + added), those EndpointsEqualBeyondHash compares update it in
 * place, the others change nothing. */
enum verdict { SAME, BEYOND, IDENTITY };

static void mutate(struct se_endpoint_slice *s, int field)
{
        struct se_object *o = &s->obj;
        struct se_slice_endpoint *e = &s->endpoints[1];
        /* e's more is shared and read-only: change a copy, set it back */
        struct se_slice_endpoint_fields fl;
        se_slice_endpoint_get_more(e, &fl);
        struct se_object_ref ref = *fl.target_ref, *r = &ref;
        fl.target_ref = r;
        switch (field) {
        case 0:
                fl.node_name = fx_str(o, "node-2");
                break;
        case 1:
                fl.node_name = NULL;
                break;
        case 2:
                fl.node_name = fx_str(o, "");
                break;
        case 3:
                fl.zone = fx_str(o, "zone-b");
                break;
        case 4:
                fl.zone = NULL;
                break;
        case 5:
                e->ready = SE_FALSE;
                break;
        case 6:
                e->ready = SE_UNSET;
                break;
        case 7:
                e->serving = SE_FALSE;
                break;
        case 8:
                e->terminating = SE_TRUE;
                break;
        case 9:
                e->terminating = SE_UNSET;
                break;
        case 10:
                r->kind = fx_str(o, "Node");
                break;
        case 11:
                r->uid = fx_str(o, "other-uid");
                break;
        case 12:
                r->uid = NULL;
                break;
        case 13:
                fl.target_ref = NULL;
                break; /* its namespace and name hash as "" */
        case 14:
                r->name = fx_str(o, "pod-009");
                break;
        case 15:
                r->namespace = fx_str(o, "other");
                break;
        case 16:
                e->hostname = fx_str(o, "h");
                break;
        case 17:
                e->addresses.v[0] = fx_str(o, "10.9.9.9");
                break;
        case 18:
                r->resource_version = fx_str(o, "42");
                break;
        case 19:
                e->hostname = fx_str(o, "");
                break; /* nil and "" hash the same */
        default:
                fail();
        }
        assert_int_equal(se_slice_endpoint_set_more(e, &o->arena, &fl, NULL), 0);
}

static void test_slices__slim_one_field_changed(void **state)
{
        (void)state;
        static const enum verdict want[] = {
                BEYOND,   BEYOND,   BEYOND,   BEYOND,   BEYOND, BEYOND, BEYOND,
                BEYOND,   BEYOND,   BEYOND,   BEYOND,   BEYOND, BEYOND, IDENTITY,
                IDENTITY, IDENTITY, IDENTITY, IDENTITY, SAME,   SAME,
        };
        for (int field = 0; field < (int)SE_ARRAY_SIZE(want); field++) {
                struct fx *f = fx_new("10.0.0.1");
                add_node(f, "node-1", "zone-a");
                add_pods(f, 3);
                plan(f);
                apply(f);
                assert_int_equal(f->n_existing, 1);
                struct se_slice_endpoint want_ep = f->existing[0]->endpoints[1];
                struct se_object_ref want_ref = *se_slice_endpoint_target_ref(&want_ep);
                const char *want_addr = want_ep.addresses.v[0];
                mutate(f->existing[0], field);
                const struct se_slices_plan *p = plan(f);
                if (want[field] == SAME) {
                        assert_int_equal(p->action, SE_EP_UNCHANGED);
                        assert_int_equal(p->n_unchanged, 1);
                        fx_free(f);
                        continue;
                }
                assert_int_equal(p->action, SE_EP_UPDATE);
                assert_int_equal(p->n_update, 1);
                assert_int_equal(p->n_create + p->n_remove + p->n_unchanged, 0);
                bool id = want[field] == IDENTITY;
                assert_int_equal(p->endpoints_removed, id);
                assert_int_equal(p->endpoints_added, id);
                /* the endpoint is written as desired again (a new one goes last) */
                const struct se_endpoint_slice *u = p->update[0];
                assert_int_equal(u->n_endpoints, 3);
                const struct se_slice_endpoint *e = &u->endpoints[id ? 2 : 1];
                assert_string_equal(e->addresses.v[0], want_addr);
                assert_string_equal(se_slice_endpoint_node(e), se_slice_endpoint_node(&want_ep));
                assert_string_equal(se_slice_endpoint_zone(e), se_slice_endpoint_zone(&want_ep));
                assert_int_equal(e->ready, SE_TRUE);
                assert_int_equal(e->terminating, SE_FALSE);
                assert_string_equal(se_slice_endpoint_target_ref(e)->name, want_ref.name);
                assert_string_equal(se_slice_endpoint_target_ref(e)->uid, want_ref.uid);
                fx_free(f);
        }
}

/* An unchanged slice that takes new endpoints, or only new labels, is
 * written as a copy of itself (upstream DeepCopy): not-ready endpoints keep
 * the hints they had (the heuristics only rewrite ready ones), from a slim
 * slice too. */
static void test_slices__slim_fill_keeps_hints(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        f->svc->traffic_distribution = "PreferClose";
        add_node(f, "node-1", "zone-a");
        add_pods(f, 2);
        f->pods[1]->conditions[0].status = "False";
        plan(f);
        apply(f);
        struct se_endpoint_slice *s = f->existing[0];
        assert_int_equal(s->n_endpoints, 2);
        assert_int_equal(s->endpoints[1].ready, SE_FALSE);
        struct se_slice_endpoint *e = &s->endpoints[1];
        const char **zv = se_arena_array(&s->obj.arena, 1, sizeof(char *));
        zv[0] = fx_str(&s->obj, "zone-x");
        assert_int_equal(se_slice_endpoint_set_hints(e, &s->obj.arena, (struct se_strs){ zv, 1 },
                                                     (struct se_strs){ NULL, 0 }),
                         0);
        const struct se_slices_plan *p = plan(f);
        assert_int_equal(p->action, SE_EP_UNCHANGED);
        add_pod(f, "pod-new", "10.1.9.9", true);
        p = plan(f);
        assert_int_equal(p->n_update, 1);
        assert_int_equal(p->update[0]->n_endpoints, 3);
        const struct se_slice_endpoint *u = &p->update[0]->endpoints[1];
        assert_int_equal(se_slice_endpoint_hint_zones(u)->n, 1);
        assert_string_equal(se_slice_endpoint_hint_zones(u)->v[0], "zone-x");
        assert_string_equal(se_slice_endpoint_hint_zones(&p->update[0]->endpoints[0])->v[0],
                            "zone-a");
        assert_string_equal(se_slice_endpoint_hint_zones(&p->update[0]->endpoints[2])->v[0],
                            "zone-a");
        /* relabelled only: upstream writes a copy too (no new endpoints) */
        f->n = 2;
        se_object_unref(&f->pods[2]->obj);
        fx_kv(&f->svc->obj, &f->svc->obj.meta.labels, "tier", "front");
        p = plan(f);
        assert_int_equal(p->n_update, 1);
        assert_int_equal(p->endpoints_added + p->endpoints_removed, 0);
        assert_string_equal(se_kvlist_get(&p->update[0]->obj.meta.labels, "tier"), "front");
        u = &p->update[0]->endpoints[1];
        assert_int_equal(se_slice_endpoint_hint_zones(u)->n, 1);
        assert_string_equal(se_slice_endpoint_hint_zones(u)->v[0], "zone-x");
        fx_free(f);
}

/* Service gone: our slices are reported for deletion. */
static void test_slices__service_deleted(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        add_pod(f, "a", "1.0.0.1", true);
        plan(f);
        apply(f);
        struct se_endpoints_input in = { .namespace = "ns", .name = "web" };
        struct se_slices_plan p;
        plan_in(f, &in, NULL, &p);
        assert_int_equal(p.action, SE_EP_DELETE);
        assert_int_equal(p.n_remove, 1);
        se_slices_plan_release(&p);
        in.name = "other";
        plan_in(f, &in, NULL, &p);
        assert_int_equal(p.action, SE_EP_SKIP);
        se_slices_plan_release(&p);
        fx_free(f);
}

/* Names are stable across runs and unique. */
static void test_slices__deterministic_names(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        add_pods(f, 250);
        const struct se_slices_plan *p = plan(f);
        char names[3][64];
        for (int i = 0; i < 3; i++)
                snprintf(names[i], sizeof(names[i]), "%s", p->create[i]->obj.meta.name);
        assert_string_not_equal(names[0], names[1]);
        assert_string_not_equal(names[1], names[2]);
        p = plan(f);
        for (int i = 0; i < 3; i++)
                assert_string_equal(names[i], p->create[i]->obj.meta.name);
        for (const char *c = names[0] + 4; *c; c++)
                assert_non_null(strchr("bcdfghjklmnpqrstvwxz2456789", *c));
        fx_free(f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_slices__one_pod),
                cmocka_unit_test(test_slices__conditions),
                cmocka_unit_test(test_slices__placeholder),
                cmocka_unit_test(test_slices__idempotent),
                cmocka_unit_test(test_slices__prefer_fewer_writes),
                cmocka_unit_test(test_slices__worse_allocation_fewer_writes),
                cmocka_unit_test(test_slices__recycling_on_port_change),
                cmocka_unit_test(test_slices__max_endpoints_per_slice),
                cmocka_unit_test(test_slices__stale_and_foreign_slices),
                cmocka_unit_test(test_slices__dual_stack),
                cmocka_unit_test(test_slices__pod_missing_node),
                cmocka_unit_test(test_slices__errors_join),
                cmocka_unit_test(test_slices__ports_in_upstream_order),
                cmocka_unit_test(test_slices__named_port_groups),
                cmocka_unit_test(test_slices__labels),
                cmocka_unit_test(test_slices__update_in_place),
                cmocka_unit_test(test_slices__traffic_distribution_hints),
                cmocka_unit_test(test_slices__topology_auto),
                cmocka_unit_test(test_slices__topology_auto_zones),
                cmocka_unit_test(test_slices__topology_precedence),
                cmocka_unit_test(test_slices__topology_dual_stack),
                cmocka_unit_test(test_slices__slim_one_field_changed),
                cmocka_unit_test(test_slices__slim_fill_keeps_hints),
                cmocka_unit_test(test_slices__service_deleted),
                cmocka_unit_test(test_slices__deterministic_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The Endpoints controller's computation, cases translated from upstream's
 * endpoints_controller_test.go plus svcenv's own edge cases. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../../pkg/endpoints/endpoints_internal.h"
#include "fixtures.h"
#include "slim_ep.h"

#define MAXP 4096

struct fx {
        struct se_service *svc;
        struct se_pod *pods[MAXP];
        size_t n;
        struct se_endpoints_plan plan;
};

static struct fx *fx_new(const char *cluster_ip)
{
        struct fx *f = calloc(1, sizeof(*f));
        f->svc = fx_service("ns", "web", cluster_ip);
        return f;
}

static struct se_pod *add_pod(struct fx *f, const char *name, const char *ips, bool ready)
{
        struct se_pod *p = fx_pod("ns", name, "web", ips, ready, "node-1");
        f->pods[f->n++] = p;
        return p;
}

static struct se_endpoints_input input(struct fx *f)
{
        return (struct se_endpoints_input){ .namespace = "ns",
                                            .name = "web",
                                            .svc = f->svc,
                                            .pods = (const struct se_pod *const *)f->pods,
                                            .n_pods = f->n };
}

static const struct se_endpoints *plan(struct fx *f, const struct se_endpoints *existing)
{
        struct se_endpoints_input in = input(f);
        se_endpoints_plan_release(&f->plan);
        assert_int_equal(fx_ep_plan_both(&in, existing, NULL, &f->plan), 0);
        return f->plan.obj;
}

static void fx_free(struct fx *f)
{
        se_endpoints_plan_release(&f->plan);
        fx_free_all((struct se_object **)f->pods, f->n);
        se_object_unref(&f->svc->obj);
        free(f);
}

static void test_endpoints__ready_and_not_ready_pods(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        fx_port(f->svc, NULL, 80, "8080", SE_PROTO_TCP);
        add_pod(f, "pod1", "1.2.3.5", true);
        add_pod(f, "pod0", "1.2.3.4", false);
        const struct se_endpoints *ep = plan(f, NULL);
        assert_int_equal(f->plan.action, SE_EP_CREATE);
        assert_int_equal(ep->n_subsets, 1);
        const struct se_endpoint_subset *s = &ep->subsets[0];
        assert_int_equal(s->n_addresses, 1);
        assert_string_equal(s->addresses[0].ip, "1.2.3.5");
        assert_string_equal(s->addresses[0].node_name, "node-1");
        assert_string_equal(s->addresses[0].target_ref->kind, "Pod");
        assert_string_equal(s->addresses[0].target_ref->name, "pod1");
        assert_string_equal(s->addresses[0].target_ref->uid, "uid-pod1");
        assert_null(s->addresses[0].target_ref->resource_version);
        assert_int_equal(s->n_not_ready, 1);
        assert_string_equal(s->not_ready[0].ip, "1.2.3.4");
        assert_int_equal(s->n_ports, 1);
        assert_int_equal(s->ports[0].port, 8080);
        assert_int_equal(s->ports[0].protocol, SE_PROTO_TCP);
        assert_string_equal(se_kvlist_get(&ep->obj.meta.labels, "app"), "web");
        assert_string_equal(se_kvlist_get(&ep->obj.meta.labels, SE_ENDPOINTS_MANAGED_BY_LABEL),
                            "endpoint-controller");
        assert_null(se_kvlist_get(&ep->obj.meta.labels, SE_HEADLESS_LABEL));
        fx_free(f);
}

/* TestSyncEndpointsItemsWithLabels/...PublishNotReady: pNRA puts every pod in addresses */
static void test_endpoints__publish_not_ready_addresses(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        f->svc->publish_not_ready_addresses = true;
        fx_port(f->svc, NULL, 80, "8080", SE_PROTO_TCP);
        add_pod(f, "pod0", "1.2.3.4", false);
        struct se_pod *t = add_pod(f, "pod1", "1.2.3.5", false);
        t->obj.meta.deletion_timestamp = "2026-01-01T00:00:00Z";
        const struct se_endpoints *ep = plan(f, NULL);
        assert_int_equal(ep->n_subsets, 1);
        assert_int_equal(ep->subsets[0].n_addresses, 2);
        assert_int_equal(ep->subsets[0].n_not_ready, 0);
        fx_free(f);
}

/* ShouldPodBeInEndpoints: terminal, no IP, terminating */
static void test_endpoints__pod_filter(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        fx_port(f->svc, NULL, 80, "8080", SE_PROTO_TCP);
        add_pod(f, "ok", "1.2.3.1", true);
        add_pod(f, "succeeded", "1.2.3.2", true)->phase = "Succeeded";
        add_pod(f, "failed", "1.2.3.3", false)->phase = "Failed";
        add_pod(f, "noip", NULL, false);
        add_pod(f, "deleting", "1.2.3.5", true)->obj.meta.deletion_timestamp =
                "2026-01-01T00:00:00Z";
        add_pod(f, "pending", "1.2.3.6", false)->phase = "Pending";
        struct se_pod *other = fx_pod("other", "elsewhere", "web", "1.2.3.7", true, "n");
        f->pods[f->n++] = other;
        struct se_pod *unlabelled = fx_pod("ns", "unlabelled", "db", "1.2.3.8", true, "n");
        f->pods[f->n++] = unlabelled;
        const struct se_endpoints *ep = plan(f, NULL);
        assert_int_equal(ep->n_subsets, 1);
        assert_int_equal(ep->subsets[0].n_addresses, 1);
        assert_string_equal(ep->subsets[0].addresses[0].ip, "1.2.3.1");
        assert_int_equal(ep->subsets[0].n_not_ready, 1);
        assert_string_equal(ep->subsets[0].not_ready[0].ip, "1.2.3.6");
        fx_free(f);
}

/* FindPort: named ports by name and protocol, sidecars, plain init containers ignored */
static void test_endpoints__find_port(void **state)
{
        (void)state;
        struct se_service *svc = fx_service("ns", "web", "10.0.0.1");
        fx_port(svc, "http", 80, "http", SE_PROTO_TCP);
        fx_port(svc, "dns", 53, "dns", SE_PROTO_UDP);
        fx_port(svc, "num", 81, "9000", SE_PROTO_TCP);
        fx_port(svc, "dflt", 82, NULL, SE_PROTO_TCP);
        struct se_pod *p = fx_pod("ns", "p", "web", "1.1.1.1", true, "n");
        fx_container_port(p, false, NULL, "dns", 5353, SE_PROTO_TCP); /* wrong protocol */
        fx_container_port(p, false, NULL, "http", 8080, SE_PROTO_TCP);
        fx_container_port(p, true, NULL, "dns", 1053, SE_PROTO_UDP); /* plain init: ignored */
        assert_int_equal(se_endpoints_find_port(p, &svc->ports[0]), 8080);
        assert_int_equal(se_endpoints_find_port(p, &svc->ports[1]), -ENOENT);
        assert_int_equal(se_endpoints_find_port(p, &svc->ports[2]), 9000);
        assert_int_equal(se_endpoints_find_port(p, &svc->ports[3]), 82);
        fx_container_port(p, true, "Always", "dns", 2053, SE_PROTO_UDP); /* sidecar */
        assert_int_equal(se_endpoints_find_port(p, &svc->ports[1]), 2053);
        se_object_unref(&p->obj);
        se_object_unref(&svc->obj);
}

/* A pod missing one named port of a two-port service keeps its other port:
 * the port served by fewer pods gets its own subset; a pod with no port at
 * all is absent (upstream TestSyncEndpointsMultiplePorts..., issue 109627). */
static void test_endpoints__named_port_missing_on_some_pods(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        fx_port(f->svc, "http", 80, "http", SE_PROTO_TCP);
        fx_port(f->svc, "metrics", 9100, "metrics", SE_PROTO_TCP);
        struct se_pod *a = add_pod(f, "a", "10.0.0.2", true);
        fx_container_port(a, false, NULL, "http", 8080, SE_PROTO_TCP);
        fx_container_port(a, false, NULL, "metrics", 9102, SE_PROTO_TCP);
        struct se_pod *b = add_pod(f, "b", "10.0.0.3", true);
        fx_container_port(b, false, NULL, "http", 8080, SE_PROTO_TCP);
        struct se_pod *c = add_pod(f, "c", "10.0.0.4", true);
        fx_container_port(c, false, NULL, "other", 1, SE_PROTO_TCP);
        const struct se_endpoints *ep = plan(f, NULL);
        assert_int_equal(ep->n_subsets, 2);
        /* subsets ordered by their first port's name */
        assert_string_equal(ep->subsets[0].ports[0].name, "http");
        assert_int_equal(ep->subsets[0].n_addresses, 2);
        assert_string_equal(ep->subsets[0].addresses[0].ip, "10.0.0.2");
        assert_string_equal(ep->subsets[0].addresses[1].ip, "10.0.0.3");
        assert_string_equal(ep->subsets[1].ports[0].name, "metrics");
        assert_int_equal(ep->subsets[1].ports[0].port, 9102);
        assert_int_equal(ep->subsets[1].n_addresses, 1);
        assert_string_equal(ep->subsets[1].addresses[0].ip, "10.0.0.2");
        fx_free(f);
}

/* Same address set, several ports: one subset carrying every port; a named
 * port resolving to different numbers splits the pods. */
static void test_endpoints__repack_groups_ports(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        fx_port(f->svc, "b", 81, "8081", SE_PROTO_TCP);
        fx_port(f->svc, "a", 80, "web", SE_PROTO_TCP);
        struct se_pod *p1 = add_pod(f, "p1", "10.0.0.2", true);
        fx_container_port(p1, false, NULL, "web", 8080, SE_PROTO_TCP);
        struct se_pod *p2 = add_pod(f, "p2", "10.0.0.3", false);
        fx_container_port(p2, false, NULL, "web", 8080, SE_PROTO_TCP);
        const struct se_endpoints *ep = plan(f, NULL);
        assert_int_equal(ep->n_subsets, 1);
        assert_int_equal(ep->subsets[0].n_ports, 2);
        assert_string_equal(ep->subsets[0].ports[0].name, "a");
        assert_string_equal(ep->subsets[0].ports[1].name, "b");
        assert_int_equal(ep->subsets[0].n_addresses, 1);
        assert_int_equal(ep->subsets[0].n_not_ready, 1);
        /* now p2's web port is another number */
        p2->containers[0].ports[0].container_port = 9090;
        ep = plan(f, NULL);
        assert_int_equal(ep->n_subsets, 3);
        fx_free(f);
}

/* Addresses sort by IP text bytewise, then UID (host-network pods share an IP). */
static void test_endpoints__address_order(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        fx_port(f->svc, NULL, 80, "80", SE_PROTO_TCP);
        add_pod(f, "z", "10.244.1.9", true);
        add_pod(f, "y", "10.244.1.100", true);
        add_pod(f, "x", "10.244.1.10", true);
        add_pod(f, "host-b", "10.0.0.11", true);
        add_pod(f, "host-a", "10.0.0.11", true);
        const struct se_endpoints *ep = plan(f, NULL);
        const struct se_endpoint_subset *s = &ep->subsets[0];
        assert_int_equal(s->n_addresses, 5);
        assert_string_equal(s->addresses[0].target_ref->name, "host-a");
        assert_string_equal(s->addresses[1].target_ref->name, "host-b");
        assert_string_equal(s->addresses[2].ip, "10.244.1.10");
        assert_string_equal(s->addresses[3].ip, "10.244.1.100");
        assert_string_equal(s->addresses[4].ip, "10.244.1.9");
        fx_free(f);
}

/* RepackSubsets (TestPackSubsets): the same address (IP and UID) seen twice
 * is one address; not ready wins over ready for the same port. */
static void test_endpoints__repack_duplicate_address(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        fx_port(f->svc, NULL, 80, "80", SE_PROTO_TCP);
        add_pod(f, "same", "10.0.0.2", true);
        add_pod(f, "same", "10.0.0.2", false);
        add_pod(f, "twice", "10.0.0.3", true);
        add_pod(f, "twice", "10.0.0.3", true);
        const struct se_endpoints *ep = plan(f, NULL);
        assert_int_equal(ep->n_subsets, 1);
        assert_int_equal(ep->subsets[0].n_addresses, 1);
        assert_string_equal(ep->subsets[0].addresses[0].ip, "10.0.0.3");
        assert_int_equal(ep->subsets[0].n_not_ready, 1);
        assert_string_equal(ep->subsets[0].not_ready[0].ip, "10.0.0.2");
        fx_free(f);
}

/* Dual stack: only the primary family; without ipFamilies: clusterIP's. */
static void test_endpoints__primary_family(void **state)
{
        (void)state;
        struct fx *f = fx_new("fd00::1");
        fx_port(f->svc, NULL, 80, "80", SE_PROTO_TCP);
        add_pod(f, "dual", "10.1.0.1,fd00:0:0::0001", true);
        add_pod(f, "v4only", "10.1.0.2", true);
        const struct se_endpoints *ep = plan(f, NULL);
        assert_int_equal(ep->subsets[0].n_addresses, 1);
        assert_string_equal(ep->subsets[0].addresses[0].ip, "fd00::1"); /* canonical */
        fx_families(f->svc, "IPv4", "IPv6");
        ep = plan(f, NULL);
        assert_int_equal(ep->subsets[0].n_addresses, 2);
        assert_string_equal(ep->subsets[0].addresses[0].ip, "10.1.0.1");
        fx_families(f->svc, "IPv6", "IPv4");
        ep = plan(f, NULL);
        assert_int_equal(ep->subsets[0].n_addresses, 1);
        /* headless without ipFamilies defaults to IPv4 */
        struct se_service *h = fx_service("ns", "h", "None");
        assert_int_equal(se_endpoints_service_family(h), 4);
        se_object_unref(&h->obj);
        fx_free(f);
}

/* Hostname only when subdomain == service name; headless label. */
static void test_endpoints__headless_hostname(void **state)
{
        (void)state;
        struct fx *f = fx_new("None");
        fx_port(f->svc, "pg", 5432, "5432", SE_PROTO_TCP);
        struct se_pod *a = add_pod(f, "db-0", "10.0.0.2", true);
        a->hostname = "db-0";
        a->subdomain = "web";
        struct se_pod *b = add_pod(f, "db-1", "10.0.0.3", true);
        b->hostname = "db-1";
        b->subdomain = "other";
        struct se_pod *c = add_pod(f, "db-2", "10.0.0.4", true);
        c->subdomain = "web"; /* no hostname */
        const struct se_endpoints *ep = plan(f, NULL);
        const struct se_endpoint_subset *s = &ep->subsets[0];
        assert_string_equal(s->addresses[0].hostname, "db-0");
        assert_null(s->addresses[1].hostname);
        assert_null(s->addresses[2].hostname);
        assert_string_equal(se_kvlist_get(&ep->obj.meta.labels, SE_HEADLESS_LABEL), "");
        fx_free(f);
}

/* Headless without ports: one subset without ports; a ClusterIP service
 * without ports gets no subsets. */
static void test_endpoints__headless_without_ports(void **state)
{
        (void)state;
        struct fx *f = fx_new("None");
        add_pod(f, "a", "10.0.0.2", true);
        add_pod(f, "b", "10.0.0.3", false);
        const struct se_endpoints *ep = plan(f, NULL);
        assert_int_equal(ep->n_subsets, 1);
        assert_int_equal(ep->subsets[0].n_ports, 0);
        assert_int_equal(ep->subsets[0].n_addresses, 1);
        assert_int_equal(ep->subsets[0].n_not_ready, 1);
        f->svc->cluster_ip = "10.0.0.1";
        ep = plan(f, NULL);
        assert_int_equal(ep->n_subsets, 0);
        fx_free(f);
}

static void test_endpoints__services_left_alone(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        f->svc->type = SE_SVC_EXTERNAL_NAME;
        plan(f, NULL);
        assert_int_equal(f->plan.action, SE_EP_SKIP);
        f->svc->type = SE_SVC_CLUSTER_IP;
        f->svc->selector.n = 0;
        plan(f, NULL);
        assert_int_equal(f->plan.action, SE_EP_SKIP);
        assert_null(f->plan.obj);
        fx_free(f);
}

/* Service gone: upstream deletes the Endpoints whoever wrote them (user,
 * other managed-by, ours); only a leader-election record stays
 * (syncService's not-found branch, checkLeftoverEndpoints). */
static void test_endpoints__service_deleted(void **state)
{
        (void)state;
        struct se_endpoints *ep = (struct se_endpoints *)se_object_new(SE_KIND_ENDPOINTS);
        ep->obj.meta.name = "web";
        ep->obj.meta.namespace = "ns";
        struct se_endpoints_input in = { .namespace = "ns", .name = "web" };
        struct se_endpoints_plan p;
        /* no label at all: a user's object */
        assert_int_equal(fx_ep_plan_both(&in, ep, NULL, &p), 0);
        assert_int_equal(p.action, SE_EP_DELETE);
        assert_null(p.obj);
        fx_kv(&ep->obj, &ep->obj.meta.labels, SE_ENDPOINTS_MANAGED_BY_LABEL, "endpoint-controller");
        assert_int_equal(fx_ep_plan_both(&in, ep, NULL, &p), 0);
        assert_int_equal(p.action, SE_EP_DELETE);
        /* another managed-by than ours */
        struct se_endpoints_opts o = { .endpoints_managed_by = "svcenv" };
        assert_int_equal(fx_ep_plan_both(&in, ep, &o, &p), 0);
        assert_int_equal(p.action, SE_EP_DELETE);
        fx_kv(&ep->obj, &ep->obj.meta.annotations, SE_LEADER_ANNOTATION, "{}");
        assert_int_equal(fx_ep_plan_both(&in, ep, NULL, &p), 0);
        assert_int_equal(p.action, SE_EP_SKIP);
        assert_int_equal(se_endpoints_plan(&in, NULL, NULL, &p), 0);
        assert_int_equal(p.action, SE_EP_SKIP);
        se_object_unref(&ep->obj);
}

/* No write when only the trigger time differs; foreign annotations kept on
 * update; targetRef.resourceVersion ignored (TestSyncEndpointsItemsPreexistingIdentical). */
static void test_endpoints__no_write_when_equal(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        fx_port(f->svc, "http", 80, "8080", SE_PROTO_TCP);
        add_pod(f, "a", "10.0.0.2", true);
        struct se_endpoints_input in = input(f);
        in.trigger_time_ns = 1764489600500000000LL; /* 2025-11-30T08:00:00.5Z */
        struct se_endpoints_plan first;
        assert_int_equal(se_endpoints_plan(&in, NULL, NULL, &first), 0);
        assert_int_equal(first.action, SE_EP_CREATE);
        struct se_endpoints *stored = first.obj;
        assert_string_equal(
                se_kvlist_get(&stored->obj.meta.annotations, SE_TRIGGER_TIME_ANNOTATION),
                "2025-11-30T08:00:00.5Z");
        stored->subsets[0].addresses[0].target_ref->resource_version = "42";
        fx_kv(&stored->obj, &stored->obj.meta.annotations, "example.com/note", "keep");
        stored->obj.meta.resource_version = "7";
        in.trigger_time_ns += 1000000000;
        struct se_endpoints_plan second;
        assert_int_equal(fx_ep_plan_both(&in, stored, NULL, &second), 0);
        assert_int_equal(second.action, SE_EP_UNCHANGED);
        assert_null(second.obj);
        /* a real change: pod becomes not ready */
        f->pods[0]->conditions[0].status = "False";
        in = input(f);
        assert_int_equal(fx_ep_plan_both(&in, stored, NULL, &second), 0);
        assert_int_equal(second.action, SE_EP_UPDATE);
        const struct se_meta *m = &second.obj->obj.meta;
        assert_string_equal(se_kvlist_get(&m->annotations, "example.com/note"), "keep");
        assert_null(se_kvlist_get(&m->annotations, SE_TRIGGER_TIME_ANNOTATION));
        assert_string_equal(m->resource_version, "7");
        assert_int_equal(second.obj->subsets[0].n_not_ready, 1);
        se_endpoints_plan_release(&second);
        se_endpoints_plan_release(&first);
        fx_free(f);
}

/* TestSyncEndpointsItemsPreexisting: an Endpoints object written by someone
 * else is adopted: subsets and labels replaced, other metadata kept. */
static void test_endpoints__adopts_preexisting(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        fx_port(f->svc, "http", 80, "8080", SE_PROTO_TCP);
        add_pod(f, "a", "10.0.0.2", true);
        struct se_endpoints *old = (struct se_endpoints *)se_object_new(SE_KIND_ENDPOINTS);
        struct se_object *o = &old->obj;
        o->meta.name = "web";
        o->meta.namespace = "ns";
        o->meta.resource_version = "1";
        fx_kv(o, &o->meta.labels, "foo", "bar");
        fx_kv(o, &o->meta.annotations, "example.com/a", "b");
        old->subsets = se_arena_alloc(&o->arena, sizeof(*old->subsets));
        old->n_subsets = 1;
        old->subsets[0].addresses = se_arena_alloc(&o->arena, sizeof(struct se_endpoint_address));
        old->subsets[0].addresses[0].ip = "6.7.8.9";
        old->subsets[0].n_addresses = 1;
        const struct se_endpoints *ep = plan(f, old);
        assert_int_equal(f->plan.action, SE_EP_UPDATE);
        assert_null(se_kvlist_get(&ep->obj.meta.labels, "foo"));
        assert_string_equal(se_kvlist_get(&ep->obj.meta.labels, "app"), "web");
        assert_string_equal(se_kvlist_get(&ep->obj.meta.annotations, "example.com/a"), "b");
        assert_string_equal(ep->subsets[0].addresses[0].ip, "10.0.0.2");
        assert_string_equal(ep->obj.meta.resource_version, "1");
        se_object_unref(o);
        fx_free(f);
}

/* Label rules (labelsCorrectForEndpoints) and the capacity annotation. */
static void test_endpoints__labels_and_capacity_force_write(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        fx_port(f->svc, "http", 80, "8080", SE_PROTO_TCP);
        add_pod(f, "a", "10.0.0.2", true);
        struct se_endpoints_input in = input(f);
        struct se_endpoints *want;
        assert_int_equal(se_endpoints_build(&in, NULL, &want), 0);
        assert_true(fx_ep_equal_both(want, want, f->svc, NULL));
        /* the headless label alone never forces a write */
        struct se_endpoints *have;
        assert_int_equal(se_endpoints_build(&in, NULL, &have), 0);
        struct se_kvlist l = { NULL, 0 };
        fx_kv(&have->obj, &l, "app", "web");
        fx_kv(&have->obj, &l, SE_ENDPOINTS_MANAGED_BY_LABEL, "endpoint-controller");
        fx_kv(&have->obj, &l, SE_HEADLESS_LABEL, "");
        have->obj.meta.labels = l;
        assert_true(fx_ep_equal_both(want, have, f->svc, NULL));
        /* missing managed-by (written by an older controller) */
        have->obj.meta.labels.n = 1;
        assert_false(fx_ep_equal_both(want, have, f->svc, NULL));
        /* a stale extra label */
        have->obj.meta.labels = (struct se_kvlist){ NULL, 0 };
        fx_kv(&have->obj, &have->obj.meta.labels, "app", "web");
        fx_kv(&have->obj, &have->obj.meta.labels, "old", "x");
        assert_false(fx_ep_equal_both(want, have, f->svc, NULL));
        /* another managed-by value */
        struct se_endpoints_opts o = { .endpoints_managed_by = "svcenv" };
        assert_false(fx_ep_equal_both(want, want, f->svc, &o));
        /* any over-capacity annotation */
        fx_kv(&want->obj, &want->obj.meta.annotations, SE_OVER_CAPACITY_ANNOTATION, "warning");
        assert_false(fx_ep_equal_both(want, want, f->svc, NULL));
        se_object_unref(&have->obj);
        se_object_unref(&want->obj);
        fx_free(f);
}

/* Subsets and ports compared as sets: an upstream object in another order
 * is not rewritten. */
static void test_endpoints__equal_ignores_subset_order(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        fx_port(f->svc, "a", 80, "80", SE_PROTO_TCP);
        fx_port(f->svc, "b", 81, "web", SE_PROTO_TCP);
        struct se_pod *p = add_pod(f, "p", "10.0.0.2", true);
        fx_container_port(p, false, NULL, "web", 8080, SE_PROTO_TCP);
        add_pod(f, "q", "10.0.0.3", true);
        struct se_endpoints_input in = input(f);
        struct se_endpoints *want, *have;
        assert_int_equal(se_endpoints_build(&in, NULL, &want), 0);
        assert_int_equal(se_endpoints_build(&in, NULL, &have), 0);
        assert_int_equal(have->n_subsets, 2);
        struct se_endpoint_subset t = have->subsets[0];
        have->subsets[0] = have->subsets[1];
        have->subsets[1] = t;
        assert_true(fx_ep_equal_both(want, have, f->svc, NULL));
        /* but addresses are compared in order (port a's subset has both) */
        struct se_endpoint_subset *both =
                have->subsets[0].n_addresses == 2 ? &have->subsets[0] : &have->subsets[1];
        assert_int_equal(both->n_addresses, 2);
        struct se_endpoint_address a = both->addresses[0];
        both->addresses[0] = both->addresses[1];
        both->addresses[1] = a;
        assert_false(fx_ep_equal_both(want, have, f->svc, NULL));
        se_object_unref(&have->obj);
        se_object_unref(&want->obj);
        fx_free(f);
}

/* TestSyncServiceOverCapacity: 997 ready + 4 not ready -> 997 + 3, annotated. */
static void test_endpoints__over_capacity(void **state)
{
        (void)state;
        struct fx *f = fx_new("10.0.0.1");
        fx_port(f->svc, NULL, 80, "80", SE_PROTO_TCP);
        char name[32], ip[32];
        for (int i = 0; i < 1001; i++) {
                snprintf(name, sizeof(name), "p%04d", i);
                snprintf(ip, sizeof(ip), "10.%d.%d.1", i / 256, i % 256);
                add_pod(f, name, ip, i < 997);
        }
        const struct se_endpoints *ep = plan(f, NULL);
        assert_int_equal(ep->subsets[0].n_addresses, 997);
        assert_int_equal(ep->subsets[0].n_not_ready, 3);
        assert_string_equal(se_kvlist_get(&ep->obj.meta.annotations, SE_OVER_CAPACITY_ANNOTATION),
                            "truncated");
        /* the stored truncated object never equals the computed one */
        struct se_endpoints *stored = (struct se_endpoints *)se_object_ref(&f->plan.obj->obj);
        plan(f, stored);
        assert_int_equal(f->plan.action, SE_EP_UPDATE);
        /* back at 1000: annotation removed */
        f->n--;
        se_object_unref(&f->pods[f->n]->obj);
        ep = plan(f, stored);
        assert_int_equal(f->plan.action, SE_EP_UPDATE);
        assert_null(se_kvlist_get(&ep->obj.meta.annotations, SE_OVER_CAPACITY_ANNOTATION));
        assert_int_equal(ep->subsets[0].n_addresses + ep->subsets[0].n_not_ready, 1000);
        se_object_unref(&stored->obj);
        fx_free(f);
}

/* TestTruncateEndpoints: per-subset proportional shares, ready first, the
 * subsets taken in the order they stand (here: subset s has port 1000+s). */
static int cmp_first_port(const void *a, const void *b)
{
        const struct se_endpoint_subset *x = a, *y = b;
        return (x->ports[0].port > y->ports[0].port) - (x->ports[0].port < y->ports[0].port);
}

/* n subsets: ready[s] ready then not_ready[s] not-ready pods whose named
 * port resolves to 1000+s. */
static struct fx *groups_fx(int n, const int *ready, const int *not_ready)
{
        struct fx *f = fx_new("10.0.0.1");
        fx_port(f->svc, "p", 80, "web", SE_PROTO_TCP);
        int i = 0;
        char name[32], ip[32];
        for (int s = 0; s < n; s++)
                for (int k = 0; k < ready[s] + not_ready[s]; k++, i++) {
                        snprintf(name, sizeof(name), "p%04d", i);
                        snprintf(ip, sizeof(ip), "10.%d.%d.%d", s, k / 256, k % 256);
                        struct se_pod *p = add_pod(f, name, ip, k < ready[s]);
                        fx_container_port(p, false, NULL, "web", 1000 + s, SE_PROTO_TCP);
                }
        return f;
}

static void truncate_case(const int *ready, const int *not_ready, const int *want_ready,
                          const int *want_not_ready)
{
        struct fx *f = groups_fx(5, ready, not_ready);
        struct se_endpoints_input in = input(f);
        struct se_endpoints *ep;
        assert_int_equal(se_endpoints_build(&in, NULL, &ep), 0);
        assert_int_equal(ep->n_subsets, 5);
        qsort(ep->subsets, ep->n_subsets, sizeof(*ep->subsets), cmp_first_port);
        assert_true(endpoints_truncate(ep));
        for (int s = 0; s < 5; s++) {
                assert_int_equal(ep->subsets[s].ports[0].port, 1000 + s);
                assert_int_equal(ep->subsets[s].n_addresses, want_ready[s]);
                assert_int_equal(ep->subsets[s].n_not_ready, want_not_ready[s]);
        }
        se_object_unref(&ep->obj);
        fx_free(f);
}

static void test_endpoints__truncate_proportionally(void **state)
{
        (void)state;
        static const int r1[] = { 90, 110, 50, 10, 20 }, n1[] = { 101, 200, 200, 201, 298 };
        static const int k1[] = { 73, 144, 144, 145, 214 };
        truncate_case(r1, n1, r1, k1);
        static const int r2[] = { 205, 400, 402, 400, 693 }, n2[] = { 100, 100, 100, 100, 100 };
        static const int k2[] = { 98, 191, 192, 191, 328 }, z[] = { 0, 0, 0, 0, 0 };
        truncate_case(r2, n2, k2, z);
}

static void hex16(const uint8_t *k, char *out)
{
        for (int i = 0; i < 16; i++)
                snprintf(out + 2 * i, 3, "%02x", k[i]);
}

/* Upstream orders ports and subsets by FNV-1a 128 of Go's spew dump
 * (pkg/api/v1/endpoints SortSubsets); these digests were printed by
 * upstream's own code (k8s.io/utils/dump.ForHash, hash/fnv) for the same
 * structs: nil and "" fields, a pointer set to "", spaces and quotes. */
static void test_endpoints__order_keys_are_upstreams(void **state)
{
        (void)state;
        uint8_t k[EP_ORDER_KEY_LEN];
        char hex[33];
        struct se_endpoint_port http = { "http", 8080, SE_PROTO_TCP, NULL };
        struct se_endpoint_port dns = { NULL, 53, SE_PROTO_UDP, "dns" };
        endpoints_port_order_key(&http, k);
        hex16(k, hex);
        assert_string_equal(hex, "25304a33da9e6ece350a4142a45f5b75");
        endpoints_port_order_key(&dns, k);
        hex16(k, hex);
        assert_string_equal(hex, "ca775226d03c199fe2fe45e1eccd4ab5");

        struct se_object_ref r1 = { "Pod", "ns", "p1", "u1", NULL };
        struct se_object_ref r2 = { "Pod", "ns", "p2", "u2", NULL };
        struct se_endpoint_address ready = { "10.0.0.1", NULL, "n1", &r1 };
        struct se_endpoint_address not_ready = { "10.0.0.2", "h", NULL, &r2 };
        struct se_endpoint_port ports[] = { http, dns };
        struct se_endpoint_subset s = { &ready, 1, &not_ready, 1, ports, 2 };
        endpoints_subset_order_key(&s, k);
        hex16(k, hex);
        assert_string_equal(hex, "bab5849e1b4a33b89a2c567529d17e65");

        struct se_object_ref r3 = { "Pod", "ns", "p 1\"x", "u1", NULL };
        struct se_endpoint_address odd = { "10.0.0.1", NULL, "", &r3 };
        struct se_endpoint_subset t = { &odd, 1, NULL, 0, NULL, 0 };
        endpoints_subset_order_key(&t, k);
        hex16(k, hex);
        assert_string_equal(hex, "855a6fab423acbbf87ea54050536b709");
}

struct kept {
        int port, ready, not_ready;
        const char *first, *last; /* first and last ready IP kept */
};

static void truncated_as(int n, const int *ready, const int *not_ready, const struct kept *want)
{
        struct fx *f = groups_fx(n, ready, not_ready);
        const struct se_endpoints *ep = plan(f, NULL);
        assert_string_equal(se_kvlist_get(&ep->obj.meta.annotations, SE_OVER_CAPACITY_ANNOTATION),
                            "truncated");
        assert_int_equal(ep->n_subsets, n);
        for (int i = 0; i < n; i++) {
                const struct se_endpoint_subset *s = &ep->subsets[i];
                assert_int_equal(s->ports[0].port, want[i].port);
                assert_int_equal(s->n_addresses, want[i].ready);
                assert_int_equal(s->n_not_ready, want[i].not_ready);
                assert_string_equal(s->addresses[0].ip, want[i].first);
                assert_string_equal(s->addresses[s->n_addresses - 1].ip, want[i].last);
        }
        fx_free(f);
}

/* Over 1000 addresses in several subsets, which addresses survive depends
 * on the subsets' order (each gets its share rounded up while budget is
 * left). Expected: upstream's RepackSubsets and truncateEndpoints run on
 * the same pods (order, counts, first and last address kept). */
static void test_endpoints__truncate_in_upstream_order(void **state)
{
        (void)state;
        static const int r1[] = { 600, 500, 400 }, n1[] = { 0, 0, 0 };
        static const struct kept k1[] = {
                { 1002, 267, 0, "10.2.0.0", "10.2.1.107" },
                { 1000, 400, 0, "10.0.0.0", "10.0.1.227" },
                { 1001, 333, 0, "10.1.0.0", "10.1.1.167" },
        };
        truncated_as(3, r1, n1, k1);
        static const int r2[] = { 100, 50, 150 }, n2[] = { 300, 500, 400 };
        static const struct kept k2[] = {
                { 1001, 50, 292, "10.1.0.0", "10.1.0.9" },
                { 1002, 150, 234, "10.2.0.0", "10.2.0.99" },
                { 1000, 100, 174, "10.0.0.0", "10.0.0.99" },
        };
        truncated_as(3, r2, n2, k2);
        static const int r3[] = { 90, 110, 50, 10, 20 }, n3[] = { 101, 200, 200, 201, 298 };
        static const struct kept k3[] = {
                { 1000, 90, 73, "10.0.0.0", "10.0.0.9" },
                { 1004, 20, 215, "10.4.0.0", "10.4.0.9" },
                { 1002, 50, 144, "10.2.0.0", "10.2.0.9" },
                { 1003, 10, 145, "10.3.0.0", "10.3.0.9" },
                { 1001, 110, 143, "10.1.0.0", "10.1.0.99" },
        };
        truncated_as(5, r3, n3, k3);
}

static void test_endpoints__trigger_time_format(void **state)
{
        (void)state;
        char buf[48];
        se_endpoints_format_time(1764489600000000000LL, buf, sizeof(buf));
        assert_string_equal(buf, "2025-11-30T08:00:00Z");
        se_endpoints_format_time(1764489600123456000LL, buf, sizeof(buf));
        assert_string_equal(buf, "2025-11-30T08:00:00.123456Z");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_endpoints__ready_and_not_ready_pods),
                cmocka_unit_test(test_endpoints__publish_not_ready_addresses),
                cmocka_unit_test(test_endpoints__pod_filter),
                cmocka_unit_test(test_endpoints__find_port),
                cmocka_unit_test(test_endpoints__named_port_missing_on_some_pods),
                cmocka_unit_test(test_endpoints__repack_groups_ports),
                cmocka_unit_test(test_endpoints__address_order),
                cmocka_unit_test(test_endpoints__repack_duplicate_address),
                cmocka_unit_test(test_endpoints__primary_family),
                cmocka_unit_test(test_endpoints__headless_hostname),
                cmocka_unit_test(test_endpoints__headless_without_ports),
                cmocka_unit_test(test_endpoints__services_left_alone),
                cmocka_unit_test(test_endpoints__service_deleted),
                cmocka_unit_test(test_endpoints__no_write_when_equal),
                cmocka_unit_test(test_endpoints__adopts_preexisting),
                cmocka_unit_test(test_endpoints__labels_and_capacity_force_write),
                cmocka_unit_test(test_endpoints__equal_ignores_subset_order),
                cmocka_unit_test(test_endpoints__over_capacity),
                cmocka_unit_test(test_endpoints__truncate_proportionally),
                cmocka_unit_test(test_endpoints__order_keys_are_upstreams),
                cmocka_unit_test(test_endpoints__truncate_in_upstream_order),
                cmocka_unit_test(test_endpoints__trigger_time_format),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

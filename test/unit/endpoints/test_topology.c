/* The topology cache (topology-mode Auto hints): cases translated from
 * upstream's topologycache_test.go, utils_test.go and sliceinfo_test.go
 * (k8s.io/endpointslice v0.36), plus the cache's bookkeeping. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <svcenv/parse.h>
#include <svcenv/topology.h>

#include "../../../pkg/endpoints/topology_internal.h"
#include "fixtures.h"
#include "slim_slices.h"

/* Set by the second run of each test: unchanged slices are given in slim
 * form (SE_DECODE_SLIM_SLICES), as the controller's cache holds them. */
static bool slim_mode;

/* ---- slices written as text ----
 * One token per endpoint, separated by spaces: the zone letter ("a" is
 * zone-a, "-" none), the Ready condition (T, F, or U for unset), and
 * optionally ">x" for a hint for zone-x (">" alone: no hint). */
static struct se_endpoint_slice *mk_slice(const char *spec)
{
        struct se_endpoint_slice *s =
                (struct se_endpoint_slice *)se_object_new(SE_KIND_ENDPOINT_SLICE);
        struct se_object *o = &s->obj;
        s->address_type = "IPv4";
        o->meta.name = "s";
        o->meta.namespace = "ns";
        s->endpoints = se_arena_array(&o->arena, 64, sizeof(*s->endpoints));
        char buf[512];
        snprintf(buf, sizeof(buf), "%s", spec);
        char *save = NULL;
        for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
                struct se_slice_endpoint *e = &s->endpoints[s->n_endpoints++];
                char z[16];
                /* an address, for the slim form: the hint code reads none */
                snprintf(z, sizeof(z), "10.0.0.%u", s->n_endpoints);
                e->addresses.v = se_arena_array(&o->arena, 1, sizeof(char *));
                e->addresses.v[0] = fx_str(o, z);
                e->addresses.n = 1;
                if (t[0] != '-') {
                        snprintf(z, sizeof(z), "zone-%c", t[0]);
                        assert_int_equal(se_slice_endpoint_set_zone(e, &o->arena, fx_str(o, z)), 0);
                }
                e->ready = t[1] == 'T' ? SE_TRUE : t[1] == 'F' ? SE_FALSE : SE_UNSET;
                if (t[2] == '>' && t[3]) {
                        snprintf(z, sizeof(z), "zone-%c", t[3]);
                        const char **zv = se_arena_array(&o->arena, 1, sizeof(char *));
                        zv[0] = fx_str(o, z);
                        assert_int_equal(se_slice_endpoint_set_hints(e, &o->arena,
                                                                     (struct se_strs){ zv, 1 },
                                                                     (struct se_strs){ NULL, 0 }),
                                         0);
                }
        }
        return s;
}

/* The hints of slices as text: per slice the hint letter of each endpoint
 * ("-": none), slices separated by "|". */
static void render(struct se_endpoint_slice *const *v, uint32_t n, char *buf, size_t size)
{
        size_t len = 0;
        buf[0] = 0;
        for (uint32_t i = 0; i < n; i++) {
                if (i)
                        len += (size_t)snprintf(buf + len, size - len, "|");
                for (uint32_t k = 0; k < v[i]->n_endpoints; k++) {
                        const struct se_slice_endpoint *e = &v[i]->endpoints[k];
                        char c = se_slice_endpoint_hint_zones(e)->n ?
                                         se_slice_endpoint_hint_zones(e)->v[0][5] :
                                         '-';
                        assert_true(se_slice_endpoint_hint_zones(e)->n <= 1);
                        assert_int_equal(se_slice_endpoint_hint_nodes(e)->n, 0);
                        len += (size_t)snprintf(buf + len, size - len, "%c", c);
                }
        }
}

struct topo_fx {
        struct se_topology_cache *cache;
        struct topo_slices si;
        struct se_slices_event *events;
        uint32_t n_events;
        struct se_endpoint_slice *all[64]; /* everything made, for cleanup */
        size_t n_all;
        const struct se_endpoint_slice *unchanged[16];
        /* slim_mode: each unchanged slim slice and the full one it stands for */
        const struct se_endpoint_slice *slim[16], *full[16];
        size_t n_slim;
};

static int copy_slice(void *data, const struct se_endpoint_slice *src,
                      struct se_endpoint_slice **ret)
{
        struct topo_fx *f = data;
        for (size_t i = 0; src->slim && i < f->n_slim; i++)
                if (f->slim[i] == src)
                        src = f->full[i]; /* as the planner copies from its work item */
        assert_false(src->slim);
        struct se_endpoint_slice *c = mk_slice("");
        c->endpoints = se_arena_array(&c->obj.arena, src->n_endpoints + 1, sizeof(*c->endpoints));
        if (src->n_endpoints)
                memcpy(c->endpoints, src->endpoints, src->n_endpoints * sizeof(*c->endpoints));
        c->n_endpoints = src->n_endpoints;
        f->all[f->n_all++] = c;
        se_object_ref(&c->obj); /* one for the fixture, one for si */
        *ret = c;
        return 0;
}

static struct topo_fx *tfx_new(const char *const *zones, const double *ratios, size_t n)
{
        struct topo_fx *f = calloc(1, sizeof(*f));
        f->cache = se_topology_cache_new();
        assert_non_null(f->cache);
        if (zones)
                assert_int_equal(endpoints_topo_set_ratios(f->cache, zones, ratios, n), 0);
        f->si = (struct topo_slices){ .key = "ns/svc",
                                      .type = "IPv4",
                                      .copy = copy_slice,
                                      .copy_data = f,
                                      .events = &f->events,
                                      .n_events = &f->n_events };
        f->si.create = calloc(16, sizeof(*f->si.create));
        f->si.unchanged = f->unchanged;
        return f;
}

static void tfx_add(struct topo_fx *f, int which, const char *spec)
{
        struct se_endpoint_slice *s = mk_slice(spec);
        f->all[f->n_all++] = s;
        if (which == 0) {
                f->si.create[f->si.n_create++] = s;
        } else if (which == 1) {
                f->si.update = realloc(f->si.update, (f->si.n_update + 1) * sizeof(s));
                se_object_ref(&s->obj); /* si's reference, dropped on reset */
                f->si.update[f->si.n_update++] = s;
        } else if (slim_mode) {
                struct se_endpoint_slice *sl = slim_slice_of(s);
                f->all[f->n_all++] = sl;
                f->slim[f->n_slim] = sl;
                f->full[f->n_slim++] = s;
                f->unchanged[f->si.n_unchanged++] = sl;
        } else {
                f->unchanged[f->si.n_unchanged++] = s;
        }
}

static void tfx_reset_slices(struct topo_fx *f)
{
        for (uint32_t i = 0; i < f->si.n_update; i++)
                se_object_unref(&f->si.update[i]->obj);
        free(f->si.update);
        f->si.update = NULL;
        f->si.n_create = f->si.n_update = f->si.n_unchanged = 0;
        for (uint32_t i = 0; i < f->n_events; i++)
                free(f->events[i].message);
        free(f->events);
        f->events = NULL;
        f->n_events = 0;
}

static void tfx_free(struct topo_fx *f)
{
        tfx_reset_slices(f);
        for (size_t i = 0; i < f->n_all; i++)
                se_object_unref(&f->all[i]->obj);
        free(f->si.create);
        se_topology_cache_free(f->cache);
        free(f);
}

static void expect_hints(struct topo_fx *f, const char *create, const char *update)
{
        char buf[256];
        render(f->si.create, f->si.n_create, buf, sizeof(buf));
        assert_string_equal(buf, create);
        render(f->si.update, f->si.n_update, buf, sizeof(buf));
        assert_string_equal(buf, update);
}

static void expect_event(struct topo_fx *f, uint32_t i, bool warning, const char *reason,
                         const char *message)
{
        assert_true(i < f->n_events);
        assert_int_equal(f->events[i].warning, warning);
        assert_string_equal(f->events[i].reason, reason);
        assert_string_equal(f->events[i].message, message);
}

static void expect_recorded(struct topo_fx *f, const char *want)
{
        char buf[256];
        bool found = endpoints_topo_recorded(f->cache, "ns/svc", "IPv4", buf, sizeof(buf));
        if (!want) {
                assert_false(found);
                assert_false(se_topology_cache_has_hints(f->cache, "ns/svc"));
                return;
        }
        assert_true(found);
        assert_true(se_topology_cache_has_hints(f->cache, "ns/svc"));
        assert_string_equal(buf, want);
}

static const char *const ZAB[] = { "zone-a", "zone-b" };
static const char *const ZABC[] = { "zone-a", "zone-b", "zone-c" };

/* TestAddHints "empty" and "slice to create, no zone ratios" */
static void test_topology__add_hints_no_ratios(void **state)
{
        (void)state;
        struct topo_fx *f = tfx_new(NULL, NULL, 0);
        assert_int_equal(endpoints_topo_add_hints(f->cache, &f->si), 0);
        assert_int_equal(f->n_events, 1);
        expect_event(f, 0, true, "TopologyAwareHintsDisabled",
                     "Insufficient Node information: allocatable CPU or zone not specified on "
                     "one or more nodes, addressType: IPv4");
        expect_recorded(f, NULL);
        tfx_reset_slices(f);
        tfx_add(f, 0, "aT");
        assert_int_equal(endpoints_topo_add_hints(f->cache, &f->si), 0);
        expect_hints(f, "-", "");
        assert_int_equal(f->n_events, 1);
        expect_recorded(f, NULL);
        tfx_free(f);
}

/* "slice to create with 2 endpoints, zone ratios require 3" */
static void test_topology__add_hints_too_few_endpoints(void **state)
{
        (void)state;
        const double r[] = { 0.3, 0.4, 0.3 };
        struct topo_fx *f = tfx_new(ZABC, r, 3);
        tfx_add(f, 0, "aT bT");
        assert_int_equal(endpoints_topo_add_hints(f->cache, &f->si), 0);
        expect_hints(f, "--", "");
        assert_int_equal(f->n_events, 1);
        expect_event(f, 0, true, "TopologyAwareHintsDisabled",
                     "Insufficient number of endpoints (2 endpoints, 3 zones), addressType: IPv4");
        expect_recorded(f, NULL);
        tfx_free(f);
}

/* "slice to create with 2 endpoints, zone ratios only require 2", and the
 * same with an unready and an unknown endpoint (sliceinfo_test's count of
 * ready endpoints: only Ready=true counts) */
static void test_topology__add_hints_two_zones(void **state)
{
        (void)state;
        const double r[] = { 0.45, 0.55 };
        struct topo_fx *f = tfx_new(ZAB, r, 2);
        tfx_add(f, 0, "aT bT");
        assert_int_equal(endpoints_topo_add_hints(f->cache, &f->si), 0);
        expect_hints(f, "ab", "");
        assert_int_equal(f->n_events, 1);
        expect_event(f, 0, false, "TopologyAwareHintsEnabled",
                     "Topology Aware Hints has been enabled, addressType: IPv4");
        expect_recorded(f, "zone-a=1,zone-b=1");
        /* enabled already: no second event */
        tfx_reset_slices(f);
        tfx_add(f, 0, "aT bT bF bU");
        assert_int_equal(endpoints_topo_add_hints(f->cache, &f->si), 0);
        expect_hints(f, "ab--", "");
        assert_int_equal(f->n_events, 0);
        expect_recorded(f, "zone-a=1,zone-b=1");
        tfx_free(f);

        /* an unready or unknown endpoint does not count: 1 ready < 2 zones */
        f = tfx_new(ZAB, r, 2);
        tfx_add(f, 0, "aT bF");
        tfx_add(f, 1, "bU");
        tfx_add(f, 2, "aF>a");
        assert_int_equal(endpoints_topo_add_hints(f->cache, &f->si), 0);
        expect_event(f, 0, true, "TopologyAwareHintsDisabled",
                     "Insufficient number of endpoints (1 endpoints, 2 zones), addressType: IPv4");
        /* the unchanged slice had a hint: it is rewritten without */
        expect_hints(f, "--", "-|-");
        assert_int_equal(f->si.n_unchanged, 0);
        tfx_free(f);
}

/* "slices to create and update within 3 zone threshold" */
static void test_topology__add_hints_three_zones(void **state)
{
        (void)state;
        const double r[] = { 0.35, 0.35, 0.30 };
        struct topo_fx *f = tfx_new(ZABC, r, 3);
        tfx_add(f, 0, "aT bT");
        tfx_add(f, 0, "cT cT aT");
        tfx_add(f, 1, "aT aT");
        tfx_add(f, 1, "bT cT aT");
        assert_int_equal(endpoints_topo_add_hints(f->cache, &f->si), 0);
        expect_hints(f, "bb|cca", "aa|bca");
        assert_int_equal(f->n_events, 1);
        expect_event(f, 0, false, "TopologyAwareHintsEnabled",
                     "Topology Aware Hints has been enabled, addressType: IPv4");
        expect_recorded(f, "zone-a=4,zone-b=3,zone-c=3");
        tfx_free(f);
}

/* The other refusals: one zone only, the minimum over the threshold, an
 * endpoint without zone (hints already given are taken back) */
static void test_topology__add_hints_refused(void **state)
{
        (void)state;
        const double one[] = { 1.0 };
        struct topo_fx *f = tfx_new(ZAB, one, 1);
        tfx_add(f, 0, "aT aT");
        assert_int_equal(endpoints_topo_add_hints(f->cache, &f->si), 0);
        expect_event(f, 0, true, "TopologyAwareHintsDisabled",
                     "Nodes only ready in one zone, addressType: IPv4");
        tfx_free(f);

        /* 6 endpoints over .5/.25/.25: minimums 3+2+2 > 6 */
        const double r[] = { 0.5, 0.25, 0.25 };
        f = tfx_new(ZABC, r, 3);
        tfx_add(f, 0, "aT aT aT aT aT aT");
        assert_int_equal(endpoints_topo_add_hints(f->cache, &f->si), 0);
        expect_hints(f, "------", "");
        expect_event(f, 0, true, "TopologyAwareHintsDisabled",
                     "Unable to allocate minimum required endpoints to each zone without "
                     "exceeding overload threshold (6 endpoints, 3 zones), addressType: IPv4");
        tfx_free(f);

        /* the 20 % threshold: 5 endpoints over two equal zones need 3 each
         * (ceil(2.5 / 1.2)), 6 do not exceed it */
        const double r2[] = { 0.5, 0.5 };
        f = tfx_new(ZAB, r2, 2);
        tfx_add(f, 0, "aT aT aT bT bT");
        assert_int_equal(endpoints_topo_add_hints(f->cache, &f->si), 0);
        expect_hints(f, "-----", "");
        expect_event(f, 0, true, "TopologyAwareHintsDisabled",
                     "Unable to allocate minimum required endpoints to each zone without "
                     "exceeding overload threshold (5 endpoints, 2 zones), addressType: IPv4");
        tfx_reset_slices(f);
        tfx_add(f, 0, "aT aT aT aT bT bT");
        assert_int_equal(endpoints_topo_add_hints(f->cache, &f->si), 0);
        expect_hints(f, "baaabb", "");
        expect_recorded(f, "zone-a=3,zone-b=3");
        tfx_free(f);

        f = tfx_new(ZAB, r2, 2);
        tfx_add(f, 0, "aT bT");
        assert_int_equal(endpoints_topo_add_hints(f->cache, &f->si), 0);
        expect_recorded(f, "zone-a=1,zone-b=1");
        tfx_reset_slices(f);
        tfx_add(f, 0, "aT bT -T");
        tfx_add(f, 2, "aT>a bF>b");
        assert_int_equal(endpoints_topo_add_hints(f->cache, &f->si), 0);
        assert_int_equal(f->n_events, 1);
        expect_event(f, 0, true, "TopologyAwareHintsDisabled",
                     "One or more endpoints do not have a zone specified, addressType: IPv4");
        expect_hints(f, "---", "--");
        expect_recorded(f, NULL);
        tfx_free(f);
}

/* Unchanged slices whose hints still fit stay and count; others are
 * rewritten (upstream getAllocatedHintsByZone) */
static void test_topology__add_hints_unchanged(void **state)
{
        (void)state;
        const double r[] = { 0.5, 0.5 };
        struct topo_fx *f = tfx_new(ZAB, r, 2);
        tfx_add(f, 2, "aT>a bT>b aF");
        tfx_add(f, 0, "aT bT");
        assert_int_equal(endpoints_topo_add_hints(f->cache, &f->si), 0);
        expect_hints(f, "ab", "");
        assert_int_equal(f->si.n_unchanged, 1);
        expect_recorded(f, "zone-a=2,zone-b=2");
        tfx_reset_slices(f);

        /* a hint for a zone without allocation: rewritten */
        tfx_add(f, 2, "aT>a bT>c");
        tfx_add(f, 2, "aT>a bT>b");
        const struct se_endpoint_slice *keep = f->all[f->n_all - 1];
        assert_int_equal(endpoints_topo_add_hints(f->cache, &f->si), 0);
        assert_int_equal(f->si.n_unchanged, 1);
        assert_ptr_equal(f->si.unchanged[0], keep);
        expect_hints(f, "", "ab");
        tfx_reset_slices(f);

        /* all in zone-a: the unchanged slice's 3 zone-a hints exceed its
         * maximum (2 + 4 - 4 = 2), so it is rewritten, and zone-a gives 2 to
         * zone-b: the first ones met, created slices first */
        tfx_add(f, 2, "aT>a aT>a aT>a");
        tfx_add(f, 0, "aT");
        assert_int_equal(endpoints_topo_add_hints(f->cache, &f->si), 0);
        assert_int_equal(f->si.n_unchanged, 0);
        expect_hints(f, "b", "baa");
        expect_recorded(f, "zone-a=2,zone-b=2");
        tfx_free(f);
}

/* TestSetNodes */
struct node_spec {
        const char *zone;
        const char *cpu;
        bool ready;
        bool control_plane;
};

static struct se_node *mk_node(const struct node_spec *s)
{
        struct se_node *n = (struct se_node *)se_object_new(SE_KIND_NODE);
        struct se_object *o = &n->obj;
        o->meta.name = fx_str(o, "n");
        o->meta.namespace = "";
        if (s->control_plane)
                fx_kv(o, &o->meta.labels, "node-role.kubernetes.io/control-plane", "");
        if (s->zone)
                fx_kv(o, &o->meta.labels, SE_TOPOLOGY_ZONE_LABEL, s->zone);
        n->ready = s->ready ? SE_TRUE : SE_FALSE;
        if (s->cpu)
                assert_int_equal(se_parse_quantity(s->cpu, 9, &n->allocatable_cpu_nanos), 0);
        return n;
}

static void set_nodes(struct se_topology_cache *t, const struct node_spec *specs, size_t n)
{
        struct se_node *nodes[16] = { 0 };
        for (size_t i = 0; i < n; i++)
                nodes[i] = mk_node(&specs[i]);
        assert_int_equal(se_topology_cache_set_nodes(t, (const struct se_node *const *)nodes, n),
                         0);
        for (size_t i = 0; i < n; i++)
                se_object_unref(&nodes[i]->obj);
}

static void test_topology__set_nodes(void **state)
{
        (void)state;
        static const struct {
                struct node_spec nodes[8];
                size_t n;
                double a, b, c; /* expected shares; all 0: none */
        } cases[] = {
                { .n = 0 }, /* empty */
                { { { "zone-a", "1000m", true, false } }, 1, 0, 0, 0 }, /* single node */
                { { { "zone-a", "1000m", true, false }, { "zone-a", "1000m", true, false } },
                  2,
                  0,
                  0,
                  0 }, /* single zone */
                { { { "zone-a", "1000m", true, false }, { "zone-b", "1000m", true, false } },
                  2,
                  0.5,
                  0.5,
                  0 }, /* 2 zones */
                { { { "zone-a", "1000m", false, false }, { "zone-b", "1000m", true, false } },
                  2,
                  0,
                  0,
                  0 }, /* unready node in 1, ready node in 1 */
                { { { "zone-a", "1000m", true, false }, { "zone-b", "1000m", true, true } },
                  2,
                  0,
                  0,
                  0 }, /* control plane node in 1, ready node in 1 */
                { { { "zone-a", "1000m", true, false },
                    { "zone-b", "1000m", true, false },
                    { "zone-b", "1000m", false, false } },
                  3,
                  0.5,
                  0.5,
                  0 }, /* unready node in 1, ready node in 2 */
                { { { "zone-a", "1000m", true, false },
                    { "zone-b", "1000m", true, false },
                    { "zone-b", "1000m", true, true } },
                  3,
                  0.5,
                  0.5,
                  0 }, /* control plane node in 1, ready node in 2 */
                { { { "zone-a", "1000m", true, false },
                    { "zone-a", "1000m", true, false },
                    { "zone-a", "1000m", true, false },
                    { "zone-a", "2000m", true, false },
                    { "zone-b", "3000m", true, false },
                    { "zone-b", "1500m", true, false },
                    { "zone-c", "500m", true, false } },
                  7,
                  0.5,
                  0.45,
                  0.05 }, /* 3 zones, 4 nodes in 1, 2 nodes in 1, 1 node in 1 */
                /* svcenv's: a counted node without zone or CPU voids the shares */
                { { { "zone-a", "1", true, false },
                    { "zone-b", "1", true, false },
                    { NULL, "1", true, false } },
                  3,
                  0,
                  0,
                  0 },
                { { { "zone-a", "1", true, false },
                    { "zone-b", "1", true, false },
                    { "zone-b", "0", true, false } },
                  3,
                  0,
                  0,
                  0 },
                { { { "zone-a", "1", true, false },
                    { "zone-b", "1", true, false },
                    { "zone-b", NULL, true, false } },
                  3,
                  0,
                  0,
                  0 },
                /* ... unless it is not ready or a control-plane node */
                { { { "zone-a", "1", true, false },
                    { "zone-b", "3", true, false },
                    { NULL, NULL, false, false },
                    { NULL, NULL, true, true } },
                  4,
                  0.25,
                  0.75,
                  0 },
                /* sub-millicore values sum before rounding, as Quantity.Add */
                { { { "zone-a", "500u", true, false },
                    { "zone-a", "500u", true, false },
                    { "zone-b", "3m", true, false } },
                  3,
                  0.25,
                  0.75,
                  0 },
        };
        for (size_t i = 0; i < SE_ARRAY_SIZE(cases); i++) {
                struct se_topology_cache *t = se_topology_cache_new();
                /* start from shares, to see them replaced */
                const double r[] = { 0.5, 0.5 };
                assert_int_equal(endpoints_topo_set_ratios(t, ZAB, r, 2), 0);
                set_nodes(t, cases[i].nodes, cases[i].n);
                size_t zones = (cases[i].a > 0) + (cases[i].b > 0) + (cases[i].c > 0);
                print_message("case %zu\n", i);
                assert_int_equal(se_topology_cache_zones(t), zones);
                assert_true(se_topology_cache_ratio(t, "zone-a") == cases[i].a);
                assert_true(se_topology_cache_ratio(t, "zone-b") == cases[i].b);
                assert_true(se_topology_cache_ratio(t, "zone-c") == cases[i].c);
                se_topology_cache_free(t);
        }
}

/* Test_redistributeHints */
static void test_topology__redistribute(void **state)
{
        (void)state;
        struct topo_fx *f = tfx_new(NULL, NULL, 0);
        struct ztab zt = { 0 };
        /* empty */
        assert_int_equal(endpoints_topo_redistribute(&f->si, &zt), 0);
        assert_int_equal(zt.n, 0);
        /* single endpoint */
        tfx_add(f, 0, "aT>a");
        endpoints_topo_zone_get(&zt, "zone-a")->give = 1;
        endpoints_topo_zone_get(&zt, "zone-b")->recv = 1;
        assert_int_equal(endpoints_topo_redistribute(&f->si, &zt), 0);
        assert_int_equal(endpoints_topo_zone_get(&zt, "zone-a")->redist, -1);
        assert_int_equal(endpoints_topo_zone_get(&zt, "zone-b")->redist, 1);
        expect_hints(f, "b", "");
        free(zt.v);
        zt = (struct ztab){ 0 };
        tfx_reset_slices(f);
        /* endpoints from 1 zone redistributed to 2 other zones */
        tfx_add(f, 0, "aT>a aT>a aT>a");
        endpoints_topo_zone_get(&zt, "zone-a")->give = 2;
        endpoints_topo_zone_get(&zt, "zone-b")->recv = 1;
        endpoints_topo_zone_get(&zt, "zone-c")->recv = 1;
        assert_int_equal(endpoints_topo_redistribute(&f->si, &zt), 0);
        assert_int_equal(endpoints_topo_zone_get(&zt, "zone-a")->redist, -2);
        assert_int_equal(endpoints_topo_zone_get(&zt, "zone-b")->redist, 1);
        assert_int_equal(endpoints_topo_zone_get(&zt, "zone-c")->redist, 1);
        /* zones taken by name where upstream takes any */
        expect_hints(f, "bca", "");
        free(zt.v);
        tfx_free(f);
}

/* Test_getGivingAndReceivingZones */
static void test_topology__giving_receiving(void **state)
{
        (void)state;
        static const struct {
                double desired[3]; /* zone-a..c; NAN: no allocation */
                long hints[3];
                bool has[3];
                long give[3], recv[3];
        } cases[] = {
                { { 0 }, { 0 }, { 0 }, { 0 }, { 0 } }, /* empty: see below */
                /* simple allocation with no need for rebalancing */
                { { 1.2, 1.1, 1.0 }, { 1, 1, 1 }, { 1, 1, 1 }, { 0 }, { 0 } },
                /* preference for same zone even when giving an extra endpoint would
                 * result in slightly better distribution */
                { { 5.1, 5.1, 5.8 }, { 16, 0, 0 }, { 1, 0, 0 }, { 10, 0, 0 }, { 0, 5, 5 } },
                /* when 2 zones need < 1 endpoint, give to zone that needs endpoint most */
                { { 5.0, 5.6, 5.4 }, { 16, 0, 0 }, { 1, 0, 0 }, { 11, 0, 0 }, { 0, 6, 5 } },
                /* when 2 zones have extra endpoints, give from zone with most extra */
                { { 5.0, 5.6, 5.4 }, { 0, 8, 8 }, { 0, 1, 1 }, { 0, 2, 3 }, { 5, 0, 0 } },
                /* unexpected data: more allocated than allocations */
                { { 5.0, 5.0, 5.0 }, { 6, 6, 6 }, { 1, 1, 1 }, { 0 }, { 0 } },
                /* negative allocations */
                { { -5.0, -5.0, -5.0 }, { 6, 6, 6 }, { 1, 1, 1 }, { 0 }, { 0 } },
                /* negative allocated */
                { { 5.0, 5.0, 5.0 }, { -4, -3, -2 }, { 1, 1, 1 }, { 0 }, { 0 } },
                /* negative for 1 zone */
                { { 5.0, 5.0, 5.0 }, { -40, 20, 20 }, { 1, 1, 1 }, { 0, 15, 15 }, { 30, 0, 0 } },
                /* svcenv's: on a tie the first zone by name gives (upstream: any) */
                { { 3.0, 1.5, 1.5 }, { 2, 2, 2 }, { 1, 1, 1 }, { 0, 1, 0 }, { 1, 0, 0 } },
        };
        struct ztab zt = { 0 };
        endpoints_topo_giving_receiving(&zt); /* empty */
        assert_int_equal(zt.n, 0);
        for (size_t i = 1; i < SE_ARRAY_SIZE(cases); i++) {
                zt = (struct ztab){ 0 };
                for (int z = 0; z < 3; z++) {
                        struct zrow *r = endpoints_topo_zone_get(&zt, ZABC[z]);
                        r->alloc = true;
                        r->desired = cases[i].desired[z];
                        r->has_hints = cases[i].has[z];
                        r->hints = cases[i].hints[z];
                }
                endpoints_topo_giving_receiving(&zt);
                print_message("case %zu\n", i);
                for (int z = 0; z < 3; z++) {
                        assert_int_equal(zt.v[z].give, cases[i].give[z]);
                        assert_int_equal(zt.v[z].recv, cases[i].recv[z]);
                }
                free(zt.v);
        }
}

/* Test_getHintsByZone */
static void test_topology__hints_fit(void **state)
{
        (void)state;
        static const struct {
                const char *slice;
                long max[3]; /* zone-a..c maximum; -1: no allocation */
                long allocated[3];
                bool fits;
                long want[3];
        } cases[] = {
                { "", { -1, -1, -1 }, { 0 }, true, { 0 } }, /* empty */
                { "aT>a", { 3, -1, -1 }, { 1, 0, 0 }, true, { 1, 0, 0 } }, /* single zone hint */
                /* single zone hint with 1 unready endpoint and 1 unknown endpoint */
                { "aT>a aF>a aU>a", { 3, -1, -1 }, { 1, 0, 0 }, true, { 1, 0, 0 } },
                /* multiple zone hints */
                { "aT>a aT>b bT>b", { 3, 3, 3 }, { 1, 1, 1 }, true, { 1, 2, 0 } },
                /* invalid by zones that no longer requires any allocations */
                { "aT>d", { 3, -1, -1 }, { 1, 1, 1 }, false, { 0 } },
                /* invalid by endpoints with nil hints (and with no hints) */
                { "aT>", { 3, -1, -1 }, { 0 }, false, { 0 } },
                /* invalid by hints that would make minimum allocations impossible */
                { "aT>a aT>a", { 2, -1, -1 }, { 1, 0, 0 }, false, { 0 } },
        };
        for (size_t i = 0; i < SE_ARRAY_SIZE(cases); i++) {
                struct ztab zt = { 0 };
                for (int z = 0; z < 3; z++) {
                        struct zrow *r = endpoints_topo_zone_get(&zt, ZABC[z]);
                        r->alloc = cases[i].max[z] >= 0;
                        r->maximum = cases[i].max[z];
                        r->has_hints = true;
                        r->hints = cases[i].allocated[z];
                }
                struct se_endpoint_slice *s = mk_slice(cases[i].slice);
                if (slim_mode) {
                        struct se_endpoint_slice *sl = slim_slice_of(s);
                        se_object_unref(&s->obj);
                        s = sl;
                }
                assert_int_equal(endpoints_topo_hints_fit(s, &zt), cases[i].fits);
                for (int z = 0; cases[i].fits && z < 3; z++)
                        assert_int_equal(zt.v[z].scratch, cases[i].want[z]);
                se_object_unref(&s->obj);
                free(zt.v);
        }
}

/* GetOverloadedServices after a node change; RemoveHints */
static void test_topology__overloaded(void **state)
{
        (void)state;
        const double r[] = { 0.5, 0.5 };
        struct topo_fx *f = tfx_new(ZAB, r, 2);
        tfx_add(f, 0, "aT aT bT bT");
        assert_int_equal(endpoints_topo_add_hints(f->cache, &f->si), 0);
        expect_recorded(f, "zone-a=2,zone-b=2");
        struct se_strv keys = SE_STRV_INIT;
        assert_int_equal(se_topology_cache_overloaded(f->cache, &keys), 0);
        assert_int_equal(keys.n, 0);
        /* zone-b now has 3/4 of the CPU: ceil(4 * .75 / 1.2) = 3 > 2 */
        const struct node_spec n1[] = { { "zone-a", "1", true, false },
                                        { "zone-b", "3", true, false } };
        set_nodes(f->cache, n1, 2);
        assert_int_equal(se_topology_cache_overloaded(f->cache, &keys), 0);
        assert_int_equal(keys.n, 1);
        assert_string_equal(keys.v[0], "ns/svc");
        se_strv_release(&keys);
        /* a third zone without endpoints overloads too */
        const struct node_spec n2[] = { { "zone-a", "1", true, false },
                                        { "zone-b", "1", true, false },
                                        { "zone-c", "100m", true, false } };
        set_nodes(f->cache, n2, 3);
        assert_int_equal(se_topology_cache_overloaded(f->cache, &keys), 0);
        assert_int_equal(keys.n, 1);
        se_strv_release(&keys);
        /* no shares: every Service with hints */
        set_nodes(f->cache, n2, 1);
        assert_int_equal(se_topology_cache_zones(f->cache), 0);
        assert_int_equal(se_topology_cache_overloaded(f->cache, &keys), 0);
        assert_int_equal(keys.n, 1);
        se_strv_release(&keys);
        /* forgotten hints are never overloaded */
        se_topology_cache_remove_hints(f->cache, "ns/svc", "IPv4");
        expect_recorded(f, NULL);
        assert_int_equal(se_topology_cache_overloaded(f->cache, &keys), 0);
        assert_int_equal(keys.n, 0);
        tfx_free(f);
}

/* hintsEnabled: the deprecated annotation wins when present */
static void test_topology__hints_enabled(void **state)
{
        (void)state;
        static const struct {
                const char *old, *mode;
                bool want;
        } cases[] = {
                { NULL, NULL, false },   { NULL, "Auto", true },        { NULL, "auto", true },
                { NULL, "AUTO", false }, { NULL, "", false },           { "Auto", NULL, true },
                { "auto", "x", true },   { "Disabled", "Auto", false }, { "", "Auto", false },
        };
        for (size_t i = 0; i < SE_ARRAY_SIZE(cases); i++) {
                struct se_service *s = fx_service("ns", "svc", "10.0.0.1");
                struct se_object *o = &s->obj;
                /* keys in order: topology-aware-hints < topology-mode */
                if (cases[i].old)
                        fx_kv(o, &o->meta.annotations, SE_TOPOLOGY_HINTS_ANNOTATION, cases[i].old);
                if (cases[i].mode)
                        fx_kv(o, &o->meta.annotations, SE_TOPOLOGY_MODE_ANNOTATION, cases[i].mode);
                assert_int_equal(se_topology_hints_enabled(&o->meta.annotations), cases[i].want);
                se_object_unref(o);
        }
}

static int setup_full(void **state)
{
        (void)state;
        slim_mode = false;
        return 0;
}

static int setup_slim(void **state)
{
        (void)state;
        slim_mode = true;
        return 0;
}

/* each test over full slices, then again over slim unchanged ones */
#define BOTH(t) cmocka_unit_test_setup(t, setup_full), cmocka_unit_test_setup(t, setup_slim)

int main(void)
{
        const struct CMUnitTest tests[] = {
                BOTH(test_topology__add_hints_no_ratios),
                BOTH(test_topology__add_hints_too_few_endpoints),
                BOTH(test_topology__add_hints_two_zones),
                BOTH(test_topology__add_hints_three_zones),
                BOTH(test_topology__add_hints_refused),
                BOTH(test_topology__add_hints_unchanged),
                cmocka_unit_test(test_topology__set_nodes),
                cmocka_unit_test(test_topology__redistribute),
                cmocka_unit_test(test_topology__giving_receiving),
                BOTH(test_topology__hints_fit),
                BOTH(test_topology__overloaded),
                cmocka_unit_test(test_topology__hints_enabled),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The proxier's policy with a fake runner (as kube-proxy's proxier tests
 * fake iptables): full vs partial syncs, a failed apply, canary loss,
 * conntrack deletions, health-check node ports, large-cluster mode, and
 * changes carried from the store. No root, no tools: everything the
 * proxier does to the system lands in the fake. */
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
#include <svcenv/proxy_proxier.h>
#include <svcenv/store.h>
#include <svcenv/strbuf.h>
#include <svcenv/strv.h>

#define S (1000000000LL)

/* The fake system: a clock, what was applied, every argv run, and the
 * outcomes to give. */
struct fake {
        int64_t mono, real;
        struct se_strbuf applied; /* the last applied input */
        unsigned applies, ensures, nft_lists, canary_checks;
        struct se_strv runs; /* argv joined by spaces */
        int fail_applies; /* the next N applies fail (-EPROTO) */
        bool canary_gone; /* `-S KUBE-PROXY-CANARY` fails */
        bool conntrack_missing;
        size_t nft_prerouting_rules;
};

static int f_apply(void *ctx, enum se_proxy_tool tool, const char *data, size_t n, char *err,
                   size_t errsize)
{
        struct fake *f = ctx;
        (void)tool;
        f->applies++;
        if (f->fail_applies > 0) {
                f->fail_applies--;
                snprintf(err, errsize, "iptables-restore: line 2 failed");
                return -EPROTO;
        }
        se_strbuf_reset(&f->applied);
        se_strbuf_append(&f->applied, data, n);
        return 0;
}

static int f_run(void *ctx, const char *const *argv, struct se_strbuf *out, char *err,
                 size_t errsize)
{
        struct fake *f = ctx;
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        for (size_t i = 0; argv[i]; i++)
                se_strbuf_printf(&sb, "%s%s", i ? " " : "", argv[i]);
        char *line = se_strbuf_detach(&sb, NULL);
        assert_non_null(line);
        assert_int_equal(se_strv_push_consume(&f->runs, line), 0);
        err[0] = 0;
        (void)errsize;
        if (strcmp(argv[0], "conntrack") == 0 && f->conntrack_missing)
                return -ENOENT;
        if (strstr(line, "-S KUBE-PROXY-CANARY")) {
                f->canary_checks++;
                return f->canary_gone ? -EPROTO : 0;
        }
        if (out && strstr(argv[0], "-save"))
                se_strbuf_puts(out, "*nat\nCOMMIT\n");
        return 0;
}

static int f_ensure(void *ctx, enum se_ip_family fam, char *err, size_t errsize)
{
        struct fake *f = ctx;
        (void)fam;
        (void)err;
        (void)errsize;
        f->ensures++;
        return 0;
}

static int f_nft_names(void *ctx, enum se_ip_family fam, struct se_strv *ret)
{
        struct fake *f = ctx;
        (void)fam;
        (void)ret;
        f->nft_lists++;
        return 0;
}

static int f_nft_rules(void *ctx, enum se_ip_family fam, const char *chain, size_t *ret)
{
        struct fake *f = ctx;
        (void)fam;
        assert_string_equal(chain, "nat-prerouting");
        *ret = f->nft_prerouting_rules;
        return 0;
}

static void f_now(void *ctx, struct se_proxy_instant *now)
{
        struct fake *f = ctx;
        now->mono_ns = f->mono;
        now->real_ns = f->real + f->mono;
}

struct world {
        struct fake f;
        struct se_proxy_runner runner;
        struct se_store *store;
        struct se_proxy_proxier *p;
        unsigned synced;
};

static void on_synced(void *data)
{
        struct world *w = data;
        w->synced++;
}

static void load(struct world *w, const char *yaml)
{
        struct se_diag d;
        if (se_manifest_load_buffer(w->store, "test", yaml, strlen(yaml), NULL, NULL, &d) < 0)
                fail_msg("manifest: %s", d.text);
}

/* A ClusterIP service ns/name:80 with endpoints eps ("ip,ip", on node n1
 * when local) */
static void service(struct world *w, const char *ns, const char *name, const char *ip,
                    const char *proto, const char *eps, bool local)
{
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        se_strbuf_printf(&sb,
                         "apiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: %s}\n"
                         "spec: {clusterIP: %s, ports: [{name: p, port: 80, protocol: %s}]}\n"
                         "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                         "metadata: {name: %s-1, namespace: %s, labels: "
                         "{kubernetes.io/service-name: %s}}\n"
                         "addressType: IPv4\nports: [{name: p, port: 8080, protocol: %s}]\n"
                         "endpoints:%s\n",
                         name, ns, ip, proto, name, ns, name, proto, eps[0] ? "" : " []");
        char buf[4096], slice[80];
        snprintf(buf, sizeof(buf), "%s", eps);
        snprintf(slice, sizeof(slice), "%s-1", name);
        /* replaced: the store sends delete then add */
        (void)se_store_delete(w->store, SE_KIND_SERVICE, ns, name);
        (void)se_store_delete(w->store, SE_KIND_ENDPOINT_SLICE, ns, slice);
        for (char *save = NULL, *e = strtok_r(buf, ",", &save); e; e = strtok_r(NULL, ",", &save))
                se_strbuf_printf(&sb, "- {addresses: [%s], nodeName: %s}\n", e,
                                 local ? "n1" : "n2");
        load(w, sb.buf);
        se_strbuf_release(&sb);
}

static struct world *world_new(bool nft)
{
        struct world *w = calloc(1, sizeof(*w));
        assert_non_null(w);
        se_strbuf_init(&w->f.applied, 0);
        w->f.runs = (struct se_strv)SE_STRV_INIT;
        w->f.mono = 100 * S;
        w->f.real = 1764500000 * S;
        w->f.nft_prerouting_rules = 1;
        w->runner = (struct se_proxy_runner){ f_apply,     f_run, f_ensure, f_nft_names,
                                              f_nft_rules, f_now, &w->f };
        struct se_proxy_proxier_config cfg = {
                .nft = nft,
                .minimal = true,
                .sync_period_ns = 30 * S,
                .min_sync_period_ns = 1 * S,
                .synced = on_synced,
                .synced_data = w,
        };
        w->store = se_store_new();
        w->p = se_proxy_proxier_new(&cfg, &w->runner);
        assert_non_null(w->store);
        assert_non_null(w->p);
        for (enum se_kind k = SE_KIND_SERVICE; k <= SE_KIND_ENDPOINT_SLICE; k++)
                if (k == SE_KIND_SERVICE || k == SE_KIND_ENDPOINT_SLICE || k == SE_KIND_NODE)
                        assert_int_equal(
                                se_store_subscribe(w->store, k, se_proxy_proxier_on_change, w->p),
                                0);
        return w;
}

static void begin(struct world *w)
{
        struct se_proxy_options o;
        enum se_ip_family fam = SE_IPV4;
        se_proxy_options_init(&o);
        o.node_name = "n1";
        assert_int_equal(se_parse_ip("192.168.0.2", &o.node_ips[0]), 0);
        o.n_node_ips = 1;
        assert_int_equal(se_parse_cidr("10.0.0.0/8", &o.cluster_cidrs[0]), 0);
        o.n_cluster_cidrs = 1;
        assert_int_equal(se_proxy_proxier_begin(w->p, &o, &fam, 1), 0);
}

static void world_free(struct world *w)
{
        se_proxy_proxier_free(w->p);
        se_store_free(w->store);
        se_strbuf_release(&w->f.applied);
        se_strv_release(&w->f.runs);
        free(w);
}

static struct se_proxy_proxier_stats stats(struct world *w)
{
        struct se_proxy_proxier_stats s;
        se_proxy_proxier_stats(w->p, &s);
        return s;
}

static bool ran(struct world *w, const char *frag)
{
        se_strv_foreach(s, &w->f.runs)
                if (strstr(*s, frag))
                        return true;
        return false;
}

/* a step after the clock moved on by dt */
static int64_t step_after(struct world *w, int64_t dt)
{
        w->f.mono += dt;
        return se_proxy_proxier_step(w->p, w->store);
}

static void test_proxier__full_then_partial(void **state)
{
        (void)state;
        struct world *w = world_new(false);
        service(w, "a", "web", "172.30.0.10", "TCP", "10.1.0.1,10.1.0.2", false);
        service(w, "b", "api", "172.30.0.20", "TCP", "10.1.1.1", false);
        assert_int_equal(step_after(w, 0), S); /* not begun: nothing */
        begin(w);
        step_after(w, 0);
        struct se_proxy_proxier_stats s = stats(w);
        assert_int_equal(s.syncs_full, 1);
        assert_int_equal(s.syncs_partial, 0);
        assert_int_equal(w->f.ensures, 1); /* the jumps after a full iptables sync */
        assert_true(ran(w, "iptables -w 5 -t nat -N KUBE-PROXY-CANARY"));
        assert_true(ran(w, "iptables-save -t nat")); /* seeded before the full sync */
        assert_non_null(strstr(w->f.applied.buf, "-A KUBE-SERVICES"));
        assert_int_equal(w->synced, 1);

        /* nothing changed: no sync before the period */
        unsigned applies = w->f.applies;
        int64_t wait = step_after(w, S / 2);
        assert_true(wait > 0 && wait <= S);
        assert_int_equal(w->f.applies, applies);

        /* one endpoint of web: a partial sync, but only after min-sync-period */
        w->f.mono -= S / 2;
        service(w, "a", "web", "172.30.0.10", "TCP", "10.1.0.1,10.1.0.3", false);
        wait = step_after(w, S / 4);
        assert_int_equal(w->f.applies, applies);
        assert_int_equal(wait, 3 * S / 4);
        step_after(w, wait);
        s = stats(w);
        assert_int_equal(s.syncs_partial, 1);
        assert_int_equal(w->f.ensures, 1);
        assert_non_null(strstr(w->f.applied.buf, "10.1.0.3"));
        assert_null(strstr(w->f.applied.buf, "b/api")); /* api's chains left out */

        /* the sync period: full again */
        step_after(w, 30 * S);
        assert_int_equal(stats(w).syncs_full, 2);
        assert_non_null(strstr(w->f.applied.buf, "b/api"));
        world_free(w);
}

/* A failed apply: the previous rules stay (nothing recorded as applied),
 * the failure is counted, and the retry a second later is full. */
static void test_proxier__failed_apply_then_full(void **state)
{
        (void)state;
        struct world *w = world_new(false);
        service(w, "a", "web", "172.30.0.10", "TCP", "10.1.0.1", false);
        service(w, "b", "api", "172.30.0.20", "TCP", "10.1.1.1", false);
        begin(w);
        step_after(w, 0);
        char *before = strdup(w->f.applied.buf);
        service(w, "a", "web", "172.30.0.10", "TCP", "10.1.0.9", false);
        w->f.fail_applies = 1;
        step_after(w, S);
        struct se_proxy_proxier_stats s = stats(w);
        assert_int_equal(s.syncs_failed, 1);
        assert_int_equal(s.partial_failed, 1);
        assert_int_equal(s.syncs_partial, 0);
        assert_string_equal(w->f.applied.buf, before); /* the old rules stay */
        assert_int_equal(w->synced, 1);
        /* the retry: within a second, full, and it carries the change */
        int64_t wait = se_proxy_proxier_step(w->p, w->store);
        assert_true(wait > 0 && wait <= S);
        step_after(w, wait);
        s = stats(w);
        assert_int_equal(s.syncs_full, 2);
        assert_int_equal(w->f.ensures, 2);
        assert_non_null(strstr(w->f.applied.buf, "10.1.0.9"));
        assert_non_null(strstr(w->f.applied.buf, "b/api"));
        free(before);
        world_free(w);
}

/* The canary gone (someone flushed our tables): the next check forces a
 * full sync and counts it. */
static void test_proxier__canary_loss_full(void **state)
{
        (void)state;
        struct world *w = world_new(false);
        service(w, "a", "web", "172.30.0.10", "TCP", "10.1.0.1", false);
        begin(w);
        step_after(w, 0);
        step_after(w, S); /* canary there: nothing */
        assert_int_equal(stats(w).syncs_full, 1);
        assert_true(w->f.canary_checks >= 1);
        w->f.canary_gone = true;
        step_after(w, S);
        struct se_proxy_proxier_stats s = stats(w);
        assert_int_equal(s.canary_resyncs, 1);
        assert_int_equal(s.syncs_full, 2);
        assert_int_equal(w->f.ensures, 2);
        world_free(w);
}

/* nftables: the loss is our nat-prerouting rule gone; full syncs read our
 * table back first. */
static void test_proxier__nft_table_loss_full(void **state)
{
        (void)state;
        struct world *w = world_new(true);
        service(w, "a", "web", "172.30.0.10", "TCP", "10.1.0.1", false);
        begin(w);
        step_after(w, 0);
        assert_int_equal(w->f.nft_lists, 1);
        assert_int_equal(w->f.ensures, 0);
        assert_non_null(strstr(w->f.applied.buf, "table ip svcenv"));
        w->f.nft_prerouting_rules = 0;
        step_after(w, S);
        assert_int_equal(stats(w).canary_resyncs, 1);
        assert_int_equal(stats(w).syncs_full, 2);
        assert_int_equal(w->f.nft_lists, 2);
        world_free(w);
}

/* A UDP endpoint removed: its conntrack entries are deleted (kube-proxy
 * deletes stale UDP flows); without the tool, counted once per flow. */
static void test_proxier__conntrack_for_removed_udp(void **state)
{
        (void)state;
        struct world *w = world_new(false);
        service(w, "e", "dns", "172.30.0.50", "UDP", "10.1.4.1,10.1.4.2", false);
        service(w, "a", "web", "172.30.0.10", "TCP", "10.1.0.1,10.1.0.2", false);
        begin(w);
        step_after(w, 0);
        se_strv_release(&w->f.runs); /* the first sync clears dns's flows: not this test's */
        uint64_t ct0 = stats(w).ct_deletes;
        service(w, "e", "dns", "172.30.0.50", "UDP", "10.1.4.1", false);
        service(w, "a", "web", "172.30.0.10", "TCP", "10.1.0.1", false); /* TCP: none */
        step_after(w, S);
        assert_true(ran(w, "conntrack -D -p udp -f ipv4 --orig-dst 172.30.0.50"));
        assert_true(ran(w, "--dst-nat 10.1.4.2"));
        assert_false(ran(w, "--dst-nat 10.1.0.2"));
        assert_int_equal(stats(w).ct_deletes, ct0 + 1);
        w->f.conntrack_missing = true;
        service(w, "e", "dns", "172.30.0.50", "UDP", "10.1.4.3", false);
        step_after(w, S);
        assert_int_equal(stats(w).conntrack_missing, 1);
        assert_int_equal(stats(w).ct_deletes, ct0 + 1);
        world_free(w);
}

/* Health-check node ports: recomputed after each successful sync, with
 * the local ready endpoints; the hook runs so the daemon opens servers. */
static void test_proxier__health_check_ports(void **state)
{
        (void)state;
        struct world *w = world_new(false);
        load(w, "apiVersion: v1\nkind: Service\nmetadata: {name: lb, namespace: ns}\n"
                "spec: {type: LoadBalancer, clusterIP: 172.30.0.42, externalTrafficPolicy: "
                "Local, healthCheckNodePort: 30000,\n"
                "  ports: [{name: p, port: 80, nodePort: 3001, protocol: TCP}]}\n"
                "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                "metadata: {name: lb-1, namespace: ns, labels: {kubernetes.io/service-name: "
                "lb}}\naddressType: IPv4\nports: [{name: p, port: 8080, protocol: TCP}]\n"
                "endpoints: [{addresses: [10.180.0.2], nodeName: n1}, {addresses: "
                "[10.180.2.1], nodeName: n2}]\n");
        begin(w);
        step_after(w, 0);
        struct se_proxy_hc_port hc[4];
        assert_int_equal(se_proxy_proxier_hc_ports(w->p, hc, 4), 1);
        assert_int_equal(hc[0].port, 30000);
        assert_string_equal(hc[0].ns, "ns");
        assert_string_equal(hc[0].name, "lb");
        assert_int_equal(hc[0].local, 1);
        struct se_strbuf body;
        se_strbuf_init(&body, 0);
        assert_true(se_proxy_proxier_hc_body(w->p, 30000, &body));
        assert_non_null(strstr(body.buf, "\"localEndpoints\": 1"));
        se_strbuf_reset(&body);
        /* the local endpoint goes: 503 */
        assert_int_equal(se_store_delete(w->store, SE_KIND_ENDPOINT_SLICE, "ns", "lb-1"), 0);
        load(w, "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                "metadata: {name: lb-1, namespace: ns, labels: {kubernetes.io/service-name: "
                "lb}}\naddressType: IPv4\nports: [{name: p, port: 8080, protocol: TCP}]\n"
                "endpoints: [{addresses: [10.180.2.1], nodeName: n2}]\n");
        step_after(w, S);
        assert_int_equal(w->synced, 2);
        assert_int_equal(se_proxy_proxier_hc_ports(w->p, hc, 4), 1);
        assert_int_equal(hc[0].local, 0);
        assert_false(se_proxy_proxier_hc_body(w->p, 30000, &body));
        /* the service goes: no port */
        assert_int_equal(se_store_delete(w->store, SE_KIND_SERVICE, "ns", "lb"), 0);
        step_after(w, S);
        assert_int_equal(se_proxy_proxier_hc_ports(w->p, hc, 4), 0);
        se_strbuf_release(&body);
        world_free(w);
}

/* Large-cluster mode (over 1000 endpoints): no periodic full sync. */
static void test_proxier__large_cluster_no_periodic_full(void **state)
{
        (void)state;
        struct world *w = world_new(false);
        for (unsigned i = 0; i < 11; i++) {
                char name[16], ip[32], eps[2048] = "";
                snprintf(name, sizeof(name), "s%u", i);
                snprintf(ip, sizeof(ip), "172.30.1.%u", i + 1);
                for (unsigned e = 0; e < 100; e++) {
                        size_t l = strlen(eps);
                        snprintf(eps + l, sizeof(eps) - l, "%s10.2.%u.%u", e ? "," : "", i, e + 1);
                }
                service(w, "big", name, ip, "TCP", eps, false);
        }
        begin(w);
        step_after(w, 0);
        step_after(w, 31 * S);
        assert_int_equal(stats(w).syncs_full, 1);
        world_free(w);
}

/* Changes carried from the store: an endpoint change rebuilds and writes
 * only that service's nat chains (no filter table, no KUBE-SERVICES), with
 * -X for the endpoint chain it dropped; a change of a service's top-level
 * rules (no endpoints any more, added, removed) is carried too, as single
 * rule edits of the top-level chains. */
static void test_proxier__carried_endpoint_change(void **state)
{
        (void)state;
        struct world *w = world_new(false);
        service(w, "a", "web", "172.30.0.10", "TCP", "10.1.0.1,10.1.0.2", false);
        service(w, "b", "api", "172.30.0.20", "TCP", "10.1.1.1", false);
        service(w, "c", "db", "172.30.0.30", "TCP", "10.1.2.1", false);
        begin(w);
        step_after(w, 0);
        assert_int_equal(stats(w).services_rebuilt_last, 3);
        char *full = strdup(w->f.applied.buf);
        /* the chain of web's endpoint 10.1.0.2, to be dropped */
        char gone[64] = "";
        for (const char *q = full; (q = strstr(q, "-A KUBE-SEP-")); q++) {
                const char *nl = strchr(q, '\n');
                const char *hit = strstr(q, "-s 10.1.0.2 ");
                if (hit && hit < nl) {
                        size_t l = strcspn(q + 3, " ");
                        memcpy(gone, q + 3, l);
                        gone[l] = 0;
                        break;
                }
        }
        assert_true(gone[0]);

        service(w, "a", "web", "172.30.0.10", "TCP", "10.1.0.1,10.1.0.3", false);
        step_after(w, S);
        struct se_proxy_proxier_stats s = stats(w);
        assert_int_equal(s.syncs_partial, 1);
        assert_int_equal(s.services_rebuilt_last, 1);
        const char *in = w->f.applied.buf;
        assert_int_equal(strncmp(in, "*nat\n", 5), 0);
        assert_null(strstr(in, "*filter"));
        assert_null(strstr(in, "KUBE-SERVICES"));
        assert_null(strstr(in, "b/api"));
        assert_non_null(strstr(in, "10.1.0.3"));
        char x[80];
        snprintf(x, sizeof(x), "\n-X %s\n", gone);
        assert_non_null(strstr(in, x));
        assert_int_equal(s.bytes_last, strlen(in));

        /* nothing changed in the rules (the same endpoints again): nothing
         * applied */
        unsigned applies = w->f.applies;
        service(w, "a", "web", "172.30.0.10", "TCP", "10.1.0.1,10.1.0.3", false);
        step_after(w, S);
        assert_int_equal(w->f.applies, applies);
        assert_int_equal(stats(w).syncs_partial, 2);

        /* db loses its endpoints: its REJECT is a top-level rule, its
         * jump into its chains goes before they do */
        service(w, "c", "db", "172.30.0.30", "TCP", "", false);
        step_after(w, S);
        assert_int_equal(stats(w).services_rebuilt_last, 1);
        in = w->f.applied.buf;
        const char *rej = strstr(in, "\n-I KUBE-SERVICES 1 -m comment --comment "
                                     "\"c/db:p has no endpoints\"");
        const char *del = strstr(in, "\n-D KUBE-SERVICES -m comment --comment "
                                     "\"c/db:p cluster IP\"");
        assert_non_null(rej);
        assert_non_null(del);
        assert_true(rej < strstr(in, "*nat\n"));
        assert_true(del < strstr(in, "\n-X KUBE-SVC-"));
        assert_null(strstr(in, "b/api"));

        /* a new service: its KUBE-SERVICES rule inserted where a full sync
         * has it (after a/web and b/api) */
        service(w, "d", "new", "172.30.0.40", "TCP", "10.1.3.1", false);
        step_after(w, S);
        assert_int_equal(stats(w).services_rebuilt_last, 1);
        assert_non_null(strstr(w->f.applied.buf, "\n-I KUBE-SERVICES 3 -m comment --comment "
                                                 "\"d/new:p cluster IP\""));

        /* carried again after that */
        service(w, "d", "new", "172.30.0.40", "TCP", "10.1.3.2", false);
        step_after(w, S);
        assert_int_equal(stats(w).services_rebuilt_last, 1);
        assert_null(strstr(w->f.applied.buf, "KUBE-SERVICES"));
        free(full);
        world_free(w);
}

/* A carried sync that fails to apply: the old rules stay, the next sync
 * is full and has the change. */
static void test_proxier__carried_failure_full(void **state)
{
        (void)state;
        struct world *w = world_new(false);
        service(w, "a", "web", "172.30.0.10", "TCP", "10.1.0.1", false);
        service(w, "b", "api", "172.30.0.20", "TCP", "10.1.1.1", false);
        begin(w);
        step_after(w, 0);
        service(w, "a", "web", "172.30.0.10", "TCP", "10.1.0.7", false);
        w->f.fail_applies = 1;
        step_after(w, S);
        assert_int_equal(stats(w).partial_failed, 1);
        assert_null(strstr(w->f.applied.buf, "10.1.0.7"));
        step_after(w, S);
        assert_int_equal(stats(w).syncs_full, 2);
        assert_non_null(strstr(w->f.applied.buf, "10.1.0.7"));
        assert_non_null(strstr(w->f.applied.buf, "*filter"));
        /* and carried again */
        service(w, "a", "web", "172.30.0.10", "TCP", "10.1.0.8", false);
        step_after(w, S);
        assert_int_equal(stats(w).services_rebuilt_last, 1);
        world_free(w);
}

/* A loop of the caller's own (svcenv-proxy --mode userspace) reports
 * through the proxier: a queued change unsynced past 2 x the sync period
 * makes /healthz 503, a sync makes it 200 again. */
static void test_proxier__health_from_outside_loop(void **state)
{
        (void)state;
        struct world *w = world_new(false);
        begin(w);
        load(w, "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n");
        struct se_strbuf b;
        se_strbuf_init(&b, 0);
        assert_true(se_proxy_proxier_health_body(w->p, false, &b));
        se_proxy_proxier_health_queued(w->p);
        w->f.mono += 59 * S;
        assert_true(se_proxy_proxier_health_body(w->p, false, &b));
        w->f.mono += 2 * S;
        assert_false(se_proxy_proxier_health_body(w->p, false, &b));
        se_strbuf_release(&b);
        se_strbuf_init(&b, 0);
        se_proxy_proxier_health_synced(w->p);
        assert_true(se_proxy_proxier_health_body(w->p, false, &b));
        assert_non_null(strstr(b.buf, "\"healthy\":true"));
        /* a later change is timed from its own queueing, not the first */
        w->f.mono += 100 * S;
        se_proxy_proxier_health_queued(w->p);
        w->f.mono += 30 * S;
        assert_true(se_proxy_proxier_health_body(w->p, false, &b));
        se_strbuf_release(&b);
        world_free(w);
}

/* nftables, changes carried: an endpoint change writes that service's
 * chain and endpoint map only; losing its endpoints edits just its
 * elements of the top-level maps (its verdict out, its reject in); a
 * local endpoint another service shares keeps its hairpin element. */
static void test_proxier__nft_carried_change(void **state)
{
        (void)state;
        struct world *w = world_new(true);
        service(w, "a", "web", "172.30.0.10", "TCP", "10.1.0.1,10.1.0.2", true);
        service(w, "b", "api", "172.30.0.20", "TCP", "10.1.1.1", false);
        service(w, "c", "share", "172.30.0.30", "TCP", "10.1.0.1", true);
        begin(w);
        step_after(w, 0);
        assert_int_equal(stats(w).syncs_full, 1);

        service(w, "a", "web", "172.30.0.10", "TCP", "10.1.0.2,10.1.0.3", true);
        step_after(w, S);
        struct se_proxy_proxier_stats s = stats(w);
        assert_int_equal(s.syncs_carried, 1);
        assert_int_equal(s.services_rebuilt_last, 1);
        const char *in = w->f.applied.buf;
        assert_non_null(strstr(in, "flush map ip svcenv dnat-service-"));
        assert_non_null(strstr(in, "10.1.0.3 . 8080"));
        assert_null(strstr(in, "b/api"));
        assert_null(strstr(in, "c/share"));
        assert_null(strstr(in, "chain services"));
        assert_null(strstr(in, "flush map ip svcenv service-ips"));
        /* 10.1.0.3 hairpins now; 10.1.0.1 still does, through share */
        assert_non_null(strstr(in, "add element ip svcenv hairpin-connections { 10.1.0.3 . "
                                   "10.1.0.3 . tcp . 8080 }"));
        assert_null(strstr(in, "delete element ip svcenv hairpin-connections"));
        assert_int_equal(s.bytes_last, strlen(in));

        /* api loses its endpoints: its ClusterIP goes from its chain to
         * reject-chain, element by element */
        service(w, "b", "api", "172.30.0.20", "TCP", "", false);
        step_after(w, S);
        s = stats(w);
        assert_int_equal(s.syncs_carried, 2);
        in = w->f.applied.buf;
        assert_non_null(
                strstr(in, "delete element ip svcenv service-ips { 172.30.0.20 . tcp . 80 }"));
        assert_non_null(strstr(in, "add element ip svcenv no-endpoint-services { 172.30.0.20 . tcp "
                                   ". 80 : goto reject-chain }"));
        assert_non_null(strstr(in, "delete chain ip svcenv service-"));
        assert_null(strstr(in, "a/web"));

        /* share moves away: now nobody has 10.1.0.1 */
        service(w, "c", "share", "172.30.0.30", "TCP", "10.1.0.9", true);
        step_after(w, S);
        assert_int_equal(stats(w).syncs_carried, 3);
        assert_non_null(strstr(w->f.applied.buf, "delete element ip svcenv hairpin-connections { "
                                                 "10.1.0.1 . 10.1.0.1 . tcp . 8080 }"));
        world_free(w);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_proxier__full_then_partial),
                cmocka_unit_test(test_proxier__failed_apply_then_full),
                cmocka_unit_test(test_proxier__canary_loss_full),
                cmocka_unit_test(test_proxier__nft_table_loss_full),
                cmocka_unit_test(test_proxier__conntrack_for_removed_udp),
                cmocka_unit_test(test_proxier__health_check_ports),
                cmocka_unit_test(test_proxier__large_cluster_no_periodic_full),
                cmocka_unit_test(test_proxier__carried_endpoint_change),
                cmocka_unit_test(test_proxier__carried_failure_full),
                cmocka_unit_test(test_proxier__health_from_outside_loop),
                cmocka_unit_test(test_proxier__nft_carried_change),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

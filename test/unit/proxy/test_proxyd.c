/* The daemon's pure helpers: kube-proxy's /healthz verdict and body, the
 * health-check node port body, Go's time text, the --cleanup restore input
 * and the stale UDP conntrack plan. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include <svcenv/decode.h>
#include <svcenv/manifest.h>
#include <svcenv/proxy.h>
#include <svcenv/store.h>
#include <svcenv/strbuf.h>

#include "cpu_budget.h"

#define S (1000000000LL)

/* encoding/json of a time.Time: RFC 3339 with nanoseconds, trailing zeros
 * dropped, in the local zone (Z for UTC) */
static void test_proxyd__go_time(void **state)
{
        (void)state;
        char buf[96];
        setenv("TZ", "UTC", 1);
        tzset();
        struct se_proxy_instant t = { 1764500000 * S + 123456789, 11 * S + 500000000, 10 * S };
        se_proxy_go_time(&t, buf, sizeof(buf));
        assert_string_equal(buf, "2025-11-30T10:53:20.123456789Z");
        t.real_ns = 1764500000 * S + 500000000; /* trailing zeros go */
        se_proxy_go_time(&t, buf, sizeof(buf));
        assert_string_equal(buf, "2025-11-30T10:53:20.5Z");
        t.real_ns = 1764500000 * S;
        se_proxy_go_time(&t, buf, sizeof(buf));
        assert_string_equal(buf, "2025-11-30T10:53:20Z");
        struct se_proxy_instant zero = { 0, 0, 0 };
        se_proxy_go_time(&zero, buf, sizeof(buf));
        assert_string_equal(buf, "0001-01-01T00:00:00Z");
        setenv("TZ", "<+0130>-1:30", 1); /* a zone east of UTC */
        tzset();
        se_proxy_go_time(&t, buf, sizeof(buf));
        assert_string_equal(buf, "2025-11-30T12:23:20+01:30");
        setenv("TZ", "<-03>3", 1);
        tzset();
        se_proxy_go_time(&t, buf, sizeof(buf));
        assert_string_equal(buf, "2025-11-30T07:53:20-03:00");
        setenv("TZ", "UTC", 1);
        tzset();
}

static char *body(const struct se_proxy_health *h, const struct se_proxy_instant *now, bool livez,
                  bool *ok)
{
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        *ok = se_proxy_health_body(h, now, livez, &sb);
        assert_false(se_strbuf_failed(&sb));
        return se_strbuf_detach(&sb, NULL);
}

#define ASSERT_BODY(h, now, livez, want_ok, want) \
 do {                                             \
  bool ok_;                                       \
  char *b_ = body(h, now, livez, &ok_);           \
  assert_string_equal(b_, want);                  \
  assert_int_equal(ok_, want_ok);                 \
  free(b_);                                       \
 } while (0)

/* ProxyHealthServer: healthy at start and while no queued update is older
 * than the timeout; an update clears it; no Node or a deleted one fails
 * /healthz but not /livez. Bodies are encoding/json's, byte for byte. */
static void test_proxyd__healthz(void **state)
{
        (void)state;
        setenv("TZ", "UTC", 1);
        tzset();
        struct se_proxy_health h;
        se_proxy_health_init(&h, 60 * S);
        const enum se_ip_family fams[] = { SE_IPV6, SE_IPV4 };
        se_proxy_health_families(&h, fams, 2);
        struct se_proxy_instant t0 = { 1764500000 * S, 100 * S, 90 * S };
        /* no Node seen yet: /healthz 503 with the zero time, /livez 200 */
        ASSERT_BODY(&h, &t0, false, false,
                    "{\"lastUpdated\":\"0001-01-01T00:00:00Z\","
                    "\"currentTime\":\"2025-11-30T10:53:20Z\",\"nodeEligible\":false,"
                    "\"healthy\":true}");
        ASSERT_BODY(&h, &t0, true, true,
                    "{\"lastUpdated\":\"2025-11-30T10:53:20Z\","
                    "\"currentTime\":\"2025-11-30T10:53:20Z\",\"healthy\":true}");
        h.node_eligible = true;
        ASSERT_BODY(&h, &t0, false, true,
                    "{\"lastUpdated\":\"2025-11-30T10:53:20Z\","
                    "\"currentTime\":\"2025-11-30T10:53:20Z\",\"nodeEligible\":true,"
                    "\"healthy\":true}");
        /* before the first sync a queued update never makes it unhealthy */
        se_proxy_health_queued(&h, &t0);
        struct se_proxy_instant t1 = t0;
        t1.mono_ns += 600 * S;
        t1.real_ns += 600 * S;
        assert_true(se_proxy_health_ok(&h, &t1));
        se_proxy_health_updated(&h, &t0);
        se_proxy_health_queued(&h, &t0);
        t1 = t0;
        t1.mono_ns += 59 * S;
        t1.real_ns += 59 * S + 250000000;
        assert_true(se_proxy_health_ok(&h, &t1));
        /* synced: every family's status, keys sorted */
        ASSERT_BODY(&h, &t1, false, true,
                    "{\"lastUpdated\":\"2025-11-30T10:54:19.25Z\","
                    "\"currentTime\":\"2025-11-30T10:54:19.25Z\",\"nodeEligible\":true,"
                    "\"healthy\":true,\"status\":{"
                    "\"IPv4\":{\"lastUpdated\":\"2025-11-30T10:53:20Z\",\"healthy\":true},"
                    "\"IPv6\":{\"lastUpdated\":\"2025-11-30T10:53:20Z\",\"healthy\":true}}}");
        se_proxy_health_queued(&h, &t1); /* the oldest one counts */
        t1.mono_ns += 2 * S;
        t1.real_ns += 2 * S;
        assert_false(se_proxy_health_ok(&h, &t1));
        /* unhealthy: lastUpdated is the last successful sync's time, 503 on both */
        ASSERT_BODY(&h, &t1, true, false,
                    "{\"lastUpdated\":\"2025-11-30T10:53:20Z\","
                    "\"currentTime\":\"2025-11-30T10:54:21.25Z\",\"healthy\":false,\"status\":{"
                    "\"IPv4\":{\"lastUpdated\":\"2025-11-30T10:53:20Z\",\"healthy\":false},"
                    "\"IPv6\":{\"lastUpdated\":\"2025-11-30T10:53:20Z\",\"healthy\":false}}}");
        se_proxy_health_updated(&h, &t1);
        assert_true(se_proxy_health_ok(&h, &t1));
        h.node_eligible = false; /* the Node is being deleted */
        se_proxy_health_families(&h, fams, 1);
        ASSERT_BODY(&h, &t1, false, false,
                    "{\"lastUpdated\":\"2025-11-30T10:54:21.25Z\","
                    "\"currentTime\":\"2025-11-30T10:54:21.25Z\",\"nodeEligible\":false,"
                    "\"healthy\":true,\"status\":{"
                    "\"IPv6\":{\"lastUpdated\":\"2025-11-30T10:54:21.25Z\",\"healthy\":true}}}");
        assert_true(se_proxy_health_ok(&h, &t1)); /* the node is not the proxier */
}

/* kube-proxy's NodeEligible: not deleted, not tainted by the cluster
 * autoscaler (other taints do not matter) */
static void test_proxyd__node_eligible(void **state)
{
        (void)state;
        static const char *const nodes[] = {
                "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n\"}}",
                "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n\"},\"spec\":{\"taints\":["
                "{\"key\":\"node.kubernetes.io/unreachable\",\"effect\":\"NoExecute\"}]}}",
                "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n\"},\"spec\":{\"taints\":["
                "{\"key\":\"a\",\"effect\":\"NoSchedule\"},"
                "{\"key\":\"ToBeDeletedByClusterAutoscaler\",\"value\":\"1764500000\","
                "\"effect\":\"NoSchedule\"}]}}",
                "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n\","
                "\"deletionTimestamp\":\"2026-11-30T10:00:00Z\"}}",
        };
        static const bool want[] = { true, true, false, false };
        for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
                json_t *j = json_loads(nodes[i], 0, NULL);
                struct se_object *o = NULL;
                struct se_decode_error err;
                assert_int_equal(se_decode_object(j, NULL, &o, &err), 0);
                assert_int_equal(se_proxy_node_eligible(se_node_of(o)), want[i]);
                se_object_unref(o);
                json_decref(j);
        }
        assert_false(se_proxy_node_eligible(NULL));
}

/* the health-check node port: dedented JSON, 200 only with local
 * endpoints and a healthy proxy */
static void test_proxyd__hc_body(void **state)
{
        (void)state;
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        assert_true(se_proxy_hc_body("ns", "lb", 2, true, &sb));
        assert_string_equal(sb.buf,
                            "{\n\t\"service\": {\n\t\t\"namespace\": \"ns\",\n\t\t\"name\": "
                            "\"lb\"\n\t},\n\t\"localEndpoints\": 2,\n\t"
                            "\"serviceProxyHealthy\": true\n}");
        se_strbuf_reset(&sb);
        assert_false(se_proxy_hc_body("ns", "lb", 0, true, &sb));
        se_strbuf_reset(&sb);
        assert_false(se_proxy_hc_body("ns", "lb", 3, false, &sb));
        assert_non_null(strstr(sb.buf, "\"serviceProxyHealthy\": false"));
        se_strbuf_release(&sb);
}

/* --cleanup: jumps from built-in (and foreign) chains deleted, our chains
 * flushed and deleted, everything else untouched */
static void test_proxyd__cleanup_text(void **state)
{
        (void)state;
        static const char save[] =
                "# Generated by iptables-save v1.8.9\n*mangle\n:PREROUTING ACCEPT [0:0]\n"
                ":KUBE-PROXY-CANARY - [0:0]\nCOMMIT\n"
                "*filter\n:INPUT ACCEPT [10:20]\n:KUBE-FORWARD - [0:0]\n:MINE - [0:0]\n"
                "-A INPUT -m comment --comment \"kubernetes health check service ports\" -j KUBE-NODEPORTS\n"
                "-A INPUT -p tcp --dport 22 -j MINE\n"
                "-A MINE -j KUBE-FORWARD\n"
                "-A KUBE-FORWARD -j ACCEPT\nCOMMIT\n"
                "*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-ABC - [0:0]\n"
                ":KUBE-SEP-XYZ - [0:0]\n:KUBE-KUBELET-CANARY - [0:0]\n"
                "-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n"
                "-A KUBE-SERVICES -d 10.0.0.1/32 -j KUBE-SVC-ABC\nCOMMIT\n";
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        assert_int_equal(se_proxy_cleanup_text(save, sizeof(save) - 1, &sb), 0);
        assert_string_equal(
                sb.buf,
                "*mangle\n:KUBE-PROXY-CANARY - [0:0]\n-X KUBE-PROXY-CANARY\nCOMMIT\n"
                "*filter\n:KUBE-FORWARD - [0:0]\n"
                "-D INPUT -m comment --comment \"kubernetes health check service ports\" -j KUBE-NODEPORTS\n"
                "-D MINE -j KUBE-FORWARD\n-X KUBE-FORWARD\nCOMMIT\n"
                "*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-ABC - [0:0]\n:KUBE-SEP-XYZ - [0:0]\n"
                "-D PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n"
                "-X KUBE-SERVICES\n-X KUBE-SVC-ABC\n-X KUBE-SEP-XYZ\nCOMMIT\n");
        /* nothing of ours: nothing to do */
        static const char clean[] = "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -j ACCEPT\nCOMMIT\n";
        se_strbuf_reset(&sb);
        assert_int_equal(se_proxy_cleanup_text(clean, sizeof(clean) - 1, &sb), 0);
        assert_int_equal(sb.len, 0);
        se_strbuf_release(&sb);
        assert_true(se_proxy_own_chain("KUBE-SVL-X", 10));
        assert_false(se_proxy_own_chain("KUBE-SVC-", 9));
        assert_false(se_proxy_own_chain("KUBE-KUBELET-CANARY", 19));
}

static struct se_proxy_table *table(const char *eps_dns, const char *eps_web)
{
        char yaml[2048];
        snprintf(
                yaml, sizeof(yaml),
                "apiVersion: v1\nkind: Service\nmetadata: {name: dns, namespace: ns}\n"
                "spec: {type: NodePort, clusterIP: 10.96.0.10, externalIPs: [192.0.2.1], ports: [{name: p, port: 53, protocol: UDP, nodePort: 30053}]}\n"
                "---\napiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: ns}\n"
                "spec: {clusterIP: 10.96.0.11, ports: [{name: p, port: 80, protocol: TCP}]}\n"
                "%s%s%s%s",
                eps_dns ?
                        "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                        "metadata: {name: dns-1, namespace: ns, labels: {kubernetes.io/service-name: dns}}\n"
                        "addressType: IPv4\nports: [{name: p, port: 53, protocol: UDP}]\nendpoints: " :
                        "",
                eps_dns ? eps_dns : "",
                eps_web ?
                        "\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                        "metadata: {name: web-1, namespace: ns, labels: {kubernetes.io/service-name: web}}\n"
                        "addressType: IPv4\nports: [{name: p, port: 80, protocol: TCP}]\nendpoints: " :
                        "",
                eps_web ? eps_web : "");
        struct se_store *s = se_store_new();
        struct se_diag d;
        assert_int_equal(se_manifest_load_buffer(s, "t", yaml, strlen(yaml), NULL, NULL, &d), 0);
        struct se_proxy_options o;
        se_proxy_options_init(&o);
        o.node_name = "n1";
        struct se_proxy_table *t = NULL;
        assert_int_equal(se_proxy_table_build(s, &o, SE_IPV4, &t), 0);
        se_store_free(s);
        return t;
}

/* UDP endpoint gone: its flows to every service address and the node port;
 * a UDP service getting its first endpoint: all its flows; TCP: none */
static void test_proxyd__conntrack_plan(void **state)
{
        (void)state;
        struct se_proxy_table *a = table("[{addresses: [10.1.0.1]}, {addresses: [10.1.0.2]}]",
                                         "[{addresses: [10.1.0.7]}]");
        struct se_proxy_table *b = table("[{addresses: [10.1.0.2]}]", NULL);
        struct se_proxy_ct_plan p;
        assert_int_equal(se_proxy_ct_plan(a, b, &p), 0);
        assert_int_equal(p.n, 3);
        assert_string_equal(p.flows[0].orig_dst, "10.96.0.10");
        assert_string_equal(p.flows[0].dst_nat, "10.1.0.1");
        assert_string_equal(p.flows[1].orig_dst, "192.0.2.1");
        assert_string_equal(p.flows[2].orig_dst, "");
        assert_int_equal(p.flows[2].orig_port_dst, 30053);
        const char *argv[16];
        char port[12];
        assert_int_equal(se_proxy_ct_argv(&p.flows[2], SE_IPV4, port, argv), 10);
        assert_string_equal(argv[6], "--orig-port-dst");
        assert_string_equal(argv[7], "30053");
        assert_string_equal(argv[9], "10.1.0.1");
        assert_null(argv[10]);
        se_proxy_ct_plan_release(&p);
        /* no endpoints -> one: everything towards the service goes */
        struct se_proxy_table *none = table(NULL, NULL);
        assert_int_equal(se_proxy_ct_plan(none, b, &p), 0);
        assert_int_equal(p.n, 3);
        assert_string_equal(p.flows[0].dst_nat, "");
        se_proxy_ct_plan_release(&p);
        /* nothing changed: nothing to delete */
        assert_int_equal(se_proxy_ct_plan(b, b, &p), 0);
        assert_int_equal(p.n, 0);
        se_proxy_ct_plan_release(&p);
        se_proxy_table_free(a);
        se_proxy_table_free(b);
        se_proxy_table_free(none);
}

static int cmp_ep_str(const void *x, const void *y)
{
        return strcmp(((const struct se_proxy_endpoint *)x)->str,
                      ((const struct se_proxy_endpoint *)y)->str);
}

/* In the child: 0, or the number of the check that failed. One UDP port
 * with N endpoints, then the same less the middle one. */
static int many_endpoints_plan(void)
{
        enum { N = 200000 };
        struct se_proxy_endpoint *eps = calloc(N, sizeof(*eps));
        char(*text)[24] = calloc(N, 24);
        if (!eps || !text)
                return 9;
        for (unsigned i = 0; i < N; i++) {
                snprintf(text[i], 24, "10.%u.%u.%u:53", 1 + i / 65536, i / 256 % 256, i % 256);
                eps[i].str = text[i];
                eps[i].ip = text[i]; /* what the plan copies; the port suffix does no harm */
                eps[i].ready = eps[i].serving = true;
        }
        qsort(eps, N, sizeof(*eps), cmp_ep_str); /* sorted by str, as tables are */
        struct se_proxy_svcport old = { .spn = "ns/dns:p",
                                        .protocol = SE_PROTO_UDP,
                                        .cluster_ip = "10.96.0.10",
                                        .eps = eps,
                                        .n_eps = N };
        struct se_proxy_svcport cur = old;
        struct se_proxy_endpoint *less = calloc(N, sizeof(*less));
        if (!less)
                return 9;
        memcpy(less, eps, (N / 2) * sizeof(*eps));
        memcpy(less + N / 2, eps + N / 2 + 1, (N - N / 2 - 1) * sizeof(*eps));
        cur.eps = less;
        cur.n_eps = N - 1;
        struct se_proxy_table a = { .family = SE_IPV4, .ports = &old, .n_ports = 1 };
        struct se_proxy_table b = { .family = SE_IPV4, .ports = &cur, .n_ports = 1 };
        struct se_proxy_ct_plan p;
        if (se_proxy_ct_plan(&a, &b, &p) != 0)
                return 1;
        if (p.n != 1 || strcmp(p.flows[0].dst_nat, eps[N / 2].ip) != 0)
                return 2;
        se_proxy_ct_plan_release(&p);
        free(less);
        free(text);
        free(eps);
        return 0;
}

/* A port's endpoints are looked up, not scanned, when planning stale flows
 * (a Service may have tens of thousands). Budget: CPU seconds for the
 * child, far above the lookups' need; the scan took minutes for 200,000.
 * None under valgrind (VALGRIND=1). */
static void test_proxyd__conntrack_plan_many_endpoints(void **state)
{
        (void)state;
        t_run_with_cpu_budget(many_endpoints_plan, 20);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_proxyd__go_time),
                cmocka_unit_test(test_proxyd__healthz),
                cmocka_unit_test(test_proxyd__node_eligible),
                cmocka_unit_test(test_proxyd__hc_body),
                cmocka_unit_test(test_proxyd__cleanup_text),
                cmocka_unit_test(test_proxyd__conntrack_plan),
                cmocka_unit_test(test_proxyd__conntrack_plan_many_endpoints),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

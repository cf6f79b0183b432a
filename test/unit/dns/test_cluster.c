/* The zone's options and the corners of shared/reference/dns.md §1.2:
 * dual-stack SRV weights, endpoint names of ClusterIP services, pods
 * insecure|verified|disabled, ExternalName chains, PTRs of a Service whose
 * namespace is gone, truncation figures observed with CoreDNS 1.15. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "dnstest.h"

#define SOA_CL \
 "NS cluster.local. 5 SOA ns.dns.cluster.local. hostmaster.cluster.local. 1700000000 7200 1800 86400 5\n"

static const char cluster[] =
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns1}\n---\n"
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: default}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: dual, namespace: ns1}\n"
        "spec: {clusterIP: 10.96.0.20, clusterIPs: [10.96.0.20, 'fd00::20'], ports: [{name: http, port: 80}, {name: dns, port: 53, protocol: UDP}]}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: ns1}\n"
        "spec: {clusterIP: 10.96.0.30, ports: [{name: http, port: 80, targetPort: 8080}]}\n---\n"
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: web-x, namespace: ns1, labels: {kubernetes.io/service-name: web}}\n"
        "addressType: IPv4\n"
        "endpoints:\n"
        "- {addresses: [10.244.1.10], conditions: {ready: true}, targetRef: {kind: Pod, name: web-abc, namespace: ns1}}\n"
        "- {addresses: [10.244.1.11], conditions: {ready: false}, targetRef: {kind: Pod, name: web-def, namespace: ns1}}\n"
        "ports: [{name: http, port: 8080, protocol: TCP}]\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: sts, namespace: ns1}\n"
        "spec: {clusterIP: None, ports: [{name: peer, port: 80, targetPort: 2380}]}\n---\n"
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: sts-x, namespace: ns1, labels: {kubernetes.io/service-name: sts}}\n"
        "addressType: IPv4\n"
        "endpoints:\n"
        "- {addresses: [10.244.2.1], hostname: sts-0, conditions: {ready: true}}\n"
        "- {addresses: [10.244.2.2], hostname: sts-1, conditions: {ready: false}}\n"
        "ports: [{name: peer, port: 2380, protocol: TCP}]\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: empty-hl, namespace: ns1}\n"
        "spec: {clusterIP: None, ports: [{name: x, port: 1}]}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: ext-loop, namespace: ns1}\n"
        "spec: {type: ExternalName, externalName: ext-loop.ns1.svc.cluster.local}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: ext-ip, namespace: ns1}\n"
        "spec: {type: ExternalName, externalName: 192.0.2.99}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: ext-chain, namespace: ns1}\n"
        "spec: {type: ExternalName, externalName: web.ns1.svc.cluster.local.}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: ghost, namespace: ghost}\n"
        "spec: {clusterIP: 10.96.9.9, ports: [{port: 80}]}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p1, namespace: ns1}\n"
        "spec: {containers: [{name: c}]}\nstatus: {phase: Running, podIP: 10.244.1.5, podIPs: [{ip: 10.244.1.5}, {ip: 'fd00:244::5'}]}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: done, namespace: ns1}\n"
        "spec: {containers: [{name: c}]}\nstatus: {phase: Succeeded, podIP: 10.244.1.6}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: going, namespace: ns1, deletionTimestamp: '2026-01-01T00:00:00Z'}\n"
        "spec: {containers: [{name: c}]}\nstatus: {phase: Running, podIP: 10.244.1.7}\n";

static void dual_stack_srv(void **state)
{
        (void)state;
        struct se_dns_zone *z = t_zone(cluster, NULL);
        assert_answer(z, "dual.ns1.svc.cluster.local", 1,
                      "NOERROR qr aa rd\nAN dual.ns1.svc.cluster.local. 5 A 10.96.0.20\n");
        assert_answer(z, "dual.ns1.svc.cluster.local", 28,
                      "NOERROR qr aa rd\nAN dual.ns1.svc.cluster.local. 5 AAAA fd00::20\n");
        /* one SRV per port, 100 shared by 2 addresses x 2 ports */
        assert_answer(z, "dual.ns1.svc.cluster.local", 33,
                      "NOERROR qr aa rd\n"
                      "AN dual.ns1.svc.cluster.local. 5 SRV 0 25 80 dual.ns1.svc.cluster.local.\n"
                      "AN dual.ns1.svc.cluster.local. 5 SRV 0 25 53 dual.ns1.svc.cluster.local.\n"
                      "AR dual.ns1.svc.cluster.local. 5 A 10.96.0.20\n"
                      "AR dual.ns1.svc.cluster.local. 5 AAAA fd00::20\n");
        assert_answer(
                z, "_dns._udp.dual.ns1.svc.cluster.local", 33,
                "NOERROR qr aa rd\n"
                "AN _dns._udp.dual.ns1.svc.cluster.local. 5 SRV 0 50 53 dual.ns1.svc.cluster.local.\n"
                "AR dual.ns1.svc.cluster.local. 5 A 10.96.0.20\n"
                "AR dual.ns1.svc.cluster.local. 5 AAAA fd00::20\n");
        assert_answer(z, "_dns._tcp.dual.ns1.svc.cluster.local", 33, "NXDOMAIN qr aa rd\n" SOA_CL);
        se_dns_zone_unref(z);
}

static void clusterip_endpoints(void **state)
{
        (void)state;
        struct se_dns_zone *z = t_zone(cluster, NULL);
        assert_answer(
                z, "10-244-1-10.web.ns1.svc.cluster.local", 1,
                "NOERROR qr aa rd\nAN 10-244-1-10.web.ns1.svc.cluster.local. 5 A 10.244.1.10\n");
        assert_answer(z, "10-244-1-11.web.ns1.svc.cluster.local", 1, "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(z, "web-abc.web.ns1.svc.cluster.local", 1, "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(z, "10.1.244.10.in-addr.arpa", 12,
                      "NOERROR qr aa rd\nAN 10.1.244.10.in-addr.arpa. 5 PTR "
                      "10-244-1-10.web.ns1.svc.cluster.local.\n");
        /* the service's own SRV: its port, not the endpoints' */
        assert_answer(
                z, "_http._tcp.web.ns1.svc.cluster.local", 33,
                "NOERROR qr aa rd\n"
                "AN _http._tcp.web.ns1.svc.cluster.local. 5 SRV 0 100 80 web.ns1.svc.cluster.local.\n"
                "AR web.ns1.svc.cluster.local. 5 A 10.96.0.30\n");
        se_dns_zone_unref(z);

        struct se_dns_options o = { .ttl = 5, .endpoint_pod_names = true };
        z = t_zone(cluster, &o);
        assert_answer(z, "web-abc.web.ns1.svc.cluster.local", 1,
                      "NOERROR qr aa rd\nAN web-abc.web.ns1.svc.cluster.local. 5 A 10.244.1.10\n");
        assert_answer(z, "10-244-1-10.web.ns1.svc.cluster.local", 1, "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(z, "10.1.244.10.in-addr.arpa", 12,
                      "NOERROR qr aa rd\nAN 10.1.244.10.in-addr.arpa. 5 PTR "
                      "web-abc.web.ns1.svc.cluster.local.\n");
        /* a hostname still wins over the pod name */
        assert_answer(z, "sts-0.sts.ns1.svc.cluster.local", 1,
                      "NOERROR qr aa rd\nAN sts-0.sts.ns1.svc.cluster.local. 5 A 10.244.2.1\n");
        se_dns_zone_unref(z);
}

static void headless_hostnames(void **state)
{
        (void)state;
        struct se_dns_zone *z = t_zone(cluster, NULL);
        assert_answer(z, "sts.ns1.svc.cluster.local", 1,
                      "NOERROR qr aa rd\nAN sts.ns1.svc.cluster.local. 5 A 10.244.2.1\n");
        assert_answer(z, "sts-1.sts.ns1.svc.cluster.local", 1, "NXDOMAIN qr aa rd\n" SOA_CL);
        /* the slice's port (the target port), not the service's */
        assert_answer(
                z, "_peer._tcp.sts.ns1.svc.cluster.local", 33,
                "NOERROR qr aa rd\n"
                "AN _peer._tcp.sts.ns1.svc.cluster.local. 5 SRV 0 100 2380 sts-0.sts.ns1.svc.cluster.local.\n"
                "AR sts-0.sts.ns1.svc.cluster.local. 5 A 10.244.2.1\n");
        assert_answer(
                z, "sts-0.sts.ns1.svc.cluster.local", 33,
                "NOERROR qr aa rd\n"
                "AN sts-0.sts.ns1.svc.cluster.local. 5 SRV 0 100 2380 sts-0.sts.ns1.svc.cluster.local.\n"
                "AR sts-0.sts.ns1.svc.cluster.local. 5 A 10.244.2.1\n");
        assert_answer(z, "x.sts-0.sts.ns1.svc.cluster.local", 33, "NXDOMAIN qr aa rd\n" SOA_CL);
        /* no ready endpoint: NXDOMAIN for every type (spec 2.4.1) */
        assert_answer(z, "empty-hl.ns1.svc.cluster.local", 1, "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(z, "empty-hl.ns1.svc.cluster.local", 33, "NXDOMAIN qr aa rd\n" SOA_CL);
        se_dns_zone_unref(z);
}

static void external_corners(void **state)
{
        (void)state;
        struct se_dns_zone *z = t_zone(cluster, NULL);
        assert_answer(z, "ext-loop.ns1.svc.cluster.local", 1, "NOERROR qr aa rd\n" SOA_CL);
        assert_answer(z, "ext-loop.ns1.svc.cluster.local", 5,
                      "NOERROR qr aa rd\nAN ext-loop.ns1.svc.cluster.local. 5 CNAME "
                      "ext-loop.ns1.svc.cluster.local.\n");
        assert_answer(z, "ext-ip.ns1.svc.cluster.local", 1, "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(z, "ext-ip.ns1.svc.cluster.local", 5, "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(z, "ext-chain.ns1.svc.cluster.local", 1,
                      "NOERROR qr aa rd\n"
                      "AN ext-chain.ns1.svc.cluster.local. 5 CNAME web.ns1.svc.cluster.local.\n"
                      "AN web.ns1.svc.cluster.local. 5 A 10.96.0.30\n");
        se_dns_zone_unref(z);
}

static void namespace_gone(void **state)
{
        (void)state;
        struct se_dns_zone *z = t_zone(cluster, NULL);
        assert_answer(z, "ghost.ghost.svc.cluster.local", 1, "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(z, "ghost.svc.cluster.local", 1, "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(
                z, "9.9.96.10.in-addr.arpa", 12,
                "NOERROR qr aa rd\nAN 9.9.96.10.in-addr.arpa. 5 PTR ghost.ghost.svc.cluster.local.\n");
        se_dns_zone_unref(z);
}

static void no_namespace_objects(void **state)
{
        (void)state;
        /* manifest files without Namespace objects: the namespaces objects
         * name, and the built-in ones, exist */
        struct se_dns_zone *z =
                t_zone("apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: team}\n"
                       "spec: {clusterIP: 10.96.1.1, ports: [{port: 80}]}\n",
                       NULL);
        assert_answer(z, "a.team.svc.cluster.local", 1,
                      "NOERROR qr aa rd\nAN a.team.svc.cluster.local. 5 A 10.96.1.1\n");
        assert_answer(z, "kube-system.svc.cluster.local", 1, "NOERROR qr aa rd\n" SOA_CL);
        assert_answer(z, "nope.svc.cluster.local", 1, "NXDOMAIN qr aa rd\n" SOA_CL);
        se_dns_zone_unref(z);
        /* headless said only in clusterIPs */
        z = t_zone(
                "apiVersion: v1\nkind: Service\nmetadata: {name: h, namespace: default}\n"
                "spec: {clusterIPs: [None]}\n---\n"
                "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                "metadata: {name: h, namespace: default, labels: {kubernetes.io/service-name: h}}\n"
                "addressType: IPv4\nendpoints: [{addresses: [10.0.0.1]}]\n",
                NULL);
        assert_answer(z, "h.default.svc.cluster.local", 1,
                      "NOERROR qr aa rd\nAN h.default.svc.cluster.local. 5 A 10.0.0.1\n");
        se_dns_zone_unref(z);
}

static void pods_insecure(void **state)
{
        (void)state;
        struct se_dns_options o = { .ttl = 5, .pods = SE_DNS_PODS_INSECURE };
        struct se_dns_zone *z = t_zone(cluster, &o);
        assert_answer(z, "10-244-1-5.ns1.pod.cluster.local", 1,
                      "NOERROR qr aa rd\nAN 10-244-1-5.ns1.pod.cluster.local. 5 A 10.244.1.5\n");
        /* any address will do, a pod or not */
        assert_answer(z, "1-2-3-4.ns1.pod.cluster.local", 1,
                      "NOERROR qr aa rd\nAN 1-2-3-4.ns1.pod.cluster.local. 5 A 1.2.3.4\n");
        assert_answer(z, "1-2-3-4.ns1.pod.cluster.local", 28, "NOERROR qr aa rd\n" SOA_CL);
        assert_answer(
                z, "fd00-244--5.ns1.pod.cluster.local", 28,
                "NOERROR qr aa rd\nAN fd00-244--5.ns1.pod.cluster.local. 5 AAAA fd00:244::5\n");
        assert_answer(z, "x.1-2-3-4.ns1.pod.cluster.local", 1,
                      "NOERROR qr aa rd\nAN x.1-2-3-4.ns1.pod.cluster.local. 5 A 1.2.3.4\n");
        assert_answer(z, "not-an-ip.ns1.pod.cluster.local", 1, "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(z, "1-2-3-4.ghost.pod.cluster.local", 1, "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(z, "1-2-3-4.ns1.svc.cluster.local", 1, "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(z, "ns1.pod.cluster.local", 1, "NOERROR qr aa rd\n" SOA_CL);
        se_dns_zone_unref(z);
}

static void pods_verified(void **state)
{
        (void)state;
        struct se_dns_options o = { .ttl = 5, .pods = SE_DNS_PODS_VERIFIED };
        struct se_dns_zone *z = t_zone(cluster, &o);
        assert_answer(z, "10-244-1-5.ns1.pod.cluster.local", 1,
                      "NOERROR qr aa rd\nAN 10-244-1-5.ns1.pod.cluster.local. 5 A 10.244.1.5\n");
        assert_answer(z, "x.10-244-1-5.ns1.pod.cluster.local", 1,
                      "NOERROR qr aa rd\nAN x.10-244-1-5.ns1.pod.cluster.local. 5 A 10.244.1.5\n");
        assert_answer(z, "1-2-3-4.ns1.pod.cluster.local", 1, "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(z, "10-244-1-5.default.pod.cluster.local", 1, "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(z, "10-244-1-6.ns1.pod.cluster.local", 1, "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(z, "10-244-1-7.ns1.pod.cluster.local", 1, "NXDOMAIN qr aa rd\n" SOA_CL);
        se_dns_zone_unref(z);
}

static void pods_disabled(void **state)
{
        (void)state;
        struct se_dns_zone *z = t_zone(cluster, NULL);
        assert_answer(z, "10-244-1-5.ns1.pod.cluster.local", 1, "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(z, "ns1.pod.cluster.local", 1, "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(z, "pod.cluster.local", 1, "NOERROR qr aa rd\n" SOA_CL);
        se_dns_zone_unref(z);
}

static void options(void **state)
{
        (void)state;
        struct se_dns_options o = { .ttl = 30, .zone = "Example.ORG." };
        struct se_dns_zone *z = t_zone(cluster, &o);
        assert_answer(z, "web.ns1.svc.example.org", 1,
                      "NOERROR qr aa rd\nAN web.ns1.svc.example.org. 30 A 10.96.0.30\n");
        assert_answer(z, "web.ns1.svc.cluster.local", 1, "FORWARD");
        assert_answer(z, "nope.example.org", 1,
                      "NXDOMAIN qr aa rd\nNS example.org. 30 SOA ns.dns.example.org. "
                      "hostmaster.example.org. 1700000000 7200 1800 86400 30\n");
        se_dns_zone_unref(z);
        /* the SOA's own TTL stops at 300, its minimum is the ttl */
        o = (struct se_dns_options){ .ttl = 600 };
        z = t_zone(cluster, &o);
        assert_answer(z, "nope.cluster.local", 1,
                      "NXDOMAIN qr aa rd\nNS cluster.local. 300 SOA ns.dns.cluster.local. "
                      "hostmaster.cluster.local. 1700000000 7200 1800 86400 600\n");
        se_dns_zone_unref(z);

        struct se_store *st = se_store_new();
        struct se_diag d = { 0 };
        static const char *const bad[] = { "a..b", "bad_zone", "", ".", "-x.local" };
        for (size_t i = 0; i < SE_ARRAY_SIZE(bad); i++) {
                struct se_dns_options b = { .zone = bad[i] };
                struct se_dns_zone *bz = NULL;
                d.text[0] = '\0';
                assert_int_equal(se_dns_zone_build(st, &b, &bz, &d), -EINVAL);
                assert_null(bz);
                assert_non_null(strstr(d.text, "zone"));
        }
        se_store_free(st);
}

static void shared_addresses(void **state)
{
        (void)state;
        /* one address under two names of one slice and in a second Service:
         * one PTR per distinct name, in Service order (found by UBSan's
         * null memcmp in the fuzzer: a PTR has no fixed rdata) */
        struct se_dns_zone *z = t_zone(
                "apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: default}\n"
                "spec: {clusterIP: None}\n---\n"
                "apiVersion: v1\nkind: Service\nmetadata: {name: b, namespace: default}\n"
                "spec: {clusterIP: None}\n---\n"
                "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                "metadata: {name: a, namespace: default, labels: {kubernetes.io/service-name: a}}\n"
                "addressType: IPv4\n"
                "endpoints: [{addresses: [10.0.0.1], hostname: x}, {addresses: [10.0.0.1], hostname: x},"
                " {addresses: [10.0.0.1], hostname: w}]\n---\n"
                "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                "metadata: {name: b, namespace: default, labels: {kubernetes.io/service-name: b}}\n"
                "addressType: IPv4\nendpoints: [{addresses: [10.0.0.1]}]\n",
                NULL);
        assert_answer(z, "1.0.0.10.in-addr.arpa", 12,
                      "NOERROR qr aa rd\n"
                      "AN 1.0.0.10.in-addr.arpa. 5 PTR x.a.default.svc.cluster.local.\n"
                      "AN 1.0.0.10.in-addr.arpa. 5 PTR w.a.default.svc.cluster.local.\n"
                      "AN 1.0.0.10.in-addr.arpa. 5 PTR 10-0-0-1.b.default.svc.cluster.local.\n");
        assert_answer(z, "x.a.default.svc.cluster.local", 1,
                      "NOERROR qr aa rd\nAN x.a.default.svc.cluster.local. 5 A 10.0.0.1\n");
        se_dns_zone_unref(z);
}

/* 130 ready endpoints: the sizes CoreDNS 1.15 gave (reference §1.2 sizes) */
static char *big_cluster(void)
{
        char *y = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&y, &n);
        fputs("apiVersion: v1\nkind: Namespace\nmetadata: {name: default}\n---\n"
              "apiVersion: v1\nkind: Service\nmetadata: {name: big, namespace: default}\n"
              "spec: {clusterIP: None, ports: [{name: http, port: 80}]}\n---\n"
              "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
              "metadata: {name: big-1, namespace: default, labels: {kubernetes.io/service-name: big}}\n"
              "addressType: IPv4\nports: [{name: http, port: 80, protocol: TCP}]\nendpoints:\n",
              f);
        for (int i = 1; i <= 130; i++)
                fprintf(f, "- {addresses: [10.1.%d.%d], conditions: {ready: true}}\n", i / 100,
                        i % 100);
        fclose(f);
        return y;
}

static void truncation(void **state)
{
        (void)state;
        char *y = big_cluster();
        struct se_dns_zone *z = t_zone(y, NULL);
        free(y);
        static uint8_t out[65535];
        static const struct {
                int edns;
                enum se_dns_transport tr;
                size_t len;
                unsigned an;
                bool tc;
        } cases[] = {
                { -1, SE_DNS_UDP, 511, 29, true },    { 512, SE_DNS_UDP, 506, 28, true },
                { 1232, SE_DNS_UDP, 1226, 73, true }, { 4096, SE_DNS_UDP, 2138, 130, false },
                { -1, SE_DNS_TCP, 2127, 130, false }, { 100, SE_DNS_UDP, 506, 28, true },
        };
        for (size_t i = 0; i < SE_ARRAY_SIZE(cases); i++) {
                size_t len = t_raw(z, "big.default.svc.cluster.local", 1, cases[i].edns,
                                   cases[i].tr, out, sizeof(out));
                assert_int_equal(len, cases[i].len);
                assert_int_equal(t_u16(out + 6), cases[i].an);
                assert_int_equal((out[2] & 0x02) != 0, cases[i].tc);
                free(t_render(out, len)); /* decodes whole: no half record */
        }
        /* the SRV answer: weight 1 each (100/130 rounds to 0: at least 1),
         * cut at 4096, whole over TCP */
        size_t len =
                t_raw(z, "big.default.svc.cluster.local", 33, 4096, SE_DNS_UDP, out, sizeof(out));
        assert_true(len <= 4096);
        assert_true(out[2] & 0x02);
        char *text = t_render(out, len);
        assert_non_null(strstr(text, "SRV 0 1 80 10-1-0-1.big.default.svc.cluster.local."));
        free(text);
        len = t_raw(z, "big.default.svc.cluster.local", 33, -1, SE_DNS_TCP, out, sizeof(out));
        assert_false(out[2] & 0x02);
        assert_int_equal(t_u16(out + 6), 130);
        assert_int_equal(t_u16(out + 10), 130);
        free(t_render(out, len));
        se_dns_zone_unref(z);
}

/* A headless SRV answer whose records all fit the client's 1232 bytes but
 * whose additional A records do not: CoreDNS (miekg/dns Truncate) sets TC
 * for a cut additional section too, not only for lost answers. */
static void truncation_of_additional(void **state)
{
        (void)state;
        char *y = NULL;
        size_t ylen = 0;
        FILE *f = open_memstream(&y, &ylen);
        fputs("apiVersion: v1\nkind: Namespace\nmetadata: {name: default}\n---\n"
              "apiVersion: v1\nkind: Service\nmetadata: {name: hs-abcdefghij, namespace: default}\n"
              "spec: {clusterIP: None, ports: [{name: http, port: 80}]}\n---\n"
              "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
              "metadata: {name: hs-1, namespace: default, labels: {kubernetes.io/service-name: "
              "hs-abcdefghij}}\n"
              "addressType: IPv4\nports: [{name: http, port: 80, protocol: TCP}]\nendpoints:\n",
              f);
        for (int i = 1; i <= 15; i++)
                fprintf(f, "- {addresses: [10.1.0.%d], conditions: {ready: true}}\n", i);
        fclose(f);
        struct se_dns_zone *z = t_zone(y, NULL);
        free(y);
        static uint8_t out[65535];
        size_t len = t_raw(z, "hs-abcdefghij.default.svc.cluster.local", 33, 1232, SE_DNS_UDP, out,
                           sizeof(out));
        assert_true(len <= 1232);
        assert_int_equal(t_u16(out + 6), 15); /* every SRV */
        assert_true(t_u16(out + 10) < 16); /* not every A (+ the OPT) */
        assert_true(out[2] & 0x02);
        free(t_render(out, len));
        /* room for all: no TC */
        len = t_raw(z, "hs-abcdefghij.default.svc.cluster.local", 33, 4096, SE_DNS_UDP, out,
                    sizeof(out));
        assert_int_equal(t_u16(out + 10), 16);
        assert_false(out[2] & 0x02);
        se_dns_zone_unref(z);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(dual_stack_srv),
                cmocka_unit_test(clusterip_endpoints),
                cmocka_unit_test(headless_hostnames),
                cmocka_unit_test(external_corners),
                cmocka_unit_test(namespace_gone),
                cmocka_unit_test(no_namespace_objects),
                cmocka_unit_test(pods_insecure),
                cmocka_unit_test(pods_verified),
                cmocka_unit_test(pods_disabled),
                cmocka_unit_test(options),
                cmocka_unit_test(shared_addresses),
                cmocka_unit_test(truncation),
                cmocka_unit_test(truncation_of_additional),
        };
        return cmocka_run_group_tests_name("dns_cluster", tests, NULL, NULL);
}

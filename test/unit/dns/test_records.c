/* Record forms of the cluster zone: the cluster of CoreDNS's
 * plugin/kubernetes handler_test.go (svc1, svcempty, svc6, hdls1, hdlsprtls,
 * external, external-to-service) with the answers its table expects (the
 * schema version now 1.1.0, wildcards gone since CoreDNS 1.9), then what
 * ../shared/reference/dns.md observed of CoreDNS 1.15 beyond it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "dnstest.h"

#define SOA_CL \
 "NS cluster.local. 5 SOA ns.dns.cluster.local. hostmaster.cluster.local. 1700000000 7200 1800 86400 5\n"

static const char coredns_cluster[] =
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: testns}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: svc1, namespace: testns}\n"
        "spec: {clusterIP: 10.0.0.1, clusterIPs: [10.0.0.1], ports: [{name: http, port: 80, protocol: TCP}]}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: svcempty, namespace: testns}\n"
        "spec: {clusterIP: 10.0.0.1, ports: [{name: http, port: 80, protocol: TCP}]}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: svc6, namespace: testns}\n"
        "spec: {clusterIP: '1234:abcd::1', ports: [{name: http, port: 80, protocol: TCP}]}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: hdls1, namespace: testns}\n"
        "spec: {clusterIP: None}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: hdlsprtls, namespace: testns}\n"
        "spec: {clusterIP: None}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: external, namespace: testns}\n"
        "spec: {type: ExternalName, externalName: ext.interwebs.test, ports: [{name: http, port: 80}]}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: external-to-service, namespace: testns}\n"
        "spec: {type: ExternalName, externalName: svc1.testns.svc.cluster.local}\n---\n"
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: hdls1-a, namespace: testns, labels: {kubernetes.io/service-name: hdls1}}\n"
        "addressType: IPv4\n"
        "endpoints:\n"
        "- {addresses: [172.0.0.2]}\n"
        "- {addresses: [172.0.0.3], conditions: {ready: true}}\n"
        "- {addresses: [172.0.0.4], hostname: dup-name}\n"
        "- {addresses: [172.0.0.5], hostname: dup-name}\n"
        "- {addresses: [172.0.0.9], conditions: {ready: false}}\n"
        "ports: [{name: http, port: 80, protocol: TCP}]\n---\n"
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: hdls1-b, namespace: testns, labels: {kubernetes.io/service-name: hdls1}}\n"
        "addressType: IPv6\n"
        "endpoints:\n"
        "- {addresses: ['5678:abcd::1']}\n"
        "- {addresses: ['5678:abcd::2']}\n"
        "ports: [{name: http, port: 80, protocol: TCP}]\n---\n"
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: hdlsprtls, namespace: testns, labels: {kubernetes.io/service-name: hdlsprtls}}\n"
        "addressType: IPv4\n"
        "endpoints: [{addresses: [172.0.0.20]}]\n";

static struct se_dns_zone *Z;

static int setup(void **state)
{
        (void)state;
        Z = t_zone(coredns_cluster, NULL);
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        Z = se_dns_zone_unref(Z);
        return 0;
}

static void clusterip_a(void **state)
{
        (void)state;
        assert_answer(Z, "svc1.testns.svc.cluster.local", 1,
                      "NOERROR qr aa rd\nAN svc1.testns.svc.cluster.local. 5 A 10.0.0.1\n");
        assert_answer(Z, "svcempty.testns.svc.cluster.local", 1,
                      "NOERROR qr aa rd\nAN svcempty.testns.svc.cluster.local. 5 A 10.0.0.1\n");
        assert_answer(Z, "svc6.testns.svc.cluster.local", 28,
                      "NOERROR qr aa rd\nAN svc6.testns.svc.cluster.local. 5 AAAA 1234:abcd::1\n");
        /* the other family: NODATA */
        assert_answer(Z, "svc1.testns.svc.cluster.local", 28, "NOERROR qr aa rd\n" SOA_CL);
}

static void clusterip_srv(void **state)
{
        (void)state;
        assert_answer(
                Z, "svc1.testns.svc.cluster.local", 33,
                "NOERROR qr aa rd\n"
                "AN svc1.testns.svc.cluster.local. 5 SRV 0 100 80 svc1.testns.svc.cluster.local.\n"
                "AR svc1.testns.svc.cluster.local. 5 A 10.0.0.1\n");
        assert_answer(
                Z, "_http._tcp.svc1.testns.svc.cluster.local", 33,
                "NOERROR qr aa rd\n"
                "AN _http._tcp.svc1.testns.svc.cluster.local. 5 SRV 0 100 80 svc1.testns.svc.cluster.local.\n"
                "AR svc1.testns.svc.cluster.local. 5 A 10.0.0.1\n");
        assert_answer(
                Z, "_http._tcp.svcempty.testns.svc.cluster.local", 33,
                "NOERROR qr aa rd\n"
                "AN _http._tcp.svcempty.testns.svc.cluster.local. 5 SRV 0 100 80 svcempty.testns.svc.cluster.local.\n"
                "AR svcempty.testns.svc.cluster.local. 5 A 10.0.0.1\n");
        assert_answer(
                Z, "_http._tcp.svc6.testns.svc.cluster.local", 33,
                "NOERROR qr aa rd\n"
                "AN _http._tcp.svc6.testns.svc.cluster.local. 5 SRV 0 100 80 svc6.testns.svc.cluster.local.\n"
                "AR svc6.testns.svc.cluster.local. 5 AAAA 1234:abcd::1\n");
        /* underscores are optional; a port name alone is an endpoint name */
        assert_answer(
                Z, "http.tcp.svc1.testns.svc.cluster.local", 33,
                "NOERROR qr aa rd\n"
                "AN http.tcp.svc1.testns.svc.cluster.local. 5 SRV 0 100 80 svc1.testns.svc.cluster.local.\n"
                "AR svc1.testns.svc.cluster.local. 5 A 10.0.0.1\n");
        assert_answer(
                Z, "_http._tcp.svc1.testns.svc.cluster.local", 1,
                "NOERROR qr aa rd\nAN _http._tcp.svc1.testns.svc.cluster.local. 5 A 10.0.0.1\n");
        assert_answer(Z, "_http.svc1.testns.svc.cluster.local", 33, "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(Z, "_http._udp.svc1.testns.svc.cluster.local", 33,
                      "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(Z, "*._not-udp-or-tcp.svc1.testns.svc.cluster.local", 33,
                      "NXDOMAIN qr aa rd\n" SOA_CL);
        /* three labels left of the service: NXDOMAIN */
        assert_answer(Z, "x._http._tcp.svc1.testns.svc.cluster.local", 1,
                      "NXDOMAIN qr aa rd\n" SOA_CL);
}

static void headless(void **state)
{
        (void)state;
        assert_answer(Z, "hdls1.testns.svc.cluster.local", 1,
                      "NOERROR qr aa rd\n"
                      "AN hdls1.testns.svc.cluster.local. 5 A 172.0.0.2\n"
                      "AN hdls1.testns.svc.cluster.local. 5 A 172.0.0.3\n"
                      "AN hdls1.testns.svc.cluster.local. 5 A 172.0.0.4\n"
                      "AN hdls1.testns.svc.cluster.local. 5 A 172.0.0.5\n");
        assert_answer(Z, "hdls1.testns.svc.cluster.local", 28,
                      "NOERROR qr aa rd\n"
                      "AN hdls1.testns.svc.cluster.local. 5 AAAA 5678:abcd::1\n"
                      "AN hdls1.testns.svc.cluster.local. 5 AAAA 5678:abcd::2\n");
        assert_answer(Z, "hdlsprtls.testns.svc.cluster.local", 1,
                      "NOERROR qr aa rd\nAN hdlsprtls.testns.svc.cluster.local. 5 A 172.0.0.20\n");
        assert_answer(Z, "172-0-0-20.hdlsprtls.testns.svc.cluster.local", 1,
                      "NOERROR qr aa rd\n"
                      "AN 172-0-0-20.hdlsprtls.testns.svc.cluster.local. 5 A 172.0.0.20\n");
        assert_answer(
                Z, "172-0-0-2.hdls1.testns.svc.cluster.local", 1,
                "NOERROR qr aa rd\nAN 172-0-0-2.hdls1.testns.svc.cluster.local. 5 A 172.0.0.2\n");
        assert_answer(Z, "dup-name.hdls1.testns.svc.cluster.local", 1,
                      "NOERROR qr aa rd\n"
                      "AN dup-name.hdls1.testns.svc.cluster.local. 5 A 172.0.0.4\n"
                      "AN dup-name.hdls1.testns.svc.cluster.local. 5 A 172.0.0.5\n");
        assert_answer(Z, "5678-abcd--2.hdls1.testns.svc.cluster.local", 28,
                      "NOERROR qr aa rd\n"
                      "AN 5678-abcd--2.hdls1.testns.svc.cluster.local. 5 AAAA 5678:abcd::2\n");
        /* a not-ready endpoint has no name */
        assert_answer(Z, "172-0-0-9.hdls1.testns.svc.cluster.local", 1,
                      "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(Z, "bogusendpoint.hdls1.testns.svc.cluster.local", 1,
                      "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(Z, "bogusendpoint.svc0.testns.svc.cluster.local", 1,
                      "NXDOMAIN qr aa rd\n" SOA_CL);
        /* headless without ports: A works, SRV is NODATA */
        assert_answer(Z, "hdlsprtls.testns.svc.cluster.local", 33, "NOERROR qr aa rd\n" SOA_CL);
}

static void headless_srv(void **state)
{
        (void)state;
        /* six (address, port) pairs: weight 100/6; dup-name's two SRV are
         * one, its two addresses both additional */
        assert_answer(
                Z, "_http._tcp.hdls1.testns.svc.cluster.local", 33,
                "NOERROR qr aa rd\n"
                "AN _http._tcp.hdls1.testns.svc.cluster.local. 5 SRV 0 16 80 172-0-0-2.hdls1.testns.svc.cluster.local.\n"
                "AN _http._tcp.hdls1.testns.svc.cluster.local. 5 SRV 0 16 80 172-0-0-3.hdls1.testns.svc.cluster.local.\n"
                "AN _http._tcp.hdls1.testns.svc.cluster.local. 5 SRV 0 16 80 dup-name.hdls1.testns.svc.cluster.local.\n"
                "AN _http._tcp.hdls1.testns.svc.cluster.local. 5 SRV 0 16 80 5678-abcd--1.hdls1.testns.svc.cluster.local.\n"
                "AN _http._tcp.hdls1.testns.svc.cluster.local. 5 SRV 0 16 80 5678-abcd--2.hdls1.testns.svc.cluster.local.\n"
                "AR 172-0-0-2.hdls1.testns.svc.cluster.local. 5 A 172.0.0.2\n"
                "AR 172-0-0-3.hdls1.testns.svc.cluster.local. 5 A 172.0.0.3\n"
                "AR dup-name.hdls1.testns.svc.cluster.local. 5 A 172.0.0.4\n"
                "AR dup-name.hdls1.testns.svc.cluster.local. 5 A 172.0.0.5\n"
                "AR 5678-abcd--1.hdls1.testns.svc.cluster.local. 5 AAAA 5678:abcd::1\n"
                "AR 5678-abcd--2.hdls1.testns.svc.cluster.local. 5 AAAA 5678:abcd::2\n");
}

static void external_name(void **state)
{
        (void)state;
        assert_answer(
                Z, "external.testns.svc.cluster.local", 5,
                "NOERROR qr aa rd\nAN external.testns.svc.cluster.local. 5 CNAME ext.interwebs.test.\n");
        /* out of the zone: the CNAME alone (the forwarder resolves it) */
        assert_answer(
                Z, "external.testns.svc.cluster.local", 1,
                "NOERROR qr aa rd\nAN external.testns.svc.cluster.local. 5 CNAME ext.interwebs.test.\n");
        assert_answer(
                Z, "external-to-service.testns.svc.cluster.local", 1,
                "NOERROR qr aa rd\n"
                "AN external-to-service.testns.svc.cluster.local. 5 CNAME svc1.testns.svc.cluster.local.\n"
                "AN svc1.testns.svc.cluster.local. 5 A 10.0.0.1\n");
        /* an in-zone target without the type: NODATA, no CNAME */
        assert_answer(Z, "external-to-service.testns.svc.cluster.local", 28,
                      "NOERROR qr aa rd\n" SOA_CL);
        /* SRV on an ExternalName is NODATA, its named ports NXDOMAIN */
        assert_answer(Z, "external.testns.svc.cluster.local", 33, "NOERROR qr aa rd\n" SOA_CL);
        assert_answer(Z, "_http._tcp.external.testns.svc.cluster.local", 33,
                      "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(Z, "x.external.testns.svc.cluster.local", 1, "NXDOMAIN qr aa rd\n" SOA_CL);
}

static void negative(void **state)
{
        (void)state;
        assert_answer(Z, "svc0.testns.svc.cluster.local", 28, "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(Z, "svc0.testns.svc.cluster.local", 1, "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(Z, "svc0.svc-nons.svc.cluster.local", 1, "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(Z, "svc1.*.svc.cluster.local", 1, "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(Z, "svc.cluster.local", 1, "NOERROR qr aa rd\n" SOA_CL);
        assert_answer(Z, "pod.cluster.local", 1, "NOERROR qr aa rd\n" SOA_CL);
        assert_answer(Z, "testns.svc.cluster.local", 1, "NOERROR qr aa rd\n" SOA_CL);
        assert_answer(Z, "nons.svc.cluster.local", 1, "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(Z, "other.cluster.local", 1, "NXDOMAIN qr aa rd\n" SOA_CL);
        /* names that exist: NODATA for the types they lack */
        assert_answer(Z, "svc1.testns.svc.cluster.local", 16, "NOERROR qr aa rd\n" SOA_CL);
        assert_answer(Z, "svc1.testns.svc.cluster.local", 15, "NOERROR qr aa rd\n" SOA_CL);
        assert_answer(Z, "svc1.testns.svc.cluster.local", 255, "NOERROR qr aa rd\n" SOA_CL);
        assert_answer(Z, "svc1.testns.svc.cluster.local", 5, "NOERROR qr aa rd\n" SOA_CL);
        /* TXT on the apex, svc.<zone> and a namespace: NXDOMAIN (CoreDNS) */
        assert_answer(Z, "cluster.local", 16, "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(Z, "svc.cluster.local", 16, "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(Z, "testns.svc.cluster.local", 16, "NXDOMAIN qr aa rd\n" SOA_CL);
        /* SOA below the apex: NODATA, name or not */
        assert_answer(Z, "nothing.here.cluster.local", 6, "NOERROR qr aa rd\n" SOA_CL);
}

static void apex_and_version(void **state)
{
        (void)state;
        assert_answer(Z, "cluster.local", 6,
                      "NOERROR qr aa rd\nAN cluster.local. 5 SOA ns.dns.cluster.local. "
                      "hostmaster.cluster.local. 1700000000 7200 1800 86400 5\n");
        assert_answer(Z, "cluster.local", 1, "NOERROR qr aa rd\n" SOA_CL);
        assert_answer(Z, "cluster.local", 2, "NOERROR qr aa rd\n" SOA_CL);
        assert_answer(Z, "dns-version.cluster.local", 16,
                      "NOERROR qr aa rd\nAN dns-version.cluster.local. 28800 TXT \"1.1.0\"\n");
        assert_answer(Z, "dns-version.cluster.local", 1, "NXDOMAIN qr aa rd\n" SOA_CL);
        assert_answer(Z, "dns-version.cluster.local", 255, "NXDOMAIN qr aa rd\n" SOA_CL);
}

static void case_is_kept(void **state)
{
        (void)state;
        /* owners echo the query, targets are lower case, the SOA owner is the
         * query's spelling of the zone */
        assert_answer(Z, "SVC1.TestNS.svc.Cluster.Local", 1,
                      "NOERROR qr aa rd\nAN SVC1.TestNS.svc.Cluster.Local. 5 A 10.0.0.1\n");
        assert_answer(
                Z, "_HTTP._Tcp.SVC1.testns.SVC.cluster.local", 33,
                "NOERROR qr aa rd\n"
                "AN _HTTP._Tcp.SVC1.testns.SVC.cluster.local. 5 SRV 0 100 80 svc1.testns.svc.cluster.local.\n"
                "AR svc1.testns.svc.cluster.local. 5 A 10.0.0.1\n");
        assert_answer(Z, "nope.TESTNS.svc.CLUSTER.local", 1,
                      "NXDOMAIN qr aa rd\nNS CLUSTER.local. 5 SOA ns.dns.CLUSTER.local. "
                      "hostmaster.CLUSTER.local. 1700000000 7200 1800 86400 5\n");
        /* SRV targets take the query's spelling of the zone too (CoreDNS
         * builds them from the zone cut out of the query); PTR targets not */
        assert_answer(
                Z, "SVC1.testns.svc.Cluster.LOCAL", 33,
                "NOERROR qr aa rd\n"
                "AN SVC1.testns.svc.Cluster.LOCAL. 5 SRV 0 100 80 svc1.testns.svc.Cluster.LOCAL.\n"
                "AR svc1.testns.svc.Cluster.LOCAL. 5 A 10.0.0.1\n");
        assert_answer(Z, "9.9.9.9.IN-ADDR.arpa", 12,
                      "NXDOMAIN qr aa rd\nNS IN-ADDR.arpa. 5 SOA ns.dns.IN-ADDR.arpa. "
                      "hostmaster.IN-ADDR.arpa. 1700000000 7200 1800 86400 5\n");
}

static void reverse(void **state)
{
        (void)state;
        assert_answer(Z, "1.0.0.10.in-addr.arpa", 12,
                      "NOERROR qr aa rd\n"
                      "AN 1.0.0.10.in-addr.arpa. 5 PTR svc1.testns.svc.cluster.local.\n");
        assert_answer(
                Z, "2.0.0.172.IN-ADDR.ARPA", 12,
                "NOERROR qr aa rd\n"
                "AN 2.0.0.172.IN-ADDR.ARPA. 5 PTR 172-0-0-2.hdls1.testns.svc.cluster.local.\n");
        assert_answer(
                Z, "4.0.0.172.in-addr.arpa", 12,
                "NOERROR qr aa rd\n"
                "AN 4.0.0.172.in-addr.arpa. 5 PTR dup-name.hdls1.testns.svc.cluster.local.\n");
        assert_answer(
                Z, "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.c.b.a.4.3.2.1.ip6.arpa", 12,
                "NOERROR qr aa rd\n"
                "AN 1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.c.b.a.4.3.2.1.ip6.arpa. 5 "
                "PTR svc6.testns.svc.cluster.local.\n");
        /* without fallthrough: NXDOMAIN under the reverse zone's SOA */
        assert_answer(Z, "9.9.9.9.in-addr.arpa", 12,
                      "NXDOMAIN qr aa rd\nNS in-addr.arpa. 5 SOA ns.dns.in-addr.arpa. "
                      "hostmaster.in-addr.arpa. 1700000000 7200 1800 86400 5\n");
        assert_answer(Z, "9.172.in-addr.arpa", 12,
                      "NXDOMAIN qr aa rd\nNS in-addr.arpa. 5 SOA ns.dns.in-addr.arpa. "
                      "hostmaster.in-addr.arpa. 1700000000 7200 1800 86400 5\n");
        assert_answer(Z, "in-addr.arpa", 6,
                      "NOERROR qr aa rd\nAN in-addr.arpa. 5 SOA ns.dns.in-addr.arpa. "
                      "hostmaster.in-addr.arpa. 1700000000 7200 1800 86400 5\n");
        /* with kubeadm's fallthrough: forwarded */
        struct se_dns_options o = { .ttl = 5, .reverse_fallthrough = true };
        struct se_dns_zone *f = t_zone(coredns_cluster, &o);
        assert_answer(f, "9.9.9.9.in-addr.arpa", 12, "FORWARD");
        assert_answer(f, "1.0.0.10.in-addr.arpa", 1, "FORWARD");
        assert_answer(f, "0.10.in-addr.arpa", 12, "FORWARD");
        /* the apex, and svc or pod right below it, are names without
         * records to CoreDNS's parser: NODATA, never forwarded */
        assert_answer(f, "in-addr.arpa", 1,
                      "NOERROR qr aa rd\nNS in-addr.arpa. 5 SOA ns.dns.in-addr.arpa. "
                      "hostmaster.in-addr.arpa. 1700000000 7200 1800 86400 5\n");
        assert_answer(f, "svc.ip6.arpa", 12,
                      "NOERROR qr aa rd\nNS ip6.arpa. 5 SOA ns.dns.ip6.arpa. "
                      "hostmaster.ip6.arpa. 1700000000 7200 1800 86400 5\n");
        assert_answer(f, "x.svc.in-addr.arpa", 1, "FORWARD");
        assert_answer(f, "1.0.0.10.in-addr.arpa", 12,
                      "NOERROR qr aa rd\n"
                      "AN 1.0.0.10.in-addr.arpa. 5 PTR svc1.testns.svc.cluster.local.\n");
        se_dns_zone_unref(f);
}

static void outside_zone(void **state)
{
        (void)state;
        assert_answer(Z, "example.com", 1, "FORWARD");
        assert_answer(Z, "local", 1, "FORWARD");
        assert_answer(Z, "xcluster.local", 1, "FORWARD");
        assert_answer(Z, "", 2, "FORWARD");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(clusterip_a),      cmocka_unit_test(clusterip_srv),
                cmocka_unit_test(headless),         cmocka_unit_test(headless_srv),
                cmocka_unit_test(external_name),    cmocka_unit_test(negative),
                cmocka_unit_test(apex_and_version), cmocka_unit_test(case_is_kept),
                cmocka_unit_test(reverse),          cmocka_unit_test(outside_zone),
        };
        return cmocka_run_group_tests_name("dns_records", tests, setup, teardown);
}

/* Differential test against NLnet Labs' ldns, a decoder and encoder that
 * share no code with pkg/dns: every response of a few hundred queries is
 * decoded by ldns (ldns_wire2pkt) and rendered in the same text as the
 * tests' own decoder; header flags, counts, sections, owner names, types,
 * TTLs and rdata must agree. The queries themselves are encoded by ldns
 * (ldns_pkt2wire, with EDNS0 where asked), so the parser is checked against
 * an independent encoder too. Linked with -lldns (tests only). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <ldns/ldns.h>

#include "dnstest.h"

static const char cluster[] =
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns1}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: dual, namespace: ns1}\n"
        "spec: {clusterIP: 10.96.0.20, clusterIPs: [10.96.0.20, 'fd00::20'], ports: [{name: http, port: 80}, {name: dns, port: 53, protocol: UDP}]}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: ext, namespace: ns1}\n"
        "spec: {type: ExternalName, externalName: dual.ns1.svc.cluster.local}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: out, namespace: ns1}\n"
        "spec: {type: ExternalName, externalName: www.example.com}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: hl, namespace: ns1}\n"
        "spec: {clusterIP: None}\n---\n"
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: hl-4, namespace: ns1, labels: {kubernetes.io/service-name: hl}}\n"
        "addressType: IPv4\nports: [{name: web, port: 8080, protocol: TCP}, {name: q, port: 9, protocol: UDP}]\n"
        "endpoints:\n"
        "- {addresses: [10.244.0.1], hostname: hl-0}\n"
        "- {addresses: [10.244.0.2], hostname: hl-1}\n"
        "- {addresses: [10.244.0.3]}\n"
        "- {addresses: [10.244.0.4], conditions: {ready: false}}\n---\n"
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: hl-6, namespace: ns1, labels: {kubernetes.io/service-name: hl}}\n"
        "addressType: IPv6\nports: [{name: web, port: 8080, protocol: TCP}]\n"
        "endpoints: [{addresses: ['fd00:244::1']}, {addresses: ['fd00:244::']}]\n";

static const char *const names[] = {
        "dual.ns1.svc.cluster.local",
        "DUAL.Ns1.svc.cluster.LOCAL",
        "_http._tcp.dual.ns1.svc.cluster.local",
        "_dns._udp.dual.ns1.svc.cluster.local",
        "ext.ns1.svc.cluster.local",
        "out.ns1.svc.cluster.local",
        "hl.ns1.svc.cluster.local",
        "hl-0.hl.ns1.svc.cluster.local",
        "10-244-0-3.hl.ns1.svc.cluster.local",
        "10-244-0-4.hl.ns1.svc.cluster.local",
        "fd00-244--0.hl.ns1.svc.cluster.local",
        "_web._tcp.hl.ns1.svc.cluster.local",
        "_q._udp.HL.ns1.svc.cluster.local",
        "ns1.svc.cluster.local",
        "svc.cluster.local",
        "cluster.local",
        "Cluster.Local",
        "dns-version.cluster.local",
        "nope.ns1.svc.cluster.local",
        "1-2-3-4.ns1.pod.cluster.local",
        "20.0.96.10.in-addr.arpa",
        "1.0.244.10.IN-ADDR.arpa",
        "9.9.9.9.in-addr.arpa",
        "in-addr.arpa",
        "0.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa",
        "example.com",
};
static const uint16_t types[] = { 1, 28, 33, 12, 16, 6, 5, 2, 255, 15, 252 };

/* The text t_render gives, from ldns's decoding. */
static char *render_ldns(const uint8_t *m, size_t len)
{
        ldns_pkt *p = NULL;
        assert_int_equal(ldns_wire2pkt(&p, m, len), LDNS_STATUS_OK);
        char *out = NULL;
        size_t outlen = 0;
        FILE *f = open_memstream(&out, &outlen);
        fprintf(f, "%s%s%s%s%s%s%s\n", t_rcode(ldns_pkt_get_rcode(p)), ldns_pkt_qr(p) ? " qr" : "",
                ldns_pkt_aa(p) ? " aa" : "", ldns_pkt_tc(p) ? " tc" : "",
                ldns_pkt_rd(p) ? " rd" : "", ldns_pkt_ra(p) ? " ra" : "",
                ldns_pkt_cd(p) ? " cd" : "");
        assert_int_equal(ldns_pkt_qdcount(p), t_u16(m + 4));
        ldns_rr_list *secs[3] = { ldns_pkt_answer(p), ldns_pkt_authority(p),
                                  ldns_pkt_additional(p) };
        static const char *const sec[] = { "AN", "NS", "AR" };
        for (int s = 0; s < 3; s++) {
                for (size_t i = 0; i < ldns_rr_list_rr_count(secs[s]); i++) {
                        ldns_rr *rr = ldns_rr_list_rr(secs[s], i);
                        char *owner = ldns_rdf2str(ldns_rr_owner(rr));
                        fprintf(f, "%s %s %u %s ", sec[s], owner, ldns_rr_ttl(rr),
                                t_type(ldns_rr_get_type(rr)));
                        free(owner);
                        for (size_t k = 0; k < ldns_rr_rd_count(rr); k++) {
                                char *rd = ldns_rdf2str(ldns_rr_rdf(rr, k));
                                fprintf(f, "%s%s", k ? " " : "", rd);
                                free(rd);
                        }
                        fputc('\n', f);
                }
        }
        if (ldns_pkt_edns(p))
                fprintf(f, "AR . OPT %u%s%s rcode-hi=%u\n", ldns_pkt_edns_udp_size(p),
                        ldns_pkt_edns_do(p) ? " do" : "", ldns_pkt_edns_data(p) ? " opts" : "",
                        ldns_pkt_edns_extended_rcode(p));
        /* the counts ldns read are the header's (the OPT is kept apart) */
        assert_int_equal(ldns_pkt_ancount(p), t_u16(m + 6));
        assert_int_equal(ldns_pkt_nscount(p), t_u16(m + 8));
        assert_int_equal(ldns_pkt_arcount(p) + (ldns_pkt_edns(p) ? 1 : 0), t_u16(m + 10));
        fclose(f);
        ldns_pkt_free(p);
        return out;
}

/* A query encoded by ldns. */
static size_t ldns_query(const char *name, uint16_t type, int edns, bool do_bit, uint8_t *buf)
{
        ldns_rdf *dname = ldns_dname_new_frm_str(name);
        assert_non_null(dname);
        ldns_pkt *p = ldns_pkt_query_new(dname, type, LDNS_RR_CLASS_IN, LDNS_RD);
        assert_non_null(p);
        ldns_pkt_set_id(p, 0x1234);
        if (edns >= 0) {
                ldns_pkt_set_edns_udp_size(p, (uint16_t)edns);
                ldns_pkt_set_edns_do(p, do_bit);
        }
        uint8_t *wire = NULL;
        size_t len = 0;
        assert_int_equal(ldns_pkt2wire(&wire, p, &len), LDNS_STATUS_OK);
        assert_true(len <= 600);
        memcpy(buf, wire, len);
        free(wire);
        ldns_pkt_free(p);
        return len;
}

static unsigned compared;

static void compare(const struct se_dns_zone *z, const char *name, uint16_t type, int edns,
                    enum se_dns_transport tr)
{
        uint8_t q[600];
        static uint8_t out[65535];
        size_t qlen = ldns_query(name, type, edns, edns > 1000, q), outlen = 0;
        struct se_dns_client c = { .transport = tr };
        enum se_dns_verdict v = se_dns_answer(z, &c, q, qlen, out, sizeof(out), &outlen);
        if (v != SE_DNS_REPLY)
                return;
        char *ours = t_render(out, outlen);
        char *theirs = render_ldns(out, outlen);
        if (strcmp(ours, theirs) != 0)
                fail_msg("%s %u edns %d:\n--- tests' decoder\n%s--- ldns\n%s", name, type, edns,
                         ours, theirs);
        free(ours);
        free(theirs);
        compared++;
}

static void every_answer(void **state)
{
        (void)state;
        struct se_dns_options opts[] = {
                { .ttl = 5 },
                { .ttl = 30, .pods = SE_DNS_PODS_INSECURE, .reverse_fallthrough = true },
                { .ttl = 7, .endpoint_pod_names = true, .zone = "k8s.example" },
        };
        for (size_t o = 0; o < SE_ARRAY_SIZE(opts); o++) {
                struct se_dns_zone *z = t_zone(cluster, &opts[o]);
                for (size_t n = 0; n < SE_ARRAY_SIZE(names); n++)
                        for (size_t t = 0; t < SE_ARRAY_SIZE(types); t++) {
                                compare(z, names[n], types[t], -1, SE_DNS_UDP);
                                compare(z, names[n], types[t], 1232, SE_DNS_UDP);
                                compare(z, names[n], types[t], 512, SE_DNS_TCP);
                        }
                se_dns_zone_unref(z);
        }
        /* truncated answers: what stays must still decode */
        char *y = NULL;
        size_t ylen = 0;
        FILE *f = open_memstream(&y, &ylen);
        fputs("apiVersion: v1\nkind: Service\nmetadata: {name: big, namespace: default}\n"
              "spec: {clusterIP: None}\n---\n"
              "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
              "metadata: {name: big, namespace: default, labels: {kubernetes.io/service-name: big}}\n"
              "addressType: IPv4\nports: [{name: p, port: 1, protocol: TCP}]\nendpoints:\n",
              f);
        for (int i = 0; i < 300; i++)
                fprintf(f, "- {addresses: [10.9.%d.%d], hostname: host-%d}\n", i / 200, i % 200, i);
        fclose(f);
        struct se_dns_zone *z = t_zone(y, NULL);
        free(y);
        static const int sizes[] = { -1, 512, 1232, 4096, 65000 };
        for (size_t s = 0; s < SE_ARRAY_SIZE(sizes); s++) {
                compare(z, "big.default.svc.cluster.local", 1, sizes[s], SE_DNS_UDP);
                compare(z, "big.default.svc.cluster.local", 33, sizes[s], SE_DNS_UDP);
                compare(z, "_p._tcp.big.default.svc.cluster.local", 33, sizes[s], SE_DNS_TCP);
        }
        se_dns_zone_unref(z);
        print_message("compared %u responses with ldns\n", compared);
        assert_true(compared > 1500);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(every_answer),
        };
        return cmocka_run_group_tests_name("dns_ldns", tests, NULL, NULL);
}

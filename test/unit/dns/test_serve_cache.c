/* Unit tests for the forwarder's cache (dns_serve.h): answers pkg/dns
 * writes stand in for an upstream's. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <svcenv/dns.h>
#include <svcenv/dns_serve.h>

#include "dnstest.h"

static const char cluster[] =
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: ns}\n"
        "spec: {clusterIP: 10.96.0.20, clusterIPs: [10.96.0.20], ports: [{port: 80}]}\n";

/* The zone's answer to name/type, as an upstream would send it. */
static size_t upstream_answer(struct se_dns_zone *z, const char *name, uint16_t type, uint8_t *out,
                              size_t cap)
{
        uint8_t q[512];
        size_t qlen = t_query(q, name, type, -1, false);
        struct se_dns_client c = { .transport = SE_DNS_TCP };
        size_t n = 0;
        assert_int_equal(se_dns_answer(z, &c, q, qlen, out, cap, &n), SE_DNS_REPLY);
        return n;
}

static uint32_t first_ttl(const uint8_t *msg, size_t len)
{
        uint32_t ttl = 0;
        assert_int_equal(se_dns_min_ttl(msg, len, &ttl), 0);
        return ttl;
}

static void test_cache__hit_with_askers_id_case_and_aged_ttl(void **state)
{
        (void)state;
        struct se_dns_options o = { .ttl = 20 };
        struct se_dns_zone *z = t_zone(cluster, &o);
        uint8_t resp[4096], out[4096], q[512];
        size_t rlen = upstream_answer(z, "web.ns.svc.cluster.local", 1, resp, sizeof(resp));
        struct se_dns_cache *c = se_dns_cache_new(NULL);
        assert_non_null(c);
        assert_int_equal(se_dns_cache_put(c, resp, rlen, 100), 0);

        size_t qlen = t_query(q, "WEB.ns.svc.cluster.local", 1, -1, false);
        q[0] = 0xbe;
        q[1] = 0xef;
        q[2] = 0x00; /* no RD */
        size_t n = se_dns_cache_get(c, q, qlen, 107, 0, out, sizeof(out));
        assert_int_equal(n, rlen);
        assert_int_equal(out[0], 0xbe);
        assert_int_equal(out[1], 0xef);
        assert_int_equal(out[2] & 0x01, 0);
        assert_memory_equal(out + 13, "WEB", 3);
        assert_int_equal(first_ttl(out, n), 13); /* 20, 7 s in the cache */
        /* another type is another entry */
        qlen = t_query(q, "web.ns.svc.cluster.local", 28, -1, false);
        assert_int_equal(se_dns_cache_get(c, q, qlen, 107, 0, out, sizeof(out)), 0);
        struct se_dns_cache_stats st;
        se_dns_cache_stats(c, &st);
        assert_int_equal(st.hits_success, 1);
        assert_int_equal(st.misses, 1);
        assert_int_equal(st.entries_success, 1);
        se_dns_cache_free(c);
        se_dns_zone_unref(z);
}

static void test_cache__ttl_clamped_to_max_and_min(void **state)
{
        (void)state;
        struct se_dns_options o = { .ttl = 300 };
        struct se_dns_zone *z = t_zone(cluster, &o);
        uint8_t resp[4096], out[4096], q[512];
        size_t rlen = upstream_answer(z, "web.ns.svc.cluster.local", 1, resp, sizeof(resp));
        struct se_dns_cache *c = se_dns_cache_new(NULL); /* max 30, as `cache 30` */
        assert_int_equal(se_dns_cache_put(c, resp, rlen, 1000), 0);
        size_t qlen = t_query(q, "web.ns.svc.cluster.local", 1, -1, false);
        assert_int_not_equal(se_dns_cache_get(c, q, qlen, 1029, 0, out, sizeof(out)), 0);
        assert_int_equal(se_dns_cache_get(c, q, qlen, 1030, 0, out, sizeof(out)), 0);
        se_dns_zone_unref(z);

        /* TTL 1: kept for the 5 s floor */
        o.ttl = 1;
        z = t_zone(cluster, &o);
        rlen = upstream_answer(z, "web.ns.svc.cluster.local", 1, resp, sizeof(resp));
        assert_int_equal(se_dns_cache_put(c, resp, rlen, 2000), 0);
        size_t n = se_dns_cache_get(c, q, qlen, 2004, 0, out, sizeof(out));
        assert_int_not_equal(n, 0);
        assert_int_equal(first_ttl(out, n), 0); /* aged below 0: 0 */
        assert_int_equal(se_dns_cache_get(c, q, qlen, 2005, 0, out, sizeof(out)), 0);
        se_dns_cache_free(c);
        se_dns_zone_unref(z);
}

static void test_cache__negative_answers_by_their_soa(void **state)
{
        (void)state;
        struct se_dns_options o = { .ttl = 10 };
        struct se_dns_zone *z = t_zone(cluster, &o);
        uint8_t resp[4096], out[4096], q[512];
        size_t rlen = upstream_answer(z, "nope.ns.svc.cluster.local", 1, resp, sizeof(resp));
        assert_int_equal(resp[3] & 0x0f, 3); /* NXDOMAIN */
        struct se_dns_cache *c = se_dns_cache_new(NULL);
        assert_int_equal(se_dns_cache_put(c, resp, rlen, 50), 0);
        size_t qlen = t_query(q, "nope.ns.svc.cluster.local", 1, -1, false);
        size_t n = se_dns_cache_get(c, q, qlen, 59, 0, out, sizeof(out));
        assert_int_equal(n, rlen);
        assert_int_equal(out[3] & 0x0f, 3);
        assert_int_equal(se_dns_cache_get(c, q, qlen, 60, 0, out, sizeof(out)), 0);
        /* NODATA (an IPv4 Service asked AAAA) is a denial too */
        rlen = upstream_answer(z, "web.ns.svc.cluster.local", 28, resp, sizeof(resp));
        assert_int_equal(se_dns_cache_put(c, resp, rlen, 50), 0);
        struct se_dns_cache_stats st;
        se_dns_cache_stats(c, &st);
        assert_int_equal(st.entries_denial, 1); /* the expired NXDOMAIN is gone */
        assert_int_equal(st.hits_denial, 1);
        se_dns_cache_free(c);
        se_dns_zone_unref(z);
}

static void test_cache__not_kept(void **state)
{
        (void)state;
        struct se_dns_zone *z = t_zone(cluster, NULL);
        uint8_t resp[4096], q[512];
        size_t rlen = upstream_answer(z, "web.ns.svc.cluster.local", 1, resp, sizeof(resp));
        struct se_dns_cache *c = se_dns_cache_new(NULL);
        uint8_t m[4096];
        memcpy(m, resp, rlen);
        m[3] = (uint8_t)((m[3] & 0xf0) | 2); /* SERVFAIL */
        assert_int_equal(se_dns_cache_put(c, m, rlen, 1), -EINVAL);
        memcpy(m, resp, rlen);
        m[2] |= 0x02; /* TC */
        assert_int_equal(se_dns_cache_put(c, m, rlen, 1), -EINVAL);
        size_t qlen = t_query(q, "web.ns.svc.cluster.local", 1, -1, false);
        assert_int_equal(se_dns_cache_put(c, q, qlen, 1), -EINVAL); /* a query */
        assert_int_equal(se_dns_cache_put(c, resp, 7, 1), -EBADMSG);
        se_dns_cache_free(c);
        se_dns_zone_unref(z);
}

static void test_cache__capped_in_entries(void **state)
{
        (void)state;
        struct se_dns_zone *z = t_zone(cluster, NULL);
        struct se_dns_cache_opts o = { .max_entries = 32 };
        struct se_dns_cache *c = se_dns_cache_new(&o);
        uint8_t resp[4096];
        for (int i = 0; i < 500; i++) {
                char name[64];
                snprintf(name, sizeof(name), "n%d.ns.svc.cluster.local", i);
                size_t rlen = upstream_answer(z, name, 1, resp, sizeof(resp));
                assert_int_equal(se_dns_cache_put(c, resp, rlen, 1), 0);
        }
        struct se_dns_cache_stats st;
        se_dns_cache_stats(c, &st);
        assert_true(st.entries_denial <= 32);
        assert_true(st.entries_denial >= 16);
        assert_int_equal(st.evictions, 500 - st.entries_denial);
        se_dns_cache_free(c);
        se_dns_zone_unref(z);
}

static void test_cache__cut_to_the_askers_udp_size(void **state)
{
        (void)state;
        /* a headless Service with 100 endpoints: far over 512 bytes */
        char *yaml = malloc(20000);
        int o = sprintf(yaml,
                        "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns}\n---\n"
                        "apiVersion: v1\nkind: Service\nmetadata: {name: big, namespace: ns}\n"
                        "spec: {clusterIP: None, ports: [{name: x, port: 1}]}\n---\n"
                        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                        "metadata: {name: big-1, namespace: ns, labels: "
                        "{kubernetes.io/service-name: big}}\naddressType: IPv4\nendpoints:\n");
        for (int i = 1; i <= 100; i++)
                o += sprintf(yaml + o, "- {addresses: [10.1.0.%d], conditions: {ready: true}}\n",
                             i);
        struct se_dns_zone *z = t_zone(yaml, NULL);
        free(yaml);
        uint8_t resp[8192], out[8192], q[512];
        size_t rlen = upstream_answer(z, "big.ns.svc.cluster.local", 1, resp, sizeof(resp));
        assert_true(rlen > 1600);
        struct se_dns_cache *c = se_dns_cache_new(NULL);
        assert_int_equal(se_dns_cache_put(c, resp, rlen, 1), 0);
        size_t qlen = t_query(q, "big.ns.svc.cluster.local", 1, -1, false);
        size_t n = se_dns_cache_get(c, q, qlen, 2, 512, out, sizeof(out));
        assert_true(n > 12 && n <= 512);
        assert_true(out[2] & 0x02); /* TC */
        n = se_dns_cache_get(c, q, qlen, 2, 0, out, sizeof(out));
        assert_int_equal(n, rlen);
        assert_false(out[2] & 0x02);
        se_dns_cache_free(c);
        se_dns_zone_unref(z);
}

static void test_autopath_reply__cname_in_front(void **state)
{
        (void)state;
        struct se_dns_zone *z = t_zone(cluster, NULL);
        uint8_t resp[4096], out[4096], q[512];
        size_t rlen = upstream_answer(z, "web.ns.svc.cluster.local", 1, resp, sizeof(resp));
        size_t qlen = t_query(q, "Web.NS.team.svc.cluster.local", 1, -1, false);
        size_t n = se_dns_autopath_reply(q, qlen, resp, rlen, 0, out, sizeof(out));
        assert_true(n > 12);
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        assert_int_equal(se_dns_msg_text(out, n, true, &sb), 0);
        assert_string_equal(
                sb.buf, ";; ->>HEADER<<- opcode: QUERY, status: NOERROR, id: 4660\n"
                        ";; flags: qr aa rd; QUERY: 1, ANSWER: 2, AUTHORITY: 0, ADDITIONAL: 0\n"
                        "\n;; QUESTION SECTION:\n"
                        ";Web.NS.team.svc.cluster.local.\t\tIN\tA\n"
                        "\n;; ANSWER SECTION:\n"
                        "Web.NS.team.svc.cluster.local.\t5\tIN\tCNAME\tweb.ns.svc.cluster.local.\n"
                        "web.ns.svc.cluster.local.\t5\tIN\tA\t10.96.0.20\n");
        se_strbuf_release(&sb);
        /* NODATA: no answer to point at, no CNAME; the SOA stays */
        rlen = upstream_answer(z, "web.ns.svc.cluster.local", 28, resp, sizeof(resp));
        n = se_dns_autopath_reply(q, qlen, resp, rlen, 0, out, sizeof(out));
        assert_int_equal(out[7], 0);
        assert_int_equal(out[9], 1);
        /* malformed input or no room: 0 */
        assert_int_equal(se_dns_autopath_reply(q, qlen, resp, 11, 0, out, sizeof(out)), 0);
        assert_int_equal(se_dns_autopath_reply(q, qlen, resp, rlen, 0, out, 20), 0);
        se_dns_zone_unref(z);
}

/* An SRV or MX record whose rdata is shorter than its fixed part, last in
 * the message: refused, not read past the end (found by fuzz_autopath). */
static void test_autopath_reply__short_rdata(void **state)
{
        (void)state;
        uint8_t q[512], out[4096];
        size_t qlen = t_query(q, "a.ns.team.svc.cluster.local", 33, -1, false);
        static const uint8_t head[] = { 0, 1, 0x81, 0,  0, 1,  0, 1, 0, 0, 0, 0, 1, 'a', 0, 0, 33,
                                        0, 1, 0xc0, 12, 0, 33, 0, 1, 0, 0, 0, 5, 0, 2,   0, 0 };
        for (int type = 15; type <= 33; type += 18) {
                uint8_t *m = malloc(sizeof(head)); /* exact size: ASan sees any over-read */
                memcpy(m, head, sizeof(head));
                m[22] = (uint8_t)type;
                assert_int_equal(
                        se_dns_autopath_reply(q, qlen, m, sizeof(head), 0, out, sizeof(out)), 0);
                free(m);
        }
}

static void test_externalname__target_appended(void **state)
{
        (void)state;
        static const char yaml[] =
                "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns}\n---\n"
                "apiVersion: v1\nkind: Service\nmetadata: {name: ext, namespace: ns}\n"
                "spec: {type: ExternalName, externalName: Web.Example.test}\n---\n"
                "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: ns}\n"
                "spec: {clusterIP: 10.96.0.20, clusterIPs: [10.96.0.20], ports: [{port: 80}]}\n";
        struct se_dns_zone *z = t_zone(yaml, NULL);
        uint8_t reply[4096], extra[4096], out[4096];
        size_t rlen = upstream_answer(z, "ext.ns.svc.cluster.local", 1, reply, sizeof(reply));
        char target[256];
        assert_int_equal(se_dns_cname_target(reply, rlen, target, sizeof(target)), 0);
        assert_string_equal(target, "web.example.test");
        /* any answer stands in for the upstream's: web's A */
        size_t elen = upstream_answer(z, "web.ns.svc.cluster.local", 1, extra, sizeof(extra));
        size_t n = se_dns_append_answers(reply, rlen, extra, elen, 0, out, sizeof(out));
        assert_true(n > rlen);
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        assert_int_equal(se_dns_msg_text(out, n, false, &sb), 0);
        if (!strstr(sb.buf, "ANSWER: 2,"))
                fail_msg("%s", sb.buf);
        assert_non_null(strstr(sb.buf,
                               "ext.ns.svc.cluster.local.\t5\tIN\tCNAME\tweb.example.test.\n"
                               "web.ns.svc.cluster.local.\t5\tIN\tA\t10.96.0.20\n"));
        se_strbuf_release(&sb);
        /* not a CNAME last: -ENOENT */
        assert_int_equal(se_dns_cname_target(extra, elen, target, sizeof(target)), -ENOENT);
        assert_int_equal(se_dns_cname_target(extra, 11, target, sizeof(target)), -EBADMSG);
        se_dns_zone_unref(z);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_cache__hit_with_askers_id_case_and_aged_ttl),
                cmocka_unit_test(test_cache__ttl_clamped_to_max_and_min),
                cmocka_unit_test(test_cache__negative_answers_by_their_soa),
                cmocka_unit_test(test_cache__not_kept),
                cmocka_unit_test(test_cache__capped_in_entries),
                cmocka_unit_test(test_cache__cut_to_the_askers_udp_size),
                cmocka_unit_test(test_autopath_reply__cname_in_front),
                cmocka_unit_test(test_autopath_reply__short_rdata),
                cmocka_unit_test(test_externalname__target_appended),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

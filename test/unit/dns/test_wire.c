/* The wire: what RFC 1035/6891 and miekg/dns (under CoreDNS) do with odd
 * queries, and the helpers the forwarder and cache use. */
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
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: default}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: kubernetes, namespace: default}\n"
        "spec: {clusterIP: 10.96.0.1, ports: [{name: https, port: 443}]}\n";

static struct se_dns_zone *Z;

static void dns_put32_for_test(uint8_t *p, uint32_t v)
{
        p[0] = (uint8_t)(v >> 24);
        p[1] = (uint8_t)(v >> 16);
        p[2] = (uint8_t)(v >> 8);
        p[3] = (uint8_t)v;
}

static int setup(void **state)
{
        (void)state;
        Z = t_zone(cluster, NULL);
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        Z = se_dns_zone_unref(Z);
        return 0;
}

/* Answers the raw bytes; renders the reply or names the verdict. */
static char *answer_bytes(const uint8_t *q, size_t qlen, size_t cap)
{
        static uint8_t out[65535];
        size_t outlen = 7;
        struct se_dns_client c = { .transport = SE_DNS_UDP };
        enum se_dns_verdict v = se_dns_answer(Z, &c, q, qlen, out, cap, &outlen);
        if (v == SE_DNS_DROP) {
                assert_int_equal(outlen, 0);
                return strdup("DROP");
        }
        if (v == SE_DNS_FORWARD)
                return strdup("FORWARD");
        assert_true(outlen <= cap);
        char *text = t_render(out, outlen);
        char *full = NULL;
        assert_true(asprintf(&full, "id=%02x%02x op=%u qd=%u %s", out[0], out[1],
                             (out[2] >> 3) & 0xf, t_u16(out + 4), text) > 0);
        free(text);
        return full;
}

#define assert_bytes(q, len, want)                                          \
 do {                                                                       \
  char *got_ = answer_bytes((q), (len), 65535);                             \
  if (strcmp(got_, (want)) != 0)                                            \
   fail_msg("line %d:\n--- want\n%s\n--- got\n%s", __LINE__, (want), got_); \
  free(got_);                                                               \
 } while (0)

static void drops(void **state)
{
        (void)state;
        uint8_t q[600];
        size_t n = t_query(q, "kubernetes.default.svc.cluster.local", 1, -1, false);
        assert_bytes(q, 0, "DROP");
        assert_bytes(q, 11, "DROP");
        q[2] |= 0x80; /* a response */
        assert_bytes(q, n, "DROP");
        q[2] &= 0x7f;
        /* an output buffer below 512 bytes breaks the contract: DROP */
        static uint8_t out[511];
        size_t outlen = 1;
        struct se_dns_client c = { 0 };
        assert_int_equal(se_dns_answer(Z, &c, q, n, out, sizeof(out), &outlen), SE_DNS_DROP);
}

static void formerr_and_notimp(void **state)
{
        (void)state;
        uint8_t q[600];
        size_t n = t_query(q, "kubernetes.default.svc.cluster.local", 1, -1, false);
        q[2] = (uint8_t)(2 << 3 | 1); /* STATUS, RD */
        assert_bytes(q, n, "id=1234 op=2 qd=0 NOTIMP qr rd\n");
        q[2] = 1;
        q[5] = 0; /* no question */
        assert_bytes(q, n, "id=1234 op=0 qd=0 FORMERR qr rd\n");
        q[5] = 2;
        assert_bytes(q, n, "id=1234 op=0 qd=0 FORMERR qr rd\n");
        q[5] = 1;
        q[7] = 2; /* two answer records */
        assert_bytes(q, n, "id=1234 op=0 qd=0 FORMERR qr rd\n");
        q[7] = 0;
        q[11] = 3;
        assert_bytes(q, n, "id=1234 op=0 qd=0 FORMERR qr rd\n");
        q[11] = 0;
        /* a question cut short */
        assert_bytes(q, n - 2, "id=1234 op=0 qd=0 FORMERR qr rd\n");
        /* the query's own header bits come back, opcode QUERY, AA and Z off */
        q[2] = (uint8_t)(5 << 3 | 0x04 | 0x02 | 1);
        q[3] = 0xf0;
        assert_bytes(q, n, "id=1234 op=5 qd=0 NOTIMP qr tc rd ra cd\n");
        q[2] = 0x04 | 0x02;
        q[5] = 2;
        assert_bytes(q, n, "id=1234 op=0 qd=0 FORMERR qr tc ra cd\n");
        q[2] = 1;
        q[3] = 0;
        q[5] = 1;
        assert_bytes(q, 14, "id=1234 op=0 qd=0 FORMERR qr rd\n");
        /* an additional record announced but missing: the question is read */
        q[11] = 1;
        assert_bytes(q, n, "id=1234 op=0 qd=1 FORMERR qr rd\n");
        q[11] = 0;
}

static void compression_loops(void **state)
{
        (void)state;
        uint8_t q[64] = { 0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0 };
        /* a pointer to itself */
        q[12] = 0xc0;
        q[13] = 12;
        memcpy(q + 14, "\0\1\0\1", 4);
        assert_bytes(q, 18, "id=1234 op=0 qd=0 FORMERR qr rd\n");
        /* a pointer forward */
        q[13] = 14;
        assert_bytes(q, 18, "id=1234 op=0 qd=0 FORMERR qr rd\n");
        /* a label type 0x40 */
        q[12] = 0x41;
        assert_bytes(q, 18, "id=1234 op=0 qd=0 FORMERR qr rd\n");
        /* a name of 256 bytes (four 63-byte labels and a 0) */
        uint8_t big[600] = { 0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0 };
        size_t o = 12;
        for (int i = 0; i < 4; i++) {
                big[o++] = 63;
                memset(big + o, 'a', 63);
                o += 63;
        }
        big[o++] = 0;
        memcpy(big + o, "\0\1\0\1", 4);
        assert_bytes(big, o + 4, "id=1234 op=0 qd=0 FORMERR qr rd\n");
}

static void longest_name(void **state)
{
        (void)state;
        /* a name of exactly 255 wire bytes in the zone */
        char name[300];
        size_t o = 0;
        for (int i = 0; i < 3; i++) {
                memset(name + o, 'b', 63);
                o += 63;
                name[o++] = '.';
        }
        /* 3 * 64 + (1 + 47) + 8 + 6 + 1 = 255 */
        memset(name + o, 'c', 47);
        o += 47;
        strcpy(name + o, ".cluster.local");
        uint8_t q[600];
        assert_int_equal(t_query(q, name, 1, -1, false), 12 + 255 + 4);
        char *got = t_ask(Z, name, 1);
        assert_non_null(strstr(got, "NXDOMAIN qr aa rd\n"));
        free(got);
}

static void flags_and_opt(void **state)
{
        (void)state;
        uint8_t q[600];
        size_t n = t_query(q, "kubernetes.default.svc.cluster.local", 1, 1232, true);
        assert_bytes(q, n,
                     "id=1234 op=0 qd=1 NOERROR qr aa rd\n"
                     "AN kubernetes.default.svc.cluster.local. 5 A 10.96.0.1\n"
                     "AR . OPT 1232 do rcode-hi=0\n");
        /* RD off stays off, CD is copied, RA never set, Z cleared */
        q[2] = 0;
        q[3] = 0x10 | 0x40;
        assert_bytes(q, n,
                     "id=1234 op=0 qd=1 NOERROR qr aa cd\n"
                     "AN kubernetes.default.svc.cluster.local. 5 A 10.96.0.1\n"
                     "AR . OPT 1232 do rcode-hi=0\n");
        /* an unknown option is accepted and not echoed */
        n = t_query(q, "kubernetes.default.svc.cluster.local", 1, 4096, false);
        q[n - 1] = 6;
        memcpy(q + n, "\xfd\xe9\0\2hi", 6);
        assert_bytes(q, n + 6,
                     "id=1234 op=0 qd=1 NOERROR qr aa rd\n"
                     "AN kubernetes.default.svc.cluster.local. 5 A 10.96.0.1\n"
                     "AR . OPT 4096 rcode-hi=0\n");
        /* an option longer than the OPT: FORMERR with the question */
        q[n - 1] = 5;
        assert_bytes(q, n + 5, "id=1234 op=0 qd=1 FORMERR qr rd\n");
        /* two OPT records */
        n = t_query(q, "kubernetes.default.svc.cluster.local", 1, 4096, false);
        memcpy(q + n, q + n - 11, 11);
        q[11] = 2;
        assert_bytes(q, n + 11, "id=1234 op=0 qd=1 FORMERR qr rd\n");
        /* EDNS version 1: BADVERS (16: 1 in the OPT, 0 in the header) */
        n = t_query(q, "kubernetes.default.svc.cluster.local", 1, 4096, false);
        q[n - 5] = 1;
        assert_bytes(q, n, "id=1234 op=0 qd=1 NOERROR qr rd\nAR . OPT 4096 rcode-hi=1\n");
        /* for names outside the zone too: the server says it, not upstream */
        n = t_query(q, "example.com", 1, 4096, false);
        q[n - 5] = 1;
        assert_bytes(q, n, "id=1234 op=0 qd=1 NOERROR qr rd\nAR . OPT 4096 rcode-hi=1\n");
}

static void refused_and_forward(void **state)
{
        (void)state;
        assert_answer(Z, "cluster.local", 252, "REFUSED qr rd\n");
        assert_answer(Z, "cluster.local", 251, "REFUSED qr rd\n");
        assert_answer(Z, "example.com", 252, "FORWARD");
}

static void question_helper(void **state)
{
        (void)state;
        uint8_t q[600];
        char name[1024];
        uint16_t type = 0, klass = 0;
        size_t n = t_query(q, "Kubernetes.Default.SVC.cluster.local", 28, -1, false);
        assert_int_equal(se_dns_question(q, n, name, sizeof(name), &type, &klass), 0);
        assert_string_equal(name, "kubernetes.default.svc.cluster.local");
        assert_int_equal(type, 28);
        assert_int_equal(klass, 1);
        n = t_query(q, "", 2, -1, false);
        assert_int_equal(se_dns_question(q, n, name, sizeof(name), &type, NULL), 0);
        assert_string_equal(name, "");
        /* bytes that are not plain: \DDD, and a dot inside a label */
        uint8_t odd[] = { 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3, 'a', '.', 0xff, 0, 0, 1, 0, 1 };
        assert_int_equal(se_dns_question(odd, sizeof(odd), name, sizeof(name), NULL, NULL), 0);
        assert_string_equal(name, "a\\046\\255");
        assert_int_equal(se_dns_question(odd, sizeof(odd), name, 5, NULL, NULL), -ENAMETOOLONG);
        assert_int_equal(se_dns_question(odd, 17, name, sizeof(name), NULL, NULL), -EBADMSG);
        assert_int_equal(se_dns_question(odd, 5, name, sizeof(name), NULL, NULL), -EBADMSG);
}

static void ttl_helpers(void **state)
{
        (void)state;
        static uint8_t out[4096];
        uint32_t ttl = 0;
        size_t n = t_raw(Z, "kubernetes.default.svc.cluster.local", 33, 1232, SE_DNS_UDP, out,
                         sizeof(out));
        assert_int_equal(se_dns_min_ttl(out, n, &ttl), 0);
        assert_int_equal(ttl, 5);
        /* negative: min(SOA TTL, SOA minimum) */
        struct se_dns_options o = { .ttl = 600 };
        struct se_dns_zone *z = t_zone(cluster, &o);
        n = t_raw(z, "nope.cluster.local", 1, -1, SE_DNS_UDP, out, sizeof(out));
        assert_int_equal(se_dns_min_ttl(out, n, &ttl), 0);
        assert_int_equal(ttl, 300);
        /* aging: every TTL down, not below 0, the OPT untouched */
        n = t_raw(z, "kubernetes.default.svc.cluster.local", 33, 1232, SE_DNS_UDP, out,
                  sizeof(out));
        assert_int_equal(se_dns_age_ttls(out, n, 100), 0);
        assert_int_equal(se_dns_min_ttl(out, n, &ttl), 0);
        assert_int_equal(ttl, 500);
        char *text = t_render(out, n);
        assert_non_null(strstr(text, "AR kubernetes.default.svc.cluster.local. 500 A 10.96.0.1\n"));
        assert_non_null(strstr(text, "AR . OPT 1232 rcode-hi=0\n"));
        free(text);
        assert_int_equal(se_dns_age_ttls(out, n, 1000), 0);
        assert_int_equal(se_dns_min_ttl(out, n, &ttl), 0);
        assert_int_equal(ttl, 0);
        se_dns_zone_unref(z);
        /* no record: -ENOENT; cut: -EBADMSG and nothing changed */
        n = t_raw(Z, "cluster.local", 252, -1, SE_DNS_UDP, out, sizeof(out));
        assert_int_equal(se_dns_min_ttl(out, n, &ttl), -ENOENT);
        n = t_raw(Z, "kubernetes.default.svc.cluster.local", 1, -1, SE_DNS_UDP, out, sizeof(out));
        uint8_t copy[4096];
        memcpy(copy, out, n);
        assert_int_equal(se_dns_min_ttl(out, n - 1, &ttl), -EBADMSG);
        assert_int_equal(se_dns_age_ttls(out, n - 1, 3), -EBADMSG);
        assert_memory_equal(copy, out, n);
}

/* What CoreDNS's cache plugin does to every reply passing through it
 * (kubeadm's `cache 30`): one TTL for all records, the message's smallest
 * clamped; e.g. dns-version's 28800 leaves as 30. */
static void cache_ttls(void **state)
{
        (void)state;
        static uint8_t out[4096];
        const struct se_dns_ttl_bounds b = {
                .min = 5, .max = 30, .min_neg = 5, .max_neg = 30, .fail = 5
        };
        struct se_dns_options o = { .ttl = 30 };
        struct se_dns_zone *z = t_zone(cluster, &o);
        size_t n = t_raw(z, "dns-version.cluster.local", 16, -1, SE_DNS_UDP, out, sizeof(out));
        assert_int_equal(se_dns_cache_ttls(out, n, &b), 0);
        char *text = t_render(out, n);
        assert_non_null(strstr(text, "AN dns-version.cluster.local. 30 TXT \"1.1.0\"\n"));
        free(text);

        /* the smallest of all sections, the additional one too; the OPT kept */
        n = t_raw(z, "kubernetes.default.svc.cluster.local", 33, -1, SE_DNS_UDP, out, sizeof(out));
        dns_put32_for_test(out + n - 10, 12); /* the additional A's TTL */
        assert_int_equal(se_dns_cache_ttls(out, n, &b), 0);
        text = t_render(out, n);
        assert_non_null(strstr(text, "AN kubernetes.default.svc.cluster.local. 12 SRV"));
        assert_non_null(strstr(text, "AR kubernetes.default.svc.cluster.local. 12 A 10.96.0.1\n"));
        free(text);
        /* below the floor: lifted to it; a denial by its own bounds */
        dns_put32_for_test(out + n - 10, 1);
        const struct se_dns_ttl_bounds neg = {
                .min = 5, .max = 30, .min_neg = 2, .max_neg = 3, .fail = 5
        };
        assert_int_equal(se_dns_cache_ttls(out, n, &neg), 0);
        text = t_render(out, n);
        assert_non_null(strstr(text, "AR kubernetes.default.svc.cluster.local. 5 A 10.96.0.1\n"));
        free(text);
        n = t_raw(Z, "nope.cluster.local", 1, 1232, SE_DNS_UDP, out, sizeof(out));
        assert_int_equal(se_dns_cache_ttls(out, n, &neg), 0);
        text = t_render(out, n);
        assert_non_null(strstr(text, "NS cluster.local. 3 SOA"));
        assert_non_null(strstr(text, "AR . OPT 1232"));
        free(text);
        /* malformed: -EBADMSG, nothing changed */
        uint8_t copy[4096];
        memcpy(copy, out, n);
        assert_int_equal(se_dns_cache_ttls(out, n - 1, &b), -EBADMSG);
        assert_memory_equal(copy, out, n);
        se_dns_zone_unref(z);
}

static void udp_size(void **state)
{
        (void)state;
        uint8_t q[600];
        size_t n = t_query(q, "a.cluster.local", 1, -1, false);
        assert_int_equal(se_dns_udp_size(q, n), 512);
        n = t_query(q, "a.cluster.local", 1, 4096, false);
        assert_int_equal(se_dns_udp_size(q, n), 4096);
        n = t_query(q, "a.cluster.local", 1, 100, false);
        assert_int_equal(se_dns_udp_size(q, n), 512);
        assert_int_equal(se_dns_udp_size(q, 5), 512);
}

static void truncate_helper(void **state)
{
        (void)state;
        /* a long answer (a headless service of 100 endpoints) over TCP with
         * EDNS, cut to 512: a prefix of the answers, the OPT kept, TC */
        char *y = NULL;
        size_t ylen = 0;
        FILE *f = open_memstream(&y, &ylen);
        fputs("apiVersion: v1\nkind: Service\nmetadata: {name: h, namespace: default}\n"
              "spec: {clusterIP: None}\n---\n"
              "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
              "metadata: {name: h, namespace: default, labels: {kubernetes.io/service-name: h}}\n"
              "addressType: IPv4\nendpoints:\n",
              f);
        for (int i = 1; i <= 100; i++)
                fprintf(f, "- {addresses: [10.2.0.%d]}\n", i);
        fclose(f);
        struct se_dns_zone *z = t_zone(y, NULL);
        free(y);
        static uint8_t out[65535];
        size_t n = t_raw(z, "h.default.svc.cluster.local", 1, 4096, SE_DNS_TCP, out, sizeof(out));
        assert_int_equal(t_u16(out + 6), 100);
        assert_int_equal(se_dns_truncate(out, n, n + 10), n);
        size_t m = se_dns_truncate(out, n, 512);
        assert_true(m <= 512);
        assert_true(out[2] & 0x02);
        assert_int_equal(t_u16(out + 6), 28); /* (512 - 12 - 33 - 11) / 16 */
        assert_int_equal(t_u16(out + 10), 1);
        char *text = t_render(out, m);
        assert_non_null(strstr(text, "AR . OPT 4096"));
        free(text);
        /* nothing but the header fits */
        assert_int_equal(se_dns_truncate(out, m, 20), 12);
        assert_int_equal(t_u16(out + 4), 0);
        assert_true(out[2] & 0x02);
        assert_int_equal(se_dns_truncate(out, 12, 5), 0); /* not even that */
        se_dns_zone_unref(z);
}

static void error_reply(void **state)
{
        (void)state;
        uint8_t q[600], out[600];
        size_t n = t_query(q, "Example.COM", 1, 1232, false);
        size_t m = se_dns_error_reply(q, n, 2, out, sizeof(out));
        assert_true(m > 12);
        char *text = t_render(out, m);
        assert_string_equal(text, "SERVFAIL qr rd\n");
        free(text);
        assert_int_equal(t_u16(out + 4), 1);
        assert_memory_equal(out + 12, q + 12, m - 12); /* the question as asked */
        assert_int_equal(se_dns_error_reply(q, 12, 2, out, sizeof(out)), 0);
        assert_int_equal(se_dns_error_reply(q, n, 2, out, 20), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(drops),
                cmocka_unit_test(formerr_and_notimp),
                cmocka_unit_test(compression_loops),
                cmocka_unit_test(longest_name),
                cmocka_unit_test(flags_and_opt),
                cmocka_unit_test(refused_and_forward),
                cmocka_unit_test(question_helper),
                cmocka_unit_test(ttl_helpers),
                cmocka_unit_test(cache_ttls),
                cmocka_unit_test(udp_size),
                cmocka_unit_test(truncate_helper),
                cmocka_unit_test(error_reply),
        };
        return cmocka_run_group_tests_name("dns_wire", tests, setup, teardown);
}

/* Unit tests for the pure pieces of serving (dns_serve.h) that need no
 * zone: upstream addresses, resolv.conf, queries made from a name, and
 * messages printed as dig prints them. */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <svcenv/dns_serve.h>

static int port_of(const struct se_dns_upstream *u)
{
        return u->addr.ss_family == AF_INET ?
                       ntohs(((const struct sockaddr_in *)&u->addr)->sin_port) :
                       ntohs(((const struct sockaddr_in6 *)&u->addr)->sin6_port);
}

static void test_upstream__forms(void **state)
{
        (void)state;
        struct se_dns_upstream u;
        struct se_diag d = { 0 };
        assert_int_equal(se_dns_upstream_parse("10.0.0.10", &u, &d), 0);
        assert_string_equal(u.text, "10.0.0.10:53");
        assert_int_equal(se_dns_upstream_parse("127.0.0.2:5353", &u, &d), 0);
        assert_int_equal(port_of(&u), 5353);
        assert_int_equal(u.addr.ss_family, AF_INET);
        assert_int_equal(se_dns_upstream_parse("dns://[fd00::1]:54", &u, &d), 0);
        assert_string_equal(u.text, "[fd00::1]:54");
        assert_int_equal(se_dns_upstream_parse("fd00::1", &u, &d), 0);
        assert_int_equal(port_of(&u), 53);
        assert_int_equal(u.addr.ss_family, AF_INET6);
        assert_int_equal(se_dns_upstream_parse("[::1]", &u, &d), 0);
        assert_string_equal(u.text, "[::1]:53");
}

static void test_upstream__bad(void **state)
{
        (void)state;
        static const char *const bad[] = { "",         "dns.google", "1.2.3.4:0", "1.2.3.4:99999",
                                           "[fd00::1", "[::1]x",     "1.2.3.4:",  ":53",
                                           "1.2.3.4.5" };
        struct se_dns_upstream u;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct se_diag d = { 0 };
                assert_int_equal(se_dns_upstream_parse(bad[i], &u, &d), -EINVAL);
                assert_non_null(strstr(d.text, "want IP"));
        }
}

static void test_resolv_conf__nameservers_in_order(void **state)
{
        (void)state;
        const char *text = "# written by hand\n"
                           "search default.svc.cluster.local svc.cluster.local\n"
                           "nameserver 192.0.2.53 ; the first\n"
                           "options ndots:5\n"
                           "nameserver\t2001:db8::53\n"
                           "  nameserver 192.0.2.54\n"
                           ";nameserver 192.0.2.99\n"
                           "nameserver 192.0.2.55";
        struct se_dns_upstream u[SE_DNS_MAX_UPSTREAMS];
        struct se_diag d = { 0 };
        int n = se_dns_resolv_conf_parse("resolv.conf", text, strlen(text), u, 15, &d);
        assert_int_equal(n, 4);
        assert_string_equal(u[0].text, "192.0.2.53:53");
        assert_string_equal(u[1].text, "[2001:db8::53]:53");
        assert_string_equal(u[2].text, "192.0.2.54:53");
        assert_string_equal(u[3].text, "192.0.2.55:53");
        /* more than the room: the rest ignored, as glibc ignores a fourth */
        assert_int_equal(se_dns_resolv_conf_parse("r", text, strlen(text), u, 2, &d), 2);
        assert_int_equal(se_dns_resolv_conf_parse("r", "", 0, u, 2, &d), 0);
}

static void test_resolv_conf__errors_name_the_line(void **state)
{
        (void)state;
        struct se_dns_upstream u[3];
        struct se_diag d = { 0 };
        const char *text = "search x\nnameserver dns.example\n";
        assert_int_equal(se_dns_resolv_conf_parse("/etc/resolv.conf", text, strlen(text), u, 3, &d),
                         -EINVAL);
        char msg[600];
        se_diag_format(&d, msg, sizeof(msg));
        assert_string_equal(msg,
                            "/etc/resolv.conf:2: nameserver \"dns.example\" is not an IP address");
        text = "nameserver\n";
        assert_int_equal(se_dns_resolv_conf_parse("f", text, strlen(text), u, 3, &d), -EINVAL);
        assert_int_equal(d.line, 1);
        char *big = calloc(1, SE_DNS_MAX_RESOLV_CONF + 2);
        assert_non_null(big);
        memset(big, '#', SE_DNS_MAX_RESOLV_CONF + 1);
        assert_int_equal(se_dns_resolv_conf_parse("f", big, SE_DNS_MAX_RESOLV_CONF + 1, u, 3, &d),
                         -E2BIG);
        free(big);
}

static void test_types(void **state)
{
        (void)state;
        assert_int_equal(se_dns_type_code("A"), 1);
        assert_int_equal(se_dns_type_code("srv"), 33);
        assert_int_equal(se_dns_type_code("TYPE65"), 65);
        assert_int_equal(se_dns_type_code("TYPE65536"), -EINVAL);
        assert_int_equal(se_dns_type_code("WKS2"), -EINVAL);
        assert_string_equal(se_dns_type_name(28), "AAAA");
        assert_null(se_dns_type_name(9999));
}

static void test_query_make__wire(void **state)
{
        (void)state;
        uint8_t q[600];
        struct se_diag d = { 0 };
        int n = se_dns_query_make("Web.shop.svc.cluster.local.", "AAAA", 0x1234, 0, q, sizeof(q),
                                  &d);
        static const uint8_t want[] = { 0x12, 0x34, 0x01, 0,   0,   1,   0,   0,   0,   0,   0,
                                        0,    3,    'W',  'e', 'b', 4,   's', 'h', 'o', 'p', 3,
                                        's',  'v',  'c',  7,   'c', 'l', 'u', 's', 't', 'e', 'r',
                                        5,    'l',  'o',  'c', 'a', 'l', 0,   0,   28,  0,   1 };
        assert_int_equal(n, sizeof(want));
        assert_memory_equal(q, want, sizeof(want));
        /* EDNS0: an OPT record offering the size */
        n = se_dns_query_make(".", "NS", 1, 1232, q, sizeof(q), &d);
        assert_int_equal(n, 12 + 1 + 4 + 11);
        assert_int_equal(q[11], 1);
        assert_int_equal(q[17 + 3] << 8 | q[17 + 4], 1232);
        assert_int_equal(se_dns_query_make("a..b", "A", 1, 0, q, sizeof(q), &d), -EINVAL);
        assert_int_equal(se_dns_query_make("a", "BOGUS", 1, 0, q, sizeof(q), &d), -EINVAL);
        assert_string_equal(d.text, "unknown record type \"BOGUS\"");
        char label[70];
        memset(label, 'x', 64);
        label[64] = 0;
        assert_int_equal(se_dns_query_make(label, "A", 1, 0, q, sizeof(q), &d), -EINVAL);
}

static void test_msg_text__response(void **state)
{
        (void)state;
        /* web.shop.svc.cluster.local A -> 10.96.0.10, SRV with a compressed
         * target, a TXT, and an OPT record */
        static const uint8_t msg[] = {
                0xab, 0xcd, 0x85, 0x00, 0,    1,    0,   3,   0,    0,   0,    1,   3,   'w',
                'e',  'b',  4,    's',  'h',  'o',  'p', 3,   's',  'v', 'c',  7,   'c', 'l',
                'u',  's',  't',  'e',  'r',  5,    'l', 'o', 'c',  'a', 'l',  0,   0,   1,
                0,    1,    0xc0, 12,   0,    1,    0,   1,   0,    0,   0,    5,   0,   4,
                10,   96,   0,    10,   0xc0, 12,   0,   33,  0,    1,   0,    0,   0,   5,
                0,    8,    0,    0,    0,    100,  0,   80,  0xc0, 12,  0xc0, 12,  0,   16,
                0,    1,    0,    0,    0x70, 0x80, 0,   6,   5,    '1', '.',  '1', '"', '0',
                0,    0,    41,   0x04, 0xd0, 0,    0,   0,   0,    0,   0,
        };
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        assert_int_equal(se_dns_msg_text(msg, sizeof(msg), false, &sb), 0);
        assert_string_equal(
                sb.buf,
                ";; ->>HEADER<<- opcode: QUERY, status: NOERROR\n"
                ";; flags: qr aa rd; QUERY: 1, ANSWER: 3, AUTHORITY: 0, ADDITIONAL: 1\n"
                "\n;; OPT PSEUDOSECTION:\n"
                "; EDNS: version: 0, flags:; udp: 1232\n"
                "\n;; QUESTION SECTION:\n"
                ";web.shop.svc.cluster.local.\t\tIN\tA\n"
                "\n;; ANSWER SECTION:\n"
                "web.shop.svc.cluster.local.\t5\tIN\tA\t10.96.0.10\n"
                "web.shop.svc.cluster.local.\t5\tIN\tSRV\t0 100 80 web.shop.svc.cluster.local.\n"
                "web.shop.svc.cluster.local.\t28800\tIN\tTXT\t\"1.1\\\"0\"\n");
        se_strbuf_reset(&sb);
        assert_int_equal(se_dns_msg_text(msg, sizeof(msg), true, &sb), 0);
        assert_non_null(strstr(sb.buf, "status: NOERROR, id: 43981\n"));
        se_strbuf_release(&sb);
}

static void test_msg_text__malformed(void **state)
{
        (void)state;
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        /* a name pointing at itself, then a count past the end */
        static const uint8_t loop[] = { 0, 1, 0x81, 0x03, 0,  1, 0, 1, 0,
                                        0, 0, 0,    0xc0, 12, 0, 1, 0, 1 };
        assert_int_equal(se_dns_msg_text(loop, sizeof(loop), false, &sb), -EBADMSG);
        assert_non_null(strstr(sb.buf, "status: NXDOMAIN"));
        assert_non_null(strstr(sb.buf, ";; malformed message"));
        se_strbuf_reset(&sb);
        assert_int_equal(se_dns_msg_text(loop, 5, false, &sb), -EBADMSG);
        assert_string_equal(sb.buf, ";; message shorter than a header\n");
        se_strbuf_release(&sb);
}

/* A name is at most 255 bytes with its root byte (RFC 1035 3.1), as the
 * autopath rewrite reads it: 63+63+63+61 letters fit, one more does not. */
static size_t question_of(uint8_t *m, const unsigned *labels, size_t n)
{
        size_t o = 12;
        memset(m, 0, 12);
        m[5] = 1;
        for (size_t i = 0; i < n; i++) {
                m[o++] = (uint8_t)labels[i];
                memset(m + o, 'a', labels[i]);
                o += labels[i];
        }
        static const uint8_t tail[] = { 0, 0, 1, 0, 1 };
        memcpy(m + o, tail, sizeof(tail));
        return o + sizeof(tail);
}

static void test_msg_text__name_length(void **state)
{
        (void)state;
        uint8_t m[300];
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        static const unsigned fits[] = { 63, 63, 63, 61 }, over[] = { 63, 63, 63, 62 };
        assert_int_equal(se_dns_msg_text(m, question_of(m, fits, 4), false, &sb), 0);
        assert_non_null(strstr(sb.buf, "\n;aaa"));
        se_strbuf_reset(&sb);
        assert_int_equal(se_dns_msg_text(m, question_of(m, over, 4), false, &sb), -EBADMSG);
        assert_non_null(strstr(sb.buf, ";; malformed message"));
        se_strbuf_release(&sb);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_upstream__forms),
                cmocka_unit_test(test_upstream__bad),
                cmocka_unit_test(test_resolv_conf__nameservers_in_order),
                cmocka_unit_test(test_resolv_conf__errors_name_the_line),
                cmocka_unit_test(test_types),
                cmocka_unit_test(test_query_make__wire),
                cmocka_unit_test(test_msg_text__response),
                cmocka_unit_test(test_msg_text__malformed),
                cmocka_unit_test(test_msg_text__name_length),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

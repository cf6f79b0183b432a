/* The daemons' shared plumbing in pkg/base: Prometheus histograms and
 * Go's float text, JSON string escaping (invalid UTF-8 as Go's
 * encoding/json), HOST:PORT listen addresses, the JSON log line. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <svcenv/histogram.h>
#include <svcenv/jsonstr.h>
#include <svcenv/log.h>
#include <svcenv/parse.h>
#include <svcenv/strbuf.h>

static void test_plumbing__go_float(void **state)
{
        (void)state;
        /* strconv.FormatFloat(v, 'g', -1, 64), as client_golang writes values */
        static const struct {
                double v;
                const char *want;
        } cases[] = {
                { 0, "0" },
                { 1, "1" },
                { -1, "-1" },
                { 0.005, "0.005" },
                { 1e-8, "1e-08" },
                { 0.0001, "0.0001" },
                { 0.00005, "5e-05" },
                { 16.384, "16.384" },
                { 0.1 + 0.2, "0.30000000000000004" },
                { 100000, "100000" },
                { 1e6, "1e+06" },
                { 1234567, "1.234567e+06" },
                { 154.5, "154.5" },
                { 2.5e21, "2.5e+21" },
                { INFINITY, "+Inf" },
                { -INFINITY, "-Inf" },
        };
        char buf[40];
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                se_format_go_float(cases[i].v, buf, sizeof(buf));
                assert_string_equal(buf, cases[i].want);
        }
        se_format_go_float(NAN, buf, sizeof(buf));
        assert_string_equal(buf, "NaN");
}

static void test_plumbing__histogram(void **state)
{
        (void)state;
        static const double le[] = { 0.1, 1, 10 };
        struct se_histogram h;
        se_histogram_init(&h, le, 3);
        assert_true(se_histogram_quantile(&h, 0.5) == 0);
        se_histogram_observe(&h, 0.1); /* on the bound: that bucket (le) */
        se_histogram_observe(&h, 0.25);
        se_histogram_observe_ns(&h, 2500000000ull);
        se_histogram_observe(&h, 11);
        assert_int_equal(se_histogram_count(&h), 4);
        assert_true(se_histogram_sum(&h) == 0.1 + 0.25 + 2.5 + 11);
        struct se_strbuf sb;
        se_strbuf_init(&sb, 1 << 16);
        se_histogram_render(&h, &sb, "x_seconds", "op=\"a\"", "Help text.");
        assert_string_equal(sb.buf, "# HELP x_seconds Help text.\n"
                                    "# TYPE x_seconds histogram\n"
                                    "x_seconds_bucket{op=\"a\",le=\"0.1\"} 1\n"
                                    "x_seconds_bucket{op=\"a\",le=\"1\"} 2\n"
                                    "x_seconds_bucket{op=\"a\",le=\"10\"} 3\n"
                                    "x_seconds_bucket{op=\"a\",le=\"+Inf\"} 4\n"
                                    "x_seconds_sum{op=\"a\"} 13.85\n"
                                    "x_seconds_count{op=\"a\"} 4\n");
        se_strbuf_release(&sb);
        /* more bounds than fit: the first ones only, the rest counts as +Inf */
        static double many[SE_HIST_MAX_BUCKETS + 5];
        for (size_t i = 0; i < SE_HIST_MAX_BUCKETS + 5; i++)
                many[i] = (double)i + 1;
        se_histogram_init(&h, many, SE_HIST_MAX_BUCKETS + 5);
        assert_int_equal(h.n_le, SE_HIST_MAX_BUCKETS);
        se_histogram_observe(&h, SE_HIST_MAX_BUCKETS + 3);
        assert_int_equal(h.buckets[SE_HIST_MAX_BUCKETS], 1);
}

static void escaped(const char *in, const char *want)
{
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        se_json_put_string(&sb, in);
        assert_false(se_strbuf_failed(&sb));
        assert_string_equal(sb.buf, want);
        se_strbuf_release(&sb);
}

static void test_plumbing__json_string(void **state)
{
        (void)state;
        escaped("", "\"\"");
        escaped("a\"b\\c/d", "\"a\\\"b\\\\c/d\"");
        escaped("\n\r\t\x01\x1f\x7f", "\"\\n\\r\\t\\u0001\\u001f\x7f\"");
        /* valid UTF-8 as it is: 2, 3 and 4 bytes, U+10FFFF */
        escaped("é€𝄞\xf4\x8f\xbf\xbf", "\"é€𝄞\xf4\x8f\xbf\xbf\"");
        /* invalid UTF-8: each bad byte becomes U+FFFD, as encoding/json */
        escaped("a\xff", "\"a\\ufffd\"");
        escaped("\x80x", "\"\\ufffdx\"");
        escaped("\xc0\xaf", "\"\\ufffd\\ufffd\""); /* overlong '/' */
        escaped("\xe0\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\""); /* overlong 3-byte */
        escaped("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\""); /* a surrogate */
        escaped("\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\""); /* > U+10FFFF */
        escaped("\xe2\x82", "\"\\ufffd\\ufffd\""); /* cut short at the end */
        escaped("\xe2\x82x", "\"\\ufffd\\ufffdx\"");
}

static void test_plumbing__hostport(void **state)
{
        (void)state;
        char host[16];
        int port = -1;
        assert_int_equal(se_parse_hostport("0.0.0.0:10256", host, sizeof(host), &port), 0);
        assert_string_equal(host, "0.0.0.0");
        assert_int_equal(port, 10256);
        assert_int_equal(se_parse_hostport(":80", host, sizeof(host), &port), 0);
        assert_string_equal(host, "");
        assert_int_equal(port, 80);
        assert_int_equal(se_parse_hostport("[::1]:0", host, sizeof(host), &port), 0);
        assert_string_equal(host, "::1");
        assert_int_equal(port, 0);
        assert_int_equal(se_parse_hostport("[]:1", host, sizeof(host), &port), 0);
        assert_string_equal(host, "");
        static const char *const bad[] = {
                "",        "80",      "host",     "a:",      "a:x",
                "a:-1",    "a:65536", "a: 80",    "::1:80",  "[::1]80",
                "[::1:80", "::1]:80", "[a]b]:80", "[[a]:80", "a:80 ",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                port = -1;
                assert_int_equal(se_parse_hostport(bad[i], host, sizeof(host), &port), -EINVAL);
                assert_int_equal(port, -1); /* untouched */
        }
        assert_int_equal(se_parse_hostport("a-very-long-host-name:80", host, sizeof(host), &port),
                         -ERANGE);
}

/* a JSON log line escapes as every JSON we write: invalid UTF-8 as U+FFFD */
static void test_plumbing__json_log_line(void **state)
{
        (void)state;
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        se_log_set_fd(fds[1]);
        se_log_set_json(true);
        se_log_error("bad \xff \"name\"\n");
        se_log_set_json(false);
        se_log_set_fd(2);
        close(fds[1]);
        char line[512] = "";
        ssize_t n = read(fds[0], line, sizeof(line) - 1);
        close(fds[0]);
        assert_true(n > 0);
        line[n] = '\0';
        assert_non_null(strstr(line, "\"msg\":\"bad \\ufffd \\\"name\\\"\\n\""));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_plumbing__go_float),
                cmocka_unit_test(test_plumbing__histogram),
                cmocka_unit_test(test_plumbing__json_string),
                cmocka_unit_test(test_plumbing__hostport),
                cmocka_unit_test(test_plumbing__json_log_line),
        };
        return cmocka_run_group_tests_name("plumbing", tests, NULL, NULL);
}

/* Pure parts of the client: status mapping, token bucket, watch line
 * splitter and event parsing. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <svcenv/kube_client.h>
#include <svcenv/kube_watch.h>

static void test_stream__status_mapping(void **state)
{
        (void)state;
        assert_int_equal(se_kube_status_errno(200, NULL), 0);
        assert_int_equal(se_kube_status_errno(404, "NotFound"), -ENOENT);
        /* 409 is ambiguous: the reason decides */
        assert_int_equal(se_kube_status_errno(409, "AlreadyExists"), -EEXIST);
        assert_int_equal(se_kube_status_errno(409, "Conflict"), -ESTALE);
        assert_int_equal(se_kube_status_errno(409, NULL), -ESTALE);
        assert_int_equal(se_kube_status_errno(410, "Expired"), -ESTALE);
        assert_int_equal(se_kube_status_errno(410, "Gone"), -ESTALE);
        assert_int_equal(se_kube_status_errno(403, "Forbidden"), -EACCES);
        assert_int_equal(se_kube_status_errno(401, ""), -EPERM);
        assert_int_equal(se_kube_status_errno(422, "Invalid"), -EINVAL);
        assert_int_equal(se_kube_status_errno(429, "TooManyRequests"), -EAGAIN);
        assert_int_equal(se_kube_status_errno(503, NULL), -EAGAIN);
        assert_int_equal(se_kube_status_errno(500, "InternalError"), -EIO);
        assert_int_equal(se_kube_status_errno(502, NULL), -EIO);
        assert_int_equal(se_kube_status_errno(504, NULL), -ETIMEDOUT);
        assert_int_equal(se_kube_status_errno(413, NULL), -E2BIG);
        assert_int_equal(se_kube_status_errno(418, NULL), -EINVAL);
}

static void test_stream__token_bucket(void **state)
{
        (void)state;
        struct se_token_bucket b;
        const uint64_t s = 1000000000ull;
        se_token_bucket_init(&b, 5, 10, 0);
        /* the burst is free */
        for (int i = 0; i < 10; i++)
                assert_true(se_token_bucket_reserve(&b, 0) == 0);
        /* then one token every 200 ms, reservations queue up */
        assert_true(se_token_bucket_reserve(&b, 0) == s / 5);
        assert_true(se_token_bucket_reserve(&b, 0) == 2 * s / 5);
        /* after a long idle time it is full again, not more */
        for (int i = 0; i < 10; i++)
                assert_true(se_token_bucket_reserve(&b, 100 * s) == 0);
        assert_true(se_token_bucket_reserve(&b, 100 * s) > 0);
        se_token_bucket_init(&b, -1, 0, 0);
        for (int i = 0; i < 1000; i++)
                assert_true(se_token_bucket_reserve(&b, 0) == 0);
}

struct got {
        char lines[8][64];
        int n;
};

static int collect(void *data, const char *line, size_t len)
{
        struct got *g = data;
        assert_true(g->n < 8 && len < 64);
        memcpy(g->lines[g->n], line, len);
        g->lines[g->n][len] = '\0';
        g->n++;
        return 0;
}

static void test_stream__lines_across_chunks(void **state)
{
        (void)state;
        static const char text[] = "{\"a\":1}\n{\"b\":2}\r\n\n{\"c\":3}\n{\"tail\"";
        /* every way of cutting the text in two gives the same lines */
        for (size_t cut = 0; cut <= sizeof(text) - 1; cut++) {
                struct se_kube_lines l;
                struct got g = { .n = 0 };
                se_kube_lines_init(&l, 0);
                assert_int_equal(se_kube_lines_feed(&l, text, cut, collect, &g), 0);
                assert_int_equal(
                        se_kube_lines_feed(&l, text + cut, sizeof(text) - 1 - cut, collect, &g), 0);
                assert_int_equal(g.n, 3);
                assert_string_equal(g.lines[0], "{\"a\":1}");
                assert_string_equal(g.lines[1], "{\"b\":2}");
                assert_string_equal(g.lines[2], "{\"c\":3}");
                assert_int_equal(se_kube_lines_finish(&l, collect, &g), 0);
                assert_int_equal(g.n, 4);
                assert_string_equal(g.lines[3], "{\"tail\"");
                se_kube_lines_release(&l);
        }
        /* byte by byte */
        struct se_kube_lines l;
        struct got g = { .n = 0 };
        se_kube_lines_init(&l, 0);
        for (size_t i = 0; i < sizeof(text) - 1; i++)
                assert_int_equal(se_kube_lines_feed(&l, text + i, 1, collect, &g), 0);
        assert_int_equal(g.n, 3);
        se_kube_lines_release(&l);
}

static void test_stream__line_cap(void **state)
{
        (void)state;
        struct se_kube_lines l;
        struct got g = { .n = 0 };
        se_kube_lines_init(&l, 8);
        assert_int_equal(se_kube_lines_feed(&l, "12345678\n", 9, collect, &g), 0); /* exactly 8 */
        assert_int_equal(se_kube_lines_feed(&l, "12345", 5, collect, &g), 0);
        assert_int_equal(se_kube_lines_feed(&l, "6789", 4, collect, &g), -E2BIG);
        se_kube_lines_release(&l);
        se_kube_lines_init(&l, 8);
        assert_int_equal(se_kube_lines_feed(&l, "123456789\n", 10, collect, &g), -E2BIG);
        se_kube_lines_release(&l);
}

static void test_stream__events(void **state)
{
        (void)state;
        enum se_kube_event_type t;
        json_t *doc;
        struct se_diag d;
        const char *ev = "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":"
                         "{\"resourceVersion\":\"12\"}}}";
        assert_int_equal(se_kube_event_parse(ev, strlen(ev), &t, &doc, &d), 0);
        assert_int_equal(t, SE_KUBE_BOOKMARK);
        json_decref(doc);
        const char *gone = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"status\":"
                           "\"Failure\",\"message\":\"too old resource version: 1 (5)\","
                           "\"reason\":\"Expired\",\"code\":410}}";
        assert_int_equal(se_kube_event_parse(gone, strlen(gone), &t, &doc, &d), -ESTALE);
        assert_non_null(strstr(d.text, "too old resource version"));
        const char *internal = "{\"type\":\"ERROR\",\"object\":{\"code\":500}}";
        assert_int_equal(se_kube_event_parse(internal, strlen(internal), &t, &doc, &d), -EIO);
        assert_int_equal(se_kube_event_parse("{\"type\":\"NOPE\",\"object\":{}}", 28, &t, &doc, &d),
                         -EIO);
        assert_int_equal(se_kube_event_parse("[1]", 3, &t, &doc, &d), -EIO);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_stream__status_mapping),
                cmocka_unit_test(test_stream__token_bucket),
                cmocka_unit_test(test_stream__lines_across_chunks),
                cmocka_unit_test(test_stream__line_cap),
                cmocka_unit_test(test_stream__events),
        };
        return cmocka_run_group_tests_name("stream", tests, NULL, NULL);
}

/* Pure pieces of the controller: histograms, key parsing, the
 * NamespaceTerminating rule. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <svcenv/controller.h>
#include <svcenv/ctl_metrics.h>

#define S 1000000000ull

static void test_controller__histogram(void **state)
{
        (void)state;
        static const double le[] = { 0.1, 1, 10 };
        struct se_histogram h;
        se_histogram_init(&h, le, 3);
        assert_true(se_histogram_quantile(&h, 0.5) == 0);
        for (int i = 0; i < 90; i++)
                se_histogram_observe_ns(&h, 50000000); /* 0.05 s */
        for (int i = 0; i < 10; i++)
                se_histogram_observe_ns(&h, 5 * S);
        se_histogram_observe_ns(&h, 100 * S); /* +Inf */
        double p50 = se_histogram_quantile(&h, 0.5);
        assert_true(p50 > 0 && p50 <= 0.1);
        double p95 = se_histogram_quantile(&h, 0.95);
        assert_true(p95 > 1 && p95 <= 10);
        assert_true(se_histogram_quantile(&h, 1.0) == 10);
        struct se_strbuf sb;
        se_strbuf_init(&sb, 1 << 16);
        se_histogram_render(&h, &sb, "x_seconds", "name=\"q\"", "help");
        assert_non_null(strstr(sb.buf, "# TYPE x_seconds histogram\n"));
        assert_non_null(strstr(sb.buf, "x_seconds_bucket{name=\"q\",le=\"0.1\"} 90\n"));
        assert_non_null(strstr(sb.buf, "x_seconds_bucket{name=\"q\",le=\"10\"} 100\n"));
        assert_non_null(strstr(sb.buf, "x_seconds_bucket{name=\"q\",le=\"+Inf\"} 101\n"));
        assert_non_null(strstr(sb.buf, "x_seconds_count{name=\"q\"} 101\n"));
        assert_non_null(strstr(sb.buf, "x_seconds_sum{name=\"q\"} 154.5"));
        se_strbuf_reset(&sb);
        se_histogram_render(&h, &sb, "y", NULL, NULL);
        assert_non_null(strstr(sb.buf, "y_bucket{le=\"1\"} 90\n"));
        assert_non_null(strstr(sb.buf, "y_count 101\n"));
        assert_null(strstr(sb.buf, "# HELP"));
        se_strbuf_release(&sb);
}

static void test_controller__split_key(void **state)
{
        (void)state;
        char buf[64];
        const char *ns, *name;
        assert_int_equal(se_controller_split_key("default/web", buf, sizeof(buf), &ns, &name), 0);
        assert_string_equal(ns, "default");
        assert_string_equal(name, "web");
        assert_int_equal(se_controller_split_key("web", buf, sizeof(buf), &ns, &name), -EINVAL);
        assert_int_equal(se_controller_split_key("/web", buf, sizeof(buf), &ns, &name), -EINVAL);
        assert_int_equal(se_controller_split_key("a/", buf, sizeof(buf), &ns, &name), -EINVAL);
        assert_int_equal(se_controller_split_key("a/b/c", buf, sizeof(buf), &ns, &name), -EINVAL);
        char big[100];
        memset(big, 'a', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        big[10] = '/';
        assert_int_equal(se_controller_split_key(big, buf, sizeof(buf), &ns, &name), -EINVAL);
}

static void test_controller__namespace_terminating(void **state)
{
        (void)state;
        /* the API server's NamespaceLifecycle message for a create */
        const char *msg = "endpoints \"web\" is forbidden: unable to create new content in "
                          "namespace ns1 because it is being terminated";
        assert_true(se_controller_namespace_terminating(-EACCES, msg));
        assert_false(se_controller_namespace_terminating(-EACCES, "endpoints is forbidden: RBAC"));
        assert_false(se_controller_namespace_terminating(-ESTALE, msg));
        assert_false(se_controller_namespace_terminating(-EACCES, NULL));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_controller__histogram),
                cmocka_unit_test(test_controller__split_key),
                cmocka_unit_test(test_controller__namespace_terminating),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

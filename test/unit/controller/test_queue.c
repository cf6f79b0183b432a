/* The controller work queue: client-go workqueue semantics (queue_test.go,
 * rate_limiting_queue_test.go, default_rate_limiters_test.go). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include <svcenv/ctl_queue.h>
#include <svcenv/timeutil.h>

static struct se_ctl_queue *mkq(void)
{
        struct se_ctl_queue_opts o = { .name = "test", .qps = -1 };
        struct se_ctl_queue *q = se_ctl_queue_new(&o);
        assert_non_null(q);
        return q;
}

static void expect_get(struct se_ctl_queue *q, const char *want)
{
        char *k = se_ctl_queue_get(q);
        assert_non_null(k);
        assert_string_equal(k, want);
        se_ctl_queue_done(q, k);
        free(k);
}

static void test_queue__fifo_and_dedup(void **state)
{
        (void)state;
        struct se_ctl_queue *q = mkq();
        assert_int_equal(se_ctl_queue_add(q, "a"), 0);
        assert_int_equal(se_ctl_queue_add(q, "b"), 0);
        assert_int_equal(se_ctl_queue_add(q, "a"), 0);
        assert_int_equal(se_ctl_queue_len(q), 2);
        expect_get(q, "a");
        expect_get(q, "b");
        assert_int_equal(se_ctl_queue_len(q), 0);
        se_ctl_queue_free(q);
}

/* A key added while a worker holds it is not handed to a second worker; it
 * comes back once the first is done (client-go TestAddWhileProcessing). */
static void test_queue__add_while_processing(void **state)
{
        (void)state;
        struct se_ctl_queue *q = mkq();
        se_ctl_queue_add(q, "a");
        char *k = se_ctl_queue_get(q);
        assert_string_equal(k, "a");
        se_ctl_queue_add(q, "a");
        se_ctl_queue_add(q, "a");
        assert_int_equal(se_ctl_queue_len(q), 0);
        assert_int_equal(se_ctl_queue_pending(q), 1);
        se_ctl_queue_done(q, k);
        free(k);
        assert_int_equal(se_ctl_queue_len(q), 1);
        expect_get(q, "a");
        assert_int_equal(se_ctl_queue_pending(q), 0);
        se_ctl_queue_free(q);
}

/* Per-item exponential back-off: base·2^n capped (ItemExponentialFailure
 * with 1 ms / 1 s in upstream's test; 5 ms / 1000 s is the default). */
static void test_queue__backoff(void **state)
{
        (void)state;
        struct se_ctl_queue_opts o = { .base_delay_ns = 1000000, .max_delay_ns = 1000000000 };
        assert_int_equal(se_ctl_queue_backoff_ns(&o, 0), 1000000);
        assert_int_equal(se_ctl_queue_backoff_ns(&o, 1), 2000000);
        assert_int_equal(se_ctl_queue_backoff_ns(&o, 4), 16000000);
        assert_int_equal(se_ctl_queue_backoff_ns(&o, 10), 1000000000);
        assert_int_equal(se_ctl_queue_backoff_ns(&o, 200), 1000000000);
        struct se_ctl_queue_opts d = { 0 };
        assert_int_equal(se_ctl_queue_backoff_ns(&d, 0), 5000000);
        /* the 15th try of upstream's Endpoints controller waits 5 ms·2^14 = 81.92 s */
        assert_int_equal(se_ctl_queue_backoff_ns(&d, 14), 81920000000ull);
        assert_int_equal(se_ctl_queue_backoff_ns(&d, 40), 1000000000000ull);
}

static void test_queue__rate_limited_requeues_and_forget(void **state)
{
        (void)state;
        struct se_ctl_queue *q = mkq();
        assert_int_equal(se_ctl_queue_num_requeues(q, "a"), 0);
        se_ctl_queue_add_rate_limited(q, "a");
        se_ctl_queue_add_rate_limited(q, "a");
        assert_int_equal(se_ctl_queue_num_requeues(q, "a"), 2);
        /* delayed: not ready at once */
        assert_int_equal(se_ctl_queue_len(q), 0);
        uint64_t t0 = se_now_mono_ns();
        expect_get(q, "a"); /* 5 ms later */
        assert_true(se_now_mono_ns() - t0 >= 4000000);
        se_ctl_queue_forget(q, "a");
        assert_int_equal(se_ctl_queue_num_requeues(q, "a"), 0);
        se_ctl_queue_free(q);
}

static void test_queue__add_after_earliest_wins(void **state)
{
        (void)state;
        struct se_ctl_queue *q = mkq();
        se_ctl_queue_add_after(q, "a", 10ull * 1000000000ull);
        se_ctl_queue_add_after(q, "a", 20ull * 1000000);
        assert_int_equal(se_ctl_queue_len(q), 0);
        uint64_t t0 = se_now_mono_ns();
        expect_get(q, "a");
        uint64_t took = se_now_mono_ns() - t0;
        assert_true(took >= 15ull * 1000000);
        assert_true(took < 5ull * 1000000000ull);
        /* an immediate add overrides a delay */
        se_ctl_queue_add_after(q, "b", 10ull * 1000000000ull);
        se_ctl_queue_add(q, "b");
        assert_int_equal(se_ctl_queue_len(q), 1);
        expect_get(q, "b");
        se_ctl_queue_free(q);
}

static void test_queue__shutdown(void **state)
{
        (void)state;
        struct se_ctl_queue *q = mkq();
        se_ctl_queue_add(q, "a");
        se_ctl_queue_add(q, "b");
        se_ctl_queue_add_after(q, "later", 10ull * 1000000000ull);
        se_ctl_queue_shutdown(q, true);
        /* draining: what is ready is still handed out, delayed keys are dropped */
        expect_get(q, "a");
        expect_get(q, "b");
        assert_null(se_ctl_queue_get(q));
        /* nothing new is taken */
        se_ctl_queue_add(q, "c");
        assert_int_equal(se_ctl_queue_len(q), 0);
        se_ctl_queue_free(q);

        q = mkq();
        se_ctl_queue_add(q, "a");
        se_ctl_queue_shutdown(q, false);
        assert_null(se_ctl_queue_get(q));
        se_ctl_queue_free(q);
}

static void test_queue__metrics(void **state)
{
        (void)state;
        struct se_ctl_queue *q = mkq();
        se_ctl_queue_add(q, "a");
        se_ctl_queue_add(q, "b");
        expect_get(q, "a");
        se_ctl_queue_add_rate_limited(q, "x");
        struct se_strbuf sb;
        se_strbuf_init(&sb, 1 << 20);
        se_ctl_queue_metrics(q, &sb);
        assert_non_null(strstr(sb.buf, "\nworkqueue_depth{name=\"test\"} 1\n"));
        assert_non_null(strstr(sb.buf, "\nworkqueue_adds_total{name=\"test\"} 2\n"));
        assert_non_null(strstr(sb.buf, "\nworkqueue_retries_total{name=\"test\"} 1\n"));
        assert_non_null(
                strstr(sb.buf, "\nworkqueue_queue_duration_seconds_count{name=\"test\"} 1\n"));
        assert_non_null(strstr(
                sb.buf, "workqueue_queue_duration_seconds_bucket{name=\"test\",le=\"+Inf\"} 1\n"));
        se_strbuf_release(&sb);
        se_ctl_queue_free(q);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_queue__fifo_and_dedup),
                cmocka_unit_test(test_queue__add_while_processing),
                cmocka_unit_test(test_queue__backoff),
                cmocka_unit_test(test_queue__rate_limited_requeues_and_forget),
                cmocka_unit_test(test_queue__add_after_earliest_wins),
                cmocka_unit_test(test_queue__shutdown),
                cmocka_unit_test(test_queue__metrics),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

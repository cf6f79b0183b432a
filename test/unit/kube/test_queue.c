/* The work queue: dedup, dirty-while-processing, back-off, shutdown, workers. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include <svcenv/kube_queue.h>
#include <svcenv/timeutil.h>

static void test_queue__dedup_and_order(void **state)
{
        (void)state;
        struct se_kube_queue *q = se_kube_queue_new(NULL);
        assert_int_equal(se_kube_queue_add(q, "a"), 0);
        assert_int_equal(se_kube_queue_add(q, "b"), 0);
        assert_int_equal(se_kube_queue_add(q, "a"), 0); /* already queued */
        assert_int_equal(se_kube_queue_len(q), 2);
        const char *k1, *k2, *k3;
        assert_int_equal(se_kube_queue_get(q, 0, &k1), 0);
        assert_string_equal(k1, "a");
        /* a key being processed is not handed out again... */
        assert_int_equal(se_kube_queue_add(q, "a"), 0);
        assert_int_equal(se_kube_queue_len(q), 1);
        assert_int_equal(se_kube_queue_get(q, 0, &k2), 0);
        assert_string_equal(k2, "b");
        assert_int_equal(se_kube_queue_get(q, 20, &k3), -ETIMEDOUT);
        /* ...but queued again when it is done */
        se_kube_queue_done(q, k1);
        assert_int_equal(se_kube_queue_len(q), 1);
        assert_int_equal(se_kube_queue_get(q, 0, &k3), 0);
        assert_string_equal(k3, "a");
        se_kube_queue_done(q, k3);
        se_kube_queue_done(q, k2);
        assert_int_equal(se_kube_queue_len(q), 0);
        se_kube_queue_free(q);
}

static void test_queue__rate_limited_backoff(void **state)
{
        (void)state;
        struct se_kube_queue_opts o = { .base_delay_ns = 1000000, .max_delay_ns = 8000000 };
        struct se_kube_queue *q = se_kube_queue_new(&o);
        /* per-key delay doubles and is capped */
        assert_true(se_kube_queue_when(q, "k") == 1000000);
        uint64_t t0 = se_now_mono_ns();
        for (int i = 0; i < 6; i++)
                assert_int_equal(se_kube_queue_add_rate_limited(q, "k"), 0);
        assert_int_equal(se_kube_queue_requeues(q, "k"), 6);
        assert_true(se_kube_queue_when(q, "k") == 8000000);
        /* the key arrives after the first (earliest) delay, and only once */
        const char *k;
        assert_int_equal(se_kube_queue_get(q, 2000, &k), 0);
        assert_string_equal(k, "k");
        assert_true(se_now_mono_ns() - t0 >= 900000);
        se_kube_queue_done(q, k);
        assert_int_equal(se_kube_queue_get(q, 50, &k), -ETIMEDOUT);
        se_kube_queue_forget(q, "k");
        assert_int_equal(se_kube_queue_requeues(q, "k"), 0);
        assert_true(se_kube_queue_when(q, "k") == 1000000);
        se_kube_queue_free(q);
}

static void test_queue__overall_bucket(void **state)
{
        (void)state;
        /* 2 qps, burst 1: the second failing key waits ~0.5 s though its own
         * back-off is 1 ms */
        struct se_kube_queue_opts o = { .base_delay_ns = 1000000, .qps = 2, .burst = 1 };
        struct se_kube_queue *q = se_kube_queue_new(&o);
        assert_int_equal(se_kube_queue_add_rate_limited(q, "x"), 0);
        assert_int_equal(se_kube_queue_add_rate_limited(q, "y"), 0);
        const char *k;
        assert_int_equal(se_kube_queue_get(q, 1000, &k), 0);
        assert_string_equal(k, "x");
        assert_int_equal(se_kube_queue_get(q, 200, &k), -ETIMEDOUT);
        assert_int_equal(se_kube_queue_get(q, 1000, &k), 0);
        assert_string_equal(k, "y");
        se_kube_queue_free(q);
}

static void *getter(void *arg)
{
        const char *k;
        return (void *)(intptr_t)se_kube_queue_get(arg, 0, &k);
}

static void test_queue__shutdown_wakes_getters(void **state)
{
        (void)state;
        struct se_kube_queue *q = se_kube_queue_new(NULL);
        pthread_t t;
        pthread_create(&t, NULL, getter, q);
        struct timespec ts = { 0, 20000000 };
        nanosleep(&ts, NULL);
        se_kube_queue_shutdown(q);
        void *ret;
        pthread_join(t, &ret);
        assert_int_equal((int)(intptr_t)ret, -ESHUTDOWN);
        assert_int_equal(se_kube_queue_add(q, "late"), -ESHUTDOWN);
        se_kube_queue_free(q);
        /* what is queued before shutdown is still handed out */
        q = se_kube_queue_new(NULL);
        se_kube_queue_add(q, "a");
        se_kube_queue_add_after(q, "later", 1000000000ull);
        se_kube_queue_shutdown(q);
        const char *k;
        assert_int_equal(se_kube_queue_get(q, 0, &k), 0);
        assert_string_equal(k, "a");
        se_kube_queue_done(q, k);
        assert_int_equal(se_kube_queue_get(q, 0, &k), -ESHUTDOWN);
        assert_int_equal(se_kube_queue_shutdown_drain(q, 100), 0);
        se_kube_queue_free(q);
}

struct work {
        atomic_int calls;
        atomic_int concurrent_same; /* a key seen by two workers at once */
        atomic_int busy[100];
        atomic_int fail_once[100];
};

static int process(void *data, const char *key)
{
        struct work *w = data;
        int i = atoi(key);
        if (atomic_fetch_add(&w->busy[i], 1) != 0)
                atomic_fetch_add(&w->concurrent_same, 1);
        atomic_fetch_add(&w->calls, 1);
        struct timespec ts = { 0, 100000 };
        nanosleep(&ts, NULL);
        atomic_fetch_sub(&w->busy[i], 1);
        /* every key fails once: it must come back */
        return atomic_fetch_add(&w->fail_once[i], 1) == 0 ? -EIO : 0;
}

static void test_queue__workers(void **state)
{
        (void)state;
        struct se_kube_queue_opts o = { .base_delay_ns = 1000000, .qps = -1 };
        struct se_kube_queue *q = se_kube_queue_new(&o);
        struct work *w = calloc(1, sizeof(*w));
        struct se_kube_workers *ws = se_kube_workers_start(q, 4, process, w);
        assert_non_null(ws);
        for (int round = 0; round < 3; round++)
                for (int i = 0; i < 100; i++) {
                        char k[8];
                        snprintf(k, sizeof(k), "%d", i);
                        assert_int_equal(se_kube_queue_add(q, k), 0);
                }
        uint64_t end = se_now_mono_ns() + 5000000000ull;
        for (;;) {
                int all = 1;
                for (int i = 0; i < 100; i++)
                        all &= atomic_load(&w->fail_once[i]) >= 2;
                if (all || se_now_mono_ns() > end)
                        break;
                struct timespec ts = { 0, 1000000 };
                nanosleep(&ts, NULL);
        }
        assert_int_equal(se_kube_queue_shutdown_drain(q, 2000), 0);
        ws = se_kube_workers_join(ws);
        for (int i = 0; i < 100; i++)
                assert_true(atomic_load(&w->fail_once[i]) >= 2);
        assert_int_equal(atomic_load(&w->concurrent_same), 0);
        /* dedup: at most 3 adds + 1 retry per key, at least 2 */
        assert_true(atomic_load(&w->calls) <= 400);
        free(w);
        se_kube_queue_free(q);
}

/* A key added while a worker holds it is not handed to a second worker; it
 * comes back once the first is done (client-go TestAddWhileProcessing). */
static void test_queue__add_while_processing(void **state)
{
        (void)state;
        struct se_kube_queue *q = se_kube_queue_new(NULL);
        struct se_kube_queue_stats st;
        se_kube_queue_add(q, "a");
        const char *k;
        assert_int_equal(se_kube_queue_get(q, 0, &k), 0);
        assert_string_equal(k, "a");
        se_kube_queue_add(q, "a");
        se_kube_queue_add(q, "a");
        se_kube_queue_stats(q, &st);
        assert_int_equal(st.depth, 0);
        assert_int_equal(st.processing, 1);
        se_kube_queue_done(q, k);
        assert_int_equal(se_kube_queue_len(q), 1);
        assert_int_equal(se_kube_queue_get(q, 0, &k), 0);
        assert_string_equal(k, "a");
        se_kube_queue_done(q, k);
        se_kube_queue_stats(q, &st);
        assert_int_equal(st.depth + st.processing, 0);
        se_kube_queue_free(q);
}

/* The default per-key back-off: 5 ms doubling, capped at 1000 s; the 15th
 * try of upstream's Endpoints controller waits 5 ms * 2^14 = 81.92 s. */
static void test_queue__default_backoff(void **state)
{
        (void)state;
        struct se_kube_queue_opts o = { .qps = -1 };
        struct se_kube_queue *q = se_kube_queue_new(&o);
        assert_true(se_kube_queue_when(q, "k") == 5000000ull);
        for (int i = 0; i < 14; i++)
                assert_int_equal(se_kube_queue_add_rate_limited(q, "k"), 0);
        assert_int_equal(se_kube_queue_requeues(q, "k"), 14);
        assert_true(se_kube_queue_when(q, "k") == 81920000000ull);
        for (int i = 0; i < 30; i++)
                assert_int_equal(se_kube_queue_add_rate_limited(q, "k"), 0);
        assert_true(se_kube_queue_when(q, "k") == 1000000000000ull);
        se_kube_queue_free(q);
}

static void test_queue__add_after_earliest_wins(void **state)
{
        (void)state;
        struct se_kube_queue *q = se_kube_queue_new(NULL);
        se_kube_queue_add_after(q, "a", 10ull * 1000000000ull);
        se_kube_queue_add_after(q, "a", 20ull * 1000000);
        assert_int_equal(se_kube_queue_len(q), 0);
        uint64_t t0 = se_now_mono_ns();
        const char *k;
        assert_int_equal(se_kube_queue_get(q, 5000, &k), 0);
        assert_string_equal(k, "a");
        uint64_t took = se_now_mono_ns() - t0;
        assert_true(took >= 15ull * 1000000);
        assert_true(took < 5ull * 1000000000ull);
        se_kube_queue_done(q, k);
        /* an immediate add does not wait for a delay */
        se_kube_queue_add_after(q, "b", 10ull * 1000000000ull);
        se_kube_queue_add(q, "b");
        assert_int_equal(se_kube_queue_len(q), 1);
        assert_int_equal(se_kube_queue_get(q, 0, &k), 0);
        assert_string_equal(k, "b");
        se_kube_queue_done(q, k);
        se_kube_queue_free(q);
}

/* shutdown_now drops queued keys; a key being processed is not re-queued. */
static void test_queue__shutdown_now(void **state)
{
        (void)state;
        struct se_kube_queue *q = se_kube_queue_new(NULL);
        se_kube_queue_add(q, "a");
        se_kube_queue_add(q, "b");
        se_kube_queue_add_after(q, "later", 10ull * 1000000000ull);
        const char *k;
        assert_int_equal(se_kube_queue_get(q, 0, &k), 0);
        assert_string_equal(k, "a");
        se_kube_queue_add(q, "a"); /* dirty while processing */
        se_kube_queue_shutdown_now(q);
        struct se_kube_queue_stats st;
        se_kube_queue_stats(q, &st);
        assert_int_equal(st.depth, 0);
        assert_int_equal(st.delayed, 0);
        assert_int_equal(st.processing, 1);
        const char *k2;
        assert_int_equal(se_kube_queue_get(q, 0, &k2), -ESHUTDOWN);
        se_kube_queue_done(q, k);
        assert_int_equal(se_kube_queue_len(q), 0);
        assert_int_equal(se_kube_queue_get(q, 0, &k2), -ESHUTDOWN);
        assert_int_equal(se_kube_queue_add(q, "c"), -ESHUTDOWN);
        se_kube_queue_free(q);
}

struct observed {
        unsigned waited, worked;
        uint64_t worked_ns;
};

static void observe(void *data, enum se_kube_queue_phase phase, uint64_t ns)
{
        struct observed *o = data;
        if (phase == SE_KUBE_QUEUE_WAITED) {
                o->waited++;
        } else {
                o->worked++;
                o->worked_ns += ns;
        }
}

/* What client-go's workqueue metrics count: adds into the FIFO (a dedup'd
 * add is not one), retries, depth, time queued and time processing. */
static void test_queue__stats_and_hooks(void **state)
{
        (void)state;
        struct observed ob = { 0 };
        struct se_kube_queue_opts o = { .qps = -1, .observe = observe, .observe_data = &ob };
        struct se_kube_queue *q = se_kube_queue_new(&o);
        se_kube_queue_add(q, "a");
        se_kube_queue_add(q, "b");
        se_kube_queue_add(q, "a");
        const char *k;
        assert_int_equal(se_kube_queue_get(q, 0, &k), 0);
        assert_int_equal(ob.waited, 1);
        assert_int_equal(ob.worked, 0);
        se_kube_queue_add_rate_limited(q, "x");
        struct timespec ts = { 0, 2000000 };
        nanosleep(&ts, NULL);
        struct se_kube_queue_stats st;
        se_kube_queue_stats(q, &st);
        assert_int_equal(st.depth, 1);
        assert_int_equal(st.processing, 1);
        assert_int_equal(st.delayed, 1);
        assert_int_equal(st.adds, 2);
        assert_int_equal(st.retries, 1);
        assert_true(st.unfinished_ns >= 2000000);
        assert_true(st.longest_ns == st.unfinished_ns);
        se_kube_queue_done(q, k);
        assert_int_equal(ob.worked, 1);
        assert_true(ob.worked_ns >= 2000000);
        se_kube_queue_stats(q, &st);
        assert_int_equal(st.processing, 0);
        assert_true(st.unfinished_ns == 0);
        se_kube_queue_free(q);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_queue__dedup_and_order),
                cmocka_unit_test(test_queue__rate_limited_backoff),
                cmocka_unit_test(test_queue__overall_bucket),
                cmocka_unit_test(test_queue__shutdown_wakes_getters),
                cmocka_unit_test(test_queue__workers),
                cmocka_unit_test(test_queue__add_while_processing),
                cmocka_unit_test(test_queue__default_backoff),
                cmocka_unit_test(test_queue__add_after_earliest_wins),
                cmocka_unit_test(test_queue__shutdown_now),
                cmocka_unit_test(test_queue__stats_and_hooks),
        };
        return cmocka_run_group_tests_name("queue", tests, NULL, NULL);
}

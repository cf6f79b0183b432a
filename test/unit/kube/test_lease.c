/* Lease records: decode and encode of the spec (MicroTime with microseconds). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <svcenv/kube_lease.h>

static void test_lease__round_trip(void **state)
{
        (void)state;
        json_t *lease = json_pack("{s:s,s:s,s:{s:s,s:s}}", "apiVersion", "coordination.k8s.io/v1",
                                  "kind", "Lease", "metadata", "name", "l", "resourceVersion", "7");
        char holder[] = "pod-a";
        struct se_kube_lease_record rec = { .holder = holder,
                                            .duration_s = 15,
                                            .acquire_ns = 1764489600123456789ll,
                                            .renew_ns = 1764489601000000000ll,
                                            .transitions = 3 };
        assert_int_equal(se_kube_lease_record_encode(&rec, lease), 0);
        const json_t *spec = json_object_get(lease, "spec");
        /* MicroTime keeps exactly six digits, zeros included */
        assert_string_equal(json_string_value(json_object_get(spec, "acquireTime")),
                            "2025-11-30T08:00:00.123456Z");
        assert_string_equal(json_string_value(json_object_get(spec, "renewTime")),
                            "2025-11-30T08:00:01.000000Z");
        /* metadata (resourceVersion for the update) is kept */
        assert_string_equal(json_string_value(json_object_get(json_object_get(lease, "metadata"),
                                                              "resourceVersion")),
                            "7");
        struct se_kube_lease_record back;
        assert_int_equal(se_kube_lease_record_decode(lease, &back), 0);
        assert_string_equal(back.holder, "pod-a");
        assert_int_equal(back.duration_s, 15);
        assert_int_equal(back.transitions, 3);
        assert_true(back.acquire_ns == 1764489600123456000ll);
        assert_true(back.renew_ns == 1764489601000000000ll);
        se_kube_lease_record_release(&back);
        /* a released lease: empty holder */
        struct se_kube_lease_record rel = { NULL, 1, 0, 0, 3 };
        assert_int_equal(se_kube_lease_record_encode(&rel, lease), 0);
        assert_int_equal(se_kube_lease_record_decode(lease, &back), 0);
        assert_string_equal(back.holder, "");
        assert_true(back.acquire_ns == 0);
        se_kube_lease_record_release(&back);
        json_decref(lease);
        json_t *bad = json_pack("{s:i}", "spec", 1);
        assert_int_equal(se_kube_lease_record_decode(bad, &back), -EINVAL);
        json_decref(bad);
}

static void test_lease__validation(void **state)
{
        (void)state;
        struct se_kube_leader *l = NULL;
        struct se_diag d;
        struct se_kube_leader_opts o = { .ns = "n",
                                         .name = "x",
                                         .identity = "me",
                                         .lease_ms = 10000,
                                         .renew_deadline_ms = 10000 };
        /* needs lease > renew deadline > 1.2 x retry */
        assert_int_equal(se_kube_leader_new(NULL, &o, &l, &d), -EINVAL);
        assert_non_null(strstr(d.text, "lease duration > renew deadline"));
        o.lease_ms = 15000;
        o.retry_ms = 9000;
        assert_int_equal(se_kube_leader_new(NULL, &o, &l, &d), -EINVAL);
        o.retry_ms = 0; /* defaults: 15 s / 10 s / 2 s */
        o.lease_ms = 0;
        o.renew_deadline_ms = 0;
        assert_int_equal(se_kube_leader_new(NULL, &o, &l, &d), 0);
        assert_false(se_kube_leader_is_leader(l));
        l = se_kube_leader_free(l);
        o.identity = "";
        assert_int_equal(se_kube_leader_new(NULL, &o, &l, &d), -EINVAL);
}

#define S 1000000000ull

/* client-go's rules, judged on the candidate's own clock. */
static void test_lease__can_acquire(void **state)
{
        (void)state;
        /* no lease holder, or a released one: take it */
        assert_true(se_kube_lease_can_acquire(NULL, "me", 100 * S, 15 * S, 100 * S));
        assert_true(se_kube_lease_can_acquire("", "me", 100 * S, 15 * S, 100 * S));
        /* our own: renew */
        assert_true(se_kube_lease_can_acquire("me", "me", 100 * S, 15 * S, 101 * S));
        /* another holder whose record moved less than a lease ago: wait */
        assert_false(se_kube_lease_can_acquire("other", "me", 100 * S, 15 * S, 114 * S));
        /* ... a full lease duration without change on our clock: take over */
        assert_true(se_kube_lease_can_acquire("other", "me", 100 * S, 15 * S, 115 * S));
        assert_true(se_kube_lease_can_acquire("other", "me", 100 * S, 15 * S, 200 * S));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_lease__round_trip),
                cmocka_unit_test(test_lease__validation),
                cmocka_unit_test(test_lease__can_acquire),
        };
        return cmocka_run_group_tests_name("lease", tests, NULL, NULL);
}

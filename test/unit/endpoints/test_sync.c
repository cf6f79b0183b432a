/* Controller state between syncs: the trigger-time tracker (cases from
 * upstream's trigger_time_tracker_test.go) and which Services a pod event
 * re-syncs (podEndpointsChanged / GetServicesToUpdateOnPodChange). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <svcenv/endpoints_sync.h>
#include <svcenv/manifest.h>
#include <svcenv/timeutil.h>

/* t0 = 2019-01-01T00:00:00Z and one second apart, as upstream's test. */
static const char *const T[] = { "2019-01-01T00:00:00Z", "2019-01-01T00:00:01Z",
                                 "2019-01-01T00:00:02Z", "2019-01-01T00:00:03Z",
                                 "2019-01-01T00:00:04Z", "2019-01-01T00:00:05Z" };

static int64_t ns_of(int i)
{
        int64_t t;
        assert_int_equal(se_time_parse_rfc3339(T[i], &t), 0);
        return t;
}

static struct se_object *decode(const char *yaml)
{
        struct se_store *s = se_store_new();
        struct se_diag d;
        int r = se_manifest_load_buffer(s, "t.yaml", yaml, strlen(yaml), "ns1", NULL, &d);
        if (r < 0)
                fail_msg("%s", d.text);
        const struct se_object **objs;
        long n = 0;
        for (int k = 0; k < SE_KIND_COUNT && n == 0; k++)
                n = se_store_list(s, (enum se_kind)k, NULL, &objs);
        assert_int_equal(n, 1);
        struct se_object *o = se_object_ref(SE_UNCONST(struct se_object, objs[0]));
        free(objs);
        se_store_free(s);
        return o;
}

static const struct se_service *service(int created)
{
        char y[300];
        snprintf(
                y, sizeof(y),
                "apiVersion: v1\nkind: Service\nmetadata: {name: my-service, creationTimestamp: \"%s\"}\n",
                T[created]);
        return se_service_of(decode(y));
}

static const struct se_pod *pod(const char *name, int ready_time)
{
        char y[400];
        snprintf(
                y, sizeof(y),
                "apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec: {containers: [{name: c}]}\n"
                "status: {conditions: [{type: Ready, status: \"True\", lastTransitionTime: \"%s\"}]}\n",
                name, T[ready_time]);
        return se_pod_of(decode(y));
}

static void drop(const void *o)
{
        se_object_unref(SE_UNCONST(struct se_object, o));
}

static int64_t compute(struct se_trigger_tracker *t, const struct se_service *svc,
                       const struct se_pod *const *pods, size_t n)
{
        int64_t got = -1;
        assert_int_equal(se_trigger_tracker_compute(t, svc, pods, n, &got), 0);
        return got;
}

static void test_sync__new_service_no_pods(void **state)
{
        (void)state;
        struct se_trigger_tracker *t = se_trigger_tracker_new();
        const struct se_service *svc = service(2);
        assert_int_equal(compute(t, svc, NULL, 0), ns_of(2));
        drop(svc);
        se_trigger_tracker_free(t);
}

static void test_sync__new_service_existing_pods(void **state)
{
        (void)state;
        struct se_trigger_tracker *t = se_trigger_tracker_new();
        const struct se_service *svc = service(3);
        const struct se_pod *pods[] = { pod("pod1", 0), pod("pod2", 1), pod("pod3", 5) };
        /* pods older and newer than the service: the service's creation wins */
        assert_int_equal(compute(t, svc, pods, 3), ns_of(3));
        for (int i = 0; i < 3; i++)
                drop(pods[i]);
        drop(svc);
        se_trigger_tracker_free(t);
}

static void test_sync__pods_added_updated_noop_deleted(void **state)
{
        (void)state;
        struct se_trigger_tracker *t = se_trigger_tracker_new();
        const struct se_service *svc = service(0);
        assert_int_equal(compute(t, svc, NULL, 0), ns_of(0));
        const struct se_pod *added[] = { pod("pod1", 2), pod("pod2", 1) };
        assert_int_equal(compute(t, svc, added, 2), ns_of(1)); /* the earliest that moved */
        assert_int_equal(compute(t, svc, added, 2), 0); /* nothing moved */
        const struct se_pod *updated[] = { pod("pod1", 5), pod("pod2", 4) };
        assert_int_equal(compute(t, svc, updated, 2), ns_of(4));
        /* pod2 goes away, then comes back newer */
        assert_int_equal(compute(t, svc, updated, 1), 0);
        assert_int_equal(compute(t, svc, updated, 2), ns_of(4));
        for (int i = 0; i < 2; i++) {
                drop(added[i]);
                drop(updated[i]);
        }
        drop(svc);
        se_trigger_tracker_free(t);
}

static void test_sync__service_deleted_then_added(void **state)
{
        (void)state;
        struct se_trigger_tracker *t = se_trigger_tracker_new();
        const struct se_service *svc = service(0), *again = service(3);
        const struct se_pod *pods[] = { pod("pod1", 1), pod("pod2", 2) };
        assert_int_equal(compute(t, svc, pods, 2), ns_of(0));
        se_trigger_tracker_forget(t, "ns1", "my-service");
        assert_int_equal(compute(t, again, pods, 2), ns_of(3));
        /* a service update (same creation time) gives no trigger time */
        assert_int_equal(compute(t, again, pods, 2), 0);
        drop(pods[0]);
        drop(pods[1]);
        drop(svc);
        drop(again);
        se_trigger_tracker_free(t);
}

/* ---- pod events ---- */

static const struct se_pod *pod2(const char *labels, const char *rv, const char *ip, bool ready,
                                 const char *deleted, const char *hostname)
{
        char y[800];
        snprintf(
                y, sizeof(y),
                "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {%s}, resourceVersion: \"%s\"%s%s%s}\n"
                "spec: {containers: [{name: c}]%s%s}\n"
                "status: {podIPs: [{ip: %s}], conditions: [{type: Ready, status: \"%s\"}]}\n",
                labels, rv, deleted ? ", deletionTimestamp: \"" : "", deleted ? deleted : "",
                deleted ? "\"" : "", hostname ? ", hostname: " : "", hostname ? hostname : "", ip,
                ready ? "True" : "False");
        return se_pod_of(decode(y));
}

static void test_sync__pod_change_flags(void **state)
{
        (void)state;
        const struct se_pod *base = pod2("a: web", "1", "1.2.3.4", true, NULL, NULL);
        const struct se_pod *same = pod2("a: web", "2", "1.2.3.4", true, NULL, NULL);
        const struct se_pod *unready = pod2("a: web", "2", "1.2.3.4", false, NULL, NULL);
        const struct se_pod *moved = pod2("a: web", "2", "1.2.3.5", true, NULL, NULL);
        const struct se_pod *relabel = pod2("a: db", "2", "1.2.3.4", true, NULL, NULL);
        const struct se_pod *host = pod2("a: web", "2", "1.2.3.4", true, NULL, "h");
        const struct se_pod *term =
                pod2("a: web", "2", "1.2.3.4", true, "2026-01-01T00:00:00Z", NULL);
        assert_int_equal(se_pod_change(base, same), 0);
        assert_int_equal(se_pod_change(base, unready), SE_POD_ENDPOINTS_CHANGED);
        assert_int_equal(se_pod_change(base, moved), SE_POD_ENDPOINTS_CHANGED);
        assert_int_equal(se_pod_change(base, relabel), SE_POD_MEMBERSHIP_CHANGED);
        assert_int_equal(se_pod_change(base, host), SE_POD_MEMBERSHIP_CHANGED);
        assert_int_equal(se_pod_change(base, term), SE_POD_ENDPOINTS_CHANGED);
        /* upstream compares deletionTimestamp pointers: two terminating copies differ */
        assert_int_equal(se_pod_change(term, term), SE_POD_ENDPOINTS_CHANGED);
        const struct se_pod *all[] = { base, same, unready, moved, relabel, host, term };
        for (size_t i = 0; i < SE_ARRAY_SIZE(all); i++)
                drop(all[i]);
}

static struct se_store *services_store(void)
{
        const char *y =
                "apiVersion: v1\nkind: Service\nmetadata: {name: sx}\nspec: {selector: {a: web}}\n---\n"
                "apiVersion: v1\nkind: Service\nmetadata: {name: sy}\nspec: {selector: {a: db}}\n---\n"
                "apiVersion: v1\nkind: Service\nmetadata: {name: sall}\nspec: {selector: {team: t}}\n---\n"
                "apiVersion: v1\nkind: Service\nmetadata: {name: manual}\n---\n"
                "apiVersion: v1\nkind: Service\nmetadata: {name: other, namespace: ns2}\nspec: {selector: {a: web}}\n";
        struct se_store *s = se_store_new();
        struct se_diag d;
        assert_int_equal(se_manifest_load_buffer(s, "s.yaml", y, strlen(y), "ns1", NULL, &d), 0);
        return s;
}

static char *keys(const struct se_store *s, const struct se_pod *old, const struct se_pod *new_pod)
{
        struct se_strv out = SE_STRV_INIT;
        assert_int_equal(se_endpoints_services_for_pod_event(s, old, new_pod, &out), 0);
        static char buf[256];
        buf[0] = '\0';
        for (size_t i = 0; i < out.n; i++) {
                strcat(buf, i ? " " : "");
                strcat(buf, out.v[i]);
        }
        se_strv_release(&out);
        return buf;
}

static void test_sync__services_for_pod_events(void **state)
{
        (void)state;
        struct se_store *s = services_store();
        const struct se_pod *x = pod2("a: web, team: t", "1", "1.2.3.4", true, NULL, NULL);
        const struct se_pod *x_resync = pod2("a: web, team: t", "1", "1.2.3.4", false, NULL, NULL);
        const struct se_pod *x_unready = pod2("a: web, team: t", "2", "1.2.3.4", false, NULL, NULL);
        const struct se_pod *y = pod2("a: db, team: t", "2", "1.2.3.4", true, NULL, NULL);
        const struct se_pod *y_unready = pod2("a: db, team: t", "2", "1.2.3.4", false, NULL, NULL);
        const struct se_pod *x_nochange = pod2("a: web, team: t", "3", "1.2.3.4", true, NULL, NULL);
        assert_string_equal(keys(s, NULL, x), "ns1/sall ns1/sx");
        assert_string_equal(keys(s, x, NULL), "ns1/sall ns1/sx");
        /* same resourceVersion: a resync, even if the object looks different */
        assert_string_equal(keys(s, x, x_resync), "");
        assert_string_equal(keys(s, x, x_nochange), "");
        assert_string_equal(keys(s, x, x_unready), "ns1/sall ns1/sx");
        /* labels only: the Services it left and joined, not the one it stays in */
        assert_string_equal(keys(s, x, y), "ns1/sx ns1/sy");
        /* labels and readiness: the union */
        assert_string_equal(keys(s, x, y_unready), "ns1/sall ns1/sx ns1/sy");
        const struct se_pod *all[] = { x, x_resync, x_unready, y, y_unready, x_nochange };
        for (size_t i = 0; i < SE_ARRAY_SIZE(all); i++)
                drop(all[i]);
        se_store_free(s);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_sync__new_service_no_pods),
                cmocka_unit_test(test_sync__new_service_existing_pods),
                cmocka_unit_test(test_sync__pods_added_updated_noop_deleted),
                cmocka_unit_test(test_sync__service_deleted_then_added),
                cmocka_unit_test(test_sync__pod_change_flags),
                cmocka_unit_test(test_sync__services_for_pod_events),
        };
        return cmocka_run_group_tests_name("endpoints_sync", tests, NULL, NULL);
}

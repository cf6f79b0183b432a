/* The cold parts of an object behind a pointer (se_meta.more, se_pod.more):
 * NULL exactly when none of their fields is set, each field alone allocates
 * them and survives decode -> encode, and a slim Pod has neither. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <svcenv/decode.h>
#include <svcenv/encode.h>

/* A pod with extra metadata fields (meta) and spec fields (spec), each a
 * JSON fragment ending in a comma or empty; status appended when given. */
static struct se_object *pod(const char *meta, const char *spec, const char *status, unsigned flags)
{
        char text[2048];
        snprintf(text, sizeof(text),
                 "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{%s\"name\":\"p\","
                 "\"namespace\":\"ns\"},\"spec\":{%s\"containers\":[{\"name\":\"c\","
                 "\"image\":\"i\"}]}%s%s}",
                 meta, spec, status ? ",\"status\":" : "", status ? status : "");
        json_error_t jerr;
        json_t *j = json_loads(text, 0, &jerr);
        assert_non_null(j);
        struct se_object *o = NULL;
        struct se_decode_error err;
        assert_int_equal(se_decode_object_flags(j, SE_KIND_POD, NULL, flags, &o, &err), 0);
        json_decref(j);
        return o;
}

/* The encoded value at "section.key" as compact JSON ("-" when absent). */
static char *encoded(const struct se_object *o, const char *section, const char *key)
{
        json_t *j = se_encode_object(o);
        assert_non_null(j);
        const json_t *v = json_object_get(json_object_get(j, section), key);
        char *s = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : strdup("-");
        json_decref(j);
        assert_non_null(s);
        return s;
}

static void expect_encoded(const struct se_object *o, const char *section, const char *key,
                           const char *want)
{
        char *got = encoded(o, section, key);
        assert_string_equal(got, want);
        free(got);
}

static void test_object__no_cold_field_no_more(void **state)
{
        (void)state;
        struct se_object *o = pod("", "\"hostNetwork\":false,", "{\"podIP\":\"10.0.0.1\"}", 0);
        const struct se_pod *p = se_pod_of(o);
        assert_null(o->meta.more);
        assert_null(p->more); /* hostNetwork false is the same as unset */
        assert_null(se_meta_generate_name(&o->meta));
        assert_null(se_meta_creation_timestamp(&o->meta));
        assert_int_equal(se_meta_generation(&o->meta), 0);
        assert_int_equal(se_meta_n_owner_refs(&o->meta), 0);
        assert_null(se_object_source(o));
        assert_int_equal(se_object_source_line(o), 0);
        assert_true(se_pod_service_links(p));
        expect_encoded(o, "metadata", "generation", "-");
        expect_encoded(o, "metadata", "creationTimestamp", "-");
        expect_encoded(o, "spec", "hostNetwork", "-");
        expect_encoded(o, "spec", "enableServiceLinks", "-");
        expect_encoded(o, "spec", "serviceAccountName", "-");
        expect_encoded(o, "status", "hostIP", "-");
        se_object_unref(o);
}

static void test_object__each_cold_meta_field_alone(void **state)
{
        (void)state;
        static const struct {
                const char *json, *key, *want;
        } cases[] = {
                { "\"generateName\":\"p-\",", "generateName", "\"p-\"" },
                { "\"creationTimestamp\":\"2026-11-30T08:00:00Z\",", "creationTimestamp",
                  "\"2026-11-30T08:00:00Z\"" },
                { "\"generation\":7,", "generation", "7" },
                { "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\","
                  "\"name\":\"rs\",\"uid\":\"u\",\"controller\":true}],",
                  "ownerReferences",
                  "[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"rs\","
                  "\"uid\":\"u\",\"controller\":true}]" },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct se_object *o = pod(cases[i].json, "", NULL, 0);
                assert_non_null(o->meta.more);
                assert_null(se_pod_of(o)->more);
                expect_encoded(o, "metadata", cases[i].key, cases[i].want);
                se_object_unref(o);
        }
        struct se_object *o = pod("\"generation\":7,\"ownerReferences\":[{\"apiVersion\":\"v1\","
                                  "\"kind\":\"Service\",\"name\":\"s\",\"uid\":\"u\"}],",
                                  "", NULL, 0);
        assert_int_equal(se_meta_generation(&o->meta), 7);
        assert_int_equal(se_meta_n_owner_refs(&o->meta), 1);
        assert_string_equal(se_meta_owner_ref(&o->meta, 0)->kind, "Service");
        se_object_unref(o);
}

static void test_object__each_pod_more_field_alone(void **state)
{
        (void)state;
        static const struct {
                const char *spec, *status, *section, *key, *want;
        } cases[] = {
                { "\"serviceAccountName\":\"sa\",", NULL, "spec", "serviceAccountName", "\"sa\"" },
                { "\"hostNetwork\":true,", NULL, "spec", "hostNetwork", "true" },
                { "\"enableServiceLinks\":true,", NULL, "spec", "enableServiceLinks", "true" },
                { "\"enableServiceLinks\":false,", NULL, "spec", "enableServiceLinks", "false" },
                { "", "{\"hostIP\":\"10.0.0.9\"}", "status", "hostIP", "\"10.0.0.9\"" },
                { "", "{\"hostIPs\":[{\"ip\":\"10.0.0.9\"}]}", "status", "hostIPs",
                  "[{\"ip\":\"10.0.0.9\"}]" },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct se_object *o = pod("", cases[i].spec, cases[i].status, 0);
                const struct se_pod *p = se_pod_of(o);
                assert_non_null(p->more);
                assert_null(o->meta.more);
                expect_encoded(o, cases[i].section, cases[i].key, cases[i].want);
                assert_int_equal(se_pod_service_links(p),
                                 strstr(cases[i].spec, "\"enableServiceLinks\":false") == NULL);
                se_object_unref(o);
        }
        /* hostIPs alone also gives the hostIP */
        struct se_object *o = pod("", "", "{\"hostIPs\":[{\"ip\":\"fd00::1\"}]}", 0);
        assert_string_equal(se_pod_of(o)->more->host_ip, "fd00::1");
        se_object_unref(o);
}

static void test_object__slim_pod_has_neither(void **state)
{
        (void)state;
        static const char meta[] =
                "\"generateName\":\"p-\",\"creationTimestamp\":\"2026-11-30T08:00:00Z\","
                "\"generation\":1,\"ownerReferences\":[{\"apiVersion\":\"apps/v1\","
                "\"kind\":\"ReplicaSet\",\"name\":\"rs\",\"uid\":\"u\"}],";
        static const char spec[] = "\"serviceAccountName\":\"sa\",\"hostNetwork\":true,"
                                   "\"enableServiceLinks\":false,";
        static const char status[] = "{\"hostIP\":\"10.0.0.9\",\"podIP\":\"10.1.0.1\"}";
        struct se_object *full = pod(meta, spec, status, 0);
        struct se_object *slim = pod(meta, spec, status, SE_DECODE_SLIM_POD);
        assert_non_null(full->meta.more);
        assert_non_null(se_pod_of(full)->more);
        assert_null(slim->meta.more);
        assert_null(se_pod_of(slim)->more);
        assert_string_equal(se_pod_of(slim)->pod_ip, "10.1.0.1");
        assert_true(se_object_memory(slim) < se_object_memory(full));
        /* a slim decode still checks the generation it does not keep */
        json_error_t jerr;
        json_t *j = json_loads("{\"metadata\":{\"name\":\"p\",\"generation\":\"x\"},"
                               "\"spec\":{\"containers\":[{\"name\":\"c\"}]}}",
                               0, &jerr);
        assert_non_null(j);
        struct se_object *o = NULL;
        struct se_decode_error err;
        assert_int_equal(se_decode_object_flags(j, SE_KIND_POD, NULL, SE_DECODE_SLIM_POD, &o, &err),
                         -EINVAL);
        json_decref(j);
        se_object_unref(full);
        se_object_unref(slim);
}

static void test_object__more_allocated_once(void **state)
{
        (void)state;
        struct se_object *o = pod("", "", NULL, 0);
        struct se_pod *p = (struct se_pod *)o;
        struct se_meta_more *m = se_meta_more(&o->meta, &o->arena);
        assert_non_null(m);
        assert_ptr_equal(se_meta_more(&o->meta, &o->arena), m);
        m->source_line = 3;
        assert_int_equal(se_object_source_line(o), 3);
        struct se_pod_more *pm = se_pod_more(p);
        assert_non_null(pm);
        assert_ptr_equal(se_pod_more(p), pm);
        pm->enable_service_links = SE_FALSE;
        assert_false(se_pod_service_links(p));
        se_object_unref(o);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_object__no_cold_field_no_more),
                cmocka_unit_test(test_object__each_cold_meta_field_alone),
                cmocka_unit_test(test_object__each_pod_more_field_alone),
                cmocka_unit_test(test_object__slim_pod_has_neither),
                cmocka_unit_test(test_object__more_allocated_once),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Encoding back to Kubernetes JSON and YAML: what is decoded encodes to the
 * same JSON, and YAML output reads back to the same objects. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <svcenv/decode.h>
#include <svcenv/encode.h>
#include <svcenv/manifest.h>
#include <svcenv/strbuf.h>

/* Exactly the API server's JSON for these objects (field order included). */
static const char endpoints_json[] =
        "{\"kind\":\"Endpoints\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"web\","
        "\"namespace\":\"shop\",\"uid\":\"u1\",\"resourceVersion\":\"7\","
        "\"creationTimestamp\":\"2026-11-30T08:00:00Z\",\"labels\":{\"app\":\"web\","
        "\"service.kubernetes.io/headless\":\"\"},\"annotations\":{"
        "\"endpoints.kubernetes.io/last-change-trigger-time\":\"2026-11-30T08:00:00Z\"}},"
        "\"subsets\":[{\"addresses\":[{\"ip\":\"10.0.0.5\",\"hostname\":\"web-1\","
        "\"nodeName\":\"node-a\",\"targetRef\":{\"kind\":\"Pod\",\"namespace\":\"shop\","
        "\"name\":\"web-1\",\"uid\":\"p1\"}}],\"notReadyAddresses\":[{\"ip\":\"10.0.0.6\","
        "\"nodeName\":\"node-b\",\"targetRef\":{\"kind\":\"Pod\",\"namespace\":\"shop\","
        "\"name\":\"web-2\",\"uid\":\"p2\"}}],\"ports\":[{\"name\":\"http\",\"port\":8080,"
        "\"protocol\":\"TCP\",\"appProtocol\":\"http\"}]}]}";

static const char slice_json[] =
        "{\"kind\":\"EndpointSlice\",\"apiVersion\":\"discovery.k8s.io/v1\",\"metadata\":{"
        "\"name\":\"web-abc12\",\"generateName\":\"web-\",\"namespace\":\"shop\","
        "\"generation\":3,\"labels\":{\"endpointslice.kubernetes.io/managed-by\":"
        "\"endpointslice-controller.k8s.io\",\"kubernetes.io/service-name\":\"web\"},"
        "\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"name\":\"web\","
        "\"uid\":\"s1\",\"controller\":true,\"blockOwnerDeletion\":true}]},"
        "\"addressType\":\"IPv4\",\"endpoints\":[{\"addresses\":[\"10.0.0.5\"],"
        "\"conditions\":{\"ready\":true,\"serving\":true,\"terminating\":false},"
        "\"targetRef\":{\"kind\":\"Pod\",\"namespace\":\"shop\",\"name\":\"web-1\","
        "\"uid\":\"p1\"},\"nodeName\":\"node-a\",\"zone\":\"z1\",\"hints\":{\"forZones\":"
        "[{\"name\":\"z1\"}]}}],\"ports\":[{\"name\":\"\",\"protocol\":\"TCP\",\"port\":8080}]}";

static void round_trip(const char *text)
{
        json_error_t jerr;
        json_t *in = json_loads(text, 0, &jerr);
        assert_non_null(in);
        struct se_object *obj;
        struct se_decode_error err;
        assert_int_equal(se_decode_object(in, NULL, &obj, &err), 0);
        json_t *out = se_encode_object(obj);
        assert_non_null(out);
        char *got = json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER);
        assert_string_equal(got, text);
        free(got);
        json_decref(out);
        json_decref(in);
        se_object_unref(obj);
}

static void test_encode__endpoints_exactly_as_the_api(void **state)
{
        (void)state;
        round_trip(endpoints_json);
}

static void test_encode__endpoint_slice_exactly_as_the_api(void **state)
{
        (void)state;
        round_trip(slice_json);
}

static void test_encode__yaml_reads_back_the_same(void **state)
{
        (void)state;
        json_t *in = json_loads(endpoints_json, 0, NULL);
        /* strings that YAML would otherwise read as other types */
        json_t *meta = json_object_get(in, "metadata");
        json_t *ann = json_object_get(meta, "annotations");
        json_object_set_new(ann, "a", json_string("yes"));
        json_object_set_new(ann, "b", json_string("0777"));
        json_object_set_new(ann, "c", json_string("line\nbreak \"quoted\""));
        json_object_set_new(ann, "d", json_string(""));
        json_object_set_new(ann, "e", json_string("1.5"));
        json_object_set_new(ann, "f", json_string("- dash"));
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        assert_int_equal(se_encode_yaml(in, &sb), 0);
        struct se_store *s = se_store_new();
        struct se_diag d;
        assert_int_equal(se_manifest_load_buffer(s, "y.yaml", sb.buf, sb.len, NULL, NULL, &d), 0);
        const struct se_object *obj = se_store_get(s, SE_KIND_ENDPOINTS, "shop", "web");
        assert_non_null(obj);
        json_t *out = se_encode_object(obj);
        assert_true(json_equal(in, out));
        json_decref(out);
        json_decref(in);
        se_strbuf_release(&sb);
        se_store_free(s);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_encode__endpoints_exactly_as_the_api),
                cmocka_unit_test(test_encode__endpoint_slice_exactly_as_the_api),
                cmocka_unit_test(test_encode__yaml_reads_back_the_same),
        };
        return cmocka_run_group_tests_name("encode", tests, NULL, NULL);
}

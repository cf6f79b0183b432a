/* Services in the DNS form (SE_DECODE_DNS_SERVICES): what the cluster zone
 * reads is as in a full decode, the rest is not kept, and the spec is still
 * checked. */
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

/* A Service as the API server returns one made by `kubectl apply`. */
static json_t *applied_service(void)
{
        return json_pack(
                "{s:s,s:s,s:{s:s,s:s,s:s,s:s,s:s,s:{s:s,s:s},s:{s:s}},"
                "s:{s:[{s:s,s:s,s:i,s:i},{s:s,s:s,s:i,s:i}],s:{s:s},s:s,s:[s],s:s,s:s,s:[s],s:s},"
                "s:{s:{}}}",
                "apiVersion", "v1", "kind", "Service", "metadata", "name", "web", "namespace",
                "shop", "uid", "5d2c7e1a-0f3b-4e8d-a6c9-1b2d3e4f5a6b", "resourceVersion", "123456",
                "creationTimestamp", "2026-12-03T10:00:00Z", "labels", "app", "web", "tier",
                "frontend", "annotations", "kubectl.kubernetes.io/last-applied-configuration",
                "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"annotations\":{},"
                "\"labels\":{\"app\":\"web\",\"tier\":\"frontend\"},\"name\":\"web\",\"namespace\":"
                "\"shop\"},\"spec\":{\"ports\":[{\"name\":\"http\",\"port\":80,\"targetPort\":8080},"
                "{\"name\":\"dns\",\"port\":53,\"protocol\":\"UDP\",\"targetPort\":5353}],"
                "\"selector\":{\"app\":\"web\"}}}\n",
                "spec", "ports", "name", "http", "protocol", "TCP", "port", 80, "targetPort", 8080,
                "name", "dns", "protocol", "UDP", "port", 53, "targetPort", 5353, "selector", "app",
                "web", "clusterIP", "10.96.0.10", "clusterIPs", "10.96.0.10", "type", "ClusterIP",
                "ipFamilyPolicy", "SingleStack", "ipFamilies", "IPv4", "sessionAffinity", "None",
                "status", "loadBalancer");
}

static struct se_service *decode(const json_t *j, unsigned flags)
{
        struct se_object *o = NULL;
        struct se_decode_error e;
        int r = se_decode_object_flags(j, SE_KIND_SERVICE, NULL, flags, &o, &e);
        if (r != 0)
                fail_msg("decode: %d %s: %s", r, e.path, e.message);
        return (struct se_service *)o;
}

static void test_dns_services__kept_and_dropped(void **state)
{
        (void)state;
        json_t *j = applied_service();
        struct se_service *full = decode(j, 0), *dns = decode(j, SE_DECODE_DNS_SERVICES);
        /* what the zone reads */
        assert_string_equal(dns->obj.meta.name, "web");
        assert_string_equal(dns->obj.meta.namespace, "shop");
        assert_string_equal(dns->obj.meta.resource_version, "123456");
        assert_int_equal(dns->type, SE_SVC_CLUSTER_IP);
        assert_string_equal(dns->cluster_ip, "10.96.0.10");
        assert_int_equal(dns->cluster_ips.n, 1);
        assert_string_equal(dns->cluster_ips.v[0], "10.96.0.10");
        assert_int_equal(dns->n_ports, 2);
        for (uint32_t i = 0; i < 2; i++) {
                assert_string_equal(dns->ports[i].name, full->ports[i].name);
                assert_int_equal(dns->ports[i].protocol, full->ports[i].protocol);
                assert_int_equal(dns->ports[i].port, full->ports[i].port);
        }
        /* what it does not */
        assert_non_null(full->obj.meta.uid);
        assert_null(dns->obj.meta.uid);
        assert_int_equal(full->obj.meta.labels.n, 2);
        assert_int_equal(dns->obj.meta.labels.n, 0);
        assert_int_equal(full->obj.meta.annotations.n, 1);
        assert_int_equal(dns->obj.meta.annotations.n, 0);
        assert_non_null(se_meta_creation_timestamp(&full->obj.meta));
        assert_null(dns->obj.meta.more);
        assert_int_equal(full->selector.n, 1);
        assert_int_equal(dns->selector.n, 0);
        size_t fm = se_object_memory(&full->obj), dm = se_object_memory(&dns->obj);
        print_message("Service: full %zu bytes, DNS form %zu bytes\n", fm, dm);
        assert_true(dm * 2 < fm);
        se_object_unref(&full->obj);
        se_object_unref(&dns->obj);
        json_decref(j);
}

/* the spec the zone reads is checked as in a full decode; the selector,
 * which it does not read, is not */
static void test_dns_services__checks(void **state)
{
        (void)state;
        json_t *j = applied_service();
        json_t *spec = json_object_get(j, "spec");
        json_object_set_new(spec, "selector", json_string("not a map"));
        struct se_service *dns = decode(j, SE_DECODE_DNS_SERVICES);
        se_object_unref(&dns->obj);
        json_object_set_new(spec, "clusterIP", json_string("10.96.0.300"));
        struct se_object *o = NULL;
        struct se_decode_error e;
        assert_int_equal(
                se_decode_object_flags(j, SE_KIND_SERVICE, NULL, SE_DECODE_DNS_SERVICES, &o, &e),
                -EINVAL);
        assert_null(o);
        assert_string_equal(e.path, "spec.clusterIP");
        json_decref(j);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_dns_services__kept_and_dropped),
                cmocka_unit_test(test_dns_services__checks),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

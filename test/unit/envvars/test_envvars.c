/* Service variables and the container environment: upstream's
 * TestFromServices and every TestMakeEnvironmentVariables case, then the
 * rules svcenv adds (order, collisions) and edge cases from the kubelet code. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <svcenv/alloc.h>
#include <svcenv/envvars.h>
#include <svcenv/manifest.h>

#include "cpu_budget.h"
#include "store_yaml.h"

/* ---- helpers ---- */

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "NAME=VALUE" lines of l, in list order or sorted. New string. */
static char *render(const struct se_env_list *l, bool sorted)
{
        char **lines = calloc(l->n + 1, sizeof(*lines));
        size_t total = 1;
        for (size_t i = 0; i < l->n; i++) {
                assert_true(asprintf(&lines[i], "%s=%s\n", l->items[i].name, l->items[i].value) >
                            0);
                total += strlen(lines[i]);
        }
        if (sorted)
                qsort(lines, l->n, sizeof(*lines), cmp_str);
        char *out = calloc(1, total);
        for (size_t i = 0; i < l->n; i++) {
                strcat(out, lines[i]);
                free(lines[i]);
        }
        free(lines);
        return out;
}

static char *join(const char *const *want, size_t n, bool sorted)
{
        const char **v = calloc(n + 1, sizeof(*v));
        size_t total = 1;
        for (size_t i = 0; i < n; i++) {
                v[i] = want[i];
                total += strlen(want[i]) + 1;
        }
        if (sorted)
                qsort(v, n, sizeof(*v), cmp_str);
        char *out = calloc(1, total);
        for (size_t i = 0; i < n; i++) {
                strcat(out, v[i]);
                strcat(out, "\n");
        }
        free(v);
        return out;
}

static size_t count(const char *const *want)
{
        size_t n = 0;
        while (want[n])
                n++;
        return n;
}

static void expect_list(const struct se_env_list *l, const char *const *want, bool sorted,
                        const char *what)
{
        char *got = render(l, sorted), *exp = join(want, count(want), sorted);
        if (strcmp(got, exp) != 0)
                fail_msg("%s:\n--- got\n%s--- want\n%s", what, got, exp);
        free(got);
        free(exp);
}

static const struct se_pod *get_pod(const struct se_store *s, const char *ns, const char *name)
{
        const struct se_pod *p = se_pod_of(se_store_get(s, SE_KIND_POD, ns, name));
        assert_non_null(p);
        return p;
}

/* ---- TestFromServices (envvars_test.go) ---- */

static struct se_service *svc(const char *ns, const char *name, const char *ip, size_t n_ports,
                              const struct se_service_port *ports)
{
        struct se_service *s = (struct se_service *)se_object_new(SE_KIND_SERVICE);
        assert_non_null(s);
        s->obj.meta.namespace = se_arena_strdup(&s->obj.arena, ns);
        s->obj.meta.name = se_arena_strdup(&s->obj.arena, name);
        s->cluster_ip = ip ? se_arena_strdup(&s->obj.arena, ip) : NULL;
        s->ports = se_arena_array(&s->obj.arena, n_ports ? n_ports : 1, sizeof(*ports));
        memcpy(s->ports, ports, n_ports * sizeof(*ports));
        s->n_ports = (uint32_t)n_ports;
        return s;
}

#define PORT(n, p, proto)                       \
 {                                              \
  .name = (n), .port = (p), .protocol = (proto) \
 }

static void test_envvars__from_services_upstream(void **state)
{
        (void)state;
        const struct se_service_port p1[] = { PORT(NULL, 8080, SE_PROTO_TCP) };
        const struct se_service_port p2[] = { PORT("u-d-p", 8081, SE_PROTO_UDP),
                                              PORT("t-c-p", 8081, SE_PROTO_TCP) };
        const struct se_service_port p3[] = { PORT(NULL, 8082, SE_PROTO_TCP),
                                              PORT("8083", 8083, SE_PROTO_TCP) };
        const struct se_service_port p4[] = { PORT(NULL, 8082, SE_PROTO_TCP) };
        const struct se_service_port p6[] = { PORT("u-d-p", 8084, SE_PROTO_UDP),
                                              PORT("t-c-p", 8084, SE_PROTO_TCP) };
        const struct se_service_port p7[] = { PORT(NULL, 777, SE_PROTO_SCTP) };
        struct se_service *sl[] = {
                svc("", "foo-bar", "1.2.3.4", 1, p1),
                svc("", "abc-123", "5.6.7.8", 2, p2),
                svc("", "q-u-u-x", "9.8.7.6", 2, p3),
                svc("", "svrc-clusterip-none", "None", 1, p4),
                svc("", "svrc-clusterip-empty", "", 1, p4),
                svc("", "super-ipv6", "2001:DB8::", 2, p6),
                svc("", "sctp-1", "1.2.3.4", 1, p7),
        };
        struct se_env_list l = SE_ENV_LIST_INIT;
        for (size_t i = 0; i < SE_ARRAY_SIZE(sl); i++)
                assert_int_equal(se_envvars_from_service(sl[i], &l), 0);
        static const char *const want[] = {
                "FOO_BAR_SERVICE_HOST=1.2.3.4",
                "FOO_BAR_SERVICE_PORT=8080",
                "FOO_BAR_PORT=tcp://1.2.3.4:8080",
                "FOO_BAR_PORT_8080_TCP=tcp://1.2.3.4:8080",
                "FOO_BAR_PORT_8080_TCP_PROTO=tcp",
                "FOO_BAR_PORT_8080_TCP_PORT=8080",
                "FOO_BAR_PORT_8080_TCP_ADDR=1.2.3.4",
                "ABC_123_SERVICE_HOST=5.6.7.8",
                "ABC_123_SERVICE_PORT=8081",
                "ABC_123_SERVICE_PORT_U_D_P=8081",
                "ABC_123_SERVICE_PORT_T_C_P=8081",
                "ABC_123_PORT=udp://5.6.7.8:8081",
                "ABC_123_PORT_8081_UDP=udp://5.6.7.8:8081",
                "ABC_123_PORT_8081_UDP_PROTO=udp",
                "ABC_123_PORT_8081_UDP_PORT=8081",
                "ABC_123_PORT_8081_UDP_ADDR=5.6.7.8",
                "ABC_123_PORT_8081_TCP=tcp://5.6.7.8:8081",
                "ABC_123_PORT_8081_TCP_PROTO=tcp",
                "ABC_123_PORT_8081_TCP_PORT=8081",
                "ABC_123_PORT_8081_TCP_ADDR=5.6.7.8",
                "Q_U_U_X_SERVICE_HOST=9.8.7.6",
                "Q_U_U_X_SERVICE_PORT=8082",
                "Q_U_U_X_SERVICE_PORT_8083=8083",
                "Q_U_U_X_PORT=tcp://9.8.7.6:8082",
                "Q_U_U_X_PORT_8082_TCP=tcp://9.8.7.6:8082",
                "Q_U_U_X_PORT_8082_TCP_PROTO=tcp",
                "Q_U_U_X_PORT_8082_TCP_PORT=8082",
                "Q_U_U_X_PORT_8082_TCP_ADDR=9.8.7.6",
                "Q_U_U_X_PORT_8083_TCP=tcp://9.8.7.6:8083",
                "Q_U_U_X_PORT_8083_TCP_PROTO=tcp",
                "Q_U_U_X_PORT_8083_TCP_PORT=8083",
                "Q_U_U_X_PORT_8083_TCP_ADDR=9.8.7.6",
                "SUPER_IPV6_SERVICE_HOST=2001:DB8::",
                "SUPER_IPV6_SERVICE_PORT=8084",
                "SUPER_IPV6_SERVICE_PORT_U_D_P=8084",
                "SUPER_IPV6_SERVICE_PORT_T_C_P=8084",
                "SUPER_IPV6_PORT=udp://[2001:DB8::]:8084",
                "SUPER_IPV6_PORT_8084_UDP=udp://[2001:DB8::]:8084",
                "SUPER_IPV6_PORT_8084_UDP_PROTO=udp",
                "SUPER_IPV6_PORT_8084_UDP_PORT=8084",
                "SUPER_IPV6_PORT_8084_UDP_ADDR=2001:DB8::",
                "SUPER_IPV6_PORT_8084_TCP=tcp://[2001:DB8::]:8084",
                "SUPER_IPV6_PORT_8084_TCP_PROTO=tcp",
                "SUPER_IPV6_PORT_8084_TCP_PORT=8084",
                "SUPER_IPV6_PORT_8084_TCP_ADDR=2001:DB8::",
                "SCTP_1_SERVICE_HOST=1.2.3.4",
                "SCTP_1_SERVICE_PORT=777",
                "SCTP_1_PORT=sctp://1.2.3.4:777",
                "SCTP_1_PORT_777_SCTP=sctp://1.2.3.4:777",
                "SCTP_1_PORT_777_SCTP_PROTO=sctp",
                "SCTP_1_PORT_777_SCTP_PORT=777",
                "SCTP_1_PORT_777_SCTP_ADDR=1.2.3.4",
                NULL,
        };
        expect_list(&l, want, false, "FromServices");
        se_env_list_release(&l);
        for (size_t i = 0; i < SE_ARRAY_SIZE(sl); i++)
                se_object_unref(&sl[i]->obj);
}

/* ---- TestMakeEnvironmentVariables (kubelet_pods_test.go) ---- */

static const char services_yaml[] =
        "apiVersion: v1\nkind: Service\nmetadata: {name: kubernetes, namespace: default}\n"
        "spec: {clusterIP: 1.2.3.1, ports: [{protocol: TCP, port: 8081}]}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: test, namespace: test1}\n"
        "spec: {clusterIP: 1.2.3.3, ports: [{protocol: TCP, port: 8083}]}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: kubernetes, namespace: test2}\n"
        "spec: {clusterIP: 1.2.3.4, ports: [{protocol: TCP, port: 8084}]}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: test, namespace: test2}\n"
        "spec: {clusterIP: 1.2.3.5, ports: [{protocol: TCP, port: 8085}]}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: not-special, namespace: default}\n"
        "spec: {clusterIP: 1.2.3.8, ports: [{protocol: TCP, port: 8088}]}\n---\n";

#define K8S_1                                                                                 \
 "KUBERNETES_SERVICE_HOST=1.2.3.1", "KUBERNETES_SERVICE_PORT=8081",                           \
         "KUBERNETES_PORT=tcp://1.2.3.1:8081", "KUBERNETES_PORT_8081_TCP=tcp://1.2.3.1:8081", \
         "KUBERNETES_PORT_8081_TCP_PROTO=tcp", "KUBERNETES_PORT_8081_TCP_PORT=8081",          \
         "KUBERNETES_PORT_8081_TCP_ADDR=1.2.3.1"
#define TEST_3                                                                          \
 "TEST_SERVICE_HOST=1.2.3.3", "TEST_SERVICE_PORT=8083", "TEST_PORT=tcp://1.2.3.3:8083", \
         "TEST_PORT_8083_TCP=tcp://1.2.3.3:8083", "TEST_PORT_8083_TCP_PROTO=tcp",       \
         "TEST_PORT_8083_TCP_PORT=8083", "TEST_PORT_8083_TCP_ADDR=1.2.3.3"

#define CM_DATA                                                                        \
 "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: test-config-map, namespace: %s}\n" \
 "data: {REPLACE_ME: FROM_CONFIG_MAP, DUPE_TEST: CONFIG_MAP}\n---\n"
#define SECRET_DATA                                                             \
 "apiVersion: v1\nkind: Secret\nmetadata: {name: test-secret, namespace: %s}\n" \
 "stringData: {REPLACE_ME: FROM_SECRET, DUPE_TEST: SECRET}\n---\n"

#define ENV_EXPANSION                                                                          \
 "    env:\n"                                                                                  \
 "    - {name: TEST_LITERAL, value: test-test-test}\n"                                         \
 "    - {name: POD_NAME, valueFrom: {fieldRef: {apiVersion: v1, fieldPath: metadata.name}}}\n" \
 "    - {name: OUT_OF_ORDER_TEST, value: $(OUT_OF_ORDER_TARGET)}\n"                            \
 "    - {name: OUT_OF_ORDER_TARGET, value: FOO}\n"                                             \
 "    - {name: EMPTY_VAR}\n"                                                                   \
 "    - {name: EMPTY_TEST, value: foo-$(EMPTY_VAR)}\n"                                         \
 "    - {name: POD_NAME_TEST2, value: test2-$(POD_NAME)}\n"                                    \
 "    - {name: POD_NAME_TEST3, value: $(POD_NAME_TEST2)-3}\n"                                  \
 "    - {name: LITERAL_TEST, value: literal-$(TEST_LITERAL)}\n"
#define ENV_EXPANSION_WANT                                                                       \
 "TEST_LITERAL=test-test-test", "POD_NAME=dapi-test-pod-name",                                   \
         "POD_NAME_TEST2=test2-dapi-test-pod-name", "POD_NAME_TEST3=test2-dapi-test-pod-name-3", \
         "LITERAL_TEST=literal-test-test-test", "OUT_OF_ORDER_TEST=$(OUT_OF_ORDER_TARGET)",      \
         "OUT_OF_ORDER_TARGET=FOO", "TEST_UNDEFINED=$(UNDEFINED_VAR)",                           \
         "EMPTY_VAR=", "EMPTY_TEST=foo-"

#define FROM_CM(prefix)                                                \
 "    envFrom:\n    - configMapRef: {name: test-config-map}\n"         \
 "    - {prefix: " prefix ", configMapRef: {name: test-config-map}}\n" \
 "    env:\n    - {name: TEST_LITERAL, value: test-test-test}\n"       \
 "    - {name: EXPANSION_TEST, value: $(REPLACE_ME)}\n"                \
 "    - {name: DUPE_TEST, value: ENV_VAR}\n"
#define FROM_SECRET                                              \
 "    envFrom:\n    - secretRef: {name: test-secret}\n"          \
 "    - {prefix: p_, secretRef: {name: test-secret}}\n"          \
 "    env:\n    - {name: TEST_LITERAL, value: test-test-test}\n" \
 "    - {name: EXPANSION_TEST, value: $(REPLACE_ME)}\n"          \
 "    - {name: DUPE_TEST, value: ENV_VAR}\n"

#define DOWNWARD(n, p) \
 "    - {name: " n ", valueFrom: {fieldRef: {apiVersion: v1, fieldPath: " p "}}}\n"

struct mk_case {
        const char *name;
        const char *ns;
        bool links;
        bool no_services; /* upstream's nil lister */
        const char *container;
        const char *extra; /* printf format with %s = namespace, or NULL */
        const char *pod_ips; /* YAML list, or NULL */
        bool error;
        const char *want[40];
};

static const struct mk_case mk_cases[] = {
        /* "if services aren't synced" (2 cases) and "nil_enableServiceLinks" test
         * kubelet state svcenv does not have: there is no informer to wait for,
         * and the decoder gives an absent enableServiceLinks the API default (true). */
        { "api server = Y, kubelet = Y",
          "test1",
          false,
          false,
          "    env:\n    - {name: FOO, value: BAR}\n    - {name: TEST_SERVICE_HOST, value: 1.2.3.3}\n"
          "    - {name: TEST_SERVICE_PORT, value: \"8083\"}\n    - {name: TEST_PORT, value: \"tcp://1.2.3.3:8083\"}\n"
          "    - {name: TEST_PORT_8083_TCP, value: \"tcp://1.2.3.3:8083\"}\n"
          "    - {name: TEST_PORT_8083_TCP_PROTO, value: tcp}\n    - {name: TEST_PORT_8083_TCP_PORT, value: \"8083\"}\n"
          "    - {name: TEST_PORT_8083_TCP_ADDR, value: 1.2.3.3}\n",
          NULL,
          NULL,
          false,
          { "FOO=BAR", TEST_3, K8S_1 } },
        { "api server = Y, kubelet = N",
          "test1",
          false,
          true,
          "    env:\n    - {name: FOO, value: BAR}\n    - {name: TEST_SERVICE_HOST, value: 1.2.3.3}\n"
          "    - {name: TEST_SERVICE_PORT, value: \"8083\"}\n    - {name: TEST_PORT, value: \"tcp://1.2.3.3:8083\"}\n"
          "    - {name: TEST_PORT_8083_TCP, value: \"tcp://1.2.3.3:8083\"}\n"
          "    - {name: TEST_PORT_8083_TCP_PROTO, value: tcp}\n    - {name: TEST_PORT_8083_TCP_PORT, value: \"8083\"}\n"
          "    - {name: TEST_PORT_8083_TCP_ADDR, value: 1.2.3.3}\n",
          NULL,
          NULL,
          false,
          { "FOO=BAR", TEST_3 } },
        { "api server = N; kubelet = Y",
          "test1",
          false,
          false,
          "    env: [{name: FOO, value: BAZ}]\n",
          NULL,
          NULL,
          false,
          { "FOO=BAZ", K8S_1 } },
        { "api server = N; kubelet = Y; service env vars",
          "test1",
          true,
          false,
          "    env: [{name: FOO, value: BAZ}]\n",
          NULL,
          NULL,
          false,
          { "FOO=BAZ", TEST_3, K8S_1 } },
        { "master service in pod ns",
          "test2",
          false,
          false,
          "    env: [{name: FOO, value: ZAP}]\n",
          NULL,
          NULL,
          false,
          { "FOO=ZAP", K8S_1 } },
        { "master service in pod ns, service env vars",
          "test2",
          true,
          false,
          "    env: [{name: FOO, value: ZAP}]\n",
          NULL,
          NULL,
          false,
          { "FOO=ZAP", "TEST_SERVICE_HOST=1.2.3.5", "TEST_SERVICE_PORT=8085",
            "TEST_PORT=tcp://1.2.3.5:8085", "TEST_PORT_8085_TCP=tcp://1.2.3.5:8085",
            "TEST_PORT_8085_TCP_PROTO=tcp", "TEST_PORT_8085_TCP_PORT=8085",
            "TEST_PORT_8085_TCP_ADDR=1.2.3.5", "KUBERNETES_SERVICE_HOST=1.2.3.4",
            "KUBERNETES_SERVICE_PORT=8084", "KUBERNETES_PORT=tcp://1.2.3.4:8084",
            "KUBERNETES_PORT_8084_TCP=tcp://1.2.3.4:8084", "KUBERNETES_PORT_8084_TCP_PROTO=tcp",
            "KUBERNETES_PORT_8084_TCP_PORT=8084", "KUBERNETES_PORT_8084_TCP_ADDR=1.2.3.4" } },
        { "pod in master service ns", "default", false, false, "", NULL, NULL, false, { K8S_1 } },
        { "pod in master service ns, service env vars",
          "default",
          true,
          false,
          "",
          NULL,
          NULL,
          false,
          { "NOT_SPECIAL_SERVICE_HOST=1.2.3.8", "NOT_SPECIAL_SERVICE_PORT=8088",
            "NOT_SPECIAL_PORT=tcp://1.2.3.8:8088", "NOT_SPECIAL_PORT_8088_TCP=tcp://1.2.3.8:8088",
            "NOT_SPECIAL_PORT_8088_TCP_PROTO=tcp", "NOT_SPECIAL_PORT_8088_TCP_PORT=8088",
            "NOT_SPECIAL_PORT_8088_TCP_ADDR=1.2.3.8", K8S_1 } },
        { "downward api pod",
          "downward-api",
          false,
          true,
          "    env:\n" DOWNWARD("POD_NAME", "metadata.name") DOWNWARD(
                  "POD_NAMESPACE", "metadata.namespace") DOWNWARD("POD_NODE_NAME", "spec.nodeName")
                  DOWNWARD("POD_SERVICE_ACCOUNT_NAME", "spec.serviceAccountName")
                          DOWNWARD("POD_IP", "status.podIP") DOWNWARD("POD_IPS", "status.podIPs")
                                  DOWNWARD("HOST_IP", "status.hostIP")
                                          DOWNWARD("HOST_IPS", "status.hostIPs"),
          NULL,
          "[{ip: 1.2.3.4}, {ip: \"fd00::6\"}]",
          false,
          { "POD_NAME=dapi-test-pod-name", "POD_NAMESPACE=downward-api", "POD_NODE_NAME=node-name",
            "POD_SERVICE_ACCOUNT_NAME=special", "POD_IP=1.2.3.4", "POD_IPS=1.2.3.4,fd00::6",
            "HOST_IP=127.0.0.1", "HOST_IPS=127.0.0.1,::1" } },
        { "downward api pod ips reverse order",
          "downward-api",
          false,
          true,
          "    env:\n" DOWNWARD("POD_IP", "status.podIP") DOWNWARD("POD_IPS", "status.podIPs")
                  DOWNWARD("HOST_IP", "status.hostIP") DOWNWARD("HOST_IPS", "status.hostIPs"),
          NULL,
          "[{ip: \"fd00::6\"}, {ip: 1.2.3.4}]",
          false,
          { "POD_IP=1.2.3.4", "POD_IPS=1.2.3.4,fd00::6", "HOST_IP=127.0.0.1",
            "HOST_IPS=127.0.0.1,::1" } },
        /* "downward api pod ips multiple ips": see test_envvars__pod_ips_filtered */
        { "env expansion",
          "test1",
          false,
          false,
          ENV_EXPANSION "    - {name: TEST_UNDEFINED, value: $(UNDEFINED_VAR)}\n",
          NULL,
          NULL,
          false,
          { ENV_EXPANSION_WANT, K8S_1 } },
        { "env expansion, service env vars",
          "test1",
          true,
          false,
          ENV_EXPANSION
          "    - {name: SERVICE_VAR_TEST, value: \"$(TEST_SERVICE_HOST):$(TEST_SERVICE_PORT)\"}\n"
          "    - {name: TEST_UNDEFINED, value: $(UNDEFINED_VAR)}\n",
          NULL,
          NULL,
          false,
          { ENV_EXPANSION_WANT, "SERVICE_VAR_TEST=1.2.3.3:8083", TEST_3, K8S_1 } },
        { "configmapkeyref_missing_optional",
          "test",
          false,
          false,
          "    env: [{name: POD_NAME, valueFrom: {configMapKeyRef: {name: missing-config-map, key: key, optional: true}}}]\n",
          NULL,
          NULL,
          false,
          { K8S_1 } },
        { "configmapkeyref_missing_key_optional",
          "test",
          false,
          true,
          "    env: [{name: POD_NAME, valueFrom: {configMapKeyRef: {name: test-config-map, key: key, optional: true}}}]\n",
          "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: test-config-map, namespace: %s}\ndata: {a: b}\n---\n",
          NULL,
          false,
          { NULL } },
        { "secretkeyref_missing_optional",
          "test",
          false,
          false,
          "    env: [{name: POD_NAME, valueFrom: {secretKeyRef: {name: missing-secret, key: key, optional: true}}}]\n",
          NULL,
          NULL,
          false,
          { K8S_1 } },
        { "secretkeyref_missing_key_optional",
          "test",
          false,
          true,
          "    env: [{name: POD_NAME, valueFrom: {secretKeyRef: {name: test-secret, key: key, optional: true}}}]\n",
          "apiVersion: v1\nkind: Secret\nmetadata: {name: test-secret, namespace: %s}\nstringData: {a: b}\n---\n",
          NULL,
          false,
          { NULL } },
        { "configmap",
          "test1",
          false,
          false,
          FROM_CM("p_"),
          CM_DATA,
          NULL,
          false,
          { "TEST_LITERAL=test-test-test", "REPLACE_ME=FROM_CONFIG_MAP",
            "EXPANSION_TEST=FROM_CONFIG_MAP", "DUPE_TEST=ENV_VAR", "p_REPLACE_ME=FROM_CONFIG_MAP",
            "p_DUPE_TEST=CONFIG_MAP", K8S_1 } },
        { "configmap allow prefix to start with a digital",
          "test1",
          false,
          false,
          FROM_CM("\"1_\""),
          CM_DATA,
          NULL,
          false,
          { "TEST_LITERAL=test-test-test", "REPLACE_ME=FROM_CONFIG_MAP",
            "EXPANSION_TEST=FROM_CONFIG_MAP", "DUPE_TEST=ENV_VAR", "1_REPLACE_ME=FROM_CONFIG_MAP",
            "1_DUPE_TEST=CONFIG_MAP", K8S_1 } },
        { "configmap, service env vars",
          "test1",
          true,
          false,
          FROM_CM("p_"),
          CM_DATA,
          NULL,
          false,
          { "TEST_LITERAL=test-test-test", TEST_3, "REPLACE_ME=FROM_CONFIG_MAP",
            "EXPANSION_TEST=FROM_CONFIG_MAP", "DUPE_TEST=ENV_VAR", "p_REPLACE_ME=FROM_CONFIG_MAP",
            "p_DUPE_TEST=CONFIG_MAP", K8S_1 } },
        { "configmap_missing",
          "test1",
          false,
          false,
          "    envFrom: [{configMapRef: {name: test-config-map}}]\n",
          NULL,
          NULL,
          true,
          { NULL } },
        { "configmap_missing_optional",
          "test",
          false,
          false,
          "    envFrom: [{configMapRef: {name: missing-config-map, optional: true}}]\n",
          NULL,
          NULL,
          false,
          { K8S_1 } },
        { "configmap_invalid_keys_valid",
          "test",
          false,
          false,
          "    envFrom: [{prefix: p_, configMapRef: {name: test-config-map}}]\n",
          "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: test-config-map, namespace: %s}\ndata: {\"1234\": abc}\n---\n",
          NULL,
          false,
          { "p_1234=abc", K8S_1 } },
        { "secret",
          "test1",
          false,
          false,
          FROM_SECRET,
          SECRET_DATA,
          NULL,
          false,
          { "TEST_LITERAL=test-test-test", "REPLACE_ME=FROM_SECRET", "EXPANSION_TEST=FROM_SECRET",
            "DUPE_TEST=ENV_VAR", "p_REPLACE_ME=FROM_SECRET", "p_DUPE_TEST=SECRET", K8S_1 } },
        { "secret, service env vars",
          "test1",
          true,
          false,
          FROM_SECRET,
          SECRET_DATA,
          NULL,
          false,
          { "TEST_LITERAL=test-test-test", TEST_3, "REPLACE_ME=FROM_SECRET",
            "EXPANSION_TEST=FROM_SECRET", "DUPE_TEST=ENV_VAR", "p_REPLACE_ME=FROM_SECRET",
            "p_DUPE_TEST=SECRET", K8S_1 } },
        { "secret_missing",
          "test1",
          false,
          false,
          "    envFrom: [{secretRef: {name: test-secret}}]\n",
          NULL,
          NULL,
          true,
          { NULL } },
        { "secret_missing_optional",
          "test",
          false,
          false,
          "    envFrom: [{secretRef: {name: missing-secret, optional: true}}]\n",
          NULL,
          NULL,
          false,
          { K8S_1 } },
        { "secret_invalid_keys_valid",
          "test",
          false,
          false,
          "    envFrom: [{prefix: p_, secretRef: {name: test-secret}}]\n",
          "apiVersion: v1\nkind: Secret\nmetadata: {name: test-secret, namespace: %s}\nstringData: {\"1234.name\": abc}\n---\n",
          NULL,
          false,
          { "p_1234.name=abc", K8S_1 } },
};

static char *case_yaml(const struct mk_case *c)
{
        char *extra = NULL, *yaml = NULL;
        if (c->extra) {
                /* the fixture's one "%s" is the namespace */
                const char *at = strstr(c->extra, "%s");
                assert_non_null(at);
                assert_true(asprintf(&extra, "%.*s%s%s", (int)(at - c->extra), c->extra, c->ns,
                                     at + 2) > 0);
        }
        assert_true(
                asprintf(
                        &yaml,
                        "%s%s"
                        "apiVersion: v1\nkind: Pod\n"
                        "metadata: {name: dapi-test-pod-name, namespace: %s}\n"
                        "spec:\n  serviceAccountName: special\n  nodeName: node-name\n"
                        "  enableServiceLinks: %s\n  containers:\n  - name: c\n%s"
                        "status:\n  hostIP: 127.0.0.1\n  hostIPs: [{ip: 127.0.0.1}, {ip: \"::1\"}]\n"
                        "%s%s\n",
                        c->no_services ? "" : services_yaml, extra ? extra : "", c->ns,
                        c->links ? "true" : "false", c->container, c->pod_ips ? "  podIPs: " : "",
                        c->pod_ips ? c->pod_ips : "") > 0);
        free(extra);
        return yaml;
}

static void test_envvars__make_environment_variables_upstream(void **state)
{
        (void)state;
        for (size_t i = 0; i < SE_ARRAY_SIZE(mk_cases); i++) {
                const struct mk_case *c = &mk_cases[i];
                char *yaml = case_yaml(c);
                struct se_store *s = t_load(yaml);
                const struct se_pod *pod = get_pod(s, c->ns, "dapi-test-pod-name");
                struct se_envvars_input in = { .store = s };
                struct se_env_list l = SE_ENV_LIST_INIT;
                struct se_diag d = { 0 };
                int r = se_envvars_build(&in, pod, &pod->containers[0], &l, &d);
                if (c->error) {
                        if (r >= 0)
                                fail_msg("%s: expected an error", c->name);
                        assert_int_equal(l.n, 0);
                } else {
                        if (r < 0)
                                fail_msg("%s: error %d: %s", c->name, r, d.text);
                        expect_list(&l, c->want, true, c->name);
                }
                se_env_list_release(&l);
                se_store_free(s);
                free(yaml);
        }
}

/* "downward api pod ips multiple ips": an invalid entry is dropped and at
 * most one IP per family is kept. The decoder rejects a bad IP, so the pod is
 * patched after loading. */
static void test_envvars__pod_ips_filtered(void **state)
{
        (void)state;
        const struct mk_case c = { "multiple ips",
                                   "downward-api",
                                   false,
                                   true,
                                   "    env:\n" DOWNWARD("POD_IP", "status.podIP")
                                           DOWNWARD("POD_IPS", "status.podIPs"),
                                   NULL,
                                   NULL,
                                   false,
                                   { NULL } };
        char *yaml = case_yaml(&c);
        struct se_store *s = t_load(yaml);
        struct se_pod *pod = SE_UNCONST(struct se_pod, get_pod(s, c.ns, "dapi-test-pod-name"));
        static const char *ips[] = { "1.2.3.4", "192.168.1.1.", "fd00::6", "1.2.3.5" };
        pod->pod_ips.v = ips;
        pod->pod_ips.n = 4;
        struct se_envvars_input in = { .store = s };
        struct se_env_list l = SE_ENV_LIST_INIT;
        assert_int_equal(se_envvars_build(&in, pod, &pod->containers[0], &l, NULL), 0);
        static const char *const want[] = { "POD_IP=1.2.3.4", "POD_IPS=1.2.3.4,fd00::6", NULL };
        expect_list(&l, want, false, "multiple ips");
        se_env_list_release(&l);
        /* an IPv6 node puts the IPv6 address first */
        struct se_pod_more *more = se_pod_more(pod);
        assert_non_null(more);
        more->host_ips.n = 0;
        more->host_ip = "fd00::1";
        assert_int_equal(se_envvars_build(&in, pod, &pod->containers[0], &l, NULL), 0);
        static const char *const want6[] = { "POD_IP=fd00::6", "POD_IPS=fd00::6,1.2.3.4", NULL };
        expect_list(&l, want6, false, "IPv6 node");
        se_env_list_release(&l);
        se_store_free(s);
        free(yaml);
}

/* Upstream's fixture lists test2/test three times ("1.2.3.5", "None", ""),
 * and default/not-special three times: only services with an IP count, and a
 * later same-name entry replaces an earlier one, as in the kubelet's map.
 * Exercised through the array input (a store holds one object per name). */
static void test_envvars__array_input_duplicates_and_headless(void **state)
{
        (void)state;
        const struct se_service_port p[] = { PORT(NULL, 8085, SE_PROTO_TCP) };
        const struct se_service_port pk[] = { PORT(NULL, 8081, SE_PROTO_TCP) };
        struct se_service *sl[] = {
                svc("default", "kubernetes", "1.2.3.1", 1, pk),
                svc("test2", "test", "1.2.3.5", 1, p),
                svc("test2", "test", "None", 1, p),
                svc("test2", "test", "", 1, p),
                svc("test2", "test", NULL, 1, p),
                svc("test2", "other", "1.2.3.6", 0, p),
        };
        struct se_envvars_input in = { .services = (const struct se_service *const *)sl,
                                       .n_services = SE_ARRAY_SIZE(sl) };
        struct se_env_list l = SE_ENV_LIST_INIT;
        assert_int_equal(se_envvars_services(&in, "test2", true, &l), 0);
        static const char *const want[] = {
                K8S_1,
                "TEST_SERVICE_HOST=1.2.3.5",
                "TEST_SERVICE_PORT=8085",
                "TEST_PORT=tcp://1.2.3.5:8085",
                "TEST_PORT_8085_TCP=tcp://1.2.3.5:8085",
                "TEST_PORT_8085_TCP_PROTO=tcp",
                "TEST_PORT_8085_TCP_PORT=8085",
                "TEST_PORT_8085_TCP_ADDR=1.2.3.5",
                NULL,
        };
        /* a service with an IP and no ports (invalid) gives nothing instead of a crash */
        expect_list(&l, want, false, "array input");
        se_env_list_release(&l);
        /* a later usable entry of the same name replaces the earlier one */
        struct se_service *later = svc("test2", "test", "1.2.3.9", 1, p);
        const struct se_service *two[] = { sl[1], later };
        struct se_envvars_input in2 = { .services = two, .n_services = 2 };
        assert_int_equal(se_envvars_services(&in2, "test2", true, &l), 0);
        assert_string_equal(se_env_list_find(&l, "TEST_SERVICE_HOST")->value, "1.2.3.9");
        se_env_list_release(&l);
        /* two default/kubernetes entries: the first is the master, even for
         * a pod in default with links on (the kubelet's if / else-if) */
        struct se_service *k2 = svc("default", "kubernetes", "1.2.3.2", 1, pk);
        const struct se_service *masters[] = { sl[0], k2 };
        struct se_envvars_input in3 = { .services = masters, .n_services = 2 };
        assert_int_equal(se_envvars_services(&in3, "default", true, &l), 0);
        assert_string_equal(se_env_list_find(&l, "KUBERNETES_SERVICE_HOST")->value, "1.2.3.1");
        assert_int_equal(l.n, 7);
        se_env_list_release(&l);
        se_object_unref(&k2->obj);
        se_object_unref(&later->obj);
        for (size_t i = 0; i < SE_ARRAY_SIZE(sl); i++)
                se_object_unref(&sl[i]->obj);
}

/* In the child: 0, or the number of the check that failed. A Service with
 * every TCP and UDP port, each named: all its variables, in linear time. */
static int many_ports_env(void)
{
        enum { N = 2 * 65535 };
        struct se_service_port *p = calloc(N, sizeof(*p));
        char(*names)[16] = calloc(N, 16);
        if (!p || !names)
                return 9;
        for (unsigned i = 0; i < N; i++) {
                snprintf(names[i], 16, "p%u", i);
                p[i] = (struct se_service_port)PORT(names[i], (int)(i % 65535) + 1,
                                                    i < 65535 ? SE_PROTO_TCP : SE_PROTO_UDP);
        }
        struct se_service *big = svc("ns", "big", "10.0.0.1", N, p);
        const struct se_service *one[] = { big };
        struct se_envvars_input in = { .services = one, .n_services = 1 };
        struct se_env_list l = SE_ENV_LIST_INIT;
        if (se_envvars_services(&in, "ns", true, &l) != 0)
                return 1;
        /* SERVICE_HOST, SERVICE_PORT, PORT; per port SERVICE_PORT_NAME and
         * PORT_N_PROTO with its _PROTO, _PORT and _ADDR */
        if (l.n != 3 + 5 * (size_t)N)
                return 2;
        const struct se_env_entry *e = se_env_list_find(&l, "BIG_PORT_65535_UDP_ADDR");
        if (!e || strcmp(e->value, "10.0.0.1") != 0)
                return 3;
        se_env_list_release(&l);
        se_object_unref(&big->obj);
        free(names);
        free(p);
        return 0;
}

/* The API server takes a Service with any number of ports: the check for
 * ports sharing a variable name must be linear. Budget: CPU seconds for the
 * child, far above the linear check's need (under 1 s here); the pairwise
 * check of 131,070 ports took ~45 s of CPU. None under valgrind. */
static void test_envvars__many_ports_linear(void **state)
{
        (void)state;
        t_run_with_cpu_budget(many_ports_env, 20);
}

/* ---- svcenv's own rules and edge cases ---- */

static const char shop_yaml[] =
        "apiVersion: v1\nkind: Service\nmetadata: {name: kubernetes, namespace: default}\n"
        "spec: {clusterIP: 10.96.0.1, ports: [{name: https, port: 443}]}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: hello, namespace: default}\n"
        "spec: {clusterIP: 10.96.0.9, ports: [{port: 80}]}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: redis, namespace: shop}\n"
        "spec: {clusterIP: 10.0.0.5, ports: [{name: redis, port: 6379}]}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\n"
        "spec: {clusterIP: 10.0.0.6, ports: [{name: https, port: 8443}, {name: http, port: 80, protocol: UDP}]}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: dual, namespace: shop}\n"
        "spec: {clusterIP: 10.0.0.7, clusterIPs: [10.0.0.7, \"fd00::7\"], ipFamilies: [IPv4, IPv6], ports: [{port: 1}]}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: v6, namespace: shop}\n"
        "spec: {clusterIP: \"fd00::8\", ports: [{port: 2, protocol: SCTP}]}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: headless, namespace: shop}\n"
        "spec: {clusterIP: None, ports: [{port: 3}]}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: ext, namespace: shop}\n"
        "spec: {type: ExternalName, externalName: example.com}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: elsewhere, namespace: other}\n"
        "spec: {clusterIP: 10.1.0.1, ports: [{port: 4}]}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: kubernetes-service, namespace: shop}\n"
        "spec: {clusterIP: 10.0.0.9, ports: [{port: 6443}]}\n---\n";

static void test_envvars__namespace_selection_and_order(void **state)
{
        (void)state;
        struct se_store *s = t_load(shop_yaml);
        struct se_envvars_input in = { .store = s };
        struct se_env_list l = SE_ENV_LIST_INIT;
        assert_int_equal(se_envvars_services(&in, "shop", true, &l), 0);
        static const char *const want[] = {
                /* sorted by service: dual, kubernetes, kubernetes-service, redis, v6, web */
                "DUAL_SERVICE_HOST=10.0.0.7",
                "DUAL_SERVICE_PORT=1",
                "DUAL_PORT=tcp://10.0.0.7:1",
                "DUAL_PORT_1_TCP=tcp://10.0.0.7:1",
                "DUAL_PORT_1_TCP_PROTO=tcp",
                "DUAL_PORT_1_TCP_PORT=1",
                "DUAL_PORT_1_TCP_ADDR=10.0.0.7",
                "KUBERNETES_SERVICE_HOST=10.96.0.1",
                "KUBERNETES_SERVICE_PORT=443",
                "KUBERNETES_SERVICE_PORT_HTTPS=443",
                "KUBERNETES_PORT=tcp://10.96.0.1:443",
                "KUBERNETES_PORT_443_TCP=tcp://10.96.0.1:443",
                "KUBERNETES_PORT_443_TCP_PROTO=tcp",
                "KUBERNETES_PORT_443_TCP_PORT=443",
                "KUBERNETES_PORT_443_TCP_ADDR=10.96.0.1",
                /* kubernetes-service: its KUBERNETES_SERVICE_HOST / _PORT lose */
                "KUBERNETES_SERVICE_PORT_6443_TCP=tcp://10.0.0.9:6443",
                "KUBERNETES_SERVICE_PORT_6443_TCP_PROTO=tcp",
                "KUBERNETES_SERVICE_PORT_6443_TCP_PORT=6443",
                "KUBERNETES_SERVICE_PORT_6443_TCP_ADDR=10.0.0.9",
                "KUBERNETES_SERVICE_SERVICE_HOST=10.0.0.9",
                "KUBERNETES_SERVICE_SERVICE_PORT=6443",
                "REDIS_SERVICE_HOST=10.0.0.5",
                "REDIS_SERVICE_PORT=6379",
                "REDIS_SERVICE_PORT_REDIS=6379",
                "REDIS_PORT=tcp://10.0.0.5:6379",
                "REDIS_PORT_6379_TCP=tcp://10.0.0.5:6379",
                "REDIS_PORT_6379_TCP_PROTO=tcp",
                "REDIS_PORT_6379_TCP_PORT=6379",
                "REDIS_PORT_6379_TCP_ADDR=10.0.0.5",
                "V6_SERVICE_HOST=fd00::8",
                "V6_SERVICE_PORT=2",
                "V6_PORT=sctp://[fd00::8]:2",
                "V6_PORT_2_SCTP=sctp://[fd00::8]:2",
                "V6_PORT_2_SCTP_PROTO=sctp",
                "V6_PORT_2_SCTP_PORT=2",
                "V6_PORT_2_SCTP_ADDR=fd00::8",
                /* first port is index 0 (8443), not the lowest (80) */
                "WEB_SERVICE_HOST=10.0.0.6",
                "WEB_SERVICE_PORT=8443",
                "WEB_SERVICE_PORT_HTTPS=8443",
                "WEB_SERVICE_PORT_HTTP=80",
                "WEB_PORT=tcp://10.0.0.6:8443",
                "WEB_PORT_8443_TCP=tcp://10.0.0.6:8443",
                "WEB_PORT_8443_TCP_PROTO=tcp",
                "WEB_PORT_8443_TCP_PORT=8443",
                "WEB_PORT_8443_TCP_ADDR=10.0.0.6",
                "WEB_PORT_80_UDP=udp://10.0.0.6:80",
                "WEB_PORT_80_UDP_PROTO=udp",
                "WEB_PORT_80_UDP_PORT=80",
                "WEB_PORT_80_UDP_ADDR=10.0.0.6",
                NULL,
        };
        /* generation order of kubernetes-service is HOST, PORT, then links; its
         * HOST/PORT names are KUBERNETES_SERVICE_SERVICE_*, and its PORT
         * (tcp://...) collides with kubernetes' KUBERNETES_SERVICE_PORT. */
        (void)want;
        char *got = render(&l, false);
        /* check the exact order of the kubernetes-service block */
        const char *kblock = strstr(got, "KUBERNETES_SERVICE_SERVICE_HOST=10.0.0.9\n"
                                         "KUBERNETES_SERVICE_SERVICE_PORT=6443\n"
                                         "KUBERNETES_SERVICE_PORT_6443_TCP=tcp://10.0.0.9:6443\n");
        assert_non_null(kblock);
        free(got);
        /* set comparison for the rest */
        expect_list(&l, want, true, "shop services");
        /* the collision: kubernetes (shorter name, first in order) wins */
        const struct se_env_entry *e = se_env_list_find(&l, "KUBERNETES_SERVICE_PORT");
        assert_string_equal(e->value, "443");
        assert_string_equal(e->object, "default/kubernetes");
        assert_non_null(e->lost);
        assert_string_equal(e->lost->value, "tcp://10.0.0.9:6443");
        assert_string_equal(e->lost->object, "shop/kubernetes-service");
        assert_null(e->lost->next);
        /* services sorted by name: dual first, web last */
        assert_string_equal(l.items[0].name, "DUAL_SERVICE_HOST");
        assert_string_equal(l.items[l.n - 1].name, "WEB_PORT_80_UDP_ADDR");
        se_env_list_release(&l);

        /* links off: only the master; other default services never leak */
        assert_int_equal(se_envvars_services(&in, "shop", false, &l), 0);
        assert_int_equal(l.n, 8);
        assert_null(se_env_list_find(&l, "HELLO_SERVICE_HOST"));
        se_env_list_release(&l);
        assert_int_equal(se_envvars_services(&in, "other", true, &l), 0);
        assert_non_null(se_env_list_find(&l, "ELSEWHERE_SERVICE_HOST"));
        assert_null(se_env_list_find(&l, "HELLO_SERVICE_HOST"));
        assert_null(se_env_list_find(&l, "REDIS_SERVICE_HOST"));
        assert_int_equal(l.n, 8 + 7);
        se_env_list_release(&l);
        /* pods in default see default's services with links */
        assert_int_equal(se_envvars_services(&in, "default", true, &l), 0);
        assert_non_null(se_env_list_find(&l, "HELLO_SERVICE_HOST"));
        se_env_list_release(&l);
        se_store_free(s);
}

static void test_envvars__collision_other_direction(void **state)
{
        (void)state;
        /* x-port-80-tcp's X_PORT_80_TCP_PORT (tcp://...) against x's (80): x wins */
        struct se_store *s = t_load(
                "apiVersion: v1\nkind: Service\nmetadata: {name: x-port-80-tcp, namespace: nn}\n"
                "spec: {clusterIP: 10.0.0.2, ports: [{port: 81}]}\n---\n"
                "apiVersion: v1\nkind: Service\nmetadata: {name: x, namespace: nn}\n"
                "spec: {clusterIP: 10.0.0.1, ports: [{port: 80}]}\n");
        struct se_envvars_input in = { .store = s };
        struct se_env_list l = SE_ENV_LIST_INIT;
        assert_int_equal(se_envvars_services(&in, "nn", true, &l), 0);
        const struct se_env_entry *e = se_env_list_find(&l, "X_PORT_80_TCP_PORT");
        assert_string_equal(e->value, "80");
        assert_string_equal(e->lost->value, "tcp://10.0.0.2:81");
        size_t n = 0;
        for (size_t i = 0; i < l.n; i++)
                n += strcmp(l.items[i].name, "X_PORT_80_TCP_PORT") == 0;
        assert_int_equal(n, 1);
        se_env_list_release(&l);
        se_store_free(s);
}

static const struct se_env_list *build(struct se_store *s, const char *ns, const char *pod,
                                       size_t ci, struct se_env_list *l, int want_r,
                                       const char *want_msg)
{
        struct se_envvars_input in = { .store = s };
        const struct se_pod *p = get_pod(s, ns, pod);
        struct se_diag d = { 0 };
        int r = se_envvars_build(&in, p, &p->containers[ci], l, &d);
        if (r != want_r)
                fail_msg("%s: got %d (%s), want %d", pod, r, d.text, want_r);
        if (want_msg)
                assert_string_equal(d.text, want_msg);
        return l;
}

static void test_envvars__container_rules(void **state)
{
        (void)state;
        char *yaml;
        assert_true(
                asprintf(
                        &yaml, "%s%s", shop_yaml,
                        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: shop}\nspec:\n"
                        "  containers:\n  - name: c\n    env:\n"
                        /* empty value still shadows the service variable (V20) */
                        "    - {name: REDIS_SERVICE_HOST, value: \"\"}\n"
                        /* expansion reads the service variable it shadows (V19) */
                        "    - {name: REDIS_PORT, value: $(REDIS_SERVICE_PORT)}\n"
                        /* duplicate: first position, last value; between sees the first (V23) */
                        "    - {name: A, value: one}\n"
                        "    - {name: B, value: $(A)}\n"
                        "    - {name: A, value: two}\n"
                        /* forward reference that is also a service variable: service value */
                        "    - {name: F, value: $(WEB_SERVICE_PORT)}\n"
                        "    - {name: WEB_SERVICE_PORT, value: mine}\n"
                        /* optional-missing does not occupy the name */
                        "    - {name: REDIS_SERVICE_PORT, valueFrom: {configMapKeyRef: {name: nope, key: k, optional: true}}}\n"
                        /* no recursion */
                        "    - {name: R, value: $$(A)}\n"
                        "    - {name: S, value: $(R)}\n") > 0);
        struct se_store *s = t_load(yaml);
        struct se_env_list l = SE_ENV_LIST_INIT;
        build(s, "shop", "p", 0, &l, 0, NULL);
        static const char *const head[] = {
                "REDIS_SERVICE_HOST=",   "REDIS_PORT=6379", "A=two",  "B=one", "F=8443",
                "WEB_SERVICE_PORT=mine", "R=$(A)",          "S=$(A)", NULL
        };
        for (size_t i = 0; head[i]; i++) {
                char *line;
                assert_true(asprintf(&line, "%s=%s", l.items[i].name, l.items[i].value) > 0);
                assert_string_equal(line, head[i]);
                free(line);
        }
        /* the service variables follow, minus the shadowed ones */
        assert_string_equal(l.items[8].name, "DUAL_SERVICE_HOST");
        assert_string_equal(se_env_list_find(&l, "REDIS_SERVICE_PORT")->value, "6379");
        const struct se_env_entry *h = se_env_list_find(&l, "REDIS_SERVICE_HOST");
        assert_int_equal(h->origin, SE_ENV_FROM_VALUE);
        assert_non_null(h->lost);
        assert_int_equal(h->lost->origin, SE_ENV_FROM_SERVICE);
        assert_string_equal(h->lost->value, "10.0.0.5");
        const struct se_env_entry *a = se_env_list_find(&l, "A");
        assert_string_equal(a->lost->value, "one");
        size_t n = 0;
        for (size_t i = 0; i < l.n; i++)
                n += strcmp(l.items[i].name, "WEB_SERVICE_PORT") == 0;
        assert_int_equal(n, 1);
        se_env_list_release(&l);
        se_store_free(s);
        free(yaml);
}

static void test_envvars__links_off_keeps_references_literal(void **state)
{
        (void)state;
        char *yaml;
        assert_true(
                asprintf(
                        &yaml, "%s%s", shop_yaml,
                        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: shop}\n"
                        "spec:\n  enableServiceLinks: false\n  containers:\n  - name: c\n"
                        "    env: [{name: X, value: \"$(REDIS_SERVICE_HOST) $(KUBERNETES_SERVICE_HOST)\"}]\n") >
                0);
        struct se_store *s = t_load(yaml);
        struct se_env_list l = SE_ENV_LIST_INIT;
        build(s, "shop", "p", 0, &l, 0, NULL);
        assert_string_equal(se_env_list_find(&l, "X")->value, "$(REDIS_SERVICE_HOST) 10.96.0.1");
        assert_int_equal(l.n, 1 + 8);
        se_env_list_release(&l);
        se_store_free(s);
        free(yaml);
}

static const char pod_refs_yaml[] =
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: ns}\ndata: {k: v}\n---\n"
        "apiVersion: v1\nkind: Secret\nmetadata: {name: sec, namespace: ns}\nstringData: {k: s}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: ns\n  uid: u-1\n"
        "  labels: {app: web, tier: \"a\\\"b\"}\n  annotations: {note: \"x\\ny\", example.com/K: v}\n"
        "spec:\n  containers:\n"
        "  - name: c0\n    env:\n"
        "    - {name: UID, valueFrom: {fieldRef: {fieldPath: metadata.uid}}}\n"
        "    - {name: LABELS, valueFrom: {fieldRef: {fieldPath: metadata.labels}}}\n"
        "    - {name: ANN, valueFrom: {fieldRef: {fieldPath: metadata.annotations}}}\n"
        "    - {name: APP, valueFrom: {fieldRef: {fieldPath: \"metadata.labels['app']\"}}}\n"
        "    - {name: NOPE, valueFrom: {fieldRef: {fieldPath: \"metadata.labels['missing']\"}}}\n"
        "    - {name: AK, valueFrom: {fieldRef: {fieldPath: \"metadata.annotations['example.com/K']\"}}}\n"
        /* checked in lower case, looked up as written: valid, and not found */
        "    - {name: AK2, valueFrom: {fieldRef: {fieldPath: \"metadata.annotations['Example.com/K']\"}}}\n"
        "    - {name: CM, valueFrom: {configMapKeyRef: {name: cfg, key: k}}}\n"
        "    - {name: SEC, valueFrom: {secretKeyRef: {name: sec, key: k}}}\n"
        "    - {name: HOST, valueFrom: {fieldRef: {fieldPath: spec.host}}}\n"
        "    - {name: NOEXP, valueFrom: {configMapKeyRef: {name: cfg, key: k}}}\n"
        "  - name: c1\n    env: [{name: X, valueFrom: {configMapKeyRef: {name: cfg, key: absent}}}]\n"
        "  - name: c2\n    env: [{name: X, valueFrom: {secretKeyRef: {name: sec, key: absent}}}]\n"
        "  - name: c3\n    env: [{name: X, valueFrom: {configMapKeyRef: {name: gone, key: k}}}]\n"
        "  - name: c4\n    env: [{name: X, valueFrom: {secretKeyRef: {name: gone, key: k}}}]\n"
        "  - name: c5\n    envFrom: [{secretRef: {name: gone}}]\n"
        "  - name: c6\n    env: [{name: X, valueFrom: {fieldRef: {fieldPath: status.phase}}}]\n"
        "  - name: c7\n    env: [{name: X, valueFrom: {fieldRef: {fieldPath: \"spec.nodeName['x']\"}}}]\n"
        "  - name: c8\n    env: [{name: X, valueFrom: {fieldRef: {fieldPath: \"metadata.labels['-bad']\"}}}]\n";

static void test_envvars__value_from(void **state)
{
        (void)state;
        struct se_store *s = t_load(pod_refs_yaml);
        struct se_env_list l = SE_ENV_LIST_INIT;
        build(s, "ns", "p", 0, &l, 0, NULL);
        static const char *const want[] = {
                "UID=u-1",
                "LABELS=app=\"web\"\ntier=\"a\\\"b\"",
                "ANN=example.com/K=\"v\"\nnote=\"x\\ny\"",
                "APP=web",
                "NOPE=",
                "AK=v",
                "AK2=",
                "CM=v",
                "SEC=s",
                "HOST=",
                "NOEXP=v",
                NULL,
        };
        expect_list(&l, want, false, "valueFrom");
        assert_string_equal(se_env_list_find(&l, "CM")->object, "ns/cfg");
        se_env_list_release(&l);
        build(s, "ns", "p", 1, &l, -ENOENT, "couldn't find key absent in ConfigMap ns/cfg");
        build(s, "ns", "p", 2, &l, -ENOENT, "couldn't find key absent in Secret ns/sec");
        build(s, "ns", "p", 3, &l, -ENOENT, "configmaps \"gone\" not found");
        build(s, "ns", "p", 4, &l, -ENOENT, "secrets \"gone\" not found");
        build(s, "ns", "p", 5, &l, -ENOENT, "secrets \"gone\" not found");
        build(s, "ns", "p", 6, &l, -EINVAL, "unsupported fieldPath: status.phase");
        build(s, "ns", "p", 7, &l, -EINVAL,
              "field label does not support subscript: spec.nodeName['x']");
        build(s, "ns", "p", 8, &l, -EINVAL,
              "invalid key subscript in metadata.labels['-bad']: must be a qualified name");
        assert_int_equal(l.n, 0);
        se_store_free(s);
}

/* The kubelet's host IPs come from its Node: InternalIPs before ExternalIPs,
 * the first address and the first of the other family, in canonical form;
 * the pod's IPs follow the node's primary family. */
static void test_envvars__host_ips_from_node(void **state)
{
        (void)state;
        struct se_store *s = t_load(
                "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus:\n  addresses:\n"
                "  - {type: Hostname, address: n1}\n  - {type: ExternalIP, address: 203.0.113.5}\n"
                "  - {type: InternalIP, address: \"fd00:0:0::0011\"}\n  - {type: InternalIP, address: \"fd00::12\"}\n"
                "  - {type: InternalIP, address: 10.0.0.5}\n---\n"
                "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\nspec:\n  nodeName: n1\n"
                "  containers:\n  - name: c\n    env:\n" DOWNWARD("H", "status.hostIP")
                        DOWNWARD("HS", "status.hostIPs") DOWNWARD("P", "status.podIP") DOWNWARD(
                                "PS",
                                "status.podIPs") "status:\n  hostIP: 1.1.1.1\n  podIPs: [{ip: 10.244.0.5}, {ip: \"fd00:244::5\"}]\n");
        struct se_env_list l = SE_ENV_LIST_INIT;
        build(s, "ns", "p", 0, &l, 0, NULL);
        static const char *const want[] = { "H=fd00::11", "HS=fd00::11,10.0.0.5", "P=fd00:244::5",
                                            "PS=fd00:244::5,10.244.0.5", NULL };
        expect_list(&l, want, false, "host IPs from the node");
        se_env_list_release(&l);
        se_store_free(s);
}

static void test_envvars__resource_field_ref(void **state)
{
        (void)state;
        struct se_store *s = t_load(
                "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\nspec:\n  containers:\n"
                "  - name: c\n    resources: {limits: {cpu: 1500m, memory: 129Mi}, requests: {memory: 64Mi}}\n"
                "    env:\n"
                "    - {name: CPU, valueFrom: {resourceFieldRef: {resource: limits.cpu}}}\n"
                "    - {name: CPU_M, valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: 1m}}}\n"
                "    - {name: MEM_MI, valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}}\n"
                "    - {name: MEM_M, valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1M}}}\n"
                "    - {name: REQ_MEM, valueFrom: {resourceFieldRef: {resource: requests.memory}}}\n"
                "    - {name: REQ_CPU, valueFrom: {resourceFieldRef: {resource: requests.cpu, divisor: 100m}}}\n"
                "    - {name: OTHER, valueFrom: {resourceFieldRef: {containerName: d, resource: requests.cpu}}}\n"
                "  - name: d\n    resources: {requests: {cpu: \"0.25\"}}\n"
                "    env: [{name: X, valueFrom: {resourceFieldRef: {resource: limits.cpu}}}]\n"
                "  - name: e\n    env: [{name: X, valueFrom: {resourceFieldRef: {resource: limits.gpu}}}]\n"
                "  - name: f\n    env: [{name: X, valueFrom: {resourceFieldRef: {resource: limits.hugepages-2Mi}}}]\n");
        struct se_env_list l = SE_ENV_LIST_INIT;
        build(s, "ns", "p", 0, &l, 0, NULL);
        static const char *const want[] = {
                "CPU=2",      "CPU_M=1500", "MEM_MI=129", "MEM_M=136", "REQ_MEM=67108864",
                "REQ_CPU=15", "OTHER=1",    NULL,
        };
        expect_list(&l, want, false, "resourceFieldRef");
        se_env_list_release(&l);
        build(s, "ns", "p", 1, &l, -ENODATA, NULL);
        build(s, "ns", "p", 2, &l, -EINVAL, "unsupported container resource : limits.gpu");
        build(s, "ns", "p", 3, &l, 0, NULL);
        assert_string_equal(se_env_list_find(&l, "X")->value, "0");
        se_env_list_release(&l);
        se_store_free(s);
}

/* Expansion can repeat a value: the container's total is capped. */
static void test_envvars__expansion_total_cap(void **state)
{
        (void)state;
        /* 1 MiB value, each next variable doubles it: 2, 4, 8, 16 MiB, ... */
        char *big = malloc((1 << 20) + 1);
        memset(big, 'x', 1 << 20);
        big[1 << 20] = '\0';
        struct se_strbuf y;
        se_strbuf_init(&y, 0);
        se_strbuf_printf(
                &y,
                "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\n"
                "spec:\n  containers:\n  - name: c\n    env:\n    - {name: V0, value: %s}\n",
                big);
        for (int i = 1; i < 40; i++)
                se_strbuf_printf(&y, "    - {name: V%d, value: \"$(V%d)$(V%d)\"}\n", i, i - 1,
                                 i - 1);
        /* V5 would be 32 MiB: over the per-value cap */
        struct se_store *s = t_load(y.buf);
        struct se_env_list l = SE_ENV_LIST_INIT;
        build(s, "ns", "p", 0, &l, -E2BIG, NULL);
        assert_int_equal(l.n, 0);
        se_store_free(s);
        se_strbuf_release(&y);
        /* 80 variables of 1 MiB each pass the per-value cap but not the total */
        se_strbuf_init(&y, 0);
        se_strbuf_printf(
                &y,
                "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\n"
                "spec:\n  containers:\n  - name: c\n    env:\n    - {name: V0, value: %s}\n",
                big);
        for (int i = 1; i < 80; i++)
                se_strbuf_printf(&y, "    - {name: V%d, value: \"$(V0)\"}\n", i);
        s = t_load(y.buf);
        struct se_diag d = { 0 };
        struct se_envvars_input in = { .store = s };
        const struct se_pod *p = get_pod(s, "ns", "p");
        assert_int_equal(se_envvars_build(&in, p, &p->containers[0], &l, &d), -E2BIG);
        assert_non_null(strstr(d.text, "over 67108864 bytes"));
        se_store_free(s);
        se_strbuf_release(&y);
        free(big);
}

/* Every allocation of a full build fails once in turn: the result is
 * -ENOMEM with an empty list (and no leak under ASan/valgrind), or success
 * with the same environment as without failures. */
static void test_envvars__allocation_failures(void **state)
{
        (void)state;
        char *yaml;
        assert_true(
                asprintf(&yaml, "%s%s", shop_yaml,
                         "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: shop}\n"
                         "data: {a: b}\n---\n"
                         "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: shop}\nspec:\n"
                         "  containers:\n  - name: c\n    envFrom: [{configMapRef: {name: cfg}}]\n"
                         "    env:\n    - {name: REDIS_SERVICE_HOST, value: x}\n"
                         "    - {name: B, value: \"$(a) $(WEB_SERVICE_PORT) $(NOPE)\"}\n"
                         "    - {name: C, valueFrom: {fieldRef: {fieldPath: metadata.labels}}}\n") >
                0);
        struct se_store *s = t_load(yaml);
        const struct se_pod *p = get_pod(s, "shop", "p");
        struct se_envvars_input in = { .store = s };
        struct se_env_list l = SE_ENV_LIST_INIT;
        assert_int_equal(se_envvars_build(&in, p, &p->containers[0], &l, NULL), 0);
        char *want = render(&l, false);
        se_env_list_release(&l);
        unsigned long failed = 0, ok_in_a_row = 0;
        for (unsigned long n = 1; ok_in_a_row < 50 && n < 20000; n++) {
                se_alloc_fail_at(n);
                int r = se_envvars_build(&in, p, &p->containers[0], &l, NULL);
                se_alloc_fail_at(0);
                if (r == -ENOMEM) {
                        assert_int_equal(l.n, 0);
                        assert_null(l.items);
                        failed++;
                        ok_in_a_row = 0;
                        continue;
                }
                /* a failure that was absorbed must not change the result */
                assert_int_equal(r, 0);
                char *got = render(&l, false);
                assert_string_equal(got, want);
                free(got);
                se_env_list_release(&l);
                ok_in_a_row++;
        }
        assert_true(failed > 5); /* the build does allocate, and reports it */
        free(want);
        se_store_free(s);
        free(yaml);
}

static void test_envvars__size_and_describe(void **state)
{
        (void)state;
        struct se_store *s = t_load(shop_yaml);
        struct se_envvars_input in = { .store = s };
        struct se_env_list l = SE_ENV_LIST_INIT;
        assert_int_equal(se_envvars_services(&in, "other", false, &l), 0);
        size_t n, bytes, longest;
        se_env_list_size(&l, &n, &bytes, &longest);
        assert_int_equal(n, 8);
        size_t want = 0, lw = 0;
        for (size_t i = 0; i < l.n; i++) {
                size_t k = strlen(l.items[i].name) + strlen(l.items[i].value) + 2;
                want += k + 8;
                lw = k > lw ? k : lw;
        }
        assert_int_equal(bytes, want);
        assert_int_equal(longest, lw);
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        se_env_entry_describe(se_env_list_find(&l, "KUBERNETES_SERVICE_PORT_HTTPS"), &sb);
        assert_string_equal(sb.buf, "service default/kubernetes port 0 (https)");
        se_strbuf_reset(&sb);
        se_env_entry_describe(se_env_list_find(&l, "KUBERNETES_SERVICE_HOST"), &sb);
        assert_string_equal(sb.buf, "service default/kubernetes");
        se_strbuf_release(&sb);
        se_env_list_release(&l);
        se_store_free(s);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_envvars__from_services_upstream),
                cmocka_unit_test(test_envvars__make_environment_variables_upstream),
                cmocka_unit_test(test_envvars__pod_ips_filtered),
                cmocka_unit_test(test_envvars__array_input_duplicates_and_headless),
                cmocka_unit_test(test_envvars__namespace_selection_and_order),
                cmocka_unit_test(test_envvars__collision_other_direction),
                cmocka_unit_test(test_envvars__container_rules),
                cmocka_unit_test(test_envvars__links_off_keeps_references_literal),
                cmocka_unit_test(test_envvars__value_from),
                cmocka_unit_test(test_envvars__host_ips_from_node),
                cmocka_unit_test(test_envvars__resource_field_ref),
                cmocka_unit_test(test_envvars__expansion_total_cap),
                cmocka_unit_test(test_envvars__allocation_failures),
                cmocka_unit_test(test_envvars__size_and_describe),
                cmocka_unit_test(test_envvars__many_ports_linear),
        };
        return cmocka_run_group_tests_name("envvars", tests, NULL, NULL);
}

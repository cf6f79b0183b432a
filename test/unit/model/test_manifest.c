/* Manifest loading and decoding: valid input for every kind, YAML features,
 * and invalid input with the exact message and line. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <svcenv/decode.h>
#include <svcenv/manifest.h>
#include <svcenv/model.h>
#include <svcenv/store.h>

#include "cpu_budget.h"

static int load(struct se_store *s, const char *text, char *msg, size_t msg_size)
{
        struct se_diag d;
        int r = se_manifest_load_buffer(s, "t.yaml", text, strlen(text), NULL, NULL, &d);
        if (r < 0 && msg)
                se_diag_format(&d, msg, msg_size);
        return r;
}

static const char full_cluster[] =
        "apiVersion: v1\n"
        "kind: Service\n"
        "metadata:\n"
        "  name: web\n"
        "  namespace: shop\n"
        "  labels: {app: web, tier: front}\n"
        "  annotations: {note: \"yes\"}\n"
        "spec:\n"
        "  type: LoadBalancer\n"
        "  clusterIP: 10.96.0.10\n"
        "  clusterIPs: [10.96.0.10, fd00::10]\n"
        "  ipFamilies: [IPv4, IPv6]\n"
        "  ipFamilyPolicy: PreferDualStack\n"
        "  selector: {app: web}\n"
        "  sessionAffinity: ClientIP\n"
        "  externalIPs: [192.0.2.1]\n"
        "  loadBalancerSourceRanges: [\"203.0.113.0/24 \"]\n"
        "  externalTrafficPolicy: Local\n"
        "  internalTrafficPolicy: Local\n"
        "  healthCheckNodePort: 30999\n"
        "  publishNotReadyAddresses: true\n"
        "  ports:\n"
        "  - {name: http, port: 80, targetPort: http, nodePort: 30080, appProtocol: http}\n"
        "  - {name: dns, port: 53, protocol: UDP, targetPort: 5353}\n"
        "status:\n"
        "  loadBalancer:\n"
        "    ingress: [{ip: 198.51.100.7, ipMode: Proxy}]\n"
        "---\n"
        "apiVersion: v1\n"
        "kind: Pod\n"
        "metadata:\n"
        "  name: web-1\n"
        "  namespace: shop\n"
        "  uid: 1234-abcd\n"
        "  labels: {app: web}\n"
        "  deletionTimestamp: \"2026-11-30T08:00:00Z\"\n"
        "spec:\n"
        "  nodeName: node-a\n"
        "  hostname: web-1\n"
        "  subdomain: web\n"
        "  enableServiceLinks: false\n"
        "  initContainers:\n"
        "  - name: proxy\n"
        "    restartPolicy: Always\n"
        "    ports: [{name: admin, containerPort: 9901}]\n"
        "  containers:\n"
        "  - name: app\n"
        "    image: nginx\n"
        "    ports: [{name: http, containerPort: 8080}, {containerPort: 5353, protocol: UDP}]\n"
        "    env:\n"
        "    - {name: PLAIN, value: v}\n"
        "    - {name: EMPTY}\n"
        "    - name: NODE\n"
        "      valueFrom: {fieldRef: {fieldPath: spec.nodeName}}\n"
        "    - name: CM\n"
        "      valueFrom: {configMapKeyRef: {name: cfg, key: k, optional: true}}\n"
        "    - name: MEM\n"
        "      valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}\n"
        "    envFrom:\n"
        "    - {prefix: P_, secretRef: {name: sec}}\n"
        "    resources: {limits: {memory: 128Mi, cpu: 1}}\n"
        "status:\n"
        "  phase: Running\n"
        "  podIPs: [{ip: 10.0.0.5}, {ip: fd00::5}]\n"
        "  hostIP: 192.168.1.10\n"
        "  conditions: [{type: Ready, status: \"True\"}]\n"
        "---\n"
        "apiVersion: v1\n"
        "kind: Node\n"
        "metadata: {name: node-a, labels: {topology.kubernetes.io/zone: z1}}\n"
        "spec: {podCIDR: 10.0.0.0/24}\n"
        "status:\n"
        "  addresses: [{type: InternalIP, address: 192.168.1.10}, {type: Hostname, address: node-a}]\n"
        "  conditions: [{type: Ready, status: \"True\"}]\n"
        "---\n"
        "apiVersion: v1\n"
        "kind: Secret\n"
        "metadata: {name: sec, namespace: shop}\n"
        "data: {a: aGVsbG8=, b: b2xk}\n"
        "stringData: {b: new}\n"
        "---\n"
        "apiVersion: v1\n"
        "kind: ConfigMap\n"
        "metadata: {name: cfg, namespace: shop}\n"
        "data: {k: value}\n";

static void test_manifest__every_kind_decodes(void **state)
{
        (void)state;
        struct se_store *s = se_store_new();
        char msg[600] = "";
        assert_int_equal(load(s, full_cluster, msg, sizeof(msg)), 0);

        const struct se_service *svc =
                se_service_of(se_store_get(s, SE_KIND_SERVICE, "shop", "web"));
        assert_non_null(svc);
        assert_int_equal(svc->type, SE_SVC_LOAD_BALANCER);
        assert_string_equal(svc->cluster_ip, "10.96.0.10");
        assert_int_equal(svc->cluster_ips.n, 2);
        assert_string_equal(svc->cluster_ips.v[1], "fd00::10");
        assert_int_equal(svc->n_ports, 2);
        assert_true(svc->ports[0].target_port.is_string);
        assert_string_equal(svc->ports[0].target_port.str, "http");
        assert_int_equal(svc->ports[0].node_port, 30080);
        assert_string_equal(svc->ports[0].app_protocol, "http");
        assert_int_equal(svc->ports[1].protocol, SE_PROTO_UDP);
        assert_false(svc->ports[1].target_port.is_string);
        assert_int_equal(svc->ports[1].target_port.num, 5353);
        assert_true(svc->client_ip_affinity);
        assert_int_equal(svc->affinity_timeout, 10800);
        assert_int_equal(svc->external_policy, SE_POLICY_LOCAL);
        assert_int_equal(svc->internal_policy, SE_POLICY_LOCAL);
        assert_int_equal(svc->health_check_node_port, 30999);
        assert_true(svc->publish_not_ready_addresses);
        assert_string_equal(se_kvlist_get(&svc->selector, "app"), "web");
        assert_string_equal(se_kvlist_get(&svc->obj.meta.labels, "tier"), "front");
        assert_string_equal(se_kvlist_get(&svc->obj.meta.annotations, "note"), "yes");
        assert_int_equal(svc->n_lb_ingress, 1);
        assert_int_equal(svc->lb_ingress[0].ip_mode, SE_IPMODE_PROXY);
        assert_int_equal(se_object_source_line(&svc->obj), 1);

        const struct se_pod *pod = se_pod_of(se_store_get(s, SE_KIND_POD, "shop", "web-1"));
        assert_non_null(pod);
        assert_int_equal(se_object_source_line(&pod->obj), 29);
        assert_string_equal(pod->obj.meta.deletion_timestamp, "2026-11-30T08:00:00Z");
        assert_int_equal(pod->more->enable_service_links, SE_FALSE);
        assert_int_equal(pod->n_init_containers, 1);
        assert_string_equal(pod->init_containers[0].restart_policy, "Always");
        const struct se_container *c = &pod->containers[0];
        assert_int_equal(c->n_env, 5);
        assert_string_equal(c->env[0].value, "v");
        assert_null(c->env[1].value);
        assert_int_equal(c->env[2].source, SE_ENV_FIELD_REF);
        assert_string_equal(c->env[2].ref, "spec.nodeName");
        assert_int_equal(c->env[3].source, SE_ENV_CONFIGMAP_KEY);
        assert_int_equal(c->env[3].optional, SE_TRUE);
        assert_int_equal(c->env[4].source, SE_ENV_RESOURCE_REF);
        assert_string_equal(c->env[4].divisor, "1Mi");
        assert_int_equal(c->n_env_from, 1);
        assert_true(c->env_from[0].secret);
        assert_string_equal(c->env_from[0].prefix, "P_");
        assert_string_equal(se_kvlist_get(&c->limits, "cpu"), "1");
        assert_int_equal(c->ports[1].protocol, SE_PROTO_UDP);
        assert_string_equal(pod->pod_ip, "10.0.0.5");
        assert_int_equal(pod->pod_ips.n, 2);
        assert_true(se_pod_is_ready(pod));
        assert_false(se_pod_is_terminal(pod));

        const struct se_node *node = se_node_of(se_store_get(s, SE_KIND_NODE, "", "node-a"));
        assert_non_null(node);
        assert_int_equal(node->n_addresses, 2);
        assert_string_equal(node->pod_cidrs.v[0], "10.0.0.0/24");
        assert_int_equal(node->ready, SE_TRUE);
        assert_string_equal(node->obj.meta.namespace, "");

        const struct se_secret *sec = se_secret_of(se_store_get(s, SE_KIND_SECRET, "shop", "sec"));
        assert_string_equal(se_kvlist_get(&sec->data, "a"), "hello");
        assert_string_equal(se_kvlist_get(&sec->data, "b"), "new");
        const struct se_configmap *cm =
                se_configmap_of(se_store_get(s, SE_KIND_CONFIGMAP, "shop", "cfg"));
        assert_string_equal(se_kvlist_get(&cm->data, "k"), "value");
        se_store_free(s);
}

static void test_manifest__lists_anchors_merge_and_json(void **state)
{
        (void)state;
        struct se_store *s = se_store_new();
        char msg[600] = "";
        const char *text =
                "apiVersion: v1\n"
                "kind: List\n"
                "items:\n"
                "- apiVersion: v1\n"
                "  kind: Service\n"
                "  metadata: &meta {name: a, labels: &labels {app: x}}\n"
                "  spec: {selector: *labels, ports: [{port: 0x50}]}\n"
                "- apiVersion: v1\n"
                "  kind: Service\n"
                "  metadata:\n"
                "    <<: *meta\n"
                "    name: b\n"
                "  spec: {ports: [{port: 0777, targetPort: 1_000}]}\n"
                "- apiVersion: apps/v1\n"
                "  kind: Deployment\n"
                "  metadata: {name: skipped}\n"
                "---\n"
                "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"json-in-yaml\"}}\n";
        assert_int_equal(load(s, text, msg, sizeof(msg)), 0);
        const struct se_service *a =
                se_service_of(se_store_get(s, SE_KIND_SERVICE, "default", "a"));
        const struct se_service *b =
                se_service_of(se_store_get(s, SE_KIND_SERVICE, "default", "b"));
        assert_non_null(a);
        assert_non_null(b);
        assert_int_equal(a->ports[0].port, 80);
        assert_string_equal(se_kvlist_get(&a->selector, "app"), "x");
        assert_string_equal(se_kvlist_get(&b->obj.meta.labels, "app"), "x");
        assert_int_equal(b->ports[0].port, 511);
        assert_int_equal(b->ports[0].target_port.num, 1000);
        assert_int_equal(se_object_source_line(&b->obj), 8);
        assert_non_null(se_store_get(s, SE_KIND_NAMESPACE, "", "json-in-yaml"));
        assert_int_equal(se_store_count(s, SE_KIND_SERVICE, NULL), 2);

        /* a JSON stream of a ServiceList whose items carry no kind, as the API sends it */
        const char *json = "{\"kind\":\"ServiceList\",\"apiVersion\":\"v1\",\"items\":[\n"
                           "{\"metadata\":{\"name\":\"c\",\"namespace\":\"n1\"},\"spec\":{}}]}\n"
                           "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"p\"},"
                           "\"spec\":{\"containers\":[{\"name\":\"x\"}]}}";
        struct se_diag d;
        assert_int_equal(
                se_manifest_load_buffer(s, "t.json", json, strlen(json), "other", NULL, &d), 0);
        assert_non_null(se_store_get(s, SE_KIND_SERVICE, "n1", "c"));
        assert_non_null(se_store_get(s, SE_KIND_POD, "other", "p"));
        se_store_free(s);
}

struct bad_case {
        const char *text;
        const char *message; /* the full one-line diagnostic */
};

#define SVC_HEAD "apiVersion: v1\nkind: Service\nmetadata: {name: web}\n"
#define POD_HEAD "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns1}\n"

static const struct bad_case bad_cases[] = {
        { SVC_HEAD "spec:\n  ports:\n  - port: \"80\"\n",
          "t.yaml:6: Service default/web: spec.ports[0].port: expected an integer, got a string" },
        { SVC_HEAD "spec:\n  ports:\n  - port: 70000\n",
          "t.yaml:6: Service default/web: spec.ports[0].port: invalid port 70000: must be between 1 and 65535, inclusive" },
        { SVC_HEAD "spec:\n  ports:\n  - name: a\n    port: 80\n  - port: 81\n",
          "t.yaml:8: Service default/web: spec.ports[1].name: Required value: every port of a multi-port Service needs a name" },
        { SVC_HEAD "spec:\n  ports:\n  - {name: a, port: 80}\n  - {name: a, port: 81}\n",
          "t.yaml:7: Service default/web: spec.ports[1].name: Duplicate value: \"a\"" },
        { SVC_HEAD "spec:\n  type: Balanced\n",
          "t.yaml:5: Service default/web: spec.type: unsupported value \"Balanced\": supported values: \"ClusterIP\", \"NodePort\", \"LoadBalancer\", \"ExternalName\"" },
        { SVC_HEAD "spec:\n  clusterIP: 10.0.0.300\n",
          "t.yaml:5: Service default/web: spec.clusterIP: \"10.0.0.300\" is not a valid IP address" },
        { SVC_HEAD "spec:\n  ports:\n  - port: 80\n    protocol: tcp\n",
          "t.yaml:7: Service default/web: spec.ports[0].protocol: unsupported value \"tcp\": supported values: \"SCTP\", \"TCP\", \"UDP\"" },
        { SVC_HEAD "spec:\n  ports:\n  - port: 80\n    targetPort: Http_Port\n",
          "t.yaml:7: Service default/web: spec.ports[0].targetPort: \"Http_Port\" is not a valid port name: at most 15 lower case letters, digits and '-', with at least one letter" },
        { SVC_HEAD "spec:\n  selector:\n    app: [a]\n",
          "t.yaml:6: Service default/web: spec.selector.app: expected a string, got a list" },
        { SVC_HEAD
          "spec:\n  sessionAffinity: ClientIP\n  sessionAffinityConfig:\n    clientIP:\n      timeoutSeconds: 0\n",
          "t.yaml:8: Service default/web: spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value: 0: must be greater than 0 and less than 86400" },
        { SVC_HEAD "spec:\n  type: ExternalName\n",
          "t.yaml:5: Service default/web: spec.externalName: Required value: an ExternalName Service needs spec.externalName" },
        { SVC_HEAD "spec:\n  externalTrafficPolicy: Global\n",
          "t.yaml:5: Service default/web: spec.externalTrafficPolicy: unsupported value \"Global\": supported values: \"Cluster\", \"Local\"" },
        { SVC_HEAD "spec:\n  loadBalancerSourceRanges: [10.0.0.0/40]\n",
          "t.yaml:5: Service default/web: spec.loadBalancerSourceRanges[0]: \"10.0.0.0/40\" is not a valid CIDR" },
        { "apiVersion: v1\nkind: Service\nmetadata: {name: Web}\n",
          "t.yaml:3: Service default/Web: metadata.name: \"Web\" is not a valid DNS label: lower case letters, digits and '-', at most 63, starting and ending with a letter or digit" },
        { "apiVersion: v1\nkind: Service\nmetadata: {namespace: x}\n",
          "t.yaml:3: Service x/(unnamed): metadata.name: Required value: name or generateName is required" },
        { "apiVersion: v2\nkind: Service\nmetadata: {name: a}\n",
          "t.yaml:1: Service default/a: apiVersion: Service is served as \"v1\", not \"v2\"" },
        { "kind: Service\nmetadata: {name: a}\n",
          "t.yaml:1: Service default/a: apiVersion: Required value: every object needs an apiVersion" },
        { POD_HEAD "spec: {}\n", "t.yaml:4: Pod ns1/p: spec.containers: Required value" },
        { POD_HEAD "spec:\n  containers:\n  - name: c\n    env:\n    - name: A=B\n",
          "t.yaml:8: Pod ns1/p: spec.containers[0].env[0].name: Invalid value: \"A=B\": a valid environment variable name must consist only of printable ASCII characters other than '='" },
        { POD_HEAD
          "spec:\n  containers:\n  - name: c\n    env:\n    - name: A\n      valueFrom: {}\n",
          "t.yaml:9: Pod ns1/p: spec.containers[0].env[0].valueFrom: Invalid value: must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`" },
        { POD_HEAD
          "spec:\n  containers:\n  - name: c\n    envFrom:\n    - {configMapRef: {name: a}, secretRef: {name: b}}\n",
          "t.yaml:8: Pod ns1/p: spec.containers[0].envFrom[0]: Invalid value: may not have more than one field specified at a time" },
        { POD_HEAD "spec:\n  containers:\n  - name: c\n  - name: c\n",
          "t.yaml:7: Pod ns1/p: spec.containers[1].name: Duplicate value: \"c\"" },
        { POD_HEAD "spec:\n  containers: [{name: c}]\nstatus:\n  podIP: 10.0.0.1.2\n",
          "t.yaml:7: Pod ns1/p: status.podIP: \"10.0.0.1.2\" is not a valid IP address" },
        { POD_HEAD
          "spec:\n  containers: [{name: c}]\nstatus:\n  conditions:\n  - {type: Ready, status: yes}\n",
          "t.yaml:8: Pod ns1/p: status.conditions[0].status: expected a string, got a boolean" },
        { POD_HEAD "spec:\n  containers: [{name: c}]\nstatus:\n  phase: Done\n",
          "t.yaml:7: Pod ns1/p: status.phase: unsupported value \"Done\": supported values: \"Pending\", \"Running\", \"Succeeded\", \"Failed\", \"Unknown\"" },
        { "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata:\n  k: \"not base64!\"\n",
          "t.yaml:5: Secret default/s: data.k: illegal base64 data" },
        { "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s}\naddressType: IPv5\n",
          "t.yaml:4: EndpointSlice default/s: addressType: unsupported value \"IPv5\": supported values: \"IPv4\", \"IPv6\", \"FQDN\"" },
        { "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s}\naddressType: IPv4\nendpoints:\n- addresses: []\n",
          "t.yaml:6: EndpointSlice default/s: endpoints[0].addresses: Required value: must contain at least 1 address" },
        { "apiVersion: v1\nkind: Endpoints\nmetadata: {name: e}\nsubsets:\n- addresses: [{ip: nope}]\n",
          "t.yaml:5: Endpoints default/e: subsets[0].addresses[0].ip: \"nope\" is not a valid IP address" },
        { "apiVersion: v1\nkind: Node\nmetadata: {name: node1}\nstatus:\n  addresses: [{type: InternalIP}]\n",
          "t.yaml:5: Node node1: status.addresses[0].address: Required value" },
        { "apiVersion: v1\nkind: Node\nmetadata: {name: node1}\nstatus:\n  allocatable: {cpu: 4 cores}\n",
          "t.yaml:5: Node node1: status.allocatable.cpu: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'" },
        { "a: [1,\n b: c\n",
          "t.yaml:3: did not find expected ',' or ']' while parsing a flow sequence" },
        { "a: 1\na: 2\n", "t.yaml:2: duplicate key \"a\"" },
        { "a: *nothing\n", "t.yaml:1: unknown anchor \"nothing\"" },
        { "- 1\n- 2\n", "t.yaml:1: expected an object, got a list" },
        { SVC_HEAD "---\n" SVC_HEAD,
          "t.yaml:5: Service default/web is defined twice (see the earlier definition)" },
        { "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: q}\n  spec:\n    containers:\n    - name: c\n      ports: [{containerPort: 0}]\n",
          "t.yaml:10: Pod default/q: spec.containers[0].ports[0].containerPort: Required value" },
};

static void test_manifest__invalid_input_names_line_and_field(void **state)
{
        (void)state;
        for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
                struct se_store *s = se_store_new();
                char msg[600] = "";
                int r = load(s, bad_cases[i].text, msg, sizeof(msg));
                if (r >= 0 || strcmp(msg, bad_cases[i].message) != 0)
                        fail_msg("case %zu: r=%d\n  got:  %s\n  want: %s", i, r, msg,
                                 bad_cases[i].message);
                /* all or nothing: a failed load adds nothing */
                for (int k = 0; k < SE_KIND_COUNT; k++)
                        assert_int_equal(se_store_count(s, (enum se_kind)k, NULL), 0);
                se_store_free(s);
        }
}

/* status.allocatable.cpu, for the topology cache: a quantity, as a
 * string or a YAML number, kept as written and in nanocores */
static void test_manifest__node_allocatable_cpu(void **state)
{
        (void)state;
        static const struct {
                const char *cpu;
                const char *text;
                int64_t nanos;
        } cases[] = {
                { "\"4\"", "4", 4000000000 }, { "1500m", "1500m", 1500000000 },
                { "2", "2", 2000000000 },     { "0.5", "0.5", 500000000 },
                { "100u", "100u", 100000 },   { "1n", "1n", 1 },
                { "\"0\"", "0", 0 },
        };
        for (size_t i = 0; i < SE_ARRAY_SIZE(cases); i++) {
                char text[256];
                snprintf(text, sizeof(text),
                         "apiVersion: v1\nkind: Node\nmetadata: {name: node1}\nstatus:\n"
                         "  allocatable: {cpu: %s, memory: 1Gi}\n",
                         cases[i].cpu);
                struct se_store *s = se_store_new();
                char msg[600] = "";
                assert_int_equal(load(s, text, msg, sizeof(msg)), 0);
                const struct se_node *n = se_node_of(se_store_get(s, SE_KIND_NODE, "", "node1"));
                assert_non_null(n);
                assert_string_equal(n->allocatable_cpu, cases[i].text);
                assert_int_equal(n->allocatable_cpu_nanos, cases[i].nanos);
                se_store_free(s);
        }
        struct se_store *s = se_store_new();
        assert_int_equal(load(s, "apiVersion: v1\nkind: Node\nmetadata: {name: node1}\n", NULL, 0),
                         0);
        const struct se_node *n = se_node_of(se_store_get(s, SE_KIND_NODE, "", "node1"));
        assert_null(n->allocatable_cpu);
        assert_int_equal(n->allocatable_cpu_nanos, 0);
        se_store_free(s);
}

static void test_manifest__json_errors_have_lines(void **state)
{
        (void)state;
        struct se_store *s = se_store_new();
        struct se_diag d;
        char msg[600];
        const char *bad_syntax =
                "{\"apiVersion\": \"v1\",\n \"kind\": \"Service\",\n \"metadata\": {]\n}";
        assert_int_equal(se_manifest_load_buffer(s, "x.json", bad_syntax, strlen(bad_syntax), NULL,
                                                 NULL, &d),
                         -EINVAL);
        se_diag_format(&d, msg, sizeof(msg));
        assert_string_equal(msg, "x.json:3: invalid JSON: string or '}' expected near ']'");
        const char *bad_value = "{\"apiVersion\": \"v1\", \"kind\": \"Service\",\n"
                                " \"metadata\": {\"name\": \"a\"},\n"
                                " \"spec\": {\"ports\": [\n"
                                "   {\"port\": -1}]}}";
        assert_int_equal(
                se_manifest_load_buffer(s, "x.json", bad_value, strlen(bad_value), NULL, NULL, &d),
                -EINVAL);
        se_diag_format(&d, msg, sizeof(msg));
        assert_string_equal(
                msg,
                "x.json:4: Service default/a: spec.ports[0].port: invalid port -1: must be between 1 and 65535, inclusive");
        se_store_free(s);
}

/* A List in a List is flattened, as kubectl's resource builder does (a
 * bounded depth); a JSON object with a key twice is refused (kubectl's
 * strict field validation refuses duplicate fields; YAML's are refused too). */
static void test_manifest__nested_lists_and_duplicate_json_keys(void **state)
{
        (void)state;
        struct se_store *s = se_store_new();
        char msg[600] = "";
        const char *nested = "apiVersion: v1\nkind: List\nitems:\n"
                             "- apiVersion: v1\n  kind: List\n  items:\n"
                             "  - {apiVersion: v1, kind: Namespace, metadata: {name: inner}}\n"
                             "  - kind: ServiceList\n    apiVersion: v1\n    items:\n"
                             "    - metadata: {name: svc, namespace: inner}\n"
                             "- {apiVersion: v1, kind: Namespace, metadata: {name: outer}}\n";
        if (load(s, nested, msg, sizeof(msg)) != 0)
                fail_msg("%s", msg);
        assert_non_null(se_store_get(s, SE_KIND_NAMESPACE, "", "inner"));
        assert_non_null(se_store_get(s, SE_KIND_NAMESPACE, "", "outer"));
        assert_non_null(se_store_get(s, SE_KIND_SERVICE, "inner", "svc"));
        char deep[1024] = "";
        for (int i = 0; i < 9; i++)
                strcat(deep, "{\"kind\":\"List\",\"items\":[");
        strcat(deep, "{}");
        for (int i = 0; i < 9; i++)
                strcat(deep, "]}");
        struct se_diag d;
        assert_int_equal(se_manifest_load_buffer(s, "x.json", deep, strlen(deep), NULL, NULL, &d),
                         -EINVAL);
        se_diag_format(&d, msg, sizeof(msg));
        assert_string_equal(msg, "x.json:1: items[0]: Lists nested deeper than 8");
        const char *dup = "{\"apiVersion\": \"v1\", \"kind\": \"Namespace\",\n"
                          " \"metadata\": {\"name\": \"a\", \"name\": \"b\"}}";
        assert_int_equal(se_manifest_load_buffer(s, "x.json", dup, strlen(dup), NULL, NULL, &d),
                         -EINVAL);
        se_diag_format(&d, msg, sizeof(msg));
        assert_string_equal(msg, "x.json:2: invalid JSON: duplicate object key near '\"name\"'");
        assert_null(se_store_get(s, SE_KIND_NAMESPACE, "", "b"));
        se_store_free(s);
}

static void test_manifest__failed_load_keeps_existing_objects(void **state)
{
        (void)state;
        struct se_store *s = se_store_new();
        assert_int_equal(load(s, SVC_HEAD, NULL, 0), 0);
        char msg[600];
        /* a good object followed by a bad one: neither is added */
        assert_int_equal(
                load(s,
                     "apiVersion: v1\nkind: Service\nmetadata: {name: other}\n---\n" SVC_HEAD
                     "spec: {type: X}\n",
                     msg, sizeof(msg)),
                -EINVAL);
        assert_int_equal(se_store_count(s, SE_KIND_SERVICE, NULL), 1);
        assert_non_null(se_store_get(s, SE_KIND_SERVICE, "default", "web"));
        /* loading the same object again is refused, and the first stays */
        assert_int_equal(load(s, SVC_HEAD, msg, sizeof(msg)), -EEXIST);
        assert_int_equal(se_store_count(s, SE_KIND_SERVICE, NULL), 1);
        se_store_free(s);
}

static void test_manifest__alias_bomb_and_depth_are_capped(void **state)
{
        (void)state;
        struct se_store *s = se_store_new();
        char msg[600];
        const char *bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
                           "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                           "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
                           "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                           "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
                           "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
                           "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
                           "h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]\n";
        assert_int_equal(load(s, bomb, msg, sizeof(msg)), -EINVAL);
        assert_non_null(strstr(msg, "too many nodes"));
        char deep[400] = "";
        for (int i = 0; i < 100; i++)
                strcat(deep, "- ");
        strcat(deep, "x\n");
        assert_int_equal(load(s, deep, msg, sizeof(msg)), -EINVAL);
        assert_non_null(strstr(msg, "deeper than 64"));
        se_store_free(s);
}

/* A JSON Service with n ports p0..p{n-1} on ports 1..n, the last one a copy
 * of port 1 (name and number) when dup. */
static char *many_ports(unsigned n, int dup)
{
        size_t cap = 100 + (size_t)n * 48, o = 0;
        char *t = malloc(cap);
        if (!t)
                _exit(9);
        o += (size_t)snprintf(t, cap,
                              "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":"
                              "\"big\"},\"spec\":{\"ports\":[");
        for (unsigned i = 0; i < n; i++) {
                unsigned k = dup && i == n - 1 ? 0 : i;
                o += (size_t)snprintf(t + o, cap - o, "%s{\"name\":\"p%u\",\"port\":%u}",
                                      i ? "," : "", k, k + 1);
        }
        snprintf(t + o, cap - o, "]}}");
        return t;
}

/* A JSON Pod with n init containers and n containers, all named apart but
 * the last, which repeats the first init container's name when dup. */
static char *many_containers(unsigned n, int dup)
{
        size_t cap = 200 + (size_t)n * 40, o = 0;
        char *t = malloc(cap);
        if (!t)
                _exit(9);
        o += (size_t)snprintf(t, cap,
                              "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":"
                              "\"p\"},\"spec\":{\"initContainers\":[");
        for (unsigned i = 0; i < n; i++)
                o += (size_t)snprintf(t + o, cap - o, "%s{\"name\":\"i%u\"}", i ? "," : "", i);
        o += (size_t)snprintf(t + o, cap - o, "],\"containers\":[");
        for (unsigned i = 0; i < n; i++)
                o += (size_t)snprintf(t + o, cap - o, "%s{\"name\":\"%c%u\"}", i ? "," : "",
                                      dup && i == n - 1 ? 'i' : 'c', dup && i == n - 1 ? 0 : i);
        snprintf(t + o, cap - o, "]}}");
        return t;
}

static int load_json(const char *text, char *msg, size_t msg_size)
{
        struct se_store *s = se_store_new();
        struct se_diag d;
        int r = se_manifest_load_buffer(s, "x.json", text, strlen(text), NULL, NULL, &d);
        if (r < 0)
                se_diag_format(&d, msg, msg_size);
        se_store_free(s);
        return r;
}

/* In the child: 0, or the number of the check that failed (no cmocka
 * assertions there: they would unwind into the parent's runner). */
static int big_decodes(void)
{
        char msg[600] = "";
        char *t = many_ports(65535, 0);
        if (load_json(t, msg, sizeof(msg)) != 0)
                return 1;
        free(t);
        t = many_ports(65535, 1);
        if (load_json(t, msg, sizeof(msg)) != -EINVAL ||
            !strstr(msg, "spec.ports[65534].name: Duplicate value: \"p0\""))
                return 2;
        free(t);
        t = many_containers(20000, 0);
        if (load_json(t, msg, sizeof(msg)) != 0)
                return 3;
        free(t);
        t = many_containers(20000, 1);
        if (load_json(t, msg, sizeof(msg)) != -EINVAL ||
            !strstr(msg, "spec.containers[19999].name: Duplicate value: \"i0\""))
                return 4;
        free(t);
        return 0;
}

/* The API server takes a 65,535-port Service (it has no cap), so the
 * duplicate checks must be linear. Budget: CPU seconds for the child, far
 * above what linear checks need (about 1 s here); the pairwise checks took
 * 41 s of CPU for the ports alone. None under valgrind (VALGRIND=1). */
static void test_manifest__many_ports_and_containers_checked_linearly(void **state)
{
        (void)state;
        t_run_with_cpu_budget(big_decodes, 30);
}

static void test_manifest__folders_and_missing_files(void **state)
{
        (void)state;
        char dir[] = "/tmp/svcenv-test-XXXXXX";
        assert_non_null(mkdtemp(dir));
        char path[256];
        snprintf(path, sizeof(path), "%s/b.yaml", dir);
        FILE *f = fopen(path, "w");
        fputs(SVC_HEAD, f);
        fclose(f);
        snprintf(path, sizeof(path), "%s/a.json", dir);
        f = fopen(path, "w");
        fputs("{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"n\"}}", f);
        fclose(f);
        snprintf(path, sizeof(path), "%s/notes.txt", dir);
        f = fopen(path, "w");
        fputs("not a manifest", f);
        fclose(f);
        struct se_store *s = se_store_new();
        const char *paths[] = { dir };
        struct se_diag d;
        struct se_manifest_stats st;
        assert_int_equal(se_manifest_load(s, paths, 1, NULL, &st, &d), 0);
        assert_int_equal(st.objects, 2);
        const char *missing[] = { "/nonexistent/x.yaml" };
        assert_int_equal(se_manifest_load(s, missing, 1, NULL, NULL, &d), -ENOENT);
        char msg[600];
        se_diag_format(&d, msg, sizeof(msg));
        assert_string_equal(msg, "/nonexistent/x.yaml: cannot open: No such file or directory");
        se_store_free(s);
        snprintf(path, sizeof(path), "%s/b.yaml", dir);
        unlink(path);
        snprintf(path, sizeof(path), "%s/a.json", dir);
        unlink(path);
        snprintf(path, sizeof(path), "%s/notes.txt", dir);
        unlink(path);
        rmdir(dir);
}

/* A daemon's files load as its informers decode: only the kinds it asks
 * for (the others unread, so a malformed one is no error), in the decode
 * forms it asks for. */
static void test_manifest__opts_pick_kinds_and_forms(void **state)
{
        (void)state;
        char path[] = "/tmp/svcenv-manifest-opts-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        static const char text[] =
                "apiVersion: v1\nkind: Service\n"
                "metadata: {name: web, namespace: shop, labels: {app: web}}\n"
                "spec: {selector: {app: web}, ports: [{port: 80}]}\n"
                "---\n"
                "apiVersion: v1\nkind: Pod\nmetadata: {name: broken, namespace: shop}\n"
                "spec: {containers: 7}\n"
                "---\n"
                "apiVersion: v1\nkind: List\nitems:\n"
                "- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: c, namespace: shop}\n"
                "  data: 7\n";
        assert_int_equal(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
        close(fd);
        const char *paths[] = { path };

        struct se_store *s = se_store_new();
        struct se_manifest_opts o = { .decode_flags = SE_DECODE_DNS_SERVICES,
                                      .kinds = UINT32_C(1) << SE_KIND_SERVICE };
        struct se_manifest_stats st = { 0 };
        struct se_diag d = { 0 };
        assert_int_equal(se_manifest_load_opts(s, paths, 1, &o, &st, &d), 0);
        assert_int_equal(st.objects, 1);
        assert_int_equal(st.skipped, 2);
        const struct se_service *svc =
                (const struct se_service *)se_store_get(s, SE_KIND_SERVICE, "shop", "web");
        assert_non_null(svc);
        /* the DNS form: neither the selector nor the labels are kept */
        assert_int_equal(svc->selector.n, 0);
        assert_int_equal(svc->obj.meta.labels.n, 0);
        assert_int_equal(svc->n_ports, 1);
        assert_int_equal(se_store_count(s, SE_KIND_POD, NULL), 0);
        se_store_free(s);

        /* without opts every kind is read: the malformed Pod fails the load */
        s = se_store_new();
        assert_int_equal(se_manifest_load_opts(s, paths, 1, NULL, NULL, &d), -EINVAL);
        assert_int_equal(se_store_count(s, SE_KIND_SERVICE, NULL), 0);
        se_store_free(s);
        unlink(path);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_manifest__every_kind_decodes),
                cmocka_unit_test(test_manifest__lists_anchors_merge_and_json),
                cmocka_unit_test(test_manifest__invalid_input_names_line_and_field),
                cmocka_unit_test(test_manifest__node_allocatable_cpu),
                cmocka_unit_test(test_manifest__json_errors_have_lines),
                cmocka_unit_test(test_manifest__nested_lists_and_duplicate_json_keys),
                cmocka_unit_test(test_manifest__failed_load_keeps_existing_objects),
                cmocka_unit_test(test_manifest__alias_bomb_and_depth_are_capped),
                cmocka_unit_test(test_manifest__folders_and_missing_files),
                cmocka_unit_test(test_manifest__many_ports_and_containers_checked_linearly),
                cmocka_unit_test(test_manifest__opts_pick_kinds_and_forms),
        };
        return cmocka_run_group_tests_name("manifest", tests, NULL, NULL);
}

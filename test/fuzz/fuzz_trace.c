/* Fuzz target: svcenv trace's --from and --to ("IP[:PORT]\nIP:PORT[/PROTO]")
 * walked through a fixed cluster in both modes. Checks that a DNAT has
 * endpoints whose probabilities sum to 1 and that both printers succeed. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/manifest.h>
#include <svcenv/proxy.h>
#include <svcenv/proxy_trace.h>
#include <svcenv/store.h>

#include "fuzz.h"

static const char cluster[] =
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
        "status: {addresses: [{type: InternalIP, address: 10.0.0.1},"
        " {type: InternalIP, address: \"fd00::1\"}]}\n"
        "---\napiVersion: v1\nkind: Service\nmetadata: {name: lb, namespace: a}\n"
        "spec: {type: LoadBalancer, clusterIP: 10.96.0.1, clusterIPs: [10.96.0.1, \"fd96::1\"],"
        " ipFamilies: [IPv4, IPv6], externalIPs: [192.0.2.1], externalTrafficPolicy: Local,"
        " sessionAffinity: ClientIP, loadBalancerSourceRanges: [203.0.113.0/24],"
        " ports: [{name: p, port: 80, nodePort: 30080}, {name: u, port: 53, protocol: UDP}]}\n"
        "status: {loadBalancer: {ingress: [{ip: 198.51.100.1}]}}\n"
        "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: lb-1, namespace: a, labels: {kubernetes.io/service-name: lb}}\n"
        "addressType: IPv4\nports: [{name: p, port: 8080}, {name: u, port: 53, protocol: UDP}]\n"
        "endpoints: [{addresses: [10.244.0.2], nodeName: n1}, {addresses: [10.244.1.2]},"
        " {addresses: [10.244.1.3], conditions: {ready: false, serving: true, terminating: true}}]\n"
        "---\napiVersion: v1\nkind: Service\nmetadata: {name: empty, namespace: a}\n"
        "spec: {clusterIP: 10.96.0.2, internalTrafficPolicy: Local, ports: [{port: 80}]}\n"
        /* the in-kernel schedulers of nftables: jhash with and without the port */
        "---\napiVersion: v1\nkind: Service\nmetadata: {name: sh, namespace: a, annotations: "
        "{svcenv.io/scheduler: 'sh,port'}}\n"
        "spec: {clusterIP: 10.96.0.3, ports: [{name: p, port: 80}]}\n"
        "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: sh-1, namespace: a, labels: {kubernetes.io/service-name: sh}}\n"
        "addressType: IPv4\nports: [{name: p, port: 8080}]\n"
        "endpoints: [{addresses: [10.244.0.2]}, {addresses: [10.244.1.2]}]\n"
        "---\napiVersion: v1\nkind: Service\nmetadata: {name: mh, namespace: a, annotations: "
        "{svcenv.io/scheduler: mh}}\n"
        "spec: {clusterIP: 10.96.0.4, sessionAffinity: ClientIP, ports: [{name: p, port: 80}]}\n"
        "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: mh-1, namespace: a, labels: {kubernetes.io/service-name: mh}}\n"
        "addressType: IPv4\nports: [{name: p, port: 8080}]\n"
        "endpoints: [{addresses: [10.244.0.2]}, {addresses: [10.244.1.2]}, {addresses: "
        "[10.244.1.3]}]\n"
        "---\napiVersion: v1\nkind: Service\nmetadata: {name: rr, namespace: a, annotations: "
        "{svcenv.io/scheduler: rr}}\n"
        "spec: {clusterIP: 10.96.0.5, ports: [{name: p, port: 80}]}\n"
        "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: rr-1, namespace: a, labels: {kubernetes.io/service-name: rr}}\n"
        "addressType: IPv4\nports: [{name: p, port: 8080}]\n"
        "endpoints: [{addresses: [10.244.0.2]}, {addresses: [10.244.1.2]}]\n";

static struct se_store *store;
static struct se_proxy_options opt;
static struct se_proxy_table *tables[2];

static void setup(void)
{
        struct se_diag d = { 0 };
        store = se_store_new();
        if (!store || se_manifest_load_buffer(store, "cluster.yaml", cluster, strlen(cluster),
                                              "default", NULL, &d) < 0)
                abort();
        se_proxy_options_init(&opt);
        opt.node_name = "n1";
        se_parse_ip("10.0.0.1", &opt.node_ips[0]);
        se_parse_ip("fd00::1", &opt.node_ips[1]);
        opt.n_node_ips = 2;
        se_parse_cidr("10.244.0.0/16", &opt.cluster_cidrs[0]);
        opt.n_cluster_cidrs = 1;
        if (se_proxy_table_build(store, &opt, SE_IPV4, &tables[0]) < 0 ||
            se_proxy_table_build(store, &opt, SE_IPV6, &tables[1]) < 0)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (!store)
                setup();
        char *s = malloc(size + 1);
        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = 0;
        char *nl = strchr(s, '\n');
        struct se_proxy_trace_query q = { .port = 0 };
        struct se_diag d = { 0 };
        if (!nl)
                goto out;
        *nl = 0;
        if (se_proxy_trace_parse_target(nl + 1, &q, &d) < 0 ||
            se_proxy_trace_parse_source(s, &q, &d) < 0)
                goto out;
        if (q.port < 1 || q.port > 65535 || q.from_port < 0 || q.from_port > 65535)
                abort();
        se_proxy_trace_locality(&q, &opt);
        for (int mode = 0; mode < 2; mode++) {
                struct se_proxy_trace tr;
                const struct se_proxy_table *t = tables[q.to.family == SE_IPV6];
                int r = se_proxy_trace_run(
                        t, &opt, mode ? SE_PROXY_TRACE_NFTABLES : SE_PROXY_TRACE_IPTABLES, &q, &tr);
                if (r == -EINVAL && q.from.family != q.to.family)
                        continue;
                if (r < 0)
                        abort();
                double sum = 0;
                for (uint32_t i = 0; i < tr.n_endpoints; i++)
                        sum += tr.endpoints[i].probability;
                if (tr.verdict == SE_PROXY_TRACE_DNAT &&
                    (tr.n_endpoints == 0 || fabs(sum - 1) > 1e-9))
                        abort();
                if (tr.verdict != SE_PROXY_TRACE_DNAT && tr.n_endpoints)
                        abort();
                struct se_strbuf sb;
                se_strbuf_init(&sb, 0);
                if (se_proxy_trace_text(&tr, &q, &sb) < 0 || se_proxy_trace_json(&tr, &q, &sb) < 0)
                        abort();
                se_strbuf_release(&sb);
                se_proxy_trace_release(&tr);
        }
out:
        free(s);
        return 0;
}

/* Fuzz target: arbitrary bytes as a DNS query to a small cluster zone (over
 * UDP and TCP), and through every wire helper as a response. Checks the
 * invariants the daemon relies on: a reply fits the buffer and the client's
 * size, helpers never grow a message. */
#include <stdlib.h>
#include <string.h>

#include <svcenv/dns.h>
#include <svcenv/manifest.h>
#include <svcenv/store.h>

#include "fuzz.h"

static const char cluster[] =
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: default}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: kubernetes, namespace: default}\n"
        "spec: {clusterIP: 10.96.0.1, clusterIPs: [10.96.0.1, 'fd00::1'], ports: [{name: https, port: 443}]}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: ext, namespace: default}\n"
        "spec: {type: ExternalName, externalName: kubernetes.default.svc.cluster.local}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: h, namespace: default}\n"
        "spec: {clusterIP: None}\n---\n"
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: h, namespace: default, labels: {kubernetes.io/service-name: h}}\n"
        "addressType: IPv4\nports: [{name: p, port: 1, protocol: UDP}]\n"
        "endpoints: [{addresses: [10.0.0.1], hostname: a}, {addresses: [10.0.0.2]},"
        " {addresses: [10.0.0.3]}, {addresses: [10.0.0.4]}, {addresses: [10.0.0.5]}]\n";

static struct se_dns_zone *zone(void)
{
        static struct se_dns_zone *z;
        if (z)
                return z;
        struct se_store *s = se_store_new();
        struct se_diag d;
        struct se_dns_options o = { .ttl = 5, .pods = SE_DNS_PODS_INSECURE };
        if (!s ||
            se_manifest_load_buffer(s, "fuzz", cluster, sizeof(cluster) - 1, NULL, NULL, &d) < 0 ||
            se_dns_zone_build(s, &o, &z, &d) < 0)
                abort();
        se_store_free(s);
        return z;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static uint8_t out[SE_DNS_MAX_MSG], copy[SE_DNS_MAX_MSG];
        if (size > SE_DNS_MAX_MSG)
                return 0;
        for (int tr = 0; tr < 2; tr++) {
                struct se_dns_client c = { .transport = tr ? SE_DNS_TCP : SE_DNS_UDP };
                size_t cap = tr ? sizeof(out) : 512 + (size_t)(size ? data[0] : 0) * 4, outlen = 1;
                enum se_dns_verdict v = se_dns_answer(zone(), &c, data, size, out, cap, &outlen);
                if (v != SE_DNS_REPLY && outlen != 0)
                        abort();
                if (v == SE_DNS_REPLY &&
                    (outlen < 12 || outlen > cap || (!tr && outlen > se_dns_udp_size(data, size))))
                        abort();
                if (v == SE_DNS_REPLY && memcmp(out, data, 2) != 0)
                        abort();
        }
        char name[1024];
        uint16_t type, klass;
        uint32_t ttl;
        (void)se_dns_question(data, size, name, sizeof(name), &type, &klass);
        (void)se_dns_min_ttl(data, size, &ttl);
        memcpy(copy, data, size);
        (void)se_dns_age_ttls(copy, size, 17);
        memcpy(copy, data, size);
        const struct se_dns_ttl_bounds b = {
                .min = 5, .max = 30, .min_neg = 5, .max_neg = 30, .fail = 5
        };
        (void)se_dns_cache_ttls(copy, size, &b);
        memcpy(copy, data, size);
        size_t max = size ? (size_t)data[size - 1] * 3 : 0;
        if (se_dns_truncate(copy, size, max) > (size > max ? max : size))
                abort();
        (void)se_dns_error_reply(data, size, 2, out, sizeof(out));
        return 0;
}

/* Slim Endpoints benchmark: 10,000 Endpoints of 15 addresses each (as the
 * API server returns them: nodeName, targetRef with resourceVersion)
 * decoded full and slim (SE_DECODE_SLIM_ENDPOINTS, the controller's cache).
 * Prints bytes per object, decode time, and the digest's cost per object
 * (what the planner adds to each no-op sync).
 *
 * Usage: bench_slim_endpoints [OBJECTS [ADDRESSES]] */
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include <svcenv/decode.h>
#include <svcenv/model.h>
#include <svcenv/timeutil.h>

static json_t *gen(int i, int n_addr)
{
        char name[64], uid[64];
        snprintf(name, sizeof(name), "app-%d", i);
        snprintf(uid, sizeof(uid), "0b5d7e0c-0000-4000-8000-%012d", i);
        json_t *addrs = json_array();
        for (int k = 0; k < n_addr; k++) {
                char ip[32], pod[96], puid[64];
                int p = i * n_addr + k;
                snprintf(ip, sizeof(ip), "10.%d.%d.%d", 64 + p / 65536, p / 256 % 256, p % 256);
                snprintf(pod, sizeof(pod), "app-%d-7c8d9f-%05d", i, k);
                snprintf(puid, sizeof(puid), "3f1c0000-0000-4000-8000-%012d", p);
                json_array_append_new(addrs, json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:s,s:s}}", "ip",
                                                       ip, "nodeName", k % 2 ? "node-1" : "node-2",
                                                       "targetRef", "kind", "Pod", "namespace",
                                                       "ns-1", "name", pod, "uid", puid,
                                                       "resourceVersion", "123456"));
        }
        return json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:s,s:s,s:{s:s,s:s},s:{s:s}},s:[{s:o,s:[{s:s,"
                         "s:i,s:s},{s:s,s:i,s:s}]}]}",
                         "apiVersion", "v1", "kind", "Endpoints", "metadata", "name", name,
                         "namespace", "ns-1", "uid", uid, "resourceVersion", "123457",
                         "creationTimestamp", "2026-11-30T08:00:00Z", "labels", "app", name,
                         "endpoints.kubernetes.io/managed-by", "endpoint-controller", "annotations",
                         "endpoints.kubernetes.io/last-change-trigger-time", "2026-11-30T08:00:01Z",
                         "subsets", "addresses", addrs, "ports", "name", "http", "port", 8080,
                         "protocol", "TCP", "name", "metrics", "port", 9090, "protocol", "TCP");
}

static int run(json_t **docs, int n, unsigned flags, struct se_object **objs, size_t *bytes,
               double *ms)
{
        uint64_t t0 = se_now_mono_ns();
        *bytes = 0;
        for (int i = 0; i < n; i++) {
                struct se_decode_error e;
                if (se_decode_object_flags(docs[i], SE_KIND_ENDPOINTS, NULL, flags, &objs[i], &e) !=
                    0) {
                        fprintf(stderr, "decode: %s: %s\n", e.path, e.message);
                        return -1;
                }
                *bytes += se_object_memory(objs[i]);
        }
        *ms = (double)(se_now_mono_ns() - t0) / 1e6;
        return 0;
}

int main(int argc, char **argv)
{
        int n = argc > 1 ? atoi(argv[1]) : 10000;
        int n_addr = argc > 2 ? atoi(argv[2]) : 15;
        if (n < 1 || n_addr < 1)
                return 2;
        json_t **docs = calloc((size_t)n, sizeof(*docs));
        struct se_object **full = calloc((size_t)n, sizeof(*full));
        struct se_object **slim = calloc((size_t)n, sizeof(*slim));
        if (!docs || !full || !slim)
                return 1;
        for (int i = 0; i < n; i++)
                docs[i] = gen(i, n_addr);
        size_t bf, bs;
        double tf, ts;
        if (run(docs, n, 0, full, &bf, &tf) < 0 ||
            run(docs, n, SE_DECODE_SLIM_ENDPOINTS, slim, &bs, &ts) < 0)
                return 1;
        uint64_t t0 = se_now_mono_ns();
        uint8_t d[SE_ENDPOINTS_DIGEST_LEN];
        for (int i = 0; i < n; i++)
                if (se_endpoints_digest(se_endpoints_of(full[i]), d) < 0)
                        return 1;
        double td = (double)(se_now_mono_ns() - t0) / 1e6;
        printf("bench_slim_endpoints: %d Endpoints x %d addresses\n", n, n_addr);
        printf("  full: %zu bytes/object (%.1f MB), decode %.1f us/object\n", bf / (size_t)n,
               (double)bf / 1e6, tf * 1e3 / n);
        printf("  slim: %zu bytes/object (%.1f MB), decode %.1f us/object\n", bs / (size_t)n,
               (double)bs / 1e6, ts * 1e3 / n);
        printf("  digest of a full object: %.2f us\n", td * 1e3 / n);
        for (int i = 0; i < n; i++) {
                se_object_unref(full[i]);
                se_object_unref(slim[i]);
                json_decref(docs[i]);
        }
        free(docs);
        free(full);
        free(slim);
        return 0;
}

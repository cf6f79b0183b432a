/* pkg/kube benchmarks.
 *
 *   bench_kube [EVENTS]            watch-event decode throughput: pod events as the
 *                                  API server streams them (managedFields included),
 *                                  cut into 16 KiB chunks, through the line splitter,
 *                                  the event parser, the model decoder and the store.
 *   bench_kube --create DIR N [S]  creates N pods (names from index S) in namespace "bench" on the
 * control plane of test/k8s DIR (8 threads), prints the time. bench_kube --list DIR          lists
 * every pod (limit 500 pages) into a store: time and peak RSS of this process. Prints figures;
 * asserts nothing. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <svcenv/decode.h>
#include <svcenv/kube.h>
#include <svcenv/kube_client.h>
#include <svcenv/kube_watch.h>
#include <svcenv/store.h>
#include <svcenv/strbuf.h>
#include <svcenv/timeutil.h>

static void gen_pod(struct se_strbuf *sb, int i, const char *wrap_type)
{
        int app = i % 1000;
        if (wrap_type)
                se_strbuf_printf(sb, "{\"type\":\"%s\",\"object\":", wrap_type);
        se_strbuf_printf(
                sb,
                "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"app-%d-7c8d9f-%06d\","
                "\"generateName\":\"app-%d-7c8d9f-\",\"namespace\":\"bench\","
                "\"uid\":\"3f1c%04x-0000-4000-8000-%012d\",\"resourceVersion\":\"%d\","
                "\"creationTimestamp\":\"2026-11-30T08:00:00Z\","
                "\"labels\":{\"app\":\"app-%d\",\"pod-template-hash\":\"7c8d9f\"},"
                "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\","
                "\"name\":\"app-%d-7c8d9f\",\"uid\":\"9a8b7c6d-0000-4000-8000-%012d\","
                "\"controller\":true,\"blockOwnerDeletion\":true}],"
                "\"managedFields\":[{\"manager\":\"kube-controller-manager\",\"operation\":\"Update\","
                "\"apiVersion\":\"v1\",\"time\":\"2026-11-30T08:00:00Z\",\"fieldsType\":\"FieldsV1\","
                "\"fieldsV1\":{\"f:metadata\":{\"f:generateName\":{},\"f:labels\":{\".\":{},"
                "\"f:app\":{},\"f:pod-template-hash\":{}},\"f:ownerReferences\":{\".\":{},"
                "\"k:{\\\"uid\\\":\\\"9a8b7c6d\\\"}\":{}}},\"f:spec\":{\"f:containers\":{"
                "\"k:{\\\"name\\\":\\\"app\\\"}\":{\".\":{},\"f:image\":{},\"f:name\":{},"
                "\"f:ports\":{}}}}}},{\"manager\":\"kubelet\",\"operation\":\"Update\","
                "\"apiVersion\":\"v1\",\"time\":\"2026-11-30T08:00:02Z\",\"fieldsType\":\"FieldsV1\","
                "\"fieldsV1\":{\"f:status\":{\"f:conditions\":{},\"f:podIP\":{},\"f:podIPs\":{}}},"
                "\"subresource\":\"status\"}]},"
                "\"spec\":{\"volumes\":[{\"name\":\"kube-api-access\",\"projected\":{\"sources\":"
                "[{\"serviceAccountToken\":{\"expirationSeconds\":3607,\"path\":\"token\"}}]}}],"
                "\"containers\":[{\"name\":\"app\",\"image\":\"registry.example/app:1.%d\","
                "\"ports\":[{\"name\":\"http\",\"containerPort\":8080,\"protocol\":\"TCP\"}],"
                "\"env\":[{\"name\":\"LOG_LEVEL\",\"value\":\"info\"}],"
                "\"resources\":{\"requests\":{\"cpu\":\"100m\",\"memory\":\"128Mi\"}},"
                "\"terminationMessagePath\":\"/dev/termination-log\","
                "\"terminationMessagePolicy\":\"File\",\"imagePullPolicy\":\"IfNotPresent\"}],"
                "\"restartPolicy\":\"Always\",\"terminationGracePeriodSeconds\":30,"
                "\"dnsPolicy\":\"ClusterFirst\",\"serviceAccountName\":\"default\","
                "\"nodeName\":\"node-%d\",\"securityContext\":{},\"schedulerName\":\"default-scheduler\","
                "\"tolerations\":[{\"key\":\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\","
                "\"effect\":\"NoExecute\",\"tolerationSeconds\":300}],\"priority\":0,"
                "\"enableServiceLinks\":true,\"preemptionPolicy\":\"PreemptLowerPriority\"},"
                "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
                "\"lastProbeTime\":null,\"lastTransitionTime\":\"2026-11-30T08:00:02Z\"}],"
                "\"hostIP\":\"10.0.%d.%d\",\"podIP\":\"10.%d.%d.%d\",\"podIPs\":[{\"ip\":\"10.%d.%d.%d\"}],"
                "\"startTime\":\"2026-11-30T08:00:01Z\",\"qosClass\":\"Burstable\"}}",
                app, i, app, i & 0xffff, i, i, app, app, i, i % 7, i % 500, i / 250 % 250,
                i % 250 + 1, 64 + i / 65536, i / 256 % 256, i % 256, 64 + i / 65536, i / 256 % 256,
                i % 256);
        if (wrap_type)
                se_strbuf_puts(sb, "}");
        se_strbuf_putc(sb, '\n');
}

static long peak_rss_kb(void)
{
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        return ru.ru_maxrss;
}

struct sink {
        struct se_store *store;
        size_t events;
};

static int on_line(void *data, const char *line, size_t len)
{
        struct sink *s = data;
        enum se_kube_event_type t;
        json_t *doc;
        if (se_kube_event_parse(line, len, &t, &doc, NULL) < 0)
                return -1;
        struct se_object *obj;
        int r = se_decode_object_as(json_object_get(doc, "object"), SE_KIND_POD, NULL, &obj, NULL);
        json_decref(doc);
        if (r < 0)
                return r;
        s->events++;
        return se_store_put(s->store, obj);
}

static int bench_decode(int n)
{
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        for (int i = 0; i < n; i++)
                gen_pod(&sb, i, i % 3 ? "MODIFIED" : "ADDED");
        if (se_strbuf_failed(&sb))
                return 1;
        struct sink s = { se_store_new(), 0 };
        struct se_kube_lines l;
        se_kube_lines_init(&l, 0);
        uint64_t t0 = se_now_mono_ns();
        int r = 0;
        for (size_t off = 0; r == 0 && off < sb.len; off += 16384) {
                size_t k = sb.len - off < 16384 ? sb.len - off : 16384;
                r = se_kube_lines_feed(&l, sb.buf + off, k, on_line, &s);
        }
        double secs = (double)(se_now_mono_ns() - t0) / 1e9;
        printf("watch decode: %zu pod events (%.1f MB, %.0f bytes/event) in %.2f s: %.0f events/s, "
               "%.1f MB/s (r=%d)\n",
               s.events, (double)sb.len / 1e6, (double)sb.len / (double)n, secs,
               (double)s.events / secs, (double)sb.len / 1e6 / secs, r);
        printf("peak RSS %ld MB (includes the %.0f MB input buffer)\n", peak_rss_kb() / 1024,
               (double)sb.len / 1e6);
        se_kube_lines_release(&l);
        se_store_free(s.store);
        se_strbuf_release(&sb);
        return r != 0;
}

static struct se_kube_client *connect_dir(const char *dir)
{
        char path[1024];
        snprintf(path, sizeof(path), "%s/kubeconfig", dir);
        struct se_kube_config_opts o = { .kubeconfig = path };
        struct se_kube_config *cfg = NULL;
        struct se_kube_client *c = NULL;
        struct se_kube_client_opts co = { .qps = -1, .timeout_ms = 600000 };
        struct se_diag d;
        if (se_kube_config_load(&o, &cfg, &d) < 0 || se_kube_client_new(cfg, &co, &c, &d) < 0)
                fprintf(stderr, "bench_kube: %s\n", d.text);
        se_kube_config_free(cfg);
        return c;
}

struct creator {
        struct se_kube_client *c;
        int n;
        atomic_int next;
        atomic_int failed;
};

static void *create_loop(void *arg)
{
        struct creator *cr = arg;
        int i;
        while ((i = atomic_fetch_add(&cr->next, 1)) < cr->n) {
                char name[64];
                snprintf(name, sizeof(name), "p-%07d", i);
                json_t *pod =
                        json_pack("{s:s,s:s,s:{s:s,s:{s:s}},s:{s:s,s:[{s:s,s:s,s:[{s:s,s:i}]}]}}",
                                  "apiVersion", "v1", "kind", "Pod", "metadata", "name", name,
                                  "labels", "app", "bench", "spec", "nodeName", "node-1",
                                  "containers", "name", "app", "image", "registry.example/app:1",
                                  "ports", "name", "http", "containerPort", 8080);
                struct se_diag d;
                if (se_kube_create(cr->c, se_kube_resource_of(SE_KIND_POD), "bench", pod, NULL,
                                   &d) < 0 &&
                    atomic_fetch_add(&cr->failed, 1) == 0)
                        fprintf(stderr, "bench_kube: %s\n", d.text);
                json_decref(pod);
        }
        return NULL;
}

static int bench_create(const char *dir, int n, int start)
{
        struct creator cr = { connect_dir(dir), start + n, start, 0 };
        if (!cr.c)
                return 1;
        json_t *ns = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
                               "metadata", "name", "bench");
        (void)se_kube_create(cr.c, se_kube_resource_of(SE_KIND_NAMESPACE), NULL, ns, NULL, NULL);
        json_decref(ns);
        uint64_t t0 = se_now_mono_ns();
        pthread_t t[8];
        for (int i = 0; i < 8; i++)
                pthread_create(&t[i], NULL, create_loop, &cr);
        for (int i = 0; i < 8; i++)
                pthread_join(t[i], NULL);
        double secs = (double)(se_now_mono_ns() - t0) / 1e9;
        printf("created %d pods (%d failed) in %.1f s: %.0f pods/s\n", n, atomic_load(&cr.failed),
               secs, (double)n / secs);
        se_kube_client_free(cr.c);
        return 0;
}

static int put_item(void *data, struct se_object *obj)
{
        return se_store_put(data, obj);
}

static int bench_list(const char *dir)
{
        struct se_kube_client *c = connect_dir(dir);
        if (!c)
                return 1;
        struct se_store *s = se_store_new();
        long before = peak_rss_kb();
        uint64_t t0 = se_now_mono_ns();
        struct se_diag d;
        char rv[SE_KUBE_RV_MAX];
        int r = se_kube_list(c, SE_KIND_POD, NULL, NULL, put_item, s, rv, &d);
        double secs = (double)(se_now_mono_ns() - t0) / 1e9;
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                     (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
        printf("client CPU %.2f s\n", cpu);
        if (r < 0)
                fprintf(stderr, "bench_kube: %s\n", d.text);
        size_t n = se_store_count(s, SE_KIND_POD, NULL);
        printf("listed %zu pods (pages of 500) into the store in %.2f s: %.0f pods/s; peak RSS "
               "%ld MB (%ld MB before)\n",
               n, secs, (double)n / secs, peak_rss_kb() / 1024, before / 1024);
        se_store_free(s);
        se_kube_client_free(c);
        return r < 0;
}

int main(int argc, char **argv)
{
        if (argc >= 4 && strcmp(argv[1], "--create") == 0)
                return bench_create(argv[2], atoi(argv[3]), argc > 4 ? atoi(argv[4]) : 0);
        if (argc >= 3 && strcmp(argv[1], "--list") == 0)
                return bench_list(argv[2]);
        return bench_decode(argc > 1 ? atoi(argv[1]) : 100000);
}

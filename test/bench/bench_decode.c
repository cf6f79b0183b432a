/* Decode benchmark: a generated cluster of 150,000 pods and 10,000 services
 * as a JSON stream, loaded into the store. Prints throughput, peak RSS and
 * what the store keeps per pod beyond the bytes of its strings.
 *
 * Usage: bench_decode [PODS [SERVICES]] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <svcenv/manifest.h>
#include <svcenv/model.h>
#include <svcenv/store.h>
#include <svcenv/strbuf.h>
#include <svcenv/timeutil.h>

/* A pod shaped like a Deployment's pod as the API returns it (without
 * managedFields): labels, owner, one container with ports and env, status. */
static void gen_pod(struct se_strbuf *sb, int i)
{
        int ns = i % 50, app = i % 10000;
        se_strbuf_printf(
                sb,
                "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"app-%d-7c8d9f-%05d\","
                "\"generateName\":\"app-%d-7c8d9f-\",\"namespace\":\"ns-%d\","
                "\"uid\":\"3f1c%04x-0000-4000-8000-%012d\",\"resourceVersion\":\"%d\","
                "\"creationTimestamp\":\"2026-11-30T08:00:00Z\","
                "\"labels\":{\"app\":\"app-%d\",\"pod-template-hash\":\"7c8d9f\",\"tier\":\"backend\"},"
                "\"annotations\":{\"kubectl.kubernetes.io/restartedAt\":\"2026-11-29T10:00:00Z\"},"
                "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\","
                "\"name\":\"app-%d-7c8d9f\",\"uid\":\"9a8b7c6d-0000-4000-8000-%012d\","
                "\"controller\":true,\"blockOwnerDeletion\":true}]},"
                "\"spec\":{\"containers\":[{\"name\":\"app\",\"image\":\"registry.example/app:1.%d\","
                "\"ports\":[{\"name\":\"http\",\"containerPort\":8080,\"protocol\":\"TCP\"},"
                "{\"name\":\"metrics\",\"containerPort\":9090,\"protocol\":\"TCP\"}],"
                "\"env\":[{\"name\":\"LOG_LEVEL\",\"value\":\"info\"},{\"name\":\"POD_NAME\","
                "\"valueFrom\":{\"fieldRef\":{\"apiVersion\":\"v1\",\"fieldPath\":\"metadata.name\"}}}],"
                "\"resources\":{\"limits\":{\"memory\":\"256Mi\"},\"requests\":{\"cpu\":\"100m\","
                "\"memory\":\"128Mi\"}},\"terminationMessagePath\":\"/dev/termination-log\","
                "\"imagePullPolicy\":\"IfNotPresent\"}],\"restartPolicy\":\"Always\","
                "\"terminationGracePeriodSeconds\":30,\"dnsPolicy\":\"ClusterFirst\","
                "\"serviceAccountName\":\"default\",\"nodeName\":\"node-%d\","
                "\"schedulerName\":\"default-scheduler\"},"
                "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Initialized\","
                "\"status\":\"True\"},{\"type\":\"Ready\",\"status\":\"True\"},"
                "{\"type\":\"ContainersReady\",\"status\":\"True\"},{\"type\":\"PodScheduled\","
                "\"status\":\"True\"}],\"hostIP\":\"10.0.%d.%d\",\"hostIPs\":[{\"ip\":\"10.0.%d.%d\"}],"
                "\"podIP\":\"10.%d.%d.%d\",\"podIPs\":[{\"ip\":\"10.%d.%d.%d\"}],"
                "\"startTime\":\"2026-11-30T08:00:01Z\",\"qosClass\":\"Burstable\"}}\n",
                app, i, app, ns, i & 0xffff, i, i, app, app, i, i % 7, i % 500, i / 250 % 250,
                i % 250 + 1, i / 250 % 250, i % 250 + 1, 64 + i / 65536, i / 256 % 256, i % 256,
                64 + i / 65536, i / 256 % 256, i % 256);
}

static void gen_service(struct se_strbuf *sb, int i)
{
        se_strbuf_printf(
                sb,
                "{\"kind\":\"Service\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"app-%d\","
                "\"namespace\":\"ns-%d\",\"uid\":\"5e6f%04x-0000-4000-8000-%012d\","
                "\"labels\":{\"app\":\"app-%d\"}},\"spec\":{\"ports\":[{\"name\":\"http\","
                "\"protocol\":\"TCP\",\"port\":80,\"targetPort\":\"http\"},{\"name\":\"metrics\","
                "\"protocol\":\"TCP\",\"port\":9090,\"targetPort\":9090}],\"selector\":{\"app\":"
                "\"app-%d\"},\"clusterIP\":\"10.96.%d.%d\",\"clusterIPs\":[\"10.96.%d.%d\"],"
                "\"type\":\"ClusterIP\",\"sessionAffinity\":\"None\",\"ipFamilies\":[\"IPv4\"],"
                "\"ipFamilyPolicy\":\"SingleStack\",\"internalTrafficPolicy\":\"Cluster\"}}\n",
                i, i % 50, i & 0xffff, i, i, i, i / 256, i % 256, i / 256, i % 256);
}

static size_t strs_bytes(const struct se_strs *s)
{
        size_t n = s->n * sizeof(char *);
        for (uint32_t i = 0; i < s->n; i++)
                n += strlen(s->v[i]) + 1;
        return n;
}

static size_t str_bytes(const char *s)
{
        return s ? strlen(s) + 1 : 0;
}

static size_t kv_bytes(const struct se_kvlist *l)
{
        size_t n = 0;
        for (uint32_t i = 0; i < l->n; i++)
                n += str_bytes(l->items[i].key) + str_bytes(l->items[i].value);
        return n;
}

/* Bytes of a pod's strings (the text the store must keep whatever its design). */
static size_t pod_string_bytes(const struct se_pod *p)
{
        const struct se_meta *m = &p->obj.meta;
        size_t n = str_bytes(m->name) + str_bytes(se_meta_generate_name(m)) +
                   str_bytes(m->namespace) + str_bytes(m->uid) + str_bytes(m->resource_version) +
                   str_bytes(se_meta_creation_timestamp(m)) + kv_bytes(&m->labels) +
                   kv_bytes(&m->annotations) + str_bytes(p->node_name) + str_bytes(p->phase) +
                   str_bytes(p->pod_ip) + strs_bytes(&p->pod_ips);
        if (p->more)
                n += str_bytes(p->more->service_account_name) + str_bytes(p->more->host_ip) +
                     strs_bytes(&p->more->host_ips);
        for (uint32_t i = 0; i < se_meta_n_owner_refs(m); i++) {
                const struct se_owner_ref *o = se_meta_owner_ref(m, i);
                n += str_bytes(o->api_version) + str_bytes(o->kind) + str_bytes(o->name) +
                     str_bytes(o->uid);
        }
        for (uint32_t i = 0; i < p->n_conditions; i++)
                n += str_bytes(p->conditions[i].type) + str_bytes(p->conditions[i].status);
        for (uint32_t c = 0; c < p->n_containers; c++) {
                const struct se_container *k = &p->containers[c];
                n += str_bytes(k->name) + str_bytes(k->image) + kv_bytes(&k->limits) +
                     kv_bytes(&k->requests);
                for (uint32_t i = 0; i < k->n_ports; i++)
                        n += str_bytes(k->ports[i].name);
                for (uint32_t i = 0; i < k->n_env; i++)
                        n += str_bytes(k->env[i].name) + str_bytes(k->env[i].value) +
                             str_bytes(k->env[i].ref);
        }
        return n;
}

static long peak_rss_kb(void)
{
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        return ru.ru_maxrss;
}

int main(int argc, char **argv)
{
        int pods = argc > 1 ? atoi(argv[1]) : 150000;
        int services = argc > 2 ? atoi(argv[2]) : 10000;
        char path[] = "/tmp/svcenv-bench-XXXXXX.json";
        int fd = mkstemps(path, 5);
        if (fd < 0)
                return 1;
        FILE *f = fdopen(fd, "w");
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        size_t bytes = 0;
        for (int i = 0; i < services; i++) {
                gen_service(&sb, i);
                bytes += sb.len;
                fwrite(sb.buf, 1, sb.len, f);
                se_strbuf_reset(&sb);
        }
        for (int i = 0; i < pods; i++) {
                gen_pod(&sb, i);
                bytes += sb.len;
                fwrite(sb.buf, 1, sb.len, f);
                se_strbuf_reset(&sb);
        }
        se_strbuf_release(&sb);
        fclose(f);
        long rss_before = peak_rss_kb();

        struct se_store *store = se_store_new();
        struct se_diag diag;
        struct se_manifest_stats st;
        const char *paths[] = { path };
        uint64_t t0 = se_now_mono_ns();
        int r = se_manifest_load(store, paths, 1, NULL, &st, &diag);
        uint64_t t1 = se_now_mono_ns();
        if (!getenv("KEEP"))
                unlink(path);
        if (r < 0) {
                char msg[600];
                se_diag_format(&diag, msg, sizeof(msg));
                fprintf(stderr, "bench_decode: %s\n", msg);
                return 1;
        }
        double secs = (double)(t1 - t0) / 1e9;
        const struct se_object **objs;
        long n = se_store_list(store, SE_KIND_POD, NULL, &objs);
        size_t arena = 0, strings = 0;
        for (long i = 0; i < n; i++) {
                arena += se_object_memory(objs[i]);
                strings += pod_string_bytes(se_pod_of(objs[i]));
        }
        free(objs);
        printf("input: %d pods + %d services, %.1f MB of JSON (%.0f bytes/pod)\n", pods, services,
               (double)bytes / 1e6, (double)bytes / (pods + services));
        printf("decode+store: %.2f s, %.1f MB/s, %.0f objects/s\n", secs,
               (double)bytes / 1e6 / secs, (double)st.objects / secs);
        printf("peak RSS: %.1f MB (%.1f MB before loading)\n", (double)peak_rss_kb() / 1024,
               (double)rss_before / 1024);
        printf("store per pod: %.0f bytes in its arena, of which %.0f are string bytes; "
               "overhead beyond strings %.0f bytes/pod (+ ~%zu bytes of index)\n",
               (double)arena / (double)n, (double)strings / (double)n,
               (double)(arena - strings) / (double)n, (size_t)32);
        se_store_free(store);
        return 0;
}

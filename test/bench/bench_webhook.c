/* Benchmark: svcenv-webhook over TLS keep-alive on loopback, 100 services
 * in the pod's namespace. Starts build/bin/svcenv-webhook with a test CA
 * (manifests/gen-webhook-certs), then C closed-loop connections POST one
 * AdmissionReview after another for a few seconds. Prints admissions per
 * second and p50/p99/max latency per concurrency, and the in-process cost of
 * one admission for comparison. Reports figures; asserts nothing.
 *
 * Environment: SVCENV_BUILD (build dir, default "build"),
 * BENCH_SECONDS (per run, default 3). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <svcenv/admission.h>
#include <svcenv/manifest.h>
#include <svcenv/store.h>
#include <svcenv/strbuf.h>

#define N_SERVICES 100
#define MAX_LAT    4000000

extern char **environ;

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char *cluster_yaml(void)
{
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        se_strbuf_puts(&sb, "apiVersion: v1\nkind: Service\nmetadata: {name: kubernetes, "
                            "namespace: default}\nspec: {clusterIP: 10.96.0.1, ports: [{name: "
                            "https, port: 443}]}\n");
        for (int i = 0; i < N_SERVICES; i++)
                se_strbuf_printf(&sb,
                                 "---\napiVersion: v1\nkind: Service\nmetadata: {name: svc-%03d, "
                                 "namespace: bench}\nspec: {clusterIP: 10.97.%d.%d, ports: "
                                 "[{name: http, port: 80}]}\n",
                                 i, i / 250, i % 250 + 1);
        return sb.buf;
}

static const char review_env[] =
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
        "\"uid\":\"c2a1f3de-58a1-4b8e-9d7e-0f4e2a6b9c11\",\"kind\":{\"group\":\"\",\"version\":"
        "\"v1\",\"kind\":\"Pod\"},\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":"
        "\"pods\"},\"namespace\":\"bench\",\"operation\":\"CREATE\",\"userInfo\":{\"username\":"
        "\"system:serviceaccount:kube-system:replicaset-controller\"},\"object\":{\"apiVersion\":"
        "\"v1\",\"kind\":\"Pod\",\"metadata\":{\"generateName\":\"web-5c8d-\",\"labels\":{\"app\":"
        "\"web\"}},\"spec\":{\"containers\":[{\"name\":\"app\",\"image\":\"web:1.4\",\"env\":[{"
        "\"name\":\"MODE\",\"value\":\"prod\"}]}]}},\"oldObject\":null,\"dryRun\":false}}";

/* the same pod without env: one `add .../env` with the whole array */
static char *review_plain;
static const char *review = review_env;
static const char *review_name = "container with env (one op per variable)";

/* posix_spawn's argv is not const-correct */
static char *const *args(const char *const *v)
{
        union {
                const char *const *c;
                char *const *m;
        } u = { .c = v };
        return u.m;
}

static int run(const char *const argv[])
{
        pid_t pid;
        if (posix_spawn(&pid, argv[0], NULL, NULL, args(argv), environ) != 0)
                return -1;
        int st;
        waitpid(pid, &st, 0);
        return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

struct conn {
        SSL *ssl;
        int fd;
};

static SSL_CTX *client_ctx;
static int port;

static int conn_open(struct conn *c)
{
        c->fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(c->fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
                close(c->fd);
                return -1;
        }
        c->ssl = SSL_new(client_ctx);
        SSL_set_fd(c->ssl, c->fd);
        SSL_set1_host(c->ssl, "127.0.0.1");
        if (SSL_connect(c->ssl) != 1) {
                SSL_free(c->ssl);
                close(c->fd);
                return -1;
        }
        return 0;
}

static void conn_close(struct conn *c)
{
        SSL_shutdown(c->ssl);
        SSL_free(c->ssl);
        close(c->fd);
}

/* One request; returns the status code or -1. body: response kept in buf. */
static int request(struct conn *c, const char *method, const char *path, const char *body,
                   struct se_strbuf *buf)
{
        char head[512];
        size_t blen = body ? strlen(body) : 0;
        int n = snprintf(head, sizeof(head),
                         "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         "Content-Length: %zu\r\n\r\n",
                         method, path, blen);
        se_strbuf_reset(buf);
        se_strbuf_add(buf, head, (size_t)n);
        if (body)
                se_strbuf_add(buf, body, blen);
        if (SSL_write(c->ssl, buf->buf, (int)buf->len) != (int)buf->len)
                return -1;
        se_strbuf_reset(buf);
        char tmp[65536];
        size_t need = 0, hdr_end = 0;
        for (;;) {
                int r = SSL_read(c->ssl, tmp, sizeof(tmp));
                if (r <= 0)
                        return -1;
                se_strbuf_add(buf, tmp, (size_t)r);
                if (!hdr_end) {
                        char *e = strstr(buf->buf, "\r\n\r\n");
                        if (!e)
                                continue;
                        hdr_end = (size_t)(e - buf->buf) + 4;
                        char *cl = strcasestr(buf->buf, "content-length:");
                        need = cl && cl < e ? strtoul(cl + 15, NULL, 10) : 0;
                }
                if (buf->len >= hdr_end + need)
                        break;
        }
        return atoi(buf->buf + 9);
}

struct worker {
        pthread_t t;
        double until;
        double *lat;
        size_t n, cap;
        size_t errors;
};

static void *work(void *arg)
{
        struct worker *w = arg;
        struct conn c;
        struct se_strbuf buf;
        se_strbuf_init(&buf, 0);
        if (conn_open(&c) < 0) {
                w->errors++;
                return NULL;
        }
        while (now_s() < w->until && w->n < w->cap) {
                double t0 = now_s();
                int st = request(&c, "POST", "/mutate?timeout=10s", review, &buf);
                double dt = now_s() - t0;
                if (st != 200 || !strstr(buf.buf, "\"patch\"")) {
                        w->errors++;
                        break;
                }
                w->lat[w->n++] = dt;
        }
        conn_close(&c);
        se_strbuf_release(&buf);
        return NULL;
}

static int cmp_d(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

static void load(int conns, double seconds)
{
        struct worker w[64];
        double *all = malloc(sizeof(double) * MAX_LAT);
        size_t per = MAX_LAT / (size_t)conns, total = 0, errors = 0;
        double t0 = now_s();
        for (int i = 0; i < conns; i++) {
                w[i] = (struct worker){ .until = t0 + seconds,
                                        .lat = all + per * (size_t)i,
                                        .cap = per };
                pthread_create(&w[i].t, NULL, work, &w[i]);
        }
        for (int i = 0; i < conns; i++)
                pthread_join(w[i].t, NULL);
        double elapsed = now_s() - t0;
        double *lat = malloc(sizeof(double) * MAX_LAT);
        for (int i = 0; i < conns; i++) {
                memcpy(lat + total, w[i].lat, w[i].n * sizeof(double));
                total += w[i].n;
                errors += w[i].errors;
        }
        qsort(lat, total, sizeof(double), cmp_d);
        if (total)
                printf("webhook TLS keep-alive, %s, %2d connections: %6.0f admissions/s  "
                       "p50 %.3f ms  p99 %.3f ms  max %.3f ms  (%zu requests, %zu errors)\n",
                       review_name, conns, (double)total / elapsed, lat[total / 2] * 1e3,
                       lat[total * 99 / 100] * 1e3, lat[total - 1] * 1e3, total, errors);
        else
                printf("webhook, %d connections: no request succeeded (%zu errors)\n", conns,
                       errors);
        free(lat);
        free(all);
}

static void in_process(const char *yaml)
{
        struct se_store *s = se_store_new();
        struct se_diag d;
        if (se_manifest_load_buffer(s, "bench", yaml, strlen(yaml), NULL, NULL, &d) < 0)
                return;
        struct se_admission_result res;
        size_t n = 0, patch = 0;
        double t0 = now_s();
        while (now_s() - t0 < 1.0) {
                for (int i = 0; i < 100; i++) {
                        se_admission_review_store(s, NULL, review, strlen(review), &res);
                        patch = res.patch_bytes;
                        se_admission_result_release(&res);
                }
                n += 100;
        }
        double dt = now_s() - t0;
        printf("admission in process (no TLS/HTTP), %s: %.0f reviews/s, %.1f us each, patch %zu "
               "bytes, %d services in the namespace\n",
               review_name, (double)n / dt, dt / (double)n * 1e6, patch, N_SERVICES);
        se_store_free(s);
}

int main(void)
{
        const char *build = getenv("SVCENV_BUILD") ? getenv("SVCENV_BUILD") : "build";
        double seconds = getenv("BENCH_SECONDS") ? atof(getenv("BENCH_SECONDS")) : 3;
        char dir[] = "/tmp/svcenv-bench-wh.XXXXXX";
        if (!mkdtemp(dir))
                return 1;
        /* figures on a shared 2-core machine mean little without the load */
        FILE *la = fopen("/proc/loadavg", "r");
        char lbuf[64] = "?";
        if (la) {
                if (!fgets(lbuf, sizeof(lbuf), la))
                        snprintf(lbuf, sizeof(lbuf), "?\n");
                fclose(la);
        }
        printf("bench_webhook: %ld CPUs, load average %s", sysconf(_SC_NPROCESSORS_ONLN), lbuf);
        char *yaml = cluster_yaml();
        review_plain = strdup(review_env);
        char *env = strstr(review_plain, ",\"env\":[");
        char *end = strstr(env, "]}]}}");
        memmove(env, end + 1, strlen(end + 1) + 1);
        in_process(yaml);
        review = review_plain;
        review_name = "container without env (one op)";
        in_process(yaml);

        char path[512], pki[512], cert[600], key[600], ca[600], bin[512], portarg[32];
        snprintf(path, sizeof(path), "%s/cluster.yaml", dir);
        FILE *f = fopen(path, "w");
        fputs(yaml, f);
        fclose(f);
        snprintf(pki, sizeof(pki), "%s/pki", dir);
        const char *gen[] = { "manifests/gen-webhook-certs", pki, "--ip", "127.0.0.1", NULL };
        if (run(gen) < 0) {
                fprintf(stderr, "bench_webhook: gen-webhook-certs failed (run from the repo)\n");
                return 1;
        }
        snprintf(cert, sizeof(cert), "%s/tls.crt", pki);
        snprintf(key, sizeof(key), "%s/tls.key", pki);
        snprintf(ca, sizeof(ca), "%s/ca.crt", pki);
        snprintf(bin, sizeof(bin), "%s/bin/svcenv-webhook", build);
        srand((unsigned)getpid());
        port = 20000 + rand() % 20000;
        snprintf(portarg, sizeof(portarg), "%d", port);
        const char *argv[] = { bin,         "-f",
                               path,        "--address",
                               "127.0.0.1", "--port",
                               portarg,     "--tls-cert-file",
                               cert,        "--tls-private-key-file",
                               key,         NULL };
        pid_t pid;
        if (posix_spawn(&pid, bin, NULL, NULL, args(argv), environ) != 0) {
                fprintf(stderr, "bench_webhook: cannot start %s\n", bin);
                return 1;
        }
        client_ctx = SSL_CTX_new(TLS_client_method());
        SSL_CTX_load_verify_locations(client_ctx, ca, NULL);
        SSL_CTX_set_verify(client_ctx, SSL_VERIFY_PEER, NULL);
        struct conn c;
        struct se_strbuf buf;
        se_strbuf_init(&buf, 0);
        int up = 0;
        for (int i = 0; i < 100 && !up; i++) {
                if (conn_open(&c) == 0) {
                        up = request(&c, "GET", "/readyz", NULL, &buf) == 200;
                        conn_close(&c);
                }
                if (!up)
                        usleep(50000);
        }
        if (up) {
                int conc[] = { 1, 4, 16 };
                for (int k = 0; k < 2; k++) {
                        review = k ? review_env : review_plain;
                        review_name = k ? "with env" : "without env";
                        for (size_t i = 0; i < 3; i++)
                                load(conc[i], seconds);
                }
        } else {
                fprintf(stderr, "bench_webhook: the webhook did not come up\n");
        }
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
        se_strbuf_release(&buf);
        SSL_CTX_free(client_ctx);
        free(yaml);
        free(review_plain);
        const char *rm[] = { "/bin/rm", "-rf", dir, NULL };
        run(rm);
        return up ? 0 : 1;
}

/* svcenv-dns: the cluster DNS server, a drop-in for CoreDNS behind the
 * kube-dns Service. Wiring only: flags, the store and its feeders (informers
 * or manifests), the zone builder, workers, forwarders, HTTP, signals. The
 * answers come from pkg/dns (dns.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <svcenv/alloc.h>
#include <svcenv/decode.h>
#include <svcenv/dns.h>
#include <svcenv/dns_serve.h>
#include <svcenv/httpd.h>
#include <svcenv/kube.h>
#include <svcenv/kube_client.h>
#include <svcenv/kube_watch.h>
#include <svcenv/log.h>
#include <svcenv/manifest.h>
#include <svcenv/parse.h>
#include <svcenv/strv.h>
#include <svcenv/timeutil.h>

#include "dnsd.h"

static const char usage[] =
        "Usage: svcenv-dns [--kubeconfig FILE] [--master URL] [options]\n"
        "       svcenv-dns -f CLUSTER [options]\n"
        "\n"
        "Cluster DNS: answers the Kubernetes DNS-Based Service Discovery specification\n"
        "as CoreDNS 1.15's kubernetes plugin does (kubeadm's Corefile), and forwards the\n"
        "rest upstream with a cache. Watches Services, EndpointSlices and Namespaces\n"
        "(and Pods with --pods verified), or serves the manifests of -f.\n"
        "\n"
        "  -f FILE|DIR                  serve these manifests instead of the API server\n"
        "                               (repeatable; SIGHUP re-reads them)\n"
        "  --kubeconfig FILE, --master URL\n"
        "  --listen ADDR                DNS address, UDP and TCP (default :53: every\n"
        "                               interface; IP, IP:PORT, [IPv6]:PORT, :PORT)\n"
        "  --zone DOMAIN                cluster domain (default cluster.local)\n"
        "  --ttl S                      TTL of the zone's records (default 5, CoreDNS's;\n"
        "                               kubeadm's Corefile says 30)\n"
        "  --pods disabled|insecure|verified   pod A records (default disabled)\n"
        "  --endpoint-pod-names         endpoints without a hostname named by their pod\n"
        "  --reverse-fallthrough        unknown in-addr.arpa/ip6.arpa names go upstream\n"
        "                               (kubeadm's `fallthrough in-addr.arpa ip6.arpa`)\n"
        "  --autopath                   answer the first query of a pod's search walk\n"
        "                               with the final result (CoreDNS's autopath; watches\n"
        "                               Pods for an address -> namespace index)\n"
        "  --upstream ADDR[,ADDR]       resolvers for other names (repeatable; default:\n"
        "                               the nameservers of --resolv-conf; \"none\": SERVFAIL)\n"
        "  --resolv-conf FILE           default /etc/resolv.conf\n"
        "  --upstream-timeout D         per upstream try (default 2s)\n"
        "  --cache-ttl S                cap on cached TTLs (default 30, kubeadm's `cache\n"
        "                               30`; 0 disables the cache)\n"
        "  --cache-size N               cached answers (default 9984)\n"
        "  --workers N                  answering threads (default: one per CPU)\n"
        "  --forwarders N               upstream threads (default 16)\n"
        "  --max-tcp-conns N            open TCP connections (default 1000)\n"
        "  --tcp-idle-timeout D         default 10s\n"
        "  --health-addr A:P            /health (default :8080, CoreDNS's health)\n"
        "  --ready-addr A:P             /ready (default :8181, CoreDNS's ready)\n"
        "  --metrics-addr A:P           /metrics (default :9153, CoreDNS's prometheus);\n"
        "                               each also answers the others' paths; \"\": off\n"
        "  --lameduck D                 on SIGTERM keep answering D before the drain,\n"
        "                               /ready says 503 meanwhile (default 5s)\n"
        "  -v N, --logging-format text|json\n";

enum {
        O_KUBECONFIG = 256,
        O_MASTER,
        O_LISTEN,
        O_ZONE,
        O_TTL,
        O_PODS,
        O_EPNAMES,
        O_REVFALL,
        O_UPSTREAM,
        O_RESOLV,
        O_UPTIMEOUT,
        O_CACHETTL,
        O_CACHESIZE,
        O_WORKERS,
        O_FORWARDERS,
        O_MAXTCP,
        O_TCPIDLE,
        O_HEALTH,
        O_READY,
        O_METRICS,
        O_LAMEDUCK,
        O_LOGFMT,
        O_AUTOPATH,
};

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fputs("svcenv-dns: ", stderr);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        return 2;
}

/* ":53" (every interface, both families), "IP", "IP:PORT", "[IPv6]:PORT". */
static int parse_listen(const char *s, struct dnsd *d)
{
        int port = 53;
        if (*s == ':' && s[1] != ':') {
                if (se_parse_int(s + 1, 0, 65535, &port) < 0)
                        return -EINVAL;
                struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&d->listen;
                memset(s6, 0, sizeof(*s6));
                s6->sin6_family = AF_INET6;
                s6->sin6_addr = in6addr_any;
                s6->sin6_port = htons((uint16_t)port);
                d->listen_len = sizeof(*s6);
                /* no IPv6 on this host: every IPv4 interface */
                int fd = socket(AF_INET6, SOCK_DGRAM, 0);
                if (fd < 0) {
                        struct sockaddr_in *s4 = (struct sockaddr_in *)&d->listen;
                        memset(s4, 0, sizeof(*s4));
                        s4->sin_family = AF_INET;
                        s4->sin_port = htons((uint16_t)port);
                        d->listen_len = sizeof(*s4);
                } else {
                        close(fd);
                }
                snprintf(d->m.server, sizeof(d->m.server), "dns://:%d", port);
                return 0;
        }
        struct se_dns_upstream u;
        if (se_dns_upstream_parse(s, &u, NULL) < 0) {
                /* port 0 (any free port, for tests) is not an upstream's */
                char buf[80];
                const char *colon = strrchr(s, ':');
                if (!colon || strcmp(colon, ":0") != 0 || (size_t)(colon - s) >= sizeof(buf))
                        return -EINVAL;
                snprintf(buf, sizeof(buf), "%.*s:1", (int)(colon - s), s);
                if (se_dns_upstream_parse(buf, &u, NULL) < 0)
                        return -EINVAL;
                ((struct sockaddr_in *)&u.addr)->sin_port = 0; /* same offset in v6 */
        }
        d->listen = u.addr;
        d->listen_len = u.len;
        snprintf(d->m.server, sizeof(d->m.server), "dns://%s", s);
        return 0;
}

static int add_upstreams(struct dnsd *d, const char *list)
{
        struct se_strv parts = SE_STRV_INIT;
        int rc = 0;
        if (se_strv_split(&parts, list, ',', true) < 0)
                return 4;
        se_strv_foreach(s, &parts) {
                struct se_diag diag = { 0 };
                if (strcmp(*s, "none") == 0)
                        continue;
                if (d->n_upstreams >= SE_DNS_MAX_UPSTREAMS) {
                        rc = usage_error("--upstream: at most %d", SE_DNS_MAX_UPSTREAMS);
                        break;
                }
                if (se_dns_upstream_parse(*s, &d->upstreams[d->n_upstreams], &diag) < 0) {
                        rc = usage_error("--upstream: %s", diag.text);
                        break;
                }
                d->n_upstreams++;
        }
        se_strv_release(&parts);
        return rc;
}

static int read_resolv_conf(struct dnsd *d, const char *path)
{
        FILE *f = fopen(path, "re");
        if (!f) {
                se_log_warn("%s: %s: names outside the cluster get SERVFAIL", path,
                            strerror(errno));
                return 0;
        }
        char *buf = se_malloc(SE_DNS_MAX_RESOLV_CONF + 1);
        size_t n = buf ? fread(buf, 1, SE_DNS_MAX_RESOLV_CONF + 1, f) : 0;
        fclose(f);
        if (!buf)
                return 4;
        struct se_diag diag = { 0 };
        int r = se_dns_resolv_conf_parse(path, buf, n, d->upstreams, SE_DNS_MAX_UPSTREAMS, &diag);
        free(buf);
        if (r < 0) {
                char msg[1024];
                se_diag_format(&diag, msg, sizeof(msg));
                fprintf(stderr, "svcenv-dns: %s\n", msg);
                return 3;
        }
        d->n_upstreams = (unsigned)r;
        if (!r)
                se_log_warn("%s has no nameserver: names outside the cluster get SERVFAIL", path);
        return 0;
}

static void handler(void *data, const struct se_httpd_request *req, struct se_httpd_response *resp)
{
        struct dnsd *d = data;
        resp->content_type = "text/plain; charset=utf-8";
        const char *text;
        if (strcmp(req->path, "/health") == 0 || strcmp(req->path, "/livez") == 0 ||
            strcmp(req->path, "/healthz") == 0) {
                /* as CoreDNS's health plugin: OK through the lameduck too */
                text = "OK";
        } else if (strcmp(req->path, "/ready") == 0 || strcmp(req->path, "/readyz") == 0) {
                bool ready = atomic_load(&d->have_zone) && !atomic_load(&d->lameduck);
                resp->status = ready ? 200 : 503;
                text = ready ? "OK" : atomic_load(&d->lameduck) ? "shutting down" : "kubernetes";
        } else if (strcmp(req->path, "/metrics") == 0) {
                struct se_strbuf sb;
                se_strbuf_init(&sb, 4 << 20);
                dnsd_metrics_text(d, &sb);
                resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
                resp->body = se_strbuf_detach(&sb, &resp->len);
                return;
        } else {
                resp->status = 404;
                text = "404 page not found";
        }
        resp->body = se_strdup(text);
        resp->len = resp->body ? strlen(resp->body) : 0;
}

static int start_http(struct dnsd *d, const char *addr, const char *what, struct se_httpd **ret)
{
        *ret = NULL;
        if (!*addr)
                return 0;
        char host[256];
        int port;
        const char *colon = strrchr(addr, ':');
        if (!colon || (size_t)(colon - addr) >= sizeof(host) ||
            se_parse_int(colon + 1, 0, 65535, &port) < 0)
                return usage_error("--%s: want HOST:PORT or :PORT", what);
        memcpy(host, addr, (size_t)(colon - addr));
        host[colon - addr] = '\0';
        char *h = host;
        if (*h == '[' && h[strlen(h) - 1] == ']') {
                h[strlen(h) - 1] = '\0';
                h++;
        }
        struct se_httpd_config hc = {
                .address = *h ? h : NULL, .port = port, .handler = handler, .data = d
        };
        struct se_diag diag = { 0 };
        if (se_httpd_start(&hc, ret, &diag) < 0) {
                se_log_error("--%s %s: %s", what, addr, diag.text);
                return 4;
        }
        se_log_info(1, "serving HTTP (%s) on %s:%d", what, host, se_httpd_port(*ret));
        return 0;
}

static void on_informer_error(void *data, int err, const char *message)
{
        (void)data;
        (void)err;
        se_log_warn("informer: %s", message);
}

struct source {
        struct se_strv files;
        const char *kubeconfig, *master;
        struct se_kube_client *client;
        struct se_kube_informer *inf[4];
        unsigned n_inf;
};

/* The decode flags of a kind: only what the zone reads, the same forms the
 * informers keep (a slice's pod names too with --endpoint-pod-names). */
static unsigned dns_decode_flags(const struct dnsd *d, enum se_kind kind)
{
        switch (kind) {
        case SE_KIND_POD:
                return SE_DECODE_SLIM_POD;
        case SE_KIND_SERVICE:
                return SE_DECODE_DNS_SERVICES;
        case SE_KIND_ENDPOINT_SLICE:
                return d->zopts.endpoint_pod_names ? 0 : SE_DECODE_DNS_SLICES;
        default:
                return 0;
        }
}

/* The kinds svcenv-dns watches: Pods only for `pods verified` and autopath. */
static unsigned dns_kinds(const struct dnsd *d, enum se_kind kinds[4])
{
        kinds[0] = SE_KIND_SERVICE;
        kinds[1] = SE_KIND_ENDPOINT_SLICE;
        kinds[2] = SE_KIND_NAMESPACE;
        kinds[3] = SE_KIND_POD;
        return d->zopts.pods == SE_DNS_PODS_VERIFIED || d->autopath ? 4 : 3;
}

/* -f: the manifests' objects of the watched kinds in the informers' forms,
 * so that files and the API server give the same zone at the same cost. */
static int load_offline(struct dnsd *d, struct source *src)
{
        enum se_kind kinds[4];
        unsigned n = dns_kinds(d, kinds);
        struct se_manifest_opts o = { .decode_flags = SE_DECODE_INTERN };
        for (unsigned i = 0; i < n; i++) {
                o.kinds |= UINT32_C(1) << kinds[i];
                o.decode_flags |= dns_decode_flags(d, kinds[i]);
        }
        struct se_manifest_stats stats = { 0 };
        struct se_diag diag = { 0 };
        int r = se_manifest_load_opts(d->store, (const char *const *)src->files.v, src->files.n, &o,
                                      &stats, &diag);
        if (r < 0) {
                char msg[1024];
                se_diag_format(&diag, msg, sizeof(msg));
                fprintf(stderr, "svcenv-dns: %s\n", msg);
                return r == -EINVAL || r == -EEXIST ? 3 : 4;
        }
        se_log_info(1, "-f: loaded %zu objects, skipped %zu of kinds svcenv-dns does not read",
                    stats.objects, stats.skipped);
        return 0;
}

/* SIGHUP with -f: the files again into a fresh store, so that removed
 * objects go too, then a full build. The builder thread builds only on
 * informer changes, which -f has none of: the store is this thread's. A bad
 * file keeps the last good zone. Zones hold references to the objects they
 * came from, so the old store can go at once. */
static void reload_offline(struct dnsd *d, struct source *src)
{
        struct se_store *old = d->store;
        if (!(d->store = se_store_new()) || load_offline(d, src) != 0) {
                se_store_free(d->store);
                d->store = old;
                se_log_error("reload: serving the last good files");
                return;
        }
        pthread_mutex_lock(&d->build_lock);
        se_dns_changes_note_all(d->changes);
        pthread_mutex_unlock(&d->build_lock);
        if (dnsd_build_now(d) == 0)
                se_log_info(0, "reloaded %zu manifest path(s)", src->files.n);
        se_store_free(old);
}

static int start_online(struct dnsd *d, struct source *src)
{
        struct se_kube_config_opts o = { .kubeconfig = src->kubeconfig, .master = src->master };
        struct se_kube_client_opts co = { .qps = 20, .burst = 40 };
        struct se_diag diag;
        if (se_kube_client_load(&o, &co, &src->client, &diag) < 0) {
                char msg[1024];
                se_diag_format(&diag, msg, sizeof(msg));
                se_log_error("%s", msg);
                return 4;
        }
        enum se_kind kinds[4];
        unsigned n = dns_kinds(d, kinds);
        for (unsigned i = 0; i < n; i++) {
                struct se_kube_informer_opts io = { .decode_flags = SE_DECODE_INTERN |
                                                                    dns_decode_flags(d, kinds[i]) };
                if (se_store_subscribe(d->store, kinds[i], dnsd_on_store_change, d) < 0 ||
                    !(src->inf[i] = se_kube_informer_new(src->client, kinds[i], d->store, &io,
                                                         on_informer_error, d)))
                        return 4;
                src->n_inf++;
                if (se_kube_informer_start(src->inf[i]) < 0)
                        return 4;
        }
        return 0;
}

/* Waits for the informers' first lists; false when a signal came first. */
static bool wait_synced(struct source *src, const sigset_t *sigs)
{
        for (unsigned i = 0; i < src->n_inf; i++) {
                while (se_kube_informer_wait_synced(src->inf[i], 500) < 0) {
                        struct timespec zero = { 0, 0 };
                        if (sigtimedwait(sigs, NULL, &zero) > 0)
                                return false;
                        se_log_info(1, "waiting for the informers to sync");
                }
        }
        return true;
}

static int parse_flags(struct dnsd *d, struct source *src, int argc, char **argv,
                       const char **http[3], const char **resolv, uint64_t *lameduck_ns,
                       struct se_dns_cache_opts *copts, uint32_t *cache_ttl)
{
        static const struct option opts[] = {
                { "filename", required_argument, NULL, 'f' },
                { "kubeconfig", required_argument, NULL, O_KUBECONFIG },
                { "master", required_argument, NULL, O_MASTER },
                { "listen", required_argument, NULL, O_LISTEN },
                { "zone", required_argument, NULL, O_ZONE },
                { "ttl", required_argument, NULL, O_TTL },
                { "pods", required_argument, NULL, O_PODS },
                { "endpoint-pod-names", no_argument, NULL, O_EPNAMES },
                { "reverse-fallthrough", no_argument, NULL, O_REVFALL },
                { "upstream", required_argument, NULL, O_UPSTREAM },
                { "resolv-conf", required_argument, NULL, O_RESOLV },
                { "upstream-timeout", required_argument, NULL, O_UPTIMEOUT },
                { "cache-ttl", required_argument, NULL, O_CACHETTL },
                { "cache-size", required_argument, NULL, O_CACHESIZE },
                { "workers", required_argument, NULL, O_WORKERS },
                { "forwarders", required_argument, NULL, O_FORWARDERS },
                { "max-tcp-conns", required_argument, NULL, O_MAXTCP },
                { "tcp-idle-timeout", required_argument, NULL, O_TCPIDLE },
                { "health-addr", required_argument, NULL, O_HEALTH },
                { "ready-addr", required_argument, NULL, O_READY },
                { "metrics-addr", required_argument, NULL, O_METRICS },
                { "lameduck", required_argument, NULL, O_LAMEDUCK },
                { "logging-format", required_argument, NULL, O_LOGFMT },
                { "autopath", no_argument, NULL, O_AUTOPATH },
                { "v", required_argument, NULL, 'v' },
                { "help", no_argument, NULL, 'h' },
                { NULL, 0, NULL, 0 },
        };
        int c, v;
        int64_t ns;
        bool upstream_flag = false;
        while ((c = getopt_long(argc, argv, "f:v:h", opts, NULL)) != -1) {
                switch (c) {
                case 'f':
                        if (se_strv_push(&src->files, optarg) < 0)
                                return 4;
                        break;
                case O_KUBECONFIG:
                        src->kubeconfig = optarg;
                        break;
                case O_MASTER:
                        src->master = optarg;
                        break;
                case O_LISTEN:
                        if (parse_listen(optarg, d) < 0)
                                return usage_error("--listen: want :PORT, IP, IP:PORT or "
                                                   "[IPv6]:PORT, not \"%s\"",
                                                   optarg);
                        break;
                case O_ZONE:
                        d->zopts.zone = optarg;
                        break;
                case O_TTL:
                        if (se_parse_int(optarg, 0, 3600, &v) < 0)
                                return usage_error("--ttl: want 0..3600, not \"%s\"", optarg);
                        d->zopts.ttl = (uint32_t)v;
                        break;
                case O_PODS:
                        if (strcmp(optarg, "disabled") == 0)
                                d->zopts.pods = SE_DNS_PODS_DISABLED;
                        else if (strcmp(optarg, "insecure") == 0)
                                d->zopts.pods = SE_DNS_PODS_INSECURE;
                        else if (strcmp(optarg, "verified") == 0)
                                d->zopts.pods = SE_DNS_PODS_VERIFIED;
                        else
                                return usage_error("--pods: want disabled, insecure or "
                                                   "verified, not \"%s\"",
                                                   optarg);
                        break;
                case O_EPNAMES:
                        d->zopts.endpoint_pod_names = true;
                        break;
                case O_REVFALL:
                        d->zopts.reverse_fallthrough = true;
                        break;
                case O_AUTOPATH:
                        d->autopath = true;
                        break;
                case O_UPSTREAM:
                        upstream_flag = true;
                        if ((v = add_upstreams(d, optarg)) != 0)
                                return v;
                        break;
                case O_RESOLV:
                        *resolv = optarg;
                        break;
                case O_UPTIMEOUT:
                        if (se_parse_duration(optarg, 60000000000ll, &ns) < 0 || ns <= 0)
                                return usage_error("--upstream-timeout: want a duration up to "
                                                   "1m, not \"%s\"",
                                                   optarg);
                        d->upstream_timeout_ns = (uint64_t)ns;
                        break;
                case O_CACHETTL:
                        if (se_parse_int(optarg, 0, 86400, &v) < 0)
                                return usage_error("--cache-ttl: want 0..86400, not \"%s\"",
                                                   optarg);
                        *cache_ttl = (uint32_t)v;
                        break;
                case O_CACHESIZE:
                        if (se_parse_int(optarg, 1, 10000000, &v) < 0)
                                return usage_error("--cache-size: want 1..10000000, not \"%s\"",
                                                   optarg);
                        copts->max_entries = (size_t)v;
                        break;
                case O_WORKERS:
                        if (se_parse_int(optarg, 1, DNSD_MAX_WORKERS, &v) < 0)
                                return usage_error("--workers: want 1..%d, not \"%s\"",
                                                   DNSD_MAX_WORKERS, optarg);
                        d->n_workers = (unsigned)v;
                        break;
                case O_FORWARDERS:
                        if (se_parse_int(optarg, 1, DNSD_MAX_FORWARDERS, &v) < 0)
                                return usage_error("--forwarders: want 1..%d, not \"%s\"",
                                                   DNSD_MAX_FORWARDERS, optarg);
                        d->n_forwarders = (unsigned)v;
                        break;
                case O_MAXTCP:
                        if (se_parse_int(optarg, 1, 1000000, &v) < 0)
                                return usage_error("--max-tcp-conns: want 1..1000000, not "
                                                   "\"%s\"",
                                                   optarg);
                        d->max_tcp_conns = (unsigned)v;
                        break;
                case O_TCPIDLE:
                        if (se_parse_duration(optarg, 3600000000000ll, &ns) < 0 || ns <= 0)
                                return usage_error("--tcp-idle-timeout: want a duration up "
                                                   "to 1h, not \"%s\"",
                                                   optarg);
                        d->tcp_idle_ns = (uint64_t)ns;
                        break;
                case O_HEALTH:
                case O_READY:
                case O_METRICS:
                        *http[c - O_HEALTH] = optarg;
                        break;
                case O_LAMEDUCK:
                        if (se_parse_duration(optarg, 3600000000000ll, &ns) < 0)
                                return usage_error("--lameduck: want a duration up to 1h, "
                                                   "not \"%s\"",
                                                   optarg);
                        *lameduck_ns = (uint64_t)ns;
                        break;
                case O_LOGFMT:
                        if (strcmp(optarg, "json") != 0 && strcmp(optarg, "text") != 0)
                                return usage_error("--logging-format: want text or json");
                        se_log_set_json(strcmp(optarg, "json") == 0);
                        break;
                case 'v':
                        if (se_parse_int(optarg, INT32_MIN, INT32_MAX, &v) < 0) /* klog */
                                return usage_error("-v wants a level, not \"%s\"", optarg);
                        se_log_set_verbosity(v);
                        break;
                case 'h':
                        fputs(usage, stdout);
                        return -1;
                default:
                        fputs(usage, stderr);
                        return 2;
                }
        }
        if (optind < argc)
                return usage_error("unexpected argument \"%s\"", argv[optind]);
        if (src->files.n && (src->kubeconfig || src->master))
                return usage_error("-f and --kubeconfig/--master exclude each other");
        if (!upstream_flag)
                return read_resolv_conf(d, *resolv);
        return 0;
}

int main(int argc, char **argv)
{
        static struct dnsd d; /* large (worker table): not on the stack */
        struct source src = { .files = SE_STRV_INIT };
        const char *health = ":8080", *ready = ":8181", *metrics = ":9153";
        const char **http[3] = { &health, &ready, &metrics };
        const char *resolv = "/etc/resolv.conf";
        uint64_t lameduck_ns = 5000000000ull;
        struct se_dns_cache_opts copts = { 0 };
        uint32_t cache_ttl = 30;
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

        d.zopts.ttl = 5;
        d.n_workers = ncpu < 1 ? 1 : ncpu > DNSD_MAX_WORKERS ? DNSD_MAX_WORKERS : (unsigned)ncpu;
        d.n_forwarders = 16;
        d.max_forward_queue = 4096;
        d.max_tcp_conns = 1000;
        d.tcp_idle_ns = 10000000000ull;
        d.upstream_timeout_ns = 2000000000ull;
        pthread_mutex_init(&d.build_lock, NULL);
        pthread_cond_init(&d.build_cond, NULL);
        pthread_mutex_init(&d.fwd_lock, NULL);
        pthread_cond_init(&d.fwd_cond, NULL);
        if (parse_listen(":53", &d) < 0)
                return 4;

        int rc = parse_flags(&d, &src, argc, argv, http, &resolv, &lameduck_ns, &copts, &cache_ttl);
        if (rc) {
                se_strv_release(&src.files);
                return rc < 0 ? 0 : rc;
        }
        snprintf(d.zone_name, sizeof(d.zone_name), "%s",
                 d.zopts.zone ? d.zopts.zone : "cluster.local");
        for (char *p = d.zone_name; *p; p++)
                *p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
        if (cache_ttl) {
                copts.max_ttl = copts.max_neg_ttl = cache_ttl;
                if (cache_ttl < 5)
                        copts.min_ttl = cache_ttl;
                /* CoreDNS's cache: the floors and the failure TTL stay 5 */
                d.ttl_bounds = (struct se_dns_ttl_bounds){
                        .min = 5, .max = cache_ttl, .min_neg = 5, .max_neg = cache_ttl, .fail = 5
                };
                if (!(d.cache = se_dns_cache_new(&copts))) {
                        se_log_error("out of memory");
                        return 4;
                }
        }
        mallopt(M_ARENA_MAX, 2);

        sigset_t sigs;
        sigemptyset(&sigs);
        sigaddset(&sigs, SIGTERM);
        sigaddset(&sigs, SIGINT);
        if (src.files.n)
                sigaddset(&sigs, SIGHUP); /* re-read the files */
        pthread_sigmask(SIG_BLOCK, &sigs, NULL);
        signal(SIGPIPE, SIG_IGN);

        struct se_httpd *httpd[3] = { NULL, NULL, NULL };
        static const char *const what[3] = { "health-addr", "ready-addr", "metrics-addr" };
        if (!(d.store = se_store_new())) {
                rc = 4;
                goto out;
        }
        if (src.files.n) {
                if ((rc = load_offline(&d, &src)) != 0)
                        goto out;
                atomic_store(&d.synced, true);
        }
        /* the zone is checked before anything listens: a bad --zone is a
         * usage error, not a server that answers nothing */
        if (src.files.n) {
                struct se_dns_zone *z = NULL;
                struct se_diag diag = { 0 };
                if (se_dns_zone_build(d.store, &d.zopts, &z, &diag) < 0) {
                        rc = usage_error("%s", diag.text[0] ? diag.text : "cannot build the zone");
                        goto out;
                }
                se_dns_zone_unref(z);
        }
        if ((rc = dnsd_workers_start(&d)) < 0) {
                se_log_error("--listen %s: %s", d.m.server, strerror(-rc));
                rc = 4;
                goto out;
        }
        {
                char host[INET6_ADDRSTRLEN] = "";
                int port = 0;
                if (d.listen.ss_family == AF_INET6) {
                        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&d.listen;
                        inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
                        port = ntohs(s6->sin6_port);
                } else {
                        struct sockaddr_in *s4 = (struct sockaddr_in *)&d.listen;
                        inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
                        port = ntohs(s4->sin_port);
                }
                se_log_info(0, "serving DNS on %s port %d (udp, tcp) with %u workers, %u upstreams",
                            host, port, d.n_workers, d.n_upstreams);
        }
        if ((rc = dnsd_forwarders_start(&d)) < 0 || (rc = dnsd_builder_start(&d)) < 0) {
                rc = 4;
                goto out;
        }
        for (int i = 0; i < 3; i++)
                if ((rc = start_http(&d, *http[i], what[i], &httpd[i])) != 0)
                        goto out;

        if (src.files.n) {
                if (dnsd_build_now(&d) < 0) {
                        rc = 4;
                        goto out;
                }
        } else {
                if ((rc = start_online(&d, &src)) != 0)
                        goto out;
                if (!wait_synced(&src, &sigs))
                        goto out;
                atomic_store(&d.synced, true);
                dnsd_mark_dirty(&d);
                se_log_info(0, "informers synced: serving the cluster zone");
        }

        int sig = 0;
        while (sigwait(&sigs, &sig) == 0 && sig == SIGHUP)
                reload_offline(&d, &src);
        se_log_info(0, "received signal %d: lameduck for %.1f s, then draining", sig,
                    (double)lameduck_ns / 1e9);
        atomic_store(&d.lameduck, true);
        if (lameduck_ns) {
                /* keep answering while the endpoint leaves the kube-dns
                 * Service; a second signal cuts it short */
                struct timespec ts = { .tv_sec = (time_t)(lameduck_ns / 1000000000ull),
                                       .tv_nsec = (long)(lameduck_ns % 1000000000ull) };
                (void)sigtimedwait(&sigs, NULL, &ts);
        }
        rc = 0;
out:
        /* no more changes, no more snapshots; then forwarded queries get up
         * to 2 s to come back before the loops end */
        for (unsigned i = 0; i < src.n_inf; i++)
                src.inf[i] = se_kube_informer_free(src.inf[i]);
        dnsd_builder_stop(&d);
        dnsd_builder_release(&d);
        dnsd_forwarders_stop(&d, se_now_mono_ns() + 2000000000ull);
        dnsd_workers_stop(&d);
        for (int i = 0; i < 3; i++)
                httpd[i] = se_httpd_stop(httpd[i]);
        d.latest = se_dns_zone_unref(d.latest);
        d.latest_index = dnsd_podindex_unref(d.latest_index);
        se_kube_client_free(src.client);
        d.store = se_store_free(d.store);
        d.cache = se_dns_cache_free(d.cache);
        se_strv_release(&src.files);
        return rc;
}

/* Benchmark: proxy ruleset generation for 1,000 / 10,000 / 30,000 services
 * with 10 endpoints each (time, bytes, peak RSS), and, as root, the time
 * iptables-restore takes to apply it in a scratch network namespace.
 * Prints figures; asserts nothing. BENCH_APPLY=N applies sizes up to N
 * (default 1000, 0 = none); BENCH_DUMP=PREFIX saves each ruleset as
 * PREFIX.N.iptables and PREFIX.N.nft (partial syncs: PREFIX.N.partial.*);
 * BENCH_BACKEND=iptables|nftables runs one backend only (iptables-restore of 10,000 services takes
 * very long). */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <svcenv/proxy.h>
#include <svcenv/store.h>

#include "proxy_cluster.h"

static double now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long rss_kb(void)
{
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        return ru.ru_maxrss;
}

/* one ClusterIP service svc-N with EPS endpoints; shift moves the endpoints
 * (a changed service for partial syncs) */
static int add_service(struct se_store *s, unsigned i, unsigned eps, unsigned shift)
{
        return bench_put_service(s, i, eps, i * eps + shift);
}

/* one service's endpoints change: the partial sync's cost */
/* BENCH_DUMP=PREFIX: the text into PREFIX.N[.partial].iptables / .nft */
static void dump(const struct se_strbuf *sb, unsigned n_svc, int backend, const char *what)
{
        const char *prefix = getenv("BENCH_DUMP");
        if (!prefix)
                return;
        char path[4096];
        snprintf(path, sizeof(path), "%s.%u%s.%s", prefix, n_svc, what,
                 backend ? "nft" : "iptables");
        FILE *f = fopen(path, "w");
        if (f) {
                fwrite(sb->buf, 1, sb->len, f);
                fclose(f);
        }
}

/* Applies sb and prints how long it took, after label; 0 or -errno. */
static int timed_apply(const struct se_strbuf *sb, int backend, const char *label)
{
        char err[512];
        double a0 = now();
        int r = se_proxy_apply(backend ? SE_PROXY_NFT : SE_PROXY_IPTABLES_RESTORE, sb->buf, sb->len,
                               err, sizeof(err));
        if (r < 0)
                printf("  %s failed: %s\n", label, err);
        else
                printf("  %s: %.2f s\n", label, now() - a0);
        return r;
}

static void partial_sync(struct se_store *s, const struct se_proxy_options *o,
                         struct se_proxy_tracker *tr, unsigned n_svc, unsigned eps, int backend,
                         bool apply)
{
        static unsigned shift = 0;
        struct se_proxy_table *t = NULL;
        struct se_strbuf sb;
        shift += 1000003; /* endpoints nobody else uses */
        if (add_service(s, 0, eps, shift) < 0)
                exit(1);
        double t0 = now();
        if (se_proxy_table_build(s, o, SE_IPV4, &t) < 0)
                exit(1);
        se_strbuf_init(&sb, (size_t)1 << 30);
        int r = backend ? se_proxy_nft_sync(t, o, tr, &sb) : se_proxy_iptables_sync(t, o, tr, &sb);
        double t1 = now();
        if (r == 0) {
                printf("  partial sync, 1 of %u services changed: build+write %.1f ms, %.1f KiB\n",
                       n_svc, (t1 - t0) * 1e3, (double)sb.len / 1024);
                dump(&sb, n_svc, backend, ".partial");
                if (apply)
                        r = timed_apply(&sb, backend, "partial apply");
        }
        se_proxy_tracker_done(tr, r == 0, &sb);
        se_strbuf_release(&sb);
        se_proxy_table_free(t);
}

/* nft, after the apply: a full resync in place as the daemon's (the
 * table's names read over netlink, then flushed and declared again) */
static void nft_resync(const struct se_proxy_table *t, const struct se_proxy_options *o)
{
        struct se_proxy_tracker *tr = se_proxy_tracker_new();
        struct se_strbuf sb;
        char err[512];
        size_t rules = 0;
        double t0 = now();
        int r = se_proxy_nft_chain_rules(SE_IPV4, "nat-prerouting", &rules);
        double t1 = now();
        r = r ?: se_proxy_nft_seed_existing(tr, SE_IPV4);
        double t2 = now();
        se_strbuf_init(&sb, (size_t)1 << 30);
        r = r ?: se_proxy_nft_sync(t, o, tr, &sb);
        double t3 = now();
        r = r ?: se_proxy_apply(SE_PROXY_NFT, sb.buf, sb.len, err, sizeof(err));
        double t4 = now();
        if (r < 0)
                printf("  full resync in place failed: %s\n", r == -EPROTO ? err : strerror(-r));
        else
                printf("  canary check %.1f ms; full resync in place: names over netlink %.1f ms, "
                       "write %.1f ms, apply %.2f s\n",
                       (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3, t4 - t3);
        se_strbuf_release(&sb);
        se_proxy_tracker_free(tr);
}

static void run(unsigned n_svc, unsigned eps, bool apply)
{
        struct se_store *s = se_store_new();
        struct se_proxy_options o;
        se_proxy_options_init(&o);
        o.node_name = "node-a";
        se_parse_ip("10.0.0.11", &o.node_ips[0]);
        o.n_node_ips = 1;
        se_parse_cidr("10.244.0.0/16", &o.cluster_cidrs[0]);
        o.n_cluster_cidrs = 1;
        o.random_fully = true;
        for (unsigned i = 0; i < n_svc; i++)
                if (add_service(s, i, eps, 0) < 0) {
                        fprintf(stderr, "bench_proxy: out of memory\n");
                        exit(1);
                }
        const char *only = getenv("BENCH_BACKEND");
        for (int backend = 0; backend < 2; backend++) {
                if (only && strcmp(only, backend ? "nftables" : "iptables") != 0)
                        continue;
                struct se_proxy_table *t = NULL;
                struct se_strbuf sb;
                struct se_proxy_tracker *tr = se_proxy_tracker_new();
                double t0 = now();
                if (se_proxy_table_build(s, &o, SE_IPV4, &t) < 0)
                        exit(1);
                double t1 = now();
                se_strbuf_init(&sb, (size_t)1 << 30);
                int r = backend ? se_proxy_nft_sync(t, &o, tr, &sb) :
                                  se_proxy_iptables_sync(t, &o, tr, &sb);
                double t2 = now();
                if (r < 0) {
                        printf("proxy %-8s %6u svc x %2u ep: not available (%d)\n",
                               backend ? "nftables" : "iptables", n_svc, eps, r);
                        se_proxy_table_free(t);
                        se_strbuf_release(&sb);
                        se_proxy_tracker_free(tr);
                        continue;
                }
                dump(&sb, n_svc, backend, "");
                size_t lines = 0;
                for (size_t k = 0; k < sb.len; k++)
                        lines += sb.buf[k] == '\n';
                printf("proxy %-8s %6u svc x %2u ep: build %7.1f ms, write %7.1f ms, %6.1f MiB, "
                       "%7zu lines, peak RSS %6.1f MiB\n",
                       backend ? "nftables" : "iptables", n_svc, eps, (t1 - t0) * 1e3,
                       (t2 - t1) * 1e3, (double)sb.len / (1 << 20), lines, (double)rss_kb() / 1024);
                if (apply)
                        r = timed_apply(&sb, backend,
                                        backend ? "apply (nft -f, fresh netns)" :
                                                  "apply (iptables-restore, fresh netns)");
                se_proxy_tracker_done(tr, r == 0, &sb);
                se_strbuf_release(&sb);
                if (apply && backend)
                        nft_resync(t, &o);
                se_proxy_table_free(t);
                partial_sync(s, &o, tr, n_svc, eps, backend, apply);
                se_proxy_tracker_free(tr);
        }
        se_store_free(s);
}

int main(int argc, char **argv)
{
        static const unsigned sizes[] = { 1000, 10000, 30000 };
        /* BENCH_APPLY: largest service count to apply (default 1000; the
         * 10,000 apply takes minutes on a small machine), 0 = none */
        const char *env = getenv("BENCH_APPLY");
        unsigned apply_max = env ? (unsigned)strtoul(env, NULL, 10) : 1000;
        bool apply_ok = geteuid() == 0 && apply_max > 0;
        setvbuf(stdout, NULL, _IOLBF, 0);
        (void)argc;
        (void)argv;
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
                /* each apply starts from an empty scratch namespace */
                bool apply = apply_ok && sizes[i] <= apply_max && unshare(CLONE_NEWNET) == 0;
                run(sizes[i], 10, apply);
        }
        if (!apply_ok)
                printf("proxy apply: skipped (needs root and BENCH_APPLY > 0)\n");
        return 0;
}

/* Benchmark: programming nftables over netlink against `nft -f`, in the
 * same run and for the same scripts: the full load of 1,000 / 10,000
 * services x 10 endpoints (each way in its own fresh network namespace),
 * then one service added with all of them present (svcenv's minimal
 * partial sync). Wall time and CPU (ours for netlink, where the kernel
 * work is our system time; nft's for nft -f). Root only; prints figures,
 * asserts nothing. BENCH_NLAPPLY_MAX=N: largest size (default 10000);
 * BENCH_DUMP=PREFIX saves the scripts as PREFIX.N.nft and PREFIX.N.one.nft. */
#include <errno.h>
#include <fcntl.h>
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

static double cpu(int who)
{
        struct rusage ru;
        getrusage(who, &ru);
        return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
               (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* applies text in the namespace fd one way; prints wall and CPU */
static int timed(int ns, const struct se_strbuf *sb, bool netlink, const char *what)
{
        char err[512];
        if (setns(ns, CLONE_NEWNET) < 0)
                return -errno;
        double c0 = cpu(netlink ? RUSAGE_SELF : RUSAGE_CHILDREN), t0 = now();
        int r = netlink ? se_proxy_nft_apply_netlink(sb->buf, sb->len, err, sizeof(err)) :
                          se_proxy_nft_apply(SE_PROXY_NFT_TOOL, sb->buf, sb->len, NULL, 0, err,
                                             sizeof(err));
        double t1 = now(), c1 = cpu(netlink ? RUSAGE_SELF : RUSAGE_CHILDREN);
        if (r < 0)
                printf("  %-34s %-8s failed: %s\n", what, netlink ? "netlink" : "nft -f", err);
        else
                printf("  %-34s %-8s %9.1f ms wall %9.1f ms CPU\n", what,
                       netlink ? "netlink" : "nft -f", (t1 - t0) * 1e3, (c1 - c0) * 1e3);
        return r;
}

static void dump(const struct se_strbuf *sb, unsigned n_svc, const char *what)
{
        const char *prefix = getenv("BENCH_DUMP");
        char path[4096];
        if (!prefix)
                return;
        snprintf(path, sizeof(path), "%s.%u%s.nft", prefix, n_svc, what);
        FILE *f = fopen(path, "w");
        if (f) {
                fwrite(sb->buf, 1, sb->len, f);
                fclose(f);
        }
}

static struct se_proxy_table *table(const struct se_store *s, const struct se_proxy_options *o)
{
        struct se_proxy_table *t = NULL;
        if (se_proxy_table_build(s, o, SE_IPV4, &t) < 0)
                exit(1);
        return t;
}

static void run(unsigned n_svc)
{
        enum { EPS = 10 };
        struct se_store *s = se_store_new();
        struct se_proxy_options o;
        se_proxy_options_init(&o);
        se_proxy_options_nft_defaults(&o);
        o.node_name = "node-a";
        se_parse_ip("10.0.0.11", &o.node_ips[0]);
        o.n_node_ips = 1;
        se_parse_cidr("10.244.0.0/16", &o.cluster_cidrs[0]);
        o.n_cluster_cidrs = 1;
        o.random_fully = true;
        for (unsigned i = 0; i < n_svc; i++)
                if (!s || bench_put_service(s, i, EPS, i * EPS) < 0)
                        exit(1);
        struct se_proxy_tracker *tr = se_proxy_tracker_new();
        se_proxy_tracker_set_minimal(tr, true);
        struct se_strbuf full, one;
        se_strbuf_init(&full, (size_t)1 << 30);
        se_strbuf_init(&one, 0);
        struct se_proxy_table *t = table(s, &o);
        if (se_proxy_nft_sync(t, &o, tr, &full) < 0)
                exit(1);
        se_proxy_table_free(t);
        printf("nft apply, %u services x %d endpoints: full script %.1f MiB\n", n_svc, EPS,
               (double)full.len / (1 << 20));
        /* the tracker takes the buffer its sync wrote over: apply a copy */
        struct se_strbuf copy;
        se_strbuf_init(&copy, full.len + 1);
        se_strbuf_add(&copy, full.buf, full.len);
        se_proxy_tracker_done(tr, true, &full);
        se_strbuf_release(&full);
        full = copy;
        /* the added service's sync: store event to script */
        double w0 = now();
        if (bench_put_service(s, n_svc, EPS, n_svc * EPS) < 0)
                exit(1);
        t = table(s, &o);
        if (se_proxy_nft_sync(t, &o, tr, &one) < 0)
                exit(1);
        double w1 = now();
        se_proxy_table_free(t);
        dump(&full, n_svc, "");
        dump(&one, n_svc, ".one");
        int nl = -1, tool = -1;
        if (unshare(CLONE_NEWNET) == 0)
                nl = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        if (unshare(CLONE_NEWNET) == 0)
                tool = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        if (nl < 0 || tool < 0) {
                printf("  skipped: no network namespaces (%s)\n", strerror(errno));
        } else {
                timed(nl, &full, true, "full load");
                timed(tool, &full, false, "full load");
                printf("  one service added: build+write %.1f ms, %.1f KiB\n", (w1 - w0) * 1e3,
                       (double)one.len / 1024);
                timed(nl, &one, true, "one service added, apply");
                timed(tool, &one, false, "one service added, apply");
        }
        if (nl >= 0)
                close(nl);
        if (tool >= 0)
                close(tool);
        se_proxy_tracker_done(tr, true, NULL);
        se_strbuf_release(&full);
        se_strbuf_release(&one);
        se_proxy_tracker_free(tr);
        se_store_free(s);
}

int main(void)
{
        static const unsigned sizes[] = { 1000, 10000 };
        const char *env = getenv("BENCH_NLAPPLY_MAX");
        unsigned max = env ? (unsigned)strtoul(env, NULL, 10) : 10000;
        setvbuf(stdout, NULL, _IOLBF, 0);
        if (geteuid() != 0) {
                printf("nft apply: skipped (needs root)\n");
                return 0;
        }
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
                if (sizes[i] <= max)
                        run(sizes[i]);
        return 0;
}

/* Benchmark: a partial sync for ONE endpoint change among 10,000 services
 * (10 endpoints each): restore input bytes and time for kube-proxy's
 * partial sync (top-level chains rewritten) and svcenv's minimal one, plus
 * a service added and removed; as root, each applied by iptables-restore
 * after the full ruleset, in a scratch network namespace. Prints figures;
 * asserts nothing. BENCH_SYNC_SERVICES=N changes the size; BENCH_SYNC_ONLY
 * names one run (kube-proxy, svcenv-min, nftables, nftables-min);
 * BENCH_SYNC_APPLY=N applies only up to N services (default 1000, as
 * iptables-restore of a whole ruleset grows about quadratically here: 7 s
 * at 1,000 services, 90-105 s at 3,000, not done after 15 minutes at
 * 10,000 on the 2-core test machine); BENCH_NFT_APPLY=0 skips applying nft.
 * The default 10,000 services are then built and written, not applied. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* service svc-N (ClusterIP) with its slice of EPS endpoints starting at
 * address number first; eps 0 removes it */
static void put_service(struct se_store *s, unsigned i, unsigned eps, unsigned first)
{
        if (bench_put_service(s, i, eps, first) < 0)
                exit(1);
}

struct run {
        const char *what;
        int nft;
        bool minimal, apply;
        struct se_proxy_tracker *tr;
};

static void sync_once(struct se_store *s, const struct se_proxy_options *o, struct run *r,
                      const char *step)
{
        struct se_proxy_table *t = NULL;
        struct se_strbuf sb;
        double t0 = now();
        if (se_proxy_table_build(s, o, SE_IPV4, &t) < 0)
                exit(1);
        double t1 = now();
        se_strbuf_init(&sb, (size_t)1 << 30);
        int e = r->nft ? se_proxy_nft_sync(t, o, r->tr, &sb) :
                         se_proxy_iptables_sync(t, o, r->tr, &sb);
        double t2 = now();
        if (e < 0)
                exit(1);
        printf("  %-34s %-14s build %6.1f ms, write %6.1f ms, input %9zu bytes", step, r->what,
               (t1 - t0) * 1e3, (t2 - t1) * 1e3, sb.len);
        bool ok = true;
        if (r->apply && sb.len) {
                char err[512];
                double a0 = now();
                e = se_proxy_apply(r->nft ? SE_PROXY_NFT : SE_PROXY_IPTABLES_RESTORE, sb.buf,
                                   sb.len, err, sizeof(err));
                double a1 = now();
                ok = e == 0;
                if (ok)
                        printf(", apply %.3f s", a1 - a0);
                else
                        printf(", apply FAILED: %s", err);
        }
        printf("\n");
        se_proxy_tracker_done(r->tr, ok, &sb);
        se_strbuf_release(&sb);
        se_proxy_table_free(t);
}

int main(void)
{
        const char *env = getenv("BENCH_SYNC_SERVICES");
        unsigned n = env ? (unsigned)strtoul(env, NULL, 10) : 10000;
        env = getenv("BENCH_SYNC_APPLY");
        unsigned apply_max = env ? (unsigned)strtoul(env, NULL, 10) : 1000;
        bool apply = geteuid() == 0 && n <= apply_max;
        env = getenv("BENCH_NFT_APPLY");
        bool nft_apply = apply && !(env && strcmp(env, "0") == 0);
        struct se_proxy_options o;
        setvbuf(stdout, NULL, _IOLBF, 0);
        se_proxy_options_init(&o);
        o.node_name = "node-a";
        se_parse_ip("10.0.0.11", &o.node_ips[0]);
        o.n_node_ips = 1;
        se_parse_cidr("10.244.0.0/16", &o.cluster_cidrs[0]);
        o.n_cluster_cidrs = 1;
        o.random_fully = true;
        printf("partial syncs among %u services x 10 endpoints%s\n", n,
               apply ? " (applied in a scratch network namespace each)" : " (not applied)");
        struct run runs[] = {
                { "kube-proxy", 0, false, apply, NULL },
                { "svcenv-min", 0, true, apply, NULL },
                { "nftables", 1, false, nft_apply, NULL },
                { "nftables-min", 1, true, nft_apply, NULL },
        };
        const char *only = getenv("BENCH_SYNC_ONLY"); /* e.g. "nftables-min" */
        for (size_t k = 0; k < sizeof(runs) / sizeof(runs[0]); k++) {
                struct run *r = &runs[k];
                if (only && strcmp(only, r->what) != 0)
                        continue;
                struct se_store *s = se_store_new();
                for (unsigned i = 0; i < n; i++)
                        put_service(s, i, 10, i * 10);
                if (r->apply && unshare(CLONE_NEWNET) < 0)
                        r->apply = false;
                r->tr = se_proxy_tracker_new();
                se_proxy_tracker_set_minimal(r->tr, r->minimal);
                sync_once(s, &o, r, "full sync");
                /* one endpoint of one service replaced */
                put_service(s, n / 2, 10, n * 10 + 1);
                sync_once(s, &o, r, "one endpoint changed");
                sync_once(s, &o, r, "nothing changed");
                put_service(s, n + 1, 10, n * 10 + 100);
                sync_once(s, &o, r, "one service added");
                put_service(s, n + 1, 0, 0);
                sync_once(s, &o, r, "that service removed");
                se_proxy_tracker_free(r->tr);
                se_store_free(s);
        }
        if (!apply)
                printf("apply: skipped (needs root and BENCH_SYNC_APPLY >= %u)\n", n);
        return 0;
}

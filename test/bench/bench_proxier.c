/* Benchmark: the proxier's partial sync for ONE endpoint change, changes
 * carried from the store (only that service rebuilt and written), against
 * the rediscovering path of before (the whole table built and written,
 * unchanged services found by comparing text), in the same run, at
 * 1,000 / 10,000 / 30,000 services x 10 endpoints (iptables and
 * nftables, minimal partial syncs). CPU is the process's (CLOCK_PROCESS_CPUTIME_ID), the
 * median of BENCH_PROXIER_ROUNDS (default 21) changes; bytes are the
 * restore input. The system is a fake runner (nothing is applied: the
 * tool's time is not the proxier's CPU). BENCH_PROXIER_APPLY=1 (root)
 * applies the rules for real instead (nftables over netlink, iptables by
 * iptables-restore) in a fresh network namespace per size, and adds the
 * wall time of the carried sync from the store event to the kernel (the
 * full load takes its time first: minutes for iptables at 10,000).
 * Then one service added and removed again, each round: CPU (and with
 * BENCH_PROXIER_APPLY=1 the wall time from the store put to the kernel,
 * and the part spent in the apply). BENCH_PROXIER_SIZES=N,N,...
 * changes the sizes, BENCH_PROXIER_BACKEND=iptables|nftables runs one.
 * Prints figures; asserts nothing. */
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <svcenv/proxy_proxier.h>
#include <svcenv/store.h>

#include "proxy_cluster.h"

static double cpu_now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int apply_nothing(void *ctx, enum se_proxy_tool tool, const char *data, size_t n, char *err,
                         size_t errsize)
{
        (void)ctx, (void)tool, (void)data, (void)n, (void)err, (void)errsize;
        return 0;
}

static int run_nothing(void *ctx, const char *const *argv, struct se_strbuf *out, char *err,
                       size_t errsize)
{
        (void)ctx, (void)argv, (void)out, (void)err, (void)errsize;
        return 0;
}

static int jumps_nothing(void *ctx, enum se_ip_family fam, char *err, size_t errsize)
{
        (void)ctx, (void)fam, (void)err, (void)errsize;
        return 0;
}

static int names_nothing(void *ctx, enum se_ip_family fam, struct se_strv *ret)
{
        (void)ctx, (void)fam, (void)ret;
        return 0;
}

static int rules_one(void *ctx, enum se_ip_family fam, const char *chain, size_t *ret)
{
        (void)ctx, (void)fam, (void)chain;
        *ret = 1;
        return 0;
}

/* a clock that stands still: no canary check, no periodic full sync */
static void now_fixed(void *ctx, struct se_proxy_instant *now)
{
        (void)ctx;
        now->mono_ns = 1000000000LL;
        now->real_ns = 1764500000000000000LL;
}

static double wall_now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *x, const void *y)
{
        double a = *(const double *)x, b = *(const double *)y;
        return a < b ? -1 : a > b;
}

/* the system's apply, timed: what the carried syncs spend in it (the
 * nft text parsed, netlink messages sent, the kernel's commit; or
 * iptables-restore run) */
static int (*system_apply)(void *ctx, enum se_proxy_tool tool, const char *data, size_t n,
                           char *err, size_t errsize);
static double apply_wall;
static int apply_timed(void *ctx, enum se_proxy_tool tool, const char *data, size_t n, char *err,
                       size_t errsize)
{
        double w0 = wall_now();
        int r = system_apply(ctx, tool, data, n, err, errsize);
        apply_wall += wall_now() - w0;
        return r;
}

/* Median/min/max of v[rounds] (sorted in place), in ms. */
static void spread(double *v, unsigned rounds, double out[3])
{
        qsort(v, rounds, sizeof(double), cmp_double);
        out[0] = v[rounds / 2] * 1e3;
        out[1] = v[0] * 1e3;
        out[2] = v[rounds - 1] * 1e3;
}

/* One service of 10 endpoints added, then removed again (the size stays),
 * each round: from the store event (the put) to the step's return, the
 * CPU of it, and the time inside the system's apply. */
static void add_remove(struct se_proxy_proxier *p, struct se_store *s, unsigned n, unsigned rounds,
                       bool nft, bool apply)
{
        static const char *const what[2] = { "added", "removed" };
        double *v[2][3];
        uint64_t carried[2] = { 0, 0 }, failed = 0;
        size_t bytes[2] = { 0, 0 };
        struct se_proxy_proxier_stats st0, st1;
        for (int a = 0; a < 2; a++)
                for (int m = 0; m < 3; m++)
                        v[a][m] = calloc(rounds, sizeof(double));
        for (unsigned k = 0; k < rounds; k++)
                for (int a = 0; a < 2; a++) {
                        se_proxy_proxier_stats(p, &st0);
                        apply_wall = 0;
                        double w0 = wall_now(), c0 = cpu_now();
                        if (bench_put_service(s, n + k, a ? 0 : 10, 20 * n + 10 * k) < 0)
                                exit(1);
                        se_proxy_proxier_step(p, s);
                        v[a][1][k] = cpu_now() - c0;
                        v[a][0][k] = wall_now() - w0;
                        v[a][2][k] = apply_wall;
                        se_proxy_proxier_stats(p, &st1);
                        carried[a] += st1.syncs_carried - st0.syncs_carried;
                        failed += st1.syncs_failed - st0.syncs_failed;
                        bytes[a] = st1.bytes_last;
                }
        if (failed)
                printf("  %-8s %6u services: %llu add/remove syncs FAILED\n",
                       nft ? "nftables" : "iptables", n, (unsigned long long)failed);
        for (int a = 0; a < 2; a++) {
                double f[3][3];
                for (int m = 0; m < 3; m++)
                        spread(v[a][m], rounds, f[m]);
                if (apply)
                        printf("  %-8s %6u services: one service %-7s store event -> kernel "
                               "%.2f ms wall (min %.2f, max %.2f); CPU %.3f ms; in apply (%s) "
                               "%.2f ms (max %.2f); %llu/%u carried, %zu bytes\n",
                               nft ? "nftables" : "iptables", n, what[a], f[0][0], f[0][1], f[0][2],
                               f[1][0], nft ? "nft text -> netlink -> commit" : "iptables-restore",
                               f[2][0], f[2][2], (unsigned long long)carried[a], rounds, bytes[a]);
                else
                        printf("  %-8s %6u services: one service %-7s %.3f ms CPU (max %.3f), "
                               "%llu/%u carried, %zu bytes\n",
                               nft ? "nftables" : "iptables", n, what[a], f[1][0], f[1][2],
                               (unsigned long long)carried[a], rounds, bytes[a]);
                for (int m = 0; m < 3; m++)
                        free(v[a][m]);
        }
}

static void options(struct se_proxy_options *o)
{
        se_proxy_options_init(o);
        o->node_name = "node-a";
        se_parse_ip("10.0.0.11", &o->node_ips[0]);
        o->n_node_ips = 1;
        se_parse_cidr("10.244.0.0/16", &o->cluster_cidrs[0]);
        o->n_cluster_cidrs = 1;
        o->random_fully = true;
}

static void one_size(unsigned n, unsigned rounds, bool nft)
{
        static const struct se_proxy_runner fake = { apply_nothing, run_nothing, jumps_nothing,
                                                     names_nothing, rules_one,   now_fixed,
                                                     NULL };
        struct se_proxy_proxier_config cfg = { .nft = nft,
                                               .minimal = true,
                                               .sync_period_ns = 30000000000LL,
                                               .min_sync_period_ns = 0 };
        struct se_proxy_options o;
        enum se_ip_family fam = SE_IPV4;
        options(&o);
        struct se_store *s = se_store_new();
        /* the real system, but a clock that stands still all the same */
        struct se_proxy_runner real = *se_proxy_runner_system();
        real.now = now_fixed;
        system_apply = real.apply;
        real.apply = apply_timed;
        bool apply =
                getenv("BENCH_PROXIER_APPLY") && strcmp(getenv("BENCH_PROXIER_APPLY"), "1") == 0;
        if (apply && unshare(CLONE_NEWNET) < 0) {
                perror("unshare");
                exit(1);
        }
        struct se_proxy_proxier *p = se_proxy_proxier_new(&cfg, apply ? &real : &fake);
        if (!s || !p)
                exit(1);
        for (unsigned i = 0; i < n; i++)
                if (bench_put_service(s, i, 10, i * 10) < 0)
                        exit(1);
        /* subscribed after the load: the first sync is full anyway */
        se_store_subscribe(s, SE_KIND_SERVICE, se_proxy_proxier_on_change, p);
        se_store_subscribe(s, SE_KIND_ENDPOINT_SLICE, se_proxy_proxier_on_change, p);
        se_proxy_proxier_begin(p, &o, &fam, 1);
        double c0 = cpu_now();
        se_proxy_proxier_step(p, s);
        double full = cpu_now() - c0;
        struct se_proxy_proxier_stats st;
        se_proxy_proxier_stats(p, &st);
        size_t full_bytes = st.bytes_last;

        /* the rediscovering path: a tracker that saw the same full sync */
        struct se_proxy_tracker *tr = se_proxy_tracker_new();
        se_proxy_tracker_set_minimal(tr, true);
        struct se_proxy_table *t = NULL;
        struct se_strbuf sb;
        se_strbuf_init(&sb, (size_t)1 << 31);
        if (se_proxy_table_build(s, &o, fam, &t) < 0 ||
            (nft ? se_proxy_nft_sync(t, &o, tr, &sb) : se_proxy_iptables_sync(t, &o, tr, &sb)) < 0)
                exit(1);
        se_proxy_tracker_done(tr, true, &sb);
        se_strbuf_release(&sb);
        se_proxy_table_free(t);

        double *carried = calloc(rounds, sizeof(double)), *redisc = calloc(rounds, sizeof(double));
        double *wall = calloc(rounds, sizeof(double));
        size_t carried_bytes = 0, redisc_bytes = 0;
        uint64_t rebuilt = 0;
        for (unsigned k = 0; k < rounds; k++) {
                /* one endpoint of one service replaced, a different one each round */
                unsigned svc = (n / 2 + k * 7919u) % n;
                if (bench_put_service(s, svc, 10, n * 10 + 100 * k) < 0)
                        exit(1);
                double w0 = wall_now();
                c0 = cpu_now();
                se_proxy_proxier_step(p, s);
                carried[k] = cpu_now() - c0;
                wall[k] = wall_now() - w0;
                se_proxy_proxier_stats(p, &st);
                carried_bytes = st.bytes_last;
                rebuilt = st.services_rebuilt_last;

                c0 = cpu_now();
                t = NULL;
                se_strbuf_init(&sb, (size_t)1 << 31);
                if (se_proxy_table_build(s, &o, fam, &t) < 0 ||
                    (nft ? se_proxy_nft_sync(t, &o, tr, &sb) :
                           se_proxy_iptables_sync(t, &o, tr, &sb)) < 0)
                        exit(1);
                redisc_bytes = sb.len;
                se_proxy_tracker_done(tr, true, &sb);
                se_strbuf_release(&sb);
                se_proxy_table_free(t);
                redisc[k] = cpu_now() - c0;
        }
        qsort(carried, rounds, sizeof(double), cmp_double);
        qsort(wall, rounds, sizeof(double), cmp_double);
        qsort(redisc, rounds, sizeof(double), cmp_double);
        printf("  %-8s %6u services: full sync %8.1f ms CPU, %9zu bytes | one endpoint: carried "
               "%7.3f ms CPU (max %.3f), %5zu bytes, %llu rebuilt | rediscovering %8.2f ms CPU, "
               "%6zu bytes\n",
               nft ? "nftables" : "iptables", n, full * 1e3, full_bytes, carried[rounds / 2] * 1e3,
               carried[rounds - 1] * 1e3, carried_bytes, (unsigned long long)rebuilt,
               redisc[rounds / 2] * 1e3, redisc_bytes);
        if (apply)
                printf("  %-8s %6u services: one endpoint carried to the kernel %s: "
                       "%.2f ms wall (min %.2f, max %.2f), %llu syncs failed\n",
                       nft ? "nftables" : "iptables", n,
                       nft ? "over netlink" : "by iptables-restore", wall[rounds / 2] * 1e3,
                       wall[0] * 1e3, wall[rounds - 1] * 1e3, (unsigned long long)st.syncs_failed);
        add_remove(p, s, n, rounds, nft, apply);
        free(carried);
        free(redisc);
        free(wall);
        se_proxy_tracker_free(tr);
        se_proxy_proxier_free(p);
        se_store_free(s);
}

int main(void)
{
        const char *env = getenv("BENCH_PROXIER_SIZES");
        const char *sizes = env ? env : "1000,10000,30000";
        env = getenv("BENCH_PROXIER_ROUNDS");
        unsigned rounds = env ? (unsigned)strtoul(env, NULL, 10) : 21;
        if (rounds == 0)
                rounds = 1;
        setvbuf(stdout, NULL, _IOLBF, 0);
        printf("proxier partial sync, one endpoint changed (10 endpoints per service, "
               "median of %u):\n",
               rounds);
        const char *backend = getenv("BENCH_PROXIER_BACKEND");
        for (int nft = 0; nft < 2; nft++)
                for (const char *q = sizes; *q;) {
                        unsigned n = (unsigned)strtoul(q, NULL, 10);
                        if (n && (!backend || strcmp(backend, nft ? "nftables" : "iptables") == 0))
                                one_size(n, rounds, nft);
                        q += strcspn(q, ",");
                        q += *q == ',';
                }
        return 0;
}

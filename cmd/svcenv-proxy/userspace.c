/* --mode userspace: every Service through svcenv's own proxy (pkg/uproxy).
 * The loop rebuilds the snapshot on every change, swaps it into the proxy's
 * workers and rewrites the redirect rules (iptables or nft by --backend);
 * TPROXY'd UDP is routed to the local stack by a mark rule of our own.
 * Its health is the proxier's (d->proxier, whose own loop does not run
 * here): changes are queued there and successful syncs reported, so
 * /healthz answers as kube-proxy's. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <svcenv/log.h>
#include <svcenv/macro.h>
#include <svcenv/manifest.h>
#include <svcenv/timeutil.h>
#include <svcenv/uproxy.h>

#include "proxyd.h"

static void run_quiet(const char *const *argv)
{
        char err[256];
        (void)se_proxy_run(argv, NULL, err, sizeof(err));
}

static void iptables_jumps(const char *tool, const char *const *const *jumps, unsigned n)
{
        for (unsigned i = 0; i < n; i++) {
                const char *argv[24] = { tool, "-w", "-t", jumps[i][0] };
                size_t k = 4;
                argv[k++] = "-C";
                for (size_t j = 1; jumps[i][j] && k < 23; j++)
                        argv[k++] = jumps[i][j];
                char err[256];
                if (se_proxy_run(argv, NULL, err, sizeof(err)) == 0)
                        continue;
                argv[4] = "-I";
                if (se_proxy_run(argv, NULL, err, sizeof(err)) < 0)
                        se_log_warn("%s: %s", argv[0], err);
        }
}

/* The filter chain's jumps and the chain itself (quiet: absent is fine). */
static void firewall_remove(const char *tool)
{
        const char *const *jumps[3];
        unsigned n = se_uproxy_firewall_jumps(jumps);
        for (unsigned i = 0; i < n; i++) {
                const char *argv[24] = { tool, "-w", "-t", jumps[i][0], "-D" };
                size_t k = 5;
                for (size_t j = 1; jumps[i][j] && k < 23; j++)
                        argv[k++] = jumps[i][j];
                run_quiet(argv);
        }
        for (int op = 0; op < 2; op++) {
                const char *argv[] = {
                        tool, "-w", "-t", "filter", op ? "-X" : "-F", SE_UPROXY_FIREWALL_CHAIN, NULL
                };
                run_quiet(argv);
        }
}

/* The policy route TPROXY needs (marked packets are delivered locally) and
 * the jumps to our chains: made once, kept if present; the filter chain's
 * (loadBalancerSourceRanges) too while the rules have it. */
void proxyd_redirect_plumbing(const struct proxyd *d, enum se_ip_family fam, bool firewall)
{
        bool v6 = fam == SE_IPV6;
        char mark[32], table[16];
        snprintf(mark, sizeof(mark), "%#x/%#x", SE_UPROXY_DEFAULT_MARK, SE_UPROXY_DEFAULT_MARK);
        snprintf(table, sizeof(table), "%d", SE_UPROXY_ROUTE_TABLE);
        const char *fl = v6 ? "-6" : "-4";
        const char *del[] = { "ip", fl, "rule", "del", "fwmark", mark, "lookup", table, NULL };
        const char *add[] = { "ip", fl, "rule", "add", "fwmark", mark, "lookup", table, NULL };
        const char *route[] = { "ip",  fl,   "route", "replace", "local", v6 ? "::/0" : "0.0.0.0/0",
                                "dev", "lo", "table", table,     NULL };
        run_quiet(del); /* no duplicates across restarts */
        run_quiet(add);
        run_quiet(route);
        if (d->flags.nft)
                return;
        const char *tool = v6 ? "ip6tables" : "iptables";
        const char *const *jumps[3];
        unsigned n = se_uproxy_jumps(jumps);
        iptables_jumps(tool, jumps, n);
        if (firewall) {
                n = se_uproxy_firewall_jumps(jumps);
                iptables_jumps(tool, jumps, n);
        }
}

/* SIGHUP with -f: a fresh store from the files (the old one is this
 * thread's alone in that mode), so that removed objects go too. */
static void reload_files(struct proxyd *d)
{
        struct se_store *st = se_store_new();
        struct se_diag diag;
        int r = st ? se_manifest_load(st, d->files, d->n_files, "default", NULL, &diag) : -ENOMEM;
        if (r < 0) {
                char buf[1024];
                se_diag_format(&diag, buf, sizeof(buf));
                se_log_error("reload: %s; serving the last good files",
                             r == -ENOMEM ? "out of memory" : buf);
                se_store_free(st);
                return;
        }
        se_store_free(d->store);
        d->store = st;
        se_log_info(0, "reloaded %zu manifest path(s)", d->n_files);
}

/* -f: the files stand for the informers: their Node tells the health
 * whether the node is eligible, and each (re)load is a change waiting for
 * a sync. */
static void files_changed(struct proxyd *d)
{
        se_store_rdlock(d->store);
        const struct se_object *node = se_store_get(d->store, SE_KIND_NODE, NULL, d->hostname);
        if (node)
                se_proxy_proxier_on_change(d->proxier, SE_STORE_ADD, NULL, node);
        se_store_unlock(d->store);
        se_proxy_proxier_health_queued(d->proxier);
}

void proxyd_userspace_cleanup(void)
{
        proxyd_redirect_remove(true, true);
}

/* The redirect rules of one tool or both, both families; the TPROXY ip
 * rule too unless keep_route (another mode's rules going while ours, which
 * share it, stay). */
static void redirect_remove(bool iptables, bool nft, bool keep_route)
{
        char mark[32], table[16];
        snprintf(mark, sizeof(mark), "%#x/%#x", SE_UPROXY_DEFAULT_MARK, SE_UPROXY_DEFAULT_MARK);
        snprintf(table, sizeof(table), "%d", SE_UPROXY_ROUTE_TABLE);
        const char *const *jumps[3];
        unsigned n = se_uproxy_jumps(jumps);
        static const char *const chains[][2] = { { "nat", SE_UPROXY_NAT_CHAIN },
                                                 { "nat", SE_UPROXY_NODEPORT_CHAIN },
                                                 { "mangle", SE_UPROXY_TPROXY_CHAIN } };
        for (int f = 0; f < 2; f++) {
                const char *tool = f ? "ip6tables" : "iptables";
                if (iptables)
                        firewall_remove(tool);
                for (unsigned i = 0; iptables && i < n; i++) {
                        const char *argv[16] = { tool, "-w", "-t", jumps[i][0], "-D" };
                        size_t k = 5;
                        for (size_t j = 1; jumps[i][j] && k < 15; j++)
                                argv[k++] = jumps[i][j];
                        run_quiet(argv);
                }
                for (int op = 0; iptables && op < 2; op++) /* flush all, then delete all */
                        for (size_t i = 0; i < SE_ARRAY_SIZE(chains); i++) {
                                const char *argv[] = {
                                        tool,         "-w", "-t", chains[i][0], op ? "-X" : "-F",
                                        chains[i][1], NULL
                                };
                                run_quiet(argv);
                        }
                const char *nftdel[] = {
                        "nft", "delete", "table", f ? "ip6" : "ip", SE_UPROXY_NFT_TABLE, NULL
                };
                if (nft)
                        run_quiet(nftdel);
                const char *rule[] = { "ip", f ? "-6" : "-4", "rule", "del", "fwmark",
                                       mark, "lookup",        table,  NULL };
                if (!keep_route)
                        run_quiet(rule);
        }
}

void proxyd_redirect_remove(bool iptables, bool nft)
{
        redirect_remove(iptables, nft, false);
}

void proxyd_redirect_remove_other(const struct proxyd *d)
{
        redirect_remove(d->flags.nft, !d->flags.nft, true);
}

bool proxyd_redirect_apply(struct proxyd *d, const struct se_proxy_table *const *t,
                           const struct se_uproxy_rules_opts *o, struct se_strbuf *last)
{
        bool ok = true;
        for (unsigned i = 0; i < d->n_fams; i++) {
                struct se_strbuf out;
                char err[1024] = "";
                se_strbuf_init(&out, 0);
                bool v6 = d->fams[i] == SE_IPV6;
                int w = d->flags.nft ? se_uproxy_rules_nft(t[i], o, &out) :
                                       se_uproxy_rules_iptables(t[i], o, &out);
                bool same = w == 0 && last && last[i].len == out.len &&
                            memcmp(last[i].buf, out.buf, out.len) == 0;
                if (w == 0 && !same)
                        w = se_proxy_apply(d->flags.nft ? SE_PROXY_NFT :
                                           v6           ? SE_PROXY_IP6TABLES_RESTORE :
                                                          SE_PROXY_IPTABLES_RESTORE,
                                           out.buf, out.len, err, sizeof(err));
                if (w == 0 && !same) {
                        /* iptables' filter chain: written only while some
                         * port has source ranges, so it and its jumps go
                         * when the rules lose it (or nothing says they
                         * were not there) */
                        bool fw = !d->flags.nft && se_uproxy_any_firewall(t[i], o);
                        bool had = !last || !last[i].len ||
                                   memmem(last[i].buf, last[i].len, "\n*filter\n", 9);
                        if (!d->flags.nft && !fw && had)
                                firewall_remove(v6 ? "ip6tables" : "iptables");
                        proxyd_redirect_plumbing(d, d->fams[i], fw);
                        if (last) {
                                se_strbuf_reset(&last[i]);
                                se_strbuf_append(&last[i], out.buf, out.len);
                        }
                } else if (w < 0) {
                        se_log_error("userspace rules (%s): %s", v6 ? "IPv6" : "IPv4",
                                     err[0] ? err : strerror(-w));
                        if (last) /* unknown state: written again next time */
                                se_strbuf_reset(&last[i]);
                        ok = false;
                }
                se_strbuf_release(&out);
        }
        return ok;
}

int proxyd_uproxy_start(struct proxyd *d)
{
        struct se_uproxy_config cfg = {
                .port = (uint16_t)(d->uport ? d->uport : SE_UPROXY_DEFAULT_PORT),
                .udp_timeout_ns = d->udp_timeout_ns ? d->udp_timeout_ns : 250000000LL,
                .ipv6 = se_proxy_host_ipv6(d->flags.nft),
        };
        struct se_uproxy *up = NULL;
        d->uport = cfg.port;
        int r = se_uproxy_start(&cfg, &up);
        if (r < 0) {
                se_log_error("userspace proxy on port %u: %s", cfg.port, strerror(-r));
                return r;
        }
        uint64_t limit, conns;
        se_uproxy_fd_budget(up, &limit, &conns);
        se_log_info(0, "userspace proxy on port %u: fd limit %llu, room for %llu TCP connections",
                    cfg.port, (unsigned long long)limit, (unsigned long long)conns);
        /* the metrics thread reads it */
        __atomic_store_n(&d->uproxy, up, __ATOMIC_RELEASE);
        return 0;
}

static bool sync_userspace(struct proxyd *d)
{
        struct se_proxy_table *t[2] = { NULL, NULL };
        struct se_uproxy_snapshot *snap = NULL;
        bool ok = true;
        int r = 0;
        se_store_rdlock(d->store);
        for (unsigned i = 0; r == 0 && i < d->n_fams; i++)
                r = se_proxy_table_build(d->store, &d->flags.opt, d->fams[i], &t[i]);
        if (r == 0)
                r = se_uproxy_snapshot_build((const struct se_proxy_table *const *)t, d->n_fams,
                                             d->store, d->scheduler, &snap);
        se_store_unlock(d->store);
        /* said when the count changes, not on every sync */
        if (r == 0 && snap->n_bad_sched != d->us_bad_said && snap->n_bad_sched)
                se_log_warn("%u service port(s) have an invalid %s annotation: %s used",
                            snap->n_bad_sched, SE_UPROXY_SCHED_ANNOTATION, d->scheduler);
        if (r == 0)
                d->us_bad_said = snap->n_bad_sched;
        if (r == 0)
                r = se_uproxy_update(d->uproxy, snap);
        if (r < 0) {
                se_log_error("userspace sync: %s", strerror(-r));
                ok = false;
        }
        struct se_uproxy_rules_opts o = { .port = (uint16_t)d->uport,
                                          .mark = SE_UPROXY_DEFAULT_MARK,
                                          .node = &d->flags.opt };
        if (r == 0 && !proxyd_redirect_apply(d, (const struct se_proxy_table *const *)t, &o, NULL))
                ok = false;
        for (unsigned i = 0; i < 2; i++)
                se_proxy_table_free(t[i]);
        if (ok)
                se_proxy_proxier_health_synced(d->proxier);
        return ok;
}

void proxyd_userspace_run(struct proxyd *d)
{
        bool need = true;
        int64_t last = 0;
        if (d->n_files)
                files_changed(d);
        for (;;) {
                pthread_mutex_lock(&d->us_mu);
                bool stop = d->us_stop, reload = d->us_reload;
                need |= d->us_dirty || reload;
                d->us_dirty = d->us_reload = false;
                pthread_mutex_unlock(&d->us_mu);
                if (stop)
                        break;
                if (reload) {
                        reload_files(d);
                        files_changed(d);
                }
                int64_t now = (int64_t)se_now_mono_ns();
                if (need || now - last >= d->pcfg.sync_period_ns) {
                        if (last && now - last < d->pcfg.min_sync_period_ns) {
                                struct timespec ts = { 0, 0 };
                                int64_t w = d->pcfg.min_sync_period_ns - (now - last);
                                ts.tv_sec = (time_t)(w / 1000000000LL);
                                ts.tv_nsec = (long)(w % 1000000000LL);
                                nanosleep(&ts, NULL);
                        }
                        need = !sync_userspace(d);
                        last = (int64_t)se_now_mono_ns();
                        if (!need)
                                continue;
                }
                /* a change, the period, or after a failure a second's pause */
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                ts.tv_sec += 1;
                pthread_mutex_lock(&d->us_mu);
                if (!d->us_stop && !d->us_dirty && !d->us_reload)
                        pthread_cond_timedwait(&d->us_cond, &d->us_mu, &ts);
                pthread_mutex_unlock(&d->us_mu);
        }
}

/* wakes the loop with one of its flags set */
static void wake(struct proxyd *d, bool *flag)
{
        pthread_mutex_lock(&d->us_mu);
        *flag = true;
        pthread_cond_signal(&d->us_cond);
        pthread_mutex_unlock(&d->us_mu);
}

void proxyd_userspace_on_change(void *data, enum se_store_event ev, const struct se_object *old,
                                const struct se_object *new_obj)
{
        struct proxyd *d = data;
        const struct se_object *o = new_obj ? new_obj : old;
        /* the health's part of the proxier's callback: a Node sets the
         * node's eligibility only; Services and slices queue a change */
        if (o->kind == SE_KIND_NODE)
                se_proxy_proxier_on_change(d->proxier, ev, old, new_obj);
        else if (o->kind == SE_KIND_SERVICE || o->kind == SE_KIND_ENDPOINT_SLICE)
                se_proxy_proxier_health_queued(d->proxier);
        wake(d, &d->us_dirty);
}

void proxyd_userspace_reload(struct proxyd *d)
{
        wake(d, &d->us_reload);
}

void proxyd_userspace_stop(struct proxyd *d)
{
        wake(d, &d->us_stop);
}

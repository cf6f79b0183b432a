/* The sync loop: full sync at start, after a failed apply, when the canary
 * or our jumps disappeared (nft: our table or its nat-prerouting jump),
 * and every --sync-period; partial syncs for
 * changes in between, at most once per --min-sync-period. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <svcenv/alloc.h>
#include <svcenv/endpoints.h>
#include <svcenv/log.h>
#include <svcenv/strv.h>
#include <svcenv/timeutil.h>

#include "proxyd.h"

#define CANARY            "KUBE-PROXY-CANARY"
#define CANARY_CHECK_NS   (1000000000LL) /* how often the canary is looked at */
#define RETRY_AFTER_ERROR (1000000000LL)

void proxyd_now(const struct proxyd *d, struct se_proxy_instant *now)
{
        now->real_ns = se_now_real_ns();
        now->mono_ns = (int64_t)se_now_mono_ns();
        now->start_mono_ns = d->start_mono_ns;
}

void proxyd_on_change(void *data, enum se_store_event ev, const struct se_object *old,
                      const struct se_object *new_obj)
{
        struct proxyd *d = data;
        const struct se_object *o = new_obj ? new_obj : old;
        struct se_proxy_instant now;
        static const char *const evs[] = { "add", "update", "delete" };
        se_log_info(4, "%s %s %s/%s", evs[ev], se_kind_name(o->kind),
                    o->meta.namespace ? o->meta.namespace : "", o->meta.name);
        proxyd_now(d, &now);
        pthread_mutex_lock(&d->mu);
        if (o->kind == SE_KIND_SERVICE_CIDR) {
                d->cidrs_changed = true; /* in the top-level chains: a full sync */
        } else if (o->kind == SE_KIND_NODE) {
                d->node_changed = true;
                /* a deleted Node: kube-proxy keeps judging the last one */
                if (new_obj)
                        d->health.node_eligible = se_proxy_node_eligible(se_node_of(new_obj));
        } else {
                se_proxy_health_queued(&d->health, &now);
                d->last_queued_ts = (double)now.real_ns / 1e9;
        }
        if (o->kind == SE_KIND_ENDPOINT_SLICE && new_obj) {
                const char *t =
                        se_kvlist_get(&new_obj->meta.annotations, SE_TRIGGER_TIME_ANNOTATION);
                int64_t ns;
                if (t && se_time_parse_rfc3339(t, &ns) == 0 && d->n_triggers < MAX_TRIGGERS)
                        d->triggers[d->n_triggers++] = ns;
        }
        d->dirty = true;
        pthread_cond_signal(&d->cond);
        pthread_mutex_unlock(&d->mu);
}

static int run_tool(const char *const *argv, char *err, size_t errsize)
{
        return se_proxy_run(argv, NULL, err, errsize);
}

/* The canary chains in mangle, nat and filter (kube-proxy's Monitor makes
 * them; they are how we notice someone flushed or deleted our rules). */
static void make_canaries(enum se_ip_family fam)
{
        static const char *const tables[] = { "mangle", "nat", "filter" };
        const char *tool = fam == SE_IPV6 ? "ip6tables" : "iptables";
        for (size_t i = 0; i < 3; i++) {
                const char *argv[] = { tool, "-w", "5", "-t", tables[i], "-N", CANARY, NULL };
                char err[256];
                (void)run_tool(argv, err, sizeof(err)); /* exists already: fine */
        }
}

/* True when the canary is gone or the nat entry jump is (`iptables -t nat
 * -F` keeps the chains but drops the jump). */
static bool rules_lost(enum se_ip_family fam)
{
        const char *tool = fam == SE_IPV6 ? "ip6tables" : "iptables";
        const char *canary[] = { tool, "-w", "5", "-t", "mangle", "-S", CANARY, NULL };
        const char *jump[] = { tool,
                               "-w",
                               "5",
                               "-t",
                               "nat",
                               "-C",
                               "PREROUTING",
                               "-m",
                               "comment",
                               "--comment",
                               "kubernetes service portals",
                               "-j",
                               "KUBE-SERVICES",
                               NULL };
        char err[256];
        return run_tool(canary, err, sizeof(err)) < 0 || run_tool(jump, err, sizeof(err)) < 0;
}

/* nft: true when our table, its nat-prerouting base chain or that chain's
 * rule is gone (`nft flush ruleset`, `nft flush table`, `nft delete table
 * ...`); read over netlink (`nft list chain` takes seconds with 10,000
 * services: the tool reads the whole ruleset). */
static bool nft_rules_lost(enum se_ip_family fam)
{
        size_t rules = 0;
        return se_proxy_nft_chain_rules(fam, "nat-prerouting", &rules) < 0 || rules == 0;
}

static size_t count_rules(const char *s, size_t n)
{
        size_t k = 0;
        for (size_t i = 0; i + 1 < n; i++)
                if ((i == 0 || s[i - 1] == '\n') && s[i] == '-' &&
                    (s[i + 1] == 'A' || s[i + 1] == 'I' || s[i + 1] == 'D'))
                        k++;
        return k;
}

/* kube-proxy logs the input around a failing line: "line N failed". */
static void log_failed_line(const char *err, const char *text, size_t len)
{
        const char *at = strstr(err, "line ");
        char *end;
        long n = at ? strtol(at + 5, &end, 10) : 0;
        if (n <= 0)
                return;
        const char *p = text, *stop = text + len;
        for (long i = 1; i < n - 1 && p < stop; i++) {
                const char *nl = memchr(p, '\n', (size_t)(stop - p));
                p = nl ? nl + 1 : stop;
        }
        for (long i = n - 1; i <= n + 1 && p < stop; i++) {
                const char *nl = memchr(p, '\n', (size_t)(stop - p));
                size_t l = nl ? (size_t)(nl - p) : (size_t)(stop - p);
                se_log_error("restore input %s%ld: %.*s", i == n ? "> " : "  ", i, (int)l, p);
                p += l + 1;
        }
}

/* Seeds the tracker with the chains iptables has now, so stale ones from
 * an earlier run are deleted (kube-proxy does this on full syncs). */
static void seed_existing(struct proxyd *d, unsigned i)
{
        struct se_strbuf saved;
        struct se_strv chains = SE_STRV_INIT;
        char err[256];
        se_strbuf_init(&saved, 0);
        if (se_proxy_save_nat(d->fams[i], &saved, err, sizeof(err)) == 0 &&
            se_proxy_parse_save_chains(saved.buf, saved.len, &chains) == 0)
                (void)se_proxy_tracker_seed(d->tr[i], &chains);
        se_strv_release(&chains);
        se_strbuf_release(&saved);
}

static void delete_conntrack(struct proxyd *d, unsigned i, const struct se_proxy_table *cur)
{
        struct se_proxy_ct_plan plan;
        if (se_proxy_ct_plan(d->last[i], cur, &plan) < 0)
                return;
        for (size_t k = 0; k < plan.n; k++) {
                const char *argv[16];
                char port[12], err[256];
                se_proxy_ct_argv(&plan.flows[k], d->fams[i], port, argv);
                /* conntrack exits 1 when nothing matched */
                int r = se_proxy_run(argv, NULL, err, sizeof(err));
                if (r == -ENOENT) {
                        /* not installed: say so once (a log line per flow
                         * would flood), count every flow left stale */
                        pthread_mutex_lock(&d->mu);
                        bool first = d->conntrack_missing++ == 0;
                        pthread_mutex_unlock(&d->mu);
                        if (first)
                                se_log_error("conntrack is not installed (%s): stale UDP flows to "
                                             "removed endpoints stay until they time out; "
                                             "counted in svcenv_proxy_tool_missing_total",
                                             err);
                        continue;
                }
                se_log_info(4, "conntrack -D --orig-dst %s --dst-nat %s port %d: %s",
                            plan.flows[k].orig_dst, plan.flows[k].dst_nat,
                            plan.flows[k].orig_port_dst, r == 0 ? "deleted" : err);
                pthread_mutex_lock(&d->mu);
                d->ct_deletes += r == 0;
                pthread_mutex_unlock(&d->mu);
        }
        se_proxy_ct_plan_release(&plan);
}

/* One sync of every family. Returns whether all applied. */
/* kube-proxy's large-cluster mode: over 1000 endpoints in the last table */
static bool large_cluster(const struct proxyd *d)
{
        for (unsigned i = 0; i < d->n_fams; i++)
                if (d->last[i] && d->last[i]->n_endpoints > SE_PROXY_LARGE_CLUSTER_ENDPOINTS)
                        return true;
        return false;
}

static bool sync_rules(struct proxyd *d, bool full)
{
        struct se_proxy_table *t[2] = { NULL, NULL };
        struct se_proxy_instant start, end;
        int64_t triggers[MAX_TRIGGERS];
        size_t n_triggers;
        bool ok = true, partial = false;
        proxyd_now(d, &start);
        pthread_mutex_lock(&d->mu);
        d->dirty = false;
        n_triggers = d->n_triggers;
        memcpy(triggers, d->triggers, n_triggers * sizeof(*triggers));
        d->n_triggers = 0;
        pthread_mutex_unlock(&d->mu);

        se_store_rdlock(d->store);
        for (unsigned i = 0; i < d->n_fams; i++) {
                int r = se_proxy_table_build(d->store, &d->opt, d->fams[i], &t[i]);
                if (r < 0) {
                        se_log_error("building the rules: %s", strerror(-r));
                        ok = false;
                }
        }
        se_store_unlock(d->store);
        size_t bytes = 0, rules = 0;
        for (unsigned i = 0; ok && i < d->n_fams; i++) {
                struct se_strbuf sb;
                char err[1024];
                int r;
                if (full)
                        se_proxy_tracker_force_full(d->tr[i]);
                if (full && !d->nft)
                        seed_existing(d, i);
                /* nft: a full sync flushes and deletes by name, so it must
                 * know what the table holds now, not what we last wrote */
                if (full && d->nft && (r = se_proxy_nft_seed_existing(d->tr[i], d->fams[i])) < 0)
                        se_log_warn("listing our nft table: %s", strerror(-r));
                se_strbuf_init(&sb, 0);
                r = d->nft ? se_proxy_nft_sync(t[i], &d->opt, d->tr[i], &sb) :
                             se_proxy_iptables_sync(t[i], &d->opt, d->tr[i], &sb);
                if (r == 0) {
                        enum se_proxy_tool tool = d->nft ? SE_PROXY_NFT :
                                                  d->fams[i] == SE_IPV6 ?
                                                           SE_PROXY_IP6TABLES_RESTORE :
                                                           SE_PROXY_IPTABLES_RESTORE;
                        bytes += sb.len;
                        rules += count_rules(sb.buf, sb.len);
                        if (se_log_verbosity() >= 5)
                                se_log_info(5, "restore input:\n%.*s", (int)sb.len, sb.buf);
                        /* a minimal partial sync with nothing to change writes nothing */
                        r = sb.len ? se_proxy_apply(tool, sb.buf, sb.len, err, sizeof(err)) : 0;
                        if (r == -EPROTO)
                                log_failed_line(err, sb.buf, sb.len);
                } else {
                        snprintf(err, sizeof(err), "writing the rules: %s", strerror(-r));
                }
                /* after a full sync the tracker keeps the text (sb is left empty) */
                partial = se_proxy_tracker_done(d->tr[i], r == 0, &sb);
                se_strbuf_release(&sb);
                if (r == 0 && full && !d->nft) {
                        r = se_proxy_ensure_jumps(d->fams[i], err, sizeof(err));
                        make_canaries(d->fams[i]);
                }
                if (r < 0) {
                        se_log_error("sync failed (%s): %s; the previous rules stay, next sync "
                                     "is full",
                                     partial ? "partial" : "full", err);
                        se_proxy_tracker_force_full(d->tr[i]);
                        pthread_mutex_lock(&d->mu);
                        d->restore_failures++;
                        d->partial_restore_failures += partial;
                        pthread_mutex_unlock(&d->mu);
                        ok = false;
                }
        }
        if (ok)
                for (unsigned i = 0; i < d->n_fams; i++) {
                        delete_conntrack(d, i, t[i]);
                        se_proxy_table_free(d->last[i]);
                        d->last[i] = t[i];
                        t[i] = NULL;
                }
        if (ok)
                proxyd_hc_update(d, d->last, d->n_fams);
        for (unsigned i = 0; i < d->n_fams; i++)
                se_proxy_table_free(t[i]);
        proxyd_now(d, &end);
        double dt = (double)(end.mono_ns - start.mono_ns) / 1e9;
        pthread_mutex_lock(&d->mu);
        se_histogram_observe(&d->sync_all, dt);
        se_histogram_observe(partial ? &d->sync_partial : &d->sync_full, dt);
        if (ok) {
                se_proxy_health_updated(&d->health, &end);
                d->last_sync_ts = (double)end.real_ns / 1e9;
                d->bytes_last = bytes;
                d->bytes_total += bytes;
                d->rules_written_total += rules;
                if (partial)
                        d->syncs_partial++;
                else
                        d->syncs_full++;
                for (size_t k = 0; k < n_triggers; k++)
                        if (triggers[k] <= end.real_ns)
                                se_histogram_observe(&d->netprog,
                                                     (double)(end.real_ns - triggers[k]) / 1e9);
        } else {
                /* the changes are still to be programmed */
                d->dirty = true;
        }
        pthread_mutex_unlock(&d->mu);
        se_log_info(2, "%s sync %s in %.3f ms: %zu bytes, %zu rules", partial ? "partial" : "full",
                    ok ? "done" : "FAILED", dt * 1e3, bytes, rules);
        return ok;
}

/* Re-reads our Node's zone label; true when it changed. */
static bool node_zone(struct proxyd *d)
{
        const char *zone = NULL;
        bool changed;
        se_store_rdlock(d->store);
        const struct se_object *o = se_store_get(d->store, SE_KIND_NODE, "", d->hostname);
        if (o)
                zone = se_kvlist_get(&o->meta.labels, "topology.kubernetes.io/zone");
        changed =
                (zone == NULL) != (d->opt.zone == NULL) || (zone && strcmp(zone, d->opt.zone) != 0);
        if (changed) {
                free(SE_UNCONST(char, d->opt.zone));
                d->opt.zone = zone ? se_strdup(zone) : NULL;
        }
        se_store_unlock(d->store);
        return changed;
}

static struct timespec deadline_in(int64_t ns)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t t = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec + (ns > 0 ? ns : 0);
        ts.tv_sec = (time_t)(t / 1000000000LL);
        ts.tv_nsec = (long)(t % 1000000000LL);
        return ts;
}

void proxyd_run(struct proxyd *d)
{
        for (unsigned i = 0; i < d->n_fams; i++)
                if (!(d->tr[i] = se_proxy_tracker_new()))
                        return;
                else
                        se_proxy_tracker_set_minimal(d->tr[i], d->minimal);
        d->need_full = true;
        for (;;) {
                int64_t now = (int64_t)se_now_mono_ns();
                if (now - d->last_canary_mono >= CANARY_CHECK_NS && d->last_full_mono != 0) {
                        d->last_canary_mono = now;
                        for (unsigned i = 0; i < d->n_fams; i++)
                                if (d->nft ? nft_rules_lost(d->fams[i]) : rules_lost(d->fams[i])) {
                                        se_log_warn("our %s rules were flushed or the canary "
                                                    "deleted: full resync",
                                                    d->nft ? "nftables" : "iptables");
                                        d->need_full = true;
                                        pthread_mutex_lock(&d->mu);
                                        d->canary_repairs++;
                                        pthread_mutex_unlock(&d->mu);
                                }
                }
                pthread_mutex_lock(&d->mu);
                bool stop = d->stop, dirty = d->dirty, node = d->node_changed;
                d->node_changed = false;
                /* kube-proxy waits for its next full sync; svcenv does it now */
                d->need_full |= d->cidrs_changed;
                d->cidrs_changed = false;
                pthread_mutex_unlock(&d->mu);
                if (node && node_zone(d)) /* topology hints depend on it: as kube-proxy */
                        d->need_full = true;
                /* periodic full syncs, except in large-cluster mode: there a
                 * full apply costs seconds to minutes (kube-proxy skips them
                 * too); the canary check still forces one when rules vanish */
                bool periodic = !large_cluster(d);
                bool full =
                        d->need_full || (periodic && now - d->last_full_mono >= d->sync_period_ns);
                if (stop)
                        break;
                int64_t since = now - d->last_sync_mono;
                if ((full || dirty) && (d->last_sync_mono == 0 || since >= d->min_sync_period_ns)) {
                        bool ok = sync_rules(d, full);
                        d->last_sync_mono = (int64_t)se_now_mono_ns();
                        if (full && ok)
                                d->last_full_mono = d->last_sync_mono;
                        d->need_full = !ok;
                        continue;
                }
                /* sleep until the next sync may run, a change, the canary check or the period */
                int64_t wait = CANARY_CHECK_NS;
                if (full || dirty)
                        wait = d->min_sync_period_ns - since;
                else if (periodic && d->sync_period_ns - (now - d->last_full_mono) < wait)
                        wait = d->sync_period_ns - (now - d->last_full_mono);
                if (d->need_full && wait > RETRY_AFTER_ERROR)
                        wait = RETRY_AFTER_ERROR;
                struct timespec ts = deadline_in(wait);
                pthread_mutex_lock(&d->mu);
                if (!d->stop && !(d->dirty && !dirty))
                        pthread_cond_timedwait(&d->cond, &d->mu, &ts);
                pthread_mutex_unlock(&d->mu);
        }
        for (unsigned i = 0; i < d->n_fams; i++) {
                d->tr[i] = se_proxy_tracker_free(d->tr[i]);
                d->last[i] = se_proxy_table_free(d->last[i]);
        }
}

/* The proxier: kube-proxy's sync loop and its policy (see proxy_proxier.h
 * for the policy and the writer/tracker protocol). Everything it does to
 * the system goes through the runner. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <svcenv/alloc.h>
#include <svcenv/endpoints.h>
#include <svcenv/hashmap.h>
#include <svcenv/histogram.h>
#include <svcenv/log.h>
#include <svcenv/proxy_proxier.h>
#include <svcenv/strv.h>
#include <svcenv/timeutil.h>

#include "proxy_internal.h"

#define CANARY            "KUBE-PROXY-CANARY"
#define CANARY_CHECK_NS   (1000000000LL) /* how often the canary is looked at */
#define RETRY_AFTER_ERROR (1000000000LL)
#define MAX_TRIGGERS      4096 /* pending trigger times kept for the latency metric */
/* services carried to one sync; more: rebuilt from the whole table */
#define MAX_CHANGED 1024
/* carried syncs patched into the last table before it is built anew
 * (each keeps its small table's memory) */
#define MAX_PATCHES        256
#define LABEL_SERVICE_NAME "kubernetes.io/service-name"

struct se_proxy_proxier {
        struct se_proxy_proxier_config cfg;
        struct se_proxy_runner run;
        struct se_proxy_options opt; /* zone owned */
        enum se_ip_family fams[2];
        unsigned n_fams;
        int64_t start_mono_ns;
        bool begun;

        pthread_mutex_t mu; /* guards everything down to the sync thread's part */
        pthread_cond_t cond;
        bool dirty, stop, node_changed, cidrs_changed;
        struct se_proxy_health health;
        int64_t triggers[MAX_TRIGGERS];
        size_t n_triggers;
        struct se_proxy_proxier_stats stats;
        struct se_proxy_hc_port hc[SE_PROXY_MAX_HC_PORTS];
        size_t n_hc;
        /* changes carried from the store: the services ("ns/name", keys
         * owned) changed since the last sync began; lost: some change
         * cannot be carried (too many) */
        struct se_hashmap changed;
        bool changes_lost;
        /* atomic: no lock */
        struct se_histogram sync_all, sync_full, sync_partial, netprog;

        /* the sync thread's */
        struct se_proxy_tracker *tr[2];
        struct se_proxy_table *last[2];
        int64_t last_full_mono, last_sync_mono, last_canary_mono;
        bool need_full;
        unsigned patches; /* carried syncs patched into last[] */
        /* nft: the hairpin elements of last[] and how many ports write
         * each (a carried sync must not delete one another port has);
         * made by the first carried sync after last[] was built */
        struct se_hashmap hairpin;
        bool hairpin_valid;
        /* last[i]'s port array once a carried sync added or removed ports
         * (NULL: still the one in last[i]'s arena), with room for more:
         * an add moves the ports after it, not the whole table */
        struct se_proxy_svcport *own_ports[2];
        uint32_t own_cap[2];
};

static void now_of(const struct se_proxy_proxier *p, struct se_proxy_instant *now)
{
        p->run.now(p->run.ctx, now);
        now->start_mono_ns = p->start_mono_ns;
}

static const double sync_le[] = { 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128,
                                  0.256, 0.512, 1.024, 2.048, 4.096, 8.192, 16.384 };

/* kube-proxy's network programming buckets: 0.25, 0.5, 1..59, 60..115 by 5,
 * 120..300 by 30 */
static double net_le[79];
static size_t net_n;
static pthread_once_t net_once = PTHREAD_ONCE_INIT;

static void net_buckets(void)
{
        net_le[net_n++] = 0.25;
        net_le[net_n++] = 0.5;
        for (int i = 1; i <= 59; i++)
                net_le[net_n++] = i;
        for (int i = 0; i < 12; i++)
                net_le[net_n++] = 60 + 5 * i;
        for (int i = 0; i < 7 && net_n < SE_ARRAY_SIZE(net_le); i++)
                net_le[net_n++] = 120 + 30 * i;
}

static void changes_release(struct se_hashmap *m)
{
        const char *k;
        for (size_t it = 0; se_hashmap_next(m, &it, &k, NULL);)
                free(SE_UNCONST(char, k));
        se_hashmap_release(m);
}

/* Records service ns/name as changed (mu held). */
static void change(struct se_proxy_proxier *p, const char *ns, const char *name)
{
        char key[512];
        if (!ns || !name || p->changes_lost)
                return;
        if ((size_t)snprintf(key, sizeof(key), "%s/%s", ns, name) >= sizeof(key) ||
            p->changed.n >= MAX_CHANGED) {
                p->changes_lost = true;
                return;
        }
        if (se_hashmap_get(&p->changed, key))
                return;
        char *own = se_strdup(key);
        if (!own || se_hashmap_put(&p->changed, own, own, NULL) < 0) {
                free(own);
                p->changes_lost = true;
        }
}

/* The service an EndpointSlice is of (kube-proxy's slice cache keys them
 * by this label; a slice without it belongs to none). */
static const char *slice_service(const struct se_object *o)
{
        return o ? se_kvlist_get(&o->meta.labels, LABEL_SERVICE_NAME) : NULL;
}

struct se_proxy_proxier *se_proxy_proxier_new(const struct se_proxy_proxier_config *cfg,
                                              const struct se_proxy_runner *runner)
{
        struct se_proxy_proxier *p = se_calloc(1, sizeof(*p));
        if (!p)
                return NULL;
        p->cfg = *cfg;
        p->run = *runner;
        se_proxy_options_init(&p->opt);
        struct se_proxy_instant now;
        p->run.now(p->run.ctx, &now);
        p->start_mono_ns = now.mono_ns;
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&p->cond, &ca);
        pthread_condattr_destroy(&ca);
        pthread_mutex_init(&p->mu, NULL);
        se_proxy_health_init(&p->health, 2 * cfg->sync_period_ns);
        pthread_once(&net_once, net_buckets);
        se_histogram_init(&p->sync_all, sync_le, SE_ARRAY_SIZE(sync_le));
        se_histogram_init(&p->sync_full, sync_le, SE_ARRAY_SIZE(sync_le));
        se_histogram_init(&p->sync_partial, sync_le, SE_ARRAY_SIZE(sync_le));
        se_histogram_init(&p->netprog, net_le, net_n);
        return p;
}

struct se_proxy_proxier *se_proxy_proxier_free(struct se_proxy_proxier *p)
{
        if (!p)
                return NULL;
        for (unsigned i = 0; i < 2; i++) {
                se_proxy_tracker_free(p->tr[i]);
                se_proxy_table_free(p->last[i]);
                free(p->own_ports[i]);
        }
        free(SE_UNCONST(char, p->opt.zone));
        changes_release(&p->changed);
        proxy_nft_hairpin_release(&p->hairpin);
        pthread_cond_destroy(&p->cond);
        pthread_mutex_destroy(&p->mu);
        free(p);
        return NULL;
}

int se_proxy_proxier_begin(struct se_proxy_proxier *p, const struct se_proxy_options *opt,
                           const enum se_ip_family *fams, unsigned n_fams)
{
        char *zone = opt->zone ? se_strdup(opt->zone) : NULL;
        if (opt->zone && !zone)
                return -ENOMEM;
        free(SE_UNCONST(char, p->opt.zone));
        p->opt = *opt;
        p->opt.zone = zone;
        p->n_fams = n_fams > 2 ? 2 : n_fams;
        memcpy(p->fams, fams, p->n_fams * sizeof(*fams));
        for (unsigned i = 0; i < p->n_fams; i++) {
                if (!p->tr[i] && !(p->tr[i] = se_proxy_tracker_new()))
                        return -ENOMEM;
                se_proxy_tracker_set_minimal(p->tr[i], p->cfg.minimal);
        }
        /* kube-proxy's SyncLoop start: every family counts as updated now
         * (in case no sync ever succeeds); the last queued time is now */
        struct se_proxy_instant now;
        now_of(p, &now);
        pthread_mutex_lock(&p->mu);
        se_proxy_health_families(&p->health, p->fams, p->n_fams);
        se_proxy_health_updated(&p->health, &now);
        p->stats.last_queued_ts = (double)now.real_ns / 1e9;
        pthread_mutex_unlock(&p->mu);
        p->need_full = true;
        p->begun = true;
        return 0;
}

void se_proxy_proxier_on_change(void *data, enum se_store_event ev, const struct se_object *old,
                                const struct se_object *new_obj)
{
        struct se_proxy_proxier *p = data;
        const struct se_object *o = new_obj ? new_obj : old;
        struct se_proxy_instant now;
        static const char *const evs[] = { "add", "update", "delete" };
        se_log_info(4, "%s %s %s/%s", evs[ev], se_kind_name(o->kind),
                    o->meta.namespace ? o->meta.namespace : "", o->meta.name);
        now_of(p, &now);
        pthread_mutex_lock(&p->mu);
        if (o->kind == SE_KIND_SERVICE_CIDR) {
                p->cidrs_changed = true; /* in the top-level chains: a full sync */
        } else if (o->kind == SE_KIND_NODE) {
                p->node_changed = true;
                /* a deleted Node: kube-proxy keeps judging the last one */
                if (new_obj)
                        p->health.node_eligible = se_proxy_node_eligible(se_node_of(new_obj));
        } else {
                se_proxy_health_queued(&p->health, &now);
                p->stats.last_queued_ts = (double)now.real_ns / 1e9;
        }
        if (o->kind == SE_KIND_SERVICE) {
                change(p, o->meta.namespace, o->meta.name);
        } else if (o->kind == SE_KIND_ENDPOINT_SLICE) {
                const char *was = slice_service(old), *is = slice_service(new_obj);
                change(p, o->meta.namespace, was);
                if (is && (!was || strcmp(is, was) != 0))
                        change(p, o->meta.namespace, is);
        }
        if (o->kind == SE_KIND_ENDPOINT_SLICE && new_obj) {
                const char *t =
                        se_kvlist_get(&new_obj->meta.annotations, SE_TRIGGER_TIME_ANNOTATION);
                int64_t ns;
                if (t && se_time_parse_rfc3339(t, &ns) == 0 && p->n_triggers < MAX_TRIGGERS)
                        p->triggers[p->n_triggers++] = ns;
        }
        p->dirty = true;
        pthread_cond_signal(&p->cond);
        pthread_mutex_unlock(&p->mu);
}

/* ---- the system, through the runner ---- */

static const char *iptables_tool(enum se_ip_family fam)
{
        return fam == SE_IPV6 ? "ip6tables" : "iptables";
}

/* The canary chains in mangle, nat and filter (kube-proxy's Monitor makes
 * them; they are how we notice someone flushed or deleted our rules). */
static void make_canaries(struct se_proxy_proxier *p, enum se_ip_family fam)
{
        static const char *const tables[] = { "mangle", "nat", "filter" };
        for (size_t i = 0; i < 3; i++) {
                const char *argv[] = { iptables_tool(fam), "-w", "5",    "-t",
                                       tables[i],          "-N", CANARY, NULL };
                char err[256];
                (void)p->run.run(p->run.ctx, argv, NULL, err, sizeof(err)); /* exists: fine */
        }
}

/* True when the canary is gone or the nat entry jump is (`iptables -t nat
 * -F` keeps the chains but drops the jump); nft: our table, its
 * nat-prerouting base chain or that chain's rule (read over netlink: `nft
 * list chain` reads the whole ruleset). */
static bool rules_lost(struct se_proxy_proxier *p, enum se_ip_family fam)
{
        if (p->cfg.nft) {
                size_t rules = 0;
                return p->run.nft_chain_rules(p->run.ctx, fam, "nat-prerouting", &rules) < 0 ||
                       rules == 0;
        }
        const char *tool = iptables_tool(fam);
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
        return p->run.run(p->run.ctx, canary, NULL, err, sizeof(err)) < 0 ||
               p->run.run(p->run.ctx, jump, NULL, err, sizeof(err)) < 0;
}

/* Tells the tracker what the kernel has before a full sync: iptables our
 * chains from iptables-save (stale ones from an earlier run are deleted,
 * as kube-proxy's full sync does), nft the names in our table (a full sync
 * flushes and deletes by name: it must know what the table holds now). */
static void seed_existing(struct se_proxy_proxier *p, unsigned i)
{
        struct se_strv names = SE_STRV_INIT;
        char err[256];
        int r;
        if (p->cfg.nft) {
                se_proxy_tracker_reset(p->tr[i]);
                r = p->run.nft_names(p->run.ctx, p->fams[i], &names);
                if (r == 0)
                        r = se_proxy_tracker_seed(p->tr[i], &names);
                if (r < 0)
                        se_log_warn("listing our nft table: %s", strerror(-r));
        } else {
                const char *argv[] = { p->fams[i] == SE_IPV6 ? "ip6tables-save" : "iptables-save",
                                       "-t", "nat", NULL };
                struct se_strbuf saved;
                se_strbuf_init(&saved, 0);
                if (p->run.run(p->run.ctx, argv, &saved, err, sizeof(err)) == 0 &&
                    se_proxy_parse_save_chains(saved.buf, saved.len, &names) == 0)
                        (void)se_proxy_tracker_seed(p->tr[i], &names);
                se_strbuf_release(&saved);
        }
        se_strv_release(&names);
}

int se_proxy_proxier_ct_delete(struct se_proxy_proxier *p, const struct se_proxy_ct_flow *fl,
                               enum se_ip_family fam)
{
        const char *argv[16];
        char port[12], err[256];
        se_proxy_ct_argv(fl, fam, port, argv);
        /* conntrack exits 1 when nothing matched */
        int r = p->run.run(p->run.ctx, argv, NULL, err, sizeof(err));
        if (r == -ENOENT) {
                /* not installed: say so once (a log line per flow would
                 * flood), count every flow left stale */
                pthread_mutex_lock(&p->mu);
                bool first = p->stats.conntrack_missing++ == 0;
                pthread_mutex_unlock(&p->mu);
                if (first)
                        se_log_error("conntrack is not installed (%s): stale UDP flows to "
                                     "removed endpoints stay until they time out; "
                                     "counted in svcenv_proxy_tool_missing_total",
                                     err);
                return r;
        }
        se_log_info(4, "conntrack -D --orig-dst %s --dst-nat %s port %d: %s", fl->orig_dst,
                    fl->dst_nat, fl->orig_port_dst, r == 0 ? "deleted" : err);
        pthread_mutex_lock(&p->mu);
        p->stats.ct_deletes += r == 0;
        pthread_mutex_unlock(&p->mu);
        return r;
}

static void delete_conntrack(struct se_proxy_proxier *p, unsigned i,
                             const struct se_proxy_table *old, const struct se_proxy_table *cur)
{
        struct se_proxy_ct_plan plan;
        if (se_proxy_ct_plan(old, cur, &plan) < 0)
                return;
        for (size_t k = 0; k < plan.n; k++)
                (void)se_proxy_proxier_ct_delete(p, &plan.flows[k], p->fams[i]);
        se_proxy_ct_plan_release(&plan);
}

/* ---- one sync ---- */

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
        const char *s = text, *stop = text + len;
        for (long i = 1; i < n - 1 && s < stop; i++) {
                const char *nl = memchr(s, '\n', (size_t)(stop - s));
                s = nl ? nl + 1 : stop;
        }
        for (long i = n - 1; i <= n + 1 && s < stop; i++) {
                const char *nl = memchr(s, '\n', (size_t)(stop - s));
                size_t l = nl ? (size_t)(nl - s) : (size_t)(stop - s);
                se_log_error("restore input %s%ld: %.*s", i == n ? "> " : "  ", i, (int)l, s);
                s += l + 1;
        }
}

/* kube-proxy's large-cluster mode: over 1000 endpoints in the last table */
static bool large_cluster(const struct se_proxy_proxier *p)
{
        for (unsigned i = 0; i < p->n_fams; i++)
                if (p->last[i] && p->last[i]->n_endpoints > SE_PROXY_LARGE_CLUSTER_ENDPOINTS)
                        return true;
        return false;
}

/* LocalReadyEndpoints of every eTP-Local service with a health-check node
 * port (first come first kept, as the ports are unique per cluster). */
static size_t hc_ports(struct se_proxy_table *const *tables, unsigned nt,
                       struct se_proxy_hc_port *out)
{
        size_t n = 0;
        for (unsigned f = 0; f < nt; f++)
                for (uint32_t i = 0; tables[f] && i < tables[f]->n_ports; i++) {
                        const struct se_proxy_svcport *sp = &tables[f]->ports[i];
                        if (!sp->health_check_node_port)
                                continue;
                        struct se_proxy_hc_port *w = NULL;
                        for (size_t k = 0; k < n && !w; k++)
                                if (out[k].port == sp->health_check_node_port)
                                        w = &out[k];
                        if (!w) {
                                if (n == SE_PROXY_MAX_HC_PORTS)
                                        continue;
                                w = &out[n++];
                                memset(w, 0, sizeof(*w));
                                w->port = sp->health_check_node_port;
                                snprintf(w->ns, sizeof(w->ns), "%s", sp->ns);
                                snprintf(w->name, sizeof(w->name), "%s", sp->name);
                        }
                        for (uint32_t e = 0; e < sp->n_eps; e++)
                                w->local += sp->eps[e].local && sp->eps[e].ready;
                }
        return n;
}

/* Writes and applies one family's table; returns 0 or a negative errno
 * with err filled; *partial: whether the tracker made it a partial one. */
static int sync_family(struct se_proxy_proxier *p, unsigned i, const struct se_proxy_table *t,
                       bool full, size_t *bytes, size_t *rules, bool *partial, char *err,
                       size_t errsize)
{
        struct se_strbuf sb;
        int r;
        if (full) {
                se_proxy_tracker_force_full(p->tr[i]);
                seed_existing(p, i);
        }
        se_strbuf_init(&sb, 0);
        r = p->cfg.nft ? se_proxy_nft_sync(t, &p->opt, p->tr[i], &sb) :
                         se_proxy_iptables_sync(t, &p->opt, p->tr[i], &sb);
        if (r == 0) {
                enum se_proxy_tool tool = p->cfg.nft            ? SE_PROXY_NFT :
                                          p->fams[i] == SE_IPV6 ? SE_PROXY_IP6TABLES_RESTORE :
                                                                  SE_PROXY_IPTABLES_RESTORE;
                *bytes += sb.len;
                *rules += count_rules(sb.buf, sb.len);
                if (se_log_verbosity() >= 5)
                        se_log_info(5, "restore input:\n%.*s", (int)sb.len, sb.buf);
                /* a minimal partial sync with nothing to change writes nothing */
                r = sb.len ? p->run.apply(p->run.ctx, tool, sb.buf, sb.len, err, errsize) : 0;
                if (r == -EPROTO)
                        log_failed_line(err, sb.buf, sb.len);
        } else {
                snprintf(err, errsize, "writing the rules: %s", strerror(-r));
        }
        /* the protocol: done with the outcome, before sb is released */
        *partial = se_proxy_tracker_done(p->tr[i], r == 0, &sb);
        se_strbuf_release(&sb);
        if (r == 0 && full && !p->cfg.nft) {
                r = p->run.ensure_jumps(p->run.ctx, p->fams[i], err, errsize);
                make_canaries(p, p->fams[i]);
        }
        return r;
}

/* ---- carried syncs: only the services the store said changed ---- */

/* Whether the last table can be patched by a carried sync. */
static bool can_carry(const struct se_proxy_proxier *p, size_t n_keys)
{
        if (!p->cfg.minimal || n_keys == 0 || p->patches >= MAX_PATCHES)
                return false;
        for (unsigned i = 0; i < p->n_fams; i++)
                if (!p->last[i])
                        return false;
        return true;
}

static int cmp_u32(const void *x, const void *y)
{
        uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
        return a < b ? -1 : a > b;
}

static int cmp_svcport(const struct se_proxy_svcport *a, const struct se_proxy_svcport *b)
{
        int c = strcmp(a->spn, b->spn);
        return c ? c : (int)a->protocol - (int)b->protocol;
}

/* NO_PORT: a pair's side that has no port (added, or removed) */
#define NO_PORT UINT32_MAX

/* How the changed services' ports of last (the last applied table) pair
 * with those of small (the same services as the store has them now), both
 * in table order: before[k] indexes last, after[k] small; NO_PORT on one
 * side for a port added or removed. */
struct carry_pairs {
        uint32_t *before, *after;
        uint32_t n, added, removed;
        uint32_t old_eps; /* the endpoints of the ports before */
};

static void pairs_release(struct carry_pairs *c)
{
        free(c->before);
        free(c->after);
        memset(c, 0, sizeof(*c));
}

/* The pairs of keys' services (ports added and removed included). */
static int match(const struct se_proxy_table *last, const struct se_proxy_table *small,
                 const struct se_strv *keys, struct carry_pairs *c)
{
        uint32_t *had = NULL, n_had = 0, cap = 0;
        int r = 0;
        memset(c, 0, sizeof(*c));
        se_strv_foreach(key, keys) {
                size_t kl = strlen(*key);
                const char *slash = strchr(*key, '/');
                if (!slash)
                        continue;
                size_t nsl = (size_t)(slash - *key);
                /* ports are sorted by spn ("ns/name[:port]"): the first at
                 * or after the key, then those sharing its prefix */
                uint32_t lo = 0, hi = last->n_ports;
                while (lo < hi) {
                        uint32_t mid = lo + (hi - lo) / 2;
                        if (strcmp(last->ports[mid].spn, *key) < 0)
                                lo = mid + 1;
                        else
                                hi = mid;
                }
                for (uint32_t k = lo; k < last->n_ports; k++) {
                        const struct se_proxy_svcport *sp = &last->ports[k];
                        if (strncmp(sp->spn, *key, kl) != 0)
                                break;
                        if (strlen(sp->ns) != nsl || strncmp(sp->ns, *key, nsl) != 0 ||
                            strcmp(sp->name, slash + 1) != 0)
                                continue;
                        if (n_had == cap) {
                                cap = cap ? 2 * cap : 16;
                                uint32_t *v = se_reallocarray(had, cap, sizeof(*v));
                                if (!v) {
                                        free(had);
                                        return -ENOMEM;
                                }
                                had = v;
                        }
                        had[n_had++] = k;
                        c->old_eps += sp->n_eps;
                }
        }
        if (n_had > 1)
                qsort(had, n_had, sizeof(*had), cmp_u32);
        size_t most = (size_t)n_had + small->n_ports + 1;
        c->before = se_calloc(most, sizeof(*c->before));
        c->after = se_calloc(most, sizeof(*c->after));
        if (!c->before || !c->after)
                r = -ENOMEM;
        /* both in table order: a merge */
        for (uint32_t i = 0, j = 0; r == 0 && (i < n_had || j < small->n_ports);) {
                int d = i == n_had          ? 1 :
                        j == small->n_ports ? -1 :
                                              cmp_svcport(&last->ports[had[i]], &small->ports[j]);
                c->before[c->n] = d <= 0 ? had[i++] : NO_PORT;
                c->after[c->n] = d >= 0 ? j++ : NO_PORT;
                c->removed += d < 0;
                c->added += d > 0;
                c->n++;
        }
        free(had);
        if (r < 0)
                pairs_release(c);
        return r;
}

/* Patches small's ports into last (p->last[i]) in place of the pairs' old
 * ones, which are copied to old[] first (table order, those that were);
 * last keeps small's memory. Ports added or removed move last's array to
 * p->own_ports[i] (made once, grown by half when full) and the ports
 * after them along. 0 or -ENOMEM (last unchanged). */
static int patch(struct se_proxy_proxier *p, unsigned i, struct se_proxy_table *small,
                 const struct carry_pairs *c, struct se_proxy_svcport *old, uint32_t *n_old)
{
        struct se_proxy_table *last = p->last[i];
        uint32_t n = last->n_ports + c->added - c->removed;
        if ((c->added || c->removed) && (last->ports != p->own_ports[i] || n > p->own_cap[i])) {
                uint32_t cap = n + n / 2 + 16;
                struct se_proxy_svcport *v =
                        last->ports == p->own_ports[i] ?
                                se_reallocarray(p->own_ports[i], cap, sizeof(*v)) :
                                se_reallocarray(NULL, cap, sizeof(*v));
                if (!v)
                        return -ENOMEM;
                if (last->ports != p->own_ports[i] && last->n_ports)
                        memcpy(v, last->ports, (size_t)last->n_ports * sizeof(*v));
                last->ports = p->own_ports[i] = v;
                p->own_cap[i] = cap;
        }
        struct se_proxy_svcport *ports = last->ports;
        *n_old = 0;
        for (uint32_t k = 0; k < c->n; k++)
                if (c->before[k] != NO_PORT)
                        old[(*n_old)++] = ports[c->before[k]];
        /* the pairs in table order; shift: how far last's ports from the
         * pair on have moved (each add and remove before it moves them) */
        int64_t shift = 0;
        for (uint32_t k = 0; k < c->n; k++) {
                uint32_t at; /* the pair's place in the table now */
                uint32_t len = (uint32_t)((int64_t)last->n_ports + shift);
                if (c->before[k] != NO_PORT) {
                        at = (uint32_t)((int64_t)c->before[k] + shift);
                } else { /* the table stays sorted: its first greater port */
                        uint32_t lo = 0, hi = len;
                        while (lo < hi) {
                                uint32_t mid = lo + (hi - lo) / 2;
                                if (cmp_svcport(&ports[mid], &small->ports[c->after[k]]) < 0)
                                        lo = mid + 1;
                                else
                                        hi = mid;
                        }
                        at = lo;
                }
                if (c->before[k] == NO_PORT) { /* added: room made */
                        memmove(&ports[at + 1], &ports[at], (size_t)(len - at) * sizeof(*ports));
                        shift++;
                } else if (c->after[k] == NO_PORT) { /* removed */
                        memmove(&ports[at], &ports[at + 1],
                                (size_t)(len - at - 1) * sizeof(*ports));
                        shift--;
                        continue;
                }
                ports[at] = small->ports[c->after[k]];
        }
        last->n_ports = n;
        last->n_endpoints += small->n_endpoints;
        last->n_endpoints -= c->old_eps;
        small->patches = last->patches;
        last->patches = small;
        return 0;
}

static void hairpin_drop(struct se_proxy_proxier *p)
{
        proxy_nft_hairpin_release(&p->hairpin);
        p->hairpin_valid = false;
}

/* The hairpin counts of the last tables, made once. 0 or -ENOMEM. */
static int hairpin_refs(struct se_proxy_proxier *p)
{
        int r = 0;
        if (p->hairpin_valid)
                return 0;
        for (unsigned i = 0; i < p->n_fams && r == 0; i++)
                for (uint32_t k = 0; k < p->last[i]->n_ports && r == 0; k++)
                        r = proxy_nft_hairpin_count(&p->hairpin, &p->last[i]->ports[k], &p->opt, 1);
        if (r < 0)
                hairpin_drop(p);
        p->hairpin_valid = r == 0;
        return r;
}

/* A partial sync of just keys' services: their entries rebuilt from the
 * store, their nat chains (nft: chains, maps and top-level elements)
 * written (se_proxy_iptables_sync_changed, se_proxy_nft_sync_changed),
 * applied, patched into the last tables. Returns 0 when it cannot (the
 * caller syncs from the whole table; nothing was applied), 1 when it ran
 * (*ok: whether every family applied). */
static int sync_carried(struct se_proxy_proxier *p, struct se_store *store,
                        const struct se_strv *keys, size_t *bytes, size_t *rules, bool *ok,
                        bool *hc_touched)
{
        struct se_proxy_table *small[2] = { NULL, NULL };
        struct carry_pairs pairs[2];
        const struct se_proxy_svcport **ports[2] = { NULL, NULL }, **had[2] = { NULL, NULL };
        struct se_strbuf text[2];
        unsigned begun = 0;
        int r = 0;
        memset(pairs, 0, sizeof(pairs));
        for (unsigned i = 0; i < 2; i++)
                se_strbuf_init(&text[i], 0);
        se_store_rdlock(store);
        for (unsigned i = 0; r == 0 && i < p->n_fams; i++)
                r = se_proxy_table_build_services(store, &p->opt, p->fams[i],
                                                  (const char *const *)keys->v, keys->n, &small[i]);
        se_store_unlock(store);
        if (r == 0 && p->cfg.nft)
                r = hairpin_refs(p);
        for (unsigned i = 0; r == 0 && i < p->n_fams; i++) {
                struct se_proxy_table *last = p->last[i];
                struct carry_pairs *c = &pairs[i];
                if ((r = match(last, small[i], keys, c)) < 0)
                        break;
                uint32_t now_eps = last->n_endpoints - c->old_eps + small[i]->n_endpoints;
                bool large = last->n_endpoints > SE_PROXY_LARGE_CLUSTER_ENDPOINTS;
                if (large != (now_eps > SE_PROXY_LARGE_CLUSTER_ENDPOINTS)) {
                        r = -EAGAIN; /* every endpoint rule's comment changes */
                        break;
                }
                ports[i] = se_calloc((size_t)c->n + 1, sizeof(*ports[i]));
                had[i] = se_calloc((size_t)c->n + 1, sizeof(*had[i]));
                if (!ports[i] || !had[i]) {
                        r = -ENOMEM;
                        break;
                }
                for (uint32_t j = 0; r == 0 && j < c->n; j++) {
                        ports[i][j] = c->after[j] == NO_PORT ? NULL : &small[i]->ports[c->after[j]];
                        had[i][j] = c->before[j] == NO_PORT ? NULL : &last->ports[c->before[j]];
                        bool now_in = ports[i][j] && se_proxy_in_kernel(ports[i][j], p->cfg.nft);
                        bool had_in = had[i][j] && se_proxy_in_kernel(had[i][j], p->cfg.nft);
                        /* iptables: a port the userspace proxy serves has no
                         * rules; moving there, it is removed from the
                         * kernel's, moving back added (neither: nothing) */
                        if (!p->cfg.nft) {
                                ports[i][j] = now_in ? ports[i][j] : NULL;
                                had[i][j] = had_in ? had[i][j] : NULL;
                        } else if ((ports[i][j] && !now_in) || (had[i][j] && !had_in)) {
                                /* nft: a port moving between the kernel and
                                 * the userspace proxy, or added or removed
                                 * there, takes a table sync */
                                r = -EAGAIN;
                        }
                }
                if (r < 0)
                        break;
                r = p->cfg.nft ? proxy_nft_sync_changed(ports[i], had[i], c->n, p->fams[i], &p->opt,
                                                        &p->hairpin, p->tr[i], &text[i]) :
                                 se_proxy_iptables_sync_changed(ports[i], had[i], c->n, p->fams[i],
                                                                large, &p->opt, p->tr[i], &text[i]);
                if (r == 0)
                        begun = i + 1;
        }
        int ran = r == 0;
        if (!ran) {
                if (r != -EAGAIN)
                        se_log_warn("carried sync: %s; syncing from the whole table", strerror(-r));
                for (unsigned i = 0; i < begun; i++)
                        se_proxy_tracker_abandon(p->tr[i]);
                goto out;
        }
        *ok = true;
        for (unsigned i = 0; i < p->n_fams; i++) {
                char err[1024] = "";
                enum se_proxy_tool tool = p->cfg.nft            ? SE_PROXY_NFT :
                                          p->fams[i] == SE_IPV6 ? SE_PROXY_IP6TABLES_RESTORE :
                                                                  SE_PROXY_IPTABLES_RESTORE;
                r = !*ok        ? -ECANCELED :
                    text[i].len ? p->run.apply(p->run.ctx, tool, text[i].buf, text[i].len, err,
                                               sizeof(err)) :
                                  0;
                if (r == 0) {
                        *bytes += text[i].len;
                        *rules += count_rules(text[i].buf, text[i].len);
                        if (se_log_verbosity() >= 5)
                                se_log_info(5, "restore input:\n%.*s", (int)text[i].len,
                                            text[i].buf);
                } else if (r == -EPROTO) {
                        log_failed_line(err, text[i].buf, text[i].len);
                }
                se_proxy_tracker_done(p->tr[i], r == 0, &text[i]);
                if (r < 0 && *ok) {
                        se_log_error("sync failed (partial): %s; the previous rules stay, next "
                                     "sync is full",
                                     err);
                        pthread_mutex_lock(&p->mu);
                        p->stats.syncs_failed++;
                        p->stats.partial_failed++;
                        pthread_mutex_unlock(&p->mu);
                        *ok = false;
                }
        }
        if (*ok) {
                for (unsigned i = 0; i < p->n_fams; i++) {
                        struct se_proxy_svcport *old =
                                se_calloc((size_t)pairs[i].n + 1, sizeof(*old));
                        struct se_proxy_table *now = small[i];
                        uint32_t n_old = 0;
                        if (!old || patch(p, i, now, &pairs[i], old, &n_old) < 0) {
                                /* cannot patch: the next sync rebuilds */
                                free(old);
                                p->patches = MAX_PATCHES;
                                hairpin_drop(p);
                                continue;
                        }
                        /* the health-check ports change only with a service
                         * that has one (the list is not rebuilt otherwise:
                         * it costs the table's size) */
                        for (uint32_t j = 0; j < n_old; j++)
                                *hc_touched |= old[j].health_check_node_port != 0;
                        for (uint32_t j = 0; j < now->n_ports; j++)
                                *hc_touched |= now->ports[j].health_check_node_port != 0;
                        for (uint32_t j = 0; p->hairpin_valid && j < n_old; j++)
                                if (proxy_nft_hairpin_count(&p->hairpin, &old[j], &p->opt, -1) < 0)
                                        hairpin_drop(p);
                        for (uint32_t j = 0; p->hairpin_valid && j < now->n_ports; j++)
                                if (proxy_nft_hairpin_count(&p->hairpin, &now->ports[j], &p->opt,
                                                            1) < 0)
                                        hairpin_drop(p);
                        small[i] = NULL; /* the last table's now */
                        struct se_proxy_table was = { .family = p->fams[i],
                                                      .ports = old,
                                                      .n_ports = n_old };
                        delete_conntrack(p, i, &was, now);
                        free(old);
                }
                p->patches++;
        }
out:
        for (unsigned i = 0; i < 2; i++) {
                se_proxy_table_free(small[i]);
                pairs_release(&pairs[i]);
                free(ports[i]);
                free(had[i]);
                se_strbuf_release(&text[i]);
        }
        return ran;
}

/* One sync of every family. Returns whether all applied. */
static bool sync_rules(struct se_proxy_proxier *p, struct se_store *store, bool full)
{
        struct se_proxy_table *t[2] = { NULL, NULL };
        struct se_proxy_instant start, end;
        int64_t triggers[MAX_TRIGGERS];
        size_t n_triggers, bytes = 0, rules = 0;
        bool ok = true, partial = false, lost, hc_touched = false;
        struct se_strv keys = SE_STRV_INIT;
        int carried = 0;
        now_of(p, &start);
        pthread_mutex_lock(&p->mu);
        p->dirty = false;
        n_triggers = p->n_triggers;
        memcpy(triggers, p->triggers, n_triggers * sizeof(*triggers));
        p->n_triggers = 0;
        /* the services changed since the last sync began: this one's */
        const char *key;
        for (size_t it = 0; se_hashmap_next(&p->changed, &it, &key, NULL);)
                if (se_strv_push_consume(&keys, SE_UNCONST(char, key)) < 0)
                        p->changes_lost = true; /* k freed by the push */
        se_hashmap_release(&p->changed);
        lost = p->changes_lost;
        p->changes_lost = false;
        pthread_mutex_unlock(&p->mu);

        if (!full && !lost && can_carry(p, keys.n))
                carried = sync_carried(p, store, &keys, &bytes, &rules, &ok, &hc_touched);
        size_t rebuilt = carried ? keys.n : 0;
        se_strv_release(&keys);
        if (carried) {
                partial = true;
                goto synced;
        }
        se_store_rdlock(store);
        for (unsigned i = 0; i < p->n_fams; i++) {
                int r = se_proxy_table_build(store, &p->opt, p->fams[i], &t[i]);
                if (r < 0) {
                        se_log_error("building the rules: %s", strerror(-r));
                        ok = false;
                }
        }
        se_store_unlock(store);
        for (unsigned i = 0; ok && i < p->n_fams; i++) {
                char err[1024] = "";
                int r = sync_family(p, i, t[i], full, &bytes, &rules, &partial, err, sizeof(err));
                if (r < 0) {
                        se_log_error("sync failed (%s): %s; the previous rules stay, next sync "
                                     "is full",
                                     partial ? "partial" : "full", err);
                        se_proxy_tracker_force_full(p->tr[i]);
                        pthread_mutex_lock(&p->mu);
                        p->stats.syncs_failed++;
                        p->stats.partial_failed += partial;
                        pthread_mutex_unlock(&p->mu);
                        ok = false;
                }
        }
        if (ok) {
                for (unsigned i = 0; i < p->n_fams; i++) {
                        rebuilt += t[i]->n_ports;
                        delete_conntrack(p, i, p->last[i], t[i]);
                        se_proxy_table_free(p->last[i]);
                        p->last[i] = t[i];
                        t[i] = NULL;
                        free(p->own_ports[i]);
                        p->own_ports[i] = NULL;
                        p->own_cap[i] = 0;
                }
                p->patches = 0;
                hairpin_drop(p); /* counted again from the new tables when needed */
        }
        hc_touched = true;
synced:;
        struct se_proxy_hc_port *hc = NULL;
        size_t n_hc = 0;
        if (ok && hc_touched) {
                hc = se_calloc(SE_PROXY_MAX_HC_PORTS, sizeof(*hc));
                if (hc)
                        n_hc = hc_ports(p->last, p->n_fams, hc);
        }
        for (unsigned i = 0; i < p->n_fams; i++)
                se_proxy_table_free(t[i]);
        now_of(p, &end);
        double dt = (double)(end.mono_ns - start.mono_ns) / 1e9;
        se_histogram_observe(&p->sync_all, dt);
        se_histogram_observe(partial ? &p->sync_partial : &p->sync_full, dt);
        pthread_mutex_lock(&p->mu);
        if (ok) {
                se_proxy_health_updated(&p->health, &end);
                if (hc) {
                        memcpy(p->hc, hc, n_hc * sizeof(*hc));
                        p->n_hc = n_hc;
                }
                p->stats.last_sync_ts = (double)end.real_ns / 1e9;
                p->stats.bytes_last = bytes;
                p->stats.services_rebuilt_last = rebuilt;
                p->stats.bytes_total += bytes;
                p->stats.rules_written_total += rules;
                p->stats.syncs_carried += carried != 0;
                if (partial)
                        p->stats.syncs_partial++;
                else
                        p->stats.syncs_full++;
                for (size_t k = 0; k < n_triggers; k++)
                        if (triggers[k] <= end.real_ns)
                                se_histogram_observe(&p->netprog,
                                                     (double)(end.real_ns - triggers[k]) / 1e9);
        } else {
                p->dirty = true; /* the changes are still to be programmed */
        }
        pthread_mutex_unlock(&p->mu);
        free(hc);
        se_log_info(2, "%s sync %s in %.3f ms: %zu bytes, %zu rules",
                    carried ? "partial (carried)" :
                    partial ? "partial" :
                              "full",
                    ok ? "done" : "FAILED", dt * 1e3, bytes, rules);
        if (ok && p->cfg.synced)
                p->cfg.synced(p->cfg.synced_data);
        return ok;
}

/* Re-reads our Node's zone label; true when it changed. */
static bool node_zone(struct se_proxy_proxier *p, struct se_store *store)
{
        const char *zone = NULL;
        bool changed;
        se_store_rdlock(store);
        const struct se_object *o = se_store_get(store, SE_KIND_NODE, "", p->opt.node_name);
        if (o)
                zone = se_kvlist_get(&o->meta.labels, "topology.kubernetes.io/zone");
        changed =
                (zone == NULL) != (p->opt.zone == NULL) || (zone && strcmp(zone, p->opt.zone) != 0);
        if (changed) {
                free(SE_UNCONST(char, p->opt.zone));
                p->opt.zone = zone ? se_strdup(zone) : NULL;
        }
        se_store_unlock(store);
        return changed;
}

int64_t se_proxy_proxier_step(struct se_proxy_proxier *p, struct se_store *store)
{
        struct se_proxy_instant t;
        if (!p->begun)
                return CANARY_CHECK_NS;
        now_of(p, &t);
        int64_t now = t.mono_ns;
        if (p->last_full_mono != 0 && now - p->last_canary_mono >= CANARY_CHECK_NS) {
                p->last_canary_mono = now;
                for (unsigned i = 0; i < p->n_fams; i++)
                        if (rules_lost(p, p->fams[i])) {
                                se_log_warn("our %s rules were flushed or the canary deleted: "
                                            "full resync",
                                            p->cfg.nft ? "nftables" : "iptables");
                                p->need_full = true;
                                pthread_mutex_lock(&p->mu);
                                p->stats.canary_resyncs++;
                                pthread_mutex_unlock(&p->mu);
                        }
        }
        pthread_mutex_lock(&p->mu);
        bool dirty = p->dirty, node = p->node_changed;
        p->node_changed = false;
        /* kube-proxy waits for its next full sync; svcenv does it now */
        p->need_full |= p->cidrs_changed;
        p->cidrs_changed = false;
        pthread_mutex_unlock(&p->mu);
        if (node && node_zone(p, store)) /* topology hints depend on it, as kube-proxy */
                p->need_full = true;
        /* periodic full syncs, except in large-cluster mode: there a full
         * apply costs seconds to minutes (kube-proxy skips them too); the
         * canary check still forces one when rules vanish */
        bool periodic = !large_cluster(p);
        bool full = p->need_full || (periodic && now - p->last_full_mono >= p->cfg.sync_period_ns);
        int64_t since = now - p->last_sync_mono;
        if ((full || dirty) && (p->last_sync_mono == 0 || since >= p->cfg.min_sync_period_ns)) {
                bool ok = sync_rules(p, store, full);
                now_of(p, &t);
                p->last_sync_mono = t.mono_ns;
                if (full && ok)
                        p->last_full_mono = p->last_sync_mono;
                p->need_full = !ok;
                return 0; /* look again at once: changes may have come meanwhile */
        }
        /* until the next sync may run, the canary check or the period */
        int64_t wait = CANARY_CHECK_NS;
        if (full || dirty)
                wait = p->cfg.min_sync_period_ns - since;
        else if (periodic && p->cfg.sync_period_ns - (now - p->last_full_mono) < wait)
                wait = p->cfg.sync_period_ns - (now - p->last_full_mono);
        if (p->need_full && wait > RETRY_AFTER_ERROR)
                wait = RETRY_AFTER_ERROR;
        return wait > 0 ? wait : 0;
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

void se_proxy_proxier_run(struct se_proxy_proxier *p, struct se_store *store)
{
        for (;;) {
                pthread_mutex_lock(&p->mu);
                bool stop = p->stop, dirty = p->dirty;
                pthread_mutex_unlock(&p->mu);
                if (stop)
                        break;
                int64_t wait = se_proxy_proxier_step(p, store);
                if (wait == 0)
                        continue;
                struct timespec ts = deadline_in(wait);
                pthread_mutex_lock(&p->mu);
                /* a change that came after the step looked: do not sleep
                 * past it (the step tells how long min-sync-period holds it) */
                if (!p->stop && !(p->dirty && !dirty))
                        pthread_cond_timedwait(&p->cond, &p->mu, &ts);
                pthread_mutex_unlock(&p->mu);
        }
}

void se_proxy_proxier_stop(struct se_proxy_proxier *p)
{
        pthread_mutex_lock(&p->mu);
        p->stop = true;
        pthread_cond_signal(&p->cond);
        pthread_mutex_unlock(&p->mu);
}

/* ---- readers ---- */

void se_proxy_proxier_stats(struct se_proxy_proxier *p, struct se_proxy_proxier_stats *ret)
{
        pthread_mutex_lock(&p->mu);
        *ret = p->stats;
        pthread_mutex_unlock(&p->mu);
}

static void gauge(struct se_strbuf *sb, const char *type, const char *name, const char *help,
                  double v)
{
        se_strbuf_printf(sb, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name,
                         v);
}

void se_proxy_proxier_metrics(struct se_proxy_proxier *p, struct se_strbuf *sb)
{
        struct se_proxy_proxier_stats s;
        se_histogram_render(&p->sync_all, sb, "kubeproxy_sync_proxy_rules_duration_seconds", NULL,
                            "SyncProxyRules latency in seconds");
        se_histogram_render(&p->sync_full, sb, "kubeproxy_sync_full_proxy_rules_duration_seconds",
                            NULL, "SyncProxyRules latency in seconds for full resyncs");
        se_histogram_render(&p->sync_partial, sb,
                            "kubeproxy_sync_partial_proxy_rules_duration_seconds", NULL,
                            "SyncProxyRules latency in seconds for partial resyncs");
        se_histogram_render(&p->netprog, sb, "kubeproxy_network_programming_duration_seconds", NULL,
                            "In Cluster Network Programming Latency in seconds");
        se_proxy_proxier_stats(p, &s);
        gauge(sb, "gauge", "kubeproxy_sync_proxy_rules_last_timestamp_seconds",
              "The last time proxy rules were successfully synced", s.last_sync_ts);
        gauge(sb, "gauge", "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
              "The last time a sync of proxy rules was queued", s.last_queued_ts);
        gauge(sb, "counter", "kubeproxy_sync_proxy_rules_iptables_restore_failures_total",
              "Cumulative proxy iptables restore failures", (double)s.syncs_failed);
        gauge(sb, "counter", "kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total",
              "Cumulative proxy iptables partial restore failures", (double)s.partial_failed);
        se_strbuf_printf(sb,
                         "# HELP svcenv_proxy_syncs_total Syncs applied, by kind.\n"
                         "# TYPE svcenv_proxy_syncs_total counter\n"
                         "svcenv_proxy_syncs_total{kind=\"full\"} %llu\n"
                         "svcenv_proxy_syncs_total{kind=\"partial\"} %llu\n",
                         (unsigned long long)s.syncs_full, (unsigned long long)s.syncs_partial);
        gauge(sb, "gauge", "svcenv_proxy_restore_bytes",
              "Bytes of restore input (nft script) the last sync wrote", (double)s.bytes_last);
        gauge(sb, "counter", "svcenv_proxy_restore_bytes_total",
              "Bytes of restore input written in all", (double)s.bytes_total);
        gauge(sb, "counter", "svcenv_proxy_rules_written_total",
              "Rules (-A/-I/-D lines) written in all syncs", (double)s.rules_written_total);
        gauge(sb, "counter", "svcenv_proxy_canary_resyncs_total",
              "Full resyncs because our rules were flushed or the canary deleted",
              (double)s.canary_resyncs);
        gauge(sb, "counter", "svcenv_proxy_conntrack_deletions_total",
              "conntrack -D runs that deleted stale UDP entries", (double)s.ct_deletes);
        se_strbuf_printf(sb,
                         "# HELP svcenv_proxy_tool_missing_total Runs of a tool that is not "
                         "installed (its work left undone)\n"
                         "# TYPE svcenv_proxy_tool_missing_total counter\n"
                         "svcenv_proxy_tool_missing_total{tool=\"conntrack\"} %llu\n",
                         (unsigned long long)s.conntrack_missing);
        if (p->cfg.nft)
                gauge(sb, "counter", "svcenv_proxy_nft_netlink_fallbacks_total",
                      "nft scripts that netlink could not apply and nft -f was run for (the "
                      "log says why)",
                      (double)se_proxy_nft_netlink_fallbacks());
}

void se_proxy_proxier_health_queued(struct se_proxy_proxier *p)
{
        struct se_proxy_instant now;
        now_of(p, &now);
        pthread_mutex_lock(&p->mu);
        se_proxy_health_queued(&p->health, &now);
        p->stats.last_queued_ts = (double)now.real_ns / 1e9;
        pthread_mutex_unlock(&p->mu);
}

void se_proxy_proxier_health_synced(struct se_proxy_proxier *p)
{
        struct se_proxy_instant now;
        now_of(p, &now);
        pthread_mutex_lock(&p->mu);
        se_proxy_health_updated(&p->health, &now);
        p->stats.last_sync_ts = (double)now.real_ns / 1e9;
        pthread_mutex_unlock(&p->mu);
}

bool se_proxy_proxier_health_body(struct se_proxy_proxier *p, bool livez, struct se_strbuf *body)
{
        struct se_proxy_instant now;
        now_of(p, &now);
        pthread_mutex_lock(&p->mu);
        struct se_proxy_health h = p->health;
        pthread_mutex_unlock(&p->mu);
        return se_proxy_health_body(&h, &now, livez, body);
}

unsigned se_proxy_proxier_last_tables(const struct se_proxy_proxier *p,
                                      const struct se_proxy_table *out[2])
{
        unsigned n = 0;
        for (unsigned i = 0; i < p->n_fams; i++)
                if (p->last[i])
                        out[n++] = p->last[i];
        return n;
}

size_t se_proxy_proxier_hc_ports(struct se_proxy_proxier *p, struct se_proxy_hc_port *out,
                                 size_t max)
{
        pthread_mutex_lock(&p->mu);
        size_t n = p->n_hc < max ? p->n_hc : max;
        memcpy(out, p->hc, n * sizeof(*out));
        pthread_mutex_unlock(&p->mu);
        return n;
}

bool se_proxy_proxier_hc_body(struct se_proxy_proxier *p, int port, struct se_strbuf *body)
{
        struct se_proxy_instant now;
        char ns[64] = "", name[254] = "";
        unsigned local = 0;
        now_of(p, &now);
        pthread_mutex_lock(&p->mu);
        bool healthy = se_proxy_health_ok(&p->health, &now);
        for (size_t i = 0; i < p->n_hc; i++)
                if (p->hc[i].port == port) {
                        memcpy(ns, p->hc[i].ns, sizeof(ns));
                        memcpy(name, p->hc[i].name, sizeof(name));
                        local = p->hc[i].local;
                }
        pthread_mutex_unlock(&p->mu);
        return se_proxy_hc_body(ns, name, local, healthy, body);
}

/* proxy_proxier.h — the proxier: kube-proxy's sync loop and its policy as a
 * library, the system reached only through a runner that tests fake.
 *
 * The writer/tracker protocol (one place for it). A sync of one family is:
 *  1. build:  se_proxy_table_build() from the store (read lock held), or
 *             for a partial sync, the last table with only the changed
 *             services rebuilt (see "changes carried" below);
 *  2. write:  se_proxy_iptables_sync() / se_proxy_nft_sync() with the
 *             family's tracker. The tracker decides what is written: a full
 *             sync (the first, after se_proxy_tracker_force_full, after a
 *             failed apply) writes everything and deletes what it knew of
 *             but no longer writes; a partial one leaves out the chains of
 *             services whose text equals what the last applied sync wrote;
 *  3. apply:  the text goes to iptables-restore --noflush / nft -f (the
 *             runner's apply);
 *  4. done:   se_proxy_tracker_done(tracker, applied, &text) — ALWAYS, with
 *             the outcome, before the text buffer is released: applied, the
 *             text becomes the known state; not applied, the next sync is
 *             full (and the previous rules stay in the kernel, as
 *             iptables-restore and nft apply all or nothing).
 * Before a full sync the tracker must know what the kernel holds when that
 * is not what the last applied sync left: iptables seeds it with our chains
 * from iptables-save (se_proxy_tracker_seed), nftables with the names in our
 * table (se_proxy_nft_seed_existing: reset, then seed). After a full
 * iptables sync the jumps from the built-in chains are ensured and the
 * canary chains made.
 *
 * Policy (kube-proxy's SyncLoop and syncProxyRules, v1.36):
 *  - full sync at start, every sync period (not in large-cluster mode: over
 *    SE_PROXY_LARGE_CLUSTER_ENDPOINTS endpoints), when the canary or our
 *    nat jump vanished (nft: our table's nat-prerouting rule), when the
 *    node's zone or the ServiceCIDRs change, and after a failed sync, which
 *    is retried after at most a second;
 *  - partial syncs for Service / EndpointSlice changes in between, at most
 *    one per min sync period;
 *  - after a successful sync: stale UDP conntrack entries deleted, the
 *    health-check node ports recomputed, metrics counted.
 *
 * Changes carried: the store callback (se_proxy_proxier_on_change) records
 * WHICH services changed (by "namespace/name"; an EndpointSlice counts for
 * the service of its kubernetes.io/service-name label). A partial sync
 * rebuilds only those services' table entries
 * (se_proxy_table_build_services), patches them into the last table
 * (services added and removed included) and writes only their chains,
 * with single-rule edits of the top-level chains where their rules there
 * changed (se_proxy_iptables_sync_changed, nftables alike: an endpoint
 * change does not touch KUBE-SERVICES, an added service inserts its
 * rules). Otherwise (too many changes, a port moving to or from the
 * userspace proxy, kube-proxy's partial syncs) the partial sync is made
 * from the whole table as before; the result is the same.
 *
 * Threads: on_change, the readers (health, metrics, hc) and stop may be
 * called from any thread; step/run from one sync thread. */
#ifndef SVCENV_PROXY_PROXIER_H
#define SVCENV_PROXY_PROXIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <svcenv/diag.h>
#include <svcenv/proxy.h>
#include <svcenv/store.h>
#include <svcenv/strbuf.h>

struct se_strv;

/* Everything the proxier does to the system. Each returns as the function
 * of proxy.h it stands for (0 or a negative errno; -ENOENT: tool missing;
 * -EPROTO: the tool failed, err says why). */
struct se_proxy_runner {
        /* se_proxy_apply: iptables-restore / ip6tables-restore / nft -f - */
        int (*apply)(void *ctx, enum se_proxy_tool tool, const char *data, size_t n, char *err,
                     size_t errsize);
        /* se_proxy_run: conntrack -D, iptables -N/-S/-C (canary), iptables-save */
        int (*run)(void *ctx, const char *const *argv, struct se_strbuf *out, char *err,
                   size_t errsize);
        /* se_proxy_ensure_jumps */
        int (*ensure_jumps)(void *ctx, enum se_ip_family fam, char *err, size_t errsize);
        /* se_proxy_nft_names: our nft table read back */
        int (*nft_names)(void *ctx, enum se_ip_family fam, struct se_strv *ret);
        /* se_proxy_nft_chain_rules */
        int (*nft_chain_rules)(void *ctx, enum se_ip_family fam, const char *chain, size_t *ret);
        /* both clocks now (start_mono_ns is filled by the proxier) */
        void (*now)(void *ctx, struct se_proxy_instant *now);
        void *ctx;
};

/* The real system: the functions of proxy.h and the clocks. */
const struct se_proxy_runner *se_proxy_runner_system(void);

/* ---- options shared by `svcenv rules` and svcenv-proxy ---- */

/* The long options both parse; their ids start at SE_PROXY_FLAG_FIRST. */
enum {
        SE_PROXY_FLAG_FIRST = 0x5e00,
        SE_PROXY_FLAG_BACKEND = SE_PROXY_FLAG_FIRST,
        SE_PROXY_FLAG_CLUSTER_CIDR,
        SE_PROXY_FLAG_NODE_IP,
        SE_PROXY_FLAG_MASQ_BIT,
        SE_PROXY_FLAG_MASQ_ALL,
        SE_PROXY_FLAG_NODEPORT_ADDRESSES,
        SE_PROXY_FLAG_LOCALHOST_NODEPORTS,
        SE_PROXY_FLAG_RANDOM_FULLY,
        SE_PROXY_FLAG_NFACCT,
        SE_PROXY_FLAG_PROXY_NAME,
        SE_PROXY_FLAG_LAST = SE_PROXY_FLAG_PROXY_NAME,
};
/* Entries for a getopt_long table (needs <getopt.h>). */
#define SE_PROXY_LONG_OPTIONS                                                                   \
 { "backend", required_argument, NULL, SE_PROXY_FLAG_BACKEND },                                 \
         { "cluster-cidr", required_argument, NULL, SE_PROXY_FLAG_CLUSTER_CIDR },               \
         { "node-ip", required_argument, NULL, SE_PROXY_FLAG_NODE_IP },                         \
         { "masquerade-bit", required_argument, NULL, SE_PROXY_FLAG_MASQ_BIT },                 \
         { "masquerade-all", no_argument, NULL, SE_PROXY_FLAG_MASQ_ALL },                       \
         { "nodeport-addresses", required_argument, NULL, SE_PROXY_FLAG_NODEPORT_ADDRESSES },   \
         { "localhost-nodeports", required_argument, NULL, SE_PROXY_FLAG_LOCALHOST_NODEPORTS }, \
         { "random-fully", required_argument, NULL, SE_PROXY_FLAG_RANDOM_FULLY },               \
         { "nfacct", required_argument, NULL, SE_PROXY_FLAG_NFACCT },                           \
 {                                                                                              \
  "proxy-name", required_argument, NULL, SE_PROXY_FLAG_PROXY_NAME                               \
 }

/* What the shared options set. */
struct se_proxy_flags {
        struct se_proxy_options opt; /* se_proxy_options_init'ed, random_fully on */
        bool nft; /* --backend nftables */
        int nfacct; /* -1 auto (the caller decides), 0 off, 1 on */
};
void se_proxy_flags_init(struct se_proxy_flags *f);
/* Takes option id (from SE_PROXY_LONG_OPTIONS) with its argument (borrowed:
 * keep it alive). 0; 1 when id is not one of ours; -EINVAL with diag's
 * text saying which option and value ("--masquerade-bit wants 0..31, not
 * \"x\""). */
int se_proxy_flag(struct se_proxy_flags *f, int id, const char *arg, struct se_diag *diag);
/* After the last option: the backend's defaults (nftables: NodePorts on the
 * primary IPs unless --nodeport-addresses). */
void se_proxy_flags_finish(struct se_proxy_flags *f);

/* The Node lookup both use: node `name` of the store gives opt its node IPs
 * (InternalIP, then ExternalIP; none taken when opt has some already, as
 * --node-ip wins) and *zone its topology.kubernetes.io/zone (borrowed from
 * the store; NULL when none). 0, or -ENOENT when the store has no such
 * Node (opt unchanged, *zone NULL). */
int se_proxy_node_facts(const struct se_store *store, const char *name,
                        struct se_proxy_options *opt, const char **zone);

/* ---- the proxier ---- */

struct se_proxy_proxier_config {
        bool nft; /* else iptables */
        bool minimal; /* se_proxy_tracker_set_minimal */
        int64_t sync_period_ns, min_sync_period_ns;
        /* after every successful sync, on the sync thread, no lock held
         * (e.g. open or close the health-check node port servers, see
         * se_proxy_proxier_hc_ports); may be NULL */
        void (*synced)(void *data);
        void *synced_data;
};

struct se_proxy_proxier;
/* A proxier that syncs nothing until se_proxy_proxier_begin. The runner is
 * copied. NULL when out of memory. */
struct se_proxy_proxier *se_proxy_proxier_new(const struct se_proxy_proxier_config *cfg,
                                              const struct se_proxy_runner *runner);
/* NULL-safe; returns NULL. Not while run() is running. */
struct se_proxy_proxier *se_proxy_proxier_free(struct se_proxy_proxier *p);

/* The store callback (se_store_subscribe it for Services, EndpointSlices,
 * our Node and, with nftables, ServiceCIDRs; data is the proxier): records
 * what changed and wakes the sync loop. */
void se_proxy_proxier_on_change(void *p, enum se_store_event ev, const struct se_object *old,
                                const struct se_object *new_obj);

/* Fixes the options (copied; strings borrowed except zone, which is
 * copied) and the families, and starts the loop's state as kube-proxy's
 * SyncLoop does (the health server counts every family as updated). The
 * first step syncs in full. 0 or -ENOMEM. */
int se_proxy_proxier_begin(struct se_proxy_proxier *p, const struct se_proxy_options *opt,
                           const enum se_ip_family *fams, unsigned n_fams);

/* One turn of the loop at the runner's now: the canary check (at most once
 * a second), then a sync when one is due. Returns the nanoseconds until
 * something may be due (a change wakes run() sooner). store is read-locked
 * while the table is built. */
int64_t se_proxy_proxier_step(struct se_proxy_proxier *p, struct se_store *store);
/* Steps until se_proxy_proxier_stop, sleeping in between. */
void se_proxy_proxier_run(struct se_proxy_proxier *p, struct se_store *store);
void se_proxy_proxier_stop(struct se_proxy_proxier *p);

/* For a sync loop of the caller's own that reports its health through
 * this proxier (svcenv-proxy --mode userspace), after begin: a change is
 * waiting (what on_change counts for a Service or EndpointSlice), and a
 * sync of every family succeeded now. /healthz then answers as for the
 * proxier's own loop. Any thread. */
void se_proxy_proxier_health_queued(struct se_proxy_proxier *p);
void se_proxy_proxier_health_synced(struct se_proxy_proxier *p);

/* Readers (any thread). */
struct se_proxy_proxier_stats {
        uint64_t syncs_full, syncs_partial, syncs_failed, partial_failed;
        uint64_t canary_resyncs, ct_deletes, conntrack_missing;
        uint64_t bytes_last, bytes_total, rules_written_total;
        uint64_t services_rebuilt_last; /* services (carried) or ports rebuilt by the last sync */
        uint64_t syncs_carried; /* partial syncs of only the services the store said changed */
        double last_sync_ts, last_queued_ts; /* unix seconds */
};
void se_proxy_proxier_stats(struct se_proxy_proxier *p, struct se_proxy_proxier_stats *ret);
/* Appends the proxier's Prometheus metrics (kube-proxy's names where it
 * measures the same). */
void se_proxy_proxier_metrics(struct se_proxy_proxier *p, struct se_strbuf *sb);
/* The /healthz (livez false) or /livez body; returns whether to answer 200. */
bool se_proxy_proxier_health_body(struct se_proxy_proxier *p, bool livez, struct se_strbuf *body);

/* Health-check node ports of eTP-Local services, as of the last
 * successful sync (at most SE_PROXY_MAX_HC_PORTS, first come first kept). */
#define SE_PROXY_MAX_HC_PORTS 256
struct se_proxy_hc_port {
        int port;
        char ns[64], name[254];
        unsigned local; /* ready local endpoints summed over the service's ports */
};
/* Copies them into out (room for max); returns the count. */
/* The tables of the last successful sync, one per family in the order
 * se_proxy_proxier_begin was given, into out; returns the count (0 before
 * the first sync). Borrowed: read them only on the sync thread (the synced
 * hook), where they stay valid until the next sync. */
unsigned se_proxy_proxier_last_tables(const struct se_proxy_proxier *p,
                                      const struct se_proxy_table *out[2]);
/* conntrack -D for one flow (se_proxy_ct_argv) through p's runner, counted
 * in svcenv_proxy_conntrack_deletions_total (or, conntrack missing, in
 * svcenv_proxy_tool_missing_total). 0 deleted; 1 none matched; -ENOENT
 * not installed; else the runner's error. */
int se_proxy_proxier_ct_delete(struct se_proxy_proxier *p, const struct se_proxy_ct_flow *fl,
                               enum se_ip_family fam);
size_t se_proxy_proxier_hc_ports(struct se_proxy_proxier *p, struct se_proxy_hc_port *out,
                                 size_t max);
/* The answer of health-check node port `port`: kube-proxy's body appended;
 * returns whether to answer 200 (a local ready endpoint, proxy healthy). */
bool se_proxy_proxier_hc_body(struct se_proxy_proxier *p, int port, struct se_strbuf *body);

#endif

/* proxy.h — the proxy core: a cluster's Services and endpoints turned into the
 * packet-filter rules kube-proxy (v1.36) would program on one node.
 *
 * Three steps, the first two pure:
 *  1. se_proxy_table_build() reads a store (Services, EndpointSlices, Pods,
 *     Nodes) and makes the per-family list of service ports with their
 *     endpoints, exactly as kube-proxy's service and endpoint-slice caches
 *     see them (headless, ExternalName and foreign-proxy services skipped,
 *     EndpointSlices labelled service.kubernetes.io/headless unseen,
 *     endpoints sorted by "ip:port").
 *  2. se_proxy_iptables_write() / se_proxy_nft_write() render that table as
 *     iptables-restore input (filter + nat, kube-proxy's chain layout and
 *     names) or as an nft script for a table of our own.
 *  3. se_proxy_apply() feeds the text to iptables-restore / ip6tables-restore
 *     / nft by fork+exec with argv and a pipe (never a shell).
 *
 * Ownership: a table owns all of its memory (one arena) and borrows nothing
 * from the store after build returns. Errors are negative errno values. */
#ifndef SVCENV_PROXY_H
#define SVCENV_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <svcenv/arena.h>
#include <svcenv/diag.h>
#include <svcenv/lb.h>
#include <svcenv/model.h>
#include <svcenv/parse.h>
#include <svcenv/store.h>
#include <svcenv/strbuf.h>

/* Caps on what option input may hold. */
#define SE_PROXY_MAX_CIDRS    64
#define SE_PROXY_MAX_NODE_IPS 8

/* A Service's choice of connection scheduler ("rr", "lc", "sh,port", ...:
 * se_lb_parse's syntax). Without it the rules balance as kube-proxy's do
 * (uniform random, in the kernel). */
#define SE_PROXY_SCHED_ANNOTATION "svcenv.io/scheduler"
/* "true": a connect that fails is retried on another endpoint, which only
 * svcenv's userspace proxy does ("false" or absent: kube-proxy's rules). */
#define SE_PROXY_RETRY_ANNOTATION "svcenv.io/retry"

struct se_proxy_options {
        const char *node_name; /* endpoints with this nodeName are local */
        const char *zone; /* the node's topology.kubernetes.io/zone, NULL if none */
        struct se_ip node_ips[SE_PROXY_MAX_NODE_IPS]; /* first of each family is primary */
        unsigned n_node_ips;
        /* Local-traffic detection by cluster CIDR (one per family at most);
         * none: no detector (kube-proxy's "no LocalTrafficDetector"). */
        struct se_cidr cluster_cidrs[2];
        unsigned n_cluster_cidrs;
        /* --nodeport-addresses: per family, no CIDR of it (or one that is
         * 0.0.0.0/0, ::/0) means every local address; `primary` sets
         * nodeport_primary (the family's first node IP) instead. */
        struct se_cidr nodeport_cidrs[SE_PROXY_MAX_CIDRS];
        unsigned n_nodeport_cidrs;
        bool nodeport_primary;
        int masquerade_bit; /* 0..31, default 14 */
        const char *masquerade_mark; /* text override (tests use "0x4000"); NULL: Go's %#08x */
        bool masquerade_all;
        bool localhost_nodeports; /* default true */
        bool random_fully; /* MASQUERADE --random-fully */
        bool nfacct; /* nfacct counters available */
        bool conntrack_tcp_liberal; /* omit the ctstate INVALID drop */
        const char *proxy_name; /* serve services labelled service-proxy-name=this */
};

/* kube-proxy's defaults: mark bit 14, localhost NodePorts on, nfacct off,
 * --random-fully off. */
void se_proxy_options_init(struct se_proxy_options *opt);

/* kube-proxy's nftables default, for after the flags when the backend is
 * nftables: without --nodeport-addresses, NodePorts are taken on the node's
 * primary IPs (`primary`), not on every local address as with iptables. */
void se_proxy_options_nft_defaults(struct se_proxy_options *opt);

/* Parses a comma-separated CIDR list ("10.0.0.0/8, fd00::/64") into cidrs
 * (at most max; spaces around items are ignored). Returns the count, or
 * -EINVAL (diag says which item) / -E2BIG. "primary" is accepted only when
 * ret_primary is non-NULL, and sets it. */
int se_proxy_parse_cidr_list(const char *s, struct se_cidr *cidrs, unsigned max, bool *ret_primary,
                             struct se_diag *diag);

struct se_proxy_endpoint {
        const char *ip; /* canonical text */
        int32_t port;
        const char *str; /* "ip:port", "[ip]:port" for IPv6 */
        bool ready, serving, terminating, local;
        struct se_strs zone_hints, node_hints;
};

struct se_proxy_svcport {
        const char *ns, *name, *port_name; /* port_name "" when unnamed */
        const char *spn; /* "ns/name:port" or "ns/name" */
        enum se_protocol protocol;
        const char *proto; /* "tcp", "udp", "sctp" */
        const char *cluster_ip;
        int32_t port, node_port, health_check_node_port; /* 0: none */
        const char **external_ips; /* of this family */
        uint32_t n_external_ips;
        const char **lb_vips; /* VIP-mode ingress IPs of this family */
        uint32_t n_lb_vips;
        const char **source_ranges; /* masked CIDR text of this family */
        uint32_t n_source_ranges;
        struct se_cidr *source_cidrs;
        bool affinity;
        int32_t affinity_timeout;
        bool external_local, internal_local;
        /* SE_PROXY_SCHED_ANNOTATION: sched_set when present and valid (then
         * sched, sched_flags); sched_bad when present but invalid (the port
         * is balanced as if it had none; the daemon says so once). */
        bool sched_set, sched_bad;
        enum se_lb_kind sched;
        unsigned sched_flags; /* SE_LB_PORT, SE_LB_FALLBACK */
        /* SE_PROXY_RETRY_ANNOTATION: retry when "true"; retry_bad when
         * neither "true" nor "false" (treated as absent, as sched_bad) */
        bool retry, retry_bad;
        struct se_proxy_endpoint *eps; /* sorted by str */
        uint32_t n_eps;
};

struct se_proxy_table {
        struct se_arena arena;
        enum se_ip_family family;
        struct se_proxy_svcport *ports; /* sorted by spn, then protocol */
        uint32_t n_ports;
        uint32_t n_endpoints; /* total over all ports (large-cluster mode) */
        /* the ServiceCIDR objects' ranges of this family, canonical "ip/len"
         * text, sorted and unique (nftables drops traffic to the unallocated
         * ClusterIPs in them, as kube-proxy's cluster-ips-check) */
        const char **service_cidrs;
        uint32_t n_service_cidrs;
        /* tables whose memory some ports point into (a partial sync patched
         * their entries in, se_proxy_table_build_services); freed with this */
        struct se_proxy_table *patches;
};

/* Whether the nft (nft true) or iptables rules balance sp in the kernel.
 * false: the port needs svcenv's userspace proxy (a scheduler those rules
 * cannot express, or retries), and the rule writers leave it out. iptables expresses
 * only kube-proxy's uniform random; nftables also rr (numgen inc) and the
 * hashing sh, dh and mh (jhash into a bucket map). SCTP ports stay in the
 * kernel whatever they ask (the proxy has no SCTP). */
bool se_proxy_in_kernel(const struct se_proxy_svcport *sp, bool nft);

/* Builds the table for one family from the store (caller holds the store's
 * read lock if it is shared). *ret is a new table. 0 or -ENOMEM. */
int se_proxy_table_build(const struct se_store *store, const struct se_proxy_options *opt,
                         enum se_ip_family family, struct se_proxy_table **ret);
/* The same for just the services keys[] ("namespace/name"; those the
 * store does not have, or the table would skip, give no entries), without
 * the ServiceCIDRs: what a partial sync rebuilds. */
int se_proxy_table_build_services(const struct se_store *store, const struct se_proxy_options *opt,
                                  enum se_ip_family family, const char *const *keys, size_t n_keys,
                                  struct se_proxy_table **ret);
/* NULL-safe (and frees t->patches); returns NULL. */
struct se_proxy_table *se_proxy_table_free(struct se_proxy_table *t);

/* Families the node runs: IPv4 and/or IPv6 from its node IPs (IPv4 alone
 * when none is known). Fills fams, returns the count (1 or 2). */
unsigned se_proxy_families(const struct se_proxy_options *opt, enum se_ip_family fams[2]);
/* The families kube-proxy runs: it is dual-stack wherever the host has
 * IPv6, whatever the node's addresses, so an IPv4-only node gets its IPv6
 * base chains too. host_ipv6: IPv4 then IPv6; otherwise se_proxy_families. */
unsigned se_proxy_families_on(const struct se_proxy_options *opt, bool host_ipv6,
                              enum se_ip_family fams[2]);

/* Chain-name suffix kube-proxy uses: the first 16 characters of base32
 * (RFC 4648) of sha256(spn + proto [+ endpoint]). out has >= 17 bytes.
 * 0 or -EIO. */
int se_proxy_chain_hash(const char *spn, const char *proto, const char *endpoint, char out[17]);
/* 1/n as kube-proxy prints it ("%0.10f"). */
void se_proxy_probability(unsigned n, char out[16]);

/* Endpoint count above which comments on endpoint rules are left out. */
#define SE_PROXY_LARGE_CLUSTER_ENDPOINTS 1000

/* Appends the full iptables-restore input (filter then nat) for the table's
 * family. 0 or the strbuf's error. */
int se_proxy_iptables_write(const struct se_proxy_table *t, const struct se_proxy_options *opt,
                            struct se_strbuf *out);

/* Partial syncs (KEP-3453, as kube-proxy's iptables proxier): a tracker
 * remembers, per service port, the nat chains the last successful sync
 * wrote. se_proxy_iptables_sync() then leaves out the chains of services
 * whose rules did not change (iptables-restore --noflush keeps chains it is
 * not told about), always writes the filter table and the top-level nat
 * chains, and deletes (`-X`) the chains of services that went away.
 * The first sync, and the one after a failure, is full. Not thread-safe. */
struct se_proxy_tracker;
struct se_proxy_tracker *se_proxy_tracker_new(void);
/* NULL-safe; returns NULL. */
struct se_proxy_tracker *se_proxy_tracker_free(struct se_proxy_tracker *tr);
/* The next sync writes everything (e.g. after the rules were flushed). */
void se_proxy_tracker_force_full(struct se_proxy_tracker *tr);
/* svcenv's smaller partial syncs (off by default: kube-proxy's behaviour,
 * which rewrites the top-level chains every time). On: a partial sync also
 * leaves out the top-level chains (KUBE-SERVICES, KUBE-NODEPORTS, ... of nat
 * and filter) whose rules did not change, and edits changed ones rule by
 * rule (`-D CHAIN rule`, `-I CHAIN pos rule`) to exactly what a full sync
 * would write, in its order; a chain whose kept rules would change order,
 * or whose edits outnumber half its rules, is rewritten whole. One
 * endpoint changing among many services then costs only that service's
 * chains. Full syncs are unchanged (byte-identical to kube-proxy's). */
void se_proxy_tracker_set_minimal(struct se_proxy_tracker *tr, bool on);
/* Like se_proxy_iptables_write, with tracker deciding what to leave out.
 * Call se_proxy_tracker_done() with the outcome of applying the text. */
int se_proxy_iptables_sync(const struct se_proxy_table *t, const struct se_proxy_options *opt,
                           struct se_proxy_tracker *tracker, struct se_strbuf *out);
/* A carried partial sync (the store said which services changed): writes
 * only ports[] (every port of each changed service, as the table has it
 * now; was[i] the same port as the last applied sync had it, NULL for a
 * port added; ports[i] NULL for a port removed, both NULL: skipped; was
 * NULL: none added or removed)
 * against what the last applied sync wrote for them: their nat chains
 * when they changed, -X for the chains they dropped, and, when their
 * top-level rules (KUBE-SERVICES, KUBE-NODEPORTS, the filter table's)
 * changed, single-rule edits of those chains (-D, -I at the position a
 * full sync gives the rule). large: the table is in large-cluster mode (as
 * the last sync's). -EAGAIN when that is not enough (a port the tracker
 * does not know, or knows when added, one routed to the userspace proxy
 * now, a top-level change without minimal partial syncs, a full sync due):
 * the caller syncs from the whole table instead (the tracker is as
 * before). Then se_proxy_tracker_done as after any sync. Nothing to
 * change: out gets nothing. */
int se_proxy_iptables_sync_changed(const struct se_proxy_svcport *const *ports,
                                   const struct se_proxy_svcport *const *was, size_t n,
                                   enum se_ip_family family, bool large,
                                   const struct se_proxy_options *opt,
                                   struct se_proxy_tracker *tracker, struct se_strbuf *out);
/* Forgets a carried sync being built that will not be applied (the other
 * family could not be carried): the tracker is as before it. */
void se_proxy_tracker_abandon(struct se_proxy_tracker *tr);
/* ok: the text was applied, it becomes the known state. Otherwise the
 * next sync is full. out is the buffer the sync wrote, unchanged since
 * (call this before releasing it): after a full sync the tracker keeps the
 * segments where they are and takes the text over, leaving out empty
 * (released as usual; NULL or another buffer: the next sync is full).
 * Returns whether the last sync was partial. */
bool se_proxy_tracker_done(struct se_proxy_tracker *tr, bool ok, struct se_strbuf *out);

/* Appends an nft script that (re)creates table `svcenv` of the family
 * (deleting whatever it held before). */
int se_proxy_nft_write(const struct se_proxy_table *t, const struct se_proxy_options *opt,
                       struct se_strbuf *out);
/* With a tracker (one per backend and family). A full sync (the first, and
 * the one after a failure or se_proxy_tracker_force_full) keeps the table:
 * it flushes every rule in it and the maps and sets it knows of (those of
 * the last applied sync and the seeded ones, see se_proxy_nft_names),
 * deletes the known chains, maps and sets it no longer writes and declares
 * everything again; affinity sets keep their entries. Later syncs flush
 * and refill only the chains and endpoint maps of changed services,
 * rewrite or edit the global verdict maps and delete what went away. Every
 * name the full sync flushes or deletes must exist: seed the tracker with
 * what the kernel has (se_proxy_nft_seed_existing) when that is not known
 * from the last applied sync. Each service/local chain picks its endpoint
 * through a named map of the chain's name, each firewall chain checks a
 * named set of its name (no anonymous sets: see proxy_nft.c). */
int se_proxy_nft_sync(const struct se_proxy_table *t, const struct se_proxy_options *opt,
                      struct se_proxy_tracker *tracker, struct se_strbuf *out);

enum se_proxy_tool {
        SE_PROXY_IPTABLES_RESTORE, /* iptables-restore --noflush --counters -w 5 */
        SE_PROXY_IP6TABLES_RESTORE,
        SE_PROXY_NFT, /* nft -f - */
};

/* Runs the tool with data on its stdin (SE_PROXY_NFT: see
 * se_proxy_nft_set_how, netlink first by default). On failure writes the tool's stderr
 * as one line into err (may be NULL). 0; -ENOENT when the tool is missing;
 * -EPROTO when it exited non-zero (its transaction was not applied);
 * -EIO and others for system errors. Never uses a shell. While the tool
 * runs SIGPIPE is ignored process-wide (a tool that exits early must not
 * kill the caller); the previous disposition is restored after. */
int se_proxy_apply(enum se_proxy_tool tool, const char *data, size_t n, char *err, size_t errsize);

/* Applies an nft script (what se_proxy_nft_write/_sync emit, full or
 * partial) over netlink: translated into one nf_tables batch transaction,
 * atomic as `nft -f` (libnftnl/libmnl; no nft tool, no read of the
 * ruleset, only of the sets the script adds elements to without declaring
 * them). Needs CAP_NET_ADMIN. 0; -EINVAL: a construct the translator does
 * not know or bad input (err: "line N: what"), nothing was sent; -EPROTO:
 * the kernel refused the transaction (err: "line N: why"), nothing was
 * applied; -E2BIG past 512 MiB of messages; other negative errnos for
 * system errors. */
int se_proxy_nft_apply_netlink(const char *script, size_t n, char *err, size_t errsize);

enum se_proxy_nft_how {
        SE_PROXY_NFT_NETLINK, /* netlink, `nft -f` when that fails (the default) */
        SE_PROXY_NFT_TOOL, /* `nft -f` only */
};
/* Applies an nft script the way how says. When netlink fails for any
 * reason the script goes to `nft -f` (which decides: its error is the
 * result), the reason is written to why (may be NULL; "" when netlink did
 * it) and the fallback counter grows. 0 or as se_proxy_apply. */
int se_proxy_nft_apply(enum se_proxy_nft_how how, const char *script, size_t n, char *why,
                       size_t whysize, char *err, size_t errsize);
/* How se_proxy_apply(SE_PROXY_NFT, ...) applies, process-wide (default
 * SE_PROXY_NFT_NETLINK; svcenv-proxy --nft-apply). Thread-safe. */
void se_proxy_nft_set_how(enum se_proxy_nft_how how);
enum se_proxy_nft_how se_proxy_nft_get_how(void);
/* Scripts that fell back from netlink to `nft -f` since the start, and
 * why the last one did (one line, "" when none; buf >= 1 byte). */
unsigned long se_proxy_nft_netlink_fallbacks(void);
void se_proxy_nft_last_fallback(char *buf, size_t size);

/* Ensures the jumps from the built-in chains into ours, as kube-proxy does on
 * full syncs (`iptables -C`, then `-I` at the top when missing), and, in
 * both families, the kubelet's INPUT/OUTPUT -> KUBE-FIREWALL (the chain made
 * with `-N` when missing: IPv6 and IPv4 without localhost NodePorts leave
 * it empty). Run after the first restore (our chains must exist). 0 or as
 * se_proxy_apply. */
int se_proxy_ensure_jumps(enum se_ip_family family, char *err, size_t errsize);

/* Stale chains (kube-proxy does this on full syncs, from iptables-save). */
#define SE_PROXY_MAX_SAVED_CHAINS (4u << 20)
struct se_strv;
/* The names of our per-service chains (KUBE-SVC-/SVL-/EXT-/FW-/SEP-) in the
 * nat table of iptables-save output, appended to ret. 0, -ENOMEM, or -E2BIG
 * past SE_PROXY_MAX_SAVED_CHAINS. */
int se_proxy_parse_save_chains(const char *text, size_t len, struct se_strv *ret);
/* Tells the tracker which chains exist now: the next sync deletes those it
 * does not write. 0 or -ENOMEM. */
int se_proxy_tracker_seed(struct se_proxy_tracker *tr, const struct se_strv *chains);
/* Forgets what the last applied sync wrote (the kernel may hold something
 * else now, e.g. after `nft flush ruleset`); the next sync is full and
 * knows only what is seeded after this. */
void se_proxy_tracker_reset(struct se_proxy_tracker *tr);
/* Our nft table of the family as the kernel has it, read over netlink
 * (nf_tables dumps; the nft tool would read the whole ruleset): its
 * chains, sets and maps appended to ret as the nft tracker names them
 * ("chain NAME", "set NAME", "map NAME"; none when there is no table).
 * 0, -E2BIG past SE_PROXY_MAX_SAVED_CHAINS names, or a negative errno. */
int se_proxy_nft_names(enum se_ip_family family, struct se_strv *ret);
/* The number of rules in chain of our table into *ret (0 when the table or
 * the chain does not exist). 0 or a negative errno. */
int se_proxy_nft_chain_rules(enum se_ip_family family, const char *chain, size_t *ret);
/* Before a full nft sync whose starting point is not known (start-up,
 * after a failure, after our rules were flushed): se_proxy_tracker_reset,
 * then seeds the tracker with se_proxy_nft_names. 0 or as that. */
int se_proxy_nft_seed_existing(struct se_proxy_tracker *tr, enum se_ip_family family);
/* Runs `iptables-save -t nat` (ip6tables-save for IPv6) into out; errors as
 * se_proxy_apply. */
int se_proxy_save_nat(enum se_ip_family family, struct se_strbuf *out, char *err, size_t errsize);

/* ---- the daemon's helpers (svcenv-proxy) ---- */

/* Whether this host can run the IPv6 proxier (kube-proxy's
 * platformCheckSupported): the kernel has IPv6 and, for iptables,
 * ip6tables-restore runs. */
bool se_proxy_host_ipv6(bool nft);
/* Runs argv (argv[0] looked up in PATH; no stdin, never a shell); stdout
 * into out when non-NULL. Errors as se_proxy_apply. */
int se_proxy_run(const char *const *argv, struct se_strbuf *out, char *err, size_t errsize);

/* Makes the nfacct counter `name` in this network namespace (netlink,
 * NFNL_MSG_ACCT_NEW); an existing one is fine. 0 or a negative errno
 * (-ENOENT/-EOPNOTSUPP: no nfacct support in the kernel). */
int se_proxy_nfacct_ensure(const char *name);

/* Whether an iptables chain name (n bytes) is one the proxy makes: its
 * fixed chains, KUBE-PROXY-CANARY and the per-service chains. */
bool se_proxy_own_chain(const char *name, size_t n);
/* From whole iptables-save output, appends the iptables-restore --noflush
 * input that deletes every rule jumping from another chain into ours, then
 * flushes and deletes our chains (kube-proxy's --cleanup). Empty when there
 * is nothing of ours. 0, -E2BIG (input over the cap) or the strbuf's error. */
int se_proxy_cleanup_text(const char *text, size_t len, struct se_strbuf *out);

/* A moment as both clocks see it; start_mono_ns is the process start
 * (Go prints the monotonic reading relative to it: " m=+1.5"). */
struct se_proxy_instant {
        int64_t real_ns, mono_ns, start_mono_ns;
};
/* Go's time.Time as encoding/json writes it: RFC 3339 with nanoseconds,
 * trailing zeros dropped, in the local time zone as Go's time.Now()
 * ("2025-11-30T10:53:20.5Z", "2025-11-30T11:53:20.5+01:00"); the zero
 * instant as Go's zero time "0001-01-01T00:00:00Z". out >= 48 bytes. */
void se_proxy_go_time(const struct se_proxy_instant *t, char *out, size_t size);

/* kube-proxy's ProxyHealthServer: healthy until the first update (upstream
 * only judges proxiers updated once; its sync loop counts as one when it
 * starts, before any sync), then while no queued change waited longer
 * than timeout (2 x --sync-period upstream) for a successful sync; the
 * Node missing or being deleted makes /healthz fail. One sync loop serves
 * every family, so they share one state. Not locked: the caller
 * serialises. */
struct se_proxy_health {
        int64_t timeout_ns;
        enum se_ip_family fams[2]; /* the families synced (IPv4 first) */
        unsigned n_fams;
        struct se_proxy_instant last_updated, oldest_queued;
        bool updated, queued;
        bool node_eligible; /* false until the Node is seen, as upstream */
};
void se_proxy_health_init(struct se_proxy_health *h, int64_t timeout_ns);
/* The families the proxy syncs (once known; before, none is reported). */
void se_proxy_health_families(struct se_proxy_health *h, const enum se_ip_family *fams, unsigned n);
/* A change arrived that needs a sync (QueuedUpdate). */
void se_proxy_health_queued(struct se_proxy_health *h, const struct se_proxy_instant *now);
/* A sync succeeded, or the sync loop started (Updated). */
void se_proxy_health_updated(struct se_proxy_health *h, const struct se_proxy_instant *now);
/* kube-proxy's NodeEligible: the Node is not being deleted and not tainted
 * ToBeDeletedByClusterAutoscaler. */
bool se_proxy_node_eligible(const struct se_node *node);
/* The proxier's health, ignoring the Node (IsHealthy). */
bool se_proxy_health_ok(const struct se_proxy_health *h, const struct se_proxy_instant *now);
/* The body of kube-proxy's /healthz (livez false) or /livez (livez true):
 * encoding/json of its ProxyHealth, byte for byte: lastUpdated (now when
 * answering 200, else the last successful sync or Go's zero time),
 * currentTime, nodeEligible (/healthz only), healthy, and status per family
 * once updated. Returns whether to answer 200 (else 503): /livez when the
 * proxier is healthy, /healthz when the Node is eligible too. */
bool se_proxy_health_body(const struct se_proxy_health *h, const struct se_proxy_instant *now,
                          bool livez, struct se_strbuf *body);
/* A health-check node port's answer for Service ns/name: appends
 * kube-proxy's JSON body; returns whether to answer 200 (some local ready
 * endpoint and the proxy healthy) or 503. */
bool se_proxy_hc_body(const char *ns, const char *name, unsigned local_endpoints,
                      bool proxy_healthy, struct se_strbuf *body);

/* Stale UDP conntrack entries after a sync (kube-proxy deletes them): a
 * flow matches orig_dst (empty: any) and orig_port_dst (0: any) and, when
 * dst_nat is set, was DNATed to that endpoint IP. */
#define SE_PROXY_MAX_CT_FLOWS (1u << 20)
struct se_proxy_ct_flow {
        char orig_dst[48];
        int32_t orig_port_dst;
        char dst_nat[48];
};
struct se_proxy_ct_plan {
        struct se_proxy_ct_flow *flows;
        size_t n, cap;
};
/* Flows to delete going from table old (NULL: none) to cur: for every UDP
 * endpoint that went away, its flows to the service port's cluster,
 * external and load-balancer IPs and node port; for every UDP service port
 * that gained its first endpoint, all its flows. 0, -ENOMEM or -E2BIG. */
int se_proxy_ct_plan(const struct se_proxy_table *old, const struct se_proxy_table *cur,
                     struct se_proxy_ct_plan *ret);
void se_proxy_ct_plan_release(struct se_proxy_ct_plan *p);
/* The `conntrack -D` argv for one flow (argv borrows f and port). Returns
 * the argument count. */
int se_proxy_ct_argv(const struct se_proxy_ct_flow *f, enum se_ip_family fam, char port[12],
                     const char *argv[16]);

#endif

/* uproxy.h — the userspace proxy's data plane: one local port that every
 * proxied Service's traffic is redirected to, and an L4 proxy behind it that
 * retries a failed connect on another endpoint (kube-proxy v1.25's userspace
 * mode, done with epoll loops, splice(2) and non-blocking connects).
 *
 * Three parts:
 *  1. se_uproxy_snapshot_build() (pure) turns the proxy tables (one per
 *     family, se_proxy_table_build's) into the lookup the workers use:
 *     VIP:port/proto -> service -> endpoints with their conditions.
 *  2. se_uproxy_rules_iptables() / se_uproxy_rules_nft() (pure) write the
 *     redirect rules: TCP by REDIRECT (the original VIP:port recovered with
 *     SO_ORIGINAL_DST), UDP by TPROXY (recovered from IP_ORIGDSTADDR), for
 *     ClusterIPs, externalIPs, LB ingress IPs and NodePorts.
 *  3. se_uproxy_start() runs the workers (one epoll loop per thread, each
 *     with its own SO_REUSEPORT listeners); se_uproxy_update() swaps a new
 *     snapshot in while they run.
 *
 * Errors are negative errno values. Not thread-safe unless said: update,
 * metrics and stop are called from one thread. */
#ifndef SVCENV_UPROXY_H
#define SVCENV_UPROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <svcenv/arena.h>
#include <svcenv/diag.h>
#include <svcenv/proxy.h>
#include <svcenv/store.h>
#include <svcenv/strbuf.h>

#define SE_UPROXY_SCHED_ANNOTATION SE_PROXY_SCHED_ANNOTATION
#define SE_UPROXY_MAX_SCHED        32 /* bytes of a scheduler value, NUL included */
#define SE_UPROXY_MAX_EPS          65536 /* endpoints of one service port */
#define SE_UPROXY_DEFAULT_PORT     10262
#define SE_UPROXY_DEFAULT_MARK     0x00800000u /* TPROXY mark (bit 23) */
#define SE_UPROXY_ROUTE_TABLE      262 /* routing table of the TPROXY mark */
/* What the redirect rules make (for --cleanup). */
#define SE_UPROXY_NAT_CHAIN      "SVCENV-USERSPACE"
#define SE_UPROXY_NODEPORT_CHAIN "SVCENV-USERSPACE-NODEPORTS"
#define SE_UPROXY_TPROXY_CHAIN   "SVCENV-USERSPACE-TPROXY"
#define SE_UPROXY_FIREWALL_CHAIN "SVCENV-USERSPACE-FIREWALL" /* filter */
#define SE_UPROXY_NFT_TABLE      "svcenv-userspace"

/* Checks an svcenv.io/scheduler value: "NAME[,FLAG...]" with NAME one of
 * rr wrr lc wlc sed nq dh sh mh random p2c and FLAG port or fallback (sh, mh
 * only). Copies the normalised value (spaces around items removed) into out
 * (SE_UPROXY_MAX_SCHED bytes). 0, or -EINVAL with diag naming the item. */
int se_uproxy_parse_scheduler(const char *s, char out[SE_UPROXY_MAX_SCHED], struct se_diag *diag);

struct se_uproxy_ep {
        struct sockaddr_storage addr;
        socklen_t addr_len;
        const char *str; /* "ip:port", "[ip]:port" */
        bool ready, serving, terminating;
};

struct se_uproxy_svc {
        const char *key; /* "ns/name:port/proto": identity across snapshots */
        const char *spn; /* "ns/name:port" */
        int proto; /* IPPROTO_TCP or IPPROTO_UDP */
        char scheduler[SE_UPROXY_MAX_SCHED]; /* "rr" unless annotated */
        bool affinity; /* ClientIP */
        int32_t affinity_timeout; /* seconds */
        struct se_uproxy_ep *eps; /* sorted by str */
        uint32_t n_eps;
};

struct se_uproxy_vip {
        int family; /* AF_INET, AF_INET6 */
        uint8_t addr[16]; /* zero for node_port */
        uint16_t port;
        uint8_t proto;
        bool node_port; /* any local address */
        uint32_t svc; /* index into svcs */
};

struct se_uproxy_snapshot {
        struct se_arena arena; /* owns everything below */
        struct se_uproxy_svc *svcs;
        uint32_t n_svcs;
        struct se_uproxy_vip *vips; /* sorted for se_uproxy_snapshot_find */
        uint32_t n_vips;
        uint32_t n_bad_sched; /* services whose annotation was invalid (rr used) */
};

/* Builds the snapshot from n tables (one per family). store (may be NULL,
 * else read-locked by the caller) gives the Services' scheduler annotation;
 * a Service without one (or with an invalid one) gets default_sched, a
 * value se_uproxy_parse_scheduler accepted (NULL: "rr"). TCP and UDP
 * service ports only (SCTP is not proxied). *ret is new. 0 or -ENOMEM /
 * -E2BIG (a service port over SE_UPROXY_MAX_EPS endpoints). */
int se_uproxy_snapshot_build(const struct se_proxy_table *const *tables, unsigned n,
                             const struct se_store *store, const char *default_sched,
                             struct se_uproxy_snapshot **ret);
/* NULL-safe; returns NULL. */
struct se_uproxy_snapshot *se_uproxy_snapshot_free(struct se_uproxy_snapshot *s);
/* The VIP entry for a destination: the exact address first, then a NodePort
 * of that port. addr is 4 or 16 bytes as family says. NULL when none. */
const struct se_uproxy_vip *se_uproxy_snapshot_find(const struct se_uproxy_snapshot *s, int family,
                                                    const uint8_t *addr, uint16_t port, int proto);

struct se_uproxy_rules_opts {
        uint16_t port; /* the proxy's port */
        uint32_t mark; /* TPROXY mark for UDP (routed by SE_UPROXY_ROUTE_TABLE) */
        /* which service ports go to the proxy; NULL: all of them */
        bool (*want)(const struct se_proxy_svcport *sp, void *data);
        void *data;
        /* the node's IPs (NULL: none known): a loadBalancerSourceRanges
         * range holding the family's primary one lets the LB IPs in as
         * sources too, as kube-proxy's firewall */
        const struct se_proxy_options *node;
};

/* A want() for the iptables and nftables modes: the ports whose kernel
 * rules the writers leave out (!se_proxy_in_kernel). data: a const bool *,
 * true for nftables. */
bool se_uproxy_routed(const struct se_proxy_svcport *sp, void *data);
/* Whether t has such a port. */
bool se_uproxy_any_routed(const struct se_proxy_table *t, bool nft);

/* iptables-restore text (--noflush) for t's family: nat chain SVCENV-USERSPACE
 * (REDIRECT of TCP; NodePorts last, as kube-proxy's) and mangle chain
 * SVCENV-USERSPACE-TPROXY (UDP), both rewritten whole. The jumps to them from
 * PREROUTING/OUTPUT are se_uproxy_jumps()'s. A port with
 * loadBalancerSourceRanges has its LB IPs redirected only from those
 * sources, and (only then) filter chain SVCENV-USERSPACE-FIREWALL drops the
 * rest, as kube-proxy's KUBE-PROXY-FIREWALL (jumps:
 * se_uproxy_firewall_jumps()). 0 or -ENOMEM. */
int se_uproxy_rules_iptables(const struct se_proxy_table *t, const struct se_uproxy_rules_opts *o,
                             struct se_strbuf *out);
/* The same as one nft script replacing table ip|ip6 svcenv-userspace whole
 * (hooks included); loadBalancerSourceRanges as kube-proxy's nft firewall
 * (pre-DNAT filter chains, a set of allowed sources per port). */
int se_uproxy_rules_nft(const struct se_proxy_table *t, const struct se_uproxy_rules_opts *o,
                        struct se_strbuf *out);
/* The iptables jumps to those chains, as NULL-terminated argv tails
 * {table, chain, match...}: `iptables -t TABLE -C|-I CHAIN match...`.
 * rules must hold 3; returns the count. */
unsigned se_uproxy_jumps(const char *const **rules);
/* Whether t has a port o selects whose LB IPs have loadBalancerSourceRanges
 * (then the iptables text has the filter chain). */
bool se_uproxy_any_firewall(const struct se_proxy_table *t, const struct se_uproxy_rules_opts *o);
/* The jumps to SVCENV-USERSPACE-FIREWALL (filter INPUT, FORWARD, OUTPUT, new
 * connections), as se_uproxy_jumps(); rules must hold 3. */
unsigned se_uproxy_firewall_jumps(const char *const **rules);

struct se_uproxy_config {
        uint16_t port; /* listen port (TCP and UDP, v4 and v6) */
        unsigned threads; /* 0: one per online CPU */
        int64_t udp_timeout_ns; /* idle UDP session end (> 0; upstream 250 ms) */
        int64_t penalty_ns; /* how long a failing endpoint is skipped (0: 5 s) */
        bool ipv6; /* listen on IPv6 as well */
};

struct se_uproxy;

/* Binds the listeners and starts the workers. Raises RLIMIT_NOFILE to its
 * hard limit first. 0 or -errno (bind/socket failure); *ret is new. */
int se_uproxy_start(const struct se_uproxy_config *cfg, struct se_uproxy **ret);
/* Swaps s in (ownership passes; NULL-safe no-op). Endpoints gone from s end
 * their UDP sessions at once; terminating ones get no new connections. The
 * old snapshot is freed once every worker has moved on. 0 or -ENOMEM. */
int se_uproxy_update(struct se_uproxy *up, struct se_uproxy_snapshot *s);
/* Prometheus text: svcenv_proxy_* per service port (active and total
 * connections, retries, failures), per endpoint (IPVS's counts, the
 * scheduler's picks and round robin's fallback retries) and the fd budget.
 * Thread-safe. */
int se_uproxy_metrics(struct se_uproxy *up, struct se_strbuf *out);
/* The fd limit in force and the TCP connections it allows (6 fds each: two
 * sockets and two pipes for splice). */
void se_uproxy_fd_budget(const struct se_uproxy *up, uint64_t *ret_limit, uint64_t *ret_conns);
/* Stops the workers (open connections are closed) and frees. NULL-safe. */
struct se_uproxy *se_uproxy_stop(struct se_uproxy *up);

#endif

/* proxy_trace.h — `svcenv trace`: the way one packet takes through the
 * rules the proxy writes for a node, walked on the same table the writers
 * render (se_proxy_table_build), in iptables or nftables terms.
 *
 * For a packet FROM -> TO:PORT/PROTO it says which chains it meets (names
 * exactly as the chosen backend's rules name them), the verdict (DNAT to an
 * endpoint, REJECT or DROP without endpoints or by the source-range
 * firewall, or no rule of ours: not a service address), whether it is
 * masqueraded and why, and every endpoint it can reach with its
 * probability. With the in-kernel schedulers of nftables (svcenv.io/
 * scheduler): rr takes the endpoints in turn; sh, dh and mh name the one
 * endpoint the kernel's jhash sends this packet to. Pure: no I/O, no kernel state (ClientIP
 * affinity is reported as applying, with its timeout).
 *
 * Ownership: a trace owns its strings (se_proxy_trace_release frees them);
 * it borrows nothing from the table. Errors are negative errno values. */
#ifndef SVCENV_PROXY_TRACE_H
#define SVCENV_PROXY_TRACE_H

#include <stdbool.h>
#include <stdint.h>

#include <svcenv/parse.h>
#include <svcenv/proxy.h>
#include <svcenv/strbuf.h>

enum se_proxy_trace_backend { SE_PROXY_TRACE_IPTABLES, SE_PROXY_TRACE_NFTABLES };

/* What the destination is to the rules. */
enum se_proxy_trace_dest {
        SE_PROXY_TRACE_DEST_NONE, /* no service address of ours */
        SE_PROXY_TRACE_DEST_CLUSTER_IP,
        SE_PROXY_TRACE_DEST_EXTERNAL_IP,
        SE_PROXY_TRACE_DEST_LOAD_BALANCER,
        SE_PROXY_TRACE_DEST_NODE_PORT,
};

enum se_proxy_trace_verdict {
        SE_PROXY_TRACE_PASS, /* no rule of ours takes it: routed as it is */
        SE_PROXY_TRACE_DNAT, /* to one of the endpoints */
        SE_PROXY_TRACE_REJECT,
        SE_PROXY_TRACE_DROP,
        /* to svcenv's userspace proxy: a port se_proxy_in_kernel() leaves
         * out (reason names its port and scheduler; no endpoints listed) */
        SE_PROXY_TRACE_REDIRECT,
};

/* The packet. from_local: the source is an address of the node itself
 * (the packet leaves through OUTPUT, addrtype LOCAL / fib saddr type
 * local); se_proxy_trace_locality sets it. */
struct se_proxy_trace_query {
        struct se_ip from, to;
        int32_t port;
        enum se_protocol protocol;
        bool from_local;
        int32_t from_port; /* the source port, 0 when not given (sh/mh port flag) */
};

/* Parses "IP:PORT[/PROTO]" ("[IPv6]:PORT[/PROTO]"; PROTO tcp, udp or sctp,
 * any case; default tcp). 0 or -EINVAL with diag saying what is wrong. */
int se_proxy_trace_parse_target(const char *s, struct se_proxy_trace_query *q,
                                struct se_diag *diag);

/* Parses the source "IP" or "IP:PORT" ("[IPv6]:PORT"; a bare IPv6 address
 * is an IP without port) into q->from and q->from_port (0 without one).
 * 0 or -EINVAL with diag saying what is wrong. */
int se_proxy_trace_parse_source(const char *s, struct se_proxy_trace_query *q,
                                struct se_diag *diag);

/* One chain the packet meets, and the rule of it that matched (text as
 * the rule's match and target, in the backend's words). */
struct se_proxy_trace_step {
        char *table; /* iptables: "nat", "filter"; nftables: "ip svcenv", "ip6 svcenv" */
        char *chain;
        char *rule;
};

struct se_proxy_trace_endpoint {
        char *endpoint; /* "ip:port" ("[ip]:port") */
        /* KUBE-SEP-… / endpoint-…; NULL in nftables without affinity, where
         * the service chain DNATs through its map @dnat-<chain> (key: the
         * endpoint's index here) */
        char *chain;
        double probability; /* of a new connection (affinity aside) */
        bool local, ready, serving, terminating;
        bool masquerade; /* hairpin: the source is this endpoint */
        bool pinned; /* the kernel's affinity state sends this client here */
        /* nftables sh/dh/mh: how many of the jhash map's of_buckets buckets
         * send here (of_buckets 0: the map is keyed by endpoint index) */
        uint32_t buckets, of_buckets;
};

struct se_proxy_trace {
        enum se_proxy_trace_backend backend;
        enum se_proxy_trace_dest dest;
        char *service; /* "ns/name:port" (spn), NULL when none */
        char *protocol; /* "tcp", "udp", "sctp" */
        struct se_proxy_trace_step *steps;
        uint32_t n_steps;
        enum se_proxy_trace_verdict verdict;
        char *reason; /* why this verdict, one sentence */
        bool masquerade; /* before the endpoint's own hairpin rule */
        char *masquerade_reason; /* why (or why not), one sentence */
        struct se_proxy_trace_endpoint *endpoints; /* when DNAT, in rule order */
        uint32_t n_endpoints;
        bool affinity; /* ClientIP: a client seen before keeps its endpoint */
        int32_t affinity_timeout; /* seconds */
        bool affinity_read; /* se_proxy_trace_read_affinity looked at the kernel */
        char **notes; /* topology hints, terminating fallback, ... */
        uint32_t n_notes;
        char *node_port_ips; /* the addresses a NodePort is taken on, NULL if none */
};

/* Sets q->from_local from opt once q->from is set: one of the node IPs
 * or a loopback address. */
void se_proxy_trace_locality(struct se_proxy_trace_query *q, const struct se_proxy_options *opt);

/* Walks t (the family of q's addresses, built with opt) for q. *ret is
 * filled (release it). 0, -ENOMEM, or -EINVAL when the addresses are not
 * of t's family. */
int se_proxy_trace_run(const struct se_proxy_table *t, const struct se_proxy_options *opt,
                       enum se_proxy_trace_backend backend, const struct se_proxy_trace_query *q,
                       struct se_proxy_trace *ret);
void se_proxy_trace_release(struct se_proxy_trace *tr);

/* On the node itself (I/O, not pure): for a DNAT with ClientIP affinity,
 * reads the kernel's affinity state of each endpoint for q's source
 * (iptables: /proc/net/xt_recent/KUBE-SEP-…, the `recent` list; its age
 * is not checked; nftables: `nft list set` of the endpoint's affinity set,
 * whose entries expire by themselves) and sets endpoints[i].pinned where
 * the source is held. Nothing to read (no affinity, no DNAT): 0. 0 once
 * read (affinity_read set), -ENOENT when the state is not on this host
 * (no such list or set), or another negative errno. */
int se_proxy_trace_read_affinity(struct se_proxy_trace *tr, const struct se_proxy_trace_query *q);

/* Readable text / one JSON object (and a newline) appended to out. 0 or
 * the strbuf's error. */
int se_proxy_trace_text(const struct se_proxy_trace *tr, const struct se_proxy_trace_query *q,
                        struct se_strbuf *out);
int se_proxy_trace_json(const struct se_proxy_trace *tr, const struct se_proxy_trace_query *q,
                        struct se_strbuf *out);

#endif

/* `svcenv trace`: one packet walked through the rules the writers make of
 * a table. The decisions are the writers' (proxy_iptables.c, proxy_nft.c):
 * the same endpoint categories (proxy_categorize), the same "has
 * endpoints" tests, the same chain names (se_proxy_chain_hash,
 * proxy_nft_chain_name); the unit tests check every chain named here
 * against the writers' output. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/proxy_trace.h>

#include "proxy_internal.h"

#define MAX_STEPS 24
#define MAX_NOTES 8

/* chain kinds of a service port, and their prefixes per backend */
enum kind { K_SVC, K_SVL, K_EXT, K_FW };
static const char *const ipt_prefix[] = { "KUBE-SVC-", "KUBE-SVL-", "KUBE-EXT-", "KUBE-FW-" };
static const char *const nft_prefix[] = { "service-", "local-", "external-", "firewall-" };

struct walk {
        struct se_proxy_trace *tr;
        const struct se_proxy_table *t;
        const struct se_proxy_options *opt;
        const struct se_proxy_trace_query *q;
        bool nft;
        const char *ip; /* nft: "ip" / "ip6" */
        char table[16]; /* nft: "ip svcenv" */
        char detect[80]; /* the cluster CIDR, "" without a detector */
        const struct se_cidr *detect_cidr;
        char from[64], to[64];
        bool entered; /* the nat hook's jump is in the steps */
        char np_match[96]; /* nodeport_match's text */
        char mark_set[48]; /* nft: "meta mark set meta mark | 0xMARK" */
        unsigned mark;
        int r; /* first error */
};

static void fail(struct walk *w, int r)
{
        if (!w->r)
                w->r = r;
}

static char *vfmt(struct walk *w, const char *fmt, va_list ap) SE_PRINTF(2, 0);
static char *vfmt(struct walk *w, const char *fmt, va_list ap)
{
        char *s = NULL;
        if (se_vasprintf(&s, fmt, ap) < 0)
                fail(w, -ENOMEM);
        return s;
}

static void step(struct walk *w, const char *table, const char *chain, const char *fmt, ...)
        SE_PRINTF(4, 5);
static void step(struct walk *w, const char *table, const char *chain, const char *fmt, ...)
{
        struct se_proxy_trace *tr = w->tr;
        if (tr->n_steps >= MAX_STEPS)
                return fail(w, -E2BIG);
        struct se_proxy_trace_step *s = &tr->steps[tr->n_steps++];
        va_list ap;
        va_start(ap, fmt);
        s->rule = vfmt(w, fmt, ap);
        va_end(ap);
        s->table = se_strdup(table);
        s->chain = se_strdup(chain);
        if (!s->table || !s->chain)
                fail(w, -ENOMEM);
}

/* The nat hook's jump into the service dispatch, once. */
static void hook(struct walk *w)
{
        if (w->entered)
                return;
        w->entered = true;
        bool out = w->q->from_local;
        if (w->nft)
                step(w, w->table, out ? "nat-output" : "nat-prerouting", "jump services");
        else
                step(w, "nat", out ? "OUTPUT" : "PREROUTING",
                     "\"kubernetes service portals\" -j KUBE-SERVICES");
}

/* nat / filter for iptables, the table for nftables */
static void nat_step(struct walk *w, const char *chain, const char *rule)
{
        step(w, w->nft ? w->table : "nat", chain, "%s", rule);
}

static void note(struct walk *w, const char *fmt, ...) SE_PRINTF(2, 3);
static void note(struct walk *w, const char *fmt, ...)
{
        struct se_proxy_trace *tr = w->tr;
        if (tr->n_notes >= MAX_NOTES)
                return;
        va_list ap;
        va_start(ap, fmt);
        tr->notes[tr->n_notes++] = vfmt(w, fmt, ap);
        va_end(ap);
}

static void set_str(struct walk *w, char **field, const char *fmt, ...) SE_PRINTF(3, 4);
static void set_str(struct walk *w, char **field, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        free(*field);
        *field = vfmt(w, fmt, ap);
        va_end(ap);
}

static bool ip_is(const char *text, const struct se_ip *ip)
{
        struct se_ip x;
        if (!text || se_parse_ip(text, &x) < 0 || x.family != ip->family)
                return false;
        return memcmp(x.addr, ip->addr, ip->family == SE_IPV4 ? 4 : 16) == 0;
}

static bool loopback(const struct se_ip *ip)
{
        static const uint8_t v6[16] = { [15] = 1 };
        return ip->family == SE_IPV4 ? ip->addr[0] == 127 : memcmp(ip->addr, v6, 16) == 0;
}

static bool node_ip(const struct se_proxy_options *opt, const struct se_ip *ip)
{
        for (unsigned i = 0; i < opt->n_node_ips; i++)
                if (opt->node_ips[i].family == ip->family &&
                    memcmp(opt->node_ips[i].addr, ip->addr, 16) == 0)
                        return true;
        return false;
}

void se_proxy_trace_locality(struct se_proxy_trace_query *q, const struct se_proxy_options *opt)
{
        q->from_local = loopback(&q->from) || node_ip(opt, &q->from);
}

int se_proxy_trace_parse_target(const char *s, struct se_proxy_trace_query *q, struct se_diag *diag)
{
        char ip[64];
        const char *port, *end;
        if (!s || !*s)
                goto bad;
        if (s[0] == '[') {
                end = strchr(s, ']');
                if (!end || end[1] != ':' || (size_t)(end - s - 1) >= sizeof(ip))
                        goto bad;
                memcpy(ip, s + 1, (size_t)(end - s - 1));
                ip[end - s - 1] = 0;
                port = end + 2;
        } else {
                end = strrchr(s, ':');
                if (!end || memchr(s, ':', (size_t)(end - s)) || (size_t)(end - s) >= sizeof(ip))
                        goto bad;
                memcpy(ip, s, (size_t)(end - s));
                ip[end - s] = 0;
                port = end + 1;
        }
        if (se_parse_ip(ip, &q->to) < 0) {
                se_diag_set(diag, NULL, 0, 0, "\"%.80s\" is not an IP address", ip);
                return -EINVAL;
        }
        const char *slash = strchr(port, '/');
        char digits[8];
        size_t pn = slash ? (size_t)(slash - port) : strlen(port);
        int v;
        if (pn == 0 || pn >= sizeof(digits))
                goto bad_port;
        memcpy(digits, port, pn);
        digits[pn] = 0;
        if (se_parse_int(digits, 1, 65535, &v) < 0)
                goto bad_port;
        q->port = v;
        q->protocol = SE_PROTO_TCP;
        if (slash) {
                const char *p = slash + 1;
                if (strcasecmp(p, "tcp") == 0)
                        q->protocol = SE_PROTO_TCP;
                else if (strcasecmp(p, "udp") == 0)
                        q->protocol = SE_PROTO_UDP;
                else if (strcasecmp(p, "sctp") == 0)
                        q->protocol = SE_PROTO_SCTP;
                else {
                        se_diag_set(diag, NULL, 0, 0, "protocol \"%.20s\" is not tcp, udp or sctp",
                                    p);
                        return -EINVAL;
                }
        }
        return 0;
bad_port:
        se_diag_set(diag, NULL, 0, 0, "port \"%.20s\" is not 1..65535", port);
        return -EINVAL;
bad:
        se_diag_set(diag, NULL, 0, 0, "\"%.80s\" is not IP:PORT[/PROTO] ([IP]:PORT for IPv6)",
                    s ? s : "");
        return -EINVAL;
}

int se_proxy_trace_parse_source(const char *s, struct se_proxy_trace_query *q, struct se_diag *diag)
{
        q->from_port = 0;
        if (s && se_parse_ip(s, &q->from) == 0)
                return 0;
        /* IP:PORT is a target without a protocol */
        struct se_proxy_trace_query t = { 0 };
        if (!s || strchr(s, '/') || se_proxy_trace_parse_target(s, &t, diag) < 0) {
                se_diag_set(diag, NULL, 0, 0, "\"%.80s\" is not IP or IP:PORT ([IP]:PORT for IPv6)",
                            s ? s : "");
                return -EINVAL;
        }
        q->from = t.to;
        q->from_port = t.port;
        return 0;
}

/* The name of sp's chain of kind k in w's backend. */
static void chain_name(struct walk *w, const struct se_proxy_svcport *sp, enum kind k, char *out,
                       size_t size)
{
        int r;
        if (w->nft) {
                r = proxy_nft_chain_name(sp, nft_prefix[k], NULL, out, size);
        } else {
                char h[17];
                r = se_proxy_chain_hash(sp->spn, sp->proto, NULL, h);
                if (r == 0)
                        snprintf(out, size, "%s%s", ipt_prefix[k], h);
        }
        if (r < 0) {
                fail(w, r);
                out[0] = 0;
        }
}

static char *ep_chain(struct walk *w, const struct se_proxy_svcport *sp,
                      const struct se_proxy_endpoint *ep)
{
        char name[PROXY_NFT_NAME_SIZE];
        int r;
        if (w->nft) {
                r = proxy_nft_chain_name(sp, "endpoint-", ep, name, sizeof(name));
        } else {
                char h[17];
                r = se_proxy_chain_hash(sp->spn, sp->proto, ep->str, h);
                if (r == 0)
                        snprintf(name, sizeof(name), "KUBE-SEP-%s", h);
        }
        if (r < 0) {
                fail(w, r);
                return NULL;
        }
        char *s = se_strdup(name);
        if (!s)
                fail(w, -ENOMEM);
        return s;
}

/* " -m tcp -p tcp" / nft's "tcp" */
static const char *proto_of(enum se_protocol p)
{
        return p == SE_PROTO_UDP ? "udp" : p == SE_PROTO_SCTP ? "sctp" : "tcp";
}

/* What the writers decided for one service port (plan_service). */
struct plan {
        struct proxy_categories cat;
        bool has_any, has_internal, has_external, uses_fw;
        char svc[PROXY_NFT_NAME_SIZE], svl[PROXY_NFT_NAME_SIZE], ext[PROXY_NFT_NAME_SIZE],
                fw[PROXY_NFT_NAME_SIZE];
};

static int plan(struct walk *w, const struct se_proxy_svcport *sp, struct plan *p)
{
        int r = proxy_categorize(sp, w->opt, &p->cat);
        if (r < 0)
                return r;
        p->has_any = p->cat.has_any;
        p->has_internal = p->has_any && !(sp->internal_local && p->cat.n_local == 0);
        p->has_external = p->has_any && !(sp->external_local && p->cat.n_local == 0);
        p->uses_fw = p->has_any && sp->n_lb_vips > 0 && sp->n_source_ranges > 0;
        chain_name(w, sp, K_SVC, p->svc, sizeof(p->svc));
        chain_name(w, sp, K_SVL, p->svl, sizeof(p->svl));
        chain_name(w, sp, K_EXT, p->ext, sizeof(p->ext));
        chain_name(w, sp, K_FW, p->fw, sizeof(p->fw));
        return w->r;
}

/* The in-kernel hash pick (sh, dh, mh) of one packet: the bucket table the
 * writer puts in the map, the bucket nft_jhash gives, its endpoint (-1
 * when the key needs a source port the query lacks: then each endpoint's
 * share of the buckets). */
struct kpick {
        int32_t *buckets;
        size_t m;
        uint32_t bucket;
        int32_t chosen;
        uint32_t *share; /* per endpoint: how many buckets */
};

static int kernel_hash(struct walk *w, const struct se_proxy_svcport *sp,
                       const struct se_proxy_endpoint *const *eps, uint32_t n, struct kpick *kp)
{
        int r = proxy_ksched_buckets(sp, eps, n, &kp->buckets, &kp->m);
        if (r == 0 && !(kp->share = se_calloc(n, sizeof(*kp->share))))
                r = -ENOMEM;
        if (r < 0) {
                free(kp->buckets);
                kp->buckets = NULL;
                fail(w, r);
                return r;
        }
        for (size_t b = 0; b < kp->m; b++)
                if (kp->buckets[b] >= 0)
                        kp->share[kp->buckets[b]]++;
        bool needs_port = sp->sched != SE_LB_DH && (sp->sched_flags & SE_LB_PORT);
        if (needs_port && w->q->from_port == 0)
                return 0;
        kp->bucket = proxy_ksched_bucket(sp, &w->q->from, (uint16_t)w->q->from_port, &w->q->to,
                                         (uint32_t)kp->m);
        kp->chosen = kp->buckets[kp->bucket];
        return 0;
}

/* The dispatch step of rr (numgen inc) or sh/dh/mh (jhash into buckets). */
static void kernel_sched_step(struct walk *w, const struct se_proxy_svcport *sp, const char *name,
                              uint32_t n, const struct kpick *kp)
{
        char map[PROXY_NFT_NAME_SIZE + 16], head[PROXY_NFT_NAME_SIZE + 160], key[48];
        bool rr = kp->buckets == NULL;
        snprintf(map, sizeof(map), "%s%s%s", sp->affinity ? "" : "dnat-", rr ? "rr-" : "jh-", name);
        char pick[96], sport[16] = "";
        if (sp->sched != SE_LB_DH && (sp->sched_flags & SE_LB_PORT))
                snprintf(sport, sizeof(sport), " port %d", w->q->from_port);
        if (rr)
                snprintf(pick, sizeof(pick), "numgen inc mod %u", n);
        else
                snprintf(pick, sizeof(pick), "jhash %s mod %zu seed 0x%x",
                         proxy_ksched_key(sp, w->q->to.family == SE_IPV6, key, sizeof(key)), kp->m,
                         PROXY_JHASH_SEED);
        if (sp->affinity)
                snprintf(head, sizeof(head), "%s vmap @%s", pick, map);
        else
                snprintf(head, sizeof(head), "meta l4proto %s dnat %s addr . port to %s map @%s",
                         sp->proto, w->ip, pick, map);
        if (rr)
                step(w, w->table, name,
                     "%s: round robin, each endpoint 1/%u, in turn in the map's order", head, n);
        else if (kp->chosen >= 0)
                step(w, w->table, name, "%s: %s%s -> bucket %u -> %s", head,
                     sp->sched == SE_LB_DH ? w->to : w->from, sport, kp->bucket,
                     w->tr->endpoints[kp->chosen].endpoint);
        else
                step(w, w->table, name, "%s: the bucket depends on the source port", head);
        if (rr)
                note(w, "svcenv.io/scheduler rr: new connections take the endpoints in turn "
                        "(one counter per rule, shared by all clients)");
        else if (kp->chosen >= 0)
                note(w,
                     "svcenv.io/scheduler %s: the kernel's jhash (not IPVS's hash) picks bucket "
                     "%u of %zu; the buckets are filled as IPVS fills its table",
                     se_lb_name(sp->sched), kp->bucket, kp->m);
        else
                note(w,
                     "svcenv.io/scheduler %s,port hashes the source port too: give --from "
                     "IP:PORT to name the endpoint (shown: each endpoint's share of the "
                     "buckets)",
                     se_lb_name(sp->sched));
}

/* The endpoint pick of chain name over eps. */
static void dispatch(struct walk *w, const struct se_proxy_svcport *sp, const char *name,
                     const struct se_proxy_endpoint *const *eps, uint32_t n)
{
        struct se_proxy_trace *tr = w->tr;
        if (n == 0)
                return;
        if (!(tr->endpoints = se_calloc(n, sizeof(*tr->endpoints))))
                return fail(w, -ENOMEM);
        tr->affinity = sp->affinity;
        tr->affinity_timeout = sp->affinity_timeout;
        double rest = 1.0;
        enum proxy_ksched ks = w->nft ? proxy_ksched_of(sp, n) : PROXY_KS_RANDOM;
        struct kpick kp = { .chosen = -1 };
        if (ks == PROXY_KS_HASH && kernel_hash(w, sp, eps, n, &kp) < 0)
                return;
        for (uint32_t i = 0; i < n; i++) {
                struct se_proxy_trace_endpoint *e = &tr->endpoints[tr->n_endpoints++];
                const struct se_proxy_endpoint *ep = eps[i];
                e->endpoint = se_strdup(ep->str);
                /* nft: endpoint chains exist for affinity only */
                e->chain = !w->nft || sp->affinity ? ep_chain(w, sp, ep) : NULL;
                if (!e->endpoint)
                        fail(w, -ENOMEM);
                e->local = ep->local;
                e->ready = ep->ready;
                e->serving = ep->serving;
                e->terminating = ep->terminating;
                /* nft: @hairpin-connections holds this node's endpoints only */
                e->masquerade = ip_is(ep->ip, &w->q->from) && (!w->nft || ep->local);
                if (ks == PROXY_KS_HASH) {
                        e->buckets = kp.share[i];
                        e->of_buckets = (uint32_t)kp.m;
                        e->probability = kp.chosen >= 0 ? (int32_t)i == kp.chosen :
                                                          (double)kp.share[i] / (double)kp.m;
                } else if (w->nft) {
                        e->probability = 1.0 / n; /* numgen random / inc mod N */
                } else {
                        /* the rule's own printed probability of what is left */
                        char p[16];
                        se_proxy_probability(n - i, p);
                        double cond = i + 1 < n ? strtod(p, NULL) : 1.0;
                        e->probability = rest * cond;
                        rest -= e->probability;
                }
        }
        if (sp->affinity && w->nft)
                step(w, w->table, name,
                     "%s saddr @affinity-<endpoint> goto endpoint-<endpoint>: a client in an "
                     "endpoint's affinity set (timeout %d s) goes back to it",
                     w->ip, sp->affinity_timeout);
        else if (sp->affinity)
                step(w, "nat", name,
                     "-m recent --name KUBE-SEP-<endpoint> --rcheck --seconds %d --reap -j "
                     "KUBE-SEP-<endpoint>: a client seen before goes back to its endpoint",
                     sp->affinity_timeout);
        if (ks != PROXY_KS_RANDOM)
                kernel_sched_step(w, sp, name, n, &kp);
        else if (w->nft && sp->affinity)
                step(w, w->table, name, "numgen random mod %u vmap @%s: each endpoint 1/%u", n,
                     name, n);
        else if (w->nft)
                step(w, w->table, name,
                     "meta l4proto %s dnat %s addr . port to numgen random mod %u map @dnat-%s: "
                     "each endpoint 1/%u",
                     sp->proto, w->ip, n, name, n);
        else if (n == 1)
                step(w, "nat", name, "-j %s (the only endpoint)",
                     tr->endpoints[0].chain ? tr->endpoints[0].chain : "");
        else
                step(w, "nat", name,
                     "-m statistic --mode random --probability 1/(%u-i) -j KUBE-SEP-<endpoint i>: "
                     "each endpoint 1/%u",
                     n, n);
        tr->verdict = SE_PROXY_TRACE_DNAT;
        if (n == 1)
                set_str(w, &tr->reason, "to %s", eps[0]->str);
        else if (kp.chosen >= 0)
                set_str(w, &tr->reason, "to %s (%s: jhash bucket %u of %zu)", eps[kp.chosen]->str,
                        se_lb_name(sp->sched), kp.bucket, kp.m);
        else if (ks == PROXY_KS_RR)
                set_str(w, &tr->reason, "to one of %u endpoints in turn (round robin)", n);
        else
                set_str(w, &tr->reason, "to one of %u endpoints", n);
        free(kp.buckets);
        free(kp.share);
        bool hairpin = false;
        for (uint32_t i = 0; i < n; i++)
                hairpin |= tr->endpoints[i].masquerade;
        if (hairpin && w->nft)
                note(w,
                     "hairpin: the source %s is an endpoint on this node; if it picks itself, "
                     "chain masquerading masquerades the packet (ct status dnat %s saddr . %s "
                     "daddr . meta l4proto . th dport @hairpin-connections)",
                     w->from, w->ip, w->ip);
        else if (hairpin)
                note(w,
                     "hairpin: the source %s is an endpoint; if it picks itself, its KUBE-SEP- "
                     "chain masquerades the packet (-s %s -j KUBE-MARK-MASQ)",
                     w->from, w->from);
}

/* Topology hints, terminating fallback and local policies, as notes. */
static void category_notes(struct walk *w, const struct se_proxy_svcport *sp, const struct plan *p,
                           bool local)
{
        uint32_t ready = 0;
        for (uint32_t i = 0; i < sp->n_eps; i++)
                ready += sp->eps[i].ready;
        const struct se_proxy_endpoint *const *eps = local ? p->cat.local : p->cat.cluster;
        uint32_t n = local ? p->cat.n_local : p->cat.n_cluster;
        bool fallback = n > 0 && !eps[0]->ready;
        if (fallback)
                note(w, "no %sendpoint is ready: the serving terminating ones take the traffic",
                     local ? "local " : "");
        if (local)
                note(w, "traffic policy Local: only this node's endpoints (%u of %u)", n,
                     sp->n_eps);
        else if (!fallback && n < ready)
                note(w, "topology hints: %u of %u ready endpoints are hinted for this %s", n, ready,
                     w->opt->zone ? "node's zone or the node" : "node");
}

/* Masquerading in the internal (ClusterIP) policy chain. */
static void internal_masq(struct walk *w, const struct se_proxy_svcport *sp, const char *chain)
{
        struct se_proxy_trace *tr = w->tr;
        const char *pr = sp->proto;
        if (w->opt->masquerade_all) {
                tr->masquerade = true;
                set_str(w, &tr->masquerade_reason, "masquerade-all: every packet to a ClusterIP");
                if (w->nft)
                        step(w, w->table, chain, "%s daddr @cluster-ips %s", w->ip, w->mark_set);
                else
                        step(w, "nat", chain, "-d %s -p %s --dport %d -j KUBE-MARK-MASQ",
                             sp->cluster_ip, pr, sp->port);
        } else if (w->detect_cidr) {
                bool pod = se_cidr_contains(w->detect_cidr, &w->q->from);
                tr->masquerade = !pod;
                set_str(w, &tr->masquerade_reason,
                        pod ? "no: the source is a pod (in the cluster CIDR %s)" :
                              "yes: the source is not a pod (outside the cluster CIDR %s)",
                        w->detect);
                if (!pod) {
                        if (w->nft)
                                step(w, w->table, chain, "%s daddr @cluster-ips %s saddr != %s %s",
                                     w->ip, w->ip, w->detect, w->mark_set);
                        else
                                step(w, "nat", chain,
                                     "-d %s -p %s --dport %d ! -s %s -j KUBE-MARK-MASQ",
                                     sp->cluster_ip, pr, sp->port, w->detect);
                }
        } else {
                set_str(w, &tr->masquerade_reason,
                        "no: without --cluster-cidr (no local-traffic detector) and without "
                        "--masquerade-all ClusterIP traffic is not masqueraded");
        }
}

static void no_endpoints(struct walk *w, const struct se_proxy_svcport *sp, bool external,
                         bool none_at_all)
{
        struct se_proxy_trace *tr = w->tr;
        const char *why = none_at_all ? "has no endpoints" : "has no local endpoints";
        tr->verdict = none_at_all ? SE_PROXY_TRACE_REJECT : SE_PROXY_TRACE_DROP;
        set_str(w, &tr->reason, "%s %s%s", sp->spn, why,
                none_at_all ? "" :
                external    ? " (externalTrafficPolicy Local)" :
                              " (internalTrafficPolicy Local)");
        const char *target = none_at_all ? "REJECT" : "DROP";
        if (w->nft) {
                bool np = tr->dest == SE_PROXY_TRACE_DEST_NODE_PORT;
                const char *chk = np ? "nodeport-endpoints-check" : "service-endpoints-check";
                const char *map = np ? "no-endpoint-nodeports" : "no-endpoint-services";
                const char *v = none_at_all ? "goto reject-chain" : "drop";
                if (np)
                        step(w, w->table, chk, "vmap @%s: %s . %d : %s", map, sp->proto,
                             sp->node_port, v);
                else
                        step(w, w->table, chk, "vmap @%s: %s . %s . %d : %s", map, w->to, sp->proto,
                             sp->port, v);
                if (none_at_all)
                        step(w, w->table, "reject-chain", "reject");
                return;
        }
        const char *chain = external ? "KUBE-EXTERNAL-SERVICES" : "KUBE-SERVICES";
        if (tr->dest == SE_PROXY_TRACE_DEST_NODE_PORT)
                step(w, "filter", chain,
                     "\"%s %s\" -m addrtype --dst-type LOCAL -p %s --dport %d -j %s", sp->spn, why,
                     sp->proto, sp->node_port, target);
        else
                step(w, "filter", chain, "\"%s %s\" -d %s -p %s --dport %d -j %s", sp->spn, why,
                     w->to, sp->proto, sp->port, target);
}

static void cluster_ip(struct walk *w, const struct se_proxy_svcport *sp, const struct plan *p)
{
        struct se_proxy_trace *tr = w->tr;
        hook(w);
        const char *chain = sp->internal_local ? p->svl : p->svc;
        /* nft marks at the top of services, for any port of a ClusterIP */
        if (w->nft)
                internal_masq(w, sp, "services");
        if (!p->has_internal) {
                /* marked or not, it is rejected or dropped: no masquerade */
                tr->masquerade = false;
                free(tr->masquerade_reason);
                tr->masquerade_reason = NULL;
                if (w->nft)
                        nat_step(w, "services", "no element in @service-ips: no DNAT");
                return no_endpoints(w, sp, false, !p->has_any);
        }
        if (w->nft)
                step(w, w->table, "services",
                     "%s daddr . meta l4proto . th dport vmap @service-ips: "
                     "%s . %s . %d : goto %s",
                     w->ip, w->to, sp->proto, sp->port, chain);
        else
                step(w, "nat", "KUBE-SERVICES", "\"%s cluster IP\" -d %s -p %s --dport %d -j %s",
                     sp->spn, w->to, sp->proto, sp->port, chain);
        if (!w->nft)
                internal_masq(w, sp, chain);
        category_notes(w, sp, p, sp->internal_local);
        if (sp->internal_local)
                dispatch(w, sp, chain, p->cat.local, p->cat.n_local);
        else
                dispatch(w, sp, chain, p->cat.cluster, p->cat.n_cluster);
}

/* Whether loadBalancerSourceRanges let the source in; src: the range that
 * does (or the source itself, a VIP looped back). */
static bool source_allowed(struct walk *w, const struct se_proxy_svcport *sp, char *src,
                           size_t size)
{
        int allowed = -1;
        bool from_node = false;
        for (uint32_t i = 0; i < sp->n_source_ranges; i++) {
                if (allowed < 0 && se_cidr_contains(&sp->source_cidrs[i], &w->q->from))
                        allowed = (int)i;
                for (unsigned k = 0; k < w->opt->n_node_ips; k++)
                        if (w->opt->node_ips[k].family == w->t->family) {
                                from_node |= se_cidr_contains(&sp->source_cidrs[i],
                                                              &w->opt->node_ips[k]);
                                break; /* the primary node IP of the family */
                        }
        }
        /* a VIP looped back locally has the VIP as source */
        bool vip_source = false;
        for (uint32_t i = 0; from_node && allowed < 0 && i < sp->n_lb_vips; i++)
                vip_source |= ip_is(sp->lb_vips[i], &w->q->from);
        snprintf(src, size, "%s", allowed >= 0 ? sp->source_ranges[allowed] : w->from);
        return allowed >= 0 || vip_source;
}

/* loadBalancerSourceRanges: whether the source is let through. */
static bool firewall(struct walk *w, const struct se_proxy_svcport *sp, const struct plan *p)
{
        struct se_proxy_trace *tr = w->tr;
        char src[80];
        bool pass = source_allowed(w, sp, src, sizeof(src));
        if (w->nft) {
                step(w, w->table,
                     w->q->from_local ? "filter-output-pre-dnat" : "filter-prerouting-pre-dnat",
                     "ct state new jump firewall-check");
                step(w, w->table, "firewall-check",
                     "%s daddr . meta l4proto . th dport vmap @firewall-ips: %s . %s . %d : goto %s",
                     w->ip, w->to, sp->proto, sp->port, p->fw);
                step(w, w->table, p->fw, "%s saddr != @%s drop: %s", w->ip, p->fw,
                     pass ? "the source is in the set, passes" : "the source is not in the set");
        } else {
                hook(w);
                step(w, "nat", "KUBE-SERVICES",
                     "\"%s loadbalancer IP\" -d %s -p %s --dport %d -j %s", sp->spn, w->to,
                     sp->proto, sp->port, p->fw);
                if (pass)
                        step(w, "nat", p->fw, "-s %s -j %s", src, p->ext);
                else
                        step(w, "nat", p->fw,
                             "no source range matches: other traffic to %s will be dropped by "
                             "KUBE-PROXY-FIREWALL",
                             sp->spn);
        }
        if (pass)
                return true;
        tr->verdict = SE_PROXY_TRACE_DROP;
        set_str(w, &tr->reason, "the source %s is not in loadBalancerSourceRanges of %s", w->from,
                sp->spn);
        if (!w->nft)
                step(w, "filter", "KUBE-PROXY-FIREWALL",
                     "\"%s traffic not accepted by %s\" -d %s -p %s --dport %d -j DROP", sp->spn,
                     p->fw, w->to, sp->proto, sp->port);
        return false;
}

/* The match of nft's NodePort rule (proxy_nft.c's nodeport_match). */
static const char *nodeport_match(struct walk *w)
{
        char *buf = w->np_match;
        if (proxy_nodeport_all(w->opt, w->t->family))
                snprintf(buf, sizeof(w->np_match), "fib daddr type local %s daddr != %s", w->ip,
                         w->t->family == SE_IPV6 ? "::1" : "127.0.0.0/8");
        else
                snprintf(buf, sizeof(w->np_match), "%s daddr @nodeport-ips", w->ip);
        return buf;
}

/* NodePort, externalIP, load-balancer IP: the external chain. */
static void external(struct walk *w, const struct se_proxy_svcport *sp, const struct plan *p)
{
        struct se_proxy_trace *tr = w->tr;
        const enum se_proxy_trace_dest d = tr->dest;
        if (!p->has_any) {
                hook(w);
                if (w->nft)
                        nat_step(w, "services", "no element for it in the services' maps: no DNAT");
                return no_endpoints(w, sp, true, true);
        }
        if (d == SE_PROXY_TRACE_DEST_LOAD_BALANCER && p->uses_fw && !firewall(w, sp, p))
                return;
        /* into the external chain */
        hook(w);
        if (w->nft) {
                if (d == SE_PROXY_TRACE_DEST_NODE_PORT)
                        step(w, w->table, "services",
                             "%s meta l4proto . th dport vmap @service-nodeports: %s . %d : goto "
                             "%s",
                             nodeport_match(w), sp->proto, sp->node_port, p->ext);
                else
                        step(w, w->table, "services",
                             "%s daddr . meta l4proto . th dport vmap @service-ips: %s . %s . %d "
                             ": goto %s",
                             w->ip, w->to, sp->proto, sp->port, p->ext);
        } else if (d == SE_PROXY_TRACE_DEST_NODE_PORT) {
                bool all = proxy_nodeport_all(w->opt, w->t->family);
                step(w, "nat", "KUBE-SERVICES",
                     "\"kubernetes service nodeports; NOTE: this must be the last rule in this "
                     "chain\" %s%s -j KUBE-NODEPORTS",
                     all ? "-m addrtype --dst-type LOCAL" : "-d ", all ? "" : w->to);
                step(w, "nat", "KUBE-NODEPORTS", "%s -p %s --dport %d -j %s", sp->spn, sp->proto,
                     sp->node_port, p->ext);
        } else if (d == SE_PROXY_TRACE_DEST_EXTERNAL_IP || !p->uses_fw) {
                step(w, "nat", "KUBE-SERVICES", "\"%s %s\" -d %s -p %s --dport %d -j %s", sp->spn,
                     d == SE_PROXY_TRACE_DEST_EXTERNAL_IP ? "external IP" : "loadbalancer IP",
                     w->to, sp->proto, sp->port, p->ext);
        }
        const char *mark = w->nft ? w->mark_set : "-j KUBE-MARK-MASQ";
        if (!sp->external_local) {
                tr->masquerade = true;
                set_str(w, &tr->masquerade_reason,
                        "yes: an external destination with externalTrafficPolicy Cluster");
                nat_step(w, p->ext, mark);
                if (w->nft)
                        step(w, w->table, p->ext, "goto %s", p->svc);
                else
                        step(w, "nat", p->ext, "-j %s", p->svc);
                category_notes(w, sp, p, false);
                return dispatch(w, sp, p->svc, p->cat.cluster, p->cat.n_cluster);
        }
        bool pod = w->detect_cidr && se_cidr_contains(w->detect_cidr, &w->q->from);
        if (pod) {
                set_str(w, &tr->masquerade_reason,
                        "no: pod traffic to an external destination short-circuits to every "
                        "endpoint, not SNATed");
                if (w->nft)
                        step(w, w->table, p->ext, "%s saddr %s goto %s", w->ip, w->detect, p->svc);
                else
                        step(w, "nat", p->ext,
                             "\"pod traffic for %s external destinations\" -s %s "
                             "-j %s",
                             sp->spn, w->detect, p->svc);
                category_notes(w, sp, p, false);
                return dispatch(w, sp, p->svc, p->cat.cluster, p->cat.n_cluster);
        }
        if (w->q->from_local) {
                tr->masquerade = true;
                set_str(w, &tr->masquerade_reason,
                        "yes: the node itself to an external destination (externalTrafficPolicy "
                        "Local masquerades LOCAL sources and uses every endpoint)");
                if (w->nft) {
                        step(w, w->table, p->ext, "fib saddr type local %s", mark);
                        step(w, w->table, p->ext, "fib saddr type local goto %s", p->svc);
                } else {
                        step(w, "nat", p->ext, "-m addrtype --src-type LOCAL %s", mark);
                        step(w, "nat", p->ext, "-m addrtype --src-type LOCAL -j %s", p->svc);
                }
                category_notes(w, sp, p, false);
                return dispatch(w, sp, p->svc, p->cat.cluster, p->cat.n_cluster);
        }
        set_str(w, &tr->masquerade_reason,
                "no: externalTrafficPolicy Local keeps the client's source IP");
        if (!p->has_external) {
                nat_step(w, p->ext, "no rule matches (no local endpoint): no DNAT");
                return no_endpoints(w, sp, true, false);
        }
        if (w->nft)
                step(w, w->table, p->ext, "goto %s", p->svl);
        else
                step(w, "nat", p->ext, "-j %s", p->svl);
        category_notes(w, sp, p, true);
        dispatch(w, sp, p->svl, p->cat.local, p->cat.n_local);
}

/* Whether the destination takes NodePorts in this backend. */
static bool nodeport_dest(struct walk *w)
{
        const struct se_proxy_options *o = w->opt;
        const struct se_ip *to = &w->q->to;
        enum se_ip_family fam = w->t->family;
        bool lo = loopback(to);
        if (proxy_nodeport_all(o, fam)) {
                if (lo) /* iptables: IPv4 with localhost NodePorts; nft: never */
                        return !w->nft && fam == SE_IPV4 && o->localhost_nodeports;
                return node_ip(o, to);
        }
        for (unsigned i = 0; i < o->n_node_ips; i++)
                if (o->node_ips[i].family == fam && memcmp(o->node_ips[i].addr, to->addr, 16) == 0)
                        return proxy_nodeport_ip(o, i);
        if (!w->nft && lo && fam == SE_IPV4 && o->localhost_nodeports && to->addr[3] == 1 &&
            to->addr[1] == 0 && to->addr[2] == 0)
                for (unsigned k = 0; k < o->n_nodeport_cidrs; k++)
                        if (se_cidr_contains(&o->nodeport_cidrs[k], to))
                                return true;
        return false;
}

/* The addresses NodePorts are taken on, in words. */
static void nodeport_ips(struct walk *w)
{
        const struct se_proxy_options *o = w->opt;
        enum se_ip_family fam = w->t->family;
        bool all = proxy_nodeport_all(o, fam);
        char list[512] = "";
        size_t n = 0;
        for (unsigned i = 0; i < o->n_node_ips; i++) {
                if (o->node_ips[i].family != fam || (!all && !proxy_nodeport_ip(o, i)))
                        continue;
                char ip[64];
                se_ip_format(&o->node_ips[i], ip, sizeof(ip));
                n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s", n ? ", " : "", ip);
                if (n >= sizeof(list))
                        break;
        }
        bool lo = !w->nft && fam == SE_IPV4 && o->localhost_nodeports && all;
        set_str(w, &w->tr->node_port_ips, "%s%s%s%s", all ? "every local address (" : "", list,
                lo ? (n ? ", 127.0.0.0/8" : "127.0.0.0/8") : "", all ? ")" : "");
}

/* A ClusterIP's unused port, an unallocated address of the service CIDRs
 * (nft's cluster-ips-check), or nothing of ours. */
static void no_service(struct walk *w)
{
        struct se_proxy_trace *tr = w->tr;
        bool cip = false;
        for (uint32_t i = 0; i < w->t->n_ports && !cip; i++)
                cip = ip_is(w->t->ports[i].cluster_ip, &w->q->to);
        tr->verdict = SE_PROXY_TRACE_PASS;
        hook(w);
        if (w->nft) {
                nat_step(w, "services", "no element matches: no DNAT");
                const char *chain = w->q->from_local ? "filter-output" : "filter-forward";
                if (cip) {
                        tr->dest = SE_PROXY_TRACE_DEST_CLUSTER_IP;
                        tr->verdict = SE_PROXY_TRACE_REJECT;
                        step(w, w->table, chain, "ct state new jump cluster-ips-check");
                        step(w, w->table, "cluster-ips-check", "%s daddr @cluster-ips reject",
                             w->ip);
                        set_str(w, &tr->reason,
                                "%s is a ClusterIP without a service port %d/%s: rejected", w->to,
                                w->q->port, proto_of(w->q->protocol));
                        return;
                }
                for (uint32_t i = 0; i < w->t->n_service_cidrs; i++) {
                        struct se_cidr c;
                        if (se_parse_cidr(w->t->service_cidrs[i], &c) < 0 ||
                            !se_cidr_contains(&c, &w->q->to))
                                continue;
                        tr->verdict = SE_PROXY_TRACE_DROP;
                        step(w, w->table, chain, "ct state new jump cluster-ips-check");
                        step(w, w->table, "cluster-ips-check", "%s daddr { %s } drop", w->ip,
                             w->t->service_cidrs[i]);
                        set_str(w, &tr->reason,
                                "%s is an unallocated address of the service CIDR %s: dropped",
                                w->to, w->t->service_cidrs[i]);
                        return;
                }
        } else {
                nat_step(w, "KUBE-SERVICES", "no rule matches: no DNAT");
        }
        if (cip)
                tr->dest = SE_PROXY_TRACE_DEST_CLUSTER_IP;
        set_str(w, &tr->reason,
                cip ? "%s is a ClusterIP without a service port %d/%s: no rule of ours takes it, "
                      "it is routed as it is" :
                      "%s:%d/%s is no service address of this node: no rule of ours takes it, "
                      "it is routed as it is",
                w->to, w->q->port, proto_of(w->q->protocol));
}

/* The service port the destination is, and how (KUBE-SERVICES order:
 * services by name, then cluster IP, external IPs, LB IPs; NodePorts
 * last). */
static const struct se_proxy_svcport *find(struct walk *w, enum se_proxy_trace_dest *dest)
{
        const struct se_proxy_trace_query *q = w->q;
        for (uint32_t i = 0; i < w->t->n_ports; i++) {
                const struct se_proxy_svcport *sp = &w->t->ports[i];
                if (sp->protocol != q->protocol || sp->port != q->port)
                        continue;
                *dest = SE_PROXY_TRACE_DEST_CLUSTER_IP;
                if (ip_is(sp->cluster_ip, &q->to))
                        return sp;
                *dest = SE_PROXY_TRACE_DEST_EXTERNAL_IP;
                for (uint32_t k = 0; k < sp->n_external_ips; k++)
                        if (ip_is(sp->external_ips[k], &q->to))
                                return sp;
                *dest = SE_PROXY_TRACE_DEST_LOAD_BALANCER;
                for (uint32_t k = 0; k < sp->n_lb_vips; k++)
                        if (ip_is(sp->lb_vips[k], &q->to))
                                return sp;
        }
        if (!nodeport_dest(w))
                return NULL;
        *dest = SE_PROXY_TRACE_DEST_NODE_PORT;
        for (uint32_t i = 0; i < w->t->n_ports; i++) {
                const struct se_proxy_svcport *sp = &w->t->ports[i];
                if (sp->protocol == q->protocol && sp->node_port == q->port)
                        return sp;
        }
        return NULL;
}

/* svcenv-proxy's default --userspace-port (SE_UPROXY_DEFAULT_PORT: uproxy
 * sits above this package) */
#define USERSPACE_PORT 10262

/* A port routed to the userspace proxy: the redirect rule is all the
 * packet meets of ours; the proxy picks the endpoint. */
/* A routed port's loadBalancerSourceRanges (uproxy_rules.c's firewall):
 * whether the source passes; src is then the source match of the
 * redirect ("" for none). */
static bool routed_firewall(struct walk *w, const struct se_proxy_svcport *sp,
                            enum se_proxy_trace_dest dest, char *src, size_t size)
{
        struct se_proxy_trace *tr = w->tr;
        src[0] = 0;
        if (dest != SE_PROXY_TRACE_DEST_LOAD_BALANCER || !sp->n_source_ranges)
                return true;
        char range[80];
        bool pass = source_allowed(w, sp, range, sizeof(range));
        if (w->nft) {
                unsigned set = 0; /* the port's set: one per firewalled routed port, in order */
                for (uint32_t i = 0; i < w->t->n_ports && &w->t->ports[i] != sp; i++)
                        set += w->t->ports[i].n_lb_vips && w->t->ports[i].n_source_ranges &&
                               !se_proxy_in_kernel(&w->t->ports[i], true) &&
                               (w->t->ports[i].protocol == SE_PROTO_TCP ||
                                w->t->ports[i].protocol == SE_PROTO_UDP);
                char table[40];
                snprintf(table, sizeof(table), "%s svcenv-userspace", w->ip);
                step(w, table,
                     w->q->from_local ? "filter-output-pre-dnat" : "filter-prerouting-pre-dnat",
                     "ct state new jump firewall-check");
                step(w, table, "firewall-check",
                     "%s daddr %s %s dport %d %s saddr != @firewall-%u "
                     "drop: %s",
                     w->ip, w->to, proto_of(sp->protocol), sp->port, w->ip, set,
                     pass ? "the source is in the set, passes" : "the source is not in the set");
        } else if (pass) {
                snprintf(src, size, "-s %s%s ", range,
                         strchr(range, '/')      ? "" :
                         w->t->family == SE_IPV6 ? "/128" :
                                                   "/32");
        } else {
                step(w, "nat", "SVCENV-USERSPACE",
                     "no redirect of %s:%d from this source: its destination stays", w->to,
                     sp->port);
                step(w, "filter", "SVCENV-USERSPACE-FIREWALL",
                     "\"%s traffic not accepted by its loadBalancerSourceRanges\" -d %s/%d -p %s "
                     "-m %s --dport %d%s -j DROP",
                     sp->spn, w->to, w->t->family == SE_IPV6 ? 128 : 32, proto_of(sp->protocol),
                     proto_of(sp->protocol), sp->port,
                     sp->protocol == SE_PROTO_UDP ? " -m mark ! --mark 0x800000/0x800000" : "");
        }
        if (pass)
                return true;
        tr->verdict = SE_PROXY_TRACE_DROP;
        set_str(w, &tr->reason, "the source %s is not in loadBalancerSourceRanges of %s", w->from,
                sp->spn);
        note(w,
             "%s is served by svcenv's userspace proxy: only the sources of its "
             "loadBalancerSourceRanges reach it, the rest is dropped as kube-proxy's firewall "
             "drops it",
             sp->spn);
        return false;
}

static void routed(struct walk *w, const struct se_proxy_svcport *sp, enum se_proxy_trace_dest dest)
{
        struct se_proxy_trace *tr = w->tr;
        bool udp = sp->protocol == SE_PROTO_UDP, np = dest == SE_PROXY_TRACE_DEST_NODE_PORT;
        char sched[64], src[96];
        if (!routed_firewall(w, sp, dest, src, sizeof(src)))
                return;
        if (sp->sched_set)
                snprintf(sched, sizeof(sched), "%s%s%s", se_lb_name(sp->sched),
                         sp->sched_flags & SE_LB_PORT ? ",port" : "",
                         sp->sched_flags & SE_LB_FALLBACK ? ",fallback" : "");
        else
                snprintf(sched, sizeof(sched), "rr (--scheduler's default)");
        tr->verdict = SE_PROXY_TRACE_REDIRECT;
        if (w->nft) {
                char table[40];
                snprintf(table, sizeof(table), "%s svcenv-userspace", w->ip);
                step(w, table, udp ? "divert" : "services", "%s%s%s %s dport %d %s :%d",
                     np ? "fib daddr type local" : w->ip, np ? "" : " daddr ", np ? "" : w->to,
                     proto_of(sp->protocol), w->q->port, udp ? "tproxy to" : "redirect to",
                     USERSPACE_PORT);
        } else {
                char dst[192] = "";
                if (!np)
                        snprintf(dst, sizeof(dst), "%s-d %s/%d ", src, w->to,
                                 w->t->family == SE_IPV6 ? 128 : 32);
                else if (udp)
                        snprintf(dst, sizeof(dst), "-m addrtype --dst-type LOCAL ");
                if (udp)
                        step(w, "mangle", "SVCENV-USERSPACE-TPROXY",
                             "%s-p udp -m udp --dport %d -j TPROXY --on-port %d", dst, w->q->port,
                             USERSPACE_PORT);
                else
                        step(w, "nat", np ? "SVCENV-USERSPACE-NODEPORTS" : "SVCENV-USERSPACE",
                             "%s-p tcp -m tcp --dport %d -j REDIRECT --to-ports %d", dst,
                             w->q->port, USERSPACE_PORT);
        }
        set_str(w, &tr->reason, "redirected to svcenv's userspace proxy (port %d), scheduler %s%s",
                USERSPACE_PORT, sched, sp->retry ? ", with retries" : "");
        note(w,
             "%s asks for %s, which the %s rules cannot do: no rule of kube-proxy's layout "
             "for it; the proxy picks among its %u endpoint(s) and retries a failed connect",
             sp->spn, sp->retry && !sp->sched_set ? "retries" : "its scheduler",
             w->nft ? "nftables" : "iptables", sp->n_eps);
}

void se_proxy_trace_release(struct se_proxy_trace *tr)
{
        if (!tr)
                return;
        for (uint32_t i = 0; i < tr->n_steps; i++) {
                free(tr->steps[i].table);
                free(tr->steps[i].chain);
                free(tr->steps[i].rule);
        }
        for (uint32_t i = 0; i < tr->n_endpoints; i++) {
                free(tr->endpoints[i].endpoint);
                free(tr->endpoints[i].chain);
        }
        for (uint32_t i = 0; i < tr->n_notes; i++)
                free(tr->notes[i]);
        free(tr->steps);
        free(tr->endpoints);
        free(tr->notes);
        free(tr->service);
        free(tr->protocol);
        free(tr->reason);
        free(tr->masquerade_reason);
        free(tr->node_port_ips);
        memset(tr, 0, sizeof(*tr));
}

int se_proxy_trace_run(const struct se_proxy_table *t, const struct se_proxy_options *opt,
                       enum se_proxy_trace_backend backend, const struct se_proxy_trace_query *q,
                       struct se_proxy_trace *ret)
{
        memset(ret, 0, sizeof(*ret));
        if (q->from.family != t->family || q->to.family != t->family)
                return -EINVAL;
        struct walk w = { .tr = ret, .t = t, .opt = opt, .q = q };
        w.nft = backend == SE_PROXY_TRACE_NFTABLES;
        w.ip = t->family == SE_IPV6 ? "ip6" : "ip";
        snprintf(w.table, sizeof(w.table), "%s svcenv", w.ip);
        w.mark = 1u << (opt->masquerade_bit & 31);
        snprintf(w.mark_set, sizeof(w.mark_set), "meta mark set meta mark | 0x%x", w.mark);
        if ((w.detect_cidr = proxy_cluster_cidr(opt, t->family)))
                proxy_cidr_text(w.detect_cidr, w.detect, sizeof(w.detect));
        se_ip_format(&q->from, w.from, sizeof(w.from));
        se_ip_format(&q->to, w.to, sizeof(w.to));
        ret->backend = backend;
        ret->steps = se_calloc(MAX_STEPS, sizeof(*ret->steps));
        ret->notes = se_calloc(MAX_NOTES, sizeof(*ret->notes));
        ret->protocol = se_strdup(proto_of(q->protocol));
        if (!ret->steps || !ret->notes || !ret->protocol) {
                se_proxy_trace_release(ret);
                return -ENOMEM;
        }
        enum se_proxy_trace_dest dest = SE_PROXY_TRACE_DEST_NONE;
        const struct se_proxy_svcport *sp = find(&w, &dest);
        if (!sp) {
                no_service(&w);
        } else if (!se_proxy_in_kernel(sp, w.nft)) {
                ret->dest = dest;
                if (!(ret->service = se_strdup(sp->spn)))
                        fail(&w, -ENOMEM);
                if (sp->node_port)
                        nodeport_ips(&w);
                routed(&w, sp, dest);
        } else {
                struct plan p;
                ret->dest = dest;
                if (!(ret->service = se_strdup(sp->spn)))
                        fail(&w, -ENOMEM);
                if (sp->node_port)
                        nodeport_ips(&w);
                int r = plan(&w, sp, &p);
                if (r == 0 && dest == SE_PROXY_TRACE_DEST_CLUSTER_IP)
                        cluster_ip(&w, sp, &p);
                else if (r == 0)
                        external(&w, sp, &p);
                fail(&w, r);
                proxy_categories_release(&p.cat);
                if (ret->verdict == SE_PROXY_TRACE_DNAT && ret->masquerade) {
                        if (w.nft)
                                note(&w,
                                     "masqueraded on the way out (chain masquerading: meta mark "
                                     "& 0x%x != 0 masquerade), source becomes the node's address",
                                     w.mark);
                        else
                                note(&w, "masqueraded on the way out (KUBE-POSTROUTING -j "
                                         "MASQUERADE), source becomes the node's address");
                }
        }
        if (!ret->masquerade_reason && ret->verdict == SE_PROXY_TRACE_DNAT)
                set_str(&w, &ret->masquerade_reason, "no");
        if (w.r < 0) {
                se_proxy_trace_release(ret);
                return w.r;
        }
        return 0;
}

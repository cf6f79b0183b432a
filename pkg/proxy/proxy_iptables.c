/* The iptables backend: iptables-restore input with kube-proxy's chains,
 * rule order, comments and names (pkg/proxy/iptables/proxier.go). Lines of
 * one service are written together, services in spn order. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/hash.h>
#include <svcenv/proxy.h>

#include "proxy_internal.h"

struct ipt {
        struct se_strbuf filter_chains, filter_rules, nat_chains;
        /* the nat rules, the bulk of the text: written straight into the
         * output (the rest is put in front at the end) unless the top-level
         * chains are diffed */
        struct se_strbuf *nat_rules, nat_rules_buf;
        const struct se_proxy_options *opt;
        enum se_ip_family fam;
        bool large; /* large-cluster mode: no comments on endpoint rules */
        char mark[16];
        const char *detect; /* cluster CIDR text, NULL without a detector */
        char detect_buf[80];
        struct se_proxy_tracker *tracker; /* NULL: plain full output */
        char (*ep_hash)[17]; /* per endpoint of the service being written */
        uint32_t ep_hash_cap;
        char prob[64][16]; /* se_proxy_probability(n) for n < 64, "" until needed */
};

/* The writer appends pieces (no printf): a sync writes tens of MiB. */
#define LIT(sb, lit) se_strbuf_lit(sb, lit)

static inline void put(struct se_strbuf *sb, const char *s)
{
        se_strbuf_append(sb, s, strlen(s));
}

/* One service port's strings, made once and used by all its lines. */
struct svc_text {
        const char *spn, *proto;
        size_t spn_len;
        char port[12]; /* sp->port in decimal */
        char mp[40]; /* " -m tcp -p tcp" */
        size_t mp_len;
};

static void put_spn(struct se_strbuf *sb, const struct svc_text *st)
{
        se_strbuf_append(sb, st->spn, st->spn_len);
}

static void put_mp(struct se_strbuf *sb, const struct svc_text *st)
{
        se_strbuf_append(sb, st->mp, st->mp_len);
}

static void chain(struct se_strbuf *sb, const char *prefix, const char *hash)
{
        LIT(sb, ":");
        put(sb, prefix);
        put(sb, hash);
        LIT(sb, " - [0:0]\n");
}

static const char *probability(struct ipt *w, unsigned n, char buf[16])
{
        if (n < SE_ARRAY_SIZE(w->prob)) {
                if (!w->prob[n][0])
                        se_proxy_probability(n, w->prob[n]);
                return w->prob[n];
        }
        se_proxy_probability(n, buf);
        return buf;
}

/* ` -m comment --comment "spn -> ep"` of endpoint rules, left out in
 * large-cluster mode */
static void ep_comment_arrow(struct ipt *w, const struct svc_text *st,
                             const struct se_proxy_endpoint *ep)
{
        struct se_strbuf *r = w->nat_rules;
        if (w->large)
                return;
        LIT(r, " -m comment --comment \"");
        put_spn(r, st);
        LIT(r, " -> ");
        put(r, ep->str);
        LIT(r, "\"");
}

/* The KUBE-SEP- hash of an endpoint of sp (computed by write_service). */
static const char *sep_hash(const struct ipt *w, const struct se_proxy_svcport *sp,
                            const struct se_proxy_endpoint *ep)
{
        return w->ep_hash[ep - sp->eps];
}

/* writeServiceToEndpointRules */
static void svc_to_endpoints(struct ipt *w, const struct se_proxy_svcport *sp,
                             const struct svc_text *st, const char *svc_chain,
                             const struct se_proxy_endpoint *const *eps, uint32_t n)
{
        struct se_strbuf *r = w->nat_rules;
        if (sp->affinity) {
                for (uint32_t i = 0; i < n; i++) {
                        const char *h = sep_hash(w, sp, eps[i]);
                        LIT(r, "-A ");
                        put(r, svc_chain);
                        ep_comment_arrow(w, st, eps[i]);
                        LIT(r, " -m recent --name KUBE-SEP-");
                        se_strbuf_append(r, h, 16);
                        LIT(r, " --rcheck --seconds ");
                        se_strbuf_add_int(r, sp->affinity_timeout);
                        LIT(r, " --reap -j KUBE-SEP-");
                        se_strbuf_append(r, h, 16);
                        LIT(r, "\n");
                }
        }
        for (uint32_t i = 0; i < n; i++) {
                LIT(r, "-A ");
                put(r, svc_chain);
                ep_comment_arrow(w, st, eps[i]);
                if (i + 1 < n) {
                        char p[16];
                        LIT(r, " -m statistic --mode random --probability ");
                        put(r, probability(w, n - i, p));
                }
                LIT(r, " -j KUBE-SEP-");
                se_strbuf_append(r, sep_hash(w, sp, eps[i]), 16);
                LIT(r, "\n");
        }
}

/* " -m comment --comment " then text */
static void comment(struct se_strbuf *sb, const char *text)
{
        LIT(sb, " -m comment --comment ");
        put(sb, text);
}

/* ` -m comment --comment "spn<what>"` */
static void comment_q(struct se_strbuf *sb, const struct svc_text *st, const char *what)
{
        LIT(sb, " -m comment --comment \"");
        put_spn(sb, st);
        put(sb, what);
        LIT(sb, "\"");
}

/* "-A chain" */
static void rule(struct se_strbuf *sb, const char *chain_name)
{
        LIT(sb, "-A ");
        put(sb, chain_name);
}

/* " -m P -p P -d dst --dport port -j target\n" */
static void dst_port_jump(struct se_strbuf *sb, const struct svc_text *st, const char *dst,
                          const char *port, const char *target)
{
        put_mp(sb, st);
        LIT(sb, " -d ");
        put(sb, dst);
        LIT(sb, " --dport ");
        put(sb, port);
        LIT(sb, " -j ");
        put(sb, target);
        LIT(sb, "\n");
}

static void filter_rule(struct ipt *w, const char *chain_name, const char *comment_text,
                        const struct svc_text *st, const char *dst, const char *target)
{
        struct se_strbuf *f = &w->filter_rules;
        rule(f, chain_name);
        comment(f, comment_text);
        dst_port_jump(f, st, dst, st->port, target);
}

/* v in decimal into out (12 bytes, NUL-terminated) */
static void int_text(int32_t v, char out[12])
{
        out[proxy_int_text(v, out)] = 0;
}

static int hash_endpoints(struct ipt *w, const struct se_proxy_svcport *sp,
                          const struct proxy_categories *cat)
{
        if (sp->n_eps > w->ep_hash_cap) {
                char(*p)[17] = se_reallocarray(w->ep_hash, sp->n_eps, sizeof(*p));
                if (!p)
                        return -ENOMEM;
                w->ep_hash = p;
                w->ep_hash_cap = sp->n_eps;
        }
        /* every endpoint a chain or rule names is a reachable one */
        for (uint32_t i = 0; i < cat->n_reachable; i++) {
                const struct se_proxy_endpoint *ep = cat->reachable[i];
                int r = se_proxy_chain_hash(sp->spn, sp->proto, ep->str, w->ep_hash[ep - sp->eps]);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Everything one service port's rules are made of, decided up front. */
struct svc_plan {
        struct proxy_categories cat;
        char svc[32], svl[32], ext[32], fw[32]; /* its chains */
        struct svc_text st;
        bool has_any, has_internal, has_external;
        bool uses_cluster_chain, uses_local_chain, uses_ext_chain, uses_fw;
        const char *internal_chain, *external_policy_chain, *lb_chain; /* into the names above */
        char int_comment[700], ext_comment[700]; /* quoted, when no endpoint serves */
        const char *int_target, *ext_target; /* REJECT / DROP then */
};

/* Fills p (its cat to release with proxy_categories_release on success). */
static int plan_service(struct ipt *w, const struct se_proxy_svcport *sp, struct svc_plan *p)
{
        char h[17];
        int r = se_proxy_chain_hash(sp->spn, sp->proto, NULL, h);
        if (r < 0)
                return r;
        r = proxy_categorize(sp, w->opt, &p->cat);
        if (r < 0)
                return r;
        if ((r = hash_endpoints(w, sp, &p->cat)) < 0) {
                proxy_categories_release(&p->cat);
                return r;
        }
        memcpy(p->svc, "KUBE-SVC-", 9);
        memcpy(p->svc + 9, h, 17);
        memcpy(p->svl, "KUBE-SVL-", 9);
        memcpy(p->svl + 9, h, 17);
        memcpy(p->ext, "KUBE-EXT-", 9);
        memcpy(p->ext + 9, h, 17);
        memcpy(p->fw, "KUBE-FW-", 8);
        memcpy(p->fw + 8, h, 17);
        const char *spn = sp->spn, *proto = sp->proto;
        p->st = (struct svc_text){ .spn = spn, .proto = proto, .spn_len = strlen(spn) };
        int_text(sp->port, p->st.port);
        /* " -m P -p P" */
        size_t pl = strlen(proto);
        if (pl > 12)
                pl = 12; /* "tcp", "udp", "sctp" */
        char *m = p->st.mp;
        memcpy(m, " -m ", 4);
        memcpy(m + 4, proto, pl);
        memcpy(m + 4 + pl, " -p ", 4);
        memcpy(m + 8 + pl, proto, pl);
        p->st.mp_len = 8 + 2 * pl;
        p->st.mp[p->st.mp_len] = 0;

        p->has_any = p->cat.has_any;
        p->uses_cluster_chain = p->cat.n_cluster > 0 && proxy_uses_cluster(sp);
        p->uses_local_chain = p->cat.n_local > 0 && proxy_uses_local(sp);
        p->internal_chain = p->svc;
        p->has_internal = p->has_any;
        if (sp->internal_local) {
                p->internal_chain = p->svl;
                if (p->cat.n_local == 0)
                        p->has_internal = false;
        }
        p->external_policy_chain = p->svc;
        p->has_external = p->has_any;
        if (sp->external_local) {
                p->external_policy_chain = p->svl;
                if (p->cat.n_local == 0)
                        p->has_external = false;
        }
        p->uses_ext_chain = p->has_any && proxy_externally_accessible(sp);
        p->uses_fw = p->has_any && sp->n_lb_vips > 0 && sp->n_source_ranges > 0;
        p->lb_chain = p->uses_fw ? p->fw : p->ext;

        p->int_comment[0] = p->ext_comment[0] = 0;
        p->int_target = p->ext_target = NULL;
        if (!p->has_any) {
                snprintf(p->int_comment, sizeof(p->int_comment), "\"%s has no endpoints\"", spn);
                snprintf(p->ext_comment, sizeof(p->ext_comment), "\"%s has no endpoints\"", spn);
                p->int_target = p->ext_target = "REJECT";
        } else {
                if (!p->has_internal) {
                        snprintf(p->int_comment, sizeof(p->int_comment),
                                 "\"%s has no local endpoints\"", spn);
                        p->int_target = "DROP";
                }
                if (!p->has_external) {
                        snprintf(p->ext_comment, sizeof(p->ext_comment),
                                 "\"%s has no local endpoints\"", spn);
                        p->ext_target = "DROP";
                }
        }
        return 0;
}

/* The rules that lead into the service (KUBE-SERVICES, KUBE-NODEPORTS)
 * and the filter rules of a service nobody serves. */
static void write_entries(struct ipt *w, const struct se_proxy_svcport *sp,
                          const struct svc_plan *p)
{
        const struct svc_text *st = &p->st;
        const char *spn = sp->spn;
        struct se_strbuf *nr = w->nat_rules;
        struct se_strbuf *fr = &w->filter_rules;
        const char *ext = p->ext;
        const char *fw = p->fw;
        const bool has_any = p->has_any;
        const bool has_internal = p->has_internal;
        const bool has_external = p->has_external;
        const bool uses_fw = p->uses_fw;
        const char *internal_chain = p->internal_chain;
        const char *lb_chain = p->lb_chain;
        const char *int_comment = p->int_comment;
        const char *ext_comment = p->ext_comment;
        const char *int_target = p->int_target;
        const char *ext_target = p->ext_target;
        /* cluster IP */
        if (has_internal) {
                LIT(nr, "-A KUBE-SERVICES");
                comment_q(nr, st, " cluster IP");
                dst_port_jump(nr, st, sp->cluster_ip, st->port, internal_chain);
        } else {
                filter_rule(w, "KUBE-SERVICES", int_comment, st, sp->cluster_ip, int_target);
        }

        /* external IPs */
        for (uint32_t i = 0; i < sp->n_external_ips; i++) {
                if (has_any) {
                        LIT(nr, "-A KUBE-SERVICES");
                        comment_q(nr, st, " external IP");
                        dst_port_jump(nr, st, sp->external_ips[i], st->port, ext);
                }
                if (!has_external)
                        filter_rule(w, "KUBE-EXTERNAL-SERVICES", ext_comment, st,
                                    sp->external_ips[i], ext_target);
        }

        /* load-balancer ingress */
        for (uint32_t i = 0; i < sp->n_lb_vips; i++) {
                if (has_any) {
                        LIT(nr, "-A KUBE-SERVICES");
                        comment_q(nr, st, " loadbalancer IP");
                        dst_port_jump(nr, st, sp->lb_vips[i], st->port, lb_chain);
                }
                if (uses_fw) {
                        LIT(fr, "-A KUBE-PROXY-FIREWALL -m comment --comment \"");
                        put_spn(fr, st);
                        LIT(fr, " traffic not accepted by ");
                        put(fr, fw);
                        LIT(fr, "\"");
                        dst_port_jump(fr, st, sp->lb_vips[i], st->port, "DROP");
                }
        }
        if (!has_external)
                for (uint32_t i = 0; i < sp->n_lb_vips; i++)
                        filter_rule(w, "KUBE-EXTERNAL-SERVICES", ext_comment, st, sp->lb_vips[i],
                                    ext_target);

        /* node ports */
        if (sp->node_port) {
                char np[12];
                int_text(sp->node_port, np);
                if (has_any) {
                        if (w->opt->localhost_nodeports && w->fam == SE_IPV4 && w->opt->nfacct) {
                                LIT(nr, "-A KUBE-NODEPORTS");
                                comment(nr, spn);
                                put_mp(nr, st);
                                LIT(nr, " -d 127.0.0.0/8 --dport ");
                                put(nr, np);
                                LIT(nr, " -m nfacct --nfacct-name localhost_nps_accepted_pkts -j ");
                                put(nr, ext);
                                LIT(nr, "\n");
                        }
                        LIT(nr, "-A KUBE-NODEPORTS");
                        comment(nr, spn);
                        put_mp(nr, st);
                        LIT(nr, " --dport ");
                        put(nr, np);
                        LIT(nr, " -j ");
                        put(nr, ext);
                        LIT(nr, "\n");
                }
                if (!has_external) {
                        LIT(fr, "-A KUBE-EXTERNAL-SERVICES");
                        comment(fr, ext_comment);
                        LIT(fr, " -m addrtype --dst-type LOCAL");
                        put_mp(fr, st);
                        LIT(fr, " --dport ");
                        put(fr, np);
                        LIT(fr, " -j ");
                        put(fr, ext_target);
                        LIT(fr, "\n");
                }
        }

        /* health-check node port */
        if (sp->health_check_node_port) {
                LIT(fr, "-A KUBE-NODEPORTS");
                comment_q(fr, st, " health check node port");
                LIT(fr, " -m tcp -p tcp --dport ");
                se_strbuf_add_int(fr, sp->health_check_node_port);
                LIT(fr, " -j ACCEPT\n");
        }
}

/* The service's own nat chains: masquerading, KUBE-EXT-, KUBE-FW-. */
static void write_nat_chains(struct ipt *w, const struct se_proxy_svcport *sp,
                             const struct svc_plan *p)
{
        const struct svc_text *st = &p->st;
        struct se_strbuf *nr = w->nat_rules;
        struct se_strbuf *nc = &w->nat_chains;
        const char *svc = p->svc;
        const char *ext = p->ext;
        const char *fw = p->fw;
        const bool has_internal = p->has_internal;
        const bool has_external = p->has_external;
        const bool uses_ext_chain = p->uses_ext_chain;
        const bool uses_fw = p->uses_fw;
        const char *internal_chain = p->internal_chain;
        const char *external_policy_chain = p->external_policy_chain;
        /* internal traffic: masquerade off-cluster sources */
        if (has_internal && (w->opt->masquerade_all || w->detect)) {
                rule(nr, internal_chain);
                comment_q(nr, st, " cluster IP");
                put_mp(nr, st);
                LIT(nr, " -d ");
                put(nr, sp->cluster_ip);
                LIT(nr, " --dport ");
                put(nr, st->port);
                if (!w->opt->masquerade_all) {
                        LIT(nr, " ! -s ");
                        put(nr, w->detect);
                }
                LIT(nr, " -j KUBE-MARK-MASQ\n");
        }

        /* external traffic */
        if (uses_ext_chain) {
                chain(nc, "", ext);
                if (!sp->external_local) {
                        rule(nr, ext);
                        LIT(nr, " -m comment --comment \"masquerade traffic for ");
                        put_spn(nr, st);
                        LIT(nr, " external destinations\" -j KUBE-MARK-MASQ\n");
                } else {
                        if (w->detect) {
                                rule(nr, ext);
                                LIT(nr, " -m comment --comment \"pod traffic for ");
                                put_spn(nr, st);
                                LIT(nr, " external destinations\" -s ");
                                put(nr, w->detect);
                                LIT(nr, " -j ");
                                put(nr, svc);
                                LIT(nr, "\n");
                        }
                        rule(nr, ext);
                        LIT(nr, " -m comment --comment \"masquerade LOCAL traffic for ");
                        put_spn(nr, st);
                        LIT(nr, " external destinations\" -m addrtype --src-type LOCAL -j "
                                "KUBE-MARK-MASQ\n");
                        rule(nr, ext);
                        LIT(nr, " -m comment --comment \"route LOCAL traffic for ");
                        put_spn(nr, st);
                        LIT(nr, " external destinations\" -m addrtype --src-type LOCAL -j ");
                        put(nr, svc);
                        LIT(nr, "\n");
                }
                if (has_external) {
                        rule(nr, ext);
                        LIT(nr, " -j ");
                        put(nr, external_policy_chain);
                        LIT(nr, "\n");
                }
        }

        /* loadBalancerSourceRanges */
        if (uses_fw) {
                chain(nc, "", fw);
                bool from_node = false;
                for (uint32_t i = 0; i < sp->n_source_ranges; i++) {
                        rule(nr, fw);
                        comment_q(nr, st, " loadbalancer IP");
                        LIT(nr, " -s ");
                        put(nr, sp->source_ranges[i]);
                        LIT(nr, " -j ");
                        put(nr, ext);
                        LIT(nr, "\n");
                        for (unsigned k = 0; k < w->opt->n_node_ips; k++)
                                if (w->opt->node_ips[k].family == w->fam) {
                                        from_node |= se_cidr_contains(&sp->source_cidrs[i],
                                                                      &w->opt->node_ips[k]);
                                        break; /* the primary node IP of the family */
                                }
                }
                if (from_node)
                        for (uint32_t i = 0; i < sp->n_lb_vips; i++) {
                                rule(nr, fw);
                                comment_q(nr, st, " loadbalancer IP");
                                LIT(nr, " -s ");
                                put(nr, sp->lb_vips[i]);
                                LIT(nr, " -j ");
                                put(nr, ext);
                                LIT(nr, "\n");
                        }
                rule(nr, fw);
                LIT(nr, " -m comment --comment \"other traffic to ");
                put_spn(nr, st);
                LIT(nr, " will be dropped by KUBE-PROXY-FIREWALL\"\n");
        }
}

/* KUBE-SVC-/KUBE-SVL- to the endpoints, and one KUBE-SEP- each. */
static void write_endpoint_chains(struct ipt *w, const struct se_proxy_svcport *sp,
                                  const struct svc_plan *p)
{
        const struct svc_text *st = &p->st;
        const char *spn = sp->spn;
        struct se_strbuf *nr = w->nat_rules;
        struct se_strbuf *nc = &w->nat_chains;
        const char *svc = p->svc;
        const char *svl = p->svl;
        const bool uses_cluster_chain = p->uses_cluster_chain;
        const bool uses_local_chain = p->uses_local_chain;
        const struct proxy_categories *cat = &p->cat;
        if (uses_cluster_chain) {
                chain(nc, "", svc);
                svc_to_endpoints(w, sp, st, svc, cat->cluster, cat->n_cluster);
        }
        if (uses_local_chain) {
                chain(nc, "", svl);
                svc_to_endpoints(w, sp, st, svl, cat->local, cat->n_local);
        }

        /* one chain per reachable endpoint */
        for (uint32_t i = 0; i < cat->n_reachable; i++) {
                const struct se_proxy_endpoint *ep = cat->reachable[i];
                const char *eh = sep_hash(w, sp, ep);
                LIT(nc, ":KUBE-SEP-");
                se_strbuf_append(nc, eh, 16);
                LIT(nc, " - [0:0]\n");
                LIT(nr, "-A KUBE-SEP-");
                se_strbuf_append(nr, eh, 16);
                if (!w->large)
                        comment(nr, spn);
                LIT(nr, " -s ");
                put(nr, ep->ip);
                LIT(nr, " -j KUBE-MARK-MASQ\n-A KUBE-SEP-");
                se_strbuf_append(nr, eh, 16);
                if (!w->large)
                        comment(nr, spn);
                if (sp->affinity) {
                        LIT(nr, " -m recent --name KUBE-SEP-");
                        se_strbuf_append(nr, eh, 16);
                        LIT(nr, " --set");
                }
                put_mp(nr, st);
                LIT(nr, " -j DNAT --to-destination ");
                put(nr, ep->str);
                LIT(nr, "\n");
        }
}

/* Where the writer's four buffers end: a service's top-level rules are
 * what write_entries adds between two marks. */
struct marks {
        size_t at[4];
};

static void buffers(struct ipt *w, struct se_strbuf *b[4])
{
        b[0] = &w->filter_chains;
        b[1] = &w->filter_rules;
        b[2] = &w->nat_chains;
        b[3] = w->nat_rules;
}

static void mark(struct ipt *w, struct marks *m)
{
        struct se_strbuf *b[4];
        buffers(w, b);
        for (int i = 0; i < 4; i++)
                m->at[i] = b[i]->len;
}

/* A digest of what the buffers gained since m (carried syncs compare a
 * service's top-level rules by it). */
static void top_digest(struct ipt *w, const struct marks *m, uint8_t out[16])
{
        struct se_strbuf *b[4];
        struct se_fnv128a h;
        buffers(w, b);
        se_fnv128a_init(&h);
        for (int i = 0; i < 4; i++) {
                se_fnv128a_update(&h, b[i]->buf + m->at[i], b[i]->len - m->at[i]);
                se_fnv128a_update(&h, "", 1); /* the parts apart */
        }
        se_fnv128a_sum(&h, out);
}

static int write_service(struct ipt *w, const struct se_proxy_svcport *sp)
{
        struct svc_plan p;
        struct marks m;
        uint8_t top[16];
        int r = plan_service(w, sp, &p);
        if (r < 0)
                return r;
        mark(w, &m);
        write_entries(w, sp, &p);
        if (w->tracker)
                top_digest(w, &m, top);
        /* from here on only the service's own nat chains (partial syncs may
         * leave them out) */
        struct se_strbuf *nc = &w->nat_chains, *nr = w->nat_rules;
        size_t chains_at = nc->len, rules_at = nr->len;
        write_nat_chains(w, sp, &p);
        write_endpoint_chains(w, sp, &p);
        r = w->tracker ? proxy_tracker_segment(w->tracker, sp, nc, chains_at, nr, rules_at) : 0;
        if (r == 0 && w->tracker)
                proxy_tracker_set_top(w->tracker, top);
        proxy_categories_release(&p.cat);
        return r;
}

/* The last rule of nat KUBE-SERVICES: hand local destinations to NodePorts. */
static void nodeports_jump(struct ipt *w)
{
        const struct se_proxy_options *o = w->opt;
        static const char comment[] =
                "\"kubernetes service nodeports; NOTE: this must be the last rule in this chain\"";
        if (proxy_nodeport_all(o, w->fam)) {
                se_strbuf_printf(
                        w->nat_rules,
                        "-A KUBE-SERVICES -m comment --comment %s -m addrtype --dst-type LOCAL",
                        comment);
                if (w->fam == SE_IPV6)
                        se_strbuf_puts(w->nat_rules, " ! -d ::1/128");
                else if (!o->localhost_nodeports)
                        se_strbuf_puts(w->nat_rules, " ! -d 127.0.0.0/8");
                se_strbuf_puts(w->nat_rules, " -j KUBE-NODEPORTS\n");
                return;
        }
        /* the node IPs the CIDRs select (we know the node's addresses, not its
         * interfaces), plus the primary IP with `primary` */
        for (unsigned i = 0; i < o->n_node_ips; i++) {
                const struct se_ip *ip = &o->node_ips[i];
                if (ip->family != w->fam || !proxy_nodeport_ip(o, i))
                        continue;
                char text[64];
                se_ip_format(ip, text, sizeof(text));
                se_strbuf_printf(
                        w->nat_rules,
                        "-A KUBE-SERVICES -m comment --comment %s -d %s -j KUBE-NODEPORTS\n",
                        comment, text);
        }
        /* 127.0.0.1 is a node address too when a CIDR selects it */
        if (w->fam == SE_IPV4 && o->localhost_nodeports) {
                struct se_ip lo;
                if (se_parse_ip("127.0.0.1", &lo) == 0)
                        for (unsigned k = 0; k < o->n_nodeport_cidrs; k++)
                                if (se_cidr_contains(&o->nodeport_cidrs[k], &lo)) {
                                        se_strbuf_printf(
                                                w->nat_rules,
                                                "-A KUBE-SERVICES -m comment --comment %s -d 127.0.0.1 -j KUBE-NODEPORTS\n",
                                                comment);
                                        break;
                                }
        }
}

/* se_strbuf_grow within the buffer's cap (a reservation must not fail it) */
static void reserve_out(struct se_strbuf *out, size_t n)
{
        if (n < out->max - out->len)
                se_strbuf_grow(out, n);
}

/* Room for what the table will write, a little over (bytes per line of
 * each kind), so the big buffers are allocated once: never copied while
 * growing, and advised as huge pages before they are touched. */
static void reserve(struct ipt *w, const struct se_proxy_table *t, struct se_strbuf *out)
{
        size_t chains = 512, rules = 4096;
        for (uint32_t i = 0; i < t->n_ports; i++) {
                const struct se_proxy_svcport *sp = &t->ports[i];
                size_t spn = strlen(sp->spn);
                size_t per_ep = 320 + (w->large ? 0 : 3 * spn + 160);
                size_t ips = 1 + sp->n_external_ips + sp->n_lb_vips + sp->n_source_ranges;
                chains += 4 * 32 + (size_t)sp->n_eps * 32;
                rules +=
                        ips * (4 * spn + 400) + (size_t)sp->n_eps * per_ep * (sp->affinity ? 2 : 1);
        }
        se_strbuf_grow(&w->nat_chains, chains);
        reserve_out(w->nat_rules, rules);
        /* the top-level chains diffed: the nat rules are copied into out,
         * whole on full syncs (which the tracker then keeps, and reuses for
         * the next partial sync's copy: it must not grow by doubling) */
        if (w->nat_rules != out && (!w->tracker || proxy_tracker_full(w->tracker)))
                reserve_out(out, chains + rules + 4096);
        if (w->tracker)
                proxy_tracker_reserve(w->tracker, chains + rules, t->n_ports);
}

/* The top-level chains: those a full sync declares, and (ftop) those the
 * tracker knows of the filter table, in the order it records them. */
static const char *const filter_top[] = { "KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-FORWARD",
                                          "KUBE-NODEPORTS", "KUBE-PROXY-FIREWALL" };
static const char *const ftop[] = { "KUBE-SERVICES",  "KUBE-EXTERNAL-SERVICES", "KUBE-FORWARD",
                                    "KUBE-NODEPORTS", "KUBE-PROXY-FIREWALL",    "KUBE-FIREWALL" };
static const char *const nat_top[] = { "KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING",
                                       "KUBE-MARK-MASQ" };

int se_proxy_iptables_write(const struct se_proxy_table *t, const struct se_proxy_options *opt,
                            struct se_strbuf *out)
{
        return se_proxy_iptables_sync(t, opt, NULL, out);
}

int se_proxy_iptables_sync(const struct se_proxy_table *t, const struct se_proxy_options *opt,
                           struct se_proxy_tracker *tracker, struct se_strbuf *out)
{
        struct ipt w = { .opt = opt, .fam = t->family, .tracker = tracker };
        if (tracker) {
                proxy_tracker_begin(tracker);
                proxy_tracker_chains_only(tracker);
        }
        int r = 0;
        se_strbuf_init(&w.filter_chains, 0);
        se_strbuf_init(&w.filter_rules, 0);
        se_strbuf_init(&w.nat_chains, 0);
        se_strbuf_init(&w.nat_rules_buf, 0);
        struct proxy_top *top = tracker ? proxy_tracker_top(tracker) : NULL;
        size_t base = out->len;
        w.nat_rules = top ? &w.nat_rules_buf : out;
        proxy_mark_text(opt, w.mark);
        const struct se_cidr *cc = proxy_cluster_cidr(opt, t->family);
        if (cc) {
                proxy_cidr_text(cc, w.detect_buf, sizeof(w.detect_buf));
                w.detect = w.detect_buf;
        }
        w.large = t->n_endpoints > SE_PROXY_LARGE_CLUSTER_ENDPOINTS;
        reserve(&w, t, out);

        for (size_t i = 0; i < SE_ARRAY_SIZE(filter_top); i++)
                chain(&w.filter_chains, filter_top[i], "");
        for (size_t i = 0; i < SE_ARRAY_SIZE(nat_top); i++)
                chain(&w.nat_chains, nat_top[i], "");

        se_strbuf_printf(w.nat_rules, "-A KUBE-POSTROUTING -m mark ! --mark %s/%s -j RETURN\n",
                         w.mark, w.mark);
        se_strbuf_printf(w.nat_rules, "-A KUBE-POSTROUTING -j MARK --xor-mark %s\n", w.mark);
        se_strbuf_printf(
                w.nat_rules,
                "-A KUBE-POSTROUTING -m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE%s\n",
                opt->random_fully ? " --random-fully" : "");
        se_strbuf_printf(w.nat_rules, "-A KUBE-MARK-MASQ -j MARK --or-mark %s\n", w.mark);

        if (t->family == SE_IPV4 && opt->localhost_nodeports) {
                chain(&w.filter_chains, "KUBE-FIREWALL", "");
                se_strbuf_puts(
                        &w.filter_rules,
                        "-A KUBE-FIREWALL -m comment --comment \"block incoming localnet connections\" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP\n");
        }

        for (uint32_t i = 0; i < t->n_ports; i++)
                if (se_proxy_in_kernel(&t->ports[i], false) &&
                    (r = write_service(&w, &t->ports[i])) < 0)
                        goto out;

        if (tracker && (r = proxy_tracker_deletions(tracker, &w.nat_chains, w.nat_rules)) < 0)
                goto out;
        nodeports_jump(&w);

        if (!opt->conntrack_tcp_liberal)
                se_strbuf_printf(&w.filter_rules,
                                 "-A KUBE-FORWARD -m conntrack --ctstate INVALID%s -j DROP\n",
                                 opt->nfacct ?
                                         " -m nfacct --nfacct-name ct_state_invalid_dropped_pkts" :
                                         "");
        se_strbuf_printf(
                &w.filter_rules,
                "-A KUBE-FORWARD -m comment --comment \"kubernetes forwarding rules\" -m mark --mark %s/%s -j ACCEPT\n",
                w.mark, w.mark);
        se_strbuf_puts(
                &w.filter_rules,
                "-A KUBE-FORWARD -m comment --comment \"kubernetes forwarding conntrack rule\" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n");

        if (!top) {
                /* out holds the nat rules from base: put the rest in front */
                size_t n_rules = out->len - base;
                static const char head[] = "*filter\n", mid[] = "COMMIT\n*nat\n";
                const struct {
                        const char *data;
                        size_t n;
                } front[] = {
                        { head, sizeof(head) - 1 },
                        { w.filter_chains.buf, w.filter_chains.len },
                        { w.filter_rules.buf, w.filter_rules.len },
                        { mid, sizeof(mid) - 1 },
                        { w.nat_chains.buf, w.nat_chains.len },
                };
                size_t n_front = 0;
                for (size_t i = 0; i < SE_ARRAY_SIZE(front); i++)
                        n_front += front[i].n;
                if (se_strbuf_grow(out, n_front + 8) == 0) {
                        char *p = out->buf + base;
                        memmove(p + n_front, p, n_rules);
                        for (size_t i = 0; i < SE_ARRAY_SIZE(front); i++) {
                                memcpy(p, front[i].data, front[i].n);
                                p += front[i].n;
                        }
                        out->len += n_front;
                        out->buf[out->len] = 0;
                        /* the services' chain lines and rules, now in out */
                        if (tracker) {
                                proxy_tracker_moved(tracker, 0, out,
                                                    base + n_front - w.nat_chains.len);
                                proxy_tracker_moved(tracker, 1, out, n_front);
                        }
                }
                se_strbuf_puts(out, "COMMIT\n");
        } else {
                struct se_strbuf *bufs[2][2] = { { &w.filter_chains, &w.filter_rules },
                                                 { &w.nat_chains, &w.nat_rules_buf } };
                bool partial = !proxy_tracker_full(tracker);
                for (int k = 0; k < 2 && r == 0; k++) {
                        size_t at = out->len;
                        se_strbuf_puts(out, k ? "*nat\n" : "*filter\n");
                        size_t body = out->len;
                        r = proxy_top_write(top, partial, k, k ? nat_top : ftop,
                                            k ? SE_ARRAY_SIZE(nat_top) : SE_ARRAY_SIZE(ftop),
                                            bufs[k][0]->buf, bufs[k][0]->len, bufs[k][1]->buf,
                                            bufs[k][1]->len, out);
                        /* a full sync's nat body is the chain lines then the
                         * rules, as written (only full syncs keep segments
                         * in place) */
                        if (k == 1 && !partial) {
                                proxy_tracker_moved(tracker, 0, out, body);
                                proxy_tracker_moved(tracker, 1, out, body + w.nat_chains.len);
                        }
                        if (out->len == body) /* nothing for this table */
                                se_strbuf_truncate(out, at);
                        else
                                se_strbuf_puts(out, "COMMIT\n");
                }
                if (r < 0)
                        goto out;
        }
        r = se_strbuf_failed(&w.filter_chains)        ?:
                    se_strbuf_failed(&w.filter_rules) ?:
                    se_strbuf_failed(&w.nat_chains)   ?:
                    se_strbuf_failed(w.nat_rules)     ?:
                                                        se_strbuf_failed(out);
out:
        if (r < 0 && tracker) { /* the segments were in buffers going away */
                proxy_tracker_moved(tracker, 0, NULL, 0);
                proxy_tracker_moved(tracker, 1, NULL, 0);
        }
        se_strbuf_release(&w.filter_chains);
        se_strbuf_release(&w.filter_rules);
        se_strbuf_release(&w.nat_chains);
        if (r < 0 && !top)
                se_strbuf_truncate(out, base); /* no half-written rules */
        se_strbuf_release(&w.nat_rules_buf);
        free(w.ep_hash);
        return r;
}

/* A carried port's top-level rules (filter, nat: as a full sync writes
 * them; empty for a port removed) edited into the known chains. */
static int carry_top(struct se_proxy_tracker *tracker, const char *spn, const struct se_strbuf *f,
                     const struct se_strbuf *nat, struct se_strbuf *f_edits,
                     struct se_strbuf *nat_edits)
{
        struct proxy_top *top = proxy_tracker_top(tracker);
        if (!top)
                return -EAGAIN; /* kube-proxy's partial syncs: the chains whole */
        return proxy_top_carry_port(top, 0, ftop, SE_ARRAY_SIZE(ftop), spn, f->buf ? f->buf : "", f->len, f_edits) ?:
                       proxy_top_carry_port(top, 1, nat_top, SE_ARRAY_SIZE(nat_top), spn,
                                            nat->buf ? nat->buf : "", nat->len, nat_edits);
}

int se_proxy_iptables_sync_changed(const struct se_proxy_svcport *const *ports,
                                   const struct se_proxy_svcport *const *was, size_t n,
                                   enum se_ip_family family, bool large,
                                   const struct se_proxy_options *opt,
                                   struct se_proxy_tracker *tracker, struct se_strbuf *out)
{
        struct ipt w = { .opt = opt, .fam = family, .large = large };
        struct se_strbuf chains, rules, gone_chains, gone_rules, f_edits, nat_edits, none;
        int r = proxy_tracker_carry_begin(tracker);
        if (r < 0)
                return r;
        se_strbuf_init(&w.filter_chains, 0);
        se_strbuf_init(&w.filter_rules, 0);
        se_strbuf_init(&w.nat_chains, 0);
        se_strbuf_init(&w.nat_rules_buf, 0);
        w.nat_rules = &w.nat_rules_buf;
        se_strbuf_init(&chains, 0);
        se_strbuf_init(&rules, 0);
        se_strbuf_init(&gone_chains, 0);
        se_strbuf_init(&gone_rules, 0);
        se_strbuf_init(&f_edits, 0);
        se_strbuf_init(&nat_edits, 0);
        se_strbuf_init(&none, 0);
        struct se_strbuf top_nat;
        se_strbuf_init(&top_nat, 0);
        proxy_mark_text(opt, w.mark);
        const struct se_cidr *cc = proxy_cluster_cidr(opt, family);
        if (cc) {
                proxy_cidr_text(cc, w.detect_buf, sizeof(w.detect_buf));
                w.detect = w.detect_buf;
        }
        for (size_t i = 0; r == 0 && i < n; i++) {
                const struct se_proxy_svcport *sp = ports[i];
                struct svc_plan p;
                struct marks m;
                uint8_t top[16];
                bool same = false, top_changed = true;
                if (!sp && (!was || !was[i]))
                        continue; /* neither before nor now in the kernel */
                if (!sp) { /* removed: its chains deleted, its top-level rules too */
                        r = proxy_tracker_carry_remove(tracker, was[i], &gone_chains, &gone_rules) ?:
                                    carry_top(tracker, was[i]->spn, &none, &none, &f_edits,
                                              &nat_edits);
                        continue;
                }
                /* a port routed to the userspace proxy has no rules here:
                 * its top-level entries go, which only a table sync does */
                if (!se_proxy_in_kernel(sp, false)) {
                        r = -EAGAIN;
                        break;
                }
                if ((r = plan_service(&w, sp, &p)) < 0)
                        break;
                /* the top-level rules, written as a full sync would, into
                 * empty buffers: compared by digest, edited in when changed */
                se_strbuf_reset(&w.filter_chains);
                se_strbuf_reset(&w.filter_rules);
                se_strbuf_reset(&w.nat_chains);
                se_strbuf_reset(w.nat_rules);
                mark(&w, &m);
                write_entries(&w, sp, &p);
                top_digest(&w, &m, top);
                se_strbuf_reset(&top_nat);
                se_strbuf_append(&top_nat, w.nat_rules->buf, w.nat_rules->len);
                se_strbuf_reset(&w.nat_chains);
                se_strbuf_reset(w.nat_rules);
                write_nat_chains(&w, sp, &p);
                write_endpoint_chains(&w, sp, &p);
                proxy_categories_release(&p.cat);
                r = se_strbuf_failed(&w.nat_chains)       ?:
                            se_strbuf_failed(w.nat_rules) ?:
                                                            se_strbuf_failed(&top_nat);
                if (r == 0 && (!was || was[i]))
                        r = proxy_tracker_carry_top(tracker, sp, top, w.nat_chains.buf,
                                                    w.nat_chains.len, w.nat_rules->buf,
                                                    w.nat_rules->len, &gone_chains, &gone_rules,
                                                    &same, &top_changed);
                else if (r == 0) /* added */
                        r = proxy_tracker_carry_add_top(tracker, sp, top, w.nat_chains.buf,
                                                        w.nat_chains.len, w.nat_rules->buf,
                                                        w.nat_rules->len);
                if (r == 0 && top_changed)
                        r = carry_top(tracker, sp->spn, &w.filter_rules, &top_nat, &f_edits,
                                      &nat_edits);
                if (r == 0 && !same) {
                        se_strbuf_append(&chains, w.nat_chains.buf, w.nat_chains.len);
                        se_strbuf_append(&rules, w.nat_rules->buf, w.nat_rules->len);
                }
        }
        if (r == 0)
                r = se_strbuf_failed(&chains)              ?:
                            se_strbuf_failed(&rules)       ?:
                            se_strbuf_failed(&gone_chains) ?:
                            se_strbuf_failed(&gone_rules)  ?:
                            se_strbuf_failed(&f_edits)     ?:
                                                             se_strbuf_failed(&nat_edits);
        size_t base = out->len;
        /* the filter table's edits; then the nat chains of the changed
         * ports, the chains they dropped (flushed), the edits of the
         * top-level chains (the jumps into dropped chains go), and last
         * the dropped chains deleted */
        if (r == 0 && f_edits.len) {
                se_strbuf_lit(out, "*filter\n");
                se_strbuf_append(out, f_edits.buf, f_edits.len);
                se_strbuf_lit(out, "COMMIT\n");
        }
        if (r == 0 && chains.len + gone_chains.len + nat_edits.len > 0) {
                se_strbuf_lit(out, "*nat\n");
                se_strbuf_append(out, chains.buf, chains.len);
                se_strbuf_append(out, gone_chains.buf, gone_chains.len);
                se_strbuf_append(out, rules.buf, rules.len);
                se_strbuf_append(out, nat_edits.buf, nat_edits.len);
                se_strbuf_append(out, gone_rules.buf, gone_rules.len);
                se_strbuf_lit(out, "COMMIT\n");
        }
        if (r == 0 && (r = se_strbuf_failed(out)) < 0)
                se_strbuf_truncate(out, base);
        if (r < 0)
                proxy_tracker_carry_abort(tracker);
        se_strbuf_release(&w.filter_chains);
        se_strbuf_release(&w.filter_rules);
        se_strbuf_release(&w.nat_chains);
        se_strbuf_release(&w.nat_rules_buf);
        se_strbuf_release(&chains);
        se_strbuf_release(&rules);
        se_strbuf_release(&gone_chains);
        se_strbuf_release(&gone_rules);
        se_strbuf_release(&f_edits);
        se_strbuf_release(&nat_edits);
        se_strbuf_release(&top_nat);
        free(w.ep_hash);
        return r;
}

/* The iptables backend: iptables-restore input with kube-proxy's chains,
 * rule order, comments and names (pkg/proxy/iptables/proxier.go). Lines of
 * one service are written together, services in spn order. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <svcenv/proxy.h>

#include "proxy_internal.h"

struct ipt {
        struct se_strbuf filter_chains, filter_rules, nat_chains, nat_rules;
        const struct se_proxy_options *opt;
        enum se_ip_family fam;
        bool large; /* large-cluster mode: no comments on endpoint rules */
        char mark[16];
        const char *detect; /* cluster CIDR text, NULL without a detector */
        char detect_buf[80];
        struct se_proxy_tracker *tracker; /* NULL: plain full output */
};

static void chain(struct se_strbuf *sb, const char *prefix, const char *hash)
{
        se_strbuf_printf(sb, ":%s%s - [0:0]\n", prefix, hash);
}

/* `-m comment --comment X` for endpoint rules, left out in large-cluster mode */
static void ep_comment(struct ipt *w, const char *text, bool quote)
{
        if (w->large)
                return;
        if (quote)
                se_strbuf_printf(&w->nat_rules, " -m comment --comment \"%s\"", text);
        else
                se_strbuf_printf(&w->nat_rules, " -m comment --comment %s", text);
}

/* writeServiceToEndpointRules */
static int svc_to_endpoints(struct ipt *w, const struct se_proxy_svcport *sp, const char *svc_chain,
                            const struct se_proxy_endpoint *const *eps, uint32_t n)
{
        struct se_strbuf *r = &w->nat_rules;
        char h[17], c[700];
        if (sp->affinity) {
                for (uint32_t i = 0; i < n; i++) {
                        int e = se_proxy_chain_hash(sp->spn, sp->proto, eps[i]->str, h);
                        if (e < 0)
                                return e;
                        snprintf(c, sizeof(c), "%s -> %s", sp->spn, eps[i]->str);
                        se_strbuf_printf(r, "-A %s", svc_chain);
                        ep_comment(w, c, true);
                        se_strbuf_printf(r,
                                         " -m recent --name KUBE-SEP-%s --rcheck --seconds %d "
                                         "--reap -j KUBE-SEP-%s\n",
                                         h, sp->affinity_timeout, h);
                }
        }
        for (uint32_t i = 0; i < n; i++) {
                int e = se_proxy_chain_hash(sp->spn, sp->proto, eps[i]->str, h);
                if (e < 0)
                        return e;
                snprintf(c, sizeof(c), "%s -> %s", sp->spn, eps[i]->str);
                se_strbuf_printf(r, "-A %s", svc_chain);
                ep_comment(w, c, true);
                if (i + 1 < n) {
                        char p[16];
                        se_proxy_probability(n - i, p);
                        se_strbuf_printf(r, " -m statistic --mode random --probability %s", p);
                }
                se_strbuf_printf(r, " -j KUBE-SEP-%s\n", h);
        }
        return 0;
}

static void filter_rule(struct ipt *w, const char *chain_name, const char *comment,
                        const struct se_proxy_svcport *sp, const char *dst, int32_t port,
                        const char *target)
{
        se_strbuf_printf(&w->filter_rules,
                         "-A %s -m comment --comment %s -m %s -p %s -d %s --dport %d -j %s\n",
                         chain_name, comment, sp->proto, sp->proto, dst, port, target);
}

static int write_service(struct ipt *w, const struct se_proxy_svcport *sp)
{
        struct proxy_categories cat;
        char h[17], svc[32], svl[32], ext[32], fw[32];
        int r = se_proxy_chain_hash(sp->spn, sp->proto, NULL, h);
        if (r < 0)
                return r;
        r = proxy_categorize(sp, w->opt, &cat);
        if (r < 0)
                return r;
        snprintf(svc, sizeof(svc), "KUBE-SVC-%s", h);
        snprintf(svl, sizeof(svl), "KUBE-SVL-%s", h);
        snprintf(ext, sizeof(ext), "KUBE-EXT-%s", h);
        snprintf(fw, sizeof(fw), "KUBE-FW-%s", h);
        struct se_strbuf *nr = &w->nat_rules, *nc = &w->nat_chains;
        const char *spn = sp->spn, *proto = sp->proto;

        bool has_any = cat.has_any;
        bool uses_cluster_chain = cat.n_cluster > 0 && proxy_uses_cluster(sp);
        bool uses_local_chain = cat.n_local > 0 && proxy_uses_local(sp);
        const char *internal_chain = svc;
        bool has_internal = has_any;
        if (sp->internal_local) {
                internal_chain = svl;
                if (cat.n_local == 0)
                        has_internal = false;
        }
        const char *external_policy_chain = svc;
        bool has_external = has_any;
        if (sp->external_local) {
                external_policy_chain = svl;
                if (cat.n_local == 0)
                        has_external = false;
        }
        bool uses_ext_chain = has_any && proxy_externally_accessible(sp);
        bool uses_fw = has_any && sp->n_lb_vips > 0 && sp->n_source_ranges > 0;
        const char *lb_chain = uses_fw ? fw : ext;

        char int_comment[700] = "", ext_comment[700] = "";
        const char *int_target = NULL, *ext_target = NULL;
        if (!has_any) {
                snprintf(int_comment, sizeof(int_comment), "\"%s has no endpoints\"", spn);
                snprintf(ext_comment, sizeof(ext_comment), "\"%s has no endpoints\"", spn);
                int_target = ext_target = "REJECT";
        } else {
                if (!has_internal) {
                        snprintf(int_comment, sizeof(int_comment), "\"%s has no local endpoints\"",
                                 spn);
                        int_target = "DROP";
                }
                if (!has_external) {
                        snprintf(ext_comment, sizeof(ext_comment), "\"%s has no local endpoints\"",
                                 spn);
                        ext_target = "DROP";
                }
        }

        /* cluster IP */
        if (has_internal)
                se_strbuf_printf(
                        nr,
                        "-A KUBE-SERVICES -m comment --comment \"%s cluster IP\" -m %s -p %s -d %s --dport %d -j %s\n",
                        spn, proto, proto, sp->cluster_ip, sp->port, internal_chain);
        else
                filter_rule(w, "KUBE-SERVICES", int_comment, sp, sp->cluster_ip, sp->port,
                            int_target);

        /* external IPs */
        for (uint32_t i = 0; i < sp->n_external_ips; i++) {
                if (has_any)
                        se_strbuf_printf(
                                nr,
                                "-A KUBE-SERVICES -m comment --comment \"%s external IP\" -m %s -p %s -d %s --dport %d -j %s\n",
                                spn, proto, proto, sp->external_ips[i], sp->port, ext);
                if (!has_external)
                        filter_rule(w, "KUBE-EXTERNAL-SERVICES", ext_comment, sp,
                                    sp->external_ips[i], sp->port, ext_target);
        }

        /* load-balancer ingress */
        for (uint32_t i = 0; i < sp->n_lb_vips; i++) {
                if (has_any)
                        se_strbuf_printf(
                                nr,
                                "-A KUBE-SERVICES -m comment --comment \"%s loadbalancer IP\" -m %s -p %s -d %s --dport %d -j %s\n",
                                spn, proto, proto, sp->lb_vips[i], sp->port, lb_chain);
                if (uses_fw)
                        se_strbuf_printf(
                                &w->filter_rules,
                                "-A KUBE-PROXY-FIREWALL -m comment --comment \"%s traffic not accepted by %s\" -m %s -p %s -d %s --dport %d -j DROP\n",
                                spn, fw, proto, proto, sp->lb_vips[i], sp->port);
        }
        if (!has_external)
                for (uint32_t i = 0; i < sp->n_lb_vips; i++)
                        filter_rule(w, "KUBE-EXTERNAL-SERVICES", ext_comment, sp, sp->lb_vips[i],
                                    sp->port, ext_target);

        /* node ports */
        if (sp->node_port) {
                if (has_any) {
                        if (w->opt->localhost_nodeports && w->fam == SE_IPV4 && w->opt->nfacct)
                                se_strbuf_printf(
                                        nr,
                                        "-A KUBE-NODEPORTS -m comment --comment %s -m %s -p %s -d 127.0.0.0/8 --dport %d -m nfacct --nfacct-name localhost_nps_accepted_pkts -j %s\n",
                                        spn, proto, proto, sp->node_port, ext);
                        se_strbuf_printf(
                                nr,
                                "-A KUBE-NODEPORTS -m comment --comment %s -m %s -p %s --dport %d -j %s\n",
                                spn, proto, proto, sp->node_port, ext);
                }
                if (!has_external)
                        se_strbuf_printf(
                                &w->filter_rules,
                                "-A KUBE-EXTERNAL-SERVICES -m comment --comment %s -m addrtype --dst-type LOCAL -m %s -p %s --dport %d -j %s\n",
                                ext_comment, proto, proto, sp->node_port, ext_target);
        }

        /* health-check node port */
        if (sp->health_check_node_port)
                se_strbuf_printf(
                        &w->filter_rules,
                        "-A KUBE-NODEPORTS -m comment --comment \"%s health check node port\" -m tcp -p tcp --dport %d -j ACCEPT\n",
                        spn, sp->health_check_node_port);

        /* from here on only the service's own nat chains (partial syncs may
         * leave them out) */
        size_t chains_at = nc->len, rules_at = nr->len;

        /* internal traffic: masquerade off-cluster sources */
        if (has_internal) {
                if (w->opt->masquerade_all)
                        se_strbuf_printf(
                                nr,
                                "-A %s -m comment --comment \"%s cluster IP\" -m %s -p %s -d %s --dport %d -j KUBE-MARK-MASQ\n",
                                internal_chain, spn, proto, proto, sp->cluster_ip, sp->port);
                else if (w->detect)
                        se_strbuf_printf(
                                nr,
                                "-A %s -m comment --comment \"%s cluster IP\" -m %s -p %s -d %s --dport %d ! -s %s -j KUBE-MARK-MASQ\n",
                                internal_chain, spn, proto, proto, sp->cluster_ip, sp->port,
                                w->detect);
        }

        /* external traffic */
        if (uses_ext_chain) {
                chain(nc, "", ext);
                if (!sp->external_local) {
                        se_strbuf_printf(
                                nr,
                                "-A %s -m comment --comment \"masquerade traffic for %s external destinations\" -j KUBE-MARK-MASQ\n",
                                ext, spn);
                } else {
                        if (w->detect)
                                se_strbuf_printf(
                                        nr,
                                        "-A %s -m comment --comment \"pod traffic for %s external destinations\" -s %s -j %s\n",
                                        ext, spn, w->detect, svc);
                        se_strbuf_printf(
                                nr,
                                "-A %s -m comment --comment \"masquerade LOCAL traffic for %s external destinations\" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ\n",
                                ext, spn);
                        se_strbuf_printf(
                                nr,
                                "-A %s -m comment --comment \"route LOCAL traffic for %s external destinations\" -m addrtype --src-type LOCAL -j %s\n",
                                ext, spn, svc);
                }
                if (has_external)
                        se_strbuf_printf(nr, "-A %s -j %s\n", ext, external_policy_chain);
        }

        /* loadBalancerSourceRanges */
        if (uses_fw) {
                chain(nc, "", fw);
                bool from_node = false;
                for (uint32_t i = 0; i < sp->n_source_ranges; i++) {
                        se_strbuf_printf(
                                nr,
                                "-A %s -m comment --comment \"%s loadbalancer IP\" -s %s -j %s\n",
                                fw, spn, sp->source_ranges[i], ext);
                        for (unsigned k = 0; k < w->opt->n_node_ips; k++)
                                if (w->opt->node_ips[k].family == w->fam) {
                                        from_node |= se_cidr_contains(&sp->source_cidrs[i],
                                                                      &w->opt->node_ips[k]);
                                        break; /* the primary node IP of the family */
                                }
                }
                if (from_node)
                        for (uint32_t i = 0; i < sp->n_lb_vips; i++)
                                se_strbuf_printf(
                                        nr,
                                        "-A %s -m comment --comment \"%s loadbalancer IP\" -s %s -j %s\n",
                                        fw, spn, sp->lb_vips[i], ext);
                se_strbuf_printf(
                        nr,
                        "-A %s -m comment --comment \"other traffic to %s will be dropped by KUBE-PROXY-FIREWALL\"\n",
                        fw, spn);
        }

        if (uses_cluster_chain) {
                chain(nc, "", svc);
                if ((r = svc_to_endpoints(w, sp, svc, cat.cluster, cat.n_cluster)) < 0)
                        goto out;
        }
        if (uses_local_chain) {
                chain(nc, "", svl);
                if ((r = svc_to_endpoints(w, sp, svl, cat.local, cat.n_local)) < 0)
                        goto out;
        }

        /* one chain per reachable endpoint */
        for (uint32_t i = 0; i < cat.n_reachable; i++) {
                const struct se_proxy_endpoint *ep = cat.reachable[i];
                char eh[17];
                if ((r = se_proxy_chain_hash(spn, proto, ep->str, eh)) < 0)
                        goto out;
                chain(nc, "KUBE-SEP-", eh);
                se_strbuf_printf(nr, "-A KUBE-SEP-%s", eh);
                ep_comment(w, spn, false);
                se_strbuf_printf(nr, " -s %s -j KUBE-MARK-MASQ\n", ep->ip);
                se_strbuf_printf(nr, "-A KUBE-SEP-%s", eh);
                ep_comment(w, spn, false);
                if (sp->affinity)
                        se_strbuf_printf(nr, " -m recent --name KUBE-SEP-%s --set", eh);
                se_strbuf_printf(nr, " -m %s -p %s -j DNAT --to-destination %s\n", proto, proto,
                                 ep->str);
        }
        r = w->tracker ? proxy_tracker_segment(w->tracker, sp, nc, chains_at, nr, rules_at) : 0;
out:
        proxy_categories_release(&cat);
        return r;
}

/* The last rule of nat KUBE-SERVICES: hand local destinations to NodePorts. */
static void nodeports_jump(struct ipt *w)
{
        const struct se_proxy_options *o = w->opt;
        static const char comment[] =
                "\"kubernetes service nodeports; NOTE: this must be the last rule in this chain\"";
        if (o->n_nodeport_cidrs == 0 && !o->nodeport_primary) {
                se_strbuf_printf(
                        &w->nat_rules,
                        "-A KUBE-SERVICES -m comment --comment %s -m addrtype --dst-type LOCAL",
                        comment);
                if (w->fam == SE_IPV6)
                        se_strbuf_puts(&w->nat_rules, " ! -d ::1/128");
                else if (!o->localhost_nodeports)
                        se_strbuf_puts(&w->nat_rules, " ! -d 127.0.0.0/8");
                se_strbuf_puts(&w->nat_rules, " -j KUBE-NODEPORTS\n");
                return;
        }
        /* the node IPs the CIDRs select (we know the node's addresses, not its
         * interfaces), plus the primary IP with `primary` */
        for (unsigned i = 0; i < o->n_node_ips; i++) {
                const struct se_ip *ip = &o->node_ips[i];
                bool take = false;
                if (ip->family != w->fam)
                        continue;
                for (unsigned k = 0; k < o->n_nodeport_cidrs && !take; k++)
                        take = se_cidr_contains(&o->nodeport_cidrs[k], ip);
                if (o->nodeport_primary) {
                        unsigned first = 0;
                        while (first < o->n_node_ips && o->node_ips[first].family != w->fam)
                                first++;
                        take |= first == i;
                }
                if (!take)
                        continue;
                char text[64];
                se_ip_format(ip, text, sizeof(text));
                se_strbuf_printf(
                        &w->nat_rules,
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
                                                &w->nat_rules,
                                                "-A KUBE-SERVICES -m comment --comment %s -d 127.0.0.1 -j KUBE-NODEPORTS\n",
                                                comment);
                                        break;
                                }
        }
}

int se_proxy_iptables_write(const struct se_proxy_table *t, const struct se_proxy_options *opt,
                            struct se_strbuf *out)
{
        return se_proxy_iptables_sync(t, opt, NULL, out);
}

int se_proxy_iptables_sync(const struct se_proxy_table *t, const struct se_proxy_options *opt,
                           struct se_proxy_tracker *tracker, struct se_strbuf *out)
{
        struct ipt w = { .opt = opt, .fam = t->family, .tracker = tracker };
        if (tracker)
                proxy_tracker_begin(tracker);
        int r = 0;
        se_strbuf_init(&w.filter_chains, 0);
        se_strbuf_init(&w.filter_rules, 0);
        se_strbuf_init(&w.nat_chains, 0);
        se_strbuf_init(&w.nat_rules, 0);
        proxy_mark_text(opt, w.mark);
        const struct se_cidr *cc = proxy_cluster_cidr(opt, t->family);
        if (cc) {
                proxy_cidr_text(cc, w.detect_buf, sizeof(w.detect_buf));
                w.detect = w.detect_buf;
        }
        w.large = t->n_endpoints > SE_PROXY_LARGE_CLUSTER_ENDPOINTS;

        static const char *const filter_top[] = { "KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES",
                                                  "KUBE-FORWARD", "KUBE-NODEPORTS",
                                                  "KUBE-PROXY-FIREWALL" };
        static const char *const nat_top[] = { "KUBE-SERVICES", "KUBE-NODEPORTS",
                                               "KUBE-POSTROUTING", "KUBE-MARK-MASQ" };
        for (size_t i = 0; i < SE_ARRAY_SIZE(filter_top); i++)
                chain(&w.filter_chains, filter_top[i], "");
        for (size_t i = 0; i < SE_ARRAY_SIZE(nat_top); i++)
                chain(&w.nat_chains, nat_top[i], "");

        se_strbuf_printf(&w.nat_rules, "-A KUBE-POSTROUTING -m mark ! --mark %s/%s -j RETURN\n",
                         w.mark, w.mark);
        se_strbuf_printf(&w.nat_rules, "-A KUBE-POSTROUTING -j MARK --xor-mark %s\n", w.mark);
        se_strbuf_printf(
                &w.nat_rules,
                "-A KUBE-POSTROUTING -m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE%s\n",
                opt->random_fully ? " --random-fully" : "");
        se_strbuf_printf(&w.nat_rules, "-A KUBE-MARK-MASQ -j MARK --or-mark %s\n", w.mark);

        if (t->family == SE_IPV4 && opt->localhost_nodeports) {
                chain(&w.filter_chains, "KUBE-FIREWALL", "");
                se_strbuf_puts(
                        &w.filter_rules,
                        "-A KUBE-FIREWALL -m comment --comment \"block incoming localnet connections\" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP\n");
        }

        for (uint32_t i = 0; i < t->n_ports; i++)
                if ((r = write_service(&w, &t->ports[i])) < 0)
                        goto out;

        if (tracker && (r = proxy_tracker_deletions(tracker, &w.nat_chains, &w.nat_rules)) < 0)
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

        struct proxy_top *top = tracker ? proxy_tracker_top(tracker) : NULL;
        if (!top) {
                se_strbuf_puts(out, "*filter\n");
                se_strbuf_add(out, w.filter_chains.buf, w.filter_chains.len);
                se_strbuf_add(out, w.filter_rules.buf, w.filter_rules.len);
                se_strbuf_puts(out, "COMMIT\n*nat\n");
                se_strbuf_add(out, w.nat_chains.buf, w.nat_chains.len);
                se_strbuf_add(out, w.nat_rules.buf, w.nat_rules.len);
                se_strbuf_puts(out, "COMMIT\n");
        } else {
                static const char *const ftop[] = { "KUBE-SERVICES",       "KUBE-EXTERNAL-SERVICES",
                                                    "KUBE-FORWARD",        "KUBE-NODEPORTS",
                                                    "KUBE-PROXY-FIREWALL", "KUBE-FIREWALL" };
                struct se_strbuf *bufs[2][2] = { { &w.filter_chains, &w.filter_rules },
                                                 { &w.nat_chains, &w.nat_rules } };
                bool partial = !proxy_tracker_full(tracker);
                for (int k = 0; k < 2 && r == 0; k++) {
                        size_t at = out->len;
                        se_strbuf_puts(out, k ? "*nat\n" : "*filter\n");
                        size_t body = out->len;
                        r = proxy_top_write(top, partial, k, k ? nat_top : ftop,
                                            k ? SE_ARRAY_SIZE(nat_top) : SE_ARRAY_SIZE(ftop),
                                            bufs[k][0]->buf, bufs[k][0]->len, bufs[k][1]->buf,
                                            bufs[k][1]->len, out);
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
                    se_strbuf_failed(&w.nat_rules)    ?:
                                                        se_strbuf_failed(out);
out:
        se_strbuf_release(&w.filter_chains);
        se_strbuf_release(&w.filter_rules);
        se_strbuf_release(&w.nat_chains);
        se_strbuf_release(&w.nat_rules);
        return r;
}

/* The rules that send proxied service ports to the proxy's one port: TCP by
 * REDIRECT (nat; the proxy reads SO_ORIGINAL_DST), UDP by TPROXY (mangle;
 * conntrack's getsockopt has no UDP, so the proxy reads IP_ORIGDSTADDR and
 * answers from a transparent socket bound to the VIP). NodePorts come last,
 * matched on any local address, as kube-proxy's. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <svcenv/macro.h>
#include <svcenv/parse.h>
#include <svcenv/uproxy.h>

#define CHAIN     SE_UPROXY_NAT_CHAIN
#define CHAIN_NP  SE_UPROXY_NODEPORT_CHAIN
#define CHAIN_TP  SE_UPROXY_TPROXY_CHAIN
#define CHAIN_FW  SE_UPROXY_FIREWALL_CHAIN
#define NFT_TABLE SE_UPROXY_NFT_TABLE

static bool proxied(const struct se_proxy_svcport *sp, const struct se_uproxy_rules_opts *o)
{
        if (sp->protocol != SE_PROTO_TCP && sp->protocol != SE_PROTO_UDP)
                return false;
        return !o->want || o->want(sp, o->data);
}

bool se_uproxy_routed(const struct se_proxy_svcport *sp, void *data)
{
        return !se_proxy_in_kernel(sp, *(const bool *)data);
}

bool se_uproxy_any_routed(const struct se_proxy_table *t, bool nft)
{
        for (uint32_t i = 0; i < t->n_ports; i++)
                if (!se_proxy_in_kernel(&t->ports[i], nft))
                        return true;
        return false;
}

/* kube-proxy's firewall: the port's LB IPs take only these sources */
static bool firewalled(const struct se_proxy_svcport *sp)
{
        return sp->n_lb_vips > 0 && sp->n_source_ranges > 0;
}

bool se_uproxy_any_firewall(const struct se_proxy_table *t, const struct se_uproxy_rules_opts *o)
{
        for (uint32_t i = 0; i < t->n_ports; i++)
                if (proxied(&t->ports[i], o) && firewalled(&t->ports[i]))
                        return true;
        return false;
}

/* Whether a source range holds the node's primary IP of sp's family: then
 * the LB IPs are allowed as sources, as a VIP looped back locally by the
 * node carries the VIP as its source (kube-proxy's allowFromNode). */
static bool from_node(const struct se_proxy_svcport *sp, enum se_ip_family fam,
                      const struct se_uproxy_rules_opts *o)
{
        const struct se_proxy_options *n = o->node;
        for (unsigned k = 0; n && k < n->n_node_ips; k++) {
                if (n->node_ips[k].family != fam)
                        continue;
                for (uint32_t i = 0; i < sp->n_source_ranges; i++)
                        if (se_cidr_contains(&sp->source_cidrs[i], &n->node_ips[k]))
                                return true;
                return false; /* the primary node IP of the family only */
        }
        return false;
}

static void ipt_rule(struct se_strbuf *out, const struct se_proxy_svcport *sp, const char *src,
                     const char *ip, bool v6, const struct se_uproxy_rules_opts *o)
{
        bool udp = sp->protocol == SE_PROTO_UDP;
        const char *chain = udp ? CHAIN_TP : ip ? CHAIN : CHAIN_NP;
        se_strbuf_printf(out, "-A %s -m comment --comment \"%s%s\"", chain, sp->spn,
                         ip ? "" : " nodePort");
        if (src)
                se_strbuf_printf(out, " -s %s%s", src, strchr(src, '/') ? "" : v6 ? "/128" : "/32");
        if (ip)
                se_strbuf_printf(out, " -d %s/%d", ip, v6 ? 128 : 32);
        else if (udp)
                se_strbuf_puts(out, " -m addrtype --dst-type LOCAL");
        se_strbuf_printf(out, " -p %s -m %s --dport %d", sp->proto, sp->proto,
                         ip ? sp->port : sp->node_port);
        if (udp)
                se_strbuf_printf(out, " -j TPROXY --on-port %u --on-ip %s --tproxy-mark %#x/%#x\n",
                                 o->port, v6 ? "::" : "0.0.0.0", o->mark, o->mark);
        else
                se_strbuf_printf(out, " -j REDIRECT --to-ports %u\n", o->port);
}

/* The redirects of sp's VIPs (ClusterIP, externalIPs, LB ingress); an LB IP
 * with source ranges: one per allowed source, the rest left to the
 * firewall chain. */
static void ipt_vips(struct se_strbuf *out, const struct se_proxy_svcport *sp, bool v6,
                     const struct se_uproxy_rules_opts *o)
{
        if (sp->cluster_ip)
                ipt_rule(out, sp, NULL, sp->cluster_ip, v6, o);
        for (uint32_t k = 0; k < sp->n_external_ips; k++)
                ipt_rule(out, sp, NULL, sp->external_ips[k], v6, o);
        bool fw = firewalled(sp);
        bool node = fw && from_node(sp, v6 ? SE_IPV6 : SE_IPV4, o);
        for (uint32_t k = 0; k < sp->n_lb_vips; k++) {
                const char *ip = sp->lb_vips[k];
                if (!fw)
                        ipt_rule(out, sp, NULL, ip, v6, o);
                for (uint32_t i = 0; fw && i < sp->n_source_ranges; i++)
                        ipt_rule(out, sp, sp->source_ranges[i], ip, v6, o);
                for (uint32_t i = 0; node && i < sp->n_lb_vips; i++)
                        ipt_rule(out, sp, sp->lb_vips[i], ip, v6, o);
        }
}

/* What the redirects let through no more: new connections to a firewalled
 * LB IP that were not redirected (TCP: the destination is still the VIP;
 * UDP: TPROXY leaves it, so its mark tells). */
static void ipt_firewall(struct se_strbuf *out, const struct se_proxy_table *t, bool v6,
                         const struct se_uproxy_rules_opts *o)
{
        se_strbuf_puts(out, "*filter\n:" CHAIN_FW " - [0:0]\n");
        for (uint32_t i = 0; i < t->n_ports; i++) {
                const struct se_proxy_svcport *sp = &t->ports[i];
                if (!proxied(sp, o) || !firewalled(sp))
                        continue;
                for (uint32_t k = 0; k < sp->n_lb_vips; k++) {
                        se_strbuf_printf(out,
                                         "-A " CHAIN_FW " -m comment --comment \"%s traffic not "
                                         "accepted by its loadBalancerSourceRanges\" -d %s/%d -p "
                                         "%s -m %s --dport %d",
                                         sp->spn, sp->lb_vips[k], v6 ? 128 : 32, sp->proto,
                                         sp->proto, sp->port);
                        if (sp->protocol == SE_PROTO_UDP)
                                se_strbuf_printf(out, " -m mark ! --mark %#x/%#x", o->mark,
                                                 o->mark);
                        se_strbuf_puts(out, " -j DROP\n");
                }
        }
        se_strbuf_puts(out, "COMMIT\n");
}

int se_uproxy_rules_iptables(const struct se_proxy_table *t, const struct se_uproxy_rules_opts *o,
                             struct se_strbuf *out)
{
        bool v6 = t->family == SE_IPV6;
        struct se_strbuf udp;
        se_strbuf_init(&udp, 0);
        se_strbuf_puts(out, "*nat\n:" CHAIN " - [0:0]\n:" CHAIN_NP " - [0:0]\n");
        for (int np = 0; np < 2; np++)
                for (uint32_t i = 0; i < t->n_ports; i++) {
                        const struct se_proxy_svcport *sp = &t->ports[i];
                        if (!proxied(sp, o))
                                continue;
                        struct se_strbuf *b = sp->protocol == SE_PROTO_UDP ? &udp : out;
                        if (np == 0)
                                ipt_vips(b, sp, v6, o);
                        else if (sp->node_port > 0)
                                ipt_rule(b, sp, NULL, NULL, v6, o);
                }
        se_strbuf_puts(out, "-A " CHAIN " -m addrtype --dst-type LOCAL -j " CHAIN_NP "\n");
        se_strbuf_puts(out, "COMMIT\n*mangle\n:" CHAIN_TP " - [0:0]\n");
        se_strbuf_append(out, udp.buf, udp.len);
        se_strbuf_puts(out, "COMMIT\n");
        if (se_uproxy_any_firewall(t, o))
                ipt_firewall(out, t, v6, o);
        int r = se_strbuf_failed(&udp) ? -ENOMEM : 0;
        se_strbuf_release(&udp);
        return r < 0 || se_strbuf_failed(out) ? -ENOMEM : 0;
}

static void nft_rule(struct se_strbuf *out, const struct se_proxy_svcport *sp, const char *ip,
                     bool v6, const struct se_uproxy_rules_opts *o)
{
        se_strbuf_puts(out, "\t\t");
        if (ip)
                se_strbuf_printf(out, "%s daddr %s ", v6 ? "ip6" : "ip", ip);
        else
                se_strbuf_puts(out, "fib daddr type local ");
        se_strbuf_printf(out, "%s dport %d ", sp->proto, ip ? sp->port : sp->node_port);
        if (sp->protocol == SE_PROTO_UDP)
                se_strbuf_printf(out, "tproxy to :%u meta mark set %#x accept", o->port, o->mark);
        else
                se_strbuf_printf(out, "redirect to :%u", o->port);
        se_strbuf_printf(out, " comment \"%s%s\"\n", sp->spn, ip ? "" : " nodePort");
}

/* kube-proxy's nft firewall, in our table: before any redirect (pre-DNAT
 * priority), new connections to a firewalled LB IP from a source outside
 * its set are dropped. One set per port (auto-merge: ranges may overlap). */
static void nft_firewall(struct se_strbuf *out, const struct se_proxy_table *t, bool v6,
                         const struct se_uproxy_rules_opts *o)
{
        const char *fam = v6 ? "ip6" : "ip";
        unsigned n = 0;
        for (uint32_t i = 0; i < t->n_ports; i++) {
                const struct se_proxy_svcport *sp = &t->ports[i];
                if (!proxied(sp, o) || !firewalled(sp))
                        continue;
                se_strbuf_printf(out,
                                 "\tset firewall-%u {\n\t\ttype %s\n\t\tflags interval\n"
                                 "\t\tauto-merge\n\t\tcomment \"%s\"\n\t\telements = { ",
                                 n++, v6 ? "ipv6_addr" : "ipv4_addr", sp->spn);
                for (uint32_t k = 0; k < sp->n_source_ranges; k++)
                        se_strbuf_printf(out, "%s%s", k ? ", " : "", sp->source_ranges[k]);
                bool node = from_node(sp, v6 ? SE_IPV6 : SE_IPV4, o);
                for (uint32_t k = 0; node && k < sp->n_lb_vips; k++)
                        se_strbuf_printf(out, ", %s", sp->lb_vips[k]);
                se_strbuf_puts(out, " }\n\t}\n");
        }
        se_strbuf_puts(out, "\tchain filter-prerouting-pre-dnat {\n\t\ttype filter hook prerouting "
                            "priority -110; policy accept;\n\t\tct state new jump firewall-check\n"
                            "\t}\n");
        se_strbuf_puts(out, "\tchain filter-output-pre-dnat {\n\t\ttype filter hook output "
                            "priority -110; policy accept;\n\t\tct state new jump firewall-check\n"
                            "\t}\n");
        se_strbuf_puts(out, "\tchain firewall-check {\n");
        n = 0;
        for (uint32_t i = 0; i < t->n_ports; i++) {
                const struct se_proxy_svcport *sp = &t->ports[i];
                if (!proxied(sp, o) || !firewalled(sp))
                        continue;
                for (uint32_t k = 0; k < sp->n_lb_vips; k++)
                        se_strbuf_printf(out,
                                         "\t\t%s daddr %s %s dport %d %s saddr != @firewall-%u "
                                         "drop comment \"%s\"\n",
                                         fam, sp->lb_vips[k], sp->proto, sp->port, fam, n, sp->spn);
                n++;
        }
        se_strbuf_puts(out, "\t}\n");
}

int se_uproxy_rules_nft(const struct se_proxy_table *t, const struct se_uproxy_rules_opts *o,
                        struct se_strbuf *out)
{
        bool v6 = t->family == SE_IPV6;
        const char *fam = v6 ? "ip6" : "ip";
        /* add + delete + define: replaces the table whole in one transaction */
        se_strbuf_printf(out, "add table %s " NFT_TABLE "\ndelete table %s " NFT_TABLE "\n", fam,
                         fam);
        se_strbuf_printf(out, "table %s " NFT_TABLE " {\n", fam);
        if (se_uproxy_any_firewall(t, o))
                nft_firewall(out, t, v6, o);
        se_strbuf_puts(out, "\tchain prerouting {\n\t\ttype nat hook prerouting priority -100; "
                            "policy accept;\n\t\tjump services\n\t}\n");
        se_strbuf_puts(out, "\tchain output {\n\t\ttype nat hook output priority -100; "
                            "policy accept;\n\t\tjump services\n\t}\n");
        for (int chain = 0; chain < 2; chain++) {
                bool udp = chain == 1;
                if (udp)
                        se_strbuf_puts(out, "\tchain divert {\n\t\ttype filter hook prerouting "
                                            "priority mangle; policy accept;\n");
                else
                        se_strbuf_puts(out, "\tchain services {\n");
                for (int np = 0; np < 2; np++)
                        for (uint32_t i = 0; i < t->n_ports; i++) {
                                const struct se_proxy_svcport *sp = &t->ports[i];
                                if (!proxied(sp, o) || (sp->protocol == SE_PROTO_UDP) != udp)
                                        continue;
                                if (np == 0) {
                                        if (sp->cluster_ip)
                                                nft_rule(out, sp, sp->cluster_ip, v6, o);
                                        for (uint32_t k = 0; k < sp->n_external_ips; k++)
                                                nft_rule(out, sp, sp->external_ips[k], v6, o);
                                        for (uint32_t k = 0; k < sp->n_lb_vips; k++)
                                                nft_rule(out, sp, sp->lb_vips[k], v6, o);
                                } else if (sp->node_port > 0) {
                                        nft_rule(out, sp, NULL, v6, o);
                                }
                        }
                se_strbuf_puts(out, "\t}\n");
        }
        se_strbuf_puts(out, "}\n");
        return se_strbuf_failed(out) ? -ENOMEM : 0;
}

unsigned se_uproxy_jumps(const char *const **rules)
{
        static const char *const pre[] = { "nat",     "PREROUTING", "-m",
                                           "comment", "--comment",  "svcenv userspace proxy",
                                           "-j",      CHAIN,        NULL };
        static const char *const outp[] = { "nat",     "OUTPUT",    "-m",
                                            "comment", "--comment", "svcenv userspace proxy",
                                            "-j",      CHAIN,       NULL };
        static const char *const tp[] = { "mangle",  "PREROUTING", "-m",
                                          "comment", "--comment",  "svcenv userspace proxy",
                                          "-j",      CHAIN_TP,     NULL };
        rules[0] = pre;
        rules[1] = outp;
        rules[2] = tp;
        return 3;
}

unsigned se_uproxy_firewall_jumps(const char *const **rules)
{
#define FW_JUMP(hook)                                                                  \
 {                                                                                     \
  "filter", hook, "-m", "conntrack", "--ctstate", "NEW", "-m", "comment", "--comment", \
          "svcenv userspace proxy firewall", "-j", CHAIN_FW, NULL                      \
 }
        static const char *const in[] = FW_JUMP("INPUT");
        static const char *const fwd[] = FW_JUMP("FORWARD");
        static const char *const outp[] = FW_JUMP("OUTPUT");
#undef FW_JUMP
        rules[0] = in;
        rules[1] = fwd;
        rules[2] = outp;
        return 3;
}

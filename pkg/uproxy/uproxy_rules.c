/* The rules that send proxied service ports to the proxy's one port: TCP by
 * REDIRECT (nat; the proxy reads SO_ORIGINAL_DST), UDP by TPROXY (mangle;
 * conntrack's getsockopt has no UDP, so the proxy reads IP_ORIGDSTADDR and
 * answers from a transparent socket bound to the VIP). NodePorts come last,
 * matched on any local address, as kube-proxy's. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <svcenv/macro.h>
#include <svcenv/uproxy.h>

#define CHAIN     SE_UPROXY_NAT_CHAIN
#define CHAIN_NP  SE_UPROXY_NODEPORT_CHAIN
#define CHAIN_TP  SE_UPROXY_TPROXY_CHAIN
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

/* Calls f for every VIP (ClusterIP, externalIPs, LB ingress) of sp. */
#define FOREACH_VIP(sp, ip, body)                          \
 do {                                                      \
  const char *ip = (sp)->cluster_ip;                       \
  if (ip)                                                  \
   body;                                                   \
  for (uint32_t k_ = 0; k_ < (sp)->n_external_ips; k_++) { \
   ip = (sp)->external_ips[k_];                            \
   body;                                                   \
  }                                                        \
  for (uint32_t k_ = 0; k_ < (sp)->n_lb_vips; k_++) {      \
   ip = (sp)->lb_vips[k_];                                 \
   body;                                                   \
  }                                                        \
 } while (0)

static void ipt_rule(struct se_strbuf *out, const struct se_proxy_svcport *sp, const char *ip,
                     bool v6, const struct se_uproxy_rules_opts *o)
{
        bool udp = sp->protocol == SE_PROTO_UDP;
        const char *chain = udp ? CHAIN_TP : ip ? CHAIN : CHAIN_NP;
        se_strbuf_printf(out, "-A %s -m comment --comment \"%s%s\"", chain, sp->spn,
                         ip ? "" : " nodePort");
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
                                FOREACH_VIP(sp, ip, ipt_rule(b, sp, ip, v6, o));
                        else if (sp->node_port > 0)
                                ipt_rule(b, sp, NULL, v6, o);
                }
        se_strbuf_puts(out, "-A " CHAIN " -m addrtype --dst-type LOCAL -j " CHAIN_NP "\n");
        se_strbuf_puts(out, "COMMIT\n*mangle\n:" CHAIN_TP " - [0:0]\n");
        se_strbuf_append(out, udp.buf, udp.len);
        se_strbuf_puts(out, "COMMIT\n");
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

int se_uproxy_rules_nft(const struct se_proxy_table *t, const struct se_uproxy_rules_opts *o,
                        struct se_strbuf *out)
{
        bool v6 = t->family == SE_IPV6;
        const char *fam = v6 ? "ip6" : "ip";
        /* add + delete + define: replaces the table whole in one transaction */
        se_strbuf_printf(out, "add table %s " NFT_TABLE "\ndelete table %s " NFT_TABLE "\n", fam,
                         fam);
        se_strbuf_printf(out, "table %s " NFT_TABLE " {\n", fam);
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
                                if (np == 0)
                                        FOREACH_VIP(sp, ip, nft_rule(out, sp, ip, v6, o));
                                else if (sp->node_port > 0)
                                        nft_rule(out, sp, NULL, v6, o);
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

/* The nftables backend: one table of our own per family ("svcenv" in `ip` /
 * `ip6`), written by one nft transaction per sync. Dispatch is by verdict
 * maps on (IP, protocol, port); each service/local chain picks its endpoint
 * by `numgen random mod N vmap @<its own map>` (a named map with the
 * chain's name); ClientIP affinity uses timed dynamic sets; loadBalancer
 * source ranges are a named interval set per firewall chain. Service
 * semantics (policies, masquerading, REJECT/DROP without endpoints, source
 * ranges) are those of the iptables backend, in the shape of kube-proxy's
 * nftables proxier.
 *
 * Why named maps and sets where kube-proxy writes anonymous ones: the
 * kernel walks the whole transaction's commit list for every rule that
 * binds an anonymous set (__nft_set_trans_bind), which makes loading
 * 10,000 services quadratic (169 s instead of 11 s on our test machine). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <svcenv/hash.h>
#include <svcenv/proxy.h>
#include <svcenv/strv.h>

#include "proxy_internal.h"

#define TABLE         "svcenv"
#define COMMENT       "rules for svcenv (kube-proxy v1.36 semantics)"
#define GLOBAL_MAPS   "\001global maps" /* tracker keys of what no service owns */
#define GLOBAL_CHAINS "\001global chains"
#define NAME_BASE_MAX 240 /* 256 - the longest prefix (16), as kube-proxy */
/* the per-chain endpoint maps: the key is what `numgen random mod N` gives */
#define DISPATCH_TYPE "typeof numgen random mod 1 : verdict"

struct nft {
        const struct se_proxy_options *opt;
        bool v6;
        const char *ip; /* "ip" or "ip6" */
        const char *addr_type;
        unsigned mark;
        const char *detect;
        char detect_buf[80];
        /* map and set elements, filled per service, written at the end */
        struct se_strbuf service_ips, service_nodeports, no_ep_services, no_ep_nodeports,
                firewall_ips, chains, sets;
        struct se_strbuf flushes; /* partial syncs: changed services' maps to empty */
        struct se_proxy_tracker *tracker; /* NULL: always the whole table */
};

/* "HASH8-base": kube-proxy's nftables chain-name suffix */
static int nft_name(const char *base, char *out, size_t size)
{
        uint8_t d[SE_SHA256_LEN];
        char b32[64];
        int r = se_sha256(base, strlen(base), d);
        if (r < 0)
                return r;
        se_base32_encode(d, sizeof(d), b32, sizeof(b32));
        snprintf(out, size, "%.8s-%s", b32, base);
        /* kube-proxy's hashAndTruncate: nft names have at most 255
         * characters and our prefixes 16 ("endpoint-", "affinity-", ...) */
        if (size > NAME_BASE_MAX && strlen(out) > NAME_BASE_MAX)
                memcpy(out + NAME_BASE_MAX - 3, "...", 4);
        return 0;
}

static void ep_base(const struct se_proxy_svcport *sp, const struct se_proxy_endpoint *ep,
                    char *out, size_t size)
{
        char ip[64];
        snprintf(ip, sizeof(ip), "%s", ep->ip);
        for (char *p = ip; *p; p++)
                if (*p == ':')
                        *p = '.';
        snprintf(out, size, "%s/%s/%s/%s__%s/%d", sp->ns, sp->name, sp->proto, sp->port_name, ip,
                 ep->port);
}

static void elem(struct se_strbuf *sb, const char *fmt, ...) SE_PRINTF(2, 3);
static void elem(struct se_strbuf *sb, const char *fmt, ...)
{
        va_list ap;
        se_strbuf_puts(sb, sb->len ? ",\n\t\t\t" : "\t\t\t");
        va_start(ap, fmt);
        se_strbuf_vprintf(sb, fmt, ap);
        va_end(ap);
}

static void addr_text(const char *ip, bool v6, char *out, size_t size)
{
        snprintf(out, size, v6 ? "[%s]" : "%s", ip);
}

/* `flush map|set` for each map and set that text declares and the kernel
 * has (in known, or else in had): their elements are declared again whole.
 * Affinity sets are left alone: their entries are the clients' state. */
static void flush_known(struct nft *w, const char *text, size_t len, const struct se_hashmap *known,
                        const struct se_strv *had, struct se_strbuf *out)
{
        const char *p = text, *end = text + len;
        char key[320];
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
                /* "\tmap NAME {" / "\tset NAME {": the kind is 3 letters */
                bool decl = n > 7 &&
                            (strncmp(p, "\tmap ", 5) == 0 || strncmp(p, "\tset ", 5) == 0) &&
                            strncmp(p + n - 2, " {", 2) == 0 && strncmp(p + 5, "affinity-", 9) != 0;
                if (decl && n - 3 < sizeof(key)) {
                        memcpy(key, p + 1, n - 3);
                        key[n - 3] = 0;
                        if (known ? se_hashmap_get(known, key) != NULL :
                                    had && se_strv_contains(had, key))
                                se_strbuf_printf(out, "flush %.3s %s " TABLE " %s\n", key, w->ip,
                                                 key + 4);
                }
                p += n + 1;
        }
}

/* chain `service-…` / `local-…`: affinity checks, then the random pick */
static int endpoint_dispatch(struct nft *w, const struct se_proxy_svcport *sp,
                             const char *chain_name, const struct se_proxy_endpoint *const *eps,
                             uint32_t n, bool internal_masq)
{
        struct se_strbuf *c = &w->chains;
        se_strbuf_printf(c, "\tchain %s {\n", chain_name);
        if (internal_masq) {
                if (w->opt->masquerade_all)
                        se_strbuf_printf(c,
                                         "\t\t%s daddr %s %s dport %d jump mark-for-masquerade\n",
                                         w->ip, sp->cluster_ip, sp->proto, sp->port);
                else if (w->detect)
                        se_strbuf_printf(c,
                                         "\t\t%s daddr %s %s dport %d %s saddr != %s jump "
                                         "mark-for-masquerade\n",
                                         w->ip, sp->cluster_ip, sp->proto, sp->port, w->ip,
                                         w->detect);
        }
        char base[300], name[320];
        if (sp->affinity)
                for (uint32_t i = 0; i < n; i++) {
                        ep_base(sp, eps[i], base, sizeof(base));
                        int r = nft_name(base, name, sizeof(name));
                        if (r < 0)
                                return r;
                        se_strbuf_printf(c, "\t\t%s saddr @affinity-%s goto endpoint-%s\n", w->ip,
                                         name, name);
                }
        se_strbuf_printf(c, "\t\tnumgen random mod %u vmap @%s\n\t}\n", n, chain_name);
        se_strbuf_printf(&w->sets, "\tmap %s {\n\t\t" DISPATCH_TYPE "\n\t\telements = { ",
                         chain_name);
        for (uint32_t i = 0; i < n; i++) {
                ep_base(sp, eps[i], base, sizeof(base));
                int r = nft_name(base, name, sizeof(name));
                if (r < 0)
                        return r;
                se_strbuf_printf(&w->sets, "%s%u : goto endpoint-%s", i ? ", " : "", i, name);
        }
        se_strbuf_puts(&w->sets, " }\n\t}\n");
        return 0;
}

static int write_service(struct nft *w, const struct se_proxy_svcport *sp)
{
        struct proxy_categories cat;
        char base[300], h[320], svc[340], loc[340], ext[340], fw[340];
        snprintf(base, sizeof(base), "%s/%s/%s/%s", sp->ns, sp->name, sp->proto, sp->port_name);
        int r = nft_name(base, h, sizeof(h));
        if (r < 0 || (r = proxy_categorize(sp, w->opt, &cat)) < 0)
                return r;
        size_t chains_at = w->chains.len, sets_at = w->sets.len;
        snprintf(svc, sizeof(svc), "service-%s", h);
        snprintf(loc, sizeof(loc), "local-%s", h);
        snprintf(ext, sizeof(ext), "external-%s", h);
        snprintf(fw, sizeof(fw), "firewall-%s", h);
        const char *proto = sp->proto;
        bool has_any = cat.has_any;
        bool has_internal = has_any && !(sp->internal_local && cat.n_local == 0);
        bool has_external = has_any && !(sp->external_local && cat.n_local == 0);
        const char *internal_chain = sp->internal_local ? loc : svc;
        const char *external_policy = sp->external_local ? loc : svc;
        bool uses_ext = has_any && proxy_externally_accessible(sp);
        bool uses_fw = has_any && sp->n_lb_vips > 0 && sp->n_source_ranges > 0;
        const char *no_int = !has_any ? "goto reject-chain" : "drop";
        const char *no_ext = no_int;

        if (has_internal)
                elem(&w->service_ips, "%s . %s . %d : goto %s", sp->cluster_ip, proto, sp->port,
                     internal_chain);
        else
                elem(&w->no_ep_services, "%s . %s . %d : %s", sp->cluster_ip, proto, sp->port,
                     no_int);
        for (uint32_t i = 0; i < sp->n_external_ips; i++) {
                if (has_any)
                        elem(&w->service_ips, "%s . %s . %d : goto %s", sp->external_ips[i], proto,
                             sp->port, ext);
                if (!has_external)
                        elem(&w->no_ep_services, "%s . %s . %d : %s", sp->external_ips[i], proto,
                             sp->port, no_ext);
        }
        for (uint32_t i = 0; i < sp->n_lb_vips; i++) {
                if (has_any)
                        elem(&w->service_ips, "%s . %s . %d : goto %s", sp->lb_vips[i], proto,
                             sp->port, ext);
                if (!has_external)
                        elem(&w->no_ep_services, "%s . %s . %d : %s", sp->lb_vips[i], proto,
                             sp->port, no_ext);
                if (uses_fw)
                        elem(&w->firewall_ips, "%s . %s . %d : goto %s", sp->lb_vips[i], proto,
                             sp->port, fw);
        }
        if (sp->node_port) {
                if (has_any)
                        elem(&w->service_nodeports, "%s . %d : goto %s", proto, sp->node_port, ext);
                if (!has_external)
                        elem(&w->no_ep_nodeports, "%s . %d : %s", proto, sp->node_port, no_ext);
        }

        struct se_strbuf *c = &w->chains;
        if (uses_ext) {
                se_strbuf_printf(c, "\tchain %s {\n", ext);
                if (!sp->external_local) {
                        se_strbuf_puts(c, "\t\tjump mark-for-masquerade\n");
                } else {
                        if (w->detect)
                                se_strbuf_printf(c, "\t\t%s saddr %s goto %s\n", w->ip, w->detect,
                                                 svc);
                        se_strbuf_puts(c, "\t\tfib saddr type local jump mark-for-masquerade\n");
                        se_strbuf_printf(c, "\t\tfib saddr type local goto %s\n", svc);
                }
                if (has_external)
                        se_strbuf_printf(c, "\t\tgoto %s\n", external_policy);
                se_strbuf_puts(c, "\t}\n");
        }
        if (uses_fw) {
                struct se_strbuf *s = &w->sets;
                se_strbuf_printf(c, "\tchain %s {\n\t\t%s saddr != @%s drop\n\t}\n", fw, w->ip, fw);
                /* auto-merge: ranges may overlap (10.0.0.0/8, 10.1.0.0/16) */
                se_strbuf_printf(s,
                                 "\tset %s {\n\t\ttype %s\n\t\tflags interval\n\t\tauto-merge\n"
                                 "\t\telements = { ",
                                 fw, w->addr_type);
                bool from_node = false;
                enum se_ip_family fam = w->v6 ? SE_IPV6 : SE_IPV4;
                for (uint32_t i = 0; i < sp->n_source_ranges; i++) {
                        se_strbuf_printf(s, "%s%s", i ? ", " : "", sp->source_ranges[i]);
                        for (unsigned k = 0; k < w->opt->n_node_ips; k++)
                                if (w->opt->node_ips[k].family == fam) {
                                        from_node |= se_cidr_contains(&sp->source_cidrs[i],
                                                                      &w->opt->node_ips[k]);
                                        break; /* the primary node IP */
                                }
                }
                /* VIPs looped back locally arrive with the VIP as source */
                for (uint32_t i = 0; from_node && i < sp->n_lb_vips; i++)
                        se_strbuf_printf(s, ", %s", sp->lb_vips[i]);
                se_strbuf_puts(s, " }\n\t}\n");
        }
        bool uses_cluster = cat.n_cluster > 0 && proxy_uses_cluster(sp);
        bool uses_local = cat.n_local > 0 && proxy_uses_local(sp);
        if (uses_cluster && (r = endpoint_dispatch(w, sp, svc, cat.cluster, cat.n_cluster,
                                                   has_internal && !sp->internal_local)) < 0)
                goto out;
        if (uses_local && (r = endpoint_dispatch(w, sp, loc, cat.local, cat.n_local,
                                                 has_internal && sp->internal_local)) < 0)
                goto out;
        for (uint32_t i = 0; i < cat.n_reachable; i++) {
                const struct se_proxy_endpoint *ep = cat.reachable[i];
                char eb[300], en[320], a[80];
                ep_base(sp, ep, eb, sizeof(eb));
                if ((r = nft_name(eb, en, sizeof(en))) < 0)
                        goto out;
                addr_text(ep->ip, w->v6, a, sizeof(a));
                if (sp->affinity)
                        se_strbuf_printf(
                                &w->sets,
                                "\tset affinity-%s {\n\t\ttype %s\n\t\tflags dynamic,timeout\n"
                                "\t\ttimeout %ds\n\t}\n",
                                en, w->addr_type, sp->affinity_timeout);
                se_strbuf_printf(c, "\tchain endpoint-%s {\n", en);
                se_strbuf_printf(c, "\t\t%s saddr %s jump mark-for-masquerade\n", w->ip, ep->ip);
                if (sp->affinity)
                        se_strbuf_printf(c, "\t\tupdate @affinity-%s { %s saddr }\n", en, w->ip);
                se_strbuf_printf(c, "\t\tmeta l4proto %s dnat to %s:%d\n\t}\n", proto, a, ep->port);
        }
        r = w->tracker ? proxy_tracker_segment(w->tracker, sp, &w->sets, sets_at, &w->chains,
                                               chains_at) :
                         0;
        /* a partial sync rewriting this service: its maps the last sync
         * made are emptied first (a full sync does all of them) */
        if (r == 0 && w->tracker && !proxy_tracker_full(w->tracker) && w->sets.len > sets_at) {
                struct se_strv had = SE_STRV_INIT;
                r = proxy_tracker_prev(w->tracker, sp, &had);
                if (r == 0)
                        flush_known(w, w->sets.buf + sets_at, w->sets.len - sets_at, NULL, &had,
                                    &w->flushes);
                se_strv_release(&had);
        }
out:
        proxy_categories_release(&cat);
        return r;
}

static void vmap(struct se_strbuf *out, const char *name, const char *type,
                 const struct se_strbuf *elems)
{
        se_strbuf_printf(out, "\tmap %s {\n\t\ttype %s : verdict\n", name, type);
        if (elems->len)
                se_strbuf_printf(out, "\t\telements = {\n%s\n\t\t}\n", elems->buf);
        se_strbuf_puts(out, "\t}\n");
}

static void nodeport_match(struct nft *w, struct se_strbuf *out)
{
        const struct se_proxy_options *o = w->opt;
        if (o->n_nodeport_cidrs == 0 && !o->nodeport_primary) {
                se_strbuf_printf(out, "fib daddr type local %s daddr != %s", w->ip,
                                 w->v6 ? "::1" : "127.0.0.0/8");
                return;
        }
        se_strbuf_printf(out, "%s daddr @nodeport-ips", w->ip);
}

static void nodeport_ips(struct nft *w, struct se_strbuf *out)
{
        const struct se_proxy_options *o = w->opt;
        enum se_ip_family fam = w->v6 ? SE_IPV6 : SE_IPV4;
        bool first = true, primary_done = false;
        if (o->n_nodeport_cidrs == 0 && !o->nodeport_primary)
                return;
        se_strbuf_printf(out, "\tset nodeport-ips {\n\t\ttype %s\n", w->addr_type);
        for (unsigned i = 0; i < o->n_node_ips; i++) {
                const struct se_ip *ip = &o->node_ips[i];
                bool take = false;
                if (ip->family != fam)
                        continue;
                for (unsigned k = 0; k < o->n_nodeport_cidrs && !take; k++)
                        take = se_cidr_contains(&o->nodeport_cidrs[k], ip);
                if (o->nodeport_primary && !primary_done)
                        take = true;
                primary_done = true;
                if (!take)
                        continue;
                char text[64];
                se_ip_format(ip, text, sizeof(text));
                se_strbuf_printf(out, "%s%s", first ? "\t\telements = { " : ", ", text);
                first = false;
        }
        se_strbuf_puts(out, first ? "\t}\n" : " }\n\t}\n");
}

/* What the last applied sync defined and this one does not: every chain
 * is emptied first (they may jump to each other) and every endpoint map
 * (its elements name endpoint chains), then the chains deleted, then the
 * maps and sets. */
static int delete_gone(struct nft *w, struct se_strbuf *out)
{
        struct se_strv gone = SE_STRV_INIT;
        int r = proxy_tracker_gone(w->tracker, &gone);
        for (int pass = 0; pass < 3; pass++)
                se_strv_foreach(g, &gone) {
                        bool is_chain = strncmp(*g, "chain ", 6) == 0;
                        bool is_map = strncmp(*g, "map ", 4) == 0;
                        const char *name = strchr(*g, ' ') + 1;
                        int kl = (int)(name - 1 - *g);
                        if (pass == 0 && (is_chain || is_map))
                                se_strbuf_printf(out, "flush %.*s %s " TABLE " %s\n", kl, *g, w->ip,
                                                 name);
                        else if ((pass == 1 && is_chain) || (pass == 2 && !is_chain))
                                se_strbuf_printf(out, "delete %.*s %s " TABLE " %s\n", kl, *g,
                                                 w->ip, name);
                }
        se_strv_release(&gone);
        return r;
}

/* A partial sync: the table stays; changed services' chains and endpoint
 * maps are flushed and refilled, the global verdict maps rewritten or
 * edited, gone chains, maps and sets deleted. Affinity sets of unchanged
 * endpoints keep their entries. */
static int partial(struct nft *w, const char *key, struct se_strbuf *out)
{
        const char *p = w->chains.buf, *end = w->chains.buf + w->chains.len;
        static const char *const maps[] = { "service-ips", "service-nodeports",
                                            "no-endpoint-services", "no-endpoint-nodeports",
                                            "firewall-ips" };
        while (p < end) { /* "\tchain NAME {" lines of what is rewritten */
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
                if (n > 9 && strncmp(p, "\tchain ", 7) == 0) {
                        int len = (int)(n - 9);
                        se_strbuf_printf(out, "add chain %s " TABLE " %.*s\n", w->ip, len, p + 7);
                        se_strbuf_printf(out, "flush chain %s " TABLE " %.*s\n", w->ip, len, p + 7);
                }
                p += n + 1;
        }
        se_strbuf_add(out, w->flushes.buf, w->flushes.len);
        /* with minimal syncs on, maps known from the last sync get single
         * element deletes/adds (after the chains they name exist, before
         * gone chains are deleted); the others are flushed and rewritten */
        const struct se_strbuf *elems[] = { &w->service_ips, &w->service_nodeports,
                                            &w->no_ep_services, &w->no_ep_nodeports,
                                            &w->firewall_ips };
        const char *types[] = { key, "inet_proto . inet_service", key, "inet_proto . inet_service",
                                key };
        struct proxy_top *top = proxy_tracker_top(w->tracker);
        struct se_strbuf del, add;
        bool edited[SE_ARRAY_SIZE(maps)] = { false };
        int r = 0;
        se_strbuf_init(&del, 0);
        se_strbuf_init(&add, 0);
        for (size_t i = 0; top && i < SE_ARRAY_SIZE(maps) && r >= 0; i++) {
                r = proxy_top_elems(top, true, (int)i, w->ip, TABLE, maps[i], elems[i]->buf,
                                    elems[i]->len, &del, &add);
                edited[i] = r == 1;
        }
        for (size_t i = 0; i < SE_ARRAY_SIZE(maps); i++)
                if (!edited[i])
                        se_strbuf_printf(out, "flush map %s " TABLE " %s\n", w->ip, maps[i]);
        bool block = w->sets.len || w->chains.len;
        for (size_t i = 0; i < SE_ARRAY_SIZE(maps); i++)
                block |= !edited[i];
        /* an empty block still costs nft a read of the whole ruleset */
        if (block)
                se_strbuf_printf(out, "table %s " TABLE " {\n", w->ip);
        for (size_t i = 0; i < SE_ARRAY_SIZE(maps); i++)
                if (!edited[i])
                        vmap(out, maps[i], types[i], elems[i]);
        se_strbuf_add(out, w->sets.buf, w->sets.len);
        se_strbuf_add(out, w->chains.buf, w->chains.len);
        if (block)
                se_strbuf_puts(out, "}\n");
        se_strbuf_add(out, del.buf, del.len);
        se_strbuf_add(out, add.buf, add.len);
        r = r < 0 ? r : se_strbuf_failed(&del) ?: se_strbuf_failed(&add);
        se_strbuf_release(&del);
        se_strbuf_release(&add);
        return r < 0 ? r : delete_gone(w, out);
}

/* The table's own maps and sets (maps) and its base and top-level chains
 * (chains): the same on every full sync. */
static void globals(struct nft *w, const char *key, struct se_strbuf *maps,
                    struct se_strbuf *chains)
{
        const struct se_proxy_options *opt = w->opt;
        struct se_strbuf *out = chains;
        vmap(maps, "service-ips", key, &w->service_ips);
        vmap(maps, "service-nodeports", "inet_proto . inet_service", &w->service_nodeports);
        vmap(maps, "no-endpoint-services", key, &w->no_ep_services);
        vmap(maps, "no-endpoint-nodeports", "inet_proto . inet_service", &w->no_ep_nodeports);
        vmap(maps, "firewall-ips", key, &w->firewall_ips);
        nodeport_ips(w, maps);
        /* base chains: the firewall before DNAT, the endpoint checks after it */
        se_strbuf_puts(
                out,
                "\tchain filter-prerouting {\n\t\ttype filter hook prerouting priority dstnat - 10; policy accept;\n"
                "\t\tct state new jump firewall-check\n\t}\n");
        se_strbuf_puts(
                out,
                "\tchain filter-input {\n\t\ttype filter hook input priority -10; policy accept;\n"
                "\t\tct state new jump nodeport-endpoints-check\n"
                "\t\tct state new jump service-endpoints-check\n\t}\n");
        se_strbuf_puts(
                out,
                "\tchain filter-forward {\n\t\ttype filter hook forward priority -10; policy accept;\n"
                "\t\tct state new jump service-endpoints-check\n\t}\n");
        se_strbuf_puts(
                out,
                "\tchain filter-output {\n\t\ttype filter hook output priority -10; policy accept;\n"
                "\t\tct state new jump service-endpoints-check\n"
                "\t}\n");
        se_strbuf_puts(
                out,
                "\tchain filter-output-pre-dnat {\n\t\ttype filter hook output priority -110; policy accept;\n"
                "\t\tct state new jump firewall-check\n\t}\n");
        se_strbuf_puts(
                out,
                "\tchain nat-prerouting {\n\t\ttype nat hook prerouting priority dstnat; policy accept;\n"
                "\t\tjump services\n\t}\n");
        se_strbuf_puts(
                out,
                "\tchain nat-output {\n\t\ttype nat hook output priority -100; policy accept;\n"
                "\t\tjump services\n\t}\n");
        se_strbuf_puts(
                out,
                "\tchain nat-postrouting {\n\t\ttype nat hook postrouting priority srcnat; policy accept;\n"
                "\t\tjump masquerading\n\t}\n");
        se_strbuf_printf(out,
                         "\tchain masquerading {\n\t\tmeta mark & 0x%x == 0 return\n"
                         "\t\tmeta mark set meta mark ^ 0x%x\n\t\tmasquerade%s\n\t}\n",
                         w->mark, w->mark, opt->random_fully ? " fully-random" : "");
        se_strbuf_printf(out,
                         "\tchain mark-for-masquerade {\n\t\tmeta mark set meta mark | 0x%x\n\t}\n",
                         w->mark);
        se_strbuf_printf(
                out,
                "\tchain services {\n\t\t%s daddr . meta l4proto . th dport vmap @service-ips\n\t\t",
                w->ip);
        nodeport_match(w, out);
        se_strbuf_puts(out, " meta l4proto . th dport vmap @service-nodeports\n\t}\n");
        se_strbuf_printf(
                out,
                "\tchain service-endpoints-check {\n\t\t%s daddr . meta l4proto . th dport vmap @no-endpoint-services\n\t}\n",
                w->ip);
        se_strbuf_puts(out, "\tchain nodeport-endpoints-check {\n\t\t");
        nodeport_match(w, out);
        se_strbuf_puts(out, " meta l4proto . th dport vmap @no-endpoint-nodeports\n\t}\n");
        se_strbuf_printf(
                out,
                "\tchain firewall-check {\n\t\t%s daddr . meta l4proto . th dport vmap @firewall-ips\n\t}\n",
                w->ip);
        se_strbuf_puts(out, "\tchain reject-chain {\n\t\treject\n\t}\n");
}

int se_proxy_nft_write(const struct se_proxy_table *t, const struct se_proxy_options *opt,
                       struct se_strbuf *out)
{
        return se_proxy_nft_sync(t, opt, NULL, out);
}

int se_proxy_nft_sync(const struct se_proxy_table *t, const struct se_proxy_options *opt,
                      struct se_proxy_tracker *tracker, struct se_strbuf *out)
{
        struct nft w = { .opt = opt, .v6 = t->family == SE_IPV6, .tracker = tracker };
        struct se_hashmap known = SE_HASHMAP_INIT;
        struct se_strbuf gmaps, gchains, known_names;
        if (tracker)
                proxy_tracker_begin(tracker);
        struct se_strbuf *bufs[] = { &w.service_ips,    &w.service_nodeports,
                                     &w.no_ep_services, &w.no_ep_nodeports,
                                     &w.firewall_ips,   &w.chains,
                                     &w.sets,           &gmaps,
                                     &gchains,          &w.flushes,
                                     &known_names };
        int r = 0;
        for (size_t i = 0; i < SE_ARRAY_SIZE(bufs); i++)
                se_strbuf_init(bufs[i], 0);
        w.ip = w.v6 ? "ip6" : "ip";
        w.addr_type = w.v6 ? "ipv6_addr" : "ipv4_addr";
        w.mark = 1u << (opt->masquerade_bit & 31);
        const struct se_cidr *cc = proxy_cluster_cidr(opt, t->family);
        if (cc) {
                proxy_cidr_text(cc, w.detect_buf, sizeof(w.detect_buf));
                w.detect = w.detect_buf;
        }
        for (uint32_t i = 0; i < t->n_ports; i++)
                if ((r = write_service(&w, &t->ports[i])) < 0)
                        goto done;
        char key[64];
        snprintf(key, sizeof(key), "%s . inet_proto . inet_service", w.addr_type);
        if (tracker && !proxy_tracker_full(tracker)) {
                r = proxy_tracker_keep(tracker, GLOBAL_MAPS)           ?:
                            proxy_tracker_keep(tracker, GLOBAL_CHAINS) ?:
                                                                         partial(&w, key, out);
                goto check;
        }
        struct proxy_top *top = tracker ? proxy_tracker_top(tracker) : NULL;
        for (int i = 0; top && i < 5 && r >= 0; i++) { /* remembered for the next partial */
                const struct se_strbuf *e = bufs[i];
                r = proxy_top_elems(top, false, i, w.ip, TABLE, "", e->buf, e->len, NULL, NULL);
        }
        if (r < 0)
                goto done;
        globals(&w, key, &gmaps, &gchains);
        if (tracker) {
                /* the table stays, so affinity sets keep their entries: its
                 * rules go, known maps and sets are emptied, then all is
                 * declared again and what went away deleted */
                if ((r = proxy_tracker_names(tracker, GLOBAL_MAPS, gmaps.buf, gmaps.len)) < 0 ||
                    (r = proxy_tracker_names(tracker, GLOBAL_CHAINS, gchains.buf, gchains.len)) < 0)
                        goto done;
                /* (a table's comment is set only when it is made) */
                se_strbuf_printf(out,
                                 "add table %s " TABLE " { comment \"%s\"; }\nflush table %s " TABLE
                                 "\n",
                                 w.ip, COMMENT, w.ip);
                if ((r = proxy_tracker_known(tracker, &known_names, &known)) < 0)
                        goto done;
                flush_known(&w, gmaps.buf, gmaps.len, &known, NULL, out);
                flush_known(&w, w.sets.buf, w.sets.len, &known, NULL, out);
        } else {
                se_strbuf_printf(out, "add table %s " TABLE "\ndelete table %s " TABLE "\n", w.ip,
                                 w.ip);
        }
        se_strbuf_printf(out, "table %s " TABLE " {\n\tcomment \"%s\"\n", w.ip, COMMENT);
        se_strbuf_add(out, gmaps.buf, gmaps.len);
        se_strbuf_add(out, w.sets.buf, w.sets.len);
        se_strbuf_add(out, gchains.buf, gchains.len);
        se_strbuf_add(out, w.chains.buf, w.chains.len);
        se_strbuf_puts(out, "}\n");
        if (tracker)
                r = delete_gone(&w, out);
check:
        for (size_t i = 0; i < SE_ARRAY_SIZE(bufs) && !r; i++)
                r = se_strbuf_failed(bufs[i]);
        if (!r)
                r = se_strbuf_failed(out);
done:
        for (size_t i = 0; i < SE_ARRAY_SIZE(bufs); i++)
                se_strbuf_release(bufs[i]);
        se_hashmap_release(&known);
        return r;
}

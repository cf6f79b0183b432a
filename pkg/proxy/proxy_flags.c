/* The options `svcenv rules` and svcenv-proxy share, and the Node lookup
 * both make: one parser, so the CLI prints what the daemon programs. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <svcenv/proxy_proxier.h>
#include <svcenv/strv.h>

void se_proxy_flags_init(struct se_proxy_flags *f)
{
        memset(f, 0, sizeof(*f));
        se_proxy_options_init(&f->opt);
        f->opt.random_fully = true; /* auto: iptables >= 1.6.2 everywhere now */
        f->nfacct = -1;
}

SE_PRINTF(2, 3) static int bad(struct se_diag *diag, const char *fmt, ...)
{
        char msg[sizeof(diag->text)];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap); /* args may point into diag */
        va_end(ap);
        se_diag_set(diag, NULL, 0, 0, "%s", msg);
        return -EINVAL;
}

static int node_ips(struct se_proxy_options *o, const char *list, struct se_diag *diag)
{
        struct se_strv parts = SE_STRV_INIT;
        int r = 0;
        if (se_strv_split(&parts, list, ',', true) < 0)
                return -ENOMEM;
        se_strv_foreach(s, &parts) {
                struct se_ip ip;
                if (se_parse_ip(*s, &ip) < 0) {
                        r = bad(diag, "%s: invalid IP \"%s\"", "--node-ip", *s);
                        break;
                }
                if (o->n_node_ips >= SE_PROXY_MAX_NODE_IPS) {
                        r = bad(diag, "--node-ip: at most %d addresses", SE_PROXY_MAX_NODE_IPS);
                        break;
                }
                o->node_ips[o->n_node_ips++] = ip;
        }
        se_strv_release(&parts);
        return r;
}

static int tristate(const char *arg, int *ret)
{
        bool b;
        if (strcmp(arg, "auto") == 0) {
                *ret = -1;
                return 0;
        }
        if (se_parse_bool(arg, &b) < 0)
                return -EINVAL;
        *ret = b;
        return 0;
}

int se_proxy_flag(struct se_proxy_flags *f, int id, const char *arg, struct se_diag *diag)
{
        struct se_proxy_options *o = &f->opt;
        int r, t;
        switch (id) {
        case SE_PROXY_FLAG_BACKEND:
                if (strcmp(arg, "iptables") != 0 && strcmp(arg, "nftables") != 0)
                        return bad(diag, "%s wants iptables or nftables, not \"%s\"", "--backend",
                                   arg);
                f->nft = strcmp(arg, "nftables") == 0;
                return 0;
        case SE_PROXY_FLAG_CLUSTER_CIDR:
                r = se_proxy_parse_cidr_list(arg, o->cluster_cidrs, 2, NULL, diag);
                if (r < 0)
                        return bad(diag, "%s: %s", "--cluster-cidr", diag->text);
                o->n_cluster_cidrs = (unsigned)r;
                return 0;
        case SE_PROXY_FLAG_NODE_IP:
                return node_ips(o, arg, diag);
        case SE_PROXY_FLAG_MASQ_BIT:
                if (se_parse_int(arg, 0, 31, &o->masquerade_bit) < 0)
                        return bad(diag, "%s wants 0..31, not \"%s\"", "--masquerade-bit", arg);
                return 0;
        case SE_PROXY_FLAG_MASQ_ALL:
                o->masquerade_all = true;
                return 0;
        case SE_PROXY_FLAG_NODEPORT_ADDRESSES:
                r = se_proxy_parse_cidr_list(arg, o->nodeport_cidrs, SE_PROXY_MAX_CIDRS,
                                             &o->nodeport_primary, diag);
                if (r < 0)
                        return bad(diag, "%s: %s", "--nodeport-addresses", diag->text);
                o->n_nodeport_cidrs = (unsigned)r;
                return 0;
        case SE_PROXY_FLAG_LOCALHOST_NODEPORTS:
                if (se_parse_bool(arg, &o->localhost_nodeports) < 0)
                        return bad(diag, "%s wants true or false, not \"%s\"",
                                   "--localhost-nodeports", arg);
                return 0;
        case SE_PROXY_FLAG_RANDOM_FULLY:
                if (tristate(arg, &t) < 0)
                        return bad(diag, "%s wants auto, on or off, not \"%s\"", "--random-fully",
                                   arg);
                o->random_fully = t != 0; /* auto: on (iptables >= 1.6.2) */
                return 0;
        case SE_PROXY_FLAG_NFACCT:
                if (tristate(arg, &f->nfacct) < 0)
                        return bad(diag, "%s wants auto, on or off, not \"%s\"", "--nfacct", arg);
                return 0;
        case SE_PROXY_FLAG_PROXY_NAME:
                o->proxy_name = arg;
                return 0;
        default:
                return 1;
        }
}

void se_proxy_flags_finish(struct se_proxy_flags *f)
{
        if (f->nft)
                se_proxy_options_nft_defaults(&f->opt);
}

int se_proxy_node_facts(const struct se_store *store, const char *name,
                        struct se_proxy_options *opt, const char **zone)
{
        const struct se_object *obj = se_store_get(store, SE_KIND_NODE, "", name);
        *zone = NULL;
        if (!obj)
                return -ENOENT;
        const struct se_node *node = (const struct se_node *)obj;
        *zone = se_kvlist_get(&obj->meta.labels, "topology.kubernetes.io/zone");
        if (opt->n_node_ips) /* --node-ip wins, as kube-proxy's --node-ip */
                return 0;
        static const char *const types[] = { "InternalIP", "ExternalIP" };
        for (size_t t = 0; t < 2; t++)
                for (uint32_t i = 0; i < node->n_addresses; i++) {
                        struct se_ip ip;
                        const struct se_node_address *na = &node->addresses[i];
                        if (!na->type || strcmp(na->type, types[t]) != 0 || !na->address ||
                            se_parse_ip(na->address, &ip) < 0 ||
                            opt->n_node_ips >= SE_PROXY_MAX_NODE_IPS)
                                continue;
                        opt->node_ips[opt->n_node_ips++] = ip;
                }
        return 0;
}

/* Reading our nft table over netlink: nf_tables dumps of its chains, sets
 * and one chain's rules. The nft tool reads the whole ruleset for any
 * `list` (8 s for one chain, 45 s for the table's names at 10,000
 * services on our test machine); these dumps take milliseconds. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <svcenv/alloc.h>
#include <svcenv/proxy.h>
#include <svcenv/strv.h>

#define TABLE "svcenv"

/* the attributes of one nf_tables message, by type (up to max) */
static void attrs(const struct nlmsghdr *nh, const struct nlattr **tb, int max)
{
        memset(tb, 0, sizeof(*tb) * (size_t)(max + 1));
        size_t off = NLMSG_ALIGN(sizeof(struct nfgenmsg));
        size_t len = nh->nlmsg_len - NLMSG_HDRLEN;
        const char *base = (const char *)nh + NLMSG_HDRLEN; /* NLMSG_DATA drops const */
        while (off + NLA_HDRLEN <= len) {
                const struct nlattr *a = (const void *)(base + off);
                if (a->nla_len < NLA_HDRLEN || off + a->nla_len > len)
                        break;
                int type = a->nla_type & NLA_TYPE_MASK;
                if (type <= max)
                        tb[type] = a;
                off += NLA_ALIGN(a->nla_len);
        }
}

/* a string attribute, NULL unless NUL-terminated inside it */
static const char *str(const struct nlattr *a)
{
        size_t n = a ? a->nla_len - NLA_HDRLEN : 0;
        const char *s = a ? (const char *)a + NLA_HDRLEN : NULL;
        return n > 0 && memchr(s, 0, n) ? s : NULL;
}

typedef int (*each_fn)(const struct nlmsghdr *nh, void *data);

/* One dump request of msg for our table (and chain, when not NULL); each
 * answer message goes to each. 0 or a negative errno. */
static int dump(enum se_ip_family family, int msg, const char *chain, each_fn each, void *data)
{
        struct {
                struct nlmsghdr nh;
                struct nfgenmsg nf;
                char attrs[2 * NLA_HDRLEN + 2 * 256];
        } req;
        memset(&req, 0, sizeof(req));
        req.nh.nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | (unsigned)msg;
        req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
        req.nh.nlmsg_seq = 1;
        req.nf.nfgen_family = family == SE_IPV6 ? NFPROTO_IPV6 : NFPROTO_IPV4;
        req.nf.version = NFNETLINK_V0;
        size_t off = 0;
        /* NFTA_RULE_TABLE, NFTA_CHAIN_TABLE and NFTA_SET_TABLE are all 1;
         * NFTA_RULE_CHAIN is 2 */
        const char *vals[2] = { TABLE, chain };
        for (int i = 0; i < 2 && vals[i]; i++) {
                size_t n = strlen(vals[i]) + 1;
                if (n > 256)
                        return -ENAMETOOLONG;
                struct nlattr *a = (struct nlattr *)(req.attrs + off);
                a->nla_type = (unsigned short)(i + 1);
                a->nla_len = (unsigned short)(NLA_HDRLEN + n);
                memcpy(req.attrs + off + NLA_HDRLEN, vals[i], n);
                off += NLA_ALIGN(NLA_HDRLEN + n);
        }
        req.nh.nlmsg_len = (unsigned)(NLMSG_LENGTH(sizeof(struct nfgenmsg)) + off);
        int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
        if (fd < 0)
                return -errno;
        struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
        int r = 0;
        if (sendto(fd, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                r = -errno;
        static const size_t bufsize = 1u << 16;
        struct nlmsghdr *buf = r ? NULL : se_malloc(bufsize);
        if (!r && !buf)
                r = -ENOMEM;
        for (bool done = false; !r && !done;) {
                ssize_t k = recv(fd, buf, bufsize, 0);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        r = k < 0 ? -errno : -EPROTO;
                        break;
                }
                size_t left = (size_t)k;
                for (struct nlmsghdr *nh = buf; !r && NLMSG_OK(nh, left);
                     nh = NLMSG_NEXT(nh, left)) {
                        if (nh->nlmsg_type == NLMSG_DONE) {
                                done = true;
                                break;
                        }
                        if (nh->nlmsg_type == NLMSG_ERROR) {
                                const struct nlmsgerr *e = NLMSG_DATA(nh);
                                r = nh->nlmsg_len >= NLMSG_LENGTH(sizeof(*e)) && e->error ?
                                            e->error :
                                            -EPROTO;
                                break;
                        }
                        if (nh->nlmsg_len >= NLMSG_LENGTH(sizeof(struct nfgenmsg)))
                                r = each(nh, data);
                }
        }
        free(buf);
        close(fd);
        return r;
}

static int count_rule(const struct nlmsghdr *nh, void *data)
{
        const struct nlattr *tb[NFTA_RULE_MAX + 1];
        attrs(nh, tb, NFTA_RULE_MAX);
        const char *t = str(tb[NFTA_RULE_TABLE]);
        *(size_t *)data += t && strcmp(t, TABLE) == 0;
        return 0;
}

int se_proxy_nft_chain_rules(enum se_ip_family family, const char *chain, size_t *ret)
{
        size_t n = 0;
        int r = dump(family, NFT_MSG_GETRULE, chain, count_rule, &n);
        *ret = n;
        return r == -ENOENT ? 0 : r; /* no table or chain: no rules */
}

struct names {
        struct se_strv *out;
        size_t n;
};

static int push(struct names *nm, const char *kind, const char *name)
{
        if (++nm->n > SE_PROXY_MAX_SAVED_CHAINS)
                return -E2BIG;
        size_t len = strlen(kind) + strlen(name) + 2;
        char *s = se_malloc(len);
        if (!s)
                return -ENOMEM;
        snprintf(s, len, "%s %s", kind, name);
        return se_strv_push_consume(nm->out, s) < 0 ? -ENOMEM : 0;
}

static int chain_name(const struct nlmsghdr *nh, void *data)
{
        const struct nlattr *tb[NFTA_CHAIN_MAX + 1];
        attrs(nh, tb, NFTA_CHAIN_MAX);
        const char *t = str(tb[NFTA_CHAIN_TABLE]), *name = str(tb[NFTA_CHAIN_NAME]);
        if (!t || !name || strcmp(t, TABLE) != 0)
                return 0;
        return push(data, "chain", name);
}

static int set_name(const struct nlmsghdr *nh, void *data)
{
        const struct nlattr *tb[NFTA_SET_MAX + 1];
        attrs(nh, tb, NFTA_SET_MAX);
        const char *t = str(tb[NFTA_SET_TABLE]), *name = str(tb[NFTA_SET_NAME]);
        uint32_t flags = 0;
        if (!t || !name || strcmp(t, TABLE) != 0)
                return 0;
        if (tb[NFTA_SET_FLAGS] && tb[NFTA_SET_FLAGS]->nla_len >= NLA_HDRLEN + 4) {
                memcpy(&flags, (const char *)tb[NFTA_SET_FLAGS] + NLA_HDRLEN, 4);
                flags = ntohl(flags);
        }
        if (flags & NFT_SET_ANONYMOUS) /* goes with the rule using it */
                return 0;
        return push(data, flags & NFT_SET_MAP ? "map" : "set", name);
}

int se_proxy_nft_names(enum se_ip_family family, struct se_strv *ret)
{
        struct names nm = { .out = ret };
        int r = dump(family, NFT_MSG_GETCHAIN, NULL, chain_name, &nm);
        if (r == 0)
                r = dump(family, NFT_MSG_GETSET, NULL, set_name, &nm);
        return r == -ENOENT ? 0 : r; /* no table: nothing of ours */
}

int se_proxy_nft_seed_existing(struct se_proxy_tracker *tr, enum se_ip_family family)
{
        struct se_strv names = SE_STRV_INIT;
        se_proxy_tracker_reset(tr);
        int r = se_proxy_nft_names(family, &names);
        if (r == 0)
                r = se_proxy_tracker_seed(tr, &names);
        se_strv_release(&names);
        return r;
}

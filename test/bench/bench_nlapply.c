/* Benchmark: programming nftables over netlink against `nft -f`, in the
 * same run and for the same scripts: the full load of 1,000 / 10,000
 * services x 10 endpoints (each way in its own fresh network namespace),
 * then one service added with all of them present (svcenv's minimal
 * partial sync). Wall time and CPU (ours for netlink, where the kernel
 * work is our system time; nft's for nft -f). Root only; prints figures,
 * asserts nothing. BENCH_NLAPPLY_MAX=N: largest size (default 10000);
 * BENCH_DUMP=PREFIX saves the scripts as PREFIX.N.nft and PREFIX.N.one.nft.
 * Last, the kernel's floor: batches made here with libnftnl alone (no
 * translator, no applier) of N named maps, N chains and N rules each
 * looking its map up, as one named map per service makes them. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <libmnl/libmnl.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>

#include <svcenv/proxy.h>
#include <svcenv/store.h>

#include "proxy_cluster.h"

static double now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu(int who)
{
        struct rusage ru;
        getrusage(who, &ru);
        return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
               (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* applies text in the namespace fd one way; prints wall and CPU */
static int timed(int ns, const struct se_strbuf *sb, bool netlink, const char *what)
{
        char err[512];
        if (setns(ns, CLONE_NEWNET) < 0)
                return -errno;
        double c0 = cpu(netlink ? RUSAGE_SELF : RUSAGE_CHILDREN), t0 = now();
        int r = netlink ? se_proxy_nft_apply_netlink(sb->buf, sb->len, err, sizeof(err)) :
                          se_proxy_nft_apply(SE_PROXY_NFT_TOOL, sb->buf, sb->len, NULL, 0, err,
                                             sizeof(err));
        double t1 = now(), c1 = cpu(netlink ? RUSAGE_SELF : RUSAGE_CHILDREN);
        if (r < 0)
                printf("  %-34s %-8s failed: %s\n", what, netlink ? "netlink" : "nft -f", err);
        else
                printf("  %-34s %-8s %9.1f ms wall %9.1f ms CPU\n", what,
                       netlink ? "netlink" : "nft -f", (t1 - t0) * 1e3, (c1 - c0) * 1e3);
        return r;
}

static void dump(const struct se_strbuf *sb, unsigned n_svc, const char *what)
{
        const char *prefix = getenv("BENCH_DUMP");
        char path[4096];
        if (!prefix)
                return;
        snprintf(path, sizeof(path), "%s.%u%s.nft", prefix, n_svc, what);
        FILE *f = fopen(path, "w");
        if (f) {
                fwrite(sb->buf, 1, sb->len, f);
                fclose(f);
        }
}

static struct se_proxy_table *table(const struct se_store *s, const struct se_proxy_options *o)
{
        struct se_proxy_table *t = NULL;
        if (se_proxy_table_build(s, o, SE_IPV4, &t) < 0)
                exit(1);
        return t;
}

static void run(unsigned n_svc)
{
        enum { EPS = 10 };
        struct se_store *s = se_store_new();
        struct se_proxy_options o;
        se_proxy_options_init(&o);
        se_proxy_options_nft_defaults(&o);
        o.node_name = "node-a";
        se_parse_ip("10.0.0.11", &o.node_ips[0]);
        o.n_node_ips = 1;
        se_parse_cidr("10.244.0.0/16", &o.cluster_cidrs[0]);
        o.n_cluster_cidrs = 1;
        o.random_fully = true;
        for (unsigned i = 0; i < n_svc; i++)
                if (!s || bench_put_service(s, i, EPS, i * EPS) < 0)
                        exit(1);
        struct se_proxy_tracker *tr = se_proxy_tracker_new();
        se_proxy_tracker_set_minimal(tr, true);
        struct se_strbuf full, one;
        se_strbuf_init(&full, (size_t)1 << 30);
        se_strbuf_init(&one, 0);
        struct se_proxy_table *t = table(s, &o);
        if (se_proxy_nft_sync(t, &o, tr, &full) < 0)
                exit(1);
        se_proxy_table_free(t);
        printf("nft apply, %u services x %d endpoints: full script %.1f MiB\n", n_svc, EPS,
               (double)full.len / (1 << 20));
        /* the tracker takes the buffer its sync wrote over: apply a copy */
        struct se_strbuf copy;
        se_strbuf_init(&copy, full.len + 1);
        se_strbuf_add(&copy, full.buf, full.len);
        se_proxy_tracker_done(tr, true, &full);
        se_strbuf_release(&full);
        full = copy;
        /* the added service's sync: store event to script */
        double w0 = now();
        if (bench_put_service(s, n_svc, EPS, n_svc * EPS) < 0)
                exit(1);
        t = table(s, &o);
        if (se_proxy_nft_sync(t, &o, tr, &one) < 0)
                exit(1);
        double w1 = now();
        se_proxy_table_free(t);
        dump(&full, n_svc, "");
        dump(&one, n_svc, ".one");
        int nl = -1, tool = -1;
        if (unshare(CLONE_NEWNET) == 0)
                nl = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        if (unshare(CLONE_NEWNET) == 0)
                tool = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        if (nl < 0 || tool < 0) {
                printf("  skipped: no network namespaces (%s)\n", strerror(errno));
        } else {
                printf("  one service added: build+write %.1f ms, %.1f KiB\n", (w1 - w0) * 1e3,
                       (double)one.len / 1024);
                /* netlink's two in a row: the applier keeps its socket (and
                 * what it knows of the table) while the namespace stays */
                timed(nl, &full, true, "full load");
                timed(nl, &one, true, "one service added, apply");
                timed(tool, &full, false, "full load");
                timed(tool, &one, false, "one service added, apply");
        }
        if (nl >= 0)
                close(nl);
        if (tool >= 0)
                close(tool);
        se_proxy_tracker_done(tr, true, NULL);
        se_strbuf_release(&full);
        se_strbuf_release(&one);
        se_proxy_tracker_free(tr);
        se_store_free(s);
}

/* ---- the kernel's floor ---- */

struct raw {
        char *buf;
        size_t len, cap;
        uint32_t seq;
        struct nlmsghdr *last; /* the last nf_tables message */
};

static struct nlmsghdr *raw_msg(struct raw *r, uint16_t type, uint16_t flags)
{
        if (r->cap - r->len < 4096)
                exit(1); /* sized for the largest batch below */
        struct nlmsghdr *nh = nftnl_nlmsg_build_hdr(r->buf + r->len, type, NFPROTO_IPV4,
                                                    flags | NLM_F_CREATE, r->seq++);
        r->last = nh;
        return nh;
}

static void raw_end(struct raw *r, struct nlmsghdr *nh)
{
        r->len += NLMSG_ALIGN(nh->nlmsg_len);
}

static void raw_batch_msg(struct raw *r, uint16_t type)
{
        struct nlmsghdr *nh = mnl_nlmsg_put_header(r->buf + r->len);
        nh->nlmsg_type = type;
        nh->nlmsg_flags = NLM_F_REQUEST;
        nh->nlmsg_seq = r->seq++;
        struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nh, sizeof(*g));
        g->nfgen_family = AF_UNSPEC;
        g->version = NFNETLINK_V0;
        g->res_id = htons(NFNL_SUBSYS_NFTABLES);
        raw_end(r, nh);
}

static void map_name(char *nm, size_t size, unsigned i)
{
        /* as long as a service's dnat map name: the kernel compares names */
        snprintf(nm, size, "dnat-service-%08u-bench-0/svc-%u/tcp/http", i, i);
}

/* map i (integer to address); one element, found by set id, when elems */
static void raw_map(struct raw *r, unsigned i, bool elems)
{
        char nm[80];
        map_name(nm, sizeof(nm), i);
        struct nlmsghdr *nh = raw_msg(r, NFT_MSG_NEWSET, 0);
        mnl_attr_put_strz(nh, NFTA_SET_TABLE, "floor");
        mnl_attr_put_strz(nh, NFTA_SET_NAME, nm);
        mnl_attr_put_u32(nh, NFTA_SET_FLAGS, htonl(NFT_SET_MAP));
        mnl_attr_put_u32(nh, NFTA_SET_KEY_TYPE, htonl(4));
        mnl_attr_put_u32(nh, NFTA_SET_KEY_LEN, htonl(4));
        mnl_attr_put_u32(nh, NFTA_SET_DATA_TYPE, htonl(7));
        mnl_attr_put_u32(nh, NFTA_SET_DATA_LEN, htonl(4));
        mnl_attr_put_u32(nh, NFTA_SET_ID, htonl(i + 1));
        raw_end(r, nh);
        if (!elems)
                return;
        uint32_t key = 0, addr = htonl(0x0a800000 + i);
        nh = raw_msg(r, NFT_MSG_NEWSETELEM, 0);
        mnl_attr_put_strz(nh, NFTA_SET_ELEM_LIST_TABLE, "floor");
        mnl_attr_put_u32(nh, NFTA_SET_ELEM_LIST_SET_ID, htonl(i + 1));
        struct nlattr *list = mnl_attr_nest_start(nh, NFTA_SET_ELEM_LIST_ELEMENTS);
        struct nlattr *e = mnl_attr_nest_start(nh, NFTA_LIST_ELEM);
        struct nlattr *k = mnl_attr_nest_start(nh, NFTA_SET_ELEM_KEY);
        mnl_attr_put(nh, NFTA_DATA_VALUE, 4, &key);
        mnl_attr_nest_end(nh, k);
        struct nlattr *d = mnl_attr_nest_start(nh, NFTA_SET_ELEM_DATA);
        mnl_attr_put(nh, NFTA_DATA_VALUE, 4, &addr);
        mnl_attr_nest_end(nh, d);
        mnl_attr_nest_end(nh, e);
        mnl_attr_nest_end(nh, list);
        raw_end(r, nh);
}

/* chain i and its rule: "meta mark" looked up in map i (by name, as the
 * kernel requires) when maps, counted otherwise */
static void raw_chain(struct raw *r, unsigned i, bool maps)
{
        char chain[32], nm[80];
        snprintf(chain, sizeof(chain), "c-%08u", i);
        map_name(nm, sizeof(nm), i);
        struct nlmsghdr *nh = raw_msg(r, NFT_MSG_NEWCHAIN, 0);
        mnl_attr_put_strz(nh, NFTA_CHAIN_TABLE, "floor");
        mnl_attr_put_strz(nh, NFTA_CHAIN_NAME, chain);
        raw_end(r, nh);
        struct nftnl_rule *ru = nftnl_rule_alloc();
        struct nftnl_expr *m = nftnl_expr_alloc("meta");
        struct nftnl_expr *l = nftnl_expr_alloc(maps ? "lookup" : "counter");
        if (!ru || !m || !l)
                exit(1);
        nftnl_rule_set_str(ru, NFTNL_RULE_TABLE, "floor");
        nftnl_rule_set_str(ru, NFTNL_RULE_CHAIN, chain);
        nftnl_expr_set_u32(m, NFTNL_EXPR_META_KEY, NFT_META_MARK);
        nftnl_expr_set_u32(m, NFTNL_EXPR_META_DREG, NFT_REG_1);
        nftnl_rule_add_expr(ru, m);
        if (maps) {
                nftnl_expr_set_u32(l, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
                nftnl_expr_set_u32(l, NFTNL_EXPR_LOOKUP_DREG, NFT_REG_1);
                nftnl_expr_set_str(l, NFTNL_EXPR_LOOKUP_SET, nm);
                nftnl_expr_set_u32(l, NFTNL_EXPR_LOOKUP_SET_ID, i + 1);
        }
        nftnl_rule_add_expr(ru, l);
        nh = raw_msg(r, NFT_MSG_NEWRULE, NLM_F_APPEND);
        nftnl_rule_nlmsg_build_payload(nh, ru);
        nftnl_rule_free(ru);
        raw_end(r, nh);
}

/* sends the batch: the kernel's answer to message last (acked), or the
 * first error */
static int raw_send(const struct raw *r, uint32_t last)
{
        struct mnl_socket *nl = mnl_socket_open(NETLINK_NETFILTER);
        if (!nl || mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0)
                return nl ? (mnl_socket_close(nl), -EIO) : -errno;
        int size = (int)r->len + 4096, res = -EIO;
        (void)setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size));
        if (mnl_socket_sendto(nl, r->buf, r->len) < 0) {
                res = -errno;
                goto out;
        }
        for (;;) {
                char buf[1u << 16];
                ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
                if (n <= 0)
                        goto out;
                for (const struct nlmsghdr *nh = (const void *)buf; mnl_nlmsg_ok(nh, (int)n);
                     nh = mnl_nlmsg_next(nh, (int *)&n)) {
                        const struct nlmsgerr *e = mnl_nlmsg_get_payload(nh);
                        if (nh->nlmsg_type == NLMSG_ERROR && (e->error || nh->nlmsg_seq == last)) {
                                res = e->error;
                                goto out;
                        }
                }
        }
out:
        mnl_socket_close(nl);
        return res;
}

/* one raw batch of n maps and/or n chains in a fresh namespace: its time */
static void floor_run(unsigned n, bool maps, bool chains, bool elems, const char *what)
{
        struct raw r = { .cap = (size_t)n * 1024 + (1u << 20), .seq = 1 };
        r.buf = calloc(1, r.cap);
        if (!r.buf || unshare(CLONE_NEWNET) < 0) {
                printf("  %-46s skipped: %s\n", what, strerror(errno));
                free(r.buf);
                return;
        }
        raw_batch_msg(&r, NFNL_MSG_BATCH_BEGIN);
        struct nlmsghdr *nh = raw_msg(&r, NFT_MSG_NEWTABLE, 0);
        mnl_attr_put_strz(nh, NFTA_TABLE_NAME, "floor");
        raw_end(&r, nh);
        for (unsigned i = 0; maps && i < n; i++)
                raw_map(&r, i, elems);
        for (unsigned i = 0; chains && i < n; i++)
                raw_chain(&r, i, maps);
        /* an ack for the last real message: the whole batch is in */
        r.last->nlmsg_flags |= NLM_F_ACK;
        uint32_t last = r.last->nlmsg_seq;
        raw_batch_msg(&r, NFNL_MSG_BATCH_END);
        double c0 = cpu(RUSAGE_SELF), t0 = now();
        int res = raw_send(&r, last);
        double t1 = now(), c1 = cpu(RUSAGE_SELF);
        if (res < 0)
                printf("  %-46s failed: %s\n", what, strerror(-res));
        else
                printf("  %-46s %9.1f ms wall %9.1f ms CPU\n", what, (t1 - t0) * 1e3,
                       (c1 - c0) * 1e3);
        free(r.buf);
}

static void floor_all(unsigned n)
{
        char what[96];
        printf("kernel floor, %u of each (raw batches, libnftnl alone):\n", n);
        snprintf(what, sizeof(what), "%u chains, a rule each", n);
        floor_run(n, false, true, false, what);
        snprintf(what, sizeof(what), "%u empty named maps", n);
        floor_run(n, true, false, false, what);
        snprintf(what, sizeof(what), "%u maps, chains, rules looking them up", n);
        floor_run(n, true, true, false, what);
        floor_run(n, true, true, true, "the same, an element a map (by set id)");
}

int main(void)
{
        static const unsigned sizes[] = { 1000, 10000 };
        const char *env = getenv("BENCH_NLAPPLY_MAX");
        unsigned max = env ? (unsigned)strtoul(env, NULL, 10) : 10000;
        setvbuf(stdout, NULL, _IOLBF, 0);
        if (geteuid() != 0) {
                printf("nft apply: skipped (needs root)\n");
                return 0;
        }
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
                if (sizes[i] <= max)
                        run(sizes[i]);
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
                if (sizes[i] <= max)
                        floor_all(sizes[i]);
        return 0;
}

/* Applying an nft script over netlink: translated (proxy_nftparse.c) into
 * one nf_tables batch (BATCH_BEGIN ... BATCH_END), which the kernel applies
 * atomically as `nft -f` would, without the nft tool's read of the whole
 * ruleset. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <libmnl/libmnl.h>

#include <svcenv/proxy.h>

#include <svcenv/alloc.h>
#include <svcenv/hashmap.h>

#include "proxy_nlbatch.h"

void proxy_nlb_init(struct nlb *b)
{
        memset(b, 0, sizeof(*b));
}

void proxy_nlb_release(struct nlb *b)
{
        free(b->buf);
        free(b->lines);
        proxy_nlb_init(b);
}

static int grow(struct nlb *b, size_t need)
{
        if (b->len + need <= b->cap)
                return 0;
        if (b->len + need > NLB_MAX_BYTES)
                return -E2BIG;
        size_t cap = b->cap ? b->cap : 64u << 10;
        while (cap < b->len + need)
                cap *= 2;
        char *nb = se_reallocarray(b->buf, cap, 1);
        if (!nb)
                return -ENOMEM;
        /* libnftnl leaves attribute padding as it finds it: zeroed, the
         * kernel never sees stale heap bytes (valgrind: sendmsg of
         * uninitialised bytes) */
        memset(nb + b->cap, 0, cap - b->cap);
        b->buf = nb;
        b->cap = cap;
        return 0;
}

static int add_line(struct nlb *b, unsigned line)
{
        if (b->n == b->lines_cap) {
                size_t nc = b->lines_cap ? b->lines_cap * 2 : 256;
                uint32_t *nl = se_reallocarray(b->lines, nc, sizeof(*nl));
                if (!nl)
                        return -ENOMEM;
                b->lines = nl;
                b->lines_cap = nc;
        }
        b->lines[b->n++] = line;
        return 0;
}

static struct nlmsghdr *put_hdr(struct nlb *b, uint16_t type, uint8_t family, uint16_t flags,
                                uint16_t res_id, unsigned line)
{
        if (grow(b, NLB_HEADROOM) < 0 || add_line(b, line) < 0)
                return NULL;
        struct nlmsghdr *nh = mnl_nlmsg_put_header(b->buf + b->len);
        nh->nlmsg_type = type;
        nh->nlmsg_flags = (uint16_t)(NLM_F_REQUEST | flags);
        struct nfgenmsg *nf = mnl_nlmsg_put_extra_header(nh, sizeof(*nf));
        nf->nfgen_family = family;
        nf->version = NFNETLINK_V0;
        nf->res_id = htons(res_id);
        return nh;
}

struct nlmsghdr *proxy_nlb_begin(struct nlb *b, uint16_t type, uint8_t family, uint16_t flags,
                                 unsigned line)
{
        return put_hdr(b, (uint16_t)((NFNL_SUBSYS_NFTABLES << 8) | type), family, flags, 0, line);
}

void proxy_nlb_end(struct nlb *b, struct nlmsghdr *nh)
{
        b->len += NLMSG_ALIGN(nh->nlmsg_len);
}

int proxy_nlb_append(struct nlb *b, const struct nlb *src)
{
        if (!src->len)
                return 0;
        int r = grow(b, src->len);
        if (r < 0)
                return r;
        for (size_t i = 0; i < src->n; i++)
                if (add_line(b, src->lines[i]) < 0)
                        return -ENOMEM;
        memcpy(b->buf + b->len, src->buf, src->len);
        b->len += src->len;
        return 0;
}

/* ---- the kernel's view of one set ---- */

struct getset {
        struct nfp_set_info *info;
        bool found;
};

static int set_attr(const struct nlattr *a, void *data)
{
        const struct nlattr **tb = data;
        int type = mnl_attr_get_type(a);
        if (type <= NFTA_SET_MAX)
                tb[type] = a;
        return MNL_CB_OK;
}

static uint32_t be32_attr(const struct nlattr *a)
{
        return a && mnl_attr_get_payload_len(a) >= 4 ? ntohl(mnl_attr_get_u32(a)) : 0;
}

static int getset_cb(const struct nlmsghdr *nh, void *data)
{
        struct getset *g = data;
        const struct nlattr *tb[NFTA_SET_MAX + 1] = { 0 };
        if (mnl_attr_parse(nh, sizeof(struct nfgenmsg), set_attr, tb) < 0)
                return MNL_CB_ERROR;
        struct nfp_set_info *i = g->info;
        memset(i, 0, sizeof(*i));
        i->flags = be32_attr(tb[NFTA_SET_FLAGS]);
        i->key_type = be32_attr(tb[NFTA_SET_KEY_TYPE]);
        i->key_len = be32_attr(tb[NFTA_SET_KEY_LEN]);
        i->data_type = be32_attr(tb[NFTA_SET_DATA_TYPE]);
        i->data_len = be32_attr(tb[NFTA_SET_DATA_LEN]);
        if (tb[NFTA_SET_USERDATA]) { /* nft's TLVs: type, length, value */
                const uint8_t *p = mnl_attr_get_payload(tb[NFTA_SET_USERDATA]);
                size_t n = mnl_attr_get_payload_len(tb[NFTA_SET_USERDATA]);
                for (size_t off = 0; off + 2 <= n && off + 2 + p[off + 1] <= n;
                     off += 2 + p[off + 1])
                        if (p[off] == 0 /* KEYBYTEORDER */ && p[off + 1] == 4)
                                memcpy(&i->key_byteorder, p + off + 2, 4);
        }
        g->found = true;
        return MNL_CB_OK;
}

/* The names of one table's sets as the kernel had them at ruleset
 * generation genid: read once (a dump), then kept up to date from our own
 * batches while the generation moves by them alone. */
struct set_names {
        bool valid;
        uint32_t genid;
        uint8_t family;
        char table[NFT_NAME_MAXLEN];
        struct se_hashmap names; /* owned keys, values the same */
};

struct conn {
        struct mnl_socket *nl;
        uint32_t portid, seq;
        struct set_names known;
};

/* what the translator asks of one apply */
struct asked {
        struct conn *c;
        bool tried; /* a read of the set names was tried (err) */
        int err;
};

#define MAX_SET_NAMES (1u << 22) /* a kernel's answer we read at most */

static void names_clear(struct set_names *k)
{
        const char *key;
        void *v;
        for (size_t i = 0; se_hashmap_next(&k->names, &i, &key, &v);)
                free(v);
        se_hashmap_release(&k->names);
        k->valid = false;
}

/* 1 when name went in (or was there), -ENOMEM or -E2BIG */
static int names_add(struct set_names *k, const char *name)
{
        if (se_hashmap_get(&k->names, name))
                return 1;
        if (k->names.n >= MAX_SET_NAMES)
                return -E2BIG;
        char *nm = se_strdup(name);
        if (!nm || se_hashmap_put(&k->names, nm, nm, NULL) < 0) {
                free(nm);
                return -ENOMEM;
        }
        return 1;
}

static int setname_cb(const struct nlmsghdr *nh, void *data)
{
        struct set_names *k = data;
        const struct nlattr *tb[NFTA_SET_MAX + 1] = { 0 };
        if (mnl_attr_parse(nh, sizeof(struct nfgenmsg), set_attr, tb) < 0 || !tb[NFTA_SET_NAME] ||
            !tb[NFTA_SET_TABLE] || mnl_attr_validate(tb[NFTA_SET_NAME], MNL_TYPE_NUL_STRING) < 0 ||
            mnl_attr_validate(tb[NFTA_SET_TABLE], MNL_TYPE_NUL_STRING) < 0)
                return MNL_CB_ERROR;
        if (strcmp(mnl_attr_get_str(tb[NFTA_SET_TABLE]), k->table) != 0)
                return MNL_CB_OK;
        int r = names_add(k, mnl_attr_get_str(tb[NFTA_SET_NAME]));
        if (r < 0) {
                errno = -r;
                return MNL_CB_ERROR;
        }
        return MNL_CB_OK;
}

/* A request of type about table and set (each when not NULL, as
 * NFTA_SET_TABLE and NFTA_SET_NAME), answered by cb until the kernel's done. */
static int request(struct conn *c, uint16_t type, uint16_t flags, uint8_t family, const char *table,
                   const char *set, mnl_cb_t cb, void *data)
{
        char buf[1u << 16];
        memset(buf, 0, 4096); /* the attributes' padding too (valgrind) */
        struct nlmsghdr *nh = mnl_nlmsg_put_header(buf);
        nh->nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | type;
        nh->nlmsg_flags = NLM_F_REQUEST | flags;
        nh->nlmsg_seq = ++c->seq;
        struct nfgenmsg *nf = mnl_nlmsg_put_extra_header(nh, sizeof(*nf));
        nf->nfgen_family = family;
        nf->version = NFNETLINK_V0;
        if (table)
                mnl_attr_put_strz(nh, NFTA_SET_TABLE, table);
        if (set)
                mnl_attr_put_strz(nh, NFTA_SET_NAME, set);
        if (mnl_socket_sendto(c->nl, nh, nh->nlmsg_len) < 0)
                return -errno;
        for (;;) {
                ssize_t n = mnl_socket_recvfrom(c->nl, buf, sizeof(buf));
                if (n < 0)
                        return -errno;
                int r = mnl_cb_run(buf, (size_t)n, c->seq, c->portid, cb, data);
                if (r < 0)
                        return -errno;
                if (r == MNL_CB_STOP)
                        return 0;
        }
}

static int get_set(void *ctx, uint8_t family, const char *table, const char *set,
                   struct nfp_set_info *info)
{
        struct getset g = { .info = info };
        int r = request(((struct asked *)ctx)->c, NFT_MSG_GETSET, NLM_F_ACK, family, table, set,
                        getset_cb, &g);
        return r < 0 ? r : g.found ? 0 : -ENOENT;
}

static int gen_cb(const struct nlmsghdr *nh, void *data)
{
        struct nlattr *a;
        mnl_attr_for_each(a, nh, sizeof(struct nfgenmsg))
        {
                if (mnl_attr_get_type(a) == NFTA_GEN_ID &&
                    mnl_attr_validate(a, MNL_TYPE_U32) == 0) {
                        *(uint32_t *)data = ntohl(mnl_attr_get_u32(a));
                        return MNL_CB_OK;
                }
        }
        return MNL_CB_ERROR;
}

/* the ruleset's generation */
static int get_gen(struct conn *c, uint32_t *gen)
{
        return request(c, NFT_MSG_GETGEN, NLM_F_ACK, NFPROTO_UNSPEC, NULL, NULL, gen_cb, gen);
}

/* c->known: the names of table's sets, read between two equal generations */
static int read_set_names(struct conn *c, uint8_t family, const char *table)
{
        struct set_names *k = &c->known;
        uint32_t before = 0, after = 1;
        names_clear(k);
        if (strlen(table) >= sizeof(k->table))
                return -ENAMETOOLONG;
        k->family = family;
        snprintf(k->table, sizeof(k->table), "%s", table);
        int r = get_gen(c, &before);
        if (r == 0) {
                r = request(c, NFT_MSG_GETSET, NLM_F_DUMP, family, table, NULL, setname_cb, k);
                if (r == -ENOENT)
                        r = 0; /* no such table: no sets */
        }
        if (r == 0)
                r = get_gen(c, &after);
        if (r == 0 && before != after)
                r = -EAGAIN; /* changed while read */
        if (r < 0) {
                names_clear(k);
                return r;
        }
        k->valid = true;
        k->genid = before;
        return 0;
}

/* Whether set is in table now, from c->known (read at the first question
 * when not kept from before; questions about another table: -EXDEV) */
static int set_exists(void *ctx, uint8_t family, const char *table, const char *set)
{
        struct asked *a = ctx;
        struct set_names *k = &a->c->known;
        if (!k->valid && !a->tried) {
                a->tried = true;
                a->err = read_set_names(a->c, family, table);
        }
        if (!k->valid)
                return a->err < 0 ? a->err : -EAGAIN;
        if (family != k->family || strcmp(table, k->table) != 0)
                return -EXDEV;
        return se_hashmap_get(&k->names, set) ? 1 : 0;
}

/* After our batch b committed: its sets into c->known, at the generation
 * it made (when another batch went in as well, known is dropped). */
static void known_after(struct conn *c, const struct nlb *b)
{
        struct set_names *k = &c->known;
        uint32_t gen = 0;
        if (!k->valid)
                return;
        for (size_t off = 0; k->valid && off + NLMSG_HDRLEN <= b->len;) {
                const struct nlmsghdr *nh = (const void *)(b->buf + off);
                off += NLMSG_ALIGN(nh->nlmsg_len);
                uint16_t type = nh->nlmsg_type & 0xff;
                const struct nfgenmsg *g = mnl_nlmsg_get_payload(nh);
                if ((nh->nlmsg_type >> 8) != NFNL_SUBSYS_NFTABLES ||
                    (g->nfgen_family != k->family && g->nfgen_family != NFPROTO_UNSPEC))
                        continue;
                const struct nlattr *tb[NFTA_SET_MAX + 1] = { 0 };
                if (mnl_attr_parse(nh, sizeof(*g), set_attr, tb) < 0) {
                        names_clear(k);
                        break;
                }
                /* NFTA_TABLE_NAME and NFTA_SET_TABLE are both attribute 1 */
                const char *table =
                        tb[NFTA_SET_TABLE] ? mnl_attr_get_str(tb[NFTA_SET_TABLE]) : NULL;
                const char *name = tb[NFTA_SET_NAME] ? mnl_attr_get_str(tb[NFTA_SET_NAME]) : NULL;
                bool ours = table && strcmp(table, k->table) == 0;
                if (type == NFT_MSG_DELTABLE && (!table || ours)) {
                        names_clear(k); /* simpler read again than followed */
                } else if (type == NFT_MSG_NEWSET && ours && name) {
                        if (!strchr(name, '%') && names_add(k, name) < 0)
                                names_clear(k);
                } else if (type == NFT_MSG_DELSET && ours && name) {
                        free(se_hashmap_remove(&k->names, name));
                }
        }
        if (k->valid && (get_gen(c, &gen) < 0 || gen != k->genid + 1))
                names_clear(k);
        k->genid = gen;
}

/* ---- sending ---- */

static atomic_ulong fallbacks;
static _Atomic int nft_how = SE_PROXY_NFT_NETLINK;
static pthread_mutex_t why_mu = PTHREAD_MUTEX_INITIALIZER;
static char last_why[512];

unsigned long se_proxy_nft_netlink_fallbacks(void)
{
        return atomic_load(&fallbacks);
}

void se_proxy_nft_set_how(enum se_proxy_nft_how h)
{
        atomic_store(&nft_how, (int)h);
}

enum se_proxy_nft_how se_proxy_nft_get_how(void)
{
        return (enum se_proxy_nft_how)atomic_load(&nft_how);
}

void se_proxy_nft_last_fallback(char *buf, size_t size)
{
        pthread_mutex_lock(&why_mu);
        snprintf(buf, size, "%s", last_why);
        pthread_mutex_unlock(&why_mu);
}

/* the batch-control message of type (begin or end); a begin carries the
 * ruleset generation the batch needs (0: any; see bind_generation) */
static int batch_msg(struct nlb *b, uint16_t type)
{
        struct nlmsghdr *nh = put_hdr(b, type, NFPROTO_UNSPEC, 0, NFNL_SUBSYS_NFTABLES, 0);
        if (!nh)
                return -ENOMEM;
        if (type == NFNL_MSG_BATCH_BEGIN)
                mnl_attr_put_u32(nh, NFNL_BATCH_GENID, 0);
        proxy_nlb_end(b, nh);
        return 0;
}

/* The batch's begin (its first message) bound to generation genid: the
 * kernel refuses it with -ERESTART, doing nothing, once another batch went
 * in since. */
static void bind_generation(struct nlb *b, uint32_t genid)
{
        uint32_t be = htonl(genid);
        memcpy(b->buf + NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct nfgenmsg)) + NLA_HDRLEN, &be,
               sizeof(be));
}

/* the kernel's answers up to the one for seq last; the first error into
 * err with its script line */
static int receive(struct conn *c, const struct nlb *b, uint32_t first_seq, uint32_t last,
                   char *err, size_t errsize)
{
        char buf[1u << 16];
        int result = 0;
        for (;;) {
                ssize_t n = mnl_socket_recvfrom(c->nl, buf, sizeof(buf));
                if (n < 0) {
                        int e = errno;
                        if (err && !result)
                                snprintf(err, errsize, "reading the kernel's answer: %s",
                                         strerror(e));
                        return result ? result : -e;
                }
                for (const struct nlmsghdr *nh = (const void *)buf; mnl_nlmsg_ok(nh, (int)n);
                     nh = mnl_nlmsg_next(nh, (int *)&n)) {
                        if (nh->nlmsg_type != NLMSG_ERROR)
                                continue;
                        const struct nlmsgerr *e = mnl_nlmsg_get_payload(nh);
                        if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
                                continue;
                        uint32_t seq = nh->nlmsg_seq;
                        if (e->error == -ERESTART && seq == first_seq && !result)
                                return -ERESTART; /* the generation moved: nothing done */
                        if (e->error && !result) {
                                size_t idx = seq >= first_seq ? seq - first_seq : 0;
                                unsigned line = idx < b->n ? b->lines[idx] : 0;
                                if (err)
                                        snprintf(err, errsize, "line %u: %s", line,
                                                 strerror(-e->error));
                                result = -EPROTO;
                        }
                        /* the batch itself refused (not permitted, ...): nothing follows */
                        if (seq == last || (e->error && seq == first_seq))
                                return result;
                }
        }
}

static int send_batch(struct conn *c, struct nlb *b, char *err, size_t errsize)
{
        /* sequence numbers from 1, the last real message acknowledged */
        uint32_t seq = c->seq + 1, last = 0;
        struct nlmsghdr *prev = NULL;
        for (size_t off = 0; off < b->len;) {
                struct nlmsghdr *nh = (void *)(b->buf + off);
                nh->nlmsg_seq = seq++;
                off += NLMSG_ALIGN(nh->nlmsg_len);
                if (off < b->len)
                        prev = nh;
        }
        if (!prev || prev->nlmsg_type == NFNL_MSG_BATCH_BEGIN)
                return 0; /* nothing between begin and end */
        prev->nlmsg_flags |= NLM_F_ACK;
        last = prev->nlmsg_seq;
        uint32_t first = c->seq + 1;
        c->seq = seq;
        int size = (int)(b->len + 4096);
        /* the whole batch is one message to the kernel: its buffer must fit */
        if (setsockopt(mnl_socket_get_fd(c->nl), SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) <
            0)
                (void)setsockopt(mnl_socket_get_fd(c->nl), SOL_SOCKET, SO_SNDBUF, &size,
                                 sizeof(size));
        struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
        struct iovec iov = { b->buf, b->len };
        struct msghdr msg = {
                .msg_name = &sa, .msg_namelen = sizeof(sa), .msg_iov = &iov, .msg_iovlen = 1
        };
        if (sendmsg(mnl_socket_get_fd(c->nl), &msg, 0) < 0) {
                int e = errno;
                if (err)
                        snprintf(err, errsize, "sending the batch: %s", strerror(e));
                return -e;
        }
        return receive(c, b, first, last, err, errsize);
}

/* One socket kept open between applies: closing a nfnetlink socket waits
 * for the kernel's deferred release of the last commit's objects (an RCU
 * grace period, ~10 ms here: most of a one-service sync's wall time). It
 * belongs to the network namespace and process it was opened in; another
 * (a test's setns, a fork) opens a new one. */
static pthread_mutex_t kept_mu = PTHREAD_MUTEX_INITIALIZER;
static struct conn kept;
static ino_t kept_ns;
static dev_t kept_ns_dev;
static pid_t kept_pid;

static void kept_close(void)
{
        /* in a fork, the descriptor is a copy: closing it leaves the
         * parent's socket open */
        if (kept.nl)
                mnl_socket_close(kept.nl);
        names_clear(&kept.known);
        memset(&kept, 0, sizeof(kept));
}

/* The kept socket, opened when there is none for this namespace and
 * process; 0 or a negative errno with err filled. */
static int kept_open(char *err, size_t errsize)
{
        struct stat ns;
        if (stat("/proc/thread-self/ns/net", &ns) < 0)
                memset(&ns, 0, sizeof(ns)); /* no /proc: never kept */
        if (kept.nl && ns.st_ino && ns.st_ino == kept_ns && ns.st_dev == kept_ns_dev &&
            kept_pid == getpid())
                return 0;
        kept_close();
        kept.nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
        if (!kept.nl || mnl_socket_bind(kept.nl, 0, MNL_SOCKET_AUTOPID) < 0) {
                int r = -errno;
                if (err)
                        snprintf(err, errsize, "netlink socket: %s", strerror(-r));
                if (kept.nl)
                        mnl_socket_close(kept.nl);
                kept.nl = NULL;
                return r;
        }
        kept.portid = mnl_socket_get_portid(kept.nl);
        int one = 1;
        (void)setsockopt(mnl_socket_get_fd(kept.nl), SOL_NETLINK, NETLINK_CAP_ACK, &one,
                         sizeof(one));
        struct timeval tv = { .tv_sec = 60 }; /* never wait forever on the kernel */
        (void)setsockopt(mnl_socket_get_fd(kept.nl), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        kept_ns = ns.st_ino;
        kept_ns_dev = ns.st_dev;
        kept_pid = getpid();
        return 0;
}

/* The script into one batch sent on kept. Sets the kept names say are
 * new get their elements by id alone: the batch is bound to the names'
 * generation. */
static int apply_once(const char *script, size_t n, char *err, size_t errsize)
{
        struct nlb b;
        struct asked asked = { .c = &kept };
        /* kept names answer at no cost: every declared set may ask */
        struct nfp_kernel k = { .lookup = get_set,
                                .exists = set_exists,
                                .exists_cheap = kept.known.valid,
                                .ctx = &asked };
        proxy_nlb_init(&b);
        int r = batch_msg(&b, NFNL_MSG_BATCH_BEGIN);
        if (r == 0)
                r = proxy_nft_translate_for(script, n, &b, &k, err, errsize);
        else if (err)
                snprintf(err, errsize, "out of memory");
        if (r == 0 && (r = batch_msg(&b, NFNL_MSG_BATCH_END)) < 0 && err)
                snprintf(err, errsize, "out of memory");
        if (r == 0 && kept.known.valid)
                bind_generation(&b, kept.known.genid);
        if (r == 0)
                r = send_batch(&kept, &b, err, errsize);
        if (r == 0)
                known_after(&kept, &b);
        proxy_nlb_release(&b);
        return r;
}

int se_proxy_nft_apply_netlink(const char *script, size_t n, char *err, size_t errsize)
{
        int r;
        if (err && errsize)
                err[0] = 0;
        pthread_mutex_lock(&kept_mu);
        if ((r = kept_open(err, errsize)) < 0) {
                pthread_mutex_unlock(&kept_mu);
                return r;
        }
        r = apply_once(script, n, err, errsize);
        if (r == -ERESTART) { /* another changed the ruleset since the names were read */
                names_clear(&kept.known);
                if (err && errsize)
                        err[0] = 0;
                r = apply_once(script, n, err, errsize);
        }
        /* after a failure answers may still be queued: a new socket next */
        if (r < 0 || kept.seq > UINT32_MAX / 2)
                kept_close();
        pthread_mutex_unlock(&kept_mu);
        return r;
}

int se_proxy_nft_apply(enum se_proxy_nft_how how, const char *script, size_t n, char *why,
                       size_t whysize, char *err, size_t errsize)
{
        if (why && whysize)
                why[0] = 0;
        if (how == SE_PROXY_NFT_NETLINK) {
                char e[512];
                int r = se_proxy_nft_apply_netlink(script, n, e, sizeof(e));
                if (r == 0)
                        return 0;
                /* what nft -f would do with the same text decides */
                pthread_mutex_lock(&why_mu);
                snprintf(last_why, sizeof(last_why), "%s", e);
                pthread_mutex_unlock(&why_mu);
                atomic_fetch_add(&fallbacks, 1);
                if (why)
                        snprintf(why, whysize, "%s", e);
        }
        return proxy_apply_tool(SE_PROXY_NFT, script, n, err, errsize);
}

/* Set elements into NEWSETELEM/DELSETELEM messages, split where a
 * message's element nest would overflow; interval sets as nft sends them. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <stdio.h>
#include <stdlib.h>

#include <libmnl/libmnl.h>

#include <svcenv/alloc.h>

#include "proxy_nftparse.h"

struct elemw { /* an open NEWSETELEM/DELSETELEM message */
        struct nlb *b;
        struct nlmsghdr *nh;
        struct nlattr *list;
        uint16_t type;
        uint8_t fam;
        unsigned line;
        const struct nfp_set *set;
        const char *comment; /* of the next element, NULL: none */
};

static int elem_open(struct nfp_parser *ps, struct elemw *w)
{
        TRY(proxy_nfp_begin(ps, w->b, w->type, w->fam,
                            w->type == NFT_MSG_NEWSETELEM ? NLM_F_CREATE : 0, w->line, &w->nh));
        mnl_attr_put_strz(w->nh, NFTA_SET_ELEM_LIST_TABLE, w->set->table);
        /* The kernel finds a set by name walking the table's sets, by the
         * id of this batch from the newest: for elements added to a new set
         * the id alone (deletes look up names only) */
        if (!(w->set->id && w->set->fresh && w->type == NFT_MSG_NEWSETELEM))
                mnl_attr_put_strz(w->nh, NFTA_SET_ELEM_LIST_SET, w->set->name);
        if (w->set->id)
                mnl_attr_put_u32(w->nh, NFTA_SET_ELEM_LIST_SET_ID, htonl(w->set->id));
        w->list = mnl_attr_nest_start(w->nh, NFTA_SET_ELEM_LIST_ELEMENTS);
        return 0;
}

static void elem_close(struct elemw *w)
{
        if (!w->nh)
                return;
        mnl_attr_nest_end(w->nh, w->list);
        proxy_nlb_end(w->b, w->nh);
        w->nh = NULL;
}

/* one element: key, flags, and data (verdict code + chain, or bytes) */
static int elem_put(struct nfp_parser *ps, struct elemw *w, const uint8_t *key, uint32_t klen,
                    uint32_t flags, bool has_verdict, int32_t code, const char *chain,
                    const uint8_t *data, uint32_t dlen)
{
        if (++ps->elems > NLB_MAX_ELEMS)
                return proxy_nfp_oom(ps, -E2BIG);
        if (w->nh &&
            (size_t)((char *)mnl_nlmsg_get_payload_tail(w->nh) - (char *)w->list) > ELEM_MSG_MAX)
                elem_close(w);
        if (!w->nh)
                TRY(elem_open(ps, w));
        struct nlattr *e = mnl_attr_nest_start(w->nh, NFTA_LIST_ELEM);
        struct nlattr *k = mnl_attr_nest_start(w->nh, NFTA_SET_ELEM_KEY);
        mnl_attr_put(w->nh, NFTA_DATA_VALUE, klen, key);
        mnl_attr_nest_end(w->nh, k);
        if (w->comment) { /* nft's user data: a comment TLV */
                size_t n = strlen(w->comment) + 1;
                uint8_t ud[2 + NAME_MAX_LEN];
                ud[0] = 0; /* NFTNL_UDATA_SET_ELEM_COMMENT */
                ud[1] = (uint8_t)n;
                memcpy(ud + 2, w->comment, n);
                mnl_attr_put(w->nh, NFTA_SET_ELEM_USERDATA, 2 + n, ud);
        }
        if (flags)
                mnl_attr_put_u32(w->nh, NFTA_SET_ELEM_FLAGS, htonl(flags));
        if (has_verdict) {
                struct nlattr *d = mnl_attr_nest_start(w->nh, NFTA_SET_ELEM_DATA);
                struct nlattr *v = mnl_attr_nest_start(w->nh, NFTA_DATA_VERDICT);
                mnl_attr_put_u32(w->nh, NFTA_VERDICT_CODE, htonl((uint32_t)code));
                if (chain)
                        mnl_attr_put_strz(w->nh, NFTA_VERDICT_CHAIN, chain);
                mnl_attr_nest_end(w->nh, v);
                mnl_attr_nest_end(w->nh, d);
        } else if (data) {
                struct nlattr *d = mnl_attr_nest_start(w->nh, NFTA_SET_ELEM_DATA);
                mnl_attr_put(w->nh, NFTA_DATA_VALUE, dlen, data);
                mnl_attr_nest_end(w->nh, d);
        }
        mnl_attr_nest_end(w->nh, e);
        return 0;
}

struct range {
        uint8_t lo[16], hi[16]; /* inclusive */
};

static int range_cmp(const void *a, const void *b)
{
        return memcmp(((const struct range *)a)->lo, ((const struct range *)b)->lo, 16);
}

/* big-endian increment of n bytes; false on overflow */
static bool incr(uint8_t *x, unsigned n)
{
        for (unsigned i = n; i-- > 0;)
                if (++x[i])
                        return true;
        return false;
}

/* Interval elements as nft sends them: sorted, overlaps merged, each range
 * a start and an end-flagged element one past it, and an end-flagged zero
 * first when nothing starts at zero. */
static int put_ranges(struct nfp_parser *ps, struct elemw *w, struct range *r, size_t n,
                      uint32_t len)
{
        qsort(r, n, sizeof(*r), range_cmp);
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
                if (m) {
                        uint8_t after[16];
                        memcpy(after, r[m - 1].hi, 16);
                        bool fits = incr(after + 16 - len, len);
                        if (!fits || memcmp(r[i].lo, after, 16) <= 0) {
                                if (memcmp(r[i].hi, r[m - 1].hi, 16) > 0)
                                        memcpy(r[m - 1].hi, r[i].hi, 16);
                                continue;
                        }
                }
                r[m++] = r[i];
        }
        uint8_t zero[16] = { 0 };
        if (m && memcmp(r[0].lo + 16 - len, zero, len) != 0)
                TRY(elem_put(ps, w, zero, len, NFT_SET_ELEM_INTERVAL_END, false, 0, NULL, NULL, 0));
        for (size_t i = 0; i < m; i++) {
                TRY(elem_put(ps, w, r[i].lo + 16 - len, len, 0, false, 0, NULL, NULL, 0));
                uint8_t end[16];
                memcpy(end, r[i].hi, 16);
                if (incr(end + 16 - len, len))
                        TRY(elem_put(ps, w, end + 16 - len, len, NFT_SET_ELEM_INTERVAL_END, false,
                                     0, NULL, NULL, 0));
        }
        return 0;
}

/* "{ elem, elem, ... }" of set into b. *count: elements sent. */
int proxy_nfp_elements(struct nfp_parser *ps, struct nlb *b, uint16_t type,
                       const struct nfp_set *set, unsigned line, size_t *count)
{
        struct elemw w = { .b = b, .type = type, .fam = set->family, .line = line, .set = set };
        bool interval = set->flags & NFT_SET_INTERVAL;
        bool map = set->flags & NFT_SET_MAP;
        uint32_t klen = proxy_nfp_type_len(&set->key), dlen = proxy_nfp_type_len(&set->data);
        struct range *ranges = NULL;
        size_t nr = 0, cap = 0;
        int r = 0;
        size_t before = ps->elems;
        if (interval && (set->key.n != 1 || map || type != NFT_MSG_NEWSETELEM))
                return proxy_nfp_fail(ps, line, "interval sets of this kind are not supported");
        TRY(proxy_nfp_expect(ps, "{"));
        while (!r && !is(proxy_nfp_peek(ps), "}")) {
                uint8_t key[64], data[64];
                unsigned plen = 0;
                struct nfp_tok first = *proxy_nfp_peek(ps);
                if (at_end(&first)) {
                        r = proxy_nfp_fail(ps, first.line, "unterminated element list");
                        break;
                }
                r = proxy_nfp_concat_value(ps, &set->key, key, interval ? &plen : NULL);
                char comment[NAME_MAX_LEN];
                w.comment = NULL;
                if (!r && is(proxy_nfp_peek(ps), "comment")) {
                        proxy_nfp_next(ps);
                        r = proxy_nfp_name(ps, comment, "comment");
                        if (!r && (interval || strlen(comment) > 127))
                                r = proxy_nfp_fail(ps, first.line, "unsupported element comment");
                        w.comment = comment;
                }
                if (!r && interval) {
                        if (nr == cap) {
                                size_t nc = cap ? cap * 2 : 16;
                                struct range *n2 = se_reallocarray(ranges, nc, sizeof(*n2));
                                if (!n2) {
                                        r = proxy_nfp_oom(ps, -ENOMEM);
                                        break;
                                }
                                ranges = n2;
                                cap = nc;
                        }
                        struct range *g = &ranges[nr++];
                        memset(g, 0, sizeof(*g));
                        memcpy(g->lo + 16 - klen, key, klen);
                        memcpy(g->hi + 16 - klen, key, klen);
                        for (unsigned i = plen; i < klen * 8; i++)
                                g->hi[16 - klen + i / 8] |= (uint8_t)(0x80 >> (i % 8));
                } else if (!r && map && type == NFT_MSG_NEWSETELEM) {
                        char chain[NAME_MAX_LEN];
                        int32_t code = 0;
                        r = proxy_nfp_expect(ps, ":");
                        if (!r && set->verdict)
                                r = proxy_nfp_verdict(ps, &code, chain);
                        else if (!r)
                                r = proxy_nfp_concat_value(ps, &set->data, data, NULL);
                        if (!r)
                                r = elem_put(ps, &w, key, klen, 0, set->verdict, code,
                                             chain[0] && set->verdict ? chain : NULL,
                                             set->verdict ? NULL : data, dlen);
                } else if (!r) {
                        if (map && is(proxy_nfp_peek(ps), ":"))
                                r = proxy_nfp_fail(ps, proxy_nfp_peek(ps)->line,
                                                   "element data in a delete");
                        if (!r)
                                r = elem_put(ps, &w, key, klen, 0, false, 0, NULL, NULL, 0);
                }
                if (!r && is(proxy_nfp_peek(ps), ","))
                        proxy_nfp_next(ps);
                else if (!r && !is(proxy_nfp_peek(ps), "}"))
                        r = proxy_nfp_fail(ps, proxy_nfp_peek(ps)->line,
                                           "expected ',' or '}' in elements, found '%.*s'",
                                           (int)proxy_nfp_peek(ps)->n,
                                           proxy_nfp_peek(ps)->s ? proxy_nfp_peek(ps)->s : "");
        }
        if (!r)
                r = proxy_nfp_expect(ps, "}");
        if (!r && interval)
                r = put_ranges(ps, &w, ranges, nr, klen);
        free(ranges);
        elem_close(&w);
        if (count)
                *count = ps->elems - before;
        return r;
}

/* Set and map declarations ("set|map NAME { type|typeof ...; flags ...;
 * elements = { ... } }") into NEWSET with nft's user data, so that
 * `nft list` prints them as written. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <stdint.h>
#include <stdio.h>

#include <libmnl/libmnl.h>
#include <libnftnl/udata.h>

#include "proxy_nftparse.h"

/* field i of a typeof concatenation: a payload expression, by nft's
 * protocol description and header field numbers */
static bool payload_udata(struct nftnl_udata_buf *u, unsigned i, uint8_t desc, uint8_t field)
{
        struct nftnl_udata *n1 = nftnl_udata_nest_start(u, (uint8_t)i);
        if (!n1 || !nftnl_udata_put_u32(u, 0, EXPR_PAYLOAD))
                return false;
        struct nftnl_udata *n2 = nftnl_udata_nest_start(u, 1);
        bool ok = n2 && nftnl_udata_put_u32(u, 0, desc) && nftnl_udata_put_u32(u, 1, field);
        if (n2)
                nftnl_udata_nest_end(u, n2);
        nftnl_udata_nest_end(u, n1);
        return ok;
}

static int set_udata(struct nfp_parser *ps, const struct nfp_setdecl *d, struct nftnl_udata_buf *u)
{
        bool ok =
                nftnl_udata_put_u32(u, NFTNL_UDATA_SET_KEYBYTEORDER,
                                    d->key.n > 1 ? BO_INVALID : proxy_nfp_byteorder(d->key.f[0].k));
        if (d->map)
                ok = ok && nftnl_udata_put_u32(u, NFTNL_UDATA_SET_DATABYTEORDER,
                                               d->verdict || d->data.n > 1 ?
                                                       BO_INVALID :
                                                       proxy_nfp_byteorder(d->data.f[0].k));
        if (d->automerge)
                ok = ok && nftnl_udata_put_u32(u, NFTNL_UDATA_SET_MERGE_ELEMENTS, 1);
        if (d->typeof_numgen || d->key.n > 1) {
                struct nftnl_udata *n1 = nftnl_udata_nest_start(u, NFTNL_UDATA_SET_KEY_TYPEOF);
                ok = ok && n1 &&
                     nftnl_udata_put_u32(u, 0 /* TYPEOF_EXPR */,
                                         d->typeof_numgen ? EXPR_NUMGEN : EXPR_CONCAT);
                struct nftnl_udata *n2 = nftnl_udata_nest_start(u, 1 /* TYPEOF_DATA */);
                if (d->typeof_numgen)
                        ok = ok && n2 && nftnl_udata_put_u32(u, 0, d->ng_type) &&
                             nftnl_udata_put_u32(u, 1, d->ng_mod) &&
                             nftnl_udata_put_u32(u, 2, d->ng_off);
                if (n2)
                        nftnl_udata_nest_end(u, n2);
                if (n1)
                        nftnl_udata_nest_end(u, n1);
                ok = ok && n2;
        }
        if (d->map) {
                if (d->typeof_verdict || (!d->verdict && d->data.n > 1)) {
                        struct nftnl_udata *n1 =
                                nftnl_udata_nest_start(u, NFTNL_UDATA_SET_DATA_TYPEOF);
                        ok = ok && n1 &&
                             nftnl_udata_put_u32(u, 0, d->verdict ? EXPR_VERDICT : EXPR_CONCAT);
                        struct nftnl_udata *n2 = nftnl_udata_nest_start(u, 1);
                        for (unsigned i = 0; d->typeof_data && n2 && i < d->data.n; i++)
                                ok = ok && payload_udata(u, i, d->data_desc[i], d->data_field[i]);
                        if (n2)
                                nftnl_udata_nest_end(u, n2);
                        if (n1)
                                nftnl_udata_nest_end(u, n1);
                        ok = ok && n2;
                }
                ok = ok && nftnl_udata_put_u32(u, NFTNL_UDATA_SET_DATA_INTERVAL, 0);
        }
        if (d->comment[0])
                ok = ok && nftnl_udata_put_strz(u, NFTNL_UDATA_SET_COMMENT, d->comment);
        return ok ? 0 : proxy_nfp_fail(ps, ps->line, "set user data too long");
}

/* Whether the kernel has no set nm before this batch, so that the batch's
 * NEWSET makes it and the batch's id finds it. Asked from the
 * FRESH_ASK_AFTER-th declaration on: the first answer costs a read of the
 * table's sets, which only a script declaring many sets pays back (each
 * saves the kernel a walk of the table's sets by name), unless the
 * answers are at hand (exists_cheap). */
static bool new_to_kernel(struct nfp_parser *ps, uint8_t fam, const char *table, const char *nm)
{
        if (!ps->exists || (++ps->declared < FRESH_ASK_AFTER && !ps->exists_cheap))
                return false;
        int r = ps->exists(ps->lctx, fam, table, nm);
        if (r < 0)
                ps->exists = NULL;
        return r == 0;
}

/* NEWSET for a declaration; the new entry in *ret */
int proxy_nfp_set_emit(struct nfp_parser *ps, struct nlb *b, uint8_t fam, const char *table,
                       const char *nm, const struct nfp_setdecl *d, bool anonymous, unsigned line,
                       struct nfp_set **ret)
{
        /* one the script declared or read before is no longer as the
         * kernel had it before the batch */
        bool seen = proxy_nfp_set_find(ps, fam, table, nm) != NULL;
        struct nfp_set *s = proxy_nfp_set_add(ps, fam, table, nm);
        if (!s)
                return proxy_nfp_oom(ps, -ENOMEM);
        s->id = ++ps->next_id;
        s->fresh = anonymous;
        for (unsigned i = 0; i < ps->n_gone && !s->fresh; i++)
                s->fresh = ps->gone[i].family == fam && strcmp(ps->gone[i].name, table) == 0;
        if (!s->fresh && !seen)
                s->fresh = new_to_kernel(ps, fam, table, nm);
        s->flags = d->flags;
        s->key = d->key;
        s->data = d->data;
        s->verdict = d->verdict;
        struct nftnl_udata_buf *u = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN);
        if (!u)
                return proxy_nfp_oom(ps, -ENOMEM);
        int r = set_udata(ps, d, u);
        struct nlmsghdr *nh = NULL;
        if (!r)
                r = proxy_nfp_begin(ps, b, NFT_MSG_NEWSET, fam, NLM_F_CREATE, line, &nh);
        if (!r) {
                mnl_attr_put_strz(nh, NFTA_SET_TABLE, table);
                mnl_attr_put_strz(nh, NFTA_SET_NAME, nm);
                mnl_attr_put_u32(nh, NFTA_SET_FLAGS, htonl(d->flags));
                mnl_attr_put_u32(nh, NFTA_SET_KEY_TYPE, htonl(proxy_nfp_type_id(&d->key)));
                mnl_attr_put_u32(nh, NFTA_SET_KEY_LEN, htonl(proxy_nfp_type_len(&d->key)));
                if (d->map) {
                        mnl_attr_put_u32(
                                nh, NFTA_SET_DATA_TYPE,
                                htonl(d->verdict ? NFT_DATA_VERDICT : proxy_nfp_type_id(&d->data)));
                        mnl_attr_put_u32(nh, NFTA_SET_DATA_LEN,
                                         htonl(d->verdict ? 0 : proxy_nfp_type_len(&d->data)));
                }
                if (d->timeout) {
                        uint64_t be = ((uint64_t)htonl((uint32_t)d->timeout) << 32) |
                                      htonl((uint32_t)(d->timeout >> 32));
                        mnl_attr_put_u64(nh, NFTA_SET_TIMEOUT, be);
                }
                mnl_attr_put_u32(nh, NFTA_SET_ID, htonl(s->id));
                if (d->size) {
                        struct nlattr *desc = mnl_attr_nest_start(nh, NFTA_SET_DESC);
                        mnl_attr_put_u32(nh, NFTA_SET_DESC_SIZE, htonl(d->size));
                        mnl_attr_nest_end(nh, desc);
                }
                mnl_attr_put(nh, NFTA_SET_USERDATA, nftnl_udata_buf_len(u),
                             nftnl_udata_buf_data(u));
                proxy_nlb_end(b, nh);
        }
        nftnl_udata_buf_free(u);
        *ret = s;
        return r;
}

/* one header field of typeof data ("ip daddr", "tcp dport") from t and the
 * next token into field n of d */
static int typeof_field(struct nfp_parser *ps, struct nfp_setdecl *d, unsigned n,
                        const struct nfp_tok *t)
{
        struct nfp_tok f = proxy_nfp_next(ps);
        bool saddr = is(&f, "saddr"), sport = is(&f, "sport");
        struct nfp_field *ft = &d->data.f[n];
        if ((is(t, "ip") || is(t, "ip6")) && (saddr || is(&f, "daddr"))) {
                bool v6 = is(t, "ip6");
                *ft = v6 ? (struct nfp_field){ FK_IPV6, 16 } : (struct nfp_field){ FK_IPV4, 4 };
                d->data_desc[n] = v6 ? DESC_IP6 : DESC_IP;
                d->data_field[n] = v6 ? (saddr ? FIELD_IP6_SADDR : FIELD_IP6_DADDR) :
                                        (saddr ? FIELD_IP_SADDR : FIELD_IP_DADDR);
        } else if ((is(t, "tcp") || is(t, "udp") || is(t, "sctp")) && (sport || is(&f, "dport"))) {
                *ft = (struct nfp_field){ FK_SERVICE, 2 };
                d->data_desc[n] = is(t, "tcp") ? DESC_TCP : is(t, "udp") ? DESC_UDP : DESC_SCTP;
                d->data_field[n] = sport ? FIELD_TH_SPORT : FIELD_TH_DPORT;
        } else {
                return proxy_nfp_fail(ps, t->line, "unknown typeof data '%.*s %.*s'", (int)t->n,
                                      t->s ? t->s : "", (int)f.n, f.s ? f.s : "");
        }
        return 0;
}

/* "typeof ... : ip daddr . tcp dport", t the first word after ':' */
static int typeof_data(struct nfp_parser *ps, struct nfp_setdecl *d, struct nfp_tok t)
{
        d->data.n = 0;
        for (;;) {
                if (d->data.n == MAX_FIELDS)
                        return proxy_nfp_fail(ps, t.line, "too many fields");
                TRY(typeof_field(ps, d, d->data.n, &t));
                d->data.n++;
                if (!is(proxy_nfp_peek(ps), "."))
                        break;
                proxy_nfp_next(ps);
                t = proxy_nfp_next(ps);
        }
        if (d->data.n < 2)
                return proxy_nfp_fail(ps, t.line, "typeof data of one field is not supported");
        d->typeof_data = true;
        return 0;
}

/* "type a . b [: c]" / "typeof numgen ... : verdict | fields" */
static int set_type(struct nfp_parser *ps, struct nfp_setdecl *d, bool is_typeof)
{
        struct nfp_tok t;
        d->key.n = 0;
        for (;;) {
                if (d->key.n == MAX_FIELDS)
                        return proxy_nfp_fail(ps, proxy_nfp_peek(ps)->line, "too many fields");
                t = proxy_nfp_next(ps);
                if (is_typeof && is(&t, "numgen") && d->key.n == 0) {
                        struct nfp_tok k = proxy_nfp_next(ps), m = proxy_nfp_next(ps),
                                       nmod = proxy_nfp_next(ps);
                        uint64_t mod;
                        if (!is(&k, "random") && !is(&k, "inc"))
                                return proxy_nfp_fail(ps, k.line, "unknown numgen '%.*s'", (int)k.n,
                                                      k.s ? k.s : "");
                        if (!is(&m, "mod"))
                                return proxy_nfp_fail(ps, m.line, "expected 'mod'");
                        TRY(proxy_nfp_number(ps, &nmod, UINT32_MAX, &mod));
                        d->typeof_numgen = true;
                        d->ng_type = is(&k, "random") ? NFT_NG_RANDOM : NFT_NG_INCREMENTAL;
                        d->ng_mod = (uint32_t)mod;
                        d->key.f[d->key.n++] = (struct nfp_field){ FK_INT, 4 };
                } else if (!is_typeof && proxy_nfp_type_word(&t, &d->key.f[d->key.n])) {
                        d->key.n++;
                } else {
                        return proxy_nfp_fail(ps, t.line, "unknown set %s '%.*s'",
                                              is_typeof ? "typeof expression" : "type", (int)t.n,
                                              t.s ? t.s : "");
                }
                if (!is(proxy_nfp_peek(ps), "."))
                        break;
                if (d->typeof_numgen)
                        return proxy_nfp_fail(ps, proxy_nfp_peek(ps)->line,
                                              "typeof concatenations are not supported");
                proxy_nfp_next(ps);
        }
        if (!is(proxy_nfp_peek(ps), ":"))
                return 0;
        proxy_nfp_next(ps);
        d->map = true;
        d->flags |= NFT_SET_MAP;
        t = proxy_nfp_next(ps);
        if (is(&t, "verdict")) {
                d->verdict = true;
                d->typeof_verdict = is_typeof;
                return 0;
        }
        if (is_typeof)
                return typeof_data(ps, d, t);
        for (;;) {
                if (d->data.n == MAX_FIELDS || !proxy_nfp_type_word(&t, &d->data.f[d->data.n]))
                        return proxy_nfp_fail(ps, t.line, "unknown map data type '%.*s'", (int)t.n,
                                              t.s ? t.s : "");
                d->data.n++;
                if (!is(proxy_nfp_peek(ps), "."))
                        return 0;
                proxy_nfp_next(ps);
                t = proxy_nfp_next(ps);
        }
}

/* "set|map NAME { ... }" after the keyword; block: inside a table block */
int proxy_nfp_set_block(struct nfp_parser *ps, uint8_t fam, const char *table, bool is_map,
                        unsigned line)
{
        char nm[NAME_MAX_LEN];
        struct nfp_setdecl d;
        memset(&d, 0, sizeof(d));
        TRY(proxy_nfp_name(ps, nm, "set name"));
        TRY(proxy_nfp_expect(ps, "{"));
        bool typed = false;
        struct nfp_set *s = NULL;
        for (;;) {
                struct nfp_tok t = proxy_nfp_next(ps);
                if (is(&t, "}"))
                        break;
                if (is(&t, ";"))
                        continue;
                if (s) /* nft allows any order; we write elements last */
                        return proxy_nfp_fail(ps, t.line, "'%.*s' after the elements", (int)t.n,
                                              t.s);
                if (is(&t, "type") || is(&t, "typeof")) {
                        TRY(set_type(ps, &d, is(&t, "typeof")));
                        typed = true;
                } else if (is(&t, "flags")) {
                        for (;;) {
                                struct nfp_tok f = proxy_nfp_next(ps);
                                if (is(&f, "interval"))
                                        d.flags |= NFT_SET_INTERVAL;
                                else if (is(&f, "timeout"))
                                        d.flags |= NFT_SET_TIMEOUT;
                                else if (is(&f, "dynamic"))
                                        d.flags |= NFT_SET_EVAL;
                                else if (is(&f, "constant"))
                                        d.flags |= NFT_SET_CONSTANT;
                                else
                                        return proxy_nfp_fail(ps, f.line, "unknown set flag '%.*s'",
                                                              (int)f.n, f.s ? f.s : "");
                                if (!is(proxy_nfp_peek(ps), ","))
                                        break;
                                proxy_nfp_next(ps);
                        }
                } else if (is(&t, "timeout")) {
                        struct nfp_tok v = proxy_nfp_next(ps);
                        TRY(proxy_nfp_duration(ps, &v, &d.timeout));
                        d.flags |= NFT_SET_TIMEOUT;
                } else if (is(&t, "size")) {
                        struct nfp_tok v = proxy_nfp_next(ps);
                        uint64_t n;
                        TRY(proxy_nfp_number(ps, &v, UINT32_MAX, &n));
                        d.size = (uint32_t)n;
                } else if (is(&t, "auto-merge")) {
                        d.automerge = true;
                } else if (is(&t, "comment")) {
                        TRY(proxy_nfp_name(ps, d.comment, "comment"));
                } else if (is(&t, "elements")) {
                        if (!typed)
                                return proxy_nfp_fail(ps, t.line, "elements before the set's type");
                        TRY(proxy_nfp_expect(ps, "="));
                        TRY(proxy_nfp_set_emit(ps, ps->sb, fam, table, nm, &d, false, line, &s));
                        TRY(proxy_nfp_elements(ps, ps->sb, NFT_MSG_NEWSETELEM, s, t.line, NULL));
                } else {
                        return proxy_nfp_fail(ps, t.line, "unknown set attribute '%.*s'", (int)t.n,
                                              t.s ? t.s : "");
                }
        }
        if (!typed)
                return proxy_nfp_fail(ps, line, "set '%s' has no type", nm);
        for (unsigned i = 0; d.typeof_data && i < d.data.n; i++)
                if ((d.data_desc[i] == DESC_IP && fam != NFPROTO_IPV4) ||
                    (d.data_desc[i] == DESC_IP6 && fam != NFPROTO_IPV6))
                        return proxy_nfp_fail(ps, line, "map '%s': addresses of another family",
                                              nm);
        if (is_map != d.map)
                return proxy_nfp_fail(ps, line, "%s '%s' %s data", is_map ? "map" : "set", nm,
                                      is_map ? "without" : "with");
        if (!s)
                TRY(proxy_nfp_set_emit(ps, ps->sb, fam, table, nm, &d, false, line, &s));
        return 0;
}

/* The left-hand side of a match (payload, meta, ct, fib, numgen, jhash
 * and their concatenations) into the register loads nft would emit, with
 * the l4 protocol match nft adds before a transport header field. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <stdio.h>

#include <libnftnl/expr.h>
#include <libnftnl/rule.h>

#include "proxy_nftparse.h"

struct nftnl_expr *proxy_nfp_expr(struct nfp_rule *ru, const char *kind)
{
        struct nftnl_expr *e = nftnl_expr_alloc(kind);
        if (!e) {
                proxy_nfp_oom(ru->ps, -ENOMEM);
                return NULL;
        }
        nftnl_rule_add_expr(ru->r, e);
        return e;
}

int proxy_nfp_cmp_ex(struct nfp_rule *ru, uint32_t reg, uint32_t op, const void *data, uint32_t len)
{
        EX(ru, "cmp", e);
        nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, reg);
        nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
        nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
        return 0;
}

int proxy_nfp_bitwise_ex(struct nfp_rule *ru, uint32_t reg, const void *mask, const void * xor,
                         uint32_t len)
{
        EX(ru, "bitwise", e);
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, reg);
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, reg);
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, len);
        nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, mask, len);
        nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, xor, len);
        return 0;
}

int proxy_nfp_meta_load(struct nfp_rule *ru, uint32_t key, uint32_t reg)
{
        EX(ru, "meta", e);
        nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
        nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, reg);
        return 0;
}

int proxy_nfp_verdict_ex(struct nfp_rule *ru, int32_t code, const char *chain)
{
        EX(ru, "immediate", e);
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)code);
        if (chain && chain[0])
                nftnl_expr_set_str(e, NFTNL_EXPR_IMM_CHAIN, chain);
        return 0;
}

/* one loadable expression (a field of a concatenation) */
static int xp_parse(struct nfp_rule *ru, struct nfp_load *x, struct nfp_lhs *l, bool allow_hash)
{
        struct nfp_parser *ps = ru->ps;
        struct nfp_tok t = proxy_nfp_next(ps), f = proxy_nfp_next(ps);
        bool v6 = ru->fam == NFPROTO_IPV6;
        memset(x, 0, sizeof(*x));
        if ((is(&t, "ip") && !v6) || (is(&t, "ip6") && v6)) {
                x->k = X_PAYLOAD;
                x->a = NFT_PAYLOAD_NETWORK_HEADER;
                if (is(&f, "saddr") || is(&f, "daddr")) {
                        x->t = v6 ? (struct nfp_field){ FK_IPV6, 16 } :
                                    (struct nfp_field){ FK_IPV4, 4 };
                        x->b = v6 ? (is(&f, "saddr") ? 8 : 24) : (is(&f, "saddr") ? 12 : 16);
                } else if (!v6 && is(&f, "protocol")) {
                        x->t = (struct nfp_field){ FK_PROTO, 1 };
                        x->b = 9;
                } else if (v6 && is(&f, "nexthdr")) {
                        x->t = (struct nfp_field){ FK_PROTO, 1 };
                        x->b = 6;
                } else {
                        return proxy_nfp_fail(ps, f.line, "unknown field '%.*s %.*s'", (int)t.n,
                                              t.s, (int)f.n, f.s ? f.s : "");
                }
                x->c = x->t.len;
        } else if (is(&t, "tcp") || is(&t, "udp") || is(&t, "sctp") || is(&t, "th")) {
                x->k = X_PAYLOAD;
                x->a = NFT_PAYLOAD_TRANSPORT_HEADER;
                x->t = (struct nfp_field){ FK_SERVICE, 2 };
                x->c = 2;
                x->dep = is(&t, "tcp") ? 6 : is(&t, "udp") ? 17 : is(&t, "sctp") ? 132 : 0;
                if (is(&f, "sport"))
                        x->b = 0;
                else if (is(&f, "dport"))
                        x->b = 2;
                else
                        return proxy_nfp_fail(ps, f.line, "unknown field '%.*s %.*s'", (int)t.n,
                                              t.s, (int)f.n, f.s ? f.s : "");
        } else if (is(&t, "meta")) {
                x->k = X_META;
                if (is(&f, "l4proto")) {
                        x->a = NFT_META_L4PROTO;
                        x->t = (struct nfp_field){ FK_PROTO, 1 };
                } else if (is(&f, "mark")) {
                        x->a = NFT_META_MARK;
                        x->t = (struct nfp_field){ FK_MARK, 4 };
                } else {
                        return proxy_nfp_fail(ps, f.line, "unknown meta key '%.*s'", (int)f.n,
                                              f.s ? f.s : "");
                }
        } else if (is(&t, "ct")) {
                x->k = X_CT;
                if (is(&f, "state")) {
                        x->a = NFT_CT_STATE;
                        x->t = (struct nfp_field){ FK_CTSTATE, 4 };
                } else if (is(&f, "status")) {
                        x->a = NFT_CT_STATUS;
                        x->t = (struct nfp_field){ FK_CTSTATUS, 4 };
                } else if (is(&f, "mark")) {
                        x->a = NFT_CT_MARK;
                        x->t = (struct nfp_field){ FK_MARK, 4 };
                } else {
                        return proxy_nfp_fail(ps, f.line, "unknown ct key '%.*s'", (int)f.n,
                                              f.s ? f.s : "");
                }
        } else if (is(&t, "fib")) {
                x->k = X_FIB;
                if (is(&f, "saddr"))
                        x->a = NFTA_FIB_F_SADDR;
                else if (is(&f, "daddr"))
                        x->a = NFTA_FIB_F_DADDR;
                else
                        return proxy_nfp_fail(ps, f.line, "unknown fib input '%.*s'", (int)f.n,
                                              f.s ? f.s : "");
                if (is(proxy_nfp_peek(ps), ".")) {
                        proxy_nfp_next(ps);
                        struct nfp_tok i = proxy_nfp_next(ps);
                        if (!is(&i, "iif"))
                                return proxy_nfp_fail(ps, i.line, "unknown fib input '%.*s'",
                                                      (int)i.n, i.s ? i.s : "");
                        x->a |= NFTA_FIB_F_IIF;
                }
                struct nfp_tok r = proxy_nfp_next(ps);
                if (!is(&r, "type"))
                        return proxy_nfp_fail(ps, r.line,
                                              "fib results other than 'type' are not supported");
                x->b = NFT_FIB_RESULT_ADDRTYPE;
                x->t = (struct nfp_field){ FK_FIBTYPE, 4 };
        } else if (is(&t, "numgen")) {
                struct nfp_tok m = proxy_nfp_next(ps), n = proxy_nfp_next(ps);
                uint64_t mod, off = 0;
                if (!is(&f, "random") && !is(&f, "inc"))
                        return proxy_nfp_fail(ps, f.line, "unknown numgen '%.*s'", (int)f.n,
                                              f.s ? f.s : "");
                if (!is(&m, "mod"))
                        return proxy_nfp_fail(ps, m.line, "expected 'mod'");
                TRY(proxy_nfp_number(ps, &n, UINT32_MAX, &mod));
                if (mod == 0)
                        return proxy_nfp_fail(ps, n.line, "numgen mod 0");
                if (is(proxy_nfp_peek(ps), "offset")) {
                        proxy_nfp_next(ps);
                        struct nfp_tok o = proxy_nfp_next(ps);
                        TRY(proxy_nfp_number(ps, &o, UINT32_MAX, &off));
                }
                x->k = X_NUMGEN;
                x->a = is(&f, "random") ? NFT_NG_RANDOM : NFT_NG_INCREMENTAL;
                x->b = (uint32_t)mod;
                x->c = (uint32_t)off;
                x->t = (struct nfp_field){ FK_INT, 4 };
        } else if (is(&t, "jhash") && allow_hash) {
                /* f is the first token of the input: put it back */
                ps->la = f;
                ps->have = true;
                l->nsrc = 0;
                for (;;) {
                        if (l->nsrc == MAX_FIELDS)
                                return proxy_nfp_fail(ps, t.line, "too many hash inputs");
                        TRY(xp_parse(ru, &l->src[l->nsrc], NULL, false));
                        l->nsrc++;
                        if (!is(proxy_nfp_peek(ps), "."))
                                break;
                        proxy_nfp_next(ps);
                }
                struct nfp_tok m = proxy_nfp_next(ps), n = proxy_nfp_next(ps);
                uint64_t mod, seed = 0, off = 0;
                if (!is(&m, "mod"))
                        return proxy_nfp_fail(ps, m.line, "expected 'mod'");
                TRY(proxy_nfp_number(ps, &n, UINT32_MAX, &mod));
                if (mod == 0)
                        return proxy_nfp_fail(ps, n.line, "jhash mod 0");
                bool seeded = false;
                for (;;) {
                        if (is(proxy_nfp_peek(ps), "seed")) {
                                proxy_nfp_next(ps);
                                struct nfp_tok v = proxy_nfp_next(ps);
                                TRY(proxy_nfp_number(ps, &v, UINT32_MAX, &seed));
                                seeded = true;
                        } else if (is(proxy_nfp_peek(ps), "offset")) {
                                proxy_nfp_next(ps);
                                struct nfp_tok v = proxy_nfp_next(ps);
                                TRY(proxy_nfp_number(ps, &v, UINT32_MAX, &off));
                        } else {
                                break;
                        }
                }
                x->k = X_HASH;
                x->a = (uint32_t)mod;
                x->b = (uint32_t)seed;
                x->c = (uint32_t)off;
                x->d = seeded;
                x->t = (struct nfp_field){ FK_INT, 4 };
        } else {
                return proxy_nfp_fail(ps, t.line, "unknown expression '%.*s'", (int)t.n,
                                      t.s ? t.s : "");
        }
        return 0;
}

int proxy_nfp_lhs_parse(struct nfp_rule *ru, struct nfp_lhs *l)
{
        l->n = 0;
        for (;;) {
                if (l->n == MAX_FIELDS)
                        return proxy_nfp_fail(ru->ps, proxy_nfp_peek(ru->ps)->line,
                                              "too many fields");
                TRY(xp_parse(ru, &l->f[l->n], l, true));
                l->n++;
                if (!is(proxy_nfp_peek(ru->ps), "."))
                        break;
                proxy_nfp_next(ru->ps);
        }
        for (unsigned i = 0; i < l->n; i++)
                if (l->f[i].k == X_HASH && l->n > 1)
                        return proxy_nfp_fail(ru->ps, ru->line, "jhash inside a concatenation");
        return 0;
}

struct nfp_type proxy_nfp_lhs_type(const struct nfp_lhs *l)
{
        struct nfp_type t = { .n = l->n };
        for (unsigned i = 0; i < l->n; i++)
                t.f[i] = l->f[i].t;
        return t;
}

/* the l4 protocol matches fields need, as nft adds them */
int proxy_nfp_l4_deps(struct nfp_rule *ru, const struct nfp_load *f, unsigned n)
{
        for (unsigned i = 0; i < n; i++) {
                if (!f[i].dep || ru->ps->l4 == f[i].dep)
                        continue;
                TRY(proxy_nfp_meta_load(ru, NFT_META_L4PROTO, NFT_REG_1));
                TRY(proxy_nfp_cmp_ex(ru, NFT_REG_1, NFT_CMP_EQ, &f[i].dep, 1));
                ru->ps->l4 = f[i].dep;
        }
        return 0;
}

/* the register of the field at 4-byte offset off from a 16-byte base */
uint32_t proxy_nfp_field_reg(uint32_t base, uint32_t off)
{
        return off == 0 ? base : NFT_REG32_00 + (base - NFT_REG_1) * 4 + off;
}

int proxy_nfp_load_one(struct nfp_rule *ru, const struct nfp_load *x, const struct nfp_lhs *l,
                       uint32_t reg, uint32_t len_override)
{
        switch (x->k) {
        case X_PAYLOAD: {
                EX(ru, "payload", e);
                nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, reg);
                nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, x->a);
                nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, x->b);
                nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len_override ? len_override : x->c);
                return 0;
        }
        case X_META:
                return proxy_nfp_meta_load(ru, x->a, reg);
        case X_CT: {
                EX(ru, "ct", e);
                nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, x->a);
                nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, reg);
                return 0;
        }
        case X_FIB: {
                EX(ru, "fib", e);
                nftnl_expr_set_u32(e, NFTNL_EXPR_FIB_FLAGS, x->a);
                nftnl_expr_set_u32(e, NFTNL_EXPR_FIB_RESULT, x->b);
                nftnl_expr_set_u32(e, NFTNL_EXPR_FIB_DREG, reg);
                return 0;
        }
        case X_NUMGEN: {
                EX(ru, "numgen", e);
                nftnl_expr_set_u32(e, NFTNL_EXPR_NG_DREG, reg);
                nftnl_expr_set_u32(e, NFTNL_EXPR_NG_MODULUS, x->b);
                nftnl_expr_set_u32(e, NFTNL_EXPR_NG_TYPE, x->a);
                if (x->c)
                        nftnl_expr_set_u32(e, NFTNL_EXPR_NG_OFFSET, x->c);
                return 0;
        }
        default: { /* X_HASH: the input into register 2 first */
                uint32_t off = 0, len = 0;
                TRY(proxy_nfp_l4_deps(ru, l->src, l->nsrc));
                for (unsigned i = 0; i < l->nsrc; i++) {
                        TRY(proxy_nfp_load_one(ru, &l->src[i], NULL,
                                               proxy_nfp_field_reg(NFT_REG_2, off), 0));
                        uint32_t w = l->nsrc == 1 ? l->src[i].t.len : pad4(l->src[i].t.len);
                        off += pad4(l->src[i].t.len) / 4;
                        len += w;
                }
                EX(ru, "hash", e);
                nftnl_expr_set_u32(e, NFTNL_EXPR_HASH_SREG, NFT_REG_2);
                nftnl_expr_set_u32(e, NFTNL_EXPR_HASH_DREG, reg);
                nftnl_expr_set_u32(e, NFTNL_EXPR_HASH_LEN, len);
                nftnl_expr_set_u32(e, NFTNL_EXPR_HASH_MODULUS, x->a);
                if (x->d) /* without one the kernel draws a seed (and hides it) */
                        nftnl_expr_set_u32(e, NFTNL_EXPR_HASH_SEED, x->b);
                if (x->c)
                        nftnl_expr_set_u32(e, NFTNL_EXPR_HASH_OFFSET, x->c);
                nftnl_expr_set_u32(e, NFTNL_EXPR_HASH_TYPE, NFT_HASH_JENKINS);
                return 0;
        }
        }
}

/* the whole left-hand side into registers from base (NFT_REG_1) */
int proxy_nfp_load_lhs(struct nfp_rule *ru, const struct nfp_lhs *l, uint32_t base)
{
        TRY(proxy_nfp_l4_deps(ru, l->f, l->n));
        uint32_t off = 0;
        for (unsigned i = 0; i < l->n; i++) {
                TRY(proxy_nfp_load_one(ru, &l->f[i], l, proxy_nfp_field_reg(base, off), 0));
                off += pad4(l->f[i].t.len) / 4;
        }
        return 0;
}

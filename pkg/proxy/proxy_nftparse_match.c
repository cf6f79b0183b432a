/* Matches: LHS [& mask] [op] value | prefix | flags | { set } | @set |
 * vmap; anonymous sets made inline for the rule. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <stdio.h>

#include <libnftnl/expr.h>
#include <libnftnl/rule.h>

#include "proxy_nftparse.h"

/* an anonymous set or map "{ ... }" for a rule, with key type key */
static int anon_set(struct nfp_rule *ru, const struct nfp_type *key, bool map, bool verdict,
                    const struct nfp_type *data, struct nfp_set **ret)
{
        struct nfp_parser *ps = ru->ps;
        struct nfp_setdecl d;
        memset(&d, 0, sizeof(d));
        d.key = *key;
        d.map = map;
        d.verdict = verdict;
        if (data)
                d.data = *data;
        d.flags = NFT_SET_ANONYMOUS | NFT_SET_CONSTANT | (map ? NFT_SET_MAP : 0);
        /* a prefix anywhere makes it an interval set: look ahead for '/' */
        if (!map && key->n == 1 && (key->f[0].k == FK_IPV4 || key->f[0].k == FK_IPV6)) {
                const char *p = ps->p, *q = memchr(p, '}', (size_t)(ps->end - p));
                if (q && memchr(p, '/', (size_t)(q - p)))
                        d.flags |= NFT_SET_INTERVAL;
        }
        /* elements first into a side batch: the set's size comes before them */
        struct nlb side;
        proxy_nlb_init(&side);
        char tname[NAME_MAX_LEN], sname[16];
        snprintf(tname, sizeof(tname), "%s", ru->table);
        snprintf(sname, sizeof(sname), "%s", map ? "__map%d" : "__set%d");
        struct nfp_set tmp = { .family = ru->fam,
                               .table = tname,
                               .name = sname,
                               .id = ps->next_id + 1,
                               .flags = d.flags,
                               .key = d.key,
                               .data = d.data,
                               .verdict = verdict,
                               .fresh = true };
        size_t count = 0;
        ru->depth++;
        int r = proxy_nfp_elements(ps, &side, NFT_MSG_NEWSETELEM, &tmp, ru->line, &count);
        ru->depth--;
        d.size = (uint32_t)count;
        if (!r && count == 0)
                r = proxy_nfp_fail(ps, ru->line, "empty anonymous set");
        if (!r)
                r = proxy_nfp_set_emit(ps, ps->rb, ru->fam, ru->table, tmp.name, &d, true, ru->line,
                                       ret);
        if (!r && (*ret)->id != tmp.id)
                r = proxy_nfp_fail(ps, ru->line, "internal: set id mismatch");
        if (!r && proxy_nlb_append(ps->rb, &side) < 0)
                r = proxy_nfp_oom(ps, -ENOMEM);
        proxy_nlb_release(&side);
        /* anonymous sets are bound to the rule: not looked up again */
        if (*ret)
                (*ret)->name[0] = 0;
        return r;
}

int proxy_nfp_lookup_ex(struct nfp_rule *ru, uint32_t sreg, int dreg, const struct nfp_set *s,
                        const char *nm, bool inv)
{
        EX(ru, "lookup", e);
        nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, sreg);
        if (dreg >= 0)
                nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_DREG, (uint32_t)dreg);
        nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, nm);
        if (s && s->id)
                nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SET_ID, s->id);
        if (inv)
                nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_FLAGS, NFT_LOOKUP_F_INV);
        return 0;
}

/* "@name" or "{ ... }" as the set of a lookup; the name into nm */
int proxy_nfp_set_ref(struct nfp_rule *ru, const struct nfp_type *key, bool map, bool verdict,
                      const struct nfp_type *data, struct nfp_set **s, char nm[NAME_MAX_LEN])
{
        struct nfp_tok *t = proxy_nfp_peek(ru->ps);
        *s = NULL;
        if (is(t, "{")) {
                TRY(anon_set(ru, key, map, verdict, data, s));
                snprintf(nm, NAME_MAX_LEN, "%s", map ? "__map%d" : "__set%d");
                return 0;
        }
        if (t->s && t->s[0] == '@' && t->n > 1 && t->n < NAME_MAX_LEN) {
                struct nfp_tok n = proxy_nfp_next(ru->ps);
                memcpy(nm, n.s + 1, n.n - 1);
                nm[n.n - 1] = 0;
                *s = proxy_nfp_set_find(ru->ps, ru->fam, ru->table, nm);
                return 0;
        }
        return proxy_nfp_fail(ru->ps, t->line, "expected a set, found '%.*s'", (int)t->n,
                              t->s ? t->s : "");
}

static int match(struct nfp_rule *ru, const struct nfp_lhs *l);

/* Whether the "{" just peeked opens a set of one element ("{ V }": no ','
 * or '{' before its '}'). nft -f loads `X OP { V }` as `X OP V` (a
 * compare, a prefix, a flag test, no anonymous set); so do we. */
static bool one_element(const struct nfp_parser *ps)
{
        const char *close = memchr(ps->p, '}', (size_t)(ps->end - ps->p));
        bool any = false;
        for (const char *q = ps->p; close && q < close; q++) {
                if (*q == ',' || *q == '{' || *q == '\n' || *q == '#')
                        return false;
                any |= *q != ' ' && *q != '\t';
        }
        return close && any;
}

/* match() with a one-element set read as its element: then its "}" */
int proxy_nfp_match_one(struct nfp_rule *ru, const struct nfp_lhs *l)
{
        int r = match(ru, l);
        if (r == 0 && ru->one_elem) {
                ru->one_elem = false;
                ru->depth--;
                r = proxy_nfp_expect(ru->ps, "}");
        }
        return r;
}

/* a match: LHS [&mask] [op] RHS, or LHS vmap ... */
static int match(struct nfp_rule *ru, const struct nfp_lhs *l)
{
        struct nfp_parser *ps = ru->ps;
        struct nfp_type kt = proxy_nfp_lhs_type(l);
        struct nfp_tok t = *proxy_nfp_peek(ps);
        char nm[NAME_MAX_LEN];
        struct nfp_set *s;
        if (is(&t, "vmap")) {
                proxy_nfp_next(ps);
                TRY(proxy_nfp_load_lhs(ru, l, NFT_REG_1));
                struct nfp_type none = { 0 };
                TRY(proxy_nfp_set_ref(ru, &kt, true, true, &none, &s, nm));
                return proxy_nfp_lookup_ex(ru, NFT_REG_1, NFT_REG_VERDICT, s, nm, false);
        }
        const struct nfp_load *x = &l->f[0];
        uint8_t mask[16], xor[16] = {
                0
        };
        bool masked = false;
        if (is(&t, "&")) {
                if (l->n != 1)
                        return proxy_nfp_fail(ps, t.line, "a mask on a concatenation");
                proxy_nfp_next(ps);
                struct nfp_tok m = proxy_nfp_next(ps);
                TRY(proxy_nfp_value(ps, &m, x->t, mask, NULL));
                masked = true;
                t = *proxy_nfp_peek(ps);
        }
        uint32_t op = NFT_CMP_EQ;
        bool explicit_op = false;
        if (is(&t, "==") || is(&t, "!=")) {
                op = is(&t, "!=") ? NFT_CMP_NEQ : NFT_CMP_EQ;
                explicit_op = true;
                proxy_nfp_next(ps);
                t = *proxy_nfp_peek(ps);
        }
        if (is(&t, "{") && l->n == 1 && !masked && !ru->one_elem && one_element(ps)) {
                proxy_nfp_next(ps); /* the element is read as the value below */
                ru->depth++;
                ru->one_elem = true;
                t = *proxy_nfp_peek(ps);
        }
        if (is(&t, "{") || (t.s && t.s[0] == '@')) {
                if (masked)
                        return proxy_nfp_fail(ps, t.line, "a mask before a set lookup");
                TRY(proxy_nfp_load_lhs(ru, l, NFT_REG_1));
                TRY(proxy_nfp_set_ref(ru, &kt, false, false, NULL, &s, nm));
                return proxy_nfp_lookup_ex(ru, NFT_REG_1, -1, s, nm, op == NFT_CMP_NEQ);
        }
        if (l->n != 1)
                return proxy_nfp_fail(ps, t.line, "a concatenation compared with a value");
        uint8_t v[16];
        unsigned plen = x->t.len * 8u;
        bool prefixable = x->t.k == FK_IPV4 || x->t.k == FK_IPV6;
        if ((x->t.k == FK_CTSTATE || x->t.k == FK_CTSTATUS) && !explicit_op && !masked) {
                /* a flag test: state in the listed bits */
                uint32_t bits = 0, zero = 0;
                for (;;) {
                        struct nfp_tok w = proxy_nfp_next(ps);
                        uint32_t b;
                        TRY(proxy_nfp_value(ps, &w, x->t, (uint8_t *)&b, NULL));
                        bits |= b;
                        if (!is(proxy_nfp_peek(ps), ","))
                                break;
                        proxy_nfp_next(ps);
                }
                TRY(proxy_nfp_load_lhs(ru, l, NFT_REG_1));
                TRY(proxy_nfp_bitwise_ex(ru, NFT_REG_1, &bits, &zero, 4));
                return proxy_nfp_cmp_ex(ru, NFT_REG_1, NFT_CMP_NEQ, &zero, 4);
        }
        struct nfp_tok vt = proxy_nfp_next(ps);
        TRY(proxy_nfp_value(ps, &vt, x->t, v, prefixable && !masked ? &plen : NULL));
        if (x->t.k == FK_PROTO && x->k == X_META && x->a == NFT_META_L4PROTO && op == NFT_CMP_EQ) {
                TRY(proxy_nfp_load_lhs(ru, l, NFT_REG_1));
                TRY(proxy_nfp_cmp_ex(ru, NFT_REG_1, op, v, 1));
                ps->l4 = v[0];
                return 0;
        }
        if (masked) {
                TRY(proxy_nfp_load_lhs(ru, l, NFT_REG_1));
                TRY(proxy_nfp_bitwise_ex(ru, NFT_REG_1, mask, xor, x->t.len));
                return proxy_nfp_cmp_ex(ru, NFT_REG_1, op, v, x->t.len);
        }
        if (plen < x->t.len * 8u) {
                if (plen == 0)
                        return proxy_nfp_fail(ps, vt.line, "a /0 prefix");
                /* nft loads only the bytes of a whole-byte prefix, else masks */
                bool short_load = x->k == X_PAYLOAD && plen % 8 == 0;
                uint32_t bytes = short_load ? plen / 8 : x->t.len;
                TRY(proxy_nfp_l4_deps(ru, l->f, 1));
                TRY(proxy_nfp_load_one(ru, x, l, NFT_REG_1, short_load ? bytes : 0));
                if (!short_load) {
                        memset(mask, 0, sizeof(mask));
                        for (unsigned i = 0; i < plen; i++)
                                mask[i / 8] |= (uint8_t)(0x80 >> (i % 8));
                        TRY(proxy_nfp_bitwise_ex(ru, NFT_REG_1, mask, xor, bytes));
                }
                return proxy_nfp_cmp_ex(ru, NFT_REG_1, op, v, bytes);
        }
        TRY(proxy_nfp_load_lhs(ru, l, NFT_REG_1));
        return proxy_nfp_cmp_ex(ru, NFT_REG_1, op, v, x->t.len);
}

/* Statements (verdicts, counter, comment, reject, masquerade, dnat/snat,
 * set updates, mark setting, matches) and the rule that holds them. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <stdio.h>

#include <libmnl/libmnl.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/udata.h>

#include "proxy_nftparse.h"

static bool rule_end(struct nfp_rule *ru)
{
        struct nfp_tok *t = proxy_nfp_peek(ru->ps);
        return at_end(t) || is(t, ";") || is(t, "}") || (t->first && ru->depth == 0 && ru->started);
}

/* "meta mark set meta mark | 0x4000" and friends */
static int set_stmt(struct nfp_rule *ru, const struct nfp_load *target)
{
        struct nfp_parser *ps = ru->ps;
        if (target->t.k != FK_MARK)
                return proxy_nfp_fail(ps, ru->line, "only marks can be set");
        struct nfp_tok t = *proxy_nfp_peek(ps);
        if (is(&t, "meta") || is(&t, "ct")) {
                struct nfp_lhs src;
                TRY(proxy_nfp_lhs_parse(ru, &src));
                if (src.n != 1 || src.f[0].t.k != FK_MARK)
                        return proxy_nfp_fail(ps, t.line, "unsupported mark source");
                struct nfp_tok o = proxy_nfp_next(ps), m = proxy_nfp_next(ps);
                uint32_t v, mask, xor;
                TRY(proxy_nfp_value(ps, &m, target->t, (uint8_t *)&v, NULL));
                if (is(&o, "|") || is(&o, "or")) {
                        mask = ~v;
                        xor = v;
                } else if (is(&o, "^") || is(&o, "xor")) {
                        mask = 0xffffffffu;
                        xor = v;
                } else if (is(&o, "&") || is(&o, "and")) {
                        mask = v;
                        xor = 0;
                } else {
                        return proxy_nfp_fail(ps, o.line, "unknown operator '%.*s'", (int)o.n,
                                              o.s ? o.s : "");
                }
                TRY(proxy_nfp_load_one(ru, &src.f[0], &src, NFT_REG_1, 0));
                TRY(proxy_nfp_bitwise_ex(ru, NFT_REG_1, &mask, &xor, 4));
        } else {
                uint32_t v;
                struct nfp_tok vt = proxy_nfp_next(ps);
                TRY(proxy_nfp_value(ps, &vt, target->t, (uint8_t *)&v, NULL));
                EX(ru, "immediate", e);
                nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
                nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, &v, 4);
        }
        if (target->k == X_META) {
                EX(ru, "meta", e);
                nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, target->a);
                nftnl_expr_set_u32(e, NFTNL_EXPR_META_SREG, NFT_REG_1);
        } else {
                EX(ru, "ct", e);
                nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, target->a);
                nftnl_expr_set_u32(e, NFTNL_EXPR_CT_SREG, NFT_REG_1);
        }
        return 0;
}

/* "dnat [ip|ip6] to ADDR[:PORT]" or "dnat [ip [addr . port]] to EXPR
 * map {...}|@m" */
static int nat_stmt(struct nfp_rule *ru, uint32_t type)
{
        struct nfp_parser *ps = ru->ps;
        bool v6 = ru->fam == NFPROTO_IPV6, addr_port = false;
        struct nfp_tok t = proxy_nfp_next(ps);
        if (is(&t, "ip") || is(&t, "ip6")) {
                if (is(&t, "ip6") != v6)
                        return proxy_nfp_fail(ps, t.line, "nat family does not match the table's");
                t = proxy_nfp_next(ps);
                if (is(&t, "addr")) { /* the map gives address . port */
                        TRY(proxy_nfp_expect(ps, "."));
                        TRY(proxy_nfp_expect(ps, "port"));
                        addr_port = true;
                        t = proxy_nfp_next(ps);
                }
        }
        if (!is(&t, "to"))
                return proxy_nfp_fail(ps, t.line, "expected 'to'");
        struct nfp_field at =
                v6 ? (struct nfp_field){ FK_IPV6, 16 } : (struct nfp_field){ FK_IPV4, 4 };
        struct nfp_tok a = *proxy_nfp_peek(ps);
        bool literal = a.s && (a.s[0] == '[' || (a.s[0] >= '0' && a.s[0] <= '9') ||
                               (v6 && memchr(a.s, ':', a.n)));
        uint32_t proto_reg = 0, flags = 0;
        if (literal && addr_port)
                return proxy_nfp_fail(ps, a.line, "'addr . port' needs a map");
        if (literal) {
                proxy_nfp_next(ps);
                char buf[80];
                if (a.n >= sizeof(buf))
                        return proxy_nfp_fail(ps, a.line, "bad address");
                memcpy(buf, a.s, a.n);
                buf[a.n] = 0;
                char *port = NULL, *addr_s = buf;
                if (buf[0] == '[') {
                        char *close = strchr(buf, ']');
                        if (!close || (close[1] && close[1] != ':'))
                                return proxy_nfp_fail(ps, a.line, "bad address '%s'", buf);
                        *close = 0;
                        addr_s = buf + 1;
                        if (close[1] == ':')
                                port = close + 2;
                } else if (!v6) {
                        port = strchr(buf, ':');
                        if (port)
                                *port++ = 0;
                }
                uint8_t addr[16];
                struct nfp_tok at_tok = { addr_s, (uint32_t)strlen(addr_s), a.line, false };
                TRY(proxy_nfp_value(ps, &at_tok, at, addr, NULL));
                EX(ru, "immediate", ia);
                nftnl_expr_set_u32(ia, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
                nftnl_expr_set(ia, NFTNL_EXPR_IMM_DATA, addr, at.len);
                if (port) {
                        uint8_t p[2];
                        struct nfp_tok pt = { port, (uint32_t)strlen(port), a.line, false };
                        TRY(proxy_nfp_value(ps, &pt, (struct nfp_field){ FK_SERVICE, 2 }, p, NULL));
                        EX(ru, "immediate", ip);
                        nftnl_expr_set_u32(ip, NFTNL_EXPR_IMM_DREG, NFT_REG_2);
                        nftnl_expr_set(ip, NFTNL_EXPR_IMM_DATA, p, 2);
                        proto_reg = NFT_REG_2;
                        flags = NAT_PROTO_SPECIFIED;
                }
        } else {
                struct nfp_lhs l;
                TRY(proxy_nfp_lhs_parse(ru, &l));
                struct nfp_tok m = proxy_nfp_next(ps);
                if (!is(&m, "map"))
                        return proxy_nfp_fail(ps, m.line, "expected 'map'");
                struct nfp_type kt = proxy_nfp_lhs_type(&l), dt = { .n = 1, .f = { at } };
                /* the data: an address, or address . port */
                const char *p = ps->p, *q = memchr(p, '}', (size_t)(ps->end - p));
                bool with_port = false;
                if (is(proxy_nfp_peek(ps), "{") && q) { /* "addr . port": a " . " after " : " */
                        const char *colon = memmem(p, (size_t)(q - p), " : ", 3);
                        with_port = colon && memmem(colon, (size_t)(q - colon), " . ", 3);
                }
                struct nfp_set *s = NULL;
                char nm[NAME_MAX_LEN];
                if (!is(proxy_nfp_peek(ps), "{")) {
                        struct nfp_tok r = *proxy_nfp_peek(ps);
                        if (r.s && r.s[0] == '@' && r.n > 1 && r.n < NAME_MAX_LEN) {
                                char tmp[NAME_MAX_LEN];
                                memcpy(tmp, r.s + 1, r.n - 1);
                                tmp[r.n - 1] = 0;
                                TRY(proxy_nfp_set_known(ps, ru->fam, ru->table, tmp, r.line, &s));
                                if (!(s->flags & NFT_SET_MAP) || s->verdict ||
                                    s->data.f[0].k != at.k)
                                        return proxy_nfp_fail(ps, r.line,
                                                              "map '%s' does not give addresses",
                                                              tmp);
                                with_port = s->data.n == 2;
                        }
                }
                if (addr_port && !with_port)
                        return proxy_nfp_fail(ps, m.line,
                                              "'addr . port' with a map of addresses only");
                if (with_port) {
                        dt.n = 2;
                        dt.f[1] = (struct nfp_field){ FK_SERVICE, 2 };
                }
                TRY(proxy_nfp_load_lhs(ru, &l, NFT_REG_1));
                TRY(proxy_nfp_set_ref(ru, &kt, true, false, &dt, &s, nm));
                TRY(proxy_nfp_lookup_ex(ru, NFT_REG_1, NFT_REG_1, s, nm, false));
                if (with_port)
                        proto_reg = proxy_nfp_field_reg(NFT_REG_1, pad4(at.len) / 4);
        }
        EX(ru, "nat", e);
        nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_TYPE, type);
        nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_FAMILY, v6 ? NFPROTO_IPV6 : NFPROTO_IPV4);
        nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_REG_ADDR_MIN, NFT_REG_1);
        if (proto_reg)
                nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_REG_PROTO_MIN, proto_reg);
        if (flags)
                nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_FLAGS, flags);
        return 0;
}

/* "update @set { ip saddr }" / "add @set { ... }" */
static int dynset_stmt(struct nfp_rule *ru, uint32_t op)
{
        struct nfp_parser *ps = ru->ps;
        struct nfp_tok t = proxy_nfp_next(ps);
        if (!t.s || t.s[0] != '@' || t.n < 2 || t.n >= NAME_MAX_LEN)
                return proxy_nfp_fail(ps, t.line, "expected '@set'");
        char nm[NAME_MAX_LEN];
        memcpy(nm, t.s + 1, t.n - 1);
        nm[t.n - 1] = 0;
        TRY(proxy_nfp_expect(ps, "{"));
        ru->depth++;
        struct nfp_lhs l;
        TRY(proxy_nfp_lhs_parse(ru, &l));
        uint64_t timeout = 0;
        if (is(proxy_nfp_peek(ps), "timeout")) {
                proxy_nfp_next(ps);
                struct nfp_tok v = proxy_nfp_next(ps);
                TRY(proxy_nfp_duration(ps, &v, &timeout));
        }
        TRY(proxy_nfp_expect(ps, "}"));
        ru->depth--;
        TRY(proxy_nfp_load_lhs(ru, &l, NFT_REG_1));
        const struct nfp_set *s = proxy_nfp_set_find(ps, ru->fam, ru->table, nm);
        EX(ru, "dynset", e);
        nftnl_expr_set_u32(e, NFTNL_EXPR_DYNSET_SREG_KEY, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_DYNSET_OP, op);
        nftnl_expr_set_str(e, NFTNL_EXPR_DYNSET_SET_NAME, nm);
        if (s && s->id)
                nftnl_expr_set_u32(e, NFTNL_EXPR_DYNSET_SET_ID, s->id);
        if (timeout)
                nftnl_expr_set_u64(e, NFTNL_EXPR_DYNSET_TIMEOUT, timeout);
        return 0;
}

static int statement(struct nfp_rule *ru, char comment[NAME_MAX_LEN])
{
        struct nfp_parser *ps = ru->ps;
        struct nfp_tok t = *proxy_nfp_peek(ps);
        if (is(&t, "accept") || is(&t, "drop") || is(&t, "return") || is(&t, "continue") ||
            is(&t, "jump") || is(&t, "goto")) {
                int32_t code;
                char chain[NAME_MAX_LEN];
                TRY(proxy_nfp_verdict(ps, &code, chain));
                return proxy_nfp_verdict_ex(ru, code, chain);
        }
        if (is(&t, "counter")) {
                proxy_nfp_next(ps);
                EX(ru, "counter", e);
                (void)e;
                return 0;
        }
        if (is(&t, "comment")) {
                proxy_nfp_next(ps);
                return proxy_nfp_name(ps, comment, "comment");
        }
        if (is(&t, "reject")) {
                proxy_nfp_next(ps);
                EX(ru, "reject", e);
                nftnl_expr_set_u32(e, NFTNL_EXPR_REJECT_TYPE, NFT_REJECT_ICMP_UNREACH);
                nftnl_expr_set_u8(e, NFTNL_EXPR_REJECT_CODE, ru->fam == NFPROTO_IPV6 ? 4 : 3);
                return 0;
        }
        if (is(&t, "masquerade")) {
                proxy_nfp_next(ps);
                uint32_t flags = 0;
                for (;;) {
                        struct nfp_tok *f = proxy_nfp_peek(ps);
                        if (is(f, "fully-random"))
                                flags |= NAT_RANDOM_FULLY;
                        else if (is(f, "random"))
                                flags |= NAT_PROTO_RANDOM;
                        else if (is(f, "persistent"))
                                flags |= NAT_PERSISTENT;
                        else if (is(f, ","))
                                ;
                        else
                                break;
                        proxy_nfp_next(ps);
                }
                EX(ru, "masq", e);
                if (flags)
                        nftnl_expr_set_u32(e, NFTNL_EXPR_MASQ_FLAGS, flags);
                return 0;
        }
        if (is(&t, "dnat") || is(&t, "snat")) {
                proxy_nfp_next(ps);
                return nat_stmt(ru, is(&t, "dnat") ? NFT_NAT_DNAT : NFT_NAT_SNAT);
        }
        if (is(&t, "update") || is(&t, "add")) {
                proxy_nfp_next(ps);
                return dynset_stmt(ru, is(&t, "update") ? NFT_DYNSET_OP_UPDATE : NFT_DYNSET_OP_ADD);
        }
        struct nfp_lhs l;
        TRY(proxy_nfp_lhs_parse(ru, &l));
        if (is(proxy_nfp_peek(ps), "set")) {
                proxy_nfp_next(ps);
                if (l.n != 1)
                        return proxy_nfp_fail(ps, t.line, "setting a concatenation");
                return set_stmt(ru, &l.f[0]);
        }
        return proxy_nfp_match_one(ru, &l);
}

/* one rule up to the end of its line (or ';' / '}') into b */
int proxy_nfp_rule(struct nfp_parser *ps, struct nlb *b, uint8_t fam, const char *table,
                   const char *chain, bool insert, unsigned line)
{
        struct nfp_rule ru = { .ps = ps, .fam = fam, .table = table, .line = line };
        char comment[NAME_MAX_LEN] = "";
        ru.r = nftnl_rule_alloc();
        if (!ru.r)
                return proxy_nfp_oom(ps, -ENOMEM);
        ps->l4 = 0;
        int r = 0;
        while (!r && !rule_end(&ru)) {
                r = statement(&ru, comment);
                ru.started = true;
        }
        if (!r && !ru.started)
                r = proxy_nfp_fail(ps, line, "empty rule");
        struct nlmsghdr *nh = NULL;
        if (!r) {
                nftnl_rule_set_u32(ru.r, NFTNL_RULE_FAMILY, fam);
                nftnl_rule_set_str(ru.r, NFTNL_RULE_TABLE, table);
                nftnl_rule_set_str(ru.r, NFTNL_RULE_CHAIN, chain);
                if (comment[0]) {
                        struct nftnl_udata_buf *u = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN);
                        if (!u)
                                r = proxy_nfp_oom(ps, -ENOMEM);
                        else if (!nftnl_udata_put_strz(u, NFTNL_UDATA_RULE_COMMENT, comment))
                                r = proxy_nfp_fail(ps, line, "comment too long");
                        else
                                nftnl_rule_set_data(ru.r, NFTNL_RULE_USERDATA,
                                                    nftnl_udata_buf_data(u),
                                                    nftnl_udata_buf_len(u));
                        nftnl_udata_buf_free(u);
                }
        }
        if (!r)
                r = proxy_nfp_begin(ps, b, NFT_MSG_NEWRULE, fam,
                                    NLM_F_CREATE | (insert ? 0 : NLM_F_APPEND), line, &nh);
        if (!r && nh) {
                nftnl_rule_nlmsg_build_payload(nh, ru.r);
                if (nh->nlmsg_len > NLB_HEADROOM)
                        r = proxy_nfp_fail(ps, line, "rule too large");
                else
                        proxy_nlb_end(b, nh);
        }
        nftnl_rule_free(ru.r);
        return r;
}

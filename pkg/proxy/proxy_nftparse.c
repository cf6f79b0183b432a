/* The nft script our writers emit, translated into nf_tables netlink
 * messages as the nft tool would send them (same expressions, same set
 * user data), so that `nft list table` shows the same text. Only the
 * subset we write is known: anything else is a one-line error naming the
 * line, and the caller runs `nft -f` instead. The nft tool reads the whole
 * ruleset before any change; we read only the sets a script adds elements
 * to without declaring them.
 *
 * This file reads the commands and table blocks and starts each message;
 * the rest of the grammar is in proxy_nftparse_*.c (proxy_nftparse.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <stdio.h>

#include <libmnl/libmnl.h>
#include <libnftnl/udata.h>

#include "proxy_nftparse.h"

int proxy_nfp_begin(struct nfp_parser *ps, struct nlb *b, uint16_t type, uint8_t fam,
                    uint16_t flags, unsigned line, struct nlmsghdr **nh)
{
        *nh = proxy_nlb_begin(b, type, fam, flags, line);
        if (!*nh)
                return proxy_nfp_oom(ps, b->len + NLB_HEADROOM > NLB_MAX_BYTES ? -E2BIG : -ENOMEM);
        return 0;
}

static int simple_msg(struct nfp_parser *ps, struct nlb *b, uint16_t type, uint8_t fam,
                      uint16_t flags, unsigned line, const char *table, uint16_t name_attr,
                      const char *nm)
{
        struct nlmsghdr *nh;
        TRY(proxy_nfp_begin(ps, b, type, fam, flags, line, &nh));
        if (table)
                mnl_attr_put_strz(nh,
                                  type == NFT_MSG_NEWTABLE || type == NFT_MSG_DELTABLE ?
                                          NFTA_TABLE_NAME :
                                          1 /* NFTA_*_TABLE */,
                                  table);
        if (nm)
                mnl_attr_put_strz(nh, name_attr, nm);
        if (type == NFT_MSG_NEWTABLE)
                mnl_attr_put_u32(nh, NFTA_TABLE_FLAGS, 0);
        proxy_nlb_end(b, nh);
        return 0;
}

static int table_block(struct nfp_parser *ps, uint8_t fam, const char *table, unsigned line)
{
        struct nlb chains, sets, rules;
        proxy_nlb_init(&chains);
        proxy_nlb_init(&sets);
        proxy_nlb_init(&rules);
        struct nlb *saved[3] = { ps->cb, ps->sb, ps->rb };
        ps->cb = &chains;
        ps->sb = &sets;
        ps->rb = &rules;
        char comment[NAME_MAX_LEN] = "";
        int r = proxy_nfp_expect(ps, "{");
        while (!r) {
                struct nfp_tok t = proxy_nfp_next(ps);
                if (is(&t, "}"))
                        break;
                if (is(&t, ";"))
                        continue;
                if (at_end(&t))
                        r = proxy_nfp_fail(ps, t.line, "unterminated table %s", table);
                else if (is(&t, "comment"))
                        r = proxy_nfp_name(ps, comment, "comment");
                else if (is(&t, "chain"))
                        r = proxy_nfp_chain_decl(ps, fam, table, true, t.line);
                else if (is(&t, "set") || is(&t, "map"))
                        r = proxy_nfp_set_block(ps, fam, table, is(&t, "map"), t.line);
                else
                        r = proxy_nfp_fail(ps, t.line, "unknown table item '%.*s'", (int)t.n, t.s);
        }
        ps->cb = saved[0];
        ps->sb = saved[1];
        ps->rb = saved[2];
        /* as nft: the table, its chains, its sets with their elements, the rules */
        struct nlmsghdr *nh = NULL;
        if (!r)
                r = proxy_nfp_begin(ps, ps->main, NFT_MSG_NEWTABLE, fam, NLM_F_CREATE, line, &nh);
        if (!r) {
                mnl_attr_put_strz(nh, NFTA_TABLE_NAME, table);
                mnl_attr_put_u32(nh, NFTA_TABLE_FLAGS, 0);
                if (comment[0]) {
                        struct nftnl_udata_buf *u = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN);
                        if (!u || !nftnl_udata_put_strz(u, 0 /* TABLE_COMMENT */, comment))
                                r = proxy_nfp_fail(ps, line, "bad table comment");
                        else
                                mnl_attr_put(nh, NFTA_TABLE_USERDATA, nftnl_udata_buf_len(u),
                                             nftnl_udata_buf_data(u));
                        nftnl_udata_buf_free(u);
                }
                if (!r)
                        proxy_nlb_end(ps->main, nh);
        }
        if (!r && (proxy_nlb_append(ps->main, &chains) < 0 ||
                   proxy_nlb_append(ps->main, &sets) < 0 || proxy_nlb_append(ps->main, &rules) < 0))
                r = proxy_nfp_oom(ps, -ENOMEM);
        proxy_nlb_release(&chains);
        proxy_nlb_release(&sets);
        proxy_nlb_release(&rules);
        return r;
}

/* add|create|insert|delete|flush|destroy ... */
static int command(struct nfp_parser *ps, const struct nfp_tok *verb)
{
        struct nfp_tok what = proxy_nfp_next(ps);
        uint8_t fam = 0;
        char table[NAME_MAX_LEN], nm[NAME_MAX_LEN];
        unsigned line = verb->line;
        bool add = is(verb, "add") || is(verb, "create");
        bool del = is(verb, "delete");
        bool flush = is(verb, "flush");
        uint16_t excl = is(verb, "create") ? NLM_F_EXCL : 0;
        if (is(&what, "ruleset") && flush) {
                proxy_nfp_sets_forget_table(ps, NFPROTO_UNSPEC, NULL);
                return simple_msg(ps, ps->main, NFT_MSG_DELTABLE, NFPROTO_UNSPEC, 0, line, NULL, 0,
                                  NULL);
        }
        TRY(proxy_nfp_family(ps, &fam));
        TRY(proxy_nfp_name(ps, table, "table name"));
        if (is(&what, "table")) {
                if (add && is(proxy_nfp_peek(ps), "{"))
                        return table_block(ps, fam, table, line);
                if (add)
                        return simple_msg(ps, ps->main, NFT_MSG_NEWTABLE, fam, NLM_F_CREATE | excl,
                                          line, table, 0, NULL);
                if (del) {
                        proxy_nfp_sets_forget_table(ps, fam, table);
                        if (ps->n_gone < sizeof(ps->gone) / sizeof(ps->gone[0])) {
                                ps->gone[ps->n_gone].family = fam;
                                memcpy(ps->gone[ps->n_gone++].name, table, NAME_MAX_LEN);
                        }
                        return simple_msg(ps, ps->main, NFT_MSG_DELTABLE, fam, 0, line, table, 0,
                                          NULL);
                }
                if (flush) /* nft: every rule of the table, sets untouched */
                        return simple_msg(ps, ps->main, NFT_MSG_DELRULE, fam, 0, line, table, 0,
                                          NULL);
        } else if (is(&what, "chain")) {
                if (add && !excl)
                        return proxy_nfp_chain_decl(ps, fam, table, false, line);
                TRY(proxy_nfp_name(ps, nm, "chain name"));
                if (del)
                        return simple_msg(ps, ps->main, NFT_MSG_DELCHAIN, fam, 0, line, table,
                                          NFTA_CHAIN_NAME, nm);
                if (flush)
                        return simple_msg(ps, ps->main, NFT_MSG_DELRULE, fam, 0, line, table,
                                          NFTA_RULE_CHAIN, nm);
        } else if (is(&what, "set") || is(&what, "map")) {
                if (add && !excl)
                        return proxy_nfp_set_block(ps, fam, table, is(&what, "map"), line);
                TRY(proxy_nfp_name(ps, nm, "set name"));
                if (del) {
                        proxy_nfp_set_forget(ps, fam, table, nm);
                        return simple_msg(ps, ps->main, NFT_MSG_DELSET, fam, 0, line, table,
                                          NFTA_SET_NAME, nm);
                }
                if (flush)
                        return simple_msg(ps, ps->main, NFT_MSG_DELSETELEM, fam, 0, line, table,
                                          NFTA_SET_ELEM_LIST_SET, nm);
        } else if (is(&what, "element") && (add || del)) {
                struct nfp_set *s;
                TRY(proxy_nfp_name(ps, nm, "set name"));
                TRY(proxy_nfp_set_known(ps, fam, table, nm, line, &s));
                return proxy_nfp_elements(
                        ps, ps->main, add ? NFT_MSG_NEWSETELEM : NFT_MSG_DELSETELEM, s, line, NULL);
        } else if (is(&what, "rule") && (add || is(verb, "insert"))) {
                TRY(proxy_nfp_name(ps, nm, "chain name"));
                return proxy_nfp_rule(ps, ps->main, fam, table, nm, is(verb, "insert"), line);
        }
        return proxy_nfp_fail(ps, line, "unsupported command '%.*s %.*s'", (int)verb->n, verb->s,
                              (int)what.n, what.s ? what.s : "");
}

int proxy_nft_translate(const char *script, size_t n, struct nlb *b, nfp_set_lookup lookup,
                        void *ctx, char *err, size_t errsize)
{
        struct nfp_kernel k = { .lookup = lookup, .ctx = ctx };
        return proxy_nft_translate_for(script, n, b, &k, err, errsize);
}

int proxy_nft_translate_for(const char *script, size_t n, struct nlb *b, const struct nfp_kernel *k,
                            char *err, size_t errsize)
{
        struct nfp_parser ps = { .p = script,
                                 .end = script + n,
                                 .line = 1,
                                 .at_line_start = true,
                                 .errbuf = err,
                                 .errsize = errsize,
                                 .main = b,
                                 .cb = b,
                                 .sb = b,
                                 .rb = b,
                                 .lookup = k->lookup,
                                 .exists = k->exists,
                                 .exists_cheap = k->exists_cheap,
                                 .lctx = k->ctx };
        if (err && errsize)
                err[0] = 0;
        if (memchr(script, 0, n))
                return proxy_nfp_fail(&ps, 1, "NUL byte in the script");
        while (!ps.err) {
                struct nfp_tok t = proxy_nfp_next(&ps);
                if (at_end(&t))
                        break;
                if (is(&t, ";"))
                        continue;
                if (!t.first && !is(&t, ";")) {
                        proxy_nfp_fail(&ps, t.line, "unexpected '%.*s'", (int)t.n, t.s);
                        break;
                }
                if (is(&t, "table")) {
                        uint8_t fam;
                        char table[NAME_MAX_LEN];
                        if (proxy_nfp_family(&ps, &fam) == 0 &&
                            proxy_nfp_name(&ps, table, "table name") == 0)
                                table_block(&ps, fam, table, t.line);
                } else if (is(&t, "add") || is(&t, "create") || is(&t, "insert") ||
                           is(&t, "delete") || is(&t, "flush")) {
                        command(&ps, &t);
                } else {
                        proxy_nfp_fail(&ps, t.line, "unknown command '%.*s'", (int)t.n, t.s);
                }
                if (!ps.err && ps.have == false) {
                        struct nfp_tok *after = proxy_nfp_peek(&ps);
                        if (!at_end(after) && !after->first && !is(after, ";"))
                                proxy_nfp_fail(&ps, after->line, "unexpected '%.*s'", (int)after->n,
                                               after->s);
                }
        }
        proxy_nfp_sets_free(&ps);
        return ps.err;
}

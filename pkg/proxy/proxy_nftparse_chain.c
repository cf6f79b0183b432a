/* Chain declarations: base chain type, hook, priority and policy, the
 * comment, and the rules of a chain block. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <stdio.h>
#include <stdlib.h>

#include <libmnl/libmnl.h>
#include <libnftnl/udata.h>

#include "proxy_nftparse.h"

static int hook_num(const struct nfp_tok *t, uint32_t *h)
{
        static const char *const names[] = { "prerouting", "input", "forward", "output",
                                             "postrouting" };
        for (uint32_t i = 0; i < 5; i++)
                if (is(t, names[i])) {
                        *h = i;
                        return 0;
                }
        return -1;
}

/* "priority dstnat - 10" / "priority -110" */
static int priority(struct nfp_parser *ps, int32_t *prio)
{
        static const struct {
                const char *name;
                int32_t v;
        } named[] = { { "raw", -300 }, { "mangle", -150 }, { "dstnat", -100 },
                      { "filter", 0 }, { "security", 50 }, { "srcnat", 100 } };
        struct nfp_tok t = proxy_nfp_next(ps);
        int64_t v = 0;
        bool found = false;
        for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++)
                if (is(&t, named[i].name)) {
                        v = named[i].v;
                        found = true;
                }
        if (!found) {
                char buf[16];
                if (!t.s || t.n == 0 || t.n >= sizeof(buf))
                        return proxy_nfp_fail(ps, t.line, "bad priority");
                memcpy(buf, t.s, t.n);
                buf[t.n] = 0;
                char *e;
                errno = 0;
                long x = strtol(buf, &e, 10);
                if (errno || *e || x < INT32_MIN || x > INT32_MAX)
                        return proxy_nfp_fail(ps, t.line, "bad priority '%s'", buf);
                *prio = (int32_t)x;
                return 0;
        }
        if (is(proxy_nfp_peek(ps), "+") || is(proxy_nfp_peek(ps), "-")) {
                bool minus = is(proxy_nfp_peek(ps), "-");
                proxy_nfp_next(ps);
                struct nfp_tok n = proxy_nfp_next(ps);
                uint64_t d;
                TRY(proxy_nfp_number(ps, &n, 1000000, &d));
                v += minus ? -(int64_t)d : (int64_t)d;
        }
        *prio = (int32_t)v;
        return 0;
}

/* "chain NAME { ... }" after the keyword (the block optional with add) */
int proxy_nfp_chain_decl(struct nfp_parser *ps, uint8_t fam, const char *table, bool block_required,
                         unsigned line)
{
        char nm[NAME_MAX_LEN], type[16] = "", comment[NAME_MAX_LEN] = "";
        uint32_t hook = 0, policy = NF_ACCEPT;
        int32_t prio = 0;
        bool base = false, has_policy = false;
        TRY(proxy_nfp_name(ps, nm, "chain name"));
        bool block = is(proxy_nfp_peek(ps), "{");
        if (!block && block_required)
                return proxy_nfp_fail(ps, line, "expected '{' after chain %s", nm);
        /* rules follow the chain header; they go to the rules batch */
        struct nlb rules;
        proxy_nlb_init(&rules);
        int r = 0;
        if (block) {
                proxy_nfp_next(ps);
                for (;;) {
                        struct nfp_tok *t = proxy_nfp_peek(ps);
                        if (at_end(t)) {
                                r = proxy_nfp_fail(ps, t->line, "unterminated chain %s", nm);
                                break;
                        }
                        if (is(t, "}")) {
                                proxy_nfp_next(ps);
                                break;
                        }
                        if (is(t, ";")) {
                                proxy_nfp_next(ps);
                                continue;
                        }
                        if (is(t, "type") && t->first) {
                                struct nfp_tok ty = (proxy_nfp_next(ps), proxy_nfp_next(ps)),
                                               hk = proxy_nfp_next(ps), h = proxy_nfp_next(ps),
                                               pr = proxy_nfp_next(ps);
                                if (!is(&ty, "filter") && !is(&ty, "nat") && !is(&ty, "route")) {
                                        r = proxy_nfp_fail(ps, ty.line, "unknown chain type '%.*s'",
                                                           (int)ty.n, ty.s ? ty.s : "");
                                        break;
                                }
                                memcpy(type, ty.s, ty.n);
                                type[ty.n] = 0;
                                if (!is(&hk, "hook") || hook_num(&h, &hook) < 0 ||
                                    !is(&pr, "priority")) {
                                        r = proxy_nfp_fail(ps, hk.line,
                                                           "bad base chain declaration");
                                        break;
                                }
                                r = priority(ps, &prio);
                                if (r)
                                        break;
                                base = true;
                                continue;
                        }
                        if (is(t, "policy")) {
                                proxy_nfp_next(ps);
                                struct nfp_tok p = proxy_nfp_next(ps);
                                if (is(&p, "accept"))
                                        policy = NF_ACCEPT;
                                else if (is(&p, "drop"))
                                        policy = NF_DROP;
                                else {
                                        r = proxy_nfp_fail(ps, p.line, "bad policy");
                                        break;
                                }
                                has_policy = true;
                                continue;
                        }
                        if (is(t, "comment") && t->first) {
                                proxy_nfp_next(ps);
                                r = proxy_nfp_name(ps, comment, "comment");
                                if (r)
                                        break;
                                continue;
                        }
                        r = proxy_nfp_rule(ps, &rules, fam, table, nm, false, t->line);
                        if (r)
                                break;
                }
        }
        struct nlmsghdr *nh = NULL;
        if (!r)
                r = proxy_nfp_begin(ps, ps->cb, NFT_MSG_NEWCHAIN, fam, NLM_F_CREATE, line, &nh);
        if (!r) {
                mnl_attr_put_strz(nh, NFTA_CHAIN_TABLE, table);
                mnl_attr_put_strz(nh, NFTA_CHAIN_NAME, nm);
                if (base) {
                        struct nlattr *h = mnl_attr_nest_start(nh, NFTA_CHAIN_HOOK);
                        mnl_attr_put_u32(nh, NFTA_HOOK_HOOKNUM, htonl(hook));
                        mnl_attr_put_u32(nh, NFTA_HOOK_PRIORITY, htonl((uint32_t)prio));
                        mnl_attr_nest_end(nh, h);
                        mnl_attr_put_u32(nh, NFTA_CHAIN_POLICY, htonl(policy));
                        mnl_attr_put_strz(nh, NFTA_CHAIN_TYPE, type);
                } else if (has_policy) {
                        r = proxy_nfp_fail(ps, line, "policy on a regular chain");
                }
                if (!r && comment[0]) {
                        struct nftnl_udata_buf *u = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN);
                        if (!u || !nftnl_udata_put_strz(u, 0 /* CHAIN_COMMENT */, comment))
                                r = proxy_nfp_fail(ps, line, "bad chain comment");
                        else
                                mnl_attr_put(nh, NFTA_CHAIN_USERDATA, nftnl_udata_buf_len(u),
                                             nftnl_udata_buf_data(u));
                        nftnl_udata_buf_free(u);
                }
                if (!r)
                        proxy_nlb_end(ps->cb, nh);
        }
        if (!r && proxy_nlb_append(ps->rb, &rules) < 0)
                r = proxy_nfp_oom(ps, -ENOMEM);
        proxy_nlb_release(&rules);
        return r;
}

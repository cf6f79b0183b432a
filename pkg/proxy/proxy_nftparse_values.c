/* nft's data types as the kernel and set user data number them, and the
 * values of a script (addresses, ports, protocols, marks, ct and fib
 * words, verdicts) in the kernel's byte order. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <stdio.h>
#include <stdlib.h>

#include "proxy_nftparse.h"

static uint8_t datatype_of(uint8_t k)
{
        switch (k) {
        case FK_IPV4:
                return T_IPADDR;
        case FK_IPV6:
                return T_IP6ADDR;
        case FK_PROTO:
                return T_PROTO;
        case FK_SERVICE:
                return T_SERVICE;
        case FK_MARK:
                return T_MARK;
        default:
                return T_INTEGER;
        }
}

uint8_t proxy_nfp_byteorder(uint8_t k)
{
        return k == FK_IPV4 || k == FK_IPV6 || k == FK_SERVICE || k == FK_PROTO ? BO_BIG : BO_HOST;
}

uint32_t proxy_nfp_type_len(const struct nfp_type *t)
{
        if (t->n == 1)
                return t->f[0].len;
        uint32_t n = 0;
        for (unsigned i = 0; i < t->n; i++)
                n += pad4(t->f[i].len);
        return n;
}

uint32_t proxy_nfp_type_id(const struct nfp_type *t)
{
        uint32_t id = 0;
        for (unsigned i = 0; i < t->n; i++)
                id = (id << 6) | datatype_of(t->f[i].k);
        return id;
}

static bool field_of_datatype(uint32_t id, struct nfp_field *f)
{
        switch (id) {
        case T_IPADDR:
                *f = (struct nfp_field){ FK_IPV4, 4 };
                return true;
        case T_IP6ADDR:
                *f = (struct nfp_field){ FK_IPV6, 16 };
                return true;
        case T_PROTO:
                *f = (struct nfp_field){ FK_PROTO, 1 };
                return true;
        case T_SERVICE:
                *f = (struct nfp_field){ FK_SERVICE, 2 };
                return true;
        case T_MARK:
                *f = (struct nfp_field){ FK_MARK, 4 };
                return true;
        default:
                return false;
        }
}

/* the kernel's description of a key or data into t */
bool proxy_nfp_type_from_kernel(uint32_t id, uint32_t len, struct nfp_type *t)
{
        t->n = 0;
        if (id == T_INTEGER) {
                if (len == 0 || len > 16)
                        return false;
                t->f[0] = (struct nfp_field){ FK_INT, (uint8_t)len };
                t->n = 1;
                return true;
        }
        struct nfp_field rev[MAX_FIELDS];
        unsigned n = 0;
        for (uint32_t x = id; x; x >>= 6) {
                if (n == MAX_FIELDS || !field_of_datatype(x & 0x3f, &rev[n]))
                        return false;
                n++;
        }
        for (unsigned i = 0; i < n; i++)
                t->f[i] = rev[n - 1 - i];
        t->n = n;
        return n > 0 && proxy_nfp_type_len(t) == len;
}

bool proxy_nfp_type_word(const struct nfp_tok *t, struct nfp_field *f)
{
        if (is(t, "ipv4_addr"))
                *f = (struct nfp_field){ FK_IPV4, 4 };
        else if (is(t, "ipv6_addr"))
                *f = (struct nfp_field){ FK_IPV6, 16 };
        else if (is(t, "inet_proto"))
                *f = (struct nfp_field){ FK_PROTO, 1 };
        else if (is(t, "inet_service"))
                *f = (struct nfp_field){ FK_SERVICE, 2 };
        else if (is(t, "mark"))
                *f = (struct nfp_field){ FK_MARK, 4 };
        else
                return false;
        return true;
}

/* One value of field type f from t into out (f.len bytes, the kernel's byte
 * order). *plen: the prefix length when t is "ip/len" and plen is not NULL
 * (else a prefix is an error); the full width otherwise. */
int proxy_nfp_value(struct nfp_parser *ps, const struct nfp_tok *t, struct nfp_field f,
                    uint8_t *out, unsigned *plen)
{
        char buf[64];
        if (!t->s || t->n == 0 || t->n >= sizeof(buf) || special(t->s[0]))
                return proxy_nfp_fail(ps, t->line, "expected a value, found '%.*s'", (int)t->n,
                                      t->s ? t->s : "");
        memcpy(buf, t->s, t->n);
        buf[t->n] = 0;
        if (plen)
                *plen = f.len * 8u;
        uint64_t v = 0;
        switch (f.k) {
        case FK_IPV4:
        case FK_IPV6: {
                char *slash = strchr(buf, '/');
                if (slash) {
                        uint64_t l;
                        struct nfp_tok lt = { slash + 1, (uint32_t)strlen(slash + 1), t->line,
                                              false };
                        if (!plen)
                                return proxy_nfp_fail(ps, t->line,
                                                      "a prefix is not allowed here: '%s'", buf);
                        *slash = 0;
                        TRY(proxy_nfp_number(ps, &lt, f.len * 8u, &l));
                        *plen = (unsigned)l;
                }
                if (inet_pton(f.k == FK_IPV4 ? AF_INET : AF_INET6, buf, out) != 1)
                        return proxy_nfp_fail(ps, t->line, "bad address '%.*s'", (int)t->n, t->s);
                if (plen) /* nft rejects host bits set in a prefix */
                        for (unsigned i = *plen; i < f.len * 8u; i++)
                                if (out[i / 8] & (0x80 >> (i % 8)))
                                        return proxy_nfp_fail(ps, t->line,
                                                              "host bits set in '%.*s'", (int)t->n,
                                                              t->s);
                return 0;
        }
        case FK_PROTO:
                if (strcmp(buf, "tcp") == 0)
                        v = 6;
                else if (strcmp(buf, "udp") == 0)
                        v = 17;
                else if (strcmp(buf, "sctp") == 0)
                        v = 132;
                else if (strcmp(buf, "icmp") == 0)
                        v = 1;
                else if (strcmp(buf, "icmpv6") == 0)
                        v = 58;
                else
                        TRY(proxy_nfp_number(ps, t, 255, &v));
                out[0] = (uint8_t)v;
                return 0;
        case FK_SERVICE:
                TRY(proxy_nfp_number(ps, t, 65535, &v));
                out[0] = (uint8_t)(v >> 8);
                out[1] = (uint8_t)v;
                return 0;
        case FK_CTSTATE: {
                static const char *const names[] = { "invalid", "established", "related", "new",
                                                     "untracked" };
                static const uint32_t bits[] = { 1, 2, 4, 8, 64 };
                for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++)
                        if (strcmp(buf, names[i]) == 0)
                                v = bits[i];
                if (!v)
                        return proxy_nfp_fail(ps, t->line, "unknown ct state '%s'", buf);
                break;
        }
        case FK_CTSTATUS: { /* the IPS_* bits nft names */
                static const char *const names[] = { "expected",  "seen-reply", "assured",
                                                     "confirmed", "snat",       "dnat",
                                                     "dying" };
                static const uint32_t bits[] = { 1, 2, 4, 8, 16, 32, 512 };
                for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++)
                        if (strcmp(buf, names[i]) == 0)
                                v = bits[i];
                if (!v)
                        return proxy_nfp_fail(ps, t->line, "unknown ct status '%s'", buf);
                break;
        }
        case FK_FIBTYPE: {
                static const char *const names[] = { "unspec",    "unicast",     "local",
                                                     "broadcast", "anycast",     "multicast",
                                                     "blackhole", "unreachable", "prohibit" };
                bool found = false;
                for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                        if (strcmp(buf, names[i]) == 0) {
                                v = i;
                                found = true;
                        }
                if (!found)
                        return proxy_nfp_fail(ps, t->line, "unknown address type '%s'", buf);
                break;
        }
        default:
                TRY(proxy_nfp_number(ps, t, f.len >= 8 ? UINT64_MAX : (1ull << (f.len * 8)) - 1,
                                     &v));
                break;
        }
        /* host byte order (little endian here: nft writes host order too) */
        memset(out, 0, f.len);
        for (unsigned i = 0; i < f.len && i < 8; i++)
                out[i] = (uint8_t)(v >> (8 * i));
        if (f.len > 8)
                return proxy_nfp_fail(ps, t->line, "integer too wide");
        return 0;
}

/* a verdict: accept, drop, return, continue, jump X, goto X */
int proxy_nfp_verdict(struct nfp_parser *ps, int32_t *code, char chain[NAME_MAX_LEN])
{
        struct nfp_tok t = proxy_nfp_next(ps);
        chain[0] = 0;
        if (is(&t, "accept"))
                *code = NF_ACCEPT;
        else if (is(&t, "drop"))
                *code = NF_DROP;
        else if (is(&t, "return"))
                *code = NFT_RETURN;
        else if (is(&t, "continue"))
                *code = NFT_CONTINUE;
        else if (is(&t, "jump") || is(&t, "goto")) {
                *code = is(&t, "jump") ? NFT_JUMP : NFT_GOTO;
                return proxy_nfp_name(ps, chain, "chain");
        } else
                return proxy_nfp_fail(ps, t.line, "expected a verdict, found '%.*s'", (int)t.n,
                                      t.s ? t.s : "");
        return 0;
}

/* a concatenation of values of type t into out (padded); *plen for one
 * field with prefixes allowed */
int proxy_nfp_concat_value(struct nfp_parser *ps, const struct nfp_type *t, uint8_t *out,
                           unsigned *plen)
{
        uint32_t off = 0;
        memset(out, 0, proxy_nfp_type_len(t));
        for (unsigned i = 0; i < t->n; i++) {
                if (i)
                        TRY(proxy_nfp_expect(ps, "."));
                struct nfp_tok v = proxy_nfp_next(ps);
                TRY(proxy_nfp_value(ps, &v, t->f[i], out + off, t->n == 1 ? plen : NULL));
                off += t->n == 1 ? t->f[i].len : pad4(t->f[i].len);
        }
        return 0;
}

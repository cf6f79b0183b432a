/* The nft script our writers emit, translated into nf_tables netlink
 * messages as the nft tool would send them (same expressions, same set
 * user data), so that `nft list table` shows the same text. Only the
 * subset we write is known: anything else is a one-line error naming the
 * line, and the caller runs `nft -f` instead. The nft tool reads the whole
 * ruleset before any change; we read only the sets a script adds elements
 * to without declaring them. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libmnl/libmnl.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/udata.h>

#include <svcenv/alloc.h>

#include "proxy_nlbatch.h"

/* linux/netfilter/nf_nat.h clashes with netinet/in.h */
#define NAT_PROTO_SPECIFIED 0x02
#define NAT_PROTO_RANDOM    0x04
#define NAT_PERSISTENT      0x08
#define NAT_RANDOM_FULLY    0x10

#define NAME_MAX_LEN 256 /* NFT_NAME_MAXLEN, with the NUL */
#define MAX_FIELDS   8
#define ELEM_MSG_MAX (60u << 10) /* element bytes per message (u16 nest) */

/* nft's data types (datatype.h) and byte orders, as set user data has them */
enum { T_INTEGER = 4, T_IPADDR = 7, T_IP6ADDR = 8, T_PROTO = 12, T_SERVICE = 13, T_MARK = 19 };
enum { BO_INVALID = 0, BO_HOST = 1, BO_BIG = 2 };
/* nft's expression kinds in typeof user data */
enum { EXPR_VERDICT = 1, EXPR_PAYLOAD = 7, EXPR_CONCAT = 13, EXPR_NUMGEN = 23 };
/* nft's protocol descriptions (proto.h) and their header fields, as typeof
 * user data names a payload expression */
enum { DESC_UDP = 6, DESC_TCP = 8, DESC_SCTP = 10, DESC_IP = 12, DESC_IP6 = 13 };
enum { FIELD_IP_SADDR = 11, FIELD_IP_DADDR = 12, FIELD_IP6_SADDR = 8, FIELD_IP6_DADDR = 9 };
enum { FIELD_TH_SPORT = 1, FIELD_TH_DPORT = 2 };

enum fk {
        FK_IPV4,
        FK_IPV6,
        FK_PROTO,
        FK_SERVICE,
        FK_MARK,
        FK_INT,
        FK_CTSTATE,
        FK_CTSTATUS,
        FK_FIBTYPE
};

struct ft {
        uint8_t k, len; /* kind, bytes */
};

struct ktype {
        struct ft f[MAX_FIELDS];
        unsigned n;
};

/* a set the script declared or the kernel described */
struct setdef {
        struct setdef *next;
        uint8_t family;
        char *table, *name;
        uint32_t id; /* 0: not made by this script */
        uint32_t flags;
        struct ktype key, data;
        bool verdict; /* a verdict map */
        bool fresh; /* made by this script, not there before */
};

struct tok {
        const char *s; /* NULL at the end */
        uint32_t n;
        unsigned line;
        bool first; /* first on its line */
};

/* a loadable expression (one field of a concatenation) */
enum xk { X_PAYLOAD, X_META, X_CT, X_FIB, X_NUMGEN, X_HASH };
struct xp {
        uint8_t k, dep; /* dep: the l4 protocol the field needs matched */
        struct ft t;
        uint32_t a, b, c, d;
};
struct lhs {
        struct xp f[MAX_FIELDS];
        unsigned n;
        struct xp src[MAX_FIELDS]; /* a hash's input */
        unsigned nsrc;
};

struct ps {
        const char *p, *end;
        unsigned line;
        bool at_line_start;
        struct tok la;
        bool have;
        int err;
        char *errbuf;
        size_t errsize;
        struct nlb *main, *cb, *sb, *rb; /* chains, sets, rules go here */
        nfp_set_lookup lookup;
        void *lctx;
        struct setdef **buckets;
        size_t nbuckets, nsets;
        uint32_t next_id;
        uint8_t l4; /* the rule's matched l4 protocol */
        size_t elems; /* elements of the current set */
        /* tables this script deleted: the sets it declares in them are new */
        struct {
                uint8_t family;
                char name[NAME_MAX_LEN];
        } gone[4];
        unsigned n_gone;
};

/* ---- errors ---- */

static int fail(struct ps *ps, unsigned line, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int fail(struct ps *ps, unsigned line, const char *fmt, ...)
{
        if (ps->err)
                return ps->err;
        ps->err = -EINVAL;
        if (ps->errbuf && ps->errsize) {
                int k = snprintf(ps->errbuf, ps->errsize, "line %u: ", line);
                va_list ap;
                va_start(ap, fmt);
                if (k >= 0 && (size_t)k < ps->errsize)
                        vsnprintf(ps->errbuf + k, ps->errsize - (size_t)k, fmt, ap);
                va_end(ap);
        }
        return ps->err;
}

static int oom(struct ps *ps, int e)
{
        if (!ps->err) {
                ps->err = e;
                if (ps->errbuf && ps->errsize)
                        snprintf(ps->errbuf, ps->errsize, "line %u: %s", ps->line,
                                 e == -E2BIG ? "script too large" : "out of memory");
        }
        return ps->err;
}

#define TRY(x)      \
 do {               \
  int try_r_ = (x); \
  if (try_r_ < 0)   \
   return try_r_;   \
 } while (0)

/* ---- tokens ---- */

static bool special(char c)
{
        return c == '{' || c == '}' || c == ';' || c == ',';
}

static void lex(struct ps *ps, struct tok *t)
{
        bool nl = ps->at_line_start;
        for (;;) {
                while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\r'))
                        ps->p++;
                if (ps->p < ps->end && *ps->p == '#')
                        while (ps->p < ps->end && *ps->p != '\n')
                                ps->p++;
                if (ps->p < ps->end && *ps->p == '\n') {
                        ps->p++;
                        ps->line++;
                        nl = true;
                        continue;
                }
                break;
        }
        ps->at_line_start = false;
        t->line = ps->line;
        t->first = nl;
        t->s = ps->p < ps->end ? ps->p : NULL;
        t->n = 0;
        if (!t->s)
                return;
        const char *q = ps->p;
        if (special(*q)) {
                q++;
        } else if (*q == '"') {
                q++;
                while (q < ps->end && *q != '"' && *q != '\n')
                        q++;
                if (q < ps->end && *q == '"')
                        q++;
        } else {
                while (q < ps->end && !special(*q) && *q != ' ' && *q != '\t' && *q != '\n' &&
                       *q != '\r' && *q != '"')
                        q++;
        }
        t->n = (uint32_t)(q - ps->p);
        ps->p = q;
}

static struct tok *peek(struct ps *ps)
{
        if (!ps->have) {
                lex(ps, &ps->la);
                ps->have = true;
        }
        return &ps->la;
}

static struct tok next(struct ps *ps)
{
        struct tok t = *peek(ps);
        ps->have = false;
        return t;
}

static bool is(const struct tok *t, const char *w)
{
        size_t n = strlen(w);
        return t->s && t->n == n && memcmp(t->s, w, n) == 0;
}

static bool at_end(const struct tok *t)
{
        return !t->s;
}

static int expect(struct ps *ps, const char *w)
{
        struct tok t = next(ps);
        if (!is(&t, w))
                return fail(ps, t.line, "expected '%s', found '%.*s'", w, (int)t.n, t.s ? t.s : "");
        return 0;
}

/* a name token into out (NUL-terminated); strings lose their quotes */
static int name(struct ps *ps, char out[NAME_MAX_LEN], const char *what)
{
        struct tok t = next(ps);
        const char *s = t.s;
        size_t n = t.n;
        if (n >= 2 && s[0] == '"' && s[n - 1] == '"') {
                s++;
                n -= 2;
        }
        if (!s || n == 0 || special(s[0]) || n >= NAME_MAX_LEN)
                return fail(ps, t.line, "bad %s '%.*s'", what, (int)t.n, t.s ? t.s : "");
        memcpy(out, s, n);
        out[n] = 0;
        return 0;
}

static int family(struct ps *ps, uint8_t *fam)
{
        struct tok t = next(ps);
        if (is(&t, "ip"))
                *fam = NFPROTO_IPV4;
        else if (is(&t, "ip6"))
                *fam = NFPROTO_IPV6;
        else if (is(&t, "inet"))
                *fam = NFPROTO_INET;
        else
                return fail(ps, t.line, "unknown family '%.*s'", (int)t.n, t.s ? t.s : "");
        return 0;
}

static int number(struct ps *ps, const struct tok *t, uint64_t max, uint64_t *v)
{
        char buf[32];
        if (!t->s || t->n == 0 || t->n >= sizeof(buf))
                return fail(ps, t->line, "expected a number, found '%.*s'", (int)t->n,
                            t->s ? t->s : "");
        memcpy(buf, t->s, t->n);
        buf[t->n] = 0;
        char *e = NULL;
        errno = 0;
        unsigned long long x = strtoull(buf, &e, 0);
        if (errno || !e || *e || buf[0] == '-' || x > max)
                return fail(ps, t->line, "bad number '%s'", buf);
        *v = x;
        return 0;
}

/* "600s", "10m", "1h", "2d", "500ms" in milliseconds */
static int duration(struct ps *ps, const struct tok *t, uint64_t *ms)
{
        char buf[32];
        if (!t->s || t->n == 0 || t->n >= sizeof(buf))
                return fail(ps, t->line, "expected a duration");
        memcpy(buf, t->s, t->n);
        buf[t->n] = 0;
        char *e = NULL;
        errno = 0;
        unsigned long long x = strtoull(buf, &e, 10);
        uint64_t unit = 0;
        if (e && strcmp(e, "ms") == 0)
                unit = 1;
        else if (e && strcmp(e, "s") == 0)
                unit = 1000;
        else if (e && strcmp(e, "m") == 0)
                unit = 60000;
        else if (e && strcmp(e, "h") == 0)
                unit = 3600000;
        else if (e && strcmp(e, "d") == 0)
                unit = 86400000;
        if (errno || e == buf || !unit || x > UINT64_MAX / 86400000)
                return fail(ps, t->line, "bad duration '%s'", buf);
        *ms = x * unit;
        return 0;
}

/* ---- known sets ---- */

static size_t set_hash(uint8_t fam, const char *table, const char *nm)
{
        size_t h = 1469598103934665603ull ^ fam;
        for (const char *p = table; *p; p++)
                h = (h ^ (unsigned char)*p) * 1099511628211ull;
        h = (h ^ 0xff) * 1099511628211ull;
        for (const char *p = nm; *p; p++)
                h = (h ^ (unsigned char)*p) * 1099511628211ull;
        return h;
}

static struct setdef *set_find(struct ps *ps, uint8_t fam, const char *table, const char *nm)
{
        if (!ps->nbuckets)
                return NULL;
        for (struct setdef *s = ps->buckets[set_hash(fam, table, nm) & (ps->nbuckets - 1)]; s;
             s = s->next)
                if (s->family == fam && strcmp(s->table, table) == 0 && strcmp(s->name, nm) == 0)
                        return s;
        return NULL;
}

static void set_forget(struct ps *ps, uint8_t fam, const char *table, const char *nm)
{
        if (!ps->nbuckets)
                return;
        for (struct setdef **pp = &ps->buckets[set_hash(fam, table, nm) & (ps->nbuckets - 1)]; *pp;
             pp = &(*pp)->next) {
                struct setdef *s = *pp;
                if (s->family == fam && (!table || strcmp(s->table, table) == 0) &&
                    (!nm || strcmp(s->name, nm) == 0)) {
                        *pp = s->next;
                        free(s->table);
                        free(s->name);
                        free(s);
                        ps->nsets--;
                        return;
                }
        }
}

/* a new (or replaced) entry; NULL when out of memory */
static struct setdef *set_add(struct ps *ps, uint8_t fam, const char *table, const char *nm)
{
        set_forget(ps, fam, table, nm);
        if (ps->nsets + 1 > ps->nbuckets) {
                size_t nb = ps->nbuckets ? ps->nbuckets * 2 : 256;
                struct setdef **b = se_calloc(nb, sizeof(*b));
                if (!b)
                        return NULL;
                for (size_t i = 0; i < ps->nbuckets; i++)
                        for (struct setdef *s = ps->buckets[i], *n; s; s = n) {
                                n = s->next;
                                size_t h = set_hash(s->family, s->table, s->name) & (nb - 1);
                                s->next = b[h];
                                b[h] = s;
                        }
                free(ps->buckets);
                ps->buckets = b;
                ps->nbuckets = nb;
        }
        struct setdef *s = se_calloc(1, sizeof(*s));
        if (!s || !(s->table = se_strdup(table)) || !(s->name = se_strdup(nm))) {
                if (s)
                        free(s->table);
                free(s);
                return NULL;
        }
        s->family = fam;
        size_t h = set_hash(fam, table, nm) & (ps->nbuckets - 1);
        s->next = ps->buckets[h];
        ps->buckets[h] = s;
        ps->nsets++;
        return s;
}

static void sets_free(struct ps *ps)
{
        for (size_t i = 0; i < ps->nbuckets; i++)
                for (struct setdef *s = ps->buckets[i], *n; s; s = n) {
                        n = s->next;
                        free(s->table);
                        free(s->name);
                        free(s);
                }
        free(ps->buckets);
}

/* a table went away: so did its sets */
static void sets_forget_table(struct ps *ps, uint8_t fam, const char *table)
{
        for (size_t i = 0; i < ps->nbuckets; i++)
                for (struct setdef **pp = &ps->buckets[i]; *pp;) {
                        struct setdef *s = *pp;
                        if ((fam == NFPROTO_UNSPEC || s->family == fam) &&
                            (!table || strcmp(s->table, table) == 0)) {
                                *pp = s->next;
                                free(s->table);
                                free(s->name);
                                free(s);
                                ps->nsets--;
                        } else {
                                pp = &s->next;
                        }
                }
}

/* ---- types ---- */

static uint8_t type_id(uint8_t k)
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

static uint8_t byteorder(uint8_t k)
{
        return k == FK_IPV4 || k == FK_IPV6 || k == FK_SERVICE || k == FK_PROTO ? BO_BIG : BO_HOST;
}

static uint32_t pad4(uint32_t n)
{
        return (n + 3) & ~3u;
}

static uint32_t ktype_len(const struct ktype *t)
{
        if (t->n == 1)
                return t->f[0].len;
        uint32_t n = 0;
        for (unsigned i = 0; i < t->n; i++)
                n += pad4(t->f[i].len);
        return n;
}

static uint32_t ktype_id(const struct ktype *t)
{
        uint32_t id = 0;
        for (unsigned i = 0; i < t->n; i++)
                id = (id << 6) | type_id(t->f[i].k);
        return id;
}

static bool ft_of_id(uint32_t id, struct ft *f)
{
        switch (id) {
        case T_IPADDR:
                *f = (struct ft){ FK_IPV4, 4 };
                return true;
        case T_IP6ADDR:
                *f = (struct ft){ FK_IPV6, 16 };
                return true;
        case T_PROTO:
                *f = (struct ft){ FK_PROTO, 1 };
                return true;
        case T_SERVICE:
                *f = (struct ft){ FK_SERVICE, 2 };
                return true;
        case T_MARK:
                *f = (struct ft){ FK_MARK, 4 };
                return true;
        default:
                return false;
        }
}

/* the kernel's description of a key or data into t */
static bool ktype_from_kernel(uint32_t id, uint32_t len, struct ktype *t)
{
        t->n = 0;
        if (id == T_INTEGER) {
                if (len == 0 || len > 16)
                        return false;
                t->f[0] = (struct ft){ FK_INT, (uint8_t)len };
                t->n = 1;
                return true;
        }
        struct ft rev[MAX_FIELDS];
        unsigned n = 0;
        for (uint32_t x = id; x; x >>= 6) {
                if (n == MAX_FIELDS || !ft_of_id(x & 0x3f, &rev[n]))
                        return false;
                n++;
        }
        for (unsigned i = 0; i < n; i++)
                t->f[i] = rev[n - 1 - i];
        t->n = n;
        return n > 0 && ktype_len(t) == len;
}

static bool type_word(const struct tok *t, struct ft *f)
{
        if (is(t, "ipv4_addr"))
                *f = (struct ft){ FK_IPV4, 4 };
        else if (is(t, "ipv6_addr"))
                *f = (struct ft){ FK_IPV6, 16 };
        else if (is(t, "inet_proto"))
                *f = (struct ft){ FK_PROTO, 1 };
        else if (is(t, "inet_service"))
                *f = (struct ft){ FK_SERVICE, 2 };
        else if (is(t, "mark"))
                *f = (struct ft){ FK_MARK, 4 };
        else
                return false;
        return true;
}

/* ---- values ---- */

/* One value of field type f from t into out (f.len bytes, the kernel's byte
 * order). *plen: the prefix length when t is "ip/len" and plen is not NULL
 * (else a prefix is an error); the full width otherwise. */
static int value(struct ps *ps, const struct tok *t, struct ft f, uint8_t *out, unsigned *plen)
{
        char buf[64];
        if (!t->s || t->n == 0 || t->n >= sizeof(buf) || special(t->s[0]))
                return fail(ps, t->line, "expected a value, found '%.*s'", (int)t->n,
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
                        struct tok lt = { slash + 1, (uint32_t)strlen(slash + 1), t->line, false };
                        if (!plen)
                                return fail(ps, t->line, "a prefix is not allowed here: '%s'", buf);
                        *slash = 0;
                        TRY(number(ps, &lt, f.len * 8u, &l));
                        *plen = (unsigned)l;
                }
                if (inet_pton(f.k == FK_IPV4 ? AF_INET : AF_INET6, buf, out) != 1)
                        return fail(ps, t->line, "bad address '%.*s'", (int)t->n, t->s);
                if (plen) /* nft rejects host bits set in a prefix */
                        for (unsigned i = *plen; i < f.len * 8u; i++)
                                if (out[i / 8] & (0x80 >> (i % 8)))
                                        return fail(ps, t->line, "host bits set in '%.*s'",
                                                    (int)t->n, t->s);
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
                        TRY(number(ps, t, 255, &v));
                out[0] = (uint8_t)v;
                return 0;
        case FK_SERVICE:
                TRY(number(ps, t, 65535, &v));
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
                        return fail(ps, t->line, "unknown ct state '%s'", buf);
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
                        return fail(ps, t->line, "unknown ct status '%s'", buf);
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
                        return fail(ps, t->line, "unknown address type '%s'", buf);
                break;
        }
        default:
                TRY(number(ps, t, f.len >= 8 ? UINT64_MAX : (1ull << (f.len * 8)) - 1, &v));
                break;
        }
        /* host byte order (little endian here: nft writes host order too) */
        memset(out, 0, f.len);
        for (unsigned i = 0; i < f.len && i < 8; i++)
                out[i] = (uint8_t)(v >> (8 * i));
        if (f.len > 8)
                return fail(ps, t->line, "integer too wide");
        return 0;
}

/* ---- messages ---- */

static int begin(struct ps *ps, struct nlb *b, uint16_t type, uint8_t fam, uint16_t flags,
                 unsigned line, struct nlmsghdr **nh)
{
        *nh = proxy_nlb_begin(b, type, fam, flags, line);
        if (!*nh)
                return oom(ps, b->len + NLB_HEADROOM > NLB_MAX_BYTES ? -E2BIG : -ENOMEM);
        return 0;
}

static int simple_msg(struct ps *ps, struct nlb *b, uint16_t type, uint8_t fam, uint16_t flags,
                      unsigned line, const char *table, uint16_t name_attr, const char *nm)
{
        struct nlmsghdr *nh;
        TRY(begin(ps, b, type, fam, flags, line, &nh));
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

/* ---- elements ---- */

struct elemw { /* an open NEWSETELEM/DELSETELEM message */
        struct nlb *b;
        struct nlmsghdr *nh;
        struct nlattr *list;
        uint16_t type;
        uint8_t fam;
        unsigned line;
        const struct setdef *set;
        const char *comment; /* of the next element, NULL: none */
};

static int elem_open(struct ps *ps, struct elemw *w)
{
        TRY(begin(ps, w->b, w->type, w->fam, w->type == NFT_MSG_NEWSETELEM ? NLM_F_CREATE : 0,
                  w->line, &w->nh));
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
static int elem_put(struct ps *ps, struct elemw *w, const uint8_t *key, uint32_t klen,
                    uint32_t flags, bool has_verdict, int32_t code, const char *chain,
                    const uint8_t *data, uint32_t dlen)
{
        if (++ps->elems > NLB_MAX_ELEMS)
                return oom(ps, -E2BIG);
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

/* a verdict: accept, drop, return, continue, jump X, goto X */
static int verdict(struct ps *ps, int32_t *code, char chain[NAME_MAX_LEN])
{
        struct tok t = next(ps);
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
                return name(ps, chain, "chain");
        } else
                return fail(ps, t.line, "expected a verdict, found '%.*s'", (int)t.n,
                            t.s ? t.s : "");
        return 0;
}

/* a concatenation of values of type t into out (padded); *plen for one
 * field with prefixes allowed */
static int concat_value(struct ps *ps, const struct ktype *t, uint8_t *out, unsigned *plen)
{
        uint32_t off = 0;
        memset(out, 0, ktype_len(t));
        for (unsigned i = 0; i < t->n; i++) {
                if (i)
                        TRY(expect(ps, "."));
                struct tok v = next(ps);
                TRY(value(ps, &v, t->f[i], out + off, t->n == 1 ? plen : NULL));
                off += t->n == 1 ? t->f[i].len : pad4(t->f[i].len);
        }
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
static int put_ranges(struct ps *ps, struct elemw *w, struct range *r, size_t n, uint32_t len)
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
static int elements(struct ps *ps, struct nlb *b, uint16_t type, const struct setdef *set,
                    unsigned line, size_t *count)
{
        struct elemw w = { .b = b, .type = type, .fam = set->family, .line = line, .set = set };
        bool interval = set->flags & NFT_SET_INTERVAL;
        bool map = set->flags & NFT_SET_MAP;
        uint32_t klen = ktype_len(&set->key), dlen = ktype_len(&set->data);
        struct range *ranges = NULL;
        size_t nr = 0, cap = 0;
        int r = 0;
        size_t before = ps->elems;
        if (interval && (set->key.n != 1 || map || type != NFT_MSG_NEWSETELEM))
                return fail(ps, line, "interval sets of this kind are not supported");
        TRY(expect(ps, "{"));
        while (!r && !is(peek(ps), "}")) {
                uint8_t key[64], data[64];
                unsigned plen = 0;
                struct tok first = *peek(ps);
                if (at_end(&first)) {
                        r = fail(ps, first.line, "unterminated element list");
                        break;
                }
                r = concat_value(ps, &set->key, key, interval ? &plen : NULL);
                char comment[NAME_MAX_LEN];
                w.comment = NULL;
                if (!r && is(peek(ps), "comment")) {
                        next(ps);
                        r = name(ps, comment, "comment");
                        if (!r && (interval || strlen(comment) > 127))
                                r = fail(ps, first.line, "unsupported element comment");
                        w.comment = comment;
                }
                if (!r && interval) {
                        if (nr == cap) {
                                size_t nc = cap ? cap * 2 : 16;
                                struct range *n2 = se_reallocarray(ranges, nc, sizeof(*n2));
                                if (!n2) {
                                        r = oom(ps, -ENOMEM);
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
                        r = expect(ps, ":");
                        if (!r && set->verdict)
                                r = verdict(ps, &code, chain);
                        else if (!r)
                                r = concat_value(ps, &set->data, data, NULL);
                        if (!r)
                                r = elem_put(ps, &w, key, klen, 0, set->verdict, code,
                                             chain[0] && set->verdict ? chain : NULL,
                                             set->verdict ? NULL : data, dlen);
                } else if (!r) {
                        if (map && is(peek(ps), ":"))
                                r = fail(ps, peek(ps)->line, "element data in a delete");
                        if (!r)
                                r = elem_put(ps, &w, key, klen, 0, false, 0, NULL, NULL, 0);
                }
                if (!r && is(peek(ps), ","))
                        next(ps);
                else if (!r && !is(peek(ps), "}"))
                        r = fail(ps, peek(ps)->line,
                                 "expected ',' or '}' in elements, found '%.*s'", (int)peek(ps)->n,
                                 peek(ps)->s ? peek(ps)->s : "");
        }
        if (!r)
                r = expect(ps, "}");
        if (!r && interval)
                r = put_ranges(ps, &w, ranges, nr, klen);
        free(ranges);
        elem_close(&w);
        if (count)
                *count = ps->elems - before;
        return r;
}

/* a set the script did not declare, from the kernel */
static int set_known(struct ps *ps, uint8_t fam, const char *table, const char *nm, unsigned line,
                     struct setdef **ret)
{
        *ret = set_find(ps, fam, table, nm);
        if (*ret)
                return 0;
        struct nfp_set_info info;
        int r = ps->lookup ? ps->lookup(ps->lctx, fam, table, nm, &info) : -ENOENT;
        if (r == -ENOENT)
                return fail(ps, line, "no set '%s' in table '%s'", nm, table);
        if (r < 0) {
                if (!ps->err) {
                        ps->err = r;
                        snprintf(ps->errbuf, ps->errsize, "line %u: reading set %s: %s", line, nm,
                                 strerror(-r));
                }
                return r;
        }
        struct setdef *s = set_add(ps, fam, table, nm);
        if (!s)
                return oom(ps, -ENOMEM);
        s->flags = info.flags;
        bool ok = ktype_from_kernel(info.key_type, info.key_len, &s->key);
        if (ok && s->key.n == 1 && s->key.f[0].k == FK_INT && info.key_byteorder != BO_HOST)
                ok = false; /* a big-endian integer key: not ours */
        if (ok && (info.flags & NFT_SET_MAP)) {
                s->verdict = info.data_type == NFT_DATA_VERDICT;
                if (!s->verdict)
                        ok = ktype_from_kernel(info.data_type, info.data_len, &s->data);
        }
        if (!ok) {
                set_forget(ps, fam, table, nm);
                return fail(ps, line, "set '%s' has a key or data type we do not write", nm);
        }
        *ret = s;
        return 0;
}

/* ---- set declarations ---- */

struct setdecl {
        struct ktype key, data;
        bool map, verdict, typeof_numgen, typeof_verdict, automerge;
        bool typeof_data; /* data given as header fields: desc/field below */
        uint8_t data_desc[MAX_FIELDS], data_field[MAX_FIELDS];
        uint32_t ng_type, ng_mod, ng_off;
        uint32_t flags, size;
        uint64_t timeout;
        char comment[NAME_MAX_LEN];
};

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

static int set_udata(struct ps *ps, const struct setdecl *d, struct nftnl_udata_buf *u)
{
        bool ok = nftnl_udata_put_u32(u, NFTNL_UDATA_SET_KEYBYTEORDER,
                                      d->key.n > 1 ? BO_INVALID : byteorder(d->key.f[0].k));
        if (d->map)
                ok = ok &&
                     nftnl_udata_put_u32(u, NFTNL_UDATA_SET_DATABYTEORDER,
                                         d->verdict || d->data.n > 1 ? BO_INVALID :
                                                                       byteorder(d->data.f[0].k));
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
        return ok ? 0 : fail(ps, ps->line, "set user data too long");
}

/* NEWSET for a declaration; the new entry in *ret */
static int set_emit(struct ps *ps, struct nlb *b, uint8_t fam, const char *table, const char *nm,
                    const struct setdecl *d, bool anonymous, unsigned line, struct setdef **ret)
{
        struct setdef *s = set_add(ps, fam, table, nm);
        if (!s)
                return oom(ps, -ENOMEM);
        s->id = ++ps->next_id;
        s->fresh = anonymous;
        for (unsigned i = 0; i < ps->n_gone && !s->fresh; i++)
                s->fresh = ps->gone[i].family == fam && strcmp(ps->gone[i].name, table) == 0;
        s->flags = d->flags;
        s->key = d->key;
        s->data = d->data;
        s->verdict = d->verdict;
        struct nftnl_udata_buf *u = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN);
        if (!u)
                return oom(ps, -ENOMEM);
        int r = set_udata(ps, d, u);
        struct nlmsghdr *nh = NULL;
        if (!r)
                r = begin(ps, b, NFT_MSG_NEWSET, fam, NLM_F_CREATE, line, &nh);
        if (!r) {
                mnl_attr_put_strz(nh, NFTA_SET_TABLE, table);
                mnl_attr_put_strz(nh, NFTA_SET_NAME, nm);
                mnl_attr_put_u32(nh, NFTA_SET_FLAGS, htonl(d->flags));
                mnl_attr_put_u32(nh, NFTA_SET_KEY_TYPE, htonl(ktype_id(&d->key)));
                mnl_attr_put_u32(nh, NFTA_SET_KEY_LEN, htonl(ktype_len(&d->key)));
                if (d->map) {
                        mnl_attr_put_u32(nh, NFTA_SET_DATA_TYPE,
                                         htonl(d->verdict ? NFT_DATA_VERDICT : ktype_id(&d->data)));
                        mnl_attr_put_u32(nh, NFTA_SET_DATA_LEN,
                                         htonl(d->verdict ? 0 : ktype_len(&d->data)));
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
static int typeof_field(struct ps *ps, struct setdecl *d, unsigned n, const struct tok *t)
{
        struct tok f = next(ps);
        bool saddr = is(&f, "saddr"), sport = is(&f, "sport");
        struct ft *ft = &d->data.f[n];
        if ((is(t, "ip") || is(t, "ip6")) && (saddr || is(&f, "daddr"))) {
                bool v6 = is(t, "ip6");
                *ft = v6 ? (struct ft){ FK_IPV6, 16 } : (struct ft){ FK_IPV4, 4 };
                d->data_desc[n] = v6 ? DESC_IP6 : DESC_IP;
                d->data_field[n] = v6 ? (saddr ? FIELD_IP6_SADDR : FIELD_IP6_DADDR) :
                                        (saddr ? FIELD_IP_SADDR : FIELD_IP_DADDR);
        } else if ((is(t, "tcp") || is(t, "udp") || is(t, "sctp")) && (sport || is(&f, "dport"))) {
                *ft = (struct ft){ FK_SERVICE, 2 };
                d->data_desc[n] = is(t, "tcp") ? DESC_TCP : is(t, "udp") ? DESC_UDP : DESC_SCTP;
                d->data_field[n] = sport ? FIELD_TH_SPORT : FIELD_TH_DPORT;
        } else {
                return fail(ps, t->line, "unknown typeof data '%.*s %.*s'", (int)t->n,
                            t->s ? t->s : "", (int)f.n, f.s ? f.s : "");
        }
        return 0;
}

/* "typeof ... : ip daddr . tcp dport", t the first word after ':' */
static int typeof_data(struct ps *ps, struct setdecl *d, struct tok t)
{
        d->data.n = 0;
        for (;;) {
                if (d->data.n == MAX_FIELDS)
                        return fail(ps, t.line, "too many fields");
                TRY(typeof_field(ps, d, d->data.n, &t));
                d->data.n++;
                if (!is(peek(ps), "."))
                        break;
                next(ps);
                t = next(ps);
        }
        if (d->data.n < 2)
                return fail(ps, t.line, "typeof data of one field is not supported");
        d->typeof_data = true;
        return 0;
}

/* "type a . b [: c]" / "typeof numgen ... : verdict | fields" */
static int set_type(struct ps *ps, struct setdecl *d, bool is_typeof)
{
        struct tok t;
        d->key.n = 0;
        for (;;) {
                if (d->key.n == MAX_FIELDS)
                        return fail(ps, peek(ps)->line, "too many fields");
                t = next(ps);
                if (is_typeof && is(&t, "numgen") && d->key.n == 0) {
                        struct tok k = next(ps), m = next(ps), nmod = next(ps);
                        uint64_t mod;
                        if (!is(&k, "random") && !is(&k, "inc"))
                                return fail(ps, k.line, "unknown numgen '%.*s'", (int)k.n,
                                            k.s ? k.s : "");
                        if (!is(&m, "mod"))
                                return fail(ps, m.line, "expected 'mod'");
                        TRY(number(ps, &nmod, UINT32_MAX, &mod));
                        d->typeof_numgen = true;
                        d->ng_type = is(&k, "random") ? NFT_NG_RANDOM : NFT_NG_INCREMENTAL;
                        d->ng_mod = (uint32_t)mod;
                        d->key.f[d->key.n++] = (struct ft){ FK_INT, 4 };
                } else if (!is_typeof && type_word(&t, &d->key.f[d->key.n])) {
                        d->key.n++;
                } else {
                        return fail(ps, t.line, "unknown set %s '%.*s'",
                                    is_typeof ? "typeof expression" : "type", (int)t.n,
                                    t.s ? t.s : "");
                }
                if (!is(peek(ps), "."))
                        break;
                if (d->typeof_numgen)
                        return fail(ps, peek(ps)->line, "typeof concatenations are not supported");
                next(ps);
        }
        if (!is(peek(ps), ":"))
                return 0;
        next(ps);
        d->map = true;
        d->flags |= NFT_SET_MAP;
        t = next(ps);
        if (is(&t, "verdict")) {
                d->verdict = true;
                d->typeof_verdict = is_typeof;
                return 0;
        }
        if (is_typeof)
                return typeof_data(ps, d, t);
        for (;;) {
                if (d->data.n == MAX_FIELDS || !type_word(&t, &d->data.f[d->data.n]))
                        return fail(ps, t.line, "unknown map data type '%.*s'", (int)t.n,
                                    t.s ? t.s : "");
                d->data.n++;
                if (!is(peek(ps), "."))
                        return 0;
                next(ps);
                t = next(ps);
        }
}

/* "set|map NAME { ... }" after the keyword; block: inside a table block */
static int set_block(struct ps *ps, uint8_t fam, const char *table, bool is_map, unsigned line)
{
        char nm[NAME_MAX_LEN];
        struct setdecl d;
        memset(&d, 0, sizeof(d));
        TRY(name(ps, nm, "set name"));
        TRY(expect(ps, "{"));
        bool typed = false;
        struct setdef *s = NULL;
        for (;;) {
                struct tok t = next(ps);
                if (is(&t, "}"))
                        break;
                if (is(&t, ";"))
                        continue;
                if (s) /* nft allows any order; we write elements last */
                        return fail(ps, t.line, "'%.*s' after the elements", (int)t.n, t.s);
                if (is(&t, "type") || is(&t, "typeof")) {
                        TRY(set_type(ps, &d, is(&t, "typeof")));
                        typed = true;
                } else if (is(&t, "flags")) {
                        for (;;) {
                                struct tok f = next(ps);
                                if (is(&f, "interval"))
                                        d.flags |= NFT_SET_INTERVAL;
                                else if (is(&f, "timeout"))
                                        d.flags |= NFT_SET_TIMEOUT;
                                else if (is(&f, "dynamic"))
                                        d.flags |= NFT_SET_EVAL;
                                else if (is(&f, "constant"))
                                        d.flags |= NFT_SET_CONSTANT;
                                else
                                        return fail(ps, f.line, "unknown set flag '%.*s'", (int)f.n,
                                                    f.s ? f.s : "");
                                if (!is(peek(ps), ","))
                                        break;
                                next(ps);
                        }
                } else if (is(&t, "timeout")) {
                        struct tok v = next(ps);
                        TRY(duration(ps, &v, &d.timeout));
                        d.flags |= NFT_SET_TIMEOUT;
                } else if (is(&t, "size")) {
                        struct tok v = next(ps);
                        uint64_t n;
                        TRY(number(ps, &v, UINT32_MAX, &n));
                        d.size = (uint32_t)n;
                } else if (is(&t, "auto-merge")) {
                        d.automerge = true;
                } else if (is(&t, "comment")) {
                        TRY(name(ps, d.comment, "comment"));
                } else if (is(&t, "elements")) {
                        if (!typed)
                                return fail(ps, t.line, "elements before the set's type");
                        TRY(expect(ps, "="));
                        TRY(set_emit(ps, ps->sb, fam, table, nm, &d, false, line, &s));
                        TRY(elements(ps, ps->sb, NFT_MSG_NEWSETELEM, s, t.line, NULL));
                } else {
                        return fail(ps, t.line, "unknown set attribute '%.*s'", (int)t.n,
                                    t.s ? t.s : "");
                }
        }
        if (!typed)
                return fail(ps, line, "set '%s' has no type", nm);
        for (unsigned i = 0; d.typeof_data && i < d.data.n; i++)
                if ((d.data_desc[i] == DESC_IP && fam != NFPROTO_IPV4) ||
                    (d.data_desc[i] == DESC_IP6 && fam != NFPROTO_IPV6))
                        return fail(ps, line, "map '%s': addresses of another family", nm);
        if (is_map != d.map)
                return fail(ps, line, "%s '%s' %s data", is_map ? "map" : "set", nm,
                            is_map ? "without" : "with");
        if (!s)
                TRY(set_emit(ps, ps->sb, fam, table, nm, &d, false, line, &s));
        return 0;
}

/* ---- rules ---- */

struct rule {
        struct ps *ps;
        struct nftnl_rule *r;
        uint8_t fam;
        const char *table;
        unsigned line;
        int depth; /* braces open */
        bool started; /* a statement was read: a new line ends the rule */
        bool one_elem; /* a match read "{ V }" as V: its "}" is still to read */
};

static struct nftnl_expr *ex(struct rule *ru, const char *kind)
{
        struct nftnl_expr *e = nftnl_expr_alloc(kind);
        if (!e) {
                oom(ru->ps, -ENOMEM);
                return NULL;
        }
        nftnl_rule_add_expr(ru->r, e);
        return e;
}

#define EX(ru, kind, e)               \
 struct nftnl_expr *e = ex(ru, kind); \
 if (!e)                              \
 return -ENOMEM

static bool rule_end(struct rule *ru)
{
        struct tok *t = peek(ru->ps);
        return at_end(t) || is(t, ";") || is(t, "}") || (t->first && ru->depth == 0 && ru->started);
}

static int cmp_ex(struct rule *ru, uint32_t reg, uint32_t op, const void *data, uint32_t len)
{
        EX(ru, "cmp", e);
        nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, reg);
        nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
        nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
        return 0;
}

static int bitwise_ex(struct rule *ru, uint32_t reg, const void *mask, const void * xor,
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

static int meta_load(struct rule *ru, uint32_t key, uint32_t reg)
{
        EX(ru, "meta", e);
        nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
        nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, reg);
        return 0;
}

static int verdict_ex(struct rule *ru, int32_t code, const char *chain)
{
        EX(ru, "immediate", e);
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)code);
        if (chain && chain[0])
                nftnl_expr_set_str(e, NFTNL_EXPR_IMM_CHAIN, chain);
        return 0;
}

/* one loadable expression (a field of a concatenation) */
static int xp_parse(struct rule *ru, struct xp *x, struct lhs *l, bool allow_hash)
{
        struct ps *ps = ru->ps;
        struct tok t = next(ps), f = next(ps);
        bool v6 = ru->fam == NFPROTO_IPV6;
        memset(x, 0, sizeof(*x));
        if ((is(&t, "ip") && !v6) || (is(&t, "ip6") && v6)) {
                x->k = X_PAYLOAD;
                x->a = NFT_PAYLOAD_NETWORK_HEADER;
                if (is(&f, "saddr") || is(&f, "daddr")) {
                        x->t = v6 ? (struct ft){ FK_IPV6, 16 } : (struct ft){ FK_IPV4, 4 };
                        x->b = v6 ? (is(&f, "saddr") ? 8 : 24) : (is(&f, "saddr") ? 12 : 16);
                } else if (!v6 && is(&f, "protocol")) {
                        x->t = (struct ft){ FK_PROTO, 1 };
                        x->b = 9;
                } else if (v6 && is(&f, "nexthdr")) {
                        x->t = (struct ft){ FK_PROTO, 1 };
                        x->b = 6;
                } else {
                        return fail(ps, f.line, "unknown field '%.*s %.*s'", (int)t.n, t.s,
                                    (int)f.n, f.s ? f.s : "");
                }
                x->c = x->t.len;
        } else if (is(&t, "tcp") || is(&t, "udp") || is(&t, "sctp") || is(&t, "th")) {
                x->k = X_PAYLOAD;
                x->a = NFT_PAYLOAD_TRANSPORT_HEADER;
                x->t = (struct ft){ FK_SERVICE, 2 };
                x->c = 2;
                x->dep = is(&t, "tcp") ? 6 : is(&t, "udp") ? 17 : is(&t, "sctp") ? 132 : 0;
                if (is(&f, "sport"))
                        x->b = 0;
                else if (is(&f, "dport"))
                        x->b = 2;
                else
                        return fail(ps, f.line, "unknown field '%.*s %.*s'", (int)t.n, t.s,
                                    (int)f.n, f.s ? f.s : "");
        } else if (is(&t, "meta")) {
                x->k = X_META;
                if (is(&f, "l4proto")) {
                        x->a = NFT_META_L4PROTO;
                        x->t = (struct ft){ FK_PROTO, 1 };
                } else if (is(&f, "mark")) {
                        x->a = NFT_META_MARK;
                        x->t = (struct ft){ FK_MARK, 4 };
                } else {
                        return fail(ps, f.line, "unknown meta key '%.*s'", (int)f.n,
                                    f.s ? f.s : "");
                }
        } else if (is(&t, "ct")) {
                x->k = X_CT;
                if (is(&f, "state")) {
                        x->a = NFT_CT_STATE;
                        x->t = (struct ft){ FK_CTSTATE, 4 };
                } else if (is(&f, "status")) {
                        x->a = NFT_CT_STATUS;
                        x->t = (struct ft){ FK_CTSTATUS, 4 };
                } else if (is(&f, "mark")) {
                        x->a = NFT_CT_MARK;
                        x->t = (struct ft){ FK_MARK, 4 };
                } else {
                        return fail(ps, f.line, "unknown ct key '%.*s'", (int)f.n, f.s ? f.s : "");
                }
        } else if (is(&t, "fib")) {
                x->k = X_FIB;
                if (is(&f, "saddr"))
                        x->a = NFTA_FIB_F_SADDR;
                else if (is(&f, "daddr"))
                        x->a = NFTA_FIB_F_DADDR;
                else
                        return fail(ps, f.line, "unknown fib input '%.*s'", (int)f.n,
                                    f.s ? f.s : "");
                if (is(peek(ps), ".")) {
                        next(ps);
                        struct tok i = next(ps);
                        if (!is(&i, "iif"))
                                return fail(ps, i.line, "unknown fib input '%.*s'", (int)i.n,
                                            i.s ? i.s : "");
                        x->a |= NFTA_FIB_F_IIF;
                }
                struct tok r = next(ps);
                if (!is(&r, "type"))
                        return fail(ps, r.line, "fib results other than 'type' are not supported");
                x->b = NFT_FIB_RESULT_ADDRTYPE;
                x->t = (struct ft){ FK_FIBTYPE, 4 };
        } else if (is(&t, "numgen")) {
                struct tok m = next(ps), n = next(ps);
                uint64_t mod, off = 0;
                if (!is(&f, "random") && !is(&f, "inc"))
                        return fail(ps, f.line, "unknown numgen '%.*s'", (int)f.n, f.s ? f.s : "");
                if (!is(&m, "mod"))
                        return fail(ps, m.line, "expected 'mod'");
                TRY(number(ps, &n, UINT32_MAX, &mod));
                if (mod == 0)
                        return fail(ps, n.line, "numgen mod 0");
                if (is(peek(ps), "offset")) {
                        next(ps);
                        struct tok o = next(ps);
                        TRY(number(ps, &o, UINT32_MAX, &off));
                }
                x->k = X_NUMGEN;
                x->a = is(&f, "random") ? NFT_NG_RANDOM : NFT_NG_INCREMENTAL;
                x->b = (uint32_t)mod;
                x->c = (uint32_t)off;
                x->t = (struct ft){ FK_INT, 4 };
        } else if (is(&t, "jhash") && allow_hash) {
                /* f is the first token of the input: put it back */
                ps->la = f;
                ps->have = true;
                l->nsrc = 0;
                for (;;) {
                        if (l->nsrc == MAX_FIELDS)
                                return fail(ps, t.line, "too many hash inputs");
                        TRY(xp_parse(ru, &l->src[l->nsrc], NULL, false));
                        l->nsrc++;
                        if (!is(peek(ps), "."))
                                break;
                        next(ps);
                }
                struct tok m = next(ps), n = next(ps);
                uint64_t mod, seed = 0, off = 0;
                if (!is(&m, "mod"))
                        return fail(ps, m.line, "expected 'mod'");
                TRY(number(ps, &n, UINT32_MAX, &mod));
                if (mod == 0)
                        return fail(ps, n.line, "jhash mod 0");
                bool seeded = false;
                for (;;) {
                        if (is(peek(ps), "seed")) {
                                next(ps);
                                struct tok v = next(ps);
                                TRY(number(ps, &v, UINT32_MAX, &seed));
                                seeded = true;
                        } else if (is(peek(ps), "offset")) {
                                next(ps);
                                struct tok v = next(ps);
                                TRY(number(ps, &v, UINT32_MAX, &off));
                        } else {
                                break;
                        }
                }
                x->k = X_HASH;
                x->a = (uint32_t)mod;
                x->b = (uint32_t)seed;
                x->c = (uint32_t)off;
                x->d = seeded;
                x->t = (struct ft){ FK_INT, 4 };
        } else {
                return fail(ps, t.line, "unknown expression '%.*s'", (int)t.n, t.s ? t.s : "");
        }
        return 0;
}

static int lhs_parse(struct rule *ru, struct lhs *l)
{
        l->n = 0;
        for (;;) {
                if (l->n == MAX_FIELDS)
                        return fail(ru->ps, peek(ru->ps)->line, "too many fields");
                TRY(xp_parse(ru, &l->f[l->n], l, true));
                l->n++;
                if (!is(peek(ru->ps), "."))
                        break;
                next(ru->ps);
        }
        for (unsigned i = 0; i < l->n; i++)
                if (l->f[i].k == X_HASH && l->n > 1)
                        return fail(ru->ps, ru->line, "jhash inside a concatenation");
        return 0;
}

static struct ktype lhs_type(const struct lhs *l)
{
        struct ktype t = { .n = l->n };
        for (unsigned i = 0; i < l->n; i++)
                t.f[i] = l->f[i].t;
        return t;
}

/* the l4 protocol matches fields need, as nft adds them */
static int deps(struct rule *ru, const struct xp *f, unsigned n)
{
        for (unsigned i = 0; i < n; i++) {
                if (!f[i].dep || ru->ps->l4 == f[i].dep)
                        continue;
                TRY(meta_load(ru, NFT_META_L4PROTO, NFT_REG_1));
                TRY(cmp_ex(ru, NFT_REG_1, NFT_CMP_EQ, &f[i].dep, 1));
                ru->ps->l4 = f[i].dep;
        }
        return 0;
}

/* the register of the field at 4-byte offset off from a 16-byte base */
static uint32_t field_reg(uint32_t base, uint32_t off)
{
        return off == 0 ? base : NFT_REG32_00 + (base - NFT_REG_1) * 4 + off;
}

static int load_one(struct rule *ru, const struct xp *x, const struct lhs *l, uint32_t reg,
                    uint32_t len_override)
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
                return meta_load(ru, x->a, reg);
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
                TRY(deps(ru, l->src, l->nsrc));
                for (unsigned i = 0; i < l->nsrc; i++) {
                        TRY(load_one(ru, &l->src[i], NULL, field_reg(NFT_REG_2, off), 0));
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
static int load(struct rule *ru, const struct lhs *l, uint32_t base)
{
        TRY(deps(ru, l->f, l->n));
        uint32_t off = 0;
        for (unsigned i = 0; i < l->n; i++) {
                TRY(load_one(ru, &l->f[i], l, field_reg(base, off), 0));
                off += pad4(l->f[i].t.len) / 4;
        }
        return 0;
}

/* an anonymous set or map "{ ... }" for a rule, with key type key */
static int anon_set(struct rule *ru, const struct ktype *key, bool map, bool verdict,
                    const struct ktype *data, struct setdef **ret)
{
        struct ps *ps = ru->ps;
        struct setdecl d;
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
        struct setdef tmp = { .family = ru->fam,
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
        int r = elements(ps, &side, NFT_MSG_NEWSETELEM, &tmp, ru->line, &count);
        ru->depth--;
        d.size = (uint32_t)count;
        if (!r && count == 0)
                r = fail(ps, ru->line, "empty anonymous set");
        if (!r)
                r = set_emit(ps, ps->rb, ru->fam, ru->table, tmp.name, &d, true, ru->line, ret);
        if (!r && (*ret)->id != tmp.id)
                r = fail(ps, ru->line, "internal: set id mismatch");
        if (!r && proxy_nlb_append(ps->rb, &side) < 0)
                r = oom(ps, -ENOMEM);
        proxy_nlb_release(&side);
        /* anonymous sets are bound to the rule: not looked up again */
        if (*ret)
                (*ret)->name[0] = 0;
        return r;
}

static int lookup_ex(struct rule *ru, uint32_t sreg, int dreg, const struct setdef *s,
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
static int set_ref(struct rule *ru, const struct ktype *key, bool map, bool verdict,
                   const struct ktype *data, struct setdef **s, char nm[NAME_MAX_LEN])
{
        struct tok *t = peek(ru->ps);
        *s = NULL;
        if (is(t, "{")) {
                TRY(anon_set(ru, key, map, verdict, data, s));
                snprintf(nm, NAME_MAX_LEN, "%s", map ? "__map%d" : "__set%d");
                return 0;
        }
        if (t->s && t->s[0] == '@' && t->n > 1 && t->n < NAME_MAX_LEN) {
                struct tok n = next(ru->ps);
                memcpy(nm, n.s + 1, n.n - 1);
                nm[n.n - 1] = 0;
                *s = set_find(ru->ps, ru->fam, ru->table, nm);
                return 0;
        }
        return fail(ru->ps, t->line, "expected a set, found '%.*s'", (int)t->n, t->s ? t->s : "");
}

static int match(struct rule *ru, const struct lhs *l);

/* Whether the "{" just peeked opens a set of one element ("{ V }": no ','
 * or '{' before its '}'). nft -f loads `X OP { V }` as `X OP V` (a
 * compare, a prefix, a flag test, no anonymous set); so do we. */
static bool one_element(const struct ps *ps)
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
static int match_one(struct rule *ru, const struct lhs *l)
{
        int r = match(ru, l);
        if (r == 0 && ru->one_elem) {
                ru->one_elem = false;
                ru->depth--;
                r = expect(ru->ps, "}");
        }
        return r;
}

/* a match: LHS [&mask] [op] RHS, or LHS vmap ... */
static int match(struct rule *ru, const struct lhs *l)
{
        struct ps *ps = ru->ps;
        struct ktype kt = lhs_type(l);
        struct tok t = *peek(ps);
        char nm[NAME_MAX_LEN];
        struct setdef *s;
        if (is(&t, "vmap")) {
                next(ps);
                TRY(load(ru, l, NFT_REG_1));
                struct ktype none = { 0 };
                TRY(set_ref(ru, &kt, true, true, &none, &s, nm));
                return lookup_ex(ru, NFT_REG_1, NFT_REG_VERDICT, s, nm, false);
        }
        const struct xp *x = &l->f[0];
        uint8_t mask[16], xor[16] = {
                0
        };
        bool masked = false;
        if (is(&t, "&")) {
                if (l->n != 1)
                        return fail(ps, t.line, "a mask on a concatenation");
                next(ps);
                struct tok m = next(ps);
                TRY(value(ps, &m, x->t, mask, NULL));
                masked = true;
                t = *peek(ps);
        }
        uint32_t op = NFT_CMP_EQ;
        bool explicit_op = false;
        if (is(&t, "==") || is(&t, "!=")) {
                op = is(&t, "!=") ? NFT_CMP_NEQ : NFT_CMP_EQ;
                explicit_op = true;
                next(ps);
                t = *peek(ps);
        }
        if (is(&t, "{") && l->n == 1 && !masked && !ru->one_elem && one_element(ps)) {
                next(ps); /* the element is read as the value below */
                ru->depth++;
                ru->one_elem = true;
                t = *peek(ps);
        }
        if (is(&t, "{") || (t.s && t.s[0] == '@')) {
                if (masked)
                        return fail(ps, t.line, "a mask before a set lookup");
                TRY(load(ru, l, NFT_REG_1));
                TRY(set_ref(ru, &kt, false, false, NULL, &s, nm));
                return lookup_ex(ru, NFT_REG_1, -1, s, nm, op == NFT_CMP_NEQ);
        }
        if (l->n != 1)
                return fail(ps, t.line, "a concatenation compared with a value");
        uint8_t v[16];
        unsigned plen = x->t.len * 8u;
        bool prefixable = x->t.k == FK_IPV4 || x->t.k == FK_IPV6;
        if ((x->t.k == FK_CTSTATE || x->t.k == FK_CTSTATUS) && !explicit_op && !masked) {
                /* a flag test: state in the listed bits */
                uint32_t bits = 0, zero = 0;
                for (;;) {
                        struct tok w = next(ps);
                        uint32_t b;
                        TRY(value(ps, &w, x->t, (uint8_t *)&b, NULL));
                        bits |= b;
                        if (!is(peek(ps), ","))
                                break;
                        next(ps);
                }
                TRY(load(ru, l, NFT_REG_1));
                TRY(bitwise_ex(ru, NFT_REG_1, &bits, &zero, 4));
                return cmp_ex(ru, NFT_REG_1, NFT_CMP_NEQ, &zero, 4);
        }
        struct tok vt = next(ps);
        TRY(value(ps, &vt, x->t, v, prefixable && !masked ? &plen : NULL));
        if (x->t.k == FK_PROTO && x->k == X_META && x->a == NFT_META_L4PROTO && op == NFT_CMP_EQ) {
                TRY(load(ru, l, NFT_REG_1));
                TRY(cmp_ex(ru, NFT_REG_1, op, v, 1));
                ps->l4 = v[0];
                return 0;
        }
        if (masked) {
                TRY(load(ru, l, NFT_REG_1));
                TRY(bitwise_ex(ru, NFT_REG_1, mask, xor, x->t.len));
                return cmp_ex(ru, NFT_REG_1, op, v, x->t.len);
        }
        if (plen < x->t.len * 8u) {
                if (plen == 0)
                        return fail(ps, vt.line, "a /0 prefix");
                /* nft loads only the bytes of a whole-byte prefix, else masks */
                bool short_load = x->k == X_PAYLOAD && plen % 8 == 0;
                uint32_t bytes = short_load ? plen / 8 : x->t.len;
                TRY(deps(ru, l->f, 1));
                TRY(load_one(ru, x, l, NFT_REG_1, short_load ? bytes : 0));
                if (!short_load) {
                        memset(mask, 0, sizeof(mask));
                        for (unsigned i = 0; i < plen; i++)
                                mask[i / 8] |= (uint8_t)(0x80 >> (i % 8));
                        TRY(bitwise_ex(ru, NFT_REG_1, mask, xor, bytes));
                }
                return cmp_ex(ru, NFT_REG_1, op, v, bytes);
        }
        TRY(load(ru, l, NFT_REG_1));
        return cmp_ex(ru, NFT_REG_1, op, v, x->t.len);
}

/* "meta mark set meta mark | 0x4000" and friends */
static int set_stmt(struct rule *ru, const struct xp *target)
{
        struct ps *ps = ru->ps;
        if (target->t.k != FK_MARK)
                return fail(ps, ru->line, "only marks can be set");
        struct tok t = *peek(ps);
        if (is(&t, "meta") || is(&t, "ct")) {
                struct lhs src;
                TRY(lhs_parse(ru, &src));
                if (src.n != 1 || src.f[0].t.k != FK_MARK)
                        return fail(ps, t.line, "unsupported mark source");
                struct tok o = next(ps), m = next(ps);
                uint32_t v, mask, xor;
                TRY(value(ps, &m, target->t, (uint8_t *)&v, NULL));
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
                        return fail(ps, o.line, "unknown operator '%.*s'", (int)o.n,
                                    o.s ? o.s : "");
                }
                TRY(load_one(ru, &src.f[0], &src, NFT_REG_1, 0));
                TRY(bitwise_ex(ru, NFT_REG_1, &mask, &xor, 4));
        } else {
                uint32_t v;
                struct tok vt = next(ps);
                TRY(value(ps, &vt, target->t, (uint8_t *)&v, NULL));
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
static int nat_stmt(struct rule *ru, uint32_t type)
{
        struct ps *ps = ru->ps;
        bool v6 = ru->fam == NFPROTO_IPV6, addr_port = false;
        struct tok t = next(ps);
        if (is(&t, "ip") || is(&t, "ip6")) {
                if (is(&t, "ip6") != v6)
                        return fail(ps, t.line, "nat family does not match the table's");
                t = next(ps);
                if (is(&t, "addr")) { /* the map gives address . port */
                        TRY(expect(ps, "."));
                        TRY(expect(ps, "port"));
                        addr_port = true;
                        t = next(ps);
                }
        }
        if (!is(&t, "to"))
                return fail(ps, t.line, "expected 'to'");
        struct ft at = v6 ? (struct ft){ FK_IPV6, 16 } : (struct ft){ FK_IPV4, 4 };
        struct tok a = *peek(ps);
        bool literal = a.s && (a.s[0] == '[' || (a.s[0] >= '0' && a.s[0] <= '9') ||
                               (v6 && memchr(a.s, ':', a.n)));
        uint32_t proto_reg = 0, flags = 0;
        if (literal && addr_port)
                return fail(ps, a.line, "'addr . port' needs a map");
        if (literal) {
                next(ps);
                char buf[80];
                if (a.n >= sizeof(buf))
                        return fail(ps, a.line, "bad address");
                memcpy(buf, a.s, a.n);
                buf[a.n] = 0;
                char *port = NULL, *addr_s = buf;
                if (buf[0] == '[') {
                        char *close = strchr(buf, ']');
                        if (!close || (close[1] && close[1] != ':'))
                                return fail(ps, a.line, "bad address '%s'", buf);
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
                struct tok at_tok = { addr_s, (uint32_t)strlen(addr_s), a.line, false };
                TRY(value(ps, &at_tok, at, addr, NULL));
                EX(ru, "immediate", ia);
                nftnl_expr_set_u32(ia, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
                nftnl_expr_set(ia, NFTNL_EXPR_IMM_DATA, addr, at.len);
                if (port) {
                        uint8_t p[2];
                        struct tok pt = { port, (uint32_t)strlen(port), a.line, false };
                        TRY(value(ps, &pt, (struct ft){ FK_SERVICE, 2 }, p, NULL));
                        EX(ru, "immediate", ip);
                        nftnl_expr_set_u32(ip, NFTNL_EXPR_IMM_DREG, NFT_REG_2);
                        nftnl_expr_set(ip, NFTNL_EXPR_IMM_DATA, p, 2);
                        proto_reg = NFT_REG_2;
                        flags = NAT_PROTO_SPECIFIED;
                }
        } else {
                struct lhs l;
                TRY(lhs_parse(ru, &l));
                struct tok m = next(ps);
                if (!is(&m, "map"))
                        return fail(ps, m.line, "expected 'map'");
                struct ktype kt = lhs_type(&l), dt = { .n = 1, .f = { at } };
                /* the data: an address, or address . port */
                const char *p = ps->p, *q = memchr(p, '}', (size_t)(ps->end - p));
                bool with_port = false;
                if (is(peek(ps), "{") && q) { /* "addr . port": a " . " after " : " */
                        const char *colon = memmem(p, (size_t)(q - p), " : ", 3);
                        with_port = colon && memmem(colon, (size_t)(q - colon), " . ", 3);
                }
                struct setdef *s = NULL;
                char nm[NAME_MAX_LEN];
                if (!is(peek(ps), "{")) {
                        struct tok r = *peek(ps);
                        if (r.s && r.s[0] == '@' && r.n > 1 && r.n < NAME_MAX_LEN) {
                                char tmp[NAME_MAX_LEN];
                                memcpy(tmp, r.s + 1, r.n - 1);
                                tmp[r.n - 1] = 0;
                                TRY(set_known(ps, ru->fam, ru->table, tmp, r.line, &s));
                                if (!(s->flags & NFT_SET_MAP) || s->verdict ||
                                    s->data.f[0].k != at.k)
                                        return fail(ps, r.line, "map '%s' does not give addresses",
                                                    tmp);
                                with_port = s->data.n == 2;
                        }
                }
                if (addr_port && !with_port)
                        return fail(ps, m.line, "'addr . port' with a map of addresses only");
                if (with_port) {
                        dt.n = 2;
                        dt.f[1] = (struct ft){ FK_SERVICE, 2 };
                }
                TRY(load(ru, &l, NFT_REG_1));
                TRY(set_ref(ru, &kt, true, false, &dt, &s, nm));
                TRY(lookup_ex(ru, NFT_REG_1, NFT_REG_1, s, nm, false));
                if (with_port)
                        proto_reg = field_reg(NFT_REG_1, pad4(at.len) / 4);
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
static int dynset_stmt(struct rule *ru, uint32_t op)
{
        struct ps *ps = ru->ps;
        struct tok t = next(ps);
        if (!t.s || t.s[0] != '@' || t.n < 2 || t.n >= NAME_MAX_LEN)
                return fail(ps, t.line, "expected '@set'");
        char nm[NAME_MAX_LEN];
        memcpy(nm, t.s + 1, t.n - 1);
        nm[t.n - 1] = 0;
        TRY(expect(ps, "{"));
        ru->depth++;
        struct lhs l;
        TRY(lhs_parse(ru, &l));
        uint64_t timeout = 0;
        if (is(peek(ps), "timeout")) {
                next(ps);
                struct tok v = next(ps);
                TRY(duration(ps, &v, &timeout));
        }
        TRY(expect(ps, "}"));
        ru->depth--;
        TRY(load(ru, &l, NFT_REG_1));
        const struct setdef *s = set_find(ps, ru->fam, ru->table, nm);
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

static int statement(struct rule *ru, char comment[NAME_MAX_LEN])
{
        struct ps *ps = ru->ps;
        struct tok t = *peek(ps);
        if (is(&t, "accept") || is(&t, "drop") || is(&t, "return") || is(&t, "continue") ||
            is(&t, "jump") || is(&t, "goto")) {
                int32_t code;
                char chain[NAME_MAX_LEN];
                TRY(verdict(ps, &code, chain));
                return verdict_ex(ru, code, chain);
        }
        if (is(&t, "counter")) {
                next(ps);
                EX(ru, "counter", e);
                (void)e;
                return 0;
        }
        if (is(&t, "comment")) {
                next(ps);
                return name(ps, comment, "comment");
        }
        if (is(&t, "reject")) {
                next(ps);
                EX(ru, "reject", e);
                nftnl_expr_set_u32(e, NFTNL_EXPR_REJECT_TYPE, NFT_REJECT_ICMP_UNREACH);
                nftnl_expr_set_u8(e, NFTNL_EXPR_REJECT_CODE, ru->fam == NFPROTO_IPV6 ? 4 : 3);
                return 0;
        }
        if (is(&t, "masquerade")) {
                next(ps);
                uint32_t flags = 0;
                for (;;) {
                        struct tok *f = peek(ps);
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
                        next(ps);
                }
                EX(ru, "masq", e);
                if (flags)
                        nftnl_expr_set_u32(e, NFTNL_EXPR_MASQ_FLAGS, flags);
                return 0;
        }
        if (is(&t, "dnat") || is(&t, "snat")) {
                next(ps);
                return nat_stmt(ru, is(&t, "dnat") ? NFT_NAT_DNAT : NFT_NAT_SNAT);
        }
        if (is(&t, "update") || is(&t, "add")) {
                next(ps);
                return dynset_stmt(ru, is(&t, "update") ? NFT_DYNSET_OP_UPDATE : NFT_DYNSET_OP_ADD);
        }
        struct lhs l;
        TRY(lhs_parse(ru, &l));
        if (is(peek(ps), "set")) {
                next(ps);
                if (l.n != 1)
                        return fail(ps, t.line, "setting a concatenation");
                return set_stmt(ru, &l.f[0]);
        }
        return match_one(ru, &l);
}

/* one rule up to the end of its line (or ';' / '}') into b */
static int rule(struct ps *ps, struct nlb *b, uint8_t fam, const char *table, const char *chain,
                bool insert, unsigned line)
{
        struct rule ru = { .ps = ps, .fam = fam, .table = table, .line = line };
        char comment[NAME_MAX_LEN] = "";
        ru.r = nftnl_rule_alloc();
        if (!ru.r)
                return oom(ps, -ENOMEM);
        ps->l4 = 0;
        int r = 0;
        while (!r && !rule_end(&ru)) {
                r = statement(&ru, comment);
                ru.started = true;
        }
        if (!r && !ru.started)
                r = fail(ps, line, "empty rule");
        struct nlmsghdr *nh = NULL;
        if (!r) {
                nftnl_rule_set_u32(ru.r, NFTNL_RULE_FAMILY, fam);
                nftnl_rule_set_str(ru.r, NFTNL_RULE_TABLE, table);
                nftnl_rule_set_str(ru.r, NFTNL_RULE_CHAIN, chain);
                if (comment[0]) {
                        struct nftnl_udata_buf *u = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN);
                        if (!u)
                                r = oom(ps, -ENOMEM);
                        else if (!nftnl_udata_put_strz(u, NFTNL_UDATA_RULE_COMMENT, comment))
                                r = fail(ps, line, "comment too long");
                        else
                                nftnl_rule_set_data(ru.r, NFTNL_RULE_USERDATA,
                                                    nftnl_udata_buf_data(u),
                                                    nftnl_udata_buf_len(u));
                        nftnl_udata_buf_free(u);
                }
        }
        if (!r)
                r = begin(ps, b, NFT_MSG_NEWRULE, fam, NLM_F_CREATE | (insert ? 0 : NLM_F_APPEND),
                          line, &nh);
        if (!r && nh) {
                nftnl_rule_nlmsg_build_payload(nh, ru.r);
                if (nh->nlmsg_len > NLB_HEADROOM)
                        r = fail(ps, line, "rule too large");
                else
                        proxy_nlb_end(b, nh);
        }
        nftnl_rule_free(ru.r);
        return r;
}

/* ---- chains ---- */

static int hook_num(const struct tok *t, uint32_t *h)
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
static int priority(struct ps *ps, int32_t *prio)
{
        static const struct {
                const char *name;
                int32_t v;
        } named[] = { { "raw", -300 }, { "mangle", -150 }, { "dstnat", -100 },
                      { "filter", 0 }, { "security", 50 }, { "srcnat", 100 } };
        struct tok t = next(ps);
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
                        return fail(ps, t.line, "bad priority");
                memcpy(buf, t.s, t.n);
                buf[t.n] = 0;
                char *e;
                errno = 0;
                long x = strtol(buf, &e, 10);
                if (errno || *e || x < INT32_MIN || x > INT32_MAX)
                        return fail(ps, t.line, "bad priority '%s'", buf);
                *prio = (int32_t)x;
                return 0;
        }
        if (is(peek(ps), "+") || is(peek(ps), "-")) {
                bool minus = is(peek(ps), "-");
                next(ps);
                struct tok n = next(ps);
                uint64_t d;
                TRY(number(ps, &n, 1000000, &d));
                v += minus ? -(int64_t)d : (int64_t)d;
        }
        *prio = (int32_t)v;
        return 0;
}

/* "chain NAME { ... }" after the keyword (the block optional with add) */
static int chain_decl(struct ps *ps, uint8_t fam, const char *table, bool block_required,
                      unsigned line)
{
        char nm[NAME_MAX_LEN], type[16] = "", comment[NAME_MAX_LEN] = "";
        uint32_t hook = 0, policy = NF_ACCEPT;
        int32_t prio = 0;
        bool base = false, has_policy = false;
        TRY(name(ps, nm, "chain name"));
        bool block = is(peek(ps), "{");
        if (!block && block_required)
                return fail(ps, line, "expected '{' after chain %s", nm);
        /* rules follow the chain header; they go to the rules batch */
        struct nlb rules;
        proxy_nlb_init(&rules);
        int r = 0;
        if (block) {
                next(ps);
                for (;;) {
                        struct tok *t = peek(ps);
                        if (at_end(t)) {
                                r = fail(ps, t->line, "unterminated chain %s", nm);
                                break;
                        }
                        if (is(t, "}")) {
                                next(ps);
                                break;
                        }
                        if (is(t, ";")) {
                                next(ps);
                                continue;
                        }
                        if (is(t, "type") && t->first) {
                                struct tok ty = (next(ps), next(ps)), hk = next(ps), h = next(ps),
                                           pr = next(ps);
                                if (!is(&ty, "filter") && !is(&ty, "nat") && !is(&ty, "route")) {
                                        r = fail(ps, ty.line, "unknown chain type '%.*s'",
                                                 (int)ty.n, ty.s ? ty.s : "");
                                        break;
                                }
                                memcpy(type, ty.s, ty.n);
                                type[ty.n] = 0;
                                if (!is(&hk, "hook") || hook_num(&h, &hook) < 0 ||
                                    !is(&pr, "priority")) {
                                        r = fail(ps, hk.line, "bad base chain declaration");
                                        break;
                                }
                                r = priority(ps, &prio);
                                if (r)
                                        break;
                                base = true;
                                continue;
                        }
                        if (is(t, "policy")) {
                                next(ps);
                                struct tok p = next(ps);
                                if (is(&p, "accept"))
                                        policy = NF_ACCEPT;
                                else if (is(&p, "drop"))
                                        policy = NF_DROP;
                                else {
                                        r = fail(ps, p.line, "bad policy");
                                        break;
                                }
                                has_policy = true;
                                continue;
                        }
                        if (is(t, "comment") && t->first) {
                                next(ps);
                                r = name(ps, comment, "comment");
                                if (r)
                                        break;
                                continue;
                        }
                        r = rule(ps, &rules, fam, table, nm, false, t->line);
                        if (r)
                                break;
                }
        }
        struct nlmsghdr *nh = NULL;
        if (!r)
                r = begin(ps, ps->cb, NFT_MSG_NEWCHAIN, fam, NLM_F_CREATE, line, &nh);
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
                        r = fail(ps, line, "policy on a regular chain");
                }
                if (!r && comment[0]) {
                        struct nftnl_udata_buf *u = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN);
                        if (!u || !nftnl_udata_put_strz(u, 0 /* CHAIN_COMMENT */, comment))
                                r = fail(ps, line, "bad chain comment");
                        else
                                mnl_attr_put(nh, NFTA_CHAIN_USERDATA, nftnl_udata_buf_len(u),
                                             nftnl_udata_buf_data(u));
                        nftnl_udata_buf_free(u);
                }
                if (!r)
                        proxy_nlb_end(ps->cb, nh);
        }
        if (!r && proxy_nlb_append(ps->rb, &rules) < 0)
                r = oom(ps, -ENOMEM);
        proxy_nlb_release(&rules);
        return r;
}

/* ---- tables and commands ---- */

static int table_block(struct ps *ps, uint8_t fam, const char *table, unsigned line)
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
        int r = expect(ps, "{");
        while (!r) {
                struct tok t = next(ps);
                if (is(&t, "}"))
                        break;
                if (is(&t, ";"))
                        continue;
                if (at_end(&t))
                        r = fail(ps, t.line, "unterminated table %s", table);
                else if (is(&t, "comment"))
                        r = name(ps, comment, "comment");
                else if (is(&t, "chain"))
                        r = chain_decl(ps, fam, table, true, t.line);
                else if (is(&t, "set") || is(&t, "map"))
                        r = set_block(ps, fam, table, is(&t, "map"), t.line);
                else
                        r = fail(ps, t.line, "unknown table item '%.*s'", (int)t.n, t.s);
        }
        ps->cb = saved[0];
        ps->sb = saved[1];
        ps->rb = saved[2];
        /* as nft: the table, its chains, its sets with their elements, the rules */
        struct nlmsghdr *nh = NULL;
        if (!r)
                r = begin(ps, ps->main, NFT_MSG_NEWTABLE, fam, NLM_F_CREATE, line, &nh);
        if (!r) {
                mnl_attr_put_strz(nh, NFTA_TABLE_NAME, table);
                mnl_attr_put_u32(nh, NFTA_TABLE_FLAGS, 0);
                if (comment[0]) {
                        struct nftnl_udata_buf *u = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN);
                        if (!u || !nftnl_udata_put_strz(u, 0 /* TABLE_COMMENT */, comment))
                                r = fail(ps, line, "bad table comment");
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
                r = oom(ps, -ENOMEM);
        proxy_nlb_release(&chains);
        proxy_nlb_release(&sets);
        proxy_nlb_release(&rules);
        return r;
}

/* add|create|insert|delete|flush|destroy ... */
static int command(struct ps *ps, const struct tok *verb)
{
        struct tok what = next(ps);
        uint8_t fam = 0;
        char table[NAME_MAX_LEN], nm[NAME_MAX_LEN];
        unsigned line = verb->line;
        bool add = is(verb, "add") || is(verb, "create");
        bool del = is(verb, "delete");
        bool flush = is(verb, "flush");
        uint16_t excl = is(verb, "create") ? NLM_F_EXCL : 0;
        if (is(&what, "ruleset") && flush) {
                sets_forget_table(ps, NFPROTO_UNSPEC, NULL);
                return simple_msg(ps, ps->main, NFT_MSG_DELTABLE, NFPROTO_UNSPEC, 0, line, NULL, 0,
                                  NULL);
        }
        TRY(family(ps, &fam));
        TRY(name(ps, table, "table name"));
        if (is(&what, "table")) {
                if (add && is(peek(ps), "{"))
                        return table_block(ps, fam, table, line);
                if (add)
                        return simple_msg(ps, ps->main, NFT_MSG_NEWTABLE, fam, NLM_F_CREATE | excl,
                                          line, table, 0, NULL);
                if (del) {
                        sets_forget_table(ps, fam, table);
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
                        return chain_decl(ps, fam, table, false, line);
                TRY(name(ps, nm, "chain name"));
                if (del)
                        return simple_msg(ps, ps->main, NFT_MSG_DELCHAIN, fam, 0, line, table,
                                          NFTA_CHAIN_NAME, nm);
                if (flush)
                        return simple_msg(ps, ps->main, NFT_MSG_DELRULE, fam, 0, line, table,
                                          NFTA_RULE_CHAIN, nm);
        } else if (is(&what, "set") || is(&what, "map")) {
                if (add && !excl)
                        return set_block(ps, fam, table, is(&what, "map"), line);
                TRY(name(ps, nm, "set name"));
                if (del) {
                        set_forget(ps, fam, table, nm);
                        return simple_msg(ps, ps->main, NFT_MSG_DELSET, fam, 0, line, table,
                                          NFTA_SET_NAME, nm);
                }
                if (flush)
                        return simple_msg(ps, ps->main, NFT_MSG_DELSETELEM, fam, 0, line, table,
                                          NFTA_SET_ELEM_LIST_SET, nm);
        } else if (is(&what, "element") && (add || del)) {
                struct setdef *s;
                TRY(name(ps, nm, "set name"));
                TRY(set_known(ps, fam, table, nm, line, &s));
                return elements(ps, ps->main, add ? NFT_MSG_NEWSETELEM : NFT_MSG_DELSETELEM, s,
                                line, NULL);
        } else if (is(&what, "rule") && (add || is(verb, "insert"))) {
                TRY(name(ps, nm, "chain name"));
                return rule(ps, ps->main, fam, table, nm, is(verb, "insert"), line);
        }
        return fail(ps, line, "unsupported command '%.*s %.*s'", (int)verb->n, verb->s, (int)what.n,
                    what.s ? what.s : "");
}

int proxy_nft_translate(const char *script, size_t n, struct nlb *b, nfp_set_lookup lookup,
                        void *ctx, char *err, size_t errsize)
{
        struct ps ps = { .p = script,
                         .end = script + n,
                         .line = 1,
                         .at_line_start = true,
                         .errbuf = err,
                         .errsize = errsize,
                         .main = b,
                         .cb = b,
                         .sb = b,
                         .rb = b,
                         .lookup = lookup,
                         .lctx = ctx };
        if (err && errsize)
                err[0] = 0;
        if (memchr(script, 0, n))
                return fail(&ps, 1, "NUL byte in the script");
        while (!ps.err) {
                struct tok t = next(&ps);
                if (at_end(&t))
                        break;
                if (is(&t, ";"))
                        continue;
                if (!t.first && !is(&t, ";")) {
                        fail(&ps, t.line, "unexpected '%.*s'", (int)t.n, t.s);
                        break;
                }
                if (is(&t, "table")) {
                        uint8_t fam;
                        char table[NAME_MAX_LEN];
                        if (family(&ps, &fam) == 0 && name(&ps, table, "table name") == 0)
                                table_block(&ps, fam, table, t.line);
                } else if (is(&t, "add") || is(&t, "create") || is(&t, "insert") ||
                           is(&t, "delete") || is(&t, "flush")) {
                        command(&ps, &t);
                } else {
                        fail(&ps, t.line, "unknown command '%.*s'", (int)t.n, t.s);
                }
                if (!ps.err && ps.have == false) {
                        struct tok *after = peek(&ps);
                        if (!at_end(after) && !after->first && !is(after, ";"))
                                fail(&ps, after->line, "unexpected '%.*s'", (int)after->n,
                                     after->s);
                }
        }
        sets_free(&ps);
        return ps.err;
}

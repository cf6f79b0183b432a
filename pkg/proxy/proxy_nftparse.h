/* What the files of the nft script translator (proxy_nftparse*.c) share:
 * the parser's state, nft's type and expression numbers, and the steps one
 * file's grammar calls in another's. Library-internal. */
#ifndef SVCENV_PROXY_NFTPARSE_H
#define SVCENV_PROXY_NFTPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "proxy_nlbatch.h"

struct nlmsghdr;
struct nftnl_expr;
struct nftnl_rule;

/* linux/netfilter/nf_nat.h clashes with netinet/in.h */
#define NAT_PROTO_SPECIFIED 0x02
#define NAT_PROTO_RANDOM    0x04
#define NAT_PERSISTENT      0x08
#define NAT_RANDOM_FULLY    0x10

#define NAME_MAX_LEN 256 /* NFT_NAME_MAXLEN, with the NUL */
#define MAX_FIELDS   8
#define ELEM_MSG_MAX (60u << 10) /* element bytes per message (u16 nest) */
/* declared sets before the kernel is asked which are new (see set_emit) */
#define FRESH_ASK_AFTER 64

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

struct nfp_field {
        uint8_t k, len; /* kind, bytes */
};

struct nfp_type {
        struct nfp_field f[MAX_FIELDS];
        unsigned n;
};

/* a set the script declared or the kernel described */
struct nfp_set {
        struct nfp_set *next;
        uint8_t family;
        char *table, *name;
        uint32_t id; /* 0: not made by this script */
        uint32_t flags;
        struct nfp_type key, data;
        bool verdict; /* a verdict map */
        bool fresh; /* made by this script, not there before */
};

struct nfp_tok {
        const char *s; /* NULL at the end */
        uint32_t n;
        unsigned line;
        bool first; /* first on its line */
};

/* a loadable expression (one field of a concatenation) */
enum xk { X_PAYLOAD, X_META, X_CT, X_FIB, X_NUMGEN, X_HASH };
struct nfp_load {
        uint8_t k, dep; /* dep: the l4 protocol the field needs matched */
        struct nfp_field t;
        uint32_t a, b, c, d;
};
struct nfp_lhs {
        struct nfp_load f[MAX_FIELDS];
        unsigned n;
        struct nfp_load src[MAX_FIELDS]; /* a hash's input */
        unsigned nsrc;
};

/* one translation: the input, where its messages go, the sets it knows */
struct nfp_parser {
        const char *p, *end;
        unsigned line;
        bool at_line_start;
        struct nfp_tok la;
        bool have;
        int err;
        char *errbuf;
        size_t errsize;
        struct nlb *main, *cb, *sb, *rb; /* chains, sets, rules go here */
        nfp_set_lookup lookup;
        nfp_set_exists exists; /* NULL once it failed */
        bool exists_cheap;
        void *lctx;
        unsigned declared; /* named sets declared so far */
        struct nfp_set **buckets;
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

/* a set declaration: what NEWSET says, from a "set|map { }" block or an
 * anonymous set of a rule */
struct nfp_setdecl {
        struct nfp_type key, data;
        bool map, verdict, typeof_numgen, typeof_verdict, automerge;
        bool typeof_data; /* data given as header fields: desc/field below */
        uint8_t data_desc[MAX_FIELDS], data_field[MAX_FIELDS];
        uint32_t ng_type, ng_mod, ng_off;
        uint32_t flags, size;
        uint64_t timeout;
        char comment[NAME_MAX_LEN];
};

/* the rule being read */
struct nfp_rule {
        struct nfp_parser *ps;
        struct nftnl_rule *r;
        uint8_t fam;
        const char *table;
        unsigned line;
        int depth; /* braces open */
        bool started; /* a statement was read: a new line ends the rule */
        bool one_elem; /* a match read "{ V }" as V: its "}" is still to read */
};

/* returns x when it is negative */
#define TRY(x)      \
 do {               \
  int try_r_ = (x); \
  if (try_r_ < 0)   \
   return try_r_;   \
 } while (0)

/* declares e, a new expression of kind appended to the rule; -ENOMEM */
#define EX(ru, kind, e)                           \
 struct nftnl_expr *e = proxy_nfp_expr(ru, kind); \
 if (!e)                                          \
 return -ENOMEM

/* ---- tokens and errors (proxy_nftparse_tokens.c) ---- */

/* The first error wins: "line N: ..." into the caller's buffer; -EINVAL. */
int proxy_nfp_fail(struct nfp_parser *ps, unsigned line, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* -ENOMEM or -E2BIG (e) as the error, with the current line. */
int proxy_nfp_oom(struct nfp_parser *ps, int e);
struct nfp_tok *proxy_nfp_peek(struct nfp_parser *ps);
struct nfp_tok proxy_nfp_next(struct nfp_parser *ps);
int proxy_nfp_expect(struct nfp_parser *ps, const char *w);
int proxy_nfp_name(struct nfp_parser *ps, char out[NAME_MAX_LEN], const char *what);
int proxy_nfp_family(struct nfp_parser *ps, uint8_t *fam);
int proxy_nfp_number(struct nfp_parser *ps, const struct nfp_tok *t, uint64_t max, uint64_t *v);
int proxy_nfp_duration(struct nfp_parser *ps, const struct nfp_tok *t, uint64_t *ms);

static inline bool special(char c)
{
        return c == '{' || c == '}' || c == ';' || c == ',';
}

static inline bool is(const struct nfp_tok *t, const char *w)
{
        size_t n = strlen(w);
        return t->s && t->n == n && memcmp(t->s, w, n) == 0;
}

static inline bool at_end(const struct nfp_tok *t)
{
        return !t->s;
}

static inline uint32_t pad4(uint32_t n)
{
        return (n + 3) & ~3u;
}

/* ---- types and values (proxy_nftparse_values.c) ---- */

uint8_t proxy_nfp_byteorder(uint8_t k);
uint32_t proxy_nfp_type_len(const struct nfp_type *t);
uint32_t proxy_nfp_type_id(const struct nfp_type *t);
bool proxy_nfp_type_from_kernel(uint32_t id, uint32_t len, struct nfp_type *t);
bool proxy_nfp_type_word(const struct nfp_tok *t, struct nfp_field *f);
int proxy_nfp_value(struct nfp_parser *ps, const struct nfp_tok *t, struct nfp_field f,
                    uint8_t *out, unsigned *plen);
int proxy_nfp_verdict(struct nfp_parser *ps, int32_t *code, char chain[NAME_MAX_LEN]);
int proxy_nfp_concat_value(struct nfp_parser *ps, const struct nfp_type *t, uint8_t *out,
                           unsigned *plen);

/* ---- the sets the script knows (proxy_nftparse_sets.c) ---- */

struct nfp_set *proxy_nfp_set_find(struct nfp_parser *ps, uint8_t fam, const char *table,
                                   const char *nm);
void proxy_nfp_set_forget(struct nfp_parser *ps, uint8_t fam, const char *table, const char *nm);
struct nfp_set *proxy_nfp_set_add(struct nfp_parser *ps, uint8_t fam, const char *table,
                                  const char *nm);
void proxy_nfp_sets_free(struct nfp_parser *ps);
void proxy_nfp_sets_forget_table(struct nfp_parser *ps, uint8_t fam, const char *table);
int proxy_nfp_set_known(struct nfp_parser *ps, uint8_t fam, const char *table, const char *nm,
                        unsigned line, struct nfp_set **ret);

/* ---- messages (proxy_nftparse.c), elements, set declarations ---- */

int proxy_nfp_begin(struct nfp_parser *ps, struct nlb *b, uint16_t type, uint8_t fam,
                    uint16_t flags, unsigned line, struct nlmsghdr **nh);
int proxy_nfp_elements(struct nfp_parser *ps, struct nlb *b, uint16_t type,
                       const struct nfp_set *set, unsigned line, size_t *count);
int proxy_nfp_set_emit(struct nfp_parser *ps, struct nlb *b, uint8_t fam, const char *table,
                       const char *nm, const struct nfp_setdecl *d, bool anonymous, unsigned line,
                       struct nfp_set **ret);
int proxy_nfp_set_block(struct nfp_parser *ps, uint8_t fam, const char *table, bool is_map,
                        unsigned line);

/* ---- rule expressions (proxy_nftparse_expr.c) ---- */

struct nftnl_expr *proxy_nfp_expr(struct nfp_rule *ru, const char *kind);
int proxy_nfp_cmp_ex(struct nfp_rule *ru, uint32_t reg, uint32_t op, const void *data,
                     uint32_t len);
int proxy_nfp_bitwise_ex(struct nfp_rule *ru, uint32_t reg, const void *mask, const void * xor,
                         uint32_t len);
int proxy_nfp_meta_load(struct nfp_rule *ru, uint32_t key, uint32_t reg);
int proxy_nfp_verdict_ex(struct nfp_rule *ru, int32_t code, const char *chain);
int proxy_nfp_lhs_parse(struct nfp_rule *ru, struct nfp_lhs *l);
struct nfp_type proxy_nfp_lhs_type(const struct nfp_lhs *l);
int proxy_nfp_l4_deps(struct nfp_rule *ru, const struct nfp_load *f, unsigned n);
uint32_t proxy_nfp_field_reg(uint32_t base, uint32_t off);
int proxy_nfp_load_one(struct nfp_rule *ru, const struct nfp_load *x, const struct nfp_lhs *l,
                       uint32_t reg, uint32_t len_override);
int proxy_nfp_load_lhs(struct nfp_rule *ru, const struct nfp_lhs *l, uint32_t base);

/* ---- matches, statements, rules, chains ---- */

int proxy_nfp_lookup_ex(struct nfp_rule *ru, uint32_t sreg, int dreg, const struct nfp_set *s,
                        const char *nm, bool inv);
int proxy_nfp_set_ref(struct nfp_rule *ru, const struct nfp_type *key, bool map, bool verdict,
                      const struct nfp_type *data, struct nfp_set **s, char nm[NAME_MAX_LEN]);
int proxy_nfp_match_one(struct nfp_rule *ru, const struct nfp_lhs *l);
int proxy_nfp_rule(struct nfp_parser *ps, struct nlb *b, uint8_t fam, const char *table,
                   const char *chain, bool insert, unsigned line);
int proxy_nfp_chain_decl(struct nfp_parser *ps, uint8_t fam, const char *table, bool block_required,
                         unsigned line);

#endif

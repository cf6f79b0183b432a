/* The nftables backend: one table of our own per family ("svcenv" in `ip` /
 * `ip6`), written by one nft transaction per sync, in the layout of
 * kube-proxy v1.36's nftables proxier. Dispatch is by verdict maps on (IP,
 * protocol, port); a service/local chain DNATs in one rule, `dnat ip addr .
 * port to numgen random mod N map @dnat-<chain>`; only ClientIP affinity
 * keeps a chain per endpoint (timed dynamic sets remember the client), picked
 * by `numgen random mod N vmap @<chain>`. Masquerading needs no chain of its
 * own: ClusterIP traffic from outside the cluster is marked in `services`,
 * external chains mark inline, and hairpin connections (an endpoint reaching
 * itself through a service) are matched in `masquerading` against the set
 * hairpin-connections. loadBalancer source ranges are a named interval set
 * per firewall chain. Service semantics are those of the iptables backend.
 *
 * Why named maps and sets where kube-proxy writes anonymous ones: the
 * kernel walks the whole transaction's commit list for every rule that
 * binds an anonymous set (__nft_set_trans_bind), which makes loading
 * 10,000 services quadratic (169 s instead of 11 s on our test machine). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/hash.h>
#include <svcenv/proxy.h>
#include <svcenv/strv.h>

#include "proxy_internal.h"

#define TABLE         "svcenv"
#define COMMENT       "rules for svcenv (kube-proxy v1.36 semantics)"
#define GLOBAL_MAPS   "\001global maps" /* tracker keys of what no service owns */
#define GLOBAL_CHAINS "\001global chains"
#define NAME_BASE_MAX 240 /* 256 - the longest prefix (16), as kube-proxy */
/* the per-chain endpoint maps: the key is what `numgen random mod N` gives;
 * affinity picks an endpoint chain, everything else the DNAT address */
#define DISPATCH_TYPE "typeof numgen random mod 1 : verdict"
#define DNAT_PREFIX   "dnat-" /* its own name: a map never changes its type */

/* room for "HASH8-" + a base of at most BASE_MAX characters */
#define BASE_MAX  299 /* the bases were once snprintf'd into 300 bytes */
#define NAME_SIZE 320

/* one chain/map name: text and length */
struct nft_name {
        char s[NAME_SIZE];
        size_t n;
};

struct nft {
        const struct se_proxy_options *opt;
        bool v6;
        const char *ip; /* "ip" or "ip6" */
        const char *addr_type;
        unsigned mark;
        char mark_set[48]; /* "meta mark set meta mark | 0xMARK" */
        const char *detect;
        char detect_buf[80];
        /* map and set elements, filled per service, written at the end */
        struct se_strbuf service_ips, service_nodeports, no_ep_services, no_ep_nodeports,
                firewall_ips, cluster_ips, hairpin, sets;
        const char *last_cluster_ip; /* the previous port's, written once a service */
        /* the service chains: chains_buf, or on full syncs out itself (the
         * rest is put in front of them at the end) */
        struct se_strbuf chains_buf, *chains;
        struct se_strbuf flushes; /* partial syncs: changed services' maps to empty */
        struct se_proxy_tracker *tracker; /* NULL: always the whole table */
        /* the service being written: its name base, its endpoints' names */
        struct nft_name base;
        size_t base_n;
        struct nft_name *ep_names;
        bool *ep_done;
        size_t ep_cap;
};

/* "HASH8-base" (kube-proxy's nftables chain-name suffix) with the base
 * at nm->s + 9, bn characters long, and d its SHA-256. */
static void name_digest(struct nft_name *nm, size_t bn, const uint8_t d[SE_SHA256_LEN])
{
        /* 8 characters of base32 come from the first 5 bytes */
        proxy_base32_8(d, nm->s);
        nm->s[8] = '-';
        nm->n = 9 + bn;
        /* kube-proxy's hashAndTruncate: nft names have at most 255
         * characters and our prefixes 16 ("endpoint-", "affinity-", ...) */
        if (nm->n > NAME_BASE_MAX) {
                memcpy(nm->s + NAME_BASE_MAX - 3, "...", 3);
                nm->n = NAME_BASE_MAX;
        }
        nm->s[nm->n] = 0;
}

/* name_digest, hashing the base here */
static int name_finish(struct nft_name *nm, size_t bn)
{
        uint8_t d[SE_SHA256_LEN];
        int r = se_sha256(nm->s + 9, bn, d);
        if (r == 0)
                name_digest(nm, bn, d);
        return r;
}

/* Appends src (n bytes) at *pos of nm's base, within BASE_MAX. */
static void base_add(struct nft_name *nm, size_t *pos, const char *src, size_t n)
{
        size_t room = BASE_MAX - *pos;
        if (n > room)
                n = room;
        memcpy(nm->s + 9 + *pos, src, n);
        *pos += n;
}

static inline void put(struct se_strbuf *sb, const char *s)
{
        se_strbuf_append(sb, s, strlen(s));
}

static inline void put_name(struct se_strbuf *sb, const struct nft_name *nm)
{
        se_strbuf_append(sb, nm->s, nm->n);
}

/* Raw writes into room a caller reserved (room_begin): one check per
 * chain instead of one per piece of text. */
static inline char *cpy(char *p, const void *src, size_t n)
{
        memcpy(p, src, n);
        return p + n;
}
#define CPY_LIT(p, lit) cpy((p), "" lit, sizeof(lit) - 1)

/* Room for n more bytes at the end of sb; where to write, NULL when sb
 * failed (the error stays in sb). */
static inline char *room_begin(struct se_strbuf *sb, size_t n)
{
        if (se_strbuf_grow(sb, n) < 0)
                return NULL;
        return sb->buf + sb->len;
}

static inline void room_end(struct se_strbuf *sb, char *p)
{
        sb->len = (size_t)(p - sb->buf);
        *p = 0;
}

/* nm = prefix + h */
static void prefixed(struct nft_name *nm, const char *prefix, const struct nft_name *h)
{
        size_t pl = strlen(prefix);
        memcpy(nm->s, prefix, pl);
        memcpy(nm->s + pl, h->s, h->n + 1);
        nm->n = pl + h->n;
}

/* The base of endpoint ep's chain name into nm: "ns/name/proto/port__ip/port"
 * (':' of IPv6 as '.'); its length. */
static size_t ep_base(struct nft *w, struct nft_name *nm, const struct se_proxy_endpoint *ep)
{
        size_t pos = w->base_n, n = strlen(ep->ip);
        char digits[16];
        memcpy(nm->s + 9, w->base.s + 9, pos);
        base_add(nm, &pos, "__", 2);
        if (n > 63)
                n = 63;
        size_t ip_at = pos;
        base_add(nm, &pos, ep->ip, n);
        for (size_t k = ip_at; k < pos; k++) /* IPv6 colons as dots */
                if (nm->s[9 + k] == ':')
                        nm->s[9 + k] = '.';
        base_add(nm, &pos, "/", 1);
        base_add(nm, &pos, digits, proxy_int_text(ep->port, digits));
        return pos;
}

/* The name of endpoint chain ep of the service being written, made once
 * per service (names_hash made most of them already). */
static const struct nft_name *ep_name(struct nft *w, const struct se_proxy_svcport *sp,
                                      const struct se_proxy_endpoint *ep, int *r)
{
        size_t i = (size_t)(ep - sp->eps);
        struct nft_name *nm = &w->ep_names[i];
        if (w->ep_done[i])
                return nm;
        if ((*r = name_finish(nm, ep_base(w, nm, ep))) < 0)
                return NULL;
        w->ep_done[i] = true;
        return nm;
}

/* The service's chain-name hash h (base already in h) and, with affinity,
 * its reachable endpoints' names, hashed together: SHA-256 is most of a name's cost and
 * goes faster several at a time (se_sha256_each). 0 or -errno. */
static int names_hash(struct nft *w, const struct se_proxy_svcport *sp,
                      const struct proxy_categories *cat, struct nft_name *h)
{
        enum { BATCH = 16 };
        struct se_sha256_part msgs[BATCH];
        uint8_t d[BATCH][SE_SHA256_LEN];
        struct nft_name *names[BATCH];
        size_t lens[BATCH], k = 0;
        names[0] = h;
        lens[0] = w->base_n;
        msgs[k++] = (struct se_sha256_part){ h->s + 9, w->base_n };
        /* endpoint chains only exist for affinity */
        uint32_t n_eps = sp->affinity ? cat->n_reachable : 0;
        for (uint32_t i = 0; i <= n_eps; i++) {
                if (k == BATCH || (i == n_eps && k)) {
                        int r = se_sha256_each(msgs, k, d);
                        if (r < 0)
                                return r;
                        for (size_t j = 0; j < k; j++)
                                name_digest(names[j], lens[j], d[j]);
                        k = 0;
                }
                if (i == n_eps)
                        break;
                const struct se_proxy_endpoint *ep = cat->reachable[i];
                size_t e = (size_t)(ep - sp->eps);
                names[k] = &w->ep_names[e];
                lens[k] = ep_base(w, names[k], ep);
                msgs[k] = (struct se_sha256_part){ names[k]->s + 9, lens[k] };
                k++;
                w->ep_done[e] = true;
        }
        return 0;
}

/* ",\n\t\t\t" between the elements of a verdict map */
static inline void elem_begin(struct se_strbuf *sb)
{
        if (sb->len)
                se_strbuf_lit(sb, ",\n\t\t\t");
        else
                se_strbuf_lit(sb, "\t\t\t");
}

/* "IP . proto . port : verdict" (tail is " . proto . port : ") */
static void elem_ip(struct se_strbuf *sb, const char *ip, const char *tail, size_t tn,
                    const char *verdict, size_t vn)
{
        elem_begin(sb);
        put(sb, ip);
        se_strbuf_append(sb, tail, tn);
        se_strbuf_append(sb, verdict, vn);
}

/* `flush map|set` for each map and set that text declares and the kernel
 * has (in known, or else in had): their elements are declared again whole.
 * Affinity sets are left alone: their entries are the clients' state. */
static void flush_known(struct nft *w, const char *text, size_t len, const struct se_hashmap *known,
                        const struct se_strv *had, struct se_strbuf *out)
{
        const char *p = text, *end = text + len;
        char key[320];
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
                /* "\tmap NAME {" / "\tset NAME {": the kind is 3 letters */
                bool decl = n > 7 &&
                            (strncmp(p, "\tmap ", 5) == 0 || strncmp(p, "\tset ", 5) == 0) &&
                            strncmp(p + n - 2, " {", 2) == 0 && strncmp(p + 5, "affinity-", 9) != 0;
                if (decl && n - 3 < sizeof(key)) {
                        memcpy(key, p + 1, n - 3);
                        key[n - 3] = 0;
                        if (known ? se_hashmap_get(known, key) != NULL :
                                    had && se_strv_contains(had, key)) {
                                /* "flush KIND FAMILY svcenv NAME" */
                                se_strbuf_lit(out, "flush ");
                                se_strbuf_append(out, key, 4);
                                put(out, w->ip);
                                se_strbuf_lit(out, " " TABLE " ");
                                se_strbuf_append(out, key + 4, n - 7);
                                se_strbuf_lit(out, "\n");
                        }
                }
                p += n + 1;
        }
}

/* "N : goto endpoint-NAME" (affinity) or "N : IP . PORT" (the DNAT
 * target) for the i-th endpoint of a dispatch map. */
static int dispatch_elem(struct nft *w, const struct se_proxy_svcport *sp,
                         const struct se_proxy_endpoint *ep, uint32_t i, struct se_strbuf *s)
{
        int r = 0;
        const struct nft_name *nm = NULL;
        if (sp->affinity && !(nm = ep_name(w, sp, ep, &r)))
                return r;
        size_t ipn = strlen(ep->ip);
        /* ", " + "N : goto endpoint-" + name, or the IP and port */
        char *p = room_begin(s, (nm ? nm->n : ipn) + 48);
        if (!p)
                return 0; /* the error is in s */
        if (i)
                p = CPY_LIT(p, ", ");
        p += proxy_int_text((int32_t)i, p);
        if (nm) {
                p = CPY_LIT(p, " : goto endpoint-");
                p = cpy(p, nm->s, nm->n);
        } else {
                p = CPY_LIT(p, " : ");
                p = cpy(p, ep->ip, ipn);
                p = CPY_LIT(p, " . ");
                p += proxy_int_text(ep->port, p);
        }
        room_end(s, p);
        return 0;
}

/* The pick of a dispatch rule and its map, by the port's in-kernel
 * scheduler: kube-proxy's numgen random, or (svcenv.io/scheduler) numgen
 * inc for rr and a jhash into IPVS's bucket table for sh/dh/mh. Each kind
 * names its maps apart ("rr-", "jh-" before the chain name), so a Service
 * switching kinds gets new maps instead of keeping one declared otherwise. */
struct pick {
        enum proxy_ksched ks;
        const char *prefix; /* of the map names */
        const char *typeof_key;
        char expr[96]; /* "numgen random mod N", "jhash ip saddr mod M seed 0x..." */
        int32_t *buckets; /* PROXY_KS_HASH: M endpoint indexes */
        size_t m;
};

static int pick_init(struct nft *w, const struct se_proxy_svcport *sp,
                     const struct se_proxy_endpoint *const *eps, uint32_t n, struct pick *pk)
{
        pk->ks = proxy_ksched_of(sp, n);
        pk->buckets = NULL;
        pk->m = n;
        if (pk->ks == PROXY_KS_RANDOM) {
                pk->prefix = "";
                pk->typeof_key = "numgen random mod 1";
                snprintf(pk->expr, sizeof(pk->expr), "numgen random mod %u", n);
                return 0;
        }
        if (pk->ks == PROXY_KS_RR) {
                pk->prefix = "rr-";
                pk->typeof_key = "numgen inc mod 1";
                snprintf(pk->expr, sizeof(pk->expr), "numgen inc mod %u", n);
                return 0;
        }
        int r = proxy_ksched_buckets(sp, eps, n, &pk->buckets, &pk->m);
        if (r < 0)
                return r;
        char key[48];
        pk->prefix = "jh-";
        /* the bucket keys are plain 32-bit numbers; nft 1.0.6 crashes
         * listing a map declared `typeof jhash ...` */
        pk->typeof_key = "numgen random mod 1";
        snprintf(pk->expr, sizeof(pk->expr), "jhash %s mod %zu seed 0x%x",
                 proxy_ksched_key(sp, w->v6, key, sizeof(key)), pk->m, PROXY_JHASH_SEED);
        return 0;
}

/* chain `service-…` / `local-…`: with affinity, the clients' endpoint
 * chains, then an endpoint chain by the pick; else one DNAT to an endpoint
 * by the pick (kube-proxy v1.36 has endpoint chains for affinity only) */
static int endpoint_dispatch(struct nft *w, const struct se_proxy_svcport *sp,
                             const struct nft_name *chain_name,
                             const struct se_proxy_endpoint *const *eps, uint32_t n)
{
        struct se_strbuf *c = w->chains, *s = &w->sets;
        struct pick pk;
        int r = pick_init(w, sp, eps, n, &pk);
        if (r < 0)
                return r;
        se_strbuf_lit(c, "\tchain ");
        put_name(c, chain_name);
        se_strbuf_lit(c, " {\n");
        if (sp->affinity) {
                for (uint32_t i = 0; i < n; i++) {
                        const struct nft_name *nm = ep_name(w, sp, eps[i], &r);
                        if (!nm)
                                goto out;
                        se_strbuf_lit(c, "\t\t");
                        put(c, w->ip);
                        se_strbuf_lit(c, " saddr @affinity-");
                        put_name(c, nm);
                        se_strbuf_lit(c, " goto endpoint-");
                        put_name(c, nm);
                        se_strbuf_lit(c, "\n");
                }
                se_strbuf_lit(c, "\t\t");
                put(c, pk.expr);
                se_strbuf_lit(c, " vmap @");
                put(c, pk.prefix);
                put_name(c, chain_name);
                se_strbuf_lit(c, "\n\t}\n");
                se_strbuf_lit(s, "\tmap ");
                put(s, pk.prefix);
                put_name(s, chain_name);
                se_strbuf_lit(s, " {\n\t\ttypeof ");
                put(s, pk.typeof_key);
                se_strbuf_lit(s, " : verdict\n\t\telements = { ");
        } else {
                se_strbuf_lit(c, "\t\tmeta l4proto ");
                put(c, sp->proto);
                se_strbuf_lit(c, " dnat ");
                put(c, w->ip);
                se_strbuf_lit(c, " addr . port to ");
                put(c, pk.expr);
                se_strbuf_lit(c, " map @" DNAT_PREFIX);
                put(c, pk.prefix);
                put_name(c, chain_name);
                se_strbuf_lit(c, "\n\t}\n");
                se_strbuf_lit(s, "\tmap " DNAT_PREFIX);
                put(s, pk.prefix);
                put_name(s, chain_name);
                se_strbuf_lit(s, " {\n\t\ttypeof ");
                put(s, pk.typeof_key);
                se_strbuf_lit(s, " : ");
                /* (`th dport` would not do: nft, reading the rule back,
                 * finds it conflicts with the rule's `meta l4proto`) */
                put(s, w->ip);
                se_strbuf_lit(s, " daddr . ");
                put(s, sp->proto);
                se_strbuf_lit(s, " dport\n\t\telements = { ");
        }
        if (pk.buckets) {
                for (size_t b = 0; b < pk.m; b++)
                        if (pk.buckets[b] >= 0 &&
                            (r = dispatch_elem(w, sp, eps[pk.buckets[b]], (uint32_t)b, s)) < 0)
                                goto out;
        } else {
                for (uint32_t i = 0; i < n; i++)
                        if ((r = dispatch_elem(w, sp, eps[i], i, s)) < 0)
                                goto out;
        }
        se_strbuf_lit(s, " }\n\t}\n");
out:
        free(pk.buckets);
        return r;
}

/* hairpin-connections: "EP . EP . proto . port" for each endpoint on this
 * node, so a connection DNATed back to its own source is masqueraded */
static void hairpin_elem(struct nft *w, const struct se_proxy_svcport *sp,
                         const struct se_proxy_endpoint *ep)
{
        size_t ipn = strlen(ep->ip), pn = strlen(sp->proto);
        char *p = room_begin(&w->hairpin, 2 * ipn + pn + 40);
        if (!p)
                return; /* the error is in the buffer */
        p = w->hairpin.len ? CPY_LIT(p, ",\n\t\t\t") : CPY_LIT(p, "\t\t\t");
        p = cpy(p, ep->ip, ipn);
        p = CPY_LIT(p, " . ");
        p = cpy(p, ep->ip, ipn);
        p = CPY_LIT(p, " . ");
        p = cpy(p, sp->proto, pn);
        p = CPY_LIT(p, " . ");
        p += proxy_int_text(ep->port, p);
        room_end(&w->hairpin, p);
}

/* one element of an element list: where it is in the text, its hash */
struct elem_at {
        size_t at, len;
        uint64_t hash;
};

/* Drops repeated elements of an element list (",\n\t\t\t" between them):
 * services sharing an endpoint give its hairpin element twice. Most
 * elements are unique, so only those whose hash bucket is hit twice (a
 * small counting table, 16 buckets an element) are compared exactly: 100,000
 * elements cost a hash each, not a hash-map insert each. 0 or -ENOMEM. */
static int elems_unique(struct se_strbuf *sb)
{
        struct elem_at *el = NULL;
        size_t n = 0, cap = 0;
        for (const char *p = sb->len ? sb->buf : NULL; p;) {
                while (*p == '\t')
                        p++;
                const char *sep = strstr(p, ",\n");
                size_t len = sep ? (size_t)(sep - p) : strlen(p);
                if (n == cap) {
                        cap = cap ? 2 * cap : 1024;
                        struct elem_at *grown = se_reallocarray(el, cap, sizeof(*el));
                        if (!grown) {
                                free(el);
                                return -ENOMEM;
                        }
                        el = grown;
                }
                el[n++] = (struct elem_at){ (size_t)(p - sb->buf), len, se_hash_mem(p, len) };
                p = sep ? sep + 2 : NULL;
        }
        size_t slots = 64;
        while (slots < 16 * n)
                slots <<= 1;
        uint8_t *hits = n ? se_calloc(slots, 1) : NULL;
        if (n && !hits) {
                free(el);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
                if (hits[el[i].hash & (slots - 1)] < 2)
                        hits[el[i].hash & (slots - 1)]++;
        struct se_hashmap seen = SE_HASHMAP_INIT;
        size_t out = 0;
        int r = 0;
        /* kept elements move down in place: never past one not yet read */
        for (size_t i = 0; i < n && r == 0; i++) {
                const char *e = sb->buf + el[i].at;
                if (hits[el[i].hash & (slots - 1)] > 1) {
                        char *key = se_strndup(e, el[i].len);
                        if (!key || se_hashmap_get(&seen, key)) {
                                r = key ? 0 : -ENOMEM;
                                free(key);
                                continue;
                        }
                        if ((r = se_hashmap_put(&seen, key, key, NULL)) < 0) {
                                free(key);
                                break;
                        }
                }
                memcpy(sb->buf + out, out ? ",\n\t\t\t" : "\t\t\t", out ? 5 : 3);
                out += out ? 5 : 3;
                memmove(sb->buf + out, e, el[i].len);
                out += el[i].len;
        }
        if (r == 0 && n) {
                sb->len = out;
                sb->buf[out] = 0;
        }
        const char *k;
        void *v;
        for (size_t it = 0; se_hashmap_next(&seen, &it, &k, &v);)
                free(v);
        se_hashmap_release(&seen);
        free(hits);
        free(el);
        return r;
}

/* Endpoint chain and affinity set of ep (services with ClientIP affinity
 * only): the client is remembered, then DNATed. */
static int endpoint_chain(struct nft *w, const struct se_proxy_svcport *sp,
                          const struct se_proxy_endpoint *ep)
{
        struct se_strbuf *c = w->chains, *s = &w->sets;
        int r = 0;
        const struct nft_name *en = ep_name(w, sp, ep, &r);
        if (!en)
                return r;
        se_strbuf_lit(s, "\tset affinity-");
        put_name(s, en);
        se_strbuf_lit(s, " {\n\t\ttype ");
        put(s, w->addr_type);
        se_strbuf_lit(s, "\n\t\tflags dynamic,timeout\n\t\ttimeout ");
        se_strbuf_add_int(s, sp->affinity_timeout);
        se_strbuf_lit(s, "s\n\t}\n");
        size_t ipn = strlen(ep->ip), fn = strlen(w->ip), pn = strlen(sp->proto);
        /* the text below with two names, one IP, the family once */
        char *p = room_begin(c, 2 * en->n + ipn + fn + pn + 128);
        if (!p)
                return 0; /* the error is in c */
        p = CPY_LIT(p, "\tchain endpoint-");
        p = cpy(p, en->s, en->n);
        p = CPY_LIT(p, " {\n\t\tupdate @affinity-");
        p = cpy(p, en->s, en->n);
        p = CPY_LIT(p, " { ");
        p = cpy(p, w->ip, fn);
        p = CPY_LIT(p, " saddr }\n");
        p = CPY_LIT(p, "\t\tmeta l4proto ");
        p = cpy(p, sp->proto, pn);
        p = CPY_LIT(p, " dnat to ");
        if (w->v6) {
                p = CPY_LIT(p, "[");
                p = cpy(p, ep->ip, ipn);
                p = CPY_LIT(p, "]:");
        } else {
                p = cpy(p, ep->ip, ipn);
                p = CPY_LIT(p, ":");
        }
        p += proxy_int_text(ep->port, p);
        p = CPY_LIT(p, "\n\t}\n");
        room_end(c, p);
        return 0;
}

/* Room for a name per endpoint of sp. 0 or -ENOMEM. */
static int ep_names_reserve(struct nft *w, const struct se_proxy_svcport *sp)
{
        if (sp->n_eps > w->ep_cap) {
                size_t cap = sp->n_eps < 16 ? 16 : sp->n_eps;
                struct nft_name *names = se_reallocarray(w->ep_names, cap, sizeof(*names));
                if (!names)
                        return -ENOMEM;
                w->ep_names = names;
                bool *done = se_reallocarray(w->ep_done, cap, 1);
                if (!done)
                        return -ENOMEM;
                w->ep_done = done;
                w->ep_cap = cap;
        }
        if (sp->n_eps)
                memset(w->ep_done, 0, sp->n_eps);
        return 0;
}

/* Firewall chain and its source-range set. */
static void firewall(struct nft *w, const struct se_proxy_svcport *sp, const struct nft_name *fw)
{
        struct se_strbuf *c = w->chains, *s = &w->sets;
        se_strbuf_lit(c, "\tchain ");
        put_name(c, fw);
        se_strbuf_lit(c, " {\n\t\t");
        put(c, w->ip);
        se_strbuf_lit(c, " saddr != @");
        put_name(c, fw);
        se_strbuf_lit(c, " drop\n\t}\n");
        /* auto-merge: ranges may overlap (10.0.0.0/8, 10.1.0.0/16) */
        se_strbuf_lit(s, "\tset ");
        put_name(s, fw);
        se_strbuf_lit(s, " {\n\t\ttype ");
        put(s, w->addr_type);
        se_strbuf_lit(s, "\n\t\tflags interval\n\t\tauto-merge\n\t\telements = { ");
        bool from_node = false;
        enum se_ip_family fam = w->v6 ? SE_IPV6 : SE_IPV4;
        for (uint32_t i = 0; i < sp->n_source_ranges; i++) {
                if (i)
                        se_strbuf_lit(s, ", ");
                put(s, sp->source_ranges[i]);
                for (unsigned k = 0; k < w->opt->n_node_ips; k++)
                        if (w->opt->node_ips[k].family == fam) {
                                from_node |= se_cidr_contains(&sp->source_cidrs[i],
                                                              &w->opt->node_ips[k]);
                                break; /* the primary node IP */
                        }
        }
        /* VIPs looped back locally arrive with the VIP as source */
        for (uint32_t i = 0; from_node && i < sp->n_lb_vips; i++) {
                se_strbuf_lit(s, ", ");
                put(s, sp->lb_vips[i]);
        }
        se_strbuf_lit(s, " }\n\t}\n");
}

static int write_service(struct nft *w, const struct se_proxy_svcport *sp)
{
        struct proxy_categories cat;
        struct nft_name h = { .n = 0 }, svc, loc, ext, fw;
        size_t pos = 0;
        /* the base "ns/name/proto/port_name", kept for the endpoints' */
        base_add(&w->base, &pos, sp->ns, strlen(sp->ns));
        base_add(&w->base, &pos, "/", 1);
        base_add(&w->base, &pos, sp->name, strlen(sp->name));
        base_add(&w->base, &pos, "/", 1);
        base_add(&w->base, &pos, sp->proto, strlen(sp->proto));
        base_add(&w->base, &pos, "/", 1);
        base_add(&w->base, &pos, sp->port_name, strlen(sp->port_name));
        w->base_n = pos;
        memcpy(h.s + 9, w->base.s + 9, pos);
        int r = ep_names_reserve(w, sp);
        if (r < 0 || (r = proxy_categorize(sp, w->opt, &cat)) < 0)
                return r;
        if ((r = names_hash(w, sp, &cat, &h)) < 0)
                goto out;
        size_t chains_at = w->chains->len, sets_at = w->sets.len;
        prefixed(&svc, "service-", &h);
        prefixed(&loc, "local-", &h);
        prefixed(&ext, "external-", &h);
        prefixed(&fw, "firewall-", &h);
        bool has_any = cat.has_any;
        bool has_internal = has_any && !(sp->internal_local && cat.n_local == 0);
        bool has_external = has_any && !(sp->external_local && cat.n_local == 0);
        const struct nft_name *internal_chain = sp->internal_local ? &loc : &svc;
        const struct nft_name *external_policy = sp->external_local ? &loc : &svc;
        bool uses_ext = has_any && proxy_externally_accessible(sp);
        bool uses_fw = has_any && sp->n_lb_vips > 0 && sp->n_source_ranges > 0;
        /* verdicts: "goto CHAIN" and for no endpoints */
        char go_int[NAME_SIZE + 8], go_ext[NAME_SIZE + 8], go_fw[NAME_SIZE + 8];
        size_t go_int_n = 5 + internal_chain->n, go_ext_n = 5 + ext.n, go_fw_n = 5 + fw.n;
        memcpy(go_int, "goto ", 5);
        memcpy(go_int + 5, internal_chain->s, internal_chain->n);
        memcpy(go_ext, "goto ", 5);
        memcpy(go_ext + 5, ext.s, ext.n);
        memcpy(go_fw, "goto ", 5);
        memcpy(go_fw + 5, fw.s, fw.n);
        const char *no_ep = !has_any ? "goto reject-chain" : "drop";
        size_t no_ep_n = strlen(no_ep);
        /* " . proto . port : " after each IP */
        char tail[48], digits[16];
        size_t pl = strlen(sp->proto), tn = 0;
        memcpy(tail, " . ", 3);
        memcpy(tail + 3, sp->proto, pl);
        memcpy(tail + 3 + pl, " . ", 3);
        tn = 6 + pl;
        size_t dn = proxy_int_text(sp->port, digits);
        memcpy(tail + tn, digits, dn);
        memcpy(tail + tn + dn, " : ", 3);
        tn += dn + 3;

        /* every service port's ClusterIP, with endpoints or not: the set
         * cluster-ips-check rejects unused ports of */
        if (!w->last_cluster_ip || strcmp(w->last_cluster_ip, sp->cluster_ip) != 0) {
                elem_begin(&w->cluster_ips);
                put(&w->cluster_ips, sp->cluster_ip);
                w->last_cluster_ip = sp->cluster_ip;
        }
        if (has_internal)
                elem_ip(&w->service_ips, sp->cluster_ip, tail, tn, go_int, go_int_n);
        else
                elem_ip(&w->no_ep_services, sp->cluster_ip, tail, tn, no_ep, no_ep_n);
        for (uint32_t i = 0; i < sp->n_external_ips; i++) {
                if (has_any)
                        elem_ip(&w->service_ips, sp->external_ips[i], tail, tn, go_ext, go_ext_n);
                if (!has_external)
                        elem_ip(&w->no_ep_services, sp->external_ips[i], tail, tn, no_ep, no_ep_n);
        }
        for (uint32_t i = 0; i < sp->n_lb_vips; i++) {
                if (has_any)
                        elem_ip(&w->service_ips, sp->lb_vips[i], tail, tn, go_ext, go_ext_n);
                if (!has_external)
                        elem_ip(&w->no_ep_services, sp->lb_vips[i], tail, tn, no_ep, no_ep_n);
                if (uses_fw)
                        elem_ip(&w->firewall_ips, sp->lb_vips[i], tail, tn, go_fw, go_fw_n);
        }
        if (sp->node_port) {
                /* "proto . nodeport : " */
                char np[32];
                size_t npn = pl;
                memcpy(np, sp->proto, pl);
                memcpy(np + npn, " . ", 3);
                npn += 3;
                npn += proxy_int_text(sp->node_port, np + npn);
                memcpy(np + npn, " : ", 3);
                npn += 3;
                if (has_any) {
                        elem_begin(&w->service_nodeports);
                        se_strbuf_append(&w->service_nodeports, np, npn);
                        se_strbuf_append(&w->service_nodeports, go_ext, go_ext_n);
                }
                if (!has_external) {
                        elem_begin(&w->no_ep_nodeports);
                        se_strbuf_append(&w->no_ep_nodeports, np, npn);
                        se_strbuf_append(&w->no_ep_nodeports, no_ep, no_ep_n);
                }
        }

        struct se_strbuf *c = w->chains;
        if (uses_ext) {
                se_strbuf_lit(c, "\tchain ");
                put_name(c, &ext);
                se_strbuf_lit(c, " {\n");
                if (!sp->external_local) {
                        se_strbuf_lit(c, "\t\t");
                        put(c, w->mark_set);
                        se_strbuf_lit(c, "\n");
                } else {
                        if (w->detect) {
                                se_strbuf_lit(c, "\t\t");
                                put(c, w->ip);
                                se_strbuf_lit(c, " saddr ");
                                put(c, w->detect);
                                se_strbuf_lit(c, " goto ");
                                put_name(c, &svc);
                                se_strbuf_lit(c, "\n");
                        }
                        se_strbuf_lit(c, "\t\tfib saddr type local ");
                        put(c, w->mark_set);
                        se_strbuf_lit(c, "\n");
                        se_strbuf_lit(c, "\t\tfib saddr type local goto ");
                        put_name(c, &svc);
                        se_strbuf_lit(c, "\n");
                }
                if (has_external) {
                        se_strbuf_lit(c, "\t\tgoto ");
                        put_name(c, external_policy);
                        se_strbuf_lit(c, "\n");
                }
                se_strbuf_lit(c, "\t}\n");
        }
        if (uses_fw)
                firewall(w, sp, &fw);
        bool uses_cluster = cat.n_cluster > 0 && proxy_uses_cluster(sp);
        bool uses_local = cat.n_local > 0 && proxy_uses_local(sp);
        if (uses_cluster && (r = endpoint_dispatch(w, sp, &svc, cat.cluster, cat.n_cluster)) < 0)
                goto out;
        if (uses_local && (r = endpoint_dispatch(w, sp, &loc, cat.local, cat.n_local)) < 0)
                goto out;
        for (uint32_t i = 0; i < cat.n_reachable; i++) {
                if (cat.reachable[i]->local) /* only a local pod can hairpin here */
                        hairpin_elem(w, sp, cat.reachable[i]);
                if (sp->affinity && (r = endpoint_chain(w, sp, cat.reachable[i])) < 0)
                        goto out;
        }
        r = w->tracker ?
                    proxy_tracker_segment(w->tracker, sp, &w->sets, sets_at, w->chains, chains_at) :
                    0;
        /* a partial sync rewriting this service: its maps the last sync
         * made are emptied first (a full sync does all of them) */
        if (r == 0 && w->tracker && !proxy_tracker_full(w->tracker) && w->sets.len > sets_at) {
                struct se_strv had = SE_STRV_INIT;
                r = proxy_tracker_prev(w->tracker, sp, &had);
                if (r == 0)
                        flush_known(w, w->sets.buf + sets_at, w->sets.len - sets_at, NULL, &had,
                                    &w->flushes);
                se_strv_release(&had);
        }
out:
        proxy_categories_release(&cat);
        return r;
}

static void vmap(struct se_strbuf *out, const char *name, const char *type,
                 const struct se_strbuf *elems)
{
        se_strbuf_lit(out, "\tmap ");
        put(out, name);
        se_strbuf_lit(out, " {\n\t\ttype ");
        put(out, type);
        se_strbuf_lit(out, " : verdict\n");
        if (elems->len) {
                se_strbuf_lit(out, "\t\telements = {\n");
                se_strbuf_append(out, elems->buf, elems->len);
                se_strbuf_lit(out, "\n\t\t}\n");
        }
        se_strbuf_lit(out, "\t}\n");
}

static void cluster_ips_set(struct nft *w, struct se_strbuf *out)
{
        se_strbuf_printf(out, "\tset cluster-ips {\n\t\ttype %s\n", w->addr_type);
        if (w->cluster_ips.len) {
                se_strbuf_lit(out, "\t\telements = {\n");
                se_strbuf_append(out, w->cluster_ips.buf, w->cluster_ips.len);
                se_strbuf_lit(out, "\n\t\t}\n");
        }
        se_strbuf_lit(out, "\t}\n");
}

static void hairpin_set(struct nft *w, struct se_strbuf *out)
{
        se_strbuf_printf(
                out, "\tset hairpin-connections {\n\t\ttype %s . %s . inet_proto . inet_service\n",
                w->addr_type, w->addr_type);
        if (w->hairpin.len) {
                se_strbuf_lit(out, "\t\telements = {\n");
                se_strbuf_append(out, w->hairpin.buf, w->hairpin.len);
                se_strbuf_lit(out, "\n\t\t}\n");
        }
        se_strbuf_lit(out, "\t}\n");
}

/* kube-proxy's cluster-ips-check, after DNAT: what still goes to a ClusterIP
 * was not a service port of it (reject); what goes elsewhere in the service
 * CIDRs is to an unallocated ClusterIP (drop). */
static void cluster_ips_check(struct nft *w, const struct se_proxy_table *t, struct se_strbuf *out)
{
        se_strbuf_printf(out, "\tchain cluster-ips-check {\n\t\t%s daddr @cluster-ips reject\n",
                         w->ip);
        /* one set for any count, as kube-proxy; a single CIDR loads as a
         * plain compare both ways (nft -f, and the netlink translator's
         * one-element-set rule) */
        if (t->n_service_cidrs) {
                se_strbuf_printf(out, "\t\t%s daddr { ", w->ip);
                for (uint32_t i = 0; i < t->n_service_cidrs; i++)
                        se_strbuf_printf(out, "%s%s", i ? ", " : "", t->service_cidrs[i]);
                se_strbuf_lit(out, " } drop\n");
        }
        se_strbuf_lit(out, "\t}\n");
}

static void nodeport_match(struct nft *w, struct se_strbuf *out)
{
        if (proxy_nodeport_all(w->opt, w->v6 ? SE_IPV6 : SE_IPV4)) {
                se_strbuf_printf(out, "fib daddr type local %s daddr != %s", w->ip,
                                 w->v6 ? "::1" : "127.0.0.0/8");
                return;
        }
        se_strbuf_printf(out, "%s daddr @nodeport-ips", w->ip);
}

static void nodeport_ips(struct nft *w, struct se_strbuf *out)
{
        const struct se_proxy_options *o = w->opt;
        enum se_ip_family fam = w->v6 ? SE_IPV6 : SE_IPV4;
        bool first = true;
        if (proxy_nodeport_all(o, fam))
                return;
        se_strbuf_printf(out, "\tset nodeport-ips {\n\t\ttype %s\n", w->addr_type);
        for (unsigned i = 0; i < o->n_node_ips; i++) {
                const struct se_ip *ip = &o->node_ips[i];
                if (ip->family != fam || !proxy_nodeport_ip(o, i))
                        continue;
                char text[64];
                se_ip_format(ip, text, sizeof(text));
                se_strbuf_printf(out, "%s%s", first ? "\t\telements = { " : ", ", text);
                first = false;
        }
        se_strbuf_puts(out, first ? "\t}\n" : " }\n\t}\n");
}

/* What the last applied sync defined and this one does not: every chain
 * is emptied first (they may jump to each other) and every endpoint map
 * (its elements name endpoint chains), then the chains deleted, then the
 * maps and sets. */
static int delete_gone(struct nft *w, struct se_strbuf *out)
{
        struct se_strv gone = SE_STRV_INIT;
        int r = proxy_tracker_gone(w->tracker, &gone);
        for (int pass = 0; pass < 3; pass++)
                se_strv_foreach(g, &gone) {
                        bool is_chain = strncmp(*g, "chain ", 6) == 0;
                        bool is_map = strncmp(*g, "map ", 4) == 0;
                        const char *name = strchr(*g, ' ') + 1;
                        int kl = (int)(name - 1 - *g);
                        if (pass == 0 && (is_chain || is_map))
                                se_strbuf_printf(out, "flush %.*s %s " TABLE " %s\n", kl, *g, w->ip,
                                                 name);
                        else if ((pass == 1 && is_chain) || (pass == 2 && !is_chain))
                                se_strbuf_printf(out, "delete %.*s %s " TABLE " %s\n", kl, *g,
                                                 w->ip, name);
                }
        se_strv_release(&gone);
        return r;
}

/* A partial sync: the table stays; changed services' chains and endpoint
 * maps are flushed and refilled, the global verdict maps rewritten or
 * edited, gone chains, maps and sets deleted. Affinity sets of unchanged
 * endpoints keep their entries. */
static int partial(struct nft *w, const char *key, struct se_strbuf *out)
{
        enum { CLUSTER_IPS = 5, HAIRPIN = 6 }; /* the sets' indexes among the tracked elements */
        const char *p = w->chains->buf, *end = w->chains->buf + w->chains->len;
        static const char *const maps[] = { "service-ips", "service-nodeports",
                                            "no-endpoint-services", "no-endpoint-nodeports",
                                            "firewall-ips" };
        while (p < end) { /* "\tchain NAME {" lines of what is rewritten */
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
                if (n > 9 && strncmp(p, "\tchain ", 7) == 0) {
                        int len = (int)(n - 9);
                        se_strbuf_printf(out, "add chain %s " TABLE " %.*s\n", w->ip, len, p + 7);
                        se_strbuf_printf(out, "flush chain %s " TABLE " %.*s\n", w->ip, len, p + 7);
                }
                p += n + 1;
        }
        se_strbuf_add(out, w->flushes.buf, w->flushes.len);
        /* with minimal syncs on, maps known from the last sync get single
         * element deletes/adds (after the chains they name exist, before
         * gone chains are deleted); the others are flushed and rewritten */
        const struct se_strbuf *elems[] = { &w->service_ips, &w->service_nodeports,
                                            &w->no_ep_services, &w->no_ep_nodeports,
                                            &w->firewall_ips };
        const char *types[] = { key, "inet_proto . inet_service", key, "inet_proto . inet_service",
                                key };
        struct proxy_top *top = proxy_tracker_top(w->tracker);
        struct se_strbuf del, add;
        bool edited[SE_ARRAY_SIZE(maps)] = { false };
        int r = 0;
        se_strbuf_init(&del, 0);
        se_strbuf_init(&add, 0);
        bool cips_edited = false;
        for (size_t i = 0; top && i < SE_ARRAY_SIZE(maps) && r >= 0; i++) {
                r = proxy_top_elems(top, true, (int)i, w->ip, TABLE, maps[i], elems[i]->buf,
                                    elems[i]->len, &del, &add);
                edited[i] = r == 1;
        }
        if (top && r >= 0) {
                r = proxy_top_elems(top, true, CLUSTER_IPS, w->ip, TABLE, "cluster-ips",
                                    w->cluster_ips.buf, w->cluster_ips.len, &del, &add);
                cips_edited = r == 1;
        }
        bool hairpin_edited = false;
        if (top && r >= 0) {
                r = proxy_top_elems(top, true, HAIRPIN, w->ip, TABLE, "hairpin-connections",
                                    w->hairpin.buf, w->hairpin.len, &del, &add);
                hairpin_edited = r == 1;
        }
        for (size_t i = 0; i < SE_ARRAY_SIZE(maps); i++)
                if (!edited[i])
                        se_strbuf_printf(out, "flush map %s " TABLE " %s\n", w->ip, maps[i]);
        if (!cips_edited)
                se_strbuf_printf(out, "flush set %s " TABLE " cluster-ips\n", w->ip);
        if (!hairpin_edited)
                se_strbuf_printf(out, "flush set %s " TABLE " hairpin-connections\n", w->ip);
        bool block = w->sets.len || w->chains->len || !cips_edited || !hairpin_edited;
        for (size_t i = 0; i < SE_ARRAY_SIZE(maps); i++)
                block |= !edited[i];
        /* an empty block still costs nft a read of the whole ruleset */
        if (block)
                se_strbuf_printf(out, "table %s " TABLE " {\n", w->ip);
        for (size_t i = 0; i < SE_ARRAY_SIZE(maps); i++)
                if (!edited[i])
                        vmap(out, maps[i], types[i], elems[i]);
        if (!cips_edited)
                cluster_ips_set(w, out);
        if (!hairpin_edited)
                hairpin_set(w, out);
        se_strbuf_add(out, w->sets.buf, w->sets.len);
        se_strbuf_add(out, w->chains->buf, w->chains->len);
        if (block)
                se_strbuf_puts(out, "}\n");
        se_strbuf_add(out, del.buf, del.len);
        se_strbuf_add(out, add.buf, add.len);
        r = r < 0 ? r : se_strbuf_failed(&del) ?: se_strbuf_failed(&add);
        se_strbuf_release(&del);
        se_strbuf_release(&add);
        return r < 0 ? r : delete_gone(w, out);
}

/* the base chains globals() writes */
static const char *const base_chains[] = {
        "filter-prerouting-pre-dnat", "filter-input",   "filter-forward", "filter-output",
        "filter-output-pre-dnat",     "nat-prerouting", "nat-output",     "nat-postrouting"
};

/* The table's own maps and sets (maps) and its base and top-level chains
 * (chains): the same on every full sync. */
static void globals(struct nft *w, const struct se_proxy_table *t, const char *key,
                    struct se_strbuf *maps, struct se_strbuf *chains)
{
        const struct se_proxy_options *opt = w->opt;
        struct se_strbuf *out = chains;
        vmap(maps, "service-ips", key, &w->service_ips);
        vmap(maps, "service-nodeports", "inet_proto . inet_service", &w->service_nodeports);
        vmap(maps, "no-endpoint-services", key, &w->no_ep_services);
        vmap(maps, "no-endpoint-nodeports", "inet_proto . inet_service", &w->no_ep_nodeports);
        vmap(maps, "firewall-ips", key, &w->firewall_ips);
        cluster_ips_set(w, maps);
        nodeport_ips(w, maps);
        hairpin_set(w, maps);
        /* base chains (v1.36 names and priorities): the firewall before
         * DNAT, the endpoint checks after it */
        se_strbuf_puts(
                out,
                "\tchain filter-prerouting-pre-dnat {\n\t\ttype filter hook prerouting priority -110; policy accept;\n"
                "\t\tct state new jump firewall-check\n\t}\n");
        se_strbuf_puts(
                out,
                "\tchain filter-input {\n\t\ttype filter hook input priority 0; policy accept;\n"
                "\t\tct state new jump nodeport-endpoints-check\n"
                "\t\tct state new jump service-endpoints-check\n\t}\n");
        se_strbuf_puts(
                out,
                "\tchain filter-forward {\n\t\ttype filter hook forward priority 0; policy accept;\n"
                "\t\tct state new jump service-endpoints-check\n"
                "\t\tct state new jump cluster-ips-check\n\t}\n");
        se_strbuf_puts(
                out,
                "\tchain filter-output {\n\t\ttype filter hook output priority 0; policy accept;\n"
                "\t\tct state new jump service-endpoints-check\n"
                "\t\tct state new jump cluster-ips-check\n\t}\n");
        se_strbuf_puts(
                out,
                "\tchain filter-output-pre-dnat {\n\t\ttype filter hook output priority -110; policy accept;\n"
                "\t\tct state new jump firewall-check\n\t}\n");
        se_strbuf_puts(
                out,
                "\tchain nat-prerouting {\n\t\ttype nat hook prerouting priority dstnat; policy accept;\n"
                "\t\tjump services\n\t}\n");
        se_strbuf_puts(
                out,
                "\tchain nat-output {\n\t\ttype nat hook output priority -100; policy accept;\n"
                "\t\tjump services\n\t}\n");
        se_strbuf_puts(
                out,
                "\tchain nat-postrouting {\n\t\ttype nat hook postrouting priority srcnat; policy accept;\n"
                "\t\tjump masquerading\n\t}\n");
        /* the mark is cleared as it is used: a packet sent on through a
         * tunnel keeps its skb (kubernetes#92035) */
        const char *fully = opt->random_fully ? " fully-random" : "";
        se_strbuf_printf(
                out,
                "\tchain masquerading {\n\t\tmeta mark & 0x%x != 0 meta mark set meta mark ^ 0x%x masquerade%s\n"
                "\t\tct status dnat %s saddr . %s daddr . meta l4proto . th dport @hairpin-connections masquerade%s\n\t}\n",
                w->mark, w->mark, fully, w->ip, w->ip, fully);
        se_strbuf_puts(out, "\tchain services {\n");
        /* ClusterIP traffic from outside the cluster (all of it with
         * --masquerade-all) may bounce off-node: masqueraded */
        if (opt->masquerade_all)
                se_strbuf_printf(out, "\t\t%s daddr @cluster-ips %s\n", w->ip, w->mark_set);
        else if (w->detect)
                se_strbuf_printf(out, "\t\t%s daddr @cluster-ips %s saddr != %s %s\n", w->ip, w->ip,
                                 w->detect, w->mark_set);
        se_strbuf_printf(out, "\t\t%s daddr . meta l4proto . th dport vmap @service-ips\n\t\t",
                         w->ip);
        nodeport_match(w, out);
        se_strbuf_puts(out, " meta l4proto . th dport vmap @service-nodeports\n\t}\n");
        se_strbuf_printf(
                out,
                "\tchain service-endpoints-check {\n\t\t%s daddr . meta l4proto . th dport vmap @no-endpoint-services\n\t}\n",
                w->ip);
        se_strbuf_puts(out, "\tchain nodeport-endpoints-check {\n\t\t");
        nodeport_match(w, out);
        se_strbuf_puts(out, " meta l4proto . th dport vmap @no-endpoint-nodeports\n\t}\n");
        se_strbuf_printf(
                out,
                "\tchain firewall-check {\n\t\t%s daddr . meta l4proto . th dport vmap @firewall-ips\n\t}\n",
                w->ip);
        cluster_ips_check(w, t, out);
        se_strbuf_puts(out, "\tchain reject-chain {\n\t\treject\n\t}\n");
}

/* se_strbuf_grow within the buffer's cap (a reservation must not fail it) */
static void reserve_out(struct se_strbuf *out, size_t n)
{
        if (n < out->max - out->len)
                se_strbuf_grow(out, n);
}

/* Room for what the table will write, a little over, so the big buffers
 * are allocated once (never copied while growing, advised as huge pages
 * before they are touched). Partial syncs keep little of the services'
 * text (the tracker reserved its own from the last sync's). */
static void reserve(struct nft *w, const struct se_proxy_table *t)
{
        size_t ips = 0, nodeports = 0, fw = 0, sets = 0, chains = 0, hairpin = 0;
        size_t ipl = w->v6 ? 40 : 16; /* the longest IP text, and a space */
        for (uint32_t i = 0; i < t->n_ports; i++) {
                const struct se_proxy_svcport *sp = &t->ports[i];
                /* a chain name ("HASH8-ns/name/proto/port") and an
                 * endpoint's (its base + "__IP/PORT") */
                size_t hn = 16 + strlen(sp->ns) + strlen(sp->name) + strlen(sp->port_name);
                size_t en = hn + ipl + 8;
                size_t n_ips = 1 + sp->n_external_ips + sp->n_lb_vips;
                size_t eps = sp->n_eps, maps = 1 + (sp->internal_local || sp->external_local);
                size_t aff = sp->affinity ? eps : 0;
                ips += n_ips * (ipl + hn + 48);
                hairpin += eps * (2 * ipl + 32);
                nodeports += sp->node_port ? hn + 48 : 0;
                fw += sp->n_lb_vips * (ipl + hn + 48);
                sets += maps * (hn + 96 + eps * (en + 24)) + aff * (en + 96) +
                        (sp->n_source_ranges ?
                                 hn + 128 + (sp->n_source_ranges + sp->n_lb_vips) * 48 :
                                 0);
                chains += 4 * hn + 400 + maps * (2 * hn + 2 * ipl + 200) +
                          eps * (en + 2 * ipl + 112) + aff * (maps * (2 * en + 64) + en + 48);
        }
        se_strbuf_grow(&w->service_ips, ips);
        se_strbuf_grow(&w->no_ep_services, ips);
        se_strbuf_grow(&w->service_nodeports, nodeports);
        se_strbuf_grow(&w->no_ep_nodeports, nodeports);
        se_strbuf_grow(&w->firewall_ips, fw);
        se_strbuf_grow(&w->hairpin, hairpin);
        if (w->chains == &w->chains_buf)
                return;
        se_strbuf_grow(&w->sets, sets);
        /* out: everything goes there */
        reserve_out(w->chains, chains + sets + 2 * ips + 2 * nodeports + fw + hairpin + 8192);
        if (w->tracker)
                proxy_tracker_reserve(w->tracker, sets + chains, t->n_ports);
}

int se_proxy_nft_write(const struct se_proxy_table *t, const struct se_proxy_options *opt,
                       struct se_strbuf *out)
{
        return se_proxy_nft_sync(t, opt, NULL, out);
}

int se_proxy_nft_sync(const struct se_proxy_table *t, const struct se_proxy_options *opt,
                      struct se_proxy_tracker *tracker, struct se_strbuf *out)
{
        struct nft w = { .opt = opt, .v6 = t->family == SE_IPV6, .tracker = tracker };
        struct se_hashmap known = SE_HASHMAP_INIT;
        struct se_strbuf gmaps, gchains, known_names, head;
        if (tracker)
                proxy_tracker_begin(tracker);
        struct se_strbuf *bufs[] = { &w.service_ips,    &w.service_nodeports,
                                     &w.no_ep_services, &w.no_ep_nodeports,
                                     &w.firewall_ips,   &w.chains_buf,
                                     &w.sets,           &gmaps,
                                     &gchains,          &w.flushes,
                                     &known_names,      &head,
                                     &w.cluster_ips,    &w.hairpin };
        int r = 0;
        for (size_t i = 0; i < SE_ARRAY_SIZE(bufs); i++)
                se_strbuf_init(bufs[i], 0);
        w.ip = w.v6 ? "ip6" : "ip";
        w.addr_type = w.v6 ? "ipv6_addr" : "ipv4_addr";
        w.mark = 1u << (opt->masquerade_bit & 31);
        snprintf(w.mark_set, sizeof(w.mark_set), "meta mark set meta mark | 0x%x", w.mark);
        const struct se_cidr *cc = proxy_cluster_cidr(opt, t->family);
        if (cc) {
                proxy_cidr_text(cc, w.detect_buf, sizeof(w.detect_buf));
                w.detect = w.detect_buf;
        }
        /* a full sync writes the service chains straight into out */
        size_t base = out->len;
        bool direct = !tracker || proxy_tracker_full(tracker);
        w.chains = direct ? out : &w.chains_buf;
        reserve(&w, t);
        for (uint32_t i = 0; i < t->n_ports; i++)
                if (se_proxy_in_kernel(&t->ports[i], true) &&
                    (r = write_service(&w, &t->ports[i])) < 0)
                        goto done;
        if ((r = se_strbuf_failed(&w.hairpin)) < 0 || (r = elems_unique(&w.hairpin)) < 0)
                goto done;
        char key[64];
        snprintf(key, sizeof(key), "%s . inet_proto . inet_service", w.addr_type);
        if (!direct) {
                r = proxy_tracker_keep(tracker, GLOBAL_MAPS)           ?:
                            proxy_tracker_keep(tracker, GLOBAL_CHAINS) ?:
                                                                         partial(&w, key, out);
                goto check;
        }
        struct proxy_top *top = tracker ? proxy_tracker_top(tracker) : NULL;
        for (int i = 0; top && i < 5 && r >= 0; i++) { /* remembered for the next partial */
                const struct se_strbuf *e = bufs[i];
                r = proxy_top_elems(top, false, i, w.ip, TABLE, "", e->buf, e->len, NULL, NULL);
        }
        if (top && r >= 0)
                r = proxy_top_elems(top, false, 5, w.ip, TABLE, "", w.cluster_ips.buf,
                                    w.cluster_ips.len, NULL, NULL);
        if (top && r >= 0)
                r = proxy_top_elems(top, false, 6, w.ip, TABLE, "", w.hairpin.buf, w.hairpin.len,
                                    NULL, NULL);
        if (r < 0)
                goto done;
        se_strbuf_grow(&gmaps, w.service_ips.len + w.service_nodeports.len + w.no_ep_services.len +
                                       w.no_ep_nodeports.len + w.firewall_ips.len + 4096);
        globals(&w, t, key, &gmaps, &gchains);
        if (tracker) {
                /* the table stays, so affinity sets keep their entries: its
                 * rules go, known maps and sets are emptied, then all is
                 * declared again and what went away deleted */
                if ((r = proxy_tracker_names(tracker, GLOBAL_MAPS, gmaps.buf, gmaps.len)) < 0 ||
                    (r = proxy_tracker_names(tracker, GLOBAL_CHAINS, gchains.buf, gchains.len)) < 0)
                        goto done;
                /* (a table's comment is set only when it is made) */
                se_strbuf_printf(&head,
                                 "add table %s " TABLE " { comment \"%s\"; }\nflush table %s " TABLE
                                 "\n",
                                 w.ip, COMMENT, w.ip);
                /* base chains are made anew: a priority cannot be changed
                 * in place (a table of an older layout had others), as
                 * kube-proxy's first sync does */
                for (size_t i = 0; i < SE_ARRAY_SIZE(base_chains); i++)
                        se_strbuf_printf(
                                &head, "add chain %s " TABLE " %s\ndelete chain %s " TABLE " %s\n",
                                w.ip, base_chains[i], w.ip, base_chains[i]);
                if ((r = proxy_tracker_known(tracker, &known_names, &known)) < 0)
                        goto done;
                if (known.n) { /* the first sync knows of nothing to flush */
                        flush_known(&w, gmaps.buf, gmaps.len, &known, NULL, &head);
                        flush_known(&w, w.sets.buf, w.sets.len, &known, NULL, &head);
                }
        } else {
                se_strbuf_printf(&head, "add table %s " TABLE "\ndelete table %s " TABLE "\n", w.ip,
                                 w.ip);
        }
        se_strbuf_printf(&head, "table %s " TABLE " {\n\tcomment \"%s\"\n", w.ip, COMMENT);
        /* out holds the service chains from base: the rest goes in front */
        const struct se_strbuf *front[] = { &head, &gmaps, &w.sets, &gchains };
        size_t n_front = 0, n_chains = out->len - base;
        for (size_t i = 0; i < SE_ARRAY_SIZE(front); i++)
                n_front += front[i]->len;
        if ((r = se_strbuf_failed(&head)) < 0 || (r = se_strbuf_failed(out)) < 0 ||
            (r = se_strbuf_grow(out, n_front + 2)) < 0)
                goto done;
        char *p = out->buf + base;
        memmove(p + n_front, p, n_chains);
        for (size_t i = 0; i < SE_ARRAY_SIZE(front); i++) {
                memcpy(p, front[i]->buf, front[i]->len);
                p += front[i]->len;
        }
        out->len += n_front;
        out->buf[out->len] = 0;
        if (tracker) { /* the services' sets and chains, now in out */
                proxy_tracker_moved(tracker, 0, out, base + head.len + gmaps.len);
                proxy_tracker_moved(tracker, 1, out, n_front);
        }
        se_strbuf_lit(out, "}\n");
        if (tracker)
                r = delete_gone(&w, out);
check:
        for (size_t i = 0; i < SE_ARRAY_SIZE(bufs) && !r; i++)
                r = se_strbuf_failed(bufs[i]);
        if (!r)
                r = se_strbuf_failed(out);
done:
        if (r < 0 && tracker) { /* the segments were in buffers going away */
                proxy_tracker_moved(tracker, 0, NULL, 0);
                proxy_tracker_moved(tracker, 1, NULL, 0);
        }
        if (r < 0 && w.chains == out)
                se_strbuf_truncate(out, base); /* no half-written ruleset */
        for (size_t i = 0; i < SE_ARRAY_SIZE(bufs); i++)
                se_strbuf_release(bufs[i]);
        se_hashmap_release(&known);
        free(w.ep_names);
        free(w.ep_done);
        return r;
}

/* For `svcenv trace`: the names write_service gives, made by the same
 * helpers (one place decides how a chain is named). */
int proxy_nft_chain_name(const struct se_proxy_svcport *sp, const char *prefix,
                         const struct se_proxy_endpoint *ep, char *out, size_t size)
{
        struct nft w = { .opt = NULL };
        struct nft_name nm = { .n = 0 };
        size_t pos = 0;
        base_add(&w.base, &pos, sp->ns, strlen(sp->ns));
        base_add(&w.base, &pos, "/", 1);
        base_add(&w.base, &pos, sp->name, strlen(sp->name));
        base_add(&w.base, &pos, "/", 1);
        base_add(&w.base, &pos, sp->proto, strlen(sp->proto));
        base_add(&w.base, &pos, "/", 1);
        base_add(&w.base, &pos, sp->port_name, strlen(sp->port_name));
        w.base_n = pos;
        size_t bn = pos;
        if (ep)
                bn = ep_base(&w, &nm, ep);
        else
                memcpy(nm.s + 9, w.base.s + 9, pos);
        int r = name_finish(&nm, bn);
        if (r < 0)
                return r;
        if ((size_t)snprintf(out, size, "%s%s", prefix, nm.s) >= size)
                return -ENOBUFS;
        return 0;
}

/* ---- carried partial syncs: only the services the store said changed ---- */

static void carry_buffers(struct nft *w, bool release);

/* The writer's set-up for one family (what se_proxy_nft_sync does first). */
static void carry_writer(struct nft *w, const struct se_proxy_options *opt,
                         enum se_ip_family family)
{
        w->opt = opt;
        w->v6 = family == SE_IPV6;
        w->ip = w->v6 ? "ip6" : "ip";
        w->addr_type = w->v6 ? "ipv6_addr" : "ipv4_addr";
        w->mark = 1u << (opt->masquerade_bit & 31);
        snprintf(w->mark_set, sizeof(w->mark_set), "meta mark set meta mark | 0x%x", w->mark);
        const struct se_cidr *cc = proxy_cluster_cidr(opt, family);
        if (cc) {
                proxy_cidr_text(cc, w->detect_buf, sizeof(w->detect_buf));
                w->detect = w->detect_buf;
        }
        carry_buffers(w, false);
        w->chains = &w->chains_buf;
}

/* The writer's own buffers, for init (release false) or release. */
static void carry_buffers(struct nft *w, bool release)
{
        struct se_strbuf *bufs[] = { &w->service_ips,    &w->service_nodeports,
                                     &w->no_ep_services, &w->no_ep_nodeports,
                                     &w->firewall_ips,   &w->chains_buf,
                                     &w->sets,           &w->flushes,
                                     &w->cluster_ips,    &w->hairpin };
        for (size_t i = 0; i < SE_ARRAY_SIZE(bufs); i++)
                if (release)
                        se_strbuf_release(bufs[i]);
                else
                        se_strbuf_init(bufs[i], 0);
}

static void carry_writer_release(struct nft *w)
{
        carry_buffers(w, true);
        free(w->ep_names);
        free(w->ep_done);
}

/* The top-level elements of a writer, in proxy_top_elems' order: the five
 * verdict maps, cluster-ips, hairpin-connections. */
enum { CARRY_ELEMS = 7, CARRY_HAIRPIN = 6 };
static void carry_elems(struct nft *w, const struct se_strbuf *e[CARRY_ELEMS])
{
        e[0] = &w->service_ips;
        e[1] = &w->service_nodeports;
        e[2] = &w->no_ep_services;
        e[3] = &w->no_ep_nodeports;
        e[4] = &w->firewall_ips;
        e[5] = &w->cluster_ips;
        e[6] = &w->hairpin;
}

/* A hairpin count: the map's key points at key. */
struct hairpin_ref {
        uintptr_t n;
        char key[];
};

int proxy_nft_hairpin_count(struct se_hashmap *refs, const struct se_proxy_svcport *sp,
                            const struct se_proxy_options *opt, int delta)
{
        struct proxy_categories cat;
        int r = proxy_categorize(sp, opt, &cat);
        if (r < 0)
                return r;
        /* the element as hairpin_elem writes it: "EP . EP . proto . port" */
        for (uint32_t i = 0; i < cat.n_reachable && r == 0; i++) {
                const struct se_proxy_endpoint *ep = cat.reachable[i];
                char key[160];
                if (!ep->local)
                        continue;
                int kl = snprintf(key, sizeof(key), "%s . %s . %s . %d", ep->ip, ep->ip, sp->proto,
                                  (int)ep->port);
                if (kl < 0 || (size_t)kl >= sizeof(key))
                        continue; /* no IP is that long */
                struct hairpin_ref *h = se_hashmap_get(refs, key);
                if (delta < 0) {
                        if (h && h->n > 1)
                                h->n--;
                        else if (h)
                                free(se_hashmap_remove(refs, key));
                        continue;
                }
                if (h) {
                        h->n++;
                        continue;
                }
                h = se_malloc(sizeof(*h) + (size_t)kl + 1);
                if (!h) {
                        r = -ENOMEM;
                        break;
                }
                h->n = 1;
                memcpy(h->key, key, (size_t)kl + 1);
                if ((r = se_hashmap_put(refs, h->key, h, NULL)) < 0)
                        free(h);
        }
        proxy_categories_release(&cat);
        return r;
}

void proxy_nft_hairpin_release(struct se_hashmap *refs)
{
        const char *k;
        void *v;
        for (size_t it = 0; se_hashmap_next(refs, &it, &k, &v);)
                free(v);
        se_hashmap_release(refs);
}

/* The `delete element` lines of del (proxy_top_elems') for hairpin
 * elements that services other than the carried ones still have (refs
 * counts them over the whole last table, mine over the carried ports as
 * they were), dropped. */
static int hairpin_deletes(const struct se_hashmap *refs, const struct se_hashmap *mine,
                           struct se_strbuf *del)
{
        struct se_strbuf kept;
        int r = 0;
        se_strbuf_init(&kept, 0);
        for (const char *p = del->len ? del->buf : NULL; p && *p;) {
                const char *nl = strchr(p, '\n');
                size_t len = nl ? (size_t)(nl - p) + 1 : strlen(p);
                const char *open = memchr(p, '{', len);
                char elem[256];
                /* "... { ELEM }\n" */
                if (!open || len < (size_t)(open - p) + 5 ||
                    len - (size_t)(open - p) - 5 >= sizeof(elem)) {
                        r = -EINVAL;
                        break;
                }
                size_t el = len - (size_t)(open - p) - 5;
                memcpy(elem, open + 2, el);
                elem[el] = 0;
                const struct hairpin_ref *all = se_hashmap_get(refs, elem),
                                         *own = se_hashmap_get(mine, elem);
                if (!all || all->n <= (own ? own->n : 0))
                        se_strbuf_append(&kept, p, len);
                p += len;
        }
        if (r == 0 && (r = se_strbuf_failed(&kept)) == 0) {
                se_strbuf_reset(del);
                se_strbuf_append(del, kept.buf, kept.len);
                r = se_strbuf_failed(del);
        }
        se_strbuf_release(&kept);
        return r;
}

/* The top-level element edits going from old's elements to now's: delete
 * lines into del, add lines into add (proxy_top_elems on a scratch state
 * that knows old). */
static int carry_edits(struct nft *now, struct nft *old, const struct se_hashmap *refs,
                       const struct se_proxy_svcport *const *was, size_t n, struct se_strbuf *del,
                       struct se_strbuf *add)
{
        static const char *const names[CARRY_ELEMS] = {
                "service-ips",           "service-nodeports", "no-endpoint-services",
                "no-endpoint-nodeports", "firewall-ips",      "cluster-ips",
                "hairpin-connections"
        };
        const struct se_strbuf *e_now[CARRY_ELEMS], *e_old[CARRY_ELEMS];
        struct proxy_top top;
        struct se_strbuf hdel;
        int r = elems_unique(&now->hairpin) ?: elems_unique(&old->hairpin);
        memset(&top, 0, sizeof(top));
        se_strbuf_init(&hdel, 0);
        carry_elems(now, e_now);
        carry_elems(old, e_old);
        for (int i = 0; i < CARRY_ELEMS && r >= 0; i++)
                r = proxy_top_elems(&top, false, i, now->ip, TABLE, names[i], e_old[i]->buf,
                                    e_old[i]->len, NULL, NULL);
        memcpy(top.cur, top.pend, sizeof(top.cur));
        memset(top.pend, 0, sizeof(top.pend));
        top.known = true;
        for (int i = 0; i < CARRY_ELEMS && r >= 0; i++)
                r = proxy_top_elems(&top, true, i, now->ip, TABLE, names[i], e_now[i]->buf,
                                    e_now[i]->len, i == CARRY_HAIRPIN ? &hdel : del, add);
        struct se_hashmap mine = SE_HASHMAP_INIT;
        for (size_t i = 0; i < n && r >= 0 && hdel.len; i++)
                if (was[i])
                        r = proxy_nft_hairpin_count(&mine, was[i], now->opt, 1);
        if (r >= 0)
                r = hairpin_deletes(refs, &mine, &hdel);
        proxy_nft_hairpin_release(&mine);
        if (r >= 0)
                se_strbuf_append(del, hdel.buf, hdel.len);
        proxy_top_release(top.cur);
        proxy_top_release(top.pend);
        se_strbuf_release(&hdel);
        return r < 0 ? r : se_strbuf_failed(del) ?: se_strbuf_failed(add);
}

/* gone_rules' "-X KIND NAME" lines (proxy_tracker_carry) as nft commands:
 * chains and maps emptied, then chains deleted, then maps and sets. */
static void carry_gone(const char *ip, const struct se_strbuf *gone, struct se_strbuf *out)
{
        for (int pass = 0; pass < 3; pass++)
                for (const char *p = gone->len ? gone->buf : NULL; p && *p;) {
                        const char *nl = strchr(p, '\n');
                        size_t len = nl ? (size_t)(nl - p) : strlen(p);
                        const char *g = p + 3; /* "-X " */
                        const char *sp = len > 3 ? memchr(g, ' ', len - 3) : NULL;
                        p += len + (nl != NULL);
                        if (!sp)
                                continue;
                        int kl = (int)(sp - g), nn = (int)(len - 3 - (size_t)kl - 1);
                        bool is_chain = kl == 5 && strncmp(g, "chain", 5) == 0;
                        bool is_map = kl == 3 && strncmp(g, "map", 3) == 0;
                        if (pass == 0 && (is_chain || is_map))
                                se_strbuf_printf(out, "flush %.*s %s " TABLE " %.*s\n", kl, g, ip,
                                                 nn, sp + 1);
                        else if ((pass == 1 && is_chain) || (pass == 2 && !is_chain))
                                se_strbuf_printf(out, "delete %.*s %s " TABLE " %.*s\n", kl, g, ip,
                                                 nn, sp + 1);
                }
}

int proxy_nft_sync_changed(const struct se_proxy_svcport *const *ports,
                           const struct se_proxy_svcport *const *was, size_t n,
                           enum se_ip_family family, const struct se_proxy_options *opt,
                           const struct se_hashmap *hairpin_refs, struct se_proxy_tracker *tracker,
                           struct se_strbuf *out)
{
        struct nft w, old;
        struct se_strbuf gone_decl, gone, del, add;
        memset(&w, 0, sizeof(w));
        memset(&old, 0, sizeof(old));
        int r = proxy_tracker_carry_begin(tracker);
        if (r < 0)
                return r;
        carry_writer(&w, opt, family);
        carry_writer(&old, opt, family);
        struct se_strbuf *bufs[] = { &gone_decl, &gone, &del, &add };
        for (size_t i = 0; i < SE_ARRAY_SIZE(bufs); i++)
                se_strbuf_init(bufs[i], 0);
        for (size_t i = 0; r == 0 && i < n; i++) {
                size_t chains_at = w.chains_buf.len, sets_at = w.sets.len;
                bool same = false;
                if (!ports[i]) { /* removed: its names go, its elements too */
                        r = proxy_tracker_carry_remove(tracker, was[i], &gone_decl, &gone);
                        if (r == 0) {
                                r = write_service(&old, was[i]);
                                se_strbuf_reset(&old.chains_buf);
                                se_strbuf_reset(&old.sets);
                        }
                        continue;
                }
                if ((r = write_service(&w, ports[i])) < 0 ||
                    (r = se_strbuf_failed(&w.sets) ?: se_strbuf_failed(&w.chains_buf)) < 0)
                        break;
                /* the segment as a sync from the whole table records it:
                 * sets first, then chains */
                if (!was[i]) { /* added: new chains and maps, nothing to flush */
                        r = proxy_tracker_carry_add(
                                tracker, ports[i], w.sets.buf + sets_at, w.sets.len - sets_at,
                                w.chains_buf.buf + chains_at, w.chains_buf.len - chains_at);
                        continue;
                }
                r = proxy_tracker_carry(tracker, ports[i], NULL, w.sets.buf + sets_at,
                                        w.sets.len - sets_at, w.chains_buf.buf + chains_at,
                                        w.chains_buf.len - chains_at, &gone_decl, &gone, &same);
                if (r == 0 && same) {
                        se_strbuf_truncate(&w.sets, sets_at);
                        se_strbuf_truncate(&w.chains_buf, chains_at);
                } else if (r == 0 && w.sets.len > sets_at) {
                        /* its maps the kernel has are emptied, then filled */
                        struct se_strv had = SE_STRV_INIT;
                        r = proxy_tracker_prev(tracker, ports[i], &had);
                        if (r == 0)
                                flush_known(&w, w.sets.buf + sets_at, w.sets.len - sets_at, NULL,
                                            &had, &w.flushes);
                        se_strv_release(&had);
                }
                /* what it had in the top-level maps, to compare */
                if (r == 0) {
                        r = write_service(&old, was[i]);
                        se_strbuf_reset(&old.chains_buf);
                        se_strbuf_reset(&old.sets);
                }
        }
        if (r == 0)
                r = carry_edits(&w, &old, hairpin_refs, was, n, &del, &add);
        if (r == 0) {
                size_t base = out->len;
                /* the rewritten chains exist and are empty, their maps too;
                 * then declared and filled; the verdict maps edited (after
                 * the chains they name exist, before gone ones go) */
                const char *p = w.chains_buf.buf, *end = p + w.chains_buf.len;
                while (p && p < end) {
                        const char *nl = memchr(p, '\n', (size_t)(end - p));
                        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
                        if (len > 9 && strncmp(p, "\tchain ", 7) == 0) {
                                int cl = (int)(len - 9);
                                se_strbuf_printf(out, "add chain %s " TABLE " %.*s\n", w.ip, cl,
                                                 p + 7);
                                se_strbuf_printf(out, "flush chain %s " TABLE " %.*s\n", w.ip, cl,
                                                 p + 7);
                        }
                        p += len + 1;
                }
                se_strbuf_add(out, w.flushes.buf, w.flushes.len);
                if (w.sets.len || w.chains_buf.len) {
                        se_strbuf_printf(out, "table %s " TABLE " {\n", w.ip);
                        se_strbuf_add(out, w.sets.buf, w.sets.len);
                        se_strbuf_add(out, w.chains_buf.buf, w.chains_buf.len);
                        se_strbuf_puts(out, "}\n");
                }
                se_strbuf_add(out, del.buf, del.len);
                se_strbuf_add(out, add.buf, add.len);
                carry_gone(w.ip, &gone, out);
                if ((r = se_strbuf_failed(&w.flushes)    ?:
                                 se_strbuf_failed(&gone) ?:
                                                           se_strbuf_failed(out)) < 0)
                        se_strbuf_truncate(out, base);
        }
        /* the verdict maps as the tracker knew them are no more: the next
         * sync from the whole table writes them whole */
        struct proxy_top *top = proxy_tracker_top(tracker);
        if (r == 0 && top && (del.len || add.len))
                top->known = false;
        if (r < 0)
                proxy_tracker_carry_abort(tracker);
        for (size_t i = 0; i < SE_ARRAY_SIZE(bufs); i++)
                se_strbuf_release(bufs[i]);
        carry_writer_release(&w);
        carry_writer_release(&old);
        return r;
}

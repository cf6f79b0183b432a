/* The sets a script translation knows: those it declared (with the id of
 * this batch) and those the kernel described, by family, table and name. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <stdio.h>
#include <stdlib.h>

#include <svcenv/alloc.h>

#include "proxy_nftparse.h"

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

struct nfp_set *proxy_nfp_set_find(struct nfp_parser *ps, uint8_t fam, const char *table,
                                   const char *nm)
{
        if (!ps->nbuckets)
                return NULL;
        for (struct nfp_set *s = ps->buckets[set_hash(fam, table, nm) & (ps->nbuckets - 1)]; s;
             s = s->next)
                if (s->family == fam && strcmp(s->table, table) == 0 && strcmp(s->name, nm) == 0)
                        return s;
        return NULL;
}

void proxy_nfp_set_forget(struct nfp_parser *ps, uint8_t fam, const char *table, const char *nm)
{
        if (!ps->nbuckets)
                return;
        for (struct nfp_set **pp = &ps->buckets[set_hash(fam, table, nm) & (ps->nbuckets - 1)]; *pp;
             pp = &(*pp)->next) {
                struct nfp_set *s = *pp;
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
struct nfp_set *proxy_nfp_set_add(struct nfp_parser *ps, uint8_t fam, const char *table,
                                  const char *nm)
{
        proxy_nfp_set_forget(ps, fam, table, nm);
        if (ps->nsets + 1 > ps->nbuckets) {
                size_t nb = ps->nbuckets ? ps->nbuckets * 2 : 256;
                struct nfp_set **b = se_calloc(nb, sizeof(*b));
                if (!b)
                        return NULL;
                for (size_t i = 0; i < ps->nbuckets; i++)
                        for (struct nfp_set *s = ps->buckets[i], *n; s; s = n) {
                                n = s->next;
                                size_t h = set_hash(s->family, s->table, s->name) & (nb - 1);
                                s->next = b[h];
                                b[h] = s;
                        }
                free(ps->buckets);
                ps->buckets = b;
                ps->nbuckets = nb;
        }
        struct nfp_set *s = se_calloc(1, sizeof(*s));
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

void proxy_nfp_sets_free(struct nfp_parser *ps)
{
        for (size_t i = 0; i < ps->nbuckets; i++)
                for (struct nfp_set *s = ps->buckets[i], *n; s; s = n) {
                        n = s->next;
                        free(s->table);
                        free(s->name);
                        free(s);
                }
        free(ps->buckets);
}

/* a table went away: so did its sets */
void proxy_nfp_sets_forget_table(struct nfp_parser *ps, uint8_t fam, const char *table)
{
        for (size_t i = 0; i < ps->nbuckets; i++)
                for (struct nfp_set **pp = &ps->buckets[i]; *pp;) {
                        struct nfp_set *s = *pp;
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

/* a set the script did not declare, from the kernel */
int proxy_nfp_set_known(struct nfp_parser *ps, uint8_t fam, const char *table, const char *nm,
                        unsigned line, struct nfp_set **ret)
{
        *ret = proxy_nfp_set_find(ps, fam, table, nm);
        if (*ret)
                return 0;
        struct nfp_set_info info;
        int r = ps->lookup ? ps->lookup(ps->lctx, fam, table, nm, &info) : -ENOENT;
        if (r == -ENOENT)
                return proxy_nfp_fail(ps, line, "no set '%s' in table '%s'", nm, table);
        if (r < 0) {
                if (!ps->err) {
                        ps->err = r;
                        snprintf(ps->errbuf, ps->errsize, "line %u: reading set %s: %s", line, nm,
                                 strerror(-r));
                }
                return r;
        }
        struct nfp_set *s = proxy_nfp_set_add(ps, fam, table, nm);
        if (!s)
                return proxy_nfp_oom(ps, -ENOMEM);
        s->flags = info.flags;
        bool ok = proxy_nfp_type_from_kernel(info.key_type, info.key_len, &s->key);
        if (ok && s->key.n == 1 && s->key.f[0].k == FK_INT && info.key_byteorder != BO_HOST)
                ok = false; /* a big-endian integer key: not ours */
        if (ok && (info.flags & NFT_SET_MAP)) {
                s->verdict = info.data_type == NFT_DATA_VERDICT;
                if (!s->verdict)
                        ok = proxy_nfp_type_from_kernel(info.data_type, info.data_len, &s->data);
        }
        if (!ok) {
                proxy_nfp_set_forget(ps, fam, table, nm);
                return proxy_nfp_fail(ps, line, "set '%s' has a key or data type we do not write",
                                      nm);
        }
        *ret = s;
        return 0;
}

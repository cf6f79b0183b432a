/* zone.c — the snapshot's lifetime and its name index. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/model.h>

#include "dns_internal.h"

struct se_dns_zone *se_dns_zone_ref(struct se_dns_zone *z)
{
        if (z)
                __atomic_add_fetch(&z->refs, 1, __ATOMIC_RELAXED);
        return z;
}

struct se_dns_zone *se_dns_zone_unref(struct se_dns_zone *z)
{
        if (!z || __atomic_sub_fetch(&z->refs, 1, __ATOMIC_ACQ_REL) > 0)
                return NULL;
        dns_node_list_release(&z->own);
        for (size_t i = 0; i < z->n_blocks; i++)
                dns_block_unref(z->blocks[i]);
        free(z->blocks);
        se_hashmap_release(&z->block_of);
        se_hashmap_release(&z->own_names);
        for (size_t i = 0; i < DNS_REV_SHARDS; i++)
                dns_rev_shard_unref(z->rev[i]);
        se_arena_release(&z->arena);
        free(z->zone);
        free(z);
        return NULL;
}

void dns_node_list_release(struct dns_node_list *l)
{
        for (size_t i = 0; i < l->n; i++) {
                if (l->v[i]->rrs.cap) /* (0: in a block's slab) */
                        free(l->v[i]->rrs.v);
        }
        free(l->v);
        *l = (struct dns_node_list){ 0 };
}

void dns_rev_shard_unref(struct dns_rev_shard *s)
{
        if (!s || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) > 0)
                return;
        free(s->v);
        free(s);
}

void dns_slab_unref(struct dns_slab *slab)
{
        if (!slab || __atomic_sub_fetch(&slab->refs, 1, __ATOMIC_ACQ_REL) > 0)
                return;
        se_arena_release(&slab->arena);
        free(slab);
}

void dns_block_unref(struct dns_block *blk)
{
        if (!blk || __atomic_sub_fetch(&blk->refs, 1, __ATOMIC_ACQ_REL) > 0)
                return;
        dns_node_list_release(&blk->nodes);
        se_object_unref(blk->svc);
        for (uint32_t i = 0; i < blk->n_slices; i++)
                se_object_unref(blk->slices[i]);
        dns_slab_unref(blk->slab); /* (and blk with it: it is in the slab) */
}

uint32_t se_dns_zone_serial(const struct se_dns_zone *z)
{
        return z->serial;
}

/* The node of key among a block's (sorted by key). */
static const struct dns_node *block_find(const struct dns_block *blk, const char *key)
{
        size_t lo = 0, hi = blk->nodes.n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = strcmp(key, blk->nodes.v[mid]->key);
                if (c == 0)
                        return blk->nodes.v[mid];
                if (c < 0)
                        hi = mid;
                else
                        lo = mid + 1;
        }
        return NULL;
}

/* Every name of a Service's block ends in "<svc>.<ns>.svc.<zone>": the
 * block is the one of the two labels before "svc". */
const struct dns_block *dns_block_for(const struct se_dns_zone *z, const char *key, size_t len)
{
        size_t zl = strlen(z->zone);
        if (len < zl + 5 + 3 || memcmp(key + len - zl, z->zone, zl) != 0 ||
            memcmp(key + len - zl - 5, ".svc.", 5) != 0)
                return NULL;
        size_t end = len - zl - 5; /* key[0, end) = "[...].<svc>.<ns>" */
        size_t ns = end;
        while (ns > 0 && key[ns - 1] != '.')
                ns--;
        if (ns < 2)
                return NULL; /* "<ns>.svc.<zone>": a namespace */
        size_t svc = ns - 1;
        while (svc > 0 && key[svc - 1] != '.')
                svc--;
        char bkey[2 * 64 + 2];
        size_t nl = end - ns, sl = ns - 1 - svc;
        if (nl > 63 || sl > 63 || sl == 0)
                return NULL;
        memcpy(bkey, key + ns, nl);
        bkey[nl] = '/';
        memcpy(bkey + nl + 1, key + svc, sl);
        bkey[nl + 1 + sl] = '\0';
        return se_hashmap_get(&z->block_of, bkey);
}

/* The entries of an endpoint name: by_name[*lo, *hi), empty when none. */
static void label_range(const struct dns_block *blk, const char *want, uint32_t *lo, uint32_t *hi)
{
        char label[64];
        uint32_t a = 0, b = blk->n_eps;
        while (a < b) { /* the first not below want */
                uint32_t mid = a + (b - a) / 2;
                dns_ep_label(blk, &blk->eps[blk->by_name[mid]], label);
                if (strcmp(label, want) < 0)
                        a = mid + 1;
                else
                        b = mid;
        }
        *lo = *hi = a;
        if (a == blk->n_eps)
                return;
        dns_ep_label(blk, &blk->eps[blk->by_name[a]], label);
        if (strcmp(label, want) != 0)
                return;
        uint32_t pos = blk->eps[blk->by_name[a]].name_pos;
        for (b = a; b < blk->n_eps && blk->eps[blk->by_name[b]].name_pos == pos; b++)
                ;
        *hi = b;
}

static const struct dns_node *service_find(const struct se_dns_zone *z, const char *key, size_t len,
                                           struct dns_scratch *s)
{
        const struct dns_block *blk = dns_block_for(z, key, len);
        if (!blk)
                return NULL;
        const struct dns_node *n =
                blk->cluster_ip ? dns_table_cluster(z, blk, key, len, s) : block_find(blk, key);
        if (n)
                return n->from_table ? dns_table_fill(z, blk, n, s) : n;
        /* "<label>.<fqdn>": an endpoint's name */
        size_t fl = strlen(blk->fqdn);
        if (!blk->names || len < fl + 2 || key[len - fl - 1] != '.' ||
            memcmp(key + len - fl, blk->fqdn, fl) != 0)
                return NULL;
        size_t wl = len - fl - 1;
        char want[64];
        if (wl > 63 || memchr(key, '.', wl))
                return NULL;
        memcpy(want, key, wl);
        want[wl] = '\0';
        uint32_t lo, hi;
        label_range(blk, want, &lo, &hi);
        return lo < hi ? dns_table_endpoint(z, blk, lo, hi, s) : NULL;
}

/* The address of a reverse name as the zone spells them ("d.c.b.a" in
 * decimal without leading zeros, or 32 lower-case nibbles). */
static bool reverse_addr(const char *key, size_t len, uint8_t addr[16], bool *v6)
{
        memset(addr, 0, 16);
        if (len > 13 && strcmp(key + len - 13, ".in-addr.arpa") == 0) {
                *v6 = false;
                const char *p = key;
                for (int i = 3; i >= 0; i--) {
                        unsigned v = 0, d = 0;
                        for (; *p >= '0' && *p <= '9' && d < 4; p++, d++)
                                v = v * 10 + (unsigned)(*p - '0');
                        if (d == 0 || d > 3 || v > 255 || (d > 1 && p[-(int)d] == '0') || *p != '.')
                                return false;
                        addr[i] = (uint8_t)v;
                        p++;
                }
                return (size_t)(p - key) == len - 12;
        }
        if (len != 64 + 8 || strcmp(key + 64, "ip6.arpa") != 0)
                return false;
        *v6 = true;
        for (int i = 0; i < 32; i++) {
                char c = key[2 * i];
                unsigned v;
                if (c >= '0' && c <= '9')
                        v = (unsigned)(c - '0');
                else if (c >= 'a' && c <= 'f')
                        v = (unsigned)(c - 'a' + 10);
                else
                        return false;
                if (key[2 * i + 1] != '.')
                        return false;
                /* nibble i counts from the address's end, the low one first */
                int byte = 15 - i / 2;
                addr[byte] |= (uint8_t)(i % 2 ? v << 4 : v);
        }
        return true;
}

static const struct dns_node *reverse_find(const struct se_dns_zone *z, const char *key, size_t len,
                                           struct dns_scratch *s)
{
        uint8_t addr[16];
        bool v6;
        if (!reverse_addr(key, len, addr, &v6))
                return NULL;
        const struct dns_rev_shard *sh = z->rev[dns_rev_shard_of(addr, v6)];
        if (!sh)
                return NULL;
        uint32_t head = dns_rev_head(addr);
        size_t a = 0, b = sh->n;
        while (a < b) {
                size_t mid = a + (b - a) / 2;
                if (dns_rev_cmp_addr(&sh->v[mid], head, addr, v6) < 0)
                        a = mid + 1;
                else
                        b = mid;
        }
        for (b = a; b < sh->n && dns_rev_cmp_addr(&sh->v[b], head, addr, v6) == 0; b++)
                ;
        return a < b ? dns_table_reverse(z, sh->v + a, b - a, s) : NULL;
}

const struct dns_node *dns_zone_find(const struct se_dns_zone *z, const char *key,
                                     struct dns_scratch *s)
{
        /* no key is in two places */
        size_t len = strlen(key);
        if (len >= 4 && memcmp(key + len - 4, "arpa", 4) == 0) {
                const struct dns_node *n = reverse_find(z, key, len, s);
                if (n)
                        return n;
        }
        const struct dns_node *n = service_find(z, key, len, s);
        return n ? n : se_hashmap_get(&z->own_names, key);
}

int dns_zone_nodes(const struct se_dns_zone *z, struct dns_scratch *s, const struct dns_node ***ret,
                   size_t *n)
{
        size_t total = z->own.n;
        for (size_t i = 0; i < DNS_REV_SHARDS; i++)
                total += z->rev[i] ? z->rev[i]->n : 0;
        for (size_t i = 0; i < z->n_blocks; i++)
                total += z->blocks[i]->nodes.n + z->blocks[i]->n_eps +
                         (z->blocks[i]->cluster_ip ?
                                  1 + ((const struct se_service *)z->blocks[i]->svc)->n_ports :
                                  0);
        const struct dns_node **v = se_calloc(total ? total : 1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        size_t k = 0;
        for (size_t i = 0; i < z->own.n; i++)
                v[k++] = z->own.v[i];
        for (size_t i = 0; i < z->n_blocks; i++) {
                const struct dns_block *blk = z->blocks[i];
                size_t made = 0;
                if (blk->cluster_ip && dns_table_cluster_nodes(z, blk, s, v + k, &made) < 0)
                        goto nomem;
                k += made;
                for (size_t j = 0; j < blk->nodes.n; j++) {
                        const struct dns_node *nd = blk->nodes.v[j];
                        if (nd->from_table && !(nd = dns_table_fill(z, blk, nd, s)))
                                goto nomem;
                        v[k++] = nd;
                }
                for (uint32_t lo = 0, hi; blk->names && lo < blk->n_eps; lo = hi) {
                        char want[64];
                        dns_ep_label(blk, &blk->eps[blk->by_name[lo]], want);
                        label_range(blk, want, &lo, &hi);
                        if (!(v[k++] = dns_table_endpoint(z, blk, lo, hi, s)))
                                goto nomem;
                }
        }
        for (size_t i = 0; i < DNS_REV_SHARDS; i++) {
                const struct dns_rev_shard *sh = z->rev[i];
                for (size_t lo = 0, hi; sh && lo < sh->n; lo = hi) {
                        uint8_t v6;
                        const uint8_t *addr = dns_rev_addr(&sh->v[lo], &v6);
                        for (hi = lo + 1; hi < sh->n && dns_rev_cmp_addr(&sh->v[hi], sh->v[lo].head,
                                                                         addr, v6) == 0;
                             hi++)
                                ;
                        if (!(v[k++] = dns_table_reverse(z, sh->v + lo, hi - lo, s)))
                                goto nomem;
                }
        }
        *ret = v;
        *n = k;
        return 0;
nomem:
        free(v);
        return -ENOMEM;
}

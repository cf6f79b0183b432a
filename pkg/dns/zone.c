/* zone.c — the snapshot's lifetime and its name index. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>

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
                free(l->v[i]->seen); /* a build that failed half way */
        }
        free(l->v);
        *l = (struct dns_node_list){ 0 };
}

void dns_rev_unref(struct dns_node *n)
{
        if (!n || __atomic_sub_fetch(&n->refs, 1, __ATOMIC_ACQ_REL) > 0)
                return;
        free(n->rrs.v);
        free(n);
}

void dns_rev_shard_unref(struct dns_rev_shard *s)
{
        if (!s || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) > 0)
                return;
        void *v;
        for (size_t it = 0; se_hashmap_next(&s->names, &it, NULL, &v);)
                dns_rev_unref(v);
        se_hashmap_release(&s->names);
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
        free(blk->ptrs);
        se_object_unref(blk->svc);
        for (uint32_t i = 0; i < blk->n_slices; i++)
                se_object_unref(blk->slices[i]);
        free(blk->slices);
        dns_slab_unref(blk->slab);
        free(blk);
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
static const struct dns_node *service_find(const struct se_dns_zone *z, const char *key, size_t len)
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
        const struct dns_block *blk = se_hashmap_get(&z->block_of, bkey);
        return blk ? block_find(blk, key) : NULL;
}

const struct dns_node *dns_zone_find(const struct se_dns_zone *z, const char *key)
{
        /* no key is in two places */
        size_t len = strlen(key);
        const struct dns_node *n = NULL;
        if (len >= 4 && memcmp(key + len - 4, "arpa", 4) == 0) {
                uint64_t h = se_hash_str(key);
                const struct dns_rev_shard *s = z->rev[dns_rev_shard_of(h)];
                if (s && (n = se_hashmap_get_hashed(&s->names, key, h)))
                        return n;
        }
        n = service_find(z, key, len);
        return n ? n : se_hashmap_get(&z->own_names, key);
}

int dns_zone_nodes(const struct se_dns_zone *z, const struct dns_node ***ret, size_t *n)
{
        size_t total = z->own.n;
        for (size_t i = 0; i < DNS_REV_SHARDS; i++)
                total += z->rev[i] ? z->rev[i]->names.n : 0;
        for (size_t i = 0; i < z->n_blocks; i++)
                total += z->blocks[i]->nodes.n;
        const struct dns_node **v = se_calloc(total ? total : 1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        size_t k = 0;
        for (size_t i = 0; i < z->own.n; i++)
                v[k++] = z->own.v[i];
        for (size_t i = 0; i < z->n_blocks; i++)
                for (size_t j = 0; j < z->blocks[i]->nodes.n; j++)
                        v[k++] = z->blocks[i]->nodes.v[j];
        void *p;
        for (size_t i = 0; i < DNS_REV_SHARDS; i++)
                for (size_t it = 0; z->rev[i] && se_hashmap_next(&z->rev[i]->names, &it, NULL, &p);)
                        v[k++] = p;
        *ret = v;
        *n = k;
        return 0;
}

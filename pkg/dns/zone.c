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
        free(z->nodes);
        se_hashmap_release(&z->block_of);
        se_hashmap_release(&z->names);
        se_hashmap_release(&z->own_names);
        void *v;
        for (size_t it = 0; se_hashmap_next(&z->rev_names, &it, NULL, &v);)
                dns_rev_unref(v);
        se_hashmap_release(&z->rev_names);
        se_arena_release(&z->arena);
        free(z->zone);
        free(z);
        return NULL;
}

void dns_node_list_release(struct dns_node_list *l)
{
        for (size_t i = 0; i < l->n; i++) {
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

const struct dns_node *dns_zone_find(const struct se_dns_zone *z, const char *key)
{
        /* three tables (no key is in two): the key hashed once */
        size_t len = strlen(key);
        uint64_t h = se_hash_mem(key, len);
        const struct dns_node *n = NULL;
        if (len >= 4 && memcmp(key + len - 4, "arpa", 4) == 0 &&
            (n = se_hashmap_get_hashed(&z->rev_names, key, h)))
                return n;
        n = se_hashmap_get_hashed(&z->names, key, h);
        return n ? n : se_hashmap_get_hashed(&z->own_names, key, h);
}

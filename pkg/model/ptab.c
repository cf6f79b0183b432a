/* Pointer-only open-addressing set keyed inside its entries (see
 * ptab_internal.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/hashmap.h>

#include "ptab_internal.h"

#define TAG ((uintptr_t)7)

/* index bits come from the bottom of the hash, the tag from the top */
static uintptr_t tag_of(uint64_t h)
{
        return (uintptr_t)(h >> 61) & TAG;
}

static void *entry_of(uintptr_t slot)
{
        return (void *)(slot & ~TAG);
}

static uint32_t home_of(const struct ptab *t, uintptr_t slot)
{
        return (uint32_t)se_hash_str(t->key_of(entry_of(slot))) & (t->cap - 1);
}

/* The slot holding key, or the empty slot that ends its probe chain (the
 * load cap guarantees one). */
static uint32_t find(const struct ptab *t, const char *key, uint64_t h)
{
        uint32_t mask = t->cap - 1, i = (uint32_t)h & mask;
        uintptr_t tag = tag_of(h);
        for (; t->slots[i]; i = (i + 1) & mask)
                if ((t->slots[i] & TAG) == tag &&
                    strcmp(t->key_of(entry_of(t->slots[i])), key) == 0)
                        return i;
        return i;
}

void *model_ptab_get(const struct ptab *t, const char *key)
{
        if (!t->cap)
                return NULL;
        return entry_of(t->slots[find(t, key, se_hash_str(key))]);
}

static int resize(struct ptab *t, uint32_t cap)
{
        uintptr_t *slots = se_calloc(cap, sizeof(*slots));
        if (!slots)
                return -ENOMEM;
        struct ptab old = *t;
        t->slots = slots;
        t->cap = cap;
        for (uint32_t i = 0; i < old.cap; i++) {
                if (!old.slots[i])
                        continue;
                uint32_t j = home_of(t, old.slots[i]);
                while (slots[j])
                        j = (j + 1) & (cap - 1);
                slots[j] = old.slots[i];
        }
        free(old.slots);
        return 0;
}

int model_ptab_put(struct ptab *t, void *entry, void **ret_old)
{
        if (ret_old)
                *ret_old = NULL;
        if (!entry || ((uintptr_t)entry & TAG))
                return -EINVAL;
        /* keep the load at or below 4/5 */
        if (((uint64_t)t->n + 1) * 5 > (uint64_t)t->cap * 4) {
                if (t->cap > UINT32_MAX / 2)
                        return -ENOMEM;
                int r = resize(t, t->cap ? t->cap * 2 : 4);
                if (r < 0)
                        return r;
        }
        const char *key = t->key_of(entry);
        uint64_t h = se_hash_str(key);
        uint32_t i = find(t, key, h);
        void *old = entry_of(t->slots[i]);
        if (!old)
                t->n++;
        t->slots[i] = (uintptr_t)entry | tag_of(h);
        if (ret_old)
                *ret_old = old;
        return 0;
}

void *model_ptab_remove(struct ptab *t, const char *key)
{
        if (!t->cap)
                return NULL;
        uint32_t mask = t->cap - 1;
        uint32_t i = find(t, key, se_hash_str(key));
        void *entry = entry_of(t->slots[i]);
        if (!entry)
                return NULL;
        /* backward shift: a following entry moves into the hole when the
         * hole lies on its probe path (from its home slot to it) */
        for (uint32_t j = (i + 1) & mask; t->slots[j]; j = (j + 1) & mask) {
                uint32_t home = home_of(t, t->slots[j]);
                if (((j - home) & mask) >= ((j - i) & mask)) {
                        t->slots[i] = t->slots[j];
                        i = j;
                }
        }
        t->slots[i] = 0;
        t->n--;
        return entry;
}

void *model_ptab_next(const struct ptab *t, uint32_t *iter)
{
        while (*iter < t->cap) {
                uintptr_t s = t->slots[(*iter)++];
                if (s)
                        return entry_of(s);
        }
        return NULL;
}

size_t model_ptab_bytes(const struct ptab *t)
{
        return (size_t)t->cap * sizeof(*t->slots);
}

void model_ptab_release(struct ptab *t)
{
        free(t->slots);
        t->slots = NULL;
        t->cap = t->n = 0;
}

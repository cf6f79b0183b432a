/* A set of entries keyed by a string inside each entry (the store's name
 * and label indexes).
 *
 * Open addressing with linear probing over 8-byte slots that hold only the
 * entry's pointer: the key is read from the entry and its hash recomputed
 * when needed, instead of the 24 bytes (key, value, hash) of a se_hashmap
 * slot. The load stays at or below 4/5; removal shifts the following entries
 * back (no tombstones). Not thread-safe: the store's lock guards it.
 *
 * Entries must be aligned to 8 bytes (anything from malloc, or an object,
 * which heads its arena's first chunk): the low 3 bits of a slot carry 3
 * bits of the key's hash so that a probe skips 7 of 8 foreign entries
 * without reading them. An entry's key must not change while it is in the
 * set. */
#ifndef SVCENV_MODEL_PTAB_INTERNAL_H
#define SVCENV_MODEL_PTAB_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

typedef const char *(*ptab_key_fn)(const void *entry);

struct ptab {
        uintptr_t *slots; /* entry pointer | hash tag; 0 when empty */
        uint32_t cap; /* 0 or a power of two */
        uint32_t n;
        ptab_key_fn key_of;
};

#define PTAB_INIT(fn) ((struct ptab){ .key_of = (fn) })

/* The entry with key, or NULL. */
void *model_ptab_get(const struct ptab *t, const char *key);
/* Adds entry, or replaces the one with the same key (*ret_old gets it, else
 * NULL). 0, -ENOMEM (nothing changed), -EINVAL for a misaligned entry. */
int model_ptab_put(struct ptab *t, void *entry, void **ret_old);
/* Removes and returns the entry with key, NULL when absent. */
void *model_ptab_remove(struct ptab *t, const char *key);
/* The next entry from *iter (start at 0), NULL at the end. Order is the
 * table's, not the keys'. */
void *model_ptab_next(const struct ptab *t, uint32_t *iter);
/* Bytes of the slot array. */
size_t model_ptab_bytes(const struct ptab *t);
/* Frees the slots (not the entries); the set is empty and reusable. */
void model_ptab_release(struct ptab *t);

#endif

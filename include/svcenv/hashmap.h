/* hashmap.h — string-keyed hash map of borrowed keys to pointers.
 *
 * Open addressing with linear probing and backward-shift deletion; no
 * tombstones, so lookups stay fast after many deletions. Keys are borrowed:
 * the caller keeps each key alive (and unchanged) while it is in the map —
 * typically the key points into the value it maps to. 16 bytes per slot plus
 * a cached hash. Not thread-safe. */
#ifndef SVCENV_HASHMAP_H
#define SVCENV_HASHMAP_H

#include <stddef.h>
#include <stdint.h>

struct se_hashmap_slot {
        const char *key; /* NULL: empty */
        void *value;
        uint64_t hash;
};

struct se_hashmap {
        struct se_hashmap_slot *slots;
        size_t cap; /* power of two or 0 */
        size_t n;
};

#define SE_HASHMAP_INIT \
 {                      \
  NULL, 0, 0            \
 }

/* 64-bit hash of a NUL-terminated string. */
uint64_t se_hash_str(const char *s);
/* The same hash of n bytes at p (se_hash_mem(s, strlen(s)) == se_hash_str(s)). */
uint64_t se_hash_mem(const void *p, size_t n);
/* Value for key, NULL when absent. */
void *se_hashmap_get(const struct se_hashmap *m, const char *key);
/* The same with hash = se_hash_str(key) computed once by the caller (a key
 * looked up in several maps). */
void *se_hashmap_get_hashed(const struct se_hashmap *m, const char *key, uint64_t hash);
/* Inserts or replaces. If ret_old is given it receives the replaced value
 * (NULL when the key was new). 0 or -ENOMEM (the map is unchanged then). */
int se_hashmap_put(struct se_hashmap *m, const char *key, void *value, void **ret_old);
/* Removes key; returns its value or NULL when it was absent. */
void *se_hashmap_remove(struct se_hashmap *m, const char *key);
/* Makes dst (empty) a copy of src: the same keys and values, borrowed
 * alike; a copy costs one allocation and no hashing. 0 or -ENOMEM. */
int se_hashmap_copy(struct se_hashmap *dst, const struct se_hashmap *src);
/* Frees the table (not keys or values). */
void se_hashmap_release(struct se_hashmap *m);
/* Iteration: `for (size_t i = 0; se_hashmap_next(m, &i, &k, &v);)`; do not
 * modify the map while iterating. Order is unspecified. */
int se_hashmap_next(const struct se_hashmap *m, size_t *iter, const char **ret_key,
                    void **ret_value);

#endif

/* store.h — the object store every computation reads.
 *
 * Objects are kept by kind, namespace and name. Manifest loading and the API
 * informers are its two feeders; envvars, endpoints, proxy and admission read
 * it the same way online and offline.
 *
 * Threading: writers call put/delete; readers take se_store_rdlock() around
 * any use of borrowed pointers (get, list). Change callbacks run inside the
 * write lock, in registration order, and must not call back into the store's
 * write functions.
 *
 * Ownership: put consumes the caller's reference; borrowed pointers stay
 * valid while the read lock is held (or longer after se_object_ref). */
#ifndef SVCENV_STORE_H
#define SVCENV_STORE_H

#include <stdbool.h>
#include <stddef.h>

#include <svcenv/model.h>

struct se_store;

enum se_store_event { SE_STORE_ADD, SE_STORE_UPDATE, SE_STORE_DELETE };

/* old is NULL for ADD, new is NULL for DELETE. */
typedef void (*se_store_fn)(void *data, enum se_store_event ev, const struct se_object *old,
                            const struct se_object *new_obj);

struct se_store *se_store_new(void);
/* Frees the store and drops its references. NULL-safe; returns NULL. */
struct se_store *se_store_free(struct se_store *s);

/* Adds or replaces obj (consumes the reference, also on failure). 0 or
 * -ENOMEM. */
int se_store_put(struct se_store *s, struct se_object *obj);
/* Adds obj only when no object with its key exists: 0, or -EEXIST (obj is
 * released) or -ENOMEM. */
int se_store_add(struct se_store *s, struct se_object *obj);
/* Removes the object; 0 or -ENOENT. */
int se_store_delete(struct se_store *s, enum se_kind kind, const char *ns, const char *name);

/* Borrowed object or NULL. ns is "" for cluster-scoped kinds. */
const struct se_object *se_store_get(const struct se_store *s, enum se_kind kind, const char *ns,
                                     const char *name);

/* Borrowed objects of a kind, in ns (NULL: all namespaces), sorted by
 * namespace then name. *ret is a new array (free() it), NULL when empty.
 * Returns the count or -ENOMEM. */
long se_store_list(const struct se_store *s, enum se_kind kind, const char *ns,
                   const struct se_object ***ret);
/* se_store_list in no particular order: for callers that sort by a key of
 * their own (the namespace/name sort is then work thrown away). */
long se_store_list_unordered(const struct se_store *s, enum se_kind kind, const char *ns,
                             const struct se_object ***ret);
/* Objects of a kind in ns whose labels match a set-based selector map
 * (every key=value present). Same contract as se_store_list. */
long se_store_select(const struct se_store *s, enum se_kind kind, const char *ns,
                     const struct se_kvlist *selector, const struct se_object ***ret);
/* Number of objects of a kind (in ns, or all when NULL). */
size_t se_store_count(const struct se_store *s, enum se_kind kind, const char *ns);
/* Namespaces that hold objects of the kind, sorted; *ret new array of
 * borrowed strings. Count or -ENOMEM. */
long se_store_namespaces(const struct se_store *s, enum se_kind kind, const char ***ret);

/* Registers a callback for changes of one kind. 0 or -ENOMEM. */
int se_store_subscribe(struct se_store *s, enum se_kind kind, se_store_fn fn, void *data);
/* Removes the first registration of (fn, data) for kind. 0 or -ENOENT. */
int se_store_unsubscribe(struct se_store *s, enum se_kind kind, se_store_fn fn, void *data);

void se_store_rdlock(const struct se_store *s);
void se_store_unlock(const struct se_store *s);

/* True when every key=value of selector is in labels. An empty selector
 * matches everything (callers decide what an empty selector means). */
bool se_selector_matches(const struct se_kvlist *selector, const struct se_kvlist *labels);

#endif

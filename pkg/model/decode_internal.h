/* Helpers shared by the per-kind decoders: typed field getters that track the
 * field path for error messages and copy strings into the object's arena. */
#ifndef SVCENV_MODEL_DECODE_INTERNAL_H
#define SVCENV_MODEL_DECODE_INTERNAL_H

#include <jansson.h>

#include <svcenv/decode.h>
#include <svcenv/macro.h>
#include <svcenv/model.h>

struct dctx {
        struct se_arena *arena;
        struct se_decode_error *err;
        char path[256];
        size_t plen;
        unsigned flags; /* SE_DECODE_* */
        /* short strings already copied into this object, by hash: an
         * Endpoints repeats its namespace, node and "Pod" in every address */
        const char *seen[64];
        bool pool_add; /* with SE_DECODE_INTERN: may add to the pool */
};

/* The process-wide pool of SE_DECODE_INTERN (intern.c): immortal copies of
 * short strings, shared by every object and thread. Input decides what goes
 * in, so it is capped; full, it returns NULL and callers copy. */
#define INTERN_MAX_LEN     64
#define INTERN_MAX_STRINGS 65536
#define INTERN_MAX_BYTES   ((size_t)4 << 20) /* text incl. length byte and NUL */

/* The pooled copy of s[0..n), or NULL. */
const char *intern_pool_find(const char *s, size_t n);
/* The same, but a string not pooled yet is added when it was offered once
 * before (a filter of hashes remembers) and the caps allow. NULL when not
 * pooled. */
const char *intern_pool_add(const char *s, size_t n);
/* Strings and bytes in the pool. */
void intern_pool_stats(size_t *ret_strings, size_t *ret_bytes);

/* Path segments: push returns the old length to give back to pop. */
size_t dctx_push_key(struct dctx *d, const char *key);
size_t dctx_push_index(struct dctx *d, size_t i);
void dctx_pop(struct dctx *d, size_t old);

/* Records an error at the current path (plus an optional last key) and
 * returns -EINVAL. */
int dctx_fail(struct dctx *d, const char *key, const char *fmt, ...) SE_PRINTF(3, 4);

const char *json_type_name(const json_t *j);

/* Field getters on object `obj`: an absent key or JSON null leaves the output
 * at its "unset" value and returns 0. A value of the wrong type is -EINVAL. */
int get_string(struct dctx *d, const json_t *obj, const char *key, const char **ret);
/* get_string / get_strmap for values that recur across objects: with
 * SE_DECODE_INTERN they come from the process-wide pool when it has them. */
int get_shared_string(struct dctx *d, const json_t *obj, const char *key, const char **ret);
int get_shared_strmap(struct dctx *d, const json_t *obj, const char *key, struct se_kvlist *ret);
int get_int32(struct dctx *d, const json_t *obj, const char *key, int32_t *ret, bool *present);
int get_int64(struct dctx *d, const json_t *obj, const char *key, int64_t *ret);
int get_bool(struct dctx *d, const json_t *obj, const char *key, enum se_opt_bool *ret);
int get_object(struct dctx *d, const json_t *obj, const char *key, const json_t **ret);
int get_array(struct dctx *d, const json_t *obj, const char *key, const json_t **ret);
int get_strmap(struct dctx *d, const json_t *obj, const char *key, struct se_kvlist *ret);
int get_strarray(struct dctx *d, const json_t *obj, const char *key, struct se_strs *ret);
int get_int_or_string(struct dctx *d, const json_t *obj, const char *key,
                      struct se_int_or_string *ret);
int get_protocol(struct dctx *d, const json_t *obj, const char *key, enum se_protocol *ret,
                 bool *present);
/* Decodes one element of a list of objects into out (an element of the new
 * array); the path names the element while it runs. ctx is passed through. */
typedef int (*list_elem_fn)(struct dctx *d, const json_t *elem, void *out, const void *ctx);

/* obj[key] as a list of objects: a new array of one element of `size` bytes
 * per item, each filled by fn. Absent or null: *ret NULL and *ret_n 0. */
int get_list(struct dctx *d, const json_t *obj, const char *key, size_t size, list_elem_fn fn,
             const void *ctx, void **ret, uint32_t *ret_n);

/* The same keeping only the elements keep() accepts (the path still names
 * each by its index in the input). */
typedef bool (*list_keep_fn)(const json_t *elem);
int get_list_if(struct dctx *d, const json_t *obj, const char *key, size_t size, list_keep_fn keep,
                list_elem_fn fn, const void *ctx, void **ret, uint32_t *ret_n);
/* Typed front of get_list: `arr` is the struct field receiving the array. */
/* clang-format off */
#define GET_LIST(d, obj, key, fn, ctx, arr, n) ({                                  \
        void *list_ = NULL;                                                        \
        int r_ = get_list((d), (obj), (key), sizeof(*(arr)), (fn), (ctx), &list_,  \
                          &(n));                                                   \
        (arr) = list_;                                                             \
        r_;                                                                        \
})
/* clang-format on */

/* Allocates an array of n elements (n may be 0: NULL). */
void *dctx_array(struct dctx *d, size_t n, size_t size);
const char *dctx_strdup(struct dctx *d, const char *s);

/* Value checks; each returns 0 or fails at key. */
int check_port(struct dctx *d, const char *key, int32_t port, bool allow_zero);
int check_ip(struct dctx *d, const char *key, const char *ip);
int check_dns_label(struct dctx *d, const char *key, const char *s);
int check_iana_svc_name(struct dctx *d, const char *key, const char *s);
int check_one_of(struct dctx *d, const char *key, const char *s, const char *const *allowed);

/* metadata; cluster_scoped kinds ignore the namespace. */
int decode_meta(struct dctx *d, const json_t *json, enum se_kind kind, const char *default_ns,
                struct se_meta *meta);

int decode_service(struct dctx *d, const json_t *json, struct se_service *svc);
int decode_pod(struct dctx *d, const json_t *json, struct se_pod *pod);
int decode_node(struct dctx *d, const json_t *json, struct se_node *node);
int decode_namespace(struct dctx *d, const json_t *json, struct se_namespace *ns);
int decode_configmap(struct dctx *d, const json_t *json, struct se_configmap *cm);
int decode_service_cidr(struct dctx *d, const json_t *json, struct se_service_cidr *sc);
int decode_secret(struct dctx *d, const json_t *json, struct se_secret *sec);
int decode_endpoints(struct dctx *d, const json_t *json, struct se_endpoints *ep);
int decode_endpoint_slice(struct dctx *d, const json_t *json, struct se_endpoint_slice *es);

/* Sorts a kvlist by key; -EINVAL (via dctx_fail at key) on a duplicate key. */
void kvlist_sort(struct se_kvlist *l);

#endif

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
const char *model_intern_pool_find(const char *s, size_t n);
/* The same, but a string not pooled yet is added when it was offered once
 * before (a filter of hashes remembers) and the caps allow. NULL when not
 * pooled. */
const char *model_intern_pool_add(const char *s, size_t n);
/* Strings and bytes in the pool. */
void model_intern_pool_stats(size_t *ret_strings, size_t *ret_bytes);

/* Path segments: push returns the old length to give back to pop. */
size_t model_dctx_push_key(struct dctx *d, const char *key);
size_t model_dctx_push_index(struct dctx *d, size_t i);
void model_dctx_pop(struct dctx *d, size_t old);

/* Records an error at the current path (plus an optional last key) and
 * returns -EINVAL. */
int model_dctx_fail(struct dctx *d, const char *key, const char *fmt, ...) SE_PRINTF(3, 4);

const char *model_json_type_name(const json_t *j);

/* Field getters on object `obj`: an absent key or JSON null leaves the output
 * at its "unset" value and returns 0. A value of the wrong type is -EINVAL. */
int model_get_string(struct dctx *d, const json_t *obj, const char *key, const char **ret);
/* model_get_string / model_get_strmap for values that recur across objects: with
 * SE_DECODE_INTERN they come from the process-wide pool when it has them. */
int model_get_shared_string(struct dctx *d, const json_t *obj, const char *key, const char **ret);
int model_get_shared_strmap(struct dctx *d, const json_t *obj, const char *key,
                            struct se_kvlist *ret);
int model_get_int32(struct dctx *d, const json_t *obj, const char *key, int32_t *ret,
                    bool *present);
int model_get_int64(struct dctx *d, const json_t *obj, const char *key, int64_t *ret);
int model_get_bool(struct dctx *d, const json_t *obj, const char *key, enum se_opt_bool *ret);
int model_get_object(struct dctx *d, const json_t *obj, const char *key, const json_t **ret);
int model_get_array(struct dctx *d, const json_t *obj, const char *key, const json_t **ret);
int model_get_strmap(struct dctx *d, const json_t *obj, const char *key, struct se_kvlist *ret);
int model_get_strarray(struct dctx *d, const json_t *obj, const char *key, struct se_strs *ret);
int model_get_int_or_string(struct dctx *d, const json_t *obj, const char *key,
                            struct se_int_or_string *ret);
int model_get_protocol(struct dctx *d, const json_t *obj, const char *key, enum se_protocol *ret,
                       bool *present);
/* Decodes one element of a list of objects into out (an element of the new
 * array); the path names the element while it runs. ctx is passed through. */
typedef int (*list_elem_fn)(struct dctx *d, const json_t *elem, void *out, const void *ctx);

/* obj[key] as a list of objects: a new array of one element of `size` bytes
 * per item, each filled by fn. Absent or null: *ret NULL and *ret_n 0. */
int model_get_list(struct dctx *d, const json_t *obj, const char *key, size_t size, list_elem_fn fn,
                   const void *ctx, void **ret, uint32_t *ret_n);

/* The same keeping only the elements keep() accepts (the path still names
 * each by its index in the input). */
typedef bool (*list_keep_fn)(const json_t *elem);
int model_get_list_if(struct dctx *d, const json_t *obj, const char *key, size_t size,
                      list_keep_fn keep, list_elem_fn fn, const void *ctx, void **ret,
                      uint32_t *ret_n);
/* Typed front of model_get_list: `arr` is the struct field receiving the array. */
/* clang-format off */
#define GET_LIST(d, obj, key, fn, ctx, arr, n) ({                                  \
        void *list_ = NULL;                                                        \
        int r_ = model_get_list((d), (obj), (key), sizeof(*(arr)), (fn), (ctx), &list_,  \
                          &(n));                                                   \
        (arr) = list_;                                                             \
        r_;                                                                        \
})
/* clang-format on */

/* Allocates an array of n elements (n may be 0: NULL). */
void *model_dctx_array(struct dctx *d, size_t n, size_t size);
const char *model_dctx_strdup(struct dctx *d, const char *s);

/* Value checks; each returns 0 or fails at key. */
int model_check_port(struct dctx *d, const char *key, int32_t port, bool allow_zero);
int model_check_ip(struct dctx *d, const char *key, const char *ip);
int model_check_dns_label(struct dctx *d, const char *key, const char *s);
int model_check_iana_svc_name(struct dctx *d, const char *key, const char *s);
int model_check_one_of(struct dctx *d, const char *key, const char *s, const char *const *allowed);

/* metadata; cluster_scoped kinds ignore the namespace. */
int model_decode_meta(struct dctx *d, const json_t *json, enum se_kind kind, const char *default_ns,
                      struct se_meta *meta);

int model_decode_service(struct dctx *d, const json_t *json, struct se_service *svc);
int model_decode_pod(struct dctx *d, const json_t *json, struct se_pod *pod);
int model_decode_node(struct dctx *d, const json_t *json, struct se_node *node);
int model_decode_namespace(struct dctx *d, const json_t *json, struct se_namespace *ns);
int model_decode_configmap(struct dctx *d, const json_t *json, struct se_configmap *cm);
int model_decode_service_cidr(struct dctx *d, const json_t *json, struct se_service_cidr *sc);
int model_decode_secret(struct dctx *d, const json_t *json, struct se_secret *sec);
int model_decode_endpoints(struct dctx *d, const json_t *json, struct se_endpoints *ep);
int model_decode_endpoint_slice(struct dctx *d, const json_t *json, struct se_endpoint_slice *es);

/* Sorts a kvlist by key; -EINVAL (via model_dctx_fail at key) on a duplicate key. */
void model_kvlist_sort(struct se_kvlist *l);

#endif

/* Private pieces of pkg/admission shared by its files. */
#ifndef SVCENV_ADMISSION_INTERNAL_H
#define SVCENV_ADMISSION_INTERNAL_H

#include <stdatomic.h>

#include <jansson.h>

#include <svcenv/admission.h>
#include <svcenv/hashmap.h>
#include <svcenv/jsonstr.h>
#include <svcenv/strbuf.h>

struct warnings {
        char *v[SE_ADMISSION_MAX_WARNINGS];
        size_t n;
        size_t dropped;
};

void admission_warnings_add(struct warnings *w, const char *fmt, ...) SE_PRINTF(2, 3);

/* One service variable, rendered: its JSON, and that JSON in base64 from
 * byte h on (whole groups only) for h = 0, 1, 2 (b64[h] NULL: not made). */
struct rvar {
        const char *name;
        const char *value;
        const char *json;
        size_t json_len;
        const char *b64[3];
        size_t b64_len[3];
        size_t exec_size; /* NAME=VALUE, NUL, pointer */
};

/* The service variables of one namespace (and enableServiceLinks value),
 * rendered; immutable once built, shared by reference. */
struct nsvars {
        _Atomic long refs;
        char *key; /* links flag '0'/'1' then the namespace; cached ones only */
        struct se_env_list list; /* owns name and value */
        struct rvar *v;
        size_t n;
        char *blob; /* every json and b64 string */
        struct se_hashmap index; /* name -> index + 1 (cached entries) */
        bool indexed;
        size_t exec_total; /* sum of exec_size */
        /* cached entries only: the whole patch text of containers[0] when it
         * gets every variable, as one op (RUN_WHOLE, no env yet) or one op per
         * variable (RUN_OPS), without the leading comma */
        struct rvar run[2];
        char *run_blob[2];
        size_t bytes; /* memory held, for the cache cap */
        uint64_t used; /* cache clock at the last use */
};

enum { RUN_WHOLE, RUN_OPS };

/* Appends the operations that give container idx of field every variable of
 * nv (whole: one op with the array, else one per variable), the ops joined
 * by commas; the same text patch_container writes. */
void admission_render_run(struct se_strbuf *sb, const struct nsvars *nv, const char *field,
                          size_t idx, bool whole);

/* se_envvars_services() rendered; with_b64 also makes the base64 forms.
 * 0 or -ENOMEM. */
int admission_nsvars_build(const struct se_envvars_input *in, const char *ns, bool links,
                           bool with_b64, struct nsvars **ret);
/* NULL-safe; returns NULL. */
struct nsvars *admission_nsvars_unref(struct nsvars *nv);
/* The cached entry (built and inserted when missing). Caller holds the
 * store's read lock; *ret is a reference to drop with admission_nsvars_unref. */
int admission_cache_get(struct se_admission_cache *c, const struct se_envvars_input *in,
                        const char *ns, bool links, struct nsvars **ret);
const struct se_store *admission_cache_store(const struct se_admission_cache *c);

/* A base64 stream into out (the JSON patch goes straight to the response,
 * never whole in memory). raw counts the bytes before encoding. */
struct b64w {
        struct se_strbuf *out;
        unsigned char pend[3];
        unsigned npend;
        size_t raw;
};
void admission_b64w_add(struct b64w *w, const void *data, size_t n);
/* Adds v->json, copying the cached base64 where it lines up. */
void admission_b64w_add_var(struct b64w *w, const struct rvar *v);
/* Writes the last partial group with padding. */
void admission_b64w_finish(struct b64w *w);

/* Where the patch builder writes: small pieces gather in stage and go to
 * the base64 stream before each variable and at the end. */
struct patch_out {
        struct se_strbuf stage;
        struct b64w b64;
};

/* What the patch builder reports back. */
struct patch_stats {
        size_t n_vars;
        bool guarded;
};

/* Builds the JSON patch operations (service variables from the cache when
 * one is given) for the pod (containers and init
 * containers), appended to patch without the enclosing brackets; `first`
 * tracks whether a comma is needed. 0, -ENOMEM or the decode failure
 * (-EINVAL with msg filled). */
int admission_build_patch(const struct se_envvars_input *in, struct se_admission_cache *cache,
                          const struct se_admission_options *opt, const json_t *object,
                          const char *ns, struct patch_out *po, struct warnings *w,
                          struct patch_stats *st, char *msg, size_t msg_size);

#endif

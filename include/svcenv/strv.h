/* strv.h — a growable vector of owned, NUL-terminated strings.
 *
 * `v` is NULL-terminated whenever n > 0. The vector owns its strings: they
 * are freed by se_strv_release. */
#ifndef SVCENV_STRV_H
#define SVCENV_STRV_H

#include <stdbool.h>
#include <stddef.h>

struct se_strv {
        char **v;
        size_t n;
        size_t alloc;
};

#define SE_STRV_INIT \
 {                   \
  NULL, 0, 0         \
 }

/* Appends a copy of s. 0 or -ENOMEM. */
int se_strv_push(struct se_strv *sv, const char *s);
/* Appends s itself; the vector owns it from now on, even on failure (then it
 * is freed). 0 or -ENOMEM. */
int se_strv_push_consume(struct se_strv *sv, char *s);
/* True when some element equals s. */
bool se_strv_contains(const struct se_strv *sv, const char *s);
/* Sorts with strcmp. */
void se_strv_sort(struct se_strv *sv);
/* Frees every string and the array; the vector is empty again. */
void se_strv_release(struct se_strv *sv);
/* Splits s at every sep into a new vector (empty parts are kept unless
 * skip_empty). 0 or -ENOMEM. */
int se_strv_split(struct se_strv *ret, const char *s, char sep, bool skip_empty);

#define se_strv_foreach(s, sv) for (char **s = (sv)->v; s && *s; s++)

static inline void se_strv_releasep(struct se_strv *sv)
{
        se_strv_release(sv);
}
#define _cleanup_strv_ _cleanup_(se_strv_releasep)

#endif

/* macro.h — scoped cleanup and small helpers used everywhere.
 *
 * `_cleanup_(fn)` runs fn(&var) when var leaves scope; `TAKE_PTR(p)` hands
 * a pointer out of such a scope (returns it and sets the variable to NULL),
 * so ownership transfers are visible at the call site. */
#ifndef SVCENV_MACRO_H
#define SVCENV_MACRO_H

#include <stddef.h>
#include <stdlib.h>

#define SE_UNUSED        __attribute__((unused))
#define SE_PRINTF(a, b)  __attribute__((format(printf, a, b)))
#define SE_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define _cleanup_(fn)    __attribute__((cleanup(fn)))

/* clang-format off */
#define TAKE_PTR(p) ({                          \
        __typeof__(p) taken_ = (p);             \
        (p) = NULL;                             \
        taken_;                                 \
})
/* clang-format on */

/* Drops const from a pointer for APIs that are not const-correct (jansson's
 * read-only iteration, refcounting of store objects). */
#define SE_UNCONST(T, p) \
 (                       \
         ((union {       \
const T *c;                  \
T *m;                        \
         }){ .c = (p) }) \
                 .m)

static inline void se_freep(void *p)
{
        free(*(void **)p);
}
#define _cleanup_free_ _cleanup_(se_freep)

/* Defines `static inline void name##p(type **p)` calling fn(*p) when non-NULL. */
#define SE_DEFINE_CLEANUP(type, fn) \
 static inline void fn##p(type **p) \
 {                                  \
  if (*p)                           \
   (void)fn(*p);                    \
 }

#endif

/* alloc.h — the one allocator every svcenv allocation goes through.
 *
 * Wrappers over libc with overflow-checked sizes. A test hook can make the
 * Nth allocation fail so that -ENOMEM paths are exercised. Every function
 * returns NULL on failure and never aborts. What they return is freed with
 * free().
 *
 * No code in pkg/ or cmd/ calls malloc, calloc, realloc, strdup, strndup or
 * [v]asprintf itself (test/check-layers looks at the objects' symbols). What
 * a dependency allocates keeps that dependency's rule, and the failure hook
 * does not reach it:
 *  - jansson: json_t trees (json_decref) and json_dumps() text, which is
 *    malloc'd by jansson and freed with free() (kube_rest.c, cmd_admit.c);
 *  - libyaml parser and events: yaml_*_delete (yaml_load.c);
 *  - libcurl handles and lists: curl_easy_cleanup, curl_slist_free_all;
 *  - OpenSSL objects: their *_free calls (httpd certs.c);
 *  - libwebsockets contexts: lws_context_destroy. */
#ifndef SVCENV_ALLOC_H
#define SVCENV_ALLOC_H

#include <stdarg.h>
#include <stddef.h>

/* malloc; NULL on failure. */
void *se_malloc(size_t size);
/* calloc with an overflow check of n*size; NULL on failure or overflow. */
void *se_calloc(size_t n, size_t size);
/* realloc of an array of n elements of size bytes, overflow-checked. On
 * failure returns NULL and leaves p untouched (still owned by the caller). */
void *se_reallocarray(void *p, size_t n, size_t size);
/* New copy of s (NULL gives NULL). */
char *se_strdup(const char *s);
/* New NUL-terminated copy of the first n bytes of s. */
char *se_strndup(const char *s, size_t n);

/* asprintf through se_malloc: *ret is a new string and the result its
 * length, or -1 with *ret NULL (out of memory or a format error). */
int se_asprintf(char **ret, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same with a va_list (ap is consumed). */
int se_vasprintf(char **ret, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* Big buffers filled right away (at least SE_HUGE_MIN bytes): aligned to
 * 2 MiB and advised as transparent huge pages. Smaller sizes: se_malloc.
 * free() it; NULL on failure. */
#define SE_HUGE_MIN ((size_t)1 << 20)
void *se_malloc_huge(size_t size);
/* The huge-page hint for [p, p + size) when size >= SE_HUGE_MIN (the 2 MiB
 * aligned part). Errors are ignored: a hint. */
void se_advise_huge(void *p, size_t size);

/* Test hook: make the allocation number n (1-based, counted from this call)
 * fail; 0 switches it off. Not thread-safe; tests only. */
void se_alloc_fail_at(unsigned long n);

#endif

/* Vector of owned strings (see strv.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/strv.h>

int se_strv_push_consume(struct se_strv *sv, char *s)
{
        if (!s)
                return -ENOMEM;
        if (sv->n + 2 > sv->alloc) {
                size_t cap = sv->alloc ? sv->alloc * 2 : 8;
                char **v = se_reallocarray(sv->v, cap, sizeof(char *));
                if (!v) {
                        free(s);
                        return -ENOMEM;
                }
                sv->v = v;
                sv->alloc = cap;
        }
        sv->v[sv->n++] = s;
        sv->v[sv->n] = NULL;
        return 0;
}

int se_strv_push(struct se_strv *sv, const char *s)
{
        return se_strv_push_consume(sv, se_strdup(s));
}

bool se_strv_contains(const struct se_strv *sv, const char *s)
{
        for (size_t i = 0; i < sv->n; i++)
                if (strcmp(sv->v[i], s) == 0)
                        return true;
        return false;
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

void se_strv_sort(struct se_strv *sv)
{
        if (sv->n > 1)
                qsort(sv->v, sv->n, sizeof(char *), cmp_str);
}

void se_strv_release(struct se_strv *sv)
{
        for (size_t i = 0; i < sv->n; i++)
                free(sv->v[i]);
        free(sv->v);
        sv->v = NULL;
        sv->n = sv->alloc = 0;
}

int se_strv_split(struct se_strv *ret, const char *s, char sep, bool skip_empty)
{
        struct se_strv out = SE_STRV_INIT;
        const char *p = s;
        for (;;) {
                const char *e = strchr(p, sep);
                size_t n = e ? (size_t)(e - p) : strlen(p);
                if (n || !skip_empty) {
                        if (se_strv_push_consume(&out, se_strndup(p, n)) < 0) {
                                se_strv_release(&out);
                                return -ENOMEM;
                        }
                }
                if (!e)
                        break;
                p = e + 1;
        }
        *ret = out;
        return 0;
}

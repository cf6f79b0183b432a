/* The environment list: entries, their strings, descriptions and size. */
#include <errno.h>
#include <string.h>

#include <svcenv/alloc.h>

#include "envvars_internal.h"

void se_env_list_init(struct se_env_list *l)
{
        *l = (struct se_env_list)SE_ENV_LIST_INIT;
}

void se_env_list_release(struct se_env_list *l)
{
        free(l->items);
        se_arena_release(&l->arena);
        se_arena_release(&l->adopted);
        se_env_list_init(l);
}

const struct se_env_entry *se_env_list_find(const struct se_env_list *l, const char *name)
{
        for (size_t i = 0; i < l->n; i++)
                if (strcmp(l->items[i].name, name) == 0)
                        return &l->items[i];
        return NULL;
}

struct se_env_entry *envvars_list_push(struct se_env_list *l)
{
        if (l->n == l->alloc) {
                size_t na = l->alloc ? l->alloc * 2 : 32;
                struct se_env_entry *p = se_reallocarray(l->items, na, sizeof(*p));
                if (!p)
                        return NULL;
                l->items = p;
                l->alloc = na;
        }
        struct se_env_entry *e = &l->items[l->n++];
        *e = (struct se_env_entry){ .port = -1 };
        return e;
}

const char *envvars_list_strdup(struct se_env_list *l, const char *s)
{
        return s ? se_arena_strdup(&l->arena, s) : NULL;
}

int envvars_list_add_loser(struct se_env_list *l, struct se_env_entry *winner,
                           const struct se_env_entry *loser)
{
        struct se_env_loser *x = se_arena_alloc(&l->arena, sizeof(*x));
        if (!x)
                return -ENOMEM;
        x->value = envvars_list_strdup(l, loser->value);
        x->origin = loser->origin;
        x->object = envvars_list_strdup(l, loser->object);
        x->key = envvars_list_strdup(l, loser->key);
        x->port = loser->port;
        if (!x->value || (loser->object && !x->object) || (loser->key && !x->key))
                return -ENOMEM;
        x->next = winner->lost;
        winner->lost = x;
        return 0;
}

void se_env_list_size(const struct se_env_list *l, size_t *ret_count, size_t *ret_bytes,
                      size_t *ret_longest)
{
        size_t bytes = 0, longest = 0;
        for (size_t i = 0; i < l->n; i++) {
                size_t s = strlen(l->items[i].name) + 1 + strlen(l->items[i].value) + 1;
                bytes += s + sizeof(void *);
                longest = s > longest ? s : longest;
        }
        if (ret_count)
                *ret_count = l->n;
        if (ret_bytes)
                *ret_bytes = bytes;
        if (ret_longest)
                *ret_longest = longest;
}

static int describe(enum se_env_origin origin, const char *object, const char *key, int32_t port,
                    struct se_strbuf *sb)
{
        switch (origin) {
        case SE_ENV_FROM_SERVICE:
                se_strbuf_printf(sb, "service %s", object);
                if (port >= 0)
                        se_strbuf_printf(sb, " port %d", (int)port);
                if (key && *key)
                        se_strbuf_printf(sb, " (%s)", key);
                break;
        case SE_ENV_FROM_VALUE:
                se_strbuf_puts(sb, "env value");
                break;
        case SE_ENV_FROM_FIELD:
                se_strbuf_printf(sb, "fieldRef %s", key);
                break;
        case SE_ENV_FROM_RESOURCE:
                se_strbuf_printf(sb, "resourceFieldRef %s of container %s", key, object);
                break;
        case SE_ENV_FROM_CONFIGMAP_KEY:
                se_strbuf_printf(sb, "configMap %s key %s", object, key);
                break;
        case SE_ENV_FROM_SECRET_KEY:
                se_strbuf_printf(sb, "secret %s key %s", object, key);
                break;
        case SE_ENV_FROM_ENVFROM_CONFIGMAP:
                se_strbuf_printf(sb, "envFrom configMap %s key %s", object, key);
                break;
        case SE_ENV_FROM_ENVFROM_SECRET:
                se_strbuf_printf(sb, "envFrom secret %s key %s", object, key);
                break;
        }
        return se_strbuf_failed(sb);
}

int se_env_entry_describe(const struct se_env_entry *e, struct se_strbuf *sb)
{
        return describe(e->origin, e->object, e->key, e->port, sb);
}

int se_env_loser_describe(const struct se_env_loser *l, struct se_strbuf *sb)
{
        return describe(l->origin, l->object, l->key, l->port, sb);
}

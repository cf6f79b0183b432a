/* zone_changes.c — which Services a run of store changes touched: what
 * lets a zone update rebuild those alone. */
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/hashmap.h>

#include "dns_internal.h"

#define LABEL_SERVICE_NAME "kubernetes.io/service-name"

struct se_dns_changes *se_dns_changes_new(void)
{
        return se_calloc(1, sizeof(struct se_dns_changes));
}

void se_dns_changes_clear(struct se_dns_changes *c)
{
        char *key;
        for (size_t it = 0; se_hashmap_next(&c->keys, &it, NULL, (void **)&key);)
                free(key);
        se_hashmap_release(&c->keys);
        c->all = false;
        c->any = false;
}

void se_dns_changes_free(struct se_dns_changes *c)
{
        if (!c)
                return;
        se_dns_changes_clear(c);
        free(c);
}

void se_dns_changes_note_all(struct se_dns_changes *c)
{
        se_dns_changes_clear(c);
        c->all = true;
        c->any = true;
}

bool se_dns_changes_empty(const struct se_dns_changes *c)
{
        return !c->any;
}

bool se_dns_changes_everything(const struct se_dns_changes *c)
{
        return c->all;
}

/* "<ns>/<name>" of a Service noted; everything when it cannot be. */
static void note_key(struct se_dns_changes *c, const char *ns, const char *name)
{
        if (c->all || !ns || !name)
                return;
        size_t nl = strlen(ns), ml = strlen(name);
        char *key = se_malloc(nl + ml + 2);
        if (!key) {
                se_dns_changes_note_all(c);
                return;
        }
        memcpy(key, ns, nl);
        key[nl] = '/';
        memcpy(key + nl + 1, name, ml + 1);
        if (se_hashmap_get(&c->keys, key)) {
                free(key);
                return;
        }
        if (c->keys.n >= SE_DNS_MAX_CHANGED || se_hashmap_put(&c->keys, key, key, NULL) < 0) {
                free(key);
                se_dns_changes_note_all(c);
        }
}

static void note_one(struct se_dns_changes *c, const struct se_object *o)
{
        if (!o)
                return;
        switch (o->kind) {
        case SE_KIND_SERVICE:
                note_key(c, o->meta.namespace, o->meta.name);
                break;
        case SE_KIND_ENDPOINT_SLICE: {
                /* a slice without the label belongs to no Service's names */
                const char *svc = se_kvlist_get(&o->meta.labels, LABEL_SERVICE_NAME);
                if (svc)
                        note_key(c, o->meta.namespace, svc);
                break;
        }
        case SE_KIND_POD:
                /* pod names are made on every build (and namespaces are
                 * compared there): only a build is needed */
                break;
        default:
                se_dns_changes_note_all(c);
        }
}

void se_dns_changes_note(struct se_dns_changes *c, const struct se_object *old,
                         const struct se_object *new_obj)
{
        c->any = true;
        note_one(c, old);
        note_one(c, new_obj);
}

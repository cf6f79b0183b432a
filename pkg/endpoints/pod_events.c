/* Which Services a pod event re-syncs (see endpoints_sync.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/endpoints_sync.h>

static bool same_str(const char *a, const char *b)
{
        return strcmp(a ? a : "", b ? b : "") == 0;
}

static bool same_labels(const struct se_kvlist *a, const struct se_kvlist *b)
{
        if (a->n != b->n)
                return false;
        for (uint32_t i = 0; i < a->n; i++)
                if (strcmp(a->items[i].key, b->items[i].key) != 0 ||
                    strcmp(a->items[i].value, b->items[i].value) != 0)
                        return false;
        return true;
}

unsigned se_pod_change(const struct se_pod *old_pod, const struct se_pod *new_pod)
{
        unsigned flags = 0;
        if (!same_labels(&old_pod->obj.meta.labels, &new_pod->obj.meta.labels) ||
            !same_str(old_pod->hostname, new_pod->hostname) ||
            !same_str(old_pod->subdomain, new_pod->subdomain))
                flags |= SE_POD_MEMBERSHIP_CHANGED;
        /* Upstream compares the two deletionTimestamp pointers, which differ
         * whenever either is set: every update of a terminating pod counts. */
        if (old_pod->obj.meta.deletion_timestamp || new_pod->obj.meta.deletion_timestamp ||
            se_pod_is_ready(old_pod) != se_pod_is_ready(new_pod) ||
            old_pod->pod_ips.n != new_pod->pod_ips.n)
                return flags | SE_POD_ENDPOINTS_CHANGED;
        for (uint32_t i = 0; i < old_pod->pod_ips.n; i++)
                if (strcmp(old_pod->pod_ips.v[i], new_pod->pod_ips.v[i]) != 0)
                        return flags | SE_POD_ENDPOINTS_CHANGED;
        return flags;
}

/* Keys of the Services in the pod's namespace whose selector matches it. */
static int memberships(const struct se_store *s, const struct se_pod *pod, struct se_strv *out)
{
        const struct se_object **svcs;
        long n = se_store_list(s, SE_KIND_SERVICE, pod->obj.meta.namespace, &svcs);
        if (n < 0)
                return (int)n;
        int r = 0;
        for (long i = 0; i < n && r == 0; i++) {
                const struct se_service *svc = se_service_of(svcs[i]);
                if (!svc || !svc->selector.n ||
                    !se_selector_matches(&svc->selector, &pod->obj.meta.labels))
                        continue;
                char *key = NULL;
                if (se_asprintf(&key, "%s/%s", svc->obj.meta.namespace, svc->obj.meta.name) < 0)
                        r = -ENOMEM;
                else
                        r = se_strv_push_consume(out, key);
        }
        free(svcs);
        return r;
}

/* Appends a's keys (sorted) that b does not hold, or all of a with b NULL. */
static int append_missing(struct se_strv *ret, const struct se_strv *a, const struct se_strv *b)
{
        for (size_t i = 0; i < a->n; i++) {
                if ((b && se_strv_contains(b, a->v[i])) || se_strv_contains(ret, a->v[i]))
                        continue;
                int r = se_strv_push(ret, a->v[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

int se_endpoints_services_for_pod_event(const struct se_store *s, const struct se_pod *old_pod,
                                        const struct se_pod *new_pod, struct se_strv *ret)
{
        struct se_strv now = SE_STRV_INIT, before = SE_STRV_INIT;
        int r = 0;
        if (!old_pod || !new_pod) {
                r = memberships(s, old_pod ? old_pod : new_pod, &now);
                if (r == 0)
                        r = append_missing(ret, &now, NULL);
                goto out;
        }
        if (same_str(old_pod->obj.meta.resource_version, new_pod->obj.meta.resource_version) &&
            old_pod->obj.meta.resource_version)
                goto out; /* a periodic resync: nothing happened */
        unsigned change = se_pod_change(old_pod, new_pod);
        if (!change)
                goto out;
        if ((r = memberships(s, new_pod, &now)) < 0)
                goto out;
        if (!(change & SE_POD_MEMBERSHIP_CHANGED)) {
                r = append_missing(ret, &now, NULL);
                goto out;
        }
        if ((r = memberships(s, old_pod, &before)) < 0)
                goto out;
        if (change & SE_POD_ENDPOINTS_CHANGED) {
                /* the union: old Services lose the pod, new ones gain it */
                if ((r = append_missing(ret, &now, NULL)) == 0)
                        r = append_missing(ret, &before, NULL);
        } else {
                /* labels only: Services the pod joined or left */
                if ((r = append_missing(ret, &now, &before)) == 0)
                        r = append_missing(ret, &before, &now);
        }
out:
        se_strv_sort(ret);
        se_strv_release(&now);
        se_strv_release(&before);
        return r;
}

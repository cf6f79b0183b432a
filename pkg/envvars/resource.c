/* resourceFieldRef: a container's cpu/memory limit or request, divided by the
 * divisor and rounded up, as the kubelet computes it. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <svcenv/parse.h>

#include "envvars_internal.h"

static const struct se_container *find_container(const struct se_pod *pod, const char *name)
{
        for (uint32_t i = 0; i < pod->n_containers; i++)
                if (pod->containers[i].name && strcmp(pod->containers[i].name, name) == 0)
                        return &pod->containers[i];
        for (uint32_t i = 0; i < pod->n_init_containers; i++)
                if (pod->init_containers[i].name && strcmp(pod->init_containers[i].name, name) == 0)
                        return &pod->init_containers[i];
        return NULL;
}

int envvars_resource_value(const struct se_pod *pod, const struct se_container *c,
                           const char *resource, const char *container_name, const char *divisor,
                           char *buf, size_t size, struct se_diag *diag)
{
        if (container_name && *container_name && !(c = find_container(pod, container_name))) {
                se_diag_set(diag, NULL, 0, 0, "container %s not found", container_name);
                return -EINVAL;
        }
        resource = resource ? resource : "";
        bool limits = strncmp(resource, "limits.", 7) == 0;
        bool requests = strncmp(resource, "requests.", 9) == 0;
        const char *name = limits ? resource + 7 : requests ? resource + 9 : "";
        bool cpu = strcmp(name, "cpu") == 0;
        bool bytes = strcmp(name, "memory") == 0 || strcmp(name, "ephemeral-storage") == 0 ||
                     strncmp(name, "hugepages-", 10) == 0;
        if (!cpu && !bytes) {
                se_diag_set(diag, NULL, 0, 0, "unsupported container resource : %s", resource);
                return -EINVAL;
        }
        /* the API server defaults a missing request to the limit */
        const char *q = se_kvlist_get(limits ? &c->limits : &c->requests, name);
        if (!q && requests)
                q = se_kvlist_get(&c->limits, name);
        int64_t v = 0, d = 0;
        /* the kubelet fills unset cpu, memory and ephemeral-storage limits
         * from the node's allocatable; an unset hugepages limit stays 0 */
        if (!q && limits && strncmp(name, "hugepages-", 10) != 0) {
                se_diag_set(
                        diag, NULL, 0, 0,
                        "%s of container %s is not set: the kubelet would use the node's allocatable, which svcenv does not know",
                        resource, c->name ? c->name : "");
                return -ENODATA;
        }
        int scale = cpu ? 3 : 0;
        if (q && se_parse_quantity(q, scale, &v) < 0) {
                se_diag_set(diag, NULL, 0, 0, "quantities must match the regular expression: %s",
                            q);
                return -EINVAL;
        }
        if (divisor && *divisor && se_parse_quantity(divisor, scale, &d) < 0) {
                se_diag_set(diag, NULL, 0, 0, "quantities must match the regular expression: %s",
                            divisor);
                return -EINVAL;
        }
        if (!divisor || !*divisor || d == 0) /* a zero divisor means 1 */
                (void)se_parse_quantity("1", scale, &d);
        double r = ceil((double)v / (double)d);
        snprintf(buf, size, "%lld", (long long)r);
        return 0;
}

/* resourceFieldRef: a container's cpu/memory limit or request, divided by the
 * divisor and rounded up, as the kubelet computes it. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "envvars_internal.h"

/* Parses a Kubernetes quantity ("500m", "1.5Gi", "2e3", "128974848") and
 * returns ceil(value * 10^scale) clamped to int64 (the way Quantity's
 * ScaledValue rounds). -EINVAL when it is not a quantity. */
static int quantity_scaled(const char *s, int scale, int64_t *ret)
{
        __int128 mant = 0;
        int exp10 = scale, exp2 = 0, digits = 0;
        bool neg = false, frac = false;
        const char *p = s;
        if (*p == '+' || *p == '-')
                neg = *p++ == '-';
        for (; (*p >= '0' && *p <= '9') || (*p == '.' && !frac); p++) {
                if (*p == '.') {
                        frac = true;
                        continue;
                }
                if (digits < 30) {
                        mant = mant * 10 + (*p - '0');
                        digits += mant != 0;
                        exp10 -= frac;
                } else if (!frac) {
                        exp10++; /* digits past precision */
                }
        }
        if (p == s || (p == s + 1 && (*s == '+' || *s == '-' || *s == '.')))
                return -EINVAL;
        static const struct {
                const char *suffix;
                int e10, e2;
        } suffixes[] = { { "Ki", 0, 10 }, { "Mi", 0, 20 }, { "Gi", 0, 30 }, { "Ti", 0, 40 },
                         { "Pi", 0, 50 }, { "Ei", 0, 60 }, { "n", -9, 0 },  { "u", -6, 0 },
                         { "m", -3, 0 },  { "k", 3, 0 },   { "M", 6, 0 },   { "G", 9, 0 },
                         { "T", 12, 0 },  { "P", 15, 0 },  { "E", 18, 0 },  { "", 0, 0 } };
        bool matched = false;
        for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]) && !matched; i++)
                if (strcmp(p, suffixes[i].suffix) == 0) {
                        exp10 += suffixes[i].e10;
                        exp2 += suffixes[i].e2;
                        matched = true;
                }
        if (!matched && (*p == 'e' || *p == 'E')) {
                int e = 0, sign = 1;
                const char *q = p + 1;
                if (*q == '+' || *q == '-')
                        sign = *q++ == '-' ? -1 : 1;
                if (!*q)
                        return -EINVAL;
                for (; *q >= '0' && *q <= '9'; q++)
                        if (e < 1000)
                                e = e * 10 + (*q - '0');
                if (*q)
                        return -EINVAL;
                exp10 += sign * e;
                matched = true;
        }
        if (!matched)
                return -EINVAL;
        const __int128 cap = (__int128)INT64_MAX;
        __int128 v = mant, div = 1;
        for (; exp2 > 0 && v <= cap; exp2--)
                v *= 2;
        for (; exp10 > 0 && v <= cap; exp10--)
                v *= 10;
        for (; exp10 < 0 && div <= cap; exp10++)
                div *= 10;
        if (exp10 < 0) /* smaller than any unit: rounds up to 1 unless zero */
                v = v ? 1 : 0, div = 1;
        v = (v + div - 1) / div;
        if (v > cap)
                v = cap;
        *ret = neg ? -(int64_t)v : (int64_t)v;
        return 0;
}

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
        if (q && quantity_scaled(q, scale, &v) < 0) {
                se_diag_set(diag, NULL, 0, 0, "quantities must match the regular expression: %s",
                            q);
                return -EINVAL;
        }
        if (divisor && *divisor && quantity_scaled(divisor, scale, &d) < 0) {
                se_diag_set(diag, NULL, 0, 0, "quantities must match the regular expression: %s",
                            divisor);
                return -EINVAL;
        }
        if (!divisor || !*divisor || d == 0) /* a zero divisor means 1 */
                (void)quantity_scaled("1", scale, &d);
        double r = ceil((double)v / (double)d);
        snprintf(buf, size, "%lld", (long long)r);
        return 0;
}

/* Scheduler objects: parsing a name, and dispatching update and pick to the
 * scheduler's own file. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>

#include "lb_internal.h"

static const char *const names[] = {
        [SE_LB_RR] = "rr",   [SE_LB_WRR] = "wrr",       [SE_LB_LC] = "lc",   [SE_LB_WLC] = "wlc",
        [SE_LB_SED] = "sed", [SE_LB_NQ] = "nq",         [SE_LB_DH] = "dh",   [SE_LB_SH] = "sh",
        [SE_LB_MH] = "mh",   [SE_LB_RANDOM] = "random", [SE_LB_P2C] = "p2c",
};

const char *se_lb_name(enum se_lb_kind kind)
{
        return (unsigned)kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "?";
}

static int parse_flag(const char *s, size_t len, unsigned *flags)
{
        if (len == 4 && memcmp(s, "port", 4) == 0)
                *flags |= SE_LB_PORT;
        else if (len == 8 && memcmp(s, "fallback", 8) == 0)
                *flags |= SE_LB_FALLBACK;
        else
                return -EINVAL;
        return 0;
}

/* "sh", "sh:port", "sh:port,fallback", and ipvsadm's spelling of the same
 * flags, "sh,sh-port,sh-fallback". */
int se_lb_parse(const char *spec, enum se_lb_kind *kind, unsigned *flags)
{
        if (!spec)
                return -EINVAL;
        size_t nlen = strcspn(spec, ":,");
        int found = -1;
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                if (strlen(names[i]) == nlen && memcmp(names[i], spec, nlen) == 0)
                        found = (int)i;
        if (found < 0)
                return -EINVAL;
        unsigned f = 0;
        const char *p = spec + nlen;
        while (*p) {
                p++; /* ':' or ',' */
                size_t len = strcspn(p, ",");
                const char *flag = p;
                /* ipvsadm's "sh-port": the scheduler's own prefix */
                if (len > nlen + 1 && memcmp(flag, spec, nlen) == 0 && flag[nlen] == '-') {
                        flag += nlen + 1;
                        len -= nlen + 1;
                }
                if (len == 0 || parse_flag(flag, len, &f) < 0)
                        return -EINVAL;
                p = flag + len;
        }
        if (f && found != SE_LB_SH && found != SE_LB_MH)
                return -EINVAL;
        *kind = (enum se_lb_kind)found;
        *flags = f;
        return 0;
}

struct se_lb *se_lb_new(enum se_lb_kind kind, unsigned flags, uint64_t seed)
{
        if ((unsigned)kind > SE_LB_P2C)
                return NULL;
        struct se_lb *lb = se_calloc(1, sizeof(*lb));
        if (!lb)
                return NULL;
        lb->kind = kind;
        lb->flags = flags;
        lb->rng = seed;
        lb->cursor = -1;
        return lb;
}

struct se_lb *se_lb_free(struct se_lb *lb)
{
        if (lb) {
                free(lb->idents);
                free(lb->table);
                free(lb);
        }
        return NULL;
}

/* rr needs the old list's identities to carry its cursor over */
static int remember(struct se_lb *lb, const struct se_lb_dest *d, size_t n)
{
        struct lb_ident *ids = n ? se_calloc(n, sizeof(*ids)) : NULL;
        if (n && !ids)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                memcpy(ids[i].addr, d[i].addr, sizeof(ids[i].addr));
                ids[i].addr_len = d[i].addr_len;
                ids[i].port = d[i].port;
        }
        free(lb->idents);
        lb->idents = ids;
        return 0;
}

int se_lb_update(struct se_lb *lb, const struct se_lb_dest *d, size_t n)
{
        int r = 0;
        switch (lb->kind) {
        case SE_LB_RR:
                lb_rr_update(lb, d, n);
                r = remember(lb, d, n);
                break;
        case SE_LB_WRR:
                lb_wrr_update(lb, d, n);
                break;
        case SE_LB_DH:
        case SE_LB_SH:
        case SE_LB_MH:
                r = lb_hash_update(lb, d, n);
                break;
        default:
                break;
        }
        if (r == 0)
                lb->n = n;
        return r;
}

int se_lb_pick(struct se_lb *lb, const struct se_lb_dest *d, size_t n, const struct se_lb_key *key)
{
        if (n != lb->n && lb->kind != SE_LB_LC && lb->kind != SE_LB_WLC && lb->kind != SE_LB_SED &&
            lb->kind != SE_LB_NQ && lb->kind != SE_LB_RANDOM && lb->kind != SE_LB_P2C)
                return -1; /* a table of another list: never index past d */
        switch (lb->kind) {
        case SE_LB_RR:
                return lb_rr_pick(lb, d, n);
        case SE_LB_WRR:
                return lb_wrr_pick(lb, d, n);
        case SE_LB_LC:
                return lb_lc_pick(d, n);
        case SE_LB_WLC:
                return lb_wlc_pick(d, n);
        case SE_LB_SED:
                return lb_sed_pick(d, n);
        case SE_LB_NQ:
                return lb_nq_pick(d, n);
        case SE_LB_DH:
        case SE_LB_SH:
        case SE_LB_MH:
                return lb_hash_pick(lb, d, n, key);
        case SE_LB_RANDOM:
                return lb_random_pick(lb, d, n);
        case SE_LB_P2C:
                return lb_p2c_pick(lb, d, n);
        }
        return -1;
}

const int32_t *se_lb_buckets(const struct se_lb *lb, size_t *size)
{
        bool hashed = lb->kind == SE_LB_SH || lb->kind == SE_LB_DH || lb->kind == SE_LB_MH;
        *size = hashed && lb->table ? lb->table_size : 0;
        return *size ? lb->table : NULL;
}

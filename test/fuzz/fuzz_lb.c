/* Fuzz target: a scheduler spec (the svcenv.io/scheduler annotation) and a
 * destination list with counters, both from the input. Checks that a pick
 * is always a usable destination of the list (weight > 0, not overloaded),
 * whatever the scheduler, the list changes and the counters. */
#include <stdlib.h>
#include <string.h>

#include <svcenv/lb.h>

#include "fuzz.h"

#define MAX_DESTS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        size_t nl = 0;
        while (nl < size && nl < 64 && data[nl] != '\n')
                nl++;
        char spec[65];
        memcpy(spec, data, nl);
        spec[nl] = 0;
        enum se_lb_kind kind;
        unsigned flags;
        if (se_lb_parse(spec, &kind, &flags) < 0)
                return 0;
        if (strcmp(se_lb_name(kind), "?") == 0)
                abort();
        const uint8_t *p = data + nl, *end = data + size;
        struct se_lb *lb = se_lb_new(kind, flags, size);
        if (!lb)
                return 0;
        struct se_lb_dest d[MAX_DESTS];
        /* rounds of: a list (n, then 6 bytes per destination), then picks */
        while (end - p >= 1) {
                size_t n = *p++ % (MAX_DESTS + 1);
                if ((size_t)(end - p) < n * 6)
                        break;
                memset(d, 0, sizeof(d));
                for (size_t i = 0; i < n; i++, p += 6) {
                        d[i].addr_len = p[0] & 1 ? 16 : 4;
                        d[i].addr[0] = 10;
                        d[i].addr[d[i].addr_len - 1] = p[1];
                        d[i].port = p[2];
                        d[i].weight = p[3] % 5;
                        d[i].overloaded = p[0] & 2;
                        d[i].active = p[4];
                        d[i].inactive = p[5];
                }
                if (se_lb_update(lb, d, n) < 0)
                        break;
                for (int k = 0; k < 8 && p < end; k++, p++) {
                        struct se_lb_key key = { .addr_len = 4, .sport = *p };
                        key.saddr[0] = *p;
                        key.daddr[3] = (uint8_t)(*p >> 1);
                        if (n)
                                d[*p % n].active += *p & 1;
                        int at = se_lb_pick(lb, d, n, &key);
                        if (at >= (int)n || at < -1)
                                abort();
                        if (at >= 0 && (d[at].weight <= 0 || d[at].overloaded))
                                abort();
                }
        }
        se_lb_free(lb);
        return 0;
}

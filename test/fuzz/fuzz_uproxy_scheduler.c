/* Fuzz target: the svcenv.io/scheduler annotation of a Service. */
#include <stdlib.h>
#include <string.h>

#include <svcenv/uproxy.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char out[SE_UPROXY_MAX_SCHED];
        struct se_diag d;
        char *s = malloc(size + 1);
        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = 0;
        /* accepted values come back normalised, NUL-terminated and short,
         * and normalising is idempotent */
        if (se_uproxy_parse_scheduler(s, out, &d) == 0) {
                char again[SE_UPROXY_MAX_SCHED];
                if (strnlen(out, sizeof(out)) >= sizeof(out) ||
                    se_uproxy_parse_scheduler(out, again, &d) != 0 || strcmp(out, again) != 0)
                        abort();
        }
        free(s);
        return 0;
}

/* Fuzz target: --cluster-cidr / --nodeport-addresses lists. */
#include <stdlib.h>
#include <string.h>

#include <svcenv/proxy.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct se_cidr cidrs[SE_PROXY_MAX_CIDRS];
        struct se_diag d;
        bool primary = false;
        char *s = malloc(size + 1);
        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = 0;
        int n = se_proxy_parse_cidr_list(s, cidrs, SE_PROXY_MAX_CIDRS, &primary, &d);
        if (n > SE_PROXY_MAX_CIDRS)
                abort();
        (void)se_proxy_parse_cidr_list(s, cidrs, 2, NULL, &d);
        free(s);
        return 0;
}

/* Fuzz target: iptables-save output read for stale-chain cleanup. */
#include <svcenv/proxy.h>
#include <svcenv/strv.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct se_strv chains = SE_STRV_INIT;
        struct se_proxy_tracker *tr = se_proxy_tracker_new();
        if (se_proxy_parse_save_chains((const char *)data, size, &chains) == 0 && tr)
                (void)se_proxy_tracker_seed(tr, &chains);
        se_proxy_tracker_free(tr);
        se_strv_release(&chains);
        return 0;
}

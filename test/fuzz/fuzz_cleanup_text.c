/* Fuzz target: iptables-save output read by svcenv-proxy --cleanup. */

#include <svcenv/proxy.h>
#include <svcenv/strbuf.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct se_strbuf out;
        se_strbuf_init(&out, (size_t)64 << 20);
        if (se_proxy_cleanup_text((const char *)data, size, &out) == 0 && out.len &&
            out.buf[out.len - 1] != '\n')
                __builtin_trap(); /* restore input is whole lines */
        se_strbuf_release(&out);
        return 0;
}

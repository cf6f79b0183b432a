/* Fuzz target: the autopath rewrite of an upstream's answer, and an
 * ExternalName answer with its target's records added (svcenv-dns).
 * The input is a query and a response, the first byte saying where the
 * query ends. */
#include <stdlib.h>

#include <svcenv/dns.h>
#include <svcenv/dns_serve.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        size_t split = data[0];
        if (split > size - 1)
                split = size - 1;
        static uint8_t out[SE_DNS_MAX_MSG];
        size_t n = se_dns_autopath_reply(data + 1, split, data + 1 + split, size - 1 - split, 0,
                                         out, sizeof(out));
        if (n > sizeof(out))
                abort();
        n = se_dns_autopath_reply(data + 1, split, data + 1 + split, size - 1 - split, 512, out,
                                  sizeof(out));
        if (n > 512)
                abort();
        (void)se_dns_autopath_reply(data + 1, split, data + 1 + split, size - 1 - split, 0, out,
                                    100);
        return 0;
}

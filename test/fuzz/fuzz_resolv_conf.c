/* Fuzz target: resolv.conf text and --upstream values (svcenv-dns). */
#include <stdlib.h>
#include <string.h>

#include <svcenv/dns_serve.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct se_dns_upstream u[SE_DNS_MAX_UPSTREAMS];
        struct se_diag d;
        int n = se_dns_resolv_conf_parse("f", (const char *)data, size, u, SE_DNS_MAX_UPSTREAMS,
                                         &d);
        if (n > SE_DNS_MAX_UPSTREAMS)
                abort();
        for (int i = 0; i < n; i++)
                if (!memchr(u[i].text, 0, sizeof(u[i].text)))
                        abort();
        char *s = malloc(size + 1);
        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = 0;
        if (se_dns_upstream_parse(s, u, &d) == 0 && !memchr(u[0].text, 0, sizeof(u[0].text)))
                abort();
        free(s);
        return 0;
}

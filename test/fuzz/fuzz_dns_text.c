/* Fuzz target: any message printed as dig prints it (`svcenv dns`), and a
 * query made from the text as a name. */
#include <stdlib.h>
#include <string.h>

#include <svcenv/dns_serve.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct se_strbuf sb;
        se_strbuf_init(&sb, 1 << 22);
        (void)se_dns_msg_text(data, size, true, &sb);
        se_strbuf_release(&sb);
        if (size > 1000)
                return 0;
        char name[1001];
        memcpy(name, data, size);
        name[size] = 0;
        uint8_t q[600];
        struct se_diag d;
        int n = se_dns_query_make(name, "A", 7, 1232, q, sizeof(q), &d);
        if (n > (int)sizeof(q))
                abort();
        return 0;
}

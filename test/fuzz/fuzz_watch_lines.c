/* Fuzz target: a watch stream cut into chunks (the first byte picks the
 * chunk size) through the line splitter and event parser. */
#include <jansson.h>

#include <svcenv/kube_watch.h>

#include "fuzz.h"

static int on_line(void *data, const char *line, size_t len)
{
        (void)data;
        enum se_kube_event_type t;
        json_t *doc;
        struct se_diag d;
        if (se_kube_event_parse(line, len, &t, &doc, &d) == 0)
                json_decref(doc);
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        size_t chunk = (size_t)data[0] % 64 + 1;
        struct se_kube_lines l;
        se_kube_lines_init(&l, 4096);
        int r = 0;
        for (size_t off = 1; r == 0 && off < size; off += chunk) {
                size_t n = size - off < chunk ? size - off : chunk;
                r = se_kube_lines_feed(&l, (const char *)data + off, n, on_line, NULL);
        }
        if (r == 0)
                (void)se_kube_lines_finish(&l, on_line, NULL);
        se_kube_lines_release(&l);
        return 0;
}

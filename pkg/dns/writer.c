/* writer.c — appending names and bytes to a response, with compression. */
#include <errno.h>
#include <string.h>

#include "dns_internal.h"

/* True when the name at message offset off spells exactly the labels of
 * name (byte for byte). Offsets in the table only point at names this
 * writer wrote, so the walk ends; the hop bound is for safety. */
static bool name_at_is(const struct dns_writer *w, size_t off, const uint8_t *name)
{
        unsigned hops = 0;
        for (;;) {
                if (off >= w->len)
                        return false;
                uint8_t c = w->buf[off];
                if ((c & 0xc0) == 0xc0) {
                        if (off + 1 >= w->len || ++hops > 127)
                                return false;
                        off = (size_t)(c & 0x3f) << 8 | w->buf[off + 1];
                        continue;
                }
                if (c != *name || off + 1 + c > w->len)
                        return false;
                if (c == 0)
                        return true;
                if (memcmp(w->buf + off + 1, name + 1, c) != 0)
                        return false;
                off += 1 + (size_t)c;
                name += 1 + (size_t)c;
        }
}

int dns_put_bytes(struct dns_writer *w, const void *p, size_t n)
{
        if (w->len > w->limit || n > w->limit - w->len)
                return -ENOSPC;
        if (n == 0) /* p may be NULL then (a PTR has no fixed rdata) */
                return 0;
        memcpy(w->buf + w->len, p, n);
        w->len += n;
        return 0;
}

int dns_put_name(struct dns_writer *w, const uint8_t *name, bool compress)
{
        size_t start = w->len;
        unsigned n_ptrs = w->n_ptrs;
        const uint8_t *label = name;
        while (*label) {
                for (unsigned i = 0; compress && i < w->n_ptrs; i++) {
                        if (!name_at_is(w, w->ptr_off[i], label))
                                continue;
                        uint8_t ptr[2] = { (uint8_t)(0xc0 | w->ptr_off[i] >> 8),
                                           (uint8_t)w->ptr_off[i] };
                        if (dns_put_bytes(w, ptr, 2) < 0)
                                goto full;
                        return 0;
                }
                if (w->len < 0x4000 && w->n_ptrs < DNS_MAX_PTRS)
                        w->ptr_off[w->n_ptrs++] = (uint16_t)w->len;
                if (dns_put_bytes(w, label, 1 + (size_t)*label) < 0)
                        goto full;
                label += 1 + (size_t)*label;
        }
        if (dns_put_bytes(w, "", 1) < 0)
                goto full;
        return 0;
full:
        w->len = start;
        w->n_ptrs = n_ptrs;
        return -ENOSPC;
}

/* serve_name.c — walking the labels of a name in any DNS message. */
#include <errno.h>

#include "dns_internal.h"

/* Compression pointers one name may follow: a loop stops here. */
#define MAX_JUMPS 64

void dns_label_walk_init(struct dns_label_walk *w, const uint8_t *msg, size_t len, size_t off)
{
        *w = (struct dns_label_walk){ .msg = msg, .len = len, .pos = off };
}

int dns_label_walk_next(struct dns_label_walk *w, const uint8_t **label)
{
        for (;;) {
                if (w->pos >= w->len)
                        return -EBADMSG;
                uint8_t l = w->msg[w->pos];
                if ((l & 0xc0) == 0xc0) {
                        if (w->pos + 1 >= w->len || ++w->jumps > MAX_JUMPS)
                                return -EBADMSG;
                        if (!w->end)
                                w->end = w->pos + 2;
                        w->pos = (size_t)(l & 0x3f) << 8 | w->msg[w->pos + 1];
                        continue;
                }
                if (l & 0xc0) /* 0x40 and 0x80: extended label types, not in use */
                        return -EBADMSG;
                if (l == 0) {
                        if (!w->end)
                                w->end = w->pos + 1;
                        return 0;
                }
                /* room left for the root byte */
                if (w->pos + 1 + l > w->len || (w->total += 1u + l) >= SE_DNS_MAX_NAME)
                        return -EBADMSG;
                *label = w->msg + w->pos + 1;
                w->pos += 1u + l;
                return l;
        }
}

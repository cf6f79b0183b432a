/* name.c — domain names: wire ⇄ text, reading compressed names safely. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dns_internal.h"

/* At most this many compression pointers in one name: a loop can never
 * finish below it, and a legal name of 127 one-byte labels needs no more. */
#define MAX_HOPS 127

static char lower(uint8_t c)
{
        return (char)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
}

int dns_name_text(const uint8_t *wire, size_t wlen, char *out, size_t cap)
{
        size_t o = 0, i = 0;
        if (cap == 0)
                return -ENAMETOOLONG;
        while (i < wlen && wire[i] != 0) {
                size_t n = wire[i++];
                if (n > 63 || i + n > wlen)
                        return -EINVAL;
                if (o > 0) {
                        if (o + 1 >= cap)
                                return -ENAMETOOLONG;
                        out[o++] = '.';
                }
                for (size_t k = 0; k < n; k++) {
                        uint8_t c = wire[i + k];
                        if (c > ' ' && c < 0x7f && c != '.' && c != '\\') {
                                if (o + 1 >= cap)
                                        return -ENAMETOOLONG;
                                out[o++] = lower(c);
                        } else {
                                if (o + 4 >= cap)
                                        return -ENAMETOOLONG;
                                snprintf(out + o, 5, "\\%03u", c);
                                o += 4;
                        }
                }
                i += n;
        }
        out[o] = '\0';
        return (int)o;
}

int dns_name_wire(const char *text, uint8_t out[SE_DNS_MAX_NAME])
{
        size_t o = 0;
        const char *p = text;
        if (*p == '.' && p[1] == '\0')
                p++;
        while (*p) {
                const char *dot = strchr(p, '.');
                size_t n = dot ? (size_t)(dot - p) : strlen(p);
                if (n == 0 || n > 63 || o + 1 + n + 1 > SE_DNS_MAX_NAME)
                        return -EINVAL;
                out[o++] = (uint8_t)n;
                memcpy(out + o, p, n);
                o += n;
                p += n;
                if (*p == '.') {
                        p++;
                        if (*p == '\0') /* a final dot: absolute, same name */
                                break;
                }
        }
        out[o++] = 0;
        return (int)o;
}

int dns_read_name(const uint8_t *msg, size_t len, size_t *off, uint8_t out[SE_DNS_MAX_NAME])
{
        size_t pos = *off, o = 0, end = 0;
        unsigned hops = 0;
        for (;;) {
                if (pos >= len)
                        return -EBADMSG;
                uint8_t c = msg[pos];
                if ((c & 0xc0) == 0xc0) {
                        if (pos + 1 >= len || ++hops > MAX_HOPS)
                                return -EBADMSG;
                        size_t to = (size_t)(c & 0x3f) << 8 | msg[pos + 1];
                        if (!end)
                                end = pos + 2;
                        if (to >= pos) /* forward or self: a loop or garbage */
                                return -EBADMSG;
                        pos = to;
                        continue;
                }
                if (c & 0xc0) /* 0x40 and 0x80: extended label types, not in use */
                        return -EBADMSG;
                if (pos + 1 + c > len || o + 1 + c > SE_DNS_MAX_NAME)
                        return -EBADMSG;
                memcpy(out + o, msg + pos, 1 + (size_t)c);
                o += 1 + (size_t)c;
                pos += 1 + (size_t)c;
                if (c == 0)
                        break;
        }
        *off = end ? end : pos;
        return (int)o;
}

int dns_skip_name(const uint8_t *msg, size_t len, size_t *off)
{
        uint8_t tmp[SE_DNS_MAX_NAME];
        return dns_read_name(msg, len, off, tmp) < 0 ? -EBADMSG : 0;
}

size_t dns_wire_len(const uint8_t *wire)
{
        size_t i = 0;
        while (wire[i])
                i += 1 + (size_t)wire[i];
        return i + 1;
}

/* Anything but a Kubernetes-style label cannot come from a valid object,
 * and is left out of the zone rather than giving names that mean
 * something else. */
bool dns_label_ok(const char *s)
{
        size_t n = s ? strlen(s) : 0;
        if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
                        return false;
        }
        return true;
}

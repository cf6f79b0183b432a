/* HOST:PORT of the daemons' listen flags (see parse.h). */
#include <errno.h>
#include <string.h>

#include <svcenv/parse.h>

int se_parse_hostport(const char *s, char *host, size_t size, int *port)
{
        const char *colon = strrchr(s, ':');
        if (!colon)
                return -EINVAL; /* missing port */
        const char *h = s;
        size_t n = (size_t)(colon - s);
        if (n && s[0] == '[') {
                if (s[n - 1] != ']' || n < 2)
                        return -EINVAL;
                h = s + 1;
                n -= 2;
        } else if (memchr(s, ':', n)) {
                return -EINVAL; /* too many colons */
        }
        if (memchr(h, '[', n) || memchr(h, ']', n))
                return -EINVAL;
        int p;
        if (se_parse_int(colon + 1, 0, 65535, &p) < 0)
                return -EINVAL;
        if (n >= size)
                return -ERANGE;
        memcpy(host, h, n);
        host[n] = '\0';
        *port = p;
        return 0;
}

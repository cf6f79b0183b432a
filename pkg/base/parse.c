/* Strict parsers for numbers, booleans, IPs and CIDRs (see parse.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <svcenv/macro.h>
#include <svcenv/parse.h>

int se_parse_i64(const char *s, int64_t min, int64_t max, int64_t *ret)
{
        if (!s || !*s)
                return -EINVAL;
        /* strtoll skips spaces and accepts '+': neither is a number here */
        if (!(*s == '-' || (*s >= '0' && *s <= '9')))
                return -EINVAL;
        errno = 0;
        char *end;
        long long v = strtoll(s, &end, 10);
        if (*end)
                return -EINVAL;
        if (errno == ERANGE || v < min || v > max)
                return -ERANGE;
        *ret = v;
        return 0;
}

int se_parse_int(const char *s, int min, int max, int *ret)
{
        int64_t v;
        int r = se_parse_i64(s, min, max, &v);
        if (r == 0)
                *ret = (int)v;
        return r;
}

int se_parse_bool(const char *s, bool *ret)
{
        static const char *const yes[] = { "true", "1", "yes", "on" };
        static const char *const no[] = { "false", "0", "no", "off" };
        for (size_t i = 0; i < 4; i++) {
                if (strcasecmp(s, yes[i]) == 0) {
                        *ret = true;
                        return 0;
                }
                if (strcasecmp(s, no[i]) == 0) {
                        *ret = false;
                        return 0;
                }
        }
        return -EINVAL;
}

static const uint8_t v4_mapped_prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

int se_parse_ip(const char *s, struct se_ip *ret)
{
        struct se_ip ip = { 0 };
        bool colon = false;
        size_t len = 0;
        if (!s)
                return -EINVAL;
        for (; len <= 45 && s[len]; len++) /* one pass: length and kind */
                colon |= s[len] == ':';
        if (len == 0 || len > 45)
                return -EINVAL;
        if (colon) {
                if (inet_pton(AF_INET6, s, ip.addr) != 1)
                        return -EINVAL;
                /* Go (and so Kubernetes) treats an IPv4-mapped IPv6 address as IPv4 */
                if (memcmp(ip.addr, v4_mapped_prefix, 12) == 0) {
                        memmove(ip.addr, ip.addr + 12, 4);
                        memset(ip.addr + 4, 0, 12);
                        ip.family = SE_IPV4;
                } else {
                        ip.family = SE_IPV6;
                }
        } else {
                /* dotted quad (what inet_pton takes); leading zeros are
                 * ambiguous (octal) and refused */
                const char *p = s;
                for (int k = 0; k < 4; k++) {
                        unsigned v = 0, digits = 0;
                        if (k && *p++ != '.')
                                return -EINVAL;
                        const char *first = p;
                        while (*p >= '0' && *p <= '9' && digits < 4) {
                                v = v * 10 + (unsigned)(*p++ - '0');
                                digits++;
                        }
                        if (digits == 0 || digits > 3 || v > 255 || (digits > 1 && *first == '0'))
                                return -EINVAL;
                        ip.addr[k] = (uint8_t)v;
                }
                if (*p)
                        return -EINVAL;
                ip.family = SE_IPV4;
        }
        *ret = ip;
        return 0;
}

enum se_ip_family se_ip_family_of(const char *s)
{
        struct se_ip ip;
        return se_parse_ip(s, &ip) == 0 ? ip.family : SE_IP_NONE;
}

void se_ip_format(const struct se_ip *ip, char *buf, size_t size)
{
        if (!inet_ntop(ip->family == SE_IPV6 ? AF_INET6 : AF_INET, ip->addr, buf,
                       (socklen_t)size) &&
            size)
                buf[0] = '\0';
}

int se_parse_cidr(const char *s, struct se_cidr *ret)
{
        const char *slash = s ? strchr(s, '/') : NULL;
        if (!slash || (size_t)(slash - s) > 45)
                return -EINVAL;
        char addr[46];
        memcpy(addr, s, (size_t)(slash - s));
        addr[slash - s] = '\0';
        struct se_cidr c;
        if (se_parse_ip(addr, &c.ip) < 0)
                return -EINVAL;
        int prefix = 0;
        unsigned maxp = c.ip.family == SE_IPV4 ? 32 : 128;
        if (se_parse_int(slash + 1, 0, (int)maxp, &prefix) < 0)
                return -EINVAL;
        c.prefix = (unsigned)prefix;
        for (unsigned bit = c.prefix; bit < maxp; bit++)
                c.ip.addr[bit / 8] &= (uint8_t) ~(0x80u >> (bit % 8));
        *ret = c;
        return 0;
}

bool se_cidr_contains(const struct se_cidr *c, const struct se_ip *ip)
{
        if (c->ip.family != ip->family)
                return false;
        for (unsigned bit = 0; bit < c->prefix; bit++) {
                uint8_t m = (uint8_t)(0x80u >> (bit % 8));
                if ((c->ip.addr[bit / 8] & m) != (ip->addr[bit / 8] & m))
                        return false;
        }
        return true;
}

/* Go's time.ParseDuration: [-+]? then one or more <decimal><unit>; "0" alone
 * needs no unit. */
int se_parse_duration(const char *s, int64_t max_ns, int64_t *ret_ns)
{
        static const struct {
                const char *unit;
                double ns;
        } units[] = { { "ns", 1 },   { "us", 1e3 }, { "\u00b5s", 1e3 }, { "\u03bcs", 1e3 },
                      { "ms", 1e6 }, { "s", 1e9 },  { "m", 60e9 },      { "h", 3600e9 } };
        if (!s || !*s)
                return -EINVAL;
        bool neg = *s == '-';
        if (*s == '-' || *s == '+')
                s++;
        if (strcmp(s, "0") == 0) {
                *ret_ns = 0;
                return 0;
        }
        if (!*s)
                return -EINVAL;
        double total = 0;
        while (*s) {
                const char *start = s;
                double v = 0, scale = 1;
                while (*s >= '0' && *s <= '9')
                        v = v * 10 + (*s++ - '0');
                bool digits = s > start;
                if (*s == '.') {
                        s++;
                        const char *f = s;
                        while (*s >= '0' && *s <= '9')
                                v += (*s++ - '0') * (scale /= 10);
                        digits = digits || s > f;
                }
                if (!digits)
                        return -EINVAL;
                size_t best = 0, k = SE_ARRAY_SIZE(units);
                for (size_t i = 0; i < SE_ARRAY_SIZE(units); i++) {
                        size_t n = strlen(units[i].unit);
                        if (n > best && strncmp(s, units[i].unit, n) == 0)
                                best = n, k = i;
                }
                if (k == SE_ARRAY_SIZE(units))
                        return -EINVAL; /* a unit is required */
                total += v * units[k].ns;
                s += best;
                if (total > (double)max_ns)
                        return -ERANGE;
        }
        *ret_ns = neg ? -(int64_t)total : (int64_t)total;
        return neg && total > 0 ? -ERANGE : 0;
}

/* Quantity: digits scaled by 10^scale in 128 bits, then rounded up as
 * Quantity.ScaledValue does. */
int se_parse_quantity(const char *s, int scale, int64_t *ret)
{
        __int128 mant = 0;
        int exp10 = scale, exp2 = 0, digits = 0;
        bool neg = false, frac = false;
        const char *p = s;
        if (*p == '+' || *p == '-')
                neg = *p++ == '-';
        for (; (*p >= '0' && *p <= '9') || (*p == '.' && !frac); p++) {
                if (*p == '.') {
                        frac = true;
                        continue;
                }
                if (digits < 30) {
                        mant = mant * 10 + (*p - '0');
                        digits += mant != 0;
                        exp10 -= frac;
                } else if (!frac) {
                        exp10++; /* digits past precision */
                }
        }
        if (p == s || (p == s + 1 && (*s == '+' || *s == '-' || *s == '.')))
                return -EINVAL;
        static const struct {
                const char *suffix;
                int e10, e2;
        } suffixes[] = { { "Ki", 0, 10 }, { "Mi", 0, 20 }, { "Gi", 0, 30 }, { "Ti", 0, 40 },
                         { "Pi", 0, 50 }, { "Ei", 0, 60 }, { "n", -9, 0 },  { "u", -6, 0 },
                         { "m", -3, 0 },  { "k", 3, 0 },   { "M", 6, 0 },   { "G", 9, 0 },
                         { "T", 12, 0 },  { "P", 15, 0 },  { "E", 18, 0 },  { "", 0, 0 } };
        bool matched = false;
        for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]) && !matched; i++)
                if (strcmp(p, suffixes[i].suffix) == 0) {
                        exp10 += suffixes[i].e10;
                        exp2 += suffixes[i].e2;
                        matched = true;
                }
        if (!matched && (*p == 'e' || *p == 'E')) {
                int e = 0, sign = 1;
                const char *q = p + 1;
                if (*q == '+' || *q == '-')
                        sign = *q++ == '-' ? -1 : 1;
                if (!*q)
                        return -EINVAL;
                for (; *q >= '0' && *q <= '9'; q++)
                        if (e < 1000)
                                e = e * 10 + (*q - '0');
                if (*q)
                        return -EINVAL;
                exp10 += sign * e;
                matched = true;
        }
        if (!matched)
                return -EINVAL;
        const __int128 cap = (__int128)INT64_MAX;
        __int128 v = mant, div = 1;
        for (; exp2 > 0 && v <= cap; exp2--)
                v *= 2;
        for (; exp10 > 0 && v <= cap; exp10--)
                v *= 10;
        for (; exp10 < 0 && div <= cap; exp10++)
                div *= 10;
        if (exp10 < 0) /* smaller than any unit: rounds up to 1 unless zero */
                v = v ? 1 : 0, div = 1;
        v = (v + div - 1) / div;
        if (v > cap)
                v = cap;
        *ret = neg ? -(int64_t)v : (int64_t)v;
        return 0;
}

/* parse.h — strict parsing of numbers, booleans and IP addresses.
 *
 * Every function parses the whole string (no trailing bytes), rejects empty
 * input and out-of-range values, and returns 0 or -EINVAL / -ERANGE. Outputs
 * are only written on success. */
#ifndef SVCENV_PARSE_H
#define SVCENV_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <netinet/in.h>

int se_parse_i64(const char *s, int64_t min, int64_t max, int64_t *ret);
int se_parse_int(const char *s, int min, int max, int *ret);
/* A Go duration ("300ms", "1m30s", "1.5h", "0"; units ns us µs ms s m h)
 * into nanoseconds, at most max_ns. 0 or -EINVAL / -ERANGE. */
int se_parse_duration(const char *s, int64_t max_ns, int64_t *ret_ns);
/* A listen address "HOST:PORT", "[IPv6]:PORT" or ":PORT", as Go's
 * net.SplitHostPort splits it: the host (brackets removed; "" when
 * empty) into host (size bytes), the port (0..65535, decimal) into *port.
 * An unbracketed host with a ':' is refused ("::1:80" is ambiguous).
 * -EINVAL (no port, bad port, stray brackets) or -ERANGE (host too long). */
int se_parse_hostport(const char *s, char *host, size_t size, int *port);
/* true/false, 1/0, yes/no, on/off (case-insensitive). */
int se_parse_bool(const char *s, bool *ret);

/* A Kubernetes resource quantity ("500m", "1.5Gi", "2e3", "128974848"):
 * *ret = ceil(value * 10^scale), clamped to int64 (Quantity.ScaledValue's
 * rounding), e.g. scale 3 gives millis ("100u" -> 1). -EINVAL when s is
 * not a quantity. */
int se_parse_quantity(const char *s, int scale, int64_t *ret);

enum se_ip_family { SE_IP_NONE = 0, SE_IPV4 = 4, SE_IPV6 = 6 };

struct se_ip {
        enum se_ip_family family;
        uint8_t addr[16]; /* network order; IPv4 in the first 4 bytes */
};

/* An IPv4 or IPv6 address in the forms Kubernetes validation accepts
 * (dotted quad without leading zeros; IPv6 textual forms, no zone). */
int se_parse_ip(const char *s, struct se_ip *ret);
/* The family of s, SE_IP_NONE when it is not an IP address. */
enum se_ip_family se_ip_family_of(const char *s);
/* Canonical text of ip into buf (>= 46 bytes). */
void se_ip_format(const struct se_ip *ip, char *buf, size_t size);

struct se_cidr {
        struct se_ip ip; /* masked network address */
        unsigned prefix;
};

/* "a.b.c.d/n" or "x::/n". */
int se_parse_cidr(const char *s, struct se_cidr *ret);
bool se_cidr_contains(const struct se_cidr *c, const struct se_ip *ip);

#endif

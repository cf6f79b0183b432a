/* hash.h — SHA-256 (OpenSSL libcrypto), RFC 4648 base32 and FNV-1a 128.
 *
 * kube-proxy names its per-service and per-endpoint chains after the base32
 * encoding of a SHA-256 digest; the Endpoints controller orders subsets and
 * ports by an FNV-1a 128 digest. */
#ifndef SVCENV_HASH_H
#define SVCENV_HASH_H

#include <stddef.h>
#include <stdint.h>

#define SE_SHA256_LEN 32

/* SHA-256 of data. 0 or -EIO when libcrypto fails. */
int se_sha256(const void *data, size_t n, uint8_t out[SE_SHA256_LEN]);
/* SHA-256 of the concatenation of n parts (no copy made). 0, -ENOMEM or
 * -EIO. */
struct se_sha256_part {
        const void *data;
        size_t n;
};
int se_sha256_parts(const struct se_sha256_part *parts, size_t n, uint8_t out[SE_SHA256_LEN]);
/* SHA-256 of each of n independent messages (msgs[i] -> out[i]), several
 * at a time where the CPU can (x86 SHA extensions): the proxy names every
 * endpoint chain after one. 0, -ENOMEM or -EIO. */
int se_sha256_each(const struct se_sha256_part *msgs, size_t n, uint8_t (*out)[SE_SHA256_LEN]);
/* FNV-1a with 128 bits (Go's hash/fnv New128a), streamed: upstream orders
 * Endpoints subsets and ports by it. init, then update any number of times;
 * sum writes the digest big-endian, as Go's Sum does. No allocation, no
 * failure. */
struct se_fnv128a {
        uint64_t hi, lo;
};
void se_fnv128a_init(struct se_fnv128a *h);
void se_fnv128a_update(struct se_fnv128a *h, const void *data, size_t n);
void se_fnv128a_sum(const struct se_fnv128a *h, uint8_t out[16]);

/* Standard-alphabet base32 with '=' padding, as Go's base32.StdEncoding.
 * Writes at most size-1 characters plus NUL; returns the full encoded
 * length (like snprintf), so size >= se_base32_len(n)+1 gives all of it. */
size_t se_base32_encode(const void *data, size_t n, char *out, size_t size);
static inline size_t se_base32_len(size_t n)
{
        return (n + 4) / 5 * 8;
}

/* Standard base64 (padding required, as Go's StdEncoding): decodes in into
 * out (room for len/4*3+1 bytes), NUL-terminates, stores the length.
 * 0 or -EINVAL. */
int se_base64_decode(const char *in, size_t len, char *out, size_t *ret_len);
/* Encodes n bytes into out (room for (n+2)/3*4+1), NUL-terminated. */
void se_base64_encode(const void *data, size_t n, char *out);

#endif

/* SHA-256 through libcrypto, RFC 4648 base32 and FNV-1a 128 (see hash.h). */
#include <errno.h>
#include <pthread.h>
#include <string.h>

/* SHA256_Init & co. are deprecated in OpenSSL 3 but still the fastest way
 * to hash a short string (no context allocation or provider dispatch: half
 * the cost of EVP_Digest, and the proxy hashes one string per chain). A
 * libcrypto built without them gets EVP. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/evp.h>
#include <openssl/opensslconf.h>
#include <openssl/sha.h>

#include <svcenv/hash.h>

#ifndef OPENSSL_NO_DEPRECATED_3_0
int se_sha256_parts(const struct se_sha256_part *parts, size_t n, uint8_t out[SE_SHA256_LEN])
{
        SHA256_CTX c;
        int ok = SHA256_Init(&c);
        for (size_t i = 0; ok && i < n; i++)
                ok = SHA256_Update(&c, parts[i].data, parts[i].n);
        ok = ok && SHA256_Final(out, &c);
        return ok ? 0 : -EIO;
}
#else
/* The implementation fetched once: EVP_sha256() makes every EVP_Digest
 * look it up again. Kept for the process's lifetime. */
static pthread_once_t md_once = PTHREAD_ONCE_INIT;
static EVP_MD *md_fetched;

static void md_init(void)
{
        md_fetched = EVP_MD_fetch(NULL, "SHA256", NULL);
}

int se_sha256_parts(const struct se_sha256_part *parts, size_t n, uint8_t out[SE_SHA256_LEN])
{
        unsigned int len = 0;
        pthread_once(&md_once, md_init);
        const EVP_MD *md = md_fetched ? md_fetched : EVP_sha256();
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        if (!ctx)
                return -ENOMEM;
        int ok = EVP_DigestInit_ex(ctx, md, NULL);
        for (size_t i = 0; ok && i < n; i++)
                ok = EVP_DigestUpdate(ctx, parts[i].data, parts[i].n);
        ok = ok && EVP_DigestFinal_ex(ctx, out, &len) && len == SE_SHA256_LEN;
        EVP_MD_CTX_free(ctx);
        return ok ? 0 : -EIO;
}
#endif

int se_sha256(const void *data, size_t n, uint8_t out[SE_SHA256_LEN])
{
        const struct se_sha256_part part = { data, n };
        return se_sha256_parts(&part, 1, out);
}

size_t se_base32_encode(const void *data, size_t n, char *out, size_t size)
{
        static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
        const uint8_t *in = data;
        size_t total = se_base32_len(n);
        size_t o = 0;
        for (size_t i = 0; i < n; i += 5) {
                uint8_t block[5] = { 0 };
                size_t take = n - i < 5 ? n - i : 5;
                for (size_t k = 0; k < take; k++)
                        block[k] = in[i + k];
                /* characters carrying data for 1..5 input bytes */
                static const size_t chars_for[] = { 0, 2, 4, 5, 7, 8 };
                uint64_t bits = ((uint64_t)block[0] << 32) | ((uint64_t)block[1] << 24) |
                                ((uint64_t)block[2] << 16) | ((uint64_t)block[3] << 8) | block[4];
                for (size_t k = 0; k < 8; k++) {
                        char c = k < chars_for[take] ? alphabet[(bits >> (35 - 5 * k)) & 31] : '=';
                        if (o + 1 < size)
                                out[o] = c;
                        o++;
                }
        }
        if (size)
                out[o < size ? o : size - 1] = '\0';
        return total;
}

static int b64_value(unsigned char c)
{
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == '+')
                return 62;
        if (c == '/')
                return 63;
        return -1;
}

int se_base64_decode(const char *in, size_t len, char *out, size_t *ret_len)
{
        /* Go's decoder ignores \r and \n; nothing else */
        size_t o = 0, q = 0, pad = 0;
        uint32_t acc = 0;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)in[i];
                if (c == '\r' || c == '\n')
                        continue;
                if (c == '=') {
                        pad++;
                        acc <<= 6;
                        q++;
                } else {
                        int v = b64_value(c);
                        if (v < 0 || pad)
                                return -EINVAL;
                        acc = (acc << 6) | (uint32_t)v;
                        q++;
                }
                if (q == 4) {
                        if (pad > 2)
                                return -EINVAL;
                        out[o++] = (char)(acc >> 16);
                        if (pad < 2)
                                out[o++] = (char)(acc >> 8);
                        if (pad < 1)
                                out[o++] = (char)acc;
                        q = 0;
                        acc = 0;
                        if (pad)
                                pad = 100; /* nothing may follow padding */
                }
        }
        if (q != 0)
                return -EINVAL;
        out[o] = '\0';
        *ret_len = o;
        return 0;
}

static const char b64_alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
/* two output characters per 12 input bits, first one in the low byte */
static uint16_t b64_pairs[4096];
static pthread_once_t b64_once = PTHREAD_ONCE_INIT;

static void b64_init(void)
{
        for (unsigned i = 0; i < 4096; i++)
                b64_pairs[i] = (uint16_t)((uint8_t)b64_alphabet[i >> 6] |
                                          (uint8_t)b64_alphabet[i & 63] << 8);
}

void se_base64_encode(const void *data, size_t n, char *out)
{
        const uint8_t *in = data;
        size_t i = 0, o = 0;
        pthread_once(&b64_once, b64_init);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        /* six bytes at a time (eight read): admission patches are ~100 KB */
        for (; i + 8 <= n; i += 6) {
                uint64_t v;
                memcpy(&v, in + i, 8);
                v = __builtin_bswap64(v);
                uint64_t w = (uint64_t)b64_pairs[(v >> 52) & 0xfff] |
                             (uint64_t)b64_pairs[(v >> 40) & 0xfff] << 16 |
                             (uint64_t)b64_pairs[(v >> 28) & 0xfff] << 32 |
                             (uint64_t)b64_pairs[(v >> 16) & 0xfff] << 48;
                memcpy(out + o, &w, 8);
                o += 8;
        }
#endif
        for (; i + 3 <= n; i += 3) {
                uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
                uint16_t a = b64_pairs[v >> 12], b = b64_pairs[v & 0xfff];
                memcpy(out + o, &a, 2);
                memcpy(out + o + 2, &b, 2);
                o += 4;
        }
        if (i < n) {
                uint32_t v = (uint32_t)in[i] << 16;
                if (i + 1 < n)
                        v |= (uint32_t)in[i + 1] << 8;
                out[o++] = b64_alphabet[v >> 18];
                out[o++] = b64_alphabet[(v >> 12) & 63];
                out[o++] = i + 1 < n ? b64_alphabet[(v >> 6) & 63] : '=';
                out[o++] = '=';
        }
        out[o] = '\0';
}

/* FNV-1a 128: offset basis 0x6c62272e07bb014262b821756295c58d, prime
 * 2^88 + 0x13b (the published FNV parameters Go uses). */
void se_fnv128a_init(struct se_fnv128a *h)
{
        h->hi = 0x6c62272e07bb0142ULL;
        h->lo = 0x62b821756295c58dULL;
}

void se_fnv128a_update(struct se_fnv128a *h, const void *data, size_t n)
{
        const unsigned char *p = data;
        unsigned __int128 v = (unsigned __int128)h->hi << 64 | h->lo;
        const unsigned __int128 prime = (unsigned __int128)1 << 88 | 0x13b;
        for (size_t i = 0; i < n; i++) {
                v ^= p[i];
                v *= prime;
        }
        h->hi = (uint64_t)(v >> 64);
        h->lo = (uint64_t)v;
}

void se_fnv128a_sum(const struct se_fnv128a *h, uint8_t out[16])
{
        for (int i = 0; i < 8; i++) {
                out[i] = (uint8_t)(h->hi >> (56 - 8 * i));
                out[8 + i] = (uint8_t)(h->lo >> (56 - 8 * i));
        }
}

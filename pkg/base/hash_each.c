/* SHA-256 of many short independent messages (see se_sha256_each in
 * hash.h). One SHA-NI block takes about as long as its 32 dependent
 * round instructions; two messages' rounds interleaved fill the gaps, so
 * pairs of messages go through the CPU's SHA extensions together where it
 * has them (x86-64). Everything else is se_sha256. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <svcenv/hash.h>

#define BLOCK      64
#define MAX_BLOCKS 8 /* longer messages: se_sha256 */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
# include <cpuid.h>
# include <immintrin.h>

# define SHANI __attribute__((target("sha,sse4.1,ssse3")))

static const uint32_t k256[64] __attribute__((aligned(16))) = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2
};

static const uint32_t iv256[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };

static bool have_shani(void)
{
        /* 0 unknown, 1 yes, -1 no; threads asking at once get one answer */
        static int known;
        int k = __atomic_load_n(&known, __ATOMIC_RELAXED);
        if (k == 0) {
                unsigned a, b, c, d;
                bool ok = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSSE3) && (c & bit_SSE4_1);
                ok = ok && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_SHA);
                k = ok ? 1 : -1;
                __atomic_store_n(&known, k, __ATOMIC_RELAXED);
        }
        return k > 0;
}

/* st[lane] as the ABEF/CDGH register pair the SHA instructions use */
SHANI static void load_state(const uint32_t st[8], __m128i *abef, __m128i *cdgh)
{
        __m128i t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)st), 0xB1);
        __m128i s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)(st + 4)), 0x1B);
        *abef = _mm_alignr_epi8(t, s1, 8);
        *cdgh = _mm_blend_epi16(s1, t, 0xF0);
}

SHANI static void store_state(__m128i abef, __m128i cdgh, uint32_t st[8])
{
        __m128i t = _mm_shuffle_epi32(abef, 0x1B);
        cdgh = _mm_shuffle_epi32(cdgh, 0xB1);
        _mm_storeu_si128((__m128i *)st, _mm_blend_epi16(t, cdgh, 0xF0));
        _mm_storeu_si128((__m128i *)(st + 4), _mm_alignr_epi8(cdgh, t, 8));
}

/* One block into each of two states, the two lanes' rounds interleaved. */
SHANI static void blocks2(uint32_t st0[8], const uint8_t *b0, uint32_t st1[8], const uint8_t *b1)
{
        const __m128i mask = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
        __m128i s0[2], s1[2], save0[2], save1[2], m[2][4];
        load_state(st0, &s0[0], &s1[0]);
        load_state(st1, &s0[1], &s1[1]);
        const uint8_t *blk[2] = { b0, b1 };
        for (int l = 0; l < 2; l++) {
                save0[l] = s0[l];
                save1[l] = s1[l];
                for (int i = 0; i < 4; i++)
                        m[l][i] = _mm_shuffle_epi8(
                                _mm_loadu_si128((const __m128i *)(blk[l] + 16 * i)), mask);
        }
        /* 16 groups of 4 rounds; the message schedule runs 3 groups ahead */
# pragma GCC unroll 16
        for (int g = 0; g < 16; g++) {
                __m128i k = _mm_load_si128((const __m128i *)(k256 + 4 * g));
# pragma GCC unroll 2
                for (int l = 0; l < 2; l++) {
                        __m128i *w = m[l];
                        __m128i msg = _mm_add_epi32(w[g & 3], k);
                        s1[l] = _mm_sha256rnds2_epu32(s1[l], s0[l], msg);
                        if (g >= 3 && g < 15) {
                                __m128i t = _mm_alignr_epi8(w[g & 3], w[(g + 3) & 3], 4);
                                w[(g + 1) & 3] = _mm_sha256msg2_epu32(
                                        _mm_add_epi32(w[(g + 1) & 3], t), w[g & 3]);
                        }
                        s0[l] = _mm_sha256rnds2_epu32(s0[l], s1[l], _mm_shuffle_epi32(msg, 0x0E));
                        if (g >= 1 && g < 13)
                                w[(g + 3) & 3] = _mm_sha256msg1_epu32(w[(g + 3) & 3], w[g & 3]);
                }
        }
        store_state(_mm_add_epi32(s0[0], save0[0]), _mm_add_epi32(s1[0], save1[0]), st0);
        store_state(_mm_add_epi32(s0[1], save0[1]), _mm_add_epi32(s1[1], save1[1]), st1);
}

/* msg padded (FIPS 180-4) into buf; its block count, 0 when too long */
static size_t pad(const struct se_sha256_part *msg, uint8_t buf[MAX_BLOCKS * BLOCK])
{
        size_t n = msg->n, nb = (n + 9 + BLOCK - 1) / BLOCK;
        if (n > MAX_BLOCKS * BLOCK - 9)
                return 0;
        memcpy(buf, msg->data, n);
        buf[n] = 0x80;
        memset(buf + n + 1, 0, nb * BLOCK - 8 - (n + 1));
        uint64_t bits = __builtin_bswap64((uint64_t)n * 8); /* x86 is little-endian */
        memcpy(buf + nb * BLOCK - 8, &bits, 8);
        return nb;
}

static void digest(const uint32_t st[8], uint8_t out[SE_SHA256_LEN])
{
        for (int k = 0; k < 8; k++) {
                uint32_t be = __builtin_bswap32(st[k]);
                memcpy(out + 4 * k, &be, 4);
        }
}

/* Two messages together; 0, or -EIO (from se_sha256) */
static int pair(const struct se_sha256_part *a, const struct se_sha256_part *b,
                uint8_t oa[SE_SHA256_LEN], uint8_t ob[SE_SHA256_LEN])
{
        uint8_t ba[MAX_BLOCKS * BLOCK], bb[MAX_BLOCKS * BLOCK];
        size_t na = pad(a, ba), nb = pad(b, bb);
        if (!na || !nb) { /* too long for the buffers */
                int r = se_sha256(a->data, a->n, oa);
                return r < 0 ? r : se_sha256(b->data, b->n, ob);
        }
        uint32_t sa[8], sb[8], dummy[8];
        memcpy(sa, iv256, sizeof(sa));
        memcpy(sb, iv256, sizeof(sb));
        memcpy(dummy, iv256, sizeof(dummy));
        size_t i = 0;
        for (; i < na && i < nb; i++)
                blocks2(sa, ba + i * BLOCK, sb, bb + i * BLOCK);
        /* the longer one's remaining blocks, beside a lane nobody reads */
        for (; i < na; i++)
                blocks2(sa, ba + i * BLOCK, dummy, ba + i * BLOCK);
        for (; i < nb; i++)
                blocks2(dummy, bb + i * BLOCK, sb, bb + i * BLOCK);
        digest(sa, oa);
        digest(sb, ob);
        return 0;
}
#endif

int se_sha256_each(const struct se_sha256_part *msgs, size_t n, uint8_t (*out)[SE_SHA256_LEN])
{
        size_t i = 0;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
        if (n > 1 && have_shani())
                for (; i + 1 < n; i += 2) {
                        int r = pair(&msgs[i], &msgs[i + 1], out[i], out[i + 1]);
                        if (r < 0)
                                return r;
                }
#endif
        for (; i < n; i++) {
                int r = se_sha256(msgs[i].data, msgs[i].n, out[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

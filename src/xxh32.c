/* XXH32 over several blocks at once.
 *
 * XXH32 keeps four 32-bit accumulators, each fed every fourth word of a
 * 16-byte stripe: acc = rotl(acc + word * P2, 13) * P1. One block's four
 * accumulators are a 128-bit vector, so two AVX2 registers carry four
 * blocks; the chain of a multiply, a rotate and a multiply per stripe is
 * then shared by four blocks instead of paid by each. What follows the
 * stripes (the fold of the accumulators, the tail under 16 bytes, the
 * avalanche) is per block and scalar. Constants and steps are those of the
 * XXH32 specification; results are checked against the xxhash library's
 * XXH32 in test_codec. */
#include "xxh32.h"

#include <string.h>
#include <xxhash.h>

#define P1 0x9E3779B1u
#define P2 0x85EBCA77u
#define P3 0xC2B2AE3Du
#define P4 0x27D4EB2Fu
#define P5 0x165667B1u

#if defined(__x86_64__) && defined(__GNUC__)
#define MTS_XXH32_X4 1
#include <immintrin.h>
#endif

static int simd_allowed = 1;

void mts__xxh32_allow_simd(int on) { __atomic_store_n(&simd_allowed, on, __ATOMIC_RELAXED); }

int xxh32_simd(void)
{
#ifdef MTS_XXH32_X4
    return __atomic_load_n(&simd_allowed, __ATOMIC_RELAXED) && __builtin_cpu_supports("avx2");
#else
    return 0;
#endif
}

#ifdef MTS_XXH32_X4
static inline uint32_t rotl32(uint32_t x, int r) { return x << r | x >> (32 - r); }

/* The rest of XXH32 for one block whose first `done` bytes (whole stripes,
 * len >= 16) went into the accumulators acc[4]. */
static uint32_t finish(const uint32_t acc[4], const unsigned char *p, size_t len, size_t done)
{
    uint32_t h = rotl32(acc[0], 1) + rotl32(acc[1], 7) + rotl32(acc[2], 12) + rotl32(acc[3], 18);
    h += (uint32_t)len;
    for (; done + 4 <= len; done += 4) {
        uint32_t word;
        memcpy(&word, p + done, 4); /* little-endian, as x86 is */
        h = rotl32(h + word * P3, 17) * P4;
    }
    for (; done < len; done++) h = rotl32(h + p[done] * P5, 11) * P1;
    h ^= h >> 15;
    h *= P2;
    h ^= h >> 13;
    h *= P3;
    h ^= h >> 16;
    return h;
}

#define AVX2 __attribute__((target("avx2")))

AVX2 static inline __m256i lanes_of_two(const unsigned char *a, const unsigned char *b)
{
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)a)),
                                   _mm_loadu_si128((const __m128i *)(const void *)b), 1);
}

AVX2 static inline __m256i round8(__m256i acc, __m256i words, __m256i p1, __m256i p2)
{
    acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(words, p2));
    acc = _mm256_or_si256(_mm256_slli_epi32(acc, 13), _mm256_srli_epi32(acc, 19));
    return _mm256_mullo_epi32(acc, p1);
}

/* Four blocks of len >= 16 bytes each. */
AVX2 static void xxh32_x4(const unsigned char *const *b, size_t len, uint32_t seed, uint32_t *out)
{
    const __m256i p1 = _mm256_set1_epi32((int)P1), p2 = _mm256_set1_epi32((int)P2);
    __m256i a01 = _mm256_setr_epi32((int)(seed + P1 + P2), (int)(seed + P2), (int)seed, (int)(seed - P1),
                                    (int)(seed + P1 + P2), (int)(seed + P2), (int)seed, (int)(seed - P1));
    __m256i a23 = a01;
    size_t stripes = len / 16;
    for (size_t i = 0; i < stripes * 16; i += 16) {
        a01 = round8(a01, lanes_of_two(b[0] + i, b[1] + i), p1, p2);
        a23 = round8(a23, lanes_of_two(b[2] + i, b[3] + i), p1, p2);
    }
    uint32_t acc[16];
    _mm256_storeu_si256((__m256i *)(void *)acc, a01);
    _mm256_storeu_si256((__m256i *)(void *)(acc + 8), a23);
    for (int k = 0; k < 4; k++) out[k] = finish(acc + 4 * k, b[k], len, stripes * 16);
}
#endif

void xxh32_many(const unsigned char *const *blocks, const size_t *lens, unsigned n, uint32_t seed, uint32_t *out)
{
    unsigned k = 0;
#ifdef MTS_XXH32_X4
    if (n >= 4 && xxh32_simd()) {
        for (; k + 4 <= n; k += 4) {
            size_t len = lens[k];
            if (len >= 16 && lens[k + 1] == len && lens[k + 2] == len && lens[k + 3] == len) {
                xxh32_x4(blocks + k, len, seed, out + k);
            } else {
                for (unsigned j = k; j < k + 4; j++) out[j] = (uint32_t)XXH32(blocks[j], lens[j], seed);
            }
        }
    }
#endif
    for (; k < n; k++) out[k] = (uint32_t)XXH32(blocks[k], lens[k], seed);
}

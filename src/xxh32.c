/* XXH32 over several blocks at once.
 *
 * XXH32 keeps four 32-bit accumulators, each fed every fourth word of a
 * 16-byte stripe: acc = rotl(acc + word * P2, 13) * P1. One block's four
 * accumulators are a 128-bit vector, so an AVX2 register carries two
 * blocks and four registers eight; the chain of a multiply, a rotate and a
 * multiply per stripe is then shared by two blocks instead of paid by each,
 * and the four registers' chains overlap: with two registers (four blocks)
 * the multiplies' latency bounded the rate (in cache on an Intel Xeon of
 * family 6, model 207: 17.7 GB/s with two, 31.6 GB/s with four;
 * BENCHMARKS.md). What follows the stripes (the fold of the accumulators,
 * the tail under 16 bytes, the avalanche) is per block and scalar.
 * Constants and steps are those of the XXH32 specification; results are
 * checked against the xxhash library's XXH32 in test_codec. */
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

#define MIN2(a, b) ((a) < (b) ? (a) : (b))

static inline uint32_t word32(const unsigned char *p)
{
    uint32_t w;
    memcpy(&w, p, 4); /* little-endian, as x86 is */
    return w;
}

/* The rest of XXH32 for one block (len >= 16) whose first `done` bytes, whole
 * stripes, went into the accumulators acc[4]: its other stripes, the fold,
 * the tail and the avalanche. */
static uint32_t finish(uint32_t acc[4], const unsigned char *p, size_t len, size_t done)
{
    for (; done + 16 <= len; done += 16)
        for (int l = 0; l < 4; l++) acc[l] = rotl32(acc[l] + word32(p + done + 4 * l) * P2, 13) * P1;
    uint32_t h = rotl32(acc[0], 1) + rotl32(acc[1], 7) + rotl32(acc[2], 12) + rotl32(acc[3], 18);
    h += (uint32_t)len;
    for (; done + 4 <= len; done += 4) h = rotl32(h + word32(p + done) * P3, 17) * P4;
    for (; done < len; done++) h = rotl32(h + p[done] * P5, 11) * P1;
    h ^= h >> 15;
    h *= P2;
    h ^= h >> 13;
    h *= P3;
    h ^= h >> 16;
    return h;
}

#define AVX2 __attribute__((target("avx2")))
#define LANES XXH32_MANY
_Static_assert(LANES == 8, "stripes_x8 carries eight lanes");

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

/* The stripes of LANES lanes together: p[k] is lane k's next stripe, its
 * accumulators acc[4k, 4k+4). Each register carries two lanes; the chains
 * of the LANES / 2 registers are independent, so their multiplies overlap:
 * one chain is a multiply's latency long a stripe, not its throughput. */
AVX2 static void stripes_x8(const unsigned char *const *p, size_t stripes, uint32_t *acc)
{
    const __m256i p1 = _mm256_set1_epi32((int)P1), p2 = _mm256_set1_epi32((int)P2);
    __m256i a01 = _mm256_loadu_si256((const __m256i *)(const void *)acc);
    __m256i a23 = _mm256_loadu_si256((const __m256i *)(const void *)(acc + 8));
    __m256i a45 = _mm256_loadu_si256((const __m256i *)(const void *)(acc + 16));
    __m256i a67 = _mm256_loadu_si256((const __m256i *)(const void *)(acc + 24));
    for (size_t i = 0; i < stripes * 16; i += 16) {
        a01 = round8(a01, lanes_of_two(p[0] + i, p[1] + i), p1, p2);
        a23 = round8(a23, lanes_of_two(p[2] + i, p[3] + i), p1, p2);
        a45 = round8(a45, lanes_of_two(p[4] + i, p[5] + i), p1, p2);
        a67 = round8(a67, lanes_of_two(p[6] + i, p[7] + i), p1, p2);
    }
    _mm256_storeu_si256((__m256i *)(void *)acc, a01);
    _mm256_storeu_si256((__m256i *)(void *)(acc + 8), a23);
    _mm256_storeu_si256((__m256i *)(void *)(acc + 16), a45);
    _mm256_storeu_si256((__m256i *)(void *)(acc + 24), a67);
}

/* LANES lanes, each hashing one block of at least 16 bytes: their stripes go
 * together, in rounds as long as the shortest live lane's rest; a lane whose
 * block has under a stripe left finishes it and takes the next block, so the
 * lanes stay full across blocks of unequal lengths. A lane with no block left
 * runs on a live lane's bytes and its result is dropped; the last block
 * alone finishes on its own. Blocks under 16 bytes go through the library. */
static void xxh32_lanes(const unsigned char *const *b, const size_t *lens, unsigned n, uint32_t seed, uint32_t *out)
{
    uint32_t acc[4 * LANES] = {0}; /* a lane without a block hashes garbage from here */
    size_t done[LANES] = {0};
    unsigned idx[LANES], next = 0, nlive = 0;
    for (unsigned j = 0; j < LANES; j++) idx[j] = UINT32_MAX;
    for (;;) {
        /* Fill the empty lanes. */
        for (unsigned j = 0; j < LANES && next < n; j++) {
            if (idx[j] != UINT32_MAX) continue;
            while (next < n && lens[next] < 16) {
                out[next] = (uint32_t)XXH32(b[next], lens[next], seed);
                next++;
            }
            if (next == n) break;
            idx[j] = next++;
            done[j] = 0;
            acc[4 * j] = seed + P1 + P2;
            acc[4 * j + 1] = seed + P2;
            acc[4 * j + 2] = seed;
            acc[4 * j + 3] = seed - P1;
            nlive++;
        }
        if (nlive < 2) break;
        size_t stripes = SIZE_MAX;
        unsigned any = 0;
        for (unsigned j = 0; j < LANES; j++)
            if (idx[j] != UINT32_MAX) {
                stripes = MIN2(stripes, (lens[idx[j]] - done[j]) / 16);
                any = j;
            }
        const unsigned char *p[LANES];
        for (unsigned j = 0; j < LANES; j++)
            p[j] = idx[j] != UINT32_MAX ? b[idx[j]] + done[j] : b[idx[any]] + done[any];
        stripes_x8(p, stripes, acc);
        for (unsigned j = 0; j < LANES; j++) {
            if (idx[j] == UINT32_MAX) continue;
            done[j] += stripes * 16;
            if (lens[idx[j]] - done[j] >= 16) continue;
            out[idx[j]] = finish(acc + 4 * j, b[idx[j]], lens[idx[j]], done[j]);
            idx[j] = UINT32_MAX;
            nlive--;
        }
    }
    for (unsigned j = 0; j < LANES; j++)
        if (idx[j] != UINT32_MAX) out[idx[j]] = finish(acc + 4 * j, b[idx[j]], lens[idx[j]], done[j]);
}
#endif

void xxh32_many(const unsigned char *const *blocks, const size_t *lens, unsigned n, uint32_t seed, uint32_t *out)
{
#ifdef MTS_XXH32_X4
    if (n >= 2 && xxh32_simd()) {
        xxh32_lanes(blocks, lens, n, seed, out);
        return;
    }
#endif
    for (unsigned k = 0; k < n; k++) out[k] = (uint32_t)XXH32(blocks[k], lens[k], seed);
}

/* XXH32, as lz4-java checks each block of its stream with it: one block at a
 * time through the xxhash library, or several at once. */
#ifndef MTS_XXH32_H
#define MTS_XXH32_H

#include <stddef.h>
#include <stdint.h>

/* XXH32 of blocks[k][0, lens[k]) with seed, into out[k], for k < n. Where
 * the CPU has AVX2, blocks of 16 bytes or more are hashed eight at a time,
 * their thirty-two accumulators in four AVX2 registers, each of the eight
 * lanes taking the next block as soon as its own ends (four times the single-block rate in cache for
 * equal blocks on an Intel Xeon of family 6, model 207; BENCHMARKS.md). */
void xxh32_many(const unsigned char *const *blocks, const size_t *lens, unsigned n, uint32_t seed, uint32_t *out);

/* How many blocks xxh32_many hashes at once: lists of checks and groups of
 * decoded blocks are this long. */
#define XXH32_MANY 8u

/* 1 if xxh32_many hashes several blocks at once. */
int xxh32_simd(void);

/* Tests: 0 makes xxh32_many hash one block at a time (the path of CPUs
 * without AVX2), 1 restores what the CPU allows. */
void mts__xxh32_allow_simd(int on);

#endif

/* Per-partition checksums as Spark's java.util.zip classes compute them. */
#ifndef MTS_CHECKSUM_H
#define MTS_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

#include "mtshuffle.h"

/* The value of a fresh checksum object: 1 for ADLER32, 0 for the CRCs. */
uint32_t checksum_init(mts_checksum algo);
/* Continues a running checksum over buf. */
uint32_t checksum_update(mts_checksum algo, uint32_t sum, const void *buf, size_t len);
/* Checksum of A||B from checksum(A), checksum(B) and len(B). */
uint32_t checksum_combine(mts_checksum algo, uint32_t a, uint32_t b, uint64_t len_b);

/* Implementations: zlib's adler32/crc32 and our own CRC-32C (always), and
 * ISA-L's when built with it (MTS_HAVE_ISAL). checksum_update() uses
 * checksum_impl(algo), the faster one here; the others stay reachable for
 * tests and the checksum benchmark. */
#define CHECKSUM_PORTABLE 0
#define CHECKSUM_ISAL 1
int checksum_have_isal(void);
int checksum_impl(mts_checksum algo);
uint32_t checksum_update_with(mts_checksum algo, int impl, uint32_t sum, const void *buf, size_t len);

uint32_t crc32c_update(uint32_t crc, const void *buf, size_t len);
uint32_t crc32c_combine(uint32_t a, uint32_t b, uint64_t len_b);

#endif

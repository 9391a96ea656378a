#include <pthread.h>
#include <strings.h>
#include <zlib.h>

#include "checksum.h"
#include "glibc_floor.h"

#ifdef MTS_HAVE_ISAL
#include <isa-l/crc.h>
#include <isa-l/igzip_lib.h>
#endif

/* CRC-32C (Castagnoli), reflected polynomial. */
#define CRC32C_POLY 0x82F63B78u

static uint32_t crc32c_table[256];

static void crc32c_init_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
        crc32c_table[i] = c;
    }
}

static uint32_t crc32c_sw(uint32_t crc, const unsigned char *p, size_t len)
{
    while (len--) crc = crc32c_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <string.h>
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const unsigned char *p,
                                                            size_t len)
{
    uint64_t c = crc;
    while (len && ((uintptr_t)p & 7)) { c = __builtin_ia32_crc32qi((uint32_t)c, *p++); len--; }
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        len -= 8;
    }
    while (len--) c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
    return (uint32_t)c;
}
#endif

typedef uint32_t (*crc32c_fn)(uint32_t, const unsigned char *, size_t);

static crc32c_fn crc32c_impl; /* written once, under crc32c_once */
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;

static void crc32c_pick(void)
{
    crc32c_init_table();
    crc32c_impl = crc32c_sw;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) crc32c_impl = crc32c_hw;
#endif
}

uint32_t crc32c_update(uint32_t crc, const void *buf, size_t len)
{
    pthread_once(&crc32c_once, crc32c_pick);
    return ~crc32c_impl(~crc, buf, len);
}

/* Polynomial arithmetic modulo the CRC polynomial, bit-reflected (bit 31 is
 * x^0). Shifting crc(A) past len(B) zero bytes is a multiplication by
 * x^(8*len(B)); the powers x^(2^k) are squared up once. */
static uint32_t multmodp(uint32_t a, uint32_t b)
{
    uint32_t m = 1u << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0) break;
        }
        m >>= 1;
        b = (b & 1) ? (b >> 1) ^ CRC32C_POLY : b >> 1;
    }
    return p;
}

uint32_t crc32c_combine(uint32_t a, uint32_t b, uint64_t len_b)
{
    uint32_t pow2[64]; /* pow2[k] = x^(2^k) mod P */
    pow2[0] = 1u << 30; /* x^1 */
    for (int k = 1; k < 64; k++) pow2[k] = multmodp(pow2[k - 1], pow2[k - 1]);
    uint32_t shift = 1u << 31; /* x^0 */
    uint64_t n = len_b;
    for (int k = 3; n && k < 64; k++, n >>= 1)
        if (n & 1) shift = multmodp(pow2[k], shift);
    return multmodp(shift, a) ^ b;
}

uint32_t checksum_init(mts_checksum algo) { return algo == MTS_CHECKSUM_ADLER32 ? 1u : 0u; }

int checksum_have_isal(void)
{
#ifdef MTS_HAVE_ISAL
    return 1;
#else
    return 0;
#endif
}

#ifdef MTS_HAVE_ISAL
static uint32_t isal_update(mts_checksum algo, uint32_t sum, const unsigned char *p, size_t len)
{
    switch (algo) {
    case MTS_CHECKSUM_ADLER32: return isal_adler32(sum, p, len);
    case MTS_CHECKSUM_CRC32: return crc32_gzip_refl(sum, p, len);
    case MTS_CHECKSUM_CRC32C:
        /* crc32_iscsi works on the register (the complement of the value)
         * and takes an int length. */
        for (sum = ~sum; len;) {
            size_t n = len < (1u << 30) ? len : (1u << 30);
            sum = crc32_iscsi((unsigned char *)(uintptr_t)p, (int)n, sum);
            p += n;
            len -= n;
        }
        return ~sum;
    case MTS_CHECKSUM_NONE: break;
    }
    return 0;
}
#endif

uint32_t checksum_update_with(mts_checksum algo, int impl, uint32_t sum, const void *buf, size_t len)
{
#ifdef MTS_HAVE_ISAL
    if (impl == CHECKSUM_ISAL) return isal_update(algo, sum, buf, len);
#else
    (void)impl;
#endif
    switch (algo) {
    case MTS_CHECKSUM_ADLER32: return (uint32_t)adler32_z(sum, buf, len);
    case MTS_CHECKSUM_CRC32: return (uint32_t)crc32_z(sum, buf, len);
    case MTS_CHECKSUM_CRC32C: return crc32c_update(sum, buf, len);
    case MTS_CHECKSUM_NONE: break;
    }
    return 0;
}

int checksum_impl(mts_checksum algo)
{
#ifdef MTS_HAVE_ISAL
    /* Where ISA-L is faster (BENCHMARKS.md, "Checksums"). */
    return algo == MTS_CHECKSUM_ADLER32 || algo == MTS_CHECKSUM_CRC32 || algo == MTS_CHECKSUM_CRC32C
               ? CHECKSUM_ISAL
               : CHECKSUM_PORTABLE;
#else
    (void)algo;
    return CHECKSUM_PORTABLE;
#endif
}

uint32_t checksum_update(mts_checksum algo, uint32_t sum, const void *buf, size_t len)
{
    return checksum_update_with(algo, checksum_impl(algo), sum, buf, len);
}

uint32_t checksum_combine(mts_checksum algo, uint32_t a, uint32_t b, uint64_t len_b)
{
    switch (algo) {
    case MTS_CHECKSUM_ADLER32: return (uint32_t)adler32_combine64(a, b, (z_off64_t)len_b);
    case MTS_CHECKSUM_CRC32: return (uint32_t)crc32_combine64(a, b, (z_off64_t)len_b);
    case MTS_CHECKSUM_CRC32C: return crc32c_combine(a, b, len_b);
    case MTS_CHECKSUM_NONE: break;
    }
    return 0;
}

uint32_t mts_checksum_initial(mts_checksum algo) { return checksum_init(algo); }

uint32_t mts_checksum_update(mts_checksum algo, uint32_t sum, const void *buf, size_t len)
{
    return buf || !len ? checksum_update(algo, sum, buf, len) : sum;
}

int mts_checksum_parse(const char *name, mts_checksum *out)
{
    static const mts_checksum all[] = {MTS_CHECKSUM_ADLER32, MTS_CHECKSUM_CRC32, MTS_CHECKSUM_CRC32C};
    if (!name || !out) return MTS_E_ARG;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcasecmp(name, mts_checksum_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    return MTS_E_ARG;
}

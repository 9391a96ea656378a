#include <time.h>
#include <zlib.h>

#include "checksum.h"
#include "testutil.h"

int main(void)
{
    test_init_seed("test_checksum");
    const char *v = "123456789";
    /* Standard check values of the three algorithms. */
    CHECK(checksum_update(MTS_CHECKSUM_CRC32, 0, v, 9) == 0xCBF43926u);
    CHECK(checksum_update(MTS_CHECKSUM_CRC32C, 0, v, 9) == 0xE3069283u);
    CHECK(checksum_update(MTS_CHECKSUM_ADLER32, 1, v, 9) == 0x091E01DEu);
    CHECK(checksum_init(MTS_CHECKSUM_ADLER32) == 1 && checksum_init(MTS_CHECKSUM_CRC32) == 0 &&
          checksum_init(MTS_CHECKSUM_CRC32C) == 0);
    CHECK(mts_checksum_update(MTS_CHECKSUM_ADLER32, mts_checksum_initial(MTS_CHECKSUM_ADLER32), "", 0) == 1);

    /* Hardware and table CRC-32C agree at every alignment and length: the
     * bytewise definition is the reference. */
    uint64_t s = test_seed;
    unsigned char buf[4096 + 16];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (unsigned char)rng_next(&s);
    for (int t = 0; t < 200; t++) {
        size_t off = rng_below(&s, 16), len = rng_below(&s, 4096);
        uint32_t ref = 0xFFFFFFFFu;
        for (size_t i = 0; i < len; i++) {
            ref ^= buf[off + i];
            for (int k = 0; k < 8; k++) ref = (ref & 1) ? (ref >> 1) ^ 0x82F63B78u : ref >> 1;
        }
        CHECK(crc32c_update(0, buf + off, len) == ~ref);
    }

    /* combine(A, B) == checksum(A || B), for every algorithm, including empty parts. */
    const mts_checksum algos[] = {MTS_CHECKSUM_ADLER32, MTS_CHECKSUM_CRC32, MTS_CHECKSUM_CRC32C};
    for (int a = 0; a < 3; a++) {
        for (int t = 0; t < 300; t++) {
            size_t la = rng_below(&s, 2000), lb = rng_below(&s, 2000);
            if (t % 10 == 0) la = 0;
            if (t % 10 == 1) lb = 0;
            uint32_t i0 = checksum_init(algos[a]);
            uint32_t ca = checksum_update(algos[a], i0, buf, la);
            uint32_t cb = checksum_update(algos[a], i0, buf + la, lb);
            uint32_t whole = checksum_update(algos[a], i0, buf, la + lb);
            CHECK(checksum_combine(algos[a], ca, cb, lb) == whole);
            CHECK(checksum_update(algos[a], ca, buf + la, lb) == whole);
        }
    }
    /* Every implementation built in gives the same value, from any running
     * value, at any length and alignment; the one in use is the faster. */
    if (checksum_have_isal()) {
        for (int a = 0; a < 3; a++)
            for (int t = 0; t < 500; t++) {
                size_t off = rng_below(&s, 16), len = t < 20 ? (size_t)t : rng_below(&s, 4096);
                uint32_t from = t % 3 == 0 ? checksum_init(algos[a]) : (uint32_t)rng_next(&s);
                if (algos[a] == MTS_CHECKSUM_ADLER32) /* a reachable value: both halves below 65521 */
                    from = (from / 65536u % 65521u) << 16 | (from & 0xFFFF) % 65521u;
                uint32_t want = checksum_update_with(algos[a], CHECKSUM_PORTABLE, from, buf + off, len);
                CHECK(checksum_update_with(algos[a], CHECKSUM_ISAL, from, buf + off, len) == want);
                CHECK(checksum_update(algos[a], from, buf + off, len) == want);
            }
        printf("test_checksum: ISA-L and portable checksums agree\n");
    } else {
        printf("test_checksum: built without ISA-L: the portable checksums alone\n");
    }
    mts_checksum parsed;
    CHECK(mts_checksum_parse("crc32c", &parsed) == 0 && parsed == MTS_CHECKSUM_CRC32C);
    CHECK(mts_checksum_parse("md5", &parsed) == MTS_E_ARG);
    TEST_DONE("test_checksum");
}

#include <time.h>

#include "commit.h"
#include "layout.h"
#include "testutil.h"

static char dir[600], data_tmp[700], data[700], idx[700], sum[700];

static void put_data_tmp(size_t len)
{
    FILE *f = fopen(data_tmp, "wb");
    for (size_t i = 0; i < len; i++) fputc((int)(i * 7), f);
    fclose(f);
}

static commit_req req(uint32_t n, const char *checksum_final)
{
    return (commit_req){dir, data_tmp, data, idx, checksum_final, "tok", n, 0};
}

int main(void)
{
    test_init_seed("test_commit");
    char *made = test_tmpdir("commit");
    snprintf(dir, sizeof dir, "%s", made);
    free(made);
    snprintf(data_tmp, sizeof data_tmp, "%s/shuffle_1_2_0.data.tmp", dir);
    snprintf(data, sizeof data, "%s/shuffle_1_2_0.data", dir);
    snprintf(idx, sizeof idx, "%s/shuffle_1_2_0.index", dir);
    snprintf(sum, sizeof sum, "%s/shuffle_1_2_0.checksum.CRC32", dir);
    char err[1024];
    int adopted;

    /* First attempt: index of N+1 big-endian offsets from 0, N checksums. */
    uint64_t lens[3] = {10, 0, 5};
    uint32_t sums[3] = {111, 0, 0xFFFFFFFFu};
    put_data_tmp(15);
    commit_req r = req(3, sum);
    CHECK_RC(commit_output(&r, lens, sums, &adopted, err, sizeof err));
    CHECK(adopted == 0 && access(data_tmp, F_OK) != 0);
    size_t n;
    unsigned char *b = read_file(idx, &n);
    CHECK(n == 32 && be64_at(b) == 0 && be64_at(b + 8) == 10 && be64_at(b + 16) == 10 && be64_at(b + 24) == 15);
    free(b);
    b = read_file(sum, &n);
    CHECK(n == 24 && be64_at(b) == 111 && be64_at(b + 8) == 0 && be64_at(b + 16) == 0xFFFFFFFFull);
    free(b);
    CHECK(dir_count(dir) == 3); /* no temp file left */

    /* Second attempt of the same map output adopts the first one's lengths and
     * checksums and deletes its own data. */
    uint64_t lens2[3] = {3, 3, 3};
    uint32_t sums2[3] = {1, 2, 3};
    put_data_tmp(9);
    CHECK_RC(commit_output(&r, lens2, sums2, &adopted, err, sizeof err));
    CHECK(adopted == 1 && lens2[0] == 10 && lens2[1] == 0 && lens2[2] == 5);
    CHECK(sums2[0] == 111 && sums2[2] == 0xFFFFFFFFu);
    CHECK(access(data_tmp, F_OK) != 0 && dir_count(dir) == 3);

    /* Adopting when the checksum file is missing writes ours (Spark does too). */
    unlink(sum);
    put_data_tmp(9);
    uint32_t sums3[3] = {7, 8, 9};
    CHECK_RC(commit_output(&r, lens2, sums3, &adopted, err, sizeof err));
    CHECK(adopted == 1);
    b = read_file(sum, &n);
    CHECK(n == 24 && be64_at(b) == 7);
    free(b);

    /* An inconsistent earlier output (data shorter than the index says) is
     * replaced, not adopted. */
    truncate(data, 4);
    uint64_t lens4[3] = {1, 2, 3};
    put_data_tmp(6);
    CHECK_RC(commit_output(&r, lens4, sums3, &adopted, err, sizeof err));
    CHECK(adopted == 0);
    b = read_file(idx, &n);
    CHECK(be64_at(b + 24) == 6);
    free(b);
    uint64_t off[4];
    CHECK(layout_index_read(idx, 3, 6, off, err, sizeof err) == 0 && off[1] == 1 && off[2] == 3);
    CHECK(layout_index_read(idx, 3, 7, off, err, sizeof err) == MTS_E_CORRUPT);
    CHECK(strstr(err, "data file has 7 bytes") != NULL);
    CHECK(layout_index_read(idx, 4, 6, off, err, sizeof err) == MTS_E_CORRUPT);

    /* A non-monotonic index is corrupt. */
    unsigned char bad[32] = {0};
    bad[15] = 9; bad[23] = 3; bad[31] = 6;
    FILE *f = fopen(idx, "wb");
    fwrite(bad, 1, 32, f);
    fclose(f);
    CHECK(layout_index_read(idx, 3, 6, off, err, sizeof err) == MTS_E_CORRUPT);

    /* No checksum file when checksums are off; all-empty partitions. */
    rm_rf(dir);
    mkdir(dir, 0755);
    uint64_t zeros[2] = {0, 0};
    put_data_tmp(0);
    commit_req r2 = req(2, NULL);
    CHECK_RC(commit_output(&r2, zeros, NULL, &adopted, err, sizeof err));
    CHECK(dir_count(dir) == 2);
    b = read_file(data, &n);
    CHECK(b && n == 0);
    free(b);

    /* A failure leaves nothing under a final name and no temp file. */
    rm_rf(dir);
    mkdir(dir, 0755);
    put_data_tmp(3);
    commit_req r3 = req(1, NULL);
    r3.data_tmp = "/nonexistent/x";
    uint64_t one[1] = {3};
    CHECK(commit_output(&r3, one, NULL, &adopted, err, sizeof err) == -ENOENT);
    CHECK(strstr(err, "link data") != NULL);
    CHECK(access(data, F_OK) != 0 && access(idx, F_OK) != 0);
    CHECK(dir_count(dir) == 1); /* only our own data_tmp, which the caller owns */
    rm_rf(dir);
    TEST_DONE("test_commit");
}

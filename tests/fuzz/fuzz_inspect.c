/* libFuzzer target: `mtshuffle inspect` on arbitrary files. */
#include "../../cli/cli.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *b, size_t n)
{
    if (fuzz_unpack(b, n) < 0) return 0;
    static int quiet = 0;
    if (!quiet) { /* inspect prints; keep the fuzzer's output readable */
        if (!freopen("/dev/null", "w", stdout)) return 0;
        quiet = 1;
    }
    char path[600];
    snprintf(path, sizeof path, "%s/shuffle_0_0_0.index", fuzz_scratch());
    char *argv[] = {"inspect", path, (n & 1) ? "--json" : "--summary", NULL};
    cmd_inspect(3, argv);
    return 0;
}

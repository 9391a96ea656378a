#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "mtshuffle.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mtshuffle COMMAND [options]\n"
            "\n"
            "commands:\n"
            "  write     run map tasks over a generated store_sales-like workload\n"
            "  inspect   show one output's index and partition sizes, verify checksums\n"
            "  read      read a reduce partition (or range) of every map output in a directory\n"
            "  verify    check every output in a directory: checksums and decodability\n"
            "  bench     time one configuration: writer strategies against the machine's limits\n"
            "  version   print the library version\n"
            "\n"
            "'mtshuffle COMMAND --help' describes a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "write")) return cmd_write(argc - 1, argv + 1);
    if (!strcmp(cmd, "inspect")) return cmd_inspect(argc - 1, argv + 1);
    if (!strcmp(cmd, "read")) return cmd_read(argc - 1, argv + 1);
    if (!strcmp(cmd, "verify")) return cmd_verify(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("mtshuffle %s\n", mts_version_string());
        return 0;
    }
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "mtshuffle: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}

/* defaults — every default efax names, as the code resolves it, for tests/run.sh's docs/defaults-agree:
   one line a default, NAME=VALUE, which the test finds in the drivers' --help, docs/manual.md and
   efax.h's top comment. Run with none of the EFAX_* variables set; before printing it checks that
   the library resolves each unset variable to its named constant, and that the chunk policy's words
   name the two chunk sizes. Exits 1, naming the default, where they differ.

   build/defaults
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#include "efax_bench.h"

#include <stdio.h>
#include <string.h>

/* The value efax resolves for an unset variable `name` must be `want`. Returns 0 or 1. */
static int resolved_as(const char *name, int want) {
    int value = 0;
    int rc = efax_env_setting(name, &value);
    if (rc || value != want) {
        fprintf(stderr, "defaults: %s unset resolves to %d (rc %d), its named default is %d\n", name, value,
                rc, want);
        return 1;
    }
    return 0;
}

/* The chunk policy's words must name `bytes` as efax_fmt_size writes it. Returns 0 or 1. */
static int policy_names(uint64_t bytes, const char *what) {
    char size[32];
    efax_fmt_size(bytes, size, sizeof size);
    if (!strstr(EFAX_CHUNK_POLICY, size)) {
        fprintf(stderr, "defaults: EFAX_CHUNK_POLICY (\"%s\") does not name %s (%s)\n", EFAX_CHUNK_POLICY,
                what, size);
        return 1;
    }
    return 0;
}

int main(void) {
    char size[32];
    int wrong = 0;
    wrong += resolved_as("EFAX_TIMEOUT_MS", EFAX_TIMEOUT_MS_DEFAULT);
    wrong += resolved_as("EFAX_SHM_SPLIT", EFAX_SHM_SPLIT_DEFAULT);
    wrong += policy_names(EFAX_CHUNK_DEFAULT, "EFAX_CHUNK_DEFAULT");
    wrong += policy_names(EFAX_CHUNK_SHM_STAGED, "EFAX_CHUNK_SHM_STAGED");
    wrong += policy_names(EFAX_CHUNK_TCP_FAR, "EFAX_CHUNK_TCP_FAR");
    if (wrong) return 1;
    printf("timeout_ms=%d\n", EFAX_TIMEOUT_MS_DEFAULT);
    printf("shm_split=%d\n", EFAX_SHM_SPLIT_DEFAULT);
    printf("shm_split_kib=%d\n", EFAX_SHM_SPLIT_DEFAULT >> 10);
    printf("chunk=%s\n", efax_fmt_size(EFAX_CHUNK_DEFAULT, size, sizeof size));
    printf("chunk_shm_staged=%s\n", efax_fmt_size(EFAX_CHUNK_SHM_STAGED, size, sizeof size));
    printf("chunk_tcp_far=%s\n", efax_fmt_size(EFAX_CHUNK_TCP_FAR, size, sizeof size));
    printf("chunk_policy=%s\n", EFAX_CHUNK_POLICY);
    printf("window=%d\n", EFAX_WINDOW_DEFAULT);
    printf("imm_tags=%d\n", EFAX_IMM_TAGS_DEFAULT);
    printf("max_nics=%d\n", EFAX_MAX_NICS);
    printf("imm_window=%d\n", EFAX_IMM_WINDOW);
    printf("stage_window=%d\n", EFAX_STAGE_WINDOW);
    printf("stage_min_cell=%s\n", efax_fmt_size(EFAX_STAGE_MIN_CELL, size, sizeof size));
    return 0;
}

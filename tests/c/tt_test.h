/*
 * tt_test.h -- the smallest test harness that does the job: CHECK(cond) prints the
 * failing expression with file and line and counts it; TT_TEST_MAIN_END returns the
 * count, so ctest sees failure as a non-zero exit.
 */
#ifndef TT_TEST_H
#define TT_TEST_H
#include <stdio.h>
#include <string.h>
#include <tinytorch/tinytorch.h>

static int tt_test_failures = 0;

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            tt_test_failures++;                                                  \
        }                                                                        \
    } while (0)

/* The call must fail with `status`, and leave a message mentioning `needle`. */
#define CHECK_FAILS(call, status, needle)                                                   \
    do {                                                                                    \
        tt_clear_error();                                                                   \
        tt_status st_ = (call);                                                             \
        if (st_ != (status) || strstr(tt_last_error(), (needle)) == NULL) {                 \
            fprintf(stderr, "%s:%d: expected %s with '%s' from %s, got %s: '%s'\n", __FILE__, \
                    __LINE__, tt_status_string(status), needle, #call, tt_status_string(st_), \
                    tt_last_error());                                                       \
            tt_test_failures++;                                                             \
        }                                                                                   \
    } while (0)

#define CHECK_OK(call)                                                                        \
    do {                                                                                      \
        tt_status st_ = (call);                                                               \
        if (st_ != TT_OK) {                                                                   \
            fprintf(stderr, "%s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #call,          \
                    tt_status_string(st_), tt_last_error());                                  \
            tt_test_failures++;                                                               \
        }                                                                                     \
    } while (0)

#define TT_TEST_MAIN_END                                                        \
    do {                                                                        \
        if (tt_test_failures) fprintf(stderr, "%d check(s) failed\n", tt_test_failures); \
        else printf("all checks passed\n");                                     \
        return tt_test_failures ? 1 : 0;                                        \
    } while (0)

#endif

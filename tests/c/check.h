/* The check of the C test programs of tests/c: a failed condition prints the PE, the condition and
 * the line, and counts; the program prints "PE n: ok" at the end only when none failed. */
#ifndef RSHMEM_TESTS_C_CHECK_H
#define RSHMEM_TESTS_C_CHECK_H
#include <stdio.h>

static int me, fails;
#define CHECK(c)                                                                  \
    do {                                                                          \
        if (!(c)) {                                                               \
            printf("PE %d: FAILED %s (line %d)\n", me, #c, __LINE__);             \
            fails++;                                                              \
        }                                                                         \
    } while (0)
#endif

/* A program whose small objects come and go in phases: 1M objects of 48
 * bytes written and checked, all freed, then half as many of 100 bytes,
 * calloc'd, checked zero, written and checked. Prints one checksum a phase.
 * Under ccvm exec the slabs emptied by the frees are dropped and reused. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t fill_and_sum(unsigned char **p, size_t n, size_t size, unsigned salt) {
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < size; k++) p[i][k] = (unsigned char)(i * 31 + k * 7 + salt);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < size; k++) sum = sum * 1099511628211ull + p[i][k];
    return sum;
}

int main(void) {
    size_t n = 1 << 20;
    unsigned char **p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = malloc(48);
    printf("phase 1: %016llx\n", (unsigned long long)fill_and_sum(p, n, 48, 1));
    for (size_t i = 0; i < n; i++) free(p[i]);
    size_t bad = 0;
    for (size_t i = 0; i < n / 2; i++) {
        p[i] = calloc(1, 100);
        for (size_t k = 0; k < 100; k++) bad += p[i][k] != 0;
    }
    printf("phase 2: %zu nonzero, %016llx\n", bad, (unsigned long long)fill_and_sum(p, n / 2, 100, 2));
    for (size_t i = 0; i < n / 2; i++) free(p[i]);
    free(p);
    return 0;
}

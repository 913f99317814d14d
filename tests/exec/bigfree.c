/* Large blocks freed give their pages back, and the heap stays whole: for
 * `ccvm exec`'s tests. Big blocks are filled, freed between live small
 * and big neighbours (so freed blocks merge), taken again by malloc,
 * calloc and realloc, and every live byte is checked at the end; then one
 * buffer is freed and taken again in a loop (the threshold slides, so its
 * pages are given back once, not every turn). Last, an anonymous mapping
 * is filled, half unmapped (the other half must keep its bytes), then the
 * rest, and a new mapping must read as zeros.
 *
 * With `move`, only this: two blocks of MIB/2 taken from untouched memory,
 * one right after the other, and the first grown to MIB, which realloc
 * cannot do in place; it moves, and its old place gives its pages back
 * (then the program exits, freeing nothing).
 *
 * usage: bigfree MIB [move]     prints a checksum of what it read
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 31 + seed);
}

static size_t wrong(const unsigned char *p, size_t n, unsigned seed) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += p[i] != (unsigned char)(i * 31 + seed);
    return bad;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: bigfree MIB\n"); return 2; }
    size_t big = (size_t)atol(argv[1]) << 20;
    size_t bad = 0;
    uint64_t sum = 0;
    if (argc > 2 && strcmp(argv[2], "move") == 0) {
        unsigned char *g = malloc(big / 2), *n = malloc(big / 2);
        if (!g || !n) { perror("malloc"); return 2; }
        fill(g, big / 2, 11); fill(n, big / 2, 12);
        unsigned char *g2 = realloc(g, big);
        if (!g2) { perror("realloc"); return 2; }
        bad += wrong(g2, big / 2, 11) + wrong(n, big / 2, 12);
        printf("wrong bytes: %zu; moved %d\n", bad, g2 != g);
        return bad != 0;
    }
    unsigned char *a = malloc(big), *s1 = malloc(40), *b = malloc(big / 2), *s2 = malloc(3000);
    unsigned char *c = malloc(big);
    if (!a || !s1 || !b || !s2 || !c) { perror("malloc"); return 2; }
    fill(a, big, 1); fill(s1, 40, 2); fill(b, big / 2, 3); fill(s2, 3000, 4); fill(c, big, 5);
    free(a);
    free(c);
    free(b); /* merges with its neighbours' free space where they touch */
    /* Taken again: fresh data, zeros from calloc, a grown realloc. */
    unsigned char *d = malloc(big + big / 4);
    unsigned char *z = calloc(1, big);
    unsigned char *r = malloc(big / 4);
    if (!d || !z || !r) { perror("malloc"); return 2; }
    fill(d, big + big / 4, 6);
    fill(r, big / 4, 7);
    r = realloc(r, big);
    if (!r) { perror("realloc"); return 2; }
    bad += wrong(r, big / 4, 7);
    fill(r + big / 4, big - big / 4, 8);
    for (size_t i = 0; i < big; i++) bad += z[i] != 0;
    /* One buffer taken and freed in a loop, checked every turn. */
    for (unsigned turn = 0; turn < 64; turn++) {
        unsigned char *t = malloc(big / 8);
        if (!t) { perror("malloc"); return 2; }
        fill(t, big / 8, 9 + turn);
        bad += wrong(t, big / 8, 9 + turn);
        sum += t[turn * 4099 % (big / 8)];
        free(t);
    }
    bad += wrong(s1, 40, 2) + wrong(s2, 3000, 4) + wrong(d, big + big / 4, 6);
    bad += wrong(r + big / 4, big - big / 4, 8);
    for (size_t i = 0; i < big; i += 4096) sum += d[i] + r[i] + z[i];
    unsigned char *m = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) { perror("mmap"); return 2; }
    fill(m, big, 10);
    munmap(m, big / 2);
    bad += wrong(m + big / 2, big / 2, 10 + (unsigned)(big / 2 * 31));
    munmap(m + big / 2, big / 2);
    unsigned char *m2 = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m2 == MAP_FAILED) { perror("mmap"); return 2; }
    for (size_t i = 0; i < big; i++) bad += m2[i] != 0;
    munmap(m2, big);
    printf("wrong bytes: %zu; checksum %llu\n", bad, (unsigned long long)sum);
    free(d); free(z); free(r); free(s1); free(s2);
    return bad != 0;
}

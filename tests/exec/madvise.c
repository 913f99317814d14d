/* Pages given up with madvise read back as the kernel says, even after
 * they left memory: MADV_DONTNEED gives zeros, MADV_FREE the old contents
 * or zeros, and pages not advised keep theirs. For `ccvm exec`'s tests.
 *
 * usage: madvise MIB [raw]   (raw: through syscall(2), not the C library)
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: madvise MIB [raw]\n"); return 2; }
    size_t n = (size_t)atol(argv[1]) << 20;
    unsigned char *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) { perror("mmap"); return 2; }
    for (size_t i = 0; i < n; i++) m[i] = (unsigned char)(i * 7 + 1);
    /* Push the mapping out of memory under a small --ram. */
    unsigned char *spill = malloc(n);
    for (size_t i = 0; i < n; i += 64) spill[i] = 1;
    if (argc > 2) syscall(SYS_madvise, m, n / 2, MADV_DONTNEED);
    else madvise(m, n / 2, MADV_DONTNEED);
    madvise(m + n / 2, n / 4, MADV_FREE);
    size_t nonzero = 0, wrong = 0;
    for (size_t i = 0; i < n / 2; i++) nonzero += m[i] != 0;
    for (size_t i = n / 2; i < 3 * n / 4; i++) wrong += m[i] != 0 && m[i] != (unsigned char)(i * 7 + 1);
    for (size_t i = 3 * n / 4; i < n; i++) wrong += m[i] != (unsigned char)(i * 7 + 1);
    /* Pages dropped while resident and left untouched until memory fills
     * are evicted as pages that read as zeros (under --write-scan too). */
    size_t q = n / 8;
    for (size_t i = 0; i < q; i++) m[i] = (unsigned char)(i * 3 + 1);
    if (argc > 2) syscall(SYS_madvise, m, q, MADV_DONTNEED);
    else madvise(m, q, MADV_DONTNEED);
    for (size_t i = 0; i < n; i += 64) spill[i] = 2;
    for (size_t i = 0; i < q; i++) nonzero += m[i] != 0;
    printf("dropped bytes not zero: %zu; freed or kept bytes wrong: %zu\n", nonzero, wrong);
    return nonzero != 0 || wrong != 0;
}

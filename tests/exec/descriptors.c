/* What daemons do to their descriptors, for `ccvm exec`'s tests: close
 * every descriptor from 3 up (one by one, with closefrom and with
 * close_range), open a file in the freed numbers, and keep using a heap
 * larger than the RAM budget, whose pages must still come back. Then exec
 * another program (the helper must not outlive this one).
 *
 * usage: descriptors MIB [exec PROGRAM ARGS...]
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: descriptors MIB [exec PROGRAM ARGS...]\n"); return 2; }
    size_t n = (size_t)atol(argv[1]) << 20;
    unsigned char *heap = malloc(n);
    for (size_t i = 0; i < n; i++) heap[i] = (unsigned char)(i * 13 + (i >> 12));
    for (int fd = 3; fd < 4096; fd++) close(fd);
    closefrom(3);
    syscall(SYS_close_range, 3, ~0u, 0);
    int fd = open("/dev/zero", O_RDONLY);
    unsigned char z[16];
    int zeros = read(fd, z, sizeof z) == sizeof z && z[0] == 0 && z[15] == 0;
    size_t bad = 0;
    for (int round = 0; round < 2; round++)
        for (size_t i = 0; i < n; i++) bad += heap[i] != (unsigned char)(i * 13 + (i >> 12));
    printf("opened fd %d, read zeros %s, %zu bad bytes\n", fd, zeros ? "yes" : "no", bad);
    fflush(stdout);
    if (argc > 3 && strcmp(argv[2], "exec") == 0) {
        execv(argv[3], argv + 3);
        perror("execv");
        return 1;
    }
    return bad != 0;
}

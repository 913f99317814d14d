/* What daemons do to their descriptors, for `ccvm exec`'s tests: close
 * every descriptor from 3 up (one by one, with closefrom and with
 * close_range), open a file in the freed numbers, dup2 and dup3 it onto
 * every number still open (as a program that redirects whatever it finds
 * in /proc/self/fd would), and keep using a heap larger than the RAM
 * budget, whose pages must still come back. Then exec another program
 * (the helper must not outlive this one).
 *
 * usage: descriptors MIB [exec PROGRAM ARGS...]
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
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
    /* Every number open from 3 up, the file's own excepted, replaced by it. */
    int open_fds[4096], found = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    while (d && (e = readdir(d)) && found < 4096) {
        int n = atoi(e->d_name);
        if (n > 2 && n != fd && n != dirfd(d)) open_fds[found++] = n;
    }
    if (d) closedir(d);
    struct stat want, got;
    int same = fstat(fd, &want) == 0;
    for (int i = 0; i < found; i++) {
        int r = i % 2 ? dup3(fd, open_fds[i], O_CLOEXEC) : dup2(fd, open_fds[i]);
        same = same && r == open_fds[i] && fstat(r, &got) == 0 && got.st_ino == want.st_ino && got.st_dev == want.st_dev;
    }
    size_t bad = 0;
    for (int round = 0; round < 2; round++)
        for (size_t i = 0; i < n; i++) bad += heap[i] != (unsigned char)(i * 13 + (i >> 12));
    printf("opened fd %d, read zeros %s, every open number now that file %s, %zu bad bytes\n", fd,
           zeros ? "yes" : "no", same ? "yes" : "no", bad);
    fflush(stdout);
    if (argc > 3 && strcmp(argv[2], "exec") == 0) {
        execv(argv[3], argv + 3);
        perror("execv");
        return 1;
    }
    return bad != 0;
}

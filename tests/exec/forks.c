/* Forked children of a paged program are paged too: each child reads the
 * heap as it was at its fork, whatever the parent writes afterwards, and
 * the parent reads what it wrote, whatever the children do.
 *
 * usage: forks MIB CHILDREN [term]
 * A heap of MIB MiB is filled with generation 1; CHILDREN children are
 * forked one after another while the parent rewrites the heap between
 * forks (so that it evicts, spills and reuses swap-file space while the
 * children run). Each child checks the whole heap against the generation
 * of its fork, in random order, writes a generation of its own over half
 * of it, allocates and fills as much again, forks a grandchild that checks
 * both (and ends with _exit, which skips the C library's destructors), and
 * checks both itself. Prints one line per child and "ok" or
 * "BAD"; exits 0 only if every check passed. With "term", each child
 * then waits to be killed, and the parent ends it with SIGTERM, as
 * multiprocessing ends its pool's workers, a second after it is done. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE 4096

static uint64_t word(size_t page, size_t i, unsigned gen) {
    uint64_t x = (page * 0x9e3779b97f4a7c15ull) ^ (i * 0xbf58476d1ce4e5b9ull) ^ gen;
    x ^= x >> 31;
    /* Compressible: half the words repeat within a page. */
    return (i & 1) ? gen : x;
}

static void fill(uint64_t *p, size_t pages, size_t from, unsigned gen) {
    for (size_t pg = from; pg < pages; pg++)
        for (size_t i = 0; i < PAGE / 8; i++) p[pg * (PAGE / 8) + i] = word(pg, i, gen);
}

/* Checks pages [0, pages) in a random order; returns the bad ones. */
static size_t check(const uint64_t *p, size_t pages, size_t split, unsigned low, unsigned high, unsigned seed) {
    size_t bad = 0, x = seed * 2654435761u + 1;
    for (size_t k = 0; k < pages; k++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        size_t pg = (x >> 20) % pages;
        unsigned gen = pg < split ? low : high;
        for (size_t i = 0; i < PAGE / 8; i++)
            if (p[pg * (PAGE / 8) + i] != word(pg, i, gen)) { bad++; break; }
    }
    for (size_t pg = 0; pg < pages; pg++) { /* and every page once */
        unsigned gen = pg < split ? low : high;
        if (p[pg * (PAGE / 8)] != word(pg, 0, gen) || p[pg * (PAGE / 8) + PAGE / 8 - 2] != word(pg, PAGE / 8 - 2, gen))
            bad++;
    }
    return bad;
}

static int child(uint64_t *heap, size_t pages, unsigned gen, unsigned id) {
    size_t bad = check(heap, pages, pages, gen, gen, id);
    unsigned own = 1000 + id;
    fill(heap, pages / 2, 0, own); /* the first half becomes the child's */
    uint64_t *more = malloc(pages * PAGE / 2);
    fill(more, pages / 2, 0, own + 1);
    fflush(stdout);
    pid_t g = fork();
    if (g == 0) {
        size_t b = check(heap, pages, pages / 2, own, gen, id + 7) + check(more, pages / 2, pages / 2, own + 1, 0, id + 8);
        _exit(b ? 1 : 0); /* as forked workers end (CPython's os._exit) */
    }
    fill(more, pages / 2, 0, own + 2); /* the grandchild must not see this */
    int status = 0;
    waitpid(g, &status, 0);
    bad += check(heap, pages, pages / 2, own, gen, id + 9) + check(more, pages / 2, pages / 2, own + 2, 0, id + 10);
    int grand_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    printf("child %u: %zu bad pages, grandchild %s\n", id, bad, grand_ok ? "ok" : "BAD");
    fflush(stdout);
    free(more);
    return bad == 0 && grand_ok ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: forks MIB CHILDREN [term]\n"); return 2; }
    size_t pages = strtoul(argv[1], NULL, 10) * 256;
    unsigned children = strtoul(argv[2], NULL, 10);
    int term = argc > 3 && strcmp(argv[3], "term") == 0;
    int done[2];
    if (term && pipe(done) != 0) { perror("pipe"); return 2; }
    uint64_t *heap = malloc(pages * PAGE);
    fill(heap, pages, 0, 1);
    pid_t pids[64];
    unsigned gen = 1;
    for (unsigned c = 0; c < children && c < 64; c++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            int rc = child(heap, pages, gen, c);
            if (!term) exit(rc);
            char b = rc ? 'B' : 'k';
            if (write(done[1], &b, 1) != 1) _exit(3);
            for (;;) pause(); /* until SIGTERM */
        }
        pids[c] = pid;
        gen++;
        fill(heap, pages, 0, gen); /* while the child runs */
        if (check(heap, pages, pages, gen, gen, 99 + c)) printf("parent: BAD after child %u's fork\n", c);
    }
    int ok = 1;
    if (term) {
        for (unsigned c = 0; c < children && c < 64; c++) {
            char b = 0;
            ok = ok && read(done[0], &b, 1) == 1 && b == 'k';
        }
        sleep(1);
        for (unsigned c = 0; c < children && c < 64; c++) kill(pids[c], SIGTERM);
    }
    for (unsigned c = 0; c < children && c < 64; c++) {
        int status = 0;
        waitpid(pids[c], &status, 0);
        if (term)
            ok = ok && WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM;
        else
            ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    size_t bad = check(heap, pages, pages, gen, gen, 5);
    printf("parent: %zu bad pages; children %s\n", bad, ok ? "ok" : "BAD");
    printf("%s\n", ok && bad == 0 ? "ok" : "BAD");
    return ok && bad == 0 ? 0 : 1;
}

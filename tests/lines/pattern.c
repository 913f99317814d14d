/* For `ccvm sim record-lines`'s tests: fills 64 KiB with a known pattern,
 * then reads it back, so the trace must hold line images equal to it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    size_t n = 64 << 10;
    char *p = malloc(n);
    for (size_t i = 0; i < n; i += 4)
        memcpy(p + i, "ccvm", 4);
    unsigned long sum = 0;
    for (int pass = 0; pass < 4; pass++)
        for (size_t i = 0; i < n; i += 64)
            sum += (unsigned char)p[i + pass];
    printf("%lu\n", sum);
    free(p);
    return 0;
}

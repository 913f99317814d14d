/* Small objects freed at once: 3M mallocs of 64 bytes, all freed, then 1.5M of
 * 100 bytes; prints the process's RssAnon after each phase. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static long rss(void) { FILE *f = fopen("/proc/self/status", "r"); char l[256]; long v = -1;
  while (fgets(l, sizeof l, f)) if (!strncmp(l, "RssAnon:", 8)) v = atol(l + 8); fclose(f); return v; }
int main(void) {
  size_t n = 3 << 20; char **p = malloc(n * sizeof *p);
  for (size_t i = 0; i < n; i++) { p[i] = malloc(64); memset(p[i], (int)i, 64); }
  printf("after small: %ld KiB\n", rss());
  for (size_t i = 0; i < n; i++) free(p[i]);
  printf("after free: %ld KiB\n", rss());
  for (size_t i = 0; i < n / 2; i++) { p[i] = malloc(100); memset(p[i], 1, 100); }
  printf("after again: %ld KiB\n", rss());
  return 0;
}

/* Pages a region through the C interface: fills 4 MiB through 1 MiB of
 * RAM, reads it back, checks bad settings are refused with a reason. */
#include <stdint.h>
#include <string.h>

#include "ccvm.h"

int ccvm_c_smoke(void) {
    ccvm_config c;
    ccvm_config_default(&c);
    char err[256];

    c.uncompressed_share = 3.0;
    if (ccvm_region_new(1 << 20, &c, err, sizeof err) != NULL || strstr(err, "between 0 and 1") == NULL)
        return 1;
    c.uncompressed_share = 0.5;
    c.codec = "lz4";
    c.ram_bytes = 1 << 20;
    ccvm_region *r = ccvm_region_new(4 << 20, &c, err, sizeof err);
    if (r == NULL || ccvm_region_len(r) != (4 << 20))
        return 2;
    uint64_t *words = ccvm_region_base(r);
    size_t n = ccvm_region_len(r) / 8;
    for (size_t i = 0; i < n; i++)
        words[i] = i * 2654435761u % 1000;
    for (size_t i = 0; i < n; i++)
        if (words[i] != i * 2654435761u % 1000)
            return 3;
    ccvm_stats s;
    ccvm_region_stats(r, &s);
    ccvm_region_free(r);
    ccvm_region_free(NULL);
    return s.pages_compressed > 0 ? 0 : 4;
}

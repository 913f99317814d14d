/*
 * ccvm.h: the C interface of ccvm's live runtime (libccvm_runtime.so).
 *
 * A region is memory of any size of which ccvm keeps at most a RAM budget,
 * part uncompressed and part in a compression cache, and the rest in a
 * swap file; the program reads and writes it as ordinary memory.
 *
 *     ccvm_config c;
 *     ccvm_config_default(&c);
 *     c.ram_bytes = 64 << 20;
 *     char err[256];
 *     ccvm_region *r = ccvm_region_new(256 << 20, &c, err, sizeof err);
 *     if (!r) { fprintf(stderr, "%s\n", err); exit(1); }
 *     char *mem = ccvm_region_base(r);
 *     ...
 *     ccvm_region_free(r);
 *
 * A swap-file I/O error or a page failing its checksum stops the process
 * (exit status 3) with one line on stderr: no wrong data is ever returned.
 */
#ifndef CCVM_H
#define CCVM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Settings of a region. Strings are NUL-terminated; NULL means the default. */
typedef struct ccvm_config {
    uint64_t ram_bytes;          /* RAM for uncompressed pages and the cache */
    double uncompressed_share;   /* 0..1: share of ram_bytes kept uncompressed */
    const char *policy;          /* "fixed" (default) or "none" */
    const char *codec;           /* "wkdm" (default), "lz4", ... */
    const char *swap_dir;        /* directory of the swap file; NULL: temp dir */
    uint64_t disk_latency_ns;    /* added to each swap-file read */
} ccvm_config;

/* Counters of a region. */
typedef struct ccvm_stats {
    uint64_t faults_zero;        /* first touches */
    uint64_t faults_cache;       /* served from the compression cache */
    uint64_t faults_disk;        /* served from the swap file */
    uint64_t pages_compressed;
    uint64_t pages_decompressed;
    uint64_t swap_bytes_written;
    uint64_t swap_bytes_read;
    uint64_t bytes_in;           /* bytes of the pages compressed */
    uint64_t bytes_out;          /* bytes they compressed to */
} ccvm_stats;

typedef struct ccvm_region ccvm_region;

/* Fills *config with the defaults (64 MiB of RAM, half uncompressed, WKdm). */
void ccvm_config_default(ccvm_config *config);

/* Makes a region of `bytes` (rounded up to pages). On failure returns NULL
 * and writes a one-line reason into err (if err_len > 0). */
ccvm_region *ccvm_region_new(size_t bytes, const ccvm_config *config, char *err, size_t err_len);

/* The region's first byte (page-aligned) and its length. */
void *ccvm_region_base(const ccvm_region *region);
size_t ccvm_region_len(const ccvm_region *region);

/* Counters as of the handler's last report (at most 20 ms old). */
void ccvm_region_stats(const ccvm_region *region, ccvm_stats *out);

/* Stops paging and frees the region, its cache and its swap file.
 * NULL is ignored. */
void ccvm_region_free(ccvm_region *region);

#ifdef __cplusplus
}
#endif

#endif

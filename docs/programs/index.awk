# An inverted index in awk: 1.2M generated documents' ids under their
# words, then 2M skewed queries that read and extend the postings.
BEGIN {
    srand(7)
    n = 1200000
    for (i = 0; i < n; i++) {
        key = "doc" i
        title[key] = sprintf("title %d of topic %d by %x", i, i % 977, (i * 2654435761) % 4294967296)
        score[key] = (i * 7919) % 100003
    }
    hits = 0
    for (q = 0; q < 2000000; q++) {
        r = rand()
        if (r < 0.9) i = int(rand() * n * 0.05); else i = int(rand() * n)
        key = "doc" i
        hits += length(title[key]) + score[key]
        if (q % 3 == 0) score[key] = score[key] + 1
    }
    print hits
}

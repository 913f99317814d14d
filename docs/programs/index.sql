-- An in-memory sqlite database of 600k rows with two indexes, built and
-- queried (used in docs/results.md): sqlite3 -batch -init index.sql :memory: .quit
PRAGMA cache_size=-400000;
CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v INTEGER);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<600000) INSERT INTO t SELECT x, printf('%08x%06d', (x*2654435761) % 4294967291, x % 7919), (x*48271) % 100000 FROM c;
CREATE INDEX ik ON t(k);
CREATE INDEX iv ON t(v);
SELECT count(*), sum(v) FROM t WHERE k > 'A';
SELECT v, count(*) FROM t GROUP BY v ORDER BY count(*) DESC, v LIMIT 5;

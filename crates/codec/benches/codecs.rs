//! Criterion benchmarks: every codec compressing and decompressing the pages
//! of the bundled corpus (a page-by-page round trip of each corpus file).

use ccvm_codec::{CompressError, CODECS, PAGE_SIZE};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

fn codecs(c: &mut Criterion) {
    let files = ccvm_corpus::load_dir(ccvm_corpus::default_dir()).expect("bundled corpus");
    // A slice of every file keeps a run short while covering every kind of page.
    let pages: Vec<u8> = files
        .iter()
        .flat_map(|f| f.data[..64 * PAGE_SIZE].iter().copied())
        .collect();
    let mut group = c.benchmark_group("round_trip");
    group.throughput(Throughput::Bytes(pages.len() as u64));
    for info in CODECS.iter().filter(|c| c.general) {
        let mut codec = (info.make)();
        let mut packed = vec![0u8; PAGE_SIZE];
        let mut back = vec![0u8; PAGE_SIZE];
        group.bench_function(BenchmarkId::from_parameter(info.name), |b| {
            b.iter(|| {
                for page in pages.chunks_exact(PAGE_SIZE) {
                    match codec.compress(page, &mut packed) {
                        Ok(n) => codec.decompress(&packed[..n], &mut back).unwrap(),
                        Err(CompressError::DoesNotFit { .. }) => back.copy_from_slice(page),
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, codecs);
criterion_main!(benches);

//! Prints one CSV line per corpus page: file, WKdm size, LZ4 size, and
//! cheap page statistics, for choosing the hybrid codec's rule.
//!
//! `cargo run --release -p ccvm-codec --example page_features > features.csv`

use ccvm_codec::{by_name, PAGE_SIZE};

fn main() {
    let files = ccvm_corpus::load_dir(ccvm_corpus::default_dir()).unwrap_or_else(|e| panic!("{e}"));
    let (mut wk, mut lz) = (by_name("wkdm").unwrap(), by_name("lz4").unwrap());
    let mut out = vec![0u8; 2 * PAGE_SIZE];
    println!("file,wk,lz4,ascii,zero_bytes");
    for f in &files {
        for p in f.pages() {
            let w = wk.compress(p, &mut out).unwrap_or(PAGE_SIZE).min(PAGE_SIZE);
            let l = lz.compress(p, &mut out).unwrap_or(PAGE_SIZE).min(PAGE_SIZE);
            let ascii = p.iter().filter(|&&b| (0x20..0x7F).contains(&b)).count();
            let zeros = p.iter().filter(|&&b| b == 0).count();
            println!("{},{w},{l},{ascii},{zeros}", f.name);
        }
    }
}

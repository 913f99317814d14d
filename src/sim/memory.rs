//! `ccvm sim memory`: full memory compression against a compressed disk
//! cache on line traces (paper 002; `ccvm_cachesim::memory`).

use std::path::PathBuf;

use anyhow::Context;
use ccvm_cachesim::trace::LineTrace;
use ccvm_cachesim::{Config, Organization};

use super::cache::{check_shape, truncate};

/// What `ccvm sim memory` is asked.
pub struct MemorySweep {
    /// Traces.
    pub traces: Vec<PathBuf>,
    /// Physical memory as shares of each trace's footprint.
    pub shares: Vec<f64>,
    /// A disk read, cycles.
    pub disk: u64,
    /// L2 bytes.
    pub l2: u64,
    /// Chipset cache as a share of physical memory.
    pub chipset_share: f64,
    /// FMC's block codec and CDC's page codec.
    pub fmc_codec: ccvm_codec::CodecId,
    /// CDC's page codec.
    pub cdc_codec: ccvm_codec::CodecId,
}

/// The median nanoseconds to compress and to decompress one of `pages`
/// with `codec` (page images of the trace), as cycles of a 1 GHz core.
fn page_costs(codec: &mut dyn ccvm_codec::Codec, pages: &[Vec<u8>]) -> anyhow::Result<(u64, u64)> {
    let mut out = vec![0u8; 8192];
    let mut back = vec![0u8; 4096];
    let (mut c, mut d) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        for p in pages {
            let t = std::time::Instant::now();
            let n = codec.compress(p, &mut out).unwrap_or(4096);
            c.push(t.elapsed().as_nanos() as u64);
            if n < 4096 {
                let t = std::time::Instant::now();
                codec
                    .decompress(&out[..n], &mut back)
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                d.push(t.elapsed().as_nanos() as u64);
            }
        }
    }
    c.sort_unstable();
    d.sort_unstable();
    Ok((
        c.get(c.len() / 2).copied().unwrap_or(0),
        d.get(d.len() / 2).copied().unwrap_or(0),
    ))
}

/// Base, chipset cache alone, FMC and CDC (at three shares of memory) on
/// each trace and memory size; prints disk reads, CDC hits, the pages the
/// memory held and the performance against Base (paper 002's tables).
pub fn memory(a: &MemorySweep) -> anyhow::Result<()> {
    let mut codecs = (a.fmc_codec.make(), a.cdc_codec.make());
    check_shape(a.l2, 8).context("L2")?;
    outln!(
        "{:<10} {:>7} {:<16} {:>8} {:>9} {:>8} {:>10} {:>7} {:>9}",
        "trace",
        "memory",
        "scheme",
        "chipset",
        "disk rd",
        "CDC hits",
        "real pages",
        "IPC",
        "vs base"
    )?;
    for (path, name) in a.traces.iter().zip(ccvm_sim::plan::trace_names(&a.traces)) {
        let trace = LineTrace::open(path)?;
        let (pages, sample) = final_pages(&trace);
        let costs = page_costs(codecs.1.as_mut(), &sample)?;
        eprintln!(
            "{}: {} pages touched; {} a page: compress {} ns, decompress {} ns (median of {})",
            path.display(),
            pages,
            a.cdc_codec,
            costs.0,
            costs.1,
            sample.len()
        );
        for &share in &a.shares {
            memory_at(a, &trace, &name, pages, share, costs, &mut codecs)?;
        }
    }
    Ok(())
}

/// The number of pages `trace` touches, and a sample of at most about
/// 2000 of them as they ended, to measure the codec's costs on.
fn final_pages(trace: &LineTrace) -> (usize, Vec<Vec<u8>>) {
    let mut last: std::collections::HashMap<u64, u32> = std::collections::HashMap::new();
    let mut pages = std::collections::HashSet::new();
    for e in trace.events() {
        match e {
            ccvm_cachesim::trace::Event::Contents { line, image } => {
                last.insert(line, image);
            }
            ccvm_cachesim::trace::Event::Reference { line, .. } => {
                pages.insert(line / 64);
            }
        }
    }
    let mut pages: Vec<u64> = pages.into_iter().collect();
    pages.sort_unstable();
    let sample = pages
        .iter()
        .step_by(pages.len().div_ceil(2000).max(1))
        .map(|&p| {
            (0..64)
                .flat_map(|i| {
                    last.get(&(p * 64 + i))
                        .map_or([0u8; 64], |&img| trace.images()[img as usize])
                })
                .collect()
        })
        .collect();
    (pages.len(), sample)
}

/// Every scheme on `trace` (named `name`) with memory for `share` of its
/// `pages`, FMC's codec first in `codecs` and CDC's second; CDC's page
/// (compress, decompress) `costs` in ns; prints a line each.
fn memory_at(
    a: &MemorySweep,
    trace: &LineTrace,
    name: &str,
    pages: usize,
    share: f64,
    (compress, decompress): (u64, u64),
    codecs: &mut (Box<dyn ccvm_codec::Codec>, Box<dyn ccvm_codec::Codec>),
) -> anyhow::Result<()> {
    use ccvm_cachesim::memory::{simulate_memory, Cdc, Fmc, MemorySystem, Scheme, PAGE};
    let l1 = Config {
        size: 32 << 10,
        ways: 2,
        organization: Organization::Plain,
    };
    let l2 = Config {
        size: a.l2 as usize,
        ways: 8,
        organization: Organization::Plain,
    };
    let memory = ((pages as f64 * share) as usize).max(4) * PAGE;
    let fmc = Fmc {
        chipset: ((memory as f64 * a.chipset_share) as usize).max(4096),
        chipset_latency: 50,
        block: 256,
        sector: 64,
        decompress: 32,
    };
    let cdc = |part: f64| Cdc {
        bytes: (memory as f64 * part) as usize,
        decompress,
        compress,
        path: 1000,
    };
    let schemes = [
        ("base", Scheme::Base),
        ("chipset only", Scheme::ChipsetCache(fmc)),
        ("fmc", Scheme::Fmc(fmc)),
        ("cdc 25%", Scheme::Cdc(cdc(0.25))),
        ("cdc 50%", Scheme::Cdc(cdc(0.5))),
        ("cdc 75%", Scheme::Cdc(cdc(0.75))),
    ];
    let mut runs = Vec::new();
    for (label, scheme) in schemes {
        let codec = if matches!(scheme, Scheme::Fmc(_)) {
            codecs.0.as_mut()
        } else {
            codecs.1.as_mut()
        };
        let system = MemorySystem {
            l1,
            l2,
            memory,
            memory_latency: 80,
            disk: a.disk,
            scheme,
        };
        runs.push((label, simulate_memory(trace, codec, &system)));
    }
    let base = runs[0].1.ipc();
    for (label, r) in &runs {
        outln!(
            "{:<10} {:>6.0}% {:<16} {:>8} {:>9} {:>8} {:>10} {:>7.4} {:>8.1}%",
            truncate(name, 10),
            share * 100.0,
            label,
            r.chipset_hits,
            r.disk_reads,
            r.cdc_hits,
            r.pages_held,
            r.ipc(),
            (r.ipc() / base - 1.0) * 100.0
        )?;
    }
    Ok(())
}

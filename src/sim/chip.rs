//! `ccvm sim chip`: line traces run together on a chip multiprocessor of
//! private L2s, cooperative compression and migration against each alone
//! (paper 003 chapter 7; `ccvm_cachesim::cmp`).

use std::path::PathBuf;

use anyhow::{bail, Context};
use ccvm_cachesim::system::Run;
use ccvm_cachesim::trace::LineTrace;
use ccvm_cachesim::{Config, Organization};
use rayon::prelude::*;

use super::cache::{check_shape, size_label, truncate};

/// What `ccvm sim chip` is asked.
pub struct ChipSweep {
    /// One trace per core.
    pub traces: Vec<PathBuf>,
    /// L1 bytes and ways.
    pub l1: (u64, usize),
    /// Each core's L2 sizes to run.
    pub l2_sizes: Vec<u64>,
    /// L2 ways.
    pub ways: usize,
    /// Line codec.
    pub codec: ccvm_codec::CodecId,
    /// Lines cross the memory link compressed.
    pub link: bool,
}

/// Runs the traces together on a chip of private L2s under each
/// cooperation policy, and private L2s of twice the size; prints each
/// core's IPC and the chip's throughput.
pub fn chip(a: &ChipSweep) -> anyhow::Result<()> {
    use ccvm_cachesim::cmp::{simulate_chip, Chip, Cooperation};
    if a.traces.len() < 2 || a.traces.len() > 8 {
        bail!("give 2 to 8 traces, one per core");
    }
    for &s in &a.l2_sizes {
        check_shape(s, a.ways).with_context(|| format!("L2 of {s} bytes and {} ways", a.ways))?;
    }
    let mut codec = a.codec.make();
    let traces = a
        .traces
        .iter()
        .map(|p| LineTrace::open(p))
        .collect::<Result<Vec<_>, _>>()?;
    let sizes: Vec<Vec<u8>> = traces.iter().map(|t| t.sizes(codec.as_mut())).collect();
    let names = ccvm_sim::plan::trace_names(&a.traces);
    let l1 = Config {
        size: a.l1.0 as usize,
        ways: a.l1.1,
        organization: Organization::Plain,
    };
    let policies = [
        ("private", Cooperation::Private, 1),
        ("compression", Cooperation::Compression, 1),
        ("migration", Cooperation::Migration, 1),
        ("cooperative", Cooperation::Cooperative, 1),
        ("private-2x", Cooperation::Private, 2),
    ];
    let jobs: Vec<(u64, &str, Cooperation, u64)> = a
        .l2_sizes
        .iter()
        .flat_map(|&l2| policies.iter().map(move |&(n, c, x)| (l2, n, c, x)))
        .collect();
    let pairs: Vec<(&LineTrace, &[u8])> = traces.iter().zip(&sizes).map(|(t, s)| (t, &s[..])).collect();
    let started = std::time::Instant::now();
    let runs: Vec<Vec<Run>> = jobs
        .par_iter()
        .map(|&(l2, _, cooperation, times)| {
            let mut chip = Chip::paper(l1, (l2 * times) as usize, a.ways, cooperation);
            chip.link_compression = a.link;
            simulate_chip(&pairs, &chip)
        })
        .collect();
    eprintln!(
        "{} chips of {} cores in {:.1} s",
        jobs.len(),
        traces.len(),
        started.elapsed().as_secs_f64()
    );
    out!("{:>6} {:<12}", "L2", "policy")?;
    for n in &names {
        out!(" {:>10}", truncate(n, 10))?;
    }
    outln!(" {:>10} {:>8} {:>8}", "throughput", "vs priv", "remote")?;
    for (k, (&(l2, name, _, _), cores)) in jobs.iter().zip(&runs).enumerate() {
        let base: f64 = runs[k - k % policies.len()].iter().map(Run::ipc).sum();
        let throughput: f64 = cores.iter().map(Run::ipc).sum();
        out!("{:>6} {:<12}", size_label(l2), name)?;
        for c in cores {
            out!(" {:>10.3}", c.ipc())?;
        }
        outln!(
            " {:>10.3} {:>7.1}% {:>8}",
            throughput,
            (throughput / base - 1.0) * 100.0,
            cores.iter().map(|c| c.remote_hits).sum::<u64>()
        )?;
    }
    Ok(())
}

//! `ccvm bench faults`: what one fault costs, all in, under the kernel's
//! zram and under ccvm, on the same real pages and the same touches.
//!
//! A region of `--pages` pages is filled with corpus pages (repeated) and
//! then touched at random: each touch reads and rewrites one word of a
//! page, as an interpreter's reference count does. Only `--share` of the
//! pages fit in memory uncompressed, so most touches of a page not in
//! memory fault, and each fault also makes room by evicting another page:
//! the steady state of a program larger than its memory.
//!
//! * **Kernel**: a child process in a memory cgroup whose limit is what
//!   the child held before the region plus `--share` of the region, with
//!   zram (`--algorithm`, LZ4 by default) as the only swap and swap
//!   read-ahead off, as `bench kernel` sets it up. Faults are its major
//!   faults.
//! * **ccvm**: a [`Region`] in a child process with the kernel's memory for
//!   the region as its RAM budget (`--share` of the region plus zram's
//!   pool at its peak in the kernel's run of the same round) and otherwise
//!   the defaults (signal faults, the default policy and codec). Faults
//!   are its cache and swap-file faults.
//! * **Trap and moves only**: the floor under any pager of ccvm's design
//!   (see the `floor` module): the kernel's share of the pages resident,
//!   every fault served by moving one frame in and one out, nothing else.
//! * **Plain**: the same touches on plain memory, whose time is taken off
//!   the others: what is left is the paging, divided by the faults.
//!
//! The cost per fault so measured includes everything a fault sets off on
//! the faulting thread: the trap, the decompression, the mapping, and the
//! eviction that makes room (the kernel's direct reclaim; ccvm's policy
//! and move-out, its compression being on the helper process). The runs
//! alternate, `--rounds` times, and the table gives medians. The three
//! checksums of each round must agree: a difference is reported as an
//! error, since it means a page came back wrong.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use crate::args::Format;
use ccvm_kernelswap::{self as setup, Cgroup, Zram};
use ccvm_runtime::{Region, RuntimeConfig};

mod floor;

/// What to measure.
pub struct Options {
    /// Folder of page files; `None`: the bundled corpus.
    pub corpus: Option<PathBuf>,
    /// Pages in the region.
    pub pages: usize,
    /// Share of the region that fits in memory uncompressed.
    pub share: f64,
    /// Touches per run.
    pub touches: usize,
    /// Runs of each system.
    pub rounds: usize,
    /// zram's algorithm.
    pub algorithm: String,
    /// ccvm's policy; `None`: the default.
    pub policy: Option<String>,
}

/// One run's result, as the kernel's child prints it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Run {
    /// Seconds the touches took.
    pub wall_s: f64,
    /// Faults that brought a page back during the touches.
    pub faults: u64,
    /// Of the faults, those served from disk (ccvm's swap file; the
    /// kernel's are all from zram).
    #[serde(default)]
    pub disk_faults: u64,
    /// Sum of the words touched.
    pub checksum: u64,
}

/// A row of the table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// plain memory, kernel zram-lz4, ccvm, trap and moves only.
    pub system: String,
    /// Median seconds of the touches.
    pub wall_s: f64,
    /// Median faults.
    pub faults: u64,
    /// (wall − plain wall) / faults, median over the rounds, µs.
    pub us_per_fault: f64,
}

/// The region's bytes: corpus pages in order, repeated to `pages`.
fn contents(corpus: &Option<PathBuf>, pages: usize) -> anyhow::Result<Vec<u8>> {
    let dir = corpus.clone().unwrap_or_else(ccvm_corpus::default_dir);
    let files = ccvm_corpus::load_dir(&dir)?;
    let all: Vec<&[u8]> = files.iter().flat_map(|f| f.pages()).collect();
    if all.is_empty() {
        bail!("corpus {} has no pages", dir.display());
    }
    let mut out = Vec::with_capacity(pages * ccvm_codec::PAGE_SIZE);
    for i in 0..pages {
        out.extend_from_slice(all[i % all.len()]);
    }
    Ok(out)
}

/// Touches `touches` random pages of the `pages` at `base`: reads one word
/// and writes it back plus one. Returns the sum of the words read.
///
/// # Safety
///
/// `base` is valid for reads and writes of `pages` pages.
pub(crate) unsafe fn touch(base: *mut u64, pages: usize, touches: usize, seed: u64) -> u64 {
    let mut x = seed | 1;
    let mut sum = 0u64;
    for _ in 0..touches {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let word = (x % pages as u64) as usize * 512 + (x >> 40) as usize % 512;
        // SAFETY: within the caller's range.
        unsafe {
            let p = base.add(word);
            let v = std::ptr::read_volatile(p);
            sum = sum.wrapping_add(v);
            std::ptr::write_volatile(p, v.wrapping_add(1));
        }
    }
    sum
}

fn major_faults() -> u64 {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_SELF).map_or(0, |u| u.major_page_faults() as u64)
}

/// The touches on plain memory.
fn plain(data: &[u8], touches: usize, seed: u64) -> Run {
    let mut mem = data.to_vec();
    let started = Instant::now();
    // SAFETY: our own buffer of whole pages.
    let checksum = unsafe { touch(mem.as_mut_ptr().cast(), data.len() / 4096, touches, seed) };
    Run {
        wall_s: started.elapsed().as_secs_f64(),
        faults: 0,
        disk_faults: 0,
        checksum,
    }
}

/// The touches in a ccvm region with `ram` bytes of RAM and `policy`
/// (`None`: the default).
fn ccvm(data: &[u8], ram: u64, policy: Option<&str>, touches: usize, seed: u64) -> anyhow::Result<Run> {
    let mut config = RuntimeConfig {
        ram_bytes: ram,
        ..RuntimeConfig::default()
    };
    if let Some(name) = policy {
        config.policy = name.parse()?;
    }
    let mut region = Region::new(data.len(), config)?;
    region.as_mut_slice()[..data.len()].copy_from_slice(data);
    let faults = |r: &Region| {
        let s = r.stats();
        (s.faults_cache + s.faults_disk, s.faults_disk)
    };
    let before = faults(&region);
    let started = Instant::now();
    // SAFETY: the region's pages.
    let checksum = unsafe { touch(region.as_ptr().cast(), data.len() / 4096, touches, seed) };
    let wall_s = started.elapsed().as_secs_f64();
    let after = faults(&region);
    let st = region.finish()?;
    if std::env::var_os("CCVM_BENCH_DEBUG").is_some() {
        eprintln!("{st:#?}");
    }
    Ok(Run {
        wall_s,
        faults: after.0 - before.0,
        disk_faults: after.1 - before.1,
        checksum,
    })
}

/// What `bench faults-child` is given (see [`child`]).
#[derive(clap::Args)]
pub struct ChildArgs {
    /// Folder of page files.
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// Pages in the region.
    #[arg(long)]
    pub pages: usize,
    /// Share of the region in memory (the kernel's run).
    #[arg(long)]
    pub share: f64,
    /// Touches.
    #[arg(long)]
    pub touches: usize,
    /// Seed of the touches.
    #[arg(long)]
    pub seed: u64,
    /// The kernel's run: the cgroup's folder.
    #[arg(long)]
    pub cgroup: Option<String>,
    /// ccvm's run: its RAM budget, bytes.
    #[arg(long)]
    pub ram: Option<u64>,
    /// ccvm's run: its policy.
    #[arg(long)]
    pub policy: Option<String>,
    /// The floor's run: `--share` of the pages resident, served by trap
    /// and moves alone.
    #[arg(long)]
    pub floor: bool,
}

/// One system's run, in a child process of its own: with `ram`, ccvm's
/// (see [`ccvm`]); otherwise the kernel's, in `cgroup` (the parent put the
/// child there), limited at `share` of the region beyond what the child
/// holds besides.
pub fn child(args: &ChildArgs) -> anyhow::Result<()> {
    let ChildArgs {
        corpus,
        pages,
        share,
        touches,
        seed,
        cgroup,
        ram,
        policy,
        floor,
    } = args;
    let (pages, share, touches, seed) = (*pages, *share, *touches, *seed);
    let data = contents(corpus, pages)?;
    if *floor {
        let run = floor::run(&data, (pages as f64 * share) as usize, touches, seed)?;
        outln!("{}", serde_json::to_string(&run)?)?;
        return Ok(());
    }
    if let Some(ram) = *ram {
        let run = ccvm(&data, ram, policy.as_deref(), touches, seed)?;
        outln!("{}", serde_json::to_string(&run)?)?;
        return Ok(());
    }
    let Some(cgroup) = cgroup else {
        bail!("the kernel's child needs --cgroup");
    };
    let dir = PathBuf::from(cgroup);
    let len = data.len();
    // Page-aligned, as the touches address whole pages.
    let mut region = ccvm_runtime::aligned::AlignedBuf::new(len);
    region.copy_from_slice(&data);
    drop(data);
    // What the process holds and cannot drop for free, the region aside:
    // its anonymous memory and its mapped files (the page cache it read
    // the corpus through is not counted, or the limit would be met by
    // dropping it). Setting the limit below the usage swaps the excess out.
    let stat = std::fs::read_to_string(dir.join("memory.stat"))?;
    let field = |name: &str| -> u64 {
        stat.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok()))
            .unwrap_or(0)
    };
    let held = (field("rss ") + field("mapped_file ")).saturating_sub(len as u64);
    let limit = held + (len as f64 * share) as u64;
    std::fs::write(dir.join("memory.limit_in_bytes"), limit.to_string()).context("setting the cgroup's limit")?;
    let before = major_faults();
    let started = Instant::now();
    // SAFETY: the buffer's `len` bytes.
    let checksum = unsafe { touch(region.as_mut_ptr().cast(), len / 4096, touches, seed) };
    let run = Run {
        wall_s: started.elapsed().as_secs_f64(),
        faults: major_faults() - before,
        disk_faults: 0,
        checksum,
    };
    outln!("{}", serde_json::to_string(&run)?)?;
    Ok(())
}

fn child_command(opts: &Options, seed: u64) -> anyhow::Result<Command> {
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["bench", "faults-child", "--pages"])
        .arg(opts.pages.to_string())
        .arg("--share")
        .arg(opts.share.to_string())
        .arg("--touches")
        .arg(opts.touches.to_string())
        .arg("--seed")
        .arg(seed.to_string());
    if let Some(c) = &opts.corpus {
        cmd.arg("--corpus").arg(c);
    }
    Ok(cmd)
}

/// ccvm's run with `ram` bytes of RAM, in a child process of its own.
fn ccvm_in_child(opts: &Options, seed: u64, ram: u64) -> anyhow::Result<Run> {
    let mut cmd = child_command(opts, seed)?;
    cmd.arg("--ram").arg(ram.to_string());
    if let Some(p) = &opts.policy {
        cmd.arg("--policy").arg(p);
    }
    let r = ccvm_kernelswap::run_measured(cmd, None, || 0)?;
    if !r.status.success() {
        bail!("ccvm's run failed ({})", r.status);
    }
    serde_json::from_slice(&r.out).context("reading ccvm's child's report")
}

/// The floor's run, in a child process of its own.
fn floor_in_child(opts: &Options, seed: u64) -> anyhow::Result<Run> {
    let mut cmd = child_command(opts, seed)?;
    cmd.arg("--floor");
    let r = ccvm_kernelswap::run_measured(cmd, None, || 0)?;
    if !r.status.success() {
        bail!("the floor's run failed ({})", r.status);
    }
    serde_json::from_slice(&r.out).context("reading the floor's child's report")
}

/// The kernel's run, with zram's pool at its peak, bytes.
fn kernel(opts: &Options, seed: u64) -> anyhow::Result<(Run, u64)> {
    let cgroup = Cgroup::new(None)?;
    let dir = cgroup
        .procs()
        .parent()
        .expect("a cgroup file is in its folder")
        .to_path_buf();
    let mut cmd = child_command(opts, seed)?;
    cmd.arg("--cgroup").arg(&dir);
    let r = ccvm_kernelswap::run_measured(cmd, Some(&cgroup), || Zram::memory().0)?;
    if !r.status.success() {
        bail!(
            "the kernel's run failed ({}); is the share too small for the child?",
            r.status
        );
    }
    let run = serde_json::from_slice(&r.out).context("reading the kernel child's report")?;
    Ok((run, r.probed))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs the measurement and prints the table.
///
/// # Errors
///
/// A machine that cannot set up zram and a cgroup (see `bench kernel`), a
/// bad corpus, a run that failed, or checksums that differ.
pub fn run(opts: &Options, format: Format) -> anyhow::Result<()> {
    if !(0.05..=0.95).contains(&opts.share) {
        bail!("--share {} is not between 0.05 and 0.95", opts.share);
    }
    setup::check_machine()?;
    if !setup::zram_available() {
        bail!("this machine has no zram device (modprobe zram)");
    }
    let data = contents(&opts.corpus, opts.pages)?;
    let _zram = Zram::new(&opts.algorithm, 2 * data.len() as u64)?;
    let runs = rounds(opts, &data)?;
    let ccvm_name = match &opts.policy {
        Some(p) => format!("ccvm --policy {p}"),
        None => "ccvm".to_string(),
    };
    let names = [
        "plain memory",
        &format!("kernel zram-{}", opts.algorithm),
        &ccvm_name,
        "trap and moves only",
    ];
    let rows: Vec<Row> = runs
        .iter()
        .zip(names)
        .map(|(rs, name)| Row {
            system: name.to_string(),
            wall_s: median(rs.iter().map(|r| r.wall_s).collect()),
            faults: median(rs.iter().map(|r| r.faults as f64).collect()) as u64,
            us_per_fault: median(
                rs.iter()
                    .zip(&runs[0])
                    .map(|(r, p)| (r.wall_s - p.wall_s) * 1e6 / r.faults.max(1) as f64)
                    .collect(),
            ),
        })
        .collect();
    print_rows(opts, &rows, format)
}

/// The subcommand's arguments.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Folder of page files the region is filled with (repeated as needed). Default: the bundled corpus.
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// Pages in the region.
    #[arg(long, default_value_t = 16384)]
    pages: usize,
    /// Share of the region in memory uncompressed: the kernel's cgroup limit (beyond what its process held
    /// before) and ccvm's RAM budget.
    #[arg(long, default_value_t = 0.5)]
    share: f64,
    /// Random touches per run.
    #[arg(long, default_value_t = 200_000)]
    touches: usize,
    /// Runs of each system; the table gives medians.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// zram's compression algorithm.
    #[arg(long, default_value = "lz4")]
    algorithm: String,
    /// ccvm's policy (as `ccvm run --policy`). Default: ccvm's default.
    #[arg(long, value_parser = ccvm_policy::parse_name)]
    policy: Option<String>,
    #[command(flatten)]
    output: crate::args::OutputArgs,
}

/// Runs the subcommand with the arguments the command line gave.
pub(crate) fn run_args(args: Args) -> anyhow::Result<()> {
    let opts = Options {
        corpus: args.corpus,
        pages: args.pages,
        share: args.share,
        touches: args.touches,
        rounds: args.rounds.max(1),
        algorithm: args.algorithm,
        policy: args.policy,
    };
    run(&opts, args.output.format())
}

/// Runs every round: plain memory, the kernel, ccvm given the kernel's
/// memory, and the trap-and-moves floor, each checked against plain
/// memory's checksum.
fn rounds(opts: &Options, data: &[u8]) -> anyhow::Result<[Vec<Run>; 4]> {
    let mut runs: [Vec<Run>; 4] = Default::default();
    for round in 0..opts.rounds {
        let seed = 0x9e37_79b9 + round as u64;
        let p = plain(data, opts.touches, seed);
        let (k, pool) = kernel(opts, seed)?;
        // The kernel's memory for the region: its share in the cgroup and
        // zram's pool, which no cgroup is charged for.
        let ram = (data.len() as f64 * opts.share) as u64 + pool;
        let c = ccvm_in_child(opts, seed, ram)?;
        let f = floor_in_child(opts, seed)?;
        if k.checksum != p.checksum || c.checksum != p.checksum || f.checksum != p.checksum {
            bail!(
                "round {round}: checksums differ (plain {:#x}, kernel {:#x}, ccvm {:#x}, trap and moves {:#x}): a page \
                 came back wrong",
                p.checksum,
                k.checksum,
                c.checksum,
                f.checksum
            );
        }
        eprintln!(
            "round {round}: plain {:.3} s, kernel {:.3} s ({} faults, zram's pool {:.1} MiB), ccvm with {:.1} MiB {:.3} s \
             ({} faults, {} from its swap file)",
            p.wall_s,
            k.wall_s,
            k.faults,
            pool as f64 / 1048576.0,
            ram as f64 / 1048576.0,
            c.wall_s,
            c.faults,
            c.disk_faults
        );
        eprintln!(
            "round {round}: trap and moves only {:.3} s ({} faults)",
            f.wall_s, f.faults
        );
        for (i, r) in [p, k, c, f].into_iter().enumerate() {
            runs[i].push(r);
        }
    }
    Ok(runs)
}

/// Prints the table's rows as `format` says.
fn print_rows(opts: &Options, rows: &[Row], format: Format) -> anyhow::Result<()> {
    match format {
        Format::Json => outln!("{}", serde_json::to_string_pretty(rows)?)?,
        Format::Csv => {
            outln!("system,wall_s,faults,us_per_fault")?;
            for r in rows {
                outln!("{},{},{},{}", r.system, r.wall_s, r.faults, r.us_per_fault)?;
            }
        }
        Format::Table => {
            outln!(
                "{} pages of real memory, {:.0}% of them in memory uncompressed, {} random touches (read and write \
                 one word), medians of {} rounds",
                opts.pages,
                opts.share * 100.0,
                opts.touches,
                opts.rounds
            )?;
            outln!(
                "{:<20} {:>9} {:>10} {:>12}",
                "system",
                "wall s",
                "faults",
                "µs per fault"
            )?;
            for r in rows {
                outln!(
                    "{:<20} {:>9.3} {:>10} {:>12.2}",
                    r.system,
                    r.wall_s,
                    r.faults,
                    r.us_per_fault
                )?;
            }
        }
    }
    Ok(())
}

//! `ccvm bench kernel`: a built-in workload, or an unmodified program,
//! under the kernel's own compressed swap (a memory cgroup limit with zram
//! or zswap behind it) against ccvm with the same total memory.
//!
//! Each run is a child process, so each starts with a cold heap and its
//! own counters: the kernel's runs are `ccvm bench plain-child` (the
//! workload in a plain `Vec`), or the program itself, placed in the cgroup
//! before it starts, and ccvm's are `ccvm run --json`, or `ccvm exec`. A
//! program's "checksum" is a hash of its standard output. "Same total memory" is the cgroup limit
//! plus the most memory zram held during the run (its `mem_used_max`),
//! since zram's pool is not charged to the cgroup.

pub(crate) mod setup;

use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use crate::args::Format;
use crate::report::{self, Row};

pub use setup::{check_machine, zram_available};
use setup::{Cgroup, Zram, Zswap};

/// What a case runs.
#[derive(Debug, Clone)]
pub enum Job {
    /// A built-in workload over `size` bytes.
    Workload {
        /// Workload name.
        name: String,
        /// Its memory, bytes.
        size: u64,
    },
    /// An unmodified program (paged by `ccvm exec`).
    Program {
        /// What the table calls it.
        label: String,
        /// The program and its arguments.
        command: Vec<String>,
    },
}

/// One job under a range of cgroup limits.
#[derive(Debug, Clone)]
pub struct Case {
    /// What runs.
    pub job: Job,
    /// The cgroup memory limits the kernel runs under, bytes, ascending.
    pub limits: Vec<u64>,
}

/// Parses a comma-separated list of limits, e.g. `96M,128M,160M`.
fn parse_limits(s: &str) -> Result<Vec<u64>, String> {
    let mut limits = s
        .split(',')
        .map(crate::args::parse_bytes)
        .collect::<Result<Vec<u64>, String>>()?;
    limits.sort_unstable();
    limits.dedup();
    if limits.first().is_none_or(|&l| l < 4 << 20) {
        return Err(format!("'{s}': every limit must be at least 4M"));
    }
    Ok(limits)
}

impl Case {
    /// The case's name in the table.
    pub fn label(&self) -> String {
        match &self.job {
            Job::Workload { name, size } => format!("{name} {}M", size >> 20),
            Job::Program { label, .. } => label.clone(),
        }
    }
}

/// Parses `NAME:SIZE:LIMIT[,LIMIT...]`, e.g. `graph:256M:96M,128M,160M`.
pub fn parse_case(s: &str) -> Result<Case, String> {
    let parts: Vec<&str> = s.split(':').collect();
    let [workload, size, limits] = parts[..] else {
        return Err(format!(
            "'{s}' is not a case; write NAME:SIZE:LIMIT[,LIMIT...], e.g. graph:256M:96M,128M"
        ));
    };
    ccvm_workload::by_name(workload)?;
    let size = crate::args::parse_bytes(size)?;
    let limits = parse_limits(limits)?;
    if limits.iter().any(|&l| l >= size) {
        return Err(format!(
            "in '{s}' a limit is not below the size: nothing would be swapped"
        ));
    }
    Ok(Case {
        job: Job::Workload {
            name: workload.into(),
            size,
        },
        limits,
    })
}

/// Parses `LABEL:LIMIT[,LIMIT...]:PROGRAM ARGS...` (arguments split at
/// white space), e.g. `python:100M,150M:/usr/bin/python3 dicts.py`.
pub fn parse_program(s: &str) -> Result<Case, String> {
    let mut parts = s.splitn(3, ':');
    let (Some(label), Some(limit), Some(command)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(format!(
            "'{s}' is not a program case; write LABEL:LIMIT:PROGRAM ARGS..., e.g. python:150M:/usr/bin/python3 dicts.py"
        ));
    };
    let command: Vec<String> = command.split_whitespace().map(String::from).collect();
    if label.is_empty() || command.is_empty() {
        return Err(format!("'{s}' names no program; write LABEL:LIMIT:PROGRAM ARGS..."));
    }
    Ok(Case {
        job: Job::Program {
            label: label.into(),
            command,
        },
        limits: parse_limits(limit)?,
    })
}

/// What one child run reports.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlainRun {
    /// The workload's checksum.
    pub checksum: u64,
    /// Its wall time, seconds.
    pub wall_s: f64,
    /// Major page faults (swap-ins) of the process.
    pub major_faults: u64,
    /// Its largest resident set, bytes (programs; 0 from a workload child).
    #[serde(default)]
    pub max_rss_bytes: u64,
}

/// `ccvm bench plain-child`: runs the workload in plain memory and prints
/// a [`PlainRun`] as JSON.
pub fn plain_child(workload: &str, size: u64, seed: u64) -> anyhow::Result<()> {
    let w = ccvm_workload::by_name(workload).map_err(anyhow::Error::msg)?;
    let (checksum, wall) = w.run_plain(size, seed);
    // SAFETY: getrusage with a valid out-pointer.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let run = PlainRun {
        checksum,
        wall_s: wall.as_secs_f64(),
        major_faults: usage.ru_majflt as u64,
        max_rss_bytes: 0,
    };
    outln!("{}", serde_json::to_string(&run)?)?;
    Ok(())
}

/// A row of the table: one system at one setting, medians of the runs.
#[derive(Debug, Clone, Serialize)]
pub struct KernelRow {
    /// `workload size`.
    pub case: String,
    /// What ran: plain memory, kernel zram-lz4, ccvm, …
    pub system: String,
    /// The setting, MiB: the kernel's cgroup limit, or ccvm's `--ram`.
    pub setting_mib: f64,
    /// Memory it held as the kernel counts it, MiB: the cgroup's peak
    /// charge (`memory.max_usage_in_bytes`) of every process of the run,
    /// plus zram's pool at its peak (`mem_used_max`), which no cgroup is
    /// charged for. ccvm's runs are metered in a cgroup without a limit.
    pub memory_mib: f64,
    /// Median wall time of the runs, seconds.
    pub wall_s: f64,
    /// Wall time over plain memory's.
    pub slowdown: f64,
    /// Wall time less plain memory's, seconds: the time paging cost.
    pub paging_s: f64,
    /// Faults that brought a page back (major faults; ccvm: cache + disk).
    pub faults: u64,
    /// Every run's checksum equals plain memory's.
    pub checksum_ok: bool,
    /// Runs whose median is shown.
    pub runs: usize,
    /// Attempts the cgroup's OOM killer ended (reported; each was tried
    /// again, up to [`KERNEL_ATTEMPTS`] per run wanted).
    pub oom_kills: usize,
}

impl Row for KernelRow {
    fn headers() -> &'static [&'static str] {
        &[
            "case",
            "system",
            "setting MiB",
            "memory MiB",
            "wall s",
            "slowdown",
            "paging s",
            "faults",
            "checksum",
            "runs",
            "OOM kills",
        ]
    }
    fn cells(&self) -> Vec<String> {
        let mut c = vec![
            self.case.clone(),
            self.system.clone(),
            format!("{:.0}", self.setting_mib),
        ];
        if self.runs == 0 {
            c.extend(["-", "-", "-", "-", "-", "-"].map(String::from));
        } else {
            c.extend([
                format!("{:.1}", self.memory_mib),
                format!("{:.2}", self.wall_s),
                format!("{:.2}x", self.slowdown),
                format!("{:.2}", self.paging_s),
                self.faults.to_string(),
                if self.checksum_ok { "ok" } else { "DIFFERS" }.into(),
            ]);
        }
        c.extend([self.runs.to_string(), self.oom_kills.to_string()]);
        c
    }
}

/// What `ccvm bench kernel` runs.
pub struct Plan {
    /// The cases, each with its range of cgroup limits.
    pub cases: Vec<Case>,
    /// The kernel setups: zram-ALGORITHM or zswap-ALGORITHM.
    pub kernels: Vec<String>,
    /// Runs per row (the median is shown).
    pub runs: usize,
    /// Folder of zswap's swap file.
    pub swap_dir: PathBuf,
    /// Extra `ccvm run`/`ccvm exec` flags (e.g. `--policy adaptive`).
    pub ccvm_args: Vec<String>,
    /// ccvm's `--ram` settings; empty: each cgroup limit, and each total the
    /// first zram setup was measured to hold less what ccvm held beyond
    /// `--ram` at the limits.
    pub ccvm_rams: Vec<u64>,
    /// Draw wall time against memory, a line per system, in this folder.
    pub figures: Option<PathBuf>,
}

/// The demo's case: small enough to keep the demo near a minute, with
/// limits at which both systems page.
pub fn demo_case() -> Case {
    parse_case("graph:128M:72M,96M").expect("a valid case")
}

/// The completed runs of one row.
struct Measured {
    walls: Vec<f64>,
    faults: Vec<f64>,
    memory: Vec<f64>,
    ok: bool,
}

impl Measured {
    fn new() -> Measured {
        Measured {
            walls: Vec::new(),
            faults: Vec::new(),
            memory: Vec::new(),
            ok: true,
        }
    }

    /// The row: medians of the runs, slowdown against `plain_s`.
    fn row(self, case: &str, system: String, setting: u64, plain_s: f64, oom_kills: usize) -> KernelRow {
        let runs = self.walls.len();
        let (wall_s, memory) = if runs == 0 {
            (f64::NAN, f64::NAN)
        } else {
            (median(self.walls), median(self.memory))
        };
        KernelRow {
            case: case.to_string(),
            system,
            setting_mib: mib(setting),
            memory_mib: mib(memory as u64),
            wall_s,
            slowdown: wall_s / plain_s,
            paging_s: (wall_s - plain_s).max(0.0),
            faults: if runs == 0 { 0 } else { median(self.faults) as u64 },
            checksum_ok: self.ok && runs > 0,
            runs,
            oom_kills,
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

/// A hash of a program's output, its checksum here.
fn output_hash(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// Attempts per kernel run wanted before the row is given up as killed.
const KERNEL_ATTEMPTS: usize = 3;

/// Makes `cmd`'s process join `cgroup` before it runs, with transparent
/// huge pages off (4 KiB pages, as ccvm's regions use: with huge pages the
/// kernel swaps 2 MiB folios, and its cgroup OOM killer ended runs while
/// charging their swap-ins).
fn in_cgroup(cmd: &mut Command, cgroup: Option<&Cgroup>) -> anyhow::Result<()> {
    let procs = match cgroup {
        Some(cg) => Some(std::ffi::CString::new(cg.procs().to_string_lossy().into_owned())?),
        None => None,
    };
    // SAFETY: the hook runs in the child between fork and exec and makes
    // only async-signal-safe calls (prctl, open, write, close).
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(cmd, move || {
            libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
            if let Some(procs) = &procs {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // "0" names the writing process itself.
                let ok = libc::write(fd, b"0\n".as_ptr().cast(), 2) == 2;
                libc::close(fd);
                if !ok {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        })
    };
    Ok(())
}

/// What a child run gave: its standard output, status, usage and wall time.
pub(crate) struct ChildRun {
    pub(crate) out: Vec<u8>,
    pub(crate) status: std::process::ExitStatus,
    usage: libc::rusage,
    wall: std::time::Duration,
    /// The peak of what `probe` sampled (compressed swap's pool).
    pub(crate) probed: u64,
}

/// Runs `cmd` to its end, sampling `probe` every 10 ms and, if `cgroup`
/// is given, flushing its statistics every 20 ms (the work-around in
/// `docs/kernel.md`).
pub(crate) fn run_child(mut cmd: Command, cgroup: Option<&Cgroup>, probe: fn() -> u64) -> anyhow::Result<ChildRun> {
    cmd.stdout(Stdio::piped());
    in_cgroup(&mut cmd, cgroup)?;
    let started = std::time::Instant::now();
    let mut child = cmd.spawn().context("starting the child")?;
    let pid = child.id() as libc::pid_t;
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let done = std::sync::atomic::AtomicBool::new(false);
    let (out, status, usage, wall, probed) = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut peak = 0;
            let mut tick = 0u64;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(probe());
                if tick.is_multiple_of(2) {
                    if let Some(cg) = cgroup {
                        cg.flush_stats();
                    }
                }
                tick += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            peak
        });
        let reader = s.spawn(move || {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut stdout, &mut bytes).map(|_| bytes)
        });
        let mut status = 0;
        // SAFETY: an all-zero rusage is valid; wait4 fills it.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: waiting for our own child, with valid out-pointers; it
        // is reaped here, not by `child`.
        let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        let wall = started.elapsed();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let out = reader.join().expect("the reader does not panic");
        let peak = sampler.join().expect("the sampler does not panic");
        (out, (waited == pid).then_some(status), usage, wall, peak)
    });
    drop(child);
    let out = out.context("reading the child's output")?;
    let status = std::os::unix::process::ExitStatusExt::from_raw(status.context("waiting for the child")?);
    Ok(ChildRun {
        out,
        status,
        usage,
        wall,
        probed,
    })
}

/// Runs the case's job unpaged, in `cgroup` if given: (its report, the
/// memory it held as measured: the cgroup's peak plus `probe`'s).
fn plain_in(case: &Case, cgroup: Option<&Cgroup>, probe: fn() -> u64) -> anyhow::Result<(PlainRun, u64)> {
    let cmd = match &case.job {
        Job::Workload { name, size } => {
            let mut cmd = Command::new(std::env::current_exe()?);
            cmd.args(["bench", "plain-child", "--workload", name, "--size"])
                .arg(size.to_string());
            cmd
        }
        Job::Program { command, .. } => {
            let mut cmd = Command::new(&command[0]);
            cmd.args(&command[1..]).stderr(Stdio::null());
            cmd
        }
    };
    let r = run_child(cmd, cgroup, probe)?;
    if std::os::unix::process::ExitStatusExt::signal(&r.status) == Some(libc::SIGKILL) && cgroup.is_some() {
        bail!("killed by the cgroup's OOM killer");
    }
    if !r.status.success() {
        bail!("the child failed ({})", r.status);
    }
    let run = match &case.job {
        Job::Workload { .. } => serde_json::from_slice(&r.out).context("reading the child's report")?,
        Job::Program { .. } => PlainRun {
            checksum: output_hash(&r.out),
            wall_s: r.wall.as_secs_f64(),
            major_faults: r.usage.ru_majflt as u64,
            max_rss_bytes: r.usage.ru_maxrss as u64 * 1024,
        },
    };
    let held = cgroup.map_or(run.max_rss_bytes, Cgroup::peak_bytes) + r.probed;
    Ok((run, held))
}

/// One run of ccvm's.
struct CcvmRun {
    wall_s: f64,
    faults: u64,
    ok: bool,
    /// The peak charge of ccvm's whole process tree, measured by a cgroup
    /// without a limit.
    memory: u64,
}

/// The case under ccvm in a child (`ccvm run --json`, or `ccvm exec` for a
/// program), metered in a cgroup without a limit.
fn ccvm_run(case: &Case, ram: u64, extra: &[String], want: u64) -> anyhow::Result<CcvmRun> {
    let exe = std::env::current_exe()?;
    let num = |v: &serde_json::Value, p: &str| v.pointer(p).and_then(serde_json::Value::as_f64).unwrap_or(0.0);
    let meter = Cgroup::new(None)?;
    match &case.job {
        Job::Workload { name, size } => {
            let mut cmd = Command::new(exe);
            // The checksum is known: the paged run alone is metered.
            cmd.args(["run", "--json", "--workload", name, "--size"])
                .arg(size.to_string())
                .arg("--ram")
                .arg(ram.to_string())
                .arg(format!("--reference={want:x}"))
                .args(extra)
                .stderr(Stdio::piped());
            let r = run_child(cmd, Some(&meter), || 0)?;
            if !r.status.success() {
                bail!("ccvm run failed ({})", r.status);
            }
            let v: serde_json::Value = serde_json::from_slice(&r.out).context("reading ccvm run's report")?;
            Ok(CcvmRun {
                wall_s: num(&v, "/wall_s"),
                faults: (num(&v, "/stats/faults_cache") + num(&v, "/stats/faults_disk")) as u64,
                ok: v.pointer("/checksum_ok").and_then(serde_json::Value::as_bool) == Some(true),
                memory: meter.peak_bytes(),
            })
        }
        Job::Program { command, .. } => {
            let report = tempfile::NamedTempFile::new().context("a file for ccvm exec's report")?;
            let mut cmd = Command::new(exe);
            cmd.args(["exec", "--ram"])
                .arg(ram.to_string())
                .arg("--report")
                .arg(report.path())
                .args(extra)
                .arg("--")
                .args(command)
                .stderr(Stdio::null());
            let r = run_child(cmd, Some(&meter), || 0)?;
            if !r.status.success() {
                bail!("ccvm exec {} failed ({})", command.join(" "), r.status);
            }
            let v: serde_json::Value =
                serde_json::from_slice(&std::fs::read(report.path())?).context("reading ccvm exec's report")?;
            let faults = v["processes"].as_array().map_or(0.0, |ps| {
                ps.iter()
                    .map(|p| num(p, "/stats/faults_cache") + num(p, "/stats/faults_disk"))
                    .sum()
            });
            Ok(CcvmRun {
                wall_s: num(&v, "/wall_s"),
                faults: faults as u64,
                ok: output_hash(&r.out) == want,
                memory: meter.peak_bytes(),
            })
        }
    }
}

/// The kernel setups' configuration, as the table's readers need it.
fn kernel_config(plan: &Plan) -> String {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|v| v.trim().to_string())
            .unwrap_or("?".into())
    };
    format!(
        "kernel: {}; vm.swappiness {}, vm.page-cluster 0 under zram ({} otherwise); zram disksize twice the \
         footprint; zswap behind a swap file in {}, max_pool_percent {}; transparent huge pages off for every run",
        read("/proc/sys/kernel/osrelease"),
        read("/proc/sys/vm/swappiness"),
        read("/proc/sys/vm/page-cluster"),
        plan.swap_dir.display(),
        read("/sys/module/zswap/parameters/max_pool_percent"),
    )
}

/// Runs the plan and prints the table, then each case's comparison at
/// equal measured memory.
///
/// # Errors
///
/// Not root, swap already in use, no memory cgroup, a setup step or a
/// child that failed.
pub fn run(plan: &Plan, format: Format) -> anyhow::Result<()> {
    check_machine()?;
    let figures = plan.figures.as_ref().map(ccvm_output::OutputDir::create).transpose()?;
    eprintln!("{}", kernel_config(plan));
    let mut rows = Vec::new();
    for case in &plan.cases {
        let label = case.label();
        let first = rows.len();
        eprintln!("{label}: plain memory");
        let mut plain = Measured::new();
        let mut want = None;
        for _ in 0..plan.runs {
            let meter = Cgroup::new(None)?;
            let (run, held) = plain_in(case, Some(&meter), || 0)?;
            let want = *want.get_or_insert(run.checksum);
            plain.ok &= run.checksum == want;
            plain.walls.push(run.wall_s);
            plain.faults.push(0.0);
            plain.memory.push(held as f64);
        }
        let want = want.expect("at least one run");
        let plain_s = median(plain.walls.clone());
        let footprint = median(plain.memory.clone()) as u64;
        rows.push(plain.row(&label, "plain memory".into(), footprint, plain_s, 0));
        for kernel in &plan.kernels {
            for &limit in &case.limits {
                eprintln!("{label}: kernel {kernel}, limit {}M", limit >> 20);
                let mut m = Measured::new();
                let mut oom_kills = 0;
                for _attempt in 0..KERNEL_ATTEMPTS * plan.runs {
                    if m.walls.len() == plan.runs {
                        break;
                    }
                    let result = if let Some(alg) = kernel.strip_prefix("zram-") {
                        let _zram = Zram::new(alg, 2 * footprint)?;
                        let cg = Cgroup::new(Some(limit))?;
                        plain_in(case, Some(&cg), || 0).map(|(run, held)| (run, held + Zram::memory().1))
                    } else if let Some(alg) = kernel.strip_prefix("zswap-") {
                        let _zswap = Zswap::new(&plan.swap_dir, 2 * footprint, alg)?;
                        let cg = Cgroup::new(Some(limit))?;
                        let charged = cg.charges_zswap();
                        plain_in(case, Some(&cg), Zswap::pool_bytes).map(|(run, held)| {
                            // v2 charges the pool to the group: counted once.
                            (run, if charged { cg.peak_bytes() } else { held })
                        })
                    } else {
                        bail!("unknown kernel setup '{kernel}'; use zram-ALGORITHM or zswap-ALGORITHM");
                    };
                    match result {
                        Ok((run, held)) => {
                            m.ok &= run.checksum == want;
                            m.walls.push(run.wall_s);
                            m.faults.push(run.major_faults as f64);
                            m.memory.push(held as f64);
                        }
                        Err(e) => {
                            eprintln!("{label}: kernel {kernel} at {}M: {e:#}", limit >> 20);
                            oom_kills += 1;
                        }
                    }
                }
                rows.push(m.row(&label, format!("kernel {kernel}"), limit, plain_s, oom_kills));
            }
        }
        let run_ccvm = |ram: u64, rows: &mut Vec<KernelRow>| -> anyhow::Result<f64> {
            eprintln!("{label}: ccvm, --ram {:.0}M", mib(ram));
            let mut m = Measured::new();
            for _ in 0..plan.runs {
                let r = ccvm_run(case, ram, &plan.ccvm_args, want)?;
                m.walls.push(r.wall_s);
                m.faults.push(r.faults as f64);
                m.memory.push(r.memory as f64);
                m.ok &= r.ok;
            }
            let row = m.row(&label, "ccvm".into(), ram, plain_s, 0);
            let held = row.memory_mib;
            rows.push(row);
            Ok(held)
        };
        if !plan.ccvm_rams.is_empty() {
            let mut rams = plan.ccvm_rams.clone();
            rams.sort_unstable();
            rams.dedup();
            for ram in rams {
                run_ccvm(ram, &mut rows)?;
            }
        } else {
            // Each limit first; then each total the first zram setup held,
            // less what ccvm was measured to hold beyond its budget at the
            // limits (the program's own memory outside its heap, which no
            // budget covers, and what ccvm's own exceeds its charge by):
            // ccvm given what the kernel took, as a user comparing them
            // would.
            let mut done: Vec<u64> = Vec::new();
            let mut beyond = 0.0f64;
            for &ram in &case.limits {
                let held = run_ccvm(ram, &mut rows)?;
                beyond = beyond.max(held - mib(ram));
                done.push(ram);
            }
            let first_zram = plan.kernels.iter().find(|k| k.starts_with("zram-"));
            let mut totals: Vec<u64> = rows[first..]
                .iter()
                .filter(|r| r.runs > 0 && first_zram.is_some_and(|k| r.system == format!("kernel {k}")))
                .map(|r| ((r.memory_mib - beyond.max(0.0)).floor().max(1.0) as u64) << 20)
                .filter(|ram| !done.contains(ram))
                .collect();
            totals.sort_unstable();
            totals.dedup();
            for ram in totals {
                run_ccvm(ram, &mut rows)?;
            }
        }
        if let Some(dir) = &figures {
            figure(dir.path(), &label, &rows[first..], plain_s)?;
        }
    }
    report::print(&rows, format)?;
    if format == Format::Table {
        print_comparison(&rows)?;
    }
    if let Some(dir) = figures {
        eprintln!("figures in {}", dir.path().display());
        dir.keep();
    }
    Ok(())
}

/// The best wall time `system` reached in `rows` with at most `memory` MiB
/// measured: the lower envelope of its (memory, time) points.
fn envelope<'a>(rows: &'a [KernelRow], system: &str, memory: f64) -> Option<&'a KernelRow> {
    rows.iter()
        .filter(|r| r.system == system && r.runs > 0 && r.memory_mib <= memory)
        .min_by(|a, b| a.wall_s.total_cmp(&b.wall_s))
}

/// For each kernel point that paged, ccvm's best time within the same
/// measured memory, and the ratio of their paging times.
fn print_comparison(rows: &[KernelRow]) -> anyhow::Result<()> {
    outln!("\nAt equal measured memory (ccvm's best run holding no more than the kernel did):")?;
    for k in rows
        .iter()
        .filter(|r| r.system.starts_with("kernel") && r.runs > 0 && r.faults > 0)
    {
        let same_case: Vec<KernelRow> = rows.iter().filter(|r| r.case == k.case).cloned().collect();
        match envelope(&same_case, "ccvm", k.memory_mib) {
            Some(c) => outln!(
                "{}: {} at {:.0}M held {:.1} MiB, paging {:.2} s; ccvm --ram {:.0}M held {:.1} MiB, paging {:.2} s: \
                 {:.2}x the kernel's paging time",
                k.case,
                k.system,
                k.setting_mib,
                k.memory_mib,
                k.paging_s,
                c.setting_mib,
                c.memory_mib,
                c.paging_s,
                c.paging_s / k.paging_s.max(1e-9)
            )?,
            None => outln!(
                "{}: {} at {:.0}M held {:.1} MiB, paging {:.2} s; no ccvm run held that little",
                k.case,
                k.system,
                k.setting_mib,
                k.memory_mib,
                k.paging_s
            )?,
        }
    }
    Ok(())
}

/// Wall time against measured memory, a line per system, plain memory's
/// time as a floor.
fn figure(dir: &std::path::Path, label: &str, rows: &[KernelRow], plain_s: f64) -> anyhow::Result<()> {
    let mut systems: Vec<&str> = rows
        .iter()
        .filter(|r| r.system != "plain memory")
        .map(|r| r.system.as_str())
        .collect();
    systems.dedup();
    let mut series: Vec<(String, Vec<(f64, f64)>)> = systems
        .iter()
        .map(|&sys| {
            let mut pts: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.system == sys && r.runs > 0)
                .map(|r| (r.memory_mib, r.wall_s))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            (sys.to_string(), pts)
        })
        .collect();
    let xs: Vec<f64> = series.iter().flat_map(|(_, p)| p.iter().map(|&(x, _)| x)).collect();
    let (lo, hi) = xs.iter().fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    if lo <= hi {
        series.push(("plain memory".into(), vec![(lo, plain_s), (hi, plain_s)]));
    }
    let f = crate::figures::Figure {
        title: format!("{label}: wall time against memory held"),
        x_label: "memory held, MiB (cgroup peak + compressed pool)",
        y_label: "wall time, s",
        log_y: true,
        series,
        shade: None,
    };
    let stem = format!("kernel_{}", label.replace([' ', '/'], "_"));
    crate::figures::save(dir, &stem, &f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_parse_and_bad_ones_say_why() {
        let c = parse_case("graph:256M:128M").unwrap();
        assert!(matches!(&c.job, Job::Workload { name, size } if name == "graph" && *size == 256 << 20));
        assert_eq!(
            (c.limits.clone(), c.label()),
            (vec![128 << 20], "graph 256M".to_string())
        );
        let range = parse_case("graph:256M:160M,96M,128M").unwrap();
        assert_eq!(range.limits, [96 << 20, 128 << 20, 160 << 20]);
        assert!(parse_case("graph:256M:96M,1K").unwrap_err().contains("at least 4M"));
        assert!(parse_case("graph:256M").unwrap_err().contains("NAME:SIZE:LIMIT"));
        assert!(parse_case("nosuch:256M:128M").unwrap_err().contains("unknown workload"));
        assert!(parse_case("graph:128M:256M")
            .unwrap_err()
            .contains("not below the size"));
        let p = parse_program("python:150M:/usr/bin/python3 dicts.py -v").unwrap();
        assert!(matches!(&p.job, Job::Program { command, .. } if command == &["/usr/bin/python3", "dicts.py", "-v"]));
        assert_eq!((p.limits.clone(), p.label()), (vec![150 << 20], "python".to_string()));
        assert!(parse_program("python:150M")
            .unwrap_err()
            .contains("LABEL:LIMIT:PROGRAM"));
        assert!(parse_program("python:150M:  ")
            .unwrap_err()
            .contains("names no program"));
    }

    #[test]
    fn medians_and_rows() {
        let m = Measured {
            walls: vec![3.0, 1.0, 2.0],
            faults: vec![10.0, 30.0, 20.0],
            memory: vec![70e6, 71e6, 69e6],
            ok: true,
        };
        let r = m.row("graph 256M", "ccvm".into(), 64 << 20, 0.5, 1);
        assert_eq!(
            (r.wall_s, r.slowdown, r.paging_s, r.faults, r.runs, r.oom_kills),
            (2.0, 4.0, 1.5, 20, 3, 1)
        );
        assert_eq!(r.setting_mib, 64.0);
        assert_eq!(r.memory_mib, mib(70_000_000));
        let none = Measured::new().row("graph 256M", "kernel zram-lz4".into(), 64 << 20, 0.5, 3);
        assert!(!none.checksum_ok && none.runs == 0 && none.cells().contains(&"-".to_string()));
    }

    #[test]
    fn equal_memory_takes_the_best_run_that_held_no_more() {
        let row = |system: &str, memory_mib: f64, wall_s: f64| KernelRow {
            case: "c".into(),
            system: system.into(),
            setting_mib: 0.0,
            memory_mib,
            wall_s,
            slowdown: 1.0,
            paging_s: wall_s - 1.0,
            faults: 1,
            checksum_ok: true,
            runs: 1,
            oom_kills: 0,
        };
        let rows = [
            row("ccvm", 100.0, 9.0),
            row("ccvm", 120.0, 3.0),
            row("ccvm", 150.0, 2.0),
        ];
        assert_eq!(envelope(&rows, "ccvm", 130.0).map(|r| r.wall_s), Some(3.0));
        assert_eq!(envelope(&rows, "ccvm", 110.0).map(|r| r.wall_s), Some(9.0));
        assert!(envelope(&rows, "ccvm", 90.0).is_none());
    }
}

/// The subcommand's arguments.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// A case NAME:SIZE:LIMIT[,LIMIT...] (repeatable): the workload, its memory and the cgroup memory limits the
    /// kernel runs under. (Default, when no --program is given either: graph:256M:128M,160M,192M and
    /// hashindex:256M:80M,104M,128M.)
    #[arg(long = "case", value_name = "CASE", value_parser = parse_case)]
    cases: Vec<Case>,
    /// An unmodified program LABEL:LIMIT[,LIMIT...]:PROGRAM ARGS... (repeatable; arguments split at white space),
    /// run directly under the kernel's swap and through `ccvm exec`; its standard output is its checksum.
    #[arg(long = "program", value_name = "PROGRAM", value_parser = parse_program)]
    programs: Vec<Case>,
    /// Kernel setups to compare (repeatable): zram-ALGORITHM (e.g. zram-lz4, zram-lzo-rle) or zswap-ALGORITHM
    /// (a swap file behind zswap).
    #[arg(long = "kernel", value_name = "SETUP", default_values = ["zram-lz4", "zram-lzo-rle", "zswap-lzo"])]
    kernels: Vec<String>,
    /// Runs per row, 1 to 100; the median is shown.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100))]
    runs: u64,
    /// Folder for zswap's swap file (on a real disk).
    #[arg(long, default_value = "/var/tmp")]
    swap_dir: PathBuf,
    /// Extra flags for ccvm's runs, e.g. --ccvm-arg=--policy --ccvm-arg=adaptive.
    #[arg(long = "ccvm-arg", value_name = "FLAG", allow_hyphen_values = true)]
    ccvm_args: Vec<String>,
    /// ccvm's RAM budgets (comma-separated). Default: each cgroup limit, and each total memory the first zram
    /// setup was measured to hold, less what ccvm was measured to hold beyond --ram at the limits.
    #[arg(long, value_delimiter = ',', value_parser = crate::args::parse_bytes)]
    ram: Vec<u64>,
    /// Draw each case's wall time against measured memory (SVG and PNG) in this folder.
    #[arg(long)]
    figures: Option<PathBuf>,
    #[command(flatten)]
    output: crate::args::OutputArgs,
}

/// Runs the subcommand with the arguments the command line gave.
pub(crate) fn run_args(args: Args) -> anyhow::Result<()> {
    for &ram in &args.ram {
        crate::args::check_budget("--ram", ram)?;
    }
    let mut cases = args.cases;
    cases.extend(args.programs);
    if cases.is_empty() {
        cases = ["graph:256M:128M,160M,192M", "hashindex:256M:80M,104M,128M"]
            .iter()
            .map(|c| parse_case(c).expect("valid default cases"))
            .collect();
    }
    let plan = Plan {
        cases,
        kernels: args.kernels,
        runs: args.runs as usize,
        swap_dir: args.swap_dir,
        ccvm_args: args.ccvm_args,
        ccvm_rams: args.ram,
        figures: args.figures,
    };
    run(&plan, args.output.format())
}

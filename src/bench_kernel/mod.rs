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

mod setup;

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

/// One job under one cgroup limit.
#[derive(Debug, Clone)]
pub struct Case {
    /// What runs.
    pub job: Job,
    /// The cgroup's memory limit, bytes.
    pub limit: u64,
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

/// Parses `NAME:SIZE:LIMIT`, e.g. `graph:256M:128M`.
pub fn parse_case(s: &str) -> Result<Case, String> {
    let parts: Vec<&str> = s.split(':').collect();
    let [workload, size, limit] = parts[..] else {
        return Err(format!(
            "'{s}' is not a case; write NAME:SIZE:LIMIT, e.g. graph:256M:128M"
        ));
    };
    ccvm_workload::by_name(workload)?;
    let size = crate::args::parse_bytes(size)?;
    let limit = crate::args::parse_bytes(limit)?;
    if limit >= size {
        return Err(format!(
            "in '{s}' the limit is not below the size: nothing would be swapped"
        ));
    }
    Ok(Case {
        job: Job::Workload {
            name: workload.into(),
            size,
        },
        limit,
    })
}

/// Parses `LABEL:LIMIT:PROGRAM ARGS...` (arguments split at white space),
/// e.g. `python:150M:/usr/bin/python3 dicts.py`.
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
        limit: crate::args::parse_bytes(limit)?,
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
    let (checksum, wall) = crate::live::plain(&w, size, seed);
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

/// A row of the table.
#[derive(Debug, Clone, Serialize)]
pub struct KernelRow {
    /// `workload size`.
    pub case: String,
    /// What ran: plain, kernel zram-lz4, ccvm, …
    pub system: String,
    /// Memory it held: the limit plus what compressed swap held at its peak.
    pub memory_mib: f64,
    /// Median wall time of the runs, seconds.
    pub wall_s: f64,
    /// Wall time over plain memory's.
    pub slowdown: f64,
    /// Faults that brought a page back (major faults; ccvm: cache + disk).
    pub faults: u64,
    /// Every run's checksum equals plain memory's.
    pub checksum_ok: bool,
    /// Runs whose median is shown.
    pub runs: usize,
    /// Attempts the cgroup's OOM killer ended (each was tried again).
    pub oom_kills: usize,
}

impl Row for KernelRow {
    fn headers() -> &'static [&'static str] {
        &[
            "case",
            "system",
            "memory MiB",
            "wall s",
            "slowdown",
            "faults",
            "checksum",
            "runs",
            "OOM kills",
        ]
    }
    fn cells(&self) -> Vec<String> {
        if self.runs == 0 {
            let mut c = vec![
                self.case.clone(),
                self.system.clone(),
                format!("{:.1}", self.memory_mib),
            ];
            c.extend(["-", "-", "-", "-"].map(String::from));
            c.extend([self.runs.to_string(), self.oom_kills.to_string()]);
            return c;
        }
        vec![
            self.case.clone(),
            self.system.clone(),
            format!("{:.1}", self.memory_mib),
            format!("{:.2}", self.wall_s),
            format!("{:.2}x", self.slowdown),
            self.faults.to_string(),
            if self.checksum_ok { "ok" } else { "DIFFERS" }.into(),
            self.runs.to_string(),
            self.oom_kills.to_string(),
        ]
    }
}

/// What `ccvm bench kernel` runs.
pub struct Plan {
    /// The cases.
    pub cases: Vec<Case>,
    /// The kernel setups: zram-ALGORITHM or zswap.
    pub kernels: Vec<String>,
    /// Runs per row (the median is shown).
    pub runs: usize,
    /// Folder of zswap's swap file.
    pub swap_dir: PathBuf,
    /// Extra `ccvm run` flags (e.g. `--policy adaptive`).
    pub ccvm_args: Vec<String>,
    /// Also run ccvm at the cgroup limit (less memory than the kernel).
    pub at_limit: bool,
}

/// The demo's case: small enough to keep the demo under a minute, large
/// enough that the kernel completes under its limit.
pub fn demo_case() -> Case {
    parse_case("graph:128M:80M").expect("a valid case")
}

/// The completed runs of one row.
struct Measured {
    walls: Vec<f64>,
    faults: Vec<f64>,
    ok: bool,
}

impl Measured {
    /// The row: medians of the runs, slowdown against `plain_s`.
    fn row(self, case: &str, system: String, memory: u64, plain_s: f64, oom_kills: usize) -> KernelRow {
        let runs = self.walls.len();
        let wall_s = median(self.walls);
        KernelRow {
            case: case.to_string(),
            system,
            memory_mib: mib(memory),
            wall_s,
            slowdown: wall_s / plain_s,
            faults: median(self.faults) as u64,
            checksum_ok: self.ok,
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

/// Runs the case's job in a child, in `cgroup` if given; samples `probe`
/// (memory held by compressed swap) every 10 ms and returns its peak.
/// Attempts per kernel run wanted before the row is given up as killed.
const KERNEL_ATTEMPTS: usize = 10;

fn plain_in(case: &Case, cgroup: Option<&Cgroup>, probe: fn() -> u64) -> anyhow::Result<(PlainRun, u64)> {
    let mut cmd = match &case.job {
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
    cmd.stdout(Stdio::piped());
    let procs = match cgroup {
        Some(cg) => Some(std::ffi::CString::new(cg.procs().to_string_lossy().into_owned())?),
        None => None,
    };
    // SAFETY: the hook runs in the child between fork and exec and makes
    // only async-signal-safe calls (prctl, open, write, close).
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
            // 4 KiB pages, as ccvm's regions use: with transparent huge
            // pages the kernel swaps 2 MiB folios, and its cgroup OOM
            // killer ended runs while charging their swap-ins.
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
    let started = std::time::Instant::now();
    let mut child = cmd.spawn().context("starting the child")?;
    let pid = child.id() as libc::pid_t;
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let done = std::sync::atomic::AtomicBool::new(false);
    let (out, status, usage, wall, peak) = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut peak = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(probe());
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
    let status: std::process::ExitStatus =
        std::os::unix::process::ExitStatusExt::from_raw(status.context("waiting for the child")?);
    if std::os::unix::process::ExitStatusExt::signal(&status) == Some(libc::SIGKILL) && cgroup.is_some() {
        bail!("killed by the cgroup's OOM killer");
    }
    if !status.success() {
        bail!("the child failed ({status})");
    }
    let run = match &case.job {
        Job::Workload { .. } => serde_json::from_slice(&out).context("reading the child's report")?,
        Job::Program { .. } => PlainRun {
            checksum: output_hash(&out),
            wall_s: wall.as_secs_f64(),
            major_faults: usage.ru_majflt as u64,
            max_rss_bytes: usage.ru_maxrss as u64 * 1024,
        },
    };
    Ok((run, peak))
}

/// The case under ccvm in a child (`ccvm run --json`, or `ccvm exec` for a
/// program): (wall s, cache + disk faults, checksum equals `want`).
fn ccvm_run(case: &Case, ram: u64, extra: &[String], want: u64) -> anyhow::Result<(f64, u64, bool)> {
    let exe = std::env::current_exe()?;
    let num = |v: &serde_json::Value, p: &str| v.pointer(p).and_then(serde_json::Value::as_f64).unwrap_or(0.0);
    match &case.job {
        Job::Workload { name, size } => {
            let out = Command::new(exe)
                .args(["run", "--json", "--workload", name, "--size"])
                .arg(size.to_string())
                .arg("--ram")
                .arg(ram.to_string())
                .args(extra)
                .output()
                .context("starting ccvm run")?;
            if !out.status.success() {
                bail!(
                    "ccvm run failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).context("reading ccvm run's report")?;
            Ok((
                num(&v, "/wall_s"),
                (num(&v, "/stats/faults_cache") + num(&v, "/stats/faults_disk")) as u64,
                v.pointer("/checksum_ok")
                    .and_then(serde_json::Value::as_bool)
                    .unwrap_or(false),
            ))
        }
        Job::Program { command, .. } => {
            let report = tempfile::NamedTempFile::new().context("a file for ccvm exec's report")?;
            let out = Command::new(exe)
                .args(["exec", "--ram"])
                .arg(ram.to_string())
                .arg("--report")
                .arg(report.path())
                .args(extra)
                .arg("--")
                .args(command)
                .stderr(Stdio::null())
                .output()
                .context("starting ccvm exec")?;
            if !out.status.success() {
                bail!("ccvm exec {} failed ({})", command.join(" "), out.status);
            }
            let v: serde_json::Value =
                serde_json::from_slice(&std::fs::read(report.path())?).context("reading ccvm exec's report")?;
            let faults = v["processes"].as_array().map_or(0.0, |ps| {
                ps.iter()
                    .map(|p| num(p, "/stats/faults_cache") + num(p, "/stats/faults_disk"))
                    .sum()
            });
            Ok((num(&v, "/wall_s"), faults as u64, output_hash(&out.stdout) == want))
        }
    }
}

/// Runs the plan and prints the table.
///
/// # Errors
///
/// Not root, swap already in use, no memory cgroup, a setup step or a
/// child that failed.
pub fn run(plan: &Plan, format: Format) -> anyhow::Result<()> {
    check_machine()?;
    let mut rows = Vec::new();
    for case in &plan.cases {
        let label = case.label();
        eprintln!("{label}: plain memory");
        let mut plain_runs = Vec::new();
        for _ in 0..plan.runs {
            plain_runs.push(plain_in(case, None, || 0)?.0);
        }
        let want = plain_runs[0].checksum;
        let plain_s = median(plain_runs.iter().map(|r| r.wall_s).collect());
        let footprint = match case.job {
            Job::Workload { size, .. } => size,
            Job::Program { .. } => plain_runs.iter().map(|r| r.max_rss_bytes).max().unwrap_or(0),
        };
        rows.push(KernelRow {
            case: label.clone(),
            system: "plain memory".into(),
            memory_mib: mib(footprint),
            wall_s: plain_s,
            slowdown: 1.0,
            faults: 0,
            checksum_ok: plain_runs.iter().all(|r| r.checksum == want),
            runs: plan.runs,
            oom_kills: 0,
        });
        let mut equal_total = None;
        for kernel in &plan.kernels {
            eprintln!("{label}: kernel {kernel}, limit {}M", case.limit >> 20);
            let (mut walls, mut faults, mut peaks, mut ok) = (Vec::new(), Vec::new(), Vec::new(), true);
            let mut charged = false;
            let mut killed = None;
            let mut oom_kills = 0;
            // The kernel's cgroup OOM killer ends some runs at tight limits
            // (charging a swap-in while reclaim lags); each is counted and
            // tried again, up to KERNEL_ATTEMPTS per run wanted.
            for _attempt in 0..KERNEL_ATTEMPTS * plan.runs {
                if walls.len() == plan.runs {
                    break;
                }
                let result = if let Some(alg) = kernel.strip_prefix("zram-") {
                    let _zram = Zram::new(alg, 2 * footprint)?;
                    let cg = Cgroup::new(case.limit)?;
                    plain_in(case, Some(&cg), || Zram::memory().0).map(|(run, _)| (run, Zram::memory().1))
                } else if let Some(alg) = kernel.strip_prefix("zswap-") {
                    let _zswap = Zswap::new(&plan.swap_dir, 2 * footprint, alg)?;
                    let cg = Cgroup::new(case.limit)?;
                    charged = cg.charges_zswap();
                    plain_in(case, Some(&cg), Zswap::pool_bytes)
                } else {
                    bail!("unknown kernel setup '{kernel}'; use zram-ALGORITHM or zswap-ALGORITHM");
                };
                let (run, peak) = match result {
                    Ok(r) => r,
                    Err(e) => {
                        eprintln!("{label}: kernel {kernel}: {e:#}; trying again");
                        oom_kills += 1;
                        killed = Some(format!("{e:#}"));
                        continue;
                    }
                };
                ok &= run.checksum == want;
                walls.push(run.wall_s);
                faults.push(run.major_faults as f64);
                peaks.push(peak as f64);
            }
            if walls.is_empty() {
                rows.push(KernelRow {
                    case: label.clone(),
                    system: format!("kernel {kernel}: {}", killed.unwrap_or_default()),
                    memory_mib: mib(case.limit),
                    wall_s: f64::NAN,
                    slowdown: f64::NAN,
                    faults: 0,
                    checksum_ok: false,
                    runs: 0,
                    oom_kills,
                });
                continue;
            }
            let peak = median(peaks) as u64;
            let held = case.limit + if charged { 0 } else { peak };
            if equal_total.is_none() && kernel.starts_with("zram-") {
                equal_total = Some(held);
            }
            let measured = Measured { walls, faults, ok };
            rows.push(measured.row(&label, format!("kernel {kernel}"), held, plain_s, oom_kills));
        }
        let mut ccvm_rams = Vec::new();
        if plan.at_limit {
            ccvm_rams.push(("at the cgroup limit", case.limit));
        }
        if let Some(total) = equal_total {
            ccvm_rams.insert(0, ("equal total memory", total));
        }
        // `ccvm exec --ram` bounds the program's heap; the kernel's limit,
        // what the cgroup is charged: anonymous memory and the file pages
        // the program brought in. Shared libraries already cached were
        // charged elsewhere, so the program's whole RSS is no fairer a
        // measure.
        for (what, ram) in ccvm_rams {
            eprintln!("{label}: ccvm, {what} ({:.0}M)", mib(ram));
            let (mut walls, mut faults, mut ok) = (Vec::new(), Vec::new(), true);
            for _ in 0..plan.runs {
                let (wall, f, good) = ccvm_run(case, ram, &plan.ccvm_args, want)?;
                walls.push(wall);
                faults.push(f as f64);
                ok &= good;
            }
            let measured = Measured { walls, faults, ok };
            rows.push(measured.row(&label, format!("ccvm, {what}"), ram, plain_s, 0));
        }
    }
    report::print(&rows, format)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_parse_and_bad_ones_say_why() {
        let c = parse_case("graph:256M:128M").unwrap();
        assert!(matches!(&c.job, Job::Workload { name, size } if name == "graph" && *size == 256 << 20));
        assert_eq!((c.limit, c.label()), (128 << 20, "graph 256M".to_string()));
        assert!(parse_case("graph:256M").unwrap_err().contains("NAME:SIZE:LIMIT"));
        assert!(parse_case("nosuch:256M:128M").unwrap_err().contains("unknown workload"));
        assert!(parse_case("graph:128M:256M")
            .unwrap_err()
            .contains("not below the size"));
        let p = parse_program("python:150M:/usr/bin/python3 dicts.py -v").unwrap();
        assert!(matches!(&p.job, Job::Program { command, .. } if command == &["/usr/bin/python3", "dicts.py", "-v"]));
        assert_eq!((p.limit, p.label()), (150 << 20, "python".to_string()));
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
            ok: true,
        };
        let r = m.row("graph 256M", "ccvm".into(), 64 << 20, 0.5, 1);
        assert_eq!(
            (r.wall_s, r.slowdown, r.faults, r.runs, r.oom_kills),
            (2.0, 4.0, 20, 3, 1)
        );
        assert_eq!(r.memory_mib, 64.0);
    }
}

//! The children a comparison runs: each program or workload in its own
//! process, placed in a memory cgroup before it starts (the kernel's runs
//! and the meter of plain memory), or under `ccvm run` or `ccvm exec`
//! (ccvm's runs), with its wall time, faults, memory and output checked.

use std::process::{Command, Stdio};

use anyhow::{bail, Context};

use super::{Case, Job, PlainRun};
use ccvm_kernelswap::Cgroup;

/// A hash of a program's output, its checksum here.
fn output_hash(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

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
pub(super) fn plain_in(case: &Case, cgroup: Option<&Cgroup>, probe: fn() -> u64) -> anyhow::Result<(PlainRun, u64)> {
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
pub(super) struct CcvmRun {
    pub wall_s: f64,
    pub faults: u64,
    pub ok: bool,
    /// The peak charge of ccvm's whole process tree, measured by a cgroup
    /// without a limit.
    pub memory: u64,
}

/// The case under ccvm in a child (`ccvm run --json`, or `ccvm exec` for a
/// program), metered in a cgroup without a limit.
pub(super) fn ccvm_run(case: &Case, ram: u64, extra: &[String], want: u64) -> anyhow::Result<CcvmRun> {
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

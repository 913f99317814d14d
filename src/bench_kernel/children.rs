//! The children a comparison runs: each program or workload in its own
//! process, in a memory cgroup (the kernel's runs and the meter of plain
//! memory) or under `ccvm run` or `ccvm exec` (ccvm's runs), each run with
//! `ccvm_kernelswap::run_measured`, its faults, memory and output checked.

use std::process::{Command, Stdio};

use anyhow::{bail, Context};

use super::{Case, Job, PlainRun};
use ccvm_kernelswap::{run_measured, Cgroup};

/// A hash of a program's output, its checksum here.
fn output_hash(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
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
    let r = run_measured(cmd, cgroup, probe)?;
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
            major_faults: r.major_faults,
            max_rss_bytes: r.max_rss_bytes,
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
            // Metered from here: a meter of its own would be charged too.
            cmd.args(["run", "--json", "--no-cgroup-meter", "--workload", name, "--size"])
                .arg(size.to_string())
                .arg("--ram")
                .arg(ram.to_string())
                .arg(format!("--reference={want:x}"))
                .args(extra)
                .stderr(Stdio::piped());
            let r = run_measured(cmd, Some(&meter), || 0)?;
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
            // Metered from here: a meter of its own would be charged too.
            cmd.args(["exec", "--no-cgroup-meter", "--ram"])
                .arg(ram.to_string())
                .arg("--report")
                .arg(report.path())
                .args(extra)
                .arg("--")
                .args(command)
                .stderr(Stdio::null());
            let r = run_measured(cmd, Some(&meter), || 0)?;
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

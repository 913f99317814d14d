//! A program run to its end as one side of a comparison: placed in a
//! memory cgroup before it starts, with what it printed, how it ended,
//! its wall time and its resource usage, and a probe of memory outside the
//! group (compressed swap's pool) sampled while it ran.

use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::Cgroup;

/// How often the probe is sampled; the group's statistics are flushed
/// every second sample (see [`Cgroup::flush_stats`]).
const SAMPLE_PERIOD: Duration = Duration::from_millis(10);

/// What a run gave.
#[derive(Debug)]
pub struct Measured {
    /// Its standard output.
    pub out: Vec<u8>,
    /// How it ended.
    pub status: ExitStatus,
    /// From its start to its end.
    pub wall: Duration,
    /// Its major page faults (those that read a disk or swap).
    pub major_faults: u64,
    /// Its peak resident set, bytes.
    pub max_rss_bytes: u64,
    /// The peak of what the probe sampled while it ran.
    pub probed: u64,
}

/// Runs `cmd` to its end, in `cgroup` if one is given, with transparent
/// huge pages off (4 KiB pages, as ccvm's regions use: with huge pages the
/// kernel swaps 2 MiB folios, and its cgroup OOM killer ended runs while
/// charging their swap-ins). `probe` is sampled every 10 ms, and the
/// group's statistics flushed every 20 ms, the work-around that
/// `docs/kernel.md` explains. Its standard output is captured; the caller
/// sets up the rest of `cmd`.
///
/// # Errors
///
/// If the program cannot be started or waited for, or its output read.
///
/// ```no_run
/// let r = ccvm_kernelswap::run_measured(std::process::Command::new("true"), None, || 0)?;
/// assert!(r.status.success());
/// # Ok::<(), anyhow::Error>(())
/// ```
pub fn run_measured(mut cmd: Command, cgroup: Option<&Cgroup>, probe: fn() -> u64) -> anyhow::Result<Measured> {
    cmd.stdout(Stdio::piped());
    join_before_exec(&mut cmd, cgroup)?;
    let started = Instant::now();
    let mut child = cmd.spawn().context("starting the child")?;
    let pid = child.id() as libc::pid_t;
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let done = AtomicBool::new(false);
    let (out, waited, wall, probed) = std::thread::scope(|s| {
        let sampler = s.spawn(|| sample(&done, cgroup, probe));
        let reader = s.spawn(move || {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut stdout, &mut bytes).map(|_| bytes)
        });
        let waited = wait_with_usage(pid);
        let wall = started.elapsed();
        done.store(true, Ordering::Relaxed);
        let out = reader.join().expect("the reader does not panic");
        let peak = sampler.join().expect("the sampler does not panic");
        (out, waited, wall, peak)
    });
    // Reaped above: dropping the handle neither waits nor kills.
    drop(child);
    let out = out.context("reading the child's output")?;
    let (status, usage) = waited.context("waiting for the child")?;
    Ok(Measured {
        out,
        status: std::os::unix::process::ExitStatusExt::from_raw(status),
        wall,
        major_faults: usage.ru_majflt as u64,
        max_rss_bytes: usage.ru_maxrss as u64 * 1024,
        probed,
    })
}

/// Samples `probe` (and flushes `cgroup`'s statistics) until `done`, at
/// least once; returns the peak sampled.
fn sample(done: &AtomicBool, cgroup: Option<&Cgroup>, probe: fn() -> u64) -> u64 {
    let mut peak = 0;
    for tick in 0u64.. {
        peak = peak.max(probe());
        if tick.is_multiple_of(2) {
            if let Some(cg) = cgroup {
                cg.flush_stats();
            }
        }
        if done.load(Ordering::Relaxed) {
            break;
        }
        std::thread::sleep(SAMPLE_PERIOD);
    }
    peak
}

/// Waits for child `pid` to end: its wait status and resource usage.
fn wait_with_usage(pid: libc::pid_t) -> std::io::Result<(i32, libc::rusage)> {
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waiting for our own child, with valid out-pointers; it is
        // reaped here, not by its `Child` handle.
        let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if waited == pid {
            return Ok((status, usage));
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Makes `cmd`'s process turn transparent huge pages off and join
/// `cgroup` (if given) before it runs the program.
fn join_before_exec(cmd: &mut Command, cgroup: Option<&Cgroup>) -> anyhow::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_measured_and_its_output_kept() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "printf hello; exit 3"]);
        let r = run_measured(cmd, None, || 7).unwrap();
        assert_eq!(r.out, b"hello");
        assert_eq!(r.status.code(), Some(3));
        assert!(r.max_rss_bytes > 0, "the kernel reports a peak resident set");
        assert_eq!(r.probed, 7, "the probe was sampled at least once");
    }

    #[test]
    fn a_program_that_cannot_start_is_an_error() {
        let e = run_measured(Command::new("/nonexistent/ccvm-test"), None, || 0).unwrap_err();
        assert!(e.to_string().contains("starting the child"), "{e}");
    }
}

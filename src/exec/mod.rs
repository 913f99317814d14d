//! `ccvm exec`: runs an unmodified, dynamically linked program with its
//! heap paged live through ccvm, by preloading the library built from
//! `crates/preload` (embedded in this binary), and reports what paging did.

pub mod args;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ccvm_runtime::{ExecReport, ExecSettings};

use crate::args::Format;
use crate::report::RunRow;

/// The preloaded library, built by build.rs.
static PRELOAD: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libccvm_preload.so"));

/// What to run and how.
pub struct ExecOptions {
    /// How the heap is paged (`report_dir` is set here).
    pub settings: ExecSettings,
    /// The program and its arguments.
    pub command: Vec<String>,
    /// Run it unpaged first and show both wall times.
    pub compare: bool,
    /// Run it unpaged only (for a program ccvm cannot page).
    pub unpaged: bool,
    /// Meter the program's processes in a memory cgroup of their own,
    /// where the machine lets ccvm make one.
    pub cgroup_meter: bool,
    /// The report's form: text, JSON or CSV (a row per paged process).
    pub format: Format,
    /// Also write the report, as JSON, to this file.
    pub report: Option<PathBuf>,
}

/// Everything `ccvm exec --json` prints.
#[derive(serde::Serialize)]
struct Summary<'a> {
    command: &'a [String],
    wall_s: f64,
    unpaged_wall_s: Option<f64>,
    exit: String,
    /// The most memory the kernel charged the program's process tree at
    /// once, bytes (ccvm's helper processes are in the tree): the peak of
    /// a memory cgroup made for the run inside ccvm's own, the meter `ccvm
    /// bench kernel` reads for both systems. Absent where ccvm may not make
    /// one (not root, no memory controller).
    cgroup_peak_bytes: Option<u64>,
    /// The most memory the program's process tree held, bytes: its summed
    /// PSS, sampled every 50 ms or more (ccvm's helper processes are in the tree).
    peak_pss_bytes: u64,
    /// The program's own process first, then any it exec'd or forked that
    /// were paged, by process id.
    processes: &'a [ExecReport],
}

/// Writes the embedded library to a file named by its contents (once per
/// build) and returns the path. The file lives in `$TMPDIR/ccvm-<uid>`, a
/// folder that must be this user's alone (mode 0700, checked on the open
/// folder, not by name), and a cached copy is used only if it holds exactly
/// these bytes: anything another user could have placed is refused or
/// replaced, never loaded. Programs that the paged program execs later load
/// the same file, so it stays in place.
fn preload_path() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("CCVM_PRELOAD") {
        return Ok(PathBuf::from(p));
    }
    let dir = std::env::temp_dir().join(format!("ccvm-{}", nix::unistd::geteuid()));
    ccvm_output::private_dir(&dir)?;
    // The name tells builds apart; the contents are what is checked.
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    PRELOAD.hash(&mut h);
    let path = dir.join(format!("libccvm_preload-{:016x}.so", h.finish()));
    if !ccvm_output::holds(&path, PRELOAD) {
        ccvm_output::write(&path, PRELOAD)?;
    }
    Ok(path)
}

/// `program` as the shell would find it.
fn resolve(program: &str) -> anyhow::Result<PathBuf> {
    if program.contains('/') {
        return Ok(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .with_context(|| format!("{program}: not found in PATH"))
}

/// Why `path` cannot take a preloaded library, if it cannot: a statically
/// linked executable loads none. A script is judged by its interpreter.
fn cannot_preload(path: &Path, depth: u32) -> anyhow::Result<Option<String>> {
    use std::io::Read;
    check_program(path)?;
    // The ELF header and program headers, or a script's first line, are
    // at the start: a bounded read, whatever the file's size.
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(PROGRAM_PREFIX).read_to_end(&mut bytes))
        .with_context(|| format!("reading {}", path.display()))?;
    if let Some(rest) = bytes.strip_prefix(b"#!") {
        let line = rest.split(|&b| b == b'\n').next().unwrap_or_default();
        let line = String::from_utf8_lossy(line);
        let interpreter = line.split_whitespace().next().unwrap_or_default();
        if interpreter.is_empty() || depth > 2 {
            return Ok(None);
        }
        let interpreter = resolve(interpreter)?;
        // `#!/usr/bin/env python3`: the program env runs is what counts.
        if interpreter.file_name().is_some_and(|n| n == "env") {
            if let Some(next) = line.split_whitespace().nth(1) {
                return cannot_preload(&resolve(next)?, depth + 1);
            }
        }
        return cannot_preload(&interpreter, depth + 1);
    }
    if !bytes.starts_with(b"\x7fELF") || has_interpreter(&bytes) != Some(false) {
        return Ok(None);
    }
    Ok(Some(format!(
        "{} is statically linked: it loads no shared library, so ccvm cannot page it \
         (add --unpaged to run it anyway, unpaged)",
        path.display()
    )))
}

/// Refuses a program path that is not a regular file (a device, a FIFO,
/// a folder), before anything opens it.
fn check_program(path: &Path) -> anyhow::Result<()> {
    let meta = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    if !meta.is_file() {
        bail!("{} is not a regular file: name a program to run", path.display());
    }
    Ok(())
}

/// How much of a program is read to judge it.
const PROGRAM_PREFIX: u64 = 64 << 10;

/// Whether the ELF image starting `bytes` names an interpreter (the
/// dynamic loader), from its program headers; `None` if they are not in
/// `bytes` or do not parse.
fn has_interpreter(bytes: &[u8]) -> Option<bool> {
    use goblin::elf::{program_header::PT_INTERP, Elf, ProgramHeader};
    let header = Elf::parse_header(bytes).ok()?;
    let ctx = goblin::container::Ctx::new(header.container().ok()?, header.endianness().ok()?);
    let headers = ProgramHeader::parse(bytes, header.e_phoff as usize, header.e_phnum as usize, ctx).ok()?;
    Some(headers.iter().any(|h| h.p_type == PT_INTERP))
}

/// Runs `command` and returns (wall time, exit status as a shell gives it).
fn run_program(command: &[String], env: &[(String, String)], quiet: bool) -> anyhow::Result<(Duration, i32, String)> {
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    if quiet {
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
    }
    let started = Instant::now();
    let forwarding = ccvm_output::interrupt::forwarding();
    let mut child = cmd.spawn().with_context(|| format!("running {}", command[0]))?;
    forwarding.started(child.id());
    let status = child.wait().context("waiting for the program")?;
    drop(forwarding);
    let wall = started.elapsed();
    let (code, exit) = exit_of(status);
    Ok((wall, code, exit))
}

/// The status to end with (a shell's: 128 + N for signal N) and its words.
fn exit_of(status: std::process::ExitStatus) -> (i32, String) {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => (c, format!("exit {c}")),
        (None, Some(s)) => (128 + s, format!("killed by signal {s}")),
        _ => (1, "ended".into()),
    }
}

/// Runs the program as `opts` says and returns the exit status to end with.
///
/// # Errors
///
/// A program that cannot be found or paged, or a report that cannot be
/// read or written.
pub fn exec(mut opts: ExecOptions) -> anyhow::Result<i32> {
    let Some(program) = opts.command.first() else {
        bail!("no program given: ccvm exec [OPTIONS] -- PROGRAM [ARGS...]");
    };
    let path = resolve(program)?;
    check_program(&path)?;
    if opts.unpaged {
        let (_, code, _) = run_program(&opts.command, &[], false)?;
        return Ok(code);
    }
    if let Some(why) = cannot_preload(&path, 0)? {
        bail!("{why}");
    }
    // The library's folder, paging itself and a report that cannot be
    // written are each refused before the program runs.
    let mut preload = preload_path()?.display().to_string();
    crate::args::check_userfaultfd()?;
    let report_out = opts.report.as_ref().map(ccvm_output::OutputFile::create).transpose()?;
    let unpaged_wall = if opts.compare {
        Some(run_program(&opts.command, &[], true)?.0)
    } else {
        None
    };
    let reports = tempfile::tempdir().context("making a directory for the reports")?;
    opts.settings.report_dir = Some(reports.path().to_path_buf());
    if let Ok(more) = std::env::var("LD_PRELOAD") {
        preload = format!("{preload}:{more}");
    }
    let env = vec![
        ("LD_PRELOAD".to_string(), preload),
        (ExecSettings::VAR.to_string(), opts.settings.to_value()),
    ];
    let mut cmd = Command::new(&opts.command[0]);
    cmd.args(&opts.command[1..]);
    let started = Instant::now();
    let forwarding = ccvm_output::interrupt::forwarding();
    let cgroup = if opts.cgroup_meter { metered(&mut cmd) } else { None };
    let mut child = cmd.envs(env).spawn().with_context(|| format!("running {program}"))?;
    let pid = child.id();
    forwarding.started(pid);
    let meter = crate::meter::TreeMeter::start(pid);
    let status = child.wait().context("waiting for the program")?;
    let peak_pss_bytes = meter.finish();
    // Dropped here, the group sends what the program left running (a
    // daemon) back to ccvm's group and is removed.
    let cgroup_peak_bytes = cgroup.map(|(group, _)| group.peak_bytes()).filter(|&b| b > 0);
    drop(forwarding);
    let wall = started.elapsed();
    let (code, exit) = exit_of(status);
    let mut processes = read_reports(reports.path())?;
    processes.sort_by_key(|r| (r.pid != pid, r.pid));
    let summary = Summary {
        command: &opts.command,
        wall_s: wall.as_secs_f64(),
        unpaged_wall_s: unpaged_wall.map(|d| d.as_secs_f64()),
        exit,
        cgroup_peak_bytes,
        peak_pss_bytes,
        processes: &processes,
    };
    if let Some(mut out) = report_out {
        out.write_all(&serde_json::to_vec_pretty(&summary)?)
            .with_context(|| format!("writing {}", out.target().display()))?;
        out.commit()?;
    }
    print(opts.format, &summary, pid)?;
    Ok(code)
}

/// Prints the report on standard error in `format`.
fn print(format: Format, summary: &Summary<'_>, pid: u32) -> anyhow::Result<()> {
    let mut err = std::io::stderr().lock();
    match format {
        Format::Json => writeln!(err, "{}", serde_json::to_string_pretty(summary)?)?,
        Format::Csv => {
            let rows: Vec<RunRow> = summary
                .processes
                .iter()
                .map(|p| {
                    let what = format!("{} {}", p.pid, p.command.first().map_or("", String::as_str));
                    RunRow::new(
                        what,
                        p.settings.config.policy.name(),
                        p.settings.config.codec.name(),
                        p.settings.config.ram_bytes,
                        summary.wall_s,
                        &p.stats,
                    )
                })
                .collect();
            crate::report::write(&mut err, &rows, Format::Csv)?;
        }
        Format::Table => print_summary(&mut err, summary, pid)?,
    }
    Ok(())
}

/// Puts the program `cmd` starts into a memory cgroup of its own, made
/// inside ccvm's, as it starts (before its first allocation, so that every
/// page it and its children are charged is counted). Returns the group
/// and the open `cgroup.procs` the child writes to, to keep both alive
/// for the run; `None` (and the program runs unmetered) where the machine
/// does not let ccvm make one.
fn metered(cmd: &mut Command) -> Option<(ccvm_kernelswap::Cgroup, std::fs::File)> {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let group = ccvm_kernelswap::Cgroup::meter_within_own("ccvm-exec").ok()?;
    let procs = std::fs::OpenOptions::new().write(true).open(group.procs()).ok()?;
    let fd = procs.as_raw_fd();
    // SAFETY: the closure runs in the forked child before exec and makes
    // one async-signal-safe call, `write`, on a descriptor the parent keeps
    // open until the child has been waited for. "0" names the writer.
    // A failed write leaves the program unmetered (its peak reads 0),
    // never unrun.
    unsafe {
        cmd.pre_exec(move || {
            let _ = libc::write(fd, b"0".as_ptr().cast(), 1);
            Ok(())
        });
    }
    Some((group, procs))
}

/// The reports in `dir`: each process's report at exit (`PID.json`), or
/// where it left none (killed by a signal), its last snapshot
/// (`PID.snapshot`). Scratch files of a snapshot cut short are skipped.
fn read_reports(dir: &Path) -> anyhow::Result<Vec<ExecReport>> {
    let mut by_pid = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let ext = path.extension().and_then(|e| e.to_str());
        if !matches!(ext, Some("json" | "snapshot")) {
            continue;
        }
        let text = std::fs::read(&path)?;
        let report: ExecReport =
            serde_json::from_slice(&text).with_context(|| format!("reading the report {}", path.display()))?;
        let keep = by_pid
            .get(&report.pid)
            .is_none_or(|old: &ExecReport| old.snapshot && !report.snapshot);
        if keep {
            by_pid.insert(report.pid, report);
        }
    }
    Ok(by_pid.into_values().collect())
}

fn mib(b: u64) -> String {
    format!("{:.1}", b as f64 / (1 << 20) as f64)
}

/// The run's memory as the report's line tells it: the cgroup's peak
/// where there is one, and the sampled PSS.
fn memory_held(s: &Summary<'_>) -> String {
    match s.cgroup_peak_bytes {
        Some(peak) => format!(
            "{} MiB at most (a memory cgroup's peak charge of the program's processes); {} MiB PSS sampled",
            mib(peak),
            mib(s.peak_pss_bytes)
        ),
        None => format!(
            "{} MiB at most (the program's processes, PSS sampled at most 1% of the time)",
            mib(s.peak_pss_bytes)
        ),
    }
}

fn print_summary(out: &mut impl Write, s: &Summary<'_>, pid: u32) -> anyhow::Result<()> {
    writeln!(out, "ccvm exec: {} ({})", s.command.join(" "), s.exit)?;
    match s.unpaged_wall_s {
        Some(u) => writeln!(
            out,
            "wall time              {:.3} s (unpaged {u:.3} s, {:.2}x)",
            s.wall_s,
            s.wall_s / u
        )?,
        None => writeln!(out, "wall time              {:.3} s", s.wall_s)?,
    }
    writeln!(out, "memory held            {}", memory_held(s))?;
    if !s.processes.iter().any(|r| r.pid == pid) {
        writeln!(
            out,
            "no report from the program: it ended without exit (a signal, or _exit), or it did not load ccvm's library"
        )?;
    }
    // A program run through a wrapper (a shell script, pyenv's shims)
    // leaves a report from every small helper process: those get one line.
    let (quiet, shown): (Vec<&ExecReport>, Vec<&ExecReport>) = s
        .processes
        .iter()
        .partition(|r| r.pid != pid && r.heap_peak_bytes < 1 << 20 && r.stats.faults_cache + r.stats.faults_disk == 0);
    if !quiet.is_empty() {
        let mut names: Vec<&str> = quiet
            .iter()
            .filter_map(|r| r.command.first().map(String::as_str))
            .collect();
        names.sort_unstable();
        names.dedup();
        writeln!(
            out,
            "{} more processes paged, none beyond 1 MiB of heap or faulting back a page: {}",
            quiet.len(),
            names.join(", ")
        )?;
    }
    for r in shown {
        let set = &r.settings.config;
        writeln!(
            out,
            "process {} ({}): heap {} MiB at most in {} MiB of RAM; policy {}, codec {}, {} faults; {} MiB unpaged",
            r.pid,
            r.command.first().map(String::as_str).unwrap_or("?"),
            mib(r.heap_peak_bytes),
            mib(set.ram_bytes),
            set.policy,
            set.codec,
            set.fault_mode,
            mib(r.unpaged_bytes)
        )?;
        if r.snapshot {
            writeln!(
                out,
                "ended early            by a signal, without its report: counts as of its last snapshot, at most {:.1} s \
                 before its end",
                ccvm_runtime::SNAPSHOT_PERIOD.as_secs_f64()
            )?;
        }
        let u = &r.unpaged_mappings;
        writeln!(
            out,
            "coverage               RssAnon {} MiB at exit; {} MiB of anonymous mappings left to the kernel \
             (reserved {}, fixed address {}, stacks {}, shared {}, other protections {})",
            mib(r.rss_anon_at_exit_bytes),
            mib(u.total()),
            mib(u.reserved),
            mib(u.fixed),
            mib(u.stacks_and_huge),
            mib(u.shared),
            mib(u.other_protections)
        )?;
        crate::live::print_stats(out, &r.stats)?;
    }
    Ok(())
}

/// `ccvm trace --exec`: traces `command`'s heap with a window of `window`
/// uncompressed pages (every other page lives in the compression cache, so
/// every reference outside the window is seen) into `out`, as `ccvm trace`
/// does a built-in workload. The program runs unpaged first, for the run
/// time the trace's footer records. Of several processes (a compiler
/// driver and its passes), the one with the most references is kept.
///
/// # Errors
///
/// As for [`exec`], or a program that left no trace.
pub fn trace(command: &[String], window: u64, codec: ccvm_codec::CodecId, heap: u64, out: &Path) -> anyhow::Result<()> {
    let Some(program) = command.first() else {
        bail!("no program given: ccvm trace --exec -o FILE -- PROGRAM [ARGS...]");
    };
    if let Some(why) = cannot_preload(&resolve(program)?, 0)? {
        bail!("{why}");
    }
    let output = ccvm_output::OutputFile::create(out)?;
    let (plain, code, exit) = run_program(command, &[], true)?;
    if code != 0 {
        bail!("{program} fails unpaged ({exit}); trace a program that succeeds");
    }
    // As `ccvm trace` does: the cache holds every page that leaves the
    // window (the RAM is a limit, not memory taken), so nothing goes to
    // disk and every reference outside the window faults.
    let ram = window * 4096 + 2 * heap + (1 << 20);
    let probe = ccvm_runtime::RuntimeConfig {
        ram_bytes: ram,
        ..Default::default()
    };
    let share = (window * 4096 + 2048) as f64 / probe.policy_budget().ram_bytes as f64;
    let traces = tempfile::tempdir_in(
        out.parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new(".")),
    )
    .context("making a directory for the traces beside the output")?;
    let settings = ExecSettings {
        config: ccvm_runtime::RuntimeConfig {
            ram_bytes: ram,
            policy: "fixed".parse()?,
            codec,
            uncompressed_share: share,
            ..probe
        },
        heap_bytes: heap,
        trace_dir: Some(traces.path().to_path_buf()),
        trace_run_time_ns: plain.as_nanos() as u64,
        ..ExecSettings::default()
    };
    let env = vec![
        ("LD_PRELOAD".to_string(), preload_path()?.display().to_string()),
        (ExecSettings::VAR.to_string(), settings.to_value()),
    ];
    let activity = crate::progress::activity(format!("tracing {program} into {}", out.display()));
    let watch = crate::progress::DiskWatch::new(out);
    let (wall, code, exit) = run_program(command, &env, true)?;
    drop((watch, activity));
    if code != 0 {
        bail!("{program} failed while traced ({exit})");
    }
    let mut best: Option<(u64, PathBuf)> = None;
    let mut count = 0;
    for entry in std::fs::read_dir(traces.path())? {
        let path = entry?.path();
        // Read to the end: the footer counts the references, and a trace
        // that does not read back is an error here, not in a later sweep.
        let mut reader = ccvm_trace::TraceReader::open(&path)?;
        while reader.next_event()?.is_some() {}
        let references = reader.footer().map_or(0, |f| f.references);
        count += 1;
        if best.as_ref().is_none_or(|(r, _)| references > *r) {
            best = Some((references, path));
        }
    }
    let Some((references, path)) = best else {
        bail!("{program} left no trace: it ended without exit (a signal, or _exit)");
    };
    output.commit_from(&path)?;
    let bytes = std::fs::metadata(out)?.len();
    outln!(
        "traced {} with a {window}-page window in {:.2} s (unpaged {:.3} s): {references} references -> {} ({} KiB){}",
        command.join(" "),
        wall.as_secs_f64(),
        plain.as_secs_f64(),
        out.display(),
        bytes / 1024,
        if count > 1 {
            format!("; the busiest of {count} processes")
        } else {
            String::new()
        }
    )?;
    Ok(())
}

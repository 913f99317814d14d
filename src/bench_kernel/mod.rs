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

mod children;
mod compare;
mod measure;

use children::{ccvm_run, plain_in};
use compare::{figure, kernel_config, print_comparison};

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::args::Format;
use crate::report::{self, Row};

pub use ccvm_kernelswap::{check_machine, zram_available};

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
    use nix::sys::resource::{getrusage, UsageWho};
    let run = PlainRun {
        checksum,
        wall_s: wall.as_secs_f64(),
        major_faults: getrusage(UsageWho::RUSAGE_SELF).map_or(0, |u| u.major_page_faults() as u64),
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
    /// `--ram` at the limits, and again with the whole MiB such a run held
    /// below that total.
    pub ccvm_rams: Vec<u64>,
    /// Draw wall time against memory, a line per system, in this folder.
    pub figures: Option<PathBuf>,
}

/// The demo's case: small enough to keep the demo near a minute, with
/// limits at which both systems page.
pub fn demo_case() -> Case {
    parse_case("graph:128M:72M,96M").expect("a valid case")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

/// Attempts per kernel run wanted before the row is given up as killed.
const KERNEL_ATTEMPTS: usize = 3;

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
        let first = rows.len();
        let bench = measure::CaseBench::plain(plan, case, &mut rows)?;
        for kernel in &plan.kernels {
            for &limit in &case.limits {
                rows.push(bench.kernel(kernel, limit)?);
            }
        }
        bench.ccvm(&mut rows, first)?;
        if let Some(dir) = &figures {
            figure(dir.path(), &bench.label, &rows[first..], bench.plain_s)?;
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

#[cfg(test)]
mod tests {
    use super::compare::envelope;
    use super::measure::Measured;
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
    /// Runtimes that size their heaps from the cgroup's limit (the JVM, node) run smaller heaps on the
    /// kernel's side: to compare one program, fix the size in its arguments (e.g. `-XX:-UseContainerSupport`,
    /// `--max-old-space-size=N`).
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
    /// setup was measured to hold, less what ccvm was measured to hold beyond --ram at the limits (and once more
    /// with the whole MiB such a run held below that total).
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

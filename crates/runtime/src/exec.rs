//! What `ccvm exec` and the library it preloads into a program tell each
//! other: the settings a program's heap is paged with, passed in one
//! environment variable, and the report each paged process leaves behind.
//!
//! # Choices
//!
//! * One variable holding JSON, not a variable per setting: the two sides
//!   cannot drift apart on names, and a program that `exec`s another
//!   passes the whole of it on, so the new program is paged the same way
//!   with a budget of its own.
//! * Sizes are plain byte counts: `ccvm exec` parses `64M` and the like,
//!   so the preloaded library needs no parser of its own.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::config::RuntimeConfig;
use crate::stats::RuntimeStats;

/// How a preloaded program's heap is paged: a region's settings, and what
/// only a preloaded heap has.
///
/// ```
/// use ccvm_runtime::{ExecSettings, RuntimeConfig};
/// let config = RuntimeConfig { ram_bytes: 64 << 20, ..RuntimeConfig::default() };
/// let s = ExecSettings { config, ..ExecSettings::default() };
/// let back = ExecSettings::from_value(&s.to_value()).unwrap();
/// assert_eq!(back, s);
/// assert_eq!(back.runtime_config_for(7, "prog").ram_bytes, 64 << 20);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecSettings {
    /// The heap region's settings (its trace is set per process, from
    /// `trace_dir`).
    #[serde(flatten)]
    pub config: RuntimeConfig,
    /// Address space reserved for the heap; what the program allocates
    /// beyond it comes from the C library's own malloc, unpaged.
    pub heap_bytes: u64,
    /// Directory where each paged process writes `<pid>.json` at exit.
    pub report_dir: Option<PathBuf>,
    /// Trace each paged process to `<trace_dir>/<pid>.trace` (with the
    /// policy and share set for tracing by `ccvm trace --exec`).
    #[serde(default)]
    pub trace_dir: Option<PathBuf>,
    /// The program's run time unpaged, for the traces' footers.
    #[serde(default)]
    pub trace_run_time_ns: u64,
}

impl Default for ExecSettings {
    fn default() -> Self {
        ExecSettings {
            config: RuntimeConfig::default(),
            heap_bytes: 4 << 30,
            report_dir: None,
            trace_dir: None,
            trace_run_time_ns: 0,
        }
    }
}

impl ExecSettings {
    /// The environment variable that carries the settings.
    pub const VAR: &'static str = "CCVM_EXEC";

    /// The settings as the variable's value.
    pub fn to_value(&self) -> String {
        serde_json::to_string(self).expect("settings serialize")
    }

    /// Settings from the variable's value.
    ///
    /// # Errors
    ///
    /// A one-line message if the value is not settings written by
    /// [`ExecSettings::to_value`].
    pub fn from_value(value: &str) -> Result<ExecSettings, String> {
        serde_json::from_str(value).map_err(|e| format!("{} is not ccvm exec's settings ({e})", Self::VAR))
    }

    /// The settings in this process's environment: `None` if the variable
    /// is not set (the library then does nothing).
    pub fn from_env() -> Option<Result<ExecSettings, String>> {
        let value = std::env::var(Self::VAR).ok()?;
        Some(Self::from_value(&value))
    }

    /// The region settings of the process `pid` running `program` (which
    /// names its trace, if it is traced).
    pub fn runtime_config_for(&self, pid: u32, program: &str) -> RuntimeConfig {
        let mut config = self.config.clone();
        config.trace = self.trace_dir.as_ref().map(|dir| crate::TraceConfig {
            path: dir.join(format!("{pid}.trace")),
            workload: program.to_string(),
            seed: 0,
            run_time_ns: self.trace_run_time_ns,
        });
        config
    }
}

/// What one paged process reports at exit.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecReport {
    /// Its process id.
    pub pid: u32,
    /// Its command line.
    pub command: Vec<String>,
    /// The settings it was paged with.
    pub settings: ExecSettings,
    /// Most heap bytes allocated at once (block sizes as requested).
    pub heap_peak_bytes: u64,
    /// Bytes allocated from the C library instead, unpaged: before the
    /// heap was up, or when it was full.
    pub unpaged_bytes: u64,
    /// The runtime's counters.
    pub stats: RuntimeStats,
    /// Anonymous memory the program mapped that was passed to the kernel
    /// unpaged, and why.
    #[serde(default)]
    pub unpaged_mappings: UnpagedMappings,
    /// The process's resident anonymous memory (`RssAnon`) as it exited:
    /// the paged region's resident pages and everything ccvm did not page.
    #[serde(default)]
    pub rss_anon_at_exit_bytes: u64,
    /// Whether this is a snapshot taken while the process ran, not its
    /// report at exit. A process of a tree leaves one every
    /// [`SNAPSHOT_PERIOD`](crate::SNAPSHOT_PERIOD) (see
    /// [`on_tree_tick`](crate::on_tree_tick)), so that one killed by a
    /// signal (a pool's worker ended with SIGTERM) is still reported, with
    /// its counts as of its last snapshot; its report at exit replaces it.
    #[serde(default)]
    pub snapshot: bool,
}

/// Bytes of anonymous `mmap`s passed to the kernel unpaged, in all (a
/// mapping counts once, when made), by the reason the heap did not serve
/// it. Mappings the C library makes for itself (thread stacks, its own
/// allocator's arenas before the heap is up) are not seen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnpagedMappings {
    /// Reservations: `MAP_NORESERVE` or `PROT_NONE` (a JVM's or V8's heap,
    /// committed later with `mprotect`).
    pub reserved: u64,
    /// At a fixed address or an address hint.
    pub fixed: u64,
    /// Stacks (`MAP_STACK`, `MAP_GROWSDOWN`) and huge-page mappings.
    pub stacks_and_huge: u64,
    /// Shared anonymous memory.
    pub shared: u64,
    /// Other protections (executable, read-only: JIT code).
    pub other_protections: u64,
}

impl UnpagedMappings {
    /// All of them.
    pub fn total(&self) -> u64 {
        self.reserved + self.fixed + self.stacks_and_huge + self.shared + self.other_protections
    }
}

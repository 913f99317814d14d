//! How a region is set up, and why making one can fail.

use std::path::PathBuf;
use std::time::Duration;

use ccvm_codec::CodecId;
use ccvm_policy::PolicySpec;

/// How a region's faults reach the pager. Serialized by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultMode {
    /// The faulting thread serves its own fault from a SIGBUS handler
    /// (`UFFD_FEATURE_SIGBUS`): no sleep, no wake-up, no second CPU, so a
    /// cache fault costs the codec and a few microseconds. A system call
    /// that reads or writes a page of the region that is not resident
    /// fails with `EFAULT` instead (the kernel raises no signal for its own
    /// accesses): touch such buffers first with
    /// [`Region::prefault`](crate::Region::prefault).
    #[default]
    Signal,
    /// A handler thread reads fault events and wakes the faulting thread
    /// (the classic userfaultfd design): slower, but system calls into the
    /// region work as on plain memory.
    Thread,
}

impl FaultMode {
    /// Names as the command line takes them.
    pub const NAMES: [&'static str; 2] = ["signal", "thread"];

    /// The mode called `name` (`signal` or `thread`).
    ///
    /// # Errors
    ///
    /// A one-line message naming the modes, for any other name.
    pub fn by_name(name: &str) -> Result<FaultMode, String> {
        match name {
            "signal" => Ok(FaultMode::Signal),
            "thread" => Ok(FaultMode::Thread),
            _ => Err(format!("unknown fault mode '{name}'; use signal or thread")),
        }
    }
}

impl std::fmt::Display for FaultMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FaultMode::Signal => "signal",
            FaultMode::Thread => "thread",
        })
    }
}

impl std::str::FromStr for FaultMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FaultMode::by_name(s)
    }
}

/// Settings of a managed region. Every name is a checked value here (a
/// [`CodecId`], a [`PolicySpec`], a [`FaultMode`]): the command line, the C
/// interface and settings read back from JSON each parse names once, at
/// their edge. Serialized (without the trace, which is per process) as
/// `ccvm exec` hands its settings to the paged program.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RuntimeConfig {
    /// RAM for uncompressed pages and the compression cache together.
    pub ram_bytes: u64,
    /// Share of `ram_bytes` for uncompressed pages (fixed policy).
    pub uncompressed_share: f64,
    /// The policy.
    pub policy: PolicySpec,
    /// Codec of the compression cache.
    pub codec: CodecId,
    /// Directory of the swap file; `None` for the system's temp directory.
    pub swap_dir: Option<PathBuf>,
    /// Added to every swap-file read, to emulate slower disks.
    pub disk_latency: Duration,
    /// Record a trace of the run.
    #[serde(skip)]
    pub trace: Option<TraceConfig>,
    /// What the adaptive policy takes a disk fault to cost, all in.
    pub disk_cost: Duration,
    /// What it takes a compression-cache fault to cost, all in, until
    /// measured; `None` for [`RuntimeConfig::cache_price`]'s estimate.
    pub cache_cost: Option<Duration>,
    /// How faults are served.
    pub fault_mode: FaultMode,
    /// Move page frames with `UFFDIO_MOVE` where the kernel has it (Linux
    /// 6.8) instead of evicting by write-protect, copy and `MADV_DONTNEED`
    /// and mapping with `UFFDIO_COPY`. On by default: a cache fault costs
    /// about a third less. Where the kernel cannot move pages the copy path
    /// is used whatever this says.
    pub move_frames: bool,
    /// With `move_frames`, map pages in by copying (`UFFDIO_COPY`) while
    /// the process runs other threads: moving a frame out of the shadow
    /// interrupts every CPU one of them runs on to flush its TLB, about
    /// 19 µs a page against 0.75 µs for a copy on this project's machine
    /// (see the `threads` module). On by default; off keeps frames moving
    /// in whatever the threads.
    pub copy_in_when_threaded: bool,
    /// Compress evicted pages in a helper process while the program runs,
    /// instead of in the faulting thread (see the `compressor` module). On
    /// by default, since compression then leaves the fault path. Not used
    /// under [`RuntimeConfig::HELPER_MIN_RAM`] where ccvm's own memory is
    /// charged.
    pub background_compression: bool,
    /// Share (0 to 1) of the uncompressed pages kept trapped: unmapped but
    /// uncompressed, so that touches of the pages next in line to leave
    /// memory are seen and move them back to the newest end (see
    /// `ccvm_policy::Traps`). Needs `move_frames`; 0 turns it off and
    /// uncompressed pages leave in fault order.
    pub trap_share: f64,
    /// Most pages read ahead on a cache fault that continues a sequential
    /// run of faults (see the `readahead` module): the next pages, if they
    /// are in the cache, are decompressed and mapped before the program
    /// touches them. 0 turns it off; it is off while tracing, so that the
    /// trace holds the program's own references.
    pub readahead: usize,
    /// Map a read of a never-touched page as the kernel's shared zero page
    /// (write-protected until its first write), so that pages only read
    /// hold no memory, as they do under the kernel's own paging. Off while
    /// tracing, so that a trace holds every first touch.
    pub zero_reads: bool,
    /// Read which resident pages were written since the last look from the
    /// kernel's page tables, and tell the policy, so that pages in use stay
    /// (see the `written` module). Needs `move_frames` and a kernel with
    /// asynchronous write protection and `PAGEMAP_SCAN` (Linux 6.7); off
    /// where either is missing, and while tracing. Reads of untouched pages
    /// then get writable zeros: `zero_reads` needs protection that stops a
    /// writer.
    pub write_scan: bool,
}

impl RuntimeConfig {
    /// What the adaptive policy takes a compression-cache fault to cost
    /// until cache faults are measured: `cache_cost`, or by default what
    /// `fault_mode` delivers a fault in plus a cache fault's typical
    /// service (the `costs` module says why it depends on the mode).
    ///
    /// ```
    /// use std::time::Duration;
    /// use ccvm_runtime::{FaultMode, RuntimeConfig};
    /// let signal = RuntimeConfig::default();
    /// let thread = RuntimeConfig { fault_mode: FaultMode::Thread, ..RuntimeConfig::default() };
    /// assert_eq!(signal.cache_price(), Duration::from_micros(10));
    /// assert_eq!(thread.cache_price(), Duration::from_micros(22));
    /// let told = RuntimeConfig { cache_cost: Some(Duration::from_micros(25)), ..thread };
    /// assert_eq!(told.cache_price(), Duration::from_micros(25));
    /// ```
    pub fn cache_price(&self) -> Duration {
        self.cache_cost
            .unwrap_or_else(|| crate::pager::costs::delivery(self.fault_mode) + crate::pager::costs::CACHE_SERVICE)
    }
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            ram_bytes: 64 << 20,
            uncompressed_share: 0.5,
            policy: PolicySpec::default(),
            codec: CodecId::default(),
            swap_dir: None,
            disk_latency: Duration::ZERO,
            trace: None,
            // What a disk and a cache fault cost end to end on this
            // project's machine, until measured (docs/results.md).
            disk_cost: Duration::from_micros(100),
            cache_cost: None,
            fault_mode: FaultMode::default(),
            move_frames: true,
            copy_in_when_threaded: true,
            background_compression: true,
            trap_share: 0.0,
            readahead: crate::readahead::DEFAULT_WINDOW,
            zero_reads: true,
            // Off: it helps some programs and slows others (docs/results.md).
            write_scan: false,
        }
    }
}

impl RuntimeConfig {
    /// RAM held back from the policy for the store: the chunk it holds
    /// partly filled and the one it requests ahead of need (two 16 KiB
    /// chunks). The store's slack beyond that grows with what it holds, and
    /// is charged per compressed page ([`CHARGE`](crate::CHARGE)), so a
    /// program whose pages all fit uncompressed has the whole RAM for them,
    /// as under the kernel's own paging; a reserve that grew with the RAM
    /// was paid by programs that never used the cache (docs/results.md).
    pub fn store_reserve(&self) -> u64 {
        2 * Self::STORE_CHUNK as u64
    }

    /// The smallest RAM budget for which evicted pages are compressed in
    /// the helper process ([`RuntimeConfig::background_compression`]) in a
    /// process that charges ccvm's own memory to the budget (see
    /// `accounting`): the helper and its ring hold about 1.2 MiB, which
    /// under 32 MiB is more than the speed is worth (docs/results.md).
    pub const HELPER_MIN_RAM: u64 = 32 << 20;

    /// The smallest RAM budget a region takes: the store's reserve, and
    /// room for a few pages beside it so that paging can make progress.
    pub const MIN_RAM_BYTES: u64 = 64 << 10;

    /// Bytes of each chunk the compression cache's store takes: small, so
    /// that a cache that holds little takes little.
    pub const STORE_CHUNK: usize = 16 * 1024;

    /// Checks the settings that no type rules out: the one check every way
    /// of making a region goes through.
    ///
    /// # Errors
    ///
    /// [`RuntimeError::Config`], saying which setting is wrong and what it
    /// may be.
    ///
    /// ```
    /// use ccvm_runtime::RuntimeConfig;
    /// assert!(RuntimeConfig::default().validate().is_ok());
    /// let config = RuntimeConfig { trap_share: 1.5, ..RuntimeConfig::default() };
    /// assert!(config.validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<(), RuntimeError> {
        let wrong = |what: String| Err(RuntimeError::Config(what));
        if self.ram_bytes < Self::MIN_RAM_BYTES {
            return wrong(format!(
                "a RAM budget of {} bytes is below the least ccvm pages with; give at least 64K",
                self.ram_bytes
            ));
        }
        if !(0.0..=1.0).contains(&self.trap_share) {
            return wrong(format!("trap share {} is not between 0 and 1", self.trap_share));
        }
        if self.trap_share > 0.0 && !self.move_frames {
            return wrong(
                "trapped pages are kept in the shadow of moved frames: a trap share cannot be used with --copy-frames"
                    .into(),
            );
        }
        if !(0.0..=1.0).contains(&self.uncompressed_share) {
            return wrong(format!(
                "uncompressed share {} is not between 0 and 1",
                self.uncompressed_share
            ));
        }
        Ok(())
    }

    /// How the RAM budget divides (see [`ccvm_policy::RamSplit`]).
    pub fn ram_split(&self) -> ccvm_policy::RamSplit {
        ccvm_policy::RamSplit {
            ram_bytes: self.ram_bytes,
            reserve: self.store_reserve(),
        }
    }

    /// The budget the policy manages: the RAM less the store's reserve.
    pub fn policy_budget(&self) -> ccvm_policy::Budget {
        self.ram_split().policy_budget(ccvm_codec::PAGE_SIZE as u64)
    }
}

/// Where and what to trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceConfig {
    /// The trace file to write.
    pub path: PathBuf,
    /// What is traced (the header's workload, seed; region and window
    /// sizes are filled in by the runtime).
    pub workload: String,
    /// The workload's seed.
    pub seed: u64,
    /// The workload's run time without paging or tracing, nanoseconds.
    pub run_time_ns: u64,
}

/// Why a region could not be made or finished.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// userfaultfd is not usable by this process, or lacks what the fault
    /// mode needs.
    #[error(transparent)]
    Userfaultfd(#[from] crate::uffd::UffdError),
    /// The kernel lacks a needed userfaultfd feature.
    #[error("this kernel lacks {0}; ccvm needs Linux 5.7 or later")]
    KernelTooOld(&'static str),
    /// A setting is wrong.
    #[error("{0}")]
    Config(String),
    /// No policy has that name.
    #[error(transparent)]
    Policy(#[from] ccvm_policy::UnknownPolicy),
    /// The compression cache's store cannot be made as configured.
    #[error(transparent)]
    Store(#[from] ccvm_store::ConfigError),
    /// The swap file failed.
    #[error(transparent)]
    Swap(#[from] crate::swap::SwapError),
    /// A system call failed.
    #[error("{what}: {source}")]
    Os {
        /// What was being done.
        what: &'static str,
        /// The cause.
        source: std::io::Error,
    },
    /// Writing the trace failed.
    #[error("trace file {path}: {source}")]
    Trace {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

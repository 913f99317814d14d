//! What every subcommand's flags are parsed with: sizes, durations, shares
//! and positive numbers as clap value parsers, and the output flags every
//! report takes.

use std::time::Duration;

use clap::{Args, ValueEnum};

/// Output format of a report.
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum Format {
    /// An aligned text table.
    Table,
    /// JSON.
    Json,
    /// CSV with a header line.
    Csv,
}

/// The output flags every report takes.
#[derive(Args)]
pub struct OutputArgs {
    /// Print JSON instead of a table.
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print CSV instead of a table.
    #[arg(long)]
    csv: bool,
}

impl OutputArgs {
    /// The format the flags ask for.
    pub fn format(&self) -> Format {
        if self.json {
            Format::Json
        } else if self.csv {
            Format::Csv
        } else {
            Format::Table
        }
    }
}

/// Parses a byte count: a number with an optional binary suffix (K, M, G;
/// KiB, MiB, GiB), e.g. `64M` or `4096`.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size; write e.g. 64M, 1G or 4096"))?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1u64,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => return Err(format!("unknown size unit '{other}' in '{s}'; use K, M, G or T")),
    };
    let bytes = value * scale as f64;
    if bytes > MAX_BYTES as f64 {
        return Err(format!("'{s}' is too large: sizes go up to 64T"));
    }
    Ok(bytes as u64)
}

/// The largest size any flag takes: 64 TiB, the part of a 47-bit user
/// address space a region can hope to find free.
pub const MAX_BYTES: u64 = 1 << 46;

/// This machine's memory, bytes.
pub fn machine_ram() -> u64 {
    use nix::unistd::{sysconf, SysconfVar};
    let value = |v| sysconf(v).ok().flatten().unwrap_or(0).max(0) as u64;
    value(SysconfVar::_PHYS_PAGES).saturating_mul(value(SysconfVar::PAGE_SIZE))
}

/// Memory free for a new allocation now (`MemAvailable`), bytes.
pub fn available_ram() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or_else(machine_ram, |kib| kib << 10)
}

/// `bytes` in the largest binary unit that keeps one decimal, e.g. `23.4G`.
pub fn human(bytes: u64) -> String {
    let (value, unit) = match bytes {
        b if b >= 1 << 40 => (b as f64 / (1u64 << 40) as f64, "T"),
        b if b >= 1 << 30 => (b as f64 / (1u64 << 30) as f64, "G"),
        b if b >= 1 << 20 => (b as f64 / (1u64 << 20) as f64, "M"),
        b => (b as f64 / 1024.0, "K"),
    };
    format!("{value:.1}{unit}")
}

/// Refuses a paging budget (`--ram`) below the 64K a region needs or
/// above this machine's memory.
pub fn check_budget(flag: &str, bytes: u64) -> anyhow::Result<()> {
    let least = ccvm_runtime::RuntimeConfig::MIN_RAM_BYTES;
    if bytes < least {
        anyhow::bail!(
            "{flag} {} is below the least ccvm pages with; give at least {}",
            human(bytes),
            human(least)
        );
    }
    check_ram(flag, bytes)
}

/// Refuses a memory budget (`--ram`, a filesystem's `--size`) above this
/// machine's memory: what is budgeted there must fit in RAM.
pub fn check_ram(flag: &str, bytes: u64) -> anyhow::Result<()> {
    let ram = machine_ram();
    if bytes > ram {
        anyhow::bail!(
            "{flag} {} is more than this machine's {} of memory",
            human(bytes),
            human(ram)
        );
    }
    Ok(())
}

/// Refuses what a simulator would allocate in proportion to `bytes` (a
/// simulated cache's size, pages of a store) beyond `share` of this
/// machine's memory.
pub fn check_simulated(flag: &str, bytes: u64, share: f64) -> anyhow::Result<()> {
    let most = (machine_ram() as f64 * share) as u64;
    if bytes > most {
        anyhow::bail!(
            "{flag} {}: simulating it would take more than this machine's memory allows (at most {} here)",
            human(bytes),
            human(most)
        );
    }
    Ok(())
}

/// Refuses a region size that is not a whole number of 4 KiB pages.
pub fn check_pages(flag: &str, bytes: u64) -> anyhow::Result<()> {
    if !bytes.is_multiple_of(4096) {
        anyhow::bail!(
            "{flag} {bytes} is not a whole number of 4096-byte pages; use e.g. {}",
            human(bytes.div_ceil(4096) * 4096)
        );
    }
    Ok(())
}

/// Refuses to start paging where userfaultfd cannot be had, before any
/// other work is done (a plain reference run, reading a file).
pub fn check_userfaultfd() -> anyhow::Result<()> {
    ccvm_runtime::uffd::Uffd::open(false)?;
    Ok(())
}

/// Parses a duration that is kept in 32 bits of nanoseconds (up to 4 s).
pub fn duration_u32_ns(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d.as_nanos() > u128::from(u32::MAX) {
        return Err(format!("'{s}' is too long: at most 4s"));
    }
    Ok(d)
}

/// Parses an emulated disk latency: at most 10 s a read.
pub fn disk_latency(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d > Duration::from_secs(10) {
        return Err(format!("'{s}' is too long for a disk read: at most 10s"));
    }
    Ok(d)
}

/// A compression ratio: 1 or more (a page never grows in the cache).
pub fn ratio(s: &str) -> Result<f64, String> {
    let x = number(s)?;
    if x.is_finite() && x >= 1.0 {
        Ok(x)
    } else {
        Err(format!("must be a compression ratio of 1 or more, got {s}"))
    }
}

/// Parses a duration such as `5ms` or `100us`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("'{s}' is not a duration ({e}); write e.g. 5ms or 100us"))
}

fn number(s: &str) -> Result<f64, String> {
    s.trim().parse().map_err(|_| format!("'{s}' is not a number"))
}

/// A finite number above 0.
pub fn positive(s: &str) -> Result<f64, String> {
    let x = number(s)?;
    if x.is_finite() && x > 0.0 {
        Ok(x)
    } else {
        Err(format!("must be a positive number, got {s}"))
    }
}

/// A finite number, 0 or more.
pub fn non_negative(s: &str) -> Result<f64, String> {
    let x = number(s)?;
    if x.is_finite() && x >= 0.0 {
        Ok(x)
    } else {
        Err(format!("must be zero or more, got {s}"))
    }
}

/// A share: a number from 0 to 1.
pub fn share(s: &str) -> Result<f64, String> {
    let x = number(s)?;
    if (0.0..=1.0).contains(&x) {
        Ok(x)
    } else {
        Err(format!("must be between 0 and 1, got {s}"))
    }
}

/// The paging flags `ccvm run` and `ccvm exec` share, each parsed into its
/// type here; their defaults are [`RuntimeConfig`]'s (a test checks that
/// they agree).
///
/// [`RuntimeConfig`]: ccvm_runtime::RuntimeConfig
#[derive(Args, Debug)]
pub struct PagingArgs {
    /// Share of the RAM budget for uncompressed pages (fixed policy), 0 to 1.
    #[arg(long, default_value_t = 0.5, value_parser = share)]
    pub uncompressed_share: f64,
    #[arg(long, default_value_t = ccvm_policy::PolicySpec::default(), help = ccvm_policy::help())]
    pub policy: ccvm_policy::PolicySpec,
    /// Cost of a disk fault for the adaptive policy (plus --disk-latency), until disk faults are measured:
    /// an untraced run then prices one at its measured service time plus the fault mode's delivery.
    #[arg(long, value_parser = parse_duration, default_value = "100us")]
    pub disk_cost: Duration,
    /// Cost of a compression-cache fault for the adaptive policy, until cache faults are measured (as
    /// disk faults are; a traced run keeps both constants, so that its simulation makes the same choices).
    /// Default: the fault mode's delivery plus 6 µs of service (10 µs in signal mode, 22 µs in thread mode).
    #[arg(long, value_parser = parse_duration)]
    pub cache_cost: Option<Duration>,
    /// Codec of the compression cache (see `ccvm codecs`). The default, pagelz, is ccvm's LZ77 format for
    /// pages: smaller than LZO1X-1 on the corpus, never larger than LZ4, and decoded on the fault path in about 3 µs.
    #[arg(long, default_value_t = ccvm_codec::CodecId::default())]
    pub codec: ccvm_codec::CodecId,
    /// Directory for the swap file (default: the system's temp directory).
    #[arg(long)]
    pub swap_dir: Option<std::path::PathBuf>,
    /// How faults are served: signal (in the faulting thread, fast; under `exec` every system call is
    /// intercepted so that its buffers in the heap are in memory first) or thread (a handler thread woken by
    /// the kernel; slower faults, but system calls into paged memory work without interception, as for
    /// programs whose kernel work outlives a call, such as io_uring or AIO).
    #[arg(long, default_value_t = ccvm_runtime::FaultMode::default())]
    pub fault_mode: ccvm_runtime::FaultMode,
    /// Copy page frames in and out (UFFDIO_COPY, write-protect and MADV_DONTNEED) instead of moving them with
    /// UFFDIO_MOVE, which is the default where the kernel has it (Linux 6.8+) and about a third cheaper.
    #[arg(long)]
    pub copy_frames: bool,
    /// Compress evicted pages in the faulting thread instead of in a helper process on another core (the
    /// default).
    #[arg(long)]
    pub compress_in_fault: bool,
    /// Share of uncompressed pages kept trapped (unmapped, uncompressed) so that their touches are seen: an
    /// approximation of LRU for resident pages (frames must move: not with --copy-frames). 0 replaces them in
    /// fault order.
    #[arg(long, default_value_t = 0.0, value_parser = share)]
    pub trap_share: f64,
    /// Most pages read ahead from the compression cache when cache faults walk through memory in order (the
    /// window doubles from 2 while they do); 0 turns read-ahead off.
    #[arg(long, default_value_t = ccvm_runtime::DEFAULT_READAHEAD)]
    pub readahead: usize,
    /// Read which resident pages were written lately from the page tables (asynchronous write protection and
    /// PAGEMAP_SCAN, Linux 6.7) and keep them, second-chance style, instead of replacing resident pages in
    /// fault order. Reads of untouched pages then get writable zeros.
    #[arg(long)]
    pub write_scan: bool,
}

impl PagingArgs {
    /// The region settings these flags give, with a RAM budget of `ram`
    /// bytes, checked.
    ///
    /// # Errors
    ///
    /// A budget below the least ccvm pages with, or settings that do not go
    /// together (see [`ccvm_runtime::RuntimeConfig::validate`]).
    pub fn config(&self, ram: u64) -> anyhow::Result<ccvm_runtime::RuntimeConfig> {
        check_budget("--ram", ram)?;
        let config = ccvm_runtime::RuntimeConfig {
            ram_bytes: ram,
            uncompressed_share: self.uncompressed_share,
            policy: self.policy.clone(),
            codec: self.codec,
            swap_dir: self.swap_dir.clone(),
            disk_cost: self.disk_cost,
            cache_cost: self.cache_cost,
            fault_mode: self.fault_mode,
            move_frames: !self.copy_frames,
            background_compression: !self.compress_in_fault,
            trap_share: self.trap_share,
            readahead: self.readahead,
            write_scan: self.write_scan,
            ..ccvm_runtime::RuntimeConfig::default()
        };
        config.validate()?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_shares_and_positive_numbers() {
        assert_eq!(parse_bytes("64M"), Ok(64 << 20));
        assert_eq!(parse_bytes("1.5K"), Ok(1536));
        assert!(parse_bytes("12Q").unwrap_err().contains("unknown size unit"));
        assert!(parse_bytes("99999999999999G").unwrap_err().contains("too large"));
        assert!(parse_bytes("-1M").is_err());
        assert_eq!(parse_bytes("64T"), Ok(1 << 46));
        assert!(duration_u32_ns("5s").unwrap_err().contains("at most 4s"));
        assert_eq!(duration_u32_ns("4295ms").ok(), None);
        assert!(ratio("0.5").is_err() && ratio("1").is_ok());
        assert!(check_pages("--size", 1048577).unwrap_err().to_string().contains("1.0M"));
        assert!(check_ram("--ram", u64::MAX).is_err());
        assert_eq!(share("0.25"), Ok(0.25));
        assert!(share("1.5").unwrap_err().contains("between 0 and 1"));
        assert!(positive("0").is_err() && positive("-1").is_err() && positive("inf").is_err());
        assert_eq!(non_negative("0"), Ok(0.0));
        assert!(non_negative("x").unwrap_err().contains("not a number"));
    }

    #[derive(clap::Parser)]
    struct Paging {
        #[command(flatten)]
        paging: PagingArgs,
    }

    /// The command line's defaults are the runtime's: one default per
    /// setting.
    #[test]
    fn paging_defaults_are_the_runtimes() {
        use clap::Parser;
        let ram = 64 << 20;
        let got = Paging::parse_from(["ccvm"]).paging.config(ram).unwrap();
        let want = ccvm_runtime::RuntimeConfig {
            ram_bytes: ram,
            ..ccvm_runtime::RuntimeConfig::default()
        };
        assert_eq!(format!("{got:?}"), format!("{want:?}"));
        let bad = Paging::parse_from(["ccvm", "--trap-share", "0.5", "--copy-frames"]);
        assert!(bad
            .paging
            .config(ram)
            .unwrap_err()
            .to_string()
            .contains("--copy-frames"));
        assert!(Paging::try_parse_from(["ccvm", "--codec", "gzip"]).is_err());
        assert!(Paging::try_parse_from(["ccvm", "--policy", "fixed101"]).is_err());
    }
}

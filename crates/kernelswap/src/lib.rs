//! The kernel's own compressed swap, set up for one run and torn down
//! after it: a memory cgroup that limits a program ([`Cgroup`]), and zram
//! ([`Zram`]) or zswap ([`Zswap`]) behind it, and a program run to its end
//! in such a group, measured ([`run_measured`]). `ccvm bench kernel` and
//! `ccvm bench faults` compare ccvm against what these set up.
//!
//! The primary abstraction is the setup guard: each piece is a value
//! whose `Drop` undoes it. The key decision is that nothing is ever set up
//! over what was there: [`check_machine`] refuses a machine with swap in
//! use, so an error or a panic half-way leaves the machine as it was, and
//! a comparison never measures a baseline someone else configured.
//!
//! ```no_run
//! use ccvm_kernelswap::{check_machine, Cgroup, Zram};
//! check_machine()?; // root, a memory cgroup, no swap in use
//! let _zram = Zram::new("lz4", 256 << 20)?;
//! let group = Cgroup::new(Some(128 << 20))?; // the program's limit
//! // ... run the program in `group`, then read what it and zram held:
//! let (_, pool_max) = Zram::memory();
//! println!("{} bytes at most", group.peak_bytes() + pool_max);
//! # Ok::<(), anyhow::Error>(())
//! ```
#![deny(missing_docs)]

mod child;

pub use child::{run_measured, Measured};

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};

const ZRAM: &str = "/sys/block/zram0";
const ZSWAP: &str = "/sys/module/zswap/parameters";

fn write(path: impl AsRef<Path>, value: &str) -> anyhow::Result<()> {
    let path = path.as_ref();
    std::fs::write(path, value).with_context(|| format!("writing '{value}' to {}", path.display()))
}

fn read(path: impl AsRef<Path>) -> anyhow::Result<String> {
    let path = path.as_ref();
    Ok(std::fs::read_to_string(path)
        .with_context(|| format!("reading {}", path.display()))?
        .trim()
        .to_string())
}

fn run(program: &str, args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("running {program} (is util-linux installed?)"))?;
    if !out.status.success() {
        bail!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Checks that this process may set up swap and that none is set up.
///
/// # Errors
///
/// One line saying what is missing: root, a memory cgroup, or a machine
/// with no swap in use.
pub fn check_machine() -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("ccvm bench kernel sets up zram, zswap and a memory cgroup: run it as root");
    }
    let swaps = read("/proc/swaps")?;
    if let Some(line) = swaps.lines().nth(1) {
        bail!(
            "refusing to run over an existing swap setup ({}); swapoff it first",
            line.split_whitespace().next().unwrap_or(line)
        );
    }
    Cgroup::root()?;
    Ok(())
}

/// Which cgroup hierarchy the memory controller is on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

/// A memory cgroup made for one run, removed on drop.
pub struct Cgroup {
    path: PathBuf,
    version: Version,
}

impl Cgroup {
    fn root() -> anyhow::Result<(PathBuf, Version)> {
        let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers");
        if read(v2).is_ok_and(|c| c.split_whitespace().any(|x| x == "memory")) {
            return Ok(("/sys/fs/cgroup".into(), Version::V2));
        }
        let v1 = Path::new("/sys/fs/cgroup/memory");
        if v1.join("memory.limit_in_bytes").exists() {
            return Ok((v1.into(), Version::V1));
        }
        bail!("no memory cgroup controller found under /sys/fs/cgroup (v1 or v2)")
    }

    /// Makes a cgroup limited to `limit` bytes of memory, or unlimited (a
    /// meter: what its processes are charged, at its peak).
    pub fn new(limit: Option<u64>) -> anyhow::Result<Cgroup> {
        let (root, version) = Self::root()?;
        if version == Version::V2 {
            // Children of the root get the memory controller only if the
            // root hands it down.
            let _ = write(root.join("cgroup.subtree_control"), "+memory");
        }
        let path = root.join(format!("ccvm-bench-{}", std::process::id()));
        std::fs::create_dir(&path).with_context(|| format!("making the cgroup {}", path.display()))?;
        let cgroup = Cgroup { path, version };
        let value = limit.map_or("max".to_string(), |l| l.to_string());
        match version {
            Version::V1 => write(
                cgroup.path.join("memory.limit_in_bytes"),
                if limit.is_some() { &value } else { "-1" },
            )?,
            Version::V2 => {
                write(cgroup.path.join("memory.max"), &value)?;
                write(cgroup.path.join("memory.high"), "max")?;
            }
        }
        Ok(cgroup)
    }

    /// Makes an unlimited cgroup inside the calling process's own memory
    /// cgroup, named `name-PID`: a meter for the processes this one
    /// starts. Being nested, their charges still count in every group
    /// above, so a run that is itself measured from outside (as `ccvm
    /// bench kernel` measures `ccvm exec`) is measured the same.
    ///
    /// # Errors
    ///
    /// No memory cgroup controller, no write access to the own group
    /// (not root), or a cgroup v2 whose own group does not hand the memory
    /// controller down (its `memory.peak` then does not exist): the caller
    /// goes without the meter.
    ///
    /// ```no_run
    /// let meter = ccvm_kernelswap::Cgroup::meter_within_own("ccvm-exec")?;
    /// // ... start a process that joins `meter.procs()`, wait for it ...
    /// println!("{} bytes at most", meter.peak_bytes());
    /// # Ok::<(), anyhow::Error>(())
    /// ```
    pub fn meter_within_own(name: &str) -> anyhow::Result<Cgroup> {
        let (root, version) = Self::root()?;
        let own = read("/proc/self/cgroup")?;
        let rel = own
            .lines()
            .find_map(|line| {
                let mut fields = line.splitn(3, ':');
                let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
                let memory = match version {
                    Version::V1 => controllers.split(',').any(|c| c == "memory"),
                    Version::V2 => controllers.is_empty(),
                };
                memory.then(|| path.trim_start_matches('/').to_string())
            })
            .context("no memory cgroup named in /proc/self/cgroup")?;
        let path = root.join(rel).join(format!("{name}-{}", std::process::id()));
        std::fs::create_dir(&path).with_context(|| format!("making the cgroup {}", path.display()))?;
        let cgroup = Cgroup { path, version };
        if !cgroup.path.join(cgroup.peak_file()).exists() {
            bail!("{} has no memory controller", cgroup.path.display());
        }
        Ok(cgroup)
    }

    /// Moves the calling process into the group: what it is charged from
    /// now on (and what the processes it starts from now on are charged)
    /// counts here.
    ///
    /// # Errors
    ///
    /// The group's `cgroup.procs` refuses the write.
    pub fn join(&self) -> anyhow::Result<()> {
        write(self.procs(), "0")
    }

    /// Moves every process in the group (the caller that joined it, and
    /// those it started meanwhile and that still run, such as ccvm's
    /// helper) back to the group this one was made in, so that this one
    /// can be removed; dropping the group does this too. What they were
    /// charged while here stays counted in the group above.
    ///
    /// # Errors
    ///
    /// The group's processes cannot be read, or the enclosing group's
    /// `cgroup.procs` refuses one of them.
    pub fn leave(&self) -> anyhow::Result<()> {
        let parent = self
            .path
            .parent()
            .context("a cgroup has a parent")?
            .join("cgroup.procs");
        for pid in read(self.procs())?.split_whitespace() {
            // A process that ended meanwhile is no longer there to move.
            if let Err(e) = write(&parent, pid) {
                if Path::new(&format!("/proc/{pid}")).exists() {
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    fn peak_file(&self) -> &'static str {
        match self.version {
            Version::V1 => "memory.max_usage_in_bytes",
            Version::V2 => "memory.peak",
        }
    }

    /// The most memory the group's processes were charged at once, bytes
    /// (v1 `memory.max_usage_in_bytes`, v2 `memory.peak`): the kernel's own
    /// meter, pages of files they read included.
    pub fn peak_bytes(&self) -> u64 {
        read(self.path.join(self.peak_file()))
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// Reads the group's `memory.stat`, which flushes the memory
    /// controller's per-CPU statistics (see `docs/kernel.md`: reclaim
    /// judges the inactive list by them, and left stale under thrashing they
    /// make it scan nothing and give the charge up to the OOM killer).
    pub fn flush_stats(&self) {
        let _ = std::fs::read(self.path.join("memory.stat"));
    }

    /// The file a process writes its pid to, to join.
    pub fn procs(&self) -> PathBuf {
        self.path.join("cgroup.procs")
    }

    /// Whether zswap's pool is charged to the cgroup (v2 counts it in
    /// `memory.current`; on v1 it is kernel memory outside the limit).
    pub fn charges_zswap(&self) -> bool {
        self.version == Version::V2
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // A group with a task in it cannot be removed. What still runs in
        // it (the caller of `join`, ccvm's helper, a process the program
        // left running) goes back to the enclosing group first; one that
        // is exiting meanwhile is waited for, a second at most.
        let _ = self.leave();
        for _ in 0..100 {
            match std::fs::remove_dir(&self.path) {
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                _ => return,
            }
        }
    }
}

/// Whether this machine has a zram device (loading the module if need be).
pub fn zram_available() -> bool {
    if !Path::new(ZRAM).exists() {
        let _ = Command::new("modprobe").arg("zram").output();
    }
    Path::new(ZRAM).exists()
}

/// zram as the only swap device, with `algorithm`, and swap readahead
/// off (`vm.page-cluster` 0); reset on drop.
///
/// Readahead is off because that is how zram is deployed (Android, ChromeOS
/// and Fedora's zram-generator all set `page-cluster` to 0: reading a
/// neighbour from zram costs a decompression, not a seek saved), and
/// because with the default 8-page readahead this kernel's v1 memory cgroup
/// OOM-killed every attempt of `graph:256M:160M` and `hashindex:256M:112M`,
/// where with 0 they complete.
pub struct Zram {
    page_cluster_was: String,
}

const PAGE_CLUSTER: &str = "/proc/sys/vm/page-cluster";

impl Zram {
    /// Sets zram0 up as swap of `disksize` bytes compressing with `algorithm`.
    pub fn new(algorithm: &str, disksize: u64) -> anyhow::Result<Zram> {
        if read(format!("{ZRAM}/disksize"))? != "0" {
            bail!("refusing to touch /dev/zram0: it is already set up (disksize is not 0); reset it first");
        }
        let algorithms = read(format!("{ZRAM}/comp_algorithm"))?;
        if !algorithms
            .split_whitespace()
            .any(|a| a.trim_matches(['[', ']']) == algorithm)
        {
            bail!("zram here does not offer {algorithm} (it offers: {algorithms})");
        }
        let zram = Zram {
            page_cluster_was: read(PAGE_CLUSTER)?,
        };
        write(PAGE_CLUSTER, "0")?;
        write(format!("{ZRAM}/comp_algorithm"), algorithm)?;
        write(format!("{ZRAM}/disksize"), &disksize.to_string())?;
        run("mkswap", &["/dev/zram0"])?;
        run("swapon", &["/dev/zram0"])?;
        Ok(zram)
    }

    /// zram's memory now and at its peak: (`mem_used_total`, `mem_used_max`).
    pub fn memory() -> (u64, u64) {
        let stat = read(format!("{ZRAM}/mm_stat")).unwrap_or_default();
        let f: Vec<u64> = stat.split_whitespace().filter_map(|x| x.parse().ok()).collect();
        (f.get(2).copied().unwrap_or(0), f.get(4).copied().unwrap_or(0))
    }
}

impl Drop for Zram {
    fn drop(&mut self) {
        let _ = run("swapoff", &["/dev/zram0"]);
        let _ = write(format!("{ZRAM}/reset"), "1");
        let _ = write(PAGE_CLUSTER, &self.page_cluster_was);
    }
}

/// zswap in front of a swap file; both undone on drop.
pub struct Zswap {
    /// The swap file: mode 0600 from its creation, under an unguessable
    /// name, removed when this value drops (after `swapoff`).
    file: tempfile::NamedTempFile,
    was: Vec<(&'static str, String)>,
}

impl Zswap {
    /// Makes a swap file of `bytes` in `dir` and turns zswap on with `compressor`.
    pub fn new(dir: &Path, bytes: u64, compressor: &str) -> anyhow::Result<Zswap> {
        let file = ccvm_output::private_file(dir, "ccvm-bench-swap-")?;
        let mut was = Vec::new();
        for p in ["enabled", "compressor"] {
            was.push((p, read(Path::new(ZSWAP).join(p))?));
        }
        let z = Zswap { file, was };
        {
            let f = z.file.as_file();
            // Swap files must have no holes: write them out.
            let chunk = vec![0u8; 1 << 20];
            let mut left = bytes;
            while left > 0 {
                let n = left.min(chunk.len() as u64) as usize;
                std::io::Write::write_all(&mut &*f, &chunk[..n])?;
                left -= n as u64;
            }
            f.sync_all()?;
        }
        let path = z.file.path().to_string_lossy().into_owned();
        run("mkswap", &[&path])?;
        run("swapon", &[&path])?;
        write(Path::new(ZSWAP).join("compressor"), compressor)?;
        write(Path::new(ZSWAP).join("enabled"), "Y")?;
        Ok(z)
    }

    /// zswap's pool size now, bytes (from debugfs; 0 if it cannot be read).
    pub fn pool_bytes() -> u64 {
        let debug = Path::new("/sys/kernel/debug/zswap/pool_total_size");
        if !debug.exists() {
            let _ = Command::new("mount")
                .args(["-t", "debugfs", "none", "/sys/kernel/debug"])
                .output();
        }
        read(debug).ok().and_then(|s| s.parse().ok()).unwrap_or(0)
    }
}

impl Drop for Zswap {
    fn drop(&mut self) {
        let _ = run("swapoff", &[&self.file.path().to_string_lossy()]);
        for (p, v) in &self.was {
            let v = v
                .split_whitespace()
                .find(|w| w.starts_with('['))
                .map(|w| w.trim_matches(['[', ']']).to_string())
                .unwrap_or_else(|| v.clone());
            let _ = write(Path::new(ZSWAP).join(p), &v);
        }
    }
}

//! `ccvm mount`: a compressed RAM filesystem (CRAMES's, paper 003 §3) at a
//! directory, served until it is unmounted or the command is interrupted.

use std::path::Path;

use ccvm_ramfs::Fs;
use ccvm_store::{Store, StoreConfig};

/// Mounts a filesystem of at most `size` bytes of memory at `dir`.
pub fn mount(dir: &Path, size: u64, codec: ccvm_codec::CodecId, allocator: &str) -> anyhow::Result<()> {
    let config = StoreConfig {
        codec,
        allocator: allocator.into(),
        memory_limit: usize::try_from(size).unwrap_or(usize::MAX),
        ..StoreConfig::default()
    };
    let store = Store::new(config).map_err(|e| anyhow::anyhow!("{e}"))?;
    let (uid, gid) = (nix::unistd::getuid().as_raw(), nix::unistd::getgid().as_raw());
    let fs = Fs::new(store, size, uid, gid);
    ccvm_ramfs::check_mount_point(dir).map_err(anyhow::Error::msg)?;
    ccvm_ramfs::unmount_on_signal(dir).map_err(anyhow::Error::msg)?;
    eprintln!(
        "ccvm: mounting a compressed RAM filesystem of {size} bytes at {} (umount it, or Ctrl-C, to stop)",
        dir.display()
    );
    let u = ccvm_ramfs::mount(fs, dir).map_err(|e| {
        if e.contains("Permission denied") && !nix::unistd::geteuid().is_root() {
            anyhow::anyhow!(
                "{e}: mounting FUSE as a user needs fusermount3 (apt-get install fuse3) and read-write access to \
                 /dev/fuse; or run as root"
            )
        } else {
            anyhow::Error::msg(e)
        }
    })?;
    eprintln!(
        "ccvm: {} unmounted; it held {} bytes of files in {} blocks, compressed to {} bytes, in {} bytes of memory ({:.2}x)",
        dir.display(),
        u.file_bytes,
        u.blocks,
        u.compressed,
        u.memory,
        u.file_bytes as f64 / u.memory.max(1) as f64
    );
    Ok(())
}

/// `ccvm mount`'s arguments.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// An empty directory to mount on.
    dir: std::path::PathBuf,
    /// Most memory the filesystem's blocks may take, all counted, e.g. 256M; a write past it fails with ENOSPC.
    #[arg(long, value_parser = crate::args::parse_bytes, default_value = "256M")]
    size: u64,
    /// Codec of the blocks (see `ccvm codecs`).
    #[arg(long, default_value = "lz4")]
    codec: ccvm_codec::CodecId,
    /// Slot allocator of the store (rm, zs, ...).
    #[arg(long, default_value = "zs")]
    allocator: String,
}

/// Runs `ccvm mount` with the arguments the command line gave.
pub(crate) fn run_args(a: Args) -> anyhow::Result<()> {
    if a.size < 1 << 20 {
        anyhow::bail!(
            "--size {}: a filesystem needs at least 1M to hold a file",
            crate::args::human(a.size)
        );
    }
    crate::args::check_ram("--size", a.size)?;
    mount(&a.dir, a.size, a.codec, &a.allocator)
}

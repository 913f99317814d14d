//! Recording line traces of unmodified programs: Valgrind's Lackey tool
//! reports every instruction and data access, and the contents of the lines
//! touched are read from the traced process's memory as it runs.
//!
//! # How, and what it costs in fidelity
//!
//! `valgrind --tool=lackey --trace-mem=yes` writes one text line per
//! instruction (`I`) and per load, store or modify (`L`, `S`, `M`) to a
//! FIFO this module reads. Lackey runs the program's code in the same
//! address space as Valgrind's own, at the program's own addresses, so the
//! contents of a referenced line can be read from the process with
//! `process_vm_readv`. References are gathered in chunks of
//! [`CHUNK`]; at the end of each, the lines first seen or written in the
//! chunk are read in one call and written to the trace (before the
//! chunk's first reference to them) when their contents changed. The
//! contents are therefore those of a moment slightly after the reference:
//! at most one chunk plus what sits in the FIFO (about 64 KiB of text, a
//! few thousand accesses) later, which is the price of not stopping the
//! program at every access; the compressibility of a line rarely changes
//! that fast. A modify counts as one write; instruction fetches are
//! counted (the trace's instruction counts) but not traced as references,
//! so the caches simulated are data caches; a line that cannot be read
//! (unmapped by the time it is read) has no contents and counts as
//! incompressible.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};

use nix::sys::uio::{process_vm_readv, RemoteIoVec};
use nix::unistd::Pid;

use crate::trace::{Header, LineTraceWriter, Totals};
use crate::LINE;

/// References gathered before their lines' contents are read.
pub const CHUNK: usize = 4096;

/// What a recording did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recorded {
    /// What the trace holds.
    pub totals: Totals,
    /// Lines whose contents could not be read.
    pub unreadable: u64,
    /// The reference limit stopped the program.
    pub stopped_at_limit: bool,
}

/// Runs `program` with `args` under Lackey and writes its line trace to
/// `out`, stopping it after `limit` references if given.
///
/// # Errors
///
/// Valgrind missing or failing to start the program (with what to do),
/// I/O errors, or the program failing (its exit status).
pub fn record<W: Write>(
    program: &OsString,
    args: &[OsString],
    out: W,
    limit: Option<u64>,
) -> io::Result<(W, Recorded)> {
    record_with(program, args, out, limit, &mut |_| {})
}

/// As [`record`], telling `started` Valgrind's process id as soon as it
/// runs (so that a caller can forward signals to it: interrupted, the
/// recording then ends through its ordinary error path and cleans up).
///
/// # Errors
///
/// As [`record`].
pub fn record_with<W: Write>(
    program: &OsString,
    args: &[OsString],
    out: W,
    limit: Option<u64>,
    started: &mut dyn FnMut(u32),
) -> io::Result<(W, Recorded)> {
    let dir = tempfile::tempdir()?;
    let fifo = dir.path().join("lackey");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR)?;
    let mut log_file = OsString::from("--log-file=");
    log_file.push(fifo.as_os_str());
    let mut child = Command::new("valgrind")
        .args(["--tool=lackey", "--trace-mem=yes"])
        .arg(log_file)
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .spawn()
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot run valgrind ({e}): install it (apt-get install valgrind)"),
            )
        })?;
    started(child.id());
    // Opening the FIFO blocks until Valgrind opens its end; if Valgrind
    // dies first it never would, so the open runs on its own thread while
    // this one watches the child (and unblocks the open if it exits).
    let reader = open_fifo(&fifo, &mut child)?;
    let header = Header {
        program: program.to_string_lossy().into_owned(),
        args: args.iter().map(|a| a.to_string_lossy().into_owned()).collect(),
        method: format!(
            "valgrind lackey --trace-mem=yes; line contents read with process_vm_readv at the end of each \
             chunk of {CHUNK} references (up to a few thousand accesses late); data references only"
        ),
    };
    let writer = LineTraceWriter::new(out, &header)?;
    let mut rec = Recorder {
        pid: Pid::from_raw(child.id() as i32),
        writer,
        chunk: Vec::with_capacity(CHUNK),
        known: HashMap::new(),
        unreadable: 0,
        gap: 0,
    };
    let mut stopped_at_limit = false;
    for text in BufReader::with_capacity(1 << 16, reader).split(b'\n') {
        let text = text?;
        if rec.parse(&text)? && limit.is_some_and(|l| rec.writer.totals().references + rec.chunk.len() as u64 >= l) {
            stopped_at_limit = true;
            break;
        }
    }
    rec.flush_chunk()?;
    if stopped_at_limit {
        let _ = child.kill();
    }
    let status = child.wait()?;
    if !stopped_at_limit && !status.success() {
        return Err(io::Error::other(format!(
            "the program under valgrind ended with {status}"
        )));
    }
    let Recorder { writer, unreadable, .. } = rec;
    let totals = writer.totals();
    let out = writer.finish()?;
    Ok((
        out,
        Recorded {
            totals,
            unreadable,
            stopped_at_limit,
        },
    ))
}

fn open_fifo(fifo: &std::path::Path, child: &mut Child) -> io::Result<std::fs::File> {
    let path = fifo.to_path_buf();
    let opener = std::thread::spawn(move || std::fs::File::open(path));
    loop {
        if opener.is_finished() {
            return opener.join().expect("the opener does not panic");
        }
        if let Some(status) = child.try_wait()? {
            // Unblock the opener, then report why there is nothing to read.
            let _ = std::fs::OpenOptions::new().write(true).open(fifo);
            let _ = opener.join();
            return Err(io::Error::other(format!(
                "valgrind ended ({status}) before tracing: is the program's path right?"
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

struct Recorder<W: Write> {
    pid: Pid,
    writer: LineTraceWriter<W>,
    /// (line, write, instructions before it)
    chunk: Vec<(u64, bool, u64)>,
    /// A hash of each line's contents as last written to the trace.
    known: HashMap<u64, u64>,
    unreadable: u64,
    gap: u64,
}

impl<W: Write> Recorder<W> {
    /// One line of Lackey's output; true when it added references.
    fn parse(&mut self, text: &[u8]) -> io::Result<bool> {
        let t = text.trim_ascii();
        let (kind, rest) = match t {
            [k @ (b'I' | b'L' | b'S' | b'M'), b' ', rest @ ..] => (*k, rest.trim_ascii_start()),
            _ => return Ok(false), // Valgrind's own messages ("==pid== ...")
        };
        if kind == b'I' {
            self.gap += 1;
            return Ok(false);
        }
        let bad = || io::Error::other(format!("unexpected lackey output: {}", String::from_utf8_lossy(text)));
        let comma = rest.iter().position(|&b| b == b',').ok_or_else(bad)?;
        let addr = std::str::from_utf8(&rest[..comma])
            .ok()
            .and_then(|s| u64::from_str_radix(s, 16).ok())
            .ok_or_else(bad)?;
        let size: u64 = std::str::from_utf8(&rest[comma + 1..])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(bad)?;
        let (first, last) = (addr / LINE as u64, (addr + size.max(1) - 1) / LINE as u64);
        for line in first..=last {
            self.chunk.push((line, kind != b'L', std::mem::take(&mut self.gap)));
        }
        if self.chunk.len() >= CHUNK {
            self.flush_chunk()?;
        }
        Ok(true)
    }

    fn flush_chunk(&mut self) -> io::Result<()> {
        // The lines whose contents may have changed: first seen, or written.
        let mut wanted: Vec<u64> = self
            .chunk
            .iter()
            .filter(|&&(line, write, _)| write || !self.known.contains_key(&line))
            .map(|&(line, _, _)| line)
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        let mut images = vec![[0u8; LINE]; wanted.len()];
        let readable = self.read_lines(&wanted, &mut images);
        let mut fresh: HashMap<u64, usize> = HashMap::new();
        for (i, &line) in wanted.iter().enumerate() {
            if !readable[i] {
                self.unreadable += 1;
                continue;
            }
            let h = xxhash_rust::xxh3::xxh3_64(&images[i]);
            if self.known.insert(line, h) != Some(h) {
                fresh.insert(line, i);
            }
        }
        for k in 0..self.chunk.len() {
            let (line, write, gap) = self.chunk[k];
            if let Some(i) = fresh.remove(&line) {
                self.writer.contents(line, &images[i])?;
            }
            self.writer.reference(line, write, gap)?;
        }
        self.chunk.clear();
        Ok(())
    }

    /// Reads `lines` from the process; which ones could be read.
    fn read_lines(&self, lines: &[u64], images: &mut [[u8; LINE]]) -> Vec<bool> {
        let mut ok = vec![false; lines.len()];
        let mut at = 0;
        while at < lines.len() {
            let n = (lines.len() - at).min(1024);
            let remote: Vec<RemoteIoVec> = lines[at..at + n]
                .iter()
                .map(|&l| RemoteIoVec {
                    base: (l * LINE as u64) as usize,
                    len: LINE,
                })
                .collect();
            let mut local: Vec<io::IoSliceMut> =
                images[at..at + n].iter_mut().map(|b| io::IoSliceMut::new(b)).collect();
            // A failed line stops the call there: count what was read,
            // skip the line that failed, go on after it.
            let read = process_vm_readv(self.pid, &mut local, &remote).unwrap_or(0) / LINE;
            for flag in &mut ok[at..at + read] {
                *flag = true;
            }
            at += if read == n { n } else { read + 1 };
        }
        ok
    }
}

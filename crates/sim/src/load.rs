//! Loading a trace for replay.

use ccvm_codec::PAGE_SIZE;
use std::path::Path;

use ccvm_trace::{Event, Footer, Header, TraceError, TraceReader};

/// Why a simulation could not run.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The trace file is unreadable or damaged.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// A setting is wrong.
    #[error("{0}")]
    Config(String),
}

/// A trace held in memory for replay: the references in order and, for
/// each, the page images recorded before it.
pub struct Trace {
    /// What was traced.
    pub header: Header,
    /// The end record.
    pub footer: Footer,
    /// Page of each reference.
    pub refs: Vec<u32>,
    /// (references before it, page, image id), in trace order.
    pub images: Vec<(u64, u32, u32)>,
    /// (references before it, first page, pages): ranges the program
    /// dropped, in trace order.
    pub discards: Vec<(u64, u32, u32)>,
    /// Distinct images.
    pub image_count: u32,
}

impl Trace {
    /// Reads the references and image events of `path` (not the image
    /// bytes: [`crate::CodecCosts`] measures those).
    ///
    /// # Errors
    ///
    /// A [`SimError::Trace`] naming the file and offset if it is damaged.
    pub fn load(path: &Path) -> Result<Trace, SimError> {
        let mut r = TraceReader::open(path)?;
        let (mut refs, mut images, mut discards) = (Vec::new(), Vec::new(), Vec::new());
        let mut image_count = 0u32;
        while let Some(e) = r.next_event()? {
            match e {
                Event::Reference { page, .. } => refs.push(page as u32),
                Event::NewImage { .. } => image_count += 1,
                Event::Image { page, id } => images.push((refs.len() as u64, page as u32, id as u32)),
                // Pages past the region are none of its pages: the range is
                // cut to what a page number can name.
                Event::Discard { page, pages } if page < u64::from(u32::MAX) => {
                    let pages = pages.min(u64::from(u32::MAX) - page);
                    discards.push((refs.len() as u64, page as u32, pages as u32));
                }
                Event::Discard { .. } => {}
            }
        }
        let footer = r.footer().expect("read to the end");
        let trace = Trace {
            header: r.header().clone(),
            footer,
            refs,
            images,
            discards,
            image_count,
        };
        trace.check_size(path)?;
        Ok(trace)
    }

    /// Refuses a trace whose region would make the simulator's per-page
    /// tables (a few bytes a page) far larger than the trace itself: what
    /// a file says may cost memory in proportion to the file, no more.
    /// Regions up to [`MAX_SPARSE_PAGES`] pages are always accepted.
    fn check_size(&self, path: &Path) -> Result<(), SimError> {
        let named = self.refs.iter().map(|&p| p as u64 + 1).max().unwrap_or(0);
        let pages = (self.header.region_bytes / PAGE_SIZE as u64).max(named);
        let limit = MAX_SPARSE_PAGES.max(8 * (self.refs.len() + self.images.len()) as u64);
        if pages > limit {
            return Err(SimError::Config(format!(
                "{}: the trace spans {pages} pages ({} GiB) with only {} references; ccvm simulates at most {limit} \
                 pages for a trace of this length (is the file damaged, or its page numbers addresses?)",
                path.display(),
                pages >> 18,
                self.refs.len()
            )));
        }
        Ok(())
    }

    /// Pages in the traced region.
    pub fn pages(&self) -> usize {
        (self.header.region_bytes / PAGE_SIZE as u64) as usize
    }
}

impl Trace {
    /// Imports a plain page-reference trace: one page number per line, or
    /// CSV whose header names a `page` column (other columns ignored).
    /// Numbers are decimal or `0x` hexadecimal; blank lines and lines
    /// starting with `#` are skipped. Each page gets one page image, whose
    /// cost [`crate::CodecCosts::uniform`] sets; `run_time_ns` is the
    /// program's own run time (0 if unknown: no interesting region).
    ///
    /// # Errors
    ///
    /// A [`SimError::Config`] naming the file and line of the first entry
    /// that is not a page number.
    pub fn import_plain(path: &Path, run_time_ns: u64) -> Result<Trace, SimError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| SimError::Config(format!("{}: cannot read: {e}", path.display())))?;
        let mut column = None;
        let mut refs = Vec::new();
        let mut ids: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            if column.is_none() {
                if let Some(c) = fields.iter().position(|f| f.eq_ignore_ascii_case("page")) {
                    column = Some(c);
                    continue;
                }
                if fields.len() > 1 {
                    return Err(SimError::Config(format!(
                        "{}: line {}: a CSV trace needs a header naming a `page` column",
                        path.display(),
                        i + 1
                    )));
                }
                column = Some(0);
            }
            let field = fields.get(column.unwrap_or(0)).copied().unwrap_or("");
            let parsed = match field.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => field.parse(),
            };
            let page = parsed.ok().and_then(|p| u32::try_from(p).ok()).ok_or_else(|| {
                SimError::Config(format!(
                    "{}: line {}: {} is not a page number below 2^32",
                    path.display(),
                    i + 1,
                    quote(field)
                ))
            })?;
            let next = ids.len() as u32;
            ids.entry(page).or_insert(next);
            refs.push(page);
        }
        let pages = refs.iter().max().map_or(0, |&m| m as u64 + 1);
        let mut images: Vec<(u64, u32, u32)> = ids.iter().map(|(&p, &id)| (0, p, id)).collect();
        images.sort_unstable();
        let trace = Trace {
            header: Header {
                workload: path
                    .file_stem()
                    .map_or("imported".into(), |s| s.to_string_lossy().into_owned()),
                seed: 0,
                region_bytes: pages * PAGE_SIZE as u64,
                window_pages: 0,
            },
            footer: Footer {
                run_time_ns,
                references: refs.len() as u64,
                images: ids.len() as u64,
            },
            image_count: ids.len() as u32,
            refs,
            images,
            discards: Vec::new(),
        };
        trace.check_size(path)?;
        Ok(trace)
    }
}

/// `text` as an error message may show it: quoted, control characters
/// escaped (no terminal escapes reach the screen), and cut after 40
/// characters.
fn quote(text: &str) -> String {
    let shown: String = text.chars().take(40).flat_map(char::escape_debug).collect();
    let cut = if text.chars().count() > 40 { "..." } else { "" };
    format!("'{shown}{cut}'")
}

/// The most pages a trace's region may span whatever its length (16 GiB
/// of 4 KiB pages; per-page tables of about 64 MiB). Longer traces may span
/// eight pages a reference.
pub const MAX_SPARSE_PAGES: u64 = 1 << 22;

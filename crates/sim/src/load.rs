//! Loading a trace for replay.

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
        let (mut refs, mut images) = (Vec::new(), Vec::new());
        let mut image_count = 0u32;
        while let Some(e) = r.next_event()? {
            match e {
                Event::Reference { page, .. } => refs.push(page as u32),
                Event::NewImage { .. } => image_count += 1,
                Event::Image { page, id } => images.push((refs.len() as u64, page as u32, id as u32)),
            }
        }
        let footer = r.footer().expect("read to the end");
        Ok(Trace {
            header: r.header().clone(),
            footer,
            refs,
            images,
            image_count,
        })
    }

    /// Pages in the traced region.
    pub fn pages(&self) -> usize {
        (self.header.region_bytes / 4096) as usize
    }
}

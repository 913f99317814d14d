//! Finding codecs by name.

use crate::{
    baseline,
    bdi::Bdi,
    copy::Copy,
    cpack::CPack,
    delta16::Delta16,
    exepack2::{Exepack2, Exepack2Fast},
    fpc::Fpc,
    hybrid::Hybrid,
    iterated::Iterated,
    lzrw1::Lzrw1,
    pagelz::PageLz,
    pbpm::Pbpm,
    wk,
    wordlz::WordLz,
    xmatch::XMatch,
    Codec,
};

/// A codec's name, what it is, and how to make one.
pub struct CodecInfo {
    /// The name [`by_name`] accepts.
    pub name: &'static str,
    /// One line: what the codec is and where it comes from.
    pub about: &'static str,
    /// Whether the codec is meant for general memory pages; `false` for
    /// codecs made for one kind of data (Delta16's sensor samples), which
    /// benchmarks leave out unless asked for by name.
    pub general: bool,
    /// Makes a new instance.
    pub make: fn() -> Box<dyn Codec>,
}

/// Every codec ccvm has, papers' codecs first, then ccvm's hybrid, then baselines.
pub const CODECS: &[CodecInfo] = &[
    CodecInfo {
        name: "wkdm",
        about: "WKdm: 16-word direct-mapped dictionary, partial matches (paper 000 §2.3)",
        general: true,
        make: || Box::new(wk::WkDm::new()),
    },
    CodecInfo {
        name: "wkdm256",
        about: "WKdm256: WKdm with a 256-word dictionary and byte-wide indices (ccvm's)",
        general: true,
        make: || Box::new(wk::WkDm256::new()),
    },
    CodecInfo {
        name: "wk4x4",
        about: "WK4x4: 4x4 set-associative LRU dictionary (paper 000 §2.3)",
        general: true,
        make: || Box::new(wk::Wk4x4::new()),
    },
    CodecInfo {
        name: "lzrw1",
        about: "LZRW1: Williams' fast LZ77 (the codec of earlier compressed-caching studies)",
        general: true,
        make: || Box::new(Lzrw1::new()),
    },
    CodecInfo {
        name: "pbpm",
        about: "PBPM: pattern-based partial match, 2-way dictionary (paper 003 §4.2)",
        general: true,
        make: || Box::new(Pbpm::new()),
    },
    CodecInfo {
        name: "cpack",
        about: "C-Pack: zero patterns + 16-word FIFO dictionary, for cache lines and pages (paper 003 §6.6)",
        general: true,
        make: || Box::new(CPack::new()),
    },
    CodecInfo {
        name: "fpc",
        about: "FPC: frequent-pattern word prefixes, the cache-line codec C-Pack is compared with (paper 003 §6)",
        general: true,
        make: || Box::new(Fpc::new()),
    },
    CodecInfo {
        name: "xmatch",
        about: "X-Match: 16-tuple move-to-front dictionary with partial matches, the line codec 003 and 002 compare (003 §6.9.2)",
        general: true,
        make: || Box::new(XMatch::new()),
    },
    CodecInfo {
        name: "bdi",
        about: "BDI: base-delta-immediate per 64-byte line, for compressed caches (paper 003 §6's kind)",
        general: true,
        make: || Box::new(Bdi::new()),
    },
    CodecInfo {
        name: "copy",
        about: "no compression: the page as it is (the control of experiments)",
        general: false,
        make: || Box::new(Copy),
    },
    CodecInfo {
        name: "delta16",
        about: "Delta16: 16-bit sample deltas within MAXBITS=6 or escapes (paper 003 §5.4)",
        general: false,
        make: || Box::new(Delta16::default()),
    },
    CodecInfo {
        name: "exepack2",
        about: "Exepack2: OS/2's byte-granular LZ77 page format (paper 004 §3.2)",
        general: true,
        make: || Box::new(Exepack2::new()),
    },
    CodecInfo {
        name: "exepack2-fast",
        about: "Exepack2's format with a fast greedy encoder (one hash probe per position)",
        general: true,
        make: || Box::new(Exepack2Fast::new()),
    },
    CodecInfo {
        name: "iterated",
        about: "OS/2 iterated-data pages: repeated byte patterns (paper 004 §2.2)",
        general: true,
        make: || Box::new(Iterated::new()),
    },
    CodecInfo {
        name: "wordlz",
        about: "ccvm WordLZ: LZ matches at any byte, literal words coded WK-style",
        general: true,
        make: || Box::new(WordLz::new()),
    },
    CodecInfo {
        name: "pagelz",
        about: "ccvm PageLz: LZ77 with two-byte sequences for the 15 commonest shapes on pages",
        general: true,
        make: || Box::new(PageLz::new()),
    },
    CodecInfo {
        name: "hybrid",
        about: "ccvm hybrid: WKdm, LZ4 for pages WKdm leaves large",
        general: true,
        make: || Box::new(Hybrid::new()),
    },
    CodecInfo {
        name: "hybrid-pagelz",
        about: "ccvm hybrid: WKdm, PageLz for pages WKdm leaves large",
        general: true,
        make: || Box::new(Hybrid::with_pagelz()),
    },
    CodecInfo {
        name: "lz4",
        about: "LZ4 (liblz4), default acceleration",
        general: true,
        make: || Box::new(baseline::Lz4::new()),
    },
    CodecInfo {
        name: "lz4-fast",
        about: "LZ4 (liblz4), acceleration 8",
        general: true,
        make: || Box::new(baseline::Lz4::fast()),
    },
    CodecInfo {
        name: "lzo1x-1",
        about: "LZO1X-1 (liblzo2)",
        general: true,
        make: || Box::new(baseline::Lzo1x1::new()),
    },
    CodecInfo {
        name: "zstd-1",
        about: "zstd level 1 (libzstd)",
        general: true,
        make: || Box::new(baseline::Zstd::new(1)),
    },
    CodecInfo {
        name: "zstd-3",
        about: "zstd level 3 (libzstd)",
        general: true,
        make: || Box::new(baseline::Zstd::new(3)),
    },
];

/// The codec the live runtime and the command line use unless told
/// otherwise, named once here. PageLz: `docs/codecs.md` ("Why PageLz is
/// the default") has the live runs that chose it over the hybrid.
///
/// ```
/// assert!(ccvm_codec::by_name(ccvm_codec::DEFAULT_CODEC).is_ok());
/// ```
pub const DEFAULT_CODEC: &str = "pagelz";

/// Makes a codec by name.
///
/// # Errors
///
/// A one-line message listing the known names when `name` is not one.
///
/// ```
/// assert_eq!(ccvm_codec::by_name("pbpm").unwrap().name(), "pbpm");
/// assert!(ccvm_codec::by_name("gzip").is_err());
/// ```
pub fn by_name(name: &str) -> Result<Box<dyn Codec>, String> {
    crate::CodecId::by_name(name)
        .map(crate::CodecId::make)
        .map_err(|e| e.to_string())
}

/// The names of all codecs, in [`CODECS`] order.
pub fn names() -> Vec<&'static str> {
    CODECS.iter().map(|c| c.name).collect()
}

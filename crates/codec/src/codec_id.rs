//! [`CodecId`]: a codec chosen by name once, at the edge (the command
//! line, the C interface, settings read back from JSON), and carried as a
//! value from there on, so that no layer below looks a name up again or
//! meets a name that is not a codec.

use std::fmt;
use std::str::FromStr;

use crate::registry::{names, CODECS, DEFAULT_CODEC};
use crate::{Codec, CodecInfo};

/// A codec of the registry ([`CODECS`]): what its name stands for, checked.
/// Copy, and serialized as its name, so that settings written as JSON read
/// back as the same codec.
///
/// ```
/// use ccvm_codec::CodecId;
/// let id: CodecId = "lz4".parse().unwrap();
/// assert_eq!(id.name(), "lz4");
/// assert_eq!(id.make().name(), "lz4");
/// assert_eq!(CodecId::default().name(), ccvm_codec::DEFAULT_CODEC);
/// assert!("gzip".parse::<CodecId>().unwrap_err().to_string().contains("choose one of"));
/// ```
#[derive(Clone, Copy)]
pub struct CodecId(&'static CodecInfo);

/// A name that is not a codec's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown codec '{name}': choose one of {known}", known = names().join(", "))]
pub struct UnknownCodec {
    /// The name given.
    pub name: String,
}

impl CodecId {
    /// The codec called `name`.
    ///
    /// # Errors
    ///
    /// [`UnknownCodec`], whose message lists the known names.
    pub fn by_name(name: &str) -> Result<CodecId, UnknownCodec> {
        CODECS
            .iter()
            .find(|c| c.name == name)
            .map(CodecId)
            .ok_or_else(|| UnknownCodec { name: name.into() })
    }

    /// Its name, as [`CodecId::by_name`] takes it.
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// What the registry says of it.
    pub fn info(self) -> &'static CodecInfo {
        self.0
    }

    /// A new instance of the codec.
    pub fn make(self) -> Box<dyn Codec> {
        (self.0.make)()
    }
}

impl Default for CodecId {
    /// [`DEFAULT_CODEC`].
    fn default() -> Self {
        CodecId::by_name(DEFAULT_CODEC).expect("the default codec is registered")
    }
}

impl PartialEq for CodecId {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for CodecId {}

impl fmt::Debug for CodecId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CodecId({})", self.name())
    }
}

impl fmt::Display for CodecId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CodecId {
    type Err = UnknownCodec;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CodecId::by_name(s)
    }
}

impl serde::Serialize for CodecId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for CodecId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        CodecId::by_name(&name).map_err(serde::de::Error::custom)
    }
}

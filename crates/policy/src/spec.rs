//! [`PolicySpec`]: a policy chosen by name once, at the edge, and carried
//! as a checked value from there on.

use std::fmt;
use std::str::FromStr;

use crate::{by_name, is_known, Budget, Params, Policy, UnknownPolicy, DEFAULT_POLICY};

/// A policy [`by_name`] knows: one of [`POLICIES`](crate::POLICIES), or
/// `fixedN`. Serialized as its name.
///
/// ```
/// use ccvm_policy::{Budget, Costs, Params, PolicySpec};
/// let spec: PolicySpec = "fixed23".parse().unwrap();
/// let budget = Budget { ram_bytes: 1 << 20, page_size: 4096 };
/// let params = Params { uncompressed_share: 0.5, costs: Costs { disk_ns: 5e6, codec_ns: 1e5, compress_share: 0.5 } };
/// assert_eq!(spec.make(budget, params).name(), "fixed");
/// assert_eq!(PolicySpec::default().name(), ccvm_policy::DEFAULT_POLICY);
/// assert!("lfu".parse::<PolicySpec>().is_err());
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct PolicySpec(String);

impl PolicySpec {
    /// The policy called `name`.
    ///
    /// # Errors
    ///
    /// [`UnknownPolicy`], whose message lists the known names.
    pub fn by_name(name: &str) -> Result<PolicySpec, UnknownPolicy> {
        if is_known(name) {
            Ok(PolicySpec(name.into()))
        } else {
            Err(UnknownPolicy(name.into()))
        }
    }

    /// Its name, as [`PolicySpec::by_name`] takes it.
    pub fn name(&self) -> &str {
        &self.0
    }

    /// The policy, made for `budget`.
    pub fn make(&self, budget: Budget, params: Params) -> Box<dyn Policy> {
        by_name(&self.0, budget, params).expect("a spec names a known policy")
    }
}

impl Default for PolicySpec {
    /// [`DEFAULT_POLICY`].
    fn default() -> Self {
        PolicySpec(DEFAULT_POLICY.into())
    }
}

impl fmt::Debug for PolicySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PolicySpec({})", self.0)
    }
}

impl fmt::Display for PolicySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for PolicySpec {
    type Err = UnknownPolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PolicySpec::by_name(s)
    }
}

impl serde::Serialize for PolicySpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for PolicySpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        PolicySpec::by_name(&name).map_err(serde::de::Error::custom)
    }
}

//! ccvm's trace-driven simulator: replays a trace of page references
//! through a [`ccvm_policy::Policy`], the same code the live runtime runs,
//! and counts what each level served and what paging cost.
//!
//! The primary abstractions are [`Trace`] (a trace loaded for replay),
//! [`CodecCosts`] (each page image's compressed size and codec times) and
//! [`simulate`]; [`lru_faults`] gives plain LRU's faults at every memory
//! size from one stack-distance pass; [`plan::SweepPlan`] plans and runs
//! the study over many of them.
//!
//! # Design
//!
//! The simulator is a second mechanism under the policy: where the runtime
//! moves real pages, it moves page numbers, charging each compression the
//! size and time measured for the content the page had then (the newest
//! image the trace recorded for it). The policy cannot tell the two apart,
//! which is what makes the simulator's predictions about the runtime
//! testable.
#![deny(missing_docs)]

mod costs;
mod load;
pub mod plan;
mod run;
mod stack;
pub mod sweep;

pub use costs::CodecCosts;
pub use load::{SimError, Trace, MAX_SPARSE_PAGES};
pub use run::{simulate, SimConfig, SimResult};
pub use stack::lru_faults;

//! How memory is counted against a policy: the [`Budget`] a policy
//! manages, and how a stored page is charged to it ([`Charge`]), the one
//! rule the live runtime and the simulator both apply so that what one
//! counts the other counts.

/// The memory a policy manages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// RAM for uncompressed pages and the compression cache together, bytes.
    pub ram_bytes: u64,
    /// Bytes per page.
    pub page_size: u64,
}

/// Bookkeeping bytes charged to a policy's budget per stored page. The
/// compressed store counts what it really holds exactly (`ccvm_store`'s
/// `Stats::metadata_bytes`): per page, the 16-byte table entry, an 8-byte record in its chunk's
/// member list and a 16-byte reserve for the allocator's books, about 45
/// bytes in all with the resource map. The charge stays at the 64 bytes
/// that every simulation and hand-worked test so far has used, a bound on
/// that.
pub const ENTRY_BYTES: usize = 64;

/// The share of a compressed page's bytes charged on top of them for the
/// store's slack (chunk granularity, fragmentation between slots): 1/8.
/// With 1/16 a live run took 7% more disk faults than its simulation
/// (graph in 512 KiB, the live-equals-simulated test); with 1/8 every count
/// there agrees within 1.5%.
pub const SLACK_DIVISOR: usize = 8;

/// How a page the store holds in `len` bytes is charged to a policy's
/// budget: the one rule the live runtime and the simulator both apply, so
/// that what one counts the other counts.
///
/// ```
/// use ccvm_policy::Charge;
/// assert_eq!(Charge::Entry.of(1600), 1600 + 64);
/// assert_eq!(Charge::Slack.of(1600), 1600 + 200 + 64);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charge {
    /// Its bytes and its [`ENTRY_BYTES`] of bookkeeping, as paper 000's
    /// simulations count.
    Entry,
    /// Also a [`SLACK_DIVISOR`] share of its bytes for the store's slack:
    /// a budget that must cover the store's real memory (the live
    /// runtime's). Charging slack per page, rather than holding memory
    /// back for it, leaves a cache that holds little costing little.
    Slack,
}

impl Charge {
    /// What a page stored in `len` bytes costs, bytes.
    pub fn of(self, len: usize) -> u64 {
        let slack = match self {
            Charge::Entry => 0,
            Charge::Slack => len / SLACK_DIVISOR,
        };
        (len + slack + ENTRY_BYTES) as u64
    }
}

/// Bytes past which a compressed 4096-byte page is kept raw (and charged
/// as a whole page): three quarters of a page, as zram keeps "huge" pages.
/// The compressed store's default, and the bound of the simulator's codec
/// measurements.
pub const HUGE_THRESHOLD: usize = 4096 * 3 / 4;

/// How a region's RAM budget divides: the store's `reserve` held back,
/// the rest the policy's [`Budget`], the store's own ceiling above what
/// the policy lets the cache hold, and the whole RAM as the ceiling on
/// everything charged. The live runtime makes every part from this, and
/// the simulator's budget is its [`RamSplit::policy_budget`].
///
/// ```
/// use ccvm_policy::RamSplit;
/// let split = RamSplit { ram_bytes: 1 << 20, reserve: 32 << 10 };
/// assert_eq!(split.policy_budget(4096).ram_bytes, (1 << 20) - (32 << 10));
/// assert_eq!(split.store_limit(400_000), 500_000 + (32 << 10));
/// assert_eq!(split.policy_ram(1 << 20), split.policy_budget(4096).ram_bytes);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RamSplit {
    /// The whole budget: uncompressed pages, the compression cache and
    /// ccvm's own memory together, bytes.
    pub ram_bytes: u64,
    /// What the policy does not manage: the store's partly filled chunk
    /// and the one it requests ahead of need, bytes.
    pub reserve: u64,
}

impl RamSplit {
    /// The budget the policy manages: the RAM less the reserve.
    pub fn policy_budget(self, page_size: u64) -> Budget {
        Budget {
            ram_bytes: self.policy_ram(self.ram_bytes),
            page_size,
        }
    }

    /// What the policy manages while this process may hold `allowance` of
    /// the RAM (less than `ram_bytes` when processes share it): the
    /// allowance less the reserve.
    pub fn policy_ram(self, allowance: u64) -> u64 {
        allowance.saturating_sub(self.reserve)
    }

    /// The store's own memory ceiling when the policy lets the cache hold
    /// `cache_limit` bytes: a quarter more for slack beyond the charged
    /// share (the RAM ceiling decides before it is reached), and the
    /// reserve; at least 1.
    pub fn store_limit(self, cache_limit: u64) -> u64 {
        (cache_limit + cache_limit / 4 + self.reserve).max(1)
    }
}

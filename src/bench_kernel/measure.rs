//! Measuring one case: plain memory first (its checksum is the one every
//! other run must give, its peak the footprint), then the kernel at each
//! limit, then ccvm at each RAM the plan gives or at the totals the kernel
//! was measured to hold.

use anyhow::bail;

use super::{ccvm_run, median, mib, plain_in, Case, KernelRow, Plan, KERNEL_ATTEMPTS};
use ccvm_kernelswap::{Cgroup, Zram, Zswap};

/// The completed runs of one row.
pub(super) struct Measured {
    pub walls: Vec<f64>,
    pub faults: Vec<f64>,
    pub memory: Vec<f64>,
    pub ok: bool,
}

impl Measured {
    pub fn new() -> Measured {
        Measured {
            walls: Vec::new(),
            faults: Vec::new(),
            memory: Vec::new(),
            ok: true,
        }
    }

    /// The row: medians of the runs, slowdown against `plain_s`.
    pub fn row(self, case: &str, system: String, setting: u64, plain_s: f64, oom_kills: usize) -> KernelRow {
        let runs = self.walls.len();
        let (wall_s, memory) = if runs == 0 {
            (f64::NAN, f64::NAN)
        } else {
            (median(self.walls), median(self.memory))
        };
        KernelRow {
            case: case.to_string(),
            system,
            setting_mib: mib(setting),
            memory_mib: mib(memory as u64),
            wall_s,
            slowdown: wall_s / plain_s,
            paging_s: (wall_s - plain_s).max(0.0),
            faults: if runs == 0 { 0 } else { median(self.faults) as u64 },
            checksum_ok: self.ok && runs > 0,
            runs,
            oom_kills,
        }
    }
}

/// One case being measured, once plain memory has been.
pub(super) struct CaseBench<'a> {
    plan: &'a Plan,
    case: &'a Case,
    pub label: String,
    /// The checksum of plain memory's first run.
    want: u64,
    /// Plain memory's median wall time, seconds.
    pub plain_s: f64,
    /// Plain memory's median peak, bytes.
    footprint: u64,
}

impl<'a> CaseBench<'a> {
    /// Runs `case` in plain memory, metered by a cgroup without a limit;
    /// adds its row to `rows`.
    pub fn plain(plan: &'a Plan, case: &'a Case, rows: &mut Vec<KernelRow>) -> anyhow::Result<CaseBench<'a>> {
        let label = case.label();
        eprintln!("{label}: plain memory");
        let mut plain = Measured::new();
        let mut want = None;
        for _ in 0..plan.runs {
            let meter = Cgroup::new(None)?;
            let (run, held) = plain_in(case, Some(&meter), || 0)?;
            let want = *want.get_or_insert(run.checksum);
            plain.ok &= run.checksum == want;
            plain.walls.push(run.wall_s);
            plain.faults.push(0.0);
            plain.memory.push(held as f64);
        }
        let want = want.expect("at least one run");
        let plain_s = median(plain.walls.clone());
        let footprint = median(plain.memory.clone()) as u64;
        rows.push(plain.row(&label, "plain memory".into(), footprint, plain_s, 0));
        Ok(CaseBench {
            plan,
            case,
            label,
            want,
            plain_s,
            footprint,
        })
    }

    /// The row of the kernel setup `kernel` at cgroup limit `limit`: runs
    /// the kill took are retried, up to [`KERNEL_ATTEMPTS`] per run wanted,
    /// and counted.
    pub fn kernel(&self, kernel: &str, limit: u64) -> anyhow::Result<KernelRow> {
        let label = &self.label;
        eprintln!("{label}: kernel {kernel}, limit {}M", limit >> 20);
        let mut m = Measured::new();
        let mut oom_kills = 0;
        for _attempt in 0..KERNEL_ATTEMPTS * self.plan.runs {
            if m.walls.len() == self.plan.runs {
                break;
            }
            match self.kernel_run(kernel, limit)? {
                Ok((run, held)) => {
                    m.ok &= run.checksum == self.want;
                    m.walls.push(run.wall_s);
                    m.faults.push(run.major_faults as f64);
                    m.memory.push(held as f64);
                }
                Err(e) => {
                    eprintln!("{label}: kernel {kernel} at {}M: {e:#}", limit >> 20);
                    oom_kills += 1;
                }
            }
        }
        Ok(m.row(label, format!("kernel {kernel}"), limit, self.plain_s, oom_kills))
    }

    /// One run under the kernel setup `kernel`: the outer error is a setup
    /// that failed, the inner one a run that did.
    #[allow(clippy::type_complexity)]
    fn kernel_run(&self, kernel: &str, limit: u64) -> anyhow::Result<anyhow::Result<(super::PlainRun, u64)>> {
        let (case, footprint) = (self.case, self.footprint);
        if let Some(alg) = kernel.strip_prefix("zram-") {
            let _zram = Zram::new(alg, 2 * footprint)?;
            let cg = Cgroup::new(Some(limit))?;
            Ok(plain_in(case, Some(&cg), || 0).map(|(run, held)| (run, held + Zram::memory().1)))
        } else if let Some(alg) = kernel.strip_prefix("zswap-") {
            let _zswap = Zswap::new(&self.plan.swap_dir, 2 * footprint, alg)?;
            let cg = Cgroup::new(Some(limit))?;
            let charged = cg.charges_zswap();
            Ok(plain_in(case, Some(&cg), Zswap::pool_bytes).map(|(run, held)| {
                // v2 charges the pool to the group: counted once.
                (run, if charged { cg.peak_bytes() } else { held })
            }))
        } else {
            bail!("unknown kernel setup '{kernel}'; use zram-ALGORITHM or zswap-ALGORITHM");
        }
    }

    /// ccvm's row at `--ram ram`; returns the memory it was measured to
    /// hold, MiB.
    fn ccvm_at(&self, ram: u64, rows: &mut Vec<KernelRow>) -> anyhow::Result<f64> {
        eprintln!("{}: ccvm, --ram {:.0}M", self.label, mib(ram));
        let mut m = Measured::new();
        for _ in 0..self.plan.runs {
            let r = ccvm_run(self.case, ram, &self.plan.ccvm_args, self.want)?;
            m.walls.push(r.wall_s);
            m.faults.push(r.faults as f64);
            m.memory.push(r.memory as f64);
            m.ok &= r.ok;
        }
        let row = m.row(&self.label, "ccvm".into(), ram, self.plain_s, 0);
        let held = row.memory_mib;
        rows.push(row);
        Ok(held)
    }

    /// ccvm's rows: at each RAM the plan names, or else at each limit and
    /// then at each total the first zram setup held (its rows from `first`
    /// on in `rows`), less what ccvm was measured to hold beyond its budget
    /// at the limits (the program's own memory outside its heap, which no
    /// budget covers, and what ccvm's own exceeds its charge by), and
    /// once more where such a run held whole MiB less than the kernel did:
    /// ccvm given what the kernel took, as a user comparing them would.
    pub fn ccvm(&self, rows: &mut Vec<KernelRow>, first: usize) -> anyhow::Result<()> {
        if !self.plan.ccvm_rams.is_empty() {
            let mut rams = self.plan.ccvm_rams.clone();
            rams.sort_unstable();
            rams.dedup();
            for ram in rams {
                self.ccvm_at(ram, rows)?;
            }
            return Ok(());
        }
        let mut done: Vec<u64> = Vec::new();
        let mut beyond = 0.0f64;
        for &ram in &self.case.limits {
            let held = self.ccvm_at(ram, rows)?;
            beyond = beyond.max(held - mib(ram));
            done.push(ram);
        }
        let first_zram = self.plan.kernels.iter().find(|k| k.starts_with("zram-"));
        let mut totals: Vec<(u64, f64)> = rows[first..]
            .iter()
            .filter(|r| r.runs > 0 && first_zram.is_some_and(|k| r.system == format!("kernel {k}")))
            .map(|r| {
                (
                    ((r.memory_mib - beyond.max(0.0)).floor().max(1.0) as u64) << 20,
                    r.memory_mib,
                )
            })
            .filter(|(ram, _)| !done.contains(ram))
            .collect();
        totals.sort_by_key(|&(ram, _)| ram);
        totals.dedup_by_key(|&mut (ram, _)| ram);
        for (ram, total) in totals {
            let held = self.ccvm_at(ram, rows)?;
            done.push(ram);
            // The estimate of what ccvm holds beyond its budget is the
            // largest seen, so a run may hold whole MiB less than the
            // kernel did: once more with them, as a user would.
            let short = (total - held).floor();
            let again = ram + ((short.max(0.0) as u64) << 20);
            if short >= 1.0 && !done.contains(&again) {
                self.ccvm_at(again, rows)?;
                done.push(again);
            }
        }
        Ok(())
    }
}

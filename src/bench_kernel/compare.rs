//! What a comparison reports besides its table: the kernel's settings,
//! each system's best time at the memory the others held, and a figure of
//! time against measured memory per case.

use super::{KernelRow, Plan};

/// The kernel setups' configuration, as the table's readers need it.
pub(super) fn kernel_config(plan: &Plan) -> String {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|v| v.trim().to_string())
            .unwrap_or("?".into())
    };
    format!(
        "kernel: {}; vm.swappiness {}, vm.page-cluster 0 under zram ({} otherwise); zram disksize twice the \
         footprint; zswap behind a swap file in {}, max_pool_percent {}; transparent huge pages off for every run",
        read("/proc/sys/kernel/osrelease"),
        read("/proc/sys/vm/swappiness"),
        read("/proc/sys/vm/page-cluster"),
        plan.swap_dir.display(),
        read("/sys/module/zswap/parameters/max_pool_percent"),
    )
}

/// The best wall time `system` reached in `rows` with at most `memory` MiB
/// measured: the lower envelope of its (memory, time) points.
pub(super) fn envelope<'a>(rows: &'a [KernelRow], system: &str, memory: f64) -> Option<&'a KernelRow> {
    rows.iter()
        .filter(|r| r.system == system && r.runs > 0 && r.memory_mib <= memory)
        .min_by(|a, b| a.wall_s.total_cmp(&b.wall_s))
}

/// For each kernel point that paged, ccvm's best time within the same
/// measured memory, and the ratio of their paging times.
pub(super) fn print_comparison(rows: &[KernelRow]) -> anyhow::Result<()> {
    outln!("\nAt equal measured memory (ccvm's best run holding no more than the kernel did):")?;
    for k in rows
        .iter()
        .filter(|r| r.system.starts_with("kernel") && r.runs > 0 && r.faults > 0)
    {
        let same_case: Vec<KernelRow> = rows.iter().filter(|r| r.case == k.case).cloned().collect();
        match envelope(&same_case, "ccvm", k.memory_mib) {
            Some(c) => outln!(
                "{}: {} at {:.0}M held {:.1} MiB, paging {:.2} s; ccvm --ram {:.0}M held {:.1} MiB, paging {:.2} s: \
                 {:.2}x the kernel's paging time",
                k.case,
                k.system,
                k.setting_mib,
                k.memory_mib,
                k.paging_s,
                c.setting_mib,
                c.memory_mib,
                c.paging_s,
                c.paging_s / k.paging_s.max(1e-9)
            )?,
            None => outln!(
                "{}: {} at {:.0}M held {:.1} MiB, paging {:.2} s; no ccvm run held that little",
                k.case,
                k.system,
                k.setting_mib,
                k.memory_mib,
                k.paging_s
            )?,
        }
    }
    Ok(())
}

/// Wall time against measured memory, a line per system, plain memory's
/// time as a floor.
pub(super) fn figure(dir: &std::path::Path, label: &str, rows: &[KernelRow], plain_s: f64) -> anyhow::Result<()> {
    let mut systems: Vec<&str> = rows
        .iter()
        .filter(|r| r.system != "plain memory")
        .map(|r| r.system.as_str())
        .collect();
    systems.dedup();
    let mut series: Vec<(String, Vec<(f64, f64)>)> = systems
        .iter()
        .map(|&sys| {
            let mut pts: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.system == sys && r.runs > 0)
                .map(|r| (r.memory_mib, r.wall_s))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            (sys.to_string(), pts)
        })
        .collect();
    let xs: Vec<f64> = series.iter().flat_map(|(_, p)| p.iter().map(|&(x, _)| x)).collect();
    let (lo, hi) = xs.iter().fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    if lo <= hi {
        series.push(("plain memory".into(), vec![(lo, plain_s), (hi, plain_s)]));
    }
    let f = crate::figures::Figure {
        title: format!("{label}: wall time against memory held"),
        x_label: "memory held, MiB (cgroup peak + compressed pool)",
        y_label: "wall time, s",
        // From zero, linear: the gap above plain memory's line is each
        // system's paging time, and a log axis spanning less than a decade
        // (node's 1.3 to 3.1 s) got no labelled ticks at all.
        log_y: false,
        series,
        shade: None,
    };
    let stem = format!("kernel_{}", label.replace([' ', '/'], "_"));
    crate::figures::save(dir, &stem, &f)
}

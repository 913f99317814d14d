//! `ccvm sim sweep` and `ccvm sim report`: trace-driven simulation of the
//! policies over memory sizes, codecs and disk costs (paper 000 §4). This
//! module runs sweeps; [`report`](mod@report) summarizes them.

pub mod args;
pub mod cache;
pub mod chip;
pub mod memory;
mod report;

pub use report::report;

use std::path::{Path, PathBuf};

use anyhow::Context;
use ccvm_sim::plan::{self, Loaded, Progress, SweepPlan};
use ccvm_sim::sweep::SweepRow;
use indicatif::{ProgressBar, ProgressStyle};

/// Runs `plan` over the traces at `traces` and writes `sweep.csv`,
/// `sweep.json`, `traces.csv` and the figures to `out` (codec costs are
/// kept in `out/costs` for the next sweep).
pub fn sweep(traces: &[PathBuf], out: &Path, plan: &SweepPlan) -> anyhow::Result<()> {
    // Every input is read and checked before any output or timing.
    let read = traces
        .iter()
        .map(|path| plan.read(path))
        .collect::<Result<Vec<_>, _>>()?;
    let out_dir = ccvm_output::OutputDir::create(out)?;
    let cache = out.join("costs");
    let mut loaded = Vec::new();
    for ((path, name), trace) in traces.iter().zip(plan::trace_names(traces)).zip(read) {
        loaded.push(load(plan, path, trace, name, &cache)?);
    }
    let points = plan.points(&loaded);
    let bar = ProgressBar::new(points.len() as u64)
        .with_style(ProgressStyle::with_template("{bar:40} {pos}/{len} simulations, {eta} left").expect("template"));
    let rows = plan.run(&points, &|| bar.inc(1));
    bar.finish_and_clear();
    let mut rows = rows;
    rows.extend(plan.lru_rows(&loaded));
    for l in &loaded {
        match l.region {
            Some((lo, hi)) => eprintln!("{}: interesting region {lo}..{hi} pages at 5 ms per fault", l.name),
            None => eprintln!(
                "{}: no memory size pages little enough for an interesting region",
                l.name
            ),
        }
    }
    write_rows(out, &rows)?;
    write_traces(out, &loaded, plan)?;
    crate::figures::write(out, &rows)?;
    out_dir.keep();
    outln!(
        "wrote {} rows to {} and figures fig3/fig4/fig6_TRACE.{{svg,png}}",
        rows.len(),
        out.join("sweep.{csv,json}").display()
    )?;
    Ok(())
}

/// Loads one trace read by `plan` (its codec costs timed, or taken from
/// `cache`), with a progress bar while images are timed.
fn load(plan: &SweepPlan, path: &Path, trace: ccvm_sim::Trace, name: String, cache: &Path) -> anyhow::Result<Loaded> {
    let mut bar = None;
    let l = plan.load(path, trace, name, cache, &mut |p| match p {
        Progress::Timing { codec, images } => {
            eprintln!(
                "{}: {codec} costs of {images} page images (timed once, then kept in {})",
                path.display(),
                cache.display()
            );
            let b = ProgressBar::new(u64::from(images)).with_style(
                ProgressStyle::with_template("{bar:40} {pos}/{len} images timed, {eta} left").expect("template"),
            );
            if let Some(old) = bar.replace(b) {
                old.finish_and_clear();
            }
        }
        Progress::Timed => {
            if let Some(b) = &bar {
                b.inc(1);
            }
        }
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let l = l?;
    if !l.skipped.is_empty() {
        eprintln!(
            "{}: skipping sizes {:?}: the trace covers {}..={} pages (its window to its footprint)",
            path.display(),
            l.skipped,
            l.trace.header.window_pages.max(1),
            l.lru.len() - 1
        );
    }
    if l.plain {
        let p = &plan.plain;
        eprintln!(
            "{}: imported {} references; every page compresses {}:1 in {} ns and back in {} ns",
            path.display(),
            l.trace.refs.len(),
            p.ratio,
            p.compress_ns,
            p.decompress_ns
        );
    }
    Ok(l)
}

/// Writes `traces.csv`, a [`plan::TraceSummary`] per trace and codec.
fn write_traces(out: &Path, loaded: &[Loaded], plan: &SweepPlan) -> anyhow::Result<()> {
    write_csv(&out.join("traces.csv"), plan.summaries(loaded))
}

fn write_rows(out: &Path, rows: &[SweepRow]) -> anyhow::Result<()> {
    ccvm_output::write(out.join("sweep.json"), serde_json::to_string_pretty(rows)?.as_bytes())?;
    write_csv(&out.join("sweep.csv"), rows)
}

/// Writes `rows` as CSV to `path`, whole or not at all.
fn write_csv<T: serde::Serialize>(path: &Path, rows: impl IntoIterator<Item = T>) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_writer(ccvm_output::OutputFile::create(path)?);
    for r in rows {
        w.serialize(r)?;
    }
    w.into_inner()
        .map_err(|e| e.into_error())
        .with_context(|| format!("writing {}", path.display()))?
        .commit()?;
    Ok(())
}

//! Printing result rows as an aligned table, JSON or CSV.

use serde::Serialize;

use crate::args::Format;

/// A row of a report: its cells as text, in column order.
pub trait Row: Serialize {
    /// Column headers.
    fn headers() -> &'static [&'static str];
    /// Cells, formatted for a table or CSV.
    fn cells(&self) -> Vec<String>;
}

/// Prints `rows` to standard output in `format`.
pub fn print<R: Row>(rows: &[R], format: Format) -> anyhow::Result<()> {
    write(&mut std::io::stdout().lock(), rows, format)
}

/// Writes `rows` to `out` in `format`.
pub fn write<R: Row>(out: &mut impl std::io::Write, rows: &[R], format: Format) -> anyhow::Result<()> {
    match format {
        Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(rows)?)?,
        Format::Csv => {
            writeln!(out, "{}", R::headers().join(","))?;
            for r in rows {
                writeln!(out, "{}", r.cells().join(","))?;
            }
        }
        Format::Table => {
            let cells: Vec<Vec<String>> = rows.iter().map(|r| r.cells()).collect();
            let widths: Vec<usize> = R::headers()
                .iter()
                .enumerate()
                .map(|(i, h)| cells.iter().map(|c| c[i].len()).max().unwrap_or(0).max(h.len()))
                .collect();
            let line = |c: &[String]| {
                c.iter()
                    .zip(&widths)
                    .enumerate()
                    .map(
                        |(i, (s, w))| {
                            if i < 2 {
                                format!("{s:<w$}")
                            } else {
                                format!("{s:>w$}")
                            }
                        },
                    )
                    .collect::<Vec<_>>()
                    .join("  ")
            };
            let headers: Vec<String> = R::headers().iter().map(|s| s.to_string()).collect();
            writeln!(out, "{}", line(&headers))?;
            for c in &cells {
                writeln!(out, "{}", line(c))?;
            }
        }
    }
    Ok(())
}

/// One paged run's headline numbers, as `run` and `exec` print them with
/// `--csv` (a row per run, or per paged process).
#[derive(Serialize)]
pub struct RunRow {
    /// The workload, or the process and its program.
    pub what: String,
    /// Policy.
    pub policy: String,
    /// Codec.
    pub codec: String,
    /// RAM budget, MiB.
    pub ram_mib: f64,
    /// Wall time, seconds.
    pub wall_s: f64,
    /// Faults served with zeros.
    pub zero_faults: u64,
    /// Faults served from the compression cache.
    pub cache_faults: u64,
    /// Faults served from the swap file.
    pub disk_faults: u64,
    /// Compression ratio.
    pub ratio: f64,
}

impl RunRow {
    /// The row of a run with these counters.
    pub fn new(
        what: String,
        policy: &str,
        codec: &str,
        ram: u64,
        wall_s: f64,
        s: &ccvm_runtime::RuntimeStats,
    ) -> RunRow {
        RunRow {
            what,
            policy: policy.into(),
            codec: codec.into(),
            ram_mib: ram as f64 / (1 << 20) as f64,
            wall_s,
            zero_faults: s.faults_zero,
            cache_faults: s.faults_cache,
            disk_faults: s.faults_disk,
            ratio: s.compression_ratio(),
        }
    }
}

impl Row for RunRow {
    fn headers() -> &'static [&'static str] {
        &[
            "what",
            "policy",
            "codec",
            "ram MiB",
            "wall s",
            "zero faults",
            "cache faults",
            "disk faults",
            "ratio",
        ]
    }
    fn cells(&self) -> Vec<String> {
        vec![
            self.what.clone(),
            self.policy.clone(),
            self.codec.clone(),
            format!("{:.1}", self.ram_mib),
            format!("{:.3}", self.wall_s),
            self.zero_faults.to_string(),
            self.cache_faults.to_string(),
            self.disk_faults.to_string(),
            format!("{:.3}", self.ratio),
        ]
    }
}

//! Printing result rows as an aligned table, JSON or CSV.

use serde::Serialize;

use crate::Format;

/// A row of a report: its cells as text, in column order.
pub trait Row: Serialize {
    /// Column headers.
    fn headers() -> &'static [&'static str];
    /// Cells, formatted for a table or CSV.
    fn cells(&self) -> Vec<String>;
}

/// Prints `rows` to standard output in `format`.
pub fn print<R: Row>(rows: &[R], format: Format) -> anyhow::Result<()> {
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(rows)?),
        Format::Csv => {
            println!("{}", R::headers().join(","));
            for r in rows {
                println!("{}", r.cells().join(","));
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
            println!("{}", line(&headers));
            for c in &cells {
                println!("{}", line(c));
            }
        }
    }
    Ok(())
}

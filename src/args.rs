//! What every subcommand's flags are parsed with: sizes, durations, shares
//! and positive numbers as clap value parsers, and the output flags every
//! report takes.

use std::time::Duration;

use clap::{Args, ValueEnum};

/// Output format of a report.
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum Format {
    /// An aligned text table.
    Table,
    /// JSON.
    Json,
    /// CSV with a header line.
    Csv,
}

/// The output flags every report takes.
#[derive(Args)]
pub struct OutputArgs {
    /// Print JSON instead of a table.
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print CSV instead of a table.
    #[arg(long)]
    csv: bool,
}

impl OutputArgs {
    /// The format the flags ask for.
    pub fn format(&self) -> Format {
        if self.json {
            Format::Json
        } else if self.csv {
            Format::Csv
        } else {
            Format::Table
        }
    }
}

/// Parses a byte count: a number with an optional binary suffix (K, M, G;
/// KiB, MiB, GiB), e.g. `64M` or `4096`.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size; write e.g. 64M, 1G or 4096"))?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1u64,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        other => return Err(format!("unknown size unit '{other}' in '{s}'; use K, M or G")),
    };
    Ok((value * scale as f64) as u64)
}

/// Parses a duration such as `5ms` or `100us`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("'{s}' is not a duration ({e}); write e.g. 5ms or 100us"))
}

fn number(s: &str) -> Result<f64, String> {
    s.trim().parse().map_err(|_| format!("'{s}' is not a number"))
}

/// A finite number above 0.
pub fn positive(s: &str) -> Result<f64, String> {
    let x = number(s)?;
    if x.is_finite() && x > 0.0 {
        Ok(x)
    } else {
        Err(format!("must be a positive number, got {s}"))
    }
}

/// A finite number, 0 or more.
pub fn non_negative(s: &str) -> Result<f64, String> {
    let x = number(s)?;
    if x.is_finite() && x >= 0.0 {
        Ok(x)
    } else {
        Err(format!("must be zero or more, got {s}"))
    }
}

/// A share: a number from 0 to 1.
pub fn share(s: &str) -> Result<f64, String> {
    let x = number(s)?;
    if (0.0..=1.0).contains(&x) {
        Ok(x)
    } else {
        Err(format!("must be between 0 and 1, got {s}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_shares_and_positive_numbers() {
        assert_eq!(parse_bytes("64M"), Ok(64 << 20));
        assert_eq!(parse_bytes("1.5K"), Ok(1536));
        assert!(parse_bytes("12Q").unwrap_err().contains("unknown size unit"));
        assert_eq!(share("0.25"), Ok(0.25));
        assert!(share("1.5").unwrap_err().contains("between 0 and 1"));
        assert!(positive("0").is_err() && positive("-1").is_err() && positive("inf").is_err());
        assert_eq!(non_negative("0"), Ok(0.0));
        assert!(non_negative("x").unwrap_err().contains("not a number"));
    }
}

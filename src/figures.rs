//! Paper 000's figures from a sweep, as SVG and PNG (plotters): Figure 3,
//! paging time against memory size (log scale), LRU and the adaptive
//! policy per codec; Figure 4, the adaptive policy's paging time
//! normalized to LRU's, a line per codec, with the interesting region
//! shaded; Figure 6, the same for each disk cost.

use std::ops::Range;
use std::path::Path;

use anyhow::anyhow;
use plotters::coord::Shift;
use plotters::prelude::*;

use ccvm_sim::sweep::SweepRow;

/// One figure: title, axes and lines.
pub(crate) struct Figure {
    pub title: String,
    pub x_label: &'static str,
    pub y_label: &'static str,
    pub log_y: bool,
    pub series: Vec<(String, Vec<(f64, f64)>)>,
    pub shade: Option<(f64, f64)>,
}

const COLORS: [RGBColor; 12] = [
    RGBColor(0, 0, 0),
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(127, 127, 127),
    RGBColor(23, 190, 207),
    RGBColor(188, 189, 34),
    RGBColor(227, 119, 194),
    RGBColor(0, 0, 128),
];

fn bounds(f: &Figure) -> (Range<f64>, Range<f64>) {
    let pts = f.series.iter().flat_map(|(_, v)| v.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        if f.log_y && y <= 0.0 {
            continue;
        }
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        return (0.0..1.0, 0.1..1.0);
    }
    if f.log_y {
        (x0..x1.max(x0 + 1.0), (y0 * 0.8)..(y1 * 1.25))
    } else {
        (x0..x1.max(x0 + 1.0), 0.0f64.min(y0)..(y1 * 1.1).max(1.2))
    }
}

macro_rules! draw {
    ($chart:ident, $f:ident, $area:ident) => {{
        $chart
            .configure_mesh()
            .x_desc($f.x_label)
            .y_desc($f.y_label)
            .label_style(("sans-serif", 13))
            .draw()
            .map_err(|e| anyhow!("{e:?}"))?;
        if let Some((a, b)) = $f.shade {
            let (_, yr) = bounds($f);
            let top = if $f.log_y { yr.end } else { yr.end };
            let bottom = if $f.log_y { yr.start } else { yr.start };
            $chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(a, bottom), (b.max(a + 0.5), top)],
                    RGBColor(230, 230, 230).filled(),
                )))
                .map_err(|e| anyhow!("{e:?}"))?;
        }
        for (i, (name, pts)) in $f.series.iter().enumerate() {
            let c = COLORS[i % COLORS.len()];
            let pts: Vec<(f64, f64)> = pts.iter().copied().filter(|&(_, y)| !$f.log_y || y > 0.0).collect();
            $chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                .map_err(|e| anyhow!("{e:?}"))?
                .label(name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
            $chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 2, c.filled())))
                .map_err(|e| anyhow!("{e:?}"))?;
        }
        $chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 13))
            .draw()
            .map_err(|e| anyhow!("{e:?}"))?;
        $area.present().map_err(|e| anyhow!("{e:?}"))?;
    }};
}

fn render<DB: DrawingBackend>(area: DrawingArea<DB, Shift>, f: &Figure) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    area.fill(&WHITE).map_err(|e| anyhow!("{e:?}"))?;
    let (xr, yr) = bounds(f);
    let mut b = ChartBuilder::on(&area);
    b.caption(&f.title, ("sans-serif", 17))
        .margin(14)
        .x_label_area_size(42)
        .y_label_area_size(72);
    if f.log_y {
        let mut chart = b.build_cartesian_2d(xr, yr.log_scale()).map_err(|e| anyhow!("{e:?}"))?;
        draw!(chart, f, area);
    } else {
        let mut chart = b.build_cartesian_2d(xr, yr).map_err(|e| anyhow!("{e:?}"))?;
        draw!(chart, f, area);
    }
    Ok(())
}

pub(crate) fn save(dir: &Path, stem: &str, f: &Figure) -> anyhow::Result<()> {
    // The bundled font, so that figures draw on machines without fonts.
    static FONT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let loaded = *FONT.get_or_init(|| {
        plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            include_bytes!("../assets/fonts/DejaVuSans.ttf"),
        )
        .is_ok()
    });
    if !loaded {
        return Err(anyhow!("the bundled font does not load"));
    }
    let svg = ccvm_output::OutputFile::create(dir.join(format!("{stem}.svg")))?;
    render(SVGBackend::new(svg.staging_path(), (900, 560)).into_drawing_area(), f)?;
    let png = ccvm_output::OutputFile::create(dir.join(format!("{stem}.png")))?;
    render(
        BitMapBackend::new(png.staging_path(), (900, 560)).into_drawing_area(),
        f,
    )?;
    svg.commit()?;
    png.commit()?;
    Ok(())
}

fn line(rows: &[&SweepRow], y: impl Fn(&SweepRow) -> Option<f64>) -> Vec<(f64, f64)> {
    let mut v: Vec<(f64, f64)> = rows
        .iter()
        .filter_map(|r| Some((r.memory_pages as f64, y(r)?)))
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

fn region(rows: &[&SweepRow]) -> Option<(f64, f64)> {
    let sizes: Vec<f64> = rows
        .iter()
        .filter(|r| r.interesting)
        .map(|r| r.memory_pages as f64)
        .collect();
    let lo = sizes.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = sizes.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    (lo <= hi).then_some((lo, hi))
}

/// Writes fig3, fig4 and fig6 for every trace of `rows` into `dir`.
pub fn write(dir: &Path, rows: &[SweepRow]) -> anyhow::Result<()> {
    let mut traces: Vec<&str> = rows.iter().map(|r| r.trace.as_str()).collect();
    traces.sort_unstable();
    traces.dedup();
    for t in traces {
        let of = |policy: &str, codec: Option<&str>, disk: f64| -> Vec<&SweepRow> {
            rows.iter()
                .filter(|r| r.trace == t && r.policy == policy && (r.disk_ms - disk).abs() < 1e-9)
                .filter(|r| codec.is_none_or(|c| r.codec == c))
                .collect()
        };
        let mut codecs: Vec<&str> = rows
            .iter()
            .filter(|r| r.trace == t && r.policy == "adaptive")
            .map(|r| r.codec.as_str())
            .collect();
        codecs.sort_unstable();
        codecs.dedup();
        let lru5 = of("lru", None, 5.0);
        let mut fig3 = vec![("LRU, no compression".to_string(), line(&lru5, |r| Some(r.paging_s)))];
        let mut fig4 = Vec::new();
        for c in &codecs {
            let a = of("adaptive", Some(c), 5.0);
            fig3.push((format!("adaptive, {c}"), line(&a, |r| Some(r.paging_s))));
            fig4.push((format!("adaptive, {c}"), line(&a, |r| r.normalized)));
        }
        save(
            dir,
            &format!("fig3_{t}"),
            &Figure {
                title: format!("{t}: paging time at 5 ms per disk fault"),
                x_label: "memory (pages)",
                y_label: "paging time (s, log)",
                log_y: true,
                series: fig3,
                shade: None,
            },
        )?;
        save(
            dir,
            &format!("fig4_{t}"),
            &Figure {
                title: format!("{t}: paging time relative to LRU (interesting region shaded)"),
                x_label: "memory (pages)",
                y_label: "adaptive / LRU",
                log_y: false,
                series: fig4,
                shade: region(&lru5),
            },
        )?;
        // The disk-cost study ran for one codec: the one with most disk costs.
        let disks_of = |c: &str| {
            let mut v: Vec<f64> = rows
                .iter()
                .filter(|r| r.trace == t && r.policy == "adaptive" && r.codec == c)
                .map(|r| r.disk_ms)
                .collect();
            v.sort_by(f64::total_cmp);
            v.dedup();
            v
        };
        if let Some(c) = codecs.iter().max_by_key(|c| disks_of(c).len()) {
            let disks = disks_of(c);
            let fig6 = disks
                .iter()
                .map(|&d| (format!("{d} ms"), line(&of("adaptive", Some(c), d), |r| r.normalized)))
                .collect();
            save(
                dir,
                &format!("fig6_{t}"),
                &Figure {
                    title: format!("{t}: adaptive ({c}) relative to LRU, by disk cost"),
                    x_label: "memory (pages)",
                    y_label: "adaptive / LRU",
                    log_y: false,
                    series: fig6,
                    shade: None,
                },
            )?;
        }
    }
    Ok(())
}

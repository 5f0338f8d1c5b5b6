//! The SVG plots written next to `report.md`.

use crate::rounds::{LatencyRow, Row};
use crate::scenarios::Plot;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// A fixed colour per implementation, the same in every plot.
pub fn colour(name: &str) -> RGBColor {
    match name {
        "keybus" => RGBColor(0, 90, 200),
        "baseline" => RGBColor(90, 90, 90),
        "mutex-map" => RGBColor(220, 120, 0),
        "tokio-watch" => RGBColor(150, 60, 170),
        "tokio-broadcast" | "tokio" => RGBColor(200, 30, 40),
        "async-broadcast" => RGBColor(20, 150, 120),
        "bus" => RGBColor(170, 140, 0),
        "crossbeam" => RGBColor(230, 90, 160),
        _ => RGBColor(0, 0, 0),
    }
}

pub type Series = Vec<(&'static str, Vec<(f64, f64)>)>;

/// Series of (x, y) per implementation from the rows whose plot key `pick`
/// maps to an x; `y` is ops/s in millions (or ns/op with `ns_per_op`).
pub fn series(rows: &[Row], pick: impl Fn(Plot) -> Option<u64>, ns_per_op: bool) -> Series {
    let mut out: Series = Vec::new();
    for r in rows {
        let (Some(x), Some(n)) = (pick(r.plot), r.ns_per_op) else {
            continue;
        };
        let y = if ns_per_op { n } else { 1e3 / n };
        match out.iter_mut().find(|(name, _)| *name == r.name) {
            Some((_, pts)) => pts.push((x as f64, y)),
            None => out.push((r.name, vec![(x as f64, y)])),
        }
    }
    for (_, pts) in &mut out {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

pub type LogChart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, LogCoord<f64>>>;
pub type Drawn = Result<(), Box<dyn std::error::Error>>;

/// What every plot shares: a 900×540 SVG at `path` with `caption` (text, font
/// size), `x` by a log `y` axis (both drawn by `mesh`), a line with dots per
/// series of `data` (keybus's thicker), and the legend at `legend`.
pub fn log_chart(
    path: &Path,
    caption: (&str, u32),
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
    data: &Series,
    legend: SeriesLabelPosition,
    mesh: impl FnOnce(&mut LogChart<'_, '_>) -> Drawn,
) -> Drawn {
    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(caption.0, ("sans-serif", caption.1))
        .margin(16)
        .x_label_area_size(46)
        .y_label_area_size(80)
        .build_cartesian_2d(x, y.log_scale())?;
    mesh(&mut chart)?;
    for (name, pts) in data {
        let c = colour(name);
        let width = if *name == "keybus" { 3 } else { 2 };
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(width)))?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3)));
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(legend)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// The lowest and the highest y of `data`.
pub fn y_range(data: &Series) -> (f64, f64) {
    let ys = data.iter().flat_map(|(_, p)| p.iter().map(|&(_, y)| y));
    ys.fold((f64::MAX, f64::MIN), |(lo, hi), y| (lo.min(y), hi.max(y)))
}

/// A line chart with a log y axis; `x_ticks` are the x values to label.
pub fn line_chart(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    x_ticks: &[f64],
    data: &Series,
) -> Drawn {
    if data.is_empty() {
        return Ok(());
    }
    let (lo, hi) = y_range(data);
    let x_max = x_ticks.iter().copied().fold(0.0, f64::max);
    let x_min = x_ticks.iter().copied().fold(f64::MAX, f64::min);
    let pad = (x_max - x_min).max(1.0) * 0.05;
    // Headroom at the top (log scale) keeps the legend off the data.
    let y = lo / 1.6..hi * 12.0;
    let x = (x_min - pad)..(x_max + pad);
    log_chart(
        path,
        (title, 22),
        x,
        y,
        data,
        SeriesLabelPosition::UpperRight,
        |chart| {
            chart
                .configure_mesh()
                .x_desc(x_desc)
                .y_desc(y_desc)
                .x_labels(40)
                .x_label_formatter(&|x| {
                    x_ticks
                        .iter()
                        .find(|t| (*t - x).abs() < 1e-9)
                        .map_or(String::new(), |t| format!("{t}"))
                })
                .y_label_formatter(&|y| {
                    if *y >= 10.0 {
                        format!("{y:.0}")
                    } else if *y >= 0.1 {
                        format!("{y:.2}")
                    } else {
                        format!("{y:.3}")
                    }
                })
                .draw()?;
            Ok(())
        },
    )
}

pub fn plots(
    out: &Path,
    rows: &[Row],
    lat: &[LatencyRow],
    backlog: u64,
) -> Result<Vec<PathBuf>, Box<dyn std::error::Error>> {
    std::fs::create_dir_all(out)?;
    let mut written = Vec::new();
    let mut chart = |file: &str, title: &str, x: &str, y: &str, ticks: &[f64], data: Series| {
        let p = out.join(file);
        line_chart(&p, title, x, y, ticks, &data).map(|()| written.push(p))
    };
    chart(
        "conflate_receivers.svg",
        "conflate: 1 sender, 64 hot keys (sends/s incl. drain, log scale)",
        "receivers",
        "million sends/s",
        &[1.0, 4.0, 16.0],
        series(
            rows,
            |p| match p {
                Plot::ConflateReceivers(r) => Some(r),
                _ => None,
            },
            false,
        ),
    )?;
    chart(
        "conflate_threads.svg",
        "conflate: senders x receivers, 64 hot keys, 2 cores (log scale)",
        "threads (1x1, 2x2, 2x4, 4x4)",
        "million sends/s",
        &[2.0, 4.0, 6.0, 8.0],
        series(
            rows,
            |p| match p {
                Plot::ConflateThreads(t) => Some(t),
                Plot::ConflateReceivers(1) => Some(2),
                _ => None,
            },
            false,
        ),
    )?;
    chart(
        "broadcast_readers.svg",
        "broadcast: 1 paced writer, N readers reading everything (log scale)",
        "readers",
        "million deliveries/s (appends x readers)",
        &[1.0, 4.0, 16.0],
        series(
            rows,
            |p| match p {
                Plot::BroadcastReaders(n) => Some(n),
                _ => None,
            },
            false,
        ),
    )?;
    chart(
        "broadcast_writer_cost.svg",
        "broadcast: writer cost per append on a full ring, idle readers attached (log scale)",
        "attached readers (not reading)",
        "ns per append",
        &[0.0, 1.0, 2.0, 4.0, 8.0, 16.0],
        series(
            rows,
            |p| match p {
                Plot::WriterCost(n) => Some(n),
                _ => None,
            },
            true,
        ),
    )?;
    // Latency: x = percentile.
    let data: Series = lat
        .iter()
        .filter_map(|r| {
            r.percentiles.map(|p| {
                (
                    r.name,
                    p.iter().enumerate().map(|(i, &v)| (i as f64, v)).collect(),
                )
            })
        })
        .collect();
    let labels = ["p50", "p90", "p99", "p99.9", "max"];
    let p = out.join("cut_latency.svg");
    latency_chart(&p, backlog, &data, &labels)?;
    written.push(p);
    Ok(written)
}

pub fn latency_chart(path: &Path, backlog: u64, data: &Series, labels: &[&str]) -> Drawn {
    let (lo, hi) = y_range(data);
    let title =
        format!("conflate: publisher send latency while a receiver cuts a {backlog}-key backlog");
    let y = (lo / 2.0).max(1.0)..hi * 2.0;
    let legend = SeriesLabelPosition::UpperLeft;
    log_chart(path, (&title, 20), -0.3..4.3, y, data, legend, |chart| {
        chart
            .configure_mesh()
            .x_desc("percentile")
            .y_desc("ns per send (log scale)")
            .x_labels(labels.len() * 4)
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && (0.0..labels.len() as f64).contains(&i) {
                    labels[i as usize].to_string()
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()?;
        Ok(())
    })
}

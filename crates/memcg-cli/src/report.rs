//! Output shared by every benchmark: the machine description, statistics
//! over repetitions, tables on stdout, JSON files and SVG charts.

use std::path::{Path, PathBuf};

use anyhow::Context;
use plotters::coord::types::RangedCoordf64;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use serde::Serialize;

/// The machine a benchmark ran on, recorded next to its figures.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// CPU model name from /proc/cpuinfo ("unknown" elsewhere).
    pub cpu: String,
    /// Logical CPUs available to this process.
    pub cpus: usize,
    /// `std::env::consts::OS`/`ARCH`.
    pub os: String,
}

impl Machine {
    /// Describes the current machine.
    pub fn current() -> Self {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|info| {
                info.lines().find_map(|l| {
                    l.strip_prefix("model name")
                        .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
                })
            })
            .unwrap_or_else(|| "unknown".to_owned());
        Self {
            cpu,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            os: format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
        }
    }
}

impl std::fmt::Display for Machine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({} CPUs, {})", self.cpu, self.cpus, self.os)
    }
}

/// The tool that produced a report: name, version and the git commit it
/// was built from (`-dirty` when the tree had changes), and when it ran.
#[derive(Debug, Clone, Serialize)]
pub struct Tool {
    /// `memcg`.
    pub name: &'static str,
    /// The crate version.
    pub version: &'static str,
    /// `git describe --always --dirty` at build time ("unknown" outside a
    /// git checkout).
    pub commit: &'static str,
    /// Seconds since the Unix epoch when the report was made.
    pub generated_unix: u64,
}

impl Tool {
    /// This build, now.
    pub fn current() -> Self {
        Self {
            name: "memcg",
            version: env!("CARGO_PKG_VERSION"),
            commit: env!("MEMCG_GIT_COMMIT"),
            generated_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        }
    }
}

/// The fields every report starts with: which benchmark, which build of
/// the tool made it, and on what machine.
#[derive(Debug, Serialize)]
pub struct ReportHead {
    /// The benchmark's name (`swap-cgroup`, ...).
    pub bench: &'static str,
    /// The build, and when the report was made.
    pub tool: Tool,
    /// Where it ran.
    pub machine: Machine,
}

impl ReportHead {
    /// The head of a report of `bench` made now, by this build.
    pub fn new(bench: &'static str, machine: Machine) -> Self {
        Self {
            bench,
            tool: Tool::current(),
            machine,
        }
    }
}

/// Progress of a benchmark on stderr: a bar on a terminal, otherwise one
/// line per step (so a log of a long run shows where it is).
pub struct Progress {
    bench: &'static str,
    total: u64,
    done: u64,
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    /// `total` steps of `bench`.
    pub fn new(bench: &'static str, total: u64) -> Self {
        use std::io::IsTerminal;
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(total);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{prefix} [{bar:30}] {pos}/{len} {msg} (eta {eta})",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar.set_prefix(bench);
            bar
        });
        Self {
            bench,
            total,
            done: 0,
            bar,
        }
    }

    /// Marks `n` steps done; `what` names the last of them.
    pub fn step(&mut self, n: u64, what: &str) {
        self.done += n;
        match &self.bar {
            Some(bar) => {
                bar.set_message(what.to_owned());
                bar.inc(n);
            }
            None => eprintln!("{}: [{}/{}] {what}", self.bench, self.done, self.total),
        }
    }

    /// Clears the bar.
    pub fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

/// A standard deviation for a table: `-` when there was one sample.
pub fn fmt_stdev(stdev: f64, samples: usize, decimals: usize) -> String {
    if samples < 2 {
        "-".to_owned()
    } else {
        format!("{stdev:.decimals$}")
    }
}

/// A range of samples for a table, `min–max`: `-` when there was one
/// sample.
pub fn fmt_range(min: f64, max: f64, samples: usize, decimals: usize) -> String {
    if samples < 2 {
        "-".to_owned()
    } else {
        format!("{min:.decimals$}–{max:.decimals$}")
    }
}

/// A ratio for a table to three significant digits (`0.00178x`,
/// `1.00x`, `561x`), so a small one never reads as `0.00x`; empty when
/// there is none (NaN).
pub fn fmt_ratio(ratio: f64) -> String {
    if !ratio.is_finite() {
        return String::new();
    }
    let magnitude = if ratio > 0.0 {
        ratio.log10().floor() as i32
    } else {
        0
    };
    let decimals = (2 - magnitude).max(0) as usize;
    format!("{ratio:.decimals$}x")
}

/// Median, mean, sample standard deviation and range of repeated
/// measurements.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Stats {
    /// The median.
    pub median: f64,
    /// The arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (0 for a single sample).
    pub stdev: f64,
    /// The smallest sample.
    pub min: f64,
    /// The largest sample.
    pub max: f64,
}

impl Stats {
    /// Summarises `samples` (must not be empty).
    pub fn of(samples: &[f64]) -> Self {
        assert!(!samples.is_empty(), "no samples");
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let mid = sorted.len() / 2;
        let median = if sorted.len() % 2 == 1 {
            sorted[mid]
        } else {
            (sorted[mid - 1] + sorted[mid]) / 2.0
        };
        let n = samples.len() as f64;
        let mean = samples.iter().sum::<f64>() / n;
        let var = if samples.len() > 1 {
            samples.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        Self {
            median,
            mean,
            stdev: var.sqrt(),
            min: sorted[0],
            max: sorted[sorted.len() - 1],
        }
    }
}

/// Below this CPU share a timed thread was off its CPU for more than a
/// tenth of a phase, and the phase's time is suspect.
pub const LOW_CPU_SHARE: f64 = 0.9;

/// Whether a CPU share is below [`LOW_CPU_SHARE`].
pub fn cpu_share_is_low(share: f64) -> bool {
    share < LOW_CPU_SHARE
}

/// A CPU share for a table: whole percent, rounded down so that a marked
/// share never reads as 90%, and `*` when it is low (see
/// [`print_method_note`]).
pub fn fmt_cpu_share(share: f64) -> String {
    let percent = (share * 100.0).floor();
    let mark = if cpu_share_is_low(share) { "*" } else { "" };
    format!("{percent:.0}%{mark}")
}

/// How the timed phases of one table row went, for its JSON: how long,
/// and whether the timed threads had their CPUs.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseFacts {
    /// Times the measured work was repeated in each timed phase so that it
    /// lasts the minimum phase (`config.min_phase_ms`); figures are per
    /// operation or per run of the configured size, whatever the rounds.
    pub rounds: u64,
    /// The shortest timed phase among the repetitions, ms.
    pub shortest_phase_ms: f64,
    /// Per repetition (in the order of `samples`): the lowest share of the
    /// phase's wall time that any timed thread spent on a CPU (its
    /// `CLOCK_THREAD_CPUTIME_ID` time over the wall time).
    pub cpu_shares: Vec<f64>,
    /// The lowest of `cpu_shares`; below 0.9 the row is marked `*`.
    pub min_cpu_share: f64,
}

impl PhaseFacts {
    /// The facts of `rounds` rounds per phase over repetitions whose
    /// phases took `phases` (wall seconds, CPU share).
    pub fn of(rounds: u64, phases: impl IntoIterator<Item = (f64, f64)>) -> Self {
        let (secs, cpu_shares): (Vec<f64>, Vec<f64>) = phases.into_iter().unzip();
        Self {
            rounds,
            shortest_phase_ms: secs.iter().copied().fold(f64::INFINITY, f64::min) * 1e3,
            min_cpu_share: cpu_shares.iter().copied().fold(f64::INFINITY, f64::min),
            cpu_shares,
        }
    }

    /// The table cell: [`fmt_cpu_share`] of the lowest share.
    pub fn cpu_cell(&self) -> String {
        fmt_cpu_share(self.min_cpu_share)
    }
}

/// The lines under a benchmark's tables: how long its phases were against
/// the minimum asked for, and what the `*` of the CPU column means when a
/// row has one.
pub fn method_note<'a>(
    facts: impl IntoIterator<Item = &'a PhaseFacts>,
    min_phase_ms: f64,
) -> String {
    let facts: Vec<&PhaseFacts> = facts.into_iter().collect();
    let shortest = facts
        .iter()
        .map(|f| f.shortest_phase_ms)
        .fold(f64::INFINITY, f64::min);
    let most_rounds = facts.iter().map(|f| f.rounds).max().unwrap_or(1);
    let mut note = if min_phase_ms > 0.0 {
        format!(
            "Timed phases: shortest {shortest:.0} ms (minimum {min_phase_ms:.0} ms; work repeated up to {most_rounds}x per phase to reach it)."
        )
    } else {
        format!(
            "Timed phases: shortest {shortest:.0} ms (no minimum, one round each, as with --quick: phases this short can flip a comparison between runs)."
        )
    };
    if shortest < min_phase_ms {
        note.push_str(
            " Some are shorter than the minimum (shortest_phase_ms in the JSON says which).",
        );
    }
    note.push_str(
        "\nCPU: the lowest share of a phase's wall time any timed thread spent on a CPU, over the repetitions.",
    );
    if facts.iter().any(|f| cpu_share_is_low(f.min_cpu_share)) {
        note.push_str(
            "\n* below 90%: a timed thread was off its CPU for over a tenth of a phase \
             (descheduled on a busy machine, or asleep on a lock), so that row's spread \
             measures the scheduler as much as the code.",
        );
    }
    note
}

/// Prints [`method_note`] and a blank line.
pub fn print_method_note<'a>(facts: impl IntoIterator<Item = &'a PhaseFacts>, min_phase_ms: f64) {
    println!("{}\n", method_note(facts, min_phase_ms));
}

/// Prints a table with a header (comfy-table, markdown style, every column
/// but the first right-aligned) and a blank line.
pub fn print_table(header: &[&str], rows: impl IntoIterator<Item = Vec<String>>) {
    let mut t = comfy_table::Table::new();
    t.load_style(comfy_table::presets::ASCII_MARKDOWN)
        .set_header(header.to_vec());
    for row in rows {
        t.add_row(row);
    }
    for i in 1..header.len() {
        if let Some(col) = t.column_mut(i) {
            col.set_cell_alignment(comfy_table::CellAlignment::Right);
        }
    }
    println!("{t}\n");
}

/// Where a benchmark writes its results: `--json` and `--svg`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ReportFiles {
    /// Write the results, every repetition included, as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Draw the results as an SVG chart here (one panel per workload).
    #[arg(long)]
    pub svg: Option<PathBuf>,
}

impl ReportFiles {
    /// Checks, before a run, that every file asked for can be written
    /// ([`check_writable`]).
    pub fn validate(&self) -> anyhow::Result<()> {
        check_writable([&self.json, &self.svg].into_iter().flatten())
    }

    /// `DIR/NAME.json` and `DIR/NAME.svg` (creating `DIR`), or no files.
    pub fn in_dir(dir: Option<&Path>, name: &str) -> anyhow::Result<Self> {
        let Some(dir) = dir else {
            return Ok(Self::default());
        };
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Self {
            json: Some(dir.join(format!("{name}.json"))),
            svg: Some(dir.join(format!("{name}.svg"))),
        })
    }

    /// Writes `report` as JSON and draws `chart()` where asked, saying so.
    pub fn write<'a>(
        &self,
        report: &impl Serialize,
        chart: impl FnOnce() -> Chart<'a>,
    ) -> anyhow::Result<()> {
        save_json(self.json.as_deref(), report)?;
        if let Some(path) = &self.svg {
            write_svg(path, &chart())?;
            println!("wrote {}", path.display());
        }
        Ok(())
    }
}

/// Checks, before a run, that each of `paths` can be written (each is
/// opened for writing, without truncating it), so a long run does not fail
/// at its end: a missing or read-only directory, or a directory where the
/// file should be, is found before any work. Files that did not exist are
/// not left behind.
pub fn check_writable(paths: impl IntoIterator<Item = impl AsRef<Path>>) -> anyhow::Result<()> {
    for path in paths {
        let path = path.as_ref();
        let existed = path.exists();
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        if !existed {
            let _ = std::fs::remove_file(path);
        }
    }
    Ok(())
}

/// Writes `value` as JSON to `path` where one is asked for (`--json`),
/// saying so on stdout: the tail every report shares.
pub fn save_json(path: Option<&Path>, value: &impl Serialize) -> anyhow::Result<()> {
    if let Some(path) = path {
        write_json(path, value)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// Writes `value` as pretty JSON to `path`.
pub fn write_json(path: &Path, value: &impl Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Style {
    /// Points joined by a line, with error bars (on a categorical axis,
    /// points only: nothing lies between two categories).
    #[default]
    Line,
    /// A reference value (a published figure): a dashed horizontal line
    /// across the panel at its one point's y.
    Reference,
}

/// One line on a chart.
pub struct Series {
    /// Legend label.
    pub name: String,
    /// `(x, y)` points in x order.
    pub points: Vec<(f64, f64)>,
    /// One standard deviation of each point's y, drawn as an error bar
    /// (empty: none).
    pub errors: Vec<f64>,
    /// How it is drawn.
    pub style: Style,
}

impl Series {
    /// A line of `(threads, value, stdev)` points.
    pub fn by_threads(
        name: impl Into<String>,
        points: impl IntoIterator<Item = (usize, f64, f64)>,
    ) -> Self {
        let (points, errors) = points
            .into_iter()
            .map(|(threads, value, stdev)| ((threads as f64, value), stdev))
            .unzip();
        Self {
            name: name.into(),
            points,
            errors,
            style: Style::Line,
        }
    }

    /// A dashed horizontal line at `y` across the panel.
    pub fn reference(name: impl Into<String>, y: f64) -> Self {
        Self {
            name: name.into(),
            points: vec![(0.0, y)],
            errors: Vec::new(),
            style: Style::Reference,
        }
    }
}

/// One chart panel.
pub struct Panel {
    /// Panel title.
    pub title: String,
    /// The lines drawn.
    pub series: Vec<Series>,
    /// This panel's y axis label, where it differs from the chart's.
    pub y_label: Option<String>,
}

/// A grid of chart panels sharing axis labels.
pub struct Chart<'a> {
    /// Title over the whole chart.
    pub title: &'a str,
    /// X axis label.
    pub x_label: &'a str,
    /// Y axis label (a panel may have its own).
    pub y_label: &'a str,
    /// Panels, laid out two per row.
    pub panels: Vec<Panel>,
    /// The names of a categorical x axis: x values are indices into it and
    /// points are not joined. Empty: a numeric axis.
    pub x_categories: Vec<String>,
}

/// A chart of values against thread counts: `panels` of
/// [`Series::by_threads`] lines.
pub fn chart_by_threads<'a>(
    title: &'a str,
    y_label: &'a str,
    panels: impl IntoIterator<Item = Panel>,
) -> Chart<'a> {
    Chart {
        title,
        x_label: "threads",
        y_label,
        panels: panels.into_iter().collect(),
        x_categories: Vec::new(),
    }
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(0x99, 0x99, 0x99),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x17, 0xbe, 0xcf),
];

/// A panel's height, px, the band the chart's title takes, and the width
/// of a chart of two panels a row and of a single panel.
const PANEL_HEIGHT: u32 = 380;
const TITLE_HEIGHT: u32 = 60;
const TWO_PANELS_WIDTH: u32 = 1000;
const ONE_PANEL_WIDTH: u32 = 700;

/// The canvas of a chart of `panels` panels, two per row: as wide as its
/// columns, so a single panel leaves no blank half.
fn canvas_size(panels: usize) -> (u32, u32) {
    let width = if panels > 1 {
        TWO_PANELS_WIDTH
    } else {
        ONE_PANEL_WIDTH
    };
    let rows = panels.div_ceil(2).max(1) as u32;
    (width, TITLE_HEIGHT + PANEL_HEIGHT * rows)
}

/// The title's font size: 24 px, smaller where the title would not fit
/// `width` (a character is about 0.55 of its font size wide).
fn title_px(title: &str, width: u32) -> f64 {
    (1.7 * f64::from(width) / title.chars().count().max(1) as f64).min(24.0)
}

/// Draws `chart` as an SVG file at `path`.
pub fn write_svg(path: &Path, chart: &Chart<'_>) -> anyhow::Result<()> {
    let (width, height) = canvas_size(chart.panels.len());
    let columns = chart.panels.len().clamp(1, 2);
    let rows = chart.panels.len().div_ceil(2).max(1);
    let root = SVGBackend::new(path, (width, height)).into_drawing_area();
    let draw = || -> Result<(), Box<dyn std::error::Error + '_>> {
        root.fill(&WHITE)?;
        let body = root.titled(chart.title, ("sans-serif", title_px(chart.title, width)))?;
        for (area, panel) in body.split_evenly((rows, columns)).iter().zip(&chart.panels) {
            draw_panel(area, panel, chart)?;
        }
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| anyhow::anyhow!("drawing {}: {e}", path.display()))
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &Panel,
    chart: &Chart<'_>,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let categories = &chart.x_categories;
    let (x_min, x_max, x_axis) = x_axis(panel, categories);
    let mut ctx = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(x_axis.clone(), 0.0..y_top(panel))?;
    let label = |x: &f64| x_tick_label(*x, categories);
    ctx.configure_mesh()
        .x_desc(chart.x_label)
        .y_desc(panel.y_label.as_deref().unwrap_or(chart.y_label))
        .x_labels(((x_max - x_min) as usize + 1).clamp(2, 17))
        .x_label_formatter(&label)
        .draw()?;
    let points = panel
        .series
        .iter()
        .filter(|s| s.style != Style::Reference)
        .count();
    let mut nth_points = 0;
    for (i, series) in panel.series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        if series.style == Style::Reference {
            draw_reference(&mut ctx, series, color, &x_axis)?;
            continue;
        }
        if categories.is_empty() {
            draw_series(&mut ctx, series, color, 0.0, true)?;
        } else {
            // Side by side within a category, so equal values stay visible.
            let shift = (nth_points as f64 - (points as f64 - 1.0) / 2.0) * 0.12;
            draw_series(&mut ctx, series, color, shift, false)?;
        }
        nth_points += 1;
    }
    ctx.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// A panel's x extent (its points', or the categories' indices) and the
/// drawn axis: that extent padded.
fn x_axis(panel: &Panel, categories: &[String]) -> (f64, f64, std::ops::Range<f64>) {
    let (x_min, x_max) = if categories.is_empty() {
        x_range(panel)
    } else {
        (0.0, categories.len().saturating_sub(1) as f64)
    };
    let pad = if categories.is_empty() {
        ((x_max - x_min) * 0.05).max(0.25)
    } else {
        0.5
    };
    (x_min, x_max, x_min - pad..x_max + pad)
}

/// The label of tick `x`. X values are counts or category indices: label
/// whole numbers only.
fn x_tick_label(x: f64, categories: &[String]) -> String {
    if (x - x.round()).abs() > 1e-9 {
        String::new()
    } else if categories.is_empty() {
        format!("{x:.0}")
    } else {
        let i = x.round();
        (i >= 0.0)
            .then(|| categories.get(i as usize))
            .flatten()
            .cloned()
            .unwrap_or_default()
    }
}

/// The smallest and largest x of a panel's points (0 and 1 when it has
/// none); reference lines span whatever the points do.
fn x_range(panel: &Panel) -> (f64, f64) {
    let xs = || {
        panel
            .series
            .iter()
            .filter(|s| s.style != Style::Reference)
            .flat_map(|s| s.points.iter().map(|p| p.0))
    };
    let x_min = xs().fold(f64::INFINITY, f64::min);
    let x_max = xs().fold(f64::NEG_INFINITY, f64::max);
    if x_min.is_finite() {
        (x_min, x_max)
    } else {
        (0.0, 1.0)
    }
}

/// The top of a panel's y axis: room for every point and error bar, and
/// for the legend above them.
fn y_top(panel: &Panel) -> f64 {
    let y_max = panel
        .series
        .iter()
        .flat_map(|s| {
            s.points
                .iter()
                .enumerate()
                .map(|(i, p)| p.1 + s.errors.get(i).copied().unwrap_or(0.0))
        })
        .fold(0.0, f64::max);
    // Keep the band the legend takes at the top free of data: the plot is
    // about 290 px high and each legend row about 20 px.
    let legend_share = ((20 * panel.series.len() + 16) as f64 / 290.0).min(0.6);
    (y_max * 1.05 / (1.0 - legend_share)).max(1e-9)
}

type Ctx<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Draws one series: its points (joined by a line when `joined`, with a
/// legend entry either way), each `shift` to the right, and their error
/// bars.
fn draw_series<DB: DrawingBackend>(
    ctx: &mut Ctx<'_, DB>,
    series: &Series,
    color: RGBColor,
    shift: f64,
    joined: bool,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let style = ShapeStyle::from(&color).stroke_width(2);
    let points = || series.points.iter().map(|&(x, y)| (x + shift, y));
    if joined {
        ctx.draw_series(LineSeries::new(points(), style))?
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style))
            .label(series.name.as_str());
        ctx.draw_series(points().map(|p| Circle::new(p, 3, color.filled())))?;
    } else {
        ctx.draw_series(points().map(|p| Circle::new(p, 4, color.filled())))?
            .legend(move |(x, y)| Circle::new((x + 9, y), 4, color.filled()))
            .label(series.name.as_str());
    }
    ctx.draw_series(points().zip(&series.errors).map(|((x, y), &e)| {
        ErrorBar::new_vertical(x, (y - e).max(0.0), y, y + e, color.stroke_width(1), 8)
    }))?;
    Ok(())
}

/// Draws a reference series: a dashed line at its y across `x_axis`.
fn draw_reference<DB: DrawingBackend>(
    ctx: &mut Ctx<'_, DB>,
    series: &Series,
    color: RGBColor,
    x_axis: &std::ops::Range<f64>,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let Some(&(_, y)) = series.points.first() else {
        return Ok(());
    };
    let style = ShapeStyle::from(&color).stroke_width(2);
    ctx.draw_series(DashedLineSeries::new(
        [(x_axis.start, y), (x_axis.end, y)],
        8,
        5,
        style,
    ))?
    .label(series.name.as_str())
    .legend(move |(x, y)| DashedPathElement::new(vec![(x, y), (x + 18, y)], 5, 3, style));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_median_and_stdev() {
        let s = Stats::of(&[3.0, 1.0, 2.0]);
        assert_eq!((s.median, s.mean), (2.0, 2.0));
        assert!((s.stdev - 1.0).abs() < 1e-12);
        let s = Stats::of(&[1.0, 2.0, 3.0, 10.0]);
        assert_eq!((s.median, s.mean), (2.5, 4.0));
        assert_eq!(Stats::of(&[5.0]).stdev, 0.0);
        let s = Stats::of(&[3.0, 1.0, 2.0]);
        assert_eq!((s.min, s.max), (1.0, 3.0));
        assert_eq!(fmt_range(s.min, s.max, 3, 1), "1.0–3.0");
        assert_eq!(fmt_range(s.min, s.max, 1, 1), "-");
    }

    #[test]
    fn ratios_keep_three_significant_digits() {
        assert_eq!(fmt_ratio(13.5 / 7570.0), "0.00178x");
        assert_eq!(fmt_ratio(0.0597), "0.0597x");
        assert_eq!(fmt_ratio(1.0), "1.00x");
        assert_eq!(fmt_ratio(33.2), "33.2x");
        assert_eq!(fmt_ratio(561.2), "561x");
        assert_eq!(fmt_ratio(0.0), "0.00x");
        assert_eq!(fmt_ratio(f64::NAN), "");
    }

    #[test]
    fn low_cpu_shares_are_marked() {
        assert!(cpu_share_is_low(0.8999));
        assert!(!cpu_share_is_low(0.9));
        assert!(!cpu_share_is_low(1.02));
        assert_eq!(fmt_cpu_share(0.97), "97%");
        assert_eq!(fmt_cpu_share(0.9), "90%");
        // Rounded down: a marked share never reads as 90%.
        assert_eq!(fmt_cpu_share(0.8999), "89%*");
        assert_eq!(fmt_cpu_share(0.45), "45%*");
        assert_eq!(fmt_cpu_share(1.003), "100%");
    }

    #[test]
    fn method_note_explains_the_marker_only_when_a_row_has_one() {
        let busy = PhaseFacts::of(3, [(0.25, 0.99), (0.21, 0.95)]);
        assert_eq!(busy.cpu_shares, vec![0.99, 0.95]);
        assert_eq!((busy.rounds, busy.min_cpu_share), (3, 0.95));
        assert!((busy.shortest_phase_ms - 210.0).abs() < 1e-9);
        assert_eq!(busy.cpu_cell(), "95%");
        let note = method_note([&busy], 200.0);
        assert!(
            note.contains("shortest 210 ms") && note.contains("up to 3x"),
            "{note}"
        );
        assert!(
            !note.contains('*') && !note.contains("shorter than"),
            "{note}"
        );
        let starved = PhaseFacts::of(1, [(0.15, 0.5)]);
        assert_eq!(starved.cpu_cell(), "50%*");
        let note = method_note([&busy, &starved], 200.0);
        assert!(
            note.contains("* below 90%") && note.contains("shorter than"),
            "{note}"
        );
    }

    fn panel(errors: Vec<f64>, nr_series: usize) -> Panel {
        Panel {
            title: "p".into(),
            series: (0..nr_series)
                .map(|i| Series {
                    name: format!("s{i}"),
                    points: vec![(1.0, 2.0), (2.0, 3.0)],
                    errors: errors.clone(),
                    style: Style::Line,
                })
                .collect(),
            y_label: None,
        }
    }

    fn chart(panels: Vec<Panel>) -> Chart<'static> {
        Chart {
            title: "t",
            x_label: "threads",
            y_label: "Mops/s",
            panels,
            x_categories: Vec::new(),
        }
    }

    /// `chart` drawn, as SVG text.
    fn drawn(chart: &Chart<'_>) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.svg");
        write_svg(&path, chart).unwrap();
        std::fs::read_to_string(&path).unwrap()
    }

    #[test]
    fn the_legend_band_stays_free_of_data_and_error_bars() {
        for nr_series in [1, 3, 6] {
            let p = panel(vec![0.5, 1.0], nr_series);
            let top = y_top(&p);
            // The highest error bar's end, as a share of the axis, below
            // the band the legend's rows take at the top.
            let legend_share = (20 * nr_series + 16) as f64 / 290.0;
            assert!(
                (3.0 + 1.0) / top <= 1.0 - legend_share,
                "{nr_series} series"
            );
        }
    }

    #[test]
    fn error_bars_are_drawn() {
        let draw = |errors: Vec<f64>| drawn(&chart(vec![panel(errors, 1)]));
        let lines = |svg: &str| svg.matches("<line").count() + svg.matches("<polyline").count();
        let (with, without) = (draw(vec![0.5, 0.25]), draw(Vec::new()));
        // Each bar is a vertical line and two caps.
        assert!(lines(&with) >= lines(&without) + 6, "{with}");
    }

    #[test]
    fn the_canvas_is_as_wide_as_its_panels() {
        assert_eq!(canvas_size(1), (700, 440));
        assert_eq!(canvas_size(2), (1000, 440));
        assert_eq!(canvas_size(5), (1000, 1200));
        let svg = drawn(&chart(vec![panel(Vec::new(), 1)]));
        assert!(svg.starts_with(r#"<svg width="700" height="440""#), "{svg}");
        // A long title shrinks to fit.
        assert_eq!(title_px("t", 700), 24.0);
        assert!(title_px(&"x".repeat(65), 700) * 65.0 * 0.55 < 700.0);
    }

    #[test]
    fn a_categorical_axis_names_its_categories_and_joins_no_points() {
        let mut categorical = chart(vec![Panel {
            title: "p".into(),
            series: vec![Series {
                name: "a".into(),
                points: vec![(0.0, 1.0), (1.0, 2.0)],
                errors: Vec::new(),
                style: Style::Line,
            }],
            y_label: None,
        }]);
        let joined = drawn(&categorical);
        categorical.x_categories = vec!["4K".into(), "64K".into()];
        let svg = drawn(&categorical);
        assert!(
            svg.contains(">\n4K\n<") && svg.contains(">\n64K\n<"),
            "{svg}"
        );
        // The numeric chart joins its points with a line (2 px wide; the
        // axes' are 1 px); the categorical one draws them alone.
        let data_line = r#"stroke-width="2" points="#;
        assert!(joined.contains(data_line), "{joined}");
        assert!(!svg.contains(data_line), "{svg}");
    }

    #[test]
    fn references_are_dashed_and_panels_keep_their_own_y_labels() {
        let mut p = panel(Vec::new(), 1);
        p.series.push(Series::reference("seed 0.892", 0.892));
        p.y_label = Some("ms".into());
        let mut other = panel(Vec::new(), 1);
        other.y_label = Some("Mops/s here".into());
        let svg = drawn(&chart(vec![p, other]));
        assert!(svg.contains(">\nseed 0.892\n<"), "legend of the reference");
        assert!(
            svg.contains(">\nms\n<") && svg.contains(">\nMops/s here\n<"),
            "{svg}"
        );
        assert!(
            !svg.contains(">\nMops/s\n<"),
            "the chart's label is overridden: {svg}"
        );
        // The dashed line is drawn in pieces: more lines than a plain one.
        let plain = drawn(&chart(vec![panel(Vec::new(), 1)]));
        let count = |svg: &str| svg.matches("<polyline").count() + svg.matches("<line").count();
        assert!(count(&svg) > 2 * count(&plain), "dashes");
        // A reference does not widen the x axis (its one x is nominal).
        let only = Panel {
            title: "p".into(),
            series: vec![
                Series::reference("r", 1.0),
                Series::by_threads("a", [(4, 1.0, 0.0), (8, 2.0, 0.0)]),
            ],
            y_label: None,
        };
        assert_eq!(x_range(&only), (4.0, 8.0));
    }

    #[test]
    fn svg_is_written() {
        let text = drawn(&chart(vec![Panel {
            title: "p".into(),
            series: vec![Series {
                name: "a".into(),
                points: vec![(1.0, 2.0), (2.0, 3.0)],
                errors: vec![0.5, 0.25],
                style: Style::Line,
            }],
            y_label: None,
        }]));
        assert!(
            text.starts_with("<svg") && text.contains(">\na\n<"),
            "legend present"
        );
    }
}

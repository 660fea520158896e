//! `raspc plot`: heatmaps (PNG or SVG) of every block of a checkpoint (QK and OV circuits of each
//! head, MLP input and output matrices) with rows and columns named in the residual basis, a
//! colorbar (linear, or symmetric-log with `--symlog` so small weights show), and an overview of
//! which s-op lives where and which layer reads and writes it. All-zero rows and columns are left
//! out (the subtitle counts them); a block with more than 300 nonzero rows or columns is split
//! into pages (`_p{row page}_{column page}`), never cut.
//!
//! Text needs a TrueType font: `$RASPC_FONT`, else DejaVu Sans or Liberation Sans from the usual
//! system places (Debian: `apt-get install fonts-dejavu-core`).

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use raspc_checkpoint::{Checkpoint, Tensor};
use std::path::{Path, PathBuf};

const CELL: u32 = 12;
const MARGIN: u32 = 230;
/// Largest number of rows or columns on one page; larger blocks are split into pages.
const MAX_CELLS: usize = 300;
/// Room right of the cells for the colorbar and its labels.
const BAR: u32 = 150;

/// The file format of the figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Format {
    #[default]
    Png,
    Svg,
}

impl Format {
    pub fn ext(self) -> &'static str {
        match self {
            Format::Png => "png",
            Format::Svg => "svg",
        }
    }
}

/// How `raspc plot` draws.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    pub format: Format,
    /// Symmetric-log colour scale: `sign(v) log(1 + |v|/t) / log(1 + max/t)` with `t` the smallest
    /// nonzero |weight| of the figure.
    pub symlog: bool,
}

fn font_bytes() -> Result<&'static [u8], String> {
    let mut candidates: Vec<PathBuf> = std::env::var_os("RASPC_FONT").map(PathBuf::from).into_iter().collect();
    for p in [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
        "/Library/Fonts/Arial.ttf",
        "C:\\Windows\\Fonts\\arial.ttf",
    ] {
        candidates.push(PathBuf::from(p));
    }
    for c in &candidates {
        if let Ok(b) = std::fs::read(c) {
            return Ok(Box::leak(b.into_boxed_slice()));
        }
    }
    Err("no TrueType font found for plot labels: set RASPC_FONT to a .ttf file, or install fonts-dejavu-core".into())
}

fn register() -> Result<(), String> {
    static DONE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        let bytes = font_bytes()?;
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).map_err(|_| "the font file is not a usable TrueType font".to_string())
    })
    .clone()
}

// Index safety (issue 13, item 3): the matrix helpers below take tensors returned by
// `inspect::tensor`, whose shapes match the config and whose data length is the product of the
// shape, so every `shape[0]`, `shape[1]` and `data[i * k + c]` is in range; `heatmap` and
// `overview` index only matrices they size themselves (rows of equal length, cells sized from the
// layout and the stages).
fn matmul_t(a: &Tensor, b: &Tensor) -> Vec<Vec<f32>> {
    // a [d, k] times b^T (b [d, k]) -> [d, d]
    let (d, k) = (a.shape[0], a.shape[1]);
    let mut out = vec![vec![0f32; d]; d];
    for (i, row) in out.iter_mut().enumerate() {
        for (j, cell) in row.iter_mut().enumerate() {
            *cell = (0..k).map(|c| a.data[i * k + c] * b.data[j * k + c]).sum();
        }
    }
    out
}

fn matmul(a: &Tensor, b: &Tensor) -> Vec<Vec<f32>> {
    // a [d, k] times b [k, e]
    let (d, k, e) = (a.shape[0], a.shape[1], b.shape[1]);
    (0..d).map(|i| (0..e).map(|j| (0..k).map(|c| a.data[i * k + c] * b.data[c * e + j]).sum()).collect()).collect()
}

fn rows_of(t: &Tensor) -> Vec<Vec<f32>> {
    let (r, c) = (t.shape[0], t.shape[1]);
    (0..r).map(|i| t.data[i * c..(i + 1) * c].to_vec()).collect()
}

fn transpose(m: &[Vec<f32>]) -> Vec<Vec<f32>> {
    let c = m.first().map_or(0, Vec::len);
    (0..c).map(|j| m.iter().map(|r| r[j]).collect()).collect()
}

/// Position in [-1, 1] of `v` on the colour scale.
fn shade(v: f32, vmax: f32, symlog: Option<f32>) -> f32 {
    match symlog {
        None => v / vmax,
        Some(t) => v.signum() * (1.0 + v.abs() / t).ln() / (1.0 + vmax / t).ln(),
    }
}

fn color(x: f32) -> RGBColor {
    let x = x.clamp(-1.0, 1.0);
    if x >= 0.0 {
        RGBColor(255, (255.0 * (1.0 - x)) as u8, (255.0 * (1.0 - x)) as u8)
    } else {
        RGBColor((255.0 * (1.0 + x)) as u8, (255.0 * (1.0 + x)) as u8, 255)
    }
}

/// The number of decimal digits of `n`.
fn digits(n: usize) -> usize {
    n.checked_ilog10().map_or(1, |l| l as usize + 1)
}

/// Draws the heatmap of the nonzero rows and columns of `m`, one page per block of at most
/// MAX_CELLS rows and columns; returns the files written (`path`, or `path` with `_pR_C` for
/// several pages).
#[allow(clippy::too_many_arguments)]
fn heatmap(path: &Path, title: &str, m: &[Vec<f32>], rows: &[String], cols: &[String], row_axis: &str, col_axis: &str, opts: &Options) -> Result<Vec<PathBuf>, String> {
    let keep_r: Vec<usize> = (0..m.len()).filter(|&i| m[i].iter().any(|x| *x != 0.0)).collect();
    let ncols = m.first().map_or(0, Vec::len);
    let keep_c: Vec<usize> = (0..ncols).filter(|&j| m.iter().any(|r| r[j] != 0.0)).collect();
    let vals = || keep_r.iter().flat_map(|&i| keep_c.iter().map(move |&j| m[i][j].abs()));
    let vmax = vals().fold(1e-12f32, f32::max);
    let symlog = opts.symlog.then(|| vals().filter(|x| *x > 0.0).fold(vmax, f32::min));
    let dropped = format!("{} all-zero rows and {} all-zero columns not shown", m.len() - keep_r.len(), ncols - keep_c.len());
    let row_pages: Vec<&[usize]> = if keep_r.is_empty() { vec![&[][..]] } else { keep_r.chunks(MAX_CELLS).collect() };
    let col_pages: Vec<&[usize]> = if keep_c.is_empty() { vec![&[][..]] } else { keep_c.chunks(MAX_CELLS).collect() };
    let paged = row_pages.len() > 1 || col_pages.len() > 1;
    let mut files = vec![];
    for (pr, kr) in row_pages.iter().enumerate() {
        for (pc, kc) in col_pages.iter().enumerate() {
            let (file, page) = if paged {
                let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("figure");
                // Page numbers padded to the widest, so that the files sort in page order.
                let (wr, wc) = (digits(row_pages.len() - 1), digits(col_pages.len() - 1));
                let p = path.with_file_name(format!("{stem}_p{pr:0wr$}_{pc:0wc$}.{}", opts.format.ext()));
                (
                    p,
                    format!(
                        " (page {pr},{pc} of {}x{}: rows {}..{} and columns {}..{} of the nonzero ones)",
                        row_pages.len(),
                        col_pages.len(),
                        pr * MAX_CELLS,
                        pr * MAX_CELLS + kr.len(),
                        pc * MAX_CELLS,
                        pc * MAX_CELLS + kc.len()
                    ),
                )
            } else {
                (path.with_extension(opts.format.ext()), String::new())
            };
            let w = (MARGIN + CELL * kc.len().max(1) as u32 + BAR).max(16 + 8 * (title.chars().count() + page.chars().count()) as u32);
            let h = MARGIN + (CELL * kr.len().max(1) as u32).max(120) + 40;
            let sub = format!("rows: {row_axis}; columns: {col_axis}; {dropped}");
            let page_title = format!("{title}{page}");
            let cells = Cells { m, kr, kc, rows, cols, vmax, symlog };
            may_draw(&file, opts.format)?;
            let tmp = temp_figure(&file);
            let drawn = match opts.format {
                Format::Png => draw_heatmap(BitMapBackend::new(&tmp, (w, h)).into_drawing_area(), &file, &page_title, &sub, &cells),
                Format::Svg => draw_heatmap(SVGBackend::new(&tmp, (w, h)).into_drawing_area(), &file, &page_title, &sub, &cells),
            };
            put_figure(&tmp, &file, opts.format, drawn)?;
            files.push(file);
        }
    }
    Ok(files)
}

struct Cells<'a> {
    m: &'a [Vec<f32>],
    kr: &'a [usize],
    kc: &'a [usize],
    rows: &'a [String],
    cols: &'a [String],
    vmax: f32,
    symlog: Option<f32>,
}

fn draw_heatmap<DB: DrawingBackend>(area: DrawingArea<DB, plotters::coord::Shift>, path: &Path, title: &str, sub: &str, c: &Cells) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("cannot draw `{}`: {e}", path.display());
    area.fill(&WHITE).map_err(err)?;
    let font = ("sans-serif", 11).into_font();
    area.draw(&Text::new(title.to_string(), (8, 6), ("sans-serif", 15).into_font())).map_err(err)?;
    area.draw(&Text::new(sub.to_string(), (8, 26), font.clone())).map_err(err)?;
    for (ci, &j) in c.kc.iter().enumerate() {
        let x = (MARGIN + CELL * ci as u32 + CELL / 2) as i32;
        let style = font.clone().transform(FontTransform::Rotate270).into_text_style(&area).pos(Pos::new(HPos::Left, VPos::Center));
        area.draw(&Text::new(c.cols[j].clone(), (x, MARGIN as i32 - 4), style)).map_err(err)?;
    }
    for (ri, &i) in c.kr.iter().enumerate() {
        let y = (MARGIN + CELL * ri as u32 + CELL / 2) as i32;
        let style = font.clone().into_text_style(&area).pos(Pos::new(HPos::Right, VPos::Center));
        area.draw(&Text::new(c.rows[i].clone(), (MARGIN as i32 - 4, y), style)).map_err(err)?;
        for (ci, &j) in c.kc.iter().enumerate() {
            let x0 = (MARGIN + CELL * ci as u32) as i32;
            let y0 = (MARGIN + CELL * ri as u32) as i32;
            let fill = color(shade(c.m[i][j], c.vmax, c.symlog));
            area.draw(&Rectangle::new([(x0, y0), (x0 + CELL as i32, y0 + CELL as i32)], fill.filled())).map_err(err)?;
            area.draw(&Rectangle::new([(x0, y0), (x0 + CELL as i32, y0 + CELL as i32)], RGBColor(225, 225, 225))).map_err(err)?;
        }
    }
    // The colorbar: from +max (top) to -max (bottom), labelled at the ends, 0 and (symlog) ±t.
    let bx = (MARGIN + CELL * c.kc.len().max(1) as u32 + 20) as i32;
    let top = MARGIN as i32;
    let height = (CELL * c.kr.len().max(1) as u32).max(120) as i32;
    let steps = 60;
    for k in 0..steps {
        let y0 = top + height * k / steps;
        let y1 = top + height * (k + 1) / steps;
        let x = 1.0 - 2.0 * (k as f32 + 0.5) / steps as f32;
        area.draw(&Rectangle::new([(bx, y0), (bx + 14, y1)], color(x).filled())).map_err(err)?;
    }
    area.draw(&Rectangle::new([(bx, top), (bx + 14, top + height)], RGBColor(120, 120, 120))).map_err(err)?;
    let mut ticks = vec![(c.vmax, 1.0f32), (0.0, 0.0), (-c.vmax, -1.0)];
    if let Some(t) = c.symlog
        && t < c.vmax
        && shade(t, c.vmax, c.symlog) * height as f32 / 2.0 >= 14.0
    {
        let s = shade(t, c.vmax, c.symlog);
        ticks.push((t, s));
        ticks.push((-t, -s));
    }
    for (v, pos) in ticks {
        let y = top + ((1.0 - pos) / 2.0 * height as f32) as i32;
        let style = font.clone().into_text_style(&area).pos(Pos::new(HPos::Left, VPos::Center));
        area.draw(&PathElement::new(vec![(bx + 14, y), (bx + 18, y)], BLACK)).map_err(err)?;
        area.draw(&Text::new(tick_label(v), (bx + 21, y), style)).map_err(err)?;
    }
    let scale = if c.symlog.is_some() { "symlog" } else { "linear" };
    area.draw(&Text::new(scale.to_string(), (bx - 4, top + height + 6), font)).map_err(err)?;
    area.present().map_err(err)
}

/// A colour scale's tick: four significant digits, in exponent form when small or large
/// (helper f13: `{:.3}` printed 1e-4 as `0.000` and 2^43 as `8796093022208.000`).
fn tick_label(v: f32) -> String {
    let a = v.abs();
    if v == 0.0 {
        "0".to_string()
    } else if (0.01..10_000.0).contains(&a) {
        let digits = (3 - a.log10().floor() as i32).max(0) as usize;
        format!("{v:.digits$}")
    } else {
        format!("{v:.3e}")
    }
}

/// The overview's stages (embed, then each layer's attention and MLP) and, per residual slot,
/// whether each writes (W) or reads (R) it.
fn overview_cells(ck: &Checkpoint) -> (Vec<String>, Vec<Vec<char>>) {
    let mut stages = vec!["embed".to_string()];
    for l in 0..ck.config.layers.len() {
        stages.push(format!("L{l} attention"));
        stages.push(format!("L{l} MLP"));
    }
    let sops = &ck.layout.sops;
    let mut cells = vec![vec![' '; stages.len()]; sops.len()];
    // The dims each stage writes, from its weights: for slots no block's info names (the parts
    // of a grouped sum, which the MLP writing the sum writes; helper f13: they were drawn as
    // the embedding's), and for a checkpoint without infos.
    let d = ck.config.d_model;
    let writes_dims = crate::inspect::stage_writes(ck);
    for (r, s) in sops.iter().enumerate() {
        let mut written = false;
        for (l, layer) in ck.config.layers.iter().enumerate() {
            for (k, infos) in [(1 + 2 * l, &layer.head_info), (2 + 2 * l, &layer.mlp_info)] {
                for i in infos {
                    if i.writes == s.label {
                        cells[r][k] = 'W';
                        written = true;
                    } else if i.reads.contains(&s.label) && cells[r][k] != 'W' {
                        cells[r][k] = 'R';
                    }
                }
            }
        }
        if !written {
            let dims = s.offset..(s.offset + s.encoding.dims()).min(d);
            for (k, w) in writes_dims.iter().enumerate() {
                if w[dims.clone()].iter().any(|&x| x) {
                    cells[r][k] = 'W';
                }
            }
        }
    }
    (stages, cells)
}

/// The overview's size in pixels: a column per stage, a row per slot.
fn overview_pixels(ck: &Checkpoint) -> (usize, usize) {
    let stages = 1 + 2 * ck.config.layers.len();
    let (cw, ch, left, top) = OVERVIEW_GEOMETRY;
    let w = (left as usize).saturating_add((cw as usize).saturating_mul(stages)).saturating_add(20).max(520);
    let h = (top as usize).saturating_add((ch as usize).saturating_mul(ck.layout.sops.len())).saturating_add(60);
    (w, h)
}

/// Cell width and height, left and top margins of the overview (pixels).
const OVERVIEW_GEOMETRY: (u32, u32, u32, u32) = (70, 16, 240, 80);

/// Largest overview `plot` draws (pixels: 8192 x 8192).
pub const MAX_OVERVIEW_PIXELS: usize = 1 << 26;

/// The overview: rows are residual slots, columns the stages of the network; a cell says
/// whether that stage writes (W) or reads (R) the slot.
fn overview(path: &Path, ck: &Checkpoint, format: Format) -> Result<(), String> {
    let (stages, cells) = overview_cells(ck);
    let (cw, ch, left, top) = OVERVIEW_GEOMETRY;
    let (w, h) = overview_pixels(ck);
    let (w, h) = (w as u32, h as u32);
    let geometry = (cw, ch, left, top);
    may_draw(path, format)?;
    let tmp = temp_figure(path);
    let drawn = match format {
        Format::Png => draw_overview(BitMapBackend::new(&tmp, (w, h)).into_drawing_area(), path, ck, &stages, &cells, geometry),
        Format::Svg => draw_overview(SVGBackend::new(&tmp, (w, h)).into_drawing_area(), path, ck, &stages, &cells, geometry),
    };
    put_figure(&tmp, path, format, drawn)
}

fn draw_overview<DB: DrawingBackend>(
    area: DrawingArea<DB, plotters::coord::Shift>,
    path: &Path,
    ck: &Checkpoint,
    stages: &[String],
    cells: &[Vec<char>],
    (cw, ch, left, top): (u32, u32, u32, u32),
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("cannot draw `{}`: {e}", path.display());
    let sops = &ck.layout.sops;
    area.fill(&WHITE).map_err(err)?;
    let c = &ck.config;
    let title = format!(
        "{}: {} layers, d_model {}, max_seq_len {}{}",
        crate::inspect::printable(&ck.output.label),
        c.layers.len(),
        c.d_model,
        c.max_seq_len,
        if c.causal { ", causal" } else { "" }
    );
    area.draw(&Text::new(title, (8, 6), ("sans-serif", 15).into_font())).map_err(err)?;
    area.draw(&Text::new("W = writes the s-op, R = reads it; rows: residual slots (offset, dims)".to_string(), (8, 28), ("sans-serif", 11).into_font())).map_err(err)?;
    let font = ("sans-serif", 11).into_font();
    for (k, st) in stages.iter().enumerate() {
        let style = font.clone().into_text_style(&area).pos(Pos::new(HPos::Center, VPos::Bottom));
        area.draw(&Text::new(st.clone(), ((left + cw * k as u32 + cw / 2) as i32, top as i32 - 4), style)).map_err(err)?;
    }
    for (r, s) in sops.iter().enumerate() {
        let y = (top + ch * r as u32) as i32;
        let style = font.clone().into_text_style(&area).pos(Pos::new(HPos::Right, VPos::Center));
        let name = format!("{} [{}+{}]", crate::inspect::printable(&s.label), s.offset, s.encoding.dims());
        area.draw(&Text::new(name, (left as i32 - 6, y + ch as i32 / 2), style)).map_err(err)?;
        for (k, &cell) in cells[r].iter().enumerate() {
            let x = (left + cw * k as u32) as i32;
            let color = match cell {
                'W' => RGBColor(90, 170, 90),
                'R' => RGBColor(170, 200, 240),
                _ => RGBColor(250, 250, 250),
            };
            area.draw(&Rectangle::new([(x, y), (x + cw as i32, y + ch as i32)], color.filled())).map_err(err)?;
            area.draw(&Rectangle::new([(x, y), (x + cw as i32, y + ch as i32)], RGBColor(220, 220, 220))).map_err(err)?;
            if cell != ' ' {
                let style = font.clone().into_text_style(&area).pos(Pos::new(HPos::Center, VPos::Center));
                area.draw(&Text::new(cell.to_string(), (x + cw as i32 / 2, y + ch as i32 / 2), style)).map_err(err)?;
            }
        }
    }
    area.present().map_err(err)
}

/// A figure may be drawn at `path` when nothing is there or a figure of this format is (an
/// earlier run's): never over another file, and never through a link.
fn may_draw(path: &Path, format: Format) -> Result<(), String> {
    let what = match format {
        Format::Png => "a PNG figure written by raspc",
        Format::Svg => "an SVG figure written by raspc",
    };
    crate::cmd::output::may_replace(path, what, &|b| is_our_figure(b, format))
}

/// What marks a figure as raspc's: a PNG text chunk `Software` = this, first after the header;
/// an SVG comment, first in the file. Only such files are ever replaced by a later plot (a user's
/// own figure of the same name is not).
const FIGURE_MARK: &str = "raspc plot";

pub(crate) fn is_our_figure(b: &[u8], format: Format) -> bool {
    match format {
        Format::Png => {
            let chunk = b.get(33..).unwrap_or_default();
            b.starts_with(b"\x89PNG\r\n\x1a\n") && chunk.get(4..8) == Some(b"tEXt") && chunk.get(8..).is_some_and(|c| c.starts_with(format!("Software\0{FIGURE_MARK}").as_bytes()))
        }
        Format::Svg => b.starts_with(format!("<!-- {FIGURE_MARK} -->").as_bytes()),
    }
}

/// Where a figure is drawn before it is moved into place: beside it, hidden, with its extension
/// (the PNG encoder goes by it).
/// Registered for removal if the process is interrupted (the CLI's handler,
/// `cmd::output::install_cleanup`; a host program's own handler otherwise).
fn temp_figure(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let ext = path.extension().map(|e| e.to_string_lossy().into_owned()).unwrap_or_default();
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    crate::cmd::output::remove_stale_temps(dir, &name);
    let tmp = path.with_file_name(format!(".{name}.{}.raspc-tmp.{ext}", std::process::id()));
    if let Ok(mut files) = crate::cmd::output::TEMP_FILES.lock() {
        files.push(tmp.clone());
    }
    tmp
}

/// Marks the figure drawn at `tmp` and renames it to `path`: a figure that fails to draw or to
/// write (a full disk) leaves neither a truncated file nor the temporary one.
fn put_figure(tmp: &Path, path: &Path, format: Format, drawn: Result<(), String>) -> Result<(), String> {
    let r = drawn.and_then(|()| mark(tmp, format)).and_then(|()| std::fs::rename(tmp, path).map_err(|e| format!("cannot write `{}`: {e}", path.display())));
    if r.is_err() {
        let _ = std::fs::remove_file(tmp);
    }
    crate::cmd::output::forget_temp(tmp);
    r
}

/// Marks a figure just drawn at `path` as raspc's (see [`FIGURE_MARK`]).
fn mark(path: &Path, format: Format) -> Result<(), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read back `{}`: {e}", path.display()))?;
    let marked = match format {
        // Signature (8 bytes), then IHDR (4 length + 4 type + 13 data + 4 CRC): the text chunk goes
        // right after it.
        Format::Png => {
            if bytes.len() < 33 || !bytes.starts_with(b"\x89PNG\r\n\x1a\n") || &bytes[12..16] != b"IHDR" {
                return Err(format!("`{}`: the drawing library wrote no PNG", path.display()));
            }
            let data = format!("Software\0{FIGURE_MARK}");
            let mut chunk = (data.len() as u32).to_be_bytes().to_vec();
            chunk.extend_from_slice(b"tEXt");
            chunk.extend_from_slice(data.as_bytes());
            chunk.extend_from_slice(&crc32fast::hash(&chunk[4..]).to_be_bytes());
            [&bytes[..33], &chunk[..], &bytes[33..]].concat()
        }
        Format::Svg => [format!("<!-- {FIGURE_MARK} -->\n").as_bytes(), &bytes[..]].concat(),
    };
    std::fs::write(path, marked).map_err(|e| format!("cannot write `{}`: {e}", path.display()))
}

/// Largest heatmap `plot` draws (cells): d_model x d_model circuits and d_model x hidden MLPs.
pub const MAX_PLOT_CELLS: usize = 1 << 24;

/// Writes every figure into `dir` (created if needed) as PNG, linear colour scale; returns the
/// files written.
pub fn plot(ck: &Checkpoint, dir: &Path) -> Result<Vec<PathBuf>, String> {
    plot_with(ck, dir, &Options::default())
}

/// [`plot`] in the given format and colour scale.
pub fn plot_with(ck: &Checkpoint, dir: &Path, opts: &Options) -> Result<Vec<PathBuf>, String> {
    let d = ck.config.d_model;
    let widest = ck.config.layers.iter().filter_map(|l| l.mlp.as_ref().map(|m| m.hidden)).max().unwrap_or(0).max(d);
    if d.saturating_mul(widest) > MAX_PLOT_CELLS {
        return Err(format!("plot draws d_model x d_model and d_model x hidden heatmaps; d_model {d} with widest block {widest} is over {MAX_PLOT_CELLS} cells (use `raspc inspect --layer L --head H` instead)"));
    }
    // The overview has a column per sublayer and a row per slot (helper d13: a 1000-layer model
    // of 4013 dims tried to allocate 6.8 GB for it).
    let (ow, oh) = overview_pixels(ck);
    if ow.saturating_mul(oh) > MAX_OVERVIEW_PIXELS {
        return Err(format!(
            "plot's overview of {} layers and {} residual slots would be {ow} x {oh} pixels, over {MAX_OVERVIEW_PIXELS} (use `raspc inspect` for the layout, and `--layer L --head H` or `--mlp` for a block)",
            ck.config.layers.len(),
            ck.layout.sops.len()
        ));
    }
    register()?;
    std::fs::create_dir_all(dir).map_err(|e| create_error(dir, e))?;
    let names = crate::inspect::basis(ck);
    let mut files = vec![];
    // Every figure's place is checked before any is drawn (a link among them stopped the run
    // half way, leaving new figures beside old ones); pages of a paged heatmap are checked as
    // they are drawn.
    let ext = opts.format.ext();
    let mut planned = vec![dir.join(format!("overview.{ext}"))];
    for (l, layer) in ck.config.layers.iter().enumerate() {
        for h in 0..layer.heads.len() {
            planned.push(dir.join(format!("layer{l}_head{h}_qk.{ext}")));
            planned.push(dir.join(format!("layer{l}_head{h}_ov.{ext}")));
        }
        if let Some(m) = &layer.mlp {
            planned.push(dir.join(format!("layer{l}_mlp_in.{ext}")));
            if m.kind == raspc_checkpoint::MlpKind::Reglu {
                planned.push(dir.join(format!("layer{l}_mlp_gate.{ext}")));
            }
            planned.push(dir.join(format!("layer{l}_mlp_out.{ext}")));
        }
    }
    for p in &planned {
        may_draw(p, opts.format)?;
    }
    let p = dir.join(format!("overview.{}", opts.format.ext()));
    overview(&p, ck, opts.format)?;
    files.push(p);
    for (l, layer) in ck.config.layers.iter().enumerate() {
        for h in 0..layer.heads.len() {
            // Shapes checked against the config (crate::inspect::tensor): the matrix products index safely.
            let t = |w: &str| crate::inspect::tensor(ck, &raspc_checkpoint::names::head(l, h, w));
            let what = layer.head_info.get(h).map(|i| crate::inspect::printable(&i.what)).unwrap_or_default();
            let qk = matmul_t(t("w_q")?, t("w_k")?);
            let p = dir.join(format!("layer{l}_head{h}_qk.png"));
            files.extend(heatmap(&p, &format!("layer {l} head {h} QK circuit: {what}"), &qk, &names, &names, "query dims", "key dims", opts)?);
            let ov = matmul(t("w_v")?, t("w_o")?);
            let p = dir.join(format!("layer{l}_head{h}_ov.png"));
            files.extend(heatmap(&p, &format!("layer {l} head {h} OV circuit: {what}"), &ov, &names, &names, "key (source) dims", "written dims", opts)?);
        }
        if let Some(m) = &layer.mlp {
            let t = |w: &str| crate::inspect::tensor(ck, &raspc_checkpoint::names::mlp(l, w));
            let hidden: Vec<String> = (0..m.hidden).map(|i| format!("h{i}")).collect();
            let what: Vec<String> = layer.mlp_info.iter().map(|i| crate::inspect::printable(&i.writes)).collect();
            // Each figure's bias is its last row ("bias"; like every row, shown where nonzero):
            // a gate made of its bias alone drew as an empty figure (helper e10).
            let mut rows = names.clone();
            rows.push("bias".to_string());
            let with_bias = |w: &str, b: &str| -> Result<Vec<Vec<f32>>, String> {
                let mut m = rows_of(t(w)?);
                m.push(t(b)?.data.clone());
                Ok(m)
            };
            let p = dir.join(format!("layer{l}_mlp_in.png"));
            files.extend(heatmap(&p, &format!("layer {l} MLP input (writes {})", what.join(", ")), &with_bias("w_in", "b_in")?, &rows, &hidden, "residual dims", "hidden units", opts)?);
            if m.kind == raspc_checkpoint::MlpKind::Reglu {
                let p = dir.join(format!("layer{l}_mlp_gate.png"));
                files.extend(heatmap(&p, &format!("layer {l} MLP gate (ReGLU second factor)"), &with_bias("w_gate", "b_gate")?, &rows, &hidden, "residual dims", "hidden units", opts)?);
            }
            // (Transposed: residual dims by hidden units, and b_out, per residual dim, as the
            // last column.)
            let mut out = transpose(&rows_of(t("w_out")?));
            for (row, &b) in out.iter_mut().zip(&t("b_out")?.data) {
                row.push(b);
            }
            let mut units = hidden.clone();
            units.push("bias".to_string());
            let p = dir.join(format!("layer{l}_mlp_out.png"));
            files.extend(heatmap(&p, &format!("layer {l} MLP output (transposed)"), &out, &names, &units, "residual dims", "hidden units", opts)?);
        }
    }
    Ok(files)
}

/// The points `(layer, value)` of a metric by layer, in runs of consecutive layers with a
/// (finite) value: a layer without one ends a run.
fn line_runs(v: &[f64]) -> Vec<Vec<(f64, f64)>> {
    let mut runs: Vec<Vec<(f64, f64)>> = vec![];
    for (l, y) in v.iter().enumerate() {
        match (y.is_finite(), runs.last_mut()) {
            (true, Some(run)) if run.last().is_some_and(|p| p.0 as usize + 1 == l) => run.push((l as f64, *y)),
            (true, _) => runs.push(vec![(l as f64, *y)]),
            (false, _) => {}
        }
    }
    runs
}

/// One PNG per SVFlow metric: the metric (mean over seeds) against depth, one line per level.
pub fn probe_plots(conds: &[crate::probe::Condition], layers: usize, dir: &Path) -> Result<Vec<PathBuf>, String> {
    register()?;
    std::fs::create_dir_all(dir).map_err(|e| create_error(dir, e))?;
    let mut levels: Vec<f64> = conds.iter().map(|c| c.level).collect();
    levels.sort_by(f64::total_cmp);
    levels.dedup();
    let mut files = vec![];
    for metric in crate::probe::METRICS {
        let lines: Vec<(f64, Vec<f64>)> = levels
            .iter()
            .map(|&lv| {
                let cs: Vec<&crate::probe::Condition> = conds.iter().filter(|c| c.level == lv).collect();
                (lv, (0..layers).map(|l| cs.iter().filter_map(|c| c.layers.get(metric)?.get(l)).sum::<f64>() / cs.len().max(1) as f64).collect())
            })
            .collect();
        let finite = lines.iter().flat_map(|(_, v)| v.iter().copied()).filter(|x| x.is_finite());
        let (lo, hi) = finite.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
        let (lo, hi) = if lo.is_finite() {
            if hi - lo < 1e-9 {
                (lo - 0.5, hi + 0.5)
            } else {
                // A margin, so the extreme points are not cut at the frame (helper f13).
                let pad = 0.06 * (hi - lo);
                (lo - pad, hi + pad)
            }
        } else {
            (0.0, 1.0)
        };
        let path = dir.join(format!("svflow_{metric}.png"));
        may_draw(&path, Format::Png)?;
        let tmp = temp_figure(&path);
        let drawn = (|| -> Result<(), String> {
            let area = BitMapBackend::new(&tmp, (720, 480)).into_drawing_area();
            let err = |e: DrawingAreaErrorKind<_>| format!("cannot draw `{}`: {e}", path.display());
            area.fill(&WHITE).map_err(err)?;
            let mut chart = ChartBuilder::on(&area)
                .caption(format!("{metric} by layer, one line per shuffling level"), ("sans-serif", 16))
                .margin(12)
                .x_label_area_size(36)
                .y_label_area_size(60)
                .build_cartesian_2d(-0.2f64..(layers.max(1) as f64 - 0.8), lo..hi)
                .map_err(err)?;
            // Layers are whole numbers (the labels read 0.0, 5.0, ...; helper f13).
            let layer_label = |x: &f64| format!("{}", x.round() as i64);
            chart.configure_mesh().x_desc("layer").y_desc(metric).x_labels(layers.clamp(2, 12)).x_label_formatter(&layer_label).draw().map_err(err)?;
            for (k, (lv, v)) in lines.iter().enumerate() {
                let color = Palette99::pick(k).to_rgba();
                let pts: Vec<(f64, f64)> = v.iter().enumerate().filter(|(_, y)| y.is_finite()).map(|(l, y)| (l as f64, *y)).collect();
                // A layer without a value (no attention heads there) breaks the line: a line
                // across it read as a value there (helper f13).
                for (i, run) in line_runs(v).into_iter().enumerate() {
                    let series = chart.draw_series(LineSeries::new(run, color.stroke_width(2))).map_err(err)?;
                    if i == 0 {
                        series.label(format!("level {lv:.2}")).legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2)));
                    }
                }
                chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled()))).map_err(err)?;
            }
            chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw().map_err(err)?;
            area.present().map_err(err)
        })();
        put_figure(&tmp, &path, Format::Png, drawn)?;
        files.push(path);
    }
    Ok(files)
}

/// Checks, before a probe runs (it can take minutes), that its plots may go into `dir`: a
/// folder (or nothing yet) whose figures, if any, are raspc's own.
pub(crate) fn check_probe_plots(dir: &Path) -> Result<(), String> {
    if let Ok(m) = std::fs::symlink_metadata(dir)
        && !m.is_dir()
    {
        return Err(create_error(dir, std::io::Error::from(std::io::ErrorKind::AlreadyExists)));
    }
    for metric in crate::probe::METRICS {
        may_draw(&dir.join(format!("svflow_{metric}.png")), Format::Png)?;
    }
    Ok(())
}

/// Why the output folder could not be made: a file standing at its path is said plainly.
fn create_error(dir: &Path, e: std::io::Error) -> String {
    // (Helper dt26: a link said "File exists (os error 17)" or "is a file", a path through a file
    // "Not a directory (os error 20)".)
    if std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
        return format!("`{}` is a symbolic link: plot writes its figures into a folder it makes or that exists there, never through a link (give a folder's path)", dir.display());
    }
    if let Some(file) = dir.ancestors().skip(1).find(|a| !a.as_os_str().is_empty() && std::fs::metadata(a).is_ok_and(|m| !m.is_dir())) {
        return format!("cannot create the folder `{}`: `{}` is not a folder", dir.display(), file.display());
    }
    if dir.is_file() {
        format!("`{}` is a file, not a folder: plot writes its figures into a folder (give a new or existing folder's path)", dir.display())
    } else if dir.exists() && !dir.is_dir() {
        format!("`{}` exists and is not a folder (a device, FIFO or socket): plot writes its figures into a folder", dir.display())
    } else {
        format!("cannot create the folder `{}`: {}", dir.display(), crate::cmd::output::io_reason(&e))
    }
}

#[cfg(test)]
mod tests {
    /// The checkpoint of a one-line program.
    fn checkpoint_of(src: &str, opts: &raspc_compiler::Options) -> raspc_checkpoint::Checkpoint {
        let (sources, r) = raspc_lang::evaluate_program("p.rasp", None, src, &raspc_lang::DiskLoader);
        let mut session = r.unwrap_or_else(|d| panic!("{}", crate::render(&sources, &d, false)));
        let (_, root) = session.compile_entry(None).unwrap();
        raspc_compiler::compile(&session.graph, root, opts, "h").unwrap_or_else(|d| panic!("{}", crate::render(&session.sources, &d, false))).checkpoint
    }

    #[test]
    fn an_overview_too_large_to_draw_is_refused_before_anything_is_written() {
        let opts = raspc_compiler::Options { vocab: vec![raspc_lang::Atom::Str("a".into())], max_len: 3, ..Default::default() };
        let mut ck = checkpoint_of("y = aggregate(select(indices, length - indices - 1, ==), tokens);", &opts);
        // 5000 layers: 10,001 columns of 70 pixels.
        let layer = ck.config.layers[0].clone();
        ck.config.layers = vec![layer; 5000];
        let dir = std::env::temp_dir().join(format!("raspc-overview-{}", std::process::id()));
        let e = super::plot(&ck, &dir).unwrap_err();
        assert!(e.contains("overview of 5000 layers") && e.contains("pixels"), "{e}");
        assert!(!dir.exists(), "nothing is written");
    }

    #[test]
    fn a_layer_without_a_value_breaks_the_line() {
        let nan = f64::NAN;
        assert_eq!(super::line_runs(&[0.5, nan, 0.9, 1.0]), vec![vec![(0.0, 0.5)], vec![(2.0, 0.9), (3.0, 1.0)]]);
        assert_eq!(super::line_runs(&[nan, nan]), Vec::<Vec<(f64, f64)>>::new());
        assert_eq!(super::line_runs(&[1.0, 2.0]), vec![vec![(0.0, 1.0), (1.0, 2.0)]]);
    }

    #[test]
    fn colour_scale_ticks_keep_four_significant_digits() {
        let cases =
            [(0.0, "0"), (1e-4, "1.000e-4"), (-1e-4, "-1.000e-4"), (0.0123, "0.01230"), (0.5, "0.5000"), (12.25, "12.25"), (-511.0 / 256.0, "-1.996"), (8796093022208.0, "8.796e12")];
        for (v, want) in cases {
            assert_eq!(super::tick_label(v), want, "{v}");
        }
    }

    #[test]
    fn the_overview_marks_what_each_stage_writes_from_its_weights() {
        // A real-valued softmax: its exp writes partial sums (`e.groupK`), which no block's info
        // names; they are written by an MLP, not the embedding (helper f13).
        let real = raspc_compiler::real::RealOptions { lo: -1.0, hi: 1.0, blocks: vec![], mlp: raspc_compiler::real::MlpMode::Gated, pl_error: None, f32_inputs: false, grids: vec![] };
        let opts = raspc_compiler::Options { max_len: 6, real: Some(real), ..Default::default() };
        let ck = checkpoint_of("y = softmax_rows(tokens_float, 0, 2, 3, 1);", &opts);
        let (stages, cells) = super::overview_cells(&ck);
        let parts: Vec<usize> = ck.layout.sops.iter().enumerate().filter(|(_, s)| s.label.contains(".group")).map(|(r, _)| r).collect();
        assert!(!parts.is_empty(), "no partial sums in {:?}", ck.layout.sops.iter().map(|s| &s.label).collect::<Vec<_>>());
        for r in parts {
            let label = &ck.layout.sops[r].label;
            assert_eq!(cells[r][0], ' ', "{label} drawn as the embedding's");
            let writers: Vec<&String> = stages.iter().zip(&cells[r]).filter(|(_, c)| **c == 'W').map(|(s, _)| s).collect();
            assert!(!writers.is_empty() && writers.iter().all(|s| s.ends_with("MLP")), "{label}: {writers:?}");
        }
    }

    #[test]
    fn page_numbers_are_padded_to_the_largest() {
        assert_eq!([0, 9, 10, 99, 100, 12345].map(super::digits), [1, 1, 2, 2, 3, 5]);
        // Padded names of 12 pages sort in page order.
        let w = super::digits(11);
        let mut names: Vec<String> = (0..12).map(|p| format!("gate_p0_{p:0w$}.png")).collect();
        let in_order = names.clone();
        names.sort();
        assert_eq!(names, in_order);
    }
}

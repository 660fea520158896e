//! `raspc plot`: PNG heatmaps of every block of a checkpoint (QK and OV circuits of each head,
//! MLP input and output matrices) with rows and columns named in the residual basis, and an
//! overview of which s-op lives where and which layer reads and writes it.
//!
//! Text needs a TrueType font: `$RASPC_FONT`, else DejaVu Sans or Liberation Sans from the usual
//! system places (Debian: `apt-get install fonts-dejavu-core`).

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use raspc_checkpoint::{Checkpoint, Tensor};
use std::path::{Path, PathBuf};

const CELL: u32 = 12;
const MARGIN: u32 = 230;
/// Largest number of rows or columns drawn; larger blocks are cut, and the title says so.
const MAX_CELLS: usize = 300;

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

/// Draws one heatmap of the nonzero rows and columns of `m`.
fn heatmap(path: &Path, title: &str, m: &[Vec<f32>], rows: &[String], cols: &[String], row_axis: &str, col_axis: &str) -> Result<(), String> {
    let mut keep_r: Vec<usize> = (0..m.len()).filter(|&i| m[i].iter().any(|x| *x != 0.0)).collect();
    let ncols = m.first().map_or(0, Vec::len);
    let mut keep_c: Vec<usize> = (0..ncols).filter(|&j| m.iter().any(|r| r[j] != 0.0)).collect();
    let cut = keep_r.len() > MAX_CELLS || keep_c.len() > MAX_CELLS;
    keep_r.truncate(MAX_CELLS);
    keep_c.truncate(MAX_CELLS);
    let vmax = keep_r.iter().flat_map(|&i| keep_c.iter().map(move |&j| m[i][j].abs())).fold(1e-12f32, f32::max);
    let w = (MARGIN + CELL * keep_c.len().max(1) as u32 + 90).max(16 + 8 * title.chars().count() as u32);
    let h = MARGIN + CELL * keep_r.len().max(1) as u32 + 40;
    let area = BitMapBackend::new(path, (w, h)).into_drawing_area();
    let err = |e: DrawingAreaErrorKind<_>| format!("drawing {}: {e:?}", path.display());
    area.fill(&WHITE).map_err(err)?;
    let font = ("sans-serif", 11).into_font();
    let title_text = format!("{title}{}", if cut { format!(" (first {MAX_CELLS} rows/columns)") } else { String::new() });
    area.draw(&Text::new(title_text, (8, 6), ("sans-serif", 15).into_font())).map_err(err)?;
    area.draw(&Text::new(format!("rows: {row_axis}; columns: {col_axis}; |max| = {vmax:.3}"), (8, 26), font.clone())).map_err(err)?;
    for (ci, &j) in keep_c.iter().enumerate() {
        let x = (MARGIN + CELL * ci as u32 + CELL / 2) as i32;
        let style = font.clone().transform(FontTransform::Rotate270).into_text_style(&area).pos(Pos::new(HPos::Left, VPos::Center));
        area.draw(&Text::new(cols[j].clone(), (x, MARGIN as i32 - 4), style)).map_err(err)?;
    }
    for (ri, &i) in keep_r.iter().enumerate() {
        let y = (MARGIN + CELL * ri as u32 + CELL / 2) as i32;
        let style = font.clone().into_text_style(&area).pos(Pos::new(HPos::Right, VPos::Center));
        area.draw(&Text::new(rows[i].clone(), (MARGIN as i32 - 4, y), style)).map_err(err)?;
        for (ci, &j) in keep_c.iter().enumerate() {
            let v = m[i][j] / vmax;
            let (r, g, b) = if v >= 0.0 {
                (255, (255.0 * (1.0 - v)) as u8, (255.0 * (1.0 - v)) as u8)
            } else {
                ((255.0 * (1.0 + v)) as u8, (255.0 * (1.0 + v)) as u8, 255)
            };
            let x0 = (MARGIN + CELL * ci as u32) as i32;
            let y0 = (MARGIN + CELL * ri as u32) as i32;
            area.draw(&Rectangle::new([(x0, y0), (x0 + CELL as i32, y0 + CELL as i32)], RGBColor(r, g, b).filled())).map_err(err)?;
            area.draw(&Rectangle::new([(x0, y0), (x0 + CELL as i32, y0 + CELL as i32)], RGBColor(225, 225, 225))).map_err(err)?;
        }
    }
    area.present().map_err(err)
}

/// The overview: rows are residual slots, columns the stages of the network; a cell says
/// whether that stage writes (W) or reads (R) the slot.
fn overview(path: &Path, ck: &Checkpoint) -> Result<(), String> {
    let mut stages = vec!["embed".to_string()];
    for l in 0..ck.config.layers.len() {
        stages.push(format!("L{l} attention"));
        stages.push(format!("L{l} MLP"));
    }
    let sops = &ck.layout.sops;
    let mut cells = vec![vec![' '; stages.len()]; sops.len()];
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
            cells[r][0] = 'W';
        }
    }
    let cw = 70u32;
    let ch = 16u32;
    let left = 240u32;
    let top = 80u32;
    let w = (left + cw * stages.len() as u32 + 20).max(520);
    let h = top + ch * sops.len() as u32 + 60;
    let area = BitMapBackend::new(path, (w, h)).into_drawing_area();
    let err = |e: DrawingAreaErrorKind<_>| format!("drawing {}: {e:?}", path.display());
    area.fill(&WHITE).map_err(err)?;
    let c = &ck.config;
    let title = format!("{}: {} layers, d_model {}, max_seq_len {}{}", ck.output.label, c.layers.len(), c.d_model, c.max_seq_len, if c.causal { ", causal" } else { "" });
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
        let name = format!("{} [{}+{}]", s.label, s.offset, s.encoding.dims());
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

/// Writes every figure into `dir` (created if needed); returns the files written.
/// Largest heatmap `plot` draws (cells): d_model x d_model circuits and d_model x hidden MLPs.
pub const MAX_PLOT_CELLS: usize = 1 << 24;

pub fn plot(ck: &Checkpoint, dir: &Path) -> Result<Vec<PathBuf>, String> {
    let d = ck.config.d_model;
    let widest = ck.config.layers.iter().filter_map(|l| l.mlp.as_ref().map(|m| m.hidden)).max().unwrap_or(0).max(d);
    if d.saturating_mul(widest) > MAX_PLOT_CELLS {
        return Err(format!("plot draws d_model x d_model and d_model x hidden heatmaps; d_model {d} with widest block {widest} is over {MAX_PLOT_CELLS} cells (use `raspc inspect --layer L --head H` instead)"));
    }
    register()?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create `{}`: {e}", dir.display()))?;
    let names = crate::inspect::basis(ck);
    let mut files = vec![];
    let p = dir.join("overview.png");
    overview(&p, ck)?;
    files.push(p);
    for (l, layer) in ck.config.layers.iter().enumerate() {
        for h in 0..layer.heads.len() {
            // Shapes checked against the config (crate::inspect::tensor): the matrix products index safely.
            let t = |w: &str| crate::inspect::tensor(ck, &raspc_checkpoint::names::head(l, h, w));
            let what = layer.head_info.get(h).map(|i| i.what.clone()).unwrap_or_default();
            let qk = matmul_t(t("w_q")?, t("w_k")?);
            let p = dir.join(format!("layer{l}_head{h}_qk.png"));
            heatmap(&p, &format!("layer {l} head {h} QK circuit: {what}"), &qk, &names, &names, "query dims", "key dims")?;
            files.push(p);
            let ov = matmul(t("w_v")?, t("w_o")?);
            let p = dir.join(format!("layer{l}_head{h}_ov.png"));
            heatmap(&p, &format!("layer {l} head {h} OV circuit: {what}"), &ov, &names, &names, "key (source) dims", "written dims")?;
            files.push(p);
        }
        if let Some(m) = &layer.mlp {
            let t = |w: &str| crate::inspect::tensor(ck, &raspc_checkpoint::names::mlp(l, w));
            let hidden: Vec<String> = (0..m.hidden).map(|i| format!("h{i}")).collect();
            let what: Vec<String> = layer.mlp_info.iter().map(|i| i.writes.clone()).collect();
            let p = dir.join(format!("layer{l}_mlp_in.png"));
            heatmap(&p, &format!("layer {l} MLP input (writes {})", what.join(", ")), &rows_of(t("w_in")?), &names, &hidden, "residual dims", "hidden units")?;
            files.push(p);
            if m.kind == raspc_checkpoint::MlpKind::Reglu {
                let p = dir.join(format!("layer{l}_mlp_gate.png"));
                heatmap(&p, &format!("layer {l} MLP gate (ReGLU second factor)"), &rows_of(t("w_gate")?), &names, &hidden, "residual dims", "hidden units")?;
                files.push(p);
            }
            let p = dir.join(format!("layer{l}_mlp_out.png"));
            heatmap(&p, &format!("layer {l} MLP output (transposed)"), &transpose(&rows_of(t("w_out")?)), &names, &hidden, "residual dims", "hidden units")?;
            files.push(p);
        }
    }
    Ok(files)
}

/// One PNG per SVFlow metric: the metric (mean over seeds) against depth, one line per level.
pub fn probe_plots(conds: &[crate::probe::Condition], layers: usize, dir: &Path) -> Result<Vec<PathBuf>, String> {
    register()?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create `{}`: {e}", dir.display()))?;
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
        let (lo, hi) = if lo.is_finite() { if hi - lo < 1e-9 { (lo - 0.5, hi + 0.5) } else { (lo, hi) } } else { (0.0, 1.0) };
        let path = dir.join(format!("svflow_{metric}.png"));
        {
            let area = BitMapBackend::new(&path, (720, 480)).into_drawing_area();
            let err = |e: DrawingAreaErrorKind<_>| format!("drawing {}: {e:?}", path.display());
            area.fill(&WHITE).map_err(err)?;
            let mut chart = ChartBuilder::on(&area)
                .caption(format!("{metric} by layer, one line per shuffling level"), ("sans-serif", 16))
                .margin(12)
                .x_label_area_size(36)
                .y_label_area_size(60)
                .build_cartesian_2d(-0.2f64..(layers.max(1) as f64 - 0.8), lo..hi)
                .map_err(err)?;
            chart.configure_mesh().x_desc("layer").y_desc(metric).x_labels(layers.clamp(2, 12)).draw().map_err(err)?;
            for (k, (lv, v)) in lines.iter().enumerate() {
                let color = Palette99::pick(k).to_rgba();
                let pts: Vec<(f64, f64)> = v.iter().enumerate().filter(|(_, y)| y.is_finite()).map(|(l, y)| (l as f64, *y)).collect();
                chart
                    .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                    .map_err(err)?
                    .label(format!("level {lv:.2}"))
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2)));
                chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled()))).map_err(err)?;
            }
            chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw().map_err(err)?;
            area.present().map_err(err)?;
        }
        files.push(path);
    }
    Ok(files)
}

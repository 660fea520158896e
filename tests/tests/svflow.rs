//! The SVFlow probe definitions (runtime/src/svflow.rs) on captured attention of compiled
//! checkpoints: the captured pieces add up to the attention sublayer, the marginal likelihood
//! decomposes as ELBO + KL(q‖p), a select-all head is uniform and a one-hot head fully
//! concentrated.

use raspc_runtime::svflow::probe_query;
use raspc_runtime::{Attention, LayerCapture, Model};
use raspc_tests::{compile, Case};

fn capture(file: &'static str, vocab: &'static str, input: &str, causal: bool, attention: Attention) -> (Model, Vec<LayerCapture>) {
    let (_, _, _, compiled) = compile(&Case { file, entry: None, vocab }, 8, causal).unwrap();
    let model = Model::new(compiled.checkpoint, &raspc_runtime::device("cpu").unwrap()).unwrap();
    let toks: Vec<serde_json::Value> = input.chars().map(|c| serde_json::json!(c.to_string())).collect();
    let ids = model.encode(&toks).unwrap();
    let caps = model.capture(&ids, attention).unwrap();
    (model, caps)
}

/// Visible keys of query i: all positions, or 0..=i when causal.
fn visible(i: usize, n: usize, causal: bool) -> std::ops::Range<usize> {
    0..if causal { i + 1 } else { n }
}

#[test]
fn captured_heads_add_up_to_the_attention_sublayer() {
    for (file, vocab, input, causal) in [("tracr/dyck2.rasp", "(){}", "({)}(", false), ("tracr/frac_prevs.rasp", "xyz", "xyzxx", true), ("reverse.rasp", "abc", "abcab", false)] {
        for attention in [Attention::Hard, Attention::Soft] {
            let (_, caps) = capture(file, vocab, input, causal, attention);
            for (l, c) in caps.iter().enumerate() {
                let n = c.input.len();
                for i in 0..n {
                    for dim in 0..c.input[0].len() {
                        let sum: f64 = c.heads.iter().map(|h| visible(i, n, causal).map(|j| h.weights[i][j] * h.scores[j][dim]).sum::<f64>()).sum();
                        let want = c.attention_output[i][dim];
                        assert!((sum - want).abs() <= 1e-4 * want.abs().max(1.0), "{file} layer {l} query {i} dim {dim}: {sum} vs {want}");
                    }
                }
            }
        }
    }
}

#[test]
fn probes_decompose_and_concentrations_are_right() {
    // Tracr's make_length: its only head selects every key (all scores tie), so q is uniform
    // for every query but BOS's (which the construction points at itself).
    let (_, caps) = capture("tracr/length.rasp", "abc", "abcab", false, Attention::Hard);
    let h = &caps[0].heads[0];
    for i in 1..h.weights.len() {
        let q: Vec<f64> = h.weights[i].clone();
        let p = probe_query(&q, &caps[0].input[i], &h.scores).unwrap();
        assert!(p.kl_q_u.abs() < 1e-6, "query {i}: KL(q||U) = {}", p.kl_q_u);
        let scale = p.log_marginal.abs().max(p.elbo.abs()).max(p.kl_q_p.abs());
        assert!((p.log_marginal - (p.elbo + p.kl_q_p)).abs() <= 1e-6 * scale, "{p:?}");
    }
    // reverse: the aggregate head's queries (BOS excluded) each attend exactly one key.
    let (_, caps) = capture("reverse.rasp", "abc", "abcab", false, Attention::Hard);
    let last = caps.last().unwrap();
    let h = &last.heads[0];
    for i in 1..h.weights.len() {
        let p = probe_query(&h.weights[i], &last.input[i], &h.scores).unwrap();
        assert!((p.kl_q_u_norm - 1.0).abs() < 1e-6, "query {i}: normalised concentration {}", p.kl_q_u_norm);
        let scale = p.log_marginal.abs().max(p.elbo.abs()).max(p.kl_q_p.abs());
        assert!((p.log_marginal - (p.elbo + p.kl_q_p)).abs() <= 1e-6 * scale, "{p:?}");
    }
    // Causal soft attention: probes over the visible keys only.
    let (_, caps) = capture("tracr/frac_prevs.rasp", "xyz", "xyzxx", true, Attention::Soft);
    let h = &caps[0].heads[0];
    for i in 0..h.weights.len() {
        let q: Vec<f64> = h.weights[i][..=i].to_vec();
        let p = probe_query(&q, &caps[0].input[i], &h.scores[..=i]).unwrap();
        assert_eq!(p.n, i + 1);
        let scale = p.log_marginal.abs().max(p.elbo.abs()).max(p.kl_q_p.abs());
        assert!((p.log_marginal - (p.elbo + p.kl_q_p)).abs() <= 1e-6 * scale, "{p:?}");
        assert!(p.kl_q_p >= -1e-12);
    }
}

#[test]
fn ranks_and_spearman() {
    use raspc::probe::{ranks, spearman};
    assert_eq!(ranks(&[10.0, 20.0, 20.0, 30.0]), vec![1.0, 2.5, 2.5, 4.0]);
    let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0];
    let (rho, p) = spearman(&a, &[2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0], 999, 1);
    assert!((rho - 1.0).abs() < 1e-12 && p < 0.01, "{rho} {p}");
    let (rho, _) = spearman(&a, &[7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0], 99, 1);
    assert!((rho + 1.0).abs() < 1e-12);
    // Unrelated orders: large p.
    let (_, p) = spearman(&a, &[3.0, 7.0, 1.0, 5.0, 2.0, 6.0, 4.0], 999, 1);
    assert!(p > 0.05, "{p}");
}

#[test]
fn prefix_shuffling_moves_only_the_prefix() {
    use raspc::probe::shuffle_prefix;
    use raspc::verify::SplitMix;
    let base: Vec<usize> = (0..20).collect();
    for (level, moved_at_least) in [(0.0, 0), (0.5, 2), (1.0, 10)] {
        let mut s = base.clone();
        shuffle_prefix(&mut s, 15, level, &mut SplitMix(7));
        assert_eq!(s[0], 0, "position 0 stays");
        assert_eq!(&s[15..], &base[15..], "the scored window stays");
        let mut sorted = s[1..15].to_vec();
        sorted.sort();
        assert_eq!(sorted, base[1..15].to_vec(), "a permutation of the prefix");
        let moved = (1..15).filter(|&i| s[i] != base[i]).count();
        assert!(moved >= moved_at_least && (level > 0.0 || moved == 0), "level {level}: {moved} moved");
    }
}

#[test]
fn probe_command_reports_and_reacts_to_perturbation() {
    let dir = std::env::temp_dir().join(format!("raspc-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join("frac.safetensors");
    let cli = |args: &[&str]| {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let argv: Vec<String> = std::iter::once("raspc").chain(args.iter().copied()).map(String::from).collect();
        let code = raspc::run(argv, &mut out, &mut err, false);
        (code, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
    };
    let prog = raspc_tests::corpus("tracr/dyck1.rasp");
    let p = prog.to_str().unwrap();
    assert_eq!(cli(&["compile", p, "--vocab", "()x", "--max-len", "12", "--causal", "-o", model.to_str().unwrap()]).0, 0);
    let report = |extra: &[&str]| -> serde_json::Value {
        let json = dir.join("r.json");
        let mut args = vec!["probe", "svflow", model.to_str().unwrap(), "--program", p, "--seeds", "2", "--levels", "0,0.5,1", "--out", json.to_str().unwrap()];
        args.extend(extra);
        let (code, out, err) = cli(&args);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("Spearman rho with NLL") && out.contains("sensitivity z by layer"), "{out}");
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
    };
    let clean = report(&["--attention", "hard"]);
    let conds = clean["conditions"].as_array().unwrap();
    assert_eq!(conds.len(), 6);
    assert!(conds.iter().all(|c| c["accuracy"] == 1.0), "the compiled model is exact under hard attention");
    let noisy = report(&["--weight-noise", "0.5"]);
    let acc: f64 = noisy["conditions"].as_array().unwrap().iter().map(|c| c["accuracy"].as_f64().unwrap()).sum::<f64>() / 6.0;
    assert!(acc < 1.0, "weight noise must move the task score ({acc})");
    let plots = dir.join("plots");
    let (code, out, err) = cli(&["probe", "svflow", model.to_str().unwrap(), "--program", p, "--seeds", "1", "--levels", "0,1", "--plot", plots.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("wrote 5 plots"), "{out}");
    assert!(std::fs::read(plots.join("svflow_kl_q_u_norm.png")).unwrap().starts_with(b"\x89PNG"));
}

#[test]
fn series_that_vary_only_by_rounding_are_constant_and_get_no_correlation() {
    use raspc::probe::{nearly_constant, spearman};
    // Two NLLs equal up to f32 rounding (a compiled model's readout), one that really moves.
    let noise = [4.539_889_921_682_065_5e-5, 4.539_889_949_981_547_4e-5, 4.539_889_921_682_065_5e-5];
    assert!(nearly_constant(&noise) && nearly_constant(&[]) && nearly_constant(&[f64::NAN, 2.0]));
    assert!(!nearly_constant(&[1.0, 1.001]));
    assert!(spearman(&[1.0, 2.0, 3.0], &noise, 99, 1).0.is_nan());
    // Two points always give ±1: no correlation (helper s23).
    assert!(spearman(&[1.0, 2.0], &[3.0, 5.0], 99, 1).0.is_nan());
    let (rho, _) = spearman(&[1.0, 2.0, 3.0], &[0.1, 0.2, 0.4], 99, 1);
    assert!((rho - 1.0).abs() < 1e-12, "{rho}");
}

/// The task score says what it is: an NLL past f64's smallest probability is reported (not
/// capped at -ln 1e-300 = 690.8), a numerical output has no NLL, perplexity or ECE (null, not a
/// perfect 0), sensitivities are numbers or null (never "inf"), and options that would change
/// nothing are refused or warned about before the run.
#[test]
fn probe_scores_are_what_they_claim() {
    let dir = std::env::temp_dir().join(format!("raspc-probe-honest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cli = |args: &[&str]| {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let argv: Vec<String> = std::iter::once("raspc").chain(args.iter().copied()).map(String::from).collect();
        let code = raspc::run(argv, &mut out, &mut err, false);
        (code, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
    };
    let json = |args: &[&str]| -> serde_json::Value {
        let (code, out, err) = cli(args);
        assert_eq!(code, 0, "{err}");
        serde_json::from_str(&out).unwrap()
    };
    // Dyck-2, causal, with heavy weight noise: wrong predictions far below the top logit.
    let dyck = dir.join("dyck2c.safetensors");
    let (d, prog) = (dyck.to_str().unwrap(), raspc_tests::corpus("dyck2.rasp"));
    assert_eq!(cli(&["compile", prog.to_str().unwrap(), "--vocab", "(){}", "--max-len", "6", "--causal", "-o", d]).0, 0);
    let r = json(&["probe", "svflow", d, "--weight-noise", "0.1", "--sequences", "2", "--seeds", "2", "--levels", "0,1", "--json"]);
    let nlls: Vec<f64> = r["conditions"].as_array().unwrap().iter().map(|c| c["nll"].as_f64().unwrap()).collect();
    assert!(nlls.iter().all(|x| x.is_finite()) && nlls.iter().any(|&x| x > 700.0), "{nlls:?}");
    for c in r["conditions"].as_array().unwrap() {
        // exp(NLL) past f64's range has no JSON number: null.
        let nll = c["nll"].as_f64().unwrap();
        match c["perplexity"].as_f64() {
            Some(ppl) => assert!((ppl - nll.exp()).abs() <= 1e-9 * ppl, "{c}"),
            None => assert!(nll > 709.0, "{c}"),
        }
    }
    // One seed: no spread to divide by; every z is a number or null with its regime, and some
    // layer that moves says so.
    let r = json(&["probe", "svflow", d, "--sequences", "4", "--seeds", "1", "--levels", "0,1", "--program", prog.to_str().unwrap(), "--json"]);
    let mut no_spread = 0;
    for (_, layers) in r["sensitivity"].as_object().unwrap() {
        for l in layers.as_array().unwrap() {
            assert!(l["z"].is_f64() || (l["z"].is_null() && (l["absent"].is_string() || l["regime"] == "no spread over seeds")), "{l}");
            no_spread += usize::from(l["regime"] == "no spread over seeds");
        }
    }
    assert!(no_spread > 0, "{}", r["sensitivity"]);
    // A numerical output: no NLL, ECE or perplexity, and no correlation with one.
    let frac_p = dir.join("frac.rasp");
    std::fs::write(&frac_p, "frac = aggregate(select(indices, indices, <=), indicator(tokens == \"1\"), 0);\n").unwrap();
    let frac = dir.join("frac.safetensors");
    assert_eq!(cli(&["compile", frac_p.to_str().unwrap(), "--vocab", "01", "--max-len", "6", "--causal", "-o", frac.to_str().unwrap()]).0, 0);
    let args = ["probe", "svflow", frac.to_str().unwrap(), "--program", frac_p.to_str().unwrap(), "--sequences", "3", "--seeds", "2", "--levels", "0,1", "--weight-noise", "0.05"];
    let (code, out, err) = cli(&args);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("(no NLL or ECE: the output is numerical)") && out.contains("absent (no NLL: the output is numerical)") && !out.contains("left out of the NLL"), "{out}");
    let r = json(&[&args[..], &["--json"]].concat());
    assert!(r["conditions"].as_array().unwrap().iter().all(|c| c["nll"].is_null() && c["ece"].is_null() && c["perplexity"].is_null() && c["accuracy"].is_f64()), "{r}");
    // A categorical output probed against a program whose values are none of its own: every
    // prediction is left out of the NLL, and the text says so and prints the ECE the JSON has
    // (helper s23: "no NLL or ECE: the output is numerical"). One condition in the singular.
    let rev = dir.join("rev.safetensors");
    let rev_p = raspc_tests::corpus("reverse.rasp");
    assert_eq!(cli(&["compile", rev_p.to_str().unwrap(), "--vocab", "abc", "--max-len", "6", "-o", rev.to_str().unwrap()]).0, 0);
    let hist_p = raspc_tests::corpus("histogram.rasp");
    let args = ["probe", "svflow", rev.to_str().unwrap(), "--program", hist_p.to_str().unwrap(), "--seq-len", "6", "--levels", "0", "--seeds", "1", "--sequences", "2"];
    let (code, out, err) = cli(&args);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("svflow probe: 1 condition (1 level x 1 seed), 2 sequences of 6 tokens"), "{out}");
    assert!(out.contains("(no NLL: every scored prediction is left out of it, see the note)") && out.contains(", ECE ") && !out.contains("the output is numerical"), "{out}");
    let r = json(&[&args[..], &["--json"]].concat());
    assert!(r["conditions"].as_array().unwrap().iter().all(|c| c["nll"].is_null() && c["ece"].is_f64()), "{r}");
    // A language model scores at most --seq-len - 1 tokens: a window of --seq-len is refused
    // saying so, before the model is read (helper s23: silently cut to 7 of 8, while the
    // refusal of 0 said "between 1 and --seq-len 8").
    let (code, _, err) = cli(&["probe", "svflow", dir.join("absent.gguf").to_str().unwrap(), "--seq-len", "8", "--eval-window", "8"]);
    assert!(code == 1 && err.contains("--eval-window 8 must be between 1 and --seq-len - 1 = 7 for a language model"), "{err}");
    // Refused: --attn-temp under hard attention, a model with no attention; warned: no prefix to shuffle.
    let (code, _, err) = cli(&["probe", "svflow", d, "--attention", "hard", "--attn-temp", "5"]);
    assert!(code == 1 && err.contains("--attn-temp divides the soft-attention beta"), "{err}");
    let (code, _, err) = cli(&["probe", "svflow", d, "--seq-len", "6", "--eval-window", "6", "--sequences", "1", "--seeds", "1", "--levels", "0,1"]);
    assert!(code == 0 && err.contains("nothing is shuffled, every level probes the same inputs"), "{err}");
    let (code, _, err) = cli(&["probe", "svflow", d, "--seq-len", "6", "--eval-window", "2", "--sequences", "1", "--seeds", "1", "--levels", "0,1"]);
    assert!(code == 0 && !err.contains("nothing is shuffled"), "{err}");
    // Flags that would mean nothing: a level twice, --text for a raspc checkpoint, a selector
    // as the reference's entry, noise past f32 (named as the flag's doing).
    let (code, _, err) = cli(&["probe", "svflow", d, "--levels", "0,0.5,0"]);
    assert!(code == 1 && err.contains("--levels lists 0 twice"), "{err}");
    let (code, _, err) = cli(&["probe", "svflow", d, "--text", prog.to_str().unwrap()]);
    assert!(code == 1 && err.contains("--text applies to a language model"), "{err}");
    let sel = dir.join("sel.rasp");
    std::fs::write(&sel, format!("{}\nflip = select(indices, indices, ==);\n", std::fs::read_to_string(&prog).unwrap())).unwrap();
    let (code, _, err) = cli(&["probe", "svflow", d, "--program", sel.to_str().unwrap(), "--entry", "flip", "--seeds", "1", "--sequences", "1"]);
    assert!(code == 1 && err.contains("`flip` is a selector"), "{err}");
    let (code, _, err) = cli(&["probe", "svflow", d, "--weight-noise", "1e300", "--seeds", "1", "--sequences", "1", "--levels", "0"]);
    assert!(code == 1 && err.contains("--weight-noise 1e300: the perturbed weights overflow f32"), "{err}");
    // Output paths are checked before the run: -o equal to --plot, --plot on a file; a report
    // inside a plot folder that does not exist yet gets the folder.
    let same = dir.join("same");
    let (code, _, err) = cli(&["probe", "svflow", d, "--seeds", "1", "--sequences", "1", "--levels", "0,1", "--plot", same.to_str().unwrap(), "-o", same.to_str().unwrap()]);
    assert!(code == 1 && err.contains("-o and --plot are both") && !same.exists(), "{err}");
    std::fs::write(&same, "mine").unwrap();
    let (code, _, err) = cli(&["probe", "svflow", d, "--seeds", "1", "--sequences", "1", "--levels", "0,1", "--plot", same.to_str().unwrap()]);
    assert!(code == 1 && err.contains("is a file, not a folder") && std::fs::read_to_string(&same).unwrap() == "mine", "{err}");
    let figs = dir.join("figs");
    let report = figs.join("r.json");
    let (code, _, err) = cli(&["probe", "svflow", d, "--seeds", "1", "--sequences", "1", "--levels", "0,1", "--plot", figs.to_str().unwrap(), "-o", report.to_str().unwrap()]);
    assert!(code == 0 && report.is_file() && figs.join("svflow_kl_q_p.png").is_file(), "{err}");
    let plain = dir.join("plain.rasp");
    std::fs::write(&plain, "x = tokens == \"a\";\n").unwrap();
    let plain_ck = dir.join("plain.safetensors");
    assert_eq!(cli(&["compile", plain.to_str().unwrap(), "--vocab", "ab", "--max-len", "4", "-o", plain_ck.to_str().unwrap()]).0, 0);
    let (code, _, err) = cli(&["probe", "svflow", plain_ck.to_str().unwrap()]);
    assert!(code == 1 && err.contains("has no attention heads: there is no attention to probe"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

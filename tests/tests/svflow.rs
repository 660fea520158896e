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
        let p = probe_query(&q, &caps[0].input[i], &h.scores);
        assert!(p.kl_q_u.abs() < 1e-6, "query {i}: KL(q||U) = {}", p.kl_q_u);
        let scale = p.log_marginal.abs().max(p.elbo.abs()).max(p.kl_q_p.abs());
        assert!((p.log_marginal - (p.elbo + p.kl_q_p)).abs() <= 1e-6 * scale, "{p:?}");
    }
    // reverse: the aggregate head's queries (BOS excluded) each attend exactly one key.
    let (_, caps) = capture("reverse.rasp", "abc", "abcab", false, Attention::Hard);
    let last = caps.last().unwrap();
    let h = &last.heads[0];
    for i in 1..h.weights.len() {
        let p = probe_query(&h.weights[i], &last.input[i], &h.scores);
        assert!((p.kl_q_u_norm - 1.0).abs() < 1e-6, "query {i}: normalised concentration {}", p.kl_q_u_norm);
        let scale = p.log_marginal.abs().max(p.elbo.abs()).max(p.kl_q_p.abs());
        assert!((p.log_marginal - (p.elbo + p.kl_q_p)).abs() <= 1e-6 * scale, "{p:?}");
    }
    // Causal soft attention: probes over the visible keys only.
    let (_, caps) = capture("tracr/frac_prevs.rasp", "xyz", "xyzxx", true, Attention::Soft);
    let h = &caps[0].heads[0];
    for i in 0..h.weights.len() {
        let q: Vec<f64> = h.weights[i][..=i].to_vec();
        let p = probe_query(&q, &caps[0].input[i], &h.scores[..=i]);
        assert_eq!(p.n, i + 1);
        let scale = p.log_marginal.abs().max(p.elbo.abs()).max(p.kl_q_p.abs());
        assert!((p.log_marginal - (p.elbo + p.kl_q_p)).abs() <= 1e-6 * scale, "{p:?}");
        assert!(p.kl_q_p >= -1e-12);
    }
}

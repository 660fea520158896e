//! Numerical outputs are checked against a tolerance derived from what they carry, not a fixed
//! 1e-3: a mean of large values misses 1e-3 by f32 rounding alone.

use raspc::verify::{generate, verify, Inputs};
use raspc_lang::{Atom, MemoryLoader};

#[test]
fn a_sum_of_150_means_verifies_within_its_derived_tolerance() {
    // x = Σ_{k<150} mean_{j<=i}(t_j + k) = 150·mean(t) + 11175: values near 11,400, where one
    // f32 ulp is about 0.001.
    let mut src = String::new();
    for k in 0..150 {
        src.push_str(&format!("s{k} = aggregate(select(indices, indices, <=), tokens_int + {k});\n"));
    }
    src.push_str(&format!("x = {};\n", (0..150).map(|k| format!("s{k}")).collect::<Vec<_>>().join(" + ")));
    let (_, r) = raspc_lang::evaluate_program("agg.rasp", None, &src, &MemoryLoader::default());
    let s = r.unwrap();
    let (_, root) = s.entry(Some("x")).unwrap();
    let vocab: Vec<Atom> = (1..=3).map(Atom::Int).collect();
    let opts = raspc_compiler::Options { vocab: vocab.clone(), max_len: 8, ..Default::default() };
    let c = raspc_compiler::compile(&s.graph, root, &opts, "test").unwrap();
    let tol = c.checkpoint.output.tolerance;
    // The values averaged reach 3 + 149 per term summed into one head: 150·3 + 11175 = 11625.
    assert!((1e-3 * 11_000.0..=1e-3 * 12_000.0).contains(&tol), "tolerance {tol}");
    let model = raspc_runtime::Model::new(c.checkpoint, &raspc_runtime::Device::Cpu).unwrap();
    let seqs = generate(&Inputs::Random { count: 300, seed: 1 }, vocab.len(), 8).unwrap();
    let modes = [raspc_runtime::Attention::Hard, raspc_runtime::Attention::Soft];
    let rep = verify(&s.graph, root, &model, &vocab, &seqs, &modes, &mut |_| {}).unwrap();
    assert_eq!((rep.checked, rep.failed), (300, 0), "{:?}", rep.examples.first());
}

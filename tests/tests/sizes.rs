//! Nothing gets bigger: every program of the corpus (Tracr's library, the RASP paper's programs,
//! the idioms) at max-len 5, 16 and 64 compiles to no more layers, d_model or parameters than
//! the sizes recorded in tests/sizes_baseline.tsv.
//!
//! The baseline was recorded once by the compiler of commit c696ca7 (before issue 12's
//! lowering changes) with `RASPC_RECORD_SIZES=1 cargo test -p raspc-tests --test sizes`; a row
//! whose program did not compile then (or took over a minute) reads `refused`. Recording again is only for new
//! programs: a row may be lowered by hand when a change makes a model smaller, never raised.
//! `idioms/long_add_ref.rasp` was replaced by a different program (written in the reference's
//! style instead of loading the corpus's long addition); its rows are that program's sizes.
//! On 2026-12-01 every row was lowered to the sizes the compiler then gave (all smaller or
//! equal; rows that read `refused` became sizes), so any growth since is caught; again in
//! session 13, when sums of two widths began to be added rather than enumerated (16 rows at
//! max-len 64 smaller, none larger). Session 29 let `compile` keep a plan one layer deeper
//! when it has at most a quarter of the parameters (the compiler's `best`, the least
//! `parameters x 4^layers`): `idioms/majority.rasp` at 64 went from 2 layers, d_model 139 and
//! 138,200 parameters to 3 layers, 15 and 9,627, the only row that got deeper.

use raspc_tests::{compile, Case};
use std::collections::BTreeMap;
use std::fmt::Write;

const LENGTHS: [usize; 3] = [5, 16, 64];

/// (file, entry, vocab) of every program the size check covers.
fn programs() -> Vec<(String, Option<&'static str>, String)> {
    let mut v: Vec<(String, Option<&'static str>, String)> = [
        ("tracr/length.rasp", "abc"),
        ("tracr/reverse.rasp", "abc"),
        ("tracr/histogram.rasp", "abc"),
        ("tracr/sort_unique.rasp", "[1,2,3,4]"),
        ("tracr/sort.rasp", "[1,2,3,4]"),
        ("tracr/sort_freq.rasp", "abc"),
        ("tracr/frac_prevs.rasp", "xyz"),
        ("tracr/pair_balance.rasp", "()x"),
        ("tracr/dyck1.rasp", "()x"),
        ("tracr/dyck2.rasp", "(){}"),
        ("tracr/shift_by.rasp", "abc"),
        ("tracr/detect_pattern.rasp", "abc"),
        ("tracr/count_less_freq.rasp", "abc"),
        ("tracr/count.rasp", "abc"),
        ("tracr/nary_sequencemap.rasp", "[1,2,3]"),
        ("reverse.rasp", "abc"),
        ("histogram.rasp", "abc"),
        ("histogram_bos.rasp", "abc"),
        ("sort_freq.rasp", "abc"),
        ("double_hist.rasp", "abc"),
        ("dyck1.rasp", "()"),
        ("dyck2.rasp", "(){}"),
        ("match2.rasp", "[0,1,2,3,4,5,6,7]"),
        ("k_parity.rasp", "[0,1]"),
    ]
    .into_iter()
    .map(|(f, v)| (f.to_string(), None, v.to_string()))
    .collect();
    v.push(("sort.rasp".into(), Some("sorted"), "[1,2,3,4]".into()));
    for (name, vocab, _) in raspc_tests::idioms() {
        v.push((format!("idioms/{name}.rasp"), None, vocab));
    }
    v
}

/// "layers d_model params" of one compile, or "refused".
fn measure(file: &str, entry: Option<&'static str>, vocab: &str, n: usize) -> String {
    let case = Case { file: Box::leak(file.to_string().into_boxed_str()), entry, vocab: Box::leak(vocab.to_string().into_boxed_str()) };
    match compile(&case, n, false) {
        Ok((_, _, _, c)) => format!("{}\t{}\t{}", c.summary.layers, c.summary.d_model, c.summary.params),
        Err(_) => "refused".into(),
    }
}

fn baseline_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sizes_baseline.tsv")
}

fn key(file: &str, entry: Option<&str>, n: usize) -> String {
    format!("{file}{}\t{n}", entry.map(|e| format!("#{e}")).unwrap_or_default())
}

#[test]
fn nothing_gets_bigger() {
    if std::env::var_os("RASPC_RECORD_SIZES").is_some() {
        let mut out = String::from("# program\tmax-len\tlayers\td_model\tparams (recorded by RASPC_RECORD_SIZES=1; see tests/tests/sizes.rs)\n");
        for (file, entry, vocab) in programs() {
            for n in LENGTHS {
                // A compile that takes over a minute is recorded as refused (its thread is left behind).
                let (tx, rx) = std::sync::mpsc::channel();
                let (f, v) = (file.clone(), vocab.clone());
                std::thread::spawn(move || tx.send(measure(&f, entry, &v, n)));
                let m = rx.recv_timeout(std::time::Duration::from_secs(60)).unwrap_or_else(|_| "refused".into());
                eprintln!("{}\t{m}", key(&file, entry, n));
                writeln!(out, "{}\t{m}", key(&file, entry, n)).unwrap();
            }
        }
        std::fs::write(baseline_path(), out).unwrap();
        return;
    }
    let text = std::fs::read_to_string(baseline_path()).expect("tests/sizes_baseline.tsv");
    let base: BTreeMap<String, String> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.splitn(3, '\t').collect();
            (f.len() == 3).then(|| (format!("{}\t{}", f[0], f[1]), f[2].to_string()))
        })
        .collect();
    let mut worse = vec![];
    for (file, entry, vocab) in programs() {
        for n in LENGTHS {
            let k = key(&file, entry, n);
            let Some(before) = base.get(&k) else { panic!("{k}: no baseline row; record it (see the module doc)") };
            let now = measure(&file, entry, &vocab, n);
            if before == "refused" {
                continue;
            }
            let parse = |s: &str| s.split('\t').map(|x| x.parse::<usize>().ok()).collect::<Option<Vec<usize>>>();
            match (parse(before), parse(&now)) {
                (Some(b), Some(c)) if c.iter().zip(&b).all(|(c, b)| c <= b) => {}
                _ => worse.push(format!("{k}: before {before}, now {now}")),
            }
        }
    }
    assert!(worse.is_empty(), "models got bigger or stopped compiling:\n{}", worse.join("\n"));
}

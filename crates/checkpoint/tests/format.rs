//! Round trips, determinism and every way a checkpoint file can be wrong.

use raspc_checkpoint::*;
use serde_json::json;
use std::collections::BTreeMap;

/// A small but complete checkpoint: vocabulary {BOS, a, b}, 2 layers (2 heads + MLP, 1 head).
fn sample() -> Checkpoint {
    let config = ModelConfig {
        d_model: 6,
        layers: vec![
            LayerConfig { heads: vec![2, 3], mlp: Some(MlpConfig { kind: MlpKind::Relu, hidden: 4 }), head_info: vec![], mlp_info: vec![] },
            LayerConfig { heads: vec![1], mlp: None, head_info: vec![], mlp_info: vec![] },
        ],
        vocab: vec![VocabEntry { token: json!("<bos>"), id: 0 }, VocabEntry { token: json!("a"), id: 1 }, VocabEntry { token: json!("b"), id: 2 }],
        bos_id: 0,
        max_seq_len: 4,
        causal: false,
        attention: AttentionConfig { semantics: AttentionSemantics::Hard, tie_tolerance: 0.25, soft_beta: 100.0 },
        readout_dims: 2,
        real_input: None,
    };
    let layout = Layout {
        sops: vec![
            SopLayout { label: "tokens".into(), offset: 0, encoding: Encoding::Categorical { values: vec![json!("a"), json!("b")] }, parts: vec![] },
            SopLayout { label: "indices".into(), offset: 2, encoding: Encoding::Numerical { values: None }, parts: vec![] },
            SopLayout { label: "reverse".into(), offset: 3, encoding: Encoding::Categorical { values: vec![json!("a"), json!("b")] }, parts: vec![] },
        ],
    };
    let output = OutputSpec { label: "reverse".into(), encoding: Encoding::Categorical { values: vec![json!("a"), json!("b")] }, tolerance: 0.0 };
    let mut tensors = BTreeMap::new();
    for (k, (name, shape)) in config.expected_tensors().into_iter().enumerate() {
        let mut t = Tensor::zeros(&shape);
        for (i, x) in t.data.iter_mut().enumerate() {
            *x = ((i * 7 + k * 3) % 11) as f32 - 5.0;
        }
        tensors.insert(name, t);
    }
    // The readout reads the output `reverse` (dims 3..5).
    let r = tensors.get_mut("readout").unwrap();
    r.data = vec![0.0; 12];
    r.data[3 * 2] = 1.0;
    r.data[4 * 2 + 1] = 1.0;
    Checkpoint { config, layout, output, program_hash: "abc123".into(), compiler_version: "raspc 0.1.0".into(), tensors }
}

#[test]
fn round_trip_and_determinism() {
    let ck = sample();
    let a = ck.to_bytes().unwrap();
    let b = ck.clone().to_bytes().unwrap();
    assert_eq!(a, b, "same checkpoint, same bytes");
    assert_eq!(Checkpoint::from_bytes(&a).unwrap(), ck);
    assert_eq!(ck.tensors.len(), 3 + 4 * 3 + 4, "embeddings + readout, 3 heads, one MLP");
}

#[test]
fn the_safetensors_crate_reads_our_file() {
    let bytes = sample().to_bytes().unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let t = st.tensor("layers.0.attn.1.w_q").unwrap();
    assert_eq!(t.shape(), &[6, 3]);
    assert_eq!(t.dtype(), safetensors::Dtype::F32);
    let (_, md) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let md = md.metadata().clone().unwrap();
    assert_eq!(md["format"], "raspc");
    assert_eq!(md["format_version"], "1");
    let config: serde_json::Value = serde_json::from_str(&md["config"]).unwrap();
    assert_eq!(config["attention"]["semantics"], "hard");
    assert_eq!(config["layers"][0]["mlp"]["kind"], "relu");
}

fn with_tensors(ck: &Checkpoint, edit: impl FnOnce(&mut BTreeMap<String, Tensor>)) -> Vec<u8> {
    // Write with the reference safetensors writer so invalid files can be produced.
    // The integrity hash is of the edited data (the data is checked before its values, so a
    // stale hash would hide every other message behind "the file is corrupted").
    let mut edited = ck.clone();
    edit(&mut edited.tensors);
    let bufs: Vec<(String, Vec<usize>, Vec<u8>)> = edited.tensors.iter().map(|(n, t)| (n.clone(), t.shape.clone(), t.data.iter().flat_map(|x| x.to_le_bytes()).collect())).collect();
    let views: Vec<(String, safetensors::tensor::TensorView)> =
        bufs.iter().map(|(n, s, d)| (n.clone(), safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), d).unwrap())).collect();
    let meta = edited.metadata().unwrap().into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    safetensors::serialize(views, Some(meta)).unwrap()
}

fn with_meta(ck: &Checkpoint, key: &str, value: Option<&str>) -> Vec<u8> {
    let bufs: Vec<(String, Vec<usize>, Vec<u8>)> = ck.tensors.iter().map(|(n, t)| (n.clone(), t.shape.clone(), t.data.iter().flat_map(|x| x.to_le_bytes()).collect())).collect();
    let views: Vec<(String, safetensors::tensor::TensorView)> =
        bufs.iter().map(|(n, s, d)| (n.clone(), safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), d).unwrap())).collect();
    let mut meta: std::collections::HashMap<String, String> = ck.metadata().unwrap().into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    match value {
        Some(v) => meta.insert(key.to_string(), v.to_string()),
        None => meta.remove(key),
    };
    safetensors::serialize(views, Some(meta)).unwrap()
}

#[test]
fn every_corruption_is_named() {
    let ck = sample();
    let good = ck.to_bytes().unwrap();

    let e = Checkpoint::from_bytes(&good[..good.len() - 10]).unwrap_err();
    assert!(matches!(e, CheckpointError::NotSafetensors(_)), "{e}");
    let e = Checkpoint::from_bytes(b"garbage").unwrap_err();
    assert!(matches!(e, CheckpointError::NotSafetensors(_)), "{e}");
    // A dtype edited in the header, the bytes left alone: F16 halves the size the shape needs.
    let header_len = u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&good[8..8 + header_len]).unwrap();
    let at = header.find("\"readout\":{").expect("readout's entry");
    let at = at + header[at..].find("\"dtype\":\"F32\"").expect("its dtype");
    let mut edited = good.clone();
    let dtype = 8 + at + "\"dtype\":\"".len();
    edited[dtype..dtype + 3].copy_from_slice(b"F16");
    let e = Checkpoint::from_bytes(&edited).unwrap_err();
    let shape = &ck.tensors["readout"].shape;
    let bytes = shape.iter().product::<usize>();
    assert!(e.to_string().contains(&format!("tensor `readout` has dtype F16 and shape {shape:?} ({} bytes)", bytes * 2)), "{e}");
    assert!(e.to_string().contains(&format!("hold {} bytes", bytes * 4)), "{e}");

    let e = Checkpoint::from_bytes(&with_tensors(&ck, |t| {
        t.remove("layers.1.attn.0.w_o");
    }))
    .unwrap_err();
    assert_eq!(e.to_string(), "tensor `layers.1.attn.0.w_o` is missing");

    let e = Checkpoint::from_bytes(&with_tensors(&ck, |t| {
        t.insert("readout".into(), Tensor::zeros(&[6, 3]));
    }))
    .unwrap_err();
    assert_eq!(e.to_string(), "tensor `readout` has shape [6, 3], expected [6, 2]");

    let e = Checkpoint::from_bytes(&with_tensors(&ck, |t| {
        t.insert("layers.9.mlp.w_in".into(), Tensor::zeros(&[1]));
    }))
    .unwrap_err();
    assert_eq!(e.to_string(), "tensor `layers.9.mlp.w_in` is not part of this model's config");

    let e = Checkpoint::from_bytes(&with_tensors(&ck, |t| {
        t.get_mut("embed.token").unwrap().data[4] = f32::NAN;
    }))
    .unwrap_err();
    let shape = &ck.tensors["embed.token"].shape;
    let width = shape[1];
    assert_eq!(e.to_string(), format!("tensor `embed.token` (shape {shape:?}) holds NaN at [{}, {}] (flat index 4): weights must be finite", 4 / width, 4 % width));

    // Hand edits that break the config are named as such (helper ck25): an array for the
    // object, d_model 0 (not a wrong shape of a tensor), BOS's null token where bos_id moved.
    let e = Checkpoint::from_bytes(&with_meta(&ck, "config", Some("[1, 2]"))).unwrap_err();
    assert_eq!(e.to_string(), "metadata key `config` is invalid: expected a JSON object, found an array");
    let config: serde_json::Value = serde_json::from_str(&ck.metadata().unwrap()["config"]).unwrap();
    let mut zero = config.clone();
    zero["d_model"] = serde_json::json!(0);
    let e = Checkpoint::from_bytes(&with_meta(&ck, "config", Some(&zero.to_string()))).unwrap_err();
    assert_eq!(e.to_string(), "metadata key `config` is invalid: d_model is 0 (it must be at least 1)");
    assert_eq!(config["bos_id"], 0);
    let mut moved = config.clone();
    moved["bos_id"] = serde_json::json!(1);
    moved["vocab"][0]["token"] = serde_json::Value::Null;
    let e = Checkpoint::from_bytes(&with_meta(&ck, "config", Some(&moved.to_string()))).unwrap_err();
    assert!(e.to_string().contains("vocabulary entry 0 has token null") && e.to_string().contains("null is BOS's token: is bos_id 1 meant to be 0?"), "{e}");

    let e = Checkpoint::from_bytes(&with_meta(&ck, "config", None)).unwrap_err();
    assert_eq!(e.to_string(), "metadata key `config` is missing");
    let e = Checkpoint::from_bytes(&with_meta(&ck, "layout", Some("{not json"))).unwrap_err();
    assert!(e.to_string().starts_with("metadata key `layout` is invalid:"), "{e}");
    let e = Checkpoint::from_bytes(&with_meta(&ck, "format_version", Some("7"))).unwrap_err();
    assert_eq!(e.to_string(), "format version 7 is not supported (this raspc reads versions 1 to 2)");
    let e = Checkpoint::from_bytes(&with_meta(&ck, "format", Some("tracr"))).unwrap_err();
    assert!(e.to_string().contains("metadata key `format` is invalid"), "{e}");
    let overlap = r#"{"sops":[{"label":"x","offset":0,"encoding":{"kind":"numerical"}},{"label":"y","offset":0,"encoding":{"kind":"numerical"}}]}"#;
    let e = Checkpoint::from_bytes(&with_meta(&ck, "layout", Some(overlap))).unwrap_err();
    assert_eq!(e.to_string(), "the residual layout is inconsistent: dim 0 is claimed by both `x` and `y`");

    // Wrong dtype: an F64 tensor where F32 is required.
    let data = vec![0u8; 6 * 2 * 8];
    let mut views = vec![("readout".to_string(), safetensors::tensor::TensorView::new(safetensors::Dtype::F64, vec![6, 2], &data).unwrap())];
    let others: Vec<(String, Vec<usize>, Vec<u8>)> =
        ck.tensors.iter().filter(|(n, _)| *n != "readout").map(|(n, t)| (n.clone(), t.shape.clone(), t.data.iter().flat_map(|x| x.to_le_bytes()).collect())).collect();
    for (n, s, d) in &others {
        views.push((n.clone(), safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), d).unwrap()));
    }
    let meta = ck.metadata().unwrap().into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    let e = Checkpoint::from_bytes(&safetensors::serialize(views, Some(meta)).unwrap()).unwrap_err();
    assert_eq!(e.to_string(), "tensor `readout` (shape [6, 2]) has dtype F64, expected F32");
}

#[test]
fn budgets_layout_and_integrity_are_checked_at_load() {
    let ck = sample();
    let good = ck.to_bytes().unwrap();
    // Integrity: one flipped low mantissa bit in the first tensor's data (still finite).
    let (header_len, _) = safetensors::SafeTensors::read_metadata(&good).unwrap();
    let mut flipped = good.clone();
    flipped[8 + header_len] ^= 0x01;
    let e = Checkpoint::from_bytes(&flipped).unwrap_err();
    assert!(matches!(e, CheckpointError::Integrity { .. }), "{e}");
    // The hash is part of the deterministic metadata and names the data section.
    assert_eq!(ck.metadata().unwrap()["tensor_sha256"], tensor_hash(&good[8 + header_len..]));
    // The metadata's own hash: an edit that leaves a valid file is still refused (helper ck25:
    // a flipped bit turned an output value 1 into 9, `causal` could be flipped, and both read).
    let meta = ck.metadata().unwrap();
    assert_eq!(meta["metadata_sha256"], raspc_checkpoint::metadata_hash(meta.iter().filter(|(k, _)| **k != "metadata_sha256").map(|(k, v)| (*k, v.as_str()))));
    let config = &meta["config"];
    assert!(config.contains("\"causal\":false"), "{config}");
    for (key, value) in [("config", config.replace("\"causal\":false", "\"causal\":true")), ("program_hash", "sha256:0".to_string()), ("compiler_version", "9.9.9".to_string())] {
        let e = Checkpoint::from_bytes(&with_meta(&ck, key, Some(&value))).unwrap_err();
        assert!(matches!(e, CheckpointError::MetadataIntegrity { .. }), "{key}: {e}");
        assert!(e.to_string().contains("`metadata_sha256`") && e.to_string().contains("edited without updating the key"), "{e}");
    }
    // A file from before the key (none at all) loads as it did.
    assert!(Checkpoint::from_bytes(&with_meta(&ck, "metadata_sha256", None)).is_ok());
    // Untouched, the rewritten file loads.
    assert!(Checkpoint::from_bytes(&with_meta(&ck, "format", Some("raspc"))).is_ok());
    // Budgets: sizes over a (lowered) budget are refused before tensors are read.
    let small = Limits::default().with("d_model=4").unwrap();
    let e = Checkpoint::from_bytes_with(&good, &small).unwrap_err();
    assert_eq!(e.to_string(), "config.d_model is 6, over the budget of 4 (raise it with RASPC_LIMITS=d_model=N; see docs/checkpoint-format.md)");
    let e = Checkpoint::from_bytes_with(&good, &Limits::default().with("params=10").unwrap()).unwrap_err();
    assert!(matches!(e, CheckpointError::OverBudget { name: "params", .. }), "{e}");
    let e = Checkpoint::from_bytes_with(&good, &Limits::default().with("header_bytes=16").unwrap()).unwrap_err();
    assert!(matches!(e, CheckpointError::OverBudget { name: "header_bytes", .. }), "{e}");
    assert!(Limits::default().with("d_model=x").is_err() && Limits::default().with("nope=1").is_err() && Limits::default().with("d_model=NaN").is_err());
    // One value per budget (the last of two silently won: helper b21).
    let twice = Limits::default().with("samples=5, samples=10").unwrap_err().to_string();
    assert!(twice.contains("`samples` is set twice"), "{twice}");
    assert_eq!(Limits::default().with("samples=5,d_model=4").unwrap().max_samples, 5);
    // Layout: zero-width entries and wrapping offsets.
    let mut bad = ck.clone();
    bad.layout.sops.push(SopLayout { label: "z".into(), offset: 5, encoding: Encoding::Categorical { values: vec![] }, parts: vec![] });
    assert_eq!(bad.validate().unwrap_err().to_string(), "the residual layout is inconsistent: s-op `z` has a categorical encoding with no values (0 dims)");
    let mut bad = ck.clone();
    bad.layout.sops[2].offset = usize::MAX;
    assert!(bad.validate().unwrap_err().to_string().contains("s-op `reverse` occupies dims"));
    // Parts (a number stored as partial sums): other numerical entries' dims inside d_model.
    let mut parted = ck.clone();
    parted.layout.sops.push(SopLayout { label: "p1".into(), offset: 5, encoding: Encoding::Numerical { values: None }, parts: vec![] });
    parted.layout.sops[1].parts = vec![5];
    parted.validate().unwrap();
    let bytes = parted.to_bytes().unwrap();
    let back = Checkpoint::from_bytes(&bytes).unwrap();
    assert_eq!(back.layout.sops[1].parts, vec![5]);
    assert_eq!(back.layout.sops[1].number(&[0.0, 0.0, 1.5, 0.0, 0.0, 0.25]), Some(1.75));
    assert_eq!(back.layout.sops[0].number(&[1.0; 6]), None);
    for (sop, parts, why) in [(1, vec![6], "past d_model"), (1, vec![5, 5], "listed twice"), (1, vec![3], "not a numerical entry"), (0, vec![5], "is not numerical but lists parts")] {
        let mut bad = parted.clone();
        bad.layout.sops[sop].parts = parts;
        let e = bad.validate().unwrap_err().to_string();
        assert!(e.contains(why), "{e}");
    }
    // A multi-hot entry (a set of values, one 0/1 dim each): round-trips, never lists parts,
    // has at least one value, and is never the output.
    let mut multi = ck.clone();
    multi.layout.sops.push(SopLayout { label: "h.unselected".into(), offset: 5, encoding: Encoding::MultiHot { values: vec![json!(0)] }, parts: vec![] });
    multi.validate().unwrap();
    let back = Checkpoint::from_bytes(&multi.to_bytes().unwrap()).unwrap();
    assert_eq!(back.layout.sops[3].encoding, Encoding::MultiHot { values: vec![json!(0)] });
    assert!(String::from_utf8_lossy(&multi.to_bytes().unwrap()).contains(r#"{\"kind\":\"multi_hot\",\"values\":[0]}"#));
    // Written as format version 2 (a reader of version 1 refuses it by its version, not by an
    // unknown variant); files without a multi_hot entry stay version 1.
    assert_eq!((multi.metadata().unwrap()["format_version"].as_str(), ck.metadata().unwrap()["format_version"].as_str()), ("2", "1"));
    assert_eq!(back.layout.sops[3].number(&[1.0; 6]), None);
    let mut bad = multi.clone();
    bad.layout.sops[3].parts = vec![2];
    assert!(bad.validate().unwrap_err().to_string().contains("is not numerical but lists parts"));
    let mut bad = multi.clone();
    bad.layout.sops[3].encoding = Encoding::MultiHot { values: vec![] };
    assert!(bad.validate().unwrap_err().to_string().contains("has a multi_hot encoding with no values"));
    let mut bad = ck.clone();
    bad.output.encoding = Encoding::MultiHot { values: vec![json!("a"), json!("b")] };
    assert!(bad.validate().unwrap_err().to_string().contains("is multi_hot (a set of values)"));
    // Attention constants out of range; a BOS-only vocabulary.
    let mut bad = ck.clone();
    bad.config.attention.tie_tolerance = 1e300;
    assert!(matches!(bad.validate().unwrap_err(), CheckpointError::OverBudget { name: "tie_tolerance", .. }));
    let mut bad = ck.clone();
    bad.config.vocab.truncate(1);
    assert!(bad.validate().unwrap_err().to_string().contains("needs BOS and at least one input token"));
    // The output must be what the readout reads.
    let mut bad = ck.clone();
    bad.output.label = "elsewhere".into();
    assert!(bad.validate().unwrap_err().to_string().contains("output label `elsewhere` is not in the layout"));
}

#[test]
fn only_regular_files_are_read() {
    let e = read_file(std::path::Path::new("/dev/zero"), &Limits::default()).unwrap_err();
    assert_eq!(e.to_string(), "`/dev/zero` is not a regular file");
    let dir = std::env::temp_dir().join(format!("raspc-ck-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("m.safetensors");
    std::fs::write(&p, sample().to_bytes().unwrap()).unwrap();
    assert_eq!(Checkpoint::from_file(&p, &Limits::default()).unwrap(), sample());
    let e = Checkpoint::from_file(&p, &Limits::default().with("file_bytes=100").unwrap()).unwrap_err();
    assert!(matches!(e, CheckpointError::OverBudget { name: "file_bytes", .. }), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Header entries whose data_offsets do not tile the data are named: a removed entry (its bytes
/// left behind), offsets that run backwards, two tensors on the same bytes, a negative offset.
/// (These read "N bytes after the M its header describes", or blamed the innocent tensor.)
#[test]
fn broken_data_offsets_name_the_tensor() {
    let good = sample().to_bytes().unwrap();
    let header_len = u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&good[8..8 + header_len]).unwrap();
    let data = &good[8 + header_len..];
    let rebuild = |h: &serde_json::Value| {
        let mut text = h.to_string();
        while !(8 + text.len()).is_multiple_of(8) {
            text.push(' ');
        }
        [&(text.len() as u64).to_le_bytes()[..], text.as_bytes(), data].concat()
    };
    let err = |h: &serde_json::Value| Checkpoint::from_bytes(&rebuild(h)).unwrap_err().to_string();
    // The entry with the highest offsets, removed: its bytes are left after every other.
    let last = header.as_object().unwrap().iter().filter(|(k, _)| *k != "__metadata__").max_by_key(|(_, t)| t["data_offsets"][1].as_u64().unwrap()).map(|(k, _)| k.clone()).unwrap();
    let mut h = header.clone();
    h.as_object_mut().unwrap().remove(&last);
    let e = err(&h);
    assert!(e.contains("no tensor holds the last") && e.contains("a header entry removed"), "{e}");
    let first = header.as_object().unwrap().iter().filter(|(k, _)| *k != "__metadata__").min_by_key(|(_, t)| t["data_offsets"][0].as_u64().unwrap()).map(|(k, _)| k.clone()).unwrap();
    let (a, b) = (header[&first]["data_offsets"][0].as_u64().unwrap(), header[&first]["data_offsets"][1].as_u64().unwrap());
    let mut h = header.clone();
    h[&last]["data_offsets"] = json!([b, a]);
    let e = err(&h);
    assert!(e.contains(&format!("tensor `{last}` has data_offsets [{b}, {a}], which run backwards")), "{e}");
    let mut h = header.clone();
    h[&last]["data_offsets"] = json!([a, b]);
    let e = err(&h);
    assert!(e.contains("share bytes") && e.contains(&format!("`{last}`")) && e.contains(&format!("`{first}`")), "{e}");
    let mut h = header.clone();
    h[&last]["data_offsets"] = json!([-4, 4]);
    let e = err(&h);
    assert!(e.contains(&format!("tensor `{last}` has data_offsets [-4,4], not two byte offsets")), "{e}");
}

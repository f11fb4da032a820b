//! CPU tests of the candle engine on tiny models.

use super::*;
use crate::testing::tiny;

/// A precision from its name (test shorthand).
fn p(s: &str) -> Precision {
    s.parse().unwrap()
}

#[test]
fn every_precision_decodes_exactly_the_requested_tokens_on_cpu() {
    for family in ["qwen2", "llama"] {
        let mut f = CandleFactory::new(
            WeightSource::Synthetic {
                shape: tiny(family),
                seed: 7,
            },
            Device::Cpu,
        )
        .unwrap();
        for name in ["F32", "BF16", "F16", "Q8_0", "Q4_0", "Q4_K"] {
            let mut d = f
                .load(p(name))
                .unwrap_or_else(|e| panic!("{family} {name}: {e:#}"));
            assert_eq!(d.generate(2, 4, 5).unwrap(), 10, "{family} {name}");
            // A second generation starts from a clean cache.
            assert_eq!(d.generate(1, 4, 3).unwrap(), 3);
            d.synchronize().unwrap();
            assert!(d.kernel().contains(name));
        }
    }
}

#[test]
fn odd_widths_fall_back_to_q8_0_and_say_so() {
    let mut s = tiny("qwen2");
    s.hidden = 96; // 96 % 256 ≠ 0, 96 % 32 = 0
    s.heads = 2;
    s.kv_heads = 1;
    s.head_dim = 48;
    s.intermediate = 256;
    let mut f =
        CandleFactory::new(WeightSource::Synthetic { shape: s, seed: 1 }, Device::Cpu).unwrap();
    let d = f.load(p("Q4_K")).unwrap();
    assert!(
        d.notes().iter().any(|n| n.contains("Q8_0")),
        "{:?}",
        d.notes()
    );
}

#[test]
fn hf_dir_and_gguf_file_sources_load() {
    let dir = std::env::temp_dir().join(format!("qe-hf-{}", std::process::id()));
    let shape = tiny("llama");
    write_synthetic_hf_dir(&shape, 3, &dir).unwrap();
    let mut f = CandleFactory::new(WeightSource::HfDir(dir.clone()), Device::Cpu).unwrap();
    assert_eq!(f.shape().layers, 2);
    assert_eq!(f.load(p("F32")).unwrap().generate(1, 3, 2).unwrap(), 2);
    assert_eq!(f.load(p("Q8_0")).unwrap().generate(1, 3, 2).unwrap(), 2);

    let gguf = dir.join("tiny.gguf");
    write_synthetic_gguf(&tiny("qwen2"), GgmlDType::Q4_0, 5, &gguf).unwrap();
    let mut g = CandleFactory::new(WeightSource::Gguf(vec![gguf]), Device::Cpu).unwrap();
    assert_eq!(g.shape().family, "qwen2");
    assert_eq!(g.load(p("Q4_0")).unwrap().generate(1, 3, 2).unwrap(), 2);
    let wrong = g.load(p("Q8_0")).err().unwrap().to_string();
    assert!(
        wrong.contains("not a Q8_0 file") && wrong.contains("Q4_0"),
        "{wrong}"
    );
    let f16 = g.load(p("F16")).err().unwrap().to_string();
    assert!(f16.contains("not a FP16 file"), "{f16}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A model given as one GGUF file per precision: each arm loads the file that declares its
/// precision, a precision with no file is an error naming every file, and files of two shapes
/// are refused as one model.
#[test]
fn a_gguf_set_gives_each_arm_its_own_file() {
    let dir = std::env::temp_dir().join(format!("qe-ggufset-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let shape = tiny("llama");
    let q4 = dir.join("m-Q4_0.gguf");
    let q8 = dir.join("m-Q8_0.gguf");
    write_synthetic_gguf(&shape, GgmlDType::Q4_0, 5, &q4).unwrap();
    write_synthetic_gguf(&shape, GgmlDType::Q8_0, 5, &q8).unwrap();
    let mut g = CandleFactory::new(
        WeightSource::Gguf(vec![q4.clone(), q8.clone()]),
        Device::Cpu,
    )
    .unwrap();
    let a = g.load(p("Q4_0")).unwrap();
    assert!(
        a.notes().iter().any(|n| n.contains("m-Q4_0.gguf")),
        "{:?}",
        a.notes()
    );
    let b = g.load(p("Q8_0")).unwrap();
    assert!(
        b.notes().iter().any(|n| n.contains("m-Q8_0.gguf")),
        "{:?}",
        b.notes()
    );
    let none = g.load(p("F16")).err().unwrap().to_string();
    assert!(
        none.contains("no FP16 file")
            && none.contains("m-Q4_0.gguf")
            && none.contains("m-Q8_0.gguf"),
        "{none}"
    );

    let other = dir.join("other-Q4_0.gguf");
    write_synthetic_gguf(&tiny("qwen2"), GgmlDType::Q4_0, 5, &other).unwrap();
    let e = CandleFactory::new(WeightSource::Gguf(vec![q8, other]), Device::Cpu)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("different models"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Reference NLL without the KV cache: for each position, prefill the whole prefix at once.
fn nll_by_prefill(d: &mut CandleDecoder, ids: &[u32]) -> f64 {
    let mut sum = 0.0;
    for t in 1..ids.len() {
        d.clear();
        let x = Tensor::new(&ids[..t], &d.device)
            .unwrap()
            .unsqueeze(0)
            .unwrap();
        let logits = d.forward(&x, 0, &mut None).unwrap();
        sum -= log_prob(&logits, ids[t]).unwrap();
    }
    sum
}

#[test]
fn perplexity_through_the_kv_cache_equals_prefilling_every_prefix() {
    for family in ["qwen2", "llama"] {
        let shape = tiny(family);
        let mut f =
            CandleFactory::new(WeightSource::Synthetic { shape, seed: 11 }, Device::Cpu).unwrap();
        let (ids, how) = f.tokenize("Four score and seven years ago").unwrap();
        assert!(how.contains("byte ids"), "{how}");
        assert_eq!(ids.len(), 30);
        let mut d = f.load_candle(p("F32")).unwrap();
        let cached = d.nll(&ids).unwrap();
        let reference = nll_by_prefill(&mut d, &ids);
        assert!(cached.is_finite() && cached > 0.0, "{family}: {cached}");
        assert!(
            (cached - reference).abs() / reference < 1e-4,
            "{family}: cached {cached} vs prefill {reference}"
        );
        // A second score starts from a clean cache.
        assert_eq!(d.nll(&ids).unwrap(), cached, "{family}");
        // Quantizing the same weights moves the NLL, Q8_0 less than Q4_0; independent random
        // blocks (the energy runs' default) are a different model altogether.
        f.quantize_synthetic_floats = true;
        let mut q8 = f.load_candle(p("Q8_0")).unwrap();
        assert!(q8
            .model
            .notes
            .iter()
            .any(|n| n.contains("float arms' seeded")));
        let d8 = (q8.nll(&ids).unwrap() - cached).abs();
        let d4 = (f.load_candle(p("Q4_0")).unwrap().nll(&ids).unwrap() - cached).abs();
        assert!(
            d8 > 0.0 && d8 < d4,
            "{family}: |ΔNLL| Q8_0 {d8} vs Q4_0 {d4}"
        );
        f.quantize_synthetic_floats = false;
        let mut ind = f.load_candle(p("Q8_0")).unwrap();
        assert!(ind
            .model
            .notes
            .iter()
            .all(|n| !n.contains("float arms' seeded")));
        let di = (ind.nll(&ids).unwrap() - cached).abs();
        assert!(di > d8, "{family}: independent {di} vs same-weights {d8}");
    }
}

/// Seeded float tensors with peaky attention (q and k scaled up), so that a wrong q/k row order
/// (llama's rope pairing) shows in the NLL.
fn peaky_float_tensors(shape: &ModelShape) -> HashMap<String, Tensor> {
    let mut tensors = synthetic_float_tensors(shape, 5, &Device::Cpu).unwrap();
    for (n, t) in tensors.iter_mut() {
        if n.ends_with("q_proj.weight") || n.ends_with("k_proj.weight") {
            *t = (t.clone() * 30.0).unwrap();
        }
    }
    tensors
}

/// A float GGUF loaded as float weights (names mapped back, Llama's q/k rows unpermuted) is the
/// same model as the checkpoint it was converted from; the quantized path on the same file agrees.
#[test]
fn a_float_gguf_loads_as_the_float_model_it_came_from() {
    let dir = std::env::temp_dir().join(format!("qe-floatgguf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for family in ["llama", "qwen2"] {
        let shape = tiny(family);
        let tensors = peaky_float_tensors(&shape);
        let vb = VarBuilder::from_tensors(tensors.clone(), DType::F32, &Device::Cpu);
        let mut reference = CandleDecoder {
            model: float_model(&shape, vb).unwrap(),
            device: Device::Cpu,
            vocab: shape.vocab,
            precision: Precision::Fp32,
        };
        let (gguf, _) = quantize_hf_tensors(tensors, &shape, GgmlDType::F32).unwrap();
        let file = dir.join(format!("{family}-F32.gguf"));
        std::fs::write(&file, gguf).unwrap();
        let mut f = CandleFactory::new(WeightSource::Gguf(vec![file]), Device::Cpu).unwrap();
        let ids: Vec<u32> = (0..24u32).map(|i| i * 37 % shape.vocab as u32).collect();
        let want = reference.nll(&ids).unwrap();
        for as_float in [true, false] {
            f.gguf_floats_as_float = as_float;
            let mut d = f.load(p("F32")).unwrap();
            let how = d.notes().join(" ");
            assert_eq!(how.contains("float weights"), as_float, "{how}");
            let got = d.nll(&ids).unwrap();
            assert!(
                (got - want).abs() / want < 1e-5,
                "{family} as_float={as_float}: {got} vs {want}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn hf_to_gguf_conversion_keeps_the_model() {
    for family in ["llama", "qwen2"] {
        let shape = tiny(family);
        let tensors = peaky_float_tensors(&shape);
        let vb = VarBuilder::from_tensors(tensors.clone(), DType::F32, &Device::Cpu);
        let float = float_model(&shape, vb).unwrap();
        // F32 "quantization": the GGUF path with no rounding at all.
        let (gguf, _) = quantize_hf_tensors(tensors, &shape, GgmlDType::F32).unwrap();
        let quant = quant_model_from_bytes(&shape, gguf, &Device::Cpu).unwrap();
        let decoder = |model| CandleDecoder {
            model,
            device: Device::Cpu,
            vocab: shape.vocab,
            precision: Precision::Fp32,
        };
        let ids: Vec<u32> = (0..24u32).map(|i| i * 37 % shape.vocab as u32).collect();
        let a = decoder(float).nll(&ids).unwrap();
        let b = decoder(quant).nll(&ids).unwrap();
        assert!((a - b).abs() / a < 1e-5, "{family}: float {a} vs GGUF {b}");
    }
}

#[test]
fn perplexity_refuses_what_it_cannot_score() {
    let mut f = CandleFactory::new(
        WeightSource::Synthetic {
            shape: tiny("qwen2"),
            seed: 1,
        },
        Device::Cpu,
    )
    .unwrap();
    let mut d = f.load(p("F32")).unwrap();
    assert!(d.nll(&[5]).unwrap_err().to_string().contains("at least 2"));
    let e = d.nll(&[1, 512]).unwrap_err().to_string();
    assert!(e.contains("outside the model's vocabulary"), "{e}");
}

#[test]
fn real_sources_tokenize_with_their_tokenizer_json() {
    use tokenizers::models::wordlevel::WordLevel;
    let dir = std::env::temp_dir().join(format!("qe-tok-{}", std::process::id()));
    let shape = tiny("llama");
    write_synthetic_hf_dir(&shape, 3, &dir).unwrap();
    let f = CandleFactory::new(WeightSource::HfDir(dir.clone()), Device::Cpu).unwrap();
    // Weights without a tokenizer.json: a clear refusal, not byte ids.
    let e = f.tokenize("we the people").unwrap_err().to_string();
    assert!(e.contains("tokenizer.json"), "{e}");
    let vocab: std::collections::HashMap<String, u32> =
        [("[UNK]", 0), ("we", 7), ("the", 8), ("people", 9)]
            .into_iter()
            .map(|(w, i)| (w.to_string(), i))
            .collect();
    let model = WordLevel::builder()
        .vocab(vocab.into_iter().collect())
        .unk_token("[UNK]".into())
        .build()
        .unwrap();
    let mut tok = tokenizers::Tokenizer::new(model);
    tok.with_pre_tokenizer(Some(tokenizers::pre_tokenizers::whitespace::Whitespace {}));
    tok.save(dir.join("tokenizer.json"), false).unwrap();
    let (ids, how) = f.tokenize("we the people of").unwrap();
    assert_eq!(ids, vec![7, 8, 9, 0]);
    assert!(how.starts_with("tokenizer.json"), "{how}");
    let mut f = f;
    assert!(f.load(p("F32")).unwrap().nll(&ids).unwrap().is_finite());

    let gguf = dir.join("sub").join("tiny.gguf");
    std::fs::create_dir_all(gguf.parent().unwrap()).unwrap();
    write_synthetic_gguf(&shape, GgmlDType::Q8_0, 5, &gguf).unwrap();
    let g = CandleFactory::new(WeightSource::Gguf(vec![gguf]), Device::Cpu).unwrap();
    let e = g.tokenize("we").unwrap_err().to_string();
    assert!(e.contains("beside the GGUF file"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn required_bytes_by_hand() {
    let s = analysis::find_shape("qwen2-0.5b").unwrap();
    // F16, batch 1, 272 tokens: 0.494e9·2 + KV 2·24·2·64·2 B·272 + logits + 1.5e9
    let b = required_bytes(s, Format::Float(DType::F16), 1, 272) as f64;
    let want = s.param_count() as f64 * 2.0 + 12288.0 * 272.0 + 151936.0 * 16.0 + 1.5e9;
    assert!((b - want).abs() < 2.0, "{b} vs {want}");
    assert!(bytes_per_param(Format::Quant(GgmlDType::Q4_0)) == 18.0 / 32.0);
}

/// A panic inside a third-party loader fails the load with the file's name; it
/// does not abort the run.
#[test]
fn a_panicking_loader_becomes_an_error_naming_the_file() {
    let e = super::guard_loader::<()>("/models/odd.gguf", || {
        panic!("index out of bounds: the len is 3 but the index is 9")
    })
    .unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with("/models/odd.gguf: the model loader failed"),
        "{text}"
    );
    assert!(text.contains("index out of bounds"), "{text}");
    let e = super::guard_loader::<()>("x", || std::panic::panic_any(7u8)).unwrap_err();
    assert!(e.to_string().contains("no message"), "{e}");
    assert_eq!(super::guard_loader("x", || Ok(5)).unwrap(), 5);
}

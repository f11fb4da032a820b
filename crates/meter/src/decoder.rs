//! Decode engines behind a trait: candle (`crate::candle`) and a fake for tests.

use crate::meter::FakeMeter;
use report::Precision;

pub trait Decoder {
    /// Prefill `prompt_len` fixed tokens for `batch` sequences, then decode exactly `new_tokens`
    /// tokens greedily with the KV cache (never stopping early). Returns tokens generated
    /// (`batch · new_tokens`).
    fn generate(
        &mut self,
        batch: usize,
        prompt_len: usize,
        new_tokens: usize,
    ) -> anyhow::Result<usize>;
    /// Block until the device has finished all queued work (window edges must be synchronized).
    fn synchronize(&mut self) -> anyhow::Result<()>;
    /// What runs the matmuls, e.g. "candle 0.11.1 F16 cuBLAS" or "candle Q4_K mmvq".
    fn kernel(&self) -> String;
    /// Anything the report must say about this arm (e.g. per-tensor format fallbacks).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
    /// Teacher-forced negative log-likelihood of one sequence, fresh cache: the sum over
    /// `ids[1..]` of −ln p(idₜ | ids[..t]) in nats (`ids.len() − 1` predictions).
    fn nll(&mut self, ids: &[u32]) -> anyhow::Result<f64>;
}

pub trait DecoderFactory {
    fn load(&mut self, precision: Precision) -> anyhow::Result<Box<dyn Decoder>>;
    /// Device bytes the arm needs: weights + KV cache + activations + runtime overhead.
    fn required_bytes(&self, precision: Precision, batch: usize, context: usize) -> u64;
    /// The perplexity text as token ids, and how they were made (the model's tokenizer file, or
    /// byte ids where the weights come without one).
    fn tokenize(&self, text: &str) -> anyhow::Result<(Vec<u32>, String)>;
}

/// A fake engine: each token costs `step_s` of virtual time on a [`FakeMeter`], during which the
/// meter's scripted power applies. Failures can be scripted per precision.
pub struct FakeDecoderFactory {
    pub meter: FakeMeter,
    /// (precision, seconds per generated token)
    pub step_s: Vec<(Precision, f64)>,
    pub fail_load: Vec<Precision>,
    pub fail_decode_after: Option<(Precision, usize)>,
    pub bytes: u64,
    pub loads: Vec<Precision>,
    /// (precision, nats per predicted token) for `nll`; 2.0 where not listed.
    pub nll_per_token: Vec<(Precision, f64)>,
    /// Precisions whose `nll` fails.
    pub fail_nll: Vec<Precision>,
    pub fail_tokenize: bool,
}

impl FakeDecoderFactory {
    pub fn new(meter: FakeMeter) -> Self {
        FakeDecoderFactory {
            meter,
            step_s: vec![(Precision::Fp16, 0.010), (Precision::Q4K, 0.008)],
            fail_load: Vec::new(),
            fail_decode_after: None,
            bytes: 1 << 30,
            loads: Vec::new(),
            nll_per_token: Vec::new(),
            fail_nll: Vec::new(),
            fail_tokenize: false,
        }
    }
}

struct FakeDecoder {
    meter: FakeMeter,
    step_s: f64,
    precision: Precision,
    fail_after: Option<usize>,
    calls: usize,
    nll_per_token: Result<f64, String>,
}

impl Decoder for FakeDecoder {
    fn generate(
        &mut self,
        batch: usize,
        _prompt_len: usize,
        new_tokens: usize,
    ) -> anyhow::Result<usize> {
        self.calls += 1;
        if self.fail_after.is_some_and(|n| self.calls > n) {
            anyhow::bail!("scripted decode failure on call {}", self.calls);
        }
        // Advance virtual time token by token, yielding real time so the sampler thread sees
        // the window.
        for _ in 0..new_tokens {
            self.meter.advance(self.step_s);
            std::thread::yield_now();
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
        Ok(batch * new_tokens)
    }
    fn synchronize(&mut self) -> anyhow::Result<()> {
        Ok(())
    }
    fn kernel(&self) -> String {
        format!("fake {}", self.precision)
    }
    fn nll(&mut self, ids: &[u32]) -> anyhow::Result<f64> {
        // Scoring keeps the fake GPU busy like decoding does, so a test can tell whether it
        // fell inside the energy window.
        self.meter.advance(self.step_s * ids.len() as f64);
        match &self.nll_per_token {
            Ok(n) => Ok(n * ids.len().saturating_sub(1) as f64),
            Err(e) => anyhow::bail!("{e}"),
        }
    }
}

impl DecoderFactory for FakeDecoderFactory {
    fn load(&mut self, precision: Precision) -> anyhow::Result<Box<dyn Decoder>> {
        self.loads.push(precision);
        if self.fail_load.contains(&precision) {
            anyhow::bail!("scripted load failure for {precision}");
        }
        let step_s = self
            .step_s
            .iter()
            .find(|(p, _)| *p == precision)
            .map(|(_, s)| *s)
            .unwrap_or(0.01);
        Ok(Box::new(FakeDecoder {
            meter: self.meter.clone(),
            step_s,
            precision,
            fail_after: self
                .fail_decode_after
                .as_ref()
                .filter(|(p, _)| *p == precision)
                .map(|(_, n)| *n),
            calls: 0,
            nll_per_token: if self.fail_nll.contains(&precision) {
                Err(format!("scripted scoring failure for {precision}"))
            } else {
                Ok(self
                    .nll_per_token
                    .iter()
                    .find(|(p, _)| *p == precision)
                    .map(|(_, n)| *n)
                    .unwrap_or(2.0))
            },
        }))
    }
    fn required_bytes(&self, _precision: Precision, _batch: usize, _context: usize) -> u64 {
        self.bytes
    }
    fn tokenize(&self, text: &str) -> anyhow::Result<(Vec<u32>, String)> {
        if self.fail_tokenize {
            anyhow::bail!("scripted tokenizer failure");
        }
        Ok((
            text.bytes().map(u32::from).collect(),
            "byte ids (fake)".into(),
        ))
    }
}

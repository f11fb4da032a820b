//! Decode engines behind a trait: candle ([`crate::candle_decoder`]) and a fake for tests.

use crate::meter::FakeMeter;

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
}

pub trait DecoderFactory {
    fn load(&mut self, precision: &str) -> anyhow::Result<Box<dyn Decoder>>;
    /// Device bytes the arm needs: weights + KV cache + activations + runtime overhead.
    fn required_bytes(&self, precision: &str, batch: usize, context: usize) -> u64;
}

/// A fake engine: each token costs `step_s` of virtual time on a [`FakeMeter`], during which the
/// meter's scripted power applies. Failures can be scripted per precision.
pub struct FakeDecoderFactory {
    pub meter: FakeMeter,
    /// (precision, seconds per generated token)
    pub step_s: Vec<(String, f64)>,
    pub fail_load: Vec<String>,
    pub fail_decode_after: Option<(String, usize)>,
    pub bytes: u64,
    pub loads: Vec<String>,
}

impl FakeDecoderFactory {
    pub fn new(meter: FakeMeter) -> Self {
        FakeDecoderFactory {
            meter,
            step_s: vec![("F16".into(), 0.010), ("Q4_K".into(), 0.008)],
            fail_load: Vec::new(),
            fail_decode_after: None,
            bytes: 1 << 30,
            loads: Vec::new(),
        }
    }
}

struct FakeDecoder {
    meter: FakeMeter,
    step_s: f64,
    precision: String,
    fail_after: Option<usize>,
    calls: usize,
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
}

impl DecoderFactory for FakeDecoderFactory {
    fn load(&mut self, precision: &str) -> anyhow::Result<Box<dyn Decoder>> {
        self.loads.push(precision.to_string());
        if self.fail_load.iter().any(|p| p == precision) {
            anyhow::bail!("scripted load failure for {precision}");
        }
        let step_s = self
            .step_s
            .iter()
            .find(|(p, _)| p == precision)
            .map(|(_, s)| *s)
            .unwrap_or(0.01);
        Ok(Box::new(FakeDecoder {
            meter: self.meter.clone(),
            step_s,
            precision: precision.to_string(),
            fail_after: self
                .fail_decode_after
                .as_ref()
                .filter(|(p, _)| p == precision)
                .map(|(_, n)| *n),
            calls: 0,
        }))
    }
    fn required_bytes(&self, _precision: &str, _batch: usize, _context: usize) -> u64 {
        self.bytes
    }
}

//! Token counts for the context builder: the model's own encoding where it is public (OpenAI's
//! o200k_base and cl100k_base, from `tiktoken-rs`, whose BPE ranks are compiled into the
//! binary, so nothing is downloaded), and elsewhere (Anthropic, the scripted model) an
//! estimate that a [`Calibration`] scales to what the provider reports.
//!
//! # Why the estimate counts with o200k_base
//!
//! A calibration can only learn one factor, so the raw estimate must be *proportional* to the
//! provider's count whatever the content, or the factor learnt on one step's mix is wrong for
//! the next. Two large BPE vocabularies trained on web text and code split such content
//! alike; a byte count does not. Measured on this repository's own files (Markdown, Rust,
//! JSON, `Cargo.lock`), cl100k_base's count is within 0.3% of o200k_base's on every one,
//! while bytes / 4 ranges from 0.67× (`Cargo.lock`) to 1.13× (Rust) of it, and from 0.28× to
//! 0.68× on symbol runs and emoji (gpt-tokenizer's test plans, used in the tests below). So
//! the estimate is o200k_base's count: another tokenizer, but one whose ratio to Claude's
//! should be far steadier than a byte count's on what an agent sends. That cannot be
//! measured offline (Claude's tokenizer is not public), and on non-Latin scripts even the two
//! OpenAI vocabularies part (cl100k_base spends 1.2–4.2× o200k_base's tokens on single
//! sentences), so the factor is least transferable there; the calibration absorbs the
//! ratio, and [`CALIBRATED_TOLERANCE`] says how far the result can be trusted. It costs
//! building o200k_base once per process (see `O200K`).
//!
//! # Long whitespace runs
//!
//! `tiktoken-rs` panics on a run of about a million whitespace characters (its splitting
//! regex runs out of backtracking room), and tool output is untrusted, so such runs are cut
//! before counting (see `MAX_WHITESPACE_RUN`); any other text is counted whole and exactly.

use std::fmt;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use tiktoken_rs::CoreBPE;

/// o200k_base's table, built on first use. Building it decodes 200,000 base64 ranks into
/// hash maps: measured on the 2-core development machine (another build sharing it) at
/// 130–220 ms, median ~165 ms, in a release build and 190–290 ms, median ~195 ms, with the
/// dev/test profile (dependencies at opt-level 2), leaving ~50 MB resident — so once per
/// process, never per run. `None` if the embedded data is corrupt.
static O200K: OnceLock<Option<CoreBPE>> = OnceLock::new();

/// cl100k_base's table, built on first use like [`O200K`]: measured likewise at 50–105 ms,
/// median ~75 ms (release) and 75–120 ms, median ~80 ms (dev/test profile), ~28 MB resident.
static CL100K: OnceLock<Option<CoreBPE>> = OnceLock::new();

/// The longest whitespace run handed to the BPE's splitter at once. Its regex keeps one
/// backtracking entry per character of a whitespace run it tries `\s+(?!\S)` on, and
/// fancy-regex stops at 1,000,000 entries, which `tiktoken-rs` turns into a panic: measured,
/// ~1,000,000 spaces or tabs followed by any non-space (for o200k_base, also at the end of
/// the text) panic in both encodings. Longer runs are cut into pieces this long, counted
/// separately: 15× below the limit, and a cut moves the count by about a token (measured: 3
/// tokens for 3 cuts), against the 500 tokens or more a run this long costs (514 for 65,535
/// spaces; mixed whitespace costs more). Text without such a run is never cut.
const MAX_WHITESPACE_RUN: usize = 65_536;

/// What OpenAI's chat format adds to each message: the role and the markers around it,
/// `<|start|>{role}<|message|>…<|end|>`. OpenAI cookbook, "How to count tokens with
/// tiktoken": `tokens_per_message = 3` for every current chat model. (Its `tokens_per_name`
/// does not arise: airlock's messages carry no `name`.)
const OPENAI_PER_MESSAGE: u64 = 3;

/// What OpenAI's chat format adds once a request: the reply is primed with
/// `<|start|>assistant<|message|>`, 3 tokens (same source).
const OPENAI_PER_REQUEST: u64 = 3;

/// Anthropic does not publish its framing. A message costs some tokens beyond its text in any
/// chat template (a role, separators), so OpenAI's figure stands in; what it misses is
/// absorbed, in proportion, by the calibration.
const ESTIMATE_PER_MESSAGE: u64 = OPENAI_PER_MESSAGE;

/// The once-a-request framing of an estimate, for the same reason as [`ESTIMATE_PER_MESSAGE`].
const ESTIMATE_PER_REQUEST: u64 = OPENAI_PER_REQUEST;

/// Bytes a token for the last-resort estimate, used only if o200k_base's embedded table
/// failed to load: the usual figure for English and code (this repository's files measure
/// 2.7–4.5 bytes an o200k_base token).
const BYTES_PER_TOKEN: usize = 4;

/// The range the calibration factor is kept in; a per-call ratio outside it is clamped
/// before it is learnt, so one bad report cannot halve or triple every budget. Below 0.5 a
/// report leaves part of the request out (typically cached tokens: Anthropic's
/// `input_tokens` alone) — o200k_base is among the largest vocabularies, and no tokenizer
/// needs half its tokens for code and prose. Above 3.0 a report counts what the run did not
/// (images, documents, a provider's hidden prompt on a small request) more likely than a
/// tokenizer that splits three times finer; a request mostly in a script the two split very
/// differently could exceed it, and is then underestimated — accepted for an agent whose
/// context is mostly code, logs and prose.
const MIN_FACTOR: f64 = 0.5;
const MAX_FACTOR: f64 = 3.0;

/// The smallest weight a new report gets in the factor. The first reports are averaged
/// equally (weight 1/n); from the fourth on, each new one weighs 1/4, so the factor follows a
/// change in what the run sends (prose, then minified JSON) within a few calls, while a ±3%
/// scatter between calls (σ ≈ 1.7%) leaves the factor a σ of ~0.65% (σ·√(α/(2−α)), α = 1/4).
const MIN_GAIN: f64 = 0.25;

/// How far a calibrated count may be from the provider's count of the same request, once
/// one report has been seen, for a provider whose per-call ratio to the raw count scatters
/// within ±3% of its mean (what the tests simulate, with a true ratio of 1.17). The factor
/// is a weighted mean of the ratios seen, so within ±3% of the true one; the new request's
/// own ratio can sit ±3% the other way: 1.03 / 0.97 − 1 ≈ 6.2% at worst, plus rounding.
/// Budgets built from an estimate should keep this much headroom; with an exact encoding
/// the scatter, and so the error, is near zero.
pub const CALIBRATED_TOLERANCE: f64 = 0.07;

/// A public OpenAI encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    O200kBase,
    Cl100kBase,
}

impl Encoding {
    /// The encoding of an OpenAI model, as tiktoken maps it: gpt-4 (not gpt-4o), gpt-3.5,
    /// their fine-tunes and Azure names, and the embedding models use cl100k_base; gpt-4o,
    /// gpt-4.1, gpt-4.5, gpt-5, o1, o3, o4, chatgpt-4o use o200k_base, and so does any name
    /// not known here: every model OpenAI has released since May 2024 uses it, so a new name
    /// most likely does too (gpt-oss's o200k_harmony differs only in special tokens, which
    /// ordinary text never produces). The retired GPT-3 models (r50k/p50k) are not served.
    pub fn for_model(model: &str) -> Encoding {
        const CL100K_PREFIXES: [&str; 7] = [
            "gpt-4-",
            "gpt-3.5",
            "gpt-35-",
            "text-embedding-3",
            "text-embedding-ada-002",
            "davinci-002",
            "babbage-002",
        ];
        let name = base_model(model);
        if name == "gpt-4"
            || CL100K_PREFIXES
                .iter()
                .any(|prefix| name.starts_with(prefix))
        {
            Encoding::Cl100kBase
        } else {
            Encoding::O200kBase
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Encoding::O200kBase => "o200k_base",
            Encoding::Cl100kBase => "cl100k_base",
        }
    }

    fn table(self) -> &'static OnceLock<Option<CoreBPE>> {
        match self {
            Encoding::O200kBase => &O200K,
            Encoding::Cl100kBase => &CL100K,
        }
    }

    fn build(self) -> Option<CoreBPE> {
        let built = match self {
            Encoding::O200kBase => tiktoken_rs::o200k_base(),
            Encoding::Cl100kBase => tiktoken_rs::cl100k_base(),
        };
        // Only corrupt embedded ranks fail here; the callers then estimate, which a
        // calibration keeps usable, rather than stop the run.
        built
            .inspect_err(
                |err| tracing::warn!(encoding = self.name(), %err, "BPE table failed to load"),
            )
            .ok()
    }
}

/// A model name without what routers and fine-tunes add around OpenAI's own: `openai/gpt-4o`,
/// `ft:gpt-4o-mini:org::id`, and any capitals.
fn base_model(model: &str) -> String {
    let name = model.rsplit('/').next().unwrap_or(model);
    let name = name.strip_prefix("ft:").unwrap_or(name);
    name.to_ascii_lowercase()
}

/// An encoding's loaded table. Its fields are private, so only this module makes one and a
/// [`Tokenizer::Exact`] always holds a table that loaded.
#[derive(Clone, Copy)]
pub struct Bpe {
    encoding: Encoding,
    core: &'static CoreBPE,
}

impl Bpe {
    fn load(encoding: Encoding) -> Option<Bpe> {
        let core = encoding.table().get_or_init(|| encoding.build()).as_ref()?;
        Some(Bpe { encoding, core })
    }

    /// Counts `text` as ordinary text: a special-token string in content (`<|endoftext|>`) is
    /// the characters it is, as the providers take content.
    fn count(&self, text: &str) -> u64 {
        segments(text)
            .map(|segment| len_u64(self.core.encode_ordinary(segment).len()))
            .sum()
    }
}

impl fmt::Debug for Bpe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Bpe").field(&self.encoding.name()).finish()
    }
}

/// `text` in pieces none of which holds a whitespace run longer than [`MAX_WHITESPACE_RUN`]
/// characters; text without such a run comes back whole.
fn segments(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (head, tail) = rest.split_at(segment_end(rest));
        rest = tail;
        Some(head)
    })
}

/// Where the first piece of `text` ends: after the character that makes a whitespace run
/// [`MAX_WHITESPACE_RUN`] long, or at the end. `char::is_whitespace` is Unicode's
/// White_Space, the set the regex's `\s` matches.
fn segment_end(text: &str) -> usize {
    let mut run = 0;
    for (at, ch) in text.char_indices() {
        run = if ch.is_whitespace() { run + 1 } else { 0 };
        if run == MAX_WHITESPACE_RUN {
            return at + ch.len_utf8();
        }
    }
    text.len()
}

fn len_u64(len: usize) -> u64 {
    u64::try_from(len).unwrap_or(u64::MAX)
}

/// How a run counts tokens: the model's own encoding, or a calibrated estimate.
///
/// Cheap to clone (a `&'static` table inside). The first [`Tokenizer::for_openai`] or
/// [`Tokenizer::estimate`] of a process builds the encoding's table (up to ~0.3 s, see
/// `O200K`), blocking; counting runs at tens of MB/s (a megabyte takes 30–500 ms,
/// depending on the text), so async callers counting large texts may want `spawn_blocking`.
#[derive(Debug, Clone)]
pub enum Tokenizer {
    /// The model's encoding: counts match the provider's `prompt_tokens`.
    Exact(Bpe),
    /// No public tokenizer: o200k_base's counts as a proxy (`None`: bytes / 4, only if that
    /// table failed to load), for a [`Calibration`] to scale.
    Estimate(Option<Bpe>),
}

impl Tokenizer {
    pub fn for_openai(model: &str) -> Tokenizer {
        match Bpe::load(Encoding::for_model(model)) {
            Some(bpe) => Tokenizer::Exact(bpe),
            None => Tokenizer::estimate(),
        }
    }

    /// For Anthropic and the scripted model.
    pub fn estimate() -> Tokenizer {
        Tokenizer::Estimate(Bpe::load(Encoding::O200kBase))
    }

    /// `o200k_base`, `cl100k_base` or `estimate`.
    pub fn name(&self) -> &'static str {
        match self {
            Tokenizer::Exact(bpe) => bpe.encoding.name(),
            Tokenizer::Estimate(_) => "estimate",
        }
    }

    /// The raw count of `text`, without calibration.
    pub fn count(&self, text: &str) -> u64 {
        match self {
            Tokenizer::Exact(bpe) | Tokenizer::Estimate(Some(bpe)) => bpe.count(text),
            Tokenizer::Estimate(None) => len_u64(text.len().div_ceil(BYTES_PER_TOKEN)),
        }
    }

    /// The share of a budget a context built with these counts keeps free: none with the
    /// model's own encoding, [`CALIBRATED_TOLERANCE`] with an estimate.
    pub fn headroom(&self) -> f64 {
        match self {
            Tokenizer::Exact(_) => 0.0,
            Tokenizer::Estimate(_) => CALIBRATED_TOLERANCE,
        }
    }

    /// What one message costs beyond its text in the provider's chat framing.
    pub fn per_message(&self) -> u64 {
        match self {
            Tokenizer::Exact(_) => OPENAI_PER_MESSAGE,
            Tokenizer::Estimate(_) => ESTIMATE_PER_MESSAGE,
        }
    }

    /// What a request costs once beyond its messages (the reply's priming).
    pub fn per_request(&self) -> u64 {
        match self {
            Tokenizer::Exact(_) => OPENAI_PER_REQUEST,
            Tokenizer::Estimate(_) => ESTIMATE_PER_REQUEST,
        }
    }
}

/// The factor learnt from the provider's reported usage; 1.0 until the first report. Shared
/// by the steps of a run and saved in its checkpoint ([`Calibration::factor`],
/// [`Calibration::samples`], [`Calibration::restore`]).
///
/// The factor is a running mean of the per-call ratios reported ÷ counted, equal-weighted
/// over the first calls and exponentially weighted after (see `MIN_GAIN`): a request
/// resends most of the one before it, so recent calls describe the next one best, and the
/// state is just the factor and a count, which a checkpoint restores exactly. A ratio of sums
/// would weigh big requests more but forget nothing, and needs the sums saved.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    factor: f64,
    samples: u32,
}

impl Default for Calibration {
    fn default() -> Self {
        Calibration::new()
    }
}

impl Calibration {
    pub fn new() -> Calibration {
        Calibration {
            factor: 1.0,
            samples: 0,
        }
    }

    /// The calibration a checkpoint saved. A factor out of range is clamped into it, and one
    /// that is not a number starts afresh: a checkpoint is read from disk.
    pub fn restore(factor: f64, samples: u32) -> Calibration {
        if !factor.is_finite() {
            return Calibration::new();
        }
        Calibration {
            factor: factor.clamp(MIN_FACTOR, MAX_FACTOR),
            samples,
        }
    }

    /// Learns from a model call: `counted`, the raw count of the request as the run budgeted
    /// it (texts and framing), and `reported`, the provider's input tokens for it, cached ones
    /// included (Anthropic's `input_tokens + cache_creation_input_tokens +
    /// cache_read_input_tokens`; OpenAI's `prompt_tokens` already counts them). A zero on
    /// either side is no measurement and is ignored.
    pub fn observe(&mut self, counted: u64, reported: u64) {
        if counted == 0 || reported == 0 {
            return;
        }
        let ratio = (reported as f64 / counted as f64).clamp(MIN_FACTOR, MAX_FACTOR);
        self.samples = self.samples.saturating_add(1);
        let gain = (1.0 / f64::from(self.samples)).max(MIN_GAIN);
        self.factor += gain * (ratio - self.factor);
    }

    pub fn factor(&self) -> f64 {
        self.factor
    }

    /// How many reports the factor has learnt from.
    pub fn samples(&self) -> u32 {
        self.samples
    }

    /// `raw` scaled by the factor, rounded to the nearest token: rounding up would add up to
    /// a token to every part of a context, a bias that adds up over many small parts.
    pub fn apply(&self, raw: u64) -> u64 {
        // `as` saturates: a count too large for u64 stays u64::MAX.
        (raw as f64 * self.factor).round() as u64
    }
}

/// What the run has learnt about its provider's token counts (the saved form of a [`Calibration`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalibrationState {
    pub factor: f64,
    pub samples: u32,
}

impl Default for CalibrationState {
    fn default() -> Self {
        CalibrationState {
            factor: 1.0,
            samples: 0,
        }
    }
}

#[cfg(test)]
#[path = "tokens_tests.rs"]
mod tests;

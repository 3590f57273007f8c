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

#[cfg(test)]
mod tests {
    use super::*;

    fn bpe(encoding: Encoding) -> Bpe {
        Bpe::load(encoding).expect("the embedded ranks load")
    }

    /// Asserts the crate's encoding of `text` is the published one, and the count its length.
    fn assert_encodes(encoding: Encoding, text: &str, ids: &[u32]) {
        let bpe = bpe(encoding);
        assert_eq!(
            bpe.core.encode_ordinary(text),
            ids,
            "{}: {text:?}",
            encoding.name()
        );
        assert_eq!(
            Tokenizer::Exact(bpe).count(text),
            ids.len() as u64,
            "{text:?}"
        );
    }

    // openai/tiktoken at 4e71bbe0c078468e00fefbf94b39849389f346e5.
    #[test]
    fn cl100k_base_matches_tiktoken_tests() {
        let cl100k = Encoding::Cl100kBase;
        // tests/test_encoding.py:21 and tests/test_simple_public.py:15.
        assert_encodes(cl100k, "hello world", &[15339, 1917]);
        // tests/test_encoding.py:62-66: the split regex around apostrophes and newlines.
        assert_encodes(cl100k, "rer", &[38149]);
        assert_encodes(cl100k, "'rer", &[2351, 81]);
        assert_encodes(cl100k, "today\n ", &[31213, 198, 220]);
        assert_encodes(cl100k, "today\n \n", &[31213, 27907]);
        assert_encodes(cl100k, "today\n  \n", &[31213, 14211]);
        // tests/test_encoding.py:78: U+0085, two bytes that no token covers whole.
        assert_encodes(cl100k, " \u{85}0", &[220, 126, 227, 15]);
        // tests/test_encoding.py:105: an emoji, one character in three tokens.
        assert_encodes(cl100k, "👍", &[9468, 239, 235]);
        // tests/test_offsets.py:62-65 and 69-72 publish one offset per token: Chinese, 17
        // tokens; Tamil, whose combining signs split characters across tokens, 19.
        let tokenizer = Tokenizer::Exact(bpe(cl100k));
        assert_eq!(tokenizer.count("我非常渴望与人工智能一起工作"), 17);
        assert_eq!(tokenizer.count("நடிகர் சூர்யா"), 19);
    }

    /// openai/tiktoken's public tests give no o200k_base ids: these come from the WASM port
    /// of tiktoken's own tests (dqbd/tiktoken 4c8b748e07992c00386f3180af5c574b27b65139,
    /// wasm/test/test_simple_public.test.ts:66-67) and from gpt-tokenizer's test plans,
    /// generated with Python tiktoken (niieani/gpt-tokenizer
    /// 9182f2e567355e0a8f81022b6c52bdc688250ac8, data/TestPlans.txt, the sample's line).
    #[test]
    fn o200k_base_matches_published_encodings() {
        let o200k = Encoding::O200kBase;
        assert_encodes(o200k, "hello world", &[24912, 2375]);
        // TestPlans.txt:1030.
        assert_encodes(o200k, "hello", &[24912]);
        // TestPlans.txt:1034: punctuation and an emoji.
        assert_encodes(
            o200k,
            "Hello, World! How are you today? 🌍",
            &[13225, 11, 5922, 0, 3253, 553, 481, 4044, 30, 130321, 235],
        );
        // TestPlans.txt:1038: Japanese, three bytes a character.
        assert_encodes(
            o200k,
            "こんにちは、世界！お元気ですか？",
            &[
                95839, 1395, 28428, 3393, 8930, 6753, 25717, 15121, 7128, 4802,
            ],
        );
        // TestPlans.txt:1058: digits split from their space, and an emoji.
        assert_encodes(
            o200k,
            "The quick brown fox jumps over 13 lazy dogs. 😺",
            &[
                976, 4853, 19705, 68347, 65613, 1072, 220, 1311, 29082, 16798, 13, 22861, 118,
            ],
        );
        // TestPlans.txt:1066: Gujarati, whose vowel signs (\p{M}) o200k_base's regex keeps
        // with their letters; a flag, two regional indicators.
        assert_encodes(
            o200k,
            "હેલો, વિશ્વ! તમે આજે કેમ છો? 🇮🇳",
            &[
                6094, 187761, 11, 95706, 0, 52040, 59999, 104493, 72756, 30, 173468, 106, 55506,
                111,
            ],
        );
        // TestPlans.txt:1094: brackets and operators, what code is made of.
        assert_encodes(
            o200k,
            "A ∀ x (P(x) → Q(x)) ∧ (∃x P(x)) → ∃x Q(x)",
            &[
                32, 35353, 222, 1215, 350, 47, 4061, 8, 15155, 1486, 4061, 915, 35353, 100, 350,
                18085, 225, 87, 398, 4061, 915, 15155, 35353, 225, 87, 1486, 4061, 8,
            ],
        );
        // TestPlans.txt:1198: symbols and digits mixed.
        assert_encodes(
            o200k,
            "4gH@!0sT*#(9^%$[x{}j+|Yz6;Q]~8",
            &[
                19, 70, 39, 31, 0, 15, 82, 51, 9, 2, 7, 24, 61, 4, 3, 58, 87, 12083, 73, 10, 91,
                56, 89, 21, 26, 48, 60, 93, 23,
            ],
        );
    }

    /// The same test plans for cl100k_base: the samples at lines 790, 818 and 862.
    #[test]
    fn cl100k_base_matches_published_test_plans() {
        let cl100k = Encoding::Cl100kBase;
        assert_encodes(
            cl100k,
            "Hello, World! How are you today? 🌍",
            &[9906, 11, 4435, 0, 2650, 527, 499, 3432, 30, 11410, 234, 235],
        );
        assert_encodes(
            cl100k,
            "1234567890!@#$%^&*()-=_+[]{};:'\",.<>?/|`~ 🎉",
            &[
                4513, 10961, 16474, 15, 0, 31, 49177, 46999, 5, 9, 16069, 21574, 10, 1318, 6390,
                26, 4989, 498, 16134, 48685, 14, 91, 63, 93, 11410, 236, 231,
            ],
        );
        assert_encodes(
            cl100k,
            "A ∀ x (P(x) → Q(x)) ∧ (∃x P(x)) → ∃x Q(x)",
            &[
                32, 55800, 865, 320, 47, 2120, 8, 11651, 1229, 2120, 595, 75078, 95925, 225, 87,
                393, 2120, 595, 11651, 12264, 225, 87, 1229, 2120, 8,
            ],
        );
    }

    /// `<|endoftext|>` is one token only where special tokens are allowed (tiktoken
    /// tests/test_encoding.py:23; dqbd/tiktoken wasm/test/test_simple_public.test.ts:78-79);
    /// in content it is counted as the characters it is.
    #[test]
    fn special_token_strings_count_as_text() {
        let text = "hello <|endoftext|>";
        for (encoding, special) in [
            (Encoding::Cl100kBase, vec![15339, 220, 100257]),
            (Encoding::O200kBase, vec![24912, 220, 199999]),
        ] {
            let bpe = bpe(encoding);
            assert_eq!(bpe.core.encode_with_special_tokens(text), special);
            let count = Tokenizer::Exact(bpe).count(text);
            assert_eq!(count, bpe.core.encode_ordinary(text).len() as u64);
            assert!(count > 3, "{}: {count}", encoding.name());
        }
    }

    #[test]
    fn models_map_to_their_encodings() {
        let o200k = [
            // tiktoken tests/test_misc.py:18-19.
            "gpt-4o",
            "gpt-4o-mini",
            "gpt-4o-2024-08-06",
            "chatgpt-4o-latest",
            "gpt-4.1",
            "gpt-4.1-nano",
            "gpt-4.5-preview",
            "gpt-5",
            "gpt-5-mini",
            "gpt-5.1-codex",
            "o1",
            "o1-mini",
            "o3",
            "o3-mini",
            "o4-mini",
            "ft:gpt-4o-mini:acme::abc123",
            "openai/gpt-4o",
            "GPT-4o",
            "gpt-oss-120b",
            // Unknown names.
            "some-future-model",
            "",
        ];
        let cl100k = [
            // tiktoken tests/test_misc.py:14-17.
            "gpt-3.5-turbo-0301",
            "gpt-4",
            "gpt-4-turbo",
            "gpt-4-0613",
            "gpt-4-32k",
            "gpt-3.5-turbo",
            "gpt-35-turbo",
            "ft:gpt-3.5-turbo:acme::abc123",
            "text-embedding-3-small",
            "text-embedding-3-large",
            "text-embedding-ada-002",
            "openai/gpt-4",
        ];
        for model in o200k {
            assert_eq!(Encoding::for_model(model), Encoding::O200kBase, "{model}");
            assert_eq!(Tokenizer::for_openai(model).name(), "o200k_base", "{model}");
        }
        for model in cl100k {
            assert_eq!(Encoding::for_model(model), Encoding::Cl100kBase, "{model}");
            assert_eq!(
                Tokenizer::for_openai(model).name(),
                "cl100k_base",
                "{model}"
            );
        }
    }

    #[test]
    fn framing_follows_the_openai_cookbook() {
        for tokenizer in [Tokenizer::for_openai("gpt-4o"), Tokenizer::estimate()] {
            assert_eq!(tokenizer.per_message(), 3);
            assert_eq!(tokenizer.per_request(), 3);
        }
    }

    #[test]
    fn the_estimate_counts_with_o200k_or_bytes() {
        let estimate = Tokenizer::estimate();
        assert_eq!(estimate.name(), "estimate");
        assert_eq!(estimate.count("hello world"), 2);
        let bytes = Tokenizer::Estimate(None);
        assert_eq!(bytes.name(), "estimate");
        assert_eq!(bytes.count("hello world"), 3);
        assert_eq!(bytes.count(""), 0);
    }

    /// The whitespace runs that make `tiktoken-rs` panic uncut are counted.
    #[test]
    fn whitespace_runs_past_the_regex_limit_are_counted() {
        let spaces = " ".repeat(1_000_001) + "x";
        let tabs = "\t".repeat(1_000_001);
        for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
            let tokenizer = Tokenizer::Exact(bpe(encoding));
            assert!(tokenizer.count(&spaces) > 1000, "{}", encoding.name());
            assert!(tokenizer.count(&tabs) > 1000, "{}", encoding.name());
        }
    }

    /// A cut run costs what the whole run does, give or take a token a cut.
    #[test]
    fn cutting_a_run_barely_moves_its_count() {
        let text = format!("a{}b", " \t".repeat(3 * MAX_WHITESPACE_RUN / 2 + 7));
        assert_eq!(segments(&text).count(), 4);
        for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
            let bpe = bpe(encoding);
            let whole = bpe.core.encode_ordinary(&text).len() as u64;
            let cut = bpe.count(&text);
            assert!(
                whole.abs_diff(cut) <= 2 * 3,
                "{}: {whole} {cut}",
                encoding.name()
            );
        }
    }

    #[test]
    fn segments_cover_the_text_and_leave_ordinary_text_whole() {
        let prose = "fn main() {\n    println!(\"hi\");\n}\n".repeat(1000);
        assert_eq!(segments(&prose).collect::<Vec<_>>(), [prose.as_str()]);
        let run = format!("x{}y", "\u{a0}".repeat(MAX_WHITESPACE_RUN + 1));
        let pieces: Vec<&str> = segments(&run).collect();
        assert_eq!(pieces.len(), 2);
        assert_eq!(pieces.concat(), run);
        assert_eq!(
            pieces[0].chars().filter(|ch| ch.is_whitespace()).count(),
            MAX_WHITESPACE_RUN
        );
        assert_eq!(segments("").count(), 0);
    }

    /// A megabyte of mixed content, and tiktoken's own large input (tests/test_encoding.py:52-57).
    #[test]
    fn a_megabyte_is_counted() {
        let line = "Hello, World! 🌍 let x = vec![1, 2, 3]; // 你好 {\"key\": \"deadbeef\"}\n";
        let text = line.repeat((1 << 20) / line.len() + 1);
        for tokenizer in [
            Tokenizer::for_openai("gpt-4o"),
            Tokenizer::for_openai("gpt-4"),
        ] {
            let count = tokenizer.count(&text);
            let bytes = text.len() as u64;
            assert!(
                (bytes / 8..bytes).contains(&count),
                "{}: {count}",
                tokenizer.name()
            );
        }
        assert!(Tokenizer::for_openai("gpt-4o").count(&"x".repeat(1_000_000)) > 0);
    }

    /// A provider whose count is 1.17 × ours, each call off by up to ±3%.
    const TRUE_RATIO: f64 = 1.17;
    const NOISE: [f64; 8] = [0.03, -0.03, 0.012, -0.021, 0.027, -0.008, 0.019, -0.03];

    fn reported(counted: u64, noise: f64) -> u64 {
        (counted as f64 * TRUE_RATIO * (1.0 + noise)).round() as u64
    }

    /// A run's requests, growing as its conversation does.
    fn counted(step: usize) -> u64 {
        4_000 + 3_000 * step as u64
    }

    #[test]
    fn calibration_converges_within_the_tolerance() {
        let mut calibration = Calibration::new();
        assert_eq!(calibration.apply(12_345), 12_345);
        for (step, noise) in NOISE.into_iter().enumerate() {
            calibration.observe(counted(step), reported(counted(step), noise));
            let factor_error = (calibration.factor() / TRUE_RATIO - 1.0).abs();
            assert!(
                factor_error <= 0.03 + 1e-9,
                "step {step}: {}",
                calibration.factor()
            );
            // A new request, reported at either end of the scatter.
            let raw = 30_000;
            for noise in [-0.03, 0.0, 0.03] {
                let actual = reported(raw, noise) as f64;
                let error = (calibration.apply(raw) as f64 / actual - 1.0).abs();
                assert!(
                    error <= CALIBRATED_TOLERANCE,
                    "step {step}, noise {noise}: {error}"
                );
            }
        }
        assert_eq!(calibration.samples(), NOISE.len() as u32);
    }

    #[test]
    fn calibration_follows_a_change_of_content() {
        let mut calibration = Calibration::new();
        for step in 0..8 {
            calibration.observe(counted(step), reported(counted(step), 0.0));
        }
        // The run turns to content the provider splits finer.
        for step in 8..16 {
            calibration.observe(counted(step), (counted(step) as f64 * 1.4).round() as u64);
        }
        assert!(
            (calibration.factor() / 1.4 - 1.0).abs() < 0.03,
            "{}",
            calibration.factor()
        );
    }

    #[test]
    fn a_restored_calibration_goes_on_as_if_uninterrupted() {
        let mut whole = Calibration::new();
        let mut first = Calibration::new();
        for (step, noise) in NOISE.into_iter().enumerate() {
            whole.observe(counted(step), reported(counted(step), noise));
            if step < 3 {
                first.observe(counted(step), reported(counted(step), noise));
            }
        }
        let mut resumed = Calibration::restore(first.factor(), first.samples());
        for (step, noise) in NOISE.into_iter().enumerate().skip(3) {
            resumed.observe(counted(step), reported(counted(step), noise));
        }
        assert_eq!(resumed, whole);
    }

    #[test]
    fn calibration_ignores_nonsense_and_clamps() {
        let mut calibration = Calibration::new();
        calibration.observe(0, 500);
        calibration.observe(500, 0);
        assert_eq!(calibration, Calibration::new());

        calibration.observe(100, 10_000);
        assert_eq!(calibration.factor(), MAX_FACTOR);
        let mut calibration = Calibration::new();
        calibration.observe(10_000, 100);
        assert_eq!(calibration.factor(), MIN_FACTOR);

        assert_eq!(Calibration::restore(10.0, 4).factor(), MAX_FACTOR);
        assert_eq!(Calibration::restore(-1.0, 4).factor(), MIN_FACTOR);
        assert_eq!(Calibration::restore(f64::NAN, 4), Calibration::new());
        assert_eq!(Calibration::restore(f64::INFINITY, 4), Calibration::new());

        let mut worn = Calibration::restore(1.2, u32::MAX);
        worn.observe(1000, 1200);
        assert_eq!(worn.samples(), u32::MAX);
        assert_eq!(
            Calibration::restore(MAX_FACTOR, 1).apply(u64::MAX),
            u64::MAX
        );
    }

    #[test]
    fn apply_rounds_to_the_nearest_token() {
        let calibration = Calibration::restore(1.002, 5);
        assert_eq!(calibration.apply(10), 10);
        assert_eq!(calibration.apply(1000), 1002);
        assert_eq!(Calibration::restore(1.5, 1).apply(3), 5);
        assert_eq!(Calibration::new().apply(0), 0);
    }
}

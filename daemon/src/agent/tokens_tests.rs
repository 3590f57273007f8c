//! Tests of the token counts: the encodings against published and tiktoken test vectors, the
//! model-to-encoding map, and the calibration's convergence.

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
            6094, 187761, 11, 95706, 0, 52040, 59999, 104493, 72756, 30, 173468, 106, 55506, 111,
        ],
    );
    // TestPlans.txt:1094: brackets and operators, what code is made of.
    assert_encodes(
        o200k,
        "A ∀ x (P(x) → Q(x)) ∧ (∃x P(x)) → ∃x Q(x)",
        &[
            32, 35353, 222, 1215, 350, 47, 4061, 8, 15155, 1486, 4061, 915, 35353, 100, 350, 18085,
            225, 87, 398, 4061, 915, 15155, 35353, 225, 87, 1486, 4061, 8,
        ],
    );
    // TestPlans.txt:1198: symbols and digits mixed.
    assert_encodes(
        o200k,
        "4gH@!0sT*#(9^%$[x{}j+|Yz6;Q]~8",
        &[
            19, 70, 39, 31, 0, 15, 82, 51, 9, 2, 7, 24, 61, 4, 3, 58, 87, 12083, 73, 10, 91, 56,
            89, 21, 26, 48, 60, 93, 23,
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
            4513, 10961, 16474, 15, 0, 31, 49177, 46999, 5, 9, 16069, 21574, 10, 1318, 6390, 26,
            4989, 498, 16134, 48685, 14, 91, 63, 93, 11410, 236, 231,
        ],
    );
    assert_encodes(
        cl100k,
        "A ∀ x (P(x) → Q(x)) ∧ (∃x P(x)) → ∃x Q(x)",
        &[
            32, 55800, 865, 320, 47, 2120, 8, 11651, 1229, 2120, 595, 75078, 95925, 225, 87, 393,
            2120, 595, 11651, 12264, 225, 87, 1229, 2120, 8,
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

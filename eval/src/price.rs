//! What a run cost: the suite's prices (USD per million tokens, by the model string a run
//! reports) applied to its tokens. A model without a price has an unknown cost — never 0,
//! which would read as "free" in a comparison and pass a cost threshold it should not.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// The price of one model, USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
}

/// The suite's prices by model string (`openai:gpt-4o`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prices(pub BTreeMap<String, Price>);

impl Prices {
    /// The cost of `input` and `output` tokens of `model`; unknown when the suite has no price
    /// for it.
    pub fn cost(&self, model: &str, input: u64, output: u64) -> Cost {
        match self.0.get(model) {
            // Token counts stay far below 2^53, where f64 stops being exact.
            Some(price) => {
                Cost::Usd((input as f64 * price.input + output as f64 * price.output) / 1_000_000.0)
            }
            None => Cost::Unknown,
        }
    }

    /// A price that is negative or not a number, by model; `None` when all are usable.
    pub fn invalid(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|(_, price)| {
                !(price.input.is_finite()
                    && price.output.is_finite()
                    && price.input >= 0.0
                    && price.output >= 0.0)
            })
            .map(|(model, _)| model.as_str())
    }
}

/// A cost in USD, or unknown. Written to reports as a number or the string `"unknown"`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum Cost {
    Usd(f64),
    #[default]
    Unknown,
}

/// How an unknown cost is written.
const UNKNOWN: &str = "unknown";

impl Cost {
    pub fn usd(self) -> Option<f64> {
        match self {
            Self::Usd(usd) => Some(usd),
            Self::Unknown => None,
        }
    }
}

impl fmt::Display for Cost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Usd(usd) => write!(f, "{}", format_usd(*usd)),
            Self::Unknown => f.write_str(UNKNOWN),
        }
    }
}

/// `$0.0123`: four decimals, enough for one cheap run, readable for a suite.
pub fn format_usd(usd: f64) -> String {
    format!("${usd:.4}")
}

impl Serialize for Cost {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Usd(usd) => serializer.serialize_f64(*usd),
            Self::Unknown => serializer.serialize_str(UNKNOWN),
        }
    }
}

impl<'de> Deserialize<'de> for Cost {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CostVisitor;
        impl Visitor<'_> for CostVisitor {
            type Value = Cost;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a cost in USD or \"unknown\"")
            }
            fn visit_f64<E: de::Error>(self, value: f64) -> Result<Cost, E> {
                Ok(Cost::Usd(value))
            }
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<Cost, E> {
                Ok(Cost::Usd(value as f64))
            }
            fn visit_i64<E: de::Error>(self, value: i64) -> Result<Cost, E> {
                Ok(Cost::Usd(value as f64))
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<Cost, E> {
                if value == UNKNOWN {
                    Ok(Cost::Unknown)
                } else {
                    Err(E::invalid_value(de::Unexpected::Str(value), &self))
                }
            }
        }
        deserializer.deserialize_any(CostVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_priced_model_costs_its_tokens_and_an_unpriced_one_is_unknown() {
        let prices = Prices(BTreeMap::from([(
            "openai:gpt-4o".to_owned(),
            Price {
                input: 2.5,
                output: 10.0,
            },
        )]));
        assert_eq!(
            prices.cost("openai:gpt-4o", 1_000_000, 100_000),
            Cost::Usd(3.5)
        );
        assert_eq!(prices.cost("scripted", 10, 10), Cost::Unknown);
        assert_eq!(prices.invalid(), None);
    }

    #[test]
    fn costs_round_trip_as_a_number_or_unknown() -> anyhow::Result<()> {
        assert_eq!(serde_json::to_string(&Cost::Usd(0.25))?, "0.25");
        assert_eq!(serde_json::to_string(&Cost::Unknown)?, "\"unknown\"");
        assert_eq!(serde_json::from_str::<Cost>("0.25")?, Cost::Usd(0.25));
        assert_eq!(serde_json::from_str::<Cost>("0")?, Cost::Usd(0.0));
        assert_eq!(serde_json::from_str::<Cost>("\"unknown\"")?, Cost::Unknown);
        assert!(serde_json::from_str::<Cost>("\"free\"").is_err());
        Ok(())
    }
}

//! Byte sizes in profiles: a plain integer of bytes, or a string with a unit (`"256 MiB"`).

use serde::{Deserialize, Deserializer, de};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Bytes(u64),
            Text(String),
        }
        match Raw::deserialize(deserializer)? {
            Raw::Bytes(bytes) => Ok(ByteSize(bytes)),
            Raw::Text(text) => parse(&text).map(ByteSize).map_err(de::Error::custom),
        }
    }
}

fn parse(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a size: expected a number such as `64 MiB`"))?;
    let multiplier: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        other => {
            return Err(format!(
                "unknown size unit `{other}` in `{text}`; use B, KiB, MiB, GiB, KB, MB or GB"
            ));
        }
    };
    number
        .checked_mul(multiplier)
        .ok_or_else(|| format!("size `{text}` is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse("256 MiB"), Ok(256 << 20));
        assert_eq!(parse("4GiB"), Ok(4 << 30));
        assert_eq!(parse("10 KB"), Ok(10_000));
        assert_eq!(parse("17"), Ok(17));
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse("lots").is_err());
        assert!(parse("12 parsecs").is_err());
        assert!(parse("-1 MiB").is_err());
        assert!(parse("99999999999999 GiB").is_err());
    }
}

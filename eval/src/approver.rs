//! Who answers an attempt's approval requests: `approve_all`, `deny_all`, or a script of
//! answers given in the order the requests come (`{script: [approve, deny, approve_session]}`),
//! where every request past the end of the script is denied — an eval never waits for a
//! person, and a run that asks more than the suite expected should not get its way.

use std::fmt;

use airlock_client::proto::Decision;
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

/// The default denies everything: nothing is approved that the suite did not say to approve.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Approver {
    ApproveAll,
    #[default]
    DenyAll,
    Script(Vec<Answer>),
}

/// One scripted answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// This call, this once.
    Approve,
    /// This call, and the same again for the rest of the run's session.
    ApproveSession,
    Deny,
}

/// The map form: `{script: [...]}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Script {
    script: Vec<Answer>,
}

impl<'de> Deserialize<'de> for Approver {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ApproverVisitor;
        impl<'de> Visitor<'de> for ApproverVisitor {
            type Value = Approver;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("approve_all, deny_all or {script: [approve, deny, approve_session]}")
            }
            fn visit_str<E: de::Error>(self, word: &str) -> Result<Approver, E> {
                match word {
                    "approve_all" => Ok(Approver::ApproveAll),
                    "deny_all" => Ok(Approver::DenyAll),
                    other => Err(E::custom(format!(
                        "unknown approver `{other}`; use approve_all, deny_all or {{script: \
                         [approve, deny, approve_session]}}"
                    ))),
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Approver, A::Error> {
                let script = Script::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(Approver::Script(script.script))
            }
        }
        deserializer.deserialize_any(ApproverVisitor)
    }
}

/// The reason a denial carries to the model.
pub const DENY_REASON: &str = "denied by the eval's approver";

impl Approver {
    /// The answer to the `index`-th request of a run (0 for the first).
    pub fn answer(&self, index: usize) -> Decision {
        match self {
            Self::ApproveAll => Decision::ApproveOnce,
            Self::DenyAll => Decision::Deny,
            Self::Script(answers) => match answers.get(index) {
                Some(Answer::Approve) => Decision::ApproveOnce,
                Some(Answer::ApproveSession) => Decision::ApproveSession,
                Some(Answer::Deny) | None => Decision::Deny,
            },
        }
    }

    /// How reports name it: `approve_all`, `deny_all`, `script[approve, deny]`.
    pub fn describe(&self) -> String {
        match self {
            Self::ApproveAll => "approve_all".to_owned(),
            Self::DenyAll => "deny_all".to_owned(),
            Self::Script(answers) => {
                let answers: Vec<&str> = answers
                    .iter()
                    .map(|answer| match answer {
                        Answer::Approve => "approve",
                        Answer::ApproveSession => "approve_session",
                        Answer::Deny => "deny",
                    })
                    .collect();
                format!("script[{}]", answers.join(", "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_answers_in_order_and_denies_past_its_end() -> anyhow::Result<()> {
        let approver: Approver =
            serde_norway::from_str("script: [approve, deny, approve_session]")?;
        assert_eq!(approver.answer(0), Decision::ApproveOnce);
        assert_eq!(approver.answer(1), Decision::Deny);
        assert_eq!(approver.answer(2), Decision::ApproveSession);
        assert_eq!(approver.answer(3), Decision::Deny);
        assert_eq!(
            approver.describe(),
            "script[approve, deny, approve_session]"
        );
        Ok(())
    }

    #[test]
    fn the_fixed_approvers_read_as_words() -> anyhow::Result<()> {
        let all: Approver = serde_norway::from_str("approve_all")?;
        assert_eq!(all.answer(7), Decision::ApproveOnce);
        let none: Approver = serde_norway::from_str("deny_all")?;
        assert_eq!(none.answer(0), Decision::Deny);
        let Err(error) = serde_norway::from_str::<Approver>("maybe") else {
            panic!("an unknown approver was read");
        };
        assert!(
            error.to_string().contains("unknown approver `maybe`"),
            "{error}"
        );
        assert!(serde_norway::from_str::<Approver>("script: [approve, perhaps]").is_err());
        assert!(serde_norway::from_str::<Approver>("{script: [], other: 1}").is_err());
        Ok(())
    }
}

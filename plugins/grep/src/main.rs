//! `grep`: searches the text files of the workspace for a regular expression, line by
//! line.

mod excerpt;
mod glob;
mod lines;
mod search;

use airlock_sdk::Workspace;

fn main() {
    airlock_sdk::run(|args| search::grep(&Workspace::guest(), &args))
}

#[cfg(test)]
mod tests {
    #[test]
    fn committed_schema_matches_the_input_type() {
        assert_eq!(
            include_str!("../schema.json"),
            airlock_sdk::input_schema::<super::search::GrepArgs>(),
            "plugins/grep/schema.json is stale: regenerate it with `grep --schema`"
        );
    }
}

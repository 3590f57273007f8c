//! `write_file`: writes a text file of the workspace and returns the unified diff of the
//! change; in preview mode returns the diff and writes nothing.

mod diff;
mod write;

use airlock_sdk::Workspace;

fn main() {
    airlock_sdk::run(|args| write::write_file(&Workspace::guest(), &args))
}

#[cfg(test)]
mod tests {
    #[test]
    fn committed_schema_matches_the_input_type() {
        assert_eq!(
            include_str!("../schema.json"),
            airlock_sdk::input_schema::<super::write::WriteFileArgs>(),
            "plugins/write_file/schema.json is stale: regenerate it with `write_file --schema`"
        );
    }
}

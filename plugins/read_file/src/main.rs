//! `read_file`: returns a UTF-8 text file of the workspace, whole or a range of lines.

mod read;

use airlock_sdk::Workspace;

fn main() {
    airlock_sdk::run(|args| read::read_file(&Workspace::guest(), &args))
}

#[cfg(test)]
mod tests {
    #[test]
    fn committed_schema_matches_the_input_type() {
        assert_eq!(
            include_str!("../schema.json"),
            airlock_sdk::input_schema::<super::read::ReadFileArgs>(),
            "plugins/read_file/schema.json is stale: regenerate it with `read_file --schema`"
        );
    }
}

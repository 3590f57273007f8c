//! `list_dir`: lists a workspace directory, optionally recursively, never following
//! symlinks.

mod list;

use airlock_sdk::Workspace;

fn main() {
    airlock_sdk::run(|args| list::list_dir(&Workspace::guest(), &args))
}

#[cfg(test)]
mod tests {
    #[test]
    fn committed_schema_matches_the_input_type() {
        assert_eq!(
            include_str!("../schema.json"),
            airlock_sdk::input_schema::<super::list::ListDirArgs>(),
            "plugins/list_dir/schema.json is stale: regenerate it with `list_dir --schema`"
        );
    }
}

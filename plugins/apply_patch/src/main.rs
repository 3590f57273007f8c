//! `apply_patch`: applies a multi-file patch, in unified diff format or codex's envelope
//! format, to the workspace, all or nothing, and returns the diff of what changed; in
//! preview mode returns the diff and writes nothing.

mod apply;
mod codex;
mod commit;
mod diff;
mod lines;
mod mode;
mod patch;
mod tool;
mod tree;
mod unified;

use airlock_sdk::Workspace;

fn main() {
    airlock_sdk::run(|args| tool::apply_patch(&Workspace::guest(), &args))
}

#[cfg(test)]
mod tests {
    #[test]
    fn committed_schema_matches_the_input_type() {
        assert_eq!(
            include_str!("../schema.json"),
            airlock_sdk::input_schema::<super::tool::ApplyPatchArgs>(),
            "plugins/apply_patch/schema.json is stale: regenerate it with `apply_patch --schema`"
        );
    }
}

//! `airlock tools new`: a tool project from a language's template (sdk/<lang>/template,
//! embedded by build.rs). Every template implements the same example tool (sdk/wordstats),
//! so a new project builds, checks and runs at once: it gets the template's files with the
//! template's name replaced by the tool's, the input schema, the WIT world, the example
//! calls (examples.json, from the example tool's vectors) and their workspace (testdata/).

use std::path::{Path, PathBuf};

use airlock_client::exit_code;

use crate::error::CliError;
use crate::output::Output;

include!(concat!(env!("OUT_DIR"), "/templates.rs"));

/// The name every template uses for its tool, replaced by the new tool's.
const TEMPLATE_NAME: &str = "wordstats";

/// The folder of the example calls' workspace in a new project.
const TESTDATA_DIR: &str = "testdata";

/// The longest tool name a manifest accepts (`[a-z][a-z0-9_]{0,63}`).
const MAX_NAME_LEN: usize = 64;

pub(super) struct Template {
    language: &'static str,
    files: &'static [(&'static str, &'static [u8])],
}

#[derive(Debug, clap::Args)]
pub struct NewArgs {
    /// The tool's name: a lowercase letter, then lowercase letters, digits or `_`.
    #[arg(required_unless_present = "list")]
    pub name: Option<String>,
    /// The language: c, cpp, go, zig, rust, rust-component, python, javascript or
    /// assemblyscript.
    #[arg(long, value_name = "LANG", required_unless_present = "list")]
    pub lang: Option<String>,
    /// List the languages there are templates for, and make nothing.
    #[arg(long)]
    pub list: bool,
    /// The folder the project is made in [default: ./NAME].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// `airlock tools new`.
pub fn new<O: std::io::Write, E: std::io::Write>(
    args: NewArgs,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    let names: Vec<&str> = TEMPLATES.iter().map(|template| template.language).collect();
    let (Some(lang), Some(name), false) = (args.lang, args.name, args.list) else {
        out.stdout(&format!("{}\n", names.join("\n")))?;
        return Ok(exit_code::OK);
    };
    let template = TEMPLATES
        .iter()
        .find(|template| template.language == lang)
        .ok_or_else(|| {
            CliError::Usage(format!(
                "no template for `{lang}`: --lang takes one of {}",
                names.join(", ")
            ))
        })?;
    check_name(&name)?;
    let dir = args.dir.unwrap_or_else(|| PathBuf::from(&name));
    if dir.exists() {
        return Err(CliError::Usage(format!(
            "{} already exists: choose another --dir (nothing was written)",
            dir.display()
        )));
    }
    let files = project_files(template, &name)?;
    for (relative, contents) in &files {
        write(&dir.join(relative), contents)?;
    }
    out.line(&format!(
        "made {} ({} tool `{}`, {} files); next:\n  airlock tools build {dir}\n  airlock tools check {dir}   (add --profiles-dir DIR when not run beside the daemon's sandbox-profiles)",
        dir.display(),
        template.language,
        name,
        files.len(),
        dir = dir.display()
    ))?;
    Ok(exit_code::OK)
}

fn check_name(name: &str) -> Result<(), CliError> {
    let mut chars = name.chars();
    let valid = chars.next().is_some_and(|first| first.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= MAX_NAME_LEN;
    if valid {
        Ok(())
    } else {
        Err(CliError::Usage(format!(
            "`{name}` is not a tool name: a lowercase letter, then up to {} lowercase letters, \
             digits or `_`",
            MAX_NAME_LEN - 1
        )))
    }
}

/// Every file of a new project named `name`, by its path in the project.
fn project_files(template: &Template, name: &str) -> Result<Vec<(PathBuf, Vec<u8>)>, CliError> {
    let rename = |bytes: &[u8]| -> Vec<u8> {
        match std::str::from_utf8(bytes) {
            Ok(text) => text.replace(TEMPLATE_NAME, name).into_bytes(),
            Err(_) => bytes.to_vec(),
        }
    };
    let mut files: Vec<(PathBuf, Vec<u8>)> = template
        .files
        .iter()
        .map(|(path, contents)| {
            (
                PathBuf::from(path.replace(TEMPLATE_NAME, name)),
                rename(contents),
            )
        })
        .collect();
    files.push(("schema.json".into(), SCHEMA.to_vec()));
    files.extend(
        WIT.iter()
            .map(|(path, contents)| (Path::new("wit").join(path), contents.to_vec())),
    );
    files.extend(
        TESTDATA
            .iter()
            .map(|(path, contents)| (Path::new(TESTDATA_DIR).join(path), contents.to_vec())),
    );
    files.push(("examples.json".into(), examples()?));
    Ok(files)
}

/// examples.json: the example tool's vectors, as `airlockd check-tool` reads them.
fn examples() -> Result<Vec<u8>, CliError> {
    let vectors: serde_json::Value = serde_json::from_slice(VECTORS)
        .map_err(|err| CliError::Protocol(format!("the embedded vectors are not JSON: {err}")))?;
    let examples = serde_json::json!({
        "workspace": TESTDATA_DIR,
        "examples": vectors["vectors"],
    });
    let mut text = serde_json::to_string_pretty(&examples)
        .map_err(|err| CliError::Protocol(format!("cannot write examples.json: {err}")))?;
    text.push('\n');
    Ok(text.into_bytes())
}

fn write(path: &Path, contents: &[u8]) -> Result<(), CliError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(CliError::Output)?;
    }
    std::fs::write(path, contents).map_err(CliError::Output)?;
    // Build scripts run as `sh build.sh`, but an author may run them directly.
    if path.extension().is_some_and(|ext| ext == "sh") {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
            .map_err(CliError::Output)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_language_of_the_issue_has_a_template() {
        let languages: Vec<&str> = TEMPLATES.iter().map(|template| template.language).collect();
        for language in [
            "assemblyscript",
            "c",
            "cpp",
            "go",
            "javascript",
            "python",
            "rust",
            "rust-component",
            "zig",
        ] {
            assert!(languages.contains(&language), "{language}: {languages:?}");
        }
    }

    #[test]
    fn a_project_is_renamed_and_complete() {
        let template = TEMPLATES
            .iter()
            .find(|template| template.language == "c")
            .expect("the C template");
        let files = project_files(template, "my_tool").expect("files");
        let manifest = files
            .iter()
            .find(|(path, _)| path == Path::new("tool.toml"))
            .expect("tool.toml");
        let manifest = String::from_utf8_lossy(&manifest.1);
        assert!(manifest.contains("name = \"my_tool\""), "{manifest}");
        assert!(!manifest.contains(TEMPLATE_NAME), "{manifest}");
        for path in [
            "schema.json",
            "wit/tool.wit",
            "examples.json",
            "testdata/notes.txt",
        ] {
            assert!(
                files.iter().any(|(file, _)| file == Path::new(path)),
                "{path} missing"
            );
        }
        let examples: serde_json::Value = serde_json::from_slice(
            &files
                .iter()
                .find(|(path, _)| path == Path::new("examples.json"))
                .expect("examples.json")
                .1,
        )
        .expect("JSON");
        assert_eq!(examples["workspace"], "testdata");
        assert!(
            examples["examples"]
                .as_array()
                .is_some_and(|all| all.len() > 3)
        );
    }

    #[test]
    fn names_follow_the_manifest_rule() {
        assert!(check_name("my_tool2").is_ok());
        for bad in ["", "My", "2x", "a-b", &"a".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}

//! Reading `*.toml` profiles from a directory. A broken profile is reported by name and file;
//! the others still load, and tools that name the broken one are refused with its error.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::size::ByteSize;
use super::{
    Access, EnvPolicy, FileGrant, GrantPath, Limits, NetworkPolicy, Profile, WORKSPACE_VAR,
};
use crate::changes::ChangeRules;

/// Profiles are a page of TOML; anything larger is not a profile.
const MAX_PROFILE_BYTES: u64 = 64 * 1024;

/// Limits a profile gets when it leaves them out: tight enough that forgetting one never
/// hands a tool the machine.
const DEFAULT_MEMORY_BYTES: u64 = 256 << 20;
const DEFAULT_WALL_TIME_MS: u64 = 30_000;
const DEFAULT_OUTPUT_BYTES: u64 = 16 << 20;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("profile `{name}` ({path}): {message}")]
pub struct ProfileError {
    pub name: String,
    pub path: PathBuf,
    pub message: String,
}

/// The profiles a daemon serves, and the errors of the ones that failed to load.
#[derive(Debug, Default)]
pub struct Profiles {
    loaded: BTreeMap<String, Arc<Profile>>,
    failed: BTreeMap<String, ProfileError>,
}

/// Why a tool cannot get the profile it names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileLookupError {
    #[error("no profile named `{name}` (known: {known})")]
    Unknown { name: String, known: String },
    #[error("{0}")]
    Broken(ProfileError),
}

impl Profiles {
    /// Loads every `*.toml` in `dir`. Returns the profiles and each failure, so the caller
    /// can log them; a missing directory is one failure.
    pub fn load_dir(dir: &Path) -> (Profiles, Vec<ProfileError>) {
        let mut profiles = Profiles::default();
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(err) => {
                let error = ProfileError {
                    name: "*".into(),
                    path: dir.to_owned(),
                    message: format!("cannot read the profiles directory: {err}"),
                };
                return (profiles, vec![error]);
            }
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
            .collect();
        paths.sort();
        let mut errors = Vec::new();
        for path in paths {
            let name = path
                .file_stem()
                .map(|stem| stem.to_string_lossy().into_owned())
                .unwrap_or_default();
            match load_file(&name, &path) {
                Ok(profile) => {
                    profiles.loaded.insert(name, Arc::new(profile));
                }
                Err(message) => {
                    let error = ProfileError {
                        name: name.clone(),
                        path,
                        message,
                    };
                    profiles.failed.insert(name, error.clone());
                    errors.push(error);
                }
            }
        }
        (profiles, errors)
    }

    pub fn get(&self, name: &str) -> Result<Arc<Profile>, ProfileLookupError> {
        if let Some(profile) = self.loaded.get(name) {
            return Ok(profile.clone());
        }
        if let Some(error) = self.failed.get(name) {
            return Err(ProfileLookupError::Broken(error.clone()));
        }
        Err(ProfileLookupError::Unknown {
            name: name.to_owned(),
            known: self.loaded.keys().cloned().collect::<Vec<_>>().join(", "),
        })
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.loaded.keys().map(String::as_str)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    description: String,
    #[serde(default)]
    network: NetworkPolicy,
    #[serde(default)]
    files: FilesFile,
    #[serde(default)]
    env: EnvFile,
    #[serde(default)]
    limits: LimitsFile,
    #[serde(default)]
    changes: ChangesFile,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChangesFile {
    #[serde(default)]
    exclude: Vec<String>,
    /// Paths one call may add, change or remove.
    max_files: Option<u64>,
    /// Apparent bytes one call may write (and keep, to undo).
    max_bytes: Option<ByteSize>,
    /// Apparent bytes of one file.
    max_file_size: Option<ByteSize>,
    /// Mode bits that never land, as an octal string (`"022"`).
    umask: Option<String>,
    /// Whether a directory may keep a sticky bit the tool set.
    #[serde(default)]
    sticky_dirs: bool,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilesFile {
    #[serde(default)]
    read_only: Vec<String>,
    #[serde(default)]
    read_write: Vec<String>,
    #[serde(default)]
    executable_writes: bool,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvFile {
    #[serde(default)]
    pass: Vec<String>,
    #[serde(default)]
    set: BTreeMap<String, String>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsFile {
    memory: Option<ByteSize>,
    wall_time_ms: Option<u64>,
    cpu_time_ms: Option<u64>,
    output: Option<ByteSize>,
    processes: Option<u64>,
    open_files: Option<u64>,
    file_size: Option<ByteSize>,
    tmp: Option<ByteSize>,
}

fn load_file(name: &str, path: &Path) -> Result<Profile, String> {
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
    {
        return Err("profile names (file stems) use lowercase letters, digits, `-` and `_`".into());
    }
    let size = std::fs::metadata(path)
        .map_err(|err| format!("cannot read: {err}"))?
        .len();
    if size > MAX_PROFILE_BYTES {
        return Err(format!(
            "the file is {size} bytes; profiles are at most {MAX_PROFILE_BYTES}"
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|err| format!("cannot read: {err}"))?;
    parse(name, &text, path)
}

/// Parses and checks one profile.
pub(super) fn parse(name: &str, text: &str, source: &Path) -> Result<Profile, String> {
    let file: ProfileFile = toml::from_str(text).map_err(|err| err.to_string())?;
    let mut files = Vec::new();
    for (entries, access) in [
        (&file.files.read_only, Access::ReadOnly),
        (&file.files.read_write, Access::ReadWrite),
    ] {
        for entry in entries {
            files.push(FileGrant {
                path: parse_grant_path(entry)?,
                access,
            });
        }
    }
    for (i, grant) in files.iter().enumerate() {
        if files[..i].iter().any(|earlier| earlier.path == grant.path) {
            return Err(format!(
                "{} is granted twice; list each path once, in read_only or read_write",
                display_grant(&grant.path)
            ));
        }
    }
    for var in file.env.pass.iter().chain(file.env.set.keys()) {
        if !is_env_name(var) {
            return Err(format!(
                "`{var}` is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)"
            ));
        }
    }
    let limits = &file.limits;
    let positive = |key: &str, value: Option<u64>| positive("limits", key, value);
    let limits = Limits {
        memory_bytes: positive("memory", limits.memory.map(|s| s.0))?
            .unwrap_or(DEFAULT_MEMORY_BYTES),
        wall_time: Duration::from_millis(
            positive("wall_time_ms", limits.wall_time_ms)?.unwrap_or(DEFAULT_WALL_TIME_MS),
        ),
        cpu_time: positive("cpu_time_ms", limits.cpu_time_ms)?.map(Duration::from_millis),
        output_bytes: positive("output", limits.output.map(|s| s.0))?
            .unwrap_or(DEFAULT_OUTPUT_BYTES),
        processes: positive("processes", limits.processes)?,
        open_files: positive("open_files", limits.open_files)?,
        file_size_bytes: positive("file_size", limits.file_size.map(|s| s.0))?,
        tmp_bytes: positive("tmp", limits.tmp.map(|s| s.0))?,
    };
    let change_rules = change_rules(&file.changes)?;
    Ok(Profile {
        name: name.to_owned(),
        description: file.description,
        files,
        network: file.network,
        env: EnvPolicy {
            pass: file.env.pass,
            set: file.env.set,
        },
        limits,
        executable_writes: file.files.executable_writes,
        change_exclusions: file.changes.exclude,
        change_rules,
        source: source.to_owned(),
    })
}

/// `value` of `table.key`, refused when it is 0.
fn positive(table: &str, key: &str, value: Option<u64>) -> Result<Option<u64>, String> {
    match value {
        Some(0) => Err(format!("{table}.{key} must be greater than 0")),
        other => Ok(other),
    }
}

/// The `[changes]` bounds and metadata rules, defaults for what is not set.
fn change_rules(file: &ChangesFile) -> Result<ChangeRules, String> {
    let defaults = ChangeRules::default();
    let positive = |key: &str, value: Option<u64>| positive("changes", key, value);
    let max_bytes =
        positive("max_bytes", file.max_bytes.map(|s| s.0))?.unwrap_or(defaults.max_bytes);
    let max_file_bytes =
        positive("max_file_size", file.max_file_size.map(|s| s.0))?.unwrap_or(max_bytes);
    let umask = match &file.umask {
        None => defaults.umask,
        Some(text) => u32::from_str_radix(text, 8)
            .ok()
            .filter(|mask| *mask <= 0o777)
            .ok_or_else(|| {
                format!(
                    "changes.umask `{text}` is not an octal mask of permission bits (like \"022\")"
                )
            })?,
    };
    Ok(ChangeRules {
        max_files: positive("max_files", file.max_files)?.unwrap_or(defaults.max_files),
        max_bytes,
        max_file_bytes: max_file_bytes.min(max_bytes),
        umask,
        sticky_dirs: file.sticky_dirs,
    })
}

fn parse_grant_path(entry: &str) -> Result<GrantPath, String> {
    let climbs = |path: &Path| {
        path.components()
            .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    };
    if let Some(rest) = entry.strip_prefix(WORKSPACE_VAR) {
        let sub = match rest {
            "" | "/" => PathBuf::new(),
            rest if rest.starts_with('/') => PathBuf::from(rest.trim_start_matches('/')),
            _ => {
                return Err(format!(
                    "`{entry}`: use `{WORKSPACE_VAR}` or `{WORKSPACE_VAR}/sub/dir`"
                ));
            }
        };
        if climbs(&sub) {
            return Err(format!("`{entry}`: `.` and `..` are not allowed in grants"));
        }
        return Ok(GrantPath::Workspace(sub));
    }
    let path = PathBuf::from(entry);
    if !path.is_absolute() {
        return Err(format!(
            "`{entry}`: file grants are absolute host paths or start with `{WORKSPACE_VAR}`"
        ));
    }
    if climbs(&path) {
        return Err(format!("`{entry}`: `.` and `..` are not allowed in grants"));
    }
    if path == Path::new("/") {
        return Err("granting `/` would hand the tool the whole host".into());
    }
    Ok(GrantPath::Host(path))
}

fn display_grant(path: &GrantPath) -> String {
    match path {
        GrantPath::Workspace(sub) if sub.as_os_str().is_empty() => WORKSPACE_VAR.to_owned(),
        GrantPath::Workspace(sub) => format!("{WORKSPACE_VAR}/{}", sub.display()),
        GrantPath::Host(path) => path.display().to_string(),
    }
}

fn is_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_ok(text: &str) -> Profile {
        parse("test", text, Path::new("test.toml")).expect("valid profile")
    }

    fn parse_err(text: &str) -> String {
        parse("test", text, Path::new("test.toml")).expect_err("invalid profile")
    }

    #[test]
    fn a_bare_profile_is_strict() {
        let profile = parse_ok("description = \"nothing\"");
        assert!(profile.files.is_empty());
        assert_eq!(profile.network, NetworkPolicy::None);
        assert!(profile.resolve_env(|_| Some("leak".into())).is_empty());
        assert_eq!(profile.limits.memory_bytes, DEFAULT_MEMORY_BYTES);
        assert_eq!(profile.limits.output_bytes, DEFAULT_OUTPUT_BYTES);
        assert!(profile.limits.optional_set().is_empty());
    }

    #[test]
    fn workspace_grants_resolve_per_call() {
        let profile = parse_ok(
            r#"
            description = "x"
            [files]
            read_only = ["$WORKSPACE", "/usr/share/zoneinfo"]
            read_write = ["$WORKSPACE/out"]
            "#,
        );
        assert!(profile.grants_workspace());
        let grants = profile
            .resolve_files(Some(Path::new("/srv/ws")))
            .expect("resolves");
        assert_eq!(grants[0].host, Path::new("/srv/ws"));
        assert_eq!(grants[0].guest.as_os_str(), "/workspace");
        assert_eq!(grants[0].host.as_os_str(), "/srv/ws");
        assert_eq!(grants[0].access, Access::ReadOnly);
        assert_eq!(grants[1].guest, Path::new("/usr/share/zoneinfo"));
        assert_eq!(grants[2].host, Path::new("/srv/ws/out"));
        assert_eq!(grants[2].guest, Path::new("/workspace/out"));
        assert_eq!(grants[2].access, Access::ReadWrite);
        assert!(profile.resolve_files(None).is_err());
    }

    #[test]
    fn env_sets_win_over_passes_and_nothing_else_leaks() {
        let profile = parse_ok(
            r#"
            description = "x"
            [env]
            pass = ["LANG", "MISSING"]
            set = { LANG = "C.UTF-8", TZ = "UTC" }
            "#,
        );
        let env = profile.resolve_env(|name| (name == "LANG").then(|| "de_DE".into()));
        assert_eq!(
            env,
            vec![
                ("LANG".to_owned(), "C.UTF-8".to_owned()),
                ("TZ".to_owned(), "UTC".to_owned())
            ]
        );
    }

    #[test]
    fn change_rules_parse_with_defaults_and_refuse_nonsense() {
        let profile = parse_ok("description = \"d\"");
        assert_eq!(profile.change_rules, ChangeRules::default());
        let profile = parse_ok(
            r#"
description = "d"
[changes]
max_files = 10
max_bytes = "2 MiB"
umask = "077"
sticky_dirs = true
"#,
        );
        assert_eq!(
            profile.change_rules,
            ChangeRules {
                max_files: 10,
                max_bytes: 2 << 20,
                max_file_bytes: 2 << 20,
                umask: 0o077,
                sticky_dirs: true,
            }
        );
        let capped = parse_ok(
            "description = \"d\"\n[changes]\nmax_bytes = \"1 MiB\"\nmax_file_size = \"1 GiB\"",
        );
        assert_eq!(
            capped.change_rules.max_file_bytes,
            1 << 20,
            "never above max_bytes"
        );
        for (bad, says) in [
            ("max_files = 0", "changes.max_files must be greater than 0"),
            (
                "umask = \"999\"",
                "changes.umask `999` is not an octal mask",
            ),
            ("umask = \"7777\"", "is not an octal mask"),
            ("max_size = 1", "unknown field"),
        ] {
            let err = parse_err(&format!("description = \"d\"\n[changes]\n{bad}"));
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn limits_parse_units_and_refuse_zero() {
        let profile = parse_ok(
            r#"
            description = "x"
            [limits]
            memory = "64 MiB"
            wall_time_ms = 500
            output = 1024
            processes = 16
            "#,
        );
        assert_eq!(profile.limits.memory_bytes, 64 << 20);
        assert_eq!(profile.limits.wall_time, Duration::from_millis(500));
        assert_eq!(profile.limits.output_bytes, 1024);
        assert_eq!(
            profile.limits.optional_set(),
            vec![super::super::LimitKind::Processes]
        );
        assert!(parse_err("description = \"x\"\n[limits]\nmemory = 0").contains("memory"));
    }

    #[test]
    fn mistakes_are_refused_with_a_reason() {
        let cases = [
            ("description = \"x\"\nnetwrok = \"none\"", "unknown field"),
            (
                "description = \"x\"\n[files]\nread_only = [\"relative\"]",
                "absolute",
            ),
            (
                "description = \"x\"\n[files]\nread_only = [\"/usr/../etc\"]",
                "`..`",
            ),
            (
                "description = \"x\"\n[files]\nread_only = [\"/\"]",
                "whole host",
            ),
            (
                "description = \"x\"\n[files]\nread_only = [\"$WORKSPACEX\"]",
                "$WORKSPACE",
            ),
            (
                "description = \"x\"\n[files]\nread_only = [\"$WORKSPACE\"]\nread_write = [\"$WORKSPACE\"]",
                "twice",
            ),
            (
                "description = \"x\"\n[env]\npass = [\"A-B\"]",
                "variable name",
            ),
            ("description = \"x\"\n[limits]\nmemory = \"lots\"", "size"),
            ("[files]", "description"),
        ];
        for (text, expected) in cases {
            let err = parse_err(text);
            assert!(err.contains(expected), "{text:?}: {err}");
        }
    }

    #[test]
    fn load_dir_keeps_good_profiles_and_reports_broken_ones() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("good.toml"), "description = \"ok\"").expect("write");
        std::fs::write(dir.path().join("bad.toml"), "description = 3").expect("write");
        std::fs::write(dir.path().join("notes.txt"), "ignored").expect("write");
        let (profiles, errors) = Profiles::load_dir(dir.path());
        assert_eq!(profiles.names().collect::<Vec<_>>(), vec!["good"]);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].name, "bad");
        assert!(matches!(
            profiles.get("bad"),
            Err(super::ProfileLookupError::Broken(_))
        ));
        assert!(matches!(
            profiles.get("nope"),
            Err(super::ProfileLookupError::Unknown { .. })
        ));
    }
}

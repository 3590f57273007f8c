//! Sandbox profile parsing: the input is a profile, loaded through [`Profiles::load_dir`]
//! from a directory holding only it (the daemon's only entry point). Each line is also parsed
//! as a network pattern (`host:port`), the grammar of `network.allow` and `network.deny`.
//!
//! Beyond "no panic", a loaded profile must never grant what its checks refuse: a workspace
//! grant resolves inside the workspace, a host grant is absolute, never `/`, and never climbs;
//! and every network pattern prints as text that parses back to itself and matches its own
//! host, so what an operator reads in a log is what the daemon enforces.

#![no_main]

use std::net::IpAddr;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use airlock_daemon::testing::{
    GUEST_WORKSPACE, HostMatch, HostPattern, NetworkPolicy, Profile, Profiles,
};
use libfuzzer_sys::fuzz_target;

/// The profile loader caps files at 64 KiB; longer inputs only exercise the cap.
const MAX_INPUT: usize = 64 * 1024;

/// A private directory per fuzzing process (libFuzzer's `-fork`/`-jobs` run several).
fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("airlock-fuzz-profile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("the temp dir is writable");
        dir
    })
}

fn climbs(path: &Path) -> bool {
    path.components().any(|c| matches!(c, Component::ParentDir))
}

fn check_profile(profile: &Profile) {
    let workspace = Path::new("/srv/ws");
    let grants = profile
        .resolve_files(Some(workspace))
        .expect("a workspace is given, so every grant resolves");
    for grant in &grants {
        assert!(!climbs(&grant.host) && !climbs(&grant.guest), "{grant:?}");
        assert!(
            grant.host.is_absolute() && grant.guest.is_absolute(),
            "{grant:?}"
        );
        assert_ne!(grant.host, Path::new("/"), "{grant:?}");
        if grant.guest.starts_with(GUEST_WORKSPACE) {
            assert!(grant.host.starts_with(workspace), "{grant:?}");
        }
    }
    if let NetworkPolicy::AllowList { allow, deny, .. } = &profile.network {
        for pattern in allow.iter().chain(deny) {
            check_pattern(pattern);
        }
    }
}

fn check_pattern(pattern: &HostPattern) {
    let text = pattern.to_string();
    let again: HostPattern = text.parse().unwrap_or_else(|err| {
        panic!("{pattern:?} prints as `{text}`, which does not parse: {err}")
    });
    assert_eq!(&again, pattern, "`{text}` does not parse back to itself");
    match &pattern.host {
        HostMatch::Name(name) => {
            assert!(pattern.matches(name, pattern.port), "{text} vs {name}");
        }
        HostMatch::Subdomains(parent) => {
            assert!(
                pattern.matches(&format!("a.{parent}"), pattern.port),
                "{text}"
            );
            assert!(
                !pattern.matches(parent, pattern.port),
                "{text} matches its parent"
            );
        }
        HostMatch::Ip(ip @ IpAddr::V4(_)) => {
            assert!(pattern.matches(&ip.to_string(), pattern.port), "{text}");
        }
        HostMatch::Ip(ip @ IpAddr::V6(_)) => {
            assert!(pattern.matches(&format!("[{ip}]"), pattern.port), "{text}");
        }
    }
    if let Some(other) = pattern.port.checked_add(1) {
        let host = text.rsplit_once(':').map_or("", |(host, _)| host);
        assert!(!pattern.matches(host, other), "{text} matches another port");
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() > MAX_INPUT {
        return;
    }
    let dir = scratch();
    std::fs::write(dir.join("fuzz.toml"), data).expect("the temp dir is writable");
    let (profiles, errors) = Profiles::load_dir(dir);
    match profiles.get("fuzz") {
        Ok(profile) => {
            assert!(errors.is_empty(), "{errors:?}");
            check_profile(&profile);
        }
        Err(_) => assert_eq!(errors.len(), 1, "{errors:?}"),
    }
    if let Ok(text) = std::str::from_utf8(data) {
        for line in text.lines() {
            if let Ok(pattern) = line.parse::<HostPattern>() {
                check_pattern(&pattern);
            }
        }
    }
});

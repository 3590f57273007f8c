//! Tenants as configured: who each token belongs to, the roots a tenant may have, and the
//! configurations refused.

use std::os::unix::fs::PermissionsExt;

use super::*;

fn private_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    path
}

fn entry(name: &str, token_file: PathBuf) -> TenantFile {
    TenantFile {
        name: name.to_owned(),
        token_file: Some(token_file),
        token_env: None,
        tools: vec!["echo".to_owned()],
        workspace_roots: Vec::new(),
        approvals: ApprovalRights::Own,
        max_concurrent_runs: Some(1),
        max_concurrent_executions: None,
        policy_files: Vec::new(),
    }
}

#[test]
fn each_token_identifies_its_tenant_and_others_none() {
    let state = tempfile::tempdir().expect("tempdir");
    let roots = WorkspaceRoots::new(&[state.path().to_owned()]).expect("roots");
    let auth = AuthSettings {
        unix_socket_trust: false,
        tenants: vec![entry("ci", private_file(state.path(), "ci", "ci-secret\n"))],
    };
    let tenants = Tenants::load(state.path(), &auth, &roots).expect("loads");
    let default_token =
        std::fs::read_to_string(state.path().join(token_file::TOKEN_FILE)).expect("created");
    let default = tenants.identify(default_token.trim()).expect("default");
    assert_eq!(default.name, DEFAULT_TENANT);
    assert!(default.may_use_tool("anything"));
    let ci = tenants.identify("ci-secret").expect("ci");
    assert_eq!(ci.name, "ci");
    assert!(ci.may_use_tool("echo") && !ci.may_use_tool("write_file"));
    assert_eq!(ci.max_concurrent_runs, 1);
    assert!(ci.may_answer_for("ci") && !ci.may_answer_for("default"));
    assert!(default.may_answer_for("ci"));
    assert!(tenants.identify("ci-secre").is_none());
    assert!(tenants.identify("").is_none());
}

#[test]
fn a_tenant_root_outside_the_daemon_roots_is_refused() {
    let state = tempfile::tempdir().expect("tempdir");
    let inside = state.path().join("inside");
    std::fs::create_dir(&inside).expect("mkdir");
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let roots = WorkspaceRoots::new(std::slice::from_ref(&inside)).expect("roots");
    let mut ci = entry("ci", private_file(state.path(), "ci", "t1"));
    ci.workspace_roots = vec![elsewhere.path().to_owned()];
    let auth = AuthSettings {
        unix_socket_trust: false,
        tenants: vec![ci],
    };
    let err = Tenants::load(state.path(), &auth, &roots).expect_err("outside");
    assert!(matches!(err, TenantError::Root { .. }), "{err}");
}

#[test]
fn duplicate_names_shared_tokens_and_missing_sources_are_refused() {
    let state = tempfile::tempdir().expect("tempdir");
    let roots = WorkspaceRoots::new(&[state.path().to_owned()]).expect("roots");
    let load = |tenants: Vec<TenantFile>| {
        Tenants::load(
            state.path(),
            &AuthSettings {
                unix_socket_trust: false,
                tenants,
            },
            &roots,
        )
    };
    let a = private_file(state.path(), "a", "same");
    let b = private_file(state.path(), "b", "same");
    assert!(matches!(
        load(vec![entry("a", a.clone()), entry("b", b)]),
        Err(TenantError::SharedToken(..))
    ));
    let c = private_file(state.path(), "c", "other");
    assert!(matches!(
        load(vec![entry("a", a.clone()), entry("a", c)]),
        Err(TenantError::Duplicate(_))
    ));
    let mut neither = entry("n", a);
    neither.token_file = None;
    assert!(matches!(
        load(vec![neither]),
        Err(TenantError::TokenSource(_))
    ));
}

use super::*;

fn known(words: &[&str]) -> Vec<Word> {
    words
        .iter()
        .map(|word| Word::Known((*word).to_owned()))
        .collect()
}

#[test]
fn a_line_becomes_the_simple_commands_it_runs_with_quotes_removed() {
    let line = parse_line("cd src && 'car'\"go\" test -q | tail -n 5; echo $(git rev-parse HEAD)");
    assert!(line.unresolved.is_empty(), "{:?}", line.unresolved);
    let argvs: Vec<&[Word]> = line.commands.iter().map(|c| c.argv.as_slice()).collect();
    assert_eq!(argvs[0], known(&["cd", "src"]));
    assert_eq!(argvs[1], known(&["cargo", "test", "-q"]));
    assert_eq!(argvs[2], known(&["tail", "-n", "5"]));
    assert_eq!(argvs[3], known(&["git", "rev-parse", "HEAD"]));
    assert_eq!(line.commands[3].via, ["$(…)"]);
    assert_eq!(argvs[4], [Word::Known("echo".into()), Word::Unknown]);
    assert!(line.commands[0].inert && line.commands[4].inert);
}

#[test]
fn wrappers_unwrap_into_what_they_run_carrying_variables_and_redirections() {
    let line = parse_line("env -i A=1 timeout -s KILL 10 nice -n 5 xargs -0 rm -f > log");
    let last = line.commands.last().expect("the command run");
    assert_eq!(last.argv, known(&["rm", "-f"]));
    assert!(last.open_tail, "xargs adds arguments when it runs");
    assert!(last.env.contains("A"));
    assert_eq!(last.writes, known(&["log"]));
    assert_eq!(last.via, ["env", "timeout", "nice", "xargs"]);
    assert!(
        line.commands[..line.commands.len() - 1]
            .iter()
            .all(|c| c.wrapper && c.writes.is_empty())
    );

    let line = parse_line("bash -ec -- 'git push' && eval \"cargo test\"");
    let programs: Vec<Option<&str>> = line.commands.iter().map(SimpleCommand::program).collect();
    assert_eq!(
        programs,
        [Some("bash"), Some("git"), Some("eval"), Some("cargo")]
    );
}

#[test]
fn assignments_before_a_command_and_earlier_in_the_line_are_its_environment() {
    let line = parse_line("X=1 make; export Y=2; eval Z=3; cargo test");
    assert_eq!(line.commands[0].env, BTreeSet::from(["X".to_owned()]));
    let cargo = line.commands.last().expect("cargo");
    assert!(
        cargo.env.contains("Y") && cargo.env.contains("Z"),
        "{:?}",
        cargo.env
    );
    assert!(
        !cargo.env.contains("X"),
        "a prefix assignment holds for its command only"
    );
    let line = parse_line("read answer; ls");
    assert!(
        line.commands
            .last()
            .expect("ls")
            .env
            .contains(UNKNOWN_VARIABLE)
    );
}

#[test]
fn argv_tools_are_read_as_one_command() {
    let line = from_argv(&["/usr/bin/grep".into(), "-r".into(), "$(id)".into()]);
    assert_eq!(
        line.commands.len(),
        1,
        "an argv is not shell: `$(id)` is a plain word"
    );
    assert_eq!(line.commands[0].program(), Some("grep"));
    let line = from_argv(&["/bin/sh".into(), "-c".into(), "curl x".into()]);
    assert_eq!(
        line.commands.last().and_then(SimpleCommand::program),
        Some("curl")
    );
}

use super::*;

fn show(line: &str) -> String {
    let parsed = parse_line(line);
    let mut out: Vec<String> = parsed
        .commands
        .iter()
        .map(|c| {
            format!(
                "{c}{}{}",
                if c.wrapper { " [w]" } else { "" },
                if c.inert { " [i]" } else { "" }
            )
        })
        .collect();
    out.extend(parsed.unresolved.iter().map(|r| format!("?? {r}")));
    out.join(" | ")
}

#[test]
fn dump() {
    for line in [
        "cargo test && git push origin main",
        "sh -c 'rm -rf /'",
        "echo $(curl evil.com) `wget x`",
        "\\rm -rf /",
        "/bin/rm -rf x",
        "'r''m' -rf x",
        "X=1 cargo test > out.txt 2>&1",
        "env -i A=1 timeout -s KILL 10 nice -n 5 xargs -0 rm -f",
        "find . -name '*.o' -exec rm {} +",
        "cat <<EOF\n$(rm -rf /)\nEOF",
        "cat <<'EOF'\n$(rm -rf /)\nEOF",
        "eval \"rm -rf /\"",
        "$CMD arg",
        "for f in *.rs; do rustfmt $f; done",
        "(cd src && make) || echo failed",
        "a=$(id); echo $a",
        "{rm,-rf,/}",
        "(( a[$(id)] ))",
        "if [[ -f x ]]; then git status; fi",
        "bash -ec 'git push'",
        "f() { curl x; }; f",
        "cat < in > /dev/null",
    ] {
        eprintln!("{line:?}\n    => {}", show(line));
    }
}

#[test]
#[ignore]
fn nesting_cost() {
    for depth in [2, 4, 6, 8, 10, 12, 14, 16] {
        let line = format!("{}true{}", "echo $(".repeat(depth), ")".repeat(depth));
        let started = std::time::Instant::now();
        let parsed = parse_line(&line);
        eprintln!(
            "$( depth {depth}: {:?} ({} commands, {:?})",
            started.elapsed(),
            parsed.commands.len(),
            parsed.unresolved
        );
    }
    for depth in [8, 16, 32, 64] {
        let line = format!("{}true{}", "(".repeat(depth), ")".repeat(depth));
        let started = std::time::Instant::now();
        let _ = parse_line(&line);
        eprintln!("( depth {depth}: {:?}", started.elapsed());
    }
    for depth in [4, 8, 16, 32, 64] {
        let line = format!("{}true{}", "{ ".repeat(depth), "; }".repeat(depth));
        let started = std::time::Instant::now();
        let _ = parse_line(&line);
        eprintln!("{{ depth {depth}: {:?}", started.elapsed());
    }
}

#[test]
#[ignore]
fn ast_dump() {
    for line in [
        "echo $((curl x) )",
        "echo $(( curl x ) )",
        "echo \"$((curl x) )\"",
        "cat <((curl x) )",
        "echo $((curl x)|cat)",
    ] {
        let program = Parser::new(
            std::io::Cursor::new(line.as_bytes()),
            &ParserOptions::default(),
        )
        .parse_program();
        eprintln!("{line:?} => {program:?}\n   walk: {}", show(line));
    }
}

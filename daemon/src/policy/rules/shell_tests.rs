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

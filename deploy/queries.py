#!/usr/bin/env python3
"""The PromQL of deploy/: read out of the Grafana dashboard and the alert rules themselves
(never a second copy), and checked — for deploy/test.sh. Standard library only.

    queries.py list DASHBOARD RULES
        every query, as the checks see it
    queries.py syntax DASHBOARD RULES OUT
        writes OUT, a rule file with each dashboard query as a recording rule, for
        `promtool check rules` to parse (the dashboard's variables substituted); checks the
        dashboard's structure (datasource, variables, panels, targets)
    queries.py coverage EXPOSITION SPEC...
        what a workload made, from a daemon's exposition: each SPEC is
        `metric:label=v1,v2` (a series with each value), `metric:label=` (series with the
        label, any value) or `metric:>0` (a sample above 0); a SPEC starting with `?` is only
        reported. Exits 1 naming what is missing
    queries.py scraped PROMETHEUS_URL EPOCH
        waits (up to 20 s) until Prometheus has scraped job "airlock" after EPOCH (seconds)
    queries.py live PROMETHEUS_URL DASHBOARD RULES EXPOSITION
        against a Prometheus scraping a daemon (job "airlock"; EXPOSITION is what the
        daemon's endpoint served): every rule loaded and evaluated without error; every
        panel query returns series, one at least with a number (not NaN: a quantile or a
        ratio over counters that did not grow); every alert expression evaluates; and every series
        selector in either (`metric{matchers}`) matches series, so no query passes on an
        `or` branch or an absent metric. Exits 1 naming each query that failed.

The rule file reader is minimal (the file is ours): a rule starts with `- alert:` or
`- record:`, its `expr:` is on one line or a `|` block.
"""

import json
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

# What the dashboard's variables become in a query here: every tenant and daemon, and the
# intervals Grafana would pick for a short range.
SUBSTITUTIONS = {
    "__rate_interval": "1m",
    "__interval": "15s",
    "__range": "1h",
}
ALL = ".*"


# --- reading the dashboard and the rules ---------------------------------------------------


def dashboard_panels(dashboard):
    """Every panel, rows' collapsed panels included, in order."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def dashboard_queries(path):
    """(label, expression as written) for every target of every panel."""
    dashboard = json.loads(Path(path).read_text())
    queries = []
    for panel in dashboard_panels(dashboard):
        for target in panel.get("targets", []):
            label = f'panel "{panel.get("title")}" [{target.get("refId")}]'
            queries.append((label, target.get("expr", "")))
    return queries


def query_variables(dashboard):
    return {v["name"] for v in dashboard["templating"]["list"] if v.get("type") == "query"}


def substitute(expr, variables):
    """The query Grafana would send with every variable at All."""

    def value(match):
        name = match.group(1) or match.group(2)
        if name in SUBSTITUTIONS:
            return SUBSTITUTIONS[name]
        if name in variables:
            return ALL
        raise ValueError(f"unknown variable ${name} in {expr!r}")

    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", value, expr)


def rules(path):
    """[{kind, name, expr, for}] from a rule file in the format described above."""
    found = []
    lines = Path(path).read_text().splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        start = re.match(r"^\s*- (alert|record):\s*(\S+)\s*$", line)
        if start:
            found.append({"kind": start.group(1), "name": start.group(2), "expr": None,
                          "for": None})
            continue
        key = re.match(r"^(\s*)(expr|for):\s*(.*?)\s*$", line)
        if not key or not found:
            continue
        indent, field, value = len(key.group(1)), key.group(2), key.group(3)
        if field == "expr" and value in ("|", "|-", "|+", ">", ">-"):
            block = []
            while index < len(lines) and (not lines[index].strip()
                                          or len(lines[index]) - len(lines[index].lstrip()) > indent):
                block.append(lines[index])
                index += 1
            margin = min(len(b) - len(b.lstrip()) for b in block if b.strip())
            value = "\n".join(b[margin:] for b in block).strip()
        elif len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
            if value and key.group(0).strip().startswith(f'{field}: "'):
                value = value.replace('\\"', '"').replace("\\\\", "\\")
            else:
                value = value.replace("''", "'")
        found[-1][field] = value
    for rule in found:
        if not rule["expr"]:
            raise ValueError(f"{path}: rule {rule['name']} has no expr this reader understands")
    return found


# --- series selectors ------------------------------------------------------------------------

AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
                "count_values", "bottomk", "topk", "quantile"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and",
            "or", "unless", "offset", "atan2", "inf", "nan"}
LABEL_LISTS = {"by", "without", "on", "ignoring", "group_left", "group_right"}


def skip_string(text, at):
    quote = text[at]
    at += 1
    while at < len(text) and text[at] != quote:
        at += 2 if text[at] == "\\" and quote != "`" else 1
    return at + 1


def skip_group(text, at, opening, closing):
    """The index after the bracket group starting at `at`, strings respected."""
    depth = 0
    while at < len(text):
        char = text[at]
        if char in "\"'`":
            at = skip_string(text, at)
            continue
        if char == opening:
            depth += 1
        elif char == closing:
            depth -= 1
            if depth == 0:
                return at + 1
        at += 1
    raise ValueError(f"unbalanced {opening}{closing} in {text!r}")


def selectors(expr):
    """Every instant vector selector of a PromQL expression, as text (`name{matchers}`)."""
    found = []
    at = 0
    while at < len(expr):
        char = expr[at]
        if char in "\"'`":
            at = skip_string(expr, at)
        elif char == "[":
            at = skip_group(expr, at, "[", "]")
        elif char == "{":
            end = skip_group(expr, at, "{", "}")
            found.append(expr[at:end])
            at = end
        elif char.isdigit() or (char == "." and expr[at + 1:at + 2].isdigit()):
            # A number or a duration (5m, 1e3, 0x1f).
            while at < len(expr) and (expr[at].isalnum() or expr[at] in "._"
                                      or (expr[at] in "+-" and expr[at - 1] in "eE")):
                at += 1
        elif char.isalpha() or char in "_:":
            end = at
            while end < len(expr) and (expr[end].isalnum() or expr[end] in "_:"):
                end += 1
            word = expr[at:end]
            after = end
            while after < len(expr) and expr[after].isspace():
                after += 1
            following = expr[after:after + 1]
            if word.lower() in LABEL_LISTS:
                at = skip_group(expr, after, "(", ")") if following == "(" else after
            elif word.lower() in KEYWORDS or word in AGGREGATIONS or following == "(":
                at = end  # a keyword, an aggregation or a function: read on inside it
            elif following == "{":
                close = skip_group(expr, after, "{", "}")
                found.append(word + expr[after:close])
                at = close
            else:
                found.append(word)
                at = end
        else:
            at += 1
    return found


def metric_name(selector):
    match = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", selector)
    if match:
        return match.group(0)
    named = re.search(r'__name__\s*=\s*"([^"]+)"', selector)
    return named.group(1) if named else None


# --- syntax ----------------------------------------------------------------------------------


def check_dashboard(path):
    """Problems with the dashboard's structure, as messages."""
    dashboard = json.loads(Path(path).read_text())
    problems = []
    variables = {v.get("name"): v for v in dashboard.get("templating", {}).get("list", [])}
    datasource = variables.get("datasource")
    if not datasource or datasource.get("type") != "datasource" or datasource.get("query") != "prometheus":
        problems.append("no `datasource` variable of type datasource (prometheus)")
    tenant = variables.get("tenant", {})
    tenant_query = tenant.get("query")
    if isinstance(tenant_query, dict):
        tenant_query = tenant_query.get("query")
    if not (tenant_query or "").startswith("label_values(airlock_tool_calls_total"):
        problems.append("no `tenant` variable from label_values(airlock_tool_calls_total, tenant)")
    if not isinstance(dashboard.get("schemaVersion"), int) or dashboard["schemaVersion"] < 36:
        problems.append(f"schemaVersion {dashboard.get('schemaVersion')!r}")
    ids = set()
    for panel in dashboard_panels(dashboard):
        title = panel.get("title")
        if panel.get("id") in ids:
            problems.append(f"panel {title!r}: id {panel.get('id')} used twice")
        ids.add(panel.get("id"))
        if "gridPos" not in panel:
            problems.append(f"panel {title!r}: no gridPos")
        if panel.get("type") == "row":
            continue
        want = {"type": "prometheus", "uid": "${datasource}"}
        if panel.get("datasource") != want:
            problems.append(f"panel {title!r}: datasource is not ${{datasource}}")
        if not panel.get("targets"):
            problems.append(f"panel {title!r}: no targets")
        refs = [t.get("refId") for t in panel.get("targets", [])]
        if len(set(refs)) != len(refs):
            problems.append(f"panel {title!r}: refIds repeat")
        for target in panel.get("targets", []):
            if not target.get("expr", "").strip():
                problems.append(f"panel {title!r} [{target.get('refId')}]: no expr")
            if target.get("datasource") != want:
                problems.append(f"panel {title!r} [{target.get('refId')}]: datasource is not ${{datasource}}")
    return problems


def syntax(dashboard_path, rules_path, out):
    problems = check_dashboard(dashboard_path)
    variables = query_variables(json.loads(Path(dashboard_path).read_text()))
    lines = ["# Written by deploy/queries.py: each dashboard query, for promtool to parse.",
             "groups:", "  - name: dashboard", "    rules:"]
    queries = dashboard_queries(dashboard_path)
    for number, (label, expr) in enumerate(queries):
        try:
            expr = substitute(expr, variables)
        except ValueError as error:
            problems.append(f"{label}: {error}")
            continue
        lines.append(f"      # {label}")
        lines.append(f"      - record: dashboard:query:{number}")
        lines.append(f"        expr: {json.dumps(expr)}")
    Path(out).write_text("\n".join(lines) + "\n")
    alerts = rules(rules_path)
    for rule in alerts:
        if not selectors(rule["expr"]):
            problems.append(f"rule {rule['name']}: no series selector found in {rule['expr']!r}")
    for problem in problems:
        print(f"FAIL {problem}")
    print(f"{len(queries)} dashboard queries written to {out}; "
          f"{len(alerts)} rules read from {rules_path}")
    return 1 if problems else 0


# --- live ------------------------------------------------------------------------------------


class Prometheus:
    def __init__(self, url):
        self.url = url.rstrip("/")

    def get(self, path, **params):
        url = f"{self.url}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                body = json.load(response)
        except urllib.error.HTTPError as error:
            body = json.load(error)
        if body.get("status") != "success":
            raise RuntimeError(f"{body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr):
        """The result of an instant query: a list of series (a scalar as one)."""
        data = self.get("/api/v1/query", query=expr)
        if data["resultType"] in ("scalar", "string"):
            return [data["result"]]
        return data["result"]


def exposed_names(exposition):
    """Sample names in a Prometheus text exposition, and its family names from # TYPE."""
    samples, families = set(), set()
    for line in Path(exposition).read_text().splitlines():
        if line.startswith("# TYPE "):
            families.add(line.split()[2])
        elif line and not line.startswith("#"):
            samples.add(re.split(r"[{\s]", line, maxsplit=1)[0])
    return samples, families


def exposition_samples(exposition):
    """(name, {label: value}, value) for every sample of a Prometheus text exposition."""
    label = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?')
    samples = []
    for line in Path(exposition).read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*?)\})?\s+(\S+)", line)
        if not match:
            continue
        labels = dict(label.findall(match.group(3) or ""))
        samples.append((match.group(1), labels, float(match.group(4))))
    return samples


def coverage(exposition, specs):
    samples = exposition_samples(exposition)
    missing = []
    for spec in specs:
        required = not spec.startswith("?")
        metric, _, want = spec.lstrip("?").partition(":")
        of_metric = [(labels, value) for name, labels, value in samples if name == metric]
        if want.startswith(">"):
            floor = float(want[1:])
            values = [value for _, value in of_metric]
            ok = any(value > floor for value in values)
            shown = ", ".join(f"{value:g}" for value in values) or "no sample"
            print(f"  {'ok  ' if ok else 'MISS' if required else 'none'} {metric} {want}: {shown}")
            if not ok and required:
                missing.append(spec)
            continue
        name, _, wanted = want.partition("=")
        present = sorted({labels[name] for labels, _ in of_metric if name in labels})
        absent = [value for value in wanted.split(",") if value and value not in present]
        ok = bool(present) and not absent
        detail = f"{name} = {', '.join(present) or 'none'}"
        if absent:
            detail += f"; missing: {', '.join(absent)}"
        print(f"  {'ok  ' if ok else 'MISS' if required else 'none'} {metric}: {detail}")
        if not ok and required:
            missing.append(spec)
    if missing:
        print(f"the workload did not make: {', '.join(missing)}")
        return 1
    return 0


def scraped(url, epoch):
    """Waits until job "airlock" has been scraped after `epoch`."""
    prometheus = Prometheus(url)
    deadline = time.monotonic() + 20
    while True:
        try:
            result = prometheus.query('timestamp(up{job="airlock"} == 1)')
            if result and min(float(s["value"][1]) for s in result) > float(epoch):
                print(f"scraped at {min(float(s['value'][1]) for s in result):.3f}")
                return 0
        except (OSError, RuntimeError):
            pass
        if time.monotonic() > deadline:
            print(f'queries.py: Prometheus did not scrape job "airlock" after {epoch}')
            return 1
        time.sleep(0.2)


def finite(series):
    value = series["value"][1] if isinstance(series, dict) else series[1]
    return value not in ("NaN", "+Inf", "-Inf")


def wait_for_scrapes(prometheus, deadline):
    """Until the airlock job is up and scraped at least three times over the last minute."""
    while True:
        try:
            up = prometheus.query('up{job="airlock"}')
            scrapes = prometheus.query('count_over_time(up{job="airlock"}[1m])')
            if up and all(s["value"][1] == "1" for s in up) and scrapes and \
                    min(float(s["value"][1]) for s in scrapes) >= 3:
                return
        except (OSError, RuntimeError):
            pass
        if time.monotonic() > deadline:
            raise SystemExit('queries.py: Prometheus has not scraped job "airlock" three times '
                             "(see its targets page and log)")
        time.sleep(0.5)


def wait_for_rules(prometheus, expected, deadline):
    """The rules Prometheus loaded, once each has been evaluated; problems as messages."""
    while True:
        groups = prometheus.get("/api/v1/rules")["groups"]
        loaded = {rule["name"]: rule for group in groups for rule in group["rules"]}
        evaluated = all(rule.get("lastEvaluation", "").startswith("0001") is False
                        and rule.get("health") != "unknown" for rule in loaded.values())
        if (evaluated and set(loaded) >= set(expected)) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    problems = []
    for name in expected:
        rule = loaded.get(name)
        if rule is None:
            problems.append(f"rule {name}: not loaded by Prometheus")
        elif rule.get("health") != "ok":
            problems.append(f"rule {name}: health {rule.get('health')}: {rule.get('lastError')}")
    for name in set(loaded) - set(expected):
        problems.append(f"rule {name}: loaded by Prometheus but not read by queries.py's reader")
    return problems, loaded


def live(url, dashboard_path, rules_path, exposition):
    prometheus = Prometheus(url)
    deadline = time.monotonic() + 30
    wait_for_scrapes(prometheus, deadline)
    samples, families = exposed_names(exposition)
    variables = query_variables(json.loads(Path(dashboard_path).read_text()))
    failures = []
    used = set()
    checked_selectors = {}

    def check_selectors(label, expr):
        """Each selector of expr must match series; returns how many there were."""
        found = selectors(expr)
        if not found:
            failures.append(f"{label}: no series selector found in {expr!r}")
        for selector in found:
            name = metric_name(selector)
            used.add(name)
            if selector not in checked_selectors:
                try:
                    checked_selectors[selector] = len(prometheus.query(f"count({selector})"))
                except RuntimeError as error:
                    failures.append(f"{label}: selector {selector}: {error}")
                    checked_selectors[selector] = 0
                    continue
                if name != "up" and name not in samples:
                    failures.append(f"{label}: {name} is not in the daemon's exposition")
            if not checked_selectors[selector]:
                failures.append(f"{label}: selector {selector} matches no series")
        return len(found)

    print("== rules loaded and evaluated by Prometheus")
    alert_rules = rules(rules_path)
    problems, loaded = wait_for_rules(prometheus, [r["name"] for r in alert_rules], deadline)
    failures += problems
    for rule in alert_rules:
        state = loaded.get(rule["name"], {})
        print(f"  {'ok  ' if state.get('health') == 'ok' else 'FAIL'} {rule['kind']} "
              f"{rule['name']}: health {state.get('health')}, state {state.get('state', '-')}")

    print("== dashboard queries (variables at All, $__rate_interval = 1m): each returns series")
    for label, expr in dashboard_queries(dashboard_path):
        expr = substitute(expr, variables)
        try:
            result = prometheus.query(expr)
        except RuntimeError as error:
            failures.append(f"{label}: {error}: {expr}")
            print(f"  FAIL {label}: {error}")
            continue
        before = len(failures)
        count = check_selectors(label, expr)
        numbers = sum(1 for series in result if finite(series))
        if not result:
            failures.append(f"{label}: no series: {expr}")
        elif not numbers:
            failures.append(f"{label}: every series is NaN or infinite: {expr}")
        ok = len(failures) == before
        print(f"  {'ok  ' if ok else 'FAIL'} {label}: {len(result)} series "
              f"({numbers} with a number), {count} selectors")

    print("== alert expressions: each evaluates, and each selector in it matches series")
    for rule in alert_rules:
        label = f"{rule['kind']} {rule['name']}"
        try:
            result = prometheus.query(rule["expr"])
        except RuntimeError as error:
            failures.append(f"{label}: {error}")
            print(f"  FAIL {label}: {error}")
            continue
        before = len(failures)
        count = check_selectors(label, rule["expr"])
        condition = f"condition holds for {len(result)} series now" if result else \
            "condition does not hold now"
        print(f"  {'ok  ' if len(failures) == before else 'FAIL'} {label}: {condition}; "
              f"{count} selectors")

    print("== series selectors checked")
    for selector, count in sorted(checked_selectors.items()):
        print(f"  {'ok  ' if count else 'FAIL'} {selector}")
    unused = sorted(family for family in families
                    if not any(name == family or name.startswith(family + "_") for name in used))
    if unused:
        print("== exposed by the daemon but read by no panel or alert: " + ", ".join(unused))

    if failures:
        print(f"\n{len(failures)} failures:")
        for failure in failures:
            print(f"  {failure}")
        return 1
    print("\nevery panel query returned series with numbers; every alert rule evaluated; "
          "every selector matched series")
    return 0


def main(argv):
    if len(argv) >= 1 and argv[0] == "list" and len(argv) == 3:
        variables = query_variables(json.loads(Path(argv[1]).read_text()))
        for label, expr in dashboard_queries(argv[1]):
            print(f"{label}: {substitute(expr, variables)}\n    selectors: {selectors(expr)}")
        for rule in rules(argv[2]):
            print(f"{rule['kind']} {rule['name']} (for {rule['for']}): {rule['expr']}\n"
                  f"    selectors: {selectors(rule['expr'])}")
        return 0
    if len(argv) == 4 and argv[0] == "syntax":
        return syntax(*argv[1:])
    if len(argv) >= 3 and argv[0] == "coverage":
        return coverage(argv[1], argv[2:])
    if len(argv) == 3 and argv[0] == "scraped":
        return scraped(argv[1], argv[2])
    if len(argv) == 5 and argv[0] == "live":
        return live(*argv[1:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""check_outputs.py FILE...: checks what oomguard wrote with the readers that define it.

Each JSON file against the schema its "schema" field names (harness/schemas/, by the
check-jsonschema CLI); each JUnit XML file with junitparser: it parses, and every suite's
tests / failures / errors counts agree with its test cases, each case named. Exit 1 on any
finding, 2 on bad use. Run with the checkers' Python ($OOMGUARD_TOOLS_BIN/python, made by
ci/install-tools.sh).
"""
import json
import pathlib
import subprocess
import sys

SCHEMAS = pathlib.Path(__file__).resolve().parents[2] / "harness" / "schemas"
KNOWN = {"oomguard.report/1": "report", "oomguard.repeat/1": "repeat",
         "oomguard.replay/1": "replay", "oomguard.budgets/1": "budgets",
         "oomguard.compare/1": "compare"}


def check_json(paths):
    """Groups the files by schema and runs check-jsonschema once per schema."""
    problems, groups = [], {}
    for path in paths:
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            problems.append(f"{path}: not JSON ({e})")
            continue
        name = doc.get("schema") if isinstance(doc, dict) else None
        if name not in KNOWN:
            problems.append(f"{path}: \"schema\" is {name!r}, none of {', '.join(KNOWN)}")
            continue
        groups.setdefault(KNOWN[name], []).append(str(path))
    tool = pathlib.Path(sys.executable).parent / "check-jsonschema"
    for kind, files in sorted(groups.items()):
        schema = SCHEMAS / f"{kind}.schema.json"
        done = subprocess.run([str(tool), "--schemafile", str(schema), *files],
                              capture_output=True, text=True)
        if done.returncode != 0:
            problems.append(f"{kind}.schema.json: {done.stdout}{done.stderr}".strip())
        else:
            print(f"ok: {len(files)} file(s) match {kind}.schema.json: {' '.join(files)}")
    return problems


def check_junit(path):
    from junitparser import Error, Failure, JUnitXml, Skipped
    try:
        xml = JUnitXml.fromfile(str(path))
    except Exception as e:  # junitparser raises lxml's or ElementTree's own errors
        return [f"{path}: not JUnit XML ({e})"]
    problems, cases = [], 0
    suites = [xml] if xml._tag == "testsuite" else list(xml)
    for suite in suites:
        results = [list(case.result) for case in suite]
        counted = {"tests": len(results),
                   "failures": sum(any(isinstance(r, Failure) for r in rs) for rs in results),
                   "errors": sum(any(isinstance(r, Error) for r in rs) for rs in results),
                   "skipped": sum(any(isinstance(r, Skipped) for r in rs) for rs in results)}
        for attr, n in counted.items():
            stated = getattr(suite, attr)
            if (stated or 0) != n:
                problems.append(f"{path}: suite {suite.name}: {attr}={stated}, but {n} test cases")
        problems += [f"{path}: suite {suite.name}: a test case without a name"
                     for case in suite if not case.name]
        cases += len(results)
    if cases == 0:
        problems.append(f"{path}: no test case")
    if not problems:
        print(f"ok: {path}: JUnit, {len(suites)} suite(s), {cases} test case(s)")
    return problems


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    paths = [pathlib.Path(a) for a in argv[1:]]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"FAIL: not written: {' '.join(missing)}")
        return 1
    problems = check_json([p for p in paths if p.suffix == ".json"])
    for p in paths:
        if p.suffix == ".xml":
            problems += check_junit(p)
    for line in problems:
        print(f"FAIL: {line}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

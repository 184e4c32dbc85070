#!/usr/bin/env python3
"""Prints, last in a failed test run's output, one short block per failed test: its name,
where it panicked and the assertion's message, then the first of the distinct warnings
and errors its daemons logged (the `problem` lines tests/common/node.rs prints), from
cargo-nextest's JUnit report (.config/nextest.toml's `[profile.ci.junit]`).

    python3 scripts/test-env/failures.py target/nextest/ci/junit.xml

CI keeps the head and the tail of a failing run's output; the tests' own output, with the
daemon's log, fills the middle, so without this block the tail names one failure at most.
"""
import sys
import xml.etree.ElementTree as ET

# Lines of the message kept after the `panicked at` line, and characters of each.
MESSAGE_LINES = 3
LINE_CHARS = 300
# The daemons' distinct warnings and errors kept.
PROBLEM_LINES = 8


def panic_lines(text):
    """The first `panicked at` line and the message lines after it."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "panicked at" in line:
            kept = [line.strip()]
            for message in lines[i + 1 : i + 1 + MESSAGE_LINES]:
                if message.startswith(("note: run with", "stack backtrace:", "---")):
                    break
                kept.append(message.strip())
            return [k[:LINE_CHARS] for k in kept]
    return []


def problem_lines(text):
    """The first distinct warnings and errors the daemons logged."""
    kept = [line.strip() for line in text.splitlines() if line.startswith("problem (")]
    return [k[:LINE_CHARS] for k in kept[:PROBLEM_LINES]]


def main(path):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"no test report at {path}: {e}")
        return
    failed = []
    for case in root.iter("testcase"):
        failures = case.findall("failure") + case.findall("error")
        if not failures:
            continue
        name = f"{case.get('classname', '')} {case.get('name', '')}".strip()
        text = "\n".join(
            (e.text or "") for tag in ("system-err", "system-out") for e in case.iter(tag)
        )
        lines = panic_lines(text) or [failures[0].get("message", "failed")]
        lines += problem_lines(text)
        failed.append((name, lines))
    if not failed:
        return
    print(f"== {len(failed)} failed test(s), where each failed:")
    for name, lines in failed:
        print(f"- {name}")
        for line in lines:
            print(f"    {line}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "target/nextest/ci/junit.xml")

#!/usr/bin/python3
"""Runs every example of README.md and docs/*.md and checks that its output still matches.

An example is a fenced block opened with ```console, or a ```json block that is a whole file
(an object with a "kind", nothing elided by "…" or a "..." key), which `strata validate` must
accept; other ```json blocks are excerpts and are not run. In it, a line starting with "$ " is a
command (a line ending in a backslash continues on the next), and the lines after it, up to the
next command, are what it prints (standard output, then standard error). In the printed lines,
"…" matches any text within a line, and a line that is only "…" (or "...") matches any number
of lines (timings, long tables shortened). The commands of one file run in order, in one scratch
directory, so that a later example can read what an earlier one wrote; `strata` is the build's
binary, `mpirun` may start more ranks than this machine has cores, and `import strata` finds
the build's Python module (--python-path); with --without-python the examples that import it are
skipped.

    docs_examples_test.py --source-dir DIR --strata PATH [--scratch DIR]
                          [--python-path DIR | --without-python] [FILE.md ...]

Exits 1 and prints each example whose output differs (expected beside got), 0 when all match.
With --update, an example whose output differs is rewritten in its file with what the command
printed, keeping the example's shape: its lines that still match stay as written (with their
"…"), a "…" line still stands for the lines it skipped, and a line ending in "; …" keeps that
ending. Read the diff before committing it: the new numbers must be ones you expect.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

ELLIPSIS = "…"


def examples(markdown):
    """Yields (line number, command, expected lines, index of the first expected line) for each
    console block's commands."""
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() != "```console":
            i += 1
            continue
        i += 1
        command, start, expected, output = None, 0, [], 0
        while i < len(lines) and lines[i].strip() != "```":
            line = lines[i]
            if line.startswith("$ "):
                if command is not None:
                    yield start, command, expected, output
                start, command, expected = i + 1, line[2:], []
                while command.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    command = command[:-1] + " " + lines[i].strip()
                output = i + 1
            elif command is not None:
                expected.append(line)
            i += 1
        if command is not None:
            yield start, command, expected, output
        i += 1


def json_documents(markdown):
    """Yields (line number, text) for each ```json block that is a whole document: a JSON object
    with a "kind", nothing elided ("…" or a "..." key). The others are excerpts of one."""
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() != "```json":
            i += 1
            continue
        start = i + 1
        i += 1
        block = []
        while i < len(lines) and lines[i].strip() != "```":
            block.append(lines[i])
            i += 1
        text = "\n".join(block)
        i += 1
        if ELLIPSIS in text or '"..."' in text:
            continue
        try:
            document = json.loads(text)
        except json.JSONDecodeError:
            continue
        if isinstance(document, dict) and "kind" in document:
            yield start, text


def line_pattern(line):
    parts = [re.escape(part) for part in line.rstrip().split(ELLIPSIS)]
    return re.compile(".*?".join(parts) + r"\Z", re.DOTALL)


def trimmed(lines):
    """The lines without trailing spaces, and without the blank lines that end them."""
    lines = [line.rstrip() for line in lines]
    while lines and lines[-1] == "":
        lines.pop()
    return lines


def matches(expected, got):
    """Whether the got lines match the expected ones, with "…" lines matching any run."""
    expected, got = trimmed(expected), trimmed(got)
    memo = {}

    def match(e, g):
        key = (e, g)
        if key in memo:
            return memo[key]
        if e == len(expected):
            result = g == len(got)
        elif expected[e].strip() in (ELLIPSIS, "..."):
            result = any(match(e + 1, k) for k in range(g, len(got) + 1))
        else:
            result = g < len(got) and line_pattern(expected[e]).match(got[g]) is not None \
                and match(e + 1, g + 1)
        memo[key] = result
        return result

    return match(0, 0)


def updated(expected, got):
    """The expected lines rewritten to the got ones, keeping the example's shape (see --update)."""
    expected, got = trimmed(expected), trimmed(got)
    skips = [i for i, line in enumerate(expected) if line.strip() in (ELLIPSIS, "...")]
    if len(skips) > 1:
        return None  # too many ways to align: edit this one by hand
    if skips:
        head, tail = expected[:skips[0]], expected[skips[0] + 1:]
        if len(head) + len(tail) > len(got):
            return None
        pairs = list(zip(head, got[:len(head)])) + [(expected[skips[0]], None)] + \
            list(zip(tail, got[len(got) - len(tail):]))
    else:
        if len(expected) != len(got):
            return got
        pairs = list(zip(expected, got))
    lines = []
    for want, have in pairs:
        if have is None or line_pattern(want).match(have):
            lines.append(want)
        elif want.endswith("; " + ELLIPSIS) and "; " in have:
            lines.append(have[:have.rfind("; ")] + "; " + ELLIPSIS)
        else:
            lines.append(have)
    return lines


def run_file(path, scratch, python_path, without_python, update=False):
    failures = 0
    count = 0
    directory = scratch / path.stem
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    bin_dir = scratch / "bin"
    environment = dict(os.environ)
    environment["PATH"] = f"{bin_dir}:{environment['PATH']}"
    environment.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                        "OMPI_MCA_rmaps_base_oversubscribe": "1", "COLUMNS": "200"})
    if python_path:
        environment["PYTHONPATH"] = str(python_path.resolve())
    rewrites = []  # (first line index of the expected output, its length, the new lines)
    for line_number, command, expected, output in examples(path.read_text()):
        if without_python and "import strata" in command:
            print(f"{path.name}:{line_number}: skipped (no Python module in this build)")
            continue
        count += 1
        result = subprocess.run(["bash", "-c", command], cwd=directory, env=environment,
                                capture_output=True, text=True, timeout=600)
        got = (result.stdout + result.stderr).splitlines()
        if not matches(expected, got):
            failures += 1
            new_lines = updated(expected, got) if update else None
            if new_lines is not None:
                blank_tail = 0  # the blank lines that close the output stay
                while blank_tail < len(expected) and expected[-1 - blank_tail].strip() == "":
                    blank_tail += 1
                rewrites.append((output, len(expected), new_lines + [""] * blank_tail))
            print(f"{path.name}:{line_number}: $ {command}\n  expected:")
            print("\n".join("    " + line for line in expected))
            print(f"  got (exit {result.returncode}):")
            print("\n".join("    " + line for line in got))
    # Each whole file-format document shown must be one `strata validate` accepts.
    for line_number, text in json_documents(path.read_text()):
        count += 1
        document = directory / f"document-line-{line_number}.json"
        document.write_text(text)
        result = subprocess.run(["strata", "validate", str(document)], cwd=directory,
                                env=environment, capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            failures += 1
            print(f"{path.name}:{line_number}: this ```json document is not valid:")
            print("\n".join("    " + line for line in (result.stdout + result.stderr).splitlines()))
    if rewrites:
        lines = path.read_text().split("\n")
        for start, length, new_lines in sorted(rewrites, reverse=True):
            lines[start:start + length] = new_lines
        path.write_text("\n".join(lines))
        print(f"{path.name}: rewrote {len(rewrites)} example(s)")
    return count, failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source-dir", required=True, type=pathlib.Path)
    parser.add_argument("--strata", required=True, type=pathlib.Path)
    parser.add_argument("--scratch", type=pathlib.Path,
                        default=pathlib.Path(os.environ.get("TEST_TMPDIR", "docs-scratch")))
    parser.add_argument("--python-path", type=pathlib.Path)
    parser.add_argument("--without-python", action="store_true")
    parser.add_argument("--update", action="store_true",
                        help="rewrite each example whose output differs with what it printed")
    parser.add_argument("files", nargs="*", type=pathlib.Path)
    arguments = parser.parse_args()
    files = arguments.files or [arguments.source_dir / "README.md",
                                *sorted((arguments.source_dir / "docs").glob("*.md"))]
    scratch = arguments.scratch.resolve() / "docs_examples"
    bin_dir = scratch / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    link = bin_dir / "strata"
    if link.exists() or link.is_symlink():
        link.unlink()
    link.symlink_to(arguments.strata.resolve())
    total = failed = 0
    for path in files:
        count, failures = run_file(path, scratch, arguments.python_path,
                                   arguments.without_python, arguments.update)
        total += count
        failed += failures
        print(f"{path.name}: {count - failures} of {count} examples match")
    if total == 0:
        print("no ```console examples found")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

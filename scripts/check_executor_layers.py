#!/usr/bin/python3
"""The executor's layers point one way: each folder of executor/ includes only headers of its own
layer or of layers below it, in the order declared here (ARCHITECTURE.md, "The executor's layers").

Every #include of every file under executor/include/strata/executor/ and executor/src/ is resolved
to the folder it names: "strata/executor/<folder>/...", else a path relative to the including file,
else a header in the private include folders src/ops and src/model (as the compiler finds it). A file that includes a folder above its own is reported, one line each, and
the exit status is 1. Run with the repository root as the working directory or --source-dir.
"""
import argparse
import pathlib
import re
import sys

# Lowest first. Folders in one tuple are one layer (they may include each other): a tensor's memory
# lives on a device, and the device code knows tensor types.
LAYERS = (
    ("check.h",),
    ("tensor", "cuda"),
    ("random",),
    ("ops",),
    ("data",),
    ("distributed",),
    ("model",),
    ("optim",),
    ("zero",),
    ("pipeline",),
    ("checkpoint",),
    ("generate",),
    ("train",),
)
RANK = {folder: rank for rank, folders in enumerate(LAYERS) for folder in folders}
PRIVATE_INCLUDE_FOLDERS = ("ops", "model")  # target_include_directories(... PRIVATE src/ops ...)
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
SOURCE_SUFFIXES = {".h", ".cpp", ".cu", ".cuh"}


def folder_of(path, executor):
    """The layer folder a file belongs to: its first folder under include/strata/executor or src."""
    for root in (executor / "include" / "strata" / "executor", executor / "src"):
        try:
            parts = path.relative_to(root).parts
        except ValueError:
            continue
        return parts[0] if len(parts) > 1 else parts[0]
    return None


def included_folder(name, including, executor):
    """The layer folder `name` (an include's text) resolves to, or None outside the executor."""
    if name.startswith("strata/executor/"):
        parts = name[len("strata/executor/"):].split("/")
        return parts[0] if len(parts) > 1 else parts[0]
    if name.startswith("strata/"):
        return None  # another component: schemas, schedule
    beside = (including.parent / name).resolve()
    if beside.exists():
        return folder_of(beside, executor)
    for folder in PRIVATE_INCLUDE_FOLDERS:
        if (executor / "src" / folder / name).exists():
            return folder
    return None  # generated or third-party


def violations(source_dir):
    executor = source_dir / "executor"
    found = []
    for path in sorted(executor.rglob("*")):
        if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
            continue
        own = folder_of(path, executor)
        if own is None:
            continue
        if own not in RANK:
            found.append(f"{path.relative_to(source_dir)}: folder {own!r} has no declared layer")
            continue
        for name in INCLUDE.findall(path.read_text(encoding="utf-8")):
            target = included_folder(name, path, executor)
            if target is None or target == own:
                continue
            if target not in RANK:
                found.append(f"{path.relative_to(source_dir)}: includes {name}: folder {target!r} "
                             "has no declared layer")
            elif RANK[target] > RANK[own]:
                found.append(f"{path.relative_to(source_dir)}: includes {name}: {target}/ is a "
                             f"layer above {own}/")
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source-dir", type=pathlib.Path, default=pathlib.Path("."))
    arguments = parser.parse_args()
    found = violations(arguments.source_dir.resolve())
    for line in found:
        print(line)
    if found:
        return 1
    order = " < ".join("/".join(folders) for folders in LAYERS)
    print(f"executor layers: every include points down ({order})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

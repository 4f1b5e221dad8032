#!/usr/bin/python3
"""Strata's layers point one way. Between components: each component folder includes only the
headers of the components below it (COMPONENTS; ARCHITECTURE.md, "Layers") — layout/ below the
executor, the cost models and the planner, tools/ on top. Inside executor/: each folder includes
only headers of its own layer or of layers below it, in the order declared here (executor/README.md,
"How the executor runs a step").

Every "strata/<component>/..." include of every source file of a component is checked against
what that component may include.

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

# What each component may include besides itself (its CMake DEPENDS, transitively). tools/ and the
# Python module sit on top; the module never includes the executor (a notebook that plans loads
# neither MPI nor CUDA).
BELOW_COSTMODELS = {"costmodels", "layout", "schemas"}
COMPONENTS = {
    "schemas": set(),
    "layout": {"schemas"},
    "schedule": {"schemas"},
    "costmodels": {"layout", "schemas"},
    "simulator": BELOW_COSTMODELS | {"schedule"},
    "planner": BELOW_COSTMODELS | {"schedule", "simulator"},
    "executor": {"layout", "schedule", "schemas"},
    "profiler": BELOW_COSTMODELS | {"schedule", "executor"},
    "tools": BELOW_COSTMODELS | {"schedule", "simulator", "planner", "executor", "profiler",
                                 "reports", "cli"},
    "python": BELOW_COSTMODELS | {"schedule", "simulator", "planner", "reports"},
}
COMPONENT_INCLUDE = re.compile(r'^\s*#\s*include\s+[<"]strata/([a-z_]+)/', re.MULTILINE)


def component_violations(source_dir):
    """Includes of a component above the including one, one line each."""
    found = []
    for component, allowed in COMPONENTS.items():
        folder = source_dir / component
        for path in sorted(folder.rglob("*")):
            if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
                continue
            for included in COMPONENT_INCLUDE.findall(path.read_text(encoding="utf-8")):
                if included != component and included not in allowed:
                    found.append(f"{path.relative_to(source_dir)}: includes strata/{included}/: "
                                 f"{component}/ may include only {sorted(allowed) or 'itself'}")
    return found
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
    found = component_violations(arguments.source_dir.resolve())
    found += violations(arguments.source_dir.resolve())
    for line in found:
        print(line)
    if found:
        return 1
    order = " < ".join("/".join(folders) for folders in LAYERS)
    print("components: every include points down (schemas < layout < costmodels/schedule/executor "
          "< simulator < planner < tools)")
    print(f"executor layers: every include points down ({order})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

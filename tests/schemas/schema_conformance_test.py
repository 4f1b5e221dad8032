#!/usr/bin/python3
"""The published JSON Schema files (schemas/*.schema.json) against Strata's C++ validation.

Checks, with Debian's python3-jsonschema (draft 2020-12):
  1. each schema file is itself a valid draft 2020-12 schema;
  2. every preset and every valid fixture passes its schema;
  3. what Strata writes for each of them (its serializer) passes its schema;
  4. every invalid case marked "rejects" fails its schema, and every case marked "accepts" (a rule
     between fields that JSON Schema cannot state) passes it; the C++ side refuses all of them
     with their exact message in tests/schemas/invalid_documents_test.cpp.
Prints 'N passed, N failed' and exits non-zero on any failure.
"""
import argparse
import copy
import json
import pathlib
import subprocess
import sys
import tempfile

import jsonschema
from jsonschema import Draft202012Validator

KINDS = ("model", "cluster", "plan", "plan_set", "phases")


def load_validators(schema_dir):
    schemas = {kind: json.loads((schema_dir / f"{kind}.schema.json").read_text()) for kind in KINDS}
    store = {schema["$id"]: schema for schema in schemas.values()}
    validators = {}
    for kind, schema in schemas.items():
        Draft202012Validator.check_schema(schema)
        resolver = jsonschema.RefResolver(base_uri=schema["$id"], referrer=schema, store=store)
        validators[kind] = Draft202012Validator(schema, resolver=resolver)
    return validators


def pointer_parts(pointer):
    return [part.replace("~1", "/").replace("~0", "~") for part in pointer.split("/")[1:]]


def apply_patch(document, operations):
    """The add/replace/remove subset of RFC 6902 that the invalid cases use."""
    document = copy.deepcopy(document)
    for operation in operations:
        parts = pointer_parts(operation["path"])
        if not parts:
            document = copy.deepcopy(operation["value"])
            continue
        parent = document
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last = parts[-1]
        if isinstance(parent, list):
            last = int(last)
        if operation["op"] == "remove":
            del parent[last]
        elif operation["op"] == "add" and isinstance(parent, list):
            parent.insert(last, operation["value"])
        else:
            parent[last] = operation["value"]
    return document


def kind_of(path, document):
    return document.get("kind") if isinstance(document, dict) else None


class Results:
    def __init__(self):
        self.passed = 0
        self.failures = []

    def check(self, condition, what):
        if condition:
            self.passed += 1
        else:
            self.failures.append(what)


def first_error(validator, document):
    return next(iter(validator.iter_errors(document)), None)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source-dir", type=pathlib.Path, required=True)
    parser.add_argument("--serializer", type=pathlib.Path, required=True)
    parser.add_argument("--strata", type=pathlib.Path, required=True)
    args = parser.parse_args()

    validators = load_validators(args.source_dir / "schemas")
    fixtures = args.source_dir / "tests" / "fixtures"
    results = Results()

    documents = sorted((args.source_dir / "schemas" / "presets").rglob("*.json"))
    for kind in KINDS:
        documents += sorted((fixtures / kind / "valid").glob("*.json"))
    for path in documents:
        document = json.loads(path.read_text())
        error = first_error(validators[kind_of(path, document)], document)
        results.check(error is None, f"{path}: schema rejects a valid document: {error and error.message}")

    with tempfile.TemporaryDirectory() as out:
        for index, path in enumerate(documents):
            target = pathlib.Path(out) / str(index)
            subprocess.run([args.serializer, target, path], check=True)
            serialized = json.loads((target / path.name).read_text())
            error = first_error(validators[serialized["kind"]], serialized)
            results.check(error is None, f"{path}: schema rejects Strata's serialization: {error and error.message}")
        # Presets with a node count are written by the binary, not stored in files.
        shown = subprocess.run([args.strata, "presets", "--show", "dgx-h100:16"], check=True,
                               capture_output=True, text=True).stdout
        error = first_error(validators["cluster"], json.loads(shown))
        results.check(error is None, f"presets --show dgx-h100:16: {error and error.message}")

    for kind in KINDS:
        cases = json.loads((fixtures / kind / "invalid_cases.json").read_text())
        for case in cases:
            if case["schema"] == "not-json":
                continue
            base = json.loads((fixtures / kind / case["base"]).read_text())
            document = apply_patch(base, case["patch"])
            error = first_error(validators[kind], document)
            label = f"{kind} case '{case['name']}'"
            if case["schema"] == "rejects":
                results.check(error is not None, f"{label}: the schema accepts what Strata refuses ({case['error']})")
            else:
                results.check(error is None, f"{label}: marked as beyond JSON Schema, but the schema rejects it: "
                                             f"{error and error.message}")

    for failure in results.failures:
        print("FAIL:", failure)
    print(f"{results.passed} passed, {len(results.failures)} failed")
    return 1 if results.failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""The `strata` Python module against the command line it mirrors.

Run by CTest (test `python_module`) with Debian's python3-pytest, PYTHONPATH at the build's
python/ folder and STRATA_BINARY naming the `strata` binary of the same build: each function must
answer what the command with --format json answers, and bad input must raise the command's one
line as strata.InputError with its JSON path.
"""
import json
import os
import subprocess

import pytest

import strata


def cli(*arguments):
    """The JSON `strata ARGUMENTS --format json` prints."""
    completed = subprocess.run([os.environ["STRATA_BINARY"], *arguments, "--format", "json"],
                               check=True, capture_output=True, text=True)
    return json.loads(completed.stdout)


def test_the_readme_example_plans_llama_on_four_nodes():
    plans = strata.plan(model="llama3.1-8b", cluster="dgx-h100:4", global_batch=128)
    mesh = plans[0]["mesh"]
    assert mesh["tp"] * mesh["cp"] * mesh["dp"] * mesh["pp"] == 32


def test_plan_returns_the_command_lines_plans_in_its_order():
    arguments = dict(model="llama-tiny", cluster="cpu-local:4", global_batch=16, seq_len=128, top=3)
    plans = strata.plan(**arguments)
    command = ["plan", "--model", "llama-tiny", "--cluster", "cpu-local:4", "--global-batch",
               "16", "--seq-len", "128", "--top", "3", "--quiet"]
    assert plans == [ranked["plan"] for ranked in cli(*command)["plans"]]
    meshes = [tuple(plan["mesh"][axis] for axis in ("tp", "cp", "pp", "dp")) for plan in plans]
    assert len(set(meshes)) == len(meshes)
    every = strata.plan(**arguments, variants=True)
    assert every == [ranked["plan"] for ranked in cli(*command, "--variants")["plans"]]


def test_a_plan_simulates_as_the_command_line_simulates_it(tmp_path):
    plan = strata.plan(model="gpt-tiny", cluster="cpu-local:2", global_batch=8, seq_len=64)[0]
    predicted = strata.simulate(plan)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    assert predicted == cli("simulate", "--plan", str(path))
    assert 0 < predicted["mfu"] < 1


CONTEXT_EXTENSION = os.path.join(os.environ["STRATA_FIXTURES_DIR"], "phases", "valid",
                                 "context-extension.json")


def test_plan_phases_answers_what_the_command_line_answers(tmp_path):
    answer = strata.plan_phases("gpt-tiny", "cpu-local:4", CONTEXT_EXTENSION)
    expected = cli("plan", "--model", "gpt-tiny", "--cluster", "cpu-local:4", "--phases",
                   CONTEXT_EXTENSION, "--quiet")
    for phase in expected["phases"]:
        del phase["layout"]  # the command line's table columns, in words
    assert answer == expected
    with open(CONTEXT_EXTENSION) as phases:
        given = strata.plan_phases("gpt-tiny", "cpu-local:4", json.load(phases))
    # The set's description names where the phases came from (the file, or "phases" for a dict).
    assert given["plan_set"].pop("description").endswith("--phases phases; predicted " +
                                                         answer["plan_set"]["description"]
                                                         .split("; predicted ")[1])
    del answer["plan_set"]["description"]
    assert given == answer
    assert strata.validate(answer["plan_set"]) == "plan_set"
    assert [phase["name"] for phase in answer["phases"]] == ["short", "long"]


def test_plan_strategies_answers_the_command_lines_plan_set(tmp_path):
    answer = strata.plan_strategies("gpt-tiny", "cpu-local:8", global_batch=16, seq_len=64,
                                    count=3)
    out = tmp_path / "set.json"
    cli("plan", "--model", "gpt-tiny", "--cluster", "cpu-local:8", "--global-batch", "16",
        "--seq-len", "64", "--strategies", "3", "--out", str(out), "--quiet")
    assert answer == json.loads(out.read_text())
    assert len(answer["plans"]) == 3
    assert len(answer["switches"]) == 3 * 2
    with pytest.raises(strata.InputError, match="count|strategies"):
        strata.plan_strategies("gpt-tiny", "cpu-local:8", global_batch=16, count=0)


def test_describe_and_presets_match_the_command_line():
    assert strata.describe("moe-tiny", cluster="dgx-h100:1") == cli(
        "describe", "--model", "moe-tiny", "--cluster", "dgx-h100:1")
    assert strata.presets() == cli("presets")
    assert strata.preset("llama-tiny")["hidden_size"] == 256


def test_documents_given_as_dicts_are_read_like_files():
    model = strata.preset("llama-tiny")
    model["num_layers"] = 2
    described = strata.describe(model, seq_len=64)
    assert described["parameters"] < strata.describe("llama-tiny")["parameters"]
    assert strata.validate(model) == "model"
    assert strata.validate(strata.preset("dgx-h100:2")) == "cluster"


def test_bad_input_raises_the_one_line_error_with_its_json_path():
    plan = strata.plan(model="llama-tiny", cluster="cpu-local:4", global_batch=16, seq_len=128)[0]
    plan["mesh"]["tp"] = 3
    with pytest.raises(strata.InputError) as raised:
        strata.validate(plan)
    assert raised.value.json_path == "/mesh"
    assert raised.value.source == "document"
    assert isinstance(raised.value, ValueError)
    assert "does not equal the cluster's 4 GPUs" in str(raised.value)
    with pytest.raises(strata.InputError) as raised:
        strata.describe("no-such-model")
    assert "no-such-model" in str(raised.value)
    with pytest.raises(strata.InputError, match="unknown precision fp5"):
        strata.plan(model="llama-tiny", cluster="cpu-local:4", global_batch=16, precision="fp5")


def test_arguments_are_checked_by_the_command_lines_rules():
    # Each refused as the command line refuses the flag, named as the argument is.
    cases = [
        (dict(seq_len=0), "seq_len", "0 is not a whole number from 1 to 16777216"),
        (dict(top=0), "top", "0 is not a whole number from 1 to 100"),
        (dict(top=-3), "top", "-3 is not a whole number from 1 to 100"),
        (dict(global_batch=0), "global_batch", "0 is not a whole number from 1 to 16777216"),
        (dict(precision="fp5"), "precision", "unknown precision fp5"),
        (dict(framework="x"), "framework", "unknown x"),
    ]
    for change, argument, rule in cases:
        arguments = dict(model="gpt-tiny", cluster="cpu-local:2", global_batch=8, seq_len=64)
        arguments.update(change)
        with pytest.raises(strata.InputError) as raised:
            strata.plan(**arguments)
        assert raised.value.source == argument, change
        assert raised.value.rule.startswith(rule), change
        assert str(raised.value).startswith(argument + ": "), change
    with pytest.raises(strata.InputError) as raised:
        strata.describe("gpt-tiny", seq_len=-7)
    assert raised.value.source == "seq_len"
    assert "-7 is not a whole number from 1 to" in str(raised.value)


def test_nan_and_infinity_in_a_dict_name_their_path():
    model = strata.preset("moe-tiny")
    model["moe"]["router"]["aux_loss_coefficient"] = float("nan")
    with pytest.raises(strata.InputError) as raised:
        strata.describe(model)
    assert raised.value.source == "model"
    assert raised.value.json_path == "/moe/router/aux_loss_coefficient"
    plan = strata.plan(model="gpt-tiny", cluster="cpu-local:2", global_batch=8, seq_len=64)[0]
    plan["cluster"]["network_tiers"][0]["bandwidth_gb_per_s"] = float("inf")
    for call in (strata.simulate, strata.validate):
        with pytest.raises(strata.InputError) as raised:
            call(plan)
        assert raised.value.json_path == "/cluster/network_tiers/0/bandwidth_gb_per_s"
        assert "not a finite number" in raised.value.rule


def test_random_arguments_answer_or_raise_the_modules_errors():
    """Arguments as a careless script passes them: each call answers, or raises InputError,
    NoPlanFits, or pybind11's TypeError for a value of the wrong type — never another error."""
    import math
    import random
    chooser = random.Random(20261129)
    numbers = [1, 2, 8, 64, 0, -1, -7, 2**40, 2**63 - 1, 16777217, 1.5, math.nan, math.inf, None,
               "8", True]
    answered = refused = 0
    for _ in range(150):
        call = chooser.choice(["plan", "describe"])
        try:
            if call == "plan":
                arguments = dict(model=chooser.choice(["gpt-tiny", "llama-tiny", "nope"]),
                                 cluster=chooser.choice(["cpu-local:2", "dgx-h100:1", "x"]),
                                 global_batch=chooser.choice(numbers))
                for key in ("seq_len", "top"):
                    if chooser.random() < 0.6:
                        arguments[key] = chooser.choice(numbers)
                result = strata.plan(**arguments)
                assert isinstance(result, list) and 1 <= len(result) <= 100
            else:
                result = strata.describe(chooser.choice(["gpt-tiny", "moe-tiny", "nope"]),
                                         seq_len=chooser.choice(numbers))
                assert result["flops_per_token"]["training"] > 0
            answered += 1
        except (strata.InputError, strata.NoPlanFits, TypeError):
            refused += 1
    assert answered > 0 and refused > 0


def test_a_search_where_nothing_fits_says_what_binds():
    with pytest.raises(strata.NoPlanFits, match="memory"):
        strata.plan(model="llama3.1-405b", cluster="cpu-local:1", global_batch=16)


def test_the_example_in_docs_runs(capsys):
    import runpy
    example = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "python_example.py")
    runpy.run_path(example, run_name="__main__")
    printed = capsys.readouterr().out
    assert "plan 1: tp" in printed
    assert "refused at /mesh" in printed

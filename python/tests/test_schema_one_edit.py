"""A new policy key is one edit in the core's descriptor table (Keys(), oracle/src/policy.cc) plus its rule: then
`packoracle schema` rewrites schema.json, python/tools/policy_keys_table.py --write adds its row to DESIGN §3
(whose meaning is then written there), and nothing else in Python changes. These tests hold every place that
shows the keys to the core's table, and add a key to a copy of schema.json to show what follows from it alone."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys

import pytest

from packoracle import Policy, _core
from packoracle.dump import format as fmt

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(ROOT, "python", "tools")
DUMP = os.path.join(ROOT, "python", "src", "packoracle", "dump")
sys.path.insert(0, TOOLS)
import policy_keys_table  # noqa: E402  (python/tools is no package)

NEW_KEY = {"key": "new_key", "values": ["first", "second"], "open": False, "takes": "first | second",
           "after_version_one": True, "default": "first"}


def test_the_committed_schema_holds_the_cores_keys_in_its_order():
    assert fmt.SCHEMA_TABLES["policy_keys"] == _core.policy_key_domains()
    assert fmt.POLICY_KEYS == tuple(d["key"] for d in _core.policy_key_domains())


def test_design_states_every_key_with_the_schemas_values_and_default():
    assert policy_keys_table.main(["policy_keys_table.py"]) == 0
    rows = policy_keys_table.meanings(open(os.path.join(ROOT, "docs", "design.md")).read().split(
        policy_keys_table.BEGIN)[1].split(policy_keys_table.END)[0])
    assert list(rows) == list(fmt.POLICY_KEYS)


@pytest.mark.parametrize("preset", list(fmt.PRESETS))
def test_the_policy_object_holds_every_key_with_no_edit_of_its_own(preset):
    policy, domains = Policy(preset), {d["key"]: d for d in _core.policy_key_domains()}
    # Every key of the table, in its order; one added after version 1 only away from its default (as version 1
    # wrote a resolved policy), each value one the key takes.
    assert list(policy) == [k for k in domains if k in policy]
    for key, domain in domains.items():
        assert (key in policy) == (not domain["after_version_one"] or fmt.PRESETS[preset].get(key, domain["default"])
                                   != domain["default"])
        if key in policy and not domain["open"]:
            assert policy[key] in domain["values"]
    changed = {k: d["values"][-1] for k, d in domains.items() if not d["open"] and d["values"][-1] != policy.get(k)}
    for key, value in changed.items():  # set over the preset, read back by the key's name where the core takes it
        try:
            assert Policy(preset, **{key: value})[key] == value
        except ValueError as e:  # a contradiction with the preset's other keys, which only the core knows
            assert "contradictory" in str(e)


@pytest.fixture()
def schema_with_a_new_key(tmp_path):
    """packoracle.dump.format and its schema.json, copied, the schema given one more key (a copy: the package's
    own module reads its own schema.json)."""
    shutil.copy(os.path.join(DUMP, "format.py"), tmp_path / "format.py")
    schema = json.load(open(os.path.join(DUMP, "schema.json")))
    schema["policy_keys"].append(NEW_KEY)
    (tmp_path / "schema.json").write_text(json.dumps(schema, indent=1) + "\n")
    spec = importlib.util.spec_from_file_location("format_with_a_new_key", tmp_path / "format.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, tmp_path


def test_a_new_key_in_the_schema_is_read_by_the_writer_without_an_edit(schema_with_a_new_key):
    new_fmt, _ = schema_with_a_new_key
    assert new_fmt.POLICY_KEYS[-1] == "new_key"
    assert new_fmt.resolve_policy_without_core({"preset": "reference", "new_key": "second"})["new_key"] == "second"
    assert "new_key" not in new_fmt.resolve_policy_without_core({"preset": "reference", "new_key": "first"})
    with pytest.raises(ValueError, match="new_key"):
        new_fmt.resolve_policy_without_core({"preset": "reference", "new_key": "third"})


def test_a_new_key_in_the_schema_asks_for_its_row_in_design(schema_with_a_new_key, capsys):
    _, tmp = schema_with_a_new_key
    design = tmp / "design.md"
    shutil.copy(os.path.join(ROOT, "docs", "design.md"), design)
    args = ["policy_keys_table.py", str(design), str(tmp / "schema.json")]
    assert policy_keys_table.main(args) == 1  # the table lacks the key
    assert policy_keys_table.main(args[:1] + ["--write"] + args[1:]) == 1  # its row added, its meaning unwritten
    assert "| `new_key` | `first` \\| `second` | `first` (added after version 1) |  |" in design.read_text()
    assert "write the meaning of new_key" in capsys.readouterr().err
    design.write_text(design.read_text().replace("(added after version 1) |  |", "(added after version 1) | why |"))
    assert policy_keys_table.main(args) == 0


def test_the_writers_span_has_the_tables_fields_in_its_order():
    assert list(fmt.span("a", 1, 2, 3)) == [f["name"] for f in fmt.SCHEMA_TABLES["span_fields"]]

"""packoracle.dump's policy table, used where the extension is not built, against the core's rules (which the
dump writer uses where it is): on every policy these tests generate, the table accepts a policy only if the
core accepts it or refuses it as a contradiction between valid keys (what only the core knows), refuses what
the core refuses for a key or a value, and resolves what it accepts to the core's resolution."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from packoracle import _core
from packoracle.dump import format as fmt

VALUES = {**{d["key"]: st.sampled_from(d["values"] + ["bogus"]) for d in fmt.SCHEMA_TABLES["policy_keys"]
             if not d["open"] and all(isinstance(v, str) for v in d["values"])},
          "preset": st.sampled_from(list(fmt.PRESETS) + [None, "nope"]),
          "ignore_index": st.one_of(st.integers(-200, 5), st.just(True), st.just("0")),
          "position_base": st.one_of(st.integers(-1, 2), st.just(1.5)),
          "pad_id": st.one_of(st.integers(-5, 5), st.just("x")),
          "eos_id": st.one_of(st.none(), st.integers(0, 5), st.just("0")),
          "bos_id": st.one_of(st.none(), st.integers(0, 5)),
          "loss_mask": st.one_of(st.booleans(), st.just(1)),
          "stream_stride": st.sampled_from([None, "L", "L+1", "L+2"]),
          "pad_to": st.sampled_from(["row_len", "longest", "multiple_of:8", "multiple_of:0", "multiple_of:x", "rows"]),
          "unknown_key": st.just(1)}
POLICIES = st.dictionaries(st.sampled_from(sorted(VALUES)), st.none(), min_size=1, max_size=5).flatmap(
    lambda keys: st.fixed_dictionaries({key: VALUES[key] for key in keys}))


def _outcome(resolve, policy):
    try:
        return resolve(policy), None
    except ValueError as e:
        return None, str(e)


@settings(max_examples=600, deadline=None)
@given(POLICIES)
def test_the_table_agrees_with_the_core(policy):
    table, table_error = _outcome(fmt.resolve_policy_without_core, policy)
    core, core_error = _outcome(_core.resolve_policy, policy)
    if core_error is None:
        assert table_error is None, f"the table refuses what the core accepts: {table_error}"
        assert table == core
    elif table_error is None:  # the table cannot see contradictions between valid keys; nothing else
        assert "contradictory policy" in core_error or "is null, but" in core_error, core_error


def test_the_writer_uses_the_core_where_it_is_built():
    with pytest.raises(ValueError, match="eod_closes needs an EOD id"):
        fmt.validate_policy({"boundary_source": "eod_closes"}, "header.policy")
    assert fmt.validate_policy_without_core({"boundary_source": "eod_closes"}) == {"boundary_source": "eod_closes"}

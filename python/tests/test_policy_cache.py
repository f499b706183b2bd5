"""The core's cache of resolved policies (convert.cc, PolicyFromPython): a plain dict is looked up by a key of
its items (each key, the type of its value and the value), and must answer what reading the dict afresh
answers. Dicts equal in Python but not in type (True and 1, 1 and 1.0) are not the same policy to the core's
reading, so a cache that confused them would answer the one for the other: each is read after the other, warm,
and then cold (both caches emptied by other policies), and the answers must agree."""

import pytest
from hypothesis import given, settings, strategies as st

from packoracle import _core, presets
from packoracle._policy import resolve

KEYS = ["preset", "pad_id", "eos_id", "bos_id", "ignore_index", "loss_mask", "position_base", "overflow", "padding",
        "stream_stride", "truncate_to"]
VALUES = (st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([-100, 2**40, 2**63, 1.0, 0.0, -0.0])
          | st.sampled_from(["reference", "hf-flatten", "split", "none", "", "\ud800", "torchtune-packed"]))


def _outcome(policy):
    try:
        return _core.resolve_policy(policy)
    except (TypeError, ValueError) as e:
        return type(e).__name__, str(e)


def _cold(policy):
    for k in range(9):  # more than either cache keeps: both emptied of `policy` and its twins
        _core.resolve_policy({"preset": "reference", "pad_id": 1000 + k})
    return _outcome(policy)


def _twin(value):
    """A value equal in Python, of another type."""
    if value is True or value is False:
        return int(value)
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, int) and abs(value) < 2**53:
        return float(value)
    if isinstance(value, float):
        return int(value)
    return value


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4), st.sampled_from(["reference", "hf-flatten"]))
def test_a_cached_policy_is_what_reading_it_afresh_gives(keys, preset):
    policy = {"preset": preset, **keys}
    twin = {k: _twin(v) for k, v in policy.items()}
    first, again = _outcome(policy), _outcome(policy)
    twin_warm = _outcome(twin)
    assert first == again == _cold(policy)
    assert twin_warm == _cold(twin)


def test_an_int_and_its_float_are_not_the_same_policy():
    """The case the JSON cache once answered wrong: -1.0 (a float, which pad_id refuses) taken once -1 was read."""
    assert _core.resolve_policy({"preset": "reference", "pad_id": -1})["pad_id"] == -1
    assert _outcome({"preset": "reference", "pad_id": -1.0}) == _cold({"preset": "reference", "pad_id": -1.0})
    assert _outcome({"preset": "reference", "pad_id": -1.0})[0] == "ValueError"
    for value, twin in ((True, 1), (1, True), (False, 0), (0, False), (2, 2.0)):
        _outcome({"preset": "reference", "pad_id": value})  # warm
        assert _outcome({"preset": "reference", "pad_id": twin}) == _cold({"preset": "reference", "pad_id": twin})


def test_a_preset_name_resolves_as_the_core_resolves_it_on_every_call():
    """resolve(name) holds each preset's keys after the first call: every later call must give a new dict equal
    to the core's own reading, which a change to an earlier answer does not reach; an unknown name still
    raises, every time."""
    for name in presets():
        first = resolve(name)
        assert first == _core.resolve_policy({"preset": name})
        first["pad_id"] = -12345
        again = resolve(name)
        assert again is not first and again == _core.resolve_policy({"preset": name})
    for _ in range(2):
        with pytest.raises(ValueError, match="no-such-preset"):
            resolve("no-such-preset")

"""Configuration has one reader: placegroup/config.py lists every environment variable the
package reads, parses it, and names the variable when its value is wrong."""
import pathlib
import re
import subprocess
import sys

import pytest

from placegroup import config

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_no_module_but_config_reads_the_environment():
    readers = []
    for d in ("placegroup", "executor", "ops", "comm"):
        for path in (ROOT / d).rglob("*.py"):
            text = path.read_text()
            if path.name != "config.py" and re.search(r"os\.(getenv|environ\.get|environ\[)", text):
                readers.append(str(path.relative_to(ROOT)))
    assert readers == []


def test_every_variable_the_code_names_is_a_setting():
    named = set()
    for d in ("placegroup", "executor", "ops", "comm"):
        for path in (ROOT / d).rglob("*.py"):
            named |= set(re.findall(r"config\.(?:get|raw|is_set)\(\"([A-Z_]+)\"", path.read_text()))
    assert named and named <= set(config.SETTINGS)


@pytest.mark.parametrize("name, text, value", [
    ("PLACEGROUP_PEER_TIMEOUT", "5", 5.0), ("PLACEGROUP_PEER_TIMEOUT", "", 30.0),
    ("PLACEGROUP_RESUME", "1", True), ("TRAINING_ROLE", "pserver", "PSERVER"),
    ("PLACEGROUP_MAX_MESSAGE", "-1", -1), ("PADDLE_TRAINER_ID", " 3 ", 3)])
def test_values_parse_with_their_defaults(name, text, value):
    assert config.get(name, {name: text}) == value


@pytest.mark.parametrize("name, text, says", [
    ("PLACEGROUP_PEER_TIMEOUT", "soon", "expected seconds"), ("PLACEGROUP_PEER_TIMEOUT", "-1", "expected seconds"),
    ("PLACEGROUP_RESUME", "yes", r"expected a whole number \(0 or 1\)"), ("PADDLE_TRAINER_ID", "one", "expected a whole number")])
def test_a_bad_value_names_the_variable(name, text, says):
    with pytest.raises(ValueError, match=f"{name}={text!r}: {says}"):
        config.get(name, {name: text})


def test_an_unknown_setting_is_a_key_error():
    with pytest.raises(KeyError, match="PLACEGROUP_NOPE is not a placegroup setting"):
        config.get("PLACEGROUP_NOPE")


def test_placegroup_env_lists_every_setting():
    out = subprocess.run([sys.executable, "-m", "placegroup", "env"], capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "PLACEGROUP_PEER_TIMEOUT": "7"}, check=True).stdout
    assert all(name in out for name in config.SETTINGS)
    assert re.search(r"PLACEGROUP_PEER_TIMEOUT\s+7\s", out) and re.search(r"PLACEGROUP_START_TIMEOUT\s+\(120\.0\)", out)

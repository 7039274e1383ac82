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
    assert re.search(r"PLACEGROUP_PEER_TIMEOUT\s+7\s", out) and re.search(r"PLACEGROUP_START_TIMEOUT\s+\(120\)\s", out)


def test_placegroup_env_shows_defaults_as_typed_and_plain_text():
    out = subprocess.run([sys.executable, "-m", "placegroup", "env"], capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin"}, check=True).stdout
    assert re.search(r"PADDLE_INIT_PORT\s+\(6174\)\s", out) and re.search(r"TRAINING_ROLE\s+\(unset\)\s", out)
    assert re.search(r"PLACEGROUP_RESUME\s+\(0\)\s", out) and re.search(r"PLACEGROUP_LOST_GRACE\s+\(1\)\s", out)
    assert "'" not in "".join(ln[:42] for ln in out.splitlines()) and "None" not in out and "``" not in out
    assert all(s.doc.replace("``", "") in out for s in config.SETTINGS.values())


def test_placegroup_env_says_which_values_are_invalid_and_why():
    p = subprocess.run([sys.executable, "-m", "placegroup", "env"], capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "PLACEGROUP_PEER_TIMEOUT": "abc", "PADDLE_TRAINER_ID": "x"})
    assert p.returncode == 1
    assert re.search(r"PLACEGROUP_PEER_TIMEOUT\s+abc  INVALID, expected seconds\. Seconds a silent peer", p.stdout)
    assert p.stderr == ("placegroup env: error: 2 invalid: PADDLE_TRAINER_ID='x': expected a whole number; "
                        "PLACEGROUP_PEER_TIMEOUT='abc': expected seconds\n")


def test_space_separated_pservers_are_told_to_use_commas():
    from placegroup.errors import ConfigError
    from placegroup.transpiler.endpoints import pserver_endpoints
    with pytest.raises(ConfigError, match=r"^transpile's pservers: '127.0.0.1:7164 127.0.0.1:7165' is several "
                                          r"endpoints: use commas between them, as in '127.0.0.1:7164,127.0.0.1:7165'$"):
        pserver_endpoints("127.0.0.1:7164 127.0.0.1:7165", "6174")

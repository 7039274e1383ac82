"""What Fluid-era scripts import besides fluid comes with the install: ``six`` (Paddle 1.x
installed it, and its users' scripts say ``import six``) is one of the package's dependencies."""
import os
import re
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_dependencies_hold_six():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    assert any(re.fullmatch(r"six\s*([<>=!~].*)?", d) for d in deps), deps

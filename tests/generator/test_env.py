"""One environment prefix, TORCH_FL_; the old TORCHFL_ spelling still read, with a warning."""
from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import torchfl_gen.env as generator_env
from torch_fl import env as runtime_env

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("env", [runtime_env, generator_env], ids=["runtime", "generator"])
def test_new_name_first_old_name_warns(env, monkeypatch):
    monkeypatch.setattr(env, "_warned", set())
    monkeypatch.delenv("TORCH_FL_PROBE_X", raising=False)
    monkeypatch.setenv("TORCHFL_PROBE_X", "old")
    with pytest.warns(FutureWarning, match="TORCHFL_PROBE_X is deprecated: set TORCH_FL_PROBE_X"):
        assert env.get("PROBE_X") == "old"
    monkeypatch.setenv("TORCH_FL_PROBE_X", "new")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert env.get("PROBE_X") == "new"
    monkeypatch.delenv("TORCH_FL_PROBE_X")
    monkeypatch.delenv("TORCHFL_PROBE_X")
    assert env.get("PROBE_X", "default") == "default"


def test_the_two_readers_are_the_same_code():
    """The generator imports no runtime module, so it has its own copy: the code must not drift."""
    def code(path: Path) -> str:
        text = path.read_text(encoding="utf-8")
        return text[text.index('"""', 3) + 3:]  # past the module docstring

    assert code(ROOT / "generator" / "env.py") == code(ROOT / "runtime_common" / "torch_fl" / "env.py")


def test_no_old_prefix_left_in_the_sources():
    offenders = []
    for folder in ("generator", "runtime_common", "scripts", "bench", "tests", "generated", "docs"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".j2", ".sh", ".md", ".cpp", ".h") and path.name != "env.py" \
                    and path.name != "test_env.py" and "TORCHFL_" in path.read_text(encoding="utf-8", errors="ignore"):
                offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, offenders

"""The process pool's workers are started without the caller's main module: a spawned child has no
script to run again, so a launch script needs no ``if __name__ == "__main__":`` guard."""
from __future__ import annotations

import multiprocessing.spawn
import sys
import types

import pytest

from datacheck.execute.executors import _main_hidden


def test_a_child_started_inside_the_block_is_told_of_no_main_module(monkeypatch):
    script = types.ModuleType("__main__")
    script.__file__ = "/somewhere/launch.py"
    script.__spec__ = None
    monkeypatch.setitem(sys.modules, "__main__", script)
    assert multiprocessing.spawn.get_preparation_data("w")["init_main_from_path"] == "/somewhere/launch.py"
    with _main_hidden():
        prep = multiprocessing.spawn.get_preparation_data("w")
        assert "init_main_from_path" not in prep and "init_main_from_name" not in prep
    assert sys.modules["__main__"] is script


def test_the_main_module_is_restored_when_the_block_raises(monkeypatch):
    script = types.ModuleType("__main__")
    monkeypatch.setitem(sys.modules, "__main__", script)
    with pytest.raises(KeyError), _main_hidden():
        raise KeyError("x")
    assert sys.modules["__main__"] is script


def test_a_script_run_as_a_module_is_hidden_too(monkeypatch):
    """``python -m launch``: the child would import ``launch`` by name (``init_main_from_name``)."""
    import importlib.machinery

    script = types.ModuleType("__main__")
    script.__spec__ = importlib.machinery.ModuleSpec("launch", None)
    monkeypatch.setitem(sys.modules, "__main__", script)
    assert multiprocessing.spawn.get_preparation_data("w")["init_main_from_name"] == "launch"
    with _main_hidden():
        assert "init_main_from_name" not in multiprocessing.spawn.get_preparation_data("w")

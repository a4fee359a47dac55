"""``avalanche_sets.data`` loads its names on first use: importing the package loads no torch,
and its three lists of names (``__all__``, ``_LAZY``, the imports the documentation reads) agree."""

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import avalanche_sets.data as data


def test_importing_the_package_loads_no_torch():
    code = "import sys, avalanche_sets.data; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False"]


def test_every_name_is_listed_once_and_loads_from_its_module():
    tree = ast.parse(Path(data.__file__).read_text())
    guarded = {
        alias.name: f".{node.module}"
        for block in tree.body
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
        for node in block.body
        for alias in node.names
    }
    assert len(set(data.__all__)) == len(data.__all__)
    assert sorted(data.__all__) == sorted(data._LAZY) == sorted(guarded)
    assert guarded == data._LAZY
    for name, module in data._LAZY.items():
        assert getattr(data, name) is getattr(importlib.import_module(module, data.__name__), name)
        assert name in dir(data)

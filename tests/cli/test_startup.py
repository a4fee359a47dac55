"""The command line starts without torch and Avalanche: they load only for a command that needs
them (the time it takes is measured by benchmarks/startup_time.py, not here)."""

import json
import subprocess
import sys

import pytest

PROBE = """
import contextlib, io, json, sys
import avalanche_sets.cli as cli
cli.build_parser()
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = cli.main({argv})
heavy = sorted(m for m in ("torch", "avalanche", "numpy") if m in sys.modules)
print(json.dumps({{"code": code, "heavy": heavy, "out": out.getvalue()}}))
"""


@pytest.mark.parametrize("argv", [["presets", "cpu"], ["presets"]])
def test_cli_parses_and_prints_presets_without_torch(argv):
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv)], capture_output=True, text=True, check=True
    )
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["code"] == 0
    assert got["heavy"] == [], f"the CLI imported {got['heavy']} to print presets"
    if argv[1:]:
        assert json.loads(got["out"])["precision"] == "auto"


def test_importing_the_package_and_cli_loads_no_torch():
    code = (
        "import sys, avalanche_sets, avalanche_sets.cli; "
        "print('torch' in sys.modules, 'avalanche' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]


def test_the_public_names_still_load_on_use():
    import avalanche_sets

    assert avalanche_sets.run_sets.__name__ == "run_sets"
    assert "OrderStrategy" in dir(avalanche_sets)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        avalanche_sets.nope  # noqa: B018

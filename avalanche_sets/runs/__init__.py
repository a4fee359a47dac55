"""Running experiments: one home for what a run is, how it is run, and what it leaves on disk.

* :mod:`~avalanche_sets.runs.folder` — the on-disk contract: run-folder names and identity,
  atomic writes;
* :mod:`~avalanche_sets.runs.record` — a finished run's record, typed (:class:`RunRecord`:
  ``result.json`` with its ``run.json``), read and written;
* :mod:`~avalanche_sets.runs.code` — which code and arithmetic made a run, and provenance;
* :mod:`~avalanche_sets.runs.lock` — the lock of a run in progress;
* :mod:`~avalanche_sets.runs.run` — a run settled once (:class:`Run`): its identity, folder,
  precision and record settings, derived when it is made;
* :mod:`~avalanche_sets.runs.experiment` — one run (:func:`run_experiment`): build the
  benchmark and the method, train with checkpoints, write the folder;
* :mod:`~avalanche_sets.runs.sweep` — many runs (:func:`run_sweep`): in this process, a local
  process pool or Ray; the command line's ``sweep`` and ``benchmarks/reproduce.py`` use it;
* :mod:`~avalanche_sets.runs.protocols` — which runs are one protocol (one row of a table);
* :mod:`~avalanche_sets.runs.report` — tables from run folders;
* :mod:`~avalanche_sets.runs.row_plots` — pictures of a table's rows.

The names below load on first use (PEP 562), as the package's own: the command line imports
:mod:`.folder` (standard library only) before it needs torch.
"""

from .. import _lazy_names

_LAZY = {
    "RunLock": ".lock",
    "RunLockedError": ".lock",
    "RunConflictError": ".folder",
    "ResultsVersionError": ".record",
    "RecordError": ".record",
    "RunRecord": ".record",
    "Provenance": ".record",
    "read_record": ".record",
    "write_record": ".record",
    "run_dir_name": ".folder",
    "run_identity": ".folder",
    "record_identity": ".folder",
    "record_dir_name": ".folder",
    "provenance": ".code",
    "build_benchmark": ".experiment",
    "method_benchmark": ".experiment",
    "run_experiment": ".experiment",
    "Run": ".run",
    "check_run": ".experiment",
    "RunSpec": ".sweep",
    "RunOutcome": ".sweep",
    "run_one": ".sweep",
    "run_sweep": ".sweep",
    "find_results": ".report",
    "aggregate_results": ".report",
    "write_table": ".report",
    "run_table": ".report",
    "write_heatmap": ".report",
    "write_row_plots": ".row_plots",
    "group_protocols": ".protocols",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = _lazy_names(__name__, _LAZY)

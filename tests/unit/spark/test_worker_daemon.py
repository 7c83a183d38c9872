"""The worker daemon keeps the directories of Spark's own zip archives when caches are
invalidated, and re-reads every other archive as Python does."""

from __future__ import annotations

import zipfile
import zipimport
from pathlib import Path

from icetide.spark.worker_daemon import keep_archives


def _archive(folder: Path, *modules: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "lib.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for name in modules:
            archive.writestr(f"{name}.py", "VALUE = 1\n")
    return path


def test_an_archive_in_a_kept_folder_is_not_read_again_and_any_other_is(tmp_path: Path) -> None:
    kept = _archive(tmp_path / "spark" / "python" / "lib", "first")
    other = _archive(tmp_path / "shipped", "first")
    importers = {path: zipimport.zipimporter(str(path)) for path in (kept, other)}
    for path in (kept, other):  # a module added to each archive after its importer read it
        _archive(path.parent, "first", "second")
    restore = keep_archives([str(tmp_path / "spark" / "python" / "lib")])
    try:
        for importer in importers.values():
            importer.invalidate_caches()
        assert importers[kept].find_spec("second") is None  # its directory was kept
        assert importers[other].find_spec("second") is not None  # read again
    finally:
        restore()
    importers[kept].invalidate_caches()
    assert importers[kept].find_spec("second") is not None  # Python's own behaviour back


def test_preload_imports_what_it_can_and_freezes_it() -> None:
    import gc
    import sys

    from icetide.spark.worker_daemon import PRELOAD, preload

    assert "icetide.ledger.decode" in PRELOAD
    try:
        missing = preload(["json", "icetide_no_such_module"])
        assert missing == ["icetide_no_such_module"]
        assert "json" in sys.modules
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()

"""The zip of icetide that a session on a non-local master ships to its executors."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import icetide
from icetide.spark.session import _package_zip


def test_the_zip_holds_every_module_and_is_named_by_its_contents() -> None:
    first, again = _package_zip(), _package_zip()
    assert first == again and first.exists()
    package = Path(icetide.__file__).parent
    modules = {
        str(Path("icetide") / p.relative_to(package))
        for p in package.rglob("*.py")
        if "__pycache__" not in p.parts
    }
    with zipfile.ZipFile(first) as archive:
        names = set(archive.namelist())
    assert modules <= names
    assert not any("__pycache__" in n for n in names)


def test_a_python_without_icetide_imports_it_from_the_zip(tmp_path: Path) -> None:
    # -I: isolated, so neither the working folder nor PYTHONPATH can supply icetide; -S
    # keeps site-packages (and an editable install of icetide) out of sys.path.
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "import icetide.events.position as p; print(p.__file__)"
    )
    found = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, str(_package_zip())],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert found.startswith(str(_package_zip())), found

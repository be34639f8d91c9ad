"""`carryall.local` as a package: its public names, and what importing it costs.

Every command that shows the local backend calls `status`; importing the
package must not load the archive modules, the file lock or the HTTP client,
which only an install or a running server needs.
"""

from __future__ import annotations

import subprocess
import sys
import types

import carryall.local
import carryall.paths
from carryall import llama_server


def test_status_callers_do_not_load_the_install_or_http_machinery() -> None:
    probe = (
        "import sys, carryall.local as local; local.status(); "
        "print(' '.join(sorted(m for m in ('tarfile', 'zipfile', 'filelock', 'httpx2') "
        "if m in sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_public_names_are_reexported_from_one_home() -> None:
    for name in carryall.local.__all__:
        assert hasattr(carryall.local, name), name
    # One reading of /props and one cache folder: the package re-exports them.
    assert carryall.local.capabilities_from_props is llama_server.capabilities_from_props
    assert carryall.local.model_from_props is llama_server.model_from_props
    assert carryall.local.cache_root is carryall.paths.cache_dir


def test_install_module_is_not_hidden_by_the_install_function() -> None:
    import carryall.local.installer as installer

    assert isinstance(installer, types.ModuleType)
    assert carryall.local.install is installer.install

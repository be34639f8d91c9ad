"""The backend table: every row opens as it says, and the refusals it states are made."""

from __future__ import annotations

from pathlib import Path

import pytest

from carryall.backend_specs import BACKEND_NAMES, BACKENDS, BackendSpec, hosted_capabilities
from carryall.backends import open_backend
from carryall.config import BackendSettings, Config
from carryall.errors import ProviderError

HOSTED = [spec for spec in BACKENDS.values() if spec.served_by == "row"]


def _key_env(monkeypatch: pytest.MonkeyPatch, spec: BackendSpec) -> None:
    for variable in spec.key_variables:
        monkeypatch.setenv(variable, f"test-key-for-{spec.name}")
    if not spec.takes_key:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLETABLE")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-for-a-table-test")


def test_the_table_holds_every_backend_once_in_the_documented_order() -> None:
    assert BACKEND_NAMES == (
        "anthropic",
        "openai",
        "responses",
        "gemini",
        "bedrock",
        "llama-server",
        "local",
    )
    assert all(name == spec.name for name, spec in BACKENDS.items())


@pytest.mark.parametrize("spec", HOSTED, ids=lambda spec: spec.name)
def test_a_hosted_row_opens_with_its_default_model_capabilities_and_image_limits(
    home: Path, monkeypatch: pytest.MonkeyPatch, spec: BackendSpec
) -> None:
    pytest.importorskip({"gemini": "google.genai", "bedrock": "boto3"}.get(spec.name, "msgspec"))
    _key_env(monkeypatch, spec)
    backend = open_backend(spec.name, base_url="http://127.0.0.1:9", config=Config())
    try:
        assert (backend.name, backend.model) == (spec.name, spec.default_model)
        assert backend.capabilities == hosted_capabilities(spec.name)
        assert backend.image_limits == spec.image_limits  # type: ignore[attr-defined]
    finally:
        backend.close()


@pytest.mark.parametrize("spec", [s for s in HOSTED if s.key_variables], ids=lambda spec: spec.name)
def test_a_row_needing_a_key_names_its_first_variable(home: Path, spec: BackendSpec) -> None:
    with pytest.raises(ProviderError, match=f"set {spec.key_variables[0]}") as caught:
        open_backend(spec.name, config=Config())
    assert caught.value.kind == "authentication_error"


@pytest.mark.parametrize(
    "spec", [s for s in HOSTED if not s.prompt_mode], ids=lambda spec: spec.name
)
def test_a_row_without_prompt_mode_refuses_native_tools_off(
    home: Path, monkeypatch: pytest.MonkeyPatch, spec: BackendSpec
) -> None:
    _key_env(monkeypatch, spec)
    config = Config(backends={spec.name: BackendSettings(native_tools=False)})
    with pytest.raises(ProviderError, match="has no prompt mode"):
        open_backend(spec.name, config=config)


def test_a_row_that_takes_no_key_refuses_one(home: Path) -> None:
    [spec] = [s for s in BACKENDS.values() if not s.takes_key]
    with pytest.raises(ProviderError, match="takes no API key argument"):
        open_backend(spec.name, api_key="sk-anything", config=Config())


def test_a_row_whose_server_says_has_no_capabilities_of_its_own() -> None:
    for spec in BACKENDS.values():
        assert (spec.capabilities is None) == (spec.served_by != "row"), spec.name
    with pytest.raises(KeyError, match="reads what its model can do from its server"):
        hosted_capabilities("local")

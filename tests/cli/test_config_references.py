"""A config that names a connection, model or route that does not exist stops the
gateway at startup (and a reload) with the name and the place, never at request time."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from sluice.cli.main import main
from sluice.config import read_config_file
from sluice.errors import UpstreamError
from sluice.routing.catalog import Catalog
from sluice.routing.references import check_references
from sluice.settings import build_settings
from sluice.transport.http import aws_signer

CONNECTION = """
[[connections]]
id = "conn_a"
provider = "openai-compatible"
base_url = "http://127.0.0.1:9"
"""


def semantic(embedder: str) -> str:
    """A model whose semantic cache embeds with ``embedder``."""
    return (
        '[[models]]\nid = "team/x"\nproviders = { conn_a = "x" }\n'
        f'cache = {{ semantic = {{ embedding_model = "{embedder}", threshold = 0.9 }} }}\n'
    )


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        (
            '[[models]]\nid = "team/x"\nproviders = { conn_b = "x" }\n',
            '[[models]] "team/x": providers names "conn_b", which is neither a connection '
            "(known: conn_a, conn_demo) nor a provider kind",
        ),
        (
            '[[routes]]\nname = "bot"\nchain = [ { model = "team/none" } ]\n',
            "route 'bot': unknown model 'team/none'",
        ),
        (
            '[[models]]\nid = "team/x"\nproviders = { conn_a = "x" }\n'
            '[[routes]]\nname = "bot"\nchain = [ { model = "team/x", connection = "conn_z" } ]\n',
            "route 'bot': unknown connection 'conn_z'",
        ),
        (
            '[[guardrails]]\nname = "no-x"\nstage = "output"\nkind = "keywords"\nwords = ["x"]\n'
            'applies_to = { routes = ["support-bott"] }\n',
            '[[guardrails]] "no-x": applies_to.routes names "support-bott", which is neither '
            "a route nor a model",
        ),
        (
            '[[models]]\nid = "team/x"\nproviders = { conn_a = "x" }\nfallbacks = ["team/y"]\n',
            "model 'team/x': unknown fallback 'team/y'",
        ),
        (
            semantic("team/none"),
            '[[models]] "team/x": cache.semantic.embedding_model names "team/none", which is '
            "not a model id of the catalog",
        ),
        (
            semantic("sluice/demo"),
            '[[models]] "team/x": cache.semantic.embedding_model names "sluice/demo", which '
            "cannot embed (its capabilities do not say embeddings = true)",
        ),
        (
            semantic("openai/text-embedding-3-small"),
            '[[models]] "team/x": cache.semantic.embedding_model names '
            '"openai/text-embedding-3-small", which no connection serves',
        ),
        (
            '[[models]]\nid = "team/x"\nproviders = { conn_a = "x" }\n'
            '[[routes]]\nname = "bot"\nchain = [ { model = "team/x" } ]\n'
            'cache = { semantic = { embedding_model = "team/x" } }\n',
            '[[routes]] "bot": cache.semantic.embedding_model names "team/x", which cannot embed',
        ),
    ],
    ids=[
        "model-connection",
        "route-model",
        "route-connection",
        "guardrail-route",
        "fallback",
        "embedder-unknown",
        "embedder-not-embedding",
        "embedder-unserved",
        "route-embedder",
    ],
)
def test_a_dangling_name_stops_the_gateway_naming_it(
    tmp_path: Path, toml: str, message: str
) -> None:
    config = tmp_path / "sluice.toml"
    config.write_text(CONNECTION + toml)
    result = CliRunner().invoke(main, ["serve", "--config", str(config), "--home", str(tmp_path)])
    assert result.exit_code == 1
    assert message in result.output
    assert "Traceback" not in result.output


def test_names_that_exist_start_it(tmp_path: Path) -> None:
    """Model providers may name a connection id or a provider kind (as the built-in
    catalog does); a guardrail may scope itself to a route or a model; a semantic cache
    may embed with the demo's embeddings model."""
    config = tmp_path / "sluice.toml"
    config.write_text(
        CONNECTION
        + '[[models]]\nid = "team/x"\nproviders = { conn_a = "x", openai = "y" }\n'
        + '[[routes]]\nname = "bot"\nchain = [ { model = "team/x" } ]\n'
        + 'cache = { semantic = { embedding_model = "sluice/demo-embed" } }\n'
        + '[[guardrails]]\nname = "no-x"\nstage = "output"\nkind = "keywords"\nwords = ["x"]\n'
        + 'applies_to = { routes = ["bot", "team/x"] }\n'
    )
    settings = build_settings(read_config_file(config), {}, tmp_path)
    catalog = Catalog.with_overrides(list(settings.models))
    check_references(
        settings.models, catalog, settings.connections, settings.routes, settings.guardrails
    )


def test_an_aws_signed_connection_without_the_aws_extra_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "botocore" else real(name, *a)
    )
    config = tmp_path / "sluice.toml"
    config.write_text(
        '[[connections]]\nid = "conn_b"\nprovider = "aws-bedrock"\nregion = "us-east-1"\n'
    )
    result = CliRunner().invoke(main, ["serve", "--config", str(config), "--home", str(tmp_path)])
    assert result.exit_code == 1
    assert "connection 'conn_b' signs its requests for AWS" in result.output
    assert "pip install 'sluice-gateway[aws]'" in result.output


def test_signing_without_botocore_fails_the_request_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "sluice.transport.aws_sigv4", None)  # import fails
    with pytest.raises(UpstreamError) as info:
        aws_signer(time.monotonic)
    assert "pip install 'sluice-gateway[aws]'" in info.value.message

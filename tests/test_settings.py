"""Config file + environment → settings, resolved once at startup."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.config import FileConfig, parse_config
from sluice.errors import ConfigError
from sluice.settings import Settings, answers_file, build_settings, resolve_home

HOME = Path("/tmp/sluice-home")


def settings(toml: str = "", env: dict[str, str] | None = None) -> Settings:
    return build_settings(parse_config(toml), env or {}, HOME)


def test_defaults_are_the_embedded_demo_setup() -> None:
    s = build_settings(FileConfig(), {}, HOME)
    assert (s.server.host, s.server.port) == ("127.0.0.1", 8787)
    assert s.storage_url == "sqlite:////tmp/sluice-home/sluice.db"
    assert [(c.id, c.provider) for c in s.connections] == [("conn_demo", "demo")]
    assert s.server.dev_key is True


def test_home_from_flag_then_env_then_default() -> None:
    assert resolve_home("/a", {"SLUICE_HOME": "/b"}) == Path("/a")
    assert resolve_home(None, {"SLUICE_HOME": "/b"}) == Path("/b")
    assert resolve_home(None, {}) == Path(".sluice")


def test_provider_keys_in_the_environment_create_connections() -> None:
    s = settings(env={"OPENAI_API_KEY": "sk-o", "DEEPSEEK_API_KEY": "sk-d", "UNRELATED": "x"})
    conns = {c.id: c for c in s.connections}
    assert set(conns) == {"conn_openai", "conn_deepseek", "conn_demo"}
    assert conns["conn_openai"].base_url == "https://api.openai.com/v1"
    assert conns["conn_deepseek"].base_url == "https://api.deepseek.com"
    key = conns["conn_openai"].api_key
    assert key is not None and key.reveal() == "sk-o"
    assert "sk-o" not in repr(conns["conn_openai"])


def test_config_says_otherwise() -> None:
    configured = """
[[connections]]
id = "conn_mine"
provider = "openai"
api_key_env = "MY_KEY"
"""
    s = settings(configured, {"OPENAI_API_KEY": "sk-o", "MY_KEY": "sk-mine"})
    assert [c.id for c in s.connections] == ["conn_mine", "conn_demo"]
    off = settings("[server]\nenv_connections = false\ndemo = false\n", {"OPENAI_API_KEY": "x"})
    assert off.connections == ()


def test_connection_fields_and_timeouts() -> None:
    s = settings("""
[[connections]]
id = "conn_local"
provider = "openai-compatible"
base_url = "http://127.0.0.1:11434/v1"
timeouts = { connect = 2, stall = 30 }
on_disconnect = "drain"
""")
    conn = s.connections[0]
    assert conn.api_key is None
    assert (conn.timeouts.connect, conn.timeouts.first_event, conn.timeouts.stall) == (2, 60, 30)
    assert conn.on_disconnect == "drain"


@pytest.mark.parametrize(
    ("toml", "env", "message"),
    [
        ('[[connections]]\nid = "a"\nprovider = "nope"\n', {}, "unknown provider kind 'nope'"),
        (
            '[[connections]]\nid = "a"\nprovider = "openai"\napi_key_env = "K"\n',
            {},
            "environment variable K is not set",
        ),
        ('[[connections]]\nid = "a"\nprovider = "openai-compatible"\n', {}, "base_url is required"),
        (
            '[[connections]]\nid = "a"\nprovider = "openai-compatible"\nbase_url = "file:///x"\n',
            {},
            "must be an http(s) URL",
        ),
        (
            '[[connections]]\nid = "conn_demo"\nprovider = "openai-compatible"\n'
            'base_url = "http://x"\n',
            {},
            "duplicate connection ids: conn_demo",
        ),
        ("[server]\nprot = 1\n", {}, "unknown field `prot`"),
        ('[server]\nport = "x"\n', {}, "Expected `int`, got `str` - at `$.server.port`"),
        ("[[connections]]\nid = \n", {}, "Invalid"),
        (
            "[server]\nclient_write_timeout = 0\n",
            {},
            "Expected `float` > 0.0 - at `$.server.client_write_timeout`",
        ),
        (
            '[[connections]]\nid = "a"\nprovider = "openai-compatible"\nbase_url = "http://x"\n'
            "timeouts = { stall = -1 }\n",
            {},
            "at `$.connections[0].timeouts.stall`",
        ),
        (
            "[server]\nmax_body_bytes = 2000\nmax_buffered_body_bytes = 1000\n",
            {},
            "max_buffered_body_bytes must be at least max_body_bytes",
        ),
        ("[server]\nupstream_event_bytes = 0\n", {}, "at `$.server.upstream_event_bytes`"),
        ("[server]\nmax_json_depth = 2\n", {}, "at `$.server.max_json_depth`"),
        ("[limits]\nkey = { requests = 5, window = inf }\n", {}, "at `$.limits.key.window`"),
        ("[limits]\nkey = { requests = 5, window = nan }\n", {}, "at `$.limits.key.window`"),
        (
            '[[connections]]\nid = "a"\nprovider = "openai-compatible"\nbase_url = "http://x"\n'
            "timeouts = { total = 0 }\n",
            {},
            "at `$.connections[0].timeouts.total`",
        ),
        (
            '[[connections]]\nid = "a"\nprovider = "openai-compatible"\nbase_url = "http://x"\n'
            'allow_extra_fields = ["min_p", "api_key", "base_url"]\n',
            {},
            "allow_extra_fields cannot name api_key, base_url",
        ),
        (
            '[[models]]\nid = "a/b"\nproviders = {}\ncapabilities = { vison = true }\n',
            {},
            "unknown field `vison`",
        ),
    ],
    ids=[
        "unknown-kind",
        "missing-key-var",
        "no-base-url",
        "bad-scheme",
        "duplicate-id",
        "typo",
        "wrong-type",
        "bad-toml",
        "zero-timeout",
        "negative-stall",
        "body-budget-below-body",
        "zero-event-bound",
        "shallow-json",
        "infinite-window",
        "nan-window",
        "zero-total",
        "extra-field-that-steers",
        "capability-typo",
    ],
)
def test_bad_configs_fail_loudly(toml: str, env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        settings(toml, env)
    assert message.lower() in str(info.value).lower()
    assert "sk-" not in str(info.value)


def test_bedrock_region_from_config_or_environment() -> None:
    toml = '[[connections]]\nid = "conn_br"\nprovider = "aws-bedrock"\nregion = "eu-west-1"\n'
    (conn,) = [c for c in settings(toml).connections if c.id == "conn_br"]
    assert conn.base_url == "https://bedrock-runtime.eu-west-1.amazonaws.com"
    assert conn.region == "eu-west-1" and conn.api_key is None
    plain = '[[connections]]\nid = "conn_br"\nprovider = "aws-bedrock"\n'
    (conn,) = [
        c for c in settings(plain, {"AWS_REGION": "us-west-2"}).connections if c.id == "conn_br"
    ]
    assert conn.base_url == "https://bedrock-runtime.us-west-2.amazonaws.com"
    with pytest.raises(ConfigError, match="region"):
        settings(plain)
    for odd in ("us-east-1.", "../../x", "US-EAST-1"):  # a region goes into a host name
        with pytest.raises(ConfigError, match="region"):
            settings(plain.replace('"aws-bedrock"\n', f'"aws-bedrock"\nregion = "{odd}"\n'))
    custom = plain + 'base_url = "https://bedrock.example.internal"\n'
    with pytest.raises(ConfigError, match="region"):
        settings(custom)
    keyed = custom + 'api_key_env = "BR_KEY"\n'
    (conn,) = [c for c in settings(keyed, {"BR_KEY": "k"}).connections if c.id == "conn_br"]
    assert conn.region is None and conn.api_key is not None


BEDROCK = '[[connections]]\nid = "conn_br"\nprovider = "aws-bedrock"\n'


@pytest.mark.parametrize(
    ("toml", "env", "region"),
    [
        (BEDROCK + 'region = "eu-west-1"\n', {"AWS_REGION": "us-west-2"}, "eu-west-1"),
        (BEDROCK, {"AWS_REGION": "us-west-2", "AWS_DEFAULT_REGION": "ap-south-1"}, "us-west-2"),
        (BEDROCK, {"AWS_DEFAULT_REGION": "ap-south-1"}, "ap-south-1"),
        (BEDROCK, {"AWS_REGION": "", "AWS_DEFAULT_REGION": "ap-south-1"}, "ap-south-1"),
    ],
    ids=["config-wins", "region-over-default", "default-region", "empty-region-skipped"],
)
def test_a_region_comes_from_config_then_the_providers_variables(
    toml: str, env: dict[str, str], region: str
) -> None:
    (conn,) = [c for c in settings(toml, env).connections if c.id == "conn_br"]
    assert (conn.region, conn.base_url) == (
        region,
        f"https://bedrock-runtime.{region}.amazonaws.com",
    )


def test_a_missing_region_names_where_to_set_it() -> None:
    with pytest.raises(ConfigError, match=r"set `region` or AWS_REGION to sign aws-bedrock"):
        settings(BEDROCK + 'base_url = "https://bedrock.example.internal"\n')
    with pytest.raises(
        ConfigError, match=r"a region is required for aws-bedrock \(set `region` or AWS_REGION\)"
    ):
        settings(BEDROCK)
    templated = (
        '[[connections]]\nid = "c"\nprovider = "openai-compatible"\n'
        'base_url = "https://{region}.x"\n'
    )
    with pytest.raises(
        ConfigError, match=r"a region is required for openai-compatible \(set `region`\)$"
    ):
        settings(templated, {"AWS_REGION": "us-east-1"})  # AWS variables are not its own


def test_anthropic_and_gemini_keys_in_the_environment() -> None:
    s = settings(
        env={
            "ANTHROPIC_API_KEY": "a",
            "GEMINI_API_KEY": "g",
            "AWS_BEARER_TOKEN_BEDROCK": "b",
            "AWS_REGION": "us-east-1",
        }
    )
    ids = {c.id: c.base_url for c in s.connections}
    assert ids == {
        "conn_anthropic": "https://api.anthropic.com",
        "conn_gemini": "https://generativelanguage.googleapis.com",
        "conn_aws_bedrock": "https://bedrock-runtime.us-east-1.amazonaws.com",
        "conn_demo": "demo://local",
    }


PG = '[storage]\nurl = "postgresql://sluice@db.internal/sluice"\n'


@pytest.mark.parametrize(
    ("toml", "dev_key", "demo"),
    [
        ("", True, True),
        ("[server]\ndev_key = false\ndemo = false\n", False, False),
        (PG, False, False),
        (PG + "[server]\ndev_key = true\n", True, False),
        (PG + "[server]\ndemo = true\n", False, True),
        (PG + "[server]\ndev_key = true\ndemo = true\n", True, True),
    ],
    ids=["sqlite", "sqlite-off", "postgres", "postgres-dev-key", "postgres-demo", "postgres-both"],
)
def test_shared_storage_has_no_dev_key_or_demo_unless_the_file_turns_them_on(
    toml: str, dev_key: bool, demo: bool
) -> None:
    s = settings(toml)
    assert (s.server.dev_key, s.server.demo) == (dev_key, demo)
    assert [c.id for c in s.connections] == (["conn_demo"] if demo else [])


def test_the_storage_in_use_decides_until_a_restart() -> None:
    """A reload reads a file naming other storage: the defaults stay the running one's."""
    to_sqlite = build_settings(parse_config(""), {}, HOME, storage_in_use="postgresql://db/x")
    assert (to_sqlite.server.dev_key, to_sqlite.server.demo, to_sqlite.connections) == (
        False,
        False,
        (),
    )
    assert to_sqlite.storage_url == "sqlite:////tmp/sluice-home/sluice.db"  # what a restart uses
    running = build_settings(parse_config(PG), {}, HOME, storage_in_use="sqlite:///x.db")
    assert (running.server.dev_key, running.server.demo) == (True, True)


LOCAL = (
    '[[connections]]\nid = "conn_local"\nprovider = "openai-compatible"\nbase_url = "http://h/v1"\n'
)
SIGNED = '[[connections]]\nid = "conn_local"\nprovider = "aws-bedrock"\nregion = "us-east-1"\n'


@pytest.mark.parametrize("connection", [LOCAL, SIGNED], ids=["openai-compatible", "aws-bedrock"])
@pytest.mark.parametrize("env", [{}, {"LOCAL_KEY": ""}], ids=["unset", "empty"])
def test_a_named_key_variable_must_be_set_whatever_the_provider(
    connection: str, env: dict[str, str]
) -> None:
    """A connection that names ``api_key_env`` would otherwise send no key at all."""
    with pytest.raises(
        ConfigError, match=r"^connection 'conn_local': environment variable LOCAL_KEY is not set$"
    ):
        settings(connection + 'api_key_env = "LOCAL_KEY"\n', env)
    conn = settings(connection + 'api_key_env = "LOCAL_KEY"\n', {"LOCAL_KEY": "k-1"}).connections[0]
    assert conn.api_key is not None and conn.api_key.reveal() == "k-1"
    assert settings(connection).connections[0].api_key is None  # naming none: no key, as before


@pytest.mark.parametrize(
    ("toml", "workers", "where"),
    [
        ("", None, None),
        ("[server]\nworkers = 4\n", None, "/tmp/sluice-home/sluice-cache.db"),
        ("", 4, "/tmp/sluice-home/sluice-cache.db"),
        ('[storage]\nurl = "sqlite:///data/gw.db"\n', 2, "data/gw-cache.db"),
        (PG, 4, None),
        ('[cache]\nstore = "memory"\n', 4, None),
        ('[cache]\nstore = "sqlite"\n', None, "/tmp/sluice-home/sluice-cache.db"),
        (PG + '[cache]\nstore = "sqlite"\n', None, "/tmp/sluice-home/sluice-cache.db"),
        ('[cache]\nstore = "sqlite"\npath = "/var/cache/a.db"\n', None, "/var/cache/a.db"),
    ],
    ids=[
        "one-worker",
        "workers",
        "workers-flag",
        "beside-the-database",
        "postgres",
        "memory",
        "sqlite",
        "sqlite-postgres",
        "path",
    ],
)
def test_the_answers_are_in_a_sqlite_file_when_workers_share_the_sqlite_storage(
    toml: str, workers: int | None, where: str | None
) -> None:
    s = build_settings(parse_config(toml), {}, HOME, workers=workers)
    assert answers_file(s) == (None if where is None else Path(where))

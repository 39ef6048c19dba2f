"""deploy/, each recipe checked by the tool made for its kind (hadolint, shellcheck, the
compose-spec and Kubernetes schemas, ``systemd-analyze``), and what no linter sees checked
against the gateway: each recipe's config serves, ready, with the variables the recipe
supplies; the image's health check fails when it should; stop timeouts outlast the drain.
Nothing here builds the image, applies the manifests or starts the unit (no Docker,
cluster or systemd as PID 1: docs/deploy.md). ``make test`` installs the tools (the dev
extra; systemd by scripts/deps.sh: absent, its test skips, except under ``CI=true``).
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import uuid
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from subprocess import PIPE
from typing import Any
from urllib.parse import urlsplit

import msgspec
import pytest
import yaml
from cryptography.fernet import Fernet

from sluice.config import DEFAULT_PORT, FileConfig, parse_config
from sluice.server.lifecycle import start_gateway, stop_gateway
from sluice.settings import HOME_ENV, build_settings
from tests.support.databases import fresh_postgres, missing

ROOT = Path(__file__).parent.parent.parent
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "kubernetes"
BIN = Path(sys.executable).parent
WORKER_MARGIN = 10.0
"""A worker still draining this long after ``shutdown_grace`` is killed by its
supervisor (sluice/server/workers.py): a stop timeout must outlast both."""


def run(*argv: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, check=False)


def yaml_file(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


def tool(name: str) -> Path:
    found = BIN / name
    assert found.exists(), f"{name} is missing: make test installs it (pyproject.toml, dev)"
    return found


# -- the Dockerfile ---------------------------------------------------------------------


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    """(instruction, arguments) per stage, comments dropped and continuations joined."""
    lines = (DEPLOY / "Dockerfile").read_text().splitlines()
    text = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
    stages: list[list[tuple[str, str]]] = []
    for line in re.sub(r"\\\n", " ", text).splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            if word.upper() == "FROM":
                stages.append([])
            stages[-1].append((word.upper(), rest.strip()))
    return stages


def final(instruction: str) -> str:
    """The arguments of the final stage's last ``instruction``."""
    [*_, found] = [args for word, args in dockerfile_stages()[-1] if word == instruction]
    return found


def healthcheck() -> list[str]:
    """The image's HEALTHCHECK command (exec form)."""
    argv: list[str] = json.loads(final("HEALTHCHECK").partition(" CMD ")[2])
    return argv


def config_path_in_image() -> str:
    command: list[str] = json.loads(final("CMD"))
    return command[command.index("--config") + 1]


def image_user() -> str:
    return final("USER").split(":")[0]


def image_home() -> str:
    found = re.search(rf"{HOME_ENV}=(\S+)", final("ENV"))
    assert found is not None
    return found[1]


def test_hadolint_and_shellcheck_find_nothing_in_the_dockerfile_and_its_entrypoint() -> None:
    linted = run(tool("hadolint"), DEPLOY / "Dockerfile")
    assert linted.returncode == 0 and not linted.stdout, linted.stdout + linted.stderr
    linted = run(tool("shellcheck"), DEPLOY / "image" / "entrypoint.sh")
    assert linted.returncode == 0, linted.stdout + linted.stderr


def test_the_image_builds_the_wheel_then_installs_its_server_extra_on_slim() -> None:
    build, final = dockerfile_stages()
    assert build[0] == ("FROM", "python:3.11-slim AS build")
    assert final[0] == ("FROM", "python:3.11-slim")
    steps = " ".join(args for word, args in build if word == "RUN")
    assert "python -m build --wheel" in steps and '"$1[server]"' in steps  # pyproject's extra
    assert any(word == "COPY" and args.startswith("--from=build ") for word, args in final)


def test_the_image_runs_sluice_serve_unprivileged_and_stops_on_sigterm() -> None:
    assert image_user() != "0" and image_user().isdigit()  # numeric: runAsNonRoot can tell
    assert final("STOPSIGNAL") == "SIGTERM"
    assert json.loads(final("CMD"))[:2] == ["sluice", "serve"]  # exec form: no shell
    assert json.loads(final("ENTRYPOINT")) == ["sluice-entrypoint"]
    assert (DEPLOY / "image" / "entrypoint.sh").read_text().rstrip().endswith('exec "$@"')
    assert final("EXPOSE") == str(toml_of("image").server.port) == str(DEFAULT_PORT)
    assert json.loads(final("VOLUME")) == [image_home()]
    copied = [args.split()[-2:] for word, args in dockerfile_stages()[-1] if word == "COPY"]
    assert ["deploy/image/sluice.toml", config_path_in_image()] in copied
    assert "--timeout=" in final("HEALTHCHECK") and healthcheck()[:2] == ["python", "-c"]
    assert f"http://127.0.0.1:{DEFAULT_PORT}/health/ready" in healthcheck()[2]


def dockerignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule as far as .dockerignore uses it: the last pattern matching the path
    or a folder above it decides; ``!`` takes the path back in."""
    prefixes = ["/".join(path.split("/")[:n]) for n in range(1, path.count("/") + 2)]
    out = False
    for pattern in patterns:
        if any(fnmatch.fnmatchcase(p, pattern.removeprefix("!")) for p in prefixes):
            out = not pattern.startswith("!")
    return out


def test_the_build_context_holds_what_the_dockerfile_copies_and_no_more() -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    patterns = [line for line in lines if line and not line.startswith("#")]
    sources = [
        source
        for stage in dockerfile_stages()
        for word, args in stage
        if word == "COPY" and "--from=" not in args
        for source in [a for a in args.split() if not a.startswith("--")][:-1]
    ]
    assert sources, "no COPY"
    for source in sources:
        files = [ROOT / source] if (ROOT / source).is_file() else (ROOT / source).rglob("*")
        for file in files:
            if file.is_file() and "__pycache__" not in file.parts:
                assert not dockerignored(file.relative_to(ROOT).as_posix(), patterns), file
    for kept_out in (".venv/bin/python", ".git/HEAD", ".sluice/dev-key", "tests/conftest.py",
                     "deploy/secrets/postgres_password", "sluice/__pycache__/x.pyc"):  # fmt: skip
        assert dockerignored(kept_out, patterns), kept_out


def entrypoint(tmp_path: Path, env: dict[str, str], *command: str) -> subprocess.Popen[str]:
    env = {"PATH": os.environ["PATH"], "SLUICE_SECRETS_DIR": str(tmp_path), **env}
    argv = ["sh", str(DEPLOY / "image" / "entrypoint.sh"), *command]
    return subprocess.Popen(argv, env=env, stdout=PIPE, stderr=PIPE, text=True)


def test_the_entrypoint_sets_secrets_from_their_files_then_becomes_the_command(
    tmp_path: Path,
) -> None:
    (tmp_path / "pg").write_text("pass word\n")
    elsewhere = tmp_path.parent / "ca.pem"
    env = {"PGPASSWORD_FILE": str(tmp_path / "pg"), "SSL_CERT_FILE": str(elsewhere)}
    show = "import os, json; print(json.dumps([os.getpid(), dict(os.environ)]))"
    process = entrypoint(tmp_path, env, sys.executable, "-c", show)
    out, err = process.communicate(timeout=10)
    pid, seen = json.loads(out)
    assert pid == process.pid, err  # exec: the command is the process signals reach
    assert seen["PGPASSWORD"] == "pass word" and "PGPASSWORD_FILE" not in seen
    assert seen["SSL_CERT_FILE"] == str(elsewhere) and "SSL_CERT" not in seen  # not a secret


def test_the_entrypoint_refuses_a_secret_given_twice(tmp_path: Path) -> None:
    (tmp_path / "pg").write_text("one")
    env = {"PGPASSWORD": "two", "PGPASSWORD_FILE": str(tmp_path / "pg")}
    process = entrypoint(tmp_path, env, "true")
    _, err = process.communicate(timeout=10)
    assert process.returncode == 1 and "both PGPASSWORD and PGPASSWORD_FILE" in err


# -- compose ----------------------------------------------------------------------------


def compose() -> dict[str, Any]:
    return yaml_file(DEPLOY / "compose.yaml")


def test_the_compose_file_follows_the_compose_spec() -> None:
    checked = run(tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec",
                  DEPLOY / "compose.yaml")  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_compose_starts_each_service_after_what_it_needs_is_healthy() -> None:
    services = compose()["services"]
    for name, service in services.items():
        assert "healthcheck" in service, name
        for needed, how in service.get("depends_on", {}).items():
            assert how == {"condition": "service_healthy"}, (name, needed)
    sluice = services["sluice"]
    assert sluice["healthcheck"]["test"] == ["CMD", *healthcheck()]
    grace = toml_of("compose").server.shutdown_grace
    assert float(sluice["stop_grace_period"].removesuffix("s")) > grace + WORKER_MARGIN
    assert sluice["stop_signal"] == "SIGTERM" and sluice["read_only"] is True


def test_compose_mounts_the_config_the_nginx_file_and_the_secrets_it_declares() -> None:
    spec = compose()
    sluice, nginx = spec["services"]["sluice"], spec["services"]["nginx"]
    assert f"./compose/sluice.toml:{config_path_in_image()}:ro" in sluice["volumes"]
    assert "./nginx/sluice.conf:/etc/nginx/conf.d/default.conf:ro" in nginx["volumes"]
    for mount in [*sluice["volumes"], *nginx["volumes"]]:
        source = mount.split(":")[0]
        assert not source.startswith(".") or (DEPLOY / source).exists(), source
    # the gateway in nginx's network: sluice.conf's upstream, as it is, is the gateway
    assert sluice["network_mode"] == "service:nginx" and "ports" not in sluice
    server = toml_of("compose").server
    upstream = f"server {server.host}:{server.port};"
    assert upstream in (DEPLOY / "nginx" / "sluice.conf").read_text()
    declared = spec["secrets"]
    for service in spec["services"].values():
        for secret in service.get("secrets", []):
            assert secret in declared and declared[secret]["file"].startswith("./secrets/")
    for variable, path in sluice["environment"].items():
        assert variable.endswith("_FILE") and path.removeprefix("/run/secrets/") in declared


# -- Kubernetes -------------------------------------------------------------------------


def manifest(name: str) -> dict[str, Any]:
    return yaml_file(K8S / name)


def pod() -> dict[str, Any]:
    spec: dict[str, Any] = manifest("deployment.yaml")["spec"]["template"]["spec"]
    return spec


@pytest.mark.parametrize("version", ["1.30", "latest"])
def test_the_kubernetes_manifests_follow_the_api_schemas(version: str) -> None:
    files = manifest("kustomization.yaml")["resources"]
    assert sorted(files) == sorted(p.name for p in K8S.glob("*.yaml") if p.stem != "kustomization")
    pinned = [] if version == "latest" else ["--kubernetes-version", version]
    checked = run(tool("kubernetes-validate"), "--strict", *pinned, *(K8S / f for f in files))
    assert checked.returncode == 0 and "WARN" not in checked.stdout, checked.stdout


def test_the_deployment_probes_stops_and_is_selected_as_the_gateway_expects() -> None:
    spec = pod()
    [container] = spec["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/health/ready"
    assert container["livenessProbe"]["httpGet"]["path"] == "/health/live"
    [port] = container["ports"]
    assert port["containerPort"] == toml_of("kubernetes").server.port
    labels = manifest("deployment.yaml")["spec"]["template"]["metadata"]["labels"]
    assert manifest("service.yaml")["spec"]["selector"] == labels
    assert manifest("pdb.yaml")["spec"]["selector"]["matchLabels"] == labels
    assert manifest("service.yaml")["spec"]["ports"][0]["targetPort"] == port["name"]
    grace = toml_of("kubernetes").server.shutdown_grace
    sleep = container["lifecycle"]["preStop"]["exec"]["command"]
    assert sleep[0] == "sleep"
    assert spec["terminationGracePeriodSeconds"] > float(sleep[1]) + grace + WORKER_MARGIN


def test_the_pod_runs_unprivileged_on_a_read_only_root() -> None:
    spec = pod()
    [container] = spec["containers"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] == int(image_user())
    context = container["securityContext"]
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False and context["capabilities"]["drop"]
    # writable: SLUICE_HOME (made at start) and /tmp; the config is the ConfigMap's
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    for writable in (image_home(), "/tmp"):
        assert "emptyDir" in volumes[mounts[writable]], writable
    folder, _, file = config_path_in_image().rpartition("/")
    config_map = manifest("configmap.yaml")
    assert volumes[mounts[folder]]["configMap"]["name"] == config_map["metadata"]["name"]
    assert file in config_map["data"]


# -- systemd ----------------------------------------------------------------------------


def unit() -> dict[str, list[str]]:
    values: dict[str, list[str]] = {}
    for line in (DEPLOY / "systemd" / "sluice.service").read_text().splitlines():
        if "=" in line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            values.setdefault(key, []).append(value)
    return values


def runnable_unit(tmp_path: Path) -> Path:
    """The unit with its ExecStart on this venv's ``sluice``: verify wants it to exist."""
    text = (DEPLOY / "systemd" / "sluice.service").read_text()
    [binary] = {value.split()[0] for value in unit()["ExecStart"]}
    copy = tmp_path / "sluice.service"
    copy.write_text(text.replace(f"ExecStart={binary} ", f"ExecStart={tool('sluice')} "))
    return copy


def test_systemd_analyze_verifies_the_unit(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        missing("systemd-analyze is not installed (scripts/deps.sh installs Debian's systemd)")
    verified = run(analyze, "verify", runnable_unit(tmp_path))
    assert verified.returncode == 0 and not verified.stdout + verified.stderr, verified.stderr
    rated = run(analyze, "security", "--offline=yes", "--threshold=20", runnable_unit(tmp_path))
    assert rated.returncode == 0, rated.stdout[-2000:]  # exposure 2.0 or less: "OK"


def test_the_unit_runs_sluice_serve_as_its_own_user_and_outlasts_the_drain() -> None:
    values = unit()
    [start] = values["ExecStart"]
    argv = start.split()
    assert argv[0].endswith("/sluice") and argv[1:3] == ["serve", "--config"]
    grace = toml_of("systemd").server.shutdown_grace
    assert float(values["TimeoutStopSec"][0]) > grace + WORKER_MARGIN
    assert values["KillSignal"] == ["SIGTERM"] and values["KillMode"] == ["mixed"]
    assert values["User"][0] not in {"root", "0"}
    assert f"{HOME_ENV}=/var/lib/{values['StateDirectory'][0]}" in values["Environment"]
    assert argv[3] == f"/etc/{values['ConfigurationDirectory'][0]}/sluice.toml"
    assert values["ProtectSystem"] == ["strict"] and values["NoNewPrivileges"] == ["yes"]
    assert values["EnvironmentFile"] == ["/etc/sluice/sluice.env"]


# -- every recipe's config, served ------------------------------------------------------


def toml_of(recipe: str) -> FileConfig:
    if recipe == "kubernetes":
        return parse_config(manifest("configmap.yaml")["data"]["sluice.toml"], recipe)
    return parse_config((DEPLOY / recipe / "sluice.toml").read_text(), recipe)


def variables_of(recipe: str) -> set[str]:
    """The variables the recipe gives the gateway (values are the operator's)."""
    if recipe == "compose":
        return {v.removesuffix("_FILE") for v in compose()["services"]["sluice"]["environment"]}
    if recipe == "kubernetes":
        return {e["name"] for e in pod()["containers"][0]["env"]}
    if recipe == "systemd":
        example = (DEPLOY / "systemd" / "sluice.env.example").read_text()
        return set(re.findall(r"^#?([A-Z][A-Z0-9_]*)=", example, re.MULTILINE))
    return set()


async def health_check_exit(port: int) -> int:
    """The image's HEALTHCHECK program, run against ``port`` on 127.0.0.1."""
    _, _, program = healthcheck()
    program = program.replace(f"127.0.0.1:{DEFAULT_PORT}", f"127.0.0.1:{port}")
    probe = await asyncio.create_subprocess_exec(
        sys.executable, "-c", program, stderr=asyncio.subprocess.DEVNULL
    )
    return await asyncio.wait_for(probe.wait(), 10)


@pytest.mark.parametrize("recipe", ["image", "compose", "kubernetes", "systemd"])
async def test_each_recipes_config_serves_and_passes_the_health_check(
    recipe: str, tmp_path: Path
) -> None:
    """The recipe's own file, with its database and Redis addresses pointed at this
    machine's (the recipe's hosts exist only where it runs)."""
    file = toml_of(recipe)
    server = file.server
    assert server.dev_key is False and server.demo is False
    given = variables_of(recipe)
    env = {server.admin_key_env: "a" * 40, server.secret_key_env: Fernet.generate_key().decode()}
    if recipe == "image":  # the image alone leaves the admin API off until told
        env = {}
    else:
        assert set(env) <= given
    shared = (file.storage.url or "").startswith("postgresql://")
    if shared:  # the password is not in the file: the driver reads PGPASSWORD
        assert urlsplit(file.storage.url or "").password is None and "PGPASSWORD" in given
    database: AbstractAsyncContextManager[str] = (
        fresh_postgres() if shared else contextlib.nullcontext(f"sqlite:///{tmp_path}/s.db")
    )
    async with database as url:
        limits = file.limits
        if limits.redis_url is not None:
            limits = msgspec.structs.replace(
                limits, redis_url="redis://127.0.0.1:6379/0", key_prefix=f"t:{uuid.uuid4()}:"
            )
        storage = msgspec.structs.replace(file.storage, url=url)
        here = msgspec.structs.replace(file, storage=storage, limits=limits)
        settings = build_settings(here, env, tmp_path / "home", host="127.0.0.1", port=0)
        assert (settings.admin_key is None) == (recipe == "image")
        running = await start_gateway(settings)
        try:
            assert await health_check_exit(running.port) == 0
        finally:
            await stop_gateway(running, grace=1)


async def test_the_health_check_fails_when_the_gateway_is_not_ready(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on: Redis is not there
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    file = toml_of("image")
    limits = msgspec.structs.replace(file.limits, redis_url=f"redis://127.0.0.1:{closed}/0")
    here = msgspec.structs.replace(file, limits=limits)
    running = await start_gateway(build_settings(here, {}, tmp_path, host="127.0.0.1", port=0))
    try:
        assert await health_check_exit(running.port) != 0  # 503: limits failing
    finally:
        await stop_gateway(running, grace=1)
    assert await health_check_exit(running.port) != 0  # nothing listens

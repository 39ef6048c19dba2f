"""``sluice keys``: create, list, update, revoke API keys in the gateway's storage.

A key's policy (allowed models, expiry, its own rate limits, label, metadata) is set at
creation or later with ``update``; it takes effect on the key's next request.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import click
import msgspec

from sluice.accounts.keys import (
    SHORTEST_NAMING_PREFIX,
    key_digest,
    key_prefix,
    keys_named,
    new_key,
    none_named,
)
from sluice.accounts.policy import KeyChanges, apply_changes, iso_time, key_doc
from sluice.cli.admin import _run, config_option, home_option
from sluice.cli.allowance import allowance_changes, allowance_options, checked, given
from sluice.core.principal import NO_POLICY
from sluice.errors import ApiError
from sluice.ids import ordered_id
from sluice.storage.base import KeyInfo, Store


def _policy_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options ``create`` and ``update`` share (``none`` clears one on update)."""
    for option in reversed(
        [
            click.option(
                "--models", default=None, help="Allowed models, as globs: team/*,my-model."
            ),
            click.option("--expires", default=None, help="Expiry, ISO 8601 with a time zone."),
            click.option("--label", "--name", "label", default=None, help="A label for listings."),
            click.option(
                "--resumable/--not-resumable",
                default=None,
                help="Every stream of the key is resumable (docs/api.md#resumable-streams).",
            ),
            click.option(
                "--cache-read/--no-cache-read",
                default=None,
                help="The key's requests may be answered from the response cache.",
            ),
            click.option(
                "--cache-fill/--no-cache-fill",
                default=None,
                help="The key's answers may be kept by the response cache.",
            ),
        ]
    ):
        command = option(command)
    return allowance_options(command)


def _changes(
    *,
    models: str | None,
    expires: str | None,
    label: str | None,
    resumable: bool | None,
    cache_read: bool | None,
    cache_fill: bool | None,
    **allowance: Any,
) -> KeyChanges:
    model_list = given(models)
    if isinstance(model_list, str):  # "" allows none, as [] does in the admin API
        model_list = [m.strip() for m in model_list.split(",") if m.strip()]
    fields = {"label": given(label), "models": model_list, "expires_at": given(expires)}
    for name, value in (
        ("resumable", resumable),
        ("cache_read", cache_read),
        ("cache_fill", cache_fill),
    ):
        if value is not None:
            fields[name] = value
    return checked(KeyChanges, fields | allowance_changes(**allowance))


def _describe(key: KeyInfo) -> str:
    policy = key.policy
    parts = [f"{key.prefix}…", key.name or "-", "revoked" if key.revoked_at else "live"]
    if policy.models is not None:
        parts.append("models=" + ",".join(policy.models))
    if policy.expires_at is not None:
        parts.append(f"expires={iso_time(policy.expires_at)}")
    parts += [f"{k}={v}" for k, v in (("rpm", policy.rpm), ("tpm", policy.tpm)) if v]
    if policy.resumable:
        parts.append("resumable")
    says = (("cache_read", policy.cache_read), ("cache_fill", policy.cache_fill))
    parts += [f"{name}=no" for name, may in says if not may]
    return "  ".join(parts)


@click.group()
def keys() -> None:
    """API keys (stored hashed; only a short prefix stays readable)."""


@keys.command("create")
@click.option("--account", "account_name", required=True, help="The account the key uses.")
@_policy_options
@config_option
@home_option
def keys_create(
    account_name: str, config_path: Path | None, home: str | None, **options: Any
) -> None:
    """Create a key and print it (the only time it is shown)."""
    key = new_key(os.urandom(32))
    try:
        label, policy = apply_changes(_changes(**options), None, NO_POLICY)
    except ApiError as err:
        raise click.BadParameter(err.message) from None

    async def work(store: Store) -> None:
        account = await store.get_account(account_name)
        if account is None:
            raise click.ClickException(f"no account named {account_name!r}")
        await store.add_key(
            ordered_id("key"),
            account_id=account.id,
            key_digest=key_digest(key),
            prefix=key_prefix(key),
            name=label,
            now=int(time.time()),
            policy=policy,
        )

    _run(config_path, home, work)
    click.echo(key)


def _as_listed(text: str) -> str:
    """A prefix as ``keys list`` prints it (``sk-sluice-AbCd…``) is that prefix."""
    return text.removesuffix("…").removesuffix("...")


def _long_enough(_ctx: click.Context, _param: click.Parameter, prefix: str) -> str:
    """A key prefix names one key only from ``sk-sluice-`` and 4 more characters on (the
    admin API's rule); its trailing ``…`` as listed is dropped."""
    prefix = _as_listed(prefix)
    if len(prefix) < SHORTEST_NAMING_PREFIX:
        raise click.BadParameter("give at least `sk-sluice-` and 4 more characters")
    return prefix


_PREFIX = click.argument("prefix", callback=_long_enough)


@keys.command("update")
@_PREFIX
@_policy_options
@config_option
@home_option
def keys_update(prefix: str, config_path: Path | None, home: str | None, **options: Any) -> None:
    """Change the policy of the live key starting with PREFIX (`none` clears a value)."""
    changes = _changes(**options)

    async def work(store: Store) -> dict[str, object]:
        found = await store.find_key(prefix)
        if found is None:
            raise click.ClickException(f"no live key starts with {prefix!r}")
        changed = await store.change_key(found.id, partial(apply_changes, changes))
        if changed is None:
            raise click.ClickException(f"no live key starts with {prefix!r}")
        updated = msgspec.structs.replace(found, name=changed[0], policy=changed[1])
        return await key_doc(store, updated, int(time.time()))

    try:
        doc = _run(config_path, home, work)
    except ApiError as err:
        raise click.ClickException(err.message) from None
    click.echo(json.dumps(doc))


@keys.command("rotate")
@_PREFIX
@config_option
@home_option
def keys_rotate(prefix: str, config_path: Path | None, home: str | None) -> None:
    """A new secret for the live key starting with PREFIX (same policy, same spend);
    the old secret stops working. Prints the new key (the only time it is shown)."""
    key = new_key(os.urandom(32))

    async def work(store: Store) -> None:
        found = await store.find_key(prefix)
        if found is None:
            raise click.ClickException(f"no live key starts with {prefix!r}")
        if not await store.rotate_key(
            found.id, key_digest=key_digest(key), prefix=key_prefix(key), was=found.prefix
        ):
            raise click.ClickException("the key was rotated or revoked meanwhile; try again")

    try:
        _run(config_path, home, work)
    except ApiError as err:
        raise click.ClickException(err.message) from None
    click.echo(key)


@keys.command("list")
@click.option("--account", "account_name", required=True)
@click.option("--json", "as_json", is_flag=True, help="A JSON array for scripts.")
@config_option
@home_option
def keys_list(account_name: str, as_json: bool, config_path: Path | None, home: str | None) -> None:
    """The account's keys by prefix (never the keys themselves)."""

    async def work(store: Store) -> list[str] | list[dict[str, object]]:
        account = await store.get_account(account_name)
        if account is None:
            raise click.ClickException(f"no account named {account_name!r}")
        found = await store.list_keys(account.id)
        if not as_json:
            return [_describe(k) for k in found]
        now = int(time.time())
        return [await key_doc(store, k, now) for k in found]

    listed = _run(config_path, home, work)
    if as_json:
        click.echo(json.dumps(listed, indent=2))
        return
    for line in listed:
        click.echo(line)


def _named(_ctx: click.Context, _param: click.Parameter, text: str) -> str:
    """A key id, a whole key or a prefix (``-``: one line of stdin, so a leaked key need
    not go into the shell's history or the process list)."""
    if text == "-":
        text = sys.stdin.readline().strip()
    text = _as_listed(text)
    try:
        keys_named(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return text


@keys.command("revoke")
@click.argument("named", metavar="KEY", callback=_named)
@config_option
@home_option
def keys_revoke(named: str, config_path: Path | None, home: str | None) -> None:
    """Revoke the key with id KEY (`key_…`), the key KEY given whole (or `-` to read it
    from stdin), or every live key starting with KEY (`sk-sluice-` and 4 or more)."""

    async def work(store: Store) -> list[KeyInfo]:
        return await store.revoke_keys(keys_named(named), int(time.time()))

    revoked = _run(config_path, home, work)
    if not revoked:
        raise click.ClickException(none_named(named))
    for key in revoked:
        click.echo(f"revoked {key.id}  {key.prefix}…  {key.name or '-'}")

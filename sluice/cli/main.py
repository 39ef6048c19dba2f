"""The ``sluice`` command.

The client commands (``chat``, ``bench``, ``replay``) need only ``pip install sluice-gateway``.
The gateway's commands are imported when one is run: without the ``server`` extra
they are still listed, and running one says which install it needs.
"""

from __future__ import annotations

import importlib
from types import MappingProxyType

import click

from sluice import __version__
from sluice.cli.bench import bench_command
from sluice.cli.chat import chat_command
from sluice.cli.record import record_command
from sluice.cli.replay import replay_command

SERVER_EXTRA = "pip install 'sluice-gateway[server]'"
GATEWAY_COMMANDS = MappingProxyType(
    {
        "serve": ("sluice.cli.serve", "serve"),
        "reload": ("sluice.cli.reload", "reload_command"),
        "init": ("sluice.cli.init", "init_command"),
        "accounts": ("sluice.cli.accounts_list", "accounts_group"),
        "keys": ("sluice.cli.keys", "keys"),
        "ledger": ("sluice.cli.admin", "ledger"),
        "requests": ("sluice.cli.requests", "requests"),
        "spend": ("sluice.cli.spend", "spend_command"),
    }
)
"""Command name -> (module, attribute: the command, or a function that makes it)."""


class SluiceGroup(click.Group):
    """The client commands as usual; the gateway's loaded on use (see the module)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*self.commands, *GATEWAY_COMMANDS])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = self.commands.get(cmd_name)
        if found is not None or cmd_name not in GATEWAY_COMMANDS:
            return found
        module, attribute = GATEWAY_COMMANDS[cmd_name]
        try:
            found = getattr(importlib.import_module(module), attribute)
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] == "sluice":
                raise
            return _needs_server(cmd_name, exc.name or "a dependency")
        command: click.Command = found if isinstance(found, click.Command) else found()
        return command


def _needs_server(name: str, missing: str) -> click.Command:
    def refuse() -> None:
        raise click.ClickException(
            f"`sluice {name}` is the gateway's, which this install lacks ({missing} is "
            f"not installed): {SERVER_EXTRA}"
        )

    return click.Command(
        name,
        callback=refuse,
        help=f"(needs the gateway: {SERVER_EXTRA})",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    )


@click.group(cls=SluiceGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="sluice")
def main() -> None:
    """Sluice: an LLM gateway whose core is streaming (OpenAI chat completions and the
    Anthropic Messages API in front of many providers), and a toolkit for the clients
    of any OpenAI-compatible endpoint.

    Start the gateway with `sluice serve`, then point any OpenAI SDK at
    http://127.0.0.1:8787/v1 with the development key it prints. `sluice chat`,
    `sluice bench` and `sluice replay` are the consumer's side: they work against
    any OpenAI-compatible endpoint.
    """


main.add_command(chat_command)
main.add_command(bench_command)
main.add_command(replay_command)
main.add_command(record_command)

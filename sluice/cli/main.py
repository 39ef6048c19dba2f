"""The ``sluice`` command."""

from __future__ import annotations

import click

from sluice import __version__
from sluice.cli.accounts_list import accounts_list
from sluice.cli.admin import accounts, ledger
from sluice.cli.bench import bench_command
from sluice.cli.chat import chat_command
from sluice.cli.init import init_command
from sluice.cli.keys import keys
from sluice.cli.reload import reload_command
from sluice.cli.replay import replay_command
from sluice.cli.requests import requests
from sluice.cli.serve import serve
from sluice.cli.spend import spend_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="sluice")
def main() -> None:
    """Sluice: an OpenAI-compatible LLM gateway whose core is streaming.

    Start it with `sluice serve`, then point any OpenAI SDK at
    http://127.0.0.1:8787/v1 with the development key it prints. `sluice chat`,
    `sluice bench` and `sluice replay` are the consumer's side: they work against
    any OpenAI-compatible endpoint.
    """


main.add_command(serve)
main.add_command(reload_command)
main.add_command(init_command)
main.add_command(chat_command)
main.add_command(bench_command)
main.add_command(replay_command)
main.add_command(accounts)
accounts.add_command(accounts_list)
main.add_command(keys)
main.add_command(ledger)
main.add_command(requests)
main.add_command(spend_command)

"""``sluice chat``: an interactive terminal chat over the sync client.

Sync on purpose: Ctrl-C arrives as ``KeyboardInterrupt`` in the blocked socket read,
the stream's ``finally`` closes the connection (which stops generation upstream) and
the loop goes back to the prompt. Nothing else needs to know about signals.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import click

from sluice.cli.bench import endpoint_options, resolve_api_key
from sluice.client.events import ContentDelta, ReasoningDelta, StreamResult
from sluice.client.sync import ChatClient

PROMPT = "you> "
REPLY = "ai> "
HISTORY_LINES = 1000
DEFAULT_HISTORY = "~/.sluice_chat_history"


@contextmanager
def line_editing(history: str) -> Iterator[None]:
    """Line editing for the prompt (arrows, Ctrl-R…: GNU readline, where this Python has
    it) and the lines of earlier sessions, read from ``history`` and saved back to it
    when the chat ends (``""``: none kept)."""
    try:
        import readline
    except ImportError:  # a Python built without it: a plain prompt
        yield
        return
    path = Path(history).expanduser() if history else None
    if path is not None:
        with suppress(OSError):
            readline.read_history_file(path)
    readline.set_history_length(HISTORY_LINES)
    try:
        yield
    finally:
        if path is not None:
            with suppress(OSError):
                readline.write_history_file(path)


@click.command("chat")
@click.option("-m", "--model", default="sluice/demo", show_default=True, help="Model or route.")
@endpoint_options
@click.option("--system", default=None, help="A system message to open the conversation.")
@click.option("--max-tokens", type=click.IntRange(1), default=None, help="Per answer.")
@click.option(
    "--history",
    default=DEFAULT_HISTORY,
    show_default=True,
    help="Where the prompt's history is kept across sessions ('' keeps none).",
)
def chat_command(
    *,
    model: str,
    url: str,
    api_key: str | None,
    system: str | None,
    max_tokens: int | None,
    history: str,
) -> None:
    """Chat in the terminal. Answers stream as they are written; after each, its time
    to first token, tokens/s and cost. The prompt edits like a shell's (arrows, Ctrl-R
    to search earlier lines). Ctrl-C stops an answer (the request is cancelled); Ctrl-D
    or /exit leaves."""
    client = ChatClient(url, resolve_api_key(api_key, url))
    with line_editing(history):
        _converse(client, model, system, max_tokens)


def _converse(client: ChatClient, model: str, system: str | None, max_tokens: int | None) -> None:
    url = client.base_url
    fields: dict[str, Any] = {} if max_tokens is None else {"max_tokens": max_tokens}
    history: list[dict[str, str]] = []  # the conversation
    if system:
        history.append({"role": "system", "content": system})
    click.echo(f"Chatting with {model} at {url}. Ctrl-C stops an answer, Ctrl-D leaves.")
    while True:
        try:
            line = input(PROMPT).strip()
        except EOFError:
            click.echo()
            return
        except KeyboardInterrupt:  # at the prompt: a fresh line, as a shell does
            click.echo()
            continue
        if line in ("/exit", "/quit"):
            return
        if not line:
            continue
        history.append({"role": "user", "content": line})
        result, stopped = _answer(client, model, history, fields)
        click.echo(_stats(result, stopped))
        if result.text:  # the history keeps what the screen shows, a stopped answer too
            history.append({"role": "assistant", "content": result.text})
        else:
            history.pop()


def _answer(
    client: ChatClient, model: str, history: list[dict[str, str]], fields: dict[str, Any]
) -> tuple[StreamResult, bool]:
    stream = client.stream(model, list(history), **fields)
    click.echo(REPLY, nl=False)
    stopped = False
    try:
        with stream:
            for item in stream:
                if isinstance(item, ContentDelta):
                    click.echo(item.text, nl=False)
                elif isinstance(item, ReasoningDelta):
                    click.echo(click.style(item.text, dim=True), nl=False)
    except KeyboardInterrupt:
        stopped = True
    click.echo()
    assert stream.result is not None  # set when the stream ends, however it ends
    return stream.result, stopped


def _stats(result: StreamResult, stopped: bool) -> str:
    parts: list[str] = ["stopped" if stopped else result.state]
    if result.error is not None and not stopped:
        parts.append(f"{result.error.type}: {result.error.message}")
    if result.ttft is not None:
        parts.append(f"ttft {result.ttft * 1000:.0f} ms")
    if result.tokens_per_second is not None:
        parts.append(f"{result.tokens_per_second:.1f} tok/s")
    if result.usage is not None:
        parts.append(f"{result.usage.completion_tokens} tokens")
    if result.cost is not None:
        parts.append(f"${result.cost:.6f}")
    return click.style("[" + " · ".join(parts) + "]", dim=True)

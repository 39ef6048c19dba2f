"""``sluice record``: one streamed answer saved byte for byte as a recording that
``sluice replay`` and ``sluice replay serve`` play back, from the gateway or straight
from any OpenAI-compatible (or Messages) endpoint."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import click

from sluice.cli.bench import endpoint_options, resolve_api_key


@click.command("record")
@click.option("-m", "--model", default="sluice/demo", show_default=True, help="Model or route.")
@endpoint_options
@click.option("--prompt", default="Say hello.", show_default=True, help="The user message.")
@click.option(
    "--body",
    "body_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A whole request body (JSON) instead of --model/--prompt; stream is forced on.",
)
@click.option("--messages", "messages_api", is_flag=True, help="POST /messages, not chat.")
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path), required=True)
def record_command(
    *,
    model: str,
    url: str,
    api_key: str | None,
    prompt: str,
    body_file: Path | None,
    messages_api: bool,
    out: Path,
) -> None:
    """Stream one answer and write its body, as received, to OUT (an .sse recording).
    Exits 1 when the answer is not a 200 event stream (nothing is written then)."""
    key = resolve_api_key(api_key, url)
    body: dict[str, object] = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        **({"max_tokens": 1024} if messages_api else {"stream_options": {"include_usage": True}}),
    }
    if body_file is not None:
        body = json.loads(body_file.read_text())
    body["stream"] = True
    path = "/messages" if messages_api else "/chat/completions"
    status, kind, data = asyncio.run(_stream(url.rstrip("/") + path, key, body))
    if status != 200 or not kind.startswith("text/event-stream"):
        raise click.ClickException(
            f"HTTP {status} ({kind or 'no content type'}): {refusal_text(data)}"
        )
    out.write_bytes(data)
    events = data.count(b"\n\n")
    click.echo(f"recorded {len(data)} bytes, {events} events, to {out}", err=True)


def refusal_text(body: bytes, most: int = 300) -> str:
    """What a refused request's body says, as text: an OpenAI or Anthropic error's
    ``message`` (with its type and code), else the body decoded, one line, cut."""
    try:
        error = json.loads(body)["error"]
        said = f"{error['message']} ({error.get('type')}, {error.get('code')})"
    except (ValueError, KeyError, TypeError):
        said = body.decode("utf-8", errors="replace")
    said = " ".join(said.split())
    return said if len(said) <= most else said[: most - 1] + "…"


async def _stream(url: str, api_key: str | None, body: dict[str, object]) -> tuple[int, str, bytes]:
    import aiohttp

    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key}"
        headers["x-api-key"] = api_key  # the Messages wire's header, for /messages
    timeout = aiohttp.ClientTimeout(total=600, sock_read=120)
    async with (
        aiohttp.ClientSession(timeout=timeout, auto_decompress=False) as session,
        session.post(url, data=json.dumps(body), headers=headers) as answer,
    ):
        return answer.status, answer.headers.get("content-type", ""), await answer.read()

"""``sluice replay``: a recorded stream through the client's parser with a fault
(``sluice replay FILE --fault F``), or recorded streams served with faults on the wire
to any client (``sluice replay serve FILE... --port N``)."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import click

from sluice.client.replay import FAULTS, Fault, is_messages, replay

_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


class _ReplayGroup(click.Group):
    """``replay FILE …`` runs the harness (the ``check`` subcommand); ``replay serve``
    the server."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["check", *args]
        return super().parse_args(ctx, args)


@click.group("replay", cls=_ReplayGroup)
def replay_command() -> None:
    """Recorded streams with faults: `sluice replay FILE --fault F` through this
    client's parser; `sluice replay serve FILE...` to your own clients over HTTP."""


@replay_command.command("check")
@click.argument("file", type=_FILE)
@click.option(
    "--fault",
    type=click.Choice(FAULTS),
    default=None,
    help="Fault to inject: split (every split point, and one byte per read), no-done "
    "(drop [DONE]), length (finish_reason length), error (error event instead of the "
    "finish), comment (comment lines), crlf (CRLF line ends). None: replay as recorded.",
)
def replay_check(file: Path, fault: str | None) -> None:
    """Replay FILE (a recorded .sse stream) and print the outcome.

    Exits 1 unless the state is `complete` (and, for `split`, every split gave the
    same result).
    """
    data = file.read_bytes()
    if is_messages(data):
        raise click.UsageError(
            f"{file} is a Messages recording; this parser reads chat-completions streams. "
            "Serve it to a Messages client with `sluice replay serve`, which applies the "
            "same faults in Messages terms."
        )
    outcome = replay(data, cast(Fault | None, fault))
    result = outcome.result
    label = fault or "none"
    reads = f"{outcome.variants} read pattern{'s' if outcome.variants != 1 else ''}"
    agreement = "all identical" if outcome.consistent else "RESULTS DIFFER"
    lines = [
        f"fault:       {label} ({reads}, {agreement})",
        f"state:       {result.state}",
        f"finish:      {result.finish_reason or '-'}",
        f"text:        {len(result.text)} chars",
        f"reasoning:   {len(result.reasoning)} chars",
        f"tool calls:  {len(result.tool_calls)}",
    ]
    for call in result.tool_calls:
        verdict = "valid JSON" if call.valid_json else "INVALID JSON"
        lines.append(f"  [{call.index}] {call.name}({call.arguments}) {verdict}")
    if result.usage is not None:
        usage = result.usage
        cost = f", cost ${usage.cost:.6f}" if usage.cost is not None else ""
        lines.append(
            f"usage:       {usage.prompt_tokens} prompt + {usage.completion_tokens} "
            f"completion tokens{cost}"
        )
    if result.error is not None:
        error = result.error
        lines.append(f"error:       {error.type} ({error.code or '-'}): {error.message}")
    click.echo("\n".join(lines))
    if result.state != "complete" or not outcome.consistent:
        raise SystemExit(1)


@replay_command.command("serve")
@click.argument("files", nargs=-1, required=True, type=_FILE)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=8790, show_default=True)
@click.option(
    "--fault",
    default=None,
    help="The fault when a request's X-Replay-Fault header names none: no-done, length, "
    "error, comment, crlf, split (events cut across TCP writes), stall, trickle, reset, "
    "cut-and-resume (a resumable stream cut; GET /v1/streams/ID resumes it).",
)
@click.option("--rate", type=click.FloatRange(min=0.1), default=20.0, show_default=True,
              help="Events per second for trickle.")  # fmt: skip
@click.option("--seed", type=int, default=None, help="Seed of the split points.")
def replay_serve(
    *,
    files: tuple[Path, ...],
    host: str,
    port: int,
    fault: str | None,
    rate: float,
    seed: int | None,
) -> None:
    """Serve FILES (recorded .sse streams) on POST /v1/chat/completions and
    /v1/messages, in turn (X-Replay-File picks one), with the fault the request's
    X-Replay-Fault header names."""
    from aiohttp import web

    from sluice.client.replay_server import SERVED_FAULTS, Recording, ReplayServer

    if fault is not None and fault not in SERVED_FAULTS:
        raise click.BadParameter(f"one of {', '.join(SERVED_FAULTS)}", param_hint="--fault")
    recordings = [Recording(path.name, path.read_bytes()) for path in files]
    server = ReplayServer(recordings, fault=fault, rate=rate, seed=seed)
    click.echo(f"replaying {len(files)} recording(s) on http://{host}:{port}/v1", err=True)
    web.run_app(server.app(), host=host, port=port, print=None, handler_cancellation=True)

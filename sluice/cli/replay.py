"""``sluice replay``: a recorded stream through the client's parser, with a fault."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import click

from sluice.client.replay import FAULTS, Fault, replay


@click.command("replay")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--fault",
    type=click.Choice(FAULTS),
    default=None,
    help="Fault to inject: split (every split point, and one byte per read), no-done "
    "(drop [DONE]), length (finish_reason length), error (error event instead of the "
    "finish), comment (comment lines), crlf (CRLF line ends). None: replay as recorded.",
)
def replay_command(file: Path, fault: str | None) -> None:
    """Replay FILE (a recorded .sse stream) and print the outcome.

    Exits 1 unless the state is `complete` (and, for `split`, every split gave the
    same result).
    """
    outcome = replay(file.read_bytes(), cast(Fault | None, fault))
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

"""``sluice bench``: time to first token and tokens per second, per model.

By default requests run one after another (one in flight), so the figures are the
endpoint's unloaded latency and generation rate; ``-c N`` keeps N in flight per model,
for its latency under that load. No retries, so a failure shows as one. rich and
matplotlib are imported inside the command: ``sluice --help`` stays quick.
"""

from __future__ import annotations

import asyncio
import importlib.util
import ipaddress
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar
from urllib.parse import urlsplit

import click
import msgspec

from sluice.client.aio import AsyncChatClient
from sluice.client.measure import ModelSummary, Sample, sample, summarize
from sluice.client.policy import NO_RETRY

if TYPE_CHECKING:
    from rich.console import Console

DEFAULT_URL: Final = "http://127.0.0.1:8787/v1"
BENCH_PROMPT: Final = "In three sentences, explain why rivers meander."
PLOT_SIZE: Final = (8.0, 5.0)  # inches, at PLOT_DPI: 800 x 500 pixels
PLOT_DPI: Final = 100
PLOT_MARGIN: Final = 0.15
"""Room beyond the largest point on each axis, so every marker is drawn whole."""

F = TypeVar("F", bound=Callable[..., Any])


def endpoint_options(command: F) -> F:
    """``--url`` and ``--api-key``, shared by ``bench`` and ``chat``."""
    command = click.option(
        "--api-key",
        envvar="SLUICE_API_KEY",
        default=None,
        help="API key [default: $SLUICE_API_KEY, else, for a gateway on this machine "
        "(127.0.0.1, ::1, localhost) only, its dev key ($SLUICE_HOME/dev-key)].",
    )(command)
    return click.option(
        "--url",
        envvar="SLUICE_URL",
        default=DEFAULT_URL,
        show_default=True,
        help="OpenAI-style base URL, ending in /v1 (any OpenAI-compatible server).",
    )(command)


def is_local_gateway(url: str) -> bool:
    """Whether ``url`` names this machine: an http(s) URL whose host is loopback
    (127.0.0.0/8, ::1, ``localhost``), written plainly (user info or a backslash, which
    URL parsers read differently, never counts as local)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or host is None:
        return False
    if "@" in parts.netloc or "\\" in url:
        return False
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def resolve_api_key(api_key: str | None, url: str) -> str | None:
    """``--api-key`` (or ``$SLUICE_API_KEY``); else, when ``url`` is this machine's
    gateway, the development key of ``$SLUICE_HOME`` (None without one). The development
    key never leaves the machine: any other URL needs a key given (a usage error)."""
    if api_key:
        return api_key
    if not is_local_gateway(url):
        raise click.UsageError(
            f"{url} is not a gateway on this machine: give its API key with --api-key or "
            "SLUICE_API_KEY (the development key is sent only to 127.0.0.1, ::1 or localhost)."
        )
    from sluice.accounts.dev_key import DEV_KEY_FILE
    from sluice.settings import resolve_home

    try:
        return (resolve_home(None, os.environ) / DEV_KEY_FILE).read_text().strip() or None
    except OSError:
        return None


@click.command("bench")
@click.argument("models", nargs=-1, required=True)
@endpoint_options
@click.option(
    "-n", "count", type=click.IntRange(1), default=10, show_default=True, help="Requests per model."
)
@click.option(
    "-c",
    "--concurrency",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="Requests in flight at once, per model.",
)
@click.option("--max-tokens", type=click.IntRange(1), default=128, show_default=True)
@click.option("--prompt", default=BENCH_PROMPT, help="The prompt every request sends.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of the table.")
@click.option(
    "--csv",
    "as_csv",
    is_flag=True,
    help="Print CSV, one row per model, with the endpoint's list prices beside the figures.",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write a PNG: TTFT against tokens/s, one colour per model.",
)
def bench_command(
    *,
    models: tuple[str, ...],
    url: str,
    api_key: str | None,
    count: int,
    concurrency: int,
    max_tokens: int,
    prompt: str,
    as_json: bool,
    as_csv: bool,
    plot: Path | None,
) -> None:
    """Measure MODEL(s): N streamed requests each, time to first token and tokens/s
    (p50, p90) and cost per request (when the server reports it, as Sluice does)."""
    from rich.console import Console

    if plot is not None and importlib.util.find_spec("matplotlib") is None:
        raise click.UsageError("--plot needs the plot extra: pip install 'sluice-gateway[plot]'")
    key = resolve_api_key(api_key, url)
    progress = Console(stderr=True)
    client = AsyncChatClient(url, key, retry=NO_RETRY)
    messages = ({"role": "user", "content": prompt},)
    load = _Load(count, concurrency, max_tokens)
    summaries = asyncio.run(_measure(client, models, messages, load, progress))
    if as_csv:
        click.echo(summary_csv(summaries, asyncio.run(list_prices(url, key))), nl=False)
    elif as_json:
        doc = {
            "url": url,
            "requests_per_model": count,
            "concurrency": concurrency,
            "models": summaries,
        }
        click.echo(msgspec.json.format(msgspec.json.encode(doc), indent=2))
    else:
        Console().print(_table(summaries))
    for summary in summaries:
        failed = next((s for s in summary.samples if s.error), None)
        if failed is not None:
            click.echo(
                f"{summary.model}: {summary.requests - summary.ok} failed; {failed.error}",
                err=True,
            )
    if plot is not None:
        _plot(summaries, plot)
        click.echo(f"plot written to {plot}", err=True)
    if any(s.ok == 0 for s in summaries):
        raise SystemExit(1)


class _Load(msgspec.Struct, frozen=True):
    count: int
    concurrency: int
    max_tokens: int


async def _measure(
    client: AsyncChatClient,
    models: Sequence[str],
    messages: Sequence[Any],
    load: _Load,
    console: Console,
) -> list[ModelSummary]:
    """Model after model; within one, ``load.concurrency`` requests in flight."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    summaries = []
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=console) as progress:
        task = progress.add_task("bench", total=load.count * len(models))
        async with client:
            for model in models:
                progress.update(task, description=model)
                slots = asyncio.Semaphore(load.concurrency)

                async def one(model: str = model, slots: asyncio.Semaphore = slots) -> Sample:
                    async with slots:
                        stream = client.stream(model, messages, max_tokens=load.max_tokens)
                        measured = sample(await stream.collect())
                    progress.advance(task)
                    return measured

                samples = await asyncio.gather(*(one() for _ in range(load.count)))
                summaries.append(summarize(model, list(samples)))
    return summaries


CSV_COLUMNS: Final = (
    "model",
    "requests",
    "ok",
    "ttft_p50_ms",
    "ttft_p90_ms",
    "tokens_per_second_p50",
    "tokens_per_second_p90",
    "cost_per_request_usd",
    "list_input_usd_per_million",
    "list_output_usd_per_million",
)


def summary_csv(summaries: Sequence[ModelSummary], prices: dict[str, tuple[float, float]]) -> str:
    """The model-selection sheet: each model's figures beside its list price (empty
    where the endpoint did not say one)."""
    import csv
    import io

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for s in summaries:
        listed = prices.get(s.model)
        writer.writerow(
            [
                s.model,
                s.requests,
                s.ok,
                *(_cell(None if v is None else v * 1000) for v in (s.ttft_p50, s.ttft_p90)),
                _cell(s.tokens_per_second_p50),
                _cell(s.tokens_per_second_p90),
                _cell(s.cost_per_request, 9),
                *(("", "") if listed is None else listed),
            ]
        )
    return out.getvalue()


def _cell(value: float | None, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}f}"


async def list_prices(url: str, api_key: str | None) -> dict[str, tuple[float, float]]:
    """Model id -> list (input, output) USD per million tokens, from ``GET /models`` of
    the endpoint (Sluice says them; others may not): empty when it cannot tell."""
    import aiohttp

    headers = {} if api_key is None else {"Authorization": f"Bearer {api_key}"}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
            session.get(url.rstrip("/") + "/models", headers=headers) as answer,
        ):
            doc = await answer.json() if answer.status == 200 else {}
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return {}
    prices = {}
    for entry in doc.get("data", []) if isinstance(doc, dict) else []:
        pricing = entry.get("pricing") if isinstance(entry, dict) else None
        if isinstance(pricing, dict) and {"input", "output"} <= pricing.keys():
            prices[str(entry.get("id"))] = (float(pricing["input"]), float(pricing["output"]))
    return prices


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f} ms"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _table(summaries: Sequence[ModelSummary]) -> Any:
    from rich import box
    from rich.table import Table

    table = Table(title="Time to first token and tokens per second", box=box.SIMPLE_HEAD)
    for name in ("model", "ok", "TTFT p50", "p90", "tok/s p50", "p90", "$/request"):
        table.add_column(name, justify="left" if name == "model" else "right", no_wrap=True)
    for s in summaries:
        cost = "-" if s.cost_per_request is None else f"${s.cost_per_request:.6f}"
        table.add_row(
            s.model,
            f"{s.ok}/{s.requests}",
            _ms(s.ttft_p50),
            _ms(s.ttft_p90),
            _rate(s.tokens_per_second_p50),
            _rate(s.tokens_per_second_p90),
            cost,
        )
    return table


def _plot(summaries: Sequence[ModelSummary], path: Path) -> None:
    figure(summaries).savefig(path, format="png", dpi=PLOT_DPI)


def figure(summaries: Sequence[ModelSummary]) -> Any:
    """One scatter per model (every request), its median as a larger marker, on axes
    from 0 to past the largest point, so none is clipped. Drawn on a bare Figure with
    the Agg canvas: no pyplot, no display, no global backend."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=PLOT_SIZE, dpi=PLOT_DPI)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for number, s in enumerate(summaries):
        colour = f"C{number % 10}"  # matplotlib's default colour cycle
        points = [
            (x.ttft * 1000, x.tokens_per_second)
            for x in s.samples
            if x.ttft is not None and x.tokens_per_second is not None
        ]
        if not points:
            continue
        axes.scatter(*zip(*points, strict=True), alpha=0.5, color=colour, label=s.model)
        if s.ttft_p50 is not None and s.tokens_per_second_p50 is not None:
            axes.scatter(
                [s.ttft_p50 * 1000],
                [s.tokens_per_second_p50],
                s=160,
                marker="D",
                color=colour,
                edgecolors="black",
            )
    axes.set_xlabel("time to first token (ms)")
    axes.set_ylabel("tokens per second")
    axes.set_title("Each dot a request; diamonds: medians")
    shown = [
        (x.ttft * 1000, x.tokens_per_second)
        for s in summaries
        for x in s.samples
        if x.ttft is not None and x.tokens_per_second is not None
    ]
    top_x = max((x for x, _ in shown), default=1.0) or 1.0
    top_y = max((y for _, y in shown), default=1.0) or 1.0
    axes.set_xlim(0, top_x * (1 + PLOT_MARGIN))
    axes.set_ylim(0, top_y * (1 + PLOT_MARGIN))
    axes.grid(alpha=0.3)
    if axes.get_legend_handles_labels()[0]:
        axes.legend()
    return figure

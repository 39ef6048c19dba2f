"""``sluice bench`` against the demo models of a gateway started as `make serve` starts
it (no config: the demo connection at its default pace)."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from sluice.cli.bench import figure
from sluice.cli.main import main
from sluice.client.measure import Sample, summarize
from sluice.server.lifecycle import RunningGateway
from tests.support.fake_openai import chunk, text_stream
from tests.support.fake_upstream import FakeUpstream, Reply, WaitFor
from tests.support.gateway import running_gateway
from tests.support.raw_http import RawResponse, exchange, get

USAGE = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    async with running_gateway(tmp_path / "home") as gw:
        yield gw


async def models(gw: RunningGateway) -> RawResponse:
    assert gw.dev_key is not None
    return await exchange(gw.host, gw.port, get("/v1/models", gw.dev_key.key))


async def bench(gw: RunningGateway, *args: str) -> Result:
    """The command runs its own event loop, so it runs in a thread beside the gateway."""
    assert gw.dev_key is not None
    argv = ["bench", "--url", gw.base_url + "/v1", "--api-key", gw.dev_key.key, *args]
    return await asyncio.to_thread(CliRunner().invoke, main, argv)


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == PNG_SIGNATURE and head[12:16] == b"IHDR"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


async def test_table_and_plot_for_the_demo_models(gateway: RunningGateway, tmp_path: Path) -> None:
    plot = tmp_path / "ttft.png"
    args = ("sluice/demo", "sluice/demo-fast", "-n", "3", "--max-tokens", "5", "--plot", str(plot))
    result = await bench(gateway, *args)
    assert result.exit_code == 0, result.output
    rows = {
        line.split()[0]: line.split() for line in result.stdout.splitlines() if "sluice/" in line
    }
    assert set(rows) == {"sluice/demo", "sluice/demo-fast"}
    for row in rows.values():
        assert row[1] == "3/3"
        assert row[3] == "ms" and row[5] == "ms"  # TTFT p50 and p90
        assert float(row[6]) > 0 and float(row[7]) > 0  # tokens/s p50 and p90
        assert row[8].startswith("$0.0000")
    assert "TTFT p50" in result.stdout and "tok/s p50" in result.stdout
    assert png_size(plot) == (800, 500)
    assert f"plot written to {plot}" in result.stderr


async def test_json_figures(gateway: RunningGateway) -> None:
    result = await bench(
        gateway, "sluice/demo", "sluice/demo-fast", "-n", "2", "--max-tokens", "3", "--json"
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["requests_per_model"] == 2
    demo, fast = doc["models"]
    assert (demo["model"], fast["model"]) == ("sluice/demo", "sluice/demo-fast")
    for model in (demo, fast):
        assert (model["requests"], model["ok"]) == (2, 2)
        assert [s["state"] for s in model["samples"]] == ["truncated", "truncated"]
        assert 0 < model["ttft_p50"] <= model["ttft_p90"]
        assert 0 < model["tokens_per_second_p50"] <= model["tokens_per_second_p90"]
        assert model["cost_per_request"] > 0
    assert fast["ttft_p50"] < demo["ttft_p50"]  # the -fast model starts four times sooner


async def test_a_model_that_never_answers_fails_the_run(gateway: RunningGateway) -> None:
    result = await bench(gateway, "sluice/demo-fast", "nobody/none", "-n", "1", "--max-tokens", "2")
    assert result.exit_code == 1
    assert "nobody/none: 1 failed; model_not_found" in result.stderr
    rows = [
        line.split() for line in result.stdout.splitlines() if "/none" in line or "/demo" in line
    ]
    assert [(r[0], r[1]) for r in rows] == [("sluice/demo-fast", "1/1"), ("nobody/none", "0/1")]


async def test_concurrency_keeps_n_requests_in_flight(fake: FakeUpstream) -> None:
    """Every reply waits until four requests are in flight at once: only ``-c 4`` ends."""
    release = asyncio.Event()
    fake.default = Reply.stream(
        chunk(role="assistant", content=""), WaitFor(release), *text_stream("ok", usage=USAGE)[1:]
    )

    async def open_when_four() -> None:
        while len(fake.requests) < 4:
            await asyncio.sleep(0.01)
        release.set()

    watcher = asyncio.ensure_future(open_when_four())
    argv = [
        "bench",
        "m",
        "--url",
        fake.base_url,
        "--api-key",
        "sk-x",
        "-n",
        "4",
        "-c",
        "4",
        "--json",
    ]
    result = await asyncio.wait_for(asyncio.to_thread(CliRunner().invoke, main, argv), 20)
    await watcher
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["concurrency"], doc["models"][0]["ok"]) == (4, 4)


def test_a_plot_of_one_request_draws_it_whole() -> None:
    only = Sample("complete", ttft=0.25, tokens_per_second=40.0, cost=None)
    axes = figure([summarize("m", [only])]).axes[0]
    assert axes.get_xlim()[1] > 250 * 1.1 and axes.get_ylim()[1] > 40 * 1.1
    assert axes.get_xlim()[0] == axes.get_ylim()[0] == 0


async def test_csv_is_the_model_selection_sheet_with_list_prices(gateway: RunningGateway) -> None:
    result = await bench(
        gateway, "sluice/demo", "sluice/demo-fast", "-n", "3", "--max-tokens", "5", "--csv"
    )
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [r["model"] for r in rows] == ["sluice/demo", "sluice/demo-fast"]
    listed = json.loads((await models(gateway)).body)["data"]
    prices = {m["id"]: m["pricing"] for m in listed if m.get("pricing")}
    for row in rows:
        assert (row["requests"], row["ok"]) == ("3", "3")
        assert 0 < float(row["ttft_p50_ms"]) <= float(row["ttft_p90_ms"])
        assert float(row["tokens_per_second_p50"]) > 0
        assert float(row["list_input_usd_per_million"]) == prices[row["model"]]["input"]
        assert float(row["list_output_usd_per_million"]) == prices[row["model"]]["output"]
        assert float(row["cost_per_request_usd"]) > 0

"""``sluice replay`` as a user runs it: the outcome printed, the exit status."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from click.testing import CliRunner

from sluice.cli.main import main
from sluice.cli.record import refusal_text
from tests.support.gateway import running_gateway

CORPUS = Path(__file__).parent.parent / "fixtures" / "sse"


def replay(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["replay", *args])
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("fault", "exit_code", "state"),
    [
        (None, 0, "complete"),
        ("split", 0, "complete"),
        ("comment", 0, "complete"),
        ("crlf", 0, "complete"),
        ("no-done", 1, "incomplete"),
        ("length", 1, "truncated"),
        ("error", 1, "error"),
    ],
)
def test_state_and_exit_status(fault: str | None, exit_code: int, state: str) -> None:
    code, out = replay(str(CORPUS / "text.sse"), *(["--fault", fault] if fault else []))
    assert code == exit_code, out
    assert f"state:       {state}\n" in out
    assert "text:        30 chars" in out


def test_split_reports_every_read_pattern_agreeing() -> None:
    size = (CORPUS / "text.sse").stat().st_size
    _, out = replay(str(CORPUS / "text.sse"), "--fault", "split")
    assert f"fault:       split ({size} read patterns, all identical)" in out


def test_tool_calls_usage_and_errors_are_printed() -> None:
    _, tools = replay(str(CORPUS / "parallel_tool_calls.sse"))
    assert "tool calls:  2\n" in tools
    assert '[0] get_weather({"city":"Paris"}) valid JSON' in tools
    assert '[1] get_time({"tz":"CET"}) valid JSON' in tools
    _, usage = replay(str(CORPUS / "sluice_usage.sse"))
    assert "usage:       10 prompt + 3 completion tokens, cost $0.000010" in usage
    _, error = replay(str(CORPUS / "sluice_usage.sse"), "--fault", "error")
    assert "error:       upstream_error (replay_fault): fault injected" in error


def test_bad_arguments_are_refused_clearly(tmp_path: Path) -> None:
    code, out = replay(str(CORPUS / "text.sse"), "--fault", "reorder")
    assert code == 2 and "'reorder' is not one of" in out
    code, out = replay(str(tmp_path / "missing.sse"))
    assert code == 2 and "does not exist" in out


async def test_record_saves_a_stream_that_replays_complete(tmp_path: Path) -> None:
    async with running_gateway(tmp_path / "gw") as gw:
        assert gw.dev_key is not None
        out = tmp_path / "demo.sse"
        argv = ["record", "--url", gw.base_url + "/v1", "--api-key", gw.dev_key.key, "-o", str(out)]
        recorded = await asyncio.to_thread(CliRunner().invoke, main, argv)
        messages = tmp_path / "demo-messages.sse"
        argv = [*argv[:-1], str(messages), "--messages"]
        recorded_messages = await asyncio.to_thread(CliRunner().invoke, main, argv)
        refused = await asyncio.to_thread(
            CliRunner().invoke,
            main,
            [
                "record",
                "--url",
                gw.base_url + "/v1",
                "--api-key",
                "sk-x",
                "-o",
                str(tmp_path / "no.sse"),
            ],
        )
    assert recorded.exit_code == 0, recorded.output
    assert out.read_bytes().endswith(b"data: [DONE]\n\n")
    replayed = CliRunner().invoke(main, ["replay", str(out), "--fault", "split"])
    assert replayed.exit_code == 0 and "state:       complete" in replayed.output
    assert recorded_messages.exit_code == 0
    assert messages.read_bytes().startswith(b"event: message_start")
    assert refused.exit_code == 1 and "HTTP 401 (application/json): " in refused.output
    # the error's own words, not Python's bytes repr (b'{"error": ...})
    assert "b'" not in refused.output and "authentication_error" in refused.output
    assert not (tmp_path / "no.sse").exists()


def test_a_refusal_reads_as_text_whatever_its_body() -> None:
    wire = b'{"error": {"message": "Bad\\nkey", "type": "authentication_error", "code": null}}'
    assert refusal_text(wire) == "Bad key (authentication_error, None)"
    anthropic = b'{"type": "error", "error": {"type": "overloaded_error", "message": "Busy"}}'
    assert refusal_text(anthropic) == "Busy (overloaded_error, None)"
    assert refusal_text(b"<html>\n 502 Bad Gateway </html>") == "<html> 502 Bad Gateway </html>"
    assert refusal_text(b"\xff\xfeoops") == "\ufffd\ufffdoops"
    assert refusal_text(b"x" * 500, most=10) == "x" * 9 + "…"
    assert refusal_text(b'["not", "an", "error"]') == '["not", "an", "error"]'

"""``sluice chat`` driven as a user would: a real process, lines on its stdin, Ctrl-C as
a real SIGINT while an answer streams."""

from __future__ import annotations

import asyncio
import os
import pty
import re
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from sluice.server.lifecycle import RunningGateway
from tests.support.fake_openai import chunk
from tests.support.fake_upstream import FakeUpstream, Reply, WaitFor
from tests.support.gateway import running_gateway

PROMPT = "you> "
STATS = re.compile(r"\[complete · ttft \d+ ms · [\d.]+ tok/s · \d+ tokens · \$0\.\d{6}\]")
PACED = """
[[connections]]
id = "conn_demo"
provider = "demo"
options = { first_token_ms = 0, token_ms = 40 }
"""


class Chat:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self._buffer = ""

    async def until(self, marker: str) -> str:
        """Everything printed up to and including ``marker``."""
        assert self.proc.stdout is not None
        while marker not in self._buffer:
            data = await asyncio.wait_for(self.proc.stdout.read(4096), 10)
            assert data, f"chat exited; printed so far: {self._buffer!r}"
            self._buffer += data.decode()
        head, _, self._buffer = self._buffer.partition(marker)
        return head + marker

    async def say(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        await self.proc.stdin.drain()

    async def interrupt(self) -> None:
        """Ctrl-C once the chat is blocked (reading the terminal or the socket). A SIGINT
        that lands just before the blocking read starts is only acted on when that read
        returns: a person does not type that fast, a test does."""
        stat = Path(f"/proc/{self.proc.pid}/stat")
        for _ in range(500):
            state = stat.read_text().rpartition(")")[2].split()[0]  # noqa: ASYNC240 (procfs)
            if state == "S":  # sleeping in a syscall
                break
            await asyncio.sleep(0.01)
        self.proc.send_signal(signal.SIGINT)


def key(gw: RunningGateway) -> str:
    assert gw.dev_key is not None
    return gw.dev_key.key


def as_at_a_terminal() -> None:
    """Ctrl-C interrupts, as in a person's shell: a test suite started in the background
    of a script has SIGINT ignored, and that would be inherited."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@asynccontextmanager
async def chat(tmp_path: Path, url: str, key: str) -> AsyncIterator[Chat]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "SLUICE_HOME": str(tmp_path / "client")}
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "sluice", "chat", "--url", url, "--api-key", key),
        *("--history", str(tmp_path / "history")),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        preexec_fn=as_at_a_terminal,
    )
    try:
        session = Chat(proc)
        yield session
        assert proc.stdin is not None
        proc.stdin.close()  # Ctrl-D: the end of input leaves the chat
        _, err = await asyncio.wait_for(proc.communicate(), 10)
        assert proc.returncode == 0, err.decode()
        assert b"Traceback" not in err
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.communicate()


async def test_chat_streams_stops_on_ctrl_c_and_carries_on(tmp_path: Path) -> None:
    async with (
        running_gateway(tmp_path / "gw", PACED) as gw,
        chat(tmp_path, gw.base_url + "/v1", key(gw)) as session,
    ):
        intro = await session.until(PROMPT)
        assert "Chatting with sluice/demo" in intro
        await session.say("tell me everything")
        await session.until("ai> Hello ")  # the answer is streaming
        await session.interrupt()
        stopped = await session.until(PROMPT)
        assert "[stopped" in stopped
        assert "You said" not in stopped  # cut well before the end
        await session.say("and again")
        answer = await session.until(PROMPT)
        assert "You said: and again" in answer
        assert STATS.search(answer), answer


async def test_ctrl_c_closes_the_connection_and_keeps_the_partial_answer(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(
        Reply.stream(
            chunk(role="assistant", content=""), chunk(content="Thinking"), WaitFor(asyncio.Event())
        )
    )
    async with chat(tmp_path, fake.base_url, "sk-any") as session:
        await session.until(PROMPT)
        await session.say("first")
        await session.until("Thinking")
        await session.interrupt()
        await asyncio.wait_for(fake.hung_up.wait(), 5)
        assert "[stopped" in await session.until(PROMPT)
        await session.interrupt()  # at the prompt: a fresh prompt, not an exit
        await session.until(PROMPT)
        await session.say("second")
        assert "ai> Hello world" in await session.until(PROMPT)
    assert fake.requests[1].json()["messages"] == [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "Thinking"},
        {"role": "user", "content": "second"},
    ]


def pty_chat(url: str, history: Path) -> tuple[int, int]:
    """``sluice chat`` on a pseudo-terminal, as a person's shell runs it: (pid, fd)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the chat, its terminal the pty
        as_at_a_terminal()
        args = ["chat", "--url", url, "--api-key", "sk-any", "--history", str(history)]
        os.execv(sys.executable, [sys.executable, "-m", "sluice", *args])
    return pid, fd


async def typed(fd: int, keys: bytes, until: bytes, seen: bytearray) -> None:
    """Type ``keys`` on the terminal, then read what it shows until ``until`` appears
    (again, after what was already ``seen``)."""
    os.write(fd, keys)
    start = len(seen)
    loop = asyncio.get_running_loop()
    while until not in seen[start:]:
        seen += await asyncio.wait_for(loop.run_in_executor(None, os.read, fd, 4096), 10)


async def test_the_prompt_edits_and_recalls_earlier_lines_across_sessions(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    history = tmp_path / "history"
    # session 1 types Up (session 0's line), Left, Backspace and "!"
    for keys in (b"first question\r", b"\x1b[A\x1b[D\x7f!\r"):
        pid, fd = pty_chat(fake.base_url, history)
        seen = bytearray()
        try:
            await typed(fd, b"", PROMPT.encode(), seen)
            await typed(fd, keys, b"ai> ", seen)
            await typed(fd, b"", PROMPT.encode(), seen)
            os.write(fd, b"\x04")  # Ctrl-D leaves
            _, status = await asyncio.get_running_loop().run_in_executor(None, os.waitpid, pid, 0)
        finally:
            os.close(fd)
        assert os.waitstatus_to_exitcode(status) == 0, bytes(seen).decode(errors="replace")
    asked = [r.json()["messages"][-1]["content"] for r in fake.requests]
    # Up, Left, Backspace, "!": the recalled line, its next-to-last character replaced
    assert asked == ["first question", "first questi!n"]
    assert history.read_text().splitlines()[-2:] == ["first question", "first questi!n"]

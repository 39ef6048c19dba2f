"""After creation (and rotation) no answer of the gateway contains a key's secret or
its stored digest: every control-plane route, in every format, after the key was used."""

from __future__ import annotations

import json
from pathlib import Path

from sluice.accounts.keys import key_digest
from tests.server.test_admin import ENV, admin
from tests.support.fake_openai import completion
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.raw_http import exchange, get, post

READS = [
    "/admin/accounts",
    "/admin/accounts/team",
    "/admin/accounts/team/keys",
    "/admin/requests",
    "/admin/requests?format=csv",
    "/admin/requests?format=jsonl",
    "/admin/spend?by=key",
    "/admin/spend?by=key&format=csv",
    "/admin/spend?by=key&format=jsonl",
    "/metrics",
]
OWN_READS = ["/v1/requests", "/v1/requests?format=csv", "/v1/spend?by=key", "/v1/models"]


async def test_no_answer_carries_a_keys_secret_after_it_was_made(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    for _ in range(2):
        fake.queue(Reply.json(completion("ok", usage={"prompt_tokens": 5, "completion_tokens": 1})))
    chat = json.dumps({"model": "test/gpt-fake", "messages": [{"role": "user", "content": "x"}]})
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url), env=ENV) as gw:
        await admin(gw, "POST", "/admin/accounts", {"name": "team", "credits": 5})
        made = (await admin(gw, "POST", "/admin/accounts/team/keys", {"label": "ci"})).json()
        old = made["key"]
        served = await exchange(gw.host, gw.port, post("/v1/chat/completions", chat.encode(), old))
        rotated = (await admin(gw, "POST", f"/admin/keys/{made['prefix']}/rotate")).json()
        new = rotated["key"]
        again = await exchange(gw.host, gw.port, post("/v1/chat/completions", chat.encode(), new))
        rid = again.headers["x-request-id"]
        answers = [
            await admin(gw, "PATCH", f"/admin/keys/{rotated['prefix']}", {"rpm": 100}),
            await admin(gw, "PATCH", "/admin/accounts/team", {"rpm": 100}),
            *[await admin(gw, "GET", path) for path in READS],
            *[await exchange(gw.host, gw.port, get(path, new)) for path in OWN_READS],
            await exchange(gw.host, gw.port, get(f"/v1/requests/{rid}", new)),
            await exchange(gw.host, gw.port, post("/v1/chat/completions", chat.encode(), old)),
        ]
    assert served.status == again.status == 200 and new != old
    assert [a.status for a in answers] == [200] * (len(answers) - 1) + [401]
    for answer in answers:
        text = answer.body.decode() + json.dumps(answer.headers)
        for secret in (old, new, key_digest(old), key_digest(new), old[14:], new[14:]):
            assert secret not in text

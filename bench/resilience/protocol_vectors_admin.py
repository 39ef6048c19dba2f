"""The hostile bodies of the "hostile bodies" row to the admin API: the same decoder
attacks on every endpoint that reads a body, then each endpoint's own fields."""

from __future__ import annotations

from bench.resilience.harness import MIB
from bench.resilience.protocol_vectors_bodies import DEEP, MAX_BODY, Body


def admin_bodies() -> list[Body]:
    deep_arr = b"[" * DEEP + b"]" * DEEP
    deep_obj = b'{"a":' * DEEP + b"1" + b"}" * DEEP
    big = b"1" + b"0" * 400
    accounts = "/admin/accounts"
    credits = "/admin/accounts/victim/credits"
    connection = "/admin/accounts/victim/connections/conn_hostile"
    revoke = "/admin/keys/revoke"
    price = "/admin/accounts/victim/prices/test/gpt-fake"
    out = []
    for path, method in (
        (accounts, "POST"),
        (credits, "POST"),
        (connection, "PUT"),
        (revoke, "POST"),
        (price, "PUT"),
    ):
        where = path.split("/victim")[-1] if "victim" in path else path
        out += [
            Body(f"{method} {where}: arrays 100,000 deep", method, path, deep_arr),
            Body(f"{method} {where}: objects 100,000 deep", method, path, deep_obj),
            Body(
                f"{method} {where}: 16 MiB + 1 byte",
                method,
                path,
                b"",
                status=413,
                oversize=MAX_BODY + 1,
            ),
            Body(f"{method} {where}: invalid UTF-8", method, path, b'{"name":"\xff\xfe"}'),
            Body(f"{method} {where}: a raw NUL", method, path, b'{"name":"a\x00"}'),
            Body(f"{method} {where}: null", method, path, b"null"),
            Body(f"{method} {where}: an array", method, path, b"[]"),
            Body(f"{method} {where}: an unknown field", method, path, b'{"zzz":1}'),
            Body(f"{method} {where}: trailing garbage", method, path, b"{}}"),
        ]
    out += [
        Body("POST /admin/accounts: no name", "POST", accounts, b"{}", param="name"),
        Body("POST /admin/accounts: name a number", "POST", accounts, b'{"name":5}', param="name"),
        Body(
            "POST /admin/accounts: a 1 MiB name",
            "POST",
            accounts,
            b'{"name":"' + b"n" * MIB + b'"}',
            param="name",
        ),
        Body(
            "POST /admin/accounts: name with a NUL",
            "POST",
            accounts,
            b'{"name":"a\\u0000"}',
            param="name",
        ),
        Body(
            "POST /admin/accounts: credits 1e999",
            "POST",
            accounts,
            b'{"name":"h1","credits":1e999}',
            param="credits",
        ),
        Body(
            "POST /admin/accounts: credits 10**400",
            "POST",
            accounts,
            b'{"name":"h2","credits":' + big + b"}",
            param="credits",
        ),
        Body(
            "POST /admin/accounts: credits 1e10 (past int64 nano-dollars)",
            "POST",
            accounts,
            b'{"name":"h3","credits":1e10}',
            param="credits",
        ),
        Body(
            'POST /admin/accounts: credits "1e30"',
            "POST",
            accounts,
            b'{"name":"h4","credits":"1e30"}',
            param="credits",
        ),
        Body(
            'POST /admin/accounts: credits "NaN"',
            "POST",
            accounts,
            b'{"name":"h5","credits":"NaN"}',
            param="credits",
        ),
        Body(
            "POST /admin/accounts: credits an object",
            "POST",
            accounts,
            b'{"name":"h6","credits":{}}',
            param="credits",
        ),
        Body(
            "POST /admin/accounts: metered a string",
            "POST",
            accounts,
            b'{"name":"h7","metered":"yes"}',
            param="metered",
        ),
        Body("POST credits: no amount", "POST", credits, b"{}", param="amount"),
        Body("POST credits: an empty body", "POST", credits, b"", param="amount"),
        Body(
            "POST credits: amount 10**400",
            "POST",
            credits,
            b'{"amount":' + big + b"}",
            param="amount",
        ),
        Body(
            'POST credits: amount "9300000000" (past int64 nano-dollars)',
            "POST",
            credits,
            b'{"amount":"9300000000"}',
            param="amount",
        ),
        Body("POST credits: amount 1e999", "POST", credits, b'{"amount":1e999}', param="amount"),
        Body('POST credits: amount "x"', "POST", credits, b'{"amount":"x"}', param="amount"),
        Body(
            "PUT connection: models a list",
            "PUT",
            connection,
            b'{"provider":"openai","models":[]}',
            param="models",
        ),
        Body(
            "PUT connection: provider a number",
            "PUT",
            connection,
            b'{"provider":5,"models":{}}',
            param="provider",
        ),
        Body(
            "PUT connection: an unknown provider",
            "PUT",
            connection,
            b'{"provider":"nope","models":{}}',
            param="provider",
        ),
        Body(
            "PUT connection: timeouts negative",
            "PUT",
            connection,
            b'{"provider":"openai","models":{},"timeouts":{"total":-1}}',
        ),
        Body("POST revoke: prefix a number", "POST", revoke, b'{"prefix":5}', param="prefix"),
        Body("POST revoke: an empty body", "POST", revoke, b"", param="prefix"),
        Body("POST revoke: prefix too short", "POST", revoke, b'{"prefix":"sk-"}', param="prefix"),
        Body('PUT price: input "x"', "PUT", price, b'{"input":"x","output":1}', param="input"),
        Body("PUT price: input 1e999", "PUT", price, b'{"input":1e999,"output":1}', param="input"),
        Body("PUT price: no output", "PUT", price, b'{"input":1}', param="output"),
    ]
    return out

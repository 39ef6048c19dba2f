"""Rows about secrets and reach: a canary provider key through every error path, SSRF encodings.

**Canary.** Connections of every provider kind (and accounts' own connections) whose
keys are distinctive canaries, against fake upstreams that quote the credential they
received into every field of their errors, in each provider's format
(``secrets_echo``). The canaries are then looked for, whole, URL-encoded or halved, in
every place the gateway writes: response bodies and headers, the request log API, the
DEBUG log, ``/metrics`` and the SQLite file (``secrets_canary``).

**SSRF.** Canary listeners on loopback count every connection; accounts' own
connections point at them in many spellings, saved and used with the guard on, saved
with it off and then used with it on, and redirects (``secrets_ssrf``).
"""

from __future__ import annotations

from collections import Counter

from bench.resilience import secrets_canary, secrets_ssrf
from bench.resilience.harness import Context, Row, row


@row("canary provider key through every error path")
async def canary_provider_key(ctx: Context) -> list[Row]:
    out = await secrets_canary.run(ctx)
    totals: dict[str, tuple[int, int]] = {}
    leaks: dict[str, list[str]] = {}  # secret -> where, with the first example
    for place, texts in out.places.items():
        whole = partial = 0
        for needle in out.needles:
            w = p = 0
            example = ""
            for text in texts:
                w1, p1 = needle.count(text)
                w, p = w + w1, p + p1
                if (w1 or p1) and not example:
                    example = " ".join((needle.first(text, 40) or "").split())
            if w or p:
                where = leaks.setdefault(needle.label, [])
                where.append(f"{place} {w + p}" + ("" if where else f" (…{example[:120]}…)"))
            whole, partial = whole + w, partial + p
        totals[place] = (whole, partial)
    found = sum(w + p for w, p in totals.values())
    places = "; ".join(f"{place} {w} (+{p} partial)" for place, (w, p) in totals.items())
    figure = (
        f"{out.sent} requests over {out.connections} connections ({out.kinds}), "
        f"{out.reached} reached the echoing upstreams ({out.redacted} [redacted] marks "
        f"came back); occurrences of {len(out.needles)} secrets, whole and URL-encoded "
        f"(+ halves): {places}"
    )
    if out.unsent_canaries:
        figure += f"; canary never sent upstream: {', '.join(out.unsent_canaries)}"
    if out.leaking:
        figure += f"; responses quoting a secret: {len(out.leaking)} ({', '.join(out.leaking[:4])})"
    if leaks:
        figure += ". LEAKED: " + "; ".join(
            f"{label} in {', '.join(where)}" for label, where in leaks.items()
        )
    return [
        Row(
            "canary provider key through every error path",
            figure.replace("|", "/"),
            "0 occurrences anywhere; every canary was sent and quoted back",
            found == 0 and not out.unsent_canaries and out.reached >= out.sent,
        )
    ]


@row("SSRF encodings with a canary listener")
async def ssrf_encodings(ctx: Context) -> list[Row]:
    out = await secrets_ssrf.run(ctx)
    found = out.encodings
    loopback = [e for e in found if e.loopback]
    refused = [e for e in found if e.refusal]
    wrong = [e for e in refused if not e.right_error]
    codes = Counter(e.refusal for e in refused)
    saved_b = [e for e in found if e.saved_b]
    reached = [e for e in saved_b if e.reached_b]
    at_connect = [e for e in saved_b if e.connect_status == 502]
    statuses = Counter(f"{e.connect_status} {e.connect_code}".strip() for e in saved_b)
    connects = out.connects_a + out.connects_c
    figure = (
        f"{len(found)} encodings ({len(loopback)} naming a canary listener, "
        f"{len(found) - len(loopback)} metadata/private/reserved addresses; names for "
        f"loopback from /etc/hosts: {', '.join(out.names) or 'none'}): refused when "
        f"saved {len(refused)}/{len(found)} ({_counts(codes)}; wrong error: {len(wrong)}), "
        f"then used in a chat request each; with the guard off {len(saved_b)} saved and "
        f"{len(reached)} of those reached a listener ({out.control} connects, the control); "
        f"then the guard on again over that database: refused at connect "
        f"{len(at_connect)}/{len(saved_b)} ({_counts(statuses)}); connects to the canary "
        f"listeners ({out.per_listener}) with the guard on: {connects} (the control's "
        f"per listener: {out.control_per_listener})"
    )
    if wrong:
        figure += "; wrong error for " + ", ".join(f"{e.url} ({e.refusal})" for e in wrong[:4])
    unsaved = [e.url for e in found if not e.refusal]
    if unsaved:
        figure += "; SAVED with the guard on: " + ", ".join(unsaved[:6])
    redirects = sum(out.redirect_statuses.values())
    return [
        Row(
            "SSRF encodings with a canary listener",
            figure,
            "0 connects with the guard on; every encoding refused when saved (400, "
            "param base_url, the right code) and every one saved unguarded refused at connect",
            connects == 0
            and not unsaved
            and not wrong
            and len(at_connect) == len(saved_b)
            and bool(reached),
        ),
        Row(
            "SSRF: upstream redirects are not followed",
            f"{out.redirects_sent} requests answered {'/'.join(map(str, secrets_ssrf.REDIRECTS))} "
            f"with a Location on another listener (operator's and account's own connection, "
            f"streamed and whole; private upstreams allowed): {out.redirects_seen} reached the "
            f"redirecting upstream, {out.redirect_connects} connects at the Location; clients "
            f"got {_counts(Counter({str(k): v for k, v in out.redirect_statuses.items()}))}",
            "0 connects at the Location, each request reached the upstream exactly once",
            out.redirect_connects == 0 and out.redirects_seen == out.redirects_sent == redirects,
        ),
    ]


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{k} x{n}" for k, n in counter.most_common()) or "none"

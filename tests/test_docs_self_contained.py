"""The docs stand on their own: a clone of this repository, and nothing else, is enough
to read them.

Every relative link in README.md and docs/*.md must reach a file or directory inside the
repository, and a ``#fragment`` must name a heading of the target (GitHub's anchors:
lower case, punctuation dropped, spaces to ``-``, ``-1``, ``-2`` … for repeats). No doc
may point at the contract the project started from, which lives outside it
(``../shared``, ``SPEC.md``, "SPEC §n"): docs/api.md describes the HTTP API instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)")
HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+[\"'(][^)]*)?\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$")
HTML_TARGET = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)=[\"']([^\"']*)[\"']", re.IGNORECASE)
HTML_ANCHOR = re.compile(r"<[a-z]+\b[^>]*?\b(?:id|name)=[\"']([^\"']+)[\"']", re.IGNORECASE)
SCHEME = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*:|//)")
OUTSIDE = re.compile(r"\.\./shared|\bSPEC\b")
"""The original contract: the peer directory it lives in, its file, or a section of it."""


def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` for each line outside fenced code blocks."""
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        opened = FENCE.match(line)
        if fence is None and opened:
            fence = opened[1]
        elif fence is None:
            yield number, line
        elif opened and _closes(opened[1], fence, line):
            fence = None


def _closes(marker: str, fence: str, line: str) -> bool:
    """A fence closes on a run of its own character, at least as long, alone on its line."""
    return marker[0] == fence[0] and len(marker) >= len(fence) and not line.strip(f" \t{fence[0]}")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text (before repeats are numbered)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every ``#fragment`` a document answers to: its headings' slugs (repeats numbered
    as GitHub numbers them) and explicit HTML ``id``/``name`` anchors."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose_lines(text):
        found.update(HTML_ANCHOR.findall(line))
        heading = HEADING.match(line)
        if heading is None:
            continue
        base = slug(heading[2] or "")
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(text: str) -> list[tuple[int, str]]:
    """``(line number, target)`` of every link and image outside code."""
    out: list[tuple[int, str]] = []
    for number, line in prose_lines(text):
        bare = CODE_SPAN.sub("", line)
        targets = INLINE_LINK.findall(bare) + HTML_TARGET.findall(bare)
        reference = REFERENCE.match(bare)
        if reference:
            targets.append(reference[1])
        out += [(number, target) for target in targets]
    return out


def broken_links(doc: Path, root: Path) -> list[str]:
    """``line: target (why)`` for each relative link of ``doc`` that does not resolve to a
    file (or a heading of one) inside ``root``."""
    root = root.resolve()
    problems: list[str] = []
    for number, target in links(doc.read_text()):
        if SCHEME.match(target):
            continue  # http(s), mailto: outside by design, not a file of ours
        path_part, _, fragment = target.partition("#")
        path = (doc.parent / unquote(path_part)).resolve() if path_part else doc.resolve()
        if not path.is_relative_to(root):
            problems.append(f"{number}: {target} (outside the repository)")
        elif not path.exists():
            problems.append(f"{number}: {target} (no such file)")
        elif (
            fragment
            and path.is_file()
            and path.suffix == ".md"
            and unquote(fragment) not in anchors(path.read_text())
        ):
            problems.append(f"{number}: {target} (no heading '{fragment}' there)")
    return problems


def outside_mentions(text: str) -> list[str]:
    """``line: text`` of each line, code included, that points at the original contract."""
    return [
        f"{number}: {line.strip()}"
        for number, line in enumerate(text.splitlines(), 1)
        if OUTSIDE.search(line)
    ]


def _name(doc: Path) -> str:
    return doc.relative_to(ROOT).as_posix()


def test_the_docs_include_the_api_description() -> None:
    names = {_name(doc) for doc in DOCS}
    assert {"README.md", "docs/api.md"} <= names


@pytest.mark.parametrize("doc", DOCS, ids=_name)
def test_every_relative_link_resolves_inside_the_repository(doc: Path) -> None:
    assert broken_links(doc, ROOT) == []


@pytest.mark.parametrize("doc", DOCS, ids=_name)
def test_no_doc_points_at_the_contract_outside_the_repository(doc: Path) -> None:
    assert outside_mentions(doc.read_text()) == []


def test_the_readme_links_the_api_description() -> None:
    assert "docs/api.md" in {target for _, target in links((ROOT / "README.md").read_text())}


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        ("The HTTP API", "the-http-api"),
        ("`POST /v1/messages/count_tokens`", "post-v1messagescount_tokens"),
        ("Browsers on other origins (CORS)", "browsers-on-other-origins-cors"),
        ("Errors (all adapters, `providers/errors.py`)", "errors-all-adapters-providerserrorspy"),
        ("The algorithm: GCRA (a token bucket kept as one number)",
         "the-algorithm-gcra-a-token-bucket-kept-as-one-number"),
        ("Retries, `retry_model`, `regenerate()`", "retries-retry_model-regenerate"),
        ("A [linked](other.md) heading", "a-linked-heading"),
        ("Café — naïve", "café--naïve"),
    ],
)  # fmt: skip
def test_slugs_follow_github(heading: str, expected: str) -> None:
    assert slug(heading) == expected


def test_anchors_number_repeats_and_skip_code() -> None:
    text = (
        "# Title\n## Notes\n### Notes\n```python\n# not a heading\n```\n"
        '## Notes ##\n<a id="custom"></a>\n'
    )
    assert anchors(text) == {"title", "notes", "notes-1", "notes-2", "custom"}


def test_a_fence_closes_only_on_its_own_kind() -> None:
    text = "````md\n```\n# inside\n```\n~~~\n````\n# After\n~~~\n# Fenced\n~~~~\n## End\n"
    assert anchors(text) == {"after", "end"}


def test_a_planted_tree_is_caught(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "target.md").write_text("# Target\n\n## A part\n")
    doc = tmp_path / "docs" / "doc.md"
    doc.write_text(
        "# Doc\n"
        "[ok](target.md) [ok](target.md#a-part) [ok](#doc) [ok](../docs/) "
        "[ok](https://example.com/x#y) ![ok](target.md)\n"
        "[gone](missing.md) [no anchor](target.md#nowhere) [here](#nothing)\n"
        "[outside](../../elsewhere/SPEC.md)\n"
        "`[in code](missing.md)`\n"
        "```\n[in a block](missing.md)\n```\n"
        "[ref]: missing-too.md\n"
    )
    assert broken_links(doc, tmp_path) == [
        "3: missing.md (no such file)",
        "3: target.md#nowhere (no heading 'nowhere' there)",
        "3: #nothing (no heading 'nothing' there)",
        "4: ../../elsewhere/SPEC.md (outside the repository)",
        "9: missing-too.md (no such file)",
    ]


@pytest.mark.parametrize(
    ("line", "caught"),
    [
        ("see [the contract](../shared/SPEC.md)", True),
        ("as SPEC §3 says", True),
        ("the error envelope (SPEC.md)", True),
        ("see [the API](docs/api.md#errors)", False),
        ("OpenAPI's spec, a specification, AF_UNSPEC", False),
    ],
)
def test_mentions_of_the_contract_are_caught(line: str, caught: bool) -> None:
    assert bool(outside_mentions(line)) is caught

"""The requests of the "Host/path matrix" row: every spelling of a protected path, every
method, every way of not holding the right key, every Host."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    method: str
    target: str
    host: str | None
    auth: str
    auth_name: str


def _case_variants(path: str) -> list[str]:
    return [path.upper(), path.title(), path[:2] + path[2:].swapcase()]


def path_variants(path: str) -> list[str]:
    """Ways to spell ``path`` (or reach it) that a lax router might map onto it."""
    first, rest = path[1], path[2:]
    segments = path.strip("/").split("/")
    enc = "".join(f"%{ord(c):02x}" for c in path[1:])
    out = [
        path,
        f"/%{ord(first):02x}{rest}",  # /%61dmin, /%761/models
        f"/%{ord(first):02X}{rest}",
        "/" + enc,
        path.replace("/", "%2F").replace("%2F", "/", 1),
        path.replace("/", "%2f"),
        path.replace(".", "%2e") if "." in path else path + "%2e",
        "/" + "/".join(segments[:-1]) + "/%2e/" + segments[-1],
        "/" + "/".join(segments[:-1]) + "/%2e%2e/" + "/".join(segments[-2:]),
        "/%2e%2e" + path,
        "/%252e%252e" + path,
        "/%c0%ae%c0%ae" + path,
        "/" + path,
        path.replace("/", "//"),
        path + "/",
        path + "//",
        path + ".",
        path + "./",
        path + "/.",
        path + "/..",
        path + "%20",
        path + "%00",
        path + "%0a",
        path + ";",
        path + ";x=y",
        path + ";/",
        path + "..;/",
        path + "?",
        path + "?x=1",
        path + "#",
        path + "#x",
        path + "?#",
        path + "\\",
        path.replace("/", "\\"),
        "/." + path,
        "/./" + path[1:],
        "/" + "/./".join(segments),
        "/x/.." + path,
        "/health/.." + path,
        "/health/%2e%2e" + path,
        "/v1/requests/.." + path,
        "/v1/requests/%2e%2e" + path.replace("/", "%2f"),
        "/admin/.." + path,
        path + "/../" + segments[-1],
        "/" + ";/".join(segments),
        "/" + segments[0] + ";x/" + "/".join(segments[1:]),
        f"http://evil.example{path}",
        f"http://localhost{path}",
        f"https://127.0.0.1:1{path}",
        f"http://evil.example/%2e%2e{path}",
        f"//evil.example{path}",
        *_case_variants(path),
    ]
    return list(dict.fromkeys(out))


HOSTS = (
    None,
    "",
    "localhost",
    "127.0.0.1",
    "127.0.0.1:8787",
    "evil.example",
    "evil.example:80",
    "[::1]",
    "[::1]:8787",
    "admin.internal",
)


def path_matrix(protected: list[str], dev_key: str, admin_key: str, wrong_key: str) -> list[Target]:
    """Every variant of every protected path, every method, every way of not holding the
    right key; Hosts taken in turn (each Host meets each path)."""
    auths = [
        ("no key", ""),
        ("a wrong key", f"Authorization: Bearer {wrong_key}\r\n"),
        ("garbage", "Authorization: Bearer x\r\n"),
        ("Basic with the dev key", f"Authorization: Basic {dev_key}\r\n"),
        ("the dev key in the query", "?"),
        ("the dev key in X-Api-Key", f"X-Api-Key: {dev_key}\r\n"),
    ]
    out = []
    n = 0
    for base in protected:
        admin = base.startswith("/admin/") or base == "/metrics"
        # on admin paths and /metrics the dev key is a valid key, and not the admin key;
        # on /v1 paths the admin key is not an API key
        wrong_right = ("the dev key", f"Authorization: Bearer {dev_key}\r\n")
        other = ("the admin key", f"Authorization: Bearer {admin_key}\r\n")
        for variant in path_variants(base):
            for method in ("GET", "HEAD", "POST", "OPTIONS", "TRACE"):
                for auth_name, auth in [*auths, wrong_right if admin else other]:
                    host = HOSTS[n % len(HOSTS)]
                    n += 1
                    if auth == "?":
                        query = ("&" if "?" in variant else "?") + f"api_key={dev_key}"
                        out.append(Target(method, variant + query, host, "", auth_name))
                    else:
                        out.append(Target(method, variant, host, auth, auth_name))
    return out

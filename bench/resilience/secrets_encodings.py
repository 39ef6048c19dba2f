"""The SSRF row's cases: spellings of the canary listeners' addresses, addresses where
no listener can be, and this machine's names for loopback."""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path

D, BAD, A = "base_url_not_allowed", "invalid_base_url", "either"

# (template, expected refusal); {p}: the listeners' port. All of these name loopback.
LOOPBACK: tuple[tuple[str, str], ...] = (
    ("http://127.0.0.1:{p}", D),
    ("http://localhost:{p}", D),
    ("http://127.1:{p}", D),
    ("http://2130706433:{p}", D),
    ("http://0x7f000001:{p}", D),
    ("http://0177.0.0.1:{p}", D),
    ("http://0x7f.0.0.1:{p}", D),
    ("http://0x7f.1:{p}", D),
    ("http://017700000001:{p}", D),
    ("http://127.0.1:{p}", D),
    ("http://127.000.000.001:{p}", D),
    ("http://0x7F.0x00.0x00.0x01:{p}", D),
    ("http://127.0.0.1.:{p}", D),
    ("http://0x7f000001.:{p}", D),
    ("http://localhost.:{p}", D),
    ("http://LOCALHOST:{p}", D),
    ("http://LocalHost.:{p}", D),
    ("http://foo.localhost:{p}", D),
    ("http://[::1]:{p}", D),
    ("http://[0:0:0:0:0:0:0:1]:{p}", D),
    ("http://[0000:0000:0000:0000:0000:0000:0000:0001]:{p}", D),
    ("http://[::1%25lo]:{p}", A),
    ("http://[::ffff:127.0.0.1]:{p}", D),
    ("http://[0:0:0:0:0:ffff:7f00:1]:{p}", D),
    ("http://[::ffff:7f00:1]:{p}", D),
    ("http://[::ffff:127.0.0.2]:{p}", D),
    ("http://[::127.0.0.1]:{p}", D),
    ("http://[64:ff9b::7f00:1]:{p}", D),
    ("http://[2002:7f00:1::]:{p}", D),
    ("http://0.0.0.0:{p}", D),
    ("http://0:{p}", D),
    ("http://[::]:{p}", D),
    ("http://127.0.0.2:{p}", D),
    ("http://127.2:{p}", D),
    ("http://2130706434:{p}", D),
    ("http://\uff11\uff12\uff17.\uff10.\uff10.\uff11:{p}", D),  # full-width digits
    ("http://127\u30020\u30020\u30021:{p}", D),  # ideographic full stops
    ("http://\u24db\u24de\u24d2\u24d0\u24db\u24d7\u24de\u24e2\u24e3:{p}", D),  # circled letters
    ("http://\u217cocalhost:{p}", D),  # small roman numeral fifty: "l"
    ("https://127.0.0.1:{p}", D),
    ("HTTP://127.0.0.1:{p}", D),
    ("http://127.0.0.1:0{p}", D),
    ("http://127.0.0.1:{p}#@evil.example", D),
    ("http://127.0.0.1:{p}?@evil.example", D),
    ("http://127.0.0.1:{p}/%2e%2e/", D),
    ("http://evil@127.0.0.1:{p}", BAD),
    ("http://evil.example@127.0.0.1:{p}", BAD),
    ("http://user:pass@127.0.0.1:{p}", BAD),
    ("http://@127.0.0.1:{p}", BAD),
    ("http://127.0.0.1:{p}@evil.example", BAD),
    ("http://127.0.0.1:{p}\\@evil.example", BAD),
    ("http://[::1]:{p}@evil.example", BAD),
    ("http://%31%32%37%2e%30%2e%30%2e%31:{p}", A),
    ("http://127%2e0%2e0%2e1:{p}", A),
    ("http://loc%61lhost:{p}", A),
    ("http://localhost%2e:{p}", A),
    ("http://127.0.0.1%00.evil.example:{p}", BAD),
    ("http://127.0.0.1 :{p}", BAD),
    ("http://127.0.0.1:{p}\t", BAD),
    ("http:127.0.0.1:{p}", BAD),
    ("http:/127.0.0.1:{p}", BAD),
    ("http:\\\\127.0.0.1:{p}", BAD),
    ("//127.0.0.1:{p}", BAD),
    ("gopher://127.0.0.1:{p}", BAD),
)

# Where no listener can be: refused when saved, and never used (127.0.0.1 only here).
ELSEWHERE: tuple[str, ...] = (
    "http://169.254.169.254/latest/meta-data/",
    "http://0xa9fea9fe/",
    "http://2852039166/",
    "http://0251.0376.0251.0376/",
    "http://[::ffff:169.254.169.254]/",
    "http://[::ffff:a9fe:a9fe]/",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://[2002:a9fe:a9fe::]/",
    "http://[fd00:ec2::254]/",
    "http://100.100.100.200/",
    "http://168.63.129.16/",
    "http://10.0.0.1:8080/",
    "http://10.1/",
    "http://[::ffff:10.0.0.1]/",
    "http://172.16.0.1/",
    "http://172.31.255.255/",
    "http://192.168.1.1/",
    "http://0300.0250.0.1/",
    "http://[2002:c0a8:101::]/",
    "http://100.64.0.1/",
    "http://[fc00::1]/",
    "http://[fd12:3456::1]/",
    "http://[fe80::1%25eth0]/",
    "http://169.254.170.2/",
    "http://224.0.0.1/",
    "http://255.255.255.255/",
    "http://198.18.0.1/",
    "http://192.0.2.1/",
    "http://240.0.0.1/",
    "http://[2001:db8::1]/",
)
FAST = (
    "http://127.0.0.1:{p}",
    "http://localhost:{p}",
    "http://2130706433:{p}",
    "http://0x7f.1:{p}",
    "http://[::1]:{p}",
    "http://[::ffff:127.0.0.1]:{p}",
    "http://0.0.0.0:{p}",
    "http://127.0.0.2:{p}",
    "http://evil@127.0.0.1:{p}",
    "http://\u24db\u24de\u24d2\u24d0\u24db\u24d7\u24de\u24e2\u24e3:{p}",  # a name IDNA maps
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.1:8080/",
)


def hosts_names() -> list[str]:
    """Names other than ``localhost`` that resolve, here, to loopback only (this
    machine's host name, ``/etc/hosts`` aliases), at most four."""
    names = [socket.gethostname(), "localhost.localdomain", "localhost6", "ip6-localhost"]
    with contextlib.suppress(OSError):
        for line in Path("/etc/hosts").read_text(encoding="utf-8").splitlines():
            fields = line.split("#", 1)[0].split()
            if len(fields) > 1 and (fields[0].startswith("127.") or fields[0] == "::1"):
                names += fields[1:]
    found: list[str] = []
    for name in dict.fromkeys(names):
        if name == "localhost" or len(found) == 4:
            continue
        try:
            infos = socket.getaddrinfo(name, 80, type=socket.SOCK_STREAM)
        except OSError:
            continue
        addresses = {str(info[4][0]) for info in infos}
        if addresses and all(a.startswith("127.") or a == "::1" for a in addresses):
            found.append(name)
    return found

"""How a URL's host is spelled canonically (DESIGN.md §2, §7): one server, one host.

:func:`idna_host` encodes an internationalized name as browsers and requests encode it;
:func:`ipv4_host` writes an IPv4 address, however a link spelled it, as its dotted quad.
:func:`xyro.net.urls.canonicalize` applies both, and the scope spells its configured domains
with them, so a host key, a politeness slot and a robots.txt belong to one server.
"""

from __future__ import annotations

import ipaddress
import re

import idna

# The last label of a host that the WHATWG URL Standard reads as an IPv4 address: a decimal
# number, or "0x" and hex digits (host lowercased).
_IPV4_LAST = re.compile(r"[0-9]+|0x[0-9a-f]*")
# The digits of one part of such an address, by radix ("0x…" hex, "0…" octal, else decimal).
_IPV4_DIGITS = {16: re.compile(r"[0-9a-f]*"), 8: re.compile(r"[0-7]*"), 10: re.compile(r"[0-9]+")}


def idna_host(host: str) -> str:
    """``host`` with each non-ASCII label IDNA-encoded as browsers and requests encode it:
    UTS #46 mapping, non-transitional (``faß.de`` is ``xn--fa-hia.de``, not ``fass.de``: the
    IDNA2003 codec of w3lib and of Python maps ß to ss, ς to σ and drops joiners, which names
    another registered domain), then IDNA2008 labels. ASCII labels are kept as they are (an
    underscore is no IDNA but is a host name). Raises ValueError for a host the ``idna``
    package refuses (a symbol such as ☃, a disallowed joiner)."""
    if host.isascii():
        return host
    try:
        # std3_rules off: "_" passes; the ASCII labels are checked by _HOSTNAME later.
        mapped = idna.uts46_remap(host, std3_rules=False)
        return ".".join(label if label.isascii() else idna.alabel(label).decode("ascii")
                        for label in mapped.split("."))
    except idna.IDNAError as exc:
        raise ValueError(f"host {host!r} is not a valid internationalized name: {exc}") from exc


def ipv4_host(host: str) -> str:
    """``host`` (lowercase, no trailing dot), or the dotted quad it names when it is an IPv4
    address as the WHATWG URL Standard (§3.5, "IPv4 parser") reads one: a host whose last
    label is a number is an address of one to four parts, each decimal, octal ("0177") or
    hex ("0x7f"), the last filling the bytes left (``127.1``, ``2130706433``, ``0x7f.1`` and
    ``0177.0.0.1`` are all ``127.0.0.1``: one server, one host key). Browsers and the
    resolver (inet_aton) connect to that address. Raises ValueError for a number that is no
    address (a part out of range, more than four parts, a bad digit)."""
    last = host[host.rfind(".") + 1:]
    if not (last and "0" <= last[0] <= "9" and _IPV4_LAST.fullmatch(last)):
        return host
    parts = host.split(".")
    if len(parts) > 4:
        raise ValueError(f"host {host!r} ends in a number but has more than four parts")
    numbers = [_ipv4_part(part, host) for part in parts]
    if any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 256 ** (5 - len(numbers)):
        raise ValueError(f"host {host!r} is an IPv4 address out of range")
    value = numbers[-1] + sum(n << 8 * (3 - i) for i, n in enumerate(numbers[:-1]))
    return str(ipaddress.IPv4Address(value))


def _ipv4_part(part: str, host: str) -> int:
    """One part of the IPv4 address ``host`` (WHATWG "IPv4 number parser")."""
    if part.startswith("0x"):
        digits, radix = part[2:], 16
    elif len(part) > 1 and part[0] == "0":
        digits, radix = part[1:], 8
    else:
        digits, radix = part, 10
    # int() alone would also take "+1", " 1" and "1_0".
    if not _IPV4_DIGITS[radix].fullmatch(digits):
        raise ValueError(f"host {host!r} ends in a number but {part!r} is no IPv4 part")
    return int(digits, radix) if digits else 0

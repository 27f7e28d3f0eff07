"""Which ip-entity names a Kafka controller accepts: ``InetAddress.getByName(name)`` succeeds
(reference §2.3 D, §6.12). Offline validation and the sandbox broker share this rule, so what
``kqplan validate`` passes is what the broker accepts.

"""

from __future__ import annotations

import ipaddress
import socket

# quotas.is_ip_literal is Python's view of a literal; the JDK's differs at the edges, and the
# real broker was seen to disagree with it: "[1.2.3.4]" and "0x7f.1" are rejected, "fe80::1%lo"
# is rejected on a host whose lo has no link-local address, "01.02.03.04" is decimal.

_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def _jdk_ipv4(text: str) -> bool:
    """IPAddressUtil.textToNumericFormatV4: 1–4 decimal fields, the last filling the rest."""
    if not 0 < len(text) <= 15:
        return False
    fields = text.split(".")
    if len(fields) > 4 or not all(f.isascii() and f.isdigit() for f in fields):
        return False
    head, last = fields[:-1], int(fields[-1])
    return all(int(f) <= 0xFF for f in head) and last < 1 << (8 * (5 - len(fields)))


def _bsd_ipv4(text: str) -> bool:
    """IPAddressUtil.isBsdParsableV4 (inet_aton): fields in decimal, octal (0…) or hex (0x…)."""
    fields = text.split(".")
    if not text[:1].isdigit() or len(fields) > 4:
        return False
    values = []
    for field_text in fields:
        lowered = field_text.lower()
        try:
            if lowered.startswith("0x"):
                values.append(int(lowered[2:], 16))
            elif lowered.startswith("0") and len(lowered) > 1:
                values.append(int(lowered[1:], 8))
            else:
                values.append(int(lowered, 10) if lowered.isascii() and lowered.isdigit() else -1)
        except ValueError:
            return False
    if min(values) < 0:
        return False
    return all(v <= 0xFF for v in values[:-1]) and values[-1] < 1 << (8 * (5 - len(values)))


def _interface_has_scope(interface: str, address: ipaddress.IPv6Address) -> bool:
    """Inet6Address.deriveNumericScope: the interface exists and holds an IPv6 address of the
    same kind (link-local for link-local, site-local for site-local, any otherwise)."""
    try:
        with open("/proc/net/if_inet6", encoding="ascii") as fh:
            rows = [line.split() for line in fh]
    except OSError:  # not Linux: trust the name if the OS knows the interface
        try:
            socket.if_nametoindex(interface)
        except OSError:
            return False
        return True
    for row in rows:
        if len(row) == 6 and row[5] == interface:
            other = ipaddress.IPv6Address(int(row[0], 16))
            if address.is_link_local and not other.is_link_local:
                continue
            if address.is_site_local and not other.is_site_local:
                continue
            return True
    return False


def _jdk_ipv6(text: str) -> bool | None:
    """An IPv6 literal with an optional zone: True/False, or None when it is not IPv6 at all."""
    literal, _, zone = text.partition("%")
    try:
        address = ipaddress.IPv6Address(literal)
    except ValueError:
        return False if ":" in text else None
    if not zone or zone.isdigit():
        return True
    return _interface_has_scope(zone, address)


def literal_verdict(name: str) -> bool | None:
    """True/False for a name the JDK reads as an address literal (accepted or refused without
    DNS); None for a host name, which only the resolver can judge."""
    host, ipv6_expected = name, False
    if host.startswith("["):
        if not (len(host) > 2 and host.endswith("]")):
            return False
        host, ipv6_expected = host[1:-1], True
    if host[:1] in _HEX_DIGITS or host.startswith(":"):
        if _jdk_ipv4(host):
            return not ipv6_expected  # "[1.2.3.4]" is rejected
        if _bsd_ipv4(host):
            return False  # ambiguous (octal/hex) literals are refused, not looked up
        ipv6 = _jdk_ipv6(host)
        if ipv6 is not None:
            return ipv6
    return False if ipv6_expected else None


def resolvable(name: str) -> bool:
    """``InetAddress.getByName(name)`` succeeds: JDK literal rules first, then DNS."""
    verdict = literal_verdict(name)
    return _dns_resolves(name) if verdict is None else verdict


def _dns_resolves(host: str) -> bool:
    try:
        socket.getaddrinfo(host, None)
    except (OSError, UnicodeError, ValueError):
        return False
    return True

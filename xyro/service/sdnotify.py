"""systemd readiness and status notifications, without a dependency (sd_notify(3)).

A datagram to ``$NOTIFY_SOCKET`` (a path, or an abstract socket when it starts with ``@``).
Outside systemd the variable is unset and every call is a no-op.
"""

from __future__ import annotations

import os
import socket


class Notifier:
    """Sends ``READY=1``, ``STATUS=…``, ``RELOADING=1``, ``STOPPING=1`` to systemd."""

    def __init__(self, address: str | None = None) -> None:
        address = os.environ.get("NOTIFY_SOCKET") if address is None else address
        if address and address.startswith("@"):
            address = "\0" + address[1:]
        self._address = address or None

    @property
    def enabled(self) -> bool:
        return self._address is not None

    def notify(self, **fields: str | int) -> bool:
        """Send ``KEY=value`` lines (keys upper-cased); False when not under systemd or on error."""
        if self._address is None:
            return False
        message = "\n".join(f"{k.upper()}={v}" for k, v in fields.items()).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.sendto(message, self._address)
            return True
        except OSError:
            return False  # systemd went away or the socket is not ours: not worth dying for

    def ready(self, status: str) -> bool:
        return self.notify(ready=1, status=status)

    def status(self, status: str) -> bool:
        return self.notify(status=status)

    def stopping(self) -> bool:
        return self.notify(stopping=1)

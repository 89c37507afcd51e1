"""Where the daemon's global PageRank estimate stands (:mod:`xyro.jobs.global_round`), as
saved in the store's ``state`` table under :data:`STATE_KEY` and shown by ``xyro status``.
Plain data: no numerics, so ``xyro status`` reads it without loading the ranking package."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

STATE_KEY = "global_estimate.rounds"


@dataclass(frozen=True)
class RoundState:
    """Where the rounds are: ``round`` rounds queued of ``rounds``; ``local_pages`` (n: at
    the last check before the start, then fixed) and ``budget`` (extra pages allowed, 0
    until the start); ``spent``: out-of-scope pages queued; ``pending``: (URL id, URL) of
    the last round's pages not fetched yet; ``estimate_change_l1``: L1 distance between the
    estimate and local PageRank at the last round; ``updated_at``: clock seconds;
    ``selector`` and ``out_degree``: the configured ones at that time (empty in a state
    saved before they were recorded); ``scope``: the fingerprint of the scope the rounds
    belong to (:meth:`xyro.net.urls.Scope.fingerprint`; empty before it was recorded)."""

    round: int = 0
    rounds: int = 0
    local_pages: int = 0
    budget: int = 0
    spent: int = 0
    pending: tuple[tuple[int, str], ...] = ()
    finished: bool = False
    estimate_change_l1: float | None = None
    updated_at: float | None = None
    selector: str = ""
    out_degree: str = ""
    scope: str = ""

    @property
    def started(self) -> bool:
        return self.budget > 0

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_stored(cls, value: Any) -> RoundState:
        """The state saved in the store (a JSON string), or a fresh one for None."""
        if value is None:
            return cls()
        try:
            data = dict(json.loads(value) if isinstance(value, str) else value)
            data["pending"] = tuple((int(i), str(u)) for i, u in data.get("pending", ()))
            return cls(**data)
        except (TypeError, ValueError, KeyError) as exc:
            raise ValueError(f"the saved state {STATE_KEY!r} is not a round state this "
                             f"version of Xyro can read ({exc})") from None

    @property
    def pending_urls(self) -> frozenset[str]:
        return frozenset(url for _, url in self.pending)

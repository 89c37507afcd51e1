"""Serve a synthetic web in the foreground: ``python -m xyro.synthweb --hosts 50 --pages 20000``.

Prints the seed URLs (one per line) on stdout, then serves until interrupted (Ctrl-C or
SIGTERM). ``--log FILE`` dumps the request log as JSON lines on exit.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from xyro.clock import AcceleratedClock, WallClock
from xyro.synthweb.spec import HOSTILE_KINDS, WebSpec
from xyro.synthweb.web import SyntheticWeb


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m xyro.synthweb", description=__doc__)
    p.add_argument("--hosts", type=int, default=50, help="number of hosts (default 50)")
    p.add_argument("--pages", type=int, default=20000, help="number of pages (default 20000)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--xml-share", type=float, default=0.3)
    p.add_argument("--speed", type=float, default=1.0,
                   help="clock speed: simulated seconds per real second (default 1: wall)")
    p.add_argument("--epoch", type=float, default=None,
                   help="wall-clock POSIX time at which the clock reads --sim-start (default: "
                        "now); a crawler run with the same --speed, --epoch and --sim-start "
                        "(xyro run) shares the web's time line")
    p.add_argument("--sim-start", type=float, default=None,
                   help="simulated POSIX time at --epoch, when the pages start changing "
                        "(default: the epoch); the same value gives the same changes")
    p.add_argument("--change-rate-mean", type=float, default=None,
                   help="mean change rate of a page, per simulated second (default 1/day)")
    p.add_argument("--change-rate-shape", type=float, default=None,
                   help="Gamma shape of the change rates (default 0.7; smaller spreads them "
                        "over more decades)")
    p.add_argument("--static-share", type=float, default=None,
                   help="share of pages that never change (default 0.2)")
    p.add_argument("--no-hostile", action="store_true", help="leave out every hostile case")
    p.add_argument("--no-crawl-delay", action="store_true", help="no Crawl-delay lines")
    p.add_argument("--log", type=Path, help="write the request log here (JSON lines) on exit")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        rates = {k: v for k, v in (("change_rate_mean", args.change_rate_mean),
                                   ("change_rate_shape", args.change_rate_shape),
                                   ("static_share", args.static_share)) if v is not None}
        spec = WebSpec(seed=args.seed, n_hosts=args.hosts, n_pages=args.pages,
                       xml_share=args.xml_share,
                       hostile=frozenset() if args.no_hostile else HOSTILE_KINDS,
                       crawl_delay_share=0.0 if args.no_crawl_delay else 0.25, **rates)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.speed <= 0:
        print(f"error: --speed must be > 0, got {args.speed}", file=sys.stderr)
        return 2
    if args.speed == 1.0 and args.epoch is None and args.sim_start is None:
        clock: WallClock | AcceleratedClock = WallClock()
    else:
        epoch = WallClock().now() if args.epoch is None else args.epoch
        clock = AcceleratedClock.from_epoch(epoch, args.speed, args.sim_start)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    with SyntheticWeb(spec, clock, t0=args.sim_start) as web:
        print("\n".join(web.seeds), flush=True)
        print(f"serving {len(web.model.pages)} pages on {len(web.seeds)} hosts; "
              f"Ctrl-C to stop", file=sys.stderr, flush=True)
        while not done.wait(0.5):
            pass
        if args.log is not None:
            n = web.log.dump_jsonl(args.log)
            print(f"wrote {n} requests to {args.log}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

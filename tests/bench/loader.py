"""Loader throughput: N XML documents of ~20 KB sharing one external DTD,
loaded with and without DTD validation and canonical (C14N 2.0) signatures.

Each document goes through ``xyro.loader.load_document`` exactly as in a crawl: safe
parser, cache-only resolver (the DTD is in the cache, as after its first fetch), link
extraction, validation and/or C14N 2.0 + MD5. One thread (a DOCTYPE document holds the
loader's process-wide external-loads lock anyway). Prints ONE JSON line; progress on stderr.

    .venv/bin/python tests/bench/loader.py [--docs 10000] [--quick]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

import psutil

from benchmachine import machine  # a sibling script module (tests/bench is sys.path[0])

from xyro.loader import EntityCache, LoaderSettings, load_document

BASE = "http://bench.test/docs/"
DTD_URL = "http://bench.test/dtd/catalog.dtd"
DTD = b"""<!ENTITY site "Xyro bench">
<!ELEMENT catalog (title, item*)>
<!ATTLIST catalog xmlns:xlink CDATA #FIXED "http://www.w3.org/1999/xlink" id CDATA #REQUIRED>
<!ELEMENT title (#PCDATA)>
<!ELEMENT item (#PCDATA)>
<!ATTLIST item xlink:type (simple) #FIXED "simple" xlink:href CDATA #REQUIRED
               price CDATA #IMPLIED>
"""
WORDS = ("xml", "warehouse", "crawler", "page", "link", "graph", "rank", "change", "museum",
         "painting", "river", "city", "market", "news", "report", "schema", "element")


def make_docs(n: int, target_bytes: int = 20_000, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        parts = [f'<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE catalog SYSTEM '
                 f'"../dtd/catalog.dtd">\n<catalog xmlns:xlink="http://www.w3.org/1999/xlink"'
                 f' id="c{i}">\n<title>Catalog {i} of &site;</title>\n']
        size = sum(map(len, parts))
        j = 0
        while size < target_bytes:
            text = " ".join(rng.choice(WORDS) for _ in range(12))
            line = (f'  <item xlink:type="simple" xlink:href="d{rng.randrange(n)}.xml" '
                    f'price="{rng.randrange(1000)}">{text}</item>\n')
            parts.append(line)
            size += len(line)
            j += 1
        parts.append("</catalog>\n")
        docs.append("".join(parts).encode())
    return docs


def run(docs: list[bytes], validate: bool, signatures: bool) -> dict:
    cache = EntityCache()
    cache.put(DTD_URL, DTD)
    settings = LoaderSettings(validate=validate)
    total = sum(map(len, docs))
    t0 = time.perf_counter()
    links = valid = 0
    digests = set()
    for i, body in enumerate(docs):
        res = load_document(body, f"{BASE}d{i}.xml", cache, settings, signatures=signatures)
        if res.status != "loaded" or (validate and res.valid is not True):
            raise SystemExit(f"document {i} did not load: {res}")
        links += len(res.links)
        valid += res.valid is True
        if res.signature is not None:
            digests.add(res.signature)
    seconds = time.perf_counter() - t0
    # What was loaded, so a run that got faster by skipping work shows it: every document
    # valid when validating, one distinct signature per document when signing.
    return {"validation": validate, "canonical_signature": signatures, "documents": len(docs),
            "seconds": round(seconds, 3), "documents_per_s": round(len(docs) / seconds, 1),
            "mb_per_s": round(total / seconds / 1e6, 2), "links": links, "valid": valid,
            "distinct_signatures": len(digests)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="300 documents (smoke run)")
    args = parser.parse_args()
    n = 300 if args.quick else args.docs
    print(f"generating {n} documents...", file=sys.stderr)
    docs = make_docs(n)
    runs = []
    for validate, signatures in ((False, False), (False, True), (True, False), (True, True)):
        print(f"validation={validate} signatures={signatures}...", file=sys.stderr)
        runs.append(run(docs, validate, signatures))
    base = runs[0]["documents_per_s"]
    for r in runs:
        r["speed_vs_parse_only"] = round(r["documents_per_s"] / base, 3)
    full = runs[-1]
    print(json.dumps({
        "benchmark": "loader", "documents": n,
        "mean_document_bytes": round(sum(map(len, docs)) / n),
        "links_in_documents": sum(d.count(b"<item ") for d in docs),  # one xlink:href each
        "runs": runs, "target_documents_per_s_with_signatures": 500,
        "target_met": min(runs[1]["documents_per_s"], full["documents_per_s"]) >= 500,
        "peak_rss_mb": round(psutil.Process().memory_info().rss / 2**20, 1),
        "machine": machine()}))


if __name__ == "__main__":
    main()

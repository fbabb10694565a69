"""List the cells of results.json files whose streams collapsed (responses arrived in one burst).

A request is *coalesced* when its tokens did not arrive as a stream: either the chunks all
arrived together at the end ("burst": time from first to last chunk under `SPAN_SHARE` of the
request's end-to-end latency, i.e. TTFT ~ E2EL; what a client starved of CPU sees, one chunk
per token but read in one go), or far fewer chunks than tokens ("merged": vLLM merges deltas
when its API server falls behind the engine). A cell is collapsed when at least `CELL_SHARE`
of its requests are coalesced. Healthy streams on the 2-core CPU plan had first-to-last chunk
spans of at least 0.82 x E2EL at every concurrency; burst requests are near 0.

    python benchmarks/find_collapsed.py /tmp/collapse/run*/results.json [--all]

Prints one line per collapsed cell (or per cell with --all) and a count per file.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

MIN_TOKENS = 4  # shorter outputs cannot show a stream's shape
SPAN_SHARE = 0.10  # first-to-last chunk under 10% of E2EL: delivered in one burst
CHUNK_SHARE = 0.5  # fewer chunks than half the tokens: deltas were merged
CELL_SHARE = 0.5


def coalesced(rec: dict) -> str | None:
    """Why this request's stream is not a stream, or None."""
    tokens = rec.get("output_tokens") or 0
    if rec.get("error") or tokens < MIN_TOKENS or not rec.get("e2el_s"):
        return None
    chunks = len(rec.get("itl_s") or []) + 1
    span = sum(rec.get("itl_s") or [])
    if span < SPAN_SHARE * rec["e2el_s"]:
        return "burst"
    if chunks < CHUNK_SHARE * tokens:
        return "merged"
    return None


def cell_rows(results: dict) -> list[dict]:
    cells: dict[tuple, list[dict]] = {}
    for rec in results.get("records", []):
        if rec["phase"] == "warmup":
            continue
        key = (rec["phase"], rec["arm"], rec["concurrency"], rec.get("repeat", 0))
        cells.setdefault(key, []).append(rec)
    rows = []
    for (phase, arm, conc, rep), recs in cells.items():
        why = [w for r in recs if (w := coalesced(r))]
        ok = [r for r in recs if not r.get("error") and r.get("e2el_s")]
        send = [r["send_s"] for r in recs]
        ends = [r["send_s"] + r["e2el_s"] for r in ok]
        rows.append({
            "cell": f"{phase} {arm} c={conc} r{rep + 1}",
            "n": len(recs),
            "coalesced": len(why),
            "kinds": sorted(set(why)),
            "collapsed": len(why) >= CELL_SHARE * len(recs),
            "ttft_ms": 1000 * statistics.median(r["ttft_s"] for r in ok) if ok else None,
            "e2el_ms": 1000 * statistics.median(r["e2el_s"] for r in ok) if ok else None,
            "chunks": statistics.median(len(r["itl_s"]) + 1 for r in ok) if ok else None,
            "tokens": statistics.median(r["output_tokens"] or 0 for r in ok) if ok else None,
            "wall_s": (max(ends) - min(send)) if ends else None,
            "start_s": min(send),
        })
    return sorted(rows, key=lambda r: r["start_s"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", type=Path)
    ap.add_argument("--all", action="store_true", help="print every cell, not only collapsed")
    args = ap.parse_args(argv)
    total = 0
    for path in args.results:
        try:
            rows = cell_rows(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError) as exc:
            print(f"find_collapsed: error: cannot read {path}: {exc}", file=sys.stderr)
            return 2
        bad = [r for r in rows if r["collapsed"]]
        total += len(bad)
        print(f"{path}: {len(bad)} of {len(rows)} cells collapsed")
        for r in rows if args.all else bad:
            print(f"  {'COLLAPSED' if r['collapsed'] else 'ok':9} {r['cell']:24} "
                  f"{r['coalesced']:3}/{r['n']:<3} coalesced {','.join(r['kinds']) or '-':13} "
                  f"TTFT {r['ttft_ms']:7.1f} E2EL {r['e2el_ms']:7.1f} ms  "
                  f"chunks {r['chunks']:4.0f}/{r['tokens']:4.0f} tok  wall {r['wall_s']:5.2f}s "
                  f"@{r['start_s']:.1f}s")
    print(f"total collapsed cells: {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

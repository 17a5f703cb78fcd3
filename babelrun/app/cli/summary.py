"""What an audit prints when it ends: the run statistics table, the cards' summary lines (each
judge's R with its verdict, its languages' verdicts counted, the cards stopped early) and the
spend."""

from __future__ import annotations

from pathlib import Path


def spent(stats) -> str:
    """The summary line's tail: what this process spent, per currency (the cost ledger)."""
    by_currency: dict[str, float] = {}
    for j in stats.judges:
        if j.spend is not None:
            by_currency[j.spend["currency"]] = by_currency.get(j.spend["currency"], 0.0) + j.spend["total"]
    return "".join(f"; spent {usd:.4f} {cur}" for cur, usd in sorted(by_currency.items()))


def cards(result) -> None:
    print(f"cards: {Path(result.run_dir) / 'cards.json'}  "
          f"report: {Path(result.run_dir) / 'report.html'}, report.md")
    for jc in result.cards.judges:
        r = jc.overall.reliability
        print(f"  {jc.judge}: R = {r.value} [{r.lo}, {r.hi}] over {jc.overall.items} items{verdicts(jc)}")
    for ac in result.cards.agentic:
        r = ac.overall.reliability
        print(f"  {ac.judge} (agentic): R_agent = {r.value} [{r.lo}, {r.hi}] over {ac.overall.items} items"
              f"{verdicts(ac)}")
    for pc in result.cards.pointwise or []:
        r, d = pc.overall.reliability, pc.overall.discrimination
        print(f"  {pc.judge} (pointwise): R_pw = {r.value} [{r.lo}, {r.hi}], discrimination {d.value} "
              f"over {pc.overall.items} items{verdicts(pc)}")


def verdicts(jc) -> str:
    """The summary line's verdict tail: the overall card's verdict (uncertain: with roughly how
    many items decide it), its languages' verdicts counted, and the cards stopped early."""
    from ...report.summary import uncertain_text
    from ...score.verdict import DECIDED, UNCERTAIN, UNREADABLE

    card = jc.overall
    if card.verdict == UNREADABLE:
        return " — no verdict: its replies could not be read (see below)"
    head = (f" — {uncertain_text(card)}" if card.verdict == UNCERTAIN
            else f" — {card.verdict}" if card.verdict is not None else "")
    langs = [lc.card for lc in jc.languages]
    counts = [f"{sum(c.verdict == v for c in langs)} {v}" for v in DECIDED if any(c.verdict == v for c in langs)]
    perts = [pc.card for lc in jc.languages for pc in getattr(lc, "perturbations", [])]
    stopped = sum(isinstance(getattr(c, "stopped", None), str) for c in langs + perts)
    tail = [f"languages: {', '.join(counts)}"] if counts else []
    tail += [f"{stopped} card(s) stopped early: their intervals hold at every n"] if stopped else []
    return head + ("; " + "; ".join(tail) if tail else "")


def stats_table(stats) -> str:
    """The run's statistics per judge, as aligned text."""
    head = ("judge", "ok", "failed", "calls", "retries", "429s", "p50 ms", "p95 ms", "p99 ms",
            "tok in", "tok out", "calls/s")
    rows = [head]
    for j in stats.judges:
        lat = j.latency_ms
        rows.append((j.judge, j.ok, j.failed, j.calls, j.retries, j.rate_limited,
                     lat["p50"], lat["p95"], lat["p99"], j.tokens_in, j.tokens_out, j.calls_per_s))
    cells = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in cells]
    for j in stats.judges:
        if j.spend is not None:  # the cost ledger: this run's spend
            kinds = ", ".join(f"{k} {v:.4f}" for k, v in j.spend["by_kind"].items())
            lines.append(f"{j.judge}: spent {j.spend['total']:.4f} {j.spend['currency']} ({kinds})")
        if j.cached:
            lines.append(f"{j.judge}: {j.cached} record(s) from the response cache (no call)")
    for j in stats.judges:
        if j.errors:
            lines.append(f"{j.judge}: failed calls by kind: " + ", ".join(f"{k} {n}" for k, n in j.errors.items()))
    return "\n".join(lines)

"""The bundled example runs offline end to end, and a second run repeats nothing."""

import re

import msgspec

from babelrun.app.cli import main
from helpers import ROOT


def test_quickstart_runs_offline_and_resumes_to_the_same_cards(tmp_path, capsys):
    body = msgspec.yaml.decode((ROOT / "examples" / "quickstart.yaml").read_bytes())
    body["output_dir"] = str(tmp_path / "run")
    path = tmp_path / "quickstart.yaml"
    path.write_bytes(msgspec.yaml.encode(body))

    assert main(["audit", str(path), "--progress-every", "5"]) == 0
    out = capsys.readouterr().out
    planned = int(re.search(r"(\d+) new records; 0 of \1 planned", out).group(1))
    assert planned > 4000  # 12 languages x 10 references x 5 perturbations x 2 severities x 2 orders, less no-ops
    run = tmp_path / "run"
    for name in ("cards.json", "report.md", "judgements.parquet", "run.yaml", "plan.json", "stats.json"):
        assert (run / name).is_file(), name
    cards = (run / "cards.json").read_bytes()
    decoded = msgspec.json.decode(cards)
    assert [j["judge"] for j in decoded["judges"]] == ["biased", "careful"]
    assert len(decoded["judges"][0]["languages"]) == 12
    careful, biased = decoded["judges"][1]["overall"], decoded["judges"][0]["overall"]
    assert careful["reliability"]["value"] > 0.65 > biased["reliability"]["value"]
    # careful's weaker languages (sw, yo knobs 0.8 and 0.7) sit near the bar: their intervals
    # straddle it, and the report, the summary line and the legend say so
    verdicts = {lc["lang"]: lc["card"]["verdict"] for lc in decoded["judges"][1]["languages"]}
    assert verdicts["sw"] == verdicts["yo"] == "uncertain" and verdicts["en"] == "pass"
    report = (run / "report.md").read_text()
    assert "?: uncertain" in report and re.search(r"\| sw \| [0-9.]+ ✗ \| [0-9.]+ \? \|", report)  # the matrix
    assert "uncertain: R's interval straddles the 0.65 bar; about" in report
    assert re.search(r"careful: R = .* — pass; languages: \d+ pass, \d+ uncertain", out)

    assert main(["audit", str(path)]) == 0
    assert f" 0 new records; {planned} of {planned} planned" in capsys.readouterr().out
    assert (run / "cards.json").read_bytes() == cards

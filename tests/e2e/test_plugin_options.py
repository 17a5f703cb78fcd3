"""A plugin backend in a package of its own declares an option babelrun has never heard of.

The package is written to a temporary folder (a module and a ``.dist-info`` whose
``entry_points.txt`` names the class under ``babelrun.judges``) and put on the path of a
``babelrun audit`` subprocess only: nothing is installed into the real tree, and babelrun
itself names neither the backend nor its option. The option must reach the backend (its
replies follow it), be written flat in run.yaml, be part of the judge_id, and an unknown
field on that judge must be refused with the did-you-mean drawn from the plugin's fields.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import msgspec

from helpers import ROOT, write_manifest

PLUGIN = '''
from typing import Literal

from babelrun.judges import Capabilities, JudgeReply, options_of
from babelrun.spec import JudgeOptions


class MoodOptions(JudgeOptions, frozen=True):
    mood: Literal["decisive", "undecided"] = "decisive"


class MoodJudge:
    capabilities = Capabilities(in_process=True)
    options = MoodOptions

    def __init__(self, spec, judge_id, seed):
        self.spec, self.judge_id = spec, judge_id
        self.mood = options_of(spec, MoodOptions).mood

    async def judge(self, request):
        return JudgeReply(raw="tie" if self.mood == "undecided" else "A")

    async def aclose(self):
        pass
'''


def _package(folder: Path) -> Path:
    site = folder / "site"
    (site / "moodplugin").mkdir(parents=True)
    (site / "moodplugin" / "__init__.py").write_text(PLUGIN)
    info = site / "moodplugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: moodplugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[babelrun.judges]\nmood = moodplugin:MoodJudge\n")
    return site


def _audit(manifest: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    return subprocess.run([sys.executable, "-m", "babelrun", "audit", str(manifest), "--progress-every", "600"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_a_plugin_option_reaches_its_backend_and_run_yaml(tmp_path):
    site = _package(tmp_path)
    corpus = {"sources": [{"kind": "bundled"}], "languages": ["en"], "references_per_language": 3}
    m = write_manifest(tmp_path, [{"name": "calm", "backend": "mood", "mood": "undecided"},
                                  {"name": "plain", "backend": "mood"}],
                       corpus=corpus, perturbations=[{"name": "truncate", "severities": [0.6]}])
    done = _audit(m, site)
    assert done.returncode == 0, done.stderr
    assert "mood" not in (ROOT / "babelrun" / "judges" / "__init__.py").read_text()  # babelrun names it nowhere
    run = msgspec.yaml.decode((tmp_path / "run" / "run.yaml").read_bytes())
    judges = {j["name"]: j for j in run["manifest"]["judges"]}
    assert judges["calm"]["mood"] == "undecided" and "options" not in judges["calm"]  # flat, as written
    assert run["judge_ids"]["calm"] != run["judge_ids"]["plain"]  # the option is part of the identity
    cards = {c["judge"]: c for c in msgspec.json.decode((tmp_path / "run" / "cards.json").read_bytes())["judges"]}
    assert cards["calm"]["overall"]["tie_rate"]["value"] == 1.0  # every reply followed the option
    assert cards["plain"]["overall"]["tie_rate"]["value"] == 0.0


def test_an_unknown_field_on_a_plugin_judge_suggests_the_plugins_own(tmp_path):
    site = _package(tmp_path)
    m = write_manifest(tmp_path, [{"name": "calm", "backend": "mood", "moood": "undecided"}])
    done = _audit(m, site)
    assert done.returncode == 2
    assert "judges[0].moood: unknown field; did you mean 'mood'?" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "run").exists()

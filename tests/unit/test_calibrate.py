"""CBC (babelrun.analyses.calibrate): the statistics against independent implementations, recovery of a
known judge × language interaction from the additive model, and an end-to-end run over two
run directories audited with the simulated judge."""

import math

import numpy as np
import pyarrow as pa
import pytest

from babelrun.analyses import calibrate
from babelrun.score import stats as stats_

# --- the statistics against scipy / statsmodels ------------------------------------------------


def test_kendall_tau_b_matches_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    for n in (2, 3, 5, 8, 20, 60):
        for values in (5, 1000):  # heavy ties, then almost none
            x, y = rng.integers(0, values, n), rng.integers(0, values, n)
            if len(set(x)) == 1 or len(set(y)) == 1:
                continue
            expected = stats.kendalltau(x, y, variant="b").statistic
            assert stats_.kendall_tau_b(x, y) == pytest.approx(expected, abs=1e-12)
    assert math.isnan(stats_.kendall_tau_b([1, 1, 1], [1, 2, 3]))  # constant: undefined
    assert stats_.kendall_tau_b([1, 2, 3], [3, 2, 1]) == -1.0


def test_rank_agreement_is_the_mean_pairwise_tau_b():
    rng = np.random.default_rng(1)
    scores = rng.integers(0, 4, size=(3, 6, 5)).astype(float)  # (replicates, judges, langs)
    scores[1, :, 2] = np.nan  # a language left out of one replicate
    got = calibrate.rank_agreement(scores)
    for r in range(3):
        taus = [stats_.kendall_tau_b(scores[r, :, a], scores[r, :, b])
                for a in range(5) for b in range(a + 1, 5)
                if not (np.isnan(scores[r, :, a]).any() or np.isnan(scores[r, :, b]).any())]
        assert got[r] == pytest.approx(np.nanmean(taus), abs=1e-12)


def test_benjamini_hochberg_matches_statsmodels():
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    rng = np.random.default_rng(2)
    for m in (1, 2, 7, 50, 400):
        p = np.concatenate([rng.uniform(size=m - m // 4), rng.uniform(0, 0.01, m // 4)])
        p[: m // 5] = p[0]  # some equal p-values
        rng.shuffle(p)
        expected = multitest.multipletests(p, method="fdr_bh")[1]
        np.testing.assert_allclose(stats_.benjamini_hochberg(p), expected, rtol=0, atol=1e-12)
    # Untestable entries (NaN) stay NaN and are not counted among the tests.
    got = stats_.benjamini_hochberg([0.01, np.nan, 0.04])
    np.testing.assert_allclose(got, [0.02, np.nan, 0.04])


def test_student_t_tail_matches_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    t = np.concatenate([rng.normal(0, 3, 300), [0.0, -np.inf, np.inf]])
    df = rng.integers(1, 60, t.size)
    np.testing.assert_allclose(stats_.t_sf(t, df), stats.t.sf(t, df), rtol=0, atol=1e-13)


# --- recovery from the additive model --------------------------------------------------------

J, L, T, SIGMA = 5, 8, 30, 0.05


def _model(seed: int, interaction_sd: float, judge_effects=(0.0, 0.05, 0.1, 0.15, 0.2)):
    """score[j, l, t] = mu + a_j + b_l + c_t + (ab)_jl + N(0, SIGMA²), with (ab) drawn and
    then double-centred (only its sum-to-zero part is identifiable)."""
    rng = np.random.default_rng(seed)
    ab = calibrate.interaction(rng.normal(0, interaction_sd, (J, L)))
    a = np.asarray(judge_effects)
    b, c = rng.normal(0, 0.1, L), rng.normal(0, 0.1, T)
    scores = (0.5 + a[:, None, None] + b[None, :, None] + c[None, None, :] + ab[:, :, None]
              + rng.normal(0, SIGMA, (J, L, T)))
    return scores, ab, a


def _calibrate(scores, **kw):
    return calibrate.calibrate(scores, [f"j{i}" for i in range(J)], [f"l{i}" for i in range(L)],
                               [f"t{i}" for i in range(T)], **kw)


def test_interaction_is_exact_without_noise():
    rng = np.random.default_rng(4)
    ab = calibrate.interaction(rng.normal(size=(J, L)))
    np.testing.assert_allclose(ab.sum(axis=0), 0, atol=1e-12)
    np.testing.assert_allclose(ab.sum(axis=1), 0, atol=1e-12)
    additive = rng.normal(size=J)[:, None] + rng.normal(size=L)[None, :]
    np.testing.assert_allclose(calibrate.interaction(additive + ab), ab, atol=1e-12)


def test_recovers_a_known_interaction():
    scores, ab, _ = _model(seed=5, interaction_sd=0.1)
    cal = _calibrate(scores)
    # The estimate is C_J·M·C_L (C_n = I − 11ᵀ/n, the centring matrices); on the additive
    # model its error is C_J·Ē·C_L, Ē the judge × language means of the noise: i.i.d. with
    # variance SIGMA²/T. vec(C_J Ē C_L) = (C_L ⊗ C_J)·vec(Ē) and C_L ⊗ C_J is a projection, so
    # each entry's error has variance SIGMA²/T·(1 − 1/J)(1 − 1/L): SD 0.0076 here. We allow
    # 4 SD per entry (P(any of the 40 beyond) ≈ 40 × 6.3e-5 = 0.25 %; the seed is fixed).
    sd = SIGMA / math.sqrt(T) * math.sqrt((1 - 1 / J) * (1 - 1 / L))
    error = np.asarray(cal.interaction) - ab
    assert np.abs(error).max() <= 4 * sd, np.abs(error).max() / sd
    # Rounding to 4 decimals aside, the report's noise and standard error estimate the truth.
    assert cal.noise_sd == pytest.approx(SIGMA, rel=0.1)
    assert cal.interaction_se == pytest.approx(sd, rel=0.1)
    # Calibrated = raw − interaction: every language ranks the judges in the same order.
    assert all(row == [row[0]] * L for row in cal.ranks_calibrated)
    assert cal.ranks_calibrated == [[5 - j] * L for j in range(J)]


def test_calibration_raises_held_out_agreement():
    scores, _, _ = _model(seed=6, interaction_sd=0.1)
    agreement = _calibrate(scores).agreement
    assert agreement.valid_replicates == agreement.replicates == 200
    assert (agreement.train_tasks, agreement.heldout_tasks) == (15, 15)
    # Raw rankings disagree across languages (the interaction is as large as the judges'
    # spacing); calibrated ones, estimated on other tasks, nearly agree.
    assert agreement.raw.value < 0.6
    assert agreement.calibrated.value > 0.85
    assert agreement.gain.lo > 0.2


def test_without_interaction_calibration_changes_rankings_by_noise_only():
    # Judges 0 and 1 are 0.005 apart (less than one noise SD of a language's difference,
    # SIGMA·sqrt(2/T) = 0.013); the others are far apart.
    effects = (0.0, 0.005, 0.1, 0.2, 0.3)
    scores, _, a = _model(seed=7, interaction_sd=0.0, judge_effects=effects)
    cal = _calibrate(scores)
    agreement = cal.agreement
    # Before and after agree within each other's bootstrap intervals.
    assert agreement.raw.lo <= agreement.calibrated.value <= agreement.raw.hi
    assert agreement.calibrated.lo <= agreement.raw.value <= agreement.calibrated.hi
    assert agreement.gain.lo <= 0 <= agreement.gain.hi
    # Ranks change only between judges whose true means are within 4 noise SDs of a
    # language's difference of two judges (SIGMA·sqrt(2/T)).
    raw, after = np.asarray(cal.ranks_raw), np.asarray(cal.ranks_calibrated)
    close = 4 * SIGMA * math.sqrt(2 / T)
    for i in range(J):
        for k in range(i + 1, J):
            flipped = np.sign(raw[i] - raw[k]) != np.sign(after[i] - after[k])
            assert not flipped.any() or abs(a[i] - a[k]) < close, (i, k)
    # And no significant reversal between judges that are far apart.
    far = {(f"j{i}", f"j{k}") for i in range(J) for k in range(J) if abs(a[i] - a[k]) >= close}
    assert not [r for r in cal.reversals if (r.better, r.worse) in far]


def test_reversal_is_found_and_adjusted():
    scores, _, _ = _model(seed=8, interaction_sd=0.0)
    scores[0, 3] += 0.3  # judge 0, the worst overall, is the best in language 3
    cal = _calibrate(scores)
    found = {(r.lang, r.better, r.worse) for r in cal.reversals}
    assert found == {("l3", f"j{k}", "j0") for k in range(1, J)}
    assert cal.reversal_tests == L * J * (J - 1) // 2
    assert all(r.p <= r.p_adjusted < 0.05 and r.in_lang < 0 < r.overall for r in cal.reversals)


def test_missing_cells_are_left_out_for_every_judge():
    scores, _, _ = _model(seed=9, interaction_sd=0.1)
    scores[2, 1, 4] = np.nan  # one judge lacks one language × task cell
    cal = _calibrate(scores, replicates=50)
    assert cal.cells == L * T - 1
    assert cal.noise_sd is None  # the grid is no longer complete
    kept = np.delete(scores[:, 1, :], 4, axis=1).mean(axis=1)
    np.testing.assert_allclose([row[1] for row in cal.raw], kept, atol=1e-4)


# --- from records -----------------------------------------------------------------------------


def _records(rows):
    names = ["judge_id", "judge", "item_id", "order", "lang", "perturbation", "verdict"]
    return pa.table({name: [r[i] for r in rows] for i, name in enumerate(names)})


def test_cell_means_from_records():
    rows = [
        ("id-a", "a", "i1", "ref_first", "en", "truncate", "reference"),
        ("id-a", "a", "i1", "pert_first", "en", "truncate", "tie"),
        ("id-a", "a", "i2", "ref_first", "en", "shuffle", "reference"),
        ("id-a", "a", "i3", "ref_first", "hi", "truncate", "invalid"),
        ("id-a", "a", "i4", "ref_first", "hi", "shuffle", "reference"),
        ("id-b", "b", "i1", "ref_first", "en", "truncate", "perturbed"),
        ("id-b", "b", "i2", "ref_first", "en", "shuffle", "reference"),
        ("id-b", "b", "i3", "ref_first", "hi", "truncate", "reference"),
        ("id-a", "a", "i5", "ref_first", "sw", "shuffle", "reference"),  # only judge a has sw
    ]
    cells = calibrate.cell_means(_records(rows))
    assert (cells.judges, cells.langs, cells.tasks) == (["a", "b"], ["en", "hi"], ["shuffle", "truncate"])
    expected = [[[1.0, 0.5], [np.nan, 0.0]], [[1.0, 0.0], [np.nan, 1.0]]]
    np.testing.assert_array_equal(cells.scores, expected)
    assert cells.dropped == [calibrate.Dropped("hi", "shuffle", ["b"]),
                             calibrate.Dropped("sw", "shuffle", ["b"])]


def test_judges_sharing_a_name_are_told_apart_and_merged_runs_count_once():
    rows = [("id-1", "sim", "i1", "ref_first", "en", "truncate", "reference"),
            ("id-2", "sim", "i1", "ref_first", "en", "truncate", "perturbed")]
    again = [("id-1", "sim", "i1", "ref_first", "en", "truncate", "perturbed"),  # a duplicate key
             ("id-1", "sim", "i2", "ref_first", "en", "truncate", "perturbed")]  # a new one
    merged = calibrate.merge([_records(rows), _records(again)])
    assert merged.num_rows == 3
    cells = calibrate.cell_means(merged)
    assert cells.judges == ["sim (id-1)", "sim (id-2)"]
    np.testing.assert_array_equal(cells.scores[:, 0, 0], [0.5, 0.0])  # the first run's verdict


# --- end to end: two run directories, one judge each ----------------------------------------

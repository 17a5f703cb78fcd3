"""Bootstrap coverage: with known true rates, 95 % intervals hold the truth ~95 % of the time."""

import hashlib

import numpy as np
import pyarrow as pa

from babelrun.score import score

TRUE_ACCURACY_GIVEN_NO_BIAS = 0.8
TRUE_POSITION_BIAS = 0.2  # the judge names slot A outright this often


def _audit_table(rng: np.random.Generator, n_items: int) -> pa.Table:
    """One simulated audit, drawn straight from the simulated judge's model: per presentation,
    slot A outright with probability ρ, else the right answer with probability a."""
    order = np.tile([0, 1], n_items)  # ref_first, pert_first
    outright_a = rng.random(2 * n_items) < TRUE_POSITION_BIAS
    right = rng.random(2 * n_items) < TRUE_ACCURACY_GIVEN_NO_BIAS
    chose_ref = np.where(outright_a, order == 0, right)
    ids = [hashlib.blake2b(f"{i}".encode(), digest_size=10).hexdigest()  # as items.item_id
           for i in np.repeat(np.arange(n_items), 2)]
    n = 2 * n_items
    return pa.table({
        "judge_id": ["j"] * n, "judge": ["J"] * n, "item_id": ids,
        "order": np.where(order == 0, "ref_first", "pert_first").tolist(),
        "lang": ["en"] * n, "perturbation": ["shuffle"] * n,
        "verdict": np.where(chose_ref, "reference", "perturbed").tolist(),
        "ref_len": [100] * n, "pert_len": [100] * n,
    })


def test_bootstrap_intervals_cover_the_truth_about_95_percent_of_the_time():
    rng = np.random.default_rng(20261130)
    true_accuracy = TRUE_POSITION_BIAS * 0.5 + (1 - TRUE_POSITION_BIAS) * TRUE_ACCURACY_GIVEN_NO_BIAS
    hits = {"accuracy": 0, "position_bias": 0}
    audits = 300
    for k in range(audits):
        card = score(_audit_table(rng, 150), [], replicates=400, seed=k).judges[0].overall
        hits["accuracy"] += card.accuracy.lo <= true_accuracy <= card.accuracy.hi
        hits["position_bias"] += card.position_bias.lo <= TRUE_POSITION_BIAS <= card.position_bias.hi
    coverage = {name: h / audits for name, h in hits.items()}
    print(f"measured coverage over {audits} audits of 150 items: {coverage}")
    # 300 audits: a true 95 % coverage lands in [0.91, 0.99] with probability > 0.99.
    for name, c in coverage.items():
        assert 0.91 <= c <= 0.99, (name, c)

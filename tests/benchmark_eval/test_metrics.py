"""Micro-F1, IoU, greedy matching and the bootstrap, against values worked out by hand."""
import numpy as np
import pytest

from mmbu.benchmark_eval.scoring.bootstrap import (
    bootstrap_f1,
    bootstrap_loop,
    bootstrap_paired_delta,
    cluster_sums,
    config_rng,
    percentile_interval,
    resampled_sums,
)
from mmbu.benchmark_eval.scoring.metrics import (
    detection_counts,
    f1_of_counts,
    greedy_match,
    iou_matrix,
    micro_f1,
)


def test_micro_f1_by_the_papers_formula():
    # 2*3 / (2*3 + 2 + 4) = 6 / 12
    assert micro_f1(3, 2, 4) == pytest.approx(0.5)
    assert micro_f1(0, 0, 0) == 0.0
    assert micro_f1(0, 1, 1) == 0.0
    # closed questions: 7 right, 3 wrong or unparseable -> (7, 3, 3) -> 14/20 = accuracy 0.7
    counts = np.array([[1, 0, 0]] * 7 + [[0, 1, 1]] * 3)
    assert f1_of_counts(counts) == pytest.approx(0.7)
    np.testing.assert_allclose(micro_f1(np.array([1, 0]), np.array([1, 0]), np.array([0, 0])), [2 / 3, 0.0])


def test_iou_by_hand():
    # [0,0,10,10] vs [5,5,15,15]: intersection 25, union 175
    assert iou_matrix([[0, 0, 10, 10]], [[5, 5, 15, 15]])[0, 0] == pytest.approx(25 / 175)
    assert iou_matrix([[0, 0, 10, 10]], [[0, 0, 10, 10]])[0, 0] == 1.0
    assert iou_matrix([[0, 0, 10, 10]], [[20, 20, 30, 30]])[0, 0] == 0.0
    # [0,0,10,10] vs [0,0,10,20]: 100 / 200
    assert iou_matrix([[0, 0, 10, 10]], [[0, 0, 10, 20]])[0, 0] == pytest.approx(0.5)
    assert iou_matrix([], [[0, 0, 1, 1]]).shape == (0, 1)


def test_greedy_matching_takes_the_best_pairs_first():
    gold = [[0, 0, 10, 10], [20, 0, 30, 10]]
    predicted = [
        [0, 0, 10, 12],   # IoU 100/120 = 0.833 with gold 0
        [1, 0, 10, 10],   # IoU 0.9 with gold 0: it wins gold 0
        [20, 0, 30, 10],  # exact match of gold 1
        [50, 50, 60, 60],  # matches nothing
    ]
    pairs = greedy_match(predicted, gold)
    assert [(i, j) for i, j, _ in pairs] == [(2, 1), (1, 0)]
    assert pairs[1][2] == pytest.approx(0.9)
    # TP = 2 matched predictions, FP = 2 unmatched predictions, FN = 0 unmatched gold
    assert detection_counts(predicted, gold) == (2, 2, 0)


def test_iou_threshold_is_inclusive_and_unparseable_is_one_false_positive():
    assert detection_counts([[0, 0, 10, 10]], [[0, 0, 10, 20]]) == (1, 0, 0)  # IoU exactly 0.5
    assert detection_counts([[0, 0, 10, 9]], [[0, 0, 10, 20]]) == (0, 1, 1)
    assert detection_counts([], [[0, 0, 1, 1], [2, 2, 3, 3]]) == (0, 1, 2)


def test_vectorised_bootstrap_draws_exactly_what_a_loop_draws():
    rows = np.array([[1, 0, 0]] * 6 + [[0, 1, 1]] * 3 + [[2, 1, 0]])
    fast = resampled_sums(rows, 200, np.random.default_rng(7))
    slow_rng = np.random.default_rng(7)
    distinct, counts = np.unique(rows, axis=0, return_counts=True)
    slow = np.array([slow_rng.multinomial(len(rows), counts / len(rows)) @ distinct for _ in range(200)])
    np.testing.assert_array_equal(fast, slow)


def test_multinomial_bootstrap_agrees_with_the_plain_index_bootstrap():
    rng = np.random.default_rng(0)
    rows = np.where(rng.random(400)[:, None] < 0.62, [1, 0, 0], [0, 1, 1])
    fast = bootstrap_f1(rows, resamples=4000, rng=np.random.default_rng(1))
    slow = bootstrap_loop(rows, f1_of_counts, resamples=4000, rng=np.random.default_rng(2))
    assert fast.estimate == pytest.approx(f1_of_counts(rows))
    # two independent Monte Carlo runs of the same bootstrap distribution
    assert fast.low == pytest.approx(slow[0], abs=0.01)
    assert fast.high == pytest.approx(slow[1], abs=0.01)
    # and the normal approximation for a proportion: p ± 1.96 sqrt(p(1-p)/n)
    p = fast.estimate
    half = 1.96 * np.sqrt(p * (1 - p) / 400)
    assert fast.low == pytest.approx(p - half, abs=0.01) and fast.high == pytest.approx(p + half, abs=0.01)


def test_bootstrap_is_reproducible_per_seed_and_configuration():
    rows = np.array([[1, 0, 0]] * 30 + [[0, 1, 1]] * 20)
    a = bootstrap_f1(rows, rng=config_rng(0, "m", "task", "closed", "no_context"))
    b = bootstrap_f1(rows, rng=config_rng(0, "m", "task", "closed", "no_context"))
    c = bootstrap_f1(rows, rng=config_rng(1, "m", "task", "closed", "no_context"))
    assert a == b and a != c


def test_percentile_interval_by_hand():
    values = np.arange(101, dtype=float)  # 0..100: the 2.5th and 97.5th percentiles are 2.5 and 97.5
    assert percentile_interval(values) == (2.5, 97.5)


def test_constant_data_has_a_zero_width_interval():
    rows = np.array([[1, 0, 0]] * 10)
    interval = bootstrap_f1(rows, rng=np.random.default_rng(0))
    assert (interval.estimate, interval.low, interval.high) == (1.0, 1.0, 1.0)
    assert np.isnan(bootstrap_f1(np.zeros((0, 3)), rng=np.random.default_rng(0)).low)


def test_cluster_sums_and_cluster_bootstrap_is_wider():
    rows = np.array([[1, 0, 0], [0, 1, 1], [1, 0, 0], [1, 0, 0]])
    np.testing.assert_array_equal(cluster_sums(rows, ["b", "a", "b", "c"]), [[2, 0, 0], [0, 1, 1], [1, 0, 0]])
    # 50 images, each asked 4 times with the same outcome: clusters make the interval wider
    outcome = np.random.default_rng(3).random(50) < 0.5
    rows = np.repeat(np.where(outcome[:, None], [1, 0, 0], [0, 1, 1]), 4, axis=0)
    images = np.repeat(np.arange(50), 4)
    flat = bootstrap_f1(rows, rng=np.random.default_rng(0))
    clustered = bootstrap_f1(rows, rng=np.random.default_rng(0), clusters=images)
    assert clustered.estimate == flat.estimate
    assert clustered.high - clustered.low > 1.5 * (flat.high - flat.low)


def test_paired_delta_by_hand_and_against_a_loop():
    closed = np.array([[1, 0, 0]] * 8 + [[0, 1, 1]] * 2)
    opened = np.array([[1, 0, 0]] * 3 + [[0, 1, 1]] * 7)
    interval = bootstrap_paired_delta(closed, opened, resamples=4000, rng=np.random.default_rng(4))
    assert interval.estimate == pytest.approx(0.8 - 0.3)
    both = np.hstack([closed, opened])
    slow = bootstrap_loop(both, lambda r: f1_of_counts(r[:, :3]) - f1_of_counts(r[:, 3:]),
                          resamples=4000, rng=np.random.default_rng(5))
    assert interval.low == pytest.approx(slow[0], abs=0.051) and interval.high == pytest.approx(slow[1], abs=0.051)
    # identical arms: every resample's difference is exactly 0
    same = bootstrap_paired_delta(closed, closed, rng=np.random.default_rng(0))
    assert (same.estimate, same.low, same.high) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError):
        bootstrap_paired_delta(closed, opened[:5], rng=np.random.default_rng(0))


def test_bootstrap_agrees_with_scipy_percentile_bootstrap():
    from scipy import stats

    rng = np.random.default_rng(11)
    # detection-like rows: several boxes per record, so micro-F1 is not a plain mean
    rows = np.column_stack([rng.integers(0, 3, 600), rng.integers(0, 2, 600), rng.integers(0, 3, 600)]).astype(float)

    def statistic(tp, fp, fn, axis=-1):
        return micro_f1(tp.sum(axis=axis), fp.sum(axis=axis), fn.sum(axis=axis))

    peer = stats.bootstrap((rows[:, 0], rows[:, 1], rows[:, 2]), statistic, paired=True, vectorized=True,
                           n_resamples=4000, method="percentile", random_state=0).confidence_interval
    ours = bootstrap_f1(rows, resamples=4000, rng=np.random.default_rng(0))
    assert ours.low == pytest.approx(peer.low, abs=0.006) and ours.high == pytest.approx(peer.high, abs=0.006)

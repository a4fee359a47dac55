"""Unit tests of the episode metrics, driven by a fake strategy with known logits and labels."""

from __future__ import annotations

import json
import math
import pickle
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from avalanche_sets.data.episodes import EpisodeBatch, EpisodeOracle
from avalanche_sets.metrics import (
    AccuracyMatrix,
    EpisodeAccuracy,
    OODDetection,
    auroc,
    ci95,
    episode_accuracies,
    episode_metrics,
    matrix_average_accuracy,
    matrix_backward_transfer,
    matrix_forgetting,
    plot_accuracy_matrix,
)

N_WAY, N_QUERY = 2, 4


# ---------------------------------------------------------------------------- fakes
def _batch(n_episodes: int, is_ood: torch.Tensor | None = None) -> EpisodeBatch:
    """A real EpisodeBatch with 1-pixel images; the oracle carries ``is_ood`` [B, U]."""
    b = n_episodes
    u = 0 if is_ood is None else is_ood.shape[1]
    img = lambda n: torch.zeros(b, n, 1, 1, 3, dtype=torch.uint8)  # noqa: E731
    labels = torch.arange(N_WAY).repeat_interleave(N_QUERY).repeat(b, 1)
    oracle = None
    if is_ood is not None:
        z = torch.zeros(b, u, dtype=torch.long)
        oracle = EpisodeOracle(
            unlabeled_is_ood=is_ood,
            unlabeled_source=z - 1,
            unlabeled_class=z,
            unlabeled_index=z,
            support_index=torch.zeros(b, N_WAY, dtype=torch.long),
            query_index=torch.zeros(b, N_WAY * N_QUERY, dtype=torch.long),
            class_ids=torch.arange(N_WAY).repeat(b, 1),
            episode_index=torch.arange(b),
        )
    return EpisodeBatch(
        support_x=img(N_WAY),
        support_y=torch.arange(N_WAY).repeat(b, 1),
        query_x=img(N_WAY * N_QUERY),
        query_y=labels,
        unlabeled_x=img(u),
        oracle=oracle,
    )


def _logits_for(correct_per_episode: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Query logits [B*N*Q, N] and labels with exactly ``c`` correct queries in episode b."""
    rows, labels = [], []
    for c in correct_per_episode:
        y = torch.arange(N_WAY).repeat_interleave(N_QUERY)
        pred = y.clone()
        pred[c:] = (y[c:] + 1) % N_WAY  # the first c queries right, the rest wrong
        rows.append(torch.nn.functional.one_hot(pred, N_WAY).float())
        labels.append(y)
    return torch.cat(rows), torch.cat(labels)


class FakeStrategy(SimpleNamespace):
    """Just the attributes metrics read from an Avalanche strategy."""


def _strategy(stream: str = "test") -> FakeStrategy:
    return FakeStrategy(
        is_training=False,
        clock=SimpleNamespace(train_iterations=7),
        experience=None,
        mb_x=None,
        mb_output=None,
        mb_y=None,
        stream=stream,
    )


def _experience(j: int, stream: str = "test", name: str | None = None):
    return SimpleNamespace(
        current_experience=j,
        domain_name=name or f"dom{j}",
        origin_stream=SimpleNamespace(name=stream),
    )


def _collect(result) -> dict:
    return {} if result is None else {mv.name: mv.value for mv in result}


def _eval(metric, per_domain_batches: dict[int, list[dict]], stream: str = "test") -> dict:
    """Run one ``eval`` call of a metric; batches are dicts of strategy attributes."""
    s = _strategy(stream)
    emitted = {}
    s.experience = _experience(next(iter(per_domain_batches)), stream)
    emitted.update(_collect(metric.before_eval(s)))
    for j, batches in per_domain_batches.items():
        s.experience = _experience(j, stream)
        emitted.update(_collect(metric.before_eval_exp(s)))
        for attrs in batches:
            for k, v in attrs.items():
                setattr(s, k, v)
            emitted.update(_collect(metric.after_eval_iteration(s)))
        emitted.update(_collect(metric.after_eval_exp(s)))
    emitted.update(_collect(metric.after_eval(s)))
    return emitted


def _acc_batch(correct: list[int]) -> dict:
    logits, y = _logits_for(correct)
    return {"mb_x": _batch(len(correct)), "mb_output": logits, "mb_y": y}


def _train(metric, j: int) -> None:
    s = _strategy()
    s.is_training = True
    s.experience = _experience(j, "train")
    metric.before_training_exp(s)
    metric.after_training_exp(s)


# ---------------------------------------------------------------------------- accuracy
def test_ci95_matches_numpy_formula():
    rng = np.random.default_rng(0)
    x = rng.random(37)
    expected = 1.96 * np.std(x, ddof=1) / np.sqrt(x.size)
    assert ci95(x) == pytest.approx(expected, rel=1e-12)
    assert math.isnan(ci95([0.5]))
    assert ci95([0.5, 0.5]) == 0.0


def test_episode_accuracies_reshape_per_episode():
    logits, y = _logits_for([8, 6, 0])
    np.testing.assert_allclose(episode_accuracies(logits, y, 3), [1.0, 0.75, 0.0])
    with pytest.raises(ValueError, match="episodes"):
        episode_accuracies(logits, y, 5)


def test_episode_accuracy_per_domain_and_stream():
    metric = EpisodeAccuracy()
    # domain 0: 3 episodes over two meta-batches; domain 1: 2 episodes
    out = _eval(metric, {0: [_acc_batch([8, 4]), _acc_batch([6])], 1: [_acc_batch([2, 8])]})
    d0 = np.array([1.0, 0.5, 0.75])
    d1 = np.array([0.25, 1.0])
    assert out["EpisodeAcc/eval_phase/test_stream/Exp000"] == pytest.approx(d0.mean())
    assert out["EpisodeAcc_CI95/eval_phase/test_stream/Exp000"] == pytest.approx(ci95(d0))
    assert out["EpisodeAcc/eval_phase/test_stream/Exp001"] == pytest.approx(d1.mean())
    # over domains: mean of the domain means (not of the pooled episodes), pooled CI
    assert out["EpisodeAcc/eval_phase/test_stream"] == pytest.approx((d0.mean() + d1.mean()) / 2)
    pooled = np.concatenate([d0, d1])
    assert out["EpisodeAcc_CI95/eval_phase/test_stream"] == pytest.approx(ci95(pooled))
    mean, ci, n = metric.last_results[0][:3]
    assert (mean, ci, n) == (pytest.approx(d0.mean()), pytest.approx(ci95(d0)), 3)
    assert metric.last_results[1].domain_name == "dom1"
    np.testing.assert_allclose(metric.last_episode_accuracies[0], d0)
    stream = metric.last_stream_results["test"]
    assert stream.n_domains == 2 and stream.n_episodes == 5
    assert len(metric.history) == 1
    assert all(isinstance(v, float) for v in out.values())


def test_episode_accuracy_stratified_ci():
    metric = EpisodeAccuracy(stream_ci="stratified")
    out = _eval(metric, {0: [_acc_batch([8, 4, 6])], 1: [_acc_batch([2, 8])]})
    d0, d1 = np.array([1.0, 0.5, 0.75]), np.array([0.25, 1.0])
    se = np.sqrt(d0.var(ddof=1) / 3 + d1.var(ddof=1) / 2) / 2
    assert out["EpisodeAcc_CI95/eval_phase/test_stream"] == pytest.approx(1.96 * se)
    with pytest.raises(ValueError):
        EpisodeAccuracy(stream_ci="bogus")


def test_episode_accuracy_single_episode_has_no_ci_and_records_reset_per_eval():
    metric = EpisodeAccuracy()
    out = _eval(metric, {0: [_acc_batch([8])]})
    assert "EpisodeAcc_CI95/eval_phase/test_stream/Exp000" not in out
    assert math.isnan(metric.last_results[0].ci95)
    _eval(metric, {1: [_acc_batch([4, 4])]})
    assert set(metric.last_results) == {1}  # last eval call only
    assert len(metric.history) == 2
    metric.reset()
    assert metric.last_results == {} and metric.history == []


def test_episode_accuracy_state_dict_roundtrip():
    metric = EpisodeAccuracy()
    _eval(metric, {0: [_acc_batch([8])], 1: [_acc_batch([2, 8])]})
    state = json.loads(json.dumps(metric.state_dict()))  # JSON-friendly
    restored = EpisodeAccuracy()
    restored.load_state_dict(state)
    assert restored.last_results.keys() == metric.last_results.keys()
    for j in metric.last_results:
        a, b = metric.last_results[j], restored.last_results[j]
        assert a.mean == b.mean and a.n_episodes == b.n_episodes and a.domain_name == b.domain_name
        assert (math.isnan(a.ci95) and math.isnan(b.ci95)) or a.ci95 == b.ci95
    assert restored.history[0].mean == metric.history[0].mean
    assert pickle.loads(pickle.dumps(metric)).last_results.keys() == {0, 1}


# ---------------------------------------------------------------------------- matrix
HAND = np.array(
    [
        [0.80, 0.30, 0.20],
        [0.60, 0.90, 0.25],
        [0.50, 0.70, 0.85],
    ]
)


def test_matrix_derived_quantities_by_hand():
    assert matrix_average_accuracy(HAND) == pytest.approx((0.50 + 0.70 + 0.85) / 3)
    f = matrix_forgetting(HAND)
    np.testing.assert_allclose(f[:2], [0.80 - 0.50, 0.90 - 0.70])
    assert math.isnan(f[2])
    assert matrix_backward_transfer(HAND) == pytest.approx(((0.50 - 0.80) + (0.70 - 0.90)) / 2)
    # forgetting takes the max over the rows from the domain's own training on (Chaudhry et
    # al.): a higher value before domain 1 was trained does not count
    m = HAND.copy()
    m[0, 1] = 0.95
    assert matrix_forgetting(m)[1] == pytest.approx(0.90 - 0.70)
    # one row: nothing defined
    assert np.isnan(matrix_forgetting(HAND[:1])).all()
    assert math.isnan(matrix_backward_transfer(HAND[:1]))
    # missing entries are skipped
    m = HAND.copy()
    m[0, 0] = np.nan
    assert matrix_backward_transfer(m) == pytest.approx(0.70 - 0.90)
    assert matrix_forgetting(m)[0] == pytest.approx(0.60 - 0.50)


def _matrix_eval(metric, accs: list[float], stream: str = "test") -> dict:
    """Evaluate domains j with a single 8-query episode of accuracy accs[j]."""
    return _eval(
        metric, {j: [_acc_batch([round(a * 8)])] for j, a in enumerate(accs)}, stream=stream
    )


def test_accuracy_matrix_fills_rows_from_the_strategy():
    metric = AccuracyMatrix()
    _matrix_eval(metric, [0.25, 0.25, 0.25])  # before training: initial, not in the matrix
    assert metric.initial == {0: 0.25, 1: 0.25, 2: 0.25}
    assert metric.matrix.shape[0] == 0
    target = np.round(HAND * 8) / 8
    emitted = []
    for i in range(3):
        _train(metric, i)
        _matrix_eval(metric, [0.0, 0.0, 0.0], stream="train")  # other streams are ignored
        emitted.append(_matrix_eval(metric, list(target[i])))
    np.testing.assert_allclose(metric.matrix, target)
    assert metric.domain_names == ["dom0", "dom1", "dom2"]
    assert metric.average_accuracy() == pytest.approx(matrix_average_accuracy(target))
    np.testing.assert_allclose(metric.forgetting(), matrix_forgetting(target))
    assert metric.backward_transfer() == pytest.approx(matrix_backward_transfer(target))
    assert emitted[2]["AccMatrix/eval_phase/test_stream/Exp001"] == pytest.approx(target[2, 1])
    assert "AccMatrix_BWT/eval_phase/test_stream" not in emitted[0]
    assert emitted[1]["AccMatrix_BWT/eval_phase/test_stream"] == pytest.approx(
        matrix_backward_transfer(target[:2])
    )
    assert emitted[2]["AccMatrix_Forgetting/eval_phase/test_stream"] == pytest.approx(
        np.nanmean(matrix_forgetting(target))
    )


def test_accuracy_matrix_later_eval_overwrites_row_and_partial_rows_are_nan():
    metric = AccuracyMatrix()
    _train(metric, 0)
    _matrix_eval(metric, [0.125, 0.125])
    _matrix_eval(metric, [0.5, 0.25])  # e.g. periodic eval then final eval: last one wins
    _train(metric, 1)
    _eval(metric, {1: [_acc_batch([8])]})  # only domain 1 evaluated
    m = metric.matrix
    assert m.shape == (2, 2)
    np.testing.assert_allclose(m[0], [0.5, 0.25])
    assert math.isnan(m[1, 0]) and m[1, 1] == 1.0


def test_accuracy_matrix_state_dict_and_reset():
    metric = AccuracyMatrix()
    for i in range(2):
        _train(metric, i)
        _matrix_eval(metric, list(HAND[i, :2]))
    state = json.loads(json.dumps(metric.state_dict()))
    restored = AccuracyMatrix()
    restored.load_state_dict(state)
    np.testing.assert_array_equal(restored.matrix, metric.matrix)
    assert restored.domain_names == metric.domain_names
    # the resumed metric keeps filling the right row
    _matrix_eval(restored, [0.0, 1.0])
    assert restored.matrix[1].tolist() == [0.0, 1.0]
    metric.reset()
    assert metric.matrix.size == 0 and metric.domain_names == []


def test_plot_accuracy_matrix(tmp_path):
    m = HAND.copy()
    m[0, 2] = np.nan
    path = plot_accuracy_matrix(m, ["a", "b", "c"], tmp_path / "sub" / "matrix.png", title="t")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
    # percentages and missing names also work
    plot_accuracy_matrix(m[:2] * 100, ["a"], tmp_path / "pct.png")
    with pytest.raises(ValueError):
        plot_accuracy_matrix(np.zeros(3), [], tmp_path / "bad.png")


# ---------------------------------------------------------------------------- OOD
@pytest.mark.parametrize("seed", range(5))
def test_auroc_matches_sklearn_with_ties(seed):
    rng = np.random.default_rng(seed)
    n = 200
    labels = rng.random(n) < 0.4
    scores = np.round(rng.normal(labels * 0.7, 1.0), 1)  # rounding creates many ties
    assert auroc(scores, labels) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
    integer_scores = rng.integers(0, 3, n)  # heavy ties
    assert auroc(integer_scores, labels) == pytest.approx(
        roc_auc_score(labels, integer_scores), abs=1e-12
    )
    assert auroc(torch.from_numpy(scores), torch.from_numpy(labels)) == pytest.approx(
        roc_auc_score(labels, scores), abs=1e-12
    )


def test_auroc_edge_cases():
    assert auroc([1, 2, 3], [1, 1, 0]) == 0.0
    assert auroc([3, 2, 1], [1, 1, 0]) == 1.0
    assert auroc([1, 1, 1], [1, 0, 1]) == 0.5
    assert math.isnan(auroc([1, 2], [1, 1]))
    assert math.isnan(auroc([1, 2], [0, 0]))
    with pytest.raises(ValueError):
        auroc([1, 2], [1])
    with pytest.raises(ValueError):
        auroc([np.nan, 1], [1, 0])


def _ood_batch(pred_id, is_ood, distances, *, oracle=True) -> dict:
    pred_id = torch.as_tensor(pred_id, dtype=torch.bool)
    is_ood = torch.as_tensor(is_ood, dtype=torch.bool)
    batch = _batch(pred_id.shape[0], is_ood if oracle else None)
    split = SimpleNamespace(
        is_id=pred_id,
        distances=torch.as_tensor(distances, dtype=torch.float32),
        threshold=torch.zeros(pred_id.shape[0]),
    )
    iteration = SimpleNamespace(ood_split=split)
    logits, y = _logits_for([8] * pred_id.shape[0])
    return {"mb_x": batch, "iteration": iteration, "mb_output": logits, "mb_y": y}


def test_ood_precision_recall_on_constructed_case():
    # episode 0: truth ID ID OOD OOD, predicted ID ID ID OOD  -> TP 2, pred 3, true 2
    # episode 1: truth ID OOD OOD OOD, predicted OOD OOD ID OOD -> TP 0, pred 1, true 1
    batch = _ood_batch(
        pred_id=[[1, 1, 1, 0], [0, 0, 1, 0]],
        is_ood=[[0, 0, 1, 1], [0, 1, 1, 1]],
        distances=[[0.1, 0.2, 0.3, 0.9], [0.5, 0.8, 0.4, 0.7]],
    )
    metric = OODDetection()
    out = _eval(metric, {0: [batch]})
    assert out["OOD_Precision/eval_phase/test_stream/Exp000"] == pytest.approx(2 / 4)
    assert out["OOD_Recall/eval_phase/test_stream/Exp000"] == pytest.approx(2 / 3)
    true_id = np.array([1, 1, 0, 0, 1, 0, 0, 0], dtype=bool)
    score = -np.array([0.1, 0.2, 0.3, 0.9, 0.5, 0.8, 0.4, 0.7])
    assert out["OOD_AUROC/eval_phase/test_stream/Exp000"] == pytest.approx(
        roc_auc_score(true_id, score)
    )
    assert out["OOD_AUROC/eval_phase/test_stream"] == pytest.approx(roc_auc_score(true_id, score))
    res = metric.last_results[0]
    assert res.n_unlabeled == 8 and res.n_episodes == 2


def test_ood_all_id_or_all_ood_episodes_are_pooled():
    all_id = _ood_batch([[1, 1, 0]], [[0, 0, 0]], [[0.1, 0.2, 0.9]])
    all_ood = _ood_batch([[0, 0, 1]], [[1, 1, 1]], [[0.5, 0.6, 0.3]])
    metric = OODDetection()
    out = _eval(metric, {0: [all_id], 1: [all_ood], 2: [all_id, all_ood]})
    # experiences with one class only: precision/recall where defined, no AUROC
    assert "OOD_AUROC/eval_phase/test_stream/Exp000" not in out
    assert "OOD_AUROC/eval_phase/test_stream/Exp001" not in out
    assert out["OOD_Precision/eval_phase/test_stream/Exp000"] == 1.0
    assert out["OOD_Recall/eval_phase/test_stream/Exp000"] == pytest.approx(2 / 3)
    assert out["OOD_Precision/eval_phase/test_stream/Exp001"] == 0.0
    assert "OOD_Recall/eval_phase/test_stream/Exp001" not in out  # no true ID image
    assert math.isnan(metric.last_results[1].recall)
    # pooled over both episodes the AUROC exists
    truth = np.array([1, 1, 1, 0, 0, 0], dtype=bool)
    score = -np.array([0.1, 0.2, 0.9, 0.5, 0.6, 0.3])
    assert out["OOD_AUROC/eval_phase/test_stream/Exp002"] == pytest.approx(
        roc_auc_score(truth, score)
    )


def test_ood_metric_silent_without_prediction_or_oracle():
    metric = OODDetection()
    plain = _acc_batch([8, 8])
    assert _eval(metric, {0: [plain]}) == {}  # no iteration at all
    no_split = dict(plain, iteration=SimpleNamespace(ood_split=None))
    assert _eval(metric, {0: [no_split]}) == {}
    assert metric.last_results == {} and metric.history == []
    no_oracle = _ood_batch([[1, 0]], [[0, 1]], [[0.1, 0.9]], oracle=False)
    with pytest.warns(RuntimeWarning, match="oracle"):
        assert _eval(metric, {0: [no_oracle]}) == {}


def test_ood_ground_truth_comes_only_from_the_oracle():
    pred, dist = [[1, 1, 0, 0]], [[0.1, 0.2, 0.3, 0.4]]
    batch = _ood_batch(pred, [[0, 0, 1, 1]], dist)
    # an oracle that holds nothing but the OOD flags: reading anything else would fail
    batch["mb_x"].oracle = SimpleNamespace(
        unlabeled_is_ood=torch.tensor([[False, False, True, True]])
    )
    metric = OODDetection()
    out = _eval(metric, {0: [batch]})
    assert out["OOD_Precision/eval_phase/test_stream/Exp000"] == 1.0
    assert out["OOD_AUROC/eval_phase/test_stream/Exp000"] == 1.0
    # same prediction, other truth: the result follows the oracle
    batch["mb_x"].oracle = SimpleNamespace(
        unlabeled_is_ood=torch.tensor([[True, True, False, False]])
    )
    out = _eval(metric, {0: [batch]})
    assert out["OOD_Precision/eval_phase/test_stream/Exp000"] == 0.0
    assert out["OOD_AUROC/eval_phase/test_stream/Exp000"] == 0.0


def test_ood_shape_mismatch_raises():
    batch = _ood_batch([[1, 0]], [[0, 1]], [[0.1, 0.9]])
    batch["iteration"].ood_split.distances = torch.zeros(1, 3)
    with pytest.raises(ValueError, match="shapes differ"):
        _eval(OODDetection(), {0: [batch]})


def test_ood_state_dict_roundtrip():
    metric = OODDetection()
    _eval(metric, {0: [_ood_batch([[1, 0, 1]], [[0, 0, 0]], [[0.1, 0.9, 0.2]])]})
    state = json.loads(json.dumps(metric.state_dict()))
    restored = OODDetection()
    restored.load_state_dict(state)
    a, b = metric.last_results[0], restored.last_results[0]
    assert a.precision == b.precision and a.recall == b.recall and math.isnan(b.auroc)
    assert restored.history[0][0] == "test"
    assert pickle.loads(pickle.dumps(metric)).last_results.keys() == {0}


# ---------------------------------------------------------------------------- factory
def test_episode_metrics_factory():
    kinds = [type(m) for m in episode_metrics()]
    assert kinds == [EpisodeAccuracy, AccuracyMatrix, OODDetection]
    assert [type(m) for m in episode_metrics(matrix=False, ood=False)] == [EpisodeAccuracy]
    assert episode_metrics(accuracy=False, matrix=False, ood=False) == []
    assert str(episode_metrics()[0]) == "EpisodeAcc"

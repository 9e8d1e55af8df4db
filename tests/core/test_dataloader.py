"""Dataset / TensorDataset / DataLoader: batching, shuffling, seeding, collate, spawn workers."""
import numpy as np
import pytest

from _loader_helpers import SquaresDataset, sum_collate
from tinytorch.core import random as tt_random
from tinytorch.core.dataloader import DataLoader, Dataset, TensorDataset, default_collate
from tinytorch.core.tensor import Tensor


@pytest.mark.parametrize("n,bs,drop_last", [(10, 3, False), (10, 3, True), (9, 3, True), (1, 4, False),
                                            (0, 2, False), (7, 7, False), (5, 1, True)])
def test_batches_cover_the_data(n, bs, drop_last):
    x = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    y = np.arange(n)
    loader = DataLoader(TensorDataset(x, y), batch_size=bs, drop_last=drop_last)
    batches = list(loader)
    assert len(batches) == len(loader)
    expected = n - n % bs if drop_last else n
    got_y = np.concatenate([b[1].data for b in batches]) if batches else np.zeros(0, int)
    np.testing.assert_array_equal(got_y, np.arange(expected))
    for bx, by in batches:
        assert isinstance(bx, Tensor) and bx.dtype == np.float32 and by.dtype == y.dtype
        np.testing.assert_array_equal(bx.data, x[by.data])
        assert len(by) <= bs and (not drop_last or len(by) == bs)


def test_shuffle_with_seed_is_repeatable_and_changes_per_epoch():
    ds = TensorDataset(np.arange(50))
    a = DataLoader(ds, batch_size=50, shuffle=True, seed=7)
    b = DataLoader(ds, batch_size=50, shuffle=True, seed=7)
    e1, e2 = next(iter(a))[0].data, next(iter(a))[0].data
    assert sorted(e1) == list(range(50)) and not np.array_equal(e1, np.arange(50))
    assert not np.array_equal(e1, e2)
    np.testing.assert_array_equal(next(iter(b))[0].data, e1)


def test_shuffle_without_seed_follows_manual_seed():
    ds = TensorDataset(np.arange(30))
    tt_random.manual_seed(3)
    first = next(iter(DataLoader(ds, batch_size=30, shuffle=True)))[0].data
    tt_random.manual_seed(3)
    again = next(iter(DataLoader(ds, batch_size=30, shuffle=True)))[0].data
    np.testing.assert_array_equal(first, again)


def test_custom_dataset_default_and_custom_collate():
    ds = SquaresDataset(7)
    x, y, r = next(iter(DataLoader(ds, batch_size=4)))
    np.testing.assert_array_equal(x.data, [[0, 0], [1, 1], [2, 2], [3, 3]])
    np.testing.assert_array_equal(y.data, [0, 1, 4, 9])
    assert x.dtype == np.float32 and r.dtype == np.float32  # float64 narrowed by the Tensor rule
    s, sq = next(iter(DataLoader(ds, batch_size=3, collate_fn=sum_collate)))
    np.testing.assert_array_equal(s.data, [0, 2, 4])
    single = default_collate([np.ones(2), np.zeros(2)])
    assert single.shape == (2, 2)


def test_spawn_workers_match_single_process():
    ds = SquaresDataset(23)
    serial = [(b[0].data, b[1].data) for b in DataLoader(ds, batch_size=5)]
    loader = DataLoader(ds, batch_size=5, num_workers=2, collate_fn=sum_collate)
    parallel = list(loader)
    assert len(parallel) == len(serial)
    for (s, sq), (x, y) in zip(parallel, serial):
        np.testing.assert_array_equal(s.data, x.sum(axis=1))
        np.testing.assert_array_equal(sq.data, y)


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"same first dimension.*\(3,\).*\(4,\)"):
        TensorDataset(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError, match="batch_size"):
        DataLoader(TensorDataset(np.zeros(3)), batch_size=0)
    with pytest.raises(TypeError, match="__len__"):
        DataLoader(object())
    with pytest.raises(NotImplementedError):
        len(Dataset())

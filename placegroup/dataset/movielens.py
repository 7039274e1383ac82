"""MovieLens 1M, as Paddle 1.8's ``paddle.dataset.movielens``.

File: ``movielens/movielens%2Fml-1m.zip`` (or ``movielens/ml-1m.zip``) with members
``ml-1m/movies.dat``, ``ml-1m/users.dat`` and ``ml-1m/ratings.dat`` (``::``-separated, latin-1).

A sample is one rating as a flat list of 8 fields::

    [user_id, gender (0 male, 1 female), age bucket (index in age_table), job_id,
     movie_id, [category ids], [title word ids], [rating * 2 - 5.0]]

``train(rand_seed=0, test_ratio=0.1)`` and ``test(...)`` split the ratings file line by line:
a line is a test sample when the next draw of a numpy ``RandomState(rand_seed)`` is below
``test_ratio``. NOTE(movielens-split): Paddle draws from the *global* numpy generator after
``np.random.seed(rand_seed)``; a private ``RandomState`` with the same seed draws the same
numbers, so the split is Paddle's as long as nothing else drew from the global generator while
Paddle's reader ran, and placegroup leaves the global generator alone.

Title words and categories are numbered in the iteration order of Python sets, as in Paddle
(NOTE(hash-order) in common.py): set ``PYTHONHASHSEED`` for ids that repeat across runs.

Example::

    reader = paddle.batch(paddle.dataset.movielens.train(), batch_size=256)
    n_users = paddle.dataset.movielens.max_user_id() + 1
"""
from __future__ import annotations

import functools
import os
import re
import zipfile

import numpy as np

from placegroup.dataset import common

__all__ = ["MovieInfo", "UserInfo", "age_table", "get_movie_title_dict", "max_job_id",
           "max_movie_id", "max_user_id", "movie_categories", "movie_info", "test", "train",
           "user_info", "fetch"]

age_table = [1, 18, 25, 35, 45, 50, 56]
URL = "https://dataset.bj.bcebos.com/movielens%2Fml-1m.zip"
MD5 = "c4d9eecfca2ab87c1945afe126590906"


class MovieInfo:
    """A movie's id, categories and title (Paddle's class)."""

    def __init__(self, index, categories, title, meta=None):
        self.index = int(index)
        self.categories = categories
        self.title = title
        self._meta = meta

    def value(self):
        """``[movie_id, [category ids], [title word ids]]``."""
        _, titles, cats, _ = self._meta
        return [self.index, [cats[c] for c in self.categories],
                [titles[w.lower()] for w in self.title.split()]]

    def __repr__(self):
        return f"<MovieInfo id({self.index}), title({self.title}), categories({self.categories})>"


class UserInfo:
    """A user's id, gender, age bucket and job (Paddle's class)."""

    def __init__(self, index, gender, age, job_id):
        self.index = int(index)
        self.is_male = gender == "M"
        self.age = age_table.index(int(age))
        self.job_id = int(job_id)

    def value(self):
        """``[user_id, 0 male / 1 female, age bucket, job_id]``."""
        return [self.index, 0 if self.is_male else 1, self.age, self.job_id]

    def __repr__(self):
        return (f"<UserInfo id({self.index}), gender({'M' if self.is_male else 'F'}), "
                f"age({age_table[self.age]}), job({self.job_id})>")


def _archive() -> str:
    return common.find("movielens", URL, MD5, what="the MovieLens 1M ratings")


def _lines(package: zipfile.ZipFile, name: str, path: str):
    try:
        f = package.open(name)
    except KeyError:
        raise KeyError(f"{path}: no member {name!r}; is it ml-1m.zip?") from None
    with f:
        for line in f:
            yield line.decode("latin")


@functools.lru_cache(maxsize=2)
def _meta_cached(path: str, mtime_ns: int, size: int):
    pattern = re.compile(r"^(.*)\((\d+)\)$")
    movies, title_words, categories = {}, set(), set()
    with zipfile.ZipFile(path) as package:
        for line in _lines(package, "ml-1m/movies.dat", path):
            movie_id, title, cats = line.strip().split("::")
            cats = cats.split("|")
            categories.update(cats)
            title = pattern.match(title).group(1)
            movies[int(movie_id)] = MovieInfo(movie_id, cats, title)
            title_words.update(w.lower() for w in title.split())
        users = {}
        for line in _lines(package, "ml-1m/users.dat", path):
            uid, gender, age, job, _ = line.strip().split("::")
            users[int(uid)] = UserInfo(uid, gender, age, job)
    # See NOTE(hash-order): Paddle numbers the sets in iteration order.
    titles = {w: i for i, w in enumerate(title_words)}
    cats = {c: i for i, c in enumerate(categories)}
    meta = (movies, titles, cats, users)
    for m in movies.values():
        m._meta = meta
    return meta


def _meta():
    path = _archive()
    st = os.stat(path)
    return _meta_cached(os.path.abspath(path), st.st_mtime_ns, st.st_size), path


def _reader_creator(rand_seed: int = 0, test_ratio: float = 0.1, is_test: bool = False):
    (movies, _, _, users), path = _meta()

    def reader():
        rng = np.random.RandomState(rand_seed)  # NOTE(movielens-split)
        with zipfile.ZipFile(path) as package:
            for line in _lines(package, "ml-1m/ratings.dat", path):
                if (rng.random_sample() < test_ratio) == is_test:
                    uid, mov_id, rating, _ = line.strip().split("::")
                    yield (users[int(uid)].value() + movies[int(mov_id)].value()
                           + [[float(rating) * 2 - 5.0]])

    return reader


def train(rand_seed: int = 0, test_ratio: float = 0.1):
    """The ratings not drawn for the test set (about 90%); samples as in the module doc.

    Raises:
        DatasetFileNotFound: the archive is missing.
    """
    return _reader_creator(rand_seed, test_ratio, is_test=False)


def test(rand_seed: int = 0, test_ratio: float = 0.1):
    """The ratings drawn for the test set (about ``test_ratio`` of them)."""
    return _reader_creator(rand_seed, test_ratio, is_test=True)


def get_movie_title_dict() -> dict:
    """Lower-cased title word -> id."""
    return _meta()[0][1]


def movie_categories() -> dict:
    """Category name -> id."""
    return _meta()[0][2]


def movie_info() -> dict:
    """movie id -> ``MovieInfo``."""
    return _meta()[0][0]


def user_info() -> dict:
    """user id -> ``UserInfo``."""
    return _meta()[0][3]


def max_movie_id() -> int:
    """The largest movie id."""
    return max(m.index for m in movie_info().values())


def max_user_id() -> int:
    """The largest user id."""
    return max(u.index for u in user_info().values())


def max_job_id() -> int:
    """The largest job id."""
    return max(u.job_id for u in user_info().values())


def fetch():
    """Check that the archive is present (placegroup never downloads)."""
    _archive()

"""paddle.dataset readers on small SYNTHETIC files written in each data set's exact cache layout
under a temporary $PLACEGROUP_DATA_HOME: samples (types, dtypes, shapes), dictionaries,
n-grams, splits; missing files name the path, URL and md5; cifar's pickled archive is refused
and its converted .npz read. None of these files hold real data."""
import gzip
import io
import os
import re
import subprocess
import sys
import tarfile
import zipfile

import numpy as np
import pytest

from placegroup import dataset
from placegroup.dataset import (cifar, common, conll05, flowers, image, imdb, imikolov, mnist,
                                movielens, mq2007, sentiment, voc2012, wmt14, wmt16)
from tests.paddle_ref.reference import run_python


@pytest.fixture
def home(tmp_path, monkeypatch):
    """The data root ($PLACEGROUP_DATA_HOME), with a HOME that has no Paddle cache."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PLACEGROUP_DATA_HOME", str(tmp_path / "data"))
    return tmp_path / "data"


def put(path, data: bytes):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def tar_bytes(members: dict, mode="w:gz") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def zip_bytes(members: dict) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


# -- common ----------------------------------------------------------------------------------
def test_paddle_cache_is_the_fallback_and_both_file_names_work(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("PLACEGROUP_DATA_HOME", raising=False)
    paddle_cache = tmp_path / ".cache" / "paddle" / "dataset"
    p = put(paddle_cache / "imikolov" / "simple-examples.tgz", b"x")  # the unquoted name
    assert common.find("imikolov", imikolov.URL, imikolov.MD5) == str(p)
    q = put(paddle_cache / "imikolov" / "imikolov%2Fsimple-examples.tgz", b"x")  # Paddle's name
    assert common.find("imikolov", imikolov.URL, imikolov.MD5) == str(q)


MISSING = [
    (lambda: mnist.train(), "mnist", "train-images-idx3-ubyte.gz", mnist.TRAIN_IMAGE_MD5),
    (lambda: imikolov.build_dict(), "imikolov", "imikolov%2Fsimple-examples.tgz", imikolov.MD5),
    (lambda: imdb.word_dict(), "imdb", "imdb%2FaclImdb_v1.tar.gz", imdb.MD5),
    (lambda: movielens.train(), "movielens", "movielens%2Fml-1m.zip", movielens.MD5),
    (lambda: conll05.get_dict(), "conll05st", "conll05st%2FwordDict.txt", conll05.WORDDICT_MD5),
    (lambda: wmt14.train(10), "wmt14", "wmt14.tgz", wmt14.MD5_TRAIN),
    (lambda: wmt16.train(10, 10), "wmt16", "wmt16.tar.gz", wmt16.DATA_MD5),
    (lambda: flowers.train(), "flowers", "102flowers.tgz", flowers.DATA_MD5),
    (lambda: voc2012.train(), "voc2012", "VOCtrainval_11-May-2012.tar", voc2012.VOC_MD5),
    (lambda: cifar.train10(), "cifar", "cifar-10-python.tar.gz", cifar.CIFAR10_MD5),
]


@pytest.mark.parametrize("make, module, name, md5", MISSING, ids=[m[1] for m in MISSING])
def test_a_missing_file_names_the_path_url_and_md5(home, make, module, name, md5):
    with pytest.raises(dataset.DatasetFileNotFound) as e:
        make()
    msg = str(e.value)
    assert isinstance(e.value, FileNotFoundError)
    assert str(home / module / name) in msg and md5 in msg and "never downloads" in msg
    assert os.path.join(".cache", "paddle", "dataset", module) in msg
    assert re.search(r"https?://\S+" + re.escape(name.split("%2F")[-1]), msg)


# -- mnist -----------------------------------------------------------------------------------
def idx(array, magic):
    head = np.array([magic, *array.shape], dtype=">u4").tobytes()
    return gzip.compress(head + array.astype(np.uint8).tobytes())


def test_mnist(home):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(5, 28, 28))
    labels = np.array([3, 1, 4, 1, 5])
    put(home / "mnist" / "t10k-images-idx3-ubyte.gz", idx(images, 2051))
    put(home / "mnist" / "t10k-labels-idx1-ubyte.gz", idx(labels, 2049))
    samples = list(mnist.test()())
    assert len(samples) == 5
    for (x, y), im, lab in zip(samples, images, labels):
        assert x.dtype == np.float32 and x.shape == (784,) and type(y) is int and y == lab
        want = im.reshape(-1).astype("float32") / 255.0 * 2.0 - 1.0  # Paddle's float32 steps
        np.testing.assert_array_equal(x, want)
    assert samples[0][0].min() >= -1 and samples[0][0].max() <= 1
    put(home / "mnist" / "t10k-labels-idx1-ubyte.gz", idx(labels, 2051))
    with pytest.raises(ValueError, match="magic number 2051, expected 2049"):
        list(mnist.test()())


# -- imikolov --------------------------------------------------------------------------------
PTB_TRAIN = b" a b c a\n a b\n a <unk>\n"
PTB_VALID = b" a c\n"


@pytest.fixture
def ptb(home):
    return put(home / "imikolov" / "imikolov%2Fsimple-examples.tgz",
               tar_bytes({"./simple-examples/data/ptb.train.txt": PTB_TRAIN,
                          "./simple-examples/data/ptb.valid.txt": PTB_VALID}))


def test_imikolov_dict(ptb):
    # counts: a 5, <s> 4, <e> 4 (one per line), b 2, c 2, and the corpus's b'<unk>' 1, which
    # keeps an id of its own as in Paddle under Python 3 (NOTE(imikolov-unk))
    d = imikolov.build_dict(min_word_freq=0)
    assert d == {b"a": 0, "<e>": 1, "<s>": 2, b"b": 3, b"c": 4, b"<unk>": 5, "<unk>": 6}
    assert list(d) == [b"a", "<e>", "<s>", b"b", b"c", b"<unk>", "<unk>"]
    assert imikolov.build_dict(min_word_freq=2) == {b"a": 0, "<e>": 1, "<s>": 2, "<unk>": 3}


def test_imikolov_ngram_and_seq(ptb):
    d = imikolov.build_dict(min_word_freq=1)  # a, <s>, <e>, b, c (count > 1); <unk> last
    s, e, a, b, c, unk = d["<s>"], d["<e>"], d[b"a"], d[b"b"], d[b"c"], d["<unk>"]
    grams = list(imikolov.train(d, 3)())
    assert grams == [(s, a, b), (a, b, c), (b, c, a), (c, a, e), (s, a, b), (a, b, e),
                     (s, a, unk), (a, unk, e)]
    assert all(type(i) is int for g in grams for i in g)
    assert list(imikolov.test(d, 5)()) == []  # " a c" wrapped is 4 words, shorter than 5
    seqs = list(imikolov.train(d, 3, imikolov.DataType.SEQ)())
    assert seqs == [([s, a, b], [a, b, e]), ([s, a, unk], [a, unk, e])]  # [s,a,b,c,a] is > 3
    assert len(list(imikolov.train(d, 0, imikolov.DataType.SEQ)())) == 3
    with pytest.raises(ValueError, match="data_type"):
        imikolov.train(d, 3, data_type=7)


# -- imdb ------------------------------------------------------------------------------------
def test_imdb(home):
    reviews = {"aclImdb/train/pos/0_9.txt": b"Good, good movie!\n",
               "aclImdb/train/neg/1_2.txt": b"Bad movie.",
               "aclImdb/train/unsup/2_0.txt": b"ignored ignored",
               "aclImdb/test/pos/3_8.txt": b"GOOD fun",
               "aclImdb/test/neg/4_1.txt": b"bad, BAD! " * 100}
    put(home / "imdb" / "imdb%2FaclImdb_v1.tar.gz", tar_bytes(reviews))
    assert imdb.word_dict() == {b"bad": 0, "<unk>": 1}  # 201 > 150 times
    d = imdb.build_dict(re.compile(r"aclImdb/((train)|(test))/((pos)|(neg))/.*\.txt$"), 0)
    assert d == {b"bad": 0, b"good": 1, b"movie": 2, b"fun": 3, "<unk>": 4}
    train = list(imdb.train(d)())
    assert train == [([1, 1, 2], 0), ([0, 2], 1)]
    test = list(imdb.test(d)())
    assert test[0] == ([1, 3], 0) and test[1][1] == 1 and len(test[1][0]) == 200


# -- movielens -------------------------------------------------------------------------------
MOVIES = b"1::Toy Story (1995)::Animation|Children's\n2::Heat (1995)::Action|Crime\n"
USERS = b"1::F::1::10::48067\n2::M::56::16::70072\n"


def test_movielens(home):
    ratings = b"".join(b"%d::%d::%d::978300760\n" % (1 + i % 2, 1 + i % 2, 1 + i % 5)
                       for i in range(40))
    put(home / "movielens" / "movielens%2Fml-1m.zip",
        zip_bytes({"ml-1m/movies.dat": MOVIES, "ml-1m/users.dat": USERS,
                   "ml-1m/ratings.dat": ratings}))
    titles, cats = movielens.get_movie_title_dict(), movielens.movie_categories()
    assert set(titles) == {"toy", "story", "heat"} and sorted(titles.values()) == [0, 1, 2]
    assert set(cats) == {"Animation", "Children's", "Action", "Crime"}
    assert movielens.max_movie_id() == 2 and movielens.max_user_id() == 2
    assert movielens.max_job_id() == 16
    u = movielens.user_info()[2]
    assert u.value() == [2, 0, 6, 16] and movielens.movie_info()[1].title == "Toy Story "
    train, test = list(movielens.train()()), list(movielens.test()())
    # Paddle's split: np.random.seed(0), one draw per line, test when below 0.1.
    draws = np.random.RandomState(0).random_sample(40)
    assert len(test) == int((draws < 0.1).sum()) and len(train) + len(test) == 40
    first = train[0] if draws[0] >= 0.1 else test[0]
    assert first == [1, 1, 0, 10, 1, [cats["Animation"], cats["Children's"]],
                     [titles["toy"], titles["story"]], [1 * 2 - 5.0]]
    assert len(list(movielens.test(test_ratio=1.0)())) == 40


# -- conll05 ---------------------------------------------------------------------------------
WORDS = b"He\nsaid\nshe\nleft\n.\n\n"
PROPS = (b"-     (A0*)  *\n"
         b"say   (V*)   *\n"
         b"-     (A1*   (A0*)\n"
         b"leave *)     (V*)\n"
         b"-     *      *\n\n")


def test_conll05(home):
    root = home / "conll05st"
    put(root / "conll05st%2FwordDict.txt", b"<unk>\nHe\nsaid\nshe\nleft\n.\nbos\neos\n")
    put(root / "verbDict.txt", b"say\nleave\n")  # the unquoted name works too
    put(root / "conll05st%2FtargetDict.txt", b"B-A0\nI-A0\nB-A1\nI-A1\nB-V\nI-V\nO\n")
    put(root / "conll05st%2Femb", b"\0" * 16)
    put(root / "conll05st-tests.tar.gz", tar_bytes({conll05.WORDS_NAME: gzip.compress(WORDS),
                                                     conll05.PROPS_NAME: gzip.compress(PROPS)}))
    words, verbs, labels = conll05.get_dict()
    assert words["said"] == 2 and verbs == {"say": 0, "leave": 1}
    assert labels["O"] == 6 and sorted(labels.values()) == list(range(7))
    assert {labels["B-A0"] + 1, labels["B-A1"] + 1, labels["B-V"] + 1} == \
        {labels["I-A0"], labels["I-A1"], labels["I-V"]}
    assert conll05.get_embedding() == str(root / "conll05st%2Femb")
    samples = list(conll05.test()())
    assert len(samples) == 2 and all(len(s) == 9 for s in samples)
    w, n2, n1, c0, p1, p2, pred, mark, lab = samples[0]  # predicate "said" at 1
    assert w == [1, 2, 3, 4, 5]
    assert (n2, n1, c0, p1, p2) == ([6] * 5, [1] * 5, [2] * 5, [3] * 5, [4] * 5)
    assert pred == [0] * 5 and mark == [1, 1, 1, 1, 0]
    assert lab == [labels[t] for t in ("B-A0", "B-V", "B-A1", "I-A1", "O")]
    w, n2, n1, c0, p1, p2, pred, mark, lab = samples[1]  # "left" at 3
    assert (n2[0], n1[0], c0[0], p1[0], p2[0]) == (2, 3, 4, 5, 7) and pred == [1] * 5
    assert mark == [0, 1, 1, 1, 1]
    assert lab == [labels[t] for t in ("O", "O", "B-A0", "B-V", "O")]


# -- sentiment -------------------------------------------------------------------------------
def test_sentiment_reads_nltks_layout_without_nltk(home):
    corpus = home / "corpora" / "movie_reviews"
    put(corpus / "neg" / "cv000_1.txt", b"bad , bad film .\n")
    put(corpus / "neg" / "cv001_2.txt", b"dull film\n")
    put(corpus / "pos" / "cv000_3.txt", b"great film !\n")
    put(corpus / "pos" / "cv001_4.txt", b"it's great\n")
    d = dict(sentiment.get_word_dict())
    assert d["film"] == 0 and d["bad"] == 1 and d["great"] == 2  # counts 3, 2, 2; then seen order
    assert sorted(d.values()) == list(range(len(d))) and "'" in d and "s" in d  # WordPunct tokens
    train = list(sentiment.train())  # Paddle's train() is iterated directly
    assert [label for _, label in train] == [0, 1, 0, 1]  # neg and pos alternate
    assert train[0][0] == [d["bad"], d[","], d["bad"], d["film"], d["."]]
    assert list(sentiment.train()()) == train and list(sentiment.test()) == []


def test_sentiment_missing_corpus(home):
    with pytest.raises(dataset.DatasetFileNotFound, match=r"(?s)corpora.movie_reviews.*nltk.download"):
        sentiment.train()


# -- wmt14 -----------------------------------------------------------------------------------
def test_wmt14(home):
    src = b"<s>\n<e>\n<unk>\nle\nchat\n"
    trg = b"<s>\n<e>\n<unk>\nthe\ncat\n"
    put(home / "wmt14" / "wmt14.tgz", tar_bytes({
        "wmt14/src.dict": src, "wmt14/trg.dict": trg,
        "wmt14/train/train": b"le chat\tthe cat\nno tab here\n" + b"le " * 80 + b"\tthe\n",
        "wmt14/test/test": b"chat\tcat\n", "wmt14/gen/gen": b"le\tthe\n"}))
    assert list(wmt14.train(5)()) == [([0, 3, 4, 1], [0, 3, 4], [3, 4, 1])]
    assert list(wmt14.train(4)())[0] == ([0, 3, 2, 1], [0, 3, 2], [3, 2, 1])  # chat past size
    assert list(wmt14.test(5)()) == [([0, 4, 1], [0, 4], [4, 1])]
    assert list(wmt14.gen(5)()) == [([0, 3, 1], [0, 3], [3, 1])]
    src_d, trg_d = wmt14.get_dict(5)
    assert src_d[3] == "le" and trg_d[4] == "cat"
    assert wmt14.get_dict(5, reverse=False)[0]["chat"] == 4


# -- wmt16 -----------------------------------------------------------------------------------
def test_wmt16_builds_keeps_and_reuses_dicts(home):
    pairs = b"a cat\teine katze\na dog\tein hund\na cat sat\teine katze sass\n"
    put(home / "wmt16" / "wmt16.tar.gz", tar_bytes({"wmt16/train": pairs,
                                                     "wmt16/test": b"a bird\tein vogel\n",
                                                     "wmt16/val": b"cat\tkatze\n"}))
    train = list(wmt16.train(5, 6)())
    en = wmt16.get_dict("en", 5)
    de = wmt16.get_dict("de", 6, reverse=True)
    assert en == {"<s>": 0, "<e>": 1, "<unk>": 2, "a": 3, "cat": 4}  # a 3, cat 2 (dog 1 cut)
    assert de == {0: "<s>", 1: "<e>", 2: "<unk>", 3: "eine", 4: "katze", 5: "ein"}
    assert train[0] == ([0, 3, 4, 1], [0, 3, 4], [3, 4, 1])
    assert train[1] == ([0, 3, 2, 1], [0, 5, 2], [5, 2, 1])
    assert (home / "wmt16" / "en_5.dict").read_text() == "<s>\n<e>\n<unk>\na\ncat\n"
    (home / "wmt16" / "en_5.dict").write_text("<s>\n<e>\n<unk>\ncat\na\n")  # e.g. Paddle's own
    assert list(wmt16.validation(5, 6)()) == [([0, 3, 1], [0, 4], [4, 1])]
    assert list(wmt16.test(6, 5, src_lang="de")())[0][0] == [0, 5, 2, 1]  # ein, vogel -> unk
    with pytest.raises(ValueError, match="src_lang must be 'en'"):
        wmt16.train(5, 5, src_lang="fr")


# -- flowers ---------------------------------------------------------------------------------
@pytest.fixture
def flowers_files(home):
    scio = pytest.importorskip("scipy.io")
    root = home / "flowers"
    images = {f"jpg/image_{i:05d}.jpg": b"JPEG%d" % i for i in range(1, 6)}
    put(root / "102flowers.tgz", tar_bytes(images))
    root.mkdir(parents=True, exist_ok=True)
    scio.savemat(str(root / "imagelabels.mat"), {"labels": np.array([[5, 7, 9, 11, 102]])})
    scio.savemat(str(root / "setid.mat"), {"tstid": np.array([[1, 3, 5]]), "trnid": np.array([[2]]),
                                       "valid": np.array([[4]])})
    return root


def test_flowers_raw_samples_in_archive_order(flowers_files):
    raw = lambda s: s  # noqa: E731
    want = [(b"JPEG1", 4), (b"JPEG3", 8), (b"JPEG5", 101)]
    assert list(flowers.train(mapper=raw, use_xmap=False)()) == want
    assert sorted(flowers.train(mapper=raw)()) == want  # mapped by xmap_readers' threads
    assert list(flowers.test(mapper=raw, use_xmap=False)()) == [(b"JPEG2", 6)]
    assert list(flowers.valid(mapper=raw, use_xmap=False)()) == [(b"JPEG4", 10)]


def test_flowers_default_mapper_needs_opencv(flowers_files):
    try:
        import cv2  # noqa: F401
        pytest.skip("opencv-python is installed")
    except ImportError:
        pass
    with pytest.raises(ImportError, match="opencv-python"):
        next(flowers.train()())  # the error crosses from xmap_readers' worker thread


# -- mq2007 ----------------------------------------------------------------------------------
def letor(rel, qid, base):
    feats = " ".join(f"{k}:{base + k / 100:.6f}" for k in range(1, 47))
    return f"{rel} qid:{qid} {feats} #docid = GX{qid}-{rel}\n"


def test_mq2007(home):
    text = (letor(0, 10, 0) + letor(2, 10, 1) + letor(1, 10, 2) + "bad line\n"
            + letor(0, 11, 3) + letor(0, 11, 4))  # query 11 has only 0s: dropped
    put(home / "MQ2007" / mq2007.TRAIN_FILE, text.encode())
    pairs = list(mq2007.train())  # Paddle's train() is iterated directly
    assert len(pairs) == 3  # (2,1), (2,0), (1,0)
    label, left, right = pairs[0]
    assert label.tolist() == [1] and left.shape == right.shape == (46,)
    assert left[0] == pytest.approx(1.01) and right[0] == pytest.approx(2.01)
    rel, feats = next(iter(mq2007.train(format="listwise")()))
    assert rel.tolist() == [[2], [1], [0]] and feats.shape == (3, 46) and feats.dtype == np.float64
    assert [(r, f.shape) for r, f in mq2007.train(format="pointwise")] == [(2, (46,))]
    assert [(q, r) for q, r, _ in mq2007.train(format="plain_txt")] == [(10, 2)]
    with pytest.raises(ValueError, match="format must be one of"):
        mq2007.train(format="triplets")


def test_mq2007_with_only_the_rar_says_to_unpack(home):
    put(home / "MQ2007" / mq2007.URL.split("/")[-1], b"Rar!")
    with pytest.raises(dataset.DatasetFileNotFound, match=r"(?s)Fold1.train\.txt.*unrar x"):
        mq2007.train()


# -- voc2012 ---------------------------------------------------------------------------------
def test_voc2012(home):
    put(home / "voc2012" / "VOCtrainval_11-May-2012.tar", tar_bytes({}, mode="w"))
    try:
        from PIL import Image
    except ImportError:
        with pytest.raises(ImportError, match="Pillow"):
            voc2012.val()
        return
    photo, label = io.BytesIO(), io.BytesIO()
    Image.fromarray(np.full((4, 5, 3), 7, np.uint8)).save(photo, format="PNG")
    Image.fromarray(np.full((4, 5), 1, np.uint8)).save(label, format="PNG")
    put(home / "voc2012" / "VOCtrainval_11-May-2012.tar", tar_bytes({
        voc2012.SET_FILE.format("val"): b"2007_000001\n",
        voc2012.DATA_FILE.format("2007_000001"): photo.getvalue(),
        voc2012.LABEL_FILE.format("2007_000001"): label.getvalue()}, mode="w"))
    (im, lab), = list(voc2012.val()())
    assert im.shape == (4, 5, 3) and lab.shape == (4, 5) and lab.dtype == np.uint8


# -- cifar -----------------------------------------------------------------------------------
def cifar_npz(path, batches):
    arrays = {}
    for i, (_, data, labels) in enumerate(batches):
        arrays[f"data_{i}"], arrays[f"labels_{i}"] = data, labels
    np.savez(path, names=np.array([b[0] for b in batches]), **arrays)


def test_cifar_refuses_the_pickled_archive_and_shows_the_conversion(home):
    put(home / "cifar" / "cifar-10-python.tar.gz", b"\x1f\x8b not read at all")
    with pytest.raises(cifar.CifarPickleRefused) as e:
        cifar.train10()
    msg = str(e.value)
    assert "Python pickles" in msg and "does not load pickles" in msg
    assert str(home / "cifar" / "cifar-10-python.npz") in msg and "np.savez" in msg


def test_cifar_reads_the_converted_npz(home):
    rng = np.random.default_rng(1)
    b1 = ("cifar-10-batches-py/data_batch_1", rng.integers(0, 256, (3, 3072), dtype=np.uint8),
          np.array([1, 2, 3]))
    b2 = ("cifar-10-batches-py/test_batch", rng.integers(0, 256, (2, 3072), dtype=np.uint8),
          np.array([9, 0]))
    (home / "cifar").mkdir(parents=True)
    cifar_npz(home / "cifar" / "cifar-10-python.npz", [b1, b2])
    train = list(cifar.train10()())
    assert [y for _, y in train] == [1, 2, 3] and all(type(y) is int for _, y in train)
    x = train[0][0]
    assert x.dtype == np.float32 and x.shape == (3072,)
    np.testing.assert_array_equal(x, (b1[1][0] / 255.0).astype(np.float32))
    assert [y for _, y in cifar.test10()()] == [9, 0]
    cyc = cifar.test10(cycle=True)()
    assert [next(cyc)[1] for _ in range(5)] == [9, 0, 9, 0, 9]


def test_cifar_conversion_script_output_is_read(home, tmp_path):
    """The recipe in the error, run as the user would (in its own process, on an archive this
    test pickles itself): placegroup then reads its .npz."""
    script = tmp_path / "convert_cifar.py"
    script.write_text(cifar.CONVERT_SCRIPT)
    make = ("import io, pickle, sys, tarfile\n"
            "import numpy as np\n"
            "buf = io.BytesIO()\n"
            "with tarfile.open(sys.argv[1], 'w:gz') as tf:\n"
            "    for name, n, key in (('cifar-100-python/train', 3, b'fine_labels'),\n"
            "                         ('cifar-100-python/meta', 0, None),\n"
            "                         ('cifar-100-python/test', 2, b'fine_labels')):\n"
            "        d = {b'data': np.full((n, 3072), 51, np.uint8), key: list(range(n))}\n"
            "        if key is None:\n"
            "            d = {b'fine_label_names': []}\n"
            "        raw = pickle.dumps(d, protocol=2)\n"
            "        info = tarfile.TarInfo(name); info.size = len(raw)\n"
            "        tf.addfile(info, io.BytesIO(raw))\n")
    archive = home / "cifar" / "cifar-100-python.tar.gz"
    archive.parent.mkdir(parents=True)
    subprocess.run([sys.executable, "-c", make, str(archive)], check=True)
    with pytest.raises(cifar.CifarPickleRefused):
        cifar.train100()
    subprocess.run([sys.executable, str(script), str(archive)], check=True)
    train = list(cifar.train100()())
    assert [y for _, y in train] == [0, 1, 2] and train[0][0][0] == np.float32(0.2)
    assert len(list(cifar.test100()())) == 2


# -- image -----------------------------------------------------------------------------------
def test_image_numpy_helpers():
    im = np.arange(6 * 8 * 3).reshape(6, 8, 3)
    assert image.to_chw(im).shape == (3, 6, 8)
    c = image.center_crop(im, 4)
    assert c.shape == (4, 4, 3) and c[0, 0, 0] == im[1, 2, 0]
    assert image.random_crop(im, 4).shape == (4, 4, 3)
    assert image.center_crop(im[..., 0], 2, is_color=False).shape == (2, 2)
    np.testing.assert_array_equal(image.left_right_flip(im)[:, 0], im[:, -1])
    with pytest.raises(NotImplementedError, match="pickled"):
        image.batch_images_from_tar("x.tgz", "train", {})


def test_image_decoding_needs_opencv():
    try:
        import cv2  # noqa: F401
        pytest.skip("opencv-python is installed")
    except ImportError:
        pass
    for call in (lambda: image.load_image("cat.jpg"), lambda: image.load_image_bytes(b"x"),
                 lambda: image.resize_short(np.zeros((4, 4, 3)), 2)):
        with pytest.raises(ImportError, match="pip install opencv-python"):
            call()


def test_the_package_lists_paddles_modules():
    from placegroup.tools.compat_names import FLUID_18

    assert sorted(n for n in FLUID_18["paddle.dataset"] if not hasattr(dataset, n)) == []


# -- paddle.reader's parallel decorators and fluid.io.default_collate_fn ------------------------
from placegroup import reader as R  # noqa: E402


@pytest.mark.parametrize("order", [True, False])
def test_xmap_readers_maps_in_threads(order):
    r = R.xmap_readers(lambda x: (x, x * x), lambda: iter(range(50)), 4, 3, order=order)
    got = list(r())
    assert (got if order else sorted(got)) == [(x, x * x) for x in range(50)]
    assert list(r()) == got or not order  # a reader: each call is a new pass


@pytest.mark.parametrize("order", [True, False])
def test_xmap_readers_reraises_mapper_and_reader_errors(order):
    def mapper(x):
        if x == 7:
            raise KeyError("sample 7")
        return x

    with pytest.raises(KeyError, match="sample 7"):
        list(R.xmap_readers(mapper, lambda: iter(range(30)), 3, 2, order=order)())

    def source():
        yield 1
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        list(R.xmap_readers(lambda x: x, source, 2, 2, order=order)())
    with pytest.raises(ValueError, match="positive"):
        R.xmap_readers(lambda x: x, source, 0, 2)


def test_multiprocess_reader_keeps_tuples_and_arrays_round_robin():
    a = lambda: iter([(np.arange(3, dtype=np.int64), 0), (np.ones((2, 2), np.float32), 1)])  # noqa
    b = lambda: iter([("text", b"raw", None, {1: [1.5, True]})])  # noqa: E731
    got = list(R.multiprocess_reader([a, b])())
    assert [type(s) for s in got] == [tuple, tuple, tuple]
    assert got[1] == ("text", b"raw", None, {1: [1.5, True]})  # a, then b, then a again
    np.testing.assert_array_equal(got[0][0], np.arange(3))
    assert got[2][0].dtype == np.float32 and got[2][0].shape == (2, 2) and got[2][1] == 1
    merged = R.multiprocess_reader([lambda: iter(range(3)), lambda: iter([10, 11])])
    assert list(merged()) == [0, 10, 1, 11, 2]
    arrival = R.multiprocess_reader([lambda: iter(range(3)), lambda: iter([10, 11])], False)
    assert sorted(arrival()) == [0, 1, 2, 10, 11]


def test_multiprocess_reader_errors():
    def failing():
        yield 1
        raise KeyError("boom in the child")

    with pytest.raises(RuntimeError, match=r"(?s)reader 0 failed in its process.*boom in the child"):
        list(R.multiprocess_reader([failing])())
    with pytest.raises(RuntimeError, match="yielded None"):
        list(R.multiprocess_reader([lambda: iter([None])])())
    with pytest.raises(RuntimeError, match="cannot send a set"):
        list(R.multiprocess_reader([lambda: iter([{1, 2}])])())
    with pytest.raises(ValueError, match="non-empty list"):
        R.multiprocess_reader([])
    endless = R.multiprocess_reader([lambda: iter(int, 1)])()  # never ends by itself
    assert [next(endless) for _ in range(3)] == [0, 0, 0]
    endless.close()  # ends the child


def test_default_collate_fn():
    batch = [(np.zeros(2), np.int64(1)), (np.ones(2), np.int64(2))]
    x, y = R.default_collate_fn(batch)
    assert x.shape == (2, 2) and y.tolist() == [1, 2]
    (stacked,) = R.default_collate_fn([np.zeros(3), np.ones(3)])
    assert stacked.shape == (2, 3)


# -- against Paddle's own readers ------------------------------------------------------------
# Paddle's paddle.dataset modules (2.6's, whose readers are 1.8's for these sets) with their
# download() pointed at the synthetic files.
PADDLE_IMPORTS = """
import paddle.dataset.common as common
def download(url, module, md5, save_name=None):
    return os.path.join(common.DATA_HOME, module, save_name or url.split("/")[-1])
common.DATA_HOME, common.download = os.environ["PLACEGROUP_DATA_HOME"], download
from paddle.dataset import conll05, imdb, imikolov, mnist, movielens, wmt14, wmt16
for mod in (conll05, mnist, wmt14):
    mod.download = download
"""
OUR_IMPORTS = "from placegroup.dataset import conll05, imdb, imikolov, mnist, movielens, wmt14, wmt16\n"
CALLS = """{
 "mnist": list(mnist.test()()),
 "imikolov": [imikolov.build_dict(2), list(imikolov.train(imikolov.build_dict(2), 3)()),
              list(imikolov.test(imikolov.build_dict(0), 4, imikolov.DataType.SEQ)())],
 "imdb": [imdb.word_dict(), list(imdb.test(imdb.build_dict(
     re.compile(r"aclImdb/((train)|(test))/((pos)|(neg))/.*\\.txt$"), 0))())],
 "movielens": [list(movielens.train()()), list(movielens.test(rand_seed=3)()),
               movielens.get_movie_title_dict(), movielens.movie_categories()],
 "conll05": [conll05.get_dict(), list(conll05.test()())],
 "wmt14": [list(wmt14.train(4)()), list(wmt14.test(5)())],
 "wmt16": [list(wmt16.train(5, 6)()), list(wmt16.test(6, 5, src_lang="de")())],
}"""


def canon(x):
    """A JSON-able form of a sample that keeps types, dtypes, shapes and values."""
    if isinstance(x, np.ndarray):
        return ["nd", str(x.dtype), list(x.shape), x.tobytes().hex()]
    if isinstance(x, (list, tuple)):
        return [type(x).__name__] + [canon(i) for i in x]
    if isinstance(x, dict):
        return ["dict"] + sorted([repr(k), canon(v)] for k, v in x.items())
    return [type(x).__name__, x.decode() if isinstance(x, bytes) else x]


def samples_of(python, imports, home):
    import inspect
    import json

    script = ("import json, os, re\nimport numpy as np\n" + inspect.getsource(canon) + imports
              + f"print(json.dumps({{k: canon(v) for k, v in {CALLS}.items()}}))\n")
    # One hash seed for both sides: some of Paddle's ids follow set order (NOTE(hash-order)).
    env = dict(os.environ, PYTHONHASHSEED="0", PLACEGROUP_DATA_HOME=str(home))
    out = run_python(python, "-c", script, env=env, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.paddle
def test_samples_equal_paddles_readers(paddle26_python, home, tmp_path):
    import shutil

    rng = np.random.default_rng(5)  # Paddle reads idx files 100 images at a time
    put(home / "mnist" / "t10k-images-idx3-ubyte.gz", idx(rng.integers(0, 256, (100, 28, 28)), 2051))
    put(home / "mnist" / "t10k-labels-idx1-ubyte.gz", idx(rng.integers(0, 10, 100), 2049))
    put(home / "imikolov" / "imikolov%2Fsimple-examples.tgz",
        tar_bytes({"./simple-examples/data/ptb.train.txt": PTB_TRAIN,
                   "./simple-examples/data/ptb.valid.txt": PTB_VALID}))
    test_imdb(home)
    test_movielens(home)
    test_conll05(home)
    put(home / "conll05st" / "conll05st%2FverbDict.txt", b"say\nleave\n")  # Paddle's name only
    test_wmt14(home)
    put(home / "wmt16" / "wmt16.tar.gz", tar_bytes({
        "wmt16/train": b"a cat\teine katze\na dog\tein hund\na cat sat\teine katze sass\n",
        "wmt16/test": b"a bird\tein vogel\n", "wmt16/val": b"cat\tkatze\n"}))
    for f in (home / "wmt16").glob("*.dict"):
        f.unlink()
    theirs_home = tmp_path / "paddle_home"  # each side builds its own wmt16 dictionaries
    shutil.copytree(home, theirs_home)
    theirs = samples_of(paddle26_python, PADDLE_IMPORTS, theirs_home)
    mine = samples_of(sys.executable, OUR_IMPORTS, home)
    assert sorted(mine) == sorted(theirs)
    for name in theirs:
        assert mine[name] == theirs[name], name

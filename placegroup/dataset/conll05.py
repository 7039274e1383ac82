"""CoNLL-2005 semantic role labelling (its public test set), as Paddle 1.8's ``paddle.dataset.conll05``.

Files, all under ``conll05st/``: ``conll05st-tests.tar.gz`` (members
``conll05st-release/test.wsj/words/test.wsj.words.gz`` and ``.../props/test.wsj.props.gz``),
and the dictionaries and embedding Paddle keeps beside it: ``conll05st%2FwordDict.txt``,
``conll05st%2FverbDict.txt``, ``conll05st%2FtargetDict.txt`` and ``conll05st%2Femb`` (or the
same without the ``conll05st%2F`` prefix).

``get_dict()`` gives ``(word_dict, verb_dict, label_dict)``: a word or verb's id is its line
number; the labels are ``B-X``/``I-X`` pairs for each tag ``X`` of the target dictionary (in
set order, NOTE(hash-order) in common.py) and ``O`` last. ``get_embedding()`` gives the path of
the embedding file (Paddle returns the path too). ``test()`` yields, per predicate of each
sentence, nine lists of ints of the sentence's length::

    (word ids, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2 ids, predicate ids, mark, label ids)

where the five context words around the predicate are repeated along the sentence and ``mark``
is 1 on the predicate and the two words either side.

Example::

    word_dict, verb_dict, label_dict = paddle.dataset.conll05.get_dict()
    reader = paddle.dataset.conll05.test()
"""
from __future__ import annotations

import gzip
import tarfile

from placegroup.dataset import common

__all__ = ["get_dict", "get_embedding", "test", "fetch", "load_dict", "load_label_dict"]

DATA_URL = "http://paddlemodels.bj.bcebos.com/conll05st/conll05st-tests.tar.gz"
DATA_MD5 = "387719152ae52d60422c016e92a742fc"
WORDDICT_URL = "http://paddlemodels.bj.bcebos.com/conll05st%2FwordDict.txt"
WORDDICT_MD5 = "ea7fb7d4c75cc6254716f0177a506baa"
VERBDICT_URL = "http://paddlemodels.bj.bcebos.com/conll05st%2FverbDict.txt"
VERBDICT_MD5 = "0d2977293bbb6cbefab5b0f97db1e77c"
TRGDICT_URL = "http://paddlemodels.bj.bcebos.com/conll05st%2FtargetDict.txt"
TRGDICT_MD5 = "d8c7f03ceb5fc2e5a0fa7503a4353751"
EMB_URL = "http://paddlemodels.bj.bcebos.com/conll05st%2Femb"
EMB_MD5 = "bf436eb0faa1f6f9103017f8be57cdb7"
UNK_IDX = 0
WORDS_NAME = "conll05st-release/test.wsj/words/test.wsj.words.gz"
PROPS_NAME = "conll05st-release/test.wsj/props/test.wsj.props.gz"


def load_label_dict(filename: str) -> dict:
    """``B-X``/``I-X`` ids for each tag ``X`` of the target dictionary, then ``O``."""
    tags = set()
    with open(filename) as f:
        for line in f:
            line = line.strip()
            if line.startswith(("B-", "I-")):
                tags.add(line[2:])
    d = {}
    for tag in tags:  # NOTE(hash-order)
        d["B-" + tag] = len(d)
        d["I-" + tag] = len(d)
    d["O"] = len(d)
    return d


def load_dict(filename: str) -> dict:
    """line (stripped) -> line number."""
    with open(filename) as f:
        return {line.strip(): i for i, line in enumerate(f)}


def _bracket_labels(column: list[str]) -> list[str]:
    """One predicate's column of bracketed spans (``(A0*``, ``*``, ``*)``) as B-/I-/O labels."""
    out, tag, inside = [], "O", False
    for item in column:
        if item == "*":
            out.append("I-" + tag if inside else "O")
        elif item == "*)":
            out.append("I-" + tag)
            inside = False
        elif "(" in item:
            tag = item[1:item.find("*")]
            out.append("B-" + tag)
            inside = ")" not in item
        else:
            raise RuntimeError(f"conll05: unexpected label {item!r}")
    return out


def corpus_reader(data_path: str, words_name: str, props_name: str):
    """A reader of ``(sentence words, predicate, labels)`` per predicate of each sentence."""

    def reader():
        with tarfile.open(data_path) as tf, \
                gzip.GzipFile(fileobj=common.tar_member(tf, words_name, data_path)) as wf, \
                gzip.GzipFile(fileobj=common.tar_member(tf, props_name, data_path)) as pf:
            sentence, rows = [], []
            for word, label in zip(wf, pf):
                word, label = word.strip().decode(), label.strip().decode().split()
                if label:
                    sentence.append(word)
                    rows.append(label)
                    continue
                if rows:  # the end of a sentence: column 0 the verbs, one column per predicate
                    columns = [[r[i] for r in rows] for i in range(len(rows[0]))]
                    verbs = [x for x in columns[0] if x != "-"]
                    for i, column in enumerate(columns[1:]):
                        yield sentence, verbs[i], _bracket_labels(column)
                sentence, rows = [], []

    return reader


def reader_creator(corpus, word_dict=None, predicate_dict=None, label_dict=None):
    """Paddle's nine features per predicate (see the module doc) from ``corpus``'s triples."""

    def reader():
        for sentence, predicate, labels in corpus():
            n = len(sentence)
            v = labels.index("B-V")
            mark = [0] * len(labels)
            ctx = {}
            for off, name, edge in ((-2, "n2", "bos"), (-1, "n1", "bos"), (0, "0", None),
                                    (1, "p1", "eos"), (2, "p2", "eos")):
                j = v + off
                if 0 <= j < len(labels):
                    mark[j] = 1
                    ctx[name] = sentence[j]
                else:
                    ctx[name] = edge
            word_idx = [word_dict.get(w, UNK_IDX) for w in sentence]
            ctx_ids = [[word_dict.get(ctx[k], UNK_IDX)] * n for k in ("n2", "n1", "0", "p1", "p2")]
            pred_idx = [predicate_dict.get(predicate)] * n
            label_idx = [label_dict.get(w) for w in labels]
            yield (word_idx, *ctx_ids, pred_idx, mark, label_idx)

    return reader


def get_dict():
    """``(word_dict, verb_dict, label_dict)``; see the module doc.

    Raises:
        DatasetFileNotFound: a dictionary file is missing.
    """
    return (load_dict(common.find("conll05st", WORDDICT_URL, WORDDICT_MD5, what="word dictionary")),
            load_dict(common.find("conll05st", VERBDICT_URL, VERBDICT_MD5, what="verb dictionary")),
            load_label_dict(common.find("conll05st", TRGDICT_URL, TRGDICT_MD5,
                                        what="label dictionary")))


def get_embedding() -> str:
    """The path of the pretrained word embedding file (as Paddle returns it)."""
    return common.find("conll05st", EMB_URL, EMB_MD5, what="word embedding")


def test():
    """The CoNLL-05 WSJ test set (Paddle trains on it, the training set not being free).

    Raises:
        DatasetFileNotFound: the archive or a dictionary is missing.
    """
    word_dict, verb_dict, label_dict = get_dict()
    corpus = corpus_reader(common.find("conll05st", DATA_URL, DATA_MD5, what="test set"),
                           WORDS_NAME, PROPS_NAME)
    return reader_creator(corpus, word_dict, verb_dict, label_dict)


def fetch():
    """Check that all five files are present (placegroup never downloads)."""
    get_dict()
    get_embedding()
    common.find("conll05st", DATA_URL, DATA_MD5)

"""``thrifty serve`` start-up: a bad store or model is refused in one line, before serving."""

from __future__ import annotations

import json
import pickle
import sqlite3

import pytest

from thrifty.cli import main
from thrifty.exceptions import InputError
from thrifty.runtime.plans import plan_from_dict

pytest.importorskip("starlette")
sa = pytest.importorskip("sqlalchemy")

from thrifty.serve import create_app, store_provider  # noqa: E402

STORE = ("--table", "features", "--key-column", "pid")


def serve(capsys, *args: str) -> tuple[int, list[str]]:
    """``thrifty serve *args`` in this process: exit status and stderr lines. Bound to an address
    no machine has, so a check that wrongly lets the server start cannot leave it running."""
    code = main(["serve", *args, "--host", "192.0.2.1"])
    return code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize(
    "url, message",
    [
        ("foo://bar", "--provider 'foo://bar' is neither a feature service (http://...) nor a database URL"),
        ("foo://me:secret@host/db", "--provider 'foo://me:***@host/db' is neither"),
        ("not a url", "--provider 'not a url' is neither"),
    ],
)
def test_a_url_no_database_answers_is_one_line(files, capsys, url, message):
    code, err = serve(capsys, str(files / "plan.json"), "--provider", url, *STORE)
    assert code == 2 and len(err) == 1 and message in err[0], err  # was a SQLAlchemy traceback
    assert "secret" not in err[0]


@pytest.mark.parametrize("backend", ["sqlite", "duckdb"])
def test_a_database_file_that_does_not_exist_is_refused_and_not_created(files, capsys, tmp_path, backend):
    if backend == "duckdb":
        pytest.importorskip("duckdb_engine")
    missing = tmp_path / "typo.db"
    code, err = serve(capsys, str(files / "plan.json"), "--provider", f"{backend}:///{missing}", *STORE)
    assert code == 2 and len(err) == 1, err
    assert f"the {backend} database '{missing}' does not exist" in err[0]  # was "no such table"
    assert not missing.exists()  # was an empty database left behind


def test_the_sqlite_store_is_opened_read_only(files, small_model):
    provider = store_provider(
        f"sqlite:///{files / 'store.db'}", small_model[0], table="features", key_column="pid"
    )
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        provider.client.connection().execute("CREATE TABLE written (x INTEGER)")


def test_a_sqlite_path_with_uri_characters_is_opened(files, small_model, tmp_path):
    odd = tmp_path / "my store #1.db"  # characters a SQLite URI must escape
    odd.write_bytes((files / "store.db").read_bytes())
    provider = store_provider(f"sqlite:///{odd}", small_model[0], table="features", key_column="pid")
    assert provider.with_keys([3]).fetch([(0, [0])])[0].shape == (1,)


def test_a_model_whose_classes_are_too_few_is_refused_at_start_up(files, capsys, tmp_path):
    doc = json.loads((files / "plan.json").read_text())
    doc["forest"]["classes"] = [0]
    del doc["checksum"]  # a document of an earlier thrifty, which carried none
    short = tmp_path / "short.json"
    short.write_text(json.dumps(doc))
    code, err = serve(capsys, str(short))
    # Before, it started and failed at the first evaluation with an IndexError.
    assert code == 2 and len(err) == 1, err
    assert "the binary model lists 1 classes ([0]) but its outputs score 2" in err[0]


def test_create_app_refuses_classes_that_do_not_match(files, tmp_path):
    doc = json.loads((files / "plan.json").read_text())
    doc["forest"]["classes"] = [0, 1, 2]
    with pytest.raises(InputError, match="lists 3 classes"):
        create_app(plan_from_dict(doc))  # not through load, which refuses it too


class _Trap:
    """Unpickling it creates the file ``path``: proof that a pickle was executed."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_pickle_named_as_a_model_is_never_unpickled(capsys, tmp_path):
    model = tmp_path / "model.json"
    model.write_bytes(pickle.dumps(_Trap(tmp_path / "executed")))
    serve(capsys, str(model))  # refused in one line: see the test below
    assert not (tmp_path / "executed").exists()


def test_a_pickle_named_as_a_model_is_refused_in_one_line(capsys, tmp_path):
    model = tmp_path / "model.json"
    model.write_bytes(pickle.dumps({"a": 1}))
    code, err = serve(capsys, str(model))
    # Whatever its name says, its bytes are a pickle: refused before anything is unpickled.
    assert code == 2 and len(err) == 1 and "is a pickle" in err[0] and "--trust-pickle" in err[0], err

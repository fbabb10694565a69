"""gate.core.files on real files: atomic writes that never leave half a file or clobber what
was stored, and reading into typed models with errors that name the file, the key and the
problem (never a traceback, never a silent default)."""

from __future__ import annotations

import re

import pytest
from pydantic import BaseModel, ConfigDict

from gate.core.errors import GateError
from gate.core.files import (
    MAX_PROBLEMS_SHOWN,
    OtherSchemaVersion,
    load_json_model,
    load_yaml_mapping,
    load_yaml_model,
    read_text,
    validate,
    write_atomic,
)


class Server(BaseModel):
    model_config = ConfigDict(extra="forbid")
    port: int
    host: str = "127.0.0.1"


class Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    server: Server


def leftovers(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# -- writing ---------------------------------------------------------------------------------
def test_write_creates_the_folders_and_replaces_the_whole_file(tmp_path):
    path = tmp_path / "a" / "b" / "results.json"
    write_atomic(path, "first, and longer\n")
    write_atomic(path, "second\n")
    assert path.read_text() == "second\n"
    assert leftovers(path.parent) == ["results.json"]


def test_a_failed_write_keeps_the_stored_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "baseline.yaml"
    path.write_text("stored: 1\n")
    with pytest.raises(TypeError):
        write_atomic(path, 12345)  # type: ignore[arg-type]  # fails inside the write
    assert path.read_text() == "stored: 1\n"
    assert leftovers(tmp_path) == ["baseline.yaml"]


def test_a_write_over_a_folder_fails_and_cleans_up(tmp_path):
    (tmp_path / "verdict.json").mkdir()
    with pytest.raises(IsADirectoryError):
        write_atomic(tmp_path / "verdict.json", "{}")
    assert leftovers(tmp_path) == ["verdict.json"] and (tmp_path / "verdict.json").is_dir()


def test_text_is_written_as_utf8(tmp_path):
    write_atomic(tmp_path / "r.md", "✅ pass · 233 req/min\n")
    assert (tmp_path / "r.md").read_bytes() == "✅ pass · 233 req/min\n".encode()


# -- reading ---------------------------------------------------------------------------------
def test_a_missing_file_is_named_with_what_it_should_be(tmp_path):
    missing = re.escape(str(tmp_path / "nope.json"))
    with pytest.raises(GateError, match=f"^results file {missing} does not exist$"):
        read_text(tmp_path / "nope.json", "results file")
    with pytest.raises(GateError, match="does not exist"):
        read_text(tmp_path, "plan")  # a folder is not the file


def test_a_file_that_is_not_utf8_text_says_so(tmp_path):
    path = tmp_path / "verdict.json"
    path.write_bytes(b"\xff\xfe{}")
    with pytest.raises(GateError, match=r"^cannot read verdict .*verdict.json: not UTF-8 text$"):
        read_text(path, "verdict")


def test_json_is_read_into_its_model(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text('{"name": "cpu", "server": {"port": 8000}}')
    assert load_json_model(Spec, path, "spec") == Spec(name="cpu", server=Server(port=8000))


def test_a_broken_json_file_names_the_file_and_each_key(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text('{"name": "cpu", "server": {"port": "eighty"}, "colour": "red"}')
    with pytest.raises(GateError) as err:
        load_json_model(Spec, path, "spec")
    lines = str(err.value).splitlines()
    assert lines[0] == f"invalid spec {path}:"
    assert "  server.port: Input should be a valid integer, unable to parse string as an integer" \
        in lines
    assert "  colour: unknown key" in lines


def test_malformed_json_is_a_gate_error_not_a_traceback(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text('{"name": ')
    with pytest.raises(GateError, match=r"invalid spec .*:\n  \(top level\): Invalid JSON"):
        load_json_model(Spec, path, "spec")


def test_many_problems_show_the_first_ones_and_count_the_rest(tmp_path):
    data = {"name": "x", "server": {"port": 1}, **{f"k{i}": i for i in range(12)}}
    with pytest.raises(GateError) as err:
        validate(Spec, data, "plan")
    lines = str(err.value).splitlines()
    assert len(lines) == 1 + MAX_PROBLEMS_SHOWN + 1
    assert lines[-1] == f"  ... and {12 - MAX_PROBLEMS_SHOWN} more"


def test_yaml_is_read_into_its_model(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text("name: cpu\nserver:\n  port: 8000\n")
    assert load_yaml_model(Spec, path, "plan").server.port == 8000


@pytest.mark.parametrize(("text", "message"), [
    ("name: [unclosed\n", "is not valid YAML"),
    ("- a\n- b\n", "expected a mapping at the top level"),
    ("", "expected a mapping at the top level"),
])
def test_yaml_that_is_not_a_mapping_is_refused(tmp_path, text, message):
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    with pytest.raises(GateError) as err:
        load_yaml_mapping(path, "plan")
    assert str(path) in str(err.value) and message in str(err.value)


def test_a_yaml_model_error_names_the_file_and_the_key(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text("name: cpu\nserver: {}\n")
    expected = rf"invalid plan {re.escape(str(path))}:\n  server.port: Field required"
    with pytest.raises(GateError, match=expected):
        load_yaml_model(Spec, path, "plan")


def test_a_key_the_files_author_chose_is_shown_quoted_on_one_line():
    """Security review L1: a key path is printed in the error, and a key can hold a line
    break and `::`: shown through ascii(), it stays on its line and names no command."""
    key = "x\n\u3000::add-mask::secret ##[error]y"
    with pytest.raises(GateError) as err:
        validate(Server, {key: 1, "port": 1}, "comment file")
    message = str(err.value)
    assert message.count("\n") == 1  # the heading and one problem line
    assert "'x\\n\\u3000::add-mask::secret ##[error]y': unknown key" in message


class Versioned(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: int = 2
    port: int


@pytest.mark.parametrize("text", [
    '{"schema_version": 3, "port": 1}',  # a newer gate's file that would validate
    '{"schema_version": 3, "port": 1, "added_later": true}',  # one whose new keys would not
])
def test_a_file_of_another_schema_version_is_refused_as_such(tmp_path, text):
    path = tmp_path / "thing.json"
    path.write_text(text)
    with pytest.raises(OtherSchemaVersion, match=r"thing file .*thing.json has schema v3; "
                                                 r"this gate reads v2$"):
        load_json_model(Versioned, path, "thing file")
    path.write_text('{"schema_version": 2, "port": 1}')
    assert load_json_model(Versioned, path, "thing file").port == 1

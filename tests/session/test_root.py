"""Which folder is the project, and how the agent's file paths are stored relative to it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from checkpoint_mcp.errors import PathOutsideProject, ProjectRootError
from checkpoint_mcp.session.root import RootSource, first_file_root, relative_path, resolve_root


@pytest.fixture
def folders(tmp_path: Path) -> dict[str, Path]:
    names = ("argument", "checkpoint", "claude", "client", "cwd")
    made = {name: tmp_path / name for name in names}
    for path in made.values():
        path.mkdir()
    return made


def test_the_root_comes_from_the_first_source_that_names_one(folders: dict[str, Path]) -> None:
    environ = {"CHECKPOINT_PROJECT_ROOT": str(folders["checkpoint"]), "CLAUDE_PROJECT_DIR": str(folders["claude"])}
    client = [folders["client"].as_uri()]
    cwd = str(folders["cwd"])

    steps = [
        (str(folders["argument"]), environ, client, RootSource.ARGUMENT, "argument"),
        (None, environ, client, RootSource.CHECKPOINT_ENV, "checkpoint"),
        (None, {"CLAUDE_PROJECT_DIR": environ["CLAUDE_PROJECT_DIR"]}, client, RootSource.CLAUDE_ENV, "claude"),
        (None, {}, client, RootSource.CLIENT_ROOT, "client"),
        (None, {}, [], RootSource.WORKING_DIRECTORY, "cwd"),
    ]
    for argument, env, roots, source, expected in steps:
        root = resolve_root(argument, environ=env, client_roots=roots, cwd=cwd)
        assert (root.source, root.path) == (source, str(folders[expected]))


def test_a_relative_project_root_is_refused_with_the_spec_message(folders: dict[str, Path]) -> None:
    with pytest.raises(ProjectRootError, match="projectRoot must be an absolute path"):
        resolve_root("./app", environ={}, cwd=str(folders["cwd"]))


def test_a_relative_environment_root_is_refused_naming_the_variable(folders: dict[str, Path]) -> None:
    with pytest.raises(ProjectRootError, match="CHECKPOINT_PROJECT_ROOT must be an absolute path"):
        resolve_root(None, environ={"CHECKPOINT_PROJECT_ROOT": "app"}, cwd=str(folders["cwd"]))


def test_a_missing_or_non_directory_root_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "file.txt"
    file.write_text("x")
    for path in (tmp_path / "missing", file):
        with pytest.raises(ProjectRootError, match="is not an existing directory"):
            resolve_root(str(path), environ={}, cwd=str(tmp_path))


def test_symlinks_in_the_root_are_resolved(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)

    assert resolve_root(str(link), environ={}, cwd="/").path == str(real)


def test_only_a_local_file_uri_counts_as_a_client_root() -> None:
    assert first_file_root(["https://example.com/x", "file:///home/me/my%20app", "file:///other"]) == "/home/me/my app"
    assert first_file_root(["file://remote-host/x"]) is None
    assert first_file_root(["file://localhost/srv/app"]) == "/srv/app"
    assert first_file_root([]) is None


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("src/a.ts", "src/a.ts"),
        ("./src//a.ts", "src/a.ts"),
        ("src/../lib/b.ts", "lib/b.ts"),
        (".env", ".env"),
    ],
)
def test_relative_paths_are_stored_normalized(tmp_path: Path, given: str, stored: str) -> None:
    assert relative_path(str(tmp_path), given) == stored


def test_an_absolute_path_inside_the_project_is_stored_relative(tmp_path: Path) -> None:
    assert relative_path(str(tmp_path), str(tmp_path / "src" / "a.ts")) == "src/a.ts"


def test_an_absolute_path_through_a_symlinked_folder_is_stored_relative(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    alias = tmp_path / "alias"
    alias.symlink_to(project)

    assert relative_path(str(project), str(alias / "src" / "a.ts")) == "src/a.ts"


@pytest.mark.parametrize("given", ["../elsewhere.ts", "..", ".", "/etc/passwd", ""])
def test_a_path_outside_the_project_is_refused_clearly(tmp_path: Path, given: str) -> None:
    project = tmp_path / "project"
    project.mkdir()

    with pytest.raises(PathOutsideProject):
        relative_path(str(project), given)


def test_a_sibling_folder_sharing_the_root_prefix_is_outside(tmp_path: Path) -> None:
    project = tmp_path / "app"
    project.mkdir()

    with pytest.raises(PathOutsideProject, match="is outside the project root"):
        relative_path(str(project), str(tmp_path / "app-old" / "x.ts"))


def test_the_project_name_is_the_root_folder_name(tmp_path: Path) -> None:
    project = tmp_path / "my-app"
    project.mkdir()

    assert resolve_root(str(project), environ={}, cwd=os.getcwd()).name == "my-app"

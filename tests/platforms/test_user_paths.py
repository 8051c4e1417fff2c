"""The user's folders, where each platform documents them; an XDG variable wins everywhere."""

from __future__ import annotations

import pytest

from checkpoint_mcp.platforms import paths


@pytest.mark.parametrize(
    ("platform", "environ", "data", "state"),
    [
        ("linux", {"HOME": "/home/u"}, "/home/u/.local/share/checkpoint", "/home/u/.local/state/checkpoint"),
        (
            "darwin",
            {"HOME": "/Users/u"},
            "/Users/u/Library/Application Support/checkpoint",
            "/Users/u/Library/Application Support/checkpoint",
        ),
        ("win32", {"HOME": "/h", "LOCALAPPDATA": "/L"}, "/L/checkpoint", "/L/checkpoint"),
        ("win32", {"HOME": "/h"}, "/h/AppData/Local/checkpoint", "/h/AppData/Local/checkpoint"),
        (
            "darwin",
            {"HOME": "/Users/u", "XDG_DATA_HOME": "/d", "XDG_STATE_HOME": "/s"},
            "/d/checkpoint",
            "/s/checkpoint",
        ),
    ],
)
def test_each_platform_keeps_checkpoint_data_and_state_in_its_documented_folder(
    platform: str, environ: dict[str, str], data: str, state: str
) -> None:
    assert paths.user_data(environ, platform) == data
    assert paths.user_state(environ, platform) == state

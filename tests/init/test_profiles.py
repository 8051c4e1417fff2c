"""The reviewed profiles shipped with `checkpoint init`: each is checked against its real server at the pinned
version (started as a user's `.mcp.json` starts it, asked through the official SDK client), so a release that
renames a tool, adds or drops one, or changes a hint the profile relies on fails here; each profile's tables load
with the proxy's own policy checks; a profile is used only for its own server and the tools it names; and the
profiles travel in the wheel."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from checkpoint_mcp.errors import ProfileError
from checkpoint_mcp.init.policies import Listing, written
from checkpoint_mcp.init.profiles import load, profiles
from checkpoint_mcp.init.proposals import Kind
from checkpoint_mcp.intercept.policy import Repeat, WithinSession, parse_policy

from realservers import BY_PROFILE, ROOT, SERVERS

PROFILES = {profile.name: profile for profile in profiles()}


async def server_info_and_tools(entry: dict[str, Any], cwd: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """What the server answers ``initialize`` and ``tools/list`` with, through the official SDK client."""
    params = StdioServerParameters(
        command=entry["command"], args=entry["args"], env={**entry.get("env", {})} or None, cwd=str(cwd)
    )
    with anyio.fail_after(90):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            initialized = await session.initialize()
            listed = await session.list_tools()
    info = initialized.server_info.model_dump(mode="json", by_alias=True, exclude_none=True)
    tools = [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in listed.tools]
    return info, tools


def hints(tool: dict[str, Any]) -> dict[str, Any]:
    annotations = tool.get("annotations") or {}
    return {
        h: annotations[h]
        for h in ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
        if h in annotations
    }


def test_every_server_in_tools_servers_and_the_dev_extra_has_a_profile_and_back() -> None:
    assert set(PROFILES) == {server.profile for server in SERVERS}


@pytest.mark.timeout(180)
@pytest.mark.parametrize("name", sorted(BY_PROFILE))
def test_the_pinned_server_lists_exactly_the_tools_and_hints_its_profile_was_reviewed_with(
    name: str, tmp_path: Path
) -> None:
    profile, server = PROFILES[name], BY_PROFILE[name]
    assert server.installed_version() == profile.reviewed, (
        f"{server.package} {server.installed_version()} is installed, the profile was reviewed for {profile.reviewed}: "
        "review the profile against the new version (and set its `reviewed`), or pin the version back"
    )
    info, tools = anyio.run(server_info_and_tools, server.entry(tmp_path), tmp_path)

    names = [tool["name"] for tool in tools]
    assert info["name"] in profile.server_names, info
    assert profile.recognises(info, names), "init would not recognise the server"
    added, gone = sorted(set(names) - set(profile.tables)), sorted(set(profile.tables) - set(names))
    assert (added, gone) == ([], []), f"{server.package}'s tools changed: new {added}, gone {gone}"
    changed = {
        tool["name"]: (profile.tables[tool["name"]].hints, hints(tool))
        for tool in tools
        if hints(tool) != profile.tables[tool["name"]].hints
    }
    assert changed == {}, f"hints changed since the review (reviewed, now): {changed}"

    # What init writes for the real listing comes from the profile, table by table.
    policy = written(name, Listing(tools, info))
    assert policy.profile == profile
    assert all(proposal.profile == profile for proposal in policy.proposals)
    assert policy.drifted == ()


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_a_profiles_tables_load_with_the_proxys_checks_and_say_why(name: str) -> None:
    profile = PROFILES[name]
    tools = [{"name": tool, "annotations": dict(table.hints)} for tool, table in profile.tables.items()]
    policy = written(name, Listing(tools, {"name": profile.server_names[0]}))
    rules = parse_policy(tomllib.loads(policy.text), f"{name}.toml")
    for tool, table in profile.tables.items():
        rule = rules.rule_for(tool)
        assert rule.source == f"tools.{tool}", tool
        assert rule.journal is table.settings.get("journal", True), tool
        assert rule.idempotent is table.settings.get("idempotent", False), tool
        if "repeat" in table.settings:
            assert rule.repeat is Repeat(table.settings["repeat"]), tool
        if rule.repeat is Repeat.REFUSE:
            assert rule.within_session is WithinSession.RUN, f"{tool}: a repeat within one session runs"
        assert table.why.strip(), f"{tool} has no why"
        assert f"Reviewed: {table.why}" in " ".join(
            line[2:] for line in policy.text.splitlines() if line.startswith("# ")
        ), tool


def test_browser_servers_let_interactions_and_navigation_repeat_and_offer_approve_on_uploads_and_code() -> None:
    for name, interactions, gated in (
        (
            "playwright",
            ("browser_click", "browser_press_key", "browser_type", "browser_navigate"),
            {"browser_file_upload", "browser_drop", "browser_evaluate", "browser_run_code_unsafe"},
        ),
        ("chrome-devtools", ("click", "press_key", "type_text", "navigate_page"), {"upload_file", "evaluate_script"}),
    ):
        profile = PROFILES[name]
        for tool in interactions:
            assert profile.tables[tool].settings == {"repeat": "allow"}, tool
        assert {tool for tool, table in profile.tables.items() if table.offers_approve} == gated


def test_a_profile_is_used_for_its_own_server_and_the_tools_it_names_while_their_hints_hold() -> None:
    profile = PROFILES["playwright"]
    click = {"name": "browser_click", "annotations": dict(profile.tables["browser_click"].hints)}
    navigate = {"name": "browser_navigate", "annotations": {"destructiveHint": True, "idempotentHint": True}}
    snapshot = {"name": "browser_snapshot", "annotations": dict(profile.tables["browser_snapshot"].hints)}
    later = {"name": "browser_pay", "annotations": {"destructiveHint": True, "openWorldHint": True}}
    tools = [click, navigate, snapshot, later]

    ours = written("web", Listing(tools, {"name": "Playwright", "version": "9.9"}))
    assert ours.profile == profile
    by_tool = {proposal.tool: proposal for proposal in ours.proposals}
    assert by_tool["browser_click"].profile == profile
    assert by_tool["browser_click"].kind is Kind.REPEATS_RUN
    assert by_tool["browser_navigate"].profile is None, "its hints changed since the review: its own hints decide"
    assert by_tool["browser_navigate"].kind is Kind.REPEATS_RUN, "idempotentHint"
    assert ours.drifted == ("browser_navigate",)
    assert by_tool["browser_pay"].profile is None, "a tool the profile does not name follows its hints"
    assert by_tool["browser_pay"].kind is Kind.PROTECTED
    rules = parse_policy(tomllib.loads(ours.text), "web.toml")
    assert rules.rule_for("browser_pay").repeat is Repeat.REFUSE

    other = written("web", Listing(tools, {"name": "my-browser"}))
    assert other.profile is None, "another server with the same tool names is not Playwright"
    assert {p.tool: p.kind for p in other.proposals}["browser_click"] is Kind.PROTECTED
    assert written("web", Listing(tools[3:], {"name": "Playwright"})).profile is None, "nor one without its tools"


@pytest.mark.timeout(300)
def test_the_wheel_carries_every_profile(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    [wheel] = tmp_path.glob("checkpoint_mcp-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in PROFILES:
        assert f"checkpoint_mcp/init/profiles/{name}.toml" in names, name


GOOD_HEAD = '[profile]\ntitle = "x"\nreviewed = "1"\nserver_names = ["x"]\nrecognise_by = ["a"]\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[profile", "init/profiles/bad.toml: the file: is not valid TOML"),
        (GOOD_HEAD, "the file tools: must be a table"),
        (GOOD_HEAD + '[tools.a]\nhints = {}\nwhy = "w"\n', "[tools.a]: sets none of journal = false"),
        (GOOD_HEAD + '[tools.a]\nhints = {}\nwhy = "w"\nwindow = "1h"\n', "[tools.a]: sets none of journal = false"),
        (GOOD_HEAD + '[tools.a]\nhints = {}\nwhy = "w"\nrepeat = "sometimes"\n', "[tools.a] repeat: must be one of"),
        (GOOD_HEAD + '[tools.a]\nhints = {}\nwhy = "w"\njournal = "no"\n', "[tools.a] journal: must be true or false"),
        (GOOD_HEAD + '[tools.a]\nhints = {}\nwhy = "w"\napprove = "operator"\n', "[tools.a]: unknown key 'approve'"),
        (
            GOOD_HEAD + '[tools.a]\nhints = { readOnly = true }\nwhy = "w"\njournal = false\n',
            "[tools.a] hints: readOnly",
        ),
        (GOOD_HEAD + "[tools.a]\nhints = {}\njournal = false\n", "[tools.a] why: must be a non-empty string"),
        (
            GOOD_HEAD + '[tools.a]\nhints = {}\nwhy = "w"\nrepeat = "allow"\ncaught_commands = "/command"\n',
            "[tools.a] caught_commands: must be a non-empty array of JSON pointers",
        ),
        (
            GOOD_HEAD + '[tools.a]\nhints = {}\nwhy = "w"\nrepeat = "allow"\nignore = ["timeout"]\n',
            "[tools.a] ignore: must be a non-empty array of JSON pointers",
        ),
        (
            GOOD_HEAD.replace('["a"]', '["b"]') + '[tools.a]\nhints = {}\nwhy = "w"\njournal = false\n',
            "recognise_by: names tools the profile has no table for: ['b']",
        ),
    ],
)
def test_a_profile_that_cannot_be_used_is_an_error_naming_its_file_table_and_key(text: str, message: str) -> None:
    with pytest.raises(ProfileError, match=re.escape(message)):
        load("bad", text)

"""Many upstreams behind one endpoint (`checkpoint serve --upstreams FILE.toml`): three real upstreams (two stdio
servers, one HTTP server), the official SDK client and a real agent framework calling prefixed tools, each
upstream journaled in its own sequence under its own policy, and one upstream dying mid-run and coming back."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from checkpoint_mcp.refusals import REPEAT_REFUSED, UPSTREAM_EXITED, UPSTREAM_REFUSED
from gatewayproc import MODERN, GatewayProcess, modern_call, request

from httpservers import HttpServer, sdk_server
from support import DEFAULT_TIMEOUT, checkpoint_argv, done_count, read_effects, server_cmd, wait_until

ROOT = Path(__file__).parents[2]
FRAMEWORK_PYTHON = ROOT / ".venv-langchain" / "bin" / "python"
LANGCHAIN_DRIVER = ROOT / "tests" / "clients" / "langchain_http.py"


def upstreams_file(tmp_path: Path, web_url: str) -> Path:
    """mail and files: the effects server over stdio (mail under a policy that refuses a repeated send_email);
    web: the SDK's server over HTTP. Each counts its side effects in a file of its own."""
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "mail.toml").write_text('[tools.send_email]\nrepeat = "refuse"\n', encoding="utf-8")
    command = json.dumps(server_cmd("effects_server.py"))
    path = tmp_path / "upstreams.toml"
    path.write_text(
        f"""
[upstreams.mail]
command = {command}
env = {{ EFFECTS_FILE = "{tmp_path / "mail.jsonl"}" }}
policy = "policies/mail.toml"

[upstreams.files]
command = {command}
env = {{ EFFECTS_FILE = "{tmp_path / "files.jsonl"}" }}

[upstreams.web]
url = "{web_url}"
""",
        encoding="utf-8",
    )
    return path


@contextmanager
def federated(tmp_path: Path, *extra: str) -> Iterator[tuple[GatewayProcess, HttpServer]]:
    with sdk_server(tmp_path) as web:
        flags = ["--upstreams", str(upstreams_file(tmp_path, web.url)), "--journal", str(tmp_path / "j.db")]
        with GatewayProcess(*flags, *extra) as gateway:
            yield gateway, web


ENVELOPE = {
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
}  # what a 2026-07-28 request carries besides its version (the SDK's server insists on it)


def modern(gateway: GatewayProcess, ident: int, tool: str, arguments: dict[str, Any], path: str = "/w/run/mcp") -> Any:
    reply = request(gateway.port, "POST", path, modern_call(ident, tool, arguments, **ENVELOPE), MODERN, timeout=60)
    assert reply.status == 200, reply.body
    return reply.message()


def listed(gateway: GatewayProcess) -> set[str]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", **ENVELOPE}},
    }
    reply = request(gateway.port, "POST", "/w/run/mcp", body, MODERN)
    assert reply.status == 200, reply.body
    return {tool["name"] for tool in reply.message()["result"]["tools"]}


def health(gateway: GatewayProcess) -> dict[str, Any]:
    reply = request(gateway.port, "GET", "/healthz")
    return {"code": reply.status, **reply.json()}


def test_the_sdk_client_calls_prefixed_tools_each_upstream_journaled_apart_under_its_own_policy(
    tmp_path: Path,
) -> None:
    async def session(url: str, calls: list[tuple[str, dict[str, Any]]]) -> tuple[set[str], list[Any]]:
        out: list[Any] = []
        async with Client(url, mode="legacy") as client:  # the session era (the stdio servers are older)
            with anyio.fail_after(60):
                tools = {tool.name for tool in (await client.list_tools()).tools}
                for name, arguments in calls:
                    try:
                        result = await client.call_tool(name, arguments)
                        out.append((result.content[0].text, result.meta["checkpoint/journal"]))  # type: ignore[union-attr]
                    except MCPError as exc:
                        out.append(exc.error.code)
        return tools, out

    with federated(tmp_path) as (gateway, _):
        url = f"{gateway.base}/w/run/mcp"
        first = [
            ("mail__send_email", {"to": "ann"}),
            ("files__send_email", {"to": "ann"}),
            ("web__send_email", {"to": "ann"}),
            ("mail__send_email", {"to": "bob"}),
        ]
        tools, answers = anyio.run(session, url, first)
        # A new session (a resumed agent) sends the same calls again: mail's policy refuses the repeat, files
        # (no policy) runs it again, as each upstream's own policy says.
        _, again = anyio.run(session, url, [("mail__send_email", {"to": "ann"}), ("files__send_email", {"to": "ann"})])
    assert {"mail__send_email", "files__send_email", "web__send_email", "web__progress"} <= tools
    assert all("__" in name for name in tools)
    texts = [text for text, _ in answers]
    assert texts == ["sent to ann", "sent to ann", "sent to ann", "sent to bob"]
    places = [(meta["workflow"], meta["seq"]) for _, meta in answers]
    assert places == [("run/mail", 1), ("run/files", 1), ("run/web", 1), ("run/mail", 2)]  # a sequence each
    assert again[0] == REPEAT_REFUSED
    assert again[1][0] == "sent to ann"
    assert done_count(tmp_path / "mail.jsonl", "send_email") == 2
    assert done_count(tmp_path / "files.jsonl", "send_email") == 2
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 1  # the web server's
    listed_json = subprocess.run(
        checkpoint_argv("journal", "ls", "--journal", str(tmp_path / "j.db"), "--json"),
        capture_output=True,
        text=True,
        timeout=DEFAULT_TIMEOUT,
        check=True,
    )
    assert {"run/mail", "run/files", "run/web"} <= {w["workflow"] for w in json.loads(listed_json.stdout)}


def test_an_upstream_that_dies_mid_run_is_left_out_named_in_healthz_and_comes_back(tmp_path: Path) -> None:
    with federated(tmp_path) as (gateway, web):
        assert "sent to a" in str(modern(gateway, 1, "web__send_email", {"to": "a"}))
        assert {"mail__send_email", "files__send_email", "web__send_email"} <= listed(gateway)
        web.stop()  # the HTTP upstream dies mid-run
        refused = modern(gateway, 2, "web__send_email", {"to": "b"})
        assert refused["error"]["code"] == UPSTREAM_REFUSED  # not reached: it did not run
        # The others keep answering; the dead one is left out of the list and named in /healthz.
        assert modern(gateway, 3, "mail__send_email", {"to": "c"})["result"]["content"][0]["text"] == "sent to c"
        assert modern(gateway, 4, "files__lookup", {"key": "k"})["result"]["content"][0]["text"] == "value of k"
        tools = listed(gateway)
        assert "mail__send_email" in tools
        assert not any(name.startswith("web__") for name in tools)
        report = health(gateway)
        assert report["code"] == 200
        assert report["upstreams"]["web"].startswith("left out: ")
        assert report["upstreams"]["mail"] == "ok"
        assert report["upstream"] == "degraded: web left out"
        web.start(web.port)  # it comes back on its address: the gateway tries it again on its own
        wait_until(lambda: health(gateway)["upstreams"]["web"] == "ok", what="the web upstream to be back")
        assert "web__send_email" in listed(gateway)
        back = modern(gateway, 5, "web__send_email", {"to": "d"})
        assert back["result"]["content"][0]["text"] == "sent to d"
        assert back["result"]["_meta"]["checkpoint/journal"]["workflow"] == "run/web"
        # A stdio upstream that dies (its process exits during a call) is left out too, and started again.
        died = modern(gateway, 6, "files__die", {"code": 3})
        assert died["error"]["code"] == UPSTREAM_EXITED
        assert health(gateway)["upstreams"]["files"].startswith("left out: ")
        wait_until(lambda: health(gateway)["upstreams"]["files"] == "ok", what="the files upstream to be back")
        assert modern(gateway, 7, "files__send_email", {"to": "e"})["result"]["content"][0]["text"] == "sent to e"
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 2  # b never reached the web server


def test_a_session_hears_on_its_get_stream_when_an_upstream_leaves_and_when_it_comes_back(tmp_path: Path) -> None:
    """The session era: the SDK client's GET stream carries ``notifications/tools/list_changed`` when an upstream
    dies (its tools are left out) and again when it is started again (they are back)."""

    async def session(url: str) -> tuple[list[float], set[str], set[str]]:
        heard: list[float] = []
        changed = anyio.Event()

        async def on_message(message: Any) -> None:
            if getattr(message, "method", None) == "notifications/tools/list_changed":
                heard.append(anyio.current_time())
                changed.set()

        async with Client(url, mode="legacy", message_handler=on_message) as client:
            with anyio.fail_after(60):
                before = {tool.name for tool in (await client.list_tools()).tools}
                with pytest.raises(MCPError) as died:
                    await client.call_tool("files__die", {"code": 3})
                assert died.value.error.code == UPSTREAM_EXITED
                await changed.wait()  # left out
                changed = anyio.Event()
                while not changed.is_set():  # a request after its back-off starts it again
                    await anyio.sleep(0.3)
                    await client.list_tools()
                after = {tool.name for tool in (await client.list_tools()).tools}
        return heard, before, after

    with federated(tmp_path) as (gateway, _):
        heard, before, after = anyio.run(session, f"{gateway.base}/w/run/mcp")
    assert len(heard) == 2
    assert {"files__send_email", "mail__send_email", "web__send_email"} <= before
    assert before == after


def test_an_upstream_that_cannot_start_is_left_out_and_the_others_serve(tmp_path: Path) -> None:
    command = json.dumps(server_cmd("effects_server.py"))
    path = tmp_path / "upstreams.toml"
    path.write_text(f'[upstreams.mail]\ncommand = {command}\n[upstreams.broken]\ncommand = "exit 3"\n', "utf-8")
    with GatewayProcess("--upstreams", str(path), env={"EFFECTS_FILE": str(tmp_path / "e.jsonl")}) as gateway:
        report = health(gateway)
        assert report["upstreams"]["broken"].startswith("left out: ")
        assert report["code"] == 200
        answer = modern(gateway, 1, "mail__send_email", {"to": "x"})
        assert answer["result"]["content"][0]["text"] == "sent to x"
        broken = modern(gateway, 2, "broken__anything", {})
        assert "broken" in broken["error"]["message"]
        unknown = modern(gateway, 3, "send_email", {"to": "x"})
        assert "names here are <upstream>__<name>" in unknown["error"]["message"]


@pytest.fixture(scope="session")
def framework_python() -> Path:
    """The Python of .venv-langchain, made now if it is missing (scripts/_langchain.sh)."""
    subprocess.run(["bash", str(ROOT / "scripts" / "_langchain.sh")], check=True, timeout=600)
    assert FRAMEWORK_PYTHON.exists()
    return FRAMEWORK_PYTHON


def test_an_agent_framework_calls_prefixed_tools_through_its_mcp_client(framework_python: Path, tmp_path: Path) -> None:
    with federated(tmp_path) as (gateway, _):
        done = subprocess.run(
            [
                str(framework_python),
                str(LANGCHAIN_DRIVER),
                f"{gateway.base}/w/agent/mcp",
                "files__send_email",
                '{"to": "lc"}',
            ],
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    tools, outcome = (json.loads(line) for line in done.stdout.splitlines() if line.startswith("{"))
    assert {"mail__send_email", "files__send_email", "web__send_email"} <= set(tools["tools"])
    assert outcome["ok"], outcome
    assert "sent to lc" in outcome["content"]
    assert done_count(tmp_path / "files.jsonl", "send_email") == 1


def test_a_name_too_long_with_its_prefix_stops_the_gateway_at_start(tmp_path: Path) -> None:
    name = "a" * 55  # "aaa…__send_email" is 67 characters
    path = tmp_path / "upstreams.toml"
    path.write_text(f"[upstreams.{name}]\ncommand = {json.dumps(server_cmd('effects_server.py'))}\n", "utf-8")
    done = subprocess.run(
        checkpoint_argv("serve", "--listen", "127.0.0.1:0", "--upstreams", str(path)),
        capture_output=True,
        text=True,
        timeout=DEFAULT_TIMEOUT,
        check=False,
    )
    assert done.returncode == 1
    assert f"{name}__send_email" in done.stderr
    assert "over 64" in done.stderr


@pytest.mark.parametrize(
    ("content", "flags", "message"),
    [
        ('[upstreams.mail]\ncomand = "x"\n', [], "[upstreams.mail]: unknown key 'comand'"),
        ('[upstreams.mail]\ncommand = "x"\nurl = "http://h/mcp"\n', [], "give exactly one of command and url"),
        ('[upstreams.my__mail]\ncommand = "x"\n', [], "'__' is the separator"),
        ('[upstreams.mail]\nurl = "http://h/mcp"\nenv = { A = "b" }\n', [], "env: applies to command only"),
        ('[upstreams.mail]\ncommand = "x"\npolicy = "missing.toml"\n', [], "cannot read the policy file"),
        ("[upstreams]\n", [], "no upstream"),
        ('[upstreams.mail]\ncommand = "x"\n', ["--upstream-cmd", "y"], "--upstream-cmd and --upstreams contradict"),
    ],
)
def test_an_upstreams_file_with_a_mistake_is_refused_naming_file_table_and_key(
    tmp_path: Path, content: str, flags: list[str], message: str
) -> None:
    path = tmp_path / "upstreams.toml"
    path.write_text(content, encoding="utf-8")
    done = subprocess.run(
        checkpoint_argv("serve", "--upstreams", str(path), *flags),
        capture_output=True,
        text=True,
        timeout=DEFAULT_TIMEOUT,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    if "[upstreams" in message:
        assert str(path) in done.stderr


def test_with_principals_each_upstream_of_a_principals_workflow_is_journaled_as_its_own(tmp_path: Path) -> None:
    from idp import JwksServer, Key, bearer, token_flags

    key = Key("k", "ES256")
    with JwksServer(key) as jwks, federated(tmp_path, *token_flags(jwks.url)) as (gateway, _):
        places = []
        for ident, who in enumerate(("alice", "bob"), 1):
            headers = {**MODERN, **bearer(key.token(who))}
            body = modern_call(ident, "mail__send_email", {"to": "ann"}, checkpoint_seq=1, **ENVELOPE)
            reply = request(gateway.port, "POST", "/w/run/mcp", body, headers)
            meta = reply.message()["result"]["_meta"]["checkpoint/journal"]
            places.append((meta["workflow"], meta["seq"], meta["replayed"]))
    assert places == [("alice/run/mail", 1, False), ("bob/run/mail", 1, False)]
    assert done_count(tmp_path / "mail.jsonl", "send_email") == 2


def test_prompts_and_resource_templates_are_prefixed_and_their_requests_routed(tmp_path: Path) -> None:
    import nodetools

    everything = " ".join([*nodetools.package_bin("@modelcontextprotocol/server-everything", "dist/index.js"), "stdio"])
    path = tmp_path / "upstreams.toml"
    path.write_text(
        f"[upstreams.every]\ncommand = {json.dumps(everything)}\n"
        f"[upstreams.mail]\ncommand = {json.dumps(server_cmd('effects_server.py'))}\n",
        encoding="utf-8",
    )
    with GatewayProcess("--upstreams", str(path), "--journal", str(tmp_path / "j.db"), env=nodetools.env()) as gateway:
        from gatewayproc import initialize

        headers = {"Mcp-Session-Id": initialize(gateway.port)}
        request(gateway.port, "POST", "/mcp", {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)

        def ask(ident: int, method: str, params: dict[str, Any] | None = None) -> Any:
            body = {"jsonrpc": "2.0", "id": ident, "method": method, "params": params or {}}
            reply = request(gateway.port, "POST", "/mcp", body, headers, timeout=60)
            assert reply.status == 200, reply.body
            return reply.message()

        # A resource read before any list: the gateway learns the templates first, then routes it.
        read = ask(1, "resources/read", {"uri": "demo://resource/dynamic/text/7"})
        assert "7" in read["result"]["contents"][0]["text"]
        prompts = {p["name"] for p in ask(2, "prompts/list")["result"]["prompts"]}
        assert "every__simple-prompt" in prompts
        assert all(name.startswith("every__") for name in prompts)  # the effects server has none
        got = ask(3, "prompts/get", {"name": "every__simple-prompt"})
        assert got["result"]["messages"][0]["content"]["type"] == "text"
        templates = ask(4, "resources/templates/list")["result"]["resourceTemplates"]
        assert {t["name"] for t in templates} >= {"every__Dynamic Text Resource"}
        unknown = ask(5, "prompts/get", {"name": "simple-prompt"})
        assert unknown["error"]["code"] == -32602
        tools = {t["name"] for t in ask(6, "tools/list")["result"]["tools"]}
        assert {"every__echo", "mail__send_email"} <= tools
        echoed = ask(7, "tools/call", {"name": "every__echo", "arguments": {"message": "hi"}})
        assert echoed["result"]["content"][0]["text"] == "Echo: hi"
        assert echoed["result"]["_meta"]["checkpoint/journal"]["workflow"].endswith("/every")


def running(pid: int) -> bool:
    """True while process ``pid`` runs (a zombie does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


def test_a_call_the_client_abandoned_is_forgotten_and_the_idle_federation_ends_its_upstreams(tmp_path: Path) -> None:
    """A 2026-07-28 client that closes the stream of a call that never answers has cancelled it: the federation
    forgets it, counts as idle, and after --idle-timeout ends its upstreams (the real processes exit)."""
    command = json.dumps(server_cmd("effects_server.py"))
    path = tmp_path / "upstreams.toml"
    path.write_text(
        "".join(
            f'[upstreams.{name}]\ncommand = {command}\nenv = {{ EFFECTS_FILE = "{tmp_path / name}.jsonl" }}\n'
            for name in ("a", "b")
        ),
        encoding="utf-8",
    )
    flags = ["--upstreams", str(path), "--journal", str(tmp_path / "j.db"), "--idle-timeout", "1"]
    with GatewayProcess(*flags) as gateway:
        assert modern(gateway, 1, "b__send_email", {"to": "x"})["result"]["content"][0]["text"] == "sent to x"
        with pytest.raises(TimeoutError):  # the client gives up on the call, and closes its stream
            request(gateway.port, "POST", "/w/run/mcp", modern_call(2, "a__hang", {}, **ENVELOPE), MODERN, timeout=1)
        pids = {event["pid"] for name in ("a", "b") for event in read_effects(tmp_path / f"{name}.jsonl")}
        assert len(pids) == 2
        assert all(running(pid) for pid in pids)
        wait_until(lambda: not any(running(pid) for pid in pids), what="the idle federation's upstreams to exit")
        assert health(gateway)["upstream"] == "ok (0 running)"

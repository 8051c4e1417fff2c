"""The commands that act beyond this machine (init/beyond_the_machine.toml), as `init` writes them for a shell tool
and as the proxy reads them: each family catches what people run (a test per family), lets its near misses repeat,
and stays caught when the command is chained, wrapped or hidden after ``npm test && ``. The policy text is the one
`init` writes for Desktop Commander's start_process, read with the proxy's own parser; a tool `init` does not know
that runs shell commands is guessed, and the summary says so."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from checkpoint_mcp.init.beyond_the_machine import FAMILIES, families, shell_argument
from checkpoint_mcp.init.policies import Listing, written
from checkpoint_mcp.init.policy_overview import overview
from checkpoint_mcp.init.profiles import profiles
from checkpoint_mcp.init.proposals import Kind
from checkpoint_mcp.intercept.policy import Repeat, ToolRule, WithinSession, parse_policy

DESKTOP = next(profile for profile in profiles() if profile.name == "desktop-commander")
TOOLS = [{"name": tool, "annotations": dict(table.hints)} for tool, table in DESKTOP.tables.items()]
POLICY = parse_policy(tomllib.loads(written("desktop", Listing(TOOLS, {"name": "desktop-commander"})).text), "dc")
START = POLICY.rule_for("start_process")


def decided(command: str) -> ToolRule:
    return START.chosen({"command": command, "timeout_ms": 5000})


CAUGHT = {
    "push": [
        "git push",
        "git push origin main",
        "git push --tags",
        "git push origin v1.4.0",
        "git -C ~/src/app push --force-with-lease",
        "docker push ghcr.io/acme/app:1.4.0",
        "podman push quay.io/acme/app",
        "helm push chart-1.0.0.tgz oci://registry/charts",
        "hg push",
    ],
    "publish": [
        "npm publish",
        "npm publish --access public",
        "pnpm publish -r",
        "yarn npm publish",
        "twine upload dist/*",
        "python -m twine upload dist/*",
        "uv publish",
        "poetry publish --build",
        "cargo publish",
        "gem push acme-1.0.0.gem",
        "npm run release",
        "npx semantic-release",
    ],
    "deploy": [
        "kubectl apply -f k8s/",
        "kubectl -n prod delete pod web-0",
        "kubectl rollout restart deployment/web",
        "helm upgrade --install web ./chart",
        "helm uninstall web",
        "terraform apply -auto-approve",
        "terraform destroy",
        "terraform -chdir=infra apply",
        "pulumi up --yes",
        "npx wrangler deploy",
        "vercel --prod",
        "fly deploy",
        "firebase deploy --only hosting",
        "make deploy",
    ],
    "cloud": [
        "aws s3 cp build/ s3://acme-site/ --recursive",
        "aws ec2 run-instances --image-id ami-1",
        "aws lambda update-function-code --function-name f --zip-file fileb://f.zip",
        "gcloud run deploy web --source .",
        "gcloud compute instances delete vm-1",
        "az group create -n rg -l westeurope",
        "az webapp deploy --src-path app.zip",
        "doctl compute droplet create web",
    ],
    "issues-and-prs": [
        "gh pr create --fill",
        "gh issue create --title Bug --body x",
        "gh release create v1.4.0 --generate-notes",
        "gh pr merge 12 --squash",
        "gh pr comment 12 --body LGTM",
        "glab mr create --fill",
        "glab issue create -t Bug",
    ],
    "forge-api": [
        "gh api -X POST repos/acme/app/issues -f title=Bug",
        "gh api repos/acme/app/issues/1/comments -f body=hi",
        "glab api --method PUT projects/1",
    ],
    "messages": [
        "mail -s 'Build done' team@example.com < report.txt",
        "sendmail team@example.com < mail.txt",
        "slack chat send 'deployed' '#ops'",
        "telegram-send 'deployed'",
        "ntfy publish alerts 'deployed'",
    ],
    "http-write": [
        "curl -X POST http://127.0.0.1:8080/hook",
        'curl -s -XPOST https://hooks.slack.com/services/T/B/X -d \'{"text":"hi"}\'',
        "curl --request DELETE https://api.example.com/items/1",
        "curl -H 'Content-Type: application/json' -d @payload.json https://api.example.com/items",
        "curl --json '{\"a\":1}' https://api.example.com/items",
        "curl -F file=@build.zip https://upload.example.com",
        "wget --post-data 'a=1' https://api.example.com/x",
        "http POST api.example.com/items name=x",
        "http api.example.com/items name=x",
        "xh PUT api.example.com/items/1 done:=true",
    ],
    "powershell-web-write": [
        "Invoke-RestMethod -Uri https://api.example.com/x -Method Post -Body $json",
        "iwr https://api.example.com/x -Method DELETE",
    ],
    "database-sql": [
        "psql -h db.internal -c \"INSERT INTO users VALUES (1, 'a')\"",
        "psql $DATABASE_URL -c 'drop table sessions'",
        "psql -f migrations/001.sql",
        "mysql -e 'UPDATE orders SET state = 1' shop",
        "mysql shop < dump.sql",
        "mongosh --eval 'db.users.deleteMany({})'",
    ],
    "database-keys": [
        "redis-cli SET feature:x on",
        "redis-cli -h cache FLUSHALL",
        "etcdctl put /config/x 1",
        "consul kv put config/x 1",
    ],
}

REPEATS = [
    "npm test",
    "npm run build",
    "npm install",
    "pytest -q",
    "git status",
    "git commit -m 'push the fix'",
    "git log --oneline -5",
    "git pull",
    "git fetch origin",
    "ls -la",
    "mkdir -p build",
    "rm -rf build",
    "docker build -t app .",
    "docker compose up -d",
    "kubectl get pods",
    "kubectl -n prod describe pod web-0",
    "kubectl rollout status deployment/web",
    "kubectl logs web-0",
    "helm list",
    "helm template ./chart",
    "terraform plan",
    "terraform init",
    "aws s3 ls",
    "aws sts get-caller-identity",
    "gcloud config set project acme",
    "gcloud run services list",
    "az account show",
    "gh pr list",
    "gh pr view 12",
    "gh api repos/acme/app",
    "curl https://example.com",
    "curl -fsSL https://example.com/install.sh -o install.sh",
    "curl -I https://example.com",
    "curl -X GET https://api.example.com/items",
    "wget https://example.com/file.tgz",
    "http GET api.example.com/items q==1",
    "python -m http.server 8000",
    "psql -c 'select count(*) from users'",
    "mysql -e 'show tables' shop",
    "redis-cli GET feature:x",
    "sqlite3 app.db 'insert into t values (1)'",
    "echo git push",
    "grep -rn 'npm publish' docs",
    "npm test # then git push",
]


def test_every_family_of_the_issue_has_entries_and_every_entry_a_test_here() -> None:
    assert {family.family for family in families()} == set(FAMILIES)
    assert {family.name for family in families()} == set(CAUGHT)


@pytest.mark.parametrize(("name", "command"), [(name, command) for name, cmds in CAUGHT.items() for command in cmds])
def test_a_command_of_each_family_is_caught_from_a_later_session_by_its_sub_rule(name: str, command: str) -> None:
    rule = decided(command)
    assert rule.source == f"tools.start_process.when.{name}", command
    assert (rule.repeat, rule.window_seconds, rule.within_session) == (Repeat.REFUSE, 24 * 3600, WithinSession.RUN)


@pytest.mark.parametrize("command", REPEATS)
def test_a_command_that_acts_on_this_machine_or_only_reads_repeats(command: str) -> None:
    rule = decided(command)
    assert rule.source == "tools.start_process", f"{command!r} was caught by {rule.source}"
    assert rule.repeat is Repeat.ALLOW


@pytest.mark.parametrize(
    "command",
    [
        "npm test && git push",
        "npm test; npm publish",
        "npm run build && npx wrangler deploy",
        "cd infra && terraform apply -auto-approve",
        "sh -c 'npm test && git push origin main'",
        'bash -lc "kubectl apply -f k8s/"',
        "env NODE_ENV=production npm publish",
        "CI=1 git push",
        "sudo -E helm upgrade web ./chart",
        "npx -y vercel@latest --prod",
        "npm test | tee log.txt && curl -X POST http://127.0.0.1/hook",
        'echo "$(git push 2>&1)"',
        "(git push) > push.log 2>&1",
        "timeout 120 git push",
        "git add -A && git commit -m wip && git push",
    ],
)
def test_a_command_hidden_in_a_chain_or_behind_a_wrapper_stays_caught(command: str) -> None:
    assert decided(command).source.startswith("tools.start_process.when."), command


def test_input_typed_into_a_process_is_caught_alike_whatever_process_it_goes_to() -> None:
    interact = POLICY.rule_for("interact_with_process")
    push = interact.chosen({"pid": 101, "input": "git push\n"})
    assert push.source == "tools.interact_with_process.when.push"
    assert push.identity is not None
    assert push.identity == interact.chosen({"pid": 202, "input": "git push\n"}).identity
    assert push.identity.of("interact_with_process", {"pid": 1, "input": "x"}) == push.identity.of(
        "interact_with_process", {"pid": 2, "input": "x"}
    )
    assert interact.chosen({"pid": 101, "input": "npm test\n"}).source == "tools.interact_with_process"


MCP_SHELL_SERVER = {  # mcp-shell-server 1.1.14 (PyPI; needs the MCP SDK 1.x, so it cannot run beside this one)
    "name": "shell_execute",
    "description": "Execute a shell command",
    "inputSchema": {
        "type": "object",
        "properties": {
            "command": {"type": "array", "items": {"type": "string"}},
            "stdin": {"type": "string"},
            "directory": {"type": "string"},
            "timeout": {"type": "integer"},
        },
        "required": ["command"],
    },
}


@pytest.mark.parametrize(
    ("tool", "argument"),
    [
        (MCP_SHELL_SERVER, "/command"),
        ({"name": "execute_command", "inputSchema": {"properties": {"command": {"type": "string"}}}}, "/command"),
        ({"name": "run_terminal_cmd", "inputSchema": {"properties": {"cmd": {"type": "string"}}}}, "/cmd"),
        ({"name": "bash", "inputSchema": {"properties": {"script": {}}}}, "/script"),
        ({"name": "runShell", "inputSchema": {"properties": {"command": {"type": "string"}}}}, "/command"),
        ({"name": "start_process", "inputSchema": {"properties": {"command": {"type": "string"}}}}, "/command"),
    ],
)
def test_a_tool_that_runs_shell_commands_is_recognised_by_its_name_and_its_argument(
    tool: dict[str, Any], argument: str
) -> None:
    assert shell_argument(str(tool["name"]), tool) == argument


@pytest.mark.parametrize(
    "tool",
    [
        {"name": "send_command", "inputSchema": {"properties": {"command": {"type": "string"}}}},  # no run word
        {"name": "run_query", "inputSchema": {"properties": {"sql": {"type": "string"}}}},  # no command argument
        {"name": "run_script", "inputSchema": {"properties": {"script": {"type": "object"}}}},  # not text
        {"name": "execute", "inputSchema": {"properties": {"command": {"type": "integer"}}}},
        {"name": "run"},
    ],
)
def test_a_tool_that_does_not_look_like_a_shell_is_not_taken_for_one(tool: dict[str, Any]) -> None:
    assert shell_argument(str(tool["name"]), tool) is None


def test_an_unknown_shell_tool_is_guessed_confirm_across_sessions_with_the_families_caught_and_the_summary_says_so() -> (
    None
):
    other = {"name": "list_jobs", "inputSchema": {"properties": {}}}
    hinted = {**MCP_SHELL_SERVER, "annotations": {"destructiveHint": True, "openWorldHint": True}}
    policy = written("shell", Listing([hinted, other], {"name": "mcp-shell-server", "version": "1.1.14"}))
    [shell] = [proposal for proposal in policy.proposals if proposal.tool == "shell_execute"]
    assert shell.guessed_shell
    assert shell.kind is Kind.PROTECTED
    assert shell.caught_commands == ("/command",)
    rules = parse_policy(tomllib.loads(policy.text), "shell.toml").rule_for("shell_execute")
    assert (rules.source, rules.repeat, rules.within_session) == (
        "tools.shell_execute",
        Repeat.CONFIRM,
        WithinSession.RUN,
    )
    assert [sub.name for sub in rules.when] == [family.name for family in families()]
    push = rules.chosen({"command": ["npm", "test", "&&", "git", "push"]})
    assert (push.source, push.repeat) == ("tools.shell_execute.when.push", Repeat.REFUSE)
    assert rules.chosen({"command": ["npm", "test"]}) is rules
    summary = "\n".join(overview([policy]))
    assert "review the guesses: shell's tools shell_execute (command) were taken as running shell commands" in summary
    assert "asks to be confirmed" in summary
    assert "review first" not in summary.split("shell_execute")[0], "a hinted shell is not listed as unhinted"

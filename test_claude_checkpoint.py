#!/usr/bin/env python3
"""Tests for claude_checkpoint.py (stdlib unittest; pytest can collect them too).

    python3 test_claude_checkpoint.py           # every test; ends with "N passed, M failed"
    python3 test_claude_checkpoint.py --bench   # the benchmark, against its floors

Most tests start the real file as a subprocess and speak JSON-RPC to it over stdio,
in real git repositories made in temporary folders: no mocks of git or the file system.
Tests that need a real MCP client (the official Python SDK, Claude Code) skip with a
reason when it is not installed; .ci/run installs both.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "claude_checkpoint.py")
sys.path.insert(0, HERE)
import claude_checkpoint as cc  # noqa: E402

TIMEOUT = 20  # seconds for any one exchange; generous, since CI machines are shared


# ════════════════════════════════════════════════════════════════════════════
# Helpers: isolated environments, real git repositories, a stdio MCP client
# ════════════════════════════════════════════════════════════════════════════

LEAKY_ENV = ("CLAUDE_PROJECT_DIR", "CHECKPOINT_PROJECT_ROOT", "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE",
             "CLAUDECODE", "CLAUDE_CONFIG_DIR")


def isolated_env(home: str, **extra: str) -> dict:
    """The process environment with a private HOME and git identity, nothing of the developer's."""
    env = {k: v for k, v in os.environ.items() if k not in LEAKY_ENV and not k.startswith("GIT_")}
    env.update(HOME=home, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.path.join(home, ".gitconfig"),
               GIT_AUTHOR_NAME="Test", GIT_AUTHOR_EMAIL="test@example.com",
               GIT_COMMITTER_NAME="Test", GIT_COMMITTER_EMAIL="test@example.com",
               PYTHONDONTWRITEBYTECODE="1", LC_ALL="C.UTF-8")
    env.update(extra)
    return env


def temp_dir(test: unittest.TestCase, prefix: str = "cc-") -> str:
    path = os.path.realpath(tempfile.mkdtemp(prefix=prefix))
    test.addCleanup(shutil.rmtree, path, True)
    return path


def git(repo: str, *args: str, env: dict | None = None, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, env=env or isolated_env(os.path.dirname(repo)),
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=TIMEOUT)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr.decode()}")
    return proc.stdout.decode()


def write(repo: str, rel: str, content: str | bytes) -> str:
    path = os.path.join(repo, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as stream:
        stream.write(content.encode() if isinstance(content, str) else content)
    return path


class Workspace:
    """A temporary HOME with a git repository inside it."""

    def __init__(self, test: unittest.TestCase, files: dict | None = None, commit: bool = True, init: bool = True):
        self.home = temp_dir(test, "cc-home-")
        self.repo = os.path.join(self.home, "project")
        os.makedirs(self.repo)
        self.env = isolated_env(self.home)
        if init:
            self.git("init", "-q", "-b", "main")
            self.git("config", "commit.gpgsign", "false")
        for rel, content in (files or {"README.md": "# demo\n", "src/app.py": "print('hi')\n"}).items():
            write(self.repo, rel, content)
        if init and commit:
            self.git("add", "-A")
            self.git("commit", "-qm", "initial")

    def git(self, *args: str, check: bool = True) -> str:
        return git(self.repo, *args, env=self.env, check=check)

    def write(self, rel: str, content: str | bytes) -> str:
        return write(self.repo, rel, content)

    def checkpoint(self) -> dict:
        with open(os.path.join(self.repo, ".claude-checkpoint"), encoding="utf-8") as stream:
            return json.load(stream)

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").strip()

    def run_cli(self, *args: str, stdin: str | bytes = b"", env: dict | None = None, cwd: str | None = None,
                timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
        data = stdin.encode() if isinstance(stdin, str) else stdin
        return subprocess.run([sys.executable, SERVER, *args], cwd=cwd or self.repo, env=env or self.env,
                              input=data, capture_output=True, timeout=timeout)


class McpServer:
    """The real server as a subprocess, spoken to over stdio."""

    def __init__(self, test: unittest.TestCase, cwd: str, env: dict, args: tuple = ()):
        self.test = test
        self.proc = subprocess.Popen([sys.executable, SERVER, *args], cwd=cwd, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: queue.Queue = queue.Queue()
        self.raw_lines: list = []
        self.stderr_chunks: list = []
        self.next_id = 100
        threading.Thread(target=self._pump_stdout, daemon=True).start()
        threading.Thread(target=self._pump_stderr, daemon=True).start()
        test.addCleanup(self.close)

    def _pump_stdout(self) -> None:
        for line in self.proc.stdout:
            self.raw_lines.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def _pump_stderr(self) -> None:
        for chunk in self.proc.stderr:
            self.stderr_chunks.append(chunk)

    @property
    def stderr(self) -> str:
        return b"".join(self.stderr_chunks).decode("utf-8", "replace")

    def send(self, message) -> None:
        self.send_raw(json.dumps(message).encode() + b"\n")

    def send_raw(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def receive(self, timeout: float = TIMEOUT):
        line = self.lines.get(timeout=timeout)
        if line is None:
            raise AssertionError(f"server closed stdout; stderr:\n{self.stderr}")
        return json.loads(line)

    def wait_for(self, predicate, timeout: float = TIMEOUT):
        deadline = time.monotonic() + timeout
        while True:
            message = self.receive(max(0.01, deadline - time.monotonic()))
            if predicate(message):
                return message

    def request(self, method: str, params: dict | None = None, request_id=None, timeout: float = TIMEOUT) -> dict:
        if request_id is None:
            self.next_id += 1
            request_id = self.next_id
        message = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.wait_for(lambda m: isinstance(m, dict) and m.get("id") == request_id and "method" not in m,
                             timeout)

    def notify(self, method: str, params: dict | None = None) -> None:
        message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def initialize(self, version: str = "2025-11-25", capabilities: dict | None = None) -> dict:
        reply = self.request("initialize", {"protocolVersion": version, "capabilities": capabilities or {},
                                            "clientInfo": {"name": "tests", "version": "1"}})
        self.notify("notifications/initialized")
        return reply

    def call(self, name: str, arguments: dict | None = None) -> dict:
        reply = self.request("tools/call", {"name": name, "arguments": arguments or {}})
        self.test.assertIn("result", reply, reply)
        return reply["result"]

    def save(self, **arguments) -> dict:
        return self.call("save_session_checkpoint", arguments)

    def load(self, **arguments) -> str:
        result = self.call("load_session_checkpoint", arguments)
        self.test.assertFalse(result.get("isError"), result)
        return result["content"][0]["text"]

    def close(self) -> None:
        """EOF must end the server at once with status 0, every stdout line must have been
        JSON-RPC, and stderr must hold no traceback."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("the server did not exit within 5 s of EOF")
            self.test.assertEqual(self.proc.returncode, 0, self.stderr)
        for line in self.raw_lines:
            message = json.loads(line)
            for item in message if isinstance(message, list) else [message]:
                self.test.assertEqual(item.get("jsonrpc"), "2.0", line)
        self.test.assertNotIn("Traceback", self.stderr)


def start_server(test: unittest.TestCase, ws: Workspace, initialize: bool = True, cwd: str | None = None,
                 env: dict | None = None, **init) -> McpServer:
    server = McpServer(test, cwd or ws.repo, env or ws.env)
    if initialize:
        server.initialize(**init)
    return server


def blob_sha(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def sample_save(**overrides) -> dict:
    arguments = {
        "goal": "Add GitHub OAuth login with persistent sessions",
        "tasks": [{"description": "OAuth callback route", "status": "done"},
                  {"description": "Session cookie persistence", "status": "in_progress"},
                  {"description": "Logout endpoint", "status": "pending"}],
        "summary": "Callback works; the cookie is dropped on reload.",
        "nextSteps": ["Set sameSite lax", "Re-run npm test -- auth"],
        "decisions": ["Use iron-session, not express-session"],
        "modifiedFiles": [{"path": "src/app.py", "note": "cookie options"}],
        "recentCommands": [{"command": "GITHUB_CLIENT_SECRET=gh_live_8f2a91 npm run dev", "exitCode": 0},
                           {"command": "npm test -- auth", "exitCode": 1, "note": "2 failing"}],
    }
    arguments.update(overrides)
    return arguments


# ════════════════════════════════════════════════════════════════════════════
# 1. Pure functions
# ════════════════════════════════════════════════════════════════════════════

NOW = 1_790_000_000.0  # a fixed clock for pure tests


def make_checkpoint(**overrides) -> cc.Checkpoint:
    base = dict(id="id-1", created_at="2026-10-08T02:23:55.477Z", updated_at="2026-10-08T02:23:55.477Z",
                project_name="my-app", goal="Ship it",
                git=cc.GitState("feat/x", "b2ef1b5919ee5d456ea146c9362a7abc92b1e556", True))
    base.update(overrides)
    return cc.Checkpoint(**base)


class TestSaveArgumentValidation(unittest.TestCase):
    def test_rejects_each_broken_rule_naming_the_field(self):
        long = "x" * 501
        cases = [
            ({}, "goal"),
            ({"goal": long}, "goal"),
            ({"goal": 5}, "goal"),
            ({"goal": "   "}, "goal"),
            ({"goal": "g", "tasks": [{"description": "d", "status": "later"}]}, "tasks[0].status"),
            ({"goal": "g", "tasks": [{"description": "d"}] * 31}, "tasks"),
            ({"goal": "g", "tasks": [{"status": "done"}]}, "tasks[0].description"),
            ({"goal": "g", "tasks": [{"description": "x" * 301}]}, "tasks[0].description"),
            ({"goal": "g", "summary": "x" * 4001}, "summary"),
            ({"goal": "g", "nextSteps": ["s"] * 21}, "nextSteps"),
            ({"goal": "g", "decisions": ["x" * 501]}, "decisions[0]"),
            ({"goal": "g", "modifiedFiles": [{"path": "a", "note": "x" * 301}]}, "modifiedFiles[0].note"),
            ({"goal": "g", "modifiedFiles": [{"note": "n"}]}, "modifiedFiles[0].path"),
            ({"goal": "g", "recentCommands": [{"command": "ls", "exitCode": "1"}]}, "recentCommands[0].exitCode"),
            ({"goal": "g", "recentCommands": [{"command": "ls", "exitCode": True}]}, "recentCommands[0].exitCode"),
            ({"goal": "g", "recentCommands": [{"command": "x" * 2001}]}, "recentCommands[0].command"),
            ({"goal": "g", "recentCommands": [{"command": "ls"}] * 51}, "recentCommands"),
            ({"goal": "g", "mode": "append"}, "mode"),
            ({"goal": "g", "colour": "red"}, "colour"),
            ({"goal": "g", "tasks": [{"description": "d", "owner": "me"}]}, "tasks[0].owner"),
            ({"goal": "g", "tasks": "do it"}, "tasks"),
        ]
        for arguments, field_name in cases:
            with self.subTest(field=field_name, arguments=str(arguments)[:60]):
                with self.assertRaises(cc.InvalidArgument) as caught:
                    cc.parse_save_arguments(arguments)
                self.assertTrue(str(caught.exception).startswith(field_name + ":"), str(caught.exception))

    def test_accepts_the_seed_example_at_the_limits(self):
        request = cc.parse_save_arguments({
            "goal": "g" * 500, "tasks": [{"description": "d" * 300, "status": "blocked"}] * 30,
            "summary": "s" * 4000, "nextSteps": ["n" * 500] * 20, "decisions": ["d" * 500] * 20,
            "modifiedFiles": [{"path": "p", "note": "n" * 300}] * 100,
            "recentCommands": [{"command": "c" * 2000, "exitCode": -1, "note": "n" * 500}] * 50,
            "mode": "merge", "projectRoot": "/tmp"})
        self.assertEqual(request.mode, cc.SaveMode.MERGE)
        self.assertEqual(len(request.tasks), 30)
        self.assertEqual(request.tasks[0].status, cc.TaskStatus.BLOCKED)

    def test_schema_limits_match_the_validation_table(self):
        schema = cc.SAVE_INPUT_SCHEMA["properties"]
        self.assertEqual(schema["goal"]["maxLength"], 500)
        self.assertEqual(schema["tasks"]["maxItems"], 30)
        self.assertEqual(schema["recentCommands"]["items"]["properties"]["command"]["maxLength"], 2000)
        self.assertFalse(cc.SAVE_INPUT_SCHEMA["additionalProperties"])
        self.assertEqual(schema["tasks"]["items"]["properties"]["status"]["enum"],
                         ["pending", "in_progress", "done", "blocked"])


class TestCheckpointJson(unittest.TestCase):
    def test_round_trips_every_field(self):
        cp = make_checkpoint(
            tasks=[cc.Task("a", cc.TaskStatus.DONE)], summary="s", next_steps=["n"], decisions=["d"],
            modified_files=[cc.FileEntry("src/a.py", "M", cc.FileSource.GIT, note="n", hash="ab" * 20, auto=True)],
            recent_commands=[cc.Command("ls", 0, "ok", "2026-10-08T02:23:55.477Z", auto=True, tool_use_id="t1")],
            redactions=2, truncated=True, omitted_files=3, goal_auto=True,
            hooks=cc.HookState(["t1"], {"session": 120}))
        self.assertEqual(cc.Checkpoint.from_json(json.loads(json.dumps(cp.to_json()))), cp)

    def test_reads_the_version_1_format_of_the_original_server(self):
        seed = {"version": 1, "id": "ee5507c0-855e-44a5-85c1-d97b767537c9",
                "createdAt": "2026-10-08T02:23:55.477Z", "updatedAt": "2026-10-08T02:23:55.477Z",
                "generator": {"name": "claude-checkpoint-mcp", "version": "0.1.0"}, "project": {"name": "my-app"},
                "git": {"branch": "feat/github-oauth", "head": "b2ef1b5919ee5d456ea146c9362a7abc92b1e556", "dirty": True},
                "goal": {"primary": "Add GitHub OAuth", "tasks": [{"description": "OAuth callback route", "status": "done"}]},
                "summary": "s", "nextSteps": ["n"], "decisions": ["d"],
                "modifiedFiles": [{"path": "src/auth/session.ts", "status": "M", "source": "git", "note": "cookie options",
                                   "hash": "9ec893ef673dac860e7e2b6fcaad602983eeb0b1"}],
                "recentCommands": [{"command": "npm test -- auth", "exitCode": 1, "note": "2 failing",
                                    "at": "2026-10-08T02:23:55.477Z"}],
                "meta": {"redactions": 1, "truncated": False}}
        cp = cc.Checkpoint.from_json(seed)
        self.assertEqual(cp.goal, "Add GitHub OAuth")
        self.assertEqual(cp.modified_files[0].note, "cookie options")
        self.assertEqual(cp.to_json()["version"], cc.SCHEMA_VERSION)

    def test_refuses_a_newer_version_asking_to_upgrade(self):
        doc = make_checkpoint().to_json()
        doc["version"] = cc.SCHEMA_VERSION + 1
        with self.assertRaises(cc.UnsupportedVersion) as caught:
            cc.Checkpoint.from_json(doc)
        self.assertIn("Upgrade", str(caught.exception))

    def test_names_the_bad_field_of_a_hand_edited_file(self):
        cases = [("goal", "not an object", "goal"), ("modifiedFiles", [{"path": 3}], "modifiedFiles.path"),
                 ("version", "2", "version"), ("recentCommands", [{"command": "ls", "exitCode": "x"}],
                                                 "recentCommands.exitCode")]
        for key, value, named in cases:
            with self.subTest(key=key):
                doc = make_checkpoint().to_json()
                doc[key] = value
                with self.assertRaises(cc.CheckpointError) as caught:
                    cc.Checkpoint.from_json(doc)
                self.assertIn(named, str(caught.exception))


class TestMergeTable(unittest.TestCase):
    def previous(self) -> cc.Checkpoint:
        return make_checkpoint(
            id="old-id", created_at="2026-01-01T00:00:00.000Z",
            tasks=[cc.Task("a", cc.TaskStatus.PENDING), cc.Task("b", cc.TaskStatus.IN_PROGRESS)],
            summary="old summary", next_steps=["old step"], decisions=["keep it simple"],
            recent_commands=[cc.Command(f"cmd {i}", 0) for i in range(48)])

    def build(self, previous, **arguments) -> cc.Checkpoint:
        request = cc.parse_save_arguments({"goal": "new goal", **arguments})
        return cc.build_checkpoint(previous, request, [], None, "2026-10-08T00:00:00.000Z", "new-id", "app")

    def test_replace_sets_everything_and_starts_a_new_identity(self):
        cp = self.build(None, tasks=[{"description": "z"}])
        self.assertEqual((cp.id, cp.created_at), ("new-id", "2026-10-08T00:00:00.000Z"))
        self.assertEqual([t.description for t in cp.tasks], ["z"])
        self.assertIsNone(cp.summary)
        self.assertEqual(cp.recent_commands, [])

    def test_merge_updates_tasks_by_description_and_appends_new_ones(self):
        cp = self.build(self.previous(), mode="merge",
                        tasks=[{"description": "b", "status": "done"}, {"description": "c"}])
        self.assertEqual([(t.description, t.status.value) for t in cp.tasks],
                         [("a", "pending"), ("b", "done"), ("c", "pending")])
        self.assertEqual((cp.id, cp.created_at), ("old-id", "2026-01-01T00:00:00.000Z"))
        self.assertEqual(cp.goal, "new goal")

    def test_merge_keeps_summary_and_next_steps_unless_given(self):
        kept = self.build(self.previous(), mode="merge")
        self.assertEqual((kept.summary, kept.next_steps), ("old summary", ["old step"]))
        given = self.build(self.previous(), mode="merge", summary="new", nextSteps=["n1"])
        self.assertEqual((given.summary, given.next_steps), ("new", ["n1"]))

    def test_merge_appends_decisions_without_duplicates_dropping_the_oldest_past_20(self):
        previous = replace_cp(self.previous(), decisions=[f"d{i}" for i in range(19)])
        cp = self.build(previous, mode="merge", decisions=["d3", "new-1", "new-2"])
        self.assertEqual(len(cp.decisions), 20)
        self.assertEqual(cp.decisions[-2:], ["new-1", "new-2"])
        self.assertNotIn("d0", cp.decisions)
        self.assertEqual(cp.decisions.count("d3"), 1)

    def test_merge_appends_commands_dropping_the_oldest_past_50(self):
        cp = self.build(self.previous(), mode="merge",
                        recentCommands=[{"command": "new 1"}, {"command": "new 2"}, {"command": "new 3"}])
        self.assertEqual(len(cp.recent_commands), 50)
        self.assertEqual(cp.recent_commands[0].command, "cmd 1")
        self.assertEqual(cp.recent_commands[-1].command, "new 3")
        self.assertTrue(cc.growth_truncated(self.previous(), cc.parse_save_arguments(
            {"goal": "g", "recentCommands": [{"command": "x"}] * 3})))

    def test_file_selection_attaches_agent_notes_and_keeps_inherited_notes(self):
        git_entries = [cc.FileEntry("a.py", "M", cc.FileSource.GIT), cc.FileEntry("b.py", "??", cc.FileSource.GIT)]
        notes = [cc.FileNote("a.py", "the fix"), cc.FileNote("docs/x.md", "committed")]
        inherited = [cc.FileEntry("b.py", "??", cc.FileSource.GIT, note="old note"),
                     cc.FileEntry("c.py", "M", cc.FileSource.AGENT, note="kept", hash="x")]
        selection = cc.select_files(git_entries, notes, inherited)
        by_path = {e.path: e for e in selection.entries}
        self.assertEqual(list(by_path), ["a.py", "b.py", "docs/x.md", "c.py"])
        self.assertEqual((by_path["a.py"].note, by_path["a.py"].source), ("the fix", cc.FileSource.GIT))
        self.assertEqual(by_path["b.py"].note, "old note")
        self.assertEqual((by_path["docs/x.md"].status, by_path["docs/x.md"].source), ("M", cc.FileSource.AGENT))
        self.assertIsNone(by_path["c.py"].hash, "inherited entries are re-hashed, not trusted")

    def test_file_selection_past_the_limit_keeps_notes_then_agent_then_git(self):
        git_entries = [cc.FileEntry(f"g{i:03}", "M", cc.FileSource.GIT) for i in range(150)]
        notes = [cc.FileNote("g149", "important"), cc.FileNote("agent-only")]
        selection = cc.select_files(git_entries, notes, [], limit=100)
        paths = [e.path for e in selection.entries]
        self.assertEqual(len(paths), 100)
        self.assertEqual(selection.omitted, 51)
        self.assertIn("g149", paths)
        self.assertIn("agent-only", paths)
        self.assertEqual(paths[:3], ["g000", "g001", "g002"], "order stays git's")


def replace_cp(cp: cc.Checkpoint, **changes) -> cc.Checkpoint:
    import dataclasses
    return dataclasses.replace(cp, **changes)


class TestSizeCap(unittest.TestCase):
    def test_drops_oldest_commands_first_to_fit_64_kb(self):
        commands = [cc.Command(f"{i:02d} " + "c" * 1990, 0, "n" * 500) for i in range(50)]
        cp, data = cc.fit_to_size(make_checkpoint(recent_commands=commands, summary="s" * 4000))
        self.assertLessEqual(len(data), cc.MAX_CHECKPOINT_BYTES)
        self.assertTrue(cp.truncated)
        self.assertEqual(cp.recent_commands[-1].command[:2], "49")
        self.assertGreater(len(cp.recent_commands), 10)
        self.assertEqual(cp.summary, "s" * 4000, "commands go before anything else")
        self.assertEqual(json.loads(data)["meta"]["truncated"], True)

    def test_then_drops_files_without_notes_and_always_fits(self):
        files = [cc.FileEntry("f" * 900 + str(i), "M", cc.FileSource.GIT, note="n" if i % 10 == 0 else None)
                 for i in range(100)]
        wide = "字" * 500  # three bytes each in UTF-8
        cp, data = cc.fit_to_size(make_checkpoint(modified_files=files, decisions=[wide] * 20))
        self.assertLessEqual(len(data), cc.MAX_CHECKPOINT_BYTES)
        self.assertEqual(len([f for f in cp.modified_files if f.note]), 10, "entries with notes outlive the rest")
        self.assertEqual(len(cp.decisions), 20)
        self.assertGreater(cp.omitted_files, 0)
        everything = make_checkpoint(
            modified_files=files, decisions=[wide] * 20, next_steps=[wide] * 20, tasks=[cc.Task("字" * 300)] * 30,
            summary="字" * 4000, goal="字" * 500)
        cp, data = cc.fit_to_size(everything)
        self.assertLessEqual(len(data), cc.MAX_CHECKPOINT_BYTES)
        self.assertEqual(cp.goal, everything.goal, "the goal is never dropped")

    def test_small_checkpoints_are_untouched(self):
        cp, data = cc.fit_to_size(make_checkpoint())
        self.assertFalse(cp.truncated)
        self.assertEqual(data, cc.encode_checkpoint(make_checkpoint()))


class TestDrift(unittest.TestCase):
    def test_flags_changed_and_gone_files_but_not_unchanged_ones(self):
        cp = make_checkpoint(modified_files=[
            cc.FileEntry("same.py", "M", cc.FileSource.GIT, hash="1" * 40),
            cc.FileEntry("edited.py", "M", cc.FileSource.GIT, hash="2" * 40),
            cc.FileEntry("gone.py", "M", cc.FileSource.GIT, hash="3" * 40),
            cc.FileEntry("deleted.py", "D", cc.FileSource.GIT, hash=None)])
        hashes = {"same.py": "1" * 40, "edited.py": "9" * 40, "gone.py": None, "deleted.py": None}
        drift = cc.compute_drift(cp, cc.GitState("feat/x", "c" * 40, True), ["same.py", "new.py", ".claude-checkpoint"],
                                 hashes, 2)
        self.assertEqual(drift.changed_since, ["edited.py", "gone.py"])
        self.assertEqual(drift.new_since, ["new.py"])
        self.assertEqual(drift.commits_since, 2)
        self.assertFalse(drift.branch_changed)

    def test_unreachable_head_marks_every_recorded_file(self):
        cp = make_checkpoint(modified_files=[cc.FileEntry("a.py", "M", cc.FileSource.GIT, hash="1" * 40)])
        drift = cc.compute_drift(cp, cc.GitState("main", "c" * 40, False), [], {"a.py": "1" * 40}, None)
        self.assertTrue(drift.unreachable)
        self.assertEqual(drift.changed_since, ["a.py"])
        self.assertTrue(drift.branch_changed)
        self.assertIn("no longer reachable", "\n".join(cc.render_drift(drift)))


class TestBrief(unittest.TestCase):
    def seed_result(self, drift=None) -> cc.LoadResult:
        cp = make_checkpoint(
            goal="Add GitHub OAuth login with persistent sessions",
            tasks=[cc.Task("OAuth callback route", cc.TaskStatus.DONE),
                   cc.Task("Session cookie persistence", cc.TaskStatus.IN_PROGRESS),
                   cc.Task("Logout endpoint"), cc.Task("Rotate keys", cc.TaskStatus.BLOCKED)],
            summary="Callback exchanges the code and creates a session, but the cookie is dropped on reload.",
            next_steps=["Set sameSite: 'lax'", "Re-run npm test -- auth", "Start the logout endpoint"],
            decisions=["Use iron-session, not express-session (needs edge runtime support)"],
            modified_files=[cc.FileEntry("src/auth/session.ts", "M", cc.FileSource.GIT, note="cookie options"),
                            cc.FileEntry("src/auth/callback.ts", "M", cc.FileSource.GIT),
                            cc.FileEntry("src/auth/session.spec.ts", "??", cc.FileSource.GIT)],
            recent_commands=[cc.Command("GITHUB_CLIENT_SECRET=«redacted» npm run dev", 0),
                             cc.Command("npm test -- auth", 1, "2 failing in session.spec.ts"),
                             cc.Command("make", None)],
            git=cc.GitState("feat/github-oauth", "b2ef1b5919ee5d456ea146c9362a7abc92b1e556", True))
        return cc.LoadResult(True, "/home/me/my-app/.claude-checkpoint", "/home/me/my-app", checkpoint=cp, drift=drift)

    def test_renders_the_seed_example_sections_and_markers(self):
        saved = cc.parse_timestamp("2026-10-08T02:23:55.477Z")
        brief = cc.render_brief(self.seed_result(), saved + 120)
        self.assertTrue(brief.startswith("# Resuming: my-app (checkpoint saved 2m ago, 2026-10-08 02:23:55 UTC)\n"
                                         "Branch `feat/github-oauth` @ b2ef1b591 (uncommitted changes)\n"), brief)
        for expected in ("## Goal\nAdd GitHub OAuth", "- [x] OAuth callback route", "- [~] Session cookie persistence",
                         "- [ ] Logout endpoint", "- [!] Rotate keys", "## Where things stand", "1. Set sameSite",
                         "## Decisions & gotchas", "## Files touched (3)",
                         "- src/auth/session.ts (M) — cookie options", "- src/auth/session.spec.ts (??)",
                         "## Recent commands (last 3, oldest first)",
                         "- ✓ `GITHUB_CLIENT_SECRET=«redacted» npm run dev`",
                         "- ✗ exit 1 `npm test -- auth` — 2 failing in session.spec.ts", "- · `make`"):
            self.assertIn(expected, brief)
        self.assertLess(len(brief.encode()), 1500)

    def test_puts_news_first_and_leaves_out_empty_sections(self):
        drift = cc.Drift(False, "feat/github-oauth", 1, ["src/auth/session.ts"], [])
        brief = cc.render_brief(self.seed_result(drift), NOW)
        self.assertLess(brief.index("## Since this checkpoint"), brief.index("## Goal"))
        self.assertIn("- 1 new commit(s) on HEAD", brief)
        self.assertIn("- ⚠ Changed after the checkpoint, re-read before editing: `src/auth/session.ts`", brief)
        bare = cc.render_brief(cc.LoadResult(True, "/p/.claude-checkpoint", "/p",
                                             checkpoint=make_checkpoint(git=None)), NOW)
        for absent in ("## Tasks", "## Where things stand", "## Next steps", "## Files", "## Recent", "## Since", "Branch"):
            self.assertNotIn(absent, bare)

    def test_cuts_long_lists(self):
        cp = make_checkpoint(tasks=[cc.Task(f"task {i}") for i in range(30)],
                             modified_files=[cc.FileEntry(f"f{i}", "M", cc.FileSource.GIT) for i in range(40)])
        brief = cc.render_brief(cc.LoadResult(True, "/p/.claude-checkpoint", "/p", checkpoint=cp), NOW)
        self.assertIn(f"- … and {30 - cc.BRIEF_SHOW['tasks']} more", brief)
        self.assertIn(f"- … and {40 - cc.BRIEF_SHOW['files']} more", brief)

    def test_nothing_to_resume_is_a_message_not_an_error(self):
        text = cc.render_brief(cc.LoadResult(False, "/p/.claude-checkpoint", "/p"), NOW)
        self.assertIn("nothing to resume", text)

    def test_save_answer_matches_the_seed(self):
        cp = self.seed_result().checkpoint
        outcome = cc.SaveOutcome("/home/me/code/my-app/.claude-checkpoint", "/home/me/code/my-app", 2202,
                                 cc.SaveMode.REPLACE, cp, ["Redacted 1 secret-looking value(s)."])
        self.assertEqual(cc.render_save_answer(outcome),
                         "Checkpoint saved to /home/me/code/my-app/.claude-checkpoint (2202 bytes, replace).\n"
                         "4 task(s), 3 file(s), 3 command(s) on feat/github-oauth@b2ef1b591.\n"
                         "⚠ Redacted 1 secret-looking value(s).")

    def test_human_ages(self):
        for seconds, text in ((0, "just now"), (42, "42s ago"), (120, "2m ago"), (7200, "2h ago"), (3 * 86400, "3d ago")):
            with self.subTest(seconds=seconds):
                self.assertEqual(cc.human_age(seconds), text)


class TestRootChoice(unittest.TestCase):
    def test_precedence(self):
        env_all = {"CHECKPOINT_PROJECT_ROOT": "/env", "CLAUDE_PROJECT_DIR": "/claude"}
        cases = [
            ("/arg", env_all, ["file:///roots"], "/arg"),
            (None, env_all, ["file:///roots"], "/env"),
            (None, {"CLAUDE_PROJECT_DIR": "/claude"}, ["file:///roots"], "/roots"),
            (None, {"CLAUDE_PROJECT_DIR": "/claude"}, ["https://x", "file:///second"], "/second"),
            (None, {"CLAUDE_PROJECT_DIR": "/claude"}, [], "/claude"),
            (None, {}, [], "/cwd"),
        ]
        for argument, env, roots, expected in cases:
            with self.subTest(expected=expected):
                self.assertEqual(cc.choose_root(argument, env, roots, "/cwd").path, expected)

    def test_file_uris(self):
        for uri, path in (("file:///home/me/my%20app", "/home/me/my app"), ("file://localhost/srv/x", "/srv/x"),
                          ("file://otherhost/x", None), ("http://x/y", None), (7, None)):
            with self.subTest(uri=uri):
                self.assertEqual(cc.file_uri_to_path(uri), path)

    def test_refuses_relative_missing_filesystem_root_and_home(self):
        home = temp_dir(self)
        for path, message in (("relative/dir", "absolute"), ("/definitely/not/here", "not an existing folder"),
                              ("/", "Refusing"), (home, "Refusing")):
            with self.subTest(path=path):
                with self.assertRaises(cc.RootError) as caught:
                    cc.resolve_root(cc.RootChoice(path, "test"), home)
                self.assertIn(message, str(caught.exception))

    def test_resolves_symlinks(self):
        real = temp_dir(self)
        link = os.path.join(temp_dir(self), "link")
        os.symlink(real, link)
        self.assertEqual(cc.resolve_root(cc.RootChoice(link, "test"), None), real)

    def test_project_paths_stay_inside_the_root(self):
        for path, expected in (("src/a.py", "src/a.py"), ("/p/src/./a.py", "src/a.py"), ("/p/../etc/passwd", None),
                               ("../x", None), ("/other/a", None), ("/p", None), ("a/../../b", None)):
            with self.subTest(path=path):
                self.assertEqual(cc.relative_project_path("/p", path), expected)


class TestStatusParsing(unittest.TestCase):
    def test_reduces_porcelain_codes(self):
        for kind, xy, expected in (("1", ".M", "M"), ("1", "M.", "M"), ("1", "A.", "A"), ("1", "AM", "A"),
                                   ("1", "AD", "D"), ("1", ".D", "D"), ("1", "D.", "D"), ("1", "T.", "M"),
                                   ("2", "R.", "R"), ("2", "RM", "R"), ("2", "C.", "A"), ("u", "UU", "U"),
                                   ("?", "??", "??")):
            with self.subTest(kind=kind, xy=xy):
                self.assertEqual(cc.reduce_status(kind, xy), expected)

    def test_parses_branch_head_renames_and_prefix(self):
        raw = (b"# branch.oid " + b"a" * 40 + b"\0# branch.head feat/x\0"
               b"1 .M N... 100644 100644 100644 " + b"1" * 40 + b" " + b"1" * 40 + b" sub/a b.py\0"
               b"2 R. N... 100644 100644 100644 " + b"2" * 40 + b" " + b"2" * 40 + b" R100 sub/new.py\0sub/old.py\0"
               b"? sub/.claude-checkpoint.prev\0? other/x\0? sub/\xc3\xa9.txt\0")
        scan = cc.parse_status(raw, "sub/")
        self.assertEqual(scan.state, cc.GitState("feat/x", "a" * 40, True))
        self.assertEqual([(e.path, e.status) for e in scan.entries], [("a b.py", "M"), ("new.py", "R"), ("é.txt", "??")])

    def test_no_commits_and_detached_head(self):
        self.assertIsNone(cc.parse_status(b"# branch.oid (initial)\0# branch.head main\0? a\0").state)
        detached = cc.parse_status(b"# branch.oid " + b"b" * 40 + b"\0# branch.head (detached)\0")
        self.assertEqual(detached.state, cc.GitState(None, "b" * 40, False))


class TestTranscriptScanner(unittest.TestCase):
    @staticmethod
    def lines(*records) -> list:
        return [(json.dumps(r) if not isinstance(r, str) else r).encode() + b"\n" for r in records]

    @staticmethod
    def use(call_id, name, **arguments) -> dict:
        return {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": call_id, "name": name, "input": arguments}]}}

    @staticmethod
    def result(call_id, error=False, text="ok") -> dict:
        block = {"type": "tool_result", "tool_use_id": call_id, "content": text}
        if error:
            block["is_error"] = True
        return {"type": "user", "message": {"role": "user", "content": [block]}, "toolUseResult": text}

    def scan(self, lines, seen=(), want_prompt=True) -> cc.TranscriptFacts:
        scanner = cc.TranscriptScanner(seen, want_prompt=want_prompt)
        offset = 0
        for line in lines:
            scanner.feed(line, offset)
            offset += len(line)
        return scanner.finish()

    def test_records_successful_edits_and_commands_with_exit_codes(self):
        facts = self.scan(self.lines(
            {"type": "user", "isMeta": True, "message": {"role": "user", "content": "<local-command-caveat>x"}},
            {"type": "user", "message": {"role": "user", "content": "<command-name>/clear</command-name>"}},
            {"type": "user", "message": {"role": "user", "content": "Fix the login bug"}},
            self.use("t1", "Write", file_path="/p/a.py", content="x"), self.result("t1"),
            self.use("t2", "Edit", file_path="/p/b.py"), self.result("t2", error=True, text="String not found"),
            self.use("t3", "Bash", command="npm test", description="Run tests"),
            self.result("t3", error=True, text="Exit code 2\nfailed"),
            self.use("t4", "Bash", command="echo hi"), self.result("t4"),
            self.use("t5", "Read", file_path="/p/c.py"), self.result("t5"),
            self.use("t6", "NotebookEdit", notebook_path="/p/n.ipynb"), self.result("t6"),
            self.use("t7", "MultiEdit", file_path="/p/a.py"), self.result("t7"),
            "{broken json", {"type": "attachment", "attachment": {"x": 1}}, '"just a string"'))
        self.assertEqual(facts.first_prompt, "Fix the login bug")
        self.assertEqual(facts.edited_files, [("/p/a.py", "t1"), ("/p/n.ipynb", "t6")])
        self.assertEqual([(c.command, c.exit_code, c.note) for c in facts.commands],
                         [("npm test", 2, "Run tests"), ("echo hi", 0, None)])
        self.assertTrue(all(c.auto for c in facts.commands))
        self.assertEqual(sorted(facts.taken_ids), ["t1", "t3", "t4", "t6", "t7"])

    def test_skips_seen_ids_and_stops_its_cursor_before_a_pending_call(self):
        lines = self.lines(self.use("t1", "Bash", command="ls"), self.result("t1"),
                           self.use("t2", "Bash", command="sleep 1"))
        facts = self.scan(lines, seen=["t1"])
        self.assertEqual(facts.commands, [])
        self.assertEqual(facts.resume_offset, len(lines[0]) + len(lines[1]))

    def test_exit_code_from_result_text(self):
        for text, code in (("Exit code 127\nnot found", 127), ("Error: Exit code 1", 1), ("killed", 1),
                           ([{"type": "text", "text": "Exit code 3"}], 3)):
            with self.subTest(text=text):
                self.assertEqual(cc._exit_code({"content": text}), code)


# ════════════════════════════════════════════════════════════════════════════
# 2. Redaction
# ════════════════════════════════════════════════════════════════════════════

CORPUS_DIR = os.path.join(HERE, ".ci", "corpus")
# Synthetic values only, assembled at run time so that no scanner mistakes this file for a leak.
GHP = "ghp_" + "R8sT2uV4wX6yZ8aB0cD2eF4gH6iJ8kL0mN2o"
AKIA = "AKIA" + "Q3ZB7NXS2KLM4PDW"
SLACK = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
JWT = "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0." + "dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk"
PEM_BODY = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun"


def redaction_corpus(name: str) -> dict | None:
    path = os.path.join(CORPUS_DIR, name)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as stream:
        return json.load(stream)


def measure_corpus(corpus: dict) -> tuple:
    """(recall, keep-rate, missed cases, mangled benign cases)."""
    missed = [c for c in corpus["secrets"] if any(s in cc.redact(c["text"])[0] for s in c["secrets"])]
    mangled = [c for c in corpus["benign"] if cc.redact(c["text"])[0] != c["text"]]
    return (1 - len(missed) / len(corpus["secrets"]), 1 - len(mangled) / len(corpus["benign"]), missed, mangled)


class TestRedaction(unittest.TestCase):
    def test_replaces_only_the_secret_part(self):
        cases = [
            (f"export GITHUB_TOKEN={GHP}", "export GITHUB_TOKEN=«redacted»"),
            ("GITHUB_CLIENT_SECRET=gh_live_8f2a91 npm run dev", "GITHUB_CLIENT_SECRET=«redacted» npm run dev"),
            ('{"password": "hunter2", "user": "bob"}', '{"password": "«redacted»", "user": "bob"}'),
            ("db_password: 'correct horse battery'", "db_password: '«redacted»'"),
            ("psql postgres://app:s3cr3tpw@db:5432/x", "psql postgres://app:«redacted»@db:5432/x"),
            ("curl -H 'Authorization: Bearer abc123def456ghi789' x", "curl -H 'Authorization: Bearer «redacted»' x"),
            ("mysql -u root -pS3cretPw app", "mysql -u root -p«redacted» app"),
            ("curl -u admin:pa55word https://x", "curl -u admin:«redacted» https://x"),
            ("tool --password hunter2 --verbose", "tool --password «redacted» --verbose"),
            ("tool --api-key=Zm9vYmFyYmF6cXV4", "tool --api-key=«redacted»"),
            (f"aws key {AKIA} used", "aws key «redacted» used"),
            (f"token {SLACK}!", "token «redacted»!"),
            (f"jwt {JWT}", "jwt «redacted»"),
            (f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----",
             "-----BEGIN RSA PRIVATE KEY-----«redacted»-----END RSA PRIVATE KEY-----"),
            (f'"key": "-----BEGIN PRIVATE KEY-----\\n{PEM_BODY}\\n-----END PRIVATE KEY-----\\n"',
             '"key": "-----BEGIN PRIVATE KEY-----«redacted»-----END PRIVATE KEY-----\\n"'),
        ]
        for text, expected in cases:
            with self.subTest(text=text[:50]):
                self.assertEqual(cc.redact(text)[0], expected)

    def test_keeps_what_is_not_a_secret(self):
        for text in ("echo $GITHUB_TOKEN", "API_KEY=${API_KEY}", "key = process.env.API_KEY",
                     "token: ${{ secrets.NPM_TOKEN }}", 'os.environ["AWS_SECRET_ACCESS_KEY"]',
                     "git checkout b2ef1b5919ee5d456ea146c9362a7abc92b1e556", "id 123e4567-e89b-12d3-a456-426614174000",
                     "pytest tests/test_token.py -k test_password", "MAX_TOKENS=4096", "primary_key=True",
                     'sort_key="name"', "docker login --password-stdin", "psql --password-file /run/secrets/pw",
                     "https://github.com/org/repo.git", "git@github.com:org/repo.git", "## Tokens\n- rotate keys monthly",
                     "def get_token(self):", "password_min_length = 12", "auth = HTTPBasicAuth(user, password)",
                     "version 1.2.3-rc.1", "The refresh token expires after 1h"):
            with self.subTest(text=text):
                self.assertEqual(cc.redact(text), (text, 0))

    def test_redacts_known_values_from_the_environment(self):
        text, count = cc.redact("curl -d k=zq81-plain-value https://x", known_secrets=["zq81-plain-value"])
        self.assertEqual((text, count), ("curl -d k=«redacted» https://x", 1))
        self.assertTrue(cc.is_secret_env_name("ANTHROPIC_API_KEY"))
        self.assertTrue(cc.is_secret_env_name("DB_PASSWORD"))
        self.assertFalse(cc.is_secret_env_name("SSH_AUTH_SOCK"))
        self.assertFalse(cc.is_secret_env_name("MAX_TOKENS"))

    def test_counts_every_replacement_and_never_redacts_twice(self):
        text, count = cc.redact(f"A={GHP} B={GHP}")
        self.assertEqual((text, count), ("A=«redacted» B=«redacted»", 2))
        self.assertEqual(cc.redact(text), (text, 0))

    def test_stays_linear_on_100_kb_adversarial_input(self):
        # No timing assertion (shared machines): a catastrophic pattern would take minutes, not
        # seconds, and the suite's own timeout catches it. The bench mode prints the figures.
        for text in ("password=" * 11000, "x://" * 25000, "mysql " * 16000, "-----BEGIN PRIVATE KEY-----" * 3000,
                     "eyJ" + "a" * 100000, "a: " * 33000, '"' * 100000, "--token " * 12000):
            with self.subTest(text=text[:20]):
                redacted, _ = cc.redact(text)
                self.assertNotIn(GHP, redacted)

    def test_corpus_recall_and_keep_rate(self):
        corpus = redaction_corpus("redaction_corpus.json")
        if corpus is None:
            self.skipTest(".ci/corpus/redaction_corpus.json is not here (copied file alone)")
        recall, keep, missed, mangled = measure_corpus(corpus)
        self.assertGreaterEqual(recall, 0.99, [c["text"][:80] for c in missed])
        self.assertGreaterEqual(keep, 0.98, [c["text"][:80] for c in mangled])

    def test_every_free_text_field_is_redacted(self):
        cp = make_checkpoint(goal=f"use {GHP}", tasks=[cc.Task(f"rotate {AKIA}")], summary=f"jwt {JWT}",
                             next_steps=[f"t={GHP}"], decisions=[f"not {SLACK}"],
                             modified_files=[cc.FileEntry("a", "M", cc.FileSource.GIT, note=f"k {GHP}")],
                             recent_commands=[cc.Command(f"x {GHP}", 0, note=f"y {GHP}")])
        redactor = cc.Redactor()
        text = json.dumps(redactor.checkpoint(cp).to_json())
        for secret in (GHP, AKIA, JWT, SLACK):
            self.assertNotIn(secret, text)
        self.assertEqual(redactor.count, 8)


# ════════════════════════════════════════════════════════════════════════════
# 3. Git adapter and storage, on real repositories and folders
# ════════════════════════════════════════════════════════════════════════════

def fake_git_folder(test: unittest.TestCase, script: str | None) -> str:
    """A PATH folder holding python (for the server) and, if given, a `git` script."""
    folder = temp_dir(test, "cc-bin-")
    os.symlink(sys.executable, os.path.join(folder, "python3"))
    if script is not None:
        path = os.path.join(folder, "git")
        with open(path, "w") as stream:
            stream.write("#!/bin/sh\n" + script + "\n")
        os.chmod(path, 0o755)
    return folder


class TestGitAdapter(unittest.TestCase):
    def with_env(self, ws: Workspace):
        """Run the adapter in-process with the workspace's isolated git configuration."""
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(ws.env)
        self.addCleanup(lambda: (os.environ.clear(), os.environ.update(saved)))

    def test_scan_reports_statuses_and_hashes_equal_to_git_hash_object(self):
        ws = Workspace(self, {"keep.txt": "k\n", "mod.txt": "m\n", "gone.txt": "g\n", "old.txt": "o\n" * 50,
                              "dir/nested.txt": "n\n"})
        self.with_env(ws)
        ws.write("mod.txt", "changed\n")
        os.remove(os.path.join(ws.repo, "gone.txt"))
        ws.git("mv", "old.txt", "renamed.txt")
        ws.write("added.txt", "a\n")
        ws.git("add", "added.txt")
        ws.write("untracked/deep/file.bin", bytes(range(256)) * 10)
        ws.write(".claude-checkpoint", "{}")
        scan = cc.Git(ws.repo).scan()
        statuses = {e.path: e.status for e in scan.entries}
        self.assertEqual(statuses, {"mod.txt": "M", "gone.txt": "D", "renamed.txt": "R", "added.txt": "A",
                                    "untracked/deep/file.bin": "??"})
        self.assertEqual(scan.state.branch, "main")
        self.assertEqual(scan.state.head, ws.head())
        self.assertTrue(scan.state.dirty)
        for path in ("mod.txt", "renamed.txt", "added.txt", "untracked/deep/file.bin"):
            with self.subTest(path=path):
                self.assertEqual(cc.hash_worktree_file(ws.repo, path), ws.git("hash-object", path).strip())
        self.assertIsNone(cc.hash_worktree_file(ws.repo, "gone.txt"))

    def test_scan_of_a_subfolder_lists_only_its_files_relative_to_it(self):
        ws = Workspace(self, {"pkg/a.py": "a\n", "other/b.py": "b\n"})
        self.with_env(ws)
        ws.write("pkg/a.py", "changed\n")
        ws.write("other/b.py", "changed\n")
        scan = cc.Git(os.path.join(ws.repo, "pkg")).scan()
        self.assertEqual([(e.path, e.status) for e in scan.entries], [("a.py", "M")])

    def test_no_repository_and_no_commits_give_no_git_state(self):
        for init in (False, True):
            with self.subTest(init=init):
                ws = Workspace(self, commit=False, init=init)
                self.with_env(ws)
                scan = cc.Git(ws.repo).scan()
                self.assertIsNone(scan.state)

    def test_detached_head_has_no_branch(self):
        ws = Workspace(self)
        self.with_env(ws)
        ws.git("checkout", "-q", "--detach")
        self.assertEqual(cc.Git(ws.repo).scan().state, cc.GitState(None, ws.head(), False))

    def test_commits_since_and_unreachable_heads(self):
        ws = Workspace(self)
        self.with_env(ws)
        first = ws.head()
        ws.write("x", "1")
        ws.git("commit", "-qam", "x", check=False)
        ws.git("add", "x")
        ws.git("commit", "-qm", "second")
        git = cc.Git(ws.repo)
        self.assertEqual(git.commits_since(first, ws.head()), 1)
        self.assertEqual(git.commits_since(ws.head(), ws.head()), 0)
        self.assertIsNone(git.commits_since("f" * 40, ws.head()), "unknown commit")
        second = ws.head()
        ws.git("reset", "-q", "--hard", first)
        self.assertIsNone(git.commits_since(second, ws.head()), "reset past the saved head")

    def test_a_symlink_hashes_its_target_like_git(self):
        ws = Workspace(self)
        self.with_env(ws)
        os.symlink("README.md", os.path.join(ws.repo, "link"))
        ws.git("add", "link")
        indexed = ws.git("ls-files", "-s", "link").split()[1]
        self.assertEqual(cc.hash_worktree_file(ws.repo, "link"), indexed)

    def test_missing_git_gives_none_and_a_warning(self):
        ws = Workspace(self)
        self.with_env(ws)
        os.environ["PATH"] = fake_git_folder(self, None)
        git = cc.Git(ws.repo)
        self.assertIsNone(git.scan().state)
        self.assertIn("not found", git.warnings[0])

    def test_a_hanging_git_is_killed_at_the_timeout(self):
        ws = Workspace(self)
        self.with_env(ws)
        os.environ["PATH"] = fake_git_folder(self, "sleep 30") + os.pathsep + os.environ["PATH"]
        git = cc.Git(ws.repo, timeout=0.5)
        started = time.monotonic()
        self.assertIsNone(git.scan().state)
        self.assertLess(time.monotonic() - started, 10, "must not wait for the hung git")
        self.assertIn("did not answer", git.warnings[0])
        self.assertIsNone(git.is_ignored(".claude-checkpoint"), "one hang turns git off for the call")

    def test_git_never_runs_fsmonitor_hooks_during_status(self):
        ws = Workspace(self)
        self.with_env(ws)
        marker = os.path.join(ws.home, "fsmonitor-ran")
        hook = write(ws.home, "hook.sh", f"#!/bin/sh\ntouch {marker}\n")
        os.chmod(hook, 0o755)
        ws.git("config", "core.fsmonitor", hook)
        cc.Git(ws.repo).scan()
        self.assertFalse(os.path.exists(marker))


class TestStorage(unittest.TestCase):
    def test_writes_0600_rotates_prev_and_leaves_no_temp_files(self):
        root = temp_dir(self)
        first = cc.encode_checkpoint(make_checkpoint(goal="first"))
        cc.write_checkpoint(root, first, None)
        cc.write_checkpoint(root, cc.encode_checkpoint(make_checkpoint(goal="second")), first)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(root, ".claude-checkpoint")).st_mode), 0o600)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(root, ".claude-checkpoint.prev")).st_mode), 0o600)
        self.assertEqual(cc.read_checkpoint(root).checkpoint.goal, "second")
        with open(os.path.join(root, ".claude-checkpoint.prev"), "rb") as stream:
            self.assertEqual(stream.read(), first)
        self.assertEqual(sorted(os.listdir(root)), [".claude-checkpoint", ".claude-checkpoint.prev"])

    def test_falls_back_to_prev_and_reports_both_corrupt(self):
        root = temp_dir(self)
        write(root, ".claude-checkpoint", "{not json")
        write(root, ".claude-checkpoint.prev", cc.encode_checkpoint(make_checkpoint(goal="from backup")))
        stored = cc.read_checkpoint(root)
        self.assertTrue(stored.from_backup)
        self.assertEqual(stored.checkpoint.goal, "from backup")
        self.assertIn("unreadable", stored.warnings[0])
        write(root, ".claude-checkpoint.prev", b"\xff\xfe")
        with self.assertRaises(cc.StorageError) as caught:
            cc.read_checkpoint(root)
        self.assertIn("Fix or delete", str(caught.exception))

    def test_never_follows_a_symlink_planted_at_its_names(self):
        root = temp_dir(self)
        outside = write(temp_dir(self), "victim.txt", "precious")
        for name in (".claude-checkpoint", ".claude-checkpoint.prev"):
            os.symlink(outside, os.path.join(root, name))
        with self.assertRaises(cc.StorageError):
            cc.read_checkpoint(root)
        cc.write_checkpoint(root, cc.encode_checkpoint(make_checkpoint()), None)
        with open(outside) as stream:
            self.assertEqual(stream.read(), "precious")
        self.assertFalse(os.path.islink(os.path.join(root, ".claude-checkpoint")))
        os.symlink(outside, os.path.join(root, ".claude-checkpoint.lock"))
        with self.assertRaises(cc.StorageError):
            with cc.ProjectLock(root):
                pass

    def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(self):
        if os.geteuid() == 0:
            self.skipTest("root ignores folder permissions")
        root = temp_dir(self)
        cc.write_checkpoint(root, cc.encode_checkpoint(make_checkpoint(goal="old")), None)
        os.chmod(root, 0o555)
        self.addCleanup(os.chmod, root, 0o755)
        with self.assertRaises(cc.StorageError) as caught:
            cc.write_checkpoint(root, cc.encode_checkpoint(make_checkpoint(goal="new")), None)
        self.assertIn("intact", str(caught.exception))
        self.assertEqual(cc.read_checkpoint(root).checkpoint.goal, "old")
        self.assertEqual(os.listdir(root), [".claude-checkpoint"])

    def test_a_full_disk_keeps_the_old_file_and_leaves_no_temp(self):
        root = temp_dir(self)
        cc.write_checkpoint(root, cc.encode_checkpoint(make_checkpoint(goal="old")), None)
        # RLIMIT_FSIZE makes any write past 100 bytes fail (EFBIG), the way a full disk fails.
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        previous_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (100, hard))
        try:
            with self.assertRaises(cc.StorageError) as caught:
                cc.write_checkpoint(root, cc.encode_checkpoint(make_checkpoint(goal="new " * 100)), None)
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            signal.signal(signal.SIGXFSZ, previous_handler)
        self.assertIn("intact", str(caught.exception))
        self.assertEqual(cc.read_checkpoint(root).checkpoint.goal, "old")
        self.assertEqual(os.listdir(root), [".claude-checkpoint"])

    def test_refuses_a_giant_file(self):
        root = temp_dir(self)
        write(root, ".claude-checkpoint", b" " * (cc.MAX_READ_BYTES + 10))
        with self.assertRaises(cc.StorageError):
            cc.read_checkpoint(root)

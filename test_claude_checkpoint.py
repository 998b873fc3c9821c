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

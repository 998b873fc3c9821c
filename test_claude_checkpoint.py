#!/usr/bin/env python3
"""Tests for claude_checkpoint.py (stdlib unittest; pytest can collect them too).

    python3 test_claude_checkpoint.py           # every test, in parallel shards; ends with "N passed, M failed"
    python3 test_claude_checkpoint.py --quick   # all but the slow ones (50 MB inputs, real clients)
    python3 test_claude_checkpoint.py --bench   # the benchmark, against its floors (--quick: start-up, memory)
    python3 test_claude_checkpoint.py --redaction  # recall and keep-rate on the redaction corpora
    python3 test_claude_checkpoint.py --redaction --figures-only .ci/heldout/*.json  # the held-out corpora, figures only
    python3 test_claude_checkpoint.py --rule-words  # rewrite RULE_WORDS after a redaction pattern changed
    python3 test_claude_checkpoint.py --train-context  # relearn the context judge (_CONTEXT_MODEL) from .ci/corpus

Most tests start the real file as a subprocess and speak JSON-RPC to it over stdio,
in real git repositories made in temporary folders: no mocks of git or the file system.
Tests that need a real MCP client or agent (the official Python SDK, Claude Code, Codex,
Gemini CLI, Qwen Code) skip with a reason when it is not installed; .ci/run installs them.

The tests of claude_checkpoint.py's section N are in section N here, in the same order
(its sections 1-3, header, constants and errors, have none of their own), and a sub-section
numbered like one of its sub-sections tests that one. Unit tests come first, their
end-to-end siblings beside them. Each banner names the SPEC sections it covers; hooks,
the command line, prompts and resources, together, are SPEC sections 8, 9 and 11.
      Helpers         isolated environments, real repositories, a stdio MCP client, fixtures
   4. Model           the checkpoint file and its versions; 4.1 the save tool's arguments
   5. Redaction       5.1 the rules and the corpora, 5.2 each rule's catch and keep examples
   6. Core            6.3 merge table and size cap, 6.4 drift, 6.5 every agent's transcripts, 6.6 snapshot plans
   7. Rendering       the resume brief and the answer texts
   8. Git adapter     status parsing, real repositories, git facts in saves, missing and hanging git
   9. Storage         checkpoint files, the backup, locks, hostile files
  10. Root            which project folder a call is about
  11. Services        11.1 the code rewind end to end, 11.2 save, load and the hooks
  12. MCP tools       12.2 prompts and resources (the tools are checked through 13.1, 4.1 and 11)
  13. Protocol        13.1 handshake era, 13.2 stateless era, 13.3 roots and cancellation, 13.4 fuzzer
  14. Transport       stdio and signals
  15. Install/doctor  install, the plugin's commands, doctor
  16. Command line    show, save, --root, --version, --help
  17. MCP SDK         the official MCP Python SDK's client
  18. Packaging       the wheel's console script and uvx
  19. Claude Code     Claude Code itself, headless, against a stub model; 19.1 Codex, Gemini CLI and
                      Qwen Code against fake models, each taking a task over from Claude Code
  20. MCP Inspector   the MCP Inspector's command line
  21. Benchmark       --bench: figures against floors
  22. Runner          --quick, the shards, and the closing "N passed, M failed"
"""
from __future__ import annotations

import base64
import contextlib
import glob
import hashlib
import http.server
import json
import os
import queue
import re
import shlex
import shutil
import signal
import socketserver
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unicodedata
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "claude_checkpoint.py")
sys.path.insert(0, HERE)
import claude_checkpoint as cc  # noqa: E402

TIMEOUT = 20  # seconds for any one exchange; generous, since CI machines are shared

# The program as the plugin and `install` run it: importing the file, so its cached bytecode is
# reused (a plain `python3 claude_checkpoint.py` compiles the whole file at every start). The
# tests that start the program use it; TestPlainFile (section 16) keeps copy-and-run covered.
PROGRAM = [sys.executable, *cc.IMPORT_FLAGS, cc.IMPORT_CODE.format(module="claude_checkpoint"), HERE]


def _cache_bytecode() -> None:
    """Write the file's cached bytecode once, as the first start of an installed plugin does,
    even where PYTHONDONTWRITEBYTECODE is set (the children's environment sets it too)."""
    import importlib.util
    import py_compile
    try:
        py_compile.compile(SERVER, cfile=importlib.util.cache_from_source(SERVER), doraise=True)
    except (OSError, py_compile.PyCompileError):
        pass  # a read-only checkout: every start compiles, and the tests are slower, not wrong


_cache_bytecode()


def run_in_process(args: list, stdin: bytes = b"", env: dict | None = None,
                   cwd: str | None = None) -> subprocess.CompletedProcess:
    """A subcommand through main()'s stream seam, in this process: what a subprocess run gives
    (exit status, stdout and stderr bytes) without paying for an interpreter's start. The
    environment and the working folder are the command's for the call, as a process's would be."""
    import io
    out, err = io.BytesIO(), io.BytesIO()
    streams = (io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"),
               io.TextIOWrapper(out, encoding="utf-8", write_through=True),
               io.TextIOWrapper(err, encoding="utf-8", write_through=True))
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    os.environ.clear()
    os.environ.update(env if env is not None else saved_env)
    os.chdir(cwd or saved_cwd)
    try:
        code = cc.main(list(args), streams)
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    for stream in streams[1:]:
        stream.flush()
    return subprocess.CompletedProcess(["claude_checkpoint.py", *args], code, out.getvalue(), err.getvalue())


def slow(test):
    """Mark a test or a test class as slow (50 MB inputs, waits on a timeout, thousands of
    generated inputs, hundreds of files, real clients): `--quick` leaves it out, the default runs it."""
    test.slow = True
    return test


def on_every_core(test):
    """Mark a slow test that spreads its own work over every core (outputs_in_processes): the default
    run gives these a shard of their own, one after another, so that two never fight for the cores,
    while the other shards' tests, most of their time spent waiting on git, servers and agents, run
    beside them."""
    test.on_every_core = True
    return slow(test)



# ════════════════════════════════════════════════════════════════════════════
# Helpers: isolated environments, real git repositories, a stdio MCP client
# ════════════════════════════════════════════════════════════════════════════

LEAKY_ENV = ("CLAUDE_PROJECT_DIR", "CHECKPOINT_PROJECT_ROOT", "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE",
             "CLAUDECODE", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "COPILOT_HOME", "XDG_CONFIG_HOME", "APPDATA")


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


DEFAULT_FILES = {"README.md": "# demo\n", "src/app.py": "print('hi')\n"}
_TEMPLATE: list = []  # the default repository, made once per test process and copied


def _template_repo() -> str:
    """A repository with DEFAULT_FILES in one commit, made once: copying it costs less than the
    four git commands that make it, and every test gets its own copy."""
    if not _TEMPLATE:
        home = tempfile.mkdtemp(prefix="cc-template-")
        import atexit
        atexit.register(shutil.rmtree, home, True)
        repo = os.path.join(home, "project")
        os.makedirs(repo)
        env = isolated_env(home)
        git(repo, "init", "-q", "-b", "main", env=env)
        git(repo, "config", "commit.gpgsign", "false", env=env)
        for rel, content in DEFAULT_FILES.items():
            write(repo, rel, content)
        git(repo, "add", "-A", env=env)
        git(repo, "commit", "-qm", "initial", env=env)
        _TEMPLATE.append(repo)
    return _TEMPLATE[0]


class Workspace:
    """A temporary HOME with a git repository inside it."""

    def __init__(self, test: unittest.TestCase, files: dict | None = None, commit: bool = True, init: bool = True):
        self.home = temp_dir(test, "cc-home-")
        self.repo = os.path.join(self.home, "project")
        os.makedirs(self.repo)
        self.env = isolated_env(self.home)
        if init and commit and files is None:  # the usual start: a copy of one repository made once
            shutil.rmtree(self.repo)
            shutil.copytree(_template_repo(), self.repo, symlinks=True)
            return
        if init:
            self.git("init", "-q", "-b", "main")
            self.git("config", "commit.gpgsign", "false")
        for rel, content in (files or DEFAULT_FILES).items():
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
        return run_in_process(list(args), data, env or self.env, cwd or self.repo)


class McpServer:
    """The real server as a subprocess, spoken to over stdio."""

    def __init__(self, test: unittest.TestCase, cwd: str, env: dict, args: tuple = (), command: list | None = None):
        self.test = test
        command = [*PROGRAM, *args] if command is None else command
        self.proc = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: queue.Queue = queue.Queue()
        self.raw_lines: list = []
        self.stderr_chunks: list = []
        self.next_id = 100
        self.pumps = [threading.Thread(target=self._pump_stdout, daemon=True),
                      threading.Thread(target=self._pump_stderr, daemon=True)]
        for pump in self.pumps:
            pump.start()
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
        for pump in self.pumps:
            pump.join(timeout=5)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            with contextlib.suppress(OSError):
                stream.close()
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


def make_read_only(test: unittest.TestCase, folder: str) -> None:
    """No new file can be created in `folder`: chmod 555, and for root (who ignores modes) the
    immutable attribute. Skips where neither works."""
    os.chmod(folder, 0o555)
    test.addCleanup(os.chmod, folder, 0o755)
    if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("chattr"):
        if subprocess.run(["chattr", "+i", folder], capture_output=True).returncode == 0:
            test.addCleanup(subprocess.run, ["chattr", "-i", folder], capture_output=True)
    probe = os.path.join(folder, ".probe")
    try:
        with open(probe, "w"):
            pass
    except OSError:
        return
    os.remove(probe)
    test.skipTest("cannot make a folder read-only here")


CORPUS_DIR = os.path.join(HERE, ".ci", "corpus")


# ── Checkpoints, saves and replies, for the sections below ──

NOW = 1_790_000_000.0  # a fixed clock for pure tests


def make_checkpoint(**overrides) -> cc.Checkpoint:
    base = dict(id="id-1", created_at="2026-10-08T02:23:55.477Z", updated_at="2026-10-08T02:23:55.477Z",
                project_name="my-app", goal="Ship it",
                git=cc.GitState("feat/x", "b2ef1b5919ee5d456ea146c9362a7abc92b1e556", True))
    base.update(overrides)
    return cc.Checkpoint(**base)


def deep_nesting(depth: int, kind: str):
    value: object = "bottom"
    for _ in range(depth):
        value = [value] if kind == "list" else {"a": value}
    return value


SEED_V1_CHECKPOINT = {
    "version": 1,
    "id": "ee5507c0-855e-44a5-85c1-d97b767537c9",
    "createdAt": "2026-10-08T02:23:55.477Z",
    "updatedAt": "2026-10-08T02:23:55.477Z",
    "generator": {"name": "claude-checkpoint-mcp", "version": "0.1.0"},
    "project": {"name": "my-app"},
    "git": {"branch": "feat/github-oauth", "head": "b2ef1b5919ee5d456ea146c9362a7abc92b1e556", "dirty": True},
    "goal": {"primary": "Add GitHub OAuth login with persistent sessions",
             "tasks": [{"description": "OAuth callback route", "status": "done"},
                       {"description": "Session cookie persistence", "status": "in_progress"},
                       {"description": "Logout endpoint", "status": "pending"}]},
    "summary": "Callback exchanges the code and creates a session, but the cookie is dropped on reload.",
    "nextSteps": ["Set sameSite: 'lax' and secure only in production in src/auth/session.ts",
                  "Re-run npm test -- auth", "Start the logout endpoint"],
    "decisions": ["Use iron-session, not express-session (needs edge runtime support)"],
    "modifiedFiles": [
        {"path": "src/auth/session.ts", "status": "M", "source": "git", "note": "cookie options",
         "hash": "9ec893ef673dac860e7e2b6fcaad602983eeb0b1"},
        {"path": "src/auth/session.spec.ts", "status": "??", "source": "git",
         "hash": "9daeafb9864cf43055ae93beb0afd6c7d144bfa4"}],
    "recentCommands": [
        {"command": "GITHUB_CLIENT_SECRET=«redacted» npm run dev", "exitCode": 0, "at": "2026-10-08T02:23:55.477Z"},
        {"command": "npm test -- auth", "exitCode": 1, "note": "2 failing in session.spec.ts: cookie missing after reload",
         "at": "2026-10-08T02:23:55.477Z"}],
    "meta": {"redactions": 1, "truncated": False},
}


STATELESS_VERSION = "2026-07-28"
CHECKPOINT = ".claude-checkpoint"
BACKUP = ".claude-checkpoint.prev"


def with_meta(params: dict | None = None, capabilities: dict | None = None,
              version: str = STATELESS_VERSION) -> dict:
    """params carrying the 2026-07-28 envelope in _meta."""
    out = dict(params or {})
    out["_meta"] = {"io.modelcontextprotocol/protocolVersion": version,
                    "io.modelcontextprotocol/clientCapabilities": capabilities or {}}
    return out


def save_ok(server: McpServer, **arguments) -> dict:
    result = server.save(**arguments)
    server.test.assertFalse(result.get("isError"), result)
    return result


def load_full(server: McpServer, **arguments) -> dict:
    return json.loads(server.load(format="full", **arguments))


def warnings_besides_git_ignore(result: dict) -> list:
    """The save's warnings without the one every save in an un-ignored test repository carries."""
    return [w for w in result["structuredContent"]["warnings"] if "git-ignored" not in w and ".gitignore" not in w]


def files_by_path(checkpoint: dict) -> dict:
    return {entry["path"]: entry for entry in checkpoint["modifiedFiles"]}


def read_bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as stream:
            return stream.read()
    except FileNotFoundError:
        return None


def checkpoint_names(folder: str) -> set:
    return {name for name in os.listdir(folder) if name.startswith(CHECKPOINT)}


def is_roots_request(message) -> bool:
    return isinstance(message, dict) and message.get("method") == "roots/list" and "id" in message


# ── Hooks: transcripts and their payloads (sections 11, 15 and 16) ──

HOOK_BOUND_S = 15  # generous: a hook must never hold a session (it aims well under a second)


class Transcript:
    """A Claude Code session transcript in the exact JSONL shape of 2.1.328
    (see real_transcript.jsonl): assistant lines with one tool_use block each, user lines
    with tool_result blocks and a toolUseResult, plus the noise Claude Code writes around them."""

    def __init__(self, cwd: str, session_id: str = "5d2f7c1e-0000-4000-8000-000000000001"):
        self.cwd = cwd
        self.session_id = session_id
        self.lines: list = []
        self._count = 0

    def _next(self, kind: str) -> str:
        self._count += 1
        return f"{kind}_{self.session_id[:8]}_{self._count:04d}"

    def _record(self, kind: str, message: dict, **extra) -> None:
        record = {"parentUuid": None, "isSidechain": False, "type": kind, "message": message,
                  "uuid": self._next("uuid"), "timestamp": "2026-11-30T04:40:50.780Z", "userType": "external",
                  "entrypoint": "sdk-cli", "cwd": self.cwd, "sessionId": self.session_id, "version": "2.1.328",
                  "gitBranch": "main"}
        record.update(extra)
        self.lines.append(json.dumps(record))

    # ── what the user typed, and what Claude Code stores as if it were typed ──
    def prompt(self, text: str, **flags) -> None:
        self._record("user", {"role": "user", "content": text}, promptSource="sdk", **flags)

    def not_prompts(self) -> None:
        """Every user line that is not a real prompt, as a /compact and a resume write them."""
        self._record("user", {"role": "user", "content": "This session is being continued from a previous "
                              "conversation that ran out of context.\nSummary:\nEarlier work."},
                     isCompactSummary=True, isVisibleInTranscriptOnly=True)
        self._record("user", {"role": "user", "content": "<local-command-caveat>The command below was run "
                              "directly in Claude Code.</local-command-caveat>"}, isMeta=True)
        self._record("user", {"role": "user", "content": "<command-name>/compact</command-name>\n"
                              "            <command-message>compact</command-message>\n"
                              "            <command-args></command-args>"})
        self._record("user", {"role": "user", "content": "<local-command-stdout>Compacted (ctrl+o to see full "
                              "summary)</local-command-stdout>"})

    # ── tools ──
    def call(self, name: str, tool_input: dict) -> str:
        tool_id = self._next("toolu")
        self._record("assistant", {"id": self._next("msg"), "type": "message", "role": "assistant",
                                   "model": "claude-opus-5-5", "content": [
                                       {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}],
                                   "stop_reason": "tool_use", "stop_sequence": None},
                     requestId=self._next("req"))
        return tool_id

    def result(self, tool_id: str, content: str, is_error: bool | None, tool_use_result) -> None:
        block = {"tool_use_id": tool_id, "type": "tool_result", "content": content}
        if is_error is not None:
            block["is_error"] = is_error
        self._record("user", {"role": "user", "content": [block]}, toolUseResult=tool_use_result,
                     sourceToolAssistantUUID=self._next("uuid"))

    def bash(self, command: str, exit_code: int = 0, output: str = "ok", answered: bool = True) -> str:
        tool_id = self.call("Bash", {"command": command, "description": "run it"})
        if answered:
            self.bash_result(tool_id, exit_code, output)
        return tool_id

    def bash_result(self, tool_id: str, exit_code: int = 0, output: str = "ok") -> None:
        if exit_code == 0:
            self.result(tool_id, output, False, {"stdout": output, "stderr": "", "interrupted": False,
                                                 "isImage": False, "noOutputExpected": False})
        else:
            text = f"Exit code {exit_code}\n{output}"
            self.result(tool_id, text, True, "Error: " + text)

    def edit(self, tool: str, path: str, ok: bool = True) -> str:
        key = "notebook_path" if tool == "NotebookEdit" else "file_path"
        arguments = {
            "Write": {key: path, "content": "hello\n"},
            "Edit": {"replace_all": False, key: path, "old_string": "a", "new_string": "b"},
            "MultiEdit": {key: path, "edits": [{"old_string": "a", "new_string": "b"}]},
            "NotebookEdit": {key: path, "cell_id": "c1", "new_source": "x = 1", "edit_mode": "replace"},
        }[tool]
        tool_id = self.call(tool, arguments)
        if ok:  # Write and Edit results carry no is_error key at all (seen)
            self.result(tool_id, f"The file {path} has been updated successfully.", None,
                        {"filePath": path, "oldString": "a", "newString": "b", "originalFile": "a\n",
                         "structuredPatch": [], "userModified": False, "replaceAll": False})
        else:
            self.result(tool_id, "<tool_use_error>String to replace not found in file.\nString: a</tool_use_error>",
                        True, "Error: String to replace not found in file.\nString: a")
        return tool_id

    def read(self, path: str) -> str:
        tool_id = self.call("Read", {"file_path": path})
        self.result(tool_id, "     1\tprint('hi')\n", None,
                    {"type": "text", "file": {"filePath": path, "content": "print('hi')\n", "numLines": 1}})
        return tool_id

    # ── noise ──
    def attachment(self, size: int = 2000) -> None:
        self.lines.append(json.dumps({"parentUuid": None, "isSidechain": False, "attachment": {
            "type": "prompt_snapshot", "content": "x" * size}, "type": "attachment", "uuid": self._next("uuid"),
            "timestamp": "2026-11-30T04:40:50.683Z", "cwd": self.cwd, "sessionId": self.session_id}))

    def noise(self) -> None:
        """Line types the hook must skip: unknown types, a compaction boundary, a torn line."""
        self.lines.append(json.dumps({"type": "queue-operation", "operation": "enqueue", "sessionId": self.session_id}))
        self.lines.append(json.dumps({"type": "api-request-shape", "shape": {"tools": ["Bash", "Edit"]}}))
        self.lines.append(json.dumps({"type": "system", "subtype": "compact_boundary", "content": "Conversation compacted"}))
        self.lines.append(json.dumps({"type": "tools-used", "tools": ["Bash"]}))
        self.lines.append('{"type":"assistant","message":{"content":[{"type":"tool_use","id":"torn","na')
        self.lines.append("\x00\xff not json at all")
        self.lines.append("[1, 2, 3]")
        self.lines.append(json.dumps({"type": "user", "message": "a string, not an object"}))

    def save(self, path: str) -> str:
        with open(path, "w", encoding="utf-8") as stream:
            stream.write("".join(line + "\n" for line in self.lines))
        return path


def hook_payload(event: str, transcript_path: str, cwd: str, session_id: str = "5d2f7c1e-0000-4000-8000-000000000001",
                 **extra) -> str:
    payload = {"session_id": session_id, "transcript_path": transcript_path, "cwd": cwd,
               "hook_event_name": {"pre-compact": "PreCompact", "session-start": "SessionStart",
                                   "session-end": "SessionEnd", "stop": "Stop"}[event]}
    payload.update({"pre-compact": {"trigger": "manual", "custom_instructions": None},
                    "session-start": {"source": "compact"},
                    "session-end": {"reason": "other"},
                    "stop": {"stop_hook_active": False}}[event])
    payload.update(extra)
    return json.dumps(payload)


# ════════════════════════════════════════════════════════════════════════════
# 4. Model: the checkpoint file and its versions, the save tool's arguments (SPEC sections 3 and 4)
# ════════════════════════════════════════════════════════════════════════════
# The versions end to end are in TestE2eLoad (11.2).

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

    def test_writes_version_1_which_the_original_server_reads_and_reads_version_2(self):
        doc = make_checkpoint(hooks=cc.HookState(["t1"], {"s": 1}), goal_auto=True).to_json()
        self.assertEqual(doc["version"], 1, "the original Node server refuses any version above 1")
        for version in (1, 2):  # claude-checkpoint 1.0.0 wrote the same fields as version 2
            with self.subTest(version=version):
                cp = cc.Checkpoint.from_json(dict(doc, version=version))
                self.assertEqual(cp.hooks.tool_use_ids, ["t1"])
                self.assertEqual(cp.to_json()["version"], 1)

    def test_refuses_a_newer_version_asking_to_upgrade(self):
        doc = make_checkpoint().to_json()
        doc["version"] = 3
        with self.assertRaises(cc.UnsupportedVersion) as caught:
            cc.Checkpoint.from_json(doc)
        self.assertIn("Upgrade", str(caught.exception))

    def test_names_the_bad_field_of_a_hand_edited_file(self):
        too_deep = deep_nesting(5000, "list")  # quoting it whole would pass the recursion limit
        cases = [("goal", "not an object", "goal"), ("modifiedFiles", [{"path": 3}], "modifiedFiles.path"),
                 ("goal", {"primary": "g", "tasks": [{"description": "t", "status": too_deep}]}, "tasks.status"),
                 ("version", "2", "version"), ("recentCommands", [{"command": "ls", "exitCode": "x"}],
                                                 "recentCommands.exitCode")]
        for key, value, named in cases:
            with self.subTest(key=key):
                doc = make_checkpoint().to_json()
                doc[key] = value
                with self.assertRaises(cc.CheckpointError) as caught:
                    cc.Checkpoint.from_json(doc)
                self.assertIn(named, str(caught.exception))


# ── 4.1 The save tool's arguments: the schema and its validation (SPEC section 3) ──

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
            ({"goal": "g", "tasks": [{"description": "d", "owner": "me"}]}, "tasks[0].owner"),
            ({"goal": "g", "tasks": "do it"}, "tasks"),
            ({"goal": "bad \ud800 surrogate"}, "goal"),
            ({"goal": "g", "decisions": ["nul \x00 inside"]}, "decisions[0]"),
        ]
        for arguments, field_name in cases:
            with self.subTest(field=field_name, arguments=str(arguments)[:60]):
                with self.assertRaises(cc.InvalidArgument) as caught:
                    cc.parse_save_arguments(arguments)
                self.assertTrue(str(caught.exception).startswith(field_name + ":"), str(caught.exception))

    def test_unknown_top_level_arguments_are_ignored_and_named_a_clients_own_silently(self):
        request = cc.parse_save_arguments({"goal": "g", "colour": "red", "wait_for_previous": True})
        self.assertEqual(request.goal, "g")
        self.assertEqual(len(request.ignored), 1)
        self.assertIn("colour", request.ignored[0])
        self.assertNotIn("wait_for_previous", request.ignored[0])
        self.assertEqual(cc.parse_save_arguments({"goal": "g", "wait_for_previous": False}).ignored, [])

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


def _cases_over_limits() -> list:
    """(name, arguments, words the error must contain)."""
    goal = "g"
    return [
        ("goal too long", {"goal": "x" * 501}, ("goal", "500")),
        ("goal missing", {"summary": "s"}, ("goal",)),
        ("goal not a string", {"goal": 42}, ("goal",)),
        ("too many tasks", {"goal": goal, "tasks": [{"description": f"t{i}", "status": "done"}
                                                     for i in range(31)]}, ("tasks", "30")),
        ("task description too long", {"goal": goal, "tasks": [{"description": "d" * 301, "status": "done"}]},
         ("description", "300")),
        ("bad task status", {"goal": goal, "tasks": [{"description": "t", "status": "later"}]}, ("status",)),
        ("tasks not a list", {"goal": goal, "tasks": "all of them"}, ("tasks",)),
        ("unknown task field", {"goal": goal, "tasks": [{"description": "t", "owner": "me"}]}, ("owner",)),
        ("summary too long", {"goal": goal, "summary": "s" * 4001}, ("summary", "4000")),
        ("too many next steps", {"goal": goal, "nextSteps": ["n"] * 21}, ("nextSteps", "20")),
        ("next step too long", {"goal": goal, "nextSteps": ["n" * 501]}, ("nextSteps", "500")),
        ("too many decisions", {"goal": goal, "decisions": [f"d{i}" for i in range(21)]}, ("decisions", "20")),
        ("decision not a string", {"goal": goal, "decisions": [7]}, ("decisions",)),
        ("too many files", {"goal": goal, "modifiedFiles": [{"path": f"f{i}"} for i in range(101)]},
         ("modifiedFiles", "100")),
        ("file note too long", {"goal": goal, "modifiedFiles": [{"path": "a", "note": "n" * 301}]},
         ("note", "300")),
        ("too many commands", {"goal": goal, "recentCommands": [{"command": "ls"}] * 51},
         ("recentCommands", "50")),
        ("command too long", {"goal": goal, "recentCommands": [{"command": "c" * 2001}]}, ("command", "2000")),
        ("command note too long", {"goal": goal, "recentCommands": [{"command": "ls", "note": "n" * 501}]},
         ("note", "500")),
        ("exitCode a string", {"goal": goal, "recentCommands": [{"command": "ls", "exitCode": "1"}]},
         ("exitCode",)),
        ("exitCode a float", {"goal": goal, "recentCommands": [{"command": "ls", "exitCode": 1.5}]},
         ("exitCode",)),
        ("exitCode a bool", {"goal": goal, "recentCommands": [{"command": "ls", "exitCode": True}]},
         ("exitCode",)),
        ("unknown field in a task", {"goal": goal, "tasks": [{"description": "t", "colour": "blue"}]}, ("colour",)),
        ("bad mode", {"goal": goal, "mode": "append"}, ("mode",)),
        ("projectRoot not a string", {"goal": goal, "projectRoot": 5}, ("projectRoot",)),
    ]


class TestE2eSaveValidation(unittest.TestCase):
    def test_arguments_over_a_limit_are_refused_and_nothing_is_written(self):
        ws = Workspace(self)
        server = start_server(self, ws)
        main, prev = os.path.join(ws.repo, CHECKPOINT), os.path.join(ws.repo, BACKUP)
        for phase in ("no checkpoint yet", "after a good save"):
            if phase == "after a good save":
                save_ok(server, **sample_save())
            before = (read_bytes(main), read_bytes(prev))
            for name, arguments, words in _cases_over_limits():
                with self.subTest(phase=phase, case=name):
                    result = server.call("save_session_checkpoint", arguments)
                    self.assertIs(result.get("isError"), True, result)
                    text = result["content"][0]["text"]
                    for word in words:
                        self.assertIn(word, text)
                    self.assertNotIn("structuredContent", result)
                    self.assertEqual((read_bytes(main), read_bytes(prev)), before)
            self.assertFalse({n for n in checkpoint_names(ws.repo) if ".tmp" in n})


# ════════════════════════════════════════════════════════════════════════════
# 5. Redaction: the rules, their examples, the corpora (SPEC section 6)
# ════════════════════════════════════════════════════════════════════════════
# End to end, redaction is checked where a text leaves: answers, logs and the handshake in
# TestE2eSaveAnswer (11.2), transcripts in PreCompactHookTest (11.2), commit messages in
# TestSavesRecordSnapshots (11.1), the command line's output in CommandLineTest (16).

# ── 5.1 The rules and the corpora ──

# Synthetic values only, assembled at run time so that no scanner mistakes this file for a leak.
GHP = "ghp_" + "R8sT2uV4wX6yZ8aB0cD2eF4gH6iJ8kL0mN2o"
AKIA = "AKIA" + "Q3ZB7NXS2KLM4PDW"
SLACK = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
JWT = "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0." + "dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk"
PEM_BODY = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun"


def corpus_names() -> list:
    """The tuned corpora's file names (.ci/corpus), sorted; none where the test file was copied alone."""
    return sorted(n for n in os.listdir(CORPUS_DIR) if n.endswith("_corpus.json")) if os.path.isdir(CORPUS_DIR) else []


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


# The worst inputs for the context rules: a context on every few characters, long spans, tables
# and blocks that never end, quotes that never close.
ADVERSARIAL_CONTEXTS = (
    "password " * 11000, "密码：" * 33000, "| a " * 25000 + "\n| b |\n", "a  " * 33000 + "\nb  c\n", "new A(" * 16000,
    'new A("xk29mPq7zLw4Rt8VbN3c", ' * 3000, "$ cat secret.key\n" * 6000, "password: |\n" * 8000,
    "password: |\n" + "  Xk29mPq7zLw4Rt8VbN3c\n" * 4500, "a\\\n" * 33000, "token=Xk29mPq7zLw4Rt8VbN3cQ\n" * 3500,
    "seed " + "abc " * 25000, "key [" + "1," * 50000, "Cookie: " + "a=Xk29mPq7zLw4Rt8VbN3c; " * 3500, "?a=" * 33000,
    '"\n ' * 33000, '"Xk29mPq7zLw4Rt8VbN3c" + ' * 4000, 'secret = """\n' * 8000, "x login " * 12000, "aKey" * 25000,
    "a,b,password\n" + "x,y,Xk29mPq7zLw4Rt8VbN3c\n" * 4000, "kind: Secret\ndata:\n" + "  a: Zm9vYmFy\n" * 7000,
    'Key("' * 25000, "AuthX(" * 16000, 'htpasswd -b /etc/nginx/.htpasswd reporting "mD24nmHJ9:73i"' * 1750,
    "cf auth admin Cf-Pass-2024x" * 3700, "| user | password |\n|---|---|\n" * 3300,
    "PIN is " * 12000, "pin a " * 16000,  # a credential word and a connector at every word: the dearest for context-credential-word
    # 32 KB, the most the passes that read a text again take (strings folded, prefixes set aside): a named
    # string and a long word (each tail of it an operand, once), joins and names at every word.
    'k = "v"\n' + "a" * 32000, 'k = "v"\n' + "$k + " * 6000, "join " + "a" * 32000, '"name": "a", ' * 2300,
    'k = ["a", ' + '"b", ' * 6000, "<Key>a</Key>" * 2600,
    # A secret's parts, a listed login, an HTML table, a REPL's echo, a YAML block, defaults in code.
    "password in two parts: first half: " * 2800, "ops: admin / Pa$$w0rd!x " * 4000, "<tr><th>Password</th><th>a</th></tr>" * 2500,
    "irb(main):001> key\n=> " * 5000, "key: >-\n" + "  abcdefghijk\n" * 7000, 'os.getenv("API_KEY", ' * 4500, 'passphrase "' * 8000,
    # Read again as written (prose wrapped after a credential word, HTML's inline marks), base64 decoded,
    # cookies as rows, a code for a place, a secret's rest (the passes read 32 KB; the rules all of it).
    "this is a long sentence with many words and the password\n" * 560, "admin PIN <b>790974</b> " * 1300,
    "QWxhZGRpbjpvcGVuIHNlc2FtZQ== " * 1100, "cookies:\n" * 11000, "code for the door " * 5500, "(cont) " * 14000,
    "the rest is " * 8000, "Haustür: 52290669\n" * 5500,
    "ghp_Ab1 " * 14000, "glpat-x1Y2z3 Qw7Lm2Xr5 " * 5000, "ghp_Ab1 " + "-" * 60000 + "aBcDe",  # vendors' tokens cut short, pieces after them
    # Stop 27's readings and contexts: a wrapped value's rest, numbered parts, a list of parts, base64 over
    # lines, a box-drawn table, compound codes, a headless HTML table, a line that ends "… is".
    "password=Xk29!mPq7zLw\nabc1def2 x\n" * 4000, "key\n" + "phần 1: abcd1234\n" * 6000, "tokenParts:\n" + "  - abcd\n" * 12000,
    ("A" * 76 + "\n") * 1300, "┌─a─┬─b─┐\n" + "│ x │ y │\n" * 8000, "Larmkoden " * 9000,
    "access " + "<tr><td>a</td><td>b</td><td>c</td></tr>" * 2500, "password " + "x " * 30 + "is\n" + "pw is\n" * 15000,
    # Stop 28's: a listed login's rows, cookie records, a compound code, reg query's rows, a token below a
    # sentence that names a secret, a PAT's words, one-line definitions.
    "$ cat acessos.txt\n" + "registro.br   clinicasorriso   osaka%6518\n" * 3000, ('{"name": "a", "httpOnly": true, "value": "' + "x" * 60 + '"}, ') * 1500,
    "Türcode " * 12000, "DefaultPassword    REG_SZ    " * 3000, ("The API secret.\n" + "A1b2C3d4E5f6G7h8I9j0K1l2\n") * 2000,
    ("token " + "ab" * 40 + "\n") * 1100, '$k1 = "abcd"; ' * 6000,
    # Stop 37's: a code for a place in every sentence.
    "door code 123456. " * 5500,
    # Stop 42's: beside a redacted value, thousands of different typed passwords (each redacted again
    # wherever it stands) and of machine-made cookies on one line (each judged in its context).
    "password=Xk29!mPq7zLw3\n" + " ".join(f"Ab{n}!xQ{n % 97}z" for n in range(7800)),
    "Cookie: s=Xk29!mPq7zLw3; " + "; ".join(f"c{n}=Zq8Lm2Xr{n:06d}Kp7W" for n in range(3800)),
    # Stop 47's, each once minutes on a kilobyte: quoted values between runs of blanks, a long URL under a
    # name of secrets with no closing bracket, doubled quotes in an SQL insert.
    '"PYTHON_VERSION=3.11.9"\t  ' * 4000, "credentials = {\n" + "https://git.example.org/" + "a/b-c.d" * 14000,
    "INSERT INTO t (a, pin) VALUES ('" + "''" * 50000,
    # and blanks after a key's first line, after a backup card's numbered words (a line of one token in a
    # chat, a mnemonic's layout); literals joined to a redacted one at every word.
    "-----BEGIN RSA PRIVATE KEY-----\n" + "\t  " * 30000, "Write down your recovery phrase:\n 1. apart   4. beach   7. bike\n" + "\t  " * 30000,
    'k = "Xk29mPq7zLw4Rt8VbN3c"' + ' + "Ab1_x9"' * 11000, 'k = "Xk29mPq7zLw4Rt8VbN3cQ"' + " " * 100000 + '"Ab1_x9" x',
    # Stop 56's: a chat where every message gives a password, and where one does and a speaker's lines follow.
    "[10:02] ana: password is Xk29!mPq7zLw\n" * 2700, "[10:02] ana: password is Xk29!mPq7zLw\n" + "[10:03] ana: Rt8Vb#N3c ok\n" * 3800)

# What the test of linear time and the bench both read: 100 KB of what the first rules' words and
# delimiters repeat, then the contexts above.
ADVERSARIAL_INPUTS = (
    "password=" * 11000, "x://" * 25000, "mysql " * 16000, "a: " * 33000, "-u a:" * 20000, '"' * 100000,
    "eyJ" + "a" * 100000, "-----BEGIN PRIVATE KEY-----" * 3000, "password was x1!y2@z3#w4$ " * 4000, "net user a " * 10000,
    "--token " * 12000, "htpasswd" + " -bc 12" * 14000, "(echo a; " * 11000, '<add key="x" ' * 7000, "{a}" * 33000,
    "(a1" * 33000, *ADVERSARIAL_CONTEXTS)


def output_in_a_process(test: unittest.TestCase, code: str, timeout: int, what: str, text: str | None = None) -> str:
    """What Python code printed in a process of its own (sys.argv[1] is the folder of claude_checkpoint.py,
    text its standard input): a hang fails test, saying `what` did not end in timeout seconds, and does
    not stall the suite; an error fails it with the process's stderr."""
    try:
        done = subprocess.run([sys.executable, "-c", code, HERE], input=text, capture_output=True, text=True, encoding="utf-8", timeout=timeout)
    except subprocess.TimeoutExpired:
        test.fail(f"{what} did not end in {timeout} seconds")
    test.assertEqual(0, done.returncode, done.stderr)
    return done.stdout


def outputs_in_processes(test: unittest.TestCase, code: str, timeout: int, what: str) -> list:
    """What Python code printed in as many processes at once as the machine has cores (up to 8), each
    given the folder of claude_checkpoint.py, its share and the number of shares (sys.argv[1:4]); the
    redaction tests that read thousands of texts take their share each and end in a half or less of
    the time on CI's two cores. A hang or an error fails test as in output_in_a_process."""
    count = max(1, min(os.cpu_count() or 1, 8))
    workers = [subprocess.Popen([sys.executable, "-c", code, HERE, str(share), str(count)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, encoding="utf-8") for share in range(count)]
    outputs, deadline = [], time.monotonic() + timeout
    try:
        for worker in workers:
            try:
                out, err = worker.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                test.fail(f"{what} did not end in {timeout} seconds")
            test.assertEqual(0, worker.returncode, err)
            outputs.append(out)
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.communicate()
    return outputs


REDACT_STDIN = "import sys; sys.path.insert(0, sys.argv[1]); import claude_checkpoint as cc; print(cc.redact(sys.stdin.read())[0])"


class TestRedaction(unittest.TestCase):
    def assert_redacted(self, cases: dict) -> None:
        """Each text of cases redacted of every value its tuple lists."""
        for text, secrets in cases.items():
            with self.subTest(text=text[:30]):
                redacted = cc.redact(text)[0]
                for secret in secrets:
                    self.assertNotIn(secret, redacted)

    def assert_redacted_as(self, cases) -> None:
        """Each (text, expected) pair of cases (a dict or pairs): text redacted is exactly expected."""
        for text, expected in cases.items() if isinstance(cases, dict) else cases:
            with self.subTest(text=text[:50]):
                self.assertEqual(cc.redact(text)[0], expected)

    def assert_kept(self, texts: tuple) -> None:
        """Each text left exactly as it is."""
        for text in texts:
            with self.subTest(text=text[:30]):
                self.assertEqual(cc.redact(text)[0], text)

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
        self.assert_redacted_as(cases)

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

    def test_replaces_long_session_credentials_whole(self):
        # Patterns bound their values to stay linear; an accepted value that reaches the bound is
        # followed to its end, bare or quoted, so no tail of a 400-character token is left behind.
        token = "IQoJb3JpZ2luX2VjEXAMPLE/+" * 16 + "=="
        self.assert_redacted_as((
            (f"export A=1 B=two AWS_SESSION_TOKEN={token}; aws s3 ls", "export A=1 B=two AWS_SESSION_TOKEN=«redacted»; aws s3 ls"),
            (f"export SESSION_TOKEN='{token * 5}' && next", "export SESSION_TOKEN='«redacted»' && next"),
            (f"launchctl setenv AWS_SECURITY_TOKEN {token} && x", "launchctl setenv AWS_SECURITY_TOKEN «redacted» && x"),
            (f"sshpass -p {token} ssh host", "sshpass -p «redacted» ssh host")))

    @on_every_core
    def test_stays_linear_on_100_kb_adversarial_input(self):
        # No timing assertion (shared machines): a catastrophic pattern would take minutes, not
        # seconds, and fails by the timeout. The bench mode prints the figures.
        code = textwrap.dedent("""
            import sys
            sys.path.insert(0, sys.argv[1])
            import claude_checkpoint as cc, test_claude_checkpoint as t
            share, count = int(sys.argv[2]), int(sys.argv[3])
            for text in t.ADVERSARIAL_INPUTS[share::count]:
                cc.redact(text)
            print("ended")
            """)
        outputs = outputs_in_processes(self, code, 600, "redaction of the 100 KB adversarial inputs (a pattern that backtracks?)")
        self.assertEqual({"ended"}, {output.strip() for output in outputs})

    def test_stop_28_readings_catch_and_keep(self):
        # The mechanisms that are no rule of the table, each on the text that showed it was missing.
        caught = {
            '$k1 = "AKIA3IW4X8FB"; $k2 = "FRE2UR7L"\n$s1 = "r1nGcun8FrX+c8szFWNA"; $s2 = "9rSPZOfr6DK6mppxAqZ6"\n'
            "Set-AWSCredential -AccessKey ($k1 + $k2) -SecretKey ($s1 + $s2)": ["r1nGcun8FrX+c8szFWNA", "9rSPZOfr6DK6mppxAqZ6"],
            "[09:12] ana: token=aact_prod_000Mzk3tI5K5H5Kuy9AkwClZGZobFc2To4xL\n[09:13] ana: l5M9LLyn2Ljn5nung6gTUULegri9i6==\n":
                ["l5M9LLyn2Ljn5nung6gTUULegri9i6=="],
            '{\n  "name": "ESTSAUTHPERSISTENT",\n  "value": "0.AR8An4QNCm5JshT6kkc6UFAtqcyBYVj9za2-YoT5mBRPqUlUaDR4XLXCdftae8Ycyd2",\n'
            '  "path": "/",\n  "httpOnly": true\n}': ["0.AR8An4QNCm5JshT6kkc6UFAtqcyBYVj9za2-YoT5mBRPqUlUaDR4XLXCdftae8Ycyd2"],
            "Das Passwort für den Jenkins-Admin ist übrigens amor1234!, hab es zurückgesetzt.": ["amor1234!"],
            # continued lines joined: a command over lines, a value its continuation cut
            "$ aws ec2 describe-vpn-connections --vpn-connection-ids vpn-3958baba3156ee471 \\\n"
            "    --query 'VpnConnections[0].Options.TunnelOptions[*].PreSharedKey'\n[\n    \"vG1p0q8_uRz2Xk.T6hWmNlb3F9sY4aQj\"\n]":
                ["vG1p0q8_uRz2Xk.T6hWmNlb3F9sY4aQj"],
            "C:\\Tools> sqlcmd -S SQL-DWH01 -U etl_loader ^\nMore? -P Etl-wnA296jDD^\nMore? v7ZlXRPM! -Q \"EXEC dbo.x\"":
                ["Etl-wnA296jDD", "v7ZlXRPM"],
            "Content-Transfer-Encoding: quoted-printable\n\nHallo, der API-Schl=C3=BCssel lautet: =\n"
            "sFb5V6x4WUeV1gG39AWRsKtWPzTqs8bWuart=\nrqOiWssvee7zJYdgngjKxutxCo7w\nViele Gr=C3=BC=C3=9Fe":
                ["sFb5V6x4WUeV1gG39AWRsKtWPzTqs8bWuart", "rqOiWssvee7zJYdgngjKxutxCo7w"],
        }
        for text, secrets in caught.items():
            with self.subTest(text=text[:40]):
                redacted = cc.redact(text)[0]
                for secret in secrets:
                    self.assertNotIn(secret, redacted)
        for text in ("渡辺です。PayPayのAPIシークレットを共有します。\ngJTrPuc7BrPEv54XW8osC/IgmbrYHgvNarJyXfEnU648\n取り扱いには十分ご注意ください。",):
            self.assertTrue(cc.redact(text)[0].endswith("\n取り扱いには十分ご注意ください。"), "a sentence in Japanese is no secret's rest")
        kept = ("$ cat ~/.ssh/id_ed25519.pub\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFogrkPmSIC0BPwJHNnbbB2V62VJj0H3CzOGFcYb8Wi8 mbauer@KVN-IT-WS03",
                "TOSS_SECRET_KEY={발급받은_시크릿_키}", 'secret = "env(SUPABASE_AUTH_EXTERNAL_KAKAO_SECRET)"',
                "[2024-10-07 08:31:10] INFO  LAPS: password for KVN-OP3-PC07 rotated successfully")
        for text in kept:
            with self.subTest(text=text[:40]):
                self.assertEqual(cc.redact(text)[0], text)
        self.assertFalse(cc.looks_machine_generated("support-KVN-ANAE-PC013"))
        self.assertTrue(cc.looks_machine_generated("VK7JG-NPHTM-C97JM-9MPGT-3V66T"))  # a product key's parts are random

    def test_a_row_is_judged_under_its_own_header(self):
        # Rows are remembered with their table's columns (_secret_cells): the same row under a
        # header that names another column is judged again, not given the first table's answer.
        # (Two texts: in one, a value redacted once is redacted wherever it stands.)
        row = "| Xk29mPq7zLw4Rt8V | a |"
        under_password, under_user = f"| password | user |\n|---|---|\n{row}\n", f"| user | password |\n|---|---|\n{row}\n"
        for _ in range(2):  # the second time, from what was remembered
            self.assertNotIn("Xk29mPq7zLw4Rt8V", cc.redact(under_password)[0])
            self.assertEqual(cc.redact(under_user), (under_user, 0))

    def test_masked_values_are_read_once(self):
        # A run of x, X or dots could be split in exponentially many ways by the masked-value
        # pattern: 57 characters took 20 s. No timing assertion; a regression hangs the suite.
        for value in ("x" * 50 + "pat_CBB", "X" * 30 + "pat_CBB", "." * 4000 + "a", "xxx_" * 500 + "!",
                      "AXXXXXXXXX-" * 2000 + "a", "TXXXXXXXX/" * 2000 + "!"):
            with self.subTest(value=value[:12]):
                self.assertFalse(cc._is_masked_or_public(value))
                cc.redact(f"api_token={value}")
        self.assertIn(cc.REDACTED, cc.redact("api_token=" + "x" * 50 + "pat_CBB9Zq8Lm2Xr5Kp")[0])
        for masked in ("AKIAXXXXXXXXXXXXXXXX", "XXXX/XXXX/XXXX", "sk_test_xxxxxxxx", "gho_****", "AIza...",
                       "TXXXXXXXX/BXXXXXXXX/XXXXXXXXXXXXXXXXXXXXXXXX"):
            self.assertTrue(cc._is_masked_or_public(masked), masked)

    @on_every_core
    def test_corpus_recall_and_keep_rate(self):
        names = corpus_names()
        if not names:
            self.skipTest(".ci/corpus is not here (copied file alone)")
        code = textwrap.dedent("""
            import json, sys
            sys.path.insert(0, sys.argv[1])
            import test_claude_checkpoint as t
            share, count = int(sys.argv[2]), int(sys.argv[3])
            figures = {}
            for name in t.corpus_names()[share::count]:
                recall, keep, missed, mangled = t.measure_corpus(t.redaction_corpus(name))
                figures[name] = [recall, keep, [c["text"][:80] for c in missed], [c["text"][:80] for c in mangled]]
            print(json.dumps(figures))
            """)
        figures = {}
        for output in outputs_in_processes(self, code, 1800, "measuring the tuned corpora"):
            figures.update(json.loads(output))
        self.assertEqual(sorted(figures), names, "every corpus measured once")
        for name, (recall, keep, missed, mangled) in sorted(figures.items()):
            with self.subTest(corpus=name):
                least_recall, least_keep = BELOW_THE_BAR.get(name, (0.97 if name in NEWEST_CORPORA else 0.99, 0.98))
                self.assertGreaterEqual(recall, least_recall, missed)
                self.assertGreaterEqual(keep, least_keep, mangled)

    def test_a_secrets_siblings_in_its_column_or_its_lines_shape_are_redacted_with_it(self):
        # The same column of a table (its header and what says none stay); lines of the same shape
        # around a redacted value, where theirs could be a secret alone.
        cases = {
            "BMC       USER   PASSWORD\nr12-u07   ADMIN  OONEZED0TQ\nr12-u09   ADMIN  Xk29!mPq7zLw3\n": ["OONEZED0TQ"],
            '"Title","Username","Password","URL"\n"iLO r640-07","Administrator","X32B76B1","https://10.20.0.17"\n'
            '"FortiGate","admin","Xk29!mPq7zLw3","https://fw.corp.local"\n': ["X32B76B1"],
            "| env     | MQTT user | MQTT password |\n|---|---|---|\n| staging | gw-stg | tundra+coffee+pepper+cricket |\n"
            "| prod    | gw-prod   | Xk29!mPq7zLw3 |\n": ["tundra+coffee+pepper+cricket"],
            'object ApiKeys {\n    const val MAPS = "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"\n'
            '    const val REVENUECAT = "sk_UrGrzYryQEvHrzM6FkrbFiaev8Ga"\n}\n': ["sk_UrGrzYryQEvHrzM6FkrbFiaev8Ga"],
            "Network Key: 4f8a1c2e9b7d3f6a0e5c8b1d2a9f7e3c\nNetwork Name: OpenThread-1f2a\nPSKc: 7b3e9d1fa5c20846e1b7d9a3c5f08e24\n":
                ["7b3e9d1fa5c20846e1b7d9a3c5f08e24"],
            "<tr><td>Apple ID</td><td>ios@tallyhq.io</td><td><p>Stroopwafel#3</p></td></tr>\n"
            "<tr><td>GitHub</td><td>android@tallyhq.io</td><td><p>ghp_16C7e42F292c6912E7710c838347Ae178B4a</p></td></tr>\n": ["Stroopwafel#3"],
            "Büro Zugänge\nKennwort:        Xk29!mPq7zLw3\nWLAN (KFZ-Gast): c0rrect#7\n": ["c0rrect#7"],
            '"root_keys": {\n    "app_key": { "key": "4C7A19E0B2D85F36A91E0C4B7D28F531" },\n    "nwk_key": { "key": "9E13B7C40A2F68D15B4E7A0C93D2F618" }\n}':
                ["9E13B7C40A2F68D15B4E7A0C93D2F618"],  # the last item of a list has no comma
            # The row of a redacted cell: its other password, whatever its column's name.
            "| node   | ipmi user | ipmi pass    | os root      |\n|--------+-----------+--------------+--------------|\n"
            "| lab-01 | ADMIN     | Xk29!mPq7zLw | R00t-Lab-01? |\n": ["R00t-Lab-01?"],
            "host            user       password              enable\nrtr-bcn-01      rancid     Qm8!vTz2wXr9          EAD8PtEFCS1nsdv6a\n":
                ["EAD8PtEFCS1nsdv6a"],
        }
        for text, siblings in cases.items():
            redacted, _ = cc.redact(text)
            for sibling in siblings:
                self.assertNotIn(sibling, redacted, text)
        kept = {
            "| host | user | password | notes |\n|---|---|---|---|\n| db1 | admin | Xk29!mPq7zLw3 | rotated 2024-11 |\n"
            "| db2 | admin | - | same as db1 |\n| db4 | app | (see vault) | legacy |\n": ["| password |", "| - |", "(see vault)", "admin", "legacy"],
            "DB_PASSWORD=Xk29!mPq7zLw3\nSENTRY_RELEASE=4f2a9c81d7e3b6a05f9e2d1c8b7a6e5f4d3c2b1a\nCACHE_KEY_PREFIX=shop_v2_cache\n"
            "HOST=prod-db-01\n": ["4f2a9c81d7e3b6a05f9e2d1c8b7a6e5f4d3c2b1a", "shop_v2_cache", "prod-db-01"],
            "[Interface]\nPrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=\nAddress = 10.66.0.2/32\n"
            "PublicKey = xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=\n": ["10.66.0.2/32", "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg="],
            'token = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"\ncommit = "9fceb02d0ae598e95dc970b74767f19372d61af8"\n':
                ["9fceb02d0ae598e95dc970b74767f19372d61af8"],
            # An empty line ends a block: the next one's values are not siblings.
            "API_TOKEN=ghp_16C7e42F292c6912E7710c838347Ae178B4a\n\nBUILD_TAG=Rel3ase-Candidate-7\n": ["Rel3ase-Candidate-7"],
            # A row's names stay beside its password: a device's, a room's, a grep's line and name.
            "Device        | Location   | Admin PIN\nPrinter-3F    | 3rd floor  | 737654\n": ["Printer-3F"],
            "ROOM    SSID          KEY\nB12     Guest-B12     maple-otter-51\n": ["Guest-B12"],
        }
        for text, keeps in kept.items():
            redacted, _ = cc.redact(text)
            self.assertIn(cc.REDACTED, redacted, text)
            for keep in keeps:
                self.assertIn(keep, redacted, text)

    def test_a_value_redacted_once_is_redacted_wherever_it_stands_in_the_text(self):
        # The spray's output names the password a rule catches; the command above gave the same one.
        text = ("python3 o365spray.py --spray -U users.txt -p 'cobalt-1977+' --domain example.es\n"
                "[2024-12-01T09:50:45Z] o365spray :: Spraying 318 users with password 'cobalt-1977+'\n")
        redacted, count = cc.redact(text)
        self.assertNotIn("cobalt-1977+", redacted)
        self.assertEqual(count, 2)
        # Only whole values: the same characters inside a longer token are not redacted again as that
        # value (redact() judges such a token on its own: beside a redacted value, one a person typed
        # is redacted too).
        self.assertEqual(cc._redact_again("the password is «redacted»\n\nbuild Xk29!mPq7zLw3 passed\n", 0, ["Xk29!mPq7z"])[1], 0)
        self.assertIn("build Xk29mPq7zLw3 passed", cc.redact("the password is Xk29!mPq7z\n\nbuild Xk29mPq7zLw3 passed\n")[0])

    def test_a_lines_prefix_does_not_hide_what_line_rules_find(self):
        # A file read with Claude Code's numbers, cat -n, grep -n, a diff: the rules that read lines see past them.
        cases = {
            "● Read(/etc/redis/redis.conf)\n  ⎿  Read 3 lines\n     1→bind 0.0.0.0\n     2→requirepass 9e3ktRvg8oyNz4gukKaVzuqsamuZqApV\n"
            "     3→maxmemory 2gb": "9e3ktRvg8oyNz4gukKaVzuqsamuZqApV",
            "    1\tspawn ssh app@10.246.138.250\n    2\texpect \"password:\"\n    3\tsend \"H1ckoryf1ddle693\\r\"\n    4\tinteract":
                "H1ckoryf1ddle693",
            "config/catalog.yaml:2:  token: >-\nconfig/catalog.yaml:3:    38unCAo2TibiQC0Pp1gG9bmN966tfuMCeYrxmXO5\n"
            "config/catalog.yaml:4:    1AwBx58cLUep7hILisbF3hwPjYt035q6xnAVLFku": "1AwBx58cLUep7hILisbF3hwPjYt035q6xnAVLFku",
            # Codex's log of a command (a quote inside quotes written '\\''), Gemini CLI's pane, a JSON tool result.
            "exec\nbash -lc 'sshpass -p '\\''IvoryWinter2#'\\'' ssh pi@10.172.153.64 uptime' in /srv/deploy\n succeeded in 2359ms:\n"
            " 14:02:11 up 3 days": "IvoryWinter2#",
            "│ ✔  Shell pass show infra/router\n│\n│ asdfgh!483?\n│ url: https://10.41.109.102": "asdfgh!483?",
            '{"type": "tool_result", "content": "$ htpasswd -b -c /etc/nginx/.htpasswd admin Sable881^\\nAdding password for user admin"}':
                "Sable881^",
            # Qwen Code's pane with its right border; Codex's event, whose output's first line is a table's header.
            "│ ✓  Shell redis-cli HGETALL partner:credentials        │\n│    1) \"taobao_app_secret\"        │\n"
            "│    2) \"108d28ab96b05ccc4fca71feaecbe61c\"        │": "108d28ab96b05ccc4fca71feaecbe61c",
            '{"type":"item.completed","item":{"type":"command_execution","command":"bash -lc \'cat ops/routers.txt\'",'
            '"aggregated_output":"site        model          admin_pw\\nberlin-1    RB4011         Spree!Ufer_41\\n"}}': "Spree!Ufer_41",
            # A key's body read with numbers: the key rule's class of characters runs over lines.
            "⏺ Read(deploy/keys/ci_ed25519)\n  ⎿  Read 4 lines\n\n     1→-----BEGIN OPENSSH PRIVATE KEY-----\n"
            "     2→b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
            "     3→QyNTUxOQAAACDpQ7rX2mKvL9sTn4WbY8eZc1Hj6uFdA0gNiBoRw5yEqMAAAJjz3hKm898S\n     4→-----END OPENSSH PRIVATE KEY-----":
                "QyNTUxOQAAACDpQ7rX2mKvL9sTn4WbY8eZc1Hj6uFdA0gNiBoRw5yEqMAAAJjz3hKm898S",
            # BuildKit's log: the step's number and the time before each line of a key a RUN echoed.
            '#8 [builder 3/7] RUN echo "-----BEGIN EC PRIVATE KEY-----\n#8 0.212 MHcCAQEEII2WC2NVT2CM4uG4+tTF5qY3nPVKwMvqzjsTGgXOJZG633Fz3uDXkkSy\n'
            '#8 0.212 oAoGCCqGSM49AwEHoUQDQgAEJN9L1QzlGEG6tP7htA56JYb56s8Lg+6CqS/gHPCt\n#8 0.212 -----END EC PRIVATE KEY-----" > /root/.ssh/id_ecdsa':
                "oAoGCCqGSM49AwEHoUQDQgAEJN9L1QzlGEG6tP7htA56JYb56s8Lg+6CqS/gHPCt",
        }
        for text, secret in cases.items():
            with self.subTest(text=text[:30]):
                redacted, _ = cc.redact(text)
                self.assertNotIn(secret, redacted)
                self.assertIn("     1→bind 0.0.0.0" if "redis.conf" in text else text.split("\n")[0][:10], redacted)
        # Lines of a list or a log are no prefixed lines: their text is redacted once, as it stands.
        text = "- rotate the token\n- 2024-09-16 10:42:01 deploy finished\n"
        self.assertEqual(cc.redact(text), (text, 0))

    def assert_gone_lines_kept(self, cases: dict) -> None:
        """Each text's value (cases: text -> value) is gone from what redact() makes of it, and the
        text keeps its lines."""
        for text, value in cases.items():
            with self.subTest(text=text[:30]):
                redacted, _ = cc.redact(text)
                self.assertNotIn(value, redacted)
                self.assertEqual(redacted.count("\n"), text.count("\n"))

    def test_prose_wrapped_before_its_value_is_read_as_one_line(self):
        # A sentence that breaks its line right after the credential word or its connector.
        cases = {
            "Hi Jonas, der neue WireGuard-Zugang für das Lager steht. Dein privater Schlüssel ist\n"
            "W6njWLaf2mqmw8x8CXS3qjVJcxm1seXtLrZk3ifJsBk= – bitte nur in die App importieren.": "W6njWLaf2mqmw8x8CXS3qjVJcxm1seXtLrZk3ifJsBk=",
            "Pablo, ya configuré la centralita. La extensión 305 es tuya, usuario 305 y contraseña\n"
            "Gaudi-Sagrada-305 (cámbiala en el teléfono cuando puedas).": "Gaudi-Sagrada-305",
            "Le tunnel IPsec vers le site de Nantes est de nouveau monté. J'ai changé la clé pré-partagée :\n"
            "la nouvelle est « Loire#Atl4ntique-2024 ». Merci de la reporter.": "Loire#Atl4ntique-2024",
        }
        self.assert_gone_lines_kept(cases)
        # A table's header, a prompt, a commit's subject and a line of code are no sentence that goes on.
        for text in ("ENV     HOST                     ADMIN USER   ADMIN PASSWORD\ndev     db-eu1.svc.cluster.local admin",
                     "$ docker login registry.internal.example.net\nUsername: paula\nPassword:\nWARNING! Your password will be stored",
                     "$ git stash list\nstash@{0}: WIP on main: b840553 refactor token refresh\nstash@{1}: On feat/api-keys: wip",
                     "    125ec5fe (priya.k 2025-12-28 42)     if not token:\n0a8dd93e (priya.k 2025-12-18 43)         raise"):
            with self.subTest(text=text[:30]):
                self.assertEqual(cc.redact(text), (text, 0))

    def test_a_sentence_that_gives_a_secret_gives_its_siblings_too(self):
        # In a line of prose that holds a redaction, what a giving word leads to: a password's shape,
        # a machine's, digits of a PIN's length beside a PIN or after a code's word.
        cases = {
            "El código de la puerta del almacén es 4471 y la contraseña del router Wisla#82, el técnico llega mañana": "Wisla#82",
            "Hej! Apple-ID är lager@lindqvistbygg.se och lösenordet är Xk29!mPq7zLw. Skärmtidskoden är 47285374. /Maja": "47285374",
            "Devir notu: yönetici şifresi +Mango_2010, API anahtarı sk_live_51Jq8wT2eXbKLmN4oPqRsTuVwXyZa.": "+Mango_2010",
        }
        self.assert_gone_lines_kept(cases)
        # A year, a quantity, a line that is no prose: they stay.
        for text, kept in (("the door code is 4471 and the alarm was fitted in 2019 by Securitas, ask Ana", "2019"),
                           ("the door code is 4471 and the alarm gives you 3000 s to leave the building, ok", "3000 s"),
                           ("password=Xk29!mPq7zLw build=Rel3ase-Candidate-7 ok", "Rel3ase-Candidate-7"),
                           ("Пароль от сервера nas-03.dc1.contoso.lan: Xk29!mPq7zLw, логин svc.", "nas-03.dc1.contoso.lan:"),
                           ("hdbuserstore SET BACKUPKEY sqlprd16:30015 SYSTEM .gingerPumpkin17 for the backup job", "sqlprd16:30015")):
            with self.subTest(text=text[:30]):
                self.assertIn(kept, cc.redact(text)[0])

    def test_the_rest_of_a_wrapped_value_is_redacted_with_it(self):
        # A terminal, a log shipper or a mail client broke the value's line: its rest starts the next
        # line, after what the two lines share (an indent, `> `, a log line's prefix).
        cases = {
            "$ docker logs notifier 2>&1 | grep -i mailjet\n2025-10-03 11:02:19 INFO mailjet client init api_secret=eb04821c3dfabfef\n"
            "00bad81f3858fc5d sandbox=false": "00bad81f3858fc5d",
            "> Voici la clé pour l'API :\n> SG.NUpEPFgWmGKr0hbwnbnAVm.qGfXwx1wWP\n> IOBOzfg-si_m6_MDgyFLCZQojOjPaxvMB\n> Merci.": "IOBOzfg-si_m6_MDgyFLCZQojOjPaxvMB",
            "$ heroku config:get DATABASE_URL -a sable-orders\npostgres://un07insc5k8h29:pffa9b6e12aad2f5f6c71d0fed927676e0b\n"
            "77c2c92cd949c1e95bae83ed0a8f9a@ec2-54-170-12-88.eu-west-1.compute.amazonaws.com:5432/dm8t87bp0vt3lb": "77c2c92cd949c1e95bae83ed0a8f9a",
            # A literal's rest in the next literal, a box's next line, the same person's next message under their name.
            'Net::SMTP.start("smtp.office365.com", 587, "corp.example", "billing@corp.example", "pQ7x2VbLm9K" \\\n  "4#R-UtwqEzK", :login)':
                "4#R-UtwqEzK",
            "┌─ Ticket #4410 ─ field \"Stripe key\" ─┐\n│ sk_live_51Jq8wT2eXbKLmN4oPqRsTuVwXyZaBcD │\n│ Fg7Hj8Kl9 │\n└──────────────────────────┘": "Fg7Hj8Kl9",
            "Ola K. 09:14\nhasło do routera: T0run!8q2V-\nOla K. 09:14\nKsiezyc*40917\nOla K. 09:15\nteams uciął": "Ksiezyc*40917",
            # A message of one machine-made token, whatever it holds (`=` inside), is the rest whole.
            "Andrei I.  10:41 AM\nhere's the atlassian token for the sync: ATATT3xFfGF0aXk29mPq7zLw4Rt8VbN3c\nAndrei I.  10:41 AM\n"
            "x2tbhA9N9z4M8TToKp1gtCjzbp1Fm6B6XXqxgSOq_sJIDMj8zwUJK=60BFBQHZ\n(slack cut it)": "x2tbhA9N9z4M8TToKp1gtCjzbp1Fm6B6XXqxgSOq_sJIDMj8zwUJK=60BFBQHZ",
            # Python joins the literals on adjacent lines: the next one is the rest.
            'SIP_TRUNK_PASSWORD = (\n    "QvmTRKeB"\n    "pLsWzNcA"\n)': "pLsWzNcA",
        }
        self.assert_gone_lines_kept(cases)
        # The next line's own name and value, a word, a list's item: no rest.
        for text, kept in (("DB_PASSWORD=Xk29!mPq7zLw\nDB_HOST=db.internal", "DB_HOST=db.internal"),
                           ("  password: Xk29!mPq7zLw\n  port: 5432", "  port: 5432"),
                           ("api_secret=eb04821c3dfabfef\nsandbox mode is off", "sandbox mode is off"),
                           ("Ola K. 09:14\nhasło do routera: T0run!8q2V-\nMarek P. 09:15\nDzięki, działa", "Dzięki, działa"),  # another person's message
                           ('tokens = [\n    "ghp_16C7e42F292c6912E7710c838347Ae178B4a",\n    "release-notes"\n]', "release-notes")):  # a list's next item
            with self.subTest(text=text[:30]):
                self.assertIn(kept, cc.redact(text)[0])

    def test_the_rest_of_a_secret_given_later_is_redacted(self):
        # A secret sent in pieces: after a redacted first piece, a later line's "the rest is …", "append …",
        # "second email: …", "nog … erachter", "Fortsetzung: …", "il resto è …", "… is the end of it".
        cases = {
            "[09:12] Mira: wachtwoord nas: KoffieKan81$\n[09:13] Mira: oh en dan nog #44Qz erachter": "#44Qz",
            "> user: the vpn password is Brq!7xL\n> assistant: Is that all of it?\n> user: append 9-1173": "9-1173",
            "Twilio auth token, first email: 7c1e9a0f3b5d2e84\nSecond email (today): 4a6c8e0b2d1f3a5c": "4a6c8e0b2d1f3a5c",
            "(1/2) Ihr Kennwort: 8Kw3-Pq7z\n(2/2) Fortsetzung: -Ld2x": "-Ld2x",
            "[10:41] Sara: la password del NAS è Rondine!84\n[10:41] Sara: scusa, il resto è gabbiano77": "gabbiano77",
            "user: token is ghp_Qm8vLx2Rt7Kp4Nz9Wc3Yb6Hd1Fs5Ga0J\nuser: sorry, Tz83kq is the end of it": "Tz83kq",
        }
        for text, rest in cases.items():
            with self.subTest(text=text[:30]):
                self.assertNotIn(rest, cc.redact(text)[0])
        for text in ("the password is Xk3mPq8Rt!\nthe rest of the team meets at 10:30 tomorrow",
                     "token: ghp_Qm8vLx2Rt7Kp4Nz9Wc3Yb6Hd1Fs5Ga0J\nsecond part: deploy the frontend",
                     "the rest is +49 151 01863360, call after lunch"):
            with self.subTest(text=text[:30]):
                redacted = cc.redact(text)[0]
                self.assertIn(text.split("\n")[-1], redacted)

    def test_the_first_part_of_a_secret_sent_in_pieces_is_redacted(self):
        # The piece no rule knows alone: the value a credential word gave above a redacted rest (two plain
        # words, a truncated token), and the value after a first part's words near a redacted rest.
        cases = {
            "user: the db password is glacier moraine\nuser: sorry, it ends with Xq7-pLm2#r appended, no space": "glacier moraine",
            "user: token is glpat-ojpANGe\nassistant: That token looks truncated. Paste the rest?\nuser: sorry, 1m5XbWjYdEonv is the end of it": "glpat-ojpANGe",
            "[10:41] Luca: la password nuova è $SunshineS\n[10:41] Luca: scusa, il resto è 7Hq2-Lm9w": "$SunshineS",
            "tweede helft van het wachtwoord: Xk9-pq2LmR\n(eerste helft begint met Pha5MFsjoC, die zet je ervoor)": "Pha5MFsjoC",
            "(1/2) Ihr Zugangscode: 7Hq2-Lm9w\n(2/2) Fortsetzung: -Zt4x": "7Hq2-Lm9w",
        }
        for text, first in cases.items():
            with self.subTest(text=text[:30]):
                redacted = cc.redact(text)[0]
                self.assertNotIn(first, redacted)
                self.assertNotIn(text.split()[-1] if "Zt4x" in text else first, redacted)
        pieces = {  # neither piece a secret alone: a credential word's value and a later line's rest
            "[09:41] ingrid: passordet til NTB-ftp er bicycl\n[09:41] ingrid: sorry, resten er e04bicycle!": ["bicycl", "e04bicycle!"],
            "דני: הסיסמה ל-Wowza מתחילה ב TrykkLo\nדני: וממשיכה foten2019! (בלי רווח)": ["TrykkLo", "foten2019!"],
            "Олег: ключ від Mux, перша половина: Xq7-pLm2#rT9vK2\nОлег: друга: Qcb+DP7N8o2CLOMxusgzZr": ["Xq7-pLm2#rT9vK2", "Qcb+DP7N8o2CLOMxusgzZr"],
            "Marco: la password del pannello è Xq7-pLm2#r\nMarco: scusa, continua con hOc34n#64": ["Xq7-pLm2#r", "hOc34n#64"],
        }
        for text, secrets in pieces.items():
            with self.subTest(text=text[:30]):
                redacted = cc.redact(text)[0]
                for secret in secrets:
                    self.assertNotIn(secret, redacted)
        self.assertIn("the password is in the vault", cc.redact("the password is in the vault\nthe rest is 7kQ2-xWm!")[0])
        kept = ("the password is Xk3mPq8Rt!\nthe first part: deploy the frontend at 10:30",
                "the token policy is strict\nthe rest is documented in docs/auth.md")
        for text in kept:
            with self.subTest(text=text[:30]):
                redacted = cc.redact(text)[0]
                self.assertIn("deploy the frontend" if "frontend" in text else "the token policy is strict", redacted)

    def test_a_wallets_mnemonic_that_no_word_names_is_redacted(self):
        # Exactly 12, 15, 18, 21 or 24 small words in a run, wherever a tool printed it or a chat gave it.
        phrase = "credit bounce penalty pass teach example priority grit dirt village planet slide"
        cases = (f"小王: 后12个：{phrase}\n小王: 导入完记得删聊天记录",
                 f"$ node -e \"console.log(w.address, w.mnemonic.phrase)\"\n0x836C6e8Bd5287691F1e543a7FFC2c48876D469c3 {phrase}",
                 f"| wallet | chain | seed |\n|---|---|---|\n| qa-1 | sepolia | {phrase} |",
                 f"This is your mnemonic (seed phrase). Write it down.\n\n\n{phrase} {phrase}\n\n\nPress any key")
        for text in cases:
            with self.subTest(text=text[:30]):
                redacted = cc.redact(text)[0]
                self.assertNotIn("penalty pass teach", redacted)
                self.assertIsNotNone(cc.find_secret(text))
        kept = ("this line has twelve words but none of them are short enough here today",
                "apt install git curl wget unzip make cmake ninja clang lldb gdb strace ltrace",  # 13 words: no mnemonic's count
                "the quick brown fox jumps over the lazy dog and then runs away from the farmer",
                f"{phrase} {phrase.split()[0]}")  # 13 words in a run
        self.assert_kept(kept)

    def test_a_code_for_a_place_that_a_sentence_gives_is_redacted(self):
        # Six to eight digits in a sentence that, with the one before it, names a code and a place it opens.
        cases = {"El código de la alarma del almacén es 551093 y el de la puerta de carga 8830127. Gracias!": ("551093", "8830127"),
                 "Nøklene ligger i safen bak resepsjonen. Koden er 730418, ikke del den.": ("730418",),
                 "[08:02] Ana: qual é o código do portão da garagem mesmo?\n[08:03] Léo: 2281934 e depois aperta o botão verde": ("2281934",),
                 "Alarm panel in the workshop: the installer code, 904417, then press OFF.": ("904417",),
                 "Tablets in de kantine ontgrendelen? Nee: unlock them with 613308 and leave them on the charger.": ("613308",)}
        for text, codes in cases.items():
            with self.subTest(text=text[:30]):
                redacted = cc.redact(text)[0]
                for code in codes:
                    self.assertNotIn(code, redacted)
                self.assertIsNotNone(cc.find_secret(text))
        kept = ("The door controller of building 4 answers on port 502, ticket 4821937 tracks the code change.",
                "Gate code rollout: the new keypads ship on 20250304 and cost 150 EUR each, order 73311902.",
                "The keypad's firmware 2.4.1 fixes the door code timeout; call +49 30 901820 for the installer.",
                "Door 7 is code-locked. Our office is at Hauptstraße 12, 10115 Berlin, phone 030 2284710.",
                "Error code 100054 from the alarm service: see the runbook, section 4.")
        self.assert_kept(kept)

    def test_a_password_a_sentence_gives_after_many_words_is_redacted(self):
        # After a word for password, however many words come between, or in the sentence after it.
        cases = {"Das Passwort, das mir Jonas am Montag im Büro gegeben hat, war Zugspitze&77, geht aber nicht mehr.": "Zugspitze&77",
                 "Quick q: what's the shared password for the print server again? I tried Kettle$2024 but no luck": "Kettle$2024",
                 "[10:02] ana: alguém sabe a senha do roteador do depósito?\n[10:03] rui: acho que a última era Cajueiro#58, testa aí": "Cajueiro#58",
                 "Hasło, które dostałam od Tomka w piątek rano przez telefon, to Wisła*1983 — zmień je po pierwszym logowaniu.": "Wisła*1983"}
        for text, password in cases.items():
            with self.subTest(text=text[:30]):
                self.assertNotIn(password, cc.redact(text)[0])
                self.assertIsNotNone(cc.find_secret(text))
        kept = ("Password resets are tracked in ticket#4471 and RFC 4086 explains why.",
                "The password policy moved to Release#12; see the wiki page Security&Compliance 2024 for details.",
                "Password reset done.\n\nThe next build (Build#4471) shipped with fix #2219 and 10+ tests.",
                "Your password must contain 12+ characters, one of !#$%&*, and a digit (see NIST SP 800-63B).")
        self.assert_kept(kept)

    def test_a_password_printed_in_words_and_parts_named_in_hindi_are_redacted(self):
        cases = {"$ cat /etc/restic/password\ngirasoles azules de mi abuela\n$ restic -r /srv/backup snapshots": "girasoles azules",
                 "$ secret-tool lookup service wifi ssid Granja-Norte\nlluvia fina sobre el trigal\n$ ": "lluvia fina",
                 "Amit: Zoho token do hisso mein — pehla: 1000.b7Kq2Lm9Xw4\nAmit: doosra: Zr8Pn3Vt6Yh1Qe5 ... jod dena": "Zr8Pn3Vt6Yh1Qe5",
                 "Amit: token pehla hissa — zk_Qm4Rt8Wn2Lp6Xv9Bc3Hd7\nAmit: baaki — Nf5Gj1Ks8Ty4Pz0Ua6": "Nf5Gj1Ks8Ty4Pz0Ua6"}
        for text, secret in cases.items():
            with self.subTest(text=text[:30]):
                self.assertNotIn(secret, cc.redact(text)[0])
        kept = ("$ cat /etc/restic/password\ncat: /etc/restic/password: No such file or directory\n$ ",
                "$ pass show web/forge\nError: web/forge is not in the password store.\n$ ",
                "$ cat secrets/README\nthis folder holds the sealed files only\n$ ",
                "$ op read op://Infra/vpn/password | sudo openconnect --user=dlee --passwd-on-stdin vpn.example.org\nConnected as 10.212.4.81\n$ ",
                "$ pass show infra/registry | docker login --username ci --password-stdin registry.example.org\nLogin Succeeded\n$ ",
                "I had the baki at lunch; the doosra ball in cricket spins the other way.")
        self.assert_kept(kept)

    def test_paths_remotes_and_generic_types_near_secret_words_are_kept(self):
        kept = ("$token = (Get-Secret -Name 'ForgeToken' -Vault Studio -AsPlainText)\nStart-Upload -Token $token -Path 'D:\\Deliveries\\KAIROS\\outgoing'",
                "SECRET_KEY=$(aws configure get aws_secret_access_key --profile ingest) rclone sync /mnt/out :s3:landing-bucket --s3-env-auth",
                "pub struct SecretKeyring {\n    keys: HashMap<KeyId, SecretBox<[u8; 32]>>,\n}")
        self.assert_kept(kept)

    def test_wifi_joins_joined_keyword_arguments_and_corrected_passwords_are_redacted(self):
        cases = {'import network\nsta = network.WLAN(network.STA_IF)\nsta.connect("Shamba-Kusini", "ndizi-tamu-sokoni")': "ndizi-tamu-sokoni",
                 '_parts = ["rk-live-Tq8ZmW2kLxhNv7Qp", "V7cNp3RgYh5JdKe0sUa9BfQi",\n          "Wo1Xz6Lm4Pn8Rt2Yc5"]\nclient = Api(api_key="".join(_parts))': "Wo1Xz6Lm4Pn8Rt2Yc5",
                 "Joao: the pw for the feed scale UI is Balanca2023!\nJoao: sorry, wrong year, it's 2024 → Balanca2024!": "Balanca2024!",
                 "Bonjour, le boîtier du portail électrique est verrouillé, code 803317, merci de ne pas le diffuser.": "803317",
                 "Habari, nambari ya siri ya mlango wa stoo ni 731926. Asante.": "731926"}
        for text, secret in cases.items():
            with self.subTest(text=text[:30]):
                self.assertNotIn(secret, cc.redact(text)[0])
        kept = ('WiFi.begin(WIFI_SSID, WIFI_PASSWORD);\nwlan.connect("Guest", "")',
                'sort_key = "".join(cols)\nlabel = Label(text="".join(parts))',
                "The pw reset flow was fixed.\n\nRelease notes: the kettle$ fix ships in 2.4 → build 2024!")
        self.assert_kept(kept)

    def test_a_secret_built_by_a_shells_printf_or_a_template_of_literals_is_redacted(self):
        cases = {"export TTN_API_KEY=\"$(printf '%s%s' 'NNSXS.4QBPR47MWA3KE3SI88BKCCMUJFID6GP6VIXP3.4UP' '83TTEYU6HDNE8SK7FA6KU35J6QA6UYTQNVU44P48GO36JCJOGJ')\"": ("83TTEYU6HDNE8SK7",),
                 'const MAIL_KEY = `${"SG"}.${"Q3wtLKwB3VhTo8ObZgJV4z"}.${"s0xUrWv3ZNJN0SF53fQwgkcPGVtu4dBnSm1lkm9mB-"}`;': ("Q3wtLKwB3VhTo8Ob", "s0xUrWv3ZNJN0SF5")}
        self.assert_redacted(cases)
        kept = ("printf '%s%s\\n' \"$first\" \"$second\"", 'const label = `${"Hello"}, ${"world"}`;', "printf '%s %s' 'build' 'passed'")
        self.assert_kept(kept)

    def test_a_password_sent_in_two_messages_neither_of_which_reads_as_one_is_redacted(self):
        cases = {"[18:02] Priya: nas admin pw, pasting in two bits because of the preview: Monsoon\n[18:02] Priya: _Harbour#88\n[18:03] Priya: join them": ("Monsoon", "_Harbour#88"),
                 "Ola 10:41  hasło do panelu: Zielona-P\nOla 10:41  lanta!2023 (reszta się ucięła)": ("Zielona-P", "lanta!2023")}
        self.assert_redacted(cases)
        kept = ("[09:14] Ana: the token expired: yesterday\n[09:15] Ana: renewed2",
                "Ana: password policy: Strict\nAna: done",
                "[10:02] Tom: which key: Primary\n[10:02] Tom: Secondary (the old one)")
        self.assert_kept(kept)

    def test_a_passphrase_of_three_words_before_a_note_in_brackets_is_redacted(self):
        text = "Hoi Sanne, het wachtwoord voor de klantscreening is koekje paars nevel (alles kleine letters). Groetjes"
        self.assertNotIn("koekje paars nevel", cc.redact(text)[0])
        for kept in ("the password is stored somewhere safe (see wiki)", "The admin password is reset weekly (by cron)"):
            with self.subTest(text=kept[:30]):
                self.assertEqual(cc.redact(kept)[0], kept)

    def test_the_other_logins_of_a_list_of_user_and_password_pairs_are_redacted(self):
        # One pair of the list was redacted: the others of its line's shape are logins too.
        cases = {"Edit suite 3 (Lyon) — accès\n- Baselight DB: grading_lyon / Printemps2011.\n- Boxx web UI: admin / 552918\n- Render node: render / v3rt-Sapin77":
                 ("Printemps2011", "552918", "v3rt-Sapin77"),
                 "<tr><td>Core switch</td><td>10.4.0.2</td><td>sw-admin / Kastanje1907.</td></tr>\n<tr><td>Edge switch</td><td>10.4.0.3</td><td>ops / K4rpe4l91.</td></tr>":
                 ("Kastanje1907", "K4rpe4l91"),
                 "<dl>\n  <dt>Projector web UI</dt><dd>manager / Spring1994%</dd>\n</dl>": ("Spring1994%",)}
        self.assert_redacted(cases)
        kept = ("- DB: admin / «redacted»\n- Env: staging / Production\n- Git: main / develop2\n- Build: ci / release",
                "- Repo: team / project-x\n- Path: src / main.py")
        self.assert_kept(kept)

    def test_keys_under_an_authenticator_line_in_a_call_and_in_files_shown_are_redacted(self):
        cases = {"Can't scan the QR? Set up the authenticator by hand with this key:\n    MZXW 6YTB OI3D EZLS NB2H I4DT": "MZXW 6YTB",
                 "val signer = Credentials.create(\"0x3c8a51f0b27de94c6a1f08e53b7d29c4a6e1f0b3d85c27a94e6f1b0c3a7d5e28\")": "3c8a51f0b27de94c",
                 "Export private key → Account 2 (treasury)\n0x7e21c9a4f05b38d6e1a2c7f94b03d58e6a1f2c9b7d40e83a5c6f19b2e7d04a31\nNever share it.": "7e21c9a4f05b38d6",
                 "==> /etc/openvpn/client/porto.auth <==\nines.alves\nRibeira-Douro55\n": "Ribeira-Douro55",
                 "● Read(infra/.vault_pass)\n  ⎿  Read 1 line\n     1→Falcao-Azul-Tejo-2019": "Falcao-Azul-Tejo-2019",
                 "Jun 12 05:00:03 gw-07 relay[611]: using RELAY_TOKEN=8c41f0a9d2e7b5c3\n                                     61fa09be47d2c8e5 (from /etc/relay/env)": "61fa09be47d2c8e5"}
        for text, secret in cases.items():
            with self.subTest(text=text[:30]):
                self.assertNotIn(secret, cc.redact(text)[0])
        kept = ("Scan the QR code with your authenticator app, then type the six digits:\n  code from the app\n",
                "2FA backup notes\nTHIS DOES NOT WORK HERE",
                "Token.balanceOf(\"0x3c8a51f0b27de94c6a1f08e53b7d29c4a6e1f0b3d85c27a94e6f1b0c3a7d5e28\")",
                "==> /etc/openvpn/client/porto.conf <==\nclient\ndev tun\nauth-user-pass /etc/openvpn/client/porto.auth\n",
                "● Read(docs/token-rotation.md)\n  ⎿  Read 2 lines\n     1→# Rotating tokens\n     2→Run the rotation job weekly.")
        self.assert_kept(kept)
        indented = "                                     continuing the message here"  # a log's next line of words is no rest
        self.assertIn(indented, cc.redact("Jun 12 05:00:03 gw-07 relay[611]: using RELAY_TOKEN=8c41f0a9d2e7b5c3\n" + indented)[0])

    def test_passwords_named_in_danish_hebrew_and_tagalog_and_on_the_line_under_are_redacted(self):
        cases = {"Hej Jonas, min bruger er lhan og koden er Gran*4471fyr — virker den hos dig?": "Gran*4471fyr",
                 "Hvis Chromeleon låser: admin-kodeordet står i skuffen: Tulip?2093mast (ja, jeg ved det)": "Tulip?2093mast",
                 "her er API-nøglen til integrationen: rk_Wq3nVb7Kp2Rt9Xs4Lm6Yd8Hc . Mvh Freja": "rk_Wq3nVb7Kp2Rt9Xs4Lm6Yd8Hc",
                 "- Koden til serverrummet er ændret til 604218\n- HPLC 2 kører natten over": "604218",
                 "רונית: הטוקן של ה-API, חלק ראשון: Zq8Lm2Xw4Rt7Yp9Kd3Hs\nרונית: חלק שני: Vb6Nc1Mf5Gj8Qa2Wu4E": "Vb6Nc1Mf5Gj8Qa2Wu4E",
                 "Ate, yung password ng wifi sa bodega ay mangga2207 pero mabagal po.": "mangga2207",
                 "passphrase of the nightly restic repo (backup02, LIMS dumps) is:\nlantern quarry velvet thimble orchid\nkeep it on paper": "lantern quarry velvet",
                 "root@grid04:~# tr '\\0' '\\n' < /proc/3121/environ | grep ORA\nORAPW=Kastanje1907*": "Kastanje1907*",
                 "> config('database.connections.pgsql.password')\n= \"Olmo@7712vento\"\n> ": "Olmo@7712vento",
                 'Das Passwort, das mir Lena am Freitag am Telefon gesagt hat, war "Watzmann83", klappt aber nicht.': "Watzmann83"}
        for text, secret in cases.items():
            with self.subTest(text=text[:30]):
                self.assertNotIn(secret, cc.redact(text)[0])
        kept = ("Passphrase requirements:\nfour words or more please",
                "The passphrase policy:\nuse at least four random words\n",
                "Audit: staff shared the Wi-Fi passphrase in chat. Recommendation: move the SSID to WPA2-Enterprise with per-user accounts.",
                'Change stream resume token: {"_data": "8263A1F0B2000000012B022C0100296E5A1004"}',
                "Koden ligger i repoet, se README.md for detaljer.",
                "> config('app.password_timeout')\n= 10800\n> ",
                "Ay, the password reset form is broken again",
                'Password reset for "Server2019" was done by "jsmith01" today; the password field "input2" is required.')
        self.assert_kept(kept)

    def test_a_keystore_in_base64_under_a_p12_name_and_an_opsgenie_key_are_redacted(self):
        body = "MIIK3m8vRtLp2QwXz7Yb4Nc6Hd1Fg9Jk0Ls5Ua3Ve8Wi2Ox7Pq4Rr6Ss1Tt9Uu3Vv5Ww8Xx2Yy4Zz7Aa1Bb6Cc0Dd5Ee9Ff3Gg=="
        for text, secret in ((f"RELEASE_CERT_P12_BASE64={body}", body[:24]), (f"SIGNING_PFX: {body}", body[:24]),
                             ("opsgenie:\n  genie_key: 4d1c8b0e-7a2f-4e61-9b3d-58f0c2a7e914\n", "4d1c8b0e-7a2f")):
            with self.subTest(text=text[:30]):
                self.assertNotIn(secret, cc.redact(text)[0])
        for kept in ("P12_FILE=./certs/release.p12", "pfx_path: C:\\certs\\site.pfx", "opsgenie:\n  genie_key: ${OPSGENIE_KEY}\n"):
            with self.subTest(text=kept[:30]):
                self.assertEqual(cc.redact(kept)[0], kept)

    def test_the_members_of_a_collection_under_a_secrets_name_are_redacted(self):
        cases = {'WEBHOOK_SIGNING_KEYS = {\n    "rave": base64.b64decode("q7Hn2Lw9Xz4Rt8Vb3Mc6Pd1Fg5Jk0Ls8Ua2Ve7Wi3Ox9Pq4Rr6Ss1Tt5Uu8Vv2Ww"),\n    "veeva": "Zt6Yp1Qa8Wx3Ec5Rv7Tb2Nm4Kl9Jh0Gf",\n}': ("q7Hn2Lw9Xz4Rt8Vb", "Zt6Yp1Qa8Wx3Ec5R"),
                 "const partnerApiKeys = [\n  'Kd8Fj3Lm6Np2Qr9St4Vw7Xy1Za5Bc0De',\n  process.env.EXTRA_TOKEN,\n];": ("Kd8Fj3Lm6Np2Qr9S",),
                 "local admin on the lab PCs is still \".\\labadmin\" / Orchid&2207delta, change it before the audit": ("Orchid&2207delta",)}
        self.assert_redacted(cases)
        kept = ('SECRET_NAMES = [\n    "stripe-live-secret-key-2024",\n    "prod/db/password",\n]',
                'TOKENS = {\n  "gh": "${GITHUB_TOKEN}",\n}',
                'CACHE = {\n  "etag": "Xk29mPq7zLw3aB9dE2fGhQ8r",\n}',
                '<SubjectData SubjectKey="5e9e5c59-4f25-4613-a170-3ee4e5063022" mdsol:SubjectKeyType="SubjectUUID">',
                '{"PartitionKey": "orders", "RowKey": "0f8fad5b-d9cb-469f-a165-70867728950e"}')
        self.assert_kept(kept)

    def test_a_vendors_prefix_before_hex_an_f_strings_parts_and_a_wpa_pass_are_redacted(self):
        cases = {"$ vault kv get secret/sms\n====== Data ======\nKey                 Value\n---                 -----\nsms_gateway_key     atsk_9c41e7a2b05f8d36c1e4a7b92d0f5e3c8a61b4d7e2f09c3a5b8d1e6f4a7c2b90": ("atsk_9c41e7a2b05f8d36",),
                 'TG_HEAD = "6120458893:AAq9Zt3Lm7Xw"\nTG_TAIL = "2Rt8Yp5Vb4Nc1Fd6Gh0Jk9Lz3Qe"\nURL = f"https://api.telegram.org/bot{TG_HEAD}{TG_TAIL}/sendMessage"': ("6120458893:AAq9Zt3Lm7Xw", "2Rt8Yp5Vb4Nc1Fd6"),
                 "for the screening room wifi the WPA2 pass is tundra-mango-pelican — put it on the card": ("tundra-mango-pelican",),
                 "[mira@lab-ws07 ~]$ secret-tool lookup service labdb user mira\nquartz-heron-maple-drum[mira@lab-ws07 ~]$ ": ("quartz-heron-maple-drum",)}
        self.assert_redacted(cases)
        kept = ("request req_9c41e7a2b05f8d36c1e4a7b92d0f5e3c failed with 503, retrying",
                'name = "Ada"\ngreeting = f"Hello {name}, welcome back"',
                "the guest pass is valid until Friday")
        self.assert_kept(kept)

    def test_codes_under_what_they_open_and_in_sentences_that_say_so_are_redacted(self):
        cases = {"BUILDING        FLAT   LOCKBOX   GATE\nHarbour View    3A     482917    730164\nHarbour View    6D     519304    n/a\n": ("482917", "730164", "519304"),
                 "| 棟 | 部屋 | オートロック |\n|---|---|---|\n| 青葉 | 101 | 604218 |\n| 青葉 | 102 | 771935 |\n": ("604218", "771935"),
                 "| Дом | Код домофона |\n|---|---|\n| Лесная 12 | 238461 |\n": ("238461",),
                 "| 동 | 현관 비밀번호 |\n|---|---|\n| 201동 | 580317 |\n": ("580317",),
                 "palvelinhuoneen ovikoodi on nyt 560218, kerro vain tiimille": ("560218",),
                 "Depo bariyerinin kodu 731904, kimseye verme.": ("731904",),
                 "la alarma del local la desactivás con 926413 antes de entrar": ("926413",),
                 "通用口のオートロック解錠番号: 318842": ("318842",),
                 "- key box 4B: 671209\n- Tape storage cage: 902645 + badge from security\n": ("671209", "902645"),
                 'PARTNER_KEYS = {\n    "acme": "Qm8tZr2LxW4nVb7Kc1PdYs9",\n    "globex": "hT5wE3rN8qL2mZ6xC9vB1kJ",\n}\n': ("Qm8tZr2LxW4nVb7Kc1PdYs9", "hT5wE3rN8qL2mZ6xC9vB1kJ"),
                 'val webhookSecret = StringBuilder()\n    .append("7c3e91ab04d5f26")\n    .append("e8b0a4c7d19f35b")\n    .toString()\n': ("7c3e91ab04d5f26", "e8b0a4c7d19f35b")}
        self.assert_redacted(cases)
        self.assertIn("StringBuilder()", cc.redact('val webhookSecret = StringBuilder()\n    .append("7c3e91ab04d5f26")\n    .append("e8b0a4c7d19f35b")\n')[0])
        kept = ("FLIGHT   GATE   STAND\nBA417    B12    204\nLH903    A7     118\n",
                'CACHE_KEYS = {\n    "profile": "user:profile:v2",\n    "feed": "user:feed:v5",\n}\n',
                'ARTIFACT_KEYS = {\n    "linux": "8c1f0e3a9b7d2c4e6f8a0b1c3d5e7f90",\n    "mac": "1d3f5a7c9e0b2d4f6a8c0e1f3b5d7a9c",\n}\n',
                "der Fehler hat den virhekoodi 404112 auf Finnisch gemeldet",
                "  apiSecret: mustEnv(\"MATTERPORT_TOKEN_SECRET\"),",
                "body: JSON.stringify({ client_secret: secret.value! }),",
                "#define HB_ERR_BAD_PASSWORD      0x8001\n#define HB_ERR_TOKEN_EXPIRED     0x8002",
                "binaryData:\n  key-icon.svg: PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIHZpZXdCb3g9IjAgMCAyNCAyNCI+PC9zdmc+",
                "$ sha256sum VOL008.7z VOL008.7z.par2\nfe01e680d81755f8020aac1ff599bdf800d4c0f3deac78a18cf055529c644f26  CASE_PROD_VOL008.7z\n"
                "17c6ba0451e652be63e93ca274697f3bd0b66e9a0951f90ae601b4aa5cedb39c  CASE_PROD_VOL008.7z.par2\n")
        self.assert_kept(kept)

    def test_cookies_a_prose_cookie_list_labelled_parts_and_a_login_at_a_host_are_redacted(self):
        cases = {">>> sess.cookies.get_dict()\n{'PORTALSESSION': '9b2e71c4d05fa83e6c1b94d7a02f5e8c31d6b0a9', 'lang': 'de'}": ("9b2e71c4d05fa83e6c1b94d7a02f5e8c31d6b0a9",),
                 "ok here is the cookie from my browser: CaseSession=Zk3Wq8Lm2Rt5Yp9Xc4Vb; EcfToken=Hq7Nw2Kd9Lp4Tz6Rb3Xm8Vc5Jf1Gs0Ye": ("Zk3Wq8Lm2Rt5Yp9Xc4Vb", "Hq7Nw2Kd9Lp4Tz6Rb3Xm8Vc5Jf1Gs0Ye"),
                 "[09:14] Petr: heslo k NAS ti pošlu po částech\n[09:14] Petr: první půlka: Vx7!kRq2\n[09:15] Petr: a zbytek: Lm9#tZ4w\n": ("Vx7!kRq2", "Lm9#tZ4w"),
                 "[WA] Aina: kata laluan VPN: Bahagian 1: Ht5_wQ9zLe\n[WA] Aina: Bahagian 2: 3pK!x8Rv2N\n": ("Ht5_wQ9zLe", "3pK!x8Rv2N"),
                 "SMS 1/2: your new VPN password begins Tr0ut-Ri\nSMS 2/2: ...and ends ver2024 - change it today": ("Tr0ut-Ri", "ver2024"),
                 'var key = @"Gm4~TqP-Zx8_Lw2VbN7" +\n          @"Rk5sYd3QaW9mXe6TcH1";': ("Gm4~TqP-Zx8_Lw2VbN7", "Rk5sYd3QaW9mXe6TcH1"),
                 'retry 2: connect to broker:Wq8-zKx_3LmT9vRb2NcY7pHd@mq.ops.internal:5671 refused': ("Wq8-zKx_3LmT9vRb2NcY7pHd",)}
        self.assert_redacted(cases)
        kept = ("Cookie policy: we set lang=de and theme=dark for every visitor",
                "[09:14] Petr: první půlka zápasu skončila 2:1\n[09:15] Petr: a zbytek jsem nestihl",
                "write to first.last@example.com or sales:team@example.org for details",
                "image: registry.local/app:1.4.2@sha256:4f2a9c",
                "Jangan hantar kata laluan melalui SMS. Guna Bitwarden — saya dah kongsi folder itu dengan awak.",
                "# Ejemplo\nMP_WEBHOOK_SECRET=tu-secreto-aqui",
                'stripe.api_key = "sk_test_" + "0" * 24  # a dummy for the unit tests',
                "Segredo no Azure Key Vault: kv-ops-lit-weu / portal-certificado-pin")
        self.assert_kept(kept)

    def test_a_comment_above_a_plain_first_row_backup_codes_an_indented_wrap_and_a_key_below_a_blank_line_are_redacted(self):
        cases = {'# keeps the tenants\' files in the cache\nFILES_FERNET_KEY = b"Hq3vNw8LzK2mXp5RtY7cB4dF6gJ9kS1aE0uWoQiZxVs="': ("Hq3vNw8LzK2mXp5RtY7cB4dF6gJ9kS1aE0uWoQiZxVs",),
                 '<table border="1"><tr><td>Käyttäjä</td><td>Salasana</td></tr>\n<tr><td>arkisto.koski</td><td>Lumi.Kettu2017</td></tr></table>': ("Lumi.Kettu2017",),
                 "portal\tlogin\tpassword\tmfa_backup\nCaseWorks\tops.team\tfern!harbor71\tq7wd-2kxp-m9zt\n": ("fern!harbor71", "q7wd-2kxp-m9zt"),
                 "data:\n  signer.json: 9fLq2Xw7RtK3mZ8vNc4PbY6hJd1SgA5eWu0oTiQx/+Lk7Mn2Bv9Cx4Zs8Dq3Fw6Gr1Hy5Jt0Ku\n    Pm4Nq8Rs2Tv6Uw0Xy3Za7Bc1De5Fg9Hi2Jk6Lm0No4Pq8Rs2Tv6Uw0Xy3Za7Bc1De5Fg9Hi2Jk6L\n": ("9fLq2Xw7RtK3mZ8vNc4PbY6hJd1SgA5eWu0oTiQx",),
                 "Hi Ana, your production API key for the workspace is below. It will not be shown again.\n\n    Kd8Wq2Lz5Xn7Rv3Tb9Mc4Yp6Hs1Jf0Ge\n\nRegards": ("Kd8Wq2Lz5Xn7Rv3Tb9Mc4Yp6Hs1Jf0Ge",)}
        self.assert_redacted(cases)
        kept = ("<table><tr><td>Käyttäjä</td><td>Salasana</td></tr>\n<tr><td>arkisto.koski</td><td>in the vault</td></tr></table>",
                "user\tmfa\nops.team\tenabled\n",
                "# the public key\nSIGNING_KEY_ID = 7")
        self.assert_kept(kept)

    def test_the_literals_beside_a_redacted_one_are_its_other_parts(self):
        cases = {'var parts = []string{"ghp_Rk7Tq2Wz9Lm4Xv8Np3Bs6Hd1Fs5Ga0JkL2mN", "Qm8vLx2Rt7Kp4Nz9Wc3Y", "b6Hd1Fs5Ga0JkL2mN4pQ"}': ("Qm8vLx2Rt7Kp4Nz9Wc3Y", "b6Hd1Fs5Ga0JkL2mN4pQ"),
                 'export FLY_API_TOKEN="FlyV1 fm2_Rk7Tq2Wz9Lm4Xv8Np3Bs6Hd1Fs5Ga0JkL2mN4pQ"\\\n"Zq8Lm2Xr5Kp7Wt3NxW4vB9cR7tY2uI6oP1aS3dF5g"\nfly deploy': (
                     "Zq8Lm2Xr5Kp7Wt3NxW4vB9cR7tY2uI6oP1aS3dF5g",)}
        self.assert_redacted(cases)
        kept = ('TOKEN = os.environ["TOKEN"]  # ghp_ tokens only\nREGIONS = ["eu-west-1", "us-east-2"]',
                'steps = ["checkout", "build-linux-x86_64", "upload-artifacts"]')
        self.assert_kept(kept)

    def test_the_siblings_of_a_redacted_value_are_redacted(self):
        cases = {"| Site   | Wi-Fi key          | Router admin |\n|--------|--------------------|--------------|\n"
                 "| Lisbon | Pelican-Harbor-57  | vQ8zKp3RtW2m |\n| Porto  | %Douro44ribeira    | 7Xk2pLm9QwEr |\n| Braga  | cedar-velvet-moss  | N4b8YtR2xZq6 |": (
                     "Pelican-Harbor-57", "vQ8zKp3RtW2m", "%Douro44ribeira", "7Xk2pLm9QwEr", "N4b8YtR2xZq6"),
                 'devices:\n  - name: nvr-lobby\n    user: admin\n    pass: "Kamera-Lobby.61"\n  - name: pbx\n    user: "200"\n    pass: "58214973"': (
                     "Kamera-Lobby.61", "58214973"),
                 "**Cliente Ferreira**\n- cPanel: `ferreiraadv` / `+VcavY-YhqjkR=`\n- Webmail admin@: `Basalto.farol482`": ("+VcavY-YhqjkR=", "Basalto.farol482"),
                 "Shared: https://www.dropbox.com/scl/fi/4xtgipaic24xi2g19uczj/certs-batch7.zip?rlkey=q8w2e4r6t1y3u5i7o9p0a2s4d&dl=0": (
                     "4xtgipaic24xi2g19uczj", "q8w2e4r6t1y3u5i7o9p0a2s4d"),
                 "https://acme.sharepoint.com/:x:/s/Sales/EkRgtPRTaBVEnvvHzRgQx1bN7pLm2Wq9Zr4Tk?e=pwwx8T": ("EkRgtPRTaBVEnvvHzRgQx1bN7pLm2Wq9Zr4Tk", "pwwx8T"),
                 "export ACME_API_KEY=Zq8Lm2Xr5Kp7Wt3NxW4vB9cR7tY2uI6o\n# the old one, revoke it: Tq7wX2mZ9pLk4vRbN8sY3hJc5fG1dA0e": (
                     "Zq8Lm2Xr5Kp7Wt3NxW4vB9cR7tY2uI6o", "Tq7wX2mZ9pLk4vRbN8sY3hJc5fG1dA0e"),
                 '[signal]\nsubscription_key = "Zq8Lm2Xr5Kp7Wt3NxW4vB9cR7tY2uI6o"\n\n[marine]\nexport_vessels_key = "72bcb8e265ae044281ea70f2d4dab812ba2dfa6b"\ntimeout_s = 20': (
                     "Zq8Lm2Xr5Kp7Wt3NxW4vB9cR7tY2uI6o", "72bcb8e265ae044281ea70f2d4dab812ba2dfa6b"),
                 'build_flags =\n    -DBLE_STATIC_PASSKEY=890164\n    -DOTA_HMAC_KEY=\\"Zq8Lm2Xr5Kp7Wt3NxW4vB9cR7tY2uI6o\\"\n    -DHW_REV=3': ("890164", "Zq8Lm2Xr5Kp7Wt3NxW4vB9cR7tY2uI6o")}
        self.assert_redacted(cases)
        text = 'object Keys {\n    const val CLIENT_SECRET = "Zq8Lm2Xr5Kp7Wt3NxW4vB9cR7tY2uI6o"\n    const val SUPPORT_KEYWORD = "refund-2024"\n    const val PRIMARY_KEY_COLUMN = "order_id"\n}'
        self.assertIn('"refund-2024"\n    const val PRIMARY_KEY_COLUMN = "order_id"', cc.redact(text)[0])  # names of no secret, values of words
        text = "new ACME_API_KEY=Zq8Lm2Xr5Kp7Wt3NxW4vB9cR7tY2uI6o, built at 2f9c1e7a4b3d8e6f0a1c2b3d4e5f6a7b8c9d0e1f by run 98345122764"
        self.assertIn("2f9c1e7a4b3d8e6f0a1c2b3d4e5f6a7b8c9d0e1f by run 98345122764", cc.redact(text)[0])  # a digest, a number
        kept = ('steps:\n  - name: build\n    run: "make all"\n  - name: test\n    run: "make check"',
                "- Repo: `shop/checkout`\n- Branch: `release-2024.11`\n- Owner: `platform-team`",
                "Docs: https://www.dropbox.com/developers/documentation/http/overview?ref=nav_v2&lang=en")
        self.assert_kept(kept)

    def test_a_secret_named_inside_a_line_beside_a_redacted_one_is_redacted(self):
        # Named-beside siblings where the name and value stand among a line's other fields: a dump's
        # `key=`, SNMP's `authKey (SHA, localized): 0x…`, a setting inside a quoted statement.
        cases = {"mesh config dump:\n  netkey[0]  index=0x000 key=19d582dab1c50c9957cd41483f3769e3\n"
                 "  appkey[0]  index=0x000 bound=0x000 key=2f1c7a9e4b8d3f6a0c5e1b7d9a3f2c8e\n  devkey     node=0x0005 key=02be0ad5e80e6934fa8fcba915e667dd": (
                     "19d582dab1c50c9957cd41483f3769e3", "02be0ad5e80e6934fa8fcba915e667dd"),
                 "SNMPv3 user ot-monitor (engineID 80000009030000e0b1a2c3d4):\n  authKey (SHA, localized): 0xf942910148ded20c57b67e9927ad6d5f1e3ba338\n"
                 "  privKey (AES, localized): 0x9d2c4e8a1f7b3c6d5e0a9b8c7d6e5f4a": ("f942910148ded20c57b67e9927ad6d5f1e3ba338",),
                 "db: pg-main password=Rk7Tq2Wz9Lm4Xv8N\nquery: \"SET SESSION app.crypt_key = 'b212f6842b2eb8457774ef7203432897'\"": (
                     "b212f6842b2eb8457774ef7203432897",)}
        for text, secrets in cases.items():
            with self.subTest(text=text[:40]):
                self.assertTrue(any(cc.REDACTED in cc.redact(line)[0] for line in text.split("\n")))  # one value is redacted alone
        self.assert_redacted(cases)
        text = "db: pg-main password=Rk7Tq2Wz9Lm4Xv8N\nrun: index=0x000 commit=2f9c1e7a4b3d8e6f0a1c2b3d4e5f6a7b8c9d0e1f node=ab12cd34ef"
        self.assertIn("commit=2f9c1e7a4b3d8e6f0a1c2b3d4e5f6a7b8c9d0e1f node=ab12cd34ef", cc.redact(text)[0])  # names of no secret

    def test_a_typed_password_or_a_machine_token_beside_a_redacted_value_is_redacted(self):
        # In a text where a value is redacted, a password a person typed (letters, digits and a
        # symbol) is redacted whatever names it, and a machine's token by the context judge's
        # lower bar (_BESIDE_THRESHOLD).
        cases = {"Passation :\n- compte root du routeur -> Hiver!2031!\n- code PIN du badge : 418405\n- le reste est dans le coffre": ("Hiver!2031!", "418405"),
                 "mysql> SELECT * FROM printer_config\\G\n ftp_user: zebra\n ftp_pass: mJ66N1tCutf4\nweb_admin: Versand7-Web!": ("mJ66N1tCutf4", "Versand7-Web!"),
                 "$ flask-unsign --decode --cookie 'eyJfZnJlc2giOnRydWV9.Z3xQkA.Qfu5SiN28hUWSRbMBompi2topk0'\n"
                 "{'_fresh': True, '_user_id': '17', 'csrf_token': 'a91f3c0d7e2b5a48c6d1e9f0b3a7c2d5e8f1a4b6'}": (
                     "eyJfZnJlc2giOnRydWV9.Z3xQkA.Qfu5SiN28hUWSRbMBompi2topk0", "a91f3c0d7e2b5a48c6d1e9f0b3a7c2d5e8f1a4b6")}
        self.assert_redacted(cases)
        text = "root@radius01:~# radtest pppoe-cli0482 Kx9#mP2vQ7 127.0.0.1 0 Tq7wX2mZ9pLk\n# then: sw-core-01>enable, see v2.4.1-rc#3 and 50%"
        self.assertEqual(cc.redact(text)[0], "root@radius01:~# radtest pppoe-cli0482 «redacted» 127.0.0.1 0 «redacted»\n# then: sw-core-01>enable, see v2.4.1-rc#3 and 50%")
        self.assert_redacted_as((("bash-5.2$ PGPASSWORD=Kx9#mP2vQ7zz psql -h 10.20.3.14 -U app -c '\\dt'", "bash-5.2$ PGPASSWORD=«redacted» psql -h 10.20.3.14 -U app -c '\\dt'"),
                                 ('curl -H "Cookie: sid=Zq8Lm2Xr5Kp7Wt3NxW4vB9cR" -O a.png "https://grafana.example/render?panelId=4&width=1000"',
                                  'curl -H "Cookie: sid=«redacted»" -O a.png "https://grafana.example/render?panelId=4&width=1000"')))  # a prompt, a URL on a cookie's line
        self.assert_kept(("web_admin: Versand7-Web is the printer's page name, build 2031!",))  # (no value redacted: nothing beside)

    def test_a_hex_password_and_more_credential_words_are_redacted(self):
        # A password a machine made in hex, after a word for a password (no digest is named), and
        # Swedish `lösen`, Hindi `पिन`, a Wi-Fi code.
        cases = {"森さん、ロイヤリティDBの読み取り専用ユーザーのパスワードは「c80bbce61d9edde3b99085bc6e」です。": ("c80bbce61d9edde3b99085bc6e",),
                 'Nya inloggningen till NAS:en: användare "linnea.b", lösen 54487e327ea0226316d869. Byt gärna.': ("54487e327ea0226316d869",),
                 "राहुल, लैब एनालाइज़र का पिन 640218 है। किसी को मत बताना।": ("640218",),
                 "De nieuwe wifi-code voor de wachtkamer is Hondenkoekje2025, de router staat achter de kast.": ("Hondenkoekje2025",)}
        self.assert_redacted(cases)
        kept = ("the password hash is 5f4dcc3b5aa765d61d8327deb882cf99 in the dump",
                "SELECT COUNT(*) FROM auth_user WHERE password LIKE 'pbkdf2_sha256$%';",
                "- uses: hashicorp/vault-action@v3\n  with:\n    secrets: |\n      secret/data/ddex/apple password | APPLE_TRANSPORTER_PASSWORD ;\n"
                "      secret/data/ddex/spotify password | SPOTIFY_SFTP_PASSWORD",
                "the wifi code changes weekly, ask reception for today's")
        self.assert_kept(kept)

    def test_a_cookie_beside_a_redacted_one_and_a_signers_key_are_redacted(self):
        # A line that sends cookies, one of them redacted: its other values with a digit. A wallet's
        # or a signer's key under `priv` or `SIGNER_A`, and a BIP 32 key a tool printed carelessly.
        cases = {"GET /asterisk/arawman?action=QueueStatus HTTP/1.1\nCookie: mansession_id=\"b5dfc214\"; ccwb_session=Kx9mP2vQ7zzLqWt4Rb8NcY3": (
                     "b5dfc214", "Kx9mP2vQ7zzLqWt4Rb8NcY3"),
                 '    Cookie: "li_at=AQEDAR8xYz0Bc3lmAAABj2Kx9mP2vQ7zzLqWt4Rb8NcY3; JSESSIONID=\\"ajax:1100857005297841400\\"",': (
                     "AQEDAR8xYz0Bc3lmAAABj2Kx9mP2vQ7zzLqWt4Rb8NcY3", "ajax:1100857005297841400"),
                 "# our own test signers, funded on the shared devnet\nSIGNER_A=df973e69e402ecf6b9c139182b532798e06714e9b3c99a95c57d039e93ada999": (
                     "df973e69e402ecf6b9c139182b532798e06714e9b3c99a95c57d039e93ada999",),
                 'XPRV = "xprv9s21ZrQH143KiiFHUFhF8kKHuFuWiz0vmSeJ5F4N9cY0WB6tybea9d2baq6t7yLsjjtlEzSdKx9pNoHSMafKqUbIlMvwI07Oz5tmSSvkqxQ"': (
                     "xprv9s21ZrQH143KiiFHUFhF8kKHuFuWiz0vmSeJ5F4N9cY0WB6tybea9d2baq6t7yLsjjtlEzSdKx9pNoHSMafKqUbIlMvwI07Oz5tmSSvkqxQ",)}
        self.assert_redacted(cases)
        self.assert_kept(("Cookie: theme=dark; lang=en-GB; consent=2024-11-03", "SIGNER_COUNT=3\nprivacy_policy_version=20240611"))

    def test_the_first_part_above_a_message_of_only_the_rest_is_redacted(self):
        # A secret sent in two messages whose second holds only its rest (the rules redact it): the
        # value the first gave after a credential word is its first part; so after a bare `rest:`.
        cases = {"[10:02] Sanne: het provet wachtwoord is Koeienbel-\n[10:02] Sanne: sorry, onaf verstuurd. rest: Xk29!mPq7zLw3": ("Koeienbel-", "Xk29!mPq7zLw3"),
                 "Ana: a senha do roteador é Farol-\nAna: Xk29!mPq7zLw3": ("Farol-", "Xk29!mPq7zLw3")}
        self.assert_redacted(cases)
        self.assert_kept(("Ana: the wifi password policy is strict\nAna: see the wiki\nBob: ok",))

    def test_a_passphrase_of_joined_words_that_ends_a_sentence_is_redacted(self):
        # Words joined by dots or underscores after a word for a password are a passphrase where a
        # sentence's full stop follows them; code's dot or call after them is no full stop.
        cases = {"Can you rerun the import? ssh user is deploy, password pelican.studio.abuja. Don't touch prod.": ("pelican.studio.abuja",),
                 "Коллеги, пароль от сервера сборки теперь ramen_lingon_autumn. Старый больше не работает.": ("ramen_lingon_autumn",)}
        self.assert_redacted(cases)
        self.assert_kept(("the password is read from config.settings.load() at start", "password: config.settings.vault_path.get()"))

    def test_tables_codes_split_parts_and_more_languages_are_redacted(self):
        cases = {"DefaultUserName DefaultPassword      AutoAdminLogon\n--------------- ---------------      --------------\nkiosk           Lobby-Screen#4412   1": ("Lobby-Screen#4412",),
                 "Pièce         Code porte   Code alarme\nAccueil       B40917       «redacted»\nStockage      C77302       «redacted»": ("B40917", "C77302"),
                 "Jövő héten az ajtókód 730518, a riasztót ne kapcsold ki.": ("730518",),
                 "[09:02] Réka: a VPN jelszó első fele: Duna-Part\n[09:03] Réka: második fele: -2207!Pest": ("Duna-Part", "-2207!Pest"),
                 'buildConfigField("String", "DO_TOKEN", "\\"dop_v1_1a7e05bc9ed3b25df0c4\\" + \\"8fc3293fa7723a8fa8f574c17d0d204be6\\"")': (
                     "dop_v1_1a7e05bc9ed3b25df0c4", "8fc3293fa7723a8fa8f574c17d0d204be6"),
                 "ftrack:\n  api_user: pipeline\n  api_key: >-\n    Xq7Lm2Rt9Kp4Wz8Nv3Bs\n    z8thvt6lzk(v$": ("Xq7Lm2Rt9Kp4Wz8Nv3Bs", "z8thvt6lzk(v$"),
                 'render:\n  user: farmops\n  password_parts:\n    - "7YrQWje#"\n    - "_xxWgoD7"\n    - "6VJY%wxd"': ("7YrQWje#", "_xxWgoD7", "6VJY%wxd"),
                 "o cadeado do armário da sala 12 é 583920, fecha depois de usar": ("583920",)}
        self.assert_redacted(cases)
        kept = ("$ md5sum vizsga_*.pdf\n2988eb008588a022c43a9f66c8ae21d3  vizsga_101.pdf\n6581bfb4bc9c98dae0548923f02a5e1d  vizsga_102.pdf",
                "$ shasum -a 1 REEL_04/*.mxf\n3d4c550e06ef5d7d7b6661d287599fc1a2b3c4d5  REEL_04/j2c_aceac7ab.mxf\n9f1c2e3d4b5a69788796a5b4c3d2e1f0a9b8c7d6  REEL_04/pcm_59298635.mxf",
                "DB_PASSWORD=__CHANGE_ME_BEFORE_DEPLOY__\nSECRET_KEY=__GENERATE_WITH_openssl_rand_hex_32__",
                'Classroom: assignment "hw3" reads the repository secret GRADER_TOKEN from the org cs2110-fa25',
                'steps:\n  - "checkout"\n  - "build-linux-x86_64"\n  - "upload-artifacts"', "the padlock on locker 12 is broken, order a new one (ticket 583920)")
        self.assert_kept(kept)

    def test_no_piece_of_a_secret_is_left_beside_its_redaction(self):
        # A rule's value that stops at a character inside the secret leaves the rest in clear: each
        # of these once left a piece (`«redacted»&Z6@%H`, `«redacted»)n)a_t4h…`, `sig=«redacted»_3u9Q…`).
        cases = {"Nya lösenordet är KlsaKl$YD?DPH*Ur9pv&Z6@%H , skickar användarnamnet separat.":
                     "Nya lösenordet är «redacted» , skickar användarnamnet separat.",
                 "url=postgresql+psycopg2://ledger:L3dg3r-Prim@ry-88@pg-primary:5432/ledger": "url=postgresql+psycopg2://ledger:«redacted»@pg-primary:5432/ledger",
                 "DJANGO_SECRET_KEY=django-insecure-a6@^ue&!yrz3c)n)a_t4h&d%(i77gri3vzry)4mz+b!k)*16ah": "DJANGO_SECRET_KEY=«redacted»",
                 "https://prod-44.westeurope.logic.azure.com/workflows/0f3a/triggers/manual/paths/invoke?sv=1.0&sig=HJmUOLAtcRvOaTcP273K_3u9QHxrh8T0MbUG2itlhLY":
                     "https://prod-44.westeurope.logic.azure.com/workflows/0f3a/triggers/manual/paths/invoke?sv=1.0&sig=«redacted»",
                 "password: Qta3qHavnZro9P=49b.z": "password: «redacted»",
                 "https://x.blob.core.windows.net/c?sv=1&sig=HJmUOLAtcRvOaTcP273K3u9QHxrh8T0MbUG2itlhLY&sp=r":
                     "https://x.blob.core.windows.net/c?sv=1&sig=«redacted»&sp=r"}  # (a query's next parameter is not the value's rest)
        self.assert_redacted_as(cases)

    def test_cracked_hashes_ci_variables_joined_keys_and_chat_rests_are_redacted(self):
        cases = {"$ hashcat -m 1000 ntlm.txt wordlist.txt --show\n8846f7eaee8fb117ad06bdd830b7586c:Sunflower-Meadow-42\n$ ": ("Sunflower-Meadow-42",),
                 "$ glab variable get STRIPE_SECRET_KEY -R shop/checkout\nrk_live_7Tq2Wz9Lm4Xv8Np3Bs6Hd1Fs5Ga0JkL2mNQz\n$ ": ("rk_live_7Tq2Wz9Lm4Xv8Np3Bs6Hd1Fs5Ga0JkL2mNQz",),
                 'locals {\n  vendor_key = join("", ["9c41e7b20d5fa8c3e16b", "47d0a9f3b2c85e16d4a7"])\n}': ("9c41e7b20d5fa8c3e16b", "47d0a9f3b2c85e16d4a7"),
                 "$k = implode('', ['Rk7Tq2Wz9Lm4Xv8N', 'p3Bs6Hd1Fs5Ga0Jk']);": ("Rk7Tq2Wz9Lm4Xv8N", "p3Bs6Hd1Fs5Ga0Jk"),
                 "[09:12] Lucía: la clave del panel es Girasol2019\n[09:12] Lucía: se cortó, sigue #Verano!\n": ("#Verano!",),
                 "Mihai: parola pt contul de test e l4nt3rn%\nMihai: ... si continuarea: 7-204913 (fără spații)": ("7-204913",),
                 "Ali: Passwort fürs Portal ist neu\nAli: Anfang: Birke*\nAli: und dann fahrrad7 (am Stück)": ("Birke*", "fahrrad7"),
                 "v=0\nm=audio 18232 RTP/SAVP 0 8 101\na=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:PS1uQCVeeCFCanVmcjkpPywjNWhcYD0mXXtxaVBR\n":
                     ("PS1uQCVeeCFCanVmcjkpPywjNWhcYD0mXXtxaVBR",),
                 "curl -v -u Zq8Lm2Xr5Kp7Wt3NxW4v:X https://acme.freshdesk.com/api/v2/tickets": ("Zq8Lm2Xr5Kp7Wt3NxW4v",)}
        self.assert_redacted(cases)
        kept = ('{\n  "login.pin.label": "Schlüsselschrank-PIN",\n  "login.password.hint": "Mindestens 12 Zeichen"\n}',
                "$ kubectl get secret web-tls -o jsonpath='{.data.tls\\.crt}' | base64 -d | openssl x509 -noout -subject -ext subjectAltName\n"
                "subject=CN = web.example.io\nX509v3 Subject Alternative Name:\n    DNS:web.example.io, DNS:api.example.io\n$ ",
                "$ glab variable get DEPLOY_REGION -R shop/checkout\neu-central-1\n$ ", 'paths = join("/", ["var", "lib", "app"])')
        self.assert_kept(kept)

    def test_a_machine_token_its_context_names_is_redacted_where_no_rule_reads_it(self):
        cases = {"$ lora-cli devices add field-pump-3 --dev-eui 70B3D57ED0041A2C \\\n    --root-keys.nwk-key.key 8E3FA1C07D2B9E46F1A05C37BD8E2A94": ("8E3FA1C07D2B9E46F1A05C37BD8E2A94",),
                 "salt 'web*' postgres.user_create reporting_ro 'Tq7wX2mZ9pLk4vRbN8sY3hJc' login=True": ("Tq7wX2mZ9pLk4vRbN8sY3hJc",)}
        for text, secrets in cases.items():
            with self.subTest(text=text[:30]):
                redacted = cc.redact(text)[0]
                for secret in secrets:
                    self.assertNotIn(secret, redacted)
                self.assertEqual(cc.find_secret(text), "a token its context names")
        kept = ("commit 1f3c5e7a9b2d4f6e8a0c1b3d5f7e9a2c4b6d8f0e\n    wip: pin the chart to its release",
                'go build -ldflags "-X main.version=1.4.2 -X main.commit=9e4f1a7c3b5d2e8f0a6c4b1d7e3f9a2c"',
                "build id 7HqLz2Wm9RkTx4Vn for the nightly job", 'ETag: "33a64df551425fcc55e4d42a148795d9f25f89d4"',
                "Pinned to release 3f9a2c7e1b5d4f8a0c6e2b9d7f1a3c5e of the upstream chart.",
                '"darwin-aarch64": {"signature": "dW50cnVzdGVkIGNvbW1lbnQ6IHNpZ25hdHVyZSBmcm9tIHRhdXJpIHNlY3JldCBrZXkKVk+7Da2KNuNl", "sig": "Qm8vLx2Rt7Kp4Nz9Wc3Yb6Hd1Fs5Ga0J"}')
        self.assert_kept(kept)

    def test_a_plain_text_secret_read_a_kv_value_and_a_literal_its_comment_names_are_redacted(self):
        cases = {'PS C:\\> Get-AzKeyVaultSecret -VaultName kv-ops -Name "fw-admin" -AsPlainText\nv9C=kkhpRwTMnoYe\nPS C:\\> ': ("v9C=kkhpRwTMnoYe",),
                 '$ npx wrangler kv key get --binding=CONFIG "stripe_secret_live" --remote\n4f0c9e2ab71d38e65c0f92a4b7d1e83c': ("4f0c9e2ab71d38e65c0f92a4b7d1e83c",),
                 'client = FinTS3PinTanClient(\n    "10020030",        # BLZ\n    "7731094821",      # Login\n    "sommer4471",      # PIN\n)': ("sommer4471",),
                 'const cfg = {\n  host: "sftp.partner.example",\n  pass: process.env.X,\n  key: "Zq8Lm2Xr5Kp7Wt3N", // API key (sandbox)\n};': ("Zq8Lm2Xr5Kp7Wt3N",)}
        self.assert_redacted(cases)
        kept = ('$ npx wrangler kv key get --binding=CONFIG "feature_flags" --remote\n{"beta": true}',
                'client = FinTS3PinTanClient(\n    "10020030",        # BLZ\n    os.environ["FINTS_PIN"],  # PIN\n)',
                'retries = "3"  # token bucket size',
                'label = "Enter your PIN"  # PIN prompt')
        self.assert_kept(kept)

    def test_a_password_a_helpdesk_reset_someone_to_and_wifi_vouchers_are_redacted(self):
        cases = {"vpn threw me out again and IT reset me to Harb0r!lamp77, is the portal caching the old one?": ("Harb0r!lamp77",),
                 "Guest wifi voucher is XK4T-PQ7M, valid until Sunday": ("XK4T-PQ7M",),
                 "访客WiFi的券码是 MV3Q-8TZA ，请勿转发": ("MV3Q-8TZA",),
                 "voucher\tvalid_from\tvalid_to\nexpo-4471-mavi\t2025-03-01\t2025-03-03\nexpo-9012-kirmizi\t2025-03-01\t2025-03-03\n": ("expo-4471-mavi", "expo-9012-kirmizi")}
        self.assert_redacted(cases)
        kept = ("run git reset to origin/release-2024.1 before tagging",
                "we reset the retry budget to MaxRetries3 after the incident",
                "the voucher for this week is not working, can you print a new one?",
                "use voucher code SUMMER-SALE at checkout")
        self.assert_kept(kept)

    def test_account_rows_api_key_lists_and_short_tsv_rows_are_redacted(self):
        cases = {"SFTP drop boxes (lab partners)\n  Covance   lab_dm          maple-harbor-violet-crane\n  Q2        lab_biostat     pl4n&k3ttle7\n": ("maple-harbor-violet-crane", "pl4n&k3ttle7"),
                 "Printers (admin accounts)\n  Floor 2   HP M479    admin   Birch2016\n  Floor 3   Canon C5840 admin  otter-M00n44\n": ("Birch2016", "otter-M00n44"),
                 "### API keys of the partners\n- **Tidewatch** (positions): `9c1e4f7a2b8d3e6f0a5c9b2d7e4f1a8c`\n- Harbourline: `Qx7mLp2RtV9wKs4NbY6cZd8H`": ("9c1e4f7a2b8d3e6f", "Qx7mLp2RtV9wKs4N"),
                 "site\tsystem\tuser\tpassword\tnotes\nAMS\tPortal\tops-ams\tharbor4471\tMFA on\nRTM\tPortal\tOPS_RTM\tC4rl.1971\n": ("harbor4471", "C4rl.1971"),
                 "HOST          BMC IP       USER    PASS\nesx07         10.4.9.17    ADMIN   QKX7TRBVMN\n": ("QKX7TRBVMN",),
                 "⏺ Read(keys\\bridge.ppk)\n  ⎿  PuTTY-User-Key-File-3: ssh-rsa\n     Private-Lines: 2\n     AAAAgQCx7Lq2Vn9Wm4Rt8Yp3Kd6Hs1Fg5Jz0Nc\n     AAAAQQDb2Ms7Xv4Qe9Lk1Pw6Zt3Ry8Uh5Gi0\n     Private-MAC: 4f2c": ("AAAAgQCx7Lq2Vn9Wm4",)}
        self.assert_redacted(cases)
        kept = ("NAME        READY   STATUS    RESTARTS   AGE\napi-7d9f    1/1     Running   0          5d\nweb-1       1/1     Running   2          3h",
                "USER    PASSWORD   NOTE\nadmin   (vault)    rotated",
                "The API keys are rotated by the job below\nid: 7f5b2618-18fb-4556-a1b2-bac8fdb6de76\nrun: 4f2c9a1e8b7d6c5f4e3d",
                "Keys of the build:\n- commit: 4f2c9a1e8b7d6c5f4e3d2c1b0a9f8e7d6c5b4a39",
                "Twilio console\nAccount SID   AC387c60c8b5035d86ca0240a52a5cb2fd\nService SID   MG6f835856b923b71ac013117df5972041",
                "ID              NAME             REGION  IMAGE\n11d34edd5916b3  winter-sun-4182  fra     api:deployment-01JZDAZILSM1B29Q\n35a6d40a487cf7  quiet-lake-9031  ams     api:deployment-01JXIAE5GPEJQN42")
        self.assert_kept(kept)

    def test_the_head_of_a_wrapped_value_whose_rest_was_redacted_is_redacted_too(self):
        # A rule redacted the rest alone on the next line; the head above it is the same secret's.
        cases = {'$ less /opt/sign/store.json\n{"K2":{"d_hex":"7c1e9a03b5d24f68e0a7c3b1d9f2e4a6\n0b8d6f4a2c9e1b7d5f3a1c8e6b4d2f09"}}': "7c1e9a03b5d24f68",
                 '(venv) $ python -c "from huggingface_hub import HfFolder; print(HfFolder.get_token())"\nhf_RvNmKqTbXcWzPyLd\nGsKdUeQmZnXpWrYtBvC': "hf_RvNmKqTbXcWzPyLd"}
        for text, head in cases.items():
            with self.subTest(text=text[:30]):
                self.assertNotIn(head, cc.redact(text)[0])
        kept = "$ ls /srv/releases\nrelease-2024-11-03\nbuild_7f3a9c2e\n"
        self.assertEqual(cc.redact(kept)[0], kept)

    def test_a_secret_section_a_uuid_secret_and_a_privkey_are_redacted(self):
        cases = {"[Database]\nURL = 'postgresql://cl@pg:5432/cl'\n\n[Password]\nKeystore = 'Kuzey.Isigi.Kasa-9'\n": "Kuzey.Isigi.Kasa-9",
                 "[10.42, 12/6/2025] Rizky: api kucoin udh aku bikin\n[10.42, 12/6/2025] Rizky: secret 7f5b2618-18fb-4556-a1b2-bac8fdb6de76": "7f5b2618-18fb",
                 "TRON payout wallet\nprivkey  db41121280de9aa1471ea45ad66ac630b97d6920bc5fc8383910622c968f6335": "db41121280de",
                 "<a href=\"https://lms.example/files/1184422/download?download_frd=1&verifier=JTLxfihd6k0w7w18wG0CyU8Yg93mGdVNIAWVqXQF\">x</a>": "JTLxfihd6k0w",
                 "Production URL: https://api.pixelcrab.io/apple/notifications?k=QuFGKgf8WiPqEgW-QfL0nL2L6JAE8NA_": "QuFGKgf8WiPq"}
        for text, secret in cases.items():
            with self.subTest(text=text[:30]):
                self.assertNotIn(secret, cc.redact(text)[0])
        kept = ("[secrets]\nprovider = vault\npath = secret/data/app\nrefresh = 3600", "https://shop.example/search?k=running+shoes&page=2",
                "secret id 7f5b2618-18fb-4556-a1b2-bac8fdb6de76", "Idempotency key 7f5b2618-18fb-4556-a1b2-bac8fdb6de76",
                "client eduroam-flr1 {\n\tsecret = $ENV{FLR1_RADIUS_SECRET}\n}",
                'discord_token: "MTxxxxxxxxxxxxxxxxxxxxxx.Gxxxxx.xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"',
                "Safe Exam Browser config key: 8d793ebd5854b5b28eac7185f0eabebc6e8f38e6cd285be88a6d44f6bc19ed54 (hash of the .seb settings)")
        self.assert_kept(kept)

    def test_a_getter_of_a_password_setting_prints_it_and_the_next_prompt_stays(self):
        # The value a getter printed is redacted; the next prompt's user below it is no rest of it.
        text = ("www-data@lms01:/var/www/moodle$ moosh config-get auth_ldap bind_pw\nLdapMoodle#Krakow88\n"
                "www-data@lms01:/var/www/moodle$ moosh config-get auth_ldap host_url\nldaps://ldap.uj.example")
        redacted = cc.redact(text)[0]
        self.assertNotIn("LdapMoodle#Krakow88", redacted)
        self.assertEqual(redacted.count("www-data@lms01:/var/www/moodle$ moosh config-get"), 2)
        self.assertIn("ldaps://ldap.uj.example", redacted)
        self.assertNotIn("Fjord!Harbor42", cc.redact("$ git config --get sendemail.smtppass\nFjord!Harbor42")[0])
        kept = "$ git config --get sendemail.smtpuser\nalerts@uj.example"
        self.assertEqual(cc.redact(kept)[0], kept)

    def test_a_keypair_and_pieces_named_in_turkish_and_russian_are_redacted(self):
        cases = {"JITO_AUTH_KEYPAIR_B58=4QWYTbTf2QK1o9t1MnNHGhpD7hUyzEeAihYbKZpvwNhGdGzkQiQDbqUbF6FfmDSPjmm9LqUN184bDFYzFLm6MGQp": ["4QWYTbTf2QK1"],
                 "Олег: закрытый ключ, часть 1: 4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d\nОлег: часть 2: da1c766a25a3f7e049ac4d06ad89c8d0b0": ["da1c766a25a3"],
                 "[Telegram] Murat: sunucu şifresinin ilk kısmı Bosphorus\n[Telegram] Murat: devamı: 7Hq2-Lm9w!x (boşluk yok)": ["Bosphorus", "7Hq2-Lm9w!x"],
                 "[09:14] ahmet: deployer key ilk yarı: 4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c\n[09:15] ahmet: ikinci yarı ayrı mesajda: c14161f14a5f3cc63053c8717fb96cbe": ["c14161f14a5f"]}
        self.assert_redacted(cases)
        for text in ("SOLANA_KEYPAIR_PATH=~/.config/solana/id.json", "keypair_path: /etc/validator/keypair.json"):
            with self.subTest(text=text):
                self.assertEqual(cc.redact(text)[0], text)

    def test_a_licence_key_in_words_and_a_password_fed_by_a_process_substitution_are_redacted(self):
        cases = {"for the offline installer use file installation key 79608-76132-03732-02339-54868 and the license.lic": "79608-76132",
                 "MATLAB kurulumunda lisans anahtarı soruyorsa şunu girin: 19672-04098-85986-83283-15818 , lisans sunucusu": "19672-04098",
                 'geth account import --datadir ./lab-net --password <(echo "blok401-lab-node") keyfile.txt': "blok401-lab-node"}
        for text, secret in cases.items():
            with self.subTest(text=text[:30]):
                self.assertNotIn(secret, cc.redact(text)[0])
        kept = ("licensed under Apache-2.0, see LICENSE (SPDX: Apache-2.0), build 2024-0611-1030-0001",
                "license server 27000@flexlm.uni.example, feature MATLAB, expires 2025-12-31",
                'diff <(echo "expected") <(echo "actual")',
                'geth account import --password <(echo "$KEYSTORE_PASS") keyfile.txt')
        self.assert_kept(kept)

    def test_a_password_setter_of_any_name_and_codes_after_leader_dots_are_redacted(self):
        cases = {'rfc2865.UserPassword_SetString(packet, "Probe!Eduroam77")': ["Probe!Eduroam77"],
                 'plc.set_session_password("Lackier-1500-pw")': ["Lackier-1500-pw"],
                 "Office codes (Istanbul, Levent)\nmain door ...... 361886\nserver room .... 494825": ["361886", "494825"],
                 "HOJA DE ENTREGA\n  Puerta principal ........ código 411944\n  Alarma .................. 696533": ["411944", "696533"],
                 "ethereum: 'mainnet:https://quiet-frosty-meadow.quiknode.pro/1e614c04c2d5aae87f2118b26da3bcd5a208ae5a/'": ["1e614c04c2d5"]}
        self.assert_redacted(cases)
        kept = ('rfc2865.UserPassword_SetString(packet, os.Getenv("RADIUS_PROBE_PW"))',
                'user.set_password(form.cleaned_data["new_password1"])',
                "Chapter 3 .......... 123456\nRelease notes ....... 202405",
                "see https://www.alchemy.com/docs/getting-started-with-the-platform")
        self.assert_kept(kept)

    def test_the_items_of_a_list_a_secrets_name_is_given_joined_are_redacted(self):
        cases = {'_k = ["ceac999727742ebf", "6cc856ab9c96c6c3", "bfb933b9ee5a664b"]\nPRIVATE_KEY = "0x" + "".join(_k)': ["ceac999727742ebf", "bfb933b9ee5a664b"],
                 "parts=(4223971420:AATHATuuIjBy O1CFY0bZ0L4GlXYxwZwSlrB)\nTELEGRAM_TOKEN=$(printf '%s' \"${parts[@]}\")": ["AATHATuuIjBy", "O1CFY0bZ0L4G"],
                 'const p = ["Hz3dS9jQe4Lp", "Qm8vLx2Rt7Kp"];\nconst apiKey = p.join("");': ["Hz3dS9jQe4Lp", "Qm8vLx2Rt7Kp"]}
        for text, secrets in cases.items():
            with self.subTest(text=text[:30]):
                redacted = cc.redact(text)[0]
                for secret in secrets:
                    self.assertNotIn(secret, redacted)
                self.assertIsNotNone(cc.find_secret(text))
        kept = ('names = ["alpha-service", "beta-service"]\nSERVICE_LIST = ",".join(names)',
                'cols = ["created_at", "updated_at"]\nsort_key = "".join(cols)',
                'parts = ["${DB_PASS_A}", "${DB_PASS_B}"]\nDB_PASSWORD = "".join(parts)')
        self.assert_kept(kept)

    def test_codes_in_a_column_beside_the_places_they_open_are_redacted(self):
        # A column of codes holds PINs when the table names places (a site, a room, an object) or the
        # column says what it opens (`Kód hlídače`, a guard's code; `Van alarm`); a postal code stays.
        cases = {
            "Objekt          | Ústředna   | Kód hlídače | Kód správce\nArchiv suterén  | Jablotron  | 482889      | 97458490": ["482889", "97458490"],
            "site,room,code,valid_until\nRotterdam,DC-koude-gang,641926,2025-06-30": ["641926"],
            "Installer\tRegion\tPassword\tVan alarm\nPekka V.\tUusimaa\tVelvetTurtle2291!\t387635": ["VelvetTurtle2291!", "387635"],
        }
        for text, secrets in cases.items():
            with self.subTest(text=text[:30]):
                redacted = cc.redact(text)[0]
                for secret in secrets:
                    self.assertNotIn(secret, redacted)
                self.assertIn("2025-06-30" if "2025" in text else "Uusimaa" if "Uusimaa" in text else "Jablotron", redacted)
        for text in ("site,postal code,phone\nRotterdam,301245,0612345678", "store,code,name\n12,104233,Amsterdam",
                     "site,country code,employees\nAMS,3100,5", "| Error code | Meaning |\n|---|---|\n| 104233 | timeout |"):
            with self.subTest(text=text[:30]):
                self.assertEqual(cc.redact(text)[0], text)

    def test_an_administrators_password_after_a_slash_needs_no_label_nor_sign(self):
        cases = {"<tr><td>10.90.1.2</td><td>zte-admin / Besiktas1905.</td></tr>": "Besiktas1905",
                 "Try Administrator / 4Y7JVOSL": "4Y7JVOSL",
                 "Admin-Login am Webinterface: Admin / 24596798 (Werkseinstellung war 2x Admin)": "24596798"}
        for text, secret in cases.items():
            with self.subTest(text=text[:30]):
                redacted = cc.redact(text)[0]
                self.assertNotIn(secret, redacted)
                self.assertIn("admin" if "zte" in text else "Administrator" if "Try" in text else "Werkseinstellung", redacted)
        for text in ("staging / Production2", "see admin / root2 docs", "compare admin / 2024 figures", "Admin / Settings / Users"):
            with self.subTest(text=text):
                self.assertEqual(cc.redact(text)[0], text)

    def test_a_password_a_few_words_after_its_word_or_of_random_letters_is_redacted(self):
        # Seven characters of three kinds a few words on ("contraseña del router Wisla82."), and letters
        # only in both cases with few vowels right after the word; not a name in CamelCase or a model's.
        cases = {"El código de la puerta es 44183507 y la contraseña del router Wisla82., el técnico llega mañana": "Wisla82",
                 "Fernwartung: TeamViewer-Zugang ID 1 482 993 017, Passwort VNctpjmCXv. Der Techniker meldet sich.": "VNctpjmCXv"}
        for text, secret in cases.items():
            with self.subTest(text=text[:30]):
                redacted = cc.redact(text)[0]
                self.assertNotIn(secret, redacted)
                self.assertIn("técnico" if "técnico" in text else "Techniker", redacted)
        for text in ("das Passwort des Routers R6400v2 ist im Handbuch", "the password KeePassXC stores for you",
                     "das Passwort JavaScript-seitig prüfen", "password reset flow Step2a is done",
                     'Azure Automation credential assets: "ExoAutomation", "DomainJoin", "SqlMaint" (type: PSCredential)'):
            with self.subTest(text=text[:30]):
                self.assertEqual(cc.redact(text)[0], text)

    def test_a_passphrase_of_plain_words_where_its_clause_ends_is_redacted(self):
        # Three words end their clause at an English sentence's end, a dash or a word of another script;
        # a sentence's small words may lead a numbered passphrase; one before a later value still counts.
        cases = {
            "the wifi password is willow octopus candle.": ["willow octopus candle"],
            'le mot de passe du compte "bench" est ginger gravel squid 96. J\'ai aussi changé le code': ["ginger gravel squid 96"],
            "허브 관리자 비밀번호는 violet koala hazel 86 입니다.": ["violet koala hazel 86"],
            "Wi-Fi şifresi de biscuit nickel orbit — müşteri değiştirmemiş.": ["biscuit nickel orbit"],
            "usuario: instalador, contraseña: sparrow river pumpkin 55. y el pin de la alarma es 336630": ["sparrow river pumpkin 55", "336630"],
            "C:\\temp\\Wi-Fi-Lab.xml:21:    <keyMaterial>eagle apple raven</keyMaterial>": ["eagle apple raven"],
        }
        self.assert_redacted(cases)
        for text in ("Das alte Passwort vom Aufkleber auf dem Gerät ist seit gestern ungültig.", "the password is never logged anywhere.",
                     "the token is base64 encoded, btw", "the password is case sensitive — careful"):
            with self.subTest(text=text[:30]):
                self.assertEqual(text, cc.redact(text)[0])

    def test_words_of_more_languages_a_password_sent_in_pieces_and_a_database_service(self):
        """Arabic's other words for password (كلمة سر, كلمة مرور) and Spanish's secreto name a value in a
        sentence; Korean's words for a door lock's number and a server room make a code of its digits;
        a piece of a secret after "faltou o final" or "والباقي" is its rest, and so are the same person's
        next chat messages after a value a connector gives ("es Pelusa" then "88!q jajaja…"), though not a
        channel's name or a word of prose, nor the next field of a record; a setting's path that names its
        key twice, a new password a chat gives under a question about a login, an application's shared
        secret it calls a salt. Kept: a password hash's own salt, a branch or a version given the same way,
        a template's @@NAME@@ and an Oracle service on its host (`ops-db.fleet.local/OPSPRD`), no token."""
        self.assert_redacted_as((
            ("الواي فاي في المكتب: كلمة سر الشبكة STAFF-5G هي Nakheel7731! لا تشاركها",
             "الواي فاي في المكتب: كلمة سر الشبكة STAFF-5G هي «redacted» لا تشاركها"),
            ("oye, el secreto compartido de los switches del hangar es Hangar9mQ2#, apúntalo",
             "oye, el secreto compartido de los switches del hangar es «redacted», apúntalo"),
            ("안내: 오늘부터 3층 서버실 도어락 번호가 770314# 입니다.", "안내: 오늘부터 3층 서버실 도어락 번호가 «redacted»# 입니다."),
            ("Bruna 09:12: a senha do wifi da sala é Tucano\nBruna 09:12: ops, faltou o final: 77k#2",
             "Bruna 09:12: a senha do wifi da sala é «redacted»\nBruna 09:12: ops, faltou o final: «redacted»"),
            ("سارة: الجزء الأول من كلمة المرور Dana@7\nسارة: والباقي 912Lift",
             "سارة: الجزء الأول من كلمة المرور «redacted»\nسارة: والباقي «redacted»"),
        ))
        self.assert_redacted_as((  # a password sent in chat messages too early, given after a connector, the last part before words
            ("[3/11/25, 9:14:02 p. m.] Lucía Vera: la clave del router del taller es Pelusa\n"
             "[3/11/25, 9:14:20 p. m.] Lucía Vera: 88!q jajaja se me fue el mensaje",
             "[3/11/25, 9:14:02 p. m.] Lucía Vera: la clave del router del taller es «redacted»\n"
             "[3/11/25, 9:14:20 p. m.] Lucía Vera: «redacted» jajaja se me fue el mensaje"),
            ("Νίκος 11:02: ο κωδικός του NAS είναι Meltemi\nΝίκος 11:02: -Paros\nΝίκος 11:03: #71! συγγνώμη, όλα μαζί",
             "Νίκος 11:02: ο κωδικός του NAS είναι «redacted»\nΝίκος 11:02: «redacted»\nΝίκος 11:03: «redacted» συγγνώμη, όλα μαζί"),
        ))
        self.assert_redacted_as((  # a setting's path that names its key twice is that key's: The Things Stack's
            ("$ ttn-lw-cli end-devices create farm-app probe-7 \\\n    --frequency-plan-id EU_863_870_TTN \\\n"
             "    --root-keys.app-key.key 5A0F3C7E91B24D68A1C3E5F7092B4D6F",
             "$ ttn-lw-cli end-devices create farm-app probe-7 \\\n    --frequency-plan-id EU_863_870_TTN \\\n"
             "    --root-keys.app-key.key «redacted»"),))
        self.assert_redacted_as((  # an account's new password a chat's answer gives with no word for it, under a question about a login
            ("[09:12] Kofi: can someone reset the kiosk admin? locked out again\n[09:20] Ama: done, it's harmattan77_ now",
             "[09:12] Kofi: can someone reset the kiosk admin? locked out again\n[09:20] Ama: done, it's «redacted» now"),
            ("[14:02] li: did anyone change the grafana login?\n[14:05] jo: yes, rotated it. it's now Pepper_41-kiwi",
             "[14:02] li: did anyone change the grafana login?\n[14:05] jo: yes, rotated it. it's now «redacted»"),))
        self.assert_redacted_as((  # an application's shared secret that it calls a salt; a password hash's own salt is kept
            ("bigbluebutton.web.serverURL=https://bbb.example.edu\nsecuritySalt=9c1e7b3a5d0f2e4c6a8b1d3f5e7a9c0b2d4f6e8a",
             "bigbluebutton.web.serverURL=https://bbb.example.edu\nsecuritySalt=«redacted»"),
            ("    'secretsalt' => 'q8vz3kf0w1m7xy2n5p4t6r9s0u3b8c1d',", "    'secretsalt' => '«redacted»',"),))
        self.assert_kept(('{"user": "bob", "salt": "9c1e7b3a5d0f2e4c6a8b1d3f5e7a9c0b2d4f6e8a", "iterations": 600000}',
                          "[10:02] ben: which branch has the login fix?\n[10:03] ana: it's main-2024 now",
                          "[10:02] ben: did the deploy reset the admin cache?\n[10:03] ana: yes, it's v2.4.1 now",
                          "[10:02] ana: the token is Expired\n[10:03] ana: #incident-42 has the details",
                          "[10:02] ana: the new wifi is CoffeeLab\n[10:02] ana: 5GHz one is faster btw",
                          "Key name: R1.intra.example.com\nKey type: RSA KEYS",
                          "client ap-03 {\n    ipaddr = 10.1.0.3\n    secret = @@AP_SHARED_SECRET@@\n}",
                          'conn = oracledb.connect(user=user, password=pw, dsn="ops-db.fleet.local/OPSPRD")',
                          'conn = oracledb.connect(user=user, password=pw, dsn="ofp-db.ops.internal/OFPDB1")'))

    def test_tables_as_people_paste_them_a_secret_in_later_messages_and_more_words(self):
        """A credential's column in a table drawn with boxes under a file's line numbers, a TSV under
        Claude Code's ⎿ (its rows indented under the mark) whose first cell holds a comma, a Japanese
        header that joins its words (初期パスワード), imapsync's pass1 and pass2, an account's old and new
        password (`Konto alt neu`), a domain's AuthCode, Hindi's alarm code; a secret whose message names it
        and whose pieces follow, one token a message; Mongolian's нууц үг; codes for a keypad, a store or a
        magazine, in two groups (`614-207`); Indonesian's bagian 1 and 2; Spanish's "la pass … quedó";
        a literal joined on the lines below `PASSWORD =`; a key that signs messages; a short Wi-Fi key.
        Kept: where a value is kept, in words; a label's own word (`"login.password": "Senha"`); a MAC
        address; names listed under a plural (`Accepted Keys:`); a push's report; a phone's number."""
        self.assert_redacted_as((
            ("    12→┌──────────┬──────────┬────────────────┐\n    13→│ Cihaz    │ Kullanıcı│ Şifre          │\n"
             "    14→├──────────┼──────────┼────────────────┤\n    15→│ Modem    │ admin    │ Lale-Kapi-4471 │\n"
             "    16→└──────────┴──────────┴────────────────┘",
             "    12→┌──────────┬──────────┬────────────────┐\n    13→│ Cihaz    │ Kullanıcı│ Şifre          │\n"
             "    14→├──────────┼──────────┼────────────────┤\n    15→│ Modem    │ admin    │ «redacted» │\n"
             "    16→└──────────┴──────────┴────────────────┘"),
            ("● Read(handover/wlan.txt)\n  ⎿  Ort\tSSID\tWLAN-Schlüssel\tVLAN\n     Halle\tSTAFF\tq83HzvR2mWk7tPcY\t10",
             "● Read(handover/wlan.txt)\n  ⎿  Ort\tSSID\tWLAN-Schlüssel\tVLAN\n     Halle\tSTAFF\t«redacted»\t10"),
            ("Name, Vorname\tKürzel\tWindows-PW\nKlein, Jana\tjklein\tFalke&Ahorn82",
             "Name, Vorname\tKürzel\tWindows-PW\nKlein, Jana\tjklein\t«redacted»"),
            ("| 氏名 | 初期パスワード |\n|---|---|\n| Mori Ken | Sakura?Hafen31 |", "| 氏名 | 初期パスワード |\n|---|---|\n| Mori Ken | «redacted» |"),
            ("host1;user1;pass1;host2;user2;pass2\nimap.old.example;ana@shop.example;Kiwi&Regen4;outlook.office365.com;ana@shop.example;m4ple+Dach7",
             "host1;user1;pass1;host2;user2;pass2\nimap.old.example;ana@shop.example;«redacted»;outlook.office365.com;ana@shop.example;«redacted»"),
            ("Datum,Konto,alt,neu\n2025-02-03,svc_backup,Qw7-Lopx-Zz2,Birke&Wolke71", "Datum,Konto,alt,neu\n2025-02-03,svc_backup,«redacted»,«redacted»"),
            ("Domain,Registrar,AuthCode\nbaeckerei.example,Strato,rT4!kPz9Lw2q", "Domain,Registrar,AuthCode\nbaeckerei.example,Strato,«redacted»"),
            ("| शाखा | अलार्म कोड |\n|---|---|\n| Laden | 5930271 |", "| शाखा | अलार्म कोड |\n|---|---|\n| Laden | «redacted» |"),
        ))
        self.assert_redacted_as((  # a secret named, its pieces in the messages after it
            ("2025-03-02 23:41:07 <mara> the vpn pw for the lab is\n2025-03-02 23:41:19 <mara> Qm4v!Tr\n2025-03-02 23:41:22 <mara> 9zKp2w#",
             "2025-03-02 23:41:07 <mara> the vpn pw for the lab is\n2025-03-02 23:41:19 <mara> «redacted»\n2025-03-02 23:41:22 <mara> «redacted»"),
            ("Ana Souza  10:42 AM\nhere is the new channel manager api token\nAna Souza  10:43 AM\nw8KQ2mZtR4vLpX9n\nAna Souza  10:43 AM\nT3cY7bHs1uJf6GdE",
             "Ana Souza  10:42 AM\nhere is the new channel manager api token\nAna Souza  10:43 AM\n«redacted»\nAna Souza  10:43 AM\n«redacted»"),
        ))
        self.assert_redacted_as((  # words: Mongolian's, codes for a store, Indonesian's parts, Spanish's "quedó"
            ("Starlink роутерын админ нууц үг: Tal-Nutag-7788 . Хуучин нь ажиллахгүй", "Starlink роутерын админ нууц үг: «redacted» . Хуучин нь ажиллахгүй"),
            ("Koden till förrådet vid verkstaden har ändrats till 48213907 från måndag.", "Koden till förrådet vid verkstaden har ändrats till «redacted» från måndag."),
            ("kode gudang (bahan peledak) sekarang 614-207, kode lama tidak berlaku.", "kode gudang (bahan peledak) sekarang «redacted», kode lama tidak berlaku."),
            ("el código del teclado del polvorín es 7740219.", "el código del teclado del polvorín es «redacted»."),
            ("Rina: passwordnya aku kirim 2 bagian\nRina: bagian 1: Kerbau31\nRina: bagian 2: xT7qLmv",
             "Rina: passwordnya aku kirim 2 bagian\nRina: bagian 1: «redacted»\nRina: bagian 2: «redacted»"),
            ('la pass del wifi del casino quedó "Quillay%Norte44" con mayúscula', 'la pass del wifi del casino quedó "«redacted»" con mayúscula'),
            ('static final String SFTP_PASSWORD =\n    "Lq7rTnW2"\n    + "zB9xK4pM";', 'static final String SFTP_PASSWORD =\n    "«redacted»"\n    + "«redacted»";'),
            ("message_hmac_key = 3f9c2a7d1e5b8c4f6a0d2e9b7c1f3a5d8e6b4c2a0f9d7e5c3b1a8f6d4e2c0b9a",
             "message_hmac_key = «redacted»"),
            ("<protected>false</protected><keyMaterial>Nova33!</keyMaterial>", "<protected>false</protected><keyMaterial>«redacted»</keyMaterial>"),
        ))
        self.assert_kept(("| System | Benutzer | Passwort |\n|---|---|---|\n| NAS | it@shop.example | en el gestor |\n"
                          "| Drucker | Administrator | sobre cerrado en caja fuerte |",
                          "システム\tユーザー名\tパスワード\nFirewall\troot\tBitwarden参照",
                          '"login.password": "Senha",',
                          "<tr><td>DC01</td><td>10.0.13.31</td><td>Windows Server 2019</td><td>e0:79:25:01:f5:b0</td></tr>",
                          "$ salt-key -L\nAccepted Keys:\ndb01.lab.lan\nweb02.lab.lan",
                          "remote: - Push cannot contain secrets\nremote:   —— GitHub Personal Access Token ——\nremote:     locations:\n"
                          "remote:       - commit: 1429879d032477762c9c1075fa5a46e935b7a151",
                          "the door code changed in 2025-11; for the gate call 555-1234 first",
                          "secret := &corev1.Secret{}  // the informer fills it"))

    def test_a_mnemonic_as_a_backup_card_lays_it_out(self):
        """A wallet's mnemonic in any language as people copy it from its card: numbered lines, a grid
        of numbered columns, a table's cells, one word a line under a word for it, its accents written
        apart (NFKD, as wallets write them), a header line of small words above it. Kept: a word list in
        alphabetical order (an excerpt of the list itself), twelve words one a line under no word for a
        seed and unnumbered, a list of short kana words."""
        spanish = ["grumo", "radical", "máquina", "lesión", "puré", "enchufe", "envase", "testigo", "negocio", "abrazo", "mina", "flor"]
        numbered = "Frase de recuperación:\n" + "\n".join(f"{n}. {w}" for n, w in enumerate(spanish, 1))
        decomposed = unicodedata.normalize("NFKD", "kelimeler sırasıyla:\n\n" + "\n".join(spanish) + "\n\ndanke!")
        grid = "Wallet Backup\n\n" + "\n".join(f" {n}. {spanish[n - 1]:<10} {n + 6}. {spanish[n + 5]}" for n in range(1, 7))
        table = "Seed (Raster):\n" + "\n".join("| " + " | ".join(f"{w:<9}" for w in spanish[r:r + 4]) + " |" for r in (0, 4, 8))
        header = "backup seed\nsfida penombra sagoma espresso odierno strappo onta selettivo anca scuola spargere covato"
        for text in (numbered, decomposed, grid, table, header):
            with self.subTest(text=text[:40]):
                redacted = cc.redact(text)[0]
                self.assertFalse([word for word in ("radical", "enchufe", "testigo", "abrazo", "penombra", "selettivo") if word in redacted], redacted)
        self.assert_kept(("BIP-39 list, first words:\n" + "\n".join(sorted(spanish)),
                          "\n".join(["alpha", "bravo", "zulu", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"]),
                          "いぬ　ねこ　そら　つき　さくら　かわ　やま　ほし　うみ　はな　とり　りんご"))

    def test_a_wifi_key_in_capitals_a_code_between_signs_and_short_words_for_a_password(self):
        """A Wi-Fi key in capitals and digits after a word for a password in any language (密码：, Κωδικός:,
        la chiave è), a door's code between a keypad's signs (`#1952443#`), a device's login written
        `admin/…`, a personal access token after PAT, French chat's mdp and "mot de pass c …"; a password
        spelled out (characters apart, the NATO alphabet) under a word for it; a word and digits as a
        message's one token after one that names a password. Kept: a GPG key's id in hex, base64 whose
        letters spell mdp, paths under admin/ and root/, letters apart that spell no secret."""
        self.assert_redacted_as((
            ("纳克索斯酒店的无线网络：KALLIOPE-GUESTS，密码：QWRTN47PXKM2。早餐时间 7:30", "纳克索斯酒店的无线网络：KALLIOPE-GUESTS，密码：«redacted»。早餐时间 7:30"),
            ("Staff Wi-Fi: NAXOS-STAFF · Κωδικός: 58HKTRWQ2ZPD", "Staff Wi-Fi: NAXOS-STAFF · Κωδικός: «redacted»"),
            ('La rete Wi-Fi è "Ospiti" e la chiave è 3DDK7TQWZNRB.', 'La rete Wi-Fi è "Ospiti" e la chiave è «redacted».'),
            ("上海团队明天到，酒店侧门密码是 #2863554#，请转告导游。", "上海团队明天到，酒店侧门密码是 «redacted»，请转告导游。"),
            ("Nikos: the NAS is admin/tRvq8Hs@K2mPx7 and the DVR is on the shelf", "Nikos: the NAS is admin/«redacted» and the DVR is on the shelf"),
            ("the POS code is in azure devops, PAT k3jv9bq2mx7tw4nz8rp5yh6fd1cs0ag2lue9o4wi with code read",
             "the POS code is in azure devops, PAT «redacted» with code read"),
            ("le mot de pass c LavandeNice47 normalement, sinon essaie avec un ! a la fin", "le mot de pass c «redacted» normalement, sinon essaie avec un ! a la fin"),
        ))
        self.assert_redacted_as((  # spelled out, under a word for it; a word and digits alone as a message's one token
            ('Transcript (Eleni):\n"ok Thomas the password, I spell it, P-i-r-a-e-u-s-7-4, capital P"',
             'Transcript (Eleni):\n"ok Thomas the password, I spell it, «redacted», capital P"'),
            ("agent spelled the temp password: capital kilo, echo, capital romeo, seven, tango, capital alpha, two",
             "agent spelled the temp password: «redacted»"),
            ("[05/08/2025, 10:11:02] Dimitra: ο κωδικός του υπολογιστή: m a r e 4 1 9 n a x o s", "[05/08/2025, 10:11:02] Dimitra: ο κωδικός του υπολογιστή: «redacted»"),
            ("Karim, [09.05.2025 18:31]\nle mot de passe de la compta, je te l'envoie à toi\nKarim, [09.05.2025 18:31]\nsoleil47\nKarim, [09.05.2025 18:32]\n9cigale",
             "Karim, [09.05.2025 18:31]\nle mot de passe de la compta, je te l'envoie à toi\nKarim, [09.05.2025 18:31]\n«redacted»\nKarim, [09.05.2025 18:32]\n«redacted»"),
        ))
        self.assert_kept(("[user]\n\tsigningkey = AB70621B5B9FD6F8", "the password rules: a b c d e f g h are the grades, not letters", 'favicon: "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAMDp7bYOuDDbyAEIp3U49MTxkM0x9NvSDPCcXC68qHIneDBUmTzx19KY"',
                          "see admin/settings.py and root/.bashrc for the defaults", "the router prints TLSV13 and WPA2PSK on its label"))

    def test_a_password_in_a_sentence_that_logs_in(self):
        """A password's shape (letters, digits and a sign) in a sentence that logs in, in any language: after
        its verb (log into, sign in, entrare con, connecte-toi), an account's address and a connector
        (`… com Floripa*6722`), or before a verb that comes last (`mit … anmelden`); before a word for a
        password when what follows says it is one (`« Soleil2019* » : c'est le mot de passe`). Kept: a
        login sentence's chords and build numbers, a plugin's version, a router's prompt before a word
        for a password, a value before a login verb in English."""
        self.assert_redacted_as((
            ("> sign into the mikrotik (https://10.9.0.1), olek / Wiatrak7&9 and dump the DHCP leases for me",
             "> sign into the mikrotik (https://10.9.0.1), olek / «redacted» and dump the DHCP leases for me"),
            ("e pro painel da Intelbras é joao.m@pousada.com.br com Mangue*4410 , beleza?", "e pro painel da Intelbras é joao.m@pousada.com.br com «redacted» , beleza?"),
            ("Log in at http://localhost:3000 with `dev@acme.io` and `Harbor&2231` (seeded from prod)",
             "Log in at http://localhost:3000 with `dev@acme.io` and `«redacted»` (seeded from prod)"),
            ("« Mistral2020* » : c'est le mot de passe que Paul a mis partout", "« «redacted» » : c'est le mot de passe que Paul a mis partout"),
            ("Bitte mit Kiefer#8812 anmelden, der Benutzer ist admin", "Bitte mit «redacted» anmelden, der Benutzer ist admin"),
            ("per il gestionale devi entrare con Vesuvio&1944, l'utente è la partita iva", "per il gestionale devi entrare con «redacted», l'utente è la partita iva"),
        ))
        self.assert_kept(("The login page rejects anything with a # in it, e.g. C#10 or F#7 chords",
                          "Sign in to the console to see build#4412 and PR#9921 in the queue",
                          "steps:\n  - plugins:\n      - docker-login#v3.0.0:\n          username: acmebuild\n          password-env: DOCKER_PASSWORD",
                          "SW-CORE01# show tech-support | include secret|password",
                          "Ship Node#18.2 first, then log in to check the dashboard"))

    def test_more_languages_words_for_a_key_and_a_secrets_halves(self):
        """Hungarian's word for a key (`titkos kulcsa:`, `tokenjének`), Greek's for a password as Latin letters
        write it (`kwdikos`), a secret's halves in more languages
        (French `Le début …` / `Et la fin :`, Spanish `segunda mitad:`); a word beyond ASCII is never a
        machine's token (`Nyilvános kulcs a … aláírás-ellenőrzéséhez:` over a public key is kept)."""
        self.assert_redacted_as((
            ("Bence, a SimplePay éles titkos kulcsa: Qw8RtY2uIo9PaS7dF4gH6jK1lZ3xC5vB – a merchant ID maradt.",
             "Bence, a SimplePay éles titkos kulcsa: «redacted» – a merchant ID maradt."),
            ("Objet : accès portail (2)\nLe début du mot de passe : Tamise_Seine\nEt la fin : 71MeuseLoire_442",
             "Objet : accès portail (2)\nLe début du mot de passe : «redacted»\nEt la fin : «redacted»"),
            ("la contraseña del portal: primera mitad Kx7pQ2Zz, segunda mitad: Lm9RtZ4w",
             "la contraseña del portal: primera mitad «redacted», segunda mitad: «redacted»"),
            ("8wma o kwdikos gia to synology einai 7r0p1k-Meltemi , mou to eipe o nikos", "8wma o kwdikos gia to synology einai «redacted» , mou to eipe o nikos"),
            ('simplepay_titkos_kulcs = "Qw8RtY2uIo9PaS7dF4gH6jK1lZ3xC5vB"', 'simplepay_titkos_kulcs = "«redacted»"'),
        ))
        self.assert_kept(("Nyilvános kulcs a jegyellenőrző alkalmazás aláírás-ellenőrzéséhez:\n-----BEGIN PUBLIC KEY-----\n"
                          "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEdMo5507f8MDwlwmwrpX/B4PyTCD6\n-----END PUBLIC KEY-----",
                          "À la fin : on redémarre le serveur", "a kulcs a lábtörlő alatt van"))

    def test_a_mnemonic_in_any_script_on_one_line_and_a_header_with_a_numbers_sign(self):
        """A mnemonic on one line under a word for it in Cyrillic, hangul, Chinese characters, or with commas
        between its words, and with a line of prose after it; a table whose header holds a number's sign
        (`N° client`). Kept: a word list under its file's name (`english.txt` ⏎ `abandon` …), a shopping
        list in Cyrillic."""
        self.assert_redacted_as((
            ("Сид-фраза тестового кошелька:\n`ветер шапка лодка крыша ответ пруд мельница зонт рыба книга поле звезда`\nНе коммить!",
             "Сид-фраза тестового кошелька:\n`«redacted»`\nНе коммить!"),
            ("교수님, 실험용 지갑 시드 문구입니다:\n바다 연필 가방 소리 나무 구름 시계 우산 하늘 의자 기차 사과\n확인 후 삭제 부탁드려요.",
             "교수님, 실험용 지갑 시드 문구입니다:\n«redacted»\n확인 후 삭제 부탁드려요."),
            ("助记词（研究钱包，勿外传）：铝 抢 泰 旱 邵 马 酸 项 辛 惨 夺 插", "助记词（研究钱包，勿外传）：«redacted»"),
            ("as palavras são: cavalo, janela, laranja, tecido, folha, barco, prato, milho, farol, cinto, troca, vento. Usa a MetaMask.",
             "as palavras são: «redacted». Usa a MetaMask."),
            ("| Fournisseur | Identifiant | Mot de passe | N° client |\n|---|---|---|---|\n| Zeiss | acquisti@lab.uni.edu | walnut714 | 6528096 |",
             "| Fournisseur | Identifiant | Mot de passe | N° client |\n|---|---|---|---|\n| Zeiss | acquisti@lab.uni.edu | «redacted» | 6528096 |"),
        ))
        self.assert_kept(("$ head -n 12 mnemonic/wordlist/english.txt\nabandon\nability\nable\nabout\nabove\nabsent\nabsorb\nabstract\nabsurd\nabuse\naccess\naccident",
                          "Купить: молоко хлеб масло сыр яйца мука сахар соль чай кофе рис гречка"))

    def test_rows_of_accounts_as_a_csv_writes_them_and_recovery_codes_as_services_print_them(self):
        """Rows of a login and a password as a CSV, a TSV or a `;` list writes them, the login first or after
        other cells, with no header (a password with a sign in one row at least); an e-mail address that
        starts a CSV's next row is no wrapped rest of the password above it. Recovery codes as Google,
        Bitwarden and GitLab print them. Kept: CSVs of names, roles and dates."""
        self.assert_redacted_as((
            ("bmc-node06,10.16.234.76,labadmin,Vortex%2021\nnas02,10.27.31.71,root,kkmtOaG5s16e@cZU\nws27,10.1.35.49,root,quartz_cobalt_galaxy82",
             "bmc-node06,10.16.234.76,labadmin,«redacted»\nnas02,10.27.31.71,root,«redacted»\nws27,10.1.35.49,root,«redacted»"),
            ("temp passwords for the new students\njsilva@usp.lab,Recife@22#\nacosta@etu.univ-lyon.lab,QE-HF@nikon\nmlima@studenti.unimi.lab,saffron_biscuit_igloo",
             "temp passwords for the new students\njsilva@usp.lab,«redacted»\nacosta@etu.univ-lyon.lab,«redacted»\nmlima@studenti.unimi.lab,saffron_biscuit_igloo"),
            ("BACKUP VERIFICATION CODES\n\nlab.calendar@example.edu\n\n1. 2941 6630      6. 4820 1175\n2. 7713 0592      7. 3358 9046",
             "BACKUP VERIFICATION CODES\n\nlab.calendar@example.edu\n\n1. «redacted»      6. «redacted»\n2. «redacted»      7. «redacted»"),
            ("Bitwarden two-step login recovery code for the org owner:\nQX7M 2KDA PLWN 8ZRT CV3H 9BNE", "Bitwarden two-step login recovery code for the org owner:\n«redacted»"),
        ))
        self.assert_kept(("name,email,team\nalice,alice@example.com,platform\nbob,bob@example.com,payments",
                          "user;role;last_login\njdoe;admin;2025-03-01\nasmith;viewer;2025-02-11",
                          "id,slug,status\n1,release-2024-q1,done\n2,hotfix-login-v2,open",
                          "Recovery codes are shown once; keep them in the vault.\n\nSee the runbook for more."))

    def test_a_code_read_out_in_groups(self):
        """A door's, an alarm's, a safe's code in groups of digits (`5521-8834`, `2841 7730`, `24 14 64 11`,
        one digit apart `4 7 2 9`) in a sentence that names a code and a place, as a code in one piece is.
        Kept: a date, a phone's number in groups, a ticket's number after "is", an amount."""
        self.assert_redacted_as((
            ("14/02/2025, 08:11 - Carmen Ruiz: Inés, el código de la alarma nuevo\n14/02/2025, 08:11 - Carmen Ruiz: 4 7 2 9",
             "14/02/2025, 08:11 - Carmen Ruiz: Inés, el código de la alarma nuevo\n14/02/2025, 08:11 - Carmen Ruiz: «redacted»"),
            ("김지우: 도어락 마스터 번호는 2841 7730 입니다 (끝에 * 누르세요)", "김지우: 도어락 마스터 번호는 «redacted» 입니다 (끝에 * 누르세요)"),
            ("code porte de service : 118 903 puis #", "code porte de service : «redacted» puis #"),
            ("[30/06/2025, 22:41:03] Nikos: alarm code for the storage: 31 27 85 40", "[30/06/2025, 22:41:03] Nikos: alarm code for the storage: «redacted»"),
        ))
        self.assert_kept(("the door code changed on 2025-03-21 and the ticket is 4412-2231",
                          "call the alarm company on 0612 34 56 78 about the door code",
                          "the door code is with the front desk, call 138 1234 5678",
                          "the safe in room 12 holds 25 000 EUR and the door code is with Maria"))

    def test_codes_and_passwords_in_croatian_slovene_czech_and_a_safe_in_italian(self):
        """A code's words and the places it opens in the languages of the Adriatic's small hotels (`kod za
        ulaz`, `koda nabiralnika`, `kombinace` of a locker, `šifra od ormara`), an Italian safe
        (`cassaforte`), a Swedish front door (`ytterdörren`), a safe that "abre com" a code, a Korean door
        lock's `비번`; Croatian's and Slovene's words for a
        password (`lozinka`, `geslo`, `šifra`). Kept: a room's number, an invoice's, a price."""
        self.assert_redacted_as((
            ("Napomena: ulaz za osoblje od ponedjeljka ima novi kod 582914", "Napomena: ulaz za osoblje od ponedjeljka ima novi kod «redacted»"),
            ("- soba 6: ključ v nabiralniku, koda nabiralnika 730415", "- soba 6: ključ v nabiralniku, koda nabiralnika «redacted»"),
            ("šatna personál: skříňka č. 9, kombinace 604218", "šatna personál: skříňka č. 9, kombinace «redacted»"),
            ("Marija: koja je šifra od ormara u praonici? ja imam 551902 al ne radi", "Marija: koja je šifra od ormara u praonici? ja imam «redacted» al ne radi"),
            ("la combinazione della cassaforte in reception è 418807", "la combinazione della cassaforte in reception è «redacted»"),
            ("Hej! koden 318840 till ytterdörren fungerar inte", "Hej! koden «redacted» till ytterdörren fungerar inte"),
            ("Ana: nova lozinka za booking extranet je Galeb2026#!", "Ana: nova lozinka za booking extranet je «redacted»"),
            ("Ribarnica ima web narudžbe. Login: nabava@example.hr, šifra Kvarner&77. Narudžbe do 18h.",
             "Ribarnica ima web narudžbe. Login: nabava@example.hr, šifra «redacted». Narudžbe do 18h."),
            ("o cofre do escritório abre com 31-07-62, gira duas vezes", "o cofre do escritório abre com «redacted», gira duas vezes"),
            ("3층 도어락 비번은 5521*8834 입니다", "3층 도어락 비번은 «redacted» 입니다"),
        ))
        self.assert_kept(("- soba 214 odjava u 5:00, taxi naručen, račun 2024-118830",
                          "kod za popust na web shopu vrijedi do 31.08., cijena apartmana 129 EUR",
                          "la cassaforte della camera 118 è rotta, chiamare il tecnico al 040 556 2290"))

    def test_what_its_line_says_is_a_public_key_a_tail_of_xs_and_a_migrations_name_are_kept(self):
        """Kept: a value its line says is a public key, in English or another language (`Ed25519 public key
        (hex) for the signer: …`, minisign's key id and key under `chiave pubblica …:`); a placeholder whose
        tail is x's (`123456:ABC-xxxxx`, `Acme-XXXX-XXXX`); a migration's name that starts with digits under
        a line that names a token. Still caught: a signer's private key on the line after a public one."""
        self.assert_kept((
            "Ed25519 public key (hex) for the release-signer: 5c0f2a9d8e7b6c4a3f1e0d9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a",
            "Luca: chiave pubblica minisign per i binari dell'agent:\nuntrusted comment: minisign public key 4F1A2B3C5D6E7F80\n"
            "RWQf6LRCGA9i53mlYecO4IzT51TGPpvWucNSCh1CBM0QTaLn73Y7GFO3",
            "quando riempi il .env metti così: TELEGRAM_BOT_TOKEN=123456:ABC-xxxxx (quello vero è in Bitwarden)",
            "La password temporanea arriva via SMS, il formato è Acmecorp-XXXX-XXXX, da cambiare subito.",
            "$ python manage.py showmigrations accounts\naccounts\n [X] 0003_remove_plaintext_password\n [ ] 0004_api_token_rotation"))
        self.assert_redacted({"public key (hex): 5c0f2a9d8e7b6c4a3f1e0d9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a\n"
                              "signing-key: 8c1f04b2e9a7d35c6f0e2a18b4d97c3e5a0f6b2d8e1c4a7f9b3d5e0c2a6f8b1d":
                              ["8c1f04b2e9a7d35c6f0e2a18b4d97c3e5a0f6b2d8e1c4a7f9b3d5e0c2a6f8b1d"]})

    def test_what_code_joins_to_a_redacted_literal_is_its_secret(self):
        """A literal that code joins to a redacted one is the same secret's part, whatever its shape, once
        it could be one: joined by a method (Kotlin's `.plus`, Objective-C's `stringByAppendingString:`), in
        a call that joins its arguments (PowerShell's `-join`, Haskell's `T.concat`), by nothing (adjacent
        literals), on the next line after VBA's `& _`, or appended later to the variable that was given it
        (PHP's `.=`, Rust's `push_str`). Kept: what a join adds that is no secret's part (a URL's rest, a
        scheme's word), a comma between the arguments of a call that joins nothing."""
        self.assert_redacted({
            'val apiKey = "Qm7vX2kLp9ZrT4wN8bYc".plus("Jx5_Rt")': ["Qm7vX2kLp9ZrT4wN8bYc", "Jx5_Rt"],
            'NSString *secret = [@"Hq_83x" stringByAppendingString:@"Qm7vX2kLp9ZrT4wN8bYc"];': ["Qm7vX2kLp9ZrT4wN8bYc", "Hq_83x"],
            '$token = -join ("Hs8_Kp", "Zq4mVx9LtR2wN7bYcF3d")': ["Hs8_Kp", "Zq4mVx9LtR2wN7bYcF3d"],
            'apiSecret = T.concat ["Rt5_Lq", "N8bYcF3dQm7vX2kLp9Zr"]': ["Rt5_Lq", "N8bYcF3dQm7vX2kLp9Zr"],
            'sshpass -p "Kp4mVx9QzRtLw""88-4120" ssh ops@10.0.0.4 uptime': ["Kp4mVx9QzRtLw", "88-4120"],
            '#define MQTT_PASS   "Wd4Rt8Vz1Yb6Nc3G" "Tq_81x"': ["Wd4Rt8Vz1Yb6Nc3G", "Tq_81x"],
            'Dim pwd As String\npwd = "T4wN8bYcQm7vX2kLp9Zr" & _\n      "9@kQ2z"': ["T4wN8bYcQm7vX2kLp9Zr", "9@kQ2z"],
            '$secret = "N8bYcF3dQm7vX2kLp9Zr";\n$secret .= "x4_Tq9";\n$db = new PDO($dsn, "app", $secret);': ["N8bYcF3dQm7vX2kLp9Zr", "x4_Tq9"],
            'let mut key = String::from("Lp9ZrT4wN8bYcQm7vX2k");\nkey.push_str("Hq_83x");': ["Lp9ZrT4wN8bYcQm7vX2k", "Hq_83x"]})
        for text, kept in (('DSN = "postgres://app:" + "Qm7vX2kLp9ZrT4wN8bYc" + "@db.internal:5432/app"', '"@db.internal:5432/app"'),
                           ('headers = {"Authorization": "Bearer " + "Zq4mVx9LtR2wN7bYcF3dQm7v"}', '"Bearer "'),
                           ('client.login("deploy-bot", "Zq4mVx9LtR2wN7bYcF3d")', '"deploy-bot"'),
                           ('$ wpa_passphrase "Gartenhaus" "Zq4mVx9LtR2wN7bYcF3d"', '"Gartenhaus"')):
            with self.subTest(text=text[:30]):
                redacted = cc.redact(text)[0]
                self.assertIn(cc.REDACTED, redacted)
                self.assertIn(kept, redacted)

    def test_more_languages_join_a_secrets_literals(self):
        """Strings that code joins into a secret, no part of it a secret alone, in more languages' ways:
        Lua's `table.concat({…})` and lower-case `string.format("%s%s", …)`, Jinja's `[…] | join("")`,
        Julia's `*`, Ruby's `<<` on the variable given the first part, VBA's constants joined by `&`, CMake's
        `set(…)` read as `${A}${B}`, Terraform's locals as `${local.a}${local.b}`, a workflow's env values
        (`TK_A: …` under `env:`) joined in a `run:`; a key in hex split in two (no one splits a digest)."""
        self.assert_redacted({
            'local secret = table.concat({"Wd4Rt8", "Vz1Yb6Nc3G", "Hq_8x3"})': ["Wd4Rt8", "Vz1Yb6Nc3G", "Hq_8x3"],
            'local key = string.format("%s%s", "b7c21e09a4f5", "3d8e6a0c9b1f72e4d5a8")': ["b7c21e09a4f5", "3d8e6a0c9b1f72e4d5a8"],
            'api_key: "{{ [\'Rt8Vz1Yb6Nc3Gf\', \'Wd4Hq9Lm2Xr5\'] | join(\'\') }}"': ["Rt8Vz1Yb6Nc3Gf", "Wd4Hq9Lm2Xr5"],
            'const TOKEN = "e09a4f5b7c21" * "3d8e6a0c9b1f72e4d5a8"': ["e09a4f5b7c21", "3d8e6a0c9b1f72e4d5a8"],
            'token = +"ghx_4f5b7c21e09a4f5b7"\ntoken << "Vz1Yb6Nc3G"\ntoken << "Hq8x3Lm2"': ["Vz1Yb6Nc3G", "Hq8x3Lm2"],
            'Const P1 = "9b1f72e4d5a83d8e"\nConst P2 = "6a0c4f5b7c21e09a"\nurl = "https://api.example-weather.com/v1/now?q=Arusha&appid=" & P1 & P2': ["9b1f72e4d5a83d8e", "6a0c4f5b7c21e09a"],
            'set(SIGN_KEY_A "d5a83d8e6a0c9b1f")\nset(SIGN_KEY_B "72e4c21e09a4f5b7")\nadd_compile_definitions(SIGN_KEY="${SIGN_KEY_A}${SIGN_KEY_B}")':
                ["d5a83d8e6a0c9b1f", "72e4c21e09a4f5b7"],
            'locals {\n  t1 = "dop_v1_9b1f72e4d5a83d8e6a0c"\n  t2 = "4f5b7c21e09a3d8e6a0c9b1f"\n  token = "${local.t1}${local.t2}"\n}':
                ["dop_v1_9b1f72e4d5a83d8e6a0c", "4f5b7c21e09a3d8e6a0c9b1f"],
            'env:\n  PART_A: npm_Vz1Yb6Nc3GfWd4\n  PART_B: Hq9Lm2Xr5Kp7Rt8Tq3Zs6Jm\nsteps:\n  - run: echo "//npm.pkg.example.internal/:_authToken=${PART_A}${PART_B}" > ~/.npmrc':
                ["npm_Vz1Yb6Nc3GfWd4", "Hq9Lm2Xr5Kp7Rt8Tq3Zs6Jm"]})
        self.assert_kept(('banner = "=" * 40', 'local path = table.concat({"src", "lib", "init.lua"}, "/")',
                          'env:\n  NODE_ENV: production\n  LOG_LEVEL: info\nsteps:\n  - run: echo "${NODE_ENV}${LOG_LEVEL}"'))

    def test_a_string_builder_given_a_secrets_parts_one_statement_at_a_time(self):
        """A string builder given a secret's parts one statement at a time, and its result passed on: Go's
        `sb.WriteString(…)` then `sb.String()`, PHP's `$k .= '…'`, Scala's `sb ++= …` then `sb.result()`, a C++
        stream's `os << … << …` then `os.str()`, Dart's cascade `..write(…)` under `StringBuffer()`. Kept: a
        builder given words, and a stream given a message."""
        self.assert_redacted({
            'var b strings.Builder\nb.WriteString("Tq9Lm2Xr5K")\nb.WriteString("p7Wd4Rt8Vz")\nclient := api.New(b.String())': ["Tq9Lm2Xr5K", "p7Wd4Rt8Vz"],
            "$secret = 'whsec_Hq9Lm2';\n$secret .= 'Xr5Kp7Rt8Tq3';\n$hook = new Webhook($secret);": ["Xr5Kp7Rt8Tq3"],
            'val b = new StringBuilder\nb ++= "Vz1Yb6Nc3Gf"\nb ++= "Wd4Hq9Lm2X"\nval password = b.result()': ["Vz1Yb6Nc3Gf", "Wd4Hq9Lm2X"],
            'std::ostringstream key;\nkey << "9b1f72e4d5a8" << "3d8e6a0c4f5b";\nhmac.init(key.str());': ["9b1f72e4d5a8", "3d8e6a0c4f5b"],
            "final buffer = StringBuffer()\n  ..write('Rt8Vz1Yb6Nc3')\n  ..write('Gf5Hj0Ke9Ua2');\nfinal apiSecret = buffer.toString();": ["Rt8Vz1Yb6Nc3", "Gf5Hj0Ke9Ua2"]})
        self.assert_kept(('var b strings.Builder\nb.WriteString("Hello, ")\nb.WriteString("world")\nfmt.Println(b.String())',
                          'std::ostringstream msg;\nmsg << "loaded " << "config.yaml";\nlog(msg.str());',
                          "final buffer = StringBuffer()\n  ..write('Order ')\n  ..write('shipped');\nprint(buffer.toString());"))

    def test_a_branch_that_gives_a_secrets_name_its_value_case_by_case(self):
        """A branch whose arms give a value, under a head that names a secret: Dart's switch expression, Kotlin's
        `when`, Ruby's `case … when … then`, Swift's `switch` in a getter, C#'s `x switch { … => … }`, Python's
        `match` with its return on the next line. Kept: a branch that gives messages, token types or cache keys."""
        self.assert_redacted({
            "String mapsKey(Region r) => switch (r) {\n  Region.eu => 'Zq8Lm2Xr5Kp9Tw3Vb6NcYd',\n  Region.us => 'Hq9Lm2Xr5Kp7Rt8Tq3Wd4',\n};": [
                "Zq8Lm2Xr5Kp9Tw3Vb6NcYd", "Hq9Lm2Xr5Kp7Rt8Tq3Wd4"],
            'fun smtpPasswordFor(site: Site): String = when (site) {\n    Site.PORTO -> "Gaivota!Ribeira77"\n    else -> error("none")\n}': ["Gaivota!Ribeira77"],
            'def ftp_password(branch)\n  case branch\n  when "north" then "Heron.Quay42"\n  when "south" then "4f9c2e7a1b8d3e6f"\n  end\nend': [
                "Heron.Quay42", "4f9c2e7a1b8d3e6f"],
            'var licenseKey: String {\n    switch self {\n    case .beta: return "Vz1Yb6Nc3Gf5Hj0Ke9Ua2Rt"\n    }\n}': ["Vz1Yb6Nc3Gf5Hj0Ke9Ua2Rt"],
            'string secret = tenant switch\n{\n    "a" => "Wd4Hq9Lm2Xr5Kp7Rt8Tq3Vz1",\n    _ => throw new ArgumentException(),\n};': ["Wd4Hq9Lm2Xr5Kp7Rt8Tq3Vz1"],
            'def api_token(env):\n    match env:\n        case "prod":\n            return "Kp7Rt8Tq3Wd4Hq9Lm2Xr5Vz"': ["Kp7Rt8Tq3Wd4Hq9Lm2Xr5Vz"]})
        self.assert_kept(('func message(for code: Int) -> String {\n    switch code {\n    case 401: return "Invalid token"\n    case 403: return "Password expired"\n    }\n}',
                          'String tokenType(Kind k) => switch (k) {\n  Kind.bearer => "Bearer",\n  Kind.basic => "Basic",\n};',
                          'def cache_key_for(user)\n  case user.role\n  when :admin then "admins:list:v2"\n  end\nend',
                          'val secretName = when (env) {\n    "prod" -> "billing-api-prod-credentials"\n    else -> "billing-api-dev"\n}'))

    def test_basic_auth_encoded_through_a_call_that_makes_its_bytes(self):
        """user:password given to a base64 encoder through a call that makes its bytes (Dart's
        `base64Encode(utf8.encode('…'))`, .NET's `ToBase64String(Encoding.UTF8.GetBytes("…"))`), and an API key
        given as Basic auth's user with no password (`b64encode(b"key:")`). Kept: a build's name and version
        encoded, a name that is no key given as the user."""
        self.assert_redacted({
            "final auth = 'Basic ${base64Encode(utf8.encode('kiosk:harbour.Lime58'))}';": ["harbour.Lime58"],
            'var h = "Basic " + Convert.ToBase64String(Encoding.UTF8.GetBytes("ledger@example.org:f2c91b07aa4e"));': ["f2c91b07aa4e"],
            's.headers["Authorization"] = "Basic " + base64.b64encode(b"Qm9x3TtXk27LcwPz8RfNa1vY4sHe:").decode()': ["Qm9x3TtXk27LcwPz8RfNa1vY4sHe"]})
        self.assert_kept(('Convert.ToBase64String(Encoding.UTF8.GetBytes("build:2025.04.1"))',
                          'base64.b64encode(b"application_settings_reader:")'))

    def test_a_key_pairs_private_half_and_a_key_named_with_its_hex(self):
        """A key pair's private half named alone (Noise's `static_private:`, `node_priv =`) when a machine made it,
        and a service's key whose name says it is written in hex (`#define FW_AES_KEY_HEX "…"`). Kept: flags that
        say private, a path to a private key."""
        self.assert_redacted({
            "noise:\n  static_private: 9c1e4f7a2b8d3e6f0a5c9b2d7e4f1a8c3b6d9e2f7a1c4e8b0d3f6a9c2e5b8d1f4a": [
                "9c1e4f7a2b8d3e6f0a5c9b2d7e4f1a8c3b6d9e2f7a1c4e8b0d3f6a9c2e5b8d1f4a"],
            'node_priv = "Zq8Lm2Xr5Kp9Tw3Vb6NcYdHq9Lm2Xr5Kp7Rt8Tq3W="': ["Zq8Lm2Xr5Kp9Tw3Vb6NcYdHq9Lm2Xr5Kp7Rt8Tq3W="],
            '#define FW_AES_KEY_HEX   "3B6D9E2F7A1C4E8B0D3F6A9C2E5B8D1F"': ["3B6D9E2F7A1C4E8B0D3F6A9C2E5B8D1F"]})
        self.assert_kept(("is_private: true", '  "private": true,', "private_key_path: /etc/wireguard/wg0.key",
                          "make_private = 1", '#define FW_KEY_HEX_LEN   32'))

    def test_what_stands_where_a_secret_might_and_is_none_is_kept(self):
        """Kept: a price after a key's name, a login over a protocol, VBA's `Next` after a colon, a netrc's note in
        angle brackets, a user's name given to `-u`, a file a grep names, a description of a passphrase, a log
        line about a locked account, a test's digest of hex words, an empty setting under a token's placeholder, a
        flag after `POSTGRES_PASSWORD=<…>`, a note in parentheses, a Windows credential's target."""
        self.assert_kept((
            "the new ANTHROPIC_API_KEY lives in the env only, its monthly cap is $80/month",
            "vault login via OIDC works again, `vault login -method=oidc role=ops`",
            "    For Each ws In ThisWorkbook.Worksheets: ws.Unprotect pw: Next",
            "machine nexus.example.local\nlogin ci-reader\npassword <from the team vault: Nexus ci-reader>",
            '    - echo "$CI_REGISTRY_PASSWORD" | docker login -u "gitlab+deploy-token-42" --password-stdin registry.example.com',
            "src/Shop.Web/Pages/Account/ChangePassword.cshtml:7:@model ChangePasswordModel",
            'new policy: passphrases welcome ("four random words" style), 14 characters at least',
            '2025-05-02T10:11:12Z WARN auth: account "ops_lis_07" locked for 15 minutes',
            "  const res = await request(app).post('/hooks/gitea').set('X-Gitea-Signature', 'sha256=cafebabe').send(body);",
            "BOT_TOKEN=<your-bot-token>\nGUILD_CHANNEL_ID=\nLOG_LEVEL=info",
            "docker run -e POSTGRES_PASSWORD=<password> -e POSTGRES_DB=shop -p 5432:5432 postgres:16-alpine",
            'admin_password="(ask Rui for it, never commit it)"',
            "Credential Manager on lis-build02: TERMSRV/lis-build02, git:https://github.com"))

    def test_a_chats_answer_to_a_question_for_a_secret(self):
        """The first word of the message that answers another person's question for a password, a PIN or a code:
        a value someone chose, a machine's, a PIN's digits, a quoted passphrase asked for as one (Hindi, Dutch,
        Turkish, a Teams header on its own line). Kept: an answer that is a word or a place, a question about
        something else, a year."""
        self.assert_redacted({
            "[05/03/25, 8:40 pm] Arjun: bhai prod redis ka password kya hai?\n[05/03/25, 8:52 pm] Sofie: Vq7Lm2Xr5Kp9Tw3 — naya hai": ["Vq7Lm2Xr5Kp9Tw3"],
            "Pieter de Wit 22:31\nhet alarm in de loods gaat af, wat is de kode???\nAnouk Bakker 22:32\n582917 en dan de uit-knop": ["582917"],
            "[02.06.25 07:14] Emre: abi depo kartının şifresi neydi\n[02.06.25 07:16] Selin: 640258\n[02.06.25 07:16] Selin: kimseye verme": ["640258"],
            '[28/02/2025, 10:11] Lotte: wat was de passphrase van de backup-sleutel?\n[28/02/2025, 10:15] Bram: "otter lantaarn kiosk drempel"': [
                "otter lantaarn kiosk drempel"]})
        self.assert_kept(("[05/03/25, 8:40 pm] Arjun: where is the prod redis password kept?\n[05/03/25, 8:52 pm] Sofie: 1Password, vault Ops",
                          "[02.06.25 07:14] Emre: which ticket was the VPN password reset in?\n[02.06.25 07:16] Selin: INC-40217",
                          "[02.06.25 07:14] Emre: when did we change the wifi password?\n[02.06.25 07:16] Selin: 2024, in March",
                          "[02.06.25 07:14] Emre: what's the tracking code?\n[02.06.25 07:16] Selin: 812250"))

    def test_a_secret_read_out_in_groups(self):
        """A secret read out or written in groups under a word that names it, or a code with what it grants:
        a support call's groups with dots between, "dan", a Polish "Pierwsza: … Druga: …", a code given in
        three chat messages, groups of letters only among groups with digits. Kept: commits, serial numbers,
        type names, codes said not to be a login's, ids in a sentence about a password."""
        self.assert_redacted({
            "Agent: I'll read the SFTP password in groups of six. Ready?\nAnn: Go.\nAgent: qd4Lm2 ... X7wPzR ... nT8kVb ... and the last one Hz3cYq.": [
                "qd4Lm2", "X7wPzR", "nT8kVb", "Hz3cYq"],
            "Medewerker: ik geef het wachtwoord in stukjes van zes: Rk8mQz, dan 4vTn2L, dan Yp7wKd.": ["Rk8mQz", "4vTn2L", "Yp7wKd"],
            "Konsultant: podam kod odblokowujący w dwóch częściach. Pierwsza: K7PQ2XMA. Druga: 9RZV4TWD.": ["K7PQ2XMA", "9RZV4TWD"],
            "Ines 16:20\nle code d'accès du portail, en trois morceaux : TqWzNb\nInes 16:20\nVkRpMs\nInes 16:21\nx4Hd9L": ["TqWzNb", "VkRpMs", "x4Hd9L"]})
        self.assert_kept(("fixed the password reset flow in 4f2e9ab and 9c1e77d, see the PR",
                          "| NAS | Synology DS923+ | EW0009675 | 2027-01 |\n| router | Sagemcom | SC0976135 | n/a |  (admin password in the vault)",
                          "  PROCEDURE reset_password(p_login IN VARCHAR2);\n  FUNCTION  password_expired(p_login IN VARCHAR2) RETURN BOOLEAN;",
                          "Generated anonymisation codes: 2S4XDA, Z1ZL7O, W9KQ3B (blind marking, not login codes)",
                          "the password reset tickets are ids TK42B9, TK77C1 and TK90D3"))

    def test_dutch_and_egyptian_words_for_a_password_and_misspelt_german(self):
        """Dutch's `ww` (wachtwoord), Egyptian Arabic's باسورد and والباس, German's misspelt `Passowrt`."""
        self.assert_redacted({
            "hoi Joost, ww is brug-sluis-loup-7 (account ops@example.nl)": ["brug-sluis-loup-7"],
            "ادخل على السيستم، اليوزر hassan.psd والباس Nil3Delta?": ["Nil3Delta?"],
            "الباسورد بتاع الإيميل اتغير، بقى Tramwaj123%، حرف كبير في الأول": ["Tramwaj123%"],
            "Passowrt für den Drucker-Admin ist jetzt Qahwa-bonjour1171": ["Qahwa-bonjour1171"]})
        self.assert_kept(("ww 14: release planning, no deploys on friday",))

    def test_csharp_strings_joined_or_interpolated_and_a_vendor_key_a_wrap_cut(self):
        """C#'s `string.Concat("…", "…")`, an interpolated `$"{PartA}{PartB}"` of two constants and a `$"…"` literal
        with no hole; a vendor's key a terminal's wrap cut right after its prefix (`fold -w 48`). Kept: an
        interpolation of names given no string, a words' concatenation."""
        self.assert_redacted({
            'var smtpPass = string.Concat("harbour.lime.q", "uay.kestrel!");': ["harbour.lime.q", "uay.kestrel!"],
            'private const string PartA = "4f9c2e7a1b8d3e6f0a5c";\nprivate const string PartB = "9b2d7e4f1a8c";\n'
            'private static readonly string ApiToken = $"{PartA}{PartB}";': ["4f9c2e7a1b8d3e6f0a5c", "9b2d7e4f1a8c"],
            'private static readonly string ApiToken = $"Kp7Rt8Tq3Wd4Hq9Lm2Xr5Vz";': ["Kp7Rt8Tq3Wd4Hq9Lm2Xr5Vz"],
            "$ stripe config --list | fold -w 48\n[default]\nlive_mode_api_key = 'sk_live_Qm9x\n3TtXk27LcwPz8RfNa1vY'": ["sk_live_Qm9x", "3TtXk27LcwPz8RfNa1vY"]})
        self.assert_kept(('private static readonly string ApiToken = $"{tenant.Head}{tenant.Tail}";',
                          'var title = string.Concat("Order ", "shipped");'))

    def test_a_flask_session_perforce_tickets_and_a_key_named_as_hex(self):
        """A Flask session's signed value (`.eJ…` compressed, a timestamp, a signature), what `p4 tickets` prints, a
        key whose name says it is written in hex or base64 in a C array (`kSaveKeyHex[] = "…"`). Kept: a file's
        name with `.eJ`, a cache's key in hex, `p4 info`."""
        self.assert_redacted({
            "decode this flask session for me? .eJwlzE0KgjAQBeCrhLv4QfpXfQ4kDTKhqUcDc7pXnTx0dByVbGX.Z5mR3w.q8Vn2Lm4Xr7Kp1Tw9Hd3Yc6Bf0Q": [
                "eJwlzE0KgjAQBeCrhLv4QfpXfQ4kDTKhqUcDc7pXnTx0dByVbGX.Z5mR3w.q8Vn2Lm4Xr7Kp1Tw9Hd3Yc6Bf0Q"],
            "$ p4 tickets\nssl:p4.example.com:1666 (ana.ruiz) 4F9C2E7A1B8D3E6F0A5C9B2D7E4F1A8C": ["4F9C2E7A1B8D3E6F0A5C9B2D7E4F1A8C"],
            'static constexpr uint8_t kSaveKeyHex[] = "9c1e4f7a2b8d3e6f0a5c9b2d7e4f1a8c3b6d9e2f7a1c4e8b0d3f6a9c2e5b8d1f";': [
                "9c1e4f7a2b8d3e6f0a5c9b2d7e4f1a8c3b6d9e2f7a1c4e8b0d3f6a9c2e5b8d1f"]})
        self.assert_kept(("tar -xf build.eJ12.tgz", 'cache_key_hex = "9c1e4f7a2b8d3e6f0a5c9b2d7e4f1a8c"',
                          "$ p4 info\nServer address: ssl:p4.example.com:1666\nServer uptime: 412:10:05"))

    def test_codes_for_gates_code_locks_and_sim_pins_and_pieces_said_in_arabic_or_french(self):
        """A gate's (`hek`) or a code lock's code in Dutch, an access code, an Arabic `الكود` under a door's message,
        a SIM's PIN between dashes, a misspelt "pasword … is like X", a password Arabic says comes in two goes
        (`على مرتين`), a French rest given as `fin :`. Kept: a shop's hours, an order's number under a code's word."""
        self.assert_redacted({
            "Hé Fatih, de code van het hek bij de loods is veranderd, het is nu 731592.": ["731592"],
            "De buitendeur heeft een codeslot: toets 508814 gevolgd door het sleutelsymbool.": ["508814"],
            "[19/05/2025, 05:30] Mahmoud: الباب بتاع المخزن مقفول\n[19/05/2025, 05:31] Karim: الكود 604417 وبعدين اضغط #": ["604417"],
            "ok the SIM PIN for the tracker in van 3 is six digits – 394062 – same as on the card": ["394062"],
            "so umm the pasword for the test env is like Brume31& or smth, try that first": ["Brume31&"],
            "[08/04/2025, 12:20] Karim: الباسورد هبعته على مرتين\n[08/04/2025, 12:20] Karim: nile.winter.gd\n[08/04/2025, 12:21] Karim: ansk.fromage": [
                "nile.winter.gd", "ansk.fromage"],
            "[22/05/2025 11:15] Ilse: je t'envoie le mdp en deux fois\n[22/05/2025 11:15] Ilse: début : 7m4r!Vol\n[22/05/2025 11:16] Ilse: fin : ute*518": [
                "7m4r!Vol", "ute*518"]})
        self.assert_kept(("Horaires : début : 9h, fin : 17h30", "de code van het hek staat in de app, het hek zelf is besteld onder nummer 4471093",
                          "[19/05/2025, 05:31] Karim: الكود بتاع الشحنة 5583021"))

    def test_a_first_part_before_the_remainder_and_a_dutch_password_in_two_messages(self):
        """The first part of a password a later comment calls its rest ("«…» is the remainder"), a Dutch `ww` sent in
        two messages with the rest's label between them. Kept: "ww" in a week's number, a URL's www."""
        self.assert_redacted({
            "Comment 1 (vendor): New password is KraanBo\nComment 2 (vendor): sorry, the form cut it: Lt!7721x is the remainder.": ["KraanBo", "Lt!7721x"],
            "[03-03-2025 10:12] Joost: ww van het portaal komt in 2 berichten, eerste deel:\n[03-03-2025 10:12] Joost: Vracht_Q\n"
            "[03-03-2025 10:13] Joost: en de rest (direct erachter plakken):\n[03-03-2025 10:13] Joost: uay913#": ["Vracht_Q", "uay913#"]})
        self.assert_kept(("ww 14: release planning, no deploys on friday, see https://www.example.nl/plan?id=Ab3!kk99x",))

    def test_parts_a_function_returns_joined_and_literals_side_by_side_to_a_semicolon(self):
        """A secret's parts a chain of appends joins in a function named for it (`smtpPassword()` ⏎ `return new
        StringBuilder()` ⏎ `.append(…)`), R's `paste(c(…), collapse = "")`, literals side by side over lines to a
        `;` (Dart, C), a YAML list of a password's parts under a comment, B2's `authorize_account` given its key.
        Kept: a greeting built the same ways."""
        self.assert_redacted({
            "    private static String ftpPassword() {\n        return new StringBuilder()\n            .append(\"Kp7Rt8.q\")\n"
            "            .append(\"Wd4!Hq9\")\n            .toString();\n    }": ["Kp7Rt8.q", "Wd4!Hq9"],
            'tok <- paste(c("ghp_Qm9x3TtXk", "27LcwPz8RfNa1vY4s", "He5Zq8Lm2"), collapse = "")': ["ghp_Qm9x3TtXk", "27LcwPz8RfNa1vY4s", "He5Zq8Lm2"],
            "const paySecret = 'Vz1Yb6Nc3G'\n    'f5Hj0Ke9Ua2Rt8';": ["Vz1Yb6Nc3G", "f5Hj0Ke9Ua2Rt8"],
            "sftp:\n  sftp_password_parts:   # joined in code\n    - -^fH&NXVU\n    - %z_Rw6i\n  upload_dir: /in": ["-^fH&NXVU", "%z_Rw6i"],
            'api.authorize_account("production", "0051d27642da2d12dd8000000a4", "K005gKZBjJwhPfWLrz4hPTuclnRyWQx")': ["K005gKZBjJwhPfWLrz4hPTuclnRyWQx"]})
        self.assert_kept(("    private static String greeting() {\n        return new StringBuilder()\n            .append(\"Hello, \")\n"
                          "            .append(\"world\")\n            .toString();\n    }",
                          "const title = 'Hello'\n   'world';", 'msg <- paste(c("Hello", "world"), collapse = "")'))

    def test_payment_hsm_keys_an_irish_copula_and_a_french_wifi_code(self):
        """A key ceremony's component in hex groups before its check value, a DUKPT IPEK or a zone master key
        under its name, a password after Irish's `ná`, French's "code wifi … c'est X". Kept: a check value's
        mismatch ("ZPK: computed 57DEBD"), an error's name (`CKR_PIN_INCORRECT`) before a session's number."""
        self.assert_redacted({
            "Componente 2 (custodia B): 0593 237D 3C42 5FD3 52A6 F36C EAD1 D9CC  KCV 98B92A": ["0593 237D 3C42 5FD3 52A6 F36C EAD1 D9CC"],
            "2025-05-02 08:13:44,212 DEBUG [DukptUtil] derived IPEK=F5122998E75A99DBACB92DB6B4ECDE64 (slot 3)": ["F5122998E75A99DBACB92DB6B4ECDE64"],
            "ZMK: 4173F66A69964DE1C243ADA20C2C68AD": ["4173F66A69964DE1C243ADA20C2C68AD"],
            "Is é pasfhocal an Wi-Fi nua ná Bradan-Sionainn-31 — ná cuir ar an bhfalla é": ["Bradan-Sionainn-31"],
            "Salut, le code wifi du bungalow de chantier c'est ChantierLyon69 (tout attaché).": ["ChantierLyon69"]})
        self.assert_kept(("KCV check for imported ZPK: computed 57DEBD, expected 5C67A5 — MISMATCH, nothing written",
                          "2025-10-11T10:48:31.789Z hsm=7000231 user=CO op=C_Login rv=CKR_PIN_INCORRECT session=59686"))

    def test_codes_for_key_boxes_and_locks_and_a_keypads_closing_key(self):
        """A key box's, a lock's or a master code in the words of Spanish, German, French, Catalan, Turkish,
        Afrikaans, Swedish, Japanese; a code with the keypad's closing `#` or `*` in a table under a code's
        column, a door's or a keypad's column, a numbered list's label. Kept: a door's room number, a
        table of places with no code."""
        self.assert_redacted({
            "ojo, la caja de llaves del ático ya tiene código nuevo: 518320*. avisa a limpieza": ["518320"],
            "Der Code für die Schlüsselbox am Ferienhaus lautet 704162#. Gute Reise!": ["704162"],
            "Le code de la boîte à clés est 882051# et le wifi est dans le salon.": ["882051"],
            "ei, el codi del portal de Sants l'han canviat, ara és 390417. gràcies": ["390417"],
            "akıllı kilidin eşleştirme kodu 573920, uygulamada soruyor": ["573920"],
            "Die hekkie se kombinasie is 661204# vir ingeval.": ["661204"],
            "Hej! Nya koden till nyckelboxen är 284713#.": ["284713"],
            "新しい倉庫の入館コードは 739205# です。": ["739205"],
            "tamam, master kod 40918266 ama kimseye söyleme": ["40918266"],
            "3. Systems\n   3.4 Safe in back room: 60218834\n4. Keys": ["60218834"],
            "| Villa | Kapı kodu | Alarm |\n|---|---|---|\n| Villa Ceviz | 408812# | 992034 |": ["408812#", "992034"],
            "company,contact,property,gate_code,door_code\nBright Cleaners,Ana,Harbour Flat 2,640215*,318874#": ["640215*", "318874#"],
            "| unit | keypad |\n|---|---|\n| Harbour 1204 | 590316 |": ["590316"],
            "| Daire | Kapı |\n|---|---|\n| A1 | 771045# |": ["771045#"]})
        self.assert_kept(("| Floor | Door | Tenant |\n|---|---|---|\n| 3 | 12 | Acme |",
                          "| Villa | Pool service | Notes |\n|---|---|---|\n| Villa Ceviz | Ege Havuz | tuesdays |",
                          "the building door is painted green; room 4021 is on the second floor"))

    def test_afrikaans_passwords_csv_cells_in_quotes_and_wrapped_passphrases(self):
        """Afrikaans' `wagwoord` in prose and as a column; a CSV whose first cell is quoted around a comma
        (`"Jansen, Pieter"`), its password column still found; R's `password = c("…")` of words joined
        by hyphens; a password in TOML's or Python's triple quotes; a passphrase quoted after French's
        "c'est"; `vaultcmd`'s stored password. Kept:
        Jenkins' `credentials('…')` naming a stored credential, Ruby's duration after a secret's method."""
        self.assert_redacted({
            "Jou nuwe tydelike wagwoord is Fynbos-Kaap88. Meld asseblief aan.": ["Fynbos-Kaap88"],
            "| Eienaar | Gebruikersnaam | Wagwoord |\n|---|---|---|\n| Koos | kventer | Protea!Duin42 |": ["Protea!Duin42"],
            'owner,property,username,password\n"Nel, Anri",Hout Bay Loft,anel,Klipspringer#51': ["Klipspringer#51"],
            'creds <- data.frame(user = c("coop"), password = c("marula-kettle-dune-orchard"))': ["marula-kettle-dune-orchard"],
            'password = """Graf#Db;Pass7"""': ["Graf#Db;Pass7"],
            'le mot de passe du wifi c\'est "cobalt river lantern moss" (tout en minuscules)': ["cobalt river lantern moss"],
            "Property (schema element id,value): (100,3)\nProperty (schema element id,value): (101,Tudor-Bega!2026)": ["Tudor-Bega!2026"]})
        self.assert_kept(("    SONAR_TOKEN = credentials('sonar-ghs-ci')",
                          "    endpoint.rotate_signing_secret!(grace_period: 24.hours)",
                          'msg = """hello there"""'))

    def test_a_command_at_a_texts_start_that_prints_one_value_and_a_key_far_along_its_sentence(self):
        """A command with no prompt before it, at a text's start, that prints one value: the value
        (`az keyvault secret show … --query value -o tsv`). A machine-made key after the colon that ends a
        long sentence naming it. Kept: a command with no prompt that prints a record (`kubectl describe
        secret`), code whose first line names a password's setting."""
        self.assert_redacted({
            "az keyvault secret show --vault-name kv-ops --name ftp-upload --query value -o tsv\nHarbour.Lamp61": ["Harbour.Lamp61"],
            "Use this API key for the fleet endpoint when you write the integration test, it's only the sandbox one so no worries: 0edb8da284c623a9e8f76cd9a420a3bb\nThen run the tests.":
                ["0edb8da284c623a9e8f76cd9a420a3bb"]})
        self.assert_kept(("kubectl describe secret api-token-lx14ybbX\nName:         api-token-N3kLEiDu\nType:  kubernetes.io/service-account-token",
                          '@Value("${mail.smtp.password}")\nprivate String smtpPassword;\n\n@PostConstruct\nvoid check() {}',
                          "The token refresh job failed again last night, here is the request id for support: 7f3a9c2e4b1d4e8fa9c3b2d1e0f4a5b6"))

    def test_the_literals_that_continue_a_key_and_keys_commands_print(self):
        """The literals after a part a reading took (Dart's `'fk_live_'` ⏎ `'…'` ⏎ `'…'`), after Haskell's `++`
        and Fortran's `// &`, a literal of three classes next to a redacted one (SQL's adjacent strings); a
        literal a secret's name falls back to (`?? "…"`, `or "…"`); a Stellar seed, netplan's `private:` key,
        a key ceremony's component with a custodian's note, `wg genkey` after `umask 077;`, a Cosmos key
        export, `cat` of a KEK; nginx's secure link, GitLab's and Sentry's invitation links; a passphrase with
        a note after it; a key box's digits."""
        self.assert_redacted({
            "class Env {\n  static const fieldApiKey = 'fk_live_'\n      '8r5YR5LKsu5l7Tzwuc'\n      'FErJrxSwcy788RjXn7ZR';\n}": ["FErJrxSwcy788RjXn7ZR"],
            'apiKey :: String\napiKey = "g663NpjiVLF0CXsoxYs5oh"\n      ++ "075775BC5772B986"': ["075775BC5772B986"],
            "      character(len=*), parameter :: ftp_pass = 'Kq7Zx2Lm9Pw4'// &\n                                        '-XjJyngabx_ndvF'": ["-XjJyngabx_ndvF"],
            "CREATE ROLE reader LOGIN PASSWORD 'Tq8!xLm2Rz7w'\n'XjJyngabx_ndvF';": ["XjJyngabx_ndvF"],
            'let token = Keychain.read("ops") ?? "95d617ca087b68b245be60fce78ee3529a0e517e"': ["95d617ca087b68b245be60fce78ee3529a0e517e"],
            'api_token = os.getenv("T") or "95d617ca087b68b245be60fce78ee3529a0e517e"': ["95d617ca087b68b245be60fce78ee3529a0e517e"],
            'kp = Keypair.from_secret("SEEVFKKHVZYOMWKK7R7JO7DXCXEADFJ6OGANVJP67A7O6GBJU333B4MF")': ["SEEVFKKHVZYOMWKK7R7JO7DXCXEADFJ6OGANVJP67A7O6GBJU333B4MF"],
            "  tunnels:\n    wg0:\n      key:\n        private: 8r5YR5LKsu5l7Tzwuc/IVVfg0tXy+99XB7lT1tNosHQ=": ["8r5YR5LKsu5l7Tzwuc/IVVfg0tXy+99XB7lT1tNosHQ="],
            "Component 2 (custodian: K. Otieno):  0B8A 81E9 A342 1C79 502F C1BB D654 20AE   KCV 4F3B43": ["0B8A 81E9 A342 1C79 502F C1BB D654 20AE"],
            "root@gw-01:/etc/wireguard# umask 077; wg genkey | tee gw.key\n8r5YR5LKsu5l7Tzwuc/IVVfg0tXy+99XB7lT1tNosHQ=": ["8r5YR5LKsu5l7Tzwuc/IVVfg0tXy+99XB7lT1tNosHQ="],
            "$ gaiad keys export relayer --unarmored-hex --unsafe --keyring-backend test\n0b8a81e9a3421c79502fc1bbd65420aec553063de002d86bb40d4f3944ff4a18":
                ["0b8a81e9a3421c79502fc1bbd65420aec553063de002d86bb40d4f3944ff4a18"],
            "$ cat /root/keys/kek-site2.hex\n0b8a81e9a3421c79502fc1bbd65420aec553063de002d86bb40d4f3944ff4a18": ["0b8a81e9a3421c79502fc1bbd65420aec553063de002d86bb40d4f3944ff4a18"],
            '"GET /dl/ep12_sub.zip?md5=g663NpjiVLF0CXsoxYs5oh&expires=1741921375 HTTP/1.1" 410 157': ["g663NpjiVLF0CXsoxYs5oh"],
            "Accept invitation: https://gitlab.example.org/-/invites/FErJrxSwcy788RjXn7ZR?invite_type=initial_email": ["FErJrxSwcy788RjXn7ZR"],
            "Click to accept: https://acme.sentry.io/accept/3568228/0b8a81e9a3421c79502fc1bbd65420aec553063de002d86bb40d4f3944ff4a18/":
                ["0b8a81e9a3421c79502fc1bbd65420aec553063de002d86bb40d4f3944ff4a18"],
            "passphrase nung backup sa NAS: ang bagal ng bus sa kanto tuwing biyernes (lahat lowercase, may spaces)": ["ang bagal ng bus sa kanto tuwing biyernes"],
            "- Lucía: the new flat is live; keybox 801574, Wi-Fi on the fridge": ["801574"]})

    def test_data_versions_prompts_and_labels_where_a_secret_could_stand_are_kept(self):
        """Kept: a message that quotes a login command (`msg="vault login failed"`), a placeholder in
        capitals with its length, a bundle's versions in `helm list`, a translation of "password", what
        `grep -c` prints, a satellite pass's time in a query, a kubeconfig's certificate data, base64 under a
        name that says it is data (`"frame_b64"`, `IQ_SAMPLES_B64 = (…)`), a fallback that is a title, a
        file's md5 with no expiry."""
        self.assert_kept((
            'time="2025-03-12T08:00:01Z" level=error msg="vault login failed" error="invalid role name"',
            'hmac_key = "REPLACE_WITH_64_HEX_CHARS"',
            "timescale \ttelemetry\t7\t2025-03-12 09:41:07 +0900 KST\tdeployed\ttimescaledb-single-0.33.1\tpg15.6-ts2.14.2",
            '  "login.password": "Nenosiri",',
            '$ grep -c -i "secret" src/**/*.ts\nsrc/auth/clientSecret.ts:12\nsrc/vault/secretPaths.ts:7',
            "GET /v1/products/L1?pass=2025-03-12T04:12Z 200 41ms",
            "$ cat ~/.kube/config | grep client-certificate-data | cut -c1-80\n    client-certificate-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJ6VENDQVhTZ0F3SUJBZ0lV",
            '{"vcid":1,"frame_b64":"6JzTAvigHKYoYI5/tp4MMxP/tpOCihbpzYwBfpYFbVkomPdxAjZ21CEW0JEmGZRWL1H7nCtSjES/sDHrCafAew==","crc_ok":true}',
            'IQ_SAMPLES_B64 = (\n    "6JzTAvigHKYoYI5/tp4MMxP/tpOCihbpzYwBfpYFbVkomPdxAjZ2"\n    "1CEW0JEmGZRWL1H7nCtSjES/sDHrCafAew=="\n)',
            'title = page.title or "Untitled document"',
            "curl -O https://files.example.org/pkg.tar.gz?md5=5d41402abc4b2a76b9719d911017c592"))

    def test_a_pin_said_in_the_names_of_its_digits(self):
        """A PIN or a code said in the names of its digits, as a voice note's transcript writes it or a person
        types it so that a locked screen does not show it: Polish, Spanish over two messages, Javanese,
        English, under a word for a PIN, a code or a password. Kept: digits' names that are an order's number,
        a count, three names alone."""
        self.assert_redacted({
            "Nagranie: PIN do terminala to siedem dwa zero cztery jeden osiem, nie zapisuj tego.": ["siedem dwa zero cztery jeden osiem"],
            "[9:02 p. m.] Toño: el NIP del cajero es cinco nueve dos\n[9:02 p. m.] Toño: uno cero siete": ["cinco nueve dos", "uno cero siete"],
            "Pak Joko: kode gembok gudang papat siji wolu loro telu, ojo lali": ["papat siji wolu loro telu"],
            "Voicemail: hi, the alarm code for the annex is four one nine nine two six, bye": ["four one nine nine two six"]})
        self.assert_kept((
            "Voicemail: the order number is four five two two, the delivery comes on Friday",
            "Die Auftragsnummer ist vier-vier-eins-sieben-null, Teil zwei kommt per Mail.",
            "The PIN has six digits; one two three is not allowed as its start.",
            "Schritt eins zwei drei vier: Gerät ausschalten, Kabel ziehen."))

    def test_a_chat_answer_in_more_words_and_an_agents_user_sending_pieces(self):
        """A chat's answer to a request for a password that gives it after a few words and a colon, after
        "es", or first with words after it (a chat's time written with a dot, as in Indonesia); a Javanese
        word for "its password"; the pieces an agent's user pastes after saying the token comes in pieces; a
        secret's parts labelled "pierwsza", "ท่อนแรก"; a piece after "se me fue". Kept: an answer with no
        password, Arabic written in Latin letters under a redacted value."""
        self.assert_redacted({
            "[09:10] Ana: powiedz mi hasło do routera\n[09:11] Bartek: masz, znak po znaku: Wydra.Kajak.47 — wielkie litery": ["Wydra.Kajak.47"],
            "[11:40] Luz: como es la contra del correo de ventas? no entra\n[11:41] Memo: es Tamal.Gato.19 — la primera con mayúscula": ["Tamal.Gato.19"],
            "[08.15] Sari: pw printer lantai 2 apa?\n[08.16] Dodi: m4ngga_77x ya mbak, jangan disebar": ["m4ngga_77x"],
            "[4:05 p. m.] Sam: what's the wifi here? I'm in Zapopan today\n[4:06 p. m.] Lupe: hola Sam! es Nopal88?x 😊": ["Nopal88?x"],
            "[07.45] Mas Joko: sandine wifi gudang saiki Rawon!882 yo": ["Rawon!882"],
            "user: the Mercado Pago token comes in pieces, the terminal cuts it\nuser: 7hQm2XvL9kPzAB\nuser: Rt4WcN8bYj3DxQ": ["7hQm2XvL9kPzAB", "Rt4WcN8bYj3DxQ"],
            "[09:17] Ola: hasło do panelu wyślę w dwóch częściach\n[09:17] Ola: pierwsza: k4mi3n\n[09:18] Ola: druga: .Wisla72": ["k4mi3n", ".Wisla72"],
            "09:14 Nok: รหัส wiki ส่งเป็นสองท่อนนะ ท่อนแรก mango4471\n09:15 Nok: ท่อนสอง Siam%22x": ["mango4471", "Siam%22x"],
            "[11:02] Vero: la contraseña del correo es qu3s0x\n[11:02] Vero: ay se me fue, le falta: 9-Tacos": ["qu3s0x", "9-Tacos"]})
        self.assert_kept((
            "[09:10] Ana: send me the wifi password?\n[09:11] Bartek: ask Marta first, she changed it",
            "[10:02] Amr: el token bta3 el project: «redacted»\n[10:03] Amr: 7otohom gamb ba3d mn gher space"))

    def test_codes_pins_and_recovery_codes_in_indonesian_javanese_polish_spanish_and_thai(self):
        """A door's, a safe's, an alarm's code in Indonesian, Javanese, Polish, Spanish (a keypad's verb, a
        chat's time not cut at its `p. m.`) and Thai; Mexico's NIP and a bank's MPIN; a recovery code in Polish;
        a door's code under `Porta principal`; a key's column in Korean; a game's keys and redeem codes. Kept:
        Poland's NIP (a tax number) and Indonesia's (a civil servant's), a year after NIP, a device's serial in
        hex, an algorithm's name, an id's words and numbers."""
        self.assert_redacted({
            "Kode pintu gudang belakang: 483920#": ["483920"],
            "kode lawang mburi saiki 5530917, ojo dikandhakke": ["5530917"],
            "3. Alarm: wpisać 7719402# i wyjść w ciągu 30 sekund": ["7719402"],
            "[10:22 p. m.] Eva: la alarma no quería armar\n[10:23 p. m.] Dr. Ruiz: marcale 602813# y luego armar": ["602813"],
            "รหัสประตูห้อง server ชั้น 2 เปลี่ยนเป็น 6620914 แล้วนะครับ": ["6620914"],
            "Le recuerdo que su NIP de la tarjeta nueva es 804215.": ["804215"],
            "transfer pakai livin, MPIN 551902. hapus chat ini": ["551902"],
            "Kod odzyskiwania do sejfu: pQ7vN2xKd9LmR4tW8yZb3HcF6jQm2Xr9": ["pQ7vN2xKd9LmR4tW8yZb3HcF6jQm2Xr9"],
            "| Site | Porta principal | Alarme |\n|---|---|---|\n| Recife | 5723418 | 978601 |": ["5723418", "978601"],
            "| 서비스 | 키 |\n|---|---|\n| Analytics | `9b1e6f40c2d87a35e0f4b9c16d2a8e7f` |": ["9b1e6f40c2d87a35e0f4b9c16d2a8e7f"],
            "keys for the expo booth (full game):\n7QPKM-X48RT-2HNWB\nA93CJ-V6P2T-8KDFX\n– Aino": ["7QPKM-X48RT-2HNWB", "A93CJ-V6P2T-8KDFX"],
            "[10:42] Min: 리딤 코드 하나 남았어요\n[10:42] Min: K82P4-Q9T4J-Y2XRT-BBHJ7-3M4QD": ["K82P4-Q9T4J-Y2XRT-BBHJ7-3M4QD"]})
        self.assert_kept(("Faktura VAT, NIP: 5213456789, termin płatności 14 dni",
                          "NIP pegawai: 198503122010011002",
                          "nip 2024 roadmap draft",
                          "PKCS#11 token info:\n  label: desk-signing\n  serial: 4A1D-9F02-11C3",
                          "key format: ?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=<access-key>",
                          "code freeze for PROJ-2024-Q3 starts Monday"))

    def test_passwords_in_their_calls_place_encoded_literals_and_settings_printed(self):
        """PHP's mysqli's password by its place, whatever it reads as; a Login call's one literal; Swift's and
        Node's user:password encoded to base64, Julia's base64encode; a C macro's TEXT(…); a database's address
        with no scheme and a host with no dot; Orthanc's users in the environment, quotes escaped; what `sudo -u …
        occ config:system:get` and `dd … | base64` print. Kept: an empty password, a UI's Login, an image's
        digest, a data URI's wrapped bytes, an SRI hash, a Windows path, a secret's name, Jenkins' credentials id."""
        self.assert_redacted({
            '$db = new mysqli("forum-db.local", "forum", "sauna-Kuusi", "phpbb");': ["sauna-Kuusi"],
            'if (!rcon.Login("r^8QXTM=k_pWvJ2Y=7LC")) return 1;': ["r^8QXTM=k_pWvJ2Y=7LC"],
            'let login = "qa-tablet:Hanok.Seoul91".data(using: .utf8)!.base64EncodedString()': ["Hanok.Seoul91"],
            'const auth = Buffer.from("svc_sync:tiger-Quay_58").toString("base64");': ["tiger-Quay_58"],
            'const AUTH = "Basic " * base64encode("dicom_ro:nile4471Giza")': ["nile4471Giza"],
            '#define RALLY_TELEMETRY_WRITEKEY TEXT("pQ7vN2xKd9LmR4tW8yZb_3Hc-6Fj")': ["pQ7vN2xKd9LmR4tW8yZb_3Hc-6Fj"],
            "GAME_DB_ADDRESS=lobby:Qm7~tR2xWv9_kLpZ@cockroach-internal:26257": ["Qm7~tR2xWv9_kLpZ"],
            '  "PACS__REGISTERED_USERS={\\"radiology\\": \\"Papavero@2031\\"}",': ["Papavero@2031"],
            "$ sudo -u www-data php occ config:system:get mail_smtppassword\nKx8=vT2^mQ9zLp4W\n$ ls": ["Kx8=vT2^mQ9zLp4W"],
            "$ sudo dd if=/etc/munge/munge.key bs=1 count=48 2>/dev/null | base64 -w0\nRk9wR3h2Tm1QcTdLd0w0VDh5WmIzSGM2RmpRbTJYcjlLcDRX":
                ["Rk9wR3h2Tm1QcTdLd0w0VDh5WmIzSGM2RmpRbTJYcjlLcDRX"]})
        self.assert_kept((
            '$db = new mysqli("localhost", "root", "", "phpbb");',
            'ui.Login("Welcome back")',
            "image: redis:7.2.4-alpine@sha256:12345",
            "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB\nCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5E",
            '<script src="/js/chart.min.js" integrity="sha384-' + "ABZiv0glfixh6d1BqNOPUXqGCah1nMCR3u1w+YRqnmYbCIhKTeK7Z4YG8mGaSNJC5ROqFOQlAzmgMRCcIKD/kA==" + '"></script>',
            "# Private key: put your own key file here (C:\\Users\\<nome>\\.ssh\\id_ed25519), never the shared one.",
            "Nombre del secreto en Key Vault: pagos-norte-hmac (creado el 2025-03-01)",
            "> Jenkins: ERROR: Could not find credentials entry with ID 'p4-buildfarm'"))

    def test_a_vendors_token_cut_short_and_sent_in_pieces_is_redacted_with_each_piece(self):
        """A vendor's token whose head is shorter than the vendor's tokens are, and whose next pieces make it
        whole to the character: over chat messages under their senders' names, a shell's continued line and
        its `> ` prompt, a list's items, joined literals, log lines with their times. Kept: a head no pieces
        make whole, a token given whole and the words after it."""
        head, rest = "ghp_" + "Qm7vX2kLp9Zr", "T4wN8bYcRt5sWd3Hq6Lf1Jx2"  # 12 + 24: the 36 characters after ghp_
        cases = {
            f"Lena 10:02\nthe token, in two bits: {head}\nLena 10:02\n{rest}\nLena 10:03\nglue them together": [head, rest],
            f'$ export GH_TOKEN="{head}\\\n> {rest}"\n$ gh auth status': [head, rest],
            f"parts=({head} {rest[:12]} {rest[12:]})": [head, rest[:12], rest[12:]],
            'const url = "https://hooks.slack.com/services/T0QK8ZL1M/B07" +\n  "N2R8P4MX/Rk82LmQx7Zp3Wv9Tn4Yb6Hc1";':
                ["https://hooks.slack.com/services/T0QK8ZL1M/B07", "N2R8P4MX/Rk82LmQx7Zp3Wv9Tn4Yb6Hc1"],
            "2025-03-12T08:00:01.40Z stderr P vault login ok, token=hvs.Tq3Wd4\n2025-03-12T08:00:01.41Z stderr F Hq9Lm2Xr5Vz8Kp7Rt1Yb6 ttl=768h":
                ["hvs.Tq3Wd4", "Hq9Lm2Xr5Vz8Kp7Rt1Yb6"],
            "npm_Xr5Vz8Kp7Rt1\nYb6Hc1Jd5Fg0Ks2Lm9Pw4Qt3": ["npm_Xr5Vz8Kp7Rt1", "Yb6Hc1Jd5Fg0Ks2Lm9Pw4Qt3"],
        }
        self.assert_redacted(cases)
        self.assert_kept((
            "classic tokens start with ghp_ and run to 40 characters; fine-grained ones with github_pat_",
            "glpat-Qm7vX2kL\nrotated on Monday, the new one is in the vault",
        ))
        redacted = cc.redact(f"GH_TOKEN={head}{rest}\nnext step: run the Nightly2025 build")[0]
        self.assertIn("Nightly2025", redacted)
        self.assertNotIn(head, redacted)

    def test_serialized_members_links_in_paths_and_this_stops_keeps(self):
        """PHP's serialize() of a password, in a job's JSON payload too; a reset link's token under Turkish
        words; an API key as a path's segment; a heartbeat's URL; Tamil's and Yoruba's word for a password;
        a Turkish secret's rest after an arrow. Kept: Redis's AUTH of the default user alone, a JSON event
        about a password, a PEM placeholder in a YAML block, a CSI driver's secret paths, Terraform's output
        of a bucket's name, an IAM policy's action, a secret manager's secret and version, Laravel's cast."""
        self.assert_redacted({
            'a:3:{s:4:"user";s:6:"backup";s:8:"password";s:13:"Lodos-Izmir71";s:4:"port";i:21;}': ["Lodos-Izmir71"],
            '{"data":"O:9:\\"FtpExport\\":1:{s:4:\\"pass\\";s:12:\\"Qm7vX2kLp9Zr\\";}"}': ["Qm7vX2kLp9Zr"],
            "Şifre sıfırlama: https://magaza.example.com.tr/sifre-sifirla/7c1e9a0f5b3d42e8a6c1f0b9d2e7a4c3": ["7c1e9a0f5b3d42e8a6c1f0b9d2e7a4c3"],
            "GET https://api.example.net/v2/labels/print/apiKey/e2a9c41f7b3d40e8a6c1f0b9d2e7a4c3/pdf": ["e2a9c41f7b3d40e8a6c1f0b9d2e7a4c3"],
            "*/5 * * * * curl -fsS https://status.example.io/api/v1/heartbeat/Tn4Yb6Hc1Jd5Fg0Ks2Lm9Pw4 >/dev/null": ["Tn4Yb6Hc1Jd5Fg0Ks2Lm9Pw4"],
            "Jenkins admin கடவுச்சொல் idli-Vadai-2291 — யாருக்கும் அனுப்பாதே.": ["idli-Vadai-2291"],
            "Ọ̀rọ̀ aṣínà tuntun ni Harmattan-Ibadan44 .": ["Harmattan-Ibadan44"],
            "Ali: şifrenin ilk kısmı: Qm7vX2kLp9Zr\nAli: gerisini ayrı yazıyorum → T4wN8bYc_Rt5\n": ["Qm7vX2kLp9Zr", "T4wN8bYc_Rt5"],
        })

    def test_keys_of_payments_and_wallets_shares_by_fragment_and_more_words(self):
        """A payment HSM's clear key and a session's 3DES key; a wallet's raw key under "Show private key"; a
        PKCS#12 in base64 over lines; Mono's live_sk_; a Bitwarden Send's and a PrivateBin's key in the link's
        fragment; a T-PIN; a cookie called кука; a table in a block comment; `echo -n "$KEY" | base64`; a
        Ukrainian request for a password answered after a dash; a vendor's token in base64. Kept: a key's
        check value, a wallet's address under its private key's words, a paste's link without its key, talk
        of a T-PIN, words in base64, a truststore's certificates."""
        self.assert_redacted({
            "ZPK-ACQ (clear, ceremony 2025-04) : 5B750C57FA71D0042BF3B34B369C925F\nKCV: 8D1E55": ["5B750C57FA71D0042BF3B34B369C925F"],
            "nip.session.key.3des=4E44B66EFB3978F8DBDAE3EA59760C6AB8BD18A90DBFD9BB": ["4E44B66EFB3978F8DBDAE3EA59760C6AB8BD18A90DBFD9BB"],
            "Show private key\nAccount 1 (Payouts)\nNever disclose this key.\n0x5c0e9a1f7b3d42e8a6c1f0b9d2e7a4c38c1f0b9d2e7a4c35c0e9a1f7b3d42e8a\nDone":
                ["0x5c0e9a1f7b3d42e8a6c1f0b9d2e7a4c38c1f0b9d2e7a4c35c0e9a1f7b3d42e8a"],
            "MIIKXwIBAzCCCiUGCSqGSIb3DQEHAaCCChYEggoSMIIKDjCCBIIGCSqGSIb3DQEHBqCCBHMwggRvAgEAMIIEaA\n"
            "YJKoZIhvcNAQcBMF8GCSqGSIb3DQEFDTBSMDEGCSqGSIb3DQEFDDAkBBD9Xk2mPq7zLw4Rt8VbN3c\n": ["YJKoZIhvcNAQcBMF8GCSqGSIb3DQEFDTBSMDEGCSqGSIb3DQEFDDAkBBD9Xk2mPq7zLw4Rt8VbN3c"],
            "Tunde: the linking service still uses live_sk_q8xk2mr7vtz4wpn9syb3c for now": ["live_sk_q8xk2mr7vtz4wpn9syb3c"],
            "one view only: https://send.bitwarden.com/#Tn4Yb6Hc1Jd5Fg0K/Ks2Lm9Pw4Qt3Rk82LmQx": ["Ks2Lm9Pw4Qt3Rk82LmQx"],
            "logs (burn after reading): https://paste.example.net/?5c0e9a1f7b3d42e8#Rk82LmQx7Zp3Wv9Tn4Yb6Hc1Jd5Fg0Ks2Lm9Pw4Qt3B": ["Rk82LmQx7Zp3Wv9Tn4Yb6Hc1Jd5Fg0Ks2Lm9Pw4Qt3B"],
            "For the IVR, press 2, enter account 88120034 and T-PIN 604719.": ["604719"],
            "ось кука з браузера: shop_admin=Xk29mPq7zLw4Rt8VbN3cQ2sWd5Hq9Lm2": ["Xk29mPq7zLw4Rt8VbN3cQ2sWd5Hq9Lm2"],
            "/*\n *   user       | password          | role\n *   -----------+-------------------+------\n *   it_payer   | Lagos-Harbour-61  | PAYER\n */": ["Lagos-Harbour-61"],
            '$ echo -n "$PARTNER_API_KEY" | base64\nUm04MlhyNUtwOVR6M1ZiNk5jMUhkNEpmN0dzMEtl': ["Um04MlhyNUtwOVR6M1ZiNk5jMUhkNEpmN0dzMEtl"],
            "[10:01] Олег: дай пароль від адмінки кафки\n[10:02] Ірина: тримай — Dnipro-Kafka-58 (тільки не в загальний чат)": ["Dnipro-Kafka-58"],
            "the bot's token, base64 so the filter lets it through:\n" + base64.b64encode(b"ghp_Qm7vX2kLp9ZrT4wN8bYcRt5sWd3Hq6Lf1Jx2").decode():
                [base64.b64encode(b"ghp_Qm7vX2kLp9ZrT4wN8bYcRt5sWd3Hq6Lf1Jx2").decode()],
        })
        self.assert_kept((
            "ZMK KCV: 8D1E55 (check value only)",
            "Show private key\nAccount 2 (0x71C7656EC7ab88b098defB751B7401B5f6d8976F)\nDone",
            "logs: https://paste.example.net/?5c0e9a1f7b3d42e8 (key sent apart)",
            "the T-PIN reset flow is in PR 4471",
            "build: " + base64.b64encode(b"release-candidate-2025-06-17-build").decode(),
            "truststore.p12, the partner's root CA alone:\nMIIBzgIBAzCCAYQGCSqGSIb3DQEHAaCCAXUEggFxMIIBbTCCAWkGCSqGSIb3DQEHAaCCAVoEggFWMIIBUjCCAU4G\n"
            "CyqGSIb3DQEMCgEDoIIBPTCCATkGCiqGSIb3DQEJFgGgggEpBIIBJTCCASEwgcegAwIBAgIB",
        ))
        self.assert_kept((
            "(error) NOAUTH Authentication required.\n10.0.0.7:6379> AUTH default\n(error) WRONGPASS invalid username-password pair",
            '{"ts":"2025-06-18T08:14:02Z","action":"user.password.changed","target":"qa.maker2","result":"success"}',
            "tls.key: |\n  -----BEGIN PRIVATE KEY-----\n  ... (paste the key from the vault here) ...\n  -----END PRIVATE KEY-----",
            '    secrets: |\n      - resourceName: "projects/shop-prod/secrets/mtls-key/versions/latest"\n        path: "client.key"',
            '$ terraform output bucket_name\n"shop-audit-evidence-5c1f09ad"',
            "roles with secretsmanager:GetSecretValue: export-lambda, audit-reader",
            "gcloud run deploy api --set-secrets=DB_PASS=api-db-pass:latest,SIGNING_KEY=api-url-signer:3",
            "    protected $casts = ['password' => 'hashed', 'paid_at' => 'datetime'];",
            "$ echo -n 'shop:88123|date:2025-06-17' | base64",
        ))

    def test_names_given_values_together_app_passwords_ethiopic_and_oromo_words(self):
        """Names given their values in one assignment (each its own, the user's name kept); 16 random
        small letters (an app password) in a login call; a cookie made in code; a Django admin list's
        PIN column; an HTML table with its head and body apart; Amharic's word for a password after
        Ethiopic's colon, Afaan Oromo's and Quechua's, a secret in two parts in Amharic, Oromo and
        Turkish; a RADIUS shared key. Kept: the user's name in a pair, ports and hosts given together, a
        Salesforce merge field, a mail's DKIM signature, a secret's output name and path, Amharic labels."""
        self.assert_redacted({
            'login, token = "ops@example.org", "Zq8vLm2Xw4Tb9Nc7Kp3Rs6Yh"': ["Zq8vLm2Xw4Tb9Nc7Kp3Rs6Yh"],
            "my ($user, $pw) = ('backup', 'Tarn#Lake-2291');": ["Tarn#Lake-2291"],
            'Transport.send(msg, new PasswordAuthentication("alerts@example.org", "vjqzkwxhtmpbrnde"));': ["vjqzkwxhtmpbrnde"],
            'Cookies.Add(new System.Net.Cookie(".AUTHCOOKIE", "9F3A6C0E1B7D24E8A5C1F0B9D2E7A4C38C1F0B9D2E7A4C3", "/", "x"))': ["9F3A6C0E1B7D24E8A5C1F0B9D2E7A4C38C1F0B9D2E7A4C3"],
            '<tr class="row1"><td class="field-email">ana@example.org</td><td class="field-door_pin">582914</td></tr>': ["582914"],
            "<table>\n<thead><tr><th>Host</th><th>Site</th><th>Password</th></tr></thead>\n<tbody>\n"
            "<tr><td>gw-01</td><td>Addis</td><td>Wq7#Tana-Lake</td></tr>\n</tbody>\n</table>": ["Wq7#Tana-Lake"],
            "የይለፍ ቃል፦ Gondar-Castle7\nእባክዎ ይቀይሩት።": ["Gondar-Castle7"],
            "Jecha darbii sarvarii: Adama.Buna44 hin qooddatin": ["Adama.Buna44"],
            "Pakasqa simi: Inti-Raymi2024 ama willakunkichu": ["Inti-Raymi2024"],
            "ሃና: የይለፍ ቃሉ የመጀመሪያው ክፍል: lalibela.ro\nሃና: ሁለተኛው ክፍል: ck-hewn88": ["lalibela.ro", "ck-hewn88"],
            "Chaltu: jecha darbii kutaa jalqabaa: Bishoftu.h\nChaltu: kutaa lammaffaa: ora-lake91": ["Bishoftu.h", "ora-lake91"],
            "Emre: şifre iki parça\nEmre: 1. parça: Kx9!vTq2\nEmre: 2. parça: Lm4#Wp8z": ["Kx9!vTq2", "Lm4#Wp8z"],
            'radius: server timeout, retrying with shared key "Tana&Radius#44"': ["Tana&Radius#44"],
        })
        self.assert_kept((
            'user, port = "deploy", 22',
            'host, db = "db.example.org", "orders"',
            "req.setHeader('x-api-key', '{!$Credential.Password}');",
            "DKIM-Signature: v=1; a=rsa-sha256; d=example.org; s=s1;\n\tb=" + "Qm7vX2kLp9ZrT4wN8bYcRt5sWd3Hq6Lf1Jx2Ab" * 2 + "Zq8vLm2Xw4==",
            "    secrets: |-\n      smtp:ops-prod/mail-relay-password",
            '"login.password.label": "የይለፍ ቃል",',
            "the shared key is rotated every quarter",
        ))

    def test_secret_printing_vendors_signed_paths_and_names_no_secret(self):
        """Caught: what `az keyvault secret show` and `bw get item` print as JSON, Akeyless' and Conjur's
        values, `xxd -p` of a key file, Cloudflare's `verify=<expiry>-<HMAC>`, bcp's `-P` after its `-t;`,
        schtasks' `/RP` that starts with a dash, T-SQL's KEY_SOURCE, a passphrase after "the login for …
        is user /", a Finnish server room's alarm code, the rest of a password in Egyptian Arabic's Latin
        letters, Lua's ngx.encode_base64 of a user and a password joined. Kept: Jenkins' credentials('id'),
        a header's name, a form's field named in Arabic, a Secret's `<fill me>`, BLAKE3 digests, a JWT's
        header alone, certificate pins, base64 of a resource's path, a vault's secret named by `-Name`."""
        self.assert_redacted({
            '$ az keyvault secret show --vault-name kv-clinic --name pg-admin -o json\n{\n  "name": "pg-admin",\n  "value": "Revontuli#8812"\n}': ["Revontuli#8812"],
            '$ bw get item 3f1c9e2a-7b4d-4e6f-9a0b-c1d2e3f4a5b6 | jq \'.login\'\n{\n  "username": "lab.sync",\n  "password": "Tq4!mZr8#Lx2",\n  "totp": "KQ3XGZLTNB2HE5DF"\n}': ["Tq4!mZr8#Lx2", "KQ3XGZLTNB2HE5DF"],
            "$ akeyless get-secret-value --name /clinic/fi/pacs-admin\nSauna.Lake-4471": ["Sauna.Lake-4471"],
            "$ conjur variable get -i clinic/pacs/password\nw9XvQ2mLk7RtZp4N": ["w9XvQ2mLk7RtZp4N"],
            "$ xxd -p -c 32 keys/door-controller.bin\n7e3fa1c90b2d4e6f8a1b3c5d7e9f0a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d0e2f": ["7e3fa1c90b2d4e6f8a1b3c5d7e9f0a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d0e2f"],
            "worker=assets path=/scans/2026/ct-0113.dcm verify=1767312000-Yb7Qm2Xk9LpZ4Rt8Wv3Nc6Hd1Jf5Gs0Ke result=valid": ["Yb7Qm2Xk9LpZ4Rt8Wv3Nc6Hd1Jf5Gs0Ke"],
            "bcp dbo.Results out r.csv -c -t; -S LAB01 -U exporter -P Kaamos_2291**": ["Kaamos_2291**"],
            'schtasks /Create /TN "Lab\\Export" /SC DAILY /RU LAB\\svc-export /RP -q%7tmVb2NwXzK': ["-q%7tmVb2NwXzK"],
            "CREATE SYMMETRIC KEY PatientKey WITH ALGORITHM = AES_256,\n  KEY_SOURCE = 'Northern lights over Oulu 2026',\n  IDENTITY_VALUE = 'pep-2026'\nENCRYPTION BY CERTIFICATE PepCert;": ["Northern lights over Oulu 2026"],
            "fyi the login for the Sysmex support portal is lab-it / lumi-pilvi-karhu-sauna, Anna set it up": ["lumi-pilvi-karhu-sauna"],
            "hälytyskeskuksen koodi konesaliin on 4471920#, älä jaa sitä": ["4471920"],
            "Omar: el password el gedid bta3 el lab admin: nile-sauna-k\nOmar: el ba2y: arhu-Lab4471": ["nile-sauna-k", "arhu-Lab4471"],
            'local auth = ngx.encode_base64("viewer:" .. "Kaamos-Lumi-2291")': ["Kaamos-Lumi-2291"],
        })
        self.assert_kept((
            "environment {\n  PG_CREDS = credentials('pgprd01-svc-lab')\n}",
            'static readonly string[] Sensitive = { "Authorization", "X-Api-Key", "X-Hub-Signature-256" };',
            'const FIELD_IDS = { password: "كلمة_المرور", otp: "رمز_التحقق" };',
            'kind: Secret\nmetadata:\n  name: lab-api\nstringData:\n  api-secret: "<fill me>"',
            "shard_000.mcap b3:3f9a1c7e5b2d4f6a8c0e1b3d5f7a9c1e3b5d7f9a1c3e5b7d9f1a3c5e7b9d1f3a",
            "the token header decodes fine: eyJhbGciOiJFUzI1NiIsImtpZCI6ImNsaW5pYy0yMDI2LTAxIiwidHlwIjoiSldUIn0 so the kid matches the JWKS",
            "HPKP pins (sha256 of the SPKI, base64):\nprimary pin: 7HIpactkIAq2Y49orFOOQKurWxmmSFZhBCoQYcRhJ3Y=\nbackup pin: YLh1dUR9y6Kja30RrAn7JKnbQG/uEtLMkBgFF2Fuihg=",
            "Kafka record (encounters, partition 0):\nkey: RW5jb3VudGVyLzdjMWU0YTkwLTJiM2QtNGY2ZS04YTFiLTVjOWQwZTJmNGE2MQ==",
            "PS C:\\ops> $pw = (Get-AzKeyVaultSecret -VaultName kv-lab-weu -Name lab360-app -AsPlainText)",
        ))

    def test_keys_beside_check_values_folded_parts_and_java_passwords(self):
        """Caught: a clear key beside its check value (a ceremony's component, an LMK, a BDK), parts kept
        in a list named for them or joined later, shell variables joined in a URL's password, a Redis ACL's
        password in redis-cli's listing, a stream key before `;`, a Harbor robot's secret after ` / `,
        a password Java hands over as chars, SQLCipher's passphrase, a Postmark client's token, a Stellar
        seed, a TOTP key after "Authenticator:", a Rails session cookie with `/` and `=`, a Redis URL's
        key with `/`, an Android string resource with attributes, backup codes and Chinese door codes in
        tables, a setting in a Spring placeholder's default, a client's secret shortened to `Sec`.
        Kept: a setting's key that names a secret, a tracking code, a certificate pin's name, a PNG in
        chunks of base64, a host key's fingerprint, the names a secret store lists, a request's `rid`."""
        self.assert_redacted({
            "Enter component #2: 9D41C07A3E5B2F68A1D0E4C7B93F5A26\nComponent #2 check value: 7B19E4": ["9D41C07A3E5B2F68A1D0E4C7B93F5A26"],
            "; lab HSM\n[LMK_01]\nvalue=5E2A90C4D71B38F6A0C5E9D3B7142F8A6C0D3E9B1F47A285\nkcv=3C81F0": ["5E2A90C4D71B38F6A0C5E9D3B7142F8A6C0D3E9B1F47A285"],
            "组件二：4C1E 9A7B 03D5 F268 B19C 7E40 5A2D C3F1\n校验值：81D2E6": ["4C1E 9A7B 03D5 F268 B19C 7E40 5A2D C3F1"],
            'KEY_PARTS = (\n    b"Qm7Zx2Kp9LwR4tVb8Nc3Hd",\n    b"Y6jF1gS5aE0uI3oP7rT2w=",\n)\nSIGNING_KEY = b"".join(KEY_PARTS)': ["Qm7Zx2Kp9LwR4tVb8Nc3Hd", "Y6jF1gS5aE0uI3oP7rT2w="],
            'static const char *RADIO_PSK_PARTS[] = {\n    "6f1d9c3a7e2b5048",\n    "d2a7c9e1f4b63805",\n};': ["6f1d9c3a7e2b5048", "d2a7c9e1f4b63805"],
            "  318  A1='Tarragona-Port'; A2='-2026nord'\n  319  ovftool vi://root:${A1}${A2}@esx-07/ ./export/": ["Tarragona-Port", "-2026nord"],
            '1) "user default off nopass ~* &* -@all"\n2) "user orders on >Vq8#zL2mP7xR4tW9 ~orders:* +@all"': ["Vq8#zL2mP7xR4tW9"],
            "        push rtmp://a.rtmp.youtube.com/live2/q7zt-2kdm-x9vb-4rpa-hc3w;": ["q7zt-2kdm-x9vb-4rpa-hc3w"],
            "Back-off pulling image; auth used: robot$media+pull / Tz4Qm8Xk2LwR7vB3": ["Tz4Qm8Xk2LwR7vB3"],
            'ks.load(in, "ribera_pozole_casa".toCharArray());': ["ribera_pozole_casa"],
            'val factory = SupportOpenHelperFactory("Kq8!zLm2#Rt7Wx".toByteArray())': ["Kq8!zLm2#Rt7Wx"],
            'const pm = new postmark.ServerClient("4f7c2a9e-1b3d-4e5f-8a6b-7c9d0e1f2a3b");': ["4f7c2a9e-1b3d-4e5f-8a6b-7c9d0e1f2a3b"],
            "ISSUER_SEED=SBQWY3DNEB2GC5DJNZXWE4TFMFZXIZLSMVZXIZLSMVZXIZLSMVZXIZLS": ["SBQWY3DNEB2GC5DJNZXWE4TFMFZXIZLSMVZXIZLSMVZXIZLSMVZXIZLS"],
            "para el 2FA del banco agrega esta clave en tu Authenticator: JQ4T K7WM 2ZRX 5PLA": ["JQ4T K7WM 2ZRX 5PLA"],
            "  Cookie: _shop_admin_session=Zq8Lm2Xr5Kp7Rt8Tq3Zs6Jm0/Ua2Ke9Hj5GfWd4Hq9Lm2/xR7vB3Zq8Lm2Xr5K--4f2c9a7e1b3d5f6a8c0e2b4d6f8a1c3e5b7d9f0a\nProcessing by Admin::OrdersController#index":
                ["Ua2Ke9Hj5GfWd4Hq9Lm2", "4f2c9a7e1b3d5f6a8c0e2b4d6f8a1c3e5b7d9f0a"],
            "Redis lost: rediss://:Xk29mPq7zLw4Rt8VbN3c/Qy5Hd1Ja6Ke0Uf2Ig=@cache-prod.redis.cache.windows.net:6380/0": ["Xk29mPq7zLw4Rt8VbN3c/Qy5Hd1Ja6Ke0Uf2Ig="],
            '<string name="report_hmac_key" translatable="false">5d2e8a1c9f3b7e04a6c2d8f1b5e9a3c7</string>': ["5d2e8a1c9f3b7e04a6c2d8f1b5e9a3c7"],
            "| Tool | Login | Password | Backup code |\n|---|---|---|---|\n| Xero | ana@example.org | Xk29!mPq7zLw3 | kzrw-tphq |": ["Xk29!mPq7zLw3", "kzrw-tphq"],
            "门店,员工通道门禁码,警报码\nBJ02,418273,5093817": ["418273", "5093817"],
            '    @Value("${sf.checkword:Zq8Lm2Xr5Kp7Rt8Tq3Zs6Jm0Ua2Ke9Hj}")': ["Zq8Lm2Xr5Kp7Rt8Tq3Zs6Jm0Ua2Ke9Hj"],
            'const (\n\tfhirClientSec = "Xk29mPq7zLw4Rt8VbN3cQy5Hd1Ja6Ke0Uf2IgZ"\n)': ["Xk29mPq7zLw4Rt8VbN3cQy5Hd1Ja6Ke0Uf2IgZ"],
            "Guest app invite for booking QX7: https://app.villas.example/join?invite=Zq8Lm2Xr5Kp7Rt8Tq3Zs6Jm0Ua2Ke9Hj (whoever opens it gets the code)": ["Zq8Lm2Xr5Kp7Rt8Tq3Zs6Jm0Ua2Ke9Hj"],
            "<data><url>https://cloud.example.edu/remote.php/direct/Tq3Zs6Jm0Ua2Ke9Hj5GfWd4Hq9Lm2Xr5Kp7Rt8Zq8Lm</url></data>": ["Tq3Zs6Jm0Ua2Ke9Hj5GfWd4Hq9Lm2Xr5Kp7Rt8Zq8Lm"],
            "Anexo do ticket #4891: https://help.example.com/attachments/token/Hj5GfWd4Hq9Lm2Xr5Kp7Rt8Z/?name=recibo.jpg": ["Hj5GfWd4Hq9Lm2Xr5Kp7Rt8Z"],
        })
        self.assert_kept((
            "interface SecretNames {\n  clientSecret: \"Fhir--ClientSecret\";\n  smtpPassword: \"Mail--SmtpPassword\";\n}",
            'record Options(string SecretConfigKey = "Webhooks:SigningSecret", int Tolerance = 300);',
            "  data:\n    - secretKey: partnerV2Key\n      remoteRef:\n        key: partner-v2-key",
            "SPEI enviado\nClave de rastreo: BANK7Q2XK9LZR4TW8VB3\nReferencia: 4948860",
            'Public-key pin for the gateway: pin-sha256="Qm8xZ2LpT7vKw3RbN9cY5dHs0Je4GuAa1Bb2Cc3Dd4E="; max-age=5184000',
            "logo.png (base64, 1 of 2):\niVBORw0KGgoAAAANSUhEUgAAPtYgjmUhBel31iEl2hpChYgCfrL1spNxnyVmihA/2O76UMFxFkM/\nR5Kjp1vRt+1fjORS/6ilI8ihN5KXSc7Tvo/hBKqFYY/kv5ZJr3J1TWDtkwtDDb+xHKas1VOqg6YY"
            "\nZYn9ZhyiA4uoRgnatmUdjAWtGSU8po+799NksnRH9ucAUsdMlHUvTCQCyEZDz/TddJ8HyS5SUkCn\nD8zRA9a9Sk==",
            "The fingerprint for the ED25519 key sent by the remote host is\nSHA256:Qm8xZ2LpT7vKw3RbN9cY5dHs0Je4GuAa1Bb2Cc3Dd4E.\nPlease contact your system administrator.",
            "$ aliyun kms ListSecrets --region cn-hangzhou | jq -r '.SecretList.Secret[].SecretName'\nmp-appsecret\npay-apiv3-key\noss-ram-assets",
            '{"errcode":40001,"errmsg":"invalid credential, access_token is invalid rid: 68ab1c2d-41e0f3a7-5c2e9b10"}',
            "Credential Manager targets on OPS-LT-0042: OpsSigner, Domain:target=fs01.example.local",
            "Webinar registration: https://example.zoom.us/webinar/register/WN_V67Fz5WTNwwvNxavR9RaFg",
        ))

    def test_parts_in_norwegian_urdu_irish_twi_and_catalan_and_prose_that_resets_a_password(self):
        """Caught: a password in two parts labelled in Norwegian, Urdu, Irish, Twi, Vietnamese, Catalan,
        Hinglish and Italian; its first part after "arranca con" or Pidgin's "be", its rest after Russian's
        "остальное" or Spanish's "lo que falta"; parts in an envelope's list; a BitLocker key split
        over two chat messages; a password "reset to" in Dutch, an alarm code in Norwegian, an API key
        in Urdu, Irish's password word, Turkish's PIN'i."""
        self.assert_redacted({
            "[Teams] Kari Lunde 10:02\npassordet til backup-kontoen i to deler, første: Fjord#Bryggen\n[Teams] Kari Lunde 10:02\nandre del: 77!Ulriken": ["Fjord#Bryggen", "77!Ulriken"],
            "سرور کا پاس ورڈ دو حصوں میں:\nپہلا حصہ: Multan_Gate\nدوسرا حصہ: #Ravi2026": ["Multan_Gate", "#Ravi2026"],
            "Aoife: an chéad leath den phasfhocal: Cnoc-na-Rí\nAoife: agus an dara leath: _Corcaigh42": ["Cnoc-na-Rí", "_Corcaigh42"],
            "Yaw: password no nea edi kan: Kumasi_Kejetia\nYaw: na nea ɛtɔ so abien: @Manhyia77": ["Kumasi_Kejetia", "@Manhyia77"],
            "Lan: mật khẩu kho phần đầu là \"Kho_Binh\"\nLan: phần sau \"_Duong2026\" nha": ["Kho_Binh", "_Duong2026"],
            "Jordi: la contrasenya del wifi en dues parts\nJordi: la primera part: Montjuic_\nJordi: la segona part: 77Barna!": ["Montjuic_", "77Barna!"],
            "Imran 9:14 PM\nadmin pw chahiye? pehle 6 letters: Lyallp\nImran 9:14 PM\nbaqi: ur#2026Fsd .. jor lo": ["Lyallp", "ur#2026Fsd"],
            "la password è composta da due parti: la prima è Vesuvio-Blu\nseconda parte: #Napoli1926": ["Vesuvio-Blu", "#Napoli1926"],
            "Rosa: la clave del router arranca con Misti_Arequipa\nRosa: y termina en #2026Sur": ["Misti_Arequipa", "#2026Sur"],
            "Kwame: the first half of the studio password be Labadi_Beach\nKwame: second half na #Osu2026": ["Labadi_Beach", "#Osu2026"],
            "Олег: пароль от роутера: Dnipro#Lavra\nОлег: остальное: _2026osin": ["Dnipro#Lavra", "_2026osin"],
            "Marta: la contraseña del aula 3 es Aula3#Gracia\nMarta: lo que falta: _2026bcn": ["Aula3#Gracia", "_2026bcn"],
            "Password is stored split across the two sealed envelopes; the drill value is:\n   - envelope A: `Nordkapp-Sild`\n   - envelope B: `-Torsk-4410`": ["Nordkapp-Sild", "-Torsk-4410"],
            "Lucía Gómez 8:12 a. m.\nla clave de recuperación de BitLocker del portátil:\n412093-558201-093517-662840\nLucía Gómez 8:13 a. m.\n-301955-721046-185530-649207": ["412093-558201-093517-662840", "-301955-721046-185530-649207"],
            "het wachtwoord van de webinterface is teruggezet naar Utrecht2026_, graag meteen wijzigen": ["Utrecht2026_"],
            "Overlevering: alarmkoden til lageret i kjelleren (bygg 2) er nå 61829047, vaktmester har byttet den.": ["61829047"],
            "یہ سینڈ گرڈ کی API کلید ہے: 9c4e7a1f2b8d3e6a0c5f9b2d7e1a4c8f ، اسے کنفیگ میں ڈالیں۔": ["9c4e7a1f2b8d3e6a0c5f9b2d7e1a4c8f"],
            "Mali mühür USB token PIN'i 482915, kimseyle paylaşmayın.": ["482915"],
            "يا باشمهندس، الباسورد بتاع بوابة الضرايب اتغير امبارح. الجديد Zamalek_2026 — حطه في السيستم": ["Zamalek_2026"],
            "Me nua, password no a wode bɛkɔ router no mu ne Accra_Osu1957. Mfa mma obiara.": ["Accra_Osu1957"],
            "Pieter: kan iemand me het wachtwoord van de webshop geven? zit niet in de kluis\nSanne: Gouda%Kaas718 — ik zet hem er vanmiddag in\nPieter: top": ["Gouda%Kaas718"],
            "Yassine: lmot de passe dyal moodle rah Fes#Medina2026": ["Fes#Medina2026"],
            "Mehdi: l'code dyal wifi dyal l'prof tbddel, daba howa Agdal_Rabat_77 , 3tih ghir l'équipe": ["Agdal_Rabat_77"],
        })
        self.assert_kept((
            "the envelopes are split across two safes; envelope A is in Bergen, envelope B in Oslo",
            "Secret scope \"ops\": keys db-password, api-key (ACL: data-ops-engineers READ)",
            "Secrets Manager rotation Lambda: ops-rotate-rds-reports, schedule rate(30 days)",
            'azurerm_key_vault_secret.signing_jwk: name = "signing-jwk-2026", content_type = "application/jwk+json"',
        ))

    def test_persian_georgian_kazakh_and_thai_prose_codes_under_headings_and_a_calls_password_slot(self):
        """Caught: a password's argument by its place (Django's create_superuser, PDO's constructor, 1C's
        HTTPСоединение), words for a password in Persian, Finglish, Georgian, Kazakh, Swahili, a Swedish
        compound and Hungarian's passphrase, Thai's codes glued to their words, codes listed under a heading
        (plain, aligned, several a line, an HTML list), unlock and two-code cells, parts in Persian and
        Georgian, a Telegram-compatible bot URL, a Bitrix24 hook, a Nextcloud share, eapol_test's secret,
        FreeRADIUS's logged password, Autologon, a SigV4 signature, an initializer's header pair, a client
        given a URL first, base64 of `:<pat>`, an LMK in halves, 1C's /P, a comment that names a seed file,
        Moodle's cfg.php, a REPL's printed signing key, a barrier's code.
        Kept: a reference's subscript, a password manager's lookup, a Swift type, keyring's service, an ICC
        profile in base64, go.sum's hashes, another field after a label, a dated run key, a question mark,
        a unit's id, a vault's folder, SQL*Plus's &&name, a template of x's, a record's key, a message's
        token, a Georgian label, Credential Manager entries, a secret's path, templates of a key's parts,
        a PKCS #11 token's label, a Swedish 'secret name', error codes, a public key a REPL printed, a CSV's cells."""
        self.assert_redacted({
        'User.objects.create_superuser("admin", "admin@example.org", "Ribera.31Pozole")': ["Ribera.31Pozole"],
        "#0 /srv/www/db.php(12): PDO->__construct('mysql:host=db', 'shop', 'Tilde.mango7', Array)": ["Tilde.mango7"],
        "سلام، رمز جدید سرور: Kavir.baran62 لطفا عوضش کنید": ["Kavir.baran62"],
        "salam, ramz-e wifi ro avaz kardam, jadidesh ine: T4bri!z2025": ["T4bri!z2025"],
        "ნინო, ახალი პაროლი: qW7-$vb@2k — ნუ გაუზიარებ": ["qW7-$vb@2k"],
        "Жанар, жаңа құпия сөз: ALM4028_bota логин бұрынғыдай": ["ALM4028_bota"],
        "Adminlösenordet i webbgränssnittet är hallon&tallinn4 om nån hinner": ["hallon&tallinn4"],
        "พรุ่งนี้ รหัสประตูหลังคือ 48210# กดแล้วรอไฟเขียว": ["48210#"],
        "ตู้ล็อกเกอร์ เปลี่ยนรหัสเป็น 730418 แล้วนะครับ": ["730418"],
        "A mentések kulcs-jelmondata: MogyoroPatakHajnalTel. Ne írjátok le.": ["MogyoroPatakHajnalTel"],
        "login ya dashboard: user ni ops@example.co.ke, neno la siri ni M4ua.Tamu9. Asante": ["M4ua.Tamu9"],
        "Riasztó kódok – iroda\n  Kata B.      418820\n  Márk T.       530174   (csak hétvégén)": ["418820", "530174"],
        "<h3>Códigos de acceso</h3>\n<ul>\n  <li><b>Portón:</b> 730152</li>\n  <li><b>Bodega:</b> 9920417</li>\n</ul>": ["730152", "9920417"],
        "Door codes\n  Lisbon office   main door 550127   server room 8841203\n  Porto lab        6630918": ["550127", "8841203", "6630918"],
        "serial;pilot;unlock_code\nDJ7731;Noa;604219": ["604219"],
        "| Site | Alarm disarm |\n|---|---|\n| Porto | 71204* 5530#1 |": ["71204*", "5530#1"],
        "رمز سرور رو دو تیکه می‌فرستم، تیکه اول: Zr8#kq2L\nتیکه دوم: mW5-tp9x (بدون فاصله)": ["Zr8#kq2L", "mW5-tp9x"],
        "SMS 1/2: პაროლის პირველი ნაწილი: Kx8-mz2q\nSMS 2/2: მეორე ნაწილი: 7-g10rg1a3 — ნუ გაუზიარებ": ["Kx8-mz2q", "7-g10rg1a3"],
        'BALE_API="https://tapi.bale.ai/bot718204455:Qx8LmZr2Tw9Kp4Vn7Bc3Hd6Jf1Gs5Ae0Yu2Io8Pl"': ["718204455:Qx8LmZr2Tw9Kp4Vn7Bc3Hd6Jf1Gs5Ae0Yu2Io8Pl"],
        'HOOK = "https://acme.bitrix24.de/rest/9/k2m8q7z4x1c5v9b3/"': ["k2m8q7z4x1c5v9b3"],
        "the scans: https://cloud.example.org/index.php/s/Xq7Lm2Zr9Tw4Kp8": ["Xq7Lm2Zr9Tw4Kp8"],
        "./eapol_test -c peap.conf -a 10.0.0.5 -p 1812 -s 'Rz8qLm2xTw9kVb3n' -r 0": ["Rz8qLm2xTw9kVb3n"],
        "Auth: (77) Login incorrect (mschap: MS-CHAP2-Response is incorrect): [ana@uni.example/Osa_1403_ket] (from client ap-3 port 0)": ["Osa_1403_ket"],
        "C:\\Tools> Autologon.exe /accepteula kiosk LAB-PC-04 Tigris_1402_nar": ["Tigris_1402_nar"],
        "DEBUG request: SignedHeaders=host;x-amz-date, Signature=d971f3c029c9f590c8a98387983ee6d6a7153fb0d039345376e09a6950391f75": ["d971f3c029c9f590c8a98387983ee6d6a7153fb0d039345376e09a6950391f75"],
        'Http.DefaultRequestHeaders = { { "X-Api-Key", "d88ff6064ab6f9ac16398cd63d45a40b5e72aec6" } };': ["d88ff6064ab6f9ac16398cd63d45a40b5e72aec6"],
        'node = TransferNode("https://xfer.example.org:9092", "node_user", "Qm7Zx2Kp9LwR4tVb8Nc3HdY6jF1gS5aE")': ["Qm7Zx2Kp9LwR4tVb8Nc3HdY6jF1gS5aE"],
        "PS> $b64\nOmtWUHgxT3pvYVVIMmx4bGtUNk1ndWxicVAycmMwME41N01zRXREMnZOeXJjX0h3b2VoU0FNdw==": ["OmtWUHgxT3pvYVVIMmx4bGtUNk1ndWxicVAycmMwME41N01zRXREMnZOeXJjX0h3b2VoU0FNdw=="],
        "LMK Component 2: 7A41C09E3B5D2F68 A1D0E4C7B93F5A26\n                 0C5E9D3B7142F8A6 C0D3E9B1F47A2853\nCheck value: 4F1A09": ["7A41C09E3B5D2F68 A1D0E4C7B93F5A26", "0C5E9D3B7142F8A6 C0D3E9B1F47A2853"],
        '1cv8.exe ENTERPRISE /S"srv1c\\\\acc" /N"Бухгалтер" /P"Kokshe.2291"': ["Kokshe.2291"],
        'Соединение = Новый HTTPСоединение("yms.example.kz", 443, "yms_1c", "bars.Tulpar%7", , 30);': ["bars.Tulpar%7"],
        "// internal/signing/testdata/seed.hex  (the prod one, sorry)\nd971f3c029c9f590c8a98387983ee6d6a7153fb0d039345376e09a6950391f75": ["d971f3c029c9f590c8a98387983ee6d6a7153fb0d039345376e09a6950391f75"],
        "www-data@lms01:/var/www/moodle$ php admin/cli/cfg.php --component=auth_ldap --name=bind_pw\nlibrary3522\nwww-data@lms01:/var/www/moodle$ ": ["library3522"],
        ">>> sk = SigningKey.generate()\n>>> base64.b64encode(bytes(sk)).decode()\n'Kp3ZrT9Wm2Lx8Qv5Nc7Bd4Fh6Jg1Sa0Ye2Ru4Io3Pl8='\n>>> ": ["Kp3ZrT9Wm2Lx8Qv5Nc7Bd4Fh6Jg1Sa0Ye2Ru4Io3Pl8="],
        "Kod do szlabanu na dziś (nocna zmiana): 934629. Kod ważny do 06:00.": ["934629"],
        })
        self.assert_kept((
        'password = data.vault_kv_secret_v2.app.data["password"]',
        "nas_password: \"{{ lookup('community.general.onepassword', 'NAS Lab', field='password', vault='Infra') }}\"",
        "struct KeychainItem { let service: String; var passwordData: Data? }",
        'keyring.set_password("nas-lab-01", user, getpass.getpass("Password: "))',
        "ICC profile (base64): AAAMSExpbm8CEAAAbW50clJHQiBYWVogYHLwzkkKlhikZhnRQDTtMdKjj2jB/K6hbXQ+64nNUmbc32QA\nNl+l1gAAMSExpbm8CEAAAbW50clJHQiBYWVogYHLwzkkKlhikZhnRQDTtMdKjj2jB/K6hbXQ+64nNUmbc\n32QANl+l1g==",
        "github.com/eclipse/paho.mqtt.golang v1.4.3/go.mod h1:PWJL/gqesR1Jsf6uQVqVyC3X4xTNlEwhhpGfl09G2A=",
        "MQTT session: client_id=ingest-7f3a9c1d keepalive=60 clean_start=false",
        "Cloud Scheduler → Pub/Sub, attributes: {run_key: ndvi-20250612-b7c1e9}",
        "Femke: het wachtwoord is verlopen. Daan, heb jij nog toegang tot de 2FA-app?\nDaan: ja",
        "ERROR mqtt: connection refused: bad user name or password (unit=TE33A-0415, broker=mqtt.example.kz:8883)",
        "Marek: yes, new one is in the KeePass under VMware → vcenter01. please don't write it anywhere else",
        'CREATE USER YMS_REPORT IDENTIFIED BY "&&report_password";',
        "ANTHROPIC_API_KEY=sk-ant-api03-" + "x" * 95 + "-xxxxxxxxAA",
        "partition=7 offset=278738975 key=TE33A-0412",
        "Viber message_token: 5120398471209384712, event: delivered",
        'i18n/ka.json: { "auth.password": "პაროლი", "auth.password_repeat": "გაიმეორეთ პაროლი" }',
        "Windows Credential Manager entries used by Dispatcher.Desktop:\n  KR.Dispatcher/GsmrGateway\n  KR.Dispatcher/YmsApi",
        "Запрос: нужен доступ на чтение к секрету kv/1c/buh_kz в Vault для svc_export",
        'maas_api_key   = "CONSUMER:TOKEN:SECRET"',
        'secret_key_base: "PUT_64_CHARS_FROM_mix_phx.gen.secret_HERE"',
        '$ p11tool --list-all "pkcs11:token=claims-signing"\n\tURL: pkcs11:model=SoftHSM%20v2;token=claims-signing;object=claims-signing-2025;type=private',
        "hemlighetsnamn i Key Vault: app-sql-admin, app-backup-veeam (inga värden här)",
        "Error codes (see the manual)\n  Timeout          10061\n  Refused          10054",
        ">>> base64.b64encode(bytes(sk.verify_key)).decode()\n'Kp3ZrT9Wm2Lx8Qv5Nc7Bd4Fh6Jg1Sa0Ye2Ru4Io3Pl8='\n>>> ",
        "controller_serial;drone;pilot\n5YSZKBUJ6IEE0V;Matrice 350 #2;Yossi",
        ))

    def test_constants_compared_with_a_requests_key_wrapped_and_continued_literals_and_codes_in_cells(self):
        """Caught: a constant a check compares a request's key with (Lua's `~= expected`), a resumable upload's
        id after other parameters, an HTTPCookie lldb prints, a MAVLink signing key, an Atlassian token's last
        wrapped line (`=` and its checksum), a C macro's literals continued with `\\`, PHP's `. '…'` on the
        next line, a Twilio token in the cell after its SID, a short password of letters and digits under a
        secret's column, a remote's pairing code, a render farm's `Setting environment: KEY=…`.
        Kept: a version a token's version is compared with, a cookie's locale, YouTube's `&t=42s`, a shell's
        arguments continued with `\\`."""
        self.assert_redacted({
        'local expected = "Vq8Lm2Zr9Tw4Kp7Xc3Bn6Hd1Jf5Gs0AeYu2Io8PlQw"\nif ngx.var.http_x_ingest_key ~= expected then\n  return ngx.exit(401)\nend': ["Vq8Lm2Zr9Tw4Kp7Xc3Bn6Hd1Jf5Gs0AeYu2Io8PlQw"],
        "< location: https://storage.googleapis.com/upload/storage/v1/b/media/o?uploadType=resumable&name=a.mp4&upload_id=ABPtcPp2Xq8Lm7Zr9Tw4Kp7Xc3Bn6Hd1Jf5Gs0AeYu2Io8PlQwRt5Vb": ["ABPtcPp2Xq8Lm7Zr9Tw4Kp7Xc3Bn6Hd1Jf5Gs0AeYu2Io8PlQwRt5Vb"],
        '    - 0 : <NSHTTPCookie version:0 name:"app_sid" value:"Qw8Er5Ty2Ui9Op4As7Df1Gh6Jk3Lz0Xc" expiresDate:\'2025-03-25\'>': ["Qw8Er5Ty2Ui9Op4As7Df1Gh6Jk3Lz0Xc"],
        'm.setup_signing(bytes.fromhex("9b3f0a7c2e5d8f1a4c6b9e0d3f2a5c8e7b1d4f6a9c2e5b8d0f3a6c9e2b5d8f1a"), sign_outgoing=True)': ["9b3f0a7c2e5d8f1a4c6b9e0d3f2a5c8e7b1d4f6a9c2e5b8d0f3a6c9e2b5d8f1a"],
        "$ printenv JIRA_API_TOKEN\nATATT3xFfGF0Kp7Xc3Bn6Hd1Jf5Gs0AeYu2Io8PlQwRt5VbNm4Zx7Cv1Bg9Hj3Kl6Qa2Ws5Ed8Rf1Tg4Yh7Uj\nQz8Wx2Ec5Rv9Tb3Yn6Um1Ik=4F2A9C1E\n$ ": ["Qz8Wx2Ec5Rv9Tb3Yn6Um1Ik=4F2A9C1E"],
        '#define LORA_APPKEY "A1C37C230D26B077" \\\n                    "B0976BD6944660C2"': ["A1C37C230D26B077", "B0976BD6944660C2"],
        "$db_pass = 'Morsk'\n         . 'ieOko1987';": ["ieOko1987"],
        "<tr><td>Twilio</td><td>AC30ecd42bc0528a57a2eb5af31fdd3595</td><td>dd78dd147c3ca785a19a4518414a566f</td></tr>": ["dd78dd147c3ca785a19a4518414a566f"],
        "| Gateway | Shop | API secret |\n|---|---|---|\n| GMO PG | tshop00051234 | k7xom77q |": ["k7xom77q"],
        "| drone | wifi pass | RC pairing code |\n|---|---|---|\n| DJ-07 | Xk29!mPq7z | 992049 |": ["992049"],
        "2025-03-09 23:41:12:  0: STDOUT: Setting environment: SHOTGUN_SCRIPT_KEY=xzpkt7fa^oebmn)l(dnf9)ju(": ["xzpkt7fa^oebmn)l(dnf9)ju("],
        })
        self.assert_kept((
        'EXPECTED_VERSION = "2024-11-01-release-candidate"\nif token_version == EXPECTED_VERSION:',
        '    - 1 : <NSHTTPCookie version:0 name:"locale" value:"ja_JP" expiresDate:\'(null)\' path:"/">',
        "https://www.youtube.com/watch?v=dQw4w9WgXcQ&t=42s",
        'echo "hello world" \\\n  "second arg"',
        ))

    def test_catalan_galician_basque_and_hausa_words_parts_under_marked_names_and_pieces_read_together(self):
        """Caught: passwords after Catalan's, Galician's, Basque's and Hausa's words (`clau`, `contrasinal`,
        `pasahitza`, `kalmar sirri`, a passphrase's `frase de pas`); pieces announced "en dos trossos"; a first
        piece that reads as a name alone, taken with the piece after it; the pieces of an answer after a
        message that says it comes; a secret's parts under names that differ only by a part's mark (a
        registry's `ClaveA`/`ClaveB`, COBOL's `WS-CLAVE-1`/`-2`, nginx's `$auth_a`/`$auth_b`, YAML's
        `KEY_1`/`KEY_2`, an INI file's `pass_part1`/`pass_part2`); Python's literals joined in brackets after
        `or (`; a leet password that starts with `@`; an HTML table a numbered file read shows; "rest na …";
        pieces in WhatsApp's Android export, the last after "e acaba com"; a passphrase of accented words;
        Portuguese's "passou a ser", Spanish's "sigue siendo" and "la puse en"; Perl's `join '', '…', '…'`;
        the last piece after "e a ultima"; a passphrase of words fifty characters after its word; pieces in a
        code block under the line that names them, and in numbered blocks ("bloque 1 -> …"); a rest under a
        chat's header of a name, a comma and a time (Zalo's `Phạm Thu Hà, 09:41`); a key box's column
        (`schluesselbox`). Kept: names of steps and dates under marked names, a key's prefix
        and suffix, grep's lines of a template's empty `NAME=`, the comment of a key in authorized_keys, Claude
        and a clause, Perl's join of words with a comma, where a password was put."""
        self.assert_redacted({
            "la clau de la xarxa del magatzem ha canviat, ara és Rovelló.Pruna417. la de convidats igual": ["Rovelló.Pruna417"],
            "o contrasinal do usuario de lectura é 61rb4ll0*Pazo27, conéctate e mira": ["61rb4ll0*Pazo27"],
            "Bilboko VPNaren pasahitza ItsasoHarria7+ da, ez partekatu": ["ItsasoHarria7+"],
            "Musa: Ga kalmar sirri ta VPN: kano$Dabino31": ["kano$Dabino31"],
            "La frase de pas del xifrat del NAS és: teulada.cirera.rierol.esparver.mola . Ja ho saps.": ["teulada.cirera.rierol.esparver.mola"],
            "Anna Puig  10:42\nem passes la clau del SFTP?\nJordi Vila  10:44\nva, et la passo en dos trossos\nJordi Vila  10:44\nQm7!rTz9Lk\nJordi Vila  10:45\nWp3#xNv8Bc": ["Qm7!rTz9Lk", "Wp3#xNv8Bc"],
            "[12/03/25 21.14] Dewi: password SFTP gudang yg baru\n[12/03/25 21.14] Dewi: CoralReef\n[12/03/25 21.15] Dewi: 77!Bintang\n[12/03/25 21.15] Dewi: digabung ya": ["CoralReef", "77!Bintang"],
            "[09:03] <lucia> qualcuno ha la pw di admin del nas?\n[09:05] <marco> si, aspetta che la cerco\n[09:05] <marco> Gx4vQm9\n[09:06] <marco> Tz8pLr2Wk5": ["Gx4vQm9", "Tz8pLr2Wk5"],
            '[HKEY_LOCAL_MACHINE\\SOFTWARE\\Clinica\\Etiquetas]\n"Servidor"="lbl-sql02"\n"ClaveA"="Rk2_88zPqw"\n"ClaveB"="tMWQ_OJKV"': ["Rk2_88zPqw", "tMWQ_OJKV"],
            "       01  WS-ACCESO.\n           05 WS-CLAVE-1     PIC X(16) VALUE 'Kx8_nnTTq33'.\n           05 WS-CLAVE-2     PIC X(16) VALUE 'pJ5TNRCe7'.": ["Kx8_nnTTq33", "pJ5TNRCe7"],
            '    set $auth_a "c3RhZmY6TWFyZWE=";\n    set $auth_b "QmVsbG8yMDI2";': ["c3RhZmY6TWFyZWE=", "QmVsbG8yMDI2"],
            '      COURIER_KEY_1: "e2669b74b85643"\n      COURIER_KEY_2: "f55875de846bbcb721"': ["e2669b74b85643", "f55875de846bbcb721"],
            "; pass in two lines\npass_part1 = kopi.susu.ma\npass_part2 = lang.bandung": ["kopi.susu.ma", "lang.bandung"],
            'OVH_APP_SECRET = os.environ.get("OVH_APP_SECRET") or ("NLL0BZx4hSfqDqpo"\n                                                  "wNRykKTAjGnYkMEz")': ["NLL0BZx4hSfqDqpo", "wNRykKTAjGnYkMEz"],
            'ds.setPassword("@d@3b4Yemisi52");': ["@d@3b4Yemisi52"],
            "Read docs/bank.html\n     1\t<table>\n     2\t<tr><th>Bank</th><th>User ID</th><th>Password</th><th>PIN</th></tr>\n     3\t<tr><td>Alpha Bank</td><td>ops01</td><td>Rz8!mmq2Lp</td><td>402913</td></tr>": ["Rz8!mmq2Lp", "402913"],
            "[10:41] Tunde: the new gateway secret is MK_PROD_9JE3LMRX\n[10:41] Tunde: sorry it cut, rest na SWMCCCZLF46IZDAJ": ["SWMCCCZLF46IZDAJ"],
            '    "PassPrefix": "SolAmoT",\n    "PassSuffix": "apioca771#"': ["SolAmoT", "apioca771#"],
            "21/10/2025 22:01 - Rita Moura: Preciso da password do Wi-Fi do armazém\n21/10/2025 22:02 - Nuno Reis: Mando-te em 2 msgs\n21/10/2025 22:02 - Nuno Reis: QwdfhpX?zPa\n21/10/2025 22:03 - Nuno Reis: e acaba com B0WaC!a": ["QwdfhpX?zPa", "B0WaC!a"],
            "a master password do cofre da equipa é jacarandá-girassol-capivara-kamba — não partilhes": ["jacarandá-girassol-capivara-kamba"],
            "a password do Wi-Fi da sala de reuniões passou a ser janela-farol-47. Não partilhes": ["janela-farol-47"],
            "my $key = join '', 'key-6135dcc9a1e44f3b87d0e2a4', '19bb53c0';": ["key-6135dcc9a1e44f3b87d0e2a4", "19bb53c0"],
            "12/06/2024 18:55 - Tânia: a senha do cofre, primeira parte Mboa_Lua\n12/06/2024 18:55 - Tânia: segunda Xima77\n12/06/2024 18:56 - Tânia: e a ultima matapa! (com ponto de exclamação)": ["Mboa_Lua", "Xima77", "matapa!"],
            "se acuerda cambiar la contraseña compartida de Radiología porque sigue siendo gARCIA_2019! desde entonces.": ["gARCIA_2019!"],
            "la contraseña del postgres la puse en tren-nube-ventana-tiza pero el contenedor dice authentication failed": ["tren-nube-ventana-tiza"],
            "a senha do ficheiro zip com as folhas de férias de Abril é mandioca tartaruga varanda farol. não encaminhem": ["mandioca tartaruga varanda farol"],
            "Usuario: `veeam_dr`\nContraseña (partida a propósito, concatenar):\n\n```\nkrbDY86cCicQ\nnPui5aiUCEpV\n```": ["krbDY86cCicQ", "nPui5aiUCEpV"],
            "o provedor dinos o contrasinal de servizo en tres bloques:\nbloque 1 -> jkLzmi\nbloque 2 -> 63q4c7Q28\nbloque 3 -> J1GeTL": ["jkLzmi", "63q4c7Q28", "J1GeTL"],
            "Phạm Thu Hà, 09:41\nvnp_HashSecret production nè: L9RX3NASU6MQY8P4Z0B\nPhạm Thu Hà, 09:41\nD04PL5SU8UC9S0X\nVũ Minh, 09:43\nok em": ["L9RX3NASU6MQY8P4Z0B", "D04PL5SU8UC9S0X"],
            "objekt;adresse;alarmcode;schluesselbox\nRathaus Nord;Marktplatz 3;770912;539177\nBauhof;Industriestr. 9;120034;8128486": ["539177", "8128486"],
        })
        self.assert_kept((
            "step_1 = build\nstep_2 = test",
            '    "KeyPrefix": "tenant",\n    "KeySuffix": "cache-v2"',
            "key_date_a = 2024-01-01\nkey_date_b = 2024-02-01",
            '$ grep -rn "SECRET" .env.example\n.env.example:3:PAYSTACK_SECRET_KEY=\n.env.example:4:FLW_SECRET_KEY=\n.env.example:9:JWT_SECRET=',
            "# authorized_keys de deploy@integra02\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKETNDSwyAfsvDk7g4ABcrfy62PyTyhKa7/PmJ2F0nd jenkins@ci-hvh",
            "$ cat ~/.ssh/authorized_keys\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKL01HeQ4DiceoSNZIg0Y8lfwItorBj1WtKoS6yKdUF2 m.huber@NB-IT-08",
            "Claude and Claudia read the clause about the clau-less door",
            "print join ', ', 'alpha', 'beta';",
            "la contraseña la puse en el vault de siempre",
        ))

    def test_parts_in_tuples_and_table_columns_sibling_cookies_korean_loanwords_and_hausa(self):
        """Caught: a secret's parts given to one tuple (`tok_a, tok_b = "…", "…"`, Go's `:=`) and in a table's
        columns named by one stem and parts' marks (`key_prefix,key_suffix`, `token_parte1;token_parte2`);
        strings a tuple is given that an f-string joins later; JSON's names that `${env:NAME}` reads; Korean's
        loanword 패스워드; the other cookies of a cookie string one of which was redacted; Hausa's "ita ce"; a
        secret's pieces that a chat's messages label (two people's halves, "1/3 …", "Moitié A :", "… (début)",
        "premier morceau :"); parts named by their marks alone in a table's columns; a part's name and value
        given to a row or a call, and Kubernetes' env entries; `authHead`/`authTail`; a rest under Discord's
        `Name — 10:05` after a message that says the value was cut. Kept: a cache's key prefix and suffix in
        a table, a tuple of plain words, an f-string of words, a cookie string of no secret, a sentence in
        Hausa that says "shi ne", halves of a pizza, steps counted 1/3, a date's `02/2`, parts of a region."""
        self.assert_redacted({
            'In [4]: tok_a, tok_b = "RQZK7c1d90f3a8e24b6", "77b0e15c9d"\nIn [5]: api = Orbit(tok_a + tok_b)': ["RQZK7c1d90f3a8e24b6", "77b0e15c9d"],
            'key_1, key_2 := "b8d1f07a43c2e9", "5e6a02cf71d4b3"': ["b8d1f07a43c2e9", "5e6a02cf71d4b3"],
            "region,app,key_prefix,key_suffix\neu-west,ledger,9c41e0b7d2a85f36,02ad7fe14c9b63e8\nus-east,billing,5fa39c0e17b2d846a,e7c2019bd45af36": [
                "9c41e0b7d2a85f36", "02ad7fe14c9b63e8", "5fa39c0e17b2d846a", "e7c2019bd45af36"],
            "equipo;token_parte1;token_parte2;contacto\nrayos;4be1c07d95f2a3e86d10;a93f0e5d7c21b84e6f02;it.rx": ["4be1c07d95f2a3e86d10", "a93f0e5d7c21b84e6f02"],
            'def connect():\n    a, b = "lontong.sayur", "kerupuk.udang9"\n    return pg.connect(f"host=db user=ro password={a}{b}")': ["lontong.sayur", "kerupuk.udang9"],
            '{\n  "terminal.integrated.env.osx": {\n    "GH_P1": "ghp_Vx8LmQ2rTz6KwN",\n    "GH_P2": "d4Jc9PbY1sFh7GaE3u",\n    "GH_TOKEN": "${env:GH_P1}${env:GH_P2}"\n  }\n}': [
                "ghp_Vx8LmQ2rTz6KwN", "d4Jc9PbY1sFh7GaE3u"],
            "은행\t계정\t패스워드\n국민은행\tjisoo.park\tbusan7731\n": ["busan7731"],
            "NAS 패스워드는 Hangang_2288 입니다": ["Hangang_2288"],
            "PortalSession=Qm9a7Lk2Xc8Vb4Nz1Hj6Tg3Rf5Yd0We; PortalSAT=kT83HvbQ1pLw7ZsN0cXe4RmD9yJf2Ua6GiOq5Bt; PortalSATId=3f2a9c1e-77b4-4d0a-9e51-2c8b6d40f713": [
                "kT83HvbQ1pLw7ZsN0cXe4RmD9yJf2Ua6GiOq5Bt"],
            'curl -s -b "pref_cache=4a9c0e71d2b83f56; _csrf=Zk4Lq9Rx2Vm7Tn1Bc8Wd5Hy3" https://git.example.test/user': ["4a9c0e71d2b83f56"],
            "Kalmar sirri ta rumbun adana ita ce kogi-dutse-rana-77 — kar ka tura wa kowa.": ["kogi-dutse-rana-77"],
            "[10:02] Ana: two-person rule for the vault passphrase, nobody holds it all\n[10:04] Ana: mine: Otter7#brine\n[10:05] Ben: brb\n[10:09] Ben: Quokka!42 <- back half, delete after": [
                "Otter7#brine", "Quokka!42"],
            "Sanne  10:44\noké, mijn deel: HeronDijk\nDaan  10:49\nen mijn helft: .Molen2019, gewoon achter elkaar plakken": ["HeronDijk", ".Molen2019"],
            "<kim> sending the token in 3 bits, teams mangles it. 1/3 gho_Tz8Kq2Lm\n<lee> coffee?\n<kim> 2/3 Xw7PbN3cVd1H\n<kim> 3/3 Rf5Yd0WeQm9a done": [
                "gho_Tz8Kq2Lm", "Xw7PbN3cVd1H", "Rf5Yd0WeQm9a"],
            "Pour le compte bg-admin, principe des quatre yeux.\n> Moitié A : KpR4!zt\n> Moitié B : wq9#LmT2v": ["KpR4!zt", "wq9#LmT2v"],
            "lrochat: tu peux me donner ta moitié du mdp du coffre ? j'ai la mienne\nrfavre: Zq8!mP2#wL (début)\nlrochat: ok et moi la fin: Tn4$vB7@kR": ["Zq8!mP2#wL", "Tn4$vB7@kR"],
            "Je t'envoie le mot de passe wifi en deux\nCarine  15:05\npremier morceau : Baobab\nCarine  15:06\ndeuxième morceau : kora2025$": ["Baobab", "kora2025$"],
            "service,environnement,partie_1,partie_2\nsms,prod,c81f02e9b7d4a65310fe2b9c,7a0d4e1f83b2\n": ["c81f02e9b7d4a65310fe2b9c", "7a0d4e1f83b2"],
            "INSERT INTO `settings` (`id`, `key`, `value`) VALUES\n(41, 'gateway_apikey_part1', '91c4e07ab35d2f86e1b0c'),\n(42, 'gateway_apikey_part2', '7d2e.55310942');": [
                "91c4e07ab35d2f86e1b0c", "7d2e.55310942"],
            "        env:\n          - name: PASSKEY_A\n            value: \"b3f0e9a17c42d86e51af\"\n          - name: PASSKEY_B\n            value: \"2c7d90e4f1ab3658c0de\"": [
                "b3f0e9a17c42d86e51af", "2c7d90e4f1ab3658c0de"],
            "redis:\n  authHead: Gx7pRt2+mQ^k\n  authTail: VbN4cWz8LsYq": ["Gx7pRt2+mQ^k", "VbN4cWz8LsYq"],
            "Julien Moreau — 10:05\nla clé Datadog de recette c'est 5f0e9c2a7b41d836e0a2f7\nJulien Moreau — 10:05\noups envoyé trop vite, manque la fin\nJulien Moreau — 10:06\n3c21a0799b9cd641e135": [
                "5f0e9c2a7b41d836e0a2f7", "3c21a0799b9cd641e135"],
        })
        self.assert_kept((
            "tenant,key_prefix,key_suffix\nacme,tenant,cache-v2\nglobex,shard,cache-v3",
            'first_1, first_2 = "hello", "world"',
            'a, b = "hello", "world"\nprint(f"{a}{b}")',
            "Cookie consent: lang=en-GB; theme=dark; layout=compact",
            "Shi ne mai kula da kalmar sirri ta ma'aikata, shi ne ke bada izini.",
            "[10:02] Ana: let's split the pizza, mine: pepperoni\n[10:04] Ben: my half is margherita, then tiramisu",
            "Step 1/3 install deps\nStep 2/3 build\nStep 3/3 test -- the password reset flow passes",
            "01/02/2025, 17:39 - Isla: first bit of the talk is on slide 2\n01/02/2025, 17:45 - Callum: 2/2 done",
            "region,shard,part_1,part_2\neu,a,north,south\n",
        ))

    def test_armenian_and_greek_words_parts_joined_by_the_preprocessor_and_what_references_or_names_a_public_key(self):
        """Caught: passwords after Armenian's գաղտնաբառ (and its "is", է՝) and Greek's κωδικό; C's `#define KEY_HI`/`KEY_LO`
        parts; a list of hex chunks joined inside a call (`bytes.fromhex("".join(_CHUNKS))`); a password's pieces
        answering a French "mdp" question after a message that says it comes; Lingala's "ezali", French's "code
        secret" and SMS "c"; a log's `[cont]` line; Darija's and Tunisian's "loul:"/"thani:"; "second half so:". Kept: a shell's error for an unset
        variable (`${DB_PASSWORD:?…}`), Octopus's `#{DbPassword}#`, a public key the word says is public after it
        ("Clé publique"), a Kubernetes object by kind and name, a pattern a password must match, a test runner's
        `PASS  Tests\\Feature\\X`, Kotlin's signatures, a package at its version, Jenkins' credentials by kind, a
        token's serial number, an i18n file's translation of "password"."""
        self.assert_redacted({
            "Բարև Արամ, SAP-ի RFC օգտատիրոջ գաղտնաբառը Gyumri4471. է։": ["Gyumri4471."],
            "անձնակազմի Wi-Fi-ի նոր գաղտնաբառն է՝ Sevan!Lich82։": ["Sevan!Lich82"],
            "Βάλε στο script τον κωδικό της Oracle για τον EDI_STAGE: Zr7bYpQw2Lk9Vt και τρέξ' το στο UAT": ["Zr7bYpQw2Lk9Vt"],
            '#define FTP_PWD_HI "61A0C4E9F27B83D5E10A"\n#define FTP_PWD_LO "9D2BC47E03F1"\n#define FTP_PWD FTP_PWD_HI FTP_PWD_LO': ["61A0C4E9F27B83D5E10A", "9D2BC47E03F1"],
            '_CHUNKS = [\n    "a41f0c77d2e9b3568", "e0b5c2d94f1a76e3",\n    "5c9e2a0f7d13b84e", "17ad4e02c9f6b358",\n]\nKEY = bytes.fromhex("".join(_CHUNKS))': [
                "a41f0c77d2e9b3568", "e0b5c2d94f1a76e3", "5c9e2a0f7d13b84e", "17ad4e02c9f6b358"],
            "Steve: yo t'as-tu le mdp pour la console HMC?\nKarine: ouais attends chu dans le char\nKarine: Rq7$%Vm-wxz\nKarine: _%4K8PLM_\nKarine: colle les deux ensemble": ["Rq7$%Vm-wxz"],
            "Passkey ya M-Pesa ezali 5be0c4a1f93d27e86a10c5d4f2b97e3a08d16c5f4b2e9a71d03c8f6e5a4b2c19, bakisa yango na config": [
                "5be0c4a1f93d27e86a10c5d4f2b97e3a08d16c5f4b2e9a71d03c8f6e5a4b2c19"],
            "Le code secret Orange Money du compte marchand : 583920 . Ne le dis à personne": ["583920"],
            "slt, le mdp de demo sur l'extranet c Chalet_Bleu_77 (jsp pk mais il avait expiré)": ["Chalet_Bleu_77"],
            '02:14:07 gw[4121]: DEBUG config {"user":"gw","secret":"xoxb-5120394857-Kq8vTz2LmNw [msg truncated, continued]\n02:14:07 gw[4121]: [cont] Pr4sYb7cD1fGh","timeout":30}': [
                "Pr4sYb7cD1fGh"],
            "17/07/2024 21:39 - Mehdi: taw nab3athlek le mot de passe Redis fi zouz\n17/07/2024 21:41 - Mehdi: loul: K@RtQ7\n17/07/2024 21:42 - Mehdi: thani: wp4LZs^DUX^8!0B": [
                "K@RtQ7", "wp4LZs^DUX^8!0B"],
            "<niamh> grand so, my half is harbour-kettle\n<orla> the kettle is banjaxed again\n<orla> second half so: -lantern-nebula": ["harbour-kettle", "-lantern-nebula"],
        })
        self.assert_kept((
            "    password: ${DB2_PASSWORD:?la variable DB2_PASSWORD doit être définie}",
            "HL7_SFTP_PASSWORD=${HL7_SFTP_PASSWORD:?HL7_SFTP_PASSWORD must be set}",
            '<add name="Reports" connectionString="Data Source=ORA:1521/RPT;User ID=rpt;Password=#{RptDbPassword}#" />',
            "Clé publique Ed25519 (hex) du signataire des releases : 0f6f66a2e677bac90f4e3054586dfafc95f5bb931a5009f5a012183368757d14",
            "sealed-secrets : SealedSecret/paiements-db2 dans le namespace paiements",
            'if (!password.matches(".*[^A-Za-z0-9].*")) { throw new PolicyException("Le mot de passe ne respecte pas la politique"); }',
            "$ php artisan test --filter=InvoiceTest\n   PASS  Tests\\Feature\\InvoiceTest\n  Tests:    3 passed",
            "interface SecretStore {\n    suspend fun getRefreshToken(): String?\n    suspend fun saveRefreshToken(token: String)\n    suspend fun clearTokens()\n}",
            "$ spack find -l openmpi\n-- linux-rocky9-zen3 / gcc@13.2.0 ------\ndfw6tt6 openmpi@4.1.6",
            "Jenkins → Manage Credentials → (global):\n  steam-builder-pw      Secret text\n  nexus-deploy          Username with password",
            "Numéro de série du jeton matériel (inventaire) : PY7AO1V0UE0I — attribué à K. Lavoie",
            '{ "hy": { "login.password": "Գաղտնաբառ", "login.secretQuestion": "Գաղտնի հարց" } }',
        ))

    def test_transcripts_ellipses_spoken_pins_parts_beside_references_and_code_that_joins_in_less_common_languages(self):
        """Caught: a value a transcript glues an ellipsis to ("… is cobalt.tundra48… no wait"), a PIN read out
        digit by digit, Cebuano's "kay", a recovery phrase in Spanish, three long words quoted after "is",
        groups read out under their labels ("primer grupo …"), a rest after "lo demás" and "tuloy", a secret's
        literal glued to the reference that holds the rest (`RESTIC_PASSWORD="$(cat …)…"`, `"…${NC_PW_END}"`),
        a JWK's members after `=>` and in escaped JSON, hex decoded under a key's name (`bytes.fromhex`,
        `pack('H*', …)`), a UUID under a `_KEY` name, R's `Sys.getenv(…, unset = …)`, Kazakh's and Norwegian's
        words, strings joined by R's sprintf, HCL's join of locals, COBOL's STRING and Elixir's Enum.join, n8n's
        "Header value:" under a key's "Header name:" in small letters.
        Kept: a metric's label, a Bitwarden item's user name through jq, a command whose only secret word is
        a reference it is given, a flag that names an id, Earthly's `+secrets/…`, a token's prefix said in
        backticks, a record's base64 key, stand-ins in Spanish capitals and by encoding, a thank-you after a
        log of failed logins, a checksum file's lines, a form's question, digits in order, a USSD session's id,
        a prefix the ellipsis cuts."""
        self.assert_redacted({
            "[dictated]\nok so the router admin password is cobalt.tundra48… no wait, that one's retired": ["cobalt.tundra48"],
            "[nota vocale] …il PIN della cassaforte è 7 3 1 9 0 4 … non dirlo a nessuno": ["7 3 1 9 0 4"],
            "> ang password sa printer sa Mandaue kay Mangga-Ulan-77. salamat kaayo": ["Mangga-Ulan-77"],
            "Notas:\n- la frase de recuperación del gestor es limon-gato-nube-silla\n- pendiente: UPS": ["limon-gato-nube-silla"],
            'if I get hit by a bus: the vault master password is "saffron harbor tiger" and Ana has the codes': ["saffron harbor tiger"],
            "el código de recuperación te lo dicto en grupos… primer grupo kqvz4821 … segundo grupo RTLmwpxa … tal cual": ["kqvz4821", "RTLmwpxa"],
            "> la pw del router es Qx7mrKw\n\n> uy se cortó, aquí va lo demás: T2!vw9Lp": ["Qx7mrKw", "T2!vw9Lp"],
            '$ RESTIC_PASSWORD="$(cat ~/.restic_a)Vq#8%%mLzT2" restic -r sftp:nas:/bk snapshots': ["Vq#8%%mLzT2"],
            '    environment:\n      NC_ADMIN_PASSWORD: "7hRtKq${NC_PW_END}"': ["7hRtKq"],
            'jwk = JOSE.JWK.from_map(%{"kty" => "oct", "k" => "-xipTwvXb_I01vollYsJB2EMfflwUtAKqddTomlxpmY"})': ["-xipTwvXb_I01vollYsJB2EMfflwUtAKqddTomlxpmY"],
            'app.config["SECRET_KEY"] = bytes.fromhex("8dd1eb8b9452da65e4c311aafaa7a1f7f3cc2d164d638b576f3482596df94925")': [
                "8dd1eb8b9452da65e4c311aafaa7a1f7f3cc2d164d638b576f3482596df94925"],
            'const ERA5_KEY = "09a77c8c-5fae-4d28-ace6-b1e22a4d8084"': ["09a77c8c-5fae-4d28-ace6-b1e22a4d8084"],
            'appid = Sys.getenv("OWM_KEY", unset = "c07d9fc8d12abdabc2387a2674f6dda9")': ["c07d9fc8d12abdabc2387a2674f6dda9"],
            "Salem! Kaspi kabinetine kiru: login bilim.fin, qupiia söz Tulpar_2011": ["Tulpar_2011"],
            "Hei,\nAPI-nøkkelen til værproxyen er nå BRyh6wVM7RdMiZ. Den gamle slutter fredag.": ["BRyh6wVM7RdMiZ"],
            'k1 <- "MrrNymoCnYJI4x"\nk2 <- "VoxYw52oUM"\nSys.setenv(AWS_SECRET_ACCESS_KEY = sprintf("%s%s", k1, k2))': ["MrrNymoCnYJI4x", "VoxYw52oUM"],
            'locals {\n  tok_a = "q7RkT2mW9xLp"\n  tok_b = "Zb4Nc8Vd1Hs6"\n}\nprovider "tfe" {\n  token = join("", [local.tok_a, local.tok_b])\n}': ["q7RkT2mW9xLp", "Zb4Nc8Vd1Hs6"],
            "           STRING 'Kf8Lm2Qx7Rz' DELIMITED BY SIZE\n                  'Wt3Hv9Pb4Ns' DELIMITED BY SIZE\n                  INTO WS-API-KEY": ["Kf8Lm2Qx7Rz", "Wt3Hv9Pb4Ns"],
            'config :alerts, :mailgun_key,\n  Enum.join(["c07d9fc8d12abdab", "c2387a2674f6dda9ce"])': ["c07d9fc8d12abdab", "c2387a2674f6dda9ce"],
            "n8n webhook node\n  Authentication: Header Auth\n  Header name: X-N8N-Key\n  Header value: Hq4mZt8RwX2cLp7VbN3sJ9kD": ["Hq4mZt8RwX2cLp7VbN3sJ9kD"],
        })
        self.assert_kept((
            'secret_rotation_last_success_timestamp{secret="pg-ledger"} 1747268915',
            '$ export BW_SESSION="$(bw unlock --passwordenv BW_MASTER --raw)"; bw get item "nas-backup" | jq -r .login.username\nbackup',
            "$ dagger call deploy --src=. --fly-token=env:FLY_API_TOKEN --vault-token=vault://ci/dagger.token\n✔ connect 0.3s\n\nv2025.05.22-bbe747d",
            "$ boundary authenticate password -auth-method-id ampw_ikYR3OSpGw -login-name joao -password env://BOUNDARY_PASSWORD",
            '    RUN --secret NPM_TOKEN=+secrets/NPM_TOKEN \\\n        bun publish',
            "o token começa com `dp.st.prd.` e o resto tá no cofre, não cola aqui",
            '{"topic":"orders","partition":4,"offset":455272,"key":"dGVuYW50LTQy","value":"eyJldmVudCI6ICJvcmRlci5jcmVhdGVkIn0="}',
            "smtp:\n  usuario: recordatorios@example.mx\n  contrasena: TU_CONTRASEÑA_AQUI",
            "otpauth://totp/Issuer:account@example.com?secret=BASE32SECRET&issuer=Issuer",
            "$ journalctl -u ssh | grep -i 'failed password' | tail -1\nJun 03 02:13:40 nas sshd[66935]: Failed password for root from 102.63.221.223 port 60340 ssh2\n\n> gracias!!",
            "$ cat SHA256SUMS && sha256sum -c SHA256SUMS\n210d53d25f3cbdafed327fa92de54fee955f54e077edf15b36a1ee6b0d8fb898  backup.tar.zst\nbackup.tar.zst: OK",
            '<string name="forgot_password">Parolni unutdingizmi?</string>',
            "the PIN has 4 digits: 1 2 3 4 is not allowed",
            "2024-10-14 08:15:02 INFO ussd session=ATUid_9c21 msisdn=2519******12 step=PIN_VERIFY result=OK",
            "pass: (SMTP key from Brevo, starts with xsmtpsib-…)",
            "Header name: Content-Type\nHeader value: application/json",
        ))

    def test_cipher_keys_dpapi_robots_cookie_jars_and_passwords_in_yoruba_zulu_and_pidgin(self):
        """Caught: an AES or HMAC key a key store lists with its algorithm, a DPAPI-encrypted password in
        hex, a Harbor robot's secret, a cookie jar's set(), a cookie named in prose, a Dropbox Transfer's
        link, `Basic+…` in an IIS log, `--user 'name':'password'`, sshpass' `-p` after `-P "prompt"`, a
        batch file's `echo user … >> ftp.txt`, keytool's password that starts with a dash, an HMAC's
        secret with its algorithm in brackets, a door keypad's code after an arrow; passwords after
        Yoruba's and isiZulu's words, in a Yoruba table, in parts labelled in Yoruba and Nigerian Pidgin.
        Kept: a checksum tool's listing of files whose names say pass, an unsigned JWT, a value in
        brackets that says where it is set, `replace-me-…`, a vendor's prefix and x's called dummy, the
        next empty `NAME=` under a secret, Application Insights' ai_session, `@$HOME/…` given to vault,
        `${CREDENTIALS_DIRECTORY:-…}`, a method's name after `PrivateKey`, uuidgen beside a 4-byte
        `openssl rand`."""
        self.assert_redacted({
            'KMS> key list\n{"id": 3, "alg": "AES-128-GCM", "state": "ACTIVE", "value": "0x9f3ac1d07be24a55816e0d7c2b94a1f6"}': ["0x9f3ac1d07be24a55816e0d7c2b94a1f6"],
            "key_id   : 7\nalgorithm: HMAC-SHA-512\nvalue    : 4e7d2c9a1b3f5e6d7c8b9a0f1e2d3c4b5a69788796a5b4c3d2e1f00112233445": ["4e7d2c9a1b3f5e6d7c8b9a0f1e2d3c4b5a69788796a5b4c3d2e1f00112233445"],
            '<SS N="Password">01000000d08c9ddf0115d1118c7a00c04fc297eb01000000a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90aabbccdd</SS>':
                ["01000000d08c9ddf0115d1118c7a00c04fc297eb01000000a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90aabbccdd"],
            "pull failed: 401 Unauthorized (robot$yard-cam+pull:Zk3QmW8rT2vX9pL4nB7cY1dF6gH0jS5a)": ["Zk3QmW8rT2vX9pL4nB7cY1dF6gH0jS5a"],
            "  jar.set('https://tos.example.local', 'TOSAUTH', 'p7Qm2Xk9LzR4tW8vB3nC6dF1gH5jK0sA');": ["p7Qm2Xk9LzR4tW8vB3nC6dF1gH5jK0sA"],
            "this is the TOS session cookie from my browser: Qm2Xk9LzR4tW8vB3nC6dF1gH5jK0sAp7%2BQm2Xk9LzR4tW8vB3nC6dF1g%3D%3D": ["Qm2Xk9LzR4tW8vB3nC6dF1gH5jK0sAp7%2BQm2Xk9LzR4tW8vB3nC6dF1g%3D%3D"],
            "crane logs are here: https://www.dropbox.com/t/Hq7Zp2Lm9XwR4tVb8Nc3": ["Hq7Zp2Lm9XwR4tVb8Nc3"],
            "2026-02-11 04:31:17 10.1.5.12 POST /gate/api - 443 - 10.1.8.77 Basic+Z2F0ZTpLaWxpbmRpbmktNDQ3MQ== 401": ["Z2F0ZTpLaWxpbmRpbmktNDQ3MQ=="],
            "curl -s --user 'gate.ocr':'Mombasa.Tide-71' https://tos.example.local/api/visits": ["Mombasa.Tide-71"],
            'sshpass -P "Enter passphrase" -p \'Rotterdam.92\' ssh-add ~/.ssh/crane_ed25519': ["Rotterdam.92"],
            "echo user edi_upload Haven!Kade77>> ftpcmd.txt": ["Haven!Kade77"],
            "keytool -importcert -alias edi-ca -file ca.pem -keystore trust.jks -storepass -Kq#+V+x8tw+LVw2z -noprompt": ["-Kq#+V+x8tw+LVw2z"],
            "Signing secret (HMAC-SHA256): 5b0e7c2d9a4f6e1b3c8d7a0f2e4b6c9d1a3f5e7b9c2d4f6a8e0b1c3d5f7a9e2b": ["5b0e7c2d9a4f6e1b3c8d7a0f2e4b6c9d1a3f5e7b9c2d4f6a8e0b1c3d5f7a9e2b"],
            "Quay office:\n  Gate keypad (east side) -> 608152": ["608152"],
            "Funmilayo: Ọ̀rọ̀ìgbaniwọlé Wi-Fi ọ́fíìsì Apapa ni Ebute#Metta42. Mo ti yí i padà.": ["Ebute#Metta42"],
            "Iphasiwedi ye-TOS ngu-Thekwini-Pier9. Ngiyabonga.": ["Thekwini-Pier9"],
            "| ẹ̀rọ     | orúkọ | ọ̀rọ̀ìgbaniwọlé |\n|---|---|---|\n| crane-7 | maint | Tin-Can#Island5 |": ["Tin-Can#Island5"],
            "Adebayo: Mo máa fi ọ̀rọ̀ìgbaniwọlé ránṣẹ́ ní apá méjì\nAdebayo: Apá kìíní: Lekki-Quay\nAdebayo: Apá kejì: #Berth-1977": ["Lekki-Quay", "#Berth-1977"],
            "Tunde: I go send the gate password for two parts\nTunde: first part na Apapa-Gate\nTunde: second part na -Since2001!Tin": ["Apapa-Gate", "-Since2001!Tin"],
        })
        self.assert_kept((
            "$ md5sum /data/gate/2026-02-11/*.jpg\n6ae3fe3d2fca9cb580f41236d0a1a326  pass_0211.jpg\n0b418f231c1b928a10aece6daeeea76a  pass_0347.jpg",
            "API docs example (unsigned): eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiJnYXRlLWRlbW8ifQ.",
            '<add key="Tos:SigningCertPassword" value="[set in the App Service configuration]" />',
            "SESSION_SECRET=replace-me-with-64-hex-chars\nGATE_BUCKET=gate-ocr-dev",
            'const FAKE_KEY = "sk-ant-api03-XXXXXXXX-dummy";',
            "Set-Cookie: ai_session=Qx9g1ksz|1770000000000|1770000061000; Path=/; Secure; SameSite=None",
            "vault kv put tos/ansible/deploy private_key=@$HOME/.ssh/id_ed25519_tos && shred -u ~/.ssh/id_ed25519_tos",
            'load_secrets() {\n  local dir="${CREDENTIALS_DIRECTORY:-/etc/ccsds-fwd/creds}"\n  GATE_SECRET="$(<"$dir/gate_secret")"\n}',
            "public final class PrivateKeyLoader {\n    public static PrivateKey fromPkcs8File(Path path, char[] passphrase) throws GeneralSecurityException {",
            "$ uuidgen; openssl rand -hex 4\n6540935d-eafd-490f-8ac6-a4af30769acd\n113fe55b",
        ))
        self.assert_redacted_as({"SESSION_SECRET=Xk29mPq7zLw4Rt8VbN3cQ\nENTRA_CLIENT_SECRET=\nGATE_BUCKET=gate-ocr-dev":
                                 "SESSION_SECRET=«redacted»\nENTRA_CLIENT_SECRET=\nGATE_BUCKET=gate-ocr-dev"})

    def test_a_secrets_rest_in_its_speakers_next_message_and_what_prompts_and_tables_print(self):
        """Caught: the rest of a secret its speaker sends in the next message (Teams', Slack's, Telegram's, Zoom's
        and a transcript's layouts, a message of words between; hex that starts with eight digits), capitals drawn at random (what `gcloud secrets
        versions access` prints, VNPay's hash secret in prose), output under a `[root@host ~]#` prompt, a key
        file named in a comment by its relative path, a card's `PIN.CH` column, a Korean table's `… 키`, an
        audit log's `a1="-p" a2="…"`, Rocket.Chat's webhook token, n8n's `Header Value`, a secret's parts in
        Swahili and Vietnamese, Polish's "reszta to …", PowerShell's `+` and backtick continued on `>> `, base64 a
        prompt's `$` follows, "senha X" over its rest. Kept: `kubectl api-resources`, a secret fetched by its
        name, an account in a prompt's text, Kinesis' sequence number after a partition key, a vault's path,
        `sort -u` above grep's lines, an inventory of secrets' names and owners, a vendor's prefix asked
        about, a certificate in base64, an order's number after a password's word."""
        self.assert_redacted({
            "[11:02] Karim Benali\nle mot de passe du compte Mews pour le réceptionniste c'est\n[11:02] Karim Benali\nMistral_Lyon\n[11:03] Karim Benali\nchambery.99\n"
            "[11:05] Thomas Girard\nOk": ["Mistral_Lyon", "chambery.99"],
            "Kasia Nowak  10:41 AM\nhej, client secret do aplikacji Allegro (prod):\nQm7Xr2Kp9Lz4Tw8VbN3c5Dd1Fg6Hj0Ks2Lq9Wx4Ez7Ry\nKasia Nowak  10:42 AM\n"
            "sorry, slack uciął, reszta:\nTw8VbN3c5Dd1Fg6Hj0Ks2\nPiotr Lis  10:44 AM\ndzięki": ["Qm7Xr2Kp9Lz4Tw8VbN3c5Dd1Fg6Hj0Ks2Lq9Wx4Ez7Ry", "Tw8VbN3c5Dd1Fg6Hj0Ks2"],
            "Rafael Souza, [21.03.2025 09:12]\nThomas, a senha do roteador da pousada é\n\nRafael Souza, [21.03.2025 09:12]\nIPA-ma\n\nRafael Souza, [21.03.2025 09:13]\nracuja-51 tudo junto":
                ["IPA-ma", "racuja-51"],
            "user\nthe gate controller pw is Harbour7!\n\nuser\n-Tide2026 (continued)": ["Harbour7!", "-Tide2026"],
            "09:14:02 From Ana Ruiz to Everyone:\n\t for the demo, the Twilio auth token (live, careful):\n09:14:20 From Ana Ruiz to Everyone:\n\t 9c4e1a7b2d\n"
            "09:14:31 From Ana Ruiz to Everyone:\n\t 52718834f0c3ab\n09:14:44 From Ana Ruiz to Everyone:\n\t 61b9e2d7f04": ["9c4e1a7b2d", "52718834f0c3ab", "61b9e2d7f04"],
            "$ gcloud secrets versions access latest --secret=vnpay-hash-secret --project=shop-prod\nQWTRZXKBVNMPLHGFDSYCBXJWQKRTZNMP": ["QWTRZXKBVNMPLHGFDSYCBXJWQKRTZNMP"],
            "[Zalo] Anh Tuấn IT: vnp_HashSecret của môi trường production là PLMZXKQWRTBVNCJHGFDSXZQWKTRMBNPV, TmnCode giữ nguyên.": ["PLMZXKQWRTBVNCJHGFDSXZQWKTRMBNPV"],
            "[root@hpc-head01 ~]# base64 -w 64 /etc/munge/munge.key | head -2\nq8XkL2mR7vTz4WpN9sYb3CdEfGhJ0aKsLqWx5Zc1Vb6Nm2Rt9Yp3Hd7Fg4Jk8Lm0\n": ["q8XkL2mR7vTz4WpN9sYb3CdEfGhJ0aKsLqWx5Zc1Vb6Nm2Rt9Yp3Hd7Fg4Jk8Lm0"],
            "# roles/slurm/files/jwt_hs256.key (generated: openssl rand -base64 48)\nWq3Er5Ty7Ui9Op1As2Df4Gh6Jk8Lz0Xc3Vb5Nm7Qw9Er1Ty3Ui5Op7As9Df2Gh4Jk": ["Wq3Er5Ty7Ui9Op1As2Df4Gh6Jk8Lz0Xc3Vb5Nm7Qw9Er1Ty3Ui5Op7As9Df2Gh4Jk"],
            "| Karte | Inhaber | PIN.CH | PIN.QES |\n|---|---|---|---|\n| eHBA | Dr. S. Lorenz | 481937 | 226104 |": ["481937", "226104"],
            "| 프로젝트 | 가명처리 키 (HMAC-SHA256, hex) |\n|---|---|\n| 심부전 코호트 | `4b8e1d7c2a9f6e3b5d0c8a7f1e2d4c6b9a0f3e5d7c1b8a2f4e6d9c0b3a5f7e1d` |":
                ["4b8e1d7c2a9f6e3b5d0c8a7f1e2d4c6b9a0f3e5d7c1b8a2f4e6d9c0b3a5f7e1d"],
            'type=EXECVE msg=audit(1741766402.118:90211): argc=6 a0="sshpass" a1="-p" a2="Rk8#vT2^mQ9zLp" a3="ssh"': ["Rk8#vT2^mQ9zLp"],
            "const DOORAY_URL = 'https://hook.dooray.com/services/4213285730813652582/7298297709016690125/Lp9Rt4Vb7Hd1Jf6Gs0Ke3Y';": ["Lp9Rt4Vb7Hd1Jf6Gs0Ke3Y"],
            "  Authentication: Header Auth\n  Header Name: X-N8N-Key\n  Header Value: Pz4Lm8Qr2Tv6Xw0Ya3Bc7De1Fg5Hj9Kn": ["Pz4Lm8Qr2Tv6Xw0Ya3Bc7De1Fg5Hj9Kn"],
            "Wanjiru: nenosiri la akaunti ya gate_admin, sehemu ya kwanza: Simba-Likoni\nWanjiru: (ya pili nakutumia SMS kwa usalama)\n"
            "Wanjiru: sawa nimetuma — sehemu ya pili ni -Jioni#2026": ["Simba-Likoni", "-Jioni#2026"],
            "Em gửi tài khoản cổng MoMo: mật khẩu phần đầu: HoiAn2024\n[Zalo 15:20] Bảo: chị ơi phần sau mk: 7@4412": ["HoiAn2024", "7@4412"],
            "„No cześć, hasło do tabletu to Gdynia#7 — czekaj, muszę sprawdzić resztę —\"\n„reszta to 5519Lato, wszystko razem.”": ["Gdynia#7", "5519Lato"],
            'PS C:\\scripts> $pwd = "kORMORAN" + `\n>> "Q77#?12"': ["kORMORAN", "Q77#?12"],
            "$ kubectl get secret shop-db -o jsonpath='{.data.password}'\nTXk5cVBhc3NXb3JkMjAyNkxvbmdlclRoYW5PbmVMaW5lT2ZCYXNlNjQ0\nYWJjZGVmZ2hpams==$": ["YWJjZGVmZ2hpams=="],
            "[09:31] Aline: login do zendesk: suporte.n2@example.com.br\n[09:31] Aline: senha PastelDeFeira\n[09:32] Aline: 88#417\n[09:32] Aline: foi em duas msg, é tudo junto": ["PastelDeFeira", "88#417"],
        })
        self.assert_kept((
            "$ kubectl api-resources | grep -i secret\nsecrets                     v1                               true    Secret\n"
            "secretproviderclasses       secrets-store.csi.x-k8s.io/v1    true    SecretProviderClass",
            'var secret = await _secretClient.GetSecretAsync("sap-rfc-yard-bridge", cancellationToken: ct);',
            '$secure = Read-Host -AsSecureString -Prompt "Password for YRD\\svc_n4import"\n$cred = [pscredential]::new("YRD\\svc_n4import", $secure)',
            '{"kinesis":{"partitionKey":"QC07","sequenceNumber":"49659146631750511941046025579187593038081709","data":"e30="}}',
            "Joost: ik heb het wachtwoord van de RTG12 HMI gereset, staat in de vault onder OT/RTG/RTG12. Niet in Teams zetten aub",
            "$ grep -o 'def [a-z_]*token[a-z_]*' -r src/ | sort -u\nsrc/auth/jwt.py:def decode_access_token\nsrc/auth/jwt.py:def issue_access_token",
            "Inventario de secretos\n- kv-research / omop-db-password  (dueño: TI Investigación)\n- kv-research / orthanc-admin-password  (dueño: Imagenología)\n"
            "- kv-research / redcap-api-token-proyecto-219  (dueño: Dr. Treviño)",
            "No onboarding pediram o Access Token do Mercado Pago. É aquele que começa com APP_USR? Não quero mandar errado",
            "# public cert below, key stays in the secret\ntls.crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJTRENCN3FBREFnRUNBaFFLSkR0L1lFRGpz...",
            "esqueci minha senha do app, o número do pedido é 771204 e meu CPF termina em 09",
        ))

    def test_names_references_public_keys_and_types_where_a_secret_would_stand_are_kept(self):
        """Kept: a secret manager's reference with a space in its vault's name, PowerShell's `-Name` of a vault's
        secret, a list of secrets' names one a line, a CSS variable after a password's class, Tailscale's `mkey:`,
        a Go map's public key, a DKIM record's chunks, `vault read transit/keys/…`, a Go struct's field and type,
        PL/SQL joining a password into its statement, a record's key of capitals and numbers, a vault path's
        `::password::1`."""
        self.assert_kept((
            "EMAIL_HOST_PASSWORD=op://Acme Engineering/smtp-relay/password",
            "PS C:\\ops> $env:SVC_PASSWORD = (Get-AzKeyVaultSecret -VaultName kv-ops-weu -Name svc360-app -AsPlainText)",
            '$ az keyvault secret list --vault-name kv-ops --query "[].name" -o tsv\napi-client-secret\nsvc360-app\nsmtp-relay',
            ".password-strength-meter--weak { background: var(--brand-red-500); }",
            "Machine key: mkey:8498f383be73f6552a2cae23306bd415936a7d5c5ccc21aa7acd0b2c7a211fdb",
            "keys   map[1:map[creation_time:2024-09-01T00:00:00Z name:ed25519 public_key:g7f781ZgN4FRhzossRGiiD2e0oc3+KlMKDcBY19nKgE=]]",
            '$ dig +short TXT s1._domainkey.example.com\n"v=DKIM1; k=rsa; " "p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAtq3Xk27LcwPz8RfNa1vY4sHe5Zq8Lm2Xr5Kp9Tw3Vb6NcYdHq9Lm2Xr5Kp7Rt8Tq3Wd4Hq9" "Lm2Xr5Kp7Rt8Tq3Wd4Vz1Yb6Nc3Gf5Hj0Ke9Ua2Rt8Vz1Yb6Nc3Gf5Hj0Ke9"',
            "$ vault read transit/keys/qr-signing\nKey          Value\n---          -----\nkeys         map[1:map[name:ed25519 public_key:aqSb7nH89gtMXtFeIe7mC83VG4kJrrAMJTXLMqIy39o=]]",
            '\tMQTTPassword string `json:"-"`',
            "  EXECUTE IMMEDIATE 'ALTER USER RPT IDENTIFIED BY \"' || l_pw || '\"';",
            "key=VAL-CZ-0931:34505746 offset=726950\nkey=VAL-CZ-0417:15533297 offset=5723538",
            "<password>${VAULT::ds_ErpDS::password::1}</password>"))

    def test_payment_keys_sap_and_jar_cookies_and_a_key_of_letters_in_a_hooks_path(self):
        """A payment provider's secret key (Mercado Pago's `APP_USR-…`, Xendit's `xnd_production_…`), SAP's logon
        ticket cookie (`MYSAPSSO2=`), a session cookie given to a cookie jar as a dict's item, an IFTTT key of
        letters only. Kept: a load balancer's affinity cookie, a provider's public key, a format's sample."""
        self.assert_redacted({
            "o de produção, pros compradores do Chile:\nAPP_USR-6620194837715502-071925-3e9b0c7a1f5d8e2b4a6c9d0e1f7a3b5c-662019483": [
                "APP_USR-6620194837715502-071925-3e9b0c7a1f5d8e2b4a6c9d0e1f7a3b5c-662019483"],
            'requests.get(url, auth=("xnd_production_Lq9sJd6FgH1kYe5TuA0oPiQ7ZKp2mWn4Rt8VbX3c", ""))': ["xnd_production_Lq9sJd6FgH1kYe5TuA0oPiQ7ZKp2mWn4Rt8VbX3c"],
            "sap-usercontext=sap-client=200; MYSAPSSO2=AjExMDABABhHAFUARQBTAFQAIAAgACAAIAAgACAAIAACAAYyADAAMAA%3d; path=/": [
                "AjExMDABABhHAFUARQBTAFQAIAAgACAAIAAgACAAIAACAAYyADAAMAA%3d"],
            'jar.cookies.update({"WMSESSION": "5c1e9a7b-3f2d-4e8a-9b6c-0d1f2e3a4b5c", "lang": "nb-NO"})': ["5c1e9a7b-3f2d-4e8a-9b6c-0d1f2e3a4b5c"],
            "curl -X POST https://maker.ifttt.com/trigger/tank_low/with/key/mQwErTyUiOpAsDfGhJkLzX": ["mQwErTyUiOpAsDfGhJkLzX"]})
        self.assert_kept(("Set-Cookie: ARRAffinity=3f9d2c7a1b8e4f6d0c5a9b2e7d1f4a8c3e6b9d0f2a5c8e1b4d7f0a3c6e9b2d5f;Path=/;HttpOnly;Secure",
                          "XENDIT_PUBLIC_KEY=xnd_public_production_Lq9sJd6FgH1kYe5TuA0oPiQ7ZKp2mWn4Rt8VbX3c",
                          "format: APP_USR-1234567890123456-123456-0123456789abcdef0123456789abcdef-123456789"))

    def test_an_orm_logged_password_a_typed_constant_and_a_key_named_with_its_encoding(self):
        """A parameter's value an ORM logged, where its statement gives it to a password's column (EF Core's
        `[Parameters=[@p0='…', @p1='…']]` ⏎ `INSERT INTO [T] ([Login], [TempPassword]) VALUES (@p0, @p1)`, `SET
        "api_token" = @p0`); VB's `Dim X As String = "…"`; a key named with its encoding (`seed (hex): …`); a
        password a message says "ficou assim:". Kept: the other parameters, a password read from /dev/stdin,
        an object's version id after its key."""
        self.assert_redacted({
            "Executing DbCommand [Parameters=[@p0='ops-oslo-07', @p1='Laks!Fjord88' (Size = 64)], CommandType='Text']\n"
            "INSERT INTO [Operators] ([UserName], [InitialPassword]) VALUES (@p0, @p1);": ["Laks!Fjord88"],
            "Executed DbCommand (2ms) [Parameters=[@p1='17', @p0='Zq8Lm2Xr5Kp9Tw3Vb6Nc' (Nullable = false)]]\n"
            'UPDATE "devices" SET "api_token" = @p0 WHERE "id" = @p1;': ["Zq8Lm2Xr5Kp9Tw3Vb6Nc"],
            'Dim FTP_PASS As String = "Torsk_Vinter77"': ["Torsk_Vinter77"],
            "gateway_x25519_seed (hex): 4b7e0c2a9f1d6e3b8a5c0f7e2d9b4a1c6e3f8d0b5a2c7e4f1d9b6a3c0e8f5d2a": [
                "4b7e0c2a9f1d6e3b8a5c0f7e2d9b4a1c6e3f8d0b5a2c7e4f1d9b6a3c0e8f5d2a"],
            "Oi Rui, a senha do Wi-Fi do armazém ficou assim: Bacalhau2026Norte . Abraço": ["Bacalhau2026Norte"]})
        self.assert_kept(("Executing DbCommand [Parameters=[@p0='ops-oslo-07', @p1='Bergen']]\nINSERT INTO [Operators] ([UserName], [City]) VALUES (@p0, @p1);",
                          "vault kv get -field=pw secret/mqtt | mosquitto_passwd -b /etc/mosquitto/passwd gw-07 /dev/stdin",
                          "  key: reports/2026/05/ledger.pdf  version-id: Qm7vLoHI2xT8wsYop4RzK9aB3cD5eF1g  last-modified: 2026-05-02T09:14:00Z"))

    def test_private_fields_openssl_prints_an_unseal_key_and_random_bytes_a_command_makes(self):
        """What `openssl pkey -text` prints of a private key (`priv:`, `privateExponent:`, `prime1:` and their
        lines of hex bytes), a Vault unseal key given to `vault operator unseal`, the output of `gpg
        --gen-random` and of a pipe from /dev/urandom, a key file folded (`fold -w 64 …key.b64`), an MFA seed's
        file. Kept: the public fields, a public key's file printed wrapped, `unseal -reset`."""
        self.assert_redacted({
            "X25519 Private-Key:\npriv:\n    c8:1f:4a:9e:27:d3:60:b5:0e:7a:92:1c:f4:8b:36:d9:\n    5a:e2:07:bc:41:9f:d6:23:88:0b:6e:f1:a7:34:c2:5d\npub:\n    0f:aa": [
                "c8:1f:4a:9e:27:d3:60:b5:0e:7a:92:1c:f4:8b:36:d9:", "5a:e2:07:bc:41:9f:d6:23:88:0b:6e:f1:a7:34:c2:5d"],
            "privateExponent:\n    3b:9e:d1:07:6c:a4:f2:58:1e:c9:30:7d:b6:e8:45:\n    a0:17:6f:d2:93:4c:b8:0e:e5:71:2a:9f:c6:38:d4:\n    [...]": [
                "3b:9e:d1:07:6c:a4:f2:58:1e:c9:30:7d:b6:e8:45:"],
            " 884  vault operator unseal Qm7vLoHI2xT8wsYop4RzK9aB3cD5eF1gHj6Kl0Nm2Pq=": ["Qm7vLoHI2xT8wsYop4RzK9aB3cD5eF1gHj6Kl0Nm2Pq="],
            "$ gpg --gen-random --armor 2 24\nT8wsYop4RzK9aB3cD5eF1gHj6Kl0Nm2P": ["T8wsYop4RzK9aB3cD5eF1gHj6Kl0Nm2P"],
            "$ head -c 32 /dev/urandom | base64\nK9aB3cD5eF1gHj6Kl0Nm2PqT8wsYop4RzQm7vLoHI2x=": ["K9aB3cD5eF1gHj6Kl0Nm2PqT8wsYop4RzQm7vLoHI2x="],
            "$ fold -w 40 keys/downlink.key.b64\nHj6Kl0Nm2PqT8wsYop4RzK9aB3cD5eF1gQm7vLoH\nI2xT8wsYop4Rz=": ["Hj6Kl0Nm2PqT8wsYop4RzK9aB3cD5eF1gQm7vLoH"],
            "$ cat ~/totp-seed.txt\n7CJPKNGJYQWEMU34HFUPH7MMK42ZIFVR": ["7CJPKNGJYQWEMU34HFUPH7MMK42ZIFVR"]})
        self.assert_kept(("pub:\n    2e:b1:81:87:1d:ab:94:b9:d5:bb:2a:e0:b1:5d:5f:\n    d2:25:61:59:dc:e1:b7:7d:6e:6b:74:1a:5c:d7:4b:",
                          "$ cat ~/.ssh/id_ed25519.pub\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOm7vLoHI2xT8wsYop4RzK9aB3cD5eF1gHj6Kl0Nm2Pq\n"
                          "T8wsYop4RzK9aB3cD5eF1gHj6Kl0Nm2PqQm7vLoHI2x dev@laptop",
                          "vault operator unseal -reset"))

    def test_strings_code_formats_joins_or_builds_a_statement_at_a_time(self):
        """A secret's parts given as literal arguments of a call that formats a string (Rust's `format!`, Go's
        `fmt.Sprintf`, Terraform's `format`, Python's `%`), in a list Python joins (`"".join([…])`), appended
        with `+=` to a name given the first, or joined by `printf -v NAME '%s%s'` over continued lines. Kept:
        a format filled with words, a path joined from its parts."""
        self.assert_redacted({
            'let url = format!(\n    "postgres://{}:{}@{}/{}",\n    "reports_ro",\n    "Mawingu#2031",\n    host,\n    "reports"\n);': ["Mawingu#2031"],
            'dsn := fmt.Sprintf("host=%s user=%s password=%s%s dbname=%s",\n\tcfg.Host, "ingest",\n\t"Tq9!Lm2Xr",\n\t"5Kp7Wd4",\n\t"scenes")': ["Tq9!Lm2Xr", "5Kp7Wd4"],
            'conn = format("AccountName=%s;AccountKey=%s%s", "tilesarchive",\n  "Vz1Yb6Nc3GfWd4Hq9Lm2Xr5Kp7Rt8Tq3Zs6Jm0Ua2Ke9Hj5Gf1Nc3Yb6", "Vz1Yb6Nc3GfWd4Hq9Lm2==")': [
                "Vz1Yb6Nc3GfWd4Hq9Lm2Xr5Kp7Rt8Tq3Zs6Jm0Ua2Ke9Hj5Gf1Nc3Yb6"],
            'BOT_TOKEN = "".join([\n    "7301846529:AAHq9Lm2",\n    "Xr5Kp7Rt8Tq3Zs6Jm0Ua2Ke9Hj5Gf",\n])': ["7301846529:AAHq9Lm2", "Xr5Kp7Rt8Tq3Zs6Jm0Ua2Ke9Hj5Gf"],
            'func token() string {\n\tt := "glpat-Rt8Tq3Zs6"\n\tt += "Jm0Ua2Ke9Hj5G"\n\treturn t\n}': ["glpat-Rt8Tq3Zs6", "Jm0Ua2Ke9Hj5G"],
            "printf -v ENROLL_SECRET '%s%s' \\\n  '9b1f72e4d5a83d8e6a0c' \\\n  '4f5b7c21e09a3d8e'": ["9b1f72e4d5a83d8e6a0c", "4f5b7c21e09a3d8e"]})
        self.assert_kept(('msg := fmt.Sprintf("%s: %s", "upload", "scene not found")', 'path = "".join(["tiles", "/", "index.json"])',
                          'label = "{} {}".format("Sentinel", "two")'))

    def test_a_mnemonic_in_accented_words_in_labelled_ranges_or_in_a_quoted_list(self):
        """A wallet's mnemonic in a language whose words hold letters beyond ASCII (Turkish's `ı`, `ö`), laid out
        as labelled ranges (`Words 1- 6: …`), or quoted in a list under a wallet's JSON. Kept: a list of twelve
        colours, and of twelve prose words."""
        self.assert_redacted({
            "SIGNER_MNEMONIC='çiçek ılık sabah gölge yüzük kuzey öğle masa kapı duvar şehir bulut'": [
                "çiçek ılık sabah gölge yüzük kuzey öğle masa kapı duvar şehir bulut"],
            "Paper backup, treasury wallet\nWords  1- 6: lemon orbit candle frost pilot saddle\nWords  7-12: harbor wheat ripple canal timber unveil\n"
            "Words 13-18: meadow crane velvet ladder fjord amber\nWords 19-24: lotus tundra quartz ember maple raven": [
                "lemon orbit candle frost pilot saddle", "meadow crane velvet ladder fjord amber"],
            '{\n  "wallet": "ops-testnet",\n  "words": ["piedra", "canción", "lápiz", "nube", "pétalo", "rayo",\n'
            '            "sopa", "trébol", "viento", "zorro", "búho", "miel"]\n}': ['"piedra", "canción", "lápiz", "nube", "pétalo", "rayo",']})
        self.assert_kept(('COLORS = ["red", "green", "blue", "cyan", "magenta", "yellow", "black", "white", "orange", "purple", "brown", "pink"]',
                          'STOP = ["about", "above", "after", "again", "against", "all", "and", "any", "are", "because", "been", "before"]'))

    def test_signatures_public_keysets_types_and_names_where_a_key_is_named_are_kept(self):
        """Kept: a minisign signature's file (`untrusted comment: signature from minisign secret key`), a Tink
        keyset's public key, Kotlin's `val signingKey: String? by project`, an ExternalSecret's `secretKey:` name in
        capitals, a placeholder after `0x`, a Rust module's `auth::` in a log and a JWK's thumbprint, a load
        balancer's cookie. Redacted still: a minisign secret key under its own comment."""
        self.assert_kept(("untrusted comment: signature from minisign secret key\nRUQf7Xk29mPq7zLw4Rt8VbN3cXk29mPq7zLw4Rt8VbN3cXk29mPq7zLw4Rt8VbN3cXk29mPq7zLw4Rt8VbN3cAbCdEfGh0123=\n"
                          "trusted comment: timestamp:1764921600\tfile:agent.tar.gz\nZq8Lm2Xr5Kp9Tw3Vb6Nc1Hd4Jf7Gs0Ke3Ua6Yi9Ro2EZq8Lm2Xr5Kp9Tw3Vb6Nc1Hd4Jf7Gs0Ke3Ua6Yi9Ro2EZq8Lm2Xr5Kp9A==",
                          '{"primaryKeyId":42,"key":[{"keyData":{"typeUrl":"type.googleapis.com/google.crypto.tink.Ed25519PublicKey",'
                          '"value":"EiB3Zq8Lm2Xr5Kp9Tw3Vb6Nc1Hd4Jf7Gs0Ke3Ua6Yi9Ro2E=","keyMaterialType":"ASYMMETRIC_PUBLIC"},"status":"ENABLED"}]}',
                          "signing {\n    val signingKey: String? by project\n    val signingPassword: String? by project\n}",
                          "  data:\n    - secretKey: ORBIT_TC_AUTH\n      remoteRef:\n        key: groundstation/uplink",
                          "    accounts: process.env.DEPLOYER_PK ? [process.env.DEPLOYER_PK] : [],  // 0xYOUR_PRIVATE_KEY",
                          "2026-05-01T06:00:00Z INFO auth::jwks: rotated signing key active_kid=k-2026-05 alg=ES256 thumbprint=Rt8Tq3Zs6Jm0Ua2Ke9Hj5GfWd4Hq9Lm2Xr5Kp7",))
        self.assert_redacted({"untrusted comment: minisign encrypted secret key\nRWRTY0Iy7Xk29mPq7zLw4Rt8VbN3cXk29mPq7zLw4Rt8VbN3cXk29mPq7zLw4Rt8VbN3c": [
            "RWRTY0Iy7Xk29mPq7zLw4Rt8VbN3cXk29mPq7zLw4Rt8VbN3cXk29mPq7zLw4Rt8VbN3c"]})

    def test_defaults_wrapped_parameters_chpasswd_input_and_raw_strings_joined_over_lines(self):
        """A secret given as an environment lookup's default in Rust (`env::var(…).unwrap_or_else(|_|
        String::from(…))`) or after `||` on the next line; a URL's password parameter whose value a wrap put
        on the next line; `printf '%s:%s\\n' user 'pass' | chpasswd` over continued lines; a raw string over
        lines that code joins (Go's `strings.ReplaceAll(`…`, "\\n", "")`, Rust's `r#"…"#.lines()`). Kept: a
        default that is no secret's, a raw string of words."""
        self.assert_redacted({
            'let pass = std::env::var("BROKER_PASS").unwrap_or_else(|_| String::from("Rift-Valley2031%"));': ["Rift-Valley2031%"],
            "    password: process.env.DB_PASSWORD ||\n      'Cascais@7781',": ["Cascais@7781"],
            "Caused by: jdbc:postgresql://tiles-db:5432/tiles?user=tiles_rw&password=\nVz1%Yb6Nc3Gf&sslmode=require": ["Vz1%Yb6Nc3Gf"],
            "printf '%s:%s\\n' opsadmin \\\n  'Karoo-Dune58' | sudo chpasswd": ["Karoo-Dune58"],
            'var hmacKey = strings.ReplaceAll(`Hq9Lm2Xr5Kp7Rt8Tq3Zs6Jm0Ua2Ke9\nHj5GfWd4Vz1Yb6Nc3`, "\\n", "")': ["Hq9Lm2Xr5Kp7Rt8Tq3Zs6Jm0Ua2Ke9", "Hj5GfWd4Vz1Yb6Nc3"],
            'let secret: String = r#"\nRt8Tq3Zs6Jm0Ua2Ke9Hj5G/fWd4Vz1\nYb6Nc3Hq9Lm2Xr5K\n"#.lines().map(str::trim).collect();': ["Rt8Tq3Zs6Jm0Ua2Ke9Hj5G/fWd4Vz1", "Yb6Nc3Hq9Lm2Xr5K"]})
        self.assert_kept(('let level = std::env::var("LOG_LEVEL").unwrap_or_else(|_| String::from("info-verbose"));',
                          'msg := strings.ReplaceAll(`scene ingest\nfinished`, "\\n", " ")'))

    def test_session_cookies_named_without_a_separator_and_tokens_in_a_services_path(self):
        """A session's cookie whose name runs its words together (`DISPSESSION=`, `sentrysid=`) or parts them by a dot
        (`shop.sid=`); a download link of Box's (`dl.boxcloud.com/d/1/b1!…`), a bank API's token in its path, an
        alerting integration's URL, a Cloudbeds key. Kept: values after names that merely end in `sid`
        (`inside=`, `aside=`), a public folder's link."""
        self.assert_redacted({
            "cookie ze sessionu v dispečinku: DISPSESSION=Rt8Tq3Zs6Jm0Ua2Ke9Hj5GfWd4Hq9L": ["Rt8Tq3Zs6Jm0Ua2Ke9Hj5GfWd4Hq9L"],
            "쿠키예요: sentrysid=kp7rt8tq3zs6jm0ua2ke9hj5gfwd4hq9": ["kp7rt8tq3zs6jm0ua2ke9hj5gfwd4hq9"],
            "https://dl.boxcloud.com/d/1/b1!Vz1Yb6Nc3GfWd4Hq9Lm2Xr5Kp7Rt8Tq3Zs6Jm0Ua2Ke9Hj5Gf-Wd4Hq9Lm2Xr5Kp7../download": [
                "b1!Vz1Yb6Nc3GfWd4Hq9Lm2Xr5Kp7Rt8Tq3Zs6Jm0Ua2Ke9Hj5Gf-Wd4Hq9Lm2Xr5Kp7.."],
            "    url: https://oncall-prod-eu-west-0.grafana.net/oncall/integrations/v1/grafana_alerting/Jm0Ua2Ke9Hj5GfWd4Hq9Lm2X/": [
                "Jm0Ua2Ke9Hj5GfWd4Hq9Lm2X"],
            "use this one for the Andorra property, the sandbox one expired cbat_Hq9Lm2Xr5Kp7Rt8Tq3Zs6Jm0Ua2Ke9Hj": ["cbat_Hq9Lm2Xr5Kp7Rt8Tq3Zs6Jm0Ua2Ke9Hj"]})
        self.assert_kept(("layout: inside=Xk29mPq7zLw4Rt8VbN3c aside=Xk29mPq7zLw4Rt8VbN3c", "https://app.box.com/s/quarterly-reports-public"))

    def test_a_key_read_out_in_hex_groups_and_literals_continued_with_a_backslash(self):
        """A key read out in groups of hex digits under the line that names it, or on it (`Key component: A3F1 9C2E …`),
        and a secret's literals side by side continued with `\\` (`KEY = "key-…" \\⏎ "…"`). Kept: a key's
        fingerprint and id in groups, a router's public key data, groups of digits alone, a message built the same way."""
        self.assert_redacted({
            "Backup vault AES key (read it out in groups):\n3e9b0c7a 1f5d8e2b 4a6c9d0e 1f7a3b5c": ["3e9b0c7a 1f5d8e2b 4a6c9d0e 1f7a3b5c"],
            "Key component 2/3: 7D4E 91A0 C3B8 2F65 E0D7 4C19 A8B2 6F03": ["7D4E 91A0 C3B8 2F65 E0D7 4C19 A8B2 6F03"],
            'MAILGUN_KEY = "key-3e9b0c7a1f5d8e" \\\n              "2b4a6c9d0e1f7a3b5c"': ["key-3e9b0c7a1f5d8e", "2b4a6c9d0e1f7a3b5c"]})
        self.assert_kept(("Primary key fingerprint: 5F2D 8A4B 91C3 7E06 D2F8  4A1B 9E3C 7D20 C5B1 8F46", "Key ID: 4A1B 9E3C 7D20 C5B1",
                          "R1# show crypto key mypubkey rsa\n Key Data:\n  30820122 300D0609 2A864886 F70D0101 01050003 82010F00 3082010A",
                          "License key: 1234 5678 9012 3456", 'MSG = "Upload " \\\n      "finished"'))

    def test_labels_masks_prefixes_and_plural_names_that_hold_no_secret_are_kept(self):
        """Kept: a password's label in Irish (`password: 'Pasfhocal'`, "Pasfhocal dearmadta?"), a key masked with an
        ellipsis and bullets (`sk_live_…••••Q2xd`), a plural name given a sheet's name (`Const SHEET_SECRETS As String =
        "Setari"`), Laravel's `APP_KEY=base64:` prefix alone, a value that says it is hidden (`Password: PROTECTED`).
        Redacted: a password after the Irish or Welsh word for one."""
        self.assert_kept(("  ga: { password: 'Pasfhocal', forgot: 'Pasfhocal dearmadta?' },", "| Stripe (live) | sk_live_…••••Q2xd | 2024-10-03 | active |",
                          'Const SHEET_SECRETS As String = "Setari"', "$ grep -c '^APP_KEY=base64:' .env", "Password: PROTECTED"))
        self.assert_redacted({"An pasfhocal nua don ríomhaire: Cnoc-Mor2026!": ["Cnoc-Mor2026!"], "Y cyfrinair newydd yw Draig-Goch77": ["Draig-Goch77"]})

    def test_a_tables_row_that_mentions_a_password_heads_no_column(self):
        """A markdown table's row whose note says where a password is ("password in the safe", Irish's "pasfhocal sa
        chófra") is a row, not a header: the cell under it in the next row stays. A header that names the password
        still makes its column's cells secrets, and a box's header under its top border still heads its columns."""
        self.assert_kept(("| System | Username | Note |\n|---|---|---|\n| Reception PC | welcome | password in the safe |\n| Cliniko | e.nighriain | SSO le Google |",
                          "| Córas | Ainm úsáideora | Nóta |\n|---|---|---|\n| Ríomhaire fáiltithe | failte | pasfhocal sa chófra |\n| Cliniko | e.nighriain | SSO le Google |"))
        self.assert_redacted({"| Host | User | Password |\n|---|---|---|\n| db1 | admin | Winter2025!x |": ["Winter2025!x"],
                              "sqlite> .mode box\n┌────┬─────────┬─────────────┐\n│ id │ user    │ pass        │\n├────┼─────────┼─────────────┤\n"
                              "│ 1  │ ROMEXIS │ Orla_00.x   │\n└────┴─────────┴─────────────┘": ["Orla_00.x"]})

    def test_a_table_rich_draws_with_a_heavy_header(self):
        """A table Python's rich prints (a heavy header, `┏━┳━┓` ⏎ `┃ … ┃` ⏎ `┡━╇━┩`, then light rows): read as a table
        drawn with pipes, its password column's cells are secrets. Kept: such a table of names."""
        self.assert_redacted({"┏━━━━━━━━━━┳━━━━━━━━━━━━━━━━━┓\n┃ tenant   ┃ temp_password   ┃\n┡━━━━━━━━━━╇━━━━━━━━━━━━━━━━━┩\n"
                              "│ clinic-1 │ Liffey.Quay1996 │\n│ clinic-2 │ Rabat-Medina77+ │\n└──────────┴─────────────────┘": ["Liffey.Quay1996", "Rabat-Medina77+"]})
        self.assert_kept(("┏━━━━━━━━━━┳━━━━━━━━━━━━━━━━━┓\n┃ tenant   ┃ region          ┃\n┡━━━━━━━━━━╇━━━━━━━━━━━━━━━━━┩\n"
                          "│ clinic-1 │ eu-west-1       │\n│ clinic-2 │ eu-central-1    │\n└──────────┴─────────────────┘",))

    def test_a_secrets_rest_after_an_arrow_an_ellipsis_or_that_plus(self):
        """The rest of a secret a chat gives after its first part: labelled with an arrow (`Teil 2 -> …`), in
        Swahili (`na ya pili: …`, the second one), a message that goes on with `...` or `…`, "it's now that
        + …" (a suffix added to a password given above). Kept: a message that goes on in words."""
        self.assert_redacted({
            "Marta: Grafana service token, Teil 1 -> glsa_Qm7vX2kLp9Zr\nMarta: Teil 2 -> T4wN8bYcF3dXy_41\nMarta: danach bitte löschen":
                ["glsa_Qm7vX2kLp9Zr", "T4wN8bYcF3dXy_41"],
            "Juma: nenosiri la router — sehemu ya kwanza: Xk29mPq7\nJuma: na ya pili: Lw4Rt8Vb!\nJuma: unganisha bila nafasi":
                ["Xk29mPq7", "Lw4Rt8Vb!"],
            "Tom: the vpn pw is Corsica!8812\nTom: wait, they added a suffix last week, it's now that + _Rhone2291": ["Corsica!8812", "_Rhone2291"],
            "Ana [10:02]: Mailjet secret key (prod): Zq4mVx9LtR2wN7bYcF3d\nAna [10:02]: ... 8fe21c77a04\nAna [10:03]: sorry, it got cut":
                ["Zq4mVx9LtR2wN7bYcF3d", "8fe21c77a04"]})
        self.assert_kept(("Ana [10:02]: the deploy token expired again\nAna [10:02]: ... anyway, lunch?",))

    def test_a_secrets_pieces_under_headers_labels_and_an_answer(self):
        """The pieces of a secret a chat sends in messages of one token: the third under a header of its own
        (each piece moves the reach on), the last ending in base64's `==`, the next one labelled ("e poi …",
        "phần 2: …", or "ikinci yarı" on a line of its own), a question for a PIN answered by another
        speaker's messages, and a machine's token given in two labelled halves with no word for it.
        Kept: a compose file's `${X:?…}` (no question) and the setting after it."""
        self.assert_redacted({
            "Ivo Horvat, [03.07.2024 22:45]\nlozinka za NAS ide u 3 poruke\n\nIvo Horvat, [03.07.2024 22:45]\nq7Lm-2xR\n\nIvo Horvat, [03.07.2024 22:45]\n"
            "Vb9@kT4\n\nIvo Horvat, [03.07.2024 22:46]\nZr8?wN3p": ["q7Lm-2xR", "Vb9@kT4", "Zr8?wN3p"],
            "[15:31] Ana Lima\nthe storage key, in three because Teams breaks it:\n[15:31] Ana Lima\nQm7vX2kLp9Zr4wN8bYcF3d\n[15:31] Ana Lima\n"
            "T4wN8bYcF3dXy41Lm2Kp\n[15:32] Ana Lima\nJlxq2ozto/RyuEHD/UQ==": ["Qm7vX2kLp9Zr4wN8bYcF3d", "T4wN8bYcF3dXy41Lm2Kp", "Jlxq2ozto/RyuEHD/UQ=="],
            "Leyla, [18.03.2025 16:44]\nthe shop's secret key (ilk yarı)\nFPh8kdT0A4UFthOsWb\n\nLeyla, [18.03.2025 16:45]\nikinci yarı\nWKnT1ZLuDjQB":
                ["FPh8kdT0A4UFthOsWb", "WKnT1ZLuDjQB"],
            "Gianni: la password del router, due pezzi\nGianni: Xq7@Lm2z\nGianni: e poi Vb9kT4wN": ["Xq7@Lm2z", "Vb9kT4wN"],
            "[2025-03-17 09:03] Tomek: Kasia, jaki jest pin do terminala?? klient czeka\n[2025-03-17 09:03] Kasia Nowak: 730514\n"
            "[2025-03-17 09:04] Tomek: dzięki": ["730514"],
            "Jo  9:14 PM\nfirst half: SG.aR8zG7HHZD9mxEXSYRhW.k5aD2XAz\nJo  9:14 PM\nsecond half: ASwX3LruNWtq1L5ua": ["SG.aR8zG7HHZD9mxEXSYRhW.k5aD2XAz", "ASwX3LruNWtq1L5ua"]})
        self.assert_kept(("services:\n  app:\n    environment:\n      DB_PASSWORD: ${APP_DB_PASSWORD:?set in .env}\n      TZ: Europe/Istanbul",
                          "[09:00] Ana: which pin is the status LED on?\n[09:01] Ivo: GPIO17 i think"))

    def test_a_link_that_lets_its_holder_in_loses_its_token(self):
        """A link a message says lets in whoever holds it ("don't share it", "No lo reenvíe", "your login link"),
        however short its path; an invitation's `/join/t/…`, a login's `?t=…`, an alerting integration's key in
        its path. Kept: a video's id beside the same words, a public dashboard's link that may be shared."""
        self.assert_redacted({
            "Your login link: https://app.example.org/l/Tq9Lm2Xr5Kp7Wd4Rt8Vz (valid 10 min). Don't share it.": ["Tq9Lm2Xr5Kp7Wd4Rt8Vz"],
            "Siga su envío aquí:\nhttps://trk.example.mx/s/Zx7Qm2Lp9Rt4Wv8Nb3Kc6Hd?lang=es\nNo lo reenvíe, da acceso a la ubicación.": ["Zx7Qm2Lp9Rt4Wv8Nb3Kc6Hd"],
            '{"event":"invite.created","invite_url":"https://app.example.org/join/t/Rk82LmQx7Zp3Wv9Tn4Yb6Hc1"}': ["Rk82LmQx7Zp3Wv9Tn4Yb6Hc1"],
            "sign in with https://staging.example.org/u/login?t=Wq4Lz8Tr2Xk6Pm9Vb3Nc": ["Wq4Lz8Tr2Xk6Pm9Vb3Nc"],
            "- url: https://events.example-pager.com/integration/q4k8z2m6x1v9c3b7n5w0r8t2y6u4i1o3/enqueue": ["q4k8z2m6x1v9c3b7n5w0r8t2y6u4i1o3"]})
        self.assert_kept(("the demo: https://www.youtube.com/watch?v=dQw4w9WgXcQ (don't share it outside the team)",
                          "Public dashboard, feel free to share: https://grafana.example.org/d/Ab3dEf6hIj9kLm2nOp5q/overview"))

    def test_listings_and_settings_that_hold_no_secret_are_kept(self):
        """What tools print beside secrets without holding one: go test's `--- PASS: Test…`, an annotation's
        data hash, a listing of API keys by their ids made of zeros, an S3 alias's access key that is a name,
        git's credential helper, a keychain item's date in hex, a cookie of settings in base64 and its
        Max-Age, a log of a failed login for an id, a token's prefix a sentence describes, a sandbox's
        token of zeros. Still caught: a secret access key made of words."""
        self.assert_kept((
            "=== RUN   TestSignUploadURL/expires_in_15m\n    --- PASS: TestSignUploadURL/expires_in_15m (0.00s)\nPASS",
            "$ kubectl describe secret app-env\nName:         app-env\nAnnotations:  reconcile.example.io/data-hash: 9a1f3c5e7b2d4f6a8c0e1b3d5f7a9c2e\n\nType:  Opaque",
            "$ twilio api:core:keys:list\nSID                                 Friendly Name\nSK0000000000000000000000000000000c  sms-prod-2025",
            "$ mc alias list yard\nyard\n  URL       : https://s3.yard.example.internal:9000\n  AccessKey : yard-photo-sync\n  SecretKey : ******************",
            "$ git config --get credential.helper\nosxkeychain",
            '$ security find-generic-password -s "vpn-yard"\nattributes:\n    "mdat"<timedate>=0x32303234313130333038333031355A00  "20241103083015Z\\000"',
            "Set-Cookie: site_prefs=ZnItQ0F8QW1lcmljYS9Ub3JvbnRvfGxpZ2h0; Path=/; Max-Age=31536000; SameSite=Lax",
            "2025-03-14T10:11:02Z WARN auth: login failed for driver drv_4k8m2x9q7z (reason=invalid_password, attempts=3/5)",
            "Checked: `ACME_TOKEN` is set in .env and starts with `acme_api_`, 40 characters total. I did not print it.",
            "PAYMENTS_TOKEN=TEST-0000000000000000-000000-00000000000000000000000000000000-000000000"))
        self.assert_redacted({"aws_secret_access_key = tiger-lily-moon": ["tiger-lily-moon"]})

    def test_printed_keys_codes_and_phrases_in_new_layouts(self):
        """What a session prints or pastes in layouts the readings missed: Django's generated key that starts
        with `#` (no comment), recovery codes two to a line, a mnemonic whose lines start with their words'
        range (`7-12  …`), a password file `pw.txt` read with cat."""
        self.assert_redacted({
            "$ python -c 'from django.core.management.utils import get_random_secret_key; print(get_random_secret_key())'\n#k2@m9vx!q7t^l4w=p8z)r3c+b6n&h1d_j5f0s-y2u":
                ["#k2@m9vx!q7t^l4w=p8z)r3c+b6n&h1d_j5f0s-y2u"],
            "Forgejo recovery codes (ops) — keep offline\n3fa9c1d07be24e58  9d2e7a41c06b35f8\nb41e6c9d28a7f053  07c3d9e1a5b2f864":
                ["3fa9c1d07be24e58", "9d2e7a41c06b35f8", "b41e6c9d28a7f053", "07c3d9e1a5b2f864"],
            'Notiz "Ledger Büro":\n1-6   ripple orange civil fossil kitten absorb\n7-12  hazard tunnel mercy oxygen wagon lizard':
                ["ripple orange civil fossil kitten absorb", "hazard tunnel mercy oxygen wagon lizard"],
            "$ cat ~/pw.txt\nKx7!mQ2zLw9Rt": ["Kx7!mQ2zLw9Rt"]})

    def test_a_constant_given_by_name_to_a_call_that_signs_is_a_key(self):
        """A literal a machine made, defined under a name that the code then gives to a call that signs,
        encrypts or authenticates (Lua's `hmac:new(SHARED, …)`, Rust's `authenticate(PIN, SITE_KEY)`, Python's
        `hmac.new(KEY, …)`), whatever the name. Kept: what such calls also take by name (an IV, a host, a
        user), and a constant no such call takes."""
        self.assert_redacted({
            'local SHARED = "q7Lm2xRt9Vb4Wn8Kp3Zc6Hd1"\nlocal h = hmac:new(SHARED, hmac.ALGOS.SHA256)': ["q7Lm2xRt9Vb4Wn8Kp3Zc6Hd1"],
            'const SITE_CODE: &str = "5A0F3C9E7B2D4A6C8E1F0B3D5C7A9E2F";\nenc.authenticate(OPERATOR, SITE_CODE)?;': ["5A0F3C9E7B2D4A6C8E1F0B3D5C7A9E2F"],
            'SIGNING = "Zr8wN3pQx7Lm2Kt9Vb4Y"\ndigest = hmac.new(SIGNING.encode(), body, "sha256").hexdigest()': ["Zr8wN3pQx7Lm2Kt9Vb4Y"]})
        self.assert_kept(('AES_IV = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"\ncipher = AES.new(key, AES.MODE_CBC, AES_IV)',
                          'BUILD_TAG = "Zr8wN3pQx7Lm2Kt9Vb4Y"\nprint(BUILD_TAG)'))

    def test_values_that_say_any_will_do_and_a_password_managers_name_are_kept(self):
        """Kept: a value whose words say any value goes there (`pick-any-random-string`), one that says it is
        for tests only, a password manager's name before the database it names. Still caught: a passphrase
        of ordinary words under the same name."""
        self.assert_kept(("WA_VERIFY_TOKEN=choose-any-random-string", '    monkeypatch.setenv("APP_SECRET_KEY", "unit-tests-only")',
                          'KeePass: Datenbank "IT-Team.kdbx" → Gruppe "Server" → Einträge: NAS, Router'))
        self.assert_redacted({"WA_VERIFY_TOKEN=harbor-violet-engine-47": ["harbor-violet-engine-47"]})

    def test_a_columns_word_and_year_or_joined_words_beside_redacted_passwords(self):
        """In a column whose other cells hold passwords the rules took, a cell of a word and a year
        (`tulip1986`) or of words joined by `_` or `.` is a password too; a mnemonic in kana under a Japanese
        word for a backup (not in the order of a word list). Kept: a name in small letters in such a column (`read-only`)."""
        text = ("host1;user1;pass1\nimap.example.de;anna@example.de;Xk29!mPq7zLw\nimap.example.de;jan@example.de;tulip1986\n"
                "imap.example.de;ola@example.de;Rt8#VbN3cQa2")
        self.assert_redacted({text: ["Xk29!mPq7zLw", "tulip1986", "Rt8#VbN3cQa2"],
                              "ws16   10.28.1.96   admin   Qm7@vX2kLp9Z\ngpu03  10.19.1.239  admin   walnut_harbor_pickle\nws22   10.4.2.204   admin   Lw4!Rt8Vb2Nc":
                                  ["Qm7@vX2kLp9Z", "walnut_harbor_pickle", "Lw4!Rt8Vb2Nc"],
                              "佐藤さん、バックアップの単語です：けいかく　あおぞら　さくら　うらない　えほん　いきおい　かいだん　きぼう　あいこくしん　くしゃみ　こうえん　おうえん":
                                  ["けいかく　あおぞら　さくら"]})
        self.assert_kept(("| key | scope |\n|---|---|\n| «redacted» | read-only |",))

    def test_coloured_output_a_query_password_a_tunnel_token_and_an_auth_string(self):
        """A terminal's colour codes around a printed name and value (`\\x1b[36mPGPASSWORD\\x1b[0m=…`), a password
        in a query after its user (`?u=grafana&p=…`), what `cloudflared tunnel token` and `gcloud redis
        instances get-auth-string` print. Kept: a query's `p` that is a page number."""
        self.assert_redacted({
            "$ mise env -s bash | grep -i pass\n\x1b[2mexport\x1b[0m \x1b[36mPGPASSWORD\x1b[0m=\x1b[32m'!7vKq2LmX9pRt4WzN_8b'\x1b[0m": ["!7vKq2LmX9pRt4WzN_8b"],
            "curl -G 'http://influx.example.internal:8086/query?u=grafana&p=harbor_4417' --data-urlencode 'q=SHOW DATABASES'": ["harbor_4417"],
            "$ cloudflared tunnel token yard-cams\neyJhIjoiNGY2ZTFjMmIiLCJ0IjoiOWQzYSIsInMiOiJRbTd2WDJrTHA5WnI0d044YlljRjNkIn0=":
                ["eyJhIjoiNGY2ZTFjMmIiLCJ0IjoiOWQzYSIsInMiOiJRbTd2WDJrTHA5WnI0d044YlljRjNkIn0="],
            "$ gcloud redis instances get-auth-string cache-eu --region=europe-west1\nauthString: 5e0c1d2a-7b3f-4c9e-8a1d-2f6b0e9c4d71": ["5e0c1d2a-7b3f-4c9e-8a1d-2f6b0e9c4d71"]})
        self.assert_kept(("GET https://shop.example.com/search?u=anna&p=2&sort=price_asc",))

    def test_a_password_given_from_a_day_on_and_a_passphrase_in_low_quotes(self):
        """A password a sentence gives "from today" (`lautet ab heute X`, `es desde hoy X`), a passphrase of words
        in the low quotes Polish and German open with (`to „… … … …”`). Kept: a sentence that says when a
        password changes without giving it."""
        self.assert_redacted({"Das Passwort für den Kassen-PC lautet ab heute Tannenzapfen4471. Bitte nicht aufschreiben.": ["Tannenzapfen4471"],
                              "la contraseña del router es desde hoy Girasol_2024 y la otra no cambia": ["Girasol_2024"],
                              "Hasło do panelu NAS to „lipa kominek szafa rower” (ze spacjami), login admin.": ["lipa kominek szafa rower"]})
        self.assert_kept(("Das Passwort für den Kassen-PC ändert sich ab heute jeden Monat.",))

    def test_a_bot_tokens_halves_and_a_door_code_after_a_star(self):
        """A bot's token given in two labelled halves, the first its id and a colon (`első fele: 5901…:AAtV…`),
        which is no phone number; a door's code a keypad's `*` starts ("kapısının yeni kodu *336968").
        Kept: a phone number given as a contact's."""
        self.assert_redacted({"Bence: a riasztó bot tokenjének első fele: 6102837465:AAq7Lm2xRt9V\nBence: második fele: b4Wn8Kp3Zc6Hd1Jf5Sg0 (egybeírva!)":
                                  ["6102837465:AAq7Lm2xRt9V", "b4Wn8Kp3Zc6Hd1Jf5Sg0"],
                              "Arkadaşlar garaj yan kapısının yeni kodu *336968, eski kod artık çalışmıyor.": ["336968"]})
        self.assert_kept(("Bence: a riasztó bot gazdájának első fele: +36 30 555 0142\nBence: második fele: hívd reggel",))

    def test_a_bluetooth_passkey_and_a_value_terraform_gives_apart_from_its_name(self):
        """A Bluetooth pairing's passkey of six digits under a name that says so, and a Helm value Terraform
        sets in a block, its name on one line and its value on the next (`set_sensitive { name = "…" ⏎
        value = "…" }`). Kept: another setting given the same way, a passkey's length."""
        self.assert_redacted({"#define PAIRING_STATIC_PASSKEY   482913   /* printed on the box */": ["482913"],
                              '  set_sensitive {\n    name  = "auth.adminPassword"\n    value = "7745120"\n  }': ["7745120"]})
        self.assert_kept(('  set {\n    name  = "service.type"\n    value = "LoadBalancer"\n  }', "#define PASSKEY_DIGITS 6"))

    def test_literals_apart_by_a_long_run_of_blanks_end(self):
        """A named string, 100,000 blanks, another string: the definitions of strings that code joins read
        the blanks after a value two ways, the siblings' reading three ways (`[ \\t]*;?[ \\t]*`), and took 77 s.
        Each reads them one way now. Run in a process of its own, with a timeout."""
        text = 'k = "Xk29mPq7zLw4Rt8VbN3cQ"' + " " * 100000 + '"Ab1_x9" x'
        redacted = output_in_a_process(self, REDACT_STDIN, 60, "redaction of two strings apart by 100,000 blanks", text)
        self.assertTrue(redacted.startswith('k = "«redacted»"'), redacted[:60])

    def test_a_links_verify_token_is_a_secret(self):
        """An invitation's or a sign-up's link carries its token in `verify=` or `confirm=`: whoever holds the
        link is let in. Kept: such a parameter that is a flag."""
        self.assert_redacted({"Accept: https://portal.example.net/invite/accept?inviteId=5521&verify=Tq9Lm2Xr5Kp7Wd4Rt8Vz1Yb6Nc3Gf5Hj0Ke9Ua2":
                              ["Tq9Lm2Xr5Kp7Wd4Rt8Vz1Yb6Nc3Gf5Hj0Ke9Ua2"]})
        self.assert_kept(('curl "https://api.example.com/v1/check?verify=true&confirm=false"',))

    def test_a_functions_parameters_a_scope_and_a_failed_logins_user_are_kept(self):
        """Kept: the parameters of a function whose name holds a credential word (`fn load_api_password(store:
        &SecretStore)`), a permission scope that names one (`"admin:purge_api_key"`), the user a log says
        an authentication failed for. Still caught: a password passed to such a function as a literal."""
        self.assert_kept((
            "async fn load_api_password(store: &SecretStore) -> anyhow::Result<String> {",
            '  PURGE_API_KEY: "admin:purge_api_key",',
            "2025-03-02 11:20:01 WARN  relay: MQTT auth failed for user 'sensor-hub-07' (rc=5, not authorized)"))
        self.assert_redacted({'user.set_password("Lantern-Fig-77")': ["Lantern-Fig-77"]})

    def test_a_pictures_or_a_fonts_bytes_and_a_teamcity_reference_are_kept(self):
        """Base64 that begins with a file format's first bytes is that file (PNG's `iVBORw0KGgo`, WOFF2's
        `d09GMg`, a PDF's `JVBERi0`), over lines or joined, never a key; TeamCity's `credentialsJSON:<id>`
        names a token TeamCity keeps. Still caught: a random literal joined the same way."""
        self.assert_kept((
            'ICON = (\n    "iVBORw0KGgoAAAANSUhEUgAAABAAAAAQCAYAAAAf8/9hAAAA"\n    "Sk9xPq2Lm7Vd4Rt8Wz1Yb6Nc3Gf5Hj0Ke9Ua2Ix7Oy4Ep1Qw"\n)',
            'const FONT = "d09GMgABAAAAA" + "Hb3Zq9Lm2Xr5Kp7Wd4Rt8Vz1Yb6Nc3Gf5Hj0Ke9Ua2Ix7Oy4Ep1Qw+Tr";',
            'const REPORT_PDF = "JVBERi0xLjcKJcfsj6IKNSAwIG9iago8PC9MZW5ndGggNiAwIFI+PgpzdHJlYW0K";',
            '<param name="env.REGISTRY_PASSWORD" value="credentialsJSON:5f0c2a9d-8e7b-4c6a-9f1e-0d9c8b7a6f5e" />'))
        self.assert_redacted({'const API_KEY = "Hb3Zq9Lm2Xr5K" + "p7Wd4Rt8Vz1Yb6Nc3Gf5Hj0Ke9Ua2Ix7Oy4Ep1Qw";':
                              ["Hb3Zq9Lm2Xr5K", "p7Wd4Rt8Vz1Yb6Nc3Gf5Hj0Ke9Ua2Ix7Oy4Ep1Qw"]})

    def test_a_message_whose_first_word_reads_as_a_piece_ends(self):
        """A text of SMS headers (`Nachricht (1/2) von: …` ⏎ … ⏎ `Nachricht (2/2) von: …`): the note that
        pieces go together, `(2/2)`, sends the pieces' search to lines whose first word, before a word in
        brackets, reads as a piece where the search starts; it once searched there forever (a save hung
        on 160 characters). Run in a process of its own, so a hang fails here and does not stall the suite."""
        text = ("Nachricht (1/2) von: Kundenservice\nIhr vorläufiges Passwort lautet Kp4mVx9QzRt\n"
                "Nachricht (2/2) von: Kundenservice\nWb7NcY2sLe . Gültig 24 Stunden.")
        redacted = output_in_a_process(self, REDACT_STDIN, 60, "redaction of a 160-character text", text)
        self.assertIn("Passwort lautet «redacted»", redacted)
        self.assertNotIn("Kp4mVx9QzRt", redacted)

    def test_short_chat_shapes_of_pieces_all_end(self):
        """Six hundred short texts made at random (a fixed seed) of what chats that send a secret in pieces
        hold: SMS headers with `(1/2)` and `(2/2)`, labels of parts, notes that pieces go together, times and
        speakers, values, brackets. Each must end: a loop that searches again where it searched makes no
        progress (3acd2df hung on 44 texts of 3,000 such). Run in a process of its own with a timeout."""
        code = textwrap.dedent("""
            import random, sys
            sys.path.insert(0, sys.argv[1])
            import claude_checkpoint as cc
            words = ("Poruka (1/2) (2/2) od: HT-Servis lozinka je password is token first half: rest: no spaces [10:02] Ana: <nick> "
                     "code door 1234-5678 Kp4mVx9QzRt Wb7NcY2sLe . (2/2): sms msg 2/2 tout collé zusammen ohne Leerzeichen part A: B: "
                     "pezzo 1 → «redacted» `x7Yq9Lm2Pz` u dva dijela ends with Ab3$xy ist c'est suite then ( ) : … ... Nachricht von: "
                     "jonas in two bits").split() + ["\\t"]
            generator = random.Random(46)
            for _ in range(600):
                cc.redact("\\n".join(" ".join(generator.choice(words) for _ in range(generator.randint(1, 8))) for _ in range(generator.randint(1, 6))))
            print("ended")
            """)
        self.assertEqual("ended", output_in_a_process(self, code, 300, "redaction of 600 short chat texts (a loop that makes no progress?)").strip())

    def test_a_secret_announced_in_parts_in_a_chat(self):
        """A chat message that names a secret and says it comes in parts ("in two bits", "iki parça", "na
        dvakrát"): the one-token messages after it are its pieces, words too (`lanterna-fico`); in a log
        WeeChat writes (a time, a tab, the nick, a tab), under headers that name a team's guest
        (`Acme Support (external)`), after "is (pasted from …)"; pieces labelled `part A` and `part B`, a
        Dutch one that `begint met` and `eindigt met`; an answer to a message that asked for a password
        (`lozinku`) saying it comes "u dva dijela"; a key "broken over two lines" a line after the one
        that names it; pieces in a chat's code spans. Kept: words after a message that says a
        job runs in parts, a list of names after a password's word with no value."""
        self.assert_redacted_as((
            ("2026-01-14 21:40:02\tmarek\tola: the nas admin pw, typing it in two bits\n2026-01-14 21:40:09\tmarek\tQx7*pLm2\n"
             "2026-01-14 21:40:15\tmarek\tvR9tEw\n2026-01-14 21:40:31\tola\tthanks, in",
             "2026-01-14 21:40:02\tmarek\tola: the nas admin pw, typing it in two bits\n2026-01-14 21:40:09\tmarek\t«redacted»\n"
             "2026-01-14 21:40:15\tmarek\t«redacted»\n2026-01-14 21:40:31\tola\tthanks, in"),
            ("[09:03] Acme Support (external)\nWe rotated the client; the secret comes in two messages:\n[09:03] Acme Support (external)\n"
             "acm_T4kQ9wZrLx\n[09:04] Acme Support (external)\nh7GfPq2VbN8sYc3dWm\n[09:05] Acme Support (external)\nPlease confirm.",
             "[09:03] Acme Support (external)\nWe rotated the client; the secret comes in two messages:\n[09:03] Acme Support (external)\n"
             "«redacted»\n[09:04] Acme Support (external)\n«redacted»\n[09:05] Acme Support (external)\nPlease confirm."),
            ("[2026-02-03 18:12] Selin Kaya: ofis wifi şifresini iki parça atıyorum\n[2026-02-03 18:12] Selin Kaya: lanterna-fico\n"
             "[2026-02-03 18:13] Selin Kaya: duvar-kedi\n[2026-02-03 18:13] Selin Kaya: arada boşluk yok",
             "[2026-02-03 18:12] Selin Kaya: ofis wifi şifresini iki parça atıyorum\n[2026-02-03 18:12] Selin Kaya: «redacted»\n"
             "[2026-02-03 18:13] Selin Kaya: «redacted»\n[2026-02-03 18:13] Selin Kaya: arada boşluk yok"),
            ("aider> the token for the build bot is (copied from 1password, it wrapped)\nW8mZq3RtLp0VxK2nB7c\nJd5Hs9FgT1aYe4Uo6\naider> put it in .env",
             "aider> the token for the build bot is (copied from 1password, it wrapped)\n«redacted»\n«redacted»\naider> put it in .env"),
            ("Pieter Smit  10:14\nhet wachtwoord van de router begint met Tulp!88\nPieter Smit  10:15\nen eindigt met Zwaan#41",
             "Pieter Smit  10:14\nhet wachtwoord van de router begint met «redacted»\nPieter Smit  10:15\nen eindigt met «redacted»"),
            ("hetzner token for the backups, part A: Hz7qLmR2vT9k\npart B: Wd4nYc8pXs1e", "hetzner token for the backups, part A: «redacted»\npart B: «redacted»"),
            ("[03.05.26, 08:10:02] Ana Recepcija: trebam novu lozinku za channel manager\n[03.05.26, 08:12:40] Ivo Marić: šaljem u dva dijela\n"
             "[03.05.26, 08:12:51] Ivo Marić: galeb_77\n[03.05.26, 08:13:05] Ivo Marić: Maestral!4",
             "[03.05.26, 08:10:02] Ana Recepcija: trebam novu lozinku za channel manager\n[03.05.26, 08:12:40] Ivo Marić: šaljem u dva dijela\n"
             "[03.05.26, 08:12:51] Ivo Marić: «redacted»\n[03.05.26, 08:13:05] Ivo Marić: «redacted»"),
            ("Sam Okafor  4:55 PM\nthe vendor finally sent the API key for the export\nit came broken over two lines in their PDF, so:\n"
             "9f1c2e7a5b3d8046e1f2a9c7d5b3e8f0\n4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b",
             "Sam Okafor  4:55 PM\nthe vendor finally sent the API key for the export\nit came broken over two lines in their PDF, so:\n«redacted»\n«redacted»"),
            ("Luca Bassi: la password del vpn è lunga, te la mando in due pezzi\nLuca Bassi: pezzo 1 → Tq7mRz2LxWc9\nLuca Bassi: pezzo 2 → bH4nVs8KpYe3",
             "Luca Bassi: la password del vpn è lunga, te la mando in due pezzi\nLuca Bassi: pezzo 1 → «redacted»\nLuca Bassi: pezzo 2 → «redacted»"),
            ("[민준] 결제 API 시크릿 새로 발급했어요\n[민준] Xk29fLq8RzT4mWc7NpV3bY6hDs1Ge5Ju", "[민준] 결제 API 시크릿 새로 발급했어요\n[민준] «redacted»"),
            ("Mia Novak: Netlify token za docs, u 2 dijela\nMia Novak: `nfp_Zq8LmT3xRv2KpW`\nMia Novak: `7YcN4bGs1HdQe9Uo`",
             "Mia Novak: Netlify token za docs, u 2 dijela\nMia Novak: `«redacted»`\nMia Novak: `«redacted»`"),
        ))
        self.assert_kept(("[10:02] Ana Ruiz: the password migration runs in two parts tonight\n[10:02] Ana Ruiz: staging\n[10:03] Ana Ruiz: production",
                          "2026-01-14 21:40:02\tmarek\tthe passwords are split in two parts by team:\n2026-01-14 21:40:09\tmarek\tbackend-team\n"
                          "2026-01-14 21:40:15\tmarek\tfrontend-team"))

    def test_siblings_in_records_and_short_rows_and_keys_after_truncated_ones(self):
        # A record's member named like a redacted one; a table's row whose last cell is empty; a private
        # key under a public one cut short; a PowerShell string continued by a backtick.
        cases = {
            '[\n  {"site": "Helsinki", "alarm_code": "647842", "wifi": "bhtnDS6vQRGAgEJO"},\n'
            '  {"site": "Eindhoven", "alarm_code": "121689", "wifi": "sparrow reef biscuit"}\n]': ["121689", "sparrow reef biscuit"],
            "Ruimte           | Code     | Opmerking\nVoordeur (Nuki)  | 492836   | via app\nMeterkast slot   | 373666   |\n"
            "Alarm (Ajax)     | 40982842 | 30 sec": ["492836", "373666"],
            '"PublicKey": "-----BEGIN PUBLIC KEY-----\\n...(truncated)",\n"PrivateKey": "-----BEGIN PRIVATE KEY-----\\n'
            'MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgDAHVk5qjCWa+OReW\\nxBW6091ggYPlRFDGrqDA+eoknwmhRANCAATLH8VLsH0hKZIG\\n'
            '-----END PRIVATE KEY-----\\n"': ["xBW6091ggYPlRFDGrqDA+eoknwmhRANCAATLH8VLsH0hKZIG"],
            'aws configure set aws_secret_access_key `\n  "ePrsfp/rSpXxLwp/zv2D`\nqxViuYr/HrVweAkwP1oM" --profile ot': ["ePrsfp/rSpXxLwp/zv2D", "qxViuYr/HrVweAkwP1oM"],
        }
        self.assert_redacted(cases)
        kept = ("gcloud run deploy api --set-secrets=TUYA_SECRET=tuya-secret:latest,SENDGRID_API_KEY=sendgrid-key:3",
                "TLS session resumed, session id: c01c23b6d1b5f8e54b10bdb0fa594a45fb14979d6a5345475c18e7a452be52c4, cipher TLS_AES_128_GCM_SHA256",
                '{"version":1842,"clientToken":"62fb3205-71fa-4d68-9abd-c163ba42a41d"}',
                "token=... (not included), thumbnail: data:image/jpeg;base64,/9j/4AAQSkZJRgABAQOCmF0xWgPw1FkJdj3hdoLS3lrK2W+SBcHYG7FCGqtI",
                "| `KCLOUD_TOKEN` | `kc_live_<32 hex chars>` |",
                "run `ls`\nthe password is documented in the wiki")
        for text in kept:
            with self.subTest(text=text[:30]):
                self.assertEqual(text, cc.redact(text)[0])

    def test_codes_definitions_numbered_parts_and_keys_by_their_kind_are_redacted(self):
        cases = {
            "Salut ! le mot de passe du compte bench est ginger gravel squid 96. J'ai changé le code du cadenas de l'armoire : 748781.": ["748781"],
            "Moi! Koneen salasana on nyt Kuusi#Kettu42 — Lukon koodi on edelleen sama, 809032.": ["809032"],
            '{"wifi":{"ssid":"Koti_5G","pass_0":"Saunailta95","pass_1":"11Lumi!talvi"}}': ["Saunailta95", "11Lumi!talvi"],
            "Mali: salasana alkaa näin: Kaamos#20\nMali: ja loppuu: 07!Kaamos41 (ilman välilyöntiä)": ["07!Kaamos41"],
            "Noi: รหัส hub ส่วนแรก 1DnlniSt9\nNoi: ส่วนที่สอง B1BdM4D60\nNoi: ส่วนสุดท้าย 4HXcD2eFq ค่ะ": ["1DnlniSt9", "B1BdM4D60", "4HXcD2eFq"],
            "<dl>\n  <dt>Hub local admin</dt><dd>honey-crystal-maple-prairie</dd>\n  <dt>Recovery PIN</dt><dd>41191622</dd>\n</dl>": [
                "honey-crystal-maple-prairie", "41191622"],
            "private (hex): 12a3ab4717d4da7492117b45c2133e379252e23b585b6734a93d2dbf31fb76a4": ["12a3ab4717d4da7492117b45c2133e379252e23b585b6734a93d2dbf31fb76a4"],
        }
        self.assert_redacted(cases)
        public = "private (hex): 12a3ab4717d4da7492117b45c2133e379252e23b585b6734a93d2dbf31fb76a4\npublic  (hex): 79319633ea56c473c3dc0dc9c80cebf2aec60f32e61a9250a741e2985bd98b46"
        self.assertIn("79319633ea56c473c3dc0dc9c80cebf2aec60f32e61a9250a741e2985bd98b46", cc.redact(public)[0])
        for text in ("<dl><dt>PIN policy</dt><dd>6 digits, rotated yearly</dd></dl>", "Moi! Tiketti 48213 on suljettu, lukon koodi vaihtuu huomenna."):
            with self.subTest(text=text[:30]):
                self.assertEqual(text, cc.redact(text)[0])

    def test_signed_links_tokens_in_their_parameters_and_paths_are_redacted(self):
        cases = {
            "curl https://nas:9000/scans -F x-amz-signature=a49cd7eb2d954ba394a9c0601d57bc06f5e5f43526ae65c85c8979939578e1ed -F bucket=scans":
                "a49cd7eb2d954ba394a9c0601d57bc06f5e5f43526ae65c85c8979939578e1ed",
            "https://live.example.ua:1935/live/ob1/playlist.m3u8?wowzatokenendtime=1749081600&wowzatokenhash=XmAkCK73HRWYZj8Qz6g2IXxhdyq0Sw8f1SVAd0Iw4G0=":
                "XmAkCK73HRWYZj8Qz6g2IXxhdyq0Sw8f1SVAd0Iw4G0=",
            "https://nordhav.sharepoint.com/:f:/s/Foto/EabcXyz?e=uXk7bP&tempauth=v1.xsTTHP4ws_ZVBIKpwWFd56Pka3JVRGc3fawPy1mhA7FZcDNmT":
                "v1.xsTTHP4ws_ZVBIKpwWFd56Pka3JVRGc3fawPy1mhA7FZcDNmT",
            "https://demo.docusign.net/Signing/MTRedeem/v1/ae1ce1a4?slt=VkkACRE88wkO-B3559Vy0Knq998PnCuf0LZYPEQ5Bft9": "VkkACRE88wkO-B3559Vy0Knq998PnCuf0LZYPEQ5Bft9",
            "https://akte.example.de/download/8841?access=XNS-MFV8xvukLmfFE6xo_Qm0jh0aF_tyGGmoCy0jq9lI": "XNS-MFV8xvukLmfFE6xo_Qm0jh0aF_tyGGmoCy0jq9lI",
            "https://uc44c1705d6be3ad9d.dl.dropboxusercontent.com/cd/0/get/ZP00m2YIn5hU2HVTW13_Zy0jsH9M728m4ChPEg86QSbIO_Wt/file":
                "ZP00m2YIn5hU2HVTW13_Zy0jsH9M728m4ChPEg86QSbIO_Wt",
        }
        for text, secret in cases.items():
            with self.subTest(text=text[:30]):
                self.assertNotIn(secret, cc.redact(text)[0])
        more = {
            '"queries": { "api-version": "2016-06-01", "sp": "/triggers/manual/run", "sv": "1.0", "sig": "OrMe9GaA7SzdueI9SXMvLawpcK-xMio_JrTODRFxSE5" }':
                "OrMe9GaA7SzdueI9SXMvLawpcK-xMio_JrTODRFxSE5",
            "POST /sms/inbound 403 signature mismatch x-twilio-signature=RsC4YNZjZ9LnM3nNh7jjkl2dQPg= url=https://api.example.es/sms": "RsC4YNZjZ9LnM3nNh7jjkl2dQPg=",
            '  "/IncomingWebhook/a79298766e0e4556222e1093268afc23/a6ed1e02-bc4c-4446-bfce-d1393648a259")': "a79298766e0e4556222e1093268afc23",
        }
        for text, secret in more.items():
            with self.subTest(text=text[:30]):
                self.assertNotIn(secret, cc.redact(text)[0])
        release = '"darwin-aarch64": {"signature": "dW50cnVzdGVkIGNvbW1lbnQ6IHNpZ25hdHVyZSBmcm9tIHRhdXJpIHNlY3JldCBrZXkKVk+7Da2KNuNl", "sig": "Qm8vLx2Rt7Kp4Nz9Wc3Yb6Hd1Fs5Ga0J"}'
        self.assertEqual(release, cc.redact(release)[0])
        for text in ("https://example.com/?share=true&access=public", "curl -F file=@report.pdf -F title=quarterly https://up.example.com"):
            with self.subTest(text=text[:30]):
                self.assertEqual(text, cc.redact(text)[0])

    def test_a_session_cookie_named_in_prose_or_a_row_is_redacted(self):
        cases = {
            "pásame tu cookie _gitlab_session para probar... ok la mía es 0088e7078be581e924342a3ee370639c pero ya expira": "0088e7078be581e924342a3ee370639c",
            "ci_session 839d049d1ae1cadce868865f44739f743d38566e parkovani.example.cz": "839d049d1ae1cadce868865f44739f743d38566e",
            "_shibsession の値: _3949ac74aace1ce6dcee9e518000385b これで": "_3949ac74aace1ce6dcee9e518000385b",
        }
        for text, secret in cases.items():
            with self.subTest(text=text[:30]):
                self.assertNotIn(secret, cc.redact(text)[0])
        for text in ("SESSION_ENGINE = 'django.contrib.sessions.backends.db'", "user_session expired at 2025-01-01 10:00:00, request_id=4f2a9c1d27be84e06a5d9c3b1e7f20a4"):
            with self.subTest(text=text[:30]):
                self.assertEqual(text, cc.redact(text)[0])

    def test_a_code_beside_a_redacted_code_after_a_lock_s_name_is_redacted(self):
        # A second code in the sentence of a redacted one, after the name of what it opens, with no giving word.
        text = "Night shift at the depot: building alarm code is 730519, cage combination 4418276."
        redacted = cc.redact(text)[0]
        self.assertNotIn("730519", redacted)
        self.assertNotIn("4418276", redacted)
        kept = "the alarm code is 730519, ticket 48213 is closed"
        self.assertIn("ticket 48213", cc.redact(kept)[0])

    def test_a_list_under_a_heading_of_passwords_or_access_codes_is_redacted(self):
        # Labels and values under a heading that names passwords or the codes that open a place; the next
        # label of such a list is no rest of the value above it.
        text = ("Notfall-Kennwörter (Tresor)\n===========================\nFirewall admin:   fwadmin  /  Qx7.vLt--p2*Ma\n"
                "Backup-Konsole:   Herbst2027!\nSafe Büro:        4471*26")
        redacted = cc.redact(text)[0]
        for secret in ("Qx7.vLt--p2*Ma", "Herbst2027!", "4471*26"):
            self.assertNotIn(secret, redacted)
        self.assertIn("Firewall admin:   fwadmin", redacted)
        listed = "Service logins:\n- deploy_bot : ghp_Qm8vLx2Rt7Kp4Nz9Wc3Yb6Hd1Fs5Ga0J\n- tmp_restore : Hz3$dS9jQe"
        redacted = cc.redact(listed)[0]
        self.assertIn("- tmp_restore : ", redacted)
        self.assertNotIn("Hz3$dS9jQe", redacted)
        for text in ("Postal codes of the depots:\n- Berlin: 10115\n- Munich: 80331",
                     "C:\\> cmdkey /list\n\nCurrently stored credentials:\n\n    Target: Domain:target=sql01.corp.local\n    Type: Domain Password\n    User: CORP\\svc_sql"):
            with self.subTest(text=text[:30]):
                self.assertEqual(cc.redact(text), (text, 0))

    def test_a_published_key_and_the_letters_of_a_token_give_no_context(self):
        # A JWKS a server publishes holds only public members, under the word "keys"; a credential word's
        # letters inside a base64url token (`…-PW76X…`) name nothing.
        jwks = ('{"keys":[{"kty": "EC", "crv": "P-256", "kid": "1f0c", "use": "sig", "x": "Qm3vLp9Zr8sT2wXy5Nb7Kd4Hf6Gj1Ua0Vo3Iw8Zx5Cq", '
                '"y": "Tg7Rf2Pd5Ls8Mh1Bn4Cq9Zx6Iw3Vo0Ua7Gj2Hf5Kd"},{"kty": "RSA", "kid": "9ab1", "n": "u3Xq8-Lm2Pz7Wk4Rt9Yb-PW76XsiKkkasCHaX62s3vt'
                'WoSRZI9bR0oRJhi6x98s0grkK3MlcKqT7CU0fhMoklWdH", "e": "AQAB"}]}')
        self.assertEqual(cc.redact(jwks), (jwks, 0))
        private = '{"keys":[{"kty": "EC", "crv": "P-256", "x": "Qm3vLp9Zr8sT2wXy5Nb7Kd4Hf6Gj1Ua0Vo3Iw8Zx5Cq", "d": "Hk2Qz8vLmWpX3cR9tYb7NsKd4Ef0Gj6Ua1Vo5Iw3Zx8"}]}'
        self.assertNotIn("Hk2Qz8vLmWpX3cR9tYb7NsKd4Ef0Gj6Ua1Vo5Iw3Zx8", cc.redact(private)[0])
        # What still gives one: a password file of one line, a Django signed cookie's compressed value, a Lua module's key.
        for text, secret in (("$ cat .vault_pass\nTulp87*\n$ ansible-playbook site.yml", "Tulp87*"),
                             ('Cookie: sessionid=".eJxVjMsOgjAQRX9lMmt9Xk4cAr3n:1t8Kx2:SW2l7gQncsfneCC79cRjEo-uYRPxL7grKGOQ2zsKI4c"',
                              "eJxVjMsOgjAQRX9lMmt9Xk4cAr3n:1t8Kx2:SW2l7gQncsfneCC79cRjEo-uYRPxL7grKGOQ2zsKI4c"),
                             ('M.INGEST_KEY = "152e517ae2d07c448d55659b4a99cfdd7970cf86"', "152e517ae2d07c448d55659b4a99cfdd7970cf86")):
            with self.subTest(text=text[:30]):
                self.assertNotIn(secret, cc.redact(text)[0])
        for text in ("$ cat token_name.txt\ndeploy-bot\n$ ls", 'M.CACHE_KEY = "user-profile"'):
            with self.subTest(text=text[:30]):
                self.assertEqual(cc.redact(text), (text, 0))

    def test_a_token_a_wrap_cut_is_read_whole(self):
        # Neither piece says what it is, so no rule finds it alone: joined, the rules find the
        # token (a JWT, a GitHub token, a value under a secret's name) and both pieces go.
        ghp = fake_secret("ghp_", 36, seed="wrapped")
        jwt = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + fake_secret("eyJzdWIiOiI", 30, seed="jwt-body") + "."
               + fake_secret("", 43, seed="jwt-signature"))
        log = "03-04 16:20:11.441  8123  8160 D AuthRepo: "
        cases = {
            f"the token for the mirror job (our mail client wraps it, join the lines):\n\n{ghp[:23]}\n{ghp[23:]}\n\nCheers":
                (ghp[:23], ghp[23:]),
            f'{log}tokenResponse={{"access_token":"{jwt[:48]}\n{log}{jwt[48:]}","token_type":"Bearer"}}': (jwt[:48], jwt[48:]),
            '{"level":"info","msg":"loaded config","onesignal_key":"os_v2_app_7aflap6zfyrbessu2rcmfinfdsrr4n\n'
            'jehxxetms5cbdqblvaukkj5hz227z2ewhdswkuqwtokchxobizwka7mx","workers":8}':
                ("os_v2_app_7aflap6zfyrbessu2rcmfinfdsrr4n", "jehxxetms5cbdqblvaukkj5hz227z2ewhdswkuqwtokchxobizwka7mx"),
        }
        for text, pieces in cases.items():
            with self.subTest(text=text[:40]):
                redacted = cc.redact(text)[0]
                for piece in pieces:
                    self.assertNotIn(piece, redacted)
        # Lines that only meet: a name given nothing above the next setting, code's name above a
        # commit id (git blame), base64 that its padding ends, a date above a name.
        for text in ("SMTP_PASSWORD=\nLOG_LEVEL=info",
                     "a07db87b (Marta 2024-03-12  197)     api_key = settings.MIXPANEL_API_KEY\n"
                     "75a2563d (Jonas 2024-04-06  323)     if not api_key: raise ImproperlyConfigured",
                     "public key (base64): MCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\nAAAAC3NzaC1lZDI1NTE5",
                     "Credentials › Data Encryption\n  Morel-2024-Offsite   Last modified 04.02.2025\n  Huber-Cloud-Connect",
                     # a list of ids one a line, and names with dates: items, not a token's pieces
                     "access token log:\nmsg_stub_ab36ac8d86994443\nmsg_stub_7f3937d459d94987\nreq_stub_e585437bb21b",
                     "token betas:\ncontext-management-2025-06-27\ninterleaved-thinking-2025-05-14"):
            with self.subTest(text=text[:40]):
                self.assertEqual(cc.redact(text)[0], text)

    def test_a_handover_lists_other_accounts_beside_a_redacted_one(self):
        # A list whose item gives a login and a password in backticks: the other items' last
        # backticked token is a password too when it has one's shape; a path or a name stays.
        text = ("**PBX access**\n- Issabel web: `admin` / `Xk29!mPq7zLw`\n- SSH root: `J1=i*@PPe_kAkRLNXO`\n"
                "- MySQL root: `cVxNM2Z1FSPRAkIE0yPByXD`\n- Docs: `docs/handover.md`\n- Host: `pbx-01`")
        redacted = cc.redact(text)[0]
        for secret in ("Xk29!mPq7zLw", "J1=i*@PPe_kAkRLNXO", "cVxNM2Z1FSPRAkIE0yPByXD"):
            self.assertNotIn(secret, redacted)
        for kept in ("`docs/handover.md`", "`pbx-01`", "`admin`"):
            self.assertIn(kept, redacted)
        plain = "- Build: `make release`\n- Branch: `release-2024-11`\n- Tag: `v2.14.0-rc1`"
        self.assertEqual(cc.redact(plain)[0], plain)

    def test_a_table_drawn_with_box_characters_is_read_as_markdown(self):
        # ClickHouse's PrettyCompact names the columns in its top border; DuckDB's in a row.
        clickhouse = (":) SELECT name, password_plain FROM tmp_users FORMAT PrettyCompact\n\n"
                      "┌─name───┬─password_plain───────────┐\n│ sa-etl │ XbguhKisqwcQhkxCGAn3FtfH │\n"
                      "│ sa-bi  │ 6Z4EZxhfNEp5vzlCCwgDr7EV │\n└────────┴──────────────────────────┘")
        duckdb = ("┌──────────┬──────────────────┐\n│ user     │ password         │\n├──────────┼──────────────────┤\n"
                  "│ etl      │ Xk29!mPq7zLw     │\n│ bi       │ kPeowvmfXCTLLXi2 │\n└──────────┴──────────────────┘")
        for text, secrets in ((clickhouse, ("XbguhKisqwcQhkxCGAn3FtfH", "6Z4EZxhfNEp5vzlCCwgDr7EV")), (duckdb, ("Xk29!mPq7zLw", "kPeowvmfXCTLLXi2"))):
            with self.subTest(text=text[:20]):
                redacted, _ = cc.redact(text)
                for secret in secrets:
                    self.assertNotIn(secret, redacted)
                self.assertIn("│ sa-etl │" if text is clickhouse else "│ etl      │", redacted)
        # A box with no column's junction is a pane: its lines are no table.
        pane = "╭──────────────────────────────╮\n│ user      password_reset_url │\n│ admin     /reset/7f3c9a2e    │\n╰──────────────────────────────╯"
        self.assertEqual(cc.redact(pane), (pane, 0))

    def test_names_stand_ins_and_public_values_in_a_secrets_place_stay(self):
        # What sits where a secret could, and is none: a secret's name, a stand-in in a token's
        # shape, a protocol's public values, a lookup's keys, prose about a login or a list of names.
        texts = ('#define NVS_KEY_WIFI_PASSWORD   "wifi_pass"',
                 'Secret "mlflow-s3-credentials" created in namespace "mlops"',
                 "GITHUB_PAT=ghp_YourPersonalAccessTokenGoesHere",
                 "ANTHROPIC_API_KEY=sk-ant-api03-...redacted...",
                 "OKTA_API_TOKEN=00xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                 "<AutoLogon>\n  <Password>\n    <Value>__LOCAL_ADMIN_PASSWORD__</Value>\n  </Password>\n</AutoLogon>",
                 'ota_password: "pick-something-long"',
                 "challenge token for http-01: 80YUVYJhrNFB3iFttE2gaCX-7vi2yjQU50xXA7-ffX0",
                 "Token mint: vhM2U1b5hTFyPV6nbvFL4nt4mPtJiiESCXRSa9XZdfeN",
                 '{"keys": [{"kty": "EC", "crv": "P-256", "kid": "qsi0qcm8", "use": "sig"}]}',
                 'mqtt_pass = keyring.get_password("greenhouse-mqtt", "sensor-node-07")',
                 "Azure DevOps variable groups: vg-infra-prod-secrets (linked to kv-infra-weu-01), vg-infra-test",
                 'Thycotic folder "Network" – secrets: FGT-Lyon admin (ID 4412), FGT-Sevilla admin (ID 4413)',
                 "    password: \"{{ vault_local_admin_password }}\"\n    update_password: always",
                 "redirect after login: https://intranet.contoso.com/signin-oidc#state=qsMkvK-fwm3Oh9sbZx4fmu-AYRmz0jZs",
                 'zen <- zen4R::ZenodoManager$new(token = token, logger = "INFO")',
                 "  Name            Key                       Created\n  ci-prod         sk-ant-api03-...Xq2A       2025-01-14",
                 "# node key: nodekey:d91f826b54e9dc302ed165ef198f8a8f6d49b58cae987686848f9828df509117",
                 'Public-Key-Pins: pin-sha256="HDRsTfbV37ftO/fl37UExV4iOVxhO8d/9k+9fhzSlx4="; max-age=5184000',
                 '      <pin digest="SHA-256">HFL5GMNu0MJMAfg1EJgOkceyFdQohlI6sNXAD1LBaRI=</pin>',
                 '<Texture name="ui_star" encoding="base64">5A/gNa/oFuaCRY+cq4BHkATx72gWdj62nYIiDFgGlAQ7656HptUEBa3y0L4EpAY8q5G1OVAaZo3nd+WAIxyW5A==</Texture>',
                 'const clickSfx = new Audio("data:audio/wav;base64,UklGRkQAAABXQVZFZm10IBAAAAABAAEAIlYAAESsAAACABAAZGF0YSAAAACKB5CmPZkwwnJKDbKTTRg8Iu4J6sFL+7cFhNEi7pOSxw==");',
                 '#define WIFI_PASS     "YOUR_WIFI_PASSWORD"\n#define MQTT_USER     "lamp-fleet"\n#define MQTT_PASS     "REPLACE_WITH_BROKER_PASSWORD"',
                 'connectionString="Server=sql-mm-01;User Id=mm_app;Password=__MM_DB_PASSWORD__;TrustServerCertificate=True"',
                 "NAME              DIGEST            CREATED AT\nSTEAM_WEB_API_KEY 7566cfe098a376d0  2025-01-20T08:14:22Z",
                 '$ az keyvault secret list --vault-name kv-ph-prod --query "[].name" -o tsv\niothub-owner-conn\nfunc-storage-conn',
                 "ComputerName        : PC-EMPFANG-01\nAccount             : LAPSAdmin\nPassword            : System.Security.SecureString",
                 "Description        Expires      Value                 Secret ID\nrmm-sync-2025      12.03.2026   Hidden                d6a3c14f-abce-4b1d-a754-6f684027e06a",
                 "//# sourceMappingURL=data:application/json;base64,eyJ2ZXJzaW9uIjogMywgIm5hbWVzIjogWyJ0b2tlbiIsICJwYXNzd29yZCJdLCAibWFwcGluZ3MiOiAiQUFBQSxTQUFTQSxqQjJpRjBnOFVEeWZrQU9JSG91MXF3SHA1In0=")
        for text in texts:
            with self.subTest(text=text[:40]):
                self.assertEqual(cc.redact(text), (text, 0))

    def test_a_table_of_names_and_values_gives_the_values_of_secret_names(self):
        # A CSV of environment variables, a markdown table of a service's keys: the Value cell of a
        # row whose name says secret; the other rows' values stay.
        csv_text = ("name,value,environment\nTWILIO_AUTH_TOKEN,07db6aebb4ea3f31e091f7f2206249da,production\n"
                    "LOG_LEVEL,info,production\nREGION,eu-west-1,production\n")
        markdown = ("| Service | Key name | Value |\n|---|---|---|\n| GameAnalytics | Secret key | `909695eb546f3b68cf12d4b2a670fc402d0fc4c2` |\n"
                    "| Region | Default region | `eu-west-1` |\n")
        for text, secret, kept in ((csv_text, "07db6aebb4ea3f31e091f7f2206249da", "LOG_LEVEL,info,production"),
                                   (markdown, "909695eb546f3b68cf12d4b2a670fc402d0fc4c2", "`eu-west-1`")):
            with self.subTest(text=text[:20]):
                redacted, _ = cc.redact(text)
                self.assertNotIn(secret, redacted)
                self.assertIn(kept, redacted)
        # A Ruby heredoc whose line breaks are taken out is one value.
        heredoc = 'token = <<~TOK.delete("\\n")\n  glpat-vBMflPO7bEzQ\n  wS-ZNxZhL_2pLm9Q\nTOK\nGitlab.configure { |c| c.private_token = token }\n'
        redacted, _ = cc.redact(heredoc)
        self.assertNotIn("wS-ZNxZhL_2pLm9Q", redacted)
        self.assertIn("TOK\nGitlab.configure", redacted)

    def test_base64_that_decodes_to_a_credential_is_redacted_with_what_it_decodes_to(self):
        text = "$ echo 'bWwtY2k6aXJpcy16ZXBoeXItamlnc2F3LWdyYXZlbA==' | base64 -d\nml-ci:iris-zephyr-jigsaw-gravel"
        redacted, _ = cc.redact(text)
        self.assertNotIn("bWwtY2k6aXJpcy16ZXBoeXItamlnc2F3LWdyYXZlbA==", redacted)
        self.assertNotIn("iris-zephyr-jigsaw-gravel", redacted)
        self.assertIn("ml-ci:", redacted)
        # base64 of a JSON file that holds a key (a note's KAGGLE_JSON_B64)
        blob = "eyJ1c2VybmFtZSI6ICJkcy1zaHB1dWEiLCAia2V5IjogIjg5ZjcwNTg5YTQzODIyN2U0ZGM3ODM0M2M2MzA2NTMzIn0="
        self.assertNotIn(blob, cc.redact("# KAGGLE_JSON_B64 (from my notes): " + blob)[0])
        # `base64 < file` wraps at 76: the lines are read as one token
        wrapped = ("$ base64 < harbor-robot.json\n"
                   "eyJyZWdpc3RyeSI6ICJoYXJib3Iub3JiaXMuaW50ZXJuYWwiLCAidXNlcm5hbWUiOiAicm9ib3Qk\n"
                   "Y2kiLCAicGFzc3dvcmQiOiAiaS4hQ0stbjZwdVRsUGpfMUFsZDYqNHJ0ekEtUSpIIn0=")
        self.assertNotIn("Y2kiLCAicGFzc3dvcmQiOiAiaS4hQ0stbjZwdVRsUGpfMUFsZDYqNHJ0ekEtUSpIIn0=", cc.redact(wrapped)[0])
        # base64 of a cursor's JSON, of plain words, of a URI: data
        for text in ("kafka-console-consumer: value=eyJ0eXBlIjoibWF0Y2hfZW5kIiwibWF0Y2giOjQ0MTIsIndpbm5lciI6InRlYW1fYmx1ZSJ9",
                     "payload: eyJkZWx0YVJvdW5kIjogNDIsICJmb2xkZXIiOiAiSW5ib3gifQ==",
                     'node(id: "Z2lkOi8vc2hvcGlmeS9Qcm9kdWN0LzY4MTg4NTM5NjkyMjA=") { ... on Product { title } }'):
            with self.subTest(text=text[:30]):
                self.assertEqual(cc.redact(text), (text, 0))

    def test_a_secret_code_builds_from_strings_is_redacted_in_every_part(self):
        # Parts given names and joined later, or joined where they stand: each part, where it stands.
        cases = {
            "const a = \"sk_live_51N\";\nconst b = \"ZIxGrUhixLma0jvbTo1Dgf7rnHhYMj4xo6ivfyvy\";\n"
            "const stripe = require(\"stripe\")(a + b);": ("sk_live_51N", "ZIxGrUhixLma0jvbTo1Dgf7rnHhYMj4xo6ivfyvy"),
            "P1='ghp_SbNX1ITZRNa7'\nP2='b8crAmKp3LU8'\nP3='Kof205QN17dA'\n"
            "git clone \"https://x-access-token:${P1}${P2}${P3}@github.com/fjord-labs/schemas.git\"": ("b8crAmKp3LU8", "Kof205QN17dA"),
            "const (\n\tk1 = \"5b6c53c3cc91788a704bf72d0d0a1752\"\n\tk2 = \"f139e7c5453ba960b93dc8db64d8c8ae\"\n)\n\n"
            "var hmacKey = []byte(k1 + k2)": ("5b6c53c3cc91788a704bf72d0d0a1752", "f139e7c5453ba960b93dc8db64d8c8ae"),
            "private let keyParts = [\"3bNI8wGYs2ejeHjWDdyy\", \"mWPAdc1CWZLfrJP8y0VP\"]\nlet expoToken = keyParts.joined()":
                ("3bNI8wGYs2ejeHjWDdyy", "mWPAdc1CWZLfrJP8y0VP"),
            'val dbPassword = buildString {\n    append("FPETMPAER")\n    append("aeIjRIOC9v")\n}': ("FPETMPAER", "aeIjRIOC9v"),
            '_parts = ["n9JvycF/ALD/+w", "/N9IvARC5idX8f", "dn2EanhP7wuF"]\nos.environ["AWS_SECRET_ACCESS_KEY"] = "".join(_parts)':
                ("n9JvycF/ALD/+w", "dn2EanhP7wuF"),
            'val plaidSecret = Seq("c29c616612", "793a8bb5b2", "9fdfa16129").mkString': ("c29c616612", "9fdfa16129"),
            "sentry:\n  authTokenParts:\n    - sntryu_36fad5a10a135cbff93da342eb46f\n    - 30a459139014810da7068292a3c58ca9ba0":
                ("sntryu_36fad5a10a135cbff93da342eb46f", "30a459139014810da7068292a3c58ca9ba0"),
            '{"bot": "notifier", "token_parts": ["MTI5NzEzNjU3MzQwNzQ5NDkyN", "A.uLWefL.8vR7M10DpG2tEx", "U1KbClKNOxeIAGmsEMYr3HX3"]}':
                ("MTI5NzEzNjU3MzQwNzQ5NDkyN", "U1KbClKNOxeIAGmsEMYr3HX3"),
            "PASS=\"Dolphin\"\nPASS+=\"_Reef42!\"\ncurl -u \"monitor:$PASS\" https://nagios.reef-dive.example/status.cgi": ("Dolphin", "_Reef42!"),
            "var apiKey = strings.Join([]string{\n\t\"AIzaSy\",\n\t\"r7sjAPuSJgaH_doL\",\n\t\"Ai5_90wVvzcfQXD6j\",\n}, \"\")":
                ("r7sjAPuSJgaH_doL", "Ai5_90wVvzcfQXD6j"),
            'locals {\n  do_token = join("", ["dop_v1_6c934e16946e1eeb64dec6e9b287ce", "42a19f56079bdbea3c104f0ec29425190f"])\n}':
                ("42a19f56079bdbea3c104f0ec29425190f",),
            "$apiKey = implode('', ['SPcQWkdyEqh2', 'fhhRpTJXqsAc', 'Ut8D9Rf2TlZU']);": ("SPcQWkdyEqh2", "fhhRpTJXqsAc", "Ut8D9Rf2TlZU"),
            "KEY = %w[RTqjuo9HduCf m3uwEajg6m38 wFr3Cpc3JW8L].join": ("RTqjuo9HduCf", "m3uwEajg6m38", "wFr3Cpc3JW8L"),
            'SECRET = base64.b64decode("iGE4Ou6DgXLJ48zBGDz5OWN2QDeRS2Xa") + base64.b64decode("8zbDwLbi1LwW1dp88bXlKtLXluKAnZyE")':
                ("8zbDwLbi1LwW1dp88bXlKtLXluKAnZyE",),
            'var part1 = "T6oAuDEL9HbMzMxheCvG";\nvar part2 = "HR8RaZqWi8SAfHVpzDnX";\nclient.DefaultRequestHeaders.Add("X-Api-Key", $"{part1}{part2}");':
                ("T6oAuDEL9HbMzMxheCvG", "HR8RaZqWi8SAfHVpzDnX"),
            'ARG NPM_T1=npm_PWgZMI8eJGrvRLLj\nARG NPM_T2=Qci7rw4OgI02ug3LZ2rv\nRUN echo "//registry.npmjs.org/:_authToken=${NPM_T1}${NPM_T2}" > .npmrc':
                ("npm_PWgZMI8eJGrvRLLj", "Qci7rw4OgI02ug3LZ2rv"),
            'String secret = new StringBuilder()\n    .append("9QiFA6llllQq9QKJ")\n    .append("soJwXhTs71c1simg")\n    .toString();':
                ("9QiFA6llllQq9QKJ", "soJwXhTs71c1simg"),
            'export API_JWT="eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.\\\neyJzdWIiOiJzdmMtcmVwb3J0aW5nIiwic2NvcGUiOiJyZXBvcnRzOnJlYWQiLCJleHAiOjE3NjcyMjU2MDB9.\\\n'
            'nlD7Dq1CPrJxs9z2NCoQo5p_GLppSli-iJhDiBE18ju"': ("eyJzdWIiOiJzdmMtcmVwb3J0aW5nIiwic2NvcGUiOiJyZXBvcnRzOnJlYWQiLCJleHAiOjE3NjcyMjU2MDB9",),
            # A YAML block's lines are one value; a key's parts under names that say so.
            "env:\n  - name: DATADOG_API_KEY\n    value: >-\n      c5a37e6f770c351b\n      4deba241aca4aaf4": ("c5a37e6f770c351b", "4deba241aca4aaf4"),
            "storage:\n  azure:\n    key: >-\n      lfObatfE1/6ZjKebIKqkTrsJ1DKEM+\n      wJz2+kLy/ZmsGqN8/QwvAeFevhUJJ7\n      amniNRKlTTeXLDXiCcPlGS0hUg==":
                ("amniNRKlTTeXLDXiCcPlGS0hUg==",),
            "api:\n  key_part1: atXgDJ0hyqRCEWAK\n  key_part2: BcnJtRrVTp0aTR7p": ("atXgDJ0hyqRCEWAK", "BcnJtRrVTp0aTR7p"),
            # Python's literals side by side in parentheses; SQL's || at the end of a line.
            'SLACK_TOKEN = (\n    "xoxp-5820194736-"\n    "6620398147725-7419305528614-"\n    "BnFk6XCEKyxq7q7Rdf9OVaPTnwCE297E"\n)':
                ("6620398147725-7419305528614-", "BnFk6XCEKyxq7q7Rdf9OVaPTnwCE297E"),
            "UPDATE integrations\nSET api_secret = '55976263e4a3abc0913d55312bbfb8ea' ||\n                 'ba672c0b3c14049405e8a0022990247d'":
                ("ba672c0b3c14049405e8a0022990247d",),
            # The operator at the end of a line, the operand on the next.
            'const dsn = "host=pg-events.svc user=events password=" +\n\t"Ev3nts!Pg" + "_Go2024" +\n\t" dbname=events sslmode=require"': ("Ev3nts!Pg", "_Go2024"),
            'private static final String PRIVATE_KEY_PEM =\n    "-----BEGIN PRIVATE KEY-----\\n" +\n'
            '    "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg1iTbTA4xkPT9DDWP\\n" +\n    "-----END PRIVATE KEY-----";':
                ("MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg1iTbTA4xkPT9DDWP",),
            # A literal's prefix (SQL's N'…'), PowerShell's backtick after the operator, a quote of the other kind inside a literal.
            "EXEC sp_addlinkedsrvlogin @rmtsrvname = N'ERP', @rmtuser = N'erp_report',\n    @rmtpassword = N'Kx7-pQ2m' + N'Zt9wR4e';":
                ("Kx7-pQ2m", "Zt9wR4e"),
            '$env:PARTNER_KEY = "8C21F07A9D3B4E56" + `\n                  "0B7D9E2A41C3F865"': ("8C21F07A9D3B4E56", "0B7D9E2A41C3F865"),
            'pw_head = "Ledger-Q3"\npw_tail = "9!vLm"\ncur.execute("ALTER LOGIN ledger WITH PASSWORD = \'" + pw_head + pw_tail + "\'")':
                ("Ledger-Q3", "9!vLm"),
            # A format of nothing but its parts: HCL's format(), Go's Sprintf, Python's % and str.format.
            'provider "tfe" {\n  token = format("%s%s", "Qx8wd3610K7KR7.atlasv1.hwKVF", "qrB3FdQbRwFtFOKPGlx71ysekqr0rRkDBYWQ3")\n}':
                ("Qx8wd3610K7KR7.atlasv1.hwKVF", "qrB3FdQbRwFtFOKPGlx71ysekqr0rRkDBYWQ3"),
            'API_KEY = "{}{}".format("c29c616612aa93f1", "793a8bb5b2bb04e7")': ("c29c616612aa93f1", "793a8bb5b2bb04e7"),
            'StringBuilder sb = new StringBuilder();\nsb.append("Qm7vLoHI2x");\nsb.append("T*ws.Yop4R");\nprops.setProperty("mail.smtp.password", sb.toString());':
                ("Qm7vLoHI2x", "T*ws.Yop4R"),
            'var sb = new StringBuilder();\nsb.Append("7qifaucoVWJGMyq8HiwmwKD9");\nsb.Append("peQkl2FrYGTkL2CE/19Pq8yD");\nvar storageKey = sb.ToString();':
                ("7qifaucoVWJGMyq8HiwmwKD9", "peQkl2FrYGTkL2CE/19Pq8yD"),  # C#'s Append and ToString
            "PS C:\\> $a = 'Harbor#31'\nPS C:\\> $b = 'otter611!'\nPS C:\\> $pw = ConvertTo-SecureString ($a + $b) -AsPlainText -Force": ("Harbor#31", "otter611!"),
            # A concatenating function in its languages' names (Excel's `;`, R's paste0, also of names), a template
            # of literals, C's #define, a C string array, Make's `:=` and $(A)$(B), R's `<-`.
            '=CONCATENAR("hT4vQz81LmWpX2cR";"Yb7NsKd3Ef9Gj6Ua")': ("hT4vQz81LmWpX2cR", "Yb7NsKd3Ef9Gj6Ua"),
            'k1 <- "Quokka_Delta"\nk2 <- "_Ferry4471"\ntoken <- paste0(k1, k2)': ("Quokka_Delta", "_Ferry4471"),
            "const key = `${'d41c7a90b3e25f18'}${'6ea0f2c94b17d3e8'}`;": ("d41c7a90b3e25f18", "6ea0f2c94b17d3e8"),
            '#define SIGNING_KEY_A "5e0c9b27a4d18f63e2b70c94d5a1e8f3"\n#define SIGNING_KEY_B "0b7f3d9c2e61a48f5c03b9e7d24a16c8"':
                ("5e0c9b27a4d18f63e2b70c94d5a1e8f3", "0b7f3d9c2e61a48f5c03b9e7d24a16c8"),
            'static const char p1[] = "Wn4xR8tLq2Zs";\nstatic const char p2[] = "Hc7vJ3kPb9Ye";\nconst char *secret = $"{p1}{p2}";':
                ("Wn4xR8tLq2Zs", "Hc7vJ3kPb9Ye"),
            "TK_A := xkey-93be0a7f4c\nTK_B := 2d81e6c5f09a7b34\nrun:\n\tSENDER_TOKEN=$(TK_A)$(TK_B) ./send": ("xkey-93be0a7f4c", "2d81e6c5f09a7b34"),
            'parts=("glpat-Rq7vXw2" "Lm9kTz4Pb8Nc3Hd")\nexport CI_PAT="$(printf %s "${parts[@]}")"': ("glpat-Rq7vXw2", "Lm9kTz4Pb8Nc3Hd"),
        }
        for text, parts in cases.items():
            with self.subTest(text=text[:30]):
                redacted, _ = cc.redact(text)
                for part in parts:
                    self.assertNotIn(part, redacted)
        # Strings joined into what is no secret stay.
        for text in ("BASE = \"https://api.example.com\"\nurl = \"$BASE/login?next=/home\"",
                     "prefix = \"Bearer \"\nheader = prefix + token", "HOME_BIN=\"/opt/tools\"\nexport PATH=\"$HOME_BIN:$PATH\"",
                     "names = [\"alpha\", \"beta\"]\nprint(\", \".join(names))",
                     'dsn = os.getenv("DB_USER") + ":" + os.getenv("DB_PASSWORD") + "@db:5432/app"',
                     'MESSAGE = "Deploy finished for " \\\n  "all regions"', "description: >-\n  This service handles\n  payments for shops",
                     'msg = (\n    "Deploy finished "\n    "for all regions"\n)', "SELECT CONCAT(first_name, ' ', last_name) FROM users",
                     '#define APP_NAME "ledger"\n#define APP_VERSION "2.4.1"', 'label <- paste0("run_", run_id)'):
            with self.subTest(text=text[:30]):
                self.assertEqual(cc.redact(text), (text, 0))

    def test_a_value_given_apart_from_its_name_is_read_as_name_value(self):
        # HAR, KeePass, PowerShell, Gradle: the name and the value stand in fields of one record.
        cases = {
            '"cookies": [\n  {\n    "name": "__Secure-next-auth.session-token",\n    "value": "eyJhbGciOiJkaXIiLCJlbmMiOiJBMjU2R0NNIn0..uKRnPq0oaWZZR_6hmH8YTa"\n  }':
                "eyJhbGciOiJkaXIiLCJlbmMiOiJBMjU2R0NNIn0..uKRnPq0oaWZZR_6hmH8YTa",
            "<String><Key>Title</Key><Value>Synology NAS</Value></String>\n<String><Key>Password</Key><Value>Tiramisu#Napoli_11</Value></String>":
                "Tiramisu#Napoli_11",
            "Set-ItemProperty -Path 'HKLM:\\SOFTWARE\\Winlogon' -Name DefaultPassword -Value 'Signage#Lobby9'": "Signage#Lobby9",
            'Set-ItemProperty $RegPath "DefaultPassword" -Value "Kiosk!Hall2001" -Type String': "Kiosk!Hall2001",
            'buildConfigField("String", "ALGOLIA_ADMIN_KEY", "\\"fd6b66d19fb9b7a907a0a9596a8c76ff\\"")': "fd6b66d19fb9b7a907a0a9596a8c76ff",
            # A cookie's record: its value is a cookie's, whatever its name (Go's http.Cookie, Swift's HTTPCookie).
            'req.AddCookie(&http.Cookie{Name: "gitea_incredible", Value: "f0b1c8018b411d7acb51285087425c81"})': "f0b1c8018b411d7acb51285087425c81",
            'HTTPCookie(properties: [.domain: "api.acme.io", .name: "sid", .value: "GkgeT95MkympLTziK4OUqurYiHApmmpo"])': "GkgeT95MkympLTziK4OUqurYiHApmmpo",
        }
        for text, secret in cases.items():
            with self.subTest(text=text[:30]):
                redacted, _ = cc.redact(text)
                self.assertNotIn(secret, redacted)
                self.assertIn("Synology NAS" if "Synology" in text else text[:12], redacted)
        for text in ('{"name": "theme", "value": "dark-mode-enabled"}', "<Key>Title</Key><Value>Synology NAS 2024</Value>",
                     "Set-ItemProperty -Path HKCU:\\Console -Name FontSize -Value 0x00140000",
                     'http.Cookie{Name: "theme", Value: "dark-mode-enabled"}'):
            with self.subTest(text=text[:30]):
                self.assertEqual(cc.redact(text), (text, 0))

    def test_a_value_found_in_one_field_is_redacted_in_every_field(self):
        cp = make_checkpoint(summary="logged in to the router with Walrus#2024 at last",
                             recent_commands=[cc.Command("sshpass -p 'Walrus#2024' ssh admin@10.0.3.7", 0)])
        redactor = cc.Redactor()
        text = json.dumps(redactor.checkpoint(cp).to_json())
        self.assertNotIn("Walrus#2024", text)
        self.assertEqual(redactor.count, 2)

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


class TestRandomTokenDetector(unittest.TestCase):
    """What counts as random (looks_machine_generated), and what the contexts find with it."""

    def test_machine_made_tokens_count_as_random(self):
        for token in ("ZiaLwzzpSAICpzvWf6mVZRdFBV", "Xk29!mPq7z", "sWmbWNDijOBhpETgCrStVk", "q8XkL2mR7vTz4WpN9sYb",
                      "4f2c1a7e9b3d4e8fa1c2d3e4f5a6b7c8", "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318",
                      "IQoJb3JpZ2luX2VjEXAMPLE/+IQoJb3JpZ2lu==", "AKIAQ3ZB7NXS2KLM4PDW"):
            with self.subTest(token=token):
                self.assertTrue(cc.looks_machine_generated(token))

    def test_words_ids_and_well_known_shapes_do_not(self):
        for token in ("getAuthToken2", "password_reset_v2", "MyAppSecretKey2024", "api.example.com", "us-east-1",
                      "token-service-ggd2i574-zh9l3", "db.t4g.medium", "python-requests/2.32.3", "spec/models/api_key_spec.rb:42",
                      "POSTGRES_PASSWORD_FILE", "a278bd5e-8491-4aff-bfd6-b7de40aadaa8", "2b7e151628aed2a6",  # UUID, short hex
                      "cus_Q4xB7ZcLwS1mNe", "chatcmpl-nXoGhgbUnuwJUc1WOFX9EW9AArbA8", "AIDAOZJ6NNXOQY5TBJ3HQ",  # object ids
                      "sha256:4c110d45b38c734370f3b00e377da2eff01b5712b7e59fa464ad8b61626d8958", "h1:h5meDVxyqJozXxYjaEf++McxBjOBcoY0qC",
                      "2024-06-11T09:14:03Z", "https://files.example.com/build.zip", "/opt/scripts/sync_catalog.sh",
                      "AAAAC3NzaC1lZDI1NTE5AAAAIJyRrrA0igH5rW2d+1CUj2VYlC1YLLeB", "A-Za-z0-9+/", "$GITHUB_TOKEN_2",
                      "as per RFC 2616 section 4.2"):  # words with spaces
            with self.subTest(token=token):
                self.assertFalse(cc.looks_machine_generated(token))

    def test_passwords_people_choose_count_where_the_position_says_password(self):
        for value in ("Adm1n!", "dragon1987", "nemo.77", "K4ngar00815", "battery-staple-marble-pickle",
                      "ahGhVusPgNpmweX", "Gandalf_the_Grey!"):
            with self.subTest(value=value):
                self.assertTrue(cc.looks_like_chosen_password(value))
        for value in ("X-API-Key", "argon2id", "sha256", "System.getenv", "release-2024-09-16", "api.example.com",
                      "password-reset-email-template", "valid-for-one-hour-only", "2b7e1516", "MAX_TOKENS",
                      "snake_case_name", "$DB_PASSWORD", "CamelCaseName", "Vaultに保存しています", "ops@example.com"):
            with self.subTest(value=value):
                self.assertFalse(cc.looks_like_chosen_password(value))

    def test_a_remembered_judge_gives_its_verdicts_judging_each_value_once_within_bounds(self):
        judged = []
        remembering = cc._remembered(lambda value: judged.append(value) or value.startswith("x"))
        self.assertEqual([remembering(value) for value in ("xa", "b", "xa", "b")], [True, False, True, False])
        self.assertEqual(judged, ["xa", "b"])
        long_value = "x" * (cc._REMEMBERED_LENGTH + 1)
        self.assertEqual([remembering(long_value), remembering(long_value)], [True, True])
        self.assertEqual(judged.count(long_value), 2)  # not kept: a memory bound
        for number in range(cc._REMEMBERED_VALUES + 1):
            remembering(str(number))
        self.assertLessEqual(len(remembering.verdicts), cc._REMEMBERED_VALUES)
        token = "q8XkL2mR7vTz4WpN9sYb"
        self.assertEqual(cc.looks_machine_generated(token), cc.looks_machine_generated.__wrapped__(token))

    def test_random_tokens_judges_a_token_cut_by_the_span_whole(self):
        text = "key: a278bd5e-8491-4aff-bfd6-b7de40aadaa8 and q8XkL2mR7vTz4WpN9sYb"
        self.assertEqual(cc.random_tokens(text, 0, 20), [])  # the UUID, not its first 15 characters
        self.assertEqual(cc.random_tokens(text, 0, len(text)), [(len(text) - 20, len(text))])

    def test_a_context_without_a_machine_made_value_changes_nothing(self):
        for text in ("the token is valid for 3600 seconds", "Le mot de passe est dans le coffre-fort.",
                     "client = Client(region='eu-west-1', timeout=30)", "curl -b 'theme=dark; lang=en' https://example.com",
                     "$ cat ~/.aws/credentials.example\n[default]\naws_access_key_id = <your key id>",
                     "| user | password |\n|---|---|\n| admin | see the vault |"):
            with self.subTest(text=text):
                self.assertEqual(cc.redact(text), (text, 0))

    def test_a_secret_split_by_a_shell_continuation_is_redacted_whole(self):
        text = 'export STRIPE_SECRET_KEY="sk_live_fTo2maszK88ZGTemLP\\\no30bNWgFrbAYooh1v0xpBn"\nnext'
        redacted = cc.redact(text)[0]
        for part in ("fTo2maszK88ZGTemLP", "o30bNWgFrbAYooh1v0xpBn"):
            self.assertNotIn(part, redacted)
        self.assertTrue(redacted.endswith('"\nnext'), redacted)


class TestRuleWords(unittest.TestCase):
    """_rule_words: the words a rule's matches need and start with, read from its pattern, which
    let redact() skip a rule or try it only where a word is."""

    def test_reads_needed_and_starting_words(self):
        # The other needed words (also) are those of another part, not implied by needs (`ysql`
        # of `mysql`), nor a letter alone.
        for pattern, needs, starts, also in (
                (r"(?i)\b(?:mysql|mariadb)\b -p", ("mariadb", "mysql"), ("mariadb", "mysql"), (" -p",)),
                (r"(?<![\w-])(?:AKIA|ASIA)[A-Z0-9]{16}", ("akia", "asia"), ("akia", "asia"), ()),
                (r"(?m)^[ \t]*requirepass\s+(?P<s>\S+)", ("requirepass",), (), ()),
                (r"(?=[\w.]{0,80}?(?i:key|token))[A-Za-z_]\w*=", ("key", "token"), (), ("=",)),
                (r"(?:-b|--cookie)[ \t]+", ("--cookie", "-b"), ("--cookie", "-b"), ()),
                (r"(?:docker)?login -p", ("login -p",), (), ()), (r"[a-z]+=\d+", ("=",), (), ()), (r"[a-z]+\d+", (), (), ()),
                (r"[A-Z]\w{0,40}?(?:Auth|Token)\w*[ \t]*\(", ("auth", "token"), (), ("(",)),
                (r"user=(?P<u>\w+)[ \t]+pass(?:word)?=", ("user=",), ("user=",), ("pass",)), (r"(?:key|token)x[ \t]*=", ("key", "token"), ("key", "token"), ("=",))):
            with self.subTest(pattern=pattern):
                self.assertEqual(cc._rule_words(re.compile(pattern)), (needs, starts, also))

    def test_every_match_of_the_prose_secret_words_holds_one_of_their_parts(self):
        for pattern in (cc._PROSE_SECRET_WORDS, cc._PROSE_NEAR_WORDS):
            needs = cc._rule_words(re.compile(pattern))[0]
            for word in needs:
                with self.subTest(word=word):
                    self.assertTrue(any(part in word for part in cc._PROSE_SECRET_PARTS), "add a part of it to _PROSE_SECRET_PARTS")
        self.assertFalse(cc._may_hold_a_word("the deploy finished in 2 minutes", cc._PROSE_SECRET_PARTS))
        self.assertTrue(cc._may_hold_a_word("the PassWord was", cc._PROSE_SECRET_PARTS))
        self.assertTrue(cc._may_hold_a_word("the paſsword was", cc._PROSE_SECRET_PARTS))  # (?i) reads ſ as s

    def test_every_cheap_look_holds_a_part_of_each_ascii_word_of_its_pattern(self):
        # The readings look for a few letters first (_may_hold_a_word) and read a text only where they are:
        # each word an ASCII text can hold for the pattern after the look must hold one of them.
        for pattern, seen in ((cc._CODE_SAID, cc._CODE_SEEN), (cc._LOGIN_WORDS, cc._LOGIN_WORDS_SEEN), (cc._LOGIN_WORDS_LAST, cc._LOGIN_WORDS_SEEN),
                              (cc._SPELLING_SAID, cc._SPELLING_WORDS)):
            for word in cc._rule_words(re.compile(pattern))[0]:
                with self.subTest(pattern=pattern[:40], word=word):
                    self.assertTrue(not word.isascii() or any(part in word for part in seen), "add a part of it to the pattern's cheap look")
        self.assertFalse(cc._may_hold_a_word("the deploy finished in 2 minutes", cc._CODE_SEEN + cc._LOGIN_WORDS_SEEN))

    def test_stored_words_are_those_of_the_current_patterns(self):
        rules = cc.redaction_rules()
        self.assertEqual(list(cc.RULE_WORDS), [rule.name for rule in rules], "run python3 test_claude_checkpoint.py --rule-words")
        for rule in rules:
            with self.subTest(rule=rule.name):
                self.assertEqual(cc.RULE_WORDS[rule.name],
                                 (cc._pattern_fingerprint(rule.pattern), *cc._rule_words(re.compile(rule.pattern))),
                                 "run python3 test_claude_checkpoint.py --rule-words")

    def test_a_pattern_changed_since_its_words_were_stored_is_parsed(self):
        for name in ("github-token", "a-new-rule"):
            with self.subTest(name=name):
                rule = cc.RedactionRule(name, r"(?i)zzqx-[a-z]{8}")
                self.assertEqual(cc._stored_rule_words(rule), (("zzqx-",), ("zzqx-",), ()))
        rule = next(rule for rule in cc.redaction_rules() if rule.name == "github-token")
        self.assertEqual(cc._stored_rule_words(rule), cc.RULE_WORDS["github-token"][1:])

    def test_a_text_compiles_only_the_rules_whose_words_it_holds(self):
        script = textwrap.dedent(f"""
            import sys; sys.path.insert(0, {HERE!r})
            import json, claude_checkpoint as cc
            compiled = lambda: sorted(rule.name for (rule, _, _), slot in zip(cc._rule_table(), cc._rule_table.compiled) if slot)
            cc.redact("hello world")
            print(json.dumps(compiled()))
            cc.redact("export GITHUB_TOKEN={GHP}")
            print(json.dumps(compiled()))
            """)
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=TIMEOUT)
        first, second = (json.loads(line) for line in proc.stdout.decode().splitlines())
        table = cc._rule_table()
        self.assertEqual(first, sorted(table[index][0].name for index in rules_for_words_in("hello world")))
        self.assertIn("github-token", second)
        self.assertLess(len(second), len(table) // 2)

    def test_a_rule_runs_on_every_text_that_holds_a_word_it_needs(self):
        # The words a text holds are looked up together (_words_in); none may be missed, whatever
        # its length, case or neighbours, and a rule that starts at words is tried at each.
        table = cc._rule_table()
        for index, (rule, needs, starts) in enumerate(table):
            also = sorted(cc._rule_table.also[index])
            for word in needs + starts + tuple(also):
                other = f" {also[0]}" if also and word not in also else ""  # a rule needs one of also too
                for text in (word, word.upper(), f"x{word}y", f"«{word.title()}» and {'é' * 300}{word}\n"):
                    if word not in text.lower():
                        continue  # `ß`.upper() is `SS`: the text no longer holds the word
                    with self.subTest(rule=rule.name, text=text[:40]):
                        scan = cc._Scan(text + other)
                        self.assertIn(word, scan.held)
                        if word in needs:
                            self.assertIn(index, scan.rules())
        self.assertEqual(cc._Scan("hello world").rules(), rules_for_words_in("hello world"))

    def test_a_rule_runs_only_on_a_text_that_holds_one_of_its_other_needed_words_too(self):
        # context-credential-class needs a credential word, and `(` after it: a text without `(`
        # is not scanned, unless it holds a character that (?i) may read as a letter of a word.
        index = next(index for index, (rule, _, _) in enumerate(cc._rule_table()) if rule.name == "context-credential-class")
        self.assertEqual(cc._rule_table.also[index], frozenset("("))
        self.assertNotIn(index, cc._Scan("the AuthToken is set").rules())
        self.assertIn(index, cc._Scan("the AuthToken(is set").rules())
        self.assertIn(index, cc._Scan("the AuthToken is ſet").rules())
        self.assertIn(index, cc._Scan("the AuthToken İs set").rules())

    @slow  # every rule over every example, three ways: --quick has the cheaper checks beside it
    def test_every_rule_that_matches_a_text_is_among_the_rules_it_runs(self):
        texts = [marked_secrets(example)[0] for _, _, example in redaction_examples()]
        texts += [text.replace("\n", " ") for text in texts] + [text.upper() for text in texts]
        for text in texts:
            scan = cc._Scan(text)
            for index, (rule, pattern) in enumerate(cc._compiled_rules()):
                if scan.folds or not pattern.search(text) or rule.needs and not any(word in scan.lowered for word in rule.needs):
                    continue  # (?i) reads ſ as s: the words a rule needs do not look for it; its check needs its words
                with self.subTest(rule=rule.name, text=text[:40]):
                    self.assertIn(index, scan.rules())

    def test_words_a_redaction_makes_are_looked_for_again(self):
        # After a rule replaced values, only the words that overlap «redacted» or hold a sigma
        # (str.lower() writes a final Σ as ς) are looked for again: the text may hold them now.
        for before, after in (("mot ΚΩΔΙΚΌΣA=Xk29mPq7zLw4Rt8VbN3c", "mot ΚΩΔΙΚΌΣ«redacted»=«redacted»"),
                              ("token Xk29mPq7zLw4Rt8VbN3c", "token «redacted»")):
            with self.subTest(after=after):
                scan = cc._Scan(after, before=cc._Scan(before))
                self.assertTrue(cc._words_in(after.lower()) - cc._words_in(before.lower()))
                self.assertLessEqual(cc._words_in(after.lower()), scan.held)
        index = cc._WordIndex([(None, ("d» x", "«r", "edac", "pass"), ())])
        self.assertEqual(sorted(index.after_redaction), ["d» x", "edac", "«r"])

    def test_the_rule_words_command_rewrites_the_stored_words(self):
        folder = tempfile.mkdtemp(prefix="cc-rule-words-")
        self.addCleanup(shutil.rmtree, folder, ignore_errors=True)
        for name in ("claude_checkpoint.py", "test_claude_checkpoint.py"):
            shutil.copy(os.path.join(HERE, name), folder)
        with open(SERVER, encoding="utf-8") as stream:
            source = stream.read()
        stale = source.replace(f'"github-token": ("{cc.RULE_WORDS["github-token"][0]}"', '"github-token": ("00000000"')
        self.assertNotEqual(stale, source)
        write(folder, "claude_checkpoint.py", stale)
        command = [sys.executable, os.path.join(folder, "test_claude_checkpoint.py"), "--rule-words"]
        proc = subprocess.run(command, capture_output=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn(b"RULE_WORDS rewritten", proc.stdout)
        with open(os.path.join(folder, "claude_checkpoint.py"), encoding="utf-8") as stream:
            self.assertEqual(stream.read(), source)
        self.assertIn(b"up to date", subprocess.run(command, capture_output=True, timeout=60).stdout)


def rules_for_words_in(text: str) -> list:
    """The indices of the rules that need no word or one text holds, and one of their other
    needed words (also), if any: those _Scan(text).rules() must give."""
    def holds(words: Any) -> bool:
        return not words or any(word in text.lower() for word in words)
    return [index for index, (_, needs, _) in enumerate(cc._rule_table()) if holds(needs) and holds(cc._rule_table.also[index])]


def rule_words_entries() -> list:
    """The lines of RULE_WORDS for the current patterns: `"name": (fingerprint, needs, starts, also),`,
    wrapped at 120 characters."""
    lines = []
    for rule in cc.redaction_rules():
        pieces = [repr(cc._pattern_fingerprint(rule.pattern))]
        for group in cc._rule_words(re.compile(rule.pattern)):  # a tuple's items, the brackets on its first and last
            items = [repr(word) for word in group] or [""]
            items[0] = "(" + items[0]
            items[-1] += ("," if len(group) == 1 else "") + ")"
            pieces += items
        line = f"    {rule.name!r}: ("
        for piece in pieces:
            if len(line) + len(piece) + 2 > 120 and line.strip():
                lines.append(line.rstrip())
                line = " " * 8
            line += piece + ", "
        lines.append(line[:-2] + "),")
    return [line.replace("'", '"') if '"' not in line else line for line in lines]


def write_rule_words() -> int:
    """python3 test_claude_checkpoint.py --rule-words: rewrite RULE_WORDS in claude_checkpoint.py
    from the current patterns (after a pattern of REDACTION_TABLE changed)."""
    with open(SERVER, encoding="utf-8") as stream:
        source = stream.read()
    start = source.index("\nRULE_WORDS = {\n") + len("\nRULE_WORDS = {\n")
    end = source.index("\n}\n", start - 1) + 1
    block = "".join(line + "\n" for line in rule_words_entries())
    if source[start:end] == block:
        print("RULE_WORDS is up to date")
        return 0
    with open(SERVER, "w", encoding="utf-8") as stream:
        stream.write(source[:start] + block + source[end:])
    print(f"RULE_WORDS rewritten in {SERVER} ({len(cc.redaction_rules())} rules)")
    return 0


def context_examples(paths: list) -> list:
    """The machine-made tokens of the corpora at paths (cc._context_tokens), each as (corpus, kind,
    case index, secret?, features, left?): secret when it is, or is part of, a value its case lists;
    left when the rules and the other readings leave it in the case's text."""
    judge, cc._redact_by_context = cc._redact_by_context, lambda original, text, count, replaced: (text, count)  # what the rest leaves, this judge aside
    try:
        examples = []
        for path in paths:
            with open(path, encoding="utf-8") as stream:
                corpus = json.load(stream)
            for kind in ("secrets", "benign"):
                for index, case in enumerate(corpus[kind]):
                    text, listed = case["text"], [value for value in case.get("secrets", ()) if len(value) >= 6]
                    tokens = cc._context_tokens(text)
                    redacted = cc.redact(text)[0] if tokens else text
                    for start, end in tokens:
                        token = text[start:end]
                        secret = any(value in token or token in value for value in listed)
                        examples.append((os.path.basename(path), kind, index, secret, frozenset(cc.context_features(text, start, end)), token in redacted))
        return examples
    finally:
        cc._redact_by_context = judge


def train_context(examples: list, words: int = 1000, epochs: int = 8, step: float = 0.1, decay: float = 1e-4) -> dict:
    """{feature: weight} of a logistic regression of secret? on features, by stochastic gradient
    descent in a fixed order: the features seen five times or more, of words only the `words`
    commonest; the tokens the rest left counted four times (the judge is for them); each weight
    held within ±_CONTEXT_WEIGHT_MOST, rounded to a quarter, a zero one left out."""
    import collections
    import math
    import random
    seen = collections.Counter(feature for example in examples for feature in example[4])
    by_word = collections.Counter()
    for feature, times in seen.items():
        if feature.startswith(_CONTEXT_WORD_KINDS):
            by_word[feature.split(":", 1)[1]] += times
    common = {word for word, _ in by_word.most_common(words)}
    kept = {feature for feature, times in seen.items() if times >= 5 and (not feature.startswith(_CONTEXT_WORD_KINDS) or feature.split(":", 1)[1] in common)}
    data = [(sorted(feature for feature in example[4] if feature in kept), 1.0 if example[3] else 0.0) for example in examples for _ in range(4 if example[5] else 1)]
    weights = collections.defaultdict(float)
    order = random.Random(1)
    for _ in range(epochs):
        order.shuffle(data)
        for features, secret in data:
            score = max(-30.0, min(30.0, sum(weights[feature] for feature in features)))
            error = 1 / (1 + math.exp(-score)) - secret
            for feature in features:
                weights[feature] = max(-_CONTEXT_WEIGHT_MOST, min(_CONTEXT_WEIGHT_MOST, weights[feature] - step * (error + decay * weights[feature])))
        step *= 0.7
    return {feature: round(weight * 4) / 4 for feature, weight in weights.items() if round(weight * 4)}


_CONTEXT_WORD_KINDS = ("before:", "above:", "after:", "name:", "mark:")
_CONTEXT_WEIGHT_MOST = 2.5  # no one feature weighs more: a word alone (`sig`) makes no secret, two signs must agree


def context_gains(weights: dict, examples: list, threshold: float) -> tuple:
    """(secret cases, benign cases) in which a token the rest left scores threshold or more."""
    gained, damaged = set(), set()
    for corpus, kind, index, secret, features, left in examples:
        if left and sum(weights.get(feature, 0.0) for feature in features) >= threshold:
            if kind == "benign":
                damaged.add((corpus, index))
            elif secret:
                gained.add((corpus, index))
    return len(gained), len(damaged)


def context_model_lines(weights: dict) -> list:
    """weights as _CONTEXT_MODEL's lines: `+2.5 before: password token`, the heaviest first, a
    feature of no kind (`hex`) under the kind `.`, each line up to 120 characters."""
    lines = []
    for weight in sorted(set(weights.values()), reverse=True):
        by_kind: dict = {}
        for feature in sorted(feature for feature, value in weights.items() if value == weight):
            kind, name = feature.split(":", 1) if ":" in feature else (".", feature)
            by_kind.setdefault(kind + ":" if kind != "." else ".", []).append(name)
        for kind, names in by_kind.items():
            line = f"{weight:+g} {kind}"
            for name in names:
                if len(line) + len(name) > 118:
                    lines.append(line)
                    line = f"{weight:+g} {kind}"
                line += " " + name
            lines.append(line)
    return lines


def write_context_model() -> int:
    """python3 test_claude_checkpoint.py --train-context: learn _CONTEXT_MODEL from the tuned corpora
    (.ci/corpus; never .ci/heldout), choose _CONTEXT_THRESHOLD by training on three quarters of the
    corpora and judging on the other quarter, four times (most secret cases gained less twice the
    benign ones damaged: a damaged text is seen in every save), and write both into claude_checkpoint.py. Takes a minute
    or two."""
    paths = sorted(glob.glob(os.path.join(CORPUS_DIR, "*_corpus.json")))
    examples = context_examples(paths)
    names = [os.path.basename(path) for path in paths]
    thresholds = [2.5 + 0.5 * step for step in range(9)]
    totals = {threshold: [0, 0] for threshold in thresholds}
    for fold in range(4):
        judged = set(names[fold::4])
        weights = train_context([example for example in examples if example[0] not in judged])
        for threshold in thresholds:
            gained, damaged = context_gains(weights, [example for example in examples if example[0] in judged], threshold)
            totals[threshold][0] += gained
            totals[threshold][1] += damaged
    for threshold, (gained, damaged) in totals.items():
        print(f"threshold {threshold}: {gained} secret cases gained, {damaged} benign ones damaged in the quarters judged")
    chosen = max(reversed(thresholds), key=lambda threshold: totals[threshold][0] - 2 * totals[threshold][1])  # (a tie: the higher, which damages less)
    weights = train_context(examples)
    lines = context_model_lines(weights)
    with open(SERVER, encoding="utf-8") as stream:
        source = stream.read()
    start = source.index('\n_CONTEXT_MODEL = r"""\n') + len('\n_CONTEXT_MODEL = r"""\n')
    end = source.index('"""\n', start)
    source = source[:start] + "\n".join(lines) + "\n" + source[end:]
    source = re.sub(r"\n_CONTEXT_THRESHOLD = [\d.]+\n", f"\n_CONTEXT_THRESHOLD = {chosen}\n", source)
    with open(SERVER, "w", encoding="utf-8") as stream:
        stream.write(source)
    print(f"_CONTEXT_MODEL rewritten in {SERVER}: {len(weights)} weights, threshold {chosen}, from {len(examples)} tokens of {len(paths)} corpora")
    return 0


class TestContextJudge(unittest.TestCase):
    """The judge of a machine's token by its context (_CONTEXT_MODEL): what it reads, what it
    weighs, and the trainer that writes it (--train-context)."""

    def test_the_model_reads_as_weights_each_within_bounds(self):
        weights = cc._context_weights()
        self.assertGreater(len(weights), 100)
        kinds = {feature.split(":", 1)[0] for feature in weights if ":" in feature}
        self.assertLessEqual(kinds, {"before", "above", "after", "name", "mark", "strength", "length"})
        for feature, weight in weights.items():
            with self.subTest(feature=feature):
                self.assertLessEqual(abs(weight), _CONTEXT_WEIGHT_MOST)
                self.assertEqual(weight * 4, round(weight * 4))
        self.assertGreater(weights["credential-word-before"], 0)
        self.assertLess(weights["hex"], 0)
        self.assertGreater(cc._CONTEXT_THRESHOLD, _CONTEXT_WEIGHT_MOST, "no one feature makes a secret")

    def test_the_lines_the_trainer_writes_read_back_as_its_weights(self):
        weights = {"bias": -0.25, "before:password": 2.5, "before:commit": -2.0, "mark:=": 0.75, "mark::": 0.75, 'mark:"': 0.5,
                   "credential-word-before": 2.0, "length:32": 0.25, "name:" + "x" * 60: 1.0, "name:" + "y" * 60: 1.0, "name:" + "z" * 60: 1.0}
        lines = context_model_lines(weights)
        self.assertTrue(all(len(line) <= 120 for line in lines), lines)
        model, cc._CONTEXT_MODEL, cc._CONTEXT_WEIGHTS = cc._CONTEXT_MODEL, "\n".join(lines), None
        try:
            self.assertEqual(cc._context_weights(), weights)
        finally:
            cc._CONTEXT_MODEL, cc._CONTEXT_WEIGHTS = model, None

    def test_features_say_the_words_name_mark_and_shape_around_a_token(self):
        text = "# staging only\nAPI_KEY = \"aB3dE5fG7hJ9kL1mN3pQ5\"  # rotate monthly"
        (start, end), = cc._context_tokens(text)
        self.assertEqual(text[start:end], "aB3dE5fG7hJ9kL1mN3pQ5")
        features = cc.context_features(text, start, end)
        self.assertLessEqual({"bias", "before:api", "before:key", "above:staging", "above:only", "after:rotate", "after:monthly", "name:api", "name:key",
                              "assigned", "strength:2", "credential-word-before", 'mark:"', "quoted", "length:16"}, features)
        self.assertNotIn("hex", features)

    def test_only_a_machine_token_is_judged(self):
        for text in ("see /srv/app/releases/20241003-1f3c5e7a/config.yml", "https://example.com/a/b7Qx9LmZ2kWp4RtN",
                     "id 3f2b8c1e-9d4a-4e7b-8c6f-1a2b3c4d5e6f", "at 2026-11-30T04:40:50.684Z", "key sk_live_****************abcd",
                     "token ghp_Xk29...Lm4q", "implementation-details-of-everything", "%7B%22a%22%3A1%7D%20and%20more"):
            with self.subTest(text=text):
                self.assertEqual(cc._context_tokens(text), [])

    def test_a_name_a_flag_gives_a_digest_column_and_a_truststore_are_not_judged(self):
        """The words around these say secret, and are wrong: the judge never weighs them."""
        truststore = "MIIBzgIBAzCCAYQGCSqGSIb3DQEHAaCCAXUEggFxMIIBbTCCAWkGCSqGSIb3DQEHAaCCAVoEggFWMIIBUjCCAU4GCyqGSIb3DQEMCgEDoIIBPTCCATkGCiqGSIb3DQEJFgGgggEpBIIBJTCCASEwgcegAwIBAgIB"
        for text in ("PS> $pw = (Get-AzKeyVaultSecret -VaultName kv-lab -Name lab360-app -AsPlainText)",
                     "$ az keyvault secret show --vault-name kv-lab --name sql-admin01 -o tsv",
                     "truststore.p12 (the partner's root CA only): " + truststore,
                     "$ fly secrets list\nNAME                 DIGEST\nLAB_SIGNING_TOKEN    4c2a9e7f1b3d5c8a0e2f4b6d8a1c3e5f7b9d0a2c"):
            with self.subTest(text=text[:40]):
                self.assertEqual(cc._context_tokens(text), [])
        self.assertEqual(len(cc._context_tokens("$ deploy --api-token Xk29fj3ks9d2Lm4q")), 1)  # (a flag that names no name is judged)

    def test_the_trainer_learns_which_words_tell(self):
        examples = [("a.json", "secrets", index, True, frozenset({"bias", "before:vaultpass", "length:24"}), index % 2 == 0) for index in range(40)]
        examples += [("a.json", "benign", index, False, frozenset({"bias", "before:buildid", "length:24"}), True) for index in range(40)]
        weights = train_context(examples, words=10)
        self.assertGreater(weights["before:vaultpass"], 1)
        self.assertLess(weights["before:buildid"], -1)
        self.assertTrue(all(abs(weight) <= _CONTEXT_WEIGHT_MOST for weight in weights.values()))
        self.assertEqual(context_gains(weights, examples, 1.0), (20, 0))


class TestRulesTriedNearTheirWords(unittest.TestCase):
    """A rule whose matches start a few characters before a secret-ish name is tried only in the
    windows around the secret-ish words (_secretish_windows): it must find exactly what a scan
    of the whole text finds."""

    def test_finds_what_a_full_scan_finds(self):
        texts = [marked_secrets(example)[0] for _, _, example in redaction_examples()] + [
            "x" * 90 + "password=Xk29mPq7zLw4Rt8VbN3c " * 3, "a_b_c_d_e_f_g_h_i_j_k_l_m_n_o_p_q_r_s_t_u_v_w_x_y_z_" * 4 + "token: 'v9Zq'",
            "--" + "k" * 79 + "ey=1 --" + "x" * 81 + "key=2", '\\"api_key\\": \\"Zq8Lm2Xr5Kp9Tw3V\\"', "passpass" * 200 + "=x",
            "DB_PAſSWORD=Xk29mPq7zLw4Rt8VbN3c", "db_pın: Xk29mPq7zLw4Rt8VbN3c", "ÉTÉ_API_KEY=Xk29mPq7zLw4Rt8VbN3c",
            "clé_été_api_" + "é" * 60 + "token=Xk29mPq7zLw4Rt8VbN3c", "x = 1; mot_de_passe_prod_pass=Xk29mPq7zLw4Rt8VbN3c"]
        table = cc._rule_table()
        rules = [(index, rule, pattern) for index, ((rule, _, _), (pattern, head)) in enumerate(zip(table, map(cc._compiled_rule, range(len(table))))) if head]
        self.assertTrue(rules)
        self.assert_scan_finds_what_finditer_finds(texts, rules)

    def assert_scan_finds_what_finditer_finds(self, texts: list, rules: list) -> None:
        """Each (index, rule, pattern) tried the engine's way (_Scan) matches where a whole-text scan does."""
        for text in texts:
            scan = cc._Scan(text)
            for index, rule, pattern in rules:
                with self.subTest(rule=rule.name, text=text[:40]):
                    self.assertEqual([m.span() for m in scan.matches(index)], [m.span() for m in pattern.finditer(text)])

    @slow  # every rule with start words over every example: --quick has the cheaper check above
    def test_rules_tried_at_their_start_words_find_what_a_full_scan_finds(self):
        texts = [marked_secrets(example)[0] for _, _, example in redaction_examples()] + [
            "token: x1 and ſecret: Xk29mPq7zLw4Rt8VbN3c", "PIN 1, PıN: 0844", "κωδικόσ: Xk29mPq7zLw4Rt8VbN3c, token",
            "ΚΩΔΙΚΌΣX Xk29mPq7zLw4Rt8VbN3c, token", "пар\u1c82ль: Xk29mPq7zLw4Rt8VbN3c, token", "Kelvin \u212aey: Xk29mPq7zLw4Rt8VbN3c"]
        table = cc._rule_table()
        rules = [(index, rule, cc._compiled_rule(index)[0]) for index, (rule, _, starts) in enumerate(table) if starts]
        self.assertIn("context-credential-word", [rule.name for _, rule, _ in rules])
        self.assert_scan_finds_what_finditer_finds(texts, rules)

    def test_the_cheap_look_for_password_words_sees_every_ascii_one(self):
        # "password in a sentence" runs only where _may_hold_a_word finds one of _PASSWORD_WORDS_SEEN:
        # each word of _PASSWORD_WORDS an ASCII text can hold must hold one of them.
        for word in ("password", "Passwort", "passwd", "passphrase", "pass word", "pw", "pwd", "Kennwort", "contrasena", "senha",
                     "wachtwoord", "losenord", "haslo", "heslo", "parola", "passord", "adgangskode", "kodeord", "koden", "sifresi", "kata sandi"):
            with self.subTest(word=word):
                self.assertIsNotNone(cc._regex(cc._PASSWORD_WORDS).search(word))
                self.assertTrue(cc._may_hold_a_word(word, cc._PASSWORD_WORDS_SEEN))
        self.assertFalse(cc._may_hold_a_word("the build is green, ship it!", cc._PASSWORD_WORDS_SEEN))

    def test_few_rules_read_every_text_whole(self):
        # A rule with neither start words nor a head reads the whole of each text that holds its
        # words: an alternative whose start _rule_words cannot see (a class `[前后]`, an optional
        # first letter `و?رمز`, a two-letter word) turns a rule tried at a few places into one that
        # costs every save (context-split-secret cost 40 ms of a 64 KB save so). The table's note
        # says how to keep a start; raise this bound only for a rule that cannot have one.
        table = cc._rule_table()
        whole = [rule.name for index, (rule, _, starts) in enumerate(table) if not starts and cc._compiled_rule(index)[1] is None]
        self.assertLessEqual(len(whole), 108, whole)  # (104: cookie-with-attributes, whose name is any word; 105: short-flag-random-value, whose flag is one letter;
        # 106: context-literal-rows, whose header may name its credential in any of its items; 107: login-at-host, which starts at a colon;
        # 108: context-unprompted-output, anchored at a text's start by `\A`, which re tries at that one place)
        for name in ("context-split-secret", "code-for-a-place", "context-credential-word", "tls-key-log-secret"):
            self.assertNotIn(name, whole)

    def test_rules_that_start_a_line_find_what_a_full_scan_finds(self):
        # A line head is tried only at the starts of the lines that a window around a secret-ish
        # word reaches into (_Scan.lines_in_windows): long indents, `export`, `- `, the first and
        # the last line, windows across lines, CRLF, names longer than the windows reach.
        value = "Xk29mPq7zLw4Rt8VbN3c"
        texts = [marked_secrets(example)[0] for _, _, example in redaction_examples()] + [
            f"api_key: {value}", "x\n" + " " * 200 + f"API_TOKEN={value}", "export " + "\t" * 50 + f"DB_PASSWORD={value}\n",
            f"steps:\n  - name: x\n    secret_key: {value}\n  - token: {value}", f"token\nDB_PASS={value}", f"token\r\nSECRET_KEY={value}\r\n",
            "a" * 90 + f"_key={value}\n" + "b" * 79 + f"_key={value}", "my_" * 30 + f"token: {value}", f'val apiKey = "{value}"\n',
            f"const SECRET = `{value}`", f"DB_PAſSWORD={value}\nx", f"db_pın: {value}", f"foo: 1\nbar = token\nkey: {value}\n",
            f"key\n\n\nkey\n- {value}\n" * 3, f"\n\nPASSWORD = '{value}' # token", "".join(f"\n{' ' * 30}API_KEY_{n}={value}" for n in range(3))]
        table = cc._rule_table()
        rules = [(index, rule, cc._compiled_rule(index)[0]) for index, (rule, _, _) in enumerate(table) if rule.head.startswith(cc._LINE_START)]
        self.assertIn("config-line-value", [rule.name for _, rule, _ in rules])
        self.assert_scan_finds_what_finditer_finds(texts, rules)

    def test_a_line_head_is_only_one_whose_name_cannot_leave_the_line(self):
        for pattern, line_head in ((r"(?m)^[ \t]*(?:export[ \t]+|-[ \t]+)?{SECRETISH_NAME}=", True),
                                   (r"(?m)^(?P<indent>[ \t]*)[\"']?{SECRETISH_NAME}:", True), (r"(?m)^\s*{SECRETISH_NAME}=", False),
                                   (r"(?m)^[^=]*{SECRETISH_NAME}=", False), (r"(?m)^.*{SECRETISH_NAME}=", False),
                                   (r"(?m)^x\n{SECRETISH_NAME}=", False), (r"(?m)^(?:a|[\n])?{SECRETISH_NAME}=", False)):
            with self.subTest(pattern=pattern):
                self.assertEqual(cc._pattern_head(pattern).startswith(cc._LINE_START), line_head)

    def test_re_folds_holds_every_character_that_ignorecase_reads_as_another_letter_of_a_start_word(self):
        # _Scan looks for start words in text.lower(): a character that (?i) matches to a letter
        # other than its lowercase would hide a match there, unless _RE_FOLDS sends its text to a full scan.
        others = (word for also in cc._rule_table.also for word in also)  # the other needed words (rules())
        needed = (word for _, needs, _ in cc._rule_table() for word in needs)  # the words that decide which rules run
        letters = sorted(set("".join(word for _, _, starts in cc._rule_table() for word in starts) + "".join(others)
                             + "".join(needed)))
        any_letter = re.compile("(?i)[" + re.escape("".join(letters)) + "]")
        each_letter = [(letter, re.compile("(?i)" + re.escape(letter))) for letter in letters]
        for character in map(chr, range(0x110000)):
            if any_letter.fullmatch(character) and len(character.lower()) == 1 and character not in cc._RE_FOLDS:
                for letter, pattern in each_letter:
                    if pattern.fullmatch(character):
                        self.assertEqual(character.lower(), letter, f"add {character!r} to _RE_FOLDS")

    def test_a_word_written_with_a_folding_character_still_decides_the_rules_that_run(self):
        # (?i) reads ſ as s: PAſSWORD= is the name the rules see, though str.lower() keeps the ſ
        # and the text holds no "password" for _words_in. Such a text runs every rule.
        for text in ("PAſSWORD=Xk29mPq7zLw4Rt8VbN3c", "paſſword: Xk29mPq7zLw4Rt8VbN3c", "İd PAſSWORD=Xk29mPq7zLw4Rt8VbN3c"):
            with self.subTest(text=text):
                self.assertNotIn("Xk29mPq7zLw4Rt8VbN3c", cc.redact(text)[0])
                self.assertIsNotNone(cc.find_secret(text))

    def test_the_windows_know_every_character_a_secretish_name_holds(self):
        # _secretish_windows starts a window where the run of _NAME_CHARACTERS before a word
        # starts: a character the names may hold and it does not know would cut a window short.
        for block in (cc._SECRETISH_NAME, cc._SECRETISH_IDENTIFIER):
            name_class = re.compile(re.search(r"\(\?=(\[[^\]]+\])\{0,", block).group(1))
            for character in map(chr, range(128)):
                if name_class.fullmatch(character):
                    with self.subTest(block=block[:30], character=character):
                        self.assertIn(character.lower(), cc._NAME_CHARACTERS)


class TestEncryptedValues(unittest.TestCase):
    """Values encrypted at rest are safe to share by design: SOPS values, Ansible Vault bodies and a
    SealedSecret's encryptedData are kept whole, and a secret beside them is still caught."""

    SOPS = "password: ENC[AES256_GCM,data:MwHiiOtKPaaSZFgROtv1dPFz,iv:aJNk2UiGinHhCOQmkdkQLf9CD3zxJ89++jMPxLYuxAY=,tag:Pfoq==,type:str]"
    VAULT = ("$ cat group_vars/prod/vault.yml\n$ANSIBLE_VAULT;1.1;AES256\n"
             "ac53f82f137230eb081e224df2b0c9aea0664eefa99171bc77157fc9bba2b65e522f33bbed2aa904\n"
             "68ec123324a7c91594e09f26203de021667dbaead2e628fb15ad073d07a2f93765c9e4aa462882ea\n")
    SEALED = "kind: SealedSecret\nspec:\n  encryptedData:\n    password: AgBOaDc5kLm2Xp9Rt7Vw4YbN6cQ8zF3\n"

    def test_encrypted_values_are_kept_and_found_clean(self):
        for text in (self.SOPS, self.VAULT, self.SEALED):
            with self.subTest(text=text[:40]):
                self.assertEqual(cc.redact(text), (text, 0))
                self.assertIsNone(cc.find_secret(text))

    def test_a_secret_beside_them_is_still_caught(self):
        for text in (self.SOPS + "\nadmin password: Hunter2Xy9!kk", self.VAULT + "$ echo ok\ndb_password=Zx8pQ2rT5vLm9WkN\n",
                     self.SEALED + "---\nkind: Secret\nstringData:\n  password: Hunter2Xy9!kk\n"):
            with self.subTest(text=text[:40]):
                redacted, count = cc.redact(text)
                self.assertEqual(count, 1, redacted)
                self.assertNotIn("Hunter2Xy9!kk", redacted)
                self.assertNotIn("Zx8pQ2rT5vLm9WkN", redacted)
                self.assertIsNotNone(cc.find_secret(text))


class TestFindSecret(unittest.TestCase):
    """find_secret: what a push asks of a file (SPEC section 13), the same verdict as redact()."""

    def test_names_the_rule_that_finds_a_secret(self):
        self.assertEqual(cc.find_secret(f"export GITHUB_TOKEN={GHP}"), "github-token")
        self.assertEqual(cc.find_secret("Das neue Passwort für den Build-Server lautet Zx8pQ2rT5vLm9WkN."),
                         cc.find_secret("Das neue Passwort für den Build-Server lautet Zx8pQ2rT5vLm9WkN."))
        self.assertIsNotNone(cc.find_secret("Das neue Passwort für den Build-Server lautet Zx8pQ2rT5vLm9WkN."))

    def test_finds_nothing_where_redact_changes_nothing(self):
        for text in ("", "echo $GITHUB_TOKEN", "MAX_TOKENS=4096", "STRIPE_SECRET_KEY=sk_test_xxxxxxxxxxxxxxxxxxxxxxxx",
                     "DB_PASSWORD=op://Production/postgres-main/password", f"already {cc.REDACTED} here"):
            with self.subTest(text=text):
                self.assertIsNone(cc.find_secret(text))

    def test_finds_what_only_a_second_reading_finds(self):
        """A push holds back what a checkpoint would redact: the rules alone miss each of these."""
        decoded = base64.b64encode(b"ml-ci:Vq7#Rk2pLx9Zt4Nw").decode()
        readings = {
            "lines without their prefixes": "● Read(/etc/redis/redis.conf)\n  ⎿  Read 3 lines\n     1→bind 127.0.0.1\n"
                                            "     2→port 6379\n     3→requirepass Tg7vQ2xLp9RkW4mZ\n",
            "text as written": "Hi Jonas, der neue WireGuard-Zugang für das Lager steht. Dein privater Schlüssel ist\n"
                               "W6njWLaf2mqmw8xQp3RtZk7vYb1NcJd5Hs9GeU4aLo0=\nBitte nicht weitergeben.",
            "strings folded": 'P1="ghp_sqIK92W6kFaqiF5jH7"\nP2="BuoZKXQNSlM1LkDG0aZ3"\n'
                              'git clone "https://x-access-token:${P1}${P2}@github.com/acme/infra.git"\n',
            "base64 decoded": f"echo '{decoded}' | base64 -d > ~/.ci-auth\n",
        }
        for name, text in readings.items():
            with self.subTest(reading=name):
                self.assertEqual(cc.find_secret(text), name)
                self.assertGreater(cc.redact(text)[1], 0)

    def test_agrees_with_redact_on_every_example(self):
        for name, kind, example in redaction_examples():
            text = marked_secrets(example)[0] if kind == "catch" else example
            with self.subTest(rule=name, example=example[:60]):
                self.assertEqual(cc.find_secret(text) is not None, cc.redact(text)[1] > 0)


# ── 5.2 Each rule's catch and keep examples ──

EXAMPLE_LINE = re.compile(r"#[ \t]+(catch|keep):[ \t]*(.*)$")
EXAMPLE_ESCAPES = {"\\n": "\n", "\\t": "\t", "\\\\n": "\\n", "\\\\t": "\\t", "\\\\\\n": "\\\n"}


def redaction_examples() -> list:
    """(rule name, "catch" or "keep", text) for each `#   catch:` and `#   keep:` line under a
    rule of REDACTION_TABLE. In an example, \\n is a newline, \\t a tab, \\\\n a backslash and an n,
    \\\\\\n a backslash and a newline (a line continuation; any other backslash is itself), and in
    a catch example «…» marks each secret."""
    examples, rule = [], None
    for number, line in enumerate(cc.REDACTION_TABLE.splitlines(), 1):
        if line.strip() and not line.startswith("#"):
            rule = line.split(None, 1)[0]
            continue
        found = EXAMPLE_LINE.match(line)
        if found is None:
            if re.match(r"#\s*(?:catch|keep)\b", line):
                raise AssertionError(f"REDACTION_TABLE line {number}: write `#   catch: TEXT` or `#   keep: TEXT`")
            continue
        if rule is None:
            raise AssertionError(f"REDACTION_TABLE line {number}: an example above the first rule")
        text = re.sub(r"\\\\\\n|\\\\[nt]|\\[nt]", lambda m: EXAMPLE_ESCAPES[m.group()], found.group(2))
        examples.append((rule, found.group(1), text))
    return examples


def marked_secrets(example: str) -> tuple:
    """A catch example's (text, secrets): the text without its «» marks and the marked values."""
    secrets = re.findall(r"«([^«»]+)»", example)
    return example.replace("«", "").replace("»", ""), secrets


def redacted_forms(example: str) -> set:
    """The example with each non-empty subset of its marked secrets replaced: what one rule
    alone may leave (another rule may catch the rest)."""
    marks = list(re.finditer(r"«[^«»]+»", example))
    forms = set()
    for subset in range(1, 2 ** len(marks)):
        pieces, position = [], 0
        for index, mark in enumerate(marks):
            pieces.append(example[position:mark.start()].replace("«", "").replace("»", ""))
            pieces.append(cc.REDACTED if subset >> index & 1 else mark.group()[1:-1])
            position = mark.end()
        pieces.append(example[position:].replace("«", "").replace("»", ""))
        forms.add("".join(pieces))
    return forms


class TestRedactionRuleExamples(unittest.TestCase):
    """Every rule shows beside it, in REDACTION_TABLE, a text it must catch and one it must keep."""

    def setUp(self):
        self.examples = redaction_examples()
        self.patterns = {rule.name: (rule, pattern) for rule, pattern in cc._compiled_rules()}

    def test_rule_names_are_unique(self):
        names = [rule.name for rule in cc.redaction_rules()]
        self.assertEqual(sorted(name for name in set(names) if names.count(name) > 1), [],
                         "two rules share a name: their examples and RULE_WORDS would mix")

    def test_every_rule_has_a_catch_and_a_keep_example(self):
        for name in self.patterns:
            kinds = {kind for rule, kind, _ in self.examples if rule == name}
            with self.subTest(rule=name):
                self.assertEqual(kinds, {"catch", "keep"}, f"rule {name} needs a `#   catch:` and a `#   keep:` line")

    def test_each_catch_example_is_caught_by_its_rule_and_by_redact(self):
        for name, kind, example in self.examples:
            if kind != "catch":
                continue
            text, secrets = marked_secrets(example)
            with self.subTest(rule=name, example=example[:60]):
                self.assertTrue(secrets, f"rule {name}: catch example {example!r} marks no secret with «»")
                rule, pattern = self.patterns[name]
                alone = cc._apply_rule(rule, pattern, text)[0]
                self.assertIn(alone, redacted_forms(example),
                              f"rule {name} alone does not replace just the marked secret of {example!r}: {alone!r}")
                expected = re.sub(r"«[^«»]+»", cc.REDACTED, example)
                self.assertEqual(cc.redact(text)[0], expected, f"rule {name}: redact() on catch example {example!r}")

    def test_each_keep_example_is_kept_by_redact(self):
        for name, kind, text in self.examples:
            if kind != "keep":
                continue
            with self.subTest(rule=name, example=text[:60]):
                redacted, hits = cc.redact(text)
                if hits or redacted != text:
                    culprits = [rule.name for rule, pattern in self.patterns.values() if cc._apply_rule(rule, pattern, text)[1]]
                    self.fail(f"rule {name}: keep example {text!r} became {redacted!r} (changed by {', '.join(culprits)})")

    @on_every_core
    def test_each_rule_stays_linear_on_its_examples_run_long(self):
        """Each rule's pattern on its own examples made long: an example repeated, and an example's start
        up to each `=`, `:`, bracket or quote followed by a long run of blanks (`\\t  `), of one unbroken
        token, of quoted words, of doubled quotes. A pattern that reads the same blanks or the same token
        in many ways (`[ \\t]*,?[ \\t]*`, items of 6 characters or more with nothing between them, `''` an
        escape or two strings) backtracks for minutes on a kilobyte: a save once hung on a list of names
        under `credentials = {` followed by a long URL. No timing assertion: run in a process of its own,
        a pattern that does not end fails by the timeout."""
        code = textwrap.dedent("""
            import sys
            sys.path.insert(0, sys.argv[1])
            import claude_checkpoint as cc, test_claude_checkpoint as t
            share, count = int(sys.argv[2]), int(sys.argv[3])
            patterns = {rule.name: pattern for rule, pattern in cc._compiled_rules()}
            bodies = ("\\t  " * 400, "Ab1/x.Yz9-" * 120, "'a' " * 300, "''" * 600)
            for name, kind, example in t.redaction_examples()[share::count]:
                text = t.marked_secrets(example)[0] if kind == "catch" else example
                heads = [text[:end + 1] for end, character in enumerate(text) if character in "=:[({\\"'"][:6]
                runs = [text + (between + text) * (1200 // (len(text) + 1)) for between in ("", "\\t  ")]
                for run in runs + [head + body for head in heads for body in bodies]:
                    for cut in (run, run[:-1]):  # also without its last character: no closing bracket
                        for _ in patterns[name].finditer(cut):
                            pass
            print("ended")
            """)
        outputs = outputs_in_processes(self, code, 600, "reading the rules' examples made long (a pattern that backtracks?)")
        self.assertEqual({"ended"}, {output.strip() for output in outputs})

    @on_every_core
    def test_redaction_stays_linear_on_examples_run_long(self):
        """The whole of redaction, its readings too, on a quarter of the examples' starts (up to each `=`,
        `:`, bracket, quote or line's end) followed by a long run of blanks, of one token, of one-letter
        lines, of blanks and then a literal. A reading's pattern that reads the same blanks in many ways took minutes on a few kilobytes:
        blanks after a key's first line (a chat's prefix read them three ways), after a backup card's
        numbered words (a mnemonic's gap read them two ways). Run in a process of its own, with a timeout."""
        code = textwrap.dedent("""
            import sys
            sys.path.insert(0, sys.argv[1])
            import claude_checkpoint as cc, test_claude_checkpoint as t
            share, count = int(sys.argv[2]), int(sys.argv[3])
            for name, kind, example in t.redaction_examples()[::4][share::count]:
                text = t.marked_secrets(example)[0] if kind == "catch" else example
                heads = [text[:end + 1] for end, character in enumerate(text) if character in "=:[({\\"'\\n"][:4]
                for head in heads:
                    for body in ("\\t  " * 500, "\\t  " * 500 + "'Ab1_x9' x", "Ab1/x.Yz9-" * 150, "a\\n" * 750):
                        cc.redact(head + body)
            print("ended")
            """)
        outputs = outputs_in_processes(self, code, 600, "redaction of the examples' starts made long (a reading that backtracks?)")
        self.assertEqual({"ended"}, {output.strip() for output in outputs})


# ── 5.3 Real code holds no secret ──

class TestRedactionKeepsRealCode(unittest.TestCase):
    """Agents read code all day, and a push holds back a file the rules flag: the standard library
    of the Python that runs these tests (about 170 modules, 5 MB of code that talks about passwords,
    tokens, keys and authentication, with no secret in it) must come through whole."""

    @on_every_core
    def test_no_module_of_the_standard_library_is_flagged(self):
        self.assertGreater(len(glob.glob(os.path.join(os.path.dirname(os.__file__), "*.py"))), 100)
        code = textwrap.dedent("""
            import glob, json, os, sys
            sys.path.insert(0, sys.argv[1])
            import claude_checkpoint as cc
            share, count = int(sys.argv[2]), int(sys.argv[3])
            flagged = []
            for path in sorted(glob.glob(os.path.join(os.path.dirname(os.__file__), "*.py")))[share::count]:
                with open(path, encoding="utf-8", errors="replace") as stream:
                    rule = cc.find_secret(stream.read())
                if rule:
                    flagged.append(f"{os.path.basename(path)} ({rule})")
            print(json.dumps(flagged))
            """)
        flagged = [module for output in outputs_in_processes(self, code, 600, "reading the standard library")
                   for module in json.loads(output)]
        self.assertEqual(flagged, [], "modules of the standard library taken for secrets")


# ════════════════════════════════════════════════════════════════════════════
# 6. Core: the merge table, the size cap, drift, transcripts, snapshot plans (SPEC sections 3, 4 and 10)
# ════════════════════════════════════════════════════════════════════════════
# Pure functions first, then their end-to-end siblings. Sub-sections are numbered like the
# product's: 6.1 (blob hashing) is checked in 8, 6.2 (paths) in 10.

# ── 6.3 Assembling a checkpoint: the merge table and the size cap (SPEC section 3) ──
# The size cap end to end is in TestE2eSaveAnswer (11.2).

def replace_cp(cp: cc.Checkpoint, **changes) -> cc.Checkpoint:
    return cc.replace(cp, **changes)


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
        git_entries = [("a.py", "M"), ("b.py", "??")]
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
        git_entries = [(f"g{i:03}", "M") for i in range(150)]
        notes = [cc.FileNote("g149", "important"), cc.FileNote("agent-only")]
        selection = cc.select_files(git_entries, notes, [], limit=100)
        paths = [e.path for e in selection.entries]
        self.assertEqual(len(paths), 100)
        self.assertEqual(selection.omitted, 51)
        self.assertIn("g149", paths)
        self.assertIn("agent-only", paths)
        self.assertEqual(paths[:3], ["g000", "g001", "g002"], "order stays git's")


class TestE2eSaveModes(unittest.TestCase):
    def setUp(self):
        self.ws = Workspace(self)
        self.server = start_server(self, self.ws)

    def test_merge_updates_tasks_by_description_and_keeps_what_is_not_resent(self):
        save_ok(self.server, **sample_save())
        first = self.ws.checkpoint()
        result = save_ok(self.server, goal="New goal", mode="merge",
                         tasks=[{"description": "Session cookie persistence", "status": "done"},
                                {"description": "Logout tests", "status": "blocked"}],
                         decisions=["Use iron-session, not express-session", "Keep SameSite lax"],
                         recentCommands=[{"command": "npm test -- auth", "exitCode": 0, "note": "all green"}])
        cp = self.ws.checkpoint()
        self.assertEqual(result["structuredContent"]["mode"], "merge")
        self.assertEqual(cp["goal"]["primary"], "New goal")
        self.assertEqual([(t["description"], t["status"]) for t in cp["goal"]["tasks"]],
                         [("OAuth callback route", "done"), ("Session cookie persistence", "done"),
                          ("Logout endpoint", "pending"), ("Logout tests", "blocked")])
        self.assertEqual(cp["summary"], first["summary"])
        self.assertEqual(cp["nextSteps"], first["nextSteps"])
        self.assertEqual(cp["decisions"], ["Use iron-session, not express-session", "Keep SameSite lax"])
        self.assertEqual([c["command"] for c in cp["recentCommands"]],
                         [c["command"] for c in first["recentCommands"]] + ["npm test -- auth"])
        self.assertEqual((cp["id"], cp["createdAt"]), (first["id"], first["createdAt"]))

    def test_merge_replaces_summary_and_next_steps_when_given(self):
        save_ok(self.server, **sample_save())
        save_ok(self.server, goal="g", mode="merge", summary="new summary", nextSteps=["only step"])
        cp = self.ws.checkpoint()
        self.assertEqual((cp["summary"], cp["nextSteps"]), ("new summary", ["only step"]))

    def test_replace_sets_every_field_and_starts_a_new_checkpoint(self):
        save_ok(self.server, **sample_save())
        first = self.ws.checkpoint()
        time.sleep(0.01)
        save_ok(self.server, goal="Fresh start")
        cp = self.ws.checkpoint()
        self.assertEqual(cp["goal"]["primary"], "Fresh start")
        self.assertEqual(cp["goal"]["tasks"], [])
        self.assertFalse(cp.get("summary"))
        self.assertEqual((cp["nextSteps"], cp["decisions"], cp["recentCommands"]), ([], [], []))
        self.assertNotEqual(cp["id"], first["id"])
        self.assertEqual(cp["createdAt"], cp["updatedAt"])

    def test_merge_appends_commands_and_drops_the_oldest_past_50(self):
        save_ok(self.server, goal="g", recentCommands=[{"command": f"echo c{i}"} for i in range(30)])
        result = save_ok(self.server, goal="g", mode="merge",
                         recentCommands=[{"command": f"echo c{i}"} for i in range(30, 60)])
        cp = self.ws.checkpoint()
        self.assertEqual([c["command"] for c in cp["recentCommands"]], [f"echo c{i}" for i in range(10, 60)])
        self.assertIs(cp["meta"]["truncated"], True)
        self.assertTrue(warnings_besides_git_ignore(result), result)

    def test_merge_appends_decisions_deduplicated_and_drops_the_oldest_past_20(self):
        save_ok(self.server, goal="g", decisions=[f"d{i}" for i in range(15)])
        save_ok(self.server, goal="g", mode="merge", decisions=[f"d{i}" for i in range(15, 25)])
        decisions = self.ws.checkpoint()["decisions"]
        self.assertEqual(len(decisions), 20)
        self.assertEqual(len(set(decisions)), 20)
        self.assertEqual(decisions[-10:], [f"d{i}" for i in range(15, 25)])
        self.assertNotIn("d1", decisions)
        self.assertIs(self.ws.checkpoint()["meta"]["truncated"], True)

    def test_merge_onto_a_missing_or_corrupt_file_acts_as_replace_with_a_warning(self):
        for state in ("missing", "corrupt"):
            with self.subTest(state=state):
                for name in checkpoint_names(self.ws.repo):
                    os.remove(os.path.join(self.ws.repo, name))
                if state == "corrupt":
                    self.ws.write(CHECKPOINT, "{ this is not json")
                result = save_ok(self.server, goal="merged onto nothing", mode="merge",
                                 tasks=[{"description": "only", "status": "pending"}])
                cp = self.ws.checkpoint()
                self.assertEqual(cp["goal"]["primary"], "merged onto nothing")
                self.assertEqual(len(cp["goal"]["tasks"]), 1)
                warnings = " ".join(result["structuredContent"]["warnings"]).lower()
                self.assertIn("replace", warnings)


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


# ── 6.4 Drift: what changed since the checkpoint (SPEC section 4) ──
# TestExactDrift calls the command-line helpers of 11.1 (cli, ok, ok_json); a commit of an
# unchanged file is also no news in TestRewindEdges (11.1).

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


class TestE2eDrift(unittest.TestCase):
    def setUp(self):
        self.ws = Workspace(self)
        self.ws.write("src/app.py", "print('work in progress')\n")
        self.ws.write("notes.txt", "untracked notes\n")
        self.server = start_server(self, self.ws)
        save_ok(self.server, goal="drift", modifiedFiles=[{"path": "src/app.py", "note": "wip"}])
        self.saved_head = self.ws.head()

    def drift(self) -> dict:
        return load_full(self.server)["drift"]

    def test_nothing_changed_reports_no_drift(self):
        drift = self.drift()
        self.assertEqual((drift["branchChanged"], drift["commitsSince"], drift["changedSince"], drift["newSince"]),
                         (False, 0, [], []))

    def test_new_commit_is_counted(self):
        self.ws.write("other.txt", "other\n")
        self.ws.git("add", "other.txt")
        self.ws.git("commit", "-qm", "other")
        self.assertEqual(self.drift()["commitsSince"], 1)
        self.assertIn("1 new commit(s) on HEAD", self.server.load())

    def test_branch_change_is_reported(self):
        self.ws.git("checkout", "-qb", "feature")
        drift = self.drift()
        self.assertEqual((drift["branchChanged"], drift["currentBranch"]), (True, "feature"))

    def test_edited_saved_file_is_flagged(self):
        self.ws.write("src/app.py", "print('edited after the save')\n")
        self.assertEqual(self.drift()["changedSince"], ["src/app.py"])
        since = self.server.load().split("## Since this checkpoint", 1)[1]
        self.assertIn("`src/app.py`", since)

    def test_file_committed_unchanged_is_not_flagged(self):
        self.ws.git("add", "src/app.py", "notes.txt")
        self.ws.git("commit", "-qm", "commit as saved")
        drift = self.drift()
        self.assertEqual((drift["commitsSince"], drift["changedSince"]), (1, []))

    def test_deleted_saved_file_is_flagged(self):
        os.remove(os.path.join(self.ws.repo, "notes.txt"))
        self.assertIn("notes.txt", self.drift()["changedSince"])

    def test_file_created_after_the_save_is_new_since(self):
        self.ws.write("fresh.txt", "new\n")
        drift = self.drift()
        self.assertEqual(drift["newSince"], ["fresh.txt"])
        self.assertNotIn("fresh.txt", drift["changedSince"])
        self.assertIn("fresh.txt", self.server.load())

    def test_saved_commit_no_longer_reachable_after_reset_or_amend(self):
        for how in ("reset", "amend"):
            with self.subTest(how=how):
                ws = Workspace(self, files={"a.txt": "a\n"})
                ws.write("b.txt", "b\n")
                ws.git("add", "b.txt")
                ws.git("commit", "-qm", "second")
                ws.write("a.txt", "dirty\n")
                server = start_server(self, ws)
                save_ok(server, goal="before history rewrite")
                saved = ws.head()
                if how == "reset":
                    ws.git("reset", "-q", "--hard", "HEAD~1")
                else:
                    ws.git("commit", "-q", "--amend", "-m", "amended")
                brief = server.load()
                found = re.search(r"Saved commit ([0-9a-f]{7,40}) is no longer reachable", brief)
                self.assertIsNotNone(found, brief)
                self.assertTrue(saved.startswith(found.group(1)))
                self.assertIn("a.txt", load_full(server)["drift"]["changedSince"])  # treated as needing a re-read

    def test_no_drift_section_outside_a_repository_or_without_a_saved_head(self):
        for name, options in [("not a repository", {"init": False}), ("no commits yet", {"commit": False})]:
            with self.subTest(name):
                ws = Workspace(self, **options)
                server = start_server(self, ws)
                save_ok(server, goal=name)
                ws.write("later.txt", "written after the save\n")
                self.assertNotIn("## Since this checkpoint", server.load())
                self.assertFalse(load_full(server)["drift"])


class TestExactDrift(unittest.TestCase):
    """With a snapshot, load compares every file, not only the 100 recorded ones."""

    @slow
    def test_300_dirty_files_are_no_news_until_one_of_them_changes(self):
        files = {f"f{number:03d}.txt": f"original {number}\n" for number in range(300)}
        files["README.md"] = "# demo\n"
        ws = Workspace(self, files=files)
        for number in range(300):
            ws.write(f"f{number:03d}.txt", f"dirty {number}\n")
        ok(self, cli(ws, "save", "--goal", "many dirty files"))
        self.assertTrue(ws.checkpoint().get("snapshot"), "the save recorded a snapshot")
        drift = ok_json(self, cli(ws, "show", "--full"))["drift"]
        news = set(drift["newSince"]) | set(drift["changedSince"])
        self.assertEqual(sorted(p for p in news if p.startswith("f")), [], "dirty at save time and unchanged")
        recorded = {entry["path"] for entry in ws.checkpoint()["modifiedFiles"]}
        unrecorded = sorted(set(files) - recorded - {"README.md"})
        self.assertTrue(unrecorded, "the checkpoint records at most 100 files")
        target = unrecorded[len(unrecorded) // 2]
        ws.write(target, "changed after the save\n")
        ws.write("README.md", "also changed\n")
        drift = ok_json(self, cli(ws, "show", "--full"))["drift"]
        news = set(drift["newSince"]) | set(drift["changedSince"])
        self.assertIn(target, news)
        self.assertIn("README.md", news)
        self.assertEqual(sorted(p for p in news if p.startswith("f") and p != target), [])
        server = start_server(self, ws)
        drift = load_full(server)["drift"]
        self.assertIn(target, set(drift["newSince"]) | set(drift["changedSince"]))


class TestBriefTellsTheTruth(unittest.TestCase):
    """Every line of the brief is true when it is printed (SPEC sections 4 and 10)."""

    def brief(self, ws: Workspace) -> str:
        return cli(ws, "show").stdout.decode()

    def test_a_deleted_file_is_reported_as_deleted_not_changed(self):
        ws = Workspace(self, files={"README.md": "# demo\n", "a.txt": "a\n", "b.txt": "b\n"})
        ws.write("a.txt", "a edited\n")
        ok(self, cli(ws, "save", "--goal", "deletions"))
        os.remove(os.path.join(ws.repo, "a.txt"))  # recorded, then deleted
        os.remove(os.path.join(ws.repo, "b.txt"))  # not recorded, deleted after the save
        brief = self.brief(ws)
        deleted = next((line for line in brief.splitlines() if "eleted" in line), "")
        self.assertIn("`a.txt`", deleted, brief)
        self.assertIn("`b.txt`", deleted, brief)
        for line in brief.splitlines():
            if "Changed" in line:
                self.assertNotIn("a.txt", line, brief)
                self.assertNotIn("b.txt", line, brief)
        drift = ok_json(self, cli(ws, "show", "--json"))["drift"]
        self.assertIn("a.txt", drift["changedSince"], "the JSON keeps SPEC's meaning: changed or gone")

    def test_a_deleted_untracked_file_is_not_listed_as_untracked_after_a_merge_save(self):
        ws = Workspace(self)
        ws.write("new.txt", "new\n")
        ok(self, cli(ws, "save", "--goal", "untracked then deleted"))
        self.assertIn("new.txt (??)", self.brief(ws))
        os.remove(os.path.join(ws.repo, "new.txt"))
        ok(self, cli(ws, "save", "--merge", "--summary", "removed it"))
        brief = self.brief(ws)
        self.assertNotIn("new.txt (??)", brief)
        self.assertIn("new.txt (D)", brief)
        self.assertIn("Nothing changed", brief)

    def test_a_committed_clean_file_is_not_labelled_new_and_dirty(self):
        ws = Workspace(self)
        ws.write("new.txt", "new\n")
        ok(self, cli(ws, "save", "--goal", "commit it later"))
        ws.git("add", "new.txt")
        ws.git("commit", "-qm", "add new.txt")
        ok(self, cli(ws, "save", "--merge", "--summary", "committed"))
        brief = self.brief(ws)
        self.assertNotIn("new.txt (??)", brief)
        self.assertNotIn("uncommitted changes", brief)
        self.assertEqual(ws.checkpoint()["modifiedFiles"], [])

    def test_a_checkpoint_git_would_commit_is_said_in_the_brief_with_the_command_that_fixes_it(self):
        ws = Workspace(self)
        ok(self, cli(ws, "save", "--goal", "not ignored"))
        brief = self.brief(ws)
        warning = next((line for line in brief.splitlines() if "not git-ignored" in line), "")
        self.assertTrue(warning.startswith("⚠"), brief)
        command = re.search(r"run `([^`]+)`", warning).group(1)
        self.assertNotIn("import", command)
        proc = subprocess.run(shlex.split(command), cwd=ws.home, env=ws.env, capture_output=True, timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 0, text(proc))
        self.assertNotIn("git-ignored", self.brief(ws))
        with self.subTest("tracked"):
            ws.git("add", "-f", CHECKPOINT)
            ws.git("commit", "-qm", "oops, the checkpoint")
            ok(self, cli(ws, "save", "--merge", "--summary", "after the commit"))
            self.assertIn("is tracked by git", self.brief(ws))

    def test_a_running_server_tells_each_load_where_the_checkpoint_stands_in_git(self):
        """The server remembers which checkpoint files git tracks until the index changes: each
        load after a `git add` or a `git rm --cached` says what is true then."""
        ws = Workspace(self)
        server = McpServer(self, ws.repo, ws.env)
        server.initialize()
        server.save(goal="not ignored")
        for _ in range(2):
            self.assertIn("not git-ignored", server.load())
        ws.git("add", "-f", CHECKPOINT)
        ws.git("commit", "-qm", "oops, the checkpoint")
        server.save(goal="tracked now")  # (git status shows it changed: a load looks)
        for _ in range(2):
            self.assertIn("is tracked by git", server.load())
        ws.git("rm", "--cached", "-q", CHECKPOINT)
        brief = server.load()
        self.assertNotIn("is tracked by git", brief)
        self.assertIn("not git-ignored", brief)

    def test_the_brief_never_offers_a_snapshot_that_forget_removed(self):
        ws = Workspace(self)
        ws.write("src/app.py", "print('dirty')\n")
        ok(self, cli(ws, "save", "--goal", "then forget"))
        snapshot_id = ws.checkpoint()["snapshot"]["id"]
        self.assertIn(f"restore {snapshot_id}", self.brief(ws))
        ws.write("src/app.py", "print('newer')\n")
        newer = snapshot(self, ws)["id"]  # the checkpoint's snapshot is no longer the newest
        ok(self, cli(ws, "forget", snapshot_id))
        brief = self.brief(ws)
        self.assertNotIn(f"restore {snapshot_id}", brief)
        self.assertIn(snapshot_id, brief, "a warning says it is gone")
        ok(self, cli(ws, "save", "--merge", "--summary", "a new snapshot"))
        ok(self, cli(ws, "forget", "--all"))
        brief = self.brief(ws)
        self.assertNotIn("restore ", brief, "the newest, forgotten too (and its cache with it)")
        self.assertNotIn(f"restore {newer}", brief)


# ── 6.5 Transcripts: what a Claude Code session provably did ──
# End to end, through the hooks: 11.2.

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
        scanner = cc.ClaudeTranscript(seen, want_prompt=want_prompt)
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

    def test_fields_of_the_wrong_type_are_skipped_not_trusted(self):
        hostile = {"type": "assistant", "message": {"content": [
            {"type": "tool_use", "id": "t9", "name": ["Bash"], "input": {"command": "ls"}},
            {"type": "tool_use", "id": ["t8"], "name": "Bash", "input": {"command": "ls"}}]}}
        facts = self.scan(self.lines(
            hostile, self.use("t1", "Bash", command="make"),
            {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": {"t1": 1}}]}},
            {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": ["t1"]}]}},
            self.result("t1")))
        self.assertEqual([c.command for c in facts.commands], ["make"])

    def test_exit_code_from_result_text(self):
        for text, code in (("Exit code 127\nnot found", 127), ("Error: Exit code 1", 1), ("killed", 1),
                           ([{"type": "text", "text": "Exit code 3"}], 3)):
            with self.subTest(text=text):
                self.assertEqual(cc.exit_code_in(text, 1), code)


# The other agents' transcripts, in the exact shapes their real CLIs wrote (Codex 0.169.0,
# Gemini CLI 0.61.0, Qwen Code 0.24.4, seen offline against the fake models of section 19)
# or, for Copilot CLI (it needs Node 24), its public docs and SDK schema. Each builder writes
# a turn: a prompt, a shell command that succeeds, one that fails, an edit, a failed edit.

class AgentTranscript:
    """Lines of one agent's transcript; `turn` writes the same story in every format."""

    def __init__(self, cwd: str):
        self.cwd = cwd
        self.lines: list = []
        self._count = 0

    def next_id(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}_{self._count:04d}"

    def add(self, record) -> None:
        self.lines.append(record if isinstance(record, str) else json.dumps(record, separators=(",", ":")))

    def turn(self, prompt: str = "Write the notes file") -> None:
        self.prompt(prompt)
        self.shell("echo hi > notes.txt", 0)
        self.shell("exit 3", 3)
        self.edit(os.path.join(self.cwd, "added.txt"))
        self.edit(os.path.join(self.cwd, "missing.txt"), ok=False)

    def pairs(self, start: int = 0) -> list:
        """(offset, bytes) pairs, as the hook reads them."""
        out, offset = [], 0
        for line in self.lines:
            data = line.encode() + b"\n"
            if offset >= start:
                out.append((offset, data))
            offset += len(data)
        return out

    def save(self, path: str) -> str:
        with open(path, "w", encoding="utf-8") as stream:
            stream.write("".join(line + "\n" for line in self.lines))
        return path


class CodexRolloutLines(AgentTranscript):
    """$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl: response_item lines for the model's
    calls and their outputs, then event_msg item_completed with call and result together."""

    def _line(self, kind: str, payload: dict) -> None:
        self.add({"timestamp": "2026-12-01T15:30:58.685Z", "ordinal": len(self.lines) + 1, "type": kind,
                  "payload": payload})

    def _completed(self, item: dict) -> None:
        self._line("event_msg", {"type": "item_completed", "thread_id": "01a2323b-0583", "turn_id": "01a2323b-059f",
                                 "item": item, "started_at_ms": 1796139058754, "completed_at_ms": 1796139058755})

    def prompt(self, text: str) -> None:
        self._line("response_item", {"type": "message", "role": "developer", "content": [
            {"type": "input_text", "text": "BRIEF from a SessionStart hook"}]})
        self._line("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}],
                                     "internal_chat_message_metadata_passthrough": {"content_item_kinds": ["user.text"]}})
        self._completed({"type": "UserMessage", "id": self.next_id("msg"),
                         "content": [{"type": "text", "text": text, "text_elements": []}]})

    def shell(self, command: str, code: int) -> None:
        call_id = self.next_id("call")
        self._line("response_item", {"type": "function_call", "name": "exec_command",
                                     "arguments": json.dumps({"cmd": command}), "call_id": call_id})
        self._completed({"type": "CommandExecution", "id": call_id, "process_id": "94134",
                         "command": ["/bin/bash", "-lc", command], "cwd": "file://" + self.cwd,
                         "parsed_cmd": [{"type": "unknown", "cmd": command}], "source": "unified_exec_startup",
                         "status": "completed" if code == 0 else "failed", "aggregated_output": "", "exit_code": code})
        self._line("response_item", {"type": "function_call_output", "call_id": call_id,
                                     "output": f"Chunk ID: 976e27\nProcess exited with code {code}\nOutput:\n"})

    def edit(self, path: str, ok: bool = True) -> None:
        call_id = self.next_id("call")
        self._line("response_item", {"type": "custom_tool_call", "call_id": call_id, "name": "apply_patch",
                                     "input": f"*** Begin Patch\n*** Add File: {path}\n+hello\n*** End Patch\n"})
        self._completed({"type": "FileChange", "id": call_id, "changes": {path: {"type": "add", "content": "hello\n"}},
                         "status": "completed" if ok else "failed", "stdout": "", "stderr": ""})


class GeminiChatLines(AgentTranscript):
    """~/.gemini/tmp/<project>/chats/session-*.jsonl: a header, $set records, and message
    records appended again whole each time they change (the last one of an id wins)."""

    def __init__(self, cwd: str):
        super().__init__(cwd)
        self.add({"sessionId": "8dcfc762-bd48", "projectHash": "ad2f3712", "startTime": "2026-12-01T15:31:12.771Z",
                  "lastUpdated": "2026-12-01T15:31:12.771Z", "kind": "main"})
        self.add({"$set": {"messages": [{"id": "d04923d3", "type": "user", "content": [
            {"text": "<session_context>\nThis is the Gemini CLI.\n</session_context>"}]}]}})

    def prompt(self, text: str) -> None:
        self.add({"id": self.next_id("user"), "timestamp": "2026-12-01T15:31:12.930Z", "type": "user",
                  "content": [{"text": f"<hook_context>BRIEF</hook_context>\n\n{text}"}]})

    def _call(self, name: str, args: dict, output: str, status: str) -> None:
        message_id, call_id = self.next_id("gemini"), self.next_id(name)
        message = {"id": message_id, "timestamp": "2026-12-01T15:31:13.035Z", "type": "gemini", "content": "",
                   "thoughts": [], "model": "gemini-3.1-pro-preview"}
        self.add(message)
        self.add({"$set": {"lastUpdated": "2026-12-01T15:31:13.035Z"}})
        response = {"functionResponse": {"id": call_id, "name": name, "response": {"output": output}}}
        self.add(dict(message, toolCalls=[{"id": call_id, "name": name, "args": args, "result": [response],
                                           "status": status, "displayName": name}]))
        self.add({"id": self.next_id("user"), "type": "user", "content": [response]})

    def shell(self, command: str, code: int) -> None:
        exit_line = f"Exit Code: {code}\n" if code else ""
        self._call("run_shell_command", {"command": command},
                   f"<untrusted_context>\nOutput: (empty)\n{exit_line}Process Group PGID: 9885\n</untrusted_context>",
                   "success")

    def edit(self, path: str, ok: bool = True) -> None:
        self._call("write_file", {"file_path": path, "content": "hello\n"},
                   "Successfully created and wrote to new file: " + path, "success" if ok else "error")

    def rewrite_all(self) -> None:
        """Append every message record again, as Gemini CLI does when it updates one."""
        for line in list(self.lines):
            if '"toolCalls"' in line:
                self.lines.append(line)


class QwenChatLines(AgentTranscript):
    """~/.qwen/projects/<cwd>/chats/<session>.jsonl: Gemini's parts in Claude Code's line
    shape (uuid, parentUuid, type: user|assistant|tool_result|system)."""

    def _line(self, kind: str, **fields) -> None:
        self.add(dict({"uuid": self.next_id("uuid"), "parentUuid": None, "sessionId": "3c882ddf",
                       "timestamp": "2026-12-01T15:31:30.071Z", "type": kind, "cwd": self.cwd, "version": "0.24.4"},
                      **fields))

    def prompt(self, text: str) -> None:
        self._line("user", provenance="real_user", message={"role": "user", "parts": [{"text": text}]})
        self._line("system", provenance="system", subtype="attribution_snapshot", systemPayload={"snapshot": {}})

    def _call(self, name: str, args: dict, output: str, status: str, display: dict) -> None:
        call_id = self.next_id("toolu_stub")
        self._line("assistant", provenance="assistant_output", message={"role": "model", "parts": [
            {"functionCall": {"id": call_id, "name": name, "args": args}}]})
        self._line("system", provenance="system", subtype="ui_telemetry", systemPayload={"uiEvent": {
            "event.name": "qwen-code.tool_call", "call_id": call_id, "function_name": name, "function_args": args}})
        self._line("tool_result", provenance="tool_result", message={"role": "user", "parts": [
            {"functionResponse": {"id": call_id, "name": name, "response": {"output": output}}}]},
            toolCallResult={"callId": call_id, "status": status, "resultDisplay": display, "executionStatus": status})

    def shell(self, command: str, code: int) -> None:
        self._call("run_shell_command", {"command": command, "description": "run it"},
                   f"Command: {command}\nOutput: (empty)\nExit Code: {code}", "success",
                   {"type": "shell_result", "version": 1, "exitCode": code, "outcome": "completed"})

    def reply(self, text: str) -> None:
        self._line("assistant", provenance="assistant_output", message={"role": "model", "parts": [{"text": text}]})

    def edit(self, path: str, ok: bool = True) -> None:
        self._call("write_file", {"file_path": path, "content": "hello\n"},
                   "Successfully created and wrote to new file: " + path, "success" if ok else "error",
                   {"fileName": os.path.basename(path), "filePath": path})


class CopilotEventsLines(AgentTranscript):
    """~/.copilot/session-state/<session>/events.jsonl (Copilot CLI 1.0, from its public docs
    and SDK schema): {type, data, id, timestamp, parentId} events."""

    def _event(self, kind: str, data: dict) -> None:
        self.add({"type": kind, "data": data, "id": self.next_id("evt"), "timestamp": "2026-05-07T06:19:05.000Z",
                  "parentId": None})

    def prompt(self, text: str) -> None:
        self._event("session.start", {"sessionId": "abc-123", "version": 1, "producer": "copilot-agent",
                                      "copilotVersion": "1.0.43", "context": {"cwd": self.cwd}})
        self._event("user.message", {"content": text, "attachments": []})

    def _call(self, name: str, args: dict, success: bool, content: str) -> None:
        call_id = self.next_id("toolu_vrtx")
        self._event("assistant.message", {"content": "", "toolRequests": [
            {"toolCallId": call_id, "name": name, "arguments": args, "type": "function"}]})
        self._event("tool.execution_start", {"toolCallId": call_id, "toolName": name, "arguments": args})
        data = {"toolCallId": call_id, "success": success}
        data.update({"result": {"content": content, "detailedContent": content}} if success else
                    {"error": {"message": content, "code": "failure"}})
        self._event("tool.execution_complete", data)

    def shell(self, command: str, code: int) -> None:
        self._call("bash", {"command": command, "description": "run it"}, True,
                   f"<shellId: 0 completed with exit code {code}>")

    def edit(self, path: str, ok: bool = True) -> None:
        if ok:
            self._call("create", {"path": path, "file_text": "hello\n"}, True, "Created file " + path)
        else:
            self._call("edit", {"path": path, "old_str": "a", "new_str": "b"}, False, "No match found")


AGENT_TRANSCRIPTS = {"codex": CodexRolloutLines, "gemini": GeminiChatLines, "qwen": QwenChatLines,
                     "copilot": CopilotEventsLines}


class TestAgentTranscriptReaders(unittest.TestCase):
    """SPEC section 12: each agent's reader finds what its own tools did, once."""

    def read(self, agent: str, transcript: AgentTranscript, start: int = 0, seen=(), want_prompt=True):
        return cc.AGENTS[agent].read_transcript(transcript.pairs(start), start, seen, want_prompt)

    def test_every_agent_reader_finds_the_prompt_the_commands_with_exit_codes_and_the_edits(self):
        for agent, builder in AGENT_TRANSCRIPTS.items():
            with self.subTest(agent):
                transcript = builder("/p")
                transcript.turn("Write the notes file")
                facts = self.read(agent, transcript)
                self.assertEqual(facts.first_prompt, "Write the notes file")
                self.assertEqual([(c.command, c.exit_code) for c in facts.commands],
                                 [("echo hi > notes.txt", 0), ("exit 3", 3)])
                self.assertTrue(all(c.auto and c.tool_use_id for c in facts.commands))
                self.assertEqual([path for path, _ in facts.edited_files], ["/p/added.txt"])
                self.assertEqual(len(facts.taken_ids), 3)
                self.assertEqual(facts.resume_offset, sum(len(line.encode()) + 1 for line in transcript.lines))

    def test_an_exit_code_in_a_commands_own_output_is_not_taken_for_its_status(self):
        for agent in ("gemini", "qwen", "copilot"):
            with self.subTest(agent):
                transcript = AGENT_TRANSCRIPTS[agent]("/p")
                transcript.shell("cat ci.log", 0)
                result = -2 if agent == "gemini" else -1  # the line that holds the command's output
                transcript.lines[result] = transcript.lines[result] \
                    .replace("Output: (empty)", "Output: job 3: exit code 7\\nExit Code: 7 (retried)") \
                    .replace("<shellId: 0", "job 3 exited with code 7\\n<shellId: 0") \
                    .replace('"exitCode":0,', "")  # Qwen Code's own field gone: its output text decides
                self.assertEqual([(c.command, c.exit_code) for c in self.read(agent, transcript).commands],
                                 [("cat ci.log", 0)])

    def test_a_second_read_from_the_cursor_or_from_the_start_records_nothing_again(self):
        for agent, builder in AGENT_TRANSCRIPTS.items():
            with self.subTest(agent):
                transcript = builder("/p")
                transcript.turn()
                first = self.read(agent, transcript)
                transcript.shell("make test", 0)
                again = self.read(agent, transcript, start=first.resume_offset, seen=first.taken_ids, want_prompt=False)
                self.assertEqual([c.command for c in again.commands], ["make test"])
                self.assertEqual(again.edited_files, [])
                everything = self.read(agent, transcript, seen=first.taken_ids + again.taken_ids, want_prompt=False)
                self.assertEqual((everything.commands, everything.edited_files), ([], []))

    def test_gemini_records_appended_again_whole_are_taken_once(self):
        transcript = GeminiChatLines("/p")
        transcript.turn()
        transcript.rewrite_all()
        facts = self.read("gemini", transcript)
        self.assertEqual([c.command for c in facts.commands], ["echo hi > notes.txt", "exit 3"])
        self.assertEqual(len(facts.edited_files), 1)
        cursor = facts.resume_offset
        transcript.rewrite_all()  # a later update restates them after the cursor
        later = self.read("gemini", transcript, start=cursor, seen=facts.taken_ids, want_prompt=False)
        self.assertEqual((later.commands, later.edited_files, later.taken_ids), ([], [], []))

    def test_a_gemini_call_still_running_is_taken_when_its_record_comes_back_finished(self):
        transcript = GeminiChatLines("/p")
        transcript.shell("make", 0)
        finished = transcript.lines[-2]
        transcript.lines[-2] = finished.replace('"status":"success"', '"status":"executing"')
        early = self.read("gemini", transcript)
        self.assertEqual(early.commands, [])
        transcript.add(finished)
        later = self.read("gemini", transcript, start=early.resume_offset, seen=early.taken_ids)
        self.assertEqual([c.command for c in later.commands], ["make"])

    def test_a_call_waiting_for_its_result_holds_the_cursor(self):
        for agent in ("qwen", "copilot"):
            with self.subTest(agent):
                transcript = AGENT_TRANSCRIPTS[agent]("/p")
                transcript.shell("make", 0)
                answer = transcript.lines.pop()
                facts = self.read(agent, transcript)
                self.assertEqual(facts.commands, [])
                transcript.add(answer)
                later = self.read(agent, transcript, start=facts.resume_offset)
                self.assertEqual([c.command for c in later.commands], ["make"])

    def test_the_prompt_skips_what_the_agent_injected(self):
        transcript = GeminiChatLines("/p")
        transcript.prompt("Fix the build")
        self.assertEqual(self.read("gemini", transcript).first_prompt, "Fix the build")
        codex = CodexRolloutLines("/p")
        codex.prompt("Fix the build")
        self.assertEqual(self.read("codex", codex).first_prompt, "Fix the build")

    def test_a_codex_rollout_of_response_items_alone_is_read_as_spec_12_describes_it(self):
        full = CodexRolloutLines("/p")
        full.turn("Write the notes file")
        transcript = CodexRolloutLines("/p")
        transcript.lines = [line for line in full.lines if '"item_completed"' not in line]
        for call_id, code, files in (("call_0004", 0, "A /p/added.txt\nM src/app.py\n"), ("call_0005", 1, "")):
            output = f"Exit code: {code}\nWall time: 0 seconds\nOutput:\nSuccess. Updated the following files:\n{files}"
            transcript._line("response_item", {"type": "custom_tool_call_output", "call_id": call_id,
                                               "output": output if code == 0 else json.dumps({"output": output})})
        hostile = [{"type": "message", "role": "user", "content": 5, "content_item_kinds": ["user.text"]},
                   {"type": "function_call", "name": "exec_command", "arguments": {"cmd": "ls"}, "call_id": "h1"},
                   {"type": "function_call", "name": "exec_command", "arguments": "[1]", "call_id": "h2"},
                   {"type": "custom_tool_call", "name": "apply_patch", "input": 5, "call_id": ["h3"]},
                   {"type": "function_call_output", "call_id": "h2", "output": {"x": 1}}]
        transcript.lines[1:1] = [json.dumps({"type": "response_item", "payload": payload}) for payload in hostile]
        facts = self.read("codex", transcript)
        self.assertEqual(facts.first_prompt, "Write the notes file")
        self.assertEqual([(c.command, c.exit_code) for c in facts.commands],
                         [("echo hi > notes.txt", 0), ("exit 3", 3)])
        self.assertEqual([p for p, _ in facts.edited_files], ["/p/added.txt", "src/app.py"])
        self.assertEqual(facts.resume_offset, sum(len(line.encode()) + 1 for line in transcript.lines))
        both = self.read("codex", full)  # with item_completed too, each call is taken once
        self.assertEqual(len(both.commands), 2)
        self.assertEqual(len(both.taken_ids), 3)

    def test_a_codex_patch_that_moves_a_file_names_both_paths(self):
        transcript = CodexRolloutLines("/p")
        transcript._completed({"type": "FileChange", "id": "call_9", "status": "completed", "changes": {
            "/p/old.py": {"type": "update", "unified_diff": "", "move_path": "/p/new.py"}}})
        self.assertEqual([p for p, _ in self.read("codex", transcript).edited_files], ["/p/old.py", "/p/new.py"])

    def test_foreign_torn_and_hostile_lines_are_skipped(self):
        hostile = ['{"type":"event_msg","payload":{"type":"item_completed","item":{"type":"CommandExecution",'
                   '"id":["x"],"command":"ls","status":"completed","exit_code":0}}}',
                   '{"type":"event_msg","payload":{"type":"item_completed","item":{"type":"CommandExecution",'
                   '"id":"c1","command":{"a":1},"status":"completed","exit_code":"0"}}}',
                   '{"toolCalls":[{"id":"x","name":"run_shell_command","args":"ls","status":"success"}]}',
                   '{"$set":{"messages":"not a list"}}', '{"type":"tool_result","toolCallResult":"nope"}',
                   '{"type":"tool.execution_start","data":{"toolCallId":"t","toolName":"bash","arguments":"{torn"}}',
                   '{"type":"assistant","message":{"parts":[{"functionCall":{"id":1,"name":"edit"}}]}}',
                   '{"toolCalls"', "[1, 2]", "\x00\xff", '"a string"',
                   '{"type":"gemini","content":"","toolCalls":[{"id":"g1","name":"run_shell_command","args":{"command":"ls"},'
                   '"status":"success","result":[{"functionResponse":true}]}]}',
                   '{"type":"response_item","payload":{"type":"function_call","name":["exec_command"],"call_id":"f1",'
                   '"arguments":"{}"}}',
                   '{"type":"response_item","payload":{"type":"custom_tool_call_output","call_id":["f1"],"output":"x"}}']
        claude = Transcript("/p")
        claude.prompt("Go")
        claude.bash("make")
        for agent, builder in dict(AGENT_TRANSCRIPTS, claude=None).items():
            with self.subTest(agent):
                transcript = builder("/p") if builder else AgentTranscript("/p")
                if builder:
                    transcript.prompt("Go")  # a first line of the agent's own format
                for line in claude.lines[:1] + hostile + claude.lines[1:]:
                    transcript.add(line)
                facts = self.read(agent, transcript)
                expected = ["make"] if agent == "claude" else ["ls"] if agent == "gemini" else []
                self.assertEqual([c.command for c in facts.commands], expected)
                self.assertEqual(facts.edited_files, [])

    def test_a_transcript_of_another_format_is_refused_by_its_first_line(self):
        claude = Transcript("/p")
        claude.prompt("Go")
        samples = {"claude": claude.lines}
        for agent, builder in AGENT_TRANSCRIPTS.items():
            transcript = builder("/p")
            transcript.turn()
            samples[agent] = transcript.lines
        for reader in samples:
            for writer, lines in samples.items():
                with self.subTest(reader=reader, writer=writer):
                    transcript = AgentTranscript("/p")
                    transcript.lines = list(lines)
                    if reader == writer:
                        self.read(reader, transcript)
                    else:
                        with self.assertRaisesRegex(cc.CheckpointError, "is not a .*--client"):
                            self.read(reader, transcript)
                        self.read(reader, transcript, start=len(lines[0]) + 1)  # a later read does not look


# ── 6.6 Snapshots: trees, restore plans, ids, skip rules (SPEC section 10) ──
# End to end in 11.1, whose git_raw this uses.

class TestRewindCore(unittest.TestCase):
    def test_tree_encoding_round_trips_and_matches_git_ids(self):
        ws = Workspace(self)
        for name in ("a", "a.c", "a-b", "b/x", "b.txt", "b0/y", "z"):
            ws.write(name, name)
        ws.git("add", "-A")
        top = ws.git("write-tree").strip()
        raw = git_raw(ws, "cat-file", "tree", top)
        self.assertEqual(cc.encode_tree(cc.parse_tree(raw)), raw)
        self.assertEqual(cc.tree_id(raw), top)

    def test_rebuild_trees_replaces_a_folder_with_a_file_and_drops_emptied_folders(self):
        trees = {"": {b"a": (cc.TREE_MODE, "1" * 40), b"k": ("100644", "2" * 40)}, "a": {b"x": ("100644", "3" * 40)}}
        _, written = cc.rebuild_trees(trees, {"a/x": None, "a": ("100644", "4" * 40)})
        self.assertEqual(cc.parse_tree(written[-1][1]), {b"a": ("100644", "4" * 40), b"k": ("100644", "2" * 40)})
        _, written = cc.rebuild_trees(trees, {"a/x": None})
        self.assertEqual(cc.parse_tree(written[-1][1]), {b"k": ("100644", "2" * 40)})

    def test_plan_restore_refuses_or_skips_what_it_does_not_manage(self):
        cases = [  # (changes, on_disk, folder_files, ignored, skipped_now, expected)
            ([cc.TreeChange("A", "d", "100644", "1" * 40)], {"d": "dir"}, {"d": ["d/build.log"]}, set(), {}, "refuse"),
            ([cc.TreeChange("A", "d", "100644", "1" * 40), cc.TreeChange("D", "d/a")],
             {"d": "dir", "d/a": "file"}, {"d": ["d/a"]}, set(), {}, "write"),
            ([cc.TreeChange("A", "f/x", "100644", "1" * 40)], {"f": "file", "f/x": "missing"}, {}, set(), {}, "refuse"),
            ([cc.TreeChange("A", "l/x", "100644", "1" * 40)], {"l": "symlink", "l/x": "missing"}, {}, set(), {}, "skip"),
            ([cc.TreeChange("A", "n/x", "100644", "1" * 40)], {"n": "repo", "n/x": "missing"}, {}, set(), {}, "skip"),
            ([cc.TreeChange("A", "out.log", "100644", "1" * 40)], {"out.log": "missing"}, {}, {"out.log"}, {}, "skip"),
            ([cc.TreeChange("A", "big", "100644", "1" * 40)], {"big": "file"}, {}, set(), {"big": "too big"}, "skip"),
            ([cc.TreeChange("M", "m", "100755", "1" * 40)], {"m": "file"}, {}, set(), {}, "write"),
            ([cc.TreeChange("A", ".claude-checkpoint", "100644", "1" * 40)], {}, {}, set(), {}, "nothing"),
        ]
        for changes, on_disk, folder_files, ignored, skipped, expected in cases:
            with self.subTest(changes=changes):
                plan = cc.plan_restore(changes, on_disk, folder_files, ignored, skipped)
                outcome = ("refuse" if plan.refusals else "skip" if plan.skipped
                           else "write" if plan.write else "nothing")
                self.assertEqual(outcome, expected, plan)

    def test_find_snapshot_by_latest_prefix_and_a_clear_error(self):
        snaps = [cc.Snapshot(c[:9], c, "r", "t", "", "save", None, None, "", 0) for c in ("ab12" + "0" * 36, "ab34" + "0" * 36)]
        self.assertIs(cc.find_snapshot(snaps, None), snaps[0])
        self.assertIs(cc.find_snapshot(snaps, "latest"), snaps[0])
        self.assertIs(cc.find_snapshot(snaps, "AB34"), snaps[1])
        with self.assertRaisesRegex(cc.SnapshotError, "more than one"):
            cc.find_snapshot(snaps, "ab")  # too short to be unique
        with self.assertRaisesRegex(cc.SnapshotError, "ab1200000, ab3400000"):
            cc.find_snapshot(snaps, "cafe")
        with self.assertRaises(cc.NothingToDo):
            cc.find_snapshot([], None)

    def test_skip_reasons(self):
        cases = [(".env", "file", 10, True, "secret"), ("config/.env.production", "file", 10, True, "secret"),
                 ("keys/id_ed25519.pub", "file", 10, True, "secret"), (".env", "file", 10, False, None),
                 ("big.bin", "file", 11, True, "larger"), ("big.bin", "file", 11, False, None),
                 ("vendor/lib/", "repo", 0, True, "nested"), ("sub", "dir", 0, False, "submodule"),
                 ("src/env.py", "file", 10, True, None), ("fifo", "other", 0, True, "regular")]
        for rel, kind, size, untracked, expected in cases:
            with self.subTest(rel=rel):
                reason = cc.snapshot_skip_reason(rel, kind, size, untracked, 10)
                self.assertEqual(reason is None, expected is None, reason)
                if expected:
                    self.assertIn(expected, reason)


class TestSessionCore(unittest.TestCase):
    """Sessions on a remote (SPEC section 13): names, what stays home, which session a resume takes."""

    def test_root_keys_are_one_ref_component_and_the_same_for_the_same_folder(self):
        self.assertEqual(cc.session_root_key(""), "top")
        for prefix in ("web/", "apps/web/", "odd name/ü/", "a..b/.lock/"):
            with self.subTest(prefix=prefix):
                key = cc.session_root_key(prefix)
                self.assertTrue(cc.is_ref_component(key), key)
                self.assertEqual(key, cc.session_root_key(prefix))
                proc = subprocess.run(["git", "check-ref-format", f"refs/x/{key}/w/1"], capture_output=True)
                self.assertEqual(proc.returncode, 0, key)
        self.assertNotEqual(cc.session_root_key("a/web/"), cc.session_root_key("b/web/"))

    def test_writer_ids_and_remote_components_are_safe_ref_components(self):
        for host in ("laptop.local", "My Mac!", "", "..", "-x-"):
            with self.subTest(host=host):
                self.assertTrue(cc.is_ref_component(cc.new_writer_id(host, "a1b2c3")))
        self.assertEqual(cc.remote_component("origin"), "origin")
        for url in ("git@host:me/repo.git", "/srv/git/repo.git", "https://h/x"):
            with self.subTest(url=url):
                self.assertRegex(cc.remote_component(url), r"^url-[0-9a-f]{12}$")

    def test_session_refs_round_trip(self):
        ref = cc.session_ref("top", "laptop-a1b2c3", 1_700_000_000_123, "f" * 40)
        self.assertEqual(ref, "refs/claude-checkpoint/shared/top/laptop-a1b2c3/1700000000123-fffffffff")
        self.assertEqual(cc.parse_session_ref(ref, cc.SHARED_REFS + "top/"), ("laptop-a1b2c3", 1_700_000_000_123))
        for other in ("refs/claude-checkpoint/shared/top/w/x/1-a", "refs/heads/main",
                      "refs/claude-checkpoint/shared/top/w/notastamp"):
            self.assertIsNone(cc.parse_session_ref(other, cc.SHARED_REFS + "top/"), other)

    def test_what_stays_home(self):
        cases = [("src/app.py", 10, None, None), (".env", 10, None, "named like a secret"),
                 ("deploy/key.pem", 10, None, "named like a secret"),
                 ("big.bin", cc.SESSION_MAX_BYTES + 1, None, "larger than 50 MiB"),
                 ("big.bin", cc.SESSION_MAX_BYTES, None, None),
                 ("config.py", 10, "aws-key", "holds a secret (aws-key)")]
        for path, size, secret, reason in cases:
            with self.subTest(path=path, size=size):
                self.assertEqual(cc.held_back_reason(path, size, secret), reason)
        self.assertIn("too long to scan", cc.held_back_reason("huge.log", 10, None, scanned=False))
        key = fake_secret("sk-ant-api03-", 48)
        self.assertIsNotNone(cc.file_secret(f'KEY = "{key}"\n'.encode(), ()))
        self.assertIsNone(cc.file_secret(b"print('hello')\n", ()))
        self.assertIsNone(cc.file_secret(b"\0binary " + key.encode(), ()))  # binary content is not text
        self.assertEqual(cc.file_secret(b"token: hunter2-but-longer", ("hunter2-but-longer",)), "secret environment value")

    def test_the_cap_keeps_the_newest_and_makes_room_for_the_new_one(self):
        mine = [(f"r{i}", f"o{i}") for i in range(25)]
        self.assertEqual(cc.sessions_to_delete(mine, 20), mine[19:])
        self.assertEqual(cc.sessions_to_delete(mine[:19], 20), [])

    def test_which_session_a_resume_takes(self):
        def session(commit: str, writer: str, mine: bool = False) -> cc.Session:
            snap = cc.Snapshot(commit[:9], commit, "ref", "tree", "", "session", "main", None, "goal", 1)
            return cc.Session(snap, writer, 0, mine)
        sessions = [session("a" * 40, "me", True), session("b" * 40, "bo"), session("bc" + "0" * 38, "cy")]
        self.assertEqual(cc.find_session(sessions, None, None).writer, "bo")
        self.assertEqual(cc.find_session(sessions, None, "me").writer, "me")
        self.assertEqual(cc.find_session(sessions, "bc00", None).writer, "cy")
        with self.assertRaises(cc.NothingToDo):
            cc.find_session([], None, None)
        with self.assertRaises(cc.NothingToDo):
            cc.find_session(sessions[:1], None, None)
        for wanted in ("abc", "b", "dddd"):
            with self.subTest(wanted=wanted), self.assertRaises(cc.SnapshotError):
                cc.find_session(sessions, wanted, None)
        with self.assertRaises(cc.SnapshotError):
            cc.find_session(sessions, None, "nobody")


class AgentTableTest(unittest.TestCase):
    """SPEC section 12: one row per agent; every row is complete and its reader keeps the contract."""

    def test_every_agent_has_a_row_with_its_files_events_fields_and_reader(self):
        self.assertEqual(set(cc.AGENTS), {"claude", "codex", "gemini", "qwen", "copilot", "cursor", "vscode", "desktop"})
        for name, agent in cc.AGENTS.items():
            with self.subTest(name):
                self.assertEqual(agent.name, name)
                self.assertEqual(len(agent.server_files), 2)
                self.assertTrue(callable(agent.read_transcript))
                if agent.hook_files:
                    self.assertEqual(set(agent.hook_events), set(cc.HOOK_EVENTS))
                    self.assertEqual(set(agent.stdin_fields), {"session", "cwd", "transcript"})

    def test_the_claude_reader_takes_lines_with_offsets_and_returns_the_facts(self):
        lines = TestTranscriptScanner.lines(
            TestTranscriptScanner.use("t1", "Bash", command="make"), TestTranscriptScanner.result("t1"))
        pairs, offset = [], 100
        for line in lines:
            pairs.append((offset, line))
            offset += len(line)
        facts = cc.AGENTS["claude"].read_transcript(pairs, 100, (), False)
        self.assertEqual([c.command for c in facts.commands], ["make"])
        self.assertEqual(facts.resume_offset, offset)
        self.assertEqual(cc.ClaudeTranscript.read([], 42).resume_offset, 42)  # nothing new: the cursor stays

    def test_an_unknown_transcript_format_is_an_error_that_names_it(self):
        with self.assertRaisesRegex(cc.CheckpointError, "unknown transcript format"):
            cc.read_unknown_transcript([(0, b"{}\n")], 0, (), False)


# ════════════════════════════════════════════════════════════════════════════
# 7. Rendering: the resume brief and the answer texts (SPEC sections 3 and 4)
# ════════════════════════════════════════════════════════════════════════════
# End to end: the brief in TestE2eLoad, the save's answer in TestE2eSaveAnswer (both 11.2).

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

    def test_timestamps_round_trip_and_match_the_calendar(self):
        import calendar
        for text in ("1970-01-01T00:00:00.000Z", "2026-10-08T02:23:55.477Z", "2000-02-29T23:59:59.999Z",
                     "1999-12-31T12:00:00.001Z", "2100-03-01T00:00:00.000Z"):
            with self.subTest(text=text):
                epoch = cc.parse_timestamp(text)
                self.assertEqual(cc.format_timestamp(epoch), text)
                expected = calendar.timegm(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")) + int(text[20:23]) / 1000
                self.assertAlmostEqual(epoch, expected, places=6)
        self.assertEqual(cc.parse_timestamp("2026-10-08T04:23:55+02:00"), cc.parse_timestamp("2026-10-08T02:23:55Z"))
        self.assertEqual(cc.parse_timestamp("2026-10-08 02:23:55"), cc.parse_timestamp("2026-10-08T02:23:55.000Z"))
        for broken in ("yesterday", "2026-13-01T00:00:00Z", "", "2026-10-08T02:23:55.477Zjunk"):
            self.assertIsNone(cc.parse_timestamp(broken))

    def test_human_ages(self):
        for seconds, text in ((0, "just now"), (42, "42s ago"), (120, "2m ago"), (7200, "2h ago"), (3 * 86400, "3d ago")):
            with self.subTest(seconds=seconds):
                self.assertEqual(cc.human_age(seconds), text)


class TestSessionTexts(unittest.TestCase):
    """What resume says when the session's HEAD differs from this clone's (SPEC section 13)."""

    def test_head_advice_gives_the_git_command_that_matches_the_session(self):
        theirs = cc.Snapshot("s", "s" * 40, "ref", "tree", "", "session", "feature", "a" * 40, "goal", 1)
        cases = [(cc.GitState("feature", "a" * 40, True), True, None),
                 (cc.GitState("main", "b" * 40, True), True, "`git switch feature`"),
                 (cc.GitState("feature", "b" * 40, True), True, f"`git merge --ff-only {'a' * 9}`"),
                 (None, True, "`git switch feature`"),
                 (cc.GitState("main", "b" * 40, True), False, "`git fetch` first")]
        for here, head_here, command in cases:
            with self.subTest(here=here, head_here=head_here):
                said = " ".join(cc.head_advice(theirs, here, head_here))
                if command is None:
                    self.assertEqual(said, "")
                else:
                    self.assertIn(command, said)
        detached = cc.replace(theirs, branch=None)
        self.assertIn(f"`git switch --detach {'a' * 9}`",
                      " ".join(cc.head_advice(detached, cc.GitState("main", "b" * 40, True), True)))


# ════════════════════════════════════════════════════════════════════════════
# 8. Git adapter: status parsing, real repositories, git facts, missing and hanging git (SPEC sections 3 and 7)
# ════════════════════════════════════════════════════════════════════════════
# Snapshots as commits (8.1) are checked through the rewind, in 11.1.

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
        self.assertEqual(scan.changes, [("a b.py", "M"), ("new.py", "R"), ("é.txt", "??")])

    def test_no_commits_and_detached_head(self):
        self.assertIsNone(cc.parse_status(b"# branch.oid (initial)\0# branch.head main\0? a\0").state)
        detached = cc.parse_status(b"# branch.oid " + b"b" * 40 + b"\0# branch.head (detached)\0")
        self.assertEqual(detached.state, cc.GitState(None, "b" * 40, False))


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
        statuses = dict(scan.changes)
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
        self.assertEqual(scan.changes, [("a.py", "M")])

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

    @slow
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

    def test_commands_started_together_are_read_whole_by_a_caller_that_comes_late(self):
        ws = Workspace(self)
        self.with_env(ws)
        content = os.urandom(4 << 20)  # far past a pipe's buffer: git waits for its reader
        blob = ws.git("hash-object", "-w", ws.write("big.bin", content)).strip()
        git = cc.Git(ws.repo, timeout=0.2)
        first = git.begin("cat-file", "blob", blob)
        second = git.begin("cat-file", "blob", blob)
        time.sleep(0.4)  # the caller's own work (hashing files) outlasts git's time limit
        self.assertEqual(first.output(), content)
        self.assertEqual(second.output(), content)
        self.assertTrue(git.available, git.warnings)

    def test_git_never_runs_fsmonitor_hooks_during_status(self):
        ws = Workspace(self)
        self.with_env(ws)
        marker = os.path.join(ws.home, "fsmonitor-ran")
        hook = write(ws.home, "hook.sh", f"#!/bin/sh\ntouch {marker}\n")
        os.chmod(hook, 0o755)
        ws.git("config", "core.fsmonitor", hook)
        cc.Git(ws.repo).scan()
        self.assertFalse(os.path.exists(marker))


class TestE2eSaveGitFacts(unittest.TestCase):
    def test_git_records_branch_full_head_and_dirty(self):
        ws = Workspace(self)
        server = start_server(self, ws)
        save_ok(server, goal="clean")
        self.assertEqual(ws.checkpoint()["git"], {"branch": "main", "head": ws.head(), "dirty": False})
        save_ok(server, goal="still clean, the checkpoint itself does not count")
        self.assertIs(ws.checkpoint()["git"]["dirty"], False)
        ws.write("src/app.py", "print('dirty')\n")
        save_ok(server, goal="dirty")
        self.assertIs(ws.checkpoint()["git"]["dirty"], True)
        self.assertEqual(len(ws.checkpoint()["git"]["head"]), 40)

    def test_detached_head_records_null_branch(self):
        ws = Workspace(self)
        ws.write("b.txt", "b\n")
        ws.git("add", "b.txt")
        ws.git("commit", "-qm", "second")
        ws.git("checkout", "-q", "--detach", "HEAD~1")
        server = start_server(self, ws)
        save_ok(server, goal="detached")
        git_facts = ws.checkpoint()["git"]
        self.assertIsNone(git_facts["branch"])
        self.assertEqual(git_facts["head"], ws.head())

    def test_git_is_null_outside_a_repository_and_before_the_first_commit(self):
        for name, options in [("not a repository", {"init": False}), ("no commits yet", {"commit": False})]:
            with self.subTest(name):
                ws = Workspace(self, **options)
                server = start_server(self, ws)
                save_ok(server, goal=name)
                self.assertIsNone(ws.checkpoint()["git"])

    def test_git_status_becomes_file_entries_with_blob_hashes(self):
        ws = Workspace(self, files={"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n" * 50, "keep.txt": "k\n"})
        ws.write("a.txt", "a changed\n")
        ws.write("e.txt", "added\n")
        ws.git("add", "e.txt")
        os.remove(os.path.join(ws.repo, "b.txt"))
        ws.git("mv", "c.txt", "c2.txt")
        ws.write("f.txt", "untracked\n")
        ws.write("dir/g.txt", "untracked in a folder\n")
        server = start_server(self, ws)
        save_ok(server, goal="statuses")
        files = files_by_path(ws.checkpoint())
        expected = {"a.txt": "M", "e.txt": "A", "b.txt": "D", "c2.txt": "R", "f.txt": "??", "dir/g.txt": "??"}
        self.assertEqual({p: f["status"] for p, f in files.items()}, expected)
        for path, entry in files.items():
            with self.subTest(path=path):
                self.assertEqual(entry["source"], "git")
                if path == "b.txt":
                    self.assertFalse(entry.get("hash"))
                else:
                    self.assertEqual(entry["hash"], ws.git("hash-object", "--", path).strip())

    def test_unmerged_file_has_status_u(self):
        ws = Workspace(self, files={"x.txt": "base\n"})
        ws.git("checkout", "-qb", "other")
        ws.write("x.txt", "other\n")
        ws.git("commit", "-qam", "other")
        ws.git("checkout", "-q", "main")
        ws.write("x.txt", "main\n")
        ws.git("commit", "-qam", "main")
        ws.git("merge", "other", check=False)
        server = start_server(self, ws)
        save_ok(server, goal="conflict")
        entry = files_by_path(ws.checkpoint())["x.txt"]
        self.assertEqual(entry["status"], "U")
        self.assertEqual(entry["hash"], ws.git("hash-object", "--", "x.txt").strip())

    def test_files_named_by_the_agent(self):
        ws = Workspace(self)
        ws.write("src/app.py", "print('changed')\n")
        server = start_server(self, ws)
        save_ok(server, goal="agent files", modifiedFiles=[
            {"path": "README.md", "note": "committed, named by the agent"},
            {"path": "src/app.py", "note": "note for a git entry"},
            {"path": os.path.join(ws.repo, "docs", "absolute.md"), "note": "absolute inside"},
            {"path": "ghost.txt"}])
        files = files_by_path(ws.checkpoint())
        self.assertEqual(set(files), {"README.md", "src/app.py", "docs/absolute.md", "ghost.txt"})
        readme = files["README.md"]
        self.assertEqual((readme["source"], readme["status"], readme["note"]),
                         ("agent", "M", "committed, named by the agent"))
        self.assertEqual(readme["hash"], ws.git("hash-object", "--", "README.md").strip())
        app = files["src/app.py"]
        self.assertEqual((app["source"], app["status"], app["note"]), ("git", "M", "note for a git entry"))
        self.assertEqual(app["hash"], ws.git("hash-object", "--", "src/app.py").strip())
        self.assertFalse(files["ghost.txt"].get("hash"))
        self.assertEqual(files["ghost.txt"]["source"], "agent")

    def test_paths_outside_the_project_are_refused_with_a_warning(self):
        ws = Workspace(self)
        write(ws.home, "outside.txt", "outside\n")
        server = start_server(self, ws)
        outside = ["/etc/passwd", "../outside.txt", os.path.join(ws.home, "outside.txt"), "src/../../outside.txt"]
        result = save_ok(server, goal="escape", modifiedFiles=[{"path": p} for p in outside]
                         + [{"path": "README.md"}])
        self.assertEqual(set(files_by_path(ws.checkpoint())), {"README.md"})
        warnings = result["structuredContent"]["warnings"]
        for path in outside:
            with self.subTest(path=path):
                self.assertTrue(any(path in w for w in warnings), warnings)
        self.assertNotIn(ws.home + os.sep + "outside", json.dumps(ws.checkpoint()))

    def test_checkpoint_files_are_never_listed(self):
        ws = Workspace(self)
        server = start_server(self, ws)
        save_ok(server, goal="one")
        save_ok(server, goal="two", modifiedFiles=[{"path": CHECKPOINT}, {"path": BACKUP}])
        save_ok(server, goal="three", mode="merge")
        self.assertTrue(os.path.exists(os.path.join(ws.repo, BACKUP)))
        paths = list(files_by_path(ws.checkpoint()))
        self.assertFalse([p for p in paths if p.startswith(CHECKPOINT)], paths)

    def test_merge_keeps_earlier_files_with_notes_and_rehashes_them(self):
        ws = Workspace(self)
        server = start_server(self, ws)
        save_ok(server, goal="g", modifiedFiles=[{"path": "README.md", "note": "explains the setup"}])
        old_hash = files_by_path(ws.checkpoint())["README.md"]["hash"]
        ws.write("README.md", "# demo, rewritten\n")
        ws.git("commit", "-qam", "docs")  # clean again: git no longer lists it
        save_ok(server, goal="g", mode="merge")
        entry = files_by_path(ws.checkpoint())["README.md"]
        self.assertEqual(entry["note"], "explains the setup")
        self.assertEqual(entry["hash"], ws.git("hash-object", "--", "README.md").strip())
        self.assertNotEqual(entry["hash"], old_hash)


class TestE2eGitAdapter(unittest.TestCase):
    def test_save_without_git_on_path_records_null_git_and_warns(self):
        ws = Workspace(self)
        server = start_server(self, ws, env=dict(ws.env, PATH=fake_git_folder(self, None)))
        result = save_ok(server, goal="no git")
        self.assertIsNone(ws.checkpoint()["git"])
        self.assertTrue(any("git" in w.lower() for w in warnings_besides_git_ignore(result)), result)
        self.assertIn("## Goal\nno git", server.load())

    @slow
    def test_hanging_git_does_not_hang_a_save(self):
        ws = Workspace(self)
        bin_dir = fake_git_folder(self, "sleep 30")
        server = start_server(self, ws, env=dict(ws.env, PATH=bin_dir + os.pathsep + ws.env["PATH"]))
        started = time.monotonic()
        result = save_ok(server, goal="slow git")
        elapsed = time.monotonic() - started
        self.assertLess(elapsed, 15)
        self.assertIsNone(ws.checkpoint()["git"])
        self.assertTrue(any("git" in w.lower() for w in warnings_besides_git_ignore(result)), result)

    @slow
    def test_blob_hash_of_a_50_mb_file_equals_git_hash_object(self):
        # The server's peak memory is compared with a server's that saved the same project without
        # the file: the interpreter's own peak (which varies with its version, with compiling the
        # module when its bytecode is stale, and once passed 50 MB alone) is no part of what the file costs.
        ws = Workspace(self)
        size = 50 * 1024 * 1024
        without = start_server(self, ws)
        save_ok(without, goal="no big file yet")
        ws.write("big.bin", os.urandom(1024 * 1024) * 50)
        server = start_server(self, ws)
        save_ok(server, goal="big file")
        entry = files_by_path(ws.checkpoint())["big.bin"]
        self.assertEqual(entry["hash"], ws.git("hash-object", "--", "big.bin").strip())
        peaks = [read_bytes(f"/proc/{proc.pid}/status") for proc in (without.proc, server.proc)]
        if all(peaks):
            base_kb, hwm_kb = (int(re.search(rb"VmHWM:\s+(\d+) kB", status).group(1)) for status in peaks)
            self.assertLess((hwm_kb - base_kb) * 1024, size, "the server read the whole file into memory")


# ════════════════════════════════════════════════════════════════════════════
# 9. Storage: checkpoint files, the backup, locks, hostile files (SPEC sections 3 and 7)
# ════════════════════════════════════════════════════════════════════════════

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
        with cc.ProjectLock(root):
            pass
        self.assertTrue(os.path.islink(os.path.join(root, ".claude-checkpoint.lock")))
        with open(outside) as stream:
            self.assertEqual(stream.read(), "precious")

    def test_the_project_lock_is_on_the_folder_itself_and_excludes_a_second_holder(self):
        root = temp_dir(self)
        with cc.ProjectLock(root):
            with self.assertRaises(cc.StorageError) as caught:
                with cc.ProjectLock(root, timeout=0.2):
                    pass
            self.assertIn("try again", str(caught.exception))
            self.assertEqual(os.listdir(root), [], "no lock file in the project")
        with cc.ProjectLock(root, timeout=0.2):
            pass

    def test_the_empty_lock_file_of_1_0_0_is_removed(self):
        root = temp_dir(self)
        write(root, ".claude-checkpoint.lock", b"")
        write(root, "notes.lock", b"")
        with cc.ProjectLock(root):
            pass
        self.assertEqual(os.listdir(root), ["notes.lock"])

    def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(self):
        root = temp_dir(self)
        cc.write_checkpoint(root, cc.encode_checkpoint(make_checkpoint(goal="old")), None)
        make_read_only(self, root)
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

    def test_a_fifo_at_the_name_is_refused_not_waited_on(self):
        root = temp_dir(self)
        os.mkfifo(os.path.join(root, ".claude-checkpoint"))
        with self.assertRaises(cc.StorageError) as caught:
            cc.read_checkpoint(root)
        self.assertIn("not a regular file", str(caught.exception))

    def test_refuses_a_giant_file(self):
        root = temp_dir(self)
        write(root, ".claude-checkpoint", b" " * (cc.MAX_READ_BYTES + 10))
        with self.assertRaises(cc.StorageError):
            cc.read_checkpoint(root)


class TestE2eStorage(unittest.TestCase):
    def setUp(self):
        self.ws = Workspace(self)
        self.main = os.path.join(self.ws.repo, CHECKPOINT)
        self.prev = os.path.join(self.ws.repo, BACKUP)

    def test_files_are_owner_only_even_under_umask_000(self):
        old = os.umask(0)
        try:
            server = start_server(self, self.ws)
        finally:
            os.umask(old)
        save_ok(server, goal="one")
        save_ok(server, goal="two")
        for path in (self.main, self.prev):
            with self.subTest(path=os.path.basename(path)):
                self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)

    def test_prev_holds_the_previous_checkpoint_after_a_second_save(self):
        server = start_server(self, self.ws)
        save_ok(server, goal="first")
        first = read_bytes(self.main)
        self.assertIsNone(read_bytes(self.prev))
        save_ok(server, goal="second")
        self.assertEqual(read_bytes(self.prev), first)
        self.assertEqual(self.ws.checkpoint()["goal"]["primary"], "second")

    def test_corrupt_main_never_overwrites_a_good_prev(self):
        server = start_server(self, self.ws)
        save_ok(server, goal="A")
        save_ok(server, goal="B")
        good_prev = read_bytes(self.prev)
        self.ws.write(CHECKPOINT, "{ corrupt")
        save_ok(server, goal="C")
        self.assertEqual(read_bytes(self.prev), good_prev)
        self.assertEqual(self.ws.checkpoint()["goal"]["primary"], "C")

    def test_load_falls_back_to_prev_when_main_is_corrupt(self):
        server = start_server(self, self.ws)
        save_ok(server, goal="A")
        save_ok(server, goal="B")
        for corrupt in (b"{ corrupt", b"", b"\xff\xfe", json.dumps({"version": 2}).encode()):
            with self.subTest(corrupt=corrupt):
                self.ws.write(CHECKPOINT, corrupt)
                full = load_full(server)
                self.assertEqual((full["found"], full["fromBackup"]), (True, True))
                self.assertEqual(full["checkpoint"]["goal"]["primary"], "A")
                brief = server.load()
                self.assertIn("## Goal\nA\n", brief)
                self.assertTrue("backup" in brief.lower() or BACKUP in brief, brief)

    def test_both_files_corrupt_is_a_clear_error(self):
        self.ws.write(CHECKPOINT, "{ corrupt")
        self.ws.write(BACKUP, "also corrupt")
        server = start_server(self, self.ws)
        result = server.call("load_session_checkpoint", {})
        self.assertIs(result.get("isError"), True, result)
        text = result["content"][0]["text"]
        self.assertIn(CHECKPOINT, text)
        self.assertIn(BACKUP, text)

    def test_saves_leave_no_file_but_the_checkpoint_and_its_prev(self):
        server = start_server(self, self.ws)
        for i in range(3):
            save_ok(server, goal=f"save {i}", mode="merge" if i else "replace")
        self.assertEqual(checkpoint_names(self.ws.repo), {CHECKPOINT, BACKUP})
        self.assertEqual(self.ws.git("status", "--porcelain", "--untracked-files=all").split(),
                         ["??", CHECKPOINT, "??", BACKUP], "no third file shows up in git status")

    def test_symlinks_planted_at_checkpoint_names_are_never_followed(self):
        outside = write(self.ws.home, "outside.json", json.dumps(dict(SEED_V1_CHECKPOINT, goal={
            "primary": "OUTSIDE GOAL", "tasks": []})))
        original = read_bytes(outside)
        server = start_server(self, self.ws)
        for name in (CHECKPOINT, BACKUP):
            with self.subTest(name=name):
                for existing in checkpoint_names(self.ws.repo):
                    os.remove(os.path.join(self.ws.repo, existing))
                if name == BACKUP:
                    save_ok(server, goal="a regular main file")
                os.symlink(outside, os.path.join(self.ws.repo, name))
                load = server.call("load_session_checkpoint", {})
                self.assertNotIn("OUTSIDE GOAL", load["content"][0]["text"])
                server.save(goal="through the link?")
                server.save(goal="and again", mode="merge")
                self.assertEqual(read_bytes(outside), original)

    def test_read_only_project_folder_is_an_error_and_keeps_the_old_file(self):
        server = start_server(self, self.ws)
        save_ok(server, goal="old")
        before = read_bytes(self.main)
        make_read_only(self, self.ws.repo)
        result = server.save(goal="new")
        self.assertIs(result.get("isError"), True, result)
        self.assertEqual(read_bytes(self.main), before)
        self.assertFalse({n for n in checkpoint_names(self.ws.repo) if ".tmp" in n})

    @slow
    def test_two_servers_merging_concurrently_lose_no_update(self):
        first = start_server(self, self.ws)
        save_ok(first, goal="shared")
        second = start_server(self, self.ws)
        failures = []

        def run(server: McpServer, tag: str) -> None:
            try:
                for i in range(20):
                    result = server.request("tools/call", {"name": "save_session_checkpoint", "arguments": {
                        "goal": "shared", "mode": "merge", "recentCommands": [{"command": f"echo {tag}-{i}"}]}})
                    if result.get("result", {}).get("isError") or "error" in result:
                        failures.append(result)
            except Exception as error:  # reported below, in the test's thread
                failures.append(repr(error))

        threads = [threading.Thread(target=run, args=(s, t)) for s, t in ((first, "A"), (second, "B"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        self.assertEqual(failures, [])
        commands = [c["command"] for c in self.ws.checkpoint()["recentCommands"]]
        self.assertEqual(sorted(commands), sorted(f"echo {t}-{i}" for t in "AB" for i in range(20)))
        for tag in "AB":
            own = [c for c in commands if c.startswith(f"echo {tag}-")]
            self.assertEqual(own, [f"echo {tag}-{i}" for i in range(20)])


class TestE2eHostileCheckpoint(unittest.TestCase):
    def test_a_file_name_that_is_not_utf8_round_trips(self):
        ws = Workspace(self)
        odd = os.path.join(os.fsencode(ws.repo), b"caf\xe9.txt")
        with open(odd, "wb") as stream:
            stream.write(b"latin-1 name")
        server = start_server(self, ws)
        save_ok(server, goal="odd names")
        self.assertEqual(len(ws.checkpoint()["modifiedFiles"]), 1)
        full = load_full(server)
        self.assertEqual(full["drift"]["changedSince"], [], "the same file must read as unchanged")
        self.assertEqual(full["drift"]["newSince"], [])


    def test_paths_in_an_edited_checkpoint_never_lead_outside_the_project(self):
        ws = Workspace(self)
        outside = write(ws.home, "secret.txt", "outside the project")
        real_hash = blob_sha(b"outside the project")
        server = start_server(self, ws)
        save_ok(server, goal="g")
        doc = ws.checkpoint()
        doc["modifiedFiles"] = [{"path": "../secret.txt", "status": "M", "source": "git", "hash": real_hash},
                                {"path": outside, "status": "M", "source": "agent", "hash": real_hash}]
        ws.write(CHECKPOINT, json.dumps(doc))
        full = load_full(server)
        # Had the server hashed the outside file, its hash would match and it would not be flagged.
        self.assertEqual(sorted(full["drift"]["changedSince"]), sorted(["../secret.txt", outside]))
        save_ok(server, goal="g", mode="merge")
        paths = [f["path"] for f in ws.checkpoint()["modifiedFiles"]]
        self.assertNotIn("../secret.txt", paths)
        self.assertNotIn(outside, paths)


# ════════════════════════════════════════════════════════════════════════════
# 10. Root resolution: which project folder a call is about (SPEC section 5)
# ════════════════════════════════════════════════════════════════════════════
# A root the client answers with roots/list is in 13.3 (and in 13.2 for 2026-07-28): there it
# reads as what it is, an exchange of the protocol, with the waiting and cancelling around it.

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


class TestE2eRoots(unittest.TestCase):
    def setUp(self):
        self.ws = Workspace(self)
        self.dirs = {}
        for name in ("argument", "env", "claude", "cwd"):
            self.dirs[name] = os.path.join(self.ws.home, name)
            os.makedirs(self.dirs[name])

    def test_root_precedence(self):
        d = self.dirs
        cases = [
            ("projectRoot argument wins", {"CHECKPOINT_PROJECT_ROOT": d["env"], "CLAUDE_PROJECT_DIR": d["claude"]},
             d["argument"], "argument"),
            ("CHECKPOINT_PROJECT_ROOT next", {"CHECKPOINT_PROJECT_ROOT": d["env"], "CLAUDE_PROJECT_DIR": d["claude"]},
             None, "env"),
            ("CLAUDE_PROJECT_DIR without roots", {"CLAUDE_PROJECT_DIR": d["claude"]}, None, "claude"),
            ("the working directory last", {}, None, "cwd"),
        ]
        for name, extra, argument, expected in cases:
            with self.subTest(name):
                server = start_server(self, self.ws, cwd=d["cwd"], env=dict(self.ws.env, **extra))
                arguments = {"goal": name} if argument is None else {"goal": name, "projectRoot": argument}
                result = save_ok(server, **arguments)
                self.assertEqual(result["structuredContent"]["path"], os.path.join(d[expected], CHECKPOINT))
                with open(os.path.join(d[expected], CHECKPOINT), encoding="utf-8") as stream:
                    self.assertEqual(json.load(stream)["goal"]["primary"], name)
                self.assertIn(d[expected], server.load(**({} if argument is None else {"projectRoot": argument})))

    def test_relative_project_root_is_refused(self):
        server = start_server(self, self.ws, cwd=self.ws.home)
        for tool, arguments in (("save_session_checkpoint", {"goal": "g", "projectRoot": "project"}),
                                ("load_session_checkpoint", {"projectRoot": "project"})):
            with self.subTest(tool=tool):
                result = server.call(tool, arguments)
                self.assertIs(result.get("isError"), True, result)
                self.assertIn("projectRoot must be an absolute path", result["content"][0]["text"])
        self.assertNotIn(CHECKPOINT, os.listdir(self.ws.repo))
        self.assertNotIn(CHECKPOINT, os.listdir(self.ws.home))

    def test_a_relative_root_from_the_environment_is_refused_in_words_for_people(self):
        env = dict(self.ws.env, CHECKPOINT_PROJECT_ROOT="project")
        for args, stdin in ((("show",), None), (("hook", "session-start"), b"{}")):
            with self.subTest(args):
                proc = self.ws.run_cli(*args, env=env, cwd=self.ws.home, stdin=stdin)
                out = proc.stderr.decode()
                self.assertIn("The project root must be an absolute path (got 'project' from CHECKPOINT_PROJECT_ROOT)", out)
                self.assertNotIn("projectRoot", out)

    def test_filesystem_root_and_home_are_refused(self):
        root_had_file = os.path.lexists(os.path.join(os.sep, CHECKPOINT))
        cases = [("projectRoot /", self.ws.repo, {"projectRoot": os.sep}),
                 ("projectRoot home", self.ws.repo, {"projectRoot": self.ws.home}),
                 ("started in /", os.sep, {}), ("started in home", self.ws.home, {})]
        for name, cwd, arguments in cases:
            with self.subTest(name):
                server = start_server(self, self.ws, cwd=cwd)
                result = server.save(goal="must not land", **arguments)
                self.assertIs(result.get("isError"), True, result)
                self.assertIn("projectRoot", result["content"][0]["text"])
        self.assertNotIn(CHECKPOINT, os.listdir(self.ws.home))
        self.assertEqual(os.path.lexists(os.path.join(os.sep, CHECKPOINT)), root_had_file)

    def test_nonexistent_project_root_is_an_error(self):
        server = start_server(self, self.ws)
        missing = os.path.join(self.ws.home, "no", "such", "folder")
        result = server.save(goal="g", projectRoot=missing)
        self.assertIs(result.get("isError"), True, result)
        self.assertIn(missing, result["content"][0]["text"])
        self.assertFalse(os.path.exists(missing))

    def test_symlinked_root_is_resolved(self):
        link = os.path.join(self.ws.home, "link-to-project")
        os.symlink(self.ws.repo, link)
        server = start_server(self, self.ws, cwd=self.dirs["cwd"])
        result = save_ok(server, goal="via a link", projectRoot=link)
        self.assertEqual(result["structuredContent"]["path"], os.path.join(self.ws.repo, CHECKPOINT))
        self.assertEqual(self.ws.checkpoint()["goal"]["primary"], "via a link")
        self.assertFalse(os.path.islink(os.path.join(self.ws.repo, CHECKPOINT)))


# ════════════════════════════════════════════════════════════════════════════
# 11. Services: code snapshots; save, load and the hooks (SPEC sections 3, 4 and 10)
# ════════════════════════════════════════════════════════════════════════════

# ── 11.1 Code snapshots: snapshot, list, diff, restore, forget, end to end (SPEC section 10) ──
# Written from SPEC section 10 by someone who had not seen the code: every test runs the
# real program on a real repository and checks JSON shapes, exit codes, refs and the disk.

PREFIX = "refs/claude-checkpoint/"
HEX40 = re.compile(r"^[0-9a-f]{40}$")
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
SECRET_NAMES = (".env", ".env.local", "key.pem", "keys/id_rsa", ".npmrc", ".netrc", "credentials.json",
                "config/client_secret_1234.apps.googleusercontent.com.json", "service-account-prod.json",
                "deploy/secrets.yaml", "secrets.yml", "kubeconfig", "Credentials.JSON")


# Helpers: the command line on real repositories, git facts read back

def cli(ws: Workspace, *args: str, root: str | None = None, cwd: str | None = None, env: dict | None = None,
        stdin: bytes = b"") -> subprocess.CompletedProcess:
    """The real program: `python3 claude_checkpoint.py --root ROOT ARGS...`."""
    root = root or ws.repo
    return run_in_process(["--root", root, *args], stdin, env or ws.env, cwd or root)


def start(ws: Workspace, *args: str, root: str | None = None, env: dict | None = None) -> subprocess.Popen:
    root = root or ws.repo
    return subprocess.Popen([*PROGRAM, "--root", root, *args], cwd=root, env=env or ws.env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def text(proc) -> str:
    return (proc.stdout or b"").decode(errors="replace") + (proc.stderr or b"").decode(errors="replace")


def ok(test: unittest.TestCase, proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    test.assertEqual(proc.returncode, 0, text(proc))
    test.assertNotIn(b"Traceback", proc.stderr)
    return proc


def ok_json(test: unittest.TestCase, proc: subprocess.CompletedProcess):
    ok(test, proc)
    try:
        return json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(f"stdout is not one JSON document: {proc.stdout[:500]!r}; stderr: {proc.stderr[:500]!r}")


def failed(test: unittest.TestCase, proc: subprocess.CompletedProcess, *codes: int) -> str:
    """The command failed with one of `codes`, said why, and did not crash."""
    test.assertIn(proc.returncode, codes, text(proc))
    test.assertNotIn(b"Traceback", proc.stderr)
    message = text(proc).strip()
    test.assertTrue(message, "a failure must come with a message")
    return message


def snapshot(test, ws, *args: str, root=None, env=None, cwd=None) -> dict:
    return ok_json(test, cli(ws, "snapshot", "--json", *args, root=root, env=env, cwd=cwd))


def listing(test, ws, *args: str, root=None, env=None) -> list:
    return ok_json(test, cli(ws, "list", "--json", *args, root=root, env=env))


def git_raw(ws: Workspace, *args: str, cwd: str | None = None, check: bool = True) -> bytes:
    proc = subprocess.run(["git", *args], cwd=cwd or ws.repo, env=ws.env, stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=TIMEOUT)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr.decode(errors='replace')}")
    return proc.stdout


def refs(ws: Workspace) -> dict:
    """refname -> object id of every ref under refs/claude-checkpoint/."""
    out = ws.git("for-each-ref", "--format=%(objectname) %(refname)", PREFIX)
    return {line.split(" ", 1)[1]: line.split(" ", 1)[0] for line in out.splitlines() if line.strip()}


def other_refs(ws: Workspace) -> str:
    out = ws.git("for-each-ref", "--format=%(objectname) %(refname)")
    return "\n".join(line for line in out.splitlines() if PREFIX not in line)


def git_facts(ws: Workspace) -> dict:
    """Everything of the user's git state that the rewind must never touch."""
    logs = os.path.join(ws.repo, ".git", "logs")
    log_files = {}
    for folder, _, names in os.walk(logs):
        for name in names:
            path = os.path.join(folder, name)
            log_files[os.path.relpath(path, logs)] = read(path)
    return {"refs": other_refs(ws), "stash": ws.git("stash", "list"), "reflog": ws.git("reflog"),
            "HEAD": read(os.path.join(ws.repo, ".git", "HEAD")),
            "index": read(os.path.join(ws.repo, ".git", "index")), "logs": log_files}


def tree(ws: Workspace, commit: str) -> dict:
    """path (bytes, repository-relative) -> (mode, type, object id) of a commit's whole tree."""
    out = git_raw(ws, "ls-tree", "-r", "-z", "--full-tree", commit)
    entries = {}
    for record in out.split(b"\0"):
        if record:
            meta, path = record.split(b"\t", 1)
            mode, kind, sha = meta.decode().split()
            entries[path] = (mode, kind, sha)
    return entries


def blob(ws: Workspace, commit: str, path: str | bytes) -> bytes:
    entry = tree(ws, commit).get(os.fsencode(path))
    if entry is None:
        raise AssertionError(f"{path!r} is not in the snapshot {commit}")
    return git_raw(ws, "cat-file", "blob", entry[2])


def tree_of(ws: Workspace, commit: str) -> str:
    return ws.git("rev-parse", f"{commit}^{{tree}}").strip()


def parents(ws: Workspace, commit: str) -> list:
    return ws.git("rev-list", "--parents", "-n", "1", commit).split()[1:]


def read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as stream:
            return stream.read()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


def state(root: str, skip_git: bool = True) -> dict:
    """Every file and symlink under root (bytes paths), with its type, exec bit and content or target."""
    found = {}
    base = os.fsencode(root)
    for folder, dirs, names in os.walk(base):
        if skip_git and folder == base and b".git" in dirs:
            dirs.remove(b".git")
        if folder == base:  # the product's own lock or temporary files are not the user's state
            names = [n for n in names if not n.startswith(b".claude-checkpoint")
                     or n in (b".claude-checkpoint", b".claude-checkpoint.prev")]
        for name in list(dirs):
            path = os.path.join(folder, name)
            if os.path.islink(path):
                dirs.remove(name)
                found[os.path.relpath(path, base)] = ("link", os.readlink(path))
        for name in names:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, base)
            if os.path.islink(path):
                found[rel] = ("link", os.readlink(path))
            else:
                found[rel] = ("file", bool(os.stat(path).st_mode & stat.S_IXUSR), read(path))
    return found


def chmod_x(path: str) -> None:
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def is_exec(path: str) -> bool:
    return bool(os.stat(path).st_mode & stat.S_IXUSR)


def ref_targets(ws: Workspace) -> set:
    return set(refs(ws).values())


def skipped_paths(doc: dict) -> dict:
    return {entry["path"].rstrip("/"): entry["reason"] for entry in doc["skipped"]}


def changes(doc: dict) -> dict:
    return {entry["path"]: entry["status"] for entry in doc["changes"]}


# ── snapshot: what goes in ──

class TestSnapshotContent(unittest.TestCase):
    """What a snapshot holds: modified, deleted, untracked files, raw bytes, modes, odd names."""

    def assert_keys(self, doc: dict, keys: set) -> None:
        """The documented keys are all there (extra keys are not forbidden by the spec)."""
        self.assertLessEqual(keys, set(doc), doc)
        for entry in doc["skipped"]:
            self.assertLessEqual({"path", "reason"}, set(entry), entry)

    def test_captures_modified_deleted_and_untracked_files_on_top_of_head(self):
        ws = Workspace(self, files={"README.md": "# demo\n", "src/app.py": "print('hi')\n", "gone.txt": "bye\n"})
        head = ws.head()
        ws.write("src/app.py", "print('changed')\n")
        os.remove(os.path.join(ws.repo, "gone.txt"))
        ws.write("docs/new.md", "new file\n")
        proc = cli(ws, "snapshot", "--json")
        doc = ok_json(self, proc)
        self.assert_keys(doc, {"id", "commit", "createdAt", "kind", "files", "skipped", "reused"})
        self.assertIsInstance(doc["id"], str)
        self.assertTrue(doc["id"])
        self.assertRegex(doc["commit"], HEX40)
        self.assertRegex(doc["createdAt"], ISO)
        self.assertEqual(doc["kind"], "manual")
        self.assertEqual(doc["files"], 3)
        self.assertEqual(doc["skipped"], [])
        self.assertIs(doc["reused"], False)
        commit = doc["commit"]
        self.assertIn(commit, ref_targets(ws), "a snapshot is kept under refs/claude-checkpoint/")
        self.assertTrue(all(name.startswith(PREFIX) for name in refs(ws)))
        self.assertEqual(parents(ws, commit), [head], "its parent is HEAD")
        entries = tree(ws, commit)
        self.assertEqual(blob(ws, commit, "src/app.py"), b"print('changed')\n")
        self.assertEqual(blob(ws, commit, "docs/new.md"), b"new file\n")
        self.assertEqual(blob(ws, commit, "README.md"), b"# demo\n")
        self.assertNotIn(b"gone.txt", entries)
        self.assertEqual(set(entries), {b"README.md", b"src/app.py", b"docs/new.md"})

    def test_text_output_names_the_snapshot(self):
        ws = Workspace(self)
        ws.write("src/app.py", "print('changed')\n")
        first = snapshot(self, ws)
        proc = ok(self, cli(ws, "snapshot"))
        self.assertIn(first["id"], text(proc), "nothing changed: the text names the reused snapshot")

    def test_message_and_kind_are_in_the_commit_message(self):
        ws = Workspace(self)
        ws.write("src/app.py", "print('changed')\n")
        doc = snapshot(self, ws, "-m", "before the big refactor")
        message = ws.git("log", "-1", "--format=%B", doc["commit"])
        self.assertIn("before the big refactor", message)
        self.assertIn("manual", message)

    def test_fixed_identity_whatever_the_user_environment_says(self):
        ws = Workspace(self)
        ws.write("src/app.py", "print('changed')\n")
        env = dict(ws.env, GIT_AUTHOR_NAME="Someone Else", GIT_AUTHOR_EMAIL="else@example.org",
                   GIT_COMMITTER_NAME="Someone Else", GIT_COMMITTER_EMAIL="else@example.org")
        doc = snapshot(self, ws, env=env)
        who = ws.git("log", "-1", "--format=%an <%ae> %cn <%ce>", doc["commit"])
        self.assertNotIn("Someone Else", who)
        self.assertNotIn("else@example.org", who)

    def test_raw_content_no_clean_filter_no_eol_conversion_and_restore_runs_no_smudge(self):
        ws = Workspace(self, files={"notes.txt": "one\ntwo\n", "README.md": "# demo\n"})
        clean_marker = os.path.join(ws.home, "clean-ran")
        smudge_marker = os.path.join(ws.home, "smudge-ran")
        ws.git("config", "filter.marker.clean", f"touch '{clean_marker}'; cat")
        ws.git("config", "filter.marker.smudge", f"touch '{smudge_marker}'; cat")
        ws.git("config", "core.autocrlf", "true")
        ws.write(".gitattributes", "* text=auto eol=crlf\n*.txt filter=marker\n")
        raw = {"notes.txt": b"one\r\ntwo\r\nthree\r\n", "fresh.txt": b"a\r\nb\r\n", "lf.txt": b"x\ny\n"}
        for rel, data in raw.items():
            ws.write(rel, data)
        doc = snapshot(self, ws)
        for rel, data in raw.items():
            with self.subTest(rel):
                self.assertEqual(git_raw(ws, "cat-file", "blob", f"{doc['commit']}:{rel}"), data)
        self.assertFalse(os.path.exists(clean_marker), "the clean filter ran during the snapshot")
        for rel in raw:
            ws.write(rel, b"overwritten\n")
        ok(self, cli(ws, "restore", doc["id"], "--yes"))
        for rel, data in raw.items():
            with self.subTest(restored=rel):
                self.assertEqual(read(os.path.join(ws.repo, rel)), data)
        self.assertFalse(os.path.exists(clean_marker), "the clean filter ran")
        self.assertFalse(os.path.exists(smudge_marker), "the smudge filter ran during the restore")

    def test_symlinks_stay_symlinks_and_the_executable_bit_is_kept(self):
        ws = Workspace(self, files={"README.md": "# demo\n", "tool.sh": "echo tracked\n", "lib/x.py": "x = 1\n"})
        os.symlink("README.md", os.path.join(ws.repo, "link"))
        os.symlink("lib", os.path.join(ws.repo, "dirlink"))
        ws.write("run.sh", "#!/bin/sh\necho hi\n")
        chmod_x(os.path.join(ws.repo, "run.sh"))
        chmod_x(os.path.join(ws.repo, "tool.sh"))
        ws.write("plain.txt", "plain\n")
        doc = snapshot(self, ws)
        entries = tree(ws, doc["commit"])
        self.assertEqual(entries[b"link"][0], "120000")
        self.assertEqual(git_raw(ws, "cat-file", "blob", entries[b"link"][2]), b"README.md")
        self.assertEqual(entries[b"dirlink"][0], "120000")
        self.assertEqual(git_raw(ws, "cat-file", "blob", entries[b"dirlink"][2]), b"lib")
        self.assertFalse(any(p.startswith(b"dirlink/") for p in entries), "nothing through the symlinked folder")
        self.assertEqual(entries[b"run.sh"][0], "100755")
        self.assertEqual(entries[b"tool.sh"][0], "100755", "a tracked file made executable")
        self.assertEqual(entries[b"plain.txt"][0], "100644")
        self.assertEqual(entries[b"README.md"][0], "100644")

    def test_file_names_that_are_not_utf8_are_kept_byte_for_byte_and_restored(self):
        ws = Workspace(self)
        names = [b"caf\xe9.txt", b"dir\xff/inner\xfe.txt"]
        base = os.fsencode(ws.repo)
        for name in names:
            path = os.path.join(base, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as stream:
                stream.write(b"content of " + name + b"\n")
        doc = snapshot(self, ws)
        entries = tree(ws, doc["commit"])
        for name in names:
            with self.subTest(name=name):
                self.assertIn(name, entries)
                self.assertEqual(git_raw(ws, "cat-file", "blob", entries[name][2]), b"content of " + name + b"\n")
        for name in names:
            os.remove(os.path.join(base, name))
        os.rmdir(os.path.join(base, b"dir\xff"))
        ok(self, cli(ws, "restore", doc["id"], "--yes"))
        for name in names:
            with self.subTest(restored=name):
                self.assertEqual(read(os.path.join(base, name)), b"content of " + name + b"\n")

    def test_every_name_git_can_hold_round_trips_through_snapshots_diff_and_restore(self):
        ws = Workspace(self)
        names = [b"new\nline.txt", b"tab\there.txt", b'quo"te.txt', b"it's.txt", b"back\\slash.txt",
                 b"bad\xff.txt", b"dir\nwith newline/inner\n.txt", b"\"quoted dir\"/a\tb.txt", b" lead and trail "]
        base = os.fsencode(ws.repo)

        def put(content: bytes) -> None:
            for name in names:
                path = os.path.join(base, name)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as stream:
                    stream.write(content + name)

        put(b"first ")
        first = snapshot(self, ws)
        self.assertEqual(first["skipped"], [])
        put(b"second ")  # the next snapshot starts from the first one's cache: only what changed is rebuilt
        second = snapshot(self, ws)
        for doc, content in ((first, b"first "), (second, b"second ")):
            entries = tree(ws, doc["commit"])
            for name in names:
                with self.subTest(snapshot=doc["id"], name=name):
                    self.assertIn(name, entries)
                    self.assertEqual(git_raw(ws, "cat-file", "blob", entries[name][2]), content + name)
        # The cache's path reads a folder whose name holds a newline by its id, not by a line of cat-file input.
        store = cc.open_snapshots(cc.Git(ws.repo), ws.repo)
        folders = store._read_trees(tree_of(ws, second["commit"]), ["", "dir\nwith newline", "no such folder"])
        self.assertEqual(set(folders["dir\nwith newline"]), {b"inner\n.txt"})
        self.assertEqual(folders["no such folder"], {})
        diff = ok_json(self, cli(ws, "diff", first["id"], "--json"))
        self.assertEqual({os.fsencode(p) for p in changes(diff)}, set(names))
        ok(self, cli(ws, "restore", first["id"], "--yes"))
        for name in names:
            with self.subTest(restored=name):
                self.assertEqual(read(os.path.join(base, name)), b"first " + name)
        for name in names:
            os.remove(os.path.join(base, name))
        ok(self, cli(ws, "restore", second["id"], "--yes"))
        for name in names:
            with self.subTest(restored_after_delete=name):
                self.assertEqual(read(os.path.join(base, name)), b"second " + name)

    def test_ignored_files_and_checkpoint_files_are_left_out_silently(self):
        ws = Workspace(self, files={"README.md": "# demo\n", ".gitignore": "build/\n*.log\n"})
        ok(self, cli(ws, "save", "--goal", "first"))
        ok(self, cli(ws, "save", "--goal", "second"))  # leaves .claude-checkpoint.prev too
        self.assertTrue(os.path.exists(os.path.join(ws.repo, ".claude-checkpoint.prev")))
        ws.write("build/out.bin", b"\x00\x01binary")
        ws.write("app.log", "log line\n")
        ws.write("kept.txt", "kept\n")
        doc = snapshot(self, ws)
        entries = tree(ws, doc["commit"])
        self.assertIn(b"kept.txt", entries)
        for path in entries:
            self.assertFalse(path.startswith(b"build/") or path.endswith(b".log"), path)
            self.assertFalse(path.startswith(b".claude-checkpoint"), path)
        self.assertEqual(doc["skipped"], [], "ignored and checkpoint files are left out silently")

    def test_nested_repositories_big_untracked_files_and_secret_named_files_are_skipped_with_a_reason(self):
        ws = Workspace(self, files={"README.md": "# demo\n", "tracked_big.bin": "small at first\n"})
        env = dict(ws.env, CHECKPOINT_SNAPSHOT_MAX_BYTES="1000")
        nested = os.path.join(ws.repo, "nested")
        os.makedirs(nested)
        git(nested, "init", "-q", "-b", "main", env=ws.env)
        write(nested, "inner.txt", "inside the nested repository\n")
        git(nested, "add", "-A", env=ws.env)
        git(nested, "commit", "-qm", "nested", env=ws.env)
        ws.write("big.bin", b"x" * 5000)
        ws.write("small.txt", "small\n")
        ws.write("tracked_big.bin", b"y" * 5000)  # tracked files are always captured
        for rel in SECRET_NAMES:
            ws.write(rel, "SECRET=do-not-copy\n")
        doc = snapshot(self, ws, env=env)
        skipped = skipped_paths(doc)
        for rel in ("big.bin", *SECRET_NAMES):
            with self.subTest(skipped=rel):
                self.assertIn(rel, skipped, doc["skipped"])
                self.assertIsInstance(skipped[rel], str)
                self.assertTrue(skipped[rel].strip(), "every skipped path has a reason")
        self.assertTrue(any(p == "nested" or p.startswith("nested/") for p in skipped), doc["skipped"])
        entries = tree(ws, doc["commit"])
        for rel in ("big.bin", *SECRET_NAMES):
            self.assertNotIn(os.fsencode(rel), entries)
        self.assertFalse(any(p.startswith(b"nested/") for p in entries), "the nested repository's contents")
        self.assertEqual(blob(ws, doc["commit"], "small.txt"), b"small\n")
        self.assertEqual(blob(ws, doc["commit"], "tracked_big.bin"), b"y" * 5000)
        self.assertNotIn("tracked_big.bin", skipped)
        self.assertNotIn("small.txt", skipped)

    def test_a_committed_env_file_is_captured(self):
        ws = Workspace(self, files={"README.md": "# demo\n", ".env": "DEBUG=0\n"})
        ws.write(".env", "DEBUG=1\n")
        doc = snapshot(self, ws)
        self.assertEqual(blob(ws, doc["commit"], ".env"), b"DEBUG=1\n")
        self.assertNotIn(".env", skipped_paths(doc))

    def test_before_the_first_commit_there_is_no_parent_and_restore_works(self):
        ws = Workspace(self, commit=False)
        doc = snapshot(self, ws)
        self.assertEqual(parents(ws, doc["commit"]), [])
        self.assertEqual(blob(ws, doc["commit"], "README.md"), b"# demo\n")
        self.assertEqual(blob(ws, doc["commit"], "src/app.py"), b"print('hi')\n")
        ws.write("README.md", "changed\n")
        ws.write("extra.txt", "extra\n")
        ok(self, cli(ws, "restore", doc["id"], "--yes"))
        self.assertEqual(read(os.path.join(ws.repo, "README.md")), b"# demo\n")
        self.assertFalse(os.path.exists(os.path.join(ws.repo, "extra.txt")))
        self.assertEqual(ws.git("rev-parse", "-q", "--verify", "HEAD", check=False).strip(), "", "still unborn")
        self.assertEqual(ws.git("branch", "--list"), "", "no branch was created")

    def test_detached_head_is_the_parent_and_listed_without_a_branch(self):
        ws = Workspace(self)
        ws.write("b.txt", "b\n")
        ws.git("add", "b.txt")
        ws.git("commit", "-qm", "second")
        ws.git("checkout", "-q", "--detach", "HEAD~1")
        head = ws.head()
        ws.write("README.md", "detached work\n")
        doc = snapshot(self, ws)
        self.assertEqual(parents(ws, doc["commit"]), [head])
        entry = listing(self, ws)[0]
        self.assertEqual(entry["id"], doc["id"])
        self.assertIsNone(entry["branch"])
        self.assertEqual(entry["head"], head)
        self.assertEqual(ws.git("rev-parse", "HEAD").strip(), head)

    def test_sparse_checkout_files_outside_the_set_are_not_recorded_as_deleted(self):
        ws = Workspace(self, files={"README.md": "# demo\n", "dir/a.txt": "a\n", "other/b.txt": "b\n"})
        ws.git("sparse-checkout", "set", "dir")
        self.assertFalse(os.path.exists(os.path.join(ws.repo, "other", "b.txt")))
        ws.write("dir/a.txt", "a changed\n")
        doc = snapshot(self, ws)
        self.assertEqual(blob(ws, doc["commit"], "dir/a.txt"), b"a changed\n")
        self.assertEqual(blob(ws, doc["commit"], "other/b.txt"), b"b\n", "outside the sparse set: as in HEAD")
        self.assertFalse(os.path.exists(os.path.join(ws.repo, "other", "b.txt")), "nothing was checked out")


# ── snapshot: refs, reuse, retention, git discipline ──

class TestSnapshotGitDiscipline(unittest.TestCase):
    """Private refs, reuse, retention; the user's index, lock, hooks, refs and reflogs left alone."""

    def test_unchanged_tree_reuses_the_newest_snapshot(self):
        ws = Workspace(self)
        ws.write("src/app.py", "print('changed')\n")
        first = snapshot(self, ws)
        self.assertIs(first["reused"], False)
        again = snapshot(self, ws)
        self.assertIs(again["reused"], True)
        self.assertEqual((again["id"], again["commit"]), (first["id"], first["commit"]))
        self.assertEqual(len(refs(ws)), 1)
        ws.write("src/app.py", "print('changed again')\n")
        third = snapshot(self, ws)
        self.assertIs(third["reused"], False)
        self.assertNotEqual(third["id"], first["id"])
        self.assertEqual(len(refs(ws)), 2)

    def test_retention_keeps_the_newest_n(self):
        ws = Workspace(self)
        env = dict(ws.env, CHECKPOINT_SNAPSHOTS_KEEP="3")
        ids = []
        for number in range(5):
            ws.write("src/app.py", f"print({number})\n")
            ids.append(snapshot(self, ws, env=env)["id"])
        self.assertEqual(len(set(ids)), 5)
        self.assertEqual(len(refs(ws)), 3)
        self.assertEqual([entry["id"] for entry in listing(self, ws, env=env)], ids[:1:-1])

    def test_never_creates_branches_tags_stash_or_reflog_entries(self):
        ws = Workspace(self)
        ws.git("tag", "v1")
        ws.git("branch", "feature")
        ws.write("README.md", "stashed\n")
        ws.git("stash", "push", "-q")
        before = git_facts(ws)
        ws.write("src/app.py", "print('one')\n")
        ws.write("new.txt", "new\n")
        first = snapshot(self, ws)
        ws.write("src/app.py", "print('two')\n")
        ok(self, cli(ws, "restore", first["id"], "--yes"))
        ok(self, cli(ws, "forget", first["id"]))
        after = git_facts(ws)
        for key in ("refs", "stash", "reflog", "HEAD", "index", "logs"):
            self.assertEqual(after[key], before[key], key)
        self.assertFalse(os.path.exists(os.path.join(ws.repo, ".git", "logs", "refs", "claude-checkpoint")))
        self.assertTrue(refs(ws), "the before-restore snapshot is still kept")

    def test_no_reflog_even_when_the_user_logs_every_ref_update(self):
        ws = Workspace(self)
        ws.git("config", "core.logAllRefUpdates", "always")
        ws.write("src/app.py", "print('one')\n")
        snapshot(self, ws)
        ws.write("src/app.py", "print('two')\n")
        snapshot(self, ws)
        logs = os.path.join(ws.repo, ".git", "logs", "refs")
        found = [os.path.join(f, n) for f, _, names in os.walk(logs) for n in names if "claude-checkpoint" in f]
        self.assertEqual(found, [])

    def test_the_users_index_bytes_are_unchanged_with_a_staged_hunk(self):
        ws = Workspace(self)
        ws.write("src/app.py", "print('staged')\n")
        ws.git("add", "src/app.py")
        ws.write("src/app.py", "print('staged')\nprint('unstaged')\n")
        index = os.path.join(ws.repo, ".git", "index")
        before = read(index)
        before_mtime = os.stat(index).st_mtime_ns
        doc = snapshot(self, ws)
        self.assertEqual(read(index), before)
        self.assertEqual(os.stat(index).st_mtime_ns, before_mtime)
        self.assertEqual(blob(ws, doc["commit"], "src/app.py"), b"print('staged')\nprint('unstaged')\n",
                         "the working tree, not the staged content")
        ws.write("src/app.py", "print('later')\n")
        ok(self, cli(ws, "restore", doc["id"], "--yes"))
        self.assertEqual(read(index), before, "restore never touches the index")
        self.assertEqual(ws.git("diff", "--cached", "--name-only").split(), ["src/app.py"])
        self.assertEqual(ws.git("show", ":src/app.py"), "print('staged')\n", "the staged hunk is as it was")

    def test_works_while_index_lock_is_held_and_leaves_it_alone(self):
        ws = Workspace(self)
        lock = os.path.join(ws.repo, ".git", "index.lock")
        write(ws.repo, ".git/index.lock", b"held by another process")
        self.addCleanup(lambda: os.path.exists(lock) and os.remove(lock))
        ws.write("src/app.py", "print('while locked')\n")
        doc = snapshot(self, ws)
        self.assertIs(doc["reused"], False)
        self.assertEqual(blob(ws, doc["commit"], "src/app.py"), b"print('while locked')\n")
        self.assertEqual(read(lock), b"held by another process")
        self.assertEqual(len(listing(self, ws)), 1)
        self.assertEqual(read(lock), b"held by another process")

    def test_no_git_hook_fsmonitor_or_signing_program_ever_runs(self):
        ws = Workspace(self)
        markers = os.path.join(ws.home, "markers")
        os.makedirs(markers)
        hooks = os.path.join(ws.repo, ".git", "hooks")
        os.makedirs(hooks, exist_ok=True)
        for name in ("pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "reference-transaction",
                     "post-checkout", "post-index-change", "post-rewrite"):
            path = write(hooks, name, f"#!/bin/sh\ntouch '{markers}/{name}'\nexit 0\n")
            chmod_x(path)
        fsmonitor = write(ws.home, "fsmonitor.sh", f"#!/bin/sh\ntouch '{markers}/fsmonitor'\nexit 1\n")
        chmod_x(fsmonitor)
        signer = write(ws.home, "gpg.sh", f"#!/bin/sh\ntouch '{markers}/gpg'\nexit 1\n")
        chmod_x(signer)
        ws.git("config", "core.fsmonitor", fsmonitor)
        ws.git("config", "commit.gpgsign", "true")
        ws.git("config", "gpg.program", signer)
        ws.write("src/app.py", "print('one')\n")
        first = snapshot(self, ws)
        ws.write("src/app.py", "print('two')\n")
        ok(self, cli(ws, "save", "--goal", "with hooks around"))
        ok(self, cli(ws, "restore", first["id"], "--yes"))
        ok(self, cli(ws, "forget", first["id"]))
        self.assertEqual(sorted(os.listdir(markers)), [], "a hook, fsmonitor or signing program ran")

    def test_git_gc_prune_now_keeps_snapshots_and_restore_still_works(self):
        ws = Workspace(self)
        ws.write("src/app.py", "print('snapshotted')\n")
        ws.write("untracked.txt", "only in the snapshot\n")
        doc = snapshot(self, ws)
        ws.git("reflog", "expire", "--expire=now", "--all")
        ws.git("gc", "-q", "--prune=now")
        self.assertIn(doc["commit"], ref_targets(ws))
        ws.write("src/app.py", "print('later')\n")
        os.remove(os.path.join(ws.repo, "untracked.txt"))
        ok(self, cli(ws, "restore", doc["id"], "--yes"))
        self.assertEqual(read(os.path.join(ws.repo, "src/app.py")), b"print('snapshotted')\n")
        self.assertEqual(read(os.path.join(ws.repo, "untracked.txt")), b"only in the snapshot\n")

    def test_linked_worktrees_each_have_their_own_history(self):
        ws = Workspace(self)
        other = os.path.join(ws.home, "wt")
        ws.git("worktree", "add", "-q", other)
        ws.write("src/app.py", "print('main worktree')\n")
        write(other, "src/app.py", "print('linked worktree')\n")
        mine = snapshot(self, ws)
        theirs = snapshot(self, ws, root=other)
        self.assertNotEqual(mine["commit"], theirs["commit"])
        self.assertEqual([e["id"] for e in listing(self, ws)], [mine["id"]])
        self.assertEqual([e["id"] for e in listing(self, ws, root=other)], [theirs["id"]])
        self.assertEqual(blob(ws, theirs["commit"], "src/app.py"), b"print('linked worktree')\n")
        write(other, "src/app.py", "print('moved on')\n")
        ok(self, cli(ws, "restore", theirs["id"], "--yes", root=other))
        self.assertEqual(read(os.path.join(other, "src/app.py")), b"print('linked worktree')\n")
        self.assertEqual(read(os.path.join(ws.repo, "src/app.py")), b"print('main worktree')\n")

    def test_root_in_a_subfolder_covers_only_its_paths_relative_to_it(self):
        ws = Workspace(self, files={"README.md": "# demo\n", "src/app.py": "print('hi')\n",
                                    "src/lib/util.py": "u = 1\n", "docs/guide.md": "guide\n"})
        src = os.path.join(ws.repo, "src")
        head = ws.head()
        ws.write("README.md", "outside the root\n")
        ws.write("src/app.py", "print('inside')\n")
        ws.write("src/new.py", "new = 1\n")
        ws.write("docs/extra.md", "outside, untracked\n")
        ws.write("src/.env", "TOKEN=x\n")
        doc = snapshot(self, ws, root=src)
        self.assertEqual(list(skipped_paths(doc)), [".env"], "paths relative to the root")
        self.assertEqual(parents(ws, doc["commit"]), [head])
        entries = tree(ws, doc["commit"])
        self.assertEqual(blob(ws, doc["commit"], "src/app.py"), b"print('inside')\n")
        self.assertEqual(blob(ws, doc["commit"], "src/new.py"), b"new = 1\n")
        self.assertEqual(blob(ws, doc["commit"], "README.md"), b"# demo\n", "outside the root: HEAD's version")
        self.assertNotIn(b"docs/extra.md", entries)
        ws.write("src/app.py", "print('later')\n")
        os.remove(os.path.join(ws.repo, "src/new.py"))
        ws.write("src/lib/util.py", "u = 2\n")
        diff = ok_json(self, cli(ws, "diff", doc["id"], "--json", root=src))
        self.assertEqual(changes(diff), {"app.py": "M", "new.py": "A", "lib/util.py": "M"})
        ok(self, cli(ws, "restore", doc["id"], "--yes", root=src))
        self.assertEqual(read(os.path.join(ws.repo, "src/app.py")), b"print('inside')\n")
        self.assertEqual(read(os.path.join(ws.repo, "src/new.py")), b"new = 1\n")
        self.assertEqual(read(os.path.join(ws.repo, "src/lib/util.py")), b"u = 1\n")
        self.assertEqual(read(os.path.join(ws.repo, "README.md")), b"outside the root\n")
        self.assertEqual(read(os.path.join(ws.repo, "docs/extra.md")), b"outside, untracked\n")
        self.assertEqual(read(os.path.join(ws.repo, "src/.env")), b"TOKEN=x\n", "skipped: never deleted")

    def test_two_roots_in_one_repository_never_see_each_others_history(self):
        ws = Workspace(self, files={"a/one.txt": "1\n", "b/two.txt": "2\n"})
        a, b = os.path.join(ws.repo, "a"), os.path.join(ws.repo, "b")
        ws.write("a/one.txt", "1 changed\n")
        ws.write("b/two.txt", "2 changed\n")
        in_a = snapshot(self, ws, root=a)
        in_b = snapshot(self, ws, root=b)
        self.assertEqual([e["id"] for e in listing(self, ws, root=a)], [in_a["id"]])
        self.assertEqual([e["id"] for e in listing(self, ws, root=b)], [in_b["id"]])
        ok(self, cli(ws, "forget", "--all", root=a))
        self.assertEqual(listing(self, ws, root=a), [])
        self.assertEqual([e["id"] for e in listing(self, ws, root=b)], [in_b["id"]])
        self.assertEqual(set(refs(ws).values()), {in_b["commit"]})

    def run_together(self, ws: Workspace, roots: list) -> list:
        procs = [start(ws, "snapshot", "--json", root=root) for root in roots]
        docs = []
        for proc in procs:
            out, err = proc.communicate(timeout=TIMEOUT)
            self.assertEqual(proc.returncode, 0, err.decode(errors="replace"))
            self.assertNotIn(b"Traceback", err)
            docs.append(json.loads(out))
        targets = ref_targets(ws)
        for doc in docs:
            self.assertIn(doc["commit"], targets, "every answered snapshot is kept")
        return docs

    def test_two_snapshots_of_one_root_at_once_both_succeed(self):
        ws = Workspace(self)
        for round_number in range(3):
            ws.write("src/app.py", f"print({round_number})\n")
            ws.write(f"new{round_number}.txt", f"round {round_number}\n")
            docs = self.run_together(ws, [ws.repo, ws.repo])
            for doc in docs:
                self.assertEqual(blob(ws, doc["commit"], "src/app.py"), f"print({round_number})\n".encode())
                self.assertEqual(blob(ws, doc["commit"], f"new{round_number}.txt"), f"round {round_number}\n".encode())

    def test_two_snapshots_of_two_roots_with_different_content_at_once_both_succeed(self):
        ws = Workspace(self, files={"a/one.txt": "1\n", "b/two.txt": "2\n", "README.md": "# demo\n"})
        a, b = os.path.join(ws.repo, "a"), os.path.join(ws.repo, "b")
        for round_number in range(3):
            ws.write("a/one.txt", f"a round {round_number}\n")
            ws.write("b/two.txt", f"b round {round_number}\n")
            in_a, in_b = self.run_together(ws, [a, b])
            self.assertEqual(blob(ws, in_a["commit"], "a/one.txt"), f"a round {round_number}\n".encode())
            self.assertEqual(blob(ws, in_b["commit"], "b/two.txt"), f"b round {round_number}\n".encode())

    def test_not_a_repository_is_a_failure_with_a_message(self):
        ws = Workspace(self, init=False)
        failed(self, cli(ws, "snapshot", "--json"), 1)
        failed(self, cli(ws, "snapshot"), 1)


# ── list ──

class TestList(unittest.TestCase):
    """`list`: newest first, -n, empty list, shape, not a repository."""

    def test_newest_first_with_the_documented_fields(self):
        ws = Workspace(self)
        head = ws.head()
        ids = []
        for number in range(3):
            ws.write("src/app.py", f"print({number})\n")
            ids.append(snapshot(self, ws)["id"])
        os.remove(os.path.join(ws.repo, "README.md"))
        ws.write("new.txt", "new\n")
        ids.append(snapshot(self, ws)["id"])
        entries = listing(self, ws)
        self.assertEqual([e["id"] for e in entries], ids[::-1])
        for entry in entries:
            self.assertLessEqual({"id", "commit", "createdAt", "kind", "branch", "head", "goal", "files"}, set(entry),
                                 entry)
            self.assertRegex(entry["commit"], HEX40)
            self.assertRegex(entry["createdAt"], ISO)
            self.assertEqual(entry["kind"], "manual")
            self.assertEqual(entry["branch"], "main")
            self.assertEqual(entry["head"], head)
        self.assertEqual(entries[0]["files"], 3, "src/app.py modified, README.md deleted, new.txt untracked")
        self.assertEqual(entries[-1]["files"], 1)
        self.assertEqual(set(ref_targets(ws)), {e["commit"] for e in entries})

    def test_n_limits_the_count(self):
        ws = Workspace(self)
        ids = []
        for number in range(3):
            ws.write("src/app.py", f"print({number})\n")
            ids.append(snapshot(self, ws)["id"])
        self.assertEqual([e["id"] for e in listing(self, ws, "-n", "2")], ids[:0:-1])
        self.assertEqual([e["id"] for e in listing(self, ws, "-n", "1")], ids[-1:])

    def test_text_lists_one_line_per_snapshot_with_its_id(self):
        ws = Workspace(self)
        ids = []
        for number in range(2):
            ws.write("src/app.py", f"print({number})\n")
            ids.append(snapshot(self, ws, "-m", f"step {number}")["id"])
        out = text(ok(self, cli(ws, "list")))
        for snap_id in ids:
            self.assertIn(snap_id, out)
        self.assertLess(out.index(ids[1]), out.index(ids[0]), "newest first")

    def test_no_snapshot_yet_is_an_empty_list_and_exit_0(self):
        ws = Workspace(self)
        self.assertEqual(listing(self, ws), [])
        ok(self, cli(ws, "list"))
        ws.write("src/app.py", "print('x')\n")
        snapshot(self, ws)  # the empty answer above must come from a command that exists
        self.assertEqual(len(listing(self, ws)), 1)

    def test_not_a_repository_exits_1_with_a_message(self):
        ws = Workspace(self, init=False)
        failed(self, cli(ws, "list", "--json"), 1)
        failed(self, cli(ws, "list"), 1)


# ── diff ──

class TestDiff(unittest.TestCase):
    """`diff`: what restoring would change now, as statuses, a unified diff or a summary."""

    def setUp(self):
        self.ws = Workspace(self, files={"README.md": "# demo\n", "a.txt": "a in head\n", "gone.txt": "gone\n",
                                         "t.txt": "regular\n", "docs/guide.md": "guide\n"})
        ws = self.ws
        ws.write("a.txt", "a in snapshot\n")
        ws.write("new.txt", "only in the snapshot\n")
        os.remove(os.path.join(ws.repo, "gone.txt"))
        self.snap = snapshot(self, ws)
        ws.write("a.txt", "a now\n")                       # restore rewrites it: M
        os.remove(os.path.join(ws.repo, "new.txt"))         # restore creates it: A
        ws.write("gone.txt", "back again\n")                # restore deletes it: D
        ws.write("extra.txt", "made after\n")              # restore deletes it: D
        os.remove(os.path.join(ws.repo, "t.txt"))
        os.symlink("README.md", os.path.join(ws.repo, "t.txt"))  # restore makes it a file again: T
        ws.write("docs/guide.md", "guide changed\n")      # restore rewrites it: M

    def test_json_statuses_say_what_restore_would_do(self):
        doc = ok_json(self, cli(self.ws, "diff", self.snap["id"], "--json"))
        self.assertLessEqual({"id", "changes"}, set(doc), doc)
        self.assertEqual(doc["id"], self.snap["id"])
        self.assertEqual(changes(doc), {"a.txt": "M", "new.txt": "A", "gone.txt": "D", "extra.txt": "D",
                                        "t.txt": "T", "docs/guide.md": "M"})
        for entry in doc["changes"]:
            self.assertLessEqual({"path", "status"}, set(entry), entry)

    def test_diff_changes_nothing(self):
        before = state(self.ws.repo)
        refs_before = refs(self.ws)
        ok(self, cli(self.ws, "diff", self.snap["id"], "--json"))
        ok(self, cli(self.ws, "diff", self.snap["id"]))
        self.assertEqual(state(self.ws.repo), before)
        self.assertEqual(refs(self.ws), refs_before)

    def test_without_an_id_and_with_latest_it_uses_the_newest(self):
        self.assertEqual(ok_json(self, cli(self.ws, "diff", "--json"))["id"], self.snap["id"])
        self.assertEqual(ok_json(self, cli(self.ws, "diff", "latest", "--json"))["id"], self.snap["id"])

    def test_paths_limit_the_diff_relative_to_the_current_folder(self):
        doc = ok_json(self, cli(self.ws, "diff", self.snap["id"], "a.txt", "new.txt", "--json"))
        self.assertEqual(changes(doc), {"a.txt": "M", "new.txt": "A"})
        docs = os.path.join(self.ws.repo, "docs")
        doc = ok_json(self, cli(self.ws, "diff", self.snap["id"], "guide.md", "--json", cwd=docs, root=self.ws.repo))
        self.assertEqual(changes(doc), {"docs/guide.md": "M"}, "a path relative to the current folder")
        doc = ok_json(self, cli(self.ws, "diff", self.snap["id"], "docs", "--json"))
        self.assertEqual(changes(doc), {"docs/guide.md": "M"}, "a folder")
        doc = ok_json(self, cli(self.ws, "diff", self.snap["id"], os.path.join(self.ws.repo, "a.txt"), "--json"))
        self.assertEqual(changes(doc), {"a.txt": "M"}, "an absolute path inside the root")

    def test_unified_diff_without_color_when_not_on_a_terminal(self):
        out = ok(self, cli(self.ws, "diff", self.snap["id"], "a.txt")).stdout.decode()
        self.assertIn("---", out)
        self.assertIn("+++", out)
        lines = out.splitlines()
        self.assertTrue({"+a in snapshot", "-a in snapshot"} & set(lines), out)
        self.assertTrue({"+a now", "-a now"} & set(lines), out)
        self.assertNotIn("\x1b[", out)
        self.assertNotIn("new.txt", out, "limited to the given path")

    def test_stat_summarises_the_changes(self):
        out = ok(self, cli(self.ws, "diff", self.snap["id"], "--stat")).stdout.decode()
        self.assertTrue(out.strip())
        for path in ("a.txt", "new.txt", "extra.txt"):
            self.assertIn(path, out)
        self.assertNotIn("+a in snapshot", out)

    def test_unknown_id_exits_1_and_lists_the_newest_ids(self):
        self.ws.write("a.txt", "another state\n")
        second = snapshot(self, self.ws)
        for args in (("diff", "000000000", "--json"), ("diff", "000000000")):
            with self.subTest(args=args):
                message = failed(self, cli(self.ws, *args), 1)
                self.assertIn(second["id"], message)
                self.assertIn(self.snap["id"], message)

    def test_a_first_word_that_names_no_snapshot_and_no_path_is_an_error_listing_the_newest_ids(self):
        before = state(self.ws.repo)
        for command in (("diff",), ("diff", "--json"), ("restore",), ("restore", "--yes"), ("restore", "--json")):
            for word in ("3zz", "0000000", "nosuch.txt", "docs/nosuch.md"):
                with self.subTest(command=command, word=word):
                    message = failed(self, cli(self.ws, command[0], word, *command[1:]), 1)
                    self.assertIn(self.snap["id"], message, "the newest ids are listed")
                    self.assertIn(word, message)
                    self.assertNotIn("already match", message)
        self.assertEqual(state(self.ws.repo), before)

    def test_paths_that_exist_neither_in_the_snapshot_nor_the_work_tree_are_an_error(self):
        before = state(self.ws.repo)
        for command in (("diff", self.snap["id"], "a.txt", "nosuch.txt"), ("restore", "latest", "nosuch.txt", "--yes"),
                        ("restore", "a.txt", "nosuch/deeper.txt")):
            with self.subTest(command=command):
                message = failed(self, cli(self.ws, *command), 1)
                self.assertIn("nosuch", message)
        self.assertEqual(state(self.ws.repo), before)

    def test_a_first_word_that_is_a_path_in_the_snapshot_or_the_work_tree_uses_the_newest_snapshot(self):
        for word, expected in (("a.txt", {"a.txt": "M"}), ("new.txt", {"new.txt": "A"}),
                               ("extra.txt", {"extra.txt": "D"}), ("docs", {"docs/guide.md": "M"})):
            with self.subTest(word=word):
                doc = ok_json(self, cli(self.ws, "diff", word, "--json"))
                self.assertEqual(doc["id"], self.snap["id"])
                self.assertEqual(changes(doc), expected)

    def test_a_word_naming_both_a_snapshot_and_a_path_is_refused_saying_how_to_write_each(self):
        word = self.snap["id"][:6]
        self.ws.write(word, "a file named like the snapshot\n")
        before = state(self.ws.repo)
        for command in (("diff", word), ("restore", word, "--yes")):
            with self.subTest(command=command):
                message = failed(self, cli(self.ws, *command), 1)
                self.assertIn(f"./{word}", message)
                self.assertIn(self.snap["id"], message)
        self.assertEqual(state(self.ws.repo), before)
        self.assertEqual(changes(ok_json(self, cli(self.ws, "diff", f"./{word}", "--json"))), {word: "D"})
        self.assertEqual(ok_json(self, cli(self.ws, "diff", self.snap["commit"][:12], "--json"))["id"], self.snap["id"])

    def test_paths_outside_the_root_are_refused(self):
        write(self.ws.home, "outside.txt", "outside\n")
        for path in ("../outside.txt", ".git/config"):
            with self.subTest(path=path):
                failed(self, cli(self.ws, "diff", self.snap["id"], path, "--json"), 1, 2)


class TestNothingToActOn(unittest.TestCase):
    def test_diff_and_restore_exit_3_when_there_is_no_snapshot_yet(self):
        ws = Workspace(self)
        ws.write("src/app.py", "print('dirty')\n")
        before = state(ws.repo)
        for args in (("diff",), ("diff", "--json"), ("restore",), ("restore", "--yes"), ("restore", "--json")):
            with self.subTest(args=args):
                proc = cli(ws, *args)
                self.assertEqual(proc.returncode, 3, text(proc))
                self.assertNotIn(b"Traceback", proc.stderr)
        self.assertEqual(state(ws.repo), before)
        self.assertEqual(refs(ws), {}, "a restore with nothing to restore takes no snapshot")


# ── restore ──

class TestRestore(unittest.TestCase):
    """`restore`: dry run, --yes, the before-restore snapshot, undo, and paths."""

    def make(self) -> tuple:
        """A snapshot with modified, untracked-in-a-folder, executable and symlinked files, then changes."""
        ws = Workspace(self, files={"README.md": "# demo\n", "a.txt": "a in head\n", "b.txt": "b in head\n",
                                    "run.sh": "#!/bin/sh\necho run\n", "t.txt": "regular\n"})
        chmod_x(os.path.join(ws.repo, "run.sh"))
        ws.git("add", "run.sh")
        ws.git("commit", "-qm", "exec")
        ws.write("a.txt", "a in snapshot\n")
        ws.write("newdir/deep/n.txt", "untracked, deep\n")
        ws.write("tool.sh", "#!/bin/sh\necho tool\n")
        chmod_x(os.path.join(ws.repo, "tool.sh"))
        os.symlink("README.md", os.path.join(ws.repo, "lnk"))
        snap = snapshot(self, ws)
        expected = state(ws.repo)
        ws.write("a.txt", "a after\n")
        os.remove(os.path.join(ws.repo, "b.txt"))
        shutil.rmtree(os.path.join(ws.repo, "newdir"))
        ws.write("made/later/x.txt", "created after the snapshot\n")
        os.chmod(os.path.join(ws.repo, "tool.sh"), 0o644)
        os.remove(os.path.join(ws.repo, "lnk"))
        os.symlink("a.txt", os.path.join(ws.repo, "lnk"))
        os.remove(os.path.join(ws.repo, "t.txt"))
        os.symlink("README.md", os.path.join(ws.repo, "t.txt"))
        return ws, snap, expected

    def test_dry_run_without_yes_changes_nothing_and_takes_no_snapshot(self):
        ws, snap, _ = self.make()
        before = state(ws.repo)
        refs_before = refs(ws)
        doc = ok_json(self, cli(ws, "restore", snap["id"], "--json"))
        self.assertLessEqual({"dryRun", "safetySnapshot", "write", "delete", "skipped"}, set(doc), doc)
        self.assertIs(doc["dryRun"], True)
        self.assertFalse(doc["safetySnapshot"])
        self.assertTrue({"a.txt", "b.txt", "newdir/deep/n.txt", "lnk", "t.txt"} <= set(doc["write"]), doc)
        self.assertIn("made/later/x.txt", doc["delete"])
        self.assertTrue(all(p.startswith("made") for p in doc["delete"]), doc["delete"])
        self.assertNotIn("README.md", doc["write"])
        out = text(ok(self, cli(ws, "restore", snap["id"])))
        self.assertTrue(out.strip(), "the plan is printed")
        self.assertEqual(state(ws.repo), before)
        self.assertEqual(refs(ws), refs_before)

    def test_yes_makes_the_files_match_keeping_modes_and_symlinks(self):
        ws, snap, expected = self.make()
        before = state(ws.repo)
        doc = ok_json(self, cli(ws, "restore", snap["id"], "--yes", "--json"))
        self.assertIs(doc["dryRun"], False)
        self.assertTrue({"a.txt", "b.txt", "newdir/deep/n.txt", "lnk", "t.txt"} <= set(doc["write"]), doc)
        self.assertIn("made/later/x.txt", doc["delete"])
        self.assertEqual(state(ws.repo), expected)
        self.assertTrue(is_exec(os.path.join(ws.repo, "tool.sh")))
        self.assertTrue(is_exec(os.path.join(ws.repo, "run.sh")))
        self.assertEqual(os.readlink(os.path.join(ws.repo, "lnk")), "README.md")
        self.assertFalse(os.path.islink(os.path.join(ws.repo, "t.txt")))
        self.assertFalse(os.path.exists(os.path.join(ws.repo, "made")), "folders left empty are removed")
        safety = doc["safetySnapshot"]
        self.assertIsInstance(safety, str)
        entries = {e["id"]: e for e in listing(self, ws)}
        self.assertIn(safety, entries)
        self.assertEqual(entries[safety]["kind"], "before-restore")
        commit = entries[safety]["commit"]
        self.assertEqual(blob(ws, commit, "a.txt"), before[b"a.txt"][2], "what it overwrote is in the safety snapshot")
        self.assertEqual(blob(ws, commit, "made/later/x.txt"), b"created after the snapshot\n")
        self.assertNotIn(b"b.txt", tree(ws, commit))

    def test_the_printed_undo_brings_the_pre_restore_state_back_byte_for_byte(self):
        ws, snap, expected = self.make()
        ws.write(b"caf\xe9.txt".decode("utf-8", "surrogateescape"), b"odd name\n")
        ws.write("bin.dat", bytes(range(256)) * 4)
        before = state(ws.repo)
        out = text(ok(self, cli(ws, "restore", snap["id"], "--yes")))
        newest = listing(self, ws)[0]
        self.assertEqual(newest["kind"], "before-restore")
        self.assertIn(newest["id"], out, "the undo id is printed")
        self.assertIn("--yes", out, "the undo command is printed")
        self.assertNotEqual(state(ws.repo), before)
        ok(self, cli(ws, "restore", newest["id"], "--yes"))
        self.assertEqual(state(ws.repo), before)
        self.assertEqual(ok_json(self, cli(ws, "diff", newest["id"], "--json"))["changes"], [])

    def test_every_printed_command_does_what_it_says_copied_as_printed_from_another_folder(self):
        ws = Workspace(self, files={"README.md": "# demo\n", "a.txt": "a in head\n", "b.txt": "b in head\n"})
        odd = os.path.join(ws.home, "my \"odd\" project's $HOME")
        os.rename(ws.repo, odd)
        ws.repo = odd
        ws.write("a.txt", "a in snapshot\n")
        ws.write("sub dir/it's.txt", "in the snapshot\n")
        snap = snapshot(self, ws)
        ws.write("a.txt", "a after\n")
        ws.write("b.txt", "b after\n")
        ws.write("sub dir/it's.txt", "after\n")
        ws.write("c.txt", "made after the snapshot\n")
        dry = text(ok(self, cli(ws, "restore", snap["id"], "a.txt", "sub dir/it's.txt")))
        todo = re.search(r"To do it: (.+)", dry)
        self.assertIsNotNone(todo, dry)
        self.assertNotIn("import", todo.group(1), "people see the short command")
        self.assertEqual(read(os.path.join(ws.repo, "a.txt")), b"a after\n", "a dry run changes nothing")

        def run_printed(line: str) -> str:
            proc = subprocess.run(shlex.split(line), cwd=ws.home, env=ws.env, capture_output=True, timeout=TIMEOUT)
            return text(ok(self, proc))

        done = run_printed(todo.group(1))
        self.assertEqual(read(os.path.join(ws.repo, "a.txt")), b"a in snapshot\n")
        self.assertEqual(read(os.path.join(ws.repo, "sub dir", "it's.txt")), b"in the snapshot\n")
        self.assertEqual(read(os.path.join(ws.repo, "b.txt")), b"b after\n", "only the paths given")
        self.assertEqual(read(os.path.join(ws.repo, "c.txt")), b"made after the snapshot\n", "nothing deleted")
        undo = re.search(r"Undo with: (.+)", done)
        self.assertIsNotNone(undo, done)
        ws.write("b.txt", "b changed after the restore\n")
        run_printed(undo.group(1))
        self.assertEqual(read(os.path.join(ws.repo, "a.txt")), b"a after\n")
        self.assertEqual(read(os.path.join(ws.repo, "sub dir", "it's.txt")), b"after\n")
        self.assertEqual(read(os.path.join(ws.repo, "b.txt")), b"b changed after the restore\n",
                         "the undo undoes the restore, nothing else")
        again = text(ok(self, cli(ws, "snapshot")))
        back = re.search(r"To bring the files back to it: (.+)", again)
        self.assertIsNotNone(back, again)
        ws.write("a.txt", "changed again\n")
        run_printed(back.group(1))
        self.assertEqual(read(os.path.join(ws.repo, "a.txt")), b"a after\n")

    def test_never_touches_head_index_refs_stash_ignored_checkpoint_or_nested_repositories(self):
        ws = Workspace(self, files={"README.md": "# demo\n", ".gitignore": "build/\n*.log\n", "a.txt": "a\n"})
        ws.git("tag", "v1")
        ws.git("branch", "feature")
        ws.write("a.txt", "stashed\n")
        ws.git("stash", "push", "-q")
        ws.write("app.log", "log before\n")
        nested = os.path.join(ws.repo, "nested")
        os.makedirs(nested)
        git(nested, "init", "-q", "-b", "main", env=ws.env)
        write(nested, "inner.txt", "inner\n")
        git(nested, "add", "-A", env=ws.env)
        git(nested, "commit", "-qm", "nested", env=ws.env)
        ws.write("a.txt", "a in snapshot\n")
        ok(self, cli(ws, "save", "--goal", "first"))
        ok(self, cli(ws, "save", "--goal", "second"))
        snap = listing(self, ws)[0]
        ws.write("a.txt", "a after\n")
        ws.write("app.log", "log after\n")
        ws.write("build/out.o", "ignored output\n")
        write(nested, "inner.txt", "inner changed\n")
        write(nested, "new.txt", "nested new\n")
        facts = git_facts(ws)
        untouchable = {p: v for p, v in state(ws.repo).items()
                       if p.startswith((b"nested", b"build", b".claude-checkpoint")) or p == b"app.log"}
        nested_head = git(nested, "rev-parse", "HEAD", env=ws.env)
        ok(self, cli(ws, "restore", snap["id"], "--yes"))
        self.assertEqual(read(os.path.join(ws.repo, "a.txt")), b"a in snapshot\n")
        after = state(ws.repo)
        for path, value in untouchable.items():
            self.assertEqual(after.get(path), value, path)
        self.assertEqual(git_facts(ws), facts)
        self.assertEqual(git(nested, "rev-parse", "HEAD", env=ws.env), nested_head)

    def test_refuses_the_whole_restore_when_a_file_would_replace_a_folder_of_ignored_files(self):
        ws = Workspace(self, files={"README.md": "# demo\n", ".gitignore": "*.log\n", "a.txt": "a\n"})
        ws.write("out", "a file in the snapshot\n")
        ws.write("a.txt", "a in snapshot\n")
        snap = snapshot(self, ws)
        os.remove(os.path.join(ws.repo, "out"))
        ws.write("out/cache.log", "ignored, would be lost\n")
        ws.write("a.txt", "a after\n")
        before = state(ws.repo)
        failed(self, cli(ws, "restore", snap["id"], "--yes"), 1)
        self.assertEqual(state(ws.repo), before, "a refused restore changes nothing, a.txt included")

    def test_refuses_the_whole_restore_when_a_folder_would_replace_an_ignored_file(self):
        ws = Workspace(self, files={"README.md": "# demo\n", "a.txt": "a\n"})
        with open(os.path.join(ws.repo, ".git", "info", "exclude"), "a") as stream:
            stream.write("data\n!data/\n")  # a file named data is ignored, a folder named data is not
        ws.write("data/x.txt", "a folder in the snapshot\n")
        ws.write("a.txt", "a in snapshot\n")
        snap = snapshot(self, ws)
        self.assertEqual(blob(ws, snap["commit"], "data/x.txt"), b"a folder in the snapshot\n")
        shutil.rmtree(os.path.join(ws.repo, "data"))
        ws.write("data", "an ignored file, would be lost\n")
        ws.write("a.txt", "a after\n")
        before = state(ws.repo)
        failed(self, cli(ws, "restore", snap["id"], "--yes"), 1)
        self.assertEqual(state(ws.repo), before, "a refused restore changes nothing, a.txt included")

    def test_never_replaces_a_nested_repository_or_a_skipped_file_at_a_path_the_snapshot_holds(self):
        """The spec allows two faithful outcomes here: refuse the whole restore (exit 1, nothing changed), or
        leave the unmanaged path alone as a path skipped by a snapshot (exit 0, listed in `skipped`)."""
        def file_over_nested_repository(ws):
            ws.write("vendor", "a file in the snapshot\n")
            yield
            os.remove(os.path.join(ws.repo, "vendor"))
            nested = os.path.join(ws.repo, "vendor")
            os.makedirs(nested)
            git(nested, "init", "-q", "-b", "main", env=ws.env)
            write(nested, "lib.c", "int x;\n")

        def folder_over_skipped_file(ws):
            ws.write("big/part.txt", "a folder in the snapshot\n")
            yield
            shutil.rmtree(os.path.join(ws.repo, "big"))
            ws.write("big", b"z" * 5000)  # over the size limit: skipped, not managed

        for scenario, path in ((file_over_nested_repository, "vendor"), (folder_over_skipped_file, "big")):
            with self.subTest(scenario.__name__):
                ws = Workspace(self, files={"README.md": "# demo\n", "a.txt": "a\n"})
                env = dict(ws.env, CHECKPOINT_SNAPSHOT_MAX_BYTES="1000")
                steps = scenario(ws)
                next(steps)
                ws.write("a.txt", "a in snapshot\n")
                snap = snapshot(self, ws, env=env)
                next(steps, None)
                ws.write("a.txt", "a after\n")
                before = state(ws.repo)
                unmanaged = {p: v for p, v in before.items() if p == os.fsencode(path)
                             or p.startswith(os.fsencode(path) + b"/")}
                self.assertTrue(unmanaged)
                proc = cli(ws, "restore", snap["id"], "--yes", "--json", env=env)
                self.assertIn(proc.returncode, (0, 1), text(proc))
                self.assertNotIn(b"Traceback", proc.stderr)
                after = state(ws.repo)
                if proc.returncode == 1:
                    self.assertEqual(after, before, "a refused restore changes nothing")
                else:
                    self.assertIn(path, skipped_paths(json.loads(proc.stdout)))
                    self.assertEqual(read(os.path.join(ws.repo, "a.txt")), b"a in snapshot\n")
                self.assertEqual({p: v for p, v in after.items() if p in unmanaged}, unmanaged)
                self.assertFalse(any(p.startswith(os.fsencode(path) + b"/") for p in after if p not in unmanaged))

    def test_never_writes_through_a_symlinked_folder(self):
        ws = Workspace(self)
        outside = os.path.join(ws.home, "outside")
        write(outside, "f.txt", "outside, must stay\n")
        ws.write("ld/f.txt", "in the snapshot\n")
        snap = snapshot(self, ws)
        shutil.rmtree(os.path.join(ws.repo, "ld"))
        os.symlink(outside, os.path.join(ws.repo, "ld"))
        proc = cli(ws, "restore", snap["id"], "--yes")
        self.assertIn(proc.returncode, (0, 1), text(proc))
        self.assertNotIn(b"Traceback", proc.stderr)
        self.assertEqual(read(os.path.join(outside, "f.txt")), b"outside, must stay\n")
        self.assertEqual(os.listdir(outside), ["f.txt"])

    def test_paths_outside_the_root_and_inside_git_are_refused_changing_nothing(self):
        ws = Workspace(self)
        outside = write(ws.home, "outside.txt", "outside\n")
        ws.write("src/app.py", "print('snap')\n")
        snap = snapshot(self, ws)
        ws.write("src/app.py", "print('after')\n")
        before = state(ws.repo)
        config = read(os.path.join(ws.repo, ".git", "config"))
        for path in ("../outside.txt", outside, ".git/config", ".git", "/etc/hostname"):
            with self.subTest(path=path):
                failed(self, cli(ws, "restore", snap["id"], path, "--yes"), 1, 2)
                self.assertEqual(state(ws.repo), before)
                self.assertEqual(read(outside), b"outside\n")
                self.assertEqual(read(os.path.join(ws.repo, ".git", "config")), config)

    def test_a_root_in_a_subfolder_refuses_paths_above_it(self):
        ws = Workspace(self)
        src = os.path.join(ws.repo, "src")
        ws.write("src/app.py", "print('snap')\n")
        snap = snapshot(self, ws, root=src)
        ws.write("README.md", "changed outside the root\n")
        ws.write("src/app.py", "print('after')\n")
        before = state(ws.repo)
        failed(self, cli(ws, "restore", snap["id"], "../README.md", "--yes", root=src), 1, 2)
        self.assertEqual(state(ws.repo), before)

    def test_path_arguments_restore_only_those_paths(self):
        ws = Workspace(self, files={"README.md": "# demo\n", "a.txt": "a\n", "b.txt": "b\n", "c/keep.txt": "k\n"})
        ws.write("a.txt", "a snap\n")
        ws.write("b.txt", "b snap\n")
        ws.write("c/new.txt", "c new snap\n")
        snap = snapshot(self, ws)
        ws.write("a.txt", "a after\n")
        ws.write("b.txt", "b after\n")
        os.remove(os.path.join(ws.repo, "c/new.txt"))
        ws.write("c/extra.txt", "c extra after\n")
        ws.write("d.txt", "d after\n")
        ok(self, cli(ws, "restore", snap["id"], "a.txt", "--yes"))
        self.assertEqual(read(os.path.join(ws.repo, "a.txt")), b"a snap\n")
        self.assertEqual(read(os.path.join(ws.repo, "b.txt")), b"b after\n")
        self.assertEqual(read(os.path.join(ws.repo, "d.txt")), b"d after\n")
        self.assertEqual(read(os.path.join(ws.repo, "c/extra.txt")), b"c extra after\n")
        self.assertIsNone(read(os.path.join(ws.repo, "c/new.txt")))
        ok(self, cli(ws, "restore", snap["id"], ".", "--yes", cwd=os.path.join(ws.repo, "c"), root=ws.repo))
        self.assertEqual(read(os.path.join(ws.repo, "c/new.txt")), b"c new snap\n")
        self.assertIsNone(read(os.path.join(ws.repo, "c/extra.txt")))
        self.assertEqual(read(os.path.join(ws.repo, "c/keep.txt")), b"k\n")
        self.assertEqual(read(os.path.join(ws.repo, "b.txt")), b"b after\n")
        self.assertEqual(read(os.path.join(ws.repo, "d.txt")), b"d after\n")
        ok(self, cli(ws, "restore", snap["id"], os.path.join(ws.repo, "b.txt"), "--yes"))
        self.assertEqual(read(os.path.join(ws.repo, "b.txt")), b"b snap\n")
        self.assertEqual(read(os.path.join(ws.repo, "d.txt")), b"d after\n")

    def test_a_file_ignored_now_is_skipped_not_written(self):
        ws = Workspace(self)
        ws.write("gen/out.txt", "generated, in the snapshot\n")
        ws.write("gen/other.txt", "other, in the snapshot\n")
        ws.write("src/app.py", "print('snap')\n")
        snap = snapshot(self, ws)
        self.assertEqual(blob(ws, snap["commit"], "gen/out.txt"), b"generated, in the snapshot\n")
        with open(os.path.join(ws.repo, ".git", "info", "exclude"), "a") as stream:
            stream.write("gen/\n")
        ws.write("gen/out.txt", "generated later\n")
        os.remove(os.path.join(ws.repo, "gen/other.txt"))
        ws.write("src/app.py", "print('after')\n")
        doc = ok_json(self, cli(ws, "restore", snap["id"], "--yes", "--json"))
        skipped = skipped_paths(doc)
        self.assertIn("gen/out.txt", skipped, doc)
        self.assertIn("gen/other.txt", skipped, doc)
        self.assertNotIn("gen/out.txt", doc["write"])
        self.assertEqual(read(os.path.join(ws.repo, "gen/out.txt")), b"generated later\n")
        self.assertIsNone(read(os.path.join(ws.repo, "gen/other.txt")))
        self.assertEqual(read(os.path.join(ws.repo, "src/app.py")), b"print('snap')\n")

    def test_after_head_moved_restore_leaves_head_and_branch_as_they_are(self):
        ws = Workspace(self, files={"README.md": "# demo\n", "a.txt": "a\n", "b.txt": "b old\n"})
        ws.write("a.txt", "a snap\n")
        snap = snapshot(self, ws)
        ws.write("b.txt", "b committed later\n")
        ws.git("add", "b.txt")
        ws.git("commit", "-qm", "moved on")
        moved = ws.head()
        ws.write("a.txt", "a after\n")
        ok(self, cli(ws, "restore", snap["id"], "--yes"))
        self.assertEqual(ws.head(), moved)
        self.assertEqual(ws.git("symbolic-ref", "HEAD").strip(), "refs/heads/main")
        self.assertEqual(ws.git("rev-parse", "main").strip(), moved)
        self.assertEqual(read(os.path.join(ws.repo, "a.txt")), b"a snap\n")
        self.assertEqual(read(os.path.join(ws.repo, "b.txt")), b"b old\n", "files match the snapshot")
        status = [line for line in ws.git("status", "--porcelain").splitlines() if ".claude-checkpoint" not in line]
        self.assertEqual(sorted(status), [" M a.txt", " M b.txt"], "changes against the HEAD of now")

    def test_unknown_id_exits_1_lists_the_newest_and_changes_nothing(self):
        ws = Workspace(self)
        ws.write("src/app.py", "print('snap')\n")
        snap = snapshot(self, ws)
        ws.write("src/app.py", "print('after')\n")
        before, refs_before = state(ws.repo), refs(ws)
        message = failed(self, cli(ws, "restore", "000000000", "--yes"), 1)
        self.assertIn(snap["id"], message)
        self.assertEqual(state(ws.repo), before)
        self.assertEqual(refs(ws), refs_before)


# ── forget ──

class TestForget(unittest.TestCase):
    def setUp(self):
        self.ws = Workspace(self)
        self.ids = []
        for number in range(3):
            self.ws.write("src/app.py", f"print({number})\n")
            self.ids.append(snapshot(self, self.ws)["id"])

    def test_forget_one_id_removes_one_ref(self):
        ok(self, cli(self.ws, "forget", self.ids[1]))
        self.assertEqual(len(refs(self.ws)), 2)
        self.assertEqual([e["id"] for e in listing(self, self.ws)], [self.ids[2], self.ids[0]])

    def test_forget_several_ids(self):
        ok(self, cli(self.ws, "forget", self.ids[0], self.ids[2]))
        self.assertEqual([e["id"] for e in listing(self, self.ws)], [self.ids[1]])

    def test_forget_all_removes_every_ref_of_this_root(self):
        ok(self, cli(self.ws, "forget", "--all"))
        self.assertEqual(refs(self.ws), {})
        self.assertEqual(listing(self, self.ws), [])
        self.assertEqual(self.ws.git("rev-parse", "--abbrev-ref", "HEAD").strip(), "main")

    def test_unknown_id_exits_1_and_removes_nothing(self):
        before = refs(self.ws)
        failed(self, cli(self.ws, "forget", "000000000"), 1)
        self.assertEqual(refs(self.ws), before)


# ── saves, MCP and hooks ──

class TestSavesRecordSnapshots(unittest.TestCase):
    """Saves (tool and CLI) record their snapshot; MCP gains a resource, not a tool; hooks snapshot turns."""

    def assert_recorded(self, ws: Workspace, kind: str = "save") -> dict:
        recorded = ws.checkpoint().get("snapshot")
        self.assertIsInstance(recorded, dict, ws.checkpoint())
        self.assertEqual(set(recorded), {"id", "commit"})
        self.assertRegex(recorded["commit"], HEX40)
        self.assertIn(recorded["commit"], ref_targets(ws))
        newest = listing(self, ws)[0]
        self.assertEqual((newest["id"], newest["commit"]), (recorded["id"], recorded["commit"]))
        self.assertEqual(newest["kind"], kind)
        return recorded

    def test_a_save_over_mcp_records_its_snapshot_and_load_full_names_it(self):
        ws = Workspace(self)
        ws.write("src/app.py", "print('over mcp')\n")
        server = start_server(self, ws)
        save_ok(server, goal="Ship the MCP save")
        recorded = self.assert_recorded(ws)
        self.assertEqual(blob(ws, recorded["commit"], "src/app.py"), b"print('over mcp')\n")
        self.assertEqual(listing(self, ws)[0]["goal"], "Ship the MCP save")
        full = server.load(format="full")
        self.assertIn(recorded["id"], full)
        self.assertEqual(json.loads(full)["checkpoint"]["snapshot"], recorded)

    def test_a_save_from_the_command_line_records_its_snapshot(self):
        ws = Workspace(self)
        ws.write("src/app.py", "print('from the cli')\n")
        ok(self, cli(ws, "save", "--goal", "x"))
        recorded = self.assert_recorded(ws)
        self.assertEqual(blob(ws, recorded["commit"], "src/app.py"), b"print('from the cli')\n")
        self.assertIn("x", ws.git("log", "-1", "--format=%s", recorded["commit"]))
        doc = ok_json(self, cli(ws, "show", "--full"))
        self.assertEqual(doc["checkpoint"]["snapshot"], recorded)

    def test_a_save_with_nothing_changed_reuses_the_newest_snapshot(self):
        ws = Workspace(self)
        ws.write("src/app.py", "print('x')\n")
        manual = snapshot(self, ws)
        ok(self, cli(ws, "save", "--goal", "nothing new"))  # the new .claude-checkpoint is not part of it
        self.assertEqual(ws.checkpoint()["snapshot"], {"id": manual["id"], "commit": manual["commit"]})
        self.assertEqual(len(refs(ws)), 1)

    def test_the_goal_in_the_commit_message_and_list_is_redacted(self):
        ws = Workspace(self)
        ws.write("src/app.py", "print('x')\n")
        ok(self, cli(ws, "save", "--goal", f"Deploy with GITHUB_TOKEN={GHP}"))
        recorded = ws.checkpoint().get("snapshot")
        self.assertTrue(recorded, "the save recorded a snapshot")
        self.assertNotIn(GHP, ws.git("log", "-1", "--format=%B", recorded["commit"]))
        self.assertNotIn(GHP, json.dumps(listing(self, ws)))
        self.assertIn("Deploy with", listing(self, ws)[0]["goal"])

    def test_mcp_lists_the_snapshots_resource_and_adds_no_tool(self):
        ws = Workspace(self)
        ws.write("src/app.py", "print('x')\n")
        server = start_server(self, ws)
        save_ok(server, goal="resource")
        ws.write("src/app.py", "print('y')\n")
        snapshot(self, ws)
        tools = [t["name"] for t in server.request("tools/list")["result"]["tools"]]
        self.assertEqual(sorted(tools), ["load_session_checkpoint", "save_session_checkpoint"])
        uris = [r["uri"] for r in server.request("resources/list")["result"]["resources"]]
        self.assertIn("checkpoint://snapshots", uris)
        contents = server.request("resources/read", {"uri": "checkpoint://snapshots"})["result"]["contents"]
        self.assertEqual(contents[0]["uri"], "checkpoint://snapshots")
        self.assertEqual(json.loads(contents[0]["text"]), listing(self, ws))
        self.assertEqual(len(json.loads(contents[0]["text"])), 2)

    def test_snapshots_off_saves_without_a_snapshot_and_says_why(self):
        ws = Workspace(self)
        env = dict(ws.env, CHECKPOINT_SNAPSHOTS="off")
        ws.write("src/app.py", "print('x')\n")
        server = McpServer(self, ws.repo, env)
        server.initialize()
        result = save_ok(server, goal="no snapshots please")
        warnings = result["structuredContent"]["warnings"]
        self.assertTrue(any("snapshot" in w.lower() for w in warnings), warnings)
        self.assertFalse(ws.checkpoint().get("snapshot"))
        proc = ok(self, cli(ws, "save", "--goal", "cli too", env=env))
        self.assertIn("snapshot", text(proc).lower())
        self.assertFalse(ws.checkpoint().get("snapshot"))
        self.assertEqual(refs(ws), {})
        ok(self, cli(ws, "save", "--goal", "snapshots back on"))  # and the same save with them on makes one
        self.assertTrue(ws.checkpoint().get("snapshot"))

    def test_no_repository_saves_with_a_warning(self):
        ws = Workspace(self, init=False)
        server = start_server(self, ws)
        result = save_ok(server, goal="no git here")
        warnings = result["structuredContent"]["warnings"]
        self.assertTrue(any("snapshot" in w.lower() for w in warnings), warnings)
        self.assertFalse(ws.checkpoint().get("snapshot"))
        proc = ok(self, cli(ws, "save", "--goal", "cli, no git"))
        self.assertIn("snapshot", text(proc).lower())

    def test_stop_hook_snapshots_a_turn_whose_only_change_was_a_bash_command(self):
        ws = Workspace(self)
        transcripts = temp_dir(self, "cc-transcripts-")
        t = Transcript(ws.repo)
        t.prompt("Change the greeting with sed")
        t.bash("sed -i s/hi/bye/ src/app.py", exit_code=0)
        ws.write("src/app.py", "print('bye')\n")
        path = t.save(os.path.join(transcripts, "session.jsonl"))
        run_hook_process(self, ws, "stop", hook_payload("stop", path, ws.repo))
        self.assertEqual(len(refs(ws)), 1)
        newest = listing(self, ws)[0]
        self.assertEqual(newest["kind"], "hook")
        self.assertEqual(blob(ws, newest["commit"], "src/app.py"), b"print('bye')\n")
        t.prompt("What is the status?")
        t.bash("ls", exit_code=0)
        t.save(path)
        run_hook_process(self, ws, "stop", hook_payload("stop", path, ws.repo))
        self.assertEqual(len(refs(ws)), 1, "a turn that changed nothing makes no snapshot")

    def test_stop_hook_in_a_clean_repository_after_a_turn_that_changed_nothing_makes_no_snapshot(self):
        ws = Workspace(self)
        transcripts = temp_dir(self, "cc-transcripts-")
        t = Transcript(ws.repo)
        t.prompt("Look around")
        t.bash("ls", exit_code=0)
        path = t.save(os.path.join(transcripts, "clean.jsonl"))
        run_hook_process(self, ws, "stop", hook_payload("stop", path, ws.repo))
        self.assertEqual(refs(ws), {})
        ws.write("src/app.py", "print('a turn that changed a file')\n")
        t.prompt("Now change it")
        t.bash("sed -i s/hi/x/ src/app.py", exit_code=0)
        t.save(path)
        run_hook_process(self, ws, "stop", hook_payload("stop", path, ws.repo))
        self.assertEqual(len(refs(ws)), 1, "the same hook does make snapshots")

    def test_pre_compact_hook_records_a_snapshot(self):
        ws = Workspace(self)
        transcripts = temp_dir(self, "cc-transcripts-")
        t = Transcript(ws.repo)
        t.prompt("Make it print bye")
        t.edit("Edit", os.path.join(ws.repo, "src/app.py"))
        ws.write("src/app.py", "print('bye')\n")
        path = t.save(os.path.join(transcripts, "session.jsonl"))
        run_hook_process(self, ws, "pre-compact", hook_payload("pre-compact", path, ws.repo))
        self.assertEqual(len(refs(ws)), 1)
        newest = listing(self, ws)[0]
        self.assertEqual(newest["kind"], "hook")
        self.assertEqual(blob(ws, newest["commit"], "src/app.py"), b"print('bye')\n")


# ── Edges of the rewind, end to end ──

class TestRewindEdges(unittest.TestCase):
    @slow
    def test_incremental_snapshots_equal_a_whole_build_after_every_kind_of_change(self):
        """Each snapshot starts from the last one's cached path states; its tree must always be
        the tree a build from scratch gives."""
        ws = Workspace(self)
        for i in range(30):
            ws.write(f"d{i % 3}/s{i % 2}/f{i}.txt", f"{i}\n")
        ws.git("add", "-A")
        ws.git("commit", "-qm", "files")
        steps = [lambda: ws.write("d0/s0/f0.txt", "changed\n"),
                 lambda: ws.write("d5/new/deep.txt", "new folder\n"),
                 lambda: os.unlink(os.path.join(ws.repo, "d1/s1/f1.txt")),
                 lambda: os.symlink("d0", os.path.join(ws.repo, "link")),
                 lambda: os.chmod(os.path.join(ws.repo, "d2/s0/f2.txt"), 0o755),
                 lambda: (shutil.rmtree(os.path.join(ws.repo, "d5")), ws.write("d5", "now a file\n")),
                 lambda: ws.git("checkout", "--", "d0/s0/f0.txt"),
                 lambda: (shutil.rmtree(os.path.join(ws.repo, "d1/s0")), None),
                 lambda: ws.write("d1/s0", "a file where a folder was\n")]
        built = 0
        for step in steps:
            step()
            time.sleep(0.12)  # past the racy window, so cached states are trusted
            snap = snapshot(self, ws)
            full = cc.SnapshotStore(cc.Git(ws.repo), ws.repo, cc.Git(ws.repo).scan()).build_tree(10 ** 7)
            self.assertEqual(git(ws.repo, "rev-parse", f"{snap['commit']}^{{tree}}", env=ws.env).strip(), full.tree)
            built += not snap["reused"]
        self.assertGreaterEqual(built, len(steps) - 1)
        self.assertTrue(any(n.startswith("claude-checkpoint-") for n in os.listdir(os.path.join(ws.repo, ".git"))))

    def test_a_damaged_cache_falls_back_to_a_whole_build(self):
        ws = Workspace(self)
        ws.write("a.txt", "1\n")
        ws.git("add", "-A")
        ws.git("commit", "-qm", "a")
        ws.write("a.txt", "2\n")
        snapshot(self, ws)
        for name in os.listdir(os.path.join(ws.repo, ".git")):
            if name.startswith("claude-checkpoint-"):
                with open(os.path.join(ws.repo, ".git", name), "w") as stream:
                    stream.write('{"commit": "x", "tree": 1, "paths": {"a.txt": [["100644", "00"], [1]]}}')
        ws.write("a.txt", "3\n")
        snap = snapshot(self, ws)
        self.assertEqual(blob(ws, snap["commit"], "a.txt"), b"3\n")

    def test_restore_works_while_another_process_holds_index_lock(self):
        ws = Workspace(self)
        ws.write("a.txt", "1\n")
        ws.git("add", "-A")
        ws.git("commit", "-qm", "a")
        ws.write("a.txt", "2\n")
        first = snapshot(self, ws)
        ws.write("a.txt", "3\n")
        lock = os.path.join(ws.repo, ".git", "index.lock")
        with open(lock, "wb") as stream:
            stream.write(b"held by someone else")
        ok(self, cli(ws, "restore", first["id"], "--yes"))
        self.assertEqual(read(os.path.join(ws.repo, "a.txt")), b"2\n")
        self.assertEqual(read(lock), b"held by someone else")

    def test_a_folder_that_cannot_be_written_is_found_before_the_first_write(self):
        ws = Workspace(self)
        ws.write("a.txt", "a1\n")
        ws.write("z/b.txt", "b1\n")
        ws.git("add", "-A")
        ws.git("commit", "-qm", "two")
        ws.write("a.txt", "a2\n")
        ws.write("z/b.txt", "b2\n")
        ws.write("z/new/c.txt", "c2\n")  # its folder would be made inside z
        target = snapshot(self, ws)
        ws.write("a.txt", "a3\n")
        ws.write("z/b.txt", "b3\n")
        shutil.rmtree(os.path.join(ws.repo, "z", "new"))
        make_read_only(self, os.path.join(ws.repo, "z"))
        before, refs_before = state(ws.repo), refs(ws)
        message = failed(self, cli(ws, "restore", target["id"], "--yes"), 1)
        self.assertIn("z", message)
        self.assertIn("nothing was changed", message.lower())
        self.assertNotIn(".tmp", message, "never a temp file's name")
        self.assertNotIn("Undo", message, "nothing to undo")
        self.assertEqual(state(ws.repo), before, "a.txt, before z in the order, was not written either")
        self.assertEqual(refs(ws), refs_before, "no before-restore snapshot for a restore that did not start")

    def test_a_write_that_fails_midway_says_what_was_written_and_the_one_command_that_undoes_it(self):
        if not (hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("chattr")):
            self.skipTest("needs root and chattr: an immutable file in a writable folder")
        ws = Workspace(self, files={"a.txt": "a1\n", "m.txt": "m1\n", "z.txt": "z1\n"})
        for name in ("a.txt", "m.txt", "z.txt"):
            ws.write(name, name[0] + "2\n")
        target = snapshot(self, ws)
        for name in ("a.txt", "m.txt", "z.txt"):
            ws.write(name, name[0] + "3\n")
        stuck = os.path.join(ws.repo, "m.txt")
        if subprocess.run(["chattr", "+i", stuck], capture_output=True).returncode != 0:
            self.skipTest("this file system has no immutable attribute")
        self.addCleanup(subprocess.run, ["chattr", "-i", stuck], capture_output=True)
        message = failed(self, cli(ws, "restore", target["id"], "--yes"), 1)
        self.assertIn("stopped at m.txt", message)
        self.assertNotIn(".tmp", message, "never a temp file's name")
        self.assertRegex(message, r"wrote 1 file\(s\): a\.txt\b")
        self.assertEqual(read(os.path.join(ws.repo, "a.txt")), b"a2\n")
        self.assertEqual(read(stuck), b"m3\n", "nothing half-written")
        self.assertEqual(read(os.path.join(ws.repo, "z.txt")), b"z3\n", "it stopped at the first failure")
        undo = re.search(r"Undo it with: (.+)", message)
        self.assertIsNotNone(undo, message)
        proc = subprocess.run(shlex.split(undo.group(1)), cwd=ws.home, env=ws.env, capture_output=True, timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 0, text(proc))
        self.assertEqual(read(os.path.join(ws.repo, "a.txt")), b"a3\n", "the printed command undid it")
        with self.subTest("nothing written before the failure"):
            ws.write("a.txt", "a2\n")
            message = failed(self, cli(ws, "restore", target["id"], "--yes"), 1)
            self.assertIn("Nothing was changed", message)
            self.assertNotIn("Undo", message)

    def test_a_file_committed_unchanged_after_the_save_is_no_news(self):
        ws = Workspace(self)
        ws.write("a.txt", "1\n")
        ws.git("add", "-A")
        ws.git("commit", "-qm", "a")
        for i in range(5):
            ws.write(f"f{i}.txt", f"{i}\n")
        ok(self, cli(ws, "save", "--goal", "commit later"))
        ws.git("add", "f0.txt")
        ws.git("commit", "-qm", "f0 as it was")
        drift = json.loads(cli(ws, "show", "--full").stdout)["drift"]
        self.assertEqual(drift["newSince"], [])
        self.assertEqual(drift["changedSince"], [])
        self.assertEqual(drift["commitsSince"], 1)


# ── Sessions on a remote: push, pull, resume, forget --remote, end to end (SPEC section 13) ──
# Two clones of one bare repository, each with its own HOME and git identity, as two machines.

SHARED = "refs/claude-checkpoint/shared/"
PULLED = "refs/claude-checkpoint-remote/"
HOOK_NAMES = ("pre-push", "pre-commit", "post-commit", "post-checkout", "post-merge", "reference-transaction",
              "pre-auto-gc", "post-rewrite", "fsmonitor-watchman", "push-to-checkout")


class Clones:
    """A bare repository as the remote (a file path) and clones of it: `a` made the first commit and
    pushed it, `b` is a fresh clone on "another machine"."""

    def __init__(self, test: unittest.TestCase, files: dict | None = None):
        self.test = test
        self.a = Workspace(test, files)
        self.remote = os.path.join(temp_dir(test, "cc-remote-"), "remote.git")
        git(self.a.home, "init", "-q", "--bare", "-b", "main", self.remote, env=self.a.env)
        self.a.git("remote", "add", "origin", self.remote)
        self.a.git("push", "-q", "origin", "main")
        self.b = self.clone("Bea")

    def clone(self, name: str) -> Workspace:
        ws = Workspace.__new__(Workspace)
        ws.home = temp_dir(self.test, "cc-home-")
        ws.repo = os.path.join(ws.home, "project")
        ws.env = isolated_env(ws.home, GIT_AUTHOR_NAME=name, GIT_AUTHOR_EMAIL=f"{name.lower()}@example.com",
                              GIT_COMMITTER_NAME=name, GIT_COMMITTER_EMAIL=f"{name.lower()}@example.com")
        git(ws.home, "clone", "-q", self.remote, ws.repo, env=ws.env)
        return ws

    def remote_git(self, *args: str, check: bool = True) -> str:
        return git(self.remote, *args, env=self.a.env, check=check)

    def remote_refs(self) -> dict:
        out = self.remote_git("for-each-ref", "--format=%(objectname) %(refname)", SHARED)
        return {line.split(" ", 1)[1]: line.split(" ", 1)[0] for line in out.splitlines() if line.strip()}

    def remote_objects(self) -> bytes:
        """Every object the remote holds, contents and all."""
        return subprocess.run(["git", "cat-file", "--batch", "--batch-all-objects"], cwd=self.remote, env=self.a.env,
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=TIMEOUT, check=True).stdout


def save_goal(test: unittest.TestCase, ws: Workspace, goal: str, *extra: str) -> None:
    ok(test, cli(ws, "save", "--goal", goal, *extra))


def push(test: unittest.TestCase, ws: Workspace, *args: str) -> dict:
    return ok_json(test, cli(ws, "push", "--json", *args))


def pull(test: unittest.TestCase, ws: Workspace, *args: str) -> list:
    return ok_json(test, cli(ws, "pull", "--json", *args))


def resume(test: unittest.TestCase, ws: Workspace, *args: str) -> dict:
    return ok_json(test, cli(ws, "resume", "--json", *args))


def user_git_state(ws: Workspace) -> dict:
    """What a session command must never touch: HEAD, the index's bytes, branches, tags, remote-tracking
    refs, the stash, the configuration (the writer id aside)."""
    config = [line for line in (read(os.path.join(ws.repo, ".git", "config")) or b"").decode().splitlines()
              if "writer =" not in line and line.strip() != '[claude-checkpoint]']
    return {"HEAD": read(os.path.join(ws.repo, ".git", "HEAD")), "index": read(os.path.join(ws.repo, ".git", "index")),
            "refs": ws.git("for-each-ref", "--format=%(objectname) %(refname)", "refs/heads", "refs/tags",
                           "refs/remotes", "refs/stash"),
            "FETCH_HEAD": read(os.path.join(ws.repo, ".git", "FETCH_HEAD")), "config": config}


def work_files(root: str, leave_out: tuple = ()) -> dict:
    """state() without the checkpoint's files and the named paths."""
    return {path: value for path, value in state(root).items()
            if not path.startswith(b".claude-checkpoint") and path not in leave_out}


def plant_hooks(ws: Workspace) -> str:
    """Client-side hooks that leave a marker file when they run; returns the marker folder."""
    markers = os.path.join(ws.home, "markers")
    os.makedirs(markers, exist_ok=True)
    hooks = os.path.join(ws.repo, ".git", "hooks")
    os.makedirs(hooks, exist_ok=True)
    for name in HOOK_NAMES:
        path = write(hooks, name, f"#!/bin/sh\ntouch '{markers}/{name}'\nexit 0\n")
        chmod_x(path)
    return markers


class TestSessionsEndToEnd(unittest.TestCase):
    """push on one machine, pull and resume on another: the files byte for byte, secrets held back."""

    def make_work(self, ws: Workspace) -> dict:
        """Every kind of change, plus a file holding a secret and one named like a secret."""
        secret = fake_secret("sk-ant-api03-", 48)
        ws.write("README.md", "# demo\nchanged on machine A\n")
        os.unlink(os.path.join(ws.repo, "src", "app.py"))
        ws.write("notes/plan.txt", "untracked notes\n")
        ws.write("data/blob.bin", bytes(range(256)) * 4)
        chmod_x(ws.write("tools/run.sh", "#!/bin/sh\necho run\n"))
        os.symlink("../README.md", os.path.join(ws.repo, "notes", "readme-link"))
        ws.write("config/local.py", f'ANTHROPIC_API_KEY = "{secret}"\n')
        ws.write(".env", "DATABASE_URL=postgres://u:p@db/x\n")
        return {"secret": secret.encode(), "held": {"config/local.py", ".env"}}

    def test_push_pull_resume_carries_the_work_tree_byte_for_byte_and_keeps_secrets_home(self):
        clones = Clones(self)
        a, b = clones.a, clones.b
        work = self.make_work(a)
        save_goal(self, a, "Carry the parser work", "--next", "finish the tests")
        pushed = push(self, a)
        self.assertEqual(set(pushed), {"remote", "id", "ref", "writer", "commit", "files", "heldBack", "deleted",
                                       "alreadyPushed"})
        self.assertEqual(pushed["remote"], "origin")
        self.assertFalse(pushed["alreadyPushed"])
        self.assertEqual(pushed["id"], pushed["commit"][:9])
        self.assertEqual(pushed["writer"], a.git("config", "claude-checkpoint.writer").strip())
        self.assertRegex(pushed["ref"], r"^refs/claude-checkpoint/shared/top/" + re.escape(pushed["writer"]) + r"/\d{13}-")
        self.assertEqual({h["path"] for h in pushed["heldBack"]}, work["held"])
        self.assertIn("anthropic", {h["path"]: h["reason"] for h in pushed["heldBack"]}["config/local.py"])
        self.assertEqual(clones.remote_refs(), {pushed["ref"]: pushed["commit"]})
        self.assertNotIn(work["secret"], clones.remote_objects())
        self.assertNotIn(b"DATABASE_URL", clones.remote_objects())
        # The remote's own clones and fetches never carry the sessions.
        b.git("fetch", "-q", "origin")
        self.assertEqual(b.git("for-each-ref", "refs/claude-checkpoint", "refs/claude-checkpoint-remote"), "")
        fresh = clones.clone("Cy")
        self.assertEqual(fresh.git("for-each-ref", "refs/claude-checkpoint"), "")

        before = user_git_state(b)
        files_before = work_files(b.repo)
        listed = pull(self, b)
        self.assertEqual([s["id"] for s in listed], [pushed["id"]])
        self.assertEqual(set(listed[0]), {"id", "writer", "mine", "createdAt", "branch", "head", "goal", "files", "ref"})
        self.assertEqual((listed[0]["writer"], listed[0]["mine"], listed[0]["branch"], listed[0]["goal"]),
                         (pushed["writer"], False, "main", "Carry the parser work"))
        self.assertTrue(listed[0]["ref"].startswith(PULLED + "origin/top/"))
        self.assertEqual(work_files(b.repo), files_before)
        self.assertIsNone(read(os.path.join(b.repo, ".claude-checkpoint")))

        dry = resume(self, b)
        self.assertTrue(dry["dryRun"])
        self.assertEqual(set(dry), {"dryRun", "id", "writer", "branch", "head", "write", "delete", "skipped",
                                    "safetySnapshot", "checkpoint"})
        self.assertEqual(work_files(b.repo), files_before)
        self.assertIsNone(read(os.path.join(b.repo, ".claude-checkpoint")))

        done = resume(self, b, "--yes")
        self.assertFalse(done["dryRun"])
        self.assertEqual(done["id"], pushed["id"])
        self.assertEqual(set(done["delete"]), {"src/app.py"})
        self.assertEqual(work_files(b.repo), work_files(a.repo, (b"config/local.py", b".env")))
        self.assertTrue(os.path.islink(os.path.join(b.repo, "notes", "readme-link")))
        self.assertTrue(is_exec(os.path.join(b.repo, "tools", "run.sh")))
        self.assertEqual(user_git_state(b), before)
        self.assertEqual(b.checkpoint()["goal"]["primary"], "Carry the parser work")
        self.assertEqual(b.checkpoint()["nextSteps"], ["finish the tests"])
        self.assertEqual(b.checkpoint()["snapshot"]["id"], pushed["id"])
        brief = text(ok(self, cli(b, "show")))
        self.assertIn("Carry the parser work", brief)
        self.assertNotIn("no longer reachable", brief)
        self.assertNotIn("`README.md`", brief.split("## Goal")[0])  # the resumed files are not drift

        undone = ok_json(self, cli(b, "restore", done["safetySnapshot"], "--yes", "--json"))
        self.assertFalse(undone["dryRun"])
        self.assertEqual(work_files(b.repo), files_before)
        self.assertEqual(user_git_state(b), before)

    def test_a_session_sits_on_what_the_remote_has_so_unpushed_commits_do_not_travel(self):
        clones = Clones(self)
        a, b = clones.a, clones.b
        a.write("src/app.py", "print('committed, never pushed')\n")
        a.git("commit", "-qam", "local only")
        unpushed = a.head()
        a.write("README.md", "# demo\nuncommitted\n")
        save_goal(self, a, "Unpushed history")
        pushed = push(self, a)
        remote_main = clones.remote_git("rev-parse", "main").strip()
        self.assertEqual(clones.remote_git("rev-parse", pushed["commit"] + "^").strip(), remote_main)
        self.assertNotEqual(clones.remote_git("cat-file", "-t", unpushed, check=False).strip(), "commit")
        pull(self, b)
        done = resume(self, b, "--yes")
        self.assertEqual(set(done["write"]), {"README.md", "src/app.py"})
        self.assertEqual(read(os.path.join(b.repo, "src", "app.py")), b"print('committed, never pushed')\n")
        self.assertEqual(b.head(), remote_main)
        said = text(ok(self, cli(b, "resume", pushed["id"])))
        self.assertIn("not in this clone", said)
        drift = ok_json(self, cli(b, "show", "--full"))["drift"]  # measured on the commit the files sit on
        self.assertEqual((drift["changedSince"], drift["newSince"], drift.get("headUnreachable")), ([], [], None))

    def test_the_parent_is_what_the_remote_has_even_when_its_branch_moved_on_unfetched(self):
        clones = Clones(self)
        a, b = clones.a, clones.b
        base = a.head()
        a.write("README.md", "# demo\nfirst push\n")
        save_goal(self, a, "before B's commit")
        push(self, a)
        b.write("src/app.py", "print('B moved main on')\n")
        b.git("commit", "-qam", "B's commit")
        b.git("push", "-q", "origin", "main")  # A has not fetched it: the remote's main is unknown here
        a.write("README.md", "# demo\nsecond push\n")
        save_goal(self, a, "after B's commit")
        pushed = push(self, a)
        self.assertEqual(parents(a, pushed["commit"]), [base])  # A's own earlier session shows the remote has it
        self.assertEqual(pushed["files"], 1)

    def test_drift_after_resuming_from_a_private_remote_that_holds_none_of_the_history(self):
        clones = Clones(self)
        a, b = clones.a, clones.b
        private = os.path.join(temp_dir(self, "cc-private-"), "sessions.git")
        git(a.home, "init", "-q", "--bare", private, env=a.env)
        a.write("src/app.py", "print('committed, never pushed')\n")
        a.git("commit", "-qam", "local only")
        a.write("README.md", "# demo\nuncommitted\n")
        save_goal(self, a, "through a private remote")
        pushed = push(self, a, private)
        self.assertEqual(parents(a, pushed["commit"]), [])  # the private remote holds no history at all
        pull(self, b, private)
        resume(self, b, "--yes")
        self.assertEqual(ok_json(self, cli(b, "show", "--json"))["drift"]["changedSince"], [])
        b.write("README.md", "# demo\nchanged on B after the resume\n")
        b.write("notes.txt", "new on B\n")
        drift = ok_json(self, cli(b, "show", "--json"))["drift"]
        self.assertEqual((drift["changedSince"], drift["newSince"], drift.get("headUnreachable")),
                         (["README.md"], ["notes.txt"], None))

    @slow
    def test_the_parent_is_found_among_hundreds_of_remote_branches(self):
        clones = Clones(self)
        a = clones.a
        old = a.head()
        stream = "".join(f"commit refs/heads/b{i:03d}\ncommitter T <t@example.com> 0 +0000\ndata {len(str(i))}\n{i}\n"
                         f"from {old}\n\n" for i in range(700)).encode()  # 700 distinct side branches
        subprocess.run(["git", "fast-import", "--quiet"], cwd=a.repo, env=a.env, input=stream, check=True)
        a.git("push", "-q", "origin", "refs/heads/b*:refs/heads/b*")
        a.write("README.md", "# pushed on a branch\n")
        a.git("commit", "-qam", "pushed")
        a.git("push", "-q", "origin", "HEAD:refs/heads/pushed")
        pushed_commit = a.head()
        a.write("README.md", "# never pushed\n")
        a.git("commit", "-qam", "local")
        save_goal(self, a, "many branches")
        pushed = push(self, a)
        self.assertEqual(clones.remote_git("rev-parse", pushed["commit"] + "^").strip(), pushed_commit)

    def test_a_resume_over_local_work_keeps_all_it_overwrites_in_its_before_restore_snapshot(self):
        clones = Clones(self)
        a, b = clones.a, clones.b
        a.write("README.md", "# from A\n")
        a.write("shared.txt", "A's version\n")
        save_goal(self, a, "A's work")
        push(self, a)
        b.write("README.md", "# B's own edit\n")
        b.write("shared.txt", "B's version\n")
        b.write("b-only.txt", "B keeps this\n")
        save_goal(self, b, "B's work")
        b_checkpoint = read(os.path.join(b.repo, ".claude-checkpoint"))
        mine = work_files(b.repo)
        pull(self, b)
        done = resume(self, b, "--yes")
        self.assertEqual(read(os.path.join(b.repo, "README.md")), b"# from A\n")
        self.assertIsNone(read(os.path.join(b.repo, "b-only.txt")))  # as `restore --yes` does: A never had it
        self.assertIn("b-only.txt", done["delete"])
        self.assertEqual(read(os.path.join(b.repo, ".claude-checkpoint.prev")), b_checkpoint)
        self.assertEqual(done["checkpoint"]["previous"], os.path.join(b.repo, ".claude-checkpoint.prev"))
        safety = done["safetySnapshot"]
        for path in ("README.md", "shared.txt", "b-only.txt"):
            self.assertEqual(blob(b, safety, path), mine[path.encode()][2])
        ok(self, cli(b, "restore", safety, "--yes"))
        self.assertEqual(work_files(b.repo), mine)

    def test_held_back_paths_are_neither_written_nor_deleted_on_the_other_machine(self):
        clones = Clones(self)
        a, b = clones.a, clones.b
        a.write(".env", "A_SECRET=1\n")
        a.write("config/local.py", f'TOKEN = "{fake_secret("ghp_", 36)}"\n')
        a.write("README.md", "# from A\n")
        save_goal(self, a, "held back")
        push(self, a)
        b.write(".env", "B_OWN=1\n")
        b.write("config/local.py", "B's own settings\n")
        pull(self, b)
        done = resume(self, b, "--yes")
        self.assertEqual({s["path"] for s in done["skipped"]}, {"config/local.py"})  # B's .env: skipped by B's own snapshot
        self.assertEqual(done["skipped"][0]["reason"], "held back by the other machine: holds a secret (github-token)")
        self.assertEqual(read(os.path.join(b.repo, ".env")), b"B_OWN=1\n")
        self.assertEqual(read(os.path.join(b.repo, "config", "local.py")), b"B's own settings\n")
        self.assertEqual(read(os.path.join(b.repo, "README.md")), b"# from A\n")

    def test_not_even_the_hash_of_a_held_back_file_travels(self):
        clones = Clones(self)
        a = clones.a
        weak = b"DB_PASSWORD=hunter2\n"  # its blob id would let anyone confirm a guessed password offline
        a.write(".env", weak)
        a.write("config/local.py", f'TOKEN = "{fake_secret("ghp_", 36)}"\n'.encode())
        a.write("README.md", "# from A\n")
        save_goal(self, a, "hashes stay home")
        recorded = files_by_path(a.checkpoint())
        self.assertEqual(recorded[".env"]["hash"], blob_sha(weak))  # the local checkpoint records it
        pushed = push(self, a)
        self.assertEqual({h["path"] for h in pushed["heldBack"]}, {".env", "config/local.py"})
        objects = clones.remote_objects()
        for path in (".env", "config/local.py"):
            self.assertNotIn(recorded[path]["hash"].encode(), objects, path)
        carried = files_by_path(json.loads(clones.remote_git("show", pushed["commit"] + ":.claude-checkpoint")))
        self.assertEqual((carried[".env"].get("hash"), carried["config/local.py"].get("hash")), (None, None))
        self.assertEqual(carried["README.md"]["hash"], blob_sha(b"# from A\n"))

    def test_after_a_resume_the_paths_held_back_are_not_drift_as_the_session_never_carried_them(self):
        clones = Clones(self)
        a, b = clones.a, clones.b
        a.write(".env", "A_ONLY=1\n")
        a.write("config/local.py", f'TOKEN = "{fake_secret("ghp_", 36)}"\n')
        a.write("README.md", "# from A\n")
        save_goal(self, a, "held back, then shown")
        self.assertEqual({h["path"] for h in push(self, a)["heldBack"]}, {".env", "config/local.py"})
        pull(self, b)
        resume(self, b, "--yes")
        drift = ok_json(self, cli(b, "show", "--json"))["drift"]
        self.assertEqual((drift["changedSince"], drift["newSince"], drift.get("deletedSince")), ([], [], None))
        self.assertNotIn("local.py", text(ok(self, cli(b, "show"))).split("## Goal")[0])
        b.write("config/local.py", "B writes it later\n")  # against the session, this one is news now
        self.assertEqual(ok_json(self, cli(b, "show", "--json"))["drift"]["changedSince"], ["config/local.py"])

    def test_a_refused_resume_changes_nothing_the_checkpoint_included(self):
        clones = Clones(self)
        a, b = clones.a, clones.b
        a.write("build", "A's build is a file\n")
        save_goal(self, a, "refused here")
        push(self, a)
        write(b.repo, ".git/info/exclude", "*.o\n")
        b.write("build/out.o", "ignored object\n")
        save_goal(self, b, "B's own")
        before = (work_files(b.repo), read(os.path.join(b.repo, ".claude-checkpoint")), user_git_state(b), refs(b))
        pull(self, b)
        message = failed(self, cli(b, "resume", "--yes"), 1)
        self.assertIn("refused", message)
        self.assertEqual((work_files(b.repo), read(os.path.join(b.repo, ".claude-checkpoint")), user_git_state(b),
                          refs(b)), before)

    def test_two_writers_push_and_each_resumes_the_other(self):
        clones = Clones(self)
        a, b = clones.a, clones.b
        a.write("a.txt", "from A\n")
        save_goal(self, a, "A's goal")
        b.write("b.txt", "from B\n")
        save_goal(self, b, "B's goal")
        pushes = [start(ws, "push", "--json") for ws in (a, b)]  # at the same time
        outs = [proc.communicate(timeout=TIMEOUT) for proc in pushes]
        self.assertEqual([proc.returncode for proc in pushes], [0, 0], outs)
        a_push, b_push = (json.loads(out) for out, _ in outs)
        self.assertNotEqual(a_push["writer"], b_push["writer"])
        self.assertEqual(set(clones.remote_refs()), {a_push["ref"], b_push["ref"]})
        listed = pull(self, a)
        self.assertEqual({(s["writer"], s["mine"]) for s in listed}, {(a_push["writer"], True), (b_push["writer"], False)})
        self.assertEqual(resume(self, a)["id"], b_push["id"])  # by default the other writer's newest
        self.assertEqual(resume(self, a, "--from", a_push["writer"])["id"], a_push["id"])
        pull(self, b)
        resume(self, b, "--yes")
        self.assertEqual(read(os.path.join(b.repo, "a.txt")), b"from A\n")

    def test_content_found_clean_is_not_scanned_again_but_secret_values_of_the_environment_still_count(self):
        clones = Clones(self)
        a = clones.a
        a.write("settings.txt", "mode = qz7Wk2Lp9Xv4Rt8Yb3Nc\n")
        save_goal(self, a, "scan once")
        self.assertEqual(push(self, a)["heldBack"], [])
        with open(os.path.join(a.repo, ".git", "claude-checkpoint-scanned.json"), encoding="utf-8") as stream:
            self.assertIn(blob_sha(b"mode = qz7Wk2Lp9Xv4Rt8Yb3Nc\n"), json.load(stream)["clean"])
        a.write("other.txt", "another edit\n")
        env = dict(a.env, SERVICE_TOKEN="qz7Wk2Lp9Xv4Rt8Yb3Nc")
        pushed = ok_json(self, cli(a, "push", "--json", env=env))
        self.assertEqual(pushed["heldBack"], [{"path": "settings.txt", "reason": "holds a secret (secret environment value)"}])
        self.assertNotIn(b"settings.txt", tree(a, pushed["commit"]))

    def test_a_long_text_stays_home_unscanned_a_long_binary_travels_and_snapshots_off_makes_no_snapshot(self):
        clones = Clones(self)
        a = clones.a
        a.write("logs/huge.log", "harmless line\n" * (cc.SCAN_MAX_BYTES // 14 + 10))
        a.write("assets/huge.bin", b"\0" + os.urandom(cc.SCAN_MAX_BYTES))
        save_goal(self, a, "long files")
        snapshots_before = refs(a)
        pushed = ok_json(self, cli(a, "push", "--json", env=dict(a.env, CHECKPOINT_SNAPSHOTS="off")))
        self.assertEqual([h["path"] for h in pushed["heldBack"]], ["logs/huge.log"])
        self.assertIn("too long to scan", pushed["heldBack"][0]["reason"])
        self.assertIn(b"assets/huge.bin", tree(a, pushed["commit"]))
        self.assertEqual(refs(a), snapshots_before)

    def test_a_second_push_of_the_same_work_pushes_nothing(self):
        clones = Clones(self)
        clones.a.write("a.txt", "work\n")
        save_goal(self, clones.a, "Same work")
        first = push(self, clones.a)
        again = push(self, clones.a)
        self.assertTrue(again["alreadyPushed"])
        self.assertEqual((again["id"], again["ref"]), (first["id"], first["ref"]))
        said = text(ok(self, cli(clones.a, "push")))
        self.assertIn("already pushed", said.lower())
        self.assertIn(f"(writer {first['writer']})", said)  # push always says which writer this clone is
        self.assertEqual(len(clones.remote_refs()), 1)

    def test_a_writer_keeps_its_newest_20_sessions_and_never_touches_another_writers(self):
        clones = Clones(self)
        a, b = clones.a, clones.b
        b.write("b.txt", "B\n")
        save_goal(self, b, "B")
        b_ref = push(self, b)["ref"]
        save_goal(self, a, "Many pushes")
        first = push(self, a)
        base = first["ref"].rsplit("/", 1)[0]
        older = [f"{base}/{1_000_000_000_000 + i:013d}-{first['id']}" for i in range(20)]  # 20 older sessions
        subprocess.run(["git", "update-ref", "--stdin"], cwd=clones.remote, env=a.env, check=True,
                       input="".join(f"create {ref} {first['commit']}\n" for ref in older).encode())
        a.write("counter.txt", "one more\n")
        pushed = push(self, a)
        self.assertEqual(sorted(pushed["deleted"]), older[:2])
        self.assertEqual(set(clones.remote_refs()), {b_ref, first["ref"], pushed["ref"], *older[2:]})
        self.assertEqual(len(pull(self, b)), 3)  # the 18 older refs name one commit: one session
        self.assertEqual(len(b.git("for-each-ref", PULLED).splitlines()), 21)

    def test_forget_remote_deletes_this_writers_sessions_and_nothing_else(self):
        clones = Clones(self)
        a, b = clones.a, clones.b
        for ws in (a, b):
            ws.write("x.txt", ws.home)
            save_goal(self, ws, "forget me")
        push(self, a)
        b_ref = push(self, b)["ref"]
        heads = clones.remote_git("for-each-ref", "refs/heads", "refs/tags")
        forgotten = ok_json(self, cli(a, "forget", "--remote", "origin", "--json"))
        self.assertEqual(len(forgotten["deleted"]), 1)
        self.assertEqual(set(clones.remote_refs()), {b_ref})
        self.assertEqual(clones.remote_git("for-each-ref", "refs/heads", "refs/tags"), heads)
        self.assertEqual(cli(a, "forget", "--remote", "origin").returncode, 3)
        self.assertEqual(cli(a, "forget", "--remote", "origin", "--all").returncode, 2)

    def test_the_command_resume_advises_matches_the_sessions_head_when_this_clone_is_ahead(self):
        clones = Clones(self)
        a, b = clones.a, clones.b
        save_goal(self, a, "on the first commit")
        theirs = push(self, a)
        b.write("src/app.py", "print('B went on')\n")
        b.git("commit", "-qam", "B is ahead")
        pull(self, b)
        said = text(ok(self, cli(b, "resume", theirs["id"])))
        advised = re.search(r"before resuming: `([^`]+)`", said)
        self.assertIsNotNone(advised, said)
        self.assertNotIn("--ff-only", advised.group(1))  # a fast-forward cannot go back: it would do nothing
        subprocess.run(shlex.split(advised.group(1)), cwd=b.repo, env=b.env, capture_output=True, timeout=TIMEOUT,
                       check=True)
        self.assertEqual(b.head(), a.head())

    def test_pulled_sessions_are_kept_under_the_remotes_own_name(self):
        clones = Clones(self)
        a, b = clones.a, clones.b
        save_goal(self, a, "named")
        push(self, a)
        b.git("remote", "add", "backup.box", clones.remote)  # a dot is fine in one ref name component
        self.assertTrue(pull(self, b, "backup.box")[0]["ref"].startswith(PULLED + "backup.box/top/"))
        url = pull(self, b, clones.remote)[0]["ref"]  # a URL or a folder is not one component: a digest of it
        self.assertRegex(url, "^" + re.escape(PULLED) + r"url-[0-9a-f]{12}/top/")

    def test_pull_removes_what_the_remote_no_longer_has(self):
        clones = Clones(self)
        save_goal(self, clones.a, "gone soon")
        push(self, clones.a)
        self.assertEqual(len(pull(self, clones.b)), 1)
        ok(self, cli(clones.a, "forget", "--remote", "origin"))
        self.assertEqual(pull(self, clones.b), [])
        self.assertEqual(clones.b.git("for-each-ref", PULLED), "")

    def test_a_root_in_a_subfolder_travels_alone_on_the_remotes_files(self):
        clones = Clones(self, {"web/index.html": "<p>hi</p>\n", "api/main.py": "print(1)\n"})
        a, b = clones.a, clones.b
        a.write("web/index.html", "<p>changed</p>\n")
        a.write("api/main.py", "print('outside the root')\n")
        web = os.path.join(a.repo, "web")
        ok(self, cli(a, "save", "--goal", "web only", root=web))
        pushed = ok_json(self, cli(a, "push", "--json", root=web))
        key = pushed["ref"].split("/")[3]
        self.assertNotEqual(key, "top")
        self.assertNotIn("/", key)
        self.assertEqual(clones.remote_git("show", f"{pushed['commit']}:api/main.py"), "print(1)\n")
        b_web = os.path.join(b.repo, "web")
        self.assertEqual(ok_json(self, cli(b, "pull", "--json", root=b_web))[0]["id"], pushed["id"])
        self.assertEqual(ok_json(self, cli(b, "pull", "--json"))[:1], [])  # another root, another key
        ok(self, cli(b, "resume", "--yes", root=b_web))
        self.assertEqual(read(os.path.join(b_web, "index.html")), b"<p>changed</p>\n")
        self.assertEqual(read(os.path.join(b.repo, "api", "main.py")), b"print(1)\n")

    def test_the_commands_push_prints_for_a_subfolder_root_work_as_printed_on_the_other_machine(self):
        for folder in ("web", "-web"):  # a folder named like an option is still a folder
            with self.subTest(folder=folder):
                clones = Clones(self, {f"{folder}/index.html": "<p>hi</p>\n"})
                a, b = clones.a, clones.b
                web = os.path.join(a.repo, folder)
                a.write(f"{folder}/index.html", "<p>from A</p>\n")
                ok(self, cli(a, "save", "--goal", "web only", root=web))
                said = text(ok(self, cli(a, "push", root=web)))
                found = re.search(r"On the other machine, at the top of its clone: (.+) && (.+)\n", said)
                self.assertIsNotNone(found, said)
                for command in found.groups():  # B has no checkpoint in the folder: only --root names that root
                    ok(self, subprocess.run(shlex.split(command), cwd=b.repo, env=b.env, capture_output=True,
                                            timeout=TIMEOUT))
                self.assertEqual(read(os.path.join(b.repo, folder, "index.html")), b"<p>from A</p>\n")
                self.assertEqual(json.loads(read(os.path.join(b.repo, folder, ".claude-checkpoint")))["goal"]["primary"],
                                 "web only")


class TestSessionsFaults(unittest.TestCase):
    """Bad input and refusing remotes: a clear message, the right exit status, nothing local changed."""

    def assert_untouched(self, ws: Workspace, before: tuple) -> None:
        self.assertEqual((user_git_state(ws), work_files(ws.repo), read(os.path.join(ws.repo, ".claude-checkpoint"))),
                         before)

    def snapshot_of(self, ws: Workspace) -> tuple:
        return user_git_state(ws), work_files(ws.repo), read(os.path.join(ws.repo, ".claude-checkpoint"))

    def test_no_checkpoint_no_remote_unknown_remote_and_an_unreachable_one(self):
        clones = Clones(self)
        a = clones.a
        self.assertIn("save", failed(self, cli(a, "push"), 3))
        save_goal(self, a, "faults")
        before = self.snapshot_of(a)
        self.assertIn("no remote named", failed(self, cli(a, "push", "nowhere"), 1))
        unreachable = os.path.join(a.home, "missing.git")
        self.assertIn("Could not reach", failed(self, cli(a, "push", unreachable), 1))
        self.assertIn("Could not reach", failed(self, cli(a, "pull", "git://127.0.0.1:9/x.git"), 1))
        a.git("remote", "remove", "origin")
        before = self.snapshot_of(a)
        message = failed(self, cli(a, "push"), 1)
        self.assertIn("git remote add origin", message)
        self.assertIn("git remote add origin", failed(self, cli(a, "pull"), 1))
        self.assert_untouched(a, before)

    def test_an_empty_remote_name_is_refused_never_read_as_the_default(self):
        clones = Clones(self)
        a = clones.a
        save_goal(self, a, "kept")
        pushed = push(self, a)
        a.write("a.txt", "more\n")
        before = self.snapshot_of(a)
        for command in (("forget", "--remote", ""), ("push", ""), ("pull", "")):  # as `"$REMOTE"` gives when unset
            self.assertIn("empty", failed(self, cli(a, *command), 1))
        self.assertEqual(clones.remote_refs(), {pushed["ref"]: pushed["commit"]})
        self.assert_untouched(a, before)

    def test_nothing_pulled_an_unknown_id_and_an_unknown_writer(self):
        clones = Clones(self)
        b = clones.b
        self.assertIn("pull", failed(self, cli(b, "resume"), 3))
        self.assertEqual(pull(self, b), [])
        save_goal(self, clones.a, "known")
        pushed = push(self, clones.a)
        pull(self, b)
        before = self.snapshot_of(b)
        self.assertIn(pushed["id"], failed(self, cli(b, "resume", "abcdef12", "--yes"), 1))
        self.assertIn(pushed["writer"], failed(self, cli(b, "resume", "--from", "nobody", "--yes"), 1))
        self.assertEqual(cli(b, "resume", pushed["id"], "--from", "x").returncode, 2)
        self.assert_untouched(b, before)

    def test_a_remote_that_hides_our_refs_or_rejects_pushes_gets_a_clear_message(self):
        clones = Clones(self)
        a = clones.a
        a.write("a.txt", "work\n")
        save_goal(self, a, "refused")
        before = self.snapshot_of(a)
        clones.remote_git("config", "receive.hideRefs", "refs/claude-checkpoint")
        message = failed(self, cli(a, "push"), 1)
        self.assertIn("refused", message)
        self.assert_untouched(a, before)
        clones.remote_git("config", "--unset", "receive.hideRefs")
        chmod_x(write(clones.remote, "hooks/pre-receive", "#!/bin/sh\necho 'no checkpoints here' >&2\nexit 1\n"))
        message = failed(self, cli(a, "push"), 1)
        self.assertIn("pre-receive", message)
        self.assert_untouched(a, before)
        self.assertEqual(clones.remote_refs(), {})

    def test_a_remote_configured_as_a_mirror_gets_only_our_refs_never_a_mirror_push(self):
        clones = Clones(self)
        a = clones.a
        a.git("remote", "add", "--mirror=push", "backup", clones.remote)  # sets remote.backup.mirror=true
        a.git("branch", "-q", "local-only")
        a.write("a.txt", "work\n")
        save_goal(self, a, "to a mirror remote")
        heads = clones.remote_git("for-each-ref", "refs/heads", "refs/tags")
        pushed = push(self, a, "backup")
        self.assertEqual(clones.remote_refs(), {pushed["ref"]: pushed["commit"]})
        self.assertEqual(clones.remote_git("for-each-ref", "refs/heads", "refs/tags"), heads)
        self.assertEqual(ok_json(self, cli(a, "forget", "--remote", "backup", "--json"))["deleted"], [pushed["ref"]])
        self.assertEqual(clones.remote_refs(), {})

    def test_the_git_commands_resume_advises_are_quoted_whatever_a_hostile_session_claims(self):
        clones = Clones(self)
        a, b = clones.a, clones.b
        save_goal(self, a, "honest")
        pushed = push(self, a)
        message = clones.remote_git("cat-file", "commit", pushed["commit"]).split("\n\n", 1)[1]
        claimed = message.replace('"branch": "main"', '"branch": "main; touch pwned"')
        self.assertNotEqual(claimed, message)
        forged = subprocess.run(["git", "commit-tree", pushed["commit"] + "^{tree}", "-p", pushed["commit"] + "^"],
                                cwd=clones.remote, env=a.env, input=claimed.encode(), capture_output=True,
                                timeout=TIMEOUT, check=True).stdout.decode().strip()
        clones.remote_git("update-ref", f"{SHARED}top/mallory/{1_900_000_000_000:013d}-{forged[:9]}", forged)
        pull(self, b)
        said = text(ok(self, cli(b, "resume", forged[:9])))
        advised = re.search(r"before resuming: `([^`]+)`", said)
        self.assertIsNotNone(advised, said)
        self.assertEqual(shlex.split(advised.group(1)), ["git", "switch", "main; touch pwned"])

    def test_another_machines_words_reach_the_terminal_without_control_characters(self):
        clones = Clones(self)
        a, b = clones.a, clones.b
        save_goal(self, a, "evil \x1b[2J\x1b]0;owned\x07 goal")  # clears the screen, retitles the terminal
        a.write("named\x1b[2J.txt", "a file name is another machine's word too\n")
        push(self, a)
        said = text(ok(self, cli(b, "pull"))) + text(ok(self, cli(b, "resume")))
        self.assertNotIn("\x1b", said)
        self.assertNotIn("\x07", said)
        self.assertIn("evil ?[2J?]0;owned? goal", said)
        self.assertIn("write   named?[2J.txt", said)
        self.assertIn("named\x1b[2J.txt", resume(self, b)["write"])  # JSON keeps the name exactly

    def test_client_side_hooks_never_run(self):
        clones = Clones(self)
        a, b = clones.a, clones.b
        markers = [plant_hooks(ws) for ws in (a, b)]
        a.write("a.txt", "work\n")
        save_goal(self, a, "no hooks")
        for i in range(2):  # the second push deletes nothing but still runs push
            a.write("a.txt", f"work {i}\n")
            push(self, a)
        ok(self, cli(a, "forget", "--remote", "origin"))
        push(self, a)
        pull(self, b)
        resume(self, b, "--yes")
        self.assertEqual([os.listdir(m) for m in markers], [[], []])
        a.git("commit", "--allow-empty", "-qm", "the hooks are live")
        self.assertIn("pre-commit", os.listdir(markers[0]))

    def test_a_timeout_and_no_prompt_for_a_remote_that_never_answers(self):
        clones = Clones(self)
        save_goal(self, clones.a, "slow remote")
        listener = socket_listener(self)
        env = dict(clones.a.env, CHECKPOINT_REMOTE_TIMEOUT="1")
        started = time.monotonic()
        message = failed(self, cli(clones.a, "push", f"git://127.0.0.1:{listener}/x.git", env=env), 1)
        self.assertIn("did not answer within 1 s", message)
        self.assertLess(time.monotonic() - started, TIMEOUT)


    def test_a_push_cut_off_midway_leaves_nothing_behind_and_the_next_one_works(self):
        clones = Clones(self)
        a = clones.a
        a.write("a.txt", "work\n")
        save_goal(self, a, "interrupted")
        before = self.snapshot_of(a)
        chmod_x(write(clones.remote, "hooks/pre-receive", "#!/bin/sh\nsleep 30\n"))
        env = dict(a.env, CHECKPOINT_REMOTE_TIMEOUT="1")
        self.assertIn("did not answer within 1 s", failed(self, cli(a, "push", env=env), 1))
        self.assert_untouched(a, before)
        self.assertEqual(clones.remote_refs(), {})
        os.unlink(os.path.join(clones.remote, "hooks", "pre-receive"))
        pushed = push(self, a)
        self.assertEqual(clones.remote_refs(), {pushed["ref"]: pushed["commit"]})

    def test_ssh_runs_in_batch_mode_so_it_never_prompts(self):
        clones = Clones(self)
        save_goal(self, clones.a, "over ssh")
        seen = os.path.join(clones.a.home, "ssh-args")
        fake_ssh = write(clones.a.home, "bin/ssh", f"#!/bin/sh\necho \"$@\" > '{seen}'\nexit 255\n")
        chmod_x(fake_ssh)
        env = dict(clones.a.env, GIT_SSH_COMMAND=fake_ssh)
        failed(self, cli(clones.a, "push", "ssh://git@example.invalid/repo.git", env=env), 1)
        self.assertIn("-o BatchMode=yes", read(seen).decode())

def socket_listener(test: unittest.TestCase) -> int:
    """A port that accepts connections and never says a word."""
    import socket
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    test.addCleanup(server.close)
    return server.getsockname()[1]


class TestSessionsOverGitDaemon(unittest.TestCase):
    """The same round trip over a real transport: `git daemon` on 127.0.0.1, started and stopped here."""

    def start_daemon(self, base: str) -> str:
        import socket
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        daemon = subprocess.Popen(["git", "daemon", "--reuseaddr", f"--base-path={base}", "--export-all",
                                   "--enable=receive-pack", "--listen=127.0.0.1", f"--port={port}", base],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.addCleanup(lambda: (daemon.kill(), daemon.wait()))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if daemon.poll() is not None:
                self.skipTest(f"git daemon did not start: {daemon.stderr.read().decode(errors='replace')[:200]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return f"git://127.0.0.1:{port}/remote.git"
            except OSError:
                time.sleep(0.05)
        self.skipTest("git daemon did not listen within 10 s")

    def test_push_pull_resume_over_the_git_protocol(self):
        clones = Clones(self)
        a, b = clones.a, clones.b
        url = self.start_daemon(os.path.dirname(clones.remote))
        a.write("README.md", "# over the wire\n")
        a.write("new/file.txt", "new\n")
        save_goal(self, a, "Over git daemon")
        pushed = push(self, a, url)
        self.assertEqual(pushed["remote"], url)
        self.assertEqual(clones.remote_refs(), {pushed["ref"]: pushed["commit"]})
        listed = pull(self, b, url)
        self.assertEqual([s["id"] for s in listed], [pushed["id"]])
        self.assertTrue(listed[0]["ref"].startswith(PULLED + "url-"))
        resume(self, b, "--yes")
        self.assertEqual(work_files(b.repo), work_files(a.repo))
        self.assertEqual(ok_json(self, cli(a, "forget", "--remote", url, "--json"))["deleted"], [pushed["ref"]])


# ── 11.2 Checkpoints: save, load and what the hooks record ──

def fake_secret(prefix: str, length: int, alphabet: str = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
                seed: str = "seed") -> str:
    """A secret-shaped value that is not anybody's real secret."""
    digest = hashlib.sha256(seed.encode()).digest() * 4
    return prefix + "".join(alphabet[b % len(alphabet)] for b in digest[:length])


# ── A running server: what it keeps from one call to the next (SPEC sections 10 and 11, cost) ──

def logging_git(test: unittest.TestCase) -> tuple:
    """(a PATH folder whose `git` logs its arguments, one line per run, then runs the real git;
    the log file)."""
    folder = temp_dir(test, "cc-bin-")
    log = os.path.join(folder, "runs.log")
    with open(os.path.join(folder, "git"), "w") as stream:
        stream.write(f'#!/bin/sh\necho "$*" >> {shlex.quote(log)}\nexec {shlex.quote(shutil.which("git"))} "$@"\n')
    os.chmod(os.path.join(folder, "git"), 0o755)
    open(log, "w").close()
    return folder, log


def git_runs(log: str) -> list:
    """The git subcommands logged since the log was last emptied, in the order they started;
    the log is emptied."""
    with open(log) as stream:
        lines = stream.read().splitlines()
    open(log, "w").close()
    runs = []
    for line in lines:
        words = line.split()
        while words and (words[0].startswith("--") or words[0] == "-c"):
            words = words[2:] if words[0] == "-c" else words[1:]
        runs.append(words[0] if words else "")
    return runs


def settle(*paths: str) -> None:
    """Wait until the files' last change is older than the file system's clock tick (100 ms
    where stamps have nanoseconds): only then may a server keep what it read from them."""
    for path in paths:
        info = os.stat(path)
        changed = max(info.st_mtime_ns, info.st_ctime_ns)
        wait = changed + cc._racy_window_ns(changed) - time.time_ns()
        if wait > 0:
            time.sleep(wait / 1e9 + 0.01)


class TestRepeatedCalls(unittest.TestCase):
    """A running server asks git only what may have changed since its last call, and what it
    keeps never outlives the file it came from."""

    def quiet_server(self) -> tuple:
        """A server that has saved twice in a repository where nothing changes, so that all
        it read (the index, the snapshot cache) had settled: (workspace, server, git log)."""
        ws = Workspace(self)
        with open(os.path.join(ws.repo, ".git", "info", "exclude"), "a") as stream:
            stream.write(".claude-checkpoint*\n")
        ws.write("src/app.py", "print('dirty')\n")
        folder, log = logging_git(self)
        server = start_server(self, ws, env=dict(ws.env, PATH=folder + os.pathsep + ws.env["PATH"]))
        settle(os.path.join(ws.repo, ".git", "index"), os.path.join(ws.repo, "src", "app.py"))
        self.assertEqual(save_ok(server, goal="Quiet")["structuredContent"]["warnings"], [])
        settle(*glob.glob(os.path.join(ws.repo, ".git", "claude-checkpoint-*.json")))
        save_ok(server, goal="Quiet")
        git_runs(log)
        return ws, server, log

    def test_a_save_with_nothing_changed_runs_git_status_and_for_each_ref_alone(self):
        ws, server, log = self.quiet_server()
        snapshot = ws.checkpoint()["snapshot"]
        self.assertEqual(save_ok(server, goal="Quiet")["structuredContent"]["warnings"], [])
        self.assertEqual(sorted(git_runs(log)), ["for-each-ref", "status"])
        self.assertEqual(ws.checkpoint()["snapshot"], snapshot)

    def test_a_save_from_the_command_line_with_nothing_changed_runs_three_git_commands(self):
        ws, server, log = self.quiet_server()
        env = dict(ws.env, PATH=os.path.dirname(log) + os.pathsep + ws.env["PATH"])
        ok(self, cli(ws, "save", "--goal", "Quiet", env=env))  # a new process keeps nothing: it asks git
        self.assertEqual(sorted(git_runs(log)), ["for-each-ref", "ls-files", "status"])

    def test_a_load_with_nothing_changed_runs_git_status_alone(self):
        ws, server, log = self.quiet_server()
        self.assertIn("Quiet", server.load())
        self.assertEqual(git_runs(log), ["status"])

    def test_a_checkpoint_tracked_after_the_last_call_is_reported_at_the_next_save(self):
        ws, server, log = self.quiet_server()
        ws.git("add", "--force", ".claude-checkpoint")
        warnings = save_ok(server, goal="Quiet")["structuredContent"]["warnings"]
        self.assertEqual(len(warnings), 1, warnings)
        self.assertIn("tracked by git", warnings[0])
        self.assertIn("ls-files", git_runs(log))
        ws.git("rm", "--cached", "--force", "--quiet", ".claude-checkpoint")
        self.assertEqual(save_ok(server, goal="Quiet")["structuredContent"]["warnings"], [])

    def test_a_new_snapshot_made_by_another_process_is_the_one_the_next_save_builds_on(self):
        ws, server, log = self.quiet_server()
        ws.write("src/app.py", "print('changed by a hook')\n")
        made = json.loads(cli(ws, "snapshot", "--json").stdout)
        ws.write("src/app.py", "print('changed again')\n")
        save_ok(server, goal="Quiet")
        recorded = ws.checkpoint()["snapshot"]
        self.assertNotEqual(recorded["commit"], made["commit"])
        self.assertEqual(blob(ws, recorded["commit"], "src/app.py"), b"print('changed again')\n")
        drift = load_full(server)["drift"]
        self.assertEqual(drift["changedSince"], [])

    def test_a_snapshot_cache_replaced_with_the_same_size_and_time_is_read_again(self):
        ws = Workspace(self)
        path = os.path.join(ws.repo, ".git", "claude-checkpoint-test.json")
        memo = cc.FileMemo()

        def write_cache(tree: str) -> None:
            cc.write_snapshot_cache(path, cc.SnapshotCache("c" * 40, tree, None, "", {
                "src/app.py": cc.PathState(("100644", "b" * 40), (33188, 12, 1, 2, 3))}))
            os.utime(path, ns=(10 ** 18, 10 ** 18))  # the same stamp both times
        write_cache("a" * 40)
        settle(path)
        kept = cc.read_snapshot_cache(path, memo)
        self.assertIs(cc.read_snapshot_cache(path, memo), kept)  # kept while the file is as it was
        write_cache("d" * 40)  # same size, same mtime: another inode and ctime
        self.assertEqual(cc.read_snapshot_cache(path, memo).tree, "d" * 40)
        settle(path)
        self.assertEqual(cc.read_snapshot_cache(path, memo).tree, "d" * 40)
        with open(path, "r+b") as stream:  # rewritten in place: same inode, size and (restored) mtime
            data = stream.read()
            stream.seek(0)
            stream.write(data.replace(b"d" * 40, b"e" * 40))
        os.utime(path, ns=(10 ** 18, 10 ** 18))
        self.assertEqual(cc.read_snapshot_cache(path, memo).tree, "e" * 40)
        os.remove(path)
        self.assertIsNone(cc.read_snapshot_cache(path, memo))

    def test_nothing_is_kept_from_a_file_changed_within_the_clock_tick(self):
        ws = Workspace(self)
        path = os.path.join(ws.repo, ".git", "claude-checkpoint-test.json")
        memo = cc.FileMemo()
        cc.write_snapshot_cache(path, cc.SnapshotCache("c" * 40, "a" * 40, None, "", {}))
        self.assertIsNotNone(cc.read_snapshot_cache(path, memo))
        self.assertEqual(memo.kept, {})


# ── save: the answer, warnings, the size cap (SPEC section 3) ──

class TestE2eSaveAnswer(unittest.TestCase):
    def test_checkpoint_is_capped_at_64_kb_dropping_the_oldest_commands_first(self):
        ws = Workspace(self)
        server = start_server(self, ws)
        commands = [{"command": f"echo cmd-{i:02d} " + "x" * 1988, "exitCode": 0, "note": "n" * 500}
                    for i in range(50)]
        result = save_ok(server, goal="big", decisions=["keep me"], recentCommands=commands,
                         modifiedFiles=[{"path": "README.md", "note": "keep this note"}])
        size = os.path.getsize(os.path.join(ws.repo, CHECKPOINT))
        self.assertLessEqual(size, 65536)
        self.assertEqual(result["structuredContent"]["bytes"], size)
        cp = ws.checkpoint()
        self.assertIs(cp["meta"]["truncated"], True)
        kept = [c["command"][:11] for c in cp["recentCommands"]]
        self.assertTrue(0 < len(kept) < 50, len(kept))
        self.assertEqual(kept, [f"echo cmd-{i:02d}" for i in range(50 - len(kept), 50)])
        self.assertEqual(cp["decisions"], ["keep me"])
        self.assertEqual(files_by_path(cp)["README.md"]["note"], "keep this note")
        self.assertTrue(warnings_besides_git_ignore(result), result)

    def test_warns_when_the_checkpoint_is_not_git_ignored(self):
        for ignored in (False, True):
            with self.subTest(ignored=ignored):
                ws = Workspace(self, files={".gitignore": ".claude-checkpoint*\n"} if ignored else None)
                server = start_server(self, ws)
                warnings = save_ok(server, goal="g")["structuredContent"]["warnings"]
                mentions = [w for w in warnings if "ignore" in w.lower()]
                self.assertEqual(bool(mentions), not ignored, warnings)

    def test_a_tracked_checkpoint_gets_a_stronger_warning_whose_commands_work_as_printed(self):
        ws = Workspace(self, files={"README.md": "# demo\n", ".gitignore": "*.log\n"})
        server = start_server(self, ws)
        save_ok(server, goal="first")
        ws.git("add", "-A")  # the checkpoint is now tracked

        def git_warnings() -> list:
            warnings = save_ok(server, goal="again")["structuredContent"]["warnings"]
            return [w for w in warnings if "git" in w and ".claude-checkpoint" in w]

        for state in ("staged", "committed", "committed and in .gitignore"):
            with self.subTest(state):
                if state == "committed":
                    ws.git("commit", "-qam", "oops")
                if state.endswith(".gitignore"):
                    ws.write(".gitignore", "*.log\n.claude-checkpoint*\n")
                    ws.git("commit", "-qam", "ignore it (too late)")
                warnings = git_warnings()
                self.assertEqual(len(warnings), 1, warnings)
                self.assertIn("tracked by git", warnings[0])
                self.assertNotIn("not git-ignored", warnings[0])
        for command in re.findall(r"`([^`]*(?:rm --cached|install --exclude)[^`]*)`", warnings[0]):
            proc = subprocess.run(["/bin/sh", "-c", command], cwd=ws.home, env=ws.env, capture_output=True,
                                  timeout=TIMEOUT)
            self.assertEqual(proc.returncode, 0, (command, proc.stderr))
        self.assertEqual(ws.git("ls-files", "--", ".claude-checkpoint*"), "")
        self.assertEqual(git_warnings(), [])
        self.assertTrue(os.path.exists(os.path.join(ws.repo, CHECKPOINT)), "untracking keeps the file")

    def test_the_not_ignored_advice_works_exactly_as_printed(self):
        ws = Workspace(self)
        server = start_server(self, ws)
        warning = next(w for w in save_ok(server, goal="g")["structuredContent"]["warnings"] if "ignored" in w)
        advice = re.search(r"run `([^`]+)`", warning).group(1)
        proc = subprocess.run(["/bin/sh", "-c", advice], cwd=ws.home, env=ws.env, capture_output=True,
                              timeout=TIMEOUT)  # from another folder: the command names the root
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn(".claude-checkpoint*", proc.stdout.decode(), "it says what it did")
        ws.git("check-ignore", "-q", ".claude-checkpoint")
        ws.git("check-ignore", "-q", ".claude-checkpoint.prev")
        self.assertEqual([w for w in save_ok(server, goal="g")["structuredContent"]["warnings"] if "ignore" in w], [])

    def test_no_answer_or_log_echoes_a_secret_of_the_servers_environment(self):
        # A value with no telling shape: only the exact-value rule can catch it.
        plain, shaped = "Tr0ub4dor-and-three-horses", fake_secret("ghp_", 36)
        ws = Workspace(self)
        env = dict(ws.env, GITHUB_TOKEN=plain, ANTHROPIC_API_KEY=shaped)
        server = start_server(self, ws, env=env, initialize=False)
        server.initialize(capabilities={"roots": {}})
        ask = server.wait_for(is_roots_request)
        server.send({"jsonrpc": "2.0", "id": ask["id"], "error": {"code": -1, "message": f"no roots for {plain}"}})
        for secret in (plain, shaped):
            echoes = {
                "mode": ("tools/call", {"name": "save_session_checkpoint", "arguments": {"goal": "g", "mode": secret}}),
                "unknown field": ("tools/call", {"name": "save_session_checkpoint",
                                                 "arguments": {"goal": "g", secret: 1}}),
                "task status": ("tools/call", {"name": "save_session_checkpoint", "arguments": {
                    "goal": "g", "tasks": [{"description": "t", "status": secret}]}}),
                "relative projectRoot": ("tools/call", {"name": "save_session_checkpoint",
                                                        "arguments": {"goal": "g", "projectRoot": f"x/{secret}"}}),
                "path outside": ("tools/call", {"name": "save_session_checkpoint", "arguments": {
                    "goal": "g", "projectRoot": ws.repo, "modifiedFiles": [{"path": f"/elsewhere/{secret}"}]}}),
                "load format": ("tools/call", {"name": "load_session_checkpoint", "arguments": {"format": secret}}),
                "tool name": ("tools/call", {"name": secret}),
                "resource": ("resources/read", {"uri": f"checkpoint://{secret}"}),
                "method": (secret, {}),
            }
            for name, (method, params) in echoes.items():
                with self.subTest(name, secret=secret[:4]):
                    reply = server.request(method, params)
                    self.assertNotIn(secret, json.dumps(reply))
                    self.assertIn("«redacted»", json.dumps(reply, ensure_ascii=False))
        server.close()
        for secret in (plain, shaped):
            self.assertFalse([line for line in server.raw_lines if secret.encode() in line])
            self.assertNotIn(secret, server.stderr)
        self.assertIn("no roots for «redacted»", server.stderr)

    def test_redacting_the_handshake_answers_compiles_no_rule(self):
        # Every answer is redacted, but compiling the rules would double the start-up time.
        script = textwrap.dedent(f"""
            import sys; sys.path.insert(0, {HERE!r})
            import claude_checkpoint as cc
            protocol = cc.Protocol(cc.World({{}}, "/", None, lambda: 0.0, print))
            meta = {{"_meta": {json.dumps(with_meta()["_meta"])}}}
            for method, params in (("initialize", {{"protocolVersion": "2025-06-18", "capabilities": {{}}}}),
                                   ("server/discover", meta), ("tools/list", meta), ("tools/list", {{}}),
                                   ("prompts/list", {{}}), ("resources/list", {{}}), ("ping", {{}})):
                reply = protocol.handle({{"jsonrpc": "2.0", "id": 1, "method": method, "params": params}})
                assert "result" in cc.redact_message(reply, ("secret-value",)), reply
            print(hasattr(cc._compiled_rules, "cache") or any(getattr(cc._rule_table, "compiled", ())))
            """)
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=TIMEOUT)
        self.assertEqual(proc.stdout.decode().strip(), "False", proc.stderr.decode())

    def test_answer_text_follows_the_seed_example(self):
        ws = Workspace(self)
        ws.git("checkout", "-qb", "feat/github-oauth")
        ws.write("src/app.py", "print('changed')\n")
        ws.write("src/new.spec.py", "test\n")
        server = start_server(self, ws)
        result = save_ok(server, **sample_save())
        lines = result["content"][0]["text"].splitlines()
        path = os.path.join(ws.repo, CHECKPOINT)
        self.assertEqual(lines[0], f"Checkpoint saved to {path} ({os.path.getsize(path)} bytes, replace).")
        self.assertEqual(lines[1], f"3 task(s), 2 file(s), 2 command(s) on feat/github-oauth@{ws.head()[:9]}.")
        self.assertIn("⚠ Redacted 1 secret-looking value(s).", lines[2:])
        self.assertNotIn("gh_live_8f2a91", read_bytes(path).decode())
        for warning in result["structuredContent"]["warnings"]:
            self.assertIn(f"⚠ {warning}", lines)


# ── load: the brief, the full format, versions (SPEC section 4) ──

class TestE2eLoad(unittest.TestCase):
    def setUp(self):
        self.ws = Workspace(self)
        self.server = start_server(self, self.ws)

    def test_no_checkpoint_is_found_false_and_not_an_error(self):
        result = self.server.call("load_session_checkpoint", {})
        self.assertFalse(result.get("isError"), result)
        self.assertIn("nothing to resume", result["content"][0]["text"].lower())
        full = load_full(self.server)
        self.assertIs(full["found"], False)
        self.assertEqual(full["path"], os.path.join(self.ws.repo, CHECKPOINT))

    def test_brief_has_the_sections_and_markers_of_the_spec(self):
        self.ws.write("src/app.py", "print('changed')\n")
        save_ok(self.server, goal="Ship it", summary="Half done.", nextSteps=["first", "second"],
                decisions=["no ORM"],
                tasks=[{"description": "done one", "status": "done"}, {"description": "doing", "status": "in_progress"},
                       {"description": "todo", "status": "pending"}, {"description": "stuck", "status": "blocked"}],
                modifiedFiles=[{"path": "src/app.py", "note": "cookie options"}],
                recentCommands=[{"command": "make", "exitCode": 0}, {"command": "make test", "exitCode": 2,
                                                                       "note": "2 failing"}])
        brief = self.server.load()
        lines = brief.splitlines()
        self.assertRegex(lines[0], r"^# Resuming: project \(checkpoint saved .+, \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\)$")
        self.assertEqual(lines[1], f"Branch `main` @ {self.ws.head()[:9]} (uncommitted changes)")
        for line in ["## Goal", "Ship it", "## Tasks", "- [x] done one", "- [~] doing", "- [ ] todo", "- [!] stuck",
                     "## Where things stand", "Half done.", "## Next steps", "1. first", "2. second",
                     "## Decisions & gotchas", "- no ORM", "## Files touched (1)", "- src/app.py (M) — cookie options",
                     "## Recent commands (last 2, oldest first)", "- ✓ `make`", "- ✗ exit 2 `make test` — 2 failing"]:
            with self.subTest(line=line):
                self.assertIn(line, lines)
        self.assertIn(self.ws.repo, brief)  # every answer says which root it used

    def test_brief_leaves_out_empty_sections(self):
        save_ok(self.server, goal="Only a goal")
        brief = self.server.load()
        self.assertIn("## Goal", brief)
        for heading in ("## Tasks", "## Where things stand", "## Next steps", "## Decisions", "## Files touched",
                        "## Recent commands"):
            self.assertNotIn(heading, brief)

    def test_brief_cuts_long_lists_with_and_n_more(self):
        for i in range(40):
            self.ws.write(f"gen/file{i:02d}.txt", f"{i}\n")
        save_ok(self.server, goal="long lists", tasks=[{"description": f"task {i}", "status": "pending"}
                                                        for i in range(30)],
                nextSteps=[f"step {i}" for i in range(20)], decisions=[f"decision {i}" for i in range(20)])
        brief = self.server.load()
        sections = {}
        for block in brief.split("\n## ")[1:]:
            heading, _, body = block.partition("\n")
            sections[heading.split(" (")[0]] = body.strip().splitlines()
        for heading, total in (("Tasks", 30), ("Next steps", 20), ("Decisions & gotchas", 20), ("Files touched", 40)):
            with self.subTest(section=heading):
                body = sections[heading]
                more = re.fullmatch(r"(?:- )?… and (\d+) more", body[-1])
                self.assertIsNotNone(more, body[-3:])
                self.assertEqual(len(body) - 1 + int(more.group(1)), total)

    def test_full_format_returns_the_result_object_and_the_checkpoint(self):
        save_ok(self.server, **sample_save())
        result = self.server.call("load_session_checkpoint", {"format": "full"})
        self.assertNotIn("structuredContent", result)
        full = json.loads(result["content"][0]["text"])
        self.assertLessEqual({"found", "path", "fromBackup", "updatedAt", "drift", "warnings", "checkpoint"},
                             set(full))
        self.assertEqual((full["found"], full["fromBackup"]), (True, False))
        self.assertEqual(full["path"], os.path.join(self.ws.repo, CHECKPOINT))
        self.assertEqual(set(full["drift"]) >= {"branchChanged", "currentBranch", "commitsSince", "changedSince",
                                                "newSince"}, True, full["drift"])
        self.assertEqual(full["checkpoint"], self.ws.checkpoint())
        self.assertEqual(full["updatedAt"], self.ws.checkpoint()["updatedAt"])

    def test_version_1_file_of_the_seed_loads(self):
        self.ws.write(CHECKPOINT, json.dumps(SEED_V1_CHECKPOINT, ensure_ascii=False, indent=2))
        brief = self.server.load()
        for text in ("Add GitHub OAuth login with persistent sessions", "- [x] OAuth callback route",
                     "- [~] Session cookie persistence", "src/auth/session.ts (M) — cookie options",
                     "- ✗ exit 1 `npm test -- auth`"):
            self.assertIn(text, brief)
        full = load_full(self.server)
        self.assertIs(full["found"], True)
        self.assertEqual(full["checkpoint"]["goal"]["primary"], SEED_V1_CHECKPOINT["goal"]["primary"])

    def test_a_version_2_file_loads_and_the_next_save_writes_version_1(self):
        self.ws.write(CHECKPOINT, json.dumps(dict(SEED_V1_CHECKPOINT, version=2, hooks={"toolUseIds": ["toolu_1"]})))
        self.assertIn("Add GitHub OAuth", self.server.load())
        save_ok(self.server, goal="merged onto version 2", mode="merge")
        saved = self.ws.checkpoint()
        self.assertEqual(saved["version"], 1)
        self.assertEqual(saved["hooks"]["toolUseIds"], ["toolu_1"])
        self.assertEqual(saved["decisions"], SEED_V1_CHECKPOINT["decisions"])

    def test_newer_version_is_refused_with_upgrade_advice(self):
        self.ws.write(CHECKPOINT, json.dumps(dict(SEED_V1_CHECKPOINT, version=999)))
        for arguments in ({}, {"format": "full"}):
            with self.subTest(arguments=arguments):
                result = self.server.call("load_session_checkpoint", arguments)
                self.assertIn("upgrade", result["content"][0]["text"].lower())
                self.assertNotIn("Add GitHub OAuth", result["content"][0]["text"])


# ── hooks: pre-compact, stop, session-end, session-start ──

# A real Claude Code 2.1.328 transcript (Write, Bash `echo hi`, a failing `ls`, an Edit, a failing Edit,
# /compact, a resumed prompt), recorded in a folder that is not the test's project.
REAL_TRANSCRIPT = os.path.join(CORPUS_DIR, "real_transcript.jsonl")


def hook_env(ws: Workspace, **extra: str) -> dict:
    """The environment Claude Code gives a hook (seen): CLAUDE_PROJECT_DIR and friends."""
    return dict(ws.env, CLAUDE_PROJECT_DIR=ws.repo, CLAUDECODE="1", CLAUDE_CODE_ENTRYPOINT="sdk-cli", **extra)


def run_hook_process(test: unittest.TestCase, ws: Workspace, event: str, stdin: str | bytes, env: dict | None = None,
             cwd: str | None = None) -> tuple:
    """Run a hook; check what every hook promises (exit 0, no traceback, in bounded time).
    Returns (completed process, seconds)."""
    started = time.monotonic()
    proc = ws.run_cli("hook", event, stdin=stdin, env=env or hook_env(ws), cwd=cwd, timeout=HOOK_BOUND_S + 15)
    elapsed = time.monotonic() - started
    test.assertEqual(proc.returncode, 0, proc.stderr.decode(errors="replace"))
    test.assertNotIn(b"Traceback", proc.stderr)
    test.assertLess(elapsed, HOOK_BOUND_S)
    return proc, elapsed


def stderr_lines(proc: subprocess.CompletedProcess) -> list:
    return [line for line in proc.stderr.decode(errors="replace").splitlines() if line.strip()]


def commands_of(checkpoint: dict) -> list:
    return [c["command"] for c in checkpoint.get("recentCommands", [])]


class PreCompactHookTest(unittest.TestCase):
    """`hook pre-compact` merges what the transcript proves into the checkpoint."""

    def setUp(self):
        self.ws = Workspace(self, files={"README.md": "# demo\n", "src/app.py": "print('hi')\n",
                                         "src/lib.py": "a = 1\n", "src/failed.py": "a = 1\n",
                                         "src/read_only.py": "a = 1\n", "nb/analysis.ipynb": "{}\n"})
        self.transcripts = temp_dir(self, "cc-transcripts-")

    def pre_compact(self, transcript: Transcript, name: str = "session.jsonl", **extra) -> subprocess.CompletedProcess:
        path = transcript.save(os.path.join(self.transcripts, name))
        proc, _ = run_hook_process(self, self.ws, "pre-compact",
                           hook_payload("pre-compact", path, self.ws.repo, transcript.session_id, **extra))
        self.assertEqual(proc.stdout, b"", "pre-compact stdout goes into the compaction prompt")
        return proc

    def session(self) -> Transcript:
        """Edits that worked and failed, a Read, commands that passed and failed, noise."""
        t = Transcript(self.ws.repo)
        t.attachment()
        t.prompt("Make the login test pass")
        t.noise()
        t.edit("Edit", os.path.join(self.ws.repo, "src/app.py"))
        t.edit("Write", os.path.join(self.ws.repo, "docs/new.md"))
        self.ws.write("docs/new.md", "hello\n")
        t.edit("MultiEdit", os.path.join(self.ws.repo, "src/lib.py"))
        t.edit("NotebookEdit", os.path.join(self.ws.repo, "nb/analysis.ipynb"))
        t.edit("Edit", os.path.join(self.ws.repo, "src/failed.py"), ok=False)
        t.edit("Write", os.path.join(self.ws.repo, "src/never_written.py"), ok=False)
        t.read(os.path.join(self.ws.repo, "src/read_only.py"))
        t.attachment(50_000)
        t.bash("npm test -- auth", exit_code=0)
        t.bash("pytest -x tests/test_login.py", exit_code=2, output="1 failed")
        return t

    def test_the_checkpoint_a_hook_creates_is_kept_out_of_git_without_touching_gitignore(self):
        self.assertEqual(self.ws.git("check-ignore", "-q", CHECKPOINT, check=False), "")
        self.pre_compact(self.session())
        self.assertTrue(os.path.exists(os.path.join(self.ws.repo, CHECKPOINT)))
        status = self.ws.git("status", "--porcelain", "--untracked-files=all")
        self.assertNotIn(CHECKPOINT, status, "a `git add -A` would not commit it")
        self.assertIn(".claude-checkpoint*", read(os.path.join(self.ws.repo, ".git", "info", "exclude")).decode())
        self.assertFalse(os.path.exists(os.path.join(self.ws.repo, ".gitignore")))

    def test_records_successful_edits_and_not_failed_edits_or_reads(self):
        self.pre_compact(self.session())
        files = files_by_path(self.ws.checkpoint())
        for path in ("src/app.py", "docs/new.md", "src/lib.py", "nb/analysis.ipynb"):
            with self.subTest(recorded=path):
                self.assertIn(path, files)
        for path in ("src/failed.py", "src/never_written.py", "src/read_only.py"):
            with self.subTest(not_recorded=path):
                self.assertNotIn(path, files)
        with open(os.path.join(self.ws.repo, "src/app.py"), "rb") as stream:
            self.assertEqual(files["src/app.py"].get("hash"), blob_sha(stream.read()))

    def test_records_bash_commands_with_their_exit_status(self):
        self.pre_compact(self.session())
        commands = {c["command"]: c for c in self.ws.checkpoint()["recentCommands"]}
        self.assertEqual(list(commands), ["npm test -- auth", "pytest -x tests/test_login.py"])
        self.assertEqual(commands["npm test -- auth"].get("exitCode"), 0)
        self.assertEqual(commands["pytest -x tests/test_login.py"].get("exitCode"), 2)

    def test_takes_the_first_real_prompt_as_goal_when_there_is_none(self):
        t = Transcript(self.ws.repo)
        t.not_prompts()
        t.attachment()
        t.prompt("Fix the flaky login test")
        t.prompt("And then update the changelog")
        t.bash("npm test")
        self.pre_compact(t)
        goal = self.ws.checkpoint()["goal"]
        self.assertEqual(goal["primary"], "Fix the flaky login test")
        self.assertTrue(goal.get("auto"), goal)

    def test_never_overwrites_what_the_model_saved(self):
        saved = sample_save(recentCommands=[{"command": "make build", "exitCode": 0}])
        proc = self.ws.run_cli("save", stdin=json.dumps(saved))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        before = self.ws.checkpoint()
        self.pre_compact(self.session())
        after = self.ws.checkpoint()
        for key in ("goal", "summary", "nextSteps", "decisions", "id", "createdAt"):
            with self.subTest(field=key):
                self.assertEqual(after.get(key), before.get(key))
        self.assertEqual(files_by_path(after)["src/app.py"].get("note"), "cookie options")
        self.assertEqual(commands_of(after), ["make build", "npm test -- auth", "pytest -x tests/test_login.py"])
        self.assertNotEqual(after["goal"]["primary"], "Make the login test pass")

    def test_marks_what_it_added_as_automatic(self):
        self.ws.run_cli("save", "--goal", "Ship the login page")
        self.pre_compact(self.session())
        checkpoint = self.ws.checkpoint()
        self.assertFalse(checkpoint["goal"].get("auto"), "the model's goal is not automatic")
        for command in checkpoint["recentCommands"]:
            with self.subTest(command=command["command"]):
                self.assertIs(command.get("auto"), True)
        for path in ("src/app.py", "src/lib.py", "nb/analysis.ipynb"):  # clean in git: known only from the hook
            with self.subTest(file=path):
                self.assertIs(files_by_path(checkpoint)[path].get("auto"), True)

    def test_redacts_secrets_taken_from_the_transcript(self):
        token = fake_secret("ghp_", 36)
        aws_key = fake_secret("AKIA", 16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        t = Transcript(self.ws.repo)
        t.prompt(f"Deploy with the AWS key {aws_key} to staging")
        t.bash(f"export GITHUB_TOKEN={token}")
        t.bash("gh auth status", output=f"token {token}")
        self.pre_compact(t)
        with open(os.path.join(self.ws.repo, ".claude-checkpoint"), "rb") as stream:
            raw = stream.read()
        for secret in (token, aws_key):
            with self.subTest(secret=secret[:4]):
                self.assertNotIn(secret.encode(), raw)
        checkpoint = json.loads(raw)
        self.assertIn("«redacted»", checkpoint["goal"]["primary"])
        self.assertIn("export GITHUB_TOKEN=«redacted»", commands_of(checkpoint))
        self.assertGreaterEqual(checkpoint["meta"]["redactions"], 2)

    def test_running_twice_on_the_same_transcript_records_nothing_twice(self):
        t = self.session()
        self.pre_compact(t)
        first = self.ws.checkpoint()
        self.pre_compact(t)
        second = self.ws.checkpoint()
        self.assertEqual(commands_of(second), commands_of(first))
        paths = [f["path"] for f in second["modifiedFiles"]]
        self.assertEqual(sorted(paths), sorted(files_by_path(first)))
        self.assertEqual(len(paths), len(set(paths)))

    def test_a_compaction_that_rereads_the_transcript_elsewhere_records_nothing_twice(self):
        """The same tool_use ids under another transcript key (no byte cursor to help)."""
        t = self.session()
        self.pre_compact(t)
        t.session_id = "5d2f7c1e-0000-4000-8000-000000000002"
        self.pre_compact(t, name="copy.jsonl")
        self.assertEqual(commands_of(self.ws.checkpoint()), ["npm test -- auth", "pytest -x tests/test_login.py"])

    def test_a_grown_transcript_adds_only_the_new_items(self):
        t = self.session()
        running = t.bash("npm run build", answered=False)  # still running at the first compaction
        self.pre_compact(t)
        self.assertEqual(commands_of(self.ws.checkpoint()), ["npm test -- auth", "pytest -x tests/test_login.py"])
        t.bash_result(running, 0)
        t.attachment(10_000)
        t.prompt("Now update the docs too")
        t.edit("Edit", os.path.join(self.ws.repo, "README.md"))
        t.bash("git status", exit_code=0)
        t.bash("npm test -- auth", exit_code=1, output="Exit status 1")  # the same command again is a new run
        self.pre_compact(t)
        checkpoint = self.ws.checkpoint()
        self.assertEqual(commands_of(checkpoint), ["npm test -- auth", "pytest -x tests/test_login.py",
                                                   "npm run build", "git status", "npm test -- auth"])
        self.assertEqual(checkpoint["recentCommands"][-1].get("exitCode"), 1)
        self.assertIn("README.md", files_by_path(checkpoint))
        self.assertEqual(checkpoint["goal"]["primary"], "Make the login test pass", "the first prompt stays the goal")

    def test_session_end_and_stop_record_like_pre_compact(self):
        for event in ("session-end", "stop"):
            with self.subTest(event=event):
                ws = Workspace(self)
                t = Transcript(ws.repo)
                t.prompt("Tidy up")
                t.edit("Edit", os.path.join(ws.repo, "src/app.py"))
                t.bash("make lint", exit_code=0)
                path = t.save(os.path.join(self.transcripts, f"{event}.jsonl"))
                proc, _ = run_hook_process(self, ws, event, hook_payload(event, path, ws.repo))
                self.assertEqual(proc.stdout, b"")
                self.assertEqual(commands_of(ws.checkpoint()), ["make lint"])
                self.assertIn("src/app.py", files_by_path(ws.checkpoint()))

    def test_real_claude_code_transcript_records_its_commands_and_no_outside_file(self):
        if not os.path.exists(REAL_TRANSCRIPT):
            self.skipTest(f"{REAL_TRANSCRIPT} is missing")
        path = os.path.join(self.transcripts, "real.jsonl")
        shutil.copyfile(REAL_TRANSCRIPT, path)
        proc, _ = run_hook_process(self, self.ws, "pre-compact",
                           hook_payload("pre-compact", path, self.ws.repo, "358e99cd-8117-4491-b3e7-b76fc0e7e5dc"))
        self.assertEqual(proc.stdout, b"")
        checkpoint = self.ws.checkpoint()
        commands = {c["command"]: c.get("exitCode") for c in checkpoint["recentCommands"]}
        self.assertEqual(commands, {"echo hi": 0, "ls /nonexistent-dir-xyz": 2})
        self.assertFalse([p for p in files_by_path(checkpoint) if "notes.txt" in p or p.startswith("/")],
                         "its Write/Edit went to a folder outside this project")
        self.assertEqual(checkpoint["goal"]["primary"], "Create notes.txt, say hi, then edit it")


class HookRobustnessTest(unittest.TestCase):
    """A hook never blocks or breaks a session: exit 0, nothing on stdout, one line on stderr."""

    def setUp(self):
        self.ws = Workspace(self)
        self.transcript = Transcript(self.ws.repo)
        self.transcript.prompt("Keep going")
        self.transcript.bash("make test")
        self.transcript_path = self.transcript.save(os.path.join(self.ws.home, "t.jsonl"))

    def assert_one_clear_line(self, proc, *words: str) -> None:
        lines = stderr_lines(proc)
        self.assertEqual(len(lines), 1, lines)
        for word in words:
            self.assertIn(word.lower(), lines[0].lower())

    def test_bad_hook_input_exits_zero_with_one_stderr_line(self):
        cases = {
            "garbage stdin": (b"\x00\xffnot json{", ""),
            "empty stdin": (b"", ""),
            "a JSON array": (b"[1, 2]", ""),
            "missing transcript": (hook_payload("pre-compact", os.path.join(self.ws.home, "gone.jsonl"),
                                                self.ws.repo), "gone.jsonl"),
            "transcript is a folder": (hook_payload("pre-compact", self.ws.home, self.ws.repo), "transcript"),
            "transcript is an endless device": (hook_payload("pre-compact", "/dev/zero", self.ws.repo), "regular file"),
        }
        for name, (stdin, word) in cases.items():
            with self.subTest(name):
                proc, _ = run_hook_process(self, self.ws, "pre-compact", stdin)
                self.assertEqual(proc.stdout, b"")
                self.assertFalse(os.path.exists(os.path.join(self.ws.repo, ".claude-checkpoint")))
                self.assert_one_clear_line(proc, word)

    def test_session_start_with_garbage_stdin_prints_nothing(self):
        proc, _ = run_hook_process(self, self.ws, "session-start", b"\x00garbage")
        self.assertEqual(proc.stdout, b"")

    def test_corrupt_checkpoint_is_reported_and_the_backup_kept(self):
        good = json.dumps(sample_save())
        for name, prev_valid in (("main corrupt, .prev good", True), ("both corrupt", False)):
            with self.subTest(name):
                ws = Workspace(self)
                self.assertEqual(ws.run_cli("save", stdin=good).returncode, 0)
                self.assertEqual(ws.run_cli("save", stdin=good).returncode, 0)  # makes a valid .prev
                main, prev = (os.path.join(ws.repo, n) for n in (".claude-checkpoint", ".claude-checkpoint.prev"))
                write(ws.repo, ".claude-checkpoint", b"{corrupt")
                if not prev_valid:
                    write(ws.repo, ".claude-checkpoint.prev", b"\xff\xfe also corrupt")
                with open(prev, "rb") as stream:
                    prev_before = stream.read()
                proc, _ = run_hook_process(self, ws, "pre-compact", hook_payload("pre-compact", self.transcript_path, ws.repo))
                self.assertEqual(proc.stdout, b"")
                with open(prev, "rb") as stream:
                    self.assertEqual(stream.read(), prev_before, "a corrupt file never overwrites .prev")
                if prev_valid:  # recorded on top of the backup: nothing of the model's is lost
                    with open(main, encoding="utf-8") as stream:
                        checkpoint = json.load(stream)
                    self.assertEqual(checkpoint["goal"]["primary"], sample_save()["goal"])
                    self.assertIn("make test", commands_of(checkpoint))
                self.assert_one_clear_line(proc, ".claude-checkpoint")

    @slow
    def test_hanging_git_does_not_hold_the_session(self):
        env = hook_env(self.ws, PATH=fake_git_folder(self, "sleep 30") + os.pathsep + os.environ["PATH"])
        proc, _ = run_hook_process(self, self.ws, "pre-compact",
                           hook_payload("pre-compact", self.transcript_path, self.ws.repo), env=env)
        self.assertEqual(proc.stdout, b"")
        self.assertEqual(commands_of(self.ws.checkpoint()), ["make test"])
        self.assertIsNone(self.ws.checkpoint()["git"])
        self.assert_one_clear_line(proc, "git")

    def test_filesystem_root_or_home_is_refused(self):
        for name, folder in (("/", os.path.abspath(os.sep)), ("HOME", self.ws.home)):
            with self.subTest(name):
                env = dict(hook_env(self.ws), CLAUDE_PROJECT_DIR=folder)
                for event in ("pre-compact", "session-start"):
                    proc, _ = run_hook_process(self, self.ws, event, hook_payload(event, self.transcript_path, folder),
                                       env=env, cwd=folder)
                    self.assertEqual(proc.stdout, b"")
                    self.assert_one_clear_line(proc, "root")
                self.assertFalse(os.path.exists(os.path.join(folder, ".claude-checkpoint")))


@slow
class LargeTranscriptTest(unittest.TestCase):
    """Transcripts are big (attachments are ~80% of the bytes): the hook streams them."""

    def test_a_50_mb_transcript_is_read_quickly_and_completely(self):
        ws = Workspace(self)
        t = Transcript(ws.repo)
        t.prompt("Refactor the parser")
        blob = "y" * 50_000  # twice per Read line: content and toolUseResult
        for i in range(500):
            if i % 2:
                t.attachment(100_000)
            else:  # a big Read result: it says "tool_result", so only a cheap check can skip it
                tool_id = t.call("Read", {"file_path": os.path.join(ws.repo, "README.md")})
                t.result(tool_id, blob, None, {"type": "text", "file": {"content": blob}})
            if i % 50 == 0:
                t.bash(f"pytest -k case{i}", exit_code=0 if i % 100 else 1)
        t.edit("Edit", os.path.join(ws.repo, "src/app.py"))
        path = t.save(os.path.join(ws.home, "big.jsonl"))
        self.assertGreater(os.path.getsize(path), 50_000_000)
        started = time.monotonic()
        proc, _ = run_hook_process(self, ws, "pre-compact", hook_payload("pre-compact", path, ws.repo))
        elapsed = time.monotonic() - started
        self.assertLess(elapsed, 10, "a hook must not hold the compaction")
        self.assertEqual(proc.stdout, b"")
        checkpoint = ws.checkpoint()
        self.assertEqual(len(checkpoint["recentCommands"]), 10)
        self.assertEqual(checkpoint["recentCommands"][0]["exitCode"], 1)
        self.assertIn("src/app.py", files_by_path(checkpoint))


class SessionStartHookTest(unittest.TestCase):
    """`hook session-start` puts the brief in the model's context after clear, compact or resume."""

    def test_prints_the_brief_when_a_checkpoint_exists(self):
        ws = Workspace(self)
        self.assertEqual(ws.run_cli("save", stdin=json.dumps(sample_save())).returncode, 0)
        for source in ("clear", "compact", "resume", "startup"):
            with self.subTest(source=source):
                proc, _ = run_hook_process(self, ws, "session-start",
                                   hook_payload("session-start", "/nonexistent.jsonl", ws.repo, source=source))
                brief = proc.stdout.decode()
                self.assertTrue(brief.startswith("# Resuming:"), brief)
                self.assertIn(sample_save()["goal"], brief)
                self.assertEqual(stderr_lines(proc), [])

    def test_commands_in_the_brief_and_in_warnings_are_the_short_ones_a_person_types_and_they_work(self):
        ws = Workspace(self)
        saved = ws.run_cli("save", "--goal", "short commands")
        self.assertEqual(saved.returncode, 0, saved.stderr)
        exclude = re.search(r"run `([^`]+)`", saved.stdout.decode())
        self.assertIsNotNone(exclude, "the save says the checkpoint is not git-ignored, with the command")
        proc, _ = run_hook_process(self, ws, "session-start", hook_payload("session-start", "/nonexistent.jsonl", ws.repo))
        rewind = re.search(r"rewind the files to it.*`([^`\n]+)`", proc.stdout.decode())
        self.assertIsNotNone(rewind, proc.stdout)
        for line in (exclude.group(1), rewind.group(1)):
            with self.subTest(line=line):
                words = shlex.split(line)
                self.assertNotIn("import", line, "the importing command belongs in configuration files only")
                self.assertEqual(words[1], SERVER)
                self.assertEqual(os.path.realpath(shutil.which(words[0]) or words[0]), os.path.realpath(sys.executable))
        done = subprocess.run(shlex.split(rewind.group(1)), cwd=ws.home, env=ws.env, capture_output=True, timeout=TIMEOUT)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn(b"already match", done.stdout, "a dry run of the checkpoint's own snapshot")

    def test_prints_nothing_when_there_is_no_checkpoint(self):
        ws = Workspace(self)
        proc, _ = run_hook_process(self, ws, "session-start", hook_payload("session-start", "/nonexistent.jsonl", ws.repo))
        self.assertEqual(proc.stdout, b"")
        self.assertFalse(os.path.exists(os.path.join(ws.repo, ".claude-checkpoint")))


    def test_unreadable_checkpoint_falls_back_or_prints_nothing(self):
        ws = Workspace(self)
        for _ in range(2):  # the second save keeps the first as a valid .prev
            self.assertEqual(ws.run_cli("save", stdin=json.dumps(sample_save())).returncode, 0)
        write(ws.repo, ".claude-checkpoint", b"{corrupt")
        payload = hook_payload("session-start", "/nonexistent.jsonl", ws.repo)
        with self.subTest("main corrupt, .prev good"):
            proc, _ = run_hook_process(self, ws, "session-start", payload)
            self.assertTrue(proc.stdout.decode().startswith("# Resuming:"), proc.stdout)
        write(ws.repo, ".claude-checkpoint.prev", b"{corrupt too")
        with self.subTest("both corrupt"):
            proc, _ = run_hook_process(self, ws, "session-start", payload)
            self.assertEqual(proc.stdout, b"")
            self.assertEqual(len(stderr_lines(proc)), 1, stderr_lines(proc))


# ── hooks of the other agents: `hook EVENT --client NAME` (SPEC section 12) ──

# Copilot CLI needs Node 24, so its hook input is taken from GitHub's documented shape: camelCase
# fields, a millisecond timestamp, the session's folder as cwd.
COPILOT_SESSION_START = {"sessionId": "9b1c2d3e-0000-4000-8000-00000000c0b1", "timestamp": 1764600000000,
                         "cwd": "{cwd}", "source": "new", "initialPrompt": "go on with the task"}
COPILOT_AGENT_STOP = {"sessionId": "9b1c2d3e-0000-4000-8000-00000000c0b1", "timestamp": 1764600060000,
                      "cwd": "{cwd}", "transcriptPath": "{transcript}"}


def agent_payload(client: str, event: str, cwd: str, transcript: str = "/nonexistent.jsonl") -> str:
    """A hook's input as each agent sends it: Claude Code's names for Codex, Gemini CLI and Qwen
    Code (seen, SPEC section 12), Copilot CLI's camelCase."""
    if client == "copilot":
        sample = COPILOT_SESSION_START if event == "session-start" else COPILOT_AGENT_STOP
        return json.dumps(sample).replace("{cwd}", cwd).replace("{transcript}", transcript)
    payload = json.loads(hook_payload(event, transcript, cwd, source="startup") if event == "session-start"
                         else hook_payload(event, transcript, cwd))
    payload["hook_event_name"] = cc.AGENTS[client].hook_events[event]
    return json.dumps(payload)


class AgentHookTest(unittest.TestCase):
    """Each agent's hook reads its own input and answers in its one shape; exit 0 on everything."""

    HOOKED = ("claude", "codex", "gemini", "qwen", "copilot")

    def setUp(self):
        self.ws = Workspace(self)
        self.assertEqual(self.ws.run_cli("save", stdin=json.dumps(sample_save())).returncode, 0)
        self.elsewhere = temp_dir(self, "cc-elsewhere-")  # the hook's own folder is not the project

    def hook(self, client: str, event: str, stdin: str | bytes) -> subprocess.CompletedProcess:
        proc = self.ws.run_cli("hook", event, "--client", client, stdin=stdin, cwd=self.elsewhere)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertNotIn(b"Traceback", proc.stderr)
        return proc

    def test_session_start_hands_the_brief_over_in_each_agents_one_shape(self):
        for client in self.HOOKED:
            with self.subTest(client):
                out = self.hook(client, "session-start", agent_payload(client, "session-start", self.ws.repo)).stdout.decode()
                shape = cc.AGENTS[client].output
                if shape is cc.HookOutput.TEXT:
                    self.assertTrue(out.startswith("# Resuming:"), out)
                    continue
                answer = json.loads(out)  # one JSON document and nothing else: never both shapes
                if shape is cc.HookOutput.HOOK_SPECIFIC:
                    self.assertEqual(list(answer), ["hookSpecificOutput"])
                    self.assertEqual(answer["hookSpecificOutput"]["hookEventName"], "SessionStart")
                    brief = answer["hookSpecificOutput"]["additionalContext"]
                else:
                    self.assertEqual(list(answer), ["additionalContext"])
                    brief = answer["additionalContext"]
                self.assertTrue(brief.startswith("# Resuming:"), brief)
                self.assertIn(sample_save()["goal"], brief)

    def test_the_project_is_found_under_every_field_name_spec_12_gives(self):
        for client in self.HOOKED:
            for payload in ({"sessionId": "s1", "workspace_roots": [self.ws.repo]},
                            {"session_id": "s1", "workspace_roots": [self.ws.repo], "source": "startup"}):
                with self.subTest(client=client, payload=list(payload)):
                    out = self.hook(client, "session-start", json.dumps(payload)).stdout.decode()
                    self.assertIn(sample_save()["goal"], out)

    def test_other_events_print_nothing_on_stdout(self):
        for client in self.HOOKED:
            for event in ("pre-compact", "session-end", "stop"):
                with self.subTest(client=client, event=event):
                    proc = self.hook(client, event, agent_payload(client, event, self.ws.repo))
                    self.assertEqual(proc.stdout, b"")
                    self.assertEqual(len(stderr_lines(proc)), 1, proc.stderr)  # the transcript is missing: said once

    def test_bad_input_exits_0_with_one_clear_line_and_writes_nothing(self):
        before = self.ws.checkpoint()
        cases = {"empty": ("codex", "session-end", b""), "truncated": ("gemini", "stop", b'{"session_id": "s", "cw'),
                 "not an object": ("qwen", "pre-compact", b"[1, 2]"),
                 "another agent's input": ("codex", "stop", agent_payload("copilot", "stop", self.ws.repo)),
                 "another event's input": ("gemini", "stop", agent_payload("gemini", "pre-compact", self.ws.repo))}
        for name, (client, event, stdin) in cases.items():
            with self.subTest(name):
                proc = self.hook(client, event, stdin)
                self.assertEqual(proc.stdout, b"")
                self.assertTrue(stderr_lines(proc), "a failed hook says why on stderr")
        self.assertEqual(self.ws.checkpoint(), before)

    def test_usage_errors_exit_0_too(self):
        self.assertEqual(self.ws.run_cli("save", "--goal", "hook", "--bogus").returncode, 2)  # not a hook: usage is 2
        for args in (("hook", "stop", "--client", "nobody"), ("hook", "nothing"), ("hook", "stop", "--client", "cursor"),
                     ("--root", "hook", "hook", "stop", "--client")):
            with self.subTest(args):
                proc = self.ws.run_cli(*args, stdin=b"{}")
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(proc.stdout, b"")
                self.assertIn(b"claude_checkpoint.py hook: error:", proc.stderr)

    def test_the_agent_is_never_guessed_from_the_environment(self):
        env = dict(self.ws.env, GEMINI_CLI="1", GEMINI_PROJECT_DIR=self.ws.repo, CLAUDE_PROJECT_DIR=self.ws.repo)
        proc = self.ws.run_cli("hook", "session-start", stdin=hook_payload("session-start", "/x.jsonl", self.ws.repo),
                               env=env)
        self.assertTrue(proc.stdout.startswith(b"# Resuming:"), proc.stdout)  # no --client: Claude Code's text

    def test_another_agents_project_variable_does_not_move_the_hook_away_from_its_cwd(self):
        other = temp_dir(self, "cc-other-")
        subprocess.run(["git", "init", "-q", other], check=True)
        self.assertEqual(self.ws.run_cli("--root", other, "save", "--goal", "The other project's goal").returncode, 0)
        env = dict(self.ws.env, CLAUDE_PROJECT_DIR=other)  # inherited from a Claude Code session elsewhere
        for client in ("codex", "copilot", "gemini", "claude"):
            with self.subTest(client):
                extra = {"GEMINI_PROJECT_DIR": self.ws.repo} if client == "gemini" else {}
                proc = self.ws.run_cli("hook", "session-start", "--client", client, env=dict(env, **extra),
                                       stdin=agent_payload(client, "session-start", self.ws.repo), cwd=self.elsewhere)
                expected = "The other project's goal" if client == "claude" else sample_save()["goal"]
                self.assertIn(expected, proc.stdout.decode())


class AgentNameTest(unittest.TestCase):
    """The checkpoint names the agent that wrote it last; another agent's brief says so."""

    def test_a_save_from_codex_is_named_and_claude_codes_brief_says_so(self):
        ws = Workspace(self)
        server = McpServer(self, ws.repo, ws.env)
        server.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                      "clientInfo": {"name": "codex-mcp-client", "version": "0.169.0"}})
        server.notify("notifications/initialized")
        self.assertFalse(server.save(goal="Ship the login page").get("isError"))
        self.assertEqual(ws.checkpoint()["agent"], {"name": "codex"})
        self.assertEqual(ws.checkpoint()["version"], 1)
        first = {}
        for client in ("claude", "codex"):
            proc = ws.run_cli("hook", "session-start", "--client", client,
                              stdin=agent_payload(client, "session-start", ws.repo))
            out = proc.stdout.decode()
            brief = out if client == "claude" else json.loads(out)["hookSpecificOutput"]["additionalContext"]
            first[client] = brief.splitlines()[0]
        self.assertIn("saved by Codex ", first["claude"])
        self.assertNotIn("saved by", first["codex"])  # its own checkpoint: nothing to say

    def test_a_command_line_save_names_no_agent_and_reads_old_files(self):
        ws = Workspace(self)
        self.assertEqual(ws.run_cli("save", "--goal", "g").returncode, 0)
        self.assertNotIn("agent", ws.checkpoint())
        cp = cc.Checkpoint.from_json(dict(SEED_V1_CHECKPOINT, agent={"name": "gemini"}))
        self.assertEqual(cp.agent, "gemini")
        self.assertEqual(cp.to_json()["agent"], {"name": "gemini"})
        for odd in ({"name": 3}, "codex", [], {"name": "  "}, None):  # a note of another shape: dropped, the file read
            self.assertIsNone(cc.Checkpoint.from_json(dict(SEED_V1_CHECKPOINT, agent=odd)).agent, odd)

    def test_an_unknown_agents_name_is_shown_on_one_short_printable_line(self):
        ws = Workspace(self)
        self.assertEqual(ws.run_cli("save", "--goal", "g").returncode, 0)
        for name, shown in (("opencode", "saved by opencode just now"), ("x\x1b[31mred\nline", "saved by x[31mredline "),
                            ("a" * 500, "saved by " + "a" * 40 + "… "), ("\x07", "(checkpoint saved just now")):
            with self.subTest(name=name[:20]):
                doc = ws.checkpoint()
                doc["agent"] = {"name": name}
                ws.write(".claude-checkpoint", json.dumps(doc))
                first = ws.run_cli("show").stdout.decode().splitlines()[0]
                self.assertIn(shown, first)
                self.assertNotIn("\x1b", first)


class AgentRecordingHookTest(unittest.TestCase):
    """SPEC section 12: every agent's recording hooks read its own transcript, record what its
    tools did, once, and snapshot each turn that changed files (section 10's rule)."""

    def turn(self, client: str) -> tuple:
        ws = Workspace(self)
        ws.write("added.txt", "hello\n")  # committed: only the transcript can name it
        ws.git("add", "added.txt")
        ws.git("commit", "-qm", "added")
        ws.write("notes.txt", "hi\n")
        transcript = AGENT_TRANSCRIPTS[client](ws.repo)
        transcript.turn("Write the notes file")
        return ws, transcript, transcript.save(os.path.join(ws.home, f"{client}.jsonl"))

    def hook(self, ws: Workspace, client: str, event: str, transcript: str, **fields) -> subprocess.CompletedProcess:
        """The hook run on the agent's input (plus `fields`): exit 0, and not a word."""
        payload = dict(json.loads(agent_payload(client, event, ws.repo, transcript)), **fields)
        proc = ws.run_cli("hook", event, "--client", client, stdin=json.dumps(payload))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual((proc.stdout, stderr_lines(proc)), (b"", []))
        return proc

    def test_each_agents_stop_hook_records_commands_and_edits_and_snapshots_the_turn_once(self):
        for client in AGENT_TRANSCRIPTS:
            with self.subTest(client):
                ws, transcript, path = self.turn(client)
                self.hook(ws, client, "stop", path)
                checkpoint = ws.checkpoint()
                self.assertEqual([(c["command"], c.get("exitCode")) for c in checkpoint["recentCommands"]],
                                 [("echo hi > notes.txt", 0), ("exit 3", 3)])
                self.assertEqual(files_by_path(checkpoint)["added.txt"]["source"], "agent")
                self.assertNotIn("missing.txt", files_by_path(checkpoint))
                self.assertEqual(checkpoint["goal"]["primary"], "Write the notes file")
                self.assertEqual(len(listing(self, ws)), 1)
                raw = read(os.path.join(ws.repo, ".claude-checkpoint"))
                for event in ("stop", "pre-compact", "pre-compact", "session-end"):  # nothing new since
                    self.hook(ws, client, event, path)
                self.assertEqual(read(os.path.join(ws.repo, ".claude-checkpoint")), raw)
                self.assertEqual(len(listing(self, ws)), 1)

    def test_a_stop_hook_waits_for_the_turn_an_agent_is_still_writing(self):
        """Qwen Code fires Stop while its transcript's lines are still being appended: the hook
        waits until the turn's last message is in the file, then records the whole turn."""
        ws, transcript, path = self.turn("qwen")
        message = 'Wrote the notes — "done".\nAll «setup» steps ran.'
        transcript.reply(message)
        full = transcript.lines
        transcript.lines = full[:2]  # the prompt is written; the tool calls and the reply are queued
        transcript.save(path)

        def agent_writes_the_rest():
            for line in full[2:]:
                time.sleep(0.05)
                with open(path, "a", encoding="utf-8") as stream:
                    stream.write(line + "\n")

        writer = threading.Thread(target=agent_writes_the_rest)
        writer.start()
        try:
            self.hook(ws, "qwen", "stop", path, last_assistant_message=message)
        finally:
            writer.join()
        self.assertEqual(commands_of(ws.checkpoint()), ["echo hi > notes.txt", "exit 3"])
        self.assertIn("added.txt", files_by_path(ws.checkpoint()))

    def test_a_stop_hook_whose_turn_never_shows_records_what_is_there_and_says_so(self):
        ws, transcript, path = self.turn("qwen")
        payload = dict(json.loads(agent_payload("qwen", "stop", ws.repo, path)),
                       last_assistant_message="A reply this transcript never gets.")
        proc = ws.run_cli("hook", "stop", "--client", "qwen", stdin=json.dumps(payload))
        self.assertEqual((proc.returncode, proc.stdout), (0, b""))
        self.assertIn("did not show the turn's last message", stderr_lines(proc)[0])
        self.assertEqual(commands_of(ws.checkpoint()), ["echo hi > notes.txt", "exit 3"])
        for nothing_to_wait_for in ("", "[no response text]", "ok"):  # and no word on stderr
            self.hook(ws, "qwen", "stop", path, last_assistant_message=nothing_to_wait_for)

    def test_gemini_clis_pre_compact_before_every_request_saves_no_prompt_alone(self):
        """PreCompress fires before the first model request of every session: a question asked
        in passing leaves no checkpoint; the first tool call does, with the prompt as its goal."""
        ws = Workspace(self)
        transcript = GeminiChatLines(ws.repo)
        transcript.prompt("What does app.py do?")
        path = transcript.save(os.path.join(ws.home, "gemini.jsonl"))
        self.hook(ws, "gemini", "pre-compact", path)
        self.assertFalse(os.path.exists(os.path.join(ws.repo, ".claude-checkpoint")))
        transcript.shell("python3 app.py", 0)
        self.hook(ws, "gemini", "pre-compact", transcript.save(path))
        self.assertEqual(ws.checkpoint()["goal"]["primary"], "What does app.py do?")
        self.assertEqual(commands_of(ws.checkpoint()), ["python3 app.py"])

    def test_what_each_agents_transcript_gives_is_redacted(self):
        token = fake_secret("ghp_", 36)
        for client in AGENT_TRANSCRIPTS:
            with self.subTest(client):
                ws, transcript, path = self.turn(client)
                transcript.shell(f"curl -H 'Authorization: token {token}' https://api.github.com/user", 0)
                self.hook(ws, client, "stop", transcript.save(path))
                self.assertNotIn(token, read(os.path.join(ws.repo, ".claude-checkpoint")).decode())
                self.assertIn("curl -H", commands_of(ws.checkpoint())[-1])

    def test_the_next_turn_that_changes_files_gets_its_own_snapshot(self):
        for client in ("codex", "gemini"):
            with self.subTest(client):
                ws, transcript, path = self.turn(client)
                self.hook(ws, client, "stop", path)
                ws.write("notes.txt", "second turn\n")
                transcript.shell("echo second turn > notes.txt", 0)
                transcript.save(path)
                self.hook(ws, client, "stop", path)
                self.assertEqual(commands_of(ws.checkpoint()),
                                 ["echo hi > notes.txt", "exit 3", "echo second turn > notes.txt"])
                newest = listing(self, ws)
                self.assertEqual(len(newest), 2)
                self.assertEqual(blob(ws, newest[0]["commit"], "notes.txt"), b"second turn\n")

    def test_copilot_clis_session_end_finds_its_transcript_by_the_session_id(self):
        ws, _, path = self.turn("copilot")
        session = COPILOT_AGENT_STOP["sessionId"]
        events = os.path.join(ws.home, "copilot-home", "session-state", session, "events.jsonl")
        os.makedirs(os.path.dirname(events))
        shutil.copy(path, events)
        end = {"sessionId": session, "timestamp": 1764600090000, "cwd": ws.repo, "reason": "complete"}
        proc = ws.run_cli("hook", "session-end", "--client", "copilot", stdin=json.dumps(end),
                          env=dict(ws.env, COPILOT_HOME=os.path.join(ws.home, "copilot-home")))
        self.assertEqual((proc.returncode, proc.stdout, stderr_lines(proc)), (0, b"", []))
        self.assertEqual(commands_of(ws.checkpoint()), ["echo hi > notes.txt", "exit 3"])
        for odd in ("../../x", session + "/../x"):  # a session id is a name, never a path
            proc = ws.run_cli("hook", "session-end", "--client", "copilot", stdin=json.dumps(dict(end, sessionId=odd)))
            self.assertIn(b"no transcriptPath", proc.stderr)

    def test_copilot_cli_takes_over_from_claude_code_and_hands_back_on_its_recorded_samples(self):
        """The handoff of SPEC section 12 for Copilot CLI (it needs Node 24): its hook inputs and
        events.jsonl as its docs give them, through the commands its hooks file runs."""
        ws = Workspace(self)
        ws.write("app.py", "claude\n")
        claude = Transcript(ws.repo)
        claude.prompt("Ship the login page")
        claude.edit("Write", os.path.join(ws.repo, "app.py"))
        self.hook(ws, "claude", "stop", claude.save(os.path.join(ws.home, "claude.jsonl")))
        before = listing(self, ws)[0]["id"]
        start = ws.run_cli("hook", "session-start", "--client", "copilot",
                           stdin=agent_payload("copilot", "session-start", ws.repo))
        brief = json.loads(start.stdout)["additionalContext"]
        self.assertIn("saved by Claude Code", brief)
        self.assertIn("Ship the login page", brief)
        ws.write("app.py", "claude\ncopilot\n")
        copilot = CopilotEventsLines(ws.repo)
        copilot.prompt("Go on")
        copilot.shell("echo copilot >> app.py", 0)
        self.hook(ws, "copilot", "stop", copilot.save(os.path.join(ws.home, "events.jsonl")))
        checkpoint = ws.checkpoint()
        self.assertEqual(checkpoint["agent"]["name"], "copilot")
        self.assertEqual(commands_of(checkpoint), ["echo copilot >> app.py"])
        newest = listing(self, ws)
        self.assertEqual(blob(ws, newest[0]["commit"], "app.py"), b"claude\ncopilot\n")
        back = ws.run_cli("hook", "session-start", "--client", "claude",
                          stdin=agent_payload("claude", "session-start", ws.repo)).stdout.decode()
        self.assertIn("saved by Copilot CLI", back)
        self.assertIn("echo copilot >> app.py", back)
        self.assertIn("app.py", back)
        self.assertEqual(ws.run_cli("restore", before, "--yes").returncode, 0)
        self.assertEqual(read(os.path.join(ws.repo, "app.py")), b"claude\n")

    def test_a_transcript_in_another_agents_format_records_nothing_and_costs_one_line(self):
        ws, transcript, path = self.turn("codex")
        proc = ws.run_cli("hook", "stop", "--client", "gemini", stdin=agent_payload("gemini", "stop", ws.repo, path))
        self.assertEqual((proc.returncode, proc.stdout), (0, b""))
        self.assertFalse(os.path.exists(os.path.join(ws.repo, ".claude-checkpoint")))
        [line] = stderr_lines(proc)
        self.assertIn("is not a Gemini CLI chat", line)


# ════════════════════════════════════════════════════════════════════════════
# 12. MCP tools, prompts and resources
# ════════════════════════════════════════════════════════════════════════════
# The tools (12.1) are checked through tools/list and tools/call in TestE2eProtocol (13.1),
# their arguments in 4.1 and their work in 11.

# ── 12.2 Prompts and resources ──

STATELESS_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}


class PromptsAndResourcesTest(unittest.TestCase):
    """MCP prompts `resume` and `checkpoint`, resources checkpoint://brief and checkpoint://current."""

    def setUp(self):
        self.ws = Workspace(self)
        self.assertEqual(self.ws.run_cli("save", stdin=json.dumps(sample_save())).returncode, 0)

    def handshake_era(self):
        server = start_server(self, self.ws)
        return server, server.request

    def stateless_era(self):
        server = start_server(self, self.ws, initialize=False)

        def request(method: str, params: dict | None = None) -> dict:
            return server.request(method, {**(params or {}), "_meta": dict(STATELESS_META)})
        return server, request

    def eras(self) -> list:
        """(era, request function) for a fresh server in each protocol era."""
        return [("handshake", self.handshake_era()[1]), ("2026-07-28", self.stateless_era()[1])]

    def test_both_eras_declare_prompts_and_resources(self):
        server = start_server(self, self.ws, initialize=False)
        capabilities = server.initialize()["result"]["capabilities"]
        self.assertIn("prompts", capabilities)
        self.assertIn("resources", capabilities)
        _, request = self.stateless_era()
        capabilities = request("server/discover")["result"]["capabilities"]
        self.assertIn("prompts", capabilities)
        self.assertIn("resources", capabilities)

    def test_prompts_list_has_resume_and_checkpoint(self):
        for era, request in self.eras():
            with self.subTest(era=era):
                names = [p["name"] for p in request("prompts/list")["result"]["prompts"]]
                self.assertEqual(sorted(names), ["checkpoint", "resume"])

    def test_resume_prompt_is_the_brief_as_a_user_message(self):
        for era, request in self.eras():
            with self.subTest(era=era):
                messages = request("prompts/get", {"name": "resume"})["result"]["messages"]
                self.assertEqual(len(messages), 1)
                self.assertEqual(messages[0]["role"], "user")
                self.assertEqual(messages[0]["content"]["type"], "text")
                self.assertTrue(messages[0]["content"]["text"].startswith("# Resuming: project"))
                self.assertIn(sample_save()["goal"], messages[0]["content"]["text"])

    def test_checkpoint_prompt_asks_for_a_merge_save(self):
        for era, request in self.eras():
            with self.subTest(era=era):
                text = request("prompts/get", {"name": "checkpoint"})["result"]["messages"][0]["content"]["text"]
                self.assertIn("save_session_checkpoint", text)
                self.assertIn("merge", text)

    def test_resources_list_and_read(self):
        for era, request in self.eras():
            with self.subTest(era=era):
                listed = {r["uri"]: r["mimeType"] for r in request("resources/list")["result"]["resources"]}
                self.assertEqual(listed, {"checkpoint://brief": "text/markdown", "checkpoint://current": "application/json",
                                  "checkpoint://snapshots": "application/json"})
                brief = request("resources/read", {"uri": "checkpoint://brief"})["result"]["contents"]
                self.assertEqual(brief[0]["uri"], "checkpoint://brief")
                self.assertEqual(brief[0]["mimeType"], "text/markdown")
                self.assertTrue(brief[0]["text"].startswith("# Resuming: project"))
                current = request("resources/read", {"uri": "checkpoint://current"})["result"]["contents"]
                self.assertEqual(current[0]["mimeType"], "application/json")
                self.assertEqual(json.loads(current[0]["text"]), self.ws.checkpoint())

    def test_unknown_prompt_or_resource_is_an_error(self):
        for era, request in self.eras():
            with self.subTest(era=era):
                for method, params in (("prompts/get", {"name": "nope"}), ("resources/read", {"uri": "checkpoint://nope"}),
                                       ("resources/read", {"uri": "file:///etc/passwd"})):
                    reply = request(method, params)
                    self.assertIn("error", reply, reply)
                    self.assertNotIn("result", reply)

    def test_stateless_era_results_carry_result_type_cache_hints_and_server_info(self):
        _, request = self.stateless_era()
        calls = (("prompts/list", None, True), ("resources/list", None, True),
                 ("resources/read", {"uri": "checkpoint://brief"}, True),
                 ("resources/read", {"uri": "checkpoint://current"}, True),
                 ("prompts/get", {"name": "resume"}, False), ("prompts/get", {"name": "checkpoint"}, False))
        for method, params, cacheable in calls:
            with self.subTest(method=method, params=params):
                result = request(method, params)["result"]
                self.assertEqual(result["resultType"], "complete")
                info = result["_meta"]["io.modelcontextprotocol/serverInfo"]
                self.assertEqual(info["version"], cc.__version__)
                if cacheable:
                    self.assertIsInstance(result["ttlMs"], int)
                    self.assertIn(result["cacheScope"], ("private", "public", "shared"))


# ── 12.3 Every agent's MCP client (SPEC section 12) ──

def schema_nodes(schema: dict, path: str = "") -> list:
    """(path, node) for every schema node under properties and items."""
    found = [(path or "(root)", schema)]
    for key, sub in schema.get("properties", {}).items():
        found += schema_nodes(sub, f"{path}.{key}" if path else key)
    if isinstance(schema.get("items"), dict):
        found += schema_nodes(schema["items"], f"{path}[]")
    return found


class AgentClientsTest(unittest.TestCase):
    """Schemas every agent's API takes; arguments a client adds; the root when no roots are declared."""

    def setUp(self):
        self.ws = Workspace(self)

    def test_every_schema_node_has_one_type_and_no_keyword_gemini_refuses(self):
        server = start_server(self, self.ws)
        for tool in server.request("tools/list")["result"]["tools"]:
            for which in ("inputSchema", "outputSchema"):
                for path, node in schema_nodes(tool.get(which, {"type": "object"})):
                    with self.subTest(tool=tool["name"], schema=which, path=path):
                        self.assertIsInstance(node.get("type"), str)
                        for refused in ("$ref", "anyOf", "oneOf", "allOf", "propertyNames"):
                            self.assertNotIn(refused, node)

    def test_wait_for_previous_is_accepted_silently_and_other_unknown_arguments_are_named(self):
        server = start_server(self, self.ws)
        saved = server.save(goal="Ship it", wait_for_previous=True)
        self.assertFalse(saved.get("isError"), saved)
        self.assertNotIn("wait_for_previous", json.dumps(saved))
        self.assertEqual(self.ws.checkpoint()["goal"]["primary"], "Ship it")
        typo = server.save(goal="Ship it", nextStep=["deploy"], wait_for_previous=False)
        self.assertFalse(typo.get("isError"), typo)
        named = [w for w in typo["structuredContent"]["warnings"] if "nextStep" in w]
        self.assertEqual(len(named), 1, typo)
        self.assertIn("nextSteps", named[0])  # what it meant
        self.assertNotIn("wait_for_previous", named[0])
        brief = server.load(wait_for_previous=True, colour="blue")
        self.assertIn("⚠ Ignored unknown argument colour", brief)
        self.assertNotIn("wait_for_previous", brief)

    def test_a_client_without_roots_gets_the_servers_working_folder_as_codex_starts_it(self):
        env = {k: v for k, v in self.ws.env.items() if k in ("HOME", "LANG", "PATH", "SHELL", "TERM")}
        env.update({k: v for k, v in self.ws.env.items() if k.startswith("GIT_")})
        server = McpServer(self, self.ws.repo, env)
        server.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                      "clientInfo": {"name": "codex-mcp-client", "version": "0.169.0"}})
        server.notify("notifications/initialized")
        self.assertEqual(server.save(goal="From Codex")["structuredContent"]["projectRoot"], os.path.realpath(self.ws.repo))
        self.assertEqual(self.ws.checkpoint()["agent"], {"name": "codex"})


# ════════════════════════════════════════════════════════════════════════════
# 13. Protocol: both MCP eras, roots, cancellation, fuzzing (SPEC section 2)
# ════════════════════════════════════════════════════════════════════════════

def file_uri(path: str) -> str:
    return "file://" + path


# ── 13.1 The handshake era: messages, errors, batches, the tool list and its size ──

HANDSHAKE_ERA = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


class TestE2eProtocol(unittest.TestCase):
    def setUp(self):
        self.ws = Workspace(self)

    def assert_still_serving(self, server: McpServer) -> None:
        self.assertEqual(server.request("ping", timeout=TIMEOUT).get("result"), {})

    def test_initialize_echoes_supported_versions_and_answers_newest_for_unknown(self):
        server = start_server(self, self.ws, initialize=False)
        for asked, expected in [(v, v) for v in HANDSHAKE_ERA] + [("1999-01-01", "2025-11-25")]:
            with self.subTest(asked=asked):
                reply = server.request("initialize", {"protocolVersion": asked, "capabilities": {},
                                                      "clientInfo": {"name": "t", "version": "1"}})
                result = reply["result"]
                self.assertEqual(result["protocolVersion"], expected)
                self.assertIn("tools", result["capabilities"])
                self.assertLessEqual({"name", "title", "version"}, set(result["serverInfo"]))
                self.assertIsInstance(result["instructions"], str)
                self.assertLess(len(result["instructions"].encode()), 2048)

    def test_initialize_without_protocol_version_is_invalid_params(self):
        server = start_server(self, self.ws, initialize=False)
        reply = server.request("initialize", {"capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})
        self.assertEqual(reply["error"]["code"], -32602, reply)
        self.assert_still_serving(server)

    def test_notifications_get_no_reply(self):
        server = start_server(self, self.ws)
        for method in ("notifications/initialized", "notifications/cancelled", "notifications/progress",
                       "notifications/unknown-thing", "ping"):
            server.notify(method, {"requestId": 12345} if method == "notifications/cancelled" else None)
        server.send({"jsonrpc": "2.0", "id": 777, "method": "ping"})
        first = server.receive()  # the first line after them must be the ping's answer
        self.assertEqual(first, {"jsonrpc": "2.0", "id": 777, "result": {}}, "a notification got a reply")

    def test_ping_answers_empty_object(self):
        server = start_server(self, self.ws)
        self.assertEqual(server.request("ping")["result"], {})

    def test_request_id_zero_is_valid(self):
        server = start_server(self, self.ws)
        reply = server.request("ping", request_id=0)
        self.assertEqual(reply, {"jsonrpc": "2.0", "id": 0, "result": {}})

    def test_unknown_method_is_method_not_found(self):
        server = start_server(self, self.ws)
        reply = server.request("no/such/method", {})
        self.assertEqual(reply["error"]["code"], -32601, reply)
        self.assert_still_serving(server)

    def test_malformed_json_is_parse_error_with_null_id(self):
        server = start_server(self, self.ws)
        for raw in (b'{"jsonrpc": "2.0", "id": 1, "method": "ping"\n', b"{not json}\n", b'"unterminated\n'):
            with self.subTest(raw=raw):
                server.send_raw(raw)
                reply = server.receive()
                self.assertEqual(reply["error"]["code"], -32700, reply)
                self.assertIn("id", reply)
                self.assertIsNone(reply["id"])
                self.assert_still_serving(server)

    def test_invalid_requests_are_rejected_and_serving_continues(self):
        server = start_server(self, self.ws)
        cases = {
            "wrong jsonrpc": {"jsonrpc": "1.0", "id": 1, "method": "ping"},
            "no jsonrpc": {"id": 2, "method": "ping"},
            "method not a string": {"jsonrpc": "2.0", "id": 3, "method": 5},
            "id a float": {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
            "id a bool": {"jsonrpc": "2.0", "id": True, "method": "ping"},
            "id an object": {"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"},
            "id null (MCP: a request's id is never null)": {"jsonrpc": "2.0", "id": None, "method": "ping"},
            "a number": 5,
            "a string": "ping",
            "null": None,  # the JSON value null is a request, not a blank line
            "true": True,
            "false": False,
        }
        for name, message in cases.items():
            with self.subTest(name):
                server.send(message)
                reply = server.receive()
                self.assertIsInstance(reply, dict, reply)
                self.assertEqual(reply["error"]["code"], -32600, reply)
                self.assert_still_serving(server)

    def test_batch_gets_one_array_reply(self):
        server = start_server(self, self.ws)
        server.send([{"jsonrpc": "2.0", "id": 1, "method": "ping"},
                     {"jsonrpc": "2.0", "method": "notifications/progress"},
                     {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                     {"jsonrpc": "2.0", "id": 3, "method": "no/such"}])
        reply = server.receive()
        self.assertIsInstance(reply, list, reply)
        by_id = {item["id"]: item for item in reply}
        self.assertEqual(set(by_id), {1, 2, 3})
        self.assertEqual(by_id[1]["result"], {})
        self.assertEqual(len(by_id[2]["result"]["tools"]), 2)
        self.assertEqual(by_id[3]["error"]["code"], -32601)

    def test_notification_only_batch_gets_no_reply(self):
        server = start_server(self, self.ws)
        server.send([{"jsonrpc": "2.0", "method": "notifications/progress"},
                     {"jsonrpc": "2.0", "method": "notifications/initialized"}])
        server.send({"jsonrpc": "2.0", "id": 55, "method": "ping"})
        self.assertEqual(server.receive(), {"jsonrpc": "2.0", "id": 55, "result": {}})

    def test_empty_batch_is_invalid_request(self):
        server = start_server(self, self.ws)
        server.send_raw(b"[]\n")
        reply = server.receive()
        self.assertIsInstance(reply, dict, reply)
        self.assertEqual(reply["error"]["code"], -32600, reply)
        self.assert_still_serving(server)

    def test_params_of_the_wrong_type_are_invalid_params_not_internal_errors(self):
        server = start_server(self, self.ws)
        cases = {
            "tool name a list": ("tools/call", {"name": [{"x": True}, "y"], "arguments": {}}),
            "tool name a number": ("tools/call", {"name": 5}),
            "tool name missing": ("tools/call", {"arguments": {"goal": "g"}}),
            "prompt name an object": ("prompts/get", {"name": {"resume": 1}}),
            "prompt arguments a string": ("prompts/get", {"name": "resume", "arguments": "x"}),
            "resource uri a number": ("resources/read", {"uri": 5}),
            "resource uri a list": ("resources/read", {"uri": ["checkpoint://brief"]}),
            "protocolVersion a number": ("initialize", {"protocolVersion": 20251125, "capabilities": {}}),
            "capabilities a string": ("initialize", {"protocolVersion": "2025-11-25", "capabilities": "all"}),
        }
        for name, (method, params) in cases.items():
            with self.subTest(name):
                reply = server.request(method, params)
                self.assertEqual(reply["error"]["code"], -32602, reply)
        server.notify("notifications/cancelled", {"requestId": {"an": "object"}, "reason": ["x"]})
        self.assert_still_serving(server)

    def test_unknown_tool_is_invalid_params(self):
        server = start_server(self, self.ws)
        reply = server.request("tools/call", {"name": "delete_everything", "arguments": {}})
        self.assertEqual(reply["error"]["code"], -32602, reply)
        self.assert_still_serving(server)

    def test_tools_list_describes_both_tools(self):
        server = start_server(self, self.ws)
        tools = {t["name"]: t for t in server.request("tools/list")["result"]["tools"]}
        self.assertEqual(set(tools), {"save_session_checkpoint", "load_session_checkpoint"})
        for tool in tools.values():
            with self.subTest(tool=tool["name"]):
                self.assertTrue(tool.get("title"))
                self.assertTrue(tool.get("description"))
                self.assertLess(len(tool["description"].encode()), 2048)
                self.assertEqual(tool["inputSchema"]["type"], "object")
                self.assertIs(tool["inputSchema"]["additionalProperties"], False)
                self.assertIs(tool["annotations"]["openWorldHint"], False)
        save, load = tools["save_session_checkpoint"], tools["load_session_checkpoint"]
        props = save["inputSchema"]["properties"]
        self.assertEqual(save["inputSchema"]["required"], ["goal"])
        for path, key, value in [(("goal",), "maxLength", 500), (("summary",), "maxLength", 4000),
                                 (("tasks",), "maxItems", 30), (("tasks", "items", "properties", "description"),
                                                                "maxLength", 300),
                                 (("nextSteps",), "maxItems", 20), (("nextSteps", "items"), "maxLength", 500),
                                 (("decisions",), "maxItems", 20), (("decisions", "items"), "maxLength", 500),
                                 (("modifiedFiles",), "maxItems", 100),
                                 (("modifiedFiles", "items", "properties", "note"), "maxLength", 300),
                                 (("recentCommands",), "maxItems", 50),
                                 (("recentCommands", "items", "properties", "command"), "maxLength", 2000),
                                 (("recentCommands", "items", "properties", "note"), "maxLength", 500)]:
            with self.subTest(schema=".".join(path)):
                node = props[path[0]]
                for step in path[1:]:
                    node = node[step]
                self.assertEqual(node[key], value)
        self.assertEqual(set(props["tasks"]["items"]["properties"]["status"]["enum"]),
                         {"pending", "in_progress", "done", "blocked"})
        self.assertEqual(set(props["mode"]["enum"]), {"replace", "merge"})
        self.assertEqual(props["recentCommands"]["items"]["properties"]["exitCode"]["type"], "integer")
        for item in ("tasks", "modifiedFiles", "recentCommands"):
            self.assertIs(props[item]["items"]["additionalProperties"], False, item)
        self.assertEqual(set(load["inputSchema"]["properties"]["format"]["enum"]), {"brief", "full"})
        self.assertIs(load["annotations"]["readOnlyHint"], True)
        self.assertIs(save["annotations"]["destructiveHint"], False)
        self.assertIs(save["annotations"]["idempotentHint"], False)
        self.assertIn("outputSchema", save)
        self.assertNotIn("outputSchema", load)

    def test_tools_list_and_instructions_cost_at_most_4096_bytes(self):
        # Paid in tokens by every session before it does anything (SPEC section 2).
        server = start_server(self, self.ws, initialize=False)
        instructions = server.initialize()["result"]["instructions"]
        tools = server.request("tools/list")["result"]
        cost = len(json.dumps(tools, separators=(",", ":"), ensure_ascii=False).encode()) + \
            len(json.dumps(instructions, ensure_ascii=False).encode())
        self.assertLessEqual(cost, 4096)
        self.assertEqual(len(tools["tools"]), 2, "the tool list must not grow")

    def test_load_returns_text_only(self):
        server = start_server(self, self.ws)
        for arguments in ({}, {"format": "full"}):
            with self.subTest(arguments=arguments):
                result = server.call("load_session_checkpoint", arguments)
                self.assertNotIn("structuredContent", result)
                self.assertEqual([block["type"] for block in result["content"]], ["text"])
        save_ok(server, **sample_save())
        result = server.call("load_session_checkpoint", {})
        self.assertNotIn("structuredContent", result)
        self.assertEqual(len(result["content"]), 1)

    def test_save_returns_structured_content(self):
        server = start_server(self, self.ws)
        self.ws.write("src/app.py", "print('changed')\n")
        result = save_ok(server, **sample_save())
        sc = result["structuredContent"]
        self.assertEqual(sc["path"], os.path.join(self.ws.repo, CHECKPOINT))
        self.assertEqual(sc["bytes"], os.path.getsize(sc["path"]))
        self.assertEqual(sc["mode"], "replace")
        self.assertEqual(sc["counts"], {"tasks": 3, "modifiedFiles": 1, "recentCommands": 2, "redactions": 1})
        self.assertIsInstance(sc["warnings"], list)
        self.assertEqual(result["content"][0]["type"], "text")

    def test_huge_line_and_binary_garbage_do_not_crash_the_server(self):
        server = start_server(self, self.ws)
        huge = b'{"jsonrpc":"2.0","id":9,"method":"ping","params":{"x":"' + b"a" * (10 * 1024 * 1024) + b'"}}\n'
        for name, raw in [("10 MB line", huge), ("binary", bytes(range(256)) * 4 + b"\n"),
                          ("invalid utf-8 in json", b'{"jsonrpc":"2.0","id":10,"method":"\xff\xfe"}\n'),
                          ("deep nesting", b"[" * 100000 + b"]" * 100000 + b"\n"),
                          ("nul bytes", b"\x00\x00\x00\n")]:
            with self.subTest(name):
                server.send_raw(raw)
                self.assert_still_serving(server)
        self.assertIsNone(server.proc.poll())


# ── 13.2 The stateless era, 2026-07-28 ──

class TestE2eStatelessEra(unittest.TestCase):
    def setUp(self):
        self.ws = Workspace(self)
        self.elsewhere = temp_dir(self, "cc-cwd-")
        self.server = start_server(self, self.ws, initialize=False, cwd=self.elsewhere)

    def test_server_discover_answers_versions_capabilities_and_server_info(self):
        result = self.server.request("server/discover", with_meta())["result"]
        self.assertIn(STATELESS_VERSION, result["supportedVersions"])
        self.assertIn("tools", result["capabilities"])
        self.assertIsInstance(result["instructions"], str)
        info = result["_meta"]["io.modelcontextprotocol/serverInfo"]
        self.assertEqual(info["name"], "claude-checkpoint")
        self.assertEqual(result["resultType"], "complete")
        self.assertIsInstance(result["ttlMs"], int)
        self.assertIsInstance(result["cacheScope"], str)

    def test_unsupported_version_in_meta_is_refused_with_the_supported_list(self):
        for method in ("server/discover", "tools/list", "ping"):
            with self.subTest(method=method):
                reply = self.server.request(method, with_meta(version="2099-01-01"))
                self.assertEqual(reply["error"]["code"], -32022, reply)
                self.assertIn(STATELESS_VERSION, reply["error"]["data"]["supported"])

    def test_every_result_has_result_type_and_lists_carry_cache_hints(self):
        for method, params in [("ping", {}), ("tools/list", {}), ("server/discover", {}),
                               ("tools/call", {"name": "load_session_checkpoint",
                                               "arguments": {"projectRoot": self.ws.repo}})]:
            with self.subTest(method=method):
                result = self.server.request(method, with_meta(params))["result"]
                self.assertEqual(result["resultType"], "complete")
                if method in ("tools/list", "server/discover"):
                    self.assertIsInstance(result["ttlMs"], int)
                    self.assertIn("cacheScope", result)

    def test_tool_call_without_root_asks_for_roots_then_saves_into_the_answered_root(self):
        capabilities = {"roots": {"listChanged": True}}
        params = {"name": "save_session_checkpoint", "arguments": sample_save()}
        first = self.server.request("tools/call", with_meta(params, capabilities))["result"]
        self.assertEqual(first["resultType"], "input_required", first)
        self.assertEqual(first["inputRequests"]["roots"]["method"], "roots/list")
        self.assertIn("requestState", first)
        self.assertEqual(checkpoint_names(self.elsewhere) | checkpoint_names(self.ws.repo), set())
        retry = dict(params, inputResponses={"roots": {"roots": [{"uri": file_uri(self.ws.repo)}]}},
                     requestState=first["requestState"])
        result = self.server.request("tools/call", with_meta(retry, capabilities))["result"]
        self.assertEqual(result["resultType"], "complete")
        self.assertFalse(result.get("isError"), result)
        self.assertEqual(result["structuredContent"]["path"], os.path.join(self.ws.repo, CHECKPOINT))
        self.assertEqual(self.ws.checkpoint()["goal"]["primary"], sample_save()["goal"])
        self.assertNotIn(CHECKPOINT, os.listdir(self.elsewhere))


# ── 13.3 Roots in the handshake era: roots/list, waiting for it, cancellation (SPEC sections 2 and 5) ──

def answer_roots(server: McpServer, request: dict, *paths: str) -> None:
    server.send({"jsonrpc": "2.0", "id": request["id"],
                 "result": {"roots": [{"uri": file_uri(p), "name": os.path.basename(p)} for p in paths]}})


class TestE2eHandshakeRoots(unittest.TestCase):
    def setUp(self):
        self.ws = Workspace(self)
        self.elsewhere = temp_dir(self, "cc-cwd-")

    def start(self, env: dict | None = None) -> tuple:
        server = start_server(self, self.ws, cwd=self.elsewhere, env=env,
                              capabilities={"roots": {"listChanged": True}})
        return server, server.wait_for(is_roots_request)

    def test_answered_root_is_where_a_save_lands(self):
        server, ask = self.start()
        answer_roots(server, ask, self.ws.repo)
        result = save_ok(server, goal="roots decide")
        self.assertEqual(result["structuredContent"]["path"], os.path.join(self.ws.repo, CHECKPOINT))
        self.assertEqual(self.ws.checkpoint()["goal"]["primary"], "roots decide")
        self.assertNotIn(CHECKPOINT, os.listdir(self.elsewhere))

    @slow
    def test_tool_call_sent_before_the_roots_answer_waits_for_it(self):
        server, ask = self.start()
        server.send({"jsonrpc": "2.0", "id": 500, "method": "tools/call",
                     "params": {"name": "save_session_checkpoint", "arguments": {"goal": "waited"}}})
        time.sleep(0.5)
        answer_roots(server, ask, self.ws.repo)
        reply = server.wait_for(lambda m: isinstance(m, dict) and m.get("id") == 500)
        self.assertFalse(reply["result"].get("isError"), reply)
        self.assertEqual(reply["result"]["structuredContent"]["path"], os.path.join(self.ws.repo, CHECKPOINT),
                         "the held tool call did not use the roots answered while it waited")
        self.assertEqual(self.ws.checkpoint()["goal"]["primary"], "waited")
        self.assertNotIn(CHECKPOINT, os.listdir(self.elsewhere))

    def test_ping_is_answered_while_a_tool_call_waits_for_roots(self):
        server, ask = self.start()
        server.send({"jsonrpc": "2.0", "id": 500, "method": "tools/call",
                     "params": {"name": "save_session_checkpoint", "arguments": {"goal": "waited"}}})
        server.send({"jsonrpc": "2.0", "id": 501, "method": "ping"})
        first = server.receive()  # the roots are not answered yet: only the ping can be answered
        self.assertEqual(first.get("id"), 501, f"the ping was held behind the waiting tool call: {first}")
        answer_roots(server, ask, self.ws.repo)
        reply = server.wait_for(lambda m: isinstance(m, dict) and m.get("id") == 500)
        self.assertFalse(reply["result"].get("isError"), reply)
        self.assertEqual(self.ws.checkpoint()["goal"]["primary"], "waited")

    @slow
    def test_unanswered_roots_request_falls_back_to_the_next_source(self):
        env = dict(self.ws.env, CLAUDE_PROJECT_DIR=self.ws.repo)
        server, _ = self.start(env)
        started = time.monotonic()
        result = save_ok(server, goal="no roots answer")
        elapsed = time.monotonic() - started
        self.assertLess(elapsed, 10)
        self.assertEqual(result["structuredContent"]["path"], os.path.join(self.ws.repo, CHECKPOINT))

    def test_cancelled_notification_drops_a_queued_request(self):
        server, ask = self.start()
        server.send({"jsonrpc": "2.0", "id": 600, "method": "tools/call",
                     "params": {"name": "save_session_checkpoint", "arguments": {"goal": "cancelled"}}})
        server.notify("notifications/cancelled", {"requestId": 600, "reason": "user pressed Esc"})
        answer_roots(server, ask, self.ws.repo)
        seen = []
        server.send({"jsonrpc": "2.0", "id": 601, "method": "ping"})
        server.wait_for(lambda m: seen.append(m) or (isinstance(m, dict) and m.get("id") == 601))
        self.assertFalse([m for m in seen if isinstance(m, dict) and m.get("id") == 600], seen)
        self.assertNotIn(CHECKPOINT, os.listdir(self.ws.repo))
        self.assertNotIn(CHECKPOINT, os.listdir(self.elsewhere))

    @slow
    def test_cancelled_notification_drops_a_request_queued_behind_a_slow_one(self):
        server = start_server(self, self.ws)
        def save(request_id, goal):
            return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                    "params": {"name": "save_session_checkpoint", "arguments": {"goal": goal}}}
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 102}}
        in_batch = [save(104, "cancelled in a batch"), {"jsonrpc": "2.0", "id": 105, "method": "ping"}]
        cancel_in_batch = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 104}}
        with cc.ProjectLock(self.ws.repo):  # the first save waits for it: it is slow
            server.send_raw(b"".join(json.dumps(m).encode() + b"\n" for m in (
                save(101, "slow"), save(102, "cancelled"), cancel, in_batch, cancel_in_batch)))
            time.sleep(0.5)  # let the server's reader queue every line behind the slow save
        seen = []
        server.send({"jsonrpc": "2.0", "id": 103, "method": "ping"})
        server.wait_for(lambda m: seen.append(m) or (isinstance(m, dict) and m.get("id") == 103))
        ids = [m.get("id") for m in seen if isinstance(m, dict)] + [i.get("id") for m in seen
                                                                      if isinstance(m, list) for i in m]
        self.assertIn(101, ids)
        self.assertIn(105, ids, "the batch keeps its other members")
        self.assertNotIn(102, ids, "a cancelled request must not answer")
        self.assertNotIn(104, ids)
        self.assertEqual(self.ws.checkpoint()["goal"]["primary"], "slow", "a cancelled save must not run")

    def test_roots_list_changed_refreshes_the_root(self):
        other = Workspace(self)
        server, ask = self.start()
        answer_roots(server, ask, self.ws.repo)
        save_ok(server, goal="first root")
        server.notify("notifications/roots/list_changed")
        ask = server.wait_for(is_roots_request)
        answer_roots(server, ask, other.repo)
        save_ok(server, goal="second root")
        self.assertEqual(other.checkpoint()["goal"]["primary"], "second root")
        self.assertEqual(self.ws.checkpoint()["goal"]["primary"], "first root")


# ── 13.4 Under a fuzzer: no input, however large or strange, crashes it ──

FUZZ_SEED = 8  # fixed, so a failure reproduces; the count is bounded so the tests stay fast


DEEP_LIST, DEEP_DICT = object(), object()  # built fresh where they are used: too deep to copy


def nasty_values(root: str) -> list:
    """Wrong types for every position: what a buggy or hostile client sends."""
    return [None, True, False, 0, -1, 1.5, 2 ** 63, -(10 ** 30), 10 ** 400, float("inf"), float("-inf"),
            float("nan"), "", " ", "\ud800", "a\udfffb", "\x00", "x" * 20_000, "../../etc/passwd", "/", "relative",
            "file:///", "file://" + root, root, root + "/missing", "2026-07-28", "2025-11-25", "ping",
            "tools/call", "save_session_checkpoint", "load_session_checkpoint", "checkpoint://brief",
            "merge", "full", [], {}, [{"x": True}, "y"], {"": None}, ["\ud800"], [1, [2, [3]]],
            {"uri": 5}, {"roots": "x"}, {"code": "x", "message": ["y"]}, [None] * 50,
            DEEP_LIST, DEEP_DICT]


def fuzz_templates(root: str, roots: bool) -> list:
    """Valid messages of both eras, every method and notification the server knows, and responses."""
    save_args = sample_save(projectRoot=root)
    meta = with_meta()["_meta"]
    caps = {"roots": {"listChanged": True}} if roots else {}
    templates = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": caps, "clientInfo": {"name": "f", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3, "reason": "fuzz"}},
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}},
        {"jsonrpc": "2.0", "id": "p", "method": "ping"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "save_session_checkpoint",
                                                                      "arguments": save_args}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "load_session_checkpoint",
                                                                      "arguments": {"format": "full"}}},
        {"jsonrpc": "2.0", "id": 5, "method": "prompts/list"},
        {"jsonrpc": "2.0", "id": 6, "method": "prompts/get", "params": {"name": "resume", "arguments": {}}},
        {"jsonrpc": "2.0", "id": 7, "method": "resources/list"},
        {"jsonrpc": "2.0", "id": 8, "method": "resources/templates/list"},
        {"jsonrpc": "2.0", "id": 9, "method": "resources/read", "params": {"uri": "checkpoint://current"}},
        {"jsonrpc": "2.0", "id": 10, "method": "server/discover", "params": {"_meta": meta}},
        {"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": {
            "name": "save_session_checkpoint", "arguments": {"goal": "stateless", "mode": "merge"}, "_meta": meta,
            "inputResponses": {"roots": {"roots": [{"uri": "file://" + root, "name": "p"}]}},
            "requestState": "roots"}},
        {"jsonrpc": "2.0", "id": 12, "method": "resources/read", "params": {"uri": "checkpoint://brief", "_meta": meta}},
        {"jsonrpc": "2.0", "id": 13, "method": "no/such/method", "params": {}},
    ]
    if roots:
        templates += [
            {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
            {"jsonrpc": "2.0", "id": "claude-checkpoint-roots-1", "result": {"roots": [{"uri": "file://" + root}]}},
            {"jsonrpc": "2.0", "id": "claude-checkpoint-roots-2", "error": {"code": -1, "message": "no"}},
        ]
    return templates


def _positions(value, depth: int = 0, found: list | None = None) -> list:
    """Every (container, key) in a message down to its sixth level, nested arguments included."""
    found = [] if found is None else found
    items = list(value.items()) if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        found.append((value, key))
        if depth < 6:
            _positions(child, depth + 1, found)
    return found


def fuzz_messages(rng, root: str, count: int, roots: bool = True, deep: int = 2000) -> list:
    """`count` messages: valid ones with 1-3 mutations each (a value of the wrong type at any
    position, a key dropped or added), some wrapped in batches."""
    import copy
    templates, nasty = fuzz_templates(root, roots), nasty_values(root)
    if not roots:
        nasty = [v for v in nasty if not (isinstance(v, dict) and "roots" in v)]

    def pick():
        value = rng.choice(nasty)
        if value is DEEP_LIST or value is DEEP_DICT:
            return deep_nesting(deep, "list" if value is DEEP_LIST else "dict")
        return copy.deepcopy(value)

    messages = []
    for _ in range(count):
        message = copy.deepcopy(rng.choice(templates))
        for _ in range(rng.randint(0, 3)):
            positions = _positions(message)
            if not positions or rng.random() < 0.05:
                message = pick()
                break
            container, key = rng.choice(positions)
            action = rng.random()
            if action < 0.6:
                container[key] = pick()
            elif action < 0.8 and isinstance(container, dict):
                del container[key]
            elif isinstance(container, dict):
                container[rng.choice(("extra", "_meta", "id", "params", "arguments", "x" * 300))] = pick()
        if rng.random() < 0.08:
            message = [message] + [copy.deepcopy(rng.choice(templates)) for _ in range(rng.randint(0, 3))]
        messages.append(message)
    return messages


def short_repr(value) -> str:
    import reprlib
    limits = reprlib.Repr()
    limits.maxlevel, limits.maxstring, limits.maxother = 4, 80, 80
    return limits.repr(value)


def check_reply(test: unittest.TestCase, message, reply) -> None:
    """A reply is strict JSON-RPC (no NaN, no Infinity), never an internal error, and there
    is one exactly when the message is a request."""
    where = short_repr(message)
    if isinstance(message, dict) and "id" not in message and isinstance(message.get("method"), str):
        test.assertIsNone(reply, f"a notification got a reply: {where}")
    if reply is None:
        return
    test.assertIsInstance(reply, dict, where)
    json.dumps(reply, allow_nan=False)
    test.assertEqual(reply.get("jsonrpc"), "2.0", where)
    test.assertEqual(("result" in reply) + ("error" in reply), 1, where)
    if "error" in reply:
        test.assertNotEqual(reply["error"]["code"], -32603, f"{where} -> {short_repr(reply)}")
        test.assertIsInstance(reply["error"]["message"], str, where)


def strict_json(line: bytes):
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")
    return json.loads(line, parse_constant=refuse)


class TestProtocolFuzz(unittest.TestCase):
    @slow
    def test_thousands_of_generated_messages_in_process_never_escape_or_give_internal_errors(self):
        import random
        rng = random.Random(FUZZ_SEED)
        root = temp_dir(self)
        no_git = temp_dir(self, "cc-no-git-")  # git missing: fast, and every warning path runs
        logged: list = []
        world = cc.World(env={"PATH": no_git}, cwd=root, home=None, clock=lambda: NOW, log=logged.append)
        for connection in range(6):  # 3,000 messages, over six connections
            protocol = cc.Protocol(world)
            for index, message in enumerate(fuzz_messages(rng, root, 500, deep=5000)):
                items = message if isinstance(message, list) and message else [message]
                for item in items:
                    try:
                        reply = protocol.handle(item)
                    except Exception as error:  # noqa: BLE001 - the point of the test
                        self.fail(f"message {index} {short_repr(item)} raised {error!r}")
                    check_reply(self, item, reply)
                protocol.take_outbox(NOW)
                if protocol.roots_pending and rng.random() < 0.5:
                    protocol.give_up_on_roots()
        self.assertEqual([entry for entry in logged if "Traceback" in entry], [])

    @slow
    def test_generated_messages_over_stdio_keep_the_server_serving_with_json_rpc_only(self):
        import random
        rng = random.Random(FUZZ_SEED)
        ws = Workspace(self)
        server = start_server(self, ws, initialize=False)
        sent = 0
        raw_garbage = [b"\xff\xfe\xfd\n", b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"ping\"\n", b"NaN\n",
                       b'{"jsonrpc":"2.0","id":1e999,"method":"ping"}\n', b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}\n',
                       b'{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":Infinity}}\n',
                       b"[" * 5000 + b"\n", b'"\\ud800"\n', b"\x00\n", b"   \n"]
        for message in fuzz_messages(rng, ws.repo, 400, roots=False, deep=900):
            server.send_raw(json.dumps(message).encode() + b"\n")
            sent += 1
            if sent % 40 == 0:
                server.send_raw(rng.choice(raw_garbage))
        for garbage in raw_garbage:
            server.send_raw(garbage)
        self.assertEqual(server.request("ping", request_id="still-there")["result"], {})
        server.close()
        for line in server.raw_lines:
            reply = strict_json(line)
            for item in reply if isinstance(reply, list) else [reply]:
                check_reply(self, "(over stdio)", item)


# ════════════════════════════════════════════════════════════════════════════
# 14. Transport: stdio and signals (SPEC section 2)
# ════════════════════════════════════════════════════════════════════════════
# Claude Code stops servers with SIGINT, then SIGTERM. Every end-to-end test checks stdio on
# the way out (McpServer.close: exit 0 at EOF, JSON-RPC only on stdout, no traceback); huge
# lines and binary garbage are in TestE2eProtocol (13.1).

class TestE2eSignals(unittest.TestCase):
    @slow
    def test_sigint_and_sigterm_end_an_idle_server_quickly_and_quietly(self):
        ws = Workspace(self)
        for signum in (signal.SIGINT, signal.SIGTERM):
            with self.subTest(signal=signum.name):
                server = start_server(self, ws)
                save_ok(server, goal="idle after this")
                time.sleep(0.3)  # let it settle into waiting for input
                started = time.monotonic()
                server.proc.send_signal(signum)
                try:
                    status = server.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    server.proc.kill()
                    server.proc.wait()
                    self.fail(f"{signum.name}: the server was still running 5 s later")
                elapsed = time.monotonic() - started
                self.assertLess(elapsed, 2)
                self.assertIn(status, (0, -signum))
                time.sleep(0.2)  # let the stderr reader drain
                self.assertNotIn("Traceback", server.stderr)
                self.assertNotIn("Fatal Python error", server.stderr)
                self.assertEqual(ws.checkpoint()["goal"]["primary"], "idle after this")


# ════════════════════════════════════════════════════════════════════════════
# 15. Install and doctor: configuration for Claude Code, the plugin's commands, doctor
# ════════════════════════════════════════════════════════════════════════════

TRAP_MODULES = ("json", "enum", "re", "subprocess", "hashlib", "queue", "shlex", "argparse", "threading",
                "claude_checkpoint")


def plant_trap(folder: str) -> None:
    """Modules named like the standard library's (and ours) that leave a marker when imported:
    a project cloned from someone hostile. Nothing we run may import them."""
    for name in TRAP_MODULES:
        write(folder, f"{name}.py", f"open({os.path.join(folder, 'IMPORTED-' + name)!r}, 'w').close()\n")


def trap_markers(folder: str) -> list:
    return sorted(name for name in os.listdir(folder) if name.startswith("IMPORTED-"))


class InstallTest(unittest.TestCase):
    """`install` prints, or merges in without clobbering, the server and the hooks."""

    def setUp(self):
        self.ws = Workspace(self)

    def install(self, *args: str, env: dict | None = None, status: int = 0) -> subprocess.CompletedProcess:
        proc = self.ws.run_cli("install", *args, env=env)
        self.assertEqual(proc.returncode, status, proc.stdout.decode() + proc.stderr.decode())
        self.assertNotIn(b"Traceback", proc.stderr)
        return proc

    @staticmethod
    def read(path: str):
        with open(path, encoding="utf-8") as stream:
            return json.load(stream)

    @staticmethod
    def json_objects(text: str) -> list:
        decoder, found = json.JSONDecoder(), []
        for index, char in enumerate(text):
            if char == "{" and (index == 0 or text[index - 1] == "\n"):
                with contextlib.suppress(ValueError):
                    found.append(decoder.raw_decode(text, index)[0])
        return found

    def assert_runs_this_file(self, command: list) -> None:
        """The command imports this file from its folder (so its bytecode is cached), and run
        from a hostile project it imports nothing from there."""
        self.assertEqual(command[1:], [*cc.IMPORT_FLAGS, cc.IMPORT_CODE.format(module="claude_checkpoint"), HERE])
        hostile = temp_dir(self, "cc-hostile-")
        plant_trap(hostile)
        proc = subprocess.run([*command, "--version"], capture_output=True, timeout=TIMEOUT, env=self.ws.env,
                              cwd=hostile)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn(cc.__version__, proc.stdout.decode())
        self.assertEqual(trap_markers(hostile), [])

    def test_print_mode_shows_the_mcp_add_line_hooks_and_desktop_entry(self):
        out = self.install().stdout.decode()
        add_line = next(line for line in out.splitlines() if line.startswith("claude mcp add"))
        self.assertEqual(shlex.split(add_line)[:6], ["claude", "mcp", "add", "--scope", "user", "checkpoint"])
        self.assert_runs_this_file(shlex.split(add_line)[7:])
        objects = self.json_objects(out)
        hooks = next(o["hooks"] for o in objects if "hooks" in o)
        self.assertEqual(hooks["SessionStart"][0]["matcher"], "clear|compact|resume")
        for event, sub in (("SessionStart", "session-start"), ("PreCompact", "pre-compact")):
            command = hooks[event][0]["hooks"][0]["command"]
            self.assertEqual(shlex.split(command)[-4:], ["hook", sub, "--client", "claude"])
            self.assert_runs_this_file(shlex.split(command)[:-4])
        desktop = next(o["mcpServers"]["checkpoint"] for o in objects if "mcpServers" in o)
        self.assert_runs_this_file([desktop["command"], *desktop["args"]])
        self.assertFalse(os.path.exists(os.path.join(self.ws.home, ".claude.json")), "print mode writes nothing")
        last = out.strip().splitlines()[-1]  # the advice to write it all in works as printed
        proc = subprocess.run(["/bin/sh", "-c", last], env=self.ws.env, capture_output=True, timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("checkpoint", self.read(os.path.join(self.ws.home, ".claude.json"))["mcpServers"])

    def test_write_merges_into_the_user_files_and_is_idempotent(self):
        config_dir = os.path.join(self.ws.home, "cfg")
        for name, env, server_file, settings_file in (
                ("CLAUDE_CONFIG_DIR set", dict(self.ws.env, CLAUDE_CONFIG_DIR=config_dir),
                 os.path.join(config_dir, ".claude.json"), os.path.join(config_dir, "settings.json")),
                ("default", self.ws.env, os.path.join(self.ws.home, ".claude.json"),
                 os.path.join(self.ws.home, ".claude", "settings.json"))):
            with self.subTest(name):
                user = {"numStartups": 7, "projects": {"/x": {"allowedTools": []}},
                        "mcpServers": {"other": {"type": "stdio", "command": "other-server", "args": []}}}
                settings = {"model": "opus", "permissions": {"allow": ["Bash(ls)"]},
                            "hooks": {"PreCompact": [{"hooks": [{"type": "command", "command": "echo mine"}]}],
                                      "PostToolUse": [{"matcher": "Edit", "hooks": [{"type": "command",
                                                                                     "command": "fmt"}]}]}}
                write(os.path.dirname(server_file), os.path.basename(server_file), json.dumps(user))
                write(os.path.dirname(settings_file), os.path.basename(settings_file), json.dumps(settings))
                self.install("--write", env=env)
                new_user, new_settings = self.read(server_file), self.read(settings_file)
                for key, value in user.items():
                    if key != "mcpServers":
                        self.assertEqual(new_user[key], value)
                self.assertEqual(new_user["mcpServers"]["other"], user["mcpServers"]["other"])
                entry = new_user["mcpServers"]["checkpoint"]
                self.assert_runs_this_file([entry["command"], *entry["args"]])
                self.assertEqual(new_settings["model"], "opus")
                self.assertEqual(new_settings["permissions"], settings["permissions"])
                self.assertEqual(new_settings["hooks"]["PostToolUse"], settings["hooks"]["PostToolUse"])
                pre_compact = [h["command"] for g in new_settings["hooks"]["PreCompact"] for h in g["hooks"]]
                self.assertEqual(pre_compact[0], "echo mine")
                self.assertEqual(len(pre_compact), 2)
                self.assertNotIn("mcpServers", new_settings, "Claude Code ignores mcpServers in settings.json")
                for event in ("SessionStart", "SessionEnd", "Stop"):
                    self.assertEqual(len(new_settings["hooks"][event]), 1)
                snapshot = {}
                for path in (server_file, settings_file):
                    with open(path, "rb") as stream:
                        snapshot[path] = stream.read()
                self.install("--write", env=env)
                for path, data in snapshot.items():
                    with open(path, "rb") as stream:
                        self.assertEqual(stream.read(), data, f"second run changed {path}")
                for path in (server_file, settings_file):
                    os.unlink(path)

    def test_write_keeps_a_different_checkpoint_server_unless_forced(self):
        theirs = {"type": "stdio", "command": "node", "args": ["/opt/other/checkpoint.js"]}
        path = write(self.ws.home, ".claude.json", json.dumps({"mcpServers": {"checkpoint": theirs}}))
        out = self.install("--write").stdout.decode()
        self.assertEqual(self.read(path)["mcpServers"]["checkpoint"], theirs)
        advice = re.search(r"to replace it, run `([^`]+)`", out).group(1)  # works as printed
        proc = subprocess.run(["/bin/sh", "-c", advice], cwd=self.ws.home, env=self.ws.env, capture_output=True,
                              timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        entry = self.read(path)["mcpServers"]["checkpoint"]
        self.assert_runs_this_file([entry["command"], *entry["args"]])

    def test_write_brings_the_plain_file_commands_of_1_0_0_up_to_date(self):
        old_server = {"type": "stdio", "command": sys.executable, "args": [SERVER], "env": {}}
        old_hooks = {event: [{"hooks": [{"type": "command", "command": f"{sys.executable} {SERVER} hook {sub}"}]}]
                     for event, sub in (("PreCompact", "pre-compact"), ("SessionEnd", "session-end"), ("Stop", "stop"))}
        old_hooks["SessionStart"] = [{"matcher": "clear|compact|resume", "hooks": [
            {"type": "command", "command": f"{sys.executable} {SERVER} hook session-start"}]}]
        server_file = write(self.ws.home, ".claude.json", json.dumps({"mcpServers": {"checkpoint": old_server}}))
        settings_file = write(os.path.join(self.ws.home, ".claude"), "settings.json", json.dumps({"hooks": old_hooks}))
        out = self.install("--write").stdout.decode()
        self.assertIn("updated", out)
        entry = self.read(server_file)["mcpServers"]["checkpoint"]
        self.assert_runs_this_file([entry["command"], *entry["args"]])
        hooks = self.read(settings_file)["hooks"]
        for event, groups in hooks.items():
            with self.subTest(event=event):
                self.assertEqual(len(groups), 1, "updated in place, not added twice")
                self.assert_runs_this_file(shlex.split(groups[0]["hooks"][0]["command"])[:-4])

    def test_exclude_alone_adds_the_exclude_says_so_and_writes_nothing_else(self):
        out = self.install("--exclude").stdout.decode()
        self.assertEqual(out.strip(), f"Added .claude-checkpoint* to {os.path.join(self.ws.repo, '.git', 'info', 'exclude')}")
        self.ws.git("check-ignore", "-q", ".claude-checkpoint")
        self.assertIn("already", self.install("--exclude").stdout.decode())
        self.assertFalse(os.path.exists(os.path.join(self.ws.home, ".claude.json")))

    def test_project_scope_writes_mcp_json_and_project_settings(self):
        self.install("--write", "--scope", "project")
        entry = self.read(os.path.join(self.ws.repo, ".mcp.json"))["mcpServers"]["checkpoint"]
        self.assert_runs_this_file([entry["command"], *entry["args"]])
        hooks = self.read(os.path.join(self.ws.repo, ".claude", "settings.json"))["hooks"]
        self.assertEqual(sorted(hooks), ["PreCompact", "SessionEnd", "SessionStart", "Stop"])
        self.assertFalse(os.path.exists(os.path.join(self.ws.home, ".claude.json")))

    def test_exclude_adds_the_pattern_to_git_info_exclude_once(self):
        exclude = os.path.join(self.ws.repo, ".git", "info", "exclude")
        for flags in (("--write", "--exclude"), ("--exclude",)):
            with self.subTest(flags=flags):
                self.install(*flags)
        with open(exclude, encoding="utf-8") as stream:
            self.assertEqual(stream.read().splitlines().count(".claude-checkpoint*"), 1)
        self.assertFalse(os.path.exists(os.path.join(self.ws.repo, ".gitignore")))
        self.ws.git("check-ignore", "-q", ".claude-checkpoint")
        self.ws.git("check-ignore", "-q", ".claude-checkpoint.prev")

    def test_hook_entries_of_the_wrong_type_are_kept_and_not_trusted(self):
        odd = {"hooks": {"Stop": [{"hooks": 5}, "x", {"hooks": [7, {"command": ["a"]}]}]}}
        path = write(os.path.join(self.ws.home, ".claude"), "settings.json", json.dumps(odd))
        self.install("--write")
        stop = self.read(path)["hooks"]["Stop"]
        self.assertEqual(stop[:3], odd["hooks"]["Stop"])
        self.assertTrue(stop[3]["hooks"][0]["command"].endswith("hook stop --client claude"))

    def test_corrupt_user_config_is_left_untouched(self):
        path = write(self.ws.home, ".claude.json", b'{"numStartups": 3, oops')
        proc = self.install("--write", status=1)
        with open(path, "rb") as stream:
            self.assertEqual(stream.read(), b'{"numStartups": 3, oops')
        self.assertIn(".claude.json", proc.stderr.decode())


# ── 15.1 Every agent's files (SPEC section 12) ──

# Where each agent keeps its server entry and hooks, under the home folder (Linux).
AGENT_FILES = {
    "codex": (".codex/config.toml", ".codex/hooks.json"),
    "gemini": (".gemini/settings.json", ".gemini/settings.json"),
    "qwen": (".qwen/settings.json", ".qwen/settings.json"),
    "copilot": (".copilot/mcp-config.json", ".copilot/hooks/claude-checkpoint.json"),
    "cursor": (".cursor/mcp.json", None),
    "vscode": (".config/Code/User/mcp.json", None),
    "desktop": (".config/Claude/claude_desktop_config.json", None),
}

# A user's Codex config.toml as people write them: comments, odd spacing, a table left open at
# the end of the file, no final newline, another server and a hook trusted by hand.
USER_CODEX_TOML = (
    '# my settings\nmodel = "gpt-5"   # the best one\napproval_policy="never"\n\n'
    '[mcp_servers.docs]\ncommand = "npx"\nargs = [ "docs-server" ]\n\n'
    '[hooks.state."/elsewhere/hooks.json:stop:0:0"]\ntrusted_hash = "sha256:00"\n\n'
    '[projects."/work/p"]\ntrust_level = "trusted"')

# Codex 0.169.0's `hooks/list` reported these currentHash values for these handlers (recorded).
CODEX_HASHES = [
    ("session_start", "startup|resume", {"command": "echo 'hi there' hook session-start --client codex"},
     "sha256:442160b673e55813abb8192fbad07b09912a5191d05df0563248ceb67701731e"),
    ("session_end", None, {"command": "echo bye", "timeout": 3},
     "sha256:071d0f7e3b5d2ee8d45f9b3d2c8e013903db09ef4a767876ff83b52ea77eee3f"),
    ("session_end", None, {"command": "echo \u00e9"},
     "sha256:b84af245febde65ee643ae6796e1e2ec64f1cf22a7bb87291911f7b4e0eddf8e"),
    ("stop", None, {"command": "echo stop", "timeout": 30, "statusMessage": "saving"},
     "sha256:9f781203bad64b3795c1e03a518a0c2ef9f6cc0f70139603c56bb0a5c090f8e3"),
]


def files_under(folder: str) -> dict:
    """Every file under a folder, by relative path, with its bytes."""
    found = {}
    for base, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(base, name)
            found[os.path.relpath(path, folder)] = read_bytes(path)
    return found


class AgentInstallTest(unittest.TestCase):
    """`install --client NAME` for every agent: its files, no clobbering, idempotent, reversible."""

    def setUp(self):
        self.ws = Workspace(self)

    def cli(self, *args: str, status: int = 0, cwd: str | None = None) -> str:
        proc = self.ws.run_cli(*args, cwd=cwd)
        self.assertEqual(proc.returncode, status, proc.stdout.decode() + proc.stderr.decode())
        self.assertNotIn(b"Traceback", proc.stderr)
        return proc.stdout.decode() + proc.stderr.decode()

    def path(self, rel: str) -> str:
        return os.path.join(self.ws.home, rel)

    def entry(self, client: str) -> dict:
        server_file = self.path(AGENT_FILES[client][0])
        if client == "codex":
            if sys.version_info < (3, 11):
                self.skipTest("reading TOML needs tomllib (3.11+)")
            import tomllib
            with open(server_file, "rb") as stream:
                return tomllib.load(stream)["mcp_servers"]["checkpoint"]
        key = "servers" if client == "vscode" else "mcpServers"
        return InstallTest.read(server_file)[key]["checkpoint"]

    def test_each_agent_gets_its_server_and_hooks_in_its_own_files(self):
        for client, (server_rel, hook_rel) in AGENT_FILES.items():
            with self.subTest(client):
                self.cli("install", "--client", client, "--write")
                if client != "codex" or sys.version_info >= (3, 11):
                    entry = self.entry(client)
                    InstallTest.assert_runs_this_file(self, [entry["command"], *entry["args"]])
                if hook_rel is None:
                    continue
                hooks = InstallTest.read(self.path(hook_rel))["hooks"]
                agent = cc.AGENTS[client]
                self.assertEqual(set(hooks), set(agent.hook_events.values()))
                for ours, theirs in agent.hook_events.items():
                    handlers = hooks[theirs] if client == "copilot" else [h for g in hooks[theirs] for h in g["hooks"]]
                    command = handlers[0]["bash" if client == "copilot" else "command"]
                    self.assertEqual(shlex.split(command)[-4:], ["hook", ours, "--client", client])
                    InstallTest.assert_runs_this_file(self, shlex.split(command)[:-4])
                if client == "copilot":
                    self.assertEqual(InstallTest.read(self.path(hook_rel))["version"], 1)

    def test_each_server_entry_has_exactly_the_keys_of_spec_section_12(self):
        keys = {"codex": ["command", "args", "env", "startup_timeout_sec"], "gemini": ["command", "args", "env", "timeout"],
                "qwen": ["command", "args", "env", "timeout"], "copilot": ["type", "command", "args", "env", "tools"],
                "vscode": ["type", "command", "args"]}
        for client, wanted in keys.items():
            with self.subTest(client):
                self.cli("install", "--client", client, "--write")
                entry = self.entry(client)
                self.assertEqual(list(entry), wanted)
                self.assertEqual(entry.get("env", {}), {})
        self.assertEqual((self.entry("copilot")["type"], self.entry("copilot")["tools"]), ("local", ["*"]))
        self.assertEqual(self.entry("vscode")["type"], "stdio")

    def test_a_second_run_changes_nothing_and_uninstall_restores_the_users_bytes(self):
        users = {
            "codex": (USER_CODEX_TOML, json.dumps({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}})),
            "gemini": (json.dumps({"theme": "dark", "mcpServers": {"docs": {"command": "npx"}},
                                   "hooks": {"AfterAgent": [{"hooks": [{"type": "command", "command": "say done"}]}]}},
                                  indent=4), None),
            "copilot": (json.dumps({"mcpServers": {"docs": {"type": "local", "command": "npx", "args": [], "tools": ["*"]}}},
                                   indent=2) + "\n", None),
            "vscode": (json.dumps({"servers": {"docs": {"type": "stdio", "command": "npx"}}, "inputs": []}, indent=2) + "\n", None),
        }
        for client, (server_text, hook_text) in users.items():
            with self.subTest(client):
                server_rel, hook_rel = AGENT_FILES[client]
                write(self.ws.home, server_rel, server_text)
                if hook_text is not None:
                    write(self.ws.home, hook_rel, hook_text)
                before = files_under(self.ws.home)
                self.cli("install", "--client", client, "--write")
                after = files_under(self.ws.home)
                self.cli("install", "--client", client, "--write")
                self.assertEqual(files_under(self.ws.home), after, "a second run changes nothing")
                if client == "codex":
                    text = read_bytes(self.path(server_rel)).decode()
                    self.assertTrue(text.startswith(USER_CODEX_TOML + "\n# >>> claude-checkpoint server >>>"), text)
                    self.assertEqual(text.count("[mcp_servers.checkpoint]"), 1)
                    if sys.version_info >= (3, 11):
                        import tomllib
                        doc, mine = tomllib.loads(text), tomllib.loads(USER_CODEX_TOML)
                        self.assertEqual(doc["mcp_servers"]["docs"], mine["mcp_servers"]["docs"])
                        self.assertEqual(doc["hooks"]["state"], mine["hooks"]["state"])
                        self.assertEqual(doc["projects"], mine["projects"])
                else:
                    doc = InstallTest.read(self.path(server_rel))
                    for key, value in json.loads(server_text).items():
                        if key not in ("mcpServers", "servers", "hooks"):
                            self.assertEqual(doc[key], value)
                if hook_text is not None or client == "gemini":
                    hooks = InstallTest.read(self.path(hook_rel))["hooks"]
                    event = "AfterAgent" if client == "gemini" else "Stop"
                    self.assertEqual(hooks[event][0]["hooks"][0]["command"], "say done", "the user's hook stays first")
                self.assertIn("would", self.cli("uninstall", "--client", client))  # a dry run
                self.assertEqual(files_under(self.ws.home), after, "a dry run writes nothing")
                self.cli("uninstall", "--client", client, "--write")
                restored = files_under(self.ws.home)
                if client == "codex":  # the file gained the final newline our block needed
                    self.assertEqual(restored[server_rel], (USER_CODEX_TOML + "\n").encode())
                    del restored[server_rel], before[server_rel]
                for rel in (server_rel, hook_rel):
                    if rel in before and rel in restored:  # JSON: the same document, our formatting
                        self.assertEqual(json.loads(restored[rel]), json.loads(before[rel]), rel)
                        del restored[rel], before[rel]
                self.assertEqual(restored, before)
                shutil.rmtree(os.path.join(self.ws.home, server_rel.split("/")[0]))

    def test_a_settings_file_that_is_a_symlink_stays_one_and_its_target_gets_our_entries(self):
        dotfiles = os.path.join(self.ws.home, "dotfiles")
        write(dotfiles, "gemini.json", json.dumps({"theme": "dark"}))
        write(dotfiles, "config.toml", USER_CODEX_TOML)
        os.makedirs(self.path(".gemini"))
        os.makedirs(self.path(".codex"))
        os.symlink(os.path.join(dotfiles, "gemini.json"), self.path(".gemini/settings.json"))
        os.symlink(os.path.join(dotfiles, "config.toml"), self.path(".codex/config.toml"))
        self.cli("install", "--client", "gemini", "--client", "codex", "--write", "--trust")
        for link, target in ((".gemini/settings.json", "gemini.json"), (".codex/config.toml", "config.toml")):
            self.assertTrue(os.path.islink(self.path(link)), link)
            self.assertIn("claude_checkpoint", read_bytes(os.path.join(dotfiles, target)).decode())
        self.assertEqual(json.loads(read_bytes(os.path.join(dotfiles, "gemini.json")))["theme"], "dark")
        self.cli("uninstall", "--client", "gemini", "--client", "codex", "--write")
        self.assertTrue(os.path.islink(self.path(".gemini/settings.json")))
        self.assertEqual(json.loads(read_bytes(os.path.join(dotfiles, "gemini.json"))), {"theme": "dark"})

    def test_a_file_that_does_not_parse_is_never_written_and_exit_1_names_it(self):
        cases = [("gemini", ".gemini/settings.json", b'{"theme": "dark",'),
                 ("codex", ".codex/hooks.json", b'{"hooks": '),
                 ("copilot", ".copilot/mcp-config.json", b"[1, 2]"),
                 ("vscode", ".config/Code/User/mcp.json", b"\xff\xfe not text")]
        if sys.version_info >= (3, 11):  # 3.9 and 3.10 cannot read TOML: the block is written by text
            cases.append(("codex", ".codex/config.toml", b'model = "gpt-5\n[x'))
        for client, rel, data in cases:
            with self.subTest(client=client, file=rel):
                shutil.rmtree(os.path.join(self.ws.home, rel.split("/")[0]), ignore_errors=True)
                write(self.ws.home, rel, data)
                before = files_under(self.ws.home)
                for command in ("install", "uninstall"):
                    out = self.cli(command, "--client", client, "--write", status=1)
                    self.assertIn(self.path(rel), out)
                    self.assertEqual(files_under(self.ws.home), before, "nothing written, not even the other file")

    def test_a_file_of_the_wrong_shape_is_never_written_and_exit_1_names_it(self):
        cases = [("gemini", ".gemini/settings.json", b'{"mcpServers": "docs"}'),
                 ("gemini", ".gemini/settings.json", b'{"hooks": {"SessionStart": {"matcher": "startup"}}}'),
                 ("copilot", ".copilot/hooks/claude-checkpoint.json", b'{"version": 1, "hooks": []}')]
        for client, rel, data in cases:
            with self.subTest(client=client, data=data):
                shutil.rmtree(os.path.join(self.ws.home, rel.split("/")[0]), ignore_errors=True)
                write(self.ws.home, rel, data)
                before = files_under(self.ws.home)
                out = self.cli("install", "--client", client, "--write", status=1)
                self.assertIn(self.path(rel) + ": ", out)
                self.assertEqual(files_under(self.ws.home), before)
        self.assertIn(self.path(".gemini/settings.json") + ": hooks", self.cli("uninstall", "--client", "gemini", "--write",
                                                                                status=1))

    def test_another_checkpoint_server_is_kept_and_an_unknown_client_is_refused(self):
        theirs = '[mcp_servers.checkpoint]\ncommand = "node"\nargs = ["/opt/theirs.js"]\n'
        write(self.ws.home, ".codex/config.toml", theirs)
        out = self.cli("install", "--client", "codex", "--write")
        self.assertIn("kept", out)
        self.assertEqual(read_bytes(self.path(".codex/config.toml")).decode(), theirs)
        self.cli("uninstall", "--client", "codex", "--write")
        self.assertEqual(read_bytes(self.path(".codex/config.toml")).decode(), theirs, "uninstall removes ours only")
        self.assertIn("unknown --client nobody", self.cli("install", "--client", "nobody", status=1))

    def test_codex_hooks_are_trusted_only_with_trust_and_hashed_as_codex_does(self):
        for label, matcher, handler, expected in CODEX_HASHES:
            with self.subTest(label=label, handler=handler):
                self.assertEqual(cc.codex_hook_hash(label, matcher, handler), expected)
        write(self.ws.home, ".codex/config.toml", USER_CODEX_TOML)
        out = self.cli("install", "--client", "codex", "--write")
        self.assertIn("Codex runs only hooks you trust", out)
        self.assertNotIn("hooks.state.\"" + self.path(".codex/hooks.json"), read_bytes(self.path(".codex/config.toml")).decode())
        advice = re.search(r"or run `([^`]+)`", out).group(1)
        self.assertIn("--trust", advice)
        subprocess.run(["/bin/sh", "-c", advice], cwd=self.ws.repo, env=self.ws.env, check=True, capture_output=True,
                       timeout=TIMEOUT)
        text = read_bytes(self.path(".codex/config.toml")).decode()
        self.assertTrue(text.startswith(USER_CODEX_TOML + "\n"))
        hooks = InstallTest.read(self.path(".codex/hooks.json"))["hooks"]
        for event, groups in hooks.items():
            label = cc.codex_event_label(event)
            handler = groups[0]["hooks"][0]
            key = f'[hooks.state."{self.path(".codex/hooks.json")}:{label}:0:0"]\n'
            self.assertIn(key + f'trusted_hash = "{cc.codex_hook_hash(label, None, handler)}"\n', text)
        self.assertIn("trusted", self.cli("doctor", "--client", "codex"))
        self.cli("uninstall", "--client", "codex", "--write")
        self.assertEqual(read_bytes(self.path(".codex/config.toml")).decode(), USER_CODEX_TOML + "\n")

    def test_a_crlf_config_toml_gets_crlf_blocks_and_its_bytes_back(self):
        mine = USER_CODEX_TOML.replace("\n", "\r\n") + "\r\n"
        write(self.ws.home, ".codex/config.toml", mine)
        self.cli("install", "--client", "codex", "--write", "--trust")
        written = read_bytes(self.path(".codex/config.toml"))
        self.assertTrue(written.startswith(mine.encode()))
        self.assertNotIn(b"\n", written.replace(b"\r\n", b""), "no bare LF in a CRLF file")
        if sys.version_info >= (3, 11):
            import tomllib
            self.assertIn("checkpoint", tomllib.loads(written.decode())["mcp_servers"])
        self.cli("install", "--client", "codex", "--write", "--trust")
        self.assertEqual(read_bytes(self.path(".codex/config.toml")), written, "a second run changes nothing")
        self.assertIn("✓ Codex: our hooks are trusted", self.cli("doctor", "--client", "codex"))
        codex = codex_binary()
        if codex is not None:  # the real Codex reads the CRLF file and trusts our hooks
            ours = [h for h in codex_hooks_list(codex, self.ws.env, self.ws.repo)
                    if "claude_checkpoint" in (h.get("command") or "")]
            self.assertEqual([h["trustStatus"] for h in ours], ["trusted"] * 4, ours)
        self.cli("uninstall", "--client", "codex", "--write")
        self.assertEqual(read_bytes(self.path(".codex/config.toml")), mine.encode())

    def test_the_real_codex_trusts_what_install_trust_wrote(self):
        codex = codex_binary()
        if codex is None:
            self.skipTest("the Codex CLI is not installed (.ci/run installs it; or set CODEX_BIN)")
        self.cli("install", "--client", "codex", "--write", "--trust")
        hooks = codex_hooks_list(codex, self.ws.env, self.ws.repo)
        ours = [h for h in hooks if "claude_checkpoint" in (h.get("command") or "")]
        self.assertEqual(len(ours), 4, hooks)
        for hook in ours:
            self.assertEqual(hook["trustStatus"], "trusted", hook)
        listed = subprocess.run([codex, "mcp", "list", "--json"], cwd=self.ws.repo, env=self.ws.env, capture_output=True,
                                timeout=TIMEOUT)
        server = next(s for s in json.loads(listed.stdout) if s["name"] == "checkpoint")  # Codex reads our block
        InstallTest.assert_runs_this_file(self, [server["transport"]["command"], *server["transport"]["args"]])

    def test_the_real_gemini_cli_and_qwen_code_read_our_settings(self):
        for client in ("gemini", "qwen"):
            with self.subTest(client):
                binary = agent_binary(client)
                if binary is None:
                    self.skipTest(f"the {client} CLI is not installed (.ci/run installs it; or set {client.upper()}_BIN)")
                self.cli("install", "--client", client, "--write")
                listed = subprocess.run([binary, "mcp", "list"], cwd=self.ws.repo, env=self.ws.env, capture_output=True,
                                        timeout=60)
                out = listed.stdout.decode() + listed.stderr.decode()
                self.assertRegex(out, r"checkpoint: \S*python\S* -S -c import sys;.* " + re.escape(HERE) + r" \(stdio\)")

    def test_project_entries_work_on_a_teammates_machine(self):
        vendored = os.path.join(self.ws.repo, "tools")
        os.makedirs(vendored)
        shutil.copy(SERVER, vendored)
        self.ws.write(".git/info/exclude", ".claude-checkpoint*\n")
        clients = ("claude", "codex", "gemini", "qwen", "copilot", "cursor", "vscode")
        proc = subprocess.run([sys.executable, os.path.join(vendored, "claude_checkpoint.py"), "install", "--scope",
                               "project", "--write", *[w for c in clients for w in ("--client", c)]],
                              cwd=self.ws.repo, env=self.ws.env, capture_output=True, timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        written = {rel: data.decode() for rel, data in files_under(self.ws.repo).items()
                   if rel.startswith((".mcp.json", ".claude/", ".codex/", ".gemini/", ".qwen/", ".github/", ".cursor/", ".vscode/"))}
        self.assertEqual(set(written), {".claude/settings.json", ".codex/config.toml", ".codex/hooks.json",
                                        ".cursor/mcp.json", ".github/hooks/claude-checkpoint.json",
                                        ".gemini/settings.json", ".mcp.json", ".qwen/settings.json", ".vscode/mcp.json"})
        for rel, text in written.items():
            with self.subTest(rel):
                for machine in (self.ws.home, sys.executable, HERE):  # nothing of this machine
                    self.assertNotIn(machine, text)
        self.assertIn(f"Codex reads {self.ws.repo}/.codex only once you trust the project", proc.stdout.decode())
        self.assertIn('"${CLAUDE_PROJECT_DIR:-.}/tools"', written[".mcp.json"])
        self.assertIn('"${workspaceFolder}/tools"', written[".vscode/mcp.json"])
        # A teammate's checkout: another folder, the hooks run the way each agent runs them.
        teammate = os.path.join(temp_dir(self, "cc-teammate-"), "checkout")
        shutil.copytree(self.ws.repo, teammate, symlinks=True)
        self.assertEqual(self.ws.run_cli("--root", teammate, "save", "--goal", "Teammate's task").returncode, 0)
        bin_dir = temp_dir(self, "cc-bin-")  # `python3` on the teammate's PATH
        os.symlink(sys.executable, os.path.join(bin_dir, "python3"))
        env = dict(self.ws.env, PATH=bin_dir + os.pathsep + self.ws.env["PATH"], CLAUDE_PROJECT_DIR=teammate,
                   GEMINI_PROJECT_DIR=teammate, QWEN_PROJECT_DIR=teammate)
        for client, rel in (("claude", ".claude/settings.json"), ("codex", ".codex/hooks.json"),
                            ("gemini", ".gemini/settings.json"), ("qwen", ".qwen/settings.json")):
            with self.subTest(client):
                command = json.loads(written[rel])["hooks"]["SessionStart"][0]["hooks"][0]["command"]
                ran = subprocess.run(["/bin/sh", "-c", command], cwd=teammate, env=env, capture_output=True,
                                     input=agent_payload(client, "session-start", teammate).encode(), timeout=TIMEOUT)
                self.assertEqual(ran.returncode, 0, ran.stderr)
                self.assertIn("Teammate's task", ran.stdout.decode(), ran.stderr)
        out = subprocess.run([sys.executable, os.path.join(teammate, "tools", "claude_checkpoint.py"), "doctor",
                              "--client", "codex", "--client", "gemini"], cwd=teammate, env=env, capture_output=True,
                             timeout=TIMEOUT)
        self.assertEqual(out.returncode, 0, out.stdout.decode() + out.stderr.decode())


class HookMergeTest(unittest.TestCase):
    """The pure merge and removal of hook handlers: ours only, whatever version wrote them."""

    def plan(self, client: str = "claude") -> cc.Install:
        world = cc.World({}, "/p", "/home/u", time.time, lambda m: None, program=("python3", "/opt/cc/claude_checkpoint.py"))
        return cc.plan_install(cc.AGENTS[client], world, "user", None)

    def test_removal_takes_ours_from_a_shared_group_and_keeps_everything_else(self):
        doc = {"model": "x", "hooks": {
            "Stop": [{"hooks": [{"type": "command", "command": "say done"},
                                {"type": "command", "command": "python3 /old/claude_checkpoint.py hook stop"}]},
                     "odd", {"hooks": 5}],
            "PreCompact": [{"hooks": [{"type": "command", "command": "python3 /x/claude_checkpoint.py hook pre-compact --client claude"}]}],
            "PostToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "fmt claude_checkpoint.py"}]}]}}
        self.assertEqual(sorted(cc.remove_hooks(doc, cc.AGENTS["claude"])), ["PreCompact", "Stop"])
        self.assertEqual(doc, {"model": "x", "hooks": {
            "Stop": [{"hooks": [{"type": "command", "command": "say done"}]}, "odd", {"hooks": 5}],
            "PostToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "fmt claude_checkpoint.py"}]}]}})

    def test_merge_updates_ours_in_place_and_a_second_merge_changes_nothing(self):
        doc = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "python3 /old/claude_checkpoint.py hook stop",
                                              "timeout": 9}]}]}}
        added, updated = cc.merge_hooks(doc, self.plan())
        self.assertEqual((added, updated), (["SessionStart", "PreCompact", "SessionEnd"], ["Stop"]))
        stop = doc["hooks"]["Stop"][0]["hooks"][0]
        self.assertTrue(stop["command"].endswith("/opt/cc/claude_checkpoint.py hook stop --client claude"), stop)
        self.assertEqual(stop["timeout"], 9, "what the user set on our handler stays")
        self.assertEqual(cc.merge_hooks(doc, self.plan()), ([], []))
        self.assertEqual(doc["hooks"]["SessionStart"][0]["matcher"], "clear|compact|resume")

    def test_our_server_entry_keeps_what_the_user_added(self):
        plan = self.plan()
        doc = {"mcpServers": {"checkpoint": {**plan.server, "env": {"CHECKPOINT_SNAPSHOTS": "off"}, "args": ["/old/claude_checkpoint.py"]}}}
        self.assertEqual(cc.merge_server(doc, "mcpServers", plan.server, force=False), "updated")
        self.assertEqual(doc["mcpServers"]["checkpoint"]["env"], {"CHECKPOINT_SNAPSHOTS": "off"})
        self.assertEqual(doc["mcpServers"]["checkpoint"]["args"], plan.server["args"])
        self.assertEqual(cc.merge_server(doc, "mcpServers", plan.server, force=False), "already there")

    def test_a_gemini_matcher_of_ours_that_never_fires_is_brought_up_to_date(self):
        old = "python3 /old/claude_checkpoint.py hook session-start --client gemini"
        doc = {"hooks": {"SessionStart": [
            {"matcher": "startup|resume|clear", "hooks": [{"type": "command", "command": old}]},
            {"matcher": "startup|resume", "hooks": [{"type": "command", "command": "say hi"}]}]}}
        plan = self.plan("gemini")
        self.assertEqual(cc.hook_state(json.loads(json.dumps(doc)), plan)["session-start"], "outdated")
        self.assertIn("SessionStart", cc.merge_hooks(doc, plan)[1])
        ours, theirs = doc["hooks"]["SessionStart"]
        self.assertNotIn("matcher", ours, "Gemini CLI compares matchers as exact strings: none fires for every source")
        self.assertEqual(theirs["matcher"], "startup|resume", "the user's group is theirs")
        self.assertEqual(cc.hook_state(doc, plan)["session-start"], "current")
        self.assertEqual(cc.merge_hooks(doc, plan), ([], []))

    def test_copilot_handlers_sit_in_the_event_lists(self):
        doc: dict = {}
        cc.merge_hooks(doc, self.plan("copilot"))
        self.assertEqual(list(doc), ["version", "hooks"])
        self.assertEqual(doc["hooks"]["agentStop"][0]["type"], "command")
        self.assertIn("hook stop --client copilot", doc["hooks"]["agentStop"][0]["bash"])
        self.assertEqual(sorted(cc.remove_hooks(doc, cc.AGENTS["copilot"])), ["agentStop", "preCompact", "sessionEnd", "sessionStart"])
        self.assertEqual(doc, {"version": 1})


def agent_binary(name: str) -> str | None:
    """An agent's CLI: $<NAME>_BIN, else where .ci/run installs it, else on PATH."""
    for candidate in (os.environ.get(f"{name.upper()}_BIN"), os.path.join(HERE, ".ci", ".cache", "node_modules", ".bin", name),
                      shutil.which(name)):
        if candidate and os.path.isfile(candidate):
            return candidate
    return None


def codex_binary() -> str | None:
    return agent_binary("codex")


def codex_hooks_list(codex: str, env: dict, cwd: str) -> list:
    """The hooks the real Codex sees for a folder: `codex app-server`, JSON-RPC `hooks/list`."""
    requests = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}}},
                {"jsonrpc": "2.0", "method": "initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "hooks/list", "params": {"cwds": [cwd]}}]
    proc = subprocess.Popen([codex, "app-server"], cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    watchdog = threading.Timer(TIMEOUT, proc.kill)  # a silent Codex ends the read instead of hanging the suite
    watchdog.start()
    try:
        proc.stdin.write("".join(json.dumps(r) + "\n" for r in requests).encode())
        proc.stdin.flush()
        for line in proc.stdout:
            message = json.loads(line)
            if message.get("id") == 2:
                return message["result"]["data"][0]["hooks"]
        raise AssertionError("codex app-server closed without answering hooks/list")
    finally:
        watchdog.cancel()
        proc.kill()
        proc.wait()


class AgentDoctorTest(unittest.TestCase):
    """`doctor --client NAME`: in place, current, pointing at files that exist; honest marks; --json."""

    def setUp(self):
        self.ws = Workspace(self)
        self.ws.write(".git/info/exclude", ".claude-checkpoint*\n")

    def doctor(self, *args: str, status: int) -> str:
        proc = self.ws.run_cli("doctor", *args)
        out = proc.stdout.decode() + proc.stderr.decode()
        self.assertEqual(proc.returncode, status, out)
        self.assertNotIn("Traceback", out)
        return out

    def test_installed_agents_are_in_place_and_current(self):
        for client in ("claude", "codex", "gemini", "copilot", "cursor"):
            with self.subTest(client):
                self.assertIn("✗", self.doctor("--client", client, status=1))  # not installed yet
                self.assertEqual(self.ws.run_cli("install", "--client", client, "--write").returncode, 0)
                out = self.doctor("--client", client, status=0)
                title = cc.AGENTS[client].title
                self.assertIn(f"✓ {title}: MCP server in place and current", out)
                if cc.AGENTS[client].hook_events:
                    self.assertIn(f"✓ {title}: hooks in place and current", out)

    def test_codex_hooks_and_project_trust_are_checked(self):
        self.assertEqual(self.ws.run_cli("install", "--client", "codex", "--write", "--scope", "project").returncode, 0)
        out = self.doctor("--client", "codex", status=0)
        advice = re.search(r"⚠ Codex: hooks not trusted \(session_start, pre_compact, session_end, stop\): Codex skips "
                           r"them silently; run `([^`]+)`", out)
        self.assertIsNotNone(advice, out)
        subprocess.run(["/bin/sh", "-c", advice.group(1)], cwd=self.ws.home, env=self.ws.env, check=True,
                       capture_output=True, timeout=TIMEOUT)  # works as printed, from anywhere
        out = self.doctor("--client", "codex", status=0)
        self.assertIn("✓ Codex: our hooks are trusted", out)
        if sys.version_info >= (3, 11):  # the project's trust is read from config.toml
            self.assertIn(f"⚠ Codex reads {self.ws.repo}/.codex only once you trust the project", out)
            write(self.ws.home, ".codex/config.toml", read_bytes(os.path.join(self.ws.home, ".codex/config.toml")).decode()
                  + f'[projects."{self.ws.repo}"]\ntrust_level = "trusted"\n')
            self.assertNotIn("⚠", self.doctor("--client", "codex", status=0).split("Codex")[-1])

    def test_the_fix_for_a_project_file_fixes_it_as_printed(self):
        self.ws.write(".gemini/settings.json", json.dumps({"hooks": {"AfterAgent": [{"hooks": [
            {"type": "command", "command": "python3 /old/claude_checkpoint.py hook stop --client gemini"}]}]}}))
        out = self.doctor("--client", "gemini", status=1)
        advice = re.search(r"✗ Gemini CLI: hooks missing for [^;]+; run `([^`]+)` \(project scope", out)
        self.assertIsNotNone(advice, out)
        subprocess.run(["/bin/sh", "-c", advice.group(1)], cwd=self.ws.home, env=self.ws.env, check=True,
                       capture_output=True, timeout=TIMEOUT)  # works as printed, from anywhere
        self.assertIn("✓ Gemini CLI: hooks in place and current (project scope", self.doctor("--client", "gemini", status=0))

    def test_a_command_pointing_at_a_missing_file_fails(self):
        copy_dir = temp_dir(self, "cc-copy-")
        shutil.copy(SERVER, copy_dir)
        proc = subprocess.run([sys.executable, os.path.join(copy_dir, "claude_checkpoint.py"), "install", "--client",
                               "gemini", "--write"], cwd=self.ws.repo, env=self.ws.env, capture_output=True, timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        os.unlink(os.path.join(copy_dir, "claude_checkpoint.py"))
        out = self.doctor("--client", "gemini", status=1)
        self.assertIn(f"✗ Gemini CLI: the MCP server runs {os.path.join(copy_dir, 'claude_checkpoint.py')}, which does not exist", out)
        self.assertIn("✗ Gemini CLI: the hook runs", out)
        self.assertIn("⚠ Gemini CLI: MCP server from another version or place", out)

    def test_plain_doctor_checks_claude_codes_entries_when_there_are_some(self):
        self.assertNotIn("Claude Code", self.doctor(status=0))  # none installed: nothing to say
        copy_dir = temp_dir(self, "cc-copy-")
        shutil.copy(SERVER, copy_dir)
        proc = subprocess.run([sys.executable, os.path.join(copy_dir, "claude_checkpoint.py"), "install", "--write"],
                              cwd=self.ws.repo, env=self.ws.env, capture_output=True, timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        os.unlink(os.path.join(copy_dir, "claude_checkpoint.py"))  # the file moved away
        self.assertIn(f"✗ Claude Code: the hook runs {os.path.join(copy_dir, 'claude_checkpoint.py')}, which does not exist",
                      self.doctor(status=1))

    def test_a_checkpoint_read_from_prev_is_a_warning_not_a_failure(self):
        for _ in range(2):
            self.assertEqual(self.ws.run_cli("save", "--goal", "g").returncode, 0)
        self.ws.write(".claude-checkpoint", "{corrupt")
        out = self.doctor(status=0)
        self.assertIn("⚠ .claude-checkpoint is unreadable", out)
        self.assertIn(".claude-checkpoint.prev", out)
        self.assertNotIn("✗", out)

    def test_json_holds_every_check_with_its_status(self):
        doc = json.loads(self.doctor("--json", "--client", "qwen", status=1))
        self.assertFalse(doc["ok"])
        self.assertEqual({c["status"] for c in doc["checks"]} - {"ok", "warning", "failed"}, set())
        self.assertTrue(any(c["status"] == "failed" and "Qwen Code" in c["text"] for c in doc["checks"]))
        self.assertEqual(self.ws.run_cli("install", "--client", "qwen", "--write").returncode, 0)
        self.assertTrue(json.loads(self.doctor("--json", "--client", "qwen", status=0))["ok"])


class PluginCommandsTest(unittest.TestCase):
    """The server and hooks that .claude-plugin/plugin.json declares, run the way Claude Code
    runs them (${CLAUDE_PLUGIN_ROOT} expanded, hooks through a shell, in the project folder)."""

    def setUp(self):
        manifest = os.path.join(HERE, ".claude-plugin", "plugin.json")
        if not os.path.exists(manifest):
            self.skipTest("no .claude-plugin/plugin.json (copied file alone)")
        with open(manifest, encoding="utf-8") as stream:
            self.manifest = json.load(stream)
        self.ws = Workspace(self)
        plant_trap(self.ws.repo)
        self.plugin_root = temp_dir(self, "cc-plugin-")
        shutil.copy(SERVER, self.plugin_root)
        bin_dir = temp_dir(self, "cc-bin-")  # `python3` is the Python running these tests
        os.symlink(sys.executable, os.path.join(bin_dir, "python3"))
        self.env = dict(self.ws.env, PATH=bin_dir + os.pathsep + self.ws.env["PATH"],
                        CLAUDE_PLUGIN_ROOT=self.plugin_root, CLAUDE_PROJECT_DIR=self.ws.repo)
        del self.env["PYTHONDONTWRITEBYTECODE"]

    def server_command(self) -> list:
        entry = self.manifest["mcpServers"]["checkpoint"]
        return [shutil.which(entry["command"], path=self.env["PATH"])] + [
            arg.replace("${CLAUDE_PLUGIN_ROOT}", self.plugin_root) for arg in entry["args"]]

    def run_hook(self, event: str, payload: str) -> subprocess.CompletedProcess:
        groups = [g for g in self.manifest["hooks"].values() for g in g
                  if g["hooks"][0]["command"].endswith(f" hook {event}")]
        return subprocess.run(["/bin/sh", "-c", groups[0]["hooks"][0]["command"]], input=payload.encode(),
                              cwd=self.ws.repo, env=self.env, capture_output=True, timeout=HOOK_BOUND_S)

    def test_the_trap_is_real(self):
        subprocess.run([sys.executable, "-c", "import json"], cwd=self.ws.repo, env=self.env, check=True)
        self.assertEqual(trap_markers(self.ws.repo), ["IMPORTED-json"])

    def test_the_server_imports_the_file_reuses_its_bytecode_and_nothing_from_the_project(self):
        self.assertEqual(self.server_command()[1:], [*cc.IMPORT_FLAGS, cc.IMPORT_CODE.format(module="claude_checkpoint"),
                                                     self.plugin_root])
        for run in ("first", "cached"):
            with self.subTest(run):
                server = McpServer(self, self.ws.repo, self.env, command=self.server_command())
                server.initialize()
                save_ok(server, **sample_save())
                self.assertIn("# Resuming: project", server.load())
                server.close()
                cache = os.path.join(self.plugin_root, "__pycache__")
                self.assertTrue([n for n in os.listdir(cache) if n.startswith("claude_checkpoint.")], cache)
        self.assertEqual(trap_markers(self.ws.repo), [])

    def test_the_hooks_run_through_a_shell_and_import_nothing_from_the_project(self):
        t = Transcript(self.ws.repo)
        t.prompt("Make the build green")
        t.bash("make test")
        transcript = t.save(os.path.join(temp_dir(self, "cc-t-"), "t.jsonl"))
        for event in ("pre-compact", "stop", "session-end", "session-start"):
            with self.subTest(event):
                proc = self.run_hook(event, hook_payload(event, transcript, self.ws.repo))
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertNotIn(b"Traceback", proc.stderr)
        self.assertIn("make test", proc.stdout.decode(), "session-start prints the brief")
        self.assertEqual(trap_markers(self.ws.repo), [])

    def test_a_read_only_plugin_folder_still_serves_without_a_bytecode_cache(self):
        make_read_only(self, self.plugin_root)
        server = McpServer(self, self.ws.repo, self.env, command=self.server_command())
        self.assertEqual(server.initialize()["result"]["serverInfo"]["name"], "claude-checkpoint")
        save_ok(server, goal="read-only plugin folder")
        server.close()
        self.assertEqual(os.listdir(self.plugin_root), ["claude_checkpoint.py"])
        self.assertEqual(trap_markers(self.ws.repo), [])


class DoctorTest(unittest.TestCase):
    """`doctor` says which Python, git and root, and whether the checkpoint is sound."""

    def setUp(self):
        self.ws = Workspace(self)
        write(self.ws.repo, ".git/info/exclude", ".claude-checkpoint*\n")
        self.assertEqual(self.ws.run_cli("save", stdin=json.dumps(sample_save())).returncode, 0)

    def test_healthy_repository_exits_zero_and_names_the_root_and_why(self):
        cases = (("the working directory", self.ws.env, (), ("working directory",)),
                 ("CLAUDE_PROJECT_DIR", dict(self.ws.env, CLAUDE_PROJECT_DIR=self.ws.repo), (), ("CLAUDE_PROJECT_DIR",)),
                 ("CHECKPOINT_PROJECT_ROOT", dict(self.ws.env, CHECKPOINT_PROJECT_ROOT=self.ws.repo), (),
                  ("CHECKPOINT_PROJECT_ROOT",)),
                 ("--root", self.ws.env, ("--root", self.ws.repo), ("(from --root)",)))
        for name, env, args, reasons in cases:
            with self.subTest(name):
                cwd = self.ws.repo if name == "the working directory" else self.ws.home
                proc = self.ws.run_cli(*args, "doctor", env=env, cwd=cwd)
                out = proc.stdout.decode() + proc.stderr.decode()
                self.assertEqual(proc.returncode, 0, out)
                root_line = next((line for line in out.splitlines() if self.ws.repo in line), "")
                self.assertTrue(any(reason in root_line for reason in reasons), out)
                self.assertIn("git version", out)
                self.assertIn(sys.version.split()[0], out)

    def test_corrupt_checkpoint_fails(self):
        write(self.ws.repo, ".claude-checkpoint", b"{bad")
        write(self.ws.repo, ".claude-checkpoint.prev", b"{bad too")
        proc = self.ws.run_cli("doctor")
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn(".claude-checkpoint", proc.stdout.decode() + proc.stderr.decode())
        self.assertNotIn(b"Traceback", proc.stderr)

    def test_a_refused_root_gets_advice_for_people_not_for_a_model(self):
        proc = self.ws.run_cli("doctor", cwd="/")
        out = proc.stdout.decode() + proc.stderr.decode()
        self.assertEqual(proc.returncode, 1, out)
        self.assertIn("✗ Refusing to use /", out)
        self.assertIn("--root DIR", out)
        self.assertNotIn("projectRoot", out)

    def test_missing_git_fails_and_says_so(self):
        proc = self.ws.run_cli("doctor", env=dict(self.ws.env, PATH=fake_git_folder(self, None)))
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("git", (proc.stdout.decode() + proc.stderr.decode()).lower())
        self.assertNotIn(b"Traceback", proc.stderr)


# ════════════════════════════════════════════════════════════════════════════
# 16. Command line: show, save, --root, --version, --help
# ════════════════════════════════════════════════════════════════════════════
# The hooks are in 11.2, the rewind's subcommands in 11.1, install and doctor in 15.

class TestPlainFile(unittest.TestCase):
    """Copy-and-run: the file alone, anywhere, started as `python3 claude_checkpoint.py`
    (compiled at every start, so slower than the importing command, but the same program)."""

    def test_the_file_compiles_without_a_warning(self):
        # Compiled at every start: a SyntaxWarning (an invalid escape such as "\s" in a plain
        # string, 3.12 and later) would be printed to the user's stderr each time.
        import warnings
        with open(SERVER, encoding="utf-8") as stream:
            source = stream.read()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            compile(source, SERVER, "exec")

    def test_no_name_of_the_file_is_bound_twice(self):
        # One file of thousands of lines: a second `_PATTERN = …` far below the first silently
        # replaces it at import for every function that reads it (a redaction's regex once read
        # the checkpoint's timestamp this way).
        import ast
        with open(SERVER, encoding="utf-8") as stream:
            tree = ast.parse(stream.read())
        lines: dict = {}
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [leaf.id for target in targets for leaf in ast.walk(target) if isinstance(leaf, ast.Name) and isinstance(leaf.ctx, ast.Store)]
            else:
                continue
            for name in names:
                lines.setdefault(name, []).append(node.lineno)
        self.assertEqual({name: at for name, at in lines.items() if len(at) > 1}, {})

    @slow
    def test_a_copied_file_serves_saves_and_answers_the_command_line(self):
        ws = Workspace(self)
        elsewhere = temp_dir(self, "cc-copy-")
        copy = os.path.join(elsewhere, "claude_checkpoint.py")
        shutil.copy(SERVER, copy)
        server = McpServer(self, ws.repo, ws.env, command=[sys.executable, copy])
        server.initialize()
        save_ok(server, goal="from a copied file")
        self.assertEqual(ws.checkpoint()["goal"]["primary"], "from a copied file")
        self.assertIn("snapshot", ws.checkpoint())
        for args in (["--version"], ["show"], ["list", "--json"]):
            with self.subTest(args=args):
                proc = subprocess.run([sys.executable, copy, *args], cwd=ws.repo, env=ws.env, capture_output=True,
                                      timeout=TIMEOUT)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertTrue(proc.stdout.strip())


class CommandLineTest(unittest.TestCase):
    """show, save, --root, --version, --help: the tool's functions from a shell."""

    def setUp(self):
        self.ws = Workspace(self)

    def save(self, arguments: dict | None = None, *flags: str) -> subprocess.CompletedProcess:
        proc = self.ws.run_cli("save", *flags, stdin=json.dumps(arguments or sample_save()))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return proc

    def test_show_prints_the_brief(self):
        self.save()
        proc = self.ws.run_cli("show")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertTrue(proc.stdout.decode().startswith("# Resuming: project"), proc.stdout)
        self.assertIn("[~] Session cookie persistence", proc.stdout.decode())

    def test_show_full_prints_json_with_found_drift_and_checkpoint(self):
        self.save()
        self.ws.write("src/app.py", "print('changed')\n")
        proc = self.ws.run_cli("show", "--full")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        doc = json.loads(proc.stdout)
        self.assertIs(doc["found"], True)
        self.assertEqual(doc["checkpoint"], self.ws.checkpoint())
        self.assertIn("src/app.py", doc["drift"]["changedSince"])

    def test_show_full_is_valid_utf8_json_when_a_file_name_is_not_utf8(self):
        self.save()
        with open(os.path.join(os.fsencode(self.ws.repo), b"caf\xe9.txt"), "wb") as stream:
            stream.write(b"latin-1 name")
        proc = self.ws.run_cli("show", "--full")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        doc = json.loads(proc.stdout.decode("utf-8"))
        self.assertIn("caf\udce9.txt", json.dumps(doc["drift"], ensure_ascii=False))

    def test_show_exits_3_when_there_is_no_checkpoint(self):
        for flags in ((), ("--full",)):
            with self.subTest(flags=flags):
                proc = self.ws.run_cli("show", *flags)
                self.assertEqual(proc.returncode, 3, proc.stderr)
                self.assertNotIn(b"Traceback", proc.stderr)
        self.assertIs(json.loads(self.ws.run_cli("show", "--full").stdout)["found"], False)

    def test_save_reads_the_tool_arguments_from_stdin(self):
        proc = self.save()
        self.assertIn(f"Checkpoint saved to {self.ws.repo}/.claude-checkpoint", proc.stdout.decode())
        checkpoint = self.ws.checkpoint()
        self.assertEqual(checkpoint["goal"]["primary"], sample_save()["goal"])
        self.assertEqual(len(checkpoint["goal"]["tasks"]), 3)
        self.assertNotIn("gh_live_8f2a91", json.dumps(checkpoint))

    def test_save_refuses_bad_arguments_and_writes_nothing(self):
        cases = {
            "goal": {"summary": "no goal"},
            "summary": sample_save(summary="x" * 4001),
            "status": sample_save(tasks=[{"description": "a", "status": "finished"}]),
            "nextSteps": sample_save(nextSteps=["step"] * 21),
            "exitCode": sample_save(recentCommands=[{"command": "ls", "exitCode": "zero"}]),
            "mode": sample_save(mode="append"),
            "bogusField": sample_save(tasks=[{"description": "a", "bogusField": 1}]),  # unknown inside: refused
        }
        for field_name, arguments in cases.items():
            with self.subTest(field=field_name):
                proc = self.ws.run_cli("save", stdin=json.dumps(arguments))
                self.assertNotEqual(proc.returncode, 0)
                self.assertIn(field_name, proc.stderr.decode() + proc.stdout.decode())
                self.assertNotIn(b"Traceback", proc.stderr)
                self.assertFalse(os.path.exists(os.path.join(self.ws.repo, ".claude-checkpoint")))
        with self.subTest("not JSON"):
            proc = self.ws.run_cli("save", stdin="{goal: oops")
            self.assertNotEqual(proc.returncode, 0)
            self.assertFalse(os.path.exists(os.path.join(self.ws.repo, ".claude-checkpoint")))
        with self.subTest("unknown top-level argument: saved, and named"):
            proc = self.ws.run_cli("save", stdin=json.dumps(sample_save(bogusField=1)))
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertIn("Ignored unknown argument bogusField", proc.stdout.decode())

    def test_errors_and_answers_never_echo_a_secret_of_the_environment(self):
        secret = "Tr0ub4dor-and-three-horses"
        env = dict(self.ws.env, DB_PASSWORD=secret)
        for name, args, stdin in (("bad mode", ("save",), json.dumps({"goal": "g", "mode": secret})),
                                  ("path outside", ("save",), json.dumps({"goal": "g", "modifiedFiles": [
                                      {"path": f"/elsewhere/{secret}"}]})),
                                  ("hook", ("hook", "pre-compact"), json.dumps({"transcript_path": f"/x/{secret}"}))):
            with self.subTest(name):
                proc = self.ws.run_cli(*args, stdin=stdin, env=env)
                self.assertNotIn(secret.encode(), proc.stdout + proc.stderr)
                self.assertIn("«redacted»", (proc.stdout + proc.stderr).decode())

    def test_save_takes_flags_and_merges(self):
        self.save()
        proc = self.ws.run_cli("save", "--goal", "Ship OAuth", "--summary", "Cookie fixed", "--next", "Open a PR",
                               "--next", "Ask for review", "--decision", "Keep sameSite lax", "--merge")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        checkpoint = self.ws.checkpoint()
        self.assertEqual(checkpoint["goal"]["primary"], "Ship OAuth")
        self.assertEqual(len(checkpoint["goal"]["tasks"]), 3, "merge keeps the tasks")
        self.assertEqual(checkpoint["summary"], "Cookie fixed")
        self.assertEqual(checkpoint["nextSteps"], ["Open a PR", "Ask for review"])
        self.assertEqual(checkpoint["decisions"], ["Use iron-session, not express-session", "Keep sameSite lax"])
        self.assertEqual(self.ws.run_cli("save", "--goal", "Fresh start").returncode, 0)
        self.assertEqual(self.ws.checkpoint()["goal"]["tasks"], [], "without --merge it replaces")

    def test_save_takes_tasks_and_merges_without_a_goal(self):
        self.save()
        proc = self.ws.run_cli("save", "--merge", "--task", "done: Session cookie persistence", "--task", "Write the docs",
                               "--task", "blocked:Deploy", "--summary", "Docs next")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        checkpoint = self.ws.checkpoint()
        self.assertEqual(checkpoint["goal"]["primary"], sample_save()["goal"], "--merge keeps the goal")
        tasks = {t["description"]: t["status"] for t in checkpoint["goal"]["tasks"]}
        self.assertEqual(tasks["Session cookie persistence"], "done")
        self.assertEqual(tasks["Write the docs"], "pending")
        self.assertEqual(tasks["Deploy"], "blocked")
        self.assertEqual(checkpoint["summary"], "Docs next")
        fresh = Workspace(self)
        proc = fresh.run_cli("save", "--merge", "--summary", "nothing to merge into")
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("--goal", proc.stderr.decode())
        self.assertFalse(os.path.exists(os.path.join(fresh.repo, CHECKPOINT)))

    def test_flags_with_json_on_stdin_are_merged_into_it_the_flags_winning(self):
        arguments = sample_save(summary="from the JSON")
        proc = subprocess.run([*PROGRAM, "save", "--summary", "from the flag", "--next", "flag step"],
                              input=json.dumps(arguments).encode(), cwd=self.ws.repo, env=self.ws.env,
                              capture_output=True, timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        checkpoint = self.ws.checkpoint()
        self.assertEqual(checkpoint["goal"]["primary"], arguments["goal"], "the JSON's goal")
        self.assertEqual(len(checkpoint["goal"]["tasks"]), 3, "the JSON's tasks")
        self.assertEqual(checkpoint["summary"], "from the flag")
        self.assertEqual(checkpoint["nextSteps"], ["flag step"])
        self.assertIn(b"--summary, --next replaced the same field of the JSON on stdin", proc.stderr)
        with self.subTest("flags and an open stdin that never sends anything: no wait"):
            holder = subprocess.Popen([*PROGRAM, "save", "--goal", "stdin held open"], cwd=self.ws.repo, env=self.ws.env,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                status = holder.wait(timeout=TIMEOUT)  # stdin stays open and silent, as a parent may hold it
            finally:
                if holder.poll() is None:
                    holder.kill()
                holder.communicate()
            self.assertEqual(status, 0)
            self.assertEqual(self.ws.checkpoint()["goal"]["primary"], "stdin held open")

    def test_show_and_save_print_json_with_json(self):
        proc = self.ws.run_cli("save", "--goal", "as JSON", "--json")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        saved = json.loads(proc.stdout)
        self.assertEqual(saved["path"], os.path.join(self.ws.repo, CHECKPOINT))
        self.assertEqual(saved["mode"], "replace")
        shown = json.loads(self.ws.run_cli("show", "--json").stdout)
        self.assertIs(shown["found"], True)
        self.assertEqual(shown["checkpoint"], self.ws.checkpoint())

    def test_messages_for_people_speak_of_commands_not_of_mcp(self):
        proc = self.ws.run_cli("show")
        self.assertEqual(proc.returncode, 3)
        out = proc.stdout.decode() + proc.stderr.decode()
        self.assertNotIn("save_session_checkpoint", out)
        self.assertIn(" save --goal", out)
        proc = self.ws.run_cli("show", cwd=self.ws.home)
        self.assertEqual(proc.returncode, 1)
        self.assertNotIn("projectRoot", proc.stderr.decode())
        self.assertIn("--root", proc.stderr.decode())

    def test_root_option_works_with_every_subcommand(self):
        elsewhere = temp_dir(self, "cc-elsewhere-")
        t = Transcript(self.ws.repo)
        t.bash("make test")
        transcript = t.save(os.path.join(elsewhere, "t.jsonl"))
        steps = (
            ("save", ("save",), json.dumps(sample_save()), 0),
            ("show", ("show",), "", 0),
            ("show --full", ("show", "--full"), "", 0),
            ("hook pre-compact", ("hook", "pre-compact"), hook_payload("pre-compact", transcript, elsewhere), 0),
            ("hook session-start", ("hook", "session-start"), hook_payload("session-start", transcript, elsewhere), 0),
            ("install --scope project", ("install", "--write", "--scope", "project"), "", 0),
            ("install --exclude", ("install", "--exclude", "--write", "--scope", "project"), "", 0),
            ("doctor", ("doctor",), "", 0),
        )
        for position in ("before", "after"):
            for name, args, stdin, status in steps:
                with self.subTest(name, position=position):
                    argv = ("--root", self.ws.repo, *args) if position == "before" else (*args, "--root", self.ws.repo)
                    proc = self.ws.run_cli(*argv, stdin=stdin, cwd=elsewhere)
                    self.assertEqual(proc.returncode, status, proc.stdout.decode() + proc.stderr.decode())
                    self.assertNotIn(b"Traceback", proc.stderr)
        self.assertEqual(self.ws.checkpoint()["recentCommands"][-1]["command"], "make test")
        self.assertTrue(os.path.exists(os.path.join(self.ws.repo, ".mcp.json")))
        self.assertEqual(os.listdir(elsewhere), ["t.jsonl"])

    def test_from_a_subfolder_the_project_is_found_as_git_finds_it(self):
        src = os.path.join(self.ws.repo, "src")
        outside = temp_dir(self, "cc-plain-")
        os.makedirs(os.path.join(outside, "deeper"))
        with self.subTest("save from src/ writes the top's checkpoint, and one history"):
            proc = self.ws.run_cli("save", "--goal", "from a subfolder", cwd=src)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertEqual(self.ws.checkpoint()["goal"]["primary"], "from a subfolder")
            self.assertFalse(os.path.exists(os.path.join(src, CHECKPOINT)), "no second checkpoint in src/")
            self.assertIn(f"_Checkpoint: {self.ws.repo}/{CHECKPOINT}_", self.ws.run_cli("show", cwd=src).stdout.decode())
            self.assertEqual(len(ok_json(self, self.ws.run_cli("list", "--json", cwd=src))), 1)
            self.assertEqual(ok_json(self, self.ws.run_cli("snapshot", "--json", cwd=src))["reused"], True)
        with self.subTest("a folder holding a checkpoint, below the top, is the nearest project"):
            write(self.ws.repo, "sub/deeper/x.txt", "x\n")
            self.assertEqual(self.ws.run_cli("save", "--root", "sub", "--goal", "sub project").returncode, 0)
            proc = self.ws.run_cli("show", cwd=os.path.join(self.ws.repo, "sub", "deeper"))
            self.assertIn("sub project", proc.stdout.decode())
            self.assertEqual(self.ws.checkpoint()["goal"]["primary"], "from a subfolder")
        with self.subTest("outside any repository: the current folder"):
            proc = self.ws.run_cli("save", "--goal", "plain folder", cwd=os.path.join(outside, "deeper"))
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertTrue(os.path.exists(os.path.join(outside, "deeper", CHECKPOINT)))
        with self.subTest("an environment variable still names the root"):
            env = dict(self.ws.env, CHECKPOINT_PROJECT_ROOT=outside)
            proc = self.ws.run_cli("save", "--goal", "named by the environment", cwd=src, env=env)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertTrue(os.path.exists(os.path.join(outside, CHECKPOINT)))

    def test_output_into_a_closed_pipe_ends_quietly_as_git_does(self):
        self.save()
        self.ws.write("src/app.py", "print('changed')\n")
        self.assertEqual(self.ws.run_cli("snapshot").returncode, 0)
        self.ws.write("src/app.py", "print('changed again')\n")
        for args in (("show",), ("show", "--full"), ("list",), ("diff",), ("restore",), ("install",), ("doctor",),
                     ("--help",)):
            with self.subTest(args=args):
                reader, writer = os.pipe()
                os.close(reader)  # `| head` that has already left, or `| true`
                try:
                    proc = subprocess.run([*PROGRAM, *args], cwd=self.ws.repo, env=self.ws.env, stdout=writer,
                                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=TIMEOUT)
                finally:
                    os.close(writer)
                self.assertEqual(proc.stderr, b"", "no traceback, no 'Exception ignored'")
                self.assertIn(proc.returncode, (0, 1, 3, 128 + 13), "what the command would say, or git's SIGPIPE status")

    def test_version_prints_the_module_version(self):
        proc = self.ws.run_cli("--version")
        self.assertEqual(proc.returncode, 0)
        self.assertIn(cc.__version__, proc.stdout.decode() + proc.stderr.decode())

    def test_help_exits_zero_and_lists_the_commands(self):
        proc = self.ws.run_cli("--help")
        self.assertEqual(proc.returncode, 0)
        for command in ("show", "save", "hook", "install", "doctor"):
            self.assertIn(command, proc.stdout.decode())

    def test_unknown_command_is_a_usage_error(self):
        proc = self.ws.run_cli("frobnicate")
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(proc.stdout, b"")
        self.assertNotIn(b"Traceback", proc.stderr)


# ════════════════════════════════════════════════════════════════════════════
# 17. Interoperability with the official MCP Python SDK client (PyPI `mcp`)
# ════════════════════════════════════════════════════════════════════════════
# The SDK needs Python >= 3.10, so its client runs in an interpreter that has it:
# $CHECKPOINT_SDK_PYTHON, else .ci/.venv-sdk (made by .ci/run); without one these skip.
# Each scenario (auto / legacy negotiation, with / without a roots callback) runs the client
# script below once against a fresh repository; it prints a JSON report the test reads.

SDK_CLIENT_TIMEOUT = 60  # seconds for one client run, all steps included

SDK_CLIENT_SCRIPT = r'''
import asyncio, json, os, sys, time, traceback, warnings
warnings.simplefilter("ignore")
cfg = json.loads(sys.argv[1])
report = {"steps": {}, "errors": {}}

def out():
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()

try:
    import mcp
    from mcp import Client, StdioServerParameters, types
    from importlib.metadata import version as _v
    report["sdk_version"] = _v("mcp")
except Exception as exc:  # pragma: no cover - reported, not raised
    report["import_error"] = repr(exc)
    out()
    sys.exit(0)

async def list_roots(ctx):
    report["roots_callback_calls"] = report.get("roots_callback_calls", 0) + 1
    return types.ListRootsResult(roots=[types.Root(uri=cfg["root_uri"], name="repo")])

def text_of(blocks):
    return "".join(getattr(b, "text", "") for b in blocks)

async def step(name, coro_fn):
    try:
        report["steps"][name] = await coro_fn()
    except BaseException as exc:  # keep going; report everything
        report["errors"][name] = "%s: %s" % (type(exc).__name__, exc)
        report.setdefault("tracebacks", {})[name] = traceback.format_exc()[-3000:]

async def main():
    params = StdioServerParameters(command=cfg["command"][0], args=cfg["command"][1:], env=cfg["env"],
                                   cwd=cfg["cwd"])
    kw = {"mode": cfg["mode"], "read_timeout_seconds": cfg.get("read_timeout", 15)}
    if cfg["roots"]:
        kw["list_roots_callback"] = list_roots
    t0 = time.monotonic()
    async with Client(params, **kw) as c:
        report["connect_s"] = round(time.monotonic() - t0, 3)
        report["protocol_version"] = c.protocol_version
        si = c.server_info
        report["server_info"] = si.model_dump(mode="json", exclude_none=True) if si is not None else None
        report["instructions_len"] = len(c.instructions or "")

        async def tools():
            r = await c.list_tools()
            return {t.name: {"title": t.title, "has_input_schema": bool(t.input_schema),
                             "input_type": (t.input_schema or {}).get("type"),
                             "has_output_schema": t.output_schema is not None,
                             "annotations": t.annotations.model_dump(mode="json", by_alias=True, exclude_none=True)
                             if t.annotations else None} for t in r.tools}
        await step("tools_list", tools)

        async def save():
            r = await c.call_tool("save_session_checkpoint", {"goal": "sdk interop " + cfg["mode"],
                                                               "nextSteps": ["check the report"]})
            return {"is_error": bool(r.is_error), "text": text_of(r.content)[:2000],
                    "structured": r.structured_content,
                    "file_exists": os.path.exists(cfg["expect_file"]),
                    "cwd_file_exists": os.path.exists(os.path.join(cfg["cwd"], ".claude-checkpoint"))}
        await step("save", save)

        async def load():
            r = await c.call_tool("load_session_checkpoint", {})
            return {"is_error": bool(r.is_error), "text": text_of(r.content)[:3000],
                    "structured": r.structured_content}
        await step("load", load)

        async def prompts():
            r = await c.list_prompts()
            names = [p.name for p in r.prompts]
            got = {}
            if "resume" in names:
                g = await c.get_prompt("resume")
                got["resume_roles"] = [m.role for m in g.messages]
                got["resume_text"] = "".join(getattr(m.content, "text", "") for m in g.messages)[:2000]
            return {"names": names, **got}
        await step("prompts", prompts)

        async def resources():
            r = await c.list_resources()
            res = {"list": {str(x.uri): x.mime_type for x in r.resources}, "read": {}}
            for uri in ("checkpoint://brief", "checkpoint://current"):
                rr = await c.read_resource(uri)
                res["read"][uri] = [{"uri": str(x.uri), "mimeType": x.mime_type,
                                     "text": (getattr(x, "text", None) or "")[:3000]} for x in rr.contents]
            return res
        await step("resources", resources)
    report["elapsed_s"] = round(time.monotonic() - t0, 3)

def leaves(exc):
    subs = getattr(exc, "exceptions", None)
    if not subs:
        return [exc]
    return [leaf for sub in subs for leaf in leaves(sub)]

try:
    asyncio.run(asyncio.wait_for(main(), cfg.get("budget", 40)))
except BaseException as exc:
    report["fatal"] = "; ".join("%s: %s" % (type(e).__name__, e) for e in leaves(exc))
    report["fatal_traceback"] = traceback.format_exc()[-4000:]
out()
'''

def find_sdk_python():
    """Returns (interpreter, reason): interpreter None means skip, with the reason."""
    env_py = os.environ.get("CHECKPOINT_SDK_PYTHON")
    candidates = [env_py] if env_py else [os.path.join(HERE, ".ci", ".venv-sdk", "bin", "python")]
    for py in candidates:
        if not py or not os.path.exists(py):
            continue
        try:
            ok = subprocess.run([py, "-c", "import mcp.client"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60).returncode == 0
        except (OSError, subprocess.SubprocessError):
            ok = False
        if ok:
            return py, None
        return None, "%s cannot import mcp" % py
    return None, ("no interpreter with the MCP SDK: set CHECKPOINT_SDK_PYTHON or let .ci/run create "
                  ".ci/.venv-sdk (needs Python >= 3.10 and `pip install mcp`)")


SDK_PYTHON, SDK_SKIP_REASON = find_sdk_python()




@unittest.skipIf(SDK_PYTHON is None, SDK_SKIP_REASON or "")
@slow
class TestOfficialSdkClient(unittest.TestCase):
    def setUp(self):
        ws = Workspace(self, {"app.py": "print('hi')\n", ".gitignore": ".claude-checkpoint*\n"})
        ws.write("app.py", "print('dirty')\n")
        self.home, self.repo, self.env = ws.home, ws.repo, ws.env
        self.elsewhere = temp_dir(self, "cc-elsewhere-")  # the server's cwd when roots are given

    def run_client(self, mode, roots):
        command = [sys.executable, SERVER]
        cfg = {"command": command, "env": self.env, "mode": mode, "roots": roots,
               "cwd": self.elsewhere if roots else self.repo,
               "root_uri": "file://" + self.repo,
               "expect_file": os.path.join(self.repo, ".claude-checkpoint")}
        proc = subprocess.run([SDK_PYTHON, "-c", SDK_CLIENT_SCRIPT, json.dumps(cfg)], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=SDK_CLIENT_TIMEOUT,
                              env=dict(os.environ, PYTHONWARNINGS="ignore"))
        out = proc.stdout.decode("utf-8", "replace").strip().splitlines()
        self.assertTrue(out, "client script printed nothing; stderr:\n" + proc.stderr.decode("utf-8", "replace")[-3000:])
        report = json.loads(out[-1])
        stderr_tail = proc.stderr.decode("utf-8", "replace")[-2000:]
        self.assertNotIn("import_error", report)
        if "fatal" in report:
            self.fail("SDK client (mode=%s, roots=%s) failed: %s\nsteps done: %s\n--- stderr (client+server) ---\n%s"
                      % (mode, roots, report["fatal"], sorted(report["steps"]), stderr_tail))
        if report["errors"]:
            self.fail("SDK client steps failed:\n" + json.dumps(report["errors"], indent=1)
                      + "\n--- tracebacks (tail) ---\n"
                      + "\n".join(t[-1200:] for t in report.get("tracebacks", {}).values())
                      + "\n--- stderr (client+server) ---\n" + stderr_tail)
        return report

    def check(self, mode, roots):
        r = self.run_client(mode, roots)
        s = r["steps"]
        ctx = "\n" + json.dumps(r, indent=1)[-4000:]
        if mode == "auto":
            self.assertEqual(r["protocol_version"], "2026-07-28", ctx)
            self.assertLess(r["elapsed_s"], 5.0, "auto mode too slow (discover timeout?)" + ctx)
        else:
            self.assertEqual(r["protocol_version"], "2025-11-25", ctx)
        tools = s["tools_list"]
        for name in ("save_session_checkpoint", "load_session_checkpoint"):
            self.assertIn(name, tools, ctx)
            self.assertTrue(tools[name]["has_input_schema"], ctx)
            self.assertEqual(tools[name]["input_type"], "object", ctx)
        self.assertTrue(tools["save_session_checkpoint"]["has_output_schema"], ctx)
        self.assertFalse(tools["load_session_checkpoint"]["has_output_schema"], ctx)
        save = s["save"]
        self.assertFalse(save["is_error"], ctx)
        self.assertTrue(save["file_exists"], "checkpoint not written into the repo" + ctx)
        if roots:  # the root came from the callback, not from the server's cwd
            self.assertFalse(save["cwd_file_exists"], "checkpoint written to the server's cwd" + ctx)
            self.assertGreaterEqual(r.get("roots_callback_calls", 0), 1, ctx)
        self.assertIsInstance(save["structured"], dict, ctx)  # validated against outputSchema by the SDK
        self.assertEqual(os.path.realpath(save["structured"]["path"]),
                         os.path.join(self.repo, ".claude-checkpoint"), ctx)
        self.assertTrue(s["load"]["text"].startswith("# Resuming:"), ctx)
        self.assertIsNone(s["load"]["structured"], ctx)
        self.assertIn("resume", s["prompts"]["names"], ctx)
        self.assertIn("checkpoint", s["prompts"]["names"], ctx)
        self.assertIn("# Resuming:", s["prompts"].get("resume_text", ""), ctx)
        res = s["resources"]
        self.assertIn("checkpoint://brief", res["list"], ctx)
        self.assertIn("checkpoint://current", res["list"], ctx)
        brief = res["read"]["checkpoint://brief"]
        self.assertTrue(brief and brief[0]["text"].startswith("# Resuming:"), ctx)
        current = res["read"]["checkpoint://current"]
        self.assertTrue(current, ctx)
        self.assertIsInstance(json.loads(current[0]["text"]), dict, ctx)  # the checkpoint file, as JSON
        self.assertIn("sdk interop " + mode, current[0]["text"], ctx)

    def test_auto_mode_without_roots(self):
        self.check("auto", roots=False)

    def test_auto_mode_with_roots_callback(self):
        self.check("auto", roots=True)

    def test_legacy_mode_without_roots(self):
        self.check("legacy", roots=False)

    def test_legacy_mode_with_roots_callback(self):
        self.check("legacy", roots=True)


# ════════════════════════════════════════════════════════════════════════════
# 18. Packaging: the wheel's console script (pipx) and uvx
# ════════════════════════════════════════════════════════════════════════════

PACKAGE_FILES = ("claude_checkpoint.py", "pyproject.toml", "README.md", "LICENSE")


def package_source(test: unittest.TestCase) -> str:
    """A copy of what the package is built from, so builds never write into the checkout."""
    source = temp_dir(test, "cc-src-")
    for name in PACKAGE_FILES:
        if not os.path.exists(os.path.join(HERE, name)):
            test.skipTest(f"{name} is not here (copied file alone)")
        shutil.copy(os.path.join(HERE, name), source)
    return source


def handshake_with(test: unittest.TestCase, command: list, cwd: str, env: dict) -> dict:
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, timeout=120, input=json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {}}}).encode() + b"\n")
    test.assertEqual(proc.returncode, 0, proc.stderr.decode())
    return json.loads(proc.stdout.splitlines()[0])


@slow
class TestPackaging(unittest.TestCase):
    def test_the_top_level_holds_only_what_the_design_card_allows(self):
        # SPEC section 1: the four files, pyproject.toml, .ci/, .gitignore and .claude-plugin/; nothing else is tracked there.
        listed = subprocess.run(["git", "-C", HERE, "ls-files"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if listed.returncode != 0 or not listed.stdout:
            self.skipTest("not a git checkout (copied file alone)")
        top = {path.split("/")[0] for path in listed.stdout.splitlines()}
        allowed = {"claude_checkpoint.py", "test_claude_checkpoint.py", "README.md", "LICENSE", "pyproject.toml", ".ci", ".gitignore", ".claude-plugin"}
        self.assertEqual(set(), top - allowed)

    def test_the_wheel_installs_a_console_script_that_serves(self):
        source, out = package_source(self), temp_dir(self, "cc-wheel-")
        build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", out, source],
                               capture_output=True, timeout=300)
        if build.returncode != 0:
            self.skipTest("cannot build a wheel here (pip or setuptools unavailable): "
                          + build.stderr.decode()[-300:])
        wheel = [n for n in os.listdir(out) if n.endswith(".whl")][0]
        self.assertTrue(wheel.startswith(f"claude_checkpoint_mcp-{cc.__version__}-py3-none-any"), wheel)
        venv = os.path.join(out, "venv")
        subprocess.run([sys.executable, "-m", "venv", venv], check=True, timeout=300)
        bin_dir = os.path.join(venv, "bin")
        subprocess.run([os.path.join(bin_dir, "python"), "-m", "pip", "install", "-q", "--no-deps",
                        os.path.join(out, wheel)], check=True, capture_output=True, timeout=300)
        script = os.path.join(bin_dir, "claude-checkpoint-mcp")
        version = subprocess.run([script, "--version"], capture_output=True, timeout=60)
        self.assertIn(cc.__version__, version.stdout.decode())
        ws = Workspace(self)
        reply = handshake_with(self, [script], ws.repo, ws.env)
        self.assertEqual(reply["result"]["serverInfo"]["name"], "claude-checkpoint")

    def test_uvx_runs_the_server_from_the_project_folder(self):
        uvx = os.path.join(HERE, ".ci", ".venv-sdk", "bin", "uvx")
        uvx = uvx if os.path.exists(uvx) else shutil.which("uvx")
        if not uvx:
            self.skipTest("uvx is not installed (.ci/run puts it in .ci/.venv-sdk)")
        source, ws = package_source(self), Workspace(self)
        env = dict(ws.env, UV_CACHE_DIR=os.path.join(ws.home, "uv-cache"), UV_NO_CONFIG="1")
        probe = subprocess.run([uvx, "--from", source, "claude-checkpoint-mcp", "--version"], env=env,
                               capture_output=True, timeout=300)
        if probe.returncode != 0 and b"setuptools" in probe.stderr:
            self.skipTest("uv cannot fetch setuptools here: " + probe.stderr.decode()[-300:])
        self.assertEqual(probe.returncode, 0, probe.stderr.decode())
        self.assertIn(cc.__version__, probe.stdout.decode())
        reply = handshake_with(self, [uvx, "--from", source, "claude-checkpoint-mcp"], ws.repo, env)
        self.assertEqual(reply["result"]["protocolVersion"], "2025-11-25")


# ════════════════════════════════════════════════════════════════════════════
# 19. Claude Code itself (npm @anthropic-ai/claude-code), headless, against a stub model
# ════════════════════════════════════════════════════════════════════════════
# StubModel is a scriptable stand-in for the Messages API on 127.0.0.1: it "plays the model"
# (text or tool_use turns, streamed as SSE), answers compaction requests with a <summary>, and
# records every request, so a test can see what reached the model. No account, no network.

STUB_COMPACT_SUMMARY = "<analysis>Stub analysis.</analysis>\n<summary>Stub summary of the conversation so far.</summary>"


def stub_text(obj):
    """All text anywhere in a request body (system, messages, tool results), joined: for `in` asserts."""
    out = []

    def walk(o):
        if isinstance(o, str):
            out.append(o)
        elif isinstance(o, dict):
            for k, v in o.items():
                if k in ("text", "content", "system") or isinstance(v, (list, dict)):
                    walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(obj)
    return "\n".join(out)


def stub_tool_results(body):
    """[(tool_use_id, text, is_error)] for every tool_result block in a request body's messages."""
    res = []
    for msg in body.get("messages", []) if isinstance(body, dict) else []:
        content = msg.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                c = block.get("content")
                text = c if isinstance(c, str) else stub_text(c)
                res.append((block.get("tool_use_id"), text, bool(block.get("is_error"))))
    return res


def is_compaction_request(body):
    """Claude Code's /compact (and auto-compact) request: the whole conversation plus a final user text
    asking for "an <analysis> block followed by a <summary> block". It still carries `tools`, and may be
    followed by trailing {"role": "system"} nudges. Answering it without a <summary> block makes
    Claude Code ask a second time."""
    msgs = body.get("messages") if isinstance(body, dict) else None
    for msg in reversed(msgs or []):
        if msg.get("role") == "system":
            continue
        if msg.get("role") != "user":
            return False
        text = stub_text(msg.get("content"))
        return "<summary>" in text and ("TEXT ONLY" in text or "summary of the conversation" in text)
    return False


class _StubHTTPServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _LoopbackServer:
    """What every fake model server shares: the script of turns (then `default`), the record of
    requests under a lock, and an HTTP server on 127.0.0.1 (a free port) that `_serve` starts on
    a thread, `stop`, a with-block, and its URL."""
    _httpd = None

    def __init__(self, turns=(), default: str = "Done."):
        self.turns = list(turns)
        self.default = default
        self.requests: list = []
        self.lock = threading.Lock()

    def _serve(self, handler: type) -> None:
        self._httpd = _StubHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()

    def stop(self):
        if self._httpd:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def url(self) -> str:
        return "http://127.0.0.1:%d" % self._httpd.server_address[1]


class StubModel(_LoopbackServer):
    def __init__(self, turns=(), default="Done.", side_reply=None, is_main=None, model="claude-stub-1"):
        super().__init__(turns, default)      # requests: {"path", "method", "headers", "body", "main"}
        self.side_reply = side_reply          # callable(body) -> turn, for non-main requests
        self.is_main = is_main or (lambda body: bool(body.get("tools")) and not is_compaction_request(body))
        self.model = model

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self):
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def _read_body(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                try:
                    return json.loads(raw.decode("utf-8")) if raw else None
                except ValueError:
                    return raw.decode("utf-8", "replace")

            def _send_json(self, obj, status=200):
                data = json.dumps(obj).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("request-id", "req_stub_" + uuid.uuid4().hex[:12])
                self.end_headers()
                self.wfile.write(data)

            def do_HEAD(self):
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self):
                stub._record(self, None, False)
                path = self.path.split("?")[0]
                if path.rstrip("/").endswith("/v1/models"):
                    self._send_json({"data": [{"type": "model", "id": stub.model, "display_name": "Stub",
                                               "created_at": "2026-01-01T00:00:00Z"}],
                                     "has_more": False, "first_id": stub.model, "last_id": stub.model})
                else:
                    self._send_json({})

            def do_POST(self):
                body = self._read_body()
                path = self.path.split("?")[0]
                if path.endswith("/v1/messages/count_tokens"):
                    stub._record(self, body, False)
                    return self._send_json({"input_tokens": max(1, len(json.dumps(body)) // 4)})
                if not path.endswith("/v1/messages"):
                    stub._record(self, body, False)
                    return self._send_json({})
                if not isinstance(body, dict):
                    stub._record(self, body, False)
                    return self._send_json({"type": "error", "error": {"type": "invalid_request_error",
                                                                        "message": "bad json"}}, 400)
                main = bool(stub.is_main(body))
                stub._record(self, body, main)
                turn = stub._next_turn(body, main)
                msg = stub._message(turn, body)
                if body.get("stream"):
                    self._stream(msg)
                else:
                    self._send_json(msg)

            def _stream(self, msg):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.send_header("request-id", "req_stub_" + uuid.uuid4().hex[:12])
                self.end_headers()
                self.close_connection = True

                def ev(name, data):
                    self.wfile.write(("event: %s\ndata: %s\n\n" % (name, json.dumps(data))).encode("utf-8"))

                start = dict(msg, content=[], stop_reason=None, stop_sequence=None,
                             usage=dict(msg["usage"], output_tokens=1))
                ev("message_start", {"type": "message_start", "message": start})
                for i, block in enumerate(msg["content"]):
                    if block["type"] == "text":
                        ev("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "text", "text": ""}})
                        ev("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "text_delta", "text": block["text"]}})
                    elif block["type"] == "tool_use":
                        ev("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": dict(block, input={})})
                        ev("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "input_json_delta",
                                                             "partial_json": json.dumps(block["input"])}})
                    else:
                        ev("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": block})
                    ev("content_block_stop", {"type": "content_block_stop", "index": i})
                ev("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None},
                                     "usage": {"output_tokens": msg["usage"]["output_tokens"]}})
                ev("message_stop", {"type": "message_stop"})
                self.wfile.flush()

        self._serve(Handler)
        return self

    # -- script ----------------------------------------------------------------------------------
    def _record(self, handler, body, main):
        with self.lock:
            self.requests.append({"method": handler.command, "path": handler.path,
                                  "headers": dict(handler.headers.items()), "body": body, "main": main})

    def _next_turn(self, body, main):
        with self.lock:
            if not main:
                if self.side_reply:
                    return self.side_reply(body)
                return STUB_COMPACT_SUMMARY if is_compaction_request(body) else "Stub reply."
            turn = self.turns.pop(0) if self.turns else self.default
        return turn(body) if callable(turn) else turn

    def _message(self, turn, body):
        if isinstance(turn, str):
            content, stop = [{"type": "text", "text": turn}], "end_turn"
        elif "tool_use" in turn:
            tu = turn["tool_use"]
            content = [{"type": "text", "text": turn["text"]}] if turn.get("text") else []
            content.append({"type": "tool_use", "id": tu.get("id") or "toolu_stub_" + uuid.uuid4().hex[:16],
                            "name": tu["name"], "input": tu.get("input", {})})
            stop = "tool_use"
        else:
            content = turn["content"]
            stop = turn.get("stop_reason") or (
                "tool_use" if any(b.get("type") == "tool_use" for b in content) else "end_turn")
        return {"id": "msg_stub_" + uuid.uuid4().hex[:16], "type": "message", "role": "assistant",
                "model": body.get("model") or self.model, "content": content, "stop_reason": stop,
                "stop_sequence": None,
                "usage": {"input_tokens": 100, "output_tokens": 20, "cache_creation_input_tokens": 0,
                          "cache_read_input_tokens": 0}}

    # -- queries ---------------------------------------------------------------------------------
    def main_requests(self):
        with self.lock:
            return [r for r in self.requests if r["main"]]

    def messages_requests(self):
        with self.lock:
            return [r for r in self.requests if isinstance(r["body"], dict) and "messages" in r["body"]]


CC_REPO = HERE
CC_SERVER = SERVER
CC_TIMEOUT = 90          # seconds, per CLI invocation (a normal one takes 0.5-2 s)
CC_ALLOWED = "Write,Edit,Bash,mcp__checkpoint"
_cc_bin_cache = []


def find_claude_bin():
    """(path, version) of a working `claude`, or (None, reason)."""
    if _cc_bin_cache:
        return _cc_bin_cache[0]
    candidates = [os.environ.get("CLAUDE_BIN"), shutil.which("claude"),
                  os.path.join(CC_REPO, ".ci", ".cache", "node_modules", ".bin", "claude")]
    result = (None, "Claude Code CLI not found (set CLAUDE_BIN, put `claude` on PATH, or run "
                    "`npm install --prefix .ci/.cache @anthropic-ai/claude-code`)")
    for c in candidates:
        if not c or not os.path.isfile(c) or not os.access(c, os.X_OK):
            continue
        try:
            p = subprocess.run([c, "--version"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=30, env=_cc_base_env(tempfile.gettempdir()))
        except (OSError, subprocess.TimeoutExpired) as e:
            result = (None, "%s --version failed: %s" % (c, e))
            continue
        if p.returncode == 0 and "Claude Code" in p.stdout:
            result = (c, p.stdout.strip())
            break
        result = (None, "%s --version failed: rc=%s %s" % (c, p.returncode, (p.stderr or p.stdout)[-300:]))
    _cc_bin_cache.append(result)
    return result


def _cc_base_env(home, base_url="http://127.0.0.1:9"):
    """A clean environment: nothing inherited but PATH/locale/TMPDIR, so a developer's own
    ANTHROPIC_* / CLAUDE_* variables never leak in."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")}
    env.update({
        "HOME": home,
        "CLAUDE_CONFIG_DIR": os.path.join(home, ".claude"),   # holds settings.json AND .claude.json
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "dummy-e2e-key",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",       # no telemetry / registry / update calls
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "E2E", "GIT_AUTHOR_EMAIL": "e2e@example.invalid",
        "GIT_COMMITTER_NAME": "E2E", "GIT_COMMITTER_EMAIL": "e2e@example.invalid",
    })
    return env


@slow
class ClaudeCodeE2EBase(unittest.TestCase):
    """Temp HOME + temp git project per test; helpers to run the CLI against a StubModel."""

    def setUp(self):
        claude, info = find_claude_bin()
        if not claude:
            self.skipTest(info)
        if not os.path.isfile(CC_SERVER):
            self.skipTest("no %s" % CC_SERVER)
        self.claude = claude
        self.tmp = tempfile.mkdtemp(prefix="cc-e2e-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.home = os.path.join(self.tmp, "home")
        self.proj = os.path.join(self.tmp, "proj")
        os.makedirs(os.path.join(self.home, ".claude"))
        os.makedirs(self.proj)
        self.proj = os.path.realpath(self.proj)
        self.env = _cc_base_env(self.home)
        self.debug_file = os.path.join(self.tmp, "claude-debug.log")

    # -- helpers ---------------------------------------------------------------------------------
    def git(self, *args):
        return subprocess.run(["git"] + list(args), cwd=self.proj, env=self.env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=30, check=True).stdout

    def init_repo(self):
        self.git("init", "-q")
        self.git("symbolic-ref", "HEAD", "refs/heads/main")
        with open(os.path.join(self.proj, "README.md"), "w") as f:
            f.write("demo project\n")
        self.git("add", "-A")
        self.git("commit", "-qm", "init")

    def write_json(self, path, obj):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(obj, f, indent=2)

    def user_settings(self, obj):
        """The isolated user settings ($CLAUDE_CONFIG_DIR/settings.json): hooks and MCP approvals here
        are honoured in -p mode (project .claude/settings.json and --settings FILE work for hooks too)."""
        self.write_json(os.path.join(self.home, ".claude", "settings.json"), obj)

    def server_cmd(self, *args):
        return " ".join(shlex.quote(a) for a in [sys.executable, CC_SERVER] + list(args))

    def add_project_server(self):
        """.mcp.json in the project + user-level approval (project .mcp.json servers are otherwise
        'Pending approval'; enableAllProjectMcpServers in the PROJECT settings is ignored)."""
        self.write_json(os.path.join(self.proj, ".mcp.json"),
                        {"mcpServers": {"checkpoint": {"command": sys.executable, "args": [CC_SERVER]}}})

    def claude_run(self, args, stub=None, timeout=CC_TIMEOUT, check=True):
        env = dict(self.env)
        if stub is not None:
            env["ANTHROPIC_BASE_URL"] = stub.url
        try:
            p = subprocess.run([self.claude] + list(args), cwd=self.proj, env=env, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            self.fail("claude %s timed out after %ss\n%s" % (" ".join(args), timeout, self.debug_tail()))
        if check and p.returncode != 0:
            self.fail("claude %s -> rc %s\nstdout: %s\nstderr: %s\n%s" % (
                " ".join(args), p.returncode, p.stdout[-2000:], p.stderr[-2000:], self.debug_tail()))
        return p

    def prompt(self, text, stub, *extra, allowed=CC_ALLOWED):
        """claude -p TEXT (json output) -> parsed result dict (has session_id, result, is_error)."""
        p = self.claude_run(["-p", text, "--output-format", "json", "--allowedTools", allowed,
                             "--debug-file", self.debug_file] + list(extra), stub=stub)
        try:
            return json.loads(p.stdout)
        except ValueError:
            self.fail("claude -p output is not JSON: %r\nstderr: %s" % (p.stdout[-2000:], p.stderr[-2000:]))

    def debug_tail(self, pattern=r"MCP|mcp|[Hh]ook|ERROR"):
        try:
            with open(self.debug_file, errors="replace") as f:
                lines = [l for l in f if re.search(pattern, l)]
        except OSError:
            return "(no debug log)"
        return "debug log (filtered, last 40 lines):\n" + "".join(lines[-40:])

    def checkpoint(self):
        with open(os.path.join(self.proj, ".claude-checkpoint"), encoding="utf-8") as f:
            return json.load(f)

    @staticmethod
    def goal_of(cp):
        return cp["goal"]["primary"]

    def stub_dump(self, stub):
        out = []
        for i, r in enumerate(stub.requests):
            b = r["body"] if isinstance(r["body"], dict) else {}
            out.append("#%d %s %s %s last=%s" % (i, r["method"], r["path"], "main" if r["main"] else "side",
                                                 str((b.get("messages") or [{}])[-1])[:300]))
        return "\n".join(out)


class ClaudeCodeMcpListTest(ClaudeCodeE2EBase):
    def assert_connected(self, out, name):
        line = [l for l in out.splitlines() if l.startswith(name + ":")]
        self.assertTrue(line, "server %r not listed:\n%s" % (name, out))
        self.assertIn("Connected", line[0], "server not connected:\n%s\n%s" % (out, self.debug_tail()))

    def test_project_mcp_json_connected(self):
        self.init_repo()
        self.add_project_server()
        p = self.claude_run(["mcp", "list"])
        self.assertIn("Pending approval", p.stdout)          # project servers need the user's approval
        self.user_settings({"enableAllProjectMcpServers": True})
        p = self.claude_run(["mcp", "list"])
        self.assert_connected(p.stdout, "checkpoint")

    def test_user_scope_mcp_add_connected(self):
        self.init_repo()
        self.claude_run(["mcp", "add", "--scope", "user", "checkpoint", "--", sys.executable, CC_SERVER])
        self.assertTrue(os.path.exists(os.path.join(self.home, ".claude", ".claude.json")))
        self.assertFalse(os.path.exists(os.path.join(self.home, ".claude.json")))
        p = self.claude_run(["mcp", "list"])
        self.assert_connected(p.stdout, "checkpoint")


class ClaudeCodeToolCallTest(ClaudeCodeE2EBase):
    def test_model_saves_then_loads_through_claude_code(self):
        self.init_repo()
        self.add_project_server()
        self.user_settings({"enableAllProjectMcpServers": True})
        save_args = {"goal": "Add OAuth login e2e",
                     "tasks": [{"description": "callback route", "status": "done"},
                               {"description": "session cookie", "status": "in_progress"}],
                     "summary": "Callback works; cookie lost after reload.",
                     "nextSteps": ["fix cookie options"]}
        turns = [{"text": "Saving a checkpoint.",
                  "tool_use": {"name": "mcp__checkpoint__save_session_checkpoint", "input": save_args}},
                 {"tool_use": {"name": "mcp__checkpoint__load_session_checkpoint", "input": {}}},
                 "Checkpoint saved and loaded."]
        with StubModel(turns) as stub:
            res = self.prompt("save a checkpoint, then load it", stub)
        dump = self.stub_dump(stub)
        self.assertFalse(res.get("is_error"), res)
        self.assertEqual(res.get("result"), "Checkpoint saved and loaded.", dump)
        self.assertTrue(os.path.isfile(os.path.join(self.proj, ".claude-checkpoint")), dump)
        self.assertEqual(self.goal_of(self.checkpoint()), "Add OAuth login e2e")
        results = stub_tool_results(stub.main_requests()[-1]["body"])
        self.assertEqual(len(results), 2, dump)
        (save_id, save_text, save_err), (load_id, load_text, load_err) = results
        self.assertFalse(save_err, save_text)
        self.assertFalse(load_err, load_text)
        self.assertIn("# Resuming:", load_text)
        self.assertIn("Add OAuth login e2e", load_text)
        # The server's `instructions` reach the system prompt under "# MCP Server Instructions", in the
        # first request that offers the server's tools (by schema, or by name among the deferred tools).
        # On a busy machine Claude Code may ask the model once before the server has answered: then
        # neither its tools nor its instructions are in that request.
        save_tool = "mcp__checkpoint__save_session_checkpoint"
        offering = [r["body"] for r in stub.main_requests()
                    if save_tool in stub_text(r["body"])
                    or any(isinstance(t, dict) and t.get("name") == save_tool for t in r["body"].get("tools", []))]
        self.assertTrue(offering, "no request offered the checkpoint tools\n" + dump)
        first = stub_text(offering[0])
        self.assertTrue("# MCP Server Instructions" in first and "## checkpoint" in first,
                        "server instructions not in the system prompt\n" + dump)


class ClaudeCodeHooksTest(ClaudeCodeE2EBase):
    def test_precompact_hook_records_session_and_brief_reaches_model(self):
        self.init_repo()
        self.user_settings({"hooks": {
            "SessionStart": [{"matcher": "clear|compact|resume",
                              "hooks": [{"type": "command", "command": self.server_cmd("hook", "session-start")}]}],
            "PreCompact": [{"hooks": [{"type": "command", "command": self.server_cmd("hook", "pre-compact")}]}],
        }})
        notes = os.path.join(self.proj, "notes.txt")
        turns = [{"tool_use": {"name": "Write", "input": {"file_path": notes, "content": "hello\n"}}},
                 {"tool_use": {"name": "Bash", "input": {"command": "echo hi", "description": "Say hi"}}},
                 {"tool_use": {"name": "Bash", "input": {"command": "ls does-not-exist-e2e",
                                                         "description": "List a missing file"}}},
                 "Wrote notes.txt and ran two commands."]
        with StubModel(turns) as stub:
            res = self.prompt("Create notes.txt and say hi", stub)
            sid = res["session_id"]
            self.assertFalse(os.path.exists(os.path.join(self.proj, ".claude-checkpoint")),
                             "nothing should have saved yet (no checkpoint tool was called)")
            # fires SessionStart(resume), PreCompact(manual), SessionStart(compact)
            self.prompt("/compact", stub, "--resume", sid)
            self.assertTrue(os.path.isfile(os.path.join(self.proj, ".claude-checkpoint")),
                            "PreCompact hook wrote no checkpoint\n" + self.debug_tail())
            cp = self.checkpoint()
            paths = [f.get("path") for f in cp.get("modifiedFiles") or []]
            self.assertIn("notes.txt", paths, cp)
            cmds = {c.get("command"): c for c in cp.get("recentCommands") or []}
            self.assertIn("echo hi", cmds, cp)
            self.assertIn("ls does-not-exist-e2e", cmds, cp)
            self.assertEqual(cmds["echo hi"]["exitCode"], 0, cp)
            self.assertEqual(cmds["ls does-not-exist-e2e"]["exitCode"], 2, cp)
            self.assertTrue(cmds["echo hi"].get("auto"), cp)
            self.assertIn("Create notes.txt and say hi", self.goal_of(cp), cp)  # first prompt as goal
            n_before = len(stub.requests)
            stub.turns = ["Continuing."]
            res = self.prompt("continue", stub, "--resume", sid)
        self.assertEqual(res.get("result"), "Continuing.")
        later = [stub_text(r["body"]) for r in stub.requests[n_before:] if r["main"]]
        self.assertTrue(later, self.stub_dump(stub))
        self.assertTrue("# Resuming:" in later[-1], "SessionStart hook output (the brief) did not reach the "
                        "model in the request after the compaction:\n" + later[-1][:1500])
        self.assertIn("notes.txt", later[-1].split("# Resuming:", 1)[1][:3000])

    def test_second_compaction_records_nothing_twice(self):
        self.init_repo()
        self.user_settings({"hooks": {
            "PreCompact": [{"hooks": [{"type": "command", "command": self.server_cmd("hook", "pre-compact")}]}],
        }})
        turns = [{"tool_use": {"name": "Bash", "input": {"command": "echo once", "description": "Echo"}}}, "ok"]
        with StubModel(turns) as stub:
            sid = self.prompt("run echo once", stub)["session_id"]
            self.prompt("/compact", stub, "--resume", sid)
            self.prompt("/compact", stub, "--resume", sid)
        cmds = [c.get("command") for c in self.checkpoint().get("recentCommands") or []]
        self.assertEqual(cmds.count("echo once"), 1, cmds)


    def test_stop_hook_snapshots_a_turn_whose_only_change_was_a_bash_command(self):
        """/rewind cannot bring back what Bash wrote; the Stop hook's snapshot can."""
        self.init_repo()
        self.user_settings({"hooks": {
            "Stop": [{"hooks": [{"type": "command", "command": self.server_cmd("hook", "stop")}]}],
        }})
        turns = [{"tool_use": {"name": "Bash", "input": {"command": "echo from-bash > made-by-bash.txt",
                                                         "description": "Write a file"}}},
                 "Wrote it with the shell."]
        with StubModel(turns) as stub:
            self.prompt("Write made-by-bash.txt with the shell", stub)
            commits = self.git("for-each-ref", "--format=%(objectname)", "refs/claude-checkpoint/").split()
            self.assertEqual(len(commits), 1, self.debug_tail())
            self.assertEqual(self.git("cat-file", "blob", f"{commits[0]}:made-by-bash.txt"), "from-bash\n")
            stub.turns = ["Nothing to do."]
            self.prompt("Say nothing", stub)  # a turn that changes nothing makes no second snapshot
        self.assertEqual(self.git("for-each-ref", "--format=%(objectname)", "refs/claude-checkpoint/").split(), commits)


class ClaudeCodeInstallTest(ClaudeCodeE2EBase):
    """`claude_checkpoint.py install --write` (user scope) produces config the real CLI accepts."""

    def install(self, *extra):
        return subprocess.run([sys.executable, CC_SERVER, "install", "--write", "--root", self.proj] + list(extra),
                              cwd=self.proj, env=self.env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=60)

    def test_install_write_user_scope_works_with_claude_code(self):
        self.init_repo()
        p = self.install("--scope", "user")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        p2 = self.install("--scope", "user")                       # idempotent: no duplicates
        self.assertEqual(p2.returncode, 0, p2.stdout + p2.stderr)
        with open(os.path.join(self.home, ".claude", "settings.json")) as f:
            settings = json.load(f)
        commands = [h.get("command", "") for groups in (settings.get("hooks") or {}).values()
                    for g in groups for h in g.get("hooks", [])]
        self.assertEqual(len(commands), len(set(commands)), settings)
        p = self.claude_run(["mcp", "list"])
        line = [l for l in p.stdout.splitlines() if "claude_checkpoint" in l]
        self.assertTrue(line and "Connected" in line[0], p.stdout)
        server = line[0].split(":", 1)[0]
        # the installed hooks record a session on /compact
        turns = [{"tool_use": {"name": "Bash", "input": {"command": "echo installed", "description": "Echo"}}},
                 "ok"]
        with StubModel(turns) as stub:
            sid = self.prompt("run echo installed", stub, allowed="Bash,mcp__" + server)["session_id"]
            self.prompt("/compact", stub, "--resume", sid, allowed="Bash,mcp__" + server)
        self.assertTrue(os.path.isfile(os.path.join(self.proj, ".claude-checkpoint")), self.debug_tail())
        cmds = [c.get("command") for c in self.checkpoint().get("recentCommands") or []]
        self.assertIn("echo installed", cmds)


    def test_the_printed_mcp_add_line_works_as_printed(self):
        self.init_repo()
        p = subprocess.run([sys.executable, CC_SERVER, "install"], cwd=self.proj, env=self.env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        line = next(l for l in p.stdout.splitlines() if l.startswith("claude mcp add"))
        words = shlex.split(line)
        self.claude_run(words[1:])
        p = self.claude_run(["mcp", "list"])
        listed = [l for l in p.stdout.splitlines() if l.startswith("checkpoint:")]
        self.assertTrue(listed and "Connected" in listed[0], p.stdout + self.debug_tail())


class ClaudeCodePluginTest(ClaudeCodeE2EBase):
    def setUp(self):
        super().setUp()
        self.manifest = os.path.join(CC_REPO, ".claude-plugin", "plugin.json")
        if not os.path.isfile(self.manifest):
            self.skipTest("no .claude-plugin/plugin.json yet")

    def test_validate_strict(self):
        for target in (CC_REPO, os.path.join(CC_REPO, ".claude-plugin", "plugin.json")):
            p = self.claude_run(["plugin", "validate", "--strict", target], check=False)
            self.assertEqual(p.returncode, 0, "validate --strict %s failed:\n%s\n%s" % (target, p.stdout, p.stderr))
            self.assertIn("Validation passed", p.stdout)

    def test_install_from_local_marketplace(self):
        # Install from a copy holding only what the plugin needs (the repo root may hold .git and
        # .ci/.cache with the 350 MB CLI; a directory marketplace is copied into plugins/cache on install).
        src = os.path.join(self.tmp, "market")
        shutil.copytree(os.path.join(CC_REPO, ".claude-plugin"), os.path.join(src, ".claude-plugin"))
        for name in ("claude_checkpoint.py", "README.md", "LICENSE"):
            if os.path.exists(os.path.join(CC_REPO, name)):
                shutil.copy(os.path.join(CC_REPO, name), src)
        with open(os.path.join(src, ".claude-plugin", "plugin.json")) as f:
            manifest = json.load(f)
        servers = manifest.get("mcpServers")
        self.assertIsInstance(servers, dict, "plugin.json should declare mcpServers inline")
        server = sorted(servers)[0]
        self.init_repo()
        self.claude_run(["plugin", "marketplace", "add", src])
        self.claude_run(["plugin", "install", "session-checkpoint@claude-checkpoint"])
        p = self.claude_run(["plugin", "list"])
        self.assertIn("session-checkpoint@claude-checkpoint", p.stdout)
        p = self.claude_run(["mcp", "list"])
        line = [l for l in p.stdout.splitlines() if l.startswith("plugin:session-checkpoint:%s:" % server)]
        self.assertTrue(line and "Connected" in line[0], p.stdout + self.debug_tail())
        # Through a plugin the tools are mcp__plugin_<plugin>_<server>__<tool>.
        prefix = "mcp__plugin_session-checkpoint_%s__" % server
        turns = [{"tool_use": {"name": prefix + "save_session_checkpoint", "input": {"goal": "Plugin goal e2e"}}},
                 {"tool_use": {"name": prefix + "load_session_checkpoint", "input": {}}}, "done"]
        with StubModel(turns) as stub:
            self.prompt("save and load", stub, allowed=prefix.rstrip("_"))
        self.assertTrue(prefix + "save_session_checkpoint" in stub_text(stub.main_requests()[0]["body"]),
                        "plugin tool not announced to the model")
        results = stub_tool_results(stub.main_requests()[-1]["body"])
        self.assertEqual(len(results), 2, self.stub_dump(stub))
        self.assertIn("# Resuming:", results[1][1])
        self.assertEqual(self.goal_of(self.checkpoint()), "Plugin goal e2e")


# ── 19.1 The other agents: Codex, Gemini CLI and Qwen Code, headless, against fake models (SPEC section 12) ──
# Each fake plays the model for one wire API on 127.0.0.1 (a free port; the test starts and stops
# it): a script of turns, each either {"shell": COMMAND} (a call of the agent's own shell tool) or
# a final text, and a record of every request, so a test sees what reached the model. Qwen Code
# speaks Anthropic's Messages API: StubModel above serves it. Seen with Codex 0.169.0, Gemini CLI
# 0.61.0 and Qwen Code 0.24.4 (.ci/run installs exactly those into .ci/.cache).

class FakeModelServer(_LoopbackServer):
    """What the fakes share: a handler that reads the JSON body (their requests: {"path", "body"})."""

    def start(self):
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                fake._handle(self, None)

            def do_POST(self):
                size = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(size) if size else b""
                try:
                    body = json.loads(raw.decode("utf-8")) if raw else None
                except ValueError:
                    body = None
                fake._handle(self, body)

        self._serve(Handler)
        return self

    def _handle(self, handler, body) -> None:
        with self.lock:
            self.requests.append({"path": handler.path, "body": body})
        self.answer(handler, handler.path.split("?")[0], body)

    def answer(self, handler, path: str, body) -> None:
        raise NotImplementedError

    def next_turn(self):
        with self.lock:
            return self.turns.pop(0) if self.turns else self.default

    def text_of(self, marker: str) -> list:
        """The JSON text of every request whose path contains `marker`: for `in` asserts."""
        with self.lock:
            return [json.dumps(r["body"]) for r in self.requests if marker in r["path"]]

    @staticmethod
    def send_json(handler, obj) -> None:
        data = json.dumps(obj).encode("utf-8")
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    @staticmethod
    def send_events(handler, events: list) -> None:
        """Server-sent events, then the connection closes: [(event name or None, data)]."""
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.close_connection = True
        for name, data in events:
            head = f"event: {name}\n" if name else ""
            handler.wfile.write(f"{head}data: {json.dumps(data)}\n\n".encode("utf-8"))
        handler.wfile.flush()


class FakeResponsesModel(FakeModelServer):
    """OpenAI's Responses API as Codex uses it (`wire_api = "responses"`): POST {base}/responses
    streams response.created, response.output_item.added/done (a `function_call` of Codex's
    exec_command with {"cmd"}, or an assistant `message`), response.completed with usage."""

    def answer(self, handler, path: str, body) -> None:
        if handler.command != "POST" or not path.endswith("/responses"):
            return self.send_json(handler, {"data": [], "models": []})
        turn, suffix = self.next_turn(), uuid.uuid4().hex[:12]
        if isinstance(turn, str):
            item = {"type": "message", "id": "msg_" + suffix, "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": turn, "annotations": []}]}
        else:
            item = {"type": "function_call", "id": "fc_" + suffix, "call_id": "call_" + suffix,
                    "name": "exec_command", "arguments": json.dumps({"cmd": turn["shell"]})}
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
        self.send_events(handler, [
            ("response.created", {"type": "response.created", "response": {"id": "resp_" + suffix}}),
            ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item}),
            ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
            ("response.completed", {"type": "response.completed", "response": {"id": "resp_" + suffix, "usage": usage}})])


class FakeGeminiModel(FakeModelServer):
    """Gemini's API as Gemini CLI uses it (GOOGLE_GEMINI_BASE_URL): the turns come from
    POST /v1beta/models/M:streamGenerateContent?alt=sse (a functionCall of run_shell_command
    with {"command"}, or text); its side questions (routing, who speaks next) from
    :generateContent, answered with one JSON object that satisfies each."""

    SIDE_ANSWER = {"reasoning": "stub", "next_speaker": "user", "complexity_reasoning": "stub",
                   "complexity_score": 1, "model_choice": "flash"}

    def answer(self, handler, path: str, body) -> None:
        usage = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}
        if path.endswith(":countTokens"):
            return self.send_json(handler, {"totalTokens": 10})
        if path.endswith(":generateContent"):
            part = {"text": json.dumps(self.SIDE_ANSWER)}
            return self.send_json(handler, {"candidates": [{"content": {"role": "model", "parts": [part]},
                                                            "finishReason": "STOP", "index": 0}], "usageMetadata": usage})
        if not path.endswith(":streamGenerateContent"):
            return self.send_json(handler, {})
        turn = self.next_turn()
        part = {"text": turn} if isinstance(turn, str) else \
            {"functionCall": {"name": "run_shell_command", "args": {"command": turn["shell"]}}}
        self.send_events(handler, [(None, {"candidates": [{"content": {"role": "model", "parts": [part]},
                                                           "finishReason": "STOP", "index": 0}],
                                           "usageMetadata": usage, "modelVersion": "gemini-stub"})])


AGENT_CLIS = {  # name -> (environment variable naming the binary, what `--version` prints)
    "codex": ("CODEX_BIN", "codex-cli"),
    "gemini": ("GEMINI_BIN", ""),
    "qwen": ("QWEN_BIN", ""),
}
_agent_cli_cache: dict = {}


def find_agent_cli(name: str) -> tuple:
    """(path, version) of a working agent CLI, or (None, the reason it is missing)."""
    if name not in _agent_cli_cache:
        variable, banner = AGENT_CLIS[name]
        candidates = [os.environ.get(variable), os.path.join(CC_REPO, ".ci", ".cache", "node_modules", ".bin", name),
                      shutil.which(name)]
        found = (None, f"{name} not found (set {variable}, run .ci/run, or put `{name}` on PATH)")
        for candidate in candidates:
            if not candidate or not os.access(candidate, os.X_OK):
                continue
            try:
                with tempfile.TemporaryDirectory(prefix="cc-ver-") as home:  # it may write its folders there
                    proc = subprocess.run([candidate, "--version"], stdin=subprocess.DEVNULL, capture_output=True,
                                          text=True, timeout=60, env=_cc_base_env(home))
            except (OSError, subprocess.TimeoutExpired) as error:
                found = (None, f"{candidate} --version failed: {error}")
                continue
            if proc.returncode == 0 and banner in proc.stdout:
                found = (candidate, proc.stdout.strip().splitlines()[-1])
                break
            found = (None, f"{candidate} --version: rc={proc.returncode} {(proc.stderr or proc.stdout)[-300:]}")
        _agent_cli_cache[name] = found
    return _agent_cli_cache[name]


class AgentHandoffTest(ClaudeCodeE2EBase):
    """SPEC section 12's test that matters: one task, two agents. Claude Code saves and edits; the
    other agent starts in the same project and its SessionStart hook hands it the brief (saved
    by Claude Code); it runs a shell command that changes a file; its Stop hook records the
    command and snapshots the change; Claude Code resumes and its brief shows the command and the
    file; `restore` undoes the other agent's change."""

    CLAUDE_APP = "def login():\n    return 'claude'\n"
    OTHER_LINE = "# edited by the other agent"

    def agent(self, name: str) -> str:
        path, info = find_agent_cli(name)
        if not path:
            self.skipTest(info)
        return path

    def install(self, client: str, env: dict, *extra: str) -> None:
        """`install --client NAME --write`, as a user runs it once (user scope)."""
        proc = subprocess.run(PROGRAM + ["install", "--client", client, "--write", *extra], cwd=self.proj, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)

    # ── Claude Code's half ──
    def claude_saves_and_edits(self) -> str:
        """Claude Code, with its hooks, saves a checkpoint and writes app.py; returns its session id."""
        self.init_repo()
        self.install("claude", self.env)
        app = os.path.join(self.proj, "app.py")
        turns = [{"tool_use": {"name": "mcp__checkpoint__save_session_checkpoint", "input": {
                     "goal": "Ship the login page", "nextSteps": ["Make login() check the password"]}}},
                 {"tool_use": {"name": "Write", "input": {"file_path": app, "content": self.CLAUDE_APP}}},
                 "Saved, and wrote app.py."]
        with StubModel(turns) as stub:
            session = self.prompt("Start the login page", stub)["session_id"]
        self.assertEqual(self.goal_of(self.checkpoint()), "Ship the login page", self.stub_dump(stub))
        self.assertEqual(self.checkpoint()["agent"]["name"], "claude")
        return session

    def claude_resumes(self, session: str) -> str:
        """Claude Code resumes its session; returns the text of what reached its model."""
        with StubModel(["Resuming."]) as stub:
            self.prompt("Go on", stub, "--resume", session)
        return "\n".join(stub_text(r["body"]) for r in stub.main_requests())

    def check_recorded(self, other: str, command: str, before: list) -> None:
        """After the other agent's turn: its command and file are in the checkpoint, its change in one new snapshot."""
        checkpoint = self.checkpoint()
        self.assertEqual(checkpoint["agent"]["name"], other)
        self.assertEqual(self.goal_of(checkpoint), "Ship the login page")  # the model's words stay
        ran = {c["command"]: c for c in checkpoint["recentCommands"]}
        self.assertEqual(ran[command].get("exitCode"), 0, checkpoint["recentCommands"])
        self.assertIn("app.py", [f["path"] for f in checkpoint["modifiedFiles"]])
        after = self.snapshot_ids()
        self.assertEqual(len(after), len(before) + 1, "one snapshot for the other agent's turn")
        self.assertIn(self.OTHER_LINE, self.git("cat-file", "blob", after[0] + ":app.py"))

    def restore_undoes(self, snapshot: str) -> None:
        proc = subprocess.run(PROGRAM + ["restore", snapshot, "--yes"], cwd=self.proj, env=self.env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        with open(os.path.join(self.proj, "app.py")) as stream:
            self.assertEqual(stream.read(), self.CLAUDE_APP)

    def snapshot_ids(self) -> list:
        proc = subprocess.run(PROGRAM + ["list", "--json"], cwd=self.proj, env=self.env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return [s["commit"] for s in json.loads(proc.stdout)]

    def run_agent(self, argv: list, env: dict) -> subprocess.CompletedProcess:
        try:
            proc = subprocess.run(argv, cwd=self.proj, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, timeout=CC_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.fail(f"{argv[0]} timed out after {CC_TIMEOUT} s")
        self.assertEqual(proc.returncode, 0, proc.stdout[-3000:] + proc.stderr[-3000:])
        return proc

    def handoff(self, other: str, run_turn) -> None:
        """The whole story; run_turn(command) runs the other agent's turn and returns what reached its model."""
        session = self.claude_saves_and_edits()
        before = self.snapshot_ids()
        command = f"printf '%s\\n' '{self.OTHER_LINE}' >> app.py"
        seen_by_model = run_turn(command)
        self.assertIn("# Resuming:", seen_by_model, "the SessionStart hook's brief did not reach the model")
        self.assertIn("saved by Claude Code", seen_by_model)
        self.assertIn("Ship the login page", seen_by_model)
        self.check_recorded(other, command, before)
        brief = self.claude_resumes(session).split("# Resuming:", 1)[-1]
        self.assertIn("saved by " + cc.AGENTS[other].title, brief)
        self.assertIn(command, brief)
        self.assertIn("app.py", brief)
        self.restore_undoes(before[0])

    # ── Codex ──
    def codex_setup(self, codex: str, fake: FakeModelServer) -> dict:
        codex_home = os.path.join(self.home, ".codex")
        os.makedirs(codex_home, exist_ok=True)
        with open(os.path.join(codex_home, "config.toml"), "w") as stream:  # the user's own: the model
            stream.write(textwrap.dedent(f"""\
                model = "gpt-6.1-sol"
                model_provider = "fake"
                [model_providers.fake]
                name = "fake"
                base_url = "{fake.url}/v1"
                env_key = "CHECKPOINT_FAKE_KEY"
                wire_api = "responses"
                """))
        env = dict(self.env, CODEX_HOME=codex_home, CHECKPOINT_FAKE_KEY="dummy-e2e-key")
        self.install("codex", env, "--trust")  # Codex runs only hooks the user trusted
        return env

    def test_claude_code_to_codex_and_back(self):
        codex = self.agent("codex")
        with FakeResponsesModel() as fake:
            env = self.codex_setup(codex, fake)

            def codex_turn(command: str) -> str:
                fake.turns = [{"shell": command}, "Appended the line."]
                self.run_agent([codex, "exec", "--skip-git-repo-check", "-s", "danger-full-access",
                                "Go on with the task"], env)
                return "\n".join(fake.text_of("/responses"))

            self.handoff("codex", codex_turn)

    # ── Gemini CLI ──
    def gemini_env(self, fake: FakeModelServer) -> dict:
        self.write_json(os.path.join(self.home, ".gemini", "settings.json"),  # the user's own: the API key's auth
                        {"security": {"auth": {"selectedType": "gemini-api-key"}}})
        env = dict(self.env, GEMINI_API_KEY="dummy-e2e-key", GOOGLE_GEMINI_BASE_URL=fake.url,
                   GEMINI_CLI_TRUST_WORKSPACE="true")
        self.install("gemini", env)
        return env

    def test_claude_code_to_gemini_cli_and_back(self):
        gemini = self.agent("gemini")
        with FakeGeminiModel() as fake:
            env = self.gemini_env(fake)

            def gemini_turn(command: str) -> str:
                fake.turns = [{"shell": command}, "Appended the line."]
                self.run_agent([gemini, "-p", "Go on with the task", "--yolo"], env)
                return "\n".join(fake.text_of(":streamGenerateContent"))

            self.handoff("gemini", gemini_turn)

    # ── Qwen Code ──
    def test_claude_code_to_qwen_code_and_back(self):
        qwen = self.agent("qwen")
        self.install("qwen", self.env)

        def qwen_turn(command: str) -> str:
            turns = [{"tool_use": {"name": "run_shell_command", "input": {"command": command}}}, "Appended the line."]
            with StubModel(turns) as stub:
                self.run_agent([qwen, "-p", "Go on with the task", "--auth-type", "anthropic", "--model",
                                "claude-stub-1", "--yolo"], dict(self.env, ANTHROPIC_BASE_URL=stub.url))
            return "\n".join(stub_text(r["body"]) for r in stub.main_requests())

        self.handoff("qwen", qwen_turn)


# ════════════════════════════════════════════════════════════════════════════
# 20. The MCP Inspector CLI (npm @modelcontextprotocol/inspector)
# ════════════════════════════════════════════════════════════════════════════

def find_inspector() -> str | None:
    for candidate in (os.environ.get("MCP_INSPECTOR_BIN"),
                      os.path.join(HERE, ".ci", ".cache", "node_modules", ".bin", "mcp-inspector"),
                      shutil.which("mcp-inspector")):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


@slow
class TestMcpInspectorCli(unittest.TestCase):
    def setUp(self):
        self.inspector = find_inspector()
        if not self.inspector:
            self.skipTest("MCP Inspector CLI not installed (.ci/run puts it in .ci/.cache)")
        self.ws = Workspace(self)

    def inspect(self, *args: str) -> dict:
        proc = subprocess.run([self.inspector, "--cli", sys.executable, SERVER, *args], cwd=self.ws.repo,
                              env=self.ws.env, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr.decode()[-2000:])
        return json.loads(proc.stdout)

    def test_lists_and_calls_everything(self):
        tools = self.inspect("--method", "tools/list")["tools"]
        self.assertEqual({t["name"] for t in tools}, {"save_session_checkpoint", "load_session_checkpoint"})
        saved = self.inspect("--method", "tools/call", "--tool-name", "save_session_checkpoint",
                             "--tool-arg", "goal=Inspect the server", "--tool-arg", "mode=merge")
        self.assertFalse(saved["isError"], saved)
        self.assertEqual(saved["structuredContent"]["mode"], "merge")
        self.assertEqual(self.ws.checkpoint()["goal"]["primary"], "Inspect the server")
        loaded = self.inspect("--method", "tools/call", "--tool-name", "load_session_checkpoint")
        self.assertTrue(loaded["content"][0]["text"].startswith("# Resuming: project"), loaded)
        prompt = self.inspect("--method", "prompts/get", "--prompt-name", "resume")
        self.assertIn("Inspect the server", prompt["messages"][0]["content"]["text"])
        current = self.inspect("--method", "resources/read", "--uri", "checkpoint://current")
        self.assertEqual(json.loads(current["contents"][0]["text"])["goal"]["primary"], "Inspect the server")

    def test_bad_arguments_come_back_as_a_tool_error(self):
        proc = subprocess.run([self.inspector, "--cli", sys.executable, SERVER, "--method", "tools/call",
                               "--tool-name", "save_session_checkpoint", "--tool-arg", "goal=x",
                               "--tool-arg", "mode=sideways"], cwd=self.ws.repo, env=self.ws.env,
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
        if proc.returncode == 0:  # older CLIs print the result; newer ones exit non-zero on isError
            result = json.loads(proc.stdout)
            self.assertTrue(result["isError"])
            self.assertIn("mode", result["content"][0]["text"])
        else:
            self.assertIn("isError", proc.stderr.decode())
        self.assertFalse(os.path.exists(os.path.join(self.ws.repo, ".claude-checkpoint")))


# ════════════════════════════════════════════════════════════════════════════
# 21. Benchmark (python3 test_claude_checkpoint.py --bench): figures against floors
# ════════════════════════════════════════════════════════════════════════════

BENCH_FLOORS = {  # the issue's budgets; None: reported for comparison, no floor
    "startup ratio, plugin command (initialize reply / python -c pass)": 3.0,
    "peak memory, plugin command, save + load (MB)": 16,
    "peak memory, plugin command, 50 MB dirty file (MB)": 18,
    "startup ratio, plain file (initialize reply / python -c pass)": None,
    "peak memory, plain file, save + load (MB)": None,
    "peak memory, plain file, 50 MB dirty file (MB)": None,
    "hook stop after every turn, nothing new, plugin command (ms)": None,
    "hook stop after every turn, nothing new, plain file (ms)": None,
    "save ratio, nothing changed since the last snapshot, one command (vs save floor)": 1.15,
    "save ratio, nothing changed, over a running server (vs save floor)": 1.15,
    "save ratio, new snapshot, over a running server (vs save floor)": 1.5,
    "load ratio, over a running server (vs load floor)": 1.2,
    "restore one file, 50k-file repo (s)": 0.5,
    "disk per snapshot of a one-file change (KB)": 64,
    "redaction, worst 100 KB adversarial (s)": 1.0,
    # A save's redaction: 50 ms for a full save of what a session writes (issue 14); the save made
    # only of corpus cases (a secret every 220 characters, ten times a real session's) guards
    # the rules' cost against regressions.
    "redaction, a full 64 KB save of a real session's text (ms)": 50,
    "redaction, a 64 KB save made only of the corpora's secrets and near-misses (ms)": 100,
    "first redaction in a new process (ms)": None,
    "first redaction in a new process, the 64 KB save (ms)": None,
    "find_secret, 1 MB of text without a secret (ms)": None,
    "hook pre-compact, 50 MB transcript (s)": 1.0,
    "hook session-start, 50k-file repo (s)": 1.0,
    **{f"hook on a quiet turn, {client} {event} (ms)": 60 for client, event in (
        ("claude", "stop"), ("codex", "stop"), ("gemini", "stop"), ("gemini", "pre-compact"), ("qwen", "stop"),
        ("copilot", "stop"))},
    "push ratio, session with its snapshot (vs git push of the same commit)": None,
    "push ratio, after one more edit (vs git push of the same commit)": None,
    "pull ratio (vs git fetch of the same session)": None,
}


def plugin_server_command() -> list:
    """What users run: the server command of .claude-plugin/plugin.json, for this Python."""
    with open(os.path.join(HERE, ".claude-plugin", "plugin.json"), encoding="utf-8") as stream:
        entry = json.load(stream)["mcpServers"]["checkpoint"]
    return [sys.executable] + [arg.replace("${CLAUDE_PLUGIN_ROOT}", HERE) for arg in entry["args"]]


def bench_commands() -> dict:
    return {"plugin command": plugin_server_command(), "plain file": [sys.executable, SERVER]}


def bench_env(env: dict) -> dict:
    """As users run it: bytecode is cached (beside the file, in __pycache__)."""
    return {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}


class BenchServer:
    """A server subprocess for the benchmark: no unittest machinery."""

    def __init__(self, cwd: str, env: dict, command: list | None = None):
        self.proc = subprocess.Popen(command or [sys.executable, SERVER], cwd=cwd, env=bench_env(env),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.next_id = 0

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                                          "params": params}).encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            reply = json.loads(self.proc.stdout.readline())
            if reply.get("id") == self.next_id:
                return reply

    def initialize(self) -> dict:
        return self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                           "clientInfo": {"name": "bench", "version": "1"}})

    def peak_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as stream:
            for line in stream:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def _median(values: list) -> float:
    values = sorted(values)
    return values[len(values) // 2]


def _samples(function, repeat: int, clock=time.perf_counter, before=None) -> list:
    """How long each of repeat calls of function took, by clock (before, untimed, ahead of each)."""
    samples = []
    for _ in range(repeat):
        if before is not None:
            before()
        started = clock()
        function()
        samples.append(clock() - started)
    return samples


def _timed(function, repeat: int) -> float:
    return _median(_samples(function, repeat))


def bench_startup(env: dict, cwd: str) -> dict:
    def bare() -> None:
        subprocess.run([sys.executable, "-c", "pass"], env=bench_env(env), check=True)

    def handshake(command: list) -> None:
        server = BenchServer(cwd, env, command)
        server.initialize()
        server.close()

    figures = {}
    bare()  # warm the page cache
    base = _timed(bare, 21)
    print(f"  python -c pass {base * 1000:.1f} ms")
    for label, command in bench_commands().items():
        handshake(command)  # the warm-up: writes the bytecode cache of the plugin command
        ours = _timed(lambda: handshake(command), 21)
        print(f"  {label}: initialize reply {ours * 1000:.1f} ms  ({shlex.join(command)})")
        figures[f"startup ratio, {label} (initialize reply / python -c pass)"] = ours / base
    return figures


def bench_memory(ws: Workspace) -> dict:
    figures = {}
    for size, big in (("save + load", False), ("50 MB dirty file", True)):
        if big:
            with open(os.path.join(ws.repo, "big.bin"), "wb") as stream:
                for _ in range(50):
                    stream.write(os.urandom(1 << 20))
        for label, command in bench_commands().items():
            server = BenchServer(ws.repo, ws.env, command)
            server.initialize()
            server.request("tools/call", {"name": "save_session_checkpoint", "arguments": sample_save()})
            server.request("tools/call", {"name": "load_session_checkpoint", "arguments": {}})
            figures[f"peak memory, {label}, {size} (MB)"] = server.peak_mb()
            server.close()
    return figures


def bench_stop_hook(ws: Workspace) -> dict:
    """The hook Claude Code runs after every turn, on a turn that did nothing: start-up is all."""
    transcript = os.path.join(ws.home, "quiet.jsonl")
    with open(transcript, "w") as stream:
        stream.write(json.dumps({"type": "user", "message": {"role": "user", "content": "Hello"}}) + "\n")
    payload = json.dumps({"session_id": "bench", "transcript_path": transcript, "cwd": ws.repo,
                          "hook_event_name": "Stop"}).encode()
    figures = {}
    for label, command in bench_commands().items():
        def hook() -> None:
            subprocess.run([*command, "hook", "stop"], input=payload, env=bench_env(ws.env), cwd=ws.repo,
                           capture_output=True, check=True)
        hook()
        figures[f"hook stop after every turn, nothing new, {label} (ms)"] = _timed(hook, 11) * 1000
    return figures


def bench_agent_hooks(ws: Workspace) -> dict:
    """Every agent's recording hook (the plugin command) after a turn that did nothing new: its
    transcript holds an earlier turn, already recorded and snapshotted, and a new prompt. Gemini
    CLI also runs pre-compact before every model request (SPEC section 12)."""
    figures = {}
    builders = dict(AGENT_TRANSCRIPTS, claude=None)
    for client, event in (("claude", "stop"), ("codex", "stop"), ("gemini", "stop"), ("gemini", "pre-compact"),
                          ("qwen", "stop"), ("copilot", "stop")):
        if builders[client]:
            transcript = builders[client](ws.repo)
            transcript.turn("Bench the hooks")
        else:
            transcript = Transcript(ws.repo)
            transcript.prompt("Bench the hooks")
            transcript.bash("echo bench")
        path = transcript.save(os.path.join(ws.home, f"{client}-{event}.jsonl"))
        payload = agent_payload(client, event, ws.repo, path).encode()
        command = [*plugin_server_command(), "hook", event, "--client", client]

        def hook() -> None:
            subprocess.run(command, input=payload, env=bench_env(ws.env), cwd=ws.repo, capture_output=True, check=True)
        hook()  # records the earlier turn and snapshots it
        transcript.prompt("And now?")  # a turn of text only
        transcript.save(path)
        figures[f"hook on a quiet turn, {client} {event} (ms)"] = _timed(hook, 11) * 1000
    return figures


def make_large_repo(home: str, files: int = 50_000, dirty: int = 1_000) -> Workspace:
    class Bare(Workspace):
        def __init__(self):  # no unittest: keep the folder until the bench ends
            self.home = home
            self.repo = os.path.join(home, "project")
            os.makedirs(self.repo)
            self.env = isolated_env(home)
    ws = Bare()
    ws.git("init", "-q", "-b", "main")
    ws.git("config", "gc.auto", "0")  # no packing of 50,000 new objects in the background while the bench measures
    for i in range(files):
        write(ws.repo, f"pkg{i // 500:03d}/mod{i:05d}.py", f"value = {i}\n" * 20)
    ws.git("add", "-A")
    ws.git("commit", "-qm", "many files")
    for i in range(0, files, files // dirty):
        write(ws.repo, f"pkg{i // 500:03d}/mod{i:05d}.py", f"value = {i}  # edited\n" * 20)
    ws.git("status", "--porcelain=v2", "-z", "-uall")  # settle the index's racy entries
    return ws


LARGE_REPEAT = 9  # samples of each figure on the large repository; the median is taken


def bench_large_repo(ws: Workspace) -> dict:
    """Save and load against their floors (SPEC section 10, cost), every sample of a figure
    taken beside a sample of its floor, so that a noisy machine slows both alike. The save
    floor: one git status and every dirty file hashed; the load floor: reading the checkpoint,
    one git status and hashing the files it records. One command: a save through main(), in
    this process (what `save` or a hook does, less the interpreter's start)."""
    status = ["git", "-c", "core.fsmonitor=false", "status", "--porcelain=v2", "-z", "-uall", "--branch"]

    def save_floor() -> None:
        out = subprocess.run(status, cwd=ws.repo, env=ws.env, capture_output=True, check=True).stdout
        for path in cc.parse_status(out).dirty_paths:
            cc.hash_worktree_file(ws.repo, path)

    def load_floor() -> None:
        recorded = cc.read_checkpoint(ws.repo).checkpoint.modified_files
        subprocess.run(status, cwd=ws.repo, env=ws.env, capture_output=True, check=True)
        for entry in recorded:
            cc.hash_worktree_file(ws.repo, entry.path)

    server = BenchServer(ws.repo, ws.env)
    server.initialize()
    arguments = {"goal": "bench", "recentCommands": [{"command": "make", "exitCode": 0}]}
    edits = iter(range(10 ** 6))

    def save() -> None:
        server.request("tools/call", {"name": "save_session_checkpoint", "arguments": arguments})

    def save_after_an_edit() -> None:
        write(ws.repo, "pkg000/mod00000.py", f"value = {next(edits)}  # edited again\n")
        time.sleep(0.15)  # past the racy window, as a real edit is
        started = time.perf_counter()
        save()
        samples["new snapshot"].append(time.perf_counter() - started)

    def one_command() -> None:
        run_in_process(["save", "--goal", "bench"], env=ws.env, cwd=ws.repo)

    def load() -> None:
        server.request("tools/call", {"name": "load_session_checkpoint", "arguments": {}})

    save()  # warm: the first snapshot
    samples: dict = {name: [] for name in ("save floor", "new snapshot", "one command", "server save", "load floor",
                                           "server load")}
    for _ in range(LARGE_REPEAT):
        samples["save floor"].append(_timed(save_floor, 1))
        save_after_an_edit()
    save()  # the newest snapshot now stands for the tree
    time.sleep(0.15)  # and the files it read have settled
    for _ in range(LARGE_REPEAT):
        for name, function in (("save floor", save_floor), ("one command", one_command), ("server save", save),
                               ("load floor", load_floor), ("server load", load)):
            samples[name].append(_timed(function, 1))
    server.close()
    ms = {name: _median(values) for name, values in samples.items()}
    restore = bench_restore_one_file(ws)
    disk = bench_snapshot_disk(ws)
    print("  medians of " + ", ".join(f"{name} {value * 1000:.0f} ms" for name, value in ms.items())
          + f", restore one file {restore * 1000:.0f} ms, {disk:.1f} KB per snapshot")
    return {"save ratio, nothing changed since the last snapshot, one command (vs save floor)":
            ms["one command"] / ms["save floor"],
            "save ratio, nothing changed, over a running server (vs save floor)": ms["server save"] / ms["save floor"],
            "save ratio, new snapshot, over a running server (vs save floor)": ms["new snapshot"] / ms["save floor"],
            "load ratio, over a running server (vs load floor)": ms["server load"] / ms["load floor"],
            "restore one file, 50k-file repo (s)": restore,
            "disk per snapshot of a one-file change (KB)": disk}


def bench_restore_one_file(ws: Workspace) -> float:
    """The whole command, as a person runs it: restore one file from the newest snapshot."""
    write(ws.repo, "pkg001/mod00500.py", "damaged\n")
    command = [*PROGRAM, "restore", "latest", "pkg001/mod00500.py", "--yes"]
    started = time.perf_counter()
    subprocess.run(command, cwd=ws.repo, env=ws.env, capture_output=True, check=True)
    return time.perf_counter() - started


def bench_snapshot_disk(ws: Workspace, count: int = 100) -> float:
    """What one snapshot of a one-file change adds to .git, in KB (loose objects and refs)."""
    def git_kb() -> float:
        total = 0
        for folder, _, files in os.walk(os.path.join(ws.repo, ".git")):
            total += sum(os.path.getsize(os.path.join(folder, f)) for f in files if not f.startswith("index"))
        return total / 1024
    env = {**ws.env, "CHECKPOINT_SNAPSHOTS_KEEP": str(count + 10)}
    before = git_kb()
    for i in range(count):
        write(ws.repo, "pkg002/mod01000.py", f"value = {i}  # disk bench\n")
        subprocess.run([*PROGRAM, "snapshot"], cwd=ws.repo, env=env, capture_output=True, check=True)
    return (git_kb() - before) / count


def bench_sessions(ws: Workspace) -> dict:
    """push and pull (SPEC section 13) on the 50,000-file repository, each against the one git command
    that moves the same objects, measured in the same run: `git push` of the session's commit to a
    twin of the remote, `git fetch` of it into a twin of the clone. Each is one transfer, so one sample."""
    remotes = {name: os.path.join(ws.home, f"{name}.git") for name in ("ours", "twin")}
    for remote in remotes.values():
        git(ws.home, "init", "-q", "--bare", remote, env=ws.env)
        ws.git("push", "-q", remote, "main")

    def run(command: list, cwd: str) -> tuple:
        started = time.perf_counter()
        out = subprocess.run(command, cwd=cwd, env=ws.env, capture_output=True, check=True).stdout
        return time.perf_counter() - started, out

    def push_once(edit: int) -> tuple:
        write(ws.repo, "pkg003/mod01500.py", f"value = {edit}  # pushed\n")
        time.sleep(0.15)
        run([*PROGRAM, "snapshot"], ws.repo)  # the session's snapshot exists
        ours, out = run([*PROGRAM, "push", "--json", remotes["ours"]], ws.repo)
        commit = json.loads(out)["commit"]
        theirs, _ = run(["git", "push", "-q", "--no-verify", remotes["twin"], f"{commit}:refs/bench/s{edit}"], ws.repo)
        return ours, theirs, commit

    ws.run_cli("save", "--goal", "bench the sessions")
    first, first_git, commit = push_once(1)
    again, again_git, _ = push_once(2)
    clones = {name: os.path.join(ws.home, f"clone-{name}") for name in remotes}
    for name, folder in clones.items():
        git(ws.home, "clone", "-q", remotes[name], folder, env=ws.env)
    pulled, _ = run([*PROGRAM, "pull", "--json", remotes["ours"]], clones["ours"])
    fetched, _ = run(["git", "fetch", "-q", "--no-tags", remotes["twin"], "refs/bench/*:refs/bench/*"], clones["twin"])
    print(f"  push {first * 1000:.0f} ms vs git push {first_git * 1000:.0f} ms; after one more edit {again * 1000:.0f} ms "
          f"vs {again_git * 1000:.0f} ms; pull {pulled * 1000:.0f} ms vs git fetch {fetched * 1000:.0f} ms")
    return {"push ratio, session with its snapshot (vs git push of the same commit)": first / first_git,
            "push ratio, after one more edit (vs git push of the same commit)": again / again_git,
            "pull ratio (vs git fetch of the same session)": pulled / fetched}


def bench_hooks(ws: Workspace, scratch: str) -> dict:
    transcript = os.path.join(scratch, "transcript.jsonl")
    filler = json.dumps({"type": "attachment", "attachment": {"content": "x" * 4000}}) + "\n"
    with open(transcript, "w") as stream:
        stream.write(json.dumps({"type": "user", "message": {"role": "user", "content": "Bench the hooks"}}) + "\n")
        for i in range(12_000):
            stream.write(filler)
            if i % 100 == 0:
                call = f"toolu_{i}"
                stream.write(json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [
                    {"type": "tool_use", "id": call, "name": "Bash", "input": {"command": f"echo {i}"}}]}}) + "\n")
                stream.write(json.dumps({"type": "user", "message": {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": call, "content": "x" * 2000}]}}) + "\n")
    payload = json.dumps({"session_id": "bench", "transcript_path": transcript, "cwd": ws.repo,
                          "hook_event_name": "PreCompact", "trigger": "manual"})
    env = dict(ws.env, CLAUDE_PROJECT_DIR=ws.repo)

    def hook(event: str) -> None:
        subprocess.run([sys.executable, SERVER, "hook", event], input=payload.encode(), env=env, cwd=ws.repo,
                       capture_output=True, check=True)

    size_mb = os.path.getsize(transcript) / 2 ** 20
    compact = _timed(lambda: (os.path.exists(os.path.join(ws.repo, ".claude-checkpoint"))
                              and os.remove(os.path.join(ws.repo, ".claude-checkpoint")), hook("pre-compact")), 3)
    start = _timed(lambda: hook("session-start"), 3)
    print(f"  transcript {size_mb:.0f} MB")
    return {"hook pre-compact, 50 MB transcript (s)": compact, "hook session-start, 50k-file repo (s)": start}


# The blind corpora the rules are not yet tuned to 0.99 on (the newest, and those of directions far
# from the rest), held to issue 14's bar for text the rules were not written on (recall 0.97,
# keep-rate 0.98); the others, tuned on, to 0.99 and 0.98. A corpus moves to the others once the
# rules reach 0.99 on it.
NEWEST_CORPORA = tuple(f"blind{n}_corpus.json" for n in (38, 40, 42, 43, 45, 47, 49, 51, 53, 58, 59, 61, 62, 67, 70, 74, 75, 76, 80))
# The corpora the rules do not yet reach issue 14's bar on (written with a harder brief at stops 24 to 26:
# agent sessions, network gear and telecom, CI/CD, what people paste, operations, near-misses in every
# context, data science, mobile and embedded, enterprise IT; at stop 27 a web agency, fintech, a game
# studio, an MSP's helpdesk; at stop 34 a mobile game studio's backend and a clinic chain's IT; at stop 35 a smart-home hardware startup; at stop 36 a university's IT and a crypto trading desk; at stop 37 a post-production studio and an agritech platform; at stop 38 a pharmaceutical company's clinical-trial IT and a shipping line's fleet IT; at stop 39 a law firm's e-discovery IT and a property-management platform; at stop 40 a contact center and a car dealership group's IT; at stop 41 a university course's staff and students and a film post-production studio; 0.85 to 0.95 unseen; at stops 44 and 45, corpora focused on two families, split values and prose or credential tables and key material, 0.68 to 0.87 unseen, and a transit authority's IT; at stop 50 a freight forwarder's prose and split values and a ticketing company's key material and tables, 0.77 and 0.81 unseen, an indie game studio and an architecture firm; at stop 53 an online marketplace in Turkey, Ukraine and Greece and a fintech's key material, tables and signed URLs; at stop 54 a regional airline in Portugal, Morocco and Vietnam and an agricultural cooperative's split values, prose, tables and code in Ethiopia, Peru and the Netherlands), held at the (recall,
# keep-rate) the rules reach now, so that nothing slides back while they are tuned toward the bar.
BELOW_THE_BAR = {"blind55_corpus.json": (0.97, 0.99), "blind56_corpus.json": (0.96, 0.99),
                 "blind57_corpus.json": (0.98, 0.99), "blind60_corpus.json": (0.96, 0.99),
                 "blind63_corpus.json": (0.97, 0.98), "blind66_corpus.json": (0.97, 0.97),
                 "blind69_corpus.json": (0.96, 0.99), "blind71_corpus.json": (0.97, 0.99),
                 "blind72_corpus.json": (0.97, 0.99), "blind73_corpus.json": (0.97, 0.99),
                 "blind79_corpus.json": (0.97, 0.99), "blind81_corpus.json": (0.97, 0.99),
                 "blind82_corpus.json": (0.97, 0.99), "blind85_corpus.json": (0.97, 0.99),
                 "blind87_corpus.json": (0.98, 0.99), "blind88_corpus.json": (0.96, 0.98),
                 "blind100_corpus.json": (0.97, 0.99), "blind103_corpus.json": (0.97, 0.99),
                 "blind101_corpus.json": (0.92, 0.98), "blind106_corpus.json": (0.98, 0.99),
                 "blind108_corpus.json": (0.98, 0.99), "blind113_corpus.json": (0.97, 0.99),
                 "blind115_corpus.json": (0.97, 0.99), "blind117_corpus.json": (0.95, 0.99),
                 "blind120_corpus.json": (0.95, 0.99), "blind122_corpus.json": (0.96, 0.98),
                 "blind124_corpus.json": (0.97, 0.99), "blind126_corpus.json": (0.96, 0.99),
                 "blind128_corpus.json": (0.98, 0.99), "blind130_corpus.json": (0.95, 0.99),
                 "blind132_corpus.json": (0.97, 0.99), "blind134_corpus.json": (0.98, 0.99),
                 "blind137_corpus.json": (0.96, 0.98), "blind138_corpus.json": (0.98, 0.99),
                 "blind141_corpus.json": (0.98, 0.99), "blind144_corpus.json": (0.97, 0.99),
                 "blind146_corpus.json": (0.97, 0.99), "blind148_corpus.json": (0.97, 0.99),
                 "blind151_corpus.json": (0.97, 0.99), "blind152_corpus.json": (0.89, 0.97),
                 "blind153_corpus.json": (0.77, 0.99), "blind154_corpus.json": (0.93, 0.99),
                 "blind156_corpus.json": (0.72, 0.99), "blind157_corpus.json": (0.89, 0.97),
                 "blind158_corpus.json": (0.98, 0.99), "blind160_corpus.json": (0.70, 0.99),
                 "blind162_corpus.json": (0.98, 0.99), "blind163_corpus.json": (0.90, 0.99),
                 "blind165_corpus.json": (0.95, 0.98), "blind166_corpus.json": (0.96, 0.99),
                 "blind168_corpus.json": (0.99, 0.99), "blind169_corpus.json": (0.94, 0.99), "blind170_corpus.json": (0.84, 0.98),
                 "blind174_corpus.json": (0.87, 0.99), "blind175_corpus.json": (0.97, 0.99),
                 "blind176_corpus.json": (0.82, 0.99), "blind177_corpus.json": (0.98, 0.99),
                 "blind179_corpus.json": (0.98, 0.99), "blind180_corpus.json": (0.97, 0.99), "blind181_corpus.json": (0.90, 0.99),
                 "blind183_corpus.json": (0.93, 0.99), "blind185_corpus.json": (0.96, 0.99), "blind186_corpus.json": (0.99, 0.99),
                 "blind187_corpus.json": (0.99, 0.99), "blind189_corpus.json": (0.98, 0.99), "blind190_corpus.json": (0.99, 0.99),
                 "blind191_corpus.json": (0.96, 0.99), "blind193_corpus.json": (0.97, 0.99),
                 "blind197_corpus.json": (0.98, 0.99), "blind199_corpus.json": (0.98, 0.99), "blind200_corpus.json": (0.95, 0.99),
                 "blind203_corpus.json": (0.97, 0.99), "blind206_corpus.json": (0.98, 0.99), "blind207_corpus.json": (0.98, 0.99),
                 "blind209_corpus.json": (0.97, 0.99), "blind211_corpus.json": (0.98, 0.99), "blind212_corpus.json": (0.98, 0.99),
                 "blind213_corpus.json": (0.98, 0.99), "blind215_corpus.json": (0.87, 0.99), "blind217_corpus.json": (0.91, 0.99),
                 "blind218_corpus.json": (0.97, 0.99), "blind219_corpus.json": (0.94, 0.99), "blind220_corpus.json": (0.97, 0.99),
                 "blind221_corpus.json": (0.88, 0.99), "blind222_corpus.json": (0.90, 0.99), "blind224_corpus.json": (0.96, 0.99),
                 "blind225_corpus.json": (0.88, 0.99), "blind226_corpus.json": (0.84, 0.99), "blind227_corpus.json": (0.96, 0.99)}


def corpus_texts() -> list:
    """Every text of the corpora, secrets and benign ones interleaved: session text, dense in secrets."""
    texts = []
    for name in sorted(os.listdir(CORPUS_DIR)) if os.path.isdir(CORPUS_DIR) else []:
        corpus = redaction_corpus(name) if name.endswith("_corpus.json") else None
        for secret, benign in zip(corpus["secrets"], corpus["benign"]) if corpus else ():
            texts += [secret["text"], benign["text"]]
    return texts


def transcript_texts() -> list:
    """The strings of the real Claude Code transcript (REAL_TRANSCRIPT): session text as it comes,
    prompts, tool calls and their output, far less dense in secrets than the corpora."""
    def strings(value: object) -> list:
        if isinstance(value, str):
            return [value]
        items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        return [text for item in items for text in strings(item)]
    if not os.path.exists(REAL_TRANSCRIPT):
        return []
    with open(REAL_TRANSCRIPT, encoding="utf-8") as stream:
        return [text for line in stream for text in strings(json.loads(line)) if len(text) > 20]


def full_save_checkpoint(texts: list) -> cc.Checkpoint:
    """A checkpoint whose every field is full of session text: about 64 KB written, the cap."""
    pieces = iter(texts * 4)

    def take(length: int) -> str:
        text = ""
        while len(text) < length:
            text += next(pieces) + "\n"
        return text[:length]
    return make_checkpoint(
        goal=take(300), tasks=[cc.Task(take(200)) for _ in range(30)], summary=take(2000),
        next_steps=[take(150) for _ in range(20)], decisions=[take(150) for _ in range(20)],
        modified_files=[cc.FileEntry(f"src/m{i}.py", "M", cc.FileSource.GIT, note=take(130)) for i in range(100)],
        recent_commands=[cc.Command(take(450), 0, note=take(100)) for _ in range(50)])


def _cpu_timed(function, repeat: int) -> float:
    """The least CPU time of repeat calls: the machine may be shared, and wall time is noisy there.
    Each call starts with no verdict remembered (forget_verdicts), as one save in a new process does."""
    return min(_samples(function, repeat, time.process_time, before=forget_verdicts))


def forget_verdicts() -> None:
    """Clear what redaction's judges remember (_remembered): a repeat of the same texts would
    otherwise find their verdicts ready and time less than one save costs."""
    for judge in vars(cc).values():
        if callable(judge) and isinstance(getattr(judge, "verdicts", None), dict):
            judge.verdicts.clear()


def bench_first_redaction(statement: str, setup: str = "") -> float:
    """The CPU time of statement, the first redaction of a new process (the rules it needs are
    compiled then), the least of several processes: what a hook or a command line run pays."""
    script = (f"import sys, time; sys.path.insert(0, {HERE!r}); import claude_checkpoint as cc\n{setup}\n"
              f"started = time.process_time(); {statement}; print(time.process_time() - started)")
    samples = [float(subprocess.run([sys.executable, "-c", script], env=bench_env(dict(os.environ)), capture_output=True,
                                    check=True).stdout) for _ in range(7)]
    return 1000 * min(samples)


def bench_redaction() -> dict:
    cc._compiled_rules()  # compile every rule outside the timing
    worst = 0.0
    for text in ADVERSARIAL_INPUTS:
        worst = max(worst, _cpu_timed(lambda: cc.redact(text), 2))
    texts = corpus_texts()
    figures = {"redaction, worst 100 KB adversarial (s)": worst}
    figures["first redaction in a new process (ms)"] = bench_first_redaction('cc.redact("git status")')
    if texts:
        checkpoint = full_save_checkpoint(texts)
        size = len(json.dumps(checkpoint.to_json()).encode())
        session = full_save_checkpoint(transcript_texts() or texts)
        figures["redaction, a full 64 KB save of a real session's text (ms)"] = 1000 * _cpu_timed(
            lambda: cc.Redactor().checkpoint(session), 7)
        figures["redaction, a 64 KB save made only of the corpora's secrets and near-misses (ms)"] = 1000 * _cpu_timed(
            lambda: cc.Redactor().checkpoint(checkpoint), 7)
        figures["first redaction in a new process, the 64 KB save (ms)"] = bench_first_redaction(
            "cc.Redactor().checkpoint(checkpoint)",
            "import test_claude_checkpoint as t; checkpoint = t.full_save_checkpoint(t.corpus_texts())")
        benign = [c["text"] for name in sorted(os.listdir(CORPUS_DIR)) if name.endswith("_corpus.json")
                  for c in redaction_corpus(name)["benign"]]
        clean = [text for text in benign if cc.find_secret(text) is None]  # a text it flags would end the scan
        large = "\n$ true\n".join(clean * 40)[:2 ** 20]  # a prompt between texts: no context spans two
        figures["find_secret, 1 MB of text without a secret (ms)"] = 1000 * _cpu_timed(lambda: cc.find_secret(large), 3)
        print(f"  the save: {size // 1024} KB of JSON; times are CPU, the least of several runs")
    return figures  # (recall and keep-rate per corpus: --redaction, which the tests' gate reads too)


def run_redaction_report(paths: list = (), figures_only: bool = False) -> int:
    """python3 test_claude_checkpoint.py --redaction [--figures-only] [CORPUS.json …]: recall and
    keep-rate on every corpus of .ci/corpus (or on the files given: .ci/heldout's, measured before
    anyone reads what they miss), with the cases each one misses unless figures_only."""
    found = False
    names = list(paths) or corpus_names()
    for name in names:
        if paths:
            with open(name, encoding="utf-8") as stream:
                corpus = json.load(stream)
        else:
            corpus = redaction_corpus(name)
        if not corpus:
            continue
        found = True
        recall, keep, missed, mangled = measure_corpus(corpus)
        print(f"{name}: recall {recall:.4f} ({len(corpus['secrets']) - len(missed)}/{len(corpus['secrets'])}), "
              f"keep-rate {keep:.4f} ({len(corpus['benign']) - len(mangled)}/{len(corpus['benign'])})")
        for case in () if figures_only else missed:
            print(f"  missed  [{case['family']}] {case['text'][:120]!r}")
        for case in () if figures_only else mangled:
            print(f"  changed [{case['family']}] {case['text'][:120]!r} -> {cc.redact(case['text'])[0][:120]!r}")
    if not found:
        print(f"no corpus in {CORPUS_DIR}")
    return 0 if found else 1


def run_bench(quick: bool = False) -> int:
    """The figures against their floors; with quick, start-up, memory and the hooks after a quiet turn only."""
    scratch = tempfile.mkdtemp(prefix="cc-bench-")
    try:
        print(f"Benchmark on {sys.executable} ({sys.version.split()[0]})")
        figures = {}
        small = Workspace.__new__(Workspace)
        home = os.path.join(scratch, "small")
        os.makedirs(os.path.join(home, "project"))
        small.home, small.repo, small.env = home, os.path.join(home, "project"), isolated_env(home)
        small.git("init", "-q", "-b", "main")
        write(small.repo, "src/app.py", "print('hi')\n")
        small.git("add", "-A")
        small.git("commit", "-qm", "init")
        figures.update(bench_startup(small.env, small.repo))
        figures.update(bench_memory(small))
        figures.update(bench_stop_hook(small))
        figures.update(bench_agent_hooks(small))
        if not quick:
            figures.update(bench_redaction())
            print("  building a repository of 50,000 files (1,000 dirty)…")
            large = make_large_repo(os.path.join(scratch, "large"))
            figures.update(bench_large_repo(large))
            figures.update(bench_hooks(large, scratch))
            figures.update(bench_sessions(large))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    over = 0
    width = max(map(len, figures), default=0)
    print(f"\n{'measure':{width}s} {'value':>9s} {'floor':>7s}")
    for name, value in figures.items():
        floor = BENCH_FLOORS[name]
        if floor is None:
            print(f"{name:{width}s} {value:9.3f} {'-':>7s}")
            continue
        ok = value <= floor
        over += not ok
        print(f"{name:{width}s} {value:9.3f} {floor:7.2f}  {'ok' if ok else 'OVER'}")
    return 1 if over else 0


# ════════════════════════════════════════════════════════════════════════════
# 22. Runner: ends with "N passed, M failed"
# ════════════════════════════════════════════════════════════════════════════

def _is_slow(test: unittest.TestCase) -> bool:
    method = getattr(test, test._testMethodName, None)
    return getattr(type(test), "slow", False) or getattr(method, "slow", False)


def _is_on_every_core(test: unittest.TestCase) -> bool:
    return getattr(getattr(test, test._testMethodName, None), "on_every_core", False)


def _without_slow(suite: unittest.TestSuite) -> unittest.TestSuite:
    kept = unittest.TestSuite()
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            kept.addTest(_without_slow(item))
        elif not _is_slow(item):
            kept.addTest(item)
    return kept


def run_tests(argv: list) -> int:
    """Every test, or those named; `--quick` leaves out the slow ones. The whole suite (no names) runs
    in parallel shards, one process each, one more than the machine has cores (up to four), as most of
    a test's time is spent waiting on the git, server and agent processes it starts."""
    quick = "--quick" in argv
    shard = next((a.split("=", 1)[1] for a in argv if a.startswith("--shard=")), None)
    names = [a for a in argv if not a.startswith("--")]
    loader = unittest.TestLoader()
    module = sys.modules[__name__]
    suite = loader.loadTestsFromNames(names, module) if names else loader.loadTestsFromModule(module)
    if quick:
        suite = _without_slow(suite)
    if shard is not None:
        index, count = (int(n) for n in shard.split("/"))
        suite = unittest.TestSuite(deal_to_shards(_flatten(suite), count)[index])
    elif not names and (os.cpu_count() or 1) > 1:
        return _run_shards(min((os.cpu_count() or 1) + 1, 4), quick)
    result = unittest.TextTestRunner(verbosity=1, stream=sys.stderr).run(suite)
    failing = {_test_id(t) for t, _ in result.failures + result.errors} | {_test_id(t) for t in result.unexpectedSuccesses}
    skipped = len({_test_id(t) for t, _ in result.skipped} - failing)
    passed = result.testsRun - len(failing) - skipped
    print(f"{passed} passed, {len(failing)} failed, {skipped} skipped")
    return 0 if not failing else 1


def deal_to_shards(tests: list, count: int) -> list:
    """tests dealt to count shards (a list each): the ones marked on_every_core all to the first, the
    others in turn to the rest; in turn to all of them when no test is marked or there is one shard."""
    shards = [[] for _ in range(count)]
    everywhere = [test for test in tests if _is_on_every_core(test)]
    first = 1 if everywhere and count > 1 else 0
    shards[0] += everywhere
    for index, test in enumerate(test for test in tests if not _is_on_every_core(test)):
        shards[first + index % (count - first)].append(test)
    return shards


def usage() -> str:
    """The module docstring's command lines: what `--help` prints."""
    lines = __doc__.splitlines()
    return "\n".join(lines[:lines.index("", 2)]).strip() + "\n    python3 test_claude_checkpoint.py ClassName[.test_name] ...  # only those\n"


class TestRunner(unittest.TestCase):
    def test_the_tests_on_every_core_get_the_first_shard_and_the_rest_are_dealt_evenly(self):
        tests = _flatten(unittest.TestLoader().loadTestsFromModule(sys.modules[__name__]))
        on_every_core = {t.id() for t in tests if _is_on_every_core(t)}
        self.assertGreaterEqual(len(on_every_core), 5)
        for count in (1, 2, 3, 4):
            with self.subTest(count=count):
                shards = [[t.id() for t in shard] for shard in deal_to_shards(tests, count)]
                self.assertEqual(sorted(sum(shards, [])), sorted(t.id() for t in tests), "each test in one shard")
                if count > 1:
                    self.assertEqual(set(shards[0]), on_every_core)
                    sizes = [len(shard) for shard in shards[1:]]
                    self.assertLessEqual(max(sizes) - min(sizes), 1)
        quick = _flatten(_without_slow(unittest.TestLoader().loadTestsFromModule(sys.modules[__name__])))
        self.assertEqual(on_every_core & {t.id() for t in quick}, set(), "a test on every core is slow")
        sizes = [len(shard) for shard in deal_to_shards(quick, 3)]
        self.assertLessEqual(max(sizes) - min(sizes), 1, "with none marked, every shard takes its turn")

    def test_help_prints_the_usage_and_runs_nothing(self):
        for flag in ("--help", "-h"):
            with self.subTest(flag=flag):
                proc = subprocess.run([sys.executable, __file__, flag], capture_output=True, timeout=TIMEOUT)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertIn(b"--quick", proc.stdout)
                self.assertIn(b"--bench", proc.stdout)
                self.assertNotRegex(proc.stdout + proc.stderr, rb"\d+ passed", "no test ran")


def _test_id(test: unittest.TestCase) -> str:
    """A failing subTest counts once, as its test."""
    return getattr(test, "test_case", test).id()


def _flatten(suite: unittest.TestSuite) -> list:
    tests = []
    for item in suite:
        tests += _flatten(item) if isinstance(item, unittest.TestSuite) else [item]
    return sorted(tests, key=lambda t: t.id())


def _run_shards(count: int, quick: bool) -> int:
    """Run the tests in count processes at once; print each one's report, a failing one's last (where
    a log's tail shows it), then the sum."""
    flags = ["--quick"] if quick else []
    outputs = [tempfile.TemporaryFile() for _ in range(count)]  # not pipes: a shard that says much never waits
    workers = [subprocess.Popen([sys.executable, __file__, *flags, f"--shard={i}/{count}"], stdout=output,
                                stderr=subprocess.STDOUT) for i, output in enumerate(outputs)]
    totals, reports = [0, 0, 0], []
    for worker, output in zip(workers, outputs):
        worker.wait()
        output.seek(0)
        report = output.read().decode("utf-8", "replace")
        output.close()
        found = re.findall(r"^(\d+) passed, (\d+) failed, (\d+) skipped$", report, re.M)
        counts = [int(n) for n in found[-1]] if found else [0, 1, 0]  # a shard that crashed counts as failed
        counts[1] += worker.returncode != 0 and counts[1] == 0
        totals = [a + b for a, b in zip(totals, counts)]
        reports.append((counts[1] > 0, report))
    for _, report in sorted(reports, key=lambda failed_and_report: failed_and_report[0]):
        sys.stderr.write(report)
    print(f"{totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
    return 0 if totals[1] == 0 else 1


if __name__ == "__main__":
    arguments = sys.argv[1:]
    if {"-h", "--help"} & set(arguments):
        print(usage(), end="")
        sys.exit(0)
    if arguments[:1] == ["--bench"]:
        sys.exit(run_bench(quick="--quick" in arguments))
    if arguments[:1] == ["--redaction"]:
        sys.exit(run_redaction_report([a for a in arguments[1:] if a != "--figures-only"], "--figures-only" in arguments))
    if arguments[:1] == ["--rule-words"]:
        sys.exit(write_rule_words())
    if arguments[:1] == ["--train-context"]:
        sys.exit(write_context_model())
    sys.exit(run_tests(arguments))

#!/usr/bin/env python3
"""claude-checkpoint: save and resume a Claude Code session's working state.

A local MCP stdio server, a set of Claude Code hooks and a small command line, in
one standard-library-only file. It keeps the goal, tasks, decisions, files touched
(with git blob hashes) and recent commands in `<project>/.claude-checkpoint`, with
secrets redacted, and turns them back into a compact resume brief that says exactly
which files changed since.

    python3 claude_checkpoint.py            # the MCP server on stdin/stdout
    python3 claude_checkpoint.py --help     # show, save, hook, install, doctor, snapshot, list, diff, restore, forget
    claude mcp add --scope user checkpoint -- python3 /abs/path/claude_checkpoint.py

Start-up matters (the server is spawned for every session), so the modules that
the handshake does not need are imported inside the functions that use them, and
the commands Claude Code runs import this file (IMPORT_CODE) so that its bytecode
is cached: `install` prints them.

Where things are (later sections use earlier ones, never the reverse):
   1. Header          this docstring, imports, __version__
   2. Constants       names, limits and protocol facts; each limit says why
   3. Errors          CheckpointError and the few subclasses a caller tells apart
   4. Model           records for the checkpoint and its parts; the JSON schema lives here
   5. Redaction       the rule table and the checks behind it (pure)
   6. Core            merge, caps, drift, transcripts, snapshot plans (pure: no clock, env or I/O)
   7. Rendering       the resume brief and the answer texts (pure)
   8. Git adapter     the one place git runs; status parsing, snapshots as commits
   9. Storage         where files are written (ours, and a restore's), locks, transcript reading
  10. Root            which project folder a call is about
  11. Services        save, load, record, snapshot, restore: what tools, hooks and commands call
  12. MCP tools       the tool table, prompts and resources, each a thin handler over section 11
  13. Protocol        JSON-RPC messages in, replies out, both MCP eras (no I/O)
  14. Transport       stdio, the reader thread, signals
  15. Install/doctor  configuration for Claude Code and Claude Desktop
  16. Command line    argparse, hooks, subcommands (the code rewind among them) and main()
"""
from __future__ import annotations

import os
import sys
from enum import Enum

TYPE_CHECKING = False
if TYPE_CHECKING:  # for annotations only: importing typing costs start-up time
    from typing import Any, Callable, Iterable, Optional

__version__ = "1.0.0"


# ════════════════════════════════════════════════════════════════════════════
# 2. Constants and limits
# ════════════════════════════════════════════════════════════════════════════
# Tables that are code (the redaction rules, the tool schemas, the merge limits they
# read) head the section that uses them; every scalar and fact lives here.

SERVER_NAME = "claude-checkpoint"
SERVER_TITLE = "Claude Checkpoint"

# Version 1 is the format of the original claude-checkpoint-mcp, and what we write: the
# fields we add (hook markers and cursors, omitted-file counts) are optional, which is no
# breaking change, and the original refuses any version above 1. claude-checkpoint 1.0.0
# wrote the same format as version 2, so files up to NEWEST_READABLE_VERSION are read.
SCHEMA_VERSION = 1
NEWEST_READABLE_VERSION = 2

CHECKPOINT_NAME = ".claude-checkpoint"
BACKUP_NAME = CHECKPOINT_NAME + ".prev"
LOCK_NAME = CHECKPOINT_NAME + ".lock"  # Windows only: POSIX locks the project folder itself
# Every name above starts with this: they are never listed as modified files.
CHECKPOINT_FILE_PREFIX = CHECKPOINT_NAME

MAX_CHECKPOINT_BYTES = 64 * 1024  # a checkpoint must never become a token sink
MAX_READ_BYTES = 4 * MAX_CHECKPOINT_BYTES  # a hand-edited file may be bigger; refuse giants
GIT_TIMEOUT_S = 3.0  # git must never hang a tool call or a hook
# A git command started early and waited for late (the caller hashed files meanwhile, while
# git may have been stopped on a full pipe) still gets this long once the caller reads it.
GIT_LATE_WAIT_S = 1.0
ROOTS_WAIT_S = 2.0  # how long a tool call waits for the client's roots/list answer
HASH_CHUNK_BYTES = 1 << 20  # files are hashed by streaming: memory stays flat
MAX_MESSAGE_BYTES = 8 * 1024 * 1024  # one JSON-RPC line; longer ones are refused, not buffered
MAX_TRANSCRIPT_LINE = 64 * 1024 * 1024  # a transcript line past this is skipped, never held whole
SHORT_SHA = 9

# Argument limits of save_session_checkpoint (SPEC section 3). The input schema,
# the validation and the caps all read this one table.
LIMITS = {
    "goal": 500,
    "tasks": 30,
    "task.description": 300,
    "summary": 4000,
    "nextSteps": 20,
    "nextSteps.item": 500,
    "decisions": 20,
    "decisions.item": 500,
    "modifiedFiles": 100,
    "modifiedFiles.path": 1024,
    "modifiedFiles.note": 300,
    "recentCommands": 50,
    "recentCommands.command": 2000,
    "recentCommands.note": 500,
    "projectRoot": 4096,
}

# How much of each list the resume brief shows before "… and N more".
BRIEF_SHOW = {"tasks": 15, "nextSteps": 8, "decisions": 10, "files": 15, "commands": 8, "drift": 12}
BRIEF_ITEM_CHARS = 300  # one line of the brief; the file keeps the full text

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
STATELESS_VERSIONS = ("2026-07-28",)
META_PROTOCOL = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
LIST_TTL_MS = 3_600_000  # tools, prompts and resources never change while we run
READ_TTL_MS = 0  # a checkpoint can change at any moment

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
UNSUPPORTED_PROTOCOL_VERSION = -32022
RESOURCE_NOT_FOUND = -32002  # handshake era; 2026-07-28 uses INVALID_PARAMS

REDACTED = "«redacted»"
FILE_STATUSES = ("M", "A", "D", "R", "??", "U")  # a modified file's status, reduced from git's porcelain codes
NO_GOAL = "(no goal recorded yet; saved automatically)"  # a hook's checkpoint before the model set a goal
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # never follow a symlink planted at one of our names

# MCP: what the server offers, and which requests need a project root.
CAPABILITIES = {"tools": {"listChanged": False}, "prompts": {"listChanged": False},
                "resources": {"subscribe": False, "listChanged": False}}
SERVER_INFO = {"name": SERVER_NAME, "title": SERVER_TITLE, "version": __version__}
ROOT_METHODS = ("tools/call", "prompts/get", "resources/read")
CACHEABLE_METHODS = ("server/discover", "tools/list", "prompts/list", "resources/list",
                     "resources/templates/list", "resources/read")

# Hooks: Claude Code's transcript tools, and how much a checkpoint remembers of what it read.
EDIT_TOOLS = {"Edit": "file_path", "Write": "file_path", "MultiEdit": "file_path", "NotebookEdit": "notebook_path"}
SHELL_TOOLS = ("Bash",)
HOOK_ID_LIMIT = 500  # tool_use ids remembered; the byte cursor covers anything older
HOOK_CURSOR_LIMIT = 20  # transcripts remembered
HOOK_DEADLINE_S = 30.0  # a hook must never hold a session: past this it gives up
HOOK_STDIN_LIMIT = 1 << 20  # the hook's JSON input; Claude Code sends a few hundred bytes
HOOK_EVENTS = {  # subcommand -> what it does
    "session-start": "print the resume brief (SessionStart, matcher clear|compact|resume)",
    "pre-compact": "merge what the transcript proves into the checkpoint (PreCompact)",
    "session-end": "the same, only when the session did something (SessionEnd)",
    "stop": "the same, only when the turn did something (Stop)",
}

# Snapshots (SPEC section 10): commits of the working tree under a private ref per root.
SNAPSHOT_REFS = "refs/claude-checkpoint/"  # never a branch or tag: not fetched, not pushed
SNAPSHOTS_KEEP = 100  # newest kept per root (CHECKPOINT_SNAPSHOTS_KEEP)
SNAPSHOT_MAX_BYTES = 10 * 1024 * 1024  # untracked files past this are skipped (CHECKPOINT_SNAPSHOT_MAX_BYTES)
SNAPSHOT_TIMEOUT_S = 20.0  # plumbing over thousands of files: more than a status needs, still bounded
SNAPSHOT_SKIPPED_SHOWN = 200  # skipped paths kept in a snapshot's message
SNAPSHOT_IDENTITY = {"GIT_AUTHOR_NAME": "claude-checkpoint", "GIT_AUTHOR_EMAIL": "claude-checkpoint@localhost",
                     "GIT_COMMITTER_NAME": "claude-checkpoint", "GIT_COMMITTER_EMAIL": "claude-checkpoint@localhost"}
SNAPSHOT_META_PREFIX = "claude-checkpoint: "  # the message line that holds a snapshot's facts as JSON
# Untracked files named like these are never copied into a snapshot: it must not become a
# second copy of the user's keys. Tracked files are captured (git has them already).
SECRET_FILE_NAMES = (".env", ".env.*", "*.env", "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore",
                     "*.kdbx", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", ".netrc", "_netrc", ".npmrc",
                     ".pypirc", ".pgpass", ".git-credentials", ".htpasswd", "credentials", "*.tfvars")
ZERO_SHA = "0" * 40
TREE_MODE = "40000"  # how a git tree object writes a folder's mode
HEAD_ENTRY = "head"  # a snapshot path state whose entry is whatever HEAD holds (a clean path, a submodule)

# The commands that Claude Code runs (the plugin's, and those `install` writes) start the file
# by importing it: Python caches bytecode only for imported modules, and compiling the whole
# file at every start costs more than the rest of the start-up. The file's folder comes after the
# code as an argument (no path is ever quoted inside it) and replaces sys.path[0], which for
# -c is the current folder: a json.py in the project must never be imported. An empty folder
# (an unset variable) is dropped too. main() then reads sys.argv[1:] as usual. -S skips site:
# the program needs the standard library only, and other packages' .pth start-up code (which
# can cost more time and memory than the server itself) never runs in it.
IMPORT_CODE = ("import sys; sys.path = [p for p in [sys.argv.pop(1)] + sys.path if p]; "
               "import {module} as m; sys.exit(m.main())")
IMPORT_FLAGS = ("-S", "-c")  # the interpreter's options before IMPORT_CODE

# Command-line exit status (SPEC section 10).
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOTHING = 0, 1, 2, 3

INSTRUCTIONS = (
    "Keeps this session's working state in <project>/.claude-checkpoint across crashes, /clear "
    "and compaction.\n"
    "- At the start of a session and right after /clear or a compaction, call "
    "load_session_checkpoint and continue from its brief; re-read only the files it flags "
    "as changed.\n"
    "- Call save_session_checkpoint after a milestone, before a risky operation (migration, "
    "rebase, mass edit) and when the conversation grows long: goal, tasks with status, where "
    "things stand, next steps, decisions and dead ends, commands that mattered with exit codes.\n"
    "- For small updates use mode \"merge\": it keeps what you do not resend.\n"
    "Git facts, file hashes and secret redaction are added for you."
)


# ════════════════════════════════════════════════════════════════════════════
# 3. Errors
# ════════════════════════════════════════════════════════════════════════════

class CheckpointError(Exception):
    """A failure the model or the user can act on; its message says how."""


class InvalidArgument(CheckpointError):
    """A tool argument broke a rule: the message names the field and the rule."""

    def __init__(self, field_name: str, rule: str):
        super().__init__(f"{field_name}: {rule}")
        self.field_name = field_name


class RootError(CheckpointError):
    """No usable project root."""


class StorageError(CheckpointError):
    """The checkpoint could not be read or written; nothing was lost."""


class UnsupportedVersion(CheckpointError):
    """The checkpoint was written by a newer claude-checkpoint."""


class SnapshotError(CheckpointError):
    """A snapshot could not be made, found or restored; nothing in the work tree changed."""


class NothingToDo(CheckpointError):
    """There is no snapshot to act on yet (exit status 3)."""


# ════════════════════════════════════════════════════════════════════════════
# 4. Model
# ════════════════════════════════════════════════════════════════════════════

# Records: a small stand-in for @dataclass (init, eq, repr, replace). Importing dataclasses
# costs 10-30 ms and 1 MB (it pulls in inspect), a large share of the start-up budget of a
# server that Claude Code spawns for every session.

class _Factory:
    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]):
        self.make = make


def field(*, default_factory: Callable[[], Any]) -> Any:
    """A fresh default for each instance, as dataclasses.field(default_factory=...)."""
    return _Factory(default_factory)


def record(cls: type) -> type:
    """Give a class with annotated fields an __init__ (positional or keyword), __eq__ and __repr__."""
    names = tuple(cls.__dict__.get("__annotations__", {}))
    defaults = {name: cls.__dict__[name] for name in names if name in cls.__dict__}

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(names):
            raise TypeError(f"{cls.__name__}() takes {len(names)} arguments, got {len(args)}")
        values = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names or key in values:
                raise TypeError(f"{cls.__name__}() got an unexpected or repeated argument {key!r}")
            values[key] = value
        for name in names:
            if name not in values:
                if name not in defaults:
                    raise TypeError(f"{cls.__name__}() is missing the argument {name!r}")
                default = defaults[name]
                values[name] = default.make() if isinstance(default, _Factory) else default
            setattr(self, name, values[name])

    def __eq__(self: Any, other: Any) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in names)

    def __repr__(self: Any) -> str:
        return f"{cls.__name__}(" + ", ".join(f"{name}={getattr(self, name)!r}" for name in names) + ")"

    for name, default in defaults.items():
        if isinstance(default, _Factory):
            delattr(cls, name)
    cls.__init__, cls.__eq__, cls.__repr__, cls.__hash__ = __init__, __eq__, __repr__, None
    cls._fields = names
    return cls


def replace(obj: Any, **changes: Any) -> Any:
    """A copy of a record with some fields changed, as dataclasses.replace."""
    return type(obj)(**{**{name: getattr(obj, name) for name in obj._fields}, **changes})


class TaskStatus(str, Enum):
    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    DONE = "done"
    BLOCKED = "blocked"


class SaveMode(str, Enum):
    REPLACE = "replace"
    MERGE = "merge"


class BriefFormat(str, Enum):
    BRIEF = "brief"
    FULL = "full"


class FileSource(str, Enum):
    GIT = "git"  # found by `git status`
    AGENT = "agent"  # named by the model, or inherited from an earlier save


@record
class Task:
    description: str
    status: TaskStatus = TaskStatus.PENDING


@record
class FileEntry:
    path: str  # relative to the root, with "/"
    status: str  # one of FILE_STATUSES
    source: FileSource
    note: Optional[str] = None
    hash: Optional[str] = None  # git blob sha1 of the content at save time; None when absent
    auto: bool = False  # recorded by a hook from the transcript


@record
class Command:
    command: str
    exit_code: Optional[int] = None
    note: Optional[str] = None
    at: Optional[str] = None
    auto: bool = False
    tool_use_id: Optional[str] = None  # the transcript's id, so a hook never records it twice


@record
class GitState:
    branch: Optional[str]  # None on a detached HEAD
    head: str
    dirty: bool


class SnapshotKind(str, Enum):
    SAVE = "save"  # a save (tool or CLI)
    HOOK = "hook"  # a hook run at the end of a turn, a compaction or a session
    MANUAL = "manual"  # the snapshot command
    BEFORE_RESTORE = "before-restore"  # taken just before a restore, so it can be undone


@record
class SnapshotRef:
    """The snapshot a checkpoint was saved with."""
    id: str  # the short id `list` prints
    commit: str


@record
class Skipped:
    """A path a snapshot or a restore left alone, and why."""
    path: str
    reason: str

    def to_json(self) -> dict:
        return {"path": self.path, "reason": self.reason}


@record
class Snapshot:
    """One snapshot as listed: its commit and the facts kept in its message."""
    id: str
    commit: str
    ref: str
    tree: str
    created_at: str
    kind: str
    branch: Optional[str]
    head: Optional[str]  # its parent: HEAD when it was made (None before the first commit)
    goal: str
    files: int  # paths under the root that differed from HEAD
    skipped: list = field(default_factory=list)  # [Skipped]

    def to_json(self) -> dict:
        return {"id": self.id, "commit": self.commit, "createdAt": self.created_at, "kind": self.kind,
                "branch": self.branch, "head": self.head, "goal": self.goal, "files": self.files}


@record
class HookState:
    """What the hooks already took from transcripts, so a re-read adds nothing twice."""

    tool_use_ids: list = field(default_factory=list)
    cursors: dict = field(default_factory=dict)  # transcript key -> byte offset read up to


@record
class Checkpoint:
    id: str
    created_at: str
    updated_at: str
    project_name: str
    goal: str
    git: Optional[GitState] = None
    goal_auto: bool = False
    tasks: list = field(default_factory=list)  # [Task]
    summary: Optional[str] = None
    next_steps: list = field(default_factory=list)  # [str]
    decisions: list = field(default_factory=list)  # [str]
    modified_files: list = field(default_factory=list)  # [FileEntry]
    recent_commands: list = field(default_factory=list)  # [Command]
    redactions: int = 0
    truncated: bool = False
    omitted_files: int = 0  # dirty files left out for lack of room
    hooks: HookState = field(default_factory=HookState)
    snapshot: Optional[SnapshotRef] = None  # the code as it was at this save (SPEC section 10)
    generator_version: str = __version__

    # ── JSON (camelCase lives only here) ──
    def to_json(self) -> dict:
        doc: dict = {
            "version": SCHEMA_VERSION,
            "id": self.id,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "generator": {"name": SERVER_NAME, "version": self.generator_version},
            "project": {"name": self.project_name},
            "git": None if self.git is None else {
                "branch": self.git.branch, "head": self.git.head, "dirty": self.git.dirty},
            "goal": {"primary": self.goal,
                     "tasks": [{"description": t.description, "status": t.status.value}
                               for t in self.tasks]},
            "summary": self.summary,
            "nextSteps": list(self.next_steps),
            "decisions": list(self.decisions),
            "modifiedFiles": [_file_to_json(f) for f in self.modified_files],
            "recentCommands": [_command_to_json(c) for c in self.recent_commands],
            "meta": {"redactions": self.redactions, "truncated": self.truncated},
        }
        if self.goal_auto:
            doc["goal"]["auto"] = True
        if self.summary is None:
            del doc["summary"]
        if self.omitted_files:
            doc["meta"]["omittedFiles"] = self.omitted_files
        if self.snapshot is not None:
            doc["snapshot"] = {"id": self.snapshot.id, "commit": self.snapshot.commit}
        if self.hooks.tool_use_ids or self.hooks.cursors:
            doc["hooks"] = {"toolUseIds": list(self.hooks.tool_use_ids),
                            "cursors": dict(self.hooks.cursors)}
        return doc

    @classmethod
    def from_json(cls, doc: Any) -> "Checkpoint":
        """Validate a stored checkpoint (any known version); raise CheckpointError naming the field."""
        doc = migrate(doc)
        goal = _obj(doc.get("goal"), "goal")
        git_doc = doc.get("git")
        git = None
        if git_doc is not None:
            git_doc = _obj(git_doc, "git")
            git = GitState(branch=_opt_str(git_doc.get("branch"), "git.branch"),
                           head=_str(git_doc.get("head"), "git.head"),
                           dirty=bool(git_doc.get("dirty")))
        meta = _obj(doc.get("meta", {}), "meta")
        hooks = _obj(doc.get("hooks", {}), "hooks")
        snapshot = None
        if doc.get("snapshot") is not None:
            snap = _obj(doc["snapshot"], "snapshot")
            snapshot = SnapshotRef(_str(snap.get("id"), "snapshot.id"), _str(snap.get("commit"), "snapshot.commit"))
        return cls(
            id=_str(doc.get("id"), "id"),
            created_at=_str(doc.get("createdAt"), "createdAt"),
            updated_at=_str(doc.get("updatedAt"), "updatedAt"),
            project_name=_str(_obj(doc.get("project", {}), "project").get("name", ""), "project.name"),
            git=git,
            goal=_str(goal.get("primary"), "goal.primary"),
            goal_auto=bool(goal.get("auto")),
            tasks=[Task(_str(t.get("description"), "tasks.description"),
                        _enum(TaskStatus, t.get("status"), "tasks.status"))
                   for t in _list_of_obj(goal.get("tasks", []), "goal.tasks")],
            summary=_opt_str(doc.get("summary"), "summary"),
            next_steps=_list_of_str(doc.get("nextSteps", []), "nextSteps"),
            decisions=_list_of_str(doc.get("decisions", []), "decisions"),
            modified_files=[_file_from_json(f) for f in _list_of_obj(doc.get("modifiedFiles", []), "modifiedFiles")],
            recent_commands=[_command_from_json(c) for c in _list_of_obj(doc.get("recentCommands", []), "recentCommands")],
            redactions=_int(meta.get("redactions", 0), "meta.redactions"),
            truncated=bool(meta.get("truncated", False)),
            omitted_files=_int(meta.get("omittedFiles", 0), "meta.omittedFiles"),
            hooks=HookState(tool_use_ids=_list_of_str(hooks.get("toolUseIds", []), "hooks.toolUseIds"),
                            cursors={str(k): v for k, v in _obj(hooks.get("cursors", {}), "hooks.cursors").items()
                                     if isinstance(v, int) and not isinstance(v, bool)}),
            snapshot=snapshot,
        )


def _present(doc: dict) -> dict:
    """Optional keys that are unset (None, False, empty) are left out of the file."""
    return {key: value for key, value in doc.items() if value is not None and value is not False and value != ""}


def _file_to_json(entry: FileEntry) -> dict:
    return _present({"path": entry.path, "status": entry.status, "source": entry.source.value,
                     "note": entry.note, "hash": entry.hash, "auto": entry.auto})


def _file_from_json(doc: dict) -> FileEntry:
    status = _str(doc.get("status", "M"), "modifiedFiles.status")
    return FileEntry(path=_str(doc.get("path"), "modifiedFiles.path"),
                     status=status if status in FILE_STATUSES else "M",
                     source=_enum(FileSource, doc.get("source", "agent"), "modifiedFiles.source"),
                     note=_opt_str(doc.get("note"), "modifiedFiles.note"),
                     hash=_opt_str(doc.get("hash"), "modifiedFiles.hash"),
                     auto=bool(doc.get("auto")))


def _command_to_json(cmd: Command) -> dict:
    return _present({"command": cmd.command, "exitCode": cmd.exit_code, "note": cmd.note, "at": cmd.at,
                     "auto": cmd.auto, "toolUseId": cmd.tool_use_id})


def _command_from_json(doc: dict) -> Command:
    exit_code = doc.get("exitCode")
    return Command(command=_str(doc.get("command"), "recentCommands.command"),
                   exit_code=None if exit_code is None else _int(exit_code, "recentCommands.exitCode"),
                   note=_opt_str(doc.get("note"), "recentCommands.note"),
                   at=_opt_str(doc.get("at"), "recentCommands.at"),
                   auto=bool(doc.get("auto")),
                   tool_use_id=_opt_str(doc.get("toolUseId"), "recentCommands.toolUseId"))


def migrate(doc: Any) -> dict:
    """Bring a stored document of any readable schema version to SCHEMA_VERSION."""
    doc = _obj(doc, "checkpoint")
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise CheckpointError(f"version: expected a positive integer, got {_json_type(version)}")
    if version > NEWEST_READABLE_VERSION:
        raise UnsupportedVersion(
            f"The checkpoint has schema version {version}, newer than this claude-checkpoint "
            f"({__version__}) understands (up to {NEWEST_READABLE_VERSION}). Upgrade claude-checkpoint to read it.")
    # 2 is 1 with the optional fields, which every version-1 reader here already accepts.
    return {**doc, "version": SCHEMA_VERSION}


# Strict readers for stored JSON: a hand-edited file gets an error naming the field.
def _obj(value: Any, name: str) -> dict:
    if not isinstance(value, dict):
        raise CheckpointError(f"{name}: expected an object")
    return value


def _str(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise CheckpointError(f"{name}: expected a string")
    return value


def _opt_str(value: Any, name: str) -> Optional[str]:
    return None if value is None else _str(value, name)


def _int(value: Any, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise CheckpointError(f"{name}: expected an integer")
    return value


def _enum(kind: type, value: Any, name: str):
    allowed = [m.value for m in kind]
    if not isinstance(value, str) or value not in allowed:
        raise CheckpointError(f"{name}: {preview(value)} is not one of {', '.join(allowed)}")
    return kind(value)


def _list_of_obj(value: Any, name: str) -> list:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise CheckpointError(f"{name}: expected a list of objects")
    return value


def _list_of_str(value: Any, name: str) -> list:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CheckpointError(f"{name}: expected a list of strings")
    return list(value)


# ── 4.1 The save tool's arguments ──

@record
class FileNote:
    path: str
    note: Optional[str] = None


@record
class SaveRequest:
    goal: str
    tasks: Optional[list] = None  # [Task]; None = not given
    summary: Optional[str] = None
    next_steps: Optional[list] = None
    decisions: Optional[list] = None
    files: list = field(default_factory=list)  # [FileNote]
    commands: Optional[list] = None  # [Command]
    mode: SaveMode = SaveMode.REPLACE
    project_root: Optional[str] = None


def _string(limit: int, description: str = "") -> dict:
    schema: dict = {"type": "string", "maxLength": limit}
    if description:
        schema["description"] = description
    return schema


def _array(items: dict, limit: int, description: str = "") -> dict:
    schema: dict = {"type": "array", "items": items, "maxItems": limit}
    if description:
        schema["description"] = description
    return schema


def _object(properties: dict, required: tuple = ()) -> dict:
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


PROJECT_ROOT_SCHEMA = _string(LIMITS["projectRoot"], "Absolute project path, if not the current one")

SAVE_INPUT_SCHEMA = _object({
    "goal": _string(LIMITS["goal"], "The session's main goal"),
    "tasks": _array(_object({"description": _string(LIMITS["task.description"]),
                             "status": {"type": "string", "enum": [s.value for s in TaskStatus]}},
                            ("description",)), LIMITS["tasks"]),
    "summary": _string(LIMITS["summary"], "Where things stand: what works, what is broken, what was in flight"),
    "nextSteps": _array(_string(LIMITS["nextSteps.item"]), LIMITS["nextSteps"], "Ordered next actions"),
    "decisions": _array(_string(LIMITS["decisions.item"]), LIMITS["decisions"], "Decisions, constraints, dead ends"),
    "modifiedFiles": _array(_object({"path": _string(LIMITS["modifiedFiles.path"]),
                                     "note": _string(LIMITS["modifiedFiles.note"])}, ("path",)),
                            LIMITS["modifiedFiles"], "Files to annotate; git changes are found anyway"),
    "recentCommands": _array(_object({"command": _string(LIMITS["recentCommands.command"]),
                                      "exitCode": {"type": "integer", "minimum": -2 ** 31, "maximum": 2 ** 32 - 1},
                                      "note": _string(LIMITS["recentCommands.note"])}, ("command",)),
                             LIMITS["recentCommands"], "Commands that mattered, oldest first"),
    "mode": {"type": "string", "enum": [m.value for m in SaveMode],
             "description": "merge keeps what is not resent; default replace"},
    "projectRoot": PROJECT_ROOT_SCHEMA,
}, ("goal",))

LOAD_INPUT_SCHEMA = _object({
    "format": {"type": "string", "enum": [f.value for f in BriefFormat],
               "description": "brief (default, markdown) or full (checkpoint and drift as JSON)"},
    "projectRoot": PROJECT_ROOT_SCHEMA,
})



def check_arguments(value: Any, schema: dict, name: str = "", required: bool = False) -> None:
    """Check a tool's arguments against the input schema that tools/list publishes: types,
    required and unknown fields, maxLength, maxItems, enum, minimum and maximum. Every string
    is also checked for NUL and lone surrogates, and required strings and list items for blanks.
    Raises InvalidArgument naming the field and the rule."""
    kind = schema.get("type")
    label = name or "arguments"
    if kind == "object":
        if not isinstance(value, dict):
            raise InvalidArgument(label, f"must be an object, got {_json_type(value)}")
        fields = schema["properties"]
        unknown = sorted(set(value) - set(fields))
        if unknown:
            raise InvalidArgument(_field(name, short_name(unknown[0])),
                                  f"unknown field; allowed fields are {', '.join(fields)}")
        for key in schema.get("required", ()):
            if key not in value:
                raise InvalidArgument(_field(name, key), "is required")
        for key, sub in fields.items():
            must = key in schema.get("required", ())
            if value.get(key) is not None or (must and key in value):  # null is "not given"
                check_arguments(value[key], sub, _field(name, key), must)
    elif kind == "array":
        if not isinstance(value, list):
            raise InvalidArgument(label, f"must be an array, got {_json_type(value)}")
        if len(value) > schema["maxItems"]:
            raise InvalidArgument(label, f"has {len(value)} items; the limit is {schema['maxItems']}")
        for i, item in enumerate(value):
            check_arguments(item, schema["items"], f"{name}[{i}]", required=True)
    elif kind == "integer":
        if not isinstance(value, int) or isinstance(value, bool) or not (
                schema.get("minimum", value) <= value <= schema.get("maximum", value)):
            raise InvalidArgument(label, f"must be an integer, got {_json_type(value)}")
    elif "enum" in schema:
        if not isinstance(value, str) or value not in schema["enum"]:
            raise InvalidArgument(label, f"must be one of {', '.join(schema['enum'])}, got {preview(value)}")
    else:
        _check_text(value, label, schema["maxLength"], required)


def _field(parent: str, key: str) -> str:
    return f"{parent}.{key}" if parent else key


def _check_text(value: Any, name: str, limit: int, required: bool) -> None:
    if not isinstance(value, str):
        raise InvalidArgument(name, f"must be a string, got {_json_type(value)}")
    if len(value) > limit:
        raise InvalidArgument(name, f"is {len(value)} characters; the limit is {limit}")
    if required and not value.strip():
        raise InvalidArgument(name, "must not be empty")
    if "\x00" in value:
        raise InvalidArgument(name, "must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(name, "must be valid Unicode text (it holds a lone surrogate)") from None


def parse_save_arguments(args: Any) -> SaveRequest:
    """save_session_checkpoint's arguments, checked against SAVE_INPUT_SCHEMA, as a SaveRequest."""
    check_arguments(args, SAVE_INPUT_SCHEMA)
    given = {key: value for key, value in args.items() if value is not None}
    return SaveRequest(
        goal=args["goal"],
        tasks=[Task(t["description"], TaskStatus(t.get("status") or "pending")) for t in given["tasks"]]
        if "tasks" in given else None,
        summary=given.get("summary"),
        next_steps=given.get("nextSteps"),
        decisions=given.get("decisions"),
        files=[FileNote(f["path"], f.get("note")) for f in given.get("modifiedFiles", [])],
        commands=[Command(c["command"], c.get("exitCode"), c.get("note")) for c in given["recentCommands"]]
        if "recentCommands" in given else None,
        mode=SaveMode(given.get("mode", "replace")),
        project_root=given.get("projectRoot"))


def parse_load_arguments(args: Any) -> tuple:
    """load_session_checkpoint's arguments, checked against LOAD_INPUT_SCHEMA: (format, projectRoot)."""
    check_arguments(args, LOAD_INPUT_SCHEMA)
    return BriefFormat(args.get("format") or "brief"), args.get("projectRoot")


def preview(value: Any, limit: int = 60) -> str:
    """How a message quotes a value it was given: the start of a string, or the JSON type of
    anything else. Never a repr of the whole: it can be huge, or nested past the recursion limit."""
    if isinstance(value, str):
        return repr(short_name(value, limit))
    return _json_type(value)


def short_name(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return {str: "a string", list: "an array", dict: "an object"}.get(type(value), type(value).__name__)


# ════════════════════════════════════════════════════════════════════════════
# 5. Secret redaction (pure)
# ════════════════════════════════════════════════════════════════════════════

# A table of named rules. Each pattern marks the secret with the group "s"; only
# that span is replaced, so `export GITHUB_TOKEN=ghp_…` stays readable. A rule may
# carry an `accept` check for matches whose shape alone does not prove a secret.
# Every unbounded run has a left boundary of its own character class, so a long
# run of look-alike characters is scanned once: the rules stay linear in the text.

@record
class RedactionRule:
    name: str
    pattern: str
    accept: Optional[Callable[[Any], bool]] = None  # called with the re.Match


_L = r"(?<![A-Za-z0-9_\-])"  # left edge of a token
_R = r"(?![A-Za-z0-9_\-])"  # right edge of a token

# Words that make a name secret on their own (last part of the name) ...
_SECRET_WORDS = frozenset("""
    password passwd pwd pass passphrase passcode secret token credential credentials creds apikey
    pat dsn cookie pin authtoken accesstoken apitoken privatekey secretkey passwords authorization
    bearer pw pword pswd passwort kennwort""".split())
# Words ending in "pass" that are not passwords (SSHPASS and DBPASS are).
_NOT_PASSWORDS = frozenset("""
    bypass compass surpass overpass underpass trespass encompass pass askpass""".split())
# ... and qualifiers that make a trailing "key" or "auth" secret (api_key, client_secret is above).
_KEY_QUALIFIERS = frozenset("""
    api access secret private signing sign encryption encrypt master account auth app license
    service admin webhook session storage shared client consumer deploy subscription integration
    hmac jwt crypto cipher aes gpg pgp ssh rsa sas bot user root application""".split())
_PUBLIC_WORDS = frozenset({"public", "publishable", "pub"})
# A last word that makes the name about a secret, not the secret (--password-file, TOKEN_TTL).
_ABOUT_A_SECRET = frozenset("""
    file files path stdin env name names id ids arn ref url uri length len min max count policy hash
    hasher reset prompt field type format expiry expires ttl timeout version header location mode
    enabled rotation""".split())
# A last word that says how a value is held, not what it is (GOOGLE_CREDENTIALS_BASE64, client-key-data).
_HOLDER_WORDS = frozenset("""
    data b64 base64 blob value material content contents bytes str string hex pem der raw plain plaintext
    encoded literal""".split())
_NAME_SPLIT = r"[_.:\-\s]+|(?<=[a-z0-9])(?=[A-Z])"
_NOT_VALUES = frozenset("""
    true false null none nil yes no on off undefined str string int integer bytes bool boolean
    number any object optional required secretstr text varchar char password redacted hidden masked
    env read write none sensitive inherit include omit same-origin bearer basic digest negotiate""".split())  # GitHub Actions: `id-token: write`, `secrets: inherit`


def _name_parts(name: str) -> list:
    import re
    return [p.lower() for p in re.split(_NAME_SPLIT, name) if p]


def secret_strength(name: str) -> int:
    """2 when a name says its value is a secret (DB_PASSWORD), 1 when it may be (SIGNING_KEY
    is 2, sort_key is 1), 0 when it does not (MAX_TOKENS, password_file)."""
    parts = _name_parts(name)
    while parts and parts[-1].isdigit():
        parts.pop()  # VAULT_UNSEAL_KEY_1 is a key
    if len(parts) > 1 and parts[-1] in _HOLDER_WORDS:
        parts.pop()  # SESSION_TOKEN_B64 is a token
    if not parts or _PUBLIC_WORDS.intersection(parts) or "existing" in parts or parts[-1] in _ABOUT_A_SECRET:
        return 0  # existingSecret names a Kubernetes secret; it does not hold one
    last = parts[-1]
    before = parts[-2] if len(parts) > 1 else ""
    if last == "pass" and len(parts) == 1:
        return 1  # `PASS: TestLogin` in test output; DB_PASS is below
    if (last in _SECRET_WORDS or last.endswith(("password", "passwd", "secret"))
            or last.endswith(("token", "cookie")) or (last.endswith("pass") and last not in _NOT_PASSWORDS)):
        return 2
    if last in ("key", "keys", "auth") or last.endswith("key"):
        if before in _KEY_QUALIFIERS or last in ("apikey", "accesskey", "secretkey", "privatekey"):
            return 2
        return 1
    if last == "secrets":
        return 2
    if any(p in _SECRET_WORDS or p in ("secret", "private") for p in parts[:-1]):
        return 1  # SECRET_KEY_BASE: secret if the value looks random, not TOKEN_LIMIT=4096
    return 0


# A reference or interpolation at the start of a value: `$TOKEN`, `${X}`, `$(cmd)`, `$1`, `$env:X`,
# `%KEY%`, `%(name)s`, `%s`, `%{x}`; not `$$qR~5…` (docker compose's escaped `$`) or `%b*Zr7…`.
_LEADING_REFERENCE = (r"\$(?:\{|\(|\d(?![A-Za-z0-9])|(?:env[:.])?[A-Za-z_]\w*(?![^\s/.:@\-}\])'\"`,;]))"
                      r"|%(?:[A-Za-z_]\w*%|(?:~[a-z]{0,4})?\d(?![A-Za-z0-9])|\*(?![A-Za-z0-9])|\{|\([\w.]+\)[-#0 +]?\d*[sdifr]"
                      r"|[-#0 +]?\d*[sdifrvqwxXTp](?![A-Za-z0-9]))")
# Interpolations anywhere: `%(db_password)s`, `user:%s@host`, `Bearer $TOKEN`, `${…}`, `{{…}}`.
_INTERPOLATION = (r"\$\{|\{\{|#\{|\$\(|%\([\w.]+\)[-#0 +]?\d*[sdifr]|%[sdvw](?![A-Za-z0-9])"
                  r"|(?:^|\s)\$(?:env:)?[A-Za-z_]\w*(?![^\s/.:@\-}\])])")
# A format slot, `{user_id}`, `{0}`, `{name!r:>10}`: a template when every brace in the value is one.
_TEMPLATE_SLOT = r"\{(?:[A-Za-z_][\w.]*(?:\[[^\]\s]{0,40}\])?|\d{0,2})(?:![rsa])?(?::[^{}\s]{0,20})?\}"
# Words that make a value a placeholder: `CHANGE_ME`, `your-api-key-here`, `<insert key here>`.
_PLACEHOLDER_WORDS = frozenset("""
    your changeme change replace replaceme placeholder insert here todo fixme tbd dummy example sample
    fake redacted filtered masked hidden removed omitted xxx""".split())
# Words that may come with a name standing in for a value: `new_password`, `my-secret`, `admin_pass`.
_STAND_IN_QUALIFIERS = frozenset("new old my your current the a some user admin root db".split())


def _is_reference(value: str) -> bool:
    """`$TOKEN`, `${API_KEY}`, `%KEY%`, `process.env.X`, `${{ secrets.X }}`, templates
    (`user-{user_id}`, `%(password)s`), placeholders (`CHANGE_ME`, `<your-token>`) and masked
    values (`gho_****`, `xxxxxxxx`): names or stand-ins, not values. Runs for most candidate
    values, so the cheap checks come first."""
    quoted = value[:1] in "\"'`"
    v = value.strip("\"'`\\ ")
    if not v or REDACTED in v or "***" in v or "•••" in v or not any(c.isalnum() for c in v):
        return True
    if value[:1] == "`" and any(c.isspace() for c in v):
        return True  # `cat /tmp/session.tok`: a command's output
    import re
    first = v[0]
    if (first in "$%" and re.match(_LEADING_REFERENCE, v)) or (first == "@" and re.fullmatch(r"@(?:[\w\-]*[./:][\w./\-:]*|[a-z_][a-z0-9_\-]*)", v)):
        return True
    if (not quoted and first in "[({") or (first == "<" and v[-1] == ">"):
        return True
    if v.startswith(("process.env", "os.environ", "os.getenv", "env.", "ENV[", "secrets.", "env:", "file:")):
        return True
    if any(c in v for c in "${#%") and (re.search(_INTERPOLATION, v) or _is_template(v)):
        return True
    return _is_placeholder(v)


def _is_template(v: str) -> bool:
    """`user-{user_id}-v3`, `https://x/items?key={API_KEY}`; not a salt with a stray `{ab}` in it."""
    import re
    rest, slots = re.subn(_TEMPLATE_SLOT, "", v)
    return slots > 0 and "{" not in rest and "}" not in rest


def _is_placeholder(v: str) -> bool:
    """`CHANGE_ME`, `YOUR_STRIPE_API_KEY`, `your-token-here`, `xxxxxxxx`, `[REDACTED]`, and a value
    that only names what goes there (`password`, `new_passphrase`, `SECRETKEY`), as usage texts do."""
    if len(set(v.lower())) == 1:
        return True  # xxxxxxxx, 00000000
    if any(c.isdigit() for c in v):
        return False
    import re
    if re.fullmatch(r"[A-Z]+(?:_[A-Z]+)+", v):
        return True  # a name in capitals stands in for its value
    words = [w for w in re.split(r"[\s_.\-\[\]()<>]+", v.lower()) if w]
    if len(words) <= 8 and any(w in _PLACEHOLDER_WORDS for w in words):
        return True
    named = [w for w in words if w not in _STAND_IN_QUALIFIERS]
    return bool(named) and all(w in _SECRET_WORDS or w.endswith(("password", "passwd", "passphrase", "secret", "token", "key"))
                               for w in named)


def _is_identifier_like(value: str) -> bool:
    """A UUID, a short hex id (git SHA, GPG key id) or a prefixed digest (a CI cache key):
    identifiers that weak names such as `key` often hold."""
    import re
    v = value.strip("\"'")
    uuid = r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"
    return bool(re.fullmatch(uuid + r"|[0-9a-fA-F]{6,40}", v) or re.fullmatch(r"[\w.\-]+-[0-9a-f]{32,}", v)
                or re.fullmatch(r"[a-z_]{1,20}[:/]" + uuid, v))  # session:<uuid>


def _is_path_or_version(value: str) -> bool:
    """`./keys/bastion.pem`, `exports/2024-09-16.parquet`, `^9.0.2`: not secrets."""
    import re
    v = value.strip("\"'`")
    if v.startswith(("./", "../", "~/")) or re.match(r"/(?:dev|etc|run|var|tmp|home|usr|opt|proc|srv|mnt|Users|Library|Volumes)(?:/|\s|$)", v):
        return True
    if v.startswith("/") and re.fullmatch(r"(?:/[\w.\-]+)+/?", v) and (
            re.fullmatch(r"[a-z0-9_/.\-]+", v) or re.search(r"\.\w{1,5}$", v)):
        return True  # /etc/credstore/db-password, /run/keys/App.pem; not /YSylBTdSK…/4lsH6JOZ (a key)
    if re.fullmatch(r"[\w.\-]+(?:/[\w.\-]+)+", v) and "." in v.rsplit("/", 1)[-1]:
        return True
    if re.fullmatch(r"[a-z0-9_.\-:]+(?:/[a-z0-9_.\-:]+)+", v):
        return True  # secret/data/ci:token, db-password:/etc/credstore/db-password
    return re.fullmatch(r"[\^~<>=v]{0,2}\d+(?:\.\d+){1,3}(?:[-+][\w.]+)?", v) is not None


def _looks_random(value: str) -> bool:
    """A value with no spaces that mixes letters and digits over 16+ characters."""
    v = value.strip("\"'")
    if len(v) < 16 or any(c.isspace() for c in v) or "://" in v or "${" in v or _is_path_or_version(v):
        return False
    # Digits and letters both: random keys almost always have both; CamelCaseNames never do.
    return any(c.isdigit() for c in v) and any(c.isalpha() for c in v) and len(set(v)) >= 8


def _accept_assignment(match: Any) -> bool:
    name, value = match.group("name"), match.group("s")
    groups = match.groupdict()
    bare = value.strip("\"'`\\")
    if groups.get("op") == ":" and not _accept_after_colon(match, value, bare):
        return False
    strength = secret_strength(name)
    if strength == 0 or not bare or _is_reference(value) or _is_code(value, name) or _is_path_or_version(bare):
        return False
    following = match.string[match.end("s"):match.end("s") + 2]
    prefixed_string = following[:1] in "\"'" and value.lower() in ("f", "r", "b", "u", "rb", "br", "fr", "rf")
    if value[:1] not in "\"'`" and (following[:1] == "(" or following[:1] == "<" and following != "</" or prefixed_string):
        return False  # `token = useState<string>(…)`, `key = derive(…)`, f"Bearer {token}": code
    if strength == 1:
        return _looks_random(bare) and not _is_identifier_like(bare)
    if bare.isdigit() and match.string[match.end("s"):match.end("s") + 6] == " bytes":
        return False  # `kubectl describe secret` prints sizes, not values
    next_char = match.string[match.end("s"):match.end("s") + 8].lstrip(" \t")[:1]
    if value[:1] not in "\"'`" and bare.isidentifier() and next_char and next_char in ",})" and not any(
            c.isdigit() for c in bare):
        return False  # `{ id: key.id, token: raw }`: an object literal in code
    return bare.strip().lower() not in _NOT_VALUES


def _accept_after_colon(match: Any, value: str, bare: str) -> bool:
    """`name: value` (YAML, JSON, headers), but not `rails credentials:edit` or `scope:read` (a YAML
    value needs a space after the colon; `X-API-Key:IGuLw…` in an HTTPie argument is random enough),
    a YAML tag or alias (`password: !env_var DB_PASSWORD`, `password: *db_password`), or a psql
    variable (`PASSWORD :'new_password'`)."""
    text, op_start, op_end = match.string, match.start("op"), match.end("op")
    quoted = value[:1] in "\"'`"
    if not match.groupdict().get("q") and match.start("s") == op_end:
        if quoted:
            return not (op_start > 0 and text[op_start - 1] in " \t")  # `:'var'` after a space is psql's
        return _looks_random(bare)
    return quoted or bare[:1] not in "!*&"


def _is_code(value: str, name: str) -> bool:
    """Unquoted code on the right: `password = request.form[...]`, `api_key = api_key`,
    `token = self.token`, `auth = HTTPBasicAuth(user, password)`."""
    if value[:1] in "\"'`":
        return False
    own = name.split(".")[-1].lower()
    if value.lower() == own or value.lower().endswith("." + own):
        return True
    if value.isidentifier() and (value.lower() in own or not any(c.isdigit() for c in value) and any(
            word in value.lower() for word in ("password", "passwd", "token", "secret", "key", "cred"))):
        return True  # `AccessToken: token`, `'password': form_password`: variables
    dotted = "." in value and value.replace(".", "").replace("_", "").isalnum() and not any(c.isdigit() for c in value)
    return "(" in value or "[" in value or dotted


def _accept_flag(match: Any) -> bool:
    """A flag's value, unless it is the next flag or names a secret (`--secret=api-key`)."""
    import re
    value = match.group("s")
    name = match.group("name").lower()
    named = name in ("secret", "secrets", "secret-id", "secret-name") and re.fullmatch(
        r"[a-z]+(?:[-_][a-z]+)+", value.strip("\"'"))
    spec = name in ("secret", "secrets") and re.match(r"[a-z]+=", value)  # --secret id=npmrc,src=…
    return not value.startswith("-") and not named and not spec and _accept_assignment(match)


def _accept_password_like(match: Any) -> bool:
    """Prose such as `the VPN password is Xk29…`: only values that look like passwords."""
    v = match.group("s")
    if len(v) < 8 or len(v) > 128 or _is_reference(v) or "/" in v[:2] or "://" in v or "=" in v:
        return False
    classes = sum((any(c.islower() for c in v), any(c.isupper() for c in v), any(c.isdigit() for c in v),
                   any(not c.isalnum() for c in v)))
    return any(c.isdigit() for c in v) and classes >= 3


def _accept_pair(match: Any) -> bool:
    """`secret_access_key VALUE` without an operator: only random-looking values."""
    return _looks_random(match.group("s")) and not _is_reference(match.group("s"))


def _accept_password_flag(match: Any) -> bool:
    """`-u user -p VALUE`: a password, unless it is a port or a reference, or the command is
    mysql, whose `-p VALUE` (with a space) asks for the password and names the database."""
    import re
    value = match.group("s").strip("\"'")
    line = match.string[match.string.rfind("\n", 0, match.start()) + 1:match.start()]
    return not value.isdigit() and not _is_reference(value) and not re.search(r"\b(?:mysql|mariadb)\w*\b", line)


def _accept_user_password(match: Any) -> bool:
    user, password = match.group("user"), match.group("s")
    return not (user.isdigit() and password.isdigit()) and not _is_reference(password) and not user.startswith("$")


def _accept_wrapped_value(match: Any) -> bool:
    """`key = []byte("…")`, `SecretStr("…")`: a literal passed to a call; not a prompt text."""
    value = match.group("s").strip("\"'")
    strength = secret_strength(match.group("name"))
    if strength == 0 or _is_reference(value) or any(c.isspace() for c in value) or _is_path_or_version(value):
        return False
    return _looks_random(value) or (strength == 2 and len(value) >= 8 and any(c.isdigit() for c in value))


def _accept_encoded_private_key(match: Any) -> bool:
    """Base64 of a PEM block (kubeconfig client-key-data): a secret only if it is a private key."""
    import binascii
    blob = match.group("s")
    try:
        decoded = binascii.a2b_base64(blob[:len(blob) - len(blob) % 4])
    except (binascii.Error, ValueError):
        return False
    return b"PRIVATE KEY" in decoded


def _accept_header_token(match: Any) -> bool:
    value = match.group("s")
    return not _is_reference(value) and (len(value) >= 20 or any(c.isdigit() for c in value) and len(value) >= 8)


def _accept_not_reference(match: Any) -> bool:
    return not _is_reference(match.group("s"))


def _accept_random(match: Any) -> bool:
    return _looks_random(match.group("s"))


def _accept_random_not_hex(match: Any) -> bool:
    """40 base64 characters near "secret": an AWS secret key, unless it is a hex digest."""
    return _looks_random(match.group("s")) and not all(c in "0123456789abcdef" for c in match.group("s"))


def _accept_random_not_identifier(match: Any) -> bool:
    """Prose: "the API token is 11b7…". Long hex counts (Jenkins tokens are 34 hex digits)."""
    import re
    value = match.group("s")
    long_hex = re.fullmatch(r"[0-9a-f]{33,}", value.strip("\"'"))
    return _looks_random(value) and (long_hex or not _is_identifier_like(value)) and not _is_reference(value)


def _accept_named_random(match: Any) -> bool:
    return _accept_assignment(match) and _looks_random(match.group("s"))


def _accept_argument(match: Any) -> bool:
    """A password given as a command's argument (`net user alice PASSWORD`), unless it is an
    option (`/add`, `--pre-hashed`), a prompt (`*`), a redirection, a usage text's `<new password>`
    or a reference."""
    import re
    value = match.group("s")
    bare = value.strip("\"'")
    if _is_reference(value) or (value[:1] not in "\"'" and (
            bare.startswith(("-", "<")) or re.fullmatch(r"/[A-Za-z]+(?::\S*)?", bare))):
        return False
    return bare.lower() not in _NOT_VALUES and bare.lower() not in ("open", "restricted")


# Prose that names a secret, then gives it: the words that name one (also as a name, `MASTER_KEY`),
# the short words that come right before one (`pw X`), and the words that say the next value is
# something else (`commit 2b7e…`, `user svc_backup2024`).
_PROSE_SECRET_WORDS = (
    r"(?i)(?<![/.\-])\b(?:(?:[a-z]+[_\-])*(?:passwords?|passwd|passphrases?|tokens?|secrets?|keys?)|passcodes?"
    r"|pass ?words?|pw|pwd|credentials?|creds|(?:recovery|backup) codes?|passwort|kennwort|contrase[ñn]a"
    r"|mot de passe|senha|wachtwoord|parola|l[öo]senord|salasana|has[łl]o)\b(?![/.]\w)")  # not in keys/ops.pem, db-password
_PROSE_NEAR_WORDS = r"(?i)\b(?:pass|pw|pwd|pin)[ \t]*[:=]?[ \t]*$"  # `pass X`: the value comes next
_PROSE_NOT_A_SECRET_BEFORE = (
    r"(?i)\b(?:commit|sha\d*|hash|digest|checksum|revision|rev|fingerprint|id|uuid|version|build|etag|tag"
    r"|branch|ref|image|pid|port|run|job|issue|ticket|pr|trace|span|request|order|invoice|account|user(?:name)?"
    r"|login|host(?:name)?|region|bucket|model|file|path|table|column|index|serial|number)[ \t]*[#=]?[ \t]*$")
_PROSE_HASH_WORDS = r"(?i)\b(?:commit|sha\d*|hash|digest|checksum|revision|rev|fingerprint|build|etag|id|object|blob|merge)\b"
_PROSE_NAMED_AFTER = r"(?i)[)\]'\"`]*\s+(?:is|was|as|will be|=)\s+(?:[\w\-]+\s+){0,4}?" + _PROSE_SECRET_WORDS[4:]
_PROSE_CONNECTOR = r"(?i)(?:\b(?:is|was|are|to|now|be|becomes|into|use|using)|[=:(\u2192]|->)\s*$"


def _accept_named_in_prose(match: Any) -> bool:
    """A secret-looking word in prose with a word that names a secret shortly before it in the same
    sentence ("the auth token was rotated this morning; the old one was 79cd…"), or shortly after
    it ("u7zj… is the password for …"). Hex needs a connector (`was`, `to`, `=`) and no commit or
    hash nearby, so that "the token fix landed in 2b7e…" stays."""
    import re
    text, start, end, value = match.string, match.start("s"), match.end("s"), match.group("s")
    before = text[max(0, start - 100):start]
    before = before[before.rfind("\n") + 1:]
    ends = list(re.finditer(r"[.!?]\s+(?=[A-Z])", before)) if "." in before or "!" in before or "?" in before else ()
    if ends:
        before = before[ends[-1].end():]  # the same sentence
    named_before = re.search(_PROSE_SECRET_WORDS, before) or re.search(_PROSE_NEAR_WORDS, before)
    if not named_before:
        after = text[end:end + 60].split("\n", 1)[0]
        if re.match(_PROSE_NAMED_AFTER, after) is None:
            return False
    if not _looks_like_prose_secret(value) or re.search(_PROSE_NOT_A_SECRET_BEFORE, before):
        return False
    calls = [m.end() for m in re.finditer(r"\w\(", before)]
    if calls and ")" not in before[calls[-1]:]:
        return False  # an argument in code: `s.tokens.Issue(ctx, u.ID, 15*time.Minute)`
    return not (re.fullmatch(r"[0-9a-fA-F]+", value) and (
        not re.search(_PROSE_CONNECTOR, before) or re.search(_PROSE_HASH_WORDS, before[-40:])))


def _looks_like_prose_secret(value: str) -> bool:
    """`9wru%0%GvJl3xk`, `xh62-x8i0`, `slate-nimbus-848-olive-Birch`, 32+ hex digits, base64; not
    `us-east-1`, `k8s-prod-01`, `OAuth2Client`, `TTL=3600`, a date, a host, an email, an image, code,
    a path or a version."""
    import re
    v = value
    named = re.fullmatch(r"[A-Za-z_]{1,30}=(.+)", v)
    if named:
        v = named.group(1)  # `TTL=3600` and `zn=pKzg.xo2…` are judged by their values
    if len(v) < 8 or v.startswith("-") or "://" in v or _is_reference(v) or _is_path_or_version(v):
        return False
    if re.fullmatch(r"[0-9a-fA-F]+", v):
        return len(v) >= 32  # shorter runs are ids and abbreviated commits
    if re.search(r"\d{4}-\d\d-\d\d|\d:\d\d|^(?i:sha\d*|md5)[:\-]", v) or re.fullmatch(r"[\d.,:%+\-]+[A-Za-z]{0,3}", v):
        return False  # a date, a time, a digest's name, a quantity
    if re.fullmatch(r"[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)*\.[A-Za-z]{2,}(?::\S*)?|[\w.\-]+@\d+(?:\.\d+){3}(?::\S*)?"
                    r"|[a-z0-9\-]+(?:\.[a-z0-9\-]+)+|[a-z0-9][a-z0-9._/\-]*:[\w.\-]+", v) or _is_identifier_like(v):
        return False  # an email or scp target, a host name, an image (`postgres:16`), a UUID
    if re.match(r"[A-Za-z_]+\d*(?:\.[A-Za-z_]+\d*)*[(\[]|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:[)\]]|$)", v):
        return False  # code: `os.urandom(32)`, `varchar(255)`, `hashlib.sha256)`
    if re.fullmatch(r"[A-Za-z0-9]+(?:[-_.][A-Za-z0-9]+)*", v):
        parts = re.split(r"[-_.]", v)
        if v.isupper():
            return False  # a name in capitals: VAULT_UNSEAL_KEY_1
        if len(parts) >= 4 and any(p.isdigit() for p in parts) and any(c.isupper() for c in v):
            return True  # a passphrase of words, a number and a capital
        if len(parts) > 1:  # `xh62-x8i0` (recovery codes) interleave in every part; `k8s-prod-01` does not
            return all(re.search(r"\d", p) and re.search(r"[A-Za-z]", p) for p in parts) and any(
                len(re.findall(r"[A-Za-z]+|\d+", p)) >= 3 for p in parts)
    return sum(c.isalpha() for c in v) >= 3 and (len(re.findall(r"\d+", v)) >= 2 or re.search(r"[^\w.\-]", v) is not None)


# Values are bounded (256 bare, 4096 quoted) so that `a=a=a=…` cannot make a rule quadratic (a
# quoted value ends at the next quote, so quoted scans do not pile up); an accepted bare value that
# reaches the bound is followed to its end (_end_of_bare_value).
_BARE_VALUE_CAP = 256
_QUOTED_OR_BARE = (r"""(?=(?P<s>\\"[^"\\\n]{0,4096}\\"|"(?:[^"\\\n]|\\.){0,4096}"|'[^'\n]{0,4096}'|`[^`\n]{0,4096}`"""
                   r"""|[^\s,;'"`})\]&<>\\]{1,256}))""")
_TOOL_VALUE = r"""(?P<s>"[^"\n]{0,4096}"|'[^'\n]{0,4096}'|[^\s'"]{1,256})"""
_ARGUMENT = r"""(?:"[^"\n]{0,200}"|'[^'\n]{0,200}'|[^\s'"|;&<>]{1,200})"""  # one argument before the value
_SAME_COMMAND = r"[^\n|;&]{0,200}?"  # the rest of one shell command, bounded
_WORD_START = r"(?:(?<=\\[nrt])|(?<![\w\-]))"  # also right after an escaped \n in JSON or a log
# A cheap look at a name before its value is scanned: only names with a secret-ish word go on.
# It starts on a letter, so a long run of punctuation is rejected at once.
_SECRETISH_NAME = r"(?=[A-Za-z_])(?=[\w.:\-]{0,80}?(?i:key|token|secret|pass|pwd|cred|auth|dsn|cookie|pin|pat|private|session))"
_SECRETISH_IDENTIFIER = r"(?=[A-Za-z_])(?=[\w.]{0,80}?(?i:key|token|secret|pass|pwd|cred|auth|dsn|cookie|pin|pat|private|session))"

# The rules, in the order they run: a name, what decides a doubtful match ("-": the shape is
# proof enough; see ACCEPT_CHECKS), and the pattern, whose group "s" is the part replaced.
# Patterns use these building blocks: {L} and {R} the edges of a token, {VALUE} a quoted or
# bare value (captured in a lookahead), {TOOL_VALUE} a command argument, {COMMAND} the rest of
# one shell command, {WORD_START} a word start (also after an escaped \n), {SECRETISH_NAME}
# and {SECRETISH_IDENTIFIER} a name that may say secret.
# Under each rule, `#   catch:` lines show texts it must redact, «» marking each secret, and
# `#   keep:` lines texts that must come back unchanged (\n is a newline, \t a tab, \\n a
# backslash and an n; any other backslash is itself).
# They are comments here, skipped at run time; the tests run every one against its rule.
REDACTION_TABLE = r'''
# Private keys: keep the BEGIN/END lines, replace the body (also when escaped as \n in JSON).
private-key-block            -                      -----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----(?P<s>(?:[A-Za-z0-9+/=\s:,.\\_]|-(?!----))+)
#   catch: -----BEGIN RSA PRIVATE KEY-----«\nMIIEowIBAAKCAQEAu1SU1LfVLPHC\n»-----END RSA PRIVATE KEY-----
#   catch: "key": "-----BEGIN PRIVATE KEY-----«\\nMIIEvQIBADANBgkqhkiG9w0BAQEF\\n»-----END PRIVATE KEY-----\\n"
#   keep:  -----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOC\n-----END PUBLIC KEY-----
# Credentials in URLs of any scheme: scheme://user:PASSWORD@host.
url-credentials              not-reference          (?i)(?<![a-z0-9+.\-])[a-z][a-z0-9+.\-]{1,30}://[^\s/?#:'"<>]*:(?P<s>[^\s/?#@'"<>]+)@
#   catch: psql postgres://app:«s3cr3tpw»@db.example.com:5432/app
#   keep:  psql postgres://app:${DB_PASSWORD}@db.example.com:5432/app
url-token-user               random                 (?i)(?<![a-z0-9+.\-])[a-z][a-z0-9+.\-]{1,30}://(?P<s>[A-Za-z0-9_\-]{20,256})(?::[^\s/?#@'"<>]*)?@
#   catch: git clone https://«x9Kq2LmN4pR7sT1vW3yZ5bD8»@git.example.com/acme/infra.git
#   keep:  git clone https://deploy-bot-readonly@git.example.com/acme/infra.git
slack-webhook                -                      hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9/_+\-]{16,})
#   catch: SLACK_WEBHOOK=https://hooks.slack.com/services/«T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX»
#   keep:  post to hooks.slack.com/services/ with the URL in $SLACK_WEBHOOK
discord-webhook              -                      discord(?:app)?\.com/api/webhooks/\d+/(?P<s>[A-Za-z0-9_\-]{20,})
#   catch: https://discord.com/api/webhooks/123456789012345678/«EXAMPLEexampleEXAMPLEexample_token-0123»
#   keep:  https://discord.com/api/webhooks/{webhook.id}/{webhook.token}
# Provider tokens by their published shapes.
aws-secret-after-key-id      random                 (?:AKIA|ASIA)[A-Z0-9]{16}[^\n]{0,60}?(?<![A-Za-z0-9/+=])(?P<s>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])
#   catch: deploy,«AKIAIOSFODNN7EXAMPLE»,«wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY»
#   keep:  grep AKIA credentials.csv | cut -d, -f2 | sha1sum
twilio-auth-token-after-sid  -                      AC[0-9a-f]{32}["',\s]{1,8}(?P<s>[0-9a-f]{32})(?![0-9a-f])
#   catch: client = Client("AC0123456789abcdef0123456789abcdef", "«0123456789abcdef0123456789abcdef»")
#   keep:  account AC0123456789abcdef0123456789abcdef, message SM0123456789abcdef0123456789abcdef
aws-access-key-id            -                      {L}(?P<s>(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}){R}
#   catch: export AWS_ACCESS_KEY_ID=«AKIAIOSFODNN7EXAMPLE»
#   keep:  long-term key ids start with AKIA, temporary ones with ASIA
github-token                 -                      {L}(?P<s>gh[pousr]_[A-Za-z0-9]{30,255}){R}
#   catch: export GITHUB_TOKEN=«ghp_EXAMPLEexampleEXAMPLEexample012345»
#   keep:  classic tokens look like ghp_ and 36 characters
github-fine-grained-token    -                      {L}(?P<s>github_pat_[A-Za-z0-9_]{22,255}){R}
#   catch: GH_TOKEN=«github_pat_11EXAMPLE0example_EXAMPLEexampleEXAMPLE»
#   keep:  fine-grained tokens start with github_pat_
gitlab-token                 -                      {L}(?P<s>gl(?:pat|ptt|dt|rt|cbt|soat|ffct|agent|imt|oas|ft|cd)-[A-Za-z0-9_\-]{20,255}){R}
#   catch: GITLAB_TOKEN=«glpat-EXAMPLEexample0123456»
#   keep:  create a glpat- token under Settings > Access tokens
gitlab-runner-token          -                      {L}(?P<s>GR1348941[A-Za-z0-9_\-]{20,}){R}
#   catch: --registration-token «GR1348941EXAMPLEexample012345»
#   keep:  runner registration tokens begin with GR1348941
slack-token                  -                      {L}(?P<s>xox[abposre]-[A-Za-z0-9\-]{10,255}){R}
#   catch: SLACK_BOT_TOKEN=«xoxb-0000000000-0000000000000-EXAMPLEexample»
#   keep:  bot tokens start with xoxb- and user tokens with xoxp-
slack-app-token              -                      {L}(?P<s>xapp-\d-[A-Za-z0-9\-]{20,255}){R}
#   catch: «xapp-1-A0EXAMPLE-0000000000000-abcdef0123456789»
#   keep:  app-level tokens start with xapp-1-
stripe-key                   -                      {L}(?P<s>(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{16,255}){R}
#   catch: Stripe.api_key = «sk_test_EXAMPLEexample0123456789»
#   keep:  test keys start with sk_test_ and live keys with sk_live_
stripe-webhook-secret        -                      {L}(?P<s>whsec_[A-Za-z0-9]{24,255}){R}
#   catch: STRIPE_WEBHOOK_SECRET=«whsec_EXAMPLEexampleEXAMPLE0123»
#   keep:  the signing secret starts with whsec_
anthropic-key                -                      {L}(?P<s>sk-ant-[a-z]{2,10}\d{0,3}-[A-Za-z0-9_\-]{20,255}){R}
#   catch: x-api-key: «sk-ant-api03-EXAMPLEexampleEXAMPLE-example_0123»
#   keep:  Anthropic keys start with sk-ant-api03-
openai-key                   -                      {L}(?P<s>sk-(?:proj-|svcacct-|admin-|None-)?(?=[A-Za-z_\-]{0,255}\d)[A-Za-z0-9_\-]{20,255}){R}
#   catch: OPENAI_API_KEY=«sk-proj-EXAMPLE0example1EXAMPLE2»
#   keep:  git checkout sk-learning-rate-warmup-schedule
google-api-key               -                      {L}(?P<s>AIza[0-9A-Za-z_\-]{35}){R}
#   catch: ?key=«AIzaSyEXAMPLEexampleEXAMPLEexample01234»
#   keep:  browser keys start with AIza
google-oauth                 -                      {L}(?P<s>(?:GOCSPX-[A-Za-z0-9_\-]{20,}|ya29\.[0-9A-Za-z_\-]{20,}|1//0[0-9A-Za-z_\-]{30,})){R}
#   catch: {"client_id": "0000.apps.googleusercontent.com", "client_secret": "«GOCSPX-EXAMPLEexampleEXAMPLE0123»"}
#   keep:  access tokens start with ya29. and refresh tokens with 1//0
google-private-key-id        -                      "private_key_id"\s*:\s*"(?P<s>[0-9a-f]{40})"
#   catch: "private_key_id": "«0123456789abcdef0123456789abcdef01234567»"
#   keep:  "private_key_id": "${KEY_ID}"
hugging-face-token           -                      {L}(?P<s>(?:hf_|api_org_)[A-Za-z0-9]{30,60}){R}
#   catch: HF_TOKEN=«hf_EXAMPLEexampleEXAMPLEexample0123»
#   keep:  pip install hf_transfer
npm-token                    -                      {L}(?P<s>npm_[A-Za-z0-9]{36}){R}
#   catch: export NPM_TOKEN=«npm_EXAMPLEexampleEXAMPLEexample01234567»
#   keep:  npm_config_registry=https://registry.example.com/
pypi-token                   -                      {L}(?P<s>pypi-Ag[A-Za-z0-9_\-]{50,}){R}
#   catch: twine upload -u __token__ -p «pypi-AgEIcHlwaS5vcmcEXAMPLEexampleEXAMPLEexampleEXAMPLE0123»
#   keep:  upload tokens start with pypi-AgEI
sendgrid-key                 -                      {L}(?P<s>SG\.[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{30,64}){R}
#   catch: SENDGRID_API_KEY=«SG.EXAMPLEexample0123.EXAMPLEexampleEXAMPLEexample01234»
#   keep:  host SG.eu-west.example.com
twilio-key-and-secret        -                      SK[0-9a-fA-F]{32}["',\s]{1,8}(?P<s>[A-Za-z0-9]{32})(?![A-Za-z0-9])
#   catch: Client.new('«SK0123456789abcdef0123456789abcdef»', '«EXAMPLEexampleEXAMPLEexample0123»')
#   keep:  sku = "SKU0123", region = "us1"
twilio-api-key               -                      {L}(?P<s>SK[0-9a-fA-F]{32}){R}
#   catch: TWILIO_API_KEY=«SK0123456789abcdef0123456789abcdef»
#   keep:  sku SK-0123456789abcdef0123456789abcdef
sonar-token                  -                      {L}(?P<s>sq[uap]_[a-f0-9]{40}){R}
#   catch: SONAR_TOKEN=«sqp_0123456789abcdef0123456789abcdef01234567»
#   keep:  project tokens start with sqp_ and user tokens with squ_
mailgun-key                  -                      {L}(?P<s>key-[0-9a-zA-Z]{32}|[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8}){R}
#   catch: MAILGUN_API_KEY=«key-0123456789abcdefEXAMPLEexample01»
#   keep:  a key-value store
# 64 random bytes in base64, unless it is an sha512 digest
azure-account-key-shape      random                 (?<![A-Za-z0-9+/])(?<!sha512-)(?P<s>[A-Za-z0-9+/]{86}==)(?![A-Za-z0-9+/=])
#   catch: «EXAMPLEexample0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ+/EXAMPLE0==»
#   keep:  "integrity": "sha512-EXAMPLEexample0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ+/EXAMPLE0=="
shopify-token                -                      {L}(?P<s>shp(?:at|ss|ca|pa|ua)_[a-fA-F0-9]{32}){R}
#   catch: X-Shopify-Access-Token: «shpat_0123456789abcdef0123456789abcdef»
#   keep:  admin API tokens start with shpat_
digitalocean-token           -                      {L}(?P<s>do[opr]_v1_[a-f0-9]{64}){R}
#   catch: doctl auth init -t «dop_v1_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef»
#   keep:  personal tokens start with dop_v1_
databricks-token             -                      {L}(?P<s>dapi[a-f0-9]{32}(?:-\d)?){R}
#   catch: DATABRICKS_TOKEN=«dapi0123456789abcdef0123456789abcdef»
#   keep:  dapi_version = 2
azure-storage-key            -                      (?i)(?:AccountKey|SharedAccessKey|SharedSecret)\s*=\s*(?P<s>[A-Za-z0-9+/]{20,}={0,2})
#   catch: DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=«EXAMPLEexample0123456789EXAMPLEexample+/==»;EndpointSuffix=core.windows.net
#   keep:  DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=${AZURE_STORAGE_KEY}
azure-sas-signature          -                      (?i)(?<![a-z])sig=(?P<s>[A-Za-z0-9%+/=]{20,})
#   catch: https://acme.blob.core.windows.net/c/x?sv=2022-11-02&sp=r&sig=«EXAMPLEexample0123456789%2Bexample%3D»
#   keep:  git log --show-signature=true
telegram-bot-token           -                      (?:(?<=bot)|(?<![\w:]))(?P<s>\d{6,12}:[A-Za-z0-9_\-]{35}){R}
#   catch: https://api.telegram.org/bot«123456789:AAEXAMPLEexampleEXAMPLEexample01234»/getMe
#   keep:  build 123456789:done at 12:30:00
discord-bot-token            -                      {L}(?P<s>[MNO][A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,40}){R}
#   catch: client.run("«MTEXAMPLEexampleEXAMPLE012.GhAbCd.EXAMPLEexampleEXAMPLEexample01»")
#   keep:  Message.edit.timestamp
jwt                          -                      {L}(?P<s>eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*){R}
#   catch: jwt «eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk»
#   keep:  the header alone: eyJhbGciOiJIUzI1NiJ9
other-provider-token         -                      {L}(?P<s>(?:AGE-SECRET-KEY-1[0-9A-Z]{58}|lin_api_[A-Za-z0-9]{40}|hvs\.[A-Za-z0-9_\-]{24,}|dp\.pt\.[A-Za-z0-9]{40,}|PMAK-[a-f0-9]{24}-[a-f0-9]{34}|glsa_[A-Za-z0-9]{32}_[a-f0-9]{8}|NRAK-[A-Z0-9]{27}|sntrys_[A-Za-z0-9+/=_]{50,}|ATATT3[A-Za-z0-9_\-=]{100,})){R}
#   catch: vault login «hvs.EXAMPLEexampleEXAMPLE0123»
#   keep:  service tokens start with hvs.
# Authorization headers and bearer tokens.
authorization-header         header-token           (?i){WORD_START}(?:proxy-)?authorization["']?(?:\s*[:=,]\s*|[ \t]+)["'`]?(?:(?:bearer|basic|token|bot|digest|negotiate|apikey)\s+)?(?P<s>[^\s"'`,;\\]{6,})
#   catch: curl -H 'Authorization: Basic «ZXhhbXBsZTpleGFtcGxl»' https://api.example.com
#   keep:  curl -H "Authorization: Bearer $API_TOKEN" https://api.example.com
# AuthenticationHeaderValue("Bearer", "…")
scheme-and-token-arguments   header-token           ["'](?:Bearer|Basic|Token)["']\s*,\s*["'](?P<s>[^"'\n]{8,1024})["']
#   catch: new AuthenticationHeaderValue("Bearer", "«EXAMPLEexample0123456789»");
#   keep:  new AuthenticationHeaderValue("Bearer", "{access_token}");
bearer-token                 header-token           (?<![\w-])[Bb]earer\s+(?P<s>[A-Za-z0-9._~+/=\-]{8,})
#   catch: got a 401 with Bearer «EXAMPLEexample0123456789»
#   keep:  the API uses Bearer authentication
# Tool-specific password arguments.
mysql-password               not-reference          (?<![\w-])(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlsh|mariadb|mariadb-dump)\b{COMMAND}[\s"',]-p{TOOL_VALUE}
#   catch: mysql -u root -p«S3cretPw» app
#   keep:  mysql -u root -p app
sqlcmd-password              not-reference          (?<![\w-])(?:sqlcmd|bcp|osql|isql|ipmitool)\b{COMMAND}\s-P\s*{TOOL_VALUE}
#   catch: sqlcmd -S db.example.com -U sa -P '«Hedgehog7!»' -Q "SELECT 1"
#   catch: ipmitool -I lanplus -H bmc.example.com -U ADMIN -P «Bmc-Pass-2291» chassis status
#   keep:  sqlcmd -S db.example.com -U sa -P "$SA_PASSWORD" -Q "SELECT 1"
ldap-bind-password           not-reference          (?<![\w-])ldap\w*\b{COMMAND}\s-w\s+{TOOL_VALUE}
#   catch: ldapsearch -x -D "cn=admin,dc=example,dc=com" -w '«Saffron2395!»' -b "dc=example,dc=com"
#   keep:  ldapsearch -x -D "cn=admin,dc=example,dc=com" -w "$LDAP_PW" -b "dc=example,dc=com"
user-password-flag           user-password          (?<![\w-])(?:-[a-zA-Z]{0,3}u|--user)(?:\s+|=)["']?(?P<user>[^\s:'"]+):(?P<s>'[^'\n]+'|"[^"\n]+"|[^\s'"]+)
#   catch: curl -u admin:«pa55word» https://ci.example.com
#   keep:  curl -u "$CI_USER:$CI_PASS" https://ci.example.com
sshpass                      not-reference          \bsshpass\s+(?:-[a-oq-zA-Z]\S*\s+)*-p\s*{TOOL_VALUE}
#   catch: sshpass -p '«batman_forever»' ssh admin@10.0.3.7
#   keep:  sshpass -p "$SSHPASS" ssh admin@10.0.3.7
#   keep:  usage: sshpass -p password ssh host
login-password               not-reference          \b(?:docker|podman|buildah|skopeo|nerdctl|helm|oc|az|cf|crane|regctl)(?:\s+[\w.\-]+){0,2}?\s+login\b{COMMAND}\s-p(?:\s+|=){TOOL_VALUE}
#   catch: docker login -u jdoe -p «a128TyHE6T_z7Q» registry.example.com
#   keep:  docker login -u jdoe -p "$REGISTRY_PASSWORD" registry.example.com
# Python requests: auth=("user", "password")
auth-tuple                   not-reference          \bauth\s*=\s*\(\s*["'][^"'\n]{1,100}["']\s*,\s*(?P<s>"[^"\n]{1,1024}"|'[^'\n]{1,1024}')
#   catch: requests.get(url, auth=("api", "«key-EXAMPLE0123»"))
#   keep:  requests.get(url, auth=(user, password))
# Go: user:password@tcp(host:3306)/db
dsn-password                 not-reference          (?<![\w/])[\w.\-]{1,64}:(?P<s>[^\s:@/'"]{1,256})@(?:tcp|unix|udp)\(
#   catch: dsn := "deploy:«Zw8DYHwuHZ»@tcp(db.example.com:3306)/ledger"
#   keep:  dsn := "deploy:%s@tcp(db.example.com:3306)/ledger"
# ~/.pgpass: host:port:db:user:password
pgpass-line                  not-reference          (?<![\w.:/\-])[\w.\-*]+:(?:\d{2,5}|\*):[\w.\-*]+:[\w.\-*]+:(?P<s>[^\s'":]{4,256})
#   catch: db.example.com:5432:app_prod:readonly:«2yNEs9cSNamcjq»
#   keep:  db.example.com:5432:app_prod:readonly:*
# wrangler secret put NAME <<< '…'
secret-here-string           not-reference          \bsecrets?\b{COMMAND}<<<[ \t]*{TOOL_VALUE}
#   catch: wrangler secret put API_TOKEN <<< '«xQrCgdcGlvVzBXD_nd2pAL»'
#   keep:  wrangler secret put API_TOKEN <<< "$API_TOKEN"
openssl-enc-key              not-reference          \bopenssl\s+enc\b{COMMAND}\s-k\s+{TOOL_VALUE}
#   catch: openssl enc -aes-256-cbc -pbkdf2 -k «Orbit-otter-4414» -in backup.tar
#   keep:  openssl enc -aes-256-cbc -pbkdf2 -k "$BACKUP_KEY" -in backup.tar
ssm-parameter-value          not-reference          \bput-parameter\b{COMMAND}\s--value(?:\s+|=){TOOL_VALUE}
#   catch: aws ssm put-parameter --name /prod/db/password --type SecureString --value '«7Uig%yTq%Fn»'
#   keep:  aws ssm put-parameter --name /prod/db/password --type SecureString --value "$DB_PASSWORD"
# echo -n '…' | vercel env add NAME, … | docker login --password-stdin
piped-secret                 not-reference          \b(?:echo|printf)(?:\s+-[a-zA-Z]+)*\s+(?P<s>"[^"\n]{0,4096}"|'[^'\n]{0,4096}'|[^\s'"]{0,255}[^\s'")])\s*\)?\s*\|[^\n|;&]{0,80}?(?:secret|env\s+add|password-stdin|passwd|chpasswd|login|--stdin)
#   catch: echo -n '«Timber!prism!6599»' | vercel env add DB_PASSWORD production
#   keep:  echo -n "$DB_PASSWORD" | vercel env add DB_PASSWORD production
# (echo PASSWORD; echo PASSWORD) | smbpasswd -s -a USER: the first of the pair.
piped-secret-pair            not-reference          \(\s*(?:echo|printf)(?:\s+-[a-zA-Z]+)*\s+{TOOL_VALUE}\s*;[^\n|&()]{0,200}\)\s*\|[^\n|;&]{0,80}?(?:passwd|chpasswd|--stdin|password-stdin|login)
#   catch: (echo «sCif@XrlrXm3bk.H»; echo «sCif@XrlrXm3bk.H») | smbpasswd -s -a deploy
#   keep:  (echo "$PW"; echo "$PW") | smbpasswd -s -a deploy
openssl-pass                 not-reference          -pass(?:in|out)?\s+["']?pass:(?P<s>[^\s'"]+)
#   catch: openssl rsa -in enc.key -passin pass:«pumpkin2023» -out plain.key
#   catch: openssl genrsa -aes256 -passout 'pass:«Hztux36LxxrX0MT)McUt7D»' -out ca.key 4096
#   keep:  openssl rsa -in enc.key -passin env:KEY_PASS -out plain.key
redis-cli-password           not-reference          \bredis-cli\b{COMMAND}\s-a\s+{TOOL_VALUE}
#   catch: redis-cli -h cache.example.com -a «Q4AFZytotfmjWJ» PING
#   keep:  redis-cli -h cache.example.com -a "$REDIS_PASSWORD" PING
gh-secret-body               not-reference          \bgh\s+secret\s+set\b{COMMAND}\s(?:-b|--body)(?:\s+|=){TOOL_VALUE}
#   catch: gh secret set API_KEY --body "«moLerHqv4F4vjgMR»"
#   keep:  gh secret set API_KEY --body "$API_KEY"
powershell-secure-string     not-reference          (?i)ConvertTo-SecureString(?:\s+-(?:String|AsPlainText|Force)\b)*\s+(?P<s>"[^"\n]*"|'[^'\n]*')
#   catch: $pw = ConvertTo-SecureString "«Tr0ub4dor&3»" -AsPlainText -Force
#   catch: Set-ADAccountPassword -Identity admin2 -Reset -NewPassword (ConvertTo-SecureString -AsPlainText '«N)SWedA2mTLYP»' -Force)
#   keep:  $pw = ConvertTo-SecureString $env:DB_PASSWORD -AsPlainText -Force
netrc-password               -                      \bmachine\s+\S+(?:\s+(?:login|account)\s+\S+)*\s+password\s+(?P<s>\S+)
#   catch: machine ftp.example.com login deploy password «Jupiter#9»
#   keep:  machine ftp.example.com login deploy
# Passwords given as arguments to account and credential commands, across systems.
net-user-password            argument               (?i)\bnet(?:\.exe)?[ \t]+user[ \t]+{ARG}[ \t]+{TOOL_VALUE}
#   catch: net user alice «Tr1cky!Pass» /add
#   keep:  net user alice * /add
#   keep:  net user svc_sql %SVC_SQL_PW% /add /domain
net-use-password             argument               (?i)\bnet(?:\.exe)?[ \t]+use[ \t]+(?:[A-Z]:[ \t]+)?\\\\\S+[ \t]+{TOOL_VALUE}
#   catch: net use \\fs01.example.com\finance «rl#6FQ#uxg1» /user:CORP\app
#   keep:  net use Z: \\files.example.com\media * /user:media /persistent:yes
windows-password-switch      argument               (?i)(?<![\w/:.\-~])/(?:p|pass|password|passwd|pwd)[:=]{TOOL_VALUE}
#   catch: xfreerdp /v:ts01.example.com /u:jdoe /p:«swu3s13gPzec_F» /cert:ignore
#   catch: cmdkey /add:fs01 /user:CORP\jdoe /pass:«Vx82!kqL0p»
#   keep:  xfreerdp /v:ts01.example.com /u:jdoe /from-stdin
schtasks-password            argument               (?i)\bschtasks\b{COMMAND}[ \t]/r?p[ \t]+{TOOL_VALUE}
#   catch: schtasks /create /tn backup /tr backup.cmd /ru CORP\svc /rp «Gq7!vT2mZx» /sc daily
#   keep:  schtasks /query /tn backup /v
mysqladmin-password          argument               \bmysqladmin\b{COMMAND}[ \t]password[ \t]+{TOOL_VALUE}
#   catch: mysqladmin -u root password '«q8Sq3u8+6lOrj»'
#   keep:  mysqladmin -u root password "$NEW_ROOT_PW"
# htpasswd -b FILE USER PASSWORD, htpasswd -nb USER PASSWORD, mosquitto_passwd -b FILE USER PASSWORD
batch-password-file          argument               \b(?:htpasswd|mosquitto_passwd)(?=(?:[ \t]+-[A-Za-z]+(?:[ \t]+\d+)?)*?[ \t]+-[A-Za-z]*b)(?:[ \t]+-[A-Za-z]+(?:[ \t]+\d+)?)*(?:[ \t]+(?!-){ARG}){1,2}[ \t]+{TOOL_VALUE}(?=[ \t]*(?:[|;&)>\n]|$))
#   catch: htpasswd -b /etc/nginx/.htpasswd reporting "«mD24nmHJ9:73i»"
#   catch: htpasswd -nbB admin «Xq4!zLr8Tp»
#   catch: mosquitto_passwd -b /etc/mosquitto/passwd sensor33 «ZN&_+fh8n51fqC»
#   keep:  htpasswd -c /etc/nginx/.htpasswd admin
#   keep:  htpasswd -b .htpasswd admin "$ADMIN_PW"
broker-user-password         argument               \brabbitmqctl\b{COMMAND}[ \t](?:add_user|change_password|authenticate_user)[ \t]+{ARG}[ \t]+{TOOL_VALUE}
#   catch: rabbitmqctl add_user ops '«xpEft6+or}e/J»' && rabbitmqctl set_user_tags ops administrator
#   catch: sudo rabbitmqctl change_password etl «7LtYfbGh-fQBN%mcp=9»
#   keep:  rabbitmqctl add_user app "${RABBIT_PASS}"
xmpp-user-password           argument               \b(?:ejabberdctl|prosodyctl)\b{COMMAND}[ \t](?:register|change_password|check_password)[ \t]+{ARG}[ \t]+{ARG}[ \t]+{TOOL_VALUE}
#   catch: ejabberdctl register svc_backup chat.example.com '«25^sa7a4qzbzzK~Op»'
#   keep:  ejabberdctl registered_users chat.example.com
mqtt-admin-password          argument               \bemqx(?:_ctl|[ \t]+ctl)[ \t]+(?:admins|users)[ \t]+(?:add|passwd)[ \t]+{ARG}[ \t]+{TOOL_VALUE}
#   catch: emqx_ctl admins passwd admin «a7d-J6jadp+aq=P»
#   keep:  emqx_ctl admins list
admin-password-reset         argument               \b(?:grafana(?:-cli|[ \t]+cli)\b{COMMAND}[ \t]reset-admin-password|neo4j-admin\b{COMMAND}[ \t]set-initial-password)[ \t]+{TOOL_VALUE}
#   catch: grafana-cli admin reset-admin-password «Nu%HgQmVR%5me»
#   catch: neo4j-admin dbms set-initial-password «Graph-42-Lantern»
#   keep:  grafana-cli admin reset-admin-password --password-from-stdin
#   keep:  usage: grafana-cli admin reset-admin-password <new password>
# dscl . -passwd /Users/NAME [OLD] NEW: the first value, then the second.
dscl-password                argument               \bdscl\b{COMMAND}[ \t]-passwd[ \t]+{ARG}[ \t]+{TOOL_VALUE}
#   catch: sudo dscl . -passwd /Users/app "«cfQw*g:ey8)w2HbeyX»"
#   keep:  dscl . -passwd /Users/kiosk
dscl-new-password            argument               \bdscl\b{COMMAND}[ \t]-passwd[ \t]+{ARG}[ \t]+{ARG}[ \t]+{TOOL_VALUE}
#   catch: dscl . -passwd /Users/ops «4aaLgNl2pdZ2KoHfj» «Pqtu4qgWjrNef0pH1»
#   keep:  dscl . -read /Users/ops UniqueID
#   keep:  usage: dscl . -passwd /Users/username oldpassword newpassword
ldap-new-password            argument               \bldappasswd\b{COMMAND}[ \t]-[as][ \t]+{TOOL_VALUE}
#   catch: ldappasswd -x -D "cn=admin,dc=example,dc=com" -W -s «0ayT9g6Gtdkvs» "uid=mwong,dc=example,dc=com"
#   keep:  ldappasswd -x -D "cn=admin,dc=example,dc=com" -W -S "uid=jdoe,dc=example,dc=com"
password-hash-tool           argument               \b(?:openssl[ \t]+passwd|mkpasswd)\b(?:[ \t]+-(?:salt[ \t]+\S+|[mSRPldcC][ \t]+\S+|-?[\w\-]+(?:=\S+)?))*[ \t]+{TOOL_VALUE}
#   catch: usermod -p "$(openssl passwd -6 '«ngBBo>Nv0xzGnw»')" deploy
#   catch: mkpasswd -m sha-512 «Xk29!mPq7z»
#   keep:  openssl passwd -6 -stdin < new-password.txt
wifi-passphrase              argument               \b(?:wpa_passphrase[ \t]+{ARG}|nmcli\b{COMMAND}[ \t](?:[\w\-]*\.psk|[\w\-]*\.password|password|wep-key\d)|iwconfig\b{COMMAND}[ \t]key(?:[ \t]+s:|[ \t]+))[ \t]*{TOOL_VALUE}
#   catch: wpa_passphrase "HomeNet" '«ridge~134~Basil~Harbor»' | sudo tee -a /etc/wpa_supplicant/wpa_supplicant.conf
#   catch: nmcli con modify lab-wifi wifi-sec.key-mgmt wpa-psk wifi-sec.psk «98yuZ-yvHRlf»
#   catch: iwconfig wlan0 essid legacy-lab key s:«J8xrR1z2n0oT6»
#   keep:  wpa_passphrase HomeNet < /dev/tty >> /etc/wpa_supplicant/wpa_supplicant.conf
#   keep:  nmcli --ask dev wifi connect "Office-5G"
oracle-user-password         not-reference          (?i)(?:\b(?:sqlplus|expdp|impdp|sqlldr|rman|dgmgrl)\b(?:[ \t]+-\w+)*[ \t]+["']?(?:(?:userid|target|catalog|auxiliary)[ \t]*=?[ \t]*)?|(?m:^)[ \t]*(?:SQL>[ \t]*)?conn(?:ect)?[ \t]+)[\w$#]+/(?P<s>[^\s@/"']{1,256})(?=[@\s"']|$)
#   catch: sqlplus system/«kDoewo7zNv-y»@//db.example.com:1521/ORCLPDB1 @grants.sql
#   catch: expdp userid=scott/«Tiger-2024x»@orcl directory=dp dumpfile=x.dmp
#   keep:  sqlplus /nolog @scripts/grants.sql
archive-password             argument               \b(?:(?:zip|unzip|zipcloak)\b{COMMAND}[ \t]-P[ \t]*|(?:7z|7za|7zr|7zz|rar|unrar)\b{COMMAND}[ \t]-h?p)(?=[^\s-]){TOOL_VALUE}
#   catch: zip -P '«indigo_773_Oasis_fennel»' -r backup.zip data/
#   catch: 7z a -p«W9Hko=q6Fomf» -mhe=on archive.7z docs/
#   catch: unzip -P «XrWp9%9oeg@@5zfT2@8» dump.zip -d /tmp/dump
#   keep:  7z a -p -mhe=on archive.7z docs/
#   keep:  zip -e confidential.zip q3-report.pdf
ssh-keygen-old-passphrase    argument               \bssh-keygen\b{COMMAND}[ \t]-P[ \t]*{TOOL_VALUE}
#   catch: ssh-keygen -p -P '«gov4w6MqkWcDue!PuDj»' -f ~/.ssh/id_ed25519
#   keep:  ssh-keygen -p -f ~/.ssh/id_ed25519
ssh-keygen-passphrase        argument               \bssh-keygen\b{COMMAND}[ \t]-N[ \t]*{TOOL_VALUE}
#   catch: ssh-keygen -t ed25519 -C "deploy@ci" -N '«TfeoLepl]7Q0z»' -f ./deploy_key
#   keep:  ssh-keygen -t ed25519 -N "" -f ./ci_key -C "ci@build"
keychain-password            argument               \bsecurity[ \t]+(?:(?:unlock|create)-keychain\b{COMMAND}[ \t]-p|add-(?:generic|internet)-password\b{COMMAND}[ \t]-w|import\b{COMMAND}[ \t]-P)[ \t]+{TOOL_VALUE}
#   catch: security add-generic-password -a ci -s deploy -w «Ld9!vQ2xTz»
#   catch: security unlock-keychain -p «kc-Pass-8812» build.keychain
#   keep:  security unlock-keychain ~/Library/Keychains/login.keychain-db
# Tomcat's digest.sh CREDENTIALS, WildFly's add-user.sh USER PASSWORD, cf auth/create-user USER PASSWORD
app-server-user-password     argument               \b(?:(?:digest|tomcat-digest)\.(?:sh|bat)(?:[ \t]+-[aeiskh][ \t]+\S+)*|add-user\.(?:sh|bat)(?:[ \t]+-[\w\-]+)*[ \t]+(?!-){ARG}|cf[ \t]+(?:auth|create-user)[ \t]+{ARG})[ \t]+{TOOL_VALUE}
#   catch: $CATALINA_HOME/bin/digest.sh -a SHA-256 -i 100000 «230hir2n_51c+lEmkqlYy»
#   catch: ./add-user.sh admin «Wf1ly-Admin-77»
#   catch: cf auth admin «Cf-Pass-2024x»
#   keep:  ./add-user.sh --help
object-store-secret-key      argument               \bmc[ \t]+(?:alias[ \t]+set|config[ \t]+host[ \t]+add)[ \t]+{ARG}[ \t]+{ARG}[ \t]+{ARG}[ \t]+{TOOL_VALUE}
#   catch: mc alias set prod https://s3.example.com AKEXAMPLE01 «wJalrXUtnFEMIK7MDENGbPxRfi»
#   keep:  mc alias set prod https://s3.example.com
# user,password and user%password in one argument: lftp -u, smbclient -U, jenkins-cli -auth user:token.
joined-user-password         argument               \b(?:lftp\b{COMMAND}[ \t]-u[ \t]+["']?[^\s,'"]+,|(?:smbclient|rpcclient|smbcacls|smbget|smbmap)\b{COMMAND}[ \t](?:-U[ \t]*|--user(?:name)?[ \t=])["']?[^\s%'"]+%|jenkins-cli(?:\.jar)?\b{COMMAND}[ \t]-auth[ \t]+["']?[^\s:'"@]+:)(?P<s>[^\s'"]{1,256})
#   catch: lftp -u deploy,«Ftp-Pass-551» sftp://files.example.com
#   catch: smbclient //fs01/share -U 'CORP\alice%«Smb!Pass42»' -c ls
#   catch: java -jar jenkins-cli.jar -s https://ci.example.com -auth admin:«11b7c0e2f4a94d5e8a6b3c2d1e0f9a8b» who-am-i
#   keep:  smbclient //fs01/share -U alice -c "ls"
snmp-auth-passphrase         argument               \bsnmp\w*\b{COMMAND}[ \t]-A[ \t]+{TOOL_VALUE}
#   catch: snmpwalk -v3 -l authPriv -u monitor -a SHA -A «Auth-Phrase-91» -x AES -X «priv-Phrase-92» host
#   keep:  snmpwalk -v2c -c public host
snmp-privacy-passphrase      argument               \bsnmp\w*\b{COMMAND}[ \t]-X[ \t]+{TOOL_VALUE}
#   catch: snmpget -v3 -l authPriv -u monitor -x AES -X «priv-Phrase-92» host sysUpTime.0
#   keep:  snmpget -v3 -l noAuthNoPriv -u monitor host sysUpTime.0
# Tokens given as arguments to CLI logins: vault login TOKEN, snyk auth TOKEN, codecov -t TOKEN.
cli-login-token              argument               (?:(?<![\w-])(?:vault[ \t]+login|snyk[ \t]+auth|ngrok(?:[ \t]+config)?[ \t]+(?:add-)?authtoken)|\b(?:codecov(?:-cli)?|codecovcli|doctl[ \t]+auth[ \t]+init)\b{COMMAND}[ \t](?:-t|--token)(?:[ \t]*=)?)[ \t]+{TOOL_VALUE}
#   catch: codecov-cli upload-process -t «d9bc8661ed4c1b5a3247687d9f517cb6890041eb» -r acme/api
#   catch: ngrok config add-authtoken «2aBcD3eFgH4iJkL5mNoP6qRsT»
#   keep:  vault login -method=oidc role=dev
db2-connect-password         argument               (?i)\bconnect[ \t]+to[ \t]+\S+[ \t]+user[ \t]+\S+[ \t]+using[ \t]+{TOOL_VALUE}
#   catch: db2 connect to SAMPLE user db2inst1 using «Db2-Pass-715»
#   keep:  db2 connect to SAMPLE
# Names that say secret, with a space instead of = (setx, Dockerfile ENV, aws configure set).
spaced-assignment            assignment             (?m)(?:(?<![\w-])setx|^[ \t]*ENV|(?<![\w-])set[ \t]+-[gxUlu]+|(?<![\w-])aws\s+configure\s+set|(?<![\w-])(?:launchctl[ \t]+)?setenv)[ \t]+{SECRETISH_NAME}(?P<name>[A-Za-z_][\w.]{0,80})[ \t]+{VALUE}
#   catch: ENV DB_PASSWORD «DeltaForce1»
#   catch: launchctl setenv AWS_SESSION_TOKEN «WVwy0TvtPYL2SDwbUr/QRfREgp1yJnjt20ac6k=»
#   keep:  ENV DB_PASSWORD_FILE /run/secrets/db_password
#   keep:  setenv AWS_SESSION_TOKEN `cat /tmp/session.tok`; aws s3 ls
powershell-env-item          assignment             (?i)\b(?:Set|New)-Item\b[^\n|;]{0,40}?\bEnv:{SECRETISH_NAME}(?P<name>[A-Za-z_]\w{0,80})[ \t]+(?:-Value[ \t]+)?{VALUE}
#   catch: Set-Item -Path Env:KUBE_SESSION_TOKEN -Value '«TXExvjAieVpx59j4WMUUoMO3xtP+o/VEC»'
#   keep:  Set-Item -Path Env:KUBE_SESSION_TOKEN -Value $token
# Secrets set by name on a command line: dotnet user-secrets, pulumi config set --secret, sonar.
secrets-set-command          assignment             \b(?:user-secrets|secrets?)\s+set\s+["']?(?P<name>[\w.:\-]{1,80})["']?\s+(?!-){TOOL_VALUE}
#   catch: dotnet user-secrets set "AzureAd:ClientSecret" "«ww35Q~Z3Gn~mrR.knCNph»"
#   keep:  dotnet user-secrets set "Logging:LogLevel" "Debug"
config-set-secret            not-reference          \bconfig\s+set\s+(?:--[\w\-]+\s+)*?--secret(?:\s+--[\w\-]+)*\s+["']?[\w.:\-]{1,80}["']?\s+{TOOL_VALUE}
#   catch: pulumi config set --secret dbPassword '«Sprocket.Orchid8825!»'
#   keep:  pulumi config set --secret dbPassword "$DB_PASSWORD"
sonar-login                  not-reference          -Dsonar\.(?:login|token|password)=(?P<s>[^\s'"]{1,256})
#   catch: mvn sonar:sonar -Dsonar.login=«0123456789abcdef0123456789abcdef01234567»
#   keep:  mvn sonar:sonar -Dsonar.login=$SONAR_TOKEN
# Tuples and calls that carry a password: Erlang/Elixir configs, HTTP clients, PDO, FTP.
tuple-pair                   assignment             [{(\[]\s*:?["']?(?P<name>[A-Za-z_]\w{0,80})["']?\s*,\s*(?P<s>"[^"\n]{1,1024}"|'[^'\n]{1,1024}')\s*[})\]]
#   catch: {:password, "«M^BCDT%.Wtk9»"}
#   keep:  {:username, "deploy"}
client-auth-call             not-reference          \b(?:basic_auth|http_auth|HTTPBasicAuth|HTTPDigestAuth|BasicAuth|login|authenticate|set_credentials)\s*[=(]\s*\(?\s*["'][^"'\n]{1,100}["']\s*,\s*(?:Some\()?(?P<s>"[^"\n]{1,1024}"|'[^'\n]{1,1024}')
#   catch: client.get(url).basic_auth("admin", Some("«AjhqFcZqF?8p»"))
#   keep:  client.get(url).basic_auth("admin", Some(&password))
bearer-auth-call             not-reference          \.bearer_auth\(\s*(?P<s>"[^"\n]{1,1024}"|'[^'\n]{1,1024}')
#   catch: client.get(url).bearer_auth("«SJo08t7r4O4fRN4t»")
#   keep:  client.get(url).bearer_auth(&token)
pdo-password                 not-reference          \bnew\s+PDO\(\s*["'][^"'\n]*["']\s*,\s*["'][^"'\n]*["']\s*,\s*(?P<s>"[^"\n]{1,1024}"|'[^'\n]{1,1024}')
#   catch: new PDO("mysql:host=db;dbname=crm", "api_rw", "«Q3Mri2T_@csCm»")
#   keep:  new PDO($dsn, $user, $pass)
sigil-assignment             assignment             \$(?P<name>[A-Za-z_]\w{0,80})\s*=\s*(?P<s>"[^"\n]{1,1024}"|'[^'\n]{1,1024}')
#   catch: $token = "«d917e89e62caeea3c88b0de6008e88e5»";
#   keep:  $token_count = "42";
terraform-variable-default   assignment             \bvariable\s+"(?P<name>[\w\-]{1,80})"\s*\{[^{}]{0,300}?default\s*=\s*(?P<s>"[^"\n]{1,1024}")
#   catch: variable "winrm_password" {\n  type    = string\n  default = "«cricket.Sierra8106»"\n}
#   keep:  variable "password_length" {\n  default = "24"\n}
# Databases and caches: SQL users, JDBC, ODBC isql, Redis AUTH and config, cloud-init chpasswd.
sql-identified-by            not-reference          (?i)\bIDENTIFIED\s+(?:WITH\s+\w+\s+)?BY\s+(?:PASSWORD\s+)?(?P<s>'[^'\n]{1,1024}'|"[^"\n]{1,1024}"|[^\s;'"]{1,256})
#   catch: CREATE USER app IDENTIFIED BY '«Q6ve9jfU4_T9»';
#   keep:  CREATE USER app IDENTIFIED BY '${APP_PASSWORD}';
sql-password-clause          not-reference          (?i)\b(?:USER|ROLE)\b[^;\n]{0,80}?\bPASSWORD\s+(?P<s>'[^'\n]{1,1024}')
#   catch: ALTER USER postgres PASSWORD '«Orchid.Saffron6158»';
#   keep:  ALTER USER postgres PASSWORD NULL;
jdbc-oracle-password         not-reference          jdbc:oracle:\w+:[\w.\-]+/(?P<s>[^@\s/]{1,256})@
#   catch: jdbc:oracle:thin:deploy/«oEWVoQGTQuLU3N»@//db.example.com:1521/ORCL
#   keep:  jdbc:oracle:thin:@//db.example.com:1521/ORCL
isql-password                not-reference          \bisql\s+(?:-\w+\s+)*[\w.\-]+\s+[\w.\-]+\s+(?P<s>[^\s\-][^\s]{0,255})
#   catch: isql -v warehouse api_rw «D7Id7kVs7!TOow»
#   keep:  isql -v warehouse
redis-auth                   not-reference          (?m)>[ \t]*AUTH[ \t]+(?:\S+[ \t]+)?(?P<s>\S+)[ \t]*$
#   catch: 127.0.0.1:6379> AUTH «quartzBasaltFalcon1274»
#   keep:  127.0.0.1:6379> ACL WHOAMI
redis-config-password        not-reference          (?m)^\s*(?:requirepass|masterauth)\s+(?P<s>\S+)
#   catch: requirepass «W..f6x57jCh9pd»
#   keep:  # requirepass foobared
redis-acl-password           not-reference          \bSETUSER\b[^\n]{0,200}?\s'?>(?P<s>[^\s']{1,256})
#   catch: redis-cli ACL SETUSER worker on '>«uS_t_7qm-I-oJ0»' '~jobs:*'
#   keep:  redis-cli ACL SETUSER worker on nopass '~jobs:*' '+@all'
chpasswd-list                not-reference          chpasswd:[^\n]{0,40}\n(?:[ \t]+[^\n]*\n){0,3}?[ \t]+list:[ \t]*\|?[ \t]*\n[ \t]+[\w.\-]+:(?P<s>[^\s:]{1,256})
#   catch: chpasswd:\n  list: |\n    ubuntu:«Basalt-pylon4353»\n  expire: false
#   keep:  chpasswd:\n  expire: false\nssh_pwauth: true
# A -u USER -p PASSWORD pair (xcrun altool, docker, many CLIs).
user-then-password-flags     password-flag          (?<![\w-])-u[ \t]+\S+[ \t]+-p[ \t]+(?!-){TOOL_VALUE}
#   catch: xcrun altool --upload-app -f app.ipa -u dev@example.com -p «abcd-efgh-ijkl-mnop»
#   keep:  upload -u deploy -p 2222 build.zip
secret-pair                  pair                   (?i)(?<![\w-])(?P<name>[a-z_\-]*(?:secret_access_key|secret_key|access_token|api_key|password|authtoken|auth-token|token|secret))[ \t]+{VALUE}
#   catch: access_token   «EXAMPLEexample0123456789»
#   keep:  the api_key argument is optional
nested-json-value            assignment             (?<![\w\\])"(?P<name>[\w.\-]{1,80})"\s*:\s*\{[^{}]{0,300}?"value"\s*:\s*(?P<s>"[^"\\\n]{1,1024}")
#   catch: "db_password": { "sensitive": true, "type": "string", "value": "«Fz8kQp2mWx9L»" }
#   keep:  "db_endpoint": { "sensitive": false, "type": "string", "value": "10.6.26.222:5432" }
# Kubernetes and ECS env lists: `- name: API_TOKEN` / `value: "…"`
name-value-pair              assignment             (?<![\w\-])["']?name["']?\s*:\s*["']?(?P<name>[\w.\-]{1,80})["']?\s*[,\n]\s*(?:-\s*)?["']?value["']?\s*:[ \t]*{VALUE}
#   catch: - name: API_TOKEN\n  value: "«EXAMPLEexample0123»"
#   keep:  - name: API_TOKEN\n  valueFrom:\n    secretKeyRef: {name: api, key: token}
# define('DB_PASSWORD', '…'), os.Setenv("TOKEN", "…")
call-with-name-and-value     assignment             (?<![\w.])[\w.]{1,40}\(\s*["'](?P<name>[\w.\-]{1,80})["']\s*,\s*(?P<s>"[^"\n]{1,1024}"|'[^'\n]{1,1024}')
#   catch: define('DB_PASSWORD', '«M^BCDT%.Wtk9o0%»');
#   keep:  define('DB_NAME', 'wordpress');
# signingKey = []byte("…"), token = SecretStr("…")
call-wrapped-value           wrapped-value          (?<![\w.]){SECRETISH_IDENTIFIER}(?P<name>[A-Za-z_][\w.]{0,80})[ \t]*(?::=|=)[ \t]*[\w.\[\]]{0,40}\(\s*(?P<s>"[^"\n]{1,1024}"|'[^'\n]{1,1024}')\s*\)
#   catch: var signingKey = []byte("«sSLbUaHdztEpHqKcB3052d0q»")
#   keep:  var signingKey = []byte(os.Getenv("JWT_SECRET"))
#   keep:  private_key = Path("~/.ssh/id_ed25519").expanduser().read_text()
docker-config-auth           -                      (?i)\.?docker(?:config)?(?:json|cfg)["']?\s*:\s*["']?(?P<s>[A-Za-z0-9+/=]{20,})
#   catch: .dockerconfigjson: «eyJhdXRocyI6eyJyZWdpc3RyeS5leGFtcGxlLmNvbSI6e319fQ==»
#   keep:  type: kubernetes.io/dockerconfigjson
base64-private-key           encoded-private-key    (?<![A-Za-z0-9+/])(?P<s>LS0tLS1CRUdJTi[A-Za-z0-9+/]{20,}={0,2})
#   catch: client-key-data: «LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFb3dJQkFBS0NBUUVBCg==»
#   keep:  client-certificate-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM=
# "Rotate TWILIO_AUTH_TOKEN (32ee…)"
name-in-parentheses          named-random           (?<![\w.])(?P<name>[A-Z][A-Z0-9_]{2,80})[ \t]*\((?P<s>[^\s()]{8,256})\)
#   catch: Rotate TWILIO_AUTH_TOKEN («32ee3996dd674154deb8a8cffe8c0bc6») today
#   keep:  Bump CACHE_KEY_VERSION (v3-2024-09-16)
xml-element                  assignment             <{SECRETISH_NAME}(?P<name>[A-Za-z_][\w.:\-]{0,60})>(?P<s>[^<\s][^<\n]{0,500})</(?P=name)>
#   catch: <password>«Raccoon#5»</password>
#   keep:  <password>${db.password}</password>
# .NET appSettings and NuGet: <add key="SmtpPassword" value="…" />; Spring and Ant: <property name="…" value="…"/>
key-value-attributes         assignment             <[\w:.\-]{1,40}\b[^<>\n]{0,200}?\b(?:key|name)\s*=\s*["'](?P<name>[\w.:\-]{1,80})["'][^<>\n]{0,200}?\bvalue\s*=\s*(?P<s>"[^"\n]{0,4096}"|'[^'\n]{0,4096}')
#   catch: <add key="ClearTextPassword" value="«T7QA0Q0E5iVRIfyOruUps»" />
#   catch: <add key="SmtpPassword" value="«$$T#h0WHUh5^7m:~-ftz»" />
#   keep:  <add key="Environment" value="Production" />
#   keep:  <property name="password" value="${db.password}"/>
# Flags and assignments whose name says secret, in every common syntax.
typed-assignment             assignment             (?<![\w.$\-]){SECRETISH_IDENTIFIER}(?P<name>[A-Za-z_][\w.]{0,80})[ \t]*:[ \t]*[&\w\[\]<>.,' ]{1,40}?[ \t]*=(?!=)[ \t]*{VALUE}
#   catch: pub const API_KEY: &str = "«QZC1HXsnHVzdkMJDTp5E»";
#   keep:  const TOKEN_TTL: Duration = Duration::from_secs(3600);
secret-flag                  flag                   (?<![\w-])--?{SECRETISH_NAME}(?P<name>[A-Za-z][\w.\-]{0,60})(?:=|[ \t]+){VALUE}
#   catch: tool --password «hunter2» --verbose
#   catch: keytool -genkeypair -keystore server.jks -storepass «4Ax9_g7=x7o9n_M» -keypass «W5i-Kp2=aq»
#   keep:  psql --password-file /run/secrets/pw
#   keep:  docker build --secret id=npmrc,src=$HOME/.npmrc .
# A config line whose value runs to the end of the line (INI, YAML, dotenv), whatever its first character.
config-line-value            assignment             (?m)^[ \t]*(?:export[ \t]+|-[ \t]+)?{SECRETISH_NAME}(?P<name>[A-Za-z_][\w.\-]{0,80})[ \t]*(?P<op>[:=])[ \t]*(?P<s>[^\s'"`][^\s]{0,255}(?<![,;]))(?=[ \t]*(?:[ \t][#;][^\n]*)?$)
#   catch: api_key: «>3wtm?c.W,pAcGnlzc3f»
#   catch: password = «ab,c;d&e<f>9»  ; from the vault
#   keep:  description: >
#   keep:  password: <your-password>
secret-assignment            assignment             (?:(?<=\\[nrt])|(?<=\$env[:.])|(?<=[\s{(,]:)|(?<![\w.$\-:/])(?<!\$\{))(?P<q>\\?["']?){SECRETISH_NAME}(?P<name>[A-Za-z_](?:[\w.\-]|:(?=[A-Za-z_])){0,80})(?P=q)\]?[ \t]*(?P<op>:=|=>|=(?!=)|:)[ \t]*{VALUE}
#   catch: export GITHUB_CLIENT_SECRET=«gh_live_8f2a91»
#   catch: {"password": "«hunter2»", "user": "bob"}
#   catch: export A=1 B=2 AWS_SESSION_TOKEN=«IQoJb3JpZ2luX2VjEXAMPLE//////////wEaCXVzLWVhc3QtMSJH+/8=»; aws s3 ls
#   catch: $env.BACKUP_CREDENTIALS = '«PdJAIhoY5r4d8P0GNieiRXrd/MJM2g7QY8Y=»'
#   catch: REDIS_PASSWORD: "«$$qR~54y7.B0H%l5I89O»"
#   catch: "password": "«%b*Zr7wy_h!a2bz16»", "apiKey": '«^x9Kq2LmN4pR7s»', "secret": "«!Zq8wX3vB6nM1»"
#   catch: smtp_settings = { user_name: "mailer", :password => "«[Dgz7vL=oxUEf*o»" }
#   catch: http GET https://api.example.com/v1/query 'X-API-Key:«IGuLwSxVcVNUG6oLPogr91nwka»'
#   keep:  MAX_TOKENS=4096
#   keep:  API_KEY=${API_KEY}
#   keep:  cache_key: "user-{user_id}-v3"
#   keep:  password: !env_var DB_PASSWORD
#   keep:  password: CHANGE_ME  # set by the chart at install time
#   keep:  STRIPE_API_KEY="YOUR_STRIPE_API_KEY" secret_key="xxxxxxxxxxxxxxxx" api_token="<your-token>"
#   keep:  password=%(db_password)s token: "{{ token }}" "passphrase": "${GPG_PASSPHRASE}" "password": "$DB_PASSWORD"
#   keep:  ALTER USER app WITH PASSWORD :'new_password';
#   keep:  rails credentials:edit
# Prose: "the VPN password is Xk29…", "password reset to 'Nl&w…'", "DB password (MCg7…)".
prose-password               password-like          (?i)\b(?:password|passwd|passphrase|pwd)\b[^\n]{0,60}?(?:\bis\b|\bto\b|:|=|\()[ \t]*(?:now[ \t]+)?['"(]?(?P<s>[^\s'"()=]{8,128}?)(?=['")]|[.,;!?]?(?:\s|$))
#   catch: the VPN password is «Xk29!mPq7z»
#   keep:  the password is in the team vault
prose-token                  random-not-identifier  (?i)\b(?:api[ \-]?key|token|secret|access[ \-]?key)\b[^\n]{0,40}?(?:\bis\b|\bare\b|:(?=[ \t]))[ \t]*(?:now[ \t]+)?['"(]?(?P<s>[^\s'"()=]{16,256}?)(?=['")]|[.,;!?]?(?:\s|$))
#   catch: the API token is «11b7c0e2f4a94d5e8a6b3c2d1e0f9a8b7c»
#   keep:  the token is valid for 3600 seconds
prose-user-password          password-like          (?i)\b(?:credentials?|login)\b[^\n]{0,40}?[\w.@\-]+[ \t]+/[ \t]+(?P<s>[^\s/]{8,128}?)(?=[.,;!?]?(?:\s|$))
#   catch: Shared login for the vendor portal: ops@example.com / «wHN73qnm3T0QEx»
#   keep:  credentials for staging / production are in the vault
# Prose that names a secret, then gives it later in the sentence (or gives it, then names it).
prose-named-secret           named-in-prose         (?m)(?:^|(?<=\s))[(\['"`]?(?=[^\s'"`,;\\]{0,255}?\d)(?P<s>[^\s'"`(\[{<,;\\][^\s'"`,;\\]{6,254}[^\s'"`,;\\.!?:)\]}>])(?=[)\]}>'"`]{0,2}[.,;:!?]{0,3}(?:\s|\\|$))
#   catch: Heads up: the auth token was rotated this morning; the old one was «79cd48618c6db19bb7a985129e943407».
#   catch: connected to staging (user app_rw, password «9wru%0%GvJl3xk») and ran the migration
#   catch: 2FA recovery codes for the ops account: «xh62-x8i0», «w3ye-5uj6»
#   catch: Remember that «u7zjBR63weraW]u2/» is the password for the Jenkins admin user.
#   keep:  the token refresh fix landed in 2b7e151628aed2a6abf7158809cf4f3c4f3c4f3c yesterday
#   keep:  the API key for us-east-1 lives in account 123456789012
#   keep:  password hashing moved to argon2id in release-2024-09 (see PR 4521)
# An AWS secret access key: 40 base64 characters near the word "secret".
aws-secret-access-key        random-not-hex         (?i)secret[\w \t:="'-]{0,40}?(?<![A-Za-z0-9/+=])(?P<s>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])
#   catch: $env:AWS_SECRET_ACCESS_KEY = "«wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY»"
#   keep:  secret scan clean at 2b7e151628aed2a6abf7158809cf4f3c4f3c4f3c
'''

ACCEPT_CHECKS = {
    "-": None, "not-reference": _accept_not_reference, "assignment": _accept_assignment, "flag": _accept_flag,
    "password-like": _accept_password_like, "pair": _accept_pair, "user-password": _accept_user_password,
    "header-token": _accept_header_token, "wrapped-value": _accept_wrapped_value,
    "encoded-private-key": _accept_encoded_private_key, "random": _accept_random,
    "random-not-hex": _accept_random_not_hex, "random-not-identifier": _accept_random_not_identifier,
    "named-random": _accept_named_random, "password-flag": _accept_password_flag, "argument": _accept_argument,
    "named-in-prose": _accept_named_in_prose,
}
PATTERN_BLOCKS = {"{VALUE}": _QUOTED_OR_BARE, "{TOOL_VALUE}": _TOOL_VALUE, "{ARG}": _ARGUMENT, "{SECRETISH_IDENTIFIER}": _SECRETISH_IDENTIFIER,
                  "{SECRETISH_NAME}": _SECRETISH_NAME, "{WORD_START}": _WORD_START, "{COMMAND}": _SAME_COMMAND,
                  "{L}": _L, "{R}": _R}


def redaction_rules() -> list:
    """REDACTION_TABLE as RedactionRule records."""
    rules = []
    for line in REDACTION_TABLE.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, check, pattern = line.split(None, 2)
        for block, expansion in PATTERN_BLOCKS.items():
            pattern = pattern.replace(block, expansion)
        rules.append(RedactionRule(name, pattern, ACCEPT_CHECKS[check]))
    return rules


def _compiled_rules():
    """Compiled on first use (compiling costs more than the server's whole handshake) and
    kept on the function: a cache decorator would cost an import at every start."""
    cached = getattr(_compiled_rules, "cache", None)
    if cached is None:
        import re
        cached = tuple((rule, re.compile(rule.pattern)) for rule in redaction_rules())
        _compiled_rules.cache = cached
    return cached


def redact(text: str, known_secrets: Iterable[str] = ()) -> tuple:
    """Return (text with secrets replaced by «redacted», number of replacements).
    known_secrets are exact values to remove wherever they appear (the server's own
    secret environment variables), longest first so that no value is left half replaced."""
    if not text:
        return text, 0
    count = 0
    for secret in known_secrets:
        if secret in text:
            count += text.count(secret)
            text = text.replace(secret, REDACTED)
    for rule, pattern in _compiled_rules():
        text, hits = _apply_rule(rule, pattern, text)
        count += hits
    return text, count


def _apply_rule(rule: RedactionRule, pattern: Any, text: str) -> tuple:
    """Replace the "s" span of each accepted match. Values are often captured in a lookahead,
    so a rejected match (`client = Client(api_key="…")`) does not hide the match inside it."""
    pieces, position, hits = [], 0, 0
    for match in pattern.finditer(text):
        start, end = match.span("s")
        value = match.group("s")
        if start < position or REDACTED in value or (rule.accept is not None and not rule.accept(match)):
            continue
        if len(value) >= 4 and value.startswith('\\"') and value.endswith('\\"'):
            start, end = start + 2, end - 2  # keep escaped quotes
        elif len(value) >= 2 and value[0] in "\"'`" and value[-1] == value[0]:
            start, end = start + 1, end - 1  # keep the quotes
        elif len(value) >= _BARE_VALUE_CAP:
            end = _end_of_bare_value(text, end)  # a 400-character session token goes whole
        if start >= end:
            continue
        pieces += [text[position:start], REDACTED]
        position = end
        hits += 1
    if not hits:
        return text, 0
    pieces.append(text[position:])
    return "".join(pieces), hits


def _end_of_bare_value(text: str, end: int) -> int:
    """Where a bare value that filled its pattern's bound really ends: patterns stop at a bound
    to stay linear, and this runs once per accepted value."""
    import re
    return re.compile(r"[^\s'\"`;,&|<>(){}\[\]\\]*").match(text, end).end()


def is_secret_env_name(name: str) -> bool:
    """Environment variables whose values are redacted wherever they appear."""
    if name.upper().endswith(("_SOCK", "_PATH", "_FILE", "_DIR", "_HOST", "_PORT", "_URL", "_USER", "_ID")):
        return False
    parts = _name_parts(name)
    return secret_strength(name) == 2 or any(p in ("token", "secret", "password", "apikey", "passwd") for p in parts)


class Redactor:
    """Redacts every free-text field of a checkpoint and counts what it replaced."""

    def __init__(self, known_secrets: Iterable[str] = ()):
        self.known_secrets = tuple(sorted(known_secrets, key=len, reverse=True))  # sorted once, used per field
        self.count = 0

    def text(self, value: Optional[str]) -> Optional[str]:
        if value is None:
            return None
        value, hits = redact(value, self.known_secrets)
        self.count += hits
        return value

    def checkpoint(self, cp: Checkpoint) -> Checkpoint:
        return replace(
            cp,
            goal=self.text(cp.goal),
            tasks=[Task(self.text(t.description), t.status) for t in cp.tasks],
            summary=self.text(cp.summary),
            next_steps=[self.text(s) for s in cp.next_steps],
            decisions=[self.text(d) for d in cp.decisions],
            modified_files=[replace(f, note=self.text(f.note)) for f in cp.modified_files],
            recent_commands=[replace(c, command=self.text(c.command), note=self.text(c.note))
                             for c in cp.recent_commands],
        )


def redact_texts(value: Any, known_secrets: tuple = (), keep: Any = frozenset()) -> Any:
    """A copy of a JSON value with every string redacted but those in `keep` (texts the server
    itself declares, which hold no secret). Object keys are kept: they are the server's names."""
    if isinstance(value, str):
        return value if value in keep else redact(value, known_secrets)[0]
    if isinstance(value, list):
        return [redact_texts(item, known_secrets, keep) for item in value]
    if isinstance(value, dict):
        return {key: redact_texts(item, known_secrets, keep) for key, item in value.items()}
    return value


# ════════════════════════════════════════════════════════════════════════════
# 6. Core (pure: no clock, environment, file or process access)
# ════════════════════════════════════════════════════════════════════════════

# ── 6.1 Git blob hashing (the bytes half; files are streamed in section 8) ──

def blob_header(size: int) -> bytes:
    """Git hashes `blob <size>\\0` + content: the same sha1 as `git hash-object`."""
    return b"blob %d\x00" % size


def sha1(data: bytes = b"") -> Any:
    """A sha1 object. The built-in _sha1 is enough for git blob ids and spares the 4 MB
    that hashlib's OpenSSL costs in a process that must stay small; hashlib where it is absent."""
    try:
        from _sha1 import sha1 as builtin_sha1
    except ImportError:
        from hashlib import sha1 as builtin_sha1
    return builtin_sha1(data)


def blob_hash(content: bytes) -> str:
    return sha1(blob_header(len(content)) + content).hexdigest()


# ── 6.2 Paths ──

def relative_project_path(root: str, path: str) -> Optional[str]:
    """The path relative to root with "/" separators, or None when it is outside the root.
    Lexical only; section 8 also checks where symlinks lead."""
    import posixpath
    path = path.replace("\\", "/") if os.sep == "\\" else path
    joined = path if os.path.isabs(path) else os.path.join(root, path)
    normalized = os.path.normpath(joined)
    if normalized == root or not normalized.startswith(root.rstrip(os.sep) + os.sep):
        return None
    rel = os.path.relpath(normalized, root).replace(os.sep, "/")
    return posixpath.normpath(rel)


def is_checkpoint_file(rel_path: str) -> bool:
    return rel_path.split("/")[-1].startswith(CHECKPOINT_FILE_PREFIX) and "/" not in rel_path


# ── 6.3 Assembling a checkpoint (the merge table of SPEC section 3) ──

@record
class FileSelection:
    entries: list  # [FileEntry], without hashes yet
    omitted: int  # entries left out because of the list limit


def select_files(git_changes: list, agent_notes: list, inherited: list,
                 limit: int = LIMITS["modifiedFiles"]) -> FileSelection:
    """Git-detected changes ((path, status) pairs), then files named by the agent, then
    (merge) earlier entries. Agent notes attach to the git entry of the same path; an earlier
    note survives when no new one is given. Past `limit`, entries with notes are kept first,
    then agent-named, then git-detected, then inherited ones. Entries are built only for the
    paths kept: a repository with thousands of changes costs no more than one with a hundred."""
    status = dict(git_changes)
    notes = {n.path: n.note for n in agent_notes}
    earlier: dict = {}
    for old in inherited:
        earlier.setdefault(old.path, old)  # the first record of a path (the one with its note) wins
    order = list(dict.fromkeys([*status, *notes, *earlier]))

    def note_of(path: str) -> Optional[str]:
        old = earlier.get(path)
        return notes.get(path) or (old.note if old else None)

    def priority(path: str) -> int:
        if note_of(path):
            return 0
        if path in notes:
            return 1
        return 2 if path in status else 3

    omitted = max(0, len(order) - limit)
    if omitted:
        ranked = sorted(range(len(order)), key=lambda i: (priority(order[i]), i))
        keep = {order[i] for i in ranked[:limit]}
        order = [p for p in order if p in keep]

    def entry(path: str) -> FileEntry:
        if path in status:
            return FileEntry(path, status[path], FileSource.GIT, note=note_of(path))
        if path in notes:
            return FileEntry(path, "M", FileSource.AGENT, note=note_of(path))
        return replace(earlier[path], source=FileSource.AGENT, hash=None)

    return FileSelection([entry(p) for p in order], omitted)


def merge_tasks(old: list, new: list) -> list:
    """Tasks updated by exact description match; new tasks appended (merge mode)."""
    merged = list(old)
    index = {t.description: i for i, t in enumerate(merged)}
    for task in new:
        if task.description in index:
            merged[index[task.description]] = task
        else:
            index[task.description] = len(merged)
            merged.append(task)
    return merged


def merge_decisions(old: list, new: list, limit: int = LIMITS["decisions"]) -> list:
    merged = list(old)
    for decision in new:
        if decision not in merged:
            merged.append(decision)
    return merged[-limit:]


def build_checkpoint(previous: Optional[Checkpoint], request: SaveRequest, files: list,
                     git: Optional[GitState], now: str, new_id: str, project_name: str) -> Checkpoint:
    """Apply the replace/merge table. `previous` is None for a replace or a first save."""
    commands = [replace(c, at=c.at or now) for c in (request.commands or [])]
    if previous is None:
        return Checkpoint(
            id=new_id, created_at=now, updated_at=now, project_name=project_name, git=git,
            goal=request.goal, tasks=list(request.tasks or []), summary=request.summary,
            next_steps=list(request.next_steps or []), decisions=list(request.decisions or [])[-LIMITS["decisions"]:],
            modified_files=files, recent_commands=commands[-LIMITS["recentCommands"]:])
    all_commands = previous.recent_commands + commands
    return replace(
        previous,
        updated_at=now, project_name=project_name, git=git, goal=request.goal, goal_auto=False,
        tasks=merge_tasks(previous.tasks, request.tasks or [])[-LIMITS["tasks"]:],
        summary=request.summary if request.summary is not None else previous.summary,
        next_steps=list(request.next_steps) if request.next_steps is not None else previous.next_steps,
        decisions=merge_decisions(previous.decisions, request.decisions or []),
        modified_files=files,
        recent_commands=all_commands[-LIMITS["recentCommands"]:],
        truncated=False, omitted_files=0, redactions=0,
        generator_version=__version__)


def growth_truncated(previous: Optional[Checkpoint], request: SaveRequest) -> bool:
    """True when merging dropped commands, decisions or tasks past their limits."""
    if previous is None:
        return False
    commands = len(previous.recent_commands) + len(request.commands or [])
    decisions = len(merge_decisions(previous.decisions, request.decisions or [], limit=10 ** 6))
    tasks = len(merge_tasks(previous.tasks, request.tasks or []))
    return (commands > LIMITS["recentCommands"] or decisions > LIMITS["decisions"]
            or tasks > LIMITS["tasks"])


def encode_checkpoint(cp: Checkpoint) -> bytes:
    """UTF-8 JSON. A file name that is not valid UTF-8 (git reports its bytes as lone
    surrogates) is kept as a \\udcXX escape, so the file stays valid and the name round-trips."""
    import json
    doc = cp.to_json()
    try:
        return (json.dumps(doc, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(doc, ensure_ascii=True, indent=2) + "\n").encode("ascii")


def fit_to_size(cp: Checkpoint, limit: int = MAX_CHECKPOINT_BYTES) -> tuple:
    """Drop what matters least until the encoded checkpoint fits in `limit` bytes:
    oldest commands first, then file entries without notes (newest-recorded kept),
    then the rest. Returns (checkpoint, encoded bytes)."""
    data = encode_checkpoint(cp)
    for shrink in _SHRINK_STEPS:
        while len(data) > limit:
            smaller = shrink(cp, len(data) - limit)
            if smaller is None:
                break
            cp = replace(smaller, truncated=True)
            data = encode_checkpoint(cp)
    if len(data) > limit:  # cannot happen within LIMITS; keep the promise anyway
        raise CheckpointError(f"The checkpoint does not fit in {limit} bytes even after dropping history.")
    return cp, data


def _drop_count(items: list, overflow: int, size: Callable[[Any], int]) -> int:
    """How many leading items to drop so that at least `overflow` bytes go."""
    dropped, freed = 0, 0
    for item in items:
        if freed >= overflow:
            break
        freed += size(item)
        dropped += 1
    return max(dropped, 1)


def _json_size(value: Any) -> int:
    import json
    return len(json.dumps(value, ensure_ascii=False, indent=2).encode("utf-8")) + 8


def _shrink_commands(cp: Checkpoint, overflow: int) -> Optional[Checkpoint]:
    if not cp.recent_commands:
        return None
    n = _drop_count(cp.recent_commands, overflow, lambda c: _json_size(_command_to_json(c)))
    return replace(cp, recent_commands=cp.recent_commands[n:])


def _shrink_files(with_notes: bool) -> Callable:
    def shrink(cp: Checkpoint, overflow: int) -> Optional[Checkpoint]:
        candidates = [f for f in reversed(cp.modified_files) if bool(f.note) == with_notes]
        if not candidates:
            return None
        n = _drop_count(candidates, overflow, lambda f: _json_size(_file_to_json(f)))
        gone = {id(f) for f in candidates[:n]}
        kept = [f for f in cp.modified_files if id(f) not in gone]
        return replace(cp, modified_files=kept, omitted_files=cp.omitted_files + n)
    return shrink


def _shrink_list(attr: str, oldest_first: bool) -> Callable:
    def shrink(cp: Checkpoint, overflow: int) -> Optional[Checkpoint]:
        items = getattr(cp, attr)
        if not items:
            return None
        ordered = items if oldest_first else list(reversed(items))
        n = _drop_count(ordered, overflow, lambda v: _json_size(v if isinstance(v, str) else v.description))
        return replace(cp, **{attr: items[n:] if oldest_first else items[:len(items) - n]})
    return shrink


def _shrink_summary(cp: Checkpoint, overflow: int) -> Optional[Checkpoint]:
    if not cp.summary:
        return None
    keep = max(0, len(cp.summary) - max(overflow // 2, 64))
    return replace(cp, summary=cp.summary[:keep] + "…" if keep else None)


_SHRINK_STEPS = (
    _shrink_commands,
    _shrink_files(with_notes=False),
    _shrink_files(with_notes=True),
    _shrink_list("decisions", oldest_first=True),
    _shrink_list("next_steps", oldest_first=False),
    _shrink_list("tasks", oldest_first=True),
    _shrink_summary,
)


# ── 6.4 Drift: what changed since the checkpoint ──

@record
class Drift:
    branch_changed: bool
    current_branch: Optional[str]
    commits_since: Optional[int]  # None when the saved head is unreachable
    changed_since: list  # saved paths whose content differs now, or that are gone
    new_since: list  # dirty or untracked now, not in the checkpoint
    unreachable: bool = False
    saved_head: Optional[str] = None

    def to_json(self) -> dict:
        doc = {"branchChanged": self.branch_changed, "currentBranch": self.current_branch,
               "commitsSince": self.commits_since, "changedSince": self.changed_since,
               "newSince": self.new_since}
        if self.unreachable:
            doc["headUnreachable"] = True
        return doc


def compute_drift(cp: Checkpoint, current: GitState, dirty_now: Iterable[str],
                  hashes_now: dict, commits_since: Optional[int], changed_since_snapshot: Optional[set] = None) -> Drift:
    """hashes_now maps each saved path to its blob hash now (None when gone).
    commits_since is None when the saved head is no longer an ancestor of HEAD.
    With the checkpoint's snapshot, changed_since_snapshot holds every path that differs
    from it now: the paths not recorded among them are the news. Without one, every dirty
    path that was not recorded is reported (it may have been dirty at save time already)."""
    saved = cp.git
    unreachable = commits_since is None
    changed = [f.path for f in cp.modified_files
               if unreachable or hashes_now.get(f.path) != f.hash]
    recorded = {f.path for f in cp.modified_files}
    candidates = dirty_now if changed_since_snapshot is None else changed_since_snapshot
    new = sorted(p for p in candidates if p not in recorded and not is_checkpoint_file(p))
    return Drift(branch_changed=saved is not None and saved.branch != current.branch,
                 current_branch=current.branch, commits_since=commits_since,
                 changed_since=changed, new_since=new, unreachable=unreachable,
                 saved_head=saved.head if saved else None)


# ── 6.5 Transcripts: what a Claude Code session provably did ──
# Claude Code's transcript is JSONL. Assistant lines hold tool_use blocks
# ({type, id, name, input}); the user line after holds the tool_result
# ({tool_use_id, is_error, content}). A call counts once its result says it worked.

_NOT_A_PROMPT = ("This session is being continued", "<command-name>", "<command-message>", "<local-command", "<system-reminder>",
                 "Caveat:", "<bash-input>", "<bash-stdout>", "<user-prompt-submit-hook>", "[Request interrupted")


@record
class ToolCall:
    id: str
    name: str
    input: dict
    offset: int  # byte offset of the line that made the call


@record
class TranscriptFacts:
    edited_files: list = field(default_factory=list)  # [(path, tool_use_id)], first edit of each path
    commands: list = field(default_factory=list)  # [Command], auto
    taken_ids: list = field(default_factory=list)  # tool_use ids recorded now
    first_prompt: Optional[str] = None
    resume_offset: int = 0  # the next read may start here without missing a result


class TranscriptScanner:
    """Feed it the transcript's lines (bytes, with their byte offsets); ask for the facts.
    Lines that cannot matter are skipped before any JSON parsing, which keeps a 50 MB
    transcript well under a second."""

    def __init__(self, seen_ids: Iterable[str] = (), want_prompt: bool = False):
        self.seen = set(seen_ids)
        self.want_prompt = want_prompt
        self.pending: dict = {}
        self.facts = TranscriptFacts()
        self._edited_paths: set = set()

    def feed(self, line: bytes, offset: int) -> None:
        self.facts.resume_offset = offset + len(line)
        if not self._may_matter(line):
            return
        has_result = b'"tool_result"' in line
        import json
        try:
            record = json.loads(line)
        except ValueError:
            return  # a torn or foreign line: skip it
        if not isinstance(record, dict):
            return
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if record.get("type") == "assistant" and isinstance(content, list):
            for block in content:
                self._note_call(block, offset)
        elif record.get("type") == "user":
            if isinstance(content, list) and has_result:
                for block in content:
                    self._note_result(block)
            elif (self.want_prompt and self.facts.first_prompt is None and not record.get("isMeta")
                  and not record.get("isCompactSummary")):
                self._note_prompt(content)

    def _may_matter(self, line: bytes) -> bool:
        """Cheap byte tests first: most of a transcript is attachments and tool output
        (file contents, logs) that need no parsing. A result matters only if it answers
        a call we are waiting for."""
        if b'"tool_use"' in line:
            return True
        if b'"tool_result"' in line:
            return any(call_id.encode() in line for call_id in self.pending)
        return self.want_prompt and self.facts.first_prompt is None and b'"user"' in line

    def _note_call(self, block: Any, offset: int) -> None:
        if not (isinstance(block, dict) and block.get("type") == "tool_use"):
            return
        call_id, name, args = block.get("id"), block.get("name"), block.get("input")
        if (isinstance(call_id, str) and call_id not in self.seen and isinstance(args, dict)
                and isinstance(name, str) and (name in EDIT_TOOLS or name in SHELL_TOOLS)):
            self.pending[call_id] = ToolCall(call_id, name, args, offset)

    def _note_result(self, block: Any) -> None:
        if not (isinstance(block, dict) and block.get("type") == "tool_result"):
            return
        call_id = block.get("tool_use_id")
        call = self.pending.pop(call_id, None) if isinstance(call_id, str) else None
        if call is None:
            return
        failed = block.get("is_error") is True
        if call.name in EDIT_TOOLS:
            path = call.input.get(EDIT_TOOLS[call.name])
            if not failed and isinstance(path, str) and path:
                self.facts.taken_ids.append(call.id)
                if path not in self._edited_paths:
                    self._edited_paths.add(path)
                    self.facts.edited_files.append((path, call.id))
            return
        command = call.input.get("command")
        if isinstance(command, str) and command.strip():
            description = call.input.get("description")
            self.facts.taken_ids.append(call.id)
            self.facts.commands.append(Command(
                command=command[:LIMITS["recentCommands.command"]],
                exit_code=_exit_code(block) if failed else 0,
                note=description[:LIMITS["recentCommands.note"]] if isinstance(description, str) and description else None,
                auto=True, tool_use_id=call.id))

    def _note_prompt(self, content: Any) -> None:
        if isinstance(content, list):
            texts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
            content = "\n".join(t for t in texts if isinstance(t, str))
        if isinstance(content, str):
            text = content.strip()
            if text and not text.startswith(_NOT_A_PROMPT):
                self.facts.first_prompt = text[:LIMITS["goal"]]

    def finish(self) -> TranscriptFacts:
        """The facts; resume_offset stops before the oldest call still waiting for its result."""
        if self.pending:
            self.facts.resume_offset = min(min(c.offset for c in self.pending.values()), self.facts.resume_offset)
        return self.facts


def _exit_code(result_block: dict) -> int:
    """A failed Bash result says 'Exit code N' in its text; 1 when it does not."""
    content = result_block.get("content")
    if isinstance(content, list):
        content = " ".join(b.get("text", "") for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    if isinstance(content, str):
        import re
        found = re.search(r"[Ee]xit (?:code|status):? (-?\d{1,10})", content[:2000])
        if found:
            return int(found.group(1))
    return 1


def merge_transcript(previous: Optional[Checkpoint], facts: TranscriptFacts, files: list,
                     git: Optional[GitState], now: str, new_id: str, project_name: str,
                     cursor_key: str) -> Checkpoint:
    """What a hook adds: the model's goal, tasks, summary and notes are never overwritten."""
    base = previous or Checkpoint(id=new_id, created_at=now, updated_at=now, project_name=project_name,
                                  goal=NO_GOAL, goal_auto=True)
    goal, goal_auto = base.goal, base.goal_auto
    if needs_goal(base) and facts.first_prompt:
        goal = facts.first_prompt
    seen = list(base.hooks.tool_use_ids) + facts.taken_ids
    cursors = dict(base.hooks.cursors)
    cursors[cursor_key] = facts.resume_offset
    cursors = dict(list(cursors.items())[-HOOK_CURSOR_LIMIT:])
    commands = base.recent_commands + [replace(c, at=now) for c in facts.commands]
    return replace(
        base, updated_at=now, project_name=project_name, git=git, goal=goal, goal_auto=goal_auto,
        modified_files=files, recent_commands=commands[-LIMITS["recentCommands"]:],
        truncated=len(commands) > LIMITS["recentCommands"], omitted_files=0, redactions=base.redactions,
        hooks=HookState(tool_use_ids=seen[-HOOK_ID_LIMIT:], cursors=cursors))


def needs_goal(checkpoint: Optional[Checkpoint]) -> bool:
    """Only a checkpoint without a real goal takes the session's first prompt as its goal."""
    return checkpoint is None or (checkpoint.goal_auto and checkpoint.goal == NO_GOAL)


# ── 6.6 Snapshots: what goes in, which ones stay, how a restore is planned ──

def is_secret_file_name(name: str) -> bool:
    """An untracked file named like a key or a credential store (SECRET_FILE_NAMES)."""
    from fnmatch import fnmatchcase
    lowered = name.lower()
    return any(fnmatchcase(lowered, pattern) for pattern in SECRET_FILE_NAMES)


def snapshot_skip_reason(rel: str, kind: str, size: int, untracked: bool, max_bytes: int) -> Optional[str]:
    """Why a changed path stays out of a snapshot, or None when it goes in. `kind` is what is on
    disk: file, symlink, dir, repo (a folder holding .git) or other."""
    if kind == "repo" or rel.endswith("/"):
        return "nested repository"
    if kind == "dir":
        return "submodule"
    if kind == "other":
        return "not a regular file"
    if "\n" in rel:
        return "file name holds a newline"
    if untracked and kind == "file" and size > max_bytes:
        return f"untracked and larger than {max_bytes} bytes"
    if untracked and is_secret_file_name(rel.rsplit("/", 1)[-1]):
        return "untracked and named like a secret"
    return None


def snapshot_message(title: str, facts: dict) -> str:
    """A snapshot's commit message: the goal (or what made it) on the first line, then the
    facts as one JSON line, so `git log` reads well and `list` parses exactly."""
    import json
    first = " ".join(title.split())[:200] or "claude-checkpoint snapshot"
    return f"{first}\n\n{SNAPSHOT_META_PREFIX}{json.dumps(facts, sort_keys=True)}\n"


def parse_snapshot(ref: str, commit: str, tree: str, message: str) -> Optional[Snapshot]:
    """A Snapshot from a ref's commit, or None when the message is not ours."""
    import json
    for line in message.splitlines():
        if line.startswith(SNAPSHOT_META_PREFIX):
            try:
                facts = json.loads(line[len(SNAPSHOT_META_PREFIX):])
            except ValueError:
                return None
            break
    else:
        return None
    if not isinstance(facts, dict):
        return None
    text = lambda key: facts[key] if isinstance(facts.get(key), str) else None  # noqa: E731
    skipped = [Skipped(s["path"], s["reason"]) for s in facts.get("skipped") or []
               if isinstance(s, dict) and isinstance(s.get("path"), str) and isinstance(s.get("reason"), str)]
    files = facts.get("files")
    return Snapshot(id=commit[:SHORT_SHA], commit=commit, ref=ref, tree=tree, created_at=text("createdAt") or "",
                    kind=text("kind") or "", branch=text("branch"), head=text("head"), goal=text("goal") or "",
                    files=files if isinstance(files, int) and not isinstance(files, bool) else 0,
                    skipped=skipped)


# A snapshot's tree is derived from the one before it when HEAD has not moved: only the
# folders above the paths that changed are rebuilt. Trees are encoded here exactly as git
# does, and git checks each id when it stores the tree.

def parse_tree(raw: bytes) -> dict:
    """A raw git tree object -> {name (bytes): (mode, object id)}."""
    entries = {}
    position = 0
    while position < len(raw):
        space = raw.index(b" ", position)
        nul = raw.index(b"\0", space)
        entries[raw[space + 1:nul]] = (raw[position:space].decode("ascii"), raw[nul + 1:nul + 21].hex())
        position = nul + 21
    return entries


def encode_tree(entries: dict) -> bytes:
    """The raw tree object for {name: (mode, id)}, in git's order (a folder sorts as name + "/")."""
    order = sorted(entries, key=lambda name: name + b"/" if entries[name][0] == TREE_MODE else name)
    return b"".join(entries[n][0].encode("ascii") + b" " + n + b"\0" + bytes.fromhex(entries[n][1]) for n in order)


def tree_id(raw: bytes) -> str:
    return sha1(b"tree %d\0" % len(raw) + raw).hexdigest()


def rebuild_trees(trees: dict, updates: dict) -> tuple:
    """Apply {path: (mode, id) or None} to the folders' entries ({folder: {name: (mode, id)}},
    "" for the top; every parent folder of an updated path must be present). Returns
    (new top tree id, [(id, raw)] of the new trees, deepest first, ready to be stored)."""
    trees = {folder: dict(entries) for folder, entries in trees.items()}
    for path, value in updates.items():
        folder, _, name = path.rpartition("/")
        if value is None:
            trees[folder].pop(name.encode("utf-8", "surrogateescape"), None)
        else:
            trees[folder][name.encode("utf-8", "surrogateescape")] = value
    written = []
    for folder in sorted(trees, key=lambda f: (-f.count("/") if f else 1, f)):
        raw = encode_tree(trees[folder])
        if not folder:
            written.append((tree_id(raw), raw))
            continue
        parent, _, name = folder.rpartition("/")
        if raw:
            written.append((tree_id(raw), raw))
            trees[parent][name.encode("utf-8", "surrogateescape")] = (TREE_MODE, written[-1][0])
        elif trees[parent].get(name.encode("utf-8", "surrogateescape"), ("",))[0] == TREE_MODE:
            del trees[parent][name.encode("utf-8", "surrogateescape")]  # git keeps no empty folders
    return written[-1][0], written


def parent_folders(paths: Iterable[str]) -> set:
    """Every folder above the paths, "" (the top) included."""
    folders = {""}
    for path in paths:
        parts = path.split("/")[:-1]
        folders.update("/".join(parts[:depth]) for depth in range(1, len(parts) + 1))
    return folders


def snapshots_to_prune(snapshots: list, keep: int) -> list:
    """The refs past the newest `keep` (snapshots are listed newest first)."""
    return [s.ref for s in snapshots[max(keep, 1):]]


def find_snapshot(snapshots: list, wanted: Optional[str]) -> Snapshot:
    """`latest` or no id: the newest. Otherwise a unique prefix of a commit id (4 or more hex digits)."""
    if not snapshots:
        raise NothingToDo("There is no snapshot yet: save a checkpoint or run `snapshot` first.")
    if wanted in (None, "", "latest"):
        return snapshots[0]
    wanted = wanted.lower()
    found = [s for s in snapshots if s.commit.startswith(wanted)]
    if len(found) == 1 and len(wanted) >= 4:  # shorter prefixes would soon become ambiguous
        return found[0]
    newest = ", ".join(s.id for s in snapshots[:5])
    problem = "matches more than one snapshot" if found else "is not a snapshot of this project"
    raise SnapshotError(f"{wanted!r} {problem}. The newest are: {newest} (run `list` for all).")


@record
class TreeChange:
    """One path that differs between two trees, as restoring the second would change it."""
    status: str  # A (create), M (rewrite), D (delete), T (type change)
    path: str  # relative to the root
    mode: str = ""  # the target's mode (100644, 100755, 120000); "" for a delete
    blob: str = ""  # the target's blob id; "" for a delete


@record
class RestorePlan:
    write: list  # [TreeChange] to create or rewrite
    delete: list  # [str] paths to delete
    skipped: list  # [Skipped]
    refusals: list  # [str]: any refusal stops the whole restore


def plan_restore(changes: list, on_disk: dict, folder_files: dict, ignored_now: set, skipped_now: dict) -> RestorePlan:
    """Decide what a restore writes, deletes and leaves alone, and whether it must refuse.
    on_disk maps each changed path and its parent folders to file, symlink, dir, repo, other or
    missing; folder_files maps a folder that a file would replace to the files inside it.
    The rule: never overwrite or delete what the before-restore snapshot does not hold."""
    changes = [c for c in changes if not is_checkpoint_file(c.path)]
    delete = [c.path for c in changes if c.status == "D" and on_disk.get(c.path) in ("file", "symlink")]
    deleting = set(delete)
    plan = RestorePlan([], delete, [], [])
    for change in changes:
        if change.status != "D":
            _plan_write(change, on_disk, folder_files, ignored_now, skipped_now, deleting, plan)
    return plan


def _plan_write(change: TreeChange, on_disk: dict, folder_files: dict, ignored_now: set, skipped_now: dict,
                deleting: set, plan: RestorePlan) -> None:
    path = change.path
    if path in skipped_now:
        plan.skipped.append(Skipped(path, f"skipped by snapshots now ({skipped_now[path]})"))
        return
    if change.status == "A" and path in ignored_now:
        plan.skipped.append(Skipped(path, "ignored now"))
        return
    parts = path.split("/")
    for depth in range(1, len(parts)):
        folder = "/".join(parts[:depth])
        kind = on_disk.get(folder, "missing")
        if folder in deleting or kind in ("dir", "missing"):
            continue
        if kind == "repo":
            plan.skipped.append(Skipped(path, f"inside the nested repository {folder}"))
        elif kind == "symlink":
            plan.skipped.append(Skipped(path, f"inside the symlinked folder {folder}"))
        else:
            plan.refusals.append(f"{path} needs the folder {folder}, but {folder} is a file that restore does not "
                                 "manage (ignored or skipped); move it away first")
        return
    kind = on_disk.get(path, "missing")
    if kind in ("dir", "repo"):
        unmanaged = [f for f in folder_files.get(path, []) if f not in deleting]
        if kind == "repo" or unmanaged:
            plan.refusals.append(f"{path} would replace the folder {path}, which holds files that restore does not "
                                 f"manage ({', '.join(unmanaged[:3]) or '.git'}); move them away first")
            return
    elif kind != "missing" and change.status == "A":
        plan.skipped.append(Skipped(path, "exists and is not in the before-restore snapshot"))
        return
    plan.write.append(change)


# ════════════════════════════════════════════════════════════════════════════
# 7. Rendering (pure, deterministic)
# ════════════════════════════════════════════════════════════════════════════

TASK_MARKERS = {TaskStatus.DONE: "[x]", TaskStatus.IN_PROGRESS: "[~]",
                TaskStatus.PENDING: "[ ]", TaskStatus.BLOCKED: "[!]"}


# Timestamps are ISO 8601 UTC with milliseconds, as the original server wrote them. They are
# read and written with plain arithmetic: datetime and its strptime cost 1 MB of the budget.
_TIMESTAMP = r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:?\d{2})?"


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm)."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


def parse_timestamp(value: str) -> Optional[float]:
    """Seconds since the epoch for an ISO timestamp (2026-10-08T02:23:55.477Z); None if it is not one."""
    import re
    found = re.fullmatch(_TIMESTAMP, value.strip())
    if not found:
        return None
    year, month, day, hour, minute, second = (int(found.group(i)) for i in range(1, 7))
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 61):
        return None
    epoch = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second
    epoch += float("0." + found.group(7)) if found.group(7) else 0.0
    offset = found.group(8)
    if offset and offset != "Z":
        sign = -1 if offset[0] == "+" else 1
        epoch += sign * (int(offset[1:3]) * 3600 + int(offset[-2:]) * 60)
    return epoch


def format_timestamp(epoch: float) -> str:
    import time
    millis = int(round(epoch * 1000))
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(millis // 1000)) + f".{millis % 1000:03d}Z"


def human_age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return "just now" if seconds < 5 else f"{seconds}s ago"


def _clip(text: str, limit: int = BRIEF_ITEM_CHARS) -> str:
    text = " ".join(text.split()) if "\n" in text else text
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _code(text: str) -> str:
    """Inline markdown code that survives backticks inside."""
    text = _clip(text)
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _capped(lines: list, shown: int) -> list:
    if len(lines) <= shown:
        return lines
    return lines[:shown] + [f"- … and {len(lines) - shown} more"]


@record
class LoadResult:
    found: bool
    path: str
    root: str
    from_backup: bool = False
    checkpoint: Optional[Checkpoint] = None
    drift: Optional[Drift] = None
    warnings: list = field(default_factory=list)
    restore_command: Optional[str] = None  # how the user rewinds the files to the checkpoint's snapshot

    def to_json(self) -> dict:
        doc = {"found": self.found, "path": self.path, "projectRoot": self.root, "fromBackup": self.from_backup,
               "updatedAt": self.checkpoint.updated_at if self.checkpoint else None,
               "drift": self.drift.to_json() if self.drift else None, "warnings": self.warnings}
        if self.checkpoint is not None:
            doc["checkpoint"] = self.checkpoint.to_json()
        return doc


def render_brief(result: LoadResult, now: float) -> str:
    """The resume brief: small markdown that a model can act on at once."""
    if not result.found or result.checkpoint is None:
        return render_nothing_to_resume(result)
    cp = result.checkpoint
    saved_at = parse_timestamp(cp.updated_at)
    when = (f"checkpoint saved {human_age(now - saved_at)}, "
            f"{format_timestamp(saved_at)[:19].replace('T', ' ')} UTC") if saved_at else f"checkpoint saved {cp.updated_at}"
    out = [f"# Resuming: {cp.project_name or os.path.basename(result.root)} ({when})"]
    if cp.git is not None:
        where = f"Branch `{cp.git.branch}`" if cp.git.branch else "Detached HEAD"
        out.append(f"{where} @ {cp.git.head[:SHORT_SHA]}" + (" (uncommitted changes)" if cp.git.dirty else ""))
    if cp.snapshot is not None and result.restore_command:
        out.append(f"Code snapshot `{cp.snapshot.id}`; the user can rewind the files to it (a dry run first): "
                   f"`{result.restore_command}`")
    for warning in result.warnings:
        out.append(f"⚠ {warning}")
    drift = render_drift(result.drift)
    if drift and _drift_is_news(result.drift):
        out += ["", "## Since this checkpoint"] + drift
    out += ["", "## Goal", cp.goal]
    if cp.tasks:
        out += ["", "## Tasks"] + _capped([f"- {TASK_MARKERS[t.status]} {_clip(t.description)}" for t in cp.tasks],
                                          BRIEF_SHOW["tasks"])
    if cp.summary:
        out += ["", "## Where things stand", cp.summary]
    if cp.next_steps:
        steps = [f"{i}. {_clip(s)}" for i, s in enumerate(cp.next_steps[:BRIEF_SHOW["nextSteps"]], 1)]
        if len(cp.next_steps) > BRIEF_SHOW["nextSteps"]:
            steps.append(f"… and {len(cp.next_steps) - BRIEF_SHOW['nextSteps']} more")
        out += ["", "## Next steps"] + steps
    if cp.decisions:
        out += ["", "## Decisions & gotchas"] + _capped([f"- {_clip(d)}" for d in cp.decisions], BRIEF_SHOW["decisions"])
    if cp.modified_files:
        lines = [f"- {f.path} ({f.status})" + (f" — {_clip(f.note)}" if f.note else "") for f in cp.modified_files]
        more = f", {cp.omitted_files} more not recorded" if cp.omitted_files else ""
        out += ["", f"## Files touched ({len(cp.modified_files)}{more})"] + _capped(lines, BRIEF_SHOW["files"])
    if cp.recent_commands:
        shown = cp.recent_commands[-BRIEF_SHOW["commands"]:]
        out += ["", f"## Recent commands (last {len(shown)}, oldest first)"] + [_command_line(c) for c in shown]
    if drift and not _drift_is_news(result.drift):
        out += ["", "## Since this checkpoint"] + drift
    out += ["", f"_Checkpoint: {result.path}_"]
    return "\n".join(out) + "\n"


def _command_line(cmd: Command) -> str:
    if cmd.exit_code == 0:
        mark = "✓"
    elif cmd.exit_code is None:
        mark = "·"
    else:
        mark = f"✗ exit {cmd.exit_code}"
    return f"- {mark} {_code(cmd.command)}" + (f" — {_clip(cmd.note)}" if cmd.note else "")


def _drift_is_news(drift: Optional[Drift]) -> bool:
    return drift is not None and bool(drift.branch_changed or drift.commits_since or drift.changed_since
                                      or drift.new_since or drift.unreachable)


def render_drift(drift: Optional[Drift]) -> list:
    if drift is None:
        return []
    lines = []
    if drift.branch_changed:
        lines.append(f"- Branch changed: now on `{drift.current_branch}`" if drift.current_branch
                     else "- Branch changed: HEAD is now detached")
    if drift.unreachable:
        lines.append(f"- ⚠ Saved commit {(drift.saved_head or '')[:SHORT_SHA]} is no longer reachable (rebase or reset?): "
                     "re-read the recorded files before editing")
    elif drift.commits_since:
        lines.append(f"- {drift.commits_since} new commit(s) on HEAD")
    if drift.changed_since:
        lines.append("- ⚠ Changed after the checkpoint, re-read before editing: " + _path_list(drift.changed_since))
    if drift.new_since:
        lines.append("- Changed outside the checkpoint (new dirty or untracked files): " + _path_list(drift.new_since))
    if not lines:
        lines.append("- Nothing changed: same commit, every recorded file as saved")
    return lines


def _path_list(paths: list) -> str:
    shown = ", ".join(f"`{p}`" for p in paths[:BRIEF_SHOW["drift"]])
    return shown + (f" … and {len(paths) - BRIEF_SHOW['drift']} more" if len(paths) > BRIEF_SHOW["drift"] else "")


def render_nothing_to_resume(result: LoadResult) -> str:
    lines = [f"No checkpoint found at {result.path}: nothing to resume. Start fresh, and call "
             "save_session_checkpoint once there is progress worth keeping."]
    lines += [f"⚠ {w}" for w in result.warnings]
    return "\n".join(lines) + "\n"


@record
class SaveOutcome:
    path: str
    root: str
    size: int
    mode: SaveMode
    checkpoint: Checkpoint
    warnings: list

    def structured(self) -> dict:
        cp = self.checkpoint
        git = None if cp.git is None else {"branch": cp.git.branch, "head": cp.git.head}
        return {"path": self.path, "projectRoot": self.root, "bytes": self.size, "mode": self.mode.value,
                "counts": {"tasks": len(cp.tasks), "modifiedFiles": len(cp.modified_files),
                           "recentCommands": len(cp.recent_commands), "redactions": cp.redactions},
                "git": git, "truncated": cp.truncated, "warnings": list(self.warnings)}


def render_save_answer(outcome: SaveOutcome) -> str:
    cp = outcome.checkpoint
    where = ""
    if cp.git is not None:
        where = f" on {cp.git.branch or 'detached HEAD'}@{cp.git.head[:SHORT_SHA]}"
    lines = [f"Checkpoint saved to {outcome.path} ({outcome.size} bytes, {outcome.mode.value}).",
             f"{len(cp.tasks)} task(s), {len(cp.modified_files)} file(s), {len(cp.recent_commands)} command(s){where}."]
    lines += [f"⚠ {w}" for w in outcome.warnings]
    return "\n".join(lines)


def shell_line(program: list, *args: str) -> str:
    """A command as a POSIX shell line (hooks, and the commands our answers advise)."""
    import shlex
    return " ".join(shlex.quote(word) for word in [*program, *args])


# ── 7.1 Snapshot texts: what `snapshot`, `list`, `diff` and `restore` print ──

def render_snapshot_made(outcome: Any, restore_command: str) -> str:
    snap = outcome.snapshot
    if outcome.reused:
        lines = [f"Nothing changed since snapshot {snap.id} ({snap.kind}, {snap.created_at[:19].replace('T', ' ')}); "
                 "it stands for the work tree now."]
    else:
        lines = [f"Snapshot {snap.id} ({snap.kind}): {snap.files} path(s) differ from HEAD."]
    lines += [f"  skipped {s.path}: {s.reason}" for s in outcome.skipped[:BRIEF_SHOW["files"]]]
    if len(outcome.skipped) > BRIEF_SHOW["files"]:
        lines.append(f"  … and {len(outcome.skipped) - BRIEF_SHOW['files']} more skipped")
    lines.append(f"To bring the files back to it: {restore_command} {snap.id} --yes")
    return "\n".join(lines) + "\n"


def render_snapshot_list(snapshots: list, now: float) -> str:
    if not snapshots:
        return "No snapshots yet. A save, a hook or `snapshot` makes one.\n"
    rows = []
    for snap in snapshots:
        made = parse_timestamp(snap.created_at)
        age = human_age(now - made) if made else "?"
        where = snap.branch or (f"detached {snap.head[:7]}" if snap.head else "no commit yet")
        rows.append(f"{snap.id}  {age:>12}  {snap.kind:<14}  {where}  {snap.files} file(s)  {_clip(snap.goal, 80)}")
    return "\n".join(rows) + "\n"


def render_restore(outcome: Any, restore_command: str) -> str:
    plan, snap = outcome.plan, outcome.snapshot
    if not plan.write and not plan.delete:
        lines = [f"The files already match snapshot {snap.id}; nothing to restore."]
    elif outcome.dry_run:
        lines = [f"Restoring snapshot {snap.id} ({snap.kind}, {_clip(snap.goal, 60)}) would:"]
    else:
        lines = [f"Restored snapshot {snap.id}: {len(plan.write)} written, {len(plan.delete)} deleted."]
    if outcome.dry_run or len(plan.write) + len(plan.delete) <= BRIEF_SHOW["drift"]:
        lines += [f"  write   {c.path}" for c in plan.write] + [f"  delete  {p}" for p in plan.delete]
    lines += [f"  skip    {s.path} ({s.reason})" for s in plan.skipped]
    if outcome.dry_run and (plan.write or plan.delete):
        lines.append(f"Nothing was changed (a dry run). To do it: {restore_command} {snap.id} --yes")
    if outcome.safety is not None:
        lines.append(f"Undo with: {restore_command} {outcome.safety.id} --yes")
    if outcome.head_moved and (plan.write or plan.delete):
        lines.append("HEAD has moved since this snapshot: `git status` shows the restored files as changes "
                     "against HEAD as it is now.")
    return "\n".join(lines) + "\n"


# ════════════════════════════════════════════════════════════════════════════
# 8. Git adapter and working-tree hashing
# ════════════════════════════════════════════════════════════════════════════

@record
class GitResult:
    """What one git command did: its exit code and both outputs."""
    code: int
    stdout: bytes
    stderr: bytes

    @property
    def ok(self) -> bool:
        return self.code == 0

    def error_text(self) -> str:
        """git's own complaint, one line, for a message a person reads."""
        lines = self.stderr.decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else f"git exited with status {self.code}"


class Git:
    """Runs git for one project root: argument lists, no shell, a timeout that kills the
    whole process group, no pager, prompt or optional lock, and no fsmonitor hook.

    `run` gives a GitResult whenever git ran, whatever it answered, and None when git is
    unavailable (missing, or it did not answer in time): then `available` is False and
    `warnings` says why, and every later call returns None at once."""

    def __init__(self, root: str, timeout: float = GIT_TIMEOUT_S):
        self.root = root
        self.timeout = timeout
        self.warnings: list = []
        self.available = True

    def run(self, *args: str, stdin: Optional[bytes] = None, env: Optional[dict] = None,
            timeout: Optional[float] = None) -> Optional[GitResult]:
        """Run `git <args>` in the root. stdin is fed whole (DEVNULL when None, so git never
        reads the protocol's stdin); env adds variables after the hardened ones."""
        return self.begin(*args, stdin=stdin is not None, env=env, timeout=timeout).result(stdin)

    def begin(self, *args: str, stdin: bool = False, env: Optional[dict] = None,
              timeout: Optional[float] = None) -> "PendingGit":
        """Start `git <args>` and return at once, so that commands that need nothing from each
        other run together, beside this process's own work, until their `result()` is read."""
        if not self.available:
            return PendingGit(self, args, None, 0)
        import subprocess
        try:
            proc = subprocess.Popen(_git_command(args), cwd=self.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                    env=_git_environment(env), start_new_session=os.name == "posix")
        except FileNotFoundError:
            self._give_up("git was not found on PATH; git facts and drift detection are off.")
            return PendingGit(self, args, None, 0)
        except OSError as error:
            self._give_up(f"git could not be started ({error.strerror}); git facts are off.")
            return PendingGit(self, args, None, 0)
        return PendingGit(self, args, proc, self.timeout if timeout is None else timeout)

    def start(self, *args: str) -> Any:
        """A git process to stream through (stdin and stdout pipes); the caller ends it with _kill_tree."""
        import subprocess
        try:
            return subprocess.Popen(_git_command(args), cwd=self.root, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, env=_git_environment(None),
                                    start_new_session=os.name == "posix")
        except OSError as error:
            raise SnapshotError(f"git could not be started ({error.strerror})") from None

    def output(self, *args: str, ok_codes: tuple = (0,), **options: Any) -> Optional[bytes]:
        """stdout of a command expected to succeed; None when git is unavailable or it failed."""
        result = self.run(*args, **options)
        return result.stdout if result is not None and result.code in ok_codes else None

    def _give_up(self, warning: str) -> None:
        self.available = False
        self.warnings.append(warning)

    def scan(self) -> "GitScan":
        """One `git status` gives HEAD, branch and every changed or untracked file."""
        return self.begin_scan()()

    def begin_scan(self) -> Callable[[], "GitScan"]:
        """scan(), started: returns the function that waits for it, so that the caller's other
        work (and other git commands) run while git status does."""
        at_top = os.path.exists(os.path.join(self.root, ".git"))
        where = None if at_top else self.begin("rev-parse", "--show-prefix")
        # At a worktree's top no pathspec is needed, and none lets git use its untracked cache.
        status = self.begin("status", "--porcelain=v2", "-z", "-uall", "--branch", *(() if at_top else ("--", ".")))

        def finish() -> GitScan:
            found = b"" if where is None else where.output()
            if found is None:  # not a repository (or git hung): status has nothing to say either
                status.abandon()
                return GitScan(None, [], in_repo=False)
            out = status.output()
            if out is None:
                return GitScan(None, [], in_repo=False)
            return parse_status(out, found.decode("utf-8", "surrogateescape").strip())
        return finish

    def commits_since(self, saved_head: str, head: str) -> Optional[int]:
        """Commits on HEAD after saved_head; None when saved_head is no longer an ancestor."""
        if saved_head == head:
            return 0
        found = self.output("rev-list", "--count", "--ancestry-path", f"{saved_head}..{head}", "--")
        if found is None:
            return None
        count = int(found.strip() or 0)
        return count or None

    def is_ignored(self, name: str) -> Optional[bool]:
        found = self.run("check-ignore", "-q", "--", name)
        return None if found is None or found.code not in (0, 1) else found.ok

    def git_path(self, name: str) -> Optional[str]:
        found = self.output("rev-parse", "--git-path", name)
        if found is None:
            return None
        return os.path.join(self.root, found.decode("utf-8", "surrogateescape").strip())


class PendingGit:
    """A git command started by Git.begin: `result()` waits for it, within the time left of
    its timeout, and gives what Git.run would have."""

    def __init__(self, git: Git, args: tuple, proc: Any, timeout: float):
        import time
        self.git = git
        self.args = args
        self.proc = proc  # None when git could not be started
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.done: Optional[GitResult] = None

    def result(self, stdin: Optional[bytes] = None) -> Optional[GitResult]:
        if self.proc is None or self.done is not None:
            return self.done
        import subprocess
        import time
        try:
            out, err = self.proc.communicate(stdin, timeout=max(self.deadline - time.monotonic(), GIT_LATE_WAIT_S))
        except subprocess.TimeoutExpired:
            _kill_tree(self.proc)
            self.proc = None
            self.git._give_up(f"git {self.name} did not answer within {self.timeout:g} s; git facts are off "
                              "for this call.")
            return None
        self.done = GitResult(self.proc.returncode, out, err)
        return self.done

    @property
    def name(self) -> str:
        """The git command's name, past the `-c name=value` pairs before it."""
        args = self.args
        while args[:1] == ("-c",):
            args = args[2:]
        return args[0] if args else "git"

    def output(self, ok_codes: tuple = (0,)) -> Optional[bytes]:
        """stdout when it succeeded; None when git is unavailable or it failed."""
        found = self.result()
        return found.stdout if found is not None and found.code in ok_codes else None

    def abandon(self) -> None:
        """End the command if nobody waited for it (a caller that returned early or failed)."""
        if self.proc is not None and self.done is None:
            _kill_tree(self.proc)
            self.proc = None


def _git_command(args: tuple) -> list:
    """No pager, no fsmonitor, no hook ever (hooksPath points at nothing), names unquoted."""
    return ["git", "--no-pager", "-c", "core.fsmonitor=false", "-c", "core.quotePath=false",
            "-c", "core.untrackedCache=keep", "-c", f"core.hooksPath={os.devnull}", *args]


def _git_environment(extra: Optional[dict]) -> dict:
    """The user's environment without anything that would point git elsewhere, plus what
    keeps git from prompting, paging or taking optional locks, plus the caller's `extra`."""
    env = dict(os.environ)
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_NAMESPACE",
                 "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR"):
        env.pop(name, None)
    env.update(GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0", GIT_PAGER="cat", PAGER="cat",
               GIT_ASKPASS="", SSH_ASKPASS="", LC_ALL="C", LANGUAGE="")
    env.update(extra or {})
    return env


def _kill_tree(proc: Any) -> None:
    import signal
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except OSError:
        pass
    try:
        proc.communicate(timeout=1)
    except Exception:  # the pipes may be held by an orphan; we leave it to the OS
        pass


@record
class GitScan:
    state: Optional[GitState]  # None outside a repository or before the first commit
    changes: list  # [(path relative to the root, status)] for every changed or untracked file
    in_repo: bool = True
    lists_checkpoint: bool = False  # git status showed .claude-checkpoint as untracked: it is not ignored
    prefix: str = ""  # the root's place in the repository ("" at its top, else "sub/dir/")
    origins: list = field(default_factory=list)  # the old paths of renames git reported, under the root

    @property
    def dirty_paths(self) -> list:
        return [path for path, _ in self.changes]


def reduce_status(kind: str, xy: str) -> str:
    """Porcelain v2 record type and XY code -> one of M, A, D, R, ??, U."""
    if kind == "?":
        return "??"
    if kind == "u":
        return "U"
    if kind == "2":
        return "R" if xy[0] == "R" or xy[1:] == "R" else "A"
    if "D" in xy:
        return "D"
    if xy[0] == "A":
        return "A"
    return "M"


def parse_status(raw: bytes, prefix: str = "") -> GitScan:
    """Parse `git status --porcelain=v2 -z --branch`; keep paths under `prefix` (the root's
    place in the repository), relative to it."""
    fields = raw.decode("utf-8", "surrogateescape").split("\0")
    head = branch = None
    changes, origins = [], []
    lists_checkpoint = False
    i = 0
    while i < len(fields):
        record = fields[i]
        i += 1
        if not record:
            continue
        if record.startswith("# branch.oid "):
            head = record[13:]
        elif record.startswith("# branch.head "):
            branch = record[14:]
        elif record[0] in "12u?":
            kind = record[0]
            parts = record.split(" ", {"1": 8, "2": 9, "u": 10, "?": 1}[kind])
            path = parts[-1]
            xy = parts[1] if kind != "?" else "??"
            if kind == "2":
                origin = fields[i] if i < len(fields) else ""  # the original path of a rename follows
                i += 1
                if origin.startswith(prefix) and not is_checkpoint_file(origin[len(prefix):]):
                    origins.append(origin[len(prefix):])
            if prefix and not path.startswith(prefix):
                continue
            rel = path[len(prefix):]
            if rel == CHECKPOINT_NAME and kind == "?":
                lists_checkpoint = True
            if not rel or is_checkpoint_file(rel):
                continue
            changes.append((rel, reduce_status(kind, xy)))
    state = None
    if head and head != "(initial)":
        state = GitState(branch=None if branch in (None, "(detached)") else branch, head=head,
                         dirty=bool(changes))
    return GitScan(state, changes, lists_checkpoint=lists_checkpoint, prefix=prefix, origins=origins)


def hash_worktree_file(root: str, rel_path: str) -> Optional[str]:
    """The git blob sha1 of a working-tree file, read in chunks (memory stays flat).
    A symlink hashes its target text, as git stores it; None when absent or not a file."""
    import stat
    full = os.path.join(root, *rel_path.split("/"))
    try:
        info = os.lstat(full)
        if stat.S_ISLNK(info.st_mode):
            return blob_hash(os.fsencode(os.readlink(full)))
        if not stat.S_ISREG(info.st_mode):
            return None
        fd = os.open(full, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb", buffering=0) as stream:
        try:
            size = os.fstat(fd).st_size
            digest = sha1(blob_header(size))
            buffer = memoryview(bytearray(min(HASH_CHUNK_BYTES, max(size, 1))))
            remaining = size
            while remaining > 0:
                n = stream.readinto(buffer)
                if not n:
                    return None  # it shrank while we read: it is changing, report it as changed
                digest.update(buffer[:min(n, remaining)])
                remaining -= n
            return digest.hexdigest()
        except OSError:
            return None


def contained_path(root: str, path: str, folders: Optional[dict] = None) -> Optional[str]:
    """relative_project_path, plus: the file's folder must really be inside the root
    (a symlinked folder must not lead out of the project). `folders` remembers each folder's
    answer for one caller's many paths (for one moment: a folder may become a symlink later)."""
    rel = relative_project_path(root, path)
    if rel is None:
        return None
    folder = os.path.dirname(os.path.join(root, *rel.split("/")))
    inside = folders.get(folder) if folders is not None else None
    if inside is None:
        parent = os.path.realpath(folder)
        inside = parent == root or parent.startswith(root.rstrip(os.sep) + os.sep)
        if folders is not None:
            folders[folder] = inside
    return rel if inside else None


# ── 8.1 Snapshots: commits of the work tree under a private ref, never through the user's index ──
# A snapshot's tree is built in a temporary index (a copy of the user's, so sparse and
# unchanged entries cost nothing), with content hashed raw by `hash-object --no-filters`.
# No porcelain runs: commit-tree and update-ref run no hooks, and hooksPath points nowhere.

class PathState:
    """What a snapshot holds for one path git reported as changed, and the lstat facts the
    content was hashed from, so the next snapshot hashes only what changed since. A plain
    slotted class, not a record: a snapshot makes one per changed path, thousands at a time."""
    __slots__ = ("entry", "stat")

    def __init__(self, entry: Any, stat: Optional[tuple] = None):
        self.entry = entry  # (mode, blob id); None: absent from the tree; HEAD_ENTRY: as in HEAD
        self.stat = stat  # (mode, size, mtime, ctime, inode); None: hash it again next time


@record
class TreeBuild:
    tree: str
    skipped: list  # [Skipped]
    files: int  # captured paths that differ from HEAD
    paths: dict = field(default_factory=dict)  # {path: PathState} of every changed path
    rehashed: bool = True  # some path's state is new since the cache it started from


@record
class SnapshotCache:
    """The newest snapshot's path states, kept in the git folder: the next snapshot (or a load's
    drift) starts from it instead of hashing and rebuilding everything. Only a cache: when it
    is missing or stale, everything is built from the index as the first time."""
    commit: str
    tree: str
    head: Optional[str]
    prefix: str
    paths: dict  # {path: PathState}

    def to_json(self) -> dict:
        return {"commit": self.commit, "tree": self.tree, "head": self.head, "prefix": self.prefix,
                "paths": {p: [list(s.entry) if isinstance(s.entry, tuple) else s.entry,
                              list(s.stat) if s.stat else None] for p, s in self.paths.items()}}

    @classmethod
    def from_json(cls, doc: Any) -> Optional["SnapshotCache"]:
        try:
            paths = {}
            for path, (entry, stat) in doc["paths"].items():
                if isinstance(entry, list):
                    entry = (str(entry[0]), str(entry[1]))
                elif entry not in (None, HEAD_ENTRY):
                    return None
                paths[str(path)] = PathState(entry, tuple(map(int, stat)) if stat else None)
            return cls(str(doc["commit"]), str(doc["tree"]), doc["head"], str(doc["prefix"]), paths)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None


def disk_kind(full: str) -> tuple:
    """(kind, lstat result or None) of what is at `full`, never following a symlink. Kinds:
    missing, file, symlink, dir, repo (a folder holding .git), other (a FIFO, a socket...)."""
    import stat
    try:
        info = os.lstat(full)
    except OSError:
        return "missing", None
    if stat.S_ISLNK(info.st_mode):
        return "symlink", info
    if stat.S_ISDIR(info.st_mode):
        return ("repo" if os.path.lexists(os.path.join(full, ".git")) else "dir"), info
    return ("file" if stat.S_ISREG(info.st_mode) else "other"), info


class SnapshotStore:
    """One project root's snapshots: refs under refs/claude-checkpoint/<root key>/, so two
    worktrees or two roots in one repository never see each other's history."""

    def __init__(self, git: Git, root: str, scan: GitScan):
        self.git = git
        self.root = root
        self.scan = scan
        self.prefix = scan.prefix
        self.namespace = snapshot_namespace(root)

    # ── Reading ──
    @staticmethod
    def begin_list(git: Git, root: str) -> PendingGit:
        """The command `list` reads, started: it needs no scan, so it runs beside git status."""
        return _begin_plumbing(git, "for-each-ref", "--sort=-refname",
                               "--format=%(refname)%00%(objectname)%00%(tree)%00%(contents)%00",
                               snapshot_namespace(root))

    def list(self, started: Optional[PendingGit] = None) -> list:
        """This root's snapshots, newest first (read from `started`, begin_list's command, if given)."""
        out = _plumbing_output(started or self.begin_list(self.git, self.root))
        snapshots = []
        for record_ in out.decode("utf-8", "surrogateescape").split("\0\n"):
            fields = record_.lstrip("\n").split("\0")
            if len(fields) == 4:
                found = parse_snapshot(*fields)
                if found is not None:
                    snapshots.append(found)
        return snapshots

    def changed_paths(self) -> list:
        """Every path git reports as changed under the root, renames' old paths included."""
        return list(dict.fromkeys([p for p, _ in self.scan.changes] + self.scan.origins))

    @property
    def head(self) -> Optional[str]:
        return self.scan.state.head if self.scan.state else None

    @property
    def git_dir(self) -> Optional[str]:
        return git_folder(self.root, self.prefix)

    @property
    def cache_path(self) -> Optional[str]:
        """Where the newest snapshot's path states are cached: beside the worktree's index."""
        folder = self.git_dir
        return None if folder is None else os.path.join(folder, f"claude-checkpoint-{self.namespace.rsplit('/', 1)[-1]}.json")

    def survey(self, max_bytes: int, known: dict, write: bool) -> tuple:
        """({path: PathState}, [Skipped], whether any state is new) for every changed path now.
        Content is hashed (and stored, with `write`) only where the lstat facts differ from `known`'s."""
        import time
        status = dict(self.scan.changes)
        now_ns = time.time_ns()
        states, skipped, regular, links = {}, [], [], []
        top = self.root + os.sep
        for rel in self.changed_paths():
            key = rel.rstrip("/")
            full = top + key.replace("/", os.sep)  # as _hash_files names it; a join per path costs more than the lstat
            kind, info = disk_kind(full)
            if info is None:
                states[key] = PathState(None)
                continue
            reason = snapshot_skip_reason(rel, kind, info.st_size, status.get(rel) == "??", max_bytes)
            if reason is not None:
                skipped.append(Skipped(key, reason))
                if not rel.endswith("/"):  # a nested repository is never in a tree; anything else may be
                    states[key] = PathState(HEAD_ENTRY if status.get(rel) != "??" else None)
                continue
            facts = None if info.st_mtime_ns >= now_ns - _racy_window_ns(info.st_mtime_ns) else (
                info.st_mode, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
            old = known.get(key)
            if old is not None and facts is not None and old.stat == facts and isinstance(old.entry, tuple):
                states[key] = old
            elif kind == "symlink":
                links.append((key, facts))
            else:
                regular.append((key, "100755" if info.st_mode & 0o111 else "100644", facts))
        blobs = self._hash_files([self.root + os.sep + k.replace("/", os.sep) for k, _, _ in regular], write)
        for (key, mode, facts), blob in zip(regular, blobs):
            states[key] = PathState((mode, blob), facts)
        for key, facts in links:
            target = os.fsencode(os.readlink(os.path.join(self.root, *key.split("/"))))
            states[key] = PathState(("120000", self._hash_bytes(target, write)), facts)
        return states, skipped, bool(regular or links) or states.keys() != known.keys()

    @staticmethod
    def updates_since(cache: SnapshotCache, states: dict) -> dict:
        """{path: entry} where the work tree (states; HEAD for paths git calls clean) differs
        from the cached snapshot. Valid only while HEAD is the cache's head."""
        updates = {}
        for path in set(states) | set(cache.paths):
            now = states[path].entry if path in states else HEAD_ENTRY
            then = cache.paths[path].entry if path in cache.paths else HEAD_ENTRY
            if now != then:
                updates[path] = now
        return updates

    def diff(self, old_tree: str, new_tree: str, paths: Iterable[str] = ()) -> list:
        """[TreeChange] turning old_tree into new_tree under the root (or the given paths)."""
        out = self._output("diff-tree", "-r", "-z", "--raw", "--no-renames", old_tree, new_tree, "--",
                           *self._pathspecs(paths))
        fields = out.decode("utf-8", "surrogateescape").split("\0")
        changes = []
        for meta, path in zip(fields[0::2], fields[1::2]):
            old_mode, new_mode, _, blob, status = meta.lstrip(":").split(" ")
            if "160000" in (old_mode, new_mode) or not path.startswith(self.prefix):
                continue  # submodules are never restored
            rel = path[len(self.prefix):]
            changes.append(TreeChange(status[0], rel, "" if status == "D" else new_mode,
                                      "" if status == "D" else blob))
        return changes

    def patch(self, old_tree: str, new_tree: str, paths: Iterable[str], stat: bool, color: bool) -> bytes:
        """What `git diff` would print between the two trees, under the root (or the paths)."""
        relative = [f"--relative={self.prefix}"] if self.prefix else []
        return self._output("diff-tree", "-r", "--no-renames", "--no-ext-diff", "--no-textconv",
                            "--stat" if stat else "-p", f"--color={'always' if color else 'never'}",
                            *relative, old_tree, new_tree, "--", *self._pathspecs(paths))

    def blobs_at(self, commit: str, paths: list) -> dict:
        """{path: blob id} of each path in `commit` (paths it does not hold are left out)."""
        if not paths:
            return {}
        request = "".join(f"{commit}:{self.prefix}{p}\n" for p in paths).encode("utf-8", "surrogateescape")
        out = self._output("cat-file", "--batch-check=%(objectname) %(objecttype)", stdin=request)
        found = {}
        for path, line in zip(paths, out.decode("ascii", "replace").splitlines()):
            parts = line.split(" ")
            if len(parts) == 2 and parts[1] == "blob":
                found[path] = parts[0]
        return found

    def paths_between(self, old: str, new: Optional[str]) -> set:
        """Paths under the root that differ between two commits (all of old's when new is None)."""
        if new is None:
            out = self._output("ls-tree", "-r", "-z", "--name-only", "--full-tree", old, "--",
                               *self._pathspecs((), from_top=True))
        else:
            out = self._output("diff-tree", "-r", "-z", "--name-only", "--no-renames", old, new, "--",
                               *self._pathspecs(()))
        names = out.decode("utf-8", "surrogateescape").split("\0")
        return {n[len(self.prefix):] for n in names if n and n.startswith(self.prefix)}

    # ── Writing ──
    def build_tree(self, max_bytes: int, write: bool = True, cache: Optional[SnapshotCache] = None) -> TreeBuild:
        """The work tree under the root as a git tree. From the newest snapshot's cache when
        HEAD has not moved since: only the folders above what changed are rebuilt. Otherwise
        from a copy of the user's index, with every changed path put back from the disk raw."""
        usable = cache is not None and cache.head == self.head and cache.prefix == self.prefix
        states, skipped, rehashed = self.survey(max_bytes, cache.paths if usable else {}, write)
        skipped_paths = {s.path for s in skipped}
        files = sum(1 for path, s in states.items() if s.entry != HEAD_ENTRY and path not in skipped_paths)
        if usable:
            tree = self._tree_from(cache, self.updates_since(cache, states))
        else:
            info = [f"0 {ZERO_SHA}\t{self.prefix}{rel}\0" for rel, s in states.items() if s.entry is None]
            info += [f"{s.entry[0]} {s.entry[1]}\t{self.prefix}{rel}\0" for rel, s in states.items()
                     if isinstance(s.entry, tuple)]
            tree = self._write_tree("".join(info).encode("utf-8", "surrogateescape"), write)
        return TreeBuild(tree, skipped, files, states, rehashed or not usable)

    def _tree_from(self, cache: SnapshotCache, updates: dict) -> str:
        """The cached snapshot's tree with `updates` applied: the folders above them are read,
        changed in memory (section 6) and stored with `git mktree`, which checks every id."""
        if not updates:
            return cache.tree
        heads = [p for p, entry in updates.items() if entry == HEAD_ENTRY]
        resolved = self._entries_at_head(heads)
        updates = {self.prefix + p: resolved.get(p) if entry == HEAD_ENTRY else entry for p, entry in updates.items()}
        folders = sorted(parent_folders(updates))
        trees = self._read_trees(cache.tree, folders)
        top, written = rebuild_trees(trees, updates)
        request = b"".join(_mktree_input(raw) + b"\0" for _, raw in written)
        stored = self._output("mktree", "-z", "--batch", stdin=request).decode("ascii").split()
        if stored != [tree for tree, _ in written]:
            raise SnapshotError("git mktree disagreed with the tree built from the cache")
        return top

    def _entries_at_head(self, paths: list) -> dict:
        """{path: (mode, blob)} of each path as HEAD holds it (paths HEAD lacks are left out)."""
        found: dict = {}
        if not paths or self.head is None:
            return found
        for start in range(0, len(paths), 500):  # bounded argument lists
            chunk = paths[start:start + 500]
            out = self._output("ls-tree", "-z", "--full-tree", self.head, "--", *(self.prefix + p for p in chunk))
            for line in out.decode("utf-8", "surrogateescape").split("\0"):
                if line:
                    meta, name = line.split("\t", 1)
                    mode, _, blob = meta.split(" ")
                    found[name[len(self.prefix):]] = (mode, blob)
        return found

    def _read_trees(self, tree: str, folders: list) -> dict:
        """{folder: {name: (mode, id)}} of `tree`'s folders; {} for one it does not hold."""
        request = "".join(f"{tree}:{f}\n" if f else f"{tree}\n" for f in folders)
        out = self._output("cat-file", "--batch", stdin=request.encode("utf-8", "surrogateescape"))
        trees, position = {}, 0
        for folder in folders:
            end = out.index(b"\n", position)
            header = out[position:end].split(b" ")
            position = end + 1
            if len(header) == 3 and header[1] in (b"tree", b"blob", b"commit"):
                size = int(header[2])
                trees[folder] = parse_tree(out[position:position + size]) if header[1] == b"tree" else {}
                position += size + 1
            else:
                trees[folder] = {}
        return trees

    def commit(self, build: TreeBuild, kind: SnapshotKind, title: str, facts: dict, now: float,
               keep: int, existing: list) -> Snapshot:
        """Commit the tree (parent: HEAD), add the ref and drop the refs past `keep`, in one
        ref transaction. A ref name holds the time, so names sort by age."""
        head = self.scan.state.head if self.scan.state else None
        facts = {**facts, "kind": kind.value, "head": head, "files": build.files, "goal": title, "root": self.prefix,
                 "skipped": [s.to_json() for s in build.skipped[:SNAPSHOT_SKIPPED_SHOWN]]}
        date = f"@{int(now)} +0000"
        message = snapshot_message(title, facts)
        commit = self._output("commit-tree", "--no-gpg-sign", build.tree, *(["-p", head] if head else []),
                              stdin=message.encode("utf-8", "surrogateescape"),
                              env={**SNAPSHOT_IDENTITY, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
                              ).decode("ascii").strip()
        ref = f"{self.namespace}/{int(now * 1000):013d}-{commit[:SHORT_SHA]}"
        commands = [f"create {ref}\0{commit}\0"] + [f"delete {old}\0\0" for old in snapshots_to_prune(existing, keep - 1)]
        self._output("update-ref", "--stdin", "-z", stdin="".join(commands).encode("utf-8", "surrogateescape"))
        return parse_snapshot(ref, commit, build.tree, message)  # exactly what `list` will read back

    def forget(self, refs: list) -> None:
        if refs:
            self._output("update-ref", "--stdin", "-z", stdin="".join(f"delete {r}\0\0" for r in refs).encode())

    def read_blobs(self, blobs: list, take: Callable[[str, Iterable[bytes]], None]) -> None:
        """Stream each blob's content to take(blob, chunks), through one `git cat-file --batch`."""
        proc = self.git.start("cat-file", "--batch")
        import threading
        feeder = threading.Thread(target=_feed, args=(proc.stdin, "".join(f"{b}\n" for b in blobs).encode()),
                                  daemon=True)
        feeder.start()
        try:
            for blob in blobs:
                header = proc.stdout.readline().split()
                if len(header) != 3 or header[1] != b"blob":
                    raise SnapshotError(f"the snapshot's object {blob} is missing from the repository")
                remaining = int(header[2])
                take(blob, _chunks(proc.stdout, remaining))
                proc.stdout.read(1)  # the newline after each object
        finally:
            _kill_tree(proc)

    # ── Plumbing ──
    def _output(self, *args: str, stdin: Optional[bytes] = None, **options: Any) -> bytes:
        return _plumbing_output(_begin_plumbing(self.git, *args, stdin=stdin is not None, **options), stdin)

    def _pathspecs(self, paths: Iterable[str], from_top: bool = False) -> list:
        """Literal pathspecs for the root (or paths under it): relative to the root, where git
        runs, or to the repository's top for commands given --full-tree."""
        if from_top:
            return [self.prefix + p for p in paths] or ([self.prefix] if self.prefix else [])
        return list(paths) or ["."]

    def _hash_files(self, paths: list, write: bool) -> list:
        if not paths:
            return []
        out = self._output("hash-object", *(["-w"] if write else []), "--no-filters", "--stdin-paths",
                           stdin="".join(p + "\n" for p in paths).encode("utf-8", "surrogateescape"))
        blobs = out.decode("ascii").split()
        if len(blobs) != len(paths):
            raise SnapshotError("git hash-object did not hash every changed file")
        return blobs

    def _hash_bytes(self, content: bytes, write: bool) -> str:
        return self._output("hash-object", *(["-w"] if write else []), "--no-filters", "--stdin",
                            stdin=content).decode("ascii").strip()

    def _write_tree(self, index_info: bytes, write: bool) -> str:
        """update-index and write-tree on a temporary copy of the user's index, which is only read."""
        folder = self.git_dir
        user_index = os.path.join(folder, "index") if folder else self.git.git_path("index")
        if user_index is None:
            raise SnapshotError("git could not say where the repository's index is")
        temp = f"{user_index}.claude-checkpoint-{os.getpid()}-{os.urandom(4).hex()}"
        env = {"GIT_INDEX_FILE": temp}
        try:
            _copy_file(user_index, temp)
            if index_info:
                self._output("update-index", "-z", "--index-info", stdin=index_info, env=env)
            return self._output("write-tree", *([] if write else ["--missing-ok"]), env=env).decode("ascii").strip()
        finally:
            for leftover in (temp, temp + ".lock"):
                try:
                    os.unlink(leftover)
                except OSError:
                    pass


def git_folder(root: str, prefix: str) -> Optional[str]:
    """The git folder of the worktree that holds `root` at `prefix`, found without running git:
    `.git` at the repository's top is that folder, or a file naming it (linked worktrees,
    submodules)."""
    top = root
    for _ in prefix.strip("/").split("/") if prefix else ():
        top = os.path.dirname(top)
    dot_git = os.path.join(top, ".git")
    if os.path.isfile(dot_git):
        try:
            with open(dot_git, encoding="utf-8") as stream:
                line = stream.readline().strip()
        except (OSError, UnicodeDecodeError):
            return None
        if not line.startswith("gitdir: "):
            return None
        dot_git = os.path.join(top, line[8:])
    return dot_git if os.path.isdir(dot_git) else None


def snapshot_namespace(root: str) -> str:
    """The folder of refs that holds one project root's snapshots."""
    return SNAPSHOT_REFS + sha1(os.fsencode(root)).hexdigest()[:12]


def _begin_plumbing(git: Git, *args: str, **options: Any) -> PendingGit:
    """A snapshot command, started: literal pathspecs, no reflog, the snapshot timeout."""
    options.setdefault("timeout", SNAPSHOT_TIMEOUT_S)
    options["env"] = {"GIT_LITERAL_PATHSPECS": "1", **options.get("env", {})}
    return git.begin("-c", "core.logAllRefUpdates=false", *args, **options)


def _plumbing_output(started: PendingGit, stdin: Optional[bytes] = None) -> bytes:
    """What a snapshot command printed; SnapshotError when it failed or git is unavailable."""
    result = started.result(stdin)
    if result is None:
        git = started.git
        raise SnapshotError(git.warnings[-1] if git.warnings else "git is unavailable")
    if not result.ok:
        raise SnapshotError(f"git {started.name} failed: {result.error_text()}")
    return result.stdout


def _racy_window_ns(mtime_ns: int) -> int:
    """How recent a change may hide a second one within the file system's clock tick: Linux and
    APFS keep nanoseconds updated every few ms; whole-millisecond or coarser stamps (FAT, HFS+,
    some network file systems) may hide two seconds."""
    return 2_000_000_000 if mtime_ns % 1_000_000 == 0 else 100_000_000


def _mktree_input(raw: bytes) -> bytes:
    """A raw tree object as `git mktree -z` input lines."""
    kinds = {TREE_MODE: b"tree", "160000": b"commit"}
    return b"".join(mode.encode() + b" " + kinds.get(mode, b"blob") + b" " + oid.encode() + b"\t" + name + b"\0"
                    for name, (mode, oid) in parse_tree(raw).items())


def _copy_file(source: str, target: str) -> None:
    """Copy the user's index to our temporary one (nothing is copied when there is none yet)."""
    try:
        reader = open(source, "rb")
    except FileNotFoundError:
        return
    with reader, open(target, "xb") as writer:
        while True:
            chunk = reader.read(HASH_CHUNK_BYTES)
            if not chunk:
                break
            writer.write(chunk)


def _feed(stream: Any, data: bytes) -> None:
    try:
        stream.write(data)
        stream.close()
    except OSError:
        pass


def _chunks(stream: Any, remaining: int) -> Iterable[bytes]:
    while remaining > 0:
        chunk = stream.read(min(HASH_CHUNK_BYTES, remaining))
        if not chunk:
            raise SnapshotError("git cat-file ended early")
        remaining -= len(chunk)
        yield chunk


# ════════════════════════════════════════════════════════════════════════════
# 9. Storage: every file this program writes (checkpoint, settings, cache, a restore's), locks, transcripts
# ════════════════════════════════════════════════════════════════════════════

@record
class StoredFile:
    checkpoint: Optional[Checkpoint]  # None when there is none
    raw: Optional[bytes] = None  # the valid main file's bytes, kept as .prev on the next write
    from_backup: bool = False
    warnings: list = field(default_factory=list)


def _read_small(path: str) -> Optional[bytes]:
    """The file's bytes; None when it does not exist. Refuses symlinks, giant files and
    anything but a regular file (a FIFO planted at the name would block the reader)."""
    import stat
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        return None
    except OSError as error:
        if os.path.islink(path):
            raise StorageError(f"{os.path.basename(path)} is a symlink; refusing to follow it.") from None
        raise StorageError(f"cannot read {os.path.basename(path)}: {error.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise StorageError(f"{os.path.basename(path)} is not a regular file.")
    with os.fdopen(fd, "rb") as stream:
        data = stream.read(MAX_READ_BYTES + 1)
    if len(data) > MAX_READ_BYTES:
        raise StorageError(f"{os.path.basename(path)} is larger than {MAX_READ_BYTES} bytes; not a checkpoint.")
    return data


def decode_checkpoint(data: bytes) -> Checkpoint:
    import json
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise CheckpointError(f"not valid UTF-8 JSON ({error})") from None
    return Checkpoint.from_json(doc)


def read_checkpoint(root: str) -> StoredFile:
    """The checkpoint, falling back to .prev when the main file is corrupt or unreadable.
    Raises UnsupportedVersion for a newer schema and StorageError when both are unusable."""
    main_path, backup_path = os.path.join(root, CHECKPOINT_NAME), os.path.join(root, BACKUP_NAME)
    try:
        raw = _read_small(main_path)
        if raw is None:
            return StoredFile(None)
        return StoredFile(decode_checkpoint(raw), raw=raw)
    except UnsupportedVersion:
        raise
    except CheckpointError as error:
        problem = str(error)
    try:
        backup = _read_small(backup_path)
        if backup is None:
            raise CheckpointError("there is no backup")
        checkpoint = decode_checkpoint(backup)
    except UnsupportedVersion:
        raise
    except CheckpointError as error:
        raise StorageError(f"{CHECKPOINT_NAME} is unreadable ({problem}) and so is {BACKUP_NAME} ({error}). "
                           f"Fix or delete {main_path}, then save a new checkpoint.") from None
    return StoredFile(checkpoint, from_backup=True,
                      warnings=[f"{CHECKPOINT_NAME} is unreadable ({problem}); loaded the backup {BACKUP_NAME}."])


def write_atomically(path: str, data: Any, mode: int = 0o600, durable: bool = True) -> None:
    """The one way this program writes a file (`data`: bytes, or chunks of bytes): a temp file beside it (created exclusively,
    `mode` whatever the umask, fsynced), then a rename over the old one. A reader sees the
    old file or the new one, never half of either; a failure leaves the old file and no temp."""
    folder, name = os.path.split(path)
    for _ in range(20):
        temp = os.path.join(folder, f"{name}.tmp-{os.getpid()}-{os.urandom(4).hex()}")
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_BINARY", 0), mode)
            break
        except FileExistsError:
            continue
    else:
        raise StorageError(f"could not create a temporary file in {folder}")
    try:
        try:
            if hasattr(os, "fchmod"):
                os.fchmod(fd, mode)
            for chunk in ([data] if isinstance(data, (bytes, bytearray)) else data):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view):]
            if durable:  # a cache need not survive a power cut, only a crash
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)  # replaces a planted symlink, never follows it
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise


def write_checkpoint(root: str, data: bytes, previous_raw: Optional[bytes]) -> None:
    """Keep the previous valid checkpoint as .prev, then replace the main file atomically.
    On any failure the old files are intact and no temp file is left."""
    try:
        if previous_raw is not None:
            write_atomically(os.path.join(root, BACKUP_NAME), previous_raw)
        write_atomically(os.path.join(root, CHECKPOINT_NAME), data)
        _fsync_folder(root)
    except OSError as error:
        raise StorageError(f"Could not write {os.path.join(root, CHECKPOINT_NAME)}: {error.strerror or error}. "
                           "The previous checkpoint is intact.") from None


def _fsync_folder(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class FileMemo:
    """Answers read or derived from a file, kept while the file stays as it was: a running
    server answers call after call, and most find the index and the snapshot cache unchanged.
    A file is the same while its stat facts (device, inode, size, mtime, ctime) are; an answer
    is kept only when those facts were older than the file system's clock tick before it was
    worked out and unchanged after, so no later change can hide behind equal facts (git's
    own rule for racy index entries). The answers are shared: callers never change them."""
    LIMIT = 8  # answers kept at once: two per project root (its index, its snapshot cache), a few roots

    def __init__(self) -> None:
        self.kept: dict = {}  # {(what, path): (facts, answer)}

    def recall(self, what: str, path: Optional[str]) -> tuple:
        """(facts to keep an answer under, the kept answer or None)."""
        facts = _settled_facts(path)
        found = self.kept.get((what, path))
        return facts, (found[1] if found is not None and facts is not None and found[0] == facts else None)

    def keep(self, what: str, path: Optional[str], facts: Optional[tuple], answer: Any) -> None:
        if facts is None or answer is None or _settled_facts(path) != facts:
            return
        if len(self.kept) >= self.LIMIT:
            self.kept.clear()
        self.kept[(what, path)] = (facts, answer)


def _settled_facts(path: Optional[str]) -> Optional[tuple]:
    """A file's stat facts; None when it is missing or changed within the last clock tick."""
    import time
    try:
        info = os.stat(path) if path is not None else None
    except OSError:
        return None
    if info is None:
        return None
    changed = max(info.st_mtime_ns, info.st_ctime_ns)
    if changed >= time.time_ns() - _racy_window_ns(changed):
        return None
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


def read_snapshot_cache(path: Optional[str], memo: Optional[FileMemo] = None) -> Optional[SnapshotCache]:
    """The cached path states of the newest snapshot; None when absent or unreadable (a cache
    is never worth an error). With `memo`, parsed again only when the file changed."""
    import json
    if path is None:
        return None
    facts, cache = memo.recall("snapshot cache", path) if memo is not None else (None, None)
    if cache is not None:
        return cache
    try:
        with open(path, "rb") as stream:
            cache = SnapshotCache.from_json(json.loads(stream.read()))
    except (OSError, ValueError):
        return None
    if memo is not None:
        memo.keep("snapshot cache", path, facts, cache)
    return cache


def write_snapshot_cache(path: Optional[str], cache: SnapshotCache) -> None:
    import json
    if path is None:
        return
    try:
        write_atomically(path, json.dumps(cache.to_json(), separators=(",", ":")).encode("utf-8", "surrogateescape"),
                         durable=False)
    except (OSError, StorageError):
        pass  # the next snapshot builds from the index instead


class ProjectLock:
    """An exclusive lock held while one process reads, changes and writes the checkpoint: two
    servers or hooks saving into one project take turns, so a merge never loses the other's
    update. On POSIX the lock is on the project folder itself (flock on a read-only descriptor
    of the folder), so no lock file is left in the project. Windows cannot lock a folder:
    there it locks <root>/.claude-checkpoint.lock."""

    def __init__(self, root: str, timeout: float = 10.0):
        self.root = root
        self.timeout = timeout
        self.fd: Optional[int] = None

    def __enter__(self) -> "ProjectLock":
        import time
        self.fd = _lock_descriptor(self.root)
        deadline = time.monotonic() + self.timeout
        while not _try_lock(self.fd):
            if time.monotonic() > deadline:
                os.close(self.fd)
                self.fd = None
                raise StorageError(f"Another process has been saving into {self.root} for {self.timeout:g} s; "
                                   "try again.")
            time.sleep(0.01)
        if os.name != "nt":
            _remove_old_lock_file(self.root)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.fd is not None:
            _unlock(self.fd)
            os.close(self.fd)
            self.fd = None


def _lock_descriptor(root: str) -> int:
    if os.name == "nt":
        target, flags = os.path.join(root, LOCK_NAME), os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0)
    else:
        target, flags = root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    try:
        return os.open(target, flags | _NOFOLLOW, 0o600)
    except OSError as error:
        raise StorageError(f"Could not open {target} to lock it: {error.strerror}.") from None


def _try_lock(fd: int) -> bool:
    """True once this process holds the lock, False while another one does. A file system that
    cannot lock at all (some network mounts) counts as held: every write stays atomic, only two
    merges at the same instant could then lose an update."""
    try:
        import fcntl
    except ImportError:  # Windows
        import msvcrt
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def _unlock(fd: int) -> None:
    try:
        import fcntl
        fcntl.flock(fd, fcntl.LOCK_UN)
    except ImportError:
        import msvcrt
        try:
            os.lseek(fd, 0, 0)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        except OSError:
            pass
    except OSError:
        pass


def _remove_old_lock_file(root: str) -> None:
    """claude-checkpoint 1.0.0 locked an empty .claude-checkpoint.lock on POSIX too; it goes."""
    import stat
    path = os.path.join(root, LOCK_NAME)
    try:
        info = os.lstat(path)
        if stat.S_ISREG(info.st_mode) and info.st_size == 0:
            os.unlink(path)
    except OSError:
        pass


def scan_transcript(path: str, start: int, previous: Optional[Checkpoint]) -> TranscriptFacts:
    """Stream the transcript from byte `start` (where the last hook stopped)."""
    seen = previous.hooks.tool_use_ids if previous else []
    scanner = TranscriptScanner(seen, want_prompt=needs_goal(previous))
    import stat
    try:
        with open(path, "rb") as stream:
            info = os.fstat(stream.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise CheckpointError(f"the transcript {path} is not a regular file")
            if start > info.st_size:  # the transcript was rewritten: read it all, the ids prevent repeats
                start = 0
            stream.seek(start)
            offset = start
            scanner.facts.resume_offset = start
            while True:
                line = stream.readline(MAX_TRANSCRIPT_LINE)
                if not line:
                    break
                if len(line) < MAX_TRANSCRIPT_LINE or line.endswith(b"\n"):
                    scanner.feed(line, offset)  # a longer line is skipped piece by piece
                offset += len(line)
    except OSError as error:
        raise CheckpointError(f"cannot read the transcript {path}: {error.strerror}") from None
    return scanner.finish()


# ── 9.1 The work tree: what a restore looks at and writes ──
# Everything a restore deletes or overwrites is already in the before-restore snapshot;
# each file is written atomically (temp file, rename), so a failure leaves it whole.

def apply_restore(store: SnapshotStore, plan: RestorePlan) -> None:
    """Deletes first (and the folders they leave empty), then writes, in path order."""
    root = store.root
    for rel in plan.delete:
        os.unlink(os.path.join(root, *rel.split("/")))
    for rel in sorted(plan.delete, key=lambda p: -p.count("/")):
        _remove_empty_folders(root, rel)
    writes = sorted(plan.write, key=lambda c: c.path)
    for change in writes:
        full = os.path.join(root, *change.path.split("/"))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if os.path.isdir(full) and not os.path.islink(full):
            os.rmdir(full)  # emptied by the deletes above (the plan refused otherwise)
    pending = iter(writes)
    umask = _umask()

    def take(blob: str, chunks: Iterable[bytes]) -> None:
        change = next(pending)
        full = os.path.join(root, *change.path.split("/"))
        if change.mode == "120000":
            _replace_with_symlink(full, b"".join(chunks))
        else:
            write_atomically(full, chunks, (0o777 if change.mode == "100755" else 0o666) & ~umask)

    store.read_blobs([c.blob for c in writes], take)


def disk_facts(root: str, changes: list) -> tuple:
    """What is on disk at each changed path and its parent folders, and the files inside any
    folder that a restored file would replace."""
    on_disk: dict = {}
    folder_files: dict = {}
    for change in changes:
        parts = change.path.split("/")
        for depth in range(1, len(parts) + 1):
            rel = "/".join(parts[:depth])
            if rel not in on_disk:
                on_disk[rel] = disk_kind(os.path.join(root, *parts[:depth]))[0]
        if change.status != "D" and on_disk[change.path] in ("dir", "repo"):
            folder_files[change.path] = files_under(root, change.path)
    return on_disk, folder_files


def files_under(root: str, rel: str) -> list:
    found = []
    for folder, dirs, files in os.walk(os.path.join(root, *rel.split("/"))):
        base = os.path.relpath(folder, root).replace(os.sep, "/")
        found += [f"{base}/{name}" for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]]
    return found


def _remove_empty_folders(root: str, rel: str) -> None:
    parts = rel.split("/")[:-1]
    while parts:
        try:
            os.rmdir(os.path.join(root, *parts))
        except OSError:
            return
        parts.pop()


def _replace_with_symlink(full: str, target: bytes) -> None:
    temp = f"{full}.tmp-{os.getpid()}-{os.urandom(4).hex()}"
    os.symlink(os.fsdecode(target), temp)
    try:
        os.replace(temp, full)
    except OSError:
        os.unlink(temp)
        raise


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current


# ════════════════════════════════════════════════════════════════════════════
# 10. Root resolution
# ════════════════════════════════════════════════════════════════════════════

@record
class RootChoice:
    path: str
    source: str  # says why this root was used


def choose_root(argument: Optional[str], env: dict, client_roots: list, cwd: str) -> RootChoice:
    """projectRoot > CHECKPOINT_PROJECT_ROOT > the client's first file:// root >
    CLAUDE_PROJECT_DIR > the working directory. Pure: checks happen in resolve_root."""
    if argument:
        return RootChoice(argument, "the projectRoot argument")
    if env.get("CHECKPOINT_PROJECT_ROOT"):
        return RootChoice(env["CHECKPOINT_PROJECT_ROOT"], "CHECKPOINT_PROJECT_ROOT")
    for uri in client_roots:
        path = file_uri_to_path(uri)
        if path:
            return RootChoice(path, "the client's roots")
    if env.get("CLAUDE_PROJECT_DIR"):
        return RootChoice(env["CLAUDE_PROJECT_DIR"], "CLAUDE_PROJECT_DIR")
    return RootChoice(cwd, "the working directory")


def file_uri_to_path(uri: Any) -> Optional[str]:
    if not isinstance(uri, str) or not uri.lower().startswith("file://"):
        return None
    from urllib.parse import unquote, urlsplit
    parts = urlsplit(uri)
    if parts.netloc not in ("", "localhost"):
        return None
    path = unquote(parts.path)
    if os.name == "nt" and len(path) > 2 and path[0] == "/" and path[2] == ":":
        path = path[1:]
    return path or None


def resolve_root(choice: RootChoice, home: Optional[str]) -> str:
    """An absolute, existing folder, symlinks resolved, that is neither / nor the home folder."""
    if not os.path.isabs(choice.path):
        raise RootError(f"projectRoot must be an absolute path (got {choice.path!r} from {choice.source}).")
    real = os.path.realpath(choice.path)
    if not os.path.isdir(real):
        raise RootError(f"Project root {choice.path} (from {choice.source}) is not an existing folder.")
    forbidden = {os.path.realpath(os.sep)}
    if home:
        forbidden.add(os.path.realpath(home))
    if real in forbidden or os.path.dirname(real) == real:
        raise RootError(f"Refusing to use {real} (from {choice.source}) as the project root: it is the "
                        "filesystem root or your home folder. Pass projectRoot with the project's absolute "
                        "path, or set CHECKPOINT_PROJECT_ROOT.")
    return real


# ════════════════════════════════════════════════════════════════════════════
# 11. Services: checkpoints and snapshots, for tools, hooks and the command line
# ════════════════════════════════════════════════════════════════════════════

@record
class World:
    """What the services need from outside the process, gathered once in section 14."""
    env: dict
    cwd: str
    home: Optional[str]
    clock: Callable[[], float]
    log: Callable[[str], None]  # the server log (stderr): never stdout, which carries the protocol
    known_secrets: tuple = ()
    program: tuple = ("claude-checkpoint-mcp",)  # how to run this program again (section 14)
    memo: Optional[FileMemo] = None  # what a running server need not read again (section 9); None: read all

    def root(self, argument: Optional[str] = None, client_roots: Iterable[str] = ()) -> str:
        return resolve_root(choose_root(argument, self.env, list(client_roots), self.cwd), self.home)

    def now_iso(self) -> str:
        return format_timestamp(self.clock())


def new_checkpoint_id() -> str:
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # a version 4 (random) UUID
    raw[8] = raw[8] & 0x3F | 0x80
    hexed = raw.hex()
    return f"{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:]}"


# ── 11.1 Code snapshots: take, list, diff, restore, forget (SPEC section 10) ──

@record
class SnapshotSettings:
    enabled: bool
    keep: int
    max_bytes: int

    @classmethod
    def from_env(cls, env: dict) -> "SnapshotSettings":
        return cls(enabled=env.get("CHECKPOINT_SNAPSHOTS", "").strip().lower() not in ("off", "0", "false", "no"),
                   keep=_positive_int(env.get("CHECKPOINT_SNAPSHOTS_KEEP"), SNAPSHOTS_KEEP),
                   max_bytes=_positive_int(env.get("CHECKPOINT_SNAPSHOT_MAX_BYTES"), SNAPSHOT_MAX_BYTES))


def _positive_int(text: Optional[str], default: int) -> int:
    try:
        value = int(text or "")
    except ValueError:
        return default
    return value if value > 0 else default


@record
class SnapshotOutcome:
    snapshot: Snapshot
    reused: bool  # the work tree equals the newest snapshot, which stands for it
    skipped: list  # [Skipped]

    def to_json(self) -> dict:
        return {**self.snapshot.to_json(), "skipped": [s.to_json() for s in self.skipped], "reused": self.reused}


def open_snapshots(git: Git, root: str, scan: Optional[GitScan] = None) -> SnapshotStore:
    """The root's snapshot store; SnapshotError when there is no repository to keep them in."""
    scan = scan or git.scan()
    if not scan.in_repo:
        why = git.warnings[-1].rstrip(".") if git.warnings else f"{root} is not in a git repository"
        raise SnapshotError(f"No code snapshots: {why}.")
    return SnapshotStore(git, root, scan)


def take_snapshot(store: SnapshotStore, world: World, kind: SnapshotKind, title: str,
                  only_if_changed: bool = False, existing: Optional[list] = None,
                  build: Optional[TreeBuild] = None) -> Optional[SnapshotOutcome]:
    """Snapshot the work tree, or reuse the newest snapshot when its tree is the same. With
    only_if_changed (hooks), a clean tree with no snapshot yet makes none. A caller that has
    already listed the snapshots or built the tree (with its objects stored) passes them in."""
    existing = store.list() if existing is None else existing
    newest = existing[0] if existing else None
    if only_if_changed and newest is None and not store.scan.changes:
        return None
    settings = SnapshotSettings.from_env(world.env)
    build = build or build_snapshot_tree(store, newest, settings.max_bytes, write=True, memo=world.memo)
    if newest is not None and newest.tree == build.tree:
        if build.rehashed:  # keep what was learned, so the next snapshot need not hash it again
            write_snapshot_cache(store.cache_path, SnapshotCache(newest.commit, build.tree, store.head, store.prefix,
                                                                 build.paths))
        return SnapshotOutcome(newest, True, build.skipped)
    state = store.scan.state
    facts = {"createdAt": world.now_iso(), "branch": state.branch if state else None}
    made = store.commit(build, kind, title, facts, world.clock(), settings.keep, existing)
    write_snapshot_cache(store.cache_path, SnapshotCache(made.commit, build.tree, store.head, store.prefix, build.paths))
    return SnapshotOutcome(made, False, build.skipped)


def build_snapshot_tree(store: SnapshotStore, newest: Optional[Snapshot], max_bytes: int, write: bool,
                        memo: Optional[FileMemo] = None) -> TreeBuild:
    """The work tree as a tree: from the newest snapshot's cache when it is current, else whole."""
    cache = read_snapshot_cache(store.cache_path, memo) if newest is not None and write else None
    if cache is not None and (cache.commit, cache.tree) == (newest.commit, newest.tree):
        try:
            return store.build_tree(max_bytes, write, cache)
        except SnapshotError:
            pass  # a stale or damaged cache: build from the index
    return store.build_tree(max_bytes, write)


def snapshot_for_save(git: Git, root: str, scan: GitScan, world: World, kind: SnapshotKind, title: str,
                      warnings: list, listing: Optional[PendingGit] = None) -> Optional[SnapshotRef]:
    """The snapshot a save or hook records; None when there is none, with one warning saying
    why. A save never fails for want of a snapshot. Hooks run in every session, so they say
    nothing when snapshots are off or there is no repository: only a failure is worth a line.
    `listing` is SnapshotStore.begin_list's command when the caller started it already."""
    hook = kind is SnapshotKind.HOOK
    if not SnapshotSettings.from_env(world.env).enabled:
        if not hook:
            warnings.append("No code snapshot: snapshots are off (CHECKPOINT_SNAPSHOTS=off).")
        return None
    try:
        store = open_snapshots(git, root, scan)
    except SnapshotError as error:
        if not hook:
            warnings.append(str(error))
        return None
    try:
        outcome = take_snapshot(store, world, kind, title, only_if_changed=hook, existing=store.list(listing))
    except SnapshotError as error:
        warnings.append(f"No code snapshot: {error}")
        return None
    return None if outcome is None else SnapshotRef(outcome.snapshot.id, outcome.snapshot.commit)


def changed_since_snapshot(store: SnapshotStore, commit: str, max_bytes: int,
                           memo: Optional[FileMemo] = None) -> set:
    """Every path under the root whose content now differs from the snapshot: paths git calls
    clean equal HEAD, so they differ when HEAD differs from the snapshot; changed paths are
    hashed and compared one by one. Paths a snapshot would skip are never news."""
    cache = read_snapshot_cache(store.cache_path, memo)
    if cache is not None and cache.commit == commit and cache.head == store.head and cache.prefix == store.prefix:
        states, _, _ = store.survey(max_bytes, cache.paths, write=False)
        return set(store.updates_since(cache, states))
    state = store.scan.state
    changed = store.paths_between(commit, state.head if state else None)
    dirty = store.changed_paths()
    changed.difference_update(dirty)
    blobs = store.blobs_at(commit, dirty)
    status = dict(store.scan.changes)
    for rel in dirty:
        kind, info = disk_kind(os.path.join(store.root, *rel.rstrip("/").split("/")))
        if info is None:
            if rel in blobs:
                changed.add(rel)
        elif snapshot_skip_reason(rel, kind, info.st_size, status.get(rel) == "??", max_bytes) is None:
            if hash_worktree_file(store.root, rel) != blobs.get(rel):
                changed.add(rel)
    return changed


@record
class RestoreOutcome:
    snapshot: Snapshot  # the one restored (or that would be)
    plan: RestorePlan
    dry_run: bool
    safety: Optional[Snapshot] = None  # the before-restore snapshot that undoes it
    head_moved: bool = False  # HEAD is not the snapshot's parent any more

    def to_json(self) -> dict:
        return {"id": self.snapshot.id, "dryRun": self.dry_run,
                "safetySnapshot": self.safety.id if self.safety else None,
                "write": [c.path for c in self.plan.write], "delete": list(self.plan.delete),
                "skipped": [s.to_json() for s in self.plan.skipped]}


def plan_snapshot_restore(store: SnapshotStore, world: World, wanted: Optional[str], paths: list,
                          write_objects: bool) -> tuple:
    """(target snapshot, the current tree build, the restore plan, the snapshots listed).
    Refuses, changing nothing, when the plan would destroy what no snapshot holds."""
    snapshots = store.list()
    target = find_snapshot(snapshots, wanted)
    current = build_snapshot_tree(store, snapshots[0], SnapshotSettings.from_env(world.env).max_bytes, write_objects,
                                  world.memo)
    changes = store.diff(current.tree, target.tree, paths)
    on_disk, folder_files = disk_facts(store.root, changes)
    ignored = _ignored_now(store, [c.path for c in changes if c.status == "A"])
    plan = plan_restore(changes, on_disk, folder_files, ignored, {s.path: s.reason for s in current.skipped})
    if plan.refusals:
        raise SnapshotError("Restore refused; nothing was changed. " + " ".join(f"{r}." for r in plan.refusals[:5]))
    return target, current, plan, snapshots


def restore_snapshot(root: str, world: World, wanted: Optional[str], paths: list, apply: bool) -> RestoreOutcome:
    """Make the files under the root (or the paths) match a snapshot. Without `apply` only the
    plan. With it: a before-restore snapshot first, then deletes, then writes, each file atomic.
    HEAD, the index, refs other than our own, ignored and skipped files are never touched."""
    git = Git(root, timeout=SNAPSHOT_TIMEOUT_S)
    with ProjectLock(root):
        store = open_snapshots(git, root)
        target, current, plan, snapshots = plan_snapshot_restore(store, world, wanted, paths, write_objects=apply)
        head = store.scan.state.head if store.scan.state else None
        outcome = RestoreOutcome(target, plan, dry_run=not apply, head_moved=head != target.head)
        if not apply or not (plan.write or plan.delete):
            return outcome
        safety = take_snapshot(store, world, SnapshotKind.BEFORE_RESTORE, f"Before restoring {target.id}",
                               existing=snapshots, build=current)  # the tree the plan was made from
        outcome.safety = safety.snapshot if safety else None
        try:
            apply_restore(store, plan)
        except OSError as error:
            undo = f" Undo what was done with: restore {outcome.safety.id} --yes" if outcome.safety else ""
            raise SnapshotError(f"Restore stopped at {error.filename or 'a file'}: {error.strerror}.{undo}") from None
    return outcome


def _ignored_now(store: SnapshotStore, paths: list) -> set:
    if not paths:
        return set()
    result = store.git.run("check-ignore", "-z", "--stdin",
                           stdin="".join(f"{p}\0" for p in paths).encode("utf-8", "surrogateescape"))
    if result is None or result.code not in (0, 1):
        raise SnapshotError("git check-ignore failed; restore changed nothing")
    return {p for p in result.stdout.decode("utf-8", "surrogateescape").split("\0") if p}


def diff_snapshot(root: str, world: World, wanted: Optional[str], paths: list, patch: bool,
                  stat: bool = False, color: bool = False) -> tuple:
    """(restore plan, patch bytes or b""): what restoring the snapshot would change now."""
    git = Git(root, timeout=SNAPSHOT_TIMEOUT_S)
    with ProjectLock(root):
        store = open_snapshots(git, root)
        target, current, plan, _ = plan_snapshot_restore(store, world, wanted, paths, write_objects=patch)
        text = b""
        if patch and (plan.write or plan.delete):
            text = store.patch(current.tree, target.tree, [c.path for c in plan.write] + plan.delete, stat, color)
    return RestoreOutcome(target, plan, dry_run=True), text


def forget_snapshots(root: str, wanted: list, everything: bool) -> list:
    """Delete this root's snapshot refs (all of them, or the named ones); returns those deleted."""
    git = Git(root, timeout=SNAPSHOT_TIMEOUT_S)
    with ProjectLock(root):
        store = open_snapshots(git, root)
        snapshots = store.list()
        doomed = snapshots if everything else [find_snapshot(snapshots, w) for w in wanted]
        if everything and not snapshots:
            raise NothingToDo("There is no snapshot to forget.")
        store.forget(list(dict.fromkeys(s.ref for s in doomed)))
    return doomed


def snapshot_if_changed(root: str, world: World) -> Optional[SnapshotOutcome]:
    """A hook's snapshot when the transcript gave nothing to record: made only when the work
    tree differs from the newest snapshot (or, with none yet, from HEAD). Quiet outside git."""
    if not SnapshotSettings.from_env(world.env).enabled:
        return None
    git = Git(root, timeout=SNAPSHOT_TIMEOUT_S)
    with ProjectLock(root):
        finish_scan = git.begin_scan()
        listing = SnapshotStore.begin_list(git, root)  # beside git status: it needs nothing from it
        try:
            stored = read_checkpoint(root).checkpoint
        except CheckpointError:
            stored = None
        scan = finish_scan()
        if not scan.in_repo:
            listing.abandon()
            return None
        title = stored.goal if stored is not None else "Work tree at the end of a turn"
        store = SnapshotStore(git, root, scan)
        return take_snapshot(store, world, SnapshotKind.HOOK, title, only_if_changed=True, existing=store.list(listing))


def list_snapshots(root: str) -> list:
    return open_snapshots(Git(root, timeout=SNAPSHOT_TIMEOUT_S), root).list()


# ── 11.2 Checkpoints: save, load and what the hooks record ──

@record
class Change:
    """What one writer (a save, a hook) brings to the locked update of the checkpoint."""
    named: list  # [FileNote] files the model named, inside the root
    carried: list  # [FileEntry] files recorded earlier or proven by the transcript
    assemble: Callable[..., Checkpoint]  # (files, git state, now, new id) -> the new checkpoint
    mode: SaveMode = SaveMode.MERGE
    truncated: bool = False  # the merge itself dropped history past a limit
    snapshot_kind: SnapshotKind = SnapshotKind.SAVE


def update_checkpoint(root: str, world: World, prepare: Callable[..., Optional[Change]],
                      replace_unreadable: bool = True) -> Optional[SaveOutcome]:
    """The one read-modify-write of the checkpoint. Under the project lock: read the file,
    let `prepare(previous, warnings)` say what changes (None: nothing, and nothing is
    written), scan git, hash the files worth keeping, assemble, redact, cap, write."""
    git = Git(root)
    warnings: list = []
    with ProjectLock(root):
        stored = _read_for_update(root, warnings, replace_unreadable)
        change = prepare(stored.checkpoint, warnings)
        if change is None:
            return None
        # The git commands that need nothing from each other run together.
        finish_scan = git.begin_scan()
        listing = SnapshotStore.begin_list(git, root) if SnapshotSettings.from_env(world.env).enabled else None
        tracking = TrackedCheck(git, world.memo)
        try:
            scan = finish_scan()
            selection = select_files(scan.changes, change.named, change.carried)
            files = hash_entries(root, selection.entries)
            checkpoint = change.assemble(files, scan.state, world.now_iso(), new_checkpoint_id())
            checkpoint = replace(checkpoint, omitted_files=selection.omitted,
                                 truncated=change.truncated or checkpoint.truncated or bool(selection.omitted))
            redactor = Redactor(world.known_secrets)
            checkpoint = replace(redactor.checkpoint(checkpoint), redactions=redactor.count)
            snapshot = snapshot_for_save(git, root, scan, world, change.snapshot_kind, checkpoint.goal, warnings,
                                         listing)
            checkpoint, data = fit_to_size(replace(checkpoint, snapshot=snapshot))
            write_checkpoint(root, data, stored.raw)
            return _save_outcome(root, change.mode, checkpoint, data, git, scan, warnings,
                                 existed=stored.raw is not None, program=world.program, tracking=tracking)
        finally:
            for started in (listing, tracking):
                if started is not None:
                    started.abandon()


def save_checkpoint(root: str, request: SaveRequest, world: World) -> SaveOutcome:
    """The save tool and CLI `save`: the replace/merge table over the stored checkpoint."""
    named, outside = [], []
    for note in request.files:
        rel = contained_path(root, note.path)
        if rel is None:
            outside.append(f"Ignored modifiedFiles path {note.path!r}: it is outside the project root {root}.")
        elif not is_checkpoint_file(rel):
            named.append(FileNote(rel, note.note))

    def prepare(stored: Optional[Checkpoint], warnings: list) -> Change:
        warnings[:0] = outside
        previous = stored if request.mode is SaveMode.MERGE else None
        if request.mode is SaveMode.MERGE and previous is None:
            warnings.append("There was no readable checkpoint to merge into, so this save acted as a replace.")
        return Change(named, _inside(root, previous.modified_files) if previous else [],
                      lambda files, state, now, new_id: build_checkpoint(
                          previous, request, files, state, now, new_id, os.path.basename(root)),
                      request.mode, growth_truncated(previous, request))

    outcome = update_checkpoint(root, world, prepare)
    assert outcome is not None  # a save always writes
    return outcome


def _read_for_update(root: str, warnings: list, replace_unreadable: bool = True) -> StoredFile:
    """The current file before a write. A newer schema is never overwritten; when both files
    are unreadable, a save replaces them (replace_unreadable) and a hook refuses; a corrupt
    main file never becomes .prev."""
    try:
        stored = read_checkpoint(root)
    except StorageError as error:
        if not replace_unreadable:
            raise
        warnings.append(str(error).split(" Fix or delete")[0])
        return StoredFile(None)
    if stored.from_backup:
        warnings.extend(stored.warnings)
        return StoredFile(stored.checkpoint)  # the corrupt main file must not become .prev
    return stored


def hash_entries(root: str, entries: list, trust_git: bool = True) -> list:
    """Hash each entry's file now. Paths this scan's git reported are inside the work tree;
    any other path (named by the model, or read back from a file that may have been edited:
    trust_git=False) is checked first, so a hash is never taken of a file outside the project."""
    hashed, folders = [], {}
    for entry in entries:
        inside = (trust_git and entry.source is FileSource.GIT) or contained_path(root, entry.path, folders) is not None
        hashed.append(replace(entry, hash=hash_worktree_file(root, entry.path) if inside else None))
    return hashed


def _inside(root: str, entries: list) -> list:
    """Entries read back from the file whose paths stay in the project (it may have been edited)."""
    return [e for e in entries if contained_path(root, e.path) == e.path]


def _save_outcome(root: str, mode: SaveMode, checkpoint: Checkpoint, data: bytes, git: Git,
                  scan: GitScan, warnings: list, existed: bool, program: tuple,
                  tracking: Optional[TrackedCheck] = None) -> SaveOutcome:
    notes = []
    if checkpoint.redactions:
        notes.append(f"Redacted {checkpoint.redactions} secret-looking value(s).")
    if checkpoint.truncated:
        notes.append("Some history was dropped to stay within the limits (oldest commands first)"
                     + (f"; {checkpoint.omitted_files} changed file(s) were not recorded" if checkpoint.omitted_files else "")
                     + ".")
    if scan.in_repo:
        # The scan saw the file if it existed and is not ignored; only a first save asks git.
        warning = checkpoint_git_warning(git, root, program, scan.lists_checkpoint if existed else None, tracking)
        notes += [warning] if warning else []
    return SaveOutcome(os.path.join(root, CHECKPOINT_NAME), root, len(data), mode, checkpoint,
                       notes + warnings + git.warnings)


class TrackedCheck:
    """Which of the checkpoint's files git tracks (`git ls-files`), started when it is made: it
    needs no scan, so it runs beside git status. With a memo, git is asked again only when
    the index file changed (at a worktree's top, where the index is found without git)."""

    def __init__(self, git: Git, memo: Optional[FileMemo] = None):
        at_top = memo is not None and os.path.lexists(os.path.join(git.root, ".git"))
        folder = git_folder(git.root, "") if at_top else None
        self.memo, self.index = memo, (os.path.join(folder, "index") if folder else None)
        self.facts, self.answer = memo.recall("tracked", self.index) if self.index else (None, None)
        self.started = None if self.answer is not None else git.begin("ls-files", "-z", "--", CHECKPOINT_NAME,
                                                                      BACKUP_NAME)

    def tracked(self) -> tuple:
        """The tracked names; () when there are none or git could not say."""
        if self.answer is None and self.started is not None:
            found = self.started.output()
            if found is None:
                return ()
            self.answer = tuple(n for n in found.decode("utf-8", "surrogateescape").split("\0") if n)
            if self.index:
                self.memo.keep("tracked", self.index, self.facts, self.answer)
        return self.answer or ()

    def abandon(self) -> None:
        if self.started is not None:
            self.started.abandon()


def checkpoint_git_warning(git: Git, root: str, program: tuple, listed: Optional[bool] = None,
                           tracking: Optional[TrackedCheck] = None) -> Optional[str]:
    """What is wrong with the checkpoint's place in git, with the commands that fix it, each
    exactly as a shell runs it from any folder; None when all is well. Tracked (a `git add -A`
    after a save) is the worse case: it goes into the next commit, ignored or not. Otherwise
    not ignored: `listed` says whether this save's git status saw the file (None: ask git).
    `tracking` is the check when the caller started it already."""
    tracked = (tracking or TrackedCheck(git)).tracked()
    exclude = shell_line(program, "install", "--exclude", "--root", root)
    if tracked:
        untrack = shell_line(("git", "-C", root, "rm", "--cached", "--force", "--quiet", "--", *tracked))
        return (f"{CHECKPOINT_NAME} is tracked by git, so it is committed with your code. Untrack it with "
                f"`{untrack}` (the file stays on disk; commit the removal), then keep it out with `{exclude}`.")
    ignored = not listed if listed is not None else git.is_ignored(CHECKPOINT_NAME)
    if ignored is False:
        return (f"{CHECKPOINT_NAME} is not git-ignored: run `{exclude}` (or add `{CHECKPOINT_NAME}*` to "
                ".gitignore) so it is never committed.")
    return None


def load_checkpoint(root: str, world: World) -> LoadResult:
    """Read the checkpoint and measure drift against the working tree now."""
    path = os.path.join(root, CHECKPOINT_NAME)
    stored = read_checkpoint(root)
    if stored.checkpoint is None:
        return LoadResult(False, path, root)
    cp = stored.checkpoint
    result = LoadResult(True, path, root, from_backup=stored.from_backup, checkpoint=cp,
                        warnings=list(stored.warnings))
    if cp.snapshot is not None:
        result.restore_command = shell_line(world.program, "--root", root, "restore", cp.snapshot.id)
    if cp.git is None:
        return result
    git = Git(root)
    finish_scan = git.begin_scan()
    hashes = {e.path: e.hash for e in hash_entries(root, cp.modified_files, trust_git=False)}  # while git works
    scan = finish_scan()
    if scan.state is not None:
        commits = git.commits_since(cp.git.head, scan.state.head)
        if git.available:
            since = _changed_since_saved_snapshot(git, root, scan, cp, world, result.warnings)
            result.drift = compute_drift(cp, scan.state, scan.dirty_paths, hashes, commits, since)
    result.warnings += git.warnings
    return result


def _changed_since_saved_snapshot(git: Git, root: str, scan: GitScan, cp: Checkpoint, world: World,
                                  warnings: list) -> Optional[set]:
    """Paths that differ from the checkpoint's snapshot now; None when it has none (or it is gone)."""
    if cp.snapshot is None:
        return None
    try:
        store = open_snapshots(git, root, scan)
        return changed_since_snapshot(store, cp.snapshot.commit, SnapshotSettings.from_env(world.env).max_bytes,
                                      world.memo)
    except SnapshotError:
        warnings.append(f"The checkpoint's snapshot {cp.snapshot.id} is gone; drift covers the recorded files only.")
        return None


def record_transcript(root: str, transcript_path: str, session_id: str, world: World,
                      require_activity: bool = False) -> Optional[SaveOutcome]:
    """The hooks: merge what the transcript proves into the checkpoint. Returns None when the
    transcript holds nothing new (then nothing is written). With require_activity, a first
    prompt alone is not worth a checkpoint (Stop and SessionEnd fire in every session).
    A hook never replaces checkpoint files that are both unreadable: a person should look."""
    key = session_id or os.path.basename(transcript_path)

    def prepare(previous: Optional[Checkpoint], warnings: list) -> Optional[Change]:
        start = previous.hooks.cursors.get(key, 0) if previous else 0
        facts = scan_transcript(transcript_path, start, previous)
        new_goal = facts.first_prompt is not None and needs_goal(previous)
        if not (facts.edited_files or facts.commands or (new_goal and not require_activity)):
            return None
        edited = []
        for path, _ in facts.edited_files:
            rel = contained_path(root, path)
            if rel is not None and not is_checkpoint_file(rel):
                edited.append(FileEntry(rel, "M", FileSource.AGENT, auto=True))
        carried = (_inside(root, previous.modified_files) if previous else []) + edited
        return Change([], carried, lambda files, state, now, new_id: merge_transcript(
            previous, facts, files, state, now, new_id, os.path.basename(root), key),
            snapshot_kind=SnapshotKind.HOOK)

    return update_checkpoint(root, world, prepare, replace_unreadable=False)


# ════════════════════════════════════════════════════════════════════════════
# 12. MCP tools, prompts and resources: a table and a thin handler each
# ════════════════════════════════════════════════════════════════════════════

# ── 12.1 The tools ──

@record
class ToolResult:
    text: str
    structured: Optional[dict] = None
    is_error: bool = False

    def to_json(self) -> dict:
        doc: dict = {"content": [{"type": "text", "text": self.text}], "isError": self.is_error}
        if self.structured is not None:
            doc["structuredContent"] = self.structured
        return doc


@record
class ToolContext:
    world: World
    client_roots: list  # file:// URIs from the client, [] when none

    def root(self, argument: Optional[str]) -> str:
        return self.world.root(argument, self.client_roots)


SAVE_OUTPUT_SCHEMA = {"type": "object", "properties": {  # what clients check the structured answer against
    "path": {"type": "string"}, "projectRoot": {"type": "string"}, "bytes": {"type": "integer"},
    "mode": {"type": "string", "enum": [m.value for m in SaveMode]},
    "counts": {"type": "object", "properties": {
        k: {"type": "integer"} for k in ("tasks", "modifiedFiles", "recentCommands", "redactions")}},
    "git": {"type": ["object", "null"], "properties": {"branch": {"type": ["string", "null"]},
                                                        "head": {"type": "string"}}},
    "truncated": {"type": "boolean"},
    "warnings": {"type": "array", "items": {"type": "string"}},
}, "required": ["path", "bytes", "mode", "counts", "warnings"]}

def tool_save(arguments: Any, context: ToolContext) -> ToolResult:
    request = parse_save_arguments(arguments)
    outcome = save_checkpoint(context.root(request.project_root), request, context.world)
    return ToolResult(render_save_answer(outcome), outcome.structured())


def tool_load(arguments: Any, context: ToolContext) -> ToolResult:
    fmt, root_arg = parse_load_arguments(arguments)
    result = load_checkpoint(context.root(root_arg), context.world)
    if fmt is BriefFormat.FULL:
        import json
        return ToolResult(json.dumps(result.to_json(), ensure_ascii=False, indent=2))
    return ToolResult(render_brief(result, context.world.clock()))


@record
class Tool:
    name: str
    title: str
    description: str
    input_schema: dict
    annotations: dict
    handler: Callable[[Any, ToolContext], ToolResult]
    output_schema: Optional[dict] = None

    def describe(self) -> dict:
        doc = {"name": self.name, "title": self.title, "description": self.description,
               "inputSchema": self.input_schema, "annotations": self.annotations}
        if self.output_schema is not None:
            doc["outputSchema"] = self.output_schema
        return doc


TOOLS = {tool.name: tool for tool in (
    Tool("save_session_checkpoint", "Save session checkpoint",
         "Save the session's working state to <project>/.claude-checkpoint. Call after a milestone, "
         "before a risky operation and when the conversation grows long.",
         SAVE_INPUT_SCHEMA,
         {"destructiveHint": False, "idempotentHint": False, "openWorldHint": False},
         tool_save, SAVE_OUTPUT_SCHEMA),
    Tool("load_session_checkpoint", "Load session checkpoint",
         "Load the saved checkpoint as a resume brief that flags files changed since. Call at the start "
         "of a session and right after /clear or a compaction.",
         LOAD_INPUT_SCHEMA,
         {"readOnlyHint": True, "openWorldHint": False},
         tool_load),
)}


def call_tool(name: str, arguments: Any, context: ToolContext) -> ToolResult:
    """The one broad except: anything a tool raises becomes an isError result the model can read."""
    tool = TOOLS[name]
    try:
        return tool.handler({} if arguments is None else arguments, context)
    except CheckpointError as error:
        return ToolResult(f"{name} failed: {error}", is_error=True)
    except Exception as error:  # a bug: log it, keep serving
        import traceback
        context.world.log(traceback.format_exc())
        return ToolResult(f"{name} failed unexpectedly ({type(error).__name__}: {error}). "
                          "Nothing was written. Details are in the server log.", is_error=True)


# ── 12.2 Prompts and resources ──

PROMPTS = (
    {"name": "resume", "title": "Resume from checkpoint",
     "description": "The resume brief of the saved checkpoint, with files changed since."},
    {"name": "checkpoint", "title": "Save a checkpoint now",
     "description": "Ask the model to save everything it knows about this session as a checkpoint."},
)

CHECKPOINT_PROMPT = (
    "Save a session checkpoint now: call save_session_checkpoint with mode \"merge\" and everything you "
    "know about this session: the goal, every task with its status, a summary of where things stand "
    "(what works, what is broken, what was in flight), the next steps in order, the decisions and dead "
    "ends to remember, notes on the files that matter, and the commands that mattered with their exit codes.")

RESOURCES = (
    {"uri": "checkpoint://brief", "name": "brief", "title": "Resume brief", "mimeType": "text/markdown",
     "description": "The saved checkpoint as a compact resume brief, with drift since the save."},
    {"uri": "checkpoint://current", "name": "current", "title": "Checkpoint file", "mimeType": "application/json",
     "description": "The saved checkpoint file (.claude-checkpoint) as JSON."},
    {"uri": "checkpoint://snapshots", "name": "snapshots", "title": "Code snapshots", "mimeType": "application/json",
     "description": "The project's code snapshots, newest first (restoring is the user's call, from the command line)."},
)


def get_prompt(name: str, context: ToolContext) -> dict:
    if name == "resume":
        result = load_checkpoint(context.root(None), context.world)
        text = render_brief(result, context.world.clock())
    else:
        text = CHECKPOINT_PROMPT
    prompt = next(p for p in PROMPTS if p["name"] == name)
    return {"description": prompt["description"],
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}]}


def read_resource(uri: str, context: ToolContext) -> dict:
    root = context.root(None)
    if uri == "checkpoint://brief":
        text = render_brief(load_checkpoint(root, context.world), context.world.clock())
        mime = "text/markdown"
    elif uri == "checkpoint://snapshots":
        import json
        text = json.dumps([s.to_json() for s in list_snapshots(root)], ensure_ascii=False, indent=2)
        mime = "application/json"
    else:
        stored = read_checkpoint(root)
        if stored.checkpoint is None:
            raise CheckpointError(f"No checkpoint at {os.path.join(root, CHECKPOINT_NAME)} yet.")
        import json
        text = json.dumps(stored.checkpoint.to_json(), ensure_ascii=False, indent=2)
        mime = "application/json"
    return {"contents": [{"uri": uri, "mimeType": mime, "text": text}]}


# ════════════════════════════════════════════════════════════════════════════
# 13. Protocol: JSON-RPC messages in, replies out (no I/O of its own)
# ════════════════════════════════════════════════════════════════════════════

class RpcError(Exception):
    """A JSON-RPC error reply."""

    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(message)
        self.code = code
        self.data = data


class InputRequired(Exception):
    """2026-07-28: the call needs the client's roots; answer input_required and wait for the retry."""


@record
class Request:
    """One incoming request, its era settled."""
    id: Any
    method: str
    params: dict
    stateless: bool = False  # carries the 2026-07-28 envelope
    client_capabilities: dict = field(default_factory=dict)


def error_reply(request_id: Any, code: int, message: str, data: Any = None) -> dict:
    error: dict = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _valid_id(value: Any) -> bool:
    return value is None or isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


class Protocol:
    """The server's side of MCP for one client connection, both eras.

    `handle(message)` returns the reply (or None for a notification). Requests the server
    wants to send to the client (roots/list) are appended to `outbox`; the transport
    sends them, and holds the requests that need a root while `roots_pending`."""

    def __init__(self, world: World):
        self.world = world
        self.client_capabilities: dict = {}
        self.client_roots: list = []
        self.roots_request_id: Optional[str] = None
        self.roots_asked_at: Optional[float] = None
        self.outbox: list = []
        self._requests_sent = 0
        self.handlers = {
            "initialize": self._initialize, "ping": lambda r: {}, "server/discover": self._discover,
            "tools/list": lambda r: {"tools": [t.describe() for t in TOOLS.values()]},
            "tools/call": self._call_tool,
            "prompts/list": lambda r: {"prompts": list(PROMPTS)}, "prompts/get": self._get_prompt,
            "resources/list": lambda r: {"resources": list(RESOURCES)},
            "resources/templates/list": lambda r: {"resourceTemplates": []},
            "resources/read": self._read_resource,
        }

    # ── Messages ──
    def handle(self, message: Any) -> Optional[dict]:
        """The reply to one message: None for a notification or a response. Every field is
        checked for its type before use (a wrong one is -32600 or -32602), so the except
        below is for bugs alone."""
        try:
            return self._handle(message)
        except Exception as error:  # a bug: log it, answer, keep serving
            import traceback
            self.world.log(traceback.format_exc())
            if not (isinstance(message, dict) and "id" in message and "method" in message):
                return None
            request_id = message["id"] if _valid_id(message["id"]) else None
            return error_reply(request_id, INTERNAL_ERROR, f"Internal error: {type(error).__name__}")

    def _handle(self, message: Any) -> Optional[dict]:
        if not isinstance(message, dict):
            return error_reply(None, INVALID_REQUEST, "Invalid request: expected a JSON-RPC object")
        if "method" not in message and "id" in message and ("result" in message or "error" in message):
            self._client_response(message)
            return None
        request_id, method, params = message.get("id"), message.get("method"), message.get("params", {})
        is_notification = "id" not in message
        if (message.get("jsonrpc") != "2.0" or not isinstance(method, str) or not _valid_id(request_id)
                or not isinstance(params, dict)):
            if is_notification and isinstance(method, str):
                return None  # a malformed notification gets no reply either
            return error_reply(request_id if _valid_id(request_id) else None, INVALID_REQUEST,
                               "Invalid request: needs jsonrpc \"2.0\", a string method, an id that is a string "
                               "or integer, and params that are an object")
        if is_notification:
            self._notification(method, params)
            return None
        try:
            request = self._settle_era(request_id, method, params)
            handler = self.handlers.get(method)
            if handler is None:
                raise RpcError(METHOD_NOT_FOUND, f"Method not found: {short_name(method)}")
            result = handler(request)
        except RpcError as error:
            return error_reply(request_id, error.code, str(error), error.data)
        except InputRequired:
            return {"jsonrpc": "2.0", "id": request_id, "result": self._input_required()}
        except CheckpointError as error:
            return error_reply(request_id, INVALID_PARAMS, str(error))
        return {"jsonrpc": "2.0", "id": request_id, "result": self._decorate(request, result)}

    def _settle_era(self, request_id: Any, method: str, params: dict) -> Request:
        meta = params.get("_meta")
        if method == "initialize" or not (isinstance(meta, dict) and META_PROTOCOL in meta) and method != "server/discover":
            return Request(request_id, method, params)
        if not isinstance(meta, dict):
            raise RpcError(INVALID_PARAMS, f"params._meta must be an object carrying {META_PROTOCOL} and {META_CAPABILITIES}")
        version = meta.get(META_PROTOCOL)
        if not isinstance(version, str):
            raise RpcError(INVALID_PARAMS, f"params._meta is missing the required key {META_PROTOCOL}")
        if version not in STATELESS_VERSIONS:
            raise RpcError(UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version",
                           {"supported": list(STATELESS_VERSIONS + HANDSHAKE_VERSIONS[::-1]),
                            "requested": short_name(version)})
        capabilities = meta.get(META_CAPABILITIES)
        if not isinstance(capabilities, dict):
            raise RpcError(INVALID_PARAMS, f"params._meta is missing the required key {META_CAPABILITIES}")
        return Request(request_id, method, params, stateless=True, client_capabilities=capabilities)

    def _decorate(self, request: Request, result: dict) -> dict:
        if not request.stateless:
            return result
        result = dict(result)
        result.setdefault("resultType", "complete")
        if request.method in CACHEABLE_METHODS:
            result["ttlMs"] = READ_TTL_MS if request.method == "resources/read" else LIST_TTL_MS
            result["cacheScope"] = "private"
        result["_meta"] = {**result.get("_meta", {}), META_SERVER_INFO: SERVER_INFO}
        return result

    def _notification(self, method: str, params: dict) -> None:
        if method == "notifications/initialized" and "roots" in self.client_capabilities:
            self._ask_for_roots()
        elif method == "notifications/roots/list_changed":
            self._ask_for_roots()
        # notifications/cancelled is handled by the transport, which owns the queue.

    # ── Roots: asked after initialized (handshake era), or with input_required (2026) ──
    def _ask_for_roots(self) -> None:
        self._requests_sent += 1
        self.roots_request_id = f"claude-checkpoint-roots-{self._requests_sent}"
        self.roots_asked_at = None  # set by take_outbox, when the request is actually sent
        self.outbox.append({"jsonrpc": "2.0", "id": self.roots_request_id, "method": "roots/list", "params": {}})

    def _client_response(self, message: dict) -> None:
        if self.roots_request_id is None or message.get("id") != self.roots_request_id:
            return
        result = message.get("result")
        roots = result.get("roots") if isinstance(result, dict) else None
        self.client_roots = _root_uris(roots)
        if "error" in message:
            error = message["error"]
            self.world.log("the client refused roots/list: "
                           + preview(error.get("message") if isinstance(error, dict) else error, 200))
        self.roots_request_id = None

    def take_outbox(self, now: float) -> list:
        """The requests to send to the client, now; the roots wait is timed from this moment."""
        messages, self.outbox = self.outbox, []
        if any(m.get("method") == "roots/list" for m in messages):
            self.roots_asked_at = now
        return messages

    @property
    def roots_pending(self) -> bool:
        return self.roots_request_id is not None

    @property
    def roots_deadline(self) -> Optional[float]:
        """When to stop waiting for the roots answer; None when no roots request is out."""
        if not self.roots_pending or self.roots_asked_at is None:
            return None
        return self.roots_asked_at + ROOTS_WAIT_S

    def give_up_on_roots(self) -> None:
        self.world.log(f"no roots/list answer within {ROOTS_WAIT_S:g} s; using the next root source")
        self.roots_request_id = None

    @staticmethod
    def needs_root(message: Any) -> bool:
        return isinstance(message, dict) and message.get("method") in ROOT_METHODS and "id" in message

    def waits_for_roots(self, message: Any) -> bool:
        """Would this message's answer depend on roots we have asked for and not yet received?"""
        if not self.roots_pending or not self.needs_root(message):
            return False
        params = message.get("params")
        arguments = params.get("arguments") if isinstance(params, dict) else None
        explicit = isinstance(arguments, dict) and arguments.get("projectRoot")
        return not explicit and not self.world.env.get("CHECKPOINT_PROJECT_ROOT")

    def _roots_for(self, request: Request, explicit_root: Any) -> list:
        if not request.stateless:
            return self.client_roots
        if explicit_root or self.world.env.get("CHECKPOINT_PROJECT_ROOT") or "roots" not in request.client_capabilities:
            return []
        responses = request.params.get("inputResponses")
        answer = responses.get("roots") if isinstance(responses, dict) else None
        if isinstance(answer, dict) and isinstance(answer.get("roots"), list):
            return _root_uris(answer["roots"])
        raise InputRequired()

    @staticmethod
    def _input_required() -> dict:
        return {"resultType": "input_required",
                "inputRequests": {"roots": {"method": "roots/list", "params": {}}},
                "requestState": "roots"}

    # ── Methods ──
    def _initialize(self, request: Request) -> dict:
        version = _param(request, "protocolVersion", str, required=True)
        self.client_capabilities = _param(request, "capabilities", dict) or {}
        agreed = version if version in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
        return {"protocolVersion": agreed, "capabilities": CAPABILITIES,
                "serverInfo": SERVER_INFO, "instructions": INSTRUCTIONS}

    def _discover(self, request: Request) -> dict:
        return {"supportedVersions": list(STATELESS_VERSIONS), "capabilities": CAPABILITIES,
                "instructions": INSTRUCTIONS}

    def _context(self, request: Request, explicit_root: Any = None) -> ToolContext:
        return ToolContext(self.world, self._roots_for(request, explicit_root))

    def _call_tool(self, request: Request) -> dict:
        name = _param(request, "name", str, required=True)
        if name not in TOOLS:
            raise RpcError(INVALID_PARAMS, f"Unknown tool: {preview(name)}. Tools: {', '.join(TOOLS)}")
        arguments = request.params.get("arguments")  # a wrong type is the tool's isError answer
        explicit = arguments.get("projectRoot") if isinstance(arguments, dict) else None
        return call_tool(name, arguments, self._context(request, explicit)).to_json()

    def _get_prompt(self, request: Request) -> dict:
        name = _param(request, "name", str, required=True)
        _param(request, "arguments", dict)  # none are taken, but a wrong type is still a wrong request
        if name not in [p["name"] for p in PROMPTS]:
            raise RpcError(INVALID_PARAMS, f"Unknown prompt: {preview(name)}. Prompts: resume, checkpoint")
        context = self._context(request) if name == "resume" else ToolContext(self.world, [])
        return get_prompt(name, context)

    def _read_resource(self, request: Request) -> dict:
        uri = _param(request, "uri", str, required=True)
        if uri not in [r["uri"] for r in RESOURCES]:
            code = INVALID_PARAMS if request.stateless else RESOURCE_NOT_FOUND
            raise RpcError(code, f"Resource not found: {preview(uri)}", {"uri": short_name(uri, 200)})
        return read_resource(uri, self._context(request))


def own_texts() -> frozenset:
    """Every text of the answers that never change (instructions, tools, prompts, resources,
    versions). They hold no secret, so the reply boundary passes them as they are: redacting
    them would compile the rules before the first answer, a start-up cost for nothing."""
    cached = getattr(own_texts, "cache", None)
    if cached is None:
        texts: set = set()
        pending: list = [INSTRUCTIONS, [t.describe() for t in TOOLS.values()], list(PROMPTS), list(RESOURCES),
                         SERVER_INFO, list(HANDSHAKE_VERSIONS + STATELESS_VERSIONS), Protocol._input_required(),
                         ["complete", "private"]]
        while pending:
            value = pending.pop()
            if isinstance(value, str):
                texts.add(value)
            elif isinstance(value, dict):
                pending.extend(value.values())
            elif isinstance(value, list):
                pending.extend(value)
        cached = own_texts.cache = frozenset(texts)
    return cached


def _param(request: Request, key: str, kind: type, required: bool = False) -> Any:
    """params[key] when it has the right JSON type; None when absent (or null) and optional."""
    value = request.params.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, kind):
        name = {str: "a string", dict: "an object", list: "an array"}.get(kind, kind.__name__)
        raise RpcError(INVALID_PARAMS, f"params.{key} must be {name}, got {_json_type(value)}")
    return value


def _root_uris(roots: Any) -> list:
    if not isinstance(roots, list):
        return []
    return [r["uri"] for r in roots if isinstance(r, dict) and isinstance(r.get("uri"), str)]


# ════════════════════════════════════════════════════════════════════════════
# 14. Transport: JSON-RPC over stdio
# ════════════════════════════════════════════════════════════════════════════

_EOF = object()
_TOO_LARGE = object()


def redact_message(message: Any, known_secrets: tuple) -> Any:
    """A JSON-RPC message (or batch) with every text redacted (SPEC section 6), errors included;
    the envelope (jsonrpc, id, method) is the client's or the protocol's and stays as it is."""
    if isinstance(message, list):
        return [redact_message(item, known_secrets) for item in message]
    if not isinstance(message, dict):
        return message
    return {key: value if key in ("jsonrpc", "id", "method") else redact_texts(value, known_secrets, own_texts())
            for key, value in message.items()}


class RedactingWriter:
    """A text stream that redacts what is written to it: the log boundary. stderr (and a
    command's stdout) are wrapped once, so logs, tracebacks and messages are all covered."""

    def __init__(self, stream: Any, known_secrets: tuple):
        self._stream = stream
        self._known_secrets = known_secrets

    def write(self, text: str) -> int:
        if text.strip():
            text = redact(text, self._known_secrets)[0]
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def world_from_process() -> World:
    import time
    env = dict(os.environ)
    known = tuple(value for name, value in env.items()
                  if is_secret_env_name(name) and len(value) >= 8 and not value.startswith(("/", "~")))
    try:
        cwd = os.getcwd()
    except OSError:  # the folder we were started in is gone
        cwd = os.sep
    home = os.path.expanduser("~")
    return World(env, cwd, home if home != "~" else None, time.time, _log, known, tuple(program_command()),
                 FileMemo())


def program_command() -> list:
    """How Claude Code should start this program: the installed script (pipx, uvx) by its
    absolute path, or this Python importing this file (IMPORT_CODE), so that every server
    and hook start reuses the cached bytecode instead of compiling the whole file."""
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] not in ("", "-c") else ""
    if script and not script.endswith(".py") and os.path.isfile(script):
        return [script]
    python = sys.executable or "python3"
    source = os.path.abspath(__file__)
    folder, name = os.path.split(source)
    module = name[:-3] if name.endswith(".py") else ""
    if module.isidentifier():
        return [python, *IMPORT_FLAGS, IMPORT_CODE.format(module=module), folder]
    return [python, source] if name.endswith(".py") else ["claude-checkpoint-mcp"]


def _log(message: str) -> None:
    sys.stderr.write(f"claude-checkpoint: {message.rstrip()}\n")
    sys.stderr.flush()


def _install_signal_handlers() -> None:
    """Claude Code stops a server with SIGINT, then SIGTERM after 100 ms: leave at once and
    quietly. SystemExit unwinds through the storage code, which removes its temp file."""
    import signal

    def leave(signum: int, frame: Any) -> None:
        raise SystemExit(0)

    for name in ("SIGINT", "SIGTERM"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), leave)


class StdioTransport:
    """Newline-delimited JSON-RPC over stdio. A reader thread feeds a queue, so the loop can
    answer pings and bound its wait while a roots/list request is out, and so a cancellation
    can reach a request still waiting behind the one being handled."""

    def __init__(self, protocol: Protocol, reader: Any, writer: Any, clock: Callable[[], float]):
        import collections
        import queue
        self.protocol = protocol
        self.reader = reader
        self.writer = writer
        self.clock = clock
        self.inbox: Any = queue.Queue()  # raw lines, as the reader thread reads them
        self.pending: Any = collections.deque()  # decoded messages read ahead, in order
        self.held: list = []  # messages waiting for the client's roots, in order
        self.warmed = False

    def run(self) -> int:
        import threading
        threading.Thread(target=self._read_lines, name="stdin-reader", daemon=True).start()
        while True:
            item = self._next_item()
            if item is _EOF:
                self._release_held(force=True)
                return 0
            if item is not None:
                self._take(item)
            self._send_outbox()
            self._release_held(force=False)

    def _read_lines(self) -> None:
        try:
            while True:
                line = self.reader.readline(MAX_MESSAGE_BYTES + 1)
                if not line:
                    break
                if len(line) > MAX_MESSAGE_BYTES and not line.endswith(b"\n"):
                    while line and not line.endswith(b"\n"):  # drop the rest of the giant line
                        line = self.reader.readline(MAX_MESSAGE_BYTES)
                    self.inbox.put(_TOO_LARGE)
                    continue
                self.inbox.put(line)
        except (OSError, ValueError):
            pass
        self.inbox.put(_EOF)

    def _next_item(self) -> Any:
        """The next message in order; None when there is none yet (a blank line, or the
        roots answer did not come in time)."""
        if not self.pending:
            raw = self._wait_for_line()
            if raw is None:
                return None
            self._read_ahead(raw)
        self._look_ahead()
        return self.pending.popleft() if self.pending else None

    def _wait_for_line(self) -> Any:
        import queue
        deadline = self.protocol.roots_deadline
        if deadline is None:
            return self.inbox.get()
        remaining = deadline - self.clock()
        try:
            return self.inbox.get(timeout=max(remaining, 0))
        except queue.Empty:
            self.protocol.give_up_on_roots()
            return None

    def _look_ahead(self) -> None:
        """Decode every line the reader has already queued, so that a notifications/cancelled
        drops the request it names while that request is still waiting (SPEC section 2)."""
        import queue
        while True:
            try:
                raw = self.inbox.get_nowait()
            except queue.Empty:
                return
            self._read_ahead(raw)

    def _read_ahead(self, raw: Any) -> None:
        item = self._decode(raw)
        if item is None:
            return
        for target in _cancelled_ids(item):
            self.pending = type(self.pending)(_drop_request(self.pending, target))
            self.held = _drop_request(self.held, target)
        self.pending.append(item)

    def _decode(self, raw: Any) -> Any:
        """A message (or batch), _EOF, an error reply for a line that is not JSON, or None for a blank line."""
        import json
        if raw is _EOF:
            return _EOF
        if raw is _TOO_LARGE:
            return _Reply(error_reply(None, INVALID_REQUEST, f"Message larger than {MAX_MESSAGE_BYTES} bytes"))
        text = raw.strip()
        if not text:
            return None
        try:
            return json.loads(text)
        except (ValueError, RecursionError) as error:
            return _Reply(error_reply(None, PARSE_ERROR, f"Parse error: {str(error)[:200]}"))

    def _take(self, item: Any) -> None:
        if isinstance(item, _Reply):
            self._write(item.message)
        elif self._waits(item):
            self.held.append(item)
        else:
            self._dispatch(item)

    def _waits(self, message: Any) -> bool:
        """Requests that need a root wait for the roots answer, and stay in order behind
        those already waiting; everything else (pings, lists, the answer itself) goes on."""
        items = message if isinstance(message, list) else [message]
        return any(self.protocol.waits_for_roots(m) or (self.held and self.protocol.needs_root(m)) for m in items)

    def _release_held(self, force: bool) -> None:
        if force and self.protocol.roots_pending:
            self.protocol.give_up_on_roots()
        while self.held and not self.protocol.roots_pending:
            self._dispatch(self.held.pop(0))

    def _dispatch(self, message: Any) -> None:
        if isinstance(message, list):
            if not message:
                self._write(error_reply(None, INVALID_REQUEST, "Invalid request: empty batch"))
                return
            replies = [r for r in (self.protocol.handle(m) for m in message) if r is not None]
            if replies:
                self._write(replies)
            return
        reply = self.protocol.handle(message)
        if reply is not None:
            self._write(reply)
            if not self.warmed:
                self._warm_up()

    def _send_outbox(self) -> None:
        for message in self.protocol.take_outbox(self.clock()):
            self._write(message)

    def _write(self, payload: Any) -> None:
        """The reply boundary: every message leaves here, its texts redacted."""
        import json
        payload = redact_message(payload, self.protocol.world.known_secrets)
        try:
            text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except ValueError as error:  # NaN or Infinity is not JSON: a bug, and never sent
            self.protocol.world.log(f"a reply that is not JSON was replaced by an error: {error}")
            request_id = payload.get("id") if isinstance(payload, dict) else None
            payload = error_reply(request_id, INTERNAL_ERROR, "Internal error: the reply was not valid JSON")
            text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        try:
            line = text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates from undecodable file names
            line = json.dumps(payload, separators=(",", ":"), allow_nan=False).encode("ascii")
        self.writer.write(line + b"\n")
        self.writer.flush()

    def _warm_up(self) -> None:
        """After the first answer, load in the background what the first tool call needs."""
        import threading

        def load() -> None:
            import subprocess  # noqa: F401
            sha1()
            _compiled_rules()

        self.warmed = True
        threading.Thread(target=load, name="warm-up", daemon=True).start()


@record
class _Reply:
    """A reply the transport makes itself (a line that is not JSON, or too long)."""
    message: dict


def _cancelled_ids(message: Any) -> list:
    """The request ids that a message (or batch) cancels."""
    ids = []
    for item in message if isinstance(message, list) else [message]:
        if isinstance(item, dict) and item.get("method") == "notifications/cancelled" and "id" not in item:
            params = item.get("params")
            target = params.get("requestId") if isinstance(params, dict) else None
            if target is not None and _valid_id(target):
                ids.append(target)
    return ids


def _drop_request(messages: Iterable, target: Any) -> list:
    """The messages without the request whose id is `target`; a batch keeps its other members."""
    def is_target(item: Any) -> bool:
        return (isinstance(item, dict) and "method" in item and "id" in item
                and type(item["id"]) is type(target) and item["id"] == target)

    kept = []
    for message in messages:
        if isinstance(message, list) and message:
            message = [item for item in message if not is_target(item)] or None
        elif is_target(message):
            message = None
        if message is not None:
            kept.append(message)
    return kept


def serve(root: Optional[str] = None) -> int:
    """The MCP server. stdout carries JSON-RPC only: it is bound once here and
    sys.stdout is pointed at stderr, so a stray print can never corrupt the stream.
    `root` (serve --root DIR) acts as CHECKPOINT_PROJECT_ROOT does."""
    protocol_out = sys.stdout.buffer
    sys.stdout = sys.stderr
    _install_signal_handlers()
    world = world_from_process()
    sys.stdout = sys.stderr = RedactingWriter(sys.stderr, world.known_secrets)
    if root:
        world = replace(world, env={**world.env, "CHECKPOINT_PROJECT_ROOT": os.path.abspath(root)})
    transport = StdioTransport(Protocol(world), sys.stdin.buffer, protocol_out, _monotonic())
    try:
        status = transport.run()
    except (BrokenPipeError, KeyboardInterrupt, SystemExit):
        status = 0  # a signal: a save in flight has already unwound (its temp file removed)
    # Leave at once: a normal interpreter shutdown could wait on the reader thread, which
    # holds stdin's lock, or on the warm-up thread. Every reply has been flushed.
    sys.stderr.flush()
    os._exit(status)


def _monotonic() -> Callable[[], float]:
    import time
    return time.monotonic


# ════════════════════════════════════════════════════════════════════════════
# 15. Install and doctor: configuration for Claude Code and Claude Desktop
# ════════════════════════════════════════════════════════════════════════════

def cli_root(args: Any, world: World) -> str:
    """The root for a subcommand: --root DIR (relative to the current folder), else section 10's rules."""
    return world.root(getattr(args, "root", None) and os.path.join(world.cwd, args.root))


def hooks_config(program: list) -> dict:
    def group(event: str, matcher: Optional[str] = None) -> dict:
        entry: dict = {"hooks": [{"type": "command", "command": shell_line(program, "hook", event)}]}
        if matcher:
            entry = {"matcher": matcher, **entry}
        return entry

    return {"SessionStart": [group("session-start", "clear|compact|resume")],
            "PreCompact": [group("pre-compact")],
            "SessionEnd": [group("session-end")],
            "Stop": [group("stop")]}


def server_config(program: list) -> dict:
    return {"type": "stdio", "command": program[0], "args": program[1:], "env": {}}


def claude_config_paths(world: World, scope: str, root: Optional[str]) -> tuple:
    """(file for the MCP server, file for the hooks) as Claude Code reads them."""
    config_dir = world.env.get("CLAUDE_CONFIG_DIR") or os.path.join(world.home or "~", ".claude")
    if scope == "project":
        assert root is not None
        return os.path.join(root, ".mcp.json"), os.path.join(root, ".claude", "settings.json")
    user_file = (os.path.join(config_dir, ".claude.json") if world.env.get("CLAUDE_CONFIG_DIR")
                 else os.path.join(world.home or "~", ".claude.json"))
    return user_file, os.path.join(config_dir, "settings.json")


def merge_server(config: dict, entry: dict, force: bool, this_file: str) -> str:
    """Add our server under mcpServers.checkpoint; never clobber a different entry unless forced.
    An entry that runs this same file the old way (`python3 this_file`) is brought up to date."""
    servers = config.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise CheckpointError("mcpServers in the configuration is not an object; fix it by hand first")
    current = servers.get("checkpoint")
    if current == entry:
        return "already there"
    same_file = isinstance(current, dict) and isinstance(current.get("args"), list) and this_file in current["args"]
    if current is not None and not force and not same_file:
        return "kept your different 'checkpoint' entry"
    servers["checkpoint"] = entry
    return "updated" if same_file else "replaced" if current is not None else "added"


def merge_hooks(settings: dict, hooks: dict, this_file: str) -> tuple:
    """Append each of our hook groups unless a hook running the same subcommand is there; one
    that runs this same file the old way gets the new command. Returns (added, updated) events."""
    existing = settings.setdefault("hooks", {})
    if not isinstance(existing, dict):
        raise CheckpointError("hooks in settings.json is not an object; fix it by hand first")
    added, updated = [], []
    for event, groups in hooks.items():
        command = groups[0]["hooks"][0]["command"]
        ours = command.rsplit(" hook ", 1)[1]
        present = existing.setdefault(event, [])
        if not isinstance(present, list):
            raise CheckpointError(f"hooks.{event} in settings.json is not a list; fix it by hand first")
        entries = [h for g in present if isinstance(g, dict) and isinstance(g.get("hooks"), list)
                   for h in g["hooks"] if isinstance(h, dict) and _is_our_hook(h.get("command"), ours)]
        if not entries:
            present.extend(groups)
            added.append(event)
        for entry in entries:
            if entry["command"] != command and this_file in entry["command"]:
                entry["command"] = command
                updated.append(event)
    return added, updated


def _is_our_hook(command: Any, event: str) -> bool:
    return isinstance(command, str) and command.endswith(f" hook {event}") and (
        "claude_checkpoint" in command or "claude-checkpoint" in command)


def _load_json_file(path: str) -> dict:
    import json
    try:
        with open(path, encoding="utf-8") as stream:
            doc = json.load(stream)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        raise CheckpointError(f"{path} is not readable JSON ({error}); not touching it") from None
    if not isinstance(doc, dict):
        raise CheckpointError(f"{path} does not hold a JSON object; not touching it")
    return doc


def _save_json_file(path: str, doc: dict) -> None:
    """Settings files keep their mode (0600 for a new one: they may hold tokens)."""
    import json
    import stat
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mode = 0o600
    write_atomically(path, (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8"), mode)


def cli_install(args: Any, world: World) -> int:
    import json
    program = list(world.program)
    needs_root = args.scope == "project" or args.exclude
    root = cli_root(args, world) if needs_root else None
    if args.exclude and not args.write:  # what the not-ignored warning advises: it works as printed
        print(add_git_exclude(root))
        return EXIT_OK
    server_file, settings_file = claude_config_paths(world, args.scope, root)
    if not args.write:
        print("# Claude Code: register the server for every project\n"
              f"claude mcp add --scope user checkpoint -- {shell_line(program)}\n")
        print(f"# Claude Code hooks: merge into {settings_file}")
        print(json.dumps({"hooks": hooks_config(program)}, indent=2) + "\n")
        desktop = {"mcpServers": {"checkpoint": {"command": program[0], "args": program[1:],
                                                  "env": {"CHECKPOINT_PROJECT_ROOT": "/absolute/path/to/your/project"}}}}
        print("# Claude Desktop: claude_desktop_config.json")
        print(json.dumps(desktop, indent=2) + "\n")
        print(f"# Or let this command write them in (add --scope project for this project only):\n"
              f"{shell_line(program, 'install', '--write')}")
        return EXIT_OK
    this_file = os.path.abspath(__file__)
    config = _load_json_file(server_file)
    server_result = merge_server(config, server_config(program), args.force, this_file)
    settings = _load_json_file(settings_file)
    added, updated = merge_hooks(settings, hooks_config(program), this_file)
    if server_result in ("added", "replaced", "updated"):
        _save_json_file(server_file, config)
    if added or updated:
        _save_json_file(settings_file, settings)
    done = [f"added {', '.join(added)}"] if added else []
    done += [f"updated {', '.join(updated)}"] if updated else []
    if server_result.startswith("kept"):
        scope = ["--scope", "project", "--root", root] if args.scope == "project" else []
        server_result += f"; to replace it, run `{shell_line(program, 'install', '--write', '--force', *scope)}`"
    print(f"MCP server 'checkpoint' in {server_file}: {server_result}")
    print(f"Hooks in {settings_file}: {'; '.join(done) or 'already there'}")
    if args.exclude:
        print(add_git_exclude(root))
    return EXIT_OK


def add_git_exclude(root: str) -> str:
    exclude = Git(root).git_path("info/exclude")
    if exclude is None:
        return f"{root} is not in a git repository; nothing excluded"
    pattern = CHECKPOINT_NAME + "*"
    try:
        with open(exclude, "rb") as stream:
            current = stream.read()
    except FileNotFoundError:
        current = b""
    if pattern.encode() in current.splitlines():
        return f"{pattern} is already in {exclude}"
    os.makedirs(os.path.dirname(exclude), exist_ok=True)
    separator = b"\n" if current and not current.endswith(b"\n") else b""
    write_atomically(exclude, current + separator + pattern.encode() + b"\n", 0o644)
    return f"Added {pattern} to {exclude}"


def cli_doctor(args: Any, world: World) -> int:
    import platform
    checks: list = []  # (ok, text)
    checks.append((sys.version_info >= (3, 9), f"Python {platform.python_version()} at {sys.executable}"))
    version = Git(world.cwd).output("--version")
    checks.append((version is not None, version.decode().strip() if version else "git not found on PATH "
                   "(git facts and drift detection are off)"))
    choice = choose_root(getattr(args, "root", None) and os.path.join(world.cwd, args.root), world.env, [], world.cwd)
    try:
        root = resolve_root(choice, world.home)
        checks.append((True, f"Project root {root} (from {choice.source})"))
    except RootError as error:
        checks.append((False, str(error)))
        root = None
    if root is not None:
        checks += _doctor_checkpoint(root, world.program)
    for ok, text in checks:
        print(f"{'✓' if ok else '✗'} {text}")
    return EXIT_OK if all(ok for ok, _ in checks) else EXIT_FAILED


def _doctor_checkpoint(root: str, program: tuple) -> list:
    checks = [(os.access(root, os.W_OK), f"{root} is {'writable' if os.access(root, os.W_OK) else 'not writable'}")]
    git = Git(root)
    warning = checkpoint_git_warning(git, root, program)
    if warning or git.is_ignored(CHECKPOINT_NAME):
        checks.append((not warning, warning or f"{CHECKPOINT_NAME} is git-ignored"))
    try:
        stored = read_checkpoint(root)
    except CheckpointError as error:
        return checks + [(False, str(error))]
    if stored.checkpoint is None:
        return checks + [(True, f"No checkpoint yet at {os.path.join(root, CHECKPOINT_NAME)}")]
    source = BACKUP_NAME if stored.from_backup else CHECKPOINT_NAME
    checks.append((not stored.from_backup, f"Checkpoint valid, read from {source}, saved {stored.checkpoint.updated_at}"))
    return checks


# ════════════════════════════════════════════════════════════════════════════
# 16. Command line: show, save, hook and the entry point
# ════════════════════════════════════════════════════════════════════════════


def build_parser() -> Any:
    import argparse
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--root", metavar="DIR", default=argparse.SUPPRESS,
                        help="project root (default: CHECKPOINT_PROJECT_ROOT, CLAUDE_PROJECT_DIR or the current folder)")
    parser = argparse.ArgumentParser(
        prog="claude_checkpoint.py", parents=[common],
        description="Save and resume Claude Code session state. With no command: the MCP stdio server.",
        epilog="Exit status: 0 ok, 1 failed, 2 usage error, 3 nothing to act on (no checkpoint or snapshot yet).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.add_parser("serve", parents=[common], help="run the MCP stdio server (the default)")
    show = commands.add_parser("show", parents=[common], help="print the resume brief")
    show.add_argument("--full", action="store_true", help="print the whole checkpoint and drift as JSON")
    save = commands.add_parser("save", parents=[common],
                               help="save a checkpoint: the tool's arguments as JSON on stdin, or flags")
    save.add_argument("--goal", help="the session's goal (without it, JSON is read from stdin)")
    save.add_argument("--summary", help="where things stand")
    save.add_argument("--next", action="append", metavar="STEP", dest="next_steps", help="a next step (repeat)")
    save.add_argument("--decision", action="append", metavar="TEXT", dest="decisions", help="a decision (repeat)")
    save.add_argument("--merge", action="store_true", help="merge into the existing checkpoint")
    hook = commands.add_parser("hook", parents=[common], help="run as a Claude Code hook (JSON on stdin)")
    hook.add_argument("event", choices=sorted(HOOK_EVENTS), help="; ".join(f"{k}: {v}" for k, v in HOOK_EVENTS.items()))
    install = commands.add_parser("install", parents=[common],
                                  help="print (or --write) the Claude Code and Claude Desktop configuration")
    install.add_argument("--write", action="store_true", help="merge the server and hooks into Claude Code's files")
    install.add_argument("--scope", choices=("user", "project"), default="user",
                         help="user: ~/.claude.json and ~/.claude/settings.json; project: .mcp.json and .claude/settings.json")
    install.add_argument("--exclude", action="store_true",
                         help="add .claude-checkpoint* to .git/info/exclude (alone: that is all it does)")
    install.add_argument("--force", action="store_true", help="replace an existing, different 'checkpoint' server entry")
    commands.add_parser("doctor", parents=[common], help="check Python, git, the root and the checkpoint")
    _add_rewind_commands(commands, common)
    return parser


def _add_rewind_commands(commands: Any, common: Any) -> None:
    """snapshot, list, diff, restore, forget (SPEC section 10); each takes --root and --json."""
    as_json = {"action": "store_true", "dest": "json", "help": "print one JSON document"}
    snapshot = commands.add_parser("snapshot", parents=[common], help="snapshot the work tree now (code rewind)")
    snapshot.add_argument("-m", "--message", metavar="TEXT", help="what the snapshot is for (its first line)")
    snapshot.add_argument("--json", **as_json)
    listing = commands.add_parser("list", parents=[common], help="list this project's snapshots, newest first")
    listing.add_argument("-n", type=int, metavar="N", help="show the newest N")
    listing.add_argument("--json", **as_json)
    diff = commands.add_parser("diff", parents=[common], help="what restoring a snapshot would change now")
    diff.add_argument("target", nargs="*", metavar="[ID] [PATH...]", help="snapshot id (default: latest), then paths")
    diff.add_argument("--stat", action="store_true", help="a summary instead of the patch")
    diff.add_argument("--json", **as_json)
    restore = commands.add_parser("restore", parents=[common],
                                  help="make the files match a snapshot (a dry run unless --yes)")
    restore.add_argument("target", nargs="*", metavar="[ID] [PATH...]", help="snapshot id (default: latest), then paths")
    restore.add_argument("--yes", action="store_true", help="do it (a before-restore snapshot is taken first)")
    restore.add_argument("--json", **as_json)
    forget = commands.add_parser("forget", parents=[common], help="delete snapshots of this project")
    forget.add_argument("ids", nargs="*", metavar="ID")
    forget.add_argument("--all", action="store_true", help="every snapshot of this project root")
    forget.add_argument("--json", **as_json)


def main(argv: Optional[list] = None, streams: Optional[tuple] = None) -> int:
    """The entry point: the MCP server with no command, else a subcommand's exit status.
    `streams` (stdin, stdout, stderr) run a subcommand in-process on other streams, as the
    tests do; the process's own are back when it returns."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if streams is None:
        return _main(argv, in_process=False)
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = streams
    try:
        return _main(argv, in_process=True)
    except SystemExit as leaving:  # argparse's usage errors, --help and --version
        return leaving.code if isinstance(leaving.code, int) else EXIT_USAGE
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved


def _main(argv: list, in_process: bool) -> int:
    if not argv or argv == ["serve"]:
        return serve()
    args = build_parser().parse_args(argv)
    if args.command in (None, "serve"):
        return serve(getattr(args, "root", None))
    if not in_process:
        _install_signal_handlers()
    world = world_from_process()
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):  # a file name that is not UTF-8 prints as its own bytes
            stream.reconfigure(errors="surrogateescape")
    sys.stdout, sys.stderr = (RedactingWriter(stream, world.known_secrets) for stream in (sys.stdout, sys.stderr))
    if args.command == "hook":
        return run_hook(args.event, getattr(args, "root", None), world)
    runner = {"show": cli_show, "save": cli_save, "install": cli_install, "doctor": cli_doctor,
              "snapshot": cli_snapshot, "list": cli_list, "diff": cli_diff, "restore": cli_restore,
              "forget": cli_forget}[args.command]
    try:
        return runner(args, world)
    except NothingToDo as error:
        print(f"claude-checkpoint: {error}", file=sys.stderr)
        return EXIT_NOTHING
    except CheckpointError as error:
        print(f"claude-checkpoint: {error}", file=sys.stderr)
        return EXIT_FAILED


def cli_show(args: Any, world: World) -> int:
    result = load_checkpoint(cli_root(args, world), world)
    if args.full:
        import json
        print(json.dumps(result.to_json(), ensure_ascii=False, indent=2))
    else:
        sys.stdout.write(render_brief(result, world.clock()))
    return EXIT_OK if result.found else EXIT_NOTHING


def cli_save(args: Any, world: World) -> int:
    if args.goal is not None:
        arguments: dict = {"goal": args.goal, "mode": "merge" if args.merge else "replace"}
        if args.summary is not None:
            arguments["summary"] = args.summary
        if args.next_steps:
            arguments["nextSteps"] = args.next_steps
        if args.decisions:
            arguments["decisions"] = args.decisions
    else:
        import json
        if sys.stdin.isatty():
            raise CheckpointError("give --goal, or pipe the tool's arguments as JSON on stdin")
        try:
            arguments = json.loads(sys.stdin.read(MAX_MESSAGE_BYTES))
        except ValueError as error:
            raise CheckpointError(f"stdin is not valid JSON: {error}") from None
        if args.merge and isinstance(arguments, dict):
            arguments["mode"] = "merge"
    request = parse_save_arguments(arguments)
    root = world.root(getattr(args, "root", None) and os.path.join(world.cwd, args.root) or request.project_root)
    outcome = save_checkpoint(root, request, world)
    print(render_save_answer(outcome))
    return EXIT_OK


# ── 16.1 Code rewind: snapshot, list, diff, restore, forget ──

def cli_snapshot(args: Any, world: World) -> int:
    root = cli_root(args, world)
    title = Redactor(world.known_secrets).text(args.message) if args.message else "Snapshot taken by hand"
    git = Git(root, timeout=SNAPSHOT_TIMEOUT_S)
    with ProjectLock(root):
        outcome = take_snapshot(open_snapshots(git, root), world, SnapshotKind.MANUAL, title)
    assert outcome is not None
    _print_result(args, outcome.to_json(), lambda: render_snapshot_made(outcome, restore_command(root, world)))
    return EXIT_OK


def cli_list(args: Any, world: World) -> int:
    snapshots = list_snapshots(cli_root(args, world))
    if args.n is not None:
        snapshots = snapshots[:max(args.n, 0)]
    _print_result(args, [s.to_json() for s in snapshots], lambda: render_snapshot_list(snapshots, world.clock()))
    return EXIT_OK


def cli_diff(args: Any, world: World) -> int:
    root = cli_root(args, world)
    wanted, paths = split_target(root, world.cwd, args.target)
    color = not args.json and sys.stdout.isatty()
    outcome, patch = diff_snapshot(root, world, wanted, paths, patch=not args.json, stat=args.stat, color=color)
    if args.json:
        changes = [{"path": c.path, "status": c.status} for c in outcome.plan.write]
        changes += [{"path": p, "status": "D"} for p in outcome.plan.delete]
        _print_result(args, {"id": outcome.snapshot.id, "changes": sorted(changes, key=lambda c: c["path"]),
                             "skipped": [s.to_json() for s in outcome.plan.skipped]}, str)
    elif patch:
        sys.stdout.flush()
        sys.stdout.buffer.write(patch)
    else:
        print(f"The files already match snapshot {outcome.snapshot.id}.")
    return EXIT_OK


def cli_restore(args: Any, world: World) -> int:
    root = cli_root(args, world)
    wanted, paths = split_target(root, world.cwd, args.target)
    outcome = restore_snapshot(root, world, wanted, paths, apply=args.yes)
    _print_result(args, outcome.to_json(), lambda: render_restore(outcome, restore_command(root, world)))
    return EXIT_OK


def cli_forget(args: Any, world: World) -> int:
    if not args.ids and not args.all:
        raise CheckpointError("name the snapshots to forget (ids from `list`), or give --all")
    forgotten = forget_snapshots(cli_root(args, world), args.ids, args.all)
    _print_result(args, {"forgotten": [s.id for s in forgotten]},
                  lambda: f"Forgot {len(forgotten)} snapshot(s): {', '.join(s.id for s in forgotten)}.\n")
    return EXIT_OK


def split_target(root: str, cwd: str, words: list) -> tuple:
    """[ID] [PATH...] -> (id or None, paths relative to the root). The first word is an id when
    it looks like one (hex, or `latest`) and is not an existing path."""
    words = list(words)
    wanted = None
    if words and (words[0] == "latest" or (_looks_like_id(words[0]) and not os.path.lexists(os.path.join(cwd, words[0])))):
        wanted = words.pop(0)
    return wanted, [root_relative(root, cwd, w) for w in words]


def _looks_like_id(word: str) -> bool:
    return 4 <= len(word) <= 40 and all(c in "0123456789abcdefABCDEF" for c in word)


def root_relative(root: str, cwd: str, path: str) -> str:
    """A path given on the command line (relative to the current folder, or absolute) as a path
    relative to the root; SnapshotError for anything outside it, or inside .git."""
    full = os.path.join(cwd, path)
    parent = os.path.realpath(os.path.dirname(os.path.normpath(full)) or os.sep)
    full = os.path.join(parent, os.path.basename(os.path.normpath(full)))
    rel = os.path.relpath(full, root)
    parts = [] if rel == "." else rel.split(os.sep)
    if os.path.isabs(rel) or (parts and parts[0] == ".."):
        raise SnapshotError(f"{path} is outside the project root {root}; nothing was changed.")
    if ".git" in parts:
        raise SnapshotError(f"{path} is inside .git, which snapshots never touch; nothing was changed.")
    return "/".join(parts)


def restore_command(root: str, world: World) -> str:
    """The restore command as a person can repeat it, from any folder: the way this command
    was started (`python3 /path/claude_checkpoint.py`, the console script), with --root."""
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] not in ("", "-c") else ""
    ran_this_file = script == os.path.abspath(__file__)
    started = [sys.executable or "python3", script] if ran_this_file else list(world.program)
    return shell_line(started, "--root", root, "restore")


def _print_result(args: Any, doc: Any, text: Callable[[], str]) -> None:
    if args.json:
        import json
        out = json.dumps(doc, ensure_ascii=False, indent=2)
        try:
            out.encode("utf-8")
        except UnicodeEncodeError:  # names that are not UTF-8 stay valid JSON as \udcXX escapes
            out = json.dumps(doc, indent=2)
        print(out)
    else:
        sys.stdout.write(text())


def run_hook(event: str, root_arg: Optional[str], world: World) -> int:
    """Hooks never block or break a session: always exit 0, nothing on stdout but the
    brief, and what went wrong on one line of stderr."""
    import threading
    watchdog = threading.Timer(HOOK_DEADLINE_S, _hook_timeout)
    watchdog.daemon = True
    watchdog.start()
    problems: list = []
    try:
        payload = _read_hook_input(problems)
        cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) and os.path.isabs(payload["cwd"]) else world.cwd
        root = resolve_root(choose_root(root_arg and os.path.join(world.cwd, root_arg), world.env, [], cwd), world.home)
        if event == "session-start":
            result = load_checkpoint(root, world)
            if result.found:
                sys.stdout.write(render_brief(result, world.clock()))
            problems += result.warnings
        else:
            problems += _record_hook(event, payload, root, world)
    except CheckpointError as error:
        problems.append(str(error))
    except Exception as error:  # a hook must never break the session
        problems.append(f"unexpected {type(error).__name__}: {error}")
    finally:
        watchdog.cancel()
    if problems:
        print(f"claude-checkpoint hook {event}: " + "; ".join(problems), file=sys.stderr)
    return EXIT_OK


def _read_hook_input(problems: list) -> dict:
    import json
    raw = sys.stdin.buffer.read(HOOK_STDIN_LIMIT) if not sys.stdin.isatty() else b""
    try:
        payload = json.loads(raw.decode("utf-8", "replace")) if raw.strip() else {}
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        problems.append("stdin is not the hook's JSON object")
        return {}
    return payload


def _record_hook(event: str, payload: dict, root: str, world: World) -> list:
    """pre-compact, session-end, stop: merge the transcript; return what went wrong."""
    transcript = payload.get("transcript_path")
    if not isinstance(transcript, str) or not transcript:
        return ["no transcript_path in the hook's input; nothing recorded"]
    session = payload.get("session_id") if isinstance(payload.get("session_id"), str) else ""
    outcome = record_transcript(root, transcript, session, world, require_activity=event in ("session-end", "stop"))
    if outcome is None:
        # Nothing in the transcript, yet a subagent, a formatter or another program may have
        # changed files during the turn: snapshot the work tree when it differs from the last one.
        snapshot_if_changed(root, world)
        return []
    # The redaction count and the git advice are for the model's saves, not every hook run.
    return [w for w in outcome.warnings if not w.startswith("Redacted")
            and "not git-ignored" not in w and "is tracked by git" not in w]


def _hook_timeout() -> None:
    print(f"claude-checkpoint hook: gave up after {HOOK_DEADLINE_S:g} s", file=sys.stderr)
    sys.stderr.flush()
    os._exit(EXIT_OK)


if __name__ == "__main__":
    sys.exit(main())

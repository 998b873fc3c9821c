#!/usr/bin/env python3
"""claude-checkpoint: save and resume a Claude Code session's working state.

A local MCP stdio server, a set of Claude Code hooks and a small command line, in
one standard-library-only file. It keeps the goal, tasks, decisions, files touched
(with git blob hashes) and recent commands in `<project>/.claude-checkpoint`, with
secrets redacted, and turns them back into a compact resume brief that says exactly
which files changed since.

    python3 claude_checkpoint.py            # the MCP server on stdin/stdout
    python3 claude_checkpoint.py --help     # subcommands: show, save, hook, install, doctor
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
   9. Storage         the one place our files are written; locks; transcript reading
  10. Root            which project folder a call is about
  11. Services/tools  save, load, record, rewind; the MCP tools, prompts and resources
  12. Protocol        JSON-RPC messages in, replies out, both MCP eras (no I/O)
  13. Transport       stdio, the reader thread, signals
  14. Install/doctor  configuration for Claude Code and Claude Desktop
  15. Command line    argparse, hooks, subcommands and main()
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

# The commands that Claude Code runs (the plugin's, and those `install` writes) start the file
# by importing it: Python caches bytecode only for imported modules, and compiling 170 KB at
# every start costs more than the rest of the start-up. The file's folder comes after the
# code as an argument (no path is ever quoted inside it) and replaces sys.path[0], which for
# -c is the current folder: a json.py in the project must never be imported. An empty folder
# (an unset variable) is dropped too. main() then reads sys.argv[1:] as usual.
IMPORT_CODE = ("import sys; sys.path = [p for p in [sys.argv.pop(1)] + sys.path if p]; "
               "import {module} as m; sys.exit(m.main())")

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


SAVE_FIELDS = ("goal", "tasks", "summary", "nextSteps", "decisions", "modifiedFiles",
               "recentCommands", "mode", "projectRoot")


def parse_save_arguments(args: Any) -> SaveRequest:
    """Validate save_session_checkpoint's arguments against LIMITS; raise InvalidArgument."""
    if not isinstance(args, dict):
        raise InvalidArgument("arguments", "must be an object")
    unknown = sorted(set(args) - set(SAVE_FIELDS))
    if unknown:
        raise InvalidArgument(short_name(unknown[0]), f"unknown field; allowed fields are {', '.join(SAVE_FIELDS)}")
    if "goal" not in args:
        raise InvalidArgument("goal", "is required")
    request = SaveRequest(goal=_arg_text(args["goal"], "goal", LIMITS["goal"], required=True))
    if "tasks" in args:
        request.tasks = [_arg_task(t, f"tasks[{i}]")
                         for i, t in enumerate(_arg_list(args["tasks"], "tasks", LIMITS["tasks"]))]
    if args.get("summary") is not None:
        request.summary = _arg_text(args["summary"], "summary", LIMITS["summary"])
    for key, attr in (("nextSteps", "next_steps"), ("decisions", "decisions")):
        if key in args:
            items = _arg_list(args[key], key, LIMITS[key])
            setattr(request, attr, [_arg_text(v, f"{key}[{i}]", LIMITS[key + ".item"], required=True)
                                    for i, v in enumerate(items)])
    if "modifiedFiles" in args:
        items = _arg_list(args["modifiedFiles"], "modifiedFiles", LIMITS["modifiedFiles"])
        request.files = [_arg_file(f, f"modifiedFiles[{i}]") for i, f in enumerate(items)]
    if "recentCommands" in args:
        items = _arg_list(args["recentCommands"], "recentCommands", LIMITS["recentCommands"])
        request.commands = [_arg_command(c, f"recentCommands[{i}]") for i, c in enumerate(items)]
    if args.get("mode") is not None:
        request.mode = _arg_enum(SaveMode, args["mode"], "mode")
    if args.get("projectRoot") is not None:
        request.project_root = _arg_text(args["projectRoot"], "projectRoot", LIMITS["projectRoot"], required=True)
    return request


def _arg_text(value: Any, name: str, limit: int, required: bool = False) -> str:
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
    return value


def _arg_list(value: Any, name: str, limit: int) -> list:
    if not isinstance(value, list):
        raise InvalidArgument(name, f"must be an array, got {_json_type(value)}")
    if len(value) > limit:
        raise InvalidArgument(name, f"has {len(value)} items; the limit is {limit}")
    return value


def _arg_object(value: Any, name: str, allowed: tuple) -> dict:
    if not isinstance(value, dict):
        raise InvalidArgument(name, f"must be an object, got {_json_type(value)}")
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        raise InvalidArgument(f"{name}.{short_name(unknown[0])}", f"unknown field; allowed fields are {', '.join(allowed)}")
    return value


def _arg_enum(kind: type, value: Any, name: str):
    allowed = [m.value for m in kind]
    if not isinstance(value, str) or value not in allowed:
        raise InvalidArgument(name, f"must be one of {', '.join(allowed)}, got {preview(value)}")
    return kind(value)


def _arg_task(value: Any, name: str) -> Task:
    task = _arg_object(value, name, ("description", "status"))
    if "description" not in task:
        raise InvalidArgument(f"{name}.description", "is required")
    status = TaskStatus.PENDING
    if task.get("status") is not None:
        status = _arg_enum(TaskStatus, task["status"], f"{name}.status")
    return Task(_arg_text(task["description"], f"{name}.description", LIMITS["task.description"], required=True),
                status)


def _arg_file(value: Any, name: str) -> FileNote:
    entry = _arg_object(value, name, ("path", "note"))
    if "path" not in entry:
        raise InvalidArgument(f"{name}.path", "is required")
    note = entry.get("note")
    return FileNote(_arg_text(entry["path"], f"{name}.path", LIMITS["modifiedFiles.path"], required=True),
                    None if note is None else _arg_text(note, f"{name}.note", LIMITS["modifiedFiles.note"]))


def _arg_command(value: Any, name: str) -> Command:
    cmd = _arg_object(value, name, ("command", "exitCode", "note"))
    if "command" not in cmd:
        raise InvalidArgument(f"{name}.command", "is required")
    exit_code = cmd.get("exitCode")
    if exit_code is not None and (not isinstance(exit_code, int) or isinstance(exit_code, bool)
                                  or not -(2 ** 31) <= exit_code < 2 ** 32):
        raise InvalidArgument(f"{name}.exitCode", f"must be an integer, got {_json_type(exit_code)}")
    note = cmd.get("note")
    return Command(_arg_text(cmd["command"], f"{name}.command", LIMITS["recentCommands.command"], required=True),
                   exit_code,
                   None if note is None else _arg_text(note, f"{name}.note", LIMITS["recentCommands.note"]))


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
    bearer""".split())
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


def _is_reference(value: str) -> bool:
    """`$TOKEN`, `${API_KEY}`, `%KEY%`, `process.env.X`, `${{ secrets.X }}`, and masked
    values (`gho_****`): names or placeholders, not values."""
    quoted = value[:1] in "\"'`"
    v = value.strip("\"'`\\ ")
    import re
    return (not v or v[0] in "$%" or re.fullmatch(r"@[\w./\-:]+", v) or (not quoted and v[0] in "[(")
            or v.startswith("{{") or (v[0] == "<" and v[-1] == ">")
            or v.startswith(("process.env", "os.environ", "os.getenv", "env.", "ENV[", "secrets."))
            or v.startswith(("env:", "file:")) or (not quoted and v[0] == "{")
            or v.strip("[]<>()").lower() in ("redacted", "filtered", "masked", "hidden", "removed")
            or "${" in v or "{{" in v or "#{" in v  # interpolation: `Bearer ${token}`
            or REDACTED in v or "***" in v or "•••" in v or not any(c.isalnum() for c in v))


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
    if v.startswith(("./", "../", "~/")) or re.match(r"/(?:dev|etc|run|var|tmp|home|usr|opt|proc)(?:/|\s|$)", v):
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
    if groups.get("op") == ":" and not groups.get("q") and match.start("s") == match.end("op") and value[:1] not in "\"'`":
        return False  # `rails credentials:edit`, `scope:read`: a YAML value needs a space after the colon
    strength = secret_strength(name)
    bare = value.strip("\"'`\\")
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
    named = match.group("name").lower() in ("secret", "secrets", "secret-id", "secret-name") and re.fullmatch(
        r"[a-z]+(?:[-_][a-z]+)+", value.strip("\"'"))
    spec = value[:1] not in "\"'" and re.search(r"\w=\w", value)  # --secret id=npmrc,src=…
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
    if strength == 0 or _is_reference(value) or any(c.isspace() for c in value):
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


# Values are bounded (256 bare, 1024 quoted) so that `a=a=a=…` cannot make a rule quadratic.
_QUOTED_OR_BARE = (r"""(?=(?P<s>\\"[^"\\\n]{0,1024}\\"|"(?:[^"\\\n]|\\.){0,1024}"|'[^'\n]{0,1024}'|`[^`\n]{0,1024}`"""
                   r"""|[^\s,;'"`})\]&<>\\]{1,256}))""")
_TOOL_VALUE = r"""(?P<s>"[^"\n]{0,1024}"|'[^'\n]{0,1024}'|[^\s'"]{1,1024})"""
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
REDACTION_TABLE = r'''
# Private keys: keep the BEGIN/END lines, replace the body (also when escaped as \n in JSON).
private-key-block            -                      -----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----(?P<s>(?:[A-Za-z0-9+/=\s:,.\\_]|-(?!----))+)
# Credentials in URLs of any scheme: scheme://user:PASSWORD@host.
url-credentials              not-reference          (?i)(?<![a-z0-9+.\-])[a-z][a-z0-9+.\-]{1,30}://[^\s/?#:'"<>]*:(?P<s>[^\s/?#@'"<>]+)@
url-token-user               random                 (?i)(?<![a-z0-9+.\-])[a-z][a-z0-9+.\-]{1,30}://(?P<s>[A-Za-z0-9_\-]{20,256})(?::[^\s/?#@'"<>]*)?@
slack-webhook                -                      hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9/_+\-]{16,})
discord-webhook              -                      discord(?:app)?\.com/api/webhooks/\d+/(?P<s>[A-Za-z0-9_\-]{20,})
# Provider tokens by their published shapes.
aws-secret-after-key-id      random                 (?:AKIA|ASIA)[A-Z0-9]{16}[^\n]{0,60}?(?<![A-Za-z0-9/+=])(?P<s>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])
twilio-auth-token-after-sid  -                      AC[0-9a-f]{32}["',\s]{1,8}(?P<s>[0-9a-f]{32})(?![0-9a-f])
aws-access-key-id            -                      {L}(?P<s>(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}){R}
github-token                 -                      {L}(?P<s>gh[pousr]_[A-Za-z0-9]{30,255}){R}
github-fine-grained-token    -                      {L}(?P<s>github_pat_[A-Za-z0-9_]{22,255}){R}
gitlab-token                 -                      {L}(?P<s>gl(?:pat|ptt|dt|rt|cbt|soat|ffct|agent|imt|oas|ft|cd)-[A-Za-z0-9_\-]{20,255}){R}
gitlab-runner-token          -                      {L}(?P<s>GR1348941[A-Za-z0-9_\-]{20,}){R}
slack-token                  -                      {L}(?P<s>xox[abposre]-[A-Za-z0-9\-]{10,255}){R}
slack-app-token              -                      {L}(?P<s>xapp-\d-[A-Za-z0-9\-]{20,255}){R}
stripe-key                   -                      {L}(?P<s>(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{16,255}){R}
stripe-webhook-secret        -                      {L}(?P<s>whsec_[A-Za-z0-9]{24,255}){R}
anthropic-key                -                      {L}(?P<s>sk-ant-[a-z]{2,10}\d{0,3}-[A-Za-z0-9_\-]{20,255}){R}
openai-key                   -                      {L}(?P<s>sk-(?:proj-|svcacct-|admin-|None-)?(?=[A-Za-z_\-]{0,255}\d)[A-Za-z0-9_\-]{20,255}){R}
google-api-key               -                      {L}(?P<s>AIza[0-9A-Za-z_\-]{35}){R}
google-oauth                 -                      {L}(?P<s>(?:GOCSPX-[A-Za-z0-9_\-]{20,}|ya29\.[0-9A-Za-z_\-]{20,}|1//0[0-9A-Za-z_\-]{30,})){R}
google-private-key-id        -                      "private_key_id"\s*:\s*"(?P<s>[0-9a-f]{40})"
hugging-face-token           -                      {L}(?P<s>(?:hf_|api_org_)[A-Za-z0-9]{30,60}){R}
npm-token                    -                      {L}(?P<s>npm_[A-Za-z0-9]{36}){R}
pypi-token                   -                      {L}(?P<s>pypi-Ag[A-Za-z0-9_\-]{50,}){R}
sendgrid-key                 -                      {L}(?P<s>SG\.[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{30,64}){R}
twilio-key-and-secret        -                      SK[0-9a-fA-F]{32}["',\s]{1,8}(?P<s>[A-Za-z0-9]{32})(?![A-Za-z0-9])
twilio-api-key               -                      {L}(?P<s>SK[0-9a-fA-F]{32}){R}
sonar-token                  -                      {L}(?P<s>sq[uap]_[a-f0-9]{40}){R}
mailgun-key                  -                      {L}(?P<s>key-[0-9a-zA-Z]{32}|[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8}){R}
# 64 random bytes in base64, unless it is an sha512 digest
azure-account-key-shape      random                 (?<![A-Za-z0-9+/])(?<!sha512-)(?P<s>[A-Za-z0-9+/]{86}==)(?![A-Za-z0-9+/=])
shopify-token                -                      {L}(?P<s>shp(?:at|ss|ca|pa|ua)_[a-fA-F0-9]{32}){R}
digitalocean-token           -                      {L}(?P<s>do[opr]_v1_[a-f0-9]{64}){R}
databricks-token             -                      {L}(?P<s>dapi[a-f0-9]{32}(?:-\d)?){R}
azure-storage-key            -                      (?i)(?:AccountKey|SharedAccessKey|SharedSecret)\s*=\s*(?P<s>[A-Za-z0-9+/]{20,}={0,2})
azure-sas-signature          -                      (?i)(?<![a-z])sig=(?P<s>[A-Za-z0-9%+/=]{20,})
telegram-bot-token           -                      (?:(?<=bot)|(?<![\w:]))(?P<s>\d{6,12}:[A-Za-z0-9_\-]{35}){R}
discord-bot-token            -                      {L}(?P<s>[MNO][A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,40}){R}
jwt                          -                      {L}(?P<s>eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*){R}
other-provider-token         -                      {L}(?P<s>(?:AGE-SECRET-KEY-1[0-9A-Z]{58}|lin_api_[A-Za-z0-9]{40}|hvs\.[A-Za-z0-9_\-]{24,}|dp\.pt\.[A-Za-z0-9]{40,}|PMAK-[a-f0-9]{24}-[a-f0-9]{34}|glsa_[A-Za-z0-9]{32}_[a-f0-9]{8}|NRAK-[A-Z0-9]{27}|sntrys_[A-Za-z0-9+/=_]{50,}|ATATT3[A-Za-z0-9_\-=]{100,})){R}
# Authorization headers and bearer tokens.
authorization-header         header-token           (?i){WORD_START}(?:proxy-)?authorization["']?(?:\s*[:=,]\s*|[ \t]+)["'`]?(?:(?:bearer|basic|token|bot|digest|negotiate|apikey)\s+)?(?P<s>[^\s"'`,;\\]{6,})
# AuthenticationHeaderValue("Bearer", "…")
scheme-and-token-arguments   header-token           ["'](?:Bearer|Basic|Token)["']\s*,\s*["'](?P<s>[^"'\n]{8,1024})["']
bearer-token                 header-token           (?<![\w-])[Bb]earer\s+(?P<s>[A-Za-z0-9._~+/=\-]{8,})
# Tool-specific password arguments.
mysql-password               not-reference          (?<![\w-])(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlsh|mariadb|mariadb-dump)\b{COMMAND}[\s"',]-p{TOOL_VALUE}
sqlcmd-password              not-reference          (?<![\w-])(?:sqlcmd|bcp|osql|isql)\b{COMMAND}\s-P\s*{TOOL_VALUE}
ldap-bind-password           not-reference          (?<![\w-])ldap\w*\b{COMMAND}\s-w\s+{TOOL_VALUE}
user-password-flag           user-password          (?<![\w-])(?:-[a-zA-Z]{0,3}u|--user)(?:\s+|=)["']?(?P<user>[^\s:'"]+):(?P<s>'[^'\n]+'|"[^"\n]+"|[^\s'"]+)
sshpass                      not-reference          \bsshpass\s+(?:-[a-oq-zA-Z]\S*\s+)*-p\s*{TOOL_VALUE}
login-password               not-reference          \b(?:docker|podman|buildah|skopeo|nerdctl|helm|oc|az|cf|crane|regctl)(?:\s+[\w.\-]+){0,2}?\s+login\b{COMMAND}\s-p(?:\s+|=){TOOL_VALUE}
# Python requests: auth=("user", "password")
auth-tuple                   not-reference          \bauth\s*=\s*\(\s*["'][^"'\n]{1,100}["']\s*,\s*(?P<s>"[^"\n]{1,1024}"|'[^'\n]{1,1024}')
# Go: user:password@tcp(host:3306)/db
dsn-password                 not-reference          (?<![\w/])[\w.\-]{1,64}:(?P<s>[^\s:@/'"]{1,256})@(?:tcp|unix|udp)\(
# ~/.pgpass: host:port:db:user:password
pgpass-line                  not-reference          (?<![\w.:/\-])[\w.\-*]+:(?:\d{2,5}|\*):[\w.\-*]+:[\w.\-*]+:(?P<s>[^\s'":]{4,256})
# wrangler secret put NAME <<< '…'
secret-here-string           not-reference          \bsecrets?\b{COMMAND}<<<[ \t]*{TOOL_VALUE}
openssl-enc-key              not-reference          \bopenssl\s+enc\b{COMMAND}\s-k\s+{TOOL_VALUE}
ssm-parameter-value          not-reference          \bput-parameter\b{COMMAND}\s--value(?:\s+|=){TOOL_VALUE}
# echo -n '…' | vercel env add NAME, … | docker login --password-stdin
piped-secret                 not-reference          \b(?:echo|printf)(?:\s+-[a-zA-Z]+)*\s+{TOOL_VALUE}\s*\|[^\n|;&]{0,80}?(?:secret|env\s+add|password-stdin|passwd|chpasswd|login)
openssl-pass                 not-reference          -pass(?:in|out)?\s+pass:(?P<s>\S+)
redis-cli-password           not-reference          \bredis-cli\b{COMMAND}\s-a\s+{TOOL_VALUE}
gh-secret-body               not-reference          \bgh\s+secret\s+set\b{COMMAND}\s(?:-b|--body)(?:\s+|=){TOOL_VALUE}
powershell-secure-string     not-reference          (?i)ConvertTo-SecureString\s+(?:-String\s+)?(?P<s>"[^"\n]*"|'[^'\n]*')
netrc-password               -                      \bmachine\s+\S+(?:\s+(?:login|account)\s+\S+)*\s+password\s+(?P<s>\S+)
# Names that say secret, with a space instead of = (setx, Dockerfile ENV, aws configure set).
spaced-assignment            assignment             (?m)(?:(?<![\w-])setx|^[ \t]*ENV|(?<![\w-])set[ \t]+-[gxUlu]+|(?<![\w-])aws\s+configure\s+set)[ \t]+{SECRETISH_NAME}(?P<name>[A-Za-z_][\w.]{0,80})[ \t]+{VALUE}
# Secrets set by name on a command line: dotnet user-secrets, pulumi config set --secret, sonar.
secrets-set-command          assignment             \b(?:user-secrets|secrets?)\s+set\s+["']?(?P<name>[\w.:\-]{1,80})["']?\s+(?!-){TOOL_VALUE}
config-set-secret            not-reference          \bconfig\s+set\s+(?:--[\w\-]+\s+)*?--secret(?:\s+--[\w\-]+)*\s+["']?[\w.:\-]{1,80}["']?\s+{TOOL_VALUE}
sonar-login                  not-reference          -Dsonar\.(?:login|token|password)=(?P<s>[^\s'"]{1,256})
# Tuples and calls that carry a password: Erlang/Elixir configs, HTTP clients, PDO, FTP.
tuple-pair                   assignment             [{(\[]\s*:?["']?(?P<name>[A-Za-z_]\w{0,80})["']?\s*,\s*(?P<s>"[^"\n]{1,1024}"|'[^'\n]{1,1024}')\s*[})\]]
client-auth-call             not-reference          \b(?:basic_auth|http_auth|HTTPBasicAuth|HTTPDigestAuth|BasicAuth|login|authenticate|set_credentials)\s*[=(]\s*\(?\s*["'][^"'\n]{1,100}["']\s*,\s*(?:Some\()?(?P<s>"[^"\n]{1,1024}"|'[^'\n]{1,1024}')
bearer-auth-call             not-reference          \.bearer_auth\(\s*(?P<s>"[^"\n]{1,1024}"|'[^'\n]{1,1024}')
pdo-password                 not-reference          \bnew\s+PDO\(\s*["'][^"'\n]*["']\s*,\s*["'][^"'\n]*["']\s*,\s*(?P<s>"[^"\n]{1,1024}"|'[^'\n]{1,1024}')
sigil-assignment             assignment             \$(?P<name>[A-Za-z_]\w{0,80})\s*=\s*(?P<s>"[^"\n]{1,1024}"|'[^'\n]{1,1024}')
terraform-variable-default   assignment             \bvariable\s+"(?P<name>[\w\-]{1,80})"\s*\{[^{}]{0,300}?default\s*=\s*(?P<s>"[^"\n]{1,1024}")
# Databases and caches: SQL users, JDBC, ODBC isql, Redis AUTH and config, cloud-init chpasswd.
sql-identified-by            not-reference          (?i)\bIDENTIFIED\s+(?:WITH\s+\w+\s+)?BY\s+(?:PASSWORD\s+)?(?P<s>'[^'\n]{1,1024}'|"[^"\n]{1,1024}"|[^\s;'"]{1,256})
sql-password-clause          not-reference          (?i)\b(?:USER|ROLE)\b[^;\n]{0,80}?\bPASSWORD\s+(?P<s>'[^'\n]{1,1024}')
jdbc-oracle-password         not-reference          jdbc:oracle:\w+:[\w.\-]+/(?P<s>[^@\s/]{1,256})@
isql-password                not-reference          \bisql\s+(?:-\w+\s+)*[\w.\-]+\s+[\w.\-]+\s+(?P<s>[^\s\-][^\s]{0,255})
redis-auth                   not-reference          (?m)>[ \t]*AUTH[ \t]+(?:\S+[ \t]+)?(?P<s>\S+)[ \t]*$
redis-config-password        not-reference          (?m)^\s*(?:requirepass|masterauth)\s+(?P<s>\S+)
redis-acl-password           not-reference          \bSETUSER\b[^\n]{0,200}?\s'?>(?P<s>[^\s']{1,256})
chpasswd-list                not-reference          chpasswd:[^\n]{0,40}\n(?:[ \t]+[^\n]*\n){0,3}?[ \t]+list:[ \t]*\|?[ \t]*\n[ \t]+[\w.\-]+:(?P<s>[^\s:]{1,256})
# A -u USER -p PASSWORD pair (xcrun altool, docker, many CLIs).
user-then-password-flags     password-flag          (?<![\w-])-u[ \t]+\S+[ \t]+-p[ \t]+(?!-){TOOL_VALUE}
secret-pair                  pair                   (?i)(?<![\w-])(?P<name>[a-z_\-]*(?:secret_access_key|secret_key|access_token|api_key|password|authtoken|auth-token|token|secret))[ \t]+{VALUE}
nested-json-value            assignment             (?<![\w\\])"(?P<name>[\w.\-]{1,80})"\s*:\s*\{[^{}]{0,300}?"value"\s*:\s*(?P<s>"[^"\\\n]{1,1024}")
# Kubernetes and ECS env lists: `- name: API_TOKEN` / `value: "…"`
name-value-pair              assignment             (?<![\w\-])["']?name["']?\s*:\s*["']?(?P<name>[\w.\-]{1,80})["']?\s*[,\n]\s*(?:-\s*)?["']?value["']?\s*:[ \t]*{VALUE}
# define('DB_PASSWORD', '…'), os.Setenv("TOKEN", "…")
call-with-name-and-value     assignment             (?<![\w.])[\w.]{1,40}\(\s*["'](?P<name>[\w.\-]{1,80})["']\s*,\s*(?P<s>"[^"\n]{1,1024}"|'[^'\n]{1,1024}')
# signingKey = []byte("…"), token = SecretStr("…")
call-wrapped-value           wrapped-value          (?<![\w.]){SECRETISH_IDENTIFIER}(?P<name>[A-Za-z_][\w.]{0,80})[ \t]*(?::=|=)[ \t]*[\w.\[\]]{0,40}\(\s*(?P<s>"[^"\n]{1,1024}"|'[^'\n]{1,1024}')\s*\)
docker-config-auth           -                      (?i)\.?docker(?:config)?(?:json|cfg)["']?\s*:\s*["']?(?P<s>[A-Za-z0-9+/=]{20,})
base64-private-key           encoded-private-key    (?<![A-Za-z0-9+/])(?P<s>LS0tLS1CRUdJTi[A-Za-z0-9+/]{20,}={0,2})
# "Rotate TWILIO_AUTH_TOKEN (32ee…)"
name-in-parentheses          named-random           (?<![\w.])(?P<name>[A-Z][A-Z0-9_]{2,80})[ \t]*\((?P<s>[^\s()]{8,256})\)
xml-element                  assignment             <{SECRETISH_NAME}(?P<name>[A-Za-z_][\w.:\-]{0,60})>(?P<s>[^<\s][^<\n]{0,500})</(?P=name)>
# Flags and assignments whose name says secret, in every common syntax.
typed-assignment             assignment             (?<![\w.$\-]){SECRETISH_IDENTIFIER}(?P<name>[A-Za-z_][\w.]{0,80})[ \t]*:[ \t]*[&\w\[\]<>.,' ]{1,40}?[ \t]*=(?!=)[ \t]*{VALUE}
secret-flag                  flag                   (?<![\w-])--?{SECRETISH_NAME}(?P<name>[A-Za-z][\w.\-]{0,60})(?:=|[ \t]+){VALUE}
secret-assignment            assignment             (?:(?<=\\[nrt])|(?<=\$env:)|(?<![\w.$\-:/])(?<!\$\{))(?P<q>\\?["']?){SECRETISH_NAME}(?P<name>[A-Za-z_](?:[\w.\-]|:(?=[A-Za-z_])){0,80})(?P=q)\]?[ \t]*(?P<op>:=|=>|=(?!=)|:)[ \t]*{VALUE}
# Prose: "the VPN password is Xk29…", "password reset to 'Nl&w…'", "DB password (MCg7…)".
prose-password               password-like          (?i)\b(?:password|passwd|passphrase|pwd)\b[^\n]{0,60}?(?:\bis\b|\bto\b|:|=|\()[ \t]*(?:now[ \t]+)?['"(]?(?P<s>[^\s'"()=]{8,128}?)(?=['")]|[.,;!?]?(?:\s|$))
prose-token                  random-not-identifier  (?i)\b(?:api[ \-]?key|token|secret|access[ \-]?key)\b[^\n]{0,40}?(?:\bis\b|\bare\b|:(?=[ \t]))[ \t]*(?:now[ \t]+)?['"(]?(?P<s>[^\s'"()=]{16,256}?)(?=['")]|[.,;!?]?(?:\s|$))
prose-user-password          password-like          (?i)\b(?:credentials?|login)\b[^\n]{0,40}?[\w.@\-]+[ \t]+/[ \t]+(?P<s>[^\s/]{8,128}?)(?=[.,;!?]?(?:\s|$))
# An AWS secret access key: 40 base64 characters near the word "secret".
aws-secret-access-key        random-not-hex         (?i)secret[\w \t:="'-]{0,40}?(?<![A-Za-z0-9/+=])(?P<s>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])
'''

ACCEPT_CHECKS = {
    "-": None, "not-reference": _accept_not_reference, "assignment": _accept_assignment, "flag": _accept_flag,
    "password-like": _accept_password_like, "pair": _accept_pair, "user-password": _accept_user_password,
    "header-token": _accept_header_token, "wrapped-value": _accept_wrapped_value,
    "encoded-private-key": _accept_encoded_private_key, "random": _accept_random,
    "random-not-hex": _accept_random_not_hex, "random-not-identifier": _accept_random_not_identifier,
    "named-random": _accept_named_random, "password-flag": _accept_password_flag,
}
PATTERN_BLOCKS = {"{VALUE}": _QUOTED_OR_BARE, "{TOOL_VALUE}": _TOOL_VALUE, "{SECRETISH_IDENTIFIER}": _SECRETISH_IDENTIFIER,
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
        if start >= end:
            continue
        pieces += [text[position:start], REDACTED]
        position = end
        hits += 1
    if not hits:
        return text, 0
    pieces.append(text[position:])
    return "".join(pieces), hits


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
                  hashes_now: dict, commits_since: Optional[int]) -> Drift:
    """hashes_now maps each saved path to its blob hash now (None when gone).
    commits_since is None when the saved head is no longer an ancestor of HEAD."""
    saved = cp.git
    unreachable = commits_since is None
    changed = [f.path for f in cp.modified_files
               if unreachable or hashes_now.get(f.path) != f.hash]
    recorded = {f.path for f in cp.modified_files}
    new = sorted(p for p in dirty_now if p not in recorded and not is_checkpoint_file(p))
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
        if not self.available:
            return None
        import subprocess
        command = ["git", "--no-pager", "-c", "core.fsmonitor=false", "-c", "core.quotePath=false",
                   "-c", "core.untrackedCache=keep", *args]
        try:
            proc = subprocess.Popen(command, cwd=self.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                                    env=_git_environment(env), start_new_session=os.name == "posix")
        except FileNotFoundError:
            self._give_up("git was not found on PATH; git facts and drift detection are off.")
            return None
        except OSError as error:
            self._give_up(f"git could not be started ({error.strerror}); git facts are off.")
            return None
        limit = self.timeout if timeout is None else timeout
        try:
            out, err = proc.communicate(stdin, timeout=limit)
        except subprocess.TimeoutExpired:
            _kill_tree(proc)
            self._give_up(f"git {args[0]} did not answer within {limit:g} s; git facts are off for this call.")
            return None
        return GitResult(proc.returncode, out, err)

    def output(self, *args: str, ok_codes: tuple = (0,), **options: Any) -> Optional[bytes]:
        """stdout of a command expected to succeed; None when git is unavailable or it failed."""
        result = self.run(*args, **options)
        return result.stdout if result is not None and result.code in ok_codes else None

    def _give_up(self, warning: str) -> None:
        self.available = False
        self.warnings.append(warning)

    def scan(self) -> "GitScan":
        """One `git status` gives HEAD, branch and every changed or untracked file."""
        prefix = ""
        if not os.path.exists(os.path.join(self.root, ".git")):
            found = self.output("rev-parse", "--show-prefix")
            if found is None:
                return GitScan(None, [], in_repo=False)
            prefix = found.decode("utf-8", "surrogateescape").strip()
        status = self.output("status", "--porcelain=v2", "-z", "-uall", "--branch", "--", ".")
        if status is None:
            return GitScan(None, [], in_repo=False)
        return parse_status(status, prefix)

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
    changes = []
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
                i += 1  # the original path of a rename follows
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
    return GitScan(state, changes, lists_checkpoint=lists_checkpoint)


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


def contained_path(root: str, path: str) -> Optional[str]:
    """relative_project_path, plus: the file's folder must really be inside the root
    (a symlinked folder must not lead out of the project)."""
    rel = relative_project_path(root, path)
    if rel is None:
        return None
    parent = os.path.realpath(os.path.dirname(os.path.join(root, *rel.split("/"))))
    if parent != root and not parent.startswith(root.rstrip(os.sep) + os.sep):
        return None
    return rel


# ════════════════════════════════════════════════════════════════════════════
# 9. Storage: the only code that opens checkpoint files (and reads transcripts)
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


def write_atomically(path: str, data: bytes, mode: int = 0o600) -> None:
    """The one way this program writes a file: a temp file beside it (created exclusively,
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
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
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
# 11. Services and tools
# ════════════════════════════════════════════════════════════════════════════

@record
class World:
    """What the services need from outside the process, gathered once in section 15."""
    env: dict
    cwd: str
    home: Optional[str]
    clock: Callable[[], float]
    log: Callable[[str], None]  # the server log (stderr): never stdout, which carries the protocol
    known_secrets: tuple = ()
    program: tuple = ("claude-checkpoint-mcp",)  # how to run this program again (section 13)

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


@record
class Change:
    """What one writer (a save, a hook) brings to the locked update of the checkpoint."""
    named: list  # [FileNote] files the model named, inside the root
    carried: list  # [FileEntry] files recorded earlier or proven by the transcript
    assemble: Callable[..., Checkpoint]  # (files, git state, now, new id) -> the new checkpoint
    mode: SaveMode = SaveMode.MERGE
    truncated: bool = False  # the merge itself dropped history past a limit


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
        scan = git.scan()
        selection = select_files(scan.changes, change.named, change.carried)
        files = hash_entries(root, selection.entries)
        checkpoint = change.assemble(files, scan.state, world.now_iso(), new_checkpoint_id())
        checkpoint = replace(checkpoint, omitted_files=selection.omitted,
                             truncated=change.truncated or checkpoint.truncated or bool(selection.omitted))
        checkpoint, data = _redact_and_fit(checkpoint, world)
        write_checkpoint(root, data, stored.raw)
    return _save_outcome(root, change.mode, checkpoint, data, git, scan, warnings, existed=stored.raw is not None,
                         program=world.program)


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
    hashed = []
    for entry in entries:
        inside = (trust_git and entry.source is FileSource.GIT) or contained_path(root, entry.path) is not None
        hashed.append(replace(entry, hash=hash_worktree_file(root, entry.path) if inside else None))
    return hashed


def _inside(root: str, entries: list) -> list:
    """Entries read back from the file whose paths stay in the project (it may have been edited)."""
    return [e for e in entries if contained_path(root, e.path) == e.path]


def _redact_and_fit(checkpoint: Checkpoint, world: World) -> tuple:
    redactor = Redactor(world.known_secrets)
    checkpoint = redactor.checkpoint(checkpoint)
    return fit_to_size(replace(checkpoint, redactions=redactor.count))


def _save_outcome(root: str, mode: SaveMode, checkpoint: Checkpoint, data: bytes, git: Git,
                  scan: GitScan, warnings: list, existed: bool, program: tuple) -> SaveOutcome:
    notes = []
    if checkpoint.redactions:
        notes.append(f"Redacted {checkpoint.redactions} secret-looking value(s).")
    if checkpoint.truncated:
        notes.append("Some history was dropped to stay within the limits (oldest commands first)"
                     + (f"; {checkpoint.omitted_files} changed file(s) were not recorded" if checkpoint.omitted_files else "")
                     + ".")
    if scan.in_repo:
        # The scan saw the file if it existed and is not ignored; only a first save asks git.
        warning = checkpoint_git_warning(git, root, program, scan.lists_checkpoint if existed else None)
        notes += [warning] if warning else []
    return SaveOutcome(os.path.join(root, CHECKPOINT_NAME), root, len(data), mode, checkpoint,
                       notes + warnings + git.warnings)


def checkpoint_git_warning(git: Git, root: str, program: tuple, listed: Optional[bool] = None) -> Optional[str]:
    """What is wrong with the checkpoint's place in git, with the commands that fix it, each
    exactly as a shell runs it from any folder; None when all is well. Tracked (a `git add -A`
    after a save) is the worse case: it goes into the next commit, ignored or not. Otherwise
    not ignored: `listed` says whether this save's git status saw the file (None: ask git)."""
    found = git.output("ls-files", "-z", "--", CHECKPOINT_NAME, BACKUP_NAME)
    tracked = [name for name in found.decode("utf-8", "surrogateescape").split("\0") if name] if found else []
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
    if cp.git is None:
        return result
    git = Git(root)
    scan = git.scan()
    if scan.state is not None:
        commits = git.commits_since(cp.git.head, scan.state.head)
        if git.available:
            hashes = {e.path: e.hash for e in hash_entries(root, cp.modified_files, trust_git=False)}
            result.drift = compute_drift(cp, scan.state, scan.dirty_paths, hashes, commits)
    result.warnings += git.warnings
    return result


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
            previous, facts, files, state, now, new_id, os.path.basename(root), key))

    return update_checkpoint(root, world, prepare, replace_unreadable=False)


# ── 11.1 The MCP tools: schema, annotations and a thin handler each ──

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
                                      "exitCode": {"type": "integer"},
                                      "note": _string(LIMITS["recentCommands.note"])}, ("command",)),
                             LIMITS["recentCommands"], "Commands that mattered, oldest first"),
    "mode": {"type": "string", "enum": [m.value for m in SaveMode],
             "description": "merge keeps what is not resent; default replace"},
    "projectRoot": PROJECT_ROOT_SCHEMA,
}, ("goal",))

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

LOAD_INPUT_SCHEMA = _object({
    "format": {"type": "string", "enum": [f.value for f in BriefFormat],
               "description": "brief (default, markdown) or full (checkpoint and drift as JSON)"},
    "projectRoot": PROJECT_ROOT_SCHEMA,
})


def tool_save(arguments: Any, context: ToolContext) -> ToolResult:
    request = parse_save_arguments(arguments)
    outcome = save_checkpoint(context.root(request.project_root), request, context.world)
    return ToolResult(render_save_answer(outcome), outcome.structured())


def tool_load(arguments: Any, context: ToolContext) -> ToolResult:
    if not isinstance(arguments, dict):
        raise InvalidArgument("arguments", "must be an object")
    unknown = sorted(set(arguments) - {"format", "projectRoot"})
    if unknown:
        raise InvalidArgument(short_name(unknown[0]), "unknown field; allowed fields are format, projectRoot")
    fmt = BriefFormat.BRIEF
    if arguments.get("format") is not None:
        fmt = _arg_enum(BriefFormat, arguments["format"], "format")
    root_arg = arguments.get("projectRoot")
    if root_arg is not None:
        root_arg = _arg_text(root_arg, "projectRoot", LIMITS["projectRoot"], required=True)
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


# ── 11.2 Prompts and resources ──

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
    else:
        stored = read_checkpoint(root)
        if stored.checkpoint is None:
            raise CheckpointError(f"No checkpoint at {os.path.join(root, CHECKPOINT_NAME)} yet.")
        import json
        text = json.dumps(stored.checkpoint.to_json(), ensure_ascii=False, indent=2)
        mime = "application/json"
    return {"contents": [{"uri": uri, "mimeType": mime, "text": text}]}


# ════════════════════════════════════════════════════════════════════════════
# 12. Protocol: JSON-RPC messages in, replies out (no I/O of its own)
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
# 13. Transport: JSON-RPC over stdio
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
    return World(env, cwd, home if home != "~" else None, time.time, _log, known, tuple(program_command()))


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
        return [python, "-c", IMPORT_CODE.format(module=module), folder]
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
# 14. Install and doctor: configuration for Claude Code and Claude Desktop
# ════════════════════════════════════════════════════════════════════════════

def cli_root(args: Any, world: World) -> str:
    """The root for a subcommand: --root DIR (relative to the current folder), else section 10's rules."""
    return world.root(getattr(args, "root", None) and os.path.abspath(args.root))


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
    choice = choose_root(getattr(args, "root", None) and os.path.abspath(args.root), world.env, [], world.cwd)
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
# 15. Command line: show, save, hook and the entry point
# ════════════════════════════════════════════════════════════════════════════


def build_parser() -> Any:
    import argparse
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--root", metavar="DIR", default=argparse.SUPPRESS,
                        help="project root (default: CHECKPOINT_PROJECT_ROOT, CLAUDE_PROJECT_DIR or the current folder)")
    parser = argparse.ArgumentParser(
        prog="claude_checkpoint.py", parents=[common],
        description="Save and resume Claude Code session state. With no command: the MCP stdio server.",
        epilog="Exit status: 0 ok, 1 failed, 2 usage error, 3 nothing to show (show, with no checkpoint).")
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
    return parser


def main(argv: Optional[list] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv == ["serve"]:
        return serve()
    args = build_parser().parse_args(argv)
    if args.command in (None, "serve"):
        return serve(getattr(args, "root", None))
    _install_signal_handlers()
    world = world_from_process()
    sys.stdout, sys.stderr = (RedactingWriter(stream, world.known_secrets) for stream in (sys.stdout, sys.stderr))
    if args.command == "hook":
        return run_hook(args.event, getattr(args, "root", None), world)
    runner = {"show": cli_show, "save": cli_save, "install": cli_install, "doctor": cli_doctor}[args.command]
    try:
        return runner(args, world)
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
    root = world.root(getattr(args, "root", None) and os.path.abspath(args.root) or request.project_root)
    outcome = save_checkpoint(root, request, world)
    print(render_save_answer(outcome))
    return EXIT_OK


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
        root = resolve_root(choose_root(root_arg and os.path.abspath(root_arg), world.env, [], cwd), world.home)
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

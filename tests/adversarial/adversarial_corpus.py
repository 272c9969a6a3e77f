"""The adversarial corpus: frames and tool calls an attacker or a careless client sends, each with the one
stable answer the server must give (a JSON-RPC error code, a tool error code, or a per-item code).

Each case is ``Case(name, frame, expect)``: ``frame`` is the raw bytes of one JSON-RPC frame (no newline);
``expect`` is ``("rpc", code)`` for a JSON-RPC error reply, ``("tool", code)`` for a tool error result
(``structuredContent.error.code``), ``("item", code)`` for the first item's error of a per-item batch tool,
or ``("ok", None)`` for a successful result. The ids run from 1000; the runner checks each reply carries the
id it sent (``None`` for frames whose id cannot be read).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Case:
    name: str
    frame: bytes
    expect: tuple[str, Any]
    reply_id: Any = "same"  # "same": the id of the request; else the id the reply must carry


def _call(i: int, tool: str, arguments: Any, *, ensure_ascii: bool = True) -> bytes:
    msg = {
        "jsonrpc": "2.0",
        "id": i,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    return json.dumps(msg, ensure_ascii=ensure_ascii).encode("utf-8")


def _deep(levels: int) -> Any:
    value: Any = "C"
    for _ in range(levels):
        value = [value]
    return value


#: Characters outside every hand list the server once had: each is Default_Ignorable or Bidi_Control.
INVISIBLE = {
    "tag_letter": "\U000e0041",
    "tag_begin": "\U000e0001",
    "combining_grapheme_joiner": "\u034f",
    "variation_selector_16": "\ufe0f",
    "variation_selector_17": "\U000e0100",
    "unassigned_ignorable": "\u2065",
    "hangul_filler": "\u3164",
    "mongolian_fvs4": "\u180f",
    "arabic_letter_mark": "\u061c",
    "musical_begin_beam": "\U0001d173",
    "shorthand_format": "\U0001bca0",
}

#: (tool, arguments with PATH where the hostile path goes): every tool with a path argument.
PATH_TOOLS = [
    ("protein_pka", {"pdb_path": "PATH"}),
    ("md_run", {"pdb_path": "PATH", "steps": 10}),
    ("md_analyze", {"trajectory_path": "PATH", "topology_path": "PATH"}),
    ("dock", {"ligands": ["CCO"], "receptor_path": "PATH", "center": [0, 0, 0], "size": [10, 10, 10]}),
    ("ranking_check", {"task_dir": "PATH", "draft": {}}),
    ("ranking_check", {"task_dir": ".", "draft_path": "PATH"}),
]


def _fill(arguments: dict[str, Any], path: str) -> dict[str, Any]:
    return {k: (path if v == "PATH" else v) for k, v in arguments.items()}


def hostile_paths(workdir: Path | None) -> dict[str, str]:
    """Paths no tool may read: system files, and (with the server's work directory, prepared by
    :func:`prepare_workdir`) links and ``..`` leading out of it, a FIFO and a directory."""
    out = {"proc_environ": "/proc/self/environ", "etc_passwd": "/etc/passwd", "dev_zero": "/dev/zero"}
    if workdir is not None:
        out.update(
            {
                "symlink_out": str(workdir / "link-out.pdb"),
                "dotdot_out": str(workdir / ".." / "outside" / "secret.pdb"),
                "dir_link_out": str(workdir / "dir-link" / "secret.pdb"),
                "fifo": str(workdir / "pipe.pdb"),
                "link_to_proc": str(workdir / "environ.pdb"),
                "hard_link_out": str(workdir / "hard-link.pdb"),
            }
        )
    return out


#: What the file outside the roots holds: it must never appear in a reply or an artifact.
SECRET = "ATOM      1  N   SEC A   1      11.111  22.222  33.333  1.00  0.00           N  SECRET-7f3a"


#: Sparse files over the cap of their kind (docs/server.md): the issue's 10 GB PDB held the only CPU slot
#: for 211 s and reached 19 GiB of memory.
OVERSIZED = {"huge.pdb": 10 * 2**30, "huge.sdf": 51 * 2**20, "huge.json": 2 * 2**20}
#: What :func:`prepare_workdir` puts in the work directory that is hostile in itself.
PREPARED = frozenset({"hard-link.pdb", "hard-link.sdf", *OVERSIZED})


def _xyz(atoms: int) -> str:
    return f"{atoms}\nhelium grid\n" + "".join(f"He {3.0 * i:.1f} 0.0 0.0\n" for i in range(atoms))


def prepare_workdir(workdir: Path) -> None:
    """The links, FIFO and outside file :func:`hostile_paths` names (the server must refuse them all)."""
    outside = workdir.parent / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "secret.pdb").write_text(SECRET + "\nEND\n")
    (workdir / "link-out.pdb").symlink_to(outside / "secret.pdb")
    (workdir / "dir-link").symlink_to(outside, target_is_directory=True)
    (workdir / "environ.pdb").symlink_to("/proc/self/environ")
    os.mkfifo(workdir / "pipe.pdb")
    os.link(
        outside / "secret.pdb", workdir / "hard-link.pdb"
    )  # resolves under the root: the link count tells
    os.link(outside / "secret.pdb", workdir / "hard-link.sdf")
    for name, size in OVERSIZED.items():  # sparse: no disk used, and the server must not read them
        with open(workdir / name, "wb") as fh:
            fh.truncate(size)
    jobs = workdir / "jobs"
    jobs.mkdir(exist_ok=True)
    (jobs / "chem_conformers-00000000aa.json").write_bytes(b'{"job_id": "\xff\xfe", "status": "running"}')
    (jobs / "chem_conformers-00000000bb.json").write_text('{"job_id": "chem_conformers-00000000bb",')


def cases(workdir: Path | None = None) -> list[Case]:
    """The corpus; with the server's ``workdir`` (prepared by :func:`prepare_workdir`) it also holds the
    cases that need files there."""
    out = [
        Case("parse_error", b"{not json", ("rpc", -32700), None),
        Case("truncated_frame", b'{"jsonrpc":"2.0","id":1001,"method":"tools/list"', ("rpc", -32700), None),
        Case(
            "invalid_utf8",
            b'{"jsonrpc":"2.0","id":1002,"method":"tools/list","x":"\xff"}',
            ("rpc", -32700),
            None,
        ),
        Case("jsonrpc_1_0", b'{"jsonrpc":"1.0","id":1003,"method":"tools/list"}', ("rpc", -32600)),
        Case("no_jsonrpc", b'{"id":1004,"method":"tools/list"}', ("rpc", -32600)),
        Case("object_id", b'{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}', ("rpc", -32600), None),
        Case("bool_id", b'{"jsonrpc":"2.0","id":true,"method":"tools/list"}', ("rpc", -32600), None),
        Case(
            "string_params",
            b'{"jsonrpc":"2.0","id":1007,"method":"tools/list","params":"x"}',
            ("rpc", -32602),
        ),
        Case(
            "array_params", b'{"jsonrpc":"2.0","id":1008,"method":"tools/call","params":[1]}', ("rpc", -32602)
        ),
        Case("batch", b'[{"jsonrpc":"2.0","id":1009,"method":"tools/list"}]', ("rpc", -32600), None),
        Case("empty_batch", b"[]", ("rpc", -32600), None),
        Case("scalar", b"42", ("rpc", -32600), None),
        Case("number_method", b'{"jsonrpc":"2.0","id":1012,"method":7}', ("rpc", -32600)),
        Case("no_method", b'{"jsonrpc":"2.0","id":1013}', ("rpc", -32600)),
        Case("unknown_method", b'{"jsonrpc":"2.0","id":1014,"method":"no/such"}', ("rpc", -32601)),
        Case(
            "deep_nesting",
            b'{"jsonrpc":"2.0","id":1015,"method":"tools/list","params":{"a":'
            + b"[" * 5000
            + b"]" * 5000
            + b"}}",
            ("rpc", -32600),
            None,
        ),
        Case("nesting_65", _call(1016, "chem_parse", {"molecules": _deep(70)}), ("rpc", -32600)),
        Case("lone_surrogate", _call(1017, "chem_parse", {"molecules": ["C\ud800"]}), ("rpc", -32602)),
        Case(
            "lone_low_surrogate_key",
            b'{"jsonrpc":"2.0","id":1018,"method":"tools/call","params":{"name":'
            b'"chem_parse","arguments":{"\\udc00":1}}}',
            ("rpc", -32602),
        ),
        Case("unknown_tool", _call(1019, "no_such_tool", {}), ("tool", "unknown_tool")),
        Case("missing_arguments", _call(1020, "chem_parse", {}), ("tool", "invalid_input")),
        Case("wrong_type", _call(1021, "chem_parse", {"molecules": "CCO"}), ("tool", "invalid_input")),
        Case(
            "bidi_override",
            _call(1022, "chem_parse", {"molecules": ["\u202eCCO"]}),
            ("tool", "invalid_input"),
        ),
        Case(
            "zero_width_space",
            _call(1023, "chem_parse", {"molecules": ["CCO\u200b"]}),
            ("tool", "invalid_input"),
        ),
        Case("bom", _call(1024, "chem_descriptors", {"molecules": ["\ufeffCCO"]}), ("tool", "invalid_input")),
        Case(
            "emoji_smiles",
            _call(1025, "chem_parse", {"molecules": ["C\U0001f4a5"]}, ensure_ascii=False),
            ("item", "invalid_smiles"),
        ),
        Case(
            "accented_smiles", _call(1026, "chem_parse", {"molecules": ["CCé"]}), ("item", "invalid_smiles")
        ),
        Case(
            "huge_smiles_descriptors",
            _call(1027, "chem_descriptors", {"molecules": ["C" * 25_000]}),
            ("tool", "too_large"),
        ),
        Case(
            "huge_smiles_parse",
            _call(1028, "chem_parse", {"molecules": ["C" * 25_000]}),
            ("item", "too_large"),
        ),
        Case(
            "huge_smiles_similarity",
            _call(1029, "chem_similarity", {"molecules": ["CCO", "c1ccccc1" * 3000]}),
            ("tool", "too_large"),
        ),
        Case(
            "too_many_items", _call(1030, "chem_parse", {"molecules": ["C"] * 100_001}), ("tool", "too_large")
        ),
        Case("deep_arguments", _call(1031, "chem_parse", {"molecules": _deep(20)}), ("tool", "too_large")),
        Case(
            "missing_file",
            _call(1032, "chem_parse", {"molecules": ["missing/nothing.xyz"]}),
            ("item", "invalid_input"),
        ),
        Case(
            "file_outside_roots",
            _call(1033, "chem_parse", {"molecules": ["/etc/hostname.xyz"]}),
            ("item", "invalid_input"),
        ),
        Case(
            "negative_wait",
            _call(1034, "chem_descriptors", {"molecules": ["CCO"], "wait_s": -5}),
            ("tool", "invalid_input"),
        ),
        Case("job_not_found", _call(1035, "job_wait", {"job_id": "nope-123"}), ("tool", "job_not_found")),
    ]
    i = 1100
    for name, ch in INVISIBLE.items():
        out.append(
            Case(
                f"invisible_{name}",
                _call(i, "chem_parse", {"molecules": [f"CC{ch}O"]}),
                ("tool", "invalid_input"),
            )
        )
        out.append(
            Case(
                f"invisible_key_{name}", _call(i + 1, "chem_parse", {f"m{ch}": 1}), ("tool", "invalid_input")
            )
        )
        out.append(
            Case(
                f"invisible_url_{name}",  # loopback: had the character passed, no lookup leaves the machine
                _call(i + 2, "web_fetch", {"url": f"http://127.0.0.1:9/pka{ch}"}),
                ("tool", "invalid_input"),
            )
        )
        i += 3
    i = 1200
    for name, path in hostile_paths(workdir).items():
        for tool, arguments in PATH_TOOLS:
            out.append(
                Case(
                    f"path_{name}_{tool}_{i}",
                    _call(i, tool, _fill(arguments, path)),
                    ("tool", "invalid_input"),
                )
            )
            i += 1
        out.append(
            Case(
                f"path_{name}_molecule",
                _call(i, "chem_parse", {"molecules": [path + ".sdf"]}),
                ("item", "invalid_input"),
            )
        )
        i += 1
    if workdir is not None:
        out.append(Case("jobs_with_damaged_records", _call(1300, "jobs", {}), ("ok", None)))
        huge, i = str(workdir / "huge.pdb"), 1310
        for tool, arguments in PATH_TOOLS:
            if tool != "ranking_check":
                out.append(
                    Case(
                        f"oversized_{tool}_{i}", _call(i, tool, _fill(arguments, huge)), ("tool", "too_large")
                    )
                )
                i += 1
        draft = {"task_dir": ".", "draft_path": str(workdir / "huge.json")}
        out.append(Case("oversized_draft", _call(i, "ranking_check", draft), ("tool", "too_large")))
        molecule = {"molecules": [str(workdir / "huge.sdf")]}
        out.append(
            Case("oversized_molecule_file", _call(i + 1, "chem_parse", molecule), ("item", "too_large"))
        )
        hard = {"molecules": [str(workdir / "hard-link.sdf")]}
        out.append(
            Case("hard_link_molecule_file", _call(i + 2, "chem_parse", hard), ("item", "invalid_input"))
        )
    out.append(
        Case(
            "xyz_over_2000_atoms",
            _call(1330, "chem_parse", {"molecules": [_xyz(2001)]}),
            ("item", "too_large"),
        )
    )
    return out

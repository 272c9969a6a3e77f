"""Print the requirements of pyproject.toml for the given extras, one per line (the images' dependency layer).

Used by the Dockerfiles before the sources are copied, so that a change of the sources rebuilds only the
project's own layer: ``python pyproject_deps.py pyproject.toml all,gpu``. The project's references to
itself (``spu-scaffold[web,chem]``) are expanded.
"""

from __future__ import annotations

import re
import sys
import tomllib


def requirements(pyproject: dict, extras: list[str]) -> list[str]:
    project = pyproject["project"]
    name = project["name"]
    optional = project.get("optional-dependencies", {})
    out = list(project.get("dependencies", []))
    seen: set[str] = set()
    todo = [e for e in extras if e]
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        if extra not in optional:
            raise SystemExit(f"pyproject_deps: no extra {extra!r} (have: {', '.join(sorted(optional))})")
        seen.add(extra)
        for req in optional[extra]:
            own = re.fullmatch(rf"{re.escape(name)}\[([^\]]+)\]", req.replace(" ", ""))
            if own:
                todo.extend(own.group(1).split(","))
            else:
                out.append(req)
    return list(dict.fromkeys(out))


if __name__ == "__main__":
    with open(sys.argv[1], "rb") as fh:
        data = tomllib.load(fh)
    print("\n".join(requirements(data, sys.argv[2].split(",") if len(sys.argv) > 2 else [])))

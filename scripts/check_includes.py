#!/usr/bin/env python3
"""Fails when a file in src/ includes a folder on its own floor or above it.

The floors are the rows of the README's "Layout of the code" table that name a src/
folder, top floor first: a folder may include only folders in rows below its own. The
README is the one place the order is written; this script reads it from there.

usage: scripts/check_includes.py [repository root]   (exit 0 clean, 1 violations, 2 bad map)
"""
import os
import re
import sys


def floors_from_readme(readme):
    """The src/ folders of the layout table, top floor first."""
    order, in_table = [], False
    for line in open(readme, encoding="utf-8"):
        if line.startswith("## "):
            in_table = line.strip() == "## Layout of the code"
            continue
        match = re.match(r"\|\s*`src/([a-z_]+)`\s*\|", line) if in_table else None
        if match:
            order.append(match.group(1))
    return order


def includes(path):
    """(line number, folder) of each quoted include naming a folder."""
    for number, line in enumerate(open(path, encoding="utf-8"), 1):
        match = re.match(r'\s*#\s*include\s+"([a-z_]+)/', line)
        if match:
            yield number, match.group(1)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    src = os.path.join(root, "src")
    order = floors_from_readme(os.path.join(root, "README.md"))
    folders = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    missing = [d for d in folders if d not in order]
    if missing or len(set(order)) != len(order):
        print(f"check_includes: README's layout table must list every src/ folder once; "
              f"missing {missing}, listed {order}", file=sys.stderr)
        return 2
    floor = {name: len(order) - i for i, name in enumerate(order)}  # higher is further up
    violations = []
    for folder in folders:
        for dirpath, _, files in os.walk(os.path.join(src, folder)):
            for name in sorted(files):
                path = os.path.join(dirpath, name)
                for number, target in includes(path):
                    if target == folder:
                        continue
                    if target not in floor:
                        violations.append(f"{os.path.relpath(path, root)}:{number}: includes "
                                          f"{target}/, which is not a src/ folder of the map")
                    elif floor[target] >= floor[folder]:
                        violations.append(f"{os.path.relpath(path, root)}:{number}: {folder}/ "
                                          f"includes {target}/, which is not below it in the "
                                          f"README's layout table")
    for v in violations:
        print(v, file=sys.stderr)
    if violations:
        print(f"check_includes: {len(violations)} include(s) against the floor order "
              f"(top first): {' > '.join(order)}", file=sys.stderr)
        return 1
    print(f"check_includes: {len(folders)} folders, every include goes down "
          f"({' > '.join(order)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""scripts/check_includes.py against small trees made here: it passes the real tree's rules
on a clean tree, and names the file, line and folders of an include that climbs a floor, of
one into a folder the map lacks, and of a folder missing from the map."""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCRIPT = os.path.join(ROOT, "scripts", "check_includes.py")
README = """# x

## Layout of the code

| folder | what |
|---|---|
| `src/top` | above |
| `src/low` | below |

## Next
"""
passed = failed = 0


def check(ok, what):
    global passed, failed
    print(("ok   " if ok else "FAIL ") + what)
    passed, failed = passed + ok, failed + (not ok)


def tree(files, readme=README):
    root = tempfile.mkdtemp()
    with open(os.path.join(root, "README.md"), "w") as f:
        f.write(readme)
    for path, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        with open(os.path.join(root, path), "w") as f:
            f.write(text)
    return subprocess.run([sys.executable, SCRIPT, root], capture_output=True, text=True)


clean = tree({"src/top/a.h": '#include "low/b.h"\n#include "top/c.h"\n#include <vector>\n',
              "src/low/b.h": "#pragma once\n"})
check(clean.returncode == 0, f"a downward include passes (rc {clean.returncode})")

up = tree({"src/top/a.h": "#pragma once\n", "src/low/b.cpp": '// x\n#include "top/a.h"\n'})
check(up.returncode == 1 and "src/low/b.cpp:2: low/ includes top/" in up.stderr,
      f"an upward include fails, naming file and line: {up.stderr.strip()[:120]}")

unknown = tree({"src/top/a.h": '#include "elsewhere/x.h"\n', "src/low/b.h": ""})
check(unknown.returncode == 1 and "elsewhere/" in unknown.stderr,
      "an include of a folder the map lacks fails")

unlisted = tree({"src/top/a.h": "", "src/low/b.h": "", "src/extra/c.h": ""})
check(unlisted.returncode == 2 and "extra" in unlisted.stderr,
      "a src/ folder missing from the README's map is refused (exit 2)")

real = subprocess.run([sys.executable, SCRIPT, ROOT], capture_output=True, text=True)
check(real.returncode == 0, f"the repository itself: {(real.stdout + real.stderr).strip()[-200:]}")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)

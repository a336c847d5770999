"""Build a C-level API consumer's wheel against the cropgrad the tests import.

``pip wheel --no-build-isolation`` of a pyproject.toml + setup.py project,
as docs/capi.md describes it, then the wheel unpacked into a directory the
test imports from.
"""

import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile

import cropgrad


def build(source, tmp_dir, modules, files=None):
    """Build `source` (a directory) in `tmp_dir`; import and return `modules`.

    `files` (name -> text) are written into the build's copy first (or into
    an empty project when `source` is None).
    """
    tree = os.path.join(tmp_dir, "src")
    if source is None:
        os.makedirs(tree)
    else:
        shutil.copytree(source, tree)
    for name, text in (files or {}).items():
        path = os.path.join(tree, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    # Cython looks for capi.pxd on sys.path: the package the tests import
    # may be a source tree (an editable install hides it from Cython).
    package_root = os.path.dirname(os.path.dirname(cropgrad.__file__))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [package_root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    dist = os.path.join(tmp_dir, "dist")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-build-isolation",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            "-w",
            dist,
            tree,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_dir,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    (wheel,) = os.listdir(dist)
    site = os.path.join(tmp_dir, "site")
    with zipfile.ZipFile(os.path.join(dist, wheel)) as z:
        z.extractall(site)
    loaded = []
    for name in modules:
        (path,) = [
            p
            for p in os.listdir(site)
            if p.startswith(name + ".") and p.endswith((".so", ".pyd"))
        ]
        spec = importlib.util.spec_from_file_location(name, os.path.join(site, path))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        loaded.append(module)
    return loaded

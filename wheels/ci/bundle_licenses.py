"""Add the licences of the libraries a repaired wheel bundles to the wheel.

Usage (cibuildwheel runs it after auditwheel / delocate, see
``repair-wheel-command`` in wheels/ci/cibuildwheel.toml)::

    python wheels/ci/bundle_licenses.py DEST_DIR_OR_WHEEL...
    python wheels/ci/bundle_licenses.py --check WHEEL...

A repaired wheel carries shared libraries that are not cropgrad's: the
OpenMP runtime (libgomp in ``cropgrad.libs/`` on Linux, libomp in
``cropgrad/.dylibs/`` on macOS).  Their licences require their terms to
travel with them, so this appends each bundled library's licence text
(``wheels/licenses/<name>.txt``) to the wheel's copy of cropgrad's
``LICENSE`` (``cropgrad-<version>.dist-info/licenses/LICENSE``) and updates
the wheel's ``RECORD``.  The sdist and the ``License-File`` metadata stay
as they are: only the wheel ships the libraries.

A bundled file with no known licence is an error: a new dependency must
bring its licence text before a wheel can carry it.  Running it twice adds
nothing the second time.

``--check`` verifies a wheel instead: every bundled library is named in
``LICENSE`` with its whole licence text, and ``RECORD`` holds the right hash
and size of every file.  It prints one line per bundled library.
"""

import base64
import csv
import hashlib
import io
import os
import re
import sys
import tempfile
import zipfile

LICENSES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "licenses")

# Bundled file name (relative to the wheel's root) -> its licence text.
RUNTIMES = [
    (re.compile(r"^cropgrad\.libs/libgomp[-.][^/]*\.so[.0-9]*$"), "libgomp.txt"),
    (re.compile(r"^cropgrad/\.dylibs/libomp\.dylib$"), "libomp.txt"),
]
# Where the repair tools put the libraries they bundle.
BUNDLED = re.compile(r"^(cropgrad\.libs/|cropgrad/\.dylibs/)[^/]+$")


def _licence_text(filename):
    with open(os.path.join(LICENSES, filename), encoding="utf-8") as f:
        return f.read()


_HEADER = "----- Bundled with this wheel: "


def _header(name):
    return f"{_HEADER}{name} -----"


def _licence_path(names):
    found = [n for n in names if re.fullmatch(r"[^/]+\.dist-info/licenses/LICENSE", n)]
    if len(found) != 1:
        raise SystemExit(f"expected one .dist-info/licenses/LICENSE, found {found}")
    return found[0]


def bundled_licences(names):
    """[(bundled file, licence file)] for a wheel's entries; error if unknown."""
    result, unknown = [], []
    for name in sorted(n for n in names if BUNDLED.match(n)):
        licence = next((lic for pat, lic in RUNTIMES if pat.match(name)), None)
        if licence is None:
            unknown.append(name)
        else:
            result.append((name, licence))
    if unknown:
        raise SystemExit(
            "no licence known for bundled "
            + ", ".join(unknown)
            + ": add its text to wheels/licenses/ and a pattern to RUNTIMES in "
            + os.path.basename(__file__)
        )
    return result


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return [name, f"sha256={digest.decode()}", str(len(data))]


def add_licences(wheel):
    """Append the bundled libraries' licences to `wheel`'s LICENSE, in place."""
    with zipfile.ZipFile(wheel) as zin:
        infos = zin.infolist()
        contents = {info.filename: zin.read(info) for info in infos}
    names = list(contents)
    bundled = bundled_licences(names)
    licence_name = _licence_path(names)
    text = contents[licence_name].decode("utf-8")
    added = []
    for name, licence in bundled:
        if _header(name) in text:
            continue
        text = text.rstrip("\n") + f"\n\n\n{_header(name)}\n\n" + _licence_text(licence)
        added.append(name)
    if not added:
        print(f"{os.path.basename(wheel)}: nothing to add ({len(bundled)} bundled)")
        return
    contents[licence_name] = text.encode("utf-8")

    record_name = next(n for n in names if n.endswith(".dist-info/RECORD"))
    rows = list(csv.reader(io.StringIO(contents[record_name].decode("utf-8"))))
    for i, row in enumerate(rows):
        if row and row[0] == licence_name:
            rows[i] = _record_line(licence_name, contents[licence_name])
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    contents[record_name] = out.getvalue().encode("utf-8")

    # Same entries, order, dates and compression; written next to the wheel
    # and moved over it, so a failure leaves the original.
    fd, tmp = tempfile.mkstemp(
        suffix=".whl", dir=os.path.dirname(os.path.abspath(wheel))
    )
    os.close(fd)
    try:
        with zipfile.ZipFile(tmp, "w") as zout:
            for info in infos:
                zout.writestr(info, contents[info.filename])
        os.replace(tmp, wheel)
    except BaseException:
        os.unlink(tmp)
        raise
    for name in added:
        print(f"{os.path.basename(wheel)}: added the licence of {name}")


def check(wheel):
    """Problems with `wheel`'s licences and RECORD (an empty list if none)."""
    problems = []
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        contents = {n: z.read(n) for n in names}
    bundled = bundled_licences(names)
    text = contents[_licence_path(names)].decode("utf-8")
    if "BSD" not in text.split(_HEADER)[0]:
        problems.append("LICENSE does not start with cropgrad's own licence")
    for name, licence in bundled:
        if _header(name) not in text:
            problems.append(f"LICENSE does not name {name}")
        elif _licence_text(licence).strip() not in text:
            problems.append(f"LICENSE lacks the full text of {licence} for {name}")
        else:
            print(f"{os.path.basename(wheel)}: {name}: {licence} in LICENSE")
    record_name = next(n for n in names if n.endswith(".dist-info/RECORD"))
    recorded = {
        row[0]: row
        for row in csv.reader(io.StringIO(contents[record_name].decode("utf-8")))
        if row
    }
    for name in names:
        if name == record_name or name.endswith("/"):  # RECORD lists files only
            continue
        if recorded.get(name) != _record_line(name, contents[name]):
            problems.append(f"RECORD has a wrong hash or size for {name}")
    if not bundled:
        problems.append("the wheel bundles no OpenMP runtime (not repaired?)")
    return problems


def _wheels(paths):
    for path in paths:
        if os.path.isdir(path):
            found = sorted(
                os.path.join(path, n) for n in os.listdir(path) if n.endswith(".whl")
            )
            if not found:
                raise SystemExit(f"no wheel in {path}")
            yield from found
        else:
            yield path


def main(argv):
    checking = argv[:1] == ["--check"]
    paths = argv[1:] if checking else argv
    if not paths:
        raise SystemExit(__doc__.split("\n\n")[1])
    failed = False
    for wheel in _wheels(paths):
        if checking:
            for problem in check(wheel):
                print(f"{os.path.basename(wheel)}: {problem}", file=sys.stderr)
                failed = True
        else:
            add_licences(wheel)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

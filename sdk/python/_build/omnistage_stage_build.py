"""The PEP 517 build backend of the omnistage_stage package, standard
library only, so that pip builds the package without downloading a build
backend (setuptools in a fresh virtualenv needs the wheel package, which
one does not have; flit and hatch are not there either). It builds a
wheel of the pure-Python package omnistage_stage/ and an sdist of the
project, from the [project] table of pyproject.toml (name, version,
description, readme, requires-python)."""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "omnistage_stage"
# ZIP_DATE stamps every file of a build, so that a build is reproducible.
ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def project():
    """Returns the [project] table of pyproject.toml."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        text = f.read().decode("utf-8")
    try:
        import tomllib  # Python 3.11 and later
    except ImportError:
        return parse_project(text)
    return tomllib.loads(text)["project"]


def parse_project(text):
    """Returns the [project] table of text, the pyproject.toml of this
    project: keys each on a line of its own, with a basic string or an
    empty array for a value (what tomllib reads, for Pythons before 3.11)."""
    table, inside = {}, False
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            inside = line == "[project]"
            continue
        if not inside:
            continue
        m = re.fullmatch(r'([A-Za-z0-9_-]+)\s*=\s*("(?:[^"\\]|\\.)*"|\[\])', line)
        if m is None:
            raise ValueError("pyproject.toml: [project]: cannot read %r" % line)
        value = m.group(2)
        table[m.group(1)] = [] if value == "[]" else value[1:-1].encode().decode("unicode_escape")
    return table


def names():
    """Returns the project's name, the name of its files (normalized, PEP
    427 and 625) and its version."""
    p = project()
    return p["name"], re.sub(r"[-_.]+", "_", p["name"]).lower(), p["version"]


def metadata():
    """Returns the core metadata (METADATA, PKG-INFO) of the project."""
    p = project()
    lines = ["Metadata-Version: 2.1", "Name: " + p["name"], "Version: " + p["version"]]
    if p.get("description"):
        lines.append("Summary: " + p["description"])
    if p.get("requires-python"):
        lines.append("Requires-Python: " + p["requires-python"])
    body = ""
    if p.get("readme"):
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(ROOT, p["readme"]), encoding="utf-8") as f:
            body = "\n" + f.read()
    return "\n".join(lines) + "\n" + body


def wheel_info():
    return "Wheel-Version: 1.0\nGenerator: omnistage_stage_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def package_files():
    """Returns the package's files, paths relative to the project's root,
    sorted."""
    out = []
    for name in sorted(os.listdir(os.path.join(ROOT, PACKAGE))):
        if name.endswith(".py"):
            out.append(PACKAGE + "/" + name)
    return out


def read(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        return f.read()


def digest(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")


def add(z, path, data):
    info = zipfile.ZipInfo(path, ZIP_DATE)
    info.external_attr = 0o644 << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    z.writestr(info, data)


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    _, dist, version = names()
    info = "%s-%s.dist-info" % (dist, version)
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    for name, text in (("METADATA", metadata()), ("WHEEL", wheel_info())):
        with open(os.path.join(metadata_directory, info, name), "w", encoding="utf-8") as f:
            f.write(text)
    return info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _, dist, version = names()
    info = "%s-%s.dist-info" % (dist, version)
    files = [(path, read(path)) for path in package_files()]
    files += [(info + "/METADATA", metadata().encode("utf-8")), (info + "/WHEEL", wheel_info().encode("ascii"))]
    record = "".join("%s,%s,%d\n" % (path, digest(data), len(data)) for path, data in files)
    record += info + "/RECORD,,\n"
    name = "%s-%s-py3-none-any.whl" % (dist, version)
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for path, data in files:
            add(z, path, data)
        add(z, info + "/RECORD", record.encode("utf-8"))
    return name


def build_sdist(sdist_directory, config_settings=None):
    _, dist, version = names()
    base = "%s-%s" % (dist, version)
    files = ["pyproject.toml", "README.md", "_build/omnistage_stage_build.py"] + package_files()
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        entries = [(base + "/" + path, read(path)) for path in files]
        entries.append((base + "/PKG-INFO", metadata().encode("utf-8")))
        for path, data in entries:
            ti = tarfile.TarInfo(path)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 0
            tar.addfile(ti, io.BytesIO(data))
    return name

"""The package's build backend (_build/omnistage_stage_build.py), called
as pip calls it: a wheel and an sdist of the package, offline."""

import base64
import hashlib
import os
import sys
import tarfile
import tempfile
import unittest
import zipfile

from runtime import SDK

sys.path.insert(0, os.path.join(SDK, "_build"))
import omnistage_stage_build as backend  # noqa: E402


class TestBuild(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(lambda: __import__("shutil").rmtree(self.dir))

    def test_wheel(self):
        self.assertEqual(backend.get_requires_for_build_wheel(), [])
        name = backend.build_wheel(self.dir)
        self.assertEqual(name, "omnistage_stage-1.0.0-py3-none-any.whl")
        with zipfile.ZipFile(os.path.join(self.dir, name)) as z:
            files = set(z.namelist())
            for f in ("omnistage_stage/__init__.py", "omnistage_stage/job.py", "omnistage_stage/speech.py"):
                self.assertIn(f, files)
            self.assertFalse([f for f in files if "tests/" in f or "_build" in f or "pycache" in f], files)
            meta = z.read("omnistage_stage-1.0.0.dist-info/METADATA").decode()
            for line in ("Name: omnistage-stage", "Version: 1.0.0", "Requires-Python: >=3.9"):
                self.assertIn(line + "\n", meta)
            self.assertIn("Root-Is-Purelib: true", z.read("omnistage_stage-1.0.0.dist-info/WHEEL").decode())
            record = z.read("omnistage_stage-1.0.0.dist-info/RECORD").decode().splitlines()
            self.assertEqual(len(record), len(files))
            for line in record:
                path, h, size = line.rsplit(",", 2)
                if path.endswith("RECORD"):
                    self.assertEqual((h, size), ("", ""))
                    continue
                data = z.read(path)
                want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                self.assertEqual((h, int(size)), (want, len(data)), path)

    def test_metadata(self):
        info = backend.prepare_metadata_for_build_wheel(self.dir)
        self.assertEqual(info, "omnistage_stage-1.0.0.dist-info")
        with open(os.path.join(self.dir, info, "METADATA")) as f:
            self.assertIn("Name: omnistage-stage\n", f.read())

    def test_sdist(self):
        name = backend.build_sdist(self.dir)
        self.assertEqual(name, "omnistage_stage-1.0.0.tar.gz")
        with tarfile.open(os.path.join(self.dir, name)) as tar:
            files = set(tar.getnames())
        for f in ("pyproject.toml", "README.md", "PKG-INFO", "_build/omnistage_stage_build.py", "omnistage_stage/server.py"):
            self.assertIn("omnistage_stage-1.0.0/" + f, files)

    def test_project_without_tomllib(self):
        with open(os.path.join(SDK, "pyproject.toml"), encoding="utf-8") as f:
            parsed = backend.parse_project(f.read())
        self.assertEqual((parsed["name"], parsed["version"], parsed["requires-python"]), ("omnistage-stage", "1.0.0", ">=3.9"))
        if sys.version_info >= (3, 11):
            self.assertEqual(parsed, backend.project())


if __name__ == "__main__":
    unittest.main()

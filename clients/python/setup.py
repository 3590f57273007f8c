"""The build step setuptools cannot be told in pyproject.toml: generating the `airlock.v1`
stubs from the protos, beside the library, every time the package is built.

The protos are found in $AIRLOCK_PROTO_DIR, else in the checkout this package sits in
(../../proto). The stubs go straight into the build directory: `airlock/v1/*_pb2.py` and
`*_pb2_grpc.py` by grpcio-tools' protoc, their `.pyi` type stubs by mypy-protobuf, and a
`py.typed` marker so that type checkers read them.
"""

import os
import pathlib
import shutil
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = pathlib.Path(__file__).resolve().parent


def proto_dir() -> pathlib.Path:
    given = os.environ.get("AIRLOCK_PROTO_DIR")
    root = pathlib.Path(given) if given else HERE.parent.parent / "proto"
    if not (root / "airlock" / "v1").is_dir():
        raise SystemExit(
            f"airlock-client: no protos in {root}/airlock/v1; build from an airlock checkout "
            "or set AIRLOCK_PROTO_DIR to its proto/ directory"
        )
    return root


class BuildWithStubs(build_py):
    def run(self) -> None:
        super().run()
        from grpc_tools import protoc

        root = proto_dir()
        out = pathlib.Path(self.build_lib)
        target = out / "airlock" / "v1"
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        # protoc-gen-mypy and protoc-gen-mypy_grpc are scripts beside this interpreter.
        bindir = pathlib.Path(sys.executable).parent
        os.environ["PATH"] = f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"
        protos = sorted(str(p) for p in (root / "airlock" / "v1").glob("*.proto"))
        args = [
            "grpc_tools.protoc",
            f"-I{root}",
            f"--python_out={out}",
            f"--grpc_python_out={out}",
            f"--mypy_out={out}",
            f"--mypy_grpc_out={out}",
            *protos,
        ]
        if protoc.main(args) != 0:
            raise SystemExit("airlock-client: protoc failed on " + " ".join(protos))
        for package in (out / "airlock", target):
            (package / "__init__.py").write_text('"""Generated from airlock\'s protos."""\n')
            (package / "py.typed").write_text("")


setup(cmdclass={"build_py": BuildWithStubs})

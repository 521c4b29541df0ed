# lit configuration for spmd's IR tests: every .mlir file is a test; spmd-opt, FileCheck and
# not are on PATH.
import os
import lit.formats

config.name = "spmd"
config.test_format = lit.formats.ShTest(True)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.environment["PATH"] = os.pathsep.join(
    [config.spmd_opt_dir, config.llvm_tools_dir, config.environment.get("PATH", os.environ["PATH"])])

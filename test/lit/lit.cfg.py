# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "HELM"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.helm_obj_root, "test", "lit")

config.substitutions.append(("%models", os.path.join(config.helm_src_root, "test", "models")))
config.substitutions.append(("%python", config.python_executable))

llvm_config.use_default_substitutions()
tool_dirs = [config.helm_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(["helm-opt", "helmc", "helm-profile", "helm-rt", "FileCheck", "not", "count"], tool_dirs)

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


def unpack_shape_only_models():
    """The shape-only models (test/models/shape-only/<name>/model.onnx.xz, real-size graphs without
    weights) unpacked into the build tree, once per change of the compressed file; their folder."""
    import lzma
    import shutil
    src = os.path.join(config.helm_src_root, "test", "models", "shape-only")
    dst = os.path.join(config.test_exec_root, "shape-only")
    for name in sorted(os.listdir(src)):
        packed = os.path.join(src, name, "model.onnx.xz")
        if not os.path.isfile(packed):
            continue
        out_dir = os.path.join(dst, name)
        out = os.path.join(out_dir, "model.onnx")
        os.makedirs(out_dir, exist_ok=True)
        shutil.copyfile(os.path.join(src, name, "config.json"), os.path.join(out_dir, "config.json"))
        if os.path.exists(out) and os.path.getmtime(out) >= os.path.getmtime(packed):
            continue
        with open(packed, "rb") as f:
            data = lzma.decompress(f.read())
        tmp = "%s.%d.tmp" % (out, os.getpid())  # lit may configure in several processes at once
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, out)
    return dst


config.substitutions.append(("%shape_only", unpack_shape_only_models()))

llvm_config.use_default_substitutions()
tool_dirs = [config.helm_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(["helm-opt", "helmc", "helm-profile", "helm-rt", "FileCheck", "not", "count"], tool_dirs)

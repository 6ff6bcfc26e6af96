#!/usr/bin/env python3
"""Puts a target profile on an MLIR module as `helm.target`, the way helmc's planModule does.

  add_target.py PLAN.json < module.mlir > with-target.mlir

PLAN.json is `helmc --emit=plan-json` output; its "target" object is the profile (the JSON schema of
docs/target-profile.md). It is written as the dialect's `#helm.target<...>` attribute: the profile's
fields by the same names, the GPU's backend `emu` for an `emu:` target and `cuda` otherwise.
"""
import json
import sys


def mlir_string(text):
    out = []
    for ch in text:
        if ch == '"' or ch == '\\' or ord(ch) < 0x20 or ord(ch) > 0x7e:
            out.extend('\\%02X' % b for b in ch.encode("utf-8"))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def number(value):
    # repr() of a Python float reads back bit-identical; MLIR needs a '.' in a float literal.
    text = repr(float(value))
    if "." not in text:
        mantissa, _, exponent = text.partition("e")
        text = mantissa + ".0" + ("e" + exponent if exponent else "")
    return text


def fields(obj, names):
    return ", ".join("%s = %s" % (name, number(obj[name])) for name in names)


def target_attr(target):
    cpu = target["cpu"]
    parts = ["name = %s" % mlir_string(target.get("name", "target")),
             "source = %s" % mlir_string(target.get("source", "")),
             "cpu = #helm.cpu<name = %s, %s, cores = %d>" % (
                 mlir_string(cpu.get("name", "")),
                 fields(cpu, ["dram_bw_gbs", "l3_bytes", "l3_bw_gbs", "p_dec_gflops", "p_pre_gflops",
                              "ram_bytes", "overhead_ms_per_block"]),
                 int(cpu.get("cores", 0)))]
    gpu = target.get("gpu")
    if gpu:
        backend = "emu" if target.get("name", "").startswith("emu:") else "cuda"
        parts.append("gpu = #helm.gpu<name = %s, backend = %s, %s>" % (
            mlir_string(gpu.get("name", "")), backend,
            fields(gpu, ["vram_bytes", "reserved_bytes", "mem_bw_gbs", "p_dec_gflops", "p_pre_gflops",
                         "overhead_ms_per_block"])))
        parts.append("link = #helm.link<%s>" % fields(target["link"], ["bw_gbs", "latency_us"]))
    parts.append(fields(target, ["eta_c", "eta_m"]))
    return "#helm.target<%s>" % ", ".join(parts)


def main():
    plan = json.load(open(sys.argv[1]))
    attr = "helm.target = " + target_attr(plan["target"])
    text = sys.stdin.read()
    marker = "module attributes {"
    if marker not in text:
        sys.exit("add_target.py: no 'module attributes {' in the input")
    sys.stdout.write(text.replace(marker, marker + attr + ", ", 1))


if __name__ == "__main__":
    main()

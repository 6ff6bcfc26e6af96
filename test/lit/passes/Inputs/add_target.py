#!/usr/bin/env python3
"""Puts a target profile on an MLIR module as `helm.target`, the way helmc's planModule does.

  add_target.py PLAN.json < module.mlir > with-target.mlir

PLAN.json is `helmc --emit=plan-json` output; its "target" object is the profile. The attribute is
{name, profile = <the profile as JSON>}, with the string escaped as MLIR prints strings.
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


def main():
    plan = json.load(open(sys.argv[1]))
    target = plan["target"]
    attr = "helm.target = {name = %s, profile = %s}" % (mlir_string(target.get("name", "target")),
                                                         mlir_string(json.dumps(target)))
    text = sys.stdin.read()
    marker = "module attributes {"
    if marker not in text:
        sys.exit("add_target.py: no 'module attributes {' in the input")
    sys.stdout.write(text.replace(marker, marker + attr + ", ", 1))


if __name__ == "__main__":
    main()

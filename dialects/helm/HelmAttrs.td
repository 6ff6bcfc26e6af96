//===- HelmAttrs.td - HELM enums and attributes -----------------*- tablegen -*-===//
#ifndef HELM_ATTRS_TD
#define HELM_ATTRS_TD

include "HelmDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Helm_UnitKind : I32EnumAttr<"UnitKind", "kind of partition unit", [
    I32EnumAttrCase<"embedding", 0>,
    I32EnumAttrCase<"block", 1>,
    I32EnumAttrCase<"head", 2>]> {
  let cppNamespace = "::helm";
}

def Helm_RopeStyle : I32EnumAttr<"RopeStyle", "how rotary embedding pairs the channels", [
    // (x[i], x[i + d/2]) pairs, `rotate_half` in Hugging Face models.
    I32EnumAttrCase<"half", 0>,
    // (x[2i], x[2i + 1]) pairs, GPT-J style.
    I32EnumAttrCase<"interleaved", 1>]> {
  let cppNamespace = "::helm";
  let genSpecializedAttr = 0;
}
def Helm_RopeStyleAttr : EnumAttr<Helm_Dialect, Helm_RopeStyle, "rope_style"> {
  let assemblyFormat = "`<` $value `>`";
}

def Helm_Device : I32EnumAttr<"Device", "device a stage runs on", [
    I32EnumAttrCase<"cpu", 0>,
    I32EnumAttrCase<"gpu", 1>]> {
  let cppNamespace = "::helm";
}

#endif // HELM_ATTRS_TD
